//! What one [`VerbsNode`](super::VerbsNode) tells its peers so that they can connect to
//! it: [`NodeInfo`], and its byte form (the opaque blob a cluster rendezvous exchanges).
//!
//! The byte form is described at [`NodeInfo`].

use super::error::VerbsError;
use crate::ids::NodeId;
use serde::{Deserialize, Serialize};

/// The first bytes of every [`NodeInfo`] in byte form.
const MAGIC: &[u8; 4] = b"VLNI";
/// The version of the byte form.
const VERSION: u8 = 1;
/// The first bytes of every [`PeerInfo`] in byte form.
const PEER_MAGIC: &[u8; 4] = b"VLPI";
/// The version of the [`PeerInfo`] byte form.
const PEER_VERSION: u8 = 1;
/// Rows longer than this are refused when decoding (a guard against absurd allocations).
const MAX_ROW: u32 = 1 << 16;

/// The connection information of one node: where its memory is, and which queue pairs
/// peers connect to. Made by [`VerbsNode::local_info`](super::VerbsNode::local_info),
/// carried as bytes ([`NodeInfo::to_bytes`], [`NodeInfo::from_bytes`]) or with serde, and
/// handed to the peers' [`VerbsNode::connect`](super::VerbsNode::connect).
///
/// # Byte form
/// Little-endian, in this order: the magic `VLNI`, the format version (1, one byte), the
/// node id (`u16`), the number of nodes of the layout (`u16`), the node's words (`u32`),
/// the threads per node (`u16`), the GID (16 bytes), the LID (`u16`), the region's address
/// (`u64`) and rkey (`u32`), then `responders` and `requesters`, each as a count of rows
/// (`u32`) followed by every row as a count (`u32`) and that many queue-pair numbers
/// (`u32`). Nothing may follow.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeInfo {
    /// The node.
    pub node: NodeId,
    /// How many nodes its layout has.
    pub nodes: u16,
    /// How many words its layout gives this node (the registered region's size).
    pub words: u32,
    /// How many threads every node runs (each has one requester towards every node).
    pub threads: u16,
    /// The GID of the node's device port.
    pub gid: [u8; 16],
    /// The LID of the node's device port (0 on RoCE).
    pub lid: u16,
    /// The virtual address of the node's registered region (its word 0).
    pub addr: u64,
    /// The remote key of the node's registered region.
    pub rkey: u32,
    /// `responders[m][t]`: the number of the responder queue pair of this node that
    /// thread `t` of node `m` connects its requester towards this node to.
    pub responders: Vec<Vec<u32>>,
    /// `requesters[m][t]`: the number of the requester queue pair of this node's thread
    /// `t` towards node `m`, which node `m`'s responder for it connects to.
    pub requesters: Vec<Vec<u32>>,
}

