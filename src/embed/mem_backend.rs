//! The in-process backend: every replica on its own thread over `velos_rdma::mem`, with
//! the region plans of a real deployment (an access a plan does not grant fails the
//! replica's operation, as on a NIC). Real time: the engine's clock is the fabric's.

use super::driver::{Command, Driver};
use super::error::StartError;
use super::serve::{serve, sleep_max_ns};
use super::state_machine::StateMachine;
use crossbeam_channel::{Receiver, Sender, unbounded};
use std::sync::Arc;
use std::thread;
use velos_core::log::{ClientScript, LogConfig, Replica};
use velos_rdma::mem::{MemFabric, MemOptions, Mode};
use velos_rdma::{NodeId, Shared};

/// What the replica threads share.
pub(crate) struct Started<S: StateMachine> {
    pub(crate) inboxes: Vec<Sender<Command<S::Response>>>,
    /// The fabric, so that a crash takes effect before [`super::Cluster::crash`] returns.
    pub(crate) fabric: Arc<MemFabric>,
    pub(crate) runner: thread::JoinHandle<Vec<Option<S>>>,
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
    let shared_fabric = Arc::clone(&fabric);
    let log = Shared::new(log);
    let (inboxes, receivers): (Vec<_>, Vec<_>) = drivers.iter().map(|_| unbounded()).unzip();
    let runner = thread::Builder::new()
        .name("velos-embed".into())
        .spawn(move || {
            thread::scope(|scope| {
                let handles: Vec<_> = drivers
                    .into_iter()
                    .zip(receivers)
                    .enumerate()
                    .map(|(i, (driver, inbox))| {
                        let fabric = &fabric;
                        let log = log.clone();
                        thread::Builder::new()
                            .name(format!("velos-replica-{i}"))
                            .spawn_scoped(scope, move || run(fabric, log, i as u16, driver, &inbox))
                            .expect("a replica thread starts")
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("a replica thread panicked"))
                    .collect()
            })
        })
        .map_err(|e| StartError::Backend(format!("spawning the runner: {e}")))?;
    Ok(Started {
        inboxes,
        fabric: shared_fabric,
        runner,
    })
}

/// One replica's thread: its state machine, or `None` if it crashed.
pub(crate) fn run<S: StateMachine>(
    fabric: &MemFabric,
    log: Shared<LogConfig>,
    me: u16,
    driver: Driver<S>,
    inbox: &Receiver<Command<S::Response>>,
) -> Option<S> {
    // Every event of this replica's thread is inside its span.
    let _span = tracing::info_span!("velos_replica", replica = me).entered();
    let no_client = ClientScript { count: 0, size: 10 };
    let sleep_max = sleep_max_ns(&log);
    let mut replica = Replica::new(log, me, no_client).expect("validated at start");
    replica.report_events(); // the driver traces them
    let mut endpoint = fabric.endpoint(NodeId(me));
    serve(&mut endpoint, replica, driver, inbox, sleep_max, || {
        fabric.crash(NodeId(me))
    })
}
