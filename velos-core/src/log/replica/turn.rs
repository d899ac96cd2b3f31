//! The start of each turn: the clock, the heartbeat, and the role Ω gives.

use super::ProposeError;
use super::{Item, Purpose, Replica, Role, Stage, Then};
use crate::freeze::Freezer;
use crate::log::config::ids;
use crate::log::event::Event;
use crate::log::heartbeat::Heartbeat;
use crate::log::leader::Leader;
use crate::log::learner::LOOKAHEAD;
use crate::log::lease::ReadError;
use crate::log::membership::Members;
use crate::word::Lap;
use velos_rdma::Op;

impl Replica {
    /// The start of a turn: the clock was read.
    pub(super) fn turn(&mut self, now: u64) {
        assert!(now >= self.now, "the clock never goes back");
        self.now = now;
        self.count_turn();
        self.moved = false;
        self.links.new_turn();
        if std::mem::take(&mut self.leasing.own_switch_pending) {
            // The fenced store of my word naming me landed before this clock reading.
            self.leasing.lease.own_switch(now);
        }
        // Rule (able leader): what Ω and my heartbeat say of me.
        // A leader claims the lead, so its Ω keeps it able or not: its able bit matters
        // only in its heartbeat word (rule (sticky leader)); none computed per turn.
        let able = self.is_leader() || self.able_to_lead();
        self.omega
            .standing(self.me, able, self.claims(self.is_leader()));
        if now >= self.beat.next_heartbeat {
            self.beat.next_heartbeat = now + self.config.heartbeat_period_ns;
            self.beat.heartbeat += 1;
            let value = self.heartbeat_word();
            let own = self.shape.heartbeat(self.me);
            self.op(Op::Store { loc: own, value }, Then::Ignore);
            let me = self.me;
            let retired = self.beat.retired;
            for a in (0..self.config.replicas).filter(|&a| a != me && !retired.contains(a)) {
                if self.beat.heartbeat_asked[usize::from(a)] {
                    self.test_heartbeat(a);
                } else {
                    self.beat.heartbeat_asked[usize::from(a)] = true;
                    self.omega.asked(a, now);
                    let get = Op::Get {
                        local: self.scratch.heartbeat(a),
                        remote: self.shape.heartbeat(a),
                        work_id: ids::heartbeat(a),
                    };
                    self.op(get, Then::Ignore);
                }
            }
            self.replace_members();
            self.retire_removed();
            if self.reap_puts {
                // Once per heartbeat at most: on verbs a test of unsignaled puts may post
                // a flush.
                self.op(Op::Test { work_id: ids::PUT }, Then::PutsTest);
            }
        } else {
            // Rule (Ω-evidence): a read out past its peer's timeout is tested at once, not
            // at the next heartbeat: the test is the evidence a crash is detected by.
            // Rule (watch the leader): a follower tests its read of the leader's counter
            // at every turn, so that with rule (Ω-fresh) the next read goes out as the
            // last one lands: the leader's counter is sampled once per read round trip,
            // not once per two heartbeat periods, the gaps Ω measures shrink with it and
            // so does the time to suspect a crashed leader. (A follower's turns are short
            // and idle; the leader keeps its turns for deciding.)
            let me = self.me;
            let watched = (!self.is_leader()).then(|| self.leader());
            for a in (0..self.config.replicas).filter(|&a| a != me) {
                if self.beat.heartbeat_asked[usize::from(a)]
                    && !self.beat.retired.contains(a)
                    && (self.omega.overdue(a, now) || watched == Some(a))
                {
                    self.test_heartbeat(a);
                }
            }
        }
        self.write_snapshot_chunk();
        self.follow_omega();
        self.give_up_suspected();
        #[cfg(feature = "mutations")]
        self.reset_with_store();
        self.follow_lease();
        self.answer_reads();
        for a in 0..self.config.replicas {
            // The oldest CAS towards each acceptor (a queue pair completes in order).
            if let Some((work_id, loc)) = self.links.oldest(a) {
                self.op(Op::TestLoad { work_id, loc }, Then::CasTest(a));
            }
        }
        if let Some(c) = &self.learn.catch_up {
            let waiting: Vec<u16> = (0..self.config.replicas)
                .filter(|&a| c.asked[usize::from(a)] && !c.answered(a))
                .collect();
            for a in waiting {
                self.op(
                    Op::Test {
                        work_id: ids::catch_up(a),
                    },
                    Then::CatchUpTest(a),
                );
            }
        }
        self.abandon_stuck_read();
        self.test_transfer();
        self.test_bulk();
        self.test_ahead();
        match self.learn.reads.front().map(|r| (r.stage, r.bank)) {
            Some((Stage::Content, b)) => self.op(
                Op::Test {
                    work_id: ids::read_content(b),
                },
                Then::ReadTest,
            ),
            Some((Stage::End | Stage::Begin, b)) => self.op(
                Op::Test {
                    work_id: ids::read_stamp(b),
                },
                Then::ReadTest,
            ),
            _ => {}
        }
        for b in 0..self.config.read_banks() {
            // A bank is free again once the gets of its abandoned read are complete.
            let pending = self.learn.poisoned[b as usize].gets;
            if pending & 1 != 0 {
                let work_id = ids::read_content(b);
                self.op(Op::Test { work_id }, Then::BankTest(b, 1));
            }
            if pending & 2 != 0 {
                let work_id = ids::read_stamp(b);
                self.op(Op::Test { work_id }, Then::BankTest(b, 2));
            }
        }
        let mut end = self.next_apply + LOOKAHEAD;
        if !self.ring.recycles() {
            end = end.min(u64::from(self.config.slots));
        }
        let next = self.next_apply;
        if self.learn.words_from != next {
            // Words of applied slots are of no use any more.
            for words in &mut self.learn.words {
                // The lowest first: only those below go, no walk over the rest.
                while words.first_key_value().is_some_and(|(&s, _)| s < next) {
                    words.pop_first();
                }
            }
            self.learn.words_from = next;
        }
        let layout = self.config.layout;
        if let Role::Leader(l) = &self.role {
            // Rule (seed only what opens): a leader learns its slots from its own CASes;
            // its local words only seed the predictions of the slots it opens this turn
            // (epoch 0: a slot moves up an epoch through its own freeze). Loading the
            // whole look-ahead every turn cost two dozen loads per decision. Every slot it
            // may open is loaded (rule (term predictions): none of a recycled position
            // opens unseeded), bounded
            // only by a ring that ends — not by the follower's look-ahead, which a
            // pipeline deeper than it passes.
            let opening = l.opening(self.config.pipeline);
            let last = match self.ring.recycles() {
                true => opening.end,
                false => opening.end.min(u64::from(self.config.slots)),
            };
            for slot in opening.start..last {
                let loc = self.shape.epoch_word(self.me, self.ring.position(slot), 0);
                self.op(Op::Load { loc }, Then::LocalWord(slot, 0));
            }
            self.items.push_back(Item::Plan);
            return;
        }
        for e in 0..self.config.epochs {
            for slot in self.next_apply..end {
                // A later epoch's word matters once the one below is frozen here (seen in
                // an earlier turn): a slot moves up only through a frozen majority.
                let below = e
                    .checked_sub(1)
                    .map(|b| self.learn.words[b as usize].get(&slot));
                let frozen = |w: u64| {
                    let here = self.ring.classify(layout, slot, w);
                    matches!(here, Lap::Current(_)) && Freezer::is_frozen(layout, w)
                };
                if below.is_some_and(|w| !w.is_some_and(|&w| frozen(w))) {
                    continue;
                }
                let loc = self.shape.epoch_word(self.me, self.ring.position(slot), e);
                self.op(Op::Load { loc }, Then::LocalWord(slot, e));
            }
        }
        self.items.push_back(Item::Plan);
    }

