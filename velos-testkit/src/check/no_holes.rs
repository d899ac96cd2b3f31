//! No holes — lemma (no holes): a replica applies slots 0, 1, 2, … in order, without
//! skipping one, except that it continues at a copied snapshot's point.

use super::logs::AppliedLog;

/// One line per entry that is not the slot after the previous one (nor a snapshot's
/// point beyond it).
pub fn no_holes(logs: &[AppliedLog]) -> Vec<String> {
    let mut failures = Vec::new();
    for log in logs {
        let mut next = 0;
        for (i, (slot, _)) in log.entries.iter().enumerate() {
            let jumped = log.jumps.iter().any(|&p| p == *slot && p > next);
            if *slot != next && !jumped {
                failures.push(format!(
                    "replica {}: entry {i} is slot {slot}, not {next}",
                    log.replica
                ));
            }
            next = slot + 1;
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_slots_and_snapshot_jumps_pass_and_a_gap_is_found() {
        let ok = AppliedLog::sequential(0, &["01", "02"]);
        assert!(no_holes(&[ok]).is_empty());
        let jumped = AppliedLog {
            replica: 1,
            entries: vec![(0, "01".into()), (5, "02".into()), (6, "".into())],
            jumps: vec![5],
        };
        assert!(no_holes(&[jumped]).is_empty());
        let gap = AppliedLog {
            replica: 2,
            entries: vec![(0, "01".into()), (2, "02".into())],
            jumps: Vec::new(),
        };
        assert_eq!(no_holes(&[gap]), ["replica 2: entry 1 is slot 2, not 1"]);
    }
}
