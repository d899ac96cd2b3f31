//! [`Session`]: what a client holds to submit commands that apply at most once (the
//! envelope and the replicated table are `session.rs`).

use super::error::Error;
use super::handle::Cluster;
use super::receipt::Outcome;
use super::state_machine::StateMachine;
use std::hash::{BuildHasher, Hasher};

impl<S: StateMachine> Cluster<S> {
    /// A client session: commands submitted through it apply at most once, retries
    /// included ([`Session`]).
    pub fn session(&self) -> Session<'_, S> {
        Session::new(self)
    }
}

/// A client session of a [`Cluster`]: commands submitted through it apply at most once,
/// however often they are retried ([`Session::submit`] retries an unknown outcome by
/// itself). One command at a time; sessions are cheap: every replica keeps the
/// [`Config::max_sessions`](super::Config) most recently used (24 bytes each in
/// snapshots), and a command of a session evicted since its last one answers
/// [`Error::SessionExpired`] instead of applying.
pub struct Session<'a, S: StateMachine> {
    cluster: &'a Cluster<S>,
    id: u64,
    seq: u64,
    last: Option<Vec<u8>>,
    resends: u64,
}

impl<'a, S: StateMachine> Session<'a, S> {
    pub(crate) fn new(cluster: &'a Cluster<S>) -> Session<'a, S> {
        // Unique among the sessions of every process of a cluster with overwhelming
        // probability: the standard library's per-process random hash keys.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(cluster.sessions_opened());
        Session {
            cluster,
            id: h.finish() | 1,
            seq: 0,
            last: None,
            resends: 0,
        }
    }

    /// The session's id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// How many times a command of this session was sent again after an unknown outcome
    /// or a timeout (by [`Session::submit`] or [`Session::resubmit`]).
    pub fn resends(&self) -> u64 {
        self.resends
    }

    /// Submits `command` as this session's next one, and again (the same sequence
    /// number) while its outcome is unknown, until it commits or the cluster's wait
    /// timeout has passed: it is applied once. The response of a retry whose first copy
    /// was applied is that copy's (or [`Error::ResponseLost`] if the replica that
    /// answers restored its state from a snapshot since).
    pub fn submit(&mut self, command: Vec<u8>) -> Outcome<S::Response> {
        self.seq += 1;
        self.last = Some(command);
        self.resubmit()
    }

    /// Submits the last command again with its sequence number — what a client does
    /// after an unknown outcome (or a timeout): applied at most once in all.
    pub fn resubmit(&mut self) -> Outcome<S::Response> {
        let command = self.last.as_deref().ok_or(Error::NothingToResubmit)?;
        let resends = &mut self.resends;
        self.cluster
            .submit_in_session(self.id, self.seq, command, resends)
    }
}