    /// Tests the heartbeat read out towards `a` (`Then::HeartbeatTest`).
    fn test_heartbeat(&mut self, a: u16) {
        let work_id = ids::heartbeat(a);
        let loc = self.scratch.heartbeat(a);
        self.op(Op::TestLoad { work_id, loc }, Then::HeartbeatTest(a));
    }

    /// Rule (give up): the CASes towards an acceptor Ω suspects are reported lost, once
    /// each, so that a slot whose remaining hopes rest on a crashed acceptor aborts and
    /// prepares again instead of waiting for ever (a crash may hang operations rather than
    /// fail them). If the acceptor was only slow, its late completions are not counted:
    /// the slot learns the word's true state from its next CAS.
    pub(super) fn give_up_suspected(&mut self) {
        // Ω never suspects me; in ascending order, as the members iterate.
        self.beat.suspected = self.omega.suspected();
        for a in Members(self.beat.suspected).iter() {
            // Writes waiting in the backlog are dropped: the next write there is a full one.
            for w in self.learn.written.values_mut() {
                w.holds &= !(1 << a);
            }
            for tag in self.links.give_up(a) {
                if let Some(l) = self.proposer(tag.term) {
                    l.on_cas_lost(tag.slot, a, tag.id);
                }
                self.moved = true;
            }
        }
    }

