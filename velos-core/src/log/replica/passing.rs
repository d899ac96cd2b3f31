//! The start of a term: rule (term catch-up) — a replica Ω chose that the heartbeats show
//! behind learns in bulk before it leads ([`super::bulk`]) — and rule (up-to-date leader)
//! — one still more than a window behind, a leader too, passes the lead for a failure
//! timeout when a trusted peer can lead.

use super::Replica;
use crate::log::config::BULK_SLOTS;

impl Replica {
    /// Rule (up-to-date leader): whether I say I cannot lead because the others are well
    /// ahead of me ([`Replica::ready_to_lead`]).
    pub(super) fn lagging(&self) -> bool {
        self.now < self.learn.bulk.lagging_until
    }

    /// Rule (term catch-up): whether I may start leading now that Ω chose me. A replica
    /// whose heartbeats show a live peer applied more than a window past its next slot
    /// lags behind the others (back from a pause or a slow link, say): it first learns in
    /// bulk what a
    /// majority already decided from its next slot on — many slots per read — instead of
    /// adopting slot after slot in its window, one value read each (a leader 45 slots
    /// behind took about 7 µs a slot, and the log stood still meanwhile: the campaign's
    /// seeds 15 and 203 with its commit-gap check). A replica the heartbeats show up to
    /// date leads at once, as before (no extra round at a failover). Each bulk moves my
    /// next slot or ends the catch-up: it ends.
    pub(super) fn ready_to_lead(&mut self) -> bool {
        if self.lagging() {
            return false; // I passed the lead (rule (up-to-date leader)): Ω moves off me
        }
        let k = self.next_apply;
        let window = u64::from(self.config.pipeline);
        let behind = self.reached_past(k + window);
        if !behind && self.learn.bulk.term_from.is_none() {
            return true;
        }
        if self.learn.bulk.under_way.is_some() {
            return false; // a bulk under way ends or is given up within a failure timeout
        }
        let progressed = self.learn.bulk.term_from.is_none_or(|from| k > from);
        if behind && progressed && self.bulk_free() {
            self.learn.catch_up = None;
            // One read of a whole bulk's words: a lag of more than a window shows.
            self.learn.bulk.next_count = BULK_SLOTS;
            self.start_bulk(k);
            self.learn.bulk.term_from = Some(k);
            assert!(
                self.learn.bulk.under_way.is_some(),
                "rule (term catch-up): a bulk is out"
            );
            return false;
        }
        self.learn.bulk.term_from = None;
        let b = &self.learn.bulk;
        let unprovable = b.refused_at == Some(k) && b.ahead > self.config.pipeline;
        !self.pass_lead(unprovable)
    }

    /// Rule (up-to-date leader): whether I pass the lead now — I am more than a window
    /// behind (a trusted peer applied past my next slot by more than a window, or
    /// `unprovable`: my last bulk found nothing chosen there while live peers held more
    /// than a window of slots accepted that I lack — decided by a majority one of whose
    /// members is gone, which no read proves and a leader can only adopt, one value read
    /// each), a trusted peer says it can lead, and I did not pass within the last two
    /// failure timeouts. I then say I cannot lead for a failure timeout: Ω chooses an
    /// up-to-date replica (else me again, and I lead). I decide it of myself, so no two
    /// views disagree on who leads (judging others' lag did). A leader that finds itself
    /// behind this way steps down ([`super::Replica::follow_omega`]): a replica that led
    /// far behind (Ω chose it while the up-to-date one was paused) adopted slot after slot
    /// at about 4 µs each, for 386 µs (`velos vopr --seeds 5108..5109`).
    pub(super) fn pass_lead(&mut self, unprovable: bool) -> bool {
        let window = u64::from(self.config.pipeline);
        let behind = unprovable || self.reached_past(self.next_apply + window);
        let timeout = self.config.failure_timeout_ns;
        let rested = self.now >= self.learn.bulk.lagging_until.saturating_add(timeout);
        let pass = behind && rested && self.omega.able_peer(self.now);
        if pass {
            self.learn.bulk.lagging_until = self.now + timeout;
        }
        assert!(
            !pass || self.lagging(),
            "rule (up-to-date leader): I say I cannot lead"
        );
        pass
    }

    /// Ω chose another: a term catch-up under way is no longer one.
    pub(super) fn not_chosen(&mut self) {
        self.learn.bulk.term_from = None;
    }
}
