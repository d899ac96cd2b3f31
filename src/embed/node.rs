//! [`Node`]: one replica of a log in this process, the handle of a deployment that runs
//! one process per replica (over real RDMA: [`Backend::Verbs`]).

use super::config::{Backend, Config, Start};
use super::driver::{Command, Driver, Framed};
use super::error::{Error, StartError};
use super::handle::read_job;
use super::metrics::{Metrics, MetricsSnapshot};
use super::node_dir::{self, Begin, NodeDisk};
use super::receipt::{Answer, Outcome, Receipt, answer, pair};
use super::shown::{Role, STOPPED, Shown, admit, role_of, too_large};
use super::state_machine::StateMachine;
use super::verbs_backend;
use crossbeam_channel::{Receiver, Sender, unbounded};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::{self, JoinHandle};
use velos_core::log::membership::Members;

/// One replica of a replicated log, running in this process and applying the committed
/// commands to the service's [`StateMachine`]; its peers are the other processes of the
/// cluster file, each with a `Node` of its own.
///
/// Proposals and reads are taken where the leader is: a follower refuses them with
/// [`Error::NotLeader`], naming the leader it trusts, and the service forwards the
/// request to that replica's process by its own means (it knows its transport best).
/// A receipt resolves once the command is committed *and applied here*.
///
/// The follower-lag bound ([`BatchConfig::follower_lag_slots_max`](super::BatchConfig))
/// is not enforced: a process does not see how far its peers have applied.
///
/// ```no_run
/// use velos::cluster_file::ClusterFile;
/// use velos::embed::{Config, Error, Node, Position, RestoreError, StateMachine};
///
/// #[derive(Default)]
/// struct Counter(u64);
///
/// impl StateMachine for Counter {
///     type Response = u64; // the count after the command
///     fn apply(&mut self, _: Position, command: &[u8]) -> u64 {
///         self.0 += u64::from(command.first().copied().unwrap_or(0));
///         self.0
///     }
///     fn snapshot(&self) -> Vec<u8> {
///         self.0.to_le_bytes().to_vec()
///     }
///     fn restore(&mut self, bytes: &[u8]) -> Result<(), RestoreError> {
///         let b = bytes.try_into().map_err(|_| RestoreError("8 bytes".into()))?;
///         self.0 = u64::from_le_bytes(b);
///         Ok(())
///     }
/// }
///
/// let cluster = ClusterFile::load("cluster.toml".as_ref())?;
/// let node = Node::start(Config::verbs(cluster, 0), Counter::default())?;
/// match node.propose(vec![5]) {
///     Ok(info) => println!("slot {}: the count is {}", info.position.slot, info.response),
///     Err(Error::NotLeader { leader, .. }) => println!("forward it to replica {leader}"),
///     Err(e) => println!("not committed: {e}"),
/// }
/// let counter = node.shutdown();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Node<S: StateMachine> {
    pub(super) config: Config,
    id: u16,
    inbox: Sender<Command<S::Response>>,
    pub(super) shown: Arc<Shown>,
    /// Every replica's view: this one's, and the peers' durable points as last read.
    pub(super) peers: Arc<[Arc<Shown>]>,
    /// With durability on: its disk.
    pub(super) disk: Option<NodeDisk>,
    metrics: Arc<Metrics>,
    runner: Option<JoinHandle<Option<S>>>,
    max_command: usize,
    /// A process that joined the running cluster: its answer once it votes, until taken.
    voting: std::sync::Mutex<Option<Answer<u64>>>,
}

/// Starts a node's runner: given its driver, inbox and how it begins on its disk, the
/// thread that runs it, once the replica is connected.
pub(crate) type Launch<S> = dyn FnOnce(
    Driver<S>,
    Receiver<Command<<S as StateMachine>::Response>>,
    Begin,
) -> Result<JoinHandle<Option<S>>, StartError>;

