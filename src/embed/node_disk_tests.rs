//! [`Node`]s with durability on, three on one in-process fabric (as `node_tests.rs`):
//! each sees its peers' disks only through their durable words, read one-sidedly.

use super::node_tests::{Sum, config, start_on, wait_until};
use super::{Error, Node, Role, StartError};
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
