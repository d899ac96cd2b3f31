//! A proposer of a fixed run of slots, as a [`Process`]: each slot is decided with
//! Algorithm 5 ([`SlotProposer`]) over the programming model, retrying a bounded number of
//! times after an abort. The exhaustive checks run it on the explorer (several proposers,
//! an acceptor crashed), so it waits for majorities with `test`, never with `wait`, on
//! operations a crashed acceptor would never complete.

use std::collections::VecDeque;
use velos_core::cluster::ClusterShape;
use velos_core::proposal::{Numbering, ProposerId};
use velos_core::slot::{Content, Mutation, Outcome, SlotCommand, SlotConfig, SlotProposer};
use velos_core::word::WordLayout;
use velos_rdma::{Loc, Op, Process, Reply, Rmw, Shared, Step, WorkId};

/// Scratch words per acceptor for CAS results (CASes in flight per acceptor at most).
const CAS_SLOTS: u32 = 6;
/// The work id of the CAS in scratch cell 0 of acceptor 0; cell c of acceptor a uses
/// `FIRST_CAS_WORK_ID + a * CAS_SLOTS + c`.
const FIRST_CAS_WORK_ID: u32 = 2;
/// The work id of value writes (never awaited: the accept CAS behind them is).
const VALUE_WORK_ID: WorkId = WorkId(1);
/// The work id of value reads: its own, so that waiting for a read never waits for a put
/// towards a crashed acceptor.
const READ_WORK_ID: WorkId = WorkId(0);

/// A value word: the proposal it was written for, and a 32-bit content.
fn pack(proposal: u64, content: u64) -> u64 {
    assert!(
        proposal <= u64::from(u32::MAX) && content <= u64::from(u32::MAX),
        "fields of 32 bits"
    );
    proposal << 32 | content
}

fn unpack(word: u64) -> (u64, u64) {
    (word >> 32, word & u64::from(u32::MAX))
}

/// What a [`SingleDecree`] needs to know.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SingleDecreeConfig {
    /// The cluster's memory.
    pub shape: ClusterShape,
    /// Acceptor word layout.
    pub layout: WordLayout,
    /// How many proposers there are.
    pub proposers: u16,
    /// Attempts per slot (the first included) before giving the slot up.
    pub max_attempts: u32,
    /// Slots to decide, from slot 0.
    pub slots: u32,
    /// A deliberately wrong variant (tests with the `mutations` feature only).
    pub mutation: Mutation,
}

