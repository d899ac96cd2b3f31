//! One replica of a Velos log as a [`Process`]: the Ω heartbeat, the leader's window of
//! slots or the follower's learner, all in one non-blocking loop. Each turn reads the clock,
//! bumps the heartbeat when due, tests the oldest operation towards each acceptor (a crashed
//! acceptor never answers, so nothing ever blocks on one), then plans: the leader opens and
//! fills slots, the follower learns the next slot; with nothing to do, it pauses.

use super::config::{LogConfig, READ_BANKS, Scratch, ids};
use super::leader::{Leader, Proposal};
use super::learner::{LOOKAHEAD, local_decision, majority_decision};
use super::links::{CasTag, Links};
use super::omega::Omega;
use super::value::{from_words, stamp, to_words, unstamp};
use crate::cluster::ClusterShape;
use crate::proposal::ProposerId;
use crate::slot::SlotCommand;
use std::collections::{BTreeMap, VecDeque};
use velos_rdma::{Op, Process, Reply, Shared, Step};

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
    LocalWord(u64),
    CatchUpTest(u16),
    CatchUpValue(u16),
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
    /// To adopt it in `slot` (leader of `term`): the stamp must equal the proposal.
    Adopt { term: u64 },
    /// To apply it: the slot is decided; the stamp must be at least the proposal.
    Learn,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Stage {
    Queued,
    Content,
    Stamp,
    Loading,
}

/// A value-buffer read: content first, then the stamp (see [`super::value`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ValueRead {
    purpose: Purpose,
    slot: u64,
    acceptor: u16,
    proposer: ProposerId,
    proposal: u64,
    stage: Stage,
    words: Vec<Option<u64>>,
    /// The scratch bank, once started.
    bank: u32,
    /// When it started (the local clock).
    started: u64,
}

