//! Running `velos node` processes from a test: spawning, what they print, waiting.
//! Shared by `tests/node_cluster.rs`, `tests/node_embed.rs`, `tests/node_latency.rs`,
//! `tests/node_replace.rs` and `tests/node_durable.rs`.
//!
//! Timing. `LogConfig`'s defaults (heartbeat every 1 µs, suspicion after 20 µs of the
//! node's wall clock) suit real RDMA. Under soft-RoCE in a TCG-emulated guest one
//! operation takes tens of µs and three spinning processes share two vCPUs, so a live
//! replica's heartbeat routinely stands still for milliseconds: with the defaults every
//! replica suspects the others and leadership flaps (seen in the soft-RoCE guest: with the
//! defaults the followers trailed node 0 by about 100 entries, and after the kill node 2
//! led alone while node 1 stayed at 9 applied entries for 150 s). The nodes here run with
//! `--heartbeat-period 2ms --failure-timeout 1s`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const HEARTBEAT_PERIOD: &str = "2ms";
pub const FAILURE_TIMEOUT: &str = "1s";
/// Log slots: room for everything a test can decide, even on fast hardware.
pub const SLOTS: &str = "65536";
/// How long the processes may take to connect and decide a first entry.
pub const FIRST_COMMIT_WITHIN: Duration = Duration::from_secs(180);
/// After a kill, how long the survivors have to apply entries one of them proposed.
pub const NEW_ENTRIES_WITHIN: Duration = Duration::from_secs(150);

/// The proposals a node's handle acknowledged as committed (`--embed`: its
/// `{"proposal": K, "slot": S}` reports), by proposal number.
pub fn acknowledged(reports: &Mutex<Vec<serde_json::Value>>) -> Vec<u64> {
    reports
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r["slot"].is_u64())
        .filter_map(|r| r["proposal"].as_u64())
        .collect()
}

/// How many entries of `log` read at or after `since` one of `proposers` proposed.
pub fn proposed_since(log: &Mutex<Vec<Entry>>, since: Instant, proposers: &[u16]) -> usize {
    log.lock()
        .unwrap()
        .iter()
        .filter(|e| e.at >= since && e.proposer().is_some_and(|p| proposers.contains(&p)))
        .count()
}

/// A cluster file for three nodes on free ports of 127.0.0.1 in `dir`; its path.
pub fn cluster_file(dir: &std::path::Path, cluster_id: &str) -> String {
    // Free ports no outgoing connection takes before the nodes bind them.
    let ports = velos::loopback::free_ports(3).expect("three free ports");
    // Each test's own secret (its cluster id): the processes prove it to each other.
    let mut text =
        format!("cluster_id = \"{cluster_id}\"\nsecret = \"the secret of cluster {cluster_id}\"\n");
    for (id, port) in ports.iter().enumerate() {
        text += &format!("[[node]]\nid = {id}\naddress = \"127.0.0.1:{port}\"\n");
    }
    let config = dir.join("cluster.toml");
    std::fs::write(&config, text).expect("cluster file written");
    config.display().to_string()
}

/// Whether the environment demands a device (`VELOS_REQUIRE_RDMA=1`).
pub fn rdma_required() -> bool {
    std::env::var("VELOS_REQUIRE_RDMA").is_ok_and(|v| v == "1")
}

/// Whether this machine has an RDMA device (after a skip message when it has none and
/// none is required).
pub fn device_present() -> bool {
    use velos::rdma::verbs::VerbsNode;
    use velos::rdma::{Layout, NodeId};
    match VerbsNode::open(Layout::uniform(1, 8), NodeId(0), 1) {
        Ok(_) => true,
        Err(e) if e.is_no_device() && !rdma_required() => {
            println!("skipped node_cluster: {e} (VELOS_REQUIRE_RDMA=1 makes this a failure)");
            false
        }
        Err(e) => panic!("no usable RDMA device: {e}"),
    }
}

pub fn velos_bin() -> String {
    std::env::var("VELOS_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_velos").to_owned())
}

/// One applied entry and when the test read it.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The slot; with `--embed`, the command's number.
    pub slot: u64,
    /// With `--embed`, the log slot of the command's batch.
    pub batch: Option<u64>,
    pub value: String,
    pub at: Instant,
}

impl Entry {
    /// The replica that proposed the entry (values start with the proposer's id, little
    /// endian); `None` for a no-op.
    pub fn proposer(&self) -> Option<u16> {
        let b = |i: usize| u16::from_str_radix(self.value.get(2 * i..2 * i + 2)?, 16).ok();
        Some(b(0)? | (b(1)? << 8))
    }
}

