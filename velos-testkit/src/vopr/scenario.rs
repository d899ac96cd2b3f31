//! What a seed picks: the cluster, the workload, the latency profile and the fault
//! schedule of one campaign run. The campaign's own PRNG (`velos_sim::rng::Rng`, pinned
//! SplitMix64) draws it, so a seed replays on any machine and any version of the
//! dependencies.

use crate::durable::disks::DiskFaults;
use velos_core::log::LogConfig;
use velos_sim::latency::LatencyModel;
use velos_sim::rng::Rng;
use velos_store::quorum::Mutation as DiskMutation;

/// A fault of the safety phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultPlan {
    /// Crash whichever replica leads at `at_ns` (none if none leads then).
    CrashLeader {
        /// When.
        at_ns: u64,
    },
    /// Crash `replica` at `at_ns`; its peers' operations towards it hang, or fail if
    /// `fail`.
    Crash {
        /// The replica.
        replica: u16,
        /// When.
        at_ns: u64,
        /// Operations towards it fail (a NIC that gave up) instead of hanging.
        fail: bool,
    },
    /// The queue pairs from `from` towards `to` go into the error state for good.
    QueuePairError {
        /// Requester.
        from: u16,
        /// Target.
        to: u16,
        /// When.
        at_ns: u64,
    },
    /// Every step towards `replica` costs `extra_ns` more for `duration_ns`: a slow link
    /// or a partition that heals (long delays stall its operations, which then resume).
    Delay {
        /// The replica.
        replica: u16,
        /// When.
        at_ns: u64,
        /// Extra cost per step.
        extra_ns: u64,
        /// How long.
        duration_ns: u64,
    },
    /// Every step on a queue pair `replica` posts on costs `extra_ns` more for
    /// `duration_ns`, while the others reach its memory at full speed: it looks alive and
    /// everything it posts crawls (a gray failure; `velos_sim`'s `Fault::DelayFrom`). A
    /// leader so slowed must be passed over (rule (deciding leader)): the commit-gap
    /// check excuses only the fault's first two failure timeouts and a client's retry.
    SlowSender {
        /// The replica.
        replica: u16,
        /// When.
        at_ns: u64,
        /// Extra cost per step.
        extra_ns: u64,
        /// How long.
        duration_ns: u64,
    },
    /// `replica` — or, with `leader`, whichever replica leads at `at_ns` (`replica` if
    /// none does) — crashes at `at_ns` (operations towards it hang) and a fresh process
    /// starts in its place `after_ns` later, on blank memory, at the next incarnation: it
    /// joins through the log (`velos_core::log::configuration`). Charged to the budget
    /// until the replacement votes and every live replica applied past the change that
    /// names it (the README's failure model): the budget is then back, and a
    /// [`FaultPlan::CrashLeaderAfterJoin`] may spend it.
    Restart {
        /// The replica.
        replica: u16,
        /// When it crashes.
        at_ns: u64,
        /// How long until its replacement starts.
        after_ns: u64,
        /// The leader's place instead of `replica`'s.
        leader: bool,
        /// `Some((k, delay_ns))`: the join path reaches the replica `k` places after the
        /// replaced one (modulo the replicas) `delay_ns` after the replacement starts —
        /// until then its queue pairs towards the place fail —, the others at once (over
        /// real RDMA the joiner connects to a majority and meets the rest in the
        /// background). `None`: every live replica at once.
        told_late: Option<(u16, u64)>,
    },
    /// `after_ns` after the restart's replacement votes and every live replica counts it
    /// in its next slot, whichever replica leads crashes (if that is still within the
    /// safety phase): the failure the restart's returned budget allows.
    CrashLeaderAfterJoin {
        /// How long after the join.
        after_ns: u64,
    },
    /// `replica`'s CPU takes no step for `duration_ns` (a descheduled process).
    Pause {
        /// The replica.
        replica: u16,
        /// When.
        at_ns: u64,
        /// How long.
        duration_ns: u64,
    },
}

