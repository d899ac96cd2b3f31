//! The one-node-per-process form of the verbs backend, with three [`VerbsNode`]s in one
//! process on one device: their information goes through its byte form (as a cluster
//! rendezvous carries it), they connect, and their endpoints reach each other's memory.
//!
//! Without a device (no libibverbs, ENOSYS, or an empty device list) every test that
//! needs one prints a skip message and passes, unless `VELOS_REQUIRE_RDMA=1`, which makes
//! "no device" a failure. `VELOS_RDMA_DEVICE` and `VELOS_RDMA_GID_INDEX` choose the device
//! and GID index.
#![cfg(feature = "verbs")]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use velos_rdma::verbs::{NodeInfo, VerbsError, VerbsNode, VerbsOptions};
use velos_rdma::{Endpoint, Layout, Loc, NodeId, Op, RdmaError, Reply, Rmw, WorkId, drive};

mod common;
use common::Script;

const D: WorkId = WorkId(1);
const E: WorkId = WorkId(2);
const NODES: u16 = 3;
const WORDS: u32 = 8;
const THREADS: u16 = 2;

/// Whether the environment demands a device (`VELOS_REQUIRE_RDMA=1`).
fn rdma_required() -> bool {
    std::env::var("VELOS_REQUIRE_RDMA").is_ok_and(|v| v == "1")
}

fn layout() -> Layout {
    Layout::uniform(NODES, WORDS)
}

/// Node `id` of `layout` with `threads` threads on the device the environment names, or
/// `None` (after a skip message) when this machine has no RDMA device.
fn open(test: &str, layout: Layout, id: u16, threads: u16) -> Option<VerbsNode> {
    match VerbsNode::with_options(layout, NodeId(id), threads, VerbsOptions::from_env()) {
        Ok(node) => Some(node),
        Err(error) if error.is_no_device() && !rdma_required() => {
            println!("skipped {test}: {error} (VELOS_REQUIRE_RDMA=1 makes this a failure)");
            None
        }
        Err(error) => panic!("{test}: no usable RDMA node: {error}"),
    }
}

/// Three unconnected nodes of [`layout`].
fn open_three(test: &str) -> Option<Vec<VerbsNode>> {
    (0..NODES)
        .map(|id| open(test, layout(), id, THREADS))
        .collect()
}

/// Every node's information as the others receive it: to bytes and back.
fn exchange(nodes: &[VerbsNode]) -> Vec<NodeInfo> {
    nodes
        .iter()
        .map(|node| {
            let bytes = node.local_info().to_bytes();
            NodeInfo::from_bytes(&bytes).expect("our own bytes")
        })
        .collect()
}

/// The information of every node but `me`, by node id (what a rendezvous returns).
fn peers_of(me: u16, infos: &[NodeInfo]) -> BTreeMap<u16, NodeInfo> {
    infos
        .iter()
        .filter(|info| info.node != NodeId(me))
        .map(|info| (info.node.0, info.clone()))
        .collect()
}

/// Node 0 with `options`, connected to nodes 1 and 2, which never connect back: nothing
/// answers node 0's requests to them (keep them alive while node 0 posts). `None` (after a
/// skip message) when this machine has no RDMA device.
fn node0_with_silent_peers(
    test: &str,
    options: VerbsOptions,
) -> Option<(VerbsNode, Vec<VerbsNode>)> {
    let mut node0 = match VerbsNode::with_options(layout(), NodeId(0), THREADS, options) {
        Ok(node) => node,
        Err(error) if error.is_no_device() && !rdma_required() => {
            println!("skipped {test}: {error} (VELOS_REQUIRE_RDMA=1 makes this a failure)");
            return None;
        }
        Err(error) => panic!("{test}: no usable RDMA node: {error}"),
    };
    let silent: Vec<VerbsNode> = (1..NODES)
        .map(|id| open(test, layout(), id, THREADS).expect("device"))
        .collect();
    let mut peers = BTreeMap::new();
    for node in &silent {
        let info = NodeInfo::from_bytes(&node.local_info().to_bytes()).expect("our bytes");
        peers.insert(node.id().0, info);
    }
    node0.connect(&peers).expect("connect");
    Some((node0, silent))
}

/// Three connected nodes.
fn cluster(test: &str) -> Option<Vec<VerbsNode>> {
    let mut nodes = open_three(test)?;
    let infos = exchange(&nodes);
    for node in &mut nodes {
        let peers = peers_of(node.id().0, &infos);
        node.connect(&peers).expect("connect");
        assert!(node.is_connected());
    }
    Some(nodes)
}

fn w(node: u16, word: u32) -> Loc {
    Loc::word(NodeId(node), word)
}

