//! Replacing a replica over real RDMA: three `velos node` processes decide entries; a
//! follower (node 2) is killed and a fresh process started for its place with `--join`;
//! it connects to the running nodes, catches up and votes while the leader (node 0)
//! keeps deciding; then the leader is killed, and the survivors (node 1 and the new node
//! 2) go on deciding. From what the processes printed: every log is gap-free from its
//! first slot; all of them agree slot by slot; every entry applied by a killed process
//! is on both survivors; no value is applied twice; the survivors printed the
//! replacement. Prints the time from the new process's start to its first applied entry
//! and to its first vote. A second test does the same through the embedding handle
//! (`--embed`, `embed::Node` joining). Run them one at a time (`--test-threads=1`): two
//! clusters at once on an emulated guest's two CPUs only measure each other.
//!
//! Skips without a device unless `VELOS_REQUIRE_RDMA=1`; `VELOS_BIN` as in
//! `node_cluster.rs`.
#![cfg(feature = "verbs")]

mod node_procs;

use node_procs::{
    Entry, FIRST_COMMIT_WITHIN, NEW_ENTRIES_WITHIN, Node, assert_gap_free, cluster_file,
    device_present, proposed_since, wait_for,
};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Node 0 proposes this many values, so that it still decides while node 2 rejoins.
const LEADER_VALUES: &str = "1000000";
const SURVIVOR_VALUES: &str = "50000";
/// Node 2 is killed once node 0 has applied this many entries.
const ENTRIES_BEFORE: usize = 200;
/// The new process must vote, and have applied as far as node 0 had at its start, in
/// this long.
const JOIN_WITHIN: Duration = Duration::from_secs(150);
/// After the leader's kill, each survivor applies this many entries a survivor proposed
/// (within `NEW_ENTRIES_WITHIN`).
const NEW_ENTRIES: usize = 100;

/// The scenario up to the new process voting.
struct Replaced {
    _dir: tempfile::TempDir,
    n0: Node,
    n1: Node,
    new2: Node,
    /// What the killed node 2 applied.
    old2: Vec<Entry>,
    /// When the new process started.
    started: Instant,
}

