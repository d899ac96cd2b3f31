//! Which steps are enabled in a state (the premises of rules 1–13 and of the CPU rules).

use super::items::{LocalWriteEntry, PipeItem, RemoteWrite, SbEntry};
use super::mutation::Mutation;
use super::state::{Machine, Next, QpStatus};
use velos_rdma::{Loc, NodeId, Op, Process, WorkId};

/// One step of the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transition {
    /// Thread t executes its pending operation and resumes its process.
    Cpu(usize),
    /// The head of thread t's store buffer leaves it: a CPU write is flushed to memory, or
    /// a remote operation enters the tail of its queue pair's pipe.
    StoreBufferHead(usize),
    /// Thread t's oldest posted remote operation leaves its store buffer ahead of the
    /// older stores still there: enabled only under [`Mutation::PostOvertakesStore`].
    StoreBufferPost(usize),
    /// Pipe item `i` of queue pair `q` takes its step (rules 1, 2, 3, 5, 6, 7, 9–12).
    Pipe(usize, usize),
    /// Entry `i` (the head, in the model) of queue pair q's `rW` commits (rules 4 and 13).
    RemoteCommit(usize, usize),
    /// Entry `i` of queue pair q's `lW`, its first non-completion entry, commits (rule 8).
    LocalCommit(usize, usize),
}

impl<P: Process> Machine<P> {
    /// Appends every enabled transition, with the virtual time from which it may fire.
    pub fn enabled(&self, out: &mut Vec<(Transition, u64)>) {
        self.threads_enabled(out);
        #[cfg(debug_assertions)]
        self.check_active();
        // Only queue pairs in use can contribute, and they are visited in index order,
        // as if every queue pair were: the list (and so the simulator's tie-breaking) is
        // the same.
        for q in self.active_qps() {
            self.qp_enabled(q, out);
        }
    }

    /// Clears `out` and appends the threads' enabled steps (the start of
    /// [`Machine::enabled`]'s list).
    pub(super) fn threads_enabled(&self, out: &mut Vec<(Transition, u64)>) {
        out.clear();
        for (t, thread) in self.threads.iter().enumerate() {
            if !self.is_up(thread.node) {
                continue;
            }
            if let Next::Pending(op) = &thread.next
                && self.cpu_enabled(t, op)
            {
                out.push((Transition::Cpu(t), thread.ready));
            }
            if let Some(head) = thread.sb.front() {
                out.push((Transition::StoreBufferHead(t), head.ready));
            }
            if self.mutated(Mutation::PostOvertakesStore)
                && let Some(post) = self.post_behind_stores(t)
            {
                out.push((Transition::StoreBufferPost(t), thread.sb[post].ready));
            }
        }
    }

    /// Queue pair q's enabled steps, appended to `out`.
    pub(super) fn qp_enabled(&self, q: usize, out: &mut Vec<(Transition, u64)>) {
        let qp = &self.qps[q];
        if qp.pipe.is_empty() && qp.rw.is_empty() && qp.lw.is_empty() {
            return; // the common case in large clusters: nothing on this queue pair
        }
        let (_, target) = self.qp_ends(q);
        // A queue pair refused by its target, or put in error by a fault, still commits
        // the writes already issued to the target (`rW`: they are the responder's now);
        // an atomic's commit frees `L[n]`, which would else stay taken for good and stop
        // every later remote atomic towards the node. Only a ready one moves its pipe.
        if self.is_up(target) {
            if qp.status == QpStatus::Ready {
                self.pipe_enabled(q, target, out);
            }
            self.rw_enabled(q, out);
        }
        // Rule 8: local writes land in the requester's memory even if the target crashed.
        let mut writes = qp
            .lw
            .iter()
            .enumerate()
            .filter(|(_, e)| !matches!(e.item, LocalWriteEntry::Completion));
        if self.mutated(Mutation::Rule8Weaker) {
            for (i, entry) in writes {
                out.push((Transition::LocalCommit(q, i), entry.ready));
            }
        } else if let Some((i, entry)) = writes.next()
            && (!self.mutated(Mutation::Rule8Stronger) || qp.pipe.is_empty())
        {
            out.push((Transition::LocalCommit(q, i), entry.ready));
        }
    }

