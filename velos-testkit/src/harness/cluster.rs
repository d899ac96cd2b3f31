//! A Velos cluster on the simulation driver: replicas on the rdma-rmw emulator, faults,
//! and the checks every run ends with (agreement, validity, integrity, no holes).

use super::script::{ClientScript, Scripted};
use crate::check::AppliedLog;
use std::collections::{BTreeMap, BTreeSet};
use velos_core::AcceptorState;
use velos_core::freeze::Freezer;
use velos_core::log::Replica;
use velos_rdma::{NodeId, Shared};
use velos_sim::machine::{CrashMode, Machine};
use velos_sim::simulate::{Fault, ScheduledFault, SimConfig, Simulator};

pub use super::report::{
    ClusterReport, DurableReport, LeaderChange, PowerLossReport, ReplicaReport,
};
use super::service::{Origin, digest_from};
pub use super::service::{Retired, Services};
pub use super::spec::ClusterSpec;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs `spec` and asserts that every check passed; a failure names the seed, the first
/// failures and `replay` (the command that runs it again).
pub fn run_checked(spec: &ClusterSpec, replay: &str) -> ClusterReport {
    let report = run(spec);
    assert!(
        report.ok(),
        "seed {}: {:?}\nreplay: {replay}",
        spec.seed,
        report.failures.iter().take(5).collect::<Vec<_>>()
    );
    report
}

/// What the harness does itself during a run, at a virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Action {
    CrashLeader,
    /// Replica r crashes (its replacement starts later).
    Crash(u16),
    /// A fresh process starts in crashed replica r's place.
    Replace(u16),
    /// The join path reaches replica j (first) with the new process in r's place (second).
    Tell(u16, u16),
}

/// Runs `spec` and checks the outcome (a durable spec's power loss ends the run:
/// [`super::durable::run`] restarts the cluster from its disks).
pub fn run(spec: &ClusterSpec) -> ClusterReport {
    run_kept(spec).0
}

/// [`run`], keeping the simulator and the services as the run left them. A durable spec's
/// run ends at its power loss.
pub fn run_kept(spec: &ClusterSpec) -> (ClusterReport, Simulator<Scripted>, Services) {
    run_with(spec, Services::new(spec))
}

/// [`run_kept`] with `services` on the replicas (a cluster restarted from disk: services
/// rebuilt from the recovered log, persisting on the disks it was recovered from).
pub fn run_with(
    spec: &ClusterSpec,
    mut services: Services,
) -> (ClusterReport, Simulator<Scripted>, Services) {
    let end = spec
        .durable
        .and_then(|d| d.power_loss_at)
        .map_or(spec.duration_ns, |at| at.min(spec.duration_ns));
    let mut sim = Simulator::new(machine(spec), sim_config(spec));
    let mut actions: Vec<(u64, Action)> =
        spec.crash_leader_at
            .map(|at| (at, Action::CrashLeader))
            .into_iter()
            .chain(spec.replace.iter().flat_map(|&(r, at, after)| {
                [(at, Action::Crash(r)), (at + after, Action::Replace(r))]
            }))
            .chain(spec.replace.iter().flat_map(|&(r, at, after)| {
                spec.told_late
                    .iter()
                    .filter(move |&&(j, _)| j != r)
                    .map(move |&(j, delay)| (at + after + delay, Action::Tell(j, r)))
            }))
            .filter(|&(at, _)| at < end)
            .collect();
    actions.sort();
    // The premise of `crash_leader_at`: a replica led then, and crashed.
    let mut leader_crashed = None;
    for (at, action) in actions {
        services.run(&mut sim, at);
        match action {
            Action::CrashLeader => {
                leader_crashed = Some(crash_leader(&mut sim).ok_or(at));
            }
            Action::Crash(r) => sim.inject(Fault::Crash {
                node: NodeId(r),
                mode: CrashMode::Hang,
            }),
            Action::Replace(r) => replace(spec, &mut sim, &mut services, r),
            Action::Tell(j, r) => {
                if sim.machine().is_up(NodeId(j)) && sim.machine().is_up(NodeId(r)) {
                    tell_replaced(&mut sim, j, r);
                }
            }
        }
    }
    services.run(&mut sim, end);
    let mut report = report_with(spec, &sim, &services);
    // The premise of every fault asked for: it met its replica up (a crash of the leader
    // may take the replica a later fault names, which then does nothing).
    if sim.faults_applied() > 0 {
        let failures_before = report.failures.len();
        report.failures.extend(sim.faults_without_effect().map(|e| {
            format!(
                "faults: {} at {} ns met it down: it did nothing (was it crashed before?)",
                e.fault, e.at_ns
            )
        }));
        let acted = report.failures.len() == failures_before;
        report.checks.insert("faults_acted".to_string(), acted);
    }
    if let Some(crashed) = leader_crashed {
        if let Err(at) = crashed {
            report.failures.push(format!(
                "crash_leader: no replica led at {at} ns, so none was crashed (a leader is \
                 chosen a failure timeout or so after the start)"
            ));
        }
        report
            .checks
            .insert("crash_leader".to_string(), crashed.is_ok());
    }
    (report, sim, services)
}

