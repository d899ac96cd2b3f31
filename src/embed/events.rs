//! The engine's events ([`crate::core::log::Event`]) as `tracing` events: what a replica
//! did at its edges — a term begun or ended, an aborted attempt (at `DEBUG`: a failover's
//! first attempts abort by design), a repair, a freeze, a snapshot published (`DEBUG`:
//! periodic) or copied, a copy given up, a configuration in effect. Nothing here runs per
//! decision: the engine reports none on a stable leader's path.

use crate::core::log::Event;
use crate::core::log::event::AfterAbort;

/// Emits `event` of replica `me` as a `tracing` event.
pub(crate) fn trace(me: u16, event: &Event) {
    match *event {
        Event::Leading { term, from } => {
            tracing::info!(replica = me, term, from_slot = from, "term begins")
        }
        Event::SteppedDown {
            term,
            undecided,
            overtaken,
        } => tracing::info!(
            replica = me,
            term,
            undecided,
            overtaken,
            "term ends: proposals not decided are of unknown outcome"
        ),
        Event::Aborted {
            slot,
            attempt,
            cause,
            then,
        } => {
            let (then, ballot) = match then {
                AfterAbort::Retried { ballot } => ("retried", Some(ballot)),
                AfterAbort::Deferred => ("deferred: a queue pair is congested", None),
                AfterAbort::GaveUp => ("given up to the leader", None),
            };
            tracing::debug!(
                replica = me,
                slot,
                attempt,
                ?cause,
                then,
                ballot,
                "attempt aborted"
            )
        }
        Event::Repairing { slot, term } => tracing::info!(
            replica = me,
            slot,
            term,
            "repairs a slot accepted but not decided for a failure timeout"
        ),
        Event::Frozen { slot, epoch } => tracing::warn!(
            replica = me,
            slot,
            epoch,
            "slot ran out of proposal numbers in its epoch: frozen, continues in the next"
        ),
        Event::SnapshotPublished { point, bytes } => {
            tracing::debug!(replica = me, point, bytes, "snapshot published")
        }
        Event::SnapshotInstalled {
            point,
            source,
            bytes,
        } => tracing::info!(
            replica = me,
            point,
            source,
            bytes,
            "fell behind the ring: installed a peer's snapshot"
        ),
        Event::CopyAbandoned { source } => tracing::warn!(
            replica = me,
            source,
            "snapshot copy given up: its source stayed suspected"
        ),
        Event::BulkAbandoned { source } => tracing::warn!(
            replica = me,
            source,
            "bulk catch-up's value reads given up: their source stayed suspected or was replaced"
        ),
        Event::MembersChanged { slot, members } => tracing::info!(
            replica = me,
            from_slot = slot,
            members = %members,
            "configuration decided"
        ),
        Event::ChangeVoid { slot, members } => tracing::warn!(
            replica = me,
            slot,
            members = %members,
            "configuration entry void: not one change from the configuration before it"
        ),
        Event::Disconnected { peer, incarnation } => tracing::info!(
            replica = me,
            peer,
            incarnation,
            "removed member cut off: its queue pairs with this replica are closed"
        ),
        Event::Removed { slot } => tracing::warn!(
            replica = me,
            from_slot = slot,
            "removed from the configuration: cut off from every peer, stopping"
        ),
        _ => tracing::debug!(replica = me, ?event, "engine event"),
    }
}
