//! Every replica's durable log in a simulated run: velos-store's writer on velos-sim's
//! `SimDisk`, run in virtual time at the disk's costs, with the disk faults asked for
//! ([`DiskFaults`]).

use std::collections::VecDeque;
use velos_sim::disk::{DiskModel, SimDisk};
use velos_sim::rng::Rng;
use velos_store::quorum::{Mutation as DiskMutation, durable_index_with};
use velos_store::recover::{Recovered, recover_owned};
use velos_store::segment::Kind;
use velos_store::writer::{DiskOp, Writer};

/// Segments roll at this size: small, so that runs cross segment boundaries and
/// snapshots delete segments behind them.
const SEGMENT_BYTES: usize = 2 << 10;

/// The disk faults of a run (none by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DiskFaults {
    /// One replica's syncs take this many times as long: `(replica, factor)`.
    pub slow_syncs: Option<(u16, u64)>,
    /// One replica's disk holds this many bytes at most (it fills, and that replica
    /// stops persisting): `(replica, capacity)`.
    pub full: Option<(u16, u64)>,
    /// A deliberately wrong variant of the durable point (tests only).
    pub mutation: DiskMutation,
}

/// Every replica's disk and writer.
#[derive(Clone, Debug)]
pub struct Disks {
    disks: Vec<SimDisk>,
    writers: Vec<Writer>,
    /// The operations of the batch on its way, and when the next one runs.
    pending: Vec<VecDeque<DiskOp>>,
    ready_at: Vec<u64>,
    out: Vec<bool>,
    /// The log's slot of the engine's slot 0.
    base: u64,
    mutation: DiskMutation,
}

impl Disks {
    /// Empty disks for `replicas`, with `plan`'s faults.
    pub fn new(replicas: usize, plan: &DiskFaults) -> Disks {
        let mut disks: Vec<SimDisk> = (0..replicas)
            .map(|r| {
                let mut model = DiskModel::nvme();
                if let Some((_, capacity)) = plan.full.filter(|&(f, _)| usize::from(f) == r) {
                    model.capacity_bytes = capacity;
                }
                SimDisk::new(model)
            })
            .collect();
        if let Some((r, factor)) = plan.slow_syncs {
            disks[usize::from(r)].set_slow_syncs(factor);
        }
        let writers = (0..replicas).map(|_| writer(&Recovered::default(), plan.mutation));
        Disks {
            disks,
            writers: writers.collect(),
            pending: vec![VecDeque::new(); replicas],
            ready_at: vec![0; replicas],
            out: vec![false; replicas],
            base: 0,
            mutation: plan.mutation,
        }
    }

    /// Replica `r` applied `bytes` in the engine's slot `slot` (already on its disk: passed
    /// over).
    pub fn append(&mut self, r: usize, slot: u64, bytes: &[u8]) {
        self.writers[r].applied(self.base + slot, Kind::Service, bytes);
    }

    /// Replica `r`'s service took a snapshot at the engine's slot `point`.
    pub fn snapshot(&mut self, r: usize, point: u64, bytes: &[u8]) {
        self.writers[r].snapshot_taken(self.base + point, bytes.to_vec());
    }

    /// Replica `r` copied a peer's snapshot at the engine's slot `point`.
    pub fn installed(&mut self, r: usize, point: u64, bytes: &[u8]) {
        self.writers[r].snapshot_copied(self.base + point, bytes.to_vec());
    }

    /// Runs every disk up to `now`: the operations of each batch one after the other at
    /// the disk's costs (an operation takes effect when it starts; the batch completes,
    /// and the durable point moves, when its last one ends). A replica that is down
    /// (`up[r]` false) runs nothing: its process is gone, and its batch stays unwritten.
    pub fn visit(&mut self, now: u64, up: &[bool]) {
        assert_eq!(up.len(), self.disks.len(), "one flag per replica");
        for (r, _) in up.iter().enumerate().filter(|&(_, &up)| up) {
            self.run_disk(r, now);
        }
    }

