//! Random schedules for a litmus test's real executions, to diversify interleavings.
//! Threads released together by a barrier on a real machine mostly run in one order (the
//! order they were started in, offset by how long each takes to wake up), so executions
//! start the threads in a random order and pause them at random. A pause is legal in every
//! execution the model describes (a thread may be slow before any operation), so it never
//! makes a forbidden outcome possible.

use velos_rdma::{Op, Process, Reply, Step};
use velos_sim::litmus::program::LitmusThread;
use velos_sim::rng::Rng;

/// The largest start offset of execution `run`, in nanoseconds: none, then 2 µs, 20 µs,
/// 200 µs and 2 ms in turn, so that both a fast NIC (µs per operation) and an emulated one
/// (tens of µs per operation, slow thread wake-ups) see offsets across an operation and
/// across a whole thread.
pub(super) fn scale_ns(run: u64) -> u64 {
    [0, 2_000, 20_000, 200_000, 2_000_000][(run % 5) as usize]
}

/// A random order of `n` threads: `order[i]` is started `i`-th.
pub(super) fn order(n: usize, rng: &mut Rng) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    order
}

/// A litmus thread that pauses before its first operation for a uniform time up to
/// `scale_ns`, and before each later one, with probability 1/2, up to an eighth of that.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Jittered {
    /// The thread.
    pub(super) inner: LitmusThread,
    rng: Rng,
    scale_ns: u64,
    started: bool,
    /// The thread's operation, held back while a pause runs.
    held: Option<Op>,
}

impl Jittered {
    /// `inner` with pauses scaled by `scale_ns`, drawn from `seed` (no pause for 0).
    pub(super) fn new(inner: LitmusThread, seed: u64, scale_ns: u64) -> Jittered {
        Jittered {
            inner,
            rng: Rng::new(seed),
            scale_ns,
            started: false,
            held: None,
        }
    }
}

impl Process for Jittered {
    fn resume(&mut self, reply: Reply) -> Step {
        if let Some(op) = self.held.take() {
            // `reply` answers the pause.
            return Step::Op(op);
        }
        match self.inner.resume(reply) {
            Step::Op(op) if self.scale_ns > 0 => {
                let first = !std::mem::replace(&mut self.started, true);
                let most = if first {
                    self.scale_ns
                } else if self.rng.below(2) == 0 {
                    self.scale_ns / 8
                } else {
                    return Step::Op(op);
                };
                self.held = Some(op);
                Step::Op(Op::Pause {
                    ns: self.rng.below(most + 1),
                })
            }
            step => step,
        }
    }

    fn polls(&self) -> bool {
        self.inner.polls()
    }

    fn puts_from_memory(&self) -> bool {
        self.inner.puts_from_memory()
    }

    fn tests_completions(&self) -> bool {
        self.inner.tests_completions()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use velos_rdma::{Loc, NodeId};
    use velos_sim::litmus::program::Compiled;

    /// Drives a process with `Done` / value replies; returns the operations it issued.
    fn ops_of(mut p: impl Process) -> Vec<Op> {
        let mut ops = Vec::new();
        let mut reply = Reply::Start;
        while let Step::Op(op) = p.resume(reply) {
            reply = match op {
                Op::Load { .. } => Reply::Value(7),
                _ => Reply::Done,
            };
            ops.push(op);
        }
        ops
    }

    #[test]
    fn pauses_are_inserted_and_the_thread_is_unchanged() {
        let x = Loc::word(NodeId(0), 0);
        let code: Vec<Compiled> = (0..20)
            .map(|v| Compiled::op(Op::Store { loc: x, value: v }))
            .collect();
        let thread = LitmusThread::new(code, 0);
        let plain = ops_of(thread.clone());
        assert_eq!(ops_of(Jittered::new(thread.clone(), 1, 0)), plain);
        let jittered = ops_of(Jittered::new(thread, 1, 8_000));
        let pauses: Vec<u64> = jittered
            .iter()
            .filter_map(|op| match op {
                Op::Pause { ns } => Some(*ns),
                _ => None,
            })
            .collect();
        assert!(matches!(jittered[0], Op::Pause { .. }), "a start offset");
        assert!(pauses.len() > 2 && pauses.len() < 20, "{pauses:?}");
        assert!(pauses[0] <= 8_000 && pauses[1..].iter().all(|&ns| ns <= 1_000));
        let rest: Vec<Op> = jittered
            .into_iter()
            .filter(|op| !matches!(op, Op::Pause { .. }))
            .collect();
        assert_eq!(rest, plain, "the thread's own operations, in order");
    }

    #[test]
    fn orders_are_permutations_and_vary() {
        let mut rng = Rng::new(5);
        let orders: Vec<Vec<usize>> = (0..20).map(|_| order(3, &mut rng)).collect();
        for o in &orders {
            let mut sorted = o.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![0, 1, 2]);
        }
        assert!(orders.iter().any(|o| o[0] != orders[0][0]), "{orders:?}");
        assert_eq!(order(0, &mut rng), Vec::<usize>::new());
    }
}
