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

/// Why a cluster file cannot be used. A file that was read but is wrong says
/// `PATH:LINE: message`.
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
    #[error("{path}:{line}: malformed cluster file: {message}")]
    Syntax {
        /// The path.
        path: String,
        /// The 1-based line the TOML parser points at.
        line: usize,
        /// What the parser said.
        message: String,
    },
    /// The content breaks a rule.
    #[error("{path}:{line}: {message}")]
    Invalid {
        /// The path.
        path: String,
        /// The 1-based line of the offending value (the last line when the file lacks one).
        line: usize,
        /// Which rule, in words.
        message: String,
    },
}

/// The file as written, with where each value stands (for the line of an error).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    cluster_id: toml::Spanned<String>,
    node: toml::Spanned<Vec<RawNode>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    id: toml::Spanned<u16>,
    address: toml::Spanned<String>,
}

/// The 1-based line of byte `offset` of `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// One line for a message that may have several.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
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
        let raw: RawFile = toml::from_str(text).map_err(|e| ClusterFileError::Syntax {
            path: name.to_string(),
            line: line_of(text, e.span().map_or(0, |span| span.start)),
            message: one_line(e.message()),
        })?;
        let invalid = |offset: usize, message: String| ClusterFileError::Invalid {
            path: name.to_string(),
            line: line_of(text, offset),
            message,
        };
        if raw.cluster_id.get_ref().trim().is_empty() {
            return Err(invalid(
                raw.cluster_id.span().start,
                "the cluster_id is empty".into(),
            ));
        }
        if raw.node.get_ref().is_empty() {
            return Err(invalid(raw.node.span().start, "no [[node]] entries".into()));
        }
        let mut nodes = raw.node.into_inner();
        nodes.sort_by_key(|n| *n.id.get_ref());
        for (i, node) in nodes.iter().enumerate() {
            if usize::from(*node.id.get_ref()) != i {
                return Err(invalid(
                    node.id.span().start,
                    format!(
                        "node ids must be 0 to {} each once; found {} where {i} belongs",
                        nodes.len() - 1,
                        node.id.get_ref()
                    ),
                ));
            }
        }
        let mut addresses: Vec<&toml::Spanned<String>> = nodes.iter().map(|n| &n.address).collect();
        addresses.sort_by_key(|a| (a.get_ref(), a.span().start));
        if let Some(w) = addresses
            .windows(2)
            .find(|w| w[0].get_ref() == w[1].get_ref())
        {
            return Err(invalid(
                w[1].span().start,
                format!("the address {:?} appears twice", w[1].get_ref()),
            ));
        }
        Ok(ClusterFile {
            cluster_id: raw.cluster_id.into_inner(),
            nodes: nodes
                .into_iter()
                .map(|n| NodeEntry {
                    id: n.id.into_inner(),
                    address: n.address.into_inner(),
                })
                .collect(),
        })
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

    #[test]
    fn errors_name_the_file_and_the_line() {
        let cases = [
            (
                "cluster_id = \"c\"\n[[node]]\nid = 0\naddress = \"a:1\"\n[[node]]\nid = 0\naddress = \"a:2\"\n",
                "bad.toml:6: node ids must be 0 to 1 each once; found 0 where 1 belongs",
            ),
            (
                "cluster_id = \"c\"\n[[node]]\nid = 0\naddress = \"a:1\"\n\n[[node]]\nid = 1\naddress = \"a:1\"\n",
                "bad.toml:8: the address \"a:1\" appears twice",
            ),
            (
                "# c\ncluster_id = \"\"\nnode = []\n",
                "bad.toml:2: the cluster_id is empty",
            ),
            (
                "cluster_id = \"c\"\nnode = []\n",
                "bad.toml:2: no [[node]] entries",
            ),
            (
                "cluster_id = \"c\"\n[[node]]\nid = 70000\naddress = \"a:1\"\n",
                "bad.toml:3: malformed cluster file: ",
            ),
            (
                "cluster_id = \"c\"\n[[node]\n",
                "bad.toml:2: malformed cluster file: ",
            ),
            ("", "bad.toml:1: malformed cluster file: "),
        ];
        for (text, start) in cases {
            let e = ClusterFile::parse(text, "bad.toml")
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(start), "{e:?} should start with {start:?}");
            assert!(!e.contains('\n'), "{e:?} is one line");
        }
    }
}
