//! A durable cluster ([`Config::durable`]): its start on the replicas' directories, the
//! recovery after a power loss ([`Cluster::recover`]), and the durable point
//! ([`Cluster::durable_index`], [`Cluster::wait_durable`], [`Cluster::submit_durable`]):
//! an entry is durable once a majority of the members hold it on disk.

use super::config::Config;
use super::driver::Command;
use super::error::{Error, StartError};
use super::handle::Cluster;
use super::persist::DiskWatch;
use super::receipt::{Answer, Outcome, answer};
use super::recovery::{self, Recovery};
use super::shown::Shown;
use super::state_machine::StateMachine;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};
use velos_core::log::membership::Members;

/// The durable index of `shown`'s replicas: every slot below it is on the disks of a
/// majority of `members`.
pub(super) fn durable_index(shown: &[Arc<Shown>], members: Members) -> u64 {
    let points: Vec<u64> = members
        .iter()
        .filter_map(|r| shown.get(usize::from(r)))
        .map(|s| s.durable.load(Ordering::SeqCst))
        .collect();
    velos_store::quorum::durable_index(&points, members.majority())
}

/// How far each of `shown`'s replicas' disks holds the log.
pub(super) fn durable_points(shown: &[Arc<Shown>]) -> Vec<u64> {
    shown
        .iter()
        .map(|s| s.durable.load(Ordering::SeqCst))
        .collect()
}

/// The replicas of `members` whose disks stopped, with the first one's reason.
pub(super) fn disks_stopped(shown: &[Arc<Shown>], members: Members) -> (Vec<u16>, Option<String>) {
    let mut stopped = Vec::new();
    let mut reason = None;
    for r in members.iter() {
        let Some(s) = shown.get(usize::from(r)) else {
            continue;
        };
        let why = s.disk_stopped.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(why) = why.as_ref() {
            stopped.push(r);
            reason.get_or_insert_with(|| why.to_string());
        }
    }
    (stopped, reason)
}

impl<S: StateMachine> Cluster<S> {
    /// Starts the cluster again on the directories a crash or a power loss of every
    /// replica left under `config`'s durable directory ([`Config::durable`]; replica `i`
    /// applies to the `i`-th machine, an empty state machine). Each directory is read
    /// back (its newest valid snapshot and the log after it; a torn or corrupt tail is
    /// cut at the last valid record and reported in [`Cluster::recovery`], never used);
    /// a majority of the members' directories must be there; the log resumes after the
    /// longest one (two directories that disagree on a slot are refused); every state
    /// machine is rebuilt from it and every replica's disk brought up to it; new commands
    /// go in the slots after it. Every entry that was durable
    /// ([`Cluster::wait_durable`]) is there, in order; an entry committed but not yet
    /// durable may be gone (then its slot takes another command).
    ///
    /// Empty or missing directories start an empty log, as [`Cluster::start`] does.
    pub fn recover(
        mut config: Config,
        machines: impl IntoIterator<Item = S>,
    ) -> Result<Cluster<S>, StartError> {
        if config.durable_dir.is_none() {
            return Err(StartError::InvalidConfig(
                "a recovery reads the replicas' directories: set Config::durable".into(),
            ));
        }
        let machines = Cluster::checked(&config, machines)?;
        let disks = recovery::read(&config)?;
        if let Some(members) = disks.members {
            config.log.members = members;
            config.validate().map_err(StartError::Recovery)?;
        }
        Cluster::start_on(config, machines, Some(disks))
    }

    /// What the start found on disk (durability on); `None` otherwise.
    pub fn recovery(&self) -> Option<&Recovery> {
        self.disk.as_ref().map(|d| &d.report)
    }

    /// The log's slot the first command after the start took (0 unless the cluster was
    /// recovered from disk: the recovered log's next slot).
    pub fn first_slot(&self) -> u64 {
        self.disk.as_ref().map_or(0, |d| d.base)
    }

    /// The members whose disks count: the last configuration in effect anywhere.
    fn disk_members(&self) -> Members {
        let latest = self
            .shown
            .iter()
            .map(|s| s.members.load(Ordering::SeqCst))
            .find(|&m| m != 0);
        latest.map_or(self.config.log.members, Members)
    }

