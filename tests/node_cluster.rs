//! Three `velos node` processes over real RDMA: they decide entries, the leader's process
//! is killed, the survivors elect a new leader and go on deciding. From what the processes
//! printed (one JSON line `{"slot":N,"value":"hex"}` per applied entry), every replica's
//! log is gap-free in slot order, the replicas agree slot by slot, no entry node 0 printed
//! as committed before it died is missing from the survivors' logs, and the survivors
//! applied entries proposed by one of them after the kill.
//!
//! The binary is `VELOS_BIN` when set (the soft-RoCE guest, where the compile-time path does
//! not exist), else cargo's. Without an RDMA device the test prints a skip message and
//! passes, unless `VELOS_REQUIRE_RDMA=1`. `VELOS_RDMA_DEVICE` and `VELOS_RDMA_GID_INDEX`
//! choose the device, as for velos-rdma's tests.
//!
//! Timing. `LogConfig`'s defaults (heartbeat every 1 µs, suspicion after 20 µs of the
//! node's wall clock) suit real RDMA. Under soft-RoCE in a TCG-emulated guest one
//! operation takes tens of µs and three spinning processes share two vCPUs, so a live
//! replica's heartbeat routinely stands still for milliseconds: with the defaults every
//! replica suspects the others and leadership flaps (seen in the soft-RoCE guest: with the
//! defaults the followers trailed node 0 by about 100 entries, and after the kill node 2
//! led alone while node 1 stayed at 9 applied entries for 150 s). The nodes here run with
//! `--heartbeat-period 2ms --failure-timeout 1s`; the waits below are generous for the same
//! reason (under TCG the whole test takes a few seconds).
#![cfg(feature = "verbs")]

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const HEARTBEAT_PERIOD: &str = "2ms";
const FAILURE_TIMEOUT: &str = "1s";
/// Log slots: room for everything the test can decide, even on fast hardware (node 0
/// proposes at most `LEADER_VALUES` before it is killed).
const SLOTS: &str = "65536";
const LEADER_VALUES: &str = "500";
const SURVIVOR_VALUES: &str = "50000";
/// How long the processes may take to connect and decide a first entry.
const FIRST_COMMIT_WITHIN: Duration = Duration::from_secs(180);
/// Node 0 is killed once it has applied this many entries…
const KILL_AFTER_ENTRIES: usize = 300;
/// …or this long after its first, whichever comes first.
const KILL_AFTER_TIME: Duration = Duration::from_secs(20);
/// After the kill, each survivor must apply this many entries proposed by a survivor…
const NEW_ENTRIES: usize = 200;
/// …within this long.
const NEW_ENTRIES_WITHIN: Duration = Duration::from_secs(150);

/// Whether the environment demands a device (`VELOS_REQUIRE_RDMA=1`).
fn rdma_required() -> bool {
    std::env::var("VELOS_REQUIRE_RDMA").is_ok_and(|v| v == "1")
}

/// Whether this machine has an RDMA device (after a skip message when it has none and
/// none is required).
fn device_present() -> bool {
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

fn velos_bin() -> String {
    std::env::var("VELOS_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_velos").to_owned())
}

/// One applied entry and when the test read it.
#[derive(Clone, Debug)]
struct Entry {
    slot: u64,
    value: String,
    at: Instant,
}

impl Entry {
    /// The replica that proposed the entry (values start with the proposer's id, little
    /// endian); `None` for a no-op.
    fn proposer(&self) -> Option<u16> {
        let b = |i: usize| u16::from_str_radix(self.value.get(2 * i..2 * i + 2)?, 16).ok();
        Some(b(0)? | (b(1)? << 8))
    }
}

/// A running `velos node` and what it printed so far.
struct Node {
    id: u16,
    child: Child,
    entries: Arc<Mutex<Vec<Entry>>>,
    stderr: Arc<Mutex<String>>,
    readers: Vec<JoinHandle<()>>,
}

