//! [`Node`] handles of three replicas on one in-process fabric, each started as a
//! process's handle would be (one replica, its peers unseen): what a verbs deployment
//! does, without an RDMA device.

use super::Start;
use super::mem_backend;
use super::node_dir::Begin;
use super::{Cluster, Config, Error, Node, Position, RestoreError, Role, StartError};
use super::{StateMachine, VerbsConfig};
use crate::cluster_file::ClusterFile;
use crossbeam_channel::Receiver;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use velos_core::log::Replica;
use velos_rdma::Shared;
use velos_rdma::mem::{MemFabric, MemOptions, Mode};

#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Sum {
    pub(super) count: u64,
    pub(super) sum: u64,
}

impl StateMachine for Sum {
    /// The count of commands applied, this one included.
    type Response = u64;

    fn apply(&mut self, _: Position, command: &[u8]) -> u64 {
        self.count += 1;
        self.sum += command.iter().map(|&b| u64::from(b)).sum::<u64>();
        self.count
    }
    fn snapshot(&self) -> Vec<u8> {
        [self.count.to_le_bytes(), self.sum.to_le_bytes()].concat()
    }
    fn restore(&mut self, bytes: &[u8]) -> Result<(), RestoreError> {
        let word = |i: usize| -> Result<u64, RestoreError> {
            let b = bytes
                .get(8 * i..8 * i + 8)
                .ok_or(RestoreError("16 bytes".into()))?;
            Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        (self.count, self.sum) = (word(0)?, word(1)?);
        Ok(())
    }
}

pub(super) fn config() -> Config {
    let mut config = Config::new(3);
    config.wait_timeout = Duration::from_secs(5);
    config
}

/// Three nodes, each launched alone on a shared fabric.
fn start() -> Vec<Node<Sum>> {
    start_on(&config())
        .into_iter()
        .map(|n| n.expect("started"))
        .collect()
}

/// Three nodes under `config`, each launched alone on a shared fabric, with the cluster.
pub(super) fn start_on(config: &Config) -> Vec<Result<Node<Sum>, StartError>> {
    start_as(config, Start::WithCluster)
}

/// Three nodes under `config`, each launched alone on a shared fabric, beginning as
/// `start` says (a recovery's summaries exchanged here, as the rendezvous would).
pub(super) fn start_as(config: &Config, start: Start) -> Vec<Result<Node<Sum>, StartError>> {
    let shape = config.log.shape();
    let options = MemOptions {
        mode: Mode::Worker,
        jitter: None,
    };
    let fabric = MemFabric::with_plans(shape.layout(), options, shape.region_plans());
    let fabric = Arc::new(fabric.expect("a fabric"));
    let board = Arc::new(Mutex::new(BTreeMap::new()));
    (0..3)
        .map(|id| {
            let (fabric, mut log) = (Arc::clone(&fabric), config.log.clone());
            let board = Arc::clone(&board);
            let launch = Box::new(move |mut driver, inbox: Receiver<_>, begin: Begin| {
                Ok(std::thread::spawn(move || {
                    assert!(!matches!(begin, Begin::Join(_)), "no join here");
                    // A recovery's summaries exchanged on the board, as the rendezvous would.
                    let agreed = match &begin {
                        Begin::Recover(r) => {
                            board.lock().expect("board").insert(id, r.summary.clone());
                            wait_until("every summary", || board.lock().expect("board").len() == 3);
                            let summaries = board.lock().expect("board").clone();
                            Some(r.agree_on(id, &summaries, &mut log).expect("agreed"))
                        }
                        _ => None,
                    };
                    let mut replica = Replica::new(Shared::new(log), id).expect("valid");
                    begin
                        .start(agreed, &mut driver, &mut replica)
                        .expect("restarted");
                    mem_backend::run(&fabric, replica, driver, &inbox)
                }))
            });
            Node::launch(config.clone(), (id, start), Sum::default(), launch)
        })
        .collect()
}

pub(super) fn wait_until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(20), "no {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_node_commits_at_its_leader_refuses_at_a_follower_and_every_node_applies_the_same() {
    let nodes = start();
    wait_until("leader", || nodes[0].role() == Role::Leader);
    assert_eq!(nodes[1].leader(), 0);
    assert_eq!(
        nodes[1].propose(vec![1]),
        Err(Error::NotLeader {
            replica: 1,
            leader: 0
        })
    );
    // More slots than the follower-lag bound allows ahead of a follower this node would
    // see: it sees none, so nothing holds the commands back.
    let lag = u64::from(config().batch.follower_lag_slots_max);
    for i in 0..3 * lag {
        let info = nodes[0]
            .propose(vec![1, 2])
            .expect("committed at the leader");
        assert_eq!(info.leader, 0);
        assert!(info.position.slot >= i, "one command per slot at least");
        assert_eq!(info.response, i + 1, "the leader's state machine answered");
    }
    let commands = 3 * lag;
    assert_eq!(nodes[0].read(|s: &Sum| s.count), Ok(commands));
    assert!(matches!(
        nodes[2].read(|s: &Sum| s.count),
        Err(Error::NotLeader { leader: 0, .. })
    ));
    for n in &nodes {
        wait_until("follower applied", || n.applied_commands() == commands);
    }
    assert_eq!(nodes[0].metrics().committed, commands);
    let machines: Vec<Sum> = nodes.into_iter().filter_map(Node::shutdown).collect();
    assert_eq!(machines.len(), 3);
    for m in &machines {
        assert_eq!(
            *m,
            Sum {
                count: commands,
                sum: 3 * commands
            }
        );
    }
}

