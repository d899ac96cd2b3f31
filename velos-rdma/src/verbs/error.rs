//! Errors of setting the verbs backend up. Operations never report these: they reply
//! [`RdmaError`](crate::RdmaError) values, as every backend does.

use crate::ids::NodeId;
use std::error::Error;
use thiserror::Error;

/// Why a [`VerbsFabric`](super::VerbsFabric) or a [`VerbsEndpoint`](super::VerbsEndpoint)
/// could not be made.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum VerbsError {
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
    /// An endpoint was asked for on a node the layout does not have.
    #[error("{node} is not a node of the fabric")]
    UnknownNode {
        /// The node asked for.
        node: NodeId,
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
