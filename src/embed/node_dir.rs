//! A [`Node`](super::Node)'s own directory ([`Config::durable`]): `DIR/replica-i`, its
//! disk thread, and its peers' disks seen through their durable words ([`PeerPoints`]).
//!
//! A process that starts with the cluster needs an empty directory; one that joins the
//! running cluster in a crashed replica's place ([`Start::Join`]) goes on from what its
//! directory holds — its disk thread writes after it, and it resumes at the newest
//! snapshot there, reading only the log after it (`Replica::resume_at`). The directory
//! keeps an `owner` file naming the cluster and the replica: a directory of another
//! cluster or replica is refused.

use super::config::{Backend, Config, Start};
use super::driver::Driver;
use super::error::StartError;
use super::peer_points::PeerPoints;
use super::persist::{DiskWatch, Persist};
use super::recovery::{ReplicaDisk, Resume, read_dir};
use super::shown::Shown;
use super::state_machine::StateMachine;
use std::fs;
use std::path::Path;
use std::sync::Arc;

/// A durable node's disk: who waits for durable points, and what its directory held.
pub(crate) struct NodeDisk {
    pub(crate) watch: Arc<DiskWatch>,
    pub(crate) found: ReplicaDisk,
}

fn error(why: String) -> StartError {
    StartError::Recovery(why)
}

/// What the `owner` file of replica `me`'s directory says.
fn owner(config: &Config, me: u16) -> String {
    let cluster = match &config.backend {
        Backend::Verbs(v) => v.cluster.cluster_id.clone(),
        _ => "(in-process)".into(),
    };
    format!("velos log of cluster {cluster:?}, replica {me}\n")
}

/// Writes the `owner` file if it is missing, else checks it.
fn own(dir: &Path, owner: &str) -> Result<(), StartError> {
    let path = dir.join("owner");
    match fs::read_to_string(&path) {
        Ok(found) if found == owner => Ok(()),
        Ok(found) => Err(error(format!(
            "{} belongs to another log: {} (this process runs the {})",
            dir.display(),
            found.trim(),
            owner.trim().trim_start_matches("velos ")
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            fs::write(&path, owner).map_err(|e| error(format!("{}: {e}", path.display())))
        }
        Err(e) => Err(error(format!("{}: {e}", path.display()))),
    }
}

/// Opens replica `me`'s directory for a node ([`Config::durable`]): its disk thread
/// started on `driver`, its durable word and its peers' seen through `shown`; where the
/// replica resumes (a process joining with a snapshot on its disk).
pub(crate) fn open<S: StateMachine>(
    config: &Config,
    me: u16,
    driver: &mut Driver<S>,
    shown: &Arc<[Arc<Shown>]>,
) -> Result<(NodeDisk, Option<Resume>), StartError> {
    let dir = config.replica_dir(me).expect("durability is on");
    let joining =
        matches!(&config.backend, Backend::Verbs(v) if matches!(v.start, Start::Join { .. }));
    let found = read_dir(&dir)?.unwrap_or_default();
    let holds = found.next_slot > 0 || found.snapshot.is_some();
    if holds && !joining {
        return Err(error(format!(
            "{} holds a log (to slot {}): a process that starts with the cluster needs an \
             empty directory; one that restarts into the running cluster joins it \
             (Start::Join) and goes on from its directory",
            dir.display(),
            found.next_slot
        )));
    }
    fs::create_dir_all(&dir).map_err(|e| error(format!("{}: {e}", dir.display())))?;
    own(&dir, &owner(config, me))?;
    for cut in &found.cuts {
        tracing::warn!(replica = me, cut = %cut, "the disk's log was cut");
    }
    let resume = found
        .snapshot
        .as_ref()
        .filter(|(point, _)| *point > 0)
        .map(|(point, bytes)| (*point, bytes.clone()));
    let report = ReplicaDisk {
        found: holds,
        snapshot: found.snapshot.as_ref().map(|s| s.0),
        next_slot: found.next_slot,
        cuts: found.cuts.clone(),
    };
    let watch = Arc::new(DiskWatch::new(config.group_commit));
    let mine = Arc::clone(&shown[usize::from(me)]);
    let persist = Persist::start(me, dir, (&found, None), mine, Arc::clone(&watch))
        .map_err(|e| StartError::Backend(format!("spawning the disk thread: {e}")))?;
    driver.persist_on(Some(persist), 0);
    let shape = config.log.shape();
    driver.see_peers_by(PeerPoints::new(
        me,
        shape,
        Arc::clone(shown),
        Arc::clone(&watch),
    ));
    Ok((
        NodeDisk {
            watch,
            found: report,
        },
        resume,
    ))
}
