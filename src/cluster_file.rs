//! The static cluster file: which nodes form a Velos cluster, where each one listens for
//! connection setup, the cluster's id (a process presenting another id is refused) and
//! its secret, which every member proves it knows before any connection information is
//! exchanged ([`crate::rendezvous`]): `secret` in the file, or `secret_env`, the name of
//! an environment variable that holds it (so the file can be shared and the secret not).
//! A secret has at least [`SECRET_MIN_BYTES`] bytes.
//!
//! ```toml
//! cluster_id = "orders-eu-1"
//! secret_env = "VELOS_SECRET"
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

/// A cluster's secret has at least this many bytes.
pub const SECRET_MIN_BYTES: usize = 16;

/// Where a cluster's secret is.
#[derive(Clone, PartialEq, Eq)]
pub enum SecretSource {
    /// In the file itself.
    Inline(String),
    /// In the environment variable of this name, read when the secret is needed.
    Env(String),
}

impl std::fmt::Debug for SecretSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SecretSource::Inline(_) => f.write_str("Inline(<redacted>)"),
            SecretSource::Env(name) => f.debug_tuple("Env").field(name).finish(),
        }
    }
}

/// A cluster file, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterFile {
    /// The cluster's id: every member must present the same.
    pub cluster_id: String,
    /// Where the cluster's secret is.
    pub secret: SecretSource,
    /// The nodes, in id order once checked.
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
    secret: Option<toml::Spanned<String>>,
    secret_env: Option<toml::Spanned<String>>,
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
        let secret = match (raw.secret, raw.secret_env) {
            (Some(s), None) if s.get_ref().len() < SECRET_MIN_BYTES => {
                return Err(invalid(
                    s.span().start,
                    format!("the secret has fewer than {SECRET_MIN_BYTES} bytes"),
                ));
            }
            (Some(s), None) => SecretSource::Inline(s.into_inner()),
            (None, Some(name)) if name.get_ref().trim().is_empty() => {
                return Err(invalid(name.span().start, "the secret_env is empty".into()));
            }
            (None, Some(name)) => SecretSource::Env(name.into_inner()),
            (Some(_), Some(name)) => {
                return Err(invalid(
                    name.span().start,
                    "both secret and secret_env: name one".into(),
                ));
            }
            (None, None) => {
                return Err(invalid(
                    raw.cluster_id.span().start,
                    "no secret: add `secret = \"…\"` or `secret_env = \"VARIABLE\"` \
                     (the rendezvous proves it both ways)"
                        .into(),
                ));
            }
        };
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
            secret,
            nodes: nodes
                .into_iter()
                .map(|n| NodeEntry {
                    id: n.id.into_inner(),
                    address: n.address.into_inner(),
                })
                .collect(),
        })
    }

    /// The cluster's secret, read from the environment if the file names a variable;
    /// why not if it cannot be had (the variable unset, or shorter than
    /// [`SECRET_MIN_BYTES`]).
    pub fn secret(&self) -> Result<Vec<u8>, String> {
        let bytes = match &self.secret {
            SecretSource::Inline(s) => s.clone().into_bytes(),
            SecretSource::Env(name) => std::env::var(name)
                .map_err(|e| format!("the secret's variable {name}: {e}"))?
                .into_bytes(),
        };
        if bytes.len() < SECRET_MIN_BYTES {
            return Err(format!(
                "the cluster's secret has {} bytes, fewer than {SECRET_MIN_BYTES}",
                bytes.len()
            ));
        }
        Ok(bytes)
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
        secret = "sixteen bytes at least"
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
                "cluster_id = \"c\"\nsecret = \"0123456789abcdef\"\n[[node]]\nid = 1\naddress = \"a:1\"\n",
                "0 to 0",
            ),
            (
                "cluster_id = \"c\"\nsecret = \"0123456789abcdef\"\n[[node]]\nid = 0\naddress = \"a:1\"\n[[node]]\nid = 1\naddress = \"a:1\"\n",
                "appears twice",
            ),
            (
                "cluster_id = \" \"\nsecret = \"0123456789abcdef\"\n[[node]]\nid = 0\naddress = \"a:1\"\n",
                "empty",
            ),
            (
                "cluster_id = \"c\"\nsecret = \"0123456789abcdef\"\n",
                "malformed",
            ),
            (
                "cluster_id = \"c\"\nsecret = \"0123456789abcdef\"\n[[node]]\nid = 0\naddress = \"a:1\"\nport = 3\n",
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
                "cluster_id = \"c\"\nsecret = \"0123456789abcdef\"\n[[node]]\nid = 0\naddress = \"a:1\"\n[[node]]\nid = 0\naddress = \"a:2\"\n",
                "bad.toml:7: node ids must be 0 to 1 each once; found 0 where 1 belongs",
            ),
            (
                "cluster_id = \"c\"\nsecret = \"0123456789abcdef\"\n[[node]]\nid = 0\naddress = \"a:1\"\n\n[[node]]\nid = 1\naddress = \"a:1\"\n",
                "bad.toml:9: the address \"a:1\" appears twice",
            ),
            (
                "# c\ncluster_id = \"\"\nsecret = \"0123456789abcdef\"\nnode = []\n",
                "bad.toml:2: the cluster_id is empty",
            ),
            (
                "cluster_id = \"c\"\nsecret = \"0123456789abcdef\"\nnode = []\n",
                "bad.toml:3: no [[node]] entries",
            ),
            (
                "cluster_id = \"c\"\nsecret = \"0123456789abcdef\"\n[[node]]\nid = 70000\naddress = \"a:1\"\n",
                "bad.toml:4: malformed cluster file: ",
            ),
            (
                "cluster_id = \"c\"\nsecret = \"0123456789abcdef\"\n[[node]\n",
                "bad.toml:3: malformed cluster file: ",
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

    #[test]
    fn the_secret_is_in_the_file_or_a_variable_and_long_enough() {
        let nodes = "[[node]]\nid = 0\naddress = \"a:1\"\n";
        let parse = |head: &str| ClusterFile::parse(&format!("{head}{nodes}"), "s.toml");
        let f = parse("cluster_id = \"c\"\nsecret = \"0123456789abcdef\"\n").unwrap();
        assert_eq!(f.secret().unwrap(), b"0123456789abcdef");
        assert!(!format!("{f:?}").contains("0123"), "Debug hides it: {f:?}");
        let cases = [
            ("cluster_id = \"c\"\n", "s.toml:1: no secret"),
            (
                "cluster_id = \"c\"\nsecret = \"short\"\n",
                "s.toml:2: the secret has fewer than 16",
            ),
            (
                "cluster_id = \"c\"\nsecret_env = \" \"\n",
                "s.toml:2: the secret_env is empty",
            ),
            (
                "cluster_id = \"c\"\nsecret = \"0123456789abcdef\"\nsecret_env = \"V\"\n",
                "s.toml:3: both secret and secret_env",
            ),
        ];
        for (head, start) in cases {
            let e = parse(head).unwrap_err().to_string();
            assert!(e.starts_with(start), "{e:?} should start with {start:?}");
        }
        let var = "VELOS_TEST_SECRET_OF_THE_CLUSTER_FILE_TEST";
        let f = parse(&format!("cluster_id = \"c\"\nsecret_env = \"{var}\"\n")).unwrap();
        let unset = f.secret().unwrap_err();
        assert!(unset.contains(var), "{unset}");
        // A variable every process has (tests may not set one: no `unsafe`).
        let f = parse("cluster_id = \"c\"\nsecret_env = \"PATH\"\n").unwrap();
        let path = std::env::var("PATH").expect("PATH is set");
        match f.secret() {
            Ok(secret) => assert_eq!(secret, path.into_bytes()),
            Err(e) => assert!(path.len() < 16 && e.contains("fewer than 16"), "{e}"),
        }
    }
}
