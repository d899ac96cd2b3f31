//! What a replica reports at its edges, as values ([`crate::log::Replica::take_events`]):
//! a term begun or ended, an attempt aborted and what follows, a repair, a freeze, a
//! snapshot published or copied, a copy given up, a configuration in effect. The engine
//! does no I/O and logs nothing; the embedding layer turns these into `tracing` events.
//! None is reported per decision of a stable leader: aborts come only from contention
//! (a new term's first attempts, duels, repairs), the rest from failures and snapshots.
//! Reporting is off until asked ([`crate::log::Replica::report_events`]), so runs that
//! never drain them (the simulator's campaigns) keep nothing.

use super::membership::Members;

/// Why an attempt was aborted, as far as the leader can tell: a CAS found a higher
/// ballot, the value to adopt was overwritten while read, or too few acceptors could still
/// answer — and which of these it most likely was follows from the attempt's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbortCause {
    /// The term's first attempt on the slot: expected after a failover (a predecessor's
    /// promises hold a higher ballot; the next attempt moves above them).
    FirstOfTerm,
    /// A retry, above the ballots it saw, was aborted too: another live proposer
    /// outbids this one (a duel, rule (duel)), or acceptors were lost meanwhile.
    Contended,
}

/// What the leader does after an abort.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AfterAbort {
    /// Prepares again at this ballot.
    Retried {
        /// The new ballot (proposal number).
        ballot: u64,
    },
    /// Waits: CASes still wait for cells on some queue pair, and a retry now would queue
    /// behind them (rule (no retry into a congested link)).
    Deferred,
    /// A learner's repair gives the slot up to the leader likely working on it.
    GaveUp,
}

/// Something a replica did at its edges.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Event {
    /// Ω named me: I lead term `term` from slot `from` on.
    Leading {
        /// My term (it counts my terms and repairs).
        term: u64,
        /// The first slot the term decides.
        from: u64,
    },
    /// I stopped leading term `term`.
    SteppedDown {
        /// The term.
        term: u64,
        /// Proposals it had taken and not decided (their outcome is unknown).
        undecided: usize,
        /// The log moved past my window (a later lap): I copy a snapshot first.
        overtaken: bool,
    },
    /// An attempt on `slot` was aborted.
    Aborted {
        /// The slot.
        slot: u64,
        /// Its attempt (from 1).
        attempt: u32,
        /// Why, as far as the leader can tell.
        cause: AbortCause,
        /// What follows.
        then: AfterAbort,
    },
    /// A learner found `slot` accepted somewhere but decided nowhere it can see for a
    /// failure timeout: it runs Paxos on it itself (term `term`).
    Repairing {
        /// The slot.
        slot: u64,
        /// The repair's term.
        term: u64,
    },
    /// `slot` used up its proposal numbers in `epoch`: its words there freeze and the
    /// next epoch decides it ([`crate::freeze`]).
    Frozen {
        /// The slot.
        slot: u64,
        /// The epoch frozen.
        epoch: u32,
    },
    /// My snapshot of every entry below `point` is in my snapshot region, for peers that
    /// fall off the ring.
    SnapshotPublished {
        /// Its point.
        point: u64,
        /// The service's bytes and the membership words.
        bytes: usize,
    },
    /// I copied `source`'s snapshot and resume from `point`.
    SnapshotInstalled {
        /// Its point.
        point: u64,
        /// The replica copied from.
        source: u16,
        /// The service's bytes.
        bytes: usize,
    },
    /// A copy from `source` was given up: it stayed suspected for a failure timeout.
    CopyAbandoned {
        /// The replica copied from.
        source: u16,
    },
    /// A bulk catch-up's value reads from `source` were given up (it stayed suspected for
    /// a failure timeout, or its process was replaced). They may still land: their region
    /// stays held, and no bulk reads from `source`, until they complete (rule (a region
    /// per silent source)).
    BulkAbandoned {
        /// The replica read from.
        source: u16,
    },
    /// The members of the slots from `slot` on are `members` (a configuration entry took
    /// effect).
    MembersChanged {
        /// The first slot they vote on.
        slot: u64,
        /// The voters.
        members: Members,
    },
    /// Rule (void change): the configuration entry of `slot`, naming `members`, is not one
    /// change from the configuration before it: it changes nothing.
    ChangeVoid {
        /// Its slot.
        slot: u64,
        /// The members it named.
        members: Members,
    },
    /// Rule (retire): `peer`, removed by a configuration change at `incarnation`, is cut
    /// off from me (`Op::Disconnect`); it comes back only as a new process.
    Disconnected {
        /// The replica removed.
        peer: u16,
        /// Its process cut off.
        incarnation: crate::log::configuration::Incarnation,
    },
    /// Rule (retire): a configuration change removed me from slot `slot` on; I cut myself
    /// off from every peer and stop.
    Removed {
        /// My next slot to apply (no configuration from there on names me).
        slot: u64,
    },
}
