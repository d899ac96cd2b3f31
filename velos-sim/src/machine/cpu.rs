//! The CPU rules (x86-TSO) and the posting of remote operations: a thread executes its
//! pending operation and its process is resumed with the reply.

use super::delay::{Clock, Delay};
use super::items::{LocalWriteEntry, PipeItem, SbEntry, Timed};
use super::mutation::Mutation;
use super::state::{Machine, Next, NodeStatus};
use velos_rdma::{Loc, NodeId, Op, Process, RdmaError, Reply, Step, WorkId};

/// What a post does at once ([`Machine::post_check`]).
enum PostCheck {
    /// The post fails: its reply.
    Reply(RdmaError),
    /// The operation fails at its `wait`: the failure recorded.
    Record(RdmaError),
    /// It enters the store buffer.
    Enter,
}

impl<P: Process> Machine<P> {
    /// Thread t executes its pending operation at `now` and is resumed with the reply.
    pub(crate) fn cpu_step(&mut self, t: usize, now: u64, clock: &mut dyn Clock) {
        let Next::Pending(op) = self.threads[t].next.clone() else {
            unreachable!("a CPU step needs a pending operation")
        };
        let reply = match op {
            Op::SetWriteAccess { writers } => match self.set_write_access(t, writers, now, clock) {
                // Started: the thread resumes when the change is in effect.
                None => return,
                Some(reply) => reply,
            },
            _ => self.execute(t, &op, now, clock),
        };
        let kind = match op {
            Op::Pause { ns } => Delay::Pause(ns),
            _ if op.target().is_some() => Delay::CpuPost,
            _ => Delay::CpuLocal,
        };
        // A copy of many words costs its bytes on top of the step.
        let copy = match &op {
            Op::StoreWords { words, .. } => clock.delay(Delay::Copy(8 * words.len() as u64), None),
            Op::LoadWords { count, .. } => clock.delay(Delay::Copy(8 * u64::from(*count)), None),
            _ => 0,
        };
        let thread = &mut self.threads[t];
        thread.next = match thread.process.resume(reply) {
            Step::Op(next) => Next::Pending(next),
            Step::Done => Next::Finished,
        };
        thread.ready = now + clock.delay(kind, None) + copy;
    }

