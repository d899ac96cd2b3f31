//! [`Cluster::replace`]: a fresh process in a crashed replica's place, joining through the
//! log (rule (no amnesia) of `velos_core::log::configuration`); [`Cluster::add_replica`]:
//! a spare running replica made a voter.

use super::driver::{Command, Driver};
use super::error::Error;
use super::handle::{Cluster, Inboxes, Runner};
use super::mem_backend;
use super::receipt::{Answer, answer};
use super::shown::{CRASHED, REMOVED, UP};
use super::state_machine::StateMachine;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use velos_core::log::membership::Members;

impl<S: StateMachine> Cluster<S> {
    /// Starts a fresh process in `replica`'s place — crashed, or removed by
    /// [`Cluster::change_members`] ([`Role::Removed`]: the join path is the only way back) —
    /// applying to `machine` (an empty state machine: it is restored from a peer's
    /// snapshot, or from the log's entries): on blank memory, at the next *incarnation* of
    /// the replica. Every live replica stops counting the old process's words at once, then
    /// connects to the new one; the leader removes the old incarnation from the
    /// configuration (if it is still named) and adds the new one, one change each, through
    /// the log. The answer resolves with the new incarnation once the replacement votes (a
    /// decided configuration names it in its next slot) — `.await` it, or `wait_timeout`;
    /// an error if the replacement stops first. A replica that is not a member when it
    /// crashed is added as one.
    ///
    /// Refused: a replica that runs ([`Error::NotCrashed`]); on real RDMA, each replica is a
    /// process of its own (see [`super::Node`]).
    ///
    /// [`Role::Removed`]: super::Role::Removed
    pub fn replace(&self, replica: u16, machine: S) -> Result<Answer<u64>, Error> {
        let shown = self
            .shown
            .get(usize::from(replica))
            .ok_or(Error::NoSuchReplica {
                replica,
                replicas: self.replicas(),
            })?;
        if !matches!(shown.status.load(Ordering::SeqCst), CRASHED | REMOVED) {
            return Err(Error::NotCrashed { replica });
        }
        let Some(runner) = &self.runner else {
            return Err(Error::ShuttingDown);
        };
        let mut incarnations = self
            .incarnations
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let i = usize::from(replica);
        incarnations[i] += 1;
        let incarnation = incarnations[i];
        let mut driver = Driver::new(
            replica,
            machine,
            &self.config,
            self.metrics.clone(),
            self.shown.clone(),
        );
        let (tx, voting) = answer(replica);
        driver.tell_when_voting(tx);
        match (&self.inboxes, runner) {
            (
                Inboxes::PerReplica {
                    receivers,
                    fabric,
                    log,
                    ..
                },
                Runner::PerReplica(threads),
            ) => {
                let mut threads = threads
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                // The old process's thread stops when it reads its crash (at once), or
                // ended when it was removed: it must be gone before its node's memory is
                // live again. A removed one's state machine goes with it.
                if let Some(old) = threads[i].take() {
                    let _ = old.join().expect("a replica thread panicked");
                }
                // What the old process left unread goes with it (a crash it saw first
                // through its own memory, a peer's replacement while it was down): a
                // proposal's receipt resolves with an error as its completer drops.
                while receivers[i].try_recv().is_ok() {}
                // Its disk thread ended with it: the new process goes on from its disk, and
                // resumes at the newest snapshot there.
                let resume = self.disk.as_ref().and_then(|disk| {
                    let shown = Arc::clone(&self.shown[i]);
                    super::recovery::reopen(&self.config, replica, &mut driver, shown, disk)
                });
                let thread = mem_backend::replace(
                    (fabric, log),
                    (replica, &incarnations),
                    (driver, resume),
                    receivers[i].clone(),
                )
                .expect("a replica thread starts");
                threads[i] = Some(thread);
                shown.show_status(replica, UP, None);
                for peer in (0..self.replicas()).filter(|&p| p != replica) {
                    self.send(
                        peer,
                        Command::PeerReplaced {
                            replica,
                            incarnation,
                        },
                    );
                }
            }
            (Inboxes::Shared(_, replacements), _) => {
                shown.show_status(replica, UP, None);
                // The runner starts it and tells the engines between two quanta.
                let _ = replacements.send((replica, incarnation, driver));
            }
            _ => unreachable!("one backend's inboxes and runner"),
        }
        tracing::info!(replica, incarnation, "replacement started");
        Ok(voting)
    }
}

impl<S: StateMachine> Cluster<S> {
    /// Makes a spare a voter: the lowest running replica that the last configuration the
    /// leader applied does not count (provisioned outside [`LogConfig::members`]; it
    /// follows the log meanwhile), added through the log as `change_members` does. Its id,
    /// once the change is in effect at the leader. A crashed replica, or one removed by
    /// [`Cluster::change_members`] (cut off, it ends: rule (retire)), comes back through
    /// [`Cluster::replace`] instead; picked while it has not ended yet, the leader refuses
    /// it ([`Error::BadMembership`], naming the join path).
    ///
    /// Refused: [`Error::NoSpare`] when every running replica votes; the leader's refusals
    /// (another change under way: [`Error::ChangePending`]).
    ///
    /// [`LogConfig::members`]: velos_core::log::LogConfig::members
    pub fn add_replica(&self) -> Result<u16, Error> {
        let (with, spare) = self.with_spare()?;
        self.change_members(&with)?;
        Ok(spare)
    }

    /// [`Cluster::add_replica`] as a future.
    pub async fn add_replica_async(&self) -> Result<u16, Error> {
        let (with, spare) = self.with_spare()?;
        self.change_members_async(&with).await?;
        Ok(spare)
    }

    /// The voters the leader last applied with the lowest running replica outside them,
    /// and that replica.
    fn with_spare(&self) -> Result<(Vec<u16>, u16), Error> {
        let leader = self.leader_or_why()?;
        let shown = |r: u16| &self.shown[usize::from(r)];
        let members = match shown(leader).members.load(Ordering::SeqCst) {
            0 => self.config.log.members,
            m => Members(m),
        };
        let spare = (0..self.replicas())
            .find(|&r| !members.contains(r) && shown(r).status.load(Ordering::SeqCst) == UP)
            .ok_or(Error::NoSpare)?;
        let with = (0..self.replicas())
            .filter(|&r| members.contains(r) || r == spare)
            .collect();
        Ok((with, spare))
    }
}
