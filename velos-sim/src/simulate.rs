//! The simulation driver: a seeded scheduler over the same enabled steps as the explorer,
//! with virtual time from a latency model and scheduled faults. Same seed, same trace, bit
//! for bit.

use crate::latency::LatencyModel;
use crate::machine::{Clock, CrashMode, Delay, EnabledCache, Link, Machine, Transition};
use crate::rng::{Fnv64, Rng};
use serde::{Deserialize, Serialize};
use velos_rdma::{NodeId, Process};

/// A fault the simulator injects at a virtual time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// The node crashes: memory gone, threads stopped; operations towards it hang or fail.
    Crash {
        /// The node.
        node: NodeId,
        /// Whether operations towards it hang or fail.
        #[serde(skip)]
        mode: CrashMode,
    },
    /// The queue pairs from threads on `from` towards `to` go into the error state.
    QueuePairError {
        /// Requester node.
        from: NodeId,
        /// Target node.
        to: NodeId,
    },
    /// Every step on a queue pair towards `node` costs `extra_ns` more for `duration_ns`:
    /// a slow peer or link (a gray failure). The steps charged are the queue pair's own —
    /// the wire, the remote memory access, the acknowledgement —, never the doorbell that
    /// hands a request to the poster's NIC: on a NIC, requests towards a peer that stops
    /// answering fill that queue pair's send queue while the thread goes on posting to the
    /// others. (Charging the doorbell stalled the poster's whole store buffer behind one
    /// slow target, so one slow replica stopped every replica that posted to it.)
    Delay {
        /// The slowed node.
        node: NodeId,
        /// Extra cost of each step.
        extra_ns: u64,
        /// How long the slowdown lasts.
        duration_ns: u64,
    },
    /// Every step on a queue pair `node` posts on costs `extra_ns` more for `duration_ns`:
    /// a node whose NIC or link sends slowly while the others reach its memory at full
    /// speed — it looks alive to them (its heartbeat is read as fast as ever) yet every
    /// operation it posts crawls: a leader that decides nothing (a gray failure). The steps
    /// charged are its queue pairs' transport (the request's and the answer's trips on the
    /// wire, its NIC's read of a put's payload), never the responder's execution: a slow
    /// requester does not hold a healthy responder's atomic unit.
    DelayFrom {
        /// The node whose queue pairs are slowed.
        node: NodeId,
        /// Extra cost of each step.
        extra_ns: u64,
        /// How long the slowdown lasts.
        duration_ns: u64,
    },
    /// The CPUs of `node` take no step for `duration_ns` (a process descheduled, a long
    /// pause): its NIC still serves the others and its queue pairs still drain, but it
    /// issues nothing and sees nothing until the pause ends.
    Pause {
        /// The paused node.
        node: NodeId,
        /// How long.
        duration_ns: u64,
    },
}

impl std::fmt::Display for Fault {
    /// The fault as a person would say it: "a pause of node 1 for 100000 ns".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Crash { node, mode } => {
                let then = match mode {
                    CrashMode::Hang => "hang",
                    CrashMode::Error => "fail",
                };
                write!(
                    f,
                    "a crash of node {} (operations towards it {then})",
                    node.0
                )
            }
            Fault::QueuePairError { from, to } => {
                write!(
                    f,
                    "a queue-pair error from node {} to node {}",
                    from.0, to.0
                )
            }
            Fault::Delay {
                node,
                extra_ns,
                duration_ns,
            } => write!(
                f,
                "a delay of {extra_ns} ns a step towards node {} for {duration_ns} ns",
                node.0
            ),
            Fault::DelayFrom {
                node,
                extra_ns,
                duration_ns,
            } => write!(
                f,
                "a delay of {extra_ns} ns a step of what node {} posts for {duration_ns} ns",
                node.0
            ),
            Fault::Pause { node, duration_ns } => {
                write!(f, "a pause of node {} for {duration_ns} ns", node.0)
            }
        }
    }
}

/// A fault and its virtual time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduledFault {
    /// When it happens (virtual ns).
    pub at_ns: u64,
    /// What happens.
    pub fault: Fault,
}

impl ScheduledFault {
    /// From `at_ns` on, for `duration_ns`, every step on a queue pair towards `node` costs
    /// `extra_ns` more ([`Fault::Delay`]).
    pub fn delay(node: u16, at_ns: u64, extra_ns: u64, duration_ns: u64) -> ScheduledFault {
        ScheduledFault {
            at_ns,
            fault: Fault::Delay {
                node: NodeId(node),
                extra_ns,
                duration_ns,
            },
        }
    }
}

