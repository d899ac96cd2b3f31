//! Each replica's key-value service in a campaign run: the entries it applied, the
//! snapshots it handed to the log and restored from it; with `--power-loss`, the same
//! handed to its disk ([`super::disks::Disks`]).

use super::kv::KvMachine;
use crate::durable::disks::Disks;
use crate::harness::script::Scripted;
use velos_sim::simulate::Simulator;

/// Each replica's service.
pub(super) struct Services {
    /// Each replica's key-value state.
    pub(super) kv: Vec<KvMachine>,
    /// How far into the replica's `applied` the service has read.
    cursor: Vec<usize>,
    /// The next slot it expects.
    pub(super) next: Vec<u64>,
    last_snapshot: Vec<u64>,
    every: u64,
    pub(super) violations: Vec<String>,
}

impl Services {
    /// Replica `r`'s process was replaced: its service starts empty.
    pub(super) fn restart(&mut self, r: usize) {
        (self.kv[r], self.cursor[r], self.next[r]) = (KvMachine::default(), 0, 0);
        self.last_snapshot[r] = 0;
    }

    /// Replica `r`'s fresh process resumed at `point` from its disk's snapshot: its
    /// service restored from `state` (the key-value snapshot), every entry below `point`
    /// applied.
    pub(super) fn resume(&mut self, r: usize, point: u64, state: &[u8]) {
        assert_eq!(self.next[r], 0, "a fresh process's service resumes");
        match KvMachine::restore(state) {
            Some(kv) => (self.kv[r], self.next[r], self.last_snapshot[r]) = (kv, point, point),
            None => self.violations.push(format!(
                "snapshots: replica {r}'s disk kept a snapshot at {point} that does not decode"
            )),
        }
    }

    pub(super) fn new(replicas: usize, every: u64) -> Services {
        Services {
            kv: vec![KvMachine::default(); replicas],
            cursor: vec![0; replicas],
            next: vec![0; replicas],
            last_snapshot: vec![0; replicas],
            every,
            violations: Vec::new(),
        }
    }

    /// Applies what each live replica applied since the last visit, restores the
    /// snapshots it copied, and hands it a snapshot every so many entries; with `disks`
    /// (`--power-loss`), each replica's disk gets the same.
    pub(super) fn visit(&mut self, sim: &mut Simulator<Scripted>, mut disks: Option<&mut Disks>) {
        let m = sim.machine_mut();
        for r in 0..self.kv.len() {
            if !m.is_up(m.threads[r].node) {
                continue;
            }
            let replica = &mut m.threads[r].process;
            for (point, bytes) in replica.take_installed() {
                // The disk keeps a snapshot as the log's banks do (the membership from its
                // point on first), so that a later process resumes from it.
                if let Some(d) = disks.as_deref_mut()
                    && let Some(wrapped) = replica.wrap_snapshot(point, &bytes)
                {
                    d.installed(r, point, &wrapped);
                }
                match KvMachine::restore(&bytes) {
                    Some(kv) => (self.kv[r], self.next[r]) = (kv, point),
                    None => self.violations.push(format!(
                        "snapshots: replica {r} copied a snapshot at {point} that does not decode"
                    )),
                }
                self.last_snapshot[r] = point;
            }
            for (slot, value) in &replica.applied[self.cursor[r]..] {
                if *slot < self.next[r] {
                    continue; // below a snapshot copied meanwhile
                }
                self.kv[r].apply(value);
                self.next[r] = slot + 1;
                if let Some(d) = disks.as_deref_mut() {
                    d.append(r, *slot, value);
                }
            }
            self.cursor[r] = replica.applied.len();
            // A large snapshot is written over several turns: the next waits for it.
            let writing = replica.snapshot_writing().is_some();
            if self.next[r] >= self.last_snapshot[r] + self.every && !writing {
                let bytes = self.kv[r].snapshot();
                if let Some(d) = disks.as_deref_mut()
                    && let Some(wrapped) = replica.wrap_snapshot(self.next[r], &bytes)
                {
                    d.snapshot(r, self.next[r], &wrapped);
                }
                if let Err(e) = replica.snapshot_taken(self.next[r], bytes) {
                    self.violations
                        .push(format!("snapshots: replica {r} refused a snapshot: {e}"));
                }
                self.last_snapshot[r] = self.next[r];
            }
        }
    }
}
