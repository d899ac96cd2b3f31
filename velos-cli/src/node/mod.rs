//! One replica of a Velos log as an operating-system process over real RDMA (`velos node`):
//! read the cluster file, register this node's memory, exchange connection information with
//! the other processes and connect the queue pairs ([`velos::connect`]), then drive the same
//! [`Replica`](velos_core::log::Replica) the simulator runs, on a verbs endpoint. Committed entries are reported as
//! they are applied.
//!
//! The verbs backend is velos-rdma's `verbs` feature; a build without it refuses to run a
//! node with [`NodeError::NoVerbs`] (the simulator and the in-process backend need no RDMA).

pub mod client;
pub mod embed;
mod event;

pub use client::Client;
pub use event::{Event, LatencySummary, NodeStatus};
use std::time::Duration;
use velos::cluster_file::ClusterFile;
pub use velos::join::Start;
use velos_core::log::LogConfig;

/// What `velos node` runs.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    /// The cluster.
    pub cluster: ClusterFile,
    /// This node's id.
    pub id: u16,
    /// The log's shape and timing (the same on every node).
    pub log: LogConfig,
    /// The tiny built-in client: what this node proposes while it leads.
    pub client: Client,
    /// Values the client proposes ([`Client::Script`], [`Client::ClosedLoop`]).
    pub values: u64,
    /// Bytes per value.
    pub value_size: usize,
    /// Stop after this long (wall clock).
    pub run_for: Duration,
    /// How long to wait for the other processes at connection setup.
    pub rendezvous_timeout: Duration,
    /// With the cluster, into it running in a crashed replica's place (`--join`), or
    /// with it again after a power loss of every node (`--recover`).
    pub start: Start,
    /// Where the replica keeps its durable log (`--data-dir`, through the embedding
    /// handle only): `DIR/replica-ID`.
    pub data_dir: Option<std::path::PathBuf>,
    /// Every this many slots the service's snapshot goes to the log (`--snapshot-every`,
    /// through the embedding handle only; `None`: the handle's default).
    pub snapshot_every: Option<u64>,
}

/// Why a node could not run.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// This build has no verbs backend.
    #[error(
        "this build of velos has no RDMA backend: rebuild with `cargo build --release --features verbs`"
    )]
    NoVerbs,
    /// The specification is unusable.
    #[error("{0}")]
    Spec(String),
    /// Connection setup failed.
    #[error(transparent)]
    Connect(#[from] velos::connect::ConnectError),
    /// The RDMA backend failed.
    #[error("rdma: {0}")]
    Rdma(String),
}

impl NodeSpec {
    /// Checks the specification: the id is in the cluster file, the log configuration is
    /// valid for the file's node count, the client values fit.
    pub fn check(&self) -> Result<(), NodeError> {
        if self.cluster.node(self.id).is_none() {
            return Err(NodeError::Spec(format!(
                "node {} is not in the cluster file (nodes 0 to {})",
                self.id,
                self.cluster.len() - 1
            )));
        }
        if usize::from(self.log.replicas) != self.cluster.len() {
            return Err(NodeError::Spec(format!(
                "the log has {} replicas, the cluster file {} nodes",
                self.log.replicas,
                self.cluster.len()
            )));
        }
        self.log.validate().map_err(NodeError::Spec)?;
        if self.values > 0 && !(10..=self.log.max_value_bytes as usize).contains(&self.value_size) {
            return Err(NodeError::Spec(format!(
                "values of {} bytes: 10 to {} fit",
                self.value_size, self.log.max_value_bytes
            )));
        }
        Ok(())
    }
}

/// What a node did, once it stops.
#[derive(Clone, Debug, Default)]
pub struct NodeReport {
    /// Entries applied (commands, with `--embed`).
    pub applied: u64,
    /// The embedding handle's counters (`--embed`).
    pub embedded: Option<velos::embed::MetricsSnapshot>,
    /// The closed-loop client's decision latencies, if it decided anything.
    pub latency: Option<LatencySummary>,
    /// RDMA work requests posted (of which signaled, of which flushes) and the doorbells
    /// that handed them to the NIC.
    pub work_requests: velos_rdma::WorkRequests,
}

/// Runs the node until `spec.run_for` has passed; `on_event` sees every entry applied, in
/// order, and the client's reports.
pub fn run(spec: &NodeSpec, on_event: impl FnMut(Event)) -> Result<NodeReport, NodeError> {
    spec.check()?;
    if spec.data_dir.is_some() || spec.start == Start::Recover || spec.snapshot_every.is_some() {
        return Err(NodeError::Spec(
            "a durable log (--data-dir, --recover) and snapshots (--snapshot-every) run \
             through the embedding handle: add --embed"
                .into(),
        ));
    }
    run_verbs(spec, on_event)
}

#[cfg(not(feature = "verbs"))]
fn run_verbs(_spec: &NodeSpec, _on_event: impl FnMut(Event)) -> Result<NodeReport, NodeError> {
    Err(NodeError::NoVerbs)
}

