//! SVG figures (plotters' SVG backend): one figure per question, axes
//! labelled with their units, a legend naming each series. Line charts
//! (time series; several panels side by side when the question has a few
//! parts, e.g. one per folio size) and grouped bar charts (a run table's
//! %change per configuration).

use plotters::coord::Shift;
use plotters::prelude::*;

/// A named series of (x, y) points.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// Why a figure could not be written.
#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {why}")]
pub struct PlotError {
    path: String,
    why: String,
}

/// One chart of line series.
pub struct Panel {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
    /// The top of the y axis (100 for percentages); else fitted.
    pub y_max: Option<f64>,
    /// A base-2 logarithmic x axis (batch sizes, ranges).
    pub log_x: bool,
}

/// A line chart of `series` to the SVG file `path`; `y_max` fixes the
/// top of the y axis (100 for percentages), else it fits the data.
pub fn line_chart(
    path: &std::path::Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    y_max: Option<f64>,
) -> Result<(), PlotError> {
    let panel = Panel {
        title: title.to_string(),
        x_label: x_label.to_string(),
        y_label: y_label.to_string(),
        series: series
            .iter()
            .map(|s| Series {
                name: s.name.clone(),
                points: s.points.clone(),
            })
            .collect(),
        y_max,
        log_x: false,
    };
    line_panels(path, None, &[panel])
}

/// Panels side by side in one SVG file, under `title` if given.
pub fn line_panels(path: &std::path::Path, title: Option<&str>, panels: &[Panel]) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError {
        path: path.display().to_string(),
        why: e.to_string(),
    };
    if panels.iter().all(|p| p.series.iter().all(|s| s.points.is_empty())) {
        return Err(err(&"no data points to draw"));
    }
    let width = 900.max(560 * panels.len() as u32);
    let root = SVGBackend::new(path, (width, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let body = match title {
        Some(t) => root.titled(t, ("sans-serif", 22)).map_err(|e| err(&e))?,
        None => root.clone(),
    };
    for (area, panel) in body.split_evenly((1, panels.len().max(1))).iter().zip(panels) {
        draw_panel(area, panel).map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

type DrawResult<T> = Result<T, DrawingAreaErrorKind<std::io::Error>>;

fn draw_panel(area: &DrawingArea<SVGBackend<'_>, Shift>, p: &Panel) -> DrawResult<()> {
    let all = || p.series.iter().flat_map(|s| s.points.iter());
    let y_top = p
        .y_max
        .unwrap_or_else(|| all().map(|q| q.1).fold(0.0, f64::max) * 1.05)
        .max(1e-9);
    let mut chart = ChartBuilder::on(area);
    chart
        .caption(&p.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64);
    if p.log_x {
        let lo = all().map(|q| q.0).filter(|x| *x > 0.0).fold(f64::INFINITY, f64::min);
        let hi = all().map(|q| q.0).fold(0.0, f64::max);
        let (lo, hi) = match (lo.is_finite(), hi > lo) {
            (true, true) => (lo, hi),
            (true, false) => (lo / 2.0, lo * 2.0),
            _ => (1.0, 2.0),
        };
        let mut c = chart.build_cartesian_2d((lo / 1.2..hi * 1.2).log_scale().base(2.0), 0.0..y_top)?;
        c.configure_mesh().x_desc(&p.x_label).y_desc(&p.y_label).draw()?;
        for (i, s) in p.series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(|q| q.0 > 0.0).collect();
            c.draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            c.draw_series(pts.into_iter().map(|q| Circle::new(q, 3, color.filled())))?;
        }
        let corner = emptiest_corner(
            p,
            |x| (x.log2() - (lo / 1.2).log2()) / ((hi * 1.2).log2() - (lo / 1.2).log2()),
            y_top,
        );
        legend(&mut c, corner)
    } else {
        let x_max = all().map(|q| q.0).fold(0.0, f64::max).max(1e-9);
        let mut c = chart.build_cartesian_2d(0.0..x_max, 0.0..y_top)?;
        c.configure_mesh().x_desc(&p.x_label).y_desc(&p.y_label).draw()?;
        for (i, s) in p.series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            c.draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))?
                .label(s.name.clone())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        }
        let corner = emptiest_corner(p, |x| x / x_max, y_top);
        legend(&mut c, corner)
    }
}

/// The corner of the plot with the fewest data points (the legend goes
/// there): each corner is the outer 40% of the width and half the height;
/// `x_frac` maps an x value to its share of the axis.
fn emptiest_corner(p: &Panel, x_frac: impl Fn(f64) -> f64, y_top: f64) -> SeriesLabelPosition {
    let corners = [
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::LowerLeft, false, false),
    ];
    let crowd = |right: bool, upper: bool| {
        p.series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|q| {
                let (x, y) = (x_frac(q.0), q.1 / y_top);
                (if right { x > 0.6 } else { x < 0.4 }) && (if upper { y > 0.5 } else { y < 0.5 })
            })
            .count()
    };
    corners
        .into_iter()
        .min_by_key(|&(_, right, upper)| crowd(right, upper))
        .map(|c| c.0)
        .expect("four corners")
}