    /// The `reset-with-store` mutant: once my own snapshot includes an instance, my word
    /// of its position is reset for the next lap by a CPU store — but a majority may have
    /// retired it before me and the next lap's instance may be under way here: a store is
    /// not excluded by remote CASes (Fig. 6a of the rdma-rmw paper) and erases what they
    /// wrote.
    #[cfg(feature = "mutations")]
    fn reset_with_store(&mut self) {
        if self.config.mutation != crate::slot::Mutation::ResetWithStore || !self.ring.recycles() {
            return;
        }
        let mine = self.beat.points[usize::from(self.me)];
        let layout = self.config.layout;
        while self.reset_below < mine {
            let next = self.reset_below + u64::from(self.config.slots);
            let initial = crate::AcceptorState::initial(self.ring.tag(next));
            let value = layout.encode(initial).expect("a tag fits");
            let loc = self.shape.epoch_word(self.me, self.ring.position(next), 0);
            self.op(Op::Store { loc, value }, Then::Ignore);
            self.reset_below += 1;
        }
    }

    /// My heartbeat word now: snapshot point, the leader I trust (Ω's) and its version,
    /// how far past the point I applied, counter.
    pub(super) fn heartbeat_word(&mut self) -> u64 {
        let leader = self.omega.leader();
        // Rule (sticky leader): a replica claims the lead by naming itself, so it names
        // itself only while it leads. One that Ω names but that does not lead — it passed
        // the lead (rules (up-to-date leader), (deciding leader)) and suspects the others,
        // or copies a snapshot first — names no leader: else the others kept choosing a
        // claimant that does not lead, and the log stopped.
        let trust = (leader != self.me || self.is_leader()).then_some(leader);
        let (published, version) = self.beat.published_trust;
        if trust != published {
            self.beat.published_trust = (trust, version.wrapping_add(1));
        }
        let point = self.beat.points[usize::from(self.me)];
        Heartbeat {
            point,
            trust,
            past: self.next_apply.saturating_sub(point),
            version: self.beat.published_trust.1,
            unable: !self.able_to_lead(),
            beat: self.beat.heartbeat,
        }
        .word()
    }

    /// Rule (able leader): whether I could lead — I vote in my next slot (its
    /// configuration names me at my incarnation), I copy no snapshot (a replica behind
    /// the ring leads only once it copied one), my reads reach a majority of its voters
    /// promptly ([`Replica::reaches_majority`]), and I have not just found the others
    /// more than a window ahead of me (rule (up-to-date leader), decided by the replica
    /// itself before it leads, so no two views disagree on who leads: passing over a
    /// voter that others judged lagging made two replicas lead at once). Rule (stale
    /// view) covers the case where a lagging replica cannot lead at all.
    pub(super) fn able_to_lead(&self) -> bool {
        let copying = self.snap.behind || self.snap.transfer.is_some();
        self.votes() && !self.lagging() && !copying && self.reaches_majority() && !self.deferring()
    }

