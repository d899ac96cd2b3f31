//! Prefixes — lemma (prefix): the logs replicas applied are prefixes of one another: for
//! two replicas, the entries both applied one by one are the same values in the same
//! order, and the shorter one's applied slots are a prefix of the longer one's.

use super::logs::AppliedLog;
use std::collections::{BTreeMap, BTreeSet};

/// One line per pair of replicas whose logs diverge: up to the last slot both applied,
/// a slot one of them applied and the other did not (and no snapshot it copied covers),
/// or applied differently.
pub fn prefixes(logs: &[AppliedLog]) -> Vec<String> {
    let mut failures = Vec::new();
    let maps: Vec<BTreeMap<u64, &str>> = logs
        .iter()
        .map(|l| l.entries.iter().map(|(s, v)| (*s, v.as_str())).collect())
        .collect();
    let covered = |log: &AppliedLog, slot: u64| log.jumps.iter().any(|&p| slot < p);
    for (a, la) in logs.iter().enumerate() {
        for (b, lb) in logs.iter().enumerate().skip(a + 1) {
            let (ma, mb) = (&maps[a], &maps[b]);
            let (Some(&last_a), Some(&last_b)) = (ma.keys().next_back(), mb.keys().next_back())
            else {
                continue;
            };
            let upto = last_a.min(last_b);
            let slots: BTreeSet<u64> = ma.keys().chain(mb.keys()).copied().collect();
            let diverged =
                slots
                    .range(..=upto)
                    .find(|&&slot| match (ma.get(&slot), mb.get(&slot)) {
                        (Some(x), Some(y)) => x != y,
                        (None, _) => !covered(la, slot),
                        (_, None) => !covered(lb, slot),
                    });
            if let Some(&slot) = diverged {
                let show = |m: &BTreeMap<u64, &str>| {
                    m.get(&slot)
                        .map_or("missing".to_string(), |v| v.to_string())
                };
                failures.push(format!(
                    "replicas {} and {}: slot {slot} is {} at {} and {} at {}",
                    la.replica,
                    lb.replica,
                    show(ma),
                    la.replica,
                    show(mb),
                    lb.replica
                ));
            }
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shorter_log_is_a_prefix_and_a_diverging_or_skipping_one_is_found() {
        let long = AppliedLog::sequential(0, &["01", "02", "03"]);
        let short = AppliedLog::sequential(1, &["01", "02"]);
        assert!(prefixes(&[long.clone(), short]).is_empty());
        let other = AppliedLog::sequential(2, &["01", "04"]);
        assert_eq!(
            prefixes(&[long.clone(), other]),
            ["replicas 0 and 2: slot 1 is 02 at 0 and 04 at 2"]
        );
        // Replica 0 never applied slot 3, though it went on past it; replica 3 did.
        let mut skipping = AppliedLog::sequential(0, &["01", "02", "03", "05", "06"]);
        skipping.entries.remove(3);
        let ahead = AppliedLog::sequential(3, &["01", "02", "03", "05"]);
        assert_eq!(
            prefixes(&[skipping.clone(), ahead.clone()]),
            ["replicas 0 and 3: slot 3 is missing at 0 and 05 at 3"]
        );
        // Unless a snapshot it copied holds slot 3.
        skipping.jumps.push(4);
        assert!(prefixes(&[skipping, ahead]).is_empty());
    }
}
