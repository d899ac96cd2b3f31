//! Rule (fresh term): a term's ballots are above every ballot of the replica's earlier
//! terms, whatever its predictions show.

use super::{Leader, SlotAt};
use crate::log::config::LogConfig;
use crate::log::membership::{Members, Membership};
use crate::slot::SlotCommand;

/// The prepare proposals of the slots `leader` opens, its predictions all ⊥.
fn opened(leader: &mut Leader, config: &LogConfig) -> Vec<u64> {
    let mut out: Vec<(SlotAt, SlotCommand)> = Vec::new();
    leader.open_slots(config, u64::MAX, |_| None, &mut out);
    out.iter()
        .filter_map(|(_, cmd)| match *cmd {
            SlotCommand::Cas { desired, .. } => Some(config.layout.decode(desired).min_proposal),
            _ => None,
        })
        .collect()
}

#[test]
fn a_new_term_prepares_above_every_ballot_of_the_earlier_one() {
    let config = LogConfig::new(3, 64, 16);
    let membership = Membership::new(Members::all(3), 3);
    let mut first = Leader::new(0, 1, 0, vec![0; 2], membership.clone());
    let old = opened(&mut first, &config);
    assert!(!old.is_empty(), "the window opens with prepares");
    let b = first.ballots[0];
    assert!(
        old.iter().all(|&p| p == b),
        "one ballot for the window: {old:?}"
    );
    // Term 2 of the same replica, its predictions ⊥ again (its own words not yet showing
    // the old term's CASes, which are still in flight).
    let mut second = Leader::new(0, 2, 0, first.ballots.clone(), membership);
    let new = opened(&mut second, &config);
    assert!(!new.is_empty());
    assert!(
        new.iter().all(|&p| p > b),
        "rule (fresh term): term 2 prepares at {new:?}, term 1 used {b}"
    );
}