/// Starts a fresh process in crashed replica `r`'s place, at the next incarnation, and
/// tells every live replica; the old process is kept for the report.
pub fn replace(spec: &ClusterSpec, sim: &mut Simulator<Scripted>, services: &mut Services, r: u16) {
    let late: Vec<u16> = spec.told_late.iter().map(|&(j, _)| j).collect();
    // With durability the new process finds its disk, and resumes at its newest snapshot.
    let resume = services.restart_disk(r);
    let from = resume.as_ref().map(|(point, bytes)| (*point, &bytes[..]));
    let (old, state) = restart_from(&spec.log, &spec.client, sim, (r, &late), from);
    services.retire(r, old);
    if let (Some(point), Some(state)) = (from.map(|(point, _)| point), state) {
        services.resume(r, point, state);
    }
}

/// Starts a fresh process of `log` (proposing `client`'s values when it leads) in crashed
/// replica `r`'s place, on blank memory, at the incarnation after the crashed process's;
/// tells every live replica but those in `late` ([`tell_replaced`]); returns the crashed
/// process.
pub fn restart(
    log: &velos_core::log::LogConfig,
    client: &ClientScript,
    sim: &mut Simulator<Scripted>,
    r: u16,
    late: &[u16],
) -> Scripted {
    restart_from(log, client, sim, (r, late), None).0
}

/// [`restart`], the fresh process resuming at `resume` — `(point, snapshot)`: a
/// snapshot an earlier process of replica `r` took, wrapped as its disk keeps it
/// ([`Replica::wrap_snapshot`], [`Replica::resume_at`]) — instead of at the log's start.
/// The crashed process, and the service's bytes the new one resumed with.
pub fn restart_from<'a>(
    log: &velos_core::log::LogConfig,
    client: &ClientScript,
    sim: &mut Simulator<Scripted>,
    (r, late): (u16, &[u16]),
    resume: Option<(u64, &'a [u8])>,
) -> (Scripted, Option<&'a [u8]>) {
    let m = sim.machine();
    let i = usize::from(r);
    assert!(!m.is_up(NodeId(r)), "restart: replica {r} crashed first");
    let old = m.threads[i].process.clone();
    let incarnation = old.incarnation() + 1;
    let mut incarnations: Vec<u64> = m.threads.iter().map(|t| t.process.incarnation()).collect();
    incarnations[i] = incarnation;
    let mut joining = Replica::joining(Shared::new(log.clone()), r, &incarnations)
        .unwrap_or_else(|e| panic!("cluster spec: {e}"));
    let service = resume.map(|(point, snapshot)| {
        joining
            .resume_at(point, snapshot)
            .unwrap_or_else(|e| panic!("a disk's snapshot: {e}"))
    });
    let mut fresh =
        Scripted::new(joining, client.clone()).unwrap_or_else(|e| panic!("cluster spec: {e}"));
    fresh.keep_acknowledged();
    sim.restart(NodeId(r), fresh);
    let replicas = u16::try_from(sim.machine().threads.len()).expect("replica ids are u16");
    for j in (0..replicas).filter(|&j| j != r && !late.contains(&j)) {
        if sim.machine().is_up(NodeId(j)) {
            tell_replaced(sim, j, r);
        }
    }
    (old, service)
}

