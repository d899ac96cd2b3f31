//! The configuration of a replicated log and where each replica's words and work ids are.

use super::membership::Members;
use super::omega::Detector;
use crate::cluster::ClusterShape;
use crate::slot::Mutation;
use crate::word::WordLayout;
use velos_rdma::{Loc, WorkId};

/// Slots one bulk catch-up reads at most (`replica/bulk.rs`).
pub const BULK_SLOTS: u32 = 64;

/// Regions a bulk catch-up's value rounds land in: one more than the replicas that may
/// be down while the log goes on, ⌊(n − 1)/2⌋ + 1. A round given up towards a peer that
/// never answers again holds its region until the peer's queue pair fails (its
/// replacement); each region is held for one source at most, so one is always free
/// (rule (a region per silent source)).
pub fn value_regions(replicas: u16) -> u32 {
    u32::from(replicas.saturating_sub(1)) / 2 + 1
}

/// The work id of an embedding's read of replica `a`'s durable point
/// ([`crate::cluster::ClusterShape::durable_point`]): one the engine never uses, so that
/// the embedding may post it on the replica's endpoint between the engine's operations.
pub fn durable_read_id(a: u16) -> velos_rdma::WorkId {
    assert!(a < 64, "replica {a}: at most 64");
    let id = velos_rdma::WorkId(ids::DURABLE + u32::from(a));
    debug_assert!(id.0 < ids::CAS && id.0 > ids::BULK_VALUES + value_regions(64));
    id
}

/// How a Velos log is set up: the same on every replica.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LogConfig {
    /// Replicas: every one is an acceptor, a learner and, when Ω says so, the leader.
    pub replicas: u16,
    /// Positions of the log's ring ([`super::ring`]): log instance i lives at position
    /// i mod `slots`. With a tagged word layout (the default) a position is reused once
    /// a majority's snapshots include its previous instance ([`super::Replica::snapshot_taken`]);
    /// a log that never snapshots, or whose layout has no tag, ends after `slots` entries.
    /// While every position holds an instance not yet retired, proposals are refused
    /// ([`super::ProposeError::LogFull`]).
    pub slots: u32,
    /// The largest value, in bytes.
    pub max_value_bytes: u32,
    /// The largest snapshot a replica can hand to one that fell off the ring, in bytes
    /// ([`super::snapshot`]); every replica registers room for two of them, and two more
    /// to copy one in.
    pub max_snapshot_bytes: u32,
    /// The acceptor word layout.
    pub layout: WordLayout,
    /// Epochs of the overflow fallback: acceptor words per slot. A slot whose proposal
    /// numbers run out in one epoch freezes it and continues in the next
    /// ([`crate::freeze`]); when the last runs out, the log stops at that slot
    /// ([`super::ProposeError::Exhausted`]).
    pub epochs: u32,
    /// Slots the leader keeps prepared or accepting at once (pre-preparation depth).
    pub pipeline: u32,
    /// How often a replica bumps its heartbeat and reads the others' (ns).
    pub heartbeat_period_ns: u64,
    /// A replica whose heartbeat has not moved for this long is suspected (ns); with an
    /// adaptive `detector`, the ceiling of its timeout.
    pub failure_timeout_ns: u64,
    /// How the failure timeout is chosen: fixed, or adapted to the heartbeat gaps seen
    /// ([`Detector`]). Deployments on real clocks with OS scheduling may prefer
    /// [`Detector::Fixed`] with a generous timeout.
    pub detector: Detector,
    /// Leader leases ([`super::lease`]): how long a heartbeat read showing a replica
    /// trusting the leader vouches for it (ns), and how long a new leader waits before its
    /// first decision. 0 (the default): no leases, reads go through the log, failover
    /// waits for nothing. At most the failure timeout.
    pub lease_ns: u64,
    /// How long an idle replica pauses between polls (ns).
    pub idle_pause_ns: u64,
    /// A follower that learned nothing locally for this long reads the next slot from a
    /// majority (ns).
    pub catch_up_after_ns: u64,
    /// The replicas that vote at first ([`super::membership`]): every one by default. The
    /// others follow the log and may be added by [`super::Replica::propose_members`].
    pub members: Members,
    /// A deliberately wrong variant of the slot protocol (tests with velos-core's
    /// `mutations` feature only; otherwise always [`Mutation::None`]).
    pub mutation: Mutation,
}

