//! The synchronisation libraries, written once against the programming model as
//! [`Routine`]s: shared variables ([`sv`]), the weak, strong and node locks of the rdma-rmw
//! paper ([`wlock`], [`slock`], [`nlock`]), its SC library ([`sc`]), the RMA locks
//! paper's D-MCS ([`dmcs`]) and reader-writer RMA-RW ([`rmarw`]) with the ticket queue both
//! are built on ([`ticket_queue`]), the foMPI-style baseline
//! reader-writer lock of the lock benchmark ([`fompi`]), and [`guard`]: running a routine
//! on a thread-per-process backend, with RAII lock guards. [`FetchAtomic`] is the piece
//! they share: a remote atomic, its wait, and the load of the old value.
//!
//! Every object is described once (its words, allocated with a
//! [`LayoutBuilder`](crate::LayoutBuilder)) and shared by its users through a
//! [`Shared`](crate::Shared) handle; each user is a *participant* with a slot number and a
//! node, and gets scratch words of its own on its node, so that no two users (and no two
//! objects) ever share a location for results.
//!
//! Work ids: the libraries use ids from [`LIBRARY_WORK_IDS`] upwards, one per routine
//! kind. A program's own work ids must stay below it; `wait` is per thread, so a library's
//! waits never wait for the program's operations and vice versa.

pub mod dmcs;
mod fetch;
pub mod fompi;
pub mod guard;
pub mod nlock;
pub mod rmarw;
mod routine;
pub mod sc;
pub mod slock;
pub mod sv;
pub mod ticket_queue;
pub mod wlock;

pub use fetch::FetchAtomic;
pub use guard::run;
pub(crate) use routine::first_op;
pub use routine::{Routine, Yield, done_of, value_of};

use crate::ids::WorkId;

/// The first work id reserved for the libraries.
pub const LIBRARY_WORK_IDS: u32 = 0x4000_0000;

/// The work id of routine kind `kind` of library `library`.
pub(crate) const fn library_work_id(library: u32, kind: u32) -> WorkId {
    WorkId(LIBRARY_WORK_IDS | (library << 8) | kind)
}
