//! A posted remote operation, as the NIC executes it.

use super::memory::Memory;
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId};
use crate::op::{Op, Rmw};
use crate::plan::RemoteKind;
use crate::words::Words;
use std::sync::atomic::Ordering;

/// A remote operation on the queue pair from `source` towards `target`.
#[derive(Clone, Debug)]
pub(crate) struct Task {
    /// The node of the posting thread (its NIC executes the task).
    pub(crate) source: NodeId,
    /// The target node of the queue pair.
    pub(crate) target: NodeId,
    /// What to do, or the address error found at post, which is the task's failure: like a
    /// NIC, the backend reports a bad address in the completion, not at post.
    access: Result<Access, RdmaError>,
}

/// The memory accesses of a task, with checked word indices.
#[derive(Clone, Debug)]
enum Access {
    Put {
        remote: usize,
        local: usize,
    },
    PutInline {
        remote: usize,
        value: u64,
    },
    /// Word i goes to `remote + i`.
    PutWords {
        remote: usize,
        words: Words,
    },
    Get {
        local: usize,
        remote: usize,
    },
    /// Remote word `remote + i` into local word `local + i`.
    GetWords {
        local: usize,
        remote: usize,
        count: usize,
    },
    Atomic {
        local: usize,
        remote: usize,
        rmw: Rmw,
    },
}

impl Task {
    /// The task of the remote operation `op` posted by a thread of `source`.
    ///
    /// `Err` is the failure to reply at post: `op` is not a remote operation, its target is
    /// not a node of the layout (there is no queue pair towards it), or its local operand is
    /// on another node.
    pub(crate) fn post(op: &Op, source: NodeId, memory: &Memory) -> Result<Task, RdmaError> {
        let (remote, local) = match *op {
            Op::Put { remote, local, .. }
            | Op::Get { remote, local, .. }
            | Op::GetWords { remote, local, .. }
            | Op::Atomic { remote, local, .. } => (remote, Some(local)),
            Op::PutInline { remote, .. } | Op::PutWords { remote, .. } => (remote, None),
            _ => panic!("not a remote operation: {op:?}"),
        };
        if !memory.has_node(remote.node) {
            return Err(RdmaError::UnknownNode { node: remote.node });
        }
        if let Some(local) = local.filter(|local| local.node != source) {
            return Err(RdmaError::NotLocal {
                loc: local,
                node: source,
            });
        }
        Ok(Task {
            source,
            target: remote.node,
            access: Access::check(op, source, memory),
        })
    }

    /// Executes the task in full: the local read, the remote access and the local write.
    pub(crate) fn execute(&self, memory: &Memory) -> Result<(), RdmaError> {
        memory.queue_pair(self.source, self.target)?;
        if let Err(e @ RdmaError::RemoteAccess { .. }) = &self.access {
            // As on a NIC: an access the target's plan refuses breaks the queue pair.
            memory.set_queue_pair_error(self.source, self.target);
            return Err(e.clone());
        }
        if let Ok(
            Access::Put { remote, .. }
            | Access::PutInline { remote, .. }
            | Access::PutWords { remote, .. },
        ) = self.access
        {
            // The target checks its write permission when the write arrives.
            let loc = Loc::word(self.target, remote as u32);
            memory.may_write(self.source, self.target, loc)?;
        }
        let local = |index| memory.word_at(self.source, index);
        let remote = |index| memory.word_at(self.target, index);
        // By reference: a `PutWords` payload is shared, and cloning it costs two atomics.
        let access = match &self.access {
            Ok(access) => access,
            Err(e) => return Err(e.clone()),
        };
        match *access {
            Access::Put {
                remote: r,
                local: l,
            } => remote(r).store(local(l).load(Ordering::SeqCst), Ordering::SeqCst),
            Access::PutInline { remote: r, value } => remote(r).store(value, Ordering::SeqCst),
            // In address order, as the model's rule 3 appends the words' remote writes.
            Access::PutWords {
                remote: r,
                ref words,
            } => {
                for (i, &w) in words.as_slice().iter().enumerate() {
                    remote(r + i).store(w, Ordering::SeqCst);
                }
            }
            Access::Get {
                local: l,
                remote: r,
            } => local(l).store(remote(r).load(Ordering::SeqCst), Ordering::SeqCst),
            Access::GetWords {
                local: l,
                remote: r,
                count,
            } => {
                for i in 0..count {
                    local(l + i).store(remote(r + i).load(Ordering::SeqCst), Ordering::SeqCst);
                }
            }
            Access::Atomic {
                local: l,
                remote: r,
                rmw,
            } => {
                let old = match rmw {
                    Rmw::Cas { expected, new } => remote(r)
                        .compare_exchange(expected, new, Ordering::SeqCst, Ordering::SeqCst)
                        .unwrap_or_else(|actual| actual),
                    Rmw::Faa { add } => remote(r).fetch_add(add, Ordering::SeqCst),
                };
                local(l).store(old, Ordering::SeqCst);
            }
        }
        Ok(())
    }
}

