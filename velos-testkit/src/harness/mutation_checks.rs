//! The checks have teeth: each deliberately wrong variant of Algorithm 5 (velos-core's
//! `mutations` feature) lets two racing proposers decide different values. The runs are
//! seeded simulations of the exhaustive checks' configuration (2 proposers, 3 acceptors,
//! 1 slot, a retry after an abort), judged by the same agreement/validity check; a few
//! hundred seeds find each violation.

#[cfg(test)]
mod tests {
    use crate::harness::consensus_checks::{CheckConfig, machine, violation};
    use velos_core::slot::Mutation;
    use velos_sim::latency::LatencyModel;
    use velos_sim::simulate::{SimConfig, Simulator};

    const SEEDS: u64 = 2_000;

    /// The first seed whose run breaks agreement or validity, with what broke.
    fn first_violation(mutation: Mutation) -> Option<(u64, String)> {
        let config = CheckConfig {
            slots: 1,
            max_attempts: 6,
            proposers: 2,
            crashed: None,
            max_states: 0,
            mutation,
        };
        (0..SEEDS).find_map(|seed| {
            let mut sim = Simulator::new(
                machine(&config),
                SimConfig::new(seed, LatencyModel::generic()),
            );
            sim.run(u64::MAX, 100_000);
            violation(sim.machine(), config.proposers).map(|v| (seed, v))
        })
    }

    #[test]
    fn the_correct_proposer_never_breaks_agreement_on_these_seeds() {
        assert_eq!(first_violation(Mutation::None), None);
    }

    #[test]
    fn each_mutation_breaks_agreement() {
        for mutation in [
            Mutation::SkipAdoption,
            Mutation::AcceptWithoutMajority,
            Mutation::ReuseProposal,
        ] {
            match first_violation(mutation) {
                Some((seed, v)) => eprintln!("{mutation:?}: seed {seed}: {v}"),
                None => panic!("{mutation:?}: no violation in {SEEDS} seeds"),
            }
        }
    }
}
