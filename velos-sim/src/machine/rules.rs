//! The effects of the steps: one function per rule of rdma-semantics.md (rules 1–13), plus
//! the CPU (TSO) rules. Premises are checked in `transition.rs`; each function asserts the
//! part of its premise it relies on.

use super::delay::{Clock, Delay};
use super::items::{LocalWriteEntry, PipeItem, RemoteWrite, SbEntry, Timed};
use super::mutation::Mutation;
use super::state::{CrashMode, Machine, NodeStatus, QpStatus};
use super::transition::Transition;
use velos_rdma::{Loc, NodeId, Process, RdmaError, Rmw, WorkId};

impl<P: Process> Machine<P> {
    /// Fires `transition` at virtual time `now`. The transition must be enabled.
    pub fn fire(&mut self, transition: Transition, now: u64, clock: &mut dyn Clock) {
        // The queue pair the step may empty (store-buffer heads mark theirs in use).
        let touched = match transition {
            Transition::Pipe(q, _)
            | Transition::RemoteCommit(q, _)
            | Transition::LocalCommit(q, _) => Some(q),
            Transition::Cpu(_)
            | Transition::StoreBufferHead(_)
            | Transition::StoreBufferPost(_) => None,
        };
        match transition {
            Transition::Cpu(t) => self.cpu_step(t, now, clock),
            Transition::StoreBufferHead(t) => self.store_buffer_head(t, now, clock),
            Transition::StoreBufferPost(t) => {
                let i = self.post_behind_stores(t).expect("enabled");
                let entry = self.threads[t].sb.remove(i).expect("in the buffer");
                self.leave_store_buffer(t, entry.item, now, clock);
            }
            Transition::Pipe(q, i) => {
                let (_, target) = self.qp_ends(q);
                match self.qps[q].pipe[i].item {
                    PipeItem::Fence => self.rule1_rfence(q, i),
                    PipeItem::PutRead { .. } => self.rule2_put_local_read(q, i, now, clock),
                    PipeItem::PutWrite { .. } | PipeItem::PutWords { .. } => {
                        self.rule3_put_remote_write(q, i, now, clock, target)
                    }
                    PipeItem::Ack { .. } => self.rule5_put_completion(q, i, now),
                    PipeItem::GetRead { .. } => self.rule6_get_remote_read(q, i, now, clock),
                    PipeItem::LocalWrite { .. } => self.rule7_local_write_issued(q, i, now, clock),
                    PipeItem::AtomicRead { .. } => {
                        self.rule9_10_11_atomic_read(q, i, now, clock, target)
                    }
                    PipeItem::AtomicWrite { .. } => {
                        self.rule12_atomic_write_issued(q, i, now, clock, target)
                    }
                }
            }
            Transition::RemoteCommit(q, i) => self.rule4_13_remote_commit(q, i),
            Transition::LocalCommit(q, i) => self.rule8_local_write_commits(q, i),
        }
        if let Some(q) = touched {
            self.refresh_active(q);
        }
        if self.mutated(Mutation::Rule13StrongerLock) {
            self.release_held_atomic_locks();
        }
    }

    /// Under [`Mutation::Rule13StrongerLock`]: frees each `L[n]` whose atomic write has
    /// committed once no NIC local write towards n is pending any more.
    fn release_held_atomic_locks(&mut self) {
        for n in 0..self.node_count() {
            if !self.atomic_busy[n] {
                continue;
            }
            let pending = (0..self.threads.len()).any(|t| {
                let qp = &self.qps[self.qp_index(t, NodeId(n as u16))];
                let held = |item: &PipeItem| {
                    matches!(
                        item,
                        PipeItem::AtomicWrite { .. } | PipeItem::LocalWrite { .. }
                    )
                };
                qp.pipe.iter().any(|e| held(&e.item))
                    || qp
                        .rw
                        .iter()
                        .any(|e| matches!(e.item, RemoteWrite::Atomic { .. }))
                    || !qp.lw_only_completions()
            });
            if !pending {
                self.atomic_busy[n] = false;
            }
        }
    }

    /// The trip between the NICs of queue pair q: the wire, or a loopback inside one NIC.
    fn wire(&self, q: usize) -> Delay {
        let (t, target) = self.qp_ends(q);
        if self.threads[t].node == target {
            Delay::LoopbackWire
        } else {
            Delay::Wire
        }
    }

