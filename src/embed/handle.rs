//! [`Cluster`]: the handle of an embedded cluster — start, propose, query, crash, stop.

use super::config::{Backend, Config};
use super::driver::{Command, Driver, Framed, ReadJob};
use super::error::{Error, StartError};
use super::gaps::{Clock, Gaps};
use super::metrics::{Metrics, MetricsSnapshot};
use super::receipt::{Answer, Outcome, Receipt, answer, pair};
use super::recovery::{self, ClusterDisk, Disks};
use super::retry::{self, Call, Then};
use super::session;
use super::shown::{CRASHED, Role, Shown, UP, admit, leader_of, role_of, too_large};
use super::state_machine::StateMachine;
use super::watch::LeaderWatch;
use super::{emulator_backend, mem_backend};
use crossbeam_channel::Sender;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread;
use std::time::{Duration, Instant};
use velos_core::log::membership::Members;
use velos_rdma::NodeId;
use velos_rdma::mem::MemFabric;

/// A read job running `query` on `replica`'s state machine, and its answer (which says
/// [`Error::Unavailable`] if the job is dropped unrun: the replica's runner is gone).
pub(crate) fn read_job<S: StateMachine, R: Send + 'static>(
    replica: u16,
    query: Arc<impl Fn(&S) -> R + Send + Sync + 'static>,
) -> (ReadJob, Answer<R>) {
    let (tx, answer) = answer(replica);
    let job = Box::new(move |state: Result<&dyn std::any::Any, Error>| {
        tx.send(state.map(|s| query(s.downcast_ref::<S>().expect("the state machine's type"))));
    });
    (job, answer)
}

pub(super) enum Inboxes<S: StateMachine> {
    /// The in-process backend: a thread per replica, each with its inbox (its receiver
    /// kept for a replacement), over one fabric.
    PerReplica {
        inboxes: Vec<Sender<Command<S::Response>>>,
        receivers: Vec<crossbeam_channel::Receiver<Command<S::Response>>>,
        fabric: Arc<MemFabric>,
        log: velos_rdma::Shared<velos_core::log::LogConfig>,
    },
    /// The emulator: one thread for every replica, and its channel of replacements.
    Shared(
        Sender<(u16, Command<S::Response>)>,
        Sender<emulator_backend::Replacement<S>>,
    ),
}

/// The threads that run the replicas.
pub(super) enum Runner<S: StateMachine> {
    /// One per replica (the in-process backend); a replaced one is joined when replaced.
    PerReplica(Mutex<Vec<Option<mem_backend::ReplicaThread<S>>>>),
    /// One for all (the emulator).
    One(thread::JoinHandle<Vec<Option<S>>>),
}

impl<S: StateMachine> Runner<S> {
    /// Waits for the replicas to stop: their state machines.
    fn join(self) -> Vec<Option<S>> {
        match self {
            Runner::PerReplica(threads) => threads
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .into_iter()
                .map(|t| t.and_then(|t| t.join().expect("a replica thread panicked")))
                .collect(),
            Runner::One(runner) => runner.join().expect("the cluster's runner panicked"),
        }
    }
}

/// A running embedded cluster: `replicas` replicas of one log, each applying the
/// committed commands to its own copy of the service's [`StateMachine`].
///
/// Proposals go to the leader: [`Cluster::submit`] finds it and retries while leadership
/// moves; [`Cluster::propose`] and [`Cluster::propose_async`] try the leader as seen now
/// once; [`Cluster::propose_at`] asks one replica, and a follower refuses with
/// [`Error::NotLeader`] (it does not forward: the caller knows best whether to retry).
/// A command's receipt resolves once its batch is committed *and applied at the leader
/// that proposed it*; the followers apply it soon after.
pub struct Cluster<S: StateMachine> {
    pub(super) config: Config,
    pub(super) inboxes: Inboxes<S>,
    pub(super) shown: Arc<[Arc<Shown>]>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) runner: Option<Runner<S>>,
    max_command: usize,
    sessions_opened: AtomicU64,
    /// Each replica's process's incarnation (0 at start; one more per replacement).
    pub(super) incarnations: Mutex<Vec<u64>>,
    /// With durability on: the replicas' disks.
    pub(super) disk: Option<ClusterDisk>,
}

