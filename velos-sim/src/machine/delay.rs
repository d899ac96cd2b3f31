//! What each step of the machine costs in virtual time.

use velos_rdma::NodeId;

/// The kinds of delay the machine asks for when it creates an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Delay {
    /// A CPU operation on local memory, until the next CPU step.
    CpuLocal,
    /// Posting a remote operation (building the work request), until the next CPU step.
    CpuPost,
    /// A CPU write's trip from the store buffer to memory.
    Flush,
    /// A posted operation's trip from the store buffer to the NIC (doorbell, MMIO).
    Doorbell,
    /// The NIC's read of local memory for a put (PCIe read at the requester).
    NicLocalRead,
    /// One way on the wire between two NICs.
    Wire,
    /// One way for an operation a NIC sends to its own node (loopback): turned around
    /// inside the NIC, no wire.
    LoopbackWire,
    /// A put's payload of this many bytes crossing the wire after its first byte (the
    /// serialisation a message of many words adds; a profile may charge nothing for a word).
    Payload(u64),
    /// A remote write reaching the responder's memory (PCIe write at the responder).
    RemoteMemWrite,
    /// Executing a remote atomic at the responder NIC.
    Atomic,
    /// A NIC local write reaching the requester's memory, with its completion.
    LocalMemWrite,
    /// A CPU `pause` of this many nanoseconds, until the next CPU step.
    Pause(u64),
    /// The responder's work on a put before its ACK leaves (placement in host memory).
    PutAck,
    /// The responder's access to a word in NIC device memory: an atomic's execution or a
    /// remote write's, in place of [`Delay::Atomic`] or [`Delay::RemoteMemWrite`].
    DeviceMem,
    /// [`Delay::PutAck`] for a put into device memory.
    DevicePutAck,
    /// A change of queue-pair write access (`SetWriteAccess`), until it is in effect.
    QpAccessChange,
    /// A CPU copy of this many bytes (`Op::StoreWords`) beyond its first word.
    Copy(u64),
}

/// The two ends of a queue pair: the node that posts on it and the node it reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Link {
    /// The poster's node.
    pub from: NodeId,
    /// The target node.
    pub to: NodeId,
}

/// A source of delays. The explorer uses [`NoDelay`]; the simulator a latency model.
pub trait Clock {
    /// Virtual nanoseconds for a step of `kind`, on the queue pair `link` when the step
    /// belongs to one.
    fn delay(&mut self, kind: Delay, link: Option<Link>) -> u64;
}

/// Every step costs nothing: time plays no part in exhaustive exploration.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoDelay;

impl Clock for NoDelay {
    fn delay(&mut self, _kind: Delay, _link: Option<Link>) -> u64 {
        0
    }
}
