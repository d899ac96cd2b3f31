//! One replica's loop on a thread of its own, whatever the endpoint (the in-process
//! fabric's or a verbs queue pair's): commands in, the engine stepped, outcomes out.
//! The engine's idle pauses pass here, not in the endpoint: by the back-off of
//! `velos_rdma::idle`, ended at once by a command arriving.

use super::driver::{Command, Driver, End};
use super::state_machine::StateMachine;
use crossbeam_channel::{Receiver, Select};
use std::time::{Duration, Instant};
use velos_core::log::{LogConfig, Replica};
use velos_rdma::idle::{Backoff, Policy};
use velos_rdma::{Batch, Endpoint, Op, Process, RdmaError, Reply};

/// The longest an idle replica sleeps through one pause: a heartbeat period, and a tenth
/// of the failure timeout. Ω then holds within that: a sleeping replica bumps its
/// heartbeat at most this late (its peers see gaps of at most a period more, against a
/// timeout of hundreds of periods in the real-time configurations), and notices a silent
/// leader at most this late (detection within 10 % of the timeout).
pub(crate) fn sleep_max_ns(log: &LogConfig) -> u64 {
    // Rule (Ω-time): an idle sleep is a tenth of the failure timeout at most.
    log.heartbeat_period_ns.min(log.failure_timeout_ns / 10)
}

/// A leader is about to be needed (the next command comes within microseconds in a
/// closed loop): it spins for 20 µs of an idle streak, then sleeps, woken at once by a
/// command. No yielding in between: on cores shared with more runnable threads, a thread
/// that yields stays runnable and waits behind their time slices (milliseconds were seen
/// on two cores), while a sleeper is woken ahead of them.
fn leader_policy(sleep_max_ns: u64) -> Policy {
    Policy {
        spin_ns: 20_000,
        yield_ns: 20_000,
        sleep_max_ns,
    }
}

/// A follower's CPU decides nothing (the leader's CASes reach its memory without it):
/// it spins 1 µs, then sleeps, so that it leaves the cores to the leader and the
/// clients.
fn follower_policy(sleep_max_ns: u64) -> Policy {
    Policy {
        spin_ns: 1_000,
        yield_ns: 1_000,
        sleep_max_ns,
    }
}

/// Sleeps at most `d`, or until a command is in `inbox` (left there).
fn park<R>(inbox: &Receiver<Command<R>>, d: Duration) {
    let mut select = Select::new();
    select.recv(inbox);
    // Ready or timed out: either way the loop looks at the inbox next.
    let _ = select.ready_timeout(d);
}

