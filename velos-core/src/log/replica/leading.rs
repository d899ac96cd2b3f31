//! The leader's side of a turn: its window of slots, and its slot commands turned into
//! operations on the links.

use super::{Item, ProposeError, Purpose, Replica, Role, Stage, Then, ValueRead};
use crate::log::config::ids;
use crate::log::leader::{Leader, SlotAt};
use crate::log::links::CasTag;
use crate::log::value::{CONFIG_FLAG, RESTAMP_FLAG, key, stamp, word_iter};
use crate::proposal::ProposerId;
use crate::slot::SlotCommand;
use velos_rdma::{Loc, Op};

/// The longest padding (in words) a value's put covers to reach its buffer's end stamp in
/// one work request (256 bytes: far less than a round trip's worth of wire time); a
/// longer one costs a second put for the end stamp.
const PAD_WORDS_MAX: usize = 32;

/// The leader of `term` among a role and a repair (fields borrowed apart, so that the
/// rest of the replica stays usable beside it).
pub(super) fn proposer_in<'a>(
    role: &'a mut Role,
    repair: &'a mut Option<Box<Leader>>,
    term: u64,
) -> Option<&'a mut Leader> {
    match (role, repair) {
        (Role::Leader(l), _) if l.term == term => Some(l),
        (_, Some(r)) if r.term == term => Some(r),
        _ => None,
    }
}

/// Rule (suspected last): what goes to an acceptor in `suspected` (a mask) is posted after
/// the rest, so that a new leader's first rounds reach the live majority without first
/// posting towards the crashed leader. A stable sort: each acceptor's commands keep their
/// order (a put before its accept CAS).
fn suspected_last(cmds: &mut [(SlotAt, SlotCommand)], suspected: u64) {
    if suspected != 0 {
        cmds.sort_by_key(|(_, c)| suspected >> c.acceptor() & 1);
    }
}

impl Replica {
    /// The leader of `term`: this replica's, or its repair of a slot (see [`follow`]).
    pub(super) fn proposer(&mut self, term: u64) -> Option<&mut Leader> {
        proposer_in(&mut self.role, &mut self.learn.repair, term)
    }

