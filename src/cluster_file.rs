//! The static cluster file: which nodes form a Velos cluster, where each one listens for
//! connection setup, and the cluster's id (a process presenting another id is refused).
//!
//! ```toml
//! cluster_id = "orders-eu-1"
//!
//! [[node]]
//! id = 0
//! address = "127.0.0.1:7400"
//!
//! [[node]]
//! id = 1
//! address = "127.0.0.1:7401"
//! ```
//!
//! Node ids are 0, 1, …, n − 1, each once; addresses are distinct.

use serde::Deserialize;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;

/// One node of the file.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeEntry {
    /// The node id (also the replica id and the proposer id).
    pub id: u16,
    /// Where the node listens for connection setup (`host:port`).
    pub address: String,
}

/// A cluster file, checked.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterFile {
    /// The cluster's id: every member must present the same.
    pub cluster_id: String,
    /// The nodes, in id order once checked.
    #[serde(rename = "node")]
    pub nodes: Vec<NodeEntry>,
}

/// Why a cluster file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ClusterFileError {
    /// The file could not be read.
    #[error("cannot read the cluster file {path}: {source}")]
    Read {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not valid TOML of the expected shape.
    #[error("the cluster file {path} is malformed: {message}")]
    Syntax {
        /// The path.
        path: String,
        /// What the parser said.
        message: String,
    },
    /// The content breaks a rule.
    #[error("the cluster file {path}: {message}")]
    Invalid {
        /// The path.
        path: String,
        /// Which rule, in words.
        message: String,
    },
}

impl ClusterFile {
    /// Reads and checks the file at `path`.
    pub fn load(path: &Path) -> Result<ClusterFile, ClusterFileError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ClusterFileError::Read {
            path: name.clone(),
            source,
        })?;
        ClusterFile::parse(&text, &name)
    }

    /// Parses and checks `text` (`name` names it in errors).
    pub fn parse(text: &str, name: &str) -> Result<ClusterFile, ClusterFileError> {
        let mut file: ClusterFile = toml::from_str(text).map_err(|e| ClusterFileError::Syntax {
            path: name.to_string(),
            message: e.message().to_string(),
        })?;
        let invalid = |message: String| ClusterFileError::Invalid {
            path: name.to_string(),
            message,
        };
        if file.cluster_id.trim().is_empty() {
            return Err(invalid("the cluster_id is empty".into()));
        }
        if file.nodes.is_empty() {
            return Err(invalid("no [[node]] entries".into()));
        }
        file.nodes.sort_by_key(|n| n.id);
        for (i, node) in file.nodes.iter().enumerate() {
            if usize::from(node.id) != i {
                return Err(invalid(format!(
                    "node ids must be 0 to {} each once; found {} where {i} belongs",
                    file.nodes.len() - 1,
                    node.id
                )));
            }
        }
        let mut addresses: Vec<&str> = file.nodes.iter().map(|n| n.address.as_str()).collect();
        addresses.sort_unstable();
        if let Some(w) = addresses.windows(2).find(|w| w[0] == w[1]) {
            return Err(invalid(format!("the address {} appears twice", w[0])));
        }
        assert!(
            file.nodes
                .iter()
                .enumerate()
                .all(|(i, n)| usize::from(n.id) == i),
            "checked: ids in order"
        );
        Ok(file)
    }

    /// The number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    /// Whether the file names no node (never, once checked).
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Node `id`'s entry.
    pub fn node(&self, id: u16) -> Option<&NodeEntry> {
        self.nodes.get(usize::from(id))
    }

    /// Node `id`'s address, resolved.
    pub fn socket_address(&self, id: u16) -> std::io::Result<SocketAddr> {
        let entry = self.node(id).ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("node {id} is not in the cluster file"),
            )
        })?;
        entry.address.to_socket_addrs()?.next().ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("the address {} resolves to nothing", entry.address),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
        cluster_id = "c1"
        [[node]]
        id = 1
        address = "127.0.0.1:7401"
        [[node]]
        id = 0
        address = "127.0.0.1:7400"
    "#;

    #[test]
    fn a_good_file_is_read_in_id_order() {
        let f = ClusterFile::parse(GOOD, "good.toml").unwrap();
        assert_eq!(f.len(), 2);
        assert_eq!(f.node(1).unwrap().address, "127.0.0.1:7401");
        assert_eq!(f.socket_address(0).unwrap().port(), 7400);
    }

    #[test]
    fn bad_files_are_refused_with_their_reason() {
        let cases = [
            (
                "cluster_id = \"c\"\n[[node]]\nid = 1\naddress = \"a:1\"\n",
                "0 to 0",
            ),
            (
                "cluster_id = \"c\"\n[[node]]\nid = 0\naddress = \"a:1\"\n[[node]]\nid = 1\naddress = \"a:1\"\n",
                "appears twice",
            ),
            (
                "cluster_id = \" \"\n[[node]]\nid = 0\naddress = \"a:1\"\n",
                "empty",
            ),
            ("cluster_id = \"c\"\n", "malformed"),
            (
                "cluster_id = \"c\"\n[[node]]\nid = 0\naddress = \"a:1\"\nport = 3\n",
                "malformed",
            ),
        ];
        for (text, needle) in cases {
            let e = ClusterFile::parse(text, "bad.toml")
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{e:?} should say {needle:?}");
            assert!(e.contains("bad.toml"), "{e:?} names the file");
        }
    }
}