    /// Runs replica `r`'s disk up to `now` ([`Disks::visit`]).
    fn run_disk(&mut self, r: usize, now: u64) {
        loop {
            if !self.out[r] {
                let mut ops = Vec::new();
                self.writers[r].poll(&mut ops);
                if ops.is_empty() {
                    return;
                }
                self.pending[r] = ops.into();
                self.ready_at[r] = self.ready_at[r].max(now);
                self.out[r] = true;
            }
            while self.ready_at[r] <= now
                && let Some(op) = self.pending[r].pop_front()
            {
                match self.disks[r].execute(&op) {
                    Ok(ns) => self.ready_at[r] += ns,
                    Err(why) => {
                        self.pending[r].clear();
                        self.out[r] = false;
                        self.writers[r].failed(why);
                        return;
                    }
                }
            }
            if !self.pending[r].is_empty() || self.ready_at[r] > now {
                return;
            }
            // The batch's last operation ended: it is on disk.
            self.writers[r].done();
            self.out[r] = false;
        }
    }

    /// Replica `r`'s process crashed and a new one starts in its place: the disk loses
    /// what was not synced (the machine may have gone down with it), and the new
    /// process's writer goes on from what the disk holds. The newest snapshot there, if
    /// the running engine took it (past its slot 0): `(engine point, bytes)`, where the
    /// new process may resume.
    pub fn restart(&mut self, r: usize, rng: &mut Rng) -> Option<(u64, Vec<u8>)> {
        self.disks[r].power_loss(&mut |n| rng.below(n as u64) as usize);
        let found = recover_owned(self.disks[r].files());
        self.writers[r] = writer(&found, self.mutation);
        self.pending[r].clear();
        self.out[r] = false;
        let (point, bytes) = found.snapshot?;
        (point > self.base).then(|| (point - self.base, bytes))
    }

    /// The durable index of `members`' disks (each one's durable point as its writer
    /// shows it).
    pub fn durable_index(&self, majority: usize) -> u64 {
        let points: Vec<u64> = self.writers.iter().map(Writer::durable).collect();
        durable_index_with(&points, majority, self.mutation)
    }

    /// Each replica's durable point (the log's slot its disk holds the log to).
    pub fn points(&self) -> Vec<u64> {
        self.writers.iter().map(Writer::durable).collect()
    }

    /// Disks that stopped persisting.
    pub fn stopped(&self) -> usize {
        self.writers
            .iter()
            .filter(|w| w.stopped().is_some())
            .count()
    }

    /// After a whole-cluster power loss: every disk's writer goes on from what `found`
    /// (each disk's recovery) holds, brought up to `source` (the longest log they hold
    /// together, [`Writer::rejoin`]), and the engine's slot 0 stands for `source`'s next
    /// slot.
    pub fn resume(&mut self, found: &[Recovered], source: &Recovered) {
        for (r, f) in found.iter().enumerate() {
            self.go_on(r, Writer::rejoin(f, source, SEGMENT_BYTES));
        }
        self.base = source.next_slot;
    }

    /// After a whole-cluster power loss: replica `r`'s disk goes on with `writer`, the
    /// restarted cluster's clock starting again.
    fn go_on(&mut self, r: usize, mut writer: Writer) {
        writer.mutate(self.mutation);
        self.writers[r] = writer;
        self.pending[r].clear();
        self.out[r] = false;
        self.ready_at[r] = 0;
    }

    /// After a whole-cluster power loss restarted as a deployment of `Node`s does
    /// (`Replica::restart_recovered`): every disk's writer goes on from what its own
    /// recovery `found` holds, the log's numbering going on (no base) — but a log without
    /// its start is given up: it cannot rebuild the state, and its entries may run past
    /// where the cluster goes on, slots decided anew (its replica copies the state).
    pub fn resume_own(&mut self, found: &[Recovered]) {
        for (r, f) in found.iter().enumerate() {
            let kept = if f.has_start() { f } else { &f.discarded() };
            self.go_on(r, Writer::resume(kept, SEGMENT_BYTES));
        }
        self.base = 0;
    }

    /// Every replica loses power (and `flip`'s disk a bit); what each disk recovers.
    pub fn power_loss(&mut self, rng: &mut Rng, flip: Option<u16>) -> Vec<Recovered> {
        for d in &mut self.disks {
            d.power_loss(&mut |n| rng.below(n as u64) as usize);
        }
        if let Some(r) = flip {
            self.disks[usize::from(r)].flip_bit(&mut |n| rng.below(n as u64) as usize);
        }
        self.disks
            .iter()
            .map(|d| recover_owned(d.files()))
            .collect()
    }
}

/// A writer going on from `found`, running `mutation`.
fn writer(found: &Recovered, mutation: DiskMutation) -> Writer {
    let mut w = Writer::resume(found, SEGMENT_BYTES);
    w.mutate(mutation);
    w
}
