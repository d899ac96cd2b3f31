//! What one simulated cluster run reports: per replica, the leader changes, the checks
//! ([`ClusterReport`]; made by [`super::cluster::run`]).

use serde::Serialize;
use std::collections::BTreeMap;

/// What a replica applied.
#[derive(Clone, Debug, Serialize)]
pub struct ReplicaReport {
    /// The replica.
    pub id: u16,
    /// Its process's incarnation: 0 for the processes the run started with, one more for
    /// each process started blank in the replica's place (each is its own entry).
    pub incarnation: u64,
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
    /// A durable run's figures ([`super::durable::run`]).
    pub durable: Option<DurableReport>,
}

/// What the disks of a durable run showed (log slots; virtual time).
#[derive(Clone, Debug, Serialize)]
pub struct DurableReport {
    /// Each replica's durable point at the end (or when the power went).
    pub points: Vec<u64>,
    /// The durable index then: every slot below it is on a majority's disks.
    pub durable: u64,
    /// Slots their leader acknowledged that became durable, and that did not (by the
    /// end, or the power loss).
    pub acknowledged_durable: u64,
    /// See `acknowledged_durable`.
    pub acknowledged_not_durable: u64,
    /// From a slot's acknowledgement by its leader to the durable index passing it, as
    /// the harness sees it every 2 µs: median and 99th percentile (ns).
    pub ack_to_durable_p50_ns: Option<u64>,
    /// See `ack_to_durable_p50_ns`.
    pub ack_to_durable_p99_ns: Option<u64>,
    /// Replaced processes that resumed at their disk's newest snapshot.
    pub resumed: usize,
    /// The whole-cluster power loss and the restart from disk, if there was one.
    pub power_loss: Option<PowerLossReport>,
}

/// A whole-cluster power loss and the restart from disk.
#[derive(Clone, Debug, Serialize)]
pub struct PowerLossReport {
    /// When the power went (ns).
    pub at_ns: u64,
    /// The log's next slot as the replicas had decided it then.
    pub decided: u64,
    /// The next slot each disk's log recovered to.
    pub recovered_by_disk: Vec<u64>,
    /// The next slot of the log they hold together: the restarted log starts there.
    pub recovered: u64,
    /// Records cut or files passed over by the recoveries.
    pub cuts: usize,
    /// Disks that had stopped persisting (full) when the power went.
    pub stopped: usize,
    /// The replica whose disk had a bit flipped at the power loss, if one had.
    pub flipped: Option<u16>,
    /// Recovered snapshots checked against the decided log.
    pub snapshots_checked: usize,
    /// From the restart to the first slot a leader acknowledged (ns).
    pub first_decision_ns: Option<u64>,
    /// Slots the restarted cluster decided.
    pub decided_after: u64,
    /// The restarted cluster's run, for the rest of the duration (its clock from the
    /// restart; its engine's slot 0 is the log's `recovered`), with its checks and its
    /// durability figures.
    pub restarted: Option<Box<ClusterReport>>,
}

impl ClusterReport {
    /// Whether every check passed.
    pub fn ok(&self) -> bool {
        self.checks.values().all(|&ok| ok)
    }
}
