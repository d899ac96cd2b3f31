use super::*;

#[test]
fn a_quick_run_measures_every_system_and_replays_velos_exactly() {
    let config = EmbedConfig {
        commits_1client: 300,
        commits_many: 600,
        warmup_commits: 50,
        ..EmbedConfig::quick()
    };
    let report = run(&config, false).unwrap();
    assert_eq!(
        report.runs.len(),
        9,
        "three systems, three workloads, one repeat"
    );
    for r in &report.runs {
        let planned = config.commits(r.workload);
        assert!(r.commits > 0 && r.commits < planned + config.batch(r.workload));
        assert!(r.engine_cpu_ns_per_decision > 0.0, "{r:?}");
        // The NIC's share is Velos's alone, and measured: its operations ran again.
        assert_eq!(
            r.nic_cpu_ns_per_decision.is_some_and(|ns| ns > 0.0),
            r.system == System::Velos,
            "{r:?}"
        );
        assert_eq!(
            r.latency_p50_ns.is_some(),
            r.workload == Workload::One,
            "latencies of one-client runs only"
        );
    }
    assert!(report.ratio_1client > 0.0 && report.ratio_many > 0.0 && report.ratio_batched > 0.0);
    assert!(report.ratio_threads.iter().all(|&r| r > 0.0));
    // Batching took effect: a log entry's six CASes (prepare and accept at three acceptors)
    // shared by the commands of a batch; OmniPaxos's messages likewise.
    let batched = &report.velos.per_command_batched;
    assert!(
        batched["op_remote_atomic"] <= 6.0 / config.batch as f64 + 0.1,
        "{batched:?}"
    );
    assert!(report.omnipaxos.per_command_batched["messages"] > 0.0);
    assert!(report.velos.per_decision_1client["op_remote_atomic"] >= 2.0);
    assert!(report.omnipaxos.per_decision_1client["messages"] > 0.0);
    // On threads, the leader sends and receives messages over its channels (an
    // AcceptDecide out and an Accepted back per follower, at least).
    let threads = &report.omnipaxos_threads.per_decision_1client;
    assert!(threads["leader_messages"] >= 2.0, "{threads:?}");
    assert_eq!(report.submit_runs.len(), 1, "one submit run per repeat");
    assert_eq!(report.submit_runs[0].submits, config.submits);
    assert!(report.velos.submit_p50_us.is_some_and(|p| p > 0.0));
    assert!(
        report.omnipaxos.submit_p50_us.is_none(),
        "a Velos measurement"
    );
}

#[test]
fn a_run_longer_than_the_log_is_refused() {
    let config = EmbedConfig {
        commits_many: 1 << 24,
        ..EmbedConfig::quick()
    };
    assert!(config.check().is_err());
}