impl<S: StateMachine> Cluster<S> {
    /// Starts one replica per state machine (replica i applies to the i-th); the
    /// configuration's replica count must match.
    pub fn start(
        config: Config,
        machines: impl IntoIterator<Item = S>,
    ) -> Result<Cluster<S>, StartError> {
        let machines = Cluster::checked(&config, machines)?;
        let disks = match config.durable_dir {
            Some(_) => Some(recovery::fresh(&config)?),
            None => None,
        };
        Cluster::start_on(config, machines, disks)
    }

    /// `machines`, one per replica of a valid `config`, each one's first snapshot within
    /// the log's snapshot size ([`Cluster::start`], [`Cluster::recover`]).
    pub(super) fn checked(
        config: &Config,
        machines: impl IntoIterator<Item = S>,
    ) -> Result<Vec<S>, StartError> {
        let machines: Vec<S> = machines.into_iter().collect();
        if machines.len() != usize::from(config.log.replicas) {
            return Err(StartError::InvalidConfig(format!(
                "{} state machines for {} replicas",
                machines.len(),
                config.log.replicas
            )));
        }
        config.validate().map_err(StartError::InvalidConfig)?;
        for (i, machine) in machines.iter().enumerate() {
            let replica = u16::try_from(i).expect("validated: at most 64 replicas");
            config
                .check_snapshot(replica, machine)
                .map_err(StartError::InvalidConfig)?;
        }
        Ok(machines)
    }

    /// [`Cluster::start`] with its machines checked, on `disks` if durability is on.
    pub(super) fn start_on(
        config: Config,
        machines: Vec<S>,
        disks: Option<Disks>,
    ) -> Result<Cluster<S>, StartError> {
        let metrics = Arc::new(Metrics::new());
        // Every replica's view is here: the watch reports gaps without a leader, on the
        // clock the replicas share (each mem thread's clock starts with the thread).
        let clock = match config.backend {
            Backend::Emulator(_) => Clock::Backend,
            _ => Clock::Wall(Instant::now()),
        };
        let gaps = Gaps::new(clock, config.log.failure_timeout_ns);
        let watch = Arc::new(LeaderWatch::with_gaps(gaps));
        let shown: Arc<[Arc<Shown>]> = machines
            .iter()
            .map(|_| Arc::new(Shown::watched_by(Arc::clone(&watch))))
            .collect();
        let mut drivers: Vec<Driver<S>> = machines
            .into_iter()
            .enumerate()
            .map(|(i, m)| Driver::new(i as u16, m, &config, metrics.clone(), shown.clone()))
            .collect();
        let disk = match disks {
            Some(disks) => Some(recovery::open(&config, &mut drivers, &shown, disks)?),
            None => None,
        };
        let (inboxes, runner) = match &config.backend {
            Backend::Mem => {
                let started = mem_backend::start(config.log.clone(), drivers)?;
                let inboxes = Inboxes::PerReplica {
                    inboxes: started.inboxes,
                    receivers: started.receivers,
                    fabric: started.fabric,
                    log: started.log,
                };
                let threads = started.threads.into_iter().map(Some).collect();
                (inboxes, Runner::PerReplica(Mutex::new(threads)))
            }
            Backend::Emulator(e) => {
                let started = emulator_backend::start(config.log.clone(), e.clone(), drivers)?;
                let inboxes = Inboxes::Shared(started.inbox, started.replacements);
                (inboxes, Runner::One(started.runner))
            }
            Backend::Verbs(_) => {
                return Err(StartError::InvalidConfig(
                    "over real RDMA each replica runs in a process of its own: start it \
                     with Node::start"
                        .into(),
                ));
            }
        };
        let max_command = config.max_command_bytes();
        let incarnations = Mutex::new(vec![0; usize::from(config.log.replicas)]);
        assert!(max_command > 0, "validated: a batch holds a command");
        Ok(Cluster {
            config,
            inboxes,
            shown,
            metrics,
            runner: Some(runner),
            max_command,
            sessions_opened: AtomicU64::new(0),
            incarnations,
            disk,
        })
    }

    /// The configuration it runs.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Replicas.
    pub fn replicas(&self) -> u16 {
        self.config.log.replicas
    }

