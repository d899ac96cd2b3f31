//! The start of a term: rule (term catch-up) — a replica Ω chose that the heartbeats show
//! behind learns in bulk before it leads ([`super::bulk`]) — and rule (up-to-date leader)
//! — one still more than a window behind, a leader too, passes the lead when a trusted
//! peer can lead —, and rule (deciding leader) — a leader that decides nothing while
//! proposals wait passes the lead.

use super::{Replica, Role};
use crate::log::config::BULK_SLOTS;

/// Rule (deciding leader): how many times a pass's period doubles at most.
const MAX_DOUBLINGS: u32 = 6;

/// Rule (deciding leader): the fewest turns of mine a stall spans (a gray failure's turns
/// are short: its posts crawl on the wire, not on my CPU).
const STALL_TURNS: u32 = 8;

/// Passing the lead (rules (up-to-date leader) and (deciding leader)); times are on my
/// local clock.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Passing {
    /// I passed the lead and say I cannot lead until then.
    lagging_until: u64,
    /// Rule (deciding leader): the latest time I led with nothing waiting, applied a slot,
    /// or started a term.
    quiet_at: u64,
    /// Rule (deciding leader): leads passed since my last term that went on without a
    /// stall; each doubles how long I say I cannot lead.
    stalls: u32,
    /// Rule (deciding leader): when my latest term started.
    led_since: u64,
    /// Rule (deciding leader): my turns that started since `quiet_at`.
    quiet_turns: u32,
}

impl Replica {
    /// Rules (up-to-date leader) and (deciding leader): whether I say I cannot lead, having
    /// passed the lead ([`Replica::say_unable`]).
    pub(super) fn lagging(&self) -> bool {
        self.now < self.passing.lagging_until
    }

