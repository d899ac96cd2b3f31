//! A durable [`Node`]'s durable point ([`Config::durable`](super::Config::durable)):
//! [`Node::durable_index`], [`Node::wait_durable`], [`Node::submit_durable`] — an entry is
//! durable once a majority of the members hold it on disk, as this node reads its peers'
//! durable words (`peer_points.rs`).

use super::durable::{durable_index, durable_points, wait_durable, wait_durable_async};
use super::error::Error;
use super::node::Node;
use super::receipt::{Answer, Outcome};
use super::recovery::ReplicaDisk;
use super::state_machine::StateMachine;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use velos_core::log::membership::Members;

impl<S: StateMachine> Node<S> {
    /// What this replica's directory held when it started (durability on).
    pub fn disk(&self) -> Option<&ReplicaDisk> {
        self.disk.as_ref().map(|d| &d.found)
    }

    /// The point of the snapshot this process resumed at, if it joined with a snapshot on
    /// its disk ([`Start::Join`](super::Start::Join) with durability on: it read only the
    /// log after it).
    pub fn resumed_at(&self) -> Option<u64> {
        let point = self.shown.resumed.load(Ordering::SeqCst);
        (point > 0).then_some(point)
    }

    /// The members whose disks count: the configuration in effect here.
    fn disk_members(&self) -> Members {
        let here = self.shown.members.load(Ordering::SeqCst);
        if here == 0 {
            self.config.log.members
        } else {
            Members(here)
        }
    }

    /// With durability on, every slot below it is on the disks of a majority of the
    /// members, as this node last read its peers' durable words (they are read while a
    /// durable wait is under way, so this may lag behind between waits): those entries
    /// survive a power loss of every replica. `None` with durability off.
    pub fn durable_index(&self) -> Option<u64> {
        self.disk.as_ref()?;
        Some(durable_index(&self.peers, self.disk_members()))
    }

    /// How far each replica's disk holds the log, as last read (durability on; empty
    /// otherwise).
    pub fn durable_points(&self) -> Vec<u64> {
        if self.disk.is_none() {
            return Vec::new();
        }
        durable_points(&self.peers)
    }

    /// Waits until the entry of `slot` is durable (a majority of the members hold it on
    /// disk), at most `timeout`, reading the peers' durable words meanwhile.
    /// [`Error::DurabilityOff`] without durability; [`Error::DiskStopped`] once too many
    /// of the members' disks stopped for a majority to hold it.
    ///
    /// The peers' disks do not know a process elsewhere waits: they write at their own
    /// pace, a batch at least every [`Config::group_commit`](super::Config::group_commit) — the wait's latency
    /// includes up to that pause (a node's own disk is hurried, as a cluster's are).
    pub fn wait_durable(&self, slot: u64, timeout: Duration) -> Result<(), Error> {
        let disk = self.disk.as_ref().ok_or(Error::DurabilityOff)?;
        // Wakes the replica's loop, which reads the peers' words while the wait is under
        // way; a leader lets its followers learn the slot (rule (durable nudge)).
        self.nudge();
        let members = self.disk_members();
        wait_durable(&self.peers, &disk.watch, members, slot, timeout)
    }

    /// [`Node::wait_durable`] as a future (a helper thread waits: no runtime needed).
    pub fn wait_durable_async(&self, slot: u64, timeout: Duration) -> Answer<()> {
        let on = self.disk.as_ref().map(|d| (&self.peers, &d.watch));
        if on.is_some() {
            self.nudge();
        }
        wait_durable_async(self.id(), on, self.disk_members(), (slot, timeout))
    }

    /// [`Node::propose`], then [`Node::wait_durable`] for its slot, within
    /// [`Config::wait_timeout`](super::Config::wait_timeout) in all: the command survives a power loss of every replica
    /// once this returns `Ok`.
    pub fn submit_durable(&self, command: Vec<u8>) -> Outcome<S::Response> {
        let start = Instant::now();
        let info = self.propose(command)?;
        let left = self.config.wait_timeout.saturating_sub(start.elapsed());
        self.wait_durable(info.position.slot, left)?;
        Ok(info)
    }
}
