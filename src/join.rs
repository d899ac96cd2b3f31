//! A fresh process joining a running cluster over real RDMA, in a crashed replica's
//! place (rule (no amnesia) of `velos_core::log::configuration`).
//!
//! **The running nodes** keep their rendezvous listener open (`connect::connect`
//! returns it) and serve joiners on a thread of their own ([`Joiners::serve`]): each
//! request is handed to the replica's loop, which alone touches the endpoint and the
//! engine (`Joiners::handle`, feature `verbs`).
//!
//! **The joiner** (`join`, feature `verbs`) registers its memory as the region plan says and dials every
//! other node with the same proofs as at the start, and goes on once it and the nodes
//! that answered are a strict majority of the cluster file ([`ask`]; why a majority of
//! the file, and why it bears on liveness only: `joiner.rs`). Two exchanges each:
//! 1. [`JoinMessage::Join`]: its incarnation and its connection information. The node
//!    refuses an incarnation not above the one it knows for that place; otherwise it
//!    replaces its queue pair towards the place by one to the joiner (the old one
//!    flushed and destroyed with its responder: the old process can no longer reach this
//!    node), *parked*, and answers with its own information and incarnation
//!    ([`JoinAnswer`]).
//! 2. Once a majority answered, the joiner connects its queue pairs towards them (the
//!    others' stay parked) and sends [`JoinMessage::Connected`]: each node tells its
//!    engine first (`Replica::peer_replaced`: from now on the place counts only where a
//!    configuration names the new incarnation), then unparks the queue pair.
//!
//! Then the joiner runs `Replica::joining` with every node's incarnation (0 for a node
//! not met), and the leader makes it a voter through the log (rule (replace)). The nodes
//! not met are dialed on in the background ([`Late`]): one that answers later goes
//! through the same two exchanges, the joiner's engine told first if that node's process
//! is newer than it knew, its queue pair connected at one of the joiner's turns.
//!
//! The incarnation is the joiner's start time in microseconds since the Unix epoch unless
//! given: above every earlier process's in that place as long as the machines' clocks do
//! not step back across a replacement; a node that knows a higher one refuses the join
//! with the reason, and the operator can give one.

use crate::cluster_file::ClusterFile;
use crossbeam_channel::{Receiver, Sender};
use serde::{Deserialize, Serialize};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// How a verbs replica's process meets the others.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Start {
    /// With the cluster: every process of the file starts and they meet (the log begins).
    #[default]
    WithCluster,
    /// Into the running cluster, in a crashed replica's place: blank,
    /// at `incarnation` (`None`: the start time in microseconds since the Unix epoch),
    /// voting once the leader has made it a member through the log.
    Join {
        /// The new process's incarnation, above every earlier one in its place.
        incarnation: Option<u64>,
    },
    /// With the cluster, after a power loss of every replica: every process of the file
    /// restarts from its own durable directory and they go on from the longest log any
    /// of them recovered (`embed::Node` with `Config::durable`; every process must take
    /// part, one whose disk is gone with an empty directory).
    Recover,
}

/// What a joiner sends a running node (JSON, as the rendezvous's information).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum JoinMessage {
    /// A new process at `incarnation` in the sender's place, with its connection
    /// information for the receiver.
    Join {
        /// The new process's incarnation.
        incarnation: u64,
        /// Its connection information for the receiving node (opaque here).
        info: Vec<u8>,
    },
    /// The joiner has connected its queue pairs: the receiver may post to it.
    Connected {
        /// The incarnation of the join.
        incarnation: u64,
    },
}

/// A running node's answer to [`JoinMessage::Join`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JoinAnswer {
    /// The answering node's own incarnation.
    pub incarnation: u64,
    /// Its connection information for the joiner.
    pub info: Vec<u8>,
}

