//! The simulator's memory of what each queue pair enables, kept between steps.
//!
//! A step changes one queue pair's queues (or one thread's store buffer, which pushes into
//! one queue pair), yet [`Machine::enabled`] walks every item of every queue pair in use
//! at every step: with a value read as thousands of one-word gets in one pipe the walk was
//! quadratic in the value's words, and in the fault campaign it was half the run time.
//! [`Machine::enabled_cached`] gives the same list, recomputing a queue pair's part only
//! when it may have changed.
//!
//! Lemma (cache key): without a mutation, the steps queue pair q enables depend only on
//! q's own queues (pipe, `rW`, `lW`), its status, whether its target is up and whether
//! the target's atomic lock `L[n]` is taken (`transition.rs::qp_enabled`). Every change
//! of q's queues goes through `Machine::refresh_active` or `Machine::mark_active` (the set
//! of queue pairs in use needs them too), which add q to the machine's set of changed
//! queue pairs; the cache marks their parts stale before each use. The other three are
//! the part's key, compared at every use. Mutations may look further (another queue
//! pair's `rW`): under one the list is computed afresh. The cache lives beside the
//! machine, in the simulator: the explorer clones and hashes machines and never uses it.

use super::state::{Machine, QpStatus};
use super::transition::Transition;
use velos_rdma::Process;

/// What a queue pair's part of the list was computed under, besides its own queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    status: QpStatus,
    target_up: bool,
    lock_free: bool,
}

/// Enabled steps, each with the virtual time from which it may fire.
type Steps = Vec<(Transition, u64)>;

/// The simulator's memory of each queue pair's enabled steps: per queue pair, its steps
/// and the key they hold for (`None`: stale).
#[derive(Clone, Debug, Default)]
pub struct EnabledCache {
    parts: Vec<(Option<Key>, Steps)>,
}

impl EnabledCache {
    /// Marks queue pair q's part stale: its queues changed.
    fn stale(&mut self, q: usize) {
        if let Some(part) = self.parts.get_mut(q) {
            part.0 = None;
        }
    }
}

impl<P: Process> Machine<P> {
    /// The list [`Machine::enabled`] gives, with each queue pair's part recomputed only
    /// when it may have changed (lemma (cache key)). The simulator's step.
    pub fn enabled_cached(&mut self, cache: &mut EnabledCache, out: &mut Vec<(Transition, u64)>) {
        for q in self.changed_qps() {
            cache.stale(q);
        }
        self.clear_changed();
        if self.mutation.is_some() {
            self.enabled(out); // a mutation may look at other queue pairs: no key covers it
            return;
        }
        #[cfg(debug_assertions)]
        assert!(self.enabled_cache_agrees(cache), "lemma (cache key)");
        self.threads_enabled(out);
        cache.parts.resize_with(self.qps.len(), Default::default);
        for q in self.active_qps() {
            let key = self.cache_key(q);
            let (held, part) = &mut cache.parts[q];
            if *held != Some(key) {
                part.clear();
                self.qp_enabled(q, part);
                *held = Some(key);
            }
            out.extend_from_slice(part);
        }
    }

    /// Whether every part [`Machine::enabled_cached`] would reuse now is what a walk of its
    /// queue pair gives: the check of lemma (cache key), for tests (debug builds check it
    /// at every step). Vacuous under a mutation, where nothing is reused.
    pub fn enabled_cache_agrees(&self, cache: &EnabledCache) -> bool {
        if self.mutation.is_some() {
            return true;
        }
        self.reused_parts(cache).all(|(q, part)| {
            let mut walk = Vec::new();
            self.qp_enabled(q, &mut walk);
            walk == *part
        })
    }

    /// How much of the cache [`Machine::enabled_cached`] would reuse now: the queue pairs
    /// in use and those whose part it would take as it is (so that a test of the cache can
    /// show it was used).
    pub fn enabled_cache_reuse(&self, cache: &EnabledCache) -> (usize, usize) {
        (self.active_qps().count(), self.reused_parts(cache).count())
    }

    /// The queue pairs in use whose part [`Machine::enabled_cached`] would take as it is:
    /// unchanged since the cache last looked, and held under the current key.
    fn reused_parts<'a>(
        &'a self,
        cache: &'a EnabledCache,
    ) -> impl Iterator<Item = (usize, &'a Steps)> + 'a {
        let changed: Vec<usize> = self.changed_qps().collect();
        self.active_qps()
            .filter_map(move |q| match cache.parts.get(q) {
                Some((Some(held), part)) if !changed.contains(&q) && *held == self.cache_key(q) => {
                    Some((q, part))
                }
                _ => None,
            })
    }

    /// Queue pair q's key: what its enabled steps depend on besides its own queues.
    fn cache_key(&self, q: usize) -> Key {
        let (_, target) = self.qp_ends(q);
        Key {
            status: self.qps[q].status,
            target_up: self.is_up(target),
            lock_free: !self.atomic_busy[target.index()],
        }
    }
}
