//! A simulated disk for the durable log (`velos-store`): one replica's directory in
//! memory, running the writer's file operations in virtual time, with the faults a real
//! disk has — a power loss keeps only what was synced (a file's later bytes survive as any
//! prefix of them, a torn write; the directory's later changes as any prefix of them), a
//! flipped bit (a bad sector, which the records' checksums catch), a full disk (a typed
//! stop), slow syncs. Deterministic: the draws come from the caller.

use std::collections::BTreeMap;
use velos_store::writer::{DiskOp, Stopped};

/// What the disk's operations cost, in virtual ns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DiskModel {
    /// A write or an append, before its bytes.
    pub write_ns: u64,
    /// Per KiB written.
    pub write_ns_per_kib: u64,
    /// A file's or the directory's sync.
    pub sync_ns: u64,
    /// A rename, a truncation or a deletion.
    pub metadata_ns: u64,
    /// Bytes the directory may hold at most (its files' current sizes).
    pub capacity_bytes: u64,
}

impl DiskModel {
    /// A datacenter NVMe drive with power-loss protection: writes into its cache in a few
    /// µs, a sync in about 20 µs; 1 GiB for the log.
    pub fn nvme() -> DiskModel {
        DiskModel {
            write_ns: 2_000,
            write_ns_per_kib: 500,
            sync_ns: 20_000,
            metadata_ns: 5_000,
            capacity_bytes: 1 << 30,
        }
    }
}

/// A file's bytes: as its last sync left them, and as they are.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Inode {
    synced: Vec<u8>,
    bytes: Vec<u8>,
}

/// A change of the directory's entries.
#[derive(Clone, Debug, PartialEq, Eq)]
enum DirChange {
    Link(String, usize),
    Rename(String, String),
    Unlink(String),
}

fn apply(dir: &mut BTreeMap<String, usize>, change: &DirChange) {
    match change {
        DirChange::Link(name, inode) => {
            dir.insert(name.clone(), *inode);
        }
        DirChange::Rename(from, to) => {
            if let Some(i) = dir.remove(from) {
                dir.insert(to.clone(), i);
            }
        }
        DirChange::Unlink(name) => {
            dir.remove(name);
        }
    }
}

/// One replica's directory on a simulated disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimDisk {
    model: DiskModel,
    inodes: Vec<Inode>,
    /// Name → inode, as the directory is, and as its last sync left it.
    dir: BTreeMap<String, usize>,
    synced_dir: BTreeMap<String, usize>,
    /// The directory's changes since its last sync, in order.
    unsynced: Vec<DirChange>,
    /// Syncs take this many times as long (1: as the model says).
    slow_syncs: u64,
}

impl SimDisk {
    /// An empty directory on a disk costed by `model`.
    pub fn new(model: DiskModel) -> SimDisk {
        SimDisk {
            model,
            inodes: Vec::new(),
            dir: BTreeMap::new(),
            synced_dir: BTreeMap::new(),
            unsynced: Vec::new(),
            slow_syncs: 1,
        }
    }

    /// Syncs take `factor` times as long from now on (a fault; 1 ends it).
    pub fn set_slow_syncs(&mut self, factor: u64) {
        assert!(factor >= 1, "a sync takes some time");
        self.slow_syncs = factor;
    }

    /// Bytes the directory's files hold now.
    pub fn used_bytes(&self) -> u64 {
        self.dir
            .values()
            .map(|&i| self.inodes[i].bytes.len() as u64)
            .sum()
    }

    fn change(&mut self, change: DirChange) {
        apply(&mut self.dir, &change);
        self.unsynced.push(change);
    }

    fn inode(&mut self, file: &str) -> Result<&mut Inode, Stopped> {
        let i = *self
            .dir
            .get(file)
            .ok_or_else(|| Stopped::Io(format!("{file}: no such file")))?;
        Ok(&mut self.inodes[i])
    }

    /// Runs `op`: what it cost (virtual ns), or why it failed — a write past the
    /// capacity is [`Stopped::Full`] and changes nothing, as is an operation on a file
    /// that does not exist ([`Stopped::Io`]).
    pub fn execute(&mut self, op: &DiskOp) -> Result<u64, Stopped> {
        let m = self.model;
        let write_cost = |n: usize| m.write_ns + (n as u64).div_ceil(1024) * m.write_ns_per_kib;
        let grows = match op {
            DiskOp::Write { file, bytes } => {
                let old = self
                    .dir
                    .get(file)
                    .map_or(0, |&i| self.inodes[i].bytes.len());
                (bytes.len() as u64).saturating_sub(old as u64)
            }
            DiskOp::Append { bytes, .. } => bytes.len() as u64,
            _ => 0,
        };
        if self.used_bytes() + grows > m.capacity_bytes {
            return Err(Stopped::Full);
        }
        match op {
            DiskOp::Write { file, bytes } => {
                self.inodes.push(Inode {
                    synced: Vec::new(),
                    bytes: bytes.clone(),
                });
                self.change(DirChange::Link(file.clone(), self.inodes.len() - 1));
                Ok(write_cost(bytes.len()))
            }
            DiskOp::Append { file, bytes } => {
                self.inode(file)?.bytes.extend_from_slice(bytes);
                Ok(write_cost(bytes.len()))
            }
            DiskOp::Sync { file } => {
                let inode = self.inode(file)?;
                inode.synced = inode.bytes.clone();
                Ok(m.sync_ns * self.slow_syncs)
            }
            DiskOp::SyncDir => {
                self.synced_dir = self.dir.clone();
                self.unsynced.clear();
                Ok(m.sync_ns * self.slow_syncs)
            }
            DiskOp::Rename { from, to } => {
                if !self.dir.contains_key(from) {
                    return Err(Stopped::Io(format!("{from}: no such file")));
                }
                self.change(DirChange::Rename(from.clone(), to.clone()));
                Ok(m.metadata_ns)
            }
            DiskOp::Truncate { file, len } => {
                self.inode(file)?.bytes.truncate(*len);
                Ok(m.metadata_ns)
            }
            DiskOp::Delete { file } => {
                if self.dir.contains_key(file) {
                    self.change(DirChange::Unlink(file.clone()));
                }
                Ok(m.metadata_ns)
            }
        }
    }