impl NodeInfo {
    /// The byte form (see [`NodeInfo`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(64);
        bytes.extend_from_slice(MAGIC);
        bytes.push(VERSION);
        bytes.extend_from_slice(&self.node.0.to_le_bytes());
        bytes.extend_from_slice(&self.nodes.to_le_bytes());
        bytes.extend_from_slice(&self.words.to_le_bytes());
        bytes.extend_from_slice(&self.threads.to_le_bytes());
        bytes.extend_from_slice(&self.gid);
        bytes.extend_from_slice(&self.lid.to_le_bytes());
        bytes.extend_from_slice(&self.addr.to_le_bytes());
        bytes.extend_from_slice(&self.rkey.to_le_bytes());
        for table in [&self.responders, &self.requesters] {
            put_len(&mut bytes, table.len());
            for row in table {
                put_len(&mut bytes, row.len());
                for qpn in row {
                    bytes.extend_from_slice(&qpn.to_le_bytes());
                }
            }
        }
        assert_eq!(&bytes[..4], MAGIC);
        bytes
    }

    /// Reads the byte form back, and checks that it is consistent: the node is one of
    /// its layout's, and both queue-pair tables have one row per node and one entry per
    /// thread.
    ///
    /// # Errors
    /// [`VerbsError::BadNodeInfo`] saying what is wrong: another magic or version,
    /// truncated or trailing bytes, or inconsistent contents.
    pub fn from_bytes(bytes: &[u8]) -> Result<NodeInfo, VerbsError> {
        let mut reader = Reader { bytes, at: 0 };
        if reader.take::<4>("the magic")? != *MAGIC {
            return Err(bad(format!(
                "it does not start with {:?} (not a verbs node info)",
                String::from_utf8_lossy(MAGIC)
            )));
        }
        let [version] = reader.take::<1>("the version")?;
        if version != VERSION {
            return Err(bad(format!(
                "format version {version}, but this build reads version {VERSION}"
            )));
        }
        let node = NodeId(u16::from_le_bytes(reader.take("the node id")?));
        let nodes = u16::from_le_bytes(reader.take("the node count")?);
        let words = u32::from_le_bytes(reader.take("the word count")?);
        let threads = u16::from_le_bytes(reader.take("the thread count")?);
        let gid = reader.take::<16>("the GID")?;
        let lid = u16::from_le_bytes(reader.take("the LID")?);
        let addr = u64::from_le_bytes(reader.take("the region address")?);
        let rkey = u32::from_le_bytes(reader.take("the rkey")?);
        let responders = reader.table("the responder table")?;
        let requesters = reader.table("the requester table")?;
        if reader.at != bytes.len() {
            return Err(bad(format!(
                "{} bytes follow the end",
                bytes.len() - reader.at
            )));
        }
        let info = NodeInfo {
            node,
            nodes,
            words,
            threads,
            gid,
            lid,
            addr,
            rkey,
            responders,
            requesters,
        };
        info.check_shape()?;
        assert_eq!(info.to_bytes(), bytes);
        Ok(info)
    }

    /// Checks that the node is one of the layout's and that both queue-pair tables have
    /// one row per node and one entry per thread.
    pub(super) fn check_shape(&self) -> Result<(), VerbsError> {
        if self.node.0 >= self.nodes {
            return Err(bad(format!(
                "{} is not a node of a layout of {} nodes",
                self.node, self.nodes
            )));
        }
        if self.threads == 0 {
            return Err(bad("no threads".to_owned()));
        }
        for (name, table) in [
            ("responder", &self.responders),
            ("requester", &self.requesters),
        ] {
            let nodes = usize::from(self.nodes);
            let threads = usize::from(self.threads);
            if table.len() != nodes || table.iter().any(|row| row.len() != threads) {
                return Err(bad(format!(
                    "the {name} table of {} is not {nodes} nodes by {threads} threads",
                    self.node
                )));
            }
        }
        Ok(())
    }
}

/// A [`VerbsError::BadNodeInfo`].
fn bad(reason: String) -> VerbsError {
    VerbsError::BadNodeInfo { reason }
}

/// Appends a table or row length.
fn put_len(bytes: &mut Vec<u8>, len: usize) {
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    bytes.extend_from_slice(&len.to_le_bytes());
}

/// Reads the byte form front to back.
struct Reader<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl Reader<'_> {
    /// The next `N` bytes, which hold `what`.
    fn take<const N: usize>(&mut self, what: &str) -> Result<[u8; N], VerbsError> {
        let end = self
            .at
            .checked_add(N)
            .filter(|&end| end <= self.bytes.len());
        let Some(end) = end else {
            return Err(bad(format!(
                "it ends ({} bytes) before {what}",
                self.bytes.len()
            )));
        };
        let mut taken = [0u8; N];
        taken.copy_from_slice(&self.bytes[self.at..end]);
        self.at = end;
        Ok(taken)
    }

    /// A length-prefixed table of length-prefixed rows of queue-pair numbers.
    fn table(&mut self, what: &str) -> Result<Vec<Vec<u32>>, VerbsError> {
        let rows = u32::from_le_bytes(self.take(what)?);
        if rows > MAX_ROW {
            return Err(bad(format!("{what} has {rows} rows")));
        }
        let mut table = Vec::with_capacity(rows as usize);
        for _ in 0..rows {
            let len = u32::from_le_bytes(self.take(what)?);
            if len > MAX_ROW {
                return Err(bad(format!("{what} has a row of {len} entries")));
            }
            let row = (0..len)
                .map(|_| self.take(what).map(u32::from_le_bytes))
                .collect::<Result<Vec<_>, _>>()?;
            table.push(row);
        }
        assert_eq!(table.len(), rows as usize);
        Ok(table)
    }
}

