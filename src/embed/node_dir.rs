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
use super::node_recovery::{Agreement, Recovering};
use super::peer_points::PeerPoints;
use super::persist::{DiskWatch, Persist};
use super::recovery::{ReplicaDisk, Resume, read_dir, rebuild, resume};
use super::shown::Shown;
use super::state_machine::StateMachine;
use std::fs;
use std::path::Path;
use std::sync::Arc;
use velos_core::log::Replica;

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

/// How a durable node's replica begins, as its directory says (consumed by the verbs
/// backend, and by the tests on the in-process fabric).
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
pub(crate) enum Begin {
    /// On an empty directory (with the cluster).
    Fresh,
    /// Joining the running cluster: at the newest snapshot its disk kept, if any.
    Join(Option<Resume>),
    /// After a power loss of every replica: once the processes agreed.
    Recover(Box<Recovering>),
}

impl Begin {
    /// The replica begins on its disk, once connected (`replica` fresh or joining, a
    /// recovery's `agreed` computed): a joiner resumes at its disk's snapshot
    /// (`recovery::resume`), a recovering replica restarts as the agreement says
    /// ([`Recovering::start`]).
    #[cfg_attr(not(feature = "verbs"), allow(dead_code))]
    pub(crate) fn start<S: StateMachine>(
        self,
        agreed: Option<Agreement>,
        driver: &mut Driver<S>,
        replica: &mut Replica,
    ) -> Result<(), String> {
        match (self, agreed) {
            (Begin::Fresh | Begin::Join(None), _) => Ok(()),
            (Begin::Join(Some((point, bytes))), _) => {
                // A joining process with a snapshot on its disk reads only the log after it.
                resume(replica, driver, point, &bytes);
                Ok(())
            }
            (Begin::Recover(r), Some(agreement)) => r.start(&agreement, driver, replica),
            (Begin::Recover(_), None) => unreachable!("a recovery agrees before it starts"),
        }
    }
}

/// Opens replica `me`'s directory for a node ([`Config::durable`]) that begins as
/// `start` says: its disk thread started (on `driver`, or in the [`Begin::Recover`]
/// until the processes agree), its service rebuilt from the directory for a recovery,
/// its durable word and its peers' seen through `shown`.
pub(crate) fn open<S: StateMachine>(
    config: &Config,
    (me, start): (u16, Start),
    driver: &mut Driver<S>,
    shown: &Arc<[Arc<Shown>]>,
) -> Result<(NodeDisk, Begin), StartError> {
    let dir = config.replica_dir(me).expect("durability is on");
    let there = dir.exists();
    let found = read_dir(&dir)?.unwrap_or_default();
    let holds = found.next_slot > 0 || found.snapshot.is_some();
    if holds && start == Start::WithCluster {
        return Err(error(format!(
            "{} holds a log (to slot {}): a process that starts with the cluster needs an \
             empty directory; one that restarts into the running cluster joins it \
             (Start::Join), and after a power loss of every replica each restarts with \
             Start::Recover",
            dir.display(),
            found.next_slot
        )));
    }
    fs::create_dir_all(&dir).map_err(|e| error(format!("{}: {e}", dir.display())))?;
    own(&dir, &owner(config, me))?;
    for cut in &found.cuts {
        tracing::warn!(replica = me, cut = %cut, "the disk's log was cut");
    }
    let report = ReplicaDisk {
        found: there,
        snapshot: found.snapshot.as_ref().map(|s| s.0),
        next_slot: found.next_slot,
        cuts: found.cuts.clone(),
    };
    let watch = Arc::new(DiskWatch::new(config.group_commit));
    let mine = Arc::clone(&shown[usize::from(me)]);
    // At a recovery, a log without its start (its snapshot damaged) cannot rebuild the
    // state, and its entries may run past where the cluster goes on, slots decided anew:
    // it is given up (the replica copies the state).
    let discarded = (start == Start::Recover && !found.has_start()).then(|| found.discarded());
    let kept = discarded.as_ref().unwrap_or(&found);
    let persist = Persist::start(me, dir, (kept, None), mine, Arc::clone(&watch))
        .map_err(|e| StartError::Backend(format!("spawning the disk thread: {e}")))?;
    let begin = match start {
        Start::WithCluster => {
            driver.persist_on(Some(persist), 0);
            Begin::Fresh
        }
        Start::Join { .. } => {
            driver.persist_on(Some(persist), 0);
            let resume = found
                .snapshot
                .as_ref()
                .filter(|(point, _)| *point > 0)
                .map(|(point, bytes)| (*point, bytes.clone()));
            Begin::Join(resume)
        }
        Start::Recover => {
            if found.has_start() {
                rebuild(driver, &found, config.log.replicas)?;
            } else {
                tracing::warn!(replica = me, "the disk holds no valid start: it copies");
            }
            let replicas = config.log.replicas;
            let recovering = Recovering::new(&found, there, replicas, persist)?;
            Begin::Recover(Box::new(recovering))
        }
    };
    let shape = config.log.shape();
    driver.see_peers_by(PeerPoints::new(
        me,
        shape,
        Arc::clone(shown),
        Arc::clone(&watch),
    ));
    let disk = NodeDisk {
        watch,
        found: report,
    };
    Ok((disk, begin))
}