/// Drives a script of `ops` on thread `thread` of `node` and returns the replies.
fn script(node: &VerbsNode, thread: u16, ops: Vec<Op>) -> Vec<Reply> {
    let mut endpoint = node.endpoint(thread).expect("endpoint");
    assert_eq!(endpoint.node(), node.id());
    let mut process = Script::new(ops);
    drive(&mut process, &mut endpoint);
    process.replies
}

fn atomic(local: Loc, remote: Loc, rmw: Rmw, work_id: WorkId) -> Op {
    Op::Atomic {
        local,
        remote,
        rmw,
        work_id,
    }
}

#[test]
fn put_get_cas_faa_across_nodes_after_a_byte_exchange() {
    let Some(nodes) = cluster("put_get_cas_faa_across_nodes_after_a_byte_exchange") else {
        return;
    };
    let name = nodes[0].device_name().to_owned();
    // A put from node 0 lands in node 1's memory, read back by node 1's CPU.
    nodes[0].write(w(0, 0), 0x5151).unwrap();
    let replies = script(
        &nodes[0],
        0,
        vec![
            Op::Put {
                remote: w(1, 3),
                local: w(0, 0),
                work_id: D,
            },
            Op::PutInline {
                remote: w(1, 4),
                value: 77,
                work_id: D,
            },
            Op::Wait { work_id: D },
        ],
    );
    assert_eq!(replies, vec![Reply::Done; 3], "on {name}");
    assert_eq!(
        script(&nodes[1], 1, vec![Op::Load { loc: w(1, 3) }]),
        vec![Reply::Value(0x5151)]
    );
    assert_eq!(nodes[1].read(w(1, 4)), Ok(77));

    // A get from node 2 of node 1's word.
    let replies = script(
        &nodes[2],
        1,
        vec![
            Op::Get {
                local: w(2, 7),
                remote: w(1, 4),
                work_id: E,
            },
            Op::Wait { work_id: E },
            Op::Load { loc: w(2, 7) },
        ],
    );
    assert_eq!(replies[2], Reply::Value(77));

    // Remote CAS hit and miss and an FAA on node 2's word, from node 0.
    nodes[2].write(w(2, 1), 10).unwrap();
    let cas = |expected, new| Rmw::Cas { expected, new };
    let replies = script(
        &nodes[0],
        1,
        vec![
            atomic(w(0, 1), w(2, 1), cas(10, 20), D),
            Op::Wait { work_id: D },
            Op::Load { loc: w(0, 1) },
            atomic(w(0, 2), w(2, 1), cas(10, 30), D),
            Op::Wait { work_id: D },
            Op::Load { loc: w(0, 2) },
            atomic(w(0, 3), w(2, 1), Rmw::Faa { add: 5 }, E),
            Op::Wait { work_id: E },
            Op::Load { loc: w(0, 3) },
        ],
    );
    let loads: Vec<_> = replies.iter().skip(2).step_by(3).cloned().collect();
    assert_eq!(
        loads,
        [Reply::Value(10), Reply::Value(20), Reply::Value(20)],
        "CAS hit returns the old value, the miss the current one, FAA the old one"
    );
    assert_eq!(nodes[2].read(w(2, 1)), Ok(25));

    // Loopback: node 1 towards its own words.
    let replies = script(
        &nodes[1],
        0,
        vec![
            atomic(w(1, 0), w(1, 4), Rmw::Faa { add: 1 }, D),
            Op::Wait { work_id: D },
            Op::Load { loc: w(1, 0) },
            Op::Load { loc: w(1, 4) },
        ],
    );
    assert_eq!(replies[2..], [Reply::Value(77), Reply::Value(78)]);

    // CPU operations stay on the own node.
    let replies = script(&nodes[0], 0, vec![Op::Load { loc: w(1, 0) }]);
    assert!(
        matches!(replies[0], Reply::Failed(RdmaError::NotLocal { .. })),
        "{replies:?}"
    );
    assert_eq!(
        nodes[0].read(w(1, 0)),
        Err(RdmaError::NotLocal {
            loc: w(1, 0),
            node: NodeId(0)
        })
    );
    assert!(nodes[0].ops() > 0);
}

#[test]
fn threads_of_every_node_add_exactly_on_one_word() {
    let Some(nodes) = cluster("threads_of_every_node_add_exactly_on_one_word") else {
        return;
    };
    const TIMES: u64 = 20;
    let target = w(2, 5);
    std::thread::scope(|scope| {
        for node in &nodes {
            for thread in 0..THREADS {
                let mut endpoint = node.endpoint(thread).expect("endpoint");
                let local = Loc::word(node.id(), 6 + u32::from(thread));
                scope.spawn(move || {
                    let mut ops = Vec::new();
                    for _ in 0..TIMES {
                        ops.push(atomic(local, target, Rmw::Faa { add: 1 }, D));
                        ops.push(Op::Wait { work_id: D });
                    }
                    let mut process = Script::new(ops);
                    drive(&mut process, &mut endpoint);
                    assert!(process.replies.iter().all(|reply| *reply == Reply::Done));
                });
            }
        }
    });
    assert_eq!(
        nodes[2].read(target),
        Ok(TIMES * u64::from(NODES) * u64::from(THREADS))
    );
    let ops: u64 = nodes.iter().map(VerbsNode::ops).sum();
    assert_eq!(ops, 2 * TIMES * u64::from(NODES) * u64::from(THREADS));
}