    /// Rule (term catch-up): whether I may start leading now that Ω chose me. A replica
    /// whose heartbeats show a live peer applied more than a window past its next slot
    /// lags behind the others (back from a pause or a slow link, say): it first learns in
    /// bulk what a majority already decided from its next slot on — many slots per read —
    /// instead of adopting slot after slot in its window, one value read each (a leader 45
    /// slots behind took about 7 µs a slot, and the log stood still meanwhile: the
    /// campaign's seeds 15 and 203 with its commit-gap check). A replica the heartbeats show up to
    /// date leads at once, as before (no extra round at a failover). Each bulk moves my
    /// next slot or ends the catch-up: it ends.
    pub(super) fn ready_to_lead(&mut self) -> bool {
        if self.lagging() && self.omega.able_peer() {
            // I passed the lead (rules (up-to-date leader), (deciding leader)): Ω moves
            // off me. Rule (nobody else): not while no peer I trust can lead — it chose me
            // for want of one, and waiting out my pass helps nobody. Two replicas of three
            // that both passed during a slow sender's fault (the third crashed) each
            // waited out a pass doubled to 160 µs and more after the fault had ended, and
            // the log stood still (`velos vopr --seeds 10436..10437`).
            return false;
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
    /// failure timeouts. I then say I cannot lead for a while ([`Replica::say_unable`]): Ω
    /// chooses an
    /// up-to-date replica (else me again, and I lead). I decide it of myself, so no two
    /// views disagree on who leads (judging others' lag did). A leader that finds itself
    /// behind this way steps down ([`super::Replica::follow_omega`]): a replica that led
    /// far behind (Ω chose it while the up-to-date one was paused) adopted slot after slot
    /// at about 4 µs each, for 386 µs (`velos vopr --seeds 5108..5109`).
    pub(super) fn pass_lead(&mut self, unprovable: bool) -> bool {
        let window = u64::from(self.config.pipeline);
        // A leader is behind only past the slots it opened: those it is deciding, and a
        // follower may learn them from the acceptors' words before the leader has tested
        // its own completions (with the old leader's last accepts, up to a window past
        // them). Counted from its next slot to apply, a leader of a window of 2 slowed by
        // near-overflow slots passed the lead to a replica further behind than itself
        // (`velos vopr --overflow --seeds 6943..6944`: 86 µs without a commit).
        let from = match &self.role {
            Role::Leader(l) => l.next_slot().max(self.next_apply),
            Role::Follower => self.next_apply,
        };
        let behind = unprovable || self.reached_past(from + window);
        let timeout = self.config.failure_timeout_ns;
        let rested = self.now >= self.passing.lagging_until.saturating_add(timeout);
        let pass = behind && rested && self.omega.able_peer();
        if pass {
            self.say_unable();
        }
        assert!(
            !pass || self.lagging(),
            "rule (up-to-date leader): I say I cannot lead"
        );
        pass
    }

    /// Rule (deciding leader): whether I, leading, pass the lead now because I decided
    /// nothing for two failure timeouts while proposals waited (since my term started,
    /// since I last applied a slot, or since nothing waited, whichever is latest; waiting
    /// for the ring's room does not count). A gray
    /// failure: my NIC or link sends slowly while the others read my heartbeat at full
    /// speed (`velos_sim`'s `Fault::DelayFrom`), so they trust me and wait while every
    /// operation I post crawls; my own reads of their heartbeats crawl too, so my Ω
    /// suspects them all and would keep me leading for good. I judge only myself: I say I
    /// cannot lead (and name no leader in my heartbeat while my Ω names me, so nobody
    /// takes me for a claimant) for a failure timeout, doubled at each pass in a row up to
    /// 64 times, and Ω moves the lead to a replica that can decide. A pass costs liveness
    /// only: safety is the slot protocol's. Back to one failure timeout once a term of mine
    /// lasted 64 failure timeouts (a slow leader that still decides now and then keeps
    /// passing: one that took the lead back after each failure timeout halved the rate).
    pub(super) fn stalled(&mut self) -> bool {
        let timeout = self.config.failure_timeout_ns;
        let b = &mut self.passing;
        if self.now >= b.led_since.saturating_add(timeout << MAX_DOUBLINGS) {
            b.stalls = 0; // a term that went on that long without a stall
        }
        // The clock first: a turn of a leader that decides costs a compare. The stall
        // clock restarts when work reaches an idle leader ([`Replica::work_arrives`]).
        // Evidence, not my own slowness: also [`STALL_TURNS`] turns of mine in the quiet
        // time (a leader of 21 replicas posts for 28 µs in one turn, and a term's first
        // attempts, aborted by its predictions, take three turns: judged by the clock
        // alone it passed the lead before its second attempt was tested).
        if self.now < b.quiet_at.saturating_add(2 * timeout) || b.quiet_turns < STALL_TURNS {
            return false;
        }
        let Role::Leader(l) = &self.role else {
            return false;
        };
        // Waiting for the ring's room is not my slowness: a successor would wait too.
        let waits = (!l.pending.is_empty() || l.in_flight_values() > 0)
            && !l.waits_for_room(|| self.room());
        if !waits {
            self.passing.quiet_at = self.now;
            self.passing.quiet_turns = 0;
            return false;
        }
        self.say_unable();
        assert!(
            self.lagging(),
            "rule (deciding leader): I say I cannot lead"
        );
        true
    }

    /// Rules (up-to-date leader) and (deciding leader): I pass the lead — I say I cannot
    /// lead for a failure timeout, doubled at each pass since my last term that went on
    /// for 64 failure timeouts, up to 64 of them. A replica whose own reads crawl (its
    /// NIC sends slowly) suspects every peer, so its Ω names it again as soon as it can
    /// lead: passing for one failure timeout each time, it took the lead back every few
    /// tens of µs and halved the log's rate (`velos sim --delay-from 0@100us+5ms:20us`).
    fn say_unable(&mut self) {
        let b = &mut self.passing;
        let period = self.config.failure_timeout_ns << b.stalls.min(MAX_DOUBLINGS);
        b.lagging_until = self.now + period;
        b.stalls += 1;
        assert!(self.lagging(), "I say I cannot lead");
    }

    /// Rule (deciding leader): a turn of mine starts.
    pub(super) fn count_turn(&mut self) {
        self.passing.quiet_turns = self.passing.quiet_turns.saturating_add(1);
    }

    /// Rule (deciding leader): a command reaches me, leading, with nothing waiting
    /// before it (`idle`): the stall clock starts now.
    pub(super) fn work_arrives(&mut self, idle: bool) {
        if idle {
            self.passing.quiet_at = self.now;
            self.passing.quiet_turns = 0;
        }
    }

    /// Rule (deciding leader): a slot applied while leading, or a term started
    /// (`started`): the stall clock starts again.
    pub(super) fn leader_moved(&mut self, started: bool) {
        self.passing.quiet_at = self.now;
        self.passing.quiet_turns = 0;
        if started {
            self.passing.led_since = self.now;
        }
    }

    /// Rule (able leader): whether my reads reach a majority of my next slot's voters
    /// promptly — counting myself, the voters whose latest heartbeat read took, or whose
    /// read out has taken, at most a failure timeout. A replica whose NIC sends slowly
    /// sees every read crawl while the others read it at full speed: it could decide
    /// nothing, and its Ω, trusting a peer again whenever a late read lands, made it take
    /// the lead back now and then, a stall of two failure timeouts each time (`velos vopr
    /// --seeds 984..985`); a read's round trip stays slow until a prompt one replaces it.
    /// (A quarter of a failure timeout passed over a leader whose followers were merely
    /// slowed, 3 µs a step.)
    pub(super) fn reaches_majority(&self) -> bool {
        let k = self.next_apply;
        let prompt = self.config.failure_timeout_ns;
        let fast = self
            .membership
            .voters(k)
            .iter()
            .filter(|&a| a == self.me || self.read_latency(a) <= prompt)
            .count();
        fast >= self.membership.at(k).majority()
    }

    /// How long my heartbeat reads of `a` take, on evidence: the latest one's age at the
    /// last test that found it out, or the one out's age at such a test if longer. A test
    /// that finds a read complete shows nothing slow, however long my turn was: a leader
    /// of 31 replicas, its turns longer than a failure timeout, judged its own reads slow
    /// and passed the lead with nothing failing (`velos sim --replicas 31`).
    fn read_latency(&self, a: u16) -> u64 {
        let i = usize::from(a);
        let out = match self.beat.heartbeat_asked[i] {
            true => self.omega.waited_for(a),
            false => 0,
        };
        self.beat.round_trips[i].max(out)
    }

    /// Ω chose another: a term catch-up under way is no longer one.
    pub(super) fn not_chosen(&mut self) {
        self.learn.bulk.term_from = None;
    }
}
