//! The bank's clients: each owns the accounts whose number is its id modulo
//! [`CLIENTS`], moves money among them through an exactly-once session, and checks every
//! answer against its own sequential model of those accounts (nobody else touches them,
//! so the model's answer is the only right one). Blocking sessions run on threads, an
//! [`OwnedSession`] as a task of a tokio runtime; both share [`Client`], which picks the
//! next transfer and judges each outcome, and record every commit's wall-clock time.

use super::machine::{Bank, CLIENTS, OPENING_BALANCE, Reply, Transfer};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use velos::embed::{Error, Outcome, OwnedSession, Session};
use velos_sim::rng::Rng;

/// Accounts a client moves money among most of the time (so that balances run low and
/// some transfers are refused); the rest of its accounts now and then.
const HOT_ACCOUNTS: u64 = 16;

/// How long one command may stay without an outcome, resends included, before its
/// client gives up (and the run fails).
const COMMAND_LIMIT: Duration = Duration::from_secs(60);

/// What every client and the scenario share: when the run began, whether to stop, and
/// the time of the last commit any client saw with the replica that committed it.
#[derive(Debug)]
pub struct Shared {
    /// The run's clock starts here.
    pub epoch: Instant,
    /// Set to end the clients' loops (each finishes its current command).
    pub stop: AtomicBool,
    /// The latest commit a client saw: ns since `epoch`.
    pub last_commit_ns: AtomicU64,
    /// …and the replica that committed it.
    pub last_leader: AtomicU64,
}

impl Shared {
    /// A run starting now.
    pub fn new() -> Shared {
        Shared {
            epoch: Instant::now(),
            stop: AtomicBool::new(false),
            last_commit_ns: AtomicU64::new(0),
            last_leader: AtomicU64::new(u64::MAX),
        }
    }

    /// ns since the run began.
    pub fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

impl Default for Shared {
    fn default() -> Shared {
        Shared::new()
    }
}

/// One commit as its client saw it.
#[derive(Clone, Copy, Debug)]
pub struct Commit {
    /// When the client learned of it (ns since the run began).
    pub at_ns: u64,
    /// The replica that committed it; `None` when its response was lost.
    pub leader: Option<u16>,
}

/// What a client did: its commits, and everything wrong it saw.
#[derive(Debug, Default)]
pub struct ClientLog {
    /// Every commit, in the client's order.
    pub commits: Vec<Commit>,
    /// Answers that differ from the model's (each described).
    pub wrong: Vec<String>,
    /// Commits whose response was lost (applied, the answer unknown: not checked).
    pub responses_lost: u64,
    /// Sends of a command again after an unknown outcome.
    pub resends: u64,
    /// Why the client stopped early, if it did.
    pub failed: Option<String>,
    /// The balances of the accounts it touched, as its model has them.
    pub balances: HashMap<u32, u64>,
}

/// What to do after an outcome.
enum Next {
    /// The command is settled: go on with the next.
    Done,
    /// Its outcome is unknown, or it was not proposed: send it again (same sequence).
    Resend,
    /// Stop: something the scenario does not expect.
    Fail(String),
}

/// One client: its model of its accounts, its random choices, its log.
pub struct Client {
    id: u8,
    rng: Rng,
    accounts: u32,
    next: Option<Transfer>,
    seq: u64,
    since: Instant,
    /// What it did.
    pub log: ClientLog,
}

impl Client {
    /// Client `id` of a bank of `accounts` accounts, its choices drawn from `seed`.
    pub fn new(id: u8, accounts: u32, seed: u64) -> Client {
        assert!(usize::from(id) < CLIENTS && accounts as usize >= 2 * CLIENTS);
        Client {
            id,
            rng: Rng::new(seed ^ (u64::from(id) << 32)),
            accounts,
            next: None,
            seq: 0,
            since: Instant::now(),
            log: ClientLog::default(),
        }
    }

    /// One of this client's accounts: usually a hot one.
    fn account(&mut self) -> u32 {
        let own = u64::from(self.accounts) / CLIENTS as u64;
        let k = match self.rng.below(4) {
            0 => self.rng.below(own),
            _ => self.rng.below(HOT_ACCOUNTS.min(own)),
        };
        u32::try_from(k * CLIENTS as u64 + u64::from(self.id)).expect("an account")
    }

    /// The next transfer's command bytes.
    pub fn next_command(&mut self) -> Vec<u8> {
        assert!(self.next.is_none(), "one command at a time");
        let from = self.account();
        let mut to = self.account();
        while to == from {
            to = self.account();
        }
        self.seq += 1;
        let t = Transfer {
            client: self.id,
            seq: self.seq,
            from,
            to,
            amount: 1 + self.rng.below(600),
        };
        self.next = Some(t);
        self.since = Instant::now();
        t.encode()
    }

