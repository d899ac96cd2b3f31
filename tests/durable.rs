//! Durability on the in-process backend (`Config::durable`, real files in a temporary
//! directory): what was durable when every replica crashed at once comes back with
//! `Cluster::recover`, in order, in every state machine, and the log goes on after it; a
//! torn or corrupt tail on one disk is cut, reported and filled from the others; bad
//! directories are refused with a typed error.

use std::fs::{self, OpenOptions};
use std::path::Path;
use std::time::Duration;
use velos::embed::{Cluster, Config, Position, RestoreError, StartError, StateMachine};

/// Every command applied, with its position: the state a recovery must rebuild.
#[derive(Default, Debug, PartialEq, Eq)]
struct History(Vec<(u64, u32, Vec<u8>)>);

impl StateMachine for History {
    type Response = ();

    fn apply(&mut self, p: Position, command: &[u8]) {
        self.0.push((p.slot, p.index, command.to_vec()));
    }

    fn snapshot(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (slot, index, c) in &self.0 {
            out.extend_from_slice(&slot.to_le_bytes());
            out.extend_from_slice(&index.to_le_bytes());
            out.extend_from_slice(&(c.len() as u32).to_le_bytes());
            out.extend_from_slice(c);
        }
        out
    }

    fn restore(&mut self, mut b: &[u8]) -> Result<(), RestoreError> {
        let mut h = Vec::new();
        let bad = || RestoreError("truncated".into());
        while !b.is_empty() {
            let slot = u64::from_le_bytes(b.get(..8).ok_or_else(bad)?.try_into().unwrap());
            let index = u32::from_le_bytes(b.get(8..12).ok_or_else(bad)?.try_into().unwrap());
            let len = u32::from_le_bytes(b.get(12..16).ok_or_else(bad)?.try_into().unwrap());
            let c = b.get(16..16 + len as usize).ok_or_else(bad)?.to_vec();
            h.push((slot, index, c));
            b = &b[16 + len as usize..];
        }
        self.0 = h;
        Ok(())
    }
}

fn config(dir: &Path) -> Config {
    let mut c = Config::new(3).durable(dir);
    c.snapshot_every_slots = 16; // snapshots on disk, and segments deleted behind them
    c
}

fn machines() -> Vec<History> {
    (0..3).map(|_| History::default()).collect()
}

/// Crashes every replica at once (a power loss: each disk thread stops where it stands)
/// and hands the cluster's handle back empty.
fn power_loss(cluster: Cluster<History>) {
    for r in 0..3 {
        cluster.crash(r).expect("a replica crashes");
    }
    assert!(
        cluster.shutdown().iter().all(Option::is_none),
        "every replica crashed"
    );
}

/// Submits `n` commands tagged `tag`, every `durable_every`-th waiting for durability;
/// the positions of the durable ones.
fn submit(
    cluster: &Cluster<History>,
    tag: &str,
    n: usize,
    durable_every: usize,
) -> Vec<(u64, u32, Vec<u8>)> {
    let mut durable = Vec::new();
    for i in 0..n {
        let command = format!("{tag}-{i}").into_bytes();
        if i % durable_every == durable_every - 1 {
            let info = cluster
                .submit_durable(command.clone())
                .expect("durably committed");
            durable.push((info.position.slot, info.position.index, command));
        } else {
            cluster.submit(command).expect("committed");
        }
    }
    durable
}

/// Crashes a follower of `cluster` (the replica after the leader); which one.
fn crash_a_follower(cluster: &Cluster<History>) -> u16 {
    let leader = cluster
        .wait_for_leader(Duration::from_secs(10))
        .expect("a leader");
    let follower = (leader + 1) % 3;
    cluster.crash(follower).expect("a follower crashes");
    follower
}

/// Replaces crashed `replica` by a process with an empty history and waits until it votes.
fn replace_until_it_votes(cluster: &Cluster<History>, replica: u16) {
    let voting = cluster
        .replace(replica, History::default())
        .expect("a crashed replica is replaced");
    voting
        .wait_timeout(Duration::from_secs(10))
        .expect("the replacement votes");
}

/// Every durable command is in `history` at its position, in order.
fn holds_in_order(history: &History, durable: &[(u64, u32, Vec<u8>)]) {
    let mut at = 0;
    for d in durable {
        let found = history.0[at..].iter().position(|h| h == d);
        let found = found.unwrap_or_else(|| panic!("durable command {d:?} lost"));
        at += found + 1;
    }
}