    /// The effect and reply of one operation of thread t (its premise holds).
    fn execute(&mut self, t: usize, op: &Op, now: u64, clock: &mut dyn Clock) -> Reply {
        let node = self.threads[t].node;
        match *op {
            Op::Load { loc } => match self.check_local(node, loc) {
                Err(e) => Reply::Failed(e),
                Ok(()) => Reply::Value(self.tso_read(t, loc)),
            },
            Op::Store { loc, value } => match self.check_local(node, loc) {
                Err(e) => Reply::Failed(e),
                Ok(()) => {
                    let ready = now + clock.delay(Delay::Flush, None);
                    self.threads[t].sb.push_back(Timed {
                        item: SbEntry::Write { loc, value },
                        ready,
                    });
                    Reply::Done
                }
            },
            Op::LoadWords { loc, count } => {
                let last = loc.word_after((count as usize).saturating_sub(1));
                match self
                    .check_local(node, loc)
                    .and(self.check_local(node, last))
                {
                    Err(e) => Reply::Failed(e),
                    Ok(()) if count == 0 => Reply::Failed(RdmaError::no_words("LoadWords")),
                    // That many loads in a row, in address order.
                    Ok(()) => Reply::Words(
                        (0..count as usize)
                            .map(|i| self.tso_read(t, loc.word_after(i)))
                            .collect::<Vec<_>>()
                            .into(),
                    ),
                }
            }
            Op::StoreWords { loc, ref words } => {
                let last = loc.word_after(words.len().saturating_sub(1));
                match self
                    .check_local(node, loc)
                    .and(self.check_local(node, last))
                {
                    Err(e) => Reply::Failed(e),
                    Ok(()) => {
                        // That many stores in a row, in address order.
                        let ready = now + clock.delay(Delay::Flush, None);
                        for (i, &value) in words.as_slice().iter().enumerate() {
                            let loc = loc.word_after(i);
                            self.threads[t].sb.push_back(Timed {
                                item: SbEntry::Write { loc, value },
                                ready,
                            });
                        }
                        Reply::Done
                    }
                }
            }
            Op::Cas { loc, expected, new } => match self.check_local(node, loc) {
                Err(e) => Reply::Failed(e),
                Ok(()) => {
                    assert!(
                        self.threads[t].sb.is_empty() || self.mutated(Mutation::CasNoDrain),
                        "TSO: CPU CAS with an empty store buffer"
                    );
                    let old = self.read(loc).expect("checked");
                    if old == expected {
                        self.write(loc, new);
                    }
                    Reply::Value(old)
                }
            },
            Op::Now => Reply::Value(now),
            Op::Disconnect { node: peer } => match self.disconnect(node, peer) {
                Ok(()) => Reply::Done,
                Err(e) => Reply::Failed(e),
            },
            Op::SetWriteAccess { .. } => unreachable!("cpu_step: SetWriteAccess in access.rs"),
            Op::Pause { .. } => Reply::Done,
            Op::Mfence => {
                assert!(
                    self.threads[t].sb.is_empty() || self.mutated(Mutation::MfenceNoop),
                    "TSO: mfence with an empty store buffer"
                );
                Reply::Done
            }
            Op::Put {
                remote,
                local,
                work_id,
            } => self.post(
                t,
                remote,
                Some(local),
                PipeItem::PutRead {
                    remote,
                    local,
                    work_id,
                },
                now,
                clock,
            ),
            Op::PutInline {
                remote,
                value,
                work_id,
            } => self.post(
                t,
                remote,
                None,
                PipeItem::PutWrite {
                    remote,
                    value,
                    work_id,
                },
                now,
                clock,
            ),
            Op::PutWords {
                remote,
                ref words,
                work_id,
            } => self.post(
                t,
                remote,
                None,
                PipeItem::PutWords {
                    remote,
                    words: words.clone(),
                    work_id,
                },
                now,
                clock,
            ),
            Op::Get {
                local,
                remote,
                work_id,
            } => self.post(
                t,
                remote,
                Some(local),
                PipeItem::GetRead {
                    local,
                    remote,
                    work_id,
                },
                now,
                clock,
            ),
            Op::GetWords {
                local,
                remote,
                count,
                work_id,
            } => self.post_gets(t, local, remote, count, work_id, now, clock),
            Op::Atomic {
                local,
                remote,
                rmw,
                work_id,
            } => self.post(
                t,
                remote,
                Some(local),
                PipeItem::AtomicRead {
                    local,
                    remote,
                    rmw,
                    work_id,
                },
                now,
                clock,
            ),
            Op::Rfence { node: target } => match self.check_node(target) {
                Err(e) => Reply::Failed(e),
                Ok(()) => {
                    self.push_remote(t, target, PipeItem::Fence, now, clock);
                    Reply::Done
                }
            },
            Op::WaitAny { base, mask } => {
                let i = self
                    .first_complete(t, base, mask)
                    .expect("wait_any: some work id complete");
                match self.take_failures(t, WorkId(base.0 + i as u32)) {
                    None => Reply::Value(i),
                    Some(e) => Reply::Failed(e),
                }
            }
            Op::TestLoad { work_id, .. } if self.work_pending(t, work_id) => Reply::Done,
            Op::TestLoad { work_id, loc } => match self.take_failures(t, work_id) {
                Some(e) => Reply::Failed(e),
                None => match self.check_local(node, loc) {
                    Err(e) => Reply::Failed(e),
                    Ok(()) => Reply::Value(self.tso_read(t, loc)),
                },
            },
            Op::Test { work_id } if self.work_pending(t, work_id) => Reply::Value(0),
            Op::Test { work_id } => match self.take_failures(t, work_id) {
                None => Reply::Value(1),
                Some(e) => Reply::Failed(e),
            },
            Op::Wait { work_id } => {
                assert!(
                    !self.work_pending(t, work_id),
                    "rdmawait: wait with its operations complete"
                );
                match self.take_failures(t, work_id) {
                    None => Reply::Done,
                    Some(e) => Reply::Failed(e),
                }
            }
            Op::Poll { node: target } => match self.check_node(target) {
                Err(e) => Reply::Failed(e),
                Ok(()) => {
                    let q = self.qp_index(t, target);
                    let head = self.qps[q]
                        .lw
                        .pop_front()
                        .expect("poll: a completion at the head of lW");
                    assert!(
                        matches!(head.item, LocalWriteEntry::Completion),
                        "poll consumes a cn"
                    );
                    self.refresh_active(q);
                    Reply::Done
                }
            },
            Op::GlobalFence { node: target } => match self.check_node(target) {
                Err(e) => Reply::Failed(e),
                Ok(()) => {
                    assert!(
                        self.fully_done_towards(t, target),
                        "global fence: all done towards the node"
                    );
                    let q = self.qp_index(t, target);
                    match self.qp_failure(q, target) {
                        Some(e) => Reply::Failed(e),
                        None if !self.is_up(target) => {
                            Reply::Failed(RdmaError::RemoteCrashed { node: target })
                        }
                        None => Reply::Done,
                    }
                }
            },
        }
    }

