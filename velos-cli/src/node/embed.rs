//! `velos node --embed`: the node run through the embedding handle ([`embed::Node`]),
//! as a service embedding Velos over real RDMA would run it. Its state machine records
//! the commands applied (each reported as [`Event::Applied`]); the built-in client
//! proposes `values` generated commands through the handle while this replica leads, up
//! to the batch pipeline's worth at once, proposing again those refused unproposed.

use super::client::{generated_value, outcome};
use super::{Event, NodeError, NodeReport, NodeSpec, NodeStatus};
use crossbeam_channel::{Receiver, Sender, unbounded};
use std::collections::VecDeque;
use std::time::{Duration, Instant};
use velos::embed::{self, Config, Position, Receipt, RestoreError, StateMachine};

/// Values of this many bytes at least fit the log's entries (a batch's tag and frame).
pub const MIN_ENTRY_BYTES: u32 = 256;

/// What the recorder saw: a command applied, or a snapshot restored (commands skipped).
enum Seen {
    Applied(Position, Vec<u8>),
    Restored(u64),
}

/// The service: counts the commands applied and passes them on to be reported.
struct Recorder {
    applied: u64,
    seen: Sender<Seen>,
}

impl StateMachine for Recorder {
    type Response = ();

    fn apply(&mut self, position: Position, command: &[u8]) {
        self.applied += 1;
        // The reader is gone only once the node stops.
        let _ = self.seen.send(Seen::Applied(position, command.to_vec()));
    }

    fn snapshot(&self) -> Vec<u8> {
        self.applied.to_le_bytes().to_vec()
    }

    fn restore(&mut self, bytes: &[u8]) -> Result<(), RestoreError> {
        let b: [u8; 8] = bytes
            .try_into()
            .map_err(|_| RestoreError(format!("{} bytes, not 8", bytes.len())))?;
        self.applied = u64::from_le_bytes(b);
        let _ = self.seen.send(Seen::Restored(self.applied));
        Ok(())
    }
}

/// The handle's configuration for `spec`: its log, with entries of at least
/// [`MIN_ENTRY_BYTES`] (batches frame their commands) and room for the recorder's
/// snapshot.
pub fn config(spec: &NodeSpec) -> Config {
    let mut config = Config::verbs(spec.cluster.clone(), spec.id);
    let mut log = spec.log.clone();
    log.max_value_bytes = log.max_value_bytes.max(MIN_ENTRY_BYTES);
    log.max_snapshot_bytes = log.max_snapshot_bytes.max(64);
    log.pipeline = log.pipeline.max(config.batch.max_in_flight);
    config.log = log;
    if let embed::Backend::Verbs(v) = &mut config.backend {
        v.rendezvous_timeout = spec.rendezvous_timeout;
        v.start = spec.start;
    }
    if let Some(every) = spec.snapshot_every {
        config.snapshot_every_slots = every;
    }
    match &spec.data_dir {
        Some(dir) => config.durable(dir),
        None => config,
    }
}

