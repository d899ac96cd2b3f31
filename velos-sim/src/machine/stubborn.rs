//! Stubborn sets for the explorer (Valmari's strong stubborn sets, Godefroid's persistent
//! sets): at a state, a set of enabled steps such that no step outside it, on any path that
//! takes none of it, depends on a step of it. Exploring only that set from the state loses
//! no final state, no stuck state and no violation of a stable invariant (see `explore.rs`
//! for the argument and the cycle proviso).
//!
//! # Agents and obligations
//! The machine's steps are grouped by the *agent* that takes them:
//! * `Cpu(t)` — thread t executes its pending operation (rules of `cpu.rs`);
//! * `Sb(t)` — the head of thread t's store buffer leaves it (flush or post);
//! * `Pipe(q)` — an item now in queue pair q's pipe acts (rules 1, 2, 3, 5, 6, 7, 9–12);
//! * `Fresh(q)` — an item that has still to enter q's pipe (from the store buffer, or not
//!   even posted yet) acts;
//! * `Rw(q)` — the head of q's `rW` commits (rules 4 and 13);
//! * `Lw(q)` — the first NIC local write of q's `lW` commits (rule 8).
//!
//! A set of agents `A` is closed under *obligations*: `X` in `A` forces `Y` into `A` when
//! * (D1, necessary enabling) `X` has a step that is disabled now, or does not exist yet, and
//!   `Y` may enable or create it: the holder of `L[n]` for a blocked atomic read, `Rw(q)` for
//!   a get or atomic read waiting for `rW` to drain, `Lw(q)` for a put's local read waiting
//!   for `lW`, the store buffer for new pipe items and the CPU for new store-buffer entries,
//!   the queue pairs that complete a work id a `wait` / `wait_any` waits for;
//! * (D2, dependency) `X` has an enabled step that `Y` may, now or later along a path on which
//!   no agent of `A` moves, fail to commute with, disable, or be disabled by: two accesses to
//!   one memory word of which one writes, two remote atomic reads towards one node (`L[n]`),
//!   a step that completes a work id and the CPU that may `test` or `wait_any` on it.
//!
//! The steps of `A` that are enabled are then a persistent set. Along a path that takes none
//! of them, an agent of `A` never moves: its enabled steps are excluded by definition, its
//! disabled or future steps stay disabled because whatever could enable them is in `A`
//! (D1). So only agents outside `A` move, and by D2 none of their steps depends on a step
//! of the set.
//!
//! # Footprints
//! The future of a thread is unknown (a process is a black box until it issues its next
//! operation), so a live thread may later access any word its CPU or its queue pairs can
//! reach. What the program declares narrows that: a word private to one thread
//! ([`Machine::set_private`]) is touched by that thread's agents only, and an atomic-only
//! word ([`Machine::set_atomic_only`]) only by remote atomic reads and their commits. New
//! work reaches a queue pair only through the store buffer, so a thread's future accesses
//! are those of `Fresh(q)`, and fresh items are held back in any of three ways: the pipe is
//! *sealed* (its present items, in the set, block every item that could arrive behind
//! them), the store buffer is in the set, or nothing is posted towards q and the CPU is in
//! the set. The closure takes whichever already holds, else the seal, else the store buffer.
//!
//! The dependency is derived from the model's premises; under a [`super::Mutation`] they do
//! not hold, so no reduction is made (every enabled step is returned). Neither is one made
//! on a machine whose processes may change write access (`Op::SetWriteAccess`), which
//! the obligations do not model.

use super::items::{LocalWriteEntry, PipeItem, RemoteWrite, SbEntry};
use super::state::{Machine, Next, QpStatus};
use super::transition::Transition;
use velos_rdma::{Loc, NodeId, Op, Process, WorkId};

/// What takes a step: a thread's CPU or store buffer, or one of a queue pair's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Agent {
    Cpu(usize),
    Sb(usize),
    Pipe(usize),
    Fresh(usize),
    Rw(usize),
    Lw(usize),
}

/// Dense numbering of the agents of a machine.
#[derive(Clone, Copy)]
struct Agents {
    threads: usize,
    qps: usize,
}

impl Agents {
    fn count(self) -> usize {
        2 * self.threads + 4 * self.qps
    }

    fn index(self, agent: Agent) -> usize {
        let (t, q) = (self.threads, self.qps);
        match agent {
            Agent::Cpu(i) => i,
            Agent::Sb(i) => t + i,
            Agent::Pipe(i) => 2 * t + i,
            Agent::Fresh(i) => 2 * t + q + i,
            Agent::Rw(i) => 2 * t + 2 * q + i,
            Agent::Lw(i) => 2 * t + 3 * q + i,
        }
    }