    /// Turns the slot commands of the leader of `term` into operations on the links
    /// (`cmds` is left empty, its room kept for the next call).
    pub(super) fn issue(&mut self, term: u64, cmds: &mut Vec<(SlotAt, SlotCommand)>) {
        if cmds.is_empty() {
            return;
        }
        let leader = proposer_in(&mut self.role, &mut self.learn.repair, term)
            .unwrap_or_else(|| panic!("slot commands of term {term}, which nobody runs"));
        let mut ops = std::mem::take(&mut self.bufs.op_buf);
        assert!(ops.is_empty(), "operations are queued where they are made");
        suspected_last(cmds, self.beat.suspected);
        for (SlotAt { slot, epoch }, cmd) in cmds.drain(..) {
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
                    let words = &mut self.bufs.value_buf;
                    words.clear();
                    words.push(value.origin);
                    words.extend(word_iter(&value.bytes));
                    let begin = self.shape.value_stamp(acceptor, me, s);
                    let end = self.shape.value_end_stamp(acceptor, me, s);
                    let spare = &mut self.learn.spare_written;
                    let w = self.learn.written.entry(slot).or_insert_with(|| {
                        spare.take().unwrap_or_default() // kept cleared
                    });
                    let bit = 1 << acceptor;
                    let same = w.holds_content(len, words);
                    let links = &mut self.links;
                    let put = |remote: Loc, value: u64| Op::PutInline {
                        remote,
                        value,
                        work_id: ids::PUT,
                    };
                    let full = stamp(tag, epoch, proposal, len);
                    if w.holds & bit != 0 && same {
                        // A restamp: the end stamp, then the begin stamp (see `value`).
                        let r = stamp(tag, epoch, proposal, len | RESTAMP_FLAG);
                        links.send(acceptor, put(end, r), (term, slot), &mut ops);
                        links.send(acceptor, put(begin, r), (term, slot), &mut ops);
                    } else {
                        if !same {
                            // A new content: the payload is made again below.
                            (w.len, w.holds, w.payload_stamp) = (len, 0, 0);
                        }
                        w.holds |= bit;
                        // The begin stamp, the content, the end stamp, in this order
                        // (`value`): one put, whose words land in address order, when the
                        // buffer's rest up to the end stamp is short; else the end stamp
                        // in a second put behind it on the same queue pair.
                        let pad = self.config.value_words() as usize - words.len();
                        let whole = pad <= PAD_WORDS_MAX;
                        if w.payload_stamp != full {
                            let tail = whole.then(|| std::iter::repeat_n(0, pad).chain([full]));
                            let tail = tail.into_iter().flatten();
                            w.payload.refill(
                                [full].into_iter().chain(words.iter().copied()).chain(tail),
                            );
                            w.payload_stamp = full;
                        }
                        let payload = Op::PutWords {
                            remote: begin,
                            words: w.payload.clone(),
                            work_id: ids::PUT,
                        };
                        links.send(acceptor, payload, (term, slot), &mut ops);
                        if !whole {
                            links.send(acceptor, put(end, full), (term, slot), &mut ops);
                        }
                    }
                }
                SlotCommand::ReadValue {
                    acceptor,
                    proposer,
                    proposal,
                } => self.learn.reads.push_back(ValueRead {
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
        self.queue(&mut ops);
        self.bufs.op_buf = ops;
        assert!(cmds.is_empty(), "every slot command was issued");
    }

    /// Queues `ops` (emptied) after the operations queued so far.
    pub(super) fn queue(&mut self, ops: &mut Vec<Op>) {
        if self.items.is_empty() {
            // Rule (ready posts): nothing else waits but ready posts, so they are next in
            // any case; they wait as they are (nobody reads their replies) and go out as
            // one block.
            if self.ready.is_empty() {
                std::mem::swap(&mut self.ready, ops);
            } else {
                self.ready.append(ops);
            }
            assert!(ops.is_empty(), "the ready posts are taken");
        } else {
            self.items
                .extend(ops.drain(..).map(|op| Item::Op(op, Then::Ignore)));
        }
    }

    /// The leader's turn: slots opened, outcomes settled.
    pub(super) fn lead(&mut self) {
        let Role::Leader(mut leader) = std::mem::replace(&mut self.role, Role::Follower) else {
            unreachable!("leading")
        };
        let term = leader.term;
        // Rule (decided elsewhere): how far a voter applied, as its heartbeat said.
        let voters = self.membership.voters(self.next_apply);
        leader.applied_elsewhere = voters
            .iter()
            .filter(|&a| a != self.me)
            .map(|a| self.beat.reached[usize::from(a)])
            .max()
            .unwrap_or(0);
        let mut cmds = std::mem::take(&mut self.bufs.cmd_buf);
        let mut progress = std::mem::take(&mut self.bufs.progress);
        let words = &self.learn.words[0];
        // Rule (decide-under-lease): without the lease, nothing is opened, filled or adopted.
        if self.leasing.lease.may_decide(self.now) {
            let room = self.room();
            let seed = |s| words.get(&s).copied();
            leader.open_slots(&self.config, room, seed, &mut cmds);
            let may_retry = !self.links.any_congested() && self.now >= self.retry_at;
            leader.step(&self.config, &mut cmds, &mut progress, may_retry);
            // The slots decided just now make room: prepare the next ones in this turn, not
            // the next (one turn less per decision; the turn loaded their seeds) — unless a
            // prepared slot already waits for the next command: then they go out with that
            // command's accept, behind one doorbell per acceptor instead of two.
            if !leader.has_prepared_room() {
                leader.open_slots(&self.config, room, seed, &mut cmds);
            }
            self.post_ahead(&mut leader);
        }
        if std::mem::take(&mut progress.dueling) {
            // Rule (duel): two replicas that both believe they lead (a broken link hides
            // one's heartbeat from the other) outbid each other's prepares for ever if both
            // retry at once. The one Ω ranks lower (more members below it) waits a quarter
            // failure timeout per rank before its next retry, so the lowest retries first
            // and decides: Ω's own order, applied to proposers. A predecessor's promises
            // abort a new leader's first attempt only (its ballot moves above them), so
            // a failover never waits here.
            let members = self.membership.at(self.next_apply);
            let rank = (0..self.me).filter(|&a| members.contains(a)).count() as u64;
            self.retry_at = self.now + rank * (self.config.failure_timeout_ns / 4);
        }
        let written = &mut self.learn.written;
        let dropped_put = |a: u16, slot| {
            if let Some(w) = written.get_mut(&slot) {
                w.holds &= !(1 << a);
            }
        };
        self.links
            .forget_settled(term, |s| leader.settled(s), dropped_put);
        self.role = Role::Leader(leader);
        self.report(&mut progress.events);
        self.moved |= progress.moved || !cmds.is_empty();
        self.issue(term, &mut cmds);
        self.bufs.cmd_buf = cmds;
        for (slot, value) in progress.apply.drain(..) {
            self.apply(slot, value);
        }
        if self.keeping_acknowledged {
            let now = self.now;
            let acknowledged = progress.committed.iter().map(|&(_, slot)| (slot, now));
            self.acknowledged.extend(acknowledged);
        }
        let committed = progress
            .committed
            .drain(..)
            .map(|(id, slot)| (id, Ok(slot)));
        self.api.results.extend(committed);
        progress.moved = false;
        self.bufs.progress = progress;
        if matches!(&self.role, Role::Leader(l) if l.overtaken) {
            self.step_down(); // the log moved on without me: copy a snapshot first
            return;
        }
        if let Role::Leader(l) = &mut self.role
            && let Some(slot) = l.exhausted
        {
            // Nothing pending can be decided any more: say so rather than hold it.
            let refused = std::mem::take(&mut l.pending);
            self.api.results.extend(
                refused
                    .into_iter()
                    .map(|p| (p.id, Err(ProposeError::Exhausted { slot }))),
            );
        }
    }

    /// The plan at the end of a turn.
    pub(super) fn plan(&mut self) {
        if std::mem::take(&mut self.beat.new_suspicion) {
            // Rule (Ω-evidence): this turn's tests showed a peer silent. Judged now, not
            // at the next turn's start: a crashed leader's successor starts a turn sooner.
            self.follow_omega();
            self.give_up_suspected();
        }
        match self.role {
            Role::Leader(_) => self.lead(),
            Role::Follower => self.follow(),
        }
        let mut ops = std::mem::take(&mut self.bufs.op_buf);
        self.links.drain(&mut ops);
        self.queue(&mut ops);
        self.bufs.op_buf = ops;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suspected_acceptors_go_last_and_each_acceptor_keeps_its_order() {
        let at = |slot| SlotAt { slot, epoch: 0 };
        let cas = |id, acceptor| SlotCommand::Cas {
            id,
            acceptor,
            expected: 0,
            desired: 1,
        };
        let put = |acceptor| SlotCommand::WriteValue {
            acceptor,
            content: crate::slot::Content::Mine,
            proposal: 1,
        };
        // Two slots' accepts, a put then a CAS per acceptor, acceptor 0 first.
        let accepts: Vec<(SlotAt, SlotCommand)> = (0..2u64)
            .flat_map(|s| (0..3u16).flat_map(move |a| [(at(s), put(a)), (at(s), cas(s, a))]))
            .collect();
        let mut none = accepts.clone();
        suspected_last(&mut none, 0);
        assert_eq!(none, accepts, "nothing suspected: the order is kept");
        let mut sorted = accepts.clone();
        suspected_last(&mut sorted, 1 << 0);
        let acceptors: Vec<u16> = sorted.iter().map(|(_, c)| c.acceptor()).collect();
        assert_eq!(
            acceptors,
            [1, 1, 2, 2, 1, 1, 2, 2, 0, 0, 0, 0],
            "acceptor 0 last"
        );
        for a in 0..3 {
            let of = |v: &[(SlotAt, SlotCommand)]| -> Vec<(SlotAt, SlotCommand)> {
                v.iter()
                    .filter(|(_, c)| c.acceptor() == a)
                    .cloned()
                    .collect()
            };
            assert_eq!(of(&sorted), of(&accepts), "acceptor {a} keeps its order");
        }
    }
}
