//! What the embedding benchmark reports: per system the medians over the repeats, the
//! ratios, the targets (reported, never asserted) and every run.

use super::{EmbedConfig, RunResult, SubmitRun, System, Workload};
use serde::Serialize;
use std::collections::BTreeMap;

/// One system over every repeat: medians.
#[derive(Clone, Debug, Serialize)]
pub struct SystemSummary {
    /// The system's name.
    pub system: &'static str,
    /// Commits per second, one client (unbatched closed loop).
    pub commits_per_s_1client: f64,
    /// Commits per second, many clients (`outstanding` commands in flight).
    pub commits_per_s_many: f64,
    /// Commands committed per second, many clients, `batch` commands per log entry.
    pub commits_per_s_batched: f64,
    /// The engine's CPU time per decision, one client (ns): what `cpu_ns_per_decision_basis`
    /// says.
    pub cpu_ns_per_decision: f64,
    /// How `cpu_ns_per_decision` is measured.
    pub cpu_ns_per_decision_basis: &'static str,
    /// The same with many clients (ns).
    pub cpu_ns_per_decision_many: f64,
    /// The engine's CPU time per command with many clients (ns): one command per entry,
    /// so `cpu_ns_per_decision_many` again, under the name the batched figure shares.
    pub cpu_ns_per_command_many: f64,
    /// The engine's CPU time per command with many clients, batched (ns).
    pub cpu_ns_per_command_batched: f64,
    /// The leader's thread CPU time per command, batched (ns).
    pub leader_thread_cpu_ns_per_command_batched: f64,
    /// Velos: the in-process NIC's CPU time per decision, one client (ns): the leader's
    /// operations of the window executed again on a fresh fabric, apart from the engine —
    /// the leader's thread's share a real NIC takes over. `None` for OmniPaxos, whose
    /// messages move by value (one thread) or over channels (threads), not measured apart.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nic_cpu_ns_per_decision: Option<f64>,
    /// The same with many clients (ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nic_cpu_ns_per_decision_many: Option<f64>,
    /// The same per command, batched (ns).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nic_cpu_ns_per_command_batched: Option<f64>,
    /// The leader's thread (engine, backend, client) CPU time per decision, one client (ns).
    pub leader_thread_cpu_ns_per_decision: f64,
    /// The same with many clients (ns).
    pub leader_thread_cpu_ns_per_decision_many: f64,
    /// The whole process's CPU time per decision, one client (ns).
    pub process_cpu_ns_per_decision: f64,
    /// The same with many clients (ns).
    pub process_cpu_ns_per_decision_many: f64,
    /// Commit latency of the one-client runs, median of the runs' medians (ns).
    pub latency_p50_ns_1client: u64,
    /// The same, median of the runs' 99th percentiles (ns).
    pub latency_p99_ns_1client: u64,
    /// Counts per decision, one client (medians): Velos's leader's operations by kind,
    /// OmniPaxos's messages.
    pub per_decision_1client: BTreeMap<String, f64>,
    /// The same with many clients.
    pub per_decision_many: BTreeMap<String, f64>,
    /// The same per command, batched.
    pub per_command_batched: BTreeMap<String, f64>,
    /// `Cluster::submit` round trip from a client thread, one client, median of the
    /// repeats' medians (µs); Velos only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submit_p50_us: Option<f64>,
    /// The same, median of the repeats' 99th percentiles (µs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub submit_p99_us: Option<f64>,
}

/// A target, reported, never asserted.
#[derive(Clone, Debug, Serialize)]
pub struct TargetCheck {
    /// What is measured.
    pub name: String,
    /// The measured value.
    pub value: f64,
    /// The bound.
    pub bound: f64,
    /// Whether the value is within the bound.
    pub met: bool,
}

/// The report of `velos bench embed`.
#[derive(Clone, Debug, Serialize)]
pub struct EmbedReport {
    /// What was run.
    pub config: EmbedConfig,
    /// Velos, medians.
    pub velos: SystemSummary,
    /// OmniPaxos, medians.
    pub omnipaxos: SystemSummary,
    /// OmniPaxos with each instance on a thread of its own, medians.
    pub omnipaxos_threads: SystemSummary,
    /// Velos / OmniPaxos commits per second, one client.
    pub ratio_1client: f64,
    /// Velos / OmniPaxos commits per second, many clients.
    pub ratio_many: f64,
    /// Velos / OmniPaxos commands committed per second, many clients, batched.
    pub ratio_batched: f64,
    /// Velos / OmniPaxos on threads: commits per second, one client, many, batched.
    pub ratio_threads: [f64; 3],
    /// The targets of the comparison.
    pub targets: Vec<TargetCheck>,
    /// How to read the numbers.
    pub notes: Vec<String>,
    /// Every run.
    pub runs: Vec<RunResult>,
    /// Every repeat's `Cluster::submit` round trips.
    pub submit_runs: Vec<SubmitRun>,
    /// Wall time of the whole benchmark (s).
    pub wall_seconds: f64,
}

