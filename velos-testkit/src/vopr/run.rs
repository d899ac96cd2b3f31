//! One campaign run: the scenario's cluster on the simulator, the key-value service on
//! every replica (entries applied, snapshots handed to the log and restored from it), the
//! clients, the faults; a safety phase with faults, then a liveness phase without new
//! ones in which every operation must complete; then every checker.

use super::clients::Clients;
use super::gaps::CommitGaps;
use super::power::{self, PowerReport};
use super::scenario::{FaultPlan, Scenario};
use super::services::Services;
use crate::check::{self, AppliedLog};
use crate::durable::disks::Disks;
use crate::harness::cluster::{
    ClusterSpec, crash_leader, machine, restart_from, sim_config, tell_replaced,
};
use crate::harness::script::{ClientScript, Scripted};
use serde::Serialize;
use std::collections::BTreeSet;
use velos_rdma::NodeId;
use velos_sim::machine::CrashMode;
use velos_sim::simulate::{Fault, ScheduledFault, Simulator};

/// Virtual time between two visits of the service and the clients (ns).
const VISIT_NS: u64 = 1_000;

/// Visits between two samples of every acceptor word ([`check::Promises`]).
const PROMISE_VISITS: u64 = 4;

/// Samples every acceptor word of every live replica (each epoch, each ring position)
/// into `promises`; a word that went back is a violation. (A crash wipes a node's memory:
/// its words are not watched until a new process starts there, whose words are watched
/// afresh.)
fn sample_words(sim: &Simulator<Scripted>, scenario: &Scenario, promises: &mut check::Promises) {
    let log = &scenario.log;
    let shape = log.shape();
    let m = sim.machine();
    for r in 0..log.replicas {
        let mut i = usize::from(r) * log.epochs as usize * log.slots as usize;
        if !m.is_up(NodeId(r)) {
            continue;
        }
        for e in 0..log.epochs {
            for p in 0..log.slots {
                let word = m.read(shape.epoch_word(r, p, e)).expect("an acceptor word");
                let name = || format!("replica {r}, ring position {p}, epoch {e}");
                if let Some(line) = promises.observe(i, word, name) {
                    promises.violations.push(line);
                }
                i += 1;
            }
        }
    }
}

/// What one run did and found.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// The seed.
    pub seed: u64,
    /// Replicas.
    pub replicas: u16,
    /// Faults the plan drew.
    pub faults: usize,
    /// Faults the simulator applied (a planned leader crash included), and of them those
    /// that met no live replica and did nothing (`velos_sim::simulate::FaultEffect`).
    pub faults_applied: [usize; 2],
    /// Client operations started, and completed.
    pub operations: [usize; 2],
    /// Log entries the most advanced replica applied.
    pub entries: usize,
    /// Of them, batch entries of more than one command (`--submit` only).
    pub batched_entries: usize,
    /// A leader crashed after a replacement joined ([`FaultPlan::CrashLeaderAfterJoin`]
    /// fired): the schedule the README's failure model allows and a stricter budget never
    /// tried.
    pub crashed_after_join: bool,
    /// The longest commit gap while operations waited and no fault was active: (its
    /// start, its length) in ns (the campaign's commit-gap check).
    pub longest_gap: (u64, u64),
    /// Visits at which such a gap was charged: the check's premise (an operation waited
    /// outside every fault's window).
    pub gap_visits: u64,
    /// Virtual time at the end (ns).
    pub end_ns: u64,
    /// One line per violation, prefixed with the property.
    pub violations: Vec<String>,
    /// The clients' history.
    #[serde(skip)]
    pub history: Vec<crate::check::linearizability::HistoryOp>,
    /// `--power-loss`: what the power losses and the restart from disk showed.
    pub power: Option<PowerReport>,
}

