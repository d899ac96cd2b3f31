//! Three `velos node` processes over real RDMA: they decide entries, the leader's process
//! is killed, the survivors elect a new leader and go on deciding. From what the processes
//! printed (one JSON line `{"slot":N,"value":"hex"}` per applied entry), every replica's
//! log is gap-free in slot order, the replicas agree slot by slot, no entry node 0 printed
//! as committed before it died is missing from the survivors' logs, and the survivors
//! applied entries proposed by one of them after the kill.
//!
//! The binary is `VELOS_BIN` when set (the soft-RoCE guest, where the compile-time path does
//! not exist), else cargo's. Without an RDMA device the test prints a skip message and
//! passes, unless `VELOS_REQUIRE_RDMA=1`. `VELOS_RDMA_DEVICE` and `VELOS_RDMA_GID_INDEX`
//! choose the device, as for velos-rdma's tests.
//!
//! Timing: see `node_procs`; the waits below are generous (under TCG emulation the whole
//! test takes a few seconds).
#![cfg(feature = "verbs")]

mod node_procs;

use node_procs::{
    Entry, FAILURE_TIMEOUT, FIRST_COMMIT_WITHIN, NEW_ENTRIES_WITHIN, Node, assert_gap_free,
    cluster_file, device_present, proposed_since, rate, wait_for,
};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LEADER_VALUES: &str = "500";
const SURVIVOR_VALUES: &str = "50000";
/// Node 0 is killed once it has applied this many entries…
const KILL_AFTER_ENTRIES: usize = 300;
/// …or this long after its first, whichever comes first.
const KILL_AFTER_TIME: Duration = Duration::from_secs(20);
/// After the kill, each survivor must apply this many entries proposed by a survivor
/// (within `NEW_ENTRIES_WITHIN`).
const NEW_ENTRIES: usize = 200;

#[test]
fn a_cluster_survives_the_leaders_death_and_loses_nothing_committed() {
    if !device_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = cluster_file(dir.path(), "node-cluster-test");

    let started = Instant::now();
    let mut n0 = Node::spawn(&config, 0, &["--values", LEADER_VALUES]);
    let mut n1 = Node::spawn(&config, 1, &["--values", SURVIVOR_VALUES]);
    let mut n2 = Node::spawn(&config, 2, &["--values", SURVIVOR_VALUES]);

    // Node 0 leads first (Ω: the lowest live id) and decides entries.
    let e0 = Arc::clone(&n0.entries);
    wait_for(
        &mut [&mut n0, &mut n1, &mut n2],
        FIRST_COMMIT_WITHIN,
        "first entry applied by node 0",
        || !e0.lock().unwrap().is_empty(),
    );
    let first = Instant::now();
    println!(
        "node 0 applied its first entry {:.1} s after the start",
        first.duration_since(started).as_secs_f64()
    );
    let e0 = Arc::clone(&n0.entries);
    wait_for(
        &mut [&mut n0, &mut n1, &mut n2],
        KILL_AFTER_TIME + Duration::from_secs(1),
        "entries before the kill",
        || e0.lock().unwrap().len() >= KILL_AFTER_ENTRIES || first.elapsed() >= KILL_AFTER_TIME,
    );
    n1.assert_running("before the kill");
    n2.assert_running("before the kill");
    let log0 = n0.kill();
    let killed = Instant::now();
    let at_kill = [n1.entries().len(), n2.entries().len()];
    println!(
        "killed node 0 after it applied {} entries ({:.0} entries/s); survivors had {:?}",
        log0.len(),
        rate(&log0),
        at_kill
    );
    assert!(
        log0.iter().any(|e| e.proposer() == Some(0)),
        "node 0 led first: some entry it applied is its own"
    );

    // The survivors elect a new leader and decide entries that one of them proposed.
    let (e1, e2) = (Arc::clone(&n1.entries), Arc::clone(&n2.entries));
    let new = |log: &Mutex<Vec<Entry>>| proposed_since(log, killed, &[1, 2]);
    wait_for(
        &mut [&mut n1, &mut n2],
        NEW_ENTRIES_WITHIN,
        "entries proposed by a survivor",
        || new(&e1) >= NEW_ENTRIES && new(&e2) >= NEW_ENTRIES,
    );
    let took = killed.elapsed();
    n1.assert_running("at the end");
    n2.assert_running("at the end");
    let logs = [n1.kill(), n2.kill()];

    // Every log is gap-free; the replicas agree slot by slot.
    assert_gap_free(0, &log0);
    for (i, log) in logs.iter().enumerate() {
        assert_gap_free(i as u16 + 1, log);
    }
    let all = [&log0, &logs[0], &logs[1]];
    for a in 0..3 {
        for b in a + 1..3 {
            for (x, y) in all[a].iter().zip(all[b]) {
                assert_eq!(
                    x.value, y.value,
                    "nodes {a} and {b} disagree on slot {}",
                    x.slot
                );
            }
        }
    }
    // Nothing node 0 applied is lost: both survivors have it, at the same slot.
    for (i, log) in logs.iter().enumerate() {
        assert!(
            log.len() > log0.len(),
            "node {} has {} entries, fewer than the {} node 0 applied",
            i + 1,
            log.len(),
            log0.len()
        );
    }
    // The new leader's entries came after the kill.
    let leader_after: Vec<u16> = logs[0]
        .iter()
        .filter_map(Entry::proposer)
        .filter(|&p| p != 0)
        .collect();
    for (i, log) in logs.iter().enumerate() {
        let after: Vec<Entry> = log.iter().filter(|e| e.at >= killed).cloned().collect();
        let own: Vec<Entry> = after
            .iter()
            .filter(|e| matches!(e.proposer(), Some(1 | 2)))
            .cloned()
            .collect();
        println!(
            "node {}: {} entries, {} at the kill, {} applied after it ({} proposed by a survivor, {:.0} entries/s)",
            i + 1,
            log.len(),
            at_kill[i],
            after.len(),
            own.len(),
            rate(&own)
        );
    }
    println!(
        "take-over: {NEW_ENTRIES} survivor entries on each survivor {:.1} s after the kill (failure timeout {FAILURE_TIMEOUT}); survivor proposers seen: {:?}",
        took.as_secs_f64(),
        {
            let mut p = leader_after.clone();
            p.dedup();
            p
        }
    );
}
