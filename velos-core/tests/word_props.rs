//! Property tests of the acceptor word (`velos_core::word`), through the public API only.
//!
//! What they guarantee:
//!
//! - every in-range `AcceptorState` encodes and decodes back to itself under the shipped
//!   layouts (`PAPER`, `TAGGED`, `VELOS`) and under any layout `WordLayout::new` accepts,
//!   and every 64-bit word decodes and encodes back to itself;
//! - a field out of its width is refused with `FieldOverflow` naming it, never truncated;
//! - a random run of Paxos transitions (prepare to a higher proposal, accept at a proposal
//!   ≥ min_proposal, freeze for the overflow fallback), each applied by a CAS from a
//!   possibly stale predicted word, keeps the word equal to a plain reference struct, and
//!   the invariants hold after every step: min_proposal never decreases, accepted_proposal
//!   ≤ min_proposal, a frozen word refuses everything (rule (Freeze));
//! - the real `SlotProposer`s and a `Freezer`, run against three acceptor words with random
//!   delivery, only ever change a word by such a transition, never decide two values, and
//!   the frozen majority carries the decided value (lemma (carry));
//! - laps: a word of an earlier lap (up to half the tag space back) at a recycled instance's
//!   position reads as that instance's initial state (lemma (recycling)), a later lap's word
//!   reads as retired (lemma (overtaken)).
//!
//! Each property runs proptest's default 256 cases (well under a second in release), but
//! the proposers' run 20,000 (≈ 0.6 s): at 256 a mismatch between a rule of the proposer
//! and the checkers' premises surfaced in about one CI run in two (the decided proposal
//! named by rule (chosen at prepare), pinned in `word_props.proptest-regressions`);
//! `PROPTEST_CASES=100000` runs more of the others.

use proptest::prelude::*;
use std::collections::{BTreeMap, VecDeque};
use velos_core::freeze::{Carry, Freezer};
use velos_core::log::ring::Ring;
use velos_core::proposal::{Numbering, ProposerId};
use velos_core::slot::{Content, Mutation, Outcome, SlotCommand, SlotConfig, SlotProposer};
use velos_core::word::Lap;
use velos_core::{AcceptorState, FieldOverflow, WordLayout};

const SHIPPED: [WordLayout; 3] = [WordLayout::PAPER, WordLayout::TAGGED, WordLayout::VELOS];

/// Any layout `WordLayout::new` accepts (fields fill 64 bits, proposals 2..=31 bits, value
/// 1..=16, tag ≤ 16, previous ≤ 8), and the shipped ones.
fn layout() -> impl Strategy<Value = WordLayout> {
    let any = (0u8..=16, 1u8..=16, 0u8..=8).prop_map(|(tag, value, previous)| {
        // Widen or narrow the value field by one bit so that the proposal fields share an
        // even rest (24..=62 bits: always in 2..=31 each).
        let rest = 64 - u32::from(tag) - u32::from(value) - u32::from(previous);
        let value = match (rest % 2, value) {
            (0, v) => v,
            (_, 16) => 15,
            (_, v) => v + 1,
        };
        let rest = 64 - u32::from(tag) - u32::from(value) - u32::from(previous);
        WordLayout::new(tag, (rest / 2) as u8, value, previous)
    });
    prop_oneof![
        Just(WordLayout::PAPER),
        Just(WordLayout::TAGGED),
        Just(WordLayout::VELOS),
        any,
    ]
}

fn state_in(layout: WordLayout) -> impl Strategy<Value = AcceptorState> {
    (
        0..=layout.max_tag(),
        0..=layout.max_proposal(),
        0..=layout.max_proposal(),
        0..=layout.max_proposers(),
        0..=layout.max_previous(),
    )
        .prop_map(|(tag, min, accepted, value, previous)| AcceptorState {
            tag: tag as u16,
            min_proposal: min,
            accepted_proposal: accepted,
            accepted_value: value as u16,
            previous_decision: previous as u8,
        })
}

/// `state` with every field cut to `layout`'s widths.
fn clamp(layout: WordLayout, s: AcceptorState) -> AcceptorState {
    AcceptorState {
        tag: s.tag.min(layout.max_tag() as u16),
        min_proposal: s.min_proposal.min(layout.max_proposal()),
        accepted_proposal: s.accepted_proposal.min(layout.max_proposal()),
        accepted_value: s.accepted_value.min(layout.max_proposers() as u16),
        previous_decision: s.previous_decision.min(layout.max_previous() as u8),
    }
}

fn is_frozen(layout: WordLayout, s: AcceptorState) -> bool {
    s.min_proposal == layout.max_proposal()
}

