//! Connection setup between the processes of a cluster: every node learns every other
//! node's connection information (for the verbs backend: queue-pair numbers, GID, memory
//! keys — opaque bytes here) over a small TCP exchange, and refuses peers that are not in
//! the cluster file or present another cluster id.
//!
//! For each pair of nodes the higher id dials the lower one's address from the
//! [`ClusterFile`]; the dialer sends a [`Hello`], the listener answers with its own or with
//! a refusal and its reason, and the dialer acknowledges an accepted answer: the listener
//! counts the peer only then. A dialer whose connection fails before it has acknowledged
//! (a reset, seen in 1 of 25 soft-RoCE cluster runs under emulation) dials again until the
//! timeout, and the listener, which did not count it, takes it again. Frames are a 4-byte
//! big-endian length and JSON. Nothing here is on the data path: once the exchange is
//! over, the sockets are closed.

use crate::cluster_file::ClusterFile;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The protocol name and version every hello carries.
pub const MAGIC: &str = "velos-rendezvous/1";

/// Frames larger than this are refused (a hello is small).
const MAX_FRAME: usize = 1 << 20;

/// What a node presents.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// [`MAGIC`].
    pub magic: String,
    /// The cluster id of the sender's cluster file.
    pub cluster_id: String,
    /// The sender's node id.
    pub node: u16,
    /// The sender's connection information.
    pub info: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
enum Answer {
    Accept(Hello),
    Refuse(String),
}

/// The dialer's last frame: it took the listener's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Ack {
    node: u16,
}

/// Why the exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum RendezvousError {
    /// A socket operation failed.
    #[error("rendezvous: {context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A peer refused this node.
    #[error("rendezvous: node {peer} refused node {me}: {reason}")]
    Refused {
        /// This node.
        me: u16,
        /// The peer that refused.
        peer: u16,
        /// Its reason.
        reason: String,
    },
    /// A peer answered, but not as a member of this cluster.
    #[error(
        "rendezvous: the process at node {peer}'s address is not node {peer} of this cluster: {reason}"
    )]
    Impostor {
        /// The node dialed.
        peer: u16,
        /// What was wrong.
        reason: String,
    },
    /// Some peers did not show up in time.
    #[error("rendezvous: no exchange with nodes {missing:?} within {timeout:?}{}", refusals_text(.refusals))]
    Timeout {
        /// The nodes missing.
        missing: Vec<u16>,
        /// How long it waited.
        timeout: Duration,
        /// Peers this node refused meanwhile, with the reason.
        refusals: Vec<String>,
    },
    /// This node is not in the cluster file.
    #[error("rendezvous: node {0} is not in the cluster file")]
    NotAMember(u16),
}

fn refusals_text(refusals: &[String]) -> String {
    if refusals.is_empty() {
        String::new()
    } else {
        format!("; refused meanwhile: {}", refusals.join("; "))
    }
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> RendezvousError {
    let context = context.into();
    move |source| RendezvousError::Io { context, source }
}

fn send<T: Serialize>(stream: &mut TcpStream, value: &T) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    stream.write_all(&(bytes.len() as u32).to_be_bytes())?;
    stream.write_all(&bytes)?;
    stream.flush()
}

fn receive<T: for<'de> Deserialize<'de>>(stream: &mut TcpStream) -> std::io::Result<T> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(std::io::Error::other(format!("a frame of {len} bytes")));
    }
    let mut bytes = vec![0u8; len];
    stream.read_exact(&mut bytes)?;
    serde_json::from_slice(&bytes).map_err(std::io::Error::other)
}

/// Exchanges `info` with every other node of `file` as node `me`; returns every peer's
/// information by node id. Waits at most `timeout` for the others to show up.
pub fn exchange(
    file: &ClusterFile,
    me: u16,
    info: &[u8],
    timeout: Duration,
) -> Result<BTreeMap<u16, Vec<u8>>, RendezvousError> {
    exchange_each(file, me, |_| info.to_vec(), timeout)
}