/// One run of the campaign.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The seed it came from.
    pub seed: u64,
    /// The log: 3 or 5 replicas, a small ring (snapshots recycle it), a pipeline of 1
    /// to 8.
    pub log: LogConfig,
    /// Step costs, with jitter.
    pub latency: LatencyModel,
    /// Clients, each with one operation outstanding at a time.
    pub clients: u8,
    /// Keys they use.
    pub keys: u8,
    /// Percent of their operations that are gets.
    pub get_percent: u64,
    /// The longest pause of a client between two operations (ns).
    pub think_ns_max: u64,
    /// Each replica snapshots its state every this many entries.
    pub snapshot_every: u64,
    /// The faults, all within the safety phase.
    pub faults: Vec<FaultPlan>,
    /// The safety phase's length (ns): faults happen in it.
    pub safety_ns: u64,
    /// After the safety phase, clients start operations for this long (ns) more…
    pub liveness_ops_ns: u64,
    /// …and every operation must have completed by the end of this (ns after the
    /// safety phase).
    pub liveness_ns: u64,
    /// Start every slot's words promised this far below the overflow threshold (one
    /// replica's at it), so that slots go through the overflow fallback.
    pub near_overflow: Option<u64>,
    /// Clients submit their commands (`Replica::submit`: the leader gathers waiting
    /// commands into batch entries) instead of proposing one entry each. Not drawn from
    /// the seed: `velos vopr --submit` sets it for every seed.
    pub submit: bool,
    /// Every replica persists on a simulated disk and the whole cluster loses power
    /// once (see [`PowerPlan`]). Set by `velos vopr --power-loss`.
    pub power: Option<PowerPlan>,
}

/// What a seed draws for `--power-loss` (its own stream of the seed: the rest of the
/// scenario is the same as without the flag).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PowerPlan {
    /// When every replica loses power.
    pub at_ns: u64,
    /// One replica's syncs take this many times as long: `(replica, factor)`.
    pub slow_syncs: Option<(u16, u64)>,
    /// One replica's disk holds this many bytes at most (it fills, and that replica
    /// stops persisting): `(replica, capacity)`.
    pub full: Option<(u16, u64)>,
    /// One replica's disk has a bit flipped at the power loss (a bad sector).
    pub flip: Option<u16>,
    /// A deliberately wrong variant of the durable point (tests only).
    pub mutation: DiskMutation,
}

impl PowerPlan {
    /// The disk faults it draws, as the disks take them.
    pub fn faults(&self) -> DiskFaults {
        DiskFaults {
            slow_syncs: self.slow_syncs,
            full: self.full,
            mutation: self.mutation,
        }
    }

    /// The plan seed `seed` draws for `replicas` and a safety phase of `safety_ns`. The
    /// full disk and the flipped bit hit the same replica: one replica's copy damaged, as
    /// a crash would take one.
    pub fn draw(seed: u64, replicas: u16, safety_ns: u64) -> PowerPlan {
        let mut rng = Rng::new(seed ^ 0x5DEE_CE66_D1CE_D00D);
        let n = u64::from(replicas);
        let at_ns = safety_ns / 4 + rng.below(safety_ns * 3 / 4);
        let slow_syncs = (rng.below(3) == 0).then(|| (rng.below(n) as u16, 2 + rng.below(30)));
        let faulty = rng.below(n) as u16;
        let full = (rng.below(4) == 0).then(|| (faulty, 1_024 + rng.below(16 << 10)));
        let flip = (rng.below(3) == 0).then_some(faulty);
        PowerPlan {
            at_ns,
            slow_syncs,
            full,
            flip,
            mutation: DiskMutation::None,
        }
    }
}

/// Bytes of a replica's snapshot at most (the key-value state: a few keys and clients).
pub const SNAPSHOT_BYTES: u32 = 512;

impl Scenario {
    /// The run seed `seed` picks, without near-overflow starts ([`Scenario::with_overflow`]).
    pub fn from_seed(seed: u64) -> Scenario {
        Scenario::with_overflow(seed, false)
    }

