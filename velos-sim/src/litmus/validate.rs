//! The semantic checks of a `.litmus` file: the namespace of declared names, node ranges,
//! the kind and placement of every instruction operand, work ids, and the names in the
//! `exists` condition.
//!
//! The parser calls these checks line by line, as soon as a line has been read, so that the
//! first error reported is the one on the earliest line.

use std::collections::HashMap;

use super::ast::{Atom, Cond, InstrKind, LockKind, ParseError, Thread};
use super::lex::{check_ident, error, is_ident, is_reg_like, parse_int};

/// The largest supported `nodes N`.
pub(crate) const MAX_NODES: u64 = 64;

/// What a declared name denotes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sym {
    /// `loc NAME@NODE`.
    Loc(u16),
    /// `var NAME`.
    Var,
    /// `lock NAME KIND`.
    Lock(LockKind),
    /// `scloc NAME@NODE`.
    ScLoc(u16),
    /// `thread NAME@NODE`.
    Thread(u16),
}

impl Sym {
    /// "a location", "a lock", ...: for messages.
    fn describe(self) -> &'static str {
        match self {
            Sym::Loc(_) => "a location",
            Sym::Var => "a variable",
            Sym::Lock(_) => "a lock",
            Sym::ScLoc(_) => "an SC location",
            Sym::Thread(_) => "a thread",
        }
    }
}

/// The node count, as found before the walk over the file (see [`Scope::new`]).
#[derive(Clone, Debug)]
pub(crate) enum NodeCount {
    /// No `nodes` line before the first thread.
    Missing,
    /// `nodes N` with a valid `N`.
    Known(u16),
    /// The first `nodes` line is malformed: using a node reports its error.
    Broken(ParseError),
}

