//! Value-buffer reads: the end stamp, then the content, then the begin stamp (see
//! [`crate::log::value`]), in one of two scratch banks; a read stuck on a suspected
//! acceptor is given up.

use super::state::Poisoned;
use super::{Purpose, Replica, Role, Stage, Then, ValueRead};
use crate::log::config::ids;
use crate::log::leader::Value;
use crate::log::value::{CONFIG_FLAG, RESTAMP_FLAG, consistent, from_words, key, unstamp};
use velos_rdma::{Op, Reply};

impl Replica {
    pub(super) fn read_tested(&mut self, reply: Reply) {
        let words = self.config.value_words();
        let read = self.learn.reads.front_mut().expect("a value read");
        let (a, p, s) = (read.acceptor, read.proposer, self.ring.position(read.slot));
        match reply {
            Reply::Value(1) if read.stage == Stage::End => {
                read.stage = Stage::Content;
                let bank = read.bank;
                for i in 0..words {
                    let get = Op::Get {
                        local: self.scratch.value(bank, i + 1),
                        remote: self.shape.value_word(a, p, s, i),
                        work_id: ids::read_content(bank),
                    };
                    self.op_first(get, Then::Ignore);
                }
            }
            Reply::Value(1) if read.stage == Stage::Content => {
                read.stage = Stage::Begin;
                let get = Op::Get {
                    local: self.scratch.value(read.bank, 0),
                    remote: self.shape.value_stamp(a, p, s),
                    work_id: ids::read_stamp(read.bank),
                };
                self.op_first(get, Then::Ignore);
            }
            Reply::Value(1) => {
                read.stage = Stage::Loading;
                read.words = vec![None; words as usize + 2];
                let bank = read.bank;
                for i in 0..words + 2 {
                    let loc = self.scratch.value(bank, i);
                    self.op_first(Op::Load { loc }, Then::ReadWord(i));
                }
            }
            Reply::Failed(_) => {
                let read = self.learn.reads.pop_front().expect("a value read");
                self.read_finished(read, None);
            }
            _ => {}
        }
    }

    /// Every word of a read is loaded: the value, if both stamps agree (a consistent read)
    /// and their key is at least the one read for (a newer write of the same proposer
    /// carries a value that is as good: see [`crate::slot::SlotProposer::on_value_read`]).
    pub(super) fn read_done(&mut self) {
        let read = self.learn.reads.pop_front().expect("a value read");
        let words: Vec<u64> = read.words.iter().map(|w| w.expect("loaded")).collect();
        // Rule (overtaken buffer): a learner's buffer stamped for a later lap was reused by
        // its proposer, who opens a position's next instance only once the previous one is
        // retired (lemma (overtaken)): a majority's snapshots hold the slot, so copy one.
        // Learning it again from the same words would read the same buffer for ever: my
        // acceptor's word can still show the slot decided while the later lap's CAS missed
        // it (seed 8199).
        if read.purpose == Purpose::Learn && self.overtaken(read.slot, &words) {
            self.snap.behind = true;
        }
        let value = self.buffer_value(read.slot, (read.epoch, read.proposal), &words);
        self.read_finished(read, value);
    }

    /// Whether a buffer image of `slot` (begin stamp, content, end stamp) carries a stamp
    /// of a later lap: its proposer reused it, so the slot is retired (rule (overtaken
    /// buffer)).
    pub(super) fn overtaken(&self, slot: u64, words: &[u64]) -> bool {
        let later = |w: u64| self.ring.later_tag(slot, unstamp(w).0);
        later(words[0]) || later(words[words.len() - 1])
    }

    /// What a buffer image of `slot` read for (`epoch`, `proposal`) — begin stamp,
    /// content, end stamp, read in the order end, content, begin — holds: the value and
    /// its stamps' key, if both stamps agree, are of the slot's lap, their key is at least
    /// (`epoch`, `proposal`) and the length fits; else nothing. (A learner also checks
    /// rule (overtaken buffer) on it.)
    pub(super) fn buffer_value(
        &self,
        slot: u64,
        (epoch, proposal): (u32, u64),
        words: &[u64],
    ) -> Option<(Value, u64)> {
        let (begin, end) = (words[0], words[words.len() - 1]);
        let (tag, k, field) = unstamp(end);
        let (len, config) = (
            field & !(CONFIG_FLAG | RESTAMP_FLAG),
            field & CONFIG_FLAG != 0,
        );
        let fits = len <= self.config.max_value_bytes as usize;
        let consistent = consistent(begin, end);
        // A stamp of another lap is another instance's value (lemma (consistent read)).
        let lap = tag == self.ring.tag(slot);
        let ok = consistent && lap && k >= key(epoch, proposal) && fits;
        ok.then(|| {
            let origin = words[1];
            let bytes = from_words(&words[2..words.len() - 1], len);
            (
                Value {
                    bytes,
                    config,
                    origin,
                },
                k,
            )
        })
    }