/// The simulator faults of `scenario` known in advance (a leader's crash is decided
/// when it is due).
fn scheduled(scenario: &Scenario) -> Vec<ScheduledFault> {
    let at = |at_ns, fault| Some(ScheduledFault { at_ns, fault });
    scenario
        .faults
        .iter()
        .filter_map(|f| match *f {
            FaultPlan::CrashLeader { .. }
            | FaultPlan::Restart { .. }
            | FaultPlan::CrashLeaderAfterJoin { .. } => None,
            FaultPlan::Crash {
                replica,
                at_ns,
                fail,
            } => at(
                at_ns,
                Fault::Crash {
                    node: NodeId(replica),
                    mode: if fail {
                        CrashMode::Error
                    } else {
                        CrashMode::Hang
                    },
                },
            ),
            FaultPlan::QueuePairError { from, to, at_ns } => at(
                at_ns,
                Fault::QueuePairError {
                    from: NodeId(from),
                    to: NodeId(to),
                },
            ),
            FaultPlan::Delay {
                replica,
                at_ns,
                extra_ns,
                duration_ns,
            } => at(
                at_ns,
                Fault::Delay {
                    node: NodeId(replica),
                    extra_ns,
                    duration_ns,
                },
            ),
            FaultPlan::SlowSender {
                replica,
                at_ns,
                extra_ns,
                duration_ns,
            } => at(
                at_ns,
                Fault::DelayFrom {
                    node: NodeId(replica),
                    extra_ns,
                    duration_ns,
                },
            ),
            FaultPlan::Pause {
                replica,
                at_ns,
                duration_ns,
            } => at(
                at_ns,
                Fault::Pause {
                    node: NodeId(replica),
                    duration_ns,
                },
            ),
        })
        .collect()
}

/// A [`FaultPlan::CrashLeaderAfterJoin`] under way: the replica replaced, and when every
/// live replica was first seen counting its replacement.
struct AfterJoin {
    after_ns: Option<u64>,
    replaced: Option<u16>,
    joined_at: Option<u64>,
    fired: bool,
}

impl AfterJoin {
    fn new(scenario: &Scenario) -> AfterJoin {
        let after_ns = scenario.faults.iter().find_map(|f| match *f {
            FaultPlan::CrashLeaderAfterJoin { after_ns } => Some(after_ns),
            _ => None,
        });
        AfterJoin {
            after_ns,
            replaced: None,
            joined_at: None,
            fired: false,
        }
    }

    /// Whether the leader's crash is due now (once): the replacement votes and every
    /// live replica counts it in its next slot (all applied past the change naming it),
    /// and `after_ns` passed since that was first seen.
    fn due(&mut self, sim: &Simulator<Scripted>, now: u64) -> bool {
        let (Some(after_ns), Some(r)) = (self.after_ns, self.replaced) else {
            return false;
        };
        let m = sim.machine();
        let live = || m.threads.iter().filter(|t| m.is_up(t.node));
        if self.joined_at.is_none() && live().all(|t| t.process.voters().contains(r)) {
            self.joined_at = Some(now);
        }
        let due = self.joined_at.is_some_and(|at| now >= at + after_ns);
        if due {
            self.after_ns = None; // once
        }
        due
    }
}

/// The next slot of the most advanced live replica.
fn most_applied(sim: &Simulator<Scripted>) -> u64 {
    crate::harness::cluster::most_applied(sim, None)
}

