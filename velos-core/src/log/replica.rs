//! One replica of a Velos log as a [`Process`]: the Ω heartbeat, the leader's window of
//! slots or the follower's learner, all in one non-blocking loop. Each turn reads the clock,
//! bumps the heartbeat when due, tests the oldest operation towards each acceptor (a crashed
//! acceptor never answers, so nothing ever blocks on one), then plans: the leader opens and
//! fills slots, the follower learns the next slot; with nothing to do, it pauses.

use super::config::{LogConfig, Scratch, ids};
use super::configuration::Configuration;
use super::event::Event;
use super::heartbeat::Heartbeat;
use super::leader::{self, Leader, Value};
use super::lease::{Lease, ReadError};
use super::links::Links;
use super::membership::{Decided, Members, Membership};
use super::omega::Omega;
use super::ring::{self, Ring};
use crate::cluster::ClusterShape;
use crate::proposal::ProposerId;
use std::collections::{BTreeMap, VecDeque};
use velos_rdma::{Batch, Op, Process, Reply, Shared, Step};

mod ahead;
mod api;
mod bulk;
mod follow;
mod leading;
mod passing;
mod publish;
mod reads;
mod replace;
mod retire;
mod state;
#[cfg(test)]
mod tests;
mod transfer;
mod turn;

use state::{Buffers, Heartbeats, Learning, Leasing, Proposals, Snapshots};

pub use publish::{SnapshotError, WRITE_CHUNK};
pub use replace::IncarnationError;

/// Where [`Replica::submit`] put a command: the proposal of the batch entry it joined
/// (its outcome comes from [`Replica::take_results`] like any proposal's) and its place
/// among the entry's commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Submitted {
    /// The proposal id of the entry.
    pub proposal: u64,
    /// The command's index in the entry, from 0.
    pub index: u32,
}

/// Why a proposal was refused, or what became of one that was taken.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ProposeError {
    /// Only the leader takes proposals; `leader` is the one this replica trusts.
    #[error("not the leader: replica {leader} leads")]
    NotLeader {
        /// The leader as this replica sees it.
        leader: u16,
    },
    /// The value is larger than the log's values.
    #[error("a value of {len} bytes is larger than the log's {max}")]
    ValueTooLarge {
        /// The value's size.
        len: usize,
        /// The largest size.
        max: usize,
    },
    /// Every slot of the log is used or promised.
    #[error("the log is full")]
    LogFull,
    /// Too many proposals wait already.
    #[error("too many proposals pending ({0})")]
    Busy(usize),
    /// The replica is shutting down.
    #[error("the replica is shutting down")]
    ShuttingDown,
    /// Slot `slot` used up its proposal numbers in every epoch of the overflow fallback
    /// ([`LogConfig::epochs`](super::LogConfig::epochs)): the log cannot grow past it.
    #[error("slot {slot} ran out of proposal numbers in every epoch")]
    Exhausted {
        /// The slot.
        slot: u64,
    },
    /// The replica stopped leading before the proposal was decided: the next leader may
    /// still decide it (if some acceptor accepted it) or not; watch the log.
    #[error("deposed before the proposal was decided: outcome unknown")]
    Deposed,
    /// A membership change that is not one replica added or removed, or names a replica
    /// the log does not have ([`super::membership`]).
    #[error("membership change refused: {0}")]
    BadMembership(String),
    /// Another membership change is proposed, or decided and not in effect yet: propose
    /// this one once it is.
    #[error("another membership change is not in effect yet")]
    ChangePending,
}

/// Proposals a leader keeps waiting at most.
pub const MAX_PENDING: usize = 4096;

/// What a replica is doing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Role {
    Follower,
    Leader(Box<Leader>),
}

/// What to do with the reply of an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Then {
    Ignore,
    Clock,
    HeartbeatTest(u16),
    CasTest(u16),
    LocalWord(u64, u32),
    CatchUpTest(u16),
    CatchUpValue(u16, u32),
    ReadTest,
    ReadWord(u32),
    BankTest(u32, u8),
    TransferTest,
    TransferHeader,
    TransferLength,
    TransferWord(u32),
    TransferWords,
    TransferBankTest(u32),
    PutsTest,
    BulkWordsTest(u16),
    BulkWords(u16),
    BulkValuesTest,
    BulkValues,
    BulkPendingWords(u16),
    BulkPendingValues(u32),
    AheadTest(u16),
    AheadWords(u16),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Item {
    Op(Op, Then),
    Plan,
}