#[test]
fn every_durable_command_survives_power_losses_of_every_replica() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cluster = Cluster::start(config(dir.path()), machines()).expect("starts");
    let mut durable = submit(&cluster, "a", 120, 3);
    assert!(!durable.is_empty(), "premise: commands were made durable");
    let index = cluster.durable_index().expect("durability is on");
    assert!(
        index > durable.last().unwrap().0,
        "the last durable slot is below the index"
    );
    assert!(cluster.metrics().durable.len() == 3);
    power_loss(cluster);

    for round in ["b", "c"] {
        let cluster = Cluster::recover(config(dir.path()), machines()).expect("recovers");
        let report = cluster.recovery().expect("a recovery report").clone();
        assert!(
            report.next_slot > durable.last().unwrap().0,
            "round {round}: the log reaches the last durable slot: {report:?}"
        );
        assert_eq!(cluster.first_slot(), report.next_slot);
        // New commands go after the recovered log.
        let more = submit(&cluster, round, 60, 2);
        assert!(
            more.iter().all(|d| d.0 >= report.next_slot),
            "after the recovered log"
        );
        durable.extend(more);
        cluster
            .catch_up(Duration::from_secs(10))
            .expect("caught up");
        let machines = cluster.shutdown();
        let first = machines[0].as_ref().expect("stopped, not crashed");
        for m in &machines {
            let m = m.as_ref().expect("stopped");
            holds_in_order(m, &durable);
            assert_eq!(m, first, "round {round}: every state machine is the same");
        }
        // A shutdown persists what was applied; crash them all the next time around.
        if round == "b" {
            let cluster = Cluster::recover(config(dir.path()), self::machines()).expect("again");
            let again = cluster.recovery().expect("report").next_slot;
            assert!(again > durable.last().unwrap().0);
            power_loss(cluster);
        }
    }
}

/// The newest segment of `replica`'s directory.
fn newest_segment(dir: &Path, replica: u16) -> std::path::PathBuf {
    let rdir = dir.join(format!("replica-{replica}"));
    let mut segs: Vec<_> = fs::read_dir(&rdir)
        .expect("the replica's directory")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("seg-"))
        .collect();
    segs.sort();
    segs.pop().expect("a segment")
}

#[test]
fn a_torn_or_corrupt_tail_is_cut_reported_and_filled_from_the_others() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut c = config(dir.path());
    c.snapshot_every_slots = 0; // one segment from slot 0: the damage is in it
    let cluster = Cluster::start(c.clone(), machines()).expect("starts");
    let durable = submit(&cluster, "a", 40, 1);
    cluster
        .catch_up(Duration::from_secs(10))
        .expect("caught up");
    let whole = cluster.shutdown();
    // Replica 0's tail torn (3 bytes short), replica 1's last record with a flipped bit.
    let seg = newest_segment(dir.path(), 0);
    let len = fs::metadata(&seg).unwrap().len();
    OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(len - 3)
        .unwrap();
    let seg = newest_segment(dir.path(), 1);
    let mut bytes = fs::read(&seg).unwrap();
    let at = bytes.len() - 2;
    bytes[at] ^= 0x10;
    fs::write(&seg, bytes).unwrap();

    let cluster = Cluster::recover(c.clone(), machines()).expect("recovers");
    let report = cluster.recovery().expect("report").clone();
    assert!(
        !report.replicas[0].cuts.is_empty() && !report.replicas[1].cuts.is_empty(),
        "{report:?}"
    );
    assert!(
        report.replicas[2].cuts.is_empty(),
        "replica 2's disk is whole"
    );
    assert_eq!(report.source, Some(2), "the longest log: the undamaged one");
    assert!(
        report.replicas[0].next_slot < report.next_slot,
        "replica 0 lost its tail"
    );
    cluster
        .catch_up(Duration::from_secs(10))
        .expect("caught up");
    let machines = cluster.shutdown();
    for m in &machines {
        let m = m.as_ref().expect("stopped");
        holds_in_order(m, &durable);
        assert_eq!(m, whole[2].as_ref().unwrap(), "rebuilt to the state before");
    }
    // The damaged disks were cut and filled: each recovers the whole log alone now.
    let found = Cluster::recover(c, self::machines()).expect("again");
    let report2 = found.recovery().expect("report").clone();
    for r in &report2.replicas {
        assert!(r.cuts.is_empty(), "cut on disk at the resume: {report2:?}");
        assert_eq!(r.next_slot, report.next_slot, "filled from the longest log");
    }
    drop(found.shutdown());
}

