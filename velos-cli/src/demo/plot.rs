//! The SVG timeline of the demo (plotters' SVG backend): commits per interval as bars,
//! coloured by the leader, with the crash and the first commit after it marked.

use super::DemoReport;
use plotters::prelude::*;
use std::path::Path;

/// Draws the timeline of `report` to `path`.
pub fn timeline(report: &DemoReport, path: &Path) -> anyhow::Result<()> {
    let width = report.config.interval.as_secs_f64() * 1e3;
    let end = report.config.duration.as_secs_f64() * 1e3;
    let top = report
        .timeline
        .iter()
        .map(|i| i.commits)
        .max()
        .unwrap_or(0)
        .max(1) as f64
        * 1.15;
    let root = SVGBackend::new(path, (900, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "Replicated KV: commits per interval around a leader crash",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d(0.0..end, 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("time (ms, wall clock)")
        .y_desc(format!("writes committed per {width:.0} ms"))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .max_light_lines(1)
        .draw()?;
    for leader in 0..3u16 {
        let color = color_of(leader);
        let bars: Vec<_> = report
            .timeline
            .iter()
            .filter(|i| i.leader == Some(leader))
            .map(|i| {
                Rectangle::new(
                    [
                        (i.start_ms, 0.0),
                        (i.start_ms + width * 0.9, i.commits as f64),
                    ],
                    color.filled(),
                )
            })
            .collect();
        if bars.is_empty() {
            continue;
        }
        chart
            .draw_series(bars)?
            .label(format!("leader {leader}"))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], color.filled()));
    }
    if let Some(c) = &report.leader_change {
        let mut marks = vec![(c.crash_ms, RED, format!("leader {} crashed", c.crashed))];
        if let Some(after) = c.first_commit_after_ms {
            marks.push((
                c.crash_ms + after,
                BLACK,
                "first commit by the new leader".to_string(),
            ));
        }
        for (x, color, label) in marks {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(x, 0.0), (x, top)],
                    6,
                    4,
                    color.stroke_width(2),
                ))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}

/// A fixed colour per replica.
fn color_of(replica: u16) -> RGBColor {
    match replica {
        0 => RGBColor(31, 119, 180),
        1 => RGBColor(44, 160, 44),
        _ => RGBColor(255, 127, 14),
    }
}
