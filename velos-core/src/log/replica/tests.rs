//! One turn in, the exact operations out.

use super::*;
use crate::log::WRITE_CHUNK;
use crate::word::{AcceptorState, WordLayout};
use velos_rdma::{Loc, NodeId, Rmw};

fn replica(me: u16) -> Replica {
    let config = Shared::new(LogConfig::new(3, 16, 16));
    Replica::new(config, me).expect("valid")
}

/// Runs one turn: the clock reads `now`, every other operation gets a neutral reply
/// (`Done`, or `Value(0)`: nothing completed, words zero); returns the operations.
fn turn(r: &mut Replica, now: u64) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut step = r.resume(Reply::Value(now));
    loop {
        match step {
            Step::Op(Op::Now) | Step::Done => return ops,
            Step::Op(op) => {
                let reply = match op {
                    Op::Load { .. } | Op::Test { .. } => Reply::Value(0),
                    _ => Reply::Done,
                };
                ops.push(op);
                step = r.resume(reply);
            }
        }
    }
}

#[test]
fn a_bad_configuration_is_refused_with_its_reason() {
    let config = Shared::new(LogConfig::new(3, 16, 16));
    assert_eq!(
        Replica::new(config.clone(), 3).err(),
        Some("replica 3 of 3".to_string())
    );
    let mut zero = LogConfig::new(3, 16, 16);
    zero.slots = 0;
    assert!(Replica::new(Shared::new(zero), 0).is_err());
    let mut deep = LogConfig::new(3, 16, 16);
    deep.pipeline = 15;
    assert!(Replica::new(Shared::new(deep.clone()), 0).is_ok());
    deep.pipeline = 16;
    let refused = Replica::new(Shared::new(deep), 0).unwrap_err();
    assert!(refused.contains("at most 15"), "{refused}");
}

#[test]
fn a_snapshot_too_large_or_ahead_of_the_log_is_refused() {
    let mut config = LogConfig::new(3, 16, 16);
    config.max_snapshot_bytes = 8;
    let mut r = Replica::new(Shared::new(config), 0).expect("valid");
    assert_eq!(
        r.snapshot_taken(0, vec![0; 9]),
        Err(crate::log::SnapshotError::TooLarge { len: 9, max: 8 })
    );
    assert_eq!(
        r.snapshot_taken(1, vec![0; 8]),
        Err(crate::log::SnapshotError::NotApplied {
            point: 1,
            next_apply: 0
        })
    );
    assert_eq!(
        r.snapshot_taken(0, vec![0; 8]),
        Ok(()),
        "nothing new: no-op"
    );
}

#[test]
fn a_turn_starts_with_the_clock() {
    let mut r = replica(1);
    assert_eq!(r.resume(Reply::Start), Step::Op(Op::Now));
}

#[test]
fn omega_bumps_the_own_heartbeat_and_reads_the_others() {
    let mut r = replica(1);
    r.resume(Reply::Start);
    let ops = turn(&mut r, 0);
    let shape = LogConfig::new(3, 16, 16).shape();
    let word = crate::log::heartbeat::Heartbeat {
        point: 0,
        trust: Some(0),
        past: 0,
        version: 1,
        unable: false,
        beat: 1,
    };
    assert_eq!(
        ops[0],
        Op::Store {
            loc: shape.heartbeat(1),
            value: word.word()
        },
        "the first beat, trusting replica 0 (its first trust: version 1)"
    );
    let gets: Vec<Loc> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Get { remote, .. } => Some(*remote),
            _ => None,
        })
        .collect();
    assert_eq!(gets, vec![shape.heartbeat(0), shape.heartbeat(2)]);
    assert!(!r.is_leader(), "replica 0 leads while it is trusted");
}