#[test]
fn a_node_or_cluster_on_the_wrong_backend_is_refused_with_its_reason() {
    let text = "cluster_id = \"t\"\nsecret = \"0123456789abcdef\"\n[[node]]\nid = 0\naddress = \"127.0.0.1:1\"\n\
                [[node]]\nid = 1\naddress = \"127.0.0.1:2\"\n\
                [[node]]\nid = 2\naddress = \"127.0.0.1:3\"\n";
    let file = ClusterFile::parse(text, "t.toml").expect("a cluster file");
    let e = Node::start(config(), Sum::default())
        .err()
        .expect("refused");
    assert!(
        matches!(&e, StartError::InvalidConfig(m) if m.contains("Config::verbs")),
        "{e}"
    );
    let e = Node::start(Config::verbs(file.clone(), 3), Sum::default()).err();
    assert!(
        matches!(&e, Some(StartError::InvalidConfig(m)) if m.contains("replica 3")),
        "{e:?}"
    );
    let mut two = Config::verbs(file.clone(), 0);
    two.log = Config::new(2).log;
    let e = Node::start(two, Sum::default()).err();
    assert!(
        matches!(&e, Some(StartError::InvalidConfig(m)) if m.contains("3 nodes")),
        "{e:?}"
    );
    let e = Cluster::start(
        Config::verbs(file.clone(), 0),
        (0..3).map(|_| Sum::default()),
    );
    assert!(matches!(&e.err(), Some(StartError::InvalidConfig(m)) if m.contains("Node::start")));
    let v = Config::verbs(file.clone(), 1);
    assert!(matches!(
        &v.backend,
        super::Backend::Verbs(VerbsConfig { id: 1, .. })
    ));
    let r = Config::verbs_recovering(file.clone(), 2);
    assert!(matches!(
        &r.backend,
        super::Backend::Verbs(VerbsConfig {
            id: 2,
            start: Start::Recover,
            ..
        })
    ));
    // A recovery without a directory to recover from is refused with its reason.
    let launch = Box::new(|_, _, _| unreachable!("refused before it launches"));
    let e = Node::launch(config(), (0, Start::Recover), Sum::default(), launch).err();
    assert!(
        matches!(&e, Some(StartError::InvalidConfig(m)) if m.contains("Config::durable")),
        "{e:?}"
    );
    #[cfg(not(feature = "verbs"))]
    {
        let e = Node::start(Config::verbs(file, 0), Sum::default()).err();
        assert!(
            matches!(&e, Some(StartError::Backend(m)) if m.contains("--features verbs")),
            "{e:?}"
        );
    }
}