    /// The model's answer to `t`, applied to the model.
    fn model(&mut self, t: &Transfer) -> Reply {
        let b = &mut self.log.balances;
        let from = *b.entry(t.from).or_insert(OPENING_BALANCE);
        let to = *b.entry(t.to).or_insert(OPENING_BALANCE);
        if from < t.amount {
            return Reply::Refused {
                from,
                applied: self.seq,
            };
        }
        b.insert(t.from, from - t.amount);
        b.insert(t.to, to + t.amount);
        Reply::Moved {
            from: from - t.amount,
            to: to + t.amount,
            applied: self.seq,
        }
    }

    /// Judges the outcome of the current command, seen at `at_ns`.
    fn settle(&mut self, outcome: Outcome<Reply>, at_ns: u64) -> Next {
        let t = self.next.expect("a command outstanding");
        let leader = match outcome {
            Ok(info) => {
                let want = self.model(&t);
                if info.response != want {
                    let got = info.response;
                    let e = format!("client {} seq {}: {got:?}, not {want:?}", self.id, t.seq);
                    self.log.wrong.push(e);
                }
                Some(info.leader)
            }
            Err(Error::ResponseLost { .. }) => {
                self.model(&t);
                self.log.responses_lost += 1;
                None
            }
            Err(e) if self.since.elapsed() > COMMAND_LIMIT => {
                return Next::Fail(format!("client {} seq {}: {e}", self.id, t.seq));
            }
            Err(e) if e.not_proposed() || matches!(e, Error::TimedOut { .. }) => {
                return Next::Resend;
            }
            Err(Error::OutcomeUnknown) => return Next::Resend,
            Err(e) => return Next::Fail(format!("client {} seq {}: {e}", self.id, t.seq)),
        };
        self.log.commits.push(Commit { at_ns, leader });
        self.next = None;
        assert_eq!(
            self.log.commits.len() as u64,
            self.seq,
            "one commit per command"
        );
        Next::Done
    }

    /// Judges the current command's outcome as a run does (for unit tests).
    #[cfg(test)]
    pub fn settle_for_test(&mut self, outcome: Outcome<Reply>) {
        assert!(matches!(self.settle(outcome, 0), Next::Done), "settled");
    }

    /// Checks the bank's final state against this client's model: its accounts' balances
    /// and its count of commands applied (one line per difference).
    pub fn check_final(&self, bank: &Bank) -> Vec<String> {
        let mut out = Vec::new();
        let applied = self.log.commits.len() as u64;
        if bank.applied(usize::from(self.id)) != applied {
            let got = bank.applied(usize::from(self.id));
            out.push(format!(
                "client {}: {got} applied, {applied} committed",
                self.id
            ));
        }
        for (&a, &want) in &self.log.balances {
            if bank.balance(a) != want {
                out.push(format!("account {a}: {} not {want}", bank.balance(a)));
            }
        }
        out
    }
}

/// Tells the scenario of the client's latest commit.
fn note(shared: &Shared, log: &ClientLog) {
    if let Some(c) = log.commits.last() {
        shared.last_commit_ns.fetch_max(c.at_ns, Ordering::SeqCst);
        let leader = c.leader.map_or(u64::MAX, u64::from);
        shared.last_leader.store(leader, Ordering::SeqCst);
    }
}

/// A blocking client's loop: submits through `session` until `shared.stop` (or a failure).
pub fn run_blocking(mut client: Client, mut session: Session<'_, Bank>, shared: &Shared) -> Client {
    while !shared.stop.load(Ordering::SeqCst) && client.log.failed.is_none() {
        let mut outcome = session.submit(client.next_command());
        loop {
            match client.settle(outcome, shared.now_ns()) {
                Next::Done => break note(shared, &client.log),
                Next::Resend => outcome = session.resubmit(),
                Next::Fail(why) => break client.log.failed = Some(why),
            }
        }
    }
    client.log.resends = session.resends();
    client
}

/// An async client's loop, for a tokio task: `submit_async` under the runtime's timeout,
/// `resubmit_async` after an unknown outcome, until `shared.stop` (or a failure).
pub async fn run_async(
    mut client: Client,
    mut session: OwnedSession<Bank>,
    shared: &Shared,
    timeout: Duration,
) -> Client {
    let timed_out = || Err(Error::TimedOut { after: timeout });
    while !shared.stop.load(Ordering::SeqCst) && client.log.failed.is_none() {
        let command = client.next_command();
        let sent = tokio::time::timeout(timeout, session.submit_async(command)).await;
        let mut outcome = sent.unwrap_or_else(|_| timed_out());
        loop {
            match client.settle(outcome, shared.now_ns()) {
                Next::Done => break note(shared, &client.log),
                Next::Resend => {
                    // A refusal while leadership moves: give it a moment.
                    tokio::time::sleep(Duration::from_micros(200)).await;
                    let again = tokio::time::timeout(timeout, session.resubmit_async()).await;
                    outcome = again.unwrap_or_else(|_| timed_out());
                }
                Next::Fail(why) => break client.log.failed = Some(why),
            }
        }
    }
    client.log.resends = session.resends();
    client
}
