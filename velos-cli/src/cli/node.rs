//! `velos node`: one replica of a Velos log as a process over real RDMA; the other
//! processes of the cluster file are its peers. Prints every committed entry as a JSON line
//! (`{"slot": N, "value": "hex"}`) as it is applied; with `--client stdin`, also each
//! proposal's outcome (`{"proposal": N, "slot": S}` or `{"proposal": N, "error": "..."}`);
//! with `--client closed-loop`, the decision latencies once every value is decided
//! (`{"latency": {"count": N, "p50_us": …, …}}`). With `--join`, the process joins the
//! running cluster in a crashed replica's place (`{"joined": incarnation}`, then
//! `{"voting": incarnation}` once it votes); the others print `{"replaced": node,
//! "incarnation": N}` when it connects. With `--embed --data-dir DIR` the replica keeps its
//! log on disk (`{"disk": S}` at the start: what its directory held; the leader prints
//! `{"durable": S}` as the durable index moves); after a power loss of every node, each
//! restarts with `--recover` and they go on from the longest log any of them recovered.

use super::flags::MAX_DURATION_NS;
use super::flags::{duration, number};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use velos::cluster_file::ClusterFile;
use velos::core::log::LogConfig;
use velos_cli::node::{Client, NodeError, NodeSpec, Start, run};

/// Arguments of `velos node`.
#[derive(Args)]
pub struct NodeArgs {
    /// The cluster file (TOML: `cluster_id`, `secret` or `secret_env`, `[[node]]` entries
    /// with `id` and `address`).
    #[arg(long)]
    config: PathBuf,
    /// This node's id in the file.
    #[arg(long)]
    id: u16,
    /// What this node proposes while it leads: `script` pipelines `--values` generated
    /// values; `closed-loop` proposes them one at a time and reports decision latencies;
    /// `stdin` proposes each line of standard input (hex) and reports its outcome.
    #[arg(long, value_enum, default_value_t = ClientArg::Script)]
    client: ClientArg,
    /// Values the `script` and `closed-loop` clients propose.
    #[arg(long, default_value_t = 1000)]
    values: u64,
    /// Bytes per value, 10 to 65536.
    #[arg(long, default_value_t = 16, value_parser = number::<usize>(10, 65_536, " bytes"))]
    value_size: usize,
    /// Log slots (the same on every node), 1 to 2^24.
    #[arg(long, default_value_t = 4096, value_parser = number::<u32>(1, 1 << 24, ""))]
    slots: u32,
    /// Stop after this long (`10s`, `500ms`, …; 1ns to 3600s).
    #[arg(long, default_value = "10s", value_parser = duration(1, MAX_DURATION_NS))]
    run_for: u64,
    /// How long to wait for the other processes at connection setup (1ns to 3600s).
    #[arg(long, default_value = "30s", value_parser = duration(1, MAX_DURATION_NS))]
    rendezvous_timeout: u64,
    /// How often the replica bumps its heartbeat and reads the others' (the same on every
    /// node). The default suits real RDMA; on a slow machine (soft-RoCE under emulation,
    /// where one operation takes tens of µs) use milliseconds.
    #[arg(long, default_value = "1us", value_parser = duration(1, MAX_DURATION_NS))]
    heartbeat_period: u64,
    /// A replica whose heartbeat has not moved for this long is suspected (Ω); must exceed
    /// two heartbeat periods. Under emulation, or with more busy processes than CPUs, a
    /// live replica can stall for milliseconds: use a timeout well above that, or
    /// leadership flaps.
    #[arg(long, default_value = "20us", value_parser = duration(1, MAX_DURATION_NS))]
    failure_timeout: u64,
    /// Run the replica through the embedding handle (`velos::embed::Node`), as a service
    /// embedding Velos would: the `script` client proposes its values through it,
    /// batched, and every command applied is printed (`{"command": N, "slot": S,
    /// "index": I, "value": "hex"}`), with each proposal's outcome.
    #[arg(long)]
    embed: bool,
    /// Join the running cluster in this node's place, as a fresh process replacing a
    /// crashed one: its memory starts blank, it copies the log from the others, and it
    /// votes once the leader has made its incarnation a member through the log.
    #[arg(long)]
    join: bool,
    /// The joining process's incarnation, above every earlier one in its place (default:
    /// its start time in microseconds since the Unix epoch).
    #[arg(long, requires = "join")]
    incarnation: Option<u64>,
    /// Keep the replica's log on disk in `DIR/replica-ID` (with `--embed`): it appends
    /// what it applies and writes its snapshots there, the leader prints `{"durable": S}`
    /// once every slot below S is on a majority's disks. A process starting with the
    /// cluster needs an empty directory; with `--join` it goes on from its directory.
    #[arg(long, requires = "embed")]
    data_dir: Option<PathBuf>,
    /// Restart with the cluster after a power loss of every node: every process of the
    /// file restarts with `--recover` on its `--data-dir`, and they go on from the longest
    /// log any of them recovered.
    #[arg(long, requires = "data_dir", conflicts_with = "join")]
    recover: bool,
    /// Every this many log slots the service's snapshot goes to the log (with `--embed`;
    /// default 4096, 0: never): a replica behind copies it, and with `--data-dir` a
    /// process joining in this node's place resumes at the newest one on its disk.
    #[arg(long, requires = "embed", value_parser = number::<u64>(0, 1 << 32, " slots"))]
    snapshot_every: Option<u64>,
}