impl LogConfig {
    /// A log of `replicas` replicas with `slots` slots of values up to `max_value_bytes`,
    /// with the default timing: heartbeats every 1 µs, suspicion after 3 times the largest
    /// recent heartbeat gap (at least 4 µs, at most 20 µs), idle pauses of 200 ns, catch-up
    /// reads after 10 µs; 4 slots pre-prepared; the Velos word layout.
    pub fn new(replicas: u16, slots: u32, max_value_bytes: u32) -> LogConfig {
        LogConfig {
            replicas,
            slots,
            max_value_bytes,
            max_snapshot_bytes: 0,
            layout: WordLayout::VELOS,
            epochs: 2,
            pipeline: 4,
            heartbeat_period_ns: 1_000,
            failure_timeout_ns: 20_000,
            detector: Detector::ADAPTIVE,
            lease_ns: 0,
            idle_pause_ns: 200,
            catch_up_after_ns: 10_000,
            members: Members::all(replicas.min(64)),
            mutation: Mutation::None,
        }
    }

    /// Proposal numbers above this are not used with one-sided CAS: a slot that needs one
    /// freezes its epoch and moves to the next ([`crate::freeze`]).
    pub fn overflow_threshold(&self) -> u64 {
        self.layout.max_proposal() - u64::from(self.replicas)
    }

    /// Scratch banks for value reads: a read abandoned towards an acceptor that became
    /// suspected keeps its bank until its gets complete (they could still land), which is
    /// never if the acceptor crashed; no read starts towards a suspected acceptor, nor
    /// towards one whose abandoned read's gets are pending (rule (one read bank per silent
    /// acceptor)), so each of at most a minority of crashed acceptors holds at most one
    /// bank, and one is left.
    pub fn read_banks(&self) -> u32 {
        u32::from(self.replicas).div_ceil(2)
    }

    /// Content words of a snapshot bank: the service's snapshot and the membership from
    /// its point on ([`super::membership::snapshot_words`]).
    pub fn snapshot_words(&self) -> u32 {
        let membership = super::membership::snapshot_words(self.replicas);
        self.max_snapshot_bytes.div_ceil(8) + u32::try_from(membership).expect("small")
    }

    /// Words of a value buffer's content: the origin, then the bytes.
    pub fn value_words(&self) -> u32 {
        // The origin word, then the bytes (see `leader::Value::origin`).
        1 + self.max_value_bytes.div_ceil(8)
    }

    /// Scratch cells per acceptor for the results of CASes in flight.
    pub fn cas_cells(&self) -> u32 {
        4 * self.pipeline + 4
    }

    /// Where log instances live.
    pub fn ring(&self) -> super::ring::Ring {
        super::ring::Ring::new(self.slots, self.layout)
    }

    /// The cluster memory this log needs.
    pub fn shape(&self) -> ClusterShape {
        let n = u32::from(self.replicas);
        ClusterShape {
            nodes: self.replicas,
            slots: self.slots,
            epochs: self.epochs,
            value_words: self.value_words(),
            scratch_words: n * self.cas_cells()
                + n
                + n * self.epochs
                + self.read_banks() * (2 + self.value_words())
                + 1
                + self.read_banks() * (4 + self.snapshot_words())
                + n * self.epochs * BULK_SLOTS
                + value_regions(self.replicas) * BULK_SLOTS * (2 + self.value_words()),
            snapshot_words: self.snapshot_words(),
        }
    }