    /// Rule (outvoted claim): while my Ω names me (`leader`), or since it did, another
    /// voter of my next slot that a majority of its members is with — itself, and every
    /// voter whose latest heartbeat word I read (I do not suspect it) naming it as the
    /// leader it trusts. A replica that cannot read the leader's memory suspects it for
    /// good though the others reach it (a queue pair broken one way); claiming the lead
    /// then made two leaders duel for the rest of the run (seed 891 of `velos vopr`).
    fn outvoted(&self, leader: u16) -> Option<u16> {
        // Once outvoted, whoever Ω names now: else a replica that stepped down, unable,
        // would be able again at once, and lead again (a duel with pauses).
        if leader != self.me && self.beat.outvoted_since.is_none() {
            return None;
        }
        // A leader's every turn: nobody names another leader, so no majority can.
        let me = usize::from(self.me);
        let named_other =
            |(v, t): (usize, &Option<u16>)| v != me && t.is_some_and(|l| l != self.me);
        if !self.beat.trusts.iter().enumerate().any(named_other) {
            return None;
        }
        let voters = self.membership.voters(self.next_apply);
        let majority = self.membership.at(self.next_apply).majority();
        let with = |l: u16| {
            let trusting = |v: u16| {
                v != self.me
                    && !self.omega.suspects(v)
                    && self.beat.trusts[usize::from(v)] == Some(l)
            };
            voters.iter().filter(|&v| v == l || trusting(v)).count()
        };
        voters.iter().find(|&l| l != self.me && with(l) >= majority)
    }

    /// Rule (outvoted claim): I have been outvoted for a failure timeout — longer than a
    /// crashed leader's successor needs for the others to follow it, so a failover never
    /// waits for this — and neither lead nor say I could.
    pub(super) fn deferring(&self) -> bool {
        self.beat
            .outvoted_since
            .is_some_and(|t| self.now.saturating_sub(t) >= self.config.failure_timeout_ns)
    }

    /// Rule (sticky leader): whether a replica claims the lead, given that it leads (or
    /// its heartbeat names itself as the leader it trusts).
    pub(super) fn claims(&self, leads: bool) -> bool {
        #[cfg(feature = "mutations")]
        if self.config.mutation == crate::slot::Mutation::HandOver {
            return false;
        }
        leads
    }

    /// Whether the voters of slot `k` that I do not suspect (myself included) are a
    /// majority of its members: a leader of `k` could be backed.
    fn backed_at(&self, k: u64) -> bool {
        let voters = self.membership.voters(k);
        let live = voters
            .iter()
            .filter(|&a| a == self.me || !self.omega.suspects(a))
            .count();
        live >= self.membership.at(k).majority()
    }

    /// Rule (lease-barrier): a new unbroken period of holding the lease starts a barrier
    /// in the leader's window; a break ends the period.
    fn follow_lease(&mut self) {
        let holds = self.leasing.lease.holds(self.now);
        match (&mut self.role, holds, self.leasing.lease_period) {
            (Role::Leader(l), true, None) => {
                self.leasing.lease_period = Some(self.now);
                l.start_barrier();
            }
            (_, false, _) | (Role::Follower, _, _) => self.leasing.lease_period = None,
            _ => {}
        }
    }

    /// Answers the reads asked since the last turn, on this turn's clock.
    pub(super) fn answer_reads(&mut self) {
        let leader = self.leader();
        let holds = self.leasing.lease.holds(self.now);
        #[cfg(feature = "mutations")]
        let holds = holds || self.config.mutation == crate::slot::Mutation::ReadWithoutLease;
        let index = match &self.role {
            Role::Leader(l) if holds && l.barrier_done => Some(l.read_index()),
            #[cfg(feature = "mutations")]
            Role::Leader(l) if self.config.mutation == crate::slot::Mutation::ReadWithoutLease => {
                Some(l.read_index())
            }
            _ => None,
        };
        for id in std::mem::take(&mut self.leasing.read_requests) {
            let result = index.ok_or(ReadError::NoLease { leader });
            self.leasing.read_results.push((id, result));
        }
    }

    /// Stops leading — deposed, or overtaken on the ring (then `behind`): the window is
    /// abandoned (its CASes fail on the new leader's promises, or on later laps' words);
    /// what was decided is applied already.
    pub(super) fn step_down(&mut self) {
        let Role::Leader(l) = std::mem::replace(&mut self.role, Role::Follower) else {
            unreachable!("leading")
        };
        for (floor, &b) in self.ballot_floor.iter_mut().zip(&l.ballots) {
            *floor = (*floor).max(b);
        }
        self.end_reads_ahead(&l);
        assert_eq!(l.prefix, self.next_apply, "the leader applied its prefix");
        self.snap.behind |= l.overtaken;
        let (term, overtaken, before) = (l.term, l.overtaken, self.api.results.len());
        self.api
            .results
            .extend(l.undecided().map(|p| (p.id, Err(ProposeError::Deposed))));
        let undecided = self.api.results.len() - before;
        self.event(|| Event::SteppedDown {
            term,
            undecided,
            overtaken,
        });
        self.learn
            .reads
            .retain(|r| !matches!(r.purpose, Purpose::Adopt { .. }) || r.stage != Stage::Queued);
        self.learn.last_progress = self.now;
        assert!(matches!(self.role, Role::Follower), "stepped down");
    }

