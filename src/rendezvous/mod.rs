//! Connection setup between the processes of a cluster: every node learns every other
//! node's connection information (for the verbs backend: queue-pair numbers, GID, memory
//! keys — opaque bytes here) over a small TCP exchange, and only from a process that
//! proves it knows the cluster's secret ([`ClusterFile::secret`]); a process that does not
//! learns nothing but a refusal and its reason.
//!
//! For each pair of nodes the higher id dials the lower one's address from the
//! [`ClusterFile`]. The dialer sends a hello (its cluster id, its node, a fresh nonce);
//! the listener checks it and answers with its own nonce and a proof that it knows the
//! secret; the dialer checks that proof and sends its information with its own proof; the
//! listener checks it and answers with its information and a proof; the dialer checks it
//! and acknowledges, and the listener counts the peer only then. Each proof is an
//! HMAC-SHA-256 under the secret over the whole exchange — both nonces, both nodes, the
//! role, the information (`proof.rs`) — so a recorded exchange replayed against a fresh
//! nonce is refused, and neither side sends information before the other proved the
//! secret. The information itself travels sealed (`seal.rs`: ChaCha20-Poly1305 under a key
//! derived from the secret and both nonces), so an eavesdropper on the set-up network sees
//! no key, queue-pair number or address of it. Either side that refuses says why. A dialer whose connection fails before it
//! has acknowledged (a reset, seen in 1 of 25 soft-RoCE cluster runs under emulation)
//! dials again until the timeout, and the listener, which did not count it, takes it
//! again. Frames are a 4-byte big-endian length and JSON (`wire.rs`). Nothing here is on
//! the data path: once the exchange is over, the sockets are closed.
//!
//! Not covered: who talks to whom, and when (the hellos name the cluster and the nodes);
//! an active attacker can break an exchange (it is then dialed again) but learns nothing.

mod dials;
mod join;
mod proof;
mod seal;
#[cfg(test)]
pub(crate) mod tests;
mod wire;

use crate::cluster_file::ClusterFile;
pub use dials::{DialResult, Dials, PAUSE_MAX, STRAGGLERS_WITHIN, majority_of_others};
pub use join::{dial_each, dial_majority, serve_one};
use proof::{NONCE_BYTES, Role, Transcript};
use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};
pub use wire::decode_frames;
use wire::{Ack, Answer, Challenge, Hello, Proof, receive, send};

/// The protocol name and version every hello carries.
pub const MAGIC: &str = "velos-rendezvous/3";

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
    /// A joiner reached fewer nodes than it needs: with itself, a strict majority of the
    /// cluster file's nodes.
    #[error(
        "rendezvous: node {me} reached {} of the {} other nodes within {timeout:?} \
         (answered: {answered:?}; no answer from {missing:?}); joining needs {needed} \
         of them (with this one, a majority of the cluster file's {nodes} nodes)",
        answered.len(),
        nodes.saturating_sub(1)
    )]
    NoMajority {
        /// This node.
        me: u16,
        /// The nodes that answered.
        answered: Vec<u16>,
        /// How many other nodes had to answer.
        needed: usize,
        /// The nodes of the cluster file.
        nodes: usize,
        /// The nodes that did not answer (still dialed in the background by the
        /// [`Dials`] that waited, if kept).
        missing: Vec<u16>,
        /// How long it waited.
        timeout: Duration,
    },
    /// A peer proved the secret but answered what this node cannot read.
    #[error("rendezvous: node {peer}'s answer cannot be read: {reason}")]
    BadAnswer {
        /// The peer.
        peer: u16,
        /// What was wrong.
        reason: String,
    },
    /// This node is not in the cluster file.
    #[error("rendezvous: node {0} is not in the cluster file")]
    NotAMember(u16),
    /// The cluster's secret cannot be had.
    #[error("rendezvous: no secret: {0}")]
    NoSecret(String),
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

/// This node's side of every exchange: who it is, the secret, what it sends each peer.
struct Local<'a> {
    file: &'a ClusterFile,
    me: u16,
    secret: Vec<u8>,
    info_for: &'a (dyn Fn(u16) -> Vec<u8> + Sync),
}

