//! Which steps to explore from a state: persistent sets, built as stubborn sets.

use super::ModelConfig;
use super::state::{Msg, State, Step};

/// Where a stubborn set grows from: proposer p's local steps, or the execution at the
/// head of p's queue towards acceptor a.
#[derive(Clone, Copy, Debug)]
enum Seed {
    Local(usize),
    Exec(usize, usize),
}

impl State {
    /// The steps explored from this state: a persistent set, built as a stubborn set
    /// (Valmari; Godefroid's persistent sets) over the operations of the model. See
    /// [`State::closure`]. The state graph is acyclic (every CAS has a fresh id), so the
    /// selective search reaches every final state; agreement and validity are stable
    /// (decisions are only appended), so a state breaking them leads to a final state
    /// breaking them: preserving every final state is enough, checked by
    /// `the_reductions_keep_every_outcome`. Among the candidate sets: a singleton if there is
    /// one, else a proposer's local steps alone, else the smallest.
    pub(super) fn steps(&self, config: &ModelConfig) -> Vec<Step> {
        if !config.reduce {
            return self.all_steps(config);
        }
        let n = self.proposers.len();
        let acceptors = usize::from(config.acceptors);
        let seeds: Vec<Seed> = (0..n)
            .flat_map(|p| (0..acceptors).map(move |a| Seed::Exec(p, a)))
            .chain((0..n).map(Seed::Local))
            .filter(|&seed| match seed {
                Seed::Local(p) => self.local_enabled(config, p),
                Seed::Exec(p, a) => self.exec_enabled(config, p, a),
            })
            .collect();
        let mut sets = Vec::with_capacity(seeds.len());
        for seed in seeds {
            let set = self.closure(config, seed);
            if set.len() == 1 {
                return set;
            }
            sets.push((seed, set));
        }
        let local_only = sets.iter().position(|(seed, set)| {
            matches!(seed, Seed::Local(_)) && set.iter().all(|s| !matches!(s, Step::Execute { .. }))
        });
        match local_only {
            Some(i) => sets.swap_remove(i).1,
            None => sets
                .into_iter()
                .map(|(_, set)| set)
                .min_by_key(Vec::len)
                .unwrap_or_default(),
        }
    }

    fn exec_enabled(&self, config: &ModelConfig, p: usize, a: usize) -> bool {
        config.crashed != Some(a as u16) && !self.proposers[p].queue[a].is_empty()
    }

    fn local_enabled(&self, config: &ModelConfig, p: usize) -> bool {
        let r = &self.proposers[p];
        r.may_change_term(config) || r.done.iter().any(|d| !d.is_empty())
    }

    /// Whether proposer `q` may still post an operation for slot `slot`: it has a local
    /// step ahead (a completion to take, one to come, a term change) and has not moved
    /// past the slot. Rule (spent attempt): a slot proposer that posted its accept posts
    /// nothing more in that attempt (`on_cas` then only counts or aborts), so with no
    /// retry and no term change left it posts nothing more for the slot.
    fn may_post(&self, config: &ModelConfig, q: usize, slot: u32) -> bool {
        let r = &self.proposers[q];
        let live = |a: usize| config.crashed != Some(a as u16);
        let completing = |m: &Msg| !matches!(m, Msg::Write { .. });
        let spent = r.slot == slot
            && r.accepting
            && r.attempts >= config.attempts
            && r.term >= config.term_changes;
        r.slot <= slot
            && !spent
            && (r.may_change_term(config)
                || r.done.iter().any(|d| !d.is_empty())
                || (0..r.queue.len()).any(|a| live(a) && r.queue[a].iter().any(completing)))
    }