impl EmbedReport {
    /// The report of `runs` (every repeat of both systems and workloads) and of
    /// `submit_runs` (Velos's handle, every repeat).
    pub fn new(
        config: EmbedConfig,
        runs: Vec<RunResult>,
        submit_runs: Vec<SubmitRun>,
        wall_seconds: f64,
    ) -> EmbedReport {
        let mut velos = summary(&runs, System::Velos);
        if !submit_runs.is_empty() {
            let us = |f: fn(&SubmitRun) -> u64| {
                median(submit_runs.iter().map(|r| f(r) as f64 / 1e3).collect())
            };
            velos.submit_p50_us = Some(us(|r| r.p50_ns));
            velos.submit_p99_us = Some(us(|r| r.p99_ns));
        }
        let omnipaxos = summary(&runs, System::OmniPaxos);
        let ratio_1client = velos.commits_per_s_1client / omnipaxos.commits_per_s_1client;
        let ratio_many = velos.commits_per_s_many / omnipaxos.commits_per_s_many;
        let ratio_batched = velos.commits_per_s_batched / omnipaxos.commits_per_s_batched;
        let omnipaxos_threads = summary(&runs, System::OmniPaxosThreads);
        let ratio_threads = [
            velos.commits_per_s_1client / omnipaxos_threads.commits_per_s_1client,
            velos.commits_per_s_many / omnipaxos_threads.commits_per_s_many,
            velos.commits_per_s_batched / omnipaxos_threads.commits_per_s_batched,
        ];
        let targets = vec![
            TargetCheck {
                name: "velos / omnipaxos commits per second, one client (at least)".into(),
                value: ratio_1client,
                bound: 5.0,
                met: ratio_1client >= 5.0,
            },
            TargetCheck {
                name: "velos / omnipaxos on threads, commits per second, one client (at least)"
                    .into(),
                value: ratio_threads[0],
                bound: 2.0,
                met: ratio_threads[0] >= 2.0,
            },
            TargetCheck {
                name: "velos engine CPU ns per decision, one client (at most)".into(),
                value: velos.cpu_ns_per_decision,
                bound: 300.0,
                met: velos.cpu_ns_per_decision <= 300.0,
            },
            TargetCheck {
                name: "velos / omnipaxos commits per second, many clients, batched (at least)"
                    .into(),
                value: ratio_batched,
                bound: 1.0,
                met: ratio_batched >= 1.0,
            },
            TargetCheck {
                name: "velos engine CPU ns per command, many clients, batched (at most)".into(),
                value: velos.cpu_ns_per_command_batched,
                bound: 60.0,
                met: velos.cpu_ns_per_command_batched <= 60.0,
            },
        ];
        EmbedReport {
            notes: notes(&config),
            config,
            velos,
            omnipaxos,
            omnipaxos_threads,
            ratio_1client,
            ratio_many,
            ratio_batched,
            ratio_threads,
            targets,
            runs,
            submit_runs,
            wall_seconds,
        }
    }
}

