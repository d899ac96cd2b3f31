//! Where a word lives at its node: host memory (the default) or NIC device memory. A
//! responder NIC reaches device memory without crossing PCIe, so remote atomics and writes
//! on such words cost `device_mem_access_ns` instead of the host-memory costs. Placement
//! is timing only: it never changes what a step does, and the explorer ignores it.

use super::delay::Delay;
use super::state::Machine;
use std::ops::Range;
use velos_rdma::{Loc, NodeId, Process, RdmaError};

impl<P: Process> Machine<P> {
    /// Places words `words` of `node` in NIC device memory (before the run starts). Fails,
    /// changing nothing, on an unknown node or a range outside the node's memory.
    pub fn set_device_memory(&mut self, node: NodeId, words: Range<u32>) -> Result<(), RdmaError> {
        let len = self
            .mem
            .get(node.index())
            .ok_or(RdmaError::UnknownNode { node })?
            .len();
        if words.end as usize > len || words.start > words.end {
            let word = words.end.max(words.start).saturating_sub(1);
            return Err(RdmaError::OutOfBounds {
                loc: Loc::word(node, word),
            });
        }
        if !words.is_empty() {
            self.device.make_mut()[node.index()].push(words.clone());
        }
        assert!(
            words.is_empty() || self.in_device_memory(Loc::word(node, words.start)),
            "device memory: the placed range is found again"
        );
        Ok(())
    }

    /// Whether `loc` lies in NIC device memory.
    pub fn in_device_memory(&self, loc: Loc) -> bool {
        let Some(index) = loc.word_index() else {
            return false;
        };
        self.device.get(loc.node.index()).is_some_and(|ranges| {
            ranges
                .iter()
                .any(|r| u32::try_from(index).is_ok_and(|i| r.contains(&i)))
        })
    }

    /// The responder's cost of a remote atomic's execution at `loc`.
    pub(crate) fn atomic_delay(&self, loc: Loc) -> Delay {
        if self.in_device_memory(loc) {
            Delay::DeviceMem
        } else {
            Delay::Atomic
        }
    }

    /// The responder's cost of a remote write (a put's or an atomic's) reaching `loc`.
    pub(crate) fn remote_write_delay(&self, loc: Loc) -> Delay {
        if self.in_device_memory(loc) {
            Delay::DeviceMem
        } else {
            Delay::RemoteMemWrite
        }
    }

    /// The responder's work on a put into `loc` before its ACK leaves.
    pub(crate) fn put_ack_delay(&self, loc: Loc) -> Delay {
        if self.in_device_memory(loc) {
            Delay::DevicePutAck
        } else {
            Delay::PutAck
        }
    }
}
