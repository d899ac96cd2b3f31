//! A litmus thread as a [`Process`]: a list of operations, a program counter, registers.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use velos_rdma::{Op, Process, RdmaError, Reply, Step};

/// One compiled instruction: an operation, and the register that receives its value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Compiled {
    /// The operation issued.
    pub op: Op,
    /// Dense index of the register receiving a `Value` reply (`load`, `cas`).
    pub reg: Option<usize>,
}

/// The code of a thread, shared by every copy of its state. Compared and hashed by
/// identity: all states of one exploration share the same code.
#[derive(Clone, Debug)]
pub struct Code(pub Arc<[Compiled]>);

impl PartialEq for Code {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Code {}

impl Hash for Code {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (Arc::as_ptr(&self.0) as *const Compiled as usize).hash(state);
    }
}

/// A litmus thread's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LitmusThread {
    code: Code,
    /// Index of the instruction whose operation is outstanding (or the next one).
    pc: usize,
    started: bool,
    /// Registers, densely indexed.
    pub regs: Vec<u64>,
    /// The first operation that failed, if any; the thread stops there.
    pub error: Option<RdmaError>,
    polls: bool,
}

impl LitmusThread {
    /// A thread that will run `code` with `registers` registers, all 0.
    pub fn new(code: Vec<Compiled>, registers: usize) -> LitmusThread {
        let polls = code.iter().any(|c| matches!(c.op, Op::Poll { .. }));
        LitmusThread {
            code: Code(code.into()),
            pc: 0,
            started: false,
            regs: vec![0; registers],
            error: None,
            polls,
        }
    }
}

impl Process for LitmusThread {
    fn resume(&mut self, reply: Reply) -> Step {
        if self.started {
            let current = &self.code.0[self.pc];
            match reply {
                Reply::Value(v) => {
                    if let Some(r) = current.reg {
                        self.regs[r] = v;
                    }
                }
                Reply::Failed(e) => {
                    self.error = Some(e);
                    return Step::Done;
                }
                Reply::Done | Reply::Start => {}
            }
            self.pc += 1;
        }
        self.started = true;
        match self.code.0.get(self.pc) {
            Some(c) => Step::Op(c.op),
            None => Step::Done,
        }
    }

    fn polls(&self) -> bool {
        self.polls
    }
}
