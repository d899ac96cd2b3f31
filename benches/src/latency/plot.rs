//! The SVG plot of the latency benchmark (plotters' SVG backend, as the lock plots):
//! median decision latency against the value size, the Velos paper's Fig. 1.

use super::{LatencyReport, Protocol};
use plotters::prelude::*;
use std::path::Path;

/// Median decision latency (µs) against the value size (bytes, log scale), one line per
/// protocol and placement, and the CAS round to a majority as a dashed reference.
pub(super) fn latency_vs_size(report: &LatencyReport, path: &Path) -> anyhow::Result<()> {
    let config = &report.config;
    let lo = config.sizes.iter().copied().min().unwrap_or(1) as f64;
    let hi = config.sizes.iter().copied().max().unwrap_or(1) as f64;
    let (lo, hi) = if lo < hi {
        (lo / 1.3, hi * 1.3)
    } else {
        (lo / 2.0, hi * 2.0)
    };
    // A log scale: word-granular puts make large values two orders slower than small
    // ones, and the small sizes' gaps (device memory, the CAS round) must stay readable.
    let values = report
        .points
        .iter()
        .map(|x| x.p50_ns)
        .chain(report.rounds.iter().map(|r| r.cas_majority_ns))
        .map(|ns| ns.max(1) as f64 / 1e3);
    let bottom = values.clone().fold(f64::INFINITY, f64::min).min(1e6) / 1.2;
    let top = values.fold(0.0f64, f64::max).max(bottom * 2.0) * 1.2;
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Decision latency vs value size ({})", config.latency.name),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d((lo..hi).log_scale().base(2.0), (bottom..top).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("value size (bytes)")
        .y_desc("median decision latency (µs, virtual)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .max_light_lines(1)
        .draw()?;
    for &protocol in &config.protocols {
        for &dm in &config.device_memory {
            let line: Vec<(f64, f64)> = config
                .sizes
                .iter()
                .filter_map(|&s| report.point(protocol, s, dm))
                .map(|x| (x.size as f64, x.p50_ns as f64 / 1e3))
                .collect();
            let color = color_of(protocol, dm);
            let label = format!(
                "{}{}",
                protocol.name(),
                if dm { " (device memory)" } else { "" }
            );
            chart
                .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
            chart.draw_series(
                line.into_iter()
                    .map(|(x, y)| Circle::new((x, y), 3, color.filled())),
            )?;
        }
    }
    for r in &report.rounds {
        let y = r.cas_majority_ns as f64 / 1e3;
        let color = RGBColor(120, 120, 120).mix(if r.device_memory { 0.5 } else { 0.9 });
        let label = format!(
            "3 CASes to a majority{}",
            if r.device_memory {
                " (device memory)"
            } else {
                ""
            }
        );
        chart
            .draw_series(DashedLineSeries::new(
                vec![(lo, y), (hi, y)],
                6,
                4,
                color.stroke_width(1),
            ))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()?;
    root.present()?;
    Ok(())
}

/// A fixed colour per protocol, lighter in device memory.
fn color_of(protocol: Protocol, device_memory: bool) -> RGBAColor {
    let base = match protocol {
        Protocol::Velos => RGBColor(31, 119, 180),
        Protocol::Mu => RGBColor(214, 39, 40),
    };
    if device_memory {
        base.mix(0.55)
    } else {
        base.to_rgba()
    }
}