/// Tells live replica `j` that the process now in replica `r`'s place is new (the join
/// path reached `j`): its engine first ([`Replica::peer_replaced`], if it knows an older
/// incarnation there), then its node meets the new process ([`Simulator::reconnect`]).
/// Until then `j`'s queue pairs towards `r` fail.
pub fn tell_replaced(sim: &mut Simulator<Scripted>, j: u16, r: u16) {
    let incarnation = sim.machine().threads[usize::from(r)].process.incarnation();
    let t = &mut sim.machine_mut().threads[usize::from(j)];
    assert!(j != r, "a replica is not told of itself");
    if t.process.incarnations()[usize::from(r)] < incarnation {
        t.process
            .peer_replaced(r, incarnation)
            .expect("a newer incarnation of a peer");
    }
    sim.reconnect(NodeId(j), NodeId(r));
}

/// The highest next slot to apply among the live replicas other than `except`: how far
/// the log got, as far as they know.
pub fn most_applied(sim: &Simulator<Scripted>, except: Option<u16>) -> u64 {
    let m = sim.machine();
    m.threads
        .iter()
        .filter(|t| m.is_up(t.node) && Some(t.process.id()) != except)
        .map(|t| t.process.next_apply())
        .max()
        .unwrap_or(0)
}

/// The live replica that leads now, if one does (the lowest, should two).
pub fn leader(sim: &Simulator<Scripted>) -> Option<u16> {
    let m = sim.machine();
    let leader = m
        .threads
        .iter()
        .position(|t| m.is_up(t.node) && t.process.is_leader())?;
    Some(u16::try_from(leader).expect("replica ids are u16"))
}

/// Crashes whichever live replica leads now (its operations hang); the one crashed, if
/// any replica leads.
pub fn crash_leader(sim: &mut Simulator<Scripted>) -> Option<u16> {
    let node = NodeId(leader(sim)?);
    sim.inject(Fault::Crash {
        node,
        mode: CrashMode::Hang,
    });
    Some(node.0)
}

/// The machine of `spec`: replica r on node r (thread r), the initial words, and the
/// device-memory placement.
pub fn machine(spec: &ClusterSpec) -> Machine<Scripted> {
    let config = Shared::new(spec.log.clone());
    let shape = spec.log.shape();
    let mut machine = Machine::new(&shape.layout());
    if spec.device_memory {
        for r in 0..spec.log.replicas {
            for words in [shape.acceptor_words(), shape.value_buffer_words()] {
                machine
                    .set_device_memory(NodeId(r), words)
                    .expect("the shape's ranges lie in its layout");
            }
        }
    }
    if let Some(below) = spec.near_overflow {
        let layout = spec.log.layout;
        let threshold = spec.log.overflow_threshold();
        let promised = |min_proposal| {
            layout
                .encode(AcceptorState {
                    min_proposal,
                    ..AcceptorState::default()
                })
                .expect("a proposal up to the threshold fits")
        };
        for r in 0..spec.log.replicas {
            let word = if r + 1 == spec.log.replicas {
                promised(threshold)
            } else {
                promised(threshold.saturating_sub(below))
            };
            for slot in 0..spec.log.slots {
                machine
                    .init(shape.acceptor_word(r, slot), word)
                    .expect("the word is in the layout");
            }
        }
    }
    for r in 0..spec.log.replicas {
        let mut replica = Replica::new(config.clone(), r)
            .and_then(|replica| Scripted::new(replica, spec.client.clone()))
            .unwrap_or_else(|e| panic!("cluster spec: {e}"));
        replica.keep_acknowledged(); // the checks read them
        machine.spawn(NodeId(r), replica);
    }
    assert_eq!(
        machine.threads.len(),
        usize::from(spec.log.replicas),
        "one thread per replica"
    );
    machine
}

