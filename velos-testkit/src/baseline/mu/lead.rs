//! A Mu leader's state (`Lead`: its phase, the entry in flight, the followers it writes
//! to) and its continuations (`Then`), shared by the fast path (`leader.rs`), the takeover
//! and the slow path, and held by the node (`node.rs`).

/// Where a takeover or a leadership stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Phase {
    /// Waiting for a majority of grants.
    Grants,
    /// Reading the confirmed followers' FUO and minimum proposal.
    ReadState,
    /// Copying decided entries from the follower with the highest FUO.
    CopyIn { from: u16 },
    /// Writing the proposal number into the followers' `min_proposal`.
    Prepare,
    /// Reading the first undecided slot of the followers.
    ReadSlot,
    /// Proposing new entries.
    Fast,
}

/// An entry being written.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Inflight {
    pub(super) slot: u64,
    pub(super) value: Vec<u64>,
    pub(super) acks: u64,
    pub(super) proposed_at: u64,
    pub(super) reproposal: bool,
}

/// A leader's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Lead {
    /// Its proposal number: the request, the grants and every header carry it.
    pub(super) proposal: u64,
    pub(super) phase: Phase,
    /// When the phase began.
    pub(super) since: u64,
    /// Followers it writes entries to.
    pub(super) confirmed: u64,
    /// Followers whose control operations (`CTRL + p`) it has posted and not seen done.
    pub(super) busy: u64,
    /// Followers whose answer the phase waits for, how many it needs, who answered.
    pub(super) waiting: u64,
    pub(super) need: u32,
    pub(super) responded: u64,
    /// The highest FUO of the slow path: the slot it re-proposes.
    pub(super) fuo_max: u64,
    /// Followers granted after the slow path, whose FUO read is posted.
    pub(super) joining: u64,
    /// The next slot to write and the commit point (slots below are decided).
    pub(super) next: u64,
    pub(super) commit: u64,
    pub(super) entry: Option<Inflight>,
    /// Per follower: entries written since its last acknowledgement.
    pub(super) backlog: Vec<u32>,
    /// Per follower: its FUO as the slow path read it.
    pub(super) fuos: Vec<u64>,
}

impl Lead {
    /// Whether it is in the fast path.
    pub(super) fn fast(&self) -> bool {
        self.phase == Phase::Fast
    }
}

/// The leader's continuations.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Then {
    /// The request is published and its own permission switched.
    Requested,
    /// Per peer of the list: `Test` of its grant read, load of the grant read.
    Grants(Vec<u16>),
    /// Per peer of the list: `Test` of its control operations.
    Await(Vec<u16>),
    /// Loads: own FUO-relevant words, then per responder its FUO and minimum proposal.
    StateRead(Vec<u16>),
    /// Loads of the copied slots `from..to` of the own log.
    Copied(u64, u64),
    /// Loads: the own first undecided slot, then each responder's copy of it.
    SlotRead(Vec<u16>),
    /// Per joining peer of the list: `Test`, load of its FUO.
    Joiners(Vec<u16>),
    /// Per follower of the list: `Test` of its log writes.
    Acks(Vec<u16>),
}

pub(super) fn bits(mask: u64) -> impl Iterator<Item = u16> {
    (0..64u16).filter(move |&p| mask & (1 << p) != 0)
}
