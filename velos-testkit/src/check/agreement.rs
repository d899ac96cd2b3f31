//! Agreement — lemma (agreement): no two replicas apply different values in one slot.

use super::logs::AppliedLog;
use std::collections::BTreeMap;

/// One line per slot two replicas applied differently.
pub fn agreement(logs: &[AppliedLog]) -> Vec<String> {
    let mut decided: BTreeMap<u64, (&str, u16)> = BTreeMap::new();
    let mut failures = Vec::new();
    for log in logs {
        for (slot, value) in &log.entries {
            match decided.get(slot) {
                Some(&(v, other)) if v != value => failures.push(format!(
                    "slot {slot}: replica {other} applied {v}, replica {} applied {value}",
                    log.replica
                )),
                Some(_) => {}
                None => {
                    decided.insert(*slot, (value, log.replica));
                }
            }
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_that_apply_the_same_values_agree_and_a_different_value_is_found() {
        let a = AppliedLog::sequential(0, &["01", "", "02"]);
        let b = AppliedLog::sequential(1, &["01", ""]);
        assert!(agreement(&[a.clone(), b]).is_empty());
        let c = AppliedLog::sequential(2, &["01", "03"]);
        let found = agreement(&[a, c]);
        assert_eq!(found, ["slot 1: replica 0 applied , replica 2 applied 03"]);
    }
}
