//! Soundness evidence for the explorer's stubborn-set reduction ([`Reduction::Stubborn`]):
//! on every litmus file, on random programs, under every rule mutation and on programs with
//! a known violation or deadlock, it reports what the full state graph reports — the same
//! final states (so the same outcomes), the same "some state is stuck" verdict, the same
//! broken stable invariant — in fewer states.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use velos_rdma::{Layout, Loc, NodeId, Op, Process, Reply, Rmw, Step, WorkId};
use velos_sim::explore::{Exploration, ExploreError, ExploreOptions, Reduction, explore_with};
use velos_sim::litmus::compile::{Program, compile, holds, project};
use velos_sim::litmus::run::initial_machine;
use velos_sim::litmus::{collect_files, parse};
use velos_sim::machine::{CrashMode, Machine, Mutation};
use velos_sim::rng::Rng;

/// This binary explores the suite three times over: the system allocator fragments under
/// millions of short-lived machine states.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Far above every file of the suite unreduced (the largest, `sc/fig15b`, has 467,872).
const MAX_STATES: usize = 2_000_000;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("litmus")
}

fn files(parts: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for part in parts {
        files.extend(collect_files(&root().join(part)).expect("the litmus suite is readable"));
    }
    assert!(!files.is_empty(), "litmus files under {}", root().display());
    files
}

fn name(file: &Path) -> String {
    let relative = file.strip_prefix(root()).expect("under the suite's root");
    let parts: Vec<String> = relative
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}

