//! `Replica::submit`: commands gathered into batch entries while the pipeline is busy.
//!
//! Each case runs a cluster on the in-process backend (remote operations executed inline,
//! one thread, replicas round-robin, a batch of operations each per round) with a client
//! that keeps `outstanding` commands of random sizes submitted at the leader (a new one
//! as soon as one commits), and optionally crashes the first leader. Checked for every
//! command the leader took: its entry is decided once, in the slot `take_results`
//! names, and the entry decodes ([`velos_core::batch::decode`]) with the command at the
//! index `submit` returned; the commands of one entry are in the order they were
//! submitted, and every entry fits the log's values. Premises, asserted: commands were
//! committed (after the crash, when there is one), and some entry held more than one
//! command. A command given a wrong place, or missing from its decided entry, fails it.

mod inline;

use proptest::prelude::*;
use std::collections::BTreeMap;
use velos_core::batch;
use velos_core::log::{ProposeError, Replica};
use velos_rdma::{Batch, Endpoint, NodeId, Op, Process, Reply, Shared};

/// What one case saw.
#[derive(Debug, Default)]
struct Seen {
    /// Commands committed before and after the crash.
    committed: [u64; 2],
    /// Entries decided with more than one command.
    several: u64,
    /// The most commands an entry held.
    most: u32,
}

/// Command `n`: `n`'s 4 bytes, then `len - 4` bytes of `n`'s low byte.
fn command(n: u32, len: usize) -> Vec<u8> {
    let mut c = n.to_le_bytes().to_vec();
    c.resize(len.max(4), n as u8);
    c
}

/// A command under way: its bytes, and where `submit` put it.
struct Waiting {
    bytes: Vec<u8>,
    proposal: u64,
    index: u32,
}

