//! Joiners met on loopback (no RDMA): the running nodes hand each join to their loop,
//! which answers it; a join the loop refuses, a process that does not join, and a
//! stranger without the secret are refused with the reason, and a stranger's request never
//! reaches the loop.

use super::*;
use crate::rendezvous::{RendezvousError, dial_each, listen};
use std::collections::BTreeMap;
use std::time::Instant;

fn file(n: u16) -> ClusterFile {
    crate::rendezvous::tests::file(n, "j")
}

/// Nodes 0 and 1 of `f` serving joiners.
fn running(f: &ClusterFile) -> Vec<Joiners> {
    (0..2)
        .map(|id| Joiners::serve(f.clone(), id, listen(f, id).unwrap()).unwrap())
        .collect()
}

/// Runs `dial` while nodes 0 and 1 answer with `loop_answer(node, request)`; its result,
/// and every request the loops saw.
fn with_loops<T: Send>(
    joiners: &[Joiners],
    loop_answer: impl Fn(u16, &JoinMessage) -> Result<Vec<u8>, String> + Sync,
    dial: impl FnOnce() -> T + Send,
) -> (T, Vec<(u16, u16, JoinMessage)>) {
    let mut seen = Vec::new();
    let result = std::thread::scope(|s| {
        let dialer = s.spawn(dial);
        while !dialer.is_finished() {
            for (node, j) in joiners.iter().enumerate() {
                while let Some(request) = j.next() {
                    let answer = loop_answer(node as u16, &request.message);
                    seen.push((node as u16, request.peer, request.message.clone()));
                    request.answer(answer);
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        dialer.join().unwrap()
    });
    (result, seen)
}

/// A loop that takes joins above incarnation 5.
fn answer(node: u16, message: &JoinMessage) -> Result<Vec<u8>, String> {
    match message {
        JoinMessage::Join { incarnation, info } if *incarnation > 5 => {
            let mut back = info.clone();
            back.push(node as u8);
            Ok(serde_json::to_vec(&JoinAnswer {
                incarnation: u64::from(node),
                info: back,
            })
            .unwrap())
        }
        JoinMessage::Join { incarnation, .. } => {
            Err(format!("incarnation {incarnation} is not above 5"))
        }
        JoinMessage::Connected { .. } => Ok(Vec::new()),
    }
}

fn join_at(f: &ClusterFile, incarnation: u64) -> Result<BTreeMap<u16, Vec<u8>>, RendezvousError> {
    let ask = |peer: u16| {
        let info = vec![peer as u8];
        JoinMessage::Join { incarnation, info }.to_bytes()
    };
    dial_each(f, 2, ask, Duration::from_secs(5))
}

#[test]
fn a_joiner_meets_every_running_node_through_its_loop() {
    let f = file(3);
    let joiners = running(&f);
    let (answers, seen) = with_loops(&joiners, answer, || join_at(&f, 7));
    let answers = answers.unwrap();
    for (node, bytes) in &answers {
        let a: JoinAnswer = serde_json::from_slice(bytes).unwrap();
        assert_eq!(
            (a.incarnation, a.info.clone()),
            (u64::from(*node), vec![*node as u8; 2])
        );
    }
    assert_eq!(answers.len(), 2);
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|(_, peer, _)| *peer == 2));
    // The second round: connected.
    let connected = JoinMessage::Connected { incarnation: 7 }.to_bytes();
    let (done, seen) = with_loops(&joiners, answer, || {
        dial_each(&f, 2, |_| connected.clone(), Duration::from_secs(5))
    });
    assert_eq!(done.unwrap().len(), 2);
    assert!(
        seen.iter()
            .all(|(_, _, m)| *m == JoinMessage::Connected { incarnation: 7 })
    );
}

#[test]
fn refused_joins_say_why_and_strangers_never_reach_the_loop() {
    let f = file(3);
    let joiners = running(&f);
    // The loop refuses an old incarnation: the joiner learns why.
    let (refused, _) = with_loops(&joiners, answer, || join_at(&f, 3));
    let e = refused.unwrap_err().to_string();
    assert!(e.contains("incarnation 3 is not above 5"), "{e}");
    // A process that starts with the cluster instead of joining it.
    let started = Instant::now();
    let (plain, seen) = with_loops(&joiners, answer, || {
        dial_each(&f, 2, |_| b"keys".to_vec(), Duration::from_secs(5))
    });
    let e = plain.unwrap_err().to_string();
    assert!(e.contains("velos node --join"), "{e}");
    assert!(seen.is_empty(), "not a join: the loop never sees it");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "refused, not timed out"
    );
    // A stranger without the secret learns nothing and asks nothing.
    let mut stranger = f.clone();
    stranger.secret = crate::cluster_file::SecretSource::Inline("a guess".into());
    let (guess, seen) = with_loops(&joiners, answer, || join_at(&stranger, 9));
    let e = guess.unwrap_err().to_string();
    assert!(e.contains("secret"), "{e}");
    assert!(seen.is_empty(), "a stranger's join never reaches the loop");
}