#[test]
fn the_leader_pre_prepares_its_window_with_one_cas_per_acceptor_and_slot() {
    let mut r = replica(0);
    r.resume(Reply::Start);
    let ops = turn(&mut r, 0);
    assert!(r.is_leader());
    let layout = LogConfig::new(3, 16, 16).layout;
    let promise = layout
        .encode(AcceptorState {
            min_proposal: 1,
            ..AcceptorState::default()
        })
        .unwrap();
    let cases: Vec<(NodeId, u64, u64)> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Atomic {
                remote,
                rmw: Rmw::Cas { expected, new },
                ..
            } => Some((remote.node, *expected, *new)),
            _ => None,
        })
        .collect();
    // The window: 4 slots × 3 acceptors, each ⟨0,0,⊥⟩ → ⟨1,0,⊥⟩ (proposal 1: replica 0's
    // first number, the ballot of the window).
    assert_eq!(cases.len(), 4 * 3);
    assert!(cases.iter().all(|&(_, e, n)| e == 0 && n == promise));
    assert!(
        !ops.iter()
            .any(|op| matches!(op, Op::PutInline { .. } | Op::PutWords { .. })),
        "no value is written before there is one to propose"
    );
    assert!(r.propose(vec![1; 10]).is_ok());
    assert_eq!(
        r.propose(vec![1; 17]),
        Err(ProposeError::ValueTooLarge { len: 17, max: 16 })
    );
}

/// Runs one turn like [`turn`], but local loads of acceptor words reply `word`.
fn turn_with_words(r: &mut Replica, now: u64, word: u64) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut step = r.resume(Reply::Value(now));
    let words = r.config.shape();
    loop {
        match step {
            Step::Op(Op::Now) | Step::Done => return ops,
            Step::Op(op) => {
                let reply = match op {
                    Op::Load { loc } if (0..16).any(|s| loc == words.acceptor_word(r.me, s)) => {
                        Reply::Value(word)
                    }
                    Op::Load { .. } | Op::Test { .. } => Reply::Value(0),
                    _ => Reply::Done,
                };
                ops.push(op);
                step = r.resume(reply);
            }
        }
    }
}

/// A replica whose local words show every slot promised at the overflow threshold: its
/// first turn makes it leader, loads them and opens the window with them.
fn leader_at_threshold(epochs: u32) -> (Replica, Vec<Op>, u64) {
    let mut config = LogConfig::new(3, 16, 16);
    config.epochs = epochs;
    let at = config
        .layout
        .encode(AcceptorState {
            min_proposal: config.overflow_threshold(),
            ..AcceptorState::default()
        })
        .unwrap();
    let mut r = Replica::new(Shared::new(config), 0).expect("valid");
    r.resume(Reply::Start);
    let ops = turn_with_words(&mut r, 0, at);
    (r, ops, at)
}

#[test]
fn overflow_freezes_the_epoch_with_one_cas_per_acceptor_and_slot() {
    let (_, ops, at) = leader_at_threshold(2);
    let shape = LogConfig::new(3, 16, 16).shape();
    let frozen = crate::freeze::Freezer::frozen(WordLayout::VELOS, at);
    let cases: Vec<(Loc, u64, u64)> = ops
        .iter()
        .filter_map(|op| match op {
            Op::Atomic {
                remote,
                rmw: Rmw::Cas { expected, new },
                ..
            } => Some((*remote, *expected, *new)),
            _ => None,
        })
        .collect();
    // No proposal number above the threshold is left: each of the window's 4 slots
    // freezes its epoch-0 word at the 3 acceptors instead of preparing it.
    assert_eq!(cases.len(), 4 * 3, "{cases:?}");
    for s in 0..4 {
        for a in 0..3 {
            assert!(
                cases.contains(&(shape.epoch_word(a, s, 0), at, frozen)),
                "slot {s} at {a}"
            );
        }
    }
}

#[test]
fn the_last_epoch_exhausted_refuses_proposals_with_the_slot() {
    let (mut r, ops, _) = leader_at_threshold(1);
    assert!(r.is_leader());
    assert!(
        !ops.iter().any(|op| matches!(op, Op::Atomic { .. })),
        "nothing to CAS: one epoch only"
    );
    assert_eq!(
        r.propose(vec![1; 10]),
        Err(ProposeError::Exhausted { slot: 0 })
    );
}