impl ScheduledFault {
    /// From `at_ns` on, for `duration_ns`, every step on a queue pair `node` posts on costs
    /// `extra_ns` more ([`Fault::DelayFrom`]).
    pub fn delay_from(node: u16, at_ns: u64, extra_ns: u64, duration_ns: u64) -> ScheduledFault {
        ScheduledFault {
            at_ns,
            fault: Fault::DelayFrom {
                node: NodeId(node),
                extra_ns,
                duration_ns,
            },
        }
    }
}

/// What a simulation needs besides the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// The seed: it fixes the whole run.
    pub seed: u64,
    /// Step costs.
    pub latency: LatencyModel,
    /// Faults, in any order.
    pub faults: Vec<ScheduledFault>,
}

impl SimConfig {
    /// A fault-free configuration.
    pub fn new(seed: u64, latency: LatencyModel) -> SimConfig {
        SimConfig {
            seed,
            latency,
            faults: Vec::new(),
        }
    }
}

/// Why a run stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The end condition holds.
    Complete,
    /// Nothing can move and the end condition does not hold (or only hung operations
    /// towards crashed nodes remain).
    Deadlock,
    /// The virtual-time limit was reached.
    TimeLimit,
    /// The step limit was reached.
    StepLimit,
}

/// The simulation's clock: the latency model, its jitter stream, and active slowdowns.
#[derive(Clone, Debug)]
struct SimClock {
    latency: LatencyModel,
    jitter: Rng,
    /// Slowdowns: (node, whether of the queue pairs it posts on — else of those towards
    /// it —, extra ns a step, until).
    slow: Vec<(NodeId, bool, u64, u64)>,
    now: u64,
}

impl Clock for SimClock {
    fn delay(&mut self, kind: Delay, link: Option<Link>) -> u64 {
        let mut d = self.latency.base(kind);
        // A step the profile makes free stays free (no jitter drawn, no slowdown): a cost
        // added to the model later, at 0 in older profiles, leaves their traces unchanged.
        if d == 0 {
            return 0;
        }
        if self.latency.jitter_ns > 0 {
            let bound = match self.latency.jitter_within_cost {
                true => self.latency.jitter_ns.min(d),
                false => self.latency.jitter_ns,
            };
            d += self.jitter.below(bound + 1);
        }
        if let Some(link) = link {
            // A slow poster's own transport: the request's and the answer's trips and its
            // NIC's read of the payload — never the responder's execution, which holds the
            // responder's atomic unit (a slow requester does not slow a healthy NIC).
            let transport = matches!(
                kind,
                Delay::Wire | Delay::LoopbackWire | Delay::NicLocalRead
            );
            for &(node, from, extra, until) in &self.slow {
                let charged = match from {
                    true => link.from == node && transport,
                    false => link.to == node,
                };
                if charged && self.now < until {
                    d += extra;
                }
            }
        }
        d
    }
}

/// A machine under simulation.
pub struct Simulator<P> {
    machine: Machine<P>,
    clock: SimClock,
    scheduler: Rng,
    faults: Vec<ScheduledFault>,
    trace: Fnv64,
    steps: u64,
    cpu_steps: u64,
    enabled: Vec<(Transition, u64)>,
    /// Each queue pair's enabled steps, kept between steps (lemma (cache key)).
    cache: EnabledCache,
    /// Paused nodes and until when (see [`Fault::Pause`]).
    paused: Vec<(NodeId, u64)>,
    /// Every fault applied so far, with whether it met a live node ([`FaultEffect`]).
    effects: Vec<FaultEffect>,
    seed: u64,
}

/// A fault the simulator applied, and whether it acted: a crash or a queue-pair error
/// met its nodes up; a delay or pause met its node up at some moment of its window (up
/// when it began, or restarted before it ended). A fault that did not act changed
/// nothing, so a check that counts on it held without it: a harness reports it as a
/// missing premise ([`Simulator::faults_without_effect`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultEffect {
    /// When it was applied (virtual ns).
    pub at_ns: u64,
    /// The fault.
    pub fault: Fault,
    /// When its window ends (its application time for a crash or a queue-pair error).
    pub until_ns: u64,
    /// Whether it met a live node.
    pub acted: bool,
}

