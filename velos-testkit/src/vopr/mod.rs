//! `velos vopr`: a seeded fault-injection campaign on the simulator, after TigerBeetle's
//! VOPR. Each seed picks a cluster (3 or 5 replicas), a key-value workload, a latency
//! profile with jitter and a fault schedule ([`Scenario`]); the run has a safety phase
//! with the faults, then a liveness phase without new ones in which every client
//! operation must complete ([`run`]); then every checker of [`crate::check`] runs, the
//! linearizability of the clients' history among them. A violation names its seed and
//! the command that replays it.

mod clients;
mod gaps;
pub mod kv;
mod mutants;
mod power;
mod run;
mod scenario;
mod services;

pub use power::PowerReport;
pub use run::{RunReport, run};

pub use scenario::{FaultPlan, PowerPlan, Scenario};
pub use velos_core::slot::Mutation;
/// The deliberately wrong variants of the durable point (`--power-loss`).
pub use velos_store::quorum::Mutation as DiskMutation;

/// The campaign's optional modes, each a flag of `velos vopr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Modes {
    /// `--overflow`: one seed in four starts every slot near the overflow threshold.
    pub overflow: bool,
    /// `--submit`: clients submit commands, gathered into batch entries
    /// ([`Scenario::submit`]).
    pub submit: bool,
    /// `--power-loss`: every replica persists on a simulated disk, and the whole cluster
    /// loses power once and restarts from disk ([`Scenario::power`]).
    pub power_loss: bool,
    /// A deliberately wrong variant of the durable point (with `power_loss`).
    pub disk_mutation: DiskMutation,
}

impl Modes {
    /// The flags that select these modes, each with a leading space.
    pub fn flags(self) -> String {
        let mut out = String::new();
        if self.overflow {
            out += " --overflow";
        }
        if self.submit {
            out += " --submit";
        }
        if self.power_loss {
            out += " --power-loss";
        }
        out
    }
}

/// The command that replays seed `seed` (and writes its history) in `modes`.
pub fn replay_command(seed: u64, modes: Modes) -> String {
    format!(
        "cargo run --release -- vopr{} --seeds {seed}..{} --history-out history-{seed}.jsonl",
        modes.flags(),
        seed + 1
    )
}

/// Runs seed `seed`.
pub fn run_seed(seed: u64) -> RunReport {
    run_mutant(seed, Mutation::None, Modes::default())
}

/// Runs seed `seed` with the deliberately wrong protocol variant `mutation` (`None`:
/// the algorithm), in `modes`. A panic of the run — a broken invariant — is a violation
/// of its own.
pub fn run_mutant(seed: u64, mutation: Mutation, modes: Modes) -> RunReport {
    let mut scenario = Scenario::with_overflow(seed, modes.overflow);
    scenario.submit = modes.submit;
    scenario.log.mutation = mutation;
    if modes.power_loss {
        let plan = PowerPlan::draw(seed, scenario.log.replicas, scenario.safety_ns);
        scenario.power = Some(PowerPlan {
            mutation: modes.disk_mutation,
            ..plan
        });
    }
    let replicas = scenario.log.replicas;
    let faults = scenario.faults.len();
    std::panic::catch_unwind(move || run(&scenario)).unwrap_or_else(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into());
        RunReport {
            seed,
            replicas,
            faults,
            faults_applied: [0, 0],
            operations: [0, 0],
            entries: 0,
            batched_entries: 0,
            crashed_after_join: false,
            longest_gap: (0, 0),
            gap_visits: 0,
            end_ns: 0,
            violations: vec![format!("invariant: the run panicked: {message}")],
            history: Vec::new(),
            power: None,
        }
    })
}

/// Whether a violation is of a safety property (not liveness, nor a missing premise).
pub fn is_safety(violation: &str) -> bool {
    !violation.starts_with("liveness:") && !violation.starts_with("premise:")
}

/// The replay command of seed `seed` of mutant `name` in `modes`.
pub fn replay_mutant_command(seed: u64, name: &str, modes: Modes) -> String {
    format!(
        "cargo run --release --features mutants -- vopr --mutant {name}{} --seeds {seed}..{}",
        modes.flags(),
        seed + 1
    )
}
