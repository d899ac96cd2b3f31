//! Property tests of the slot ring (`velos_core::log::ring`), through its public API only.
//!
//! What they guarantee, for random runs of (advance the applied prefix, publish a
//! replica's snapshot point, open the next log instance) checked step by step against a
//! simple reference model:
//!
//! - `retired` is the largest bound below which a majority of the snapshot points lie
//!   (the model counts replicas directly), and it never decreases while points only grow;
//! - `Ring::room` lets instance i open exactly when its position's previous instance
//!   i − slots is retired (or i is in the first lap; without tags, never past `slots`):
//!   a position is reused only after its previous instance is retired;
//! - `position(i) = i mod slots`, `tag(i) = ⌊i / slots⌋ mod 2^tag_bits`, no two live
//!   (opened, not retired) instances share a position;
//! - tags tell laps apart: at the position of a live instance, the words of its earlier
//!   laps (up to half the tag space back) read as its initial state (lemma (recycling)),
//!   its own words read as themselves, and the words of later laps (less than half the tag
//!   space ahead) read as retired (lemma (overtaken)).
//!
//! Each property runs proptest's default 256 cases (well under a second in release);
//! `PROPTEST_CASES=100000` runs more.

use proptest::prelude::*;
use std::collections::BTreeMap;
use velos_core::log::ring::{self, Ring};
use velos_core::word::Lap;
use velos_core::{AcceptorState, WordLayout};

/// One step of a run.
#[derive(Clone, Debug)]
enum Op {
    /// The leader applies up to `by` more opened instances.
    Apply { by: u64 },
    /// Replica `replica` publishes a snapshot point `back` instances behind the applied
    /// prefix (never below its previous point: points only grow).
    Snapshot { replica: usize, back: u64 },
    /// The leader tries to open the next `count` instances.
    Open { count: u64 },
}

fn op(replicas: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0u64..6).prop_map(|by| Op::Apply { by }),
        3 => (0..replicas, 0u64..4).prop_map(|(replica, back)| Op::Snapshot { replica, back }),
        4 => (1u64..6).prop_map(|count| Op::Open { count }),
    ]
}

/// The layouts the crate ships, and a small-tag one whose tags wrap within a short run.
fn layout() -> impl Strategy<Value = WordLayout> {
    prop_oneof![
        Just(WordLayout::VELOS),
        Just(WordLayout::TAGGED),
        Just(WordLayout::PAPER),
        Just(WordLayout::new(2, 24, 11, 3)),
        Just(WordLayout::new(3, 24, 10, 3)),
    ]
}

/// The reference: the largest b such that more than half of the points are ≥ b.
fn model_retired(points: &[u64]) -> u64 {
    let majority = points.len() / 2 + 1;
    let mut candidates: Vec<u64> = points.to_vec();
    candidates.push(0);
    candidates
        .into_iter()
        .filter(|&b| points.iter().filter(|&&p| p >= b).count() >= majority)
        .max()
        .expect("0 is always covered")
}

/// A word of `instance`'s lap with some accepted state.
fn word_of(layout: WordLayout, r: Ring, instance: u64, proposal: u64) -> u64 {
    let proposal = proposal % layout.max_proposal() + 1;
    layout
        .encode(AcceptorState {
            tag: r.tag(instance),
            min_proposal: proposal,
            accepted_proposal: proposal,
            accepted_value: 1,
            previous_decision: 0,
        })
        .expect("fits")
}

/// The reference model of a run.
#[derive(Debug, Default)]
struct Model {
    /// Instances opened so far: 0..opened.
    opened: u64,
    /// The applied prefix: 0..applied (≤ opened).
    applied: u64,
    /// Every replica's snapshot point (≤ applied).
    points: Vec<u64>,
    /// Position → the instances opened there, in order.
    at: BTreeMap<u32, Vec<u64>>,
}

