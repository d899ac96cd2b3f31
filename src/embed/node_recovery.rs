//! A whole-cluster restart of [`Node`](super::Node)s from their disks
//! ([`Start::Recover`](super::Start::Recover), `velos node --recover`): after a power loss
//! of every replica, each process reads its own directory back, rebuilds its service
//! from it, and tells the others what it holds ([`Summary`]: how far its log goes, the
//! fingerprint of its last entry, its members). Every process computes the same
//! [`Agreement`] from the same summaries: the longest log any of them recovered (the
//! lowest replica among equals), which a majority of its members' directories must
//! attest. The engine starts afresh on blank memory at that log's end, its numbering
//! going on (`Replica::restart_recovered`): a process whose disk holds the whole log
//! resumes there with its service; one whose disk holds less copies a peer's snapshot
//! first (rule (recovered behind)). Only decided entries are persisted, so every
//! log read back is a prefix of the decided log (a process whose log disagrees with a
//! shorter one's last entry refuses to start); every entry a majority held on disk is in
//! the longest (`paper-notes/durability.md`).

use super::driver::Driver;
use super::error::StartError;
use super::persist::Persist;
use super::recovery::{majority_there, members_of};
use super::state_machine::StateMachine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use velos_core::log::Replica;
use velos_core::log::membership::Members;
use velos_store::recover::{Entry, Recovered};

/// What one process's directory held, as it tells the others.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Summary {
    /// Whether the directory was there (an absent one counts for no majority).
    pub(crate) found: bool,
    /// The slot after its last entry (0: none).
    pub(crate) next_slot: u64,
    /// Its last entry's slot and fingerprint.
    pub(crate) last: Option<(u64, u64)>,
    /// The members of the last configuration its log recorded.
    pub(crate) members: Option<u64>,
    /// Its log holds entries but no valid start (its snapshot damaged, the segments
    /// below it deleted): it counts as empty, and its state must come from another.
    #[serde(default)]
    pub(crate) startless: bool,
}

/// What every process computes alike from the summaries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Agreement {
    /// The longest log's next slot (0: nothing to recover, a fresh start).
    pub(crate) end: u64,
    /// The process whose log that is.
    pub(crate) source: u16,
    /// The members it recorded, if it recorded any.
    pub(crate) members: Option<Members>,
}

/// An entry's fingerprint: its kind and bytes, hashed.
fn fingerprint(e: &Entry) -> u64 {
    let mut h = Sha256::new();
    h.update([u8::from(
        e.kind == velos_store::segment::Kind::Configuration,
    )]);
    h.update(e.bytes());
    let d = h.finalize();
    u64::from_le_bytes(d[..8].try_into().expect("8 bytes of 32"))
}

/// The agreement of `summaries` (one per replica of the file): the longest log, attested
/// by a majority of its members' directories (`configured` if it recorded none).
pub(crate) fn agree(
    summaries: &BTreeMap<u16, Summary>,
    configured: Members,
) -> Result<Agreement, String> {
    let (&source, longest) = summaries
        .iter()
        .max_by_key(|(r, s)| (s.next_slot, std::cmp::Reverse(**r)))
        .ok_or("no summary")?;
    let members = longest.members.map(Members);
    let voters = members.unwrap_or(configured);
    majority_there(voters, |r| summaries.get(&r).is_some_and(|s| s.found))?;
    if longest.next_slot == 0
        && let Some((r, _)) = summaries.iter().find(|(_, s)| s.startless)
    {
        return Err(format!(
            "replica {r}'s directory holds entries but no valid start (its snapshot \
             damaged) and no directory holds one: the state below them is gone"
        ));
    }
    let agreement = Agreement {
        end: longest.next_slot,
        source,
        members,
    };
    assert!(
        summaries.values().all(|s| s.next_slot <= agreement.end),
        "the longest log"
    );
    Ok(agreement)
}

/// A durable node restarting with the cluster from its directory: its service rebuilt
/// from its own log, waiting for the others' summaries.
pub(crate) struct Recovering {
    pub(crate) summary: Summary,
    /// Its entries, consecutive (the prefix check fingerprints the few it needs; the
    /// bytes are the recovery's buffers, shared).
    entries: Vec<Entry>,
    /// Its disk thread, going on from what the directory holds.
    persist: Persist,
}

