//! The rendezvous of a process that joins a running cluster: it dials the other nodes
//! ([`dial_majority`]: it goes on once a majority of the cluster file answered, the
//! others dialed on in the background; [`dial_each`]: every one), each of which serves
//! it on the listener it kept open ([`serve_one`]), with the same proofs as at the start;
//! what the information says (a join, a connection made) is the caller's.

use super::dials::{Dials, majority_of_others};
use super::{Local, RendezvousError, dial, take};
use crate::cluster_file::ClusterFile;
use std::collections::BTreeMap;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Exchanges information with every other node of `file` as node `me`, dialing each of
/// them (they listen already: a running cluster), sending each peer `info_for(peer)`;
/// what every peer answered, by node id. Waits at most `timeout` for them all.
pub fn dial_each(
    file: &ClusterFile,
    me: u16,
    info_for: impl Fn(u16) -> Vec<u8> + Sync,
    timeout: Duration,
) -> Result<BTreeMap<u16, Vec<u8>>, RendezvousError> {
    let local = Local::new(file, me, &info_for)?;
    let others: Vec<u16> = (0..file.len() as u16).filter(|&p| p != me).collect();
    let peers = dial(&local, &others, Instant::now() + timeout)?;
    assert_eq!(peers.len(), others.len(), "every other node answered once");
    Ok(peers)
}

/// Exchanges information with the other nodes of `file` as node `me`, dialing each of
/// them on a thread of its own and sending each `info_for(peer)`, until every one
/// answered, or enough did that this node and they are a strict majority of the file and
/// [`super::STRAGGLERS_WITHIN`] more passed. What they answered, by node, and the dials
/// of the others, which go on in the background until those nodes answer (or the dials
/// are dropped). Waits at most `timeout` for the majority.
///
/// # Errors
/// [`RendezvousError::NoMajority`] if too few answered in time, saying how many did and
/// how many were needed; the first refusal met (the remaining dials stopped); this node
/// not in the file, no secret.
pub fn dial_majority(
    file: &ClusterFile,
    me: u16,
    info_for: impl Fn(u16) -> Vec<u8>,
    timeout: Duration,
) -> Result<(BTreeMap<u16, Vec<u8>>, Dials), RendezvousError> {
    let mut dials = Dials::new(file, me)?;
    for peer in (0..file.len() as u16).filter(|&p| p != me) {
        dials.dial(peer, info_for(peer))?;
    }
    let answers = dials.wait_for(majority_of_others(file.len()), timeout)?;
    assert_eq!(
        answers.len() + dials.waiting().len(),
        file.len() - 1,
        "every other node answered or is dialed on"
    );
    Ok((answers, dials))
}

/// Serves one process that dialed node `me` of `file` on `stream` (accepted from the
/// listener a running node keeps): once it proved the secret and sent its information,
/// `answer(node, info)` says what to send it back, or why it is refused. Its node and
/// information once it acknowledged the answer; else what was refused, in words.
pub fn serve_one(
    file: &ClusterFile,
    me: u16,
    stream: &mut TcpStream,
    answer: impl FnOnce(u16, &[u8]) -> Result<Vec<u8>, String>,
) -> Result<(u16, Vec<u8>), String> {
    let no_info = |_: u16| Vec::new();
    let local = Local::new(file, me, &no_info).map_err(|e| e.to_string())?;
    stream
        .set_nonblocking(false)
        .and_then(|()| stream.set_read_timeout(Some(Duration::from_secs(10))))
        .map_err(|e| format!("configuring an accepted connection: {e}"))?;
    let admit = |node: u16| (node == me).then(|| format!("node {node} is this node"));
    take(&local, stream, admit, answer)
}
