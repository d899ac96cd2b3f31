//! RMA-RW's fairness thresholds as a checked property: seeded simulations (virtual time,
//! `LatencyModel::generic()`) of many mixed readers and writers, with every critical-section
//! entry logged in order and two checkers run after every step:
//!
//! * **T_R** — while a writer is *waiting*, at most
//!   `B_R = counters · T_R + 2 · participants` readers enter in a row, and of those at most
//!   `B_R' = counters · T_R + participants` arrived (were announced) after the run began
//!   (the later of the writer's announcement and the last writer's entry);
//! * **T_W** — while a reader is *waiting*, at most `T_W = ∏ T_L,i` writers enter in a row.
//!
//! "Waiting", precisely, from the harness's state: the process's acquire routine has
//! started and not finished, **and** the routine reports `announced()` — a reader is
//! counted at its physical counter (its arriving FAA completed), a writer is queued in the
//! root's DQ (its FAA that draws a ticket on the root TAIL completed). Why not simply "the
//! acquire has started": between that point and the first effect of the acquire's first
//! remote operation, the acquirer exists in no shared word, so no protocol can bound what
//! others do in that window (the model puts no bound on how long an operation stays in
//! the pipe). A writer that gets the lock from a writer of its own element never reaches the
//! root and is never announced: it waits only behind writers, which enter.
//!
//! Why `B_R` and not `T_R` (see `paper-notes/rma-rw.md`, "Fairness bounds"): T_R is a
//! budget per physical counter, so `counters · T_R` readers may be admitted by budget after
//! a writer is announced; in addition each participant may enter once because it arrived
//! before the run began (past its counter check, or counted while writers were inside),
//! and once more as a reader that was over the
//! budget and waited for that writer to take its counter (it is counted, so the writer waits
//! for it to leave). Readers that arrived after the run began lose the first kind, hence
//! `B_R'`. The argument is in the note.
//!
//! The checkers also report the largest runs seen (and, for information only, the largest
//! runs under the naive "acquire started" definition).

use velos_rdma::sync::rmarw::{self, RmaRw, RmaRwConfig};
use velos_rdma::sync::{Routine, Yield};
use velos_rdma::{LayoutBuilder, Loc, NodeId, Op, Process, Reply, Shared, Step, WorkId};
use velos_sim::latency::LatencyModel;
use velos_sim::machine::Machine;
use velos_sim::rng::Rng;
use velos_sim::simulate::{SimConfig, Simulator};