#[allow(clippy::too_many_arguments)]
fn run(
    replicas: u16,
    pipeline: u32,
    max_value: u32,
    outstanding: usize,
    sizes: &[usize],
    rounds: u64,
    crash_at: Option<u64>,
) -> Seen {
    let log = inline::config(replicas, pipeline, max_value);
    let fabric = inline::fabric(&log);
    let log = Shared::new(log);
    let mut engines: Vec<Replica> = (0..replicas)
        .map(|me| Replica::new(log.clone(), me).expect("a replica"))
        .collect();
    let mut endpoints: Vec<_> = (0..replicas).map(|n| fabric.endpoint(NodeId(n))).collect();
    let mut replies = vec![Reply::Start; usize::from(replicas)];
    let mut live = vec![true; usize::from(replicas)];
    // Commands submitted at replica r and not committed yet, by proposal id.
    let mut waiting: Vec<BTreeMap<u64, Vec<Waiting>>> =
        (0..replicas).map(|_| BTreeMap::new()).collect();
    let mut under_way = 0usize;
    // Every entry decided, by slot, as the first replica to apply it saw it.
    let mut decided: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
    let mut seen = Seen::default();
    let mut to_check: Vec<(u64, u64, usize, Vec<Waiting>)> = Vec::new();
    let mut n = 0u32;
    let mut ops = Vec::new();
    // At least `rounds`; with a crash, on until the successor committed (the clock is
    // the machine's: a failure timeout takes as many rounds as the machine's speed
    // makes it), at most 100 times as many.
    for round in 0..100 * rounds {
        if round >= rounds && (crash_at.is_none() || seen.committed[1] > 0) {
            break;
        }
        if crash_at == Some(round) {
            fabric.crash(NodeId(0));
            live[0] = false;
            under_way -= waiting[0].values().map(Vec::len).sum::<usize>();
            waiting[0].clear(); // their outcome is unknown: not checked
        }
        let after = usize::from(crash_at.is_some_and(|c| round >= c));
        for r in 0..usize::from(replicas) {
            if !live[r] {
                continue;
            }
            // The client: `outstanding` commands under way at the leader.
            while under_way < outstanding && engines[r].is_leader() {
                let bytes = command(n, sizes[n as usize % sizes.len()]);
                match engines[r].submit(&bytes) {
                    Ok(at) => {
                        let w = Waiting {
                            bytes,
                            proposal: at.proposal,
                            index: at.index,
                        };
                        let entry = waiting[r].entry(at.proposal).or_default();
                        assert_eq!(entry.len() as u32, at.index, "indexes in order");
                        entry.push(w);
                        under_way += 1;
                        n += 1;
                    }
                    Err(ProposeError::NotLeader { .. } | ProposeError::Busy(_)) => break,
                    Err(e) => panic!("round {round}: submit refused: {e}"),
                }
            }
            let reply = std::mem::replace(&mut replies[r], Reply::Done);
            ops.clear();
            let end = engines[r].resume_batch(reply, &mut ops);
            let mut last = Reply::Done;
            for op in &ops {
                last = match op {
                    Op::Pause { .. } => Reply::Done,
                    op => endpoints[r].execute(op),
                };
            }
            replies[r] = last;
            if end == Batch::Done {
                live[r] = false;
            }
            for (slot, entry) in engines[r].drain_committed() {
                assert!(entry.len() <= max_value as usize, "an entry fits a value");
                let first = decided.entry(slot).or_insert_with(|| entry.clone());
                assert_eq!(*first, entry, "slot {slot}: one entry decided (agreement)");
            }
            for (id, result) in engines[r].take_results() {
                let Some(commands) = waiting[r].remove(&id) else {
                    continue; // a proposal of a crashed run's leader
                };
                let slot = match result {
                    Ok(slot) => slot,
                    Err(e) => {
                        under_way -= commands.len();
                        assert!(matches!(e, ProposeError::Deposed), "{e}");
                        continue;
                    }
                };
                under_way -= commands.len();
                to_check.push((id, slot, after, commands));
            }
            // A slot's result can come before its entry is applied (an earlier slot
            // still open): checked once a replica applied it.
            to_check.retain(|(id, slot, after, commands)| {
                let Some(entry) = decided.get(slot) else {
                    return true;
                };
                let frames = batch::decode(entry).expect("a batch entry").commands;
                assert_eq!(frames.len(), commands.len(), "slot {slot}: every command");
                for w in commands {
                    assert_eq!(w.proposal, *id);
                    assert_eq!(
                        frames[w.index as usize],
                        &w.bytes[..],
                        "slot {slot}: command {} at its index",
                        w.index
                    );
                }
                let k = commands.len() as u32;
                seen.committed[*after] += u64::from(k);
                seen.several += u64::from(k > 1);
                seen.most = seen.most.max(k);
                false
            });
        }
    }
    assert!(
        to_check.len() <= outstanding,
        "results checked as entries apply"
    );
    seen
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn submitted_commands_are_decided_at_their_place_in_batches(
        replicas in prop::sample::select(vec![3u16, 5]),
        pipeline in 1u32..=4,
        max_value in 16u32..=256,
        outstanding in 1usize..=64,
        sizes in prop::collection::vec(4usize..=12, 1..8),
        crash in any::<bool>(),
    ) {
        let rounds = 4_000;
        let crash_at = crash.then_some(rounds / 3);
        let seen = run(replicas, pipeline, max_value, outstanding, &sizes, rounds, crash_at);
        prop_assert!(seen.committed[0] > 0, "premise: commands committed {seen:?}");
        prop_assert!(!crash || seen.committed[1] > 0, "premise: committed after the crash {seen:?}");
        // Entries of several commands, when commands wait beyond the pipeline and any two
        // fit one entry (a tag byte, then each framed: two of the largest).
        let largest = sizes.iter().copied().max().unwrap_or(0);
        let two_fit = 2 * batch::framed_len(largest) < max_value as usize; // and the tag
        if outstanding > usize::try_from(pipeline).unwrap() && two_fit {
            prop_assert!(seen.several > 0, "premise: entries of several commands {seen:?}");
        }
    }
}

/// The named case: 64 outstanding 8-byte commands on a pipeline of 4 and 256-byte values
/// gather about 16 to an entry (at most 28 fit: a tag, then 9 bytes each).
#[test]
fn sixty_four_outstanding_commands_share_a_few_slots() {
    let seen = run(3, 4, 256, 64, &[8], 4_000, None);
    assert!(
        seen.committed[0] > 1_000,
        "premise: commands committed {seen:?}"
    );
    assert!(seen.most >= 16 && seen.most <= 28, "{seen:?}");
}
