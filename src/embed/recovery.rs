//! Starting a cluster on its replicas' directories ([`Config::durable`]): fresh ones
//! ([`super::Cluster::start`]) or the ones a power loss left ([`super::Cluster::recover`]).
//!
//! A recovery reads every replica's directory (`velos_store::recover`: the newest valid
//! snapshot, then the log's consecutive entries, a torn or corrupt tail cut and
//! reported), needs a majority of the recovered configuration's members, and resumes from
//! the longest log among them: only decided entries are persisted, so every log read is a
//! prefix of the one decided log (checked: two directories that disagree on a slot are
//! refused), and every entry a majority held on disk is in the longest
//! (`paper-notes/durability.md`). Every state machine is rebuilt from that log, every
//! replica's disk is brought up to it (the entries it lacks appended, or the snapshot
//! written when they are gone), and the engine starts afresh on blank memory with its
//! slot 0 standing for the log's next slot: no acceptor word, promise or vote survives the
//! restart (rule (no amnesia) holds trivially).

use super::config::Config;
use super::driver::Driver;
use super::error::StartError;
use super::persist::{DiskWatch, Persist};
use super::shown::Shown;
use super::state_machine::StateMachine;
use std::fs;
use std::path::Path;
use std::sync::Arc;
use velos_core::log::Replica;
use velos_core::log::membership::{Members, Membership};
use velos_store::merge::merge;
use velos_store::recover::{Recovered, recover_owned};
use velos_store::segment::Kind;

/// What a recovery found ([`super::Cluster::recovery`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// The log's next slot: every slot below it came back; new commands go from here.
    pub next_slot: u64,
    /// The replica whose log was the longest (the one the others were brought up to).
    pub source: Option<u16>,
    /// What each replica's directory held.
    pub replicas: Vec<ReplicaDisk>,
}

/// A durable cluster's disks: where the engine's slot 0 stands in the log, who waits
/// for durable points, and what the start found.
pub(crate) struct ClusterDisk {
    pub(crate) base: u64,
    pub(crate) watch: Arc<DiskWatch>,
    pub(crate) report: Recovery,
}

/// What one replica's directory held at a recovery.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaDisk {
    /// Whether the directory existed (a replica whose disk is gone counts as absent).
    pub found: bool,
    /// The point of the newest valid snapshot, if one was there.
    pub snapshot: Option<u64>,
    /// The slot after the last entry read back (0: none).
    pub next_slot: u64,
    /// What was cut or passed over (a torn or corrupt tail, a stale file), and why.
    pub cuts: Vec<String>,
}

/// The directories read, and what the cluster starts from.
pub(crate) struct Disks {
    /// The log's slot of the engine's slot 0.
    pub(crate) base: u64,
    /// The configuration's members the log recovered, if it recorded one.
    pub(crate) members: Option<Members>,
    /// The longest log (the state machines are rebuilt from it).
    pub(crate) source: Recovered,
    /// What each replica's own directory held (its writer goes on from there).
    pub(crate) own: Vec<Recovered>,
    pub(crate) report: Recovery,
}

fn error(why: String) -> StartError {
    StartError::Recovery(why)
}

/// Reads one directory: `None` if it does not exist.
pub(crate) fn read_dir(dir: &Path) -> Result<Option<Recovered>, StartError> {
    if !dir.exists() {
        return Ok(None);
    }
    let files = crate::disk::read(dir).map_err(|e| error(format!("{}: {e}", dir.display())))?;
    Ok(Some(recover_owned(files)))
}

/// The directories of a fresh start: created, and refused if one holds a log already
/// (start such a cluster with [`super::Cluster::recover`]).
pub(crate) fn fresh(config: &Config) -> Result<Disks, StartError> {
    let mut own = Vec::new();
    for r in 0..config.log.replicas {
        let dir = config.replica_dir(r).expect("durability is on");
        if let Some(found) = read_dir(&dir)? {
            if found.next_slot > 0 || found.snapshot.is_some() {
                return Err(error(format!(
                    "{} holds a log (to slot {}): start the cluster with Cluster::recover, or \
                     give it an empty directory",
                    dir.display(),
                    found.next_slot
                )));
            }
        }
        fs::create_dir_all(&dir).map_err(|e| error(format!("{}: {e}", dir.display())))?;
        own.push(Recovered::default());
    }
    let replicas = own
        .iter()
        .map(|_| ReplicaDisk {
            found: true,
            snapshot: None,
            next_slot: 0,
            cuts: Vec::new(),
        })
        .collect();
    Ok(Disks {
        base: 0,
        members: None,
        source: Recovered::default(),
        own,
        report: Recovery {
            next_slot: 0,
            source: None,
            replicas,
        },
    })
}

/// A snapshot as the disk keeps it (`Replica::wrap_snapshot`): the members of the last
/// configuration the log decided below its point, and the replica's snapshot (its session
/// table and state); `None` if the bytes are no such snapshot.
pub(crate) fn unwrap_disk_snapshot(bytes: &[u8], replicas: u16) -> Option<(Members, &[u8])> {
    let (membership, service) = Membership::unwrap_snapshot(bytes, replicas)?;
    Some((membership.latest_configuration().members, service))
}