/// Runs one turn like [`turn`], with `reply` answering every operation but the clock.
fn turn_replying(r: &mut Replica, now: u64, mut reply: impl FnMut(&Op) -> Reply) -> Vec<Op> {
    let mut ops = Vec::new();
    let mut step = r.resume(Reply::Value(now));
    loop {
        match step {
            Step::Op(Op::Now) | Step::Done => return ops,
            Step::Op(op) => {
                step = r.resume(reply(&op));
                ops.push(op);
            }
        }
    }
}

/// Loads read 0, tests find nothing complete (`TestLoad`: `Done`), the rest is done.
fn neutral(op: &Op) -> Reply {
    match op {
        Op::Load { .. } | Op::Test { .. } => Reply::Value(0),
        _ => Reply::Done,
    }
}

#[test]
fn after_a_failed_cas_the_puts_work_id_is_tested_each_heartbeat_until_complete() {
    let puts = Op::Test { work_id: ids::PUT };
    let mut r = replica(0);
    r.resume(Reply::Start);
    turn(&mut r, 0);
    assert!(r.is_leader());
    // Every CAS test fails: the acceptors' queue pairs broke (a crash, on the mem backend).
    let cas = |op: &Op| match op {
        Op::TestLoad { work_id, .. } if work_id.0 >= ids::CAS => {
            Reply::Failed(velos_rdma::RdmaError::RemoteCrashed { node: NodeId(1) })
        }
        other => neutral(other),
    };
    let ops = turn_replying(&mut r, 1, cas);
    assert!(!ops.contains(&puts), "not before the next heartbeat");
    // Due: tested, not complete yet (Value(0)); tested again at the next heartbeat.
    let period = r.config.heartbeat_period_ns;
    let ops = turn_replying(&mut r, period, neutral);
    assert_eq!(ops.iter().filter(|&op| *op == puts).count(), 1);
    let ops = turn_replying(&mut r, period + 1, neutral);
    assert!(!ops.contains(&puts), "once per heartbeat period");
    let complete = |op: &Op| match op {
        Op::Test { work_id } if *work_id == ids::PUT => Reply::Value(1),
        other => neutral(other),
    };
    let ops = turn_replying(&mut r, 2 * period, complete);
    assert!(ops.contains(&puts));
    // Complete: the failures were taken with it, so no more tests.
    let ops = turn_replying(&mut r, 3 * period, neutral);
    assert!(!ops.contains(&puts), "{ops:?}");
}

#[test]
fn without_a_failed_cas_the_puts_work_id_is_never_tested() {
    let puts = Op::Test { work_id: ids::PUT };
    let mut r = replica(0);
    r.resume(Reply::Start);
    let period = r.config.heartbeat_period_ns;
    for k in 0..5 {
        let ops = turn_replying(&mut r, k * period, neutral);
        assert!(!ops.contains(&puts));
    }
}