const USER_WORK_ID: WorkId = WorkId(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Role {
    Writer,
    Reader,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Acquire {
    Read(rmarw::ReadLock),
    Write(rmarw::WriteLock),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Release {
    Read(rmarw::ReadUnlock),
    Write(rmarw::WriteUnlock),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Local loads between acquisitions; `left` more.
    Thinking {
        left: u32,
    },
    Acquiring(Acquire),
    /// The acquire returned; the witness load is pending.
    WitnessIn,
    /// The critical section's get of the shared word was posted.
    CsGet,
    CsWaited,
    /// The witness load before the release is pending.
    WitnessOut,
    Releasing(Release),
    Finished,
}

/// A participant that acquires the lock `rounds` times, each time as a writer with
/// probability `writer_ppm` per million (its own seeded PRNG), thinks a little between
/// acquisitions, and reads a shared word in each critical section.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FairUser {
    lock: Shared<RmaRw>,
    slot: usize,
    rng: Rng,
    rounds: u32,
    writer_ppm: u64,
    role: Role,
    witness: Loc,
    data: Loc,
    scratch: Loc,
    phase: Phase,
    inside: Option<Role>,
}

impl FairUser {
    /// The role of an acquire in progress that is announced, if any.
    fn waiting(&self) -> Option<Role> {
        match &self.phase {
            Phase::Acquiring(Acquire::Read(r)) if r.announced() => Some(Role::Reader),
            Phase::Acquiring(Acquire::Write(w)) if w.announced() => Some(Role::Writer),
            _ => None,
        }
    }

    /// The role of any acquire in progress (the naive definition of waiting).
    fn started(&self) -> Option<Role> {
        match &self.phase {
            Phase::Acquiring(Acquire::Read(_)) => Some(Role::Reader),
            Phase::Acquiring(Acquire::Write(_)) => Some(Role::Writer),
            _ => None,
        }
    }

    fn think(&mut self) -> Step {
        if self.rounds == 0 {
            self.phase = Phase::Finished;
            return Step::Done;
        }
        let left = self.rng.below(4) as u32;
        self.phase = Phase::Thinking { left };
        Step::Op(Op::Load { loc: self.witness })
    }

    fn acquire(&mut self) -> Step {
        self.rounds -= 1;
        self.role = if self.rng.below(1_000_000) < self.writer_ppm {
            Role::Writer
        } else {
            Role::Reader
        };
        let mut acquire = match self.role {
            Role::Writer => Acquire::Write(rmarw::write_lock(&self.lock, self.slot)),
            Role::Reader => Acquire::Read(rmarw::read_lock(&self.lock, self.slot)),
        };
        let first = match &mut acquire {
            Acquire::Read(r) => r.resume(Reply::Start),
            Acquire::Write(w) => w.resume(Reply::Start),
        };
        match first.expect("the acquire starts") {
            Yield::Op(op) => {
                self.phase = Phase::Acquiring(acquire);
                Step::Op(op)
            }
            Yield::Done(()) => unreachable!("an acquire issues operations"),
        }
    }

    fn release(&mut self) -> Step {
        let mut release = match self.role {
            Role::Writer => Release::Write(rmarw::write_unlock(&self.lock, self.slot)),
            Role::Reader => Release::Read(rmarw::read_unlock(&self.lock, self.slot)),
        };
        let first = match &mut release {
            Release::Read(r) => r.resume(Reply::Start),
            Release::Write(w) => w.resume(Reply::Start),
        };
        match first.expect("the release starts") {
            Yield::Op(op) => {
                self.phase = Phase::Releasing(release);
                Step::Op(op)
            }
            Yield::Done(()) => self.think(),
        }
    }
}

impl Process for FairUser {
    fn tests_completions(&self) -> bool {
        false // the locks wait; they never `test` or `wait_any`
    }

    fn resume(&mut self, reply: Reply) -> Step {
        if let Reply::Failed(e) = &reply {
            panic!("user {}: operation failed: {e}", self.slot);
        }
        match &mut self.phase {
            Phase::Thinking { left: 0 } => self.acquire(),
            Phase::Thinking { left } => {
                *left -= 1;
                Step::Op(Op::Load { loc: self.witness })
            }
            Phase::Acquiring(acquire) => {
                let next = match acquire {
                    Acquire::Read(r) => r.resume(reply),
                    Acquire::Write(w) => w.resume(reply),
                };
                match next.expect("acquire") {
                    Yield::Op(op) => Step::Op(op),
                    Yield::Done(()) => {
                        self.phase = Phase::WitnessIn;
                        Step::Op(Op::Load { loc: self.witness })
                    }
                }
            }
            Phase::WitnessIn => {
                self.inside = Some(self.role);
                self.phase = Phase::CsGet;
                Step::Op(Op::Get {
                    local: self.scratch,
                    remote: self.data,
                    work_id: USER_WORK_ID,
                })
            }
            Phase::CsGet => {
                self.phase = Phase::CsWaited;
                Step::Op(Op::Wait {
                    work_id: USER_WORK_ID,
                })
            }
            Phase::CsWaited => {
                self.phase = Phase::WitnessOut;
                Step::Op(Op::Load { loc: self.witness })
            }
            Phase::WitnessOut => {
                self.inside = None;
                self.release()
            }
            Phase::Releasing(release) => {
                let next = match release {
                    Release::Read(r) => r.resume(reply),
                    Release::Write(w) => w.resume(reply),
                };
                match next.expect("release") {
                    Yield::Op(op) => Step::Op(op),
                    Yield::Done(()) => self.think(),
                }
            }
            Phase::Finished => unreachable!("a finished user is not resumed"),
        }
    }
}

/// One run of entries of one kind while the other kind waits.
#[derive(Debug, Default)]
struct Run {
    /// Entries in the current run.
    len: u64,
    /// The longest run seen.
    max: u64,
}

/// The two checkers, fed the machine after every step.
struct Checker {
    /// B_R and T_W.
    bound_readers: u64,
    bound_writers: u64,
    readers: Run,
    /// Readers in the current run that were announced after the run's start.
    readers_late: Run,
    bound_readers_late: u64,
    writers: Run,
    /// The step at which the current reader run started (a writer was announced, or a
    /// writer entered).
    run_start: u64,
    /// Per thread: the step at which its latest acquire was announced (kept after the
    /// acquire finishes, for its entry), and whether it is announced and waiting now.
    announced_at: Vec<Option<u64>>,
    announced_now: Vec<bool>,
    /// The same under the naive definition of waiting (reported, not asserted).
    readers_naive: Run,
    writers_naive: Run,
    inside: Vec<Option<Role>>,
    writer_waiting: bool,
    reader_waiting: bool,
    writer_started: bool,
    reader_started: bool,
    /// Every entry so far: (step, thread, role).
    log: Vec<(u64, usize, Role)>,
}

impl Checker {
    fn new(
        threads: usize,
        bound_readers: u64,
        bound_readers_late: u64,
        bound_writers: u64,
    ) -> Checker {
        Checker {
            bound_readers,
            bound_writers,
            readers: Run::default(),
            readers_late: Run::default(),
            bound_readers_late,
            run_start: 0,
            announced_at: vec![None; threads],
            announced_now: vec![false; threads],
            writers: Run::default(),
            readers_naive: Run::default(),
            writers_naive: Run::default(),
            inside: vec![None; threads],
            writer_waiting: false,
            reader_waiting: false,
            writer_started: false,
            reader_started: false,
            log: Vec::new(),
        }
    }

    /// Updates a run at an entry of its kind while the other kind waits (`counts`), or at
    /// an entry of the other kind (`resets`).
    fn entry(run: &mut Run, counts: bool) {
        if counts {
            run.len += 1;
            run.max = run.max.max(run.len);
        }
    }

    fn observe(&mut self, step: u64, m: &Machine<FairUser>) -> Result<(), String> {
        let waiting = |role| m.threads.iter().any(|t| t.process.waiting() == Some(role));
        let started = |role| m.threads.iter().any(|t| t.process.started() == Some(role));
        let (ww, rw) = (waiting(Role::Writer), waiting(Role::Reader));
        let (ws, rs) = (started(Role::Writer), started(Role::Reader));
        // A run counts from the moment the other kind starts waiting (or from the other
        // kind's last entry, below).
        if ww && !self.writer_waiting {
            self.readers.len = 0;
            self.readers_late.len = 0;
            self.run_start = step;
        }
        for (t, thread) in m.threads.iter().enumerate() {
            let now = thread.process.waiting().is_some();
            if now && !self.announced_now[t] {
                self.announced_at[t] = Some(step);
            }
            self.announced_now[t] = now;
        }
        if rw && !self.reader_waiting {
            self.writers.len = 0;
        }
        if ws && !self.writer_started {
            self.readers_naive.len = 0;
        }
        if rs && !self.reader_started {
            self.writers_naive.len = 0;
        }
        (self.writer_waiting, self.reader_waiting) = (ww, rw);
        (self.writer_started, self.reader_started) = (ws, rs);
        for (t, thread) in m.threads.iter().enumerate() {
            let now = thread.process.inside;
            if let (Some(role), None) = (now, self.inside[t]) {
                self.log.push((step, t, role));
                // The acquire finished before this entry (at the step of its last
                // operation); its announcement step was recorded while it waited.
                let late = self.announced_at[t].is_some_and(|a| a > self.run_start);
                match role {
                    Role::Reader => {
                        self.writers.len = 0;
                        self.writers_naive.len = 0;
                        Checker::entry(&mut self.readers, ww);
                        Checker::entry(&mut self.readers_late, ww && late);
                        Checker::entry(&mut self.readers_naive, ws);
                        if self.readers_late.len > self.bound_readers_late {
                            return Err(format!(
                                "{} readers that arrived after the writer entered in a row \
                                 while it waits (bound {})",
                                self.readers_late.len, self.bound_readers_late
                            ));
                        }
                        if self.readers.len > self.bound_readers {
                            return Err(format!(
                                "{} readers in a row while a writer waits (bound {})",
                                self.readers.len, self.bound_readers
                            ));
                        }
                    }
                    Role::Writer => {
                        self.readers.len = 0;
                        self.readers_late.len = 0;
                        self.run_start = step;
                        self.readers_naive.len = 0;
                        Checker::entry(&mut self.writers, rw);
                        Checker::entry(&mut self.writers_naive, rs);
                        if self.writers.len > self.bound_writers {
                            return Err(format!(
                                "{} writers in a row while a reader waits (bound T_W = {})",
                                self.writers.len, self.bound_writers
                            ));
                        }
                    }
                }
            }
            self.inside[t] = now;
        }
        Ok(())
    }
}

/// One simulated configuration.
struct Scenario {
    seed: u64,
    processes: usize,
    nodes: u16,
    t_dc: usize,
    /// Levels of the tree: 1 (the root only), 2 (root, node) or 3 (root, pair of nodes,
    /// node).
    levels: usize,
    /// T_L per level, root first.
    t_l: Vec<u64>,
    t_r: u64,
    rounds: u32,
    writer_ppm: u64,
}

/// What a run established.
#[derive(Debug)]
struct Outcome {
    entries: usize,
    readers_max: u64,
    readers_late_max: u64,
    bound_readers_late: u64,
    writers_max: u64,
    readers_naive_max: u64,
    writers_naive_max: u64,
    bound_readers: u64,
    bound_writers: u64,
}

fn simulate(s: &Scenario) -> Outcome {
    let nodes: Vec<NodeId> = (0..s.processes)
        .map(|p| NodeId((p % usize::from(s.nodes)) as u16))
        .collect();
    let mut layout = LayoutBuilder::new(s.nodes);
    let node_ids: Vec<u32> = nodes.iter().map(|n| u32::from(n.0)).collect();
    let levels = match s.levels {
        1 => vec![vec![0; s.processes]],
        2 => vec![vec![0; s.processes], node_ids],
        _ => vec![
            vec![0; s.processes],
            node_ids.iter().map(|n| n / 2).collect(),
            node_ids,
        ],
    };
    let config = RmaRwConfig {
        levels,
        t_dc: s.t_dc,
        t_l: s.t_l.clone(),
        t_r: s.t_r,
    };
    let lock = RmaRw::new(&mut layout, &config, &nodes);
    let data = layout.alloc(NodeId(0));
    let users: Vec<FairUser> = nodes
        .iter()
        .enumerate()
        .map(|(slot, &n)| FairUser {
            lock: lock.clone(),
            slot,
            rng: Rng::new(s.seed.wrapping_mul(1_000_003).wrapping_add(slot as u64)),
            rounds: s.rounds,
            writer_ppm: s.writer_ppm,
            role: Role::Reader,
            witness: layout.alloc(n),
            data,
            scratch: layout.alloc(n),
            phase: Phase::Thinking { left: 0 },
            inside: None,
        })
        .collect();
    let mut machine = Machine::new(&layout.build());
    for (slot, user) in users.into_iter().enumerate() {
        machine.spawn(nodes[slot], user);
    }
    let bound_readers = lock.counters() as u64 * s.t_r + 2 * s.processes as u64;
    let bound_readers_late = lock.counters() as u64 * s.t_r + s.processes as u64;
    let bound_writers = config.t_w();
    let mut checker = Checker::new(
        s.processes,
        bound_readers,
        bound_readers_late,
        bound_writers,
    );
    let mut sim = Simulator::new(machine, SimConfig::new(s.seed, LatencyModel::generic()));
    let mut steps = 0u64;
    while sim.step() {
        steps += 1;
        assert!(steps < 50_000_000, "seed {}: no end in sight", s.seed);
        if let Err(message) = checker.observe(steps, sim.machine()) {
            let tail: Vec<String> = checker.log[checker.log.len().saturating_sub(40)..]
                .iter()
                .map(|(step, t, role)| format!("{step}:{t}:{role:?}"))
                .collect();
            panic!(
                "seed {}: {message}\nlast entries (step:thread:role): {}\nreplay: \
                 cargo test --release -p velos-sim --test rmarw_fairness -- seed_{}",
                s.seed,
                tail.join(" "),
                s.seed
            );
        }
    }
    let m = sim.machine();
    assert!(m.is_complete(), "seed {}: the run ends complete", s.seed);
    assert!(
        m.threads.iter().all(|t| t.process.phase == Phase::Finished),
        "seed {}: every user finishes",
        s.seed
    );
    assert_eq!(
        checker.log.len(),
        s.processes * s.rounds as usize,
        "seed {}: every acquisition entered once",
        s.seed
    );
    Outcome {
        entries: checker.log.len(),
        readers_max: checker.readers.max,
        readers_late_max: checker.readers_late.max,
        bound_readers_late,
        writers_max: checker.writers.max,
        readers_naive_max: checker.readers_naive.max,
        writers_naive_max: checker.writers_naive.max,
        bound_readers,
        bound_writers,
    }
}

/// The scenario of `seed`: the seed picks the thresholds, T_DC and the writer share.
fn scenario(seed: u64) -> Scenario {
    let mut rng = Rng::new(seed ^ 0x5eed_f00d);
    let levels = [2, 2, 1, 3][rng.below(4) as usize];
    Scenario {
        seed,
        processes: 8 + rng.below(9) as usize,
        nodes: 4,
        t_dc: [1, 2, 4, 8][rng.below(4) as usize],
        levels,
        t_l: (0..levels).map(|_| 1 + rng.below(3)).collect(),
        t_r: 1 + rng.below(4),
        rounds: 16,
        writer_ppm: [100_000, 300_000, 500_000, 800_000][rng.below(4) as usize],
    }
}

/// Many seeds, each a fresh scenario; every step checked.
#[test]
fn readers_and_writers_stay_within_their_thresholds() {
    let seeds = 0..48u64;
    let mut worst = (0u64, 0u64);
    for seed in seeds {
        let s = scenario(seed);
        let o = simulate(&s);
        eprintln!(
            "seed {seed}: P={} T_DC={} T_L={:?} T_R={} writers={}% entries={}: \
             readers-in-a-row {} (bound {}, naive {}), arrived-after {} (bound {}), \
             writers-in-a-row {} (bound {}, naive {})",
            s.processes,
            s.t_dc,
            s.t_l,
            s.t_r,
            s.writer_ppm / 10_000,
            o.entries,
            o.readers_max,
            o.bound_readers,
            o.readers_naive_max,
            o.readers_late_max,
            o.bound_readers_late,
            o.writers_max,
            o.bound_writers,
            o.writers_naive_max,
        );
        worst = (worst.0.max(o.readers_max), worst.1.max(o.writers_max));
    }
    // The runs are not vacuous: both kinds did wait for the other at some point.
    assert!(
        worst.0 > 0 && worst.1 > 0,
        "both checkers saw runs: {worst:?}"
    );
}

/// Seed 7 alone, to replay it quickly.
#[test]
fn seed_7() {
    simulate(&scenario(7));
}