    /// Posts a remote operation: it enters the store buffer (rdma-semantics.md: every
    /// remote operation enters its queue pair through the thread's store buffer). Bad
    /// addresses fail the operation: a bad local operand at once, a bad remote one at its
    /// `wait`, as a NIC reports it.
    fn post(
        &mut self,
        t: usize,
        remote: Loc,
        local: Option<Loc>,
        item: PipeItem,
        now: u64,
        clock: &mut dyn Clock,
    ) -> Reply {
        let words = match &item {
            PipeItem::PutWords { words, .. } => words.len(),
            _ => 1,
        };
        match self.post_check(t, remote, local, words) {
            PostCheck::Reply(e) => Reply::Failed(e),
            PostCheck::Record(e) => {
                self.fail_item(t, &item, e);
                Reply::Done
            }
            PostCheck::Enter => {
                self.push_remote(t, remote.node, item, now, clock);
                Reply::Done
            }
        }
    }

    /// What posting a remote operation on `remote` (and `words` words after it, each
    /// checked as if it were a put's) and `local` does at once: a bad local operand or an
    /// unknown node fails the post (no queue pair can carry it); a bad remote word is
    /// recorded as the operation's failure, reported at its `wait` as a NIC reports it.
    fn post_check(&self, t: usize, remote: Loc, local: Option<Loc>, words: usize) -> PostCheck {
        let node = self.threads[t].node;
        if let Some(local) = local
            && let Err(e) = self.check_local(node, local)
        {
            return PostCheck::Reply(e);
        }
        if let Err(e) = self.check_node(remote.node) {
            return PostCheck::Reply(e);
        }
        let bad = (0..words.max(1)).find_map(|i| self.check_word(remote.word_after(i)).err());
        bad.map_or(PostCheck::Enter, PostCheck::Record)
    }

    /// Whether thread t posting `op` records a failure at once ([`Machine::post_check`]):
    /// that step appends to the thread's failures, which other steps of its queue pairs
    /// append to too, so it is not invisible to the explorer's reductions.
    pub(crate) fn fails_at_post(&self, t: usize, op: &Op) -> bool {
        let (remote, local, words) = match op {
            Op::Put { remote, local, .. }
            | Op::Get { local, remote, .. }
            | Op::Atomic { local, remote, .. } => (*remote, Some(*local), 1),
            Op::PutInline { remote, .. } => (*remote, None, 1),
            Op::PutWords { remote, words, .. } => (*remote, None, words.len()),
            Op::GetWords {
                local,
                remote,
                count,
                ..
            } => {
                let last = local.word_after((*count as usize).saturating_sub(1));
                let node = self.threads[t].node;
                if *count == 0 || self.check_local(node, last).is_err() {
                    return false; // refused at post: no failure recorded
                }
                (*remote, Some(*local), *count as usize)
            }
            _ => return false,
        };
        matches!(
            self.post_check(t, remote, local, words),
            PostCheck::Record(_)
        )
    }

