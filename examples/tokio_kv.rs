//! The replicated key-value service inside a tokio server: three Velos replicas in this
//! process, a TCP server on localhost whose connection tasks answer `put KEY VALUE` and
//! `get KEY` lines with the log's `submit_async` (each command committed and answered by
//! the leader's state machine), and client tasks that write and read concurrently while
//! the leader is crashed. The library depends on no runtime: its futures are woken by
//! the replicas, and tokio only schedules them (and bounds them with its timeout).
//!
//! `cargo run --release --example tokio_kv`

use anyhow::{Context, bail, ensure};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use velos::embed::{Cluster, Config};

mod kv_store;
use kv_store::KvStore;

/// How long one command may take, failover included.
const BOUND: Duration = Duration::from_secs(10);

/// One request line's answer: `ok PREVIOUS` for a put, `value VALUE` for a get (`-`: none).
async fn answer(cluster: &Cluster<KvStore>, line: &str) -> anyhow::Result<String> {
    let mut words = line.split_whitespace();
    let (verb, key) = (words.next(), words.next().context("a key")?);
    let command = match (verb, words.next()) {
        (Some("put"), Some(value)) => kv_store::put(key, value)?,
        (Some("get"), None) => key.as_bytes().to_vec(),
        _ => bail!("not a request: {line}"),
    };
    let info = tokio::time::timeout(BOUND, cluster.submit_async(command))
        .await
        .context("no answer within the bound")??;
    let shown = info.response.unwrap_or_else(|| "-".into());
    Ok(match verb {
        Some("put") => format!("ok {shown}"),
        _ => format!("value {shown}"),
    })
}

/// Serves one connection: a line in, a line out.
async fn serve(cluster: Arc<Cluster<KvStore>>, stream: TcpStream) -> anyhow::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Some(line) = lines.next_line().await? {
        let reply = answer(&cluster, &line)
            .await
            .unwrap_or_else(|e| format!("error {e}"));
        write.write_all(format!("{reply}\n").as_bytes()).await?;
    }
    Ok(())
}

/// A client: puts `n` values of its own key one at a time, checking each answer (the value
/// it replaced), then reads the key back.
async fn client(address: std::net::SocketAddr, id: u32, n: u32) -> anyhow::Result<()> {
    let stream = TcpStream::connect(address).await?;
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let mut ask = async |request: String| -> anyhow::Result<String> {
        write.write_all(format!("{request}\n").as_bytes()).await?;
        lines.next_line().await?.context("the server closed")
    };
    for i in 0..n {
        let reply = ask(format!("put c{id} v{i}")).await?;
        let previous = if i == 0 {
            "-".to_string()
        } else {
            format!("v{}", i - 1)
        };
        ensure!(
            reply == format!("ok {previous}"),
            "client {id}, put {i}: {reply}"
        );
    }
    let reply = ask(format!("get c{id}")).await?;
    ensure!(reply == format!("value v{}", n - 1), "client {id}: {reply}");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let stores = (0..3).map(|_| KvStore::default());
    let cluster = Arc::new(Cluster::start(Config::new(3), stores)?);
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let server = Arc::clone(&cluster);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let cluster = Arc::clone(&server);
            tokio::spawn(async move {
                if let Err(e) = serve(cluster, stream).await {
                    eprintln!("connection: {e:#}");
                }
            });
        }
    });
    let clients: Vec<_> = (0..8)
        .map(|id| tokio::spawn(client(address, id, 200)))
        .collect();
    // The leader crashes while the clients write: their commands wait for the next one.
    tokio::time::sleep(Duration::from_millis(20)).await;
    let leader = cluster.leader_async().await.context("a leader")?;
    cluster.crash(leader)?;
    for c in clients {
        c.await??;
    }
    let next = cluster.leader_async().await.context("a leader")?;
    ensure!(next != leader, "the crashed leader is not named");
    let m = cluster.metrics();
    println!(
        "8 clients x 200 puts over TCP, every answer checked; replica {leader} crashed, replica \
         {next} leads; {} commits in {} batches, {} leader change(s)",
        m.committed,
        m.batches,
        m.leader_changes()
    );
    Ok(())
}
