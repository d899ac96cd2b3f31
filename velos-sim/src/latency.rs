//! Latency models for the simulator: what each step costs in virtual nanoseconds.

use crate::machine::Delay;
use serde::{Deserialize, Serialize};

/// A per-step cost table with seeded jitter. Profiles are data: add one by adding a
/// constructor that fills this table, never a code path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyModel {
    /// Profile name.
    pub name: String,
    /// CPU operation on local memory.
    pub cpu_local_ns: u64,
    /// CPU cost of posting a remote operation (building the work request).
    pub cpu_post_ns: u64,
    /// Store-buffer flush to memory.
    pub flush_ns: u64,
    /// Doorbell (MMIO) until the NIC sees a posted operation.
    pub doorbell_ns: u64,
    /// NIC read of local memory for a put (PCIe read).
    pub nic_local_read_ns: u64,
    /// One way on the wire, NIC to NIC.
    pub wire_ns: u64,
    /// One way for a loopback operation (a NIC to its own node): no wire.
    pub loopback_ns: u64,
    /// Remote write into the responder's memory (PCIe write).
    pub remote_mem_write_ns: u64,
    /// Remote atomic execution at the responder.
    pub atomic_ns: u64,
    /// NIC local write into the requester's memory, with its completion.
    pub local_mem_write_ns: u64,
    /// The responder's work on a put before its ACK leaves: placing the payload in host
    /// memory (PCIe) when the NIC acknowledges only after placement. 0: the ACK leaves at
    /// once (the rdma-rmw default; a zero cost draws no jitter, so older profiles replay
    /// unchanged).
    #[serde(default)]
    pub put_ack_ns: u64,
    /// The responder's access to a word in NIC device memory (no PCIe): it replaces
    /// `atomic_ns` and `remote_mem_write_ns` for such words, and `put_ack_ns` when that is
    /// larger. Which words are device memory is the machine's placement
    /// (`Machine::set_device_memory`), not the profile's.
    #[serde(default)]
    pub device_mem_access_ns: u64,
    /// Serialisation of a put's payload beyond its first word, in picoseconds per byte (the
    /// link's rate: 40 at 200 Gb/s). 0: every put costs the same, whatever its length.
    #[serde(default)]
    pub wire_ps_per_byte: u64,
    /// A CPU copy (`Op::StoreWords`) beyond its first word, in picoseconds per byte (100:
    /// 10 GB/s, a copy that misses the caches). 0: a copy costs one store.
    #[serde(default)]
    pub copy_ps_per_byte: u64,
    /// A change of queue-pair write access (`Op::SetWriteAccess`) until it is in effect:
    /// Mu measured about 250 µs for a permission switch on ConnectX NICs.
    pub qp_access_change_ns: u64,
    /// Each delay gets a uniformly drawn extra in `0..=jitter_ns` (see
    /// [`LatencyModel::jitter_within_cost`]).
    pub jitter_ns: u64,
    /// The extra of a step is also at most the step's own cost. Without it every step
    /// draws from the same range, so a jitter far above a CPU step's few nanoseconds
    /// makes the CPU that much slower, not the network less regular: with 500 ns, a CPU
    /// load costs 255 ns on average instead of 5, and a replica decides about 8 times
    /// fewer slots per millisecond (`velos sim --latency generic --jitter 500` against
    /// `--jitter 0`). Off in the profiles (their traces are pinned), on in the campaign.
    #[serde(default)]
    pub jitter_within_cost: bool,
}

impl LatencyModel {
    /// A generic RDMA NIC, in the range of published ConnectX numbers (the consensus
    /// benchmarks calibrate their own profile).
    pub fn generic() -> LatencyModel {
        LatencyModel {
            name: "generic".into(),
            cpu_local_ns: 5,
            cpu_post_ns: 50,
            flush_ns: 10,
            doorbell_ns: 300,
            nic_local_read_ns: 250,
            wire_ns: 300,
            loopback_ns: 300,
            remote_mem_write_ns: 150,
            atomic_ns: 200,
            local_mem_write_ns: 150,
            put_ack_ns: 0,
            device_mem_access_ns: 50,
            // 100 Gb/s.
            wire_ps_per_byte: 80,
            copy_ps_per_byte: 100,
            qp_access_change_ns: 250_000,
            jitter_ns: 20,
            jitter_within_cost: false,
        }
    }

    /// An InfiniBand-class HPC cluster like the Cray XC30 (Aries) of the RMA-locks paper's
    /// evaluation: about 1.6 µs for a get round trip and 1.7 µs for a remote atomic, a
    /// 100 ns software post (uGNI/DMAPP descriptor), 500 ns one way through the network
    /// (NIC, a few router hops) but 100 ns for an operation to the own node (the NIC turns
    /// it around; no router), and a responder NIC that holds a word's atomic unit for
    /// 350 ns per RMW (atomic plus PCIe write). `paper-notes/results.md` ("Lock benchmark")
    /// gives the reasoning for each number.
    pub fn cluster() -> LatencyModel {
        LatencyModel {
            name: "cluster".into(),
            cpu_local_ns: 5,
            cpu_post_ns: 100,
            flush_ns: 10,
            doorbell_ns: 250,
            nic_local_read_ns: 300,
            wire_ns: 500,
            loopback_ns: 100,
            remote_mem_write_ns: 200,
            atomic_ns: 150,
            local_mem_write_ns: 200,
            put_ack_ns: 0,
            device_mem_access_ns: 50,
            // about 80 Gb/s (Aries links).
            wire_ps_per_byte: 100,
            copy_ps_per_byte: 100,
            qp_access_change_ns: 250_000,
            jitter_ns: 50,
            jitter_within_cost: false,
        }
    }

