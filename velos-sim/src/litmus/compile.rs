//! Compiles a parsed litmus test for a backend: memory layout, initial values, one
//! [`LitmusThread`] per thread, and the projection of final states on the condition's names.

use super::ast::{Atom, Cond, DeclKind, InstrKind, LitmusTest, LockKind, Reg};
use super::libcall::LibCall;
use super::program::{Action, Compiled, LitmusThread};
use std::collections::{BTreeMap, HashMap};
use velos_rdma::sync::nlock::{self, NLock};
use velos_rdma::sync::sc::{self, ScAccess, ScLoc};
use velos_rdma::sync::slock;
use velos_rdma::sync::sv::SharedVar;
use velos_rdma::sync::wlock::{self, WLock};
use velos_rdma::{Layout, LayoutBuilder, Loc, NodeId, Op, Rmw, Shared, WorkId};

/// A test ready to run: what every backend needs.
#[derive(Clone, Debug)]
pub struct Program {
    /// Registered memory per node.
    pub layout: Layout,
    /// Initial values of declared words (others start at 0).
    pub init: Vec<(Loc, u64)>,
    /// Threads and their nodes, in file order.
    pub threads: Vec<(NodeId, LitmusThread)>,
    /// The condition's names, in order: what an outcome holds.
    pub observed: Vec<Observed>,
    /// Library words only one thread touches, with that thread (for the explorer).
    pub private: Vec<(Loc, usize)>,
}

/// One name of the condition and where its final value lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// As printed: `x`, `v@2`, `T1:r0`.
    pub key: String,
    /// Where its value is.
    pub source: Source,
}

/// Where an observed value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A memory word.
    Mem(Loc),
    /// Register `reg` (dense index) of thread `thread`.
    Reg {
        /// Thread index.
        thread: usize,
        /// Dense register index.
        reg: usize,
    },
}

/// A final state projected on the condition's names, in [`Program::observed`] order.
pub type Outcome = Vec<u64>;

/// An instruction the compiler does not support yet, at a line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}: {message}")]
pub struct CompileError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

struct Names {
    /// loc / scloc name -> its word.
    locs: HashMap<String, Loc>,
    /// var name -> the shared variable.
    vars: HashMap<String, SharedVar>,
    /// lock name -> the lock.
    locks: HashMap<String, Lock>,
    /// scloc name -> the SC location.
    sclocs: HashMap<String, Shared<ScLoc>>,
}

/// A declared lock, built for every thread of the test (participant i = thread i).
enum Lock {
    Weak(Shared<WLock>),
    Strong(Shared<WLock>),
    Node(Shared<NLock>),
}

impl Names {
    /// The word an operand names, seen from `node` (a var means that node's copy).
    fn word(&self, name: &str, node: NodeId) -> Loc {
        if let Some(&loc) = self.locs.get(name) {
            return loc;
        }
        self.vars
            .get(name)
            .map(|var| var.copy(node))
            .unwrap_or_else(|| panic!("validated test names {name} as a location"))
    }
}

/// Node number of the file (from 1) to a [`NodeId`] (from 0).
fn node_id(file_node: u16) -> NodeId {
    assert!(file_node >= 1, "litmus nodes count from 1");
    NodeId(file_node - 1)
}

/// The first work id of a named `w=NAME` (fresh ids count up from 1 below it); both stay
/// below the libraries' reserved range.
const NAMED_WORK_IDS: u32 = 0x2000_0000;