proptest! {
    #[test]
    fn the_ring_reuses_a_position_only_after_its_instance_retires(
        layout in layout(),
        slots in 1u32..6,
        replicas in 1usize..6,
        ops in (1usize..6).prop_flat_map(|n| prop::collection::vec(op(n), 1..120)),
    ) {
        let r = Ring::new(slots, layout);
        let s = u64::from(slots);
        prop_assert_eq!(r.recycles(), layout.tag_bits >= 2);
        let mut m = Model { points: vec![0; replicas], ..Model::default() };
        let mut last_bound = 0;
        for op in ops {
            match op {
                Op::Apply { by } => m.applied = (m.applied + by).min(m.opened),
                Op::Snapshot { replica, back } => {
                    let replica = replica % replicas;
                    let point = m.applied.saturating_sub(back);
                    m.points[replica] = m.points[replica].max(point);
                }
                Op::Open { count } => {
                    for _ in 0..count {
                        let bound = ring::retired(&m.points);
                        let room = r.room(bound);
                        let i = m.opened;
                        // The model's rule: i opens iff it is in the first lap, or the ring
                        // recycles and i − slots (the position's previous instance) retired.
                        let may = i < s || (r.recycles() && i - s < bound);
                        prop_assert_eq!(i < room, may, "room({}) = {} for instance {}", bound, room, i);
                        if !may {
                            break;
                        }
                        let p = r.position(i);
                        prop_assert_eq!(u64::from(p), i % s, "position = instance mod slots");
                        let lap = i / s;
                        let tag_mask = if layout.tag_bits == 0 { 0 } else { (1u64 << layout.tag_bits) - 1 };
                        prop_assert_eq!(u64::from(r.tag(i)), lap & tag_mask, "tag = lap mod 2^tag_bits");
                        prop_assert_eq!(r.first_lap(i), lap == 0);
                        prop_assert_eq!(r.recycled(i), lap > 0 && r.recycles());
                        let before = m.at.entry(p).or_default();
                        if let Some(&prev) = before.last() {
                            prop_assert_eq!(prev + s, i, "the position's previous instance");
                            prop_assert!(prev < bound, "reused only once {} is retired (bound {})", prev, bound);
                            // Lemma (recycling): the previous instances' words read as ⊥ here.
                            let half = 1u64 << (layout.tag_bits - 1);
                            for &old in before.iter().rev().take(half as usize) {
                                let w = word_of(layout, r, old, old);
                                prop_assert_eq!(r.classify(layout, i, w), Lap::Previous, "lemma (recycling): {} at {}", old, i);
                                prop_assert_eq!(r.state(layout, i, w), Some(AcceptorState::initial(r.tag(i))));
                                // ... and the new instance's words read as retired for them
                                // (lemma (overtaken)), up to half the tag space ahead.
                                if i - old < half * s {
                                    prop_assert_eq!(r.classify(layout, old, word_of(layout, r, i, i)), Lap::Later, "lemma (overtaken)");
                                }
                            }
                        }
                        // Its own words read as themselves.
                        let own = word_of(layout, r, i, i);
                        prop_assert_eq!(r.classify(layout, i, own), Lap::Current(layout.decode(own)));
                        before.push(i);
                        m.opened += 1;
                    }
                }
            }
            // Checked after every step.
            let bound = ring::retired(&m.points);
            prop_assert_eq!(bound, model_retired(&m.points), "majority-th largest point");
            prop_assert!(bound >= last_bound, "retirement never goes back");
            prop_assert!(bound <= m.applied && m.applied <= m.opened);
            last_bound = bound;
            let live: Vec<u64> = (bound..m.opened).collect();
            let mut used = BTreeMap::new();
            for &i in &live {
                if let Some(other) = used.insert(r.position(i), i) {
                    prop_assert!(false, "live instances {} and {} share position {}", other, i, r.position(i));
                }
            }
            // So the ring never holds more than `slots` live instances.
            prop_assert!(live.len() as u64 <= s);
            if !r.recycles() {
                prop_assert!(m.opened <= s, "no ring: the log ends after its slots");
            }
        }
    }

    #[test]
    fn retired_is_the_majority_bound(points in prop::collection::vec(0u64..20, 1..8)) {
        let bound = ring::retired(&points);
        prop_assert_eq!(bound, model_retired(&points));
        let covered = points.iter().filter(|&&p| p >= bound).count();
        prop_assert!(covered > points.len() / 2, "a majority's snapshots include every instance below the bound");
        let above = points.iter().filter(|&&p| p > bound).count();
        prop_assert!(above <= points.len() / 2, "no larger bound is covered by a majority");
    }
}
