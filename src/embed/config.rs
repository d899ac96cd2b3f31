//! How an embedded cluster is set up: the log, the batching, the backend.

use super::batch::{Packing, max_command_bytes};
use super::error::member_ids;
use super::session::Sessions;
use super::state_machine::StateMachine;
use crate::cluster_file::ClusterFile;
pub use crate::join::Start;
use std::path::PathBuf;
use std::time::Duration;
use velos_core::log::{Detector, LogConfig, MAX_PENDING};
use velos_sim::latency::LatencyModel;

/// The group-commit pause of [`Config::group_commit`] unless set.
pub const DEFAULT_GROUP_COMMIT: Duration = Duration::from_millis(1);

/// The longest group-commit pause (entries not waited for reach the disks that late).
pub const MAX_GROUP_COMMIT: Duration = Duration::from_secs(1);

/// Where the replicas run.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// Threads over the in-process RDMA backend (`velos_rdma::mem`), one per replica,
    /// with the same region plans as over real verbs. Real time.
    Mem,
    /// Every replica on the rdma-rmw emulator (`velos_sim`), advanced by one thread in
    /// virtual time: for tests. See [`EmulatorConfig`] for what is deterministic.
    Emulator(EmulatorConfig),
    /// One replica in this process over real RDMA (velos-rdma's `verbs` feature): a
    /// deployment runs one process per replica, each starting a
    /// [`Node`](super::Node) with the same cluster file and log. Real time.
    Verbs(VerbsConfig),
}

/// The verbs backend: where this process's replica is in the cluster and how the
/// processes meet (the cluster file's addresses, for the connection set-up only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerbsConfig {
    /// Every replica's process: ids 0.. and rendezvous addresses.
    pub cluster: ClusterFile,
    /// This process's replica.
    pub id: u16,
    /// How long the start waits for the other processes to connect.
    pub rendezvous_timeout: Duration,
    /// Whether this process starts with the cluster or joins it running.
    pub start: Start,
}

/// The emulator backend: one thread owns the simulator and advances virtual time in
/// quanta; between quanta it takes the commands that arrived and hands out outcomes.
///
/// Deterministic: the run is a function of the seed, the configuration and the virtual
/// times at which commands are taken. Not deterministic: those times, because commands
/// arrive from other threads on the wall clock. A single client that proposes one command
/// at a time is taken at the same virtual time in practice (the driver waits
/// [`EmulatorConfig::idle_wait`] for it before advancing an idle cluster), but nothing
/// guarantees it; tests must not assert on the emulator's trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EmulatorConfig {
    /// The simulator's seed.
    pub seed: u64,
    /// Step costs.
    pub latency: LatencyModel,
    /// Virtual time advanced between looks at the command channel (ns).
    pub quantum_ns: u64,
    /// How long (wall clock) an idle cluster waits for a command before advancing a
    /// quantum anyway (elections and failure detection need time to pass).
    pub idle_wait: Duration,
}

impl EmulatorConfig {
    /// The cluster latency profile, quanta of 5 µs, idle waits of 1 ms.
    pub fn new(seed: u64) -> EmulatorConfig {
        EmulatorConfig {
            seed,
            latency: LatencyModel::cluster(),
            quantum_ns: 5_000,
            idle_wait: Duration::from_millis(1),
        }
    }
}

/// How a leader packs waiting commands into log entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchConfig {
    /// Commands per batch at most (1: no batching).
    pub max_commands: u32,
    /// Encoded bytes per batch at most; 0: the log's `max_value_bytes`.
    pub max_bytes: u32,
    /// How long the oldest waiting command may wait for company; zero: a batch goes out
    /// as soon as the pipeline has room (under load batches grow by themselves while the
    /// pipeline is full). Measured on the backend's clock (virtual on the emulator).
    pub max_delay: Duration,
    /// Batches a leader keeps proposed and undecided at most (the pipeline).
    pub max_in_flight: u32,
    /// Slots a leader may apply ahead of its best live follower before it holds new
    /// batches back (0: no bound). Followers learn about one slot per turn; without a
    /// bound a loaded leader runs thousands of slots ahead, and after its crash the next
    /// leader decides all of them again before its first new commit. Held back, commands
    /// gather into bigger batches instead.
    pub follower_lag_slots_max: u32,
}

impl Default for BatchConfig {
    fn default() -> BatchConfig {
        BatchConfig {
            max_commands: 64,
            max_bytes: 0,
            max_delay: Duration::ZERO,
            max_in_flight: 8,
            follower_lag_slots_max: 64,
        }
    }
}