fn notes(config: &EmbedConfig) -> Vec<String> {
    vec![
        format!(
            "one client: a closed loop, one {}-byte command at a time; many: {} commands \
             outstanding, one command per log entry in both systems; batched: {} outstanding, \
             {} commands per log entry in both (velos: at most, each command submitted and \
             the engine gathering what waits while its pipeline is busy, Replica::submit; \
             omnipaxos: batch_size, a batch handed over when full)",
            super::COMMAND_BYTES,
            config.outstanding,
            config.outstanding,
            config.batch
        ),
        format!(
            "velos: 3 replica threads over the in-process backend, remote operations inline \
             on the posting thread, region plans checked; the client on the leader's thread; \
             pipeline {} slots, followers idle: {:?}",
            config.velos_pipeline, config.velos_follower_idle
        ),
        "omnipaxos: 3 instances with MemoryStorage and the client on one thread, messages \
         moved by value between them"
            .into(),
        "omnipaxos-threads: the same 3 instances, each on a thread of its own (the client on \
         the leader's), messages over crossbeam channels, idle followers spinning then \
         yielding; its cpu_ns_per_decision is the leader's thread"
            .into(),
        "velos submit: Cluster::submit from a client thread on a real velos::embed \
         cluster (Config::new(3), the default backend), one command at a time, each call's \
         wall time"
            .into(),
        "cpu_ns_per_decision: velos, the leader's engine alone (its recorded inputs \
         replayed into a copy of its replica, thread CPU time); omnipaxos, its thread's CPU time \
         (all three instances). process_cpu_*: every thread of the process"
            .into(),
        "nic_cpu_*: velos, the in-process NIC's share of the leader's thread (the window's \
         operations executed again on a fresh inline fabric, thread CPU time), the work a \
         real NIC does; the leader thread's figure holds it besides the engine and the client"
            .into(),
    ]
}

/// The median of `xs` (the mean of the middle two for an even count); 0 if empty.
fn median(mut xs: Vec<f64>) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

fn summary(runs: &[RunResult], system: System) -> SystemSummary {
    let of = |w: Workload| -> Vec<&RunResult> {
        runs.iter()
            .filter(|r| r.system == system && r.workload == w)
            .collect()
    };
    let (one, many) = (of(Workload::One), of(Workload::Many));
    let batched = of(Workload::Batched);
    let med =
        |rs: &[&RunResult], f: fn(&RunResult) -> f64| median(rs.iter().map(|r| f(r)).collect());
    let counts = |rs: &[&RunResult]| -> BTreeMap<String, f64> {
        let Some(first) = rs.first() else {
            return BTreeMap::new();
        };
        first
            .per_decision
            .keys()
            .map(|name| {
                let xs = rs.iter().map(|r| r.per_decision[name]).collect();
                (name.clone(), median(xs))
            })
            .collect()
    };
    let nic = |rs: &[&RunResult]| -> Option<f64> {
        let xs: Option<Vec<f64>> = rs.iter().map(|r| r.nic_cpu_ns_per_decision).collect();
        xs.filter(|xs| !xs.is_empty()).map(median)
    };
    SystemSummary {
        system: system.name(),
        commits_per_s_1client: med(&one, |r| r.commits_per_s),
        commits_per_s_many: med(&many, |r| r.commits_per_s),
        commits_per_s_batched: med(&batched, |r| r.commits_per_s),
        cpu_ns_per_decision: med(&one, |r| r.engine_cpu_ns_per_decision),
        cpu_ns_per_decision_basis: match system {
            System::Velos => "engine: the leader's replica alone, replayed without a backend",
            System::OmniPaxos => "engine: the one thread running all three instances",
            System::OmniPaxosThreads => {
                "the leader's thread: its instance, its channels and the client"
            }
        },
        cpu_ns_per_decision_many: med(&many, |r| r.engine_cpu_ns_per_decision),
        cpu_ns_per_command_many: med(&many, |r| r.engine_cpu_ns_per_decision),
        cpu_ns_per_command_batched: med(&batched, |r| r.engine_cpu_ns_per_decision),
        leader_thread_cpu_ns_per_command_batched: med(&batched, |r| {
            r.leader_thread_cpu_ns_per_decision
        }),
        nic_cpu_ns_per_decision: nic(&one),
        nic_cpu_ns_per_decision_many: nic(&many),
        nic_cpu_ns_per_command_batched: nic(&batched),
        leader_thread_cpu_ns_per_decision: med(&one, |r| r.leader_thread_cpu_ns_per_decision),
        leader_thread_cpu_ns_per_decision_many: med(&many, |r| r.leader_thread_cpu_ns_per_decision),
        process_cpu_ns_per_decision: med(&one, |r| r.process_cpu_ns_per_decision),
        process_cpu_ns_per_decision_many: med(&many, |r| r.process_cpu_ns_per_decision),
        latency_p50_ns_1client: med(&one, |r| r.latency_p50_ns.unwrap_or(0) as f64) as u64,
        latency_p99_ns_1client: med(&one, |r| r.latency_p99_ns.unwrap_or(0) as f64) as u64,
        per_decision_1client: counts(&one),
        per_decision_many: counts(&many),
        per_command_batched: counts(&batched),
        submit_p50_us: None,
        submit_p99_us: None,
    }
}
