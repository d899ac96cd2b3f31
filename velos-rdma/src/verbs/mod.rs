//! The real-verbs backend (feature `verbs`): RDMA over a device opened with libibverbs
//! (through the `sideway` crate, which loads libibverbs at run time), for example
//! soft-RoCE (`rdma_rxe`) or an InfiniBand / RoCE NIC.
//!
//! A [`VerbsFabric`] opens one device (the first, or one named in [`VerbsOptions`]),
//! allocates one protection domain and registers one memory region per node of a
//! [`Layout`](crate::Layout). All nodes live in this one process for now: a
//! single-process multi-node fabric. Each [`VerbsEndpoint`] (one per thread) has its own
//! completion queue and, towards every node, its own connection: an RC queue pair
//! connected over the port's GID (loopback) to a responder queue pair. It implements
//! [`Endpoint`](crate::Endpoint), so every [`Process`](crate::Process) runs on it.
//!
//! # Relation to the rdma-rmw model and to the in-process backend
//!
//! The structure and the failure reporting follow [`crate::mem`]; the execution is the
//! NIC's. Remote operations really run asynchronously to the posting CPU and, unlike in
//! [`crate::mem`], several may be in flight on one queue pair at once: RC delivers and
//! executes them in posting order, but a later WRITE may overtake the data of an earlier
//! READ or atomic unless an `Rfence` (the fence flag) separates them, as the model allows.
//! A `Put` reads its local word when the NIC executes it, not at post. CPU operations are
//! `SeqCst` atomics on the registered words, which the NIC accesses by DMA. Remote
//! atomics are atomic against each other (the model's only requirement); against CPU
//! accesses that depends on the device.
//!
//! # Unsafe code
//! This module is the only place in the crate with `unsafe`: registering memory with the
//! NIC and handing it local buffers. Each block says why it is sound.
//!
//! # No device
//! [`VerbsFabric::open`] fails with [`VerbsError::NoDevice`] on a machine without RDMA
//! (libibverbs missing, `ibv_get_device_list` failing with ENOSYS, or no device). The
//! crate's verbs tests skip then, unless `VELOS_REQUIRE_RDMA=1`.
#![allow(unsafe_code)]

mod completions;
mod connection;
mod device;
mod endpoint;
mod error;
mod fabric;
mod memory;
mod request;

pub use device::VerbsOptions;
pub use endpoint::VerbsEndpoint;
pub use error::VerbsError;
pub use fabric::VerbsFabric;
