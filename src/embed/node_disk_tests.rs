//! [`Node`]s with durability on, three on one in-process fabric (as `node_tests.rs`):
//! each sees its peers' disks only through their durable words, read one-sidedly.

use super::node_tests::{Sum, config, start_as, start_on, wait_until};
use super::{Error, Node, Role, Start, StartError};
use std::time::Duration;
use velos_store::recover::recover_owned;

fn durable_nodes(dir: &std::path::Path) -> Vec<Node<Sum>> {
    let config = config().durable(dir);
    let nodes = start_on(&config).into_iter();
    nodes.map(|n| n.expect("started")).collect()
}

/// The slot after the last entry replica `r`'s directory holds.
fn on_disk(dir: &std::path::Path, r: u16) -> u64 {
    let files = crate::disk::read(&dir.join(format!("replica-{r}"))).expect("readable");
    recover_owned(files).next_slot
}

#[test]
fn a_durable_command_is_on_a_majority_of_disks_as_the_nodes_read_each_others_words() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let nodes = durable_nodes(dir.path());
    let absent = nodes.iter().all(|n| n.disk().is_some_and(|d| !d.found));
    assert!(absent, "the directories were not there before the start");
    wait_until("leader", || nodes[0].role() == Role::Leader);
    let mut last = 0;
    for i in 0..20u8 {
        let info = nodes[0].submit_durable(vec![i]).expect("durable");
        last = info.position.slot;
        // Each node's view of its peers comes from their words alone: the leader's
        // index counts a follower's disk only once it read that follower's word.
        let index = nodes[0].durable_index().expect("durability on");
        assert!(index > last, "slot {last} durable, the index {index}");
        let points = nodes[0].durable_points();
        let peers_past = [1, 2].iter().filter(|&&p| points[p] > last).count();
        assert!(
            peers_past >= 1,
            "a peer's word read past {last}: {points:?}"
        );
    }
    // A follower waits for the same slot by reading its peers' words too.
    nodes[2]
        .wait_durable(last, Duration::from_secs(5))
        .expect("durable as a follower reads it");
    assert!(nodes[2].durable_index().expect("on") > last);
    let metrics = nodes[0].metrics();
    assert_eq!(metrics.durable.len(), 3);
    assert!(metrics.durable_index.is_some_and(|d| d > last));
    assert!(metrics.disk_syncs > 0, "the leader's disk synced");
    for n in nodes {
        n.shutdown();
    }
    // The premise of the index: a majority of the directories hold the slot.
    let holding = (0..3).filter(|&r| on_disk(dir.path(), r) > last).count();
    assert!(holding >= 2, "{holding} directories hold slot {last}");
}

#[test]
fn a_node_refuses_a_directory_with_a_log_or_of_another_replica() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let nodes = durable_nodes(dir.path());
    wait_until("leader", || nodes[0].role() == Role::Leader);
    nodes[0].submit_durable(vec![1]).expect("durable");
    for n in nodes {
        n.shutdown();
    }
    let again = start_on(&config().durable(dir.path()));
    let refused = again.iter().filter_map(|n| n.as_ref().err()).count();
    assert!(refused >= 2, "a majority's directories hold the log");
    for e in again.iter().filter_map(|n| n.as_ref().err()) {
        assert!(
            matches!(e, StartError::Recovery(m) if m.contains("holds a log")),
            "{e}"
        );
    }
    drop(again);
    let other = tempfile::tempdir().expect("a temporary directory");
    let mine = other.path().join("replica-1");
    std::fs::create_dir_all(&mine).expect("created");
    std::fs::write(
        mine.join("owner"),
        "velos log of cluster \"x\", replica 4\n",
    )
    .expect("written");
    let started = start_on(&config().durable(other.path()));
    let e = started[1].as_ref().err().expect("refused");
    assert!(
        matches!(e, StartError::Recovery(m) if m.contains("another log") && m.contains("replica 4")),
        "{e}"
    );
}

#[test]
fn a_node_without_durability_says_so() {
    let nodes = start_on(&config());
    let node = nodes[0].as_ref().expect("started");
    wait_until("leader", || node.role() == Role::Leader);
    assert_eq!(node.durable_index(), None);
    assert!(node.durable_points().is_empty());
    let waited = node.wait_durable(0, Duration::from_millis(10));
    assert_eq!(waited, Err(Error::DurabilityOff));
    // Committed, then refused a durable wait.
    assert_eq!(
        node.submit_durable(vec![1]).err(),
        Some(Error::DurabilityOff)
    );
    assert_eq!(node.applied_commands(), 1);
}

