//! Takeover: permission request, a majority of grants, then Mu's slow path — FUOs and
//! minimum proposals, catching up, `min_proposal` at a majority, re-proposal of the first
//! undecided slot — and the switch to the fast path.

use super::lead::{Lead, Phase, Then, bits};
use super::node::{CTRL, MuNode, Role, Then as NodeThen};
use super::{Word, proposal};
use velos_rdma::{Op, Reply, WorkId};

impl MuNode {
    /// Starts (or restarts) a takeover with a proposal number above any seen: publish the
    /// request and keep only this node's own writes on its log.
    pub(super) fn take_over(&mut self) {
        let round = (self.max_seen >> 8) + 1;
        let number = proposal(round, self.me);
        self.max_seen = number;
        self.takeovers_started.push(self.now);
        let n = usize::from(self.cfg.replicas);
        let busy = match &self.role {
            Role::Leader(lead) => lead.busy,
            Role::Follower => 0,
        };
        self.role = Role::Leader(Box::new(Lead {
            proposal: number,
            phase: Phase::Grants,
            since: self.now,
            confirmed: 0,
            busy,
            waiting: 0,
            need: 0,
            responded: 0,
            fuo_max: 0,
            joining: 0,
            next: 0,
            commit: 0,
            entry: None,
            backlog: vec![0; n],
            fuos: vec![0; n],
        }));
        let cfg = self.cfg.clone();
        self.op(Op::Store {
            loc: cfg.word(self.me, Word::Request),
            value: number,
        });
        if self.writers != 0 {
            self.op(Op::SetWriteAccess { writers: 0 });
        }
        self.op(Op::Store {
            loc: cfg.word(self.me, Word::Grant),
            value: number,
        });
        self.then = NodeThen::Lead(Then::Requested);
    }

    pub(super) fn requested(&mut self) {
        self.writers = 0;
        self.granted = self.lead().proposal;
        let now = self.now;
        self.lead_mut().since = now;
        self.then = NodeThen::Tick;
    }

    /// Reads the grant words of the followers not confirmed yet.
    pub(super) fn poll_grants(&mut self) {
        let cfg = self.cfg.clone();
        let lead = self.lead();
        let todo: Vec<u16> = self
            .others()
            .filter(|&p| lead.confirmed & (1 << p) == 0)
            .collect();
        for &p in &todo {
            if self.lead().busy & (1 << p) == 0 {
                self.lead_mut().busy |= 1 << p;
                self.op(Op::Get {
                    local: cfg.scratch(self.me, p, Word::Grant as u32),
                    remote: cfg.word(p, Word::Grant),
                    work_id: WorkId(CTRL + u32::from(p)),
                });
            }
            self.op(Op::Test {
                work_id: WorkId(CTRL + u32::from(p)),
            });
            self.op(Op::Load {
                loc: cfg.scratch(self.me, p, Word::Grant as u32),
            });
        }
        self.then = NodeThen::Lead(Then::Grants(todo));
    }

    pub(super) fn grants_read(&mut self, peers: &[u16], replies: &[Reply]) {
        let replies: Vec<&Reply> = replies
            .iter()
            .filter(|r| !matches!(r, Reply::Done))
            .collect();
        assert_eq!(replies.len(), 2 * peers.len(), "grants: two replies each");
        let number = self.lead().proposal;
        for (&p, r) in peers.iter().zip(replies.chunks(2)) {
            let lead = self.lead_mut();
            match (r[0], r[1]) {
                (Reply::Value(1), &Reply::Value(grant)) => {
                    lead.busy &= !(1 << p);
                    if grant == number {
                        lead.confirmed |= 1 << p;
                    }
                }
                (Reply::Failed(_), _) => lead.busy &= !(1 << p),
                _ => {}
            }
        }
        let lead = self.lead();
        if lead.confirmed.count_ones() + 1 >= self.cfg.majority() {
            // A majority granted: read their FUO and minimum proposal.
            let cfg = self.cfg.clone();
            for p in bits(lead.confirmed) {
                for word in [Word::Fuo, Word::MinProposal] {
                    self.op(Op::Get {
                        local: cfg.scratch(self.me, p, word as u32),
                        remote: cfg.word(p, word),
                        work_id: WorkId(CTRL + u32::from(p)),
                    });
                }
            }
            let confirmed = self.lead().confirmed;
            self.wait_for(Phase::ReadState, confirmed, self.cfg.majority() - 1);
        }
        self.then = NodeThen::Tick;
    }

