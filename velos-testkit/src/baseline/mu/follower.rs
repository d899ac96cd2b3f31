//! A follower: it switches write permission to the leader it trusts when that leader asks,
//! polls its own log with CPU loads and applies what the leader's headers say is decided.

use super::node::{MuNode, Then};
use super::{Header, Word};
use velos_rdma::{Op, Reply};

impl MuNode {
    /// Gives `peer`, which asks to lead under `proposal`, write permission on this node's
    /// memory (revoking everyone else's), then publishes the grant.
    pub(super) fn grant(&mut self, peer: u16, proposal: u64) {
        assert_ne!(peer, self.me, "grant: to another node");
        let writers = 1u64 << peer;
        if self.writers != writers {
            self.op(Op::SetWriteAccess { writers });
        }
        let loc = self.cfg.word(self.me, Word::Grant);
        self.op(Op::Store {
            loc,
            value: proposal,
        });
        self.then = Then::Granted(peer, proposal);
    }

    /// The permission switch is in effect and the grant published: from now on only
    /// headers of `proposal` count, from the first slot not applied.
    pub(super) fn granted(&mut self, peer: u16, proposal: u64) {
        self.writers = 1u64 << peer;
        self.granted = proposal;
        self.max_seen = self.max_seen.max(proposal);
        self.scan = self.applied.len() as u64;
        self.commit_known = self.scan;
        self.then = Then::Tick;
        assert!(self.granted != 0, "granted: a leader's proposal number");
    }

    /// Applies the next decided slot, else reads the next header, else idles.
    pub(super) fn follow(&mut self) {
        let next = self.applied.len() as u64;
        if next < self.commit_known.min(self.scan) {
            let ops: Vec<Op> = (0..=self.cfg.value_words)
                .map(|k| Op::Load {
                    loc: self.cfg.slot(self.me, next, k),
                })
                .collect();
            self.batch(ops, Then::Apply(next));
        } else if self.granted != 0 && self.scan < u64::from(self.cfg.slots) {
            let loc = self.cfg.slot(self.me, self.scan, 0);
            self.batch([Op::Load { loc }], Then::Scan);
        } else {
            self.idle();
        }
    }

    /// The header of the scanned slot: written by the granted leader, it moves the scan on
    /// and may carry a later commit point.
    pub(super) fn scanned(&mut self, replies: &[Reply]) {
        let Some(&Reply::Value(word)) = replies.first() else {
            return self.idle();
        };
        let header = Header::decode(word);
        if header.proposal != 0 && header.proposal == self.granted {
            self.commit_known = self.commit_known.max(header.commit);
            self.scan += 1;
            self.then = Then::Tick;
        } else {
            self.idle();
        }
    }

    /// Applies `slot` from its loaded header and value, and publishes the new FUO.
    pub(super) fn apply(&mut self, slot: u64, replies: &[Reply]) {
        let words: Vec<u64> = replies
            .iter()
            .map(|r| match r {
                Reply::Value(v) => *v,
                _ => 0,
            })
            .collect();
        assert_eq!(slot, self.applied.len() as u64, "apply: in order, no holes");
        // The slot was scanned with this leader's header; it cannot have changed since.
        if Header::decode(words[0]).proposal != self.granted {
            self.scan = slot;
            return self.idle();
        }
        self.applied.push((slot, words[1..].to_vec()));
        self.applied_at.push(self.now);
        let loc = self.cfg.word(self.me, Word::Fuo);
        self.batch(
            [Op::Store {
                loc,
                value: slot + 1,
            }],
            Then::Tick,
        );
    }
}