    /// A read ended with the value and its stamps' key, or failed (`None`).
    pub(super) fn read_finished(&mut self, read: ValueRead, value: Option<(Value, u64)>) {
        self.moved = true;
        match read.purpose {
            Purpose::Adopt { term } => {
                // Rule (decide-under-lease): an adoption accepts; without the lease the
                // attempt aborts instead (and is prepared again once the lease holds).
                let leased = self.leasing.lease.may_decide(self.now) || self.learn.repair.is_some();
                let value = value.filter(|_| leased);
                // A read of my own buffer: its key may name a write of my value.
                let own = read.proposer.0 == self.me;
                let own_key = value.as_ref().and_then(|&(_, k)| own.then_some(k));
                let value = value.map(|(v, _)| v);
                let mut cmds = std::mem::take(&mut self.bufs.cmd_buf);
                let config = &self.config;
                if let Some(l) =
                    super::leading::proposer_in(&mut self.role, &mut self.learn.repair, term)
                {
                    l.on_value_read(config, read.slot, value, own_key, &mut cmds);
                }
                self.issue(term, &mut cmds);
                self.bufs.cmd_buf = cmds;
            }
            Purpose::Learn => {
                if let (Role::Follower, Some((v, _))) = (&self.role, value)
                    && read.slot == self.next_apply
                {
                    self.apply(read.slot, v);
                    // Rule (learn a run): a follower more than a window behind the log's
                    // reach that learned a slot from its own words and buffer goes on with
                    // the next slot in the same turn, as a plan would (`follow`): the next
                    // slot its words of this turn prove, and past those a catch-up from a
                    // majority's words, whose gets run while the turn goes on. One slot a
                    // turn was too slow at pipeline 8: with a replica down the other
                    // follower is in every majority, and a lag a slow link left grew until
                    // the ring's room (a majority's snapshot points) closed and the leader
                    // stalled (`tests/follower_keeps_up.rs`). Only when behind: near the
                    // head the turn stays short, so the leader's counter is sampled as
                    // often as before (rule (watch the leader)).
                    let window = u64::from(self.config.pipeline);
                    if read.acceptor == self.me && self.reached_past(self.next_apply + window) {
                        self.follow();
                        self.start_read();
                    }
                }
            }
        }
    }

    /// A read stuck on an acceptor now suspected is given up (it would block every read
    /// behind it); its bank stays out of use until its gets complete.
    /// Also a read whose acceptor was replaced meanwhile ([`Replica::peer_replaced`]).
    pub(super) fn abandon_stuck_read(&mut self) {
        let under_way = self.learn.reads.front().filter(|r| r.stage.at_acceptor());
        let stuck = under_way.is_some_and(|r| {
            self.omega.suspects(r.acceptor) && self.now - r.started > self.config.failure_timeout_ns
        });
        let replaced = std::mem::take(&mut self.learn.read_replaced) && under_way.is_some();
        if stuck || replaced {
            let read = self.learn.reads.pop_front().expect("a read");
            self.learn.poisoned[read.bank as usize] = Poisoned {
                gets: 3,
                acceptor: read.acceptor,
            };
            self.read_finished(read, None);
        }
    }

    pub(super) fn start_read(&mut self) {
        if self
            .learn
            .reads
            .front()
            .is_some_and(|r| r.stage == Stage::Queued && r.acceptor == self.me)
        {
            self.read_locally();
            return;
        }
        let Some(bank) =
            (0..self.config.read_banks()).find(|&b| self.learn.poisoned[b as usize].gets == 0)
        else {
            return;
        };
        let now = self.now;
        let Some(read) = self.learn.reads.front_mut() else {
            return;
        };
        if read.stage != Stage::Queued {
            return;
        }
        let silent = |p: &Poisoned| p.gets != 0 && p.acceptor == read.acceptor;
        if self.omega.suspects(read.acceptor) || self.learn.poisoned.iter().any(silent) {
            // It may never answer and would hold a bank for good: the reader finds the
            // value elsewhere (another majority, another holder). Rule (one read bank per
            // silent acceptor): an acceptor whose abandoned read's gets are still pending
            // counts as silent even when Ω trusts it again (a late heartbeat of a crashed
            // acceptor made Ω trust it for a moment, and a second read towards it
            // poisoned the last bank: no value read ever started again, seed 54743).
            let read = self.learn.reads.pop_front().expect("a value read");
            self.read_finished(read, None);
            return;
        }
        let read = self.learn.reads.front_mut().expect("a value read");
        read.stage = Stage::End;
        read.bank = bank;
        read.started = now;
        let get = Op::Get {
            local: self.scratch.value(bank, self.config.value_words() + 1),
            remote: self.shape.value_end_stamp(
                read.acceptor,
                read.proposer,
                self.ring.position(read.slot),
            ),
            work_id: ids::read_stamp(bank),
        };
        self.op(get, Then::Ignore);
    }

    /// A read of my own acceptor's buffer: CPU loads in the same order as the gets (end
    /// stamp, content, begin stamp); the lemma of [`crate::log::value`] holds for them as
    /// the puts land in order and the loads execute in program order.
    fn read_locally(&mut self) {
        let words = self.config.value_words();
        let read = self.learn.reads.front_mut().expect("a value read");
        let (a, p, s) = (read.acceptor, read.proposer, self.ring.position(read.slot));
        read.stage = Stage::Loading;
        read.words = vec![None; words as usize + 2];
        let end = self.shape.value_end_stamp(a, p, s);
        self.op(Op::Load { loc: end }, Then::ReadWord(words + 1));
        for i in 0..words {
            let loc = self.shape.value_word(a, p, s, i);
            self.op(Op::Load { loc }, Then::ReadWord(i + 1));
        }
        let begin = self.shape.value_stamp(a, p, s);
        self.op(Op::Load { loc: begin }, Then::ReadWord(0));
    }
}
