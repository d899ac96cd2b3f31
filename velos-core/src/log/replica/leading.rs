//! The leader's side of a turn: its window of slots, and its slot commands turned into
//! operations on the links.

use super::{ProposeError, Purpose, Replica, Role, Stage, Then, ValueRead};
use crate::log::config::ids;
use crate::log::leader::{Leader, Proposal, SlotAt, Value};
use crate::log::links::CasTag;
use crate::log::value::{CONFIG_FLAG, RESTAMP_FLAG, key, stamp, to_words};
use crate::proposal::ProposerId;
use crate::slot::SlotCommand;
use velos_rdma::{Loc, Op};

impl Replica {
    /// The leader of `term`: this replica's, or its repair of a slot (see [`follow`]).
    pub(super) fn proposer(&mut self, term: u64) -> Option<&mut Leader> {
        match (&mut self.role, &mut self.repair) {
            (Role::Leader(l), _) if l.term == term => Some(l),
            (_, Some(r)) if r.term == term => Some(r),
            _ => None,
        }
    }

    /// Turns the slot commands of the leader of `term` into operations on the links.
    pub(super) fn issue(&mut self, term: u64, cmds: Vec<(SlotAt, SlotCommand)>) {
        if cmds.is_empty() {
            return;
        }
        let leader = match (&mut self.role, &mut self.repair) {
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
                    let position = self.ring.position(slot);
                    let remote = self.shape.epoch_word(acceptor, position, epoch);
                    let tag = CasTag { term, slot, id };
                    self.links
                        .send_cas(acceptor, remote, (expected, desired), tag, &mut ops);
                }
                SlotCommand::WriteValue {
                    acceptor,
                    content,
                    proposal,
                } => {
                    let value = leader.write_of(slot, content, key(epoch, proposal));
                    let me = ProposerId(self.me);
                    let s = self.ring.position(slot);
                    // A configuration entry's length carries the flag.
                    let flag = if value.config { CONFIG_FLAG } else { 0 };
                    let len = value.bytes.len() | flag;
                    let tag = self.ring.tag(slot);
                    // The origin first, then the bytes (see `Value::origin`).
                    let content: Vec<u64> = std::iter::once(value.origin)
                        .chain(to_words(&value.bytes))
                        .collect();
                    let begin = self.shape.value_stamp(acceptor, me, s);
                    let end = self.shape.value_end_stamp(acceptor, me, s);
                    let w = self.written.entry(slot).or_default();
                    let bit = 1 << acceptor;
                    let puts: Vec<(Loc, u64)> =
                        if w.holds & bit != 0 && (&w.content, w.len) == (&content, len) {
                            // A restamp: the end stamp, then the begin stamp (see `value`).
                            let r = stamp(tag, epoch, proposal, len | RESTAMP_FLAG);
                            vec![(end, r), (begin, r)]
                        } else {
                            // The begin stamp, the content, the end stamp; the first write of
                            // a buffer in the ring's first lap needs no begin stamp.
                            let first = w.ever & bit == 0 && self.ring.first_lap(slot);
                            if (&w.content, w.len) != (&content, len) {
                                (w.content, w.len, w.holds) = (content.clone(), len, 0);
                            }
                            w.holds |= bit;
                            let full = stamp(tag, epoch, proposal, len);
                            let words = content.iter().enumerate().map(|(i, &c)| {
                                (self.shape.value_word(acceptor, me, s, i as u32), c)
                            });
                            let head = (!first).then_some((begin, full));
                            head.into_iter().chain(words).chain([(end, full)]).collect()
                        };
                    w.ever |= bit;
                    for (remote, value) in puts {
                        let put = Op::PutInline {
                            remote,
                            value,
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

    /// The leader's turn: client values in, slots opened, outcomes settled.
    pub(super) fn lead(&mut self) {
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
            let value = Value {
                bytes: v,
                config: false,
                origin: crate::log::leader::origin(self.me, id),
            };
            leader.pending.push_back(Proposal { id, value });
        }
        let mut cmds = Vec::new();
        let words = &self.words[0];
        // Rule (decide-under-lease): without the lease, nothing is opened, filled or adopted.
        let progress = if self.lease.may_decide(self.now) {
            let room = self.room();
            leader.open_slots(&self.config, room, |s| words.get(&s).copied(), &mut cmds);
            leader.step(&self.config, &mut cmds)
        } else {
            Default::default()
        };
        self.role = Role::Leader(leader);
        self.moved |= progress.moved || !cmds.is_empty();
        self.issue(term, cmds);
        for (slot, value) in progress.apply {
            self.apply(slot, value);
        }
        let now = self.now;
        let acknowledged = progress.committed.iter().map(|&(_, slot)| (slot, now));
        self.acknowledged.extend(acknowledged);
        self.results.extend(
            progress
                .committed
                .into_iter()
                .map(|(id, slot)| (id, Ok(slot))),
        );
        if matches!(&self.role, Role::Leader(l) if l.overtaken) {
            self.step_down(); // the log moved on without me: copy a snapshot first
            return;
        }
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
    pub(super) fn plan(&mut self) {
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