/// Compiles a validated test.
pub fn compile(test: &LitmusTest) -> Result<Program, CompileError> {
    let mut layout = LayoutBuilder::new(test.nodes);
    let participants: Vec<NodeId> = test.threads.iter().map(|t| node_id(t.node)).collect();
    let mut names = Names {
        locs: HashMap::new(),
        vars: HashMap::new(),
        locks: HashMap::new(),
        sclocs: HashMap::new(),
    };
    let mut init = Vec::new();
    for decl in &test.decls {
        match decl.kind {
            DeclKind::Loc { node, init: v } => {
                let loc = layout.alloc(node_id(node));
                names.locs.insert(decl.name.clone(), loc);
                init.push((loc, v));
            }
            DeclKind::ScLoc { node, init: v } => {
                let x = ScLoc::new(&mut layout, node_id(node), &participants);
                names.locs.insert(decl.name.clone(), x.loc());
                init.push((x.loc(), v));
                names.sclocs.insert(decl.name.clone(), x);
            }
            DeclKind::Var { init: v } => {
                let var = SharedVar::new(&mut layout);
                init.extend((0..test.nodes).map(|n| (var.copy(NodeId(n)), v)));
                names.vars.insert(decl.name.clone(), var);
            }
            DeclKind::Lock(kind) if participants.is_empty() => {
                let _ = kind; // no thread can use it
            }
            DeclKind::Lock(LockKind::Wlock) => {
                let lock = WLock::new(&mut layout, NodeId(0), &participants);
                names.locks.insert(decl.name.clone(), Lock::Weak(lock));
            }
            DeclKind::Lock(LockKind::Slock) => {
                let lock = WLock::new(&mut layout, NodeId(0), &participants);
                names.locks.insert(decl.name.clone(), Lock::Strong(lock));
            }
            DeclKind::Lock(LockKind::Nlock(node)) => {
                let lock = NLock::new(&mut layout, node_id(node), &participants);
                names.locks.insert(decl.name.clone(), Lock::Node(lock));
            }
        }
    }
    let mut private = Vec::new();
    for slot in 0..participants.len() {
        for lock in names.locks.values() {
            let words = match lock {
                Lock::Weak(l) | Lock::Strong(l) => l.private_words(slot),
                Lock::Node(l) => l.private_words(slot),
            };
            private.extend(words.into_iter().map(|w| (w, slot)));
        }
        for x in names.sclocs.values() {
            private.extend(x.private_words(slot).into_iter().map(|w| (w, slot)));
        }
    }
    let mut threads = Vec::new();
    let mut registers: Vec<BTreeMap<Reg, usize>> = Vec::new();
    for (slot, thread) in test.threads.iter().enumerate() {
        let node = node_id(thread.node);
        let mut regs: BTreeMap<Reg, usize> = BTreeMap::new();
        let mut work_ids: HashMap<String, WorkId> = HashMap::new();
        let mut fresh = 0u32;
        let mut code = Vec::new();
        for instr in &thread.instrs {
            let mut reg_index = |r: Reg| {
                let next = regs.len();
                *regs.entry(r).or_insert(next)
            };
            let mut work = |w: &Option<String>| -> WorkId {
                match w {
                    Some(name) => {
                        let next = WorkId(NAMED_WORK_IDS | work_ids.len() as u32);
                        *work_ids.entry(name.clone()).or_insert(next)
                    }
                    None => {
                        fresh += 1;
                        WorkId(fresh)
                    }
                }
            };
            let word = |name: &str| names.word(name, node);
            let lock = |name: &str| names.locks.get(name).expect("validated lock name");
            let scloc = |name: &str| names.sclocs.get(name).expect("validated scloc name");
            let op = |op: Op| Action::Op(op);
            let (action, reg) = match &instr.kind {
                InstrKind::Store { loc, value } => (
                    op(Op::Store {
                        loc: word(loc),
                        value: *value,
                    }),
                    None,
                ),
                InstrKind::Load { reg, loc } => {
                    (op(Op::Load { loc: word(loc) }), Some(reg_index(*reg)))
                }
                InstrKind::Cas {
                    reg,
                    loc,
                    expected,
                    new,
                } => (
                    op(Op::Cas {
                        loc: word(loc),
                        expected: *expected,
                        new: *new,
                    }),
                    Some(reg_index(*reg)),
                ),
                InstrKind::Mfence => (op(Op::Mfence), None),
                InstrKind::Put {
                    remote,
                    local,
                    work: w,
                } => (
                    op(Op::Put {
                        remote: word(remote),
                        local: word(local),
                        work_id: work(w),
                    }),
                    None,
                ),
                InstrKind::PutInline {
                    remote,
                    value,
                    work: w,
                } => (
                    op(Op::PutInline {
                        remote: word(remote),
                        value: *value,
                        work_id: work(w),
                    }),
                    None,
                ),
                InstrKind::Get {
                    local,
                    remote,
                    work: w,
                } => (
                    op(Op::Get {
                        local: word(local),
                        remote: word(remote),
                        work_id: work(w),
                    }),
                    None,
                ),
                InstrKind::Rcas {
                    local,
                    remote,
                    expected,
                    new,
                    work: w,
                } => (
                    op(Op::Atomic {
                        local: word(local),
                        remote: word(remote),
                        rmw: Rmw::Cas {
                            expected: *expected,
                            new: *new,
                        },
                        work_id: work(w),
                    }),
                    None,
                ),
                InstrKind::Rfaa {
                    local,
                    remote,
                    add,
                    work: w,
                } => (
                    op(Op::Atomic {
                        local: word(local),
                        remote: word(remote),
                        rmw: Rmw::Faa { add: *add },
                        work_id: work(w),
                    }),
                    None,
                ),
                InstrKind::Wait { work: w } => (
                    op(Op::Wait {
                        work_id: work(&Some(w.clone())),
                    }),
                    None,
                ),
                InstrKind::Poll { node } => (
                    op(Op::Poll {
                        node: node_id(*node),
                    }),
                    None,
                ),
                InstrKind::Rfence { node } => (
                    op(Op::Rfence {
                        node: node_id(*node),
                    }),
                    None,
                ),
                InstrKind::Gf { node: Some(n) } => {
                    (op(Op::GlobalFence { node: node_id(*n) }), None)
                }
                InstrKind::Gf { node: None } => {
                    // `gf *`: a global fence towards every node, in order.
                    for n in 0..test.nodes.saturating_sub(1) {
                        code.push(Compiled::op(Op::GlobalFence { node: NodeId(n) }));
                    }
                    (
                        op(Op::GlobalFence {
                            node: NodeId(test.nodes - 1),
                        }),
                        None,
                    )
                }
                InstrKind::Bcast {
                    var,
                    nodes,
                    work: w,
                } => {
                    let targets: Vec<NodeId> = nodes.iter().map(|&n| node_id(n)).collect();
                    let shared = names.vars.get(var).expect("validated var name");
                    (
                        Action::Lib(LibCall::Bcast(shared.bcast(node, &targets, work(w)))),
                        None,
                    )
                }
                InstrKind::Acq { lock: name } => {
                    let call = match lock(name) {
                        Lock::Weak(l) | Lock::Strong(l) => {
                            LibCall::WlockAcquire(wlock::acquire(l, slot))
                        }
                        Lock::Node(l) => LibCall::NlockAcquire(nlock::acquire(l, slot)),
                    };
                    (Action::Lib(call), None)
                }
                InstrKind::Rel { lock: name } => {
                    let call = match lock(name) {
                        Lock::Weak(l) => LibCall::WlockRelease(wlock::release(l, slot)),
                        Lock::Strong(l) => {
                            LibCall::SlockRelease(slock::release(l, slot, test.nodes))
                        }
                        Lock::Node(l) => LibCall::NlockRelease(nlock::release(l, slot)),
                    };
                    (Action::Lib(call), None)
                }
                InstrKind::ScWrite { loc, value } => (
                    Action::Lib(LibCall::Sc(sc::access(
                        scloc(loc),
                        slot,
                        ScAccess::Write(*value),
                    ))),
                    None,
                ),
                InstrKind::ScRead { reg, loc } => (
                    Action::Lib(LibCall::Sc(sc::access(scloc(loc), slot, ScAccess::Read))),
                    Some(reg_index(*reg)),
                ),
                InstrKind::ScCas {
                    reg,
                    loc,
                    expected,
                    new,
                } => (
                    Action::Lib(LibCall::Sc(sc::access(
                        scloc(loc),
                        slot,
                        ScAccess::Rmw(Rmw::Cas {
                            expected: *expected,
                            new: *new,
                        }),
                    ))),
                    Some(reg_index(*reg)),
                ),
                InstrKind::ScFaa { reg, loc, add } => (
                    Action::Lib(LibCall::Sc(sc::access(
                        scloc(loc),
                        slot,
                        ScAccess::Rmw(Rmw::Faa { add: *add }),
                    ))),
                    Some(reg_index(*reg)),
                ),
            };
            code.push(Compiled { action, reg });
        }
        let count = regs.len();
        registers.push(regs);
        threads.push((node, LitmusThread::new(code, count)));
    }
    let observed = observed_names(test, &names, &registers);
    Ok(Program {
        layout: layout.build(),
        init,
        threads,
        observed,
        private,
    })
}