/// Exchanges information with every other node of `file` as node `me`, sending each peer
/// its own (`info_for(peer)`: for example memory keys only that peer may use); returns
/// what every peer sent this node, by node id. Waits at most `timeout` for the others.
pub fn exchange_each(
    file: &ClusterFile,
    me: u16,
    info_for: impl Fn(u16) -> Vec<u8> + Sync,
    timeout: Duration,
) -> Result<BTreeMap<u16, Vec<u8>>, RendezvousError> {
    if file.node(me).is_none() {
        return Err(RendezvousError::NotAMember(me));
    }
    let hello = Greeter {
        template: Hello {
            magic: MAGIC.into(),
            cluster_id: file.cluster_id.clone(),
            node: me,
            info: Vec::new(),
        },
        info_for: &info_for,
    };
    let deadline = Instant::now() + timeout;
    let address = file
        .socket_address(me)
        .map_err(io(format!("resolving node {me}'s address")))?;
    let listener = TcpListener::bind(address).map_err(io(format!("listening on {address}")))?;
    let (listened, dialed) = std::thread::scope(|scope| {
        let accepting = scope.spawn(|| accept_higher(file, &hello, &listener, deadline));
        let dialed = dial_lower(file, &hello, deadline);
        let listened = accepting
            .join()
            .expect("the accepting thread does not panic");
        (listened, dialed)
    });
    let mut peers = dialed?;
    peers.extend(listened?);
    assert_eq!(
        peers.len(),
        file.len() - 1,
        "every other node exchanged once"
    );
    Ok(peers)
}

/// This node's hello, for each peer with that peer's information.
struct Greeter<'a> {
    template: Hello,
    info_for: &'a (dyn Fn(u16) -> Vec<u8> + Sync),
}

impl Greeter<'_> {
    /// The hello for `peer`.
    fn to(&self, peer: u16) -> Hello {
        Hello {
            info: (self.info_for)(peer),
            ..self.template.clone()
        }
    }
}

/// Dials every node below `me` (retrying until it listens) and checks its answer.
fn dial_lower(
    file: &ClusterFile,
    greeter: &Greeter<'_>,
    deadline: Instant,
) -> Result<BTreeMap<u16, Vec<u8>>, RendezvousError> {
    let hello = &greeter.template;
    let mut peers = BTreeMap::new();
    for peer in 0..hello.node {
        let address = file
            .socket_address(peer)
            .map_err(io(format!("resolving node {peer}'s address")))?;
        // Dial until an answer arrives (a failed connection is dialed again: the listener
        // counts this node only once it acknowledged).
        let answer = loop {
            match greet(&address, greeter, peer, deadline) {
                Ok(answer) => break answer,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => {
                    return Err(match e {
                        Dial::Connect => RendezvousError::Timeout {
                            missing: (peer..hello.node).collect(),
                            timeout: deadline.saturating_duration_since(Instant::now()),
                            refusals: Vec::new(),
                        },
                        Dial::Io(context, source) => RendezvousError::Io { context, source },
                    });
                }
            }
        };
        match answer {
            Answer::Refuse(reason) => {
                return Err(RendezvousError::Refused {
                    me: hello.node,
                    peer,
                    reason,
                });
            }
            Answer::Accept(theirs) => {
                if let Some(reason) = mismatch(&theirs, &hello.cluster_id, Some(peer)) {
                    return Err(RendezvousError::Impostor { peer, reason });
                }
                peers.insert(peer, theirs.info);
            }
        }
    }
    Ok(peers)
}

/// Why one dial of a peer failed.
enum Dial {
    /// It does not listen (yet).
    Connect,
    /// The exchange broke: what was being done, and the error.
    Io(String, std::io::Error),
}

/// One dial of `peer` at `address`: the hello, the answer, and for an accepted answer the
/// acknowledgement.
fn greet(
    address: &std::net::SocketAddr,
    greeter: &Greeter<'_>,
    peer: u16,
    deadline: Instant,
) -> Result<Answer, Dial> {
    let mut stream = TcpStream::connect_timeout(address, Duration::from_millis(200))
        .map_err(|_| Dial::Connect)?;
    let failed = |context: String| move |e: std::io::Error| Dial::Io(context, e);
    let remaining = deadline.saturating_duration_since(Instant::now());
    stream
        .set_read_timeout(Some(remaining.max(Duration::from_millis(10))))
        .map_err(failed("setting a read timeout".into()))?;
    send(&mut stream, &greeter.to(peer)).map_err(failed(format!("sending to node {peer}")))?;
    let answer: Answer =
        receive(&mut stream).map_err(failed(format!("reading node {peer}'s answer")))?;
    if matches!(answer, Answer::Accept(_)) {
        let ack = Ack {
            node: greeter.template.node,
        };
        send(&mut stream, &ack).map_err(failed(format!("acknowledging node {peer}")))?;
    }
    Ok(answer)
}