impl Recovering {
    /// `own`, a directory read back (`found`: it was there) for a log of `replicas`, with
    /// `persist` going on from it.
    pub(crate) fn new(
        own: &Recovered,
        found: bool,
        replicas: u16,
        persist: Persist,
    ) -> Result<Recovering, StartError> {
        let startless = !own.has_start();
        let entries = if startless {
            Vec::new()
        } else {
            own.entries.clone()
        };
        let last = entries.last().map(|e| (e.slot, fingerprint(e)));
        let members = members_of(own, replicas)?.map(|m| m.0);
        Ok(Recovering {
            summary: Summary {
                found,
                next_slot: if startless { 0 } else { own.next_slot },
                last,
                members,
                startless,
            },
            entries,
            persist,
        })
    }

    /// Checks the peers' summaries against this log: where a peer's last entry is in it,
    /// they are the same entry (only decided entries are persisted, so they are, unless
    /// the directories belong to different logs).
    pub(crate) fn check(&self, me: u16, summaries: &BTreeMap<u16, Summary>) -> Result<(), String> {
        for (&peer, s) in summaries.iter().filter(|&(&p, _)| p != me) {
            let Some((slot, print)) = s.last else {
                continue;
            };
            let first = self.entries.first().map_or(u64::MAX, |e| e.slot);
            let mine = slot
                .checked_sub(first)
                .and_then(|i| self.entries.get(usize::try_from(i).ok()?));
            assert!(mine.is_none_or(|e| e.slot == slot), "consecutive entries");
            if let Some(mine) = mine
                && fingerprint(mine) != print
            {
                return Err(format!(
                    "replica {peer}'s directory and this one disagree at slot {slot}: \
                     directories of different logs?"
                ));
            }
        }
        Ok(())
    }

    /// Tells the other processes of `cluster` this summary on `listener` (node `me`'s
    /// rendezvous, after the connection), hears theirs, checks them against this log and
    /// computes the agreement; `log` takes the agreed members.
    pub(crate) fn agree_over(
        &self,
        listener: &std::net::TcpListener,
        cluster: &crate::cluster_file::ClusterFile,
        (me, log): (u16, &mut velos_core::log::LogConfig),
        timeout: std::time::Duration,
    ) -> Result<Agreement, String> {
        let mine = serde_json::to_vec(&self.summary).expect("a summary serializes");
        let heard =
            crate::rendezvous::exchange_on(listener, cluster, me, |_| mine.clone(), timeout)
                .map_err(|e| format!("the recovery's exchange: {e}"))?;
        let mut summaries = BTreeMap::new();
        for (peer, bytes) in heard {
            let s: Summary = serde_json::from_slice(&bytes)
                .map_err(|e| format!("replica {peer}'s recovery summary: {e}"))?;
            summaries.insert(peer, s);
        }
        summaries.insert(me, self.summary.clone());
        self.agree_on(me, &summaries, log)
    }

    /// The agreement of every process's summary (this one's included): checked against
    /// this log; `log` takes the agreed members.
    pub(crate) fn agree_on(
        &self,
        me: u16,
        summaries: &BTreeMap<u16, Summary>,
        log: &mut velos_core::log::LogConfig,
    ) -> Result<Agreement, String> {
        assert_eq!(summaries.get(&me), Some(&self.summary), "mine among them");
        self.check(me, summaries)?;
        let agreement = agree(summaries, log.members)?;
        if let Some(members) = agreement.members {
            log.members = members;
            log.validate()?;
        }
        Ok(agreement)
    }

