//! A litmus thread as a [`Process`]: a list of operations and library calls, a program
//! counter, registers.

use super::libcall::LibCall;
use velos_rdma::sync::Yield;
use velos_rdma::{Op, Process, RdmaError, Reply, Shared, Step};

/// What one compiled instruction does.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Issue one operation.
    Op(Op),
    /// Run a library routine (this is its initial state).
    Lib(LibCall),
}

/// One compiled instruction, and the register that receives its value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Compiled {
    /// What it does.
    pub action: Action,
    /// Dense index of the register receiving its value (`load`, `cas`, `sc_read`, ...).
    pub reg: Option<usize>,
}

impl Compiled {
    /// An instruction that issues `op` and keeps no value.
    pub fn op(op: Op) -> Compiled {
        Compiled {
            action: Action::Op(op),
            reg: None,
        }
    }
}

/// A litmus thread's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LitmusThread {
    code: Shared<[Compiled]>,
    /// Index of the instruction being executed (or the next one).
    pc: usize,
    /// Whether the operation of instruction `pc` is outstanding.
    awaiting: bool,
    /// The library routine instruction `pc` is running, if any.
    current: Option<LibCall>,
    /// Registers, densely indexed.
    pub regs: Vec<u64>,
    /// The first operation that failed, if any; the thread stops there.
    pub error: Option<RdmaError>,
    polls: bool,
    /// Whether the code has a `test` or `wait_any`.
    tests: bool,
}

impl LitmusThread {
    /// A thread that will run `code` with `registers` registers, all 0.
    pub fn new(code: Vec<Compiled>, registers: usize) -> LitmusThread {
        let polls = code
            .iter()
            .any(|c| matches!(c.action, Action::Op(Op::Poll { .. })));
        let tests = code.iter().any(|c| {
            matches!(
                c.action,
                Action::Op(Op::Test { .. } | Op::TestLoad { .. } | Op::WaitAny { .. })
            )
        });
        let code: std::sync::Arc<[Compiled]> = code.into();
        LitmusThread {
            code: code.into(),
            pc: 0,
            awaiting: false,
            current: None,
            regs: vec![0; registers],
            error: None,
            polls,
            tests,
        }
    }

    /// Instructions in the thread's code.
    pub fn instructions(&self) -> usize {
        self.code.len()
    }

    /// Instruction `pc` finished with `value`.
    fn finish(&mut self, value: Option<u64>) {
        if let (Some(r), Some(v)) = (self.code[self.pc].reg, value) {
            self.regs[r] = v;
        }
        self.pc += 1;
        self.awaiting = false;
        self.current = None;
    }

    fn fail(&mut self, error: RdmaError) -> Step {
        self.error = Some(error);
        Step::Done
    }
}

impl Process for LitmusThread {
    fn resume(&mut self, reply: Reply) -> Step {
        // Deliver the reply to whoever asked.
        if let Some(call) = self.current.as_mut() {
            match call.resume(reply) {
                Ok(Yield::Op(op)) => return Step::Op(op),
                Ok(Yield::Done(v)) => self.finish(v),
                Err(e) => return self.fail(e),
            }
        } else if self.awaiting {
            match reply {
                Reply::Value(v) => self.finish(Some(v)),
                Reply::Failed(e) => return self.fail(e),
                Reply::Done | Reply::Start => self.finish(None),
                Reply::Words(_) => unreachable!("litmus programs issue no LoadWords"),
            }
        }
        // Start the next instruction.
        loop {
            let Some(instr) = self.code.get(self.pc) else {
                return Step::Done;
            };
            match &instr.action {
                Action::Op(op) => {
                    self.awaiting = true;
                    return Step::Op(op.clone());
                }
                Action::Lib(call) => {
                    let mut call = call.clone();
                    match call.resume(Reply::Start) {
                        Ok(Yield::Op(op)) => {
                            self.current = Some(call);
                            return Step::Op(op);
                        }
                        Ok(Yield::Done(v)) => self.finish(v),
                        Err(e) => return self.fail(e),
                    }
                }
            }
        }
    }

    fn polls(&self) -> bool {
        self.polls
    }

    fn tests_completions(&self) -> bool {
        self.tests
    }
}
