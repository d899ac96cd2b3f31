//! One replica's side of the embedding, whatever runs it: commands in (queued while this
//! replica leads, refused otherwise), batches out to the engine, committed entries
//! unpacked and applied to the state machine, outcomes back to the receipts. The backends
//! ([`super::mem_backend`], [`super::emulator_backend`]) call [`Driver::take`],
//! [`Driver::pump`] and [`Driver::collect`] around the engine's steps.

use super::batch::{self, Packing, Queue};
use super::config::Config;
use super::error::{Error, member_ids};
use super::metrics::Metrics;
use super::peer_points::PeerPoints;
use super::persist::Persist;
use super::receipt::{AnswerTx, CommitInfo, Completer};
use super::session::{self, Sessions, Verdict};
use super::shown::{CRASHED, REMOVED, STOPPED, Shown, UP};
use super::state_machine::{Position, StateMachine};
use std::any::Any;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use velos_core::log::membership::Members;
use velos_core::log::{ProposeError, Replica, SnapshotError};
use velos_store::segment::Kind;

/// A snapshot as the disk keeps it: as the log keeps it in a bank
/// ([`Replica::wrap_snapshot`]: the membership from its point on, then the replica's
/// snapshot — the session table and the state machine's state), so that a later process
/// in the replica's place resumes from it ([`Replica::resume_at`]). `None` (with a
/// warning: the disk goes on with entries alone) if the membership does not fit.
fn disk_snapshot(replica: &Replica, point: u64, snapshot: &[u8]) -> Option<Vec<u8>> {
    let wrapped = replica.wrap_snapshot(point, snapshot);
    if wrapped.is_none() {
        tracing::warn!(
            replica = replica.id(),
            point,
            "a snapshot the log cannot wrap (its membership does not fit): not written to disk"
        );
    }
    wrapped
}

/// A read waiting to run on a replica's state machine: it is given the state (the
/// cluster's `S`, as `Any`) or the reason it cannot be read there.
pub(crate) type ReadJob = Box<dyn FnOnce(Result<&dyn Any, Error>) + Send>;

/// A command on its way to a batch: its bytes, a session frame if `session`.
#[derive(Clone)]
pub(crate) struct Framed {
    pub(crate) bytes: Vec<u8>,
    pub(crate) session: bool,
}

/// How a replica's driver ends ([`Driver::stop`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum End {
    /// Its process crashed: its memory and state are gone.
    Crashed,
    /// The cluster shuts down.
    Stopped,
    /// A configuration change removed it (rule (retire)): it cut itself off and ended.
    Removed,
}

/// What a replica's runner receives.
pub(crate) enum Command<R> {
    /// A command to propose, and where its outcome (with the state machine's response)
    /// goes.
    Propose(Framed, Completer<R>),
    /// A linearizable read of the state machine.
    Read(ReadJob),
    /// A membership change to propose, and where its outcome goes.
    Members(Members, Completer),
    /// Crash the replica: its memory is gone, its runner stops.
    Crash,
    /// A process started blank in `replica`'s place at `incarnation`: the engine stops
    /// counting the old one ([`Replica::peer_replaced`]), then the backend connects to
    /// the new one.
    PeerReplaced {
        /// The replica replaced.
        replica: u16,
        /// The new process's incarnation.
        incarnation: u64,
    },
    /// Stop the replica.
    Shutdown,
    /// Someone waits for durability: rule (durable nudge), [`Driver::nudge`].
    Nudge,
}

/// A proposed batch: each command's arrival time and completer, in batch order.
type InFlight<R> = Vec<(u64, Completer<R>)>;

