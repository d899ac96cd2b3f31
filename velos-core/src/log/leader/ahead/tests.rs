//! Rule (term predictions): a leader opens a slot of a recycled position only with its own
//! word loaded; once a first prepare found another word than that seed at an acceptor
//! (one of them of another lap), that acceptor's words are read ahead and predict the
//! slots opened next, until they agree with the seeds.

use super::{AHEAD_SLOTS, Ahead, Read};
use crate::AcceptorState;
use crate::log::config::LogConfig;
use crate::log::leader::{Leader, SlotAt};
use crate::log::membership::{Members, Membership};
use crate::slot::SlotCommand;

/// A word of lap 0 accepted at `ballot` by proposer 0, as the previous lap leaves it.
fn decided(config: &LogConfig, ballot: u64, previous: u8) -> u64 {
    let state = AcceptorState {
        tag: 0,
        min_proposal: ballot,
        accepted_proposal: ballot,
        accepted_value: 1,
        previous_decision: previous,
    };
    config.layout.encode(state).unwrap()
}

/// The prepare CASes in `out`: `(slot, acceptor, id, expected)`.
fn cases(out: &[(SlotAt, SlotCommand)]) -> Vec<(u64, u16, u64, u64)> {
    out.iter()
        .filter_map(|(at, cmd)| match *cmd {
            SlotCommand::Cas {
                id,
                acceptor,
                expected,
                ..
            } => Some((at.slot, acceptor, id, expected)),
            _ => None,
        })
        .collect()
}

/// Leader 0 of a 3-replica log on a 64-slot ring, in its second lap (positions recycled).
fn leader() -> Leader {
    let membership = Membership::new(Members::all(3), 3);
    Leader::new(0, 1, 64, vec![0; 2], membership)
}

#[test]
fn a_slot_of_a_recycled_position_opens_only_with_its_seed_loaded() {
    let config = LogConfig::new(3, 64, 16);
    let mut l = leader();
    let mine = decided(&config, 1, 1);
    let mut out = Vec::new();
    l.open_slots(&config, u64::MAX, |s| (s < 66).then_some(mine), &mut out);
    let slots: Vec<u64> = cases(&out).iter().map(|c| c.0).collect();
    assert_eq!(
        slots,
        [64, 64, 64, 65, 65, 65],
        "slots 66 and 67 wait for their seeds"
    );
    assert!(
        cases(&out).iter().all(|c| c.3 == mine),
        "every acceptor predicted by my word"
    );
    // On the ring's first lap, the initial word (every acceptor's until a proposer of the
    // instance writes) stands in for a seed not loaded yet.
    let membership = Membership::new(Members::all(3), 3);
    let mut first = Leader::new(0, 1, 0, vec![0; 2], membership);
    out.clear();
    first.open_slots(&config, u64::MAX, |_| None, &mut out);
    let bottom = config.layout.encode(AcceptorState::initial(0)).unwrap();
    assert_eq!(cases(&out).len(), 12, "the whole window opens");
    assert!(cases(&out).iter().all(|c| c.3 == bottom));
}

#[test]
fn a_mispredicted_acceptor_is_read_ahead_and_predicted_from_its_words() {
    let config = LogConfig::new(3, 64, 16);
    let ring = config.ring();
    let mut l = leader();
    let (mine, theirs) = (decided(&config, 1, 1), decided(&config, 1, 2));
    let mut out = Vec::new();
    // Slot 64 only (room), predicted by my word everywhere.
    l.open_slots(&config, 65, |_| Some(mine), &mut out);
    let mut reads = Vec::new();
    l.reads_ahead(ring, |_| true, &mut reads);
    assert!(
        reads.is_empty(),
        "a leader whose seeds are right reads nothing"
    );
    // Acceptor 2's first prepare finds another word: its words are read from slot 65 on,
    // up to the slots whose positions' previous instances are decided (below 64 + 64).
    let (slot, a, id, _) = cases(&out)[2];
    assert_eq!((slot, a), (64, 2));
    l.on_cas(&config, (slot, a, id), theirs, &mut Vec::new());
    l.reads_ahead(ring, |_| true, &mut reads);
    let want = Read {
        acceptor: 2,
        from: 65,
        count: 63,
    };
    assert_eq!(reads, [want]);
    assert_eq!(l.reads_ahead_out(), 1 << 2);
    reads.clear();
    l.reads_ahead(ring, |_| true, &mut reads);
    assert!(reads.is_empty(), "one read out per acceptor");
    // Slot 65 opens before the read is back: my word still predicts acceptor 2.
    out.clear();
    l.open_slots(&config, 66, |_| Some(mine), &mut out);
    assert!(cases(&out).iter().all(|c| c.3 == mine));
    l.read_ahead_done(2, Some(&[theirs; 63]));
    out.clear();
    l.open_slots(&config, u64::MAX, |_| Some(mine), &mut out);
    let opened = cases(&out);
    assert_eq!(opened.len(), 6, "slots 66 and 67");
    for (slot, a, _, expected) in opened {
        let want = if a == 2 { theirs } else { mine };
        assert_eq!(expected, want, "slot {slot} at acceptor {a}");
    }
}

