//! How a [`VerbsEndpoint`] posts: remote operations are kept per queue pair and handed to
//! the NIC in lists, one doorbell each, by the rule of [`crate::doorbell`]; beyond the
//! queue depth they wait for completions to make room; a `PutWords` too long to go
//! inline is copied into the lane's staging ring when it is posted.

use super::{VerbsEndpoint, Waiting, node_of};
use crate::error::RdmaError;
use crate::op::Op;
use crate::verbs::completions::Ticket;
use crate::verbs::connection::{Connection, WorkRequest};
use crate::verbs::request::{Request, Verb};
use crate::verbs::staging::{Holder, Staging};
use crate::words::Words;

impl VerbsEndpoint<'_> {
    /// Posts a remote operation: keeps it for its queue pair's next doorbell (rung at
    /// once when the list reaches its bound). Never blocks, but for a long `PutWords`
    /// while the staging ring is full: it then reaps completions until slots are free.
    pub(super) fn post(&mut self, op: &Op) -> Result<(), RdmaError> {
        let work_id = op.work_id().expect("a remote operation has a work id");
        let host = self.host;
        let mut request = Request::of(op, self.node, host.layout())?;
        let payload = match op {
            Op::PutWords { words, .. } => self.prepare_words(&mut request, words)?,
            _ => None,
        };
        let target = request.target();
        let t = target.index();
        if self.connections[t].refused() {
            self.regrant(t);
        }
        self.seq += 1;
        self.posted[t] += 1;
        let ticket = Ticket {
            seq: self.seq,
            target,
            qp_seq: self.posted[t],
            work_id,
        };
        let nodes = self.posted.len();
        self.newest.entry(work_id).or_insert_with(|| vec![0; nodes])[t] = ticket.qp_seq;
        let fence = std::mem::take(&mut self.fence[t]);
        self.waiting[t].push_back(Waiting {
            ticket,
            request,
            fence,
            payload,
        });
        // Back-pressure: the send queue holds at most `queue_depth` requests (and a
        // flush). When it is full, a completion must come to make room: a signaled
        // request after the oldest.
        if self.completions.outstanding(target) >= host.queue_depth() as usize {
            let oldest = self.completions.completed(target) + 1;
            self.cover(t, oldest, false);
        }
        if self.doorbells.keep(t) {
            self.ring(t);
        }
        assert_eq!(self.posted[t], ticket.qp_seq);
        Ok(())
    }

    /// Where the payload of a `PutWords` goes: inline (returned, to be copied into the
    /// request as it goes to the NIC), or copied now into staging slots (recorded in the
    /// request); and the first word its key cannot reach. A request with a bad address
    /// gets neither: it never reaches the NIC. `Err` (at once) for a payload longer than
    /// the staging ring.
    fn prepare_words(
        &mut self,
        request: &mut Request,
        words: &Words,
    ) -> Result<Option<Words>, RdmaError> {
        let Verb::WriteWords { words: count, .. } = request.verb else {
            unreachable!("a PutWords request writes words");
        };
        assert_eq!(count as usize, words.len());
        if request.check(self.host.layout()).is_err() {
            return Ok(None);
        }
        let beyond = self.beyond_key(request);
        let staged = if Connection::fits_inline(words.len()) {
            None
        } else {
            let Some(slots) = Staging::slots_for(words.len()) else {
                return Err(RdmaError::Unsupported {
                    operation: "PutWords",
                    backend: "the verbs backend, beyond 64 KiB (the staging ring)",
                });
            };
            let first = self.reserve(slots);
            let target = request.target();
            let holder = Holder {
                target,
                qp_seq: self.posted[target.index()] + 1,
            };
            Some(self.staging().stage(first, words.as_slice(), holder))
        };
        request.verb = Verb::WriteWords {
            words: count,
            staged,
            beyond,
        };
        Ok(staged.is_none().then(|| words.clone()))
    }

    /// The first word of a multi-word write (its addresses in bounds) whose remote key is
    /// not word 0's, if any. A plan's grants are one contiguous range and one key each,
    /// so the first and last words sharing a key means every word does.
    fn beyond_key(&self, request: &Request) -> Option<u32> {
        let words = request.words();
        let key = |i| Self::remote(&self.remotes, self.host, request.remote_word(i)).key;
        if words < 2 || key(words - 1) == key(0) {
            return None;
        }
        let beyond = (1..words).find(|&i| key(i) != key(0));
        assert!(beyond.is_some());
        beyond
    }

    /// The first of a run of `slots` free staging slots. While there is none, rings
    /// every kept list, makes sure the completions of the requests holding slots will be
    /// reported (a flush after them if needed), and waits for one of them.
    fn reserve(&mut self, slots: usize) -> usize {
        loop {
            let completions = &self.completions;
            let done = |h: Holder| completions.completed(h.target) >= h.qp_seq;
            let staging = self.staging.as_mut().expect("until the endpoint goes");
            staging.release(done);
            if let Some(first) = staging.find(slots) {
                return first;
            }
            let holders = staging.holders();
            assert!(!holders.is_empty(), "a full ring has holders");
            self.ring_all();
            for h in &holders {
                self.cover(h.target.index(), h.qp_seq, true);
            }
            self.settle(
                |c| holders.iter().any(|h| c.completed(h.target) >= h.qp_seq),
                |_| (),
            );
        }
    }

    /// Rings the list kept for node index `t`: hands its requests to the NIC with one
    /// doorbell, as far as the send queue has room (the rest wait for completions).
    pub(super) fn ring(&mut self, t: usize) {
        self.doorbells.clear(t);
        self.hand_over(t);
        if !self.waiting[t].is_empty() {
            // The send queue is full: a completion must come to make room, a signaled
            // request after the oldest.
            let oldest = self.completions.completed(node_of(t)) + 1;
            self.cover(t, oldest, false);
        }
        assert!(
            self.waiting[t].is_empty()
                || self.completions.outstanding(node_of(t)) >= self.host.queue_depth() as usize
                || self.connections[t].broken(),
            "only requests beyond the queue depth still wait"
        );
    }

    /// Rings every kept list (see [`crate::doorbell`]).
    pub(super) fn ring_all(&mut self) {
        for t in 0..self.waiting.len() {
            if !self.waiting[t].is_empty() {
                self.ring(t);
            }
        }
    }

    /// Hands the requests waiting towards node index `t` to the NIC, oldest first, while
    /// the send queue has room: those that pass their checks in one list per doorbell,
    /// the others refused in their turn. Whether any left the waiting queue.
    pub(super) fn hand_over(&mut self, t: usize) -> bool {
        let depth = self.host.queue_depth() as usize;
        let target = node_of(t);
        let mut list = std::mem::take(&mut self.handing);
        let mut handed = false;
        while self.completions.outstanding(target) + list.len() < depth {
            let Some(waiting) = self.waiting[t].pop_front() else {
                break;
            };
            handed = true;
            match self.refusal(t, &waiting.request) {
                None => list.push(waiting),
                Some(error) => {
                    // The requests before it go first, in order.
                    self.post_list(t, &mut list);
                    self.refuse(t, waiting, error);
                }
            }
        }
        self.post_list(t, &mut list);
        assert!(list.is_empty());
        self.handing = list;
        if self.waiting[t].is_empty() {
            self.doorbells.clear(t);
        }
        handed
    }

    /// Why `request` towards node index `t` cannot go to the NIC, if it cannot: a bad
    /// address, a broken queue pair.
    fn refusal(&self, t: usize, request: &Request) -> Option<RdmaError> {
        if let Err(error) = request.check(self.host.layout()) {
            Some(error)
        } else if self.connections[t].broken() {
            Some(RdmaError::QueuePairError { node: node_of(t) })
        } else {
            None
        }
    }

    /// Completes a request that never reached the NIC with `error`, in its turn.
    fn refuse(&mut self, t: usize, waiting: Waiting, error: RdmaError) {
        self.completions.refused(waiting.ticket, error);
        // A request that never reached the NIC passes its fence on to the next.
        if waiting.fence {
            match self.waiting[t].front_mut() {
                Some(next) => next.fence = true,
                None => self.fence[t] = true,
            }
        }
    }

    /// Hands `list` (requests towards node index `t` that passed their checks, oldest
    /// first) to the NIC with one doorbell, each signaled as the signaling rule says, and
    /// empties it. If the send queue refuses the list, the queue pair is unusable and
    /// every request of it is refused.
    fn post_list(&mut self, t: usize, list: &mut Vec<Waiting>) {
        if list.is_empty() {
            return;
        }
        let host = self.host;
        let target = node_of(t);
        let completed = self.completions.completed(target);
        let checkpoint = self.signaling.checkpoint(t);
        let signaling = &mut self.signaling;
        let remotes = &self.remotes;
        let requests = list.iter().map(|waiting| {
            let request = &waiting.request;
            let remote = Self::remote(remotes, host, request.remote);
            let signaled = signaling.decide(t, &request.verb, completed);
            signaling.posted(t, waiting.ticket.qp_seq, signaled, remote);
            WorkRequest {
                wr_id: waiting.ticket.wr_id(),
                target,
                signaled,
                fence: waiting.fence,
                verb: request.verb,
                remote,
                local: request.local().map(|local| host.local(local)),
                inline: waiting.payload.as_ref().map(Words::as_slice),
            }
        });
        match self.connections[t].post_list(requests) {
            Ok(count) => {
                assert_eq!(count, list.len() as u64);
                self.doorbells.count(count);
                for waiting in list.drain(..) {
                    self.completions.posted(waiting.ticket, waiting.request);
                }
            }
            Err(_) => {
                self.signaling.restore(checkpoint);
                for waiting in list.drain(..) {
                    self.refuse(t, waiting, RdmaError::QueuePairError { node: target });
                }
            }
        }
        assert!(list.is_empty());
    }
}