/// An embedded cluster's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The log: replicas, slots, value size, timing. Its timing is in nanoseconds of the
    /// backend's clock: wall-clock on [`Backend::Mem`], virtual on the emulator.
    pub log: LogConfig,
    /// Batching and pipelining.
    pub batch: BatchConfig,
    /// Where the replicas run.
    pub backend: Backend,
    /// How long [`Receipt::wait`](super::Receipt::wait) and
    /// [`Cluster::submit`](super::Cluster::submit) wait at most.
    pub wait_timeout: Duration,
    /// Every this many slots each replica hands its state machine's snapshot to the log
    /// (0: never, and the log ends after `log.slots` entries): the log's ring then reuses
    /// slots once a majority's snapshots hold them, and a replica that falls off the ring
    /// copies a peer's. A snapshot must fit `log.max_snapshot_bytes`: the start refuses a
    /// state machine whose first snapshot would not, and once a later one is refused
    /// ([`MetricsSnapshot::snapshots_refused`](super::MetricsSnapshot)) commands fail at
    /// once with [`Error::SnapshotTooLarge`](super::Error::SnapshotTooLarge), which names
    /// the sizes, until one fits again. Size `log.max_snapshot_bytes`
    /// for the state: each replica registers two banks of it and `⌈replicas / 2⌉`
    /// incoming ones (the pages are touched only as snapshots fill them); a 64 MiB state
    /// works (`tests/large_snapshots.rs`). The replica writes a snapshot into its bank
    /// 32 KiB per turn, so deciding goes on meanwhile; the state machine's own
    /// [`snapshot`](super::StateMachine::snapshot) runs between turns. Default: a quarter
    /// of the ring. A copy reads a bank in rounds of 64 to 1,024 words, one round trip
    /// each, and tears if the source rewrites its bank meanwhile (every second snapshot):
    /// a replica that fell off the ring rejoins under load only if snapshots come less
    /// often than that.
    pub snapshot_every_slots: u64,
    /// Client sessions every replica keeps ([`Cluster::session`](super::Cluster)): the
    /// most recently used ones; a command of an older session answers
    /// [`Error::SessionExpired`](super::Error::SessionExpired) instead of applying. Each
    /// takes 24 bytes of every snapshot. Default: 65,536.
    pub max_sessions: usize,
    /// Where the replicas keep their durable logs ([`Config::durable`]): replica `i` in
    /// `replica-i` under it. `None` (the default): nothing is written to disk.
    pub durable_dir: Option<PathBuf>,
    /// With durability on: while nobody waits for durability, a replica's disk starts a
    /// batch at least this long after the one before, so that what arrives meanwhile
    /// shares one `fdatasync` (a durable wait cuts the pause short:
    /// [`Cluster::wait_durable`](super::Cluster::wait_durable) is not slowed by it).
    /// Entries committed but not waited for reach the disks up to this much later.
    /// Default: 1 ms; zero: a batch as soon as the one before is on disk. At most 1 s.
    pub group_commit: Duration,
}

impl Config {
    /// `replicas` replicas on the in-process backend, with timing for threads on a real
    /// clock: heartbeats every 200 µs, a fixed failure timeout of 50 ms (threads can be
    /// descheduled for milliseconds; an adaptive timeout would suspect them), idle pauses
    /// of 20 µs, catch-up reads after 2 ms; 16,384 slots of 256 bytes, 8 pre-prepared;
    /// no leases.
    ///
    /// Its limits: a command of at most 253 bytes (233 in a client session, whose
    /// envelope takes up to 20), batches of at most 64 commands and 256 bytes (25 commands
    /// of 9 bytes), snapshots — the state and 24 bytes per client session kept — of at
    /// most 1 MiB (taken every 4,096 slots; the start refuses a state that does not fit,
    /// and commands fail at once once a snapshot was refused), 65,536 sessions kept,
    /// waits of at most 10 s. Every default and what follows from it:
    /// [limits and defaults](super#limits-and-defaults).
    pub fn new(replicas: u16) -> Config {
        let mut log = LogConfig::new(replicas, 1 << 14, 256);
        log.max_snapshot_bytes = 1 << 20;
        log.pipeline = 8;
        log.heartbeat_period_ns = 200_000;
        log.failure_timeout_ns = 50_000_000;
        log.detector = Detector::Fixed;
        log.idle_pause_ns = 20_000;
        log.catch_up_after_ns = 2_000_000;
        Config {
            log,
            batch: BatchConfig::default(),
            backend: Backend::Mem,
            wait_timeout: Duration::from_secs(10),
            snapshot_every_slots: 1 << 12,
            max_sessions: 1 << 16,
            durable_dir: None,
            group_commit: DEFAULT_GROUP_COMMIT,
        }
    }

