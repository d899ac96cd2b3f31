//! Replacing a replica's process (rule (no amnesia), [`crate::log::configuration`]): a
//! process that starts blank in a replica's place ([`Replica::joining`]), the others told
//! it did ([`Replica::peer_replaced`]), and the leader's two changes that make it a voter
//! again (rule (replace)).

use super::{Replica, Role};
use crate::log::configuration::Incarnation;
use crate::log::membership::{Members, Membership};
use velos_rdma::Shared;

/// Why an incarnation was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IncarnationError {
    /// The replica is not one of the log's, or is this one.
    #[error("replica {replica} is not a peer of replica {me} in a log of {replicas}")]
    NotAPeer {
        /// The replica named.
        replica: u16,
        /// This replica.
        me: u16,
        /// The log's replicas.
        replicas: u16,
    },
    /// A replaced process must have an incarnation above every one known for its place.
    #[error("replica {replica}: incarnation {given} is not above {known}, the one connected")]
    NotNewer {
        /// The replica.
        replica: u16,
        /// The incarnation connected to now.
        known: Incarnation,
        /// The incarnation given.
        given: Incarnation,
    },
    /// One incarnation per replica of the log is needed.
    #[error("{given} incarnations for a log of {replicas} replicas")]
    WrongCount {
        /// How many were given.
        given: usize,
        /// The log's replicas.
        replicas: u16,
    },
}

impl Replica {
    /// A process starting blank in replica `me`'s place, connected to the processes of
    /// `incarnations` (indexed by replica; `incarnations[me]` is this process's own, above
    /// every incarnation of `me` any configuration named). It follows the log from its
    /// start — copying a snapshot if the ring moved on —, never counts its own words in a
    /// slot whose configuration names an earlier incarnation of `me`, and leads or votes
    /// only once a configuration entry decided in the log names it (rule (replace)).
    pub fn joining(
        config: Shared<crate::log::LogConfig>,
        me: u16,
        incarnations: &[Incarnation],
    ) -> Result<Replica, String> {
        let mut replica = Replica::new(config, me)?;
        if incarnations.len() != usize::from(replica.config.replicas) {
            let e = IncarnationError::WrongCount {
                given: incarnations.len(),
                replicas: replica.config.replicas,
            };
            return Err(e.to_string());
        }
        for (r, &i) in incarnations.iter().enumerate() {
            #[cfg(feature = "mutations")]
            let i = match replica.config.mutation {
                // Rejoining under the old identity: the incarnation replaced.
                crate::slot::Mutation::RejoinBlank if r == usize::from(me) => i.saturating_sub(1),
                _ => i,
            };
            replica.membership.connected(r as u16, i);
        }
        replica.members_moved();
        #[cfg(feature = "mutations")]
        let rejoining = replica.config.mutation == crate::slot::Mutation::RejoinBlank;
        #[cfg(not(feature = "mutations"))]
        let rejoining = false;
        assert!(
            rejoining || replica.incarnation() == 0 || !replica.membership.voters(0).contains(me),
            "rule (no amnesia): a new incarnation does not vote in the first configuration"
        );
        Ok(replica)
    }

    /// `service`, the service's snapshot holding every entry below `point` (at most my
    /// next slot), as the log keeps it: the membership from `point` on, then `service`.
    /// What a replica's disk keeps, so that a later process in its place resumes there
    /// ([`Replica::resume_at`]). `None` if `point` is past my next slot (no snapshot
    /// holds what I have not applied) or the membership does not fit a snapshot.
    pub fn wrap_snapshot(&self, point: u64, service: &[u8]) -> Option<Vec<u8>> {
        if point > self.next_apply {
            return None;
        }
        self.membership.wrap_snapshot(point, service)
    }

