//! Periodic signaling on real verbs: puts go mostly unsignaled, every work id still
//! completes (through a later signaled request or a flush), with the right values and
//! the right failures, and a failing unsignaled put is reported for its own work id.
//!
//! Without a device every test prints a skip message and passes, unless
//! `VELOS_REQUIRE_RDMA=1`. `VELOS_RDMA_DEVICE` and `VELOS_RDMA_GID_INDEX` choose the device
//! and GID index. `signaled_all_against_periodic_signaling` prints timings (with
//! `--nocapture`); under emulation (soft-RoCE in a TCG guest) they are a sanity figure.
#![cfg(feature = "verbs")]

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};
use velos_rdma::verbs::{VerbsEndpoint, WorkRequests};
use velos_rdma::{Endpoint, Loc, NodeId, Op, RdmaError, Reply, WorkId};

mod verbs_common;
use verbs_common::{fabric, planned_pair, w, wait, work_failed};

const WORDS: u32 = 64;

fn put_inline(remote: Loc, value: u64, work_id: WorkId) -> Op {
    Op::PutInline {
        remote,
        value,
        work_id,
    }
}

/// Posts `count` puts from `endpoint` (on node 0) to nodes 1 and 2 in turn, over their
/// words and ten work ids (one in seven a put of a local word, the rest inline); returns
/// the value each written word must end with.
fn stream(endpoint: &mut VerbsEndpoint<'_>, count: u64, first: u64) -> HashMap<Loc, u64> {
    let mut last = HashMap::new();
    for i in first..first + count {
        let remote = w(1 + (i % 2) as u16, (i / 2 % u64::from(WORDS)) as u32);
        let work_id = WorkId(1 + (i % 10) as u32);
        let (op, value) = if i % 7 == 0 {
            // Node 0's words 0..8 hold 1000 + k (set before, never changed).
            let local = w(0, (i % 8) as u32);
            let op = Op::Put {
                remote,
                local,
                work_id,
            };
            (op, 1000 + i % 8)
        } else {
            (put_inline(remote, i, work_id), i)
        };
        assert_eq!(endpoint.execute(&op), Reply::Done);
        last.insert(remote, value);
    }
    last
}

#[test]
fn a_stream_of_puts_is_mostly_unsignaled_and_every_work_id_completes() {
    let test = "a_stream_of_puts_is_mostly_unsignaled_and_every_work_id_completes";
    let Some(fabric) = fabric(test, 3, WORDS) else {
        return;
    };
    for k in 0..8 {
        fabric.write(w(0, k), 1000 + u64::from(k)).unwrap();
    }
    let mut endpoint = fabric.endpoint(NodeId(0)).expect("endpoint");
    let interval = endpoint.signal_interval();
    assert_eq!(interval, fabric.options().queue_depth / 4);

    // Waits on every work id.
    let count = 1000;
    let expected = stream(&mut endpoint, count, 0);
    // Beyond the queue depth, requests wait in the endpoint for room on the NIC.
    let posted = endpoint.work_requests();
    assert!(posted.posted <= count + posted.flushes, "{posted:?}");
    for id in 1..=10 {
        assert_eq!(endpoint.execute(&wait(WorkId(id))), Reply::Done, "id {id}");
    }
    for (loc, value) in &expected {
        assert_eq!(fabric.read(*loc), Ok(*value), "{loc:?}");
    }
    let counts = endpoint.work_requests();
    // Two flushes per queue pair at most: one as the first wait begins, one after the
    // requests that waited for room.
    assert!(counts.flushes <= 4, "{counts:?}");
    assert_eq!(counts.posted, count + counts.flushes);
    assert!(
        counts.signaled * u64::from(interval) <= 2 * counts.posted,
        "about one in {interval} signaled: {counts:?}"
    );

    // Tests on every work id, in a non-blocking loop: each reports done eventually.
    let expected = stream(&mut endpoint, count, count);
    let mut pending: Vec<u32> = (1..=10).collect();
    let started = Instant::now();
    while !pending.is_empty() {
        pending.retain(|&id| {
            match endpoint.execute(&Op::Test {
                work_id: WorkId(id),
            }) {
                Reply::Value(1) => false,
                Reply::Value(0) => true,
                reply => panic!("test of id {id}: {reply:?}"),
            }
        });
        assert!(started.elapsed() < Duration::from_secs(60), "{pending:?}");
    }
    for (loc, value) in &expected {
        assert_eq!(fabric.read(*loc), Ok(*value), "{loc:?}");
    }

    // Gets (signaled) of what the puts wrote land in the local words by their waits.
    let words: Vec<Loc> = expected.keys().copied().take(40).collect();
    for (k, remote) in words.iter().enumerate() {
        let local = w(0, 8 + k as u32);
        let get = Op::Get {
            local,
            remote: *remote,
            work_id: WorkId(20 + k as u32),
        };
        assert_eq!(endpoint.execute(&get), Reply::Done);
    }
    for (k, remote) in words.iter().enumerate() {
        let local = w(0, 8 + k as u32);
        assert_eq!(endpoint.execute(&wait(WorkId(20 + k as u32))), Reply::Done);
        let value = Reply::Value(expected[remote]);
        assert_eq!(endpoint.execute(&Op::Load { loc: local }), value);
    }

    // A global fence and a wait-any after a burst: both see every put complete.
    let base = WorkId(70);
    for i in 0..100 {
        let op = put_inline(w(1, i % WORDS), 5000 + u64::from(i), WorkId(70 + i % 2));
        assert_eq!(endpoint.execute(&op), Reply::Done);
    }
    let fence = endpoint.execute(&Op::GlobalFence { node: NodeId(1) });
    assert_eq!(fence, Reply::Done);
    for i in 36..100 {
        assert_eq!(fabric.read(w(1, i % WORDS)), Ok(5000 + u64::from(i)));
    }
    for i in 0..100 {
        let op = put_inline(w(2, i % WORDS), 6000 + u64::from(i), WorkId(71));
        assert_eq!(endpoint.execute(&op), Reply::Done);
    }
    let any = Op::WaitAny { base, mask: 0b10 };
    assert_eq!(endpoint.execute(&any), Reply::Value(1));
    for i in 36..100 {
        assert_eq!(fabric.read(w(2, i % WORDS)), Ok(6000 + u64::from(i)));
    }

    let counts = endpoint.work_requests();
    drop(endpoint);
    assert_eq!(fabric.work_requests(), counts);
    println!("{test}: {counts:?}");
}