    /// The enabled steps of the stubborn set grown from `seed`.
    ///
    /// Dependencies (two steps enabled together whose order matters): a proposer's local
    /// steps (deliveries, a term change) with each other; at one acceptor, two
    /// proposers' CASes of one slot, and a proposer's value write with another's read of
    /// that buffer. Everything else commutes: an execution pops a queue's head and
    /// appends to a completion queue, a delivery pops a completion queue's head and
    /// appends to queues. The set is closed under: an execution in it brings in every
    /// other proposer's conflicting operation at that acceptor — queued (through the
    /// head of its queue, which must run first) or still to be posted (through that
    /// proposer's local steps, which post it); a local step of p brings in p's other
    /// local steps, and for a completion still to come (p's queue at a live acceptor
    /// holds a CAS or read, no completion from there is waiting), the execution at the
    /// head of that queue.
    ///
    /// Rule (invisible write): p's first value write into its buffer at acceptor a in a
    /// slot conflicts with nothing. A read of p's buffer at a is posted only after a word
    /// of a showed p's accept (a prediction only ever holds tags some word of that
    /// acceptor held), p's accept CAS at a runs behind its write on p's queue pair, and
    /// a buffer with stamp 0 was never written.
    fn closure(&self, config: &ModelConfig, seed: Seed) -> Vec<Step> {
        let n = self.proposers.len();
        let acceptors = usize::from(config.acceptors);
        let live = |a: usize| config.crashed != Some(a as u16);
        let mut local = vec![false; n];
        let mut exec = vec![false; n * acceptors];
        let mut work = vec![seed];
        while let Some(item) = work.pop() {
            match item {
                Seed::Local(p) => {
                    if std::mem::replace(&mut local[p], true) {
                        continue;
                    }
                    let r = &self.proposers[p];
                    for a in (0..acceptors).filter(|&a| live(a) && r.done[a].is_empty()) {
                        if r.queue[a].iter().any(|m| !matches!(m, Msg::Write { .. })) {
                            work.push(Seed::Exec(p, a));
                        }
                    }
                }
                Seed::Exec(p, a) => {
                    if std::mem::replace(&mut exec[p * acceptors + a], true) {
                        continue;
                    }
                    let head = self.proposers[p].queue[a]
                        .front()
                        .expect("an execution in the set has an operation queued");
                    for q in (0..n).filter(|&q| q != p) {
                        let queue = &self.proposers[q].queue[a];
                        let (queued, future) = match *head {
                            Msg::Cas { slot, .. } => (
                                queue
                                    .iter()
                                    .any(|m| matches!(*m, Msg::Cas { slot: s, .. } if s == slot)),
                                self.may_post(config, q, slot),
                            ),
                            Msg::Write { slot, .. } => {
                                let reads = |m: &Msg| {
                                    matches!(*m, Msg::Read { slot: s, proposer, .. }
                                        if s == slot && usize::from(proposer) == p)
                                };
                                let written = self.buffers[a][p][slot as usize].0 != 0;
                                (
                                    queue.iter().any(reads),
                                    written && self.may_post(config, q, slot),
                                )
                            }
                            Msg::Read { slot, proposer, .. } if usize::from(proposer) == q => (
                                queue
                                    .iter()
                                    .any(|m| matches!(*m, Msg::Write { slot: s, .. } if s == slot)),
                                self.may_post(config, q, slot),
                            ),
                            Msg::Read { .. } => (false, false),
                        };
                        // q's operations still to be posted at a run behind those queued
                        // there: the head of its queue is what must run first.
                        if queued || (future && !queue.is_empty()) {
                            work.push(Seed::Exec(q, a));
                        } else if future {
                            work.push(Seed::Local(q));
                        }
                    }
                }
            }
        }
        let mut steps = Vec::new();
        for p in 0..n {
            let r = &self.proposers[p];
            for a in 0..acceptors {
                if exec[p * acceptors + a] && live(a) {
                    steps.push(Step::Execute { p, a });
                }
                if local[p] && !r.done[a].is_empty() {
                    steps.push(Step::Deliver { p, a });
                }
            }
            if local[p] && r.may_change_term(config) {
                steps.push(Step::NewTerm { p });
            }
        }
        steps
    }

    /// Every enabled step.
    pub(super) fn all_steps(&self, config: &ModelConfig) -> Vec<Step> {
        let mut steps = Vec::new();
        for (p, proposer) in self.proposers.iter().enumerate() {
            for a in 0..usize::from(config.acceptors) {
                if !proposer.queue[a].is_empty() && config.crashed != Some(a as u16) {
                    steps.push(Step::Execute { p, a });
                }
                if !proposer.done[a].is_empty() {
                    steps.push(Step::Deliver { p, a });
                }
            }
            if proposer.may_change_term(config) {
                steps.push(Step::NewTerm { p });
            }
        }
        steps
    }
}