/// Three durable nodes commit 10 commands; replica `short` stops; the two others commit
/// 20 more; they stop (a power loss: every replica down); all three restart from their
/// directories. Replica `short`'s disk holds less than the others'.
fn power_loss_with_a_short_disk(short: usize) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = config().durable(dir.path());
    let mut nodes: Vec<Option<Node<Sum>>> =
        durable_nodes(dir.path()).into_iter().map(Some).collect();
    let leader = |nodes: &[Option<Node<Sum>>]| {
        wait_until("leader", || {
            nodes.iter().flatten().any(|n| n.role() == Role::Leader)
        });
        nodes
            .iter()
            .flatten()
            .position(|n| n.role() == Role::Leader)
            .expect("one")
    };
    let mut sum = 0u64;
    let mut last = 0;
    for i in 0..30u8 {
        if i == 10 {
            nodes[short].take().expect("up").shutdown();
        }
        let at = leader(&nodes);
        let node = nodes.iter().flatten().nth(at).expect("the leader");
        match node.submit_durable(vec![i]) {
            Ok(info) => last = info.position.slot,
            // Leadership moving as replica `short` stops: not proposed, proposed again.
            Err(e) if e.not_proposed() => continue,
            Err(e) => panic!("command {i}: {e}"),
        }
        sum += u64::from(i);
    }
    let count = nodes.iter().flatten().find(|n| n.role() == Role::Leader);
    let count = count
        .expect("a leader")
        .read(|s: &Sum| s.count)
        .expect("read");
    for n in nodes.into_iter().flatten() {
        n.shutdown();
    }
    let held = on_disk(dir.path(), short as u16);
    assert!(
        held <= last,
        "premise: replica {short}'s disk lacks the tail ({held} of {last})"
    );
    let restarted: Vec<Node<Sum>> = start_as(&config, Start::Recover)
        .into_iter()
        .map(|n| n.expect("recovered"))
        .collect();
    let end = (0..3).map(|r| on_disk(dir.path(), r)).max().expect("three");
    assert_eq!(restarted[short].disk().map(|d| d.next_slot), Some(held));
    assert!(
        restarted.iter().all(|n| n.disk().is_some_and(|d| d.found)),
        "every directory there"
    );
    let slots: Vec<Option<u64>> = restarted
        .iter()
        .map(|n| n.disk().map(|d| d.next_slot))
        .collect();
    wait_until("leader", || {
        restarted.iter().any(|n| n.role() == Role::Leader)
    });
    let leader = restarted
        .iter()
        .find(|n| n.role() == Role::Leader)
        .expect("one");
    // Rule (recovered behind): the short replica leads only once it copied the state.
    if leader.id() == short as u16 {
        assert!(
            leader.applied_slots() >= end,
            "it led before it copied: {slots:?}"
        );
    }
    assert_eq!(
        leader.read(|s: &Sum| (s.count, s.sum)),
        Ok((count, sum)),
        "{slots:?}"
    );
    let info = leader
        .submit_durable(vec![100])
        .expect("durable after the restart");
    assert!(
        info.position.slot >= end,
        "the log goes on after the recovered one"
    );
    assert_eq!(
        info.response,
        count + 1,
        "on top of every command recovered"
    );
    // Replica `short` copied the state it lacked, then applied on.
    wait_until("the short replica caught up", || {
        restarted[short].applied_slots() > info.position.slot
    });
    let machines: Vec<Sum> = restarted.into_iter().filter_map(Node::shutdown).collect();
    assert_eq!(machines.len(), 3);
    for m in &machines {
        assert_eq!(
            *m,
            Sum {
                count: count + 1,
                sum: sum + 100
            }
        );
    }
}

#[test]
fn nodes_restart_from_their_disks_after_a_power_loss_and_a_short_disk_copies_the_rest() {
    // Replica 0 is the one Ω names first: short, it must copy before it leads.
    for short in [0, 2] {
        power_loss_with_a_short_disk(short);
    }
}