/// The simulation settings of `spec`: seed, latency profile and scheduled faults.
pub fn sim_config(spec: &ClusterSpec) -> SimConfig {
    let mut sim = SimConfig::new(spec.seed, spec.latency.clone());
    sim.faults =
        spec.crashes
            .iter()
            .map(|&(node, at_ns)| ScheduledFault {
                at_ns,
                fault: Fault::Crash {
                    node: NodeId(node),
                    mode: CrashMode::Hang,
                },
            })
            .chain(
                spec.slow
                    .iter()
                    .map(|&(node, extra)| ScheduledFault::delay(node, 0, extra, spec.duration_ns)),
            )
            .chain(spec.delays.iter().map(|&(node, at, extra, duration)| {
                ScheduledFault::delay(node, at, extra, duration)
            }))
            .chain(spec.delays_from.iter().map(|&(node, at, extra, duration)| {
                ScheduledFault::delay_from(node, at, extra, duration)
            }))
            .chain(
                spec.pauses
                    .iter()
                    .map(|&(node, at_ns, duration_ns)| ScheduledFault {
                        at_ns,
                        fault: Fault::Pause {
                            node: NodeId(node),
                            duration_ns,
                        },
                    }),
            )
            .collect();
    sim
}

/// The report of a run of `spec` that `sim` simulated: what every replica applied, and
/// the checks.
pub fn report(spec: &ClusterSpec, sim: &Simulator<Scripted>) -> ClusterReport {
    report_with(spec, sim, &Services::new(spec))
}

/// One process of a run, as the report reads it.
struct Process<'a> {
    id: u16,
    replica: &'a Scripted,
    crashed: bool,
    installs: Vec<(u64, u64)>,
    digest: (u64, u64),
}

/// [`report`] of a run with `services` on its replicas.
pub fn report_with(
    spec: &ClusterSpec,
    sim: &Simulator<Scripted>,
    services: &Services,
) -> ClusterReport {
    let m = sim.machine();
    // Every process the run had: those replaced, as they were at their crash, then the
    // last process of each replica.
    let processes: Vec<Process> = services
        .retired()
        .iter()
        .map(|r| Process {
            id: r.id,
            replica: &r.process,
            crashed: true,
            installs: r.installs.clone(),
            digest: r.digest,
        })
        .chain(m.threads.iter().enumerate().map(|(i, t)| Process {
            id: i as u16,
            replica: &t.process,
            crashed: !m.is_up(t.node),
            installs: services.installs(i),
            digest: services.digest(i),
        }))
        .collect();
    let replicas: Vec<ReplicaReport> = processes
        .iter()
        .map(|p| {
            let r = p.replica;
            ReplicaReport {
                id: p.id,
                incarnation: r.incarnation(),
                crashed: p.crashed,
                applied: r.applied.iter().map(|(s, v)| (*s, hex(v))).collect(),
                applied_at: r.applied_at.clone(),
                installs: p.installs.clone(),
                digest: p.digest,
                acknowledged: r.acknowledged.clone(),
                memberships: r.memberships.iter().map(|&(s, m)| (s, m.0)).collect(),
                members: r.members_at(r.next_apply()).0,
            }
        })
        .collect();
    let proposed: Vec<String> = processes
        .iter()
        .flat_map(|p| p.replica.proposed.iter().map(|v| hex(v)))
        .collect();
    let mut leader_changes: Vec<LeaderChange> = processes
        .iter()
        .flat_map(|p| {
            p.replica.terms_started.iter().map(move |&at| LeaderChange {
                at_ns: at,
                leader: p.id,
            })
        })
        .collect();
    leader_changes.sort_by_key(|c| (c.at_ns, c.leader));
    let mut failures = Vec::new();
    let mut checks = check_from(services.origin(), &replicas, &proposed, &mut failures);
    if spec.lease_reads {
        let fresh = services.check_reads(&replicas, &mut failures);
        checks.insert("lease_reads".to_string(), fresh);
    }
    let shape = spec.log.shape();
    let frozen_slots = (0..spec.log.slots)
        .filter(|&slot| {
            (0..spec.log.replicas).any(|r| {
                m.read(shape.acceptor_word(r, slot))
                    .is_some_and(|w| Freezer::is_frozen(spec.log.layout, w))
            })
        })
        .count() as u64;
    ClusterReport {
        seed: spec.seed,
        duration_ns: spec.duration_ns,
        replicas,
        proposed,
        leader_changes,
        checks,
        lease_reads: services.read_counts(),
        failures,
        steps: sim.steps(),
        frozen_slots,
        durable: None,
    }
}