    /// The largest command a proposal may carry.
    pub fn max_command_bytes(&self) -> usize {
        self.max_command
    }

    fn shown(&self, replica: u16) -> Option<&Shown> {
        self.shown.get(usize::from(replica)).map(Arc::as_ref)
    }

    /// Proposes `command` at `replica`. A follower refuses ([`Error::NotLeader`] names the
    /// leader it trusts); the leader queues it for the next batch.
    pub fn propose_at(&self, replica: u16, command: Vec<u8>) -> Receipt<S::Response> {
        let framed = Framed {
            bytes: command,
            session: false,
        };
        self.propose_framed(replica, framed, 0)
    }

    /// Proposes `command` at `replica`; `envelope` bytes of it are a session's (not
    /// counted in the size a refusal reports).
    fn propose_framed(
        &self,
        replica: u16,
        command: Framed,
        envelope: usize,
    ) -> Receipt<S::Response> {
        let Some(shown) = self.shown(replica) else {
            return self.refuse(Error::NoSuchReplica {
                replica,
                replicas: self.replicas(),
            });
        };
        let (len, max) = (command.bytes.len(), self.max_command);
        if let Err(e) = admit(shown, replica, len, max) {
            return self.refuse(match e {
                Error::CommandTooLarge { .. } => Error::CommandTooLarge {
                    len: len - envelope,
                    max: max.saturating_sub(envelope),
                },
                other => other,
            });
        }
        if let Err(e) = too_large(&self.shown) {
            return self.refuse(e); // permanent: a retry would only wait for the ring to fill
        }
        let (receipt, completer) = pair(replica, self.config.wait_timeout);
        self.send(replica, Command::Propose(command, completer));
        receipt
    }

    fn refuse(&self, error: Error) -> Receipt<S::Response> {
        self.metrics.refused(1);
        Receipt::ready(Err(error))
    }

    /// Proposes `command` at the leader as the handle sees it now, once: a receipt to
    /// block on or `.await`.
    pub fn propose_async(&self, command: Vec<u8>) -> Receipt<S::Response> {
        match self.leader_or_why() {
            Ok(leader) => self.propose_at(leader, command),
            Err(e) => self.refuse(e),
        }
    }

    /// Proposes `command` at the leader as seen now and waits (at most the wait timeout)
    /// until it is committed and applied there.
    pub fn propose(&self, command: Vec<u8>) -> Outcome<S::Response> {
        self.propose_async(command).wait()
    }

    /// Sessions opened through this handle so far (the seed of the next one's id).
    pub(crate) fn sessions_opened(&self) -> u64 {
        self.sessions_opened.fetch_add(1, Ordering::SeqCst)
    }

    /// [`Cluster::submit`] of session `id`'s command `seq`, sent again on an unknown
    /// outcome (each resend counted in `resends`), all within one wait timeout.
    pub(crate) fn submit_in_session(
        &self,
        id: u64,
        seq: u64,
        command: &[u8],
        resends: &mut u64,
    ) -> Outcome<S::Response> {
        let (framed, envelope) = session_framed(id, seq, command);
        self.retry(Call::SessionCommand, resends, |left| {
            let framed = framed.clone();
            match self.leader_or_why() {
                Ok(leader) => self
                    .propose_framed(leader, framed, envelope)
                    .wait_timeout(left),
                Err(e) => Err(e),
            }
        })
    }

    /// [`Cluster::submit_in_session`] as a future: at the leader, again at the next one
    /// while leadership moves (no polling), sent again at once on an unknown outcome
    /// (counted in `resends`); no bound of its own.
    pub(crate) async fn submit_in_session_async(
        &self,
        id: u64,
        seq: u64,
        command: &[u8],
        resends: &mut u64,
    ) -> Outcome<S::Response> {
        let (framed, envelope) = session_framed(id, seq, command);
        self.at_leader(Call::SessionCommand, resends, |leader| {
            self.propose_framed(leader, framed.clone(), envelope)
        })
        .await
    }