    /// The pipe steps of queue pair q (rules 1–3, 5–7, 9–12), whose target is up and which
    /// is ready.
    fn pipe_enabled(&self, q: usize, target: NodeId, out: &mut Vec<(Transition, u64)>) {
        if self.mutation.is_none() {
            #[cfg(debug_assertions)]
            let start = out.len();
            self.pipe_enabled_model(q, target, out);
            #[cfg(debug_assertions)]
            {
                let mut general = Vec::new();
                self.pipe_enabled_any(q, target, &mut general);
                assert_eq!(
                    out[start..],
                    general[..],
                    "the model's walk is the general one"
                );
            }
            return;
        }
        self.pipe_enabled_any(q, target, out);
    }

    /// [`Machine::pipe_enabled`] without a mutation: the rules' premises alone, so that the
    /// walk over a long pipe (a value read as one get per word) asks nothing else per item.
    fn pipe_enabled_model(&self, q: usize, target: NodeId, out: &mut Vec<(Transition, u64)>) {
        let qp = &self.qps[q];
        let lw_clean = qp.lw_only_completions();
        let rw_empty = qp.rw.is_empty();
        let lock_free = !self.atomic_busy[target.index()];
        let (mut pre_put_read, mut pre_overtakable) = (false, true);
        for (i, entry) in qp.pipe.iter().enumerate() {
            let head = i == 0;
            let enabled = match entry.item {
                PipeItem::Fence | PipeItem::Ack { .. } | PipeItem::LocalWrite { .. } => head,
                PipeItem::PutRead { .. } => !pre_put_read && lw_clean,
                PipeItem::PutWrite { .. }
                | PipeItem::PutWords { .. }
                | PipeItem::AtomicWrite { .. } => pre_overtakable,
                PipeItem::GetRead { .. } => pre_overtakable && rw_empty,
                PipeItem::AtomicRead { .. } => pre_overtakable && rw_empty && lock_free,
            };
            if enabled {
                out.push((Transition::Pipe(q, i), entry.ready));
            }
            // Rule 1: nothing behind an F may act.
            if matches!(entry.item, PipeItem::Fence) {
                break;
            }
            pre_put_read |= matches!(entry.item, PipeItem::PutRead { .. });
            pre_overtakable &= entry.item.overtakable();
            if pre_put_read && !pre_overtakable {
                break; // every later item is blocked by some older one
            }
        }
    }

    /// [`Machine::pipe_enabled`] under any mutation (and the reference its model walk is
    /// checked against in debug builds).
    fn pipe_enabled_any(&self, q: usize, target: NodeId, out: &mut Vec<(Transition, u64)>) {
        let qp = &self.qps[q];
        let lw_clean = qp.lw_only_completions();
        let rw_empty = qp.rw.is_empty();
        let lock_free = !self.atomic_busy[target.index()];
        let mut pre_put_read = false;
        let mut pre_overtakable = true;
        let mut behind_fence = false;
        let rw_all_empty = !self.mutated(Mutation::Rule13Stronger) || self.rw_empty_towards(target);
        for (i, entry) in qp.pipe.iter().enumerate() {
            let head = i == 0;
            let enabled = match entry.item {
                PipeItem::Fence if self.mutated(Mutation::Rule1Weaker) => true,
                PipeItem::Fence if self.mutated(Mutation::Rule1Stronger) => head && rw_empty,
                PipeItem::Fence => head,
                PipeItem::PutRead { .. } if self.mutated(Mutation::Rule2Weaker) => !pre_put_read,
                PipeItem::PutRead { .. } if self.mutated(Mutation::Rule2Stronger) => {
                    head && lw_clean
                }
                PipeItem::PutRead { .. } if self.mutated(Mutation::PutReadOvertakesPutRead) => {
                    lw_clean
                }
                PipeItem::PutRead { .. } => !pre_put_read && lw_clean,
                PipeItem::PutWrite { .. } | PipeItem::PutWords { .. }
                    if self.mutated(Mutation::Rule3Weaker) =>
                {
                    true
                }
                PipeItem::PutWrite { .. } | PipeItem::PutWords { .. }
                    if self.mutated(Mutation::Rule3Stronger) =>
                {
                    head
                }
                PipeItem::PutWrite { .. } | PipeItem::PutWords { .. } => pre_overtakable,
                PipeItem::Ack { .. } if self.mutated(Mutation::Rule5Weaker) => true,
                PipeItem::Ack { .. } if self.mutated(Mutation::Rule5Stronger) => head && rw_empty,
                PipeItem::Ack { .. } => head,
                PipeItem::GetRead { .. } if self.mutated(Mutation::Rule6Weaker) => pre_overtakable,
                PipeItem::GetRead { .. } if self.mutated(Mutation::Rule6Stronger) => {
                    head && rw_empty
                }
                PipeItem::GetRead { .. } => pre_overtakable && rw_empty && rw_all_empty,
                PipeItem::LocalWrite { .. } if self.mutated(Mutation::Rule7Weaker) => true,
                PipeItem::LocalWrite { .. } if self.mutated(Mutation::Rule7Stronger) => {
                    head && rw_empty
                }
                PipeItem::LocalWrite { .. } => head,
                PipeItem::AtomicRead { .. } if self.mutated(Mutation::Rule9Weaker) => {
                    pre_overtakable && rw_empty
                }
                PipeItem::AtomicRead { .. } if self.mutated(Mutation::Rule9Stronger) => {
                    head && rw_empty && lock_free
                }
                PipeItem::AtomicRead { .. } if self.mutated(Mutation::AtomicIgnoresOwnRw) => {
                    pre_overtakable && lock_free
                }
                PipeItem::AtomicRead { .. } => {
                    pre_overtakable && rw_empty && lock_free && rw_all_empty
                }
                PipeItem::AtomicWrite { .. } if self.mutated(Mutation::Rule12Stronger) => head,
                PipeItem::AtomicWrite { .. } => pre_overtakable,
            };
            // (Under `FenceLetsGetsPass`, behind an F only gets may act.)
            let passes = !behind_fence || matches!(entry.item, PipeItem::GetRead { .. });
            if enabled && passes {
                out.push((Transition::Pipe(q, i), entry.ready));
            }
            // Rule 1: nothing behind an F may act.
            if matches!(entry.item, PipeItem::Fence) && self.mutated(Mutation::FenceLetsGetsPass) {
                behind_fence = true;
                continue; // the F itself orders nothing for the gets behind it
            }
            if matches!(entry.item, PipeItem::Fence) && !self.mutated(Mutation::Rule1Weaker) {
                break;
            }
            pre_put_read |= matches!(entry.item, PipeItem::PutRead { .. });
            pre_overtakable &= entry.item.overtakable();
            if pre_put_read && !pre_overtakable && self.mutation.is_none() {
                break; // every later item is blocked by some older one
            }
        }
    }