#[test]
fn forcing_a_queue_pair_into_error_after_unsignaled_puts_reports_each_put() {
    let test = "forcing_a_queue_pair_into_error_after_unsignaled_puts_reports_each_put";
    let Some(fabric) = fabric(test, 2, WORDS) else {
        return;
    };
    let mut endpoint = fabric.endpoint(NodeId(0)).expect("endpoint");
    let started = Instant::now();
    for id in 1..=8 {
        let op = put_inline(w(1, id), u64::from(id), WorkId(id));
        assert_eq!(endpoint.execute(&op), Reply::Done);
    }
    endpoint.ring_doorbells();
    assert_eq!(endpoint.work_requests().signaled, 1, "only the first");
    endpoint
        .set_queue_pair_error(NodeId(1))
        .expect("a queue pair can be put in error");
    // Each put either took effect before the state change or was flushed; none is left
    // to the completion timeout (which would report it as RemoteCrashed).
    let broken = RdmaError::QueuePairError { node: NodeId(1) };
    let mut failed = false;
    for id in 1..=8 {
        match endpoint.execute(&wait(WorkId(id))) {
            Reply::Done => {
                assert!(!failed, "put {id} done after a flushed one");
                assert_eq!(fabric.read(w(1, id)), Ok(u64::from(id)));
            }
            reply => {
                assert_eq!(reply, work_failed(WorkId(id), broken.clone()), "put {id}");
                failed = true;
            }
        }
    }
    let fence = endpoint.execute(&Op::GlobalFence { node: NodeId(1) });
    assert_eq!(fence, Reply::Failed(broken));
    assert!(started.elapsed() < fabric.options().completion_timeout);
}

