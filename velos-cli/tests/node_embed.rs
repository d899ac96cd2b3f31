//! Three `velos node --embed` processes over real RDMA: each runs its replica through the
//! embedding handle (`velos::embed::Node`) as a service would, proposing batched commands
//! while it leads. The leader's process is killed; the survivors go on. From what the
//! processes printed (one JSON line per command applied, `{"command": N, "slot": S,
//! "index": I, "value": "hex"}`, and one per proposal committed, `{"proposal": K,
//! "slot": S}`): every process's commands are numbered without gaps, the processes agree
//! command by command, no command is applied twice (a proposal refused unproposed is
//! proposed again, never one whose fate is unknown), every command node 0's handle
//! reported committed before it died is in the survivors' logs, and the survivors apply
//! commands one of them proposed after the kill.
//!
//! Runs like `tests/node_cluster.rs` (`VELOS_BIN`, `VELOS_REQUIRE_RDMA`, the timing of
//! `node_procs`).
#![cfg(feature = "verbs")]

mod node_procs;

use node_procs::{
    Entry, FIRST_COMMIT_WITHIN, NEW_ENTRIES_WITHIN, Node, assert_gap_free, cluster_file,
    device_present, proposed_since, rate, wait_for,
};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const LEADER_VALUES: &str = "500";
const SURVIVOR_VALUES: &str = "50000";
/// Node 0 is killed once it has applied this many commands, or this long after its first.
const KILL_AFTER_COMMANDS: usize = 300;
const KILL_AFTER_TIME: Duration = Duration::from_secs(20);
/// After the kill, each survivor must apply this many commands a survivor proposed
/// (within `NEW_ENTRIES_WITHIN`).
const NEW_COMMANDS: usize = 200;

/// The hex of node `id`'s `n`-th generated 16-byte value.
fn value_hex(id: u16, n: u64) -> String {
    velos_cli::node::client::generated_value(id, n, 16)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[test]
fn embedded_nodes_survive_the_leaders_death_and_lose_no_acknowledged_command() {
    if !device_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = cluster_file(dir.path(), "node-embed-test");
    let started = Instant::now();
    let mut n0 = Node::spawn(&config, 0, &["--embed", "--values", LEADER_VALUES]);
    let mut n1 = Node::spawn(&config, 1, &["--embed", "--values", SURVIVOR_VALUES]);
    let mut n2 = Node::spawn(&config, 2, &["--embed", "--values", SURVIVOR_VALUES]);

    let e0 = Arc::clone(&n0.entries);
    wait_for(
        &mut [&mut n0, &mut n1, &mut n2],
        FIRST_COMMIT_WITHIN,
        "first command applied by node 0",
        || !e0.lock().unwrap().is_empty(),
    );
    let first = Instant::now();
    println!(
        "node 0 applied its first command {:.1} s after the start",
        first.duration_since(started).as_secs_f64()
    );
    wait_for(
        &mut [&mut n0, &mut n1, &mut n2],
        KILL_AFTER_TIME + Duration::from_secs(1),
        "commands before the kill",
        || e0.lock().unwrap().len() >= KILL_AFTER_COMMANDS || first.elapsed() >= KILL_AFTER_TIME,
    );
    n1.assert_running("before the kill");
    n2.assert_running("before the kill");
    let reports0 = Arc::clone(&n0.reports);
    let log0 = n0.kill();
    let killed = Instant::now();
    // What node 0's handle acknowledged: its receipts resolved as committed.
    let acknowledged = node_procs::acknowledged(&reports0);
    println!(
        "killed node 0 after it applied {} commands ({:.0} commands/s), {} of its own acknowledged",
        log0.len(),
        rate(&log0),
        acknowledged.len()
    );
    assert!(!acknowledged.is_empty(), "node 0 led first and committed");

    let (e1, e2) = (Arc::clone(&n1.entries), Arc::clone(&n2.entries));
    let new = |log: &Mutex<Vec<Entry>>| proposed_since(log, killed, &[1, 2]);
    wait_for(
        &mut [&mut n1, &mut n2],
        NEW_ENTRIES_WITHIN,
        "commands proposed by a survivor",
        || new(&e1) >= NEW_COMMANDS && new(&e2) >= NEW_COMMANDS,
    );
    let took = killed.elapsed();
    n1.assert_running("at the end");
    n2.assert_running("at the end");
    let statuses = [Arc::clone(&n1.reports), Arc::clone(&n2.reports)];
    for n in [&n1, &n2] {
        println!("stderr of node {}:\n{}", n.id, n.stderr());
    }
    let logs = [n1.kill(), n2.kill()];
    for (i, reports) in statuses.iter().enumerate() {
        for r in reports
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r["status"].is_object())
        {
            println!("status of node {}: {}", i + 1, r["status"]);
        }
    }

    let all = [&log0, &logs[0], &logs[1]];
    for (id, log) in all.iter().enumerate() {
        assert_gap_free(id as u16, log);
        let mut once = HashSet::new();
        for e in log.iter() {
            assert!(
                once.insert(&e.value),
                "node {id}: command {} applied twice: {}",
                e.slot,
                e.value
            );
        }
    }
    for a in 0..3 {
        for b in a + 1..3 {
            for (x, y) in all[a].iter().zip(all[b]) {
                assert_eq!(
                    x.value, y.value,
                    "nodes {a} and {b} disagree on command {}",
                    x.slot
                );
            }
        }
    }
    for (i, log) in logs.iter().enumerate() {
        let values: HashSet<&String> = log.iter().map(|e| &e.value).collect();
        for &k in &acknowledged {
            assert!(
                values.contains(&value_hex(0, k)),
                "node {}: node 0's proposal {k}, acknowledged as committed, is missing",
                i + 1
            );
        }
        let after = log.iter().filter(|e| e.at >= killed).count();
        let own: Vec<Entry> = log
            .iter()
            .filter(|e| e.at >= killed && matches!(e.proposer(), Some(1 | 2)))
            .cloned()
            .collect();
        println!(
            "node {}: {} commands, {} applied after the kill ({} proposed by a survivor, {:.0} commands/s)",
            i + 1,
            log.len(),
            after,
            own.len(),
            rate(&own)
        );
    }
    println!(
        "take-over: {NEW_COMMANDS} survivor commands on each survivor {:.1} s after the kill",
        took.as_secs_f64()
    );
}