/// A snapshot larger than [`WRITE_CHUNK`] words is written over several turns: a chunk
/// per turn into the bank the header does not name, the end stamp after the content, the
/// header after the end stamp, and only then the point published (the event with it);
/// meanwhile the next snapshot is refused. The words stored are the bank's.
#[test]
fn a_large_snapshot_is_written_a_chunk_per_turn_then_published() {
    let mut config = LogConfig::new(3, 16, 16);
    let bytes: Vec<u8> = (0..8 * (2 * WRITE_CHUNK + 100)).map(|i| i as u8).collect();
    config.max_snapshot_bytes = bytes.len() as u32;
    let shape = config.shape();
    let mut r = Replica::new(Shared::new(config), 0).expect("valid");
    r.report_events();
    r.resume(Reply::Start);
    turn(&mut r, 0);
    r.next_apply = 5; // five entries applied
    let expected = {
        let wrapped = r.membership.wrap_snapshot(5, &bytes).expect("fits");
        crate::log::snapshot::bank_words(5, &wrapped, shape.snapshot_words)
    };
    assert_eq!(r.snapshot_taken(5, bytes.clone()), Ok(()));
    assert_eq!(r.snapshot_writing(), Some(5));
    assert_eq!(
        r.snapshot_taken(5, bytes),
        Err(crate::log::SnapshotError::Writing { point: 5 })
    );
    let bank = shape.snapshot_bank_words();
    let header = shape.snapshot_header(0);
    let mut stored = vec![None; bank as usize];
    let mut turns = 0;
    let mut now = 0;
    while r.snapshot_writing().is_some() {
        assert_eq!(r.beat.points[0], 0, "not published while written");
        now += 1;
        turns += 1;
        let ops = turn(&mut r, now);
        let mut in_turn = 0;
        // A chunk's words go out as one copy: each word as the store it stands for.
        let stores = ops.into_iter().flat_map(|op| match op {
            Op::Store { loc, value } => vec![(loc, value)],
            Op::StoreWords { loc, words } => (0..words.len())
                .map(|i| (loc.word_after(i), words.as_slice()[i]))
                .collect(),
            _ => Vec::new(),
        });
        for (loc, value) in stores {
            if loc == header {
                assert_eq!(value, 1, "the header names bank 0");
                assert_eq!(stored[bank as usize - 1], Some(expected[bank as usize - 1]));
                assert!(r.snapshot_writing().is_none(), "the header comes last");
            } else if let Some(i) = (0..bank).find(|&i| shape.snapshot_word(0, 0, i) == loc) {
                assert!(stored[i as usize].is_none(), "each word once");
                stored[i as usize] = Some(value);
                in_turn += 1;
            }
        }
        // The call's chunk goes out with the first turn's operations.
        let chunks = if turns == 1 { 2 } else { 1 };
        assert!(in_turn <= chunks * WRITE_CHUNK, "a chunk per turn at most");
        assert!(turns < 10, "the write ends");
    }
    // The first chunk went out with the call, the rest over the next two turns.
    assert_eq!(turns, 2);
    for (i, w) in stored.iter().enumerate() {
        if let Some(w) = w {
            assert_eq!(*w, expected[i], "word {i}");
        } else {
            assert_eq!(expected[i], 0, "word {i}: only padding is left unwritten");
        }
    }
    assert_eq!(r.beat.points[0], 5, "published");
    let events = r.take_events();
    let published = events
        .iter()
        .any(|e| matches!(e, crate::log::Event::SnapshotPublished { point: 5, .. }));
    assert!(published, "the event says so: {events:?}");
    assert!(r.take_events().is_empty(), "taken once");
}

/// Rule (void change): a configuration entry applied that is not one change from the
/// configuration before it — as a leader that had not applied another leader's later
/// entry could propose — changes nothing at any replica; the next valid one takes effect.
#[test]
fn a_configuration_entry_two_changes_away_is_void_where_applied() {
    let mut config = LogConfig::new(5, 64, 16);
    config.members = Members::of(&[0, 1, 2]);
    let mut r = Replica::new(Shared::new(config), 1).expect("valid");
    r.report_events();
    let entry = |members: &[u16]| Value {
        bytes: Configuration::first(Members::of(members), 5).to_entry(),
        config: true,
        origin: 0,
    };
    r.apply(0, entry(&[0, 1, 2, 3, 4]));
    assert!(r.memberships.is_empty(), "void: not recorded");
    assert_eq!(
        r.members_at(100),
        Members::of(&[0, 1, 2]),
        "void: nothing changed"
    );
    assert!(
        r.take_events()
            .iter()
            .any(|e| matches!(e, Event::ChangeVoid { slot: 0, .. })),
        "the void entry is reported"
    );
    r.apply(1, entry(&[0, 1, 2, 3]));
    let alpha = u64::from(r.config.pipeline);
    assert_eq!(r.memberships, vec![(1, Members::of(&[0, 1, 2, 3]))]);
    assert_eq!(r.members_at(1 + alpha), Members::of(&[0, 1, 2, 3]));
    // The same change decided again (a new leader that proposed it before it learned the
    // entry above): nothing changes, nothing is recorded or reported as a change.
    r.take_events();
    r.apply(2, entry(&[0, 1, 2, 3]));
    assert_eq!(
        r.memberships,
        vec![(1, Members::of(&[0, 1, 2, 3]))],
        "same: not recorded"
    );
    assert!(
        !r.take_events()
            .iter()
            .any(|e| matches!(e, Event::MembersChanged { .. } | Event::ChangeVoid { .. })),
        "same: no change reported"
    );
    assert_eq!(r.members_at(2 + alpha), Members::of(&[0, 1, 2, 3]));
}