/// Why a value buffer is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Purpose {
    /// To adopt it in `slot`, or carry it into the slot's next epoch (leader of `term`).
    Adopt { term: u64 },
    /// To apply it: the slot is decided.
    Learn,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Stage {
    Queued,
    End,
    Content,
    Begin,
    Loading,
}

impl Stage {
    /// Whether the read's gets are out at its acceptor (end stamp, content, begin stamp).
    fn at_acceptor(self) -> bool {
        matches!(self, Stage::End | Stage::Content | Stage::Begin)
    }
}

/// A value-buffer read: the end stamp, the content, the begin stamp (see [`super::value`]);
/// both stamps must agree and their key be at least (`epoch`, `proposal`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ValueRead {
    purpose: Purpose,
    slot: u64,
    acceptor: u16,
    proposer: ProposerId,
    epoch: u32,
    proposal: u64,
    stage: Stage,
    words: Vec<Option<u64>>,
    /// The scratch bank, once started.
    bank: u32,
    /// When it started (the local clock).
    started: u64,
}

/// What a replica wrote into its value buffers of one slot (see [`super::value`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct Written {
    /// The length field of my last full write.
    len: usize,
    /// The acceptors whose buffer holds that write's content by a full write posted whole
    /// (bit a): writing it there again is a restamp.
    holds: u64,
    /// The words of my last full write as one put (begin stamp, content from word 1 on,
    /// and, when the buffer's rest is short, its padding and the end stamp), shared by the
    /// puts to every acceptor; and the stamp it carries (0: none made yet).
    payload: velos_rdma::Words,
    payload_stamp: u64,
}

impl Written {
    /// Whether my last full write carried `words` (the origin, then the bytes) of length
    /// field `len`.
    fn holds_content(&self, len: usize, words: &[u64]) -> bool {
        self.len == len && self.payload.as_slice().get(1..1 + words.len()) == Some(words)
    }
}

/// A follower's read of one slot's words (every epoch) at every replica.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct CatchUp {
    slot: u64,
    /// Per epoch, per acceptor: the word read.
    replies: Vec<Vec<Option<u64>>>,
    asked: Vec<bool>,
}

impl CatchUp {
    fn answered(&self, a: u16) -> bool {
        self.replies.iter().all(|r| r[usize::from(a)].is_some())
    }
}