/// What is wrong with `theirs` for a member of `cluster_id` (expected to be `node`).
fn mismatch(theirs: &Hello, cluster_id: &str, node: Option<u16>) -> Option<String> {
    if theirs.magic != MAGIC {
        return Some(format!("it speaks {:?}, not {MAGIC:?}", theirs.magic));
    }
    if theirs.cluster_id != cluster_id {
        return Some(format!(
            "it presents cluster id {:?}, this cluster is {cluster_id:?}",
            theirs.cluster_id
        ));
    }
    match node {
        Some(n) if theirs.node != n => Some(format!("it says it is node {}", theirs.node)),
        _ => None,
    }
}

/// Accepts every node above `me`, refusing whoever is not one of them.
fn accept_higher(
    file: &ClusterFile,
    greeter: &Greeter<'_>,
    listener: &TcpListener,
    deadline: Instant,
) -> Result<BTreeMap<u16, Vec<u8>>, RendezvousError> {
    let hello = &greeter.template;
    let me = hello.node;
    let expected: Vec<u16> = (me + 1..file.len() as u16).collect();
    let mut peers = BTreeMap::new();
    let mut refusals = Vec::new();
    listener
        .set_nonblocking(true)
        .map_err(io("making the listener non-blocking"))?;
    while peers.len() < expected.len() {
        let mut stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(RendezvousError::Timeout {
                        missing: expected
                            .iter()
                            .copied()
                            .filter(|n| !peers.contains_key(n))
                            .collect(),
                        timeout: Duration::ZERO,
                        refusals,
                    });
                }
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            Err(e) => return Err(io("accepting a connection")(e)),
        };
        stream
            .set_nonblocking(false)
            .and_then(|()| stream.set_read_timeout(Some(Duration::from_secs(2))))
            .map_err(io("configuring an accepted connection"))?;
        let Ok(theirs) = receive::<Hello>(&mut stream) else {
            refusals.push("a connection that sent no valid hello".to_string());
            continue;
        };
        let reason = mismatch(&theirs, &hello.cluster_id, None).or_else(|| {
            if file.node(theirs.node).is_none() {
                Some(format!("node {} is not in the cluster file", theirs.node))
            } else if !expected.contains(&theirs.node) {
                Some(format!(
                    "node {} must be dialed by node {me}, not dial it",
                    theirs.node
                ))
            } else if peers.contains_key(&theirs.node) {
                Some(format!("node {} already connected", theirs.node))
            } else {
                None
            }
        });
        match reason {
            Some(reason) => {
                // Best effort: the refused peer learns why; its failure is its own.
                let _ = send(&mut stream, &Answer::Refuse(reason.clone()));
                refusals.push(format!("node {}: {reason}", theirs.node));
            }
            None => {
                // Counted once it acknowledged; a dialer that did not (its connection
                // failed) dials again.
                let acked = send(&mut stream, &Answer::Accept(greeter.to(theirs.node)))
                    .and_then(|()| receive::<Ack>(&mut stream))
                    .is_ok_and(|ack| ack.node == theirs.node);
                if acked {
                    peers.insert(theirs.node, theirs.info);
                } else {
                    refusals.push(format!("node {}: no acknowledgement", theirs.node));
                }
            }
        }
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster file of `n` nodes on free loopback ports.
    fn file(n: u16, cluster_id: &str) -> ClusterFile {
        let mut text = format!("cluster_id = \"{cluster_id}\"\n");
        for id in 0..n {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            text += &format!("[[node]]\nid = {id}\naddress = \"127.0.0.1:{port}\"\n");
        }
        ClusterFile::parse(&text, "test.toml").unwrap()
    }

    #[test]
    fn three_nodes_learn_each_others_information() {
        let f = file(3, "c1");
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3u16)
                .map(|me| {
                    let f = &f;
                    s.spawn(move || exchange(f, me, &[me as u8; 3], Duration::from_secs(10)))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (me, r) in results.into_iter().enumerate() {
            let peers = r.unwrap();
            let ids: Vec<u16> = peers.keys().copied().collect();
            let others: Vec<u16> = (0..3).filter(|&n| n != me as u16).collect();
            assert_eq!(ids, others);
            for (n, info) in peers {
                assert_eq!(info, vec![n as u8; 3]);
            }
        }
    }

    #[test]
    fn each_peer_receives_the_information_meant_for_it() {
        let f = file(3, "c1");
        let results: Vec<_> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..3u16)
                .map(|me| {
                    let f = &f;
                    let info_for = move |peer: u16| vec![me as u8, peer as u8];
                    s.spawn(move || exchange_each(f, me, info_for, Duration::from_secs(10)))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for (me, r) in results.into_iter().enumerate() {
            let peers = r.unwrap();
            assert_eq!(peers.len(), 2);
            for (n, info) in peers {
                assert_eq!(info, vec![n as u8, me as u8], "node {me} from node {n}");
            }
        }
    }

    #[test]
    fn a_process_of_another_cluster_is_refused_with_the_reason() {
        let ours = file(2, "c1");
        let mut theirs = ours.clone();
        theirs.cluster_id = "c2".into();
        let (zero, one) = std::thread::scope(|s| {
            let zero = s.spawn(|| exchange(&ours, 0, b"a", Duration::from_millis(1500)));
            let one = s.spawn(|| exchange(&theirs, 1, b"b", Duration::from_millis(1500)));
            (zero.join().unwrap(), one.join().unwrap())
        });
        let one = one.unwrap_err().to_string();
        assert!(one.contains("refused") && one.contains("\"c2\""), "{one}");
        let zero = zero.unwrap_err().to_string();
        assert!(zero.contains("no exchange with nodes [1]"), "{zero}");
        assert!(zero.contains("cluster id \"c2\""), "{zero}");
    }

    #[test]
    fn a_dialer_whose_connection_breaks_dials_again_and_is_counted_once_it_acknowledged() {
        let f = file(2, "c1");
        let listener = TcpListener::bind(f.socket_address(0).unwrap()).unwrap();
        let (one, acked) = std::thread::scope(|s| {
            let one = s.spawn(|| exchange(&f, 1, b"b", Duration::from_secs(5)));
            // Node 0, by hand: the first connection is dropped after its hello (as a reset
            // would end it), the second is answered and must be acknowledged.
            listener.set_nonblocking(true).unwrap();
            let accept = || {
                let start = Instant::now();
                loop {
                    match listener.accept() {
                        Ok((st, _)) => {
                            st.set_nonblocking(false).unwrap();
                            return st;
                        }
                        Err(_) if start.elapsed() < Duration::from_secs(5) => {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        Err(e) => panic!("node 1 did not dial again: {e}"),
                    }
                }
            };
            let mut first = accept();
            let _: Hello = receive(&mut first).unwrap();
            drop(first);
            let mut second = accept();
            let theirs: Hello = receive(&mut second).unwrap();
            assert_eq!(theirs.node, 1);
            let mine = Hello {
                magic: MAGIC.into(),
                cluster_id: "c1".into(),
                node: 0,
                info: b"a".to_vec(),
            };
            send(&mut second, &Answer::Accept(mine)).unwrap();
            let ack: Ack = receive(&mut second).unwrap();
            (one.join().unwrap(), ack)
        });
        assert_eq!(acked, Ack { node: 1 });
        assert_eq!(one.unwrap()[&0], b"a".to_vec());
    }

    #[test]
    fn a_node_outside_the_file_is_refused() {
        let f = file(2, "c1");
        assert!(matches!(
            exchange(&f, 5, b"x", Duration::from_millis(100)),
            Err(RendezvousError::NotAMember(5))
        ));
        // A process claiming to be node 7 dials node 0.
        let (zero, refused) = std::thread::scope(|s| {
            let zero = s.spawn(|| exchange(&f, 0, b"a", Duration::from_millis(1500)));
            let address = f.socket_address(0).unwrap();
            let mut stream = loop {
                match TcpStream::connect(address) {
                    Ok(st) => break st,
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            };
            let hello = Hello {
                magic: MAGIC.into(),
                cluster_id: "c1".into(),
                node: 7,
                info: Vec::new(),
            };
            send(&mut stream, &hello).unwrap();
            let answer: Answer = receive(&mut stream).unwrap();
            (zero.join().unwrap(), answer)
        });
        assert_eq!(
            refused,
            Answer::Refuse("node 7 is not in the cluster file".into())
        );
        assert!(zero.is_err(), "node 1 never came");
    }
}