fn legend<'a, 'b: 'a, X: Ranged<ValueType = f64>>(
    c: &mut ChartContext<'a, SVGBackend<'b>, Cartesian2d<X, plotters::coord::types::RangedCoordf64>>,
    corner: SeriesLabelPosition,
) -> DrawResult<()> {
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(corner)
        .draw()
}

/// A grouped bar chart: one group per `groups` entry, in each a bar per
/// series (its values, one per group; NaN: no bar), zero marked.
pub fn grouped_bars(
    path: &std::path::Path,
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<f64>)],
) -> Result<(), PlotError> {
    let err = |e: &dyn std::fmt::Display| PlotError {
        path: path.display().to_string(),
        why: e.to_string(),
    };
    let values = || {
        series
            .iter()
            .flat_map(|s| s.1.iter())
            .copied()
            .filter(|v| v.is_finite())
    };
    if values().next().is_none() {
        return Err(err(&"no values to draw"));
    }
    let hi = values().fold(0.0, f64::max);
    let lo = values().fold(0.0, f64::min);
    // At least a unit of range, so that all-zero bars still get an axis;
    // headroom above the bars for the legend.
    let span = (hi - lo).max(1.0);
    let y0 = if lo < 0.0 { lo - span * 0.05 } else { 0.0 };
    let y1 = hi.max(0.0) + span * (0.1 + 0.07 * series.len() as f64);
    // Rows of at most BARS_PER_ROW bars, so that the figure keeps a page's
    // proportions however many workloads it shows; one y range for all.
    let most = (BARS_PER_ROW / series.len().max(1)).max(1);
    let per_row = groups.len().div_ceil(groups.len().div_ceil(most).max(1)).max(1);
    let rows: Vec<std::ops::Range<usize>> = (0..groups.len())
        .step_by(per_row)
        .map(|g| g..(g + per_row).min(groups.len()))
        .collect();
    let bars = per_row.min(groups.len()) * series.len().max(1);
    let width = (260 + 36 * bars as u32).clamp(900, 1600);
    let height = 70 + 330 * rows.len() as u32;
    let root = SVGBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let body = root.titled(title, ("sans-serif", 20)).map_err(|e| err(&e))?;
    for (r, (area, range)) in body.split_evenly((rows.len(), 1)).iter().zip(&rows).enumerate() {
        let cut: Vec<(String, Vec<f64>)> = series
            .iter()
            .map(|(name, vals)| (name.clone(), vals[range.clone()].to_vec()))
            .collect();
        bar_row(area, y_label, &groups[range.clone()], &cut, (y0, y1), r == 0).map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// Bars a row of a grouped bar chart holds at most.
const BARS_PER_ROW: usize = 30;

/// One row of a grouped bar chart: `groups` with a bar per series each,
/// on the y range `ys`; the legend in the first row only.
fn bar_row(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    y_label: &str,
    groups: &[String],
    series: &[(String, Vec<f64>)],
    (y0, y1): (f64, f64),
    with_legend: bool,
) -> DrawResult<()> {
    let n = groups.len() as f64;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..n, y0..y1)?;
    let names = groups.to_vec();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(groups.len() * 2 + 1)
        .x_label_formatter(&move |x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 1e-6 && i < names.len() {
                names[i].clone()
            } else {
                String::new()
            }
        })
        .y_desc(y_label)
        .draw()?;
    let k = series.len().max(1) as f64;
    let bar = 0.8 / k;
    for (si, (name, vals)) in series.iter().enumerate() {
        let color = Palette99::pick(si).to_rgba();
        let rects = vals
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite())
            .map(move |(g, &v)| {
                let x0 = g as f64 + 0.1 + si as f64 * bar;
                Rectangle::new([(x0, 0.0), (x0 + bar * 0.92, v)], color.filled())
            });
        let drawn = chart.draw_series(rects)?;
        if with_legend {
            drawn
                .label(name.clone())
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled()));
        }
    }
    chart.draw_series(LineSeries::new([(0.0, 0.0), (n, 0.0)], BLACK.stroke_width(1)))?;
    if with_legend {
        // Over the lower of the row's outer thirds.
        let third = groups.len().div_ceil(3);
        let top = |range: std::ops::Range<usize>| -> f64 {
            series
                .iter()
                .flat_map(|s| s.1[range.clone()].iter())
                .copied()
                .filter(|v| v.is_finite())
                .fold(0.0, f64::max)
        };
        let corner = if top(0..third) < top(groups.len() - third..groups.len()) {
            SeriesLabelPosition::UpperLeft
        } else {
            SeriesLabelPosition::UpperRight
        };
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .position(corner)
            .draw()?;
    }
    Ok(())
}
