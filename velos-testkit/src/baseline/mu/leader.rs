//! The leader's fast path (its state is in `lead.rs`): one put per word of the entry into every
//! confirmed follower's log slot, decided once a majority (its own log included) has it.

use super::lead::{Inflight, Lead, Phase, Then, bits};
use super::node::{CTRL, Decision, LOG, MuNode, Role, Then as NodeThen};
use super::{Header, Word};
use velos_rdma::{Op, RdmaError, Reply, Words, WorkId};

impl MuNode {
    pub(super) fn lead(&self) -> &Lead {
        match &self.role {
            Role::Leader(lead) => lead,
            Role::Follower => unreachable!("mu: a leader step of a follower"),
        }
    }

    pub(super) fn lead_mut(&mut self) -> &mut Lead {
        match &mut self.role {
            Role::Leader(lead) => lead,
            Role::Follower => unreachable!("mu: a leader step of a follower"),
        }
    }

    /// The leader's step in its phase.
    pub(super) fn lead_step(&mut self) {
        let lead = self.lead();
        let timed_out = self.now.saturating_sub(lead.since) > self.cfg.phase_timeout_ns;
        match lead.phase {
            Phase::Fast => self.fast_step(),
            _ if timed_out => self.take_over(),
            Phase::Grants => self.poll_grants(),
            _ => self.await_answers(),
        }
    }

    pub(super) fn lead_then(&mut self, then: Then, replies: &[Reply]) {
        if !matches!(self.role, Role::Leader(_)) {
            self.then = NodeThen::Tick; // stepped down meanwhile: the replies are stale
            return;
        }
        match then {
            Then::Requested => self.requested(),
            Then::Grants(peers) => self.grants_read(&peers, replies),
            Then::Await(peers) => self.answers(&peers, replies),
            Then::StateRead(peers) => self.state_read(&peers, replies),
            Then::Copied(from, to) => self.copied(from, to, replies),
            Then::SlotRead(peers) => self.slot_read(&peers, replies),
            Then::Joiners(peers) => self.joiners(&peers, replies),
            Then::Acks(peers) => self.acks(&peers, replies),
        }
    }

    /// Fast path: wait for the entry in flight, else take in joiners, else propose.
    fn fast_step(&mut self) {
        let cfg = self.cfg.clone();
        let lead = self.lead();
        if let Some(entry) = &lead.entry {
            let peers: Vec<u16> = bits(lead.confirmed & !entry.acks).collect();
            let ops = peers.iter().map(|&p| Op::Test {
                work_id: WorkId(LOG + u32::from(p)),
            });
            let ops: Vec<Op> = ops.collect();
            return self.batch(ops, NodeThen::Lead(Then::Acks(peers)));
        }
        // Followers granted after the slow path: read their FUO, then catch them up.
        let granted: Vec<u16> = self
            .others()
            .filter(|&p| {
                (lead.confirmed | lead.joining) & (1 << p) == 0
                    && self.peers[usize::from(p)].grant == lead.proposal
            })
            .collect();
        for p in granted {
            self.lead_mut().joining |= 1 << p;
            self.op(Op::Get {
                local: cfg.scratch(self.me, p, Word::Fuo as u32),
                remote: cfg.word(p, Word::Fuo),
                work_id: WorkId(CTRL + u32::from(p)),
            });
        }
        let lead = self.lead();
        if lead.joining != 0 {
            let peers: Vec<u16> = bits(lead.joining).collect();
            for &p in &peers {
                self.op(Op::Test {
                    work_id: WorkId(CTRL + u32::from(p)),
                });
                self.op(Op::Load {
                    loc: cfg.scratch(self.me, p, Word::Fuo as u32),
                });
            }
            return self.then = NodeThen::Lead(Then::Joiners(peers));
        }
        if self.lead().next < u64::from(cfg.entries) {
            let n = self.proposed.len() as u64;
            let value: Vec<u64> = (0..u64::from(cfg.value_words))
                .map(|k| (u64::from(self.me) << 56) | (n << 8) | k)
                .collect();
            self.proposed.push(value.clone());
            let slot = self.lead().next;
            self.write_entry(slot, value, false);
        } else {
            self.idle();
        }
    }

    /// Writes `value` at `slot`: the own log by CPU stores, every confirmed follower's by
    /// puts (value words first, the header last, in order on the queue pair).
    pub(super) fn write_entry(&mut self, slot: u64, value: Vec<u64>, reproposal: bool) {
        let cfg = self.cfg.clone();
        let me = self.me;
        let lead = self.lead();
        assert!(
            lead.entry.is_none() && slot == lead.commit && slot < u64::from(cfg.slots),
            "write_entry: one entry at a time, right after the commit point"
        );
        assert_eq!(
            value.len() as u32,
            cfg.value_words,
            "write_entry: a whole value"
        );
        let header = Header {
            proposal: lead.proposal,
            commit: lead.commit,
        };
        for (k, &v) in value.iter().enumerate() {
            let loc = cfg.slot(me, slot, 1 + k as u32);
            self.op(Op::Store { loc, value: v });
        }
        self.op(Op::Store {
            loc: cfg.slot(me, slot, 0),
            value: header.encode(),
        });
        let confirmed = self.lead().confirmed;
        let words = Words::from(value.clone());
        for p in bits(confirmed) {
            if self.lead().backlog[usize::from(p)] >= cfg.max_backlog {
                self.lead_mut().confirmed &= !(1 << p); // caught up again if it grants
                continue;
            }
            self.lead_mut().backlog[usize::from(p)] += 1;
            self.copy_slot(p, slot, &words);
        }
        let now = self.now;
        let lead = self.lead_mut();
        lead.entry = Some(Inflight {
            slot,
            value,
            acks: 0,
            proposed_at: now,
            reproposal,
        });
        lead.next = slot + 1;
        assert!(lead.fast(), "write_entry: only in the fast path");
        self.then = NodeThen::Tick;
    }