    /// Rule 1: an F at the head of the pipe is removed.
    fn rule1_rfence(&mut self, q: usize, i: usize) {
        assert!(
            i == 0 || self.mutation.is_some(),
            "rule 1: only the head F acts"
        );
        let item = self.qps[q].pipe.remove(i).expect("rule 1: pipe non-empty");
        assert!(matches!(item.item, PipeItem::Fence), "rule 1: head is an F");
    }

    /// Rule 2: a put's NIC local read: `P0(y,x)` becomes `P1(y, M[x])`.
    fn rule2_put_local_read(&mut self, q: usize, i: usize, now: u64, clock: &mut dyn Clock) {
        assert!(
            self.qps[q].lw_only_completions() || self.mutation.is_some(),
            "rule 2: lW holds only cn"
        );
        let PipeItem::PutRead {
            remote,
            local,
            work_id,
        } = self.qps[q].pipe[i].item
        else {
            unreachable!("rule 2 fires on P0")
        };
        let value = self.read(local).expect("rule 2: local checked at post");
        self.qps[q].pipe[i] = Timed {
            item: PipeItem::PutWrite {
                remote,
                value,
                work_id,
            },
            ready: now + clock.delay(self.wire(q), Some(self.link(q))),
        };
    }

    /// Rule 3: a put's remote write is issued: `P1(y,v)` becomes `ACK`, `nrw(y,v)` joins `rW`
    /// (for a multi-word put, one `nrw` per word, in address order).
    fn rule3_put_remote_write(
        &mut self,
        q: usize,
        i: usize,
        now: u64,
        clock: &mut dyn Clock,
        target: NodeId,
    ) {
        let (remote, work_id, bytes) = match &self.qps[q].pipe[i].item {
            PipeItem::PutWrite {
                remote, work_id, ..
            } => (*remote, *work_id, 8),
            PipeItem::PutWords {
                remote,
                words,
                work_id,
            } => (*remote, *work_id, 8 * words.len() as u64),
            _ => unreachable!("rule 3 fires on P1"),
        };
        if !self.may_put(q, target) {
            return self.refuse_put(q, i, remote, work_id);
        }
        assert!(
            self.qps[q]
                .pipe
                .iter()
                .take(i)
                .all(|e| e.item.overtakable())
                || self.mutation.is_some(),
            "rule 3: pre ⊆ {{ACK,G0,LW}}"
        );
        // The payload crosses the wire before the responder places it (0 for one word: a
        // word's time is in the wire's). Not a step towards the target: a slow node's extra
        // is in the steps around it already.
        let payload = clock.delay(Delay::Payload(bytes), None);
        // The ACK leaves after the responder's work on the put (0 unless the profile's
        // NIC acknowledges only after placement), then crosses the wire.
        let ack = clock.delay(self.put_ack_delay(remote), Some(self.link(q)));
        let ack_ready = now + payload + ack + clock.delay(self.wire(q), Some(self.link(q)));
        let item = std::mem::replace(
            &mut self.qps[q].pipe[i],
            Timed {
                item: PipeItem::Ack { work_id },
                ready: ack_ready,
            },
        );
        let ready =
            now + payload + clock.delay(self.remote_write_delay(remote), Some(self.link(q)));
        let rw = &mut self.qps[q].rw;
        match item.item {
            PipeItem::PutWrite { value, .. } => rw.push_back(Timed {
                item: RemoteWrite::Put { loc: remote, value },
                ready,
            }),
            PipeItem::PutWords { words, .. } => rw.extend(words.as_slice().iter().enumerate().map(
                |(k, &value)| Timed {
                    item: RemoteWrite::Put {
                        loc: remote.word_after(k),
                        value,
                    },
                    ready,
                },
            )),
            _ => unreachable!("rule 3 fires on P1"),
        }
    }

    /// Rules 4 and 13: the head of `rW` commits to memory; an atomic write frees `L[n]`.
    fn rule4_13_remote_commit(&mut self, q: usize, i: usize) {
        assert!(
            i == 0 || self.mutation.is_some(),
            "rules 4/13: the head of rW commits"
        );
        let (_, target) = self.qp_ends(q);
        let entry = self.qps[q].rw.remove(i).expect("rules 4/13: rW non-empty");
        match entry.item {
            RemoteWrite::Put { loc, value } => self.write(loc, value),
            RemoteWrite::Atomic { loc, value } => {
                assert!(
                    self.atomic_busy[target.index()] || self.mutation.is_some(),
                    "rule 13: L[n] is held by this atomic"
                );
                self.write(loc, value);
                if !self.mutated(Mutation::Rule13StrongerLock) {
                    self.atomic_busy[target.index()] = false;
                }
            }
        }
    }

