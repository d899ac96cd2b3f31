//! Least privilege on real verbs: a [`VerbsNode`] opened with a region plan registers each
//! word range with only the remote access it grants, and gives a range granted to one peer
//! only that peer's key. The NIC, not the backend, refuses what the plan does not grant:
//! the request is posted and fails at its wait with `RemoteAccess`, and the target words
//! are unchanged.
//!
//! Three nodes in one process on one device. Node 0's memory is planned as
//! `[atomic-only | writable by node 1 only | writable by node 2 only | read-only]`; nodes 1
//! and 2 are opened without a plan. A remote access error moves the requester's queue pair
//! to the error state, so every check that expects one runs on a thread (queue pair) of
//! its own.
//!
//! Without a device every test prints a skip message and passes, unless
//! `VELOS_REQUIRE_RDMA=1`. `VELOS_RDMA_DEVICE` and `VELOS_RDMA_GID_INDEX` choose the device
//! and GID index.
#![cfg(feature = "verbs")]

use std::collections::BTreeMap;
use velos_rdma::verbs::{Access, Grant, PeerInfo, VerbsError, VerbsNode, VerbsOptions};
use velos_rdma::{Layout, Loc, NodeId, Op, RdmaError, Reply, Rmw, WorkId, drive};

mod common;
use common::Script;

const D: WorkId = WorkId(1);
const NODES: u16 = 3;
const WORDS: u32 = 16;
/// One thread per check that may break its queue pair.
const THREADS: u16 = 6;
/// Node 0's atomic-only words.
const ATOMIC: std::ops::Range<u32> = 0..4;
/// Node 0's words writable by node 1 only.
const BUF1: std::ops::Range<u32> = 4..8;
/// Node 0's words writable by node 2 only.
const BUF2: std::ops::Range<u32> = 8..12;
/// Node 0's read-only words.
const READ: std::ops::Range<u32> = 12..16;

/// Whether the environment demands a device (`VELOS_REQUIRE_RDMA=1`).
fn rdma_required() -> bool {
    std::env::var("VELOS_REQUIRE_RDMA").is_ok_and(|v| v == "1")
}

fn layout() -> Layout {
    Layout::uniform(NODES, WORDS)
}

fn plan() -> Vec<Grant> {
    vec![
        Grant::new(ATOMIC, Access::Atomic),
        Grant::new(BUF1, Access::Write).only(NodeId(1)),
        Grant::new(BUF2, Access::Write).only(NodeId(2)),
        Grant::new(READ, Access::Read),
    ]
}

fn w(node: u16, word: u32) -> Loc {
    Loc::word(NodeId(node), word)
}

/// Node 0 with the plan, nodes 1 and 2 without, connected with per-peer information
/// carried as bytes; `None` (after a skip message) without a device.
fn cluster(test: &str) -> Option<Vec<VerbsNode>> {
    let opened = (0..NODES)
        .map(|id| {
            let options = VerbsOptions::from_env();
            if id == 0 {
                VerbsNode::with_plan(layout(), NodeId(0), THREADS, &plan(), options)
            } else {
                VerbsNode::with_options(layout(), NodeId(id), THREADS, options)
            }
        })
        .collect::<Result<Vec<_>, _>>();
    let mut nodes = match opened {
        Ok(nodes) => nodes,
        Err(error) if error.is_no_device() && !rdma_required() => {
            println!("skipped {test}: {error} (VELOS_REQUIRE_RDMA=1 makes this a failure)");
            return None;
        }
        Err(error) => panic!("{test}: no usable RDMA node: {error}"),
    };
    // infos[to][from]: what node `from` tells node `to`, through its byte form.
    let infos: Vec<BTreeMap<u16, PeerInfo>> = (0..NODES)
        .map(|to| {
            nodes
                .iter()
                .filter(|from| from.id() != NodeId(to))
                .map(|from| {
                    let bytes = from.local_info_for(NodeId(to)).to_bytes();
                    let info = PeerInfo::from_bytes(&bytes).expect("our own bytes");
                    (from.id().0, info)
                })
                .collect()
        })
        .collect();
    // Only node 1 holds the key of node 0's buffer for node 1, only node 2 that of the
    // buffer for node 2; both hold the keys of the atomic and read-only ranges.
    let ranges = |to: usize| -> Vec<(u32, u32)> {
        infos[to][&0]
            .ranges
            .iter()
            .map(|range| (range.start, range.words))
            .collect()
    };
    assert_eq!(ranges(1), [(0, 4), (4, 4), (12, 4)]);
    assert_eq!(ranges(2), [(0, 4), (8, 4), (12, 4)]);
    for (node, peers) in nodes.iter_mut().zip(&infos) {
        node.connect_peers(peers).expect("connect");
    }
    Some(nodes)
}