/// One replica's embedding state.
pub(crate) struct Driver<S: StateMachine> {
    me: u16,
    machine: S,
    packing: Packing,
    max_in_flight: usize,
    queue: Queue<Completer<S::Response>>,
    /// Batches given to the engine, by proposal id.
    in_flight: HashMap<u64, InFlight<S::Response>>,
    /// Batches decided in `slot` but not applied here yet (a slot can be decided before a
    /// gap below it is): their receipts wait until it is.
    decided: BTreeMap<u64, InFlight<S::Response>>,
    /// The state machine's responses to the commands of slots applied here while this
    /// replica had batches of its own under way, by slot, until their receipts resolve.
    /// (An error: a session's duplicate whose first application was not answered here,
    /// or a command of an expired session.)
    responses: BTreeMap<u64, Vec<Result<S::Response, Error>>>,
    /// Every client session's last applied command (the replicated dedup table).
    sessions: Sessions<S::Response>,
    leading: bool,
    metrics: Arc<Metrics>,
    shown: Arc<Shown>,
    /// Every replica's view (this one's included), for the follower-lag bound.
    peers: Arc<[Arc<Shown>]>,
    /// Slots this replica may lead the best live follower by before it holds new batches
    /// back (0: no bound).
    lag_slots_max: u64,
    /// Every this many slots the state machine's snapshot goes to the log (0: never).
    snapshot_every: u64,
    last_snapshot: u64,
    /// Why the last snapshot handed to the log was refused (`None` once one is taken):
    /// [`Error::LogFull`] names it.
    snapshot_refused: Option<String>,
    /// The last snapshot was refused for its size ([`Error::SnapshotTooLarge`]): the log
    /// cannot recycle its slots until one fits. Shown to the handle, which fails
    /// commands with it at once.
    too_large: Option<Error>,
    slots_applied: u64,
    commands_applied: u64,
    /// Reads asked of the engine's lease, by read id.
    lease_reads: HashMap<u64, ReadJob>,
    /// Reads that go through the log, by the id of their marker entry.
    log_reads: HashMap<u64, ReadJob>,
    /// Reads that run once every slot below their index is applied.
    ready_reads: Vec<(u64, ReadJob)>,
    /// Membership changes proposed here, by proposal id: the members, when it arrived.
    changes: HashMap<u64, (Members, u64, Completer)>,
    /// Membership changes decided and not in effect here yet: `(slot, members, arrival)`.
    changes_decided: Vec<(u64, Members, u64, Completer)>,
    /// A replacement's handle waits for it to vote: told its incarnation then.
    voting: Option<AnswerTx<u64>>,
    /// Since when the follower-lag bound holds new batches back, if it does.
    held_since: Option<u64>,
    /// With durability on: this replica's disk thread.
    persist: Option<Persist>,
    /// The log's slot of the engine's slot 0: the next slot of the log recovered from
    /// disk (0 on a fresh start). Positions, the disk and the durable points count from
    /// it; the engine and everything else here count from 0.
    base: u64,
    /// How many of the engine's configuration changes ([`Replica::memberships`]) were
    /// written to disk as configuration entries.
    memberships_seen: usize,
    /// Rule (durable nudge): the slots applied here when this leader last proposed a
    /// no-op for its followers to learn the entries before it.
    nudged_through: u64,
    /// A [`super::Node`] with durability on: its durable word, its peers' read.
    peer_points: Option<PeerPoints>,
}

impl<S: StateMachine> Driver<S> {
    pub(crate) fn new(
        me: u16,
        machine: S,
        config: &Config,
        metrics: Arc<Metrics>,
        peers: Arc<[Arc<Shown>]>,
    ) -> Driver<S> {
        let packing = config.packing();
        let max_in_flight = config.batch.max_in_flight as usize;
        let lag_slots_max = u64::from(config.batch.follower_lag_slots_max);
        let snapshot_every = config.snapshot_every_slots;
        assert!(max_in_flight > 0, "a pipeline of at least one batch");
        let shown = Arc::clone(&peers[usize::from(me)]);
        Driver {
            me,
            machine,
            packing,
            max_in_flight,
            queue: Queue::default(),
            in_flight: HashMap::new(),
            decided: BTreeMap::new(),
            responses: BTreeMap::new(),
            sessions: Sessions::new(config.max_sessions),
            leading: false,
            metrics,
            shown,
            peers,
            lag_slots_max,
            snapshot_every,
            last_snapshot: 0,
            snapshot_refused: None,
            too_large: None,
            slots_applied: 0,
            commands_applied: 0,
            lease_reads: HashMap::new(),
            log_reads: HashMap::new(),
            ready_reads: Vec::new(),
            changes: HashMap::new(),
            changes_decided: Vec::new(),
            voting: None,
            held_since: None,
            persist: None,
            base: 0,
            memberships_seen: 0,
            nudged_through: 0,
            peer_points: None,
        }
    }

    /// A node whose peers' disks are seen through their durable words.
    pub(crate) fn see_peers_by(&mut self, points: PeerPoints) {
        assert!(
            self.peer_points.is_none(),
            "set once, before the replica runs"
        );
        self.peer_points = Some(points);
    }

    /// A turn's start, between two of the engine's operations: the node's durable word
    /// kept, its peers' read while a durable wait is under way ([`PeerPoints::turn`]).
    pub(crate) fn peer_turn<E: velos_rdma::Endpoint>(&mut self, endpoint: &mut E) {
        if let Some(points) = self.peer_points.as_mut() {
            points.turn(endpoint);
        }
    }

    /// Nothing waits here: no receipt, read or change, no peer read out or wanted. An
    /// idle replica's pauses may grow to a long sleep.
    pub(crate) fn quiet(&self) -> bool {
        self.idle() && self.peer_points.as_ref().is_none_or(|p| !p.busy())
    }

    /// This driver's replica persists what it applies on `persist`; its engine's slot 0
    /// is the log's slot `base` (what a recovery from disk found, 0 otherwise).
    pub(crate) fn persist_on(&mut self, persist: Option<Persist>, base: u64) {
        assert!(
            self.slots_applied == 0 && self.persist.is_none(),
            "set before the replica runs"
        );
        self.persist = persist;
        self.base = base;
    }

    /// Applies entry `entry` of the log's slot `slot` read back from disk (a recovery,
    /// before the replica runs); nothing is answered.
    pub(crate) fn replay(&mut self, slot: u64, entry: &[u8]) {
        assert!(
            self.slots_applied == 0,
            "a replay comes before the replica runs"
        );
        self.apply_entry(slot, entry, None);
    }