#[test]
fn a_failing_unsignaled_put_is_reported_for_its_work_id() {
    let test = "a_failing_unsignaled_put_is_reported_for_its_work_id";
    let Some(nodes) = planned_pair(test, 2) else {
        return;
    };
    let refused = RdmaError::RemoteAccess { loc: w(0, 9) };
    let broken = RdmaError::QueuePairError { node: NodeId(0) };
    let ids = [WorkId(1), WorkId(2), WorkId(3), WorkId(4)];
    // Put 3 writes a read-only word: the NIC refuses it after puts 1 and 2 took effect.
    let puts = [
        put_inline(w(0, 0), 1, ids[0]),
        put_inline(w(0, 1), 2, ids[1]),
        put_inline(w(0, 9), 3, ids[2]),
        put_inline(w(0, 2), 4, ids[3]),
    ];
    let expected = [
        Reply::Done,
        Reply::Done,
        work_failed(ids[2], refused),
        work_failed(ids[3], broken),
    ];

    // Thread 0 waits for each id.
    let mut endpoint = nodes[1].endpoint(0).expect("endpoint");
    for put in &puts {
        assert_eq!(endpoint.execute(put), Reply::Done);
    }
    // Kept for one doorbell until an operation other than a post rings it.
    assert_eq!(endpoint.work_requests(), WorkRequests::default());
    endpoint.ring_doorbells();
    let unsignaled = WorkRequests {
        posted: 4,
        signaled: 1,
        flushes: 0,
        doorbells: 1,
    };
    assert_eq!(endpoint.work_requests(), unsignaled, "puts 2..4 unsignaled");
    let replies: Vec<Reply> = ids.iter().map(|&id| endpoint.execute(&wait(id))).collect();
    assert_eq!(replies, expected);
    drop(endpoint);
    assert_eq!(nodes[0].words()[..3], [1, 2, 0]);
    assert_eq!(nodes[0].read(w(0, 9)), Ok(0));

    // Thread 1 tests them in a loop, from the last id: the same replies, each once.
    nodes[0].write(w(0, 0), 0).unwrap();
    nodes[0].write(w(0, 1), 0).unwrap();
    let mut endpoint = nodes[1].endpoint(1).expect("endpoint");
    for put in &puts {
        assert_eq!(endpoint.execute(put), Reply::Done);
    }
    endpoint.ring_doorbells();
    assert_eq!(endpoint.work_requests(), unsignaled);
    let started = Instant::now();
    let mut replies = Vec::new();
    for &id in ids.iter().rev() {
        let reply = loop {
            match endpoint.execute(&Op::Test { work_id: id }) {
                Reply::Value(0) => assert!(started.elapsed() < Duration::from_secs(60)),
                reply => break reply,
            }
        };
        replies.insert(0, reply);
    }
    let tested: Vec<Reply> = expected
        .iter()
        .map(|reply| match reply {
            Reply::Done => Reply::Value(1),
            failed => failed.clone(),
        })
        .collect();
    assert_eq!(replies, tested);
    assert_eq!(nodes[0].words()[..3], [1, 2, 0]);
}

/// `bursts` times: `puts` inline puts towards node 1, then a wait; the time each burst
/// took to post its puts, and to post them and wait.
fn bursts(endpoint: &mut VerbsEndpoint<'_>, bursts: usize, puts: u64) -> Vec<[Duration; 2]> {
    (0..bursts)
        .map(|_| {
            let started = Instant::now();
            for i in 0..puts {
                let op = put_inline(w(1, (i % u64::from(WORDS)) as u32), i, WorkId(1));
                assert_eq!(endpoint.execute(&op), Reply::Done);
            }
            let posted = started.elapsed();
            assert_eq!(endpoint.execute(&wait(WorkId(1))), Reply::Done);
            [posted, started.elapsed()]
        })
        .collect()
}

/// The median, minimum and maximum of `times`, in microseconds.
fn spread(mut times: Vec<Duration>) -> [f64; 3] {
    times.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    [
        us(times[times.len() / 2]),
        us(times[0]),
        us(times[times.len() - 1]),
    ]
}

/// A burst of puts and one wait, with every request signaled and with periodic
/// signaling; the times are printed, not checked.
#[test]
fn signaled_all_against_periodic_signaling() {
    let test = "signaled_all_against_periodic_signaling";
    let Some(fabric) = fabric(test, 2, WORDS) else {
        return;
    };
    const PUTS: u64 = 256;
    const BURSTS: usize = 10;
    let periodic = fabric.options().queue_depth / 4;
    let mut times: BTreeMap<u32, Vec<[Duration; 2]>> = BTreeMap::new();
    let mut counts: BTreeMap<u32, WorkRequests> = BTreeMap::new();
    // Alternating, so that both see the same machine.
    for _ in 0..3 {
        for interval in [1, periodic] {
            let mut endpoint = fabric.endpoint(NodeId(0)).expect("endpoint");
            endpoint.set_signal_interval(interval);
            let burst_times = bursts(&mut endpoint, BURSTS, PUTS);
            times.entry(interval).or_default().extend(burst_times);
            *counts.entry(interval).or_default() += endpoint.work_requests();
        }
    }
    let all = counts[&1];
    assert_eq!(all.signaled, all.posted);
    assert_eq!(all.flushes, 0);
    let some = counts[&periodic];
    assert!(some.signaled * 4 < some.posted, "{some:?}");
    for (interval, times) in times {
        let bursts = times.len();
        let [post, post_min, post_max] = spread(times.iter().map(|t| t[0]).collect());
        let [all, all_min, all_max] = spread(times.iter().map(|t| t[1]).collect());
        let per_put = all / PUTS as f64;
        println!(
            "{test}: interval {interval}, {bursts} bursts of {PUTS} puts + wait: \
             median {all:.0} us ({per_put:.2} us/put; min {all_min:.0}, max {all_max:.0}), \
             of which posting {post:.0} us (min {post_min:.0}, max {post_max:.0}); {:?}",
            counts[&interval],
        );
    }
}