/// How an instruction uses a location operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Access {
    /// A CPU access: a `loc`/`scloc` on the thread's node, or a `var` (this node's copy).
    Cpu,
    /// The local operand of an RDMA operation: the same places as a CPU access.
    Local(&'static str),
    /// The remote operand of an RDMA operation: any `loc`/`scloc`.
    Remote(&'static str),
}

/// Declared names and the node count.
#[derive(Debug)]
pub(crate) struct Scope {
    nodes: NodeCount,
    names: HashMap<String, (Sym, usize)>,
}

impl Scope {
    /// A scope without names. `nodes` is the count found by a scan that precedes the walk,
    /// so that the `nodes` line may be anywhere among the declarations.
    pub(crate) fn new(nodes: NodeCount) -> Self {
        Scope {
            nodes,
            names: HashMap::new(),
        }
    }

    /// The node count, or the error of its absence (`line` is the line that needs it).
    pub(crate) fn node_count(&self, line: usize) -> Result<u16, ParseError> {
        match &self.nodes {
            NodeCount::Known(count) => Ok(*count),
            NodeCount::Broken(err) => Err(err.clone()),
            NodeCount::Missing => Err(error(
                line,
                "missing `nodes N` line: the node count is declared before the first thread",
            )),
        }
    }

    /// Parses a node number and checks that it is in `1..=N`.
    pub(crate) fn node(&self, word: &str, line: usize) -> Result<u16, ParseError> {
        let node = parse_int(word, line)?;
        let count = self.node_count(line)?;
        match u16::try_from(node) {
            Ok(node) if (1..=count).contains(&node) => Ok(node),
            _ => Err(error(
                line,
                format!("node {word} is out of range: this test has nodes 1..{count}"),
            )),
        }
    }

    /// Declares `name` (a location, variable, lock or thread: one namespace).
    pub(crate) fn declare(&mut self, name: &str, sym: Sym, line: usize) -> Result<(), ParseError> {
        let what = match sym {
            Sym::Loc(_) | Sym::ScLoc(_) => "location",
            Sym::Var => "variable",
            Sym::Lock(_) => "lock",
            Sym::Thread(_) => "thread",
        };
        check_ident(name, what, line)?;
        if let Some((old, old_line)) = self.names.get(name) {
            return Err(error(
                line,
                format!(
                    "duplicate name {name}: already declared as {} at line {old_line}",
                    old.describe()
                ),
            ));
        }
        self.names.insert(name.to_owned(), (sym, line));
        Ok(())
    }

    /// Looks up a name used as `wanted` ("a location", "a lock", ...).
    fn lookup(&self, name: &str, wanted: &str, line: usize) -> Result<Sym, ParseError> {
        if let Some((sym, _)) = self.names.get(name) {
            return Ok(*sym);
        }
        let message = if is_reg_like(name) {
            format!("{name} is a register, not {wanted}")
        } else if is_ident(name) {
            format!("unknown name {name}: it is not declared")
        } else {
            format!("expected {wanted}, found `{name}`")
        };
        Err(error(line, message))
    }

    /// Fails with "NAME is KIND, not WANTED".
    fn wrong_kind(name: &str, sym: Sym, wanted: &str, line: usize) -> ParseError {
        error(line, format!("{name} is {}, not {wanted}", sym.describe()))
    }

    /// Checks a location operand of `thread`'s instruction.
    fn check_loc(
        &self,
        thread: &Thread,
        name: &str,
        access: Access,
        line: usize,
    ) -> Result<(), ParseError> {
        let sym = self.lookup(name, "a location", line)?;
        let home = match sym {
            Sym::Loc(node) | Sym::ScLoc(node) => node,
            Sym::Var => {
                return match access {
                    Access::Cpu | Access::Local(_) => Ok(()),
                    Access::Remote(op) => Err(error(
                        line,
                        format!(
                            "{name} is a variable: the remote operand of {op} must be a location \
                             (a variable's copies are reached with bcast)"
                        ),
                    )),
                };
            }
            Sym::Lock(_) | Sym::Thread(_) => {
                return Err(Self::wrong_kind(name, sym, "a location", line));
            }
        };
        let (who, node) = (&thread.name, thread.node);
        match access {
            Access::Remote(_) => Ok(()),
            _ if home == node => Ok(()),
            Access::Cpu => Err(error(
                line,
                format!(
                    "CPU access to {name}, which is on node {home}, from thread {who} on node {node}"
                ),
            )),
            Access::Local(op) => Err(error(
                line,
                format!(
                    "{op} with local operand {name}, which is on node {home}, from thread {who} on node {node}"
                ),
            )),
        }
    }

    /// Checks that `name` is declared as a kind accepted by `accept`, described as `wanted`.
    fn check_kind(
        &self,
        name: &str,
        wanted: &str,
        accept: fn(Sym) -> bool,
        line: usize,
    ) -> Result<(), ParseError> {
        let sym = self.lookup(name, wanted, line)?;
        if accept(sym) {
            Ok(())
        } else {
            Err(Self::wrong_kind(name, sym, wanted, line))
        }
    }

    /// Checks one instruction of `thread`, whose `instrs` are the instructions before it.
    pub(crate) fn check_instr(
        &self,
        thread: &Thread,
        kind: &InstrKind,
        line: usize,
    ) -> Result<(), ParseError> {
        use InstrKind as I;
        let is_lock = |sym| matches!(sym, Sym::Lock(_));
        let is_scloc = |sym| matches!(sym, Sym::ScLoc(_));
        let is_var = |sym| matches!(sym, Sym::Var);
        match kind {
            I::Store { loc, .. } | I::Load { loc, .. } | I::Cas { loc, .. } => {
                self.check_loc(thread, loc, Access::Cpu, line)
            }
            I::Mfence | I::Poll { .. } | I::Rfence { .. } | I::Gf { .. } => Ok(()),
            I::Put { remote, local, .. } => {
                self.check_rdma("put", thread, Some(local), remote, line)
            }
            I::PutInline { remote, .. } => self.check_rdma("puti", thread, None, remote, line),
            I::Get { local, remote, .. } => {
                self.check_rdma("get", thread, Some(local), remote, line)
            }
            I::Rcas { local, remote, .. } => {
                self.check_rdma("rcas", thread, Some(local), remote, line)
            }
            I::Rfaa { local, remote, .. } => {
                self.check_rdma("rfaa", thread, Some(local), remote, line)
            }
            I::Wait { work } => {
                let carried = thread
                    .instrs
                    .iter()
                    .any(|instr| work_of(&instr.kind) == Some(work.as_str()));
                if carried {
                    Ok(())
                } else {
                    Err(error(
                        line,
                        format!(
                            "wait for work id {work} that no earlier operation of this thread carries"
                        ),
                    ))
                }
            }
            I::Bcast { var, .. } => self.check_kind(var, "a variable", is_var, line),
            I::Acq { lock } | I::Rel { lock } => self.check_kind(lock, "a lock", is_lock, line),
            I::ScWrite { loc, .. }
            | I::ScRead { loc, .. }
            | I::ScCas { loc, .. }
            | I::ScFaa { loc, .. } => {
                self.check_kind(loc, "an SC location (declared with scloc)", is_scloc, line)
            }
        }
    }

    /// Checks the operands of an RDMA operation `op`, in the order they are written.
    fn check_rdma(
        &self,
        op: &'static str,
        thread: &Thread,
        local: Option<&String>,
        remote: &str,
        line: usize,
    ) -> Result<(), ParseError> {
        let check_local = || {
            local.map_or(Ok(()), |local| {
                self.check_loc(thread, local, Access::Local(op), line)
            })
        };
        // `put Lremote Llocal` names the remote operand first, the others the local one.
        if op == "put" {
            self.check_loc(thread, remote, Access::Remote(op), line)?;
            check_local()
        } else {
            check_local()?;
            self.check_loc(thread, remote, Access::Remote(op), line)
        }
    }

    /// Checks the names of a condition (node numbers were checked while parsing it).
    pub(crate) fn check_cond(&self, cond: &Cond, line: usize) -> Result<(), ParseError> {
        match cond {
            Cond::Atom(atom) => self.check_atom(atom, line),
            Cond::Not(inner) => self.check_cond(inner, line),
            Cond::And(a, b) | Cond::Or(a, b) => {
                self.check_cond(a, line)?;
                self.check_cond(b, line)
            }
        }
    }

    fn check_atom(&self, atom: &Atom, line: usize) -> Result<(), ParseError> {
        match atom {
            Atom::Reg { thread, .. } => match self.names.get(thread) {
                Some((Sym::Thread(_), _)) => Ok(()),
                Some((sym, _)) => Err(Self::wrong_kind(thread, *sym, "a thread", line)),
                None => Err(error(line, format!("unknown thread {thread}"))),
            },
            Atom::Mem {
                name, node: None, ..
            } => match self.lookup(name, "a location", line)? {
                Sym::Loc(_) | Sym::ScLoc(_) => Ok(()),
                Sym::Var => Err(error(
                    line,
                    format!(
                        "{name} is a variable, with one copy per node: write {name}@NODE = INT"
                    ),
                )),
                Sym::Thread(_) => Err(error(
                    line,
                    format!("{name} is a thread: write {name}:rN = INT"),
                )),
                sym @ Sym::Lock(_) => Err(Self::wrong_kind(name, sym, "a location", line)),
            },
            Atom::Mem {
                name,
                node: Some(node),
                ..
            } => match self.lookup(name, "a variable", line)? {
                Sym::Var => Ok(()),
                sym => Err(error(
                    line,
                    format!(
                        "{name}@{node}: only variables have per-node copies, and {name} is {}",
                        sym.describe()
                    ),
                )),
            },
        }
    }
}

/// The work id an instruction carries, if it was given one with `w=`.
pub(crate) fn work_of(kind: &InstrKind) -> Option<&str> {
    use InstrKind as I;
    match kind {
        I::Put { work, .. }
        | I::PutInline { work, .. }
        | I::Get { work, .. }
        | I::Rcas { work, .. }
        | I::Rfaa { work, .. }
        | I::Bcast { work, .. } => work.as_deref(),
        _ => None,
    }
}
