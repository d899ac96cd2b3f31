//! A replicated key-value service embedded in one process, through `velos::embed`: three
//! Velos replicas on threads, each applying the log to a `BTreeMap<String, String>`. The
//! program writes through the leader (one write at a time, then a pipelined burst that the
//! leader packs into batches), crashes the leader, keeps writing under the next one in a
//! client session (each write applied once, retries included), reads a key through the
//! log (the state machine's response answers it), and checks that the survivors' maps are
//! identical and hold every write.
//!
//! `cargo run --release --example replicated_kv`; `cargo run --release -- demo` runs a
//! service like it with concurrent clients and prints a timeline.

use anyhow::{Context, ensure};
use std::time::Duration;
use velos::embed::{Cluster, Config, Receipt, Role};

mod kv_store;
use kv_store::KvStore;

fn main() -> anyhow::Result<()> {
    let stores = (0..3).map(|_| KvStore::default());
    let cluster = Cluster::start(Config::new(3), stores)?;

    // One write at a time: each returns once committed and applied at the leader.
    for i in 0..100 {
        let info = cluster.submit(kv_store::put(&format!("k{}", i % 10), &format!("a{i}"))?)?;
        ensure!(info.leader == 0, "replica 0 leads first");
        // The response: the value this put replaced.
        let replaced = (i >= 10).then(|| format!("a{}", i - 10));
        ensure!(
            info.response == replaced,
            "put {i} replaced {:?}",
            info.response
        );
    }
    // A pipelined burst: many receipts in flight, packed into batches by the leader.
    let receipts: Vec<Receipt<Option<String>>> = (0..1000)
        .map(|i| {
            Ok(cluster.propose_async(kv_store::put(&format!("k{}", i % 10), &format!("b{i}"))?))
        })
        .collect::<anyhow::Result<_>>()?;
    for r in receipts {
        r.wait().context("a pipelined write")?;
    }
    let leader = cluster.leader().context("a leader")?;
    println!("replica {leader} leads; {}", cluster.metrics_line());

    cluster.crash(leader)?;
    // A client session: each write applies once, even if it is sent again because its
    // leader crashed holding it; `submit` follows the leadership change (a failure
    // timeout of 50 ms).
    let mut session = cluster.session();
    for i in 0..100 {
        let info = session.submit(kv_store::put(&format!("k{}", i % 10), &format!("c{i}"))?)?;
        let replaced = if i < 10 {
            format!("b{}", 990 + i)
        } else {
            format!("c{}", i - 10)
        };
        ensure!(
            info.response.as_deref() == Some(replaced.as_str()),
            "put {i}: {:?}",
            info.response
        );
    }
    let read = cluster.submit(b"k3".to_vec())?; // a get, answered through the log
    ensure!(
        read.response.as_deref() == Some("c93"),
        "k3 reads {:?}",
        read.response
    );
    let next = cluster.leader().context("a new leader")?;
    ensure!(next != leader && cluster.role(leader) == Role::Crashed);
    println!(
        "replica {next} leads after the crash; {}",
        cluster.metrics_line()
    );

    cluster.catch_up(Duration::from_secs(10))?; // the follower applies the last writes
    let machines = cluster.shutdown();
    let maps: Vec<_> = machines.into_iter().flatten().map(|s| s.0).collect();
    ensure!(maps.len() == 2, "two survivors");
    ensure!(maps[0] == maps[1], "the survivors' maps differ: {maps:?}");
    for k in 0..10 {
        let last = (0..100).filter(|i| i % 10 == k).max().unwrap_or(0);
        let key = format!("k{k}");
        ensure!(maps[0].get(&key) == Some(&format!("c{last}")), "{key}");
    }
    println!("survivors agree: {:?}", maps[0]);
    Ok(())
}

/// A one-line summary of a cluster's metrics.
trait MetricsLine {
    fn metrics_line(&self) -> String;
}

impl MetricsLine for Cluster<KvStore> {
    fn metrics_line(&self) -> String {
        let m = self.metrics();
        format!(
            "{} commits in {} batches (up to {} commands), {} leader change(s), commit p50 {:?}",
            m.committed,
            m.batches,
            m.batch_commands_max,
            m.leader_changes(),
            m.latency_at(0.5)
        )
    }
}