impl JoinMessage {
    /// The bytes the rendezvous carries.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a join message serialises")
    }

    /// Reads `bytes` back; why not, in words.
    pub fn from_bytes(bytes: &[u8]) -> Result<JoinMessage, String> {
        serde_json::from_slice(bytes).map_err(|_| {
            "not a join: this cluster is running, a new process joins it (`velos node --join`)"
                .to_string()
        })
    }
}

/// The default incarnation of a process starting now: microseconds since the Unix epoch.
pub fn incarnation_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
        .max(1)
}

/// A joiner's request, for the replica's loop to handle and answer.
#[derive(Debug)]
pub struct JoinRequest {
    /// The place the joiner takes.
    pub peer: u16,
    /// What it asks.
    pub message: JoinMessage,
    reply: Sender<Result<Vec<u8>, String>>,
}

impl JoinRequest {
    /// Answers the joiner: the information to send back, or why it is refused.
    pub fn answer(self, result: Result<Vec<u8>, String>) {
        // A joiner that gave up is gone: nothing to tell.
        let _ = self.reply.send(result);
    }
}

/// How long the serving thread waits for the replica's loop to answer a request.
const ANSWER_WITHIN: Duration = Duration::from_secs(30);

/// A running node's service to joiners: a thread that takes them on the node's listener
/// and hands their requests to the replica's loop. Stopped when dropped.
#[derive(Debug)]
pub struct Joiners {
    requests: Receiver<JoinRequest>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// Per place: the incarnation whose queue pairs are connected here and parked, until
    /// it says it connected its own.
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    parked: std::collections::BTreeMap<u16, u64>,
}

impl Joiners {
    /// Serves joiners of node `me` of `cluster` on `listener` until dropped (the replica's
    /// loop takes their requests at its turns: an idle replica turns at least once a
    /// heartbeat).
    pub fn serve(cluster: ClusterFile, me: u16, listener: TcpListener) -> std::io::Result<Joiners> {
        listener.set_nonblocking(true)?;
        let (tx, requests) = crossbeam_channel::unbounded();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name(format!("velos-joiners-{me}"))
            .spawn(move || {
                while !stopped.load(Ordering::SeqCst) {
                    let mut stream = match listener.accept() {
                        Ok((stream, _)) => stream,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        }
                        Err(e) => {
                            tracing::warn!(node = me, "rendezvous: accepting: {e}");
                            continue;
                        }
                    };
                    let ask = |peer: u16, bytes: &[u8]| {
                        let message = JoinMessage::from_bytes(bytes)?;
                        let (reply, answered) = crossbeam_channel::bounded(1);
                        let request = JoinRequest {
                            peer,
                            message,
                            reply,
                        };
                        tx.send(request)
                            .map_err(|_| "the replica stopped".to_string())?;
                        answered
                            .recv_timeout(ANSWER_WITHIN)
                            .map_err(|_| "the replica did not answer".to_string())?
                    };
                    match crate::rendezvous::serve_one(&cluster, me, &mut stream, ask) {
                        Ok((peer, _)) => tracing::info!(node = me, peer, "rendezvous: joiner"),
                        Err(refusal) => tracing::warn!(node = me, "rendezvous: {refusal}"),
                    }
                }
            })?;
        Ok(Joiners {
            requests,
            stop,
            thread: Some(thread),
            parked: Default::default(),
        })
    }

    /// Whether a request waits.
    pub fn pending(&self) -> bool {
        !self.requests.is_empty()
    }

    /// The next request waiting, if any (to answer by hand; `Joiners::handle` does it
    /// for a verbs replica, feature `verbs`).
    pub fn next(&self) -> Option<JoinRequest> {
        self.requests.try_recv().ok()
    }
}

impl Drop for Joiners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

mod joiner;
pub use joiner::{Asked, Late, ask};

#[cfg(feature = "verbs")]
mod verbs;
#[cfg(feature = "verbs")]
pub use verbs::{Met, join, meet};

#[cfg(test)]
mod majority_tests;
#[cfg(test)]
mod tests;
