//! The engine's own CPU on the leader's critical path, to charge on top of virtual time.
//!
//! Virtual time charges each operation the leader executes (a load, a post, a doorbell)
//! but not the engine's computation between two operations (its [`Replica::resume`] and
//! [`Replica::propose`] calls), which a real NIC waits for. The measurement:
//!
//! 1. During the simulated run the leader's replica runs inside [`Recorded`], which keeps
//!    every reply it is resumed with; the driver adds the proposals it hands over
//!    ([`Tape::propose`]). A clone of the replica is taken before the first measured
//!    proposal.
//! 2. Afterwards the inputs are replayed into copies of that clone on one thread, without
//!    any backend ([`Tape::replay`]), and the thread's CPU time
//!    ([`cpu_time::ThreadTime`]) is read at the boundaries of each proposal's
//!    [`Window`]. The replay checks that it retraces the run: every proposal taken with
//!    its id, every decision reported after the same input.
//! 3. Each boundary-to-boundary segment keeps its fastest time over the replays (best of
//!    `replays`: the work is identical, the rest is the machine's noise), minus the cost
//!    of one clock reading.
//!
//! A window runs from the proposal to the leader's step after which it reports the
//! decision. It is split by the leader's virtual times: the steps before the post of the
//! accept CAS that completed the majority (the turn and the posting are sequential CPU),
//! then the steps while the CAS round is in flight (the leader polls; on a NIC that CPU
//! overlaps the round trip), then, from the last poll before the majority's completion
//! (one straddling poll, counted whole) to the decision, the steps that notice it. The
//! first and last segments are the critical path; all three together are every engine
//! step between the proposal and the decision.

use anyhow::{Context, ensure};
use cpu_time::ThreadTime;
use velos_core::log::Replica;
use velos_rdma::{Process, Reply, Step};

/// The leader's replica, recording the replies it is resumed with while `tape` is set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Recorded {
    /// The engine.
    pub(super) replica: Replica,
    /// Its inputs since recording started, if it did.
    pub(super) tape: Option<Vec<Input>>,
}

impl Recorded {
    pub(super) fn new(replica: Replica) -> Recorded {
        Recorded {
            replica,
            tape: None,
        }
    }

    /// Inputs recorded so far.
    pub(super) fn recorded(&self) -> usize {
        self.tape.as_ref().map_or(0, Vec::len)
    }
}

impl Process for Recorded {
    fn resume(&mut self, reply: Reply) -> Step {
        if let Some(tape) = &mut self.tape {
            tape.push(Input::Resume(reply.clone()));
        }
        self.replica.resume(reply)
    }

    fn polls(&self) -> bool {
        self.replica.polls()
    }

    fn puts_from_memory(&self) -> bool {
        self.replica.puts_from_memory()
    }

    fn tests_completions(&self) -> bool {
        self.replica.tests_completions()
    }

    fn changes_write_access(&self) -> bool {
        self.replica.changes_write_access()
    }
}

/// One input of the leader's replica.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Input {
    /// A proposal of this value, taken with this id.
    Propose(Vec<u8>, u64),
    /// The reply to its previous operation.
    Resume(Reply),
}

/// One measured proposal's inputs: from its `Propose` at `start` to the `Resume` after
/// which the leader reported it decided (`ends`' last), cut into consecutive segments.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Window {
    /// Index of the `Propose` input.
    pub(super) start: usize,
    /// Per segment: its last input (inclusive; increasing) and whether it is on the
    /// critical path.
    pub(super) ends: Vec<(usize, bool)>,
}

impl Window {
    /// The window of a proposal at input `start` whose leader resumes on the way are
    /// `steps` (input index, virtual time of the step; the last one reported the
    /// decision), with the majority's accept CAS posted at `majority_posted` and the
    /// majority complete at `majority_done` (`None`: phases unknown, the whole window
    /// counts).
    pub(super) fn new(
        start: usize,
        steps: &[(usize, u64)],
        majority: Option<(u64, u64)>,
    ) -> Option<Window> {
        let &(last, _) = steps.last()?;
        if steps.first().is_some_and(|&(i, _)| i <= start) {
            return None;
        }
        let whole = Window {
            start,
            ends: vec![(last, true)],
        };
        let Some((posted, done)) = majority else {
            return Some(whole);
        };
        // The last input before the majority CAS executes (it chose that post).
        let before_post = steps
            .iter()
            .take_while(|&&(_, t)| t < posted)
            .last()
            .map_or(start, |&(i, _)| i);
        // The first step at or after the majority's completion, and the poll before it.
        let first_after = steps.iter().position(|&(_, t)| t >= done);
        let notice_from = match first_after {
            Some(k) if k > 0 => steps[k - 1].0,
            Some(_) => steps[0].0,
            None => last,
        };
        let window = if notice_from <= before_post + 1 {
            whole
        } else {
            Window {
                start,
                ends: vec![(before_post, true), (notice_from - 1, false), (last, true)],
            }
        };
        assert!(
            window.ends.windows(2).all(|w| w[0].0 < w[1].0) && window.ends[0].0 >= start,
            "segments in order: {window:?}"
        );
        Some(window)
    }

    /// Inputs of the window on the critical path, and in all.
    fn inputs(&self) -> (u64, u64) {
        let mut from = self.start;
        let (mut path, mut all) = (0, 0);
        for &(end, on_path) in &self.ends {
            let n = (end + 1 - from) as u64;
            all += n;
            if on_path {
                path += n;
            }
            from = end + 1;
        }
        (path, all)
    }
}

