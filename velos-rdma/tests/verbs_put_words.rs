//! `Op::PutWords` on real verbs: one RDMA WRITE of all its words, inline when they fit the
//! queue pair's inline data, else from the lane's staging ring; every word written, or a
//! failure at the wait and nothing written (as `tests/mem_backend.rs` checks on the
//! in-process backend); and the doorbells of a run of posts.
//!
//! Without a device every test prints a skip message and passes, unless
//! `VELOS_REQUIRE_RDMA=1`. `VELOS_RDMA_DEVICE` and `VELOS_RDMA_GID_INDEX` choose the device
//! and GID index.
#![cfg(feature = "verbs")]

use velos_rdma::verbs::{VerbsFabric, WorkRequests};
use velos_rdma::{Endpoint, Loc, NodeId, Op, RdmaError, Reply, Words, WorkId};

mod common;
use common::Script;

const D: WorkId = WorkId(1);
/// Words per node: room for 4 KiB payloads (512 words) and for one longer than the
/// staging ring (64 KiB).
mod verbs_common;
use verbs_common::{fabric, planned_pair, w, wait, work_failed};

const WORDS: u32 = 9000;

fn put_words(remote: Loc, words: Vec<u64>, work_id: WorkId) -> Op {
    Op::PutWords {
        remote,
        words: words.into(),
        work_id,
    }
}

/// Runs `ops` on a thread of `node` and returns the replies.
fn script(fabric: &VerbsFabric, node: u16, ops: Vec<Op>) -> Vec<Reply> {
    let mut done = fabric
        .run(vec![(NodeId(node), Script::new(ops))])
        .expect("endpoint");
    done.remove(0).replies
}

/// Node 1's words `at..at + n`.
fn read(fabric: &VerbsFabric, at: u32, n: u32) -> Vec<u64> {
    (at..at + n)
        .map(|i| fabric.read(w(1, i)).expect("in bounds"))
        .collect()
}

/// `n` distinct values from `seed`.
fn values(seed: u64, n: u32) -> Vec<u64> {
    (0..u64::from(n)).map(|i| seed * 1_000_000 + i).collect()
}

/// A multi-word put writes its words in place, inline (3 and 8 words) or staged (4 KiB);
/// one whose last word is past the node's memory fails at its wait and writes nothing,
/// and the queue pair stays usable.
#[test]
fn put_words_writes_every_word_or_fails_whole() {
    let test = "put_words_writes_every_word_or_fails_whole";
    let Some(fabric) = fabric(test, 2, WORDS) else {
        return;
    };
    for (at, n) in [(2, 3), (10, 8), (100, 512), (WORDS - 512, 512)] {
        let words = values(u64::from(n), n);
        let replies = script(
            &fabric,
            0,
            vec![put_words(w(1, at), words.clone(), D), wait(D)],
        );
        assert_eq!(replies, vec![Reply::Done, Reply::Done], "{n} words at {at}");
        assert_eq!(read(&fabric, at, n), words, "{n} words at {at}");
    }
    for (at, n) in [(WORDS - 1, 2), (WORDS - 300, 512)] {
        for i in at..WORDS {
            fabric.write(w(1, i), 0).expect("in bounds");
        }
        let replies = script(
            &fabric,
            0,
            vec![
                put_words(w(1, at), values(7, n), D),
                wait(D),
                // The queue pair is still usable.
                put_words(w(1, 0), vec![42, 43], D),
                wait(D),
            ],
        );
        let out = RdmaError::OutOfBounds { loc: w(1, WORDS) };
        let expected = vec![Reply::Done, work_failed(D, out), Reply::Done, Reply::Done];
        assert_eq!(replies, expected, "{n} words at {at}");
        assert_eq!(
            read(&fabric, at, WORDS - at),
            vec![0; (WORDS - at) as usize]
        );
        assert_eq!(read(&fabric, 0, 2), [42, 43]);
    }
    // No word: a zero-length write, still to a word in bounds.
    let replies = script(
        &fabric,
        0,
        vec![
            put_words(w(1, 5), Vec::new(), D),
            wait(D),
            put_words(w(1, WORDS), Vec::new(), D),
            wait(D),
        ],
    );
    let out = RdmaError::OutOfBounds { loc: w(1, WORDS) };
    let expected = vec![Reply::Done, Reply::Done, Reply::Done, work_failed(D, out)];
    assert_eq!(replies, expected);
    // Longer than the staging ring: refused at once.
    let long = put_words(w(1, 0), values(9, 8193), D);
    let replies = script(&fabric, 0, vec![long]);
    assert!(
        matches!(replies[..], [Reply::Failed(RdmaError::Unsupported { .. })]),
        "{replies:?}"
    );
}