fn program(file: &Path) -> Program {
    let text = std::fs::read_to_string(file).expect("readable");
    let test = parse(&text).unwrap_or_else(|e| panic!("{}: {}", file.display(), e.message));
    compile(&test).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// A final state as far as anyone can see it (every memory word, every thread's registers
/// and error: stricter than the condition's names), with the condition's projection.
type Final = (String, Vec<u64>);

/// One litmus file explored with `reduction` (and a rule mutation, if any).
fn run_litmus(
    program: &Program,
    reduction: Reduction,
    mutation: Option<Mutation>,
) -> Exploration<Final> {
    let mut machine = initial_machine(program);
    machine.mutation = mutation;
    explore_with(
        machine,
        ExploreOptions::new(MAX_STATES, reduction),
        |m| {
            let threads: Vec<String> = m
                .threads
                .iter()
                .map(|t| format!("{:?} {:?}", t.process.regs, t.process.error))
                .collect();
            let condition = project(
                &program.observed,
                |loc| m.read(loc).unwrap_or(0),
                |t| m.threads[t].process.regs.clone(),
            );
            (format!("{:?} {threads:?}", m.mem), condition)
        },
        |_| None,
    )
    .expect("within budget, no invariant")
}

/// What a reduction must preserve: the final states (all of them, not only their
/// projections: a reduction reaches every deadlock of the full graph) and the stuck
/// verdict. State counts and stuck counts may differ.
fn same_verdicts<O: Ord + std::fmt::Debug>(a: &Exploration<O>, b: &Exploration<O>) -> bool {
    a.finals == b.finals && a.outcomes == b.outcomes && (a.stuck > 0) == (b.stuck > 0)
}

#[test]
fn on_the_whole_suite_stubborn_sets_keep_every_final_state_and_stuck_verdict() {
    let mut table = String::new();
    let mut problems = Vec::new();
    let mut totals = [0usize; 3];
    let mut larger = Vec::new();
    for file in files(&[""]) {
        let program = program(&file);
        let name = name(&file);
        let full = run_litmus(&program, Reduction::None, None);
        let singletons = run_litmus(&program, Reduction::Singletons, None);
        let stubborn = run_litmus(&program, Reduction::Stubborn, None);
        for (label, e) in [("singletons", &singletons), ("stubborn", &stubborn)] {
            if !same_verdicts(&full, e) {
                problems.push(format!(
                    "{name}: {label} differs from the full graph: finals {} vs {}, stuck {} vs \
                     {}, outcomes {:?} vs {:?}",
                    e.finals, full.finals, e.stuck, full.stuck, e.outcomes, full.outcomes
                ));
            }
        }
        if stubborn.states > singletons.states {
            larger.push(name.clone());
        }
        let counts = [full.states, singletons.states, stubborn.states];
        for (total, n) in totals.iter_mut().zip(counts) {
            *total += n;
        }
        table += &format!(
            "{name:<62} {:>8} {:>8} {:>8} {:>5} {:>5}\n",
            counts[0], counts[1], counts[2], stubborn.finals, stubborn.stuck
        );
    }
    println!(
        "{:<62} {:>8} {:>8} {:>8} {:>5} {:>5}\n{table}{:<62} {:>8} {:>8} {:>8}",
        "file (states)",
        "full",
        "single",
        "stubborn",
        "final",
        "stuck",
        "total",
        totals[0],
        totals[1],
        totals[2]
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Two enabled items of one pipe always join a stubborn set together; where the singleton
    // reduction takes one of them alone, these five small files come out larger (by at most
    // a few hundred states). Everywhere else the stubborn sets visit fewer or as many states.
    assert_eq!(
        larger,
        [
            "paper/fig2b.litmus",
            "rules/rule3-put-write-waits-for-older-put.litmus",
            "rules/rule6-get-waits-for-own-rw.litmus",
            "rules/rule9-atomic-waits-for-own-rw.litmus",
            "velos/seqlock-value-read-local.litmus",
        ],
        "files where stubborn sets visit more states than singletons"
    );
    assert!(
        totals[2] * 10 < totals[1],
        "an order of magnitude over the suite"
    );
}

#[test]
fn the_condition_verdicts_are_those_the_files_expect() {
    for file in files(&[""]) {
        let text = std::fs::read_to_string(&file).expect("readable");
        let test = parse(&text).expect("parses");
        let program = program(&file);
        let e = run_litmus(&program, Reduction::Stubborn, None);
        let allowed = e
            .outcomes
            .iter()
            .any(|(_, o)| holds(&test.exists, &program.observed, o));
        let expected = matches!(test.expect, velos_sim::litmus::ast::Expect::Allowed);
        assert_eq!(allowed, expected, "{}", name(&file));
        assert!(test.allow_stuck || e.stuck == 0, "{}: stuck", name(&file));
    }
}

/// Under a mutation the premises the dependency relation was derived from do not hold
/// (Rule4Weaker lets any `rW` entry commit, so the entries behind the head are not held
/// back; Rule9Weaker lets atomic reads ignore `L[n]`; ...). The reduction then makes no
/// choice: every enabled step is explored, exactly as the full graph, so each mutant is
/// judged on its complete state graph and `rule_mutations.rs` measures the suite, not the
/// reduction.
#[test]
fn under_every_mutation_stubborn_sets_explore_the_full_graph() {
    let files = files(&["paper", "loopback", "rules"]);
    for mutation in Mutation::ALL {
        let mut caught = 0;
        for file in &files {
            let program = program(file);
            let full = run_litmus(&program, Reduction::None, Some(mutation));
            let stubborn = run_litmus(&program, Reduction::Stubborn, Some(mutation));
            assert_eq!(full, stubborn, "{mutation:?} on {}", name(file));
            let text = std::fs::read_to_string(file).expect("readable");
            let test = parse(&text).expect("parses");
            let allowed = stubborn
                .outcomes
                .iter()
                .any(|(_, o)| holds(&test.exists, &program.observed, o));
            let expected = matches!(test.expect, velos_sim::litmus::ast::Expect::Allowed);
            if allowed != expected || (stubborn.stuck > 0 && !test.allow_stuck) {
                caught += 1;
            }
        }
        assert!(caught > 0, "{mutation:?} is caught by no file");
    }
}

// ---- programs with a known answer ---------------------------------------------------------

/// A one-shot proposer racing for three acceptor words with remote CAS (0 → its value): it
/// posts the three CASes, then takes the answers as they come (`wait_any`, then a load of
/// the old value), and decides its value once `needed` of its CASes succeeded. With a
/// majority (2 of 3) at most one proposer can decide; with 1 both can.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Racer {
    me: u16,
    value: u64,
    needed: u32,
    posted: u16,
    unanswered: u64,
    loading: Option<u16>,
    waiting: bool,
    wins: u32,
    decided: Option<u64>,
}

const ACCEPTORS: u16 = 3;
const FIRST_WORK_ID: u32 = 10;

fn acceptor_word(a: u16) -> Loc {
    Loc::word(NodeId(a), 0)
}

fn result_word(me: u16, a: u16) -> Loc {
    Loc::word(NodeId(me), 1 + u32::from(a))
}

impl Racer {
    fn new(me: u16, needed: u32) -> Racer {
        Racer {
            me,
            value: 10 * (u64::from(me) + 1),
            needed,
            posted: 0,
            unanswered: (1 << ACCEPTORS) - 1,
            loading: None,
            waiting: false,
            wins: 0,
            decided: None,
        }
    }
}

impl Process for Racer {
    fn resume(&mut self, reply: Reply) -> Step {
        if let Some(a) = self.loading.take() {
            let Reply::Value(old) = reply else {
                panic!("a load replies a value")
            };
            self.unanswered &= !(1 << a);
            self.wins += u32::from(old == 0);
            if self.wins >= self.needed {
                self.decided = Some(self.value);
                return Step::Done;
            }
        } else if self.waiting {
            self.waiting = false;
            let Reply::Value(a) = reply else {
                panic!("wait_any replies a value")
            };
            let a = a as u16;
            self.loading = Some(a);
            return Step::Op(Op::Load {
                loc: result_word(self.me, a),
            });
        }
        if self.posted < ACCEPTORS {
            let a = self.posted;
            self.posted += 1;
            return Step::Op(Op::Atomic {
                local: result_word(self.me, a),
                remote: acceptor_word(a),
                rmw: Rmw::Cas {
                    expected: 0,
                    new: self.value,
                },
                work_id: WorkId(FIRST_WORK_ID + u32::from(a)),
            });
        }
        if self.unanswered == 0 {
            return Step::Done;
        }
        self.waiting = true;
        Step::Op(Op::WaitAny {
            base: WorkId(FIRST_WORK_ID),
            mask: self.unanswered,
        })
    }

    fn puts_from_memory(&self) -> bool {
        false
    }
}

fn racers(needed: u32, crashed: Option<u16>) -> Machine<Racer> {
    let mut machine = Machine::new(&Layout::uniform(ACCEPTORS, 1 + u32::from(ACCEPTORS)));
    for p in 0..2 {
        machine.spawn(NodeId(p), Racer::new(p, needed));
        for a in 0..ACCEPTORS {
            machine.set_private(result_word(p, a), usize::from(p));
        }
    }
    for a in 0..ACCEPTORS {
        machine.set_atomic_only(acceptor_word(a));
    }
    if let Some(node) = crashed {
        machine.crash(NodeId(node), CrashMode::Hang);
    }
    machine
}

/// Agreement, a stable invariant: decisions are never taken back.
fn agreement(m: &Machine<Racer>) -> Option<String> {
    let decided: BTreeSet<u64> = m.threads.iter().filter_map(|t| t.process.decided).collect();
    (decided.len() > 1).then(|| format!("agreement: decided {decided:?}"))
}

fn explore_racers(
    machine: Machine<Racer>,
    reduction: Reduction,
) -> Result<Exploration<Vec<Option<u64>>>, ExploreError> {
    explore_with(
        machine,
        ExploreOptions::new(MAX_STATES, reduction),
        |m| m.threads.iter().map(|t| t.process.decided).collect(),
        agreement,
    )
}

#[test]
fn a_broken_agreement_is_still_found() {
    for crashed in [None, Some(2)] {
        for reduction in [Reduction::None, Reduction::Stubborn] {
            match explore_racers(racers(1, crashed), reduction) {
                Err(ExploreError::Invariant { message, .. }) => {
                    assert!(message.starts_with("agreement"), "{message}")
                }
                other => panic!("{reduction:?}, crashed {crashed:?}: not caught: {other:?}"),
            }
        }
    }
}

#[test]
fn a_majority_keeps_agreement_and_the_reduction_keeps_every_outcome() {
    for crashed in [None, Some(2)] {
        let full = explore_racers(racers(2, crashed), Reduction::None).expect("agreement");
        let stubborn = explore_racers(racers(2, crashed), Reduction::Stubborn).expect("agreement");
        assert!(same_verdicts(&full, &stubborn), "crashed {crashed:?}");
        assert!(
            stubborn.states < full.states,
            "crashed {crashed:?}: a reduction"
        );
        // With an acceptor crashed, a racer with one win and one loss waits for it forever.
        assert_eq!(full.stuck > 0, crashed.is_some(), "crashed {crashed:?}");
        // Without a crash, someone decides in some complete run.
        assert!(
            crashed.is_some()
                || stubborn
                    .outcomes
                    .iter()
                    .any(|o| o.iter().any(Option::is_some))
        );
    }
}

/// A thread that runs a fixed list of operations and keeps every reply.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Script {
    ops: Arc<[Op]>,
    pc: usize,
    replies: Vec<u64>,
}

