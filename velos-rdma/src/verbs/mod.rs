//! The real-verbs backend (feature `verbs`): RDMA over a device opened with libibverbs
//! (through the `sideway` crate, which loads libibverbs at run time), for example
//! soft-RoCE (`rdma_rxe`) or an InfiniBand / RoCE NIC.
//!
//! Two forms share the endpoint ([`VerbsEndpoint`], one per thread, which implements
//! [`Endpoint`](crate::Endpoint), so every [`Process`](crate::Process) runs on it):
//!
//! * **Single process**: a [`VerbsFabric`] opens one device (the first, or one named in
//!   [`VerbsOptions`]), allocates one protection domain and registers one memory region
//!   per node of a [`Layout`](crate::Layout). Each endpoint has its own completion queue
//!   and, towards every node, its own connection: an RC queue pair connected over the
//!   port's GID (loopback) to a responder queue pair of the same endpoint. Mu's
//!   permission switch, `Op::SetWriteAccess`, changes the access flags of the responders
//!   serving a peer's requesters (`access.rs`); a [`VerbsNode`] replies `Unsupported` to
//!   it (the requesters it would refuse are in other processes).
//! * **One node per process**: a [`VerbsNode`] registers only its own node's words and
//!   makes, per thread and target node, a requester queue pair, and per peer node and
//!   thread, the responder that peer thread connects to. Its [`NodeInfo`] (GID, region
//!   address and rkey, queue-pair numbers; [`NodeInfo::to_bytes`] is the blob a cluster
//!   rendezvous exchanges) goes to every peer; [`VerbsNode::connect`] takes theirs and
//!   moves every queue pair to RTS. Its endpoints' CPU operations touch this node's words;
//!   their remote operations reach every node, this one included, through the rkeys.
//!   [`VerbsNode::open`] registers the node's words as one region with full remote
//!   access; [`VerbsNode::with_plan`] registers them by a region plan instead: one region
//!   per [`Grant`] (a word range with only its [`Access`], possibly for one peer only),
//!   whose keys reach the peers in per-peer information ([`VerbsNode::local_info_for`],
//!   [`PeerInfo`], [`VerbsNode::connect_peers`]). Requests pick the key by the target
//!   word; an access the plan does not grant is refused by the NIC, not by the backend.
//!
//! # Relation to the rdma-rmw model and to the in-process backend
//!
//! The structure and the failure reporting follow the `mem` backend; the execution is the
//! NIC's. Remote operations really run asynchronously to the posting CPU and, unlike in
//! the `mem` backend, several may be in flight on one queue pair at once: RC delivers and
//! executes them in posting order, but a later WRITE may overtake the data of an earlier
//! READ or atomic unless an `Rfence` (the fence flag) separates them, as the model allows.
//! A `Put` reads its local word when the NIC executes it, not at post. CPU operations are
//! `SeqCst` atomics on the registered words, which the NIC accesses by DMA. Remote
//! atomics are atomic against each other (the model's only requirement); against CPU
//! accesses that depends on the device.
//!
//! # Signaling
//! Not every work request is signaled: puts mostly go unsignaled and complete with the
//! next signaled request of their queue pair, or with a *flush* (a signaled zero-length
//! RDMA WRITE) that a wait posts when nothing signaled follows the put it needs. Gets
//! and atomics are always signaled. What operations reply does not change; see
//! [`VerbsEndpoint`] (signaling), `signaling.rs` (the policy and why it is safe) and
//! [`WorkRequests`] (the counts).
//!
//! # Unsafe code
//! This module is the only place in the crate with `unsafe`: registering memory with the
//! NIC and handing it local buffers (or, for a flush, none). Each block says why it is sound.
//!
//! # No device
//! [`VerbsFabric::open`] fails with [`VerbsError::NoDevice`] on a machine without RDMA
//! (libibverbs missing, `ibv_get_device_list` failing with ENOSYS, or no device). The
//! crate's verbs tests skip then, unless `VELOS_REQUIRE_RDMA=1`.
#![allow(unsafe_code)]

mod access;
mod completions;
mod connection;
mod device;
mod endpoint;
mod error;
mod fabric;
mod host;
mod info;
mod memory;
mod node;
mod plan;
mod request;
mod signaling;
mod staging;

pub use crate::doorbell::WorkRequests;
pub use crate::plan::{Access, Grant};
pub use device::VerbsOptions;
pub use endpoint::VerbsEndpoint;
pub use error::VerbsError;
pub use fabric::VerbsFabric;
pub use info::{NodeInfo, PeerInfo, RemoteRange};
pub use node::VerbsNode;
