//! How a thread of a real backend lets an [`Op::Pause`] pass: a back-off over an *idle
//! streak*. A thread that has just become idle spins (it is about to be needed again),
//! one idle for longer yields the CPU between looks at the clock, and one idle for
//! longer still sleeps, so that idle threads leave the cores to the ones that work even
//! when there are fewer cores than threads.
//!
//! The streak is read from the operations themselves ([`Backoff::saw`]): a process that
//! has nothing to do pauses once per turn, and a turn — from one clock reading
//! ([`Op::Now`]) to the next — that did not pause shows it worked, which ends the streak.
//! A runner that knows more (a command arrived) ends it with [`Backoff::worked`].
//!
//! # The bound on sleeping
//! Failure detection (Ω in `velos-core`) runs on the paused threads themselves: a
//! replica bumps its heartbeat word and reads its peers' at the first turn after each
//! heartbeat period. A pause that lasts `d` longer than asked delays both by `d`: the
//! gap its peers see grows by `d`, and its own detection of a silent peer comes `d`
//! later. So a sleep is bounded by [`Policy::sleep_max_ns`], which the runner derives
//! from the timing it runs (`velos::embed` takes the smaller of the heartbeat period and
//! a tenth of the failure timeout), and by default is 0: a sleep is then never asked for
//! longer than the pause itself. The operating system wakes a sleeper late by its timer
//! slack (50 µs by default on Linux) and its scheduling; pauses shorter than
//! [`SLEEP_MIN_NS`] are therefore never slept (a process that asks for them runs on a
//! microsecond clock that no sleep honours): they spin or yield as before.

use crate::op::Op;
use std::time::Duration;

/// Pauses shorter than this are never slept, whatever the streak: a sleep this short
/// would oversleep by several times its length.
pub const SLEEP_MIN_NS: u64 = 10_000;

/// Where an idle streak spins, yields and sleeps (ns since the streak began).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Policy {
    /// Spin (a busy wait with the spin-loop hint) while the streak is younger than this.
    pub spin_ns: u64,
    /// Then yield the CPU between looks at the clock while younger than this; sleep
    /// after.
    pub yield_ns: u64,
    /// Sleeps grow, doubling from the pause asked, up to this (0: never longer than the
    /// pause asked). See the module documentation for the bound.
    pub sleep_max_ns: u64,
}

impl Policy {
    /// The backends' own policy, for any process: spin for the first 2 µs of a streak,
    /// yield until 50 µs, then sleep for exactly the pause asked. Yielding is kept short:
    /// on cores shared with more runnable threads, a thread that yields stays runnable
    /// and waits behind their time slices, while a sleeper is woken ahead of them.
    pub const ENDPOINT: Policy = Policy {
        spin_ns: 2_000,
        yield_ns: 50_000,
        sleep_max_ns: 0,
    };
}

/// How the next pause is spent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Busy-wait until the pause has passed.
    Spin,
    /// Yield the CPU until the pause has passed.
    Yield,
    /// Sleep this long (ns).
    Sleep(u64),
}

/// One thread's idle streak and its back-off.
#[derive(Clone, Debug)]
pub struct Backoff {
    policy: Policy,
    /// When the current streak began (the clock's ns); `None`: the thread works.
    since: Option<u64>,
    /// A pause since the last clock reading.
    paused: bool,
    /// Sleeps in a row in this streak (each doubles the next).
    sleeps: u32,
}

impl Backoff {
    /// A thread that works, with `policy`.
    pub fn new(policy: Policy) -> Backoff {
        Backoff {
            policy,
            since: None,
            paused: false,
            sleeps: 0,
        }
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Changes the policy (the streak goes on).
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
    }

    /// Whether the thread is in an idle streak.
    pub fn idle(&self) -> bool {
        self.since.is_some()
    }

    /// An operation the thread is about to execute: a clock reading with no pause since
    /// the previous one ends the streak (the turn between them worked).
    pub fn saw(&mut self, op: &Op) {
        if matches!(op, Op::Now) {
            if !self.paused {
                self.worked();
            }
            self.paused = false;
        }
    }

    /// The thread has work: the streak ends.
    pub fn worked(&mut self) {
        self.since = None;
        self.sleeps = 0;
        assert!(!self.idle(), "rule (streak): work ends the idle streak");
    }

    /// How a pause of `ns` asked at `now` is spent; a streak starts with its first pause.
    pub fn phase(&mut self, ns: u64, now: u64) -> Phase {
        self.paused = true;
        let since = *self.since.get_or_insert(now);
        let idle = now.saturating_sub(since);
        let phase = if idle < self.policy.spin_ns {
            Phase::Spin
        } else if idle < self.policy.yield_ns || ns < SLEEP_MIN_NS {
            Phase::Yield
        } else {
            let most = ns.max(self.policy.sleep_max_ns);
            let grown = ns.saturating_mul(1u64 << self.sleeps.min(20));
            self.sleeps = self.sleeps.saturating_add(1);
            Phase::Sleep(grown.min(most))
        };
        assert!(
            !matches!(phase, Phase::Sleep(d) if d > ns.max(self.policy.sleep_max_ns) || ns < SLEEP_MIN_NS),
            "rule (sleep bound): never asleep longer than the pause or the bound"
        );
        phase
    }

