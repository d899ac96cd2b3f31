//! The campaign has teeth: each deliberately wrong protocol variant of velos-core's
//! `mutations` feature (the unit tests build it) breaks a safety property on some seed of
//! the first eight hundred — the numbers below are the first such seeds, pinned so that a
//! change of the campaign that weakens it shows up. The wrong variant of rule (sticky
//! leader) breaks liveness instead: the commit-gap check (`super::gaps`) or the liveness
//! phase catches it on a seed the algorithm passes.

#[cfg(test)]
mod tests {
    use crate::vopr::{Mutation, is_safety, run_mutant};

    /// The first seed below `bound` whose run with `mutation` violates a safety property.
    fn first_caught(mutation: Mutation, overflow: bool, bound: u64) -> Option<u64> {
        (0..bound).find(|&seed| {
            run_mutant(seed, mutation, overflow)
                .violations
                .iter()
                .any(|v| is_safety(v))
        })
    }

    /// The liveness mutants: each with the first seed that catches it.
    const LIVENESS: [(&str, u64); 1] = [("hand-over", 15)];

    /// The first seed below `bound` whose run with `mutation` fails its liveness phase
    /// while the algorithm's run of the same seed passes (the check's premise: the
    /// mutant, not the seed, stops the log).
    fn first_stalled(mutation: Mutation, bound: u64) -> Option<u64> {
        let stalled = |r: crate::vopr::RunReport| r.violations.iter().any(|v| !is_safety(v));
        (0..bound).find(|&seed| {
            stalled(run_mutant(seed, mutation, false))
                && run_mutant(seed, Mutation::None, false)
                    .violations
                    .is_empty()
        })
    }

    #[test]
    fn the_leadership_rules_wrong_variants_stop_the_log() {
        let found: Vec<(&str, Option<u64>)> = LIVENESS
            .iter()
            .map(|&(name, _)| {
                let mutation = Mutation::from_name(name).expect("built with the mutations");
                (name, first_stalled(mutation, 1_500))
            })
            .collect();
        let pinned: Vec<(&str, Option<u64>)> = LIVENESS
            .iter()
            .map(|&(name, seed)| (name, Some(seed)))
            .collect();
        assert_eq!(
            found, pinned,
            "the first seed that catches each liveness mutant"
        );
    }

    #[test]
    fn every_mutant_is_caught_within_1500_seeds() {
        // (mutant, near-overflow starts, first seed that catches it)
        let expected = [
            ("skip-adoption", false, 0),
            ("accept-without-majority", false, 287),
            ("reuse-proposal", false, 9),
            ("drop-carry", true, 16),
            ("read-without-lease", false, 16),
            ("trust-prediction", false, 0),
            ("reset-with-store", false, 7),
            ("learn-from-one", false, 1197),
            ("skip-fallback", true, 6),
            ("rejoin-blank", false, 141),
            ("trust-promise", false, 2),
        ];
        let names: Vec<&str> = Mutation::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(
            names.len(),
            expected.len() + LIVENESS.len(),
            "every mutant is listed: {names:?}"
        );
        // Every mutant's first seed, then one comparison: a change shows all that moved.
        let found: Vec<(&str, Option<u64>)> = expected
            .iter()
            .map(|&(name, overflow, _)| {
                let mutation = Mutation::from_name(name).expect("built with the mutations");
                (name, first_caught(mutation, overflow, 1_500))
            })
            .collect();
        let pinned: Vec<(&str, Option<u64>)> = expected
            .iter()
            .map(|&(name, _, seed)| (name, Some(seed)))
            .collect();
        assert_eq!(found, pinned, "the first seed that catches each mutant");
    }
}
