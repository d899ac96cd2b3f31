//! `velos bench failover --backend verbs`: Velos and the Mu baseline side by side on real
//! RDMA, in one process. A `VerbsFabric` holds every node's registered memory and each
//! node runs on its own thread over loopback RC queue pairs, so both protocols go through
//! the same kernel RDMA stack (soft-RoCE here) — Mu's permission switch included, which
//! changes the queue pairs' access flags on the device (`velos_rdma::verbs`'s `access`).
//!
//! Each trial opens a fresh fabric, lets the protocol's leader decide `warmup_entries`,
//! crashes it (its thread stops at its next step; its memory stays reachable, as a hung
//! process's does) and runs until a survivor applied `after_entries` more, or
//! `trial_timeout`. Per trial: crash → a survivor suspects the leader (detection) and →
//! the next decision at a survivor (failover, as the simulated benchmark defines it:
//! [`super::SeedRun`]'s); the takeover is the part between. Every trial's logs are
//! checked for agreement.
//!
//! Both protocols run with their published timing scaled by one factor, `time_scale`
//! (1: the papers' — Velos's heartbeat 1 µs and failure timeout 20 µs, Mu's heartbeat
//! read every 40 µs, suspected after 14 silent reads). Under emulation (soft-RoCE in a
//! TCG guest, where a decision takes about a thousand times a NIC's) `--time-scale 1000`
//! keeps both detectors from suspecting a live leader; the absolute figures are then the
//! emulator's and the ratio in one boot is the result.
//!
//! The configuration, the report and the table build everywhere; running needs the
//! `verbs` feature.

#[cfg(feature = "verbs")]
mod protocols;
#[cfg(test)]
mod tests;
#[cfg(feature = "verbs")]
mod trial;

#[cfg(feature = "verbs")]
use super::SeedRun;
use crate::latency::Protocol;
use anyhow::ensure;
use serde::Serialize;
use std::time::Duration;