/// The condition's atoms, deduplicated and sorted by key.
fn observed_names(
    test: &LitmusTest,
    names: &Names,
    registers: &[BTreeMap<Reg, usize>],
) -> Vec<Observed> {
    let mut atoms = Vec::new();
    collect_atoms(&test.exists, &mut atoms);
    let mut observed: BTreeMap<String, Source> = BTreeMap::new();
    for atom in atoms {
        let (key, source) = atom_source(test, names, registers, atom);
        observed.insert(key, source);
    }
    observed
        .into_iter()
        .map(|(key, source)| Observed { key, source })
        .collect()
}

fn collect_atoms<'a>(cond: &'a Cond, out: &mut Vec<&'a Atom>) {
    match cond {
        Cond::Atom(a) => out.push(a),
        Cond::And(a, b) | Cond::Or(a, b) => {
            collect_atoms(a, out);
            collect_atoms(b, out);
        }
        Cond::Not(a) => collect_atoms(a, out),
    }
}

/// The printed key of an atom and where its value lives.
pub(crate) fn atom_key(atom: &Atom) -> String {
    match atom {
        Atom::Mem {
            name, node: None, ..
        } => name.clone(),
        Atom::Mem {
            name,
            node: Some(n),
            ..
        } => format!("{name}@{n}"),
        Atom::Reg { thread, reg, .. } => format!("{thread}:r{}", reg.0),
    }
}

