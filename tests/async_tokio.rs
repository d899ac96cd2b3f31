//! Every call of `velos::embed::Cluster` that can wait has a future form, and a real
//! runtime (tokio, a dev-dependency only: the library depends on none) drives them all.
//! Each await is bounded by the runtime's timer.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use velos::embed::{Cluster, Config, Position, RestoreError, Role, StateMachine};

/// Adds each command's byte; answers the new total.
#[derive(Debug, Default)]
struct Sum {
    total: u64,
}

impl StateMachine for Sum {
    type Response = u64;

    fn apply(&mut self, _: Position, command: &[u8]) -> u64 {
        self.total += u64::from(command[0]);
        self.total
    }

    fn snapshot(&self) -> Vec<u8> {
        self.total.to_le_bytes().to_vec()
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), RestoreError> {
        let bytes = bytes
            .try_into()
            .map_err(|_| RestoreError("8 bytes".into()))?;
        self.total = u64::from_le_bytes(bytes);
        Ok(())
    }
}

/// `future`, or a panic naming `what` after 30 s.
async fn within<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), future)
        .await
        .unwrap_or_else(|_| panic!("{what} did not resolve within 30 s"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_waiting_call_has_a_future_form_driven_by_tokio() {
    let cluster = Cluster::start(Config::new(3), (0..3).map(|_| Sum::default())).expect("valid");
    let leader = within("leader_async", cluster.leader_async())
        .await
        .expect("a leader");
    let info = within("submit_async", cluster.submit_async(vec![5]))
        .await
        .expect("committed");
    assert_eq!(info.response, 5, "the state machine's answer");
    let seen = within("read_async", cluster.read_async(|s: &Sum| s.total))
        .await
        .expect("answered");
    assert_eq!(seen, 5, "a read sees the commit before it");
    // Remove a follower through the log; once the others cut it off and it ended, a new
    // process in its place comes back (the join path: rule (retire)), awaited.
    let follower = (0..3).find(|&r| r != leader).expect("a follower");
    let rest: Vec<u16> = (0..3).filter(|&r| r != follower).collect();
    within("change_members_async", cluster.change_members_async(&rest))
        .await
        .expect("removed");
    within("the removed replica ends", async {
        while cluster.role(follower) != Role::Removed {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await;
    let voting = cluster.replace(follower, Sum::default()).expect("removed");
    within("replace", voting)
        .await
        .expect("the new process votes");
    let info = within("submit_async", cluster.submit_async(vec![7]))
        .await
        .expect("committed");
    assert_eq!(info.response, 12);
    within(
        "catch_up_async",
        cluster.catch_up_async(Duration::from_secs(20)),
    )
    .await
    .expect("every replica caught up");
    let machines = within("shutdown_async", cluster.shutdown_async()).await;
    assert_eq!(machines.len(), 3);
    for (r, machine) in machines.iter().enumerate() {
        let machine = machine.as_ref().expect("none crashed");
        assert_eq!(machine.total, 12, "replica {r} applied both commands");
    }
}

/// An owned session (the cluster shared through an `Arc`) moves into `tokio::spawn`ed
/// tasks, which submit with `submit_async` and `resubmit_async`: each command is applied
/// once (a resubmitted one answers its first application's total).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn owned_sessions_submit_from_spawned_tasks() {
    let cluster =
        Arc::new(Cluster::start(Config::new(3), (0..3).map(|_| Sum::default())).expect("valid"));
    let tasks: Vec<_> = (0..4u8)
        .map(|_| {
            let mut session = cluster.owned_session();
            tokio::spawn(async move {
                let first = session.submit_async(vec![1]).await.expect("committed");
                let again = session.resubmit_async().await.expect("committed");
                assert_eq!(again.response, first.response, "applied once");
            })
        })
        .collect();
    for task in tasks {
        within("a spawned session", task)
            .await
            .expect("the task ran");
    }
    let total = within("read_async", cluster.read_async(|s: &Sum| s.total)).await;
    assert_eq!(total, Ok(4), "four commands, each once");
}