    /// Checks the configuration; the reason if it is unusable.
    pub fn validate(&self) -> Result<(), String> {
        if self.replicas == 0 || u64::from(self.replicas) > self.layout.max_proposers() {
            return Err(format!(
                "{} replicas: the word layout names 1 to {} proposers",
                self.replicas,
                self.layout.max_proposers()
            ));
        }
        if self.slots == 0 || self.pipeline == 0 || self.max_value_bytes == 0 {
            return Err("slots, pipeline and max_value_bytes must be positive".into());
        }
        if self.cas_cells() > 64 {
            return Err(format!(
                "a pipeline of {} slots: at most 15 (CASes in flight per acceptor are tracked \
                 in 64 cells)",
                self.pipeline
            ));
        }
        if !(1..=256).contains(&self.epochs) {
            return Err(format!("{} epochs: 1 to 256 are supported", self.epochs));
        }
        if self.max_value_bytes as usize >= super::value::RESTAMP_FLAG {
            return Err(format!(
                "values of {} bytes: a stamp holds lengths below {}",
                self.max_value_bytes,
                super::value::RESTAMP_FLAG
            ));
        }
        if self.replicas > 64 {
            return Err(format!("{} replicas: at most 64", self.replicas));
        }
        if self.members.is_empty() || self.members.0 & !Members::all(self.replicas).0 != 0 {
            return Err(format!(
                "members {:#x}: a non-empty set of the {} replicas",
                self.members.0, self.replicas
            ));
        }
        if u32::from(self.layout.proposal_bits) > super::value::PROPOSAL_BITS
            || self.layout.tag_bits > 8
        {
            return Err(format!(
                "a log's word layout has proposal numbers of at most {} bits and tags of at \
                 most 8 (value stamps hold them)",
                super::value::PROPOSAL_BITS
            ));
        }
        if self.lease_ns > self.failure_timeout_ns {
            return Err(format!(
                "a lease of {} ns is longer than the failure timeout ({} ns)",
                self.lease_ns, self.failure_timeout_ns
            ));
        }
        if self.failure_timeout_ns <= 2 * self.heartbeat_period_ns {
            return Err("the failure timeout must exceed two heartbeat periods".into());
        }
        if let Detector::Adaptive {
            factor,
            floor_periods,
        } = self.detector
            && (factor < 2 || floor_periods < 3)
        {
            return Err(
                "an adaptive failure timeout needs a factor of at least 2 and a floor of at \
                 least three heartbeat periods"
                    .into(),
            );
        }
        Ok(())
    }
}

/// Work ids of a replica's operations (all below the libraries' range).
pub(super) mod ids {
    use velos_rdma::WorkId;

    /// Value-buffer puts (never awaited: the accept CAS behind them on the queue pair is;
    /// tested after a CAS failed, only to take their failures).
    pub const PUT: WorkId = WorkId(1);
    /// The content gets of a value read into bank b: `READ_CONTENT + 2 b`.
    pub const READ_CONTENT: u32 = 2;
    /// The stamp get of a value read into bank b: `READ_STAMP + 2 b`.
    pub const READ_STAMP: u32 = 3;
    /// The heartbeat get from replica a: `HEARTBEAT + a`.
    pub const HEARTBEAT: u32 = 1_000;
    /// The catch-up gets of a slot's words (every epoch) at acceptor a: `CATCH_UP + a`.
    pub const CATCH_UP: u32 = 2_000;
    /// Left to the embedding: its reads of replica a's durable point, `DURABLE + a`
    /// ([`super::durable_read_id`]).
    pub const DURABLE: u32 = 9_000;
    /// The CAS in cell c of acceptor a: `CAS + a * cells + c`.
    pub const CAS: u32 = 10_000;

    pub fn read_content(bank: u32) -> WorkId {
        WorkId(READ_CONTENT + 2 * bank)
    }

    pub fn read_stamp(bank: u32) -> WorkId {
        WorkId(READ_STAMP + 2 * bank)
    }

    pub fn heartbeat(a: u16) -> WorkId {
        WorkId(HEARTBEAT + u32::from(a))
    }

    pub fn catch_up(a: u16) -> WorkId {
        WorkId(CATCH_UP + u32::from(a))
    }

    /// The word reads of a bulk catch-up at acceptor a: `BULK_WORDS + a`.
    pub const BULK_WORDS: u32 = 4_000;
    /// The value reads of a bulk catch-up into value region r: `BULK_VALUES + r`.
    pub const BULK_VALUES: u32 = 5_000;

    pub fn bulk_values(region: u32) -> WorkId {
        WorkId(BULK_VALUES + region)
    }

    pub fn bulk_words(a: u16) -> WorkId {
        WorkId(BULK_WORDS + u32::from(a))
    }

    /// The gets of a snapshot copy into incoming bank b: `TRANSFER + b`.
    pub const TRANSFER: u32 = 3_000;

