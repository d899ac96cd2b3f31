//! A joiner and a majority, on loopback (no RDMA): it joins with a majority of the
//! cluster file while another node is down, fails with a typed error naming the counts
//! when a majority is down, and meets a node that was down at the join once it listens.

use super::*;
use crate::rendezvous::{PAUSE_MAX, RendezvousError, listen};
use std::net::TcpStream;
use std::sync::Mutex;
use std::time::Instant;

fn file(n: u16) -> ClusterFile {
    crate::rendezvous::tests::file(n, "m")
}

/// Node `id` running: it serves joiners on its listener and its loop, on a thread of its
/// own, answers every request (a join with its incarnation, 100 + `id`, and its
/// information, `[id]`), recording what it was asked.
struct Running {
    seen: Arc<Mutex<Vec<JoinMessage>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    fn start(f: &ClusterFile, id: u16) -> Running {
        Running::answering(f, id, Ok)
    }

    /// Node `id` running, its loop's answers to joins passed through `judge`.
    fn answering(
        f: &ClusterFile,
        id: u16,
        judge: fn(Vec<u8>) -> Result<Vec<u8>, String>,
    ) -> Running {
        let joiners = Joiners::serve(f.clone(), id, listen(f, id).unwrap()).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (saw, stopped) = (Arc::clone(&seen), Arc::clone(&stop));
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                while let Some(request) = joiners.next() {
                    saw.lock().unwrap().push(request.message.clone());
                    let answer = match request.message {
                        JoinMessage::Join { .. } => judge(
                            serde_json::to_vec(&JoinAnswer {
                                incarnation: 100 + u64::from(id),
                                info: vec![id as u8],
                            })
                            .unwrap(),
                        ),
                        JoinMessage::Connected { .. } => Ok(Vec::new()),
                    };
                    request.answer(answer);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        Running {
            seen,
            stop,
            thread: Some(thread),
        }
    }

    fn seen(&self) -> Vec<JoinMessage> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
    }
}

/// The premise of a node "down": nothing listens at its address.
fn assert_down(f: &ClusterFile, id: u16) {
    let address = f.socket_address(id).unwrap();
    assert!(TcpStream::connect(address).is_err(), "node {id} is down");
}

/// The joiner's information for `peer`.
fn info_for(peer: u16) -> Vec<u8> {
    vec![200, peer as u8]
}

const TIMEOUT: Duration = Duration::from_secs(5);

#[test]
fn a_joiner_joins_with_a_majority_while_another_node_is_down() {
    // Premise: five nodes; the joiner takes node 4's place, nodes 0, 1 and 2 run, node 3
    // is down. Before, a joiner had to reach every node and failed here.
    let f = file(5);
    let running: Vec<Running> = (0..3).map(|id| Running::start(&f, id)).collect();
    assert_down(&f, 3);
    let started = Instant::now();
    let asked = ask(&f, 4, 7, info_for, TIMEOUT).unwrap();
    assert_eq!(asked.answers.keys().copied().collect::<Vec<_>>(), [0, 1, 2]);
    for (&node, answer) in &asked.answers {
        assert_eq!(answer.incarnation, 100 + u64::from(node));
        assert_eq!(answer.info, [node as u8]);
    }
    assert_eq!(asked.missing(), [3], "node 3 is dialed on");
    let late = asked.connected(TIMEOUT).unwrap();
    assert!(
        started.elapsed() < TIMEOUT,
        "it did not wait for node 3: {:?}",
        started.elapsed()
    );
    assert_eq!(late.missing(), [3]);
    for (id, node) in running.iter().enumerate() {
        let join = JoinMessage::Join {
            incarnation: 7,
            info: info_for(id as u16),
        };
        let connected = JoinMessage::Connected { incarnation: 7 };
        assert_eq!(node.seen(), [join, connected], "node {id}");
    }
}

