//! One replica of a Velos log as a [`Process`]: the Ω heartbeat, the leader's window of
//! slots or the follower's learner, all in one non-blocking loop. Each turn reads the clock,
//! bumps the heartbeat when due, tests the oldest operation towards each acceptor (a crashed
//! acceptor never answers, so nothing ever blocks on one), then plans: the leader opens and
//! fills slots, the follower learns the next slot; with nothing to do, it pauses.

use super::config::{LogConfig, Scratch, ids};
use super::leader::{Leader, Proposal, SlotAt};
use super::learner::LOOKAHEAD;
use super::links::{CasTag, Links};
use super::omega::Omega;
use super::value::{stamp, to_words};
use crate::cluster::ClusterShape;
use crate::freeze::Freezer;
use crate::proposal::ProposerId;
use crate::slot::SlotCommand;
use std::collections::{BTreeMap, VecDeque};
use velos_rdma::{Op, Process, Reply, Shared, Step};

mod api;
mod follow;
mod reads;
#[cfg(test)]
mod tests;

/// The values a replica proposes while it leads (the simulation's client): `count` values
/// of `size` bytes, each naming the replica and a sequence number.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientScript {
    /// Values to propose in all.
    pub count: u64,
    /// Bytes per value (at least 10).
    pub size: usize,
}

/// Why a proposal was refused, or what became of one that was taken.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ProposeError {
    /// Only the leader takes proposals; `leader` is the one this replica trusts.
    #[error("not the leader: replica {leader} leads")]
    NotLeader {
        /// The leader as this replica sees it.
        leader: u16,
    },
    /// The value is larger than the log's values.
    #[error("a value of {len} bytes is larger than the log's {max}")]
    ValueTooLarge {
        /// The value's size.
        len: usize,
        /// The largest size.
        max: usize,
    },
    /// Every slot of the log is used or promised.
    #[error("the log is full")]
    LogFull,
    /// Too many proposals wait already.
    #[error("too many proposals pending ({0})")]
    Busy(usize),
    /// The replica is shutting down.
    #[error("the replica is shutting down")]
    ShuttingDown,
    /// Slot `slot` used up its proposal numbers in every epoch of the overflow fallback
    /// ([`LogConfig::epochs`](super::LogConfig::epochs)): the log cannot grow past it.
    #[error("slot {slot} ran out of proposal numbers in every epoch")]
    Exhausted {
        /// The slot.
        slot: u64,
    },
    /// The replica stopped leading before the proposal was decided: the next leader may
    /// still decide it (if some acceptor accepted it) or not; watch the log.
    #[error("deposed before the proposal was decided: outcome unknown")]
    Deposed,
}

/// Proposals a leader keeps waiting at most.
pub const MAX_PENDING: usize = 4096;

/// What a replica is doing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Role {
    Follower,
    Leader(Box<Leader>),
}

/// What to do with the reply of an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Then {
    Ignore,
    Clock,
    HeartbeatTest(u16),
    HeartbeatValue(u16),
    CasTest(u16),
    CasValue(u16),
    LocalWord(u64, u32),
    CatchUpTest(u16),
    CatchUpValue(u16, u32),
    ReadTest,
    ReadWord(u32),
    BankTest(u32, u8),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Item {
    Op(Op, Then),
    Plan,
}

/// Why a value buffer is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Purpose {
    /// To adopt it in `slot`, or carry it into the slot's next epoch (leader of `term`).
    Adopt { term: u64 },
    /// To apply it: the slot is decided.
    Learn,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Stage {
    Queued,
    End,
    Content,
    Begin,
    Loading,
}

/// A value-buffer read: the end stamp, the content, the begin stamp (see [`super::value`]);
/// both stamps must agree and their key be at least (`epoch`, `proposal`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ValueRead {
    purpose: Purpose,
    slot: u64,
    acceptor: u16,
    proposer: ProposerId,
    epoch: u32,
    proposal: u64,
    stage: Stage,
    words: Vec<Option<u64>>,
    /// The scratch bank, once started.
    bank: u32,
    /// When it started (the local clock).
    started: u64,
}