/// One replica of a Velos log.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Replica {
    config: Shared<LogConfig>,
    shape: ClusterShape,
    ring: Ring,
    scratch: Scratch,
    me: u16,
    items: VecDeque<Item>,
    /// Rule (ready posts): a plan's posts, when nothing else was queued, waiting ahead of
    /// `items` from `ready_at` on (no reply of theirs is read: they go out as a block);
    /// emptied as the last goes out.
    ready: Vec<Op>,
    ready_at: usize,
    then: Then,
    now: u64,
    /// Heartbeats: mine, and what I read of everyone's (Ω's inputs).
    beat: Heartbeats,
    /// Leader leases and lease reads.
    leasing: Leasing,
    /// Snapshots and state transfer.
    snap: Snapshots,
    /// The point of every snapshot this replica installed, in order.
    pub installs: Vec<u64>,
    /// Where this process resumed from its own disk's snapshot
    /// ([`Replica::resume_at`]), if it did: every slot below was applied before it ran.
    pub resumed_at: Option<u64>,
    /// The members of the slots from my snapshot point on ([`super::membership`]).
    membership: Membership,
    /// Every configuration entry applied here that changed the configuration (neither void
    /// nor the last configuration again): `(slot, members)` (its entry in
    /// [`Replica::applied`] is empty, like a no-op).
    pub memberships: Vec<(u64, Members)>,
    omega: Omega,
    links: Links,
    role: Role,
    term: u64,
    /// Per epoch: ballots of earlier terms, for the next term to start above.
    ballot_floor: Vec<u64>,
    /// The learner's state.
    learn: Learning,
    /// Passing the lead ([`passing`]).
    passing: passing::Passing,
    moved: bool,
    /// A CAS failed, so the value-buffer puts ahead of it on its queue pair may have
    /// failed too: nobody awaits their work id, and a backend keeps an unreported failure
    /// until a wait or test of its id takes it, so the next heartbeat turn tests
    /// [`ids::PUT`] (else failures towards a crashed acceptor pile up for good).
    reap_puts: bool,
    /// Rule (duel): no aborted slot is prepared again before this time (local clock, ns).
    retry_at: u64,
    /// The embedding side: proposals in, outcomes out.
    api: Proposals,
    next_apply: u64,
    /// Every entry applied, in order: `(slot, value)`; a no-op is empty.
    pub applied: Vec<(u64, Vec<u8>)>,
    /// Buffers the hot path reuses.
    bufs: Buffers,
    /// When each entry of `applied` was applied (the local clock).
    pub applied_at: Vec<u64>,
    /// `(clock, leader)` each time this replica's view of the leader changed.
    pub leader_changes: Vec<(u64, u16)>,
    /// When this replica started each of its terms as leader (the local clock).
    pub terms_started: Vec<u64>,
    /// `(slot, clock)` of each proposal of mine decided while I led: when its client could
    /// first have been told (a linearizability checker's acknowledgements). Kept only
    /// after [`Replica::keep_acknowledged`]: it grows by an entry per decision.
    pub acknowledged: Vec<(u64, u64)>,
    keeping_acknowledged: bool,
    /// The `reset-with-store` mutant: the instances below this had their position's word
    /// reset here for the next lap.
    #[cfg(feature = "mutations")]
    reset_below: u64,
}

impl Replica {
    /// Replica `me` of the log `config`; it proposes what [`Replica::propose`] hands it
    /// while it leads. Refuses, with the reason, an invalid configuration or an id
    /// outside it.
    pub fn new(config: Shared<LogConfig>, me: u16) -> Result<Replica, String> {
        config.validate()?;
        if me >= config.replicas {
            return Err(format!("replica {me} of {}", config.replicas));
        }
        let scratch = Scratch::new(&config, me);
        let epochs = config.epochs as usize;
        let banks = config.read_banks() as usize;
        let mut replica = Replica {
            beat: Heartbeats {
                next_heartbeat: 0,
                heartbeat: 0,
                new_suspicion: false,
                suspected: 0,
                heartbeat_asked: vec![false; usize::from(config.replicas)],
                points: vec![0; usize::from(config.replicas)],
                reached: vec![0; usize::from(config.replicas)],
                round_trips: vec![0; usize::from(config.replicas)],
                retired: Members(0),
                removed_since: vec![None; usize::from(config.replicas)],
                published_trust: (None, 0),
                trusts: vec![None; usize::from(config.replicas)],
                outvoted_since: None,
            },
            leasing: Leasing {
                lease: Lease::new(me, config.replicas, config.lease_ns),
                own_switch_pending: false,
                lease_period: None,
                read_requests: Vec::new(),
                read_results: Vec::new(),
            },
            snap: Snapshots {
                snapshot_bank: None,
                writing: None,
                behind: false,
                recovering: false,
                transfer: None,
                transfer_poisoned: vec![None; banks],
                installed: Vec::new(),
            },
            passing: passing::Passing::default(),
            learn: Learning {
                words: vec![BTreeMap::new(); epochs],
                words_from: 0,
                last_progress: 0,
                stuck_since: None,
                streak: false,
                repair: None,
                written: BTreeMap::new(),
                spare_written: Default::default(),
                catch_up: None,
                bulk: Default::default(),
                reads: VecDeque::new(),
                read_replaced: false,
                poisoned: vec![state::Poisoned::default(); banks],
            },
            api: Proposals {
                next_id: 0,
                shutting_down: false,
                removed: false,
                results: Vec::new(),
                events: None,
            },
            bufs: Buffers {
                cmd_buf: Vec::new(),
                progress: leader::Progress::default(),
                op_buf: Vec::new(),
                value_buf: Vec::new(),
            },
            shape: config.shape(),
            ring: config.ring(),
            installs: Vec::new(),
            resumed_at: None,
            membership: Membership::new(config.members, config.replicas),
            memberships: Vec::new(),
            links: Links::new(scratch.clone(), config.replicas, config.cas_cells()),
            scratch,
            omega: Omega::new(
                me,
                config.replicas,
                (config.failure_timeout_ns, config.heartbeat_period_ns),
                config.detector,
                0,
            ),
            config,
            me,
            items: VecDeque::new(),
            ready: Vec::new(),
            ready_at: 0,
            then: Then::Ignore,
            now: 0,
            role: Role::Follower,
            term: 0,
            ballot_floor: vec![0; epochs],
            moved: false,
            reap_puts: false,
            retry_at: 0,
            next_apply: 0,
            applied: Vec::new(),
            applied_at: Vec::new(),
            leader_changes: Vec::new(),
            terms_started: Vec::new(),
            acknowledged: Vec::new(),
            keeping_acknowledged: false,
            #[cfg(feature = "mutations")]
            reset_below: 0,
        };
        replica.members_moved(); // Ω and the lease count the first members
        Ok(replica)
    }