    /// Enters `phase`, which waits for `need` of the followers `waiting` to complete their
    /// control operations.
    pub(super) fn wait_for(&mut self, phase: Phase, waiting: u64, need: u32) {
        let now = self.now;
        let lead = self.lead_mut();
        lead.phase = phase;
        lead.since = now;
        lead.busy |= waiting;
        lead.waiting = waiting;
        lead.need = need;
        lead.responded = 0;
    }

    /// Tests the control operations of the followers the phase waits for.
    pub(super) fn await_answers(&mut self) {
        let lead = self.lead();
        let peers: Vec<u16> = bits(lead.waiting & !lead.responded).collect();
        let ops: Vec<Op> = peers
            .iter()
            .map(|&p| Op::Test {
                work_id: WorkId(CTRL + u32::from(p)),
            })
            .collect();
        self.batch(ops, NodeThen::Lead(Then::Await(peers)));
    }

    pub(super) fn answers(&mut self, peers: &[u16], replies: &[Reply]) {
        assert_eq!(peers.len(), replies.len(), "await: one test each");
        for (&p, r) in peers.iter().zip(replies) {
            let lead = self.lead_mut();
            match r {
                Reply::Value(1) => {
                    lead.busy &= !(1 << p);
                    lead.responded |= 1 << p;
                }
                Reply::Failed(_) => {
                    lead.busy &= !(1 << p);
                    lead.waiting &= !(1 << p);
                    lead.confirmed &= !(1 << p);
                }
                _ => {}
            }
        }
        let lead = self.lead();
        if lead.responded.count_ones() < lead.need {
            if lead.waiting.count_ones() < lead.need {
                return self.take_over(); // too many followers gone: start over
            }
            self.then = NodeThen::Tick;
            return;
        }
        // The rest are caught up later, if they come back, as joiners.
        let responded = lead.responded;
        if !matches!(lead.phase, Phase::CopyIn { .. }) {
            self.lead_mut().confirmed &= responded | !lead.waiting;
        }
        let cfg = self.cfg.clone();
        match self.lead().phase {
            Phase::ReadState => {
                let peers: Vec<u16> = bits(responded).collect();
                self.op(Op::Load {
                    loc: cfg.word(self.me, Word::MinProposal),
                });
                for &p in &peers {
                    for word in [Word::Fuo, Word::MinProposal] {
                        let loc = cfg.scratch(self.me, p, word as u32);
                        self.op(Op::Load { loc });
                    }
                }
                self.then = NodeThen::Lead(Then::StateRead(peers));
            }
            Phase::CopyIn { .. } => {
                let (from, to) = (self.applied.len() as u64, self.lead().fuo_max);
                for slot in from..to {
                    for k in 0..=cfg.value_words {
                        let loc = cfg.slot(self.me, slot, k);
                        self.op(Op::Load { loc });
                    }
                }
                self.then = NodeThen::Lead(Then::Copied(from, to));
            }
            Phase::Prepare => {
                let (confirmed, fuo_max) = (self.lead().confirmed, self.lead().fuo_max);
                for p in bits(confirmed) {
                    for k in 0..=cfg.value_words {
                        self.op(Op::Get {
                            local: cfg.scratch(self.me, p, 5 + k),
                            remote: cfg.slot(p, fuo_max, k),
                            work_id: WorkId(CTRL + u32::from(p)),
                        });
                    }
                }
                self.wait_for(Phase::ReadSlot, confirmed, cfg.majority() - 1);
                self.then = NodeThen::Tick;
            }
            Phase::ReadSlot => {
                let peers: Vec<u16> = bits(responded).collect();
                let fuo_max = self.lead().fuo_max;
                for k in 0..=cfg.value_words {
                    let loc = cfg.slot(self.me, fuo_max, k);
                    self.op(Op::Load { loc });
                }
                for &p in &peers {
                    for k in 0..=cfg.value_words {
                        let loc = cfg.scratch(self.me, p, 5 + k);
                        self.op(Op::Load { loc });
                    }
                }
                self.then = NodeThen::Lead(Then::SlotRead(peers));
            }
            Phase::Grants | Phase::Fast => unreachable!("mu: no wait in this phase"),
        }
    }
}
