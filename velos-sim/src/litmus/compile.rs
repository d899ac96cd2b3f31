//! Compiles a parsed litmus test for a backend: memory layout, initial values, one
//! [`LitmusThread`] per thread, and the projection of final states on the condition's names.

use super::ast::{Atom, Cond, DeclKind, InstrKind, LitmusTest, Reg};
use super::program::{Compiled, LitmusThread};
use std::collections::{BTreeMap, HashMap};
use velos_rdma::{Layout, Loc, NodeId, Op, Rmw, WorkId};

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
    /// var name -> its word on each node (index = node).
    vars: HashMap<String, Vec<Loc>>,
}

impl Names {
    /// The word an operand names, seen from `node` (a var means that node's copy).
    fn word(&self, name: &str, node: NodeId) -> Loc {
        if let Some(&loc) = self.locs.get(name) {
            return loc;
        }
        self.vars
            .get(name)
            .map(|copies| copies[node.index()])
            .unwrap_or_else(|| panic!("validated test names {name} as a location"))
    }
}

/// Node number of the file (from 1) to a [`NodeId`] (from 0).
fn node_id(file_node: u16) -> NodeId {
    assert!(file_node >= 1, "litmus nodes count from 1");
    NodeId(file_node - 1)
}

/// Compiles a validated test.
pub fn compile(test: &LitmusTest) -> Result<Program, CompileError> {
    let mut words = vec![0u32; usize::from(test.nodes)];
    let mut alloc = |node: NodeId| {
        let w = &mut words[node.index()];
        *w += 1;
        Loc::word(node, *w - 1)
    };
    let mut names = Names {
        locs: HashMap::new(),
        vars: HashMap::new(),
    };
    let mut init = Vec::new();
    for decl in &test.decls {
        match decl.kind {
            DeclKind::Loc { node, init: v } | DeclKind::ScLoc { node, init: v } => {
                let loc = alloc(node_id(node));
                names.locs.insert(decl.name.clone(), loc);
                init.push((loc, v));
            }
            DeclKind::Var { init: v } => {
                let copies: Vec<Loc> = (0..test.nodes).map(|n| alloc(NodeId(n))).collect();
                init.extend(copies.iter().map(|&l| (l, v)));
                names.vars.insert(decl.name.clone(), copies);
            }
            DeclKind::Lock(_) => {}
        }
    }
    let mut threads = Vec::new();
    let mut registers: Vec<BTreeMap<Reg, usize>> = Vec::new();
    for thread in &test.threads {
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
                        let next = WorkId(1 << 31 | work_ids.len() as u32);
                        *work_ids.entry(name.clone()).or_insert(next)
                    }
                    None => {
                        fresh += 1;
                        WorkId(fresh)
                    }
                }
            };
            let word = |name: &str| names.word(name, node);
            let (op, reg) = match &instr.kind {
                InstrKind::Store { loc, value } => (
                    Op::Store {
                        loc: word(loc),
                        value: *value,
                    },
                    None,
                ),
                InstrKind::Load { reg, loc } => {
                    (Op::Load { loc: word(loc) }, Some(reg_index(*reg)))
                }
                InstrKind::Cas {
                    reg,
                    loc,
                    expected,
                    new,
                } => (
                    Op::Cas {
                        loc: word(loc),
                        expected: *expected,
                        new: *new,
                    },
                    Some(reg_index(*reg)),
                ),
                InstrKind::Mfence => (Op::Mfence, None),
                InstrKind::Put {
                    remote,
                    local,
                    work: w,
                } => (
                    Op::Put {
                        remote: word(remote),
                        local: word(local),
                        work_id: work(w),
                    },
                    None,
                ),
                InstrKind::PutInline {
                    remote,
                    value,
                    work: w,
                } => (
                    Op::PutInline {
                        remote: word(remote),
                        value: *value,
                        work_id: work(w),
                    },
                    None,
                ),
                InstrKind::Get {
                    local,
                    remote,
                    work: w,
                } => (
                    Op::Get {
                        local: word(local),
                        remote: word(remote),
                        work_id: work(w),
                    },
                    None,
                ),
                InstrKind::Rcas {
                    local,
                    remote,
                    expected,
                    new,
                    work: w,
                } => (
                    Op::Atomic {
                        local: word(local),
                        remote: word(remote),
                        rmw: Rmw::Cas {
                            expected: *expected,
                            new: *new,
                        },
                        work_id: work(w),
                    },
                    None,
                ),
                InstrKind::Rfaa {
                    local,
                    remote,
                    add,
                    work: w,
                } => (
                    Op::Atomic {
                        local: word(local),
                        remote: word(remote),
                        rmw: Rmw::Faa { add: *add },
                        work_id: work(w),
                    },
                    None,
                ),
                InstrKind::Wait { work: w } => (
                    Op::Wait {
                        work_id: work(&Some(w.clone())),
                    },
                    None,
                ),
                InstrKind::Poll { node } => (
                    Op::Poll {
                        node: node_id(*node),
                    },
                    None,
                ),
                InstrKind::Rfence { node } => (
                    Op::Rfence {
                        node: node_id(*node),
                    },
                    None,
                ),
                InstrKind::Gf { node: Some(n) } => (Op::GlobalFence { node: node_id(*n) }, None),
                InstrKind::Gf { node: None } => {
                    // `gf *`: a global fence towards every node, in order.
                    for n in 0..test.nodes.saturating_sub(1) {
                        code.push(Compiled {
                            op: Op::GlobalFence { node: NodeId(n) },
                            reg: None,
                        });
                    }
                    (
                        Op::GlobalFence {
                            node: NodeId(test.nodes - 1),
                        },
                        None,
                    )
                }
                InstrKind::Bcast { .. }
                | InstrKind::Acq { .. }
                | InstrKind::Rel { .. }
                | InstrKind::ScWrite { .. }
                | InstrKind::ScRead { .. }
                | InstrKind::ScCas { .. }
                | InstrKind::ScFaa { .. } => {
                    return Err(CompileError {
                        line: instr.line,
                        message: "this library instruction (bcast, acq, rel, sc_*) is not supported yet: \
                                  it arrives with the synchronisation libraries"
                            .into(),
                    });
                }
            };
            code.push(Compiled { op, reg });
        }
        let count = regs.len();
        registers.push(regs);
        threads.push((node, LitmusThread::new(code, count)));
    }
    let observed = observed_names(test, &names, &registers);
    Ok(Program {
        layout: Layout::from_words(words),
        init,
        threads,
        observed,
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
