//! The log embedded in one process (threads over the in-process RDMA backend): proposals
//! through the leader, every replica's state machine fed the same entries, typed errors,
//! and a leader crash after which the survivors keep deciding.

use std::time::{Duration, Instant};
use velos::core::log::{LogConfig, ProposeError};
use velos::local::{LocalCluster, StateMachine};

/// Records what it applied.
#[derive(Debug, Default)]
struct Recorder {
    entries: Vec<(u64, Vec<u8>)>,
}

impl StateMachine for Recorder {
    fn apply(&mut self, slot: u64, entry: &[u8]) {
        self.entries.push((slot, entry.to_vec()));
    }
}

/// Timeouts for threads on a shared machine: milliseconds, not microseconds.
fn config() -> LogConfig {
    let mut c = LogConfig::new(3, 2048, 32);
    c.heartbeat_period_ns = 200_000;
    c.failure_timeout_ns = 50_000_000;
    c.detector = velos::core::log::Detector::Fixed; // real threads: OS scheduling gaps
    c.idle_pause_ns = 20_000;
    c.catch_up_after_ns = 2_000_000;
    c
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn same_prefix(a: &[(u64, Vec<u8>)], b: &[(u64, Vec<u8>)]) {
    let n = a.len().min(b.len());
    assert_eq!(a[..n], b[..n], "replicas applied different entries");
}

#[test]
fn replicas_apply_the_same_entries_and_errors_are_typed() {
    let cluster = LocalCluster::start(config(), (0..3).map(|_| Recorder::default()).collect())
        .expect("a valid configuration");
    wait_until("a leader", || {
        (0..3).all(|r| cluster.leader_seen_by(r) == 0)
    });
    let mut slots = Vec::new();
    for i in 0..100u32 {
        let slot = cluster
            .propose(0, format!("entry {i}").into_bytes())
            .wait()
            .expect("the leader decides");
        slots.push(slot);
    }
    assert!(slots.windows(2).all(|w| w[0] < w[1]), "slots increase");
    assert_eq!(
        cluster.propose(1, b"x".to_vec()).wait(),
        Err(ProposeError::NotLeader { leader: 0 })
    );
    assert_eq!(
        cluster.propose(0, vec![0; 33]).wait(),
        Err(ProposeError::ValueTooLarge { len: 33, max: 32 })
    );
    wait_until("followers to catch up", || {
        (0..3).all(|r| cluster.applied(r) >= 100)
    });
    let machines = cluster.shutdown();
    let logs: Vec<&Vec<(u64, Vec<u8>)>> = machines
        .iter()
        .map(|m| &m.as_ref().unwrap().entries)
        .collect();
    for log in &logs {
        assert!(log.len() >= 100);
        assert!(
            log.iter().enumerate().all(|(i, (s, _))| *s == i as u64),
            "no holes"
        );
        same_prefix(logs[0], log);
    }
    for (i, &slot) in slots.iter().enumerate() {
        assert_eq!(logs[0][slot as usize].1, format!("entry {i}").into_bytes());
    }
}

#[test]
fn after_the_leader_crashes_the_survivors_elect_and_decide() {
    let cluster = LocalCluster::start(config(), (0..3).map(|_| Recorder::default()).collect())
        .expect("a valid configuration");
    for i in 0..20u32 {
        cluster
            .submit(format!("before {i}").into_bytes())
            .expect("decided");
    }
    cluster.crash(0);
    wait_until("a new leader", || {
        cluster.leader_seen_by(1) == 1 && cluster.leader_seen_by(2) == 1
    });
    for i in 0..20u32 {
        cluster
            .submit(format!("after {i}").into_bytes())
            .expect("decided by the new leader");
    }
    wait_until("replica 2 to catch up", || {
        cluster.applied(2) >= cluster.applied(1)
    });
    let machines = cluster.shutdown();
    assert!(machines[0].is_none(), "replica 0 crashed");
    let (a, b) = (
        &machines[1].as_ref().unwrap().entries,
        &machines[2].as_ref().unwrap().entries,
    );
    same_prefix(a, b);
    for i in 0..20u32 {
        for log in [a, b] {
            assert!(
                log.iter()
                    .any(|(_, e)| *e == format!("before {i}").into_bytes())
            );
            assert!(
                log.iter()
                    .any(|(_, e)| *e == format!("after {i}").into_bytes())
            );
        }
    }
}