proptest! {
    #[test]
    fn in_range_states_round_trip(
        (layout, state) in layout().prop_flat_map(|l| (Just(l), state_in(l))),
        word: u64,
    ) {
        let w = layout.encode(state);
        prop_assert!(w.is_ok(), "{:?} fits {:?}", state, layout);
        prop_assert_eq!(layout.decode(w.unwrap()), state);
        // And every word is some state's.
        prop_assert_eq!(layout.encode(layout.decode(word)), Ok(word));
    }

    #[test]
    fn shipped_layouts_round_trip(which in 0usize..3, seed in any::<[u64; 5]>()) {
        let layout = SHIPPED[which];
        let state = AcceptorState {
            tag: (seed[0] % (layout.max_tag() + 1)) as u16,
            min_proposal: seed[1] % (layout.max_proposal() + 1),
            accepted_proposal: seed[2] % (layout.max_proposal() + 1),
            accepted_value: (seed[3] % (layout.max_proposers() + 1)) as u16,
            previous_decision: (seed[4] % (layout.max_previous() + 1)) as u8,
        };
        prop_assert_eq!(layout.decode(layout.encode(state).unwrap()), state);
    }

    #[test]
    fn out_of_range_fields_are_refused(
        (layout, state) in layout().prop_flat_map(|l| (Just(l), state_in(l))),
        field in 0usize..5,
        excess: u64,
    ) {
        // Field `field` gets a value above its width, when its Rust type can hold one.
        let (name, bits, max, type_max) = match field {
            0 => ("tag", layout.tag_bits, layout.max_tag(), u64::from(u16::MAX)),
            1 => ("min_proposal", layout.proposal_bits, layout.max_proposal(), u64::MAX),
            2 => ("accepted_proposal", layout.proposal_bits, layout.max_proposal(), u64::MAX),
            3 => ("accepted_value", layout.value_bits, layout.max_proposers(), u64::from(u16::MAX)),
            _ => ("previous_decision", layout.previous_bits, layout.max_previous(), u64::from(u8::MAX)),
        };
        if max == type_max {
            return Ok(()); // the field's full width: nothing out of range to write
        }
        let value = max + 1 + excess % (type_max - max);
        let mut bad = state;
        match field {
            0 => bad.tag = value as u16,
            1 => bad.min_proposal = value,
            2 => bad.accepted_proposal = value,
            3 => bad.accepted_value = value as u16,
            _ => bad.previous_decision = value as u8,
        }
        prop_assert_eq!(
            layout.encode(bad),
            Err(FieldOverflow { field: name, value, bits }),
            "never a truncated word"
        );
    }

    #[test]
    fn earlier_laps_read_as_initial_and_later_laps_as_retired(
        layout in prop_oneof![Just(WordLayout::VELOS), Just(WordLayout::TAGGED), Just(WordLayout::new(2, 24, 11, 3))],
        slots in 1u32..64,
        instance in 0u64..1_000_000,
        laps in 1u64..1_000,
        state in state_in(WordLayout::VELOS),
    ) {
        let r = Ring::new(slots, layout);
        let s = u64::from(slots);
        let half = 1u64 << (layout.tag_bits - 1);
        let laps = 1 + (laps - 1) % half; // 1..=half
        let with_tag = |tag: u16| {
            layout.encode(AcceptorState { tag, ..clamp(layout, state) }).expect("fits")
        };
        // A word of the same instance: its own state.
        let own = with_tag(r.tag(instance));
        prop_assert_eq!(r.classify(layout, instance, own), Lap::Current(layout.decode(own)));
        // Lemma (recycling): a word `laps` laps back at the same position.
        if let Some(old) = instance.checked_sub(laps * s) {
            prop_assert_eq!(r.position(old), r.position(instance));
            let w = with_tag(r.tag(old));
            prop_assert_eq!(r.classify(layout, instance, w), Lap::Previous, "lemma (recycling)");
            prop_assert_eq!(r.state(layout, instance, w), Some(AcceptorState::initial(r.tag(instance))));
        }
        // Lemma (overtaken): a word less than half the tag space ahead.
        if laps < half {
            let later = instance + laps * s;
            let w = with_tag(r.tag(later));
            prop_assert_eq!(r.classify(layout, instance, w), Lap::Later, "lemma (overtaken)");
            prop_assert_eq!(r.state(layout, instance, w), None);
        }
        // Lap 0 has nothing before it: any other tag is not ⊥ there.
        if r.first_lap(instance) && r.tag(instance + laps * s) != r.tag(instance) {
            prop_assert_eq!(r.classify(layout, instance, with_tag(r.tag(instance + laps * s))), Lap::Later);
        }
    }
}