    fn agent(self, index: usize) -> Agent {
        let (t, q) = (self.threads, self.qps);
        assert!(index < self.count(), "agent index in range");
        if index < t {
            Agent::Cpu(index)
        } else if index < 2 * t {
            Agent::Sb(index - t)
        } else if index < 2 * t + q {
            Agent::Pipe(index - 2 * t)
        } else if index < 2 * t + 2 * q {
            Agent::Fresh(index - 2 * t - q)
        } else if index < 2 * t + 3 * q {
            Agent::Rw(index - 2 * t - 2 * q)
        } else {
            Agent::Lw(index - 2 * t - 3 * q)
        }
    }
}

/// The agent that takes a transition.
fn agent_of(transition: Transition) -> Agent {
    match transition {
        Transition::Cpu(t) => Agent::Cpu(t),
        Transition::StoreBufferHead(t) | Transition::StoreBufferPost(t) => Agent::Sb(t),
        Transition::Pipe(q, _) => Agent::Pipe(q),
        Transition::RemoteCommit(q, _) => Agent::Rw(q),
        Transition::LocalCommit(q, _) => Agent::Lw(q),
    }
}

/// Whether a step reads or writes the word it accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    Read,
    Write,
}

/// The obligations of one state, computed on demand.
struct Obligations<'a, P> {
    machine: &'a Machine<P>,
    enabled: &'a [(Transition, u64)],
    agents: Agents,
}

impl<P: Process> Machine<P> {
    /// A persistent set of this state: indices into `enabled` (the state's enabled steps,
    /// as [`Machine::enabled`] lists them), in order, never empty (condition D0). Among the
    /// sets closed under the obligations of the module documentation, one seeded by each
    /// agent with an enabled step, it is one with the fewest enabled steps. Under a
    /// mutation it is every enabled step.
    pub fn stubborn_set(&self, enabled: &[(Transition, u64)], out: &mut Vec<usize>) {
        assert!(
            !enabled.is_empty(),
            "D0: a stubborn set of a state that can move"
        );
        out.clear();
        // Under a mutation the premises the obligations rest on do not hold; under access
        // control a permission change decides whether posted puts run or fail.
        if self.mutation.is_some() || self.access_control {
            out.extend(0..enabled.len());
            return;
        }
        let agents = Agents {
            threads: self.threads.len(),
            qps: self.qps.len(),
        };
        let count = agents.count();
        let mut steps = vec![0usize; count];
        for &(t, _) in enabled {
            steps[agents.index(agent_of(t))] += 1;
        }
        let obligations = Obligations {
            machine: self,
            enabled,
            agents,
        };
        let mut cache: Vec<Option<Vec<usize>>> = vec![None; count];
        let mut best: Option<(usize, Vec<bool>)> = None;
        let mut member = vec![false; count];
        let mut work = Vec::new();
        let mut deferred = Vec::new();
        for seed in (0..count).filter(|&a| steps[a] > 0) {
            let bound = best.as_ref().map_or(usize::MAX, |(b, _)| *b);
            if steps[seed] >= bound {
                continue;
            }
            member.fill(false);
            member[seed] = true;
            work.clear();
            work.push(seed);
            deferred.clear();
            let mut size = steps[seed];
            loop {
                let a = match work.pop() {
                    Some(a) => a,
                    // Fresh items last: by then the cheapest way to hold them back is known.
                    None => match deferred.pop() {
                        None => break,
                        Some(q) => {
                            let chosen = obligations.fresh(q, |x| member[agents.index(x)]);
                            match chosen.map(|x| agents.index(x)) {
                                Some(b) if !member[b] => b,
                                _ => continue,
                            }
                        }
                    },
                };
                if let Agent::Fresh(q) = agents.agent(a) {
                    member[a] = true;
                    deferred.push(q);
                    continue;
                }
                if !member[a] {
                    member[a] = true;
                    size += steps[a];
                }
                let next = cache[a].get_or_insert_with(|| obligations.of(agents.agent(a)));
                for &b in next.iter() {
                    if !member[b] {
                        member[b] = true;
                        size += steps[b];
                        work.push(b);
                    }
                }
                if size >= bound {
                    break; // no better than the best so far
                }
            }
            if size < bound {
                assert!(work.is_empty() && deferred.is_empty(), "a closed set");
                best = Some((size, member.clone()));
                if size == 1 {
                    break; // nothing smaller exists
                }
            }
        }
        let (size, chosen) = best.expect("D0: some agent has an enabled step");
        out.extend(
            enabled
                .iter()
                .enumerate()
                .filter(|(_, (t, _))| chosen[agents.index(agent_of(*t))])
                .map(|(i, _)| i),
        );
        assert_eq!(out.len(), size, "the set holds its agents' enabled steps");
        assert!(!out.is_empty(), "D0: the set holds an enabled step");
    }
}