impl<P: Process> Simulator<P> {
    /// Starts a simulation of `machine` at virtual time 0.
    pub fn new(machine: Machine<P>, config: SimConfig) -> Simulator<P> {
        let mut faults = config.faults;
        faults.sort_by_key(|f| f.at_ns);
        faults.reverse(); // pop from the back in time order
        let mut root = Rng::new(config.seed);
        Simulator {
            machine,
            clock: SimClock {
                latency: config.latency,
                jitter: Rng::new(root.next_u64()),
                slow: Vec::new(),
                now: 0,
            },
            scheduler: Rng::new(root.next_u64()),
            faults,
            trace: Fnv64::default(),
            steps: 0,
            cpu_steps: 0,
            enabled: Vec::new(),
            cache: EnabledCache::default(),
            paused: Vec::new(),
            effects: Vec::new(),
            seed: config.seed,
        }
    }

    /// The machine.
    pub fn machine(&self) -> &Machine<P> {
        &self.machine
    }

    /// The machine, mutably (to inject faults or inspect processes between steps).
    pub fn machine_mut(&mut self) -> &mut Machine<P> {
        &mut self.machine
    }

    /// Virtual time now (ns).
    pub fn now(&self) -> u64 {
        self.clock.now
    }

    /// The seed of this run.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Steps fired so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// CPU steps (operations executed by processes) so far.
    pub fn cpu_steps(&self) -> u64 {
        self.cpu_steps
    }

    /// Whether every part of the cache of enabled steps the next step would reuse is what
    /// a walk of its queue pair gives (lemma (cache key); a check for tests).
    pub fn enabled_cache_agrees(&self) -> bool {
        self.machine.enabled_cache_agrees(&self.cache)
    }

    /// The queue pairs in use, and how many of them the next step would take from the
    /// cache (a test's premise that the cache was used).
    pub fn enabled_cache_reuse(&self) -> (usize, usize) {
        self.machine.enabled_cache_reuse(&self.cache)
    }

    /// A hash of every step fired and its time: equal seeds give equal hashes.
    pub fn trace_hash(&self) -> u64 {
        self.trace.finish()
    }

