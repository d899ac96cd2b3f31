//! The joiner's two rounds apart from RDMA, and what goes on after it joined.
//!
//! **Round one** ([`ask`]): [`JoinMessage::Join`] to every other node of the cluster
//! file, each dialed on a thread of its own; the joiner goes on once the nodes that
//! answered and itself are a strict majority of the file (every configuration is drawn
//! from the file's nodes, and the joiner cannot read which one is current before it is
//! connected: the log is in the others' memory). **Round two** ([`Asked::connected`]):
//! [`JoinMessage::Connected`] to the nodes that answered, once the joiner connected its
//! queue pairs towards them; again a majority of the file is enough.
//!
//! Whom the joiner reached bears on liveness only, never on safety: a node counts the
//! new process only once told it connected (`Replica::peer_replaced`) and only in slots
//! whose configuration names its incarnation (rule (no amnesia)); a node not reached goes
//! on refusing the place's old process as before (its queue pair towards it is broken).
//!
//! **Late** ([`Late`]): the nodes that did not answer in time (down, partitioned, slow)
//! are dialed on in the background with the same message and proofs, the pause between
//! two attempts growing to [`crate::rendezvous::PAUSE_MAX`]. A node that answers later
//! handles the join as any other (its queue pair towards the place replaced, parked);
//! its answer waits in [`Late::met`] for the joiner's loop, which connects its side and
//! calls [`Late::connected`]; the node is then told [`JoinMessage::Connected`] in the
//! background too, and unparks. A node that refuses late is given up (the reason is
//! returned).

use super::{JoinAnswer, JoinMessage};
use crate::cluster_file::ClusterFile;
use crate::rendezvous::{DialResult, Dials, RendezvousError, dial_majority, majority_of_others};
use std::collections::BTreeMap;
use std::time::Duration;

/// Round one of a join done: the answers of a majority, the rest dialed on.
#[derive(Debug)]
pub struct Asked {
    /// The answers of the nodes met, by node.
    pub answers: BTreeMap<u16, JoinAnswer>,
    cluster: ClusterFile,
    me: u16,
    incarnation: u64,
    joins: Dials,
}

/// Asks the other nodes of `cluster`, as node `me` at `incarnation`, to take this process
/// in `me`'s place, sending each peer `info_for(peer)`; returns once a majority of the
/// file (this node counted) answered, waiting at most `timeout` (see
/// [`crate::rendezvous::dial_majority`]).
///
/// # Errors
/// [`RendezvousError::NoMajority`] (how many answered, how many were needed); a refusal
/// (an incarnation not above one a node knows, …); an answer that is not a
/// [`JoinAnswer`] ([`RendezvousError::BadAnswer`]).
pub fn ask(
    cluster: &ClusterFile,
    me: u16,
    incarnation: u64,
    info_for: impl Fn(u16) -> Vec<u8>,
    timeout: Duration,
) -> Result<Asked, RendezvousError> {
    let join = |peer| {
        let info = info_for(peer);
        JoinMessage::Join { incarnation, info }.to_bytes()
    };
    let (bytes, joins) = dial_majority(cluster, me, join, timeout)?;
    let answers = bytes
        .into_iter()
        .map(|(peer, bytes)| Ok((peer, read_answer(peer, &bytes)?)))
        .collect::<Result<BTreeMap<_, _>, RendezvousError>>()?;
    assert!(
        answers.len() >= majority_of_others(cluster.len()),
        "rule (majority): a join goes on with a majority of the file only"
    );
    Ok(Asked {
        answers,
        cluster: cluster.clone(),
        me,
        incarnation,
        joins,
    })
}

/// `bytes`, node `peer`'s answer to a join, read.
fn read_answer(peer: u16, bytes: &[u8]) -> Result<JoinAnswer, RendezvousError> {
    serde_json::from_slice(bytes).map_err(|e| RendezvousError::BadAnswer {
        peer,
        reason: format!("not an answer to a join: {e}"),
    })
}

impl Asked {
    /// The nodes that did not answer yet (dialed on).
    pub fn missing(&self) -> Vec<u16> {
        self.joins.waiting()
    }

    /// Round two: this process connected its queue pairs towards the nodes that
    /// answered; tells them so ([`JoinMessage::Connected`]) and returns once a majority
    /// of the file (this node counted) acknowledged, waiting at most `timeout`. What is
    /// left — nodes to meet, nodes to tell — goes on in the background ([`Late`]).
    ///
    /// # Errors
    /// As [`ask`]: too few acknowledged, or one refused.
    pub fn connected(self, timeout: Duration) -> Result<Late, RendezvousError> {
        let mut late = Late {
            joins: self.joins,
            told: Dials::new(&self.cluster, self.me)?,
            connected: JoinMessage::Connected {
                incarnation: self.incarnation,
            }
            .to_bytes(),
            incarnation: self.incarnation,
        };
        for &peer in self.answers.keys() {
            late.connected(peer)?;
        }
        let needed = majority_of_others(self.cluster.len());
        let acknowledged = late.told.wait_for(needed, timeout)?;
        assert!(acknowledged.len() >= needed, "rule (majority)");
        Ok(late)
    }
}

/// A joined process's rendezvous that goes on: the nodes not met at the join dialed on,
/// and the nodes not told yet that it connected its side. Dropping it stops both.
#[derive(Debug)]
pub struct Late {
    joins: Dials,
    told: Dials,
    connected: Vec<u8>,
    incarnation: u64,
}

impl Late {
    /// The incarnation of the join.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The nodes not met yet (dialed on).
    pub fn missing(&self) -> Vec<u16> {
        self.joins.waiting()
    }

    /// Whether a node was met or told since last asked (cheap: for a loop's every turn).
    pub fn pending(&self) -> bool {
        self.joins.ended() || self.told.ended()
    }

    /// The nodes being told that this process connected its side (dialed on).
    pub fn telling(&self) -> Vec<u16> {
        self.told.waiting()
    }

    /// A node met late, with its answer — connect this process's side towards it, then
    /// call [`Late::connected`] — or why it was given up; `None` if none is waiting.
    pub fn met(&mut self) -> Option<(u16, Result<JoinAnswer, RendezvousError>)> {
        self.met_within(Duration::ZERO)
    }

    /// [`Late::met`], waiting at most `wait` for one.
    pub fn met_within(
        &mut self,
        wait: Duration,
    ) -> Option<(u16, Result<JoinAnswer, RendezvousError>)> {
        let (peer, result) = self.joins.next_within(wait)?;
        Some((peer, result.and_then(|bytes| read_answer(peer, &bytes))))
    }

    /// This process connected its side towards `peer` (met at the join or late): the
    /// node is told so ([`JoinMessage::Connected`]) in the background.
    ///
    /// # Errors
    /// A node not in the file or this node; the dialing thread not started.
    pub fn connected(&mut self, peer: u16) -> Result<(), RendezvousError> {
        self.told.dial(peer, self.connected.clone())
    }

    /// A node that acknowledged it was told (or why it was given up), waiting at most
    /// `wait` for one; `None` if none did meanwhile.
    pub fn told_within(&mut self, wait: Duration) -> Option<(u16, Result<(), RendezvousError>)> {
        let (peer, result): (u16, DialResult) = self.told.next_within(wait)?;
        Some((peer, result.map(|_| ())))
    }
}