    /// The commits of queue pair q's `rW` (rules 4 and 13).
    fn rw_enabled(&self, q: usize, out: &mut Vec<(Transition, u64)>) {
        let qp = &self.qps[q];
        if self.mutated(Mutation::Rule4Weaker) {
            for (i, entry) in qp.rw.iter().enumerate() {
                out.push((Transition::RemoteCommit(q, i), entry.ready));
            }
        } else if self.mutated(Mutation::Rule12Weaker) {
            // Atomic writes keep no place in rW: an entry commits once only atomic
            // writes are ahead of it.
            for (i, entry) in qp.rw.iter().enumerate() {
                out.push((Transition::RemoteCommit(q, i), entry.ready));
                if !matches!(entry.item, RemoteWrite::Atomic { .. }) {
                    break;
                }
            }
        } else if let Some(head) = qp.rw.front() {
            let blocked = self.mutated(Mutation::Rule4Stronger)
                && matches!(head.item, RemoteWrite::Put { .. })
                && !qp.pipe.is_empty();
            if !blocked {
                out.push((Transition::RemoteCommit(q, 0), head.ready));
            }
        }
    }

    /// Whether every queue pair's `rW` towards `node` is empty.
    fn rw_empty_towards(&self, node: NodeId) -> bool {
        (0..self.threads.len()).all(|t| self.qps[self.qp_index(t, node)].rw.is_empty())
    }

    /// Whether thread t's pending CPU operation may execute now.
    fn cpu_enabled(&self, t: usize, op: &Op) -> bool {
        let thread = &self.threads[t];
        match *op {
            // TSO: both wait for the store buffer to drain (unless a mutant says not).
            Op::Cas { .. } => thread.sb.is_empty() || self.mutated(Mutation::CasNoDrain),
            Op::Mfence => thread.sb.is_empty() || self.mutated(Mutation::MfenceNoop),
            Op::Wait { work_id } => !self.work_pending(t, work_id),
            Op::Test { .. }
            | Op::TestLoad { .. }
            | Op::Now
            | Op::Pause { .. }
            | Op::SetWriteAccess { .. }
            | Op::Disconnect { .. } => true,
            Op::WaitAny { base, mask } => self.first_complete(t, base, mask).is_some(),
            Op::Poll { node } => match self.qps.get(self.qp_index(t, node)) {
                Some(qp) => matches!(
                    qp.lw.front().map(|e| &e.item),
                    Some(LocalWriteEntry::Completion)
                ),
                None => true, // an unknown node: the step replies with an error
            },
            Op::GlobalFence { node } => {
                node.index() >= self.node_count() || self.fully_done_towards(t, node)
            }
            Op::Load { .. }
            | Op::LoadWords { .. }
            | Op::Store { .. }
            | Op::StoreWords { .. }
            | Op::Put { .. }
            | Op::PutInline { .. }
            | Op::PutWords { .. }
            | Op::Get { .. }
            | Op::GetWords { .. }
            | Op::Atomic { .. }
            | Op::Rfence { .. } => true,
        }
    }

