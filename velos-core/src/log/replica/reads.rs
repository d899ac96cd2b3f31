//! Value-buffer reads: content first, then the stamp (see [`crate::log::value`]), in one of
//! two scratch banks; a read stuck on a suspected acceptor is given up.

use super::{Purpose, Replica, Role, Stage, Then, ValueRead};
use crate::log::config::{READ_BANKS, ids};
use crate::log::value::{from_words, unstamp};
use velos_rdma::{Op, Reply};

impl Replica {
    pub(super) fn read_tested(&mut self, reply: Reply) {
        let words = self.config.value_words();
        let read = self.reads.front_mut().expect("a value read");
        match reply {
            Reply::Value(1) if read.stage == Stage::Content => {
                read.stage = Stage::Stamp;
                let get = Op::Get {
                    local: self.scratch.value(read.bank, 0),
                    remote: self
                        .shape
                        .value_stamp(read.acceptor, read.proposer, read.slot as u32),
                    work_id: ids::read_stamp(read.bank),
                };
                self.op_first(get, Then::Ignore);
            }
            Reply::Value(1) => {
                read.stage = Stage::Loading;
                read.words = vec![None; words as usize + 1];
                let bank = read.bank;
                for i in 0..=words {
                    let loc = self.scratch.value(bank, i);
                    self.op_first(Op::Load { loc }, Then::ReadWord(i));
                }
            }
            Reply::Failed(_) => {
                let read = self.reads.pop_front().expect("a value read");
                self.read_finished(read, None);
            }
            _ => {}
        }
    }

    pub(super) fn read_done(&mut self) {
        let read = self.reads.pop_front().expect("a value read");
        let words: Vec<u64> = read.words.iter().map(|w| w.expect("loaded")).collect();
        let (proposal, len) = unstamp(words[0]);
        let fits = len <= self.config.max_value_bytes as usize;
        let ok = match read.purpose {
            Purpose::Adopt { .. } => proposal == read.proposal,
            Purpose::Learn => proposal >= read.proposal,
        };
        let value = (ok && fits).then(|| from_words(&words[1..], len));
        self.read_finished(read, value);
    }

    pub(super) fn read_finished(&mut self, read: ValueRead, value: Option<Vec<u8>>) {
        self.moved = true;
        match read.purpose {
            Purpose::Adopt { term } => {
                let mut cmds = Vec::new();
                if let Role::Leader(l) = &mut self.role
                    && l.term == term
                {
                    l.on_value_read(&self.config, read.slot, value, &mut cmds);
                }
                self.issue(cmds);
            }
            Purpose::Learn => {
                if let (Role::Follower, Some(v)) = (&self.role, value)
                    && read.slot == self.next_apply
                {
                    self.apply(read.slot, v);
                }
            }
        }
    }

    /// A read stuck on an acceptor now suspected is given up (it would block every read
    /// behind it); its bank stays out of use until its gets complete.
    pub(super) fn abandon_stuck_read(&mut self) {
        let stuck = self.reads.front().is_some_and(|r| {
            matches!(r.stage, Stage::Content | Stage::Stamp)
                && self.omega.suspects(r.acceptor, self.now)
                && self.now - r.started > self.config.failure_timeout_ns
        });
        if stuck {
            let read = self.reads.pop_front().expect("a read");
            self.poisoned[read.bank as usize] = if read.stage == Stage::Stamp { 3 } else { 1 };
            self.read_finished(read, None);
        }
    }

    pub(super) fn start_read(&mut self) {
        let words = self.config.value_words();
        let Some(bank) = (0..READ_BANKS).find(|&b| self.poisoned[b as usize] == 0) else {
            return;
        };
        let now = self.now;
        let Some(read) = self.reads.front_mut() else {
            return;
        };
        if read.stage != Stage::Queued {
            return;
        }
        read.stage = Stage::Content;
        read.bank = bank;
        read.started = now;
        let (a, p, s) = (read.acceptor, read.proposer, read.slot as u32);
        for i in 0..words {
            let get = Op::Get {
                local: self.scratch.value(bank, i + 1),
                remote: self.shape.value_word(a, p, s, i),
                work_id: ids::read_content(bank),
            };
            self.op(get, Then::Ignore);
        }
    }
}