    /// Proposes `command` at whichever replica leads, again while leadership moves or the
    /// log is full waiting for snapshots (the refusals that say it was not proposed and
    /// pass), until it commits or the wait timeout has passed — then the last refusal is
    /// returned ([`Error::LogFull`], [`Error::NoLeader`], …), or [`Error::TimedOut`] if
    /// the last attempt was a wait that ran out. Refusals that do not pass are returned at
    /// once: [`Error::SnapshotTooLarge`] from the first command after a replica's snapshot
    /// was refused for its size (the log could never reuse its slots), a command too
    /// large, … An [`Error::OutcomeUnknown`] is returned, not retried: proposing it again
    /// could apply it twice.
    pub fn submit(&self, command: Vec<u8>) -> Outcome<S::Response> {
        self.retry(Call::Command, &mut 0, |left| {
            self.propose_async(command.clone()).wait_timeout(left)
        })
    }

    /// Runs `attempt` of `call` (given the time left) again as [`retry::then`] says,
    /// within the wait timeout ([`retry::retry`]); a session command's resends are
    /// counted in `resends`.
    fn retry<T>(
        &self,
        call: Call,
        resends: &mut u64,
        attempt: impl FnMut(Duration) -> Result<T, Error>,
    ) -> Result<T, Error> {
        retry::retry(self.config.wait_timeout, call, resends, attempt)
    }

    /// Changes which replicas vote to `members` through the log (see
    /// `velos_core::log::membership`): one replica added or removed at a time; the
    /// change takes effect `log.pipeline` slots after the slot that commits it (returned
    /// as the position). Every replica of the configuration is started and follows the
    /// log; `log.members` are the first voters. Waits while leadership moves or another
    /// change is under way, up to the wait timeout.
    pub fn change_members(&self, members: &[u16]) -> Outcome {
        if let Some(&replica) = members.iter().find(|&&r| r >= self.replicas()) {
            return Err(Error::NoSuchReplica {
                replica,
                replicas: self.replicas(),
            });
        }
        let members = Members::of(members);
        self.retry(Call::MembersChange, &mut 0, |left| {
            let leader = self.leader_or_why()?;
            let (receipt, completer) = pair(leader, left);
            self.send(leader, Command::Members(members, completer));
            receipt.wait_timeout(left)
        })
    }