/// Runs `scenario` and checks it.
pub fn run(scenario: &Scenario) -> RunReport {
    let spec = ClusterSpec {
        latency: scenario.latency.clone(),
        near_overflow: scenario.near_overflow,
        ..ClusterSpec::new(
            scenario.log.clone(),
            scenario.seed,
            u64::MAX,
            ClientScript::NONE,
        )
    };
    let mut config = sim_config(&spec);
    config.faults = scheduled(scenario);
    let mut sim = Simulator::new(machine(&spec), config);
    let replicas = usize::from(scenario.log.replicas);
    let mut services = Services::new(replicas, scenario.snapshot_every);
    let mut disks = scenario
        .power
        .as_ref()
        .map(|p| Disks::new(replicas, &p.faults()));
    let mut disk_rng = velos_sim::rng::Rng::new(scenario.seed ^ 0xD15C);
    let (mut resumed, mut resumes_checked) = (0, 0);
    let mut resume_violations = Vec::new();
    let mut powered_off = false;
    let mut clients = Clients::new(scenario);
    let log = &scenario.log;
    let words = usize::from(log.replicas) * log.epochs as usize * log.slots as usize;
    let mut promises = check::Promises::new(log.layout, words);
    let mut leader_crashes: Vec<u64> = scenario
        .faults
        .iter()
        .filter_map(|f| match f {
            FaultPlan::CrashLeader { at_ns } => Some(*at_ns),
            _ => None,
        })
        .collect();
    leader_crashes.sort_unstable();
    // Restarts, done when due at a visit: (time, replica, in the leader's place, whether
    // the replacement starts — else the crash). A crash in the leader's place names its
    // replica once it happens.
    let mut restarts: Vec<(u64, u16, bool, bool)> = scenario
        .faults
        .iter()
        .filter_map(|f| match *f {
            FaultPlan::Restart {
                replica,
                at_ns,
                after_ns,
                leader,
                ..
            } => Some([
                (at_ns, replica, leader, false),
                (at_ns + after_ns, replica, leader, true),
            ]),
            _ => None,
        })
        .flatten()
        .collect();
    restarts.sort_unstable();
    let told_late = scenario.faults.iter().find_map(|f| match *f {
        FaultPlan::Restart { told_late, .. } => told_late,
        _ => None,
    });
    // The join path's late meetings: (when, the replica told, the place replaced).
    let mut tells: Vec<(u64, u16, u16)> = Vec::new();
    let mut after_join = AfterJoin::new(scenario);
    let mut gaps = CommitGaps::new(scenario);
    // The processes replaced, as they were at their crash: their logs are checked too.
    let mut retired: Vec<Scripted> = Vec::new();
    let stop_starting = scenario.safety_ns + scenario.liveness_ops_ns;
    let deadline = scenario.safety_ns + scenario.liveness_ns;
    let mut now = 0;
    while now < deadline {
        now += VISIT_NS;
        sim.run(now, u64::MAX);
        if (now / VISIT_NS) % PROMISE_VISITS == 0 {
            sample_words(&sim, scenario, &mut promises);
        }
        while leader_crashes.first().is_some_and(|&at| at <= now) {
            leader_crashes.remove(0);
            crash_leader(&mut sim);
        }
        while restarts.first().is_some_and(|&(at, ..)| at <= now) {
            let (_, planned, leader, starts) = restarts.remove(0);
            if !starts {
                let r = match leader.then(|| crash_leader(&mut sim)).flatten() {
                    Some(r) => r,
                    None => {
                        sim.inject(Fault::Crash {
                            node: NodeId(planned),
                            mode: CrashMode::Hang,
                        });
                        planned
                    }
                };
                for later in restarts.iter_mut().filter(|e| e.1 == planned && e.3) {
                    later.1 = r; // its replacement starts in the same place
                }
                continue;
            }
            let r = planned;
            assert!(!sim.machine().is_up(NodeId(r)), "its crash came first");
            let late: Vec<u16> = told_late
                .map(|(k, delay)| {
                    let j = (r + k) % log.replicas;
                    tells.push((now + delay, j, r));
                    j
                })
                .into_iter()
                .collect();
            // With disks (`--power-loss`) the new process finds what its disk kept, and
            // resumes at the newest snapshot there, as `Cluster::replace` does.
            let resume = disks
                .as_mut()
                .and_then(|d| d.restart(usize::from(r), &mut disk_rng));
            let from = resume.as_ref().map(|(point, bytes)| (*point, &bytes[..]));
            let (old, state) = restart_from(log, &spec.client, &mut sim, (r, &late), from);
            retired.push(old);
            after_join.replaced = Some(r);
            services.restart(usize::from(r));
            if let (Some(point), Some(state)) = (from.map(|(point, _)| point), state) {
                resumed += 1;
                // The state it resumed with is the decided log's at its point.
                let decided = power::decided(&sim, &retired);
                match power::resumed_state_holds(&decided, point, state) {
                    Some(true) => resumes_checked += 1,
                    Some(false) => resume_violations.push(format!(
                        "snapshots: replica {r} resumed from its disk at {point} with a state \
                         the decided log does not make there"
                    )),
                    None => {}
                }
                services.resume(usize::from(r), point, state);
            }
            let per = log.epochs as usize * log.slots as usize;
            promises.forget(usize::from(r) * per..(usize::from(r) + 1) * per);
        }
        tell_due(&mut sim, &mut tells, now);
        if now < scenario.safety_ns && after_join.due(&sim, now) {
            after_join.fired = crash_leader(&mut sim).is_some();
            gaps.fault_at(now);
        }
        services.visit(&mut sim, disks.as_mut());
        if let Some(d) = &mut disks {
            let m = sim.machine();
            let up: Vec<bool> = (0..log.replicas).map(|r| m.is_up(NodeId(r))).collect();
            d.visit(now, &up);
            if scenario.power.as_ref().is_some_and(|p| now >= p.at_ns) {
                powered_off = true;
                break;
            }
        }
        let service = (&services.kv[..], &services.next[..]);
        clients.visit(now, sim.machine_mut(), service, now < stop_starting);
        gaps.partitioned(now, cut(&sim, log.replicas, &tells));
        let applied = most_applied(&sim);
        gaps.visit(now, (applied, clients.completed()), clients.waiting());
        if now >= stop_starting && clients.idle() {
            break;
        }
    }
    // The liveness phase also needs every replacement to catch up: it applies up to what
    // the most advanced live replica had applied when the clients finished — unless a
    // fault of its own excuses it (an end of a broken queue pair, a crash).
    let excused: BTreeSet<u16> = scenario
        .faults
        .iter()
        .flat_map(|f| match *f {
            FaultPlan::QueuePairError { from, to, .. } => vec![from, to],
            FaultPlan::Crash { replica, .. } => vec![replica],
            _ => Vec::new(),
        })
        .collect();
    let replacements = |sim: &Simulator<Scripted>| -> Vec<(u16, u64, u64)> {
        let m = sim.machine();
        m.threads
            .iter()
            .filter(|t| m.is_up(t.node) && t.process.incarnation() > 0)
            .filter(|t| !excused.contains(&t.process.id()))
            .map(|t| {
                (
                    t.process.id(),
                    t.process.incarnation(),
                    t.process.next_apply(),
                )
            })
            .collect()
    };
    let target = most_applied(&sim);
    while !powered_off && now < deadline && replacements(&sim).iter().any(|&(.., n)| n < target) {
        now += VISIT_NS;
        sim.run(now, u64::MAX);
        tell_due(&mut sim, &mut tells, now);
        services.visit(&mut sim, None);
    }
    let mut violations = std::mem::take(&mut services.violations);
    violations.append(&mut resume_violations);
    // The power loss ended the run: what is pending was cut by it, not by the log.
    let lagging = replacements(&sim).into_iter().filter(|_| !powered_off);
    for (id, incarnation, next) in lagging.filter(|&(.., n)| n < target) {
        violations.push(format!(
            "liveness: replica {id}'s replacement (incarnation {incarnation}) applied up to \
             slot {next}, not {target}, {} ns into the fault-free phase",
            sim.now().saturating_sub(scenario.safety_ns)
        ));
    }
    violations.extend(gaps.violation());
    violations.extend(
        promises
            .violations
            .drain(..)
            .map(|l| format!("promises: {l}")),
    );
    let power = match disks {
        Some(d) if powered_off => {
            let (found, power) = power::restart(scenario, &sim, &retired, d);
            violations.extend(found);
            Some(power)
        }
        Some(_) => {
            violations.push("premise: the power loss never came".into());
            None
        }
        None => None,
    };
    let mut report = report(
        scenario,
        &sim,
        (clients, &retired, power.as_ref()),
        violations,
    );
    report.power = power.map(|p| PowerReport {
        resumed,
        resumes_checked,
        ..p
    });
    report.crashed_after_join = after_join.fired;
    report.longest_gap = gaps.longest;
    report.gap_visits = gaps.charged_visits;
    report
}