impl Script {
    fn new(ops: Vec<Op>) -> Script {
        Script {
            ops: ops.into(),
            pc: 0,
            replies: Vec::new(),
        }
    }
}

impl Process for Script {
    fn resume(&mut self, reply: Reply) -> Step {
        match reply {
            Reply::Start => {}
            Reply::Done => self.replies.push(u64::MAX - 1),
            Reply::Value(v) => self.replies.push(v),
            Reply::Words(w) => self.replies.extend(w.as_slice()),
            Reply::Failed(_) => self.replies.push(u64::MAX),
        }
        let op = self.ops.get(self.pc).cloned();
        self.pc += 1;
        op.map_or(Step::Done, Step::Op)
    }

    fn polls(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, Op::Poll { .. }))
    }

    fn puts_from_memory(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, Op::Put { .. }))
    }
}

fn explore_scripts(
    machine: Machine<Script>,
    reduction: Reduction,
) -> Result<Exploration<String>, ExploreError> {
    explore_with(
        machine,
        ExploreOptions::new(200_000, reduction),
        |m| {
            let replies: Vec<&Vec<u64>> = m.threads.iter().map(|t| &t.process.replies).collect();
            format!("{:?} {replies:?}", m.mem)
        },
        |_| None,
    )
}

#[test]
fn a_wait_on_a_crashed_node_is_still_stuck() {
    let layout = Layout::uniform(3, 2);
    let mut machine = Machine::new(&layout);
    let hang = WorkId(1);
    machine.spawn(
        NodeId(0),
        Script::new(vec![
            Op::PutInline {
                remote: Loc::word(NodeId(1), 0),
                value: 1,
                work_id: WorkId(2),
            },
            Op::Get {
                local: Loc::word(NodeId(0), 1),
                remote: Loc::word(NodeId(2), 0),
                work_id: hang,
            },
            Op::Wait { work_id: hang },
        ]),
    );
    machine.spawn(
        NodeId(1),
        Script::new(vec![
            Op::Load {
                loc: Loc::word(NodeId(1), 0),
            },
            Op::Store {
                loc: Loc::word(NodeId(1), 1),
                value: 7,
            },
        ]),
    );
    machine.crash(NodeId(2), CrashMode::Hang);
    let full = explore_scripts(machine.clone(), Reduction::None).expect("small");
    let stubborn = explore_scripts(machine, Reduction::Stubborn).expect("small");
    assert!(full.stuck > 0 && full.finals == 0, "the wait never returns");
    assert!(same_verdicts(&full, &stubborn));
}

