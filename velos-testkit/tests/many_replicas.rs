//! A log of many replicas with nothing failing keeps its first leader. A turn's work grows
//! with the replicas (a leader posts a CAS and a put to every acceptor for every slot of
//! its window: about 28 µs of posts with 21 replicas), and rules timed on the local clock
//! at turn granularity took the replica's own long turns for others' failures: peers
//! suspected when the reader tested its reads late, reads judged slow by the reader's own
//! turn length, a stall judged before a single completion was tested. The leadership
//! flapped from 15 replicas on with nothing failing, and at 31 two of 172 values were
//! decided in 2 ms. Rules (Ω-evidence), (able leader) on evidence and (deciding leader)
//! over turns answer it (`velos_core`'s `log/omega.rs`, `log/replica/passing.rs`); without
//! rule (Ω-evidence) alone, 21 replicas change leader 46 times in 2 ms.
//!
//! Every size from 3 to 31 (the most the tool accepts): exactly one leader change (the
//! first election), and the log decides throughout (at least one entry in every 100 µs
//! after the first 100).

use velos_core::log::LogConfig;
use velos_testkit::harness::cluster::{ClusterSpec, run};
use velos_testkit::harness::script::ClientScript;

const DURATION_NS: u64 = 1_000_000;
const BUCKET_NS: u64 = 100_000;

#[test]
fn with_nothing_failing_the_first_leader_keeps_the_lead_at_every_size() {
    for replicas in [3u16, 5, 9, 15, 21, 31] {
        for seed in 1..2 {
            let client = ClientScript {
                count: 1_000_000,
                size: 16,
            };
            let spec = ClusterSpec::new(
                LogConfig::new(replicas, 4096, 16),
                seed,
                DURATION_NS,
                client,
            );
            let again = format!(
                "cargo run --release -- sim --replicas {replicas} --seed {seed} --duration 1ms \
                 --slots 4096 --value-size 16 --values 1000000"
            );
            let report = run(&spec);
            assert!(report.ok(), "{again}: {:?}", report.failures);
            let changes: Vec<(u16, u64)> = report
                .leader_changes
                .iter()
                .map(|c| (c.leader, c.at_ns))
                .collect();
            assert_eq!(
                changes.len(),
                1,
                "{again}: the first leader keeps the lead with nothing failing: {changes:?}"
            );
            let leader = report
                .replicas
                .iter()
                .find(|r| r.id == changes[0].0)
                .expect("the leader's report");
            let mut per_bucket = vec![0u64; (DURATION_NS / BUCKET_NS) as usize];
            for &at in &leader.applied_at {
                let b = ((at / BUCKET_NS) as usize).min(per_bucket.len() - 1);
                per_bucket[b] += 1;
            }
            println!("{replicas} replicas, seed {seed}: entries per 100 µs {per_bucket:?}");
            assert!(
                per_bucket[1..].iter().all(|&n| n > 0),
                "{again}: premise, the log decides throughout: {per_bucket:?}"
            );
        }
    }
}
