//! The follower's turn: learn the next slot from the local words, or catch up by reading
//! its words of every epoch at every live replica (see [`crate::log::learner`]): a pair
//! accepted by a majority in any epoch is chosen (epochs carry what earlier ones chose, see
//! [`crate::freeze`]).

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
        let local = self
            .words
            .iter()
            .enumerate()
            .find_map(|(e, words)| local_decision(layout, words, k).map(|s| (e as u32, s)));
        if let Some((epoch, state)) = local {
            self.learn(k, self.me, epoch, state);
            return;
        }
        match &self.catch_up {
            Some(c) if c.slot == k => {
                let chosen = c.replies.iter().enumerate().find_map(|(e, replies)| {
                    majority_decision(layout, replies).map(|d| (e as u32, d))
                });
                if let Some((epoch, (holders, state))) = chosen {
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
                    self.learn(k, from, epoch, state);
                } else if (0..self.config.replicas)
                    .all(|a| c.answered(a) || self.omega.suspects(a, self.now))
                {
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

    pub(super) fn learn(
        &mut self,
        slot: u64,
        acceptor: u16,
        epoch: u32,
        state: crate::word::AcceptorState,
    ) {
        let proposer = ProposerId::from_value_tag(state.accepted_value).expect("accepted");
        self.reads.push_back(ValueRead {
            purpose: Purpose::Learn,
            slot,
            acceptor,
            proposer,
            epoch,
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
            replies: vec![vec![None; n]; self.config.epochs as usize],
            asked: vec![false; n],
        };
        for (e, words) in self.words.iter().enumerate() {
            c.replies[e][usize::from(self.me)] = words.get(&k).copied();
        }
        let peers: Vec<u16> = (0..self.config.replicas)
            .filter(|&a| a != self.me && !self.omega.suspects(a, self.now))
            .collect();
        for a in peers {
            c.asked[usize::from(a)] = true;
            for e in 0..self.config.epochs {
                let get = Op::Get {
                    local: self.scratch.catch_up(a, e),
                    remote: self.shape.epoch_word(a, k as u32, e),
                    work_id: ids::catch_up(a),
                };
                self.op(get, Then::Ignore);
            }
        }
        self.catch_up = Some(c);
    }
}