/// A follower's read of one slot's words (every epoch) at every replica.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CatchUp {
    slot: u64,
    /// Per epoch, per acceptor: the word read.
    replies: Vec<Vec<Option<u64>>>,
    asked: Vec<bool>,
}

impl CatchUp {
    fn answered(&self, a: u16) -> bool {
        self.replies.iter().all(|r| r[usize::from(a)].is_some())
    }
}

/// One replica of a Velos log.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Replica {
    config: Shared<LogConfig>,
    shape: ClusterShape,
    scratch: Scratch,
    me: u16,
    items: VecDeque<Item>,
    then: Then,
    now: u64,
    next_heartbeat: u64,
    heartbeat: u64,
    heartbeat_asked: Vec<bool>,
    omega: Omega,
    links: Links,
    role: Role,
    term: u64,
    /// Per epoch: ballots of earlier terms, for the next term to start above.
    ballot_floor: Vec<u64>,
    /// Per epoch: local acceptor words of the slots from `next_apply` on (refreshed every
    /// turn).
    words: Vec<BTreeMap<u64, u64>>,
    last_progress: u64,
    /// Since when catch-ups of the next slot find a value accepted but no majority.
    stuck_since: Option<u64>,
    /// The last slot applied was learned by a catch-up or a repair, not locally: the next
    /// one likely needs the same, so its catch-up starts at once.
    streak: bool,
    /// A learner's repair of the next slot (see [`follow`]).
    repair: Option<Box<Leader>>,
    /// Per unapplied slot: the acceptors whose buffer of mine I wrote (bit a), so that the
    /// first write skips its begin stamp (see [`super::value`]).
    written: BTreeMap<u64, u64>,
    catch_up: Option<CatchUp>,
    reads: VecDeque<ValueRead>,
    /// Per read bank: the gets of an abandoned read that may still land (bit 0: the
    /// content's, bit 1: the stamp's); 0 when the bank is free.
    poisoned: Vec<u8>,
    moved: bool,
    client: ClientScript,
    sent: u64,
    next_id: u64,
    shutting_down: bool,
    /// Outcomes of proposals taken by [`Replica::propose`]: `(id, slot or error)`.
    results: Vec<(u64, Result<u64, ProposeError>)>,
    next_apply: u64,
    /// Every entry applied, in order: `(slot, value)`; a no-op is empty.
    pub applied: Vec<(u64, Vec<u8>)>,
    /// Every value this replica proposed (as leader).
    pub proposed: Vec<Vec<u8>>,
    /// When each entry of `applied` was applied (the local clock).
    pub applied_at: Vec<u64>,
    /// `(clock, leader)` each time this replica's view of the leader changed.
    pub leader_changes: Vec<(u64, u16)>,
    /// When this replica started each of its terms as leader (the local clock).
    pub terms_started: Vec<u64>,
}

impl Replica {
    /// Replica `me` of the log `config`, proposing `client`'s values when it leads.
    /// Refuses, with the reason, an invalid configuration, an id outside it, or client
    /// values that do not fit.
    pub fn new(
        config: Shared<LogConfig>,
        me: u16,
        client: ClientScript,
    ) -> Result<Replica, String> {
        config.validate()?;
        if me >= config.replicas {
            return Err(format!("replica {me} of {}", config.replicas));
        }
        if client.count > 0 && !(10..=config.max_value_bytes as usize).contains(&client.size) {
            return Err(format!(
                "client values of {} bytes: 10 to {} fit",
                client.size, config.max_value_bytes
            ));
        }
        let scratch = Scratch::new(&config, me);
        let epochs = config.epochs as usize;
        let banks = config.read_banks() as usize;
        Ok(Replica {
            shape: config.shape(),
            links: Links::new(scratch.clone(), config.replicas, config.cas_cells()),
            scratch,
            omega: Omega::new(
                me,
                config.replicas,
                (config.failure_timeout_ns, config.heartbeat_period_ns),
                config.detector,
                0,
            ),
            heartbeat_asked: vec![false; usize::from(config.replicas)],
            config,
            me,
            items: VecDeque::new(),
            then: Then::Ignore,
            now: 0,
            next_heartbeat: 0,
            heartbeat: 0,
            role: Role::Follower,
            term: 0,
            ballot_floor: vec![0; epochs],
            words: vec![BTreeMap::new(); epochs],
            last_progress: 0,
            stuck_since: None,
            streak: false,
            repair: None,
            written: BTreeMap::new(),
            catch_up: None,
            reads: VecDeque::new(),
            poisoned: vec![0; banks],
            moved: false,
            client,
            sent: 0,
            next_id: 0,
            shutting_down: false,
            results: Vec::new(),
            next_apply: 0,
            applied: Vec::new(),
            proposed: Vec::new(),
            applied_at: Vec::new(),
            leader_changes: Vec::new(),
            terms_started: Vec::new(),
        })
    }