impl SingleDecreeConfig {
    /// Scratch words a node needs: CAS results per acceptor, then one for value reads.
    pub fn scratch_words(acceptors: u16) -> u32 {
        u32::from(acceptors) * CAS_SLOTS + 1
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct InFlight {
    acceptor: u16,
    id: u64,
    /// Index into the CAS scratch words of this acceptor.
    cell: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Waiting {
    /// Nothing asked yet.
    Nothing,
    /// A posted operation: its reply carries nothing.
    Posted,
    /// `wait_any` over the oldest CAS in flight towards each acceptor.
    AnyAnswer,
    /// The old value of in-flight CAS `index`.
    Result(usize),
    /// The word of an adopted value, which must bear a stamp of at least `proposal`.
    ReadValue { proposal: u64 },
}

/// A proposer of slots `0..slots` (one value for all of them: its input).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SingleDecree {
    config: Shared<SingleDecreeConfig>,
    me: ProposerId,
    input: u64,
    slot: u32,
    proposer: SlotProposer,
    attempts: u32,
    /// Operations to issue before anything else, in order.
    queue: VecDeque<(Op, Waiting)>,
    in_flight: Vec<InFlight>,
    waiting: Waiting,
    adopted: u64,
    /// Per slot: the content decided, or `None` if this proposer gave the slot up.
    pub decisions: Vec<Option<u64>>,
}

impl SingleDecree {
    /// Proposer `me` proposing `input` (non-zero, 32 bits) in every slot.
    pub fn new(config: Shared<SingleDecreeConfig>, me: ProposerId, input: u64) -> SingleDecree {
        assert!(
            input != 0 && input <= u64::from(u32::MAX),
            "a non-zero 32-bit input"
        );
        assert!(
            config.slots <= config.shape.slots && config.slots > 0,
            "slots to decide"
        );
        let proposer = SlotProposer::fresh(Self::slot_config(&config, me));
        SingleDecree {
            config,
            me,
            input,
            slot: 0,
            proposer,
            attempts: 0,
            queue: VecDeque::new(),
            in_flight: Vec::new(),
            waiting: Waiting::Nothing,
            adopted: 0,
            decisions: Vec::new(),
        }
    }

    fn slot_config(config: &SingleDecreeConfig, me: ProposerId) -> SlotConfig {
        SlotConfig {
            layout: config.layout,
            acceptors: config.shape.nodes,
            members: SlotConfig::all(config.shape.nodes),
            absent: 0,
            numbering: Numbering {
                proposers: config.proposers,
            },
            me,
            tag: 0,
            recycled: false,
            mutation: config.mutation,
        }
    }

    fn node(&self) -> u16 {
        self.me.0
    }

    fn cas_scratch(&self, acceptor: u16, cell: u32) -> Loc {
        self.config
            .shape
            .scratch(self.node(), u32::from(acceptor) * CAS_SLOTS + cell)
    }

    fn cas_work_id(acceptor: u16, cell: u32) -> WorkId {
        WorkId(FIRST_CAS_WORK_ID + u32::from(acceptor) * CAS_SLOTS + cell)
    }

    /// Turns the slot's commands into queued operations.
    fn enqueue(&mut self, commands: Vec<SlotCommand>) {
        let shape = self.config.shape.clone();
        for command in commands {
            match command {
                SlotCommand::Cas {
                    id,
                    acceptor,
                    expected,
                    desired,
                } => {
                    let cell = (0..CAS_SLOTS)
                        .find(|c| {
                            !self
                                .in_flight
                                .iter()
                                .any(|f| f.acceptor == acceptor && f.cell == *c)
                        })
                        .expect("CAS_SLOTS bounds the CASes in flight per acceptor");
                    self.in_flight.push(InFlight { acceptor, id, cell });
                    let op = Op::Atomic {
                        local: self.cas_scratch(acceptor, cell),
                        remote: shape.acceptor_word(acceptor, self.slot),
                        rmw: Rmw::Cas {
                            expected,
                            new: desired,
                        },
                        work_id: Self::cas_work_id(acceptor, cell),
                    };
                    self.queue.push_back((op, Waiting::Posted));
                }
                SlotCommand::WriteValue {
                    acceptor,
                    content,
                    proposal,
                } => {
                    let value = match content {
                        Content::Mine => self.input,
                        Content::Adopted => self.adopted,
                    };
                    // One word, `proposal << 32 | content`: the stamp and a 32-bit content
                    // land together (the general multi-word buffer stamps first, then
                    // writes the content: `ClusterShape::value_stamp`). It lands before the
                    // CAS behind it on this queue pair.
                    let word = shape.value_stamp(acceptor, self.me, self.slot);
                    self.queue.push_back((
                        Op::PutInline {
                            remote: word,
                            value: pack(proposal, value),
                            work_id: VALUE_WORK_ID,
                        },
                        Waiting::Posted,
                    ));
                }
                SlotCommand::ReadValue {
                    acceptor,
                    proposer,
                    proposal,
                } => {
                    let local = self
                        .config
                        .shape
                        .scratch(self.node(), u32::from(shape.nodes) * CAS_SLOTS);
                    let remote = shape.value_stamp(acceptor, proposer, self.slot);
                    let w = READ_WORK_ID;
                    self.queue.push_back((
                        Op::Get {
                            local,
                            remote,
                            work_id: w,
                        },
                        Waiting::Posted,
                    ));
                    self.queue
                        .push_back((Op::Wait { work_id: w }, Waiting::Posted));
                    self.queue
                        .push_back((Op::Load { loc: local }, Waiting::ReadValue { proposal }));
                }
            }
        }
    }

    /// Consumes the reply to the last operation.
    fn absorb(&mut self, reply: Reply) {
        let value = match reply {
            Reply::Value(v) => Some(v),
            _ => None,
        };
        match std::mem::replace(&mut self.waiting, Waiting::Nothing) {
            Waiting::Nothing | Waiting::Posted => {}
            Waiting::AnyAnswer => {
                let bit = match &reply {
                    Reply::Value(bit) => *bit as u32,
                    Reply::Failed(velos_rdma::RdmaError::WorkFailed { work_id, .. }) => {
                        work_id.0 - FIRST_CAS_WORK_ID
                    }
                    other => panic!("wait_any replies a value or a failure, not {other:?}"),
                };
                let (acceptor, cell) = ((bit / CAS_SLOTS) as u16, bit % CAS_SLOTS);
                let i = self
                    .in_flight
                    .iter()
                    .position(|f| f.acceptor == acceptor && f.cell == cell)
                    .expect("wait_any answers for a CAS in flight");
                if matches!(reply, Reply::Value(_)) {
                    let loc = self.cas_scratch(acceptor, cell);
                    self.queue
                        .push_front((Op::Load { loc }, Waiting::Result(i)));
                } else {
                    // The CAS failed: that acceptor will not answer it.
                    let f = self.in_flight.remove(i);
                    self.proposer.on_cas_lost(f.acceptor, f.id);
                }
            }
            Waiting::Result(i) => {
                let f = self.in_flight.remove(i);
                let mut out = Vec::new();
                let actual = value.expect("a load replies a value");
                self.proposer
                    .on_cas(f.acceptor, f.id, actual, &[], &mut out);
                self.enqueue(out);
            }
            Waiting::ReadValue { proposal } => {
                let (stamp, content) = unpack(value.expect("a load replies a value"));
                self.adopted = content;
                let mut out = Vec::new();
                self.proposer
                    .on_value_read(stamp >= proposal && content != 0, &[], &mut out);
                self.enqueue(out);
            }
        }
    }

    /// The `wait_any` mask of the oldest CAS in flight towards each acceptor.
    fn oldest_mask(&self) -> u64 {
        let mut mask = 0u64;
        for a in 0..self.config.shape.nodes {
            if let Some(f) = self.in_flight.iter().find(|f| f.acceptor == a) {
                mask |= 1 << (u32::from(a) * CAS_SLOTS + f.cell);
            }
        }
        assert!(mask != 0, "something in flight");
        mask
    }

    /// Moves on from a decided, aborted or given-up slot.
    fn settle_slot(&mut self) -> bool {
        match self.proposer.outcome() {
            Outcome::Pending => false,
            Outcome::Decided { content, .. } => {
                let value = match content {
                    Content::Mine => self.input,
                    Content::Adopted => self.adopted,
                };
                self.next_slot(Some(value));
                true
            }
            Outcome::Aborted if self.attempts < self.config.max_attempts => {
                self.start_attempt();
                true
            }
            // Its slots are never recycled: no word of another lap (Overtaken) is met.
            Outcome::Aborted | Outcome::Overflow | Outcome::Overtaken => {
                self.next_slot(None);
                true
            }
        }
    }

    fn start_attempt(&mut self) {
        self.attempts += 1;
        let mut out = Vec::new();
        self.proposer.prepare(&mut out);
        self.enqueue(out);
    }

    fn next_slot(&mut self, decision: Option<u64>) {
        self.decisions.push(decision);
        self.slot += 1;
        // CASes of the finished slot still in flight are abandoned. Reusing their scratch
        // cells is safe: completions on one queue pair land in order, and `test` of a work
        // id waits for every earlier operation with it, the abandoned one included.
        self.in_flight.clear();
        self.attempts = 0;
        if self.slot < self.config.slots {
            self.proposer = SlotProposer::fresh(Self::slot_config(&self.config, self.me));
            self.start_attempt();
        }
    }
}

impl Process for SingleDecree {
    fn puts_from_memory(&self) -> bool {
        false // values go inline
    }

    fn resume(&mut self, reply: Reply) -> Step {
        if reply == Reply::Start {
            self.start_attempt();
        } else {
            self.absorb(reply);
        }
        loop {
            if let Some((op, waiting)) = self.queue.pop_front() {
                self.waiting = waiting;
                return Step::Op(op);
            }
            if self.slot >= self.config.slots {
                return Step::Done;
            }
            if self.settle_slot() {
                continue;
            }
            if self.in_flight.is_empty() {
                // Pending with nothing in flight: every acceptor that could answer has
                // (some were lost). Nothing more can happen for this attempt: give it up.
                self.next_slot(None);
                continue;
            }
            // Completions of one acceptor arrive in posting order: wait for the oldest CAS in
            // flight towards each acceptor, whichever answers first.
            self.waiting = Waiting::AnyAnswer;
            return Step::Op(Op::WaitAny {
                base: WorkId(FIRST_CAS_WORK_ID),
                mask: self.oldest_mask(),
            });
        }
    }
}