/// Drives `ops` on thread `thread` of `node` and returns the replies.
fn script(node: &VerbsNode, thread: u16, ops: Vec<Op>) -> Vec<Reply> {
    let mut endpoint = node.endpoint(thread).expect("endpoint");
    let mut process = Script::new(ops);
    drive(&mut process, &mut endpoint);
    process.replies
}

/// An inline put of `value` into `remote` and its wait.
fn put(remote: Loc, value: u64) -> Vec<Op> {
    vec![
        Op::PutInline {
            remote,
            value,
            work_id: D,
        },
        Op::Wait { work_id: D },
    ]
}

/// A put from the local word `local` into `remote` and its wait.
fn put_from(local: Loc, remote: Loc) -> Vec<Op> {
    vec![
        Op::Put {
            remote,
            local,
            work_id: D,
        },
        Op::Wait { work_id: D },
    ]
}

/// The reply of a wait whose request the NIC refused.
fn refused(remote: Loc) -> Reply {
    Reply::Failed(RdmaError::WorkFailed {
        work_id: D,
        cause: Box::new(RdmaError::RemoteAccess { loc: remote }),
    })
}

fn words(node: &VerbsNode, range: std::ops::Range<u32>) -> Vec<u64> {
    let all = node.words();
    all[range.start as usize..range.end as usize].to_vec()
}