/// A word range of a node's memory registered on its own (a grant of a region plan, see
/// [`VerbsNode::with_plan`](super::VerbsNode::with_plan)), and its remote key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RemoteRange {
    /// The first word (word index).
    pub start: u32,
    /// How many words.
    pub words: u32,
    /// The remote key of the range's region.
    pub rkey: u32,
}

/// What one node tells one peer: its [`NodeInfo`], and the word ranges of its region plan
/// this peer may reach, each with its own key. Made by
/// [`VerbsNode::local_info_for`](super::VerbsNode::local_info_for), handed to the peer's
/// [`VerbsNode::connect_peers`](super::VerbsNode::connect_peers). A word outside the
/// ranges is reached with [`NodeInfo::rkey`], which for a node opened with a plan grants no
/// remote access at all: the NIC refuses the access.
///
/// # Byte form
/// Little-endian: the magic `VLPI`, the format version (1, one byte), the length of the
/// node information's byte form (`u32`) and that byte form, the number of ranges (`u32`)
/// and per range its first word, its word count and its rkey (each `u32`). Nothing may
/// follow.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct PeerInfo {
    /// The node's connection information.
    pub info: NodeInfo,
    /// The ranges this peer may reach with their own keys (none without a plan).
    pub ranges: Vec<RemoteRange>,
}

impl From<NodeInfo> for PeerInfo {
    /// The information without ranges (a node opened without a plan).
    fn from(info: NodeInfo) -> PeerInfo {
        PeerInfo {
            info,
            ranges: Vec::new(),
        }
    }
}

impl PeerInfo {
    /// The remote key for the node's word with index `word`: that of the range holding
    /// it, or the region's ([`NodeInfo::rkey`]).
    pub fn rkey_of(&self, word: u32) -> u32 {
        self.ranges
            .iter()
            .find(|range| range.start <= word && word - range.start < range.words)
            .map_or(self.info.rkey, |range| range.rkey)
    }

    /// The byte form (see [`PeerInfo`]).
    pub fn to_bytes(&self) -> Vec<u8> {
        let info = self.info.to_bytes();
        let mut bytes = Vec::with_capacity(16 + info.len() + 12 * self.ranges.len());
        bytes.extend_from_slice(PEER_MAGIC);
        bytes.push(PEER_VERSION);
        put_len(&mut bytes, info.len());
        bytes.extend_from_slice(&info);
        put_len(&mut bytes, self.ranges.len());
        for range in &self.ranges {
            for field in [range.start, range.words, range.rkey] {
                bytes.extend_from_slice(&field.to_le_bytes());
            }
        }
        assert_eq!(&bytes[..4], PEER_MAGIC);
        bytes
    }