#[test]
fn connect_and_endpoint_errors_are_typed() {
    let test = "connect_and_endpoint_errors_are_typed";
    let Some(mut nodes) = open_three(test) else {
        return;
    };
    // A node id out of range.
    assert!(matches!(
        VerbsNode::open(layout(), NodeId(NODES), THREADS),
        Err(VerbsError::UnknownNode { node }) if node == NodeId(NODES)
    ));
    assert!(matches!(
        VerbsNode::open(layout(), NodeId(0), 0),
        Err(VerbsError::NoThreads)
    ));
    let infos = exchange(&nodes);
    let node0 = &mut nodes[0];
    // No endpoint before connecting.
    assert!(matches!(node0.endpoint(0), Err(VerbsError::NotConnected)));
    // A peer missing from the map.
    let mut peers = peers_of(0, &infos);
    peers.remove(&2);
    assert!(matches!(
        node0.connect(&peers),
        Err(VerbsError::MissingPeer { node }) if node == NodeId(2)
    ));
    // A blob from another layout: node 2 of a layout with more words.
    let other = open(test, Layout::uniform(NODES, 2 * WORDS), 2, THREADS).expect("device");
    let other_bytes = other.local_info().to_bytes();
    peers.insert(2, NodeInfo::from_bytes(&other_bytes).unwrap());
    assert!(matches!(
        node0.connect(&peers),
        Err(VerbsError::WordCountMismatch { node, expected: WORDS, found })
            if node == NodeId(2) && found == 2 * WORDS
    ));
    // ... and one of another number of nodes or threads.
    let mut wrong = infos[2].clone();
    wrong.threads = THREADS + 1;
    peers.insert(2, wrong);
    assert!(matches!(
        node0.connect(&peers),
        Err(VerbsError::ThreadCountMismatch { .. })
    ));
    // A node id out of range in the map, and an entry filed under the wrong id.
    let mut peers = peers_of(0, &infos);
    peers.insert(NODES, infos[1].clone());
    assert!(matches!(
        node0.connect(&peers),
        Err(VerbsError::UnknownNode { node }) if node == NodeId(NODES)
    ));
    let mut peers = peers_of(0, &infos);
    peers.insert(2, infos[1].clone());
    assert!(matches!(
        node0.connect(&peers),
        Err(VerbsError::PeerMismatch { key: 2, found }) if found == NodeId(1)
    ));
    // Bad bytes.
    assert!(matches!(
        NodeInfo::from_bytes(&other_bytes[..10]),
        Err(VerbsError::BadNodeInfo { .. })
    ));
    // After all that, the node still connects, once; threads have one endpoint at a time.
    let mut peers = peers_of(0, &infos);
    peers.insert(0, infos[0].clone());
    node0
        .connect(&peers)
        .expect("connect after refused attempts");
    assert!(matches!(
        node0.connect(&peers),
        Err(VerbsError::AlreadyConnected)
    ));
    let endpoint = node0.endpoint(1).expect("endpoint");
    assert!(matches!(
        node0.endpoint(1),
        Err(VerbsError::ThreadBusy { thread: 1 })
    ));
    assert!(matches!(
        node0.endpoint(THREADS),
        Err(VerbsError::UnknownThread { thread, threads: THREADS }) if thread == THREADS
    ));
    drop(endpoint);
    drop(
        node0
            .endpoint(1)
            .expect("the thread's queue pairs came back"),
    );
}

#[test]
fn node_info_bytes_round_trip_without_a_device() {
    let info = NodeInfo {
        node: NodeId(2),
        nodes: NODES,
        words: WORDS,
        threads: 1,
        gid: [0; 16],
        lid: 0,
        addr: 4096,
        rkey: 7,
        responders: vec![vec![1], vec![2], vec![3]],
        requesters: vec![vec![4], vec![5], vec![6]],
    };
    let bytes = info.to_bytes();
    assert_eq!(NodeInfo::from_bytes(&bytes).unwrap(), info);
    let error = NodeInfo::from_bytes(b"not a node info").unwrap_err();
    assert!(matches!(error, VerbsError::BadNodeInfo { .. }), "{error:?}");
    assert!(!error.to_string().is_empty());
}

