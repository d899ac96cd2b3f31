//! Rule (batch): a replica driven a batch at a time (`Process::resume_batch`) issues the
//! very operations it issues one at a time (`Process::resume`), in the same order, and
//! finishes where it would.
//!
//! Each case runs a cluster on the in-process backend (remote operations executed inline,
//! one thread, replicas round-robin, a batch each per round), with a client keeping the
//! leader's pipeline full (1,000 values, proposed before its batch); beside every replica runs a shadow copy resumed one
//! operation at a time with the same replies, and every operation of a batch must be the
//! shadow's next. Random: the replica count, the pipeline, the value size, the clock's
//! speed against the rounds, and whether the first leader crashes (its successor's turns
//! then hold prepares, adoptions and catch-up reads too). Premises, asserted: entries were
//! decided (after the crash, when there is one) and some batch held more than one
//! operation.

mod inline;

use proptest::prelude::*;
use velos_core::log::Replica;
use velos_rdma::{Batch, Endpoint, NodeId, Op, Process, Reply, Shared, Step};

/// What one case ran into.
#[derive(Debug, Default)]
struct Seen {
    /// Entries applied, at every replica together, before and after the crash.
    applied: [u64; 2],
    /// Batches, and those of more than one operation.
    batches: u64,
    several: u64,
}

/// Runs `rounds` rounds; crashes replica 0 (the first leader) at round `crash_at`.
fn run(replicas: u16, pipeline: u32, size: u32, rounds: u64, crash_at: Option<u64>) -> Seen {
    let log = inline::config(replicas, pipeline, size);
    let fabric = inline::fabric(&log);
    let log = Shared::new(log);
    let mut batched: Vec<Replica> = (0..replicas)
        .map(|me| Replica::new(log.clone(), me).expect("a replica"))
        .collect();
    let mut sent = 0u32;
    let mut shadows = batched.clone();
    let mut endpoints: Vec<_> = (0..replicas).map(|n| fabric.endpoint(NodeId(n))).collect();
    let mut replies = vec![Reply::Start; usize::from(replicas)];
    let mut live = vec![true; usize::from(replicas)];
    let mut seen = Seen::default();
    let mut batch = Vec::new();
    for round in 0..rounds {
        if crash_at == Some(round) {
            fabric.crash(NodeId(0));
            live[0] = false;
        }
        let after = usize::from(crash_at.is_some_and(|c| round >= c));
        for r in 0..usize::from(replicas) {
            if !live[r] {
                continue;
            }
            // The client: the same values to the replica and its shadow.
            while sent < 1_000
                && batched[r].is_leader()
                && batched[r].proposals_waiting() < pipeline as usize
            {
                let mut value = sent.to_le_bytes().to_vec();
                value.resize(size as usize, 0);
                let id = batched[r].propose(value.clone());
                assert_eq!(shadows[r].propose(value), id, "the shadow takes it alike");
                if id.is_err() {
                    break;
                }
                sent += 1;
            }
            let reply = std::mem::replace(&mut replies[r], Reply::Done);
            batch.clear();
            let end = batched[r].resume_batch(reply.clone(), &mut batch);
            seen.batches += 1;
            seen.several += u64::from(batch.len() > 1);
            let mut shadow_reply = reply;
            for op in &batch {
                assert_eq!(
                    shadows[r].resume(shadow_reply),
                    Step::Op(op.clone()),
                    "replica {r}, round {round}: the batch's next operation is the shadow's"
                );
                shadow_reply = match op {
                    Op::Pause { .. } => Reply::Done,
                    op => endpoints[r].execute(op),
                };
            }
            replies[r] = shadow_reply.clone();
            if end == Batch::Done {
                assert_eq!(shadows[r].resume(shadow_reply), Step::Done);
                live[r] = false;
            }
            let applied = batched[r].drain_committed().count();
            assert_eq!(shadows[r].drain_committed().count(), applied);
            seen.applied[after] += applied as u64;
        }
        assert_eq!(batched, shadows, "round {round}: the same replicas");
    }
    seen
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn a_batch_is_the_operations_one_at_a_time(
        replicas in prop::sample::select(vec![3u16, 5]),
        pipeline in 1u32..=4,
        size in 10u32..=40,
        crash in any::<bool>(),
    ) {
        let rounds = 6_000;
        let crash_at = crash.then_some(rounds / 3);
        let seen = run(replicas, pipeline, size, rounds, crash_at);
        prop_assert!(seen.applied[0] > 0, "premise: entries decided {seen:?}");
        prop_assert!(!crash || seen.applied[1] > 0, "premise: decided after the crash {seen:?}");
        prop_assert!(seen.several > 0, "premise: batches of several operations {seen:?}");
    }
}
