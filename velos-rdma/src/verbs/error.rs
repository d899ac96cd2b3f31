//! Errors of setting the verbs backend up. Operations never report these: they reply
//! [`RdmaError`](crate::RdmaError) values, as every backend does.

use crate::ids::NodeId;
use std::error::Error;
use thiserror::Error;

/// Why a [`VerbsFabric`](super::VerbsFabric), a [`VerbsNode`](super::VerbsNode) or a
/// [`VerbsEndpoint`](super::VerbsEndpoint) could not be made or connected.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum VerbsError {
    /// A region plan that does not fit the node's memory (see
    /// [`VerbsNode::with_plan`](super::VerbsNode::with_plan)).
    #[error("bad region plan: {reason}")]
    BadPlan {
        /// What is wrong.
        reason: String,
    },
    /// No RDMA device can be used: libibverbs is missing, the kernel has no uverbs
    /// (`ibv_get_device_list` fails with ENOSYS) or the device list is empty. Tests skip
    /// on this error, unless `VELOS_REQUIRE_RDMA=1`.
    #[error("no RDMA device: {reason}")]
    NoDevice {
        /// What the device lookup said.
        reason: String,
    },
    /// The device asked for by name is not in the device list.
    #[error("no RDMA device named {name:?} (devices: {found:?})")]
    DeviceNotFound {
        /// The name asked for.
        name: String,
        /// The names of the devices that are there.
        found: Vec<String>,
    },
    /// An endpoint, a node or a peer was asked for with a node id the layout does not
    /// have.
    #[error("{node} is not a node of the fabric")]
    UnknownNode {
        /// The node asked for.
        node: NodeId,
    },
    /// A [`VerbsNode`](super::VerbsNode) thread that does not exist.
    #[error("thread {thread} is not a thread of the node (it has {threads})")]
    UnknownThread {
        /// The thread asked for.
        thread: u16,
        /// How many threads the node has.
        threads: u16,
    },
    /// A [`VerbsNode`](super::VerbsNode) was asked for with no threads.
    #[error("a node needs at least one thread")]
    NoThreads,
    /// An endpoint of the thread is still alive (a thread has one endpoint at a time).
    #[error("thread {thread} already has an endpoint")]
    ThreadBusy {
        /// The thread asked for.
        thread: u16,
    },
    /// An endpoint was asked for before [`VerbsNode::connect`](super::VerbsNode::connect)
    /// succeeded.
    #[error("the node is not connected to its peers yet")]
    NotConnected,
    /// [`VerbsNode::connect`](super::VerbsNode::connect) was called again after it had
    /// moved queue pairs (successfully or not): queue pairs connect once.
    #[error("the node has already connected (or failed to) once")]
    AlreadyConnected,
    /// A peer met late was connected already (only a peer absent when the node
    /// connected is: [`VerbsNode::connect_reached`](super::VerbsNode::connect_reached)).
    #[error("{node} was connected already: only a peer absent at the connection is met late")]
    NotAbsent {
        /// The peer.
        node: NodeId,
    },
    /// A node of the layout has no entry in the peers handed to
    /// [`VerbsNode::connect`](super::VerbsNode::connect).
    #[error("no connection information for peer {node}")]
    MissingPeer {
        /// The missing peer.
        node: NodeId,
    },
    /// A peer's information is filed under another node id than its own, or the entry for
    /// this node is not this node's information.
    #[error("the information under node id {key} is {found}'s (or not this node's own)")]
    PeerMismatch {
        /// The id it is filed under.
        key: u16,
        /// The node it describes.
        found: NodeId,
    },
    /// A peer's information comes from a layout with another number of nodes.
    #[error("{node} has a layout of {found} nodes, this node one of {expected}")]
    NodeCountMismatch {
        /// The peer.
        node: NodeId,
        /// The number of nodes of this node's layout.
        expected: u16,
        /// The peer's.
        found: u16,
    },
    /// A peer's information comes from a layout giving it another number of words.
    #[error("{node} registers {found} words, but this node's layout gives it {expected}")]
    WordCountMismatch {
        /// The peer.
        node: NodeId,
        /// Its words in this node's layout.
        expected: u32,
        /// Its words in its own.
        found: u32,
    },
    /// A peer runs another number of threads per node.
    #[error("{node} runs {found} threads per node, this node {expected}")]
    ThreadCountMismatch {
        /// The peer.
        node: NodeId,
        /// This node's thread count.
        expected: u16,
        /// The peer's.
        found: u16,
    },
    /// Bytes that are not a valid [`NodeInfo`](super::NodeInfo).
    #[error("bad node information: {reason}")]
    BadNodeInfo {
        /// What is wrong with them.
        reason: String,
    },
    /// A verbs call failed while setting up (opening the device, registering memory,
    /// creating or connecting a queue pair, ...).
    #[error("{call} failed: {message}")]
    Verbs {
        /// The verbs call, or the setup step, that failed.
        call: &'static str,
        /// The error and its causes, as text.
        message: String,
    },
}

impl VerbsError {
    /// Whether the error says that this machine has no RDMA device at all (as opposed to
    /// a device that failed).
    pub fn is_no_device(&self) -> bool {
        matches!(self, VerbsError::NoDevice { .. })
    }

    /// A [`VerbsError::Verbs`] for `call`, with `error` and its chain of sources as text.
    pub(super) fn verbs(call: &'static str, error: impl Error) -> VerbsError {
        let mut message = error.to_string();
        let mut source = error.source();
        while let Some(cause) = source {
            message.push_str(": ");
            message.push_str(&cause.to_string());
            source = cause.source();
        }
        VerbsError::Verbs { call, message }
    }
}
