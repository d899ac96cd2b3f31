//! A Velos cluster on the simulation driver: replicas on the rdma-rmw emulator, faults,
//! and the checks every run ends with (agreement, validity, integrity, no holes).

use crate::check::AppliedLog;
use std::collections::{BTreeMap, BTreeSet};
use velos_core::AcceptorState;
use velos_core::freeze::Freezer;
use velos_core::log::Replica;
use velos_rdma::{NodeId, Shared};
use velos_sim::machine::{CrashMode, Machine};
use velos_sim::simulate::{Fault, ScheduledFault, SimConfig, Simulator};

pub use super::report::{ClusterReport, LeaderChange, ReplicaReport};
pub use super::service::Services;
use super::service::digest_of;
pub use super::spec::ClusterSpec;

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs `spec` and checks the outcome.
pub fn run(spec: &ClusterSpec) -> ClusterReport {
    let mut sim = Simulator::new(machine(spec), sim_config(spec));
    let mut services = Services::new(spec);
    if let Some(at) = spec.crash_leader_at.filter(|&at| at < spec.duration_ns) {
        services.run(&mut sim, at);
        crash_leader(&mut sim);
    }
    services.run(&mut sim, spec.duration_ns);
    report_with(spec, &sim, &services)
}

/// Crashes whichever live replica leads now (its operations hang); the one crashed, if
/// any replica leads.
pub fn crash_leader(sim: &mut Simulator<Replica>) -> Option<u16> {
    let m = sim.machine();
    let leader = m
        .threads
        .iter()
        .position(|t| m.is_up(t.node) && t.process.is_leader())?;
    let node = NodeId(u16::try_from(leader).expect("replica ids are u16"));
    sim.inject(Fault::Crash {
        node,
        mode: CrashMode::Hang,
    });
    Some(node.0)
}

/// The machine of `spec`: replica r on node r (thread r), the initial words, and the
/// device-memory placement.
pub fn machine(spec: &ClusterSpec) -> Machine<Replica> {
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
        let mut replica = Replica::new(config.clone(), r, spec.client.clone())
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
pub fn report(spec: &ClusterSpec, sim: &Simulator<Replica>) -> ClusterReport {
    report_with(spec, sim, &Services::new(spec))
}

/// [`report`] of a run with `services` on its replicas.
pub fn report_with(
    spec: &ClusterSpec,
    sim: &Simulator<Replica>,
    services: &Services,
) -> ClusterReport {
    let m = sim.machine();
    let replicas: Vec<ReplicaReport> = m
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| ReplicaReport {
            id: i as u16,
            crashed: !m.is_up(t.node),
            applied: t
                .process
                .applied
                .iter()
                .map(|(s, v)| (*s, hex(v)))
                .collect(),
            applied_at: t.process.applied_at.clone(),
            installs: services.installs(i),
            digest: services.digest(i),
            acknowledged: t.process.acknowledged.clone(),
            memberships: t
                .process
                .memberships
                .iter()
                .map(|&(s, m)| (s, m.0))
                .collect(),
            members: t.process.members_at(t.process.next_apply()).0,
        })
        .collect();
    let proposed: Vec<String> = m
        .threads
        .iter()
        .flat_map(|t| t.process.proposed.iter().map(|v| hex(v)))
        .collect();
    let mut leader_changes: Vec<LeaderChange> = m
        .threads
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            t.process.terms_started.iter().map(move |&at| LeaderChange {
                at_ns: at,
                leader: i as u16,
            })
        })
        .collect();
    leader_changes.sort_by_key(|c| (c.at_ns, c.leader));
    let mut failures = Vec::new();
    let mut checks = check(&replicas, &proposed, &mut failures);
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
    }
}

/// The safety checks over what the replicas applied; `failures` gets a line per violation.
pub fn check(
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
                Some(entries) if digest_of(&entries) != digest => {
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
