//! # velos-rdma: the RDMA programming model of Velos
//!
//! Programs are written once, as [`Process`]es: sans-IO state machines that issue one
//! [`Op`] at a time and are resumed with its [`Reply`]. The operations are those of the
//! rdma-rmw model (Ambal et al., "Specifying and Verifying RDMA Synchronisation"):
//!
//! * CPU operations on the thread's own node: [`Op::Load`], [`Op::Store`], [`Op::Cas`],
//!   [`Op::Mfence`] (x86-TSO);
//! * remote operations with a [`WorkId`]: [`Op::Put`], [`Op::PutInline`],
//!   [`Op::PutWords`], [`Op::Get`], [`Op::Atomic`] (remote CAS / FAA); they are asynchronous;
//! * the rdmawait layer: [`Op::Wait`], [`Op::Rfence`], [`Op::GlobalFence`], and rdmatso's
//!   [`Op::Poll`].
//!
//! Real backends count the work requests and doorbells they hand to the NIC by one rule
//! ([`doorbell`], [`WorkRequests`]).
//!
//! Backends: the emulator in `velos-sim` (exhaustive and simulated), the in-process
//! `mem` backend (real threads, the `mem` feature), and real verbs behind the `verbs`
//! feature. The synchronisation library — shared variables, weak, strong and node locks,
//! the SC library, D-MCS and RMA-RW — is the `sync` feature. Both `mem` and `sync` are on
//! by default; a crate that only writes [`Process`]es (the consensus engine) turns them
//! off and builds the programming model alone.
//!
//! ```
//! # #[cfg(feature = "mem")] {
//! use velos_rdma::{drive, Layout, Loc, NodeId, Op, Process, Reply, Step, WorkId};
//! use velos_rdma::mem::{MemFabric, Mode};
//!
//! /// Writes 7 into word 0 of node 1 with an inline put, then waits for it.
//! #[derive(Clone, Debug, PartialEq, Eq, Hash)]
//! struct Writer { pc: u8 }
//!
//! impl Process for Writer {
//!     fn resume(&mut self, _reply: Reply) -> Step {
//!         self.pc += 1;
//!         let w = WorkId(1);
//!         match self.pc {
//!             1 => Step::Op(Op::PutInline { remote: Loc::word(NodeId(1), 0), value: 7, work_id: w }),
//!             2 => Step::Op(Op::Wait { work_id: w }),
//!             3 => Step::Op(Op::GlobalFence { node: NodeId(1) }),
//!             _ => Step::Done,
//!         }
//!     }
//! }
//!
//! let fabric = MemFabric::new(Layout::uniform(2, 4), Mode::Inline);
//! let mut writer = Writer { pc: 0 };
//! drive(&mut writer, &mut fabric.endpoint(NodeId(0)));
//! assert_eq!(fabric.read(Loc::word(NodeId(1), 0)), Ok(7));
//! # }
//! ```
#![deny(unsafe_code)]

#[cfg(any(feature = "mem", feature = "verbs"))]
mod copy;
pub mod doorbell;
mod endpoint;
mod error;
pub mod idle;
mod ids;
mod layout;
mod layout_builder;
#[cfg(feature = "mem")]
pub mod mem;
mod op;
pub mod plan;
mod process;
mod shared;
#[cfg(feature = "sync")]
pub mod sync;
#[cfg(feature = "verbs")]
pub mod verbs;
mod words;

pub use doorbell::WorkRequests;
pub use endpoint::{Endpoint, drive};
pub use error::RdmaError;
pub use ids::{Loc, NodeId, WorkId};
pub use layout::Layout;
pub use layout_builder::LayoutBuilder;
pub use op::{Op, Reply, Rmw, check_writers, may_write};
pub use process::{Batch, Process, Step};
pub use shared::Shared;
pub use words::Words;