/// Runs `replica` with `driver` on `endpoint` until a shutdown (or a crash) and returns
/// its state machine, `None` if it crashed. `crash` makes this node's memory go at once
/// ([`Command::Crash`]); `reconnect(r)` connects this node to the process now in replica
/// `r`'s place, once the engine stopped counting the old one ([`Command::PeerReplaced`]);
/// `turn` runs at every turn's start, between two operations (a verbs replica handles
/// joining processes there: [`crate::join::Joiners::handle`]). Idle pauses sleep at most
/// `sleep_max_ns` ([`sleep_max_ns`]).
///
/// The driver meets the engine at turn boundaries (its clock reading and its pause):
/// outcomes are collected and batches proposed there, and when commands arrive — not
/// after every operation, which cost the leader microseconds per decision.
pub(crate) fn serve<S: StateMachine, E: Endpoint>(
    endpoint: &mut E,
    mut replica: Replica,
    mut driver: Driver<S>,
    inbox: &Receiver<Command<S::Response>>,
    sleep_max_ns: u64,
    (crash, reconnect, mut turn): (impl Fn(), impl Fn(u16), impl FnMut(&mut E, &mut Replica)),
) -> Option<S> {
    let me = endpoint.node();
    let start = Instant::now();
    let now = || u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut backoff = Backoff::new(follower_policy(sleep_max_ns));
    // The next slot to apply when the current turn began, and whether a command arrived
    // since (the engine planned the turn's pause without it).
    let mut turn_apply = replica.next_apply();
    let mut arrived = false;
    let mut reply = Reply::Start;
    let mut batch = Vec::with_capacity(64);
    loop {
        let mut took = false;
        while let Ok(command) = inbox.try_recv() {
            took = true;
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
                    return driver.stop(End::Crashed, now());
                }
                Command::Shutdown => replica.shutdown(),
                Command::Nudge => driver.nudge(&mut replica),
                Command::PeerReplaced {
                    replica: r,
                    incarnation,
                } => match replica.peer_replaced(r, incarnation) {
                    // Rule (no amnesia): the engine first, so nothing it posts on the new
                    // connection counts for the old process.
                    Ok(()) => reconnect(r),
                    Err(e) => tracing::warn!(replica = me.0, "replacement refused: {e}"),
                },
            }
        }
        if took {
            backoff.worked();
            arrived = true;
            driver.pump(&mut replica, now());
        }
        batch.clear();
        let end = replica.resume_batch(reply, &mut batch);
        reply = Reply::Done;
        let last = batch.len().saturating_sub(1);
        for (i, op) in batch.iter().enumerate() {
            let turn_edge = matches!(op, Op::Now | Op::Pause { .. });
            // The driver hands proposals over at these: the engine computed nothing past
            // them (rule (batch), `Process::resume_batch`).
            assert!(
                !turn_edge || i == last,
                "a batch ends at a clock or a pause"
            );
            if turn_edge {
                let t = now();
                driver.collect(&mut replica, t);
                driver.pump(&mut replica, t);
            }
            reply = match op {
                Op::Pause { .. } if arrived || replica.next_apply() > turn_apply => {
                    // A command arrived during the turn (the engine planned its pause
                    // before it had it), or the turn applied a slot (a follower learns one
                    // per turn, and the engine asks for its pause before the value read
                    // that applies it completes: the next slot may be decided already).
                    // Not idle.
                    backoff.worked();
                    Reply::Done
                }
                &Op::Pause { ns } => {
                    // While something waits here (a batch held back for a follower, a
                    // read), sleeps do not grow past the pause asked.
                    let most = if driver.quiet() { sleep_max_ns } else { 0 };
                    backoff.set_policy(if replica.leader() == me.0 {
                        leader_policy(most)
                    } else {
                        follower_policy(most)
                    });
                    backoff.pause(ns, now, || !inbox.is_empty(), |d| park(inbox, d));
                    Reply::Done
                }
                op => {
                    if *op == Op::Now {
                        turn_apply = replica.next_apply();
                        arrived = false;
                        turn(endpoint, &mut replica);
                        driver.peer_turn(endpoint);
                    }
                    backoff.saw(op);
                    endpoint.execute(op)
                }
            };
            if reply == Reply::Failed(RdmaError::RemoteCrashed { node: me }) {
                // The handle crashed this node (its memory is gone at once); the command
                // follows in the inbox. The engine must not see its own memory fail.
                refuse_rest(&driver, inbox, true);
                return driver.stop(End::Crashed, now());
            }
        }
        if end == Batch::Done {
            break;
        }
    }
    // Shut down, or removed (rule (retire)): what the last turn decided is reported as
    // such.
    driver.collect(&mut replica, now());
    let removed = replica.removed();
    refuse_rest(&driver, inbox, removed);
    let end = if removed { End::Removed } else { End::Stopped };
    driver.stop(end, now())
}

/// Commands still in the inbox of a replica that stops were never taken.
pub(crate) fn refuse_rest<S: StateMachine>(
    driver: &Driver<S>,
    inbox: &Receiver<Command<S::Response>>,
    crashed: bool,
) {
    while let Ok(command) = inbox.try_recv() {
        match command {
            Command::Propose(_, completer) => driver.refuse_stopped(completer, crashed),
            Command::Members(_, completer) => driver.refuse_stopped(completer, crashed),
            Command::Read(job) => job(Err(driver.stopped_error(crashed))),
            Command::Crash | Command::Shutdown | Command::Nudge | Command::PeerReplaced { .. } => {}
        }
    }
}