#[cfg(feature = "verbs")]
fn run_verbs(spec: &NodeSpec, mut on_event: impl FnMut(Event)) -> Result<NodeReport, NodeError> {
    use client::Driver;
    use std::time::Instant;
    use velos::connect::ClockFrom;
    use velos::join::{Joiners, Met, meet};
    use velos_rdma::{Endpoint, Op, Process, Reply, Shared, Step};

    let rdma = |e: &dyn std::fmt::Display| NodeError::Rdma(e.to_string());
    let met = meet(
        &spec.log,
        &spec.cluster,
        spec.id,
        spec.start,
        spec.rendezvous_timeout,
    )?;
    let mut driver = Driver::new(spec.client, spec.id, spec.values, spec.value_size);
    let mut replica = met
        .replica(Shared::new(spec.log.clone()), spec.id)
        .map_err(NodeError::Spec)?;
    if met.incarnations.is_some() {
        on_event(Event::Joined {
            joined: replica.incarnation(),
        });
    }
    let mut voting = replica.votes();
    // Processes that join later: met on the listener, handled between two operations.
    let Met {
        node,
        listener,
        mut late,
        ..
    } = met;
    let mut joiners = Joiners::serve(spec.cluster.clone(), spec.id, listener)
        .map_err(|e| NodeError::Rdma(format!("rendezvous: {e}")))?;
    // The endpoint's clock counts from `VerbsNode::open`, before the rendezvous (seconds
    // under emulation); restarted now, or every peer is suspected at the first turn and
    // each replica briefly leads.
    let endpoint = node.endpoint(0).map_err(|e| rdma(&e))?;
    let mut endpoint =
        ClockFrom::now(endpoint).map_err(|r| NodeError::Rdma(format!("the clock: {r:?}")))?;
    let started = Instant::now();
    let mut reply = Reply::Start;
    let mut applied = 0u64;
    while started.elapsed() < spec.run_for {
        driver.pump(&mut replica, endpoint.inner.work_requests(), &mut on_event);
        let op = match replica.resume(reply) {
            Step::Done => break,
            Step::Op(op) => op,
        };
        if matches!(op, Op::Now) && joiners.pending() {
            for (replaced, incarnation) in joiners.handle(&mut endpoint.inner, &mut replica) {
                on_event(Event::Replaced {
                    replaced,
                    incarnation,
                });
            }
        }
        // A joiner: the nodes it did not meet at the join, met since.
        if let Some(late) = late
            .as_mut()
            .filter(|l| matches!(op, Op::Now) && l.pending())
        {
            for (met, incarnation) in late.handle(&mut endpoint.inner, &mut replica) {
                on_event(Event::MetLate { met, incarnation });
            }
        }
        reply = endpoint.execute(&op);
        let mut any = false;
        for (slot, entry) in replica.take_committed() {
            any = true;
            applied += 1;
            on_event(Event::Committed {
                slot,
                value: entry.iter().map(|b| format!("{b:02x}")).collect(),
            });
        }
        if any && !voting && replica.votes() {
            voting = true;
            on_event(Event::Voting {
                voting: replica.incarnation(),
            });
        }
    }
    Ok(NodeReport {
        applied,
        latency: driver.latency(),
        embedded: None,
        work_requests: endpoint.inner.work_requests(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: u16) -> NodeSpec {
        let text = "cluster_id = \"t\"\nsecret = \"0123456789abcdef\"\n[[node]]\nid = 0\naddress = \"127.0.0.1:1\"\n\
                    [[node]]\nid = 1\naddress = \"127.0.0.1:2\"\n\
                    [[node]]\nid = 2\naddress = \"127.0.0.1:3\"\n";
        NodeSpec {
            cluster: ClusterFile::parse(text, "t.toml").unwrap(),
            id,
            log: LogConfig::new(3, 64, 16),
            client: Client::Script,
            values: 1,
            value_size: 16,
            run_for: Duration::from_millis(1),
            rendezvous_timeout: Duration::from_millis(1),
            start: Start::WithCluster,
            data_dir: None,
            snapshot_every: None,
        }
    }

    #[test]
    fn a_bad_specification_is_refused_with_its_reason() {
        assert!(spec(0).check().is_ok());
        let e = spec(5).check().unwrap_err().to_string();
        assert!(e.contains("node 5 is not in the cluster file"), "{e}");
        let mut s = spec(0);
        s.log = LogConfig::new(5, 64, 16);
        assert!(s.check().unwrap_err().to_string().contains("5 replicas"));
        let mut s = spec(0);
        s.value_size = 17;
        assert!(s.check().unwrap_err().to_string().contains("17 bytes"));
    }

    #[cfg(not(feature = "verbs"))]
    #[test]
    fn without_the_verbs_backend_a_node_says_how_to_get_it() {
        let e = run(&spec(0), |_| {}).unwrap_err().to_string();
        assert!(e.contains("--features verbs"), "{e}");
    }
}
