//! Ω, the leader oracle: every replica bumps a heartbeat counter in its own memory; the
//! others read it over RDMA and suspect a replica whose counter has not changed for the
//! failure timeout. The leader is chosen among the members that are not suspected and can
//! lead; among those, the lowest that claims the lead already, else the lowest (Mu's
//! lowest-id rule, with a timeout in nanoseconds of the node's clock instead of a score;
//! both are configuration).
//!
//! Rule (able leader): a replica that cannot lead — it does not vote in its next slot (a
//! replacement still catching up to the configuration that names it, a member removed) —
//! says so in its heartbeat word, and Ω passes it over. Deferring to it stopped the log: the others
//! waited for a leader that never led (a replacement with a lower id than the acting
//! leader's, after that leader crashed).
//!
//! Rule (sticky leader): a replica whose heartbeat names itself as the leader it trusts
//! claims the lead (it leads: it can); while a claimant is trusted, Ω keeps it, the lowest
//! if several claim (two leaders after a partition: the higher steps down). A replica with
//! a lower id that becomes able — a replacement in the crashed former leader's place —
//! does not take the lead from a working leader: a hand-over is a window in which nobody
//! takes proposals. When no claimant is trusted, the lowest able member is chosen; when
//! none is able either, the lowest trusted member, as before these rules.
//!
//! The timeout is fixed ([`Detector::Fixed`]: the configured failure timeout) or adaptive
//! ([`Detector::Adaptive`], the default): per peer, a decaying maximum of the gaps seen
//! between changes of its counter (each gap is a heartbeat-read round trip or a bump
//! period, whichever is longer, with the jitter of both sides), times a safety factor,
//! between a floor and the configured failure timeout as the ceiling. Until a peer's
//! counter has moved twice, its timeout is the ceiling. Rule (Ω-time): all of it is
//! measured on the local clock (`Op::Now`), so it stays deterministic; a wrong suspicion
//! costs only liveness, never safety (the slot protocol is Paxos).
//!
//! Rule (Ω-evidence): a peer is suspected on evidence, not on the reader's own delays: a
//! read *issued* more than the timeout after the counter was last seen to change came
//! back with it unchanged (or failed), or a test more than the timeout after that change
//! found a read still out. A reader whose turns are long (a leader of 21 posting a CAS and
//! a put to every acceptor for every slot of its window) tests its reads late; measured
//! from its own clock at the test, a peer that bumped on time looked silent, and the
//! leadership flapped with nothing failing (`velos sim --replicas 21`). So that evidence
//! comes as soon as the clock alone used to suspect, a read out past its peer's timeout is
//! tested in the next turn rather than at the next heartbeat ([`Omega::overdue`]), and a
//! turn whose tests brought new evidence judges again at its plan, not at the next turn's
//! start (`Replica::plan`): a crashed leader is replaced as fast as before.

use super::membership::Members;

/// How suspicion is timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Detector {
    /// Suspect after the configured failure timeout without a change.
    Fixed,
    /// Suspect after `factor` times the recent largest gap between changes (a decaying
    /// maximum that loses 1/16 of its excess per change), at least `floor_periods`
    /// heartbeat periods and at most the configured failure timeout.
    Adaptive {
        /// The safety factor over the largest recent gap.
        factor: u64,
        /// The smallest timeout, in heartbeat periods.
        floor_periods: u64,
    },
}

impl Detector {
    /// The default adaptive detector: 3 times the largest recent gap, at least 4 heartbeat
    /// periods.
    pub const ADAPTIVE: Detector = Detector::Adaptive {
        factor: 3,
        floor_periods: 4,
    };
}

