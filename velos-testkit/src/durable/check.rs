//! The checks of a whole-cluster power loss: what each disk recovered against the log the
//! replicas decided, and how far the disks reach against the durable index the replicas
//! showed when the power went.

use std::collections::BTreeMap;
use velos_core::log::membership::Membership;
use velos_store::recover::Recovered;

/// What the checks looked at, for the reports (their premises).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Looked {
    /// Records cut or files passed over by the recoveries (torn tails, flipped bits).
    pub cuts: usize,
    /// Recovered snapshots compared with the state the decided log makes at their point.
    pub snapshots_checked: usize,
}

/// Checks one power loss: `found` (each disk's recovery, one per replica) against
/// `decided` (the log's slot → the entry decided there) and `durable` (the index at the
/// loss). The disks keep snapshots as the log's banks do (`Replica::wrap_snapshot`), so a
/// snapshot is compared by its service's bytes: `state_at(point)` is what the decided
/// entries below `point` make, `None` where some of them are unknown (that snapshot cannot
/// be checked); one that is no wrapped snapshot is a violation. After a flipped bit (a damaged copy is a
/// lost one), `together` is how far all the disks reach merged; otherwise every majority
/// of the disks must reach the index, so the worst one is checked. A line per violation.
pub fn recovered(
    found: &[Recovered],
    decided: &BTreeMap<u64, Vec<u8>>,
    (durable, together): (u64, Option<u64>),
    state_at: impl Fn(u64) -> Option<Vec<u8>>,
    looked: &mut Looked,
) -> Vec<String> {
    assert!(!found.is_empty(), "a cluster has a disk");
    let mut violations = Vec::new();
    for (r, f) in found.iter().enumerate() {
        looked.cuts += f.cuts.len();
        // Lemma (recovered prefix): every recovered entry is the one decided in its slot.
        if let Some(e) = f
            .entries
            .iter()
            .find(|e| decided.get(&e.slot).map(Vec::as_slice) != Some(e.bytes()))
        {
            violations.push(format!(
                "durability: replica {r}'s disk recovered slot {} with an entry that was not \
                 decided there",
                e.slot
            ));
        }
        if let Some((point, bytes)) = &f.snapshot
            && let Some(state) = state_at(*point)
        {
            looked.snapshots_checked += 1;
            let replicas = u16::try_from(found.len()).expect("replica ids are u16");
            let Some((_, service)) = Membership::unwrap_snapshot(bytes, replicas) else {
                violations.push(format!(
                    "durability: replica {r}'s snapshot at {point} is no snapshot of the log"
                ));
                continue;
            };
            if state != service {
                violations.push(format!(
                    "durability: replica {r}'s snapshot at {point} is not the state the \
                     decided log makes there"
                ));
            }
        }
    }
    let mut reach: Vec<u64> = found.iter().map(|f| f.next_slot).collect();
    reach.sort_unstable_by(|a, b| b.cmp(a));
    let majority = found.len() / 2 + 1;
    // Every majority's longest log, at worst: the (n − majority + 1)-th longest; with a
    // damaged copy, what all of them hold together.
    let worst = together.unwrap_or(reach[found.len() - majority]);
    // Lemma (durable survives): the index the replicas showed is on a majority's disks.
    if worst < durable {
        violations.push(format!(
            "durability: the disks recover to slot {worst} ({}), below the durable index \
             {durable} the replicas showed at the power loss: durably acknowledged entries \
             lost",
            if together.is_some() {
                "all of them"
            } else {
                "the worst majority"
            }
        ));
    }
    violations
}
