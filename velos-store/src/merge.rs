//! The longest log a set of replicas' directories hold together, after a power loss of
//! all of them: [`merge`]. Only decided entries are persisted, so every directory holds a
//! prefix of the one decided log, possibly with its start damaged (a snapshot with a
//! flipped bit is passed over, and the segments after it start past slot 0) and its end
//! cut; together they hold the decided log from the newest snapshot that some directory's
//! entries continue, as far as the entries of any of them reach without a gap.

use crate::recover::{Entry, Recovered};
use std::collections::BTreeMap;

/// Two directories hold different entries in one slot: they are not of the same log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("directories {first} and {second} hold different entries in slot {slot}")]
pub struct Disagreement {
    /// The slot.
    pub slot: u64,
    /// The two directories (indices into the input).
    pub first: usize,
    /// The second one.
    pub second: usize,
}

/// The longest log `found` (each directory's recovery) hold together: a start — a
/// snapshot of one of them, or slot 0 with the empty state when one holds entries from
/// slot 0 — and every entry after it, consecutive, from any of them. The start is the one
/// whose log reaches furthest (the newest of those). Directories that disagree on a slot
/// are an error.
pub fn merge(found: &[Recovered]) -> Result<Recovered, Disagreement> {
    let mut entries: BTreeMap<u64, (usize, &Entry)> = BTreeMap::new();
    for (i, f) in found.iter().enumerate() {
        for e in &f.entries {
            match entries.get(&e.slot) {
                Some(&(j, other)) if other.kind != e.kind || other.bytes() != e.bytes() => {
                    return Err(Disagreement {
                        slot: e.slot,
                        first: j,
                        second: i,
                    });
                }
                Some(_) => {}
                None => {
                    entries.insert(e.slot, (i, e));
                }
            }
        }
    }
    // Every start: each snapshot, and slot 0 if some directory's entries begin there.
    let mut starts: Vec<(u64, Option<&Vec<u8>>)> = found
        .iter()
        .filter_map(|f| f.snapshot.as_ref().map(|(p, b)| (*p, Some(b))))
        .collect();
    let from_zero = found
        .iter()
        .any(|f| f.snapshot.is_none() && f.entries.first().is_none_or(|e| e.slot == 0));
    if from_zero {
        starts.push((0, None));
    }
    let reach = |start: u64| {
        let mut next = start;
        while entries.contains_key(&next) {
            next += 1;
        }
        next
    };
    // The furthest reach; among equals, the newest start (the fewest entries to replay).
    let best = starts.iter().max_by_key(|&&(p, _)| (reach(p), p)).copied();
    let Some((point, state)) = best else {
        return Ok(Recovered::default()); // no directory holds a usable log
    };
    let next_slot = reach(point);
    let merged = Recovered {
        snapshot: state.map(|b| (point, b.clone())),
        entries: (point..next_slot).map(|s| entries[&s].1.clone()).collect(),
        next_slot,
        ..Recovered::default()
    };
    // Postcondition: the merged log reaches as far as any directory whose own log is
    // whole from its start.
    debug_assert!(
        found
            .iter()
            .filter(|f| f.snapshot.is_some() || f.entries.first().is_none_or(|e| e.slot == 0))
            .all(|f| f.next_slot <= merged.next_slot || f.next_slot == 0)
    );
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::segment::Kind;

    fn log(snapshot: Option<u64>, slots: std::ops::Range<u64>) -> Recovered {
        Recovered {
            snapshot: snapshot.map(|p| (p, format!("state {p}").into_bytes())),
            entries: slots
                .clone()
                .map(|slot| Entry::new(slot, Kind::Service, vec![slot as u8]))
                .collect(),
            next_slot: slots.end,
            ..Recovered::default()
        }
    }

    #[test]
    fn a_damaged_start_is_taken_from_another_directory() {
        // Directory 0 lost its snapshot (entries from 10 on, to 30); 1 has a snapshot at
        // 10 and entries to 20; 2 is short.
        let merged = merge(&[log(None, 10..30), log(Some(10), 10..20), log(None, 0..5)])
            .expect("they agree");
        assert_eq!(merged.snapshot.as_ref().map(|s| s.0), Some(10));
        assert_eq!((merged.entries.len(), merged.next_slot), (20, 30));
    }

    #[test]
    fn a_gap_in_every_directory_ends_the_log_and_disagreement_is_refused() {
        let merged = merge(&[log(None, 0..5), log(None, 7..30)]).expect("they agree");
        assert_eq!(merged.next_slot, 5, "slots 5 and 6 are nowhere");
        let mut other = log(None, 0..8);
        other.entries[3] = Entry::new(3, Kind::Service, vec![99]);
        let e = merge(&[log(None, 0..5), other]).expect_err("slot 3 differs");
        assert_eq!((e.slot, e.first, e.second), (3, 0, 1));
        assert_eq!(merge(&[]).expect("nothing").next_slot, 0);
    }
}