/// What one replica knows of the others' heartbeats.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Omega {
    me: u16,
    timeout_ns: u64,
    /// `Some((factor, floor))` when adaptive.
    adaptive: Option<(u64, u64)>,
    /// Per replica: the last counter value read.
    last: Vec<u64>,
    /// Per replica: when the counter was last seen to change (ns of the local clock).
    changed_at: Vec<u64>,
    /// Per replica: whether a change was seen (the next one measures a gap).
    seen: Vec<bool>,
    /// Per replica: the latest issue time of a read that found the counter unchanged, or
    /// failed (rule (Ω-evidence)).
    unchanged_at: Vec<u64>,
    /// Per replica: when the read now out was issued, if one is.
    asked_at: Vec<Option<u64>>,
    /// Per replica: the latest test that found the read out still incomplete (its issue
    /// time if none did).
    waited_at: Vec<u64>,
    /// Per replica: the decaying maximum gap between changes (0: none measured yet).
    gap: Vec<u64>,
    /// The replicas that may lead (the members of the replica's next slot,
    /// [`super::membership`]).
    members: Members,
    /// Per replica: its last heartbeat said it can lead (rule (able leader)); for me, what
    /// I know of myself.
    able: Vec<bool>,
    /// Per replica: its last heartbeat named itself as the leader it trusts (rule (sticky
    /// leader)); for me, whether I lead.
    claims: Vec<bool>,
    /// Derived, kept: the replicas suspected now (bit r) and the leader they leave,
    /// recomputed by every method that changes what they derive from, so that the turns
    /// that only ask (every turn asks) compute nothing.
    suspected: u64,
    leader: u16,
}

impl Omega {
    /// Replica `me` of `replicas`, suspecting after `timeout_ns` without a change (or
    /// sooner, as `detector` adapts to heartbeats every `period_ns`); every replica counts
    /// as seen alive at time `now`.
    pub fn new(
        me: u16,
        replicas: u16,
        (timeout_ns, period_ns): (u64, u64),
        detector: Detector,
        now: u64,
    ) -> Omega {
        assert!(me < replicas, "replica {me} of {replicas}");
        assert!(timeout_ns > 0, "a failure timeout");
        let n = usize::from(replicas);
        let mut omega = Omega {
            me,
            members: Members::all(replicas),
            timeout_ns,
            adaptive: match detector {
                Detector::Fixed => None,
                Detector::Adaptive {
                    factor,
                    floor_periods,
                } => Some((factor, floor_periods.saturating_mul(period_ns))),
            },
            last: vec![0; n],
            changed_at: vec![now; n],
            seen: vec![false; n],
            unchanged_at: vec![now; n],
            asked_at: vec![None; n],
            waited_at: vec![now; n],
            gap: vec![0; n],
            able: vec![true; n],
            claims: vec![false; n],
            suspected: 0,
            leader: 0,
        };
        omega.refresh();
        omega
    }

    /// Recomputes the suspected replicas and the leader from the state (the fields kept
    /// for the turns that only ask).
    fn refresh(&mut self) {
        self.suspected = (0..self.last.len() as u16)
            .filter(|&p| self.suspicion(p))
            .fold(0, |m, p| m | 1 << p);
        self.refresh_leader();
    }

    /// [`Omega::refresh`] after a change of what is known of `peer` alone: a peer's
    /// suspicion reads its own evidence and timeout only.
    fn refresh_peer(&mut self, peer: u16) {
        let bit = 1u64 << peer;
        self.suspected = match self.suspicion(peer) {
            true => self.suspected | bit,
            false => self.suspected & !bit,
        };
        self.refresh_leader();
    }

    /// The kept leader, from the kept suspicions, the standings and the members.
    fn refresh_leader(&mut self) {
        let first = self
            .members
            .iter()
            .next()
            .expect("a configuration has a member");
        let trusted = Members(self.members.0 & !self.suspected);
        let leader = trusted
            .iter()
            .find(|&p| self.claims[usize::from(p)])
            .or_else(|| trusted.iter().find(|&p| self.able[usize::from(p)]))
            .or_else(|| trusted.iter().next())
            .unwrap_or(first);
        self.leader = leader;
        assert!(
            self.members.contains(self.leader),
            "Ω: the leader is a member of my next slot"
        );
    }