/// Three nodes started with `args` and their values; node 2 killed once node 0 applied
/// [`ENTRIES_BEFORE`], and a fresh process started in its place with `--join`. Returns
/// once the new process votes and has applied as far as node 0 had at its start (entries
/// are numbered: slots, or with `--embed` commands); `None` without a device.
fn replace_node_2(cluster_id: &str, args: &[&str]) -> Option<Replaced> {
    if !device_present() {
        return None;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = cluster_file(dir.path(), cluster_id);
    let with = |values, more: &[&'static str]| {
        let mut all = args.to_vec();
        all.extend(["--values", values]);
        all.extend(more);
        all
    };
    let mut n0 = Node::spawn(&config, 0, &with(LEADER_VALUES, &[]));
    let mut n1 = Node::spawn(&config, 1, &with(SURVIVOR_VALUES, &[]));
    let mut n2 = Node::spawn(&config, 2, &with(SURVIVOR_VALUES, &[]));
    let e0 = Arc::clone(&n0.entries);
    wait_for(
        &mut [&mut n0, &mut n1, &mut n2],
        FIRST_COMMIT_WITHIN,
        "entries applied by node 0 before node 2's kill",
        || e0.lock().unwrap().len() >= ENTRIES_BEFORE,
    );
    let old2 = n2.kill();
    println!(
        "killed node 2 after it applied {} entries (node 0: {})",
        old2.len(),
        n0.entries().len()
    );
    let started = Instant::now();
    let mut new2 = Node::spawn(&config, 2, &with(SURVIVOR_VALUES, &["--join"]));
    let at_start = n0.entries().len() as u64;
    let (e2, reports) = (Arc::clone(&new2.entries), Arc::clone(&new2.reports));
    wait_for(
        &mut [&mut n0, &mut n1, &mut new2],
        JOIN_WITHIN,
        "the new node 2 voting and caught up with node 0's log at its start",
        || {
            let voting = reports.lock().unwrap().iter().any(|r| r["voting"].is_u64());
            let last = e2.lock().unwrap().last().map(|e| e.slot + 1);
            voting && last.is_some_and(|n| n >= at_start)
        },
    );
    Some(Replaced {
        _dir: dir,
        n0,
        n1,
        new2,
        old2,
        started,
    })
}

/// Kills node 0 and waits until node 1 and the new node 2 each applied [`NEW_ENTRIES`]
/// entries one of them proposed: node 0's log, and when it was killed.
fn leader_dies(n0: Node, n1: &mut Node, new2: &mut Node) -> (Vec<Entry>, Instant) {
    let log0 = n0.kill();
    let killed = Instant::now();
    let (e1, e2) = (Arc::clone(&n1.entries), Arc::clone(&new2.entries));
    wait_for(
        &mut [n1, new2],
        NEW_ENTRIES_WITHIN,
        "entries proposed by a survivor after the leader's kill",
        || {
            proposed_since(&e1, killed, &[1, 2]) >= NEW_ENTRIES
                && proposed_since(&e2, killed, &[1, 2]) >= NEW_ENTRIES
        },
    );
    println!(
        "after the leader's kill: {NEW_ENTRIES} survivor entries on each survivor in {:.1} s",
        killed.elapsed().as_secs_f64()
    );
    (log0, killed)
}

#[test]
fn a_fresh_process_replaces_a_follower_and_survives_the_leaders_death() {
    let Some(Replaced {
        _dir,
        n0,
        mut n1,
        mut new2,
        old2,
        started,
    }) = replace_node_2("node-replace-test", &[])
    else {
        return;
    };
    let (joined, _) = new2
        .reported("joined")
        .expect("the new process reports its incarnation");
    let (voting, voted) = new2.reported("voting").expect("checked above");
    assert_eq!(voting, joined, "it votes at its incarnation");
    let first_applied = new2.entries()[0].at;
    for n in [&n0, &n1] {
        let replaced = n.reported("replaced").map(|(r, _)| r);
        assert_eq!(replaced, Some(2), "node {} saw node 2 replaced", n.id);
        let incarnation = n.reported("incarnation").map(|(i, _)| i);
        assert_eq!(incarnation, Some(joined));
    }
    println!(
        "replacement: new node 2 (incarnation {joined}) applied its first entry {:.3} s \
         after its start and voted {:.3} s after it; caught up {:.3} s after it ({} \
         entries, node 0 at {})",
        first_applied.duration_since(started).as_secs_f64(),
        voted.duration_since(started).as_secs_f64(),
        started.elapsed().as_secs_f64(),
        new2.entries().len(),
        n0.entries().len()
    );

    // The leader dies; node 1 and the new node 2 go on.
    let (log0, _) = leader_dies(n0, &mut n1, &mut new2);
    let log1 = n1.kill();
    let log2 = new2.kill();
    // Gap-free from each log's first slot (the new process starts where the log or a
    // snapshot it copied starts); agreement slot by slot.
    assert_gap_free(0, &log0);
    assert_gap_free(1, &log1);
    assert_gap_free(2, &old2);
    let first2 = log2.first().expect("the new node applied entries").slot;
    for (i, e) in log2.iter().enumerate() {
        assert_eq!(e.slot, first2 + i as u64, "new node 2: a gap at entry {i}");
    }
    let by_slot = |log: &[Entry], slot: u64| {
        let first = log.first()?.slot;
        log.get(usize::try_from(slot.checked_sub(first)?).ok()?)
            .map(|e| e.value.clone())
    };
    let logs = [&log0, &log1, &old2, &log2];
    let last = logs.iter().filter_map(|l| l.last()).map(|e| e.slot).max();
    for slot in 0..=last.expect("entries") {
        let values: BTreeSet<String> = logs.iter().filter_map(|l| by_slot(l, slot)).collect();
        assert!(
            values.len() <= 1,
            "slot {slot}: the replicas disagree: {values:?}"
        );
    }
    // Nothing a killed process applied is lost: both survivors have it.
    for (name, dead) in [("node 0", &log0), ("the old node 2", &old2)] {
        let end = dead.last().expect("it applied entries").slot;
        for (survivor, log) in [("node 1", &log1), ("the new node 2", &log2)] {
            assert!(
                log.last().is_some_and(|e| e.slot >= end),
                "{survivor} stops before slot {end}, which {name} applied"
            );
        }
        assert!(
            by_slot(&log1, 0).is_some(),
            "node 1 has the log from slot 0"
        );
    }
    // No value applied twice (values are unique: the proposer's id and a counter).
    for (name, log) in [("node 1", &log1), ("the new node 2", &log2)] {
        let mut seen = BTreeSet::new();
        for e in log.iter().filter(|e| e.proposer().is_some()) {
            assert!(
                seen.insert(&e.value),
                "{name} applied {} twice (slot {})",
                e.value,
                e.slot
            );
        }
    }
}

/// The same through the embedding handle (`velos node --embed`, `embed::Node` with
/// `Start::Join`): the new process's handle says when it votes; after the leader's kill
/// the survivors apply commands one of them proposed; every command number means the
/// same command on every process that applied it, none twice, and every command node 0's
/// handle acknowledged is on node 1.
#[test]
fn an_embedded_replacement_votes_and_the_survivors_go_on() {
    let Some(Replaced {
        _dir,
        n0,
        mut n1,
        mut new2,
        old2,
        started,
    }) = replace_node_2("node-replace-embed-test", &["--embed"])
    else {
        return;
    };
    let (_, voted) = new2.reported("voting").expect("checked above");
    println!(
        "embedded replacement: new node 2 voted {:.3} s after its start",
        voted.duration_since(started).as_secs_f64()
    );
    let reports0 = Arc::clone(&n0.reports);
    let (log0, killed) = leader_dies(n0, &mut n1, &mut new2);
    let acknowledged = node_procs::acknowledged(&reports0);
    let (log1, log2) = (n1.kill(), new2.kill());
    // Numbered without gaps from each log's first command (the new process may start
    // from a snapshot); the same number is the same command everywhere; none twice.
    let logs = [
        ("node 0", &log0),
        ("node 1", &log1),
        ("the old node 2", &old2),
        ("the new node 2", &log2),
    ];
    let mut by_number = std::collections::BTreeMap::new();
    for (name, log) in logs {
        let first = log.first().map_or(0, |e| e.slot);
        let mut once = BTreeSet::new();
        for (i, e) in log.iter().enumerate() {
            assert_eq!(e.slot, first + i as u64, "{name}: a gap at command {i}");
            assert!(once.insert(&e.value), "{name} applied {} twice", e.value);
            let seen = by_number.entry(e.slot).or_insert_with(|| e.value.clone());
            assert_eq!(*seen, e.value, "{name} disagrees on command {}", e.slot);
        }
    }
    assert_eq!(
        log1.first().map(|e| e.slot),
        Some(0),
        "node 1 applied from the start"
    );
    let values1: BTreeSet<&String> = log1.iter().map(|e| &e.value).collect();
    for &k in &acknowledged {
        let value: String = velos_cli::node::client::generated_value(0, k, 16)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert!(
            values1.contains(&value),
            "node 0's acknowledged proposal {k} is lost"
        );
    }
    println!(
        "embedded replacement: {} of node 0's proposals acknowledged, all on node 1; \
         {NEW_ENTRIES} survivor commands on each survivor {:.1} s after the leader's kill",
        acknowledged.len(),
        killed.elapsed().as_secs_f64()
    );
}
