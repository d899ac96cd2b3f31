//! The failover benchmark's SVG plots (plotters' SVG backend, as the other benchmarks).

use super::{FailoverReport, ProtocolSummary};
use plotters::prelude::*;
use std::path::Path;

fn color(protocol: &str) -> RGBColor {
    if protocol == "mu" {
        RGBColor(214, 39, 40)
    } else {
        RGBColor(31, 119, 180)
    }
}

fn summaries(report: &FailoverReport) -> Vec<&ProtocolSummary> {
    [report.velos.as_ref(), report.mu.as_ref()]
        .into_iter()
        .flatten()
        .collect()
}

/// Entries applied per 100 µs at a survivor (mean over seeds) against the time relative
/// to the crash, one step line per protocol, the crash as a dashed line.
pub(super) fn timeline(report: &FailoverReport, path: &Path) -> anyhow::Result<()> {
    let all = summaries(report);
    let points = all.iter().flat_map(|s| s.timeline.iter());
    let lo = points.clone().map(|b| b.from_us).fold(0.0f64, f64::min);
    let hi = points
        .clone()
        .map(|b| b.from_us + 100.0)
        .fold(100.0f64, f64::max);
    let top = points.map(|b| b.mean).fold(1.0f64, f64::max) * 1.15;
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!(
                "Decisions around a leader crash ({})",
                report.config.latency.name
            ),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(lo..hi, 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("time relative to the crash (µs, virtual)")
        .y_desc("entries applied per 100 µs at a survivor")
        .max_light_lines(1)
        .draw()?;
    for s in &all {
        let c = color(s.protocol);
        let mut line = Vec::new();
        for b in &s.timeline {
            line.push((b.from_us, b.mean));
            line.push((b.from_us + 100.0, b.mean));
        }
        chart
            .draw_series(LineSeries::new(line, c.stroke_width(2)))?
            .label(s.protocol)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
    }
    let grey = RGBColor(90, 90, 90);
    chart
        .draw_series(DashedLineSeries::new(
            vec![(0.0, 0.0), (0.0, top)],
            6,
            4,
            grey.stroke_width(1),
        ))?
        .label("crash")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], grey));
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Failover times over the seeds, sorted (an empirical distribution), one panel per
/// protocol: their scales differ by an order of magnitude or more.
pub(super) fn distribution(report: &FailoverReport, path: &Path) -> anyhow::Result<()> {
    let all = summaries(report);
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((1, all.len().max(1)));
    for (s, area) in all.iter().zip(panels.iter()) {
        let mut v: Vec<f64> = s
            .runs
            .iter()
            .filter_map(|r| r.failover_ns)
            .map(|ns| ns as f64 / 1e3)
            .collect();
        v.sort_by(f64::total_cmp);
        let hi = v.last().copied().unwrap_or(1.0).max(1.0) * 1.1;
        let lo = v.first().copied().unwrap_or(0.0) * 0.9;
        let mut chart = ChartBuilder::on(area)
            .caption(
                format!("{}: crash → next decision", s.protocol),
                ("sans-serif", 18),
            )
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(lo..hi, 0.0..1.0)?;
        chart
            .configure_mesh()
            .x_desc("failover (µs, virtual)")
            .y_desc("fraction of seeds")
            .max_light_lines(1)
            .draw()?;
        let n = v.len().max(1) as f64;
        let c = color(s.protocol);
        chart.draw_series(
            v.iter()
                .enumerate()
                .map(|(i, &x)| Circle::new((x, (i + 1) as f64 / n), 3, c.filled())),
        )?;
        let steps: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .flat_map(|(i, &x)| [(x, i as f64 / n), (x, (i + 1) as f64 / n)])
            .collect();
        chart.draw_series(LineSeries::new(steps, c.stroke_width(1)))?;
    }
    root.present()?;
    Ok(())
}
