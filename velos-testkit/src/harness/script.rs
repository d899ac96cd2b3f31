//! The simulation's client: a replica that, while it leads, keeps its pipeline full with
//! scripted values. It lives here, not in the engine: an embedding proposes through
//! [`Replica::propose`] as this wrapper does.

use std::ops::{Deref, DerefMut};
use velos_core::log::{LogConfig, Replica};
use velos_rdma::{Batch, Op, Process, Reply, Step};

/// The values a replica proposes while it leads: `count` values of `size` bytes, each
/// naming the replica and a sequence number.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientScript {
    /// Values to propose in all.
    pub count: u64,
    /// Bytes per value (at least 10).
    pub size: usize,
}

impl ClientScript {
    /// No values: a replica that proposes only what its caller hands it.
    pub const NONE: ClientScript = ClientScript { count: 0, size: 10 };

    /// Value number `n` of replica `me` at `incarnation`: `me` (2 bytes), then `n` with
    /// the incarnation in its high 16 bits (8 bytes, little-endian: a replacement's values
    /// are new ones), then zeros up to `size`.
    pub fn value(&self, me: u16, incarnation: u64, n: u64) -> Vec<u8> {
        assert!(n < 1 << 48, "a script's value numbers fit 48 bits");
        let mut v = Vec::with_capacity(self.size);
        v.extend_from_slice(&me.to_le_bytes());
        v.extend_from_slice(&(n | incarnation << 48).to_le_bytes());
        v.resize(self.size, 0);
        assert_eq!(
            ClientScript::proposer(&v),
            Some((me, incarnation as u16)),
            "round trip"
        );
        v
    }

    /// Who proposed a script's value: its replica and incarnation (low 16 bits); `None`
    /// for bytes too short to be one.
    pub fn proposer(value: &[u8]) -> Option<(u16, u16)> {
        let me = u16::from_le_bytes(value.get(0..2)?.try_into().ok()?);
        let incarnation = u16::from_le_bytes(value.get(8..10)?.try_into().ok()?);
        Some((me, incarnation))
    }

    /// Whether the script's values fit `log`'s, with the reason if not.
    pub fn check(&self, log: &LogConfig) -> Result<(), String> {
        if self.count > 0 && !(10..=log.max_value_bytes as usize).contains(&self.size) {
            return Err(format!(
                "client values of {} bytes: 10 to {} fit",
                self.size, log.max_value_bytes
            ));
        }
        Ok(())
    }
}

/// A replica and its scripted client: before each step, while the replica leads and
/// holds fewer undecided proposals than its pipeline, the next values of the script are
/// proposed to it ([`Replica::propose`]). Everything else of the replica is reached
/// through it (`Deref`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Scripted {
    /// The engine.
    pub replica: Replica,
    script: ClientScript,
    /// Values of the script proposed so far.
    sent: u64,
    /// Every value this replica took as a proposal, in order.
    pub proposed: Vec<Vec<u8>>,
}

impl Scripted {
    /// `replica` proposing `script`'s values when it leads; refused, with the reason, if
    /// they do not fit its log's values.
    pub fn new(replica: Replica, script: ClientScript) -> Result<Scripted, String> {
        script.check(replica.config())?;
        Ok(Scripted {
            replica,
            script,
            sent: 0,
            proposed: Vec::new(),
        })
    }

    /// Proposes the script's next values while the replica leads and its pipeline has
    /// room; stops at the first refusal (the next step tries again).
    fn top_up(&mut self) {
        if self.sent >= self.script.count || !self.replica.is_leader() {
            return;
        }
        let pipeline = self.replica.config().pipeline as usize;
        while self.sent < self.script.count && self.replica.proposals_waiting() < pipeline {
            let incarnation = self.replica.incarnation();
            let v = self.script.value(self.replica.id(), incarnation, self.sent);
            if self.replica.propose(v.clone()).is_err() {
                break; // not leading after all, or the log is full: at the next step
            }
            self.sent += 1;
            self.proposed.push(v);
        }
        // Postcondition: every value counted was taken, and recorded once.
        assert_eq!(
            self.proposed.len() as u64,
            self.sent,
            "one record per value taken"
        );
    }
}

impl Deref for Scripted {
    type Target = Replica;
    fn deref(&self) -> &Replica {
        &self.replica
    }
}

impl DerefMut for Scripted {
    fn deref_mut(&mut self) -> &mut Replica {
        &mut self.replica
    }
}

impl Process for Scripted {
    fn resume(&mut self, reply: Reply) -> Step {
        self.top_up();
        self.replica.resume(reply)
    }

    fn resume_batch(&mut self, reply: Reply, out: &mut Vec<Op>) -> Batch {
        self.top_up();
        self.replica.resume_batch(reply, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use velos_rdma::Shared;

    #[test]
    fn values_that_do_not_fit_the_log_are_refused_with_the_reason() {
        let log = LogConfig::new(3, 16, 16);
        let replica = || Replica::new(Shared::new(log.clone()), 0).expect("valid");
        let script = |size| ClientScript { count: 1, size };
        assert!(Scripted::new(replica(), script(10)).is_ok());
        let refused = Scripted::new(replica(), script(17)).unwrap_err();
        assert!(refused.contains("10 to 16"), "{refused}");
        assert!(Scripted::new(replica(), script(9)).is_err());
        assert!(
            Scripted::new(replica(), ClientScript { count: 0, size: 0 }).is_ok(),
            "no values: no size to check"
        );
    }

    #[test]
    fn a_value_names_its_replica_and_incarnation() {
        let script = ClientScript { count: 5, size: 12 };
        let v = script.value(7, 3, 41);
        assert_eq!(v.len(), 12);
        assert_eq!(ClientScript::proposer(&v), Some((7, 3)));
        assert_ne!(script.value(7, 4, 41), v, "a replacement's values are new");
        assert_eq!(ClientScript::proposer(&v[..9]), None);
    }
}