/// The members the log recovered: its last configuration entry, else its snapshot's.
pub(crate) fn members_of(log: &Recovered, replicas: u16) -> Result<Option<Members>, StartError> {
    let word = |bytes: &[u8], what: &str| -> Result<Members, StartError> {
        let b: [u8; 8] = bytes
            .get(..8)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| error(format!("{what} without its members")))?;
        Ok(Members(u64::from_le_bytes(b)))
    };
    let last = log
        .entries
        .iter()
        .rev()
        .find(|e| e.kind == Kind::Configuration);
    if let Some(e) = last {
        return word(
            e.bytes(),
            &format!("the configuration entry of slot {}", e.slot),
        )
        .map(Some);
    }
    match &log.snapshot {
        Some((point, bytes)) => unwrap_disk_snapshot(bytes, replicas)
            .map(|(members, _)| Some(members))
            .ok_or_else(|| error(format!("the snapshot at {point} without its membership"))),
        None => Ok(None),
    }
}

/// A recovery needs a majority of `voters`' directories (`there(r)`: replica r's is):
/// fewer cannot vouch for every durable entry.
pub(crate) fn majority_there(voters: Members, there: impl Fn(u16) -> bool) -> Result<(), String> {
    let count = voters.iter().filter(|&r| there(r)).count();
    if count < voters.majority() {
        return Err(format!(
            "{count} of the members {voters}'s directories are there; a majority ({}) is \
             needed to recover every durable entry",
            voters.majority()
        ));
    }
    Ok(())
}

/// Reads every replica's directory after a crash or power loss; the state to start from.
pub(crate) fn read(config: &Config) -> Result<Disks, StartError> {
    let mut found = Vec::new();
    for r in 0..config.log.replicas {
        found.push(read_dir(&config.replica_dir(r).expect("durability is on"))?);
    }
    let present: Vec<usize> = (0..found.len()).filter(|&r| found[r].is_some()).collect();
    let logs: Vec<Recovered> = present.iter().filter_map(|&r| found[r].clone()).collect();
    // The replica whose own log reaches furthest (the lowest among equals).
    let Some(&source) = present.iter().max_by_key(|&&r| {
        let reach = found[r].as_ref().map_or(0, |f| f.next_slot);
        (reach, std::cmp::Reverse(r))
    }) else {
        return Err(error(format!(
            "no replica directory under {}",
            config.durable_dir.as_ref().expect("on").display()
        )));
    };
    // Every log read is a prefix of the decided log: where two hold a slot, they agree.
    // Together they hold the log from the newest snapshot some entries continue.
    let log = merge(&logs).map_err(|d| {
        error(format!(
            "replica {}'s directory and replica {}'s disagree at slot {}: directories of \
             different logs?",
            present[d.first], present[d.second], d.slot
        ))
    })?;
    if let Some(f) = logs
        .iter()
        .find(|f| f.next_slot > 0)
        .filter(|_| log.next_slot == 0)
    {
        return Err(error(format!(
            "the directories hold entries up to slot {} but no valid start (every snapshot \
             damaged): the state below them is gone",
            f.next_slot
        )));
    }
    let members = members_of(&log, config.log.replicas)?;
    let voters = members.unwrap_or(config.log.members);
    majority_there(voters, |r| {
        found.get(usize::from(r)).is_some_and(Option::is_some)
    })
    .map_err(error)?;
    let report = Recovery {
        next_slot: log.next_slot,
        source: Some(source as u16),
        replicas: found
            .iter()
            .map(|f| ReplicaDisk {
                found: f.is_some(),
                snapshot: f.as_ref().and_then(|f| f.snapshot.as_ref().map(|s| s.0)),
                next_slot: f.as_ref().map_or(0, |f| f.next_slot),
                cuts: f.as_ref().map_or_else(Vec::new, |f| f.cuts.clone()),
            })
            .collect(),
    };
    for (r, d) in report.replicas.iter().enumerate() {
        for cut in &d.cuts {
            tracing::warn!(replica = r, cut = %cut, "recovery cut the disk's log");
        }
    }
    let mut own = Vec::new();
    for (r, f) in found.into_iter().enumerate() {
        let dir = config.replica_dir(r as u16).expect("on");
        fs::create_dir_all(&dir).map_err(|e| error(format!("{}: {e}", dir.display())))?;
        let f = f.unwrap_or_default();
        if f.next_slot > log.next_slot {
            // `Writer::rejoin` gives it up: one replica's entries past a hole, never durable.
            tracing::warn!(replica = r, "its log past a hole is given up");
        }
        own.push(f);
    }
    tracing::info!(
        next_slot = log.next_slot,
        source,
        "recovered the log from disk"
    );
    Ok(Disks {
        base: log.next_slot,
        members,
        source: log,
        own,
        report,
    })
}

