//! Three `velos node --embed --data-dir DIR` processes over real RDMA keep their logs on
//! disk (a snapshot every 4 slots); the leader reports how far the log is durable
//! (`{"durable": S}`: every slot below S on a majority's disks). Every process is killed
//! at once (the whole cluster down), then each restarts with `--recover` on its
//! directory: they agree on the longest log any of them recovered, every command of a
//! slot reported durable is there (each command a process replays from its disk is the
//! one the first run applied under that number, and the numbering goes on past every
//! durable command), and the restarted cluster decides new commands that all three apply
//! alike. Then a follower is killed and a fresh process joins in its place on its
//! directory (`--join --data-dir`): it resumes at the newest snapshot its disk kept
//! (`{"resumed": P}`), applies from there on (the tail, or a newer snapshot copied if it
//! could not read a majority in time), votes, and agrees with the others.
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
/// Commands each process applies after the restart (and the joiner after its join), at
/// least.
const NEW_COMMANDS: usize = 50;

type Reports = Arc<Mutex<Vec<serde_json::Value>>>;
type Log = Arc<Mutex<Vec<Entry>>>;

/// The largest `key` among `reports`.
fn most(reports: &Mutex<Vec<serde_json::Value>>, key: &str) -> Option<u64> {
    reports
        .lock()
        .unwrap()
        .iter()
        .filter_map(|r| r[key].as_u64())
        .max()
}

/// The entries of `log` whose batch is in a slot from `from` on.
fn from(log: &[Entry], from: u64) -> impl Iterator<Item = &Entry> {
    log.iter()
        .filter(move |e| e.batch.is_some_and(|b| b >= from))
}

/// The entries of `log` whose batch is in a slot below `below`.
fn below(log: &[Entry], below: u64) -> impl Iterator<Item = &Entry> {
    log.iter()
        .filter(move |e| e.batch.is_some_and(|b| b < below))
}

fn handles(nodes: &[Node]) -> (Vec<Log>, Vec<Reports>) {
    nodes
        .iter()
        .map(|n| (Arc::clone(&n.entries), Arc::clone(&n.reports)))
        .unzip()
}