impl<'a> Local<'a> {
    /// Node `me` of `file`, sending `info_for(peer)` to each peer: refused if `me` is not
    /// in the file or the secret cannot be had.
    fn new(
        file: &'a ClusterFile,
        me: u16,
        info_for: &'a (dyn Fn(u16) -> Vec<u8> + Sync),
    ) -> Result<Local<'a>, RendezvousError> {
        if file.node(me).is_none() {
            return Err(RendezvousError::NotAMember(me));
        }
        let secret = file.secret().map_err(RendezvousError::NoSecret)?;
        Ok(Local {
            file,
            me,
            secret,
            info_for,
        })
    }

    /// The transcript of an exchange between `dialer` and `listener` with these nonces.
    fn transcript<'b>(
        &'b self,
        dialer: u16,
        listener: u16,
        dialer_nonce: &'b [u8],
        listener_nonce: &'b [u8],
    ) -> Transcript<'b> {
        Transcript {
            cluster_id: &self.file.cluster_id,
            dialer,
            listener,
            dialer_nonce,
            listener_nonce,
        }
    }
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
    exchange_on(&listen(file, me)?, file, me, info_for, timeout)
}

/// Listens on node `me`'s address of `file` (for [`exchange_on`], and to keep serving
/// processes that join later: [`serve_one`]).
pub fn listen(file: &ClusterFile, me: u16) -> Result<TcpListener, RendezvousError> {
    if file.node(me).is_none() {
        return Err(RendezvousError::NotAMember(me));
    }
    let address = file
        .socket_address(me)
        .map_err(io(format!("resolving node {me}'s address")))?;
    TcpListener::bind(address).map_err(io(format!("listening on {address}")))
}

