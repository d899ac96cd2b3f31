//! What a client holds to submit commands that apply at most once: [`Session`], which
//! borrows the [`Cluster`], and [`OwnedSession`], which shares it through an [`Arc`] and
//! can move into a spawned task. Both submit blocking or as futures (the envelope and the
//! replicated table are `session.rs`).

use super::error::Error;
use super::handle::Cluster;
use super::receipt::Outcome;
use super::state_machine::StateMachine;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

impl<S: StateMachine> Cluster<S> {
    /// A client session: commands submitted through it apply at most once, retries
    /// included ([`Session`]).
    pub fn session(&self) -> Session<'_, S> {
        Session {
            cluster: self,
            core: Core::new(self),
        }
    }

    /// A client session that holds the cluster through its [`Arc`]: `Send + 'static`, so
    /// it moves into a spawned task ([`OwnedSession`]). The cluster is shut down once the
    /// last `Arc` is dropped, or by [`Cluster::shutdown`] on [`Arc::try_unwrap`]'s result.
    pub fn owned_session(self: &Arc<Self>) -> OwnedSession<S> {
        OwnedSession {
            core: Core::new(self),
            cluster: Arc::clone(self),
        }
    }
}

/// A client session of a [`Cluster`]: commands submitted through it apply at most once,
/// however often they are retried ([`Session::submit`] retries an unknown outcome by
/// itself). One command at a time; sessions are cheap: every replica keeps the
/// [`Config::max_sessions`](super::Config) most recently used (24 bytes each in
/// snapshots), and a command of a session evicted since its last one answers
/// [`Error::SessionExpired`] instead of applying. It borrows the cluster; to move a
/// session into a spawned task, use an [`OwnedSession`].
pub struct Session<'a, S: StateMachine> {
    cluster: &'a Cluster<S>,
    core: Core,
}

/// A [`Session`] that shares the cluster through an [`Arc`]
/// ([`Cluster::owned_session`]): `Send + 'static`, so it moves into a task of any runtime
/// (`tokio::spawn`), and its futures ([`OwnedSession::submit_async`]) are `Send`. The same
/// guarantee: a command applies at most once however often it is sent.
pub struct OwnedSession<S: StateMachine> {
    cluster: Arc<Cluster<S>>,
    core: Core,
}

/// A session's state, however the cluster is held: its id, its last command and that
/// command's sequence number, the resends so far.
struct Core {
    id: u64,
    seq: u64,
    last: Option<Vec<u8>>,
    resends: u64,
}

impl Core {
    fn new<S: StateMachine>(cluster: &Cluster<S>) -> Core {
        // Unique among the sessions of every process of a cluster with overwhelming
        // probability: the standard library's per-process random hash keys.
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u64(cluster.sessions_opened());
        Core {
            id: h.finish() | 1,
            seq: 0,
            last: None,
            resends: 0,
        }
    }

    /// `command` becomes the session's next one.
    fn next(&mut self, command: Vec<u8>) {
        self.seq += 1;
        self.last = Some(command);
    }

    fn resubmit<S: StateMachine>(&mut self, cluster: &Cluster<S>) -> Outcome<S::Response> {
        let command = self.last.as_deref().ok_or(Error::NothingToResubmit)?;
        cluster.submit_in_session(self.id, self.seq, command, &mut self.resends)
    }

    async fn resubmit_async<S: StateMachine>(
        &mut self,
        cluster: &Cluster<S>,
    ) -> Outcome<S::Response> {
        let command = self.last.as_deref().ok_or(Error::NothingToResubmit)?;
        cluster
            .submit_in_session_async(self.id, self.seq, command, &mut self.resends)
            .await
    }
}

impl<S: StateMachine> Session<'_, S> {
    /// The session's id.
    pub fn id(&self) -> u64 {
        self.core.id
    }

    /// How many times a command of this session was sent again after an unknown outcome
    /// or a timeout (by [`Session::submit`] or [`Session::resubmit`], or their futures).
    pub fn resends(&self) -> u64 {
        self.core.resends
    }

    /// Submits `command` as this session's next one, and again (the same sequence
    /// number) while its outcome is unknown, until it commits or the cluster's wait
    /// timeout has passed: it is applied once. The response of a retry whose first copy
    /// was applied is that copy's (or [`Error::ResponseLost`] if the replica that
    /// answers restored its state from a snapshot since).
    pub fn submit(&mut self, command: Vec<u8>) -> Outcome<S::Response> {
        self.core.next(command);
        self.resubmit()
    }

    /// Submits the last command again with its sequence number — what a client does
    /// after an unknown outcome (or a timeout): applied at most once in all.
    pub fn resubmit(&mut self) -> Outcome<S::Response> {
        self.core.resubmit(self.cluster)
    }

    /// [`Session::submit`] as a future: the command goes to the leader, again to the
    /// next one while leadership moves (waiting for it without polling), and again at
    /// once after an unknown outcome — applied once. No bound of its own (wrap it in your
    /// runtime's timeout, then [`Session::resubmit_async`]); [`Error::LogFull`] and
    /// [`Error::ChangePending`] are returned, not waited out (that needs a timer).
    pub async fn submit_async(&mut self, command: Vec<u8>) -> Outcome<S::Response> {
        self.core.next(command);
        self.resubmit_async().await
    }

    /// [`Session::resubmit`] as a future (as [`Session::submit_async`] sends).
    pub async fn resubmit_async(&mut self) -> Outcome<S::Response> {
        self.core.resubmit_async(self.cluster).await
    }
}

impl<S: StateMachine> OwnedSession<S> {
    /// The cluster the session submits to.
    pub fn cluster(&self) -> &Arc<Cluster<S>> {
        &self.cluster
    }

    /// The session's id.
    pub fn id(&self) -> u64 {
        self.core.id
    }

    /// How many times a command of this session was sent again (as
    /// [`Session::resends`]).
    pub fn resends(&self) -> u64 {
        self.core.resends
    }

    /// [`Session::submit`]: blocking, within the wait timeout, applied once.
    pub fn submit(&mut self, command: Vec<u8>) -> Outcome<S::Response> {
        self.core.next(command);
        self.resubmit()
    }

    /// [`Session::resubmit`]: the last command again, applied at most once in all.
    pub fn resubmit(&mut self) -> Outcome<S::Response> {
        self.core.resubmit(&self.cluster)
    }

    /// [`Session::submit_async`]: a `Send` future, applied once.
    pub async fn submit_async(&mut self, command: Vec<u8>) -> Outcome<S::Response> {
        self.core.next(command);
        self.resubmit_async().await
    }

    /// [`Session::resubmit_async`]: a `Send` future, applied at most once in all.
    pub async fn resubmit_async(&mut self) -> Outcome<S::Response> {
        self.core.resubmit_async(&self.cluster).await
    }
}

/// Compile-time checks, for every state machine: an owned session and its futures can
/// move to another thread (a spawned task), and the session outlives any borrow.
#[expect(
    dead_code,
    reason = "type-checked for every state machine, never called"
)]
fn owned_sessions_move_into_tasks<S: StateMachine>(mut session: OwnedSession<S>) {
    fn send_static<T: Send + 'static>(_: &T) {}
    fn send<T: Send>(_: &T) {}
    send_static(&session);
    send(&session.submit_async(Vec::new()));
    send(&session.resubmit_async());
    send_static(&async move { session.submit_async(Vec::new()).await });
}