#[test]
fn bad_directories_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cluster = Cluster::start(config(dir.path()), machines()).expect("starts");
    submit(&cluster, "a", 10, 1);
    drop(cluster.shutdown());
    // A fresh start does not write over a log.
    let e = Cluster::start(config(dir.path()), machines())
        .err()
        .expect("refused");
    assert!(
        matches!(&e, StartError::Recovery(why) if why.contains("holds a log")),
        "{e}"
    );
    // A minority of directories cannot vouch for every durable entry.
    fs::rename(dir.path().join("replica-0"), dir.path().join("away-0")).unwrap();
    fs::rename(dir.path().join("replica-1"), dir.path().join("away-1")).unwrap();
    let e = Cluster::recover(config(dir.path()), machines())
        .err()
        .expect("refused");
    assert!(
        matches!(&e, StartError::Recovery(why) if why.contains("majority")),
        "{e}"
    );
    fs::rename(dir.path().join("away-1"), dir.path().join("replica-1")).unwrap();
    // Another log's directory in replica 0's place disagrees.
    let other = tempfile::tempdir().expect("a temporary directory");
    let cluster = Cluster::start(config(other.path()), machines()).expect("starts");
    submit(&cluster, "other", 10, 1);
    drop(cluster.shutdown());
    fs::rename(other.path().join("replica-0"), dir.path().join("replica-0")).unwrap();
    let e = Cluster::recover(config(dir.path()), machines())
        .err()
        .expect("refused");
    assert!(
        matches!(&e, StartError::Recovery(why) if why.contains("disagree")),
        "{e}"
    );
    // Durability is off: no wait for it.
    let cluster = Cluster::start(Config::new(3), machines()).expect("starts");
    let info = cluster.submit(b"x".to_vec()).expect("committed");
    let e = cluster.wait_durable(info.position.slot, Duration::from_millis(10));
    assert_eq!(e, Err(velos::embed::Error::DurabilityOff));
    assert_eq!(cluster.durable_index(), None);
    drop(cluster.shutdown());
}

/// A configuration change is on disk with its members: a cluster of four whose spare was
/// made a voter comes back from a power loss with four voters (the recovered
/// configuration, not the one it was first started with), every durable command there.
#[test]
fn the_configuration_comes_back_from_disk() {
    use velos::core::log::membership::Members;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let four = || {
        let mut c = Config::new(4).durable(dir.path());
        c.log.members = Members::of(&[0, 1, 2]);
        c
    };
    let histories = || (0..4).map(|_| History::default()).collect::<Vec<_>>();
    let cluster = Cluster::start(four(), histories()).expect("starts");
    let mut durable = submit(&cluster, "a", 20, 2);
    cluster
        .change_members(&[0, 1, 2, 3])
        .expect("the spare votes");
    durable.extend(submit(&cluster, "b", 20, 2));
    assert!(!durable.is_empty(), "premise: durable commands");
    for r in 0..4 {
        cluster.crash(r).expect("a replica crashes");
    }
    drop(cluster.shutdown());
    let cluster = Cluster::recover(four(), histories()).expect("recovers");
    assert_eq!(
        cluster.config().log.members,
        Members::of(&[0, 1, 2, 3]),
        "the configuration the log recorded"
    );
    durable.extend(submit(&cluster, "c", 10, 1));
    cluster
        .catch_up(Duration::from_secs(10))
        .expect("caught up");
    for m in cluster.shutdown().iter().flatten() {
        holds_in_order(m, &durable);
    }
}