    /// This replica's id.
    pub fn id(&self) -> u16 {
        self.me
    }

    /// The log it is a replica of.
    pub fn config(&self) -> &LogConfig {
        &self.config
    }

    /// Whether this replica currently leads.
    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Leader(_))
    }

    /// The next slot this replica will apply.
    pub fn next_apply(&self) -> u64 {
        self.next_apply
    }

    /// The leader as this replica sees it now.
    pub fn leader(&self) -> u16 {
        self.omega.leader()
    }

    /// The first log instance that may not be opened yet: every instance below it has a
    /// ring position whose previous instance is retired ([`super::ring`]) — in the
    /// snapshots of a majority of the members of my next slot.
    pub fn room(&self) -> u64 {
        if !self.ring.recycles() {
            return self.ring.room(0); // the ring's end, whatever is retired
        }
        let members = self.membership.at(self.next_apply);
        let points = members.iter().map(|r| self.beat.points[usize::from(r)]);
        self.ring.room(ring::retired_of(members.len(), points))
    }

    /// The members of slot `slot` as this replica knows them (exact from its next slot
    /// to α slots past its last configuration entry, [`super::membership`]).
    pub fn members_at(&self, slot: u64) -> Members {
        self.membership.at(slot)
    }

    fn op(&mut self, op: Op, then: Then) {
        self.items.push_back(Item::Op(op, then));
    }

    fn op_first(&mut self, op: Op, then: Then) {
        // Rule (ready posts): ahead of everything queued — and a reply is read only once
        // the ready posts went out, so none waits.
        assert!(self.ready.is_empty(), "rule (ready posts)");
        self.items.push_front(Item::Op(op, then));
    }

    fn value_of(reply: &Reply) -> Option<u64> {
        match reply {
            Reply::Value(v) => Some(*v),
            _ => None,
        }
    }

    /// Handles the reply of the operation issued with `then`.
    fn absorb(&mut self, then: Then, reply: Reply) {
        let value = Self::value_of(&reply);
        match then {
            Then::Ignore => {}
            Then::Clock => self.turn(value.expect("the clock replies a value")),
            // The heartbeat read towards `a`: its word as it completes (`TestLoad`).
            Then::HeartbeatTest(a) => match reply {
                // A peer cut off in this turn, its read tested before (rule (retire)).
                _ if self.beat.retired.contains(a) => {}
                Reply::Value(word) => self.heartbeat_read(a, word),
                Reply::Failed(_) => {
                    self.beat.heartbeat_asked[usize::from(a)] = false;
                    let issued = self.omega.issued(a).expect("a read was out");
                    self.beat.new_suspicion |= self.omega.unanswered(a, issued);
                }
                // Rules (Ω-evidence), (able leader): still out at this test.
                Reply::Done => self.beat.new_suspicion |= self.omega.pending(a, self.now),
                _ => {}
            },
            // The oldest CAS towards `a`: its old value as it completes (`TestLoad`).
            Then::CasTest(a) => match reply {
                Reply::Value(actual) => {
                    self.cas_completed(a, actual);
                    // The next CAS towards `a` may be complete too (a prepare and an accept
                    // posted in one turn complete together): tested in this turn, not the
                    // next, before the plan — once a turn, and only if it was posted before
                    // this turn (rule (test what was posted): a CAS posted just now reuses
                    // the freed cell, whose test would return the completed CAS's result;
                    // seed 1857 of `--overflow` took that for an accept, agreement broke).
                    if let Some((work_id, loc)) = self.links.chain(a) {
                        self.op_first(Op::TestLoad { work_id, loc }, Then::CasTest(a));
                    }
                }
                Reply::Failed(_) => {
                    self.reap_puts = true;
                    // A CAS given up already was reported lost then.
                    if let Some(tag) = self.links.complete(a)
                        && let Some(l) = self.proposer(tag.term)
                    {
                        l.on_cas_lost(tag.slot, a, tag.id);
                    }
                    self.moved = true;
                }
                _ => {}
            },
            Then::LocalWord(slot, e) => {
                let word = value.unwrap_or_else(|| panic!("a load of a local word: {reply:?}"));
                self.learn.words[e as usize].insert(slot, word);
            }
            Then::CatchUpTest(a) => match reply {
                Reply::Value(1) => {
                    for e in 0..self.config.epochs {
                        let loc = self.scratch.catch_up(a, e);
                        self.op_first(Op::Load { loc }, Then::CatchUpValue(a, e));
                    }
                }
                Reply::Failed(_) => {
                    if let Some(c) = &mut self.learn.catch_up {
                        c.asked[usize::from(a)] = false;
                    }
                }
                _ => {}
            },
            Then::CatchUpValue(a, e) => {
                if let Some(c) = &mut self.learn.catch_up {
                    c.replies[e as usize][usize::from(a)] = value;
                }
            }
            Then::ReadTest => self.read_tested(reply),
            Then::TransferTest => self.transfer_tested(reply),
            Then::TransferHeader => self.transfer_header(value.expect("a load")),
            Then::TransferLength => self.transfer_length(value.expect("a load")),
            Then::TransferWord(i) => self.transfer_word(i, value.expect("a load")),
            Then::TransferWords => self.transfer_words(reply),
            Then::TransferBankTest(b) => {
                if !matches!(reply, Reply::Value(0)) {
                    self.snap.transfer_poisoned[b as usize] = None;
                }
            }
            // Complete (failures taken with it) or not yet: then at the next heartbeat.
            Then::PutsTest => self.reap_puts = matches!(reply, Reply::Value(0)),
            Then::BankTest(b, bit) => {
                if !matches!(reply, Reply::Value(0)) {
                    self.learn.poisoned[b as usize].gets &= !bit;
                }
            }
            Then::BulkWordsTest(a) => self.bulk_words_tested(a, reply),
            Then::BulkWords(a) => self.bulk_words(a, reply),
            Then::BulkValuesTest => self.bulk_values_tested(reply),
            Then::BulkValues => self.bulk_values(reply),
            Then::BulkPendingWords(a) => self.learn.bulk.words_complete(a, &reply),
            Then::BulkPendingValues(region) => self.learn.bulk.values_complete(region, &reply),
            Then::AheadTest(a) => self.ahead_tested(a, reply),
            Then::AheadWords(a) => self.ahead_words(a, reply),
            Then::ReadWord(i) => {
                let read = self.learn.reads.front_mut().expect("a value read");
                read.words[i as usize] = value;
                if read.words.iter().all(Option::is_some) {
                    self.read_done();
                }
            }
        }
    }

    /// The heartbeat read towards replica `a` completed: its word is `word`.
    fn heartbeat_read(&mut self, a: u16, word: u64) {
        assert!(
            self.beat.heartbeat_asked[usize::from(a)],
            "Ω-fresh: a read was out"
        );
        let issued = self.omega.issued(a).expect("Ω-fresh: a read was out");
        // Rule (able leader): the round trip of this read ([`Replica::reaches_majority`]),
        // its age at the latest test that found it out (0 if the first found it complete:
        // my own turn's length is no evidence of a slow read).
        self.beat.round_trips[usize::from(a)] = self.omega.waited_for(a);
        self.omega.observe(a, word, issued, self.now);
        let beat = Heartbeat::of(word);
        self.beat.trusts[usize::from(a)] = beat.trust;
        let claims = self.claims(beat.trust == Some(a));
        self.omega.standing(a, !beat.unable, claims);
        let p = &mut self.beat.points[usize::from(a)];
        *p = (*p).max(beat.point); // points only grow
        let r = &mut self.beat.reached[usize::from(a)];
        *r = (*r).max(beat.point + beat.past);
        if self.is_leader() {
            let trusts_me = (beat.trust == Some(self.me)).then_some(beat.version);
            self.leasing.lease.observed(a, trusts_me, issued, self.now);
        }
        // Rule (Ω-fresh): the next read goes out at once (the scratch word was
        // just loaded), so a counter is sampled once per round trip, not every
        // other heartbeat period; it stays asked.
        let get = Op::Get {
            local: self.scratch.heartbeat(a),
            remote: self.shape.heartbeat(a),
            work_id: ids::heartbeat(a),
        };
        self.omega.asked(a, self.now);
        self.op_first(get, Then::Ignore);
    }

    /// The oldest CAS towards acceptor `a` completed: the word held `actual`.
    fn cas_completed(&mut self, a: u16, actual: u64) {
        self.moved = true;
        let Some(tag) = self.links.complete(a) else {
            return; // given up already: reported lost, counted neither way
        };
        let mut cmds = std::mem::take(&mut self.bufs.cmd_buf);
        let config = &self.config;
        if let Some(l) = leading::proposer_in(&mut self.role, &mut self.learn.repair, tag.term) {
            l.on_cas(config, (tag.slot, a, tag.id), actual, &mut cmds);
        }
        self.issue(tag.term, &mut cmds);
        self.bufs.cmd_buf = cmds;
        assert!(
            self.bufs.cmd_buf.is_empty(),
            "every slot command was issued"
        );
    }

    fn apply(&mut self, slot: u64, value: Value) {
        assert_eq!(
            slot, self.next_apply,
            "no holes: slots are applied in order"
        );
        let bytes = if value.config {
            let configuration = Configuration::from_entry(&value.bytes, self.config.replicas)
                .expect("a configuration entry names its members (only the engine writes one)");
            let members = configuration.members;
            let alpha = u64::from(self.config.pipeline);
            match self.membership.decided(slot, configuration, alpha) {
                // Rule (void change): every replica voids it alike.
                Decided::Void => self.event(|| Event::ChangeVoid { slot, members }),
                // The change decided again (a new leader proposed it before it learned an
                // older leader's entry): nothing changes, and nothing is recorded.
                Decided::Same => {}
                Decided::Taken => {
                    self.memberships.push((slot, members));
                    self.event(|| Event::MembersChanged {
                        slot: slot + alpha,
                        members,
                    });
                }
            }
            if let Role::Leader(l) = &mut self.role {
                l.membership = self.membership.clone();
            }
            Vec::new() // a no-op for the service
        } else {
            value.bytes
        };
        self.applied.push((slot, bytes));
        self.applied_at.push(self.now);
        self.next_apply += 1;
        if self.is_leader() {
            self.leader_moved(false);
        }
        // A leader writes only slots it has not applied.
        if let Some(mut w) = self.learn.written.remove(&slot) {
            w.payload.refill([]);
            (w.len, w.holds, w.payload_stamp) = (0, 0, 0);
            // Field by field: a `Written::default()` to compare with would allocate.
            assert!(
                w.payload.is_empty() && (w.len, w.holds) == (0, 0),
                "a spare record is a new one"
            );
            self.learn.spare_written.keep(w);
        }
        self.members_moved();
        self.learn.stuck_since = None;
        self.learn.repair = None;
        self.learn.last_progress = if self.learn.streak {
            self.now.saturating_sub(self.config.catch_up_after_ns + 1)
        } else {
            self.now
        };
        self.moved = true;
    }
}