/// Every command numbered alike in `logs` (by number) has the same value; the values.
fn agree<'a>(what: &str, logs: impl Iterator<Item = (usize, &'a Entry)>) -> BTreeMap<u64, String> {
    let mut values: BTreeMap<u64, String> = BTreeMap::new();
    for (i, e) in logs {
        let v = values.entry(e.slot).or_insert_with(|| e.value.clone());
        assert_eq!(*v, e.value, "{what}: node {i}'s command {} differs", e.slot);
    }
    values
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
        let mut args = vec!["--embed", "--data-dir", data, "--snapshot-every", "4"];
        args.extend_from_slice(more);
        Node::spawn(&config, id, &args)
    };

    // The first run, killed at once once enough is durable.
    let mut first: Vec<Node> = (0..3).map(|id| spawn(id, &["--values", "400"])).collect();
    let (logs, reports) = handles(&first);
    let enough = || {
        (0..3).any(|i| {
            most(&reports[i], "durable")
                .is_some_and(|d| below(&logs[i].lock().unwrap(), d).count() >= DURABLE_COMMANDS)
        })
    };
    let mut refs: Vec<&mut Node> = first.iter_mut().collect();
    wait_for(
        &mut refs,
        FIRST_COMMIT_WITHIN,
        "commands reported durable",
        enough,
    );
    let before: Vec<Vec<Entry>> = first.into_iter().map(Node::kill).collect();
    let durable = (0..3)
        .filter_map(|i| most(&reports[i], "durable"))
        .max()
        .expect("reported");
    let applied = agree(
        "the first run",
        before
            .iter()
            .enumerate()
            .flat_map(|(i, l)| l.iter().map(move |e| (i, e))),
    );
    let durable_commands = before
        .iter()
        .map(|log| below(log, durable).count())
        .max()
        .expect("three");
    println!(
        "killed all three: durable below slot {durable} ({durable_commands} commands), {} commands applied",
        applied.len()
    );

    // The recovery.
    let mut second: Vec<Node> = (0..3)
        .map(|id| spawn(id, &["--recover", "--values", "100000"]))
        .collect();
    let (logs, reports) = handles(&second);
    let disks = || {
        (0..3)
            .map(|i| most(&reports[i], "disk"))
            .collect::<Option<Vec<u64>>>()
    };
    let news =
        |end: u64| (0..3).all(|i| from(&logs[i].lock().unwrap(), end).count() >= NEW_COMMANDS);
    let mut refs: Vec<&mut Node> = second.iter_mut().collect();
    wait_for(
        &mut refs,
        FIRST_COMMIT_WITHIN + NEW_ENTRIES_WITHIN,
        "new commands after the restart",
        || disks().is_some_and(|d| news(d.into_iter().max().expect("three"))),
    );
    let disks = disks().expect("every process said what its disk held");
    let end = disks.iter().copied().max().expect("three");
    println!("restarted: the disks held the log to slots {disks:?}");
    assert!(
        end >= durable,
        "the longest disk ({end}) holds every durable slot ({durable})"
    );
    for i in 0..3 {
        let log = logs[i].lock().unwrap().clone();
        for e in below(&log, end) {
            if let Some(v) = applied.get(&e.slot) {
                assert_eq!(
                    *v, e.value,
                    "node {i}: command {} replayed from its disk differs",
                    e.slot
                );
            }
        }
        let first_new = from(&log, end).next().expect("new commands");
        assert!(
            first_new.slot >= durable_commands as u64,
            "node {i}: the numbering goes on past every durable command ({} < {durable_commands})",
            first_new.slot
        );
        println!(
            "node {i}: disk to slot {}, {} commands replayed, {} after the restart from command {}",
            disks[i],
            below(&log, end).count(),
            from(&log, end).count(),
            first_new.slot
        );
    }

    // A follower's process killed; a fresh one joins in its place on its directory.
    let leader = (0..3)
        .find(|&i| most(&reports[i], "durable").is_some())
        .expect("a leader reported");
    let gone = (0..3).rev().find(|&i| i != leader).expect("a follower");
    let killed = second.remove(gone).kill();
    let mut joiner = spawn(gone as u16, &["--join", "--values", "0"]);
    let (jlog, jreports) = (Arc::clone(&joiner.entries), Arc::clone(&joiner.reports));
    let mut refs: Vec<&mut Node> = second.iter_mut().chain([&mut joiner]).collect();
    wait_for(
        &mut refs,
        FIRST_COMMIT_WITHIN + NEW_ENTRIES_WITHIN,
        "the joiner voting and applying",
        || {
            most(&jreports, "voting").is_some()
                && most(&jreports, "resumed")
                    .is_some_and(|p| from(&jlog.lock().unwrap(), p).count() >= NEW_COMMANDS)
        },
    );
    let rest: Vec<(usize, Vec<Entry>)> = second
        .into_iter()
        .map(|n| (usize::from(n.id), n.kill()))
        .collect();
    let joined = joiner.kill();
    let point = most(&jreports, "resumed").expect("resumed");
    let snapshot = jreports
        .lock()
        .unwrap()
        .iter()
        .find_map(|r| r["snapshot"].as_u64());
    assert_eq!(
        snapshot,
        Some(point),
        "it resumed at its disk's newest snapshot"
    );
    let restores: Vec<u64> = jreports
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r["value"].is_null())
        .filter_map(|r| r["command"].as_u64())
        .collect();
    let batches: Vec<u64> = joined.iter().filter_map(|e| e.batch).take(8).collect();
    // Its disk's snapshot restored first. It then reads the tail from its peers' words —
    // or, if it could not read a majority of them for a failure timeout (a join goes on
    // with a majority of the file, the others met later; under emulation that can take
    // longer than the 1 s timeout), copies a peer's newer snapshot: both are correct.
    println!("the joiner: restored at commands {restores:?}, its first batches {batches:?}");
    assert!(!restores.is_empty(), "its disk's snapshot restored");
    let first_applied = joined.iter().find_map(|e| e.batch).expect("applied");
    assert!(
        first_applied >= point,
        "it applied from its snapshot on, not from the log's start ({first_applied} < {point})"
    );
    let after: Vec<(usize, &Entry)> = rest
        .iter()
        .flat_map(|(i, l)| l.iter().map(move |e| (*i, e)))
        .chain(killed.iter().map(|e| (gone, e)))
        .chain(joined.iter().map(|e| (gone, e)))
        .collect();
    agree("after the restart", after.into_iter());
    println!(
        "joined in node {gone}'s place: resumed at slot {point}, applied {} commands from slot {first_applied}",
        joined.len()
    );
}
