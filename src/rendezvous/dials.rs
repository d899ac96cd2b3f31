//! Dials that go on in the background: one thread per node dialed, each dialing its node
//! with the exchange and the proofs of the start (`greet`) until the node answers or
//! refuses ([`Dials`]); and how many answers a joiner waits for before it goes on
//! ([`Dials::wait_for`], [`majority_of_others`]), the nodes that did not answer yet left
//! dialing.

use super::{Dialed, Local, RendezvousError, greet, io};
use crate::cluster_file::ClusterFile;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// How long one attempt may take, from the connection to the acknowledgement (a running
/// node's loop answers a joiner within a turn; its serving thread gives up after 30 s).
const ATTEMPT_WITHIN: Duration = Duration::from_secs(10);

/// The first pause after a node did not answer; each next one doubles, up to
/// [`PAUSE_MAX`].
const PAUSE_FIRST: Duration = Duration::from_millis(20);

/// The longest pause between two attempts on a node that does not answer: how late a
/// node that comes back is met, at most, after it listens.
pub const PAUSE_MAX: Duration = Duration::from_millis(500);

/// How long a joiner that has its majority still waits for the other nodes before it
/// goes on without them (they are dialed on in the background).
pub const STRAGGLERS_WITHIN: Duration = Duration::from_millis(500);

/// How many *other* nodes a process of a cluster file of `nodes` must reach so that it
/// and they make a strict majority of the file.
pub fn majority_of_others(nodes: usize) -> usize {
    let needed = nodes / 2;
    assert!(
        nodes == 0 || 2 * (needed + 1) > nodes,
        "rule (majority): those reached and this process are more than half the file"
    );
    needed
}

/// What one node's dial ended with: its information, or why not.
pub type DialResult = Result<Vec<u8>, RendezvousError>;

/// Nodes of a cluster file dialed as node `me`, each on a thread of its own that dials
/// until the node answers (a node not listening, or whose exchange broke, is dialed again
/// after a pause), refuses, or the dials are dropped. Dropping them stops every thread
/// at its next pause or attempt (an attempt under way ends within its own bound).
#[derive(Debug)]
pub struct Dials {
    file: ClusterFile,
    me: u16,
    sender: Sender<(u16, DialResult)>,
    answers: Receiver<(u16, DialResult)>,
    /// Never sent on: its threads see it closed once the dials are dropped.
    _stop: Sender<()>,
    stopped: Receiver<()>,
    waiting: BTreeSet<u16>,
}

impl Dials {
    /// No dial yet, as node `me` of `file`: refused if `me` is not in the file or the
    /// secret cannot be had.
    pub fn new(file: &ClusterFile, me: u16) -> Result<Dials, RendezvousError> {
        let nothing = |_: u16| Vec::new();
        Local::new(file, me, &nothing)?;
        let (sender, answers) = crossbeam_channel::unbounded();
        let (stop, stopped) = crossbeam_channel::bounded(0);
        Ok(Dials {
            file: file.clone(),
            me,
            sender,
            answers,
            _stop: stop,
            stopped,
            waiting: BTreeSet::new(),
        })
    }

    /// Starts dialing `peer`, sending it `info`.
    ///
    /// # Errors
    /// [`RendezvousError::NotAMember`] for a node not in the file or this node itself; an
    /// I/O error if the thread cannot be started.
    pub fn dial(&mut self, peer: u16, info: Vec<u8>) -> Result<(), RendezvousError> {
        if peer == self.me || self.file.node(peer).is_none() {
            return Err(RendezvousError::NotAMember(peer));
        }
        let (file, me) = (self.file.clone(), self.me);
        let (answers, stopped) = (self.sender.clone(), self.stopped.clone());
        std::thread::Builder::new()
            .name(format!("velos-dial-{me}-{peer}"))
            .spawn(move || {
                let result = keep_dialing(&file, me, peer, info, &stopped);
                if let Some(result) = result {
                    // The dials were dropped meanwhile: nobody listens.
                    let _ = answers.send((peer, result));
                }
            })
            .map_err(io(format!("starting the dial of node {peer}")))?;
        self.waiting.insert(peer);
        Ok(())
    }

    /// The nodes dialed that have not ended yet.
    pub fn waiting(&self) -> Vec<u16> {
        self.waiting.iter().copied().collect()
    }

