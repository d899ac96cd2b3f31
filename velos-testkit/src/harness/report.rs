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
}

impl ClusterReport {
    /// Whether every check passed.
    pub fn ok(&self) -> bool {
        self.checks.values().all(|&ok| ok)
    }
}
