//! What the latency benchmark prints and writes: the table, `latency.json`, the plot.

use super::{LatencyReport, Protocol, plot};
use anyhow::Context;
use std::fmt::Write;
use std::path::Path;

/// The short table: per size, per protocol and placement, the median and p99 decision
/// latency (µs); then the phases of the smallest size, the reference rounds and the
/// target.
pub fn table(report: &LatencyReport) -> String {
    let config = &report.config;
    let columns: Vec<(Protocol, bool)> = config
        .protocols
        .iter()
        .flat_map(|&p| config.device_memory.iter().map(move |&dm| (p, dm)))
        .collect();
    let mut out = String::new();
    let _ = write!(out, "{:>6}", "bytes");
    for &(p, dm) in &columns {
        let _ = write!(out, " | {:<15}", format!("{}{}", p.name(), dm_tag(dm)));
    }
    out.push('\n');
    let _ = write!(out, "{:>6}", "");
    for _ in &columns {
        let _ = write!(out, " | {:>15}", "p50/p99 µs");
    }
    out.push('\n');
    for &size in &config.sizes {
        let _ = write!(out, "{size:>6}");
        for &(p, dm) in &columns {
            let cell = report.point(p, size, dm).map_or_else(
                || "-".to_string(),
                |x| format!("{:.3}/{:.3}", us(x.p50_ns), us(x.p99_ns)),
            );
            let _ = write!(out, " | {cell:>15}");
        }
        out.push('\n');
    }
    if let Some(&size) = config.sizes.iter().min() {
        for &(p, dm) in &columns {
            if let Some(ph) = report.point(p, size, dm).and_then(|x| x.phases) {
                let _ = writeln!(
                    out,
                    "{}{} {size} B, mean phases (ns): turn {} + posting {} + CAS round {} \
                     + notice {}",
                    p.name(),
                    dm_tag(dm),
                    ph.turn_ns,
                    ph.posting_ns,
                    ph.cas_round_ns,
                    ph.notice_ns
                );
            }
        }
    }
    for r in &report.rounds {
        let _ = writeln!(
            out,
            "reference{}: 3 CASes to a majority {:.3} µs, 3 WRITEs to a majority {:.3} µs",
            dm_tag(r.device_memory),
            us(r.cas_majority_ns),
            us(r.write_majority_ns)
        );
    }
    for t in &report.targets {
        let _ = writeln!(
            out,
            "target{}: {} {} B p50 {:.3} µs / CAS round {:.3} µs = {:.3} ({})",
            dm_tag(t.device_memory),
            t.protocol,
            t.size,
            us(t.p50_ns),
            us(t.cas_majority_ns),
            t.ratio,
            if t.within_5_percent {
                "within 5 %"
            } else {
                "misses 5 %"
            }
        );
    }
    for n in &report.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

fn dm_tag(device_memory: bool) -> &'static str {
    if device_memory { " (DM)" } else { "" }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// Writes `latency.json` and `latency.svg` (median decision latency against the value
/// size, one line per protocol and placement) into `dir`.
pub fn write_outputs(report: &LatencyReport, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = dir.join("latency.json");
    std::fs::write(&json, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("writing {}", json.display()))?;
    let svg = dir.join("latency.svg");
    plot::latency_vs_size(report, &svg).with_context(|| format!("plotting {}", svg.display()))?;
    Ok(())
}