    /// Whether a dial ended that was not taken yet (cheap: for a loop's every turn).
    pub fn ended(&self) -> bool {
        !self.answers.is_empty()
    }

    /// The next dial that ended, waiting at most `wait` for one.
    pub fn next_within(&mut self, wait: Duration) -> Option<(u16, DialResult)> {
        if self.waiting.is_empty() {
            return None;
        }
        let (peer, result) = self.answers.recv_timeout(wait).ok()?;
        let removed = self.waiting.remove(&peer);
        assert!(
            removed,
            "rule (one answer per dial): node {peer} was waited for"
        );
        Some((peer, result))
    }

    /// The next dial that ended, if one has.
    pub fn try_next(&mut self) -> Option<(u16, DialResult)> {
        self.next_within(Duration::ZERO)
    }

    /// Waits for the nodes dialed: until every one answered, or `needed` answered and
    /// [`STRAGGLERS_WITHIN`] more passed, or `timeout` passed; the answers by node. The
    /// nodes still waited for go on being dialed ([`Dials::waiting`]).
    ///
    /// # Errors
    /// The first refusal (or impostor, or I/O error) met; [`RendezvousError::NoMajority`]
    /// if fewer than `needed` answered within `timeout` (`nodes`: the file's, for the
    /// message).
    pub fn wait_for(
        &mut self,
        needed: usize,
        timeout: Duration,
    ) -> Result<BTreeMap<u16, Vec<u8>>, RendezvousError> {
        let deadline = Instant::now() + timeout;
        let mut answers = BTreeMap::new();
        let mut enough_at = (needed == 0).then(Instant::now);
        while !self.waiting.is_empty() {
            let until = enough_at.map_or(deadline, |t| (t + STRAGGLERS_WITHIN).min(deadline));
            let Some(wait) = until.checked_duration_since(Instant::now()) else {
                break;
            };
            match self.next_within(wait) {
                None => break,
                Some((peer, Ok(info))) => {
                    answers.insert(peer, info);
                    if answers.len() >= needed && enough_at.is_none() {
                        enough_at = Some(Instant::now());
                    }
                }
                Some((_, Err(e))) => return Err(e),
            }
        }
        if answers.len() < needed {
            return Err(RendezvousError::NoMajority {
                me: self.me,
                answered: answers.keys().copied().collect(),
                needed,
                nodes: self.file.len(),
                missing: self.waiting(),
                timeout,
            });
        }
        assert!(
            answers.len() >= needed,
            "rule (majority): the caller goes on with enough answers only"
        );
        Ok(answers)
    }
}

/// Dials `peer` as node `me` of `file`, sending `info`, until it answers or refuses
/// (`Some`), or `stopped` closes (`None`).
fn keep_dialing(
    file: &ClusterFile,
    me: u16,
    peer: u16,
    info: Vec<u8>,
    stopped: &Receiver<()>,
) -> Option<DialResult> {
    let info_for = move |_: u16| info.clone();
    let local = match Local::new(file, me, &info_for) {
        Ok(local) => local,
        Err(e) => return Some(Err(e)),
    };
    let address = match file.socket_address(peer) {
        Ok(address) => address,
        Err(e) => return Some(Err(io(format!("resolving node {peer}'s address"))(e))),
    };
    let mut pause = PAUSE_FIRST;
    loop {
        if matches!(stopped.try_recv(), Err(TryRecvError::Disconnected)) {
            return None;
        }
        match greet(&address, &local, peer, Instant::now() + ATTEMPT_WITHIN) {
            Ok(Dialed::Accepted(info)) => return Some(Ok(info)),
            Ok(Dialed::Refused(reason)) => {
                return Some(Err(RendezvousError::Refused { me, peer, reason }));
            }
            Ok(Dialed::Impostor(reason)) => {
                return Some(Err(RendezvousError::Impostor { peer, reason }));
            }
            // Not listening, or the exchange broke before this node acknowledged (the
            // node did not count it): dialed again.
            Err(_) => match stopped.recv_timeout(pause) {
                Err(RecvTimeoutError::Timeout) => pause = (pause * 2).min(PAUSE_MAX),
                _ => return None,
            },
        }
    }
}