impl<P: Process> Obligations<'_, P> {
    /// The agents `agent` obliges to join a stubborn set with it (D1 and D2).
    fn of(&self, agent: Agent) -> Vec<usize> {
        let mut out = Vec::new();
        match agent {
            Agent::Cpu(t) => self.cpu(t, &mut out),
            Agent::Sb(t) => self.store_buffer(t, &mut out),
            Agent::Pipe(q) => self.pipe(q, &mut out),
            Agent::Fresh(_) => {} // chosen in the closure: `Obligations::fresh`
            Agent::Rw(q) => self.remote_writes(q, &mut out),
            Agent::Lw(q) => self.local_writes(q, &mut out),
        }
        let mut indices: Vec<usize> = out
            .into_iter()
            .filter(|&a| a != agent)
            .map(|a| self.agents.index(a))
            .collect();
        indices.sort_unstable();
        indices.dedup();
        assert!(
            indices.iter().all(|&i| i < self.agents.count()),
            "obligations name agents of this machine"
        );
        indices
    }

    fn is_enabled(&self, transition: Transition) -> bool {
        self.enabled.iter().any(|&(t, _)| t == transition)
    }

    /// Whether thread t may still issue operations (its process runs on a live node).
    fn alive(&self, t: usize) -> bool {
        let m = self.machine;
        matches!(m.threads[t].next, Next::Pending(_)) && m.is_up(m.threads[t].node)
    }

    /// Whether queue pair q's pipe and `rW` can still take steps: its target is up and the
    /// queue pair is not in error (faults are not steps of the explorer).
    fn qp_live(&self, q: usize) -> bool {
        let m = self.machine;
        let (_, target) = m.qp_ends(q);
        m.is_up(target) && m.qps[q].status == QpStatus::Ready
    }

    /// The remote operations in thread t's store buffer towards `node`.
    fn posted_towards(&self, t: usize, node: NodeId) -> impl Iterator<Item = &PipeItem> {
        self.machine.threads[t]
            .sb
            .iter()
            .filter_map(move |e| match &e.item {
                SbEntry::Remote { target, item } if *target == node => Some(item),
                _ => None,
            })
    }

    // ---- Cpu(t) -------------------------------------------------------------------------

    fn cpu(&self, t: usize, out: &mut Vec<Agent>) {
        let m = self.machine;
        let Next::Pending(op) = &m.threads[t].next else {
            return; // finished or crashed: it never moves again
        };
        if !m.is_up(m.threads[t].node) {
            return;
        }
        if self.is_enabled(Transition::Cpu(t)) {
            self.cpu_dependencies(t, op, out);
        } else {
            self.cpu_enablers(t, op, out);
        }
    }

    /// D2 for an enabled CPU step. Other agents never disable a CPU step: only the thread
    /// itself fills its store buffer or posts work, and a `cn` at the head of `lW` stays
    /// there until this thread polls it.
    fn cpu_dependencies(&self, t: usize, op: &Op, out: &mut Vec<Agent>) {
        let m = self.machine;
        let node = m.threads[t].node;
        let local = |loc: Loc| loc.node == node && m.word_index(loc).is_ok();
        match *op {
            // A load reads the newest store-buffer entry, else memory: the thread's own
            // flushes do not change what it reads.
            Op::Load { loc } if local(loc) => {
                self.accessors(loc, Access::Read, &[Agent::Sb(t)], out);
            }
            // A CAS needs an empty store buffer, which stays empty while the CPU waits.
            Op::Cas { loc, .. } if local(loc) => {
                self.accessors(loc, Access::Write, &[Agent::Sb(t)], out);
            }
            // Its reply depends on whether the work id is still pending.
            Op::Test { work_id } if m.work_pending(t, work_id) => {
                self.completers(t, work_id, out);
            }
            // A test and, once complete, a load: both dependencies.
            Op::TestLoad { work_id, loc } => {
                if m.work_pending(t, work_id) {
                    self.completers(t, work_id, out);
                }
                if local(loc) {
                    self.accessors(loc, Access::Read, &[Agent::Sb(t)], out);
                }
            }
            // Its reply is the lowest complete bit: a lower bit completing changes it.
            Op::WaitAny { base, mask } => {
                let first = m
                    .first_complete(t, base, mask)
                    .expect("an enabled wait_any has a complete bit");
                for i in (0..first).filter(|i| mask & (1 << i) != 0) {
                    self.completers(t, WorkId(base.0 + i as u32), out);
                }
            }
            // A post that fails at once appends to the thread's failures, as every step
            // that fails one of its operations does: the agents of its queue pairs and its
            // store buffer.
            _ if m.fails_at_post(t, op) => {
                out.push(Agent::Sb(t));
                for n in 0..m.node_count() {
                    let q = m.qp_index(t, NodeId(n as u16));
                    out.extend([Agent::Pipe(q), Agent::Fresh(q), Agent::Rw(q), Agent::Lw(q)]);
                }
            }
            // Posts and stores only append to the thread's own store buffer; wait and
            // global fence only observe what can no longer change; poll
            // takes a `cn` no other step looks at; now and pause do nothing here.
            _ => {}
        }
    }

    /// D1 for a disabled CPU step: whoever can make its premise true.
    fn cpu_enablers(&self, t: usize, op: &Op, out: &mut Vec<Agent>) {
        let m = self.machine;
        match *op {
            Op::Cas { .. } | Op::Mfence => out.push(Agent::Sb(t)),
            Op::Wait { work_id } => self.completers(t, work_id, out),
            Op::WaitAny { base, mask } => {
                for i in (0..64u64).filter(|i| mask & (1 << i) != 0) {
                    self.completers(t, WorkId(base.0 + i as u32), out);
                }
            }
            Op::Poll { node } => {
                let q = m.qp_index(t, node);
                out.extend([Agent::Pipe(q), Agent::Fresh(q), Agent::Lw(q)]);
            }
            Op::GlobalFence { node } => {
                let q = m.qp_index(t, node);
                out.extend([Agent::Sb(t), Agent::Pipe(q), Agent::Rw(q), Agent::Lw(q)]);
            }
            _ => unreachable!("only CAS, mfence, wait, wait_any, poll and gf block: {op:?}"),
        }
    }

    /// The agents whose steps may complete thread t's work id: a put completes when its ACK
    /// leaves the pipe (rule 5), a get or RMW when its local write lands (rule 8), anything
    /// when its post fails.
    fn completers(&self, t: usize, work_id: WorkId, out: &mut Vec<Agent>) {
        let m = self.machine;
        let by_kind = |q: usize, item: &PipeItem| match item {
            PipeItem::PutRead { .. }
            | PipeItem::PutWrite { .. }
            | PipeItem::PutWords { .. }
            | PipeItem::Ack { .. } => Agent::Pipe(q),
            PipeItem::GetRead { .. }
            | PipeItem::AtomicRead { .. }
            | PipeItem::AtomicWrite { .. }
            | PipeItem::LocalWrite { .. } => Agent::Lw(q),
            PipeItem::Fence => unreachable!("a fence carries no work id"),
        };
        for e in &m.threads[t].sb {
            if let SbEntry::Remote { target, item } = &e.item
                && item.work_id() == Some(work_id)
            {
                let q = m.qp_index(t, *target);
                if m.qp_failure(q, *target).is_some() {
                    out.push(Agent::Sb(t));
                } else if let Agent::Pipe(_) = by_kind(q, item) {
                    out.push(Agent::Fresh(q)); // the put's ACK, once it is in the pipe
                } else {
                    out.push(Agent::Lw(q));
                }
            }
        }
        for q in m.active_qps_of(t) {
            let qp = &m.qps[q];
            for e in &qp.pipe {
                if e.item.work_id() == Some(work_id) {
                    out.push(by_kind(q, &e.item));
                }
            }
            if qp.lw.iter().any(
                |e| matches!(e.item, LocalWriteEntry::Write { work_id: w, .. } if w == work_id),
            ) {
                out.push(Agent::Lw(q));
            }
        }
    }

    /// How many pieces of thread t's work id are still in flight (store buffer, pipes,
    /// pending local writes): the step that removes the last one completes it.
    fn pieces(&self, t: usize, work_id: WorkId) -> usize {
        let m = self.machine;
        let in_sb = m.threads[t]
            .sb
            .iter()
            .filter(|e| {
                matches!(&e.item, SbEntry::Remote { item, .. } if item.work_id() == Some(work_id))
            })
            .count();
        let in_qps: usize = m
            .active_qps_of(t)
            .map(|q| {
                let qp = &m.qps[q];
                qp.pipe
                    .iter()
                    .filter(|e| e.item.work_id() == Some(work_id))
                    .count()
                    + qp.lw
                        .iter()
                        .filter(|e| {
                            matches!(e.item, LocalWriteEntry::Write { work_id: w, .. } if w == work_id)
                        })
                        .count()
            })
            .sum();
        in_sb + in_qps
    }

    /// The CPU of thread t, if the step of queue pair q about to complete `work_id` may
    /// change what a later `test` or `wait_any` of it replies. Not when the CPU is blocked
    /// until that very step: in a `wait` for the same work id (pending until the step), or
    /// in a global fence towards q's node (q does not drain before the step).
    fn completion_observer(&self, t: usize, q: usize, work_id: WorkId, out: &mut Vec<Agent>) {
        let m = self.machine;
        if !self.alive(t) || self.pieces(t, work_id) != 1 {
            return;
        }
        let (_, target) = m.qp_ends(q);
        let blocked = match m.threads[t].next {
            Next::Pending(Op::Wait { work_id: w }) => w == work_id,
            Next::Pending(Op::GlobalFence { node }) => node == target,
            _ => false,
        };
        if !blocked {
            out.push(Agent::Cpu(t));
        }
    }

    // ---- Sb(t) --------------------------------------------------------------------------

    fn store_buffer(&self, t: usize, out: &mut Vec<Agent>) {
        let m = self.machine;
        if !m.is_up(m.threads[t].node) {
            return;
        }
        match m.threads[t].sb.front().map(|e| &e.item) {
            // D1: new entries come from the CPU.
            None if self.alive(t) => out.push(Agent::Cpu(t)),
            None => {}
            // D2: the flush writes the word. The thread's own loads read the same value
            // before and after it, and its CAS or mfence waits for the buffer to drain.
            Some(SbEntry::Write { loc, .. }) => {
                self.accessors(*loc, Access::Write, &[Agent::Cpu(t)], out);
            }
            // Entering the tail of a pipe commutes with every step of that queue pair (no
            // premise looks at newer items); a failing post completes its work id.
            Some(SbEntry::Remote { target, .. }) => {
                let q = m.qp_index(t, *target);
                if m.qp_failure(q, *target).is_some() && self.alive(t) {
                    out.push(Agent::Cpu(t));
                }
            }
        }
    }

    // ---- Pipe(q) ------------------------------------------------------------------------

    fn pipe(&self, q: usize, out: &mut Vec<Agent>) {
        let m = self.machine;
        if !self.qp_live(q) {
            return; // nothing on it will ever act
        }
        let (_, target) = m.qp_ends(q);
        let qp = &m.qps[q];
        let mut pre_put_read = false;
        let mut pre_overtakable = true;
        for (i, entry) in qp.pipe.iter().enumerate() {
            if self.is_enabled(Transition::Pipe(q, i)) {
                self.pipe_dependencies(q, &entry.item, out);
            } else {
                // D1. An item blocked by an older item of this pipe waits for this agent
                // itself; the other premises name who can make them true.
                match entry.item {
                    PipeItem::PutRead { .. } if !pre_put_read => out.push(Agent::Lw(q)),
                    PipeItem::GetRead { .. } if pre_overtakable => out.push(Agent::Rw(q)),
                    PipeItem::AtomicRead { .. } if pre_overtakable => {
                        out.push(Agent::Rw(q));
                        if m.atomic_busy[target.index()] {
                            self.lock_holders(target, out);
                        }
                    }
                    _ => {}
                }
            }
            if matches!(entry.item, PipeItem::Fence) {
                break; // rule 1: nothing behind an F acts before it leaves
            }
            pre_put_read |= matches!(entry.item, PipeItem::PutRead { .. });
            pre_overtakable &= entry.item.overtakable();
        }
    }

    /// `Fresh(q)`: the items that may still enter pipe q. In a set, none of them may act
    /// before its steps, which holds in any of three ways: the present items, frozen
    /// (`Pipe(q)` in the set), block them (the pipe is sealed); or the store buffer does
    /// not move (`Sb(t)` in the set, and the CPU when the buffer is empty); or nothing is
    /// posted towards q's node and the CPU does not move (`Cpu(t)` in the set). The first
    /// that already holds for `member` costs nothing; otherwise the seal, else the store
    /// buffer. `None` when no fresh item can act at all.
    fn fresh(&self, q: usize, member: impl Fn(Agent) -> bool) -> Option<Agent> {
        let m = self.machine;
        let (t, target) = m.qp_ends(q);
        let posted = self.posted_towards(t, target).next().is_some();
        if !(posted || self.alive(t)) || !self.qp_live(q) {
            return None; // none will come, or none will ever act
        }
        let sealed = self.sealed(q);
        if (sealed && member(Agent::Pipe(q)))
            || member(Agent::Sb(t))
            || (!posted && member(Agent::Cpu(t)))
        {
            return None;
        }
        Some(if sealed { Agent::Pipe(q) } else { Agent::Sb(t) })
    }

    /// Whether no item that can still enter pipe q may act before the present ones move:
    /// an F blocks everything behind it (rule 1); a P0 blocks every later P0 (rule 2) and is
    /// not overtakable; any item outside {ACK, G0, LW} blocks every later P1, G0, A0 and F
    /// (rules 1, 3, 6, 9–11). Only P0 may pass it, and only a thread that puts from memory
    /// posts P0s.
    fn sealed(&self, q: usize) -> bool {
        let m = self.machine;
        let pipe = &m.qps[q].pipe;
        if pipe
            .iter()
            .any(|e| matches!(e.item, PipeItem::PutRead { .. } | PipeItem::Fence))
        {
            return true;
        }
        if pipe.iter().all(|e| e.item.overtakable()) {
            return false;
        }
        !self.fresh_put_read(q)
    }

    /// Whether a P0 may still enter pipe q: one is posted, or the thread may post one.
    fn fresh_put_read(&self, q: usize) -> bool {
        let m = self.machine;
        let (t, target) = m.qp_ends(q);
        let posted = self
            .posted_towards(t, target)
            .any(|item| matches!(item, PipeItem::PutRead { .. }));
        posted || (self.alive(t) && m.threads[t].process.puts_from_memory())
    }

    /// D2 for an enabled pipe item of queue pair q.
    fn pipe_dependencies(&self, q: usize, item: &PipeItem, out: &mut Vec<Agent>) {
        let m = self.machine;
        let (t, target) = m.qp_ends(q);
        let me = [Agent::Pipe(q)];
        match *item {
            // Rule 2 reads a local word; `lW` stays clean (only rule 7 of this pipe dirties it).
            PipeItem::PutRead { local, .. } => self.accessors(local, Access::Read, &me, out),
            // Rule 5 may complete the put's work id.
            PipeItem::Ack { work_id } => self.completion_observer(t, q, work_id, out),
            // Rule 6 reads the remote word and needs `rW` empty, which only this queue
            // pair's items fill; a fresh P1 or A0 may overtake the G0 unless an item that is
            // not overtakable blocks it.
            PipeItem::GetRead { remote, .. } => {
                self.accessors(remote, Access::Read, &me, out);
                if m.qps[q].pipe.iter().all(|e| e.item.overtakable()) {
                    out.push(Agent::Fresh(q));
                }
            }
            // Rule 7 dirties `lW`, which a fresh P0 behind it may need clean (rule 2), unless
            // a P0 or an F in the pipe holds every fresh P0 back.
            PipeItem::LocalWrite { .. } => {
                let held = m.qps[q]
                    .pipe
                    .iter()
                    .any(|e| matches!(e.item, PipeItem::PutRead { .. } | PipeItem::Fence));
                if self.fresh_put_read(q) && !held {
                    out.push(Agent::Fresh(q));
                }
            }
            // Rules 9–11 read the remote word and may take `L[n]`, which every other atomic
            // read towards the node needs free.
            PipeItem::AtomicRead { remote, .. } => {
                self.accessors(remote, Access::Read, &me, out);
                self.atomic_readers(target, q, out);
            }
            // Rule 12 never completes its RMW: the LW it was created with is still behind it
            // (rule 7 acts at the head only).
            PipeItem::AtomicWrite { work_id, .. } => {
                assert!(
                    self.pieces(t, work_id) >= 2,
                    "rules 10/11: an AW is followed by the LW of its RMW"
                );
            }
            // Rules 1 and 3 touch only this queue pair's buffers: a push at the tail of `rW`
            // commutes with the commit at its head, and the premise it may falsify (rW
            // empty) belongs to older items of this same pipe; newer ones are blocked.
            PipeItem::Fence | PipeItem::PutWrite { .. } | PipeItem::PutWords { .. } => {}
        }
    }

    /// D1 for an atomic read blocked by `L[n]`: the queue pairs whose atomic holds it (its AW
    /// in the pipe, rule 12, or its nraw in `rW`, rule 13). If none is found (a fault freed
    /// the write but not the lock), every queue pair towards n.
    fn lock_holders(&self, node: NodeId, out: &mut Vec<Agent>) {
        let m = self.machine;
        let before = out.len();
        for t in 0..m.threads.len() {
            let q = m.qp_index(t, node);
            let qp = &m.qps[q];
            let holds = qp
                .pipe
                .iter()
                .any(|e| matches!(e.item, PipeItem::AtomicWrite { .. }))
                || qp
                    .rw
                    .iter()
                    .any(|e| matches!(e.item, RemoteWrite::Atomic { .. }));
            if holds {
                out.extend([Agent::Pipe(q), Agent::Rw(q)]);
            }
        }
        if out.len() == before {
            for t in 0..m.threads.len() {
                let q = m.qp_index(t, node);
                out.extend([Agent::Pipe(q), Agent::Rw(q)]);
            }
        }
    }

    /// D2 of an atomic read towards `node` through `L[n]`: every other queue pair towards
    /// the node that holds, or may later hold, an atomic read.
    fn atomic_readers(&self, node: NodeId, me: usize, out: &mut Vec<Agent>) {
        let m = self.machine;
        for t in 0..m.threads.len() {
            let q = m.qp_index(t, node);
            if q == me || !self.qp_live(q) {
                continue;
            }
            let is_atomic = |item: &PipeItem| matches!(item, PipeItem::AtomicRead { .. });
            if m.qps[q].pipe.iter().any(|e| is_atomic(&e.item)) {
                out.push(Agent::Pipe(q));
            }
            if self.alive(t) || self.posted_towards(t, node).any(is_atomic) {
                out.push(Agent::Fresh(q));
            }
        }
    }

    // ---- Rw(q), Lw(q) -------------------------------------------------------------------

    fn remote_writes(&self, q: usize, out: &mut Vec<Agent>) {
        let m = self.machine;
        // `rW` commits whenever the target is up, whatever the queue pair's status.
        if !m.is_up(m.qp_ends(q).1) {
            return;
        }
        match m.qps[q].rw.front().map(|e| &e.item) {
            // D1: new entries come from rules 3 and 12 of this queue pair's items.
            None => {
                let writes = |e: &PipeItem| {
                    matches!(
                        e,
                        PipeItem::PutRead { .. }
                            | PipeItem::PutWrite { .. }
                            | PipeItem::PutWords { .. }
                            | PipeItem::AtomicRead { .. }
                            | PipeItem::AtomicWrite { .. }
                    )
                };
                if m.qps[q].pipe.iter().any(|e| writes(&e.item)) {
                    out.push(Agent::Pipe(q));
                }
                out.push(Agent::Fresh(q));
            }
            // Rule 13 on an atomic-only word: every other access to the word is an atomic
            // read towards its node or another atomic's commit, and both wait for `L[n]`,
            // which this atomic holds until this very step.
            Some(RemoteWrite::Atomic { loc, .. }) if m.is_atomic_only(*loc) => {}
            // Rules 4 and 13 write the word; freeing `L[n]` only enables atomic reads.
            Some(RemoteWrite::Put { loc, .. } | RemoteWrite::Atomic { loc, .. }) => {
                self.accessors(*loc, Access::Write, &[Agent::Rw(q)], out);
            }
        }
    }

    fn local_writes(&self, q: usize, out: &mut Vec<Agent>) {
        let m = self.machine;
        let (t, _) = m.qp_ends(q);
        let first = m.qps[q]
            .lw
            .iter()
            .find(|e| !matches!(e.item, LocalWriteEntry::Completion));
        match first.map(|e| &e.item) {
            // D1: new local writes come from rule 7 of this queue pair's items.
            None if self.qp_live(q) => {
                let returns = |e: &PipeItem| {
                    matches!(
                        e,
                        PipeItem::GetRead { .. }
                            | PipeItem::AtomicRead { .. }
                            | PipeItem::LocalWrite { .. }
                    )
                };
                if m.qps[q].pipe.iter().any(|e| returns(&e.item)) {
                    out.push(Agent::Pipe(q));
                }
                out.push(Agent::Fresh(q));
            }
            None => {}
            // Rule 8 writes the word and may complete the work id.
            Some(LocalWriteEntry::Write { loc, work_id, .. }) => {
                self.accessors(*loc, Access::Write, &[Agent::Lw(q)], out);
                self.completion_observer(t, q, *work_id, out);
            }
            Some(LocalWriteEntry::Completion) => unreachable!("the first non-cn entry"),
        }
    }

    // ---- memory words -------------------------------------------------------------------

    /// D2 of a step that accesses `loc` (`Write`: any other access conflicts; `Read`: only
    /// writes do): every agent that may access it now or later, except those in `exempt`
    /// (whose accesses the caller showed to commute). Per node m of the word:
    /// * a live thread on m: its CPU (load, CAS), its store buffer (flush), its queue pairs'
    ///   pipes (a put's local read) and `lW` (a get's or RMW's local write);
    /// * any thread's queue pair towards m: its pipe (remote reads of get and atomics) and
    ///   its `rW` (commits of puts and atomics);
    /// * a finished thread's agents only for the operations it has still in flight;
    /// * narrowed to the owner's agents for a private word, to atomic reads and commits for
    ///   an atomic-only word.
    fn accessors(&self, loc: Loc, access: Access, exempt: &[Agent], out: &mut Vec<Agent>) {
        let m = self.machine;
        let node = loc.node;
        let owner = m.private_to(loc);
        let atomic_only = m.is_atomic_only(loc);
        let reads_conflict = access == Access::Write;
        let mut found = Vec::new();
        for t in (0..m.threads.len()).filter(|&t| owner.is_none_or(|o| o == t)) {
            let alive = self.alive(t);
            let sb = &m.threads[t].sb;
            if m.threads[t].node == node && !atomic_only {
                // CPU loads (reads) and CASes (writes): a live CPU may issue either.
                if alive {
                    found.push(Agent::Cpu(t));
                }
                // Stores still to come are issued by the CPU, above.
                let flushes = sb
                    .iter()
                    .any(|e| matches!(e.item, SbEntry::Write { loc: l, .. } if l == loc));
                if flushes {
                    found.push(Agent::Sb(t));
                }
                for n in 0..m.node_count() {
                    let target = NodeId(n as u16);
                    let q = m.qp_index(t, target);
                    let qp = &m.qps[q];
                    let reads_local = |i: &PipeItem| matches!(i, PipeItem::PutRead { local, .. } if *local == loc);
                    if reads_conflict && qp.pipe.iter().any(|e| reads_local(&e.item)) {
                        found.push(Agent::Pipe(q));
                    }
                    if reads_conflict
                        && ((alive && m.threads[t].process.puts_from_memory())
                            || self.posted_towards(t, target).any(reads_local))
                    {
                        found.push(Agent::Fresh(q));
                    }
                    let writes_local = |i: &PipeItem| match i {
                        PipeItem::GetRead { local, .. }
                        | PipeItem::AtomicRead { local, .. }
                        | PipeItem::LocalWrite { local, .. } => *local == loc,
                        _ => false,
                    };
                    let landing = qp.lw.iter().any(
                        |e| matches!(e.item, LocalWriteEntry::Write { loc: l, .. } if l == loc),
                    );
                    if landing || qp.pipe.iter().any(|e| writes_local(&e.item)) {
                        found.push(Agent::Lw(q));
                    }
                    if alive || self.posted_towards(t, target).any(writes_local) {
                        found.push(Agent::Fresh(q));
                    }
                }
            }
            let q = m.qp_index(t, node);
            let qp = &m.qps[q];
            // A queue pair in error or refused still commits its `rW` (target up).
            let committing = qp.rw.iter().any(|e| match e.item {
                RemoteWrite::Put { loc: l, .. } | RemoteWrite::Atomic { loc: l, .. } => l == loc,
            });
            if !self.qp_live(q) {
                if committing && m.is_up(node) {
                    found.push(Agent::Rw(q));
                }
                continue;
            }
            let reads_remote = |i: &PipeItem| match i {
                PipeItem::GetRead { remote, .. } => !atomic_only && *remote == loc,
                PipeItem::AtomicRead { remote, .. } => *remote == loc,
                _ => false,
            };
            if reads_conflict && qp.pipe.iter().any(|e| reads_remote(&e.item)) {
                found.push(Agent::Pipe(q));
            }
            if reads_conflict && (alive || self.posted_towards(t, node).any(reads_remote)) {
                found.push(Agent::Fresh(q));
            }
            let writes_remote = |i: &PipeItem| match i {
                PipeItem::PutRead { .. }
                | PipeItem::PutWrite { .. }
                | PipeItem::PutWords { .. } => !atomic_only && i.may_write_remote(loc),
                PipeItem::AtomicRead { .. } | PipeItem::AtomicWrite { .. } => {
                    i.may_write_remote(loc)
                }
                _ => false,
            };
            if committing || qp.pipe.iter().any(|e| writes_remote(&e.item)) {
                found.push(Agent::Rw(q));
            }
            if alive || self.posted_towards(t, node).any(writes_remote) {
                found.push(Agent::Fresh(q));
            }
        }
        out.extend(found.into_iter().filter(|a| !exempt.contains(a)));
    }
}
