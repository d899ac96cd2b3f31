//! Rule (term predictions): a leader predicts each acceptor's word of a slot it opens from
//! what the acceptors hold — by default its own acceptor's word of the slot (its *seed*,
//! loaded in the turn that opens the slot; a slot of a recycled position waits for it,
//! since the initial word predicted instead is held by no acceptor there) and, for an
//! acceptor whose word a seed was seen to mispredict, the words read from that acceptor
//! ahead of the window.
//!
//! Why: a leader's own words mirror the others' only where it accepted what they accepted.
//! A process that replaced a crashed replica holds blank words at every position it never
//! voted in, so when it leads, each slot's first prepare at every other acceptor expects
//! the wrong word and aborts, once per slot, for a whole ring lap — the commit rate halved
//! until the ring has lapped. A follower whose CASes were given up holds stale words the
//! same way, and a leader that predicted the initial word for a slot whose seed was not
//! loaded mispredicted every acceptor (on a recycled position each holds the previous
//! lap's word), and the retries, decided together, opened the next slots unseeded too.
//!
//! How: the first completion towards acceptor a of a slot's first prepare whose
//! prediction was my seed shows whether the seed was right there. Once it found another
//! word, my seed or a's word being of another lap than the slot's — a holds a lap of the
//! position otherwise than my acceptor does ([`Ahead::mispredicted`]; two differing states
//! of the slot's own instance are another proposer's promise or accept of it, a conflict
//! there, no sign of the positions ahead) —, a's words are read ahead of the window: one
//! multi-word read of up to [`AHEAD_SLOTS`] positions whose previous instances are decided
//! (further ahead it would read an older lap, or an instance still under way), the next
//! posted once less than half of what may be read is left ahead of the next slot to open.
//! They predict a's words of the slots opened while they cover them. Once a's words read
//! equal my seeds for [`AHEAD_SLOTS`] slots opened in a row, the seeds serve again. A stable leader whose seeds are right reads nothing; aborted first
//! attempts after a change of leader are those of the slots opened before the first
//! mispredicted completion came back and those opened before the first read did: about a
//! window (`pipeline`), not a lap.
//!
//! Safety: a prediction only decides whether a CAS succeeds (a CAS whose expected word is
//! the word does exactly what the RPC would, and otherwise nothing: Lemmas 4.1, 4.2), so
//! words read, however stale or torn, are as safe as any prediction. "A prediction is not a
//! confirmation" holds: promises, adoptions and acceptances still come only from CASes
//! that succeeded. Rule (fresh term) holds: a read word can only raise a prepare's number
//! (the bump above every predicted promise), never lower it below the term's floor. Lemma
//! (learning) is untouched: previous_decision counts depend on the ballot, not on
//! predictions. Words are read before the slots they predict are opened, so no CAS of
//! this term on those slots is among them.

use crate::log::ring::Ring;
use std::collections::VecDeque;

#[cfg(test)]
mod tests;

/// Slots one read ahead covers at most (the words of one acceptor's bulk catch-up region,
/// which a leader never uses otherwise: `replica/ahead.rs`).
const AHEAD_SLOTS: u32 = crate::log::config::BULK_SLOTS;

/// The words of one acceptor read ahead of the window.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Reading {
    /// The slot of `words[0]`.
    from: u64,
    /// Its words of the slots from `from` on, as read.
    words: VecDeque<u64>,
    /// Slots opened in a row whose word read here equaled my seed.
    agreeing: u32,
}

/// A read ahead to post: acceptor `acceptor`'s words of `count` slots from `from` on (one
/// position range of the ring, in order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(in crate::log) struct Read {
    pub acceptor: u16,
    pub from: u64,
    pub count: u32,
}

/// A leader's reads ahead (rule (term predictions)): empty while its seeds are right.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Ahead {
    /// Per acceptor (indexed by id, grown on first use): its words read ahead, once a seed
    /// mispredicted it.
    reading: Vec<Option<Reading>>,
    /// The reads out, at most one per acceptor.
    out: Vec<Read>,
}