    /// Puts `value` and then the own log's header of `slot` into follower `p`'s log: one
    /// multi-word put of the value words, then the header from the own log, in order on
    /// the queue pair (Mu writes one RDMA WRITE per entry with a canary byte at its end;
    /// here the header, the entry's first word, must land last, so it is a second put).
    pub(super) fn copy_slot(&mut self, p: u16, slot: u64, value: &Words) {
        let work_id = WorkId(LOG + u32::from(p));
        self.op(Op::PutWords {
            remote: self.cfg.slot(p, slot, 1),
            words: value.clone(),
            work_id,
        });
        let (local, remote) = (self.cfg.slot(self.me, slot, 0), self.cfg.slot(p, slot, 0));
        self.op(Op::Put {
            remote,
            local,
            work_id,
        });
    }

    /// The followers' acknowledgements of the entry in flight.
    fn acks(&mut self, peers: &[u16], replies: &[Reply]) {
        assert_eq!(peers.len(), replies.len(), "acks: one test per follower");
        let majority = self.cfg.majority();
        for (&p, r) in peers.iter().zip(replies) {
            match r {
                Reply::Value(1) => {
                    let lead = self.lead_mut();
                    lead.backlog[usize::from(p)] = 0;
                    if let Some(entry) = &mut lead.entry {
                        entry.acks |= 1 << p;
                    }
                }
                Reply::Failed(e) => {
                    if matches!(e, RdmaError::WorkFailed { cause, .. }
                        if matches!(**cause, RdmaError::RemoteAccess { .. }))
                    {
                        self.refusals += 1;
                    }
                    self.lead_mut().confirmed &= !(1 << p);
                }
                _ => {}
            }
        }
        let now = self.now;
        let lead = self.lead_mut();
        let entry = lead.entry.as_ref().expect("acks: an entry in flight");
        if (entry.acks & lead.confirmed).count_ones() + 1 >= majority {
            let entry = lead.entry.take().expect("an entry in flight");
            lead.commit = entry.slot + 1;
            self.decisions.push(Decision {
                slot: entry.slot,
                proposed_at: entry.proposed_at,
                decided_at: now,
                reproposal: entry.reproposal,
            });
            assert_eq!(entry.slot, self.applied.len() as u64, "decided in order");
            self.applied.push((entry.slot, entry.value));
            self.applied_at.push(now);
            self.store_fuo();
        } else if lead.confirmed.count_ones() + 1 < majority {
            // Deposed (refused) or too many followers gone: ask for permission again.
            self.take_over();
        } else {
            self.then = NodeThen::Tick;
        }
    }

    /// Publishes the own FUO (the number of entries applied).
    pub(super) fn store_fuo(&mut self) {
        let loc = self.cfg.word(self.me, Word::Fuo);
        let value = self.applied.len() as u64;
        self.batch([Op::Store { loc, value }], NodeThen::Tick);
    }

    /// Joining followers' FUOs: catch each up to `next`, then write to it.
    fn joiners(&mut self, peers: &[u16], replies: &[Reply]) {
        // The batch may start with the posts of new FUO reads.
        let replies: Vec<Reply> = replies
            .iter()
            .filter(|r| !matches!(r, Reply::Done))
            .cloned()
            .collect();
        assert_eq!(replies.len(), 2 * peers.len(), "joiners: two replies each");
        for (&p, r) in peers.iter().zip(replies.chunks(2)) {
            match (&r[0], &r[1]) {
                (Reply::Value(1), Reply::Value(fuo)) => {
                    let lead = self.lead_mut();
                    lead.joining &= !(1 << p);
                    lead.confirmed |= 1 << p;
                    lead.backlog[usize::from(p)] = 0;
                    let (from, to) = ((*fuo).min(lead.next), lead.next);
                    self.catch_up(p, from, to);
                }
                (Reply::Failed(_), _) => self.lead_mut().joining &= !(1 << p),
                _ => {}
            }
        }
        self.then = NodeThen::Tick;
    }

    /// Puts the own log's decided slots `from..to` into follower `p`'s, each with a header
    /// of this leader's proposal number and the commit point `to`.
    pub(super) fn catch_up(&mut self, p: u16, from: u64, to: u64) {
        assert!(
            from <= to && to <= self.lead().commit.max(self.lead().fuo_max),
            "catch_up: decided slots only"
        );
        let header = Header {
            proposal: self.lead().proposal,
            commit: to,
        };
        let work_id = WorkId(LOG + u32::from(p));
        for slot in from..to {
            for k in 1..=self.cfg.value_words {
                let (local, remote) = (self.cfg.slot(self.me, slot, k), self.cfg.slot(p, slot, k));
                self.op(Op::Put {
                    remote,
                    local,
                    work_id,
                });
            }
            self.op(Op::PutInline {
                remote: self.cfg.slot(p, slot, 0),
                value: header.encode(),
                work_id,
            });
        }
    }
}
