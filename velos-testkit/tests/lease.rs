//! Leader leases on the simulation driver: every 2 µs every replica is asked for a lease
//! read, and every read served is checked against the entries some replica applied before
//! it was asked (a read that misses one is stale). Leaders crash and pause; a paused
//! leader comes back still believing it leads. A failing seed prints the command that
//! replays it. The mutant that answers reads without a lease must be caught.

use velos_core::log::LogConfig;
use velos_core::slot::Mutation;
use velos_testkit::harness::cluster::{ClusterReport, ClusterSpec, run};
use velos_testkit::harness::script::ClientScript;

const LEASE_NS: u64 = 10_000;
const VALUES: u64 = 300;

fn spec(seed: u64, replicas: u16) -> ClusterSpec {
    let mut log = LogConfig::new(replicas, 1024, 16);
    log.lease_ns = LEASE_NS;
    let client = ClientScript {
        count: VALUES,
        size: 16,
    };
    ClusterSpec {
        lease_reads: true,
        ..ClusterSpec::new(log, seed, 1_500_000, client)
    }
}

fn replay(spec: &ClusterSpec) -> String {
    let mut cmd = format!(
        "cargo run --release -- sim --replicas {} --seed {} --duration {} --slots {} \
         --values {VALUES} --lease {LEASE_NS}",
        spec.log.replicas, spec.seed, spec.duration_ns, spec.log.slots
    );
    if let Some(t) = spec.crash_leader_at {
        cmd += &format!(" --crash-leader-at {t}");
    }
    for (n, t, d) in &spec.pauses {
        cmd += &format!(" --pause {n}@{t}+{d}");
    }
    for (n, t, x, d) in &spec.delays {
        cmd += &format!(" --delay {n}@{t}+{d}:{x}");
    }
    if let Some(k) = spec.snapshot_every {
        cmd += &format!(" --snapshot-every {k}");
    }
    cmd
}

fn check(spec: &ClusterSpec) -> ClusterReport {
    let report = run(spec);
    if !report.ok() {
        let shown: Vec<&str> = report.failures.iter().take(5).map(String::as_str).collect();
        panic!(
            "seed {}: {} failures: {}\nreplay: {}",
            spec.seed,
            report.failures.len(),
            shown.join("; "),
            replay(spec)
        );
    }
    report
}

#[test]
fn a_stable_leader_answers_reads_from_its_lease_and_followers_refuse() {
    let report = check(&spec(1, 3));
    let (served, refused) = report.lease_reads;
    assert!(served > 100, "{served} lease reads served");
    assert!(refused > served, "followers refuse ({refused})");
    assert!(
        report
            .replicas
            .iter()
            .all(|r| r.applied.len() as u64 >= VALUES - 8)
    );
}

#[test]
fn a_paused_leader_that_comes_back_serves_no_stale_read() {
    let mut s = spec(1, 3);
    s.pauses = vec![(0, 100_000, 300_000)];
    let report = check(&s);
    assert!(report.lease_reads.0 > 50, "reads served before and after");
    assert!(report.leader_changes.len() >= 2, "1 took over meanwhile");
}

#[test]
fn reads_are_served_again_after_the_leader_crashes() {
    let mut s = spec(2, 3);
    s.crash_leader_at = Some(200_000);
    let report = check(&s);
    assert!(report.lease_reads.0 > 50);
}

#[test]
fn pauses_crashes_and_a_ring_over_many_seeds() {
    for seed in 0..40 {
        let replicas = if seed % 2 == 0 { 3 } else { 5 };
        let mut s = spec(seed, replicas);
        let paused = (seed % u64::from(replicas)) as u16;
        s.draw_pause_and_leader_crash(seed, paused, 50_000 + seed * 9_001);
        if seed % 4 == 1 {
            s.log.slots = 32;
            s.log.max_snapshot_bytes = 8;
            s.snapshot_every = Some(4);
        }
        check(&s);
    }
}

#[test]
fn the_check_catches_a_leader_that_reads_without_a_lease() {
    let mut s = spec(1, 3);
    s.pauses = vec![(0, 100_000, 300_000)];
    assert_the_mutant_is_caught(s);
}

/// Runs `s` with the mutant that reads without a lease: the check must find a stale read.
fn assert_the_mutant_is_caught(mut s: ClusterSpec) {
    s.log.mutation = Mutation::ReadWithoutLease;
    let report = run(&s);
    assert_eq!(
        report.checks.get("lease_reads"),
        Some(&false),
        "seed {}: a stale read is found: {:?}; replay: {}",
        s.seed,
        report.failures.first(),
        replay(&s)
    );
}

/// The lease's "backed for D" wait under a delay fault: every queue pair towards the old
/// leader costs 10 µs more per step for 300 µs from 100 µs — the followers read the
/// leader's heartbeat late, suspect it and elect another while the old leader still runs
/// and serves reads from what it believes its lease. No read anyone serves misses an entry
/// applied before it was asked, and the mutant that reads without a lease is caught in the
/// same runs. (A delay towards both followers instead slows the majority the leader needs
/// but deposes nobody — their reads of the leader are not slowed —: reads are served and
/// none is stale, but it gives the mutant nothing to catch.)
#[test]
fn a_delay_on_the_old_leaders_queue_pairs_serves_no_stale_read() {
    let towards_leader = vec![(0u16, 100_000u64, 10_000u64, 300_000u64)];
    let mut changed = 0;
    for seed in 0..12 {
        let mut s = spec(seed, 3);
        s.delays = towards_leader.clone();
        let report = check(&s);
        assert!(report.lease_reads.0 > 50, "seed {seed}: reads served");
        changed += usize::from(report.leader_changes.len() >= 2);
        assert_the_mutant_is_caught(s);
    }
    assert!(
        changed >= 10,
        "the delay moved the leadership in {changed} of 12 runs"
    );
    let towards_followers = vec![(1, 100_000, 10_000, 300_000), (2, 100_000, 10_000, 300_000)];
    for seed in 0..6 {
        let mut s = spec(seed, 3);
        s.delays = towards_followers.clone();
        let report = check(&s);
        assert!(report.lease_reads.0 > 50, "seed {seed}: reads served");
    }
}

/// The lease-read check states its premise: with leases off (a lease of 0 ns) every read
/// is refused, nothing is checked, and the run fails saying so — it used to pass.
#[test]
fn a_lease_read_check_with_no_read_served_fails() {
    let mut s = spec(1, 3);
    s.log.lease_ns = 0;
    let report = run(&s);
    let (served, refused) = report.lease_reads;
    assert_eq!(served, 0, "leases off: nothing served");
    assert!(refused > 0, "reads were asked: {refused} refused");
    assert!(!report.ok(), "a check that checked nothing does not pass");
    assert!(
        report.failures.iter().any(|f| f.contains("not exercised")),
        "{:?}",
        report.failures
    );
}
