//! A Mu-style replicated log (Aguilera et al., OSDI 2020) on the programming model: the
//! baseline Velos is measured against.
//!
//! # What it does
//! One [`MuNode`] process per node. Every node keeps a log in its registered memory and
//! RDMA WRITE permission on it is given to one leader only ([`Op::SetWriteAccess`]).
//! * **Fast path** (`leader.rs`): the leader writes each entry — its value words, then
//!   its header (proposal number and commit point) — with puts into every confirmed
//!   follower's log slot, and the entry is decided once a majority (the leader's own log
//!   included) acknowledged. The commit point rides in the next entry.
//! * **Followers** (`follower.rs`) poll their own log memory with CPU loads and apply the
//!   entries below the commit point carried by the headers of the leader they granted.
//! * **Failure detector** (`node.rs`): every node increments a heartbeat counter in its
//!   memory; the others read it over RDMA every `fd_period_ns` and keep a score per node
//!   (+1 when it moved, −1 when it did not, within `0..=score_max`); a node is suspected
//!   when its score falls below `fail_below` and trusted again when it reaches
//!   `recover_at`. The leader is the lowest id a node trusts (itself included).
//! * **Takeover** (`takeover.rs`): a node that becomes leader writes a permission request
//!   (a fresh proposal number) into its own memory; followers read it with their
//!   heartbeat reads, switch write permission to it (`SetWriteAccess`, about 250 µs on a
//!   ConnectX NIC), then publish the grant in their memory. The new leader waits for a
//!   **majority** of grants, then runs Mu's slow path: read the followers' first
//!   undecided offsets (FUO) and minimum proposals, bring itself and the laggards up to
//!   date, write its proposal number into a majority's `min_proposal`, re-propose the
//!   highest-numbered value accepted at the first undecided slot, and switch to the fast
//!   path. Followers that grant later are caught up before they receive new entries.
//!
//! A deposed leader's puts fail at the followers that revoked it (`RemoteAccess`), which
//! is what makes it harmless; it then leaves the fast path.
//!
//! # Simplified against Mu
//! * One thread per node does everything (Mu runs replication, the heartbeat and
//!   permission handling on separate threads); a permission change blocks the node's CPU
//!   for its whole duration, so its heartbeat pauses too.
//! * An entry is two puts on one queue pair, which land in order: the value words in one
//!   multi-word put, then the header (Mu writes one RDMA WRITE per entry with a canary
//!   byte at its end; here the header is the entry's first word and must land last).
//!   Catch-up copies still put one word at a time.
//! * Permission requests are read with the heartbeat reads (within `fd_collect_ns` after
//!   each read round), not polled by a dedicated thread.
//! * The leader proposes one entry at a time (closed loop, no batching or pipelining), so
//!   at most the first undecided slot can be accepted at a majority without followers
//!   knowing it; the slow path re-proposes that slot only.
//! * The log is not recycled: `slots` bounds a run. The last entry's commit point never
//!   reaches the followers (as in Mu, until the next entry).
//!
//! [`Op::SetWriteAccess`]: velos_rdma::Op::SetWriteAccess

mod follower;
mod lead;
mod leader;
mod node;
mod slow_path;
mod takeover;

pub use node::{Decision, MuNode};

use velos_rdma::{Layout, Loc, NodeId};

/// The parameters of a Mu cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MuConfig {
    /// Nodes (at most 64: write permission is a mask).
    pub replicas: u16,
    /// Log slots.
    pub slots: u32,
    /// Words of each entry's value.
    pub value_words: u32,
    /// Entries a leader proposes in all (it stops when the log holds this many).
    pub entries: u32,
    /// How often a node increments its heartbeat (ns).
    pub hb_period_ns: u64,
    /// How often a node reads the others' heartbeats (ns).
    pub fd_period_ns: u64,
    /// How long after posting them a node looks at the heartbeat reads (ns).
    pub fd_collect_ns: u64,
    /// Highest score (and the initial one).
    pub score_max: u8,
    /// A trusted node is suspected when its score falls below this.
    pub fail_below: u8,
    /// A suspected node is trusted again when its score reaches this.
    pub recover_at: u8,
    /// A takeover phase that has not reached a majority after this long starts over with
    /// a higher proposal number (ns).
    pub phase_timeout_ns: u64,
    /// How long an idle follower pauses between polls of its log (ns).
    pub idle_pause_ns: u64,
    /// Unacknowledged entries after which the leader stops writing to a follower (it is
    /// caught up again if it comes back).
    pub max_backlog: u32,
}

impl MuConfig {
    /// `replicas` nodes with Mu's published failure-detector behaviour: a score in 0..=15,
    /// suspicion below 2, trust again at 6 (hysteresis), heartbeats read every 40 µs, so
    /// that a crashed leader is suspected after 14 silent reads, 560–600 µs (Mu reports
    /// about 600 µs).
    pub fn new(replicas: u16, slots: u32, value_words: u32) -> MuConfig {
        MuConfig {
            replicas,
            slots,
            value_words,
            entries: slots,
            hb_period_ns: 5_000,
            fd_period_ns: 40_000,
            fd_collect_ns: 5_000,
            score_max: 15,
            fail_below: 2,
            recover_at: 6,
            phase_timeout_ns: 3_000_000,
            idle_pause_ns: 100,
            max_backlog: 64,
        }
    }