fn atom_source(
    test: &LitmusTest,
    names: &Names,
    registers: &[BTreeMap<Reg, usize>],
    atom: &Atom,
) -> (String, Source) {
    let source = match atom {
        Atom::Mem {
            name, node: None, ..
        } => Source::Mem(names.word(name, NodeId(0))),
        Atom::Mem {
            name,
            node: Some(n),
            ..
        } => Source::Mem(names.word(name, node_id(*n))),
        Atom::Reg { thread, reg, .. } => {
            let t = test
                .threads
                .iter()
                .position(|th| &th.name == thread)
                .expect("validated thread name");
            match registers[t].get(reg) {
                Some(&r) => Source::Reg { thread: t, reg: r },
                // A register the thread never writes stays 0: observe a constant 0 through
                // a register slot that does not exist.
                None => Source::Reg {
                    thread: t,
                    reg: usize::MAX,
                },
            }
        }
    };
    (atom_key(atom), source)
}

/// Evaluates the condition on an outcome.
pub fn holds(cond: &Cond, observed: &[Observed], outcome: &Outcome) -> bool {
    match cond {
        Cond::Atom(atom) => {
            let key = atom_key(atom);
            let i = observed
                .iter()
                .position(|o| o.key == key)
                .expect("observed covers the condition");
            let value = match atom {
                Atom::Mem { value, .. } | Atom::Reg { value, .. } => *value,
            };
            outcome[i] == value
        }
        Cond::And(a, b) => holds(a, observed, outcome) && holds(b, observed, outcome),
        Cond::Or(a, b) => holds(a, observed, outcome) || holds(b, observed, outcome),
        Cond::Not(a) => !holds(a, observed, outcome),
    }
}

/// Reads an outcome off a final state given memory and thread registers.
pub fn project(
    observed: &[Observed],
    read_mem: impl Fn(Loc) -> u64,
    regs: impl Fn(usize) -> Vec<u64>,
) -> Outcome {
    observed
        .iter()
        .map(|o| match o.source {
            Source::Mem(loc) => read_mem(loc),
            Source::Reg { thread, reg } => regs(thread).get(reg).copied().unwrap_or(0),
        })
        .collect()
}

/// An outcome as a map from the condition's names to values.
pub(crate) fn named(program: &Program, outcome: &Outcome) -> BTreeMap<String, u64> {
    program
        .observed
        .iter()
        .map(|o| o.key.clone())
        .zip(outcome.iter().copied())
        .collect()
}
