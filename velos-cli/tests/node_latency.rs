//! Decision latency of a `velos node` cluster over real RDMA: three processes, node 0
//! leads and proposes `VALUES` values one at a time (`--client closed-loop`), each once
//! the previous is decided; it reports the latency from proposal to decision. The test
//! checks that every value was decided, in node 0's log in order and on the followers
//! too, and prints the summary line the soft-RoCE harness sets next to `ib_atomic_lat`:
//!
//! `decision latency: count N p50 X us p90 X us p99 X us max X us; R work requests per
//! decision, B doorbells per decision`
//!
//! Skips without an RDMA device unless `VELOS_REQUIRE_RDMA=1` (see `node_procs`).
#![cfg(feature = "verbs")]

mod node_procs;

use node_procs::{Node, assert_gap_free, cluster_file, device_present, wait_for};
use std::sync::Arc;
use std::time::Duration;

/// Values node 0 proposes, one at a time. `VELOS_LATENCY_VALUES` overrides it.
const VALUES: u64 = 1000;
/// How long the cluster may take to connect and decide them all (TCG emulation is slow).
const WITHIN: Duration = Duration::from_secs(300);

#[test]
fn a_leader_decides_values_one_at_a_time_and_reports_its_latency() {
    if !device_present() {
        return;
    }
    let values: u64 = std::env::var("VELOS_LATENCY_VALUES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(VALUES);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = cluster_file(dir.path(), "node-latency-test");
    let count = values.to_string();
    let mut n0 = Node::spawn(&config, 0, &["--client", "closed-loop", "--values", &count]);
    let mut n1 = Node::spawn(&config, 1, &["--values", "0"]);
    let mut n2 = Node::spawn(&config, 2, &["--values", "0"]);
    let reports = Arc::clone(&n0.reports);
    let summary = || {
        reports
            .lock()
            .unwrap()
            .iter()
            .find_map(|r| r.get("latency").cloned())
    };
    wait_for(
        &mut [&mut n0, &mut n1, &mut n2],
        WITHIN,
        "node 0's latency summary",
        || summary().is_some(),
    );
    let latency = summary().expect("reported");
    let field = |name: &str| latency[name].as_f64().expect("a number");
    let per_decision = |name: &str| {
        latency[name]
            .as_f64()
            .map_or("?".into(), |r| format!("{r:.1}"))
    };
    // Let the followers catch up with the last decisions, then stop everyone.
    let target = n0.entries().len();
    let (e1, e2) = (Arc::clone(&n1.entries), Arc::clone(&n2.entries));
    wait_for(
        &mut [&mut n0, &mut n1, &mut n2],
        Duration::from_secs(60),
        "the followers to apply node 0's entries",
        || e1.lock().unwrap().len() >= target && e2.lock().unwrap().len() >= target,
    );
    let logs = [n0.kill(), n1.kill(), n2.kill()];
    for (id, log) in logs.iter().enumerate() {
        assert_gap_free(id as u16, log);
    }
    for (i, log) in logs.iter().enumerate().skip(1) {
        for (x, y) in logs[0].iter().zip(log) {
            assert_eq!(
                x.value, y.value,
                "nodes 0 and {i} disagree on slot {}",
                x.slot
            );
        }
    }
    let own = logs[0].iter().filter(|e| e.proposer() == Some(0)).count();
    assert_eq!(
        field("count") as u64,
        values,
        "every value's latency was measured"
    );
    assert!(
        own as u64 >= values,
        "node 0's log has {own} of its {values} values"
    );
    assert!(field("p50_us") > 0.0 && field("p50_us") <= field("p99_us"));
    println!(
        "decision latency: count {} p50 {:.1} us p90 {:.1} us p99 {:.1} us max {:.1} us; \
         {} work requests per decision, {} doorbells per decision",
        values,
        field("p50_us"),
        field("p90_us"),
        field("p99_us"),
        field("max_us"),
        per_decision("requests_per_decision"),
        per_decision("doorbells_per_decision"),
    );
}