    /// What replica `peer`'s last heartbeat said of its standing, or (for me) what I know
    /// of mine: whether it can lead, and whether it claims the lead.
    pub fn standing(&mut self, peer: u16, able: bool, claims: bool) {
        let p = usize::from(peer);
        if (self.able[p], self.claims[p]) == (able, claims) {
            return; // every turn says so of me: nothing to recompute
        }
        self.able[p] = able;
        self.claims[p] = claims;
        self.refresh_leader();
    }

    /// A fresh process took replica `peer`'s place: it cannot lead until its heartbeat says
    /// it can.
    pub fn replaced(&mut self, peer: u16) {
        assert_ne!(peer, self.me, "a peer is replaced, not myself");
        self.standing(peer, false, false);
    }

    /// A read of replica `peer`'s counter was issued at `at`.
    pub fn asked(&mut self, peer: u16, at: u64) {
        self.asked_at[usize::from(peer)] = Some(at);
        self.waited_at[usize::from(peer)] = at;
        self.refresh_peer(peer);
    }

    /// A test at `at` found the read of replica `peer`'s counter still out: whether that
    /// made a peer I trusted suspected (rule (Ω-evidence)).
    pub fn pending(&mut self, peer: u16, at: u64) -> bool {
        let trusted = !self.suspects(peer);
        let p = usize::from(peer);
        self.waited_at[p] = self.waited_at[p].max(at);
        self.refresh_peer(peer);
        trusted && self.suspects(peer)
    }

    /// When the read of replica `peer`'s counter now out was issued, if one is.
    pub fn issued(&self, peer: u16) -> Option<u64> {
        self.asked_at[usize::from(peer)]
    }

    /// How long the read of `peer`'s counter now out had been out at the latest test
    /// that found it so (0 if none did, or none is out): my evidence of a slow read,
    /// however long my own turns are (rule (able leader) measures promptness with it).
    pub fn waited_for(&self, peer: u16) -> u64 {
        let p = usize::from(peer);
        self.asked_at[p].map_or(0, |i| self.waited_at[p].saturating_sub(i))
    }

    /// The read of replica `peer`'s counter issued at `issued` failed: it is as silent as
    /// an unchanged counter from then on (rule (Ω-evidence)). Whether that made a peer I
    /// trusted suspected.
    pub fn unanswered(&mut self, peer: u16, issued: u64) -> bool {
        let trusted = !self.suspects(peer);
        let p = usize::from(peer);
        self.asked_at[p] = None;
        self.unchanged_at[p] = self.unchanged_at[p].max(issued);
        self.refresh_peer(peer);
        trusted && self.suspects(peer)
    }

    /// The read of replica `peer`'s counter issued at `issued` came back with `counter`,
    /// seen at `now`.
    pub fn observe(&mut self, peer: u16, counter: u64, issued: u64, now: u64) {
        assert!(issued <= now, "Ω-time: a read is seen after it was issued");
        let p = usize::from(peer);
        self.asked_at[p] = None;
        if counter == self.last[p] {
            self.unchanged_at[p] = self.unchanged_at[p].max(issued);
        } else {
            let at = self.changed_at[p].max(now);
            if self.seen[p] {
                // Rule (Ω-adapt): the estimate is at least the latest gap, and decays
                // slowly towards it, so one slow round trip raises it at once.
                let g = at - self.changed_at[p];
                let est = self.gap[p];
                self.gap[p] = g.max(est - (est - est.min(g)) / 16);
            }
            self.seen[p] = true;
            self.last[p] = counter;
            self.changed_at[p] = at;
        }
        self.refresh_peer(peer);
        assert!(
            self.timeout(peer) <= self.timeout_ns,
            "Ω-adapt: the configured failure timeout is the ceiling"
        );
    }

    /// The current failure timeout for `peer` (ns).
    pub fn timeout(&self, peer: u16) -> u64 {
        match (self.adaptive, self.gap[usize::from(peer)]) {
            (None, _) | (_, 0) => self.timeout_ns,
            (Some((factor, floor_ns)), gap) => gap
                .saturating_mul(factor)
                .max(floor_ns)
                .min(self.timeout_ns),
        }
    }