    /// Fires one step (or one fault). Returns `false` when nothing can happen any more.
    pub fn step(&mut self) -> bool {
        self.machine
            .enabled_cached(&mut self.cache, &mut self.enabled);
        let now = self.clock.now;
        self.paused.retain(|&(_, until)| until > now);
        if !self.paused.is_empty() {
            // A paused node's CPU steps wait for the end of the pause.
            for (t, ready) in &mut self.enabled {
                if let Transition::Cpu(thread) = *t {
                    let node = self.machine.threads[thread].node;
                    for &(n, until) in &self.paused {
                        if n == node {
                            *ready = (*ready).max(until);
                        }
                    }
                }
            }
        }
        let earliest = self
            .enabled
            .iter()
            .map(|&(_, ready)| ready.max(self.clock.now))
            .min();
        let fault_due = self.faults.last().map(|f| f.at_ns.max(self.clock.now));
        let fault_first = match (earliest, fault_due) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(e), Some(f)) => f <= e,
        };
        if fault_first {
            let fault = self.faults.pop().expect("a due fault");
            self.clock.now = fault.at_ns.max(self.clock.now);
            self.apply(fault.fault);
            return true;
        }
        let Some(at) = earliest else {
            return false;
        };
        let now = self.clock.now;
        let ties = self
            .enabled
            .iter()
            .filter(|&&(_, ready)| ready.max(now) == at)
            .count();
        let k = self.scheduler.below(ties as u64) as usize;
        let pick = self
            .enabled
            .iter()
            .filter(|&&(_, ready)| ready.max(now) == at)
            .nth(k)
            .map(|&(t, _)| t)
            .expect("the k-th tie exists");
        self.clock.now = at;
        self.fire(pick);
        true
    }

    fn fire(&mut self, transition: Transition) {
        let code = match transition {
            Transition::Cpu(t) => {
                self.cpu_steps += 1;
                (1 << 56) | t as u64
            }
            Transition::StoreBufferHead(t) => (2 << 56) | t as u64,
            Transition::Pipe(q, i) => (3 << 56) | ((q as u64) << 24) | i as u64,
            Transition::RemoteCommit(q, i) => (4 << 56) | ((q as u64) << 24) | i as u64,
            Transition::LocalCommit(q, i) => (5 << 56) | ((q as u64) << 24) | i as u64,
            Transition::StoreBufferPost(t) => (6 << 56) | t as u64,
        };
        self.trace.word(code);
        self.trace.word(self.clock.now);
        self.steps += 1;
        let now = self.clock.now;
        self.machine.fire(transition, now, &mut self.clock);
    }

    fn apply(&mut self, fault: Fault) {
        self.trace.word(6 << 56);
        self.trace.word(self.clock.now);
        let now = self.clock.now;
        let (acted, until_ns) = match fault {
            Fault::Crash { node, .. } => (self.machine.is_up(node), now),
            Fault::QueuePairError { from, to } => {
                (self.machine.is_up(from) && self.machine.is_up(to), now)
            }
            Fault::Delay {
                node, duration_ns, ..
            }
            | Fault::DelayFrom {
                node, duration_ns, ..
            }
            | Fault::Pause { node, duration_ns } => {
                (self.machine.is_up(node), now.saturating_add(duration_ns))
            }
        };
        self.effects.push(FaultEffect {
            at_ns: now,
            fault: fault.clone(),
            until_ns,
            acted,
        });
        match fault {
            Fault::Crash { node, mode } => self.machine.crash(node, mode),
            Fault::QueuePairError { from, to } => self.machine.queue_pair_error(from, to),
            Fault::Delay {
                node,
                extra_ns,
                duration_ns,
            } => {
                let until = self.clock.now + duration_ns;
                self.clock.slow.push((node, false, extra_ns, until));
            }
            Fault::DelayFrom {
                node,
                extra_ns,
                duration_ns,
            } => {
                let until = self.clock.now + duration_ns;
                self.clock.slow.push((node, true, extra_ns, until));
            }
            Fault::Pause { node, duration_ns } => {
                self.paused.push((node, self.clock.now + duration_ns));
            }
        }
    }

    /// Starts `process` now on crashed `node`, in its thread's place, with blank memory
    /// ([`Machine::restart`]).
    pub fn restart(&mut self, node: NodeId, process: P) {
        self.trace.word(7 << 56 | u64::from(node.0));
        self.trace.word(self.clock.now);
        let now = self.clock.now;
        self.machine.restart(node, process, now);
        // A window still open on this node now meets a live one.
        for e in self
            .effects
            .iter_mut()
            .filter(|e| !e.acted && e.until_ns > now)
        {
            if let Fault::Delay { node: n, .. }
            | Fault::DelayFrom { node: n, .. }
            | Fault::Pause { node: n, .. } = e.fault
            {
                e.acted |= n == node;
            }
        }
    }

    /// How many faults were applied so far.
    pub fn faults_applied(&self) -> usize {
        self.effects.len()
    }

    /// The faults applied so far that met no live node (see [`FaultEffect`]); a window
    /// still open may yet act, when its node restarts before it ends.
    pub fn faults_without_effect(&self) -> impl Iterator<Item = &FaultEffect> {
        self.effects.iter().filter(|e| !e.acted)
    }

    /// The join path met the process now in `to`'s place from `from`, now
    /// ([`Machine::reconnect`]).
    pub fn reconnect(&mut self, from: NodeId, to: NodeId) {
        self.trace
            .word(8 << 56 | u64::from(from.0) << 16 | u64::from(to.0));
        self.trace.word(self.clock.now);
        self.machine.reconnect(from, to);
    }

    /// Injects `fault` now (for faults that depend on the run, such as crashing whichever
    /// node leads at some time).
    pub fn inject(&mut self, fault: Fault) {
        self.apply(fault);
    }

    /// Runs until the end condition, a deadlock, `until_ns` of virtual time, or
    /// `max_steps` steps, whichever comes first.
    pub fn run(&mut self, until_ns: u64, max_steps: u64) -> Stop {
        let mut budget = max_steps;
        loop {
            // A complete state has no enabled step, so completion is checked only when the
            // machine stops moving.
            if self.clock.now >= until_ns {
                return Stop::TimeLimit;
            }
            if budget == 0 {
                return Stop::StepLimit;
            }
            budget -= 1;
            if !self.step() {
                return if self.machine.is_complete() {
                    Stop::Complete
                } else {
                    Stop::Deadlock
                };
            }
        }
    }
}
