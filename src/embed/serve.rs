//! One replica's loop on a thread of its own, whatever the endpoint (the in-process
//! fabric's or a verbs queue pair's): commands in, the engine stepped, outcomes out.

use super::driver::{Command, Driver};
use super::state_machine::StateMachine;
use crossbeam_channel::Receiver;
use std::time::Instant;
use velos_core::log::Replica;
use velos_rdma::{Endpoint, Op, Process, RdmaError, Reply, Step};

/// An endpoint whose clock (`Op::Now`) counts from `origin` of the inner one: a replica's
/// Ω counts every peer as seen at time 0, so the clock must start when the replica does
/// (a verbs endpoint's counts from the device's opening, seconds earlier under emulation).
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
pub(crate) struct ClockFrom<E> {
    pub(crate) inner: E,
    pub(crate) origin: u64,
}

#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
impl<E: Endpoint> ClockFrom<E> {
    /// `inner` with its clock restarted now; the reply of its clock if it has none.
    pub(crate) fn now(mut inner: E) -> Result<ClockFrom<E>, Reply> {
        match inner.execute(&Op::Now) {
            Reply::Value(origin) => Ok(ClockFrom { inner, origin }),
            other => Err(other),
        }
    }
}

impl<E: Endpoint> Endpoint for ClockFrom<E> {
    fn node(&self) -> velos_rdma::NodeId {
        self.inner.node()
    }

    fn execute(&mut self, op: &Op) -> Reply {
        match (op, self.inner.execute(op)) {
            (Op::Now, Reply::Value(t)) => Reply::Value(t.saturating_sub(self.origin)),
            (_, reply) => reply,
        }
    }
}

/// Runs `replica` with `driver` on `endpoint` until a shutdown (or a crash) and returns
/// its state machine, `None` if it crashed. `crash` makes this node's memory go at once
/// ([`Command::Crash`]).
pub(crate) fn serve<S: StateMachine, E: Endpoint>(
    endpoint: &mut E,
    mut replica: Replica,
    mut driver: Driver<S>,
    inbox: &Receiver<Command>,
    crash: impl Fn(),
) -> Option<S> {
    let me = endpoint.node();
    let start = Instant::now();
    let now = || u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut reply = Reply::Start;
    loop {
        while let Ok(command) = inbox.try_recv() {
            match command {
                Command::Propose(bytes, completer) => {
                    driver.take(&replica, bytes, completer, now());
                }
                Command::Read(job) => driver.take_read(&mut replica, job),
                Command::Members(members, completer) => {
                    driver.take_members(&mut replica, members, completer, now());
                }
                Command::Crash => {
                    crash();
                    refuse_rest(&driver, inbox, true);
                    return driver.stop(true, now());
                }
                Command::Shutdown => replica.shutdown(),
            }
        }
        driver.pump(&mut replica, now());
        match replica.resume(reply) {
            Step::Done => break,
            Step::Op(op) => reply = endpoint.execute(&op),
        }
        if reply == Reply::Failed(RdmaError::RemoteCrashed { node: me }) {
            // The handle crashed this node (its memory is gone at once); the command
            // follows in the inbox. The engine must not see its own memory fail.
            refuse_rest(&driver, inbox, true);
            return driver.stop(true, now());
        }
        driver.collect(&mut replica, now());
    }
    refuse_rest(&driver, inbox, false);
    driver.stop(false, now())
}

/// Commands still in the inbox of a replica that stops were never taken.
pub(crate) fn refuse_rest<S: StateMachine>(
    driver: &Driver<S>,
    inbox: &Receiver<Command>,
    crashed: bool,
) {
    while let Ok(command) = inbox.try_recv() {
        match command {
            Command::Propose(_, completer) | Command::Members(_, completer) => {
                driver.refuse_stopped(completer, crashed)
            }
            Command::Read(job) => job(Err(driver.stopped_error(crashed))),
            Command::Crash | Command::Shutdown => {}
        }
    }
}
