//! A replica's durable log ([`Config::durable`](super::Config::durable)) on a thread of
//! its own: the driver hands it every entry it applies, in log order, and every snapshot
//! it takes; the thread runs `velos-store`'s writer over [`crate::disk`] (the writes and
//! their `fdatasync` batched: what arrives while one batch is on disk goes in the next,
//! behind one sync per file) and shows how far the disk holds the log. Nothing here is on
//! the decision path: the replica's thread only sends on a channel.
//!
//! Group commit ([`Config::group_commit`](super::Config::group_commit)): while nobody
//! waits for durability, a batch starts at least that long after the one before, so
//! that a busy log pays for fewer syncs (each one kernel work competing with the
//! replicas for the cores); a durable wait cuts the pause short (rule (hurried disk)).

use super::shown::Shown;
use crossbeam_channel::{Receiver, Sender, unbounded};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};
use velos_store::recover::Recovered;
use velos_store::segment::Kind;
use velos_store::writer::{Stopped, Writer};

/// Segments roll at this size (64 MiB).
pub(crate) const SEGMENT_BYTES: usize = 64 << 20;

/// Wakes whoever waits for a durable point to move ([`super::Cluster::wait_durable`]);
/// one per cluster, told by every replica's disk thread after each batch. And the other
/// way: the disk threads pausing between batches (group commit) are hurried by a waiter.
#[derive(Debug, Default)]
pub(crate) struct DiskWatch {
    moved: Mutex<u64>,
    cv: Condvar,
    /// Durable waits under way (read without a lock at a `Node`'s every turn); changed
    /// under `hurry_lock`, so that a pausing disk thread misses no wake-up.
    waiters: AtomicUsize,
    hurry_lock: Mutex<()>,
    hurry: Condvar,
    /// The least time from one batch's start to the next's while nobody waits.
    group_commit: Duration,
}

/// A durable wait under way, from [`DiskWatch::want`]: the disk threads do not pause
/// until it ends.
pub(crate) struct Wanting<'a>(&'a DiskWatch);

impl Drop for Wanting<'_> {
    fn drop(&mut self) {
        let _lock = self.0.hurry_lock.lock().unwrap_or_else(|e| e.into_inner());
        let before = self.0.waiters.fetch_sub(1, Ordering::SeqCst);
        assert!(before > 0, "a wait ends once");
    }
}

impl DiskWatch {
    /// The watch of a cluster whose disks pause `group_commit` between batches while
    /// nobody waits.
    pub(crate) fn new(group_commit: Duration) -> DiskWatch {
        DiskWatch {
            group_commit,
            ..DiskWatch::default()
        }
    }

