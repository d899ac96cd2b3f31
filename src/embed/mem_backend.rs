//! The in-process backend: every replica on its own thread over `velos_rdma::mem`, with
//! the region plans of a real deployment (an access a plan does not grant fails the
//! replica's operation, as on a NIC). Real time: the engine's clock is the fabric's. A
//! crashed replica's place can take a fresh process ([`replace`]): its node restarts on
//! blank memory and each peer connects to it once its engine stopped counting the old one.

use super::driver::{Command, Driver};
use super::error::StartError;
use super::recovery::{self, Resume};
use super::serve::{serve, sleep_max_ns};
use super::state_machine::StateMachine;
use crossbeam_channel::{Receiver, Sender, unbounded};
use std::sync::Arc;
use std::thread;
use velos_core::log::{LogConfig, Replica};
use velos_rdma::mem::{MemFabric, MemOptions, Mode};
use velos_rdma::{NodeId, Shared};

/// A replica's thread: it hands back its state machine (`None` if it crashed).
pub(crate) type ReplicaThread<S> = thread::JoinHandle<Option<S>>;

/// What the replica threads share, and each one's thread.
pub(crate) struct Started<S: StateMachine> {
    pub(crate) inboxes: Vec<Sender<Command<S::Response>>>,
    /// Each replica's inbox, for the process that takes its place after a crash.
    pub(crate) receivers: Vec<Receiver<Command<S::Response>>>,
    /// The fabric, so that a crash takes effect before [`super::Cluster::crash`] returns.
    pub(crate) fabric: Arc<MemFabric>,
    pub(crate) log: Shared<LogConfig>,
    pub(crate) threads: Vec<ReplicaThread<S>>,
}

/// Starts one thread per driver (driver i runs replica i).
pub(crate) fn start<S: StateMachine>(
    log: LogConfig,
    drivers: Vec<Driver<S>>,
) -> Result<Started<S>, StartError> {
    assert_eq!(
        drivers.len(),
        usize::from(log.replicas),
        "one driver per replica"
    );
    let shape = log.shape();
    // Remote operations run on the posting replica's thread: a NIC worker per node
    // would hand every CAS and put to another thread (a wake-up each, and three more
    // threads to schedule on the same cores).
    let options = MemOptions {
        mode: Mode::Inline,
        jitter: None,
    };
    let fabric = MemFabric::with_plans(shape.layout(), options, shape.region_plans())
        .map_err(StartError::Backend)?;
    let fabric = Arc::new(fabric);
    let log = Shared::new(log);
    let (inboxes, receivers): (Vec<_>, Vec<_>) = drivers.iter().map(|_| unbounded()).unzip();
    let mut threads = Vec::new();
    for (i, (driver, inbox)) in drivers
        .into_iter()
        .zip(receivers.iter().cloned())
        .enumerate()
    {
        let replica = Replica::new(log.clone(), i as u16).expect("validated at start");
        let thread = spawn(&fabric, replica, driver, inbox)
            .map_err(|e| StartError::Backend(format!("spawning a replica: {e}")))?;
        threads.push(thread);
    }
    Ok(Started {
        inboxes,
        receivers,
        fabric,
        log,
        threads,
    })
}

/// Starts `replica`'s thread with `driver`, taking commands from `inbox`.
fn spawn<S: StateMachine>(
    fabric: &Arc<MemFabric>,
    replica: Replica,
    driver: Driver<S>,
    inbox: Receiver<Command<S::Response>>,
) -> std::io::Result<ReplicaThread<S>> {
    let fabric = Arc::clone(fabric);
    let me = replica.id();
    thread::Builder::new()
        .name(format!("velos-replica-{me}"))
        .spawn(move || run(&fabric, replica, driver, &inbox))
}

/// Starts a fresh process in crashed replica `me`'s place at `incarnations[me]` (the
/// other entries: the peers' processes), on blank memory; its old thread has stopped. The
/// peers are told by the caller ([`Command::PeerReplaced`]): each connects to it then.
pub(crate) fn replace<S: StateMachine>(
    started: (&Arc<MemFabric>, &Shared<LogConfig>),
    (me, incarnations): (u16, &[u64]),
    (mut driver, resume): (Driver<S>, Option<Resume>),
    inbox: Receiver<Command<S::Response>>,
) -> std::io::Result<ReplicaThread<S>> {
    let (fabric, log) = started;
    let mut replica = Replica::joining(log.clone(), me, incarnations)
        .expect("one incarnation per replica, checked by the handle");
    if let Some((point, bytes)) = resume {
        recovery::resume(&mut replica, &mut driver, point, &bytes);
    }
    // A removed replica's process ended with its node up (rule (retire)): it goes first.
    fabric.crash(NodeId(me));
    fabric.restart(NodeId(me));
    // The new process's own queue pairs are new: to every peer, whatever the old ones saw.
    for peer in (0..incarnations.len() as u16).filter(|&p| p != me) {
        fabric.reconnect(NodeId(me), NodeId(peer));
    }
    spawn(fabric, replica, driver, inbox)
}

/// One replica's thread: its state machine, or `None` if it crashed.
pub(crate) fn run<S: StateMachine>(
    fabric: &MemFabric,
    mut replica: Replica,
    driver: Driver<S>,
    inbox: &Receiver<Command<S::Response>>,
) -> Option<S> {
    let me = replica.id();
    // Every event of this replica's thread is inside its span.
    let incarnation = replica.incarnation();
    let _span = tracing::info_span!("velos_replica", replica = me, incarnation).entered();
    let sleep_max = sleep_max_ns(replica.config());
    replica.report_events(); // the driver traces them
    let mut endpoint = fabric.endpoint(NodeId(me));
    let crash = || fabric.crash(NodeId(me));
    let reconnect = |peer: u16| fabric.reconnect(NodeId(me), NodeId(peer));
    serve(
        &mut endpoint,
        replica,
        driver,
        inbox,
        sleep_max,
        (crash, reconnect, |_: &mut _, _: &mut _| {}),
    )
}