impl Replica {
    /// Takes in the reply to the operation issued last.
    fn take_reply(&mut self, reply: Reply) {
        // (`matches!`, not `!=`: comparing replies calls their `PartialEq`, out of line
        // since a reply may hold words.)
        if !matches!(reply, Reply::Start) {
            let then = std::mem::replace(&mut self.then, Then::Ignore);
            self.absorb(then, reply);
        }
    }

    /// The next operation (`None`: finished), its reply's use in `self.then`.
    fn next_op(&mut self) -> Option<Op> {
        if self.api.shutting_down {
            return None;
        }
        loop {
            // Rule (ready posts): ahead of `items` (a plan may have just made them).
            if let Some(op) = self.ready.get_mut(self.ready_at) {
                let op = std::mem::replace(op, Op::Mfence);
                self.ready_at += 1;
                if self.ready_at == self.ready.len() {
                    // The block went out: no trace of it stays.
                    self.ready.clear();
                    self.ready_at = 0;
                }
                self.then = Then::Ignore;
                return Some(op);
            }
            match self.items.pop_front() {
                Some(Item::Op(op, then)) => {
                    self.then = then;
                    return Some(op);
                }
                Some(Item::Plan) => self.plan(),
                // Rule (retire): removed, I cut myself off in the turn that ended.
                None if self.api.removed => return None,
                None => {
                    self.then = Then::Clock;
                    return Some(Op::Now);
                }
            }
        }
    }
}