/// Rebuilds `driver`'s service from `log` read back from disk (a log of `replicas`): its
/// snapshot restored, the service entries after it replayed.
pub(crate) fn rebuild<S: StateMachine>(
    driver: &mut Driver<S>,
    log: &Recovered,
    replicas: u16,
) -> Result<(), StartError> {
    if let Some((point, bytes)) = &log.snapshot {
        let (_, service) = unwrap_disk_snapshot(bytes, replicas)
            .ok_or_else(|| error(format!("the snapshot at {point} without its membership")))?;
        driver.restore_from_disk(service).map_err(|why| {
            StartError::Recovery(format!("the snapshot at {point} does not restore: {why}"))
        })?;
    }
    for e in &log.entries {
        if e.kind == Kind::Service {
            driver.replay(e.slot, e.bytes());
        }
    }
    Ok(())
}

/// Rebuilds every driver's state machine from the recovered log, starts each replica's
/// disk thread on its directory (the entries its disk lacks handed first), and sets
/// where the engine's slot 0 stands.
pub(crate) fn open<S: StateMachine>(
    config: &Config,
    drivers: &mut [Driver<S>],
    shown: &Arc<[Arc<Shown>]>,
    disks: Disks,
) -> Result<ClusterDisk, StartError> {
    let watch = Arc::new(DiskWatch::new(config.group_commit));
    let source = &disks.source;
    for (i, driver) in drivers.iter_mut().enumerate() {
        let me = i as u16;
        rebuild(driver, source, config.log.replicas)?;
        let dir = config.replica_dir(me).expect("durability is on");
        let persist = Persist::start(
            me,
            dir,
            (&disks.own[i], Some(source)),
            Arc::clone(&shown[i]),
            Arc::clone(&watch),
        )
        .map_err(|e| StartError::Backend(format!("spawning a disk thread: {e}")))?;
        driver.persist_on(Some(persist), disks.base);
    }
    Ok(ClusterDisk {
        base: disks.base,
        watch,
        report: disks.report,
    })
}

/// Where a replacement resumes from its own disk: the engine's slot of its snapshot's
/// point, and the snapshot as the disk keeps it (`Replica::resume_at`).
pub(crate) type Resume = (u64, Vec<u8>);

/// Opens replica `me`'s directory for the process that takes its place after a crash:
/// its disk thread goes on from what the directory holds (entries the new process applies
/// again are passed over). A directory that cannot be read leaves it running without
/// persisting, and says so. The newest snapshot there, if this cluster's engine took it
/// (past the slot it started at: the membership's slots count from there), is where the
/// new process may resume instead of at the log's start.
pub(crate) fn reopen<S: StateMachine>(
    config: &Config,
    me: u16,
    driver: &mut Driver<S>,
    shown: Arc<Shown>,
    disk: &ClusterDisk,
) -> Option<Resume> {
    let dir = config.replica_dir(me).expect("durability is on");
    let found = crate::disk::read(&dir).map(velos_store::recover::recover_owned);
    let resume = found.as_ref().ok().and_then(|found| {
        let (point, bytes) = found.snapshot.as_ref()?;
        (*point > disk.base).then(|| (point - disk.base, bytes.clone()))
    });
    let started = found.and_then(|found| {
        let watch = Arc::clone(&disk.watch);
        Persist::start(me, dir.clone(), (&found, None), Arc::clone(&shown), watch)
    });
    match started {
        Ok(persist) => driver.persist_on(Some(persist), disk.base),
        Err(e) => {
            tracing::error!(replica = me, error = %e, "the replacement does not persist");
            let why = velos_store::writer::Stopped::Io(format!("{}: {e}", dir.display()));
            *shown.disk_stopped.lock().unwrap_or_else(|e| e.into_inner()) = Some(why);
            driver.persist_on(None, disk.base);
        }
    }
    resume
}

/// A replacement restarting with its disk: the engine resumes at the disk's newest
/// snapshot (`Replica::resume_at`: the tail after it read from the ring, or a peer's
/// snapshot copied if the ring moved past it) and the service is restored from it. A
/// snapshot the engine refuses leaves the process blank (it copies a peer's, as without a
/// disk); one the engine takes but the service cannot restore — its own snapshot, read
/// back intact — is the service's bug, as a copied one that does not restore is.
pub(crate) fn resume<S: StateMachine>(
    replica: &mut Replica,
    driver: &mut Driver<S>,
    point: u64,
    bytes: &[u8],
) {
    let me = replica.id();
    let service = match replica.resume_at(point, bytes) {
        Ok(service) => service,
        Err(why) => {
            tracing::warn!(replica = me, point, why, "not resumed from its disk: blank");
            return;
        }
    };
    driver
        .resume_from_disk(point, service)
        .unwrap_or_else(|e| panic!("replica {me}: its own snapshot does not restore: {e}"));
    tracing::info!(replica = me, point, "resumed from its disk");
    assert_eq!(
        replica.next_apply(),
        point,
        "the engine resumed at the disk's point"
    );
}