// ---- Transitions by CAS against a reference struct ----

#[derive(Clone, Copy, Debug)]
enum Kind {
    /// PREPARE(min + delta) by proposer p.
    Prepare,
    /// ACCEPT(min + delta − 3) by proposer p.
    Accept,
    /// Freeze (prepare with proposal ∞).
    Freeze,
}

#[derive(Clone, Copy, Debug)]
struct Step {
    kind: Kind,
    proposer: u16,
    delta: u64,
    previous: u8,
    /// How many history entries back the prediction is (0: the current word).
    stale: usize,
}

fn step() -> impl Strategy<Value = Step> {
    (
        prop_oneof![4 => Just(Kind::Prepare), 4 => Just(Kind::Accept), 1 => Just(Kind::Freeze)],
        0u16..3,
        0u64..12,
        0u8..8,
        prop_oneof![3 => Just(0usize), 1 => 0usize..5],
    )
        .prop_map(|(kind, proposer, delta, previous, stale)| Step {
            kind,
            proposer,
            delta,
            previous,
            stale,
        })
}

/// The reference: an acceptor's state as Paxos sees it, plus whether the instance's first
/// CAS landed (before it, the word is the previous lap's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ModelAcceptor {
    min_proposal: u64,
    accepted_proposal: u64,
    accepted_value: u16,
    previous_decision: u8,
    touched: bool,
}

proptest! {
    #[test]
    fn transitions_by_cas_keep_word_and_model_equal(
        which in 0usize..3,
        slots in 1u32..8,
        instance in 0u64..100,
        old_state in state_in(WordLayout::VELOS),
        steps in prop::collection::vec(step(), 1..80),
        near_threshold: bool,
    ) {
        let layout = SHIPPED[which];
        let r = Ring::new(slots, layout);
        let instance = if r.recycles() { instance } else { instance % u64::from(slots) };
        let tag = r.tag(instance);
        let numbering = Numbering { proposers: 3 };
        let threshold = layout.max_proposal() - 3; // SlotConfig::overflow_threshold
        // The word at the position: a previous lap's (recycled) or the initial word.
        let initial = if r.recycled(instance) {
            let back = (u64::from(tag) + layout.max_tag()) & layout.max_tag(); // one lap back
            layout.encode(AcceptorState { tag: back as u16, ..clamp(layout, old_state) }).unwrap()
        } else {
            layout.encode(AcceptorState::initial(tag)).unwrap()
        };
        let mut word = initial;
        let mut model = ModelAcceptor {
            min_proposal: 0, accepted_proposal: 0, accepted_value: 0, previous_decision: 0, touched: false,
        };
        // Every word the position held, with the model's state then.
        let mut history = vec![(word, model)];
        // Proposal numbers start near the threshold in some runs, so freezing and overflow
        // both happen.
        let base = if near_threshold { threshold - 20 } else { 0 };
        for st in steps {
            let k = history.len() - 1 - st.stale.min(history.len() - 1);
            let (expected, predicted_model) = history[k];
            let me = ProposerId(st.proposer);
            let predicted = r.state(layout, instance, expected).expect("no later lap here");
            // Proposer side: build the CAS from the prediction, as the slot does.
            let from = predicted.min_proposal.max(base);
            let (desired, model_next): (Option<AcceptorState>, Option<ModelAcceptor>) = match st.kind {
                Kind::Prepare => {
                    let n = numbering.next_above(me, from + st.delta);
                    let ok = n <= threshold && n > predicted.min_proposal;
                    let m_ok = n <= threshold && n > predicted_model.min_proposal;
                    prop_assert_eq!(ok, m_ok);
                    (ok.then_some(AcceptorState { min_proposal: n, ..predicted }),
                     m_ok.then_some(ModelAcceptor { min_proposal: n, touched: true, ..predicted_model }))
                }
                Kind::Accept => {
                    let n = numbering.next_above(me, (from + st.delta).saturating_sub(4));
                    let ok = n <= threshold && n >= predicted.min_proposal;
                    let m_ok = n <= threshold && n >= predicted_model.min_proposal;
                    prop_assert_eq!(ok, m_ok);
                    let prev = st.previous.min(layout.max_previous() as u8);
                    (ok.then_some(AcceptorState {
                        min_proposal: n, accepted_proposal: n, accepted_value: me.value_tag(),
                        previous_decision: prev, ..predicted
                    }),
                     m_ok.then_some(ModelAcceptor {
                        min_proposal: n, accepted_proposal: n, accepted_value: me.value_tag(),
                        previous_decision: prev, touched: true,
                    }))
                }
                Kind::Freeze => {
                    let w = layout.encode(predicted).unwrap();
                    let frozen = Freezer::frozen(layout, w);
                    (Some(layout.decode(frozen)),
                     Some(ModelAcceptor { min_proposal: layout.max_proposal(), touched: true, ..predicted_model }))
                }
            };
            let before = (word, model);
            if let (Some(desired), Some(next)) = (desired, model_next) {
                let desired = layout.encode(desired).expect("in range");
                // The remote CAS, and the model's: it lands iff the prediction is the
                // current state of this instance.
                let landed = word == expected;
                let m_landed = predicted_model == model;
                prop_assert_eq!(landed, m_landed, "CAS from {:#x} on {:#x}", expected, word);
                if landed {
                    word = desired;
                    model = next;
                    history.push((word, model));
                }
            }
            // The word and the model agree.
            let s = r.state(layout, instance, word).expect("this instance's word");
            prop_assert_eq!(
                (s.tag, s.min_proposal, s.accepted_proposal, s.accepted_value, s.previous_decision),
                (tag, model.min_proposal, model.accepted_proposal, model.accepted_value, model.previous_decision)
            );
            prop_assert_eq!(model.touched, history.len() > 1);
            // Invariants.
            let old = r.state(layout, instance, before.0).unwrap();
            prop_assert!(s.min_proposal >= old.min_proposal, "min_proposal never decreases");
            prop_assert!(s.accepted_proposal <= s.min_proposal, "accepted ≤ min");
            prop_assert_eq!(s.has_accepted(), s.accepted_proposal > 0);
            if is_frozen(layout, old) {
                prop_assert!(Freezer::is_frozen(layout, word));
                prop_assert_eq!(word, before.0, "rule (Freeze): a frozen word is final");
            }
        }
    }
}

