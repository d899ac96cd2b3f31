//! What the failover benchmark prints and writes: the table, `failover.json`, the plots.

use super::{FailoverReport, ProtocolSummary, plot};
use anyhow::Context;
use std::fmt::Write;
use std::path::Path;

fn us(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_string(), |v| format!("{v:.1}"))
}

/// The short table: per protocol the medians and p99s (µs), then the targets and the
/// timeline around the crash.
pub fn table(report: &FailoverReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<6} | {:>15} | {:>11} | {:>11} | {:>16} | {:>6} | {:>10} | {:>16}",
        "µs",
        "detect p50/p99",
        "takeover",
        "first apply",
        "failover p50/p99",
        "no f/o",
        "per 100 µs",
        "false suspicions"
    );
    let rows = [report.velos.as_ref(), report.mu.as_ref()];
    for s in rows.into_iter().flatten() {
        let _ = writeln!(
            out,
            "{:<6} | {:>15} | {:>11} | {:>11} | {:>16} | {:>6} | {:>10.1} | {:>16}",
            s.protocol,
            format!("{}/{}", us(s.detect_us), us(s.detect_p99_us)),
            us(s.takeover_us),
            us(s.first_apply_us),
            format!("{}/{}", us(s.failover_us), us(s.failover_p99_us)),
            s.no_failover,
            s.steady_per_100us,
            s.false_suspicions.map_or_else(
                || "-".to_string(),
                |n| format!("{n} ({} seeds)", s.seeds_with_false_suspicions.unwrap_or(0))
            )
        );
    }
    if let Some(r) = report.ratio_mu_over_velos {
        let _ = writeln!(out, "mu / velos failover (medians): {r:.1}x");
    }
    for t in &report.targets {
        let verdict = if let Some(p) = &t.premise_missing {
            format!("FAIL: {p}")
        } else if t.met {
            "met".to_string()
        } else {
            format!("missed by {}", us(t.missed_by))
        };
        let _ = writeln!(out, "target {}: {} ({verdict})", t.name, us(t.value));
    }
    for s in rows.into_iter().flatten() {
        let _ = writeln!(out, "{}", timeline_line(s));
    }
    for n in &report.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// The mean timeline, one number per 100 µs, `|` at the crash.
fn timeline_line(s: &ProtocolSummary) -> String {
    let mut line = format!("{} per 100 µs from {} µs:", s.protocol, {
        s.timeline.first().map_or(0.0, |b| b.from_us)
    });
    for b in &s.timeline {
        if b.from_us == 0.0 {
            line += " |";
        }
        let _ = write!(line, " {:.1}", b.mean);
    }
    line
}

/// Writes `failover.json`, `failover_timeline.svg` (both protocols' timelines around the
/// crash) and `failover_distribution.svg` (failover times over the seeds) into `dir`.
pub fn write_outputs(report: &FailoverReport, dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let json = dir.join("failover.json");
    std::fs::write(&json, serde_json::to_string_pretty(report)?)
        .with_context(|| format!("writing {}", json.display()))?;
    let svg = dir.join("failover_timeline.svg");
    plot::timeline(report, &svg).with_context(|| format!("plotting {}", svg.display()))?;
    let svg = dir.join("failover_distribution.svg");
    plot::distribution(report, &svg).with_context(|| format!("plotting {}", svg.display()))?;
    Ok(())
}