impl Ahead {
    /// Nothing is read ahead, nor out: every acceptor is predicted by my seeds (a stable
    /// leader's case, kept cheap).
    pub(super) fn idle(&self) -> bool {
        self.out.is_empty() && self.reading.iter().all(Option::is_none)
    }

    /// Acceptor `a`'s word of `slot`, if a read covered it.
    pub(super) fn word(&self, a: u16, slot: u64) -> Option<u64> {
        let r = self.reading.get(usize::from(a))?.as_ref()?;
        let i = slot.checked_sub(r.from)?;
        r.words.get(usize::try_from(i).ok()?).copied()
    }

    /// Whether acceptor `a`'s words are read ahead.
    pub(super) fn reads(&self, a: u16) -> bool {
        self.reading
            .get(usize::from(a))
            .is_some_and(Option::is_some)
    }

    /// A slot's first prepare at `a` expected my seed and found another word, one of them
    /// of another lap than the slot's: `a`'s words are read ahead from slot `next` (the
    /// next to open) on.
    pub(super) fn mispredicted(&mut self, a: u16, next: u64) {
        if self.reads(a) {
            return;
        }
        let i = usize::from(a);
        if self.reading.len() <= i {
            self.reading.resize(i + 1, None);
        }
        self.reading[i] = Some(Reading {
            from: next,
            words: VecDeque::new(),
            agreeing: 0,
        });
    }

    /// `slot` opened with my seed `seed`: the words read of the slots up to it are used up,
    /// and an acceptor whose words read equaled my seeds for [`AHEAD_SLOTS`] slots in a
    /// row is predicted by my seeds again.
    pub(super) fn opened(&mut self, slot: u64, seed: u64) {
        for entry in &mut self.reading {
            let Some(r) = entry else { continue };
            let agrees = match slot.checked_sub(r.from) {
                Some(0) => r.words.front().map(|&w| w == seed),
                _ => None,
            };
            match agrees {
                Some(true) => r.agreeing += 1,
                Some(false) => r.agreeing = 0,
                None => {} // not read (yet): no evidence either way
            }
            // Drop the words of `slot` and below.
            while r.from <= slot {
                if r.words.pop_front().is_none() {
                    r.from = slot + 1;
                    break;
                }
                r.from += 1;
            }
            if r.agreeing >= AHEAD_SLOTS {
                *entry = None;
            }
        }
    }

    /// The reads to post now, given `next` (the next slot to open), `end` (no word of a
    /// slot from there on is read: its position's previous instance may still be under
    /// way) and where each range of the ring ends (`run(from)`: the slots from `from` on
    /// before the positions wrap); each is recorded as out. A read is posted once less
    /// than half of what may be read is read ahead of `next`. `may_read(a)`: a read
    /// towards `a` may be posted now.
    pub(super) fn wanted(
        &mut self,
        (next, end): (u64, u64),
        run: impl Fn(u64) -> u32,
        may_read: impl Fn(u16) -> bool,
        out: &mut Vec<Read>,
    ) {
        let span = end.saturating_sub(next).min(u64::from(AHEAD_SLOTS));
        for (i, entry) in self.reading.iter_mut().enumerate() {
            let a = i as u16;
            let Some(r) = entry else { continue };
            if self.out.iter().any(|o| o.acceptor == a) || !may_read(a) {
                continue;
            }
            let covered = r.from + r.words.len() as u64;
            if span == 0 || covered >= next + span.div_ceil(2) {
                continue;
            }
            let from = covered.max(next);
            let count = u64::from(run(from).min(AHEAD_SLOTS)).min(end - from);
            if count == 0 {
                continue; // a ring that ends: nothing left to read
            }
            if from > covered {
                // Nothing read reaches the next slot: start afresh there.
                r.words.clear();
                r.from = from;
            }
            let read = Read {
                acceptor: a,
                from,
                count: count as u32,
            };
            assert!(
                read.from >= next && read.from + count <= end,
                "rule (term predictions): words are read before their slots open, once \
                 their position's previous instance is decided"
            );
            self.out.push(read);
            out.push(read);
        }
    }

