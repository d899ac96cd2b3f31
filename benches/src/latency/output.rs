//! What the latency benchmark prints and writes: the table, `latency.json`, the plot.

use super::{LatencyReport, Protocol, plot};
use anyhow::Context;
use std::fmt::Write;
use std::path::Path;

/// The short table: per size, per protocol and placement, the median and p99 decision
/// latency (µs), and for Velos the median CPU-charged latency with the median engine CPU
/// on the critical path; then the phases of the smallest size, the reference rounds and
/// the targets.
pub fn table(report: &LatencyReport) -> String {
    let config = &report.config;
    // (protocol, placement, CPU-charged column)
    let columns: Vec<(Protocol, bool, bool)> = config
        .protocols
        .iter()
        .flat_map(|&p| {
            config.device_memory.iter().flat_map(move |&dm| {
                let charged = (p == Protocol::Velos).then_some((p, dm, true));
                std::iter::once((p, dm, false)).chain(charged)
            })
        })
        .collect();
    let mut out = String::new();
    let _ = write!(out, "{:>6}", "bytes");
    for &(p, dm, charged) in &columns {
        let name = format!(
            "{}{}{}",
            p.name(),
            if charged { "+cpu" } else { "" },
            dm_tag(dm)
        );
        let _ = write!(out, " | {name:<WIDTH$}");
    }
    out.push('\n');
    let _ = write!(out, "{:>6}", "");
    for &(_, _, charged) in &columns {
        let head = if charged {
            "p50 (cpu) µs"
        } else {
            "p50/p99 µs"
        };
        let _ = write!(out, " | {head:>WIDTH$}");
    }
    out.push('\n');
    for &size in &config.sizes {
        let _ = write!(out, "{size:>6}");
        for &(p, dm, charged) in &columns {
            let point = report.point(p, size, dm);
            let cell = match (point, charged) {
                (Some(x), false) => format!("{:.3}/{:.3}", us(x.p50_ns), us(x.p99_ns)),
                (Some(x), true) => x.cpu.map_or_else(
                    || "-".to_string(),
                    |c| {
                        format!(
                            "{:.3} ({:.3})",
                            us(c.cpu_charged_p50_ns),
                            us(c.engine_cpu_path_p50_ns)
                        )
                    },
                ),
                (None, _) => "-".to_string(),
            };
            let _ = write!(out, " | {cell:>WIDTH$}");
        }
        out.push('\n');
    }
    if let Some(&size) = config.sizes.iter().min() {
        for &(p, dm, _) in columns.iter().filter(|c| !c.2) {
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
        let (Some(charged), Some(ratio)) = (t.cpu_charged_p50_ns, t.cpu_charged_ratio) else {
            continue;
        };
        let cpu = config
            .protocols
            .iter()
            .find(|p| p.name() == t.protocol)
            .and_then(|&p| report.point(p, t.size, t.device_memory))
            .and_then(|x| x.cpu);
        let _ = write!(
            out,
            "target{} CPU-charged: {} {} B p50 {:.3} µs / CAS round {:.3} µs = {:.3} ({} 1.25x)",
            dm_tag(t.device_memory),
            t.protocol,
            t.size,
            us(charged),
            us(t.cas_majority_ns),
            ratio,
            if ratio <= 1.25 { "within" } else { "misses" }
        );
        if let Some(c) = cpu {
            let _ = write!(
                out,
                "; engine CPU on the path {:.3} µs over {:.1} steps ({:.3} µs over {:.1} \
                 steps in all), calibrated {:.0} ns per step",
                us(c.engine_cpu_path_p50_ns),
                c.path_steps,
                us(c.engine_cpu_all_p50_ns),
                c.all_steps,
                c.cpu_per_step_ns
            );
        }
        out.push('\n');
    }
    for n in &report.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// Width of a table cell.
const WIDTH: usize = 16;

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