impl Process for Replica {
    fn resume(&mut self, reply: Reply) -> Step {
        self.take_reply(reply);
        match self.next_op() {
            Some(op) => Step::Op(op),
            None => Step::Done,
        }
    }

    /// The operations up to the first whose reply the replica reads, or the turn's
    /// pause (a caller hands proposals over there): a turn's posts — CASes, value puts,
    /// the heartbeat's store and reads — go out in one batch behind the test or load
    /// that follows them.
    fn resume_batch(&mut self, reply: Reply, out: &mut Vec<Op>) -> Batch {
        self.take_reply(reply);
        while let Some(op) = self.next_op() {
            let last = !matches!(self.then, Then::Ignore) || matches!(op, Op::Pause { .. });
            out.push(op);
            if last {
                return Batch::Resume;
            }
            // Rule (batch): `absorb` reads nothing of a reply to an operation issued with
            // `Then::Ignore`, so going on without it is what `resume` does with it. The
            // rest of the ready posts (rule (ready posts)) go as one block: posts, none a
            // pause, nothing between them.
            if self.ready_at < self.ready.len() {
                out.extend(self.ready.drain(self.ready_at..));
                self.ready.clear();
                self.ready_at = 0;
            }
        }
        Batch::Done
    }

    fn puts_from_memory(&self) -> bool {
        false // every put carries its value inline
    }
}