    /// A linearizable read: `query` runs on the leader's state machine once it holds
    /// every command committed before the read was asked, and its answer is returned.
    /// With leader leases on (`config.log.lease_ns > 0`) the leader answers from its lease
    /// at once; otherwise (or while it holds none) the read goes through the log: an empty
    /// marker entry is committed first. A read has no side effect, so it is asked again
    /// — of the next leader — while leadership moves and when the leader it was asked of
    /// crashes or loses its role before answering (which a command reports as
    /// [`Error::OutcomeUnknown`]), up to the wait timeout.
    pub fn read<R: Send + 'static>(
        &self,
        query: impl Fn(&S) -> R + Send + Sync + 'static,
    ) -> Result<R, Error> {
        let query = Arc::new(query);
        self.retry(Call::Read, &mut 0, |left| {
            let leader = self.leader_or_why()?;
            let (job, answer) = read_job(leader, Arc::clone(&query));
            self.send(leader, Command::Read(job));
            answer.wait_timeout(left)
        })
    }

    /// [`Cluster::read`] as a future: asked of the leader, and again of the next one
    /// while leadership moves or when the leader crashes or loses its role before
    /// answering (no polling, no runtime; no bound of its own).
    pub async fn read_async<R: Send + 'static>(
        &self,
        query: impl Fn(&S) -> R + Send + Sync + 'static,
    ) -> Result<R, Error> {
        let query = Arc::new(query);
        self.at_leader(Call::Read, &mut 0, |leader| {
            let (job, answer) = read_job(leader, Arc::clone(&query));
            self.send(leader, Command::Read(job));
            answer
        })
        .await
    }

    /// The leader as `replica` sees it; `None` if it is down.
    pub fn leader_seen_by(&self, replica: u16) -> Option<u16> {
        let shown = self.shown(replica)?;
        (shown.status.load(Ordering::SeqCst) == UP).then(|| shown.leader.load(Ordering::SeqCst))
    }

    /// The replica that takes proposals: a live one whose driver shows it holds the
    /// leader's role and Ω names it — never one that is merely trusted (the followers
    /// name a replica before it took the role up, and a crashed one until they miss its
    /// heartbeat). `None` while no live replica takes proposals (a failover under way,
    /// or every replica down). [`Cluster::wait_for_leader`] and [`Cluster::leader_async`]
    /// wait for one; [`Cluster::leader_seen_by`] tells whom a replica trusts.
    pub fn leader(&self) -> Option<u16> {
        leader_of(&self.shown)
    }

    /// Blocks until a live replica takes proposals (at most `timeout`, then
    /// [`Error::TimedOut`]; [`Error::NoReplicaUp`] once every replica is down): that
    /// replica, as [`Cluster::leader`] names it.
    pub fn wait_for_leader(&self, timeout: Duration) -> Result<u16, Error> {
        let start = Instant::now();
        loop {
            let seen = self.watch().version();
            if let Some(leader) = self.leader() {
                return Ok(leader);
            }
            if self.all_down() {
                return Err(Error::NoReplicaUp);
            }
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() || !self.watch().wait_past(seen, left) {
                return Err(Error::TimedOut { after: timeout });
            }
        }
    }

    /// A future of the leader: ready once a live replica leads, woken by the replicas'
    /// leadership changes (no polling, no runtime); `None` if every replica is down. It
    /// has no bound of its own: wrap it in your runtime's timeout.
    pub fn leader_async(&self) -> LeaderFuture<'_, S> {
        LeaderFuture { cluster: self }
    }

    /// [`Cluster::submit`] as a future: the command goes to the leader, and again to the
    /// next one while leadership moves (waiting for it without polling); resolves with
    /// the commit and its response, or the error that ends the attempt ([`Error::LogFull`]
    /// and [`Error::ChangePending`] are returned, not retried: retrying them needs a
    /// timer, which this crate, tied to no runtime, does not have). An
    /// [`Error::OutcomeUnknown`] is returned, not retried.
    pub async fn submit_async(&self, command: Vec<u8>) -> Outcome<S::Response> {
        self.at_leader(Call::Command, &mut 0, |leader| {
            self.propose_at(leader, command.clone())
        })
        .await
    }

    /// [`Cluster::change_members`] as a future: proposed at the leader, and again at the
    /// next one while leadership moves; resolves once the change is in effect at the
    /// leader, or with the error that ends it ([`Error::ChangePending`] is returned, not
    /// waited out: see [`Cluster::submit_async`]).
    pub async fn change_members_async(&self, members: &[u16]) -> Outcome {
        if let Some(&replica) = members.iter().find(|&&r| r >= self.replicas()) {
            return Err(Error::NoSuchReplica {
                replica,
                replicas: self.replicas(),
            });
        }
        let members = Members::of(members);
        self.at_leader(Call::MembersChange, &mut 0, |leader| {
            let (receipt, completer) = pair(leader, self.config.wait_timeout);
            self.send(leader, Command::Members(members, completer));
            receipt
        })
        .await
    }

    /// Runs `attempt` of `call` at the leader, and again as [`retry::then`] says: at the
    /// next leader once the replicas show leadership moved (no polling) after a refusal
    /// because it moved; at once after an unknown outcome where a copy is harmless (a
    /// read; a session's command, counted in `resends`). Other errors are returned —
    /// [`Error::LogFull`] and [`Error::ChangePending`] too: waiting them out needs a timer,
    /// which this crate, tied to no runtime, does not have.
    async fn at_leader<T, F: Future<Output = Result<T, Error>>>(
        &self,
        call: Call,
        resends: &mut u64,
        mut attempt: impl FnMut(u16) -> F,
    ) -> Result<T, Error> {
        loop {
            let seen = self.watch().version();
            let Some(leader) = self.leader_async().await else {
                return Err(Error::NoReplicaUp);
            };
            let error = match attempt(leader).await {
                Err(e) => e,
                done => return done,
            };
            match (retry::then(call, &error), error) {
                (Then::Resend, _) => *resends += u64::from(call == Call::SessionCommand),
                (
                    Then::Later,
                    Error::NotLeader { .. } | Error::Unavailable { .. } | Error::NoLeader,
                ) => {
                    WatchFuture {
                        watch: self.watch(),
                        seen,
                    }
                    .await;
                }
                (_, error) => return Err(error),
            }
        }
    }

    fn watch(&self) -> &LeaderWatch {
        &self.shown[0].watch
    }

    /// The leader, or why there is none: every replica down, or a failover under way.
    pub(crate) fn leader_or_why(&self) -> Result<u16, Error> {
        match self.leader() {
            Some(leader) => Ok(leader),
            None if self.all_down() => Err(Error::NoReplicaUp),
            None => Err(Error::NoLeader),
        }
    }

    fn all_down(&self) -> bool {
        (0..self.replicas())
            .all(|r| matches!(self.role(r), Role::Crashed | Role::Stopped | Role::Removed))
    }

    /// What `replica` is doing (a replica out of range is [`Role::Stopped`]).
    pub fn role(&self, replica: u16) -> Role {
        self.shown(replica).map_or(Role::Stopped, role_of)
    }

    /// Commands `replica` has applied to its state machine one by one (a replica that
    /// fell off the log's ring restores a peer's snapshot instead, which this does not
    /// count: [`Cluster::applied_slots`] tells how far it is).
    pub fn applied_commands(&self, replica: u16) -> u64 {
        self.shown(replica)
            .map_or(0, |s| s.commands_applied.load(Ordering::SeqCst))
    }

    /// Log slots `replica` has applied (batches and no-ops).
    pub fn applied_slots(&self, replica: u16) -> u64 {
        self.shown(replica)
            .map_or(0, |s| s.slots_applied.load(Ordering::SeqCst))
    }

    /// Waits until every live replica has applied as many slots as the most advanced
    /// replica did when the call began, a crashed one included (at most `timeout`): then
    /// they hold the same state and every command committed before the call, for example
    /// before [`Cluster::shutdown`] hands the state machines back. A slot a leader decided
    /// and applied alone just before it crashed is the survivors' once the next leader
    /// settles it, so after a crash this waits for a new leader.
    pub fn catch_up(&self, timeout: Duration) -> Result<(), Error> {
        catch_up(&self.shown, timeout)
    }

    /// [`Cluster::catch_up`] as a future (at most `timeout` too): a helper thread waits,
    /// so no runtime is needed and the executor is never blocked.
    pub fn catch_up_async(&self, timeout: Duration) -> Answer<()> {
        let (tx, answer) = answer(0);
        let shown = Arc::clone(&self.shown);
        thread::spawn(move || tx.send(catch_up(&shown, timeout)));
        answer
    }

    /// The counters so far.
    pub fn metrics(&self) -> MetricsSnapshot {
        let mut m = self.metrics.snapshot();
        m.durable = self.durable_points();
        m.durable_index = self.durable_index();
        let syncs = self
            .shown
            .iter()
            .map(|s| s.disk_syncs.load(Ordering::Relaxed));
        m.disk_syncs = syncs.sum();
        m
    }

    /// Crashes `replica`: its memory is gone (peers' operations towards it fail on `mem`,
    /// hang on the emulator) and it stops; its state machine is lost.
    pub fn crash(&self, replica: u16) -> Result<(), Error> {
        let shown = self.shown(replica).ok_or(Error::NoSuchReplica {
            replica,
            replicas: self.replicas(),
        })?;
        if shown.status.load(Ordering::SeqCst) != UP {
            return Err(Error::Unavailable { replica });
        }
        // Seen at once by the handle (leader queries skip it), before the runner acts.
        shown.show_status(replica, CRASHED, None);
        // In effect before this returns: on `mem` the node's memory goes now (its thread
        // stops when it reads the command); the emulator's runner takes commands in order,
        // so the crash comes before any later proposal.
        if let Inboxes::PerReplica { fabric, .. } = &self.inboxes {
            fabric.crash(NodeId(replica));
        }
        self.send(replica, Command::Crash);
        Ok(())
    }

    pub(super) fn send(&self, replica: u16, command: Command<S::Response>) {
        // A send fails only when the runner is gone (after a shutdown): the command,
        // dropped unsent, answers its caller with an error.
        let _ = match &self.inboxes {
            Inboxes::PerReplica { inboxes, .. } => {
                inboxes[usize::from(replica)].send(command).map_err(drop)
            }
            Inboxes::Shared(inbox, _) => inbox.send((replica, command)).map_err(drop),
        };
    }

    /// Stops every replica: outstanding receipts resolve (committed ones as such, the
    /// rest with errors). The state machines, `None` for crashed replicas.
    pub fn shutdown(mut self) -> Vec<Option<S>> {
        let machines = self.stop();
        assert_eq!(
            machines.len(),
            usize::from(self.replicas()),
            "one per replica"
        );
        machines
    }

    /// [`Cluster::shutdown`] as a future: every replica is told to stop when it is first
    /// polled, and it resolves with the state machines once they all have (a helper
    /// thread waits for them: no runtime, and the executor is never blocked).
    pub async fn shutdown_async(mut self) -> Vec<Option<S>> {
        let Some(runner) = self.tell_to_stop() else {
            return Vec::new();
        };
        let (tx, answer) = answer(0);
        thread::spawn(move || tx.send(Ok(runner.join())));
        let machines = answer.await.unwrap_or_else(|e| {
            panic!("the cluster's runner did not hand back the state machines: {e}")
        });
        assert_eq!(
            machines.len(),
            usize::from(self.replicas()),
            "one per replica"
        );
        machines
    }

    fn stop(&mut self) -> Vec<Option<S>> {
        self.tell_to_stop().map_or_else(Vec::new, Runner::join)
    }

    /// Tells every replica to stop; the runner to join, if it was not taken before.
    fn tell_to_stop(&mut self) -> Option<Runner<S>> {
        let runner = self.runner.take()?;
        for r in 0..self.replicas() {
            self.send(r, Command::Shutdown);
        }
        Some(runner)
    }
}