impl Node {
    fn spawn(config: &str, id: u16, values: &str) -> Node {
        let mut child = Command::new(velos_bin())
            .args([
                "node",
                "--config",
                config,
                "--id",
                &id.to_string(),
                "--values",
                values,
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
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("velos node starts");
        let entries = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        let e = Arc::clone(&entries);
        let stdout_reader = std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let v: serde_json::Value = serde_json::from_str(&line)
                    .unwrap_or_else(|error| panic!("node {id}: {line:?} is not JSON: {error}"));
                let entry = Entry {
                    slot: v["slot"].as_u64().expect("a slot"),
                    value: v["value"].as_str().expect("a value").to_owned(),
                    at: Instant::now(),
                };
                e.lock().unwrap().push(entry);
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
            stderr,
            readers: vec![stdout_reader, stderr_reader],
        }
    }

    fn entries(&self) -> Vec<Entry> {
        self.entries.lock().unwrap().clone()
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Fails the test if the process has exited.
    fn assert_running(&mut self, what: &str) {
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
    fn kill(mut self) -> Vec<Entry> {
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
fn wait_for(nodes: &mut [&mut Node], within: Duration, what: &str, done: impl Fn() -> bool) {
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
fn assert_gap_free(id: u16, log: &[Entry]) {
    for (i, e) in log.iter().enumerate() {
        assert_eq!(
            e.slot, i as u64,
            "node {id}: entry {i} is slot {} (gap or reordering)",
            e.slot
        );
    }
}

/// Entries per second between the first and the last of `log`.
fn rate(log: &[Entry]) -> f64 {
    match (log.first(), log.last()) {
        (Some(a), Some(b)) if log.len() > 1 => {
            (log.len() - 1) as f64 / b.at.duration_since(a.at).as_secs_f64().max(1e-9)
        }
        _ => 0.0,
    }
}

#[test]
fn a_cluster_survives_the_leaders_death_and_loses_nothing_committed() {
    if !device_present() {
        return;
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    // Free ports on 127.0.0.1 (released right away; the nodes bind them again).
    let ports: Vec<u16> = (0..3)
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port()
        })
        .collect();
    let mut text = String::from("cluster_id = \"node-cluster-test\"\n");
    for (id, port) in ports.iter().enumerate() {
        text += &format!("[[node]]\nid = {id}\naddress = \"127.0.0.1:{port}\"\n");
    }
    let config = dir.path().join("cluster.toml");
    std::fs::write(&config, text).expect("cluster file written");
    let config = config.display().to_string();

    let started = Instant::now();
    let mut n0 = Node::spawn(&config, 0, LEADER_VALUES);
    let mut n1 = Node::spawn(&config, 1, SURVIVOR_VALUES);
    let mut n2 = Node::spawn(&config, 2, SURVIVOR_VALUES);

    // Node 0 leads first (Ω: the lowest live id) and decides entries.
    let e0 = Arc::clone(&n0.entries);
    wait_for(
        &mut [&mut n0, &mut n1, &mut n2],
        FIRST_COMMIT_WITHIN,
        "first entry applied by node 0",
        || !e0.lock().unwrap().is_empty(),
    );
    let first = Instant::now();
    println!(
        "node 0 applied its first entry {:.1} s after the start",
        first.duration_since(started).as_secs_f64()
    );
    let e0 = Arc::clone(&n0.entries);
    wait_for(
        &mut [&mut n0, &mut n1, &mut n2],
        KILL_AFTER_TIME + Duration::from_secs(1),
        "entries before the kill",
        || e0.lock().unwrap().len() >= KILL_AFTER_ENTRIES || first.elapsed() >= KILL_AFTER_TIME,
    );
    n1.assert_running("before the kill");
    n2.assert_running("before the kill");
    let log0 = n0.kill();
    let killed = Instant::now();
    let at_kill = [n1.entries().len(), n2.entries().len()];
    println!(
        "killed node 0 after it applied {} entries ({:.0} entries/s); survivors had {:?}",
        log0.len(),
        rate(&log0),
        at_kill
    );
    assert!(
        log0.iter().any(|e| e.proposer() == Some(0)),
        "node 0 led first: some entry it applied is its own"
    );

    // The survivors elect a new leader and decide entries that one of them proposed.
    let (e1, e2) = (Arc::clone(&n1.entries), Arc::clone(&n2.entries));
    let new = |log: &Mutex<Vec<Entry>>| {
        log.lock()
            .unwrap()
            .iter()
            .filter(|e| e.at >= killed && matches!(e.proposer(), Some(1 | 2)))
            .count()
    };
    wait_for(
        &mut [&mut n1, &mut n2],
        NEW_ENTRIES_WITHIN,
        "entries proposed by a survivor",
        || new(&e1) >= NEW_ENTRIES && new(&e2) >= NEW_ENTRIES,
    );
    let took = killed.elapsed();
    n1.assert_running("at the end");
    n2.assert_running("at the end");
    let logs = [n1.kill(), n2.kill()];

    // Every log is gap-free; the replicas agree slot by slot.
    assert_gap_free(0, &log0);
    for (i, log) in logs.iter().enumerate() {
        assert_gap_free(i as u16 + 1, log);
    }
    let all = [&log0, &logs[0], &logs[1]];
    for a in 0..3 {
        for b in a + 1..3 {
            for (x, y) in all[a].iter().zip(all[b]) {
                assert_eq!(
                    x.value, y.value,
                    "nodes {a} and {b} disagree on slot {}",
                    x.slot
                );
            }
        }
    }
    // Nothing node 0 applied is lost: both survivors have it, at the same slot.
    for (i, log) in logs.iter().enumerate() {
        assert!(
            log.len() > log0.len(),
            "node {} has {} entries, fewer than the {} node 0 applied",
            i + 1,
            log.len(),
            log0.len()
        );
    }
    // The new leader's entries came after the kill.
    let leader_after: Vec<u16> = logs[0]
        .iter()
        .filter_map(Entry::proposer)
        .filter(|&p| p != 0)
        .collect();
    for (i, log) in logs.iter().enumerate() {
        let after: Vec<Entry> = log.iter().filter(|e| e.at >= killed).cloned().collect();
        let own: Vec<Entry> = after
            .iter()
            .filter(|e| matches!(e.proposer(), Some(1 | 2)))
            .cloned()
            .collect();
        println!(
            "node {}: {} entries, {} at the kill, {} applied after it ({} proposed by a survivor, {:.0} entries/s)",
            i + 1,
            log.len(),
            at_kill[i],
            after.len(),
            own.len(),
            rate(&own)
        );
    }
    println!(
        "take-over: {NEW_ENTRIES} survivor entries on each survivor {:.1} s after the kill (failure timeout {FAILURE_TIMEOUT}); survivor proposers seen: {:?}",
        took.as_secs_f64(),
        {
            let mut p = leader_after.clone();
            p.dedup();
            p
        }
    );
}
