//! The queue pairs from one replica to each acceptor, as the engine uses them: every CAS
//! gets a scratch cell for its result and a work id of its own, completions of one acceptor
//! are tested oldest first (a queue pair completes in order), and operations that find no
//! free cell wait in a backlog, in order, so that a value's puts stay ahead of its CAS.

use super::config::Scratch;
use std::collections::VecDeque;
use velos_rdma::{Loc, Op, Rmw, WorkId};

/// What a CAS was for: the leader term, the slot and the slot proposer's CAS id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct CasTag {
    pub term: u64,
    pub slot: u64,
    pub id: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Deferred {
    /// A put of `slot`'s value in leader term `term`.
    Op { op: Op, term: u64, slot: u64 },
    Cas {
        remote: Loc,
        expected: u64,
        desired: u64,
        tag: CasTag,
    },
}

impl Deferred {
    /// The leader term and slot the operation is for.
    fn at(&self) -> (u64, u64) {
        match self {
            Deferred::Op { term, slot, .. } => (*term, *slot),
            Deferred::Cas { tag, .. } => (tag.term, tag.slot),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Link {
    /// CASes posted, oldest first, with their cells.
    in_flight: VecDeque<(u32, CasTag)>,
    /// Operations not posted yet for want of a cell, in order.
    backlog: VecDeque<Deferred>,
    /// Bit c set: cell c is free.
    free: u64,
    /// How many of the oldest CASes in flight were given up (reported lost while Ω
    /// suspected the acceptor): their completions, if any come, free the cells only.
    given_up: usize,
    /// How many of the newest CASes in flight were posted in this turn: their operations
    /// may still wait in the turn's queue, and their cells still hold an older CAS's
    /// result and work id (a test now would see that CAS complete).
    fresh: usize,
    /// A completion towards this acceptor was chained in this turn ([`Links::chain`]).
    chained: bool,
    /// Puts posted while no cell was free, since the last completion from the acceptor
    /// (rule (puts wait with their CAS)).
    blind: u32,
    /// The most such puts: the link's number of cells.
    blind_max: u32,
}

/// The links to every acceptor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Links {
    scratch: Scratch,
    links: Vec<Link>,
}

impl Link {
    /// Rule (puts wait with their CAS): whether a put may leave now, ahead of the CAS it
    /// precedes — a cell is free for that CAS, or fewer than `blind_max` puts went out with
    /// none free since the acceptor last completed anything — counting it if it leaves
    /// blind.
    fn let_put_leave(&mut self) -> bool {
        if self.free != 0 {
            return true;
        }
        let leaves = self.blind < self.blind_max;
        self.blind += u32::from(leaves);
        leaves
    }
}

impl Links {
    pub(super) fn new(scratch: Scratch, acceptors: u16, cells: u32) -> Links {
        assert!((1..=64).contains(&cells), "1 to 64 cells per acceptor");
        let free = if cells == 64 {
            u64::MAX
        } else {
            (1 << cells) - 1
        };
        let link = Link {
            free,
            blind_max: cells,
            ..Link::default()
        };
        Links {
            scratch,
            links: vec![link; usize::from(acceptors)],
        }
    }

    /// Sends a put of `slot`'s value in leader term `term` towards acceptor `a`, behind
    /// its backlog. Rule (puts wait with their CAS): with no cell free, a put goes ahead of
    /// its waiting CAS only while fewer than `blind_max` did so since the acceptor last
    /// completed anything; then it waits with its CAS. Without the bound every accept
    /// towards a crashed acceptor whose cells its hung CASes hold posted its put while its
    /// CAS waited and was given up: one put per slot, none ever completing, piled up on
    /// the queue pair for as long as the crash lasted. Without the puts ahead, a replica
    /// paused for a while came back missing every value of the pause, and learning them
    /// slowed a later takeover past the liveness bound (`velos vopr --overflow` seed 2892).
    pub(super) fn send(&mut self, a: u16, op: Op, (term, slot): (u64, u64), out: &mut Vec<Op>) {
        let link = &mut self.links[usize::from(a)];
        if link.backlog.is_empty() && link.let_put_leave() {
            out.push(op);
        } else {
            link.backlog.push_back(Deferred::Op { op, term, slot });
        }
    }

    /// Sends a CAS towards acceptor `a`: posted now if a cell is free and nothing waits.
    pub(super) fn send_cas(
        &mut self,
        a: u16,
        remote: Loc,
        (expected, desired): (u64, u64),
        tag: CasTag,
        out: &mut Vec<Op>,
    ) {
        let deferred = Deferred::Cas {
            remote,
            expected,
            desired,
            tag,
        };
        let link = &mut self.links[usize::from(a)];
        if link.backlog.is_empty() && link.free != 0 {
            self.post(a, deferred, out);
        } else {
            link.backlog.push_back(deferred);
        }
    }

    fn post(&mut self, a: u16, deferred: Deferred, out: &mut Vec<Op>) {
        match deferred {
            Deferred::Op { op, .. } => out.push(op),
            Deferred::Cas {
                remote,
                expected,
                desired,
                tag,
            } => {
                let link = &mut self.links[usize::from(a)];
                assert!(link.free != 0, "a CAS is posted into a free cell");
                let cell = link.free.trailing_zeros();
                link.free &= !(1 << cell);
                link.in_flight.push_back((cell, tag));
                link.fresh += 1;
                out.push(Op::Atomic {
                    local: self.scratch.cas(a, cell),
                    remote,
                    rmw: Rmw::Cas {
                        expected,
                        new: desired,
                    },
                    work_id: self.scratch.cas_id(a, cell),
                });
            }
        }
    }

    /// Posts what waited in the backlogs, while cells are free.
    pub(super) fn drain(&mut self, out: &mut Vec<Op>) {
        for a in 0..self.links.len() as u16 {
            loop {
                let link = &mut self.links[usize::from(a)];
                let ready = match link.backlog.front() {
                    // Rule (puts wait with their CAS).
                    Some(Deferred::Op { .. }) => link.let_put_leave(),
                    Some(Deferred::Cas { .. }) => link.free != 0,
                    None => false,
                };
                if !ready {
                    break;
                }
                let next = link.backlog.pop_front().expect("a front");
                self.post(a, next, out);
            }
        }
    }

    /// Whether operations towards some acceptor wait for a free cell.
    pub(super) fn any_congested(&self) -> bool {
        self.links.iter().any(|l| !l.backlog.is_empty())
    }

    /// Rule (bounded backlog): drops from every backlog the operations of leader term
    /// `term` for the slots `settled` says were decided, and tells `dropped_put(a, slot)`
    /// of each put dropped. A decided slot needs none of them (an operation not posted is
    /// one lost on the wire: Paxos asks nothing of it), and a backlog fed one slot's CAS
    /// a turn while its acceptor lagged did not drain once the link healed: it held the
    /// link congested, and every retry with it, until the leader passed the lead
    /// (`velos vopr` seed 3484). Now a backlog holds the window's slots only. A slot's
    /// puts and CAS go together, so no CAS kept finds its value's puts missing ahead of
    /// it. The caller must forget that `a` holds the slot's value (as rule (give up)
    /// does): a later term re-proposing the slot restamped what it took for its content
    /// there, over an older lap's bytes (`velos vopr` seed 18396, agreement broken).
    pub(super) fn forget_settled(
        &mut self,
        term: u64,
        settled: impl Fn(u64) -> bool,
        mut dropped_put: impl FnMut(u16, u64),
    ) {
        if !self.any_congested() {
            return; // the common case: nothing waits
        }
        for (a, link) in self.links.iter_mut().enumerate() {
            link.backlog.retain(|d| {
                let (t, slot) = d.at();
                let keep = t != term || !settled(slot);
                if !keep && matches!(d, Deferred::Op { .. }) {
                    dropped_put(a as u16, slot);
                }
                keep
            });
        }
        let waits = |d: &Deferred| d.at().0 == term && settled(d.at().1);
        assert!(
            self.links.iter().all(|l| !l.backlog.iter().any(waits)),
            "rule (bounded backlog): no decided slot's operation waits"
        );
    }

    /// The work id and result word of the oldest CAS in flight towards `a`.
    pub(super) fn oldest(&self, a: u16) -> Option<(WorkId, Loc)> {
        let &(cell, _) = self.links[usize::from(a)].in_flight.front()?;
        Some((self.scratch.cas_id(a, cell), self.scratch.cas(a, cell)))
    }

    /// A turn starts: every CAS in flight was posted in an earlier one.
    pub(super) fn new_turn(&mut self) {
        for link in &mut self.links {
            link.fresh = 0;
            link.chained = false;
        }
    }

    /// The CAS to test right after a completion towards `a`, in the same turn: the next
    /// oldest if it was posted in an earlier turn ([`Links::oldest_posted`]), once per
    /// acceptor and turn. The one chained test catches a prepare and an accept posted in
    /// one turn, which complete together; an unbounded chain kept a busy leader in one
    /// turn for as long as completions came, and its heartbeat stalled (Ω deposed it).
    pub(super) fn chain(&mut self, a: u16) -> Option<(WorkId, Loc)> {
        let next = self
            .oldest_posted(a)
            .filter(|_| !self.links[usize::from(a)].chained)?;
        self.links[usize::from(a)].chained = true;
        Some(next)
    }

    /// [`Links::oldest`], if it was posted in an earlier turn: its operation was executed,
    /// so a test of its cell tests it (rule (test what was posted)).
    pub(super) fn oldest_posted(&self, a: u16) -> Option<(WorkId, Loc)> {
        let link = &self.links[usize::from(a)];
        if link.in_flight.len() > link.fresh {
            self.oldest(a)
        } else {
            None
        }
    }

    /// The oldest CAS towards `a` completed (or failed): its tag, or `None` if it was
    /// given up already ([`Links::give_up`]); its cell is free again.
    pub(super) fn complete(&mut self, a: u16) -> Option<CasTag> {
        let link = &mut self.links[usize::from(a)];
        let (cell, tag) = link
            .in_flight
            .pop_front()
            .expect("a completion for a CAS in flight");
        assert!(link.free & (1 << cell) == 0, "the cell was taken");
        link.blind = 0; // the acceptor is alive: its puts may go ahead again
        assert!(
            link.in_flight.len() >= link.fresh,
            "rule (test what was posted): a CAS of this turn is never tested in it"
        );
        link.free |= 1 << cell;
        if link.given_up > 0 {
            link.given_up -= 1;
            return None;
        }
        Some(tag)
    }

    /// Gives up on acceptor `a`, which Ω suspects: the CASes in flight towards it not given
    /// up before, and those waiting in its backlog, are returned (in posting order) to be
    /// reported lost. The backlog is dropped whole, puts included: it is a suffix of the
    /// link's order, so no CAS posted later finds a value's puts missing ahead of it (each
    /// accept writes its value again); and a crashed acceptor's backlog no longer grows
    /// for ever. The cells of the CASes in flight stay taken until their completions come.
    pub(super) fn give_up(&mut self, a: u16) -> Vec<CasTag> {
        let link = &mut self.links[usize::from(a)];
        let mut lost: Vec<CasTag> = link
            .in_flight
            .iter()
            .skip(link.given_up)
            .map(|&(_, tag)| tag)
            .collect();
        link.given_up = link.in_flight.len();
        lost.extend(link.backlog.drain(..).filter_map(|d| match d {
            Deferred::Cas { tag, .. } => Some(tag),
            Deferred::Op { .. } => None,
        }));
        assert!(
            link.backlog.is_empty() && link.given_up == link.in_flight.len(),
            "rule (give up): nothing towards a suspected acceptor is left to report"
        );
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::log::config::LogConfig;

    /// Links of replica 0 to 3 acceptors, one cell each, and a word at acceptor 1.
    fn one_cell() -> (Links, Loc) {
        let config = LogConfig::new(3, 16, 8);
        let links = Links::new(Scratch::new(&config, 0), 3, 1);
        (links, config.shape().epoch_word(1, 0, 0))
    }

    fn put_to(remote: Loc, value: u64) -> Op {
        Op::PutInline {
            remote,
            value,
            work_id: WorkId(1),
        }
    }

    fn tag(slot: u64) -> CasTag {
        CasTag {
            term: 1,
            slot,
            id: slot,
        }
    }

    #[test]
    fn a_cas_posted_in_this_turn_is_not_tested_in_it() {
        let config = LogConfig::new(3, 16, 8);
        let mut links = Links::new(Scratch::new(&config, 0), 3, 2);
        let mut out = Vec::new();
        let remote = config.shape().epoch_word(1, 0, 0);
        links.send_cas(1, remote, (0, 1), tag(0), &mut out);
        assert_eq!(links.oldest_posted(1), None, "posted in this turn");
        links.new_turn();
        let first = links.oldest_posted(1).expect("posted in an earlier turn");
        assert_eq!(links.complete(1), Some(tag(0)));
        // The freed cell serves the next CAS at once: same work id, same result word.
        links.send_cas(1, remote, (1, 2), tag(1), &mut out);
        assert_eq!(links.oldest(1), Some(first), "the cell is reused");
        assert_eq!(
            links.oldest_posted(1),
            None,
            "rule (test what was posted): its test would see the completed CAS"
        );
        links.new_turn();
        assert_eq!(links.oldest_posted(1), Some(first));
        assert_eq!(links.chain(1), Some(first), "one chained test a turn");
        assert_eq!(links.chain(1), None, "and no more");
    }

    /// Rule (puts wait with their CAS): with every cell taken (by CASes given up towards a
    /// crashed acceptor) a value's put is posted ahead of its CAS only as many times as
    /// there are cells; then it waits with it, leaves with it once a cell frees, and goes
    /// when the backlog is given up.
    #[test]
    fn a_put_waits_with_its_cas() {
        let (mut links, remote) = one_cell();
        let put = |value| put_to(remote, value);
        let mut out = Vec::new();
        links.send(1, put(0), (1, 0), &mut out);
        links.send_cas(1, remote, (0, 1), tag(0), &mut out);
        assert_eq!(out.len(), 2, "a free cell: the put and its CAS go out");
        assert_eq!(links.give_up(1), [tag(0)], "the acceptor is suspected");
        for slot in 1..100 {
            links.send(1, put(slot), (1, slot), &mut out);
            links.send_cas(1, remote, (0, slot), tag(slot), &mut out);
            links.drain(&mut out);
            assert_eq!(links.give_up(1), [tag(slot)], "reported lost, puts dropped");
        }
        // One cell: one put went ahead of its waiting CAS, then none.
        assert_eq!(out.len(), 3, "nothing more posted towards it: {out:?}");
        // Its late completion frees the cell: a put and its CAS leave together.
        links.new_turn();
        assert_eq!(links.complete(1), None, "given up already");
        links.send(1, put(100), (1, 100), &mut out);
        links.send_cas(1, remote, (0, 100), tag(100), &mut out);
        assert_eq!(out.len(), 5, "the put and its CAS: {out:?}");
        assert_eq!(out[3], put(100));
    }

    /// Rule (bounded backlog): a decided slot's puts and CAS leave the backlog; an open
    /// slot's, and another term's, stay in order.
    #[test]
    fn a_decided_slots_operations_leave_the_backlog() {
        let (mut links, remote) = one_cell();
        let put = |value| put_to(remote, value);
        let mut out = Vec::new();
        links.send_cas(1, remote, (0, 1), tag(0), &mut out);
        links.send_cas(1, remote, (0, 1), tag(1), &mut out);
        assert_eq!(out.len(), 1, "the one cell taken");
        for slot in 2..4 {
            links.send(1, put(slot), (1, slot), &mut out);
            links.send_cas(1, remote, (0, slot), tag(slot), &mut out);
        }
        let mut other_term = tag(2);
        other_term.term = 2;
        links.send_cas(1, remote, (0, 9), other_term, &mut out);
        assert_eq!(out.len(), 1, "the rest waits");
        let mut dropped = Vec::new();
        links.forget_settled(1, |s| s == 1 || s == 2, |a, s| dropped.push((a, s)));
        assert_eq!(dropped, [(1, 2)], "slot 2's put (slot 1's was posted)");
        assert!(
            links.any_congested(),
            "slot 3 and the other term's CAS wait"
        );
        // The cell frees: what is left goes out, in order.
        links.new_turn();
        assert_eq!(links.complete(1), Some(tag(0)));
        out.clear();
        links.drain(&mut out);
        assert_eq!(out.len(), 2, "slot 3's put and its CAS (one cell): {out:?}");
        assert_eq!(out[0], put(3));
        assert!(matches!(
            out[1],
            Op::Atomic {
                rmw: Rmw::Cas { new: 3, .. },
                ..
            }
        ));
        links.new_turn();
        assert_eq!(links.complete(1), Some(tag(3)));
        out.clear();
        links.drain(&mut out);
        assert!(matches!(
            out[..],
            [Op::Atomic {
                rmw: Rmw::Cas { new: 9, .. },
                ..
            }]
        ));
        assert!(!links.any_congested());
    }
}