impl<S: StateMachine> Node<S> {
    /// Starts this process's replica as `config` says ([`Config::verbs`]): registers its
    /// memory, meets the other processes at the cluster file's addresses, connects, and
    /// returns once the replica runs (or the rendezvous timed out). A build without the
    /// `verbs` feature refuses with [`StartError::Backend`].
    pub fn start(config: Config, machine: S) -> Result<Node<S>, StartError> {
        config.validate().map_err(StartError::InvalidConfig)?;
        let Backend::Verbs(verbs) = config.backend.clone() else {
            return Err(StartError::InvalidConfig(
                "Node::start runs one replica of a deployment over real RDMA \
                 (Backend::Verbs, Config::verbs); Cluster::start runs a whole cluster \
                 in this process"
                    .into(),
            ));
        };
        config
            .check_snapshot(verbs.id, &machine)
            .map_err(StartError::InvalidConfig)?;
        verbs_backend::available()?;
        let (id, log, start) = (verbs.id, config.log.clone(), verbs.start);
        Node::launch(
            config,
            (id, start),
            machine,
            Box::new(move |driver, inbox, begin| {
                verbs_backend::start(log, &verbs, (driver, begin), inbox)
            }),
        )
    }

    /// Starts replica `id`, beginning as `start` says, with `launch` (a backend's runner).
    pub(crate) fn launch(
        config: Config,
        (id, start): (u16, Start),
        machine: S,
        launch: Box<Launch<S>>,
    ) -> Result<Node<S>, StartError> {
        assert!(id < config.log.replicas, "validated: the replica exists");
        let metrics = Arc::new(Metrics::new());
        // The peers' views stay "stopped": this process does not see them, so the
        // follower-lag bound finds no follower to wait for.
        let shown: Arc<[Arc<Shown>]> = (0..config.log.replicas)
            .map(|r| {
                let s = Shown::default();
                if r != id {
                    s.status.store(STOPPED, Ordering::SeqCst);
                }
                Arc::new(s)
            })
            .collect();
        let me = Arc::clone(&shown[usize::from(id)]);
        let mut driver = Driver::new(
            id,
            machine,
            &config,
            Arc::clone(&metrics),
            Arc::clone(&shown),
        );
        let (disk, begin) = match (&config.durable_dir, start) {
            (Some(_), _) => {
                let (disk, begin) = node_dir::open(&config, (id, start), &mut driver, &shown)?;
                (Some(disk), begin)
            }
            (None, Start::WithCluster) => (None, Begin::Fresh),
            (None, Start::Join { .. }) => (None, Begin::Join(None)),
            (None, Start::Recover) => {
                return Err(StartError::InvalidConfig(
                    "a recovery (Start::Recover) restarts from the replica's directory: set \
                     Config::durable"
                        .into(),
                ));
            }
        };
        let joining = matches!(start, Start::Join { .. });
        let voting = joining.then(|| {
            let (tx, voting) = answer(id);
            driver.tell_when_voting(tx);
            voting
        });
        let (inbox, commands) = unbounded();
        let runner = launch(driver, commands, begin)?;
        let max_command = config.max_command_bytes();
        assert!(max_command > 0, "validated: a batch holds a command");
        Ok(Node {
            config,
            id,
            inbox,
            shown: me,
            peers: shown,
            disk,
            metrics,
            runner: Some(runner),
            max_command,
            voting: std::sync::Mutex::new(voting),
        })
    }

    /// For a process that joined the running cluster ([`Start::Join`],
    /// [`Config::verbs_joining`]): an answer that resolves with its incarnation once it
    /// votes (a decided configuration names it in its next slot; until then a majority of
    /// the others decides without it) — `.await` it, or `wait_timeout`; an error if the
    /// replica stops first. `None` for a process that started with the cluster, and after
    /// the first call.
    pub fn voting(&self) -> Option<Answer<u64>> {
        self.voting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }

    /// Wakes the replica's loop: a durable wait is under way (a leader also lets its
    /// followers learn what it applied, rule (durable nudge)).
    pub(super) fn nudge(&self) {
        let _ = self.inbox.send(Command::Nudge);
    }

    /// This replica's id.
    pub fn id(&self) -> u16 {
        self.id
    }