/// The engine CPU of one measured proposal (ns, best of the replays).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Charge {
    /// On the critical path.
    pub(super) path_ns: u64,
    /// Every engine step from the proposal to the decision.
    pub(super) all_ns: u64,
    /// Inputs (the proposal and the leader's steps) on the critical path.
    pub(super) path_inputs: u64,
    /// Inputs in all.
    pub(super) all_inputs: u64,
}

/// What the replays measured.
#[derive(Clone, Debug, Default)]
pub(super) struct Replayed {
    /// Per window, in order.
    pub(super) charges: Vec<Charge>,
    /// The fastest whole replay's CPU per input (ns): the calibrated per-step cost.
    pub(super) per_input_ns: f64,
    /// One clock reading's cost, subtracted from every segment (ns).
    pub(super) clock_ns: u64,
}

/// The leader's recorded inputs and its replica when the recording started.
#[derive(Clone, Debug)]
pub(super) struct Tape {
    pub(super) snapshot: Replica,
    pub(super) inputs: Vec<Input>,
    pub(super) windows: Vec<Window>,
}

impl Tape {
    /// Replays the inputs `replays` times into copies of the snapshot, timing each
    /// window's segments; fails if a replay does not retrace the run.
    pub(super) fn replay(&self, replays: usize) -> anyhow::Result<Replayed> {
        ensure!(replays >= 1, "at least one replay");
        let segments: usize = self.windows.iter().map(|w| w.ends.len()).sum();
        let mut best = vec![u64::MAX; segments];
        let mut best_whole = u64::MAX;
        let mut times = vec![0u64; segments];
        for _ in 0..replays {
            let whole = self.replay_once(&mut times)?;
            best_whole = best_whole.min(whole);
            for (b, &t) in best.iter_mut().zip(&times) {
                *b = (*b).min(t);
            }
        }
        let clock_ns = clock_cost()?;
        let mut charges = Vec::with_capacity(self.windows.len());
        let mut k = 0;
        for w in &self.windows {
            let mut c = Charge::default();
            (c.path_inputs, c.all_inputs) = w.inputs();
            for &(_, on_path) in &w.ends {
                let ns = best[k].saturating_sub(clock_ns);
                k += 1;
                c.all_ns += ns;
                if on_path {
                    c.path_ns += ns;
                }
            }
            charges.push(c);
        }
        assert_eq!(k, segments, "every segment charged");
        Ok(Replayed {
            charges,
            per_input_ns: best_whole as f64 / self.inputs.len().max(1) as f64,
            clock_ns,
        })
    }

    /// One replay; `times` gets every segment's CPU (ns). Returns the whole replay's.
    fn replay_once(&self, times: &mut [u64]) -> anyhow::Result<u64> {
        let mut replica = self.snapshot.clone();
        // The values are the client's: allocated before the clock runs.
        let mut values: Vec<Option<Vec<u8>>> = self
            .inputs
            .iter()
            .map(|x| match x {
                Input::Propose(v, _) => Some(v.clone()),
                Input::Resume(_) => None,
            })
            .collect();
        let (mut w, mut seg, mut k) = (0usize, 0usize, 0usize);
        let mut mark: Option<ThreadTime> = None;
        let mut decided: Vec<u64> = Vec::new();
        let began = now()?;
        for (i, input) in self.inputs.iter().enumerate() {
            let window = self.windows.get(w);
            if window.is_some_and(|x| x.start == i) {
                mark = Some(now()?);
            }
            match input {
                Input::Propose(_, id) => {
                    let value = values[i].take().context("a value per proposal")?;
                    let got = replica.propose(value).ok();
                    ensure!(
                        got == Some(*id),
                        "the replay diverged at input {i}: proposal {got:?}, not {id}"
                    );
                }
                Input::Resume(reply) => {
                    let step = replica.resume(reply.clone());
                    ensure!(!matches!(step, Step::Done), "the replay stopped at {i}");
                    decided.extend(replica.drain_results().map(|(id, _)| id));
                }
            }
            let (Some(window), Some(from)) = (window, mark) else {
                continue;
            };
            let (end, _) = window.ends[seg];
            if end != i {
                continue;
            }
            let t = now()?;
            times[k] = t.duration_since(from).as_nanos() as u64;
            k += 1;
            seg += 1;
            mark = Some(t);
            if seg == window.ends.len() {
                // The window ends where the run saw its decision.
                let id = match &self.inputs[window.start] {
                    Input::Propose(_, id) => *id,
                    Input::Resume(_) => anyhow::bail!("window {w} starts without a proposal"),
                };
                ensure!(
                    decided.last() == Some(&id),
                    "the replay diverged: proposal {id} not decided at input {i}"
                );
                (w, seg, mark) = (w + 1, 0, None);
            }
        }
        let whole = now()?.duration_since(began).as_nanos() as u64;
        ensure!(
            w == self.windows.len() && k == times.len(),
            "the replay ended in window {w} of {}",
            self.windows.len()
        );
        Ok(whole)
    }
}

fn now() -> anyhow::Result<ThreadTime> {
    ThreadTime::try_now().context("reading the thread's CPU clock")
}

/// The fastest of many back-to-back clock readings (ns): what a segment's two readings
/// add to it.
fn clock_cost() -> anyhow::Result<u64> {
    let mut best = u64::MAX;
    for _ in 0..1_000 {
        let a = now()?;
        let b = now()?;
        best = best.min(b.duration_since(a).as_nanos() as u64);
    }
    Ok(best)
}
