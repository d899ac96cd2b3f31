//! A leader that looks alive but decides nothing is passed over, and the healthy majority
//! keeps deciding at its rate (rules (deciding leader) and (able leader), `velos_core`'s
//! `log/replica/passing.rs`).
//!
//! The class: a replica's own queue pairs crawl — every step of every operation it posts
//! costs 20 µs more, or a second (`velos_sim`'s `Fault::DelayFrom`) — while the others
//! reach its memory at full speed, so they read its heartbeat as fresh as ever and would
//! trust it for good. The replica slowed is the leader at the fault's start; in a control
//! case, a follower. Three and five replicas, a ring that recycles (snapshots every 64
//! entries), the fault lasting to the end of the run.
//!
//! Premises, per run: the replica slowed led (or followed) at the fault's start, proposals
//! waited all along (every leader proposes without pause), and decisions were counted
//! before the fault. Checks: after two failure timeouts and a takeover (four failure
//! timeouts from the fault's start), the log never stops for longer than two failure
//! timeouts, and it decides at least 80 % as many slots a millisecond as before the
//! fault. On the engine before the rules, the log stopped for good at the fault's
//! start in every leader case (`velos sim --delay-from 0@100us+100us:3600s`).
//! Run with `--nocapture` for each run's numbers.

use velos_core::log::LogConfig;
use velos_rdma::NodeId;
use velos_sim::simulate::{Fault, Simulator};
use velos_testkit::harness::cluster::most_applied as harness_most_applied;
use velos_testkit::harness::cluster::{ClusterSpec, Services, machine, sim_config};
use velos_testkit::harness::script::Scripted;

/// When the fault starts (ns).
const AT_NS: u64 = 300_000;

/// How long the run goes on after it (ns).
const AFTER_NS: u64 = 1_200_000;

/// Where the stretch measured before the fault starts (ns): the first leader's term
/// has begun.
const BEFORE_FROM_NS: u64 = 100_000;

/// Step of the driver (ns): the resolution of the gaps measured.
const STEP_NS: u64 = 1_000;

fn spec(replicas: u16, seed: u64) -> ClusterSpec {
    ClusterSpec::busy_ring(replicas, LogConfig::new(replicas, 256, 16).pipeline, seed)
}

fn most_applied(sim: &Simulator<Scripted>, except: u16) -> u64 {
    harness_most_applied(sim, Some(except))
}

/// One run's numbers.
#[derive(Debug)]
struct Run {
    /// Slots decided per ms from [`BEFORE_FROM_NS`] to the fault's start.
    before: u64,
    /// Slots decided per ms from four failure timeouts after the fault's start to the end.
    after: u64,
    /// The longest time without a commit in that stretch (ns).
    gap: u64,
}

/// Slows the queue pairs of the leader (`leader`), else of a follower, from [`AT_NS`] on.
fn run(replicas: u16, seed: u64, extra_ns: u64, leader: bool) -> Run {
    let spec = spec(replicas, seed);
    let timeout = spec.log.failure_timeout_ns;
    let mut sim = Simulator::new(machine(&spec), sim_config(&spec));
    let mut services = Services::new(&spec);
    let settled = AT_NS + 4 * timeout;
    services.run(&mut sim, BEFORE_FROM_NS);
    let start = most_applied(&sim, u16::MAX);
    services.run(&mut sim, AT_NS);
    let m = sim.machine();
    let leads = |t: &&velos_sim::machine::ThreadState<Scripted>| t.process.is_leader();
    let led = m.threads.iter().find(leads).map(|t| t.process.id());
    let led = led.expect("premise: a replica leads at the fault's start");
    let slowed = match leader {
        true => led,
        false => (led + 1) % replicas,
    };
    let before = (most_applied(&sim, u16::MAX) - start) * 1_000_000 / (AT_NS - BEFORE_FROM_NS);
    sim.inject(Fault::DelayFrom {
        node: NodeId(slowed),
        extra_ns,
        duration_ns: AFTER_NS,
    });
    services.run(&mut sim, settled);
    let from = most_applied(&sim, slowed);
    let end = AT_NS + AFTER_NS;
    let (gap, last) = services.longest_gap(&mut sim, (from, settled), (end, STEP_NS), |sim| {
        most_applied(sim, slowed)
    });
    Run {
        before,
        after: (last - from) * 1_000_000 / (end - settled),
        gap,
    }
}

#[test]
fn a_slow_sender_does_not_stop_the_log_whether_it_leads_or_follows() {
    for replicas in [3, 5] {
        for seed in 0..3u64 {
            for extra_ns in [20_000, 1_000_000_000] {
                for leader in [true, false] {
                    let r = run(replicas, seed, extra_ns, leader);
                    let what = format!(
                        "{replicas} replicas, seed {seed}, {extra_ns} ns a step, the {} slowed",
                        if leader { "leader" } else { "follower" }
                    );
                    println!("{what}: {r:?}");
                    let timeout = spec(replicas, seed).log.failure_timeout_ns;
                    assert!(
                        r.before > 100,
                        "premise: {what}: decisions before the fault"
                    );
                    assert!(
                        r.gap <= 2 * timeout,
                        "{what}: commits stopped for {} ns (bound {} ns): {r:?}",
                        r.gap,
                        2 * timeout
                    );
                    assert!(
                        r.after * 5 >= r.before * 4,
                        "{what}: {} slots a ms decided after the fault, {} before: {r:?}",
                        r.after,
                        r.before
                    );
                }
            }
        }
    }
}
