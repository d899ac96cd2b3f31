//! The replicated log: Velos one-sided Paxos over a window of slots, with Ω, failover and
//! a learner that never leaves a hole. [`Replica`] is one replica as a
//! [`Process`](velos_rdma::Process): it runs unchanged on the simulator and the in-process
//! backend.

mod config;
pub mod configuration;
pub mod event;
pub mod heartbeat;
mod leader;
mod learner;
pub mod lease;
mod links;
pub mod membership;
pub mod omega;
mod replica;
pub mod ring;
pub mod snapshot;
pub mod value;

pub use config::{LogConfig, durable_read_id};
pub use event::Event;
pub use lease::ReadError;
pub use omega::Detector;
pub use replica::{
    IncarnationError, MAX_PENDING, ProposeError, Replica, SnapshotError, Submitted, WRITE_CHUNK,
};
