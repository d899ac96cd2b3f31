//! Client sessions: a command proposed in a session carries the session's id and a
//! sequence number, and every replica applies it at most once — a retry after an unknown
//! outcome (the leader crashed holding it) reaches `apply` only if the first copy never
//! did. The table of each session's last sequence (and, in memory, its response) is part
//! of the replicated state: it rides every snapshot.
//!
//! A session has one command outstanding at a time (its next sequence number is proposed
//! only once the last one resolved); a sequence number at or below the session's last is
//! a duplicate, skipped on every replica alike. The table keeps the
//! [`Config::max_sessions`](super::Config) most recently used sessions; a command of a
//! session evicted from it (a sequence number past 1 that the table does not know) is not
//! applied and answers [`Error::SessionExpired`](super::Error::SessionExpired), since it
//! might repeat one applied before the eviction.

use super::batch::{push_leb128, take_leb128};
use std::collections::{BTreeSet, HashMap};

/// The largest session envelope: two LEB128-encoded `u64`s.
pub(crate) const ENVELOPE_BYTES_MAX: usize = 20;

/// `command` in session `id` at sequence `seq`, as it travels in a session batch.
pub(crate) fn wrap(id: u64, seq: u64, command: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(command.len() + ENVELOPE_BYTES_MAX);
    push_leb128(&mut out, id);
    push_leb128(&mut out, seq);
    out.extend_from_slice(command);
    out
}

/// A session frame's id, sequence and command; `None` if the envelope is malformed.
pub(crate) fn unwrap(frame: &[u8]) -> Option<(u64, u64, &[u8])> {
    let (id, rest) = take_leb128(frame, ENVELOPE_BYTES_MAX / 2)?;
    let (seq, command) = take_leb128(rest, ENVELOPE_BYTES_MAX / 2)?;
    Some((id, seq, command))
}

/// Each session's last applied sequence number, the slot that last applied one (its age)
/// and (since this replica applied it, not restored it) its response — for the `max` most
/// recently used sessions: a new session beyond them evicts the one used least recently
/// (every replica evicts the same: ages are log positions).
#[derive(Debug)]
pub(crate) struct Sessions<R> {
    last: HashMap<u64, Kept<R>>,
    /// `(slot last used, id)` of every session kept, oldest first.
    by_age: BTreeSet<(u64, u64)>,
    max: usize,
}

/// What the table keeps of one session.
#[derive(Debug)]
struct Kept<R> {
    seq: u64,
    used: u64,
    response: Option<R>,
}

/// What to do with a session command.
pub(crate) enum Verdict<R> {
    /// A new sequence number: apply it.
    Apply,
    /// Applied before: skip it; the response of that application, if known here.
    Duplicate(Option<R>),
    /// A session the table does not keep, at a sequence number past its first: it was
    /// evicted (or never opened here), so whether this command applied is unknown —
    /// it is not applied.
    Expired,
}

impl<R: Clone> Sessions<R> {
    /// An empty table that keeps `max` sessions (at least one).
    pub(crate) fn new(max: usize) -> Sessions<R> {
        Sessions {
            last: HashMap::new(),
            by_age: BTreeSet::new(),
            max: max.max(1),
        }
    }

    /// Whether session `id`'s command `seq` is new (rule (at most once)).
    pub(crate) fn check(&self, id: u64, seq: u64) -> Verdict<R> {
        match self.last.get(&id) {
            Some(kept) if seq <= kept.seq => Verdict::Duplicate(if seq == kept.seq {
                kept.response.clone()
            } else {
                None
            }),
            Some(_) => Verdict::Apply,
            // Rule (expired session): a session starts at 1; a later number from a session
            // not kept may repeat a command applied before its eviction.
            None if seq > 1 => Verdict::Expired,
            None => Verdict::Apply,
        }
    }

    /// Session `id`'s command `seq` was applied in `slot` and answered `response`; the
    /// least recently used session is evicted if the table is over its size.
    pub(crate) fn applied(&mut self, id: u64, seq: u64, slot: u64, response: &R) {
        let before = self.last.get(&id).map_or(0, |k| k.seq);
        assert!(
            seq > before,
            "rule (at most once): sequence numbers only grow"
        );
        if let Some(kept) = self.last.get(&id) {
            self.by_age.remove(&(kept.used, id));
        }
        self.last.insert(
            id,
            Kept {
                seq,
                used: slot,
                response: Some(response.clone()),
            },
        );
        self.by_age.insert((slot, id));
        self.evict();
        assert_eq!(
            self.last.len(),
            self.by_age.len(),
            "one age per session kept"
        );
    }

    /// Sessions the table keeps at most.
    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// Sessions kept.
    pub(crate) fn len(&self) -> usize {
        self.last.len()
    }

    fn evict(&mut self) {
        while self.last.len() > self.max {
            let (_, id) = self.by_age.pop_first().expect("a session to evict");
            self.last.remove(&id);
        }
    }