/// Runs the node through [`embed::Node`] until `spec.run_for` has passed; `on_event`
/// sees every command applied, in order, and each proposal's outcome.
pub fn run(spec: &NodeSpec, mut on_event: impl FnMut(Event)) -> Result<NodeReport, NodeError> {
    spec.check()?;
    let config = config(spec);
    config.validate().map_err(NodeError::Spec)?;
    if spec.values > 0 && spec.value_size > config.max_command_bytes() {
        return Err(NodeError::Spec(format!(
            "values of {} bytes: at most {} fit a batch",
            spec.value_size,
            config.max_command_bytes()
        )));
    }
    let window = config.batch.max_in_flight as usize;
    let (seen, applied) = unbounded();
    let recorder = Recorder { applied: 0, seen };
    let node = embed::Node::start(config, recorder).map_err(|e| match e {
        embed::StartError::InvalidConfig(m) => NodeError::Spec(m),
        embed::StartError::Recovery(m) => NodeError::Spec(m),
        embed::StartError::Backend(m) if m.contains("--features verbs") => NodeError::NoVerbs,
        other => NodeError::Rdma(other.to_string()),
    })?;
    let started = Instant::now();
    let mut report = Reporter::default();
    let mut client = ClientState::new(spec.values);
    if let Some(disk) = node.disk() {
        on_event(Event::Disk {
            disk: disk.next_slot,
            snapshot: disk.snapshot,
        });
    }
    if let Some(point) = node.resumed_at() {
        on_event(Event::Resumed { resumed: point });
    }
    let mut durable = Durable::default();
    let mut next_status = Duration::from_secs(1);
    // A process that joined the running cluster says when it votes.
    let mut voting = node.voting();
    while started.elapsed() < spec.run_for {
        let busy = report.drain(&applied, &mut on_event)
            | client.step(&node, spec, window, &mut on_event)
            | durable.step(&node, client.committed, &mut on_event);
        if let Some(answer) = voting.take_if(|a| a.is_ready()) {
            match answer.wait_timeout(Duration::ZERO) {
                Ok(incarnation) => on_event(Event::Voting {
                    voting: incarnation,
                }),
                Err(e) => return Err(NodeError::Rdma(format!("joining: {e}"))),
            }
        }
        if started.elapsed() >= next_status {
            next_status += Duration::from_secs(1);
            on_event(status(&node, started, client.outstanding.len()));
        }
        if !busy {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    let metrics = node.metrics();
    drop(node.shutdown());
    report.drain(&applied, &mut on_event);
    Ok(NodeReport {
        applied: report.applied,
        embedded: Some(metrics),
        ..NodeReport::default()
    })
}

/// The handle's view now.
fn status<S: StateMachine>(node: &embed::Node<S>, started: Instant, outstanding: usize) -> Event {
    let m = node.metrics();
    Event::Status {
        status: NodeStatus {
            at_s: started.elapsed().as_secs_f64(),
            leader: node.leader(),
            leading: node.role() == embed::Role::Leader,
            applied: node.applied_commands(),
            committed: m.committed,
            refused: m.refused,
            leader_changes: m.leader_changes(),
            outstanding,
        },
    }
}

/// Reports what the recorder saw.
#[derive(Default)]
struct Reporter {
    applied: u64,
}

impl Reporter {
    /// Reports everything waiting; whether there was anything.
    fn drain(&mut self, seen: &Receiver<Seen>, on_event: &mut impl FnMut(Event)) -> bool {
        let mut any = false;
        for s in seen.try_iter() {
            any = true;
            match s {
                Seen::Applied(position, command) => {
                    on_event(Event::Applied {
                        command: self.applied,
                        slot: position.slot,
                        index: position.index,
                        value: command.iter().map(|b| format!("{b:02x}")).collect(),
                    });
                    self.applied += 1;
                }
                Seen::Restored(applied) => {
                    on_event(Event::Restored { command: applied });
                    self.applied = applied;
                }
            }
        }
        any
    }
}

/// With a durable log: one durable wait at a time for the last slot the client's
/// commands committed in, reported once it returns.
#[derive(Default)]
struct Durable {
    /// Every slot below it was reported durable.
    below: u64,
    waiting: Option<(u64, embed::Answer<()>)>,
}

impl Durable {
    /// Collects the wait under way, or starts one for `committed`; whether anything
    /// happened.
    fn step<S: StateMachine>(
        &mut self,
        node: &embed::Node<S>,
        committed: Option<u64>,
        on_event: &mut impl FnMut(Event),
    ) -> bool {
        if node.disk().is_none() {
            return false;
        }
        if let Some((slot, answer)) = self.waiting.take_if(|(_, a)| a.is_ready()) {
            // A wait that timed out (a majority's disks slow, or stopped) is tried again.
            if answer.wait_timeout(Duration::ZERO).is_ok() {
                self.below = self.below.max(slot + 1);
                on_event(Event::Durable {
                    durable: self.below,
                });
            }
            return true;
        }
        match committed {
            Some(slot) if self.waiting.is_none() && slot >= self.below => {
                let answer = node.wait_durable_async(slot, Duration::from_secs(5));
                self.waiting = Some((slot, answer));
                true
            }
            _ => false,
        }
    }
}

/// The built-in client: proposals to make (retries first), receipts outstanding.
struct ClientState {
    next: u64,
    values: u64,
    retry: VecDeque<u64>,
    outstanding: VecDeque<(u64, Receipt)>,
    /// The last slot a command of its committed in.
    committed: Option<u64>,
}

impl ClientState {
    fn new(values: u64) -> ClientState {
        ClientState {
            next: 0,
            values,
            retry: VecDeque::new(),
            outstanding: VecDeque::new(),
            committed: None,
        }
    }

    /// Collects the outcomes known and proposes while this replica leads and the window
    /// has room; whether anything happened.
    fn step<S: StateMachine<Response = ()>>(
        &mut self,
        node: &embed::Node<S>,
        spec: &NodeSpec,
        window: usize,
        on_event: &mut impl FnMut(Event),
    ) -> bool {
        let mut any = false;
        while self.outstanding.front().is_some_and(|(_, r)| r.is_ready()) {
            any = true;
            let (n, receipt) = self.outstanding.pop_front().expect("one is there");
            match receipt.wait() {
                Ok(info) => {
                    let slot = info.position.slot;
                    self.committed = self.committed.max(Some(slot));
                    on_event(outcome(n, Ok(slot)));
                }
                // Not proposed (leadership moved, the log full): proposed again later.
                Err(e) if e.not_proposed() => self.retry.push_back(n),
                Err(e) => on_event(outcome(n, Err(e.to_string()))),
            }
        }
        while self.outstanding.len() < window && node.role() == embed::Role::Leader {
            let n = match self.retry.pop_front() {
                Some(n) => n,
                None if self.next < self.values => {
                    self.next += 1;
                    self.next - 1
                }
                None => break,
            };
            any = true;
            let value = generated_value(spec.id, n, spec.value_size);
            let receipt = node.propose_async(value);
            self.outstanding.push_back((n, receipt));
        }
        any
    }
}