/// What to measure.
#[derive(Clone, Debug, Serialize)]
pub struct VerbsFailoverConfig {
    /// The protocols.
    pub protocols: Vec<Protocol>,
    /// Crashes per protocol, each in a fresh fabric.
    pub trials: u32,
    /// The factor on both protocols' published timing.
    pub time_scale: u64,
    /// Bytes per proposed value.
    pub value_bytes: u32,
    /// Entries the leader applies before it is crashed.
    pub warmup_entries: u64,
    /// Entries a survivor applies after the crash before the trial ends.
    pub after_entries: u64,
    /// A trial gives up after this long (before the crash, or after it).
    #[serde(serialize_with = "seconds")]
    pub trial_timeout: Duration,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl VerbsFailoverConfig {
    /// 20 trials per protocol at the papers' timing (`time_scale` 1).
    pub fn full() -> VerbsFailoverConfig {
        VerbsFailoverConfig {
            protocols: Protocol::ALL.to_vec(),
            trials: 20,
            time_scale: 1,
            value_bytes: 10,
            warmup_entries: 50,
            after_entries: 20,
            trial_timeout: Duration::from_secs(20),
        }
    }

    /// Checks the configuration before anything runs.
    pub fn check(&self) -> anyhow::Result<()> {
        ensure!(!self.protocols.is_empty(), "no protocol to measure");
        ensure!((1..=1_000).contains(&self.trials), "1 to 1000 trials");
        ensure!(
            (1..=100_000).contains(&self.time_scale),
            "a time scale of 1 to 100000"
        );
        ensure!(
            (10..=256).contains(&self.value_bytes),
            "values of 10 to 256 bytes"
        );
        ensure!(
            self.warmup_entries >= 1 && self.warmup_entries + self.after_entries <= 1_000,
            "at least one entry before the crash, at most 1000 in all"
        );
        ensure!(
            self.after_entries >= 1,
            "at least one entry after the crash"
        );
        Ok(())
    }
}

/// One crash of one protocol. Times in ns after the crash.
#[derive(Clone, Debug, Serialize)]
pub struct VerbsTrial {
    /// The trial.
    pub trial: u32,
    /// The crashed leader.
    pub crashed: u16,
    /// Entries the leader had applied when it crashed.
    pub applied_before: u64,
    /// Crash → a survivor suspects it.
    pub detect_ns: Option<u64>,
    /// Crash → the next decision at a survivor.
    pub failover_ns: Option<u64>,
    /// Leader changes not caused by the crash (Velos only).
    pub false_suspicions: Option<u64>,
}

impl VerbsTrial {
    /// Detection → the next decision.
    pub fn takeover_ns(&self) -> Option<u64> {
        Some(self.failover_ns?.saturating_sub(self.detect_ns?))
    }
}

/// One protocol over its trials; times in µs, `None` when no trial had one.
#[derive(Clone, Debug, Serialize)]
pub struct VerbsSummary {
    /// The protocol's name.
    pub protocol: &'static str,
    /// Detection: median and 99th percentile.
    pub detect_us: Option<f64>,
    /// The same, 99th percentile.
    pub detect_p99_us: Option<f64>,
    /// Takeover (detection → the next decision): median.
    pub takeover_us: Option<f64>,
    /// The same, 99th percentile.
    pub takeover_p99_us: Option<f64>,
    /// Failover (crash → the next decision): median.
    pub failover_us: Option<f64>,
    /// The same, 99th percentile.
    pub failover_p99_us: Option<f64>,
    /// Trials without a decision after the crash within the trial's time.
    pub no_failover: u64,
    /// Leader changes no crash caused, over all trials (Velos only).
    pub false_suspicions: Option<u64>,
    /// Every trial.
    pub trials: Vec<VerbsTrial>,
}

/// What `velos bench failover --backend verbs` reports.
#[derive(Clone, Debug, Serialize)]
pub struct VerbsFailoverReport {
    /// What was measured.
    pub config: VerbsFailoverConfig,
    /// The RDMA device.
    pub device: String,
    /// Per protocol.
    pub protocols: Vec<VerbsSummary>,
    /// Mu's failover median over Velos's (the target: at least 10).
    pub ratio_p50: Option<f64>,
    /// The same at the 99th percentile.
    pub ratio_p99: Option<f64>,
    /// Wall time of the whole run (s).
    pub wall_seconds: f64,
}

impl VerbsFailoverReport {
    /// What makes the figures meaningless: a protocol with a trial that measured no
    /// failover (its crash was never followed by a decision), or no protocol at all.
    pub fn missing_premises(&self) -> Vec<String> {
        let mut missing: Vec<String> = self
            .protocols
            .iter()
            .filter(|s| s.no_failover > 0 || s.trials.is_empty())
            .map(|s| {
                format!(
                    "{}: {} of {} trials measured no failover",
                    s.protocol,
                    s.no_failover,
                    s.trials.len()
                )
            })
            .collect();
        if self.protocols.is_empty() {
            missing.push("no protocol measured".into());
        }
        missing
    }
}

/// Runs every trial of every protocol, one after the other.
#[cfg(feature = "verbs")]
pub fn run(config: &VerbsFailoverConfig, progress: bool) -> anyhow::Result<VerbsFailoverReport> {
    use anyhow::Context;
    config.check()?;
    let start = std::time::Instant::now();
    let mut device = String::new();
    let mut protocols = Vec::new();
    for &protocol in &config.protocols {
        let mut trials = Vec::new();
        for k in 0..config.trials {
            let (name, trial) = match protocol {
                Protocol::Velos => protocols::velos_trial(config, k),
                Protocol::Mu => protocols::mu_trial(config, k),
            }
            .with_context(|| format!("{} trial {k}", protocol.name()))?;
            if progress {
                eprintln!(
                    "{} trial {k}: detection {:?} µs, failover {:?} µs",
                    protocol.name(),
                    trial.detect_ns.map(|ns| ns / 1_000),
                    trial.failover_ns.map(|ns| ns / 1_000)
                );
            }
            device = name;
            trials.push(trial);
        }
        protocols.push(summarise(protocol, trials));
    }
    let report = report(config, device, protocols, start.elapsed().as_secs_f64());
    assert_eq!(report.protocols.len(), config.protocols.len());
    Ok(report)
}

/// The report of `protocols`' summaries: the ratios of Mu's failover to Velos's.
#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
fn report(
    config: &VerbsFailoverConfig,
    device: String,
    protocols: Vec<VerbsSummary>,
    wall_seconds: f64,
) -> VerbsFailoverReport {
    let failover = |p: &str, q: fn(&VerbsSummary) -> Option<f64>| {
        protocols.iter().find(|s| s.protocol == p).and_then(q)
    };
    let ratio = |q: fn(&VerbsSummary) -> Option<f64>| {
        Some(failover("mu", q)? / failover("velos", q)?.max(f64::MIN_POSITIVE))
    };
    VerbsFailoverReport {
        config: config.clone(),
        device,
        ratio_p50: ratio(|s| s.failover_us),
        ratio_p99: ratio(|s| s.failover_p99_us),
        protocols,
        wall_seconds,
    }
}

#[cfg_attr(not(feature = "verbs"), allow(dead_code))]
fn summarise(protocol: Protocol, trials: Vec<VerbsTrial>) -> VerbsSummary {
    let q = super::summary::quantile_us;
    let detect: Vec<u64> = trials.iter().filter_map(|t| t.detect_ns).collect();
    let takeover: Vec<u64> = trials.iter().filter_map(VerbsTrial::takeover_ns).collect();
    let failover: Vec<u64> = trials.iter().filter_map(|t| t.failover_ns).collect();
    let false_counts: Vec<u64> = trials.iter().filter_map(|t| t.false_suspicions).collect();
    VerbsSummary {
        protocol: protocol.name(),
        detect_us: q(&detect, 0.5),
        detect_p99_us: q(&detect, 0.99),
        takeover_us: q(&takeover, 0.5),
        takeover_p99_us: q(&takeover, 0.99),
        failover_us: q(&failover, 0.5),
        failover_p99_us: q(&failover, 0.99),
        no_failover: (trials.len() - failover.len()) as u64,
        false_suspicions: (!false_counts.is_empty()).then(|| false_counts.iter().sum()),
        trials,
    }
}

/// The table `velos bench failover --backend verbs` prints.
pub fn table(r: &VerbsFailoverReport) -> String {
    let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let mut out = format!(
        "failover on real verbs ({}), one process, {} trials per protocol, time scale {}\n\
         protocol  detect p50/p99 µs      takeover p50/p99 µs    failover p50/p99 µs    no failover  false suspicions\n",
        r.device, r.config.trials, r.config.time_scale
    );
    for s in &r.protocols {
        out.push_str(&format!(
            "{:<9} {:>10} / {:<10} {:>10} / {:<10} {:>10} / {:<10} {:>11}  {}\n",
            s.protocol,
            us(s.detect_us),
            us(s.detect_p99_us),
            us(s.takeover_us),
            us(s.takeover_p99_us),
            us(s.failover_us),
            us(s.failover_p99_us),
            s.no_failover,
            s.false_suspicions
                .map_or("-".to_string(), |n| n.to_string())
        ));
    }
    let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}x"));
    out.push_str(&format!(
        "Mu / Velos failover: p50 {} (target >= 10x), p99 {}; {:.1} s wall\n",
        x(r.ratio_p50),
        x(r.ratio_p99),
        r.wall_seconds
    ));
    out
}
