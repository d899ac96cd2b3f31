//! Three `velos node --embed --data-dir DIR` processes over real RDMA keep their logs on
//! disk; the leader reports how far the log is durable (`{"durable": S}`: every slot below
//! S on a majority's disks). Every process is killed at once (the whole cluster down),
//! then each restarts with `--recover` on its directory: they agree on the longest log any
//! of them recovered, every command of a slot reported durable is there (each command a
//! process replays from its disk is the one the first run applied under that number, and
//! the numbering goes on past every durable command), and the restarted cluster decides
//! new commands that all three apply alike.
//!
//! A kill is not a power cut (what the kernel holds unsynced survives it): the test holds
//! the recovery to the durable index, which a power cut respects too.
//!
//! Runs like `tests/node_cluster.rs` (`VELOS_BIN`, `VELOS_REQUIRE_RDMA`, the timing of
//! `node_procs`).
#![cfg(feature = "verbs")]

mod node_procs;

use node_procs::{
    Entry, FIRST_COMMIT_WITHIN, NEW_ENTRIES_WITHIN, Node, cluster_file, device_present, wait_for,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Commands the first run makes durable before the kill, at least.
const DURABLE_COMMANDS: usize = 100;
/// Commands each process applies after the restart, at least.
const NEW_COMMANDS: usize = 50;

/// The largest `key` among `reports`.
fn most(reports: &Mutex<Vec<serde_json::Value>>, key: &str) -> Option<u64> {
    reports
        .lock()
        .unwrap()
        .iter()
        .filter_map(|r| r[key].as_u64())
        .max()
}

/// How many of `log`'s commands are in slots below `durable`.
fn below(log: &Mutex<Vec<Entry>>, durable: u64) -> usize {
    log.lock()
        .unwrap()
        .iter()
        .filter(|e| e.batch.is_some_and(|b| b < durable))
        .count()
}

#[test]
fn a_cluster_killed_at_once_restarts_from_its_disks_with_every_durable_command() {
    if !device_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = cluster_file(dir.path(), "node-durable-test");
    let data = dir.path().join("data");
    let data = data.to_str().expect("a UTF-8 path");
    let spawn = |id: u16, more: &[&str]| {
        let mut args = vec!["--embed", "--data-dir", data, "--values", "400"];
        args.extend_from_slice(more);
        Node::spawn(&config, id, &args)
    };
    let mut first: Vec<Node> = (0..3).map(|id| spawn(id, &[])).collect();
    let (logs, reports): (Vec<_>, Vec<_>) = first
        .iter()
        .map(|n| (Arc::clone(&n.entries), Arc::clone(&n.reports)))
        .unzip();
    let enough = || {
        (0..3).any(|i| {
            most(&reports[i], "durable").is_some_and(|d| below(&logs[i], d) >= DURABLE_COMMANDS)
        })
    };
    let mut refs: Vec<&mut Node> = first.iter_mut().collect();
    wait_for(
        &mut refs,
        FIRST_COMMIT_WITHIN,
        "commands reported durable",
        enough,
    );
    // The whole cluster down at once.
    let before: Vec<Vec<Entry>> = first.into_iter().map(Node::kill).collect();
    let durable = (0..3)
        .filter_map(|i| most(&reports[i], "durable"))
        .max()
        .expect("reported");
    // What the first run applied, by command number (the processes agree on it).
    let mut applied: BTreeMap<u64, String> = BTreeMap::new();
    for e in before.iter().flatten() {
        let v = applied.entry(e.slot).or_insert_with(|| e.value.clone());
        assert_eq!(
            *v, e.value,
            "the first run's processes disagree on command {}",
            e.slot
        );
    }
    let durable_commands = before
        .iter()
        .map(|log| {
            log.iter()
                .filter(|e| e.batch.is_some_and(|b| b < durable))
                .count()
        })
        .max()
        .expect("three");
    println!(
        "killed all three: durable below slot {durable} ({durable_commands} commands), {} commands applied",
        applied.len()
    );

    let mut second: Vec<Node> = (0..3).map(|id| spawn(id, &["--recover"])).collect();
    let (logs, reports): (Vec<_>, Vec<_>) = second
        .iter()
        .map(|n| (Arc::clone(&n.entries), Arc::clone(&n.reports)))
        .unzip();
    let disks = || {
        (0..3)
            .map(|i| most(&reports[i], "disk"))
            .collect::<Option<Vec<u64>>>()
    };
    let new = |i: usize, end: u64| {
        logs[i]
            .lock()
            .unwrap()
            .iter()
            .filter(|e| e.batch.is_some_and(|b| b >= end))
            .count()
    };
    let mut refs: Vec<&mut Node> = second.iter_mut().collect();
    wait_for(
        &mut refs,
        FIRST_COMMIT_WITHIN + NEW_ENTRIES_WITHIN,
        "new commands after the restart",
        || {
            disks().is_some_and(|d| {
                let end = d.into_iter().max().expect("three");
                (0..3).all(|i| new(i, end) >= NEW_COMMANDS)
            })
        },
    );
    let disks = disks().expect("every process said what its disk held");
    let end = disks.iter().copied().max().expect("three");
    let after: Vec<Vec<Entry>> = second.into_iter().map(Node::kill).collect();
    println!("restarted: the disks held the log to slots {disks:?}");
    assert!(
        end >= durable,
        "the longest disk ({end}) holds every durable slot ({durable})"
    );
    let mut agreed: BTreeMap<u64, String> = BTreeMap::new();
    for (i, log) in after.iter().enumerate() {
        let replayed = log.iter().filter(|e| e.batch.is_some_and(|b| b < end));
        for e in replayed {
            if let Some(v) = applied.get(&e.slot) {
                assert_eq!(
                    *v, e.value,
                    "node {i}: command {} replayed from its disk differs",
                    e.slot
                );
            }
        }
        let first_new = log
            .iter()
            .find(|e| e.batch.is_some_and(|b| b >= end))
            .expect("new commands");
        assert!(
            first_new.slot >= durable_commands as u64,
            "node {i}: the numbering goes on past every durable command ({} < {durable_commands})",
            first_new.slot
        );
        for e in log.iter().filter(|e| e.batch.is_some_and(|b| b >= end)) {
            let v = agreed.entry(e.slot).or_insert_with(|| e.value.clone());
            assert_eq!(
                *v, e.value,
                "node {i}: command {} after the restart differs",
                e.slot
            );
        }
        println!(
            "node {i}: disk to slot {}, {} commands replayed, {} after the restart from command {}",
            disks[i],
            log.iter()
                .filter(|e| e.batch.is_some_and(|b| b < end))
                .count(),
            log.iter()
                .filter(|e| e.batch.is_some_and(|b| b >= end))
                .count(),
            first_new.slot
        );
    }
}