    /// `replicas` replicas on the emulator with `seed`, with the engine's own (virtual,
    /// microsecond) timing ([`LogConfig::new`]), 1,024 slots, 64 KiB snapshots every 256
    /// slots ([limits and defaults](super#limits-and-defaults)).
    pub fn emulator(replicas: u16, seed: u64) -> Config {
        let mut log = LogConfig::new(replicas, 1 << 10, 256);
        log.max_snapshot_bytes = 1 << 16;
        log.pipeline = 8;
        Config {
            log,
            batch: BatchConfig::default(),
            backend: Backend::Emulator(EmulatorConfig::new(seed)),
            wait_timeout: Duration::from_secs(10),
            snapshot_every_slots: 1 << 8,
            max_sessions: 1 << 16,
            durable_dir: None,
            group_commit: DEFAULT_GROUP_COMMIT,
        }
    }

    /// Replica `id` of the cluster of `cluster` (one per node of the file) over real
    /// RDMA, for [`Node::start`](super::Node::start): the timing of [`Config::new`]
    /// (threads on a real clock; on dedicated cores and a real NIC the log's timing can
    /// be made tighter), 30 s to meet the other processes.
    pub fn verbs(cluster: ClusterFile, id: u16) -> Config {
        let replicas = u16::try_from(cluster.len()).unwrap_or(u16::MAX);
        Config {
            backend: Backend::Verbs(VerbsConfig {
                cluster,
                id,
                rendezvous_timeout: Duration::from_secs(30),
                start: Start::WithCluster,
            }),
            ..Config::new(replicas)
        }
    }

    /// [`Config::verbs`] for a fresh process that joins the running cluster in crashed
    /// replica `id`'s place ([`Start::Join`], its incarnation the start time).
    pub fn verbs_joining(cluster: ClusterFile, id: u16) -> Config {
        let mut config = Config::verbs(cluster, id);
        if let Backend::Verbs(verbs) = &mut config.backend {
            verbs.start = Start::Join { incarnation: None };
        }
        config
    }

    /// [`Config::verbs`] for a process restarting with the others after a power loss of
    /// every replica ([`Start::Recover`]): with [`Config::durable`] on the directory the
    /// replica kept, every process of the cluster file restarting so.
    pub fn verbs_recovering(cluster: ClusterFile, id: u16) -> Config {
        let mut config = Config::verbs(cluster, id);
        if let Backend::Verbs(verbs) = &mut config.backend {
            verbs.start = Start::Recover;
        }
        config
    }

    /// The packing the leaders use, in the backend's nanoseconds.
    pub(crate) fn packing(&self) -> Packing {
        let max_value = self.log.max_value_bytes as usize;
        let max_bytes = match self.batch.max_bytes {
            0 => max_value,
            b => (b as usize).min(max_value),
        };
        Packing {
            max_commands: self.batch.max_commands,
            max_bytes,
            max_delay_ns: u64::try_from(self.batch.max_delay.as_nanos()).unwrap_or(u64::MAX),
        }
    }

    /// The largest command a batch can hold.
    pub fn max_command_bytes(&self) -> usize {
        max_command_bytes(self.packing().max_bytes).unwrap_or(0)
    }

    /// Whether replica `replica`'s state machine, as it starts, fits a snapshot (the
    /// state and the empty session table) when snapshots are taken; the reason if not:
    /// its first snapshot would be refused and the log could never reuse a slot.
    pub(crate) fn check_snapshot<S: StateMachine>(
        &self,
        replica: u16,
        machine: &S,
    ) -> Result<(), String> {
        if self.snapshot_every_slots == 0 {
            return Ok(()); // no snapshot is ever taken
        }
        let state = machine.snapshot().len();
        let table = Sessions::<S::Response>::new(self.max_sessions).snapshot(Vec::new());
        let bytes = state + table.len();
        let max = self.log.max_snapshot_bytes as usize;
        if bytes > max {
            return Err(format!(
                "replica {replica}'s state machine snapshots to {bytes} bytes at the start \
                 ({state} of state, 4 for the empty session table), more than \
                 log.max_snapshot_bytes ({max}): raise max_snapshot_bytes to at least \
                 {bytes}, or set snapshot_every_slots to 0 (a log of log.slots entries)"
            ));
        }
        Ok(())
    }