/// The words are those of the post: refilling the process's `Words` after posting
/// changes nothing the NIC writes, inline or staged.
#[test]
fn the_words_are_captured_at_post() {
    let test = "the_words_are_captured_at_post";
    let Some(fabric) = fabric(test, 2, WORDS) else {
        return;
    };
    let mut endpoint = fabric.endpoint(NodeId(0)).expect("endpoint");
    for n in [4, 512] {
        let mut words = Words::from(values(1, n));
        let op = Op::PutWords {
            remote: w(1, 0),
            words: words.clone(),
            work_id: D,
        };
        assert_eq!(endpoint.execute(&op), Reply::Done);
        drop(op);
        words.refill(values(2, n));
        assert_eq!(endpoint.execute(&wait(D)), Reply::Done);
        assert_eq!(read(&fabric, 0, n), values(1, n), "{n} words");
    }
}

/// More staged payloads in a row than the ring has slots, towards two nodes: posts reap
/// completions to free slots, and every payload lands whole.
#[test]
fn the_staging_ring_is_reused_once_completions_are_seen() {
    let test = "the_staging_ring_is_reused_once_completions_are_seen";
    let Some(fabric) = fabric(test, 3, WORDS) else {
        return;
    };
    let mut endpoint = fabric.endpoint(NodeId(0)).expect("endpoint");
    const PUTS: u32 = 40;
    for i in 0..PUTS {
        let node = 1 + (i % 2) as u16;
        let at = (i / 2) * 400;
        let op = put_words(w(node, at), values(u64::from(i) + 1, 400), D);
        assert_eq!(endpoint.execute(&op), Reply::Done, "put {i}");
    }
    assert_eq!(endpoint.execute(&wait(D)), Reply::Done);
    for i in 0..PUTS {
        let node = 1 + (i % 2) as u16;
        let at = (i / 2) * 400;
        let got: Vec<u64> = (at..at + 400)
            .map(|k| fabric.read(w(node, k)).expect("in bounds"))
            .collect();
        assert_eq!(got, values(u64::from(i) + 1, 400), "put {i}");
    }
    let counts = endpoint.work_requests();
    assert!(counts.posted >= u64::from(PUTS), "{counts:?}");
    assert!(counts.doorbells < counts.posted, "{counts:?}");
}

/// A run of posts touching two queue pairs rings two doorbells; `Rfence` keeps the run.
#[test]
fn a_run_of_posts_rings_one_doorbell_per_queue_pair() {
    let test = "a_run_of_posts_rings_one_doorbell_per_queue_pair";
    let Some(fabric) = fabric(test, 3, WORDS) else {
        return;
    };
    let mut endpoint = fabric.endpoint(NodeId(0)).expect("endpoint");
    let ops = [
        put_words(w(1, 0), values(1, 3), D),
        put_words(w(2, 0), values(2, 600), D),
        Op::Rfence { node: NodeId(1) },
        Op::Get {
            local: w(0, 0),
            remote: w(1, 1),
            work_id: D,
        },
        put_words(w(1, 10), values(3, 8), D),
    ];
    for op in &ops {
        assert_eq!(endpoint.execute(op), Reply::Done);
    }
    assert_eq!(endpoint.work_requests(), WorkRequests::default(), "kept");
    endpoint.ring_doorbells();
    let counts = endpoint.work_requests();
    assert_eq!((counts.posted, counts.doorbells), (4, 2), "{counts:?}");
    assert_eq!(endpoint.execute(&wait(D)), Reply::Done);
    assert_eq!(
        endpoint.execute(&Op::Load { loc: w(0, 0) }),
        Reply::Value(1_000_001)
    );
    assert_eq!(read(&fabric, 10, 8), values(3, 8));
    let counts = endpoint.work_requests();
    assert_eq!(counts.doorbells, 2 + counts.flushes, "{counts:?}");
    drop(endpoint);
    assert_eq!(fabric.work_requests(), counts);
}

