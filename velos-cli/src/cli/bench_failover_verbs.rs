//! `velos bench failover --backend verbs`: Velos and the Mu baseline crashed side by side
//! on a real RDMA device (`velos_bench::failover::verbs`), in a build with the `verbs`
//! feature; without it, a usage error that says how to build one.

use std::process::ExitCode;
use velos_bench::latency::Protocol;

/// `velos bench failover --backend verbs`'s options (`bench_failover_verbs.rs`).
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
pub struct VerbsWanted {
    pub protocols: Option<Vec<Protocol>>,
    pub trials: Option<u32>,
    pub time_scale: Option<u64>,
    pub value_bytes: Option<u32>,
    pub json: bool,
}

#[cfg(feature = "verbs")]
pub(super) fn run(wanted: &VerbsWanted) -> ExitCode {
    use super::report::Job;
    use velos_bench::failover::verbs::{self, VerbsFailoverConfig, VerbsFailoverReport};
    let mut config = VerbsFailoverConfig::full();
    if let Some(p) = &wanted.protocols {
        config.protocols.clone_from(p);
    }
    config.trials = wanted.trials.unwrap_or(config.trials);
    config.time_scale = wanted.time_scale.unwrap_or(config.time_scale);
    config.value_bytes = wanted.value_bytes.unwrap_or(config.value_bytes);
    let config = config
        .check()
        .map(|()| config)
        .map_err(|e| format!("{e:#}"));
    let job = Job {
        name: "failover",
        run: verbs::run,
        write: |_: &VerbsFailoverReport, _| Ok(()),
        missing_premises: VerbsFailoverReport::missing_premises,
        text: &verbs::table,
    };
    job.main(config, None, wanted.json)
}

#[cfg(not(feature = "verbs"))]
pub(super) fn run(_wanted: &VerbsWanted) -> ExitCode {
    eprintln!(
        "bench failover --backend verbs: this build of velos has no RDMA backend: rebuild \
         with `cargo build --release --features verbs`"
    );
    ExitCode::from(2)
}
