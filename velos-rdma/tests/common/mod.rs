//! What the in-process backend's tests share.

use velos_rdma::{Op, Process, Reply, Step};

/// Runs a fixed list of operations and records the replies.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Script {
    /// The operations, in order.
    pub ops: Vec<Op>,
    /// The next operation.
    pub pc: usize,
    /// Every reply received, in order.
    pub replies: Vec<Reply>,
}

impl Script {
    /// A script that will issue `ops`.
    pub fn new(ops: Vec<Op>) -> Script {
        Script {
            ops,
            pc: 0,
            replies: Vec::new(),
        }
    }
}

impl Process for Script {
    fn resume(&mut self, reply: Reply) -> Step {
        if reply != Reply::Start {
            self.replies.push(reply);
        }
        let op = self.ops.get(self.pc).cloned();
        self.pc += 1;
        op.map_or(Step::Done, Step::Op)
    }

    fn polls(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, Op::Poll { .. }))
    }
}