    /// Whether a test of `peer`'s read now out would be evidence (rule (Ω-evidence)): the
    /// timeout since its last change seen has passed at `now` and it is not suspected yet.
    pub fn overdue(&self, peer: u16, now: u64) -> bool {
        let p = usize::from(peer);
        self.asked_at[p].is_some()
            && now.saturating_sub(self.changed_at[p]) > self.timeout(peer)
            && !self.suspects(peer)
    }

    /// Whether `peer` is suspected (never myself): rule (Ω-evidence), a read issued more
    /// than the timeout after the last change seen found none (or failed), or a test more
    /// than the timeout after it found the read out still unanswered. The clock alone is
    /// no evidence, so no time is asked: a reader whose turn was long has not tested its
    /// reads yet.
    pub fn suspects(&self, peer: u16) -> bool {
        peer < 64 && self.suspected >> peer & 1 == 1
    }

    /// The replicas suspected now (bit r: replica r), as [`Omega::suspects`] says of each.
    pub fn suspected(&self) -> u64 {
        self.suspected
    }

    /// [`Omega::suspects`] computed from the state ([`Omega::refresh`] keeps its answer).
    fn suspicion(&self, peer: u16) -> bool {
        let p = usize::from(peer);
        let out = self.asked_at[p].is_some_and(|i| self.waited_at[p] > i);
        let unanswered = if out { self.waited_at[p] } else { 0 };
        let evidence = self.unchanged_at[p].max(unanswered);
        peer != self.me && evidence.saturating_sub(self.changed_at[p]) > self.timeout(peer)
    }

    /// The leader, among the members not suspected: the lowest claimant, else
    /// the lowest that can lead (rules (sticky leader) and (able leader)), else the lowest
    /// (the lowest member if I suspect them all).
    pub fn leader(&self) -> u16 {
        self.leader
    }

    /// Whether a member I do not suspect, other than me, says it can lead (rule
    /// (up-to-date leader): someone to pass the lead to).
    pub fn able_peer(&self) -> bool {
        self.members
            .iter()
            .any(|p| p != self.me && !self.suspects(p) && self.able[usize::from(p)])
    }

    /// The replicas that may lead from now on.
    pub fn set_members(&mut self, members: Members) {
        assert!(
            members.iter().all(|r| usize::from(r) < self.last.len()),
            "members are replicas"
        );
        self.members = members;
        self.refresh_leader();
    }