#[derive(Clone, Copy, ValueEnum)]
enum ClientArg {
    Script,
    ClosedLoop,
    Stdin,
}

/// Runs `velos node`: exit status 2 on bad input, 1 when the node fails.
pub fn run_cli(a: NodeArgs) -> ExitCode {
    if a.failure_timeout <= a.heartbeat_period.saturating_mul(2) {
        eprintln!(
            "velos node: --failure-timeout {} ns: more than two --heartbeat-period ({} ns)",
            a.failure_timeout, a.heartbeat_period
        );
        return ExitCode::from(2);
    }
    let cluster = match ClusterFile::load(&a.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("velos node: {e}");
            return ExitCode::from(2);
        }
    };
    // The rendezvous proves the secret to every peer: without one, say so before anything.
    if let Err(why) = cluster.secret() {
        eprintln!("velos node: {}: {why}", a.config.display());
        return ExitCode::from(2);
    }
    let replicas = cluster.len() as u16;
    let mut log = LogConfig::new(replicas, a.slots, a.value_size.max(10) as u32);
    log.heartbeat_period_ns = a.heartbeat_period.max(1);
    log.failure_timeout_ns = a.failure_timeout;
    // Real clocks and OS scheduling: the configured timeout as given.
    log.detector = velos::core::log::Detector::Fixed;
    let spec = NodeSpec {
        log,
        cluster,
        id: a.id,
        client: match a.client {
            ClientArg::Script => Client::Script,
            ClientArg::ClosedLoop => Client::ClosedLoop,
            ClientArg::Stdin => Client::Stdin,
        },
        values: a.values,
        value_size: a.value_size,
        run_for: Duration::from_nanos(a.run_for),
        rendezvous_timeout: Duration::from_nanos(a.rendezvous_timeout),
        start: if a.join {
            Start::Join {
                incarnation: a.incarnation,
            }
        } else if a.recover {
            Start::Recover
        } else {
            Start::WithCluster
        },
        data_dir: a.data_dir,
        snapshot_every: a.snapshot_every,
    };
    if let Err(e) = spec.check() {
        eprintln!("velos node: {e}");
        return ExitCode::from(2);
    }
    let print = |event: velos_cli::node::Event| {
        println!(
            "{}",
            serde_json::to_string(&event).expect("an event serialises")
        );
    };
    let result = if a.embed {
        if !matches!(a.client, ClientArg::Script) {
            eprintln!("velos node: --embed runs the script client only");
            return ExitCode::from(2);
        }
        velos_cli::node::embed::run(&spec, print)
    } else {
        run(&spec, print)
    };
    match result {
        Ok(report) if report.embedded.is_some() => {
            let m = report.embedded.expect("just checked");
            eprintln!(
                "velos node {}: {} commands applied; {} committed here in {} batches, \
                 {} refused, {} leader changes seen",
                a.id,
                report.applied,
                m.committed,
                m.batches,
                m.refused,
                m.leader_changes()
            );
            ExitCode::SUCCESS
        }
        Ok(report) => {
            let velos_rdma::WorkRequests {
                posted,
                signaled,
                flushes,
                doorbells,
            } = report.work_requests;
            eprintln!(
                "velos node {}: {} entries applied; {posted} work requests posted, \
                 {signaled} signaled ({flushes} flushes), in {doorbells} doorbells",
                a.id, report.applied
            );
            if let Some(l) = report.latency {
                eprintln!(
                    "velos node {}: decision latency over {} proposals: p50 {:.1} us, \
                     p90 {:.1} us, p99 {:.1} us, max {:.1} us",
                    a.id, l.count, l.p50_us, l.p90_us, l.p99_us, l.max_us
                );
            }
            ExitCode::SUCCESS
        }
        Err(e @ NodeError::NoVerbs) => {
            eprintln!("velos node: {e}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("velos node {}: {e}", a.id);
            ExitCode::from(1)
        }
    }
}