/// Replica 1, a follower whose own acceptor words show slots 0–7 accepted for replica 0's
/// proposal, each word counting the slot before it decided (so slots 0–6 are proven by a
/// later word), and whose own copies of replica 0's buffers hold a consistent value.
/// Runs one turn with the leader's heartbeat having `reached` and returns the slots
/// applied.
fn follower_turn_learning(reached: u64) -> u64 {
    let mut r = replica(1);
    r.resume(Reply::Start);
    r.beat.reached[0] = reached;
    let (layout, ring, shape) = (r.config.layout, r.ring, r.config.shape());
    let proposer = crate::proposal::ProposerId(0);
    let p = 1;
    let word = |s: u64| {
        let state = AcceptorState {
            tag: ring.tag(s),
            min_proposal: p,
            accepted_proposal: p,
            accepted_value: proposer.value_tag(),
            previous_decision: u8::from(s > 0),
        };
        layout.encode(state).expect("a word")
    };
    let stamp = |s: u64| crate::log::value::stamp(ring.tag(s), 0, p, 3);
    let value_words = r.config.value_words();
    turn_replying(&mut r, 0, |op| match *op {
        Op::Load { loc } => {
            let found = (0..8u64).find_map(|s| {
                let pos = ring.position(s);
                if loc == shape.epoch_word(1, pos, 0) {
                    Some(word(s))
                } else if loc == shape.value_stamp(1, proposer, pos)
                    || loc == shape.value_end_stamp(1, proposer, pos)
                {
                    Some(stamp(s))
                } else {
                    (0..value_words)
                        .any(|i| loc == shape.value_word(1, proposer, pos, i))
                        .then_some(0)
                }
            });
            Reply::Value(found.unwrap_or(0))
        }
        ref other => neutral(other),
    });
    assert!(!r.is_leader(), "premise: replica 1 follows replica 0");
    r.next_apply
}

#[test]
fn a_follower_behind_learns_every_slot_its_own_words_prove_in_one_turn() {
    // Rule (learn a run): a window (pipeline 4) and more behind the leader's reach, every
    // slot its words of the turn prove — 0 to 6 (slot 7's proof would be in slots 8–14,
    // past the turn's look-ahead).
    assert_eq!(follower_turn_learning(50), 7);
    // Near the head, one slot a turn, as before.
    assert_eq!(follower_turn_learning(3), 1);
}

/// Rule (replace): a process joining after every voter of the first configuration was
/// replaced (each replica at incarnation 1 or more) knows no voter at the log's start. It
/// starts — its Ω watches the configuration's members until the log tells it more — and
/// neither leads nor says it could. (It panicked: Ω was given no member; an embedded
/// cluster whose three replicas were each replaced once hit it.)
#[test]
fn a_process_joining_after_every_first_voter_was_replaced_starts_and_does_not_lead() {
    let config = Shared::new(LogConfig::new(3, 16, 16));
    let mut r = Replica::joining(config, 2, &[1, 1, 2]).expect("a joiner");
    assert!(
        r.membership.voters(0).is_empty(),
        "premise: no voter of slot 0 remains"
    );
    let mut now = 1;
    for _ in 0..50 {
        turn(&mut r, now);
        now += 2_000;
    }
    assert!(r.leader() < 3, "Ω names a member");
    assert!(
        !r.is_leader() && !r.able_to_lead(),
        "a joiner does not lead"
    );
}