    /// Starts replica `me` as `agreement` says: its disk thread on `driver`, and `replica`
    /// (fresh, the agreed members) resumed at the log's end with the service rebuilt here
    /// if this disk holds the whole log, else behind until it copies a peer's snapshot.
    pub(crate) fn start<S: StateMachine>(
        self,
        agreement: &Agreement,
        driver: &mut Driver<S>,
        replica: &mut Replica,
    ) -> Result<(), String> {
        let me = replica.id();
        driver.persist_on(Some(self.persist), 0);
        if agreement.end == 0 {
            return Ok(()); // nothing was written anywhere: a fresh start
        }
        let whole = self.summary.next_slot == agreement.end;
        let service = whole.then(|| driver.service_snapshot());
        replica.restart_recovered(agreement.end, service.as_deref())?;
        if whole {
            driver.recovered_at(agreement.end);
        }
        tracing::info!(
            replica = me,
            end = agreement.end,
            source = agreement.source,
            whole,
            "restarted from the recovered log"
        );
        let at = if whole { agreement.end } else { 0 };
        assert_eq!(replica.next_apply(), at, "rule (recovered behind)");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(found: bool, next_slot: u64, members: Option<u64>) -> Summary {
        Summary {
            found,
            next_slot,
            last: next_slot.checked_sub(1).map(|s| (s, s * 7)),
            members,
            startless: false,
        }
    }

    #[test]
    fn the_longest_log_is_agreed_on_with_a_majority_of_its_members_there() {
        let all = Members(0b111);
        let s = BTreeMap::from([
            (0, summary(true, 5, None)),
            (1, summary(true, 9, None)),
            (2, summary(true, 9, None)),
        ]);
        let a = agree(&s, all).expect("agreed");
        assert_eq!(
            (a.end, a.source, a.members),
            (9, 1, None),
            "the lowest of the longest"
        );
        // The members the longest log recorded count, not the configured ones.
        let s = BTreeMap::from([
            (0, summary(true, 5, None)),
            (1, summary(false, 0, None)),
            (2, summary(false, 9, Some(0b110))),
        ]);
        let e = agree(&s, all).expect_err("one of {1, 2} there");
        assert!(e.contains("a majority (2)"), "{e}");
        let s = BTreeMap::from([
            (0, summary(false, 0, None)),
            (1, summary(true, 0, None)),
            (2, summary(true, 0, None)),
        ]);
        assert_eq!(agree(&s, all).map(|a| a.end), Ok(0), "nothing to recover");
        let mut lost = s.clone();
        lost.get_mut(&2).expect("there").startless = true;
        let e = agree(&lost, all).expect_err("entries without a start");
        assert!(e.contains("replica 2") && e.contains("gone"), "{e}");
    }

    #[test]
    fn a_log_that_holds_a_peers_last_slot_with_another_entry_refuses() {
        use velos_store::segment::Kind;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let shown = std::sync::Arc::new(super::super::shown::Shown::default());
        let watch = std::sync::Arc::new(super::super::persist::DiskWatch::default());
        let empty = Recovered::default();
        let persist = Persist::start(0, dir.path().to_path_buf(), (&empty, None), shown, watch)
            .expect("a disk thread");
        let entry = |slot: u64, b: u8| Entry::new(slot, Kind::Service, vec![b; 4]);
        let own = Recovered {
            entries: (0..4).map(|s| entry(s, s as u8)).collect(),
            next_slot: 4,
            ..Recovered::default()
        };
        let r = Recovering::new(&own, true, 3, persist).expect("read");
        assert_eq!(r.summary.next_slot, 4);
        let peer = |last: Option<(u64, u64)>| {
            BTreeMap::from([
                (0, r.summary.clone()),
                (
                    1,
                    Summary {
                        found: true,
                        next_slot: 3,
                        last,
                        members: None,
                        startless: false,
                    },
                ),
            ])
        };
        assert_eq!(
            r.check(0, &peer(Some((2, fingerprint(&entry(2, 2)))))),
            Ok(())
        );
        assert_eq!(r.check(0, &peer(None)), Ok(()), "an empty directory");
        let e = r
            .check(0, &peer(Some((2, fingerprint(&entry(2, 9))))))
            .expect_err("differs");
        assert!(e.contains("replica 1") && e.contains("slot 2"), "{e}");
        // A slot past this log is the longer one's to check.
        assert_eq!(r.check(0, &peer(Some((7, 1)))), Ok(()));
    }
}