    /// Reads the byte form back and checks it: the node information as
    /// [`NodeInfo::from_bytes`] does, and every range non-empty and inside the node's
    /// words.
    ///
    /// # Errors
    /// [`VerbsError::BadNodeInfo`] saying what is wrong.
    pub fn from_bytes(bytes: &[u8]) -> Result<PeerInfo, VerbsError> {
        let mut reader = Reader { bytes, at: 0 };
        if reader.take::<4>("the magic")? != *PEER_MAGIC {
            return Err(bad(format!(
                "it does not start with {:?} (not a verbs peer info)",
                String::from_utf8_lossy(PEER_MAGIC)
            )));
        }
        let [version] = reader.take::<1>("the version")?;
        if version != PEER_VERSION {
            return Err(bad(format!(
                "peer info format version {version}, but this build reads version {PEER_VERSION}"
            )));
        }
        let len = u32::from_le_bytes(reader.take("the node info length")?) as usize;
        let end = reader
            .at
            .checked_add(len)
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| bad("it ends before the node info does".to_owned()))?;
        let info = NodeInfo::from_bytes(&bytes[reader.at..end])?;
        reader.at = end;
        let count = u32::from_le_bytes(reader.take("the range count")?);
        if count > MAX_ROW {
            return Err(bad(format!("{count} ranges")));
        }
        let mut ranges = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let mut field = || reader.take("a range").map(u32::from_le_bytes);
            ranges.push(RemoteRange {
                start: field()?,
                words: field()?,
                rkey: field()?,
            });
        }
        if reader.at != bytes.len() {
            return Err(bad(format!(
                "{} bytes follow the end",
                bytes.len() - reader.at
            )));
        }
        let peer = PeerInfo { info, ranges };
        peer.check_ranges()?;
        assert_eq!(peer.to_bytes(), bytes);
        Ok(peer)
    }

    /// Checks that every range is non-empty and inside the node's words.
    pub(super) fn check_ranges(&self) -> Result<(), VerbsError> {
        let words = self.info.words;
        let outside = |range: &&RemoteRange| {
            range.words == 0
                || range
                    .start
                    .checked_add(range.words)
                    .is_none_or(|end| end > words)
        };
        if let Some(range) = self.ranges.iter().find(outside) {
            return Err(bad(format!(
                "the range {range:?} is empty or outside the node's {words} words"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> NodeInfo {
        NodeInfo {
            node: NodeId(1),
            nodes: 3,
            words: 8,
            threads: 2,
            gid: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
            lid: 0,
            addr: 0x7f00_1234_5000,
            rkey: 0xabcd,
            responders: vec![vec![10, 11], vec![12, 13], vec![14, 15]],
            requesters: vec![vec![20, 21], vec![22, 23], vec![24, 25]],
        }
    }

    #[test]
    fn peer_info_round_trips_and_picks_keys_by_word() {
        let peer = PeerInfo {
            info: info(),
            ranges: vec![RemoteRange {
                start: 2,
                words: 3,
                rkey: 0x1234,
            }],
        };
        assert_eq!(PeerInfo::from_bytes(&peer.to_bytes()).unwrap(), peer);
        let keys: Vec<u32> = (0..8).map(|word| peer.rkey_of(word)).collect();
        assert_eq!(
            keys,
            [
                0xabcd, 0xabcd, 0x1234, 0x1234, 0x1234, 0xabcd, 0xabcd, 0xabcd
            ]
        );
        let mut outside = peer.clone();
        outside.ranges[0].words = 7;
        assert!(matches!(
            PeerInfo::from_bytes(&outside.to_bytes()),
            Err(VerbsError::BadNodeInfo { .. })
        ));
        assert!(PeerInfo::from_bytes(&info().to_bytes()).is_err());
        let mut trailing = peer.to_bytes();
        trailing.push(0);
        assert!(PeerInfo::from_bytes(&trailing).is_err());
    }

    #[test]
    fn bytes_round_trip() {
        let info = info();
        assert_eq!(NodeInfo::from_bytes(&info.to_bytes()).unwrap(), info);
    }

    #[test]
    fn bad_bytes_are_typed_errors() {
        let bytes = info().to_bytes();
        let reason = |bytes: &[u8]| match NodeInfo::from_bytes(bytes) {
            Err(VerbsError::BadNodeInfo { reason }) => reason,
            other => panic!("expected BadNodeInfo, got {other:?}"),
        };
        assert!(reason(b"{\"json\": 1}").contains("does not start with"));
        assert!(reason(&bytes[..bytes.len() - 1]).contains("ends"));
        assert!(reason(&[]).contains("ends"));
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(reason(&trailing).contains("follow the end"));
        let mut version = bytes.clone();
        version[4] = 9;
        assert!(reason(&version).contains("version 9"));
        let mut outside = info();
        outside.node = NodeId(3);
        assert!(reason(&outside.to_bytes()).contains("not a node"));
        let mut ragged = info();
        ragged.requesters[2].pop();
        assert!(reason(&ragged.to_bytes()).contains("requester table"));
    }
}