/// A joiner resumes at its disk's snapshot (its next slot there, the membership from
/// there on adopted, what it is connected to kept); a process that applied anything, bytes
/// that are no wrapped snapshot and a snapshot above the log's size are refused.
#[test]
fn a_joiner_resumes_at_its_disks_snapshot_and_bad_ones_are_refused() {
    let mut config = LogConfig::new(3, 16, 16);
    config.max_snapshot_bytes = 64;
    let config = Shared::new(config);
    let mut earlier = Replica::new(config.clone(), 2).expect("valid");
    earlier.next_apply = 9; // nine entries applied
    assert_eq!(
        earlier.wrap_snapshot(10, b"state"),
        None,
        "past its next slot"
    );
    let wrapped = earlier.wrap_snapshot(9, b"state").expect("fits");
    let mut r = Replica::joining(config.clone(), 2, &[0, 0, 1]).expect("a joiner");
    assert_eq!(
        r.resume_at(9, &wrapped),
        Ok(&b"state"[..]),
        "the service's bytes"
    );
    assert_eq!(r.next_apply(), 9, "resumed at the snapshot's point");
    assert_eq!(r.incarnation(), 1, "a new incarnation all the same");
    assert!(
        r.snapshot_writing() == Some(9) || r.beat.points[2] == 9,
        "it publishes it in its bank, to serve it in turn"
    );
    assert!(
        r.resume_at(9, &wrapped).is_err(),
        "only once, before applying"
    );
    let mut blank = Replica::joining(config.clone(), 2, &[0, 0, 1]).expect("a joiner");
    assert!(blank.resume_at(9, b"no snapshot").is_err());
    let large = earlier
        .wrap_snapshot(9, &[7; 65])
        .expect("fits the membership");
    assert!(
        blank.resume_at(9, &large).is_err(),
        "above max_snapshot_bytes"
    );
    assert_eq!(blank.next_apply(), 0, "nothing refused moved it");
}

/// After a whole-cluster power loss: a replica whose disk holds the whole recovered log
/// resumes at its end and publishes it; one whose disk holds less stays behind, unable to
/// lead, until it copies (rule (recovered behind)); point 0, a second call and a snapshot
/// above the log's size are refused.
#[test]
fn a_recovered_replica_resumes_at_the_logs_end_or_stays_behind_until_it_copies() {
    let mut config = LogConfig::new(3, 16, 16);
    config.max_snapshot_bytes = 64;
    let config = Shared::new(config);
    let mut whole = Replica::new(config.clone(), 0).expect("valid");
    assert!(
        whole.restart_recovered(0, Some(b"state")).is_err(),
        "point 0"
    );
    assert_eq!(whole.restart_recovered(40, Some(b"state")), Ok(()));
    assert_eq!(whole.next_apply(), 40, "its numbering goes on");
    assert!(
        whole.snapshot_writing() == Some(40) || whole.beat.points[0] == 40,
        "it publishes the state, for the short disks to copy"
    );
    assert!(whole.restart_recovered(40, Some(b"state")).is_err(), "once");
    let mut short = Replica::new(config.clone(), 1).expect("valid");
    assert_eq!(short.restart_recovered(40, None), Ok(()));
    assert_eq!(short.next_apply(), 0, "nothing applied before a copy");
    assert!(short.snap.behind && short.snap.recovering);
    assert!(!short.able_to_lead(), "rule (recovered behind)");
    let mut large = Replica::new(config, 2).expect("valid");
    assert!(
        large.restart_recovered(40, Some(&[7; 65])).is_err(),
        "above the size"
    );
    assert_eq!(large.next_apply(), 0, "nothing refused moved it");
}