/// Under a region plan: words in a writable grant are written; a write running into a
/// read-only grant is refused whole by the NIC, named by its first read-only word (as the
/// in-process backend names it), and breaks the queue pair.
#[test]
fn a_put_words_into_a_read_only_grant_is_refused_whole() {
    let test = "a_put_words_into_a_read_only_grant_is_refused_whole";
    let Some(nodes) = planned_pair(test, 1) else {
        return;
    };
    let mut endpoint = nodes[1].endpoint(0).expect("endpoint");
    let ok = put_words(w(0, 0), vec![1, 2, 3, 4], D);
    assert_eq!(endpoint.execute(&ok), Reply::Done);
    assert_eq!(endpoint.execute(&wait(D)), Reply::Done);
    assert_eq!(nodes[0].words()[..5], [1, 2, 3, 4, 0]);
    let crossing = put_words(w(0, 6), vec![5, 6, 7, 8], D);
    assert_eq!(endpoint.execute(&crossing), Reply::Done);
    let refused = RdmaError::RemoteAccess { loc: w(0, 8) };
    assert_eq!(endpoint.execute(&wait(D)), work_failed(D, refused));
    assert_eq!(nodes[0].words()[6..10], [0, 0, 0, 0], "nothing written");
    let broken = RdmaError::QueuePairError { node: NodeId(0) };
    assert_eq!(endpoint.execute(&ok), Reply::Done);
    assert_eq!(endpoint.execute(&wait(D)), work_failed(D, broken));
}

/// The bulk copies on real verbs: a `GetWords` of 4 KiB is one RDMA READ into the node's
/// words, `StoreWords` and `LoadWords` copy the node's own; a read past the target's
/// memory fails at its wait, and local words past the node's are refused at once.
#[test]
fn bulk_copies_read_and_write_every_word() {
    let test = "bulk_copies_read_and_write_every_word";
    let Some(fabric) = fabric(test, 2, WORDS) else {
        return;
    };
    let data = values(3, 512);
    let replies = script(
        &fabric,
        1,
        vec![Op::StoreWords {
            loc: w(1, 100),
            words: Words::from(data.clone()),
        }],
    );
    assert_eq!(replies, vec![Reply::Done]);
    assert_eq!(read(&fabric, 100, 512), data);
    let replies = script(
        &fabric,
        0,
        vec![
            Op::GetWords {
                local: w(0, 1000),
                remote: w(1, 100),
                count: 512,
                work_id: D,
            },
            wait(D),
            Op::LoadWords {
                loc: w(0, 1000),
                count: 512,
            },
            Op::GetWords {
                local: w(0, 0),
                remote: w(1, WORDS - 2),
                count: 3,
                work_id: D,
            },
            wait(D),
            Op::LoadWords {
                loc: w(0, WORDS - 1),
                count: 2,
            },
        ],
    );
    assert_eq!(
        replies[..3],
        [Reply::Done, Reply::Done, Reply::Words(Words::from(data))]
    );
    assert_eq!(
        replies[4],
        work_failed(D, RdmaError::OutOfBounds { loc: w(1, WORDS) })
    );
    assert!(
        matches!(replies[5], Reply::Failed(RdmaError::OutOfBounds { .. })),
        "{replies:?}"
    );
}
