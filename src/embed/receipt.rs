//! A proposal's outcome, delivered once: [`Receipt`] blocks with a bound
//! ([`Receipt::wait`], [`Receipt::wait_timeout`]) or is awaited as a [`Future`] from any
//! executor (no runtime: a mutex, a condition variable and the last waker).

use super::error::Error;
use super::state_machine::Position;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// What a committed command's receipt says: where it is in the log, and `response`, what
/// [`StateMachine::apply`](super::StateMachine::apply) returned for it at the leader
/// (`()` for a membership change).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitInfo<R = ()> {
    /// Where the command is in the log.
    pub position: Position,
    /// Commands in its batch.
    pub batch_commands: u32,
    /// The replica that proposed and committed it (the leader then); the command was
    /// applied to that replica's state machine before the receipt resolved.
    pub leader: u16,
    /// From when the leader took the command until it was committed and applied there
    /// (the backend's clock: virtual time on the emulator).
    pub latency: Duration,
    /// The state machine's answer to the command, computed when the leader applied it.
    pub response: R,
}

/// What a receipt resolves to.
pub type Outcome<R = ()> = Result<CommitInfo<R>, Error>;

#[derive(Debug)]
struct State<T> {
    outcome: Option<T>,
    waker: Option<Waker>,
}

/// A value delivered once, awaited by one future or blocked on with a bound: what a
/// [`Receipt`] and an [`Answer`] share.
#[derive(Debug)]
struct Cell<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

