//! The embedding side of a replica: proposals in, committed entries and outcomes out.

use super::{MAX_PENDING, ProposeError, ReadError, Replica, Role, Submitted};
use crate::batch;
use crate::log::leader::{Proposal, Value, origin};
use crate::log::membership::Members;

impl Replica {
    /// Proposes `value` (the leader only): its id, which [`Replica::take_results`] reports
    /// with the slot that decided it.
    pub fn propose(&mut self, value: Vec<u8>) -> Result<u64, ProposeError> {
        if self.api.shutting_down {
            return Err(ProposeError::ShuttingDown);
        }
        let max = self.config.max_value_bytes as usize;
        if value.len() > max {
            return Err(ProposeError::ValueTooLarge {
                len: value.len(),
                max,
            });
        }
        self.enqueue(value, None)
    }

    /// A proposal of `bytes` behind the leader's queue (`open`: a batch still taking
    /// commands, [`Replica::submit`]): its id, or why it is refused — not the leader, the
    /// log used up or full, too many waiting.
    fn enqueue(&mut self, bytes: Vec<u8>, open: Option<u32>) -> Result<u64, ProposeError> {
        self.follow_omega(); // take up (or leave) the role Ω gives before answering
        let leader = self.leader();
        let room = self.room();
        let Role::Leader(l) = &mut self.role else {
            return Err(ProposeError::NotLeader { leader });
        };
        if let Some(slot) = l.exhausted {
            return Err(ProposeError::Exhausted { slot });
        }
        if l.pending.len() >= MAX_PENDING {
            return Err(ProposeError::Busy(l.pending.len()));
        }
        let queued = (l.pending.len() + l.in_flight_values()) as u64;
        if self.next_apply + queued >= room {
            return Err(ProposeError::LogFull);
        }
        let id = self.api.next_id;
        self.api.next_id += 1;
        let value = Value {
            bytes,
            config: false,
            origin: origin(self.me, id),
        };
        let idle = queued == 0;
        l.pending.push_back(Proposal { id, value, open });
        self.work_arrives(idle);
        Ok(id)
    }

    /// Submits one command (the leader only): it joins the batch entry waiting for a
    /// slot at the back of the leader's queue if it fits there, else starts a new one
    /// ([`crate::batch`]'s format: a tag byte, then each command's length and bytes). So
    /// while the pipeline is busy, commands gather into entries of up to
    /// [`crate::log::LogConfig::max_value_bytes`], and many outstanding commands cost a
    /// few slots, not one each. Returns where it went: the proposal, which
    /// [`Replica::take_results`] reports like any, and its place in the entry. A batch
    /// stops taking commands once a slot holds it (rule (closed batch)). The entry is
    /// committed as a whole; [`crate::batch::decode`] gives its commands in order.
    pub fn submit(&mut self, command: &[u8]) -> Result<Submitted, ProposeError> {
        if self.api.shutting_down {
            return Err(ProposeError::ShuttingDown);
        }
        let max = self.config.max_value_bytes as usize;
        // Alone in an entry: the tag, its length, itself.
        if 1 + batch::framed_len(command.len()) > max {
            return Err(ProposeError::ValueTooLarge {
                len: command.len(),
                max: batch::max_command_bytes(max).unwrap_or(0),
            });
        }
        // The open batch at the back takes it if it fits: the command shares that
        // proposal's fate, as if submitted when the batch was opened (so Ω need not be
        // asked again; a leader that steps down reports the batch deposed).
        if let Role::Leader(l) = &mut self.role
            && l.exhausted.is_none()
            && let Some(Proposal {
                id,
                value,
                open: Some(n),
            }) = l.pending.back_mut()
            && value.bytes.len() + batch::framed_len(command.len()) <= max
        {
            batch::push_frame(&mut value.bytes, command);
            let index = *n;
            *n += 1;
            // Postcondition: the entry still fits a slot's value.
            debug_assert!(value.bytes.len() <= max, "a batch fits its value");
            return Ok(Submitted {
                proposal: *id,
                index,
            });
        }
        let mut bytes = Vec::with_capacity(max);
        bytes.push(batch::BATCH_TAG);
        batch::push_frame(&mut bytes, command);
        let proposal = self.enqueue(bytes, Some(1))?;
        Ok(Submitted { proposal, index: 0 })
    }

    /// Proposals this leader holds that no slot has decided yet: those waiting for a slot
    /// and those in one (0 while it does not lead). A client that keeps the pipeline
    /// full proposes while this is below [`crate::log::LogConfig::pipeline`].
    pub fn proposals_waiting(&self) -> usize {
        match &self.role {
            Role::Leader(l) => l.pending.len() + l.in_flight_values(),
            _ => 0,
        }
    }