impl Access {
    /// The accesses of `op` posted on `source` with their word indices, or the first
    /// address error, or the access the target's region plan refuses.
    fn check(op: &Op, source: NodeId, memory: &Memory) -> Result<Access, RdmaError> {
        let index = |loc: Loc| memory.layout().check(loc);
        let (remote, kind) = match *op {
            Op::Put { remote, .. } | Op::PutInline { remote, .. } | Op::PutWords { remote, .. } => {
                (remote, RemoteKind::Write)
            }
            Op::Get { remote, .. } | Op::GetWords { remote, .. } => (remote, RemoteKind::Read),
            Op::Atomic { remote, .. } => (remote, RemoteKind::Atomic),
            _ => unreachable!("checked by Task::post"),
        };
        let words = match op {
            Op::PutWords { words, .. } => words.len(),
            Op::GetWords { count, .. } => *count as usize,
            _ => 1,
        };
        // Every word written or read must be in bounds and allowed; the first that is not
        // is the failure, as a put or get of it would fail. When the last word is in
        // bounds (then so is every word before it: offsets only grow by whole words, and a
        // misaligned first word makes every one misaligned) and one grant allows them all
        // (a checked plan has one grant for a peer over a word), none fails: the common
        // case, checked at once.
        let last = words.checked_sub(1).map(|n| remote.word_after(n));
        let at_once = last.is_some_and(|last| index(last).is_ok())
            && memory.permit_all(source, remote, words, kind);
        if !at_once {
            index(remote)?;
            memory.permit(source, remote, kind)?;
            for i in 1..words {
                let loc = remote.word_after(i);
                index(loc)?;
                memory.permit(source, loc, kind)?;
            }
        }
        Ok(match op {
            &Op::Put { remote, local, .. } => Access::Put {
                local: index(local)?,
                remote: index(remote)?,
            },
            &Op::PutInline { remote, value, .. } => Access::PutInline {
                remote: index(remote)?,
                value,
            },
            Op::PutWords { remote, words, .. } => Access::PutWords {
                remote: index(*remote)?,
                words: words.clone(),
            },
            &Op::Get { local, remote, .. } => Access::Get {
                local: index(local)?,
                remote: index(remote)?,
            },
            &Op::GetWords {
                local,
                remote,
                count,
                ..
            } => {
                if count == 0 {
                    return Err(RdmaError::no_words("GetWords"));
                }
                // The local words are the thread's node's (checked at post): the last
                // must be there too.
                index(local.word_after(count as usize - 1))?;
                Access::GetWords {
                    local: index(local)?,
                    remote: index(remote)?,
                    count: count as usize,
                }
            }
            &Op::Atomic {
                local, remote, rmw, ..
            } => Access::Atomic {
                local: index(local)?,
                remote: index(remote)?,
                rmw,
            },
            _ => unreachable!("checked by Task::post"),
        })
    }
}