    /// Rule (hurried disk): a durable wait begins; every disk thread pausing between
    /// batches starts its next at once, and none pauses until the wait ends.
    pub(crate) fn want(&self) -> Wanting<'_> {
        let _lock = self.hurry_lock.lock().unwrap_or_else(|e| e.into_inner());
        self.waiters.fetch_add(1, Ordering::SeqCst);
        self.hurry.notify_all();
        Wanting(self)
    }

    /// Whether a durable wait is under way.
    pub(crate) fn wanted(&self) -> bool {
        self.waiters.load(Ordering::SeqCst) > 0
    }

    /// A disk thread's pause before its next batch: until `since + group_commit`, or
    /// until a durable wait is under way (at once if one is).
    fn pause(&self, since: Instant) {
        let deadline = since + self.group_commit;
        let mut lock = self.hurry_lock.lock().unwrap_or_else(|e| e.into_inner());
        while !self.wanted() {
            let now = Instant::now();
            if now >= deadline {
                return;
            }
            lock = self
                .hurry
                .wait_timeout(lock, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// A durable point moved (or a disk stopped).
    pub(crate) fn bump(&self) {
        let mut moved = self.moved.lock().unwrap_or_else(|e| e.into_inner());
        *moved += 1;
        self.cv.notify_all();
    }

    /// Waits until `done()` holds or `timeout` passes; whether it holds.
    pub(crate) fn wait_until(&self, timeout: std::time::Duration, done: impl Fn() -> bool) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut moved = self.moved.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if done() {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            let (guard, _) = self
                .cv
                .wait_timeout(moved, deadline - now)
                .unwrap_or_else(|e| e.into_inner());
            moved = guard;
        }
    }
}

enum Msg {
    /// The entry applied in `slot` (the log's numbering, past the recovered base).
    Append(u64, Kind, Vec<u8>),
    /// A snapshot the replica took at a point (every slot below applied).
    Snapshot(u64, Vec<u8>),
    /// A snapshot the replica copied from a peer: it goes on from its point.
    Installed(u64, Vec<u8>),
    /// Write what was handed, then end.
    Finish,
}

/// The driver's end of a replica's disk thread.
pub(crate) struct Persist {
    tx: Sender<Msg>,
    /// Set by a crash: the thread writes nothing more.
    abandoned: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Persist {
    /// Starts replica `me`'s disk thread on `dir`, going on from what `recovered` found
    /// there (its first batch cuts what the recovery cut and deletes what it passed over)
    /// and, after a whole-cluster power loss, brought up to `source` first
    /// ([`Writer::rejoin`]);
    /// the thread shows its durable point in `shown` and bumps `watch`.
    pub(crate) fn start(
        me: u16,
        dir: PathBuf,
        (recovered, source): (&Recovered, Option<&Recovered>),
        shown: Arc<Shown>,
        watch: Arc<DiskWatch>,
    ) -> std::io::Result<Persist> {
        let writer = match source {
            Some(source) => Writer::rejoin(recovered, source, SEGMENT_BYTES),
            None => Writer::resume(recovered, SEGMENT_BYTES),
        };
        shown.durable.store(writer.durable(), Ordering::SeqCst);
        let (tx, rx) = unbounded();
        let abandoned = Arc::new(AtomicBool::new(false));
        let gone = Arc::clone(&abandoned);
        let thread = thread::Builder::new()
            .name(format!("velos-disk-{me}"))
            .spawn(move || run(me, &dir, writer, &rx, (&shown, &watch, &gone)))?;
        Ok(Persist {
            tx,
            abandoned,
            thread: Some(thread),
        })
    }

    /// The entry applied in `slot`.
    pub(crate) fn append(&self, slot: u64, kind: Kind, bytes: Vec<u8>) {
        let _ = self.tx.send(Msg::Append(slot, kind, bytes)); // a stopped thread: shown
    }

    /// A snapshot taken at `point`.
    pub(crate) fn snapshot(&self, point: u64, bytes: Vec<u8>) {
        let _ = self.tx.send(Msg::Snapshot(point, bytes));
    }

    /// A snapshot copied from a peer, at `point`.
    pub(crate) fn installed(&self, point: u64, bytes: Vec<u8>) {
        let _ = self.tx.send(Msg::Installed(point, bytes));
    }

    /// Writes what was handed and ends the thread (a shutdown).
    pub(crate) fn finish(mut self) {
        let _ = self.tx.send(Msg::Finish);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Ends the thread after the batch on its way, dropping what waits (a crash: the
    /// process is gone, and so is what it had not written).
    pub(crate) fn abandon(mut self) {
        self.abandoned.store(true, Ordering::SeqCst);
        let _ = self.tx.send(Msg::Finish); // wakes the thread if it waits
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The disk thread: messages in, batches of file operations executed, the durable point
/// shown. A failed batch stops persisting (the reason shown); the replica goes on.
fn run(
    me: u16,
    dir: &std::path::Path,
    mut writer: Writer,
    rx: &Receiver<Msg>,
    (shown, watch, abandoned): (&Shown, &DiskWatch, &AtomicBool),
) {
    let mut ops = Vec::new();
    let mut finishing = false;
    let mut last_batch: Option<Instant> = None;
    loop {
        if abandoned.load(Ordering::SeqCst) {
            return;
        }
        // Everything that arrived while the last batch was on disk goes in the next.
        let first = if finishing {
            rx.try_recv().ok()
        } else {
            rx.recv().ok()
        };
        let Some(first) = first else {
            if !finishing {
                return; // abandoned: nothing more is written
            }
            break;
        };
        let mut next = Some(first);
        let mut paused = finishing;
        while let Some(msg) = next.take() {
            match msg {
                Msg::Finish => finishing = true,
                msg => take(&mut writer, msg),
            }
            next = rx.try_recv().ok();
            // Group commit: what arrives during the pause goes in this batch.
            if next.is_none() && !paused && !finishing {
                paused = true;
                if let Some(since) = last_batch {
                    watch.pause(since);
                }
                next = rx.try_recv().ok();
            }
        }
        last_batch = Some(Instant::now());
        if abandoned.load(Ordering::SeqCst) || !flush(me, dir, &mut writer, &mut ops, shown, watch)
        {
            return;
        }
        if finishing && rx.is_empty() {
            break;
        }
    }
    if !abandoned.load(Ordering::SeqCst) {
        flush(me, dir, &mut writer, &mut ops, shown, watch);
    }
}

/// Hands `msg` to the writer (what its disk holds already is passed over there).
fn take(writer: &mut Writer, msg: Msg) {
    match msg {
        Msg::Append(slot, kind, bytes) => writer.applied(slot, kind, &bytes),
        Msg::Snapshot(point, bytes) => writer.snapshot_taken(point, bytes),
        Msg::Installed(point, bytes) => writer.snapshot_copied(point, bytes),
        Msg::Finish => unreachable!("handled by the loop"),
    }
}

/// Writes batches until the writer has nothing more; false once it stopped.
fn flush(
    me: u16,
    dir: &std::path::Path,
    writer: &mut Writer,
    ops: &mut Vec<velos_store::writer::DiskOp>,
    shown: &Shown,
    watch: &DiskWatch,
) -> bool {
    loop {
        ops.clear();
        writer.poll(ops);
        if ops.is_empty() {
            return writer.stopped().is_none();
        }
        let syncs = ops.iter().filter(|op| {
            matches!(
                op,
                velos_store::writer::DiskOp::Sync { .. } | velos_store::writer::DiskOp::SyncDir
            )
        });
        let syncs = syncs.count() as u64;
        match crate::disk::execute(dir, ops) {
            Ok(()) => {
                shown.disk_syncs.fetch_add(syncs, Ordering::Relaxed);
                writer.done();
                shown.durable.store(writer.durable(), Ordering::SeqCst);
            }
            Err(why) => {
                tracing::error!(replica = me, error = %why, "the disk stopped: not persisting");
                show_stopped(shown, &why);
                writer.failed(why);
                watch.bump();
                return false;
            }
        }
        watch.bump();
    }
}

fn show_stopped(shown: &Shown, why: &Stopped) {
    let mut stopped = shown.disk_stopped.lock().unwrap_or_else(|e| e.into_inner());
    *stopped = Some(why.clone());
}