// ---- The real slot proposers and freezer against three acceptor words ----

#[derive(Clone, Copy, Debug)]
enum Action {
    /// Deliver the oldest operation proposer `p` posted towards acceptor `a` (p = 3: the
    /// freezer).
    Deliver { p: usize, a: usize },
    /// Proposer p (re)starts a prepare if idle or aborted.
    Prepare { p: usize },
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        12 => (0usize..4, 0usize..3).prop_map(|(p, a)| Action::Deliver { p, a }),
        3 => (0usize..3).prop_map(|p| Action::Prepare { p }),
    ]
}

/// Whether `from → to` is one of the transitions Paxos allows an acceptor.
fn paxos_transition(layout: WordLayout, from: AcceptorState, to: AcceptorState) -> bool {
    let prepare = to.min_proposal > from.min_proposal
        && AcceptorState {
            min_proposal: from.min_proposal,
            ..to
        } == from;
    let accept = to.min_proposal >= from.min_proposal
        && to.min_proposal == to.accepted_proposal
        && to.accepted_value != 0
        && to.tag == from.tag;
    let freeze = to.min_proposal == layout.max_proposal()
        && AcceptorState {
            min_proposal: from.min_proposal,
            ..to
        } == from;
    prepare || accept || freeze
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(20_000))]
    #[test]
    fn slot_proposers_change_words_only_by_paxos_transitions(
        velos: bool,
        proposers in 2u16..4,
        near_threshold: bool,
        actions in prop::collection::vec(action(), 1..200),
        freeze_at in prop::option::of(0usize..250),
    ) {
        let layout = if velos { WordLayout::VELOS } else { WordLayout::PAPER };
        let cfg = |me: u16| SlotConfig {
            layout,
            acceptors: 3,
            members: SlotConfig::all(3),
            absent: 0,
            numbering: Numbering { proposers },
            me: ProposerId(me),
            tag: 0,
            recycled: false,
            mutation: Mutation::None,
        };
        // Start a few proposal numbers short of the threshold in some runs.
        let floor = if near_threshold { cfg(0).overflow_threshold() - 8 } else { 0 };
        let mut words = vec![layout.encode(AcceptorState::initial(0)).unwrap(); 3];
        // Value buffers: (acceptor, proposer) → (value, stamp).
        let mut buffers: BTreeMap<(usize, u16), (u64, u64)> = BTreeMap::new();
        let np = usize::from(proposers);
        let mut slots: Vec<SlotProposer> = (0..proposers).map(|p| SlotProposer::fresh(cfg(p))).collect();
        let mut adopted: Vec<Option<u64>> = vec![None; np];
        // Per proposer (and the freezer, index 3), per acceptor: the queue pair.
        let mut qps: Vec<Vec<VecDeque<SlotCommand>>> = vec![vec![VecDeque::new(); 3]; 4];
        let mut freezer: Option<Freezer> = None;
        let mut decided: Option<(u64, u64)> = None; // (value, proposal)
        let mut carried: Option<Carry> = None;
        let post = |qps: &mut Vec<Vec<VecDeque<SlotCommand>>>, p: usize, out: Vec<SlotCommand>| {
            for c in out {
                let a = match c {
                    SlotCommand::Cas { acceptor, .. }
                    | SlotCommand::WriteValue { acceptor, .. }
                    | SlotCommand::ReadValue { acceptor, .. } => usize::from(acceptor),
                };
                qps[p][a].push_back(c);
            }
        };
        for (step, action) in actions.into_iter().enumerate() {
            let before = words.clone();
            if freeze_at == Some(step) {
                // The overflow fallback starts, from the words as they are now.
                let mut out = Vec::new();
                freezer = Some(Freezer::start(layout, &words, &mut out));
                post(&mut qps, 3, out);
            }
            match action {
                Action::Prepare { p } => {
                    let p = p % np;
                    let mut out = Vec::new();
                    if slots[p].outcome() == Outcome::Aborted
                        || (slots[p].outcome() == Outcome::Pending && slots[p].proposal() == 0)
                    {
                        slots[p].prepare_above(floor, &mut out);
                    }
                    post(&mut qps, p, out);
                }
                Action::Deliver { p, a } => {
                    let p = if p == 3 { 3 } else { p % np };
                    let Some(cmd) = qps[p][a].pop_front() else {
                        continue;
                    };
                    let mut out = Vec::new();
                    match cmd {
                        SlotCommand::Cas { id, expected, desired, .. } => {
                            let actual = words[a];
                            if actual == expected {
                                let (from, to) = (layout.decode(expected), layout.decode(desired));
                                prop_assert!(
                                    paxos_transition(layout, from, to),
                                    "a CAS only makes a Paxos transition: {} → {}", from, to
                                );
                                words[a] = desired;
                            }
                            if p == 3 {
                                freezer.as_mut().unwrap().on_cas(a as u16, id, actual, &mut out);
                            } else {
                                slots[p].on_cas(a as u16, id, actual, &[], &mut out);
                            }
                        }
                        SlotCommand::WriteValue { content, proposal, .. } => {
                            let value = match content {
                                Content::Mine => 100 + p as u64,
                                Content::Adopted => adopted[p].expect("adopted before written"),
                            };
                            buffers.insert((a, p as u16), (value, proposal));
                        }
                        SlotCommand::ReadValue { proposer, proposal, .. } => {
                            let got = buffers.get(&(a, proposer.0)).copied();
                            let ok = got.is_some_and(|(_, stamp)| stamp >= proposal);
                            if ok {
                                adopted[p] = got.map(|(v, _)| v);
                            }
                            slots[p].on_value_read(ok, &[], &mut out);
                        }
                    }
                    post(&mut qps, p, out);
                }
            }
            for (p, slot) in slots.iter().enumerate() {
                if let Outcome::Decided { proposal, content } = slot.outcome() {
                    let value = match content {
                        Content::Mine => 100 + p as u64,
                        Content::Adopted => adopted[p].unwrap(),
                    };
                    if let Some((v, _)) = decided {
                        prop_assert_eq!(v, value, "agreement: one decided value");
                    } else {
                        decided = Some((value, proposal));
                    }
                }
            }
            if carried.is_none() {
                carried = freezer.as_ref().and_then(Freezer::outcome);
            }
            for a in 0..3 {
                let (old, new) = (layout.decode(before[a]), layout.decode(words[a]));
                prop_assert!(new.min_proposal >= old.min_proposal, "min_proposal never decreases");
                prop_assert!(new.accepted_proposal <= new.min_proposal, "accepted ≤ min");
                if Freezer::is_frozen(layout, before[a]) {
                    prop_assert_eq!(before[a], words[a], "rule (Freeze): a frozen word is final");
                }
            }
        }
        // Lemma (carry): a frozen majority carries the value decided in the epoch.
        if let (Some((value, proposal)), Some(carry)) = (decided, carried) {
            match carry {
                Carry::Read { acceptor, proposer, proposal: b } => {
                    prop_assert!(b >= proposal, "lemma (carry): the carried pair is at least the decided one");
                    let (v, stamp) = buffers[&(usize::from(acceptor), proposer.0)];
                    prop_assert!(stamp >= b);
                    prop_assert_eq!(v, value, "lemma (carry)");
                }
                Carry::Nothing => prop_assert!(false, "lemma (carry): {} was decided, nothing carried", value),
            }
        }
    }
}
