//! The follower's turn: learn the next slot from the local words, or catch up by reading
//! it at every live replica (see [`crate::log::learner`]).

use super::{CatchUp, Purpose, Replica, Stage, Then, ValueRead};
use crate::log::config::ids;
use crate::log::learner::{local_decision, majority_decision};
use crate::proposal::ProposerId;
use velos_rdma::Op;

impl Replica {
    /// The follower's turn: learn the next slot locally, or catch up by reading it.
    pub(super) fn follow(&mut self) {
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

    pub(super) fn learn(&mut self, slot: u64, acceptor: u16, state: crate::word::AcceptorState) {
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

    pub(super) fn start_catch_up(&mut self, k: u64) {
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
}
