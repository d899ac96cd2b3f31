//! A leader's reads ahead (rule (term predictions), `leader/ahead.rs`) as operations: one
//! multi-word read of an acceptor's words of a range of ring positions into that
//! acceptor's bulk catch-up region (a leader runs no bulk catch-up), tested at each turn,
//! then loaded and handed to the leader. A read towards an acceptor Ω suspects is given
//! up, and a read still out when the term ends is handed to the bulk catch-up's
//! bookkeeping of abandoned reads: its gets may land later, and the region waits for them
//! (`replica/bulk.rs`), as no read ahead starts towards an acceptor whose region waits.

use super::{Replica, Role, Then};
use crate::log::config::ids;
use crate::log::leader::{Leader, Read};
use velos_rdma::{Op, Reply};

impl Replica {
    /// The turn's part, a leader's: tests the reads ahead that are out; gives up those
    /// towards a suspected acceptor.
    pub(super) fn test_ahead(&mut self) {
        let Role::Leader(l) = &mut self.role else {
            return;
        };
        let out = l.reads_ahead_out();
        if out == 0 {
            return; // a leader whose seeds are right
        }
        for a in (0..self.config.replicas).filter(|&a| out & (1 << a) != 0) {
            if self.omega.suspects(a) {
                if let Role::Leader(l) = &mut self.role {
                    l.read_ahead_done(a, None);
                }
                self.learn.bulk.landing(1 << a);
                self.moved = true;
            } else {
                let work_id = ids::bulk_words(a);
                self.op(Op::Test { work_id }, Then::AheadTest(a));
            }
        }
    }

    /// A test of the read ahead towards `a` replied.
    pub(super) fn ahead_tested(&mut self, a: u16, reply: Reply) {
        let Role::Leader(l) = &mut self.role else {
            return; // the term ended: the read was handed over (`Replica::end_reads_ahead`)
        };
        let Some(read) = l.read_ahead_out(a) else {
            return;
        };
        match reply {
            Reply::Value(1) => {
                let loads = Op::LoadWords {
                    loc: self.scratch.bulk_words(a, 0),
                    count: read.count,
                };
                self.op_first(loads, Then::AheadWords(a));
            }
            Reply::Failed(_) => {
                l.read_ahead_done(a, None); // complete, if failed: nothing lands
                self.moved = true;
            }
            _ => {}
        }
    }

    /// The words read ahead towards `a` were loaded.
    pub(super) fn ahead_words(&mut self, a: u16, reply: Reply) {
        let Reply::Words(words) = reply else {
            panic!("a load of words replies words: {reply:?}");
        };
        if let Role::Leader(l) = &mut self.role
            && l.read_ahead_out(a).is_some()
        {
            l.read_ahead_done(a, Some(words.as_slice()));
            self.moved = true;
        }
    }

    /// Posts the reads ahead `leader` wants now: towards acceptors not suspected whose
    /// region is free.
    pub(super) fn post_ahead(&mut self, leader: &mut Leader) {
        if leader.reads_ahead_idle() {
            return; // a leader whose seeds are right
        }
        let bulk = &self.learn.bulk;
        let omega = &self.omega;
        let may_read = |a: u16| !omega.suspects(a) && bulk.region_free(a);
        let mut reads: Vec<Read> = Vec::new(); // allocates only when a read is wanted
        leader.reads_ahead(self.ring, may_read, &mut reads);
        for read in reads {
            let a = read.acceptor;
            assert!(
                self.learn.bulk.region_free(a),
                "rule (term predictions): a read ahead lands where nothing else may"
            );
            let gets = Op::GetWords {
                local: self.scratch.bulk_words(a, 0),
                remote: self.shape.epoch_word(a, self.ring.position(read.from), 0),
                count: read.count,
                work_id: ids::bulk_words(a),
            };
            self.op(gets, Then::Ignore);
            self.moved = true;
        }
    }

    /// The term of `leader` ends: its reads ahead still out may land later, so their
    /// regions wait for them.
    pub(super) fn end_reads_ahead(&mut self, leader: &Leader) {
        self.learn.bulk.landing(leader.reads_ahead_out());
    }
}
