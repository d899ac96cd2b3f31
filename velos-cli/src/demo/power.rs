//! `velos demo --power-loss-at T`: every replica crashed at once (the cluster's power
//! lost), the cluster recovered from its directories (`Cluster::recover`), and the check
//! that every write that was durable then came back, with nothing a write below the
//! recovered log's end does not explain.

use super::DemoError;
use super::codec::KvCommand;
use super::kv::{KvMap, KvStore};
use super::report::PowerLoss;
use std::time::Instant;
use velos::embed::{Cluster, Config};

const REPLICAS: u16 = 3;

/// Each client's acknowledged writes: the slot that decided each, in order.
pub(super) type Written = Vec<(u64, KvCommand)>;

/// What a recovery hands back: the cluster, its stores, the report, each client's map.
pub(super) struct Recovered {
    pub(super) cluster: Cluster<KvStore>,
    pub(super) stores: Vec<KvStore>,
    pub(super) report: PowerLoss,
    pub(super) models: Vec<KvMap>,
}

/// What a client's writes make of `map`.
fn apply(map: &mut KvMap, command: &KvCommand) {
    match command {
        KvCommand::Put { key, value } => {
            map.insert(key.clone(), value.clone());
        }
        KvCommand::Del { key } => {
            map.remove(key);
        }
    }
}

/// The key a command writes.
fn key_of(command: &KvCommand) -> &str {
    match command {
        KvCommand::Put { key, .. } | KvCommand::Del { key } => key,
    }
}

/// Crashes every replica of `cluster` at once, recovers the cluster from its
/// directories (`config` names them) and checks what came back against each client's
/// acknowledged writes (`written[c]`: the slot and the write, in order) and the write it
/// gave up on (`in_doubt[c]`, which may or may not have taken effect). The recovered
/// cluster and its stores, the report, and each client's map to go on from.
pub(super) fn lose_and_recover(
    cluster: Cluster<KvStore>,
    config: Config,
    (written, in_doubt): (&[Written], &[Option<KvCommand>]),
    start: Instant,
) -> Result<Recovered, DemoError> {
    // Read before the power goes: every slot below it is on a majority's disks.
    let durable_index = cluster.durable_index().unwrap_or(0);
    let at = start.elapsed();
    for r in 0..REPLICAS {
        let _ = cluster.crash(r);
    }
    drop(cluster.shutdown());
    let t = Instant::now();
    let stores: Vec<KvStore> = (0..REPLICAS).map(|_| KvStore::default()).collect();
    let cluster = Cluster::recover(config, stores.clone())
        .map_err(|e| DemoError::Start(format!("the recovery: {e}")))?;
    let recover_ms = t.elapsed().as_secs_f64() * 1e3;
    let recovered_slot = cluster.first_slot();
    let acks = written.iter().flatten();
    let acknowledged = acks.clone().count() as u64;
    let below = |bound: u64| acks.clone().filter(|(slot, _)| *slot < bound).count() as u64;
    let mut mismatches = Vec::new();
    let mut models = Vec::new();
    let recovered = stores[0].map().clone();
    for (c, writes) in written.iter().enumerate() {
        let mut model = KvMap::new();
        for (_, command) in writes.iter().filter(|(slot, _)| *slot < recovered_slot) {
            apply(&mut model, command);
        }
        let mine = |k: &String| k.starts_with(&format!("c{c}k"));
        let mut keys: Vec<&String> = model
            .keys()
            .chain(recovered.keys().filter(|k| mine(k)))
            .collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            let got = recovered.get(key);
            let doubt = in_doubt[c].as_ref().filter(|d| key_of(d) == key);
            let explained = got == model.get(key)
                || doubt.is_some_and(|d| {
                    let mut with = model.clone();
                    apply(&mut with, d);
                    got == with.get(key)
                });
            if !explained {
                mismatches.push(format!("{key} is {got:?} after the recovery"));
            }
        }
        models.push(
            recovered
                .iter()
                .filter(|(k, _)| mine(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        );
    }
    // Every replica rebuilt the same state.
    for (r, store) in stores.iter().enumerate().skip(1) {
        if *store.map() != recovered {
            mismatches.push(format!(
                "replica {r}'s map differs from replica 0's after the recovery"
            ));
        }
    }
    let report = PowerLoss {
        at_ms: at.as_secs_f64() * 1e3,
        durable_index,
        recovered_slot,
        recover_ms,
        acknowledged,
        acknowledged_durable: below(durable_index),
        lost: acknowledged - below(recovered_slot),
        mismatches,
    };
    Ok(Recovered {
        cluster,
        stores,
        report,
        models,
    })
}