    /// Becomes leader or follower as Ω says.
    pub(super) fn follow_omega(&mut self) {
        let leader = self.omega.leader();
        if self.leader_changes.last().map(|&(_, l)| l) != Some(leader) {
            self.leader_changes.push((self.now, leader));
        }
        let outvoted = self.outvoted(leader);
        self.beat.outvoted_since = outvoted.map(|_| self.beat.outvoted_since.unwrap_or(self.now));
        if self.is_leader() && self.deferring() {
            // Rule (outvoted claim): the others lead with another; stepping down is safe.
            self.step_down();
        }
        // Rule (stale view): Ω names me by the members of my next slot, but a
        // configuration I know takes effect after it, a live peer's snapshot is past my
        // next slot, and too few of my next slot's voters are live to back me: the log
        // moved on under that configuration (I lag after a change, e.g. a replica
        // replaced). I copy the snapshot before I may lead: leading the old
        // configuration's slots, which the others decided, nobody else would back me.
        // (With a live majority of them I lead and learn those slots by adopting them:
        // stepping down there dropped what I had taken, a removed leader's successor.)
        if leader == self.me
            && self.membership.pending_after(self.next_apply)
            && self.snapshot_past(self.next_apply)
            && !self.backed_at(self.next_apply)
        {
            if self.is_leader() {
                self.step_down();
            }
            self.snap.behind = true;
        }
        if leader != self.me {
            self.not_chosen();
        }
        if self.is_leader() && (self.pass_lead(false) || self.stalled()) {
            // Rule (up-to-date leader): a leader far behind passes the lead; rule
            // (deciding leader): so does one that decides nothing while proposals wait.
            self.step_down();
        }
        // A replica behind the ring copies a snapshot before it may lead; one behind the
        // others learns in bulk first (rule (term catch-up)).
        // Rule (able leader): nor does one whose reads do not reach a majority promptly.
        let ready = leader == self.me
            && !self.is_leader()
            && !self.snap.behind
            && !self.deferring()
            && self.reaches_majority()
            && self.ready_to_lead();
        match (&self.role, leader == self.me) {
            (Role::Follower, true) if ready => {
                self.learn.repair = None;
                self.term += 1;
                self.terms_started.push(self.now);
                self.leader_moved(true);
                self.leasing.lease.start_term();
                self.learn.catch_up = None;
                self.learn.bulk.abandon();
                self.learn
                    .reads
                    .retain(|r| r.stage != Stage::Queued || r.purpose != Purpose::Learn);
                let leader = Leader::new(
                    self.me,
                    self.term,
                    self.next_apply,
                    self.ballot_floor.clone(),
                    self.membership.clone(),
                );
                self.role = Role::Leader(Box::new(leader));
                let (term, from) = (self.term, self.next_apply);
                self.event(|| Event::Leading { term, from });
                if self.leasing.lease.enabled() {
                    // Rule (lease-wait): my own switch counts once my word says so in
                    // memory: store it now, fenced; the next clock reading is after it.
                    let value = self.heartbeat_word();
                    let own = self.shape.heartbeat(self.me);
                    self.op(Op::Store { loc: own, value }, Then::Ignore);
                    self.op(Op::Mfence, Then::Ignore);
                    self.leasing.own_switch_pending = true;
                }
            }
            (Role::Leader(_), false) => self.step_down(),
            _ => {}
        }
        let claims = self.claims(self.is_leader());
        let able = self.is_leader() || self.able_to_lead();
        self.omega.standing(self.me, able, claims);
        assert!(
            !self.is_leader() || self.omega.leader() == self.me,
            "rule (sticky leader): a leader is its own Ω's choice"
        );
        assert!(
            !self.is_leader() || !self.deferring(),
            "rule (outvoted claim): an outvoted replica does not lead"
        );
    }
}
