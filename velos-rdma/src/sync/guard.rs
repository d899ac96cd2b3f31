//! Running routines on a thread-per-process backend, and RAII guards for the locks.
//!
//! [`run`] drives one [`Routine`] to completion over an [`Endpoint`] (the in-process
//! backend's `MemEndpoint`, or real verbs). The guards acquire a lock on construction and
//! release it when dropped:
//!
//! ```
//! use velos_rdma::mem::{MemFabric, Mode};
//! use velos_rdma::sync::guard;
//! use velos_rdma::sync::rmarw::{RmaRw, RmaRwConfig};
//! use velos_rdma::{LayoutBuilder, NodeId};
//!
//! let nodes = [NodeId(0), NodeId(1)];
//! let mut layout = LayoutBuilder::new(2);
//! let lock = RmaRw::new(&mut layout, &RmaRwConfig::two_level(&nodes, 1, 2, 2, 4), &nodes);
//! let fabric = MemFabric::new(layout.build(), Mode::Inline);
//! let mut endpoint = fabric.endpoint(NodeId(1));
//! {
//!     let guard = guard::write(&lock, 1, &mut endpoint).expect("acquired");
//!     // ... the critical section, through guard.endpoint() ...
//!     guard.release().expect("released"); // or just drop it
//! }
//! let reader = guard::read(&lock, 1, &mut endpoint).expect("acquired");
//! drop(reader);
//! ```
//!
//! Errors: an acquire that fails returns the error and no guard; the lock may then be
//! left with the participant queued or counted (these locks, like the paper's, do not
//! survive a failed operation: a crashed node or a queue pair in error breaks them). A
//! release that fails is reported by the guard's `release()` method, which returns its
//! `Result`; dropping a guard without calling it runs the same release and **ignores** its
//! error, as `drop` cannot return one.

use super::dmcs::{self, Dmcs};
use super::rmarw::{self, RmaRw};
use super::{Routine, Yield};
use crate::endpoint::Endpoint;
use crate::error::RdmaError;
use crate::op::Reply;
use crate::shared::Shared;

/// Runs `routine` to completion on `endpoint` (each operation with
/// [`Endpoint::execute`]) and returns its output, or the first error it reports.
pub fn run<R: Routine>(
    mut routine: R,
    endpoint: &mut impl Endpoint,
) -> Result<R::Output, RdmaError> {
    let mut reply = Reply::Start;
    loop {
        match routine.resume(reply)? {
            Yield::Op(op) => reply = endpoint.execute(&op),
            Yield::Done(output) => return Ok(output),
        }
    }
}

/// Which lock a guard holds, and as what.
#[derive(Clone, Debug)]
enum Held {
    Dmcs(Shared<Dmcs>),
    Write(Shared<RmaRw>),
    Read(Shared<RmaRw>),
}

impl Held {
    fn release(&self, slot: usize, endpoint: &mut impl Endpoint) -> Result<(), RdmaError> {
        match self {
            Held::Dmcs(lock) => run(dmcs::release(lock, slot), endpoint),
            Held::Write(lock) => run(rmarw::write_unlock(lock, slot), endpoint),
            Held::Read(lock) => run(rmarw::read_unlock(lock, slot), endpoint),
        }
    }
}

/// The shared part of the guards: the lock, the slot, the endpoint, and whether the
/// release already ran.
#[derive(Debug)]
struct Guard<'a, E: Endpoint> {
    held: Held,
    slot: usize,
    endpoint: &'a mut E,
    released: bool,
}

impl<E: Endpoint> Guard<'_, E> {
    fn release(&mut self) -> Result<(), RdmaError> {
        assert!(!self.released, "a guard releases once");
        self.released = true;
        self.held.release(self.slot, self.endpoint)
    }
}

impl<E: Endpoint> Drop for Guard<'_, E> {
    fn drop(&mut self) {
        if !self.released {
            // Drop cannot report the error; `release()` is the way to see it.
            let _ = self.release();
        }
    }
}

macro_rules! guard_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name<'a, E: Endpoint> {
            guard: Guard<'a, E>,
        }

        impl<E: Endpoint> $name<'_, E> {
            /// The endpoint, for the critical section's operations.
            pub fn endpoint(&mut self) -> &mut E {
                self.guard.endpoint
            }

            /// Releases the lock now and reports the release's error, if any (dropping
            /// the guard releases too, but ignores the error).
            pub fn release(mut self) -> Result<(), RdmaError> {
                self.guard.release()
            }
        }
    };
}