    /// Whether this replica currently leads.
    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Leader(_))
    }

    /// The next slot this replica will apply.
    pub fn next_apply(&self) -> u64 {
        self.next_apply
    }

    /// The leader as this replica sees it now.
    pub fn leader(&self) -> u16 {
        self.omega.leader(self.now)
    }

    fn op(&mut self, op: Op, then: Then) {
        self.items.push_back(Item::Op(op, then));
    }

    fn op_first(&mut self, op: Op, then: Then) {
        self.items.push_front(Item::Op(op, then));
    }

    fn value_of(reply: &Reply) -> Option<u64> {
        match reply {
            Reply::Value(v) => Some(*v),
            _ => None,
        }
    }

    /// The start of a turn: the clock was read.
    fn turn(&mut self, now: u64) {
        assert!(now >= self.now, "the clock never goes back");
        self.now = now;
        self.moved = false;
        if now >= self.next_heartbeat {
            self.next_heartbeat = now + self.config.heartbeat_period_ns;
            self.heartbeat += 1;
            let own = self.shape.heartbeat(self.me);
            self.op(
                Op::Store {
                    loc: own,
                    value: self.heartbeat,
                },
                Then::Ignore,
            );
            let me = self.me;
            for a in (0..self.config.replicas).filter(|&a| a != me) {
                if self.heartbeat_asked[usize::from(a)] {
                    self.op(
                        Op::Test {
                            work_id: ids::heartbeat(a),
                        },
                        Then::HeartbeatTest(a),
                    );
                } else {
                    self.heartbeat_asked[usize::from(a)] = true;
                    let get = Op::Get {
                        local: self.scratch.heartbeat(a),
                        remote: self.shape.heartbeat(a),
                        work_id: ids::heartbeat(a),
                    };
                    self.op(get, Then::Ignore);
                }
            }
        }
        self.follow_omega();
        let busy: Vec<u16> = self.links.busy().collect();
        for a in busy {
            let (work_id, _) = self.links.oldest(a).expect("busy");
            self.op(Op::Test { work_id }, Then::CasTest(a));
        }
        if let Some(c) = &self.catch_up {
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
        match self.reads.front().map(|r| (r.stage, r.bank)) {
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
            let pending = self.poisoned[b as usize];
            if pending & 1 != 0 {
                let work_id = ids::read_content(b);
                self.op(Op::Test { work_id }, Then::BankTest(b, 1));
            }
            if pending & 2 != 0 {
                let work_id = ids::read_stamp(b);
                self.op(Op::Test { work_id }, Then::BankTest(b, 2));
            }
        }
        let end = (self.next_apply + LOOKAHEAD).min(u64::from(self.config.slots));
        let next = self.next_apply;
        for words in &mut self.words {
            words.retain(|&s, _| s >= next);
        }
        let layout = self.config.layout;
        for e in 0..self.config.epochs {
            for slot in self.next_apply..end {
                // A later epoch's word matters once the one below is frozen here (seen in
                // an earlier turn): a slot moves up only through a frozen majority.
                let below = e.checked_sub(1).map(|b| self.words[b as usize].get(&slot));
                if below.is_some_and(|w| !w.is_some_and(|&w| Freezer::is_frozen(layout, w))) {
                    continue;
                }
                let loc = self.shape.epoch_word(self.me, slot as u32, e);
                self.op(Op::Load { loc }, Then::LocalWord(slot, e));
            }
        }
        self.items.push_back(Item::Plan);
    }

    /// Becomes leader or follower as Ω says.
    fn follow_omega(&mut self) {
        let leader = self.omega.leader(self.now);
        if self.leader_changes.last().map(|&(_, l)| l) != Some(leader) {
            self.leader_changes.push((self.now, leader));
        }
        match (&self.role, leader == self.me) {
            (Role::Follower, true) => {
                self.repair = None;
                self.term += 1;
                self.terms_started.push(self.now);
                self.catch_up = None;
                self.reads
                    .retain(|r| r.stage != Stage::Queued || r.purpose != Purpose::Learn);
                let leader = Leader::new(
                    self.me,
                    self.term,
                    self.next_apply,
                    self.ballot_floor.clone(),
                );
                self.role = Role::Leader(Box::new(leader));
            }
            (Role::Leader(l), false) => {
                // Deposed: the window is abandoned (its CASes fail on the new leader's
                // promises); what was decided is applied already.
                for (floor, &b) in self.ballot_floor.iter_mut().zip(&l.ballots) {
                    *floor = (*floor).max(b);
                }
                assert_eq!(l.prefix, self.next_apply, "the leader applied its prefix");
                let Role::Leader(l) = std::mem::replace(&mut self.role, Role::Follower) else {
                    unreachable!("leading")
                };
                self.results
                    .extend(l.undecided().map(|p| (p.id, Err(ProposeError::Deposed))));
                self.reads.retain(|r| {
                    !matches!(r.purpose, Purpose::Adopt { .. }) || r.stage != Stage::Queued
                });
                self.last_progress = self.now;
            }
            _ => {}
        }
    }

    /// Handles the reply of the operation issued with `then`.
    fn absorb(&mut self, then: Then, reply: Reply) {
        let value = Self::value_of(&reply);
        match then {
            Then::Ignore => {}
            Then::Clock => self.turn(value.expect("the clock replies a value")),
            Then::HeartbeatTest(a) => match reply {
                Reply::Value(1) => {
                    let loc = self.scratch.heartbeat(a);
                    self.op_first(Op::Load { loc }, Then::HeartbeatValue(a));
                }
                Reply::Failed(_) => self.heartbeat_asked[usize::from(a)] = false,
                _ => {}
            },
            Then::HeartbeatValue(a) => {
                assert!(
                    self.heartbeat_asked[usize::from(a)],
                    "Ω-fresh: a read was out"
                );
                self.omega.observe(a, value.expect("a load"), self.now);
                // Rule (Ω-fresh): the next read goes out at once (the scratch word was
                // just loaded), so a counter is sampled once per round trip, not every
                // other heartbeat period; it stays asked.
                let get = Op::Get {
                    local: self.scratch.heartbeat(a),
                    remote: self.shape.heartbeat(a),
                    work_id: ids::heartbeat(a),
                };
                self.op_first(get, Then::Ignore);
            }
            Then::CasTest(a) => match reply {
                Reply::Value(1) => {
                    let (_, loc) = self.links.oldest(a).expect("a CAS in flight");
                    self.op_first(Op::Load { loc }, Then::CasValue(a));
                }
                Reply::Failed(_) => {
                    let tag = self.links.complete(a);
                    if let Some(l) = self.proposer(tag.term) {
                        l.on_cas_lost(tag.slot, a, tag.id);
                    }
                    self.moved = true;
                }
                _ => {}
            },
            Then::CasValue(a) => {
                let tag = self.links.complete(a);
                let actual = value.expect("a load");
                self.moved = true;
                let mut cmds = Vec::new();
                let config = self.config.clone();
                if let Some(l) = self.proposer(tag.term) {
                    l.on_cas(&config, (tag.slot, a, tag.id), actual, &mut cmds);
                }
                self.issue(tag.term, cmds);
            }
            Then::LocalWord(slot, e) => {
                self.words[e as usize].insert(slot, value.expect("a load"));
            }
            Then::CatchUpTest(a) => match reply {
                Reply::Value(1) => {
                    for e in 0..self.config.epochs {
                        let loc = self.scratch.catch_up(a, e);
                        self.op_first(Op::Load { loc }, Then::CatchUpValue(a, e));
                    }
                }
                Reply::Failed(_) => {
                    if let Some(c) = &mut self.catch_up {
                        c.asked[usize::from(a)] = false;
                    }
                }
                _ => {}
            },
            Then::CatchUpValue(a, e) => {
                if let Some(c) = &mut self.catch_up {
                    c.replies[e as usize][usize::from(a)] = value;
                }
            }
            Then::ReadTest => self.read_tested(reply),
            Then::BankTest(b, bit) => {
                if reply != Reply::Value(0) {
                    self.poisoned[b as usize] &= !bit;
                }
            }
            Then::ReadWord(i) => {
                let read = self.reads.front_mut().expect("a value read");
                read.words[i as usize] = value;
                if read.words.iter().all(Option::is_some) {
                    self.read_done();
                }
            }
        }
    }

    /// The leader of `term`: this replica's, or its repair of a slot (see [`follow`]).
    fn proposer(&mut self, term: u64) -> Option<&mut Leader> {
        match (&mut self.role, &mut self.repair) {
            (Role::Leader(l), _) if l.term == term => Some(l),
            (_, Some(r)) if r.term == term => Some(r),
            _ => None,
        }
    }

    /// Turns the slot commands of the leader of `term` into operations on the links.
    fn issue(&mut self, term: u64, cmds: Vec<(SlotAt, SlotCommand)>) {
        if cmds.is_empty() {
            return;
        }
        let leader = match (&self.role, &self.repair) {
            (Role::Leader(l), _) if l.term == term => l,
            (_, Some(r)) if r.term == term => r,
            _ => panic!("slot commands of term {term}, which nobody runs"),
        };
        let mut ops = Vec::new();
        for (SlotAt { slot, epoch }, cmd) in cmds {
            match cmd {
                SlotCommand::Cas {
                    id,
                    acceptor,
                    expected,
                    desired,
                } => {
                    let remote = self.shape.epoch_word(acceptor, slot as u32, epoch);
                    let tag = CasTag { term, slot, id };
                    self.links
                        .send_cas(acceptor, remote, (expected, desired), tag, &mut ops);
                }
                SlotCommand::WriteValue {
                    acceptor,
                    content,
                    proposal,
                } => {
                    let bytes = leader.value_of(slot, content);
                    let me = ProposerId(self.me);
                    let s = slot as u32;
                    // The begin stamp, the content, the end stamp (see `value`); the
                    // first write of a buffer needs no begin stamp.
                    let stamp = stamp(epoch, proposal, bytes.len());
                    let content = to_words(&bytes);
                    let last = content.len() + 1;
                    let mask = self.written.entry(slot).or_insert(0);
                    let first = *mask & 1 << acceptor == 0;
                    *mask |= 1 << acceptor;
                    let words = std::iter::once(stamp).chain(content).chain([stamp]);
                    for (i, w) in words.enumerate().skip(usize::from(first)) {
                        let remote = if i == 0 {
                            self.shape.value_stamp(acceptor, me, s)
                        } else if i == last {
                            self.shape.value_end_stamp(acceptor, me, s)
                        } else {
                            self.shape.value_word(acceptor, me, s, i as u32 - 1)
                        };
                        let put = Op::PutInline {
                            remote,
                            value: w,
                            work_id: ids::PUT,
                        };
                        self.links.send(acceptor, put, &mut ops);
                    }
                }
                SlotCommand::ReadValue {
                    acceptor,
                    proposer,
                    proposal,
                } => self.reads.push_back(ValueRead {
                    purpose: Purpose::Adopt { term },
                    slot,
                    acceptor,
                    proposer,
                    epoch,
                    proposal,
                    stage: Stage::Queued,
                    words: Vec::new(),
                    bank: 0,
                    started: 0,
                }),
            }
        }
        for op in ops {
            self.op(op, Then::Ignore);
        }
    }

    fn apply(&mut self, slot: u64, value: Vec<u8>) {
        assert_eq!(
            slot, self.next_apply,
            "no holes: slots are applied in order"
        );
        self.applied.push((slot, value));
        self.applied_at.push(self.now);
        self.next_apply += 1;
        self.written.remove(&slot); // a leader writes only slots it has not applied
        self.stuck_since = None;
        self.repair = None;
        self.last_progress = if self.streak {
            self.now.saturating_sub(self.config.catch_up_after_ns + 1)
        } else {
            self.now
        };
        self.moved = true;
    }

    /// The leader's turn: client values in, slots opened, outcomes settled.
    fn lead(&mut self) {
        let Role::Leader(mut leader) = std::mem::replace(&mut self.role, Role::Follower) else {
            unreachable!("leading")
        };
        let term = leader.term;
        let pipeline = self.config.pipeline as usize;
        while leader.pending.len() + leader.in_flight_values() < pipeline
            && self.sent < self.client.count
        {
            let mut v = Vec::with_capacity(self.client.size);
            v.extend_from_slice(&self.me.to_le_bytes());
            v.extend_from_slice(&self.sent.to_le_bytes());
            v.resize(self.client.size, 0);
            self.sent += 1;
            self.proposed.push(v.clone());
            let id = self.next_id;
            self.next_id += 1;
            leader.pending.push_back(Proposal { id, bytes: v });
        }
        let mut cmds = Vec::new();
        let words = &self.words[0];
        leader.open_slots(&self.config, |s| words.get(&s).copied(), &mut cmds);
        let progress = leader.step(&self.config, &mut cmds);
        self.role = Role::Leader(leader);
        self.moved |= progress.moved || !cmds.is_empty();
        self.issue(term, cmds);
        for (slot, value) in progress.apply {
            self.apply(slot, value);
        }
        self.results.extend(
            progress
                .committed
                .into_iter()
                .map(|(id, slot)| (id, Ok(slot))),
        );
        if let Role::Leader(l) = &mut self.role
            && let Some(slot) = l.exhausted
        {
            // Nothing pending can be decided any more: say so rather than hold it.
            let refused = std::mem::take(&mut l.pending);
            self.results.extend(
                refused
                    .into_iter()
                    .map(|p| (p.id, Err(ProposeError::Exhausted { slot }))),
            );
        }
    }

    /// The plan at the end of a turn.
    fn plan(&mut self) {
        match self.role {
            Role::Leader(_) => self.lead(),
            Role::Follower => self.follow(),
        }
        let mut ops = Vec::new();
        self.links.drain(&mut ops);
        for op in ops {
            self.op(op, Then::Ignore);
        }
        self.start_read();
        if !self.moved {
            self.op(
                Op::Pause {
                    ns: self.config.idle_pause_ns,
                },
                Then::Ignore,
            );
        }
    }
}

impl Process for Replica {
    fn resume(&mut self, reply: Reply) -> Step {
        if reply != Reply::Start {
            let then = std::mem::replace(&mut self.then, Then::Ignore);
            self.absorb(then, reply);
        }
        if self.shutting_down {
            return Step::Done;
        }
        loop {
            match self.items.pop_front() {
                Some(Item::Op(op, then)) => {
                    self.then = then;
                    return Step::Op(op);
                }
                Some(Item::Plan) => self.plan(),
                None => {
                    self.then = Then::Clock;
                    return Step::Op(Op::Now);
                }
            }
        }
    }

    fn puts_from_memory(&self) -> bool {
        false // every put carries its value inline
    }
}