impl<S: StateMachine> Drop for Cluster<S> {
    fn drop(&mut self) {
        if !thread::panicking() {
            self.stop();
        } else {
            // Stop the replicas without joining (a panicking runner would abort): the
            // runner's handle is dropped, detached.
            drop(self.tell_to_stop());
        }
    }
}

/// Waits until every live replica of `shown` has applied as many slots as the most
/// advanced one, crashed or not, did when the call began (at most `timeout`). A removed
/// replica that ended is not live.
fn catch_up(shown: &[Arc<Shown>], timeout: Duration) -> Result<(), Error> {
    let start = Instant::now();
    let live = || {
        shown
            .iter()
            .filter(|s| !matches!(role_of(s), Role::Crashed | Role::Removed))
    };
    let applied = |s: &Shown| s.slots_applied.load(Ordering::SeqCst);
    let target = shown.iter().map(|s| applied(s)).max().unwrap_or(0);
    while live().any(|s| applied(s) < target) {
        if start.elapsed() >= timeout {
            return Err(Error::TimedOut { after: timeout });
        }
        // Followers learn in microseconds to milliseconds: poll, no condition variable
        // on the replicas' hot path.
        thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}

/// [`Cluster::leader_async`]'s future.
#[must_use = "a future does nothing unless awaited"]
pub struct LeaderFuture<'a, S: StateMachine> {
    cluster: &'a Cluster<S>,
}

impl<S: StateMachine> Future for LeaderFuture<'_, S> {
    type Output = Option<u16>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<u16>> {
        loop {
            let seen = self.cluster.watch().version();
            if let Some(leader) = self.cluster.leader() {
                return Poll::Ready(Some(leader));
            }
            if self.cluster.all_down() {
                return Poll::Ready(None);
            }
            if self.cluster.watch().register(seen, cx.waker()) {
                return Poll::Pending;
            }
        }
    }
}

/// Ready once the watch's version passed `seen`.
struct WatchFuture<'a> {
    watch: &'a LeaderWatch,
    seen: u64,
}

impl Future for WatchFuture<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.watch.register(self.seen, cx.waker()) {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}

/// Session `id`'s command `seq` in its envelope, framed for proposal, and the envelope's
/// length.
fn session_framed(id: u64, seq: u64, command: &[u8]) -> (Framed, usize) {
    let bytes = session::wrap(id, seq, command);
    let envelope = bytes.len() - command.len();
    (
        Framed {
            bytes,
            session: true,
        },
        envelope,
    )
}
