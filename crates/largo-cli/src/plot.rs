//! SVG figures (plotters' SVG backend): one figure per question, axes
//! labelled with their units, a legend naming each series.

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
    let err = |e: &dyn std::fmt::Display| PlotError {
        path: path.display().to_string(),
        why: e.to_string(),
    };
    let all = || series.iter().flat_map(|s| s.points.iter());
    let x_max = all().map(|p| p.0).fold(0.0, f64::max).max(1e-9);
    let y_top = y_max
        .unwrap_or_else(|| all().map(|p| p.1).fold(0.0, f64::max) * 1.05)
        .max(1e-9);
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(44)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_max, 0.0..y_top)
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| err(&e))?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerLeft)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