/// Node 0 connects to peers that never connect back (their responders stay in RESET and
/// drop its packets): no completion comes for its requests towards them, and instead of
/// hanging, the wait fails after the completion timeout (or the RC retries, whichever
/// comes first) with `RemoteCrashed`; the queue pair is in error afterwards, and the
/// other directions (here node 0's own) still work.
#[test]
fn requests_towards_a_peer_that_never_connected_fail_instead_of_hanging() {
    let test = "requests_towards_a_peer_that_never_connected_fail_instead_of_hanging";
    let options = VerbsOptions {
        completion_timeout: Duration::from_millis(300),
        ..VerbsOptions::from_env()
    };
    let Some((node0, _silent)) = node0_with_silent_peers(test, options) else {
        return;
    };
    let started = Instant::now();
    let replies = script(
        &node0,
        0,
        vec![
            Op::PutInline {
                remote: w(1, 0),
                value: 1,
                work_id: D,
            },
            Op::Get {
                local: w(0, 0),
                remote: w(2, 0),
                work_id: E,
            },
            Op::Wait { work_id: D },
            Op::Wait { work_id: E },
            Op::PutInline {
                remote: w(1, 1),
                value: 2,
                work_id: D,
            },
            Op::Wait { work_id: D },
            Op::PutInline {
                remote: w(0, 1),
                value: 3,
                work_id: D,
            },
            Op::Wait { work_id: D },
        ],
    );
    let failed = |work_id: WorkId, cause: RdmaError| {
        Reply::Failed(RdmaError::WorkFailed {
            work_id,
            cause: Box::new(cause),
        })
    };
    assert_eq!(
        replies,
        [
            Reply::Done,
            Reply::Done,
            failed(D, RdmaError::RemoteCrashed { node: NodeId(1) }),
            failed(E, RdmaError::RemoteCrashed { node: NodeId(2) }),
            Reply::Done,
            failed(D, RdmaError::QueuePairError { node: NodeId(1) }),
            Reply::Done,
            Reply::Done,
        ]
    );
    assert_eq!(node0.read(w(0, 1)), Ok(3));
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "gave up after {:?}",
        started.elapsed()
    );
}

/// A post never blocks, even when the send queue towards a peer that does not answer is
/// full: the requests beyond the queue depth wait in the endpoint, this thread goes on
/// using its other queue pairs at once, and the waiting requests fail in order with the
/// ones on the NIC once the completion timeout gives those up. (Before, the fifth post
/// here waited out the completion timeout: a replica whose acceptor's process died
/// stopped for 10 s, long enough for its peers to suspect it.)
#[test]
fn posts_towards_a_peer_that_stopped_answering_never_block() {
    let test = "posts_towards_a_peer_that_stopped_answering_never_block";
    let timeout = Duration::from_secs(4);
    let options = VerbsOptions {
        queue_depth: 4,
        completion_timeout: timeout,
        ..VerbsOptions::from_env()
    };
    let Some((node0, _silent)) = node0_with_silent_peers(test, options) else {
        return;
    };
    let mut endpoint = node0.endpoint(0).expect("an endpoint");
    let started = Instant::now();
    for i in 0..16 {
        let put = Op::PutInline {
            remote: w(1, i % WORDS),
            value: u64::from(i),
            work_id: D,
        };
        assert_eq!(endpoint.execute(&put), Reply::Done, "put {i}");
    }
    // None of them has completed: no post waited for the NIC to give any up.
    assert_eq!(endpoint.execute(&Op::Test { work_id: D }), Reply::Value(0));
    // The thread's own memory, through its loopback queue pair, at once.
    let own = Op::PutInline {
        remote: w(0, 1),
        value: 3,
        work_id: E,
    };
    assert_eq!(endpoint.execute(&own), Reply::Done);
    assert_eq!(endpoint.execute(&Op::Wait { work_id: E }), Reply::Done);
    let unblocked = started.elapsed();
    assert!(
        unblocked < timeout,
        "16 posts to a silent peer and a put to itself took {unblocked:?} (completion timeout {timeout:?})"
    );
    assert_eq!(node0.read(w(0, 1)), Ok(3));
    // The puts to node 1 fail once the NIC's four fail (RC retries) or the completion
    // timeout gives them up; the twelve that waited fail with them (the queue pair is
    // broken), none is lost.
    let reply = endpoint.execute(&Op::Wait { work_id: D });
    assert_eq!(
        reply,
        Reply::Failed(RdmaError::WorkFailed {
            work_id: D,
            cause: Box::new(RdmaError::RemoteCrashed { node: NodeId(1) }),
        })
    );
    println!("{test}: posts returned after {unblocked:?}");
}
