//! What a cluster counts: commands committed and lost, batches, leaderships, and the
//! propose-to-commit latency of every committed command.

use hdrhistogram::Histogram;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The counters every replica driver updates (shared, lock-free but for the histogram).
#[derive(Debug)]
pub(crate) struct Metrics {
    proposed: AtomicU64,
    committed: AtomicU64,
    refused: AtomicU64,
    lost: AtomicU64,
    batches: AtomicU64,
    batched_commands: AtomicU64,
    batch_commands_max: AtomicU64,
    leaderships: AtomicU64,
    undecodable: AtomicU64,
    snapshots: AtomicU64,
    snapshots_refused: AtomicU64,
    installs: AtomicU64,
    lease_reads: AtomicU64,
    log_reads: AtomicU64,
    latency: Mutex<Histogram<u64>>,
}

/// The latency histogram's range: 1 µs to 100 s at three significant digits.
const LATENCY_NS_MAX: u64 = 100_000_000_000;

impl Metrics {
    pub(crate) fn new() -> Metrics {
        Metrics {
            proposed: AtomicU64::new(0),
            committed: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            batched_commands: AtomicU64::new(0),
            batch_commands_max: AtomicU64::new(0),
            leaderships: AtomicU64::new(0),
            undecodable: AtomicU64::new(0),
            snapshots: AtomicU64::new(0),
            snapshots_refused: AtomicU64::new(0),
            installs: AtomicU64::new(0),
            lease_reads: AtomicU64::new(0),
            log_reads: AtomicU64::new(0),
            latency: Mutex::new(
                Histogram::new_with_bounds(1, LATENCY_NS_MAX, 3).expect("valid bounds"),
            ),
        }
    }

    /// A batch of `commands` was proposed.
    pub(crate) fn proposed(&self, commands: u64) {
        self.proposed.fetch_add(commands, Ordering::Relaxed);
    }

    /// A batch of `latencies_ns.len()` commands committed (latency of each in ns).
    pub(crate) fn committed(&self, latencies_ns: &[u64]) {
        let n = latencies_ns.len() as u64;
        assert!(n > 0, "a batch holds a command");
        self.committed.fetch_add(n, Ordering::Relaxed);
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.batched_commands.fetch_add(n, Ordering::Relaxed);
        self.batch_commands_max.fetch_max(n, Ordering::Relaxed);
        let mut h = self.latency.lock().unwrap_or_else(|e| e.into_inner());
        for &ns in latencies_ns {
            h.saturating_record(ns.clamp(1, LATENCY_NS_MAX));
        }
    }

    /// `n` commands were refused before they were proposed.
    pub(crate) fn refused(&self, n: u64) {
        self.refused.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` proposed commands were lost (deposed, crashed): outcome unknown.
    pub(crate) fn lost(&self, n: u64) {
        self.lost.fetch_add(n, Ordering::Relaxed);
    }

    /// A replica took up the leader role.
    pub(crate) fn leadership(&self) {
        self.leaderships.fetch_add(1, Ordering::Relaxed);
    }

    /// An entry did not decode as a batch (skipped by every replica).
    pub(crate) fn undecodable(&self) {
        self.undecodable.fetch_add(1, Ordering::Relaxed);
    }

    /// A state machine's snapshot was handed to its replica (`taken`), or refused (too
    /// large for the log's snapshot banks).
    pub(crate) fn snapshot_handed(&self, taken: bool) {
        let counter = if taken {
            &self.snapshots
        } else {
            &self.snapshots_refused
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A read was answered from the leader's lease (`true`) or went through the log.
    pub(crate) fn read(&self, from_lease: bool) {
        let counter = if from_lease {
            &self.lease_reads
        } else {
            &self.log_reads
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A replica that fell off the ring restored a copied snapshot.
    pub(crate) fn installed(&self) {
        self.installs.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> MetricsSnapshot {
        let latency = self
            .latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        MetricsSnapshot {
            proposed: load(&self.proposed),
            committed: load(&self.committed),
            refused: load(&self.refused),
            lost: load(&self.lost),
            batches: load(&self.batches),
            batched_commands: load(&self.batched_commands),
            batch_commands_max: load(&self.batch_commands_max),
            leaderships: load(&self.leaderships),
            undecodable_entries: load(&self.undecodable),
            snapshots: load(&self.snapshots),
            snapshots_refused: load(&self.snapshots_refused),
            installs: load(&self.installs),
            lease_reads: load(&self.lease_reads),
            log_reads: load(&self.log_reads),
            latency,
            durable: Vec::new(),
            disk_syncs: 0,
            durable_index: None,
        }
    }
}

/// The cluster's counters at one moment (over every replica, since the start).
#[derive(Clone, Debug)]
pub struct MetricsSnapshot {
    /// Commands given to the engine (inside batches).
    pub proposed: u64,
    /// Commands committed (acknowledged to their proposer).
    pub committed: u64,
    /// Commands refused before being proposed: not the leader, too large, the log full,
    /// the replica down.
    pub refused: u64,
    /// Commands proposed and then lost with their leader: outcome unknown.
    pub lost: u64,
    /// Batches committed.
    pub batches: u64,
    /// Commands in the committed batches (`batched_commands / batches` per batch).
    pub batched_commands: u64,
    /// The most commands in one committed batch.
    pub batch_commands_max: u64,
    /// Times a replica took up the leader role (the first leader included).
    pub leaderships: u64,
    /// Entries that did not decode as batches (skipped by every replica alike).
    pub undecodable_entries: u64,
    /// Snapshots handed to the log (they let its ring reuse slots).
    pub snapshots: u64,
    /// Snapshots refused: larger than `LogConfig::max_snapshot_bytes` (the ring stops
    /// reusing slots until one fits).
    pub snapshots_refused: u64,
    /// Snapshots copied from a peer and restored by a replica that fell off the ring.
    pub installs: u64,
    /// Reads answered from the leader's lease.
    pub lease_reads: u64,
    /// Reads that went through the log (no lease held).
    pub log_reads: u64,
    /// With durability on ([`Config::durable`](super::Config::durable)): how far each
    /// replica's disk holds the log (every slot below); empty otherwise.
    pub durable: Vec<u64>,
    /// With durability on: every slot below it is on a majority of the members' disks.
    pub durable_index: Option<u64>,
    /// With durability on: the `fdatasync`s every replica's disk ran, in all (group
    /// commit, [`Config::group_commit`](super::Config::group_commit), makes them fewer
    /// than the batches a busy log would otherwise write).
    pub disk_syncs: u64,
    /// Propose-to-commit latency of every committed command (ns of the backend's clock:
    /// wall-clock on `mem`, virtual time on the emulator), from when the proposing replica
    /// took the command until its batch was committed and applied there.
    pub latency: Histogram<u64>,
}

impl MetricsSnapshot {
    /// Commands lost or refused: what did not commit.
    pub fn aborts(&self) -> u64 {
        self.refused + self.lost
    }

    /// Leader changes: leaderships after the first.
    pub fn leader_changes(&self) -> u64 {
        self.leaderships.saturating_sub(1)
    }

    /// Mean commands per committed batch (0 before any).
    pub fn commands_per_batch(&self) -> f64 {
        if self.batches == 0 {
            0.0
        } else {
            self.batched_commands as f64 / self.batches as f64
        }
    }

    /// The latency at `quantile` (0 to 1) as a duration (zero before any commit).
    pub fn latency_at(&self, quantile: f64) -> Duration {
        if self.latency.is_empty() {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.latency.value_at_quantile(quantile))
    }
}
