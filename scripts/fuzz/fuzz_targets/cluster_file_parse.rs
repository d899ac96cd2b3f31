//! The cluster-file parser (`ClusterFile::parse`) on any text: no panic, and every error is
//! `NAME:LINE: message`; a file it accepts keeps its rules.
#![no_main]

// The root package's own source, compiled in: it needs only serde, thiserror and toml, so the
// fuzz build does not have to instrument the whole `velos` crate and its dependencies.
#[path = "../../../src/cluster_file.rs"]
#[allow(dead_code)]
mod cluster_file;

use cluster_file::ClusterFile;
use libfuzzer_sys::fuzz_target;
use velos_fuzz::check_error;

const NAME: &str = "fuzz.toml";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match ClusterFile::parse(&text, NAME) {
        Ok(file) => {
            assert!(!file.is_empty());
            assert!(!file.cluster_id.trim().is_empty());
            for (i, node) in file.nodes.iter().enumerate() {
                assert_eq!(usize::from(node.id), i, "ids in order");
            }
        }
        Err(error) => check_error(&error.to_string(), NAME, text.as_bytes()),
    }
});