    /// Rule 5: an ACK at the head of the pipe is removed; its `cn` joins `lW`.
    fn rule5_put_completion(&mut self, q: usize, i: usize, now: u64) {
        assert!(
            i == 0 || self.mutation.is_some(),
            "rule 5: only the head ACK acts"
        );
        let entry = self.qps[q].pipe.remove(i).expect("rule 5: pipe non-empty");
        assert!(
            matches!(entry.item, PipeItem::Ack { .. }),
            "rule 5: head is an ACK"
        );
        self.push_completion(q, now);
    }

    /// Rule 6: a get's remote read: `G0(a,y)` becomes `LW(a, M[y])`.
    fn rule6_get_remote_read(&mut self, q: usize, i: usize, now: u64, clock: &mut dyn Clock) {
        assert!(
            self.qps[q].rw.is_empty() || self.mutation.is_some(),
            "rule 6: rW empty"
        );
        let PipeItem::GetRead {
            local,
            remote,
            work_id,
        } = self.qps[q].pipe[i].item
        else {
            unreachable!("rule 6 fires on G0")
        };
        let value = self.read(remote).expect("rule 6: remote checked at post");
        self.qps[q].pipe[i] = Timed {
            item: PipeItem::LocalWrite {
                local,
                value,
                work_id,
            },
            ready: now + clock.delay(self.wire(q), Some(self.link(q))),
        };
    }

    /// Rule 7: an LW at the head of the pipe is removed; `nlw(a,v)` then `cn` join `lW`.
    fn rule7_local_write_issued(&mut self, q: usize, i: usize, now: u64, clock: &mut dyn Clock) {
        assert!(
            i == 0 || self.mutation.is_some(),
            "rule 7: only the head LW acts"
        );
        let entry = self.qps[q].pipe.remove(i).expect("rule 7: pipe non-empty");
        let PipeItem::LocalWrite {
            local,
            value,
            work_id,
        } = entry.item
        else {
            unreachable!("rule 7 fires on LW")
        };
        let ready = now + clock.delay(Delay::LocalMemWrite, None);
        self.qps[q].lw.push_back(Timed {
            item: LocalWriteEntry::Write {
                loc: local,
                value,
                work_id,
            },
            ready,
        });
        self.push_completion(q, ready);
    }

    /// Rule 8: the first non-`cn` entry of `lW` commits to memory.
    fn rule8_local_write_commits(&mut self, q: usize, i: usize) {
        assert!(
            self.qps[q]
                .lw
                .iter()
                .take(i)
                .all(|e| matches!(e.item, LocalWriteEntry::Completion))
                || self.mutation.is_some(),
            "rule 8: only completions precede the committing nlw"
        );
        let entry = self.qps[q].lw.remove(i).expect("rule 8: entry exists");
        let LocalWriteEntry::Write { loc, value, .. } = entry.item else {
            unreachable!("rule 8 commits an nlw")
        };
        self.write(loc, value);
    }

    /// Rules 9, 10, 11: a remote RMW's atomic read. A failing CAS (9) becomes `LW(a, M[y])`;
    /// a succeeding CAS (10) or an FAA (11) becomes `AW(y, new)` then `LW(a, M[y])` and
    /// takes `L[n]`.
    fn rule9_10_11_atomic_read(
        &mut self,
        q: usize,
        i: usize,
        now: u64,
        clock: &mut dyn Clock,
        target: NodeId,
    ) {
        assert!(
            !self.atomic_busy[target.index()] || self.mutation.is_some(),
            "rules 9-11: L[n] free"
        );
        assert!(
            self.qps[q].rw.is_empty() || self.mutated(Mutation::AtomicIgnoresOwnRw),
            "rules 9-11: rW empty"
        );
        let PipeItem::AtomicRead {
            local,
            remote,
            rmw,
            work_id,
        } = self.qps[q].pipe[i].item
        else {
            unreachable!("rules 9-11 fire on A0")
        };
        let old = self
            .read(remote)
            .expect("rules 9-11: remote checked at post");
        let atomic = clock.delay(self.atomic_delay(remote), Some(self.link(q)));
        let back = Timed {
            item: PipeItem::LocalWrite {
                local,
                value: old,
                work_id,
            },
            ready: now + atomic + clock.delay(self.wire(q), Some(self.link(q))),
        };
        match rmw.apply(old) {
            None => self.qps[q].pipe[i] = back, // rule 9
            Some(new) => {
                // rules 10 and 11
                let skip_lock = match rmw {
                    Rmw::Cas { .. } => self.mutated(Mutation::Rule10Weaker),
                    Rmw::Faa { .. } => self.mutated(Mutation::Rule11Weaker),
                };
                if !skip_lock {
                    self.atomic_busy[target.index()] = true;
                }
                self.qps[q].pipe[i] = Timed {
                    item: PipeItem::AtomicWrite {
                        remote,
                        value: new,
                        work_id,
                    },
                    ready: now + atomic,
                };
                self.qps[q].pipe.insert(i + 1, back);
            }
        }
    }

