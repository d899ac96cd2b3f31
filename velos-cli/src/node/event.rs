//! What a node reports as it runs, one JSON line per event (`velos node`): the events,
//! a node's status and a latency summary.

/// What a node reports as it runs.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum Event {
    /// An entry applied (in slot order, without gaps).
    Committed {
        /// The slot.
        slot: u64,
        /// The entry, as hex (empty: a no-op).
        value: String,
    },
    /// What became of a proposal of the standard-input client (`id` counts the input's
    /// lines from 0).
    Outcome {
        /// The proposal's line number.
        proposal: u64,
        /// The slot that decided it.
        #[serde(skip_serializing_if = "Option::is_none")]
        slot: Option<u64>,
        /// Why it was refused or lost.
        #[serde(skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A command applied by a node run through the embedding handle (`--embed`), in
    /// order: `command` counts them from 0.
    Applied {
        /// The command's number.
        command: u64,
        /// The slot that decided its batch.
        slot: u64,
        /// Its place in the batch.
        index: u32,
        /// The command, as hex.
        value: String,
    },
    /// A peer's snapshot restored (`--embed`): the commands below `command` are in it and
    /// are not reported one by one.
    Restored {
        /// The number of the next command applied.
        command: u64,
    },
    /// With a durable log (`--data-dir`): every slot below `durable` is on the disks of a
    /// majority of the members, as this leader's handle waited for it.
    Durable {
        /// The slot below which the log is durable.
        durable: u64,
    },
    /// What this process's directory held when it started (`--data-dir`): the slot after
    /// its last entry, and the snapshot's point.
    Disk {
        /// The slot after the last entry read back (0: none).
        disk: u64,
        /// The newest snapshot's point, if one was there.
        #[serde(skip_serializing_if = "Option::is_none")]
        snapshot: Option<u64>,
    },
    /// This joining process resumed at the snapshot its disk kept at `resumed`
    /// (`--join --data-dir`): it reads only the log after it.
    Resumed {
        /// The snapshot's point.
        resumed: u64,
    },
    /// Once a second (`--embed`): what the node's handle reports.
    Status {
        /// The handle's view.
        status: NodeStatus,
    },
    /// A fresh process took a peer's place (`velos node --join` elsewhere): this node now
    /// reaches it, and counts the place only where a configuration names `incarnation`.
    Replaced {
        /// The peer's place.
        replaced: u16,
        /// The new process's incarnation.
        incarnation: u64,
    },
    /// This joiner reached `met` only after it joined (the node was down or slow then: a
    /// join needs a majority of the cluster file): it now reaches it too.
    MetLate {
        /// The node.
        met: u16,
        /// Its process's incarnation.
        incarnation: u64,
    },
    /// This process joined the running cluster (`--join`) at `joined`, its incarnation.
    Joined {
        /// Its incarnation.
        joined: u64,
    },
    /// This process votes from now on: a decided configuration names its incarnation.
    Voting {
        /// Its incarnation.
        voting: u64,
    },
    /// The closed-loop client proposed all its values.
    Latency {
        /// Its decision latencies.
        latency: LatencySummary,
    },
}

/// A node's state as its embedding handle reports it (`--embed`).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct NodeStatus {
    /// Seconds since the node started.
    pub at_s: f64,
    /// The leader it trusts.
    pub leader: u16,
    /// Whether it leads.
    pub leading: bool,
    /// Commands applied.
    pub applied: u64,
    /// Commands committed at its proposal.
    pub committed: u64,
    /// Commands refused unproposed.
    pub refused: u64,
    /// Times it became the leader.
    pub leader_changes: u64,
    /// The client's proposals waiting for an outcome.
    pub outstanding: usize,
}

/// A latency summary, in microseconds.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LatencySummary {
    /// Decisions measured.
    pub count: u64,
    /// Median.
    pub p50_us: f64,
    /// 90th percentile.
    pub p90_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Largest.
    pub max_us: f64,
    /// RDMA work requests the node posted per decision, from the first proposal to the
    /// last decision (heartbeats and reads included), if the node counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests_per_decision: Option<f64>,
    /// Doorbells (hand-overs of a list of work requests to a queue pair) the node rang
    /// per decision, over the same span, if it counts them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doorbells_per_decision: Option<f64>,
}