    /// The run seed `seed` picks; with `overflow`, one seed in four starts every slot
    /// near the overflow threshold (the fallback's freezes and epochs run; a known
    /// liveness bug shows there: see `paper-notes/results.md`, "Testing").
    pub fn with_overflow(seed: u64, overflow: bool) -> Scenario {
        let mut rng = Rng::new(seed);
        let replicas: u16 = if rng.below(3) == 0 { 5 } else { 3 };
        let slots = [16, 32, 64, 256][rng.below(4) as usize];
        let mut log = LogConfig::new(replicas, slots, 32);
        log.max_snapshot_bytes = SNAPSHOT_BYTES;
        log.pipeline = 1 + rng.below(8) as u32;
        let mut latency = if rng.below(2) == 0 {
            LatencyModel::cluster()
        } else {
            LatencyModel::generic()
        };
        latency.jitter_ns = [0, 50, 200, 500][rng.below(4) as usize];
        // A step's jitter is at most its cost: a network less regular, not a CPU up to a
        // hundred times slower (which made a replica decide about 8 times fewer slots per
        // millisecond at 500 ns).
        latency.jitter_within_cost = true;
        // Liveness needs a failure timeout above the delays the jitter adds (a heartbeat
        // read queued behind a pipeline of jittered operations): the adaptive detector's
        // bound grows with it.
        log.failure_timeout_ns = 20_000 + 40 * latency.jitter_ns;
        // One seed in two serves gets from the leader's lease (`velos_core::log::lease`).
        let leases = rng.below(2) == 0;
        if leases {
            log.lease_ns = log.failure_timeout_ns / 2;
        }
        let safety_ns = 200_000 + rng.below(800_000);
        let near = rng.below(4) == 0;
        let below = rng.below(16);
        let near_overflow = (overflow && near).then_some(below);
        let mut faults = faults(&mut rng, replicas, safety_ns);
        restarts(seed, replicas, safety_ns, &mut faults);
        slow_sender(seed, replicas, safety_ns, &mut faults);
        let scenario = Scenario {
            seed,
            log,
            latency,
            clients: 1 + rng.below(5) as u8,
            keys: 1 + rng.below(4) as u8,
            get_percent: [0, 30, 50, 80][rng.below(4) as usize],
            think_ns_max: [0, 1_000, 10_000][rng.below(3) as usize],
            snapshot_every: u64::from(slots / 4).max(2),
            faults,
            safety_ns,
            liveness_ops_ns: 50_000,
            liveness_ns: 5_000_000,
            near_overflow,
            submit: false,
            power: None,
        };
        assert!(
            scenario.crashes() <= usize::from(replicas - 1) / 2,
            "a minority fails"
        );
        scenario
    }

    /// A few lines saying what the seed picked.
    pub fn describe(&self) -> String {
        let mut out = format!(
            "seed {}: {} replicas, {} slots, pipeline {}, failure timeout {} ns; latency {} \
             (jitter {} ns), leases {} ns; {} clients on {} keys, {}% gets, client think time up to {} ns; snapshots \
             every {} entries; overflow {}; commands {}; mutation {}; safety phase {} ns, then \
             {} ns without faults\n",
            self.seed,
            self.log.replicas,
            self.log.slots,
            self.log.pipeline,
            self.log.failure_timeout_ns,
            self.latency.name,
            self.latency.jitter_ns,
            self.log.lease_ns,
            self.clients,
            self.keys,
            self.get_percent,
            self.think_ns_max,
            self.snapshot_every,
            self.near_overflow
                .map_or("far".to_string(), |b| format!("{b} below the threshold")),
            if self.submit {
                "submitted (gathered into batches)"
            } else {
                "proposed one an entry"
            },
            self.log.mutation.name(),
            self.safety_ns,
            self.liveness_ns
        );
        for f in &self.faults {
            out += &format!("  fault: {f:?}\n");
        }
        out
    }

    /// Replicas down at once at the most (crashed, restarted and not yet joined again, or
    /// an end of a broken queue pair).
    pub fn crashes(&self) -> usize {
        failures(&self.faults)
    }
}