    /// Lets a pause of `ns` pass on the clock `now`: spun, yielded or slept as
    /// [`Backoff::phase`] says; a long pause that outlasts the yielding part of the
    /// streak sleeps its remainder. It ends early once `wake` says so (checked between
    /// looks at the clock); `sleep` sleeps at most the given time (and may end early).
    pub fn pause(
        &mut self,
        ns: u64,
        mut now: impl FnMut() -> u64,
        mut wake: impl FnMut() -> bool,
        sleep: impl FnOnce(Duration),
    ) {
        let start = now();
        if let Phase::Sleep(d) = self.phase(ns, start) {
            sleep(Duration::from_nanos(d));
            return;
        }
        let until = start.saturating_add(ns);
        let since = self.since.expect("a pause is in a streak");
        let yield_from = since.saturating_add(self.policy.spin_ns);
        let sleep_from = since.saturating_add(self.policy.yield_ns);
        loop {
            if wake() {
                return;
            }
            let t = now();
            if t >= until {
                return;
            }
            let left = until - t;
            if t >= sleep_from && left >= SLEEP_MIN_NS {
                assert!(left <= ns, "rule (sleep bound): the remainder of the pause");
                sleep(Duration::from_nanos(left));
                return;
            }
            if t < yield_from {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff::new(Policy::ENDPOINT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: Policy = Policy {
        spin_ns: 1_000,
        yield_ns: 100_000,
        sleep_max_ns: 400_000,
    };

    /// A turn that ends with a pause of `ns` at `now`: its clock reading, then the pause.
    fn idle_turn(b: &mut Backoff, ns: u64, now: u64) -> Phase {
        b.saw(&Op::Now);
        b.phase(ns, now)
    }

    #[test]
    fn a_streak_spins_then_yields_then_sleeps_longer_up_to_the_bound() {
        let mut b = Backoff::new(POLICY);
        assert_eq!(idle_turn(&mut b, 20_000, 5_000), Phase::Spin);
        assert_eq!(idle_turn(&mut b, 20_000, 50_000), Phase::Yield);
        assert_eq!(idle_turn(&mut b, 20_000, 105_000), Phase::Sleep(20_000));
        assert_eq!(idle_turn(&mut b, 20_000, 130_000), Phase::Sleep(40_000));
        let sleeps: Vec<Phase> = (0..6).map(|_| idle_turn(&mut b, 20_000, 200_000)).collect();
        assert_eq!(sleeps[2], Phase::Sleep(320_000));
        assert!(sleeps[3..].iter().all(|&p| p == Phase::Sleep(400_000)));
    }

    #[test]
    fn a_turn_without_a_pause_ends_the_streak() {
        let mut b = Backoff::new(POLICY);
        idle_turn(&mut b, 20_000, 0);
        assert_eq!(idle_turn(&mut b, 20_000, 200_000), Phase::Sleep(20_000));
        b.saw(&Op::Now); // a turn that worked: no pause in it
        b.saw(&Op::Now);
        assert!(!b.idle());
        assert_eq!(idle_turn(&mut b, 20_000, 300_000), Phase::Spin);
        b.worked();
        assert_eq!(b.phase(20_000, 900_000), Phase::Spin);
    }

    #[test]
    fn short_pauses_and_the_endpoint_policy_never_oversleep() {
        let mut b = Backoff::new(POLICY);
        idle_turn(&mut b, 500, 0);
        assert_eq!(idle_turn(&mut b, 500, 10_000_000), Phase::Yield);
        let mut e = Backoff::default();
        idle_turn(&mut e, 20_000, 0);
        for t in 1..10 {
            assert_eq!(
                idle_turn(&mut e, 20_000, t * 1_000_000),
                Phase::Sleep(20_000)
            );
        }
    }

    #[test]
    fn a_pause_lets_its_time_pass_or_ends_when_woken() {
        let mut b = Backoff::new(POLICY);
        let mut t = 0;
        b.pause(
            3_000,
            || {
                t += 100;
                t
            },
            || false,
            |_| panic!("a young streak does not sleep"),
        );
        assert!(t >= 3_000, "the pause's time passed: {t}");
        let mut looks = 0;
        b.pause(
            u64::MAX,
            || 0,
            || {
                looks += 1;
                looks == 3
            },
            |_| panic!("a young streak does not sleep"),
        );
        assert_eq!(looks, 3, "woken at the third look");
        let mut slept = None;
        b.pause(20_000, || 10_000_000, || false, |d| slept = Some(d));
        assert_eq!(slept, Some(Duration::from_micros(20)));
    }

    #[test]
    fn a_long_pause_sleeps_its_remainder_once_the_streak_is_past_yielding() {
        let mut b = Backoff::new(POLICY);
        let mut t = 0;
        let mut slept = None;
        b.pause(
            1_000_000,
            || {
                t += 10_000;
                t
            },
            || false,
            |d| slept = Some(d),
        );
        // The streak began at 10 µs; at 110 µs it is past yielding: 900 µs are left.
        assert_eq!(slept, Some(Duration::from_micros(900)));
    }
}