/// A random operation of a thread on `node` of a machine with `nodes` nodes of `WORDS`
/// words; work ids 1..=3.
fn random_op(rng: &mut Rng, node: u16, nodes: u16) -> Op {
    const WORDS: u64 = 3;
    let local = Loc::word(NodeId(node), rng.below(WORDS) as u32);
    let remote = Loc::word(
        NodeId(rng.below(u64::from(nodes)) as u16),
        rng.below(WORDS) as u32,
    );
    let work_id = WorkId(1 + rng.below(3) as u32);
    let value = 1 + rng.below(2);
    match rng.below(16) {
        0 => Op::Load { loc: local },
        1 => Op::Store { loc: local, value },
        2 => Op::Cas {
            loc: local,
            expected: 0,
            new: value,
        },
        3 => Op::Mfence,
        4 => Op::Put {
            remote,
            local,
            work_id,
        },
        5 => Op::PutInline {
            remote,
            value,
            work_id,
        },
        6 => Op::Get {
            local,
            remote,
            work_id,
        },
        7 => Op::Atomic {
            local,
            remote,
            rmw: if rng.below(2) == 0 {
                Rmw::Cas {
                    expected: 0,
                    new: value,
                }
            } else {
                Rmw::Faa { add: 1 }
            },
            work_id,
        },
        8 => Op::Wait { work_id },
        9 => Op::Test { work_id },
        10 => Op::WaitAny {
            base: WorkId(1),
            mask: 1 + rng.below(7),
        },
        11 => Op::Rfence { node: remote.node },
        12 => Op::GlobalFence { node: remote.node },
        13 => Op::TestLoad {
            work_id,
            loc: local,
        },
        // Two words from word 0 or 1 (from word 2 the second is out of bounds: a failure).
        14 => Op::PutWords {
            remote,
            words: vec![value, value + 2].into(),
            work_id,
        },
        _ => Op::Atomic {
            local,
            remote,
            rmw: Rmw::Faa { add: 2 },
            work_id,
        },
    }
}

