//! The emulator backend: every replica on the rdma-rmw emulator, advanced by one thread
//! in quanta of virtual time; between quanta the thread takes the commands that arrived
//! and hands out outcomes (see [`EmulatorConfig`] for what is deterministic). A crash is
//! the emulator's hang: operations towards the node never complete.

use super::config::EmulatorConfig;
use super::driver::{Command, Driver, End};
use super::error::{Error, StartError};
use super::state_machine::StateMachine;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, unbounded};
use std::thread;
use velos_core::log::{LogConfig, Replica};
use velos_rdma::{NodeId, Shared};
use velos_sim::machine::{CrashMode, Machine};
use velos_sim::simulate::{Fault, SimConfig, Simulator};

/// The runner thread, its command channel (`(replica, command)`) and its channel of
/// replacements.
pub(crate) struct Started<S: StateMachine> {
    pub(crate) inbox: Sender<(u16, Command<S::Response>)>,
    pub(crate) replacements: Sender<Replacement<S>>,
    pub(crate) runner: thread::JoinHandle<Vec<Option<S>>>,
}

/// A fresh process for a crashed replica: the replica, its incarnation, its driver. The
/// runner starts it on blank memory ([`Simulator::restart`]) and tells the live engines
/// ([`Replica::peer_replaced`]) in one step, between quanta.
pub(crate) type Replacement<S> = (u16, u64, Driver<S>);

/// Starts the simulator thread with one driver per replica.
pub(crate) fn start<S: StateMachine>(
    log: LogConfig,
    emulator: EmulatorConfig,
    drivers: Vec<Driver<S>>,
) -> Result<Started<S>, StartError> {
    assert_eq!(
        drivers.len(),
        usize::from(log.replicas),
        "one driver per replica"
    );
    assert!(emulator.quantum_ns > 0, "validated: time moves");
    let machine = machine(&log);
    let sim_config = SimConfig::new(emulator.seed, emulator.latency.clone());
    let (inbox, commands) = unbounded();
    let (replacements, replaced) = unbounded();
    let runner = thread::Builder::new()
        .name("velos-emulator".into())
        .spawn(move || {
            // Every replica runs on this thread: events name theirs.
            let _span = tracing::info_span!("velos_emulator", seed = emulator.seed).entered();
            let sim = Simulator::new(machine, sim_config);
            run(sim, (&emulator, &log), drivers, (&commands, &replaced))
        })
        .map_err(|e| StartError::Backend(format!("spawning the emulator: {e}")))?;
    Ok(Started {
        inbox,
        replacements,
        runner,
    })
}

/// The emulated machine of `log`: replica r on node r (thread r), no client of its own.
fn machine(log: &LogConfig) -> Machine<Replica> {
    let config = Shared::new(log.clone());
    let mut machine = Machine::new(&log.shape().layout());
    for r in 0..log.replicas {
        let mut replica = Replica::new(config.clone(), r).expect("validated");
        replica.report_events(); // the driver traces them
        machine.spawn(NodeId(r), replica);
    }
    assert_eq!(
        machine.threads.len(),
        usize::from(log.replicas),
        "one thread per replica"
    );
    machine
}

type Sim = Simulator<Replica>;

/// The runner's inbox: `(replica, command)`.
type Commands<R> = Receiver<(u16, Command<R>)>;

/// Starts a fresh process at `incarnation` on crashed replica `r`'s node and tells every
/// live replica, in one step of the runner (nothing runs in between).
fn replace(sim: &mut Sim, log: &Shared<LogConfig>, (r, incarnation): (u16, u64)) {
    let i = usize::from(r);
    let mut incarnations: Vec<u64> = sim
        .machine()
        .threads
        .iter()
        .map(|t| t.process.incarnation())
        .collect();
    assert!(incarnation > incarnations[i], "a newer incarnation");
    incarnations[i] = incarnation;
    let mut fresh =
        Replica::joining(log.clone(), r, &incarnations).expect("one incarnation per replica");
    fresh.report_events(); // the driver traces them
    // A removed replica's process ended with its node up (rule (retire)): it goes first.
    sim.inject(Fault::Crash {
        node: NodeId(r),
        mode: CrashMode::Hang,
    });
    sim.restart(NodeId(r), fresh);
    let m = sim.machine_mut();
    let up: Vec<bool> = m.threads.iter().map(|t| m.is_up(t.node)).collect();
    let mut told = Vec::new();
    for (j, (t, up)) in m.threads.iter_mut().zip(up).enumerate() {
        if up && j != i {
            t.process
                .peer_replaced(r, incarnation)
                .expect("a newer incarnation of a peer");
            told.push(t.node);
        }
    }
    // Rule (no amnesia): each engine first, then its node meets the new process.
    for node in told {
        sim.reconnect(node, NodeId(r));
    }
}