/// A replica crashed and replaced (`Cluster::replace`) reopens its directory: the new
/// process's disk thread goes on from what the old one wrote, passing over the entries it
/// applies again, and writes what it copies; after a power loss every durable command is
/// back, and the replaced replica's disk holds the log as far as the others'.
#[test]
fn a_replacement_goes_on_writing_its_directory() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let cluster = Cluster::start(config(dir.path()), machines()).expect("starts");
    let mut durable = submit(&cluster, "a", 30, 3);
    let follower = crash_a_follower(&cluster);
    durable.extend(submit(&cluster, "b", 30, 3));
    replace_until_it_votes(&cluster, follower);
    durable.extend(submit(&cluster, "c", 30, 3));
    cluster
        .catch_up(Duration::from_secs(10))
        .expect("caught up");
    let last = durable.last().expect("premise: durable commands").0;
    // The replacement's disk reaches the last durable command too (it applied it).
    let reached = Duration::from_secs(10);
    let start = std::time::Instant::now();
    while cluster.durable_points()[usize::from(follower)] <= last {
        assert!(start.elapsed() < reached, "{:?}", cluster.durable_points());
        std::thread::sleep(Duration::from_millis(1));
    }
    power_loss(cluster);
    let cluster = Cluster::recover(config(dir.path()), machines()).expect("recovers");
    let report = cluster.recovery().expect("a report").clone();
    let theirs = report.replicas[usize::from(follower)].next_slot;
    assert!(theirs > last, "the replaced replica's disk: {report:?}");
    cluster
        .catch_up(Duration::from_secs(10))
        .expect("caught up");
    for m in cluster.shutdown().iter().flatten() {
        holds_in_order(m, &durable);
    }
}

/// Group commit: while nobody waits for durability, a disk starts a batch at most every
/// `group_commit` — an entry committed after one batch waits for the pause —, and a
/// durable wait cuts the pause short (rule (hurried disk)).
#[test]
fn a_durable_wait_cuts_the_group_commit_pause_short() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let pause = Duration::from_secs(1); // the longest allowed
    let c = Config::new(3).durable(dir.path()).group_commit(pause);
    let cluster = Cluster::start(c, machines()).expect("starts");
    let first = cluster.submit(b"first".to_vec()).expect("committed");
    // The first batch of every disk has no pause before it.
    cluster
        .wait_durable(first.position.slot, Duration::from_secs(10))
        .expect("durable");
    let second = cluster.submit(b"second".to_vec()).expect("committed");
    std::thread::sleep(Duration::from_millis(200));
    // The premise of the pause: every disk holds the first entry and not yet the second.
    let points = cluster.durable_points();
    assert!(
        points
            .iter()
            .all(|&p| p > first.position.slot && p <= second.position.slot),
        "the disks wait out the pause: points {points:?}, slots {} and {}",
        first.position.slot,
        second.position.slot
    );
    let asked = std::time::Instant::now();
    cluster
        .wait_durable(second.position.slot, Duration::from_secs(10))
        .expect("durable");
    let waited = asked.elapsed();
    assert!(
        waited < pause / 3,
        "a durable wait hurries the disks: {waited:?} against a pause of {pause:?}"
    );
    drop(cluster.shutdown());
}

/// A replica restarting with its disk (`Cluster::replace` with durability on) resumes at
/// the newest snapshot there and reads only the tail it lacks from the ring; the same
/// restart without durability copies a peer's snapshot (on a 64-slot ring the log moved
/// past its start long before).
#[test]
fn a_replica_restarting_with_its_disk_reads_only_the_tail() {
    for durable in [true, false] {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut c = if durable {
            config(dir.path())
        } else {
            let mut c = Config::new(3);
            c.snapshot_every_slots = 16;
            c
        };
        c.log.slots = 64;
        let cluster = Cluster::start(c, machines()).expect("starts");
        // Some durable waits with durability on (none without: refused there).
        let every = if durable { 50 } else { usize::MAX };
        submit(&cluster, "a", 200, every);
        let follower = crash_a_follower(&cluster);
        submit(&cluster, "b", 10, every);
        let before = cluster.metrics().installs;
        replace_until_it_votes(&cluster, follower);
        submit(&cluster, "c", 10, every);
        cluster
            .catch_up(Duration::from_secs(10))
            .expect("caught up");
        let copies = cluster.metrics().installs - before;
        if durable {
            assert_eq!(copies, 0, "resumed from its disk: no snapshot copied");
        } else {
            assert!(copies > 0, "premise: a blank replacement copies a snapshot");
        }
        let machines: Vec<History> = cluster.shutdown().into_iter().flatten().collect();
        assert_eq!(machines.len(), 3, "every replica ran to the end");
        assert!(
            machines
                .iter()
                .all(|m| m.0 == machines[0].0 && m.0.len() >= 220),
            "every state machine holds the whole history (durable: {durable})"
        );
    }
}