#[test]
fn each_range_grants_only_its_access_and_the_nic_refuses_the_rest() {
    let Some(nodes) = cluster("each_range_grants_only_its_access_and_the_nic_refuses_the_rest")
    else {
        return;
    };
    let name = nodes[0].device_name().to_owned();

    // Node 1 writes its buffer on node 0 (an inline put and a put of a local word).
    nodes[1].write(w(1, 0), 0x1111).unwrap();
    let mut ops = put(w(0, BUF1.start), 0x1000);
    ops.extend(put_from(w(1, 0), w(0, BUF1.start + 1)));
    assert_eq!(script(&nodes[1], 0, ops), vec![Reply::Done; 4], "on {name}");
    assert_eq!(words(&nodes[0], BUF1), [0x1000, 0x1111, 0, 0]);
    // Node 2 writes its own buffer.
    assert_eq!(
        script(&nodes[2], 0, put(w(0, BUF2.start), 0x2000)),
        vec![Reply::Done; 2]
    );
    assert_eq!(words(&nodes[0], BUF2), [0x2000, 0, 0, 0]);

    // Node 2 writes into node 1's buffer: the NIC refuses it, nothing changes.
    let before = nodes[0].words();
    for (thread, word) in [(1, BUF1.start), (2, BUF1.start + 3)] {
        let target = w(0, word);
        assert_eq!(
            script(&nodes[2], thread, put(target, 0xbad)),
            [Reply::Done, refused(target)],
            "node 2's put into node 1's buffer, word {word}, on {name}"
        );
    }
    assert_eq!(nodes[0].words(), before, "node 0's memory changed");
    assert_eq!(words(&nodes[0], BUF1), [0x1000, 0x1111, 0, 0]);
    // So does node 0 itself, which has no key for either buffer.
    let target = w(0, BUF2.start + 1);
    assert_eq!(
        script(&nodes[0], 0, put(target, 0xbad)),
        [Reply::Done, refused(target)]
    );
    // Node 1's access to its buffer is unaffected (its queue pair of thread 0 is fine).
    assert_eq!(
        script(&nodes[1], 0, put(w(0, BUF1.start + 2), 0x1002)),
        vec![Reply::Done; 2]
    );
    assert_eq!(words(&nodes[0], BUF1), [0x1000, 0x1111, 0x1002, 0]);

    // Atomic words: a CAS works, a put is refused.
    nodes[0].write(w(0, ATOMIC.start), 5).unwrap();
    let cas = Op::Atomic {
        local: w(1, 1),
        remote: w(0, ATOMIC.start),
        rmw: Rmw::Cas {
            expected: 5,
            new: 6,
        },
        work_id: D,
    };
    let replies = script(
        &nodes[1],
        1,
        vec![cas, Op::Wait { work_id: D }, Op::Load { loc: w(1, 1) }],
    );
    assert_eq!(replies, [Reply::Done, Reply::Done, Reply::Value(5)]);
    assert_eq!(nodes[0].read(w(0, ATOMIC.start)), Ok(6));
    let target = w(0, ATOMIC.start);
    assert_eq!(
        script(&nodes[1], 2, put(target, 0xbad)),
        [Reply::Done, refused(target)]
    );
    assert_eq!(nodes[0].read(target), Ok(6));
    // A get of the atomic words is refused too.
    let target = w(0, ATOMIC.start + 1);
    let get = vec![
        Op::Get {
            local: w(2, 0),
            remote: target,
            work_id: D,
        },
        Op::Wait { work_id: D },
    ];
    assert_eq!(script(&nodes[2], 3, get), [Reply::Done, refused(target)]);

    // Read-only words: a get works, a put and a CAS are refused.
    nodes[0].write(w(0, READ.start), 0xabc).unwrap();
    let get = vec![
        Op::Get {
            local: w(2, 5),
            remote: w(0, READ.start),
            work_id: D,
        },
        Op::Wait { work_id: D },
        Op::Load { loc: w(2, 5) },
    ];
    assert_eq!(
        script(&nodes[2], 0, get),
        [Reply::Done, Reply::Done, Reply::Value(0xabc)]
    );
    let target = w(0, READ.start);
    assert_eq!(
        script(&nodes[1], 3, put(target, 0xbad)),
        [Reply::Done, refused(target)]
    );
    let cas = Op::Atomic {
        local: w(1, 2),
        remote: target,
        rmw: Rmw::Cas {
            expected: 0xabc,
            new: 0xbad,
        },
        work_id: D,
    };
    assert_eq!(
        script(&nodes[1], 4, vec![cas, Op::Wait { work_id: D }]),
        [Reply::Done, refused(target)]
    );
    assert_eq!(nodes[0].read(target), Ok(0xabc));
}

#[test]
fn plans_are_checked_and_grants_go_only_to_their_peer() {
    let test = "plans_are_checked_and_grants_go_only_to_their_peer";
    let open = |plan: &[Grant]| {
        VerbsNode::with_plan(layout(), NodeId(0), 1, plan, VerbsOptions::from_env())
    };
    let bad = [
        vec![Grant::new(0..0, Access::Read)],
        vec![Grant::new(10..17, Access::Read)],
        vec![Grant::new(0..4, Access::Read).only(NodeId(NODES))],
        vec![
            Grant::new(0..4, Access::Read),
            Grant::new(3..5, Access::All),
        ],
    ];
    for plan in &bad {
        // A bad plan is refused before any device is opened.
        assert!(
            matches!(open(plan), Err(VerbsError::BadPlan { .. })),
            "{plan:?}"
        );
    }
    let node = match open(&plan()) {
        Ok(node) => node,
        Err(error) if error.is_no_device() && !rdma_required() => {
            println!("skipped {test}: {error} (VELOS_REQUIRE_RDMA=1 makes this a failure)");
            return;
        }
        Err(error) => panic!("{test}: no usable RDMA node: {error}"),
    };
    let for1 = node.local_info_for(NodeId(1));
    let for2 = node.local_info_for(NodeId(2));
    assert_eq!(for1.info, node.local_info());
    let key1 = for1.rkey_of(BUF1.start);
    assert_ne!(key1, node.local_info().rkey);
    assert!(for2.ranges.iter().all(|range| range.rkey != key1));
    assert_eq!(for2.rkey_of(BUF1.start), node.local_info().rkey);
    assert_eq!(for1.rkey_of(READ.start), for2.rkey_of(READ.start));
}