/// The simulator loop: commands, a quantum of virtual time, outcomes; until a shutdown
/// (or the handle is gone).
fn run<S: StateMachine>(
    mut sim: Sim,
    (emulator, log): (&EmulatorConfig, &LogConfig),
    drivers: Vec<Driver<S>>,
    (commands, replaced): (&Commands<S::Response>, &Receiver<Replacement<S>>),
) -> Vec<Option<S>> {
    let mut drivers: Vec<Option<Driver<S>>> = drivers.into_iter().map(Some).collect();
    // The state machines of the replicas removed (rule (retire)), handed back at the end.
    let mut removed: Vec<Option<S>> = drivers.iter().map(|_| None).collect();
    let log = Shared::new(log.clone());
    loop {
        let idle = drivers.iter().flatten().all(Driver::idle);
        let first = if idle {
            match commands.recv_timeout(emulator.idle_wait) {
                Ok(c) => Some(c),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        } else {
            None
        };
        let mut shutdown = false;
        for (r, command) in first.into_iter().chain(commands.try_iter()) {
            let r = usize::from(r);
            let now = sim.now();
            match (command, drivers[r].as_mut()) {
                (Command::Propose(bytes, completer), Some(d)) => {
                    d.take(&sim.machine().threads[r].process, bytes, completer, now);
                }
                (Command::Propose(_, completer), None) => drop(completer), // down: refused
                (Command::Read(job), Some(d)) => {
                    d.take_read(&mut sim.machine_mut().threads[r].process, job);
                }
                (Command::Read(job), None) => job(Err(Error::Unavailable { replica: r as u16 })),
                (Command::Members(members, completer), Some(d)) => {
                    let replica = &mut sim.machine_mut().threads[r].process;
                    d.take_members(replica, members, completer, now);
                }
                (Command::Members(_, completer), None) => drop(completer),
                (Command::Crash, Some(_)) => {
                    sim.inject(Fault::Crash {
                        node: NodeId(r as u16),
                        mode: CrashMode::Hang,
                    });
                    let d = drivers[r].take().expect("live");
                    assert!(
                        d.stop(End::Crashed, now).is_none(),
                        "a crashed machine is gone"
                    );
                }
                (Command::Crash, None) => {}
                // The runner tells the engines itself when it starts a replacement.
                (Command::PeerReplaced { .. }, _) => {}
                // Durability runs on the in-process backend only.
                (Command::Nudge, _) => {}
                (Command::Shutdown, _) => shutdown = true,
            }
        }
        if shutdown {
            break;
        }
        // After the commands: the crash a replacement follows was sent before it.
        for (r, incarnation, driver) in replaced.try_iter() {
            if drivers[usize::from(r)].is_none() {
                removed[usize::from(r)] = None; // a new process in a removed one's place
                replace(&mut sim, &log, (r, incarnation));
                drivers[usize::from(r)] = Some(driver);
            } // (else dropped: its answer says the replacement was not made)
        }
        let now = sim.now();
        for (r, d) in drivers.iter_mut().enumerate() {
            if let Some(d) = d {
                d.pump(&mut sim.machine_mut().threads[r].process, now);
            }
        }
        sim.run(now.saturating_add(emulator.quantum_ns), u64::MAX);
        let now = sim.now();
        for (r, d) in drivers.iter_mut().enumerate() {
            if let Some(d) = d {
                d.collect(&mut sim.machine_mut().threads[r].process, now);
            }
            // Rule (retire): a removed replica cut itself off and ended.
            if d.is_some() && sim.machine().threads[r].process.removed() {
                let d = d.take().expect("live");
                removed[r] = d.stop(End::Removed, now);
            }
        }
    }
    let now = sim.now();
    for (r, command) in commands.try_iter() {
        match (command, &drivers[usize::from(r)]) {
            (Command::Propose(_, completer), Some(d)) => d.refuse_stopped(completer, false),
            (Command::Members(_, completer), Some(d)) => d.refuse_stopped(completer, false),
            (Command::Read(job), _) => job(Err(Error::ShuttingDown)),
            _ => {}
        }
    }
    drivers
        .into_iter()
        .zip(removed)
        .map(|(d, kept)| d.and_then(|d| d.stop(End::Stopped, now)).or(kept))
        .collect()
}