    /// The replicas that may lead.
    pub fn members(&self) -> Members {
        self.members
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One call that changes what Ω knows.
    #[derive(Clone, Debug)]
    enum Call {
        Asked(u16, u64),
        Pending(u16, u64),
        Observe(u16, u64, u64),
        Unanswered(u16),
        Standing(u16, bool, bool),
        Members(u64),
    }

    fn call(replicas: u16) -> impl Strategy<Value = Call> {
        let peer = 0..replicas;
        prop_oneof![
            (peer.clone(), 0..400u64).prop_map(|(p, d)| Call::Asked(p, d)),
            (peer.clone(), 0..400u64).prop_map(|(p, d)| Call::Pending(p, d)),
            (peer.clone(), 0..4u64, 0..400u64).prop_map(|(p, c, d)| Call::Observe(p, c, d)),
            peer.clone().prop_map(Call::Unanswered),
            (peer, any::<bool>(), any::<bool>()).prop_map(|(p, a, c)| Call::Standing(p, a, c)),
            (1..(1u64 << replicas)).prop_map(Call::Members),
        ]
    }

    proptest! {
        /// The kept answers are the state's after every call that changes it: each
        /// peer's suspicion as computed from the evidence, and the leader as rules (sticky
        /// leader) and (able leader) pick it from them (computed here apart).
        #[test]
        fn the_kept_suspicions_and_leader_are_the_states(
            adaptive in any::<bool>(),
            calls in proptest::collection::vec(call(4), 1..60),
        ) {
            let detector = if adaptive { Detector::ADAPTIVE } else { Detector::Fixed };
            let mut omega = Omega::new(1, 4, (100, 10), detector, 0);
            let mut now = 0u64;
            for c in calls {
                match c {
                    Call::Asked(p, d) => {
                        now += d;
                        omega.asked(p, now);
                    }
                    Call::Pending(p, d) => {
                        now += d;
                        omega.pending(p, now);
                    }
                    Call::Observe(p, counter, d) => {
                        let issued = omega.issued(p).unwrap_or(now);
                        now += d;
                        omega.observe(p, counter, issued, now);
                    }
                    Call::Unanswered(p) => {
                        if let Some(issued) = omega.issued(p) {
                            omega.unanswered(p, issued);
                        }
                    }
                    Call::Standing(p, able, claims) => omega.standing(p, able, claims),
                    Call::Members(m) => omega.set_members(Members(m)),
                }
                let suspected: Vec<u16> = (0..4).filter(|&p| omega.suspicion(p)).collect();
                for p in 0..4 {
                    prop_assert_eq!(omega.suspects(p), suspected.contains(&p));
                }
                let trusted: Vec<u16> =
                    omega.members.iter().filter(|p| !suspected.contains(p)).collect();
                let leader = trusted
                    .iter()
                    .find(|&&p| omega.claims[usize::from(p)])
                    .or_else(|| trusted.iter().find(|&&p| omega.able[usize::from(p)]))
                    .or_else(|| trusted.first())
                    .copied()
                    .unwrap_or_else(|| omega.members.iter().next().expect("a member"));
                prop_assert_eq!(omega.leader(), leader);
            }
        }
    }

    #[test]
    fn generated_calls_reach_suspicion() {
        // The premise of the property above: its calls can make a peer suspected, so its
        // comparison covers a suspected peer and a moved leader, not only the calm state.
        let mut omega = Omega::new(1, 4, (100, 10), Detector::Fixed, 0);
        omega.asked(0, 0);
        omega.pending(0, 300);
        assert!(omega.suspects(0) && omega.suspicion(0));
        assert_eq!(omega.leader(), 1, "0 suspected: the lowest trusted leads");
    }

    #[test]
    fn the_lowest_live_id_leads_and_a_silent_one_is_suspected_after_the_timeout() {
        let mut omega = Omega::new(2, 3, (100, 10), Detector::Fixed, 0);
        assert_eq!(omega.leader(), 0);
        omega.observe(0, 1, 60, 60);
        omega.observe(1, 1, 60, 60);
        assert_eq!(omega.leader(), 0, "0 changed at 60: alive until 160");
        omega.observe(1, 2, 150, 150);
        // Rule (Ω-evidence): no read shows 0 silent yet, however late it is.
        assert!(!omega.suspects(0), "no evidence: trusted");
        omega.observe(0, 1, 161, 165);
        assert!(omega.suspects(0), "a read issued at 161 found it unchanged");
        assert_eq!(omega.leader(), 1);
        omega.observe(0, 2, 170, 170);
        assert_eq!(
            omega.leader(),
            0,
            "a counter that moves again restores trust"
        );
        assert!(!omega.suspects(2), "never myself");
    }

    /// Rule (Ω-evidence): a reader whose own turns are long (its reads tested late) does
    /// not suspect a peer that bumps on time; a read still out at a test more than the
    /// timeout after it was issued (a crashed peer's, which never completes), or one that
    /// failed, is evidence.
    #[test]
    fn suspicion_needs_evidence_not_the_readers_own_delay() {
        let mut omega = Omega::new(2, 3, (100, 10), Detector::Fixed, 0);
        omega.observe(0, 1, 0, 10);
        omega.asked(0, 10);
        assert!(!omega.suspects(0), "the read out was not tested since");
        assert_eq!(omega.waited_for(0), 0);
        omega.observe(0, 2, 10, 500); // tested at 500: it had changed
        assert!(!omega.suspects(0));
        omega.asked(0, 500);
        omega.pending(0, 550);
        assert!(
            !omega.suspects(0),
            "a test 50 after the change: within the timeout"
        );
        omega.pending(0, 601);
        assert_eq!(omega.waited_for(0), 101);
        assert!(
            omega.suspects(0),
            "a test 101 after the change found it out: silent"
        );
        // A failed read counts as an unchanged counter from its issue on.
        omega.observe(1, 1, 0, 10);
        omega.asked(1, 20);
        omega.unanswered(1, 20);
        assert!(!omega.suspects(1), "failed at 20: 10 after the change");
        omega.asked(1, 111);
        omega.unanswered(1, 111);
        assert!(omega.suspects(1), "failed at 111: 101 after the change");
    }

    #[test]
    fn a_replica_that_cannot_lead_is_passed_over_and_a_working_leader_keeps_the_lead() {
        let mut omega = Omega::new(2, 3, (100, 10), Detector::Fixed, 0);
        omega.standing(2, true, false);
        // Rule (able leader): 0 crashes after 60; 1 (a replacement catching up) cannot
        // lead.
        omega.observe(0, 1, 60, 60);
        omega.observe(1, 1, 150, 150);
        omega.standing(1, false, false);
        assert_eq!(omega.leader(), 0, "0 is not suspected yet");
        omega.asked(0, 60);
        omega.pending(0, 161);
        assert_eq!(omega.leader(), 2, "0 suspected, 1 unable: I lead");
        omega.standing(2, true, true);
        // Rule (sticky leader): 1 becomes able, with a lower id than mine; I keep leading.
        omega.observe(1, 2, 170, 170);
        omega.standing(1, true, false);
        assert_eq!(omega.leader(), 2, "a claimant keeps the lead");
        omega.standing(2, true, false);
        assert_eq!(omega.leader(), 1, "without a claimant, the lowest able");
        // A claimant that lags behind a configuration change keeps the lead it has.
        omega.standing(2, false, true);
        assert_eq!(omega.leader(), 2, "a claimant, able or not");
        // Two claimants (after a partition): the lower one.
        omega.standing(2, true, true);
        omega.standing(1, true, true);
        assert_eq!(omega.leader(), 1, "the lowest claimant");
        // Nobody able: the lowest trusted member, as before the rule.
        omega.standing(1, false, false);
        omega.standing(2, false, false);
        assert_eq!(omega.leader(), 1);
        omega.replaced(1);
        omega.observe(0, 9, 200, 200);
        assert_eq!(omega.leader(), 0, "0 back and able (never heard unable)");
    }

    #[test]
    fn the_adaptive_timeout_follows_the_gaps_between_the_floor_and_the_ceiling() {
        let detector = Detector::Adaptive {
            factor: 3,
            floor_periods: 4,
        };
        let mut omega = Omega::new(1, 2, (20_000, 100), detector, 0);
        assert_eq!(omega.timeout(0), 20_000, "no gap measured: the ceiling");
        omega.observe(0, 1, 1_000, 1_000);
        assert_eq!(omega.timeout(0), 20_000, "one change measures no gap");
        omega.observe(0, 2, 3_000, 3_000);
        assert_eq!(omega.timeout(0), 6_000, "3 × the 2 µs gap");
        omega.observe(0, 2, 9_000, 9_000);
        assert!(!omega.suspects(0));
        omega.observe(0, 2, 9_001, 9_001);
        assert!(omega.suspects(0));
        omega.observe(0, 3, 3_100, 3_100);
        assert_eq!(omega.timeout(0), 3 * (2_000 - 1_900 / 16), "decays slowly");
        omega.observe(0, 4, 13_100, 13_100);
        assert_eq!(omega.timeout(0), 20_000, "a long gap raises it at once");
        for (i, t) in (5..200).zip((13_200..).step_by(100)) {
            omega.observe(0, i, t, t);
        }
        assert_eq!(omega.timeout(0), 400, "short gaps: the floor");
    }
}