impl Replica {
    /// Reports the leader's `events` if events are reported, and empties them.
    fn report(&mut self, events: &mut Vec<Event>) {
        if events.is_empty() {
            return;
        }
        match &mut self.api.events {
            Some(reported) => reported.append(events),
            None => events.clear(),
        }
        assert!(events.is_empty(), "the leader's events are taken");
    }

    /// Reports `event` if events are reported ([`Replica::report_events`]).
    fn event(&mut self, event: impl FnOnce() -> Event) {
        if let Some(events) = &mut self.api.events {
            events.push(event());
        }
    }

    /// My next slot moved, or a replica's process was replaced: Ω elects among the voters
    /// of that slot, the lease counts their backing towards a majority of its members.
    fn members_moved(&mut self) {
        let members = self.membership.at(self.next_apply);
        let voters = self.membership.voters(self.next_apply);
        // A process joining at the log's start after every voter of its first
        // configuration was replaced knows no voter there (their incarnations moved on):
        // its Ω watches the configuration's members until the log tells it more (it leads
        // and votes only once a configuration names it, rule (replace)).
        let elect = if voters.is_empty() { members } else { voters };
        if elect != self.omega.members() {
            self.omega.set_members(elect);
        }
        self.leasing.lease.set_members(members, voters);
        assert!(!elect.is_empty(), "a configuration has a member");
        assert_eq!(self.omega.members(), elect, "Ω follows the voters");
    }
}