    /// A process joining in my place ([`Replica::joining`]) that restored its service
    /// from its own disk: `snapshot` is what [`Replica::wrap_snapshot`] gave an earlier
    /// process of this replica at `point` (this log's numbering). It resumes at `point` —
    /// what follows read from the ring, or a peer's snapshot copied if the ring moved past
    /// it — instead of at the log's start. Only decided state came back: its acceptor
    /// memory is blank and its incarnation new all the same (rule (no amnesia)). Refused
    /// for a process that applied anything, and for bytes that are no wrapped snapshot of
    /// this log. The service's bytes it resumed with, to restore the service from.
    pub fn resume_at<'a>(&mut self, point: u64, snapshot: &'a [u8]) -> Result<&'a [u8], String> {
        if self.next_apply != 0 || self.beat.points[usize::from(self.me)] != 0 {
            return Err(format!(
                "replica {}: only a process that applied nothing resumes from its disk \
                 (next slot {})",
                self.me, self.next_apply
            ));
        }
        let (membership, service) = Membership::unwrap_snapshot(snapshot, self.config.replicas)
            .ok_or_else(|| format!("replica {}: not a snapshot of this log", self.me))?;
        if service.len() > self.config.max_snapshot_bytes as usize {
            return Err(format!(
                "replica {}: a snapshot of {} bytes, above the log's {}",
                self.me,
                service.len(),
                self.config.max_snapshot_bytes
            ));
        }
        if point == 0 {
            return Ok(service); // the log's start: nothing to resume
        }
        let image = self.adopt_snapshot(point, membership, service.to_vec());
        self.publish_resumed(point, image);
        self.resumed_at = Some(point);
        assert_eq!(self.next_apply, point, "resumed at its disk's snapshot");
        Ok(service)
    }

    /// A process restarting after a power loss of the whole cluster, every process on
    /// blank memory from its own disk, once they agreed that the longest log any of them
    /// recovered ends at `point` (this log's numbering goes on). With `service` — the
    /// service's snapshot there, my disk holding that whole log — I resume at `point` and
    /// publish it in my bank. Without — my disk holds less — I copy a peer's snapshot at
    /// `point` or later before I apply, lead or answer anything, even while nobody shows
    /// one yet (rule (recovered behind)). The slots below `point` are never decided in
    /// this memory: every replica starts at or past them. No acceptor word of this memory
    /// existed before it, so rule (no amnesia) holds whatever the incarnation. Refused for
    /// a replica that applied anything, `point` 0, or a snapshot above the log's size.
    pub fn restart_recovered(&mut self, point: u64, service: Option<&[u8]>) -> Result<(), String> {
        if self.next_apply != 0 || self.beat.points[usize::from(self.me)] != 0 || point == 0 {
            return Err(format!(
                "replica {}: only a replica that applied nothing restarts from a recovered \
                 log, and only past its start (point {point})",
                self.me
            ));
        }
        let Some(service) = service else {
            self.snap.behind = true;
            self.snap.recovering = true;
            assert!(
                !self.able_to_lead(),
                "rule (recovered behind): no lead before a copy"
            );
            return Ok(());
        };
        let wrapped = self
            .membership
            .wrap_snapshot(point, service)
            .ok_or_else(|| {
                format!(
                    "replica {}: the membership does not fit a snapshot",
                    self.me
                )
            })?;
        self.resume_at(point, &wrapped)?;
        assert_eq!(self.next_apply, point, "resumed at the recovered log's end");
        Ok(())
    }

    /// My incarnation.
    pub fn incarnation(&self) -> Incarnation {
        self.membership.incarnation(self.me)
    }

    /// Whether I vote in my next slot: its configuration names me at my incarnation.
    pub fn votes(&self) -> bool {
        self.membership.voters(self.next_apply).contains(self.me)
    }

    /// The replicas whose words count in my next slot: its configuration's members,
    /// each named at the incarnation I am connected to (rule (no amnesia)). Once every live
    /// replica counts a replacement here, it votes and they all applied past the change
    /// that named it.
    pub fn voters(&self) -> Members {
        self.membership.voters(self.next_apply)
    }

    /// The incarnation of every replica's process as this replica knows it.
    pub fn incarnations(&self) -> &[Incarnation] {
        self.membership.incarnations()
    }

    /// Replica `r`'s memory now belongs to `incarnation`, a process started blank in its
    /// place, and every operation towards `r` from now on reaches it (call it when the
    /// connection to the new process replaces the old one, before anything is posted on
    /// it). From now on `r` counts only in slots whose configuration names `incarnation`;
    /// the CASes in flight towards it are reported lost; a leader replaces the old
    /// incarnation by the new one in two configuration changes (rule (replace)).
    pub fn peer_replaced(
        &mut self,
        r: u16,
        incarnation: Incarnation,
    ) -> Result<(), IncarnationError> {
        if r == self.me || r >= self.config.replicas {
            return Err(IncarnationError::NotAPeer {
                replica: r,
                me: self.me,
                replicas: self.config.replicas,
            });
        }
        let known = self.membership.incarnation(r);
        #[cfg(feature = "mutations")]
        if self.config.mutation == crate::slot::Mutation::RejoinBlank && incarnation > known {
            return Ok(()); // the blank process goes on counting as the one it replaced
        }
        if incarnation <= known {
            return Err(IncarnationError::NotNewer {
                replica: r,
                known,
                given: incarnation,
            });
        }
        self.membership.connected(r, incarnation);
        // The join path connected the new process: it is not cut off (rule (retire)).
        self.beat.retired = Members(self.beat.retired.0 & !(1 << r));
        if let Role::Leader(l) = &mut self.role {
            l.acceptor_replaced(r, incarnation);
        }
        if let Some(l) = &mut self.learn.repair {
            l.acceptor_replaced(r, incarnation);
        }
        // What my value buffers there held is gone with the old memory.
        for w in self.learn.written.values_mut() {
            w.holds &= !(1 << r);
        }
        for tag in self.links.give_up(r) {
            if let Some(l) = self.proposer(tag.term) {
                l.on_cas_lost(tag.slot, r, tag.id);
            }
        }
        // A value read under way there is given up at the next turn's start (its test may
        // be out now): its later gets would read the new memory, and an end stamp read
        // from the old one over a begin stamp of the new (blank, so "never written") would
        // pass for a whole read of zeros (seed 6270).
        if self
            .learn
            .reads
            .front()
            .is_some_and(|read| read.acceptor == r && read.stage.at_acceptor())
        {
            self.learn.read_replaced = true;
        }
        self.bulk_source_replaced(r);
        self.beat.points[usize::from(r)] = 0;
        self.beat.reached[usize::from(r)] = 0;
        self.omega.replaced(r); // it cannot lead until it says it can: rule (able leader)
        self.leasing.lease.forget(r);
        self.members_moved();
        self.moved = true;
        assert!(
            !self.membership.voters(self.next_apply).contains(r)
                || self.membership.latest_configuration().names(r, incarnation),
            "rule (no amnesia): a new incarnation votes only where a configuration names it"
        );
        Ok(())
    }

    /// Rule (replace): a leader whose last configuration names a member at an incarnation
    /// older than the one it is connected to removes that member; once removed, a replica
    /// whose process is newer than the last incarnation named and which Ω hears from is
    /// added back at it. One change at a time (lemma (one change at a time)); the old and
    /// the new incarnation are never members together, so no slot counts both.
    ///
    /// A member named at an incarnation *newer* than the one I am connected to is a new
    /// process the join path has not brought to me yet (it meets a majority first, the
    /// rest in the background): I do not count it (rule (no amnesia)) but leave it be.
    /// Removing it — for a process I have not met — cut a replacement off at every
    /// replica and kept it out for good (the configuration then names its incarnation as
    /// removed: `cargo run --release -- vopr --seeds 975..976`, before this rule).
    pub(super) fn replace_members(&mut self) {
        if !self.is_leader() || self.membership.pending_after(self.next_apply) {
            return;
        }
        let latest = self.membership.latest_configuration();
        let stale = latest
            .members
            .iter()
            .find(|&r| latest.named[usize::from(r)] < self.membership.incarnation(r));
        let change = match stale {
            Some(r) => Members(latest.members.0 & !(1 << r)),
            None => {
                let joined = (0..self.config.replicas).find(|&r| {
                    !latest.members.contains(r)
                        && self.membership.incarnation(r) > latest.named[usize::from(r)]
                        && !self.omega.suspects(r)
                });
                match joined {
                    Some(r) => Members(latest.members.0 | 1 << r),
                    None => return,
                }
            }
        };
        if change.is_empty() {
            return; // the last member's process was replaced: nobody is left to decide
        }
        // Refused only while another change is queued or in the window: tried again at
        // the next heartbeat.
        let _ = self.propose_members(change);
    }
}
