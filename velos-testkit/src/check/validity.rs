//! Validity — lemma (validity): every value applied was proposed by a client (an empty
//! entry is a leader's no-op or a configuration entry).

use super::logs::AppliedLog;
use std::collections::BTreeSet;

/// One line per applied value nobody proposed.
pub fn validity(logs: &[AppliedLog], proposed: &BTreeSet<&str>) -> Vec<String> {
    let mut failures = Vec::new();
    for log in logs {
        for (slot, value) in &log.entries {
            if !value.is_empty() && !proposed.contains(value.as_str()) {
                failures.push(format!(
                    "replica {}: slot {slot} = {value}, never proposed",
                    log.replica
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
    fn proposed_values_and_no_ops_are_valid_and_an_invented_value_is_found() {
        let proposed = BTreeSet::from(["01", "02"]);
        let ok = AppliedLog::sequential(0, &["02", "", "01"]);
        assert!(validity(&[ok], &proposed).is_empty());
        let bad = AppliedLog::sequential(1, &["01", "ff"]);
        assert_eq!(
            validity(&[bad], &proposed),
            ["replica 1: slot 1 = ff, never proposed"]
        );
    }
}
