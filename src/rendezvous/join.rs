//! The rendezvous of a process that joins a running cluster: it dials every other node
//! ([`dial_each`]), each of which serves it on the listener it kept open
//! ([`serve_one`]), with the same proofs as at the start; what the information says (a
//! join, a connection made) is the caller's.

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