    /// The configuration it runs.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The largest command a proposal may carry.
    pub fn max_command_bytes(&self) -> usize {
        self.max_command
    }

    /// Proposes `command` here: a receipt to block on or `.await`. Refused with
    /// [`Error::NotLeader`] unless this replica leads.
    pub fn propose_async(&self, command: Vec<u8>) -> Receipt<S::Response> {
        let admitted = admit(&self.shown, self.id, command.len(), self.max_command)
            .and_then(|()| too_large(std::slice::from_ref(&self.shown)));
        match admitted {
            Err(e) => {
                self.metrics.refused(1);
                Receipt::ready(Err(e))
            }
            Ok(()) => {
                let (receipt, completer) = pair(self.id, self.config.wait_timeout);
                // A send fails only when the runner is gone: the completer, dropped
                // unsent, refuses the receipt.
                let framed = Framed {
                    bytes: command,
                    session: false,
                };
                let _ = self.inbox.send(Command::Propose(framed, completer));
                receipt
            }
        }
    }

    /// Proposes `command` here and waits (at most the wait timeout) until it is
    /// committed and applied here.
    pub fn propose(&self, command: Vec<u8>) -> Outcome<S::Response> {
        self.propose_async(command).wait()
    }

    /// A linearizable read on this replica's state machine, if it leads (see
    /// [`Cluster::read`](super::Cluster::read): from the lease, or through the log).
    pub fn read<R: Send + 'static>(
        &self,
        query: impl Fn(&S) -> R + Send + Sync + 'static,
    ) -> Result<R, Error> {
        let (job, answer) = read_job(self.id, Arc::new(query));
        // A send fails only when the runner is gone: the job, dropped unrun, answers
        // `Unavailable`.
        let _ = self.inbox.send(Command::Read(job));
        answer.wait_timeout(self.config.wait_timeout)
    }

    /// Changes which replicas vote to `members` through the log, if this replica leads
    /// (see [`Cluster::change_members`](super::Cluster::change_members)); returns once
    /// the change is in effect here.
    pub fn change_members(&self, members: &[u16]) -> Outcome {
        let replicas = self.config.log.replicas;
        if let Some(&replica) = members.iter().find(|&&r| r >= replicas) {
            return Err(Error::NoSuchReplica { replica, replicas });
        }
        let (receipt, completer) = pair(self.id, self.config.wait_timeout);
        let _ = self
            .inbox
            .send(Command::Members(Members::of(members), completer));
        receipt.wait()
    }

    /// The leader as this replica sees it.
    pub fn leader(&self) -> u16 {
        self.shown.leader.load(Ordering::SeqCst)
    }

    /// What this replica is doing.
    pub fn role(&self) -> Role {
        role_of(&self.shown)
    }

    /// Commands applied here one by one (a snapshot restored is not counted).
    pub fn applied_commands(&self) -> u64 {
        self.shown.commands_applied.load(Ordering::SeqCst)
    }

    /// Log slots applied here (batches and no-ops).
    pub fn applied_slots(&self) -> u64 {
        self.shown.slots_applied.load(Ordering::SeqCst)
    }

    /// This replica's counters so far.
    pub fn metrics(&self) -> MetricsSnapshot {
        let mut m = self.metrics.snapshot();
        m.durable = self.durable_points();
        m.durable_index = self.durable_index();
        m.disk_syncs = self.shown.disk_syncs.load(Ordering::Relaxed);
        m
    }

    /// Stops the replica (outstanding receipts resolve) and returns its state machine.
    pub fn shutdown(mut self) -> Option<S> {
        self.stop()
    }

    fn stop(&mut self) -> Option<S> {
        let runner = self.runner.take()?;
        let _ = self.inbox.send(Command::Shutdown);
        runner.join().expect("the replica's runner panicked")
    }
}

impl<S: StateMachine> Drop for Node<S> {
    fn drop(&mut self) {
        if thread::panicking() {
            let _ = self.inbox.send(Command::Shutdown);
        } else {
            self.stop();
        }
    }
}
