//! A remote operation as a work request: what the NIC does, and how its completion status
//! reads as an [`RdmaError`].

use super::memory::WordAddress;
use crate::error::RdmaError;
use crate::ids::{Loc, NodeId};
use crate::layout::Layout;
use crate::op::{Op, Rmw};
use sideway::ibverbs::completion::WorkCompletionStatus;

/// What the NIC does for a remote operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Verb {
    /// RDMA WRITE of the local word.
    Write {
        /// The source word, read by the NIC when it executes the request.
        local: Loc,
    },
    /// RDMA WRITE of a value copied into the request at post (inline).
    WriteInline {
        /// The value.
        value: u64,
    },
    /// RDMA WRITE of consecutive words captured at post (`Op::PutWords`), word i to the
    /// remote word + 8·i: one work request, inline or from the endpoint's staging buffer.
    WriteWords {
        /// How many words.
        words: u32,
        /// Where the NIC reads the payload: `None` when it goes inline (copied into the
        /// request as it is handed to the NIC), else the staging slots it was copied into
        /// at post ([`super::staging`]).
        staged: Option<WordAddress>,
        /// The first word whose remote key is not word 0's, if any: one key cannot reach
        /// it, so the NIC refuses the whole write, and the refusal names this word (see
        /// [`Request::failure`]).
        beyond: Option<u32>,
    },
    /// RDMA READ of `words` consecutive words into the local words from `local` on
    /// (`Op::Get`: one; `Op::GetWords`: one work request for all).
    Read {
        /// The destination of word 0.
        local: Loc,
        /// How many words (at least 1).
        words: u32,
    },
    /// Remote atomic; the old value lands in the local word.
    Atomic {
        /// Where the old value lands.
        local: Loc,
        /// CAS or FAA.
        rmw: Rmw,
    },
}

/// A remote operation of a thread, towards the node of `remote`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Request {
    /// The target word; its node is the target of the queue pair.
    pub(super) remote: Loc,
    /// What to do.
    pub(super) verb: Verb,
}

impl Request {
    /// The request of the remote operation `op`, posted by a thread of `source`.
    ///
    /// `Err` is the failure to reply at post, as the in-process backend replies it: the
    /// target is not a node of the layout (no queue pair), or the local operand is on
    /// another node.
    pub(super) fn of(op: &Op, source: NodeId, layout: &Layout) -> Result<Request, RdmaError> {
        let (remote, verb) = match *op {
            Op::Put { remote, local, .. } => (remote, Verb::Write { local }),
            Op::PutInline { remote, value, .. } => (remote, Verb::WriteInline { value }),
            Op::PutWords {
                remote, ref words, ..
            } => {
                let words = u32::try_from(words.len()).map_err(|_| RdmaError::Unsupported {
                    operation: "PutWords",
                    backend: "the verbs backend, for 2^32 words or more",
                })?;
                let verb = Verb::WriteWords {
                    words,
                    staged: None,
                    beyond: None,
                };
                (remote, verb)
            }
            Op::Get { local, remote, .. } => (remote, Verb::Read { local, words: 1 }),
            Op::GetWords {
                local,
                remote,
                count,
                ..
            } => {
                if count == 0 {
                    return Err(RdmaError::no_words("GetWords"));
                }
                (
                    remote,
                    Verb::Read {
                        local,
                        words: count,
                    },
                )
            }
            Op::Atomic {
                local, remote, rmw, ..
            } => (remote, Verb::Atomic { local, rmw }),
            _ => panic!("not a remote operation: {op:?}"),
        };
        if !layout.has_node(remote.node) {
            return Err(RdmaError::UnknownNode { node: remote.node });
        }
        let request = Request { remote, verb };
        if let Some(local) = request.local().filter(|local| local.node != source) {
            return Err(RdmaError::NotLocal {
                loc: local,
                node: source,
            });
        }
        assert!(request.local().is_none_or(|local| local.node == source));
        Ok(request)
    }

    /// The target node.
    pub(super) fn target(&self) -> NodeId {
        self.remote.node
    }