    /// Rule 12: an `AW(y,v)` is removed from the pipe; `nraw(y,v)` joins `rW`.
    fn rule12_atomic_write_issued(
        &mut self,
        q: usize,
        i: usize,
        now: u64,
        clock: &mut dyn Clock,
        target: NodeId,
    ) {
        let entry = self.qps[q].pipe.remove(i).expect("rule 12: item exists");
        let PipeItem::AtomicWrite { remote, value, .. } = entry.item else {
            unreachable!("rule 12 fires on AW")
        };
        let ready = now + clock.delay(self.remote_write_delay(remote), Some(self.link(q)));
        self.qps[q].rw.push_back(Timed {
            item: RemoteWrite::Atomic { loc: remote, value },
            ready,
        });
        if self.mutated(Mutation::Rule13Weaker) {
            self.atomic_busy[target.index()] = false;
        }
    }

    /// A completion notification, kept only for threads that poll (rdmawait threads learn
    /// completion from the absence of their operation in the queues).
    fn push_completion(&mut self, q: usize, ready: u64) {
        let (t, _) = self.qp_ends(q);
        if self.threads[t].polls {
            self.qps[q].lw.push_back(Timed {
                item: LocalWriteEntry::Completion,
                ready,
            });
        }
    }

    /// TSO flush, or the move of a posted operation into its queue pair (the paper's
    /// seventh hardware rule): the head of `B[t]` leaves the store buffer.
    fn store_buffer_head(&mut self, t: usize, now: u64, clock: &mut dyn Clock) {
        let entry = self.threads[t]
            .sb
            .pop_front()
            .expect("store buffer non-empty");
        self.leave_store_buffer(t, entry.item, now, clock);
    }

    /// An entry leaves thread t's store buffer: a CPU write is flushed to memory, or a
    /// remote operation enters the tail of its queue pair's pipe.
    fn leave_store_buffer(&mut self, t: usize, item: SbEntry, now: u64, clock: &mut dyn Clock) {
        match item {
            SbEntry::Write { loc, value } => self.write(loc, value),
            SbEntry::Remote { target, item } => {
                let q = self.qp_index(t, target);
                if let Some(error) = self.qp_failure(q, target) {
                    self.fail_item(t, &item, error);
                    return;
                }
                let kind = match item {
                    PipeItem::PutRead { .. } => Some(Delay::NicLocalRead),
                    PipeItem::Fence => None,
                    _ => Some(self.wire(q)),
                };
                let ready = now + kind.map_or(0, |k| clock.delay(k, Some(self.link(q))));
                self.qps[q].pipe.push_back(Timed { item, ready });
                self.mark_active(q);
            }
        }
    }

    /// The error an operation on queue pair q meets, if it cannot run.
    pub(crate) fn qp_failure(&self, q: usize, target: NodeId) -> Option<RdmaError> {
        match self.nodes[target.index()] {
            NodeStatus::Crashed(CrashMode::Error) => {
                return Some(RdmaError::RemoteCrashed { node: target });
            }
            NodeStatus::Crashed(CrashMode::Hang) | NodeStatus::Up => {}
        }
        (self.qps[q].status != QpStatus::Ready)
            .then_some(RdmaError::QueuePairError { node: target })
    }

    /// Records the failure of an asynchronous operation; its `wait` reports it.
    pub(crate) fn fail_item(&mut self, t: usize, item: &PipeItem, error: RdmaError) {
        if let Some(work_id) = item.work_id() {
            self.record_failure(t, work_id, error);
        }
    }

    /// Records a failure of an operation with `work_id` of thread t.
    pub(crate) fn record_failure(&mut self, t: usize, work_id: WorkId, error: RdmaError) {
        self.threads[t].failed.push((work_id, error));
    }

    /// Checks a location for a word access by the NIC.
    pub(crate) fn check_word(&self, loc: Loc) -> Result<(), RdmaError> {
        self.word_index(loc).map(|_| ())
    }
}
