//! The verbs backend: this process's replica over real RDMA (velos-rdma's `verbs`
//! feature), on a thread of its own. The set-up is [`crate::connect`]'s:
//! the memory registered as the region plan says, the rendezvous, the queue pairs; then
//! the replica loop ([`super::serve`]) on the node's endpoint, its clock restarted.

use super::config::VerbsConfig;
use super::driver::{Command, Driver};
use super::error::StartError;
use super::node_dir::Begin;
use super::state_machine::StateMachine;
use crossbeam_channel::Receiver;
use std::thread::JoinHandle;
use velos_core::log::LogConfig;

/// Connects replica `verbs.id` and starts its thread; returns once it runs, or why it
/// could not be connected.
#[cfg(feature = "verbs")]
pub(crate) fn start<S: StateMachine>(
    log: LogConfig,
    verbs: &VerbsConfig,
    (mut driver, begin): (Driver<S>, Begin),
    inbox: Receiver<Command<S::Response>>,
) -> Result<JoinHandle<Option<S>>, StartError> {
    use super::serve::{serve, sleep_max_ns};
    use crate::connect::ClockFrom;
    use crate::join::{Joiners, Met, meet};
    use velos_core::log::Replica;
    use velos_rdma::Shared;

    let verbs = verbs.clone();
    let id = verbs.id;
    let (ready, connected) = crossbeam_channel::bounded(1);
    let runner = std::thread::Builder::new()
        .name(format!("velos-replica-{id}"))
        .spawn(move || {
            // Every event of this replica's thread is inside its span.
            let _span = tracing::info_span!("velos_replica", replica = id).entered();
            let met = meet(
                &log,
                &verbs.cluster,
                id,
                verbs.start,
                verbs.rendezvous_timeout,
            );
            let met = match met {
                Ok(met) => met,
                Err(e) => {
                    let _ = ready.send(Err(StartError::Backend(e.to_string())));
                    return None;
                }
            };
            let sleep_max = sleep_max_ns(&log);
            // After a power loss of every replica, the processes agree on the log to go on
            // from before the engine starts (its members among it).
            let mut log = log;
            let agreed = match &begin {
                Begin::Recover(r) => {
                    let timeout = verbs.rendezvous_timeout;
                    match r.agree_over(&met.listener, &verbs.cluster, (id, &mut log), timeout) {
                        Ok(agreement) => Some(agreement),
                        Err(e) => {
                            let _ = ready.send(Err(StartError::Recovery(e)));
                            return None;
                        }
                    }
                }
                _ => None,
            };
            let mut replica = met.replica(Shared::new(log), id).expect("validated");
            if let Err(e) = begin.start(agreed, &mut driver, &mut replica) {
                let _ = ready.send(Err(StartError::Recovery(e)));
                return None;
            }
            let Met {
                node,
                listener,
                mut late,
                ..
            } = met;
            // Processes that join later are met on the listener; their requests are
            // handled at the replica's turns (an idle replica turns at least every
            // `sleep_max` ns).
            let mut joiners = match Joiners::serve(verbs.cluster.clone(), id, listener) {
                Ok(joiners) => joiners,
                Err(e) => {
                    let _ = ready.send(Err(StartError::Backend(format!("rendezvous: {e}"))));
                    return None;
                }
            };
            let endpoint = node
                .endpoint(0)
                .map_err(|e| StartError::Backend(format!("rdma: {e}")))
                .and_then(|e| {
                    ClockFrom::now(e)
                        .map_err(|r| StartError::Backend(format!("rdma: the clock: {r:?}")))
                });
            let mut endpoint = match endpoint {
                Ok(e) => e,
                Err(e) => {
                    let _ = ready.send(Err(e));
                    return None;
                }
            };
            replica.report_events(); // the driver traces them
            let _ = ready.send(Ok(()));
            let turn = |endpoint: &mut ClockFrom<_>, replica: &mut Replica| {
                if joiners.pending() {
                    for (peer, incarnation) in joiners.handle(&mut endpoint.inner, replica) {
                        tracing::info!(replica = id, peer, incarnation, "peer replaced");
                    }
                }
                // A joiner: the nodes it did not meet at the join, met since.
                if let Some(late) = late.as_mut().filter(|late| late.pending()) {
                    for (peer, incarnation) in late.handle(&mut endpoint.inner, replica) {
                        tracing::info!(replica = id, peer, incarnation, "peer met late");
                    }
                }
            };
            // A process that crashes takes its memory along: nothing to do here.
            serve(
                &mut endpoint,
                replica,
                driver,
                &inbox,
                sleep_max,
                (|| {}, |_| {}, turn),
            )
        })
        .map_err(|e| StartError::Backend(format!("spawning the replica's thread: {e}")))?;
    match connected.recv() {
        Ok(Ok(())) => Ok(runner),
        Ok(Err(e)) => {
            let _ = runner.join();
            Err(e)
        }
        Err(_) => {
            let _ = runner.join();
            Err(StartError::Backend(
                "the replica's thread stopped while connecting".into(),
            ))
        }
    }
}

/// Whether this build has the RDMA backend: refused before anything is touched (a
/// durable node's directory among it) if not.
pub(crate) fn available() -> Result<(), StartError> {
    if cfg!(feature = "verbs") {
        Ok(())
    } else {
        Err(no_backend())
    }
}

fn no_backend() -> StartError {
    StartError::Backend(
        "this build of velos has no RDMA backend: rebuild with `--features verbs`".into(),
    )
}

/// Without the `verbs` feature there is no RDMA backend.
#[cfg(not(feature = "verbs"))]
pub(crate) fn start<S: StateMachine>(
    _log: LogConfig,
    _verbs: &VerbsConfig,
    _driver: (Driver<S>, Begin),
    _inbox: Receiver<Command<S::Response>>,
) -> Result<JoinHandle<Option<S>>, StartError> {
    Err(no_backend())
}