    /// The position in thread t's store buffer of its oldest posted remote operation, if
    /// only stores are ahead of it (at least one: at the head it leaves as the head).
    pub(crate) fn post_behind_stores(&self, t: usize) -> Option<usize> {
        let sb = &self.threads[t].sb;
        let i = sb
            .iter()
            .position(|e| matches!(e.item, SbEntry::Remote { .. }))?;
        (i > 0).then_some(i)
    }

    /// rdmawait: some earlier operation of thread t with `work_id` is incomplete: still in
    /// the store buffer, in a pipe (a put completes when its ACK leaves the pipe), or a get
    /// or RMW whose local write has not reached memory.
    pub fn work_pending(&self, t: usize, work_id: WorkId) -> bool {
        let thread = &self.threads[t];
        let in_sb = thread.sb.iter().any(
            |e| matches!(&e.item, SbEntry::Remote { item, .. } if item.work_id() == Some(work_id)),
        );
        in_sb
            || self.active_qps_of(t).any(|q| {
                let qp = &self.qps[q];
                qp.pipe.iter().any(|e| e.item.work_id() == Some(work_id))
                    || qp.lw.iter().any(|e| {
                        matches!(e.item, LocalWriteEntry::Write { work_id: w, .. } if w == work_id)
                    })
            })
    }

    /// `wait_any`: the lowest bit i of `mask` whose work id `base + i` has no incomplete
    /// operation of thread t.
    pub fn first_complete(&self, t: usize, base: WorkId, mask: u64) -> Option<u64> {
        (0..64u64)
            .filter(|i| mask & (1 << i) != 0)
            .find(|&i| !self.work_pending(t, WorkId(base.0 + i as u32)))
    }

    /// The global-fence condition: every earlier operation of thread t towards `node` is
    /// fully done: none left in the store buffer, the pipe and `rW` empty, no pending `nlw`.
    pub fn fully_done_towards(&self, t: usize, node: NodeId) -> bool {
        let thread = &self.threads[t];
        let in_sb = thread
            .sb
            .iter()
            .any(|e| matches!(&e.item, SbEntry::Remote { target, .. } if *target == node));
        !in_sb && self.qps[self.qp_index(t, node)].drained()
    }
}