#[test]
fn a_conflict_within_the_instance_reads_nothing() {
    let config = LogConfig::new(3, 64, 16);
    let mut l = leader();
    // My acceptor and acceptor 1 both hold promises of slot 64's own instance (lap 1): a
    // first prepare that finds another one there met another proposer of that instance,
    // no sign of the positions ahead.
    let promised = |min_proposal| {
        let state = AcceptorState {
            min_proposal,
            ..AcceptorState::initial(1)
        };
        config.layout.encode(state).unwrap()
    };
    let mut out = Vec::new();
    l.open_slots(&config, 65, |_| Some(promised(3)), &mut out);
    let (slot, a, id, _) = cases(&out)[1];
    assert_eq!((slot, a), (64, 1));
    l.on_cas(&config, (slot, a, id), promised(5), &mut Vec::new());
    let mut reads = Vec::new();
    l.reads_ahead(config.ring(), |_| true, &mut reads);
    assert!(reads.is_empty(), "{reads:?}");
    // A word of the previous lap there (the position's last lap, otherwise than mine) is.
    let (slot, a, id, _) = cases(&out)[2];
    l.on_cas(
        &config,
        (slot, a, id),
        decided(&config, 1, 1),
        &mut Vec::new(),
    );
    l.reads_ahead(config.ring(), |_| true, &mut reads);
    assert_eq!(reads.len(), 1, "{reads:?}");
}

#[test]
fn words_that_agree_with_the_seeds_for_a_read_s_worth_end_the_reads() {
    let mut ahead = Ahead::default();
    ahead.mispredicted(1, 100);
    assert!(ahead.reads(1) && !ahead.reads(2));
    let mut reads = Vec::new();
    ahead.wanted((100, 10_000), |_| 1_000, |_| true, &mut reads);
    let read = Read {
        acceptor: 1,
        from: 100,
        count: AHEAD_SLOTS,
    };
    assert_eq!(reads, [read]);
    ahead.read_done(1, Some(&vec![7; AHEAD_SLOTS as usize]));
    for slot in 100..100 + u64::from(AHEAD_SLOTS) - 1 {
        assert_eq!(ahead.word(1, slot), Some(7));
        ahead.opened(slot, 7);
        assert!(ahead.reads(1), "slot {slot}: not yet a read's worth");
    }
    ahead.opened(100 + u64::from(AHEAD_SLOTS) - 1, 7);
    assert!(!ahead.reads(1), "my seeds serve again");
}

#[test]
fn a_read_whose_slots_opened_meanwhile_keeps_only_the_rest() {
    let mut ahead = Ahead::default();
    ahead.mispredicted(1, 100);
    let mut reads = Vec::new();
    ahead.wanted((100, 10_000), |_| 1_000, |_| true, &mut reads);
    for slot in 100..103 {
        ahead.opened(slot, 7); // opened by my seed: the read is not back
    }
    let words: Vec<u64> = (0..u64::from(AHEAD_SLOTS)).map(|i| 1_000 + i).collect();
    ahead.read_done(1, Some(&words));
    assert_eq!(ahead.word(1, 102), None, "opened already");
    assert_eq!(ahead.word(1, 103), Some(1_003));
    // A failed read (or one given up) leaves the acceptor to my seeds.
    reads.clear();
    ahead.wanted((103, 10_000), |_| 1_000, |_| true, &mut reads);
    assert!(reads.is_empty(), "more than half a read ahead");
    ahead.forget(1);
    assert!(!ahead.reads(1) && ahead.word(1, 103).is_none());
}