    /// The local operand, if the verb has one.
    pub(super) fn local(&self) -> Option<Loc> {
        match self.verb {
            Verb::Write { local } | Verb::Read { local, .. } | Verb::Atomic { local, .. } => {
                Some(local)
            }
            Verb::WriteInline { .. } | Verb::WriteWords { .. } => None,
        }
    }

    /// How many remote words the request writes or reads (0 for an empty `PutWords`).
    pub(super) fn words(&self) -> u32 {
        match self.verb {
            Verb::WriteWords { words, .. } | Verb::Read { words, .. } => words,
            _ => 1,
        }
    }

    /// The location of remote word `i` of the request, as the in-process backend computes
    /// it ([`Loc::word_after`]).
    pub(super) fn remote_word(&self, i: u32) -> Loc {
        self.remote.word_after(i as usize)
    }

    /// Checks the addresses as the in-process backend does: the local operand first, then
    /// the remote words in address order (word 0 even for an empty `PutWords`); the first
    /// bad one is the failure. A bad address is the request's failure, reported at its
    /// completion; it is never handed to the NIC, whose error would also break the queue
    /// pair.
    pub(super) fn check(&self, layout: &Layout) -> Result<(), RdmaError> {
        if let Some(local) = self.local() {
            layout.check(local)?;
            if let Verb::Read { words, .. } = self.verb {
                // A read's local words are one range of the node's, bounded by its last.
                layout.check(local.word_after(words as usize - 1))?;
            }
        }
        layout.check(self.remote)?;
        let words = self.words();
        // A node's words are one range: with word 0 and the last in it, so is every
        // word between them. Only a failure needs the scan for the first bad one.
        if words > 1 && layout.check(self.remote_word(words - 1)).is_err() {
            for i in 1..words {
                layout.check(self.remote_word(i))?;
            }
        }
        Ok(())
    }

    /// Whether a work completion with `status` says the target refused the request (a
    /// remote access or invalid request error), which breaks the queue pair until a grant
    /// (`crate::verbs::access`).
    pub(super) fn refusal(status: u32) -> bool {
        status == WorkCompletionStatus::RemoteAccessError as u32
            || status == WorkCompletionStatus::RemoteInvalidRequestError as u32
    }

    /// The failure a work completion with the (unsuccessful) `status` reports.
    pub(super) fn failure(&self, status: u32) -> RdmaError {
        assert_ne!(
            status,
            WorkCompletionStatus::Success as u32,
            "not a failure"
        );
        let node = self.target();
        // A multi-word write one key cannot cover is refused whole; the refusal names
        // the first word out of word 0's key's reach.
        let refused = match self.verb {
            Verb::WriteWords {
                beyond: Some(i), ..
            } => self.remote_word(i),
            _ => self.remote,
        };
        let remote_access = RdmaError::RemoteAccess { loc: refused };
        let error = if status == WorkCompletionStatus::RemoteAccessError as u32 {
            remote_access
        } else if status == WorkCompletionStatus::RemoteInvalidRequestError as u32 {
            match self.remote.word_index() {
                None => RdmaError::MisalignedAtomic { loc: self.remote },
                Some(_) => remote_access,
            }
        } else if status == WorkCompletionStatus::LocalProtectionError as u32
            || status == WorkCompletionStatus::LocalAccessError as u32
            || status == WorkCompletionStatus::LocalLengthError as u32
        {
            // The model has no local-access failure: the address checks at post rule it
            // out, so this means a broken registration. Report the word involved.
            RdmaError::RemoteAccess {
                loc: self.local().unwrap_or(self.remote),
            }
        } else if status == WorkCompletionStatus::RetryCounterExceededError as u32
            || status == WorkCompletionStatus::ResponderNotReadyRetryCounterExceededError as u32
            || status == WorkCompletionStatus::ResponseTimeoutError as u32
        {
            // The target stopped answering.
            RdmaError::RemoteCrashed { node }
        } else {
            // Flushed because an earlier request broke the queue pair, or a fatal error.
            RdmaError::QueuePairError { node }
        };
        assert!(!matches!(error, RdmaError::WorkFailed { .. }));
        error
    }
}
