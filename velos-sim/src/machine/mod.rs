//! The emulated machine: one state and its steps. The explorer and the simulator are two
//! drivers of this one state machine.

mod access;
mod active;
mod cpu;
mod delay;
mod enabled_cache;
mod fault;
mod items;
mod mutation;
mod placement;
mod reduction;
mod rules;
mod state;
mod stubborn;
mod transition;

pub use delay::{Clock, Delay, Link, NoDelay};
pub use enabled_cache::EnabledCache;
pub use items::{LocalWriteEntry, PipeItem, RemoteWrite, SbEntry, Timed};
pub use mutation::Mutation;
pub use state::{CrashMode, Machine, Next, NodeStatus, QpStatus, QueuePair, ThreadState};
pub use transition::Transition;