    pub fn transfer(bank: u32) -> WorkId {
        WorkId(TRANSFER + bank)
    }
}

/// Where replica `me`'s scratch words are.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Scratch {
    shape: ClusterShape,
    me: u16,
    cells: u32,
}

impl Scratch {
    pub(super) fn new(config: &LogConfig, me: u16) -> Scratch {
        Scratch {
            shape: config.shape(),
            me,
            cells: config.cas_cells(),
        }
    }

    fn n(&self) -> u32 {
        u32::from(self.shape.nodes)
    }

    /// The result word of CAS cell `cell` towards acceptor `a`.
    pub(super) fn cas(&self, a: u16, cell: u32) -> Loc {
        self.shape
            .scratch(self.me, u32::from(a) * self.cells + cell)
    }

    pub(super) fn cas_id(&self, a: u16, cell: u32) -> WorkId {
        WorkId(ids::CAS + u32::from(a) * self.cells + cell)
    }

    /// Where replica `a`'s heartbeat lands.
    pub(super) fn heartbeat(&self, a: u16) -> Loc {
        self.shape
            .scratch(self.me, self.n() * self.cells + u32::from(a))
    }

    /// Where acceptor `a`'s word of `epoch` lands in a catch-up read.
    pub(super) fn catch_up(&self, a: u16, epoch: u32) -> Loc {
        self.shape.scratch(
            self.me,
            self.n() * self.cells + self.n() + u32::from(a) * self.shape.epochs + epoch,
        )
    }

    fn value_banks_end(&self) -> u32 {
        let per_bank = 2 + self.shape.value_words;
        let banks = u32::from(self.shape.nodes).div_ceil(2);
        self.n() * self.cells + self.n() + self.n() * self.shape.epochs + banks * per_bank
    }

    /// Where the header of a snapshot region lands in a transfer.
    pub(super) fn transfer_header(&self) -> Loc {
        self.shape.scratch(self.me, self.value_banks_end())
    }

    /// Word `i` of a snapshot bank copied into incoming bank `bank` (the layout of
    /// [`ClusterShape::snapshot_word`]).
    pub(super) fn transfer(&self, bank: u32, i: u32) -> Loc {
        let per_bank = self.shape.snapshot_bank_words();
        assert!(i < per_bank, "word {i} of a snapshot bank of {per_bank}");
        self.shape
            .scratch(self.me, self.value_banks_end() + 1 + bank * per_bank + i)
    }

    fn bulk_base(&self) -> u32 {
        let banks = u32::from(self.shape.nodes).div_ceil(2);
        self.value_banks_end() + 1 + banks * self.shape.snapshot_bank_words()
    }

    /// Where acceptor `a`'s words of `epoch` land in a bulk catch-up (a region per
    /// acceptor, [`BULK_SLOTS`] words per epoch).
    pub(super) fn bulk_words(&self, a: u16, epoch: u32) -> Loc {
        let i = (u32::from(a) * self.shape.epochs + epoch) * BULK_SLOTS;
        self.shape.scratch(self.me, self.bulk_base() + i)
    }

    /// Word `i` of the buffers a bulk catch-up reads into value region `region` (each a
    /// begin stamp, the content, an end stamp; [`value_regions`] regions).
    pub(super) fn bulk_values(&self, region: u32, i: u32) -> Loc {
        let words = self.n() * self.shape.epochs * BULK_SLOTS;
        let per_region = BULK_SLOTS * (2 + self.shape.value_words);
        assert!(
            i < per_region && region < value_regions(self.shape.nodes),
            "word {i} of bulk value region {region}"
        );
        self.shape
            .scratch(self.me, self.bulk_base() + words + region * per_region + i)
    }

    /// Word `i` of a value read into `bank` (0: the begin stamp, then the content, then
    /// the end stamp).
    pub(super) fn value(&self, bank: u32, i: u32) -> Loc {
        let per_bank = 2 + self.shape.value_words;
        assert!(i < per_bank, "word {i} of a bank of {per_bank}");
        self.shape.scratch(
            self.me,
            self.n() * self.cells + self.n() + self.n() * self.shape.epochs + bank * per_bank + i,
        )
    }
}