guard_type!(
    /// Holds a D-MCS lock; dropping it releases the lock (ignoring a release error: use
    /// [`DmcsGuard::release`] to see it).
    DmcsGuard
);
guard_type!(
    /// Holds an RMA-RW write lock; dropping it runs `write_unlock` (ignoring a release
    /// error: use [`WriteGuard::release`] to see it).
    WriteGuard
);
guard_type!(
    /// Holds an RMA-RW read lock; dropping it runs `read_unlock` (ignoring a release
    /// error: use [`ReadGuard::release`] to see it).
    ReadGuard
);

/// Participant `slot` acquires the D-MCS lock `lock` over `endpoint`.
pub fn dmcs<'a, E: Endpoint>(
    lock: &Shared<Dmcs>,
    slot: usize,
    endpoint: &'a mut E,
) -> Result<DmcsGuard<'a, E>, RdmaError> {
    run(dmcs::acquire(lock, slot), endpoint)?;
    Ok(DmcsGuard {
        guard: Guard {
            held: Held::Dmcs(lock.clone()),
            slot,
            endpoint,
            released: false,
        },
    })
}

/// Participant `slot` acquires `lock` for writing over `endpoint`.
pub fn write<'a, E: Endpoint>(
    lock: &Shared<RmaRw>,
    slot: usize,
    endpoint: &'a mut E,
) -> Result<WriteGuard<'a, E>, RdmaError> {
    run(rmarw::write_lock(lock, slot), endpoint)?;
    Ok(WriteGuard {
        guard: Guard {
            held: Held::Write(lock.clone()),
            slot,
            endpoint,
            released: false,
        },
    })
}

/// Participant `slot` acquires `lock` for reading over `endpoint`.
pub fn read<'a, E: Endpoint>(
    lock: &Shared<RmaRw>,
    slot: usize,
    endpoint: &'a mut E,
) -> Result<ReadGuard<'a, E>, RdmaError> {
    run(rmarw::read_lock(lock, slot), endpoint)?;
    Ok(ReadGuard {
        guard: Guard {
            held: Held::Read(lock.clone()),
            slot,
            endpoint,
            released: false,
        },
    })
}

#[cfg(all(test, feature = "mem"))]
mod tests {
    use super::*;
    use crate::ids::NodeId;
    use crate::layout_builder::LayoutBuilder;
    use crate::mem::{MemFabric, Mode};
    use crate::sync::rmarw::RmaRwConfig;

    #[test]
    fn guards_exclude_and_release_on_drop() {
        let nodes = [NodeId(0), NodeId(1)];
        let mut layout = LayoutBuilder::new(2);
        let lock = Dmcs::new(&mut layout, NodeId(0), &nodes);
        let fabric = MemFabric::new(layout.build(), Mode::Worker);
        let mut a = fabric.endpoint(NodeId(0));
        let mut b = fabric.endpoint(NodeId(1));
        for _ in 0..3 {
            let guard = dmcs(&lock, 0, &mut a).expect("acquired");
            drop(guard);
            let guard = dmcs(&lock, 1, &mut b).expect("acquired after the drop released");
            guard.release().expect("released");
        }
    }

    #[test]
    fn a_failed_acquire_is_an_error_and_a_failed_release_is_reported_or_ignored() {
        // Participant 0 is on node 0, which holds every TAIL and the only physical
        // counter; participant 1 runs on node 1, which survives the crash of node 0.
        let nodes = [NodeId(0), NodeId(1)];
        let mut layout = LayoutBuilder::new(2);
        let mut config = RmaRwConfig::two_level(&nodes, 2, 1, 1, 1);
        config.levels[1] = vec![7, 7]; // one element for both: its TAIL is on node 0
        let rw = RmaRw::new(&mut layout, &config, &nodes);
        let mcs = Dmcs::new(&mut layout, NodeId(0), &nodes);
        let fabric = MemFabric::new(layout.build(), Mode::Inline);
        let mut a = fabric.endpoint(NodeId(1));
        let mut b = fabric.endpoint(NodeId(1));
        let reader = read(&rw, 1, &mut a).expect("acquired");
        let holder = dmcs(&mcs, 1, &mut b).expect("acquired");
        fabric.crash(NodeId(0));
        assert!(
            reader.release().is_err(),
            "the departing FAA fails: reported"
        );
        drop(holder); // the release's CAS of TAIL fails: ignored, not a panic
        let mut c = fabric.endpoint(NodeId(1));
        assert!(
            write(&rw, 1, &mut c).is_err(),
            "the swap of the element's TAIL on node 0 fails: an error, no guard"
        );
    }
}