/// The checks of a finished run.
fn report(
    scenario: &Scenario,
    sim: &Simulator<Scripted>,
    (clients, retired, power): (Clients, &[Scripted], Option<&PowerReport>),
    mut violations: Vec<String>,
) -> RunReport {
    let m = sim.machine();
    let live = m.threads.iter().map(|t| &t.process);
    // Every process the run had, replaced ones as they were at their crash.
    let logs: Vec<AppliedLog> = retired
        .iter()
        .chain(live)
        .map(|p| AppliedLog {
            replica: p.id(),
            entries: p
                .applied
                .iter()
                .map(|(s, v)| (*s, v.iter().map(|b| format!("{b:02x}")).collect()))
                .collect(),
            // A copied snapshot, or the disk's snapshot a new process resumed at.
            jumps: p.resumed_at.iter().chain(&p.installs).copied().collect(),
        })
        .collect();
    let mut proposed: BTreeSet<&str> = clients.proposed().iter().map(String::as_str).collect();
    // A batch entry (`--submit`) is valid when each of its commands was proposed: such
    // entries join the proposed values here, so that the validity check reads them as
    // one value each; a batch holding anything else stays out and is reported.
    let mut batched = BTreeSet::new();
    let mut several = 0usize;
    for (slot, entry) in retired
        .iter()
        .chain(m.threads.iter().map(|t| &t.process))
        .flat_map(|p| p.applied.iter())
    {
        let Ok(batch) = velos_core::batch::decode(entry) else {
            continue;
        };
        let hex = |b: &[u8]| b.iter().map(|b| format!("{b:02x}")).collect::<String>();
        let valid = |c: &&[u8]| proposed.contains(hex(c).as_str());
        if batch.commands.iter().all(valid)
            && batched.insert((*slot, hex(entry)))
            && batch.commands.len() > 1
        {
            several += 1;
        }
    }
    let batched: Vec<String> = batched.into_iter().map(|(_, hex)| hex).collect();
    proposed.extend(batched.iter().map(String::as_str));
    let tag = |property: &'static str, lines: Vec<String>| {
        lines.into_iter().map(move |l| format!("{property}: {l}"))
    };
    violations.extend(tag("agreement", check::agreement(&logs)));
    violations.extend(tag("validity", check::validity(&logs, &proposed)));
    violations.extend(tag("integrity", check::integrity(&logs)));
    violations.extend(tag("no holes", check::no_holes(&logs)));
    violations.extend(tag("prefix", check::prefixes(&logs)));
    let history = clients.history().to_vec();
    match crate::check::linearizability::check(&history) {
        crate::check::linearizability::Verdict::Linearizable => {}
        crate::check::linearizability::Verdict::Violation(v) => {
            violations.push(format!("linearizability: key {}: {}", v.key, v.explanation))
        }
        crate::check::linearizability::Verdict::Undecided { key, states } => violations.push(
            format!("linearizability: key {key} undecided after {states} states"),
        ),
    }
    let cut = scenario.power.is_some(); // the power loss ended the run with them pending
    for (client, seq, invoked) in clients.pending().into_iter().filter(|_| !cut) {
        violations.push(format!(
            "liveness: client {client}'s operation {seq}, started at {invoked} ns, had not \
             completed at {} ns ({} ns into the fault-free phase)",
            sim.now(),
            sim.now().saturating_sub(scenario.safety_ns)
        ));
    }
    // A fault may meet its replica already down (a leader's crash is decided when it is
    // due and may take the replica a later fault names): it did nothing. Counted, so the
    // campaign's premise (its faults acted) is checked over its seeds.
    let faults_applied = sim.faults_applied();
    let faults_idle = sim.faults_without_effect().count();
    let completed = history.iter().filter(|o| o.response_ns.is_some()).count();
    // The premise of the checks above: the clients completed an operation (else
    // linearizability and the clients' liveness held on an empty history). A power loss
    // may come before any did: then the durability checks must have had something to
    // hold on (entries durable at a power loss: the first, or the restarted cluster's).
    let durable = power.is_some_and(|p| p.durable[0] > 0 || p.durable_after_restart());
    if completed == 0 && !durable {
        violations.push(
            "premise: no client operation completed: the clients' checks held on nothing".into(),
        );
    }
    RunReport {
        seed: scenario.seed,
        replicas: scenario.log.replicas,
        faults: scenario.faults.len(),
        faults_applied: [faults_applied, faults_idle],
        operations: [history.len(), completed],
        entries: logs.iter().map(|l| l.entries.len()).max().unwrap_or(0),
        batched_entries: several,
        crashed_after_join: false,
        longest_gap: (0, 0),
        gap_visits: 0,
        end_ns: sim.now(),
        violations,
        history,
        power: None,
    }
}

/// The join path's late meetings due by `now` (`tells`: when, the replica told, the place
/// replaced), each done if both are up.
/// Whether a replica told late of a replacement has not met it yet, both are up, and the
/// replicas up are a bare majority: every majority of them needs the link it lacks (a
/// partition, [`CommitGaps::partitioned`]).
fn cut(sim: &Simulator<Scripted>, replicas: u16, tells: &[(u64, u16, u16)]) -> bool {
    let m = sim.machine();
    let up = (0..replicas).filter(|&n| m.is_up(NodeId(n))).count();
    let bare = up <= usize::from(replicas) / 2 + 1;
    bare && tells
        .iter()
        .any(|&(_, j, r)| m.is_up(NodeId(j)) && m.is_up(NodeId(r)))
}

fn tell_due(sim: &mut Simulator<Scripted>, tells: &mut Vec<(u64, u16, u16)>, now: u64) {
    while tells.first().is_some_and(|&(at, ..)| at <= now) {
        let (_, j, r) = tells.remove(0);
        let m = sim.machine();
        if m.is_up(NodeId(j)) && m.is_up(NodeId(r)) {
            tell_replaced(sim, j, r);
        }
    }
}
