//! The durable log on a real disk: the executor of `velos-store`'s file operations in a
//! replica's directory (`fdatasync` for a file's bytes, `fsync` of the directory for its
//! entries), and the reading of a directory for its recovery. Not wired into
//! [`crate::embed`] yet (`paper-notes/durability.md` says what comes next).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use velos_store::writer::{DiskOp, Stopped};

/// Runs one batch of `ops` in `dir`, in order, each after the previous one returned; the
/// first failure stops the batch (a full disk is [`Stopped::Full`]).
pub fn execute(dir: &Path, ops: &[DiskOp]) -> Result<(), Stopped> {
    for op in ops {
        run(dir, op).map_err(|e| stopped(op, &e))?;
    }
    Ok(())
}

fn stopped(op: &DiskOp, e: &io::Error) -> Stopped {
    if e.kind() == io::ErrorKind::StorageFull {
        Stopped::Full
    } else {
        Stopped::Io(format!("{}: {e}", short(op)))
    }
}

/// An operation named without its bytes (for errors).
fn short(op: &DiskOp) -> String {
    match op {
        DiskOp::Write { file, bytes } => format!("write {file} ({} bytes)", bytes.len()),
        DiskOp::Append { file, bytes } => format!("append {file} ({} bytes)", bytes.len()),
        DiskOp::Sync { file } => format!("sync {file}"),
        DiskOp::SyncDir => "sync the directory".into(),
        DiskOp::Rename { from, to } => format!("rename {from} to {to}"),
        DiskOp::Truncate { file, len } => format!("truncate {file} to {len} bytes"),
        DiskOp::Delete { file } => format!("delete {file}"),
    }
}

fn run(dir: &Path, op: &DiskOp) -> io::Result<()> {
    match op {
        DiskOp::Write { file, bytes } => File::create(dir.join(file))?.write_all(bytes),
        DiskOp::Append { file, bytes } => OpenOptions::new()
            .append(true)
            .open(dir.join(file))?
            .write_all(bytes),
        DiskOp::Sync { file } => File::open(dir.join(file))?.sync_data(),
        DiskOp::SyncDir => File::open(dir)?.sync_all(),
        DiskOp::Rename { from, to } => fs::rename(dir.join(from), dir.join(to)),
        DiskOp::Truncate { file, len } => OpenOptions::new()
            .write(true)
            .open(dir.join(file))?
            .set_len(*len as u64),
        DiskOp::Delete { file } => match fs::remove_file(dir.join(file)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        },
    }
}

/// Every file of `dir` that the durable log may have written (`seg-…`, `snap-…`), with its
/// bytes, for `velos_store::recover::recover`; other files are left out.
pub fn read(dir: &Path) -> io::Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(dir)? {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else {
            continue; // not a name the log writes
        };
        if (name.starts_with("seg-") || name.starts_with("snap-")) && entry.file_type()?.is_file() {
            files.push((name.clone(), fs::read(entry.path())?));
        }
    }
    files.sort();
    Ok(files)
}