    /// A power loss: each file keeps its synced bytes and a prefix of what was appended
    /// since (a file cut since its sync keeps either state), the directory its synced
    /// entries and a prefix of its changes since. `pick(n)` draws in `0..n`.
    pub fn power_loss(&mut self, pick: &mut impl FnMut(usize) -> usize) {
        let kept = pick(self.unsynced.len() + 1);
        let mut dir = self.synced_dir.clone();
        for change in &self.unsynced[..kept] {
            apply(&mut dir, change);
        }
        for inode in &mut self.inodes {
            let now = if inode.bytes.starts_with(&inode.synced) {
                let extra = pick(inode.bytes.len() - inode.synced.len() + 1);
                inode.bytes[..inode.synced.len() + extra].to_vec()
            } else if pick(2) == 0 {
                inode.synced.clone()
            } else {
                inode.bytes.clone()
            };
            inode.bytes = now.clone();
            inode.synced = now;
        }
        self.dir = dir.clone();
        self.synced_dir = dir;
        self.unsynced.clear();
        // Postcondition: nothing is left unsynced.
        debug_assert!(self.inodes.iter().all(|i| i.bytes == i.synced));
    }

    /// Flips one bit of one of the directory's files (a bad sector), both in what is and
    /// what was synced; the file and the byte, or `None` for a directory of empty files.
    pub fn flip_bit(&mut self, pick: &mut impl FnMut(usize) -> usize) -> Option<(String, usize)> {
        let files: Vec<(&String, usize)> = self
            .dir
            .iter()
            .filter(|&(_, &i)| !self.inodes[i].bytes.is_empty())
            .map(|(n, &i)| (n, i))
            .collect();
        if files.is_empty() {
            return None;
        }
        let (name, i) = files[pick(files.len())];
        let name = name.clone();
        let inode = &mut self.inodes[i];
        let byte = pick(inode.bytes.len());
        let bit = 1u8 << pick(8);
        inode.bytes[byte] ^= bit;
        if byte < inode.synced.len() {
            inode.synced[byte] ^= bit;
        }
        Some((name, byte))
    }

    /// The directory's files and their bytes, by name.
    pub fn files(&self) -> Vec<(String, Vec<u8>)> {
        self.dir
            .iter()
            .map(|(name, &i)| (name.clone(), self.inodes[i].bytes.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(file: &str, bytes: &[u8]) -> DiskOp {
        DiskOp::Write {
            file: file.into(),
            bytes: bytes.to_vec(),
        }
    }

    #[test]
    fn a_power_loss_keeps_what_was_synced() {
        let mut d = SimDisk::new(DiskModel::nvme());
        d.execute(&write("a", b"one")).unwrap();
        d.execute(&DiskOp::Sync { file: "a".into() }).unwrap();
        d.execute(&DiskOp::SyncDir).unwrap();
        d.execute(&DiskOp::Append {
            file: "a".into(),
            bytes: b"two".to_vec(),
        })
        .unwrap();
        d.execute(&write("b", b"new")).unwrap();
        // Keep nothing unsynced.
        d.power_loss(&mut |_| 0);
        assert_eq!(d.files(), [("a".to_string(), b"one".to_vec())]);
    }

    #[test]
    fn a_full_disk_refuses_the_write_and_keeps_what_it_had() {
        let model = DiskModel {
            capacity_bytes: 8,
            ..DiskModel::nvme()
        };
        let mut d = SimDisk::new(model);
        d.execute(&write("a", b"12345")).unwrap();
        let more = DiskOp::Append {
            file: "a".into(),
            bytes: b"6789".to_vec(),
        };
        assert_eq!(d.execute(&more), Err(Stopped::Full));
        assert_eq!(d.used_bytes(), 5);
    }

    #[test]
    fn a_flipped_bit_changes_one_bit_of_one_file_and_survives_a_power_loss() {
        let mut d = SimDisk::new(DiskModel::nvme());
        assert_eq!(d.flip_bit(&mut |_| 0), None, "nothing to flip");
        d.execute(&write("a", &[0; 16])).unwrap();
        d.execute(&DiskOp::Sync { file: "a".into() }).unwrap();
        d.execute(&DiskOp::SyncDir).unwrap();
        let mut draws = [0usize, 5, 3].into_iter();
        assert_eq!(
            d.flip_bit(&mut |_| draws.next().unwrap()),
            Some(("a".into(), 5))
        );
        d.power_loss(&mut |_| 0);
        let bytes = &d.files()[0].1;
        assert_eq!(bytes.iter().map(|b| b.count_ones()).sum::<u32>(), 1);
        assert_eq!(bytes[5], 1 << 3);
    }

    #[test]
    fn slow_syncs_cost_more() {
        let mut d = SimDisk::new(DiskModel::nvme());
        d.execute(&write("a", b"x")).unwrap();
        let sync = DiskOp::Sync { file: "a".into() };
        let normal = d.execute(&sync).unwrap();
        d.set_slow_syncs(10);
        assert_eq!(d.execute(&sync).unwrap(), 10 * normal);
    }
}