    /// The read out towards `a`, if any.
    pub(super) fn out(&self, a: u16) -> Option<Read> {
        self.out.iter().find(|o| o.acceptor == a).copied()
    }

    /// The acceptors with a read out (bit a).
    pub(super) fn out_mask(&self) -> u64 {
        self.out.iter().fold(0, |m, o| m | 1 << o.acceptor)
    }

    /// The read out towards `a` completed with `words` (`None`: it failed, or was given
    /// up — the acceptor is suspected or replaced: its words are predicted by my seeds).
    pub(super) fn read_done(&mut self, a: u16, words: Option<&[u64]>) {
        let at = self
            .out
            .iter()
            .position(|o| o.acceptor == a)
            .expect("a read out towards the acceptor");
        let read = self.out.swap_remove(at);
        let entry = &mut self.reading[usize::from(a)];
        let (Some(words), Some(r)) = (words, entry.as_mut()) else {
            *entry = None;
            return;
        };
        assert_eq!(words.len(), read.count as usize, "the words read");
        // What is kept ends where the read starts, unless the slots opened while it was
        // out used up everything kept and more: their words are of no use any more.
        let covered = r.from + r.words.len() as u64;
        assert!(covered >= read.from, "reads ahead follow one another");
        let used = usize::try_from(covered - read.from).unwrap_or(usize::MAX);
        r.words.extend(words.iter().skip(used).copied());
    }

    /// Acceptor `a`'s process was replaced (or is given up): nothing read there predicts
    /// its words any more; a read out there still lands (see [`Ahead::read_done`]).
    pub(super) fn forget(&mut self, a: u16) {
        if let Some(entry) = self.reading.get_mut(usize::from(a)) {
            *entry = None;
        }
    }
}

impl super::Leader {
    /// Rule (term predictions): the reads ahead to post now on `ring` (pushed on `out`,
    /// recorded as out); `may_read(a)`: a read towards `a` may be posted now.
    pub(in crate::log) fn reads_ahead(
        &mut self,
        ring: Ring,
        may_read: impl Fn(u16) -> bool,
        out: &mut Vec<Read>,
    ) {
        assert!(
            !self.repair || self.ahead == Ahead::default(),
            "rule (term predictions): a repair predicts what its learner read"
        );
        let slots = u64::from(ring.slots);
        // The slots from `from` on up to the ring's end (its positions run in order).
        let run = |from: u64| match ring.recycles() {
            true => ring.slots - ring.position(from),
            false => u32::try_from(slots.saturating_sub(from)).expect("below the slots"),
        };
        // A position's words are the previous lap's final ones once that instance is
        // decided: every slot below my prefix is.
        let end = match ring.recycles() {
            true => self.prefix + slots,
            false => slots,
        };
        let me = self.me.0;
        let may_read = |a| a != me && may_read(a);
        self.ahead.wanted((self.next_slot, end), run, may_read, out);
        assert!(
            out.iter().all(|r| r.acceptor != me),
            "rule (term predictions): my own acceptor is predicted by my own words"
        );
    }

    /// Whether this leader reads nothing ahead and has no read out.
    pub(in crate::log) fn reads_ahead_idle(&self) -> bool {
        self.ahead.idle()
    }

    /// The read ahead out towards `a`, if any.
    pub(in crate::log) fn read_ahead_out(&self, a: u16) -> Option<Read> {
        self.ahead.out(a)
    }

    /// The acceptors with a read ahead out (bit a).
    pub(in crate::log) fn reads_ahead_out(&self) -> u64 {
        self.ahead.out_mask()
    }

    /// The read ahead out towards `a` completed with `words` (`None`: failed or given up).
    pub(in crate::log) fn read_ahead_done(&mut self, a: u16, words: Option<&[u64]>) {
        self.ahead.read_done(a, words);
    }
}