    /// Checks the configuration; the error says what is wrong.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=64).contains(&self.replicas) {
            return Err(format!("{} replicas: 1 to 64", self.replicas));
        }
        if self.slots == 0 || self.value_words == 0 || self.entries > self.slots {
            return Err("slots and value_words must be positive, entries <= slots".into());
        }
        if self.fail_below >= self.recover_at || self.recover_at > self.score_max {
            return Err("need fail_below < recover_at <= score_max".into());
        }
        if self.hb_period_ns == 0 || self.fd_period_ns <= self.fd_collect_ns {
            return Err("need hb_period_ns > 0 and fd_period_ns > fd_collect_ns".into());
        }
        self.layout_words()
            .map(|_| ())
            .ok_or_else(|| "the log does not fit a node's u32 word count".into())
    }

    /// A majority of the replicas.
    pub fn majority(&self) -> u32 {
        u32::from(self.replicas) / 2 + 1
    }

    /// Words of one log entry: its header, then its value.
    pub fn entry_words(&self) -> u32 {
        1 + self.value_words
    }

    fn scratch_words(&self) -> u32 {
        SCRATCH_FIXED + self.entry_words()
    }

    fn log_base(&self) -> u32 {
        HEADER_WORDS + u32::from(self.replicas) * self.scratch_words()
    }

    fn layout_words(&self) -> Option<u32> {
        self.slots
            .checked_mul(self.entry_words())?
            .checked_add(self.log_base())
    }

    /// The words of a node's log (every slot's header and value): what a benchmark places
    /// in NIC device memory.
    pub fn log_words(&self) -> std::ops::Range<u32> {
        self.log_base()..self.layout_words().expect("a checked config")
    }

    /// The registered memory of the cluster.
    pub fn layout(&self) -> Layout {
        Layout::uniform(
            self.replicas,
            self.layout_words().expect("a checked config"),
        )
    }

    /// A control word of `node`.
    pub fn word(&self, node: u16, word: Word) -> Loc {
        Loc::word(NodeId(node), word as u32)
    }

    /// Word `k` of `node`'s scratch area for what it reads of `peer` (see [`Word`] for
    /// the first five; then an entry).
    pub fn scratch(&self, node: u16, peer: u16, k: u32) -> Loc {
        let base = HEADER_WORDS + u32::from(peer) * self.scratch_words();
        Loc::word(NodeId(node), base + k)
    }

    /// Word `k` (0: header, then the value) of log slot `slot` on `node`.
    pub fn slot(&self, node: u16, slot: u64, k: u32) -> Loc {
        let slot = u32::try_from(slot).expect("slots are u32");
        Loc::word(
            NodeId(node),
            self.log_base() + slot * self.entry_words() + k,
        )
    }
}

/// The control words at the start of every node's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Word {
    /// The heartbeat counter.
    Heartbeat = 0,
    /// The proposal number under which the node asks to lead (0: none).
    Request = 1,
    /// The proposal number of the leader this node gave write permission to.
    Grant = 2,
    /// The lowest proposal number this node's log accepts from now on (written by leaders).
    MinProposal = 3,
    /// The first undecided offset: how many entries this node has applied.
    Fuo = 4,
}

const HEADER_WORDS: u32 = 5;
const SCRATCH_FIXED: u32 = 5;

/// A log entry's header: the proposal number that wrote it (0: empty slot) and the commit
/// point its writer knew (every slot below it is decided).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// Proposal number (`round << 8 | node`); 0 for an empty slot.
    pub proposal: u64,
    /// Slots below this are decided.
    pub commit: u64,
}

impl Header {
    /// The header as one word: proposal in the high 32 bits, commit point in the low.
    pub fn encode(self) -> u64 {
        assert!(
            self.proposal < 1 << 32 && self.commit < 1 << 32,
            "header fields fit 32 bits"
        );
        (self.proposal << 32) | self.commit
    }

    /// The header of a word.
    pub fn decode(word: u64) -> Header {
        Header {
            proposal: word >> 32,
            commit: word & 0xFFFF_FFFF,
        }
    }
}

/// Proposal number `round` of `node`: unique per node and round, ordered by round first.
pub fn proposal(round: u64, node: u16) -> u64 {
    (round << 8) | u64::from(node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_round_trip() {
        let h = Header {
            proposal: proposal(7, 2),
            commit: 41,
        };
        assert_eq!(Header::decode(h.encode()), h);
        assert_eq!(Header::decode(0).proposal, 0, "an empty slot");
    }

    #[test]
    fn bad_configs_are_errors() {
        assert!(MuConfig::new(3, 10, 1).check().is_ok());
        assert!(MuConfig::new(0, 10, 1).check().is_err());
        assert!(MuConfig::new(65, 10, 1).check().is_err());
        assert!(MuConfig::new(3, 0, 1).check().is_err());
        let mut c = MuConfig::new(3, 10, 1);
        c.recover_at = c.fail_below;
        assert!(c.check().is_err());
        assert!(MuNode::new(velos_rdma::Shared::new(MuConfig::new(3, 10, 1)), 3).is_err());
    }
}