/// [`exchange_each`] on `listener`, node `me`'s own ([`listen`]), which stays open.
pub fn exchange_on(
    listener: &TcpListener,
    file: &ClusterFile,
    me: u16,
    info_for: impl Fn(u16) -> Vec<u8> + Sync,
    timeout: Duration,
) -> Result<BTreeMap<u16, Vec<u8>>, RendezvousError> {
    let local = Local::new(file, me, &info_for)?;
    let deadline = Instant::now() + timeout;
    let (listened, dialed) = std::thread::scope(|scope| {
        let accepting = scope.spawn(|| accept_higher(&local, listener, deadline));
        let dialed = dial_lower(&local, deadline);
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

/// How one dial of a peer ended.
enum Dialed {
    /// It proved the secret, took this node's information and sent its own.
    Accepted(Vec<u8>),
    /// It refused this node, saying why.
    Refused(String),
    /// It is not a member of this cluster as the file and the secret say.
    Impostor(String),
}

/// Dials every node below `me` (retrying until it listens) and exchanges with it.
fn dial_lower(
    local: &Local<'_>,
    deadline: Instant,
) -> Result<BTreeMap<u16, Vec<u8>>, RendezvousError> {
    dial(local, &(0..local.me).collect::<Vec<_>>(), deadline)
}

/// Dials each of `peers` in turn (retrying until it listens) and exchanges with it.
fn dial(
    local: &Local<'_>,
    peers_to_dial: &[u16],
    deadline: Instant,
) -> Result<BTreeMap<u16, Vec<u8>>, RendezvousError> {
    let me = local.me;
    let mut peers = BTreeMap::new();
    for &peer in peers_to_dial {
        let address = local
            .file
            .socket_address(peer)
            .map_err(io(format!("resolving node {peer}'s address")))?;
        // Dial until the exchange ends (a failed connection is dialed again: the listener
        // counts this node only once it acknowledged).
        let dialed = loop {
            match greet(&address, local, peer, deadline) {
                Ok(dialed) => break dialed,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => {
                    return Err(match e {
                        Dial::Connect => RendezvousError::Timeout {
                            missing: peers_to_dial
                                .iter()
                                .copied()
                                .filter(|p| !peers.contains_key(p))
                                .collect(),
                            timeout: deadline.saturating_duration_since(Instant::now()),
                            refusals: Vec::new(),
                        },
                        Dial::Io(context, source) => RendezvousError::Io { context, source },
                    });
                }
            }
        };
        match dialed {
            Dialed::Refused(reason) => return Err(RendezvousError::Refused { me, peer, reason }),
            Dialed::Impostor(reason) => return Err(RendezvousError::Impostor { peer, reason }),
            Dialed::Accepted(info) => {
                peers.insert(peer, info);
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

/// One dial of `peer` at `address`: hello, challenge, proof, answer, acknowledgement.
fn greet(
    address: &std::net::SocketAddr,
    local: &Local<'_>,
    peer: u16,
    deadline: Instant,
) -> Result<Dialed, Dial> {
    let mut stream = TcpStream::connect_timeout(address, Duration::from_millis(200))
        .map_err(|_| Dial::Connect)?;
    let failed = |context: String| move |e: std::io::Error| Dial::Io(context, e);
    let remaining = deadline.saturating_duration_since(Instant::now());
    stream
        .set_read_timeout(Some(remaining.max(Duration::from_millis(10))))
        .map_err(failed("setting a read timeout".into()))?;
    let mine = proof::nonce().map_err(failed("drawing a nonce".into()))?;
    let hello = Hello {
        magic: MAGIC.into(),
        cluster_id: local.file.cluster_id.clone(),
        node: local.me,
        nonce: mine.clone(),
    };
    send(&mut stream, &hello).map_err(failed(format!("sending to node {peer}")))?;
    let challenge: Challenge =
        receive(&mut stream).map_err(failed(format!("reading node {peer}'s challenge")))?;
    let (theirs, proof) = match challenge {
        Challenge::Refuse(reason) => return Ok(Dialed::Refused(reason)),
        Challenge::Prove { magic, .. } if magic != MAGIC => {
            return Ok(Dialed::Impostor(format!(
                "it speaks {magic:?}, not {MAGIC:?}"
            )));
        }
        Challenge::Prove { node, .. } if node != peer => {
            return Ok(Dialed::Impostor(format!("it says it is node {node}")));
        }
        Challenge::Prove { nonce, proof, .. } => (nonce, proof),
    };
    let transcript = local.transcript(local.me, peer, &mine, &theirs);
    let knows = theirs.len() == NONCE_BYTES
        && transcript.verify(&local.secret, Role::ListenerKnows, &[], &proof);
    if !knows {
        // Best effort: it learns why, and nothing else.
        let reason = format!("node {peer}'s proof does not verify: a process without the secret");
        let _ = send(&mut stream, &Proof::Refuse(reason));
        return Ok(Dialed::Impostor(
            "it does not prove it knows the cluster's secret".into(),
        ));
    }
    let info = (local.info_for)(peer);
    let (info, proof) = transcript.seal_and_prove(&local.secret, Role::DialerSends, &info);
    send(&mut stream, &Proof::Send { info, proof })
        .map_err(failed(format!("sending to node {peer}")))?;
    let answer: Answer =
        receive(&mut stream).map_err(failed(format!("reading node {peer}'s answer")))?;
    match answer {
        Answer::Refuse(reason) => Ok(Dialed::Refused(reason)),
        Answer::Accept { info, proof } => {
            let opened =
                transcript.open_and_verify(&local.secret, Role::ListenerSends, &info, &proof);
            let Some(info) = opened else {
                return Ok(Dialed::Impostor(
                    "its information does not open or its proof does not verify".into(),
                ));
            };
            let ack = Ack { node: local.me };
            send(&mut stream, &ack).map_err(failed(format!("acknowledging node {peer}")))?;
            Ok(Dialed::Accepted(info))
        }
    }
}

/// Accepts every node above `me`, refusing whoever is not one of them or cannot prove the
/// secret.
fn accept_higher(
    local: &Local<'_>,
    listener: &TcpListener,
    deadline: Instant,
) -> Result<BTreeMap<u16, Vec<u8>>, RendezvousError> {
    let me = local.me;
    let expected: Vec<u16> = (me + 1..local.file.len() as u16).collect();
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
        let admit = |node: u16| {
            if node <= me {
                Some(format!(
                    "node {node} must be dialed by node {me}, not dial it"
                ))
            } else if !expected.contains(&node) || peers.contains_key(&node) {
                Some(format!("node {node} already connected"))
            } else {
                None
            }
        };
        let answer = |node: u16, _: &[u8]| Ok((local.info_for)(node));
        match take(local, &mut stream, admit, answer) {
            Ok((node, info)) => {
                peers.insert(node, info);
            }
            Err(refusal) => refusals.push(refusal),
        }
    }
    Ok(peers)
}

/// One dialer's exchange on `stream`: its node and information once it proved the secret
/// and acknowledged; else what was refused, in words. `admit(node)`: why that node is
/// not one this node takes now, if it is not; `answer(node, info)`: what this node sends
/// it once it proved the secret and sent `info`, or why it refuses.
fn take(
    local: &Local<'_>,
    stream: &mut TcpStream,
    admit: impl Fn(u16) -> Option<String>,
    answer: impl FnOnce(u16, &[u8]) -> Result<Vec<u8>, String>,
) -> Result<(u16, Vec<u8>), String> {
    let me = local.me;
    let Ok(hello) = receive::<Hello>(stream) else {
        return Err("a connection that sent no valid hello".to_string());
    };
    let node = hello.node;
    let reason = if hello.magic != MAGIC {
        Some(format!("it speaks {:?}, not {MAGIC:?}", hello.magic))
    } else if hello.cluster_id != local.file.cluster_id {
        Some(format!(
            "it presents cluster id {:?}, this cluster is {:?}",
            hello.cluster_id, local.file.cluster_id
        ))
    } else if local.file.node(node).is_none() {
        Some(format!("node {node} is not in the cluster file"))
    } else if let Some(reason) = admit(node) {
        Some(reason)
    } else if hello.nonce.len() != NONCE_BYTES {
        Some(format!("a nonce of {} bytes", hello.nonce.len()))
    } else {
        None
    };
    if let Some(reason) = reason {
        // Best effort: the refused peer learns why; its failure is its own.
        let _ = send(stream, &Challenge::Refuse(reason.clone()));
        return Err(format!("node {node}: {reason}"));
    }
    let mine = proof::nonce().map_err(|e| format!("drawing a nonce: {e}"))?;
    let transcript = local.transcript(node, me, &hello.nonce, &mine);
    let challenge = Challenge::Prove {
        magic: MAGIC.into(),
        node: me,
        nonce: mine.clone(),
        proof: transcript.prove(&local.secret, Role::ListenerKnows, &[]),
    };
    let broke = |e: std::io::Error| format!("node {node}: the exchange broke: {e}");
    send(stream, &challenge).map_err(broke)?;
    let (sealed, proof) = match receive::<Proof>(stream).map_err(broke)? {
        Proof::Refuse(reason) => return Err(format!("node {node} refused this node: {reason}")),
        Proof::Send { info, proof } => (info, proof),
    };
    // The information opens only under this exchange's key, and the proof covers it.
    let opened = transcript.open_and_verify(&local.secret, Role::DialerSends, &sealed, &proof);
    let Some(info) = opened else {
        let reason = "the proof does not verify: not a process of this cluster (a wrong \
                      secret, or a replayed exchange)";
        let _ = send(stream, &Answer::Refuse(reason.into()));
        return Err(format!("node {node}: {reason}"));
    };
    // Counted once it acknowledged; a dialer that did not (its connection failed) dials
    // again.
    let mine = match answer(node, &info) {
        Ok(mine) => mine,
        Err(reason) => {
            let _ = send(stream, &Answer::Refuse(reason.clone()));
            return Err(format!("node {node}: {reason}"));
        }
    };
    let (sealed, proof) = transcript.seal_and_prove(&local.secret, Role::ListenerSends, &mine);
    let acked = send(
        stream,
        &Answer::Accept {
            info: sealed,
            proof,
        },
    )
    .and_then(|()| receive::<Ack>(stream))
    .is_ok_and(|ack| ack.node == node);
    if !acked {
        return Err(format!("node {node}: no acknowledgement"));
    }
    Ok((node, info))
}