    /// With durability on, every slot below it is on the disks of a majority of the
    /// members: those entries survive a power loss of every replica. `None` with
    /// durability off.
    pub fn durable_index(&self) -> Option<u64> {
        self.disk.as_ref()?;
        Some(durable_index(&self.shown, self.disk_members()))
    }

    /// How far each replica's disk holds the log (durability on; empty otherwise).
    pub fn durable_points(&self) -> Vec<u64> {
        if self.disk.is_none() {
            return Vec::new();
        }
        durable_points(&self.shown)
    }

    /// Waits until the entry of `slot` is durable (a majority of the members hold it on
    /// disk), at most `timeout`. [`Error::DurabilityOff`] without durability;
    /// [`Error::DiskStopped`] once too many of the members' disks stopped (full, or
    /// failing) for a majority to hold it.
    pub fn wait_durable(&self, slot: u64, timeout: Duration) -> Result<(), Error> {
        let disk = self.disk.as_ref().ok_or(Error::DurabilityOff)?;
        self.nudge_for(slot);
        wait_durable(&self.shown, &disk.watch, self.disk_members(), slot, timeout)
    }

    /// Rule (durable nudge): if `slot` is not durable yet, the leader is asked to let its
    /// followers learn it (an idle leader proposes one empty entry; `Driver::nudge`).
    fn nudge_for(&self, slot: u64) {
        if self.durable_index().is_some_and(|d| d <= slot)
            && let Some(leader) = self.leader()
        {
            self.send(leader, Command::Nudge);
        }
    }

    /// [`Cluster::wait_durable`] as a future (a helper thread waits: no runtime needed).
    pub fn wait_durable_async(&self, slot: u64, timeout: Duration) -> Answer<()> {
        self.nudge_for(slot); // nothing without durability
        let on = self.disk.as_ref().map(|d| (&self.shown, &d.watch));
        wait_durable_async(0, on, self.disk_members(), (slot, timeout))
    }

    /// [`Cluster::submit`], then [`Cluster::wait_durable`] for its slot, within
    /// [`Config::wait_timeout`] in all: the command survives a power loss of every replica
    /// once this returns `Ok`.
    pub fn submit_durable(&self, command: Vec<u8>) -> Outcome<S::Response> {
        let start = Instant::now();
        let info = self.submit(command)?;
        let left = self.config.wait_timeout.saturating_sub(start.elapsed());
        self.wait_durable(info.position.slot, left)?;
        Ok(info)
    }
}

/// Every replica's view, shared with a helper thread.
type Views = Arc<[Arc<Shown>]>;

/// [`wait_durable`] on a helper thread, as an answer of replica `id`'s: at once
/// [`Error::DurabilityOff`] without the replicas' views and their disk watch (`on`).
pub(super) fn wait_durable_async(
    id: u16,
    on: Option<(&Views, &Arc<DiskWatch>)>,
    members: Members,
    (slot, timeout): (u64, Duration),
) -> Answer<()> {
    let (tx, answer) = answer(id);
    let Some((shown, watch)) = on else {
        tx.send(Err(Error::DurabilityOff));
        return answer;
    };
    let (shown, watch) = (Arc::clone(shown), Arc::clone(watch));
    thread::spawn(move || tx.send(wait_durable(&shown, &watch, members, slot, timeout)));
    answer
}

pub(super) fn wait_durable(
    shown: &[Arc<Shown>],
    watch: &DiskWatch,
    members: Members,
    slot: u64,
    timeout: Duration,
) -> Result<(), Error> {
    // Premise of a durable wait: a majority of the members can still persist.
    let hopeless = || {
        let (down, _) = disks_stopped(shown, members);
        members.len() - down.len() < members.majority()
    };
    let _wanting = watch.want(); // rule (hurried disk)
    watch.wait_until(timeout, || {
        durable_index(shown, members) > slot || hopeless()
    });
    if durable_index(shown, members) > slot {
        return Ok(());
    }
    let (replicas, reason) = disks_stopped(shown, members);
    if hopeless() {
        return Err(Error::DiskStopped {
            replicas,
            reason: reason.unwrap_or_default(),
        });
    }
    Err(Error::TimedOut { after: timeout })
}
