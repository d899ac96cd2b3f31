//! Client sessions: a command proposed in a session carries the session's id and a
//! sequence number, and every replica applies it at most once — a retry after an unknown
//! outcome (the leader crashed holding it) reaches `apply` only if the first copy never
//! did. The table of each session's last sequence (and, in memory, its response) is part
//! of the replicated state: it rides every snapshot.
//!
//! A session has one command outstanding at a time (its next sequence number is proposed
//! only once the last one resolved); a sequence number at or below the session's last is
//! a duplicate, skipped on every replica alike.

use super::batch::{push_leb128, take_leb128};
use std::collections::HashMap;

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

/// Each session's last applied sequence number and (since this replica applied it, not
/// restored it) its response.
#[derive(Debug)]
pub(crate) struct Sessions<R> {
    last: HashMap<u64, (u64, Option<R>)>,
}

impl<R> Default for Sessions<R> {
    fn default() -> Sessions<R> {
        Sessions {
            last: HashMap::new(),
        }
    }
}

/// What to do with a session command.
pub(crate) enum Verdict<R> {
    /// A new sequence number: apply it.
    Apply,
    /// Applied before: skip it; the response of that application, if known here.
    Duplicate(Option<R>),
}

impl<R: Clone> Sessions<R> {
    /// Whether session `id`'s command `seq` is new (rule (at most once)).
    pub(crate) fn check(&self, id: u64, seq: u64) -> Verdict<R> {
        match self.last.get(&id) {
            Some(&(last, ref response)) if seq <= last => {
                Verdict::Duplicate(if seq == last { response.clone() } else { None })
            }
            _ => Verdict::Apply,
        }
    }

    /// Session `id`'s command `seq` was applied and answered `response`.
    pub(crate) fn applied(&mut self, id: u64, seq: u64, response: &R) {
        let before = self.last.get(&id).map_or(0, |&(s, _)| s);
        assert!(
            seq > before,
            "rule (at most once): sequence numbers only grow"
        );
        self.last.insert(id, (seq, Some(response.clone())));
    }

    /// The table and `state` as one snapshot: `state`, then each session's id and last
    /// sequence (u64 each, little-endian), then the session count (u32).
    pub(crate) fn snapshot(&self, mut state: Vec<u8>) -> Vec<u8> {
        let mut ids: Vec<_> = self.last.iter().map(|(&id, &(seq, _))| (id, seq)).collect();
        ids.sort_unstable(); // every replica writes the same bytes for the same state
        // After the state, so a large state is not copied again (the system allocator
        // grows a large vector by remapping its pages).
        state.reserve_exact(16 * ids.len() + 4);
        for (id, seq) in &ids {
            state.extend_from_slice(&id.to_le_bytes());
            state.extend_from_slice(&seq.to_le_bytes());
        }
        state.extend_from_slice(&(ids.len() as u32).to_le_bytes());
        state
    }

    /// The table of `snapshot` (responses unknown: not in snapshots) and the state's
    /// bytes; `None` if the table is truncated.
    pub(crate) fn restore(snapshot: &[u8]) -> Option<(Sessions<R>, &[u8])> {
        let (rest, count) = snapshot.split_last_chunk::<4>()?;
        let count = u32::from_le_bytes(*count) as usize;
        let table = count.checked_mul(16).filter(|&t| t <= rest.len())?;
        let (state, mut pairs) = rest.split_at(rest.len() - table);
        let mut last = HashMap::with_capacity(count);
        while let Some((id, after)) = pairs.split_first_chunk::<8>() {
            let (seq, after) = after.split_first_chunk::<8>()?;
            last.insert(u64::from_le_bytes(*id), (u64::from_le_bytes(*seq), None));
            pairs = after;
        }
        Some((Sessions { last }, state))
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
        let mut t: Sessions<u8> = Sessions::default();
        assert!(matches!(t.check(5, 1), Verdict::Apply));
        t.applied(5, 1, &40);
        assert!(matches!(t.check(5, 1), Verdict::Duplicate(Some(40))));
        assert!(matches!(t.check(5, 2), Verdict::Apply));
        t.applied(5, 2, &41);
        assert!(
            matches!(t.check(5, 1), Verdict::Duplicate(None)),
            "older: no answer kept"
        );
        let bytes = t.snapshot(b"state".to_vec());
        let (restored, state) = Sessions::<u8>::restore(&bytes).expect("a table");
        assert_eq!(state, b"state");
        assert!(
            matches!(restored.check(5, 2), Verdict::Duplicate(None)),
            "responses stay home"
        );
        assert!(matches!(restored.check(5, 3), Verdict::Apply));
        assert!(
            Sessions::<u8>::restore(&[1, 2, 0, 0, 0]).is_none(),
            "truncated"
        );
    }
}