/// A running `velos node` and what it printed so far.
pub struct Node {
    pub id: u16,
    child: Child,
    pub entries: Arc<Mutex<Vec<Entry>>>,
    /// Other JSON lines it printed (client outcomes, the latency summary).
    pub reports: Arc<Mutex<Vec<serde_json::Value>>>,
    /// When the test read each of `reports`.
    pub report_times: Arc<Mutex<Vec<Instant>>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

impl Node {
    /// Starts `velos node --config config --id id` with `args` after the common ones
    /// (16-byte values, `SLOTS` slots, the timing above, an hour to run).
    pub fn spawn(config: &str, id: u16, args: &[&str]) -> Node {
        let mut child = Command::new(velos_bin())
            .args([
                "node",
                "--config",
                config,
                "--id",
                &id.to_string(),
                "--value-size",
                "16",
                "--slots",
                SLOTS,
                "--run-for",
                "3600s",
                "--rendezvous-timeout",
                "120s",
                "--heartbeat-period",
                HEARTBEAT_PERIOD,
                "--failure-timeout",
                FAILURE_TIMEOUT,
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("velos node starts");
        let entries = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        let reports = Arc::new(Mutex::new(Vec::new()));
        let report_times = Arc::new(Mutex::new(Vec::new()));
        let (e, r) = (Arc::clone(&entries), Arc::clone(&reports));
        let times = Arc::clone(&report_times);
        let stdout_reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let v: serde_json::Value = serde_json::from_str(&line)
                    .unwrap_or_else(|error| panic!("node {id}: {line:?} is not JSON: {error}"));
                // `--embed` numbers the commands applied; a plain node, the slots.
                let number = v["command"].as_u64().or_else(|| v["slot"].as_u64());
                let batch = v["command"].as_u64().and(v["slot"].as_u64());
                match (number, v["value"].as_str()) {
                    (Some(slot), Some(value)) => e.lock().unwrap().push(Entry {
                        slot,
                        batch,
                        value: value.to_owned(),
                        at: Instant::now(),
                    }),
                    _ => {
                        let mut r = r.lock().unwrap();
                        r.push(v);
                        times.lock().unwrap().push(Instant::now());
                    }
                }
            }
        });
        let s = Arc::clone(&stderr);
        let stderr_reader = std::thread::spawn(move || {
            let mut err = err;
            let mut buf = [0u8; 4096];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                s.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Node {
            id,
            child,
            entries,
            reports,
            report_times,
            stderr,
            readers: vec![stdout_reader, stderr_reader],
        }
    }

    /// The first report with a number under `key`, and when it was read.
    pub fn reported(&self, key: &str) -> Option<(u64, Instant)> {
        let reports = self.reports.lock().unwrap();
        let at = reports.iter().position(|r| r[key].is_u64())?;
        let time = *self.report_times.lock().unwrap().get(at)?;
        Some((reports[at][key].as_u64()?, time))
    }

    pub fn entries(&self) -> Vec<Entry> {
        self.entries.lock().unwrap().clone()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Fails the test if the process has exited.
    pub fn assert_running(&mut self, what: &str) {
        if let Some(status) = self.child.try_wait().expect("try_wait") {
            std::thread::sleep(Duration::from_millis(200));
            panic!(
                "node {} exited ({status}) {what}; it applied {} entries; stderr:\n{}",
                self.id,
                self.entries().len(),
                self.stderr()
            );
        }
    }

    /// Kills the process and returns everything it printed.
    pub fn kill(mut self) -> Vec<Entry> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for r in std::mem::take(&mut self.readers) {
            r.join().expect("reader thread");
        }
        self.entries()
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `done` holds, checking the nodes stay alive; panics with `what` after
/// `within`.
pub fn wait_for(nodes: &mut [&mut Node], within: Duration, what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + within;
    loop {
        if done() {
            return;
        }
        for n in nodes.iter_mut() {
            n.assert_running(&format!("while waiting for {what}"));
        }
        if Instant::now() >= deadline {
            let mut report = String::new();
            for n in nodes.iter() {
                report += &format!(
                    "node {}: {} entries; stderr:\n{}\n",
                    n.id,
                    n.entries().len(),
                    n.stderr()
                );
            }
            panic!("no {what} within {within:?}\n{report}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The log is gap-free: slots 0, 1, 2, … in order.
pub fn assert_gap_free(id: u16, log: &[Entry]) {
    for (i, e) in log.iter().enumerate() {
        assert_eq!(
            e.slot, i as u64,
            "node {id}: entry {i} is slot {} (gap or reordering)",
            e.slot
        );
    }
}

/// Entries per second between the first and the last of `log`.
pub fn rate(log: &[Entry]) -> f64 {
    match (log.first(), log.last()) {
        (Some(a), Some(b)) if log.len() > 1 => {
            (log.len() - 1) as f64 / b.at.duration_since(a.at).as_secs_f64().max(1e-9)
        }
        _ => 0.0,
    }
}