/// A follower's read of one slot's word at every replica.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CatchUp {
    slot: u64,
    replies: Vec<Option<u64>>,
    asked: Vec<bool>,
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
    ballot_floor: u64,
    /// Local acceptor words of the slots from `next_apply` on (refreshed every turn).
    words: BTreeMap<u64, u64>,
    last_progress: u64,
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
    pub fn new(config: Shared<LogConfig>, me: u16, client: ClientScript) -> Replica {
        config.validate().expect("a valid log configuration");
        assert!(me < config.replicas, "replica {me} of {}", config.replicas);
        assert!(
            client.count == 0 || (10..=config.max_value_bytes as usize).contains(&client.size),
            "client values of 10 to {} bytes",
            config.max_value_bytes
        );
        let scratch = Scratch::new(&config, me);
        Replica {
            shape: config.shape(),
            links: Links::new(scratch.clone(), config.replicas, config.cas_cells()),
            scratch,
            omega: Omega::new(me, config.replicas, config.failure_timeout_ns, 0),
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
            ballot_floor: 0,
            words: BTreeMap::new(),
            last_progress: 0,
            catch_up: None,
            reads: VecDeque::new(),
            poisoned: vec![0; READ_BANKS as usize],
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
        }
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

    /// Proposes `value` (the leader only): its id, which [`Replica::take_results`] reports
    /// with the slot that decided it.
    pub fn propose(&mut self, value: Vec<u8>) -> Result<u64, ProposeError> {
        if self.shutting_down {
            return Err(ProposeError::ShuttingDown);
        }
        let max = self.config.max_value_bytes as usize;
        if value.len() > max {
            return Err(ProposeError::ValueTooLarge {
                len: value.len(),
                max,
            });
        }
        self.follow_omega(); // take up (or leave) the role Ω gives before answering
        let leader = self.leader();
        let Role::Leader(l) = &mut self.role else {
            return Err(ProposeError::NotLeader { leader });
        };
        if l.pending.len() >= MAX_PENDING {
            return Err(ProposeError::Busy(l.pending.len()));
        }
        let queued = (l.pending.len() + l.in_flight_values()) as u64;
        if self.next_apply + queued >= u64::from(self.config.slots) {
            return Err(ProposeError::LogFull);
        }
        let id = self.next_id;
        self.next_id += 1;
        l.pending.push_back(Proposal { id, bytes: value });
        Ok(id)
    }

    /// Entries applied since the last call, in order: `(slot, value)` (a no-op is empty).
    pub fn take_committed(&mut self) -> Vec<(u64, Vec<u8>)> {
        self.applied_at.clear();
        std::mem::take(&mut self.applied)
    }

    /// Outcomes of proposals since the last call: `(id, Ok(slot))` or why it was lost.
    pub fn take_results(&mut self) -> Vec<(u64, Result<u64, ProposeError>)> {
        std::mem::take(&mut self.results)
    }

    /// Stops the replica: it finishes at its next step; proposals are refused.
    pub fn shutdown(&mut self) {
        self.shutting_down = true;
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
                .filter(|&a| c.asked[usize::from(a)] && c.replies[usize::from(a)].is_none())
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
            Some((Stage::Stamp, b)) => self.op(
                Op::Test {
                    work_id: ids::read_stamp(b),
                },
                Then::ReadTest,
            ),
            _ => {}
        }
        for b in 0..READ_BANKS {
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
        self.words.retain(|&s, _| s >= self.next_apply);
        for slot in self.next_apply..end {
            let loc = self.shape.acceptor_word(self.me, slot as u32);
            self.op(Op::Load { loc }, Then::LocalWord(slot));
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
                self.term += 1;
                self.terms_started.push(self.now);
                self.catch_up = None;
                self.reads
                    .retain(|r| r.stage != Stage::Queued || r.purpose != Purpose::Learn);
                let leader = Leader::new(self.me, self.term, self.next_apply, self.ballot_floor);
                self.role = Role::Leader(Box::new(leader));
            }
            (Role::Leader(l), false) => {
                // Deposed: the window is abandoned (its CASes fail on the new leader's
                // promises); what was decided is applied already.
                self.ballot_floor = self.ballot_floor.max(l.ballot);
                assert_eq!(l.prefix, self.next_apply, "the leader applied its prefix");
                let Role::Leader(l) = std::mem::replace(&mut self.role, Role::Follower) else {
                    unreachable!("leading")
                };
                self.results
                    .extend(l.undecided().map(|p| (p.id, Err(ProposeError::Deposed))));
                self.reads.retain(|r| {
                    !matches!(r.purpose, Purpose::Adopt { .. }) || r.stage != Stage::Queued
                });
                self.role = Role::Follower;
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
                self.omega.observe(a, value.expect("a load"), self.now);
                self.heartbeat_asked[usize::from(a)] = false;
            }
            Then::CasTest(a) => match reply {
                Reply::Value(1) => {
                    let (_, loc) = self.links.oldest(a).expect("a CAS in flight");
                    self.op_first(Op::Load { loc }, Then::CasValue(a));
                }
                Reply::Failed(_) => {
                    let tag = self.links.complete(a);
                    if let Role::Leader(l) = &mut self.role
                        && l.term == tag.term
                    {
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
                if let Role::Leader(l) = &mut self.role
                    && l.term == tag.term
                {
                    l.on_cas(&self.config, (tag.slot, a, tag.id), actual, &mut cmds);
                }
                self.issue(cmds);
            }
            Then::LocalWord(slot) => {
                self.words.insert(slot, value.expect("a load"));
            }
            Then::CatchUpTest(a) => match reply {
                Reply::Value(1) => {
                    let loc = self.scratch.catch_up(a);
                    self.op_first(Op::Load { loc }, Then::CatchUpValue(a));
                }
                Reply::Failed(_) => {
                    if let Some(c) = &mut self.catch_up {
                        c.asked[usize::from(a)] = false;
                    }
                }
                _ => {}
            },
            Then::CatchUpValue(a) => {
                if let Some(c) = &mut self.catch_up {
                    c.replies[usize::from(a)] = value;
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

    /// Turns slot commands into operations on the links.
    fn issue(&mut self, cmds: Vec<(u64, SlotCommand)>) {
        let Role::Leader(leader) = &self.role else {
            assert!(cmds.is_empty(), "only a leader issues slot commands");
            return;
        };
        let term = leader.term;
        let mut ops = Vec::new();
        for (slot, cmd) in cmds {
            match cmd {
                SlotCommand::Cas {
                    id,
                    acceptor,
                    expected,
                    desired,
                } => {
                    let remote = self.shape.acceptor_word(acceptor, slot as u32);
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
                    // The stamp first, then the content (see `value`).
                    let mut words = vec![stamp(proposal, bytes.len())];
                    words.extend(to_words(&bytes));
                    for (i, w) in words.into_iter().enumerate() {
                        let remote = if i == 0 {
                            self.shape.value_stamp(acceptor, me, s)
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

    fn read_tested(&mut self, reply: Reply) {
        let words = self.config.value_words();
        let read = self.reads.front_mut().expect("a value read");
        match reply {
            Reply::Value(1) if read.stage == Stage::Content => {
                read.stage = Stage::Stamp;
                let get = Op::Get {
                    local: self.scratch.value(read.bank, 0),
                    remote: self
                        .shape
                        .value_stamp(read.acceptor, read.proposer, read.slot as u32),
                    work_id: ids::read_stamp(read.bank),
                };
                self.op_first(get, Then::Ignore);
            }
            Reply::Value(1) => {
                read.stage = Stage::Loading;
                read.words = vec![None; words as usize + 1];
                let bank = read.bank;
                for i in 0..=words {
                    let loc = self.scratch.value(bank, i);
                    self.op_first(Op::Load { loc }, Then::ReadWord(i));
                }
            }
            Reply::Failed(_) => {
                let read = self.reads.pop_front().expect("a value read");
                self.read_finished(read, None);
            }
            _ => {}
        }
    }

    fn read_done(&mut self) {
        let read = self.reads.pop_front().expect("a value read");
        let words: Vec<u64> = read.words.iter().map(|w| w.expect("loaded")).collect();
        let (proposal, len) = unstamp(words[0]);
        let fits = len <= self.config.max_value_bytes as usize;
        let ok = match read.purpose {
            Purpose::Adopt { .. } => proposal == read.proposal,
            Purpose::Learn => proposal >= read.proposal,
        };
        let value = (ok && fits).then(|| from_words(&words[1..], len));
        self.read_finished(read, value);
    }

    fn read_finished(&mut self, read: ValueRead, value: Option<Vec<u8>>) {
        self.moved = true;
        match read.purpose {
            Purpose::Adopt { term } => {
                let mut cmds = Vec::new();
                if let Role::Leader(l) = &mut self.role
                    && l.term == term
                {
                    l.on_value_read(&self.config, read.slot, value, &mut cmds);
                }
                self.issue(cmds);
            }
            Purpose::Learn => {
                if let (Role::Follower, Some(v)) = (&self.role, value)
                    && read.slot == self.next_apply
                {
                    self.apply(read.slot, v);
                }
            }
        }
    }

    /// A read stuck on an acceptor now suspected is given up (it would block every read
    /// behind it); its bank stays out of use until its gets complete.
    fn abandon_stuck_read(&mut self) {
        let stuck = self.reads.front().is_some_and(|r| {
            matches!(r.stage, Stage::Content | Stage::Stamp)
                && self.omega.suspects(r.acceptor, self.now)
                && self.now - r.started > self.config.failure_timeout_ns
        });
        if stuck {
            let read = self.reads.pop_front().expect("a read");
            self.poisoned[read.bank as usize] = if read.stage == Stage::Stamp { 3 } else { 1 };
            self.read_finished(read, None);
        }
    }

    fn start_read(&mut self) {
        let words = self.config.value_words();
        let Some(bank) = (0..READ_BANKS).find(|&b| self.poisoned[b as usize] == 0) else {
            return;
        };
        let now = self.now;
        let Some(read) = self.reads.front_mut() else {
            return;
        };
        if read.stage != Stage::Queued {
            return;
        }
        read.stage = Stage::Content;
        read.bank = bank;
        read.started = now;
        let (a, p, s) = (read.acceptor, read.proposer, read.slot as u32);
        for i in 0..words {
            let get = Op::Get {
                local: self.scratch.value(bank, i + 1),
                remote: self.shape.value_word(a, p, s, i),
                work_id: ids::read_content(bank),
            };
            self.op(get, Then::Ignore);
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
        self.last_progress = self.now;
        self.moved = true;
    }

    /// The leader's turn: client values in, slots opened, outcomes settled.
    fn lead(&mut self) {
        let Role::Leader(mut leader) = std::mem::replace(&mut self.role, Role::Follower) else {
            unreachable!("leading")
        };
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
        let words = &self.words;
        leader.open_slots(&self.config, |s| words.get(&s).copied(), &mut cmds);
        let progress = leader.step(&self.config, &mut cmds);
        self.role = Role::Leader(leader);
        self.moved |= progress.moved || !cmds.is_empty();
        self.issue(cmds);
        for (slot, value) in progress.apply {
            self.apply(slot, value);
        }
        self.results.extend(
            progress
                .committed
                .into_iter()
                .map(|(id, slot)| (id, Ok(slot))),
        );
    }

    /// The follower's turn: learn the next slot locally, or catch up by reading it.
    fn follow(&mut self) {
        let k = self.next_apply;
        if k >= u64::from(self.config.slots) || !self.reads.is_empty() {
            return;
        }
        let layout = self.config.layout;
        if let Some(state) = local_decision(layout, &self.words, k) {
            self.learn(k, self.me, state);
            return;
        }
        match &self.catch_up {
            Some(c) if c.slot == k => {
                if let Some((holders, state)) = majority_decision(layout, &c.replies) {
                    self.catch_up = None;
                    let from = holders
                        .iter()
                        .copied()
                        .find(|&a| a == self.me)
                        .or_else(|| {
                            holders
                                .iter()
                                .copied()
                                .find(|&a| !self.omega.suspects(a, self.now))
                        })
                        .unwrap_or(holders[0]);
                    self.learn(k, from, state);
                } else if (0..self.config.replicas).all(|a| {
                    c.replies[usize::from(a)].is_some() || self.omega.suspects(a, self.now)
                }) {
                    self.catch_up = None; // nothing chosen yet: try again later
                    self.last_progress = self.now;
                }
            }
            _ if self.now.saturating_sub(self.last_progress) > self.config.catch_up_after_ns => {
                self.start_catch_up(k);
            }
            _ => {}
        }
    }

    fn learn(&mut self, slot: u64, acceptor: u16, state: crate::word::AcceptorState) {
        let proposer = ProposerId::from_value_tag(state.accepted_value).expect("accepted");
        self.reads.push_back(ValueRead {
            purpose: Purpose::Learn,
            slot,
            acceptor,
            proposer,
            proposal: state.accepted_proposal,
            stage: Stage::Queued,
            words: Vec::new(),
            bank: 0,
            started: 0,
        });
    }

    fn start_catch_up(&mut self, k: u64) {
        let n = usize::from(self.config.replicas);
        let mut c = CatchUp {
            slot: k,
            replies: vec![None; n],
            asked: vec![false; n],
        };
        c.replies[usize::from(self.me)] = self.words.get(&k).copied();
        let peers: Vec<u16> = (0..self.config.replicas)
            .filter(|&a| a != self.me && !self.omega.suspects(a, self.now))
            .collect();
        for a in peers {
            c.asked[usize::from(a)] = true;
            let get = Op::Get {
                local: self.scratch.catch_up(a),
                remote: self.shape.acceptor_word(a, k as u32),
                work_id: ids::catch_up(a),
            };
            self.op(get, Then::Ignore);
        }
        self.catch_up = Some(c);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::word::AcceptorState;
    use velos_rdma::{Loc, NodeId, Rmw};

    fn replica(me: u16) -> Replica {
        let config = Shared::new(LogConfig::new(3, 16, 16));
        Replica::new(config, me, ClientScript { count: 0, size: 10 })
    }

    /// Runs one turn: the clock reads `now`, every other operation gets a neutral reply
    /// (`Done`, or `Value(0)`: nothing completed, words zero); returns the operations.
    fn turn(r: &mut Replica, now: u64) -> Vec<Op> {
        let mut ops = Vec::new();
        let mut step = r.resume(Reply::Value(now));
        loop {
            match step {
                Step::Op(Op::Now) | Step::Done => return ops,
                Step::Op(op) => {
                    let reply = match op {
                        Op::Load { .. } | Op::Test { .. } => Reply::Value(0),
                        _ => Reply::Done,
                    };
                    ops.push(op);
                    step = r.resume(reply);
                }
            }
        }
    }

    #[test]
    fn a_turn_starts_with_the_clock() {
        let mut r = replica(1);
        assert_eq!(r.resume(Reply::Start), Step::Op(Op::Now));
    }

    #[test]
    fn omega_bumps_the_own_heartbeat_and_reads_the_others() {
        let mut r = replica(1);
        r.resume(Reply::Start);
        let ops = turn(&mut r, 0);
        let shape = LogConfig::new(3, 16, 16).shape();
        assert_eq!(
            ops[0],
            Op::Store {
                loc: shape.heartbeat(1),
                value: 1
            }
        );
        let gets: Vec<Loc> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Get { remote, .. } => Some(*remote),
                _ => None,
            })
            .collect();
        assert_eq!(gets, vec![shape.heartbeat(0), shape.heartbeat(2)]);
        assert!(!r.is_leader(), "replica 0 leads while it is trusted");
    }

    #[test]
    fn the_leader_pre_prepares_its_window_with_one_cas_per_acceptor_and_slot() {
        let mut r = replica(0);
        r.resume(Reply::Start);
        let ops = turn(&mut r, 0);
        assert!(r.is_leader());
        let layout = LogConfig::new(3, 16, 16).layout;
        let promise = layout
            .encode(AcceptorState {
                min_proposal: 1,
                ..AcceptorState::default()
            })
            .unwrap();
        let cases: Vec<(NodeId, u64, u64)> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Atomic {
                    remote,
                    rmw: Rmw::Cas { expected, new },
                    ..
                } => Some((remote.node, *expected, *new)),
                _ => None,
            })
            .collect();
        // The window: 4 slots × 3 acceptors, each ⟨0,0,⊥⟩ → ⟨1,0,⊥⟩ (proposal 1: replica 0's
        // first number, the ballot of the window).
        assert_eq!(cases.len(), 4 * 3);
        assert!(cases.iter().all(|&(_, e, n)| e == 0 && n == promise));
        assert!(
            !ops.iter().any(|op| matches!(op, Op::PutInline { .. })),
            "no value is written before there is one to propose"
        );
        assert!(r.propose(vec![1; 10]).is_ok());
        assert_eq!(
            r.propose(vec![1; 17]),
            Err(ProposeError::ValueTooLarge { len: 17, max: 16 })
        );
    }
}