    /// This configuration with durability on: each replica appends the entries it
    /// applies, in log order, to a segment log in `dir/replica-i` and writes its
    /// snapshots there, on a thread of its own (group commit behind one `fdatasync`, off
    /// the decision path); an entry is durable once a majority of the members hold it on
    /// disk ([`Cluster::wait_durable`](super::Cluster::wait_durable)), and a cluster that
    /// lost power as a whole comes back with [`Cluster::recover`](super::Cluster::recover).
    /// A [`Node`](super::Node) keeps its replica's directory under `dir` too
    /// ([`Node::wait_durable`](super::Node::wait_durable)). Not on the emulator.
    pub fn durable(mut self, dir: impl Into<PathBuf>) -> Config {
        self.durable_dir = Some(dir.into());
        self
    }

    /// This configuration with `pause` as its group-commit pause ([`Config::group_commit`]).
    pub fn group_commit(mut self, pause: Duration) -> Config {
        self.group_commit = pause;
        self
    }

    /// Replica `replica`'s directory, with durability on.
    pub(crate) fn replica_dir(&self, replica: u16) -> Option<PathBuf> {
        let dir = self.durable_dir.as_ref()?;
        Some(dir.join(format!("replica-{replica}")))
    }

    /// Checks the configuration; the reason if it is unusable.
    pub fn validate(&self) -> Result<(), String> {
        // The log names a bad member set as a bit mask: shown as ids.
        self.log.validate().map_err(|why| member_ids(&why))?;
        if self.batch.max_commands == 0 {
            return Err("batch.max_commands must be positive".into());
        }
        if self.batch.max_in_flight == 0 || self.batch.max_in_flight as usize > MAX_PENDING {
            return Err(format!(
                "batch.max_in_flight must be 1 to {MAX_PENDING} (the engine's pending bound)"
            ));
        }
        if self.batch.max_bytes == 1 || self.packing().max_bytes < 2 {
            return Err("a batch needs at least 2 bytes (its tag and one length)".into());
        }
        if self.wait_timeout.is_zero() {
            return Err("wait_timeout must be positive".into());
        }
        match &self.backend {
            Backend::Emulator(e) if e.quantum_ns == 0 => {
                return Err("the emulator's quantum must be positive".into());
            }
            Backend::Verbs(v) => {
                if v.cluster.len() != usize::from(self.log.replicas) {
                    return Err(format!(
                        "the log has {} replicas, the cluster file {} nodes",
                        self.log.replicas,
                        v.cluster.len()
                    ));
                }
                if v.cluster.node(v.id).is_none() {
                    return Err(format!(
                        "replica {} is not in the cluster file (nodes 0 to {})",
                        v.id,
                        v.cluster.len().saturating_sub(1)
                    ));
                }
                if v.rendezvous_timeout.is_zero() {
                    return Err("the rendezvous timeout must be positive".into());
                }
            }
            _ => {}
        }
        if self.group_commit > MAX_GROUP_COMMIT {
            return Err(format!(
                "group_commit {:?}: at most {MAX_GROUP_COMMIT:?} (entries not waited for \
                 reach the disks that late)",
                self.group_commit
            ));
        }
        if self.durable_dir.is_some() && matches!(self.backend, Backend::Emulator(_)) {
            return Err(
                "durability (Config::durable) runs on the in-process and verbs backends: \
                 the emulator's runs persist on velos-sim's simulated disk (velos-testkit), \
                 not on files"
                    .into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::batch::BatchBuilder;
    use crate::embed::session::ENVELOPE_BYTES_MAX;

    /// The module docs' "Limits and defaults" state these numbers (their doc test pins the
    /// settings; this pins what follows from them, and runs with the unit tests).
    #[test]
    fn the_limits_the_docs_state_follow_from_the_defaults() {
        let c = Config::new(3);
        assert_eq!(c.max_command_bytes(), 253);
        assert_eq!(c.max_command_bytes() - ENVELOPE_BYTES_MAX, 233);
        let per_batch = |n: usize| {
            let mut b = BatchBuilder::new(c.log.max_value_bytes as usize);
            (0..).take_while(|_| b.push(&vec![0; n])).count()
        };
        assert_eq!((per_batch(9), per_batch(1)), (25, 127));
        assert_eq!(per_batch(127), 255 / 128);
        assert_eq!(per_batch(128), 1, "130 bytes each from 128 on");
        let max = c.log.max_snapshot_bytes as usize;
        assert_eq!(max, 1_048_576);
        assert_eq!(
            (max - 4) / 24,
            43_690,
            "sessions in a snapshot without state"
        );
        assert!(
            c.max_sessions * 24 + 4 > max,
            "the default table can outgrow it"
        );
        let replicas = usize::from(c.log.replicas);
        assert_eq!(
            (2 + replicas.div_ceil(2)) * max,
            4 << 20,
            "registered banks"
        );
        assert_eq!(
            (c.log.heartbeat_period_ns, c.log.failure_timeout_ns),
            (200_000, 50_000_000)
        );
    }
}
