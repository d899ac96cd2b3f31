//! The durable log's on-disk formats, sans-IO: what a replica writes to its own directory
//! so that the log survives a power loss of the whole cluster, and the scan that reads it
//! back. Nothing here touches a file: the writer and the recovery hand bytes in and out,
//! and the library (real files) and the simulator (a deterministic disk with faults)
//! execute them alike.
//!
//! * [`segment`] — a segment file: a header naming its first slot, then one checksummed
//!   record per applied entry, in slot order, with nothing between them;
//!   [`segment::scan`] reads a segment's bytes back and cuts a torn or corrupt tail at the
//!   last valid record, saying why, never using what follows.
//! * [`snapshot`] — a snapshot file: a point of the log and the state there, checksummed.
//! * [`writer`] — the [`writer::Writer`]: entries and snapshots in, batches of
//!   [`writer::DiskOp`]s out (group commit, segments rolled, snapshots renamed into place
//!   before what they cover is deleted), the durable point moved by their completions.
//! * [`merge`] — [`merge::merge`]: the longest log several directories hold together
//!   (a damaged start taken from another one's snapshot), after a whole-cluster power loss.
//! * [`quorum`] — [`quorum::durable_index`]: an entry is durable once a majority of the
//!   members' disks hold it.
//! * [`recover`] — [`recover::recover`]: a directory's files in, the newest valid snapshot
//!   and the log after it out, every cut reported.
//!
//! Only decided entries are written (a replica appends what it applies), so every
//! replica's segments hold a prefix of the one decided log: the argument is in
//! `paper-notes/durability.md`.

pub mod merge;
pub mod quorum;
pub mod recover;
pub mod segment;
pub mod snapshot;
pub mod writer;
