//! A Velos cluster on the simulation driver: replicas on the rdma-rmw emulator, faults,
//! and the checks every run ends with (agreement, validity, integrity, no holes).

use crate::check::AppliedLog;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use velos_core::AcceptorState;
use velos_core::freeze::Freezer;
use velos_core::log::membership::Members;
use velos_core::log::{ClientScript, LogConfig, Replica};
use velos_rdma::{NodeId, Shared};
use velos_sim::latency::LatencyModel;
use velos_sim::machine::{CrashMode, Machine};
use velos_sim::simulate::{Fault, ScheduledFault, SimConfig, Simulator};

pub use super::service::Services;
use super::service::digest_of;

/// One simulated run.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    /// The log.
    pub log: LogConfig,
    /// The seed: it fixes the whole run.
    pub seed: u64,
    /// Virtual time to run (ns).
    pub duration_ns: u64,
    /// Crash whichever replica leads at this time.
    pub crash_leader_at: Option<u64>,
    /// Crash these replicas at these times.
    pub crashes: Vec<(u16, u64)>,
    /// Slow these replicas down for the whole run: every step of an operation towards
    /// one costs this much more (ns).
    pub slow: Vec<(u16, u64)>,
    /// Values each replica proposes while it leads.
    pub client: ClientScript,
    /// Step costs.
    pub latency: LatencyModel,
    /// Start every slot's words (epoch 0) promised to a proposal number this far below the
    /// overflow threshold, and the last replica's at the threshold itself (as if promised
    /// to a proposer that then vanished): the run drives slots over it, into the overflow
    /// fallback, some of them after a value was chosen in epoch 0.
    pub near_overflow: Option<u64>,
    /// Place every replica's acceptor words and value buffers in NIC device memory (the
    /// paper's option: the responder skips PCIe on them; see
    /// [`LatencyModel::device_mem_access_ns`]).
    pub device_memory: bool,
    /// Pause these replicas' CPUs: `(replica, at_ns, duration_ns)` ([`Fault::Pause`]).
    pub pauses: Vec<(u16, u64, u64)>,
    /// Run a service on every replica (a digest of the entries applied) that snapshots
    /// every this many entries, so that the log's ring recycles and a replica that falls
    /// off it copies a snapshot (`log.max_snapshot_bytes` must hold `snapshot_bytes`).
    pub snapshot_every: Option<u64>,
    /// The size of the service's snapshots: its 8-byte digest, padded with filler derived
    /// from it (checked when a copy is restored), so that copies of many words are tried.
    pub snapshot_bytes: usize,
    /// Ask every replica for a lease read every 2 µs and check every read served against
    /// the entries applied anywhere before it was asked (`log.lease_ns` sets the leases).
    pub lease_reads: bool,
    /// Membership changes: `(at_ns, members)`, in time order. From `at_ns` on, whichever
    /// replica leads is asked (every 2 µs until it takes it) to propose the change
    /// ([`Replica::propose_members`]); `log.members` are the first members.
    pub reconfigure: Vec<(u64, Members)>,
}

impl ClusterSpec {
    /// A fault-free run of `log` for `duration_ns` with `client`'s values, on the
    /// `cluster` latency profile, without services; set the other fields with struct
    /// update syntax.
    pub fn new(log: LogConfig, seed: u64, duration_ns: u64, client: ClientScript) -> ClusterSpec {
        ClusterSpec {
            log,
            seed,
            duration_ns,
            crash_leader_at: None,
            crashes: Vec::new(),
            slow: Vec::new(),
            client,
            latency: LatencyModel::cluster(),
            near_overflow: None,
            device_memory: false,
            pauses: Vec::new(),
            snapshot_every: None,
            snapshot_bytes: 8,
            lease_reads: false,
            reconfigure: Vec::new(),
        }
    }
}

/// What a replica applied.
#[derive(Clone, Debug, Serialize)]
pub struct ReplicaReport {
    /// The replica.
    pub id: u16,
    /// Whether it was crashed at the end.
    pub crashed: bool,
    /// Every entry applied, in order: `[slot, value as hex]`.
    pub applied: Vec<(u64, String)>,
    /// When each entry was applied (ns).
    #[serde(skip)]
    pub applied_at: Vec<u64>,
    /// Snapshots it copied from others: `(point, digest)` (the service's state below it).
    pub installs: Vec<(u64, u64)>,
    /// Its service's next entry and digest at the end (`(0, 0)` without a service).
    pub digest: (u64, u64),
    /// `(slot, ns)`: its proposals decided while it led, when their clients could first
    /// have been told.
    #[serde(skip)]
    pub acknowledged: Vec<(u64, u64)>,
    /// The configuration entries it applied: `(slot, member mask)`.
    pub memberships: Vec<(u64, u64)>,
    /// The members of its next slot at the end, as it knows them (mask).
    pub members: u64,
}

/// A leader change: `leader` started leading at `at_ns`.
#[derive(Clone, Debug, Serialize)]
pub struct LeaderChange {
    /// When (ns).
    pub at_ns: u64,
    /// Who.
    pub leader: u16,
}

/// The result of a run.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterReport {
    /// The seed.
    pub seed: u64,
    /// Virtual time run (ns).
    pub duration_ns: u64,
    /// Per replica.
    pub replicas: Vec<ReplicaReport>,
    /// Every value proposed, as hex.
    pub proposed: Vec<String>,
    /// Leader changes in time order.
    pub leader_changes: Vec<LeaderChange>,
    /// The checks: name → pass.
    pub checks: BTreeMap<String, bool>,
    /// Lease reads served and refused (with `lease_reads`).
    pub lease_reads: (u64, u64),
    /// What failed, in words.
    pub failures: Vec<String>,
    /// Emulator steps taken.
    pub steps: u64,
    /// Slots whose epoch-0 word ended frozen at some replica (the overflow fallback ran).
    pub frozen_slots: u64,
}

impl ClusterReport {
    /// Whether every check passed.
    pub fn ok(&self) -> bool {
        self.checks.values().all(|&ok| ok)
    }
}

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
    sim.faults = spec
        .crashes
        .iter()
        .map(|&(node, at_ns)| ScheduledFault {
            at_ns,
            fault: Fault::Crash {
                node: NodeId(node),
                mode: CrashMode::Hang,
            },
        })
        .chain(spec.slow.iter().map(|&(node, extra_ns)| ScheduledFault {
            at_ns: 0,
            fault: Fault::Delay {
                node: NodeId(node),
                extra_ns,
                duration_ns: spec.duration_ns,
            },
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
