//! Opening the RDMA device: its context, the protection domain, and the port and GID that
//! loopback connections use.

use super::error::VerbsError;
use sideway::ibverbs::address::Gid;
use sideway::ibverbs::device::{DeviceInfo, DeviceList};
use sideway::ibverbs::device_context::{DeviceContext, Mtu};
use sideway::ibverbs::protection_domain::ProtectionDomain;
use std::sync::Arc;
use std::time::Duration;

/// How to build a [`VerbsFabric`](super::VerbsFabric).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct VerbsOptions {
    /// The device to open, by name (`rxe0`, `mlx5_0`); `None`: the first device.
    pub device: Option<String>,
    /// The port of the device, from 1.
    pub port: u8,
    /// The GID index that queue pairs address each other with. Index 0 (the IPv6
    /// link-local GID) is enough for soft-RoCE loopback.
    pub gid_index: u8,
    /// Send-queue depth of each queue pair: at most this many operations of an endpoint
    /// are on the NIC towards one node; more wait in the endpoint, in order, and go to
    /// the NIC as completions make room (a post never blocks, so a node that stopped
    /// answering does not stop the thread posting to it). (The
    /// send queue has one slot more, for a flush; a quarter of the depth is the default
    /// [signal interval](super::VerbsEndpoint::signal_interval).)
    pub queue_depth: u32,
    /// How long a thread waiting for completions (`Wait`, `Poll`, `GlobalFence`,
    /// dropping an endpoint) goes without any completion arriving before it
    /// gives up on its outstanding requests: their queue pairs are moved to the error
    /// state and the requests fail with [`RdmaError::RemoteCrashed`](crate::RdmaError)
    /// (a message on stderr says so). Ten seconds by default: far beyond any RC retry
    /// budget in use (`timeout` 14 with 7 retries is about 0.5 s per try), so only a lost
    /// completion or a dead peer gets there, and it fails instead of hanging.
    pub completion_timeout: Duration,
}

impl Default for VerbsOptions {
    fn default() -> VerbsOptions {
        VerbsOptions {
            device: None,
            port: 1,
            gid_index: 0,
            queue_depth: 64,
            completion_timeout: Duration::from_secs(10),
        }
    }
}

impl VerbsOptions {
    /// The default options, overridden by the environment variables `VELOS_RDMA_DEVICE`
    /// (device name), `VELOS_RDMA_GID_INDEX` (GID index) and
    /// `VELOS_RDMA_COMPLETION_TIMEOUT_MS` (completion timeout, in milliseconds) where they
    /// are set. An unparsable number is ignored.
    pub fn from_env() -> VerbsOptions {
        let mut options = VerbsOptions::default();
        if let Ok(name) = std::env::var("VELOS_RDMA_DEVICE") {
            options.device = Some(name).filter(|name| !name.is_empty());
        }
        if let Some(index) = std::env::var("VELOS_RDMA_GID_INDEX")
            .ok()
            .and_then(|index| index.parse().ok())
        {
            options.gid_index = index;
        }
        if let Some(ms) = std::env::var("VELOS_RDMA_COMPLETION_TIMEOUT_MS")
            .ok()
            .and_then(|ms| ms.parse().ok())
        {
            options.completion_timeout = Duration::from_millis(ms);
        }
        options
    }
}

/// An open device with its protection domain, and what connections need to know of it.
#[derive(Debug)]
pub(super) struct Device {
    /// The device's name.
    pub(super) name: String,
    /// The one protection domain: every memory region and queue pair lives in it.
    pub(super) pd: Arc<ProtectionDomain>,
    /// The device context (queue pairs and completion queues are made from it).
    pub(super) context: Arc<DeviceContext>,
    /// The port used.
    pub(super) port: u8,
    /// The GID index used.
    pub(super) gid_index: u8,
    /// The port's GID at that index: both ends of every loopback connection.
    pub(super) gid: Gid,
    /// The port's LID (0 on RoCE).
    pub(super) lid: u16,
    /// The port's active MTU.
    pub(super) mtu: Mtu,
    /// How many RDMA reads and atomics a queue pair may have outstanding (both as
    /// initiator and as responder), at least 1.
    pub(super) max_rd_atomic: u8,
}

impl Device {
    /// Opens the device `options` names (or the first one), allocates the protection
    /// domain and reads the port, GID and limits.
    pub(super) fn open(options: &VerbsOptions) -> Result<Device, VerbsError> {
        assert!(options.port >= 1, "ports are numbered from 1");
        assert!(
            options.queue_depth >= 1,
            "a queue pair needs room for a request"
        );
        let list = DeviceList::new().map_err(|error| VerbsError::NoDevice {
            reason: VerbsError::verbs("ibv_get_device_list", error).to_string(),
        })?;
        let names: Vec<String> = list.iter().map(|device| device.name()).collect();
        let index = match &options.device {
            None if names.is_empty() => {
                return Err(VerbsError::NoDevice {
                    reason: "the device list is empty".to_owned(),
                });
            }
            None => 0,
            Some(name) => names
                .iter()
                .position(|found| found == name)
                .ok_or_else(|| VerbsError::DeviceNotFound {
                    name: name.clone(),
                    found: names.clone(),
                })?,
        };
        let device = list.get(index).ok_or_else(|| VerbsError::NoDevice {
            reason: format!("device {index} of the list is missing"),
        })?;
        let context = device
            .open()
            .map_err(|e| VerbsError::verbs("ibv_open_device", e))?;
        let attr = context
            .query_device()
            .map_err(|e| VerbsError::verbs("ibv_query_device_ex", e))?;
        let port = context
            .query_port(options.port)
            .map_err(|e| VerbsError::verbs("ibv_query_port", e))?;
        let gid = context
            .query_gid(options.port, u32::from(options.gid_index))
            .map_err(|e| VerbsError::verbs("ibv_query_gid", e))?;
        let pd = context
            .alloc_pd()
            .map_err(|e| VerbsError::verbs("ibv_alloc_pd", e))?;
        // Enough for a pipeline of reads and atomics, within what the device allows.
        let max_rd_atomic = attr
            .max_qp_rd_atom()
            .min(attr.max_qp_init_rd_atom())
            .clamp(1, 16) as u8;
        let device = Device {
            name: names[index].clone(),
            pd,
            context,
            port: options.port,
            gid_index: options.gid_index,
            gid,
            lid: port.lid(),
            mtu: port.active_mtu(),
            max_rd_atomic,
        };
        assert!(device.max_rd_atomic >= 1);
        Ok(device)
    }
}
