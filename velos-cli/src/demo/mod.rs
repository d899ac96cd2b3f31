//! The replicated key-value demo: three in-process replicas (an [`embed::Cluster`]) each
//! applying the log to a [`KvStore`]; clients stream puts, deletes and gets, each over its
//! own keys; the leader is crashed mid-run; the report gives the commits per interval,
//! the leader change, the batching, and the checks (the survivors' maps agree and hold
//! every acknowledged write).
//!
//! Writes go through the log ([`embed::Cluster::submit`], which follows the leader); the
//! leader packs the clients' concurrent writes into batches. Gets read the map of the
//! replica the client believes leads, without going through the log: they may be stale
//! around a leader change (linearizable reads come later).
//!
//! [`embed::Cluster`]: velos::embed::Cluster
//! [`embed::Cluster::submit`]: velos::embed::Cluster::submit
//! [`KvStore`]: kv::KvStore

pub mod codec;
pub mod kv;
pub mod plot;
mod power;
mod report;
mod scenario;

pub use report::{Batching, DemoReport, Interval, PowerLoss};
pub use scenario::run;

use std::time::Duration;

/// What the demo runs.
#[derive(Clone, Debug, serde::Serialize)]
pub struct DemoConfig {
    /// Wall-clock time the client runs.
    #[serde(with = "millis", rename = "duration_ms")]
    pub duration: Duration,
    /// When the leader is crashed (from the start).
    #[serde(with = "millis", rename = "crash_at_ms")]
    pub crash_at: Duration,
    /// Timeline interval.
    #[serde(with = "millis", rename = "interval_ms")]
    pub interval: Duration,
    /// Client threads, each writing one command at a time.
    pub clients: u32,
    /// Distinct keys each client writes.
    pub keys: u32,
    /// Log slots (the clients stop when the log is full).
    pub slots: u32,
    /// With durability on: the replicas' directories (`Config::durable`).
    pub data_dir: Option<std::path::PathBuf>,
    /// When every replica is crashed at once and the cluster recovered from
    /// `data_dir` (from the start).
    #[serde(skip)]
    pub power_loss_at: Option<Duration>,
}

impl Default for DemoConfig {
    fn default() -> DemoConfig {
        DemoConfig {
            duration: Duration::from_secs(2),
            crash_at: Duration::from_millis(800),
            interval: Duration::from_millis(50),
            clients: 8,
            keys: 64,
            slots: 1 << 16,
            data_dir: None,
            power_loss_at: None,
        }
    }
}

/// Why a configuration cannot run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DemoError {
    /// The crash time is not inside the run.
    #[error("the crash at {crash_at:?} is not before the end of the run ({duration:?})")]
    CrashAfterEnd {
        /// The crash time.
        crash_at: Duration,
        /// The run's duration.
        duration: Duration,
    },
    /// A zero interval, key count or slot count.
    #[error("{0} must be positive")]
    Zero(&'static str),
    /// The cluster did not start.
    #[error("the cluster did not start: {0}")]
    Start(String),
    /// A power loss without a data directory, or not inside the run.
    #[error("{0}")]
    PowerLoss(&'static str),
}

impl DemoConfig {
    /// Checks the configuration.
    pub fn validate(&self) -> Result<(), DemoError> {
        if self.duration.is_zero() {
            return Err(DemoError::Zero("the duration"));
        }
        if self.interval.is_zero() {
            return Err(DemoError::Zero("the interval"));
        }
        if self.clients == 0 {
            return Err(DemoError::Zero("the client count"));
        }
        if self.keys == 0 {
            return Err(DemoError::Zero("the key count"));
        }
        if self.slots == 0 {
            return Err(DemoError::Zero("the slot count"));
        }
        match self.power_loss_at {
            Some(_) if self.data_dir.is_none() => {
                return Err(DemoError::PowerLoss(
                    "a power loss needs --data-dir (without durability nothing survives it)",
                ));
            }
            Some(at) if at.is_zero() || at >= self.duration => {
                return Err(DemoError::PowerLoss(
                    "the power loss must come after the start and before the end of the run",
                ));
            }
            _ => {}
        }
        if self.crash_at >= self.duration {
            return Err(DemoError::CrashAfterEnd {
                crash_at: self.crash_at,
                duration: self.duration,
            });
        }
        Ok(())
    }
}

/// Durations as milliseconds (fractional) in the JSON report.
mod millis {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64() * 1e3)
    }
}