impl<T> Cell<T> {
    fn new() -> Cell<T> {
        Cell {
            state: Mutex::new(State {
                outcome: None,
                waker: None,
            }),
            ready: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // Nobody panics holding it; a poisoned lock still holds a consistent state.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn deliver(&self, outcome: T) {
        let waker = {
            let mut state = self.lock();
            assert!(
                state.outcome.is_none(),
                "a one-shot value is delivered once"
            );
            state.outcome = Some(outcome);
            state.waker.take()
        };
        self.ready.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The value, once delivered within `timeout`.
    fn wait_timeout(&self, timeout: Duration) -> Option<T> {
        let start = Instant::now();
        let mut state = self.lock();
        loop {
            if let Some(outcome) = state.outcome.take() {
                return Some(outcome);
            }
            let left = timeout
                .checked_sub(start.elapsed())
                .filter(|d| !d.is_zero())?;
            state = self
                .ready
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The value, if delivered and not taken, left in place.
    fn peek(&self) -> Option<T>
    where
        T: Clone,
    {
        self.lock().outcome.clone()
    }

    fn poll_take(&self, cx: &mut Context<'_>) -> Poll<T> {
        let mut state = self.lock();
        match state.outcome.take() {
            Some(outcome) => Poll::Ready(outcome),
            None => {
                // Only the last poll's waker is kept, as the Future contract asks.
                if !state
                    .waker
                    .as_ref()
                    .is_some_and(|w| w.will_wake(cx.waker()))
                {
                    state.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }
}

impl<T> Cell<Result<T, Error>> {
    /// The result, once delivered within `timeout`; else [`Error::TimedOut`].
    fn result_within(&self, timeout: Duration) -> Result<T, Error> {
        self.wait_timeout(timeout)
            .unwrap_or(Err(Error::TimedOut { after: timeout }))
    }
}

/// The outcome of one proposed command, once known.
///
/// `wait` blocks for at most the cluster's
/// [`wait_timeout`](super::Config::wait_timeout); `.await` has no bound of its own (wrap
/// it in your runtime's timeout). Dropping a receipt does not withdraw the command.
#[derive(Debug)]
#[must_use = "a receipt says whether the command committed"]
pub struct Receipt<R = ()> {
    cell: Arc<Cell<Outcome<R>>>,
    timeout: Duration,
}

/// The replica side of a [`Receipt`]: completes it once. Dropped without completing, it
/// completes the receipt with [`Error::OutcomeUnknown`] if the command was proposed, else
/// with [`Error::Unavailable`] — a receipt never waits for an outcome nobody will send.
#[derive(Debug)]
pub(crate) struct Completer<R = ()> {
    cell: Option<Arc<Cell<Outcome<R>>>>,
    replica: u16,
    /// The command was given to the engine: a lost completer means an unknown outcome.
    pub(crate) proposed: bool,
}

/// A receipt and its completer, for a command sent to `replica`.
pub(crate) fn pair<R>(replica: u16, timeout: Duration) -> (Receipt<R>, Completer<R>) {
    let cell = Arc::new(Cell::new());
    (
        Receipt {
            cell: Arc::clone(&cell),
            timeout,
        },
        Completer {
            cell: Some(cell),
            replica,
            proposed: false,
        },
    )
}

impl<R> Completer<R> {
    /// Delivers `outcome` to the receipt.
    pub(crate) fn complete(mut self, outcome: Outcome<R>) {
        let cell = self.cell.take().expect("completed once");
        cell.deliver(outcome);
    }
}

impl<R> Drop for Completer<R> {
    fn drop(&mut self) {
        if let Some(cell) = self.cell.take() {
            let lost = if self.proposed {
                Error::OutcomeUnknown
            } else {
                Error::Unavailable {
                    replica: self.replica,
                }
            };
            cell.deliver(Err(lost));
        }
    }
}

impl<R> Receipt<R> {
    /// A receipt that is already resolved (a command refused before it reached a replica).
    pub(crate) fn ready(outcome: Outcome<R>) -> Receipt<R> {
        let (receipt, completer) = pair(0, Duration::ZERO);
        completer.complete(outcome);
        receipt
    }

    /// Blocks until the outcome is known, at most the cluster's wait timeout; then
    /// [`Error::TimedOut`] (the command may still commit).
    pub fn wait(self) -> Outcome<R> {
        let timeout = self.timeout;
        self.wait_timeout(timeout)
    }

    /// Blocks until the outcome is known, at most `timeout`.
    pub fn wait_timeout(self, timeout: Duration) -> Outcome<R> {
        self.cell.result_within(timeout)
    }

    /// Whether the outcome is known (then `wait` returns at once).
    pub fn is_ready(&self) -> bool {
        self.cell.lock().outcome.is_some()
    }

    /// The outcome if it is known, without waiting and without taking it: `None` while
    /// the command is undecided; then a copy, as often as asked, and `wait` or `.await`
    /// still return it. (`None` again once `.await` on a `&mut Receipt` took it.) A
    /// response that is not `Clone`: [`Receipt::is_ready`], then `wait_timeout` with
    /// [`Duration::ZERO`] takes it.
    pub fn try_get(&self) -> Option<Outcome<R>>
    where
        R: Clone,
    {
        self.cell.peek()
    }
}

impl<R> Future for Receipt<R> {
    type Output = Outcome<R>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Outcome<R>> {
        self.cell.poll_take(cx)
    }
}

/// The answer to a read ([`Cluster::read_async`](super::Cluster::read_async)), once
/// known: a [`Future`], or blocked on with a bound like a [`Receipt`].
#[derive(Debug)]
#[must_use = "an answer is the read's result"]
pub struct Answer<T> {
    cell: Arc<Cell<Result<T, Error>>>,
}

/// The replica side of an [`Answer`]: dropped unsent (the replica's runner is gone), it
/// answers [`Error::Unavailable`].
pub(crate) struct AnswerTx<T> {
    cell: Option<Arc<Cell<Result<T, Error>>>>,
    replica: u16,
}

/// An answer and its sender, for a read sent to `replica`.
pub(crate) fn answer<T>(replica: u16) -> (AnswerTx<T>, Answer<T>) {
    let cell = Arc::new(Cell::new());
    (
        AnswerTx {
            cell: Some(Arc::clone(&cell)),
            replica,
        },
        Answer { cell },
    )
}

impl<T> AnswerTx<T> {
    /// Delivers the answer.
    pub(crate) fn send(mut self, answer: Result<T, Error>) {
        self.cell.take().expect("sent once").deliver(answer);
    }
}

impl<T> Drop for AnswerTx<T> {
    fn drop(&mut self) {
        if let Some(cell) = self.cell.take() {
            cell.deliver(Err(Error::Unavailable {
                replica: self.replica,
            }));
        }
    }
}

impl<T> Answer<T> {
    /// Blocks until the answer is known, at most `timeout`; then [`Error::TimedOut`].
    pub fn wait_timeout(self, timeout: Duration) -> Result<T, Error> {
        self.cell.result_within(timeout)
    }

    /// Whether the answer is known (then `wait_timeout` returns at once).
    pub fn is_ready(&self) -> bool {
        self.cell.lock().outcome.is_some()
    }

    /// The answer if it is known, without waiting and without taking it: `None` until
    /// then; then a copy, as often as asked, and `wait_timeout` or `.await` still return
    /// it. (`None` again once `.await` on a `&mut Answer` took it.) An answer that is not
    /// `Clone`: [`Answer::is_ready`], then `wait_timeout` with [`Duration::ZERO`] takes
    /// it.
    pub fn try_get(&self) -> Option<Result<T, Error>>
    where
        T: Clone,
    {
        self.cell.peek()
    }
}

impl<T> Future for Answer<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<T, Error>> {
        self.cell.poll_take(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_completer_resolves_the_receipt_instead_of_hanging() {
        let (r, c) = pair::<()>(2, Duration::from_secs(5));
        drop(c);
        assert_eq!(r.wait(), Err(Error::Unavailable { replica: 2 }));
        let (r, mut c) = pair::<()>(2, Duration::from_secs(5));
        c.proposed = true;
        drop(c);
        assert_eq!(r.wait(), Err(Error::OutcomeUnknown));
    }

    #[test]
    fn an_answer_whose_job_was_dropped_says_the_replica_is_gone() {
        let (tx, a) = answer::<u8>(1);
        drop(tx);
        assert_eq!(
            a.wait_timeout(Duration::from_secs(5)),
            Err(Error::Unavailable { replica: 1 })
        );
        let (tx, a) = answer(1);
        tx.send(Ok(7u8));
        assert_eq!(a.wait_timeout(Duration::from_secs(5)), Ok(7));
        let (_tx, a) = answer::<u8>(1);
        let bound = Duration::from_millis(1);
        assert_eq!(a.wait_timeout(bound), Err(Error::TimedOut { after: bound }));
    }

    #[test]
    fn try_get_tells_a_known_outcome_without_taking_it() {
        let (r, c) = pair::<u8>(0, Duration::from_secs(5));
        assert_eq!(r.try_get(), None, "undecided");
        let info = CommitInfo {
            position: Position { slot: 3, index: 0 },
            batch_commands: 1,
            leader: 0,
            latency: Duration::ZERO,
            response: 7,
        };
        c.complete(Ok(info));
        assert_eq!(r.try_get(), Some(Ok(info)));
        assert_eq!(r.try_get(), Some(Ok(info)), "as often as asked");
        assert_eq!(r.wait(), Ok(info), "still there to wait for");
        let (tx, a) = answer::<String>(1);
        assert_eq!(a.try_get(), None);
        tx.send(Err(Error::NoLeader));
        assert_eq!(a.try_get(), Some(Err(Error::NoLeader)));
        assert_eq!(a.wait_timeout(Duration::ZERO), Err(Error::NoLeader));
        // A non-Clone answer is taken by a wait of zero once it is ready.
        let (tx, a) = answer::<std::sync::Mutex<u8>>(1);
        tx.send(Ok(std::sync::Mutex::new(4)));
        assert!(a.is_ready());
        let taken = a.wait_timeout(Duration::ZERO).expect("ready");
        assert_eq!(*taken.lock().unwrap(), 4);
    }

    #[test]
    fn a_wait_is_bounded() {
        let (r, _c) = pair::<()>(0, Duration::from_millis(1));
        assert_eq!(
            r.wait(),
            Err(Error::TimedOut {
                after: Duration::from_millis(1)
            })
        );
    }

    #[test]
    fn the_completer_may_run_on_another_thread() {
        let (r, c) = pair::<()>(0, Duration::from_secs(60));
        let t = std::thread::spawn(move || {
            c.complete(Err(Error::LogFull {
                snapshot_refused: None,
            }))
        });
        assert_eq!(
            r.wait(),
            Err(Error::LogFull {
                snapshot_refused: None
            })
        );
        t.join().unwrap();
    }
}