    /// Posts `Op::GetWords`: `count` gets, remote word i into local word i, entering the
    /// store buffer at once in address order, with one work id; the message's bytes after
    /// the first word are charged as a put's payload is. Addresses are checked as for
    /// `count` gets: a bad local word or an unknown node fails the post; a bad remote word
    /// is the operation's failure.
    #[allow(clippy::too_many_arguments)]
    fn post_gets(
        &mut self,
        t: usize,
        local: Loc,
        remote: Loc,
        count: u32,
        work_id: WorkId,
        now: u64,
        clock: &mut dyn Clock,
    ) -> Reply {
        let node = self.threads[t].node;
        if count == 0 {
            return Reply::Failed(RdmaError::no_words("GetWords"));
        }
        if let Err(e) = self.check_local(node, local.word_after(count as usize - 1)) {
            return Reply::Failed(e);
        }
        let first = PipeItem::GetRead {
            local,
            remote,
            work_id,
        };
        match self.post_check(t, remote, Some(local), count as usize) {
            PostCheck::Reply(e) => Reply::Failed(e),
            PostCheck::Record(e) => {
                self.fail_item(t, &first, e);
                Reply::Done
            }
            PostCheck::Enter => {
                let payload = clock.delay(Delay::Payload(8 * u64::from(count)), None);
                for i in 0..count as usize {
                    let item = PipeItem::GetRead {
                        local: local.word_after(i),
                        remote: remote.word_after(i),
                        work_id,
                    };
                    let ready = now + payload + clock.delay(Delay::Doorbell, None);
                    self.threads[t].sb.push_back(Timed {
                        item: SbEntry::Remote {
                            target: remote.node,
                            item,
                        },
                        ready,
                    });
                }
                Reply::Done
            }
        }
    }

    fn push_remote(
        &mut self,
        t: usize,
        target: NodeId,
        item: PipeItem,
        now: u64,
        clock: &mut dyn Clock,
    ) {
        // The doorbell is the poster's own CPU handing the request to its NIC: a slow
        // target does not charge it (see `Fault::Delay`), or every later post and store
        // of the thread would wait behind it in the store buffer, which drains in order.
        let ready = now + clock.delay(Delay::Doorbell, None);
        self.threads[t].sb.push_back(Timed {
            item: SbEntry::Remote { target, item },
            ready,
        });
    }

    /// The failures of thread t's operations with `work_id`, reported once: the first as
    /// the cause of a `WorkFailed`.
    fn take_failures(&mut self, t: usize, work_id: WorkId) -> Option<RdmaError> {
        let failed = &mut self.threads[t].failed;
        let i = failed.iter().position(|(w, _)| *w == work_id)?;
        let cause = failed[i].1.clone();
        failed.retain(|(w, _)| *w != work_id);
        Some(RdmaError::WorkFailed {
            work_id,
            cause: Box::new(cause),
        })
    }

    /// TSO read: the newest write to `loc` in the store buffer, else memory.
    fn tso_read(&self, t: usize, loc: Loc) -> u64 {
        self.threads[t]
            .sb
            .iter()
            .rev()
            .find_map(|e| match e.item {
                SbEntry::Write { loc: l, value } if l == loc => Some(value),
                _ => None,
            })
            .unwrap_or_else(|| self.read(loc).expect("checked"))
    }

    fn check_local(&self, node: NodeId, loc: Loc) -> Result<(), RdmaError> {
        if loc.node != node {
            return Err(RdmaError::NotLocal { loc, node });
        }
        self.check_word(loc)
    }

    fn check_node(&self, node: NodeId) -> Result<(), RdmaError> {
        if node.index() < self.node_count() {
            Ok(())
        } else {
            Err(RdmaError::UnknownNode { node })
        }
    }

    /// Whether thread t's node is up.
    pub fn thread_up(&self, t: usize) -> bool {
        matches!(self.nodes[self.threads[t].node.index()], NodeStatus::Up)
    }
}