    /// Every step costs 1 ns and nothing is jittered: the order of steps is decided by
    /// the seeded tie-breaker alone, which explores interleavings widely.
    pub fn uniform() -> LatencyModel {
        LatencyModel {
            name: "uniform".into(),
            cpu_local_ns: 1,
            cpu_post_ns: 1,
            flush_ns: 1,
            doorbell_ns: 1,
            nic_local_read_ns: 1,
            wire_ns: 1,
            loopback_ns: 1,
            remote_mem_write_ns: 1,
            atomic_ns: 1,
            local_mem_write_ns: 1,
            put_ack_ns: 0,
            device_mem_access_ns: 1,
            wire_ps_per_byte: 0,
            copy_ps_per_byte: 0,
            qp_access_change_ns: 1,
            jitter_ns: 0,
            jitter_within_cost: false,
        }
    }

    /// The Velos paper's testbed: 3 replicas on ConnectX-6 NICs. Calibrated on the paper's
    /// own numbers (`paper-notes/results.md` has the derivation and the measured values):
    /// 3 remote CASes posted together and waited for a majority take about 1.9 µs, the
    /// same pattern with (inline) WRITEs about 1.25 µs, an MMIO doorbell about 300 ns, and
    /// device memory saves about 200 ns on both.
    ///
    /// With the pattern's second completion (the majority) from the second post, a CAS
    /// takes `2 cpu_local + cpu_post + doorbell + 2 wire + atomic + local_mem_write` and a
    /// put `2 cpu_local + cpu_post + doorbell + 2 wire + put_ack` (plus jitter, about 5 ns
    /// per step): the responder's host-memory access (a PCIe round trip: the atomic's read,
    /// the write's placement before its ACK) is 250 ns for both and 50 ns in device
    /// memory; the rest of the CAS's extra cost is the requester's NIC writing the result
    /// into host memory with its completion (puts complete on the ACK alone, rule 5).
    pub fn paper_cx6() -> LatencyModel {
        LatencyModel {
            name: "paper-cx6".into(),
            cpu_local_ns: 5,
            cpu_post_ns: 60,
            flush_ns: 10,
            doorbell_ns: 300,
            nic_local_read_ns: 250,
            wire_ns: 300,
            loopback_ns: 200,
            remote_mem_write_ns: 250,
            atomic_ns: 250,
            local_mem_write_ns: 640,
            put_ack_ns: 250,
            device_mem_access_ns: 50,
            // ConnectX-6: 200 Gb/s.
            wire_ps_per_byte: 40,
            copy_ps_per_byte: 100,
            // Mu's measured permission switch on ConnectX NICs.
            qp_access_change_ns: 250_000,
            jitter_ns: 10,
            jitter_within_cost: false,
        }
    }

    /// The named profile, if known.
    pub fn by_name(name: &str) -> Option<LatencyModel> {
        match name {
            "generic" => Some(LatencyModel::generic()),
            "uniform" => Some(LatencyModel::uniform()),
            "cluster" => Some(LatencyModel::cluster()),
            "paper-cx6" => Some(LatencyModel::paper_cx6()),
            _ => None,
        }
    }

    /// The base cost of a step of `kind`, before jitter.
    pub fn base(&self, kind: Delay) -> u64 {
        match kind {
            Delay::CpuLocal => self.cpu_local_ns,
            Delay::CpuPost => self.cpu_post_ns,
            Delay::Flush => self.flush_ns,
            Delay::Doorbell => self.doorbell_ns,
            Delay::NicLocalRead => self.nic_local_read_ns,
            Delay::Wire => self.wire_ns,
            Delay::LoopbackWire => self.loopback_ns,
            Delay::RemoteMemWrite => self.remote_mem_write_ns,
            Delay::Atomic => self.atomic_ns,
            Delay::LocalMemWrite => self.local_mem_write_ns,
            Delay::PutAck => self.put_ack_ns,
            Delay::DeviceMem => self.device_mem_access_ns,
            Delay::DevicePutAck => self.put_ack_ns.min(self.device_mem_access_ns),
            Delay::Pause(ns) => ns.max(self.cpu_local_ns),
            Delay::QpAccessChange => self.qp_access_change_ns,
            Delay::Payload(bytes) => bytes.saturating_sub(8) * self.wire_ps_per_byte / 1000,
            Delay::Copy(bytes) => bytes.saturating_sub(8) * self.copy_ps_per_byte / 1000,
        }
    }
}
