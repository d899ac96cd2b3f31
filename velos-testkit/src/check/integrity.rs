//! Integrity — lemma (integrity): a replica applies each slot once, and each value a
//! client proposed once is decided in one slot at most (a leader that proposes its own
//! adopted value again decides it twice; see `velos_core::log::leader`).

use super::logs::AppliedLog;
use std::collections::{BTreeMap, BTreeSet};

/// One line per slot applied twice by a replica and per value decided in two slots.
/// Values are taken to be unique per proposal (empty entries are exempt).
pub fn integrity(logs: &[AppliedLog]) -> Vec<String> {
    let mut failures = Vec::new();
    let mut decided: BTreeMap<u64, &str> = BTreeMap::new();
    for log in logs {
        let mut seen = BTreeSet::new();
        for (slot, value) in &log.entries {
            if !seen.insert(*slot) {
                failures.push(format!(
                    "replica {}: slot {slot} applied twice",
                    log.replica
                ));
            }
            decided.entry(*slot).or_insert(value);
        }
    }
    let mut slot_of: BTreeMap<&str, u64> = BTreeMap::new();
    for (&slot, &value) in &decided {
        if value.is_empty() {
            continue;
        }
        if let Some(first) = slot_of.insert(value, slot) {
            failures.push(format!(
                "{value} decided twice: in slot {first} and slot {slot}"
            ));
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_values_once_each_pass_and_repeats_are_found() {
        let ok = AppliedLog::sequential(0, &["01", "", "", "02"]);
        assert!(integrity(&[ok]).is_empty());
        let twice = AppliedLog::sequential(0, &["01", "02", "01"]);
        assert_eq!(
            integrity(&[twice]),
            ["01 decided twice: in slot 0 and slot 2"]
        );
        let mut again = AppliedLog::sequential(1, &["01"]);
        again.entries.push((0, "01".into()));
        assert_eq!(integrity(&[again]), ["replica 1: slot 0 applied twice"]);
    }
}