impl<P: Process> Machine<P> {
    /// Whether `transition` (enabled in this state) commutes with every transition that can
    /// be enabled on any path that does not take it, disables none and is disabled by none,
    /// and changes nothing the outcome shows: then exploring it alone from this state loses
    /// no final or stuck state (a persistent set of one; see `explore.rs`). Never claimed
    /// under a mutation. The cases:
    /// * a CPU step that only appends to its own store buffer or only waits (store, posts,
    ///   rfence, wait, poll, global fence, mfence);
    /// * a posted operation entering its pipe; rules 1 (a fence leaves the head) and 5 (an
    ///   ACK completes — only for processes that never `test` or `wait_any`, which could
    ///   see the put pending before it);
    /// * nothing on a machine whose processes may change write access (see `access.rs`);
    /// * steps on a word private to one thread (a library's scratch word: see
    ///   [`Machine::set_private`]) that nothing else can order against: the owner's load of
    ///   it, the flush of its store to it, and, while the owner waits for that very
    ///   operation, rule 7 and rule 8 of a get or RMW returning into it.
    pub fn is_invisible(&self, transition: Transition) -> bool {
        // A permission change decides whether posted puts run or fail: no step commutes
        // with it for sure, so none is claimed invisible.
        if self.mutation.is_some() || self.access_control {
            return false;
        }
        match transition {
            Transition::Cpu(t) => match &self.threads[t].next {
                Next::Pending(Op::Load { loc }) => {
                    self.private_to(*loc) == Some(t) && self.nic_writes_to(t, *loc) == 0
                }
                Next::Pending(op) if self.fails_at_post(t, op) => false,
                Next::Pending(op) => matches!(
                    op,
                    Op::Store { .. }
                        | Op::StoreWords { .. }
                        | Op::Put { .. }
                        | Op::PutInline { .. }
                        | Op::PutWords { .. }
                        | Op::Get { .. }
                        | Op::GetWords { .. }
                        | Op::Atomic { .. }
                        | Op::Rfence { .. }
                        | Op::Wait { .. }
                        | Op::Poll { .. }
                        | Op::GlobalFence { .. }
                        | Op::Mfence
                        | Op::Pause { .. }
                ),
                Next::Finished | Next::Crashed => false,
            },
            Transition::StoreBufferPost(_) => false,
            Transition::StoreBufferHead(t) => match self.threads[t].sb.front().map(|e| &e.item) {
                Some(SbEntry::Remote { .. }) => true,
                Some(SbEntry::Write { loc, .. }) => {
                    self.private_to(*loc) == Some(t)
                        && self.nic_writes_to(t, *loc) == 0
                        && !self.nic_reads_from(t, *loc)
                }
                None => false,
            },
            Transition::Pipe(q, i) => match &self.qps[q].pipe[i].item {
                PipeItem::Fence => i == 0,
                // A put's completion: `test` or `wait_any` could tell before from after.
                PipeItem::Ack { .. } => {
                    let (t, _) = self.qp_ends(q);
                    i == 0 && !self.threads[t].process.tests_completions()
                }
                PipeItem::LocalWrite { local, work_id, .. } => {
                    let (t, _) = self.qp_ends(q);
                    i == 0
                        && self.private_to(*local) == Some(t)
                        && self.blocked_on(t, *work_id)
                        && !self.qps[q]
                            .pipe
                            .iter()
                            .any(|e| matches!(e.item, PipeItem::PutRead { .. }))
                }
                _ => false,
            },
            Transition::LocalCommit(q, i) => {
                let (t, _) = self.qp_ends(q);
                let LocalWriteEntry::Write { loc, work_id, .. } = self.qps[q].lw[i].item else {
                    return false;
                };
                self.private_to(loc) == Some(t)
                    && self.blocked_on(t, work_id)
                    && self.nic_writes_to(t, loc) == 1
                    && !self.nic_reads_from(t, loc)
                    && !self.threads[t]
                        .sb
                        .iter()
                        .any(|e| matches!(e.item, SbEntry::Write { loc: l, .. } if l == loc))
            }
            Transition::RemoteCommit(..) => false,
        }
    }

    /// Whether thread t is blocked in a `wait` for `work_id`.
    fn blocked_on(&self, t: usize, work_id: WorkId) -> bool {
        matches!(self.threads[t].next, Next::Pending(Op::Wait { work_id: w }) if w == work_id)
    }

    /// How many pending NIC writes of thread t's operations will land in `loc` (gets and
    /// RMWs not yet returned, and their `nlw`s).
    fn nic_writes_to(&self, t: usize, loc: Loc) -> usize {
        let into = |item: &PipeItem| match item {
            PipeItem::GetRead { local, .. }
            | PipeItem::AtomicRead { local, .. }
            | PipeItem::LocalWrite { local, .. } => *local == loc,
            _ => false,
        };
        let in_sb = self.threads[t]
            .sb
            .iter()
            .filter(|e| matches!(&e.item, SbEntry::Remote { item, .. } if into(item)))
            .count();
        let in_qps: usize = self
            .active_qps_of(t)
            .map(|q| {
                let qp = &self.qps[q];
                qp.pipe.iter().filter(|e| into(&e.item)).count()
                    + qp.lw
                        .iter()
                        .filter(
                            |e| matches!(e.item, LocalWriteEntry::Write { loc: l, .. } if l == loc),
                        )
                        .count()
            })
            .sum();
        in_sb + in_qps
    }

    /// Whether some put of thread t has still to read `loc` (rule 2).
    fn nic_reads_from(&self, t: usize, loc: Loc) -> bool {
        let reads =
            |item: &PipeItem| matches!(item, PipeItem::PutRead { local, .. } if *local == loc);
        self.threads[t]
            .sb
            .iter()
            .any(|e| matches!(&e.item, SbEntry::Remote { item, .. } if reads(item)))
            || self
                .active_qps_of(t)
                .any(|q| self.qps[q].pipe.iter().any(|e| reads(&e.item)))
    }
}
