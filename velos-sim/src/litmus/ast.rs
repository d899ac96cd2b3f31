//! The syntax tree of a `.litmus` file (grammar: `shared/design/litmus-format.md`).
//!
//! Node numbers here are the file's, counted from 1; conversion to [`velos_rdma::NodeId`]
//! (counted from 0) happens when a test is compiled for a backend.

/// A parsed and validated litmus test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LitmusTest {
    /// `litmus NAME`.
    pub name: String,
    /// `nodes N`: nodes are numbered `1..=nodes`.
    pub nodes: u16,
    /// Declarations (`loc`, `var`, `lock`, `scloc`) in file order.
    pub decls: Vec<Decl>,
    /// Threads in file order.
    pub threads: Vec<Thread>,
    /// The `exists` condition.
    pub exists: Cond,
    /// The `expect` line.
    pub expect: Expect,
    /// Whether `allow stuck` was given.
    pub allow_stuck: bool,
}

/// A declaration of a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decl {
    /// The declared name (locations, variables, locks and threads share one namespace).
    pub name: String,
    /// What it declares.
    pub kind: DeclKind,
    /// 1-based line in the file.
    pub line: usize,
}

/// What a declaration declares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeclKind {
    /// `loc NAME@NODE [= INT]`.
    Loc {
        /// Home node (1-based).
        node: u16,
        /// Initial value.
        init: u64,
    },
    /// `var NAME [= INT]`: an sv shared variable, one copy per node.
    Var {
        /// Initial value of every copy.
        init: u64,
    },
    /// `lock NAME KIND`.
    Lock(LockKind),
    /// `scloc NAME@NODE [= INT]`: a location of the SC library with its node lock on NODE.
    ScLoc {
        /// Home node (1-based).
        node: u16,
        /// Initial value.
        init: u64,
    },
}

/// The kind of a declared lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LockKind {
    /// `wlock`: weak lock (paper §4.2).
    Wlock,
    /// `slock`: strong lock (paper §4.3).
    Slock,
    /// `nlock@NODE`: node lock on NODE (paper §4.4), 1-based.
    Nlock(u16),
}

/// A thread and its instructions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Thread {
    /// Thread name.
    pub name: String,
    /// The node it runs on (1-based).
    pub node: u16,
    /// Instructions in order.
    pub instrs: Vec<Instr>,
    /// 1-based line of the `thread` line.
    pub line: usize,
}

/// A register `rN` of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Reg(pub u32);

/// A work id as written: `w=NAME`, or none (a fresh id of its own).
pub type WorkName = Option<String>;

/// One instruction, with its line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instr {
    /// What it does.
    pub kind: InstrKind,
    /// 1-based line in the file.
    pub line: usize,
}

/// The instructions of the format. Location operands are declared names; the validator
/// has checked that CPU operands are on the thread's node (or are `var`s).
#[derive(Clone, Debug, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum InstrKind {
    Store {
        loc: String,
        value: u64,
    },
    Load {
        reg: Reg,
        loc: String,
    },
    Cas {
        reg: Reg,
        loc: String,
        expected: u64,
        new: u64,
    },
    Mfence,
    Put {
        remote: String,
        local: String,
        work: WorkName,
    },
    PutInline {
        remote: String,
        value: u64,
        work: WorkName,
    },
    Get {
        local: String,
        remote: String,
        work: WorkName,
    },
    Rcas {
        local: String,
        remote: String,
        expected: u64,
        new: u64,
        work: WorkName,
    },
    Rfaa {
        local: String,
        remote: String,
        add: u64,
        work: WorkName,
    },
    Wait {
        work: String,
    },
    Poll {
        node: u16,
    },
    Rfence {
        node: u16,
    },
    /// `gf N` (`Some(N)`) or `gf *` (`None`).
    Gf {
        node: Option<u16>,
    },
    Bcast {
        var: String,
        nodes: Vec<u16>,
        work: WorkName,
    },
    Acq {
        lock: String,
    },
    Rel {
        lock: String,
    },
    ScWrite {
        loc: String,
        value: u64,
    },
    ScRead {
        reg: Reg,
        loc: String,
    },
    ScCas {
        reg: Reg,
        loc: String,
        expected: u64,
        new: u64,
    },
    ScFaa {
        reg: Reg,
        loc: String,
        add: u64,
    },
}

/// The `exists` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Cond {
    /// An atom.
    Atom(Atom),
    /// `A && B`.
    And(Box<Cond>, Box<Cond>),
    /// `A || B`.
    Or(Box<Cond>, Box<Cond>),
    /// `! A`.
    Not(Box<Cond>),
}

/// An atom of a condition: a final memory or register value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Atom {
    /// `L = INT` (`node: None`) or, for a var, `NAME@NODE = INT`.
    Mem {
        /// Location or variable name.
        name: String,
        /// The copy's node for a `var` (1-based).
        node: Option<u16>,
        /// The value compared with.
        value: u64,
    },
    /// `THREAD:R = INT`.
    Reg {
        /// Thread name.
        thread: String,
        /// Register.
        reg: Reg,
        /// The value compared with.
        value: u64,
    },
}

/// The `expect` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Expect {
    /// Some final state satisfies the condition.
    Allowed,
    /// No final state satisfies it.
    Forbidden,
}

/// A parse or validation error: the runner prints it as `FILE:LINE: message`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{line}: {message}")]
pub struct ParseError {
    /// 1-based line (0 when the error concerns the whole file, e.g. a missing `exists`;
    /// the parser then reports the last line instead).
    pub line: usize,
    /// What is wrong, in a sentence.
    pub message: String,
}
