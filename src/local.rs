//! A Velos log embedded in one process: every replica on its own thread over the
//! in-process RDMA backend, each applying the committed entries to its own copy of the
//! service's [`StateMachine`]. The same engine as on the simulator and (later) on real
//! RDMA; threads and real time replace virtual time, so the failure timeout must be set
//! in milliseconds, not microseconds (the OS may stall a thread for that long).

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::thread;
use velos_core::log::{ClientScript, LogConfig, ProposeError, Replica};
use velos_rdma::mem::{MemFabric, MemOptions, Mode};
use velos_rdma::{Endpoint, NodeId, Process, Reply, Shared, Step};

/// The service's state, replicated: every replica applies the same entries in the same
/// order (a no-op, written by a new leader to fill a gap, is an empty entry).
pub trait StateMachine: Send + 'static {
    /// Applies the entry decided in `slot`; slots come in order, without gaps.
    fn apply(&mut self, slot: u64, entry: &[u8]);
}

enum Command {
    Propose(Vec<u8>, Sender<Result<u64, ProposeError>>),
    Crash,
    Shutdown,
}

/// A proposal taken by the leader: [`Receipt::wait`] gives the slot that decided it.
#[derive(Debug)]
pub struct Receipt(Receiver<Result<u64, ProposeError>>);

impl Receipt {
    /// Blocks until the proposal is decided (its slot) or known lost.
    pub fn wait(self) -> Result<u64, ProposeError> {
        self.0.recv().unwrap_or(Err(ProposeError::ShuttingDown))
    }
}

/// What the cluster shows of each replica.
#[derive(Debug, Default)]
struct Shown {
    leader: AtomicU16,
    applied: AtomicU64,
    crashed: std::sync::atomic::AtomicBool,
}

/// A running in-process cluster.
pub struct LocalCluster<S: StateMachine> {
    commands: Vec<Sender<Command>>,
    shown: Vec<Arc<Shown>>,
    supervisor: Option<thread::JoinHandle<Vec<Option<S>>>>,
}

