//! The replica's state, grouped by concern (the fields of [`Replica`] that are not its
//! identity, its protocol core or its public record).

use super::*;

/// Ω's inputs and my heartbeat word: when it is next due, its counter, which reads of the
/// replicas' words are out (Ω keeps when each was issued), their snapshot points, the trust I last
/// published.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Heartbeats {
    pub(super) next_heartbeat: u64,
    pub(super) heartbeat: u64,
    pub(super) heartbeat_asked: Vec<bool>,
    /// Per replica: its snapshot point as last seen in its heartbeat word (mine: my own).
    pub(super) points: Vec<u64>,
    /// Per replica: the highest `point + past` its heartbeat words showed, a lower bound
    /// of its next slot to apply (rule (term catch-up)).
    pub(super) reached: Vec<u64>,
    /// A test of this turn gave Ω the evidence to suspect a peer it trusted: the plan
    /// judges again (rule (Ω-evidence)).
    pub(super) new_suspicion: bool,
    /// The peers Ω suspected at this turn's start, as a mask (rule (suspected last)).
    pub(super) suspected: u64,
    /// Per replica: the latest heartbeat read's round trip as far as my tests saw it — its
    /// age at the last test that found it out (rule (able leader)).
    pub(super) round_trips: Vec<u64>,
    /// The leader I trust as my heartbeat word last said, and its version.
    pub(super) published_trust: (Option<u16>, u8),
    /// The peers I cut off (rule (retire)): neither read nor reached any more.
    pub(super) retired: Members,
    /// Per replica: since when no configuration of my slots names it (rule (retire)).
    pub(super) removed_since: Vec<Option<u64>>,
    /// Per replica: the leader its latest heartbeat word I read trusts (rule (outvoted
    /// claim)).
    pub(super) trusts: Vec<Option<u16>>,
    /// Since when Ω names me while a majority of the voters is with another live leader
    /// (rule (outvoted claim)).
    pub(super) outvoted_since: Option<u64>,
}

/// Leader leases and lease reads ([`crate::log::lease`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Leasing {
    /// The lease state of my term ([`crate::log::lease`]).
    pub(super) lease: Lease,
    /// My heartbeat word was stored, fenced, with me as the leader I trust: the next turn
    /// counts my own switch ([`Lease::own_switch`]).
    pub(super) own_switch_pending: bool,
    /// Since when I hold my lease without a break (leading, leases on).
    pub(super) lease_period: Option<u64>,
    /// Reads asked by [`Replica::read`], answered at the next turn's clock.
    pub(super) read_requests: Vec<u64>,
    pub(super) read_results: Vec<(u64, Result<u64, ReadError>)>,
}

/// Snapshots in registered memory and state transfer ([`crate::log::snapshot`], [`transfer`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Snapshots {
    /// The bank of my snapshot region its header names (`None`: no snapshot yet).
    pub(super) snapshot_bank: Option<u32>,
    /// My snapshot being written into the other bank, a chunk per turn.
    pub(super) writing: Option<Box<publish::Writing>>,
    /// My next instance was retired: I copy a snapshot before anything else (and do not
    /// lead meanwhile).
    pub(super) behind: bool,
    /// Rule (recovered behind): restarted from a disk that holds less than the longest
    /// recovered log ([`Replica::restart_recovered`]), I stay behind until a copy
    /// installs, even while nobody I trust shows a snapshot to copy yet.
    pub(super) recovering: bool,
    pub(super) transfer: Option<Box<transfer::Transfer>>,
    /// Per incoming bank: the source of an abandoned copy whose gets may still land there.
    /// Rule (one bank per silent source): a source with such a bank is not copied from
    /// again until its gets complete, so the f peers that may crash (gets towards a
    /// crashed peer may never complete) hold at most f of the f + 1 banks. (A source
    /// abandoned as suspected could look trusted again a moment later and be copied from
    /// again: two copies from a crashed leader poisoned both banks for good.)
    pub(super) transfer_poisoned: Vec<Option<u16>>,
    /// Snapshots copied and not yet taken by [`Replica::take_installed`].
    pub(super) installed: Vec<(u64, Vec<u8>)>,
}

/// The learner: my acceptor's words, catch-up reads, value reads, repair, what I wrote.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Learning {
    /// Per epoch: local acceptor words of the slots from `next_apply` on (refreshed every
    /// turn).
    pub(super) words: Vec<BTreeMap<u64, u64>>,
    /// `words` holds no slot below this.
    pub(super) words_from: u64,
    pub(super) last_progress: u64,
    /// Since when catch-ups of the next slot find a value accepted but no majority.
    pub(super) stuck_since: Option<u64>,
    /// The last slot applied was learned by a catch-up or a repair, not locally: the next
    /// one likely needs the same, so its catch-up starts at once.
    pub(super) streak: bool,
    /// A learner's repair of the next slot (see [`follow`]).
    pub(super) repair: Option<Box<Leader>>,
    /// Per unapplied slot: what I wrote into my value buffers (see [`Written`]).
    pub(super) written: BTreeMap<u64, Written>,
    /// Cleared `Written`s of applied slots, for the next slots written.
    pub(super) spare_written: crate::spare::Spare<Written>,
    pub(super) catch_up: Option<CatchUp>,
    /// Bulk catch-ups (see [`super::bulk`]).
    pub(super) bulk: super::bulk::BulkState,
    pub(super) reads: VecDeque<ValueRead>,
    /// The front read's acceptor was replaced while its gets were under way: it is given
    /// up at the next turn's start ([`Replica::peer_replaced`]).
    pub(super) read_replaced: bool,
    /// Per read bank: the gets of an abandoned read that may still land.
    pub(super) poisoned: Vec<Poisoned>,
}

/// A read bank's gets that may still land, from an abandoned read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(super) struct Poisoned {
    /// Bit 0: the content's gets, bit 1: the stamp's; 0 when the bank is free.
    pub(super) gets: u8,
    /// The acceptor they were posted to. Rule (one read bank per silent acceptor): no read
    /// starts towards it while they are pending.
    pub(super) acceptor: u16,
}

/// The embedding side: proposal ids, outcomes, shutdown.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Proposals {
    pub(super) next_id: u64,
    pub(super) shutting_down: bool,
    /// I was removed by a configuration change and cut myself off (rule (retire)): I stop
    /// at the next turn.
    pub(super) removed: bool,
    /// Outcomes of proposals taken by [`Replica::propose`]: `(id, slot or error)`.
    pub(super) results: Vec<(u64, Result<u64, ProposeError>)>,
    /// Events not yet taken by [`Replica::take_events`]; `None` while not reported.
    pub(super) events: Option<Vec<crate::log::Event>>,
}

/// Buffers the hot path reuses (empty between steps, so they change no state): slot
/// commands on their way to [`Replica::issue`], operations on their way to the queue,
/// a value's words on their way to its puts.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Buffers {
    pub(super) cmd_buf: Vec<(leader::SlotAt, crate::slot::SlotCommand)>,
    pub(super) progress: leader::Progress,
    pub(super) op_buf: Vec<Op>,
    pub(super) value_buf: Vec<u64>,
}
