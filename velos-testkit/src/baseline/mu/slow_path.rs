//! The end of Mu's slow path: from the followers' FUOs and minimum proposals to the
//! re-proposal of the first undecided slot.

use super::lead::{Phase, bits};
use super::node::{CTRL, MuNode, Then as NodeThen};
use super::{Header, Word};
use velos_rdma::{Op, Reply, WorkId};

fn value(reply: &Reply) -> u64 {
    match reply {
        Reply::Value(v) => *v,
        _ => 0,
    }
}

impl MuNode {
    /// The FUOs and minimum proposals of a majority: start over above a higher minimum
    /// proposal, else copy in the decided entries this node lacks.
    pub(super) fn state_read(&mut self, peers: &[u16], replies: &[Reply]) {
        assert_eq!(
            replies.len(),
            1 + 2 * peers.len(),
            "state: own word, two each"
        );
        let own = self.applied.len() as u64;
        let mut max_min = value(&replies[0]);
        let mut fuo_max = (own, self.me);
        for (&p, r) in peers.iter().zip(replies[1..].chunks(2)) {
            let fuo = value(&r[0]);
            max_min = max_min.max(value(&r[1]));
            self.lead_mut().fuos[usize::from(p)] = fuo;
            fuo_max = fuo_max.max((fuo, p));
        }
        if max_min >= self.lead().proposal {
            self.max_seen = self.max_seen.max(max_min);
            return self.take_over();
        }
        let (fuo_max, from) = fuo_max;
        self.lead_mut().fuo_max = fuo_max;
        if own < fuo_max {
            let cfg = self.cfg.clone();
            for slot in own..fuo_max {
                for k in 0..=cfg.value_words {
                    self.op(Op::Get {
                        local: cfg.slot(self.me, slot, k),
                        remote: cfg.slot(from, slot, k),
                        work_id: WorkId(CTRL + u32::from(from)),
                    });
                }
            }
            self.wait_for(Phase::CopyIn { from }, 1 << from, 1);
            self.then = NodeThen::Tick;
        } else {
            self.prepare();
        }
    }

    /// The decided entries copied in: apply them, then go on.
    pub(super) fn copied(&mut self, from: u64, to: u64, replies: &[Reply]) {
        let width = self.cfg.entry_words() as usize;
        assert_eq!(
            replies.len() as u64,
            (to - from) * width as u64,
            "copied slots"
        );
        for (slot, words) in (from..to).zip(replies.chunks(width)) {
            let words: Vec<u64> = words.iter().map(value).collect();
            assert_eq!(slot, self.applied.len() as u64, "copied in order");
            self.applied.push((slot, words[1..].to_vec()));
            self.applied_at.push(self.now);
        }
        self.prepare();
    }

    /// Brings the laggards up to the highest FUO, then writes the proposal number into the
    /// confirmed followers' `min_proposal` (and its own).
    fn prepare(&mut self) {
        let cfg = self.cfg.clone();
        let (confirmed, fuo_max, number) = {
            let lead = self.lead();
            (lead.confirmed, lead.fuo_max, lead.proposal)
        };
        for p in bits(confirmed) {
            let fuo = self.lead().fuos[usize::from(p)];
            if fuo < fuo_max {
                self.catch_up(p, fuo, fuo_max);
            }
            self.op(Op::PutInline {
                remote: cfg.word(p, Word::MinProposal),
                value: number,
                work_id: WorkId(CTRL + u32::from(p)),
            });
        }
        self.op(Op::Store {
            loc: cfg.word(self.me, Word::MinProposal),
            value: number,
        });
        self.op(Op::Store {
            loc: cfg.word(self.me, Word::Fuo),
            value: self.applied.len() as u64,
        });
        self.wait_for(Phase::Prepare, confirmed, cfg.majority() - 1);
        self.then = NodeThen::Tick;
    }

    /// The first undecided slot at a majority: re-propose the highest-numbered value
    /// accepted there, if any; then the fast path.
    pub(super) fn slot_read(&mut self, peers: &[u16], replies: &[Reply]) {
        let width = self.cfg.entry_words() as usize;
        assert_eq!(
            replies.len(),
            width * (1 + peers.len()),
            "slot: own, then each"
        );
        let best = replies
            .chunks(width)
            .map(|words| words.iter().map(value).collect::<Vec<u64>>())
            .filter(|words| Header::decode(words[0]).proposal != 0)
            .max_by_key(|words| Header::decode(words[0]).proposal);
        let now = self.now;
        let lead = self.lead_mut();
        let slot = lead.fuo_max;
        lead.phase = Phase::Fast;
        lead.since = now;
        lead.next = slot;
        lead.commit = slot;
        self.terms_started.push(now);
        match best {
            Some(words) => self.write_entry(slot, words[1..].to_vec(), true),
            None => self.then = NodeThen::Tick,
        }
        assert!(self.lead().fast(), "slow path: ends in the fast path");
    }
}
