//! A stable leader's recorded inputs, and their replay: how
//! `cargo bench -p velos-bench --bench engine` and `velos bench embed` time the engine
//! alone (its inputs replayed into a copy of its replica, without a backend).

use anyhow::ensure;
use std::collections::VecDeque;
use velos_core::log::{Replica, Submitted};
use velos_rdma::{Batch, Op, Process, Reply};

/// A submitting client's entries ([`Replica::submit`]): the commands of each proposal
/// not committed yet, oldest first, so that a result counts the commands it commits.
#[derive(Clone, Debug, Default)]
pub(crate) struct Entries {
    open: VecDeque<(u64, u64)>,
}

impl Entries {
    /// A command went into proposal `at.proposal`.
    pub(crate) fn submitted(&mut self, at: Submitted) {
        match self.open.back_mut() {
            Some((p, n)) if *p == at.proposal => *n += 1,
            _ => self.open.push_back((at.proposal, 1)),
        }
    }

    /// The commands proposal `id`'s result commits: as many as were submitted into it,
    /// or 1 for a proposal of one command ([`Replica::propose`]).
    pub(crate) fn committed(&mut self, id: u64) -> u64 {
        match self.open.iter().position(|&(p, _)| p == id) {
            Some(i) => self.open.remove(i).expect("found").1,
            None => 1,
        }
    }
}

/// The leader replica's inputs, in order, packed so that recording them costs the leader
/// little: one byte per input, plus the word of each `Value` reply and any other reply
/// kept whole. The client's commands are not kept: the replay makes command n again.
#[derive(Clone, Debug, Default)]
pub(crate) struct Trace {
    kinds: Vec<u8>,
    values: Vec<u64>,
    others: Vec<Reply>,
}

impl Trace {
    const REFUSED: u8 = 0;
    const PROPOSED: u8 = 1;
    const DONE: u8 = 2;
    const VALUE: u8 = 3;
    const OTHER: u8 = 4;
    const SUBMIT_REFUSED: u8 = 5;
    const SUBMITTED: u8 = 6;

    /// Room for `decisions` decisions (about 55 inputs and 40 words each, measured).
    pub(crate) fn with_capacity(decisions: usize) -> Trace {
        Trace {
            kinds: Vec::with_capacity(decisions * 64),
            values: Vec::with_capacity(decisions * 48),
            others: Vec::new(),
        }
    }

    /// Forgets every input (a window starts), keeping the room.
    pub(crate) fn clear(&mut self) {
        self.kinds.clear();
        self.values.clear();
        self.others.clear();
    }

    /// The client proposed its next command: taken or refused.
    pub(crate) fn propose(&mut self, taken: bool) {
        self.kinds.push(if taken {
            Trace::PROPOSED
        } else {
            Trace::REFUSED
        });
    }

    /// The client submitted its next command ([`Replica::submit`]): taken or refused.
    pub(crate) fn submit(&mut self, taken: bool) {
        self.kinds.push(if taken {
            Trace::SUBMITTED
        } else {
            Trace::SUBMIT_REFUSED
        });
    }

    /// The reply the leader was resumed with (the last of its batch's, see
    /// [`Process::resume_batch`]).
    pub(crate) fn resume(&mut self, reply: &Reply) {
        match reply {
            Reply::Done => self.kinds.push(Trace::DONE),
            Reply::Value(v) => {
                self.kinds.push(Trace::VALUE);
                self.values.push(*v);
            }
            other => {
                self.kinds.push(Trace::OTHER);
                self.others.push(other.clone());
            }
        }
    }

    /// Replays the inputs into `replica` (a copy of the leader's as the trace started,
    /// with its client's `entries` then), proposing or submitting `command(n)` for n from
    /// `first_command` on, as the run did: the commands it committed. Fails if the replay
    /// does not retrace the run (a command taken or refused otherwise, the replica
    /// stopping).
    pub(crate) fn replay(
        &self,
        (replica, entries): (&mut Replica, Entries),
        first_command: u64,
        command: impl Fn(u64) -> [u8; 8],
    ) -> anyhow::Result<u64> {
        self.replay_into((replica, entries), first_command, command, |_| {})
    }

    /// [`Trace::replay`], handing every batch of operations the replica returns to `ops`.
    pub(crate) fn replay_into(
        &self,
        (replica, mut entries): (&mut Replica, Entries),
        first_command: u64,
        command: impl Fn(u64) -> [u8; 8],
        mut ops: impl FnMut(&[Op]),
    ) -> anyhow::Result<u64> {
        let (mut values, mut others) = (self.values.iter(), self.others.iter());
        let mut proposed = first_command;
        let mut committed = 0u64;
        let mut batch = Vec::with_capacity(64);
        for (i, &kind) in self.kinds.iter().enumerate() {
            let reply = match kind {
                Trace::REFUSED | Trace::PROPOSED => {
                    let taken = replica.propose(command(proposed).to_vec()).is_ok();
                    ensure!(
                        taken == (kind == Trace::PROPOSED),
                        "the replay diverged at proposal {proposed}"
                    );
                    proposed += u64::from(taken);
                    continue;
                }
                Trace::SUBMIT_REFUSED | Trace::SUBMITTED => {
                    let taken = replica.submit(&command(proposed));
                    ensure!(
                        taken.is_ok() == (kind == Trace::SUBMITTED),
                        "the replay diverged at command {proposed}"
                    );
                    if let Ok(at) = taken {
                        entries.submitted(at);
                        proposed += 1;
                    }
                    continue;
                }
                Trace::DONE => Reply::Done,
                Trace::VALUE => Reply::Value(*values.next().expect("recorded")),
                _ => others.next().expect("recorded").clone(),
            };
            batch.clear();
            ensure!(
                replica.resume_batch(reply, &mut batch) == Batch::Resume,
                "the replay stopped at input {i}"
            );
            ops(&batch);
            for (id, _) in replica.drain_results() {
                committed += entries.committed(id);
            }
            replica.drain_committed().for_each(drop);
        }
        Ok(committed)
    }
}