#[test]
fn a_joiner_that_reaches_no_majority_fails_naming_the_counts() {
    // Premise: five nodes; the joiner takes node 4's place and only node 0 runs: with
    // the joiner, two of five, and a majority is three.
    let f = file(5);
    let _zero = Running::start(&f, 0);
    for id in 1..4 {
        assert_down(&f, id);
    }
    let started = Instant::now();
    let e = ask(&f, 4, 7, info_for, Duration::from_secs(1)).unwrap_err();
    assert!(started.elapsed() < TIMEOUT, "bounded by the timeout");
    match &e {
        RendezvousError::NoMajority {
            me,
            answered,
            needed,
            nodes,
            missing,
            ..
        } => {
            assert_eq!((*me, answered.as_slice(), *needed), (4, &[0][..], 2));
            assert_eq!((*nodes, missing.as_slice()), (5, &[1, 2, 3][..]));
        }
        other => panic!("not the majority's error: {other}"),
    }
    let text = e.to_string();
    assert!(text.contains("reached 1 of the 4 other nodes"), "{text}");
    assert!(text.contains("needs 2 of them"), "{text}");
}

#[test]
fn a_node_down_at_the_join_is_met_once_it_listens() {
    // Premise: three nodes; the joiner takes node 2's place while node 0 runs and node 1
    // is down; node 1 starts listening only after the join. Before, nothing dialed it
    // again: it never learnt of the joiner, nor the joiner of it.
    let f = file(3);
    let zero = Running::start(&f, 0);
    assert_down(&f, 1);
    let asked = ask(&f, 2, 9, info_for, TIMEOUT).unwrap();
    assert_eq!(asked.answers.keys().copied().collect::<Vec<_>>(), [0]);
    let mut late = asked.connected(TIMEOUT).unwrap();
    assert_eq!(late.missing(), [1]);
    assert!(late.met().is_none(), "node 1 is still down");
    assert_eq!(zero.seen().len(), 2, "node 0 joined and told");
    // Node 1 comes back.
    let one = Running::start(&f, 1);
    let back = Instant::now();
    let (peer, answer) = late.met_within(TIMEOUT).expect("node 1 met");
    let answer = answer.unwrap();
    assert_eq!((peer, answer.incarnation, answer.info), (1, 101, vec![1]));
    assert!(
        back.elapsed() < PAUSE_MAX + Duration::from_secs(1),
        "met within a pause of its coming back: {:?}",
        back.elapsed()
    );
    let join = JoinMessage::Join {
        incarnation: 9,
        info: info_for(1),
    };
    assert_eq!(
        one.seen(),
        std::slice::from_ref(&join),
        "node 1 got the joiner's information"
    );
    // The joiner's side connected: node 1 is told.
    late.connected(1).unwrap();
    let (peer, told) = late.told_within(TIMEOUT).expect("node 1 told");
    assert_eq!(peer, 1);
    told.unwrap();
    assert_eq!(
        one.seen(),
        [join, JoinMessage::Connected { incarnation: 9 }]
    );
    assert!(late.missing().is_empty() && late.telling().is_empty());
}

#[test]
fn a_node_that_refuses_late_is_given_up_with_its_reason() {
    // Premise: three nodes; the joiner takes node 2's place while node 1 is down; node 1
    // comes back knowing a later process in that place, and refuses.
    let f = file(3);
    let _zero = Running::start(&f, 0);
    assert_down(&f, 1);
    let mut late = ask(&f, 2, 9, info_for, TIMEOUT)
        .unwrap()
        .connected(TIMEOUT)
        .unwrap();
    let _one = Running::answering(&f, 1, |_| Err("incarnation 9 is not above 12".into()));
    let (peer, answer) = late.met_within(TIMEOUT).expect("node 1 met");
    assert_eq!(peer, 1);
    match answer {
        Err(RendezvousError::Refused { me, peer, reason }) => {
            assert_eq!((me, peer), (2, 1));
            assert!(reason.contains("not above 12"), "{reason}");
        }
        other => panic!("not a refusal: {other:?}"),
    }
    assert!(late.missing().is_empty(), "given up, not dialed on");
}