    /// Proposes a membership change (the leader only): from the next configuration on,
    /// `members` vote. It takes effect `pipeline` slots after the slot that decides it
    /// ([`crate::log::membership`]); [`Replica::take_results`] reports that slot. Refused
    /// unless it adds or removes exactly one replica of the log's, and while another
    /// change is proposed or decided and not yet in effect.
    pub fn propose_members(&mut self, members: Members) -> Result<u64, ProposeError> {
        if self.api.shutting_down {
            return Err(ProposeError::ShuttingDown);
        }
        let all = Members::all(self.config.replicas);
        if members.0 & !all.0 != 0 {
            return Err(ProposeError::BadMembership(format!(
                "members {:#x} name a replica outside the log's {}",
                members.0, self.config.replicas
            )));
        }
        let latest = self.membership.latest();
        if !latest.one_change_to(members) {
            return Err(ProposeError::BadMembership(format!(
                "from {:#x} to {:#x}: one replica added or removed at a time, one left",
                latest.0, members.0
            )));
        }
        let added = Members(members.0 & !latest.0);
        if let Some(r) = added.iter().find(|&r| self.membership.was_removed(r)) {
            return Err(ProposeError::BadMembership(format!(
                "replica {r} was removed at incarnation {}: it comes back only as a new \
                 process in its place, through the join path (rule (retire))",
                self.membership.incarnation(r)
            )));
        }
        self.follow_omega();
        let leader = self.leader();
        let pending_after = self.membership.pending_after(self.next_apply);
        let Role::Leader(l) = &mut self.role else {
            return Err(ProposeError::NotLeader { leader });
        };
        let queued = l.pending.iter().any(|p| p.value.config) || l.config_in_window();
        if pending_after || queued {
            return Err(ProposeError::ChangePending);
        }
        if l.pending.len() >= MAX_PENDING {
            return Err(ProposeError::Busy(l.pending.len()));
        }
        let bytes = self.membership.proposal(members).to_entry();
        if bytes.len() > self.config.max_value_bytes as usize {
            return Err(ProposeError::BadMembership(format!(
                "a configuration entry of {} bytes is larger than the log's values",
                bytes.len()
            )));
        }
        let id = self.api.next_id;
        self.api.next_id += 1;
        let value = Value {
            bytes,
            config: true,
            origin: origin(self.me, id),
        };
        let idle = l.pending.is_empty() && l.in_flight_values() == 0;
        l.pending.push_back(Proposal {
            id,
            value,
            open: None,
        });
        self.work_arrives(idle);
        Ok(id)
    }

    /// Entries applied since the last call, in order: `(slot, value)` (a no-op is empty).
    /// Entries below the point of a snapshot installed meanwhile are left out: call
    /// [`Replica::take_installed`] first and restore from what it gives.
    pub fn take_committed(&mut self) -> Vec<(u64, Vec<u8>)> {
        self.drain_committed().collect()
    }

    /// [`Replica::take_committed`] as a draining iterator: the room of the replica's
    /// vector is kept, so that taking the entries of every step allocates nothing.
    pub fn drain_committed(&mut self) -> impl Iterator<Item = (u64, Vec<u8>)> + '_ {
        self.applied_at.clear();
        let floor = self.installs.last().copied().unwrap_or(0);
        self.applied
            .drain(..)
            .filter(move |&(slot, _)| slot >= floor)
    }

    /// [`Replica::take_results`] as a draining iterator (no allocation).
    pub fn drain_results(&mut self) -> impl Iterator<Item = (u64, Result<u64, ProposeError>)> + '_ {
        self.api.results.drain(..)
    }

    /// Outcomes of proposals since the last call: `(id, Ok(slot))` or why it was lost.
    pub fn take_results(&mut self) -> Vec<(u64, Result<u64, ProposeError>)> {
        std::mem::take(&mut self.api.results)
    }

    /// Asks for a linearizable read from the leader's lease ([`crate::log::lease`]): its
    /// id. At the next turn [`Replica::take_reads`] answers it with the index the read
    /// must see — once every entry below it is applied, the state machine's state answers
    /// the read — or why it cannot be served locally (then read through the log: propose
    /// a marker entry and read once it is applied).
    pub fn read(&mut self) -> u64 {
        let id = self.api.next_id;
        self.api.next_id += 1;
        self.leasing.read_requests.push(id);
        id
    }

    /// Answers to [`Replica::read`] since the last call: `(id, index or why not)`.
    pub fn take_reads(&mut self) -> Vec<(u64, Result<u64, ReadError>)> {
        std::mem::take(&mut self.leasing.read_results)
    }

    /// Reports [`Event`](crate::log::Event)s from now on, for [`Replica::take_events`]
    /// (off by default: a run that never takes them keeps nothing).
    pub fn report_events(&mut self) {
        self.api.events.get_or_insert_with(Vec::new);
    }

    /// The events since the last call, in order (none unless
    /// [`Replica::report_events`] was called).
    pub fn take_events(&mut self) -> Vec<crate::log::Event> {
        self.api
            .events
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Keeps [`Replica::acknowledged`] from now on (a history for checkers; off by
    /// default, since it grows by an entry per decision and an embedding never reads it).
    pub fn keep_acknowledged(&mut self) {
        self.keeping_acknowledged = true;
    }

    /// Stops the replica: it finishes at its next step; proposals are refused.
    pub fn shutdown(&mut self) {
        self.api.shutting_down = true;
    }
}