impl<S: StateMachine> LocalCluster<S> {
    /// Starts one replica per state machine (replica i applies to `machines[i]`).
    pub fn start(mut config: LogConfig, machines: Vec<S>) -> Result<LocalCluster<S>, String> {
        config.replicas = u16::try_from(machines.len()).map_err(|_| "too many replicas")?;
        config.validate()?;
        // Every node's memory reachable only as its region plan says, as over real verbs:
        // an access the plan does not grant fails the replica's operation.
        let shape = config.shape();
        let options = MemOptions {
            mode: Mode::Worker,
            jitter: None,
        };
        let fabric = Arc::new(MemFabric::with_plans(
            shape.layout(),
            options,
            shape.region_plans(),
        )?);
        let config = Shared::new(config);
        let mut commands = Vec::new();
        let mut shown = Vec::new();
        let mut inboxes = Vec::new();
        for _ in &machines {
            let (tx, rx) = unbounded();
            commands.push(tx);
            inboxes.push(rx);
            shown.push(Arc::new(Shown::default()));
        }
        let shown_threads = shown.clone();
        let supervisor = thread::spawn(move || {
            thread::scope(|scope| {
                let handles: Vec<_> = machines
                    .into_iter()
                    .zip(inboxes)
                    .zip(shown_threads)
                    .enumerate()
                    .map(|(i, ((machine, inbox), shown))| {
                        let fabric = &fabric;
                        let config = config.clone();
                        scope.spawn(move || {
                            replica_thread(fabric, config, i as u16, machine, inbox, &shown)
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("a replica thread panicked"))
                    .collect()
            })
        });
        Ok(LocalCluster {
            commands,
            shown,
            supervisor: Some(supervisor),
        })
    }

    /// Replicas.
    pub fn replicas(&self) -> u16 {
        self.commands.len() as u16
    }

    /// The leader as replica `replica` sees it.
    pub fn leader_seen_by(&self, replica: u16) -> u16 {
        self.shown[usize::from(replica)]
            .leader
            .load(Ordering::SeqCst)
    }

    /// Entries replica `replica` has applied.
    pub fn applied(&self, replica: u16) -> u64 {
        self.shown[usize::from(replica)]
            .applied
            .load(Ordering::SeqCst)
    }

    /// Proposes `value` at replica `replica`, which must lead.
    pub fn propose(&self, replica: u16, value: Vec<u8>) -> Receipt {
        let (tx, rx) = bounded(1);
        if self.commands[usize::from(replica)]
            .send(Command::Propose(value, tx.clone()))
            .is_err()
        {
            let _ = tx.send(Err(ProposeError::ShuttingDown));
        }
        Receipt(rx)
    }

    /// Whether replica `replica` was crashed.
    pub fn is_crashed(&self, replica: u16) -> bool {
        self.shown[usize::from(replica)]
            .crashed
            .load(Ordering::SeqCst)
    }

    /// Proposes `value` at whichever replica leads (as the first live replica sees it),
    /// retrying while leadership moves, and waits for its slot.
    pub fn submit(&self, value: Vec<u8>) -> Result<u64, ProposeError> {
        let mut last = ProposeError::ShuttingDown;
        for _ in 0..10_000 {
            let Some(viewer) = (0..self.replicas()).find(|&r| !self.is_crashed(r)) else {
                return Err(ProposeError::ShuttingDown);
            };
            let target = self.leader_seen_by(viewer);
            match self.propose(target, value.clone()).wait() {
                Err(e @ ProposeError::NotLeader { .. }) => last = e,
                Err(ProposeError::ShuttingDown) if self.is_crashed(target) => {
                    last = ProposeError::NotLeader { leader: target };
                }
                other => return other,
            }
            thread::sleep(std::time::Duration::from_micros(100));
        }
        Err(last)
    }

    /// Crashes replica `replica`: its memory is gone and its thread stops.
    pub fn crash(&self, replica: u16) {
        self.shown[usize::from(replica)]
            .crashed
            .store(true, Ordering::SeqCst);
        let _ = self.commands[usize::from(replica)].send(Command::Crash);
    }

    /// Stops every replica; the state machines of those that did not crash.
    pub fn shutdown(mut self) -> Vec<Option<S>> {
        for c in &self.commands {
            let _ = c.send(Command::Shutdown);
        }
        self.supervisor
            .take()
            .expect("running")
            .join()
            .expect("the supervisor panicked")
    }
}

impl<S: StateMachine> Drop for LocalCluster<S> {
    fn drop(&mut self) {
        if let Some(s) = self.supervisor.take() {
            for c in &self.commands {
                let _ = c.send(Command::Shutdown);
            }
            let _ = s.join();
        }
    }
}

/// One replica's thread: commands in, the replica driven step by step, committed entries
/// out to the state machine. Returns the state machine, or `None` if the replica crashed.
fn replica_thread<S: StateMachine>(
    fabric: &MemFabric,
    config: Shared<LogConfig>,
    me: u16,
    mut machine: S,
    inbox: Receiver<Command>,
    shown: &Shown,
) -> Option<S> {
    let no_client = ClientScript { count: 0, size: 10 };
    let mut replica = Replica::new(config, me, no_client).expect("validated by start");
    let mut endpoint = fabric.endpoint(NodeId(me));
    let mut waiting: HashMap<u64, Sender<Result<u64, ProposeError>>> = HashMap::new();
    let mut reply = Reply::Start;
    let mut applied = 0u64;
    loop {
        while let Ok(command) = inbox.try_recv() {
            match command {
                Command::Propose(value, tx) => match replica.propose(value) {
                    Ok(id) => {
                        waiting.insert(id, tx);
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                    }
                },
                Command::Crash => {
                    fabric.crash(NodeId(me));
                    return None;
                }
                Command::Shutdown => replica.shutdown(),
            }
        }
        match replica.resume(reply) {
            Step::Done => break,
            Step::Op(op) => reply = endpoint.execute(&op),
        }
        for (slot, entry) in replica.take_committed() {
            machine.apply(slot, &entry);
            applied += 1;
        }
        for (id, result) in replica.take_results() {
            if let Some(tx) = waiting.remove(&id) {
                let _ = tx.send(result);
            }
        }
        shown.leader.store(replica.leader(), Ordering::SeqCst);
        shown.applied.store(applied, Ordering::SeqCst);
    }
    for (_, tx) in waiting {
        let _ = tx.send(Err(ProposeError::ShuttingDown));
    }
    Some(machine)
}
