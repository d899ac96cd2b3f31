//! What a call does when an attempt fails: try again later (nothing was done, and the
//! cluster may serve it soon: leadership moving, the log's ring waiting for snapshots),
//! send it again at once (its outcome is unknown, and a second copy is harmless), or stop
//! with the error. [`retry`] runs the blocking calls by it; the futures follow the same
//! rule, waiting for leadership to move instead of a timer.

use super::error::Error;
use std::thread;
use std::time::{Duration, Instant};

/// What is being attempted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// A command outside a session: a second copy could apply twice.
    Command,
    /// A session's command: applied at most once however often it is sent.
    SessionCommand,
    /// A read: it has no side effect.
    Read,
    /// A membership change: a second copy after an unknown outcome could be refused as a
    /// change from a configuration that no longer holds.
    MembersChange,
}

/// What follows a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Then {
    /// Nothing was done and the cause passes (leadership moving, the replica down, the
    /// ring waiting for snapshots, another change under way): try again a little later.
    Later,
    /// The outcome is unknown and a second copy is harmless: send it again at once.
    Resend,
    /// Return the error.
    Stop,
}

/// What follows an attempt of `call` that failed with `error`.
pub(crate) fn then(call: Call, error: &Error) -> Then {
    match error {
        Error::NotLeader { .. }
        | Error::Unavailable { .. }
        | Error::NoLeader
        | Error::ChangePending => Then::Later,
        Error::LogFull { .. } => Then::Later,
        // A deposed or crashed leader's read, or a session's command: asked again.
        Error::OutcomeUnknown if matches!(call, Call::Read | Call::SessionCommand) => Then::Resend,
        _ => Then::Stop,
    }
}

/// Runs `attempt` (given the time left) as [`then`] says for `call`, until it succeeds,
/// stops, or `timeout` has passed — then the last refusal is returned (the log full and
/// why, no leader, …), which a bare [`Error::TimedOut`] would not say, or `TimedOut` if the
/// last attempt was a wait that ran out. Pauses between refusals grow from 50 µs to 5 ms.
/// A session command's resends are counted in `resends`.
pub(crate) fn retry<T>(
    timeout: Duration,
    call: Call,
    resends: &mut u64,
    mut attempt: impl FnMut(Duration) -> Result<T, Error>,
) -> Result<T, Error> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(50);
    let mut refused = None;
    loop {
        let left = timeout.saturating_sub(start.elapsed());
        if left.is_zero() {
            return Err(refused.unwrap_or(Error::TimedOut { after: timeout }));
        }
        let error = match attempt(left) {
            Err(Error::TimedOut { .. }) => return Err(Error::TimedOut { after: timeout }),
            Err(e) => e,
            done => return done,
        };
        match then(call, &error) {
            Then::Later => {
                refused = Some(error);
                thread::sleep(pause.min(left));
                pause = (pause * 2).min(Duration::from_millis(5));
            }
            Then::Resend => {
                if call == Call::SessionCommand {
                    *resends += 1;
                }
            }
            Then::Stop => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attempt that fails with `errors` in turn, then answers 7.
    fn scripted(errors: Vec<Error>) -> impl FnMut(Duration) -> Result<u8, Error> {
        let mut errors = errors.into_iter();
        move |_| errors.next().map_or(Ok(7), Err)
    }

    const LONG: Duration = Duration::from_secs(60);

    #[test]
    fn a_read_whose_leader_lost_its_role_is_asked_again() {
        let lost = vec![
            Error::OutcomeUnknown,
            Error::NoLeader,
            Error::OutcomeUnknown,
        ];
        let mut resends = 0;
        assert_eq!(retry(LONG, Call::Read, &mut resends, scripted(lost)), Ok(7));
        assert_eq!(resends, 0, "only a session's resends are counted");
    }

    #[test]
    fn an_unknown_outcome_is_sent_again_only_where_a_copy_is_harmless() {
        let mut resends = 0;
        let once = || vec![Error::OutcomeUnknown];
        assert_eq!(
            retry(LONG, Call::Command, &mut resends, scripted(once())),
            Err(Error::OutcomeUnknown),
            "a plain command could apply twice"
        );
        assert_eq!(
            retry(LONG, Call::MembersChange, &mut resends, scripted(once())),
            Err(Error::OutcomeUnknown)
        );
        assert_eq!(
            retry(LONG, Call::SessionCommand, &mut resends, scripted(once())),
            Ok(7)
        );
        assert_eq!(resends, 1);
    }

    #[test]
    fn refusals_are_tried_again_and_the_last_one_is_told_when_time_is_up() {
        let mut resends = 0;
        let moving = vec![
            Error::NoLeader,
            Error::NotLeader {
                replica: 1,
                leader: 0,
            },
        ];
        assert_eq!(
            retry(LONG, Call::Command, &mut resends, scripted(moving)),
            Ok(7)
        );
        let short = Duration::from_millis(5);
        let always = |_| Err::<u8, _>(Error::NoLeader);
        assert_eq!(
            retry(short, Call::Read, &mut resends, always),
            Err(Error::NoLeader)
        );
        let stop = vec![Error::ShuttingDown];
        assert_eq!(
            retry(LONG, Call::Read, &mut resends, scripted(stop)),
            Err(Error::ShuttingDown)
        );
    }
}