/// Replicas down at once, at the most, under `faults`: the permanent failures (crashes,
/// both ends of a broken queue pair, leaders' crashes) and, until its replacement joined,
/// a restarted replica; after the join, the leader's crash the returned budget pays for
/// instead (the README's failure model). A crash that names a restarted replica kills
/// its replacement: that replica counts for good.
pub(super) fn failures(faults: &[FaultPlan]) -> usize {
    let mut failed = std::collections::BTreeSet::new();
    let mut leaders = 0;
    let (mut restarted, mut after_join) = (None, 0);
    for f in faults {
        match *f {
            FaultPlan::CrashLeader { .. } => leaders += 1,
            FaultPlan::Crash { replica, .. } => {
                failed.insert(replica);
            }
            FaultPlan::QueuePairError { from, to, .. } => {
                failed.insert(from);
                failed.insert(to);
            }
            FaultPlan::Restart {
                replica, leader, ..
            } => restarted = Some((replica, leader)),
            FaultPlan::CrashLeaderAfterJoin { .. } => after_join += 1,
            FaultPlan::Delay { .. } | FaultPlan::Pause { .. } | FaultPlan::SlowSender { .. } => {}
        }
    }
    let permanent = failed.len() + leaders;
    let before = match restarted {
        // In the leader's place: whichever replica leads then, counted on its own.
        Some((_, true)) => permanent + 1,
        Some((replica, false)) => permanent + usize::from(!failed.contains(&replica)),
        None => permanent,
    };
    before.max(permanent + after_join)
}

/// Up to six faults in `0..safety_ns`: permanent ones (crashes, broken queue pairs)
/// charged to a budget of a minority of the replicas (both ends of a broken queue pair
/// count, since either may then be cut off), temporary ones (delays, pauses) free.
fn faults(rng: &mut Rng, replicas: u16, safety_ns: u64) -> Vec<FaultPlan> {
    let mut budget = usize::from(replicas - 1) / 2;
    let mut spent: Vec<u16> = Vec::new();
    let mut out = Vec::new();
    let n = rng.below(7);
    for _ in 0..n {
        let at_ns = 20_000 + rng.below(safety_ns - 20_000);
        let replica = rng.below(u64::from(replicas)) as u16;
        match rng.below(5) {
            0 if budget >= 1 => {
                budget -= 1;
                out.push(FaultPlan::CrashLeader { at_ns });
            }
            1 if budget >= 1 && !spent.contains(&replica) => {
                budget -= 1;
                spent.push(replica);
                let fail = rng.below(2) == 0;
                out.push(FaultPlan::Crash {
                    replica,
                    at_ns,
                    fail,
                });
            }
            2 if budget >= 2 => {
                let to = (replica + 1 + rng.below(u64::from(replicas - 1)) as u16) % replicas;
                if spent.contains(&replica) || spent.contains(&to) {
                    continue;
                }
                budget -= 2;
                spent.extend([replica, to]);
                out.push(FaultPlan::QueuePairError {
                    from: replica,
                    to,
                    at_ns,
                });
            }
            3 => out.push(FaultPlan::Delay {
                replica,
                at_ns,
                extra_ns: [200, 2_000, 20_000][rng.below(3) as usize],
                duration_ns: ((1 + rng.below(200)) * 1_000).min(safety_ns - at_ns),
            }),
            _ => out.push(FaultPlan::Pause {
                replica,
                at_ns,
                duration_ns: ((1 + rng.below(100)) * 1_000).min(safety_ns - at_ns),
            }),
        }
    }
    out
}