/// Declares what the program's operations show exactly: a word only one thread touches is
/// private to it; a word only remote atomics touch is atomic-only.
fn declare(machine: &mut Machine<Script>, programs: &[(u16, Vec<Op>)]) {
    let mut users: std::collections::BTreeMap<Loc, (BTreeSet<usize>, bool)> = Default::default();
    for (t, (_, ops)) in programs.iter().enumerate() {
        for op in ops {
            let (locs, atomic_remote): (Vec<Loc>, Option<Loc>) = match op {
                &Op::Load { loc }
                | &Op::Store { loc, .. }
                | &Op::Cas { loc, .. }
                | &Op::TestLoad { loc, .. } => (vec![loc], None),
                &Op::Put { remote, local, .. } | &Op::Get { local, remote, .. } => {
                    (vec![remote, local], None)
                }
                &Op::PutInline { remote, .. } => (vec![remote], None),
                &Op::PutWords { remote, .. } => {
                    // The second word, when it is inside the layout (else the put fails).
                    let next = Loc::word(remote.node, remote.offset / 8 + 1);
                    let next = (next.offset < 8 * 3).then_some(next);
                    (std::iter::once(remote).chain(next).collect(), None)
                }
                &Op::Atomic { local, remote, .. } => (vec![local], Some(remote)),
                _ => (vec![], None),
            };
            for loc in locs {
                let entry = users.entry(loc).or_default();
                entry.0.insert(t);
                entry.1 = true; // touched by something other than a remote atomic
            }
            if let Some(loc) = atomic_remote {
                users.entry(loc).or_default().0.insert(t);
            }
        }
    }
    for (loc, (threads, other)) in users {
        if threads.len() == 1 {
            machine.set_private(loc, *threads.iter().next().expect("one"));
        } else if !other {
            machine.set_atomic_only(loc);
        }
    }
}

/// Random programs compared with the full graph.
const CASES: usize = 300;

#[test]
fn on_random_programs_stubborn_sets_keep_every_final_state_and_stuck_verdict() {
    let mut rng = Rng::new(0x5eed_2026);
    let (mut full_states, mut stubborn_states, mut skipped) = (0usize, 0usize, 0usize);
    for case in 0..CASES {
        let nodes = 2 + rng.below(2) as u16;
        let threads = 2 + rng.below(2) as usize;
        let programs: Vec<(u16, Vec<Op>)> = (0..threads)
            .map(|_| {
                let node = rng.below(u64::from(nodes)) as u16;
                let len = 2 + rng.below(2) as usize;
                (
                    node,
                    (0..len).map(|_| random_op(&mut rng, node, nodes)).collect(),
                )
            })
            .collect();
        let mut machine = Machine::new(&Layout::uniform(nodes, 3));
        for (node, ops) in &programs {
            machine.spawn(NodeId(*node), Script::new(ops.clone()));
        }
        declare(&mut machine, &programs);
        if rng.below(4) == 0 {
            let mode = if rng.below(2) == 0 {
                CrashMode::Hang
            } else {
                CrashMode::Error
            };
            machine.crash(NodeId(rng.below(u64::from(nodes)) as u16), mode);
        }
        let Ok(full) = explore_scripts(machine.clone(), Reduction::None) else {
            skipped += 1; // too large unreduced to serve as the reference
            continue;
        };
        let stubborn = explore_scripts(machine, Reduction::Stubborn).expect("no larger than full");
        assert!(
            same_verdicts(&full, &stubborn),
            "case {case}: {programs:?}\nfull: {} finals, {} stuck\nstubborn: {} finals, {} stuck",
            full.finals,
            full.stuck,
            stubborn.finals,
            stubborn.stuck
        );
        assert!(stubborn.states <= full.states, "case {case}: {programs:?}");
        full_states += full.states;
        stubborn_states += stubborn.states;
    }
    println!(
        "{CASES} random programs ({skipped} too large): {full_states} states in full, \
         {stubborn_states} reduced"
    );
    assert!(skipped * 10 < CASES, "most programs are compared");
}