    /// The table and `state` as one snapshot: `state`, then each session's id, last
    /// sequence and the slot that last used it (u64 each, little-endian, by id), then the
    /// session count (u32).
    pub(crate) fn snapshot(&self, mut state: Vec<u8>) -> Vec<u8> {
        let mut kept: Vec<_> = self
            .last
            .iter()
            .map(|(&id, k)| (id, k.seq, k.used))
            .collect();
        kept.sort_unstable(); // every replica writes the same bytes for the same state
        // After the state, so a large state is not copied again (the system allocator
        // grows a large vector by remapping its pages).
        state.reserve_exact(24 * kept.len() + 4);
        for (id, seq, used) in &kept {
            for word in [id, seq, used] {
                state.extend_from_slice(&word.to_le_bytes());
            }
        }
        state.extend_from_slice(&(kept.len() as u32).to_le_bytes());
        state
    }

    /// The table of `snapshot` keeping `max` sessions (responses unknown: not in
    /// snapshots) and the state's bytes; `None` if the table is truncated.
    pub(crate) fn restore(snapshot: &[u8], max: usize) -> Option<(Sessions<R>, &[u8])> {
        let (rest, count) = snapshot.split_last_chunk::<4>()?;
        let count = u32::from_le_bytes(*count) as usize;
        let table = count.checked_mul(24).filter(|&t| t <= rest.len())?;
        let (state, mut triples) = rest.split_at(rest.len() - table);
        let mut sessions = Sessions::new(max);
        let word = |b: &[u8; 8]| u64::from_le_bytes(*b);
        while let Some((id, after)) = triples.split_first_chunk::<8>() {
            let (seq, after) = after.split_first_chunk::<8>()?;
            let (used, after) = after.split_first_chunk::<8>()?;
            let (id, used) = (word(id), word(used));
            let kept = Kept {
                seq: word(seq),
                used,
                response: None,
            };
            sessions.last.insert(id, kept);
            sessions.by_age.insert((used, id));
            triples = after;
        }
        sessions.evict(); // a smaller table than the snapshot's writer kept
        Some((sessions, state))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_round_trips_and_a_truncated_one_is_refused() {
        for (id, seq) in [(1, 1), (u64::MAX, 7), (0x1234_5678_9abc, u64::MAX)] {
            let frame = wrap(id, seq, b"cmd");
            assert!(frame.len() <= 3 + ENVELOPE_BYTES_MAX);
            assert_eq!(unwrap(&frame), Some((id, seq, &b"cmd"[..])));
        }
        assert_eq!(unwrap(&[0x80]), None);
        assert_eq!(unwrap(&[]), None);
    }

    #[test]
    fn duplicates_are_told_and_the_table_rides_a_snapshot() {
        let mut t: Sessions<u8> = Sessions::new(8);
        assert!(matches!(t.check(5, 1), Verdict::Apply));
        t.applied(5, 1, 10, &40);
        assert!(matches!(t.check(5, 1), Verdict::Duplicate(Some(40))));
        assert!(matches!(t.check(5, 2), Verdict::Apply));
        t.applied(5, 2, 11, &41);
        assert!(
            matches!(t.check(5, 1), Verdict::Duplicate(None)),
            "older: no answer kept"
        );
        let bytes = t.snapshot(b"state".to_vec());
        let (restored, state) = Sessions::<u8>::restore(&bytes, 8).expect("a table");
        assert_eq!(state, b"state");
        assert!(
            matches!(restored.check(5, 2), Verdict::Duplicate(None)),
            "responses stay home"
        );
        assert!(matches!(restored.check(5, 3), Verdict::Apply));
        assert!(
            Sessions::<u8>::restore(&[1, 2, 0, 0, 0], 8).is_none(),
            "truncated"
        );
    }

    #[test]
    fn the_least_recently_used_session_is_evicted_and_then_expired() {
        let mut t: Sessions<u8> = Sessions::new(2);
        t.applied(1, 1, 10, &0);
        t.applied(2, 1, 11, &0);
        t.applied(1, 2, 12, &0); // session 1 used again: session 2 is now the oldest
        t.applied(3, 1, 13, &0); // a third: 2 goes
        assert_eq!(t.len(), 2);
        assert!(
            matches!(t.check(2, 2), Verdict::Expired),
            "evicted, past its first"
        );
        assert!(matches!(t.check(1, 3), Verdict::Apply), "kept");
        assert!(matches!(t.check(3, 1), Verdict::Duplicate(Some(0))), "kept");
        assert!(
            matches!(t.check(4, 1), Verdict::Apply),
            "a new session starts at 1"
        );
        // The ages ride the snapshot: a restored table evicts the same session next.
        let bytes = t.snapshot(Vec::new());
        let (mut restored, _) = Sessions::<u8>::restore(&bytes, 2).expect("a table");
        restored.applied(4, 1, 14, &0);
        assert!(
            matches!(restored.check(1, 3), Verdict::Expired),
            "1 was the oldest"
        );
        assert!(matches!(restored.check(3, 2), Verdict::Apply));
        // A smaller table than the writer's keeps the most recent.
        let (small, _) = Sessions::<u8>::restore(&bytes, 1).expect("a table");
        assert_eq!(small.len(), 1);
        assert!(matches!(small.check(3, 2), Verdict::Apply));
    }
}
