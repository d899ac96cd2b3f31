//! The campaign has teeth: each deliberately wrong protocol variant of velos-core's
//! `mutations` feature (the unit tests build it) breaks a safety property on some seed of
//! the first eight hundred — the numbers below are the first such seeds, pinned so that a
//! change of the campaign that weakens it shows up.

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

    #[test]
    fn every_mutant_is_caught_within_a_few_hundred_seeds() {
        // (mutant, near-overflow starts, first seed that catches it)
        let expected = [
            ("skip-adoption", false, 0),
            ("accept-without-majority", false, 555),
            ("reuse-proposal", false, 1),
            ("drop-carry", true, 21),
            ("read-without-lease", false, 2),
            ("trust-prediction", false, 1),
            ("reset-with-store", false, 7),
            ("learn-from-one", false, 674),
            ("skip-fallback", true, 6),
        ];
        let names: Vec<&str> = Mutation::ALL.iter().map(|m| m.name()).collect();
        assert_eq!(
            names.len(),
            expected.len(),
            "every mutant is listed: {names:?}"
        );
        for (name, overflow, seed) in expected {
            let mutation = Mutation::from_name(name).expect("built with the mutations");
            assert_eq!(
                first_caught(mutation, overflow, 800),
                Some(seed),
                "{name}: the first seed that catches it"
            );
        }
    }
}