/// One seed in three, if the budget has room, a restart: a replica crashed and replaced
/// by a fresh process within the safety phase — one restart in three in the leader's
/// place —, and after one restart in two, once the replacement joined, the leader's crash
/// the returned budget allows; where the budget allows it, the leader's crash before the
/// replacement votes; one restart in two met late by one replica. Drawn from a stream of
/// its own, so that the other faults (and every scenario without a restart) stay what
/// they were.
fn restarts(seed: u64, replicas: u16, safety_ns: u64, faults: &mut Vec<FaultPlan>) {
    let mut rng = Rng::new(seed ^ 0x7265_7374_6172_7473); // "restarts"
    if rng.below(3) != 0 {
        return;
    }
    let (replica, at_ns, after_ns) = (
        rng.below(u64::from(replicas)) as u16,
        20_000 + rng.below(safety_ns / 2),
        [0, 5_000, 50_000][rng.below(3) as usize],
    );
    let leader = rng.below(3) == 0;
    // Its own stream, so that the draws below stay what they were.
    let mut late = Rng::new(seed ^ 0x746f_6c64_6c61_7465); // "toldlate"
    let told_late = (late.below(2) == 0).then(|| {
        (
            1 + late.below(u64::from(replicas - 1)) as u16,
            [20_000, 100_000, 400_000][late.below(3) as usize],
        )
    });
    let crash_after_join = rng.below(2) == 0;
    let after_join_ns = [0, 10_000, 100_000][rng.below(3) as usize];
    let mut with = faults.clone();
    with.push(FaultPlan::Restart {
        replica,
        at_ns,
        after_ns,
        leader,
        told_late,
    });
    if crash_after_join {
        with.push(FaultPlan::CrashLeaderAfterJoin {
            after_ns: after_join_ns,
        });
    }
    // With five replicas, one restart in two also crashes the leader just after the
    // replacement starts, before it votes (two of five down: the budget allows it): Ω
    // must not choose the replacement while it cannot lead (rule (able leader)).
    let before_join = rng.below(2) == 0;
    let before_ns = [0, 2_000, 10_000][rng.below(3) as usize];
    let budget = usize::from(replicas - 1) / 2;
    if failures(&with) > budget {
        return;
    }
    *faults = with;
    let crash = FaultPlan::CrashLeader {
        at_ns: at_ns + after_ns + before_ns,
    };
    let mut more = faults.clone();
    more.push(crash);
    if before_join && failures(&more) <= budget {
        *faults = more;
    }
}

/// One seed in three, a slow sender ([`FaultPlan::SlowSender`]): one replica — the first
/// leader, replica 0, one time in two — whose own queue pairs crawl from a time in the
/// safety phase to its end or for a while. Temporary, so free of the budget. Drawn from a
/// stream of its own, so that the other faults stay what they were.
fn slow_sender(seed: u64, replicas: u16, safety_ns: u64, faults: &mut Vec<FaultPlan>) {
    let mut rng = Rng::new(seed ^ 0x736c_6f77_7365_6e64); // "slowsend"
    if rng.below(3) != 0 {
        return;
    }
    let replica = match rng.below(2) {
        0 => 0,
        _ => rng.below(u64::from(replicas)) as u16,
    };
    let at_ns = 20_000 + rng.below(safety_ns / 2);
    let extra_ns = [2_000, 20_000][rng.below(2) as usize];
    let duration_ns = match rng.below(2) {
        0 => safety_ns - at_ns,
        _ => (1 + rng.below(200)) * 1_000,
    };
    faults.push(FaultPlan::SlowSender {
        replica,
        at_ns,
        extra_ns,
        duration_ns: duration_ns.min(safety_ns - at_ns),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_restart_is_charged_until_its_replacement_joins() {
        let restart = FaultPlan::Restart {
            replica: 1,
            at_ns: 20_000,
            after_ns: 0,
            leader: false,
            told_late: None,
        };
        let after_join = FaultPlan::CrashLeaderAfterJoin { after_ns: 10_000 };
        let crash = |replica| FaultPlan::Crash {
            replica,
            at_ns: 60_000,
            fail: true,
        };
        assert_eq!(failures(std::slice::from_ref(&restart)), 1);
        // The README's rule: once the replacement joined, one more crash is survived.
        assert_eq!(failures(&[restart.clone(), after_join.clone()]), 1);
        // Seed 404 as first drawn: the replacement crashed too, and another replica —
        // three of five down after the leader's crash.
        let seed_404 = [crash(1), crash(3), restart.clone(), after_join.clone()];
        assert_eq!(failures(&seed_404), 3);
        let leader_place = FaultPlan::Restart {
            replica: 1,
            at_ns: 20_000,
            after_ns: 0,
            leader: true,
            told_late: None,
        };
        assert_eq!(failures(&[crash(1), leader_place]), 2);
    }

    #[test]
    fn a_seed_picks_the_same_scenario_every_time_and_fails_a_minority_at_most() {
        for seed in 0..500 {
            let a = Scenario::from_seed(seed);
            let b = Scenario::from_seed(seed);
            assert_eq!(a.faults, b.faults);
            assert_eq!(a.log, b.log);
            assert!(
                a.crashes() <= usize::from(a.log.replicas - 1) / 2,
                "seed {seed}"
            );
            assert!(a.log.validate().is_ok(), "seed {seed}");
        }
    }
}