    /// Restores the state a snapshot of the disk holds (a recovery, before the replica
    /// runs): the session table and the state machine's state.
    pub(crate) fn restore_from_disk(&mut self, snapshot: &[u8]) -> Result<(), String> {
        let (sessions, state) = Sessions::restore(snapshot, self.sessions.max())
            .ok_or("a snapshot on disk without its session table")?;
        self.machine.restore(state).map_err(|e| e.to_string())?;
        self.sessions = sessions;
        Ok(())
    }

    /// The service's snapshot as the log keeps it: the session table and the state.
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))] // a `Node`'s recovery
    pub(crate) fn service_snapshot(&self) -> Vec<u8> {
        self.sessions.snapshot(self.machine.snapshot())
    }

    /// A process restarted from the recovered log whose service holds it whole
    /// ([`Replica::restart_recovered`]), or resumed from its disk: every slot below the
    /// engine's `point` applied.
    pub(crate) fn recovered_at(&mut self, point: u64) {
        assert_eq!(self.slots_applied, 0, "a fresh process restarts");
        self.slots_applied = point;
        self.last_snapshot = point;
        self.shown.slots_applied.store(point, Ordering::SeqCst);
    }

    /// A replacement whose engine resumed at its disk's snapshot (the engine's `point`,
    /// [`Replica::resume_at`]): the service restored from `snapshot` (its session table
    /// and state), every slot below `point` applied here.
    pub(crate) fn resume_from_disk(&mut self, point: u64, snapshot: &[u8]) -> Result<(), String> {
        assert_eq!(self.slots_applied, 0, "a fresh process resumes");
        self.restore_from_disk(snapshot)?;
        self.recovered_at(point);
        self.shown
            .resumed
            .store(self.base + point, Ordering::SeqCst);
        assert_eq!(self.slots_applied, point, "resumed at the disk's point");
        Ok(())
    }

    /// This driver runs a replacement: `voting` is told its incarnation once a decided
    /// configuration names it in its next slot. Until then, and until it has caught up
    /// with the replicas ahead of it, it is shown joining: the follower-lag bound does
    /// not count it.
    pub(crate) fn tell_when_voting(&mut self, voting: AnswerTx<u64>) {
        self.shown.joining.store(true, Ordering::SeqCst);
        self.voting = Some(voting);
    }

    /// A membership change arrived at `now_ns`: the leader proposes it
    /// ([`Replica::propose_members`]); a follower refuses, naming the leader.
    pub(crate) fn take_members(
        &mut self,
        replica: &mut Replica,
        members: Members,
        completer: Completer,
        now_ns: u64,
    ) {
        if replica.leader() != self.me {
            completer.complete(Err(Error::NotLeader {
                replica: self.me,
                leader: replica.leader(),
            }));
            return;
        }
        match replica.propose_members(members) {
            Ok(id) => {
                assert!(
                    self.changes
                        .insert(id, (members, now_ns, completer))
                        .is_none(),
                    "ids are unique"
                );
            }
            Err(e) => completer.complete(Err(self.refusal(e))),
        }
    }

    /// A read arrived: the leader asks the engine for a lease read (see
    /// `velos_core::log::lease`); a follower refuses, naming the leader.
    pub(crate) fn take_read(&mut self, replica: &mut Replica, job: ReadJob) {
        if replica.leader() != self.me {
            job(Err(Error::NotLeader {
                replica: self.me,
                leader: replica.leader(),
            }));
            return;
        }
        let id = replica.read();
        assert!(
            self.lease_reads.insert(id, job).is_none(),
            "read ids are unique"
        );
    }

    /// Without a lease the read goes through the log: an empty marker entry is proposed,
    /// and the read runs once it is applied (everything committed before the read was
    /// asked is below it).
    fn read_through_log(&mut self, replica: &mut Replica, job: ReadJob) {
        match replica.propose(Vec::new()) {
            Ok(id) => {
                assert!(self.log_reads.insert(id, job).is_none(), "ids are unique");
            }
            Err(e) => job(Err(self.refusal(e))),
        }
    }

    /// Runs the reads whose index is applied, on the state machine as it is now.
    fn run_ready_reads(&mut self) {
        let applied = self.slots_applied;
        let (due, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.ready_reads)
            .into_iter()
            .partition(|&(index, _)| index <= applied);
        self.ready_reads = waiting;
        for (_, job) in due {
            job(Ok(&self.machine as &dyn Any));
        }
        assert!(
            self.ready_reads.iter().all(|&(i, _)| i > applied),
            "a read whose index is applied has run"
        );
    }

    /// Whether nothing waits here: no command queued, no batch undecided or unapplied.
    pub(crate) fn idle(&self) -> bool {
        self.queue.is_empty()
            && self.in_flight.is_empty()
            && self.decided.is_empty()
            && self.lease_reads.is_empty()
            && self.log_reads.is_empty()
            && self.ready_reads.is_empty()
            && self.changes.is_empty()
            && self.changes_decided.is_empty()
    }

    /// A command arrived at `now_ns`: queued if this replica leads, else refused.
    pub(crate) fn take(
        &mut self,
        replica: &Replica,
        command: Framed,
        completer: Completer<S::Response>,
        now_ns: u64,
    ) {
        if replica.leader() != self.me {
            self.metrics.refused(1);
            completer.complete(Err(Error::NotLeader {
                replica: self.me,
                leader: replica.leader(),
            }));
            return;
        }
        self.queue
            .push(command.bytes, command.session, now_ns, completer);
    }

    /// Why nothing can be done at this replica once it stopped: `Unavailable` if it is gone
    /// (crashed, or removed), `ShuttingDown` if the cluster stops.
    pub(crate) fn stopped_error(&self, crashed: bool) -> Error {
        if crashed {
            Error::Unavailable { replica: self.me }
        } else {
            Error::ShuttingDown
        }
    }

    /// A command that reached a stopped (or crashed) replica: it was not proposed.
    pub(crate) fn refuse_stopped<R>(&self, completer: Completer<R>, crashed: bool) {
        self.metrics.refused(1);
        completer.complete(Err(self.stopped_error(crashed)));
    }

    /// Packs due batches and proposes them while the pipeline has room; a replica that
    /// does not lead (any more) refuses what is queued.
    pub(crate) fn pump(&mut self, replica: &mut Replica, now_ns: u64) {
        // Ω's choice, which the engine's `propose` takes up at once (its role changes
        // only at its next turn otherwise).
        let leading = replica.leader() == self.me;
        if leading && !self.leading {
            self.metrics.leadership();
            tracing::info!(replica = self.me, "leads: takes proposals");
        } else if !leading && self.leading {
            let leader = replica.leader();
            tracing::info!(replica = self.me, leader, "no longer leads");
        }
        self.leading = leading;
        if !leading && !self.queue.is_empty() {
            let leader = replica.leader();
            let refused: Vec<_> = self.queue.drain().collect();
            self.metrics.refused(refused.len() as u64);
            for (_, _, completer) in refused {
                completer.complete(Err(Error::NotLeader {
                    replica: self.me,
                    leader,
                }));
            }
        }
        let members = replica.members_at(self.slots_applied);
        let held = leading && self.followers_behind(members);
        self.show_held(held, now_ns);
        while self.in_flight.len() < self.max_in_flight
            && self.queue.due(&self.packing, now_ns)
            && !held
        {
            let Some((entry, mut commands)) = self.queue.pack(&self.packing) else {
                break;
            };
            assert!(
                entry.len() <= self.packing.max_bytes,
                "a batch fits an entry"
            );
            match replica.propose(entry) {
                Ok(id) => {
                    self.metrics.proposed(commands.len() as u64);
                    for (_, c) in &mut commands {
                        c.proposed = true;
                    }
                    assert!(
                        self.in_flight.insert(id, commands).is_none(),
                        "proposal ids are unique"
                    );
                }
                Err(e) => {
                    self.metrics.refused(commands.len() as u64);
                    let error = self.refusal(e);
                    for (_, c) in commands {
                        c.complete(Err(error.clone()));
                    }
                }
            }
        }
        assert!(
            self.in_flight.len() <= self.max_in_flight,
            "the pipeline's bound holds"
        );
    }

    /// Traces the lag bound's hold on new batches as it begins (`DEBUG`) and ends (with
    /// its length).
    fn show_held(&mut self, held: bool, now_ns: u64) {
        match (held, self.held_since) {
            (true, None) => {
                self.held_since = Some(now_ns);
                tracing::debug!(
                    replica = self.me,
                    slot = self.slots_applied,
                    "holds batches back: its followers are behind"
                );
            }
            (false, Some(since)) => {
                self.held_since = None;
                let held_us = now_ns.saturating_sub(since) / 1_000;
                tracing::debug!(replica = self.me, held_us, "resumes batches");
            }
            _ => {}
        }
    }

    /// Whether this replacement votes and has applied within the lag bound of every live
    /// replica: from then on the bound counts it.
    fn caught_up(&self, replica: &Replica) -> bool {
        let ahead = self
            .peers
            .iter()
            .filter(|p| p.status.load(Ordering::SeqCst) == UP)
            .map(|p| p.slots_applied.load(Ordering::SeqCst))
            .max()
            .unwrap_or(0);
        replica.votes() && self.slots_applied + self.lag_slots_max >= ahead
    }

    /// Whether every live follower has fallen more than the bound behind this replica's
    /// log. Followers learn about one slot per turn; a leader that runs far ahead leaves
    /// its successor that many slots to decide again after a crash (a long failover), so
    /// it lets commands gather into bigger batches instead. Only while a successor could
    /// decide: once the live `members` without this replica are no majority (three
    /// replicas, one crashed), this replica's crash stops the log whatever the lag, and
    /// holding back would only tie the log to its slowest follower (after a failover,
    /// one that fell thousands of slots behind while the other kept up: seconds). A
    /// replacement counts once it votes and has caught up within the bound, not while it
    /// copies a snapshot and replays the log: counted then, it left the one follower
    /// that kept up alone to set the log's pace, and that follower, sharing the cores
    /// with the copy, fell more than the bound behind and held the leader's batches back
    /// for 10 to 20 ms at a time (`velos bench bank`).
    fn followers_behind(&self, members: Members) -> bool {
        if self.lag_slots_max == 0 {
            return false;
        }
        let me = usize::from(self.me);
        // The live followers among the members: how many, and the furthest one's slot. A
        // replacement counts once it votes and caught up: until then it is no successor
        // (Ω passes over it) and it copies and replays on cores its peers share.
        let (live, best) = self
            .peers
            .iter()
            .enumerate()
            .filter(|&(r, p)| {
                r != me
                    && members.contains(r as u16)
                    && p.status.load(Ordering::SeqCst) == UP
                    && !p.joining.load(Ordering::SeqCst)
            })
            .map(|(_, p)| p.slots_applied.load(Ordering::SeqCst))
            .fold((0usize, 0u64), |(n, best), s| (n + 1, best.max(s)));
        if live < members.majority() {
            return false; // no successor could decide: no failover to keep short
        }
        // Rule (lag bound): held back only while a successor could decide (above).
        self.slots_applied > best + self.lag_slots_max
    }

    /// Applies what the engine committed (batches unpacked, no-ops skipped) and hands out
    /// the outcomes of this replica's proposals once their slots are applied here.
    pub(crate) fn collect(&mut self, replica: &mut Replica, now_ns: u64) {
        for event in replica.take_events() {
            super::events::trace(self.me, &event);
            if let velos_core::log::Event::MembersChanged { members, .. } = event {
                self.shown.members.store(members.0, Ordering::SeqCst);
            }
        }
        if let Some(tx) = self.voting.take_if(|_| replica.votes()) {
            tracing::info!(
                replica = self.me,
                incarnation = replica.incarnation(),
                "replacement votes"
            );
            tx.send(Ok(replica.incarnation()));
        }
        for (point, snapshot) in replica.take_installed() {
            // Fell off the ring: a peer's snapshot holds every slot below its point. The
            // log's stamps make the copy consistent, so a snapshot that does not restore
            // is the service's own bug, shared by every replica: a broken invariant.
            let (sessions, state) = Sessions::restore(&snapshot, self.sessions.max())
                .unwrap_or_else(|| panic!("replica {}: a snapshot without its sessions", self.me));
            self.machine
                .restore(state)
                .unwrap_or_else(|e| panic!("replica {}: {e}", self.me));
            self.sessions = sessions;
            assert!(
                point > self.slots_applied,
                "a snapshot moves a replica forward"
            );
            self.slots_applied = point;
            self.last_snapshot = point;
            self.metrics.installed();
            if let Some(p) = &self.persist
                && let Some(bytes) = disk_snapshot(replica, point, &snapshot)
            {
                p.installed(self.base + point, bytes);
            }
        }
        // Configuration entries reach the service empty; the disk keeps their members.
        let changes = match &self.persist {
            Some(_) => {
                let new = replica.memberships[self.memberships_seen..].to_vec();
                self.memberships_seen = replica.memberships.len();
                new
            }
            None => Vec::new(),
        };
        for (slot, entry) in replica.drain_committed() {
            assert_eq!(slot, self.slots_applied, "slots are applied in order");
            self.slots_applied += 1;
            // Only a replica with batches under way can be waiting for this slot's answers.
            let mine = !self.in_flight.is_empty() || self.decided.contains_key(&slot);
            self.apply_entry(self.base + slot, &entry, mine.then_some(slot));
            if let Some(p) = &self.persist {
                match changes.iter().find(|&&(s, _)| s == slot) {
                    Some(&(_, members)) => {
                        let bytes = members.0.to_le_bytes().to_vec();
                        p.append(self.base + slot, Kind::Configuration, bytes);
                    }
                    None => p.append(self.base + slot, Kind::Service, entry),
                }
            }
        }
        self.collect_rest(replica, now_ns);
    }

    /// Rule (durable nudge): a follower learns a slot from the next slot's accept (its
    /// previous decision) or, with nothing after it, by reading a majority once it learned
    /// nothing for `catch_up_after_ns` (2 ms on threads) — so an entry a leader decided
    /// last, with nothing after it, sits on the leader's disk alone for milliseconds, and a
    /// durable acknowledgement waits for a majority's disks. A durable wait asks the
    /// leader ([`Command::Nudge`]); a leader with nothing under way and a new entry
    /// applied proposes one empty entry, and the followers learn the entries before it at
    /// once. Loads that do not wait for durability never pay for it; a busy leader needs
    /// none (its next entry tells the followers).
    pub(crate) fn nudge(&mut self, replica: &mut Replica) {
        let idle = self.in_flight.is_empty()
            && self.queue.is_empty()
            && self.log_reads.is_empty()
            && self.changes.is_empty();
        let leading = replica.leader() == self.me && replica.is_leader();
        if self.persist.is_none() || !leading || !idle || self.slots_applied <= self.nudged_through
        {
            return;
        }
        if replica.propose(Vec::new()).is_ok() {
            // The empty entry takes the next slot: once it is applied, nothing is left for
            // another nudge to tell.
            self.nudged_through = self.slots_applied + 1;
        }
    }

    /// Applies the entry of the log's slot `slot` (a no-op if empty); its answers are
    /// kept under the engine's slot `respond` if some receipt here may wait for them.
    fn apply_entry(&mut self, slot: u64, entry: &[u8], respond: Option<u64>) {
        if entry.is_empty() {
            return; // a no-op filling a gap, or a configuration entry
        }
        match batch::decode(entry) {
            Ok(batch) => {
                for (index, frame) in batch.commands.into_iter().enumerate() {
                    let position = Position {
                        slot,
                        index: index as u32,
                    };
                    let response = if batch.sessions {
                        self.apply_in_session(position, frame)
                    } else {
                        self.commands_applied += 1;
                        Ok(self.machine.apply(position, frame))
                    };
                    if let Some(engine_slot) = respond {
                        self.responses
                            .entry(engine_slot)
                            .or_default()
                            .push(response);
                    }
                }
            }
            // Every replica decodes the same bytes, so every one skips it alike.
            Err(e) => {
                self.metrics.undecodable();
                tracing::warn!(replica = self.me, slot, error = %e, "skipped an entry");
            }
        }
    }

    /// [`Driver::collect`] past the entries: snapshots, outcomes, reads, changes.
    fn collect_rest(&mut self, replica: &mut Replica, now_ns: u64) {
        // A large snapshot is written into its bank over several turns: the next one is
        // not even taken (the state machine's copy costs) until that write is done.
        let due = self.snapshot_every > 0
            && self.slots_applied >= self.last_snapshot + self.snapshot_every;
        if due && replica.snapshot_writing().is_none() {
            let state = self.machine.snapshot();
            let state_bytes = state.len();
            let snapshot = self.sessions.snapshot(state);
            if let Some(p) = &self.persist
                && let Some(bytes) = disk_snapshot(replica, self.slots_applied, &snapshot)
            {
                p.snapshot(self.base + self.slots_applied, bytes);
            }
            let taken = replica.snapshot_taken(self.slots_applied, snapshot);
            if let Err(e) = &taken {
                // The ring cannot recycle slots this snapshot would have covered: without
                // a later one that fits, the log fills.
                tracing::warn!(
                    replica = self.me,
                    slot = self.slots_applied,
                    error = %e,
                    "snapshot refused: the log cannot recycle past it"
                );
            }
            self.metrics.snapshot_handed(taken.is_ok());
            // The size is checked first: any other outcome says it fits.
            self.too_large = match &taken {
                Err(SnapshotError::TooLarge { len, max }) => Some(Error::SnapshotTooLarge {
                    replica: self.me,
                    bytes: *len,
                    state_bytes,
                    sessions: self.sessions.len(),
                    max: *max,
                }),
                _ => None,
            };
            self.shown.show_too_large(self.too_large.clone());
            self.snapshot_refused = taken.err().map(|e| e.to_string());
            self.last_snapshot = self.slots_applied;
        }
        // Shown before any receipt resolves: whoever saw a commit sees it applied here.
        self.shown
            .slots_applied
            .store(self.slots_applied, Ordering::SeqCst);
        if self.shown.joining.load(Ordering::SeqCst) && self.caught_up(replica) {
            self.shown.joining.store(false, Ordering::SeqCst);
            tracing::debug!(
                replica = self.me,
                slot = self.slots_applied,
                "replacement caught up"
            );
        }
        self.shown
            .commands_applied
            .store(self.commands_applied, Ordering::SeqCst);
        for (id, answer) in replica.take_reads() {
            let job = self.lease_reads.remove(&id).expect("a read asked here");
            self.metrics.read(answer.is_ok());
            match answer {
                Ok(index) => self.ready_reads.push((index, job)),
                Err(_) => self.read_through_log(replica, job),
            }
        }
        for (id, result) in replica.take_results() {
            if let Some((members, at, completer)) = self.changes.remove(&id) {
                match result {
                    Ok(slot) => self.changes_decided.push((slot, members, at, completer)),
                    Err(e) => completer.complete(Err(self.loss(e))),
                }
                continue;
            }
            if let Some(job) = self.log_reads.remove(&id) {
                match result {
                    Ok(slot) => self.ready_reads.push((slot + 1, job)),
                    Err(e) => job(Err(self.loss(e))),
                }
                continue;
            }
            let Some(commands) = self.in_flight.remove(&id) else {
                continue; // not a batch of this driver's (never happens: ids are ours)
            };
            match result {
                Ok(slot) => {
                    assert!(!self.decided.contains_key(&slot), "one batch per slot");
                    self.decided.insert(slot, commands);
                }
                Err(e) => {
                    let error = self.loss(e);
                    if error.not_proposed() {
                        self.metrics.refused(commands.len() as u64);
                    } else {
                        self.metrics.lost(commands.len() as u64);
                    }
                    tracing::debug!(
                        replica = self.me,
                        commands = commands.len(),
                        error = %error,
                        "batch not committed"
                    );
                    for (_, c) in commands {
                        c.complete(Err(error.clone()));
                    }
                }
            }
        }
        while let Some(entry) = self.decided.first_entry() {
            if *entry.key() >= self.slots_applied {
                break;
            }
            let (slot, commands) = entry.remove_entry();
            self.acknowledge(slot, commands, now_ns);
        }
        assert!(
            self.decided.keys().all(|&s| s >= self.slots_applied),
            "a receipt whose slot is applied here has resolved"
        );
        if self.in_flight.is_empty() && self.decided.is_empty() {
            self.responses.clear(); // nobody here waits for an answer
        }
        // A change resolves once it is in effect here (its slot applied, and the slots
        // before it takes effect): a removed leader has handed over by then.
        // (A later change is decided only once this one is in effect.)
        let applied = self.slots_applied;
        let later = replica.memberships.last().map_or(0, |&(slot, _)| slot);
        let now_members = replica.members_at(applied);
        // A leader that removed itself steps down at its next turn: the change resolves
        // after that, so that no command reaches it in between.
        let handed_over = !replica.is_leader() || now_members.contains(self.me);
        // Rule (void change): an entry applied that took no effect.
        let (void, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.changes_decided)
            .into_iter()
            .partition(|&(slot, ..)| {
                slot < applied && !replica.memberships.iter().any(|&(s, _)| s == slot)
            });
        for (slot, members, _, completer) in void {
            completer.complete(Err(Error::BadMembership(format!(
                "the change to {members} decided in slot {slot} was void: another change \
                 took effect first, and {members} is not one replica away from it"
            ))));
        }
        let (done, waiting): (Vec<_>, Vec<_>) = rest.into_iter().partition(|&(slot, m, _, _)| {
            slot < applied && (now_members == m || later > slot) && handed_over
        });
        self.changes_decided = waiting;
        for (slot, members, at, completer) in done {
            tracing::info!(
                replica = self.me,
                slot,
                members = %members,
                "membership change in effect"
            );
            completer.complete(Ok(CommitInfo {
                position: Position {
                    slot: self.base + slot,
                    index: 0,
                },
                batch_commands: 1,
                leader: self.me,
                latency: Duration::from_nanos(now_ns.saturating_sub(at)),
                response: (),
            }));
        }
        self.run_ready_reads();
        assert_eq!(
            self.slots_applied,
            replica.next_apply(),
            "every slot the engine applied was taken"
        );
        // Takes proposals: the role is held and Ω still names it (`take` refuses
        // otherwise; a role Ω no longer names is left at the next turn).
        let leader = replica.leader();
        let leading = leader == self.me && replica.is_leader();
        self.shown
            .show_leadership(self.me, (leader, leading), now_ns);
        self.shown.watch.check_gap(now_ns);
    }

    /// The error for a batch the engine refused to take (a full log names why this
    /// replica's last snapshot was refused, if it was).
    fn refusal(&self, e: ProposeError) -> Error {
        match e {
            ProposeError::NotLeader { leader } => Error::NotLeader {
                replica: self.me,
                leader,
            },
            // The driver checks sizes and bounds its pipeline below the engine's: these
            // mean the replica cannot take it now, which the caller may retry elsewhere.
            ProposeError::ValueTooLarge { .. } | ProposeError::Busy(_) => {
                Error::Unavailable { replica: self.me }
            }
            // Full for good: the snapshot that would free slots does not fit.
            ProposeError::LogFull => self.too_large.clone().unwrap_or(Error::LogFull {
                snapshot_refused: self.snapshot_refused.clone(),
            }),
            ProposeError::ShuttingDown => Error::ShuttingDown,
            ProposeError::Exhausted { slot } => Error::Exhausted { slot },
            ProposeError::Deposed => Error::OutcomeUnknown,
            ProposeError::BadMembership(why) => Error::BadMembership(member_ids(&why)),
            ProposeError::ChangePending => Error::ChangePending,
        }
    }

    /// The error for a batch the engine took and then could not decide.
    fn loss(&self, e: ProposeError) -> Error {
        match e {
            ProposeError::Deposed | ProposeError::ShuttingDown => Error::OutcomeUnknown,
            // Refused before any attempt: it was not proposed in any slot.
            other => self.refusal(other),
        }
    }

    /// Applies a session frame at `position` unless its session applied it before (rule
    /// (at most once)); the response: this application's, or the first one's if known.
    fn apply_in_session(&mut self, position: Position, frame: &[u8]) -> Result<S::Response, Error> {
        let slot = position.slot;
        let Some((id, seq, command)) = session::unwrap(frame) else {
            // Every replica reads the same bytes, so every one skips it alike.
            self.metrics.undecodable();
            tracing::warn!(replica = self.me, slot, "skipped a malformed session frame");
            return Err(Error::ResponseLost { slot });
        };
        match self.sessions.check(id, seq) {
            Verdict::Apply => {
                let response = self.machine.apply(position, command);
                self.commands_applied += 1;
                self.sessions.applied(id, seq, slot, &response);
                Ok(response)
            }
            Verdict::Duplicate(response) => {
                tracing::debug!(
                    replica = self.me,
                    session = id,
                    seq,
                    "a session's retry, not applied again"
                );
                response.ok_or(Error::ResponseLost { slot })
            }
            Verdict::Expired => {
                tracing::warn!(
                    replica = self.me,
                    session = id,
                    seq,
                    "a command of an expired session, not applied"
                );
                Err(Error::SessionExpired { session: id })
            }
        }
    }

    /// Resolves the receipts of a batch decided in `slot`, each with its command's
    /// response; without the responses (the slot was not applied here: a snapshot passed
    /// it, or the replica stops first) with [`Error::ResponseLost`].
    fn acknowledge(&mut self, slot: u64, commands: InFlight<S::Response>, now_ns: u64) {
        assert!(!commands.is_empty(), "a batch holds a command");
        let n = commands.len() as u32;
        let responses = self
            .responses
            .remove(&slot)
            .filter(|r| r.len() == commands.len());
        let latencies: Vec<u64> = commands
            .iter()
            .map(|&(at, _)| now_ns.saturating_sub(at))
            .collect();
        self.metrics.committed(&latencies);
        let lost = || {
            Err(Error::ResponseLost {
                slot: self.base + slot,
            })
        };
        let responses = responses.unwrap_or_else(|| (0..n).map(|_| lost()).collect());
        let answered = commands.into_iter().zip(latencies).zip(responses);
        for (index, (((_, c), latency), response)) in answered.enumerate() {
            let response = match response {
                Ok(response) => response,
                Err(e) => {
                    c.complete(Err(e));
                    continue;
                }
            };
            c.complete(Ok(CommitInfo {
                position: Position {
                    slot: self.base + slot,
                    index: index as u32,
                },
                batch_commands: n,
                leader: self.me,
                latency: Duration::from_nanos(latency),
                response,
            }));
        }
    }

    /// The replica stops: a crash loses every outcome not delivered (queued commands were
    /// not proposed; proposed ones have an unknown outcome), a shutdown reports decided
    /// batches as committed. The state machine, if the replica did not crash.
    pub(crate) fn stop(mut self, end: End, now_ns: u64) -> Option<S> {
        let crashed = end == End::Crashed;
        let status = match end {
            End::Crashed => {
                tracing::warn!(replica = self.me, "crashed: its memory and state are gone");
                CRASHED
            }
            End::Stopped => {
                tracing::debug!(replica = self.me, "stopped");
                STOPPED
            }
            End::Removed => REMOVED,
        };
        self.shown.show_status(self.me, status, Some(now_ns));
        let error = self.stopped_error(end != End::Stopped);
        let reads = std::mem::take(&mut self.lease_reads)
            .into_values()
            .chain(std::mem::take(&mut self.log_reads).into_values())
            .chain(
                std::mem::take(&mut self.ready_reads)
                    .into_iter()
                    .map(|(_, j)| j),
            );
        for job in reads {
            job(Err(error.clone()));
        }
        let changes = std::mem::take(&mut self.changes)
            .into_values()
            .map(|(_, _, c)| c)
            .chain(self.changes_decided.drain(..).map(|(_, _, _, c)| c));
        for c in changes {
            c.complete(Err(Error::OutcomeUnknown)); // proposed: it may still take effect
        }
        let queued: Vec<_> = self.queue.drain().collect();
        self.metrics.refused(queued.len() as u64);
        for (_, _, c) in queued {
            c.complete(Err(error.clone()));
        }
        let decided = std::mem::take(&mut self.decided);
        let mut lost: Vec<InFlight<S::Response>> = self.in_flight.drain().map(|(_, c)| c).collect();
        for (slot, commands) in decided {
            if crashed {
                lost.push(commands); // a crashed replica tells nobody
            } else {
                self.acknowledge(slot, commands, now_ns);
            }
        }
        for commands in lost {
            self.metrics.lost(commands.len() as u64);
            for (_, c) in commands {
                c.complete(Err(Error::OutcomeUnknown));
            }
        }
        assert!(self.idle(), "every receipt was completed");
        match self.persist.take() {
            Some(p) if crashed => p.abandon(),
            Some(p) => p.finish(),
            None => {}
        }
        (!crashed).then_some(self.machine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::state_machine::RestoreError;

    struct Nop;

    impl StateMachine for Nop {
        type Response = ();

        fn apply(&mut self, _: Position, _: &[u8]) {}
        fn snapshot(&self) -> Vec<u8> {
            Vec::new()
        }
        fn restore(&mut self, _: &[u8]) -> Result<(), RestoreError> {
            Ok(())
        }
    }

    #[test]
    fn the_lag_bound_holds_back_only_while_a_successor_could_decide() {
        let peers: Arc<[Arc<Shown>]> = (0..3).map(|_| Arc::new(Shown::default())).collect();
        let config = Config::new(3);
        let mut d = Driver::new(0, Nop, &config, Arc::new(Metrics::new()), peers.clone());
        let members = Members::all(3);
        d.slots_applied = 100;
        assert!(
            d.followers_behind(members),
            "both followers 100 slots behind"
        );
        peers[1].slots_applied.store(50, Ordering::SeqCst);
        assert!(
            !d.followers_behind(members),
            "the best follower is within 64"
        );
        peers[1].status.store(CRASHED, Ordering::SeqCst);
        assert!(
            !d.followers_behind(members),
            "one live follower: no successor could decide, nothing to hold back for"
        );
        // Replica 1's replacement, far behind: counted only once it caught up.
        peers[1].status.store(UP, Ordering::SeqCst);
        peers[1].slots_applied.store(0, Ordering::SeqCst);
        peers[1].joining.store(true, Ordering::SeqCst);
        assert!(
            !d.followers_behind(members),
            "a replacement still joining is not counted"
        );
        peers[1].joining.store(false, Ordering::SeqCst);
        assert!(
            d.followers_behind(members),
            "it joined: both followers behind"
        );
    }
}