/// The safety checks over what the replicas applied; `failures` gets a line per violation.
pub fn check(
    replicas: &[ReplicaReport],
    proposed: &[String],
    failures: &mut Vec<String>,
) -> BTreeMap<String, bool> {
    check_from(Origin::default(), replicas, proposed, failures)
}

/// [`check`] of a log that starts at `origin` (a copied snapshot holds the state the
/// recovered log and the decided entries below its point make).
pub fn check_from(
    origin: Origin,
    replicas: &[ReplicaReport],
    proposed: &[String],
    failures: &mut Vec<String>,
) -> BTreeMap<String, bool> {
    let proposed: BTreeSet<&str> = proposed.iter().map(String::as_str).collect();
    let logs: Vec<AppliedLog> = replicas
        .iter()
        .map(|r| AppliedLog {
            replica: r.id,
            entries: r.applied.clone(),
            jumps: r.installs.iter().map(|&(point, _)| point).collect(),
        })
        .collect();
    let mut run = |found: Vec<String>| {
        let ok = found.is_empty();
        failures.extend(found);
        ok
    };
    let agreement = run(crate::check::agreement(&logs));
    let validity = run(crate::check::validity(&logs, &proposed));
    let integrity = run(crate::check::integrity(&logs));
    let no_holes = run(crate::check::no_holes(&logs));
    let mut decided: BTreeMap<u64, (&str, u16)> = BTreeMap::new();
    for r in replicas {
        for (slot, value) in &r.applied {
            decided.entry(*slot).or_insert((value, r.id));
        }
    }
    // Membership: a slot is a configuration entry for every replica that applied it or for
    // none, with the same members (its entry is empty, so agreement cannot tell).
    let mut configs: BTreeMap<u64, (u64, u16)> = BTreeMap::new();
    let mut membership = true;
    for r in replicas {
        for &(slot, mask) in &r.memberships {
            match configs.get(&slot) {
                Some(&(m, other)) if m != mask => {
                    membership = false;
                    failures.push(format!(
                        "slot {slot}: replica {other} applied members {m:#x}, replica {} {mask:#x}",
                        r.id
                    ));
                }
                _ => {
                    configs.insert(slot, (mask, r.id));
                }
            }
        }
    }
    // Lemma (one change at a time): each configuration decided adds or removes exactly
    // one replica of the one decided before it (a change computed from a configuration
    // already replaced, or the same change decided twice, breaks it).
    for ((a, (before, _)), (b, (after, _))) in configs.iter().zip(configs.iter().skip(1)) {
        if (before ^ after).count_ones() != 1 {
            membership = false;
            failures.push(format!(
                "slot {b}: members {after:#x} after {before:#x} at slot {a}: not one change"
            ));
        }
    }
    for r in replicas {
        let applied: BTreeSet<u64> = r.applied.iter().map(|&(s, _)| s).collect();
        let own: BTreeSet<u64> = r.memberships.iter().map(|&(s, _)| s).collect();
        for &slot in configs.keys() {
            if applied.contains(&slot) && !own.contains(&slot) {
                membership = false;
                failures.push(format!(
                    "replica {}: slot {slot} applied as a no-op, a configuration entry elsewhere",
                    r.id
                ));
            }
        }
    }
    // A copied snapshot holds exactly the decided entries below its point.
    let mut snapshots = true;
    for r in replicas {
        for &(point, digest) in &r.installs {
            let entries: Option<Vec<(u64, &str)>> = (0..point)
                .map(|s| decided.get(&s).map(|&(v, _)| (s, v)))
                .collect();
            match entries {
                Some(entries) if digest_from(origin, &entries) != digest => {
                    snapshots = false;
                    failures.push(format!(
                        "replica {}: the snapshot it copied at {point} is not the log below it",
                        r.id
                    ));
                }
                _ => {} // some entry below the point was applied by nobody: unverifiable
            }
        }
    }
    BTreeMap::from([
        ("agreement".to_string(), agreement),
        ("validity".to_string(), validity),
        ("integrity".to_string(), integrity),
        ("no_holes".to_string(), no_holes),
        ("snapshots".to_string(), snapshots),
        ("membership".to_string(), membership),
    ])
}
