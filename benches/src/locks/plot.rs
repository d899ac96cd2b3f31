//! SVG plots of the lock benchmark (plotters' SVG backend: no fonts or system libraries;
//! text sizes are estimated and the viewer renders the text).

use super::LocksReport;
use plotters::prelude::*;
use std::path::Path;

/// Throughput (M acquisitions per virtual second) against P, one line per lock, at
/// writer fraction `writer_percent`.
pub(super) fn throughput(
    report: &LocksReport,
    writer_percent: f64,
    path: &Path,
) -> anyhow::Result<()> {
    let config = &report.config;
    let lo = config.processes.iter().copied().min().unwrap_or(1) as f64;
    let hi = config.processes.iter().copied().max().unwrap_or(1) as f64;
    // A little room either side, so that the end points are not on the frame.
    let (lo, hi) = if lo < hi {
        (lo / 1.15, hi * 1.15)
    } else {
        (lo / 2.0, hi * 2.0)
    };
    let top = report
        .points
        .iter()
        .filter(|x| x.writer_percent == writer_percent)
        .map(|x| x.throughput_per_s / 1e6)
        .fold(0.0f64, f64::max)
        .max(1e-3)
        * 1.1;
    let root = SVGBackend::new(path, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("Lock throughput vs P, F_W = {writer_percent}%"),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d((lo..hi).log_scale().base(2.0), 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("P (processes)")
        .y_desc("M acquisitions / virtual s")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .max_light_lines(1)
        .draw()?;
    for lock in &config.locks {
        let mut line: Vec<(f64, f64)> = config
            .processes
            .iter()
            .filter_map(|&p| report.point(*lock, p, writer_percent))
            .map(|x| (x.processes as f64, x.throughput_per_s / 1e6))
            .collect();
        line.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = color_of(*lock);
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?
            .label(lock.name())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart.draw_series(
            line.into_iter()
                .map(|(x, y)| Circle::new((x, y), 3, color.filled())),
        )?;
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

/// A fixed colour per lock, so that every plot reads the same.
fn color_of(lock: super::LockKind) -> RGBAColor {
    use super::LockKind;
    match lock {
        LockKind::RmaRw => RGBColor(31, 119, 180),
        LockKind::Dmcs => RGBColor(214, 39, 40),
        LockKind::Nlock => RGBColor(44, 160, 44),
        LockKind::Fompi => RGBColor(40, 40, 40),
    }
    .to_rgba()
}
