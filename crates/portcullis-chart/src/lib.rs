//! The SVG charts of the reports: [`svg`] draws the frame every chart shares
//! (white ground, caption, axes, the legend, SVG text out) around the series a
//! caller draws, so `eval`'s curves and `bench`'s bars look alike and are made
//! one way. plotters' SVG backend needs no fonts or system libraries.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::ops::Range;

pub use plotters;

/// The chart a caller draws its series on: both axes `f64`.
pub type Chart<'a, 'b> =
    ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The series colours, in order (matplotlib's first six).
pub const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// What frames a chart.
#[derive(Debug, Clone)]
pub struct Frame<'t> {
    pub title: &'t str,
    /// Width and height in pixels.
    pub size: (u32, u32),
    pub x: Range<f64>,
    pub y: Range<f64>,
    /// Axis titles; `None` leaves an axis untitled.
    pub x_desc: Option<&'t str>,
    pub y_desc: Option<&'t str>,
    /// Space for the x and y labels, in pixels.
    pub label_areas: (u32, u32),
    /// Categories instead of numbers on x: no x labels, no vertical grid lines
    /// (the caller writes its own labels).
    pub categorical_x: bool,
}

/// The chart as SVG text: the frame, then `draw` (which labels its series for
/// the legend), then the legend.
pub fn svg(
    frame: &Frame<'_>,
    draw: impl for<'a, 'b> FnOnce(&mut Chart<'a, 'b>) -> Result<(), String>,
) -> Result<String, String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, frame.size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| e.to_string())?;
        let mut chart = ChartBuilder::on(&root)
            .caption(frame.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(frame.label_areas.0)
            .y_label_area_size(frame.label_areas.1)
            .build_cartesian_2d(frame.x.clone(), frame.y.clone())
            .map_err(|e| e.to_string())?;
        let mut mesh = chart.configure_mesh();
        if frame.categorical_x {
            mesh.disable_x_mesh().x_labels(0);
        }
        if let Some(x) = frame.x_desc {
            mesh.x_desc(x);
        }
        if let Some(y) = frame.y_desc {
            mesh.y_desc(y);
        }
        mesh.draw().map_err(|e| e.to_string())?;
        draw(&mut chart)?;
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_is_svg_with_its_title_axes_and_legend() {
        let frame = Frame {
            title: "ROC, all",
            size: (520, 420),
            x: 0.0..1.0,
            y: 0.0..1.02,
            x_desc: Some("false-positive rate"),
            y_desc: Some("true-positive rate"),
            label_areas: (36, 44),
            categorical_x: false,
        };
        let svg = svg(&frame, |chart| {
            chart
                .draw_series(LineSeries::new(vec![(0.0, 0.0), (1.0, 1.0)], COLORS[0]))
                .map_err(|e| e.to_string())?
                .label("diagonal")
                .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], COLORS[0]));
            Ok(())
        })
        .unwrap();
        assert!(svg.starts_with("<svg"), "{svg}");
        for text in [
            "ROC, all",
            "false-positive rate",
            "true-positive rate",
            "diagonal",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
    }
}
