//! One PNG chart per table, drawn with plotters into memory and encoded with png.
//!
//! Every legend sits in a band below the plots, outside them, so that it never hides data;
//! each chart records where its plots and its legend are ([`Chart::plots`],
//! [`Chart::legend`]) so that this can be checked.
//!
//! Text needs a TrueType font read at run time from [`FONT`] (Debian: fonts-dejavu-core);
//! without it the charts are still drawn, without any text, and a warning says so.

use std::error::Error;
use std::sync::OnceLock;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::*;

/// The font chart text is drawn with.
pub const FONT: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// One chart: `<name>.png`.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// File stem, e.g. "capacity".
    pub name: &'static str,
    pub title: String,
    pub width: u32,
    pub height: u32,
    /// The PNG file's bytes.
    pub png: Vec<u8>,
    /// The plotting areas (inside the axes), one per panel, in the PNG's pixels.
    pub plots: Vec<PixelRect>,
    /// The legend's box, in the PNG's pixels (none when drawn without text).
    pub legend: Option<PixelRect>,
}

impl Chart {
    pub fn file_name(&self) -> String {
        format!("{}.png", self.name)
    }
}

/// A rectangle of a chart's pixels, from the top left: columns `x0..x1`, rows `y0..y1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PixelRect {
    pub x0: i32,
    pub y0: i32,
    pub x1: i32,
    pub y1: i32,
}

impl PixelRect {
    fn of((x, y): (std::ops::Range<i32>, std::ops::Range<i32>)) -> PixelRect {
        PixelRect {
            x0: x.start,
            y0: y.start,
            x1: x.end,
            y1: y.end,
        }
    }

    /// Whether the two share a pixel.
    pub fn overlaps(&self, o: &PixelRect) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }

    /// Whether `(x, y)` is inside.
    pub fn contains(&self, x: i32, y: i32) -> bool {
        (self.x0..self.x1).contains(&x) && (self.y0..self.y1).contains(&y)
    }

    /// "x0,y0,x1,y1", as the HTML page gives it to scripts.
    pub fn to_attr(&self) -> String {
        format!("{},{},{},{}", self.x0, self.y0, self.x1, self.y1)
    }
}

/// The charts of a report, and what the reader should know about them.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Charts {
    pub charts: Vec<Chart>,
    pub warnings: Vec<String>,
}

/// Draws every chart the report has data for: capacity, throughput, loss, latency, sessions.
pub fn render_charts(r: &Report) -> Result<Charts, ReportError> {
    match font() {
        Ok(()) => draw_all(r, Ink { text: true }, Vec::new()),
        Err(e) => draw_all(
            r,
            Ink { text: false },
            vec![format!(
                "charts drawn without text (no axis labels, legends or titles): {e}; \
                 install fonts-dejavu-core"
            )],
        ),
    }
}

/// As [`render_charts`] but without any text, as when no font can be read.
pub fn render_charts_without_text(r: &Report) -> Result<Charts, ReportError> {
    draw_all(r, Ink { text: false }, Vec::new())
}

fn draw_all(r: &Report, ink: Ink, warnings: Vec<String>) -> Result<Charts, ReportError> {
    let mut charts = Vec::new();
    if let Some(c) = r.capacity.as_ref().filter(|c| !c.rows.is_empty()) {
        charts.push(capacity(c, ink)?);
    }
    if !r.throughput.is_empty() {
        charts.push(throughput(r, ink)?);
    }
    if r.no_drop.iter().any(|n| !n.curve.is_empty()) {
        charts.push(loss(&r.no_drop, ink)?);
    }
    if !r.latency.is_empty() {
        charts.push(latency(&r.latency, ink)?);
    }
    if sessions_chart_has_a_series(&r.sessions) {
        charts.push(sessions(&r.sessions, ink)?);
    }
    Ok(Charts { charts, warnings })
}

/// Whether the PFCP chart has a series to show: establishment at two or more resident
/// counts. A single point (what `upfbench capacity` measures) is the table's row alone.
pub(crate) fn sessions_chart_has_a_series(v: &[SessionRatePoint]) -> bool {
    distinct(v.iter().map(|p| p.resident as f64).collect()).len() >= 2
}

/// Registers [`FONT`] with plotters once per process.
fn font() -> Result<(), String> {
    static STATE: OnceLock<Result<(), String>> = OnceLock::new();
    STATE
        .get_or_init(|| {
            let bytes = std::fs::read(FONT).map_err(|e| format!("{FONT}: {e}"))?;
            // plotters keeps fonts for the life of the process.
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| format!("{FONT}: not a TrueType font"))
        })
        .clone()
}

/// Whether text is drawn.
#[derive(Debug, Clone, Copy)]
struct Ink {
    text: bool,
}

type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

const UL: RGBColor = RGBColor(31, 119, 180);
const DL: RGBColor = RGBColor(255, 127, 14);
const LIMIT_IO: RGBColor = RGBColor(40, 40, 40);
const LIMIT_GEN: RGBColor = RGBColor(150, 150, 150);
const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];
/// Colours of sessions counts, the same in every panel.
const SESSIONS_PALETTE: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];
const SINGLE: (u32, u32) = (1000, 560);
const PANEL_H: u32 = 540;

fn dir_color(d: Direction) -> RGBColor {
    match d {
        Direction::Uplink => UL,
        Direction::Downlink => DL,
    }
}

fn title_font() -> TextStyle<'static> {
    ("sans-serif", 22).into_font().color(&BLACK)
}

fn desc_font() -> TextStyle<'static> {
    ("sans-serif", 16).into_font().color(&BLACK)
}

fn label_font() -> TextStyle<'static> {
    ("sans-serif", 14).into_font().color(&BLACK)
}

/// The line style of a series: solid, dashed or dotted.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stroke {
    Solid,
    Dashed,
    Dotted,
}

/// The mark at each point of a series.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Marker {
    None,
    /// A filled circle.
    Dot,
    /// A hollow square, larger than a dot: a dot at the same place shows inside it.
    Square,
    /// A hollow triangle, larger than a dot.
    Triangle,
}

/// What a legend entry shows before its label.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Sample {
    Line(Stroke, Marker),
    Bar,
}

/// One legend entry, and the look of the series it names.
#[derive(Debug, Clone)]
struct Key {
    label: String,
    color: RGBColor,
    sample: Sample,
}

impl Key {
    fn line(label: impl Into<String>, color: RGBColor, stroke: Stroke, marker: Marker) -> Key {
        Key {
            label: label.into(),
            color,
            sample: Sample::Line(stroke, marker),
        }
    }

    fn bar(label: impl Into<String>, color: RGBColor) -> Key {
        Key {
            label: label.into(),
            color,
            sample: Sample::Bar,
        }
    }

    fn stroke(&self) -> Stroke {
        match self.sample {
            Sample::Line(s, _) => s,
            Sample::Bar => Stroke::Solid,
        }
    }

    fn marker(&self) -> Marker {
        match self.sample {
            Sample::Line(_, m) => m,
            Sample::Bar => Marker::None,
        }
    }
}

/// Draws a series in the look of `$key` (line, then a mark at each point) on `$chart`
/// with `$draw` (`draw_series` or `draw_secondary_series`).
macro_rules! series {
    ($chart:expr, $draw:ident, $pts:expr, $key:expr) => {{
        let pts: Vec<(f64, f64)> = $pts;
        let key: &Key = $key;
        let color = key.color;
        let style = color.stroke_width(2);
        match key.stroke() {
            Stroke::Solid => $chart.$draw(LineSeries::new(pts.clone(), style))?,
            Stroke::Dashed => $chart.$draw(DashedLineSeries::new(pts.clone(), 9, 6, style))?,
            Stroke::Dotted => $chart.$draw(DashedLineSeries::new(pts.clone(), 3, 5, style))?,
        };
        match key.marker() {
            Marker::None => {}
            Marker::Dot => {
                $chart.$draw(pts.iter().map(|p| Circle::new(*p, DOT, color.filled())))?;
            }
            Marker::Square => {
                $chart.$draw(pts.iter().map(|p| {
                    EmptyElement::at(*p) + Rectangle::new(SQUARE, color.stroke_width(2))
                }))?;
            }
            Marker::Triangle => {
                $chart.$draw(pts.iter().map(|p| {
                    EmptyElement::at(*p) + PathElement::new(TRIANGLE, color.stroke_width(2))
                }))?;
            }
        }
    }};
}

/// The hollow square mark, pixels around the point.
const SQUARE: [(i32, i32); 2] = [(-8, -8), (8, 8)];
/// The hollow triangle mark (a closed path), pixels around the point.
const TRIANGLE: [(i32, i32); 4] = [(0, -9), (8, 6), (-8, 6), (0, -9)];
/// The dot mark's radius, pixels.
const DOT: i32 = 4;

/// Legend metrics, pixels.
const KEY_SAMPLE: i32 = 30;
const KEY_GAP: i32 = 8;
const KEY_SPACING: i32 = 28;
const KEY_ROW: i32 = 22;
const LEGEND_PAD: i32 = 8;
/// Space between the legend's box and what is above and below it.
const LEGEND_MARGIN: i32 = 6;

/// Where each key goes in a legend box no wider than `width`: offsets from the box's top
/// left (left edge, row centre), and the box's size.
struct LegendLayout {
    at: Vec<(i32, i32)>,
    size: (i32, i32),
}

fn legend_layout(
    area: &Area<'_>,
    keys: &[Key],
    width: i32,
) -> Result<LegendLayout, Box<dyn Error>> {
    let mut at = Vec::new();
    let (mut x, mut row, mut widest) = (LEGEND_PAD, 0, 0);
    for k in keys {
        let (tw, _) = area.estimate_text_size(&k.label, &label_font())?;
        let w = KEY_SAMPLE + KEY_GAP + tw as i32;
        if x > LEGEND_PAD && x + w + LEGEND_PAD > width {
            x = LEGEND_PAD;
            row += 1;
        }
        at.push((x, LEGEND_PAD + row * KEY_ROW + KEY_ROW / 2));
        widest = widest.max(x + w);
        x += w + KEY_SPACING;
    }
    let rows = if keys.is_empty() { 0 } else { row + 1 };
    Ok(LegendLayout {
        at,
        size: (widest + LEGEND_PAD, rows * KEY_ROW + 2 * LEGEND_PAD),
    })
}

/// The band under a chart's plots that holds its legend, and where the keys go in it.
type Band<'a> = Option<(Area<'a>, LegendLayout)>;

/// Splits `area` into the part for the plots and, below it, a band holding the legend of
/// `keys` (none without text or keys).
fn split_legend<'a>(
    area: &Area<'a>,
    keys: &[Key],
    ink: Ink,
) -> Result<(Area<'a>, Band<'a>), Box<dyn Error>> {
    if !ink.text || keys.is_empty() {
        return Ok((area.clone(), None));
    }
    let (w, h) = area.dim_in_pixel();
    let layout = legend_layout(area, keys, w as i32 - 24)?;
    let band = layout.size.1 + 2 * LEGEND_MARGIN;
    let (top, bottom) = area.split_vertically(h as i32 - band);
    Ok((top, Some((bottom, layout))))
}

/// Draws the legend box centred in its band; the box, in the chart's pixels.
fn draw_legend(
    band: &Area<'_>,
    layout: &LegendLayout,
    keys: &[Key],
) -> Result<PixelRect, Box<dyn Error>> {
    let (bw, _) = band.dim_in_pixel();
    let (w, h) = layout.size;
    let x0 = ((bw as i32 - w) / 2).max(0);
    let y0 = LEGEND_MARGIN;
    band.draw(&Rectangle::new(
        [(x0, y0), (x0 + w, y0 + h)],
        WHITE.filled(),
    ))?;
    band.draw(&Rectangle::new(
        [(x0, y0), (x0 + w, y0 + h)],
        BLACK.mix(0.4).stroke_width(1),
    ))?;
    for (k, (dx, dy)) in keys.iter().zip(&layout.at) {
        let (x, y) = (x0 + dx, y0 + dy);
        let color = k.color;
        let seg =
            |a: i32, b: i32| PathElement::new(vec![(x + a, y), (x + b, y)], color.stroke_width(2));
        match k.sample {
            Sample::Bar => {
                band.draw(&Rectangle::new(
                    [(x + 7, y - 7), (x + 23, y + 7)],
                    color.filled(),
                ))?;
            }
            Sample::Line(stroke, marker) => {
                let segs: &[(i32, i32)] = match stroke {
                    Stroke::Solid => &[(0, KEY_SAMPLE)],
                    Stroke::Dashed => &[(0, 9), (15, 24)],
                    Stroke::Dotted => &[(0, 3), (8, 11), (16, 19), (24, 27)],
                };
                for (a, b) in segs {
                    band.draw(&seg(*a, *b))?;
                }
                let c = (x + KEY_SAMPLE / 2, y);
                match marker {
                    Marker::None => {}
                    Marker::Dot => band.draw(&Circle::new(c, DOT, color.filled()))?,
                    Marker::Square => band.draw(
                        &(EmptyElement::at(c) + Rectangle::new(SQUARE, color.stroke_width(2))),
                    )?,
                    Marker::Triangle => band.draw(
                        &(EmptyElement::at(c) + PathElement::new(TRIANGLE, color.stroke_width(2))),
                    )?,
                }
            }
        }
        band.draw(&Text::new(
            k.label.clone(),
            (x + KEY_SAMPLE + KEY_GAP, y),
            label_font().pos(Pos::new(HPos::Left, VPos::Center)),
        ))?;
    }
    let (bx, by) = band.get_base_pixel();
    Ok(PixelRect {
        x0: bx + x0,
        y0: by + y0,
        x1: bx + x0 + w + 1,
        y1: by + y0 + h + 1,
    })
}

/// Where a chart's plots and legend are.
#[derive(Debug, Default)]
struct Geometry {
    plots: Vec<PixelRect>,
    legend: Option<PixelRect>,
}

type DrawResult = Result<Geometry, Box<dyn Error>>;

/// Renders a chart `(w, h)` pixels into a PNG.
fn render(
    name: &'static str,
    title: String,
    (w, h): (u32, u32),
    draw: impl FnOnce(&Area<'_>) -> DrawResult,
) -> Result<Chart, ReportError> {
    let err = |message: String| ReportError::Chart {
        chart: name,
        message,
    };
    let mut rgb = vec![255u8; w as usize * h as usize * 3];
    let geometry;
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        geometry = draw(&root).map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    let png = encode_png(&rgb, w, h).map_err(|e| err(format!("PNG encoding: {e}")))?;
    Ok(Chart {
        name,
        title,
        width: w,
        height: h,
        png,
        plots: geometry.plots,
        legend: geometry.legend,
    })
}

fn encode_png(rgb: &[u8], w: u32, h: u32) -> Result<Vec<u8>, png::EncodingError> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w, h);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let mut wr = enc.write_header()?;
    wr.write_image_data(rgb)?;
    wr.finish()?;
    Ok(out)
}

/// A chart builder with the label areas (none without text) and the caption.
fn builder<'a, 'b>(
    area: &'a Area<'b>,
    caption: &str,
    ink: Ink,
    right_axis: bool,
) -> ChartBuilder<'a, 'b, BitMapBackend<'b>> {
    let mut b = ChartBuilder::on(area);
    b.margin(12);
    if ink.text {
        b.caption(caption, title_font())
            .x_label_area_size(48)
            .y_label_area_size(72);
        if right_axis {
            b.right_y_label_area_size(72);
        }
    }
    b
}

/// An axis label with no more decimals than it needs: 10000, 2.5, 0.125.
fn tick(v: &f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A log-scale axis range around positive values, with room at both ends.
fn log_range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (lo, hi) = values
        .filter(|v| *v > 0.0)
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return 1.0..10.0;
    }
    lo / 1.4..hi * 1.4
}

/// 0 up to the largest value plus headroom; never empty.
fn up_to(values: impl Iterator<Item = f64>, headroom: f64, at_least: f64) -> std::ops::Range<f64> {
    let hi = values.filter(|v| v.is_finite()).fold(0.0, f64::max);
    0.0..(hi * headroom).max(at_least)
}

/// Distinct values in ascending order.
fn distinct(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

fn capacity(c: &CapacityTable, ink: Ink) -> Result<Chart, ReportError> {
    let title = format!(
        "Capacity test, {} traffic model: throughput and loss by subscribers",
        c.model
    );
    let keys = [
        Key::line("upload Gbit/s", UL, Stroke::Solid, Marker::Dot),
        Key::line("download Gbit/s", DL, Stroke::Solid, Marker::Dot),
        Key::line(
            "upload loss % (right axis)",
            UL,
            Stroke::Dashed,
            Marker::None,
        ),
        Key::line(
            "download loss % (right axis)",
            DL,
            Stroke::Dashed,
            Marker::None,
        ),
        Key::line(
            "0.01 % loss (right axis)",
            LIMIT_GEN,
            Stroke::Dotted,
            Marker::None,
        ),
    ];
    render("capacity", title.clone(), SINGLE, |root| {
        let (top, band) = split_legend(root, &keys, ink)?;
        let users: Vec<f64> = c.rows.iter().map(|r| r.users as f64).collect();
        let x = log_range(users.iter().copied());
        let keys_x = distinct(users.clone());
        let y = up_to(
            c.rows.iter().flat_map(|r| [r.ul_gbps, r.dl_gbps]),
            1.25,
            0.001,
        );
        let y2 = up_to(
            c.rows.iter().flat_map(|r| [r.ul_loss_pct, r.dl_loss_pct]),
            1.25,
            0.02,
        );
        let mut chart = builder(&top, &title, ink, true)
            .build_cartesian_2d(x.clone().log_scale().with_key_points(keys_x.clone()), y)?
            .set_secondary_coord(x.clone().log_scale().with_key_points(keys_x), y2);
        chart
            .configure_mesh()
            .x_desc("users (one PDU session each), log scale")
            .y_desc("throughput, Gbit/s")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .light_line_style(TRANSPARENT)
            .y_label_formatter(&tick)
            .x_label_formatter(&|v| format!("{v:.0}"))
            .draw()?;
        chart
            .configure_secondary_axes()
            .y_desc("loss, % of offered packets")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .y_label_formatter(&tick)
            .draw()?;
        let col = |f: fn(&CapacityRow) -> f64| -> Vec<(f64, f64)> {
            c.rows.iter().map(|r| (r.users as f64, f(r))).collect()
        };
        // Loss first, throughput over it.
        series!(
            chart,
            draw_secondary_series,
            col(|r| r.ul_loss_pct),
            &keys[2]
        );
        series!(
            chart,
            draw_secondary_series,
            col(|r| r.dl_loss_pct),
            &keys[3]
        );
        series!(
            chart,
            draw_secondary_series,
            vec![(x.start, 0.01), (x.end, 0.01)],
            &keys[4]
        );
        series!(chart, draw_series, col(|r| r.ul_gbps), &keys[0]);
        series!(chart, draw_series, col(|r| r.dl_gbps), &keys[1]);
        let plots = vec![PixelRect::of(chart.plotting_area().get_pixel_range())];
        finish(plots, band, &keys)
    })
}

/// The geometry of a chart whose plots are drawn: draws the legend in its band.
fn finish(plots: Vec<PixelRect>, band: Band<'_>, keys: &[Key]) -> DrawResult {
    let legend = match band {
        Some((area, layout)) => Some(draw_legend(&area, &layout, keys)?),
        None => None,
    };
    Ok(Geometry { plots, legend })
}

/// The directions present in `v`, uplink first.
fn directions(v: impl Iterator<Item = Direction>) -> Vec<Direction> {
    let mut d: Vec<Direction> = v.collect();
    d.sort();
    d.dedup();
    d
}

/// `n` panels side by side under the chart's title, and the legend band under them all.
fn panels<'a>(
    root: &Area<'a>,
    title: &str,
    n: usize,
    keys: &[Key],
    ink: Ink,
) -> Result<(Vec<Area<'a>>, Band<'a>), Box<dyn Error>> {
    let body = if ink.text {
        root.titled(title, title_font())?
    } else {
        root.clone()
    };
    let (top, band) = split_legend(&body, keys, ink)?;
    Ok((top.split_evenly((1, n.max(1))), band))
}

fn panel_size(n: usize) -> (u32, u32) {
    if n > 1 {
        (1300, PANEL_H)
    } else {
        (900, PANEL_H)
    }
}

fn throughput(r: &Report, ink: Ink) -> Result<Chart, ReportError> {
    let dirs = directions(r.throughput.iter().map(|p| p.direction));
    let title =
        "Throughput by packet size at saturation, with the limits of this machine".to_string();
    // One colour per sessions count, whatever the panel, so the panels compare.
    let all_counts = distinct(r.throughput.iter().map(|p| p.sessions as f64).collect());
    let count_key = |n: u64| {
        let k = all_counts.iter().position(|c| *c == n as f64).unwrap_or(0);
        Key::line(
            format!("UPF, {}", super::table::sessions_word(n)),
            SESSIONS_PALETTE[k % SESSIONS_PALETTE.len()],
            Stroke::Solid,
            Marker::Dot,
        )
    };
    let io_key = Key::line(
        "I/O limit (bare XDP + redirect)",
        LIMIT_IO,
        Stroke::Dashed,
        Marker::Dot,
    );
    let gen_key = Key::line(
        "generator limit (into XDP_DROP)",
        LIMIT_GEN,
        Stroke::Dotted,
        Marker::Dot,
    );
    let mut keys: Vec<Key> = all_counts.iter().map(|n| count_key(*n as u64)).collect();
    if r.limits.iter().any(|l| l.io_mpps.is_some()) {
        keys.push(io_key.clone());
    }
    if r.limits.iter().any(|l| l.generator_mpps.is_some()) {
        keys.push(gen_key.clone());
    }
    render(
        "throughput",
        title.clone(),
        panel_size(dirs.len()),
        |root| {
            let (areas, band) = panels(root, &title, dirs.len(), &keys, ink)?;
            let mut plots = Vec::new();
            for (area, dir) in areas.iter().zip(&dirs) {
                let pts: Vec<&ThroughputPoint> = r
                    .throughput
                    .iter()
                    .filter(|p| p.direction == *dir)
                    .collect();
                let lims: Vec<&Limit> = r.limits.iter().filter(|l| l.direction == *dir).collect();
                let sizes = distinct(
                    pts.iter()
                        .map(|p| f64::from(p.packet_bytes))
                        .chain(lims.iter().map(|l| f64::from(l.packet_bytes)))
                        .collect(),
                );
                let x = log_range(sizes.iter().copied());
                let y = up_to(
                    pts.iter().map(|p| p.received_mpps).chain(
                        lims.iter()
                            .flat_map(|l| [l.generator_mpps, l.io_mpps])
                            .flatten(),
                    ),
                    1.15,
                    0.01,
                );
                let caption = match dir {
                    Direction::Uplink => "Uplink (N3 GTP-U to N6)",
                    Direction::Downlink => "Downlink (N6 to N3 GTP-U)",
                };
                let mut chart = builder(area, caption, ink, false)
                    .build_cartesian_2d(x.log_scale().with_key_points(sizes), y)?;
                chart
                    .configure_mesh()
                    .x_desc("user packet size, bytes (log scale)")
                    .y_desc("received, Mpps")
                    .axis_desc_style(desc_font())
                    .label_style(label_font())
                    .light_line_style(TRANSPARENT)
                    .y_label_formatter(&tick)
                    .x_label_formatter(&|v| format!("{v:.0}"))
                    .draw()?;
                let limit_line = |f: fn(&Limit) -> Option<f64>| -> Vec<(f64, f64)> {
                    let mut v: Vec<(f64, f64)> = lims
                        .iter()
                        .filter_map(|l| f(l).map(|m| (f64::from(l.packet_bytes), m)))
                        .collect();
                    v.sort_by(|a, b| a.0.total_cmp(&b.0));
                    v
                };
                // The limits first, the UPF's figures over them.
                let io = limit_line(|l| l.io_mpps);
                if !io.is_empty() {
                    series!(chart, draw_series, io, &io_key);
                }
                let gen = limit_line(|l| l.generator_mpps);
                if !gen.is_empty() {
                    series!(chart, draw_series, gen, &gen_key);
                }
                let mut counts: Vec<u64> = pts.iter().map(|p| p.sessions).collect();
                counts.sort();
                counts.dedup();
                for n in counts {
                    let mut line: Vec<(f64, f64)> = pts
                        .iter()
                        .filter(|p| p.sessions == n)
                        .map(|p| (f64::from(p.packet_bytes), p.received_mpps))
                        .collect();
                    line.sort_by(|a, b| a.0.total_cmp(&b.0));
                    series!(chart, draw_series, line, &count_key(n));
                }
                plots.push(PixelRect::of(chart.plotting_area().get_pixel_range()));
            }
            finish(plots, band, &keys)
        },
    )
}

fn loss(v: &[NoDropRate], ink: Ink) -> Result<Chart, ReportError> {
    let title = "Offered vs received rate, and loss, around the no-drop rate".to_string();
    let one_per_dir = directions(v.iter().map(|n| n.direction)).len() == v.len();
    let diagonal = Key::line(
        "received = offered",
        LIMIT_GEN,
        Stroke::Dotted,
        Marker::None,
    );
    // Per curve: received, loss, the no-drop rate.
    let curves: Vec<(&NoDropRate, [Key; 3])> = v
        .iter()
        .enumerate()
        .filter(|(_, n)| !n.curve.is_empty())
        .map(|(i, n)| {
            let color = if one_per_dir {
                dir_color(n.direction)
            } else {
                PALETTE[i % PALETTE.len()]
            };
            let name = format!("{} {} B", n.direction, n.packet_bytes);
            (
                n,
                [
                    Key::line(
                        format!("{name} received"),
                        color,
                        Stroke::Solid,
                        Marker::Dot,
                    ),
                    Key::line(
                        format!("{name} loss % (right axis)"),
                        color,
                        Stroke::Dashed,
                        Marker::None,
                    ),
                    Key::line(
                        format!("{name} no-drop rate {} Mpps", sig3(n.mpps)),
                        color,
                        Stroke::Dotted,
                        Marker::None,
                    ),
                ],
            )
        })
        .collect();
    let mut keys = vec![diagonal.clone()];
    keys.extend(curves.iter().flat_map(|(_, k)| k.iter().cloned()));
    render("loss", title.clone(), SINGLE, |root| {
        let (top, band) = split_legend(root, &keys, ink)?;
        let offered = v
            .iter()
            .flat_map(|n| n.curve.iter().map(|p| p.offered_mpps));
        let x = up_to(offered.clone(), 1.05, 0.01);
        let y = x.clone();
        let y2 = up_to(
            v.iter().flat_map(|n| n.curve.iter().map(|p| p.loss_pct)),
            1.2,
            1.0,
        );
        let mut chart = builder(&top, &title, ink, true)
            .build_cartesian_2d(x.clone(), y.clone())?
            .set_secondary_coord(x.clone(), y2.clone());
        chart
            .configure_mesh()
            .x_desc("offered, Mpps")
            .y_desc("received, Mpps")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .light_line_style(TRANSPARENT)
            .y_label_formatter(&tick)
            .draw()?;
        chart
            .configure_secondary_axes()
            .y_desc("loss, % of offered packets")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .y_label_formatter(&tick)
            .draw()?;
        series!(
            chart,
            draw_series,
            vec![(0.0, 0.0), (x.end, x.end)],
            &diagonal
        );
        for (n, [rx_key, loss_key, rate_key]) in &curves {
            let mut curve = n.curve.clone();
            curve.sort_by(|a, b| a.offered_mpps.total_cmp(&b.offered_mpps));
            let rx: Vec<(f64, f64)> = curve
                .iter()
                .map(|p| (p.offered_mpps, p.received_mpps))
                .collect();
            let lp: Vec<(f64, f64)> = curve.iter().map(|p| (p.offered_mpps, p.loss_pct)).collect();
            series!(chart, draw_secondary_series, lp, loss_key);
            series!(
                chart,
                draw_series,
                vec![(n.mpps, 0.0), (n.mpps, y.end)],
                rate_key
            );
            series!(chart, draw_series, rx, rx_key);
        }
        let plots = vec![PixelRect::of(chart.plotting_area().get_pixel_range())];
        finish(plots, band, &keys)
    })
}

fn latency(v: &[LatencyPoint], ink: Ink) -> Result<Chart, ReportError> {
    let dirs = directions(v.iter().map(|p| p.direction));
    let title = "Latency through the UPF at 10, 50 and 90 % of the no-drop rate".to_string();
    const BARS: [(&str, RGBColor); 3] = [
        ("p50", RGBColor(44, 160, 44)),
        ("p99", RGBColor(255, 127, 14)),
        ("p99.9", RGBColor(214, 39, 40)),
    ];
    let keys: Vec<Key> = BARS.iter().map(|(n, c)| Key::bar(*n, *c)).collect();
    render("latency", title.clone(), panel_size(dirs.len()), |root| {
        let y = up_to(
            v.iter().map(|p| p.p999_us.max(p.p99_us).max(p.p50_us)),
            1.15,
            1.0,
        );
        let (areas, band) = panels(root, &title, dirs.len(), &keys, ink)?;
        let mut plots = Vec::new();
        for (area, dir) in areas.iter().zip(&dirs) {
            let mut pts: Vec<&LatencyPoint> = v.iter().filter(|p| p.direction == *dir).collect();
            pts.sort_by_key(|p| (p.packet_bytes, p.percent_of_no_drop));
            let sizes = distinct(pts.iter().map(|p| f64::from(p.packet_bytes)).collect());
            let labels: Vec<String> = pts
                .iter()
                .map(|p| {
                    let size = if sizes.len() > 1 {
                        format!("{} B, ", p.packet_bytes)
                    } else {
                        String::new()
                    };
                    format!(
                        "{size}{} % ({} Mpps)",
                        p.percent_of_no_drop,
                        sig3(p.offered_mpps)
                    )
                })
                .collect();
            let n = pts.len();
            let caption = match dir {
                Direction::Uplink => "Uplink".to_string(),
                Direction::Downlink => "Downlink".to_string(),
            };
            let caption = match sizes.as_slice() {
                [s] => format!("{caption}, {s:.0} B packets"),
                _ => caption,
            };
            let mut chart =
                builder(area, &caption, ink, false).build_cartesian_2d(Groups { n }, y.clone())?;
            chart
                .configure_mesh()
                .disable_x_mesh()
                .x_desc("offered rate, % of the no-drop rate")
                .y_desc("latency, µs")
                .axis_desc_style(desc_font())
                .label_style(label_font())
                .light_line_style(TRANSPARENT)
                .y_label_formatter(&tick)
                .x_label_formatter(&|x| {
                    labels
                        .get(x.floor().max(0.0) as usize)
                        .cloned()
                        .unwrap_or_default()
                })
                .draw()?;
            for (b, (_, color)) in BARS.iter().enumerate() {
                let value = |p: &LatencyPoint| match b {
                    0 => p.p50_us,
                    1 => p.p99_us,
                    _ => p.p999_us,
                };
                let x0 = |i: usize| i as f64 + 0.14 + b as f64 * 0.24;
                chart.draw_series(pts.iter().enumerate().map(|(i, p)| {
                    Rectangle::new([(x0(i), 0.0), (x0(i) + 0.22, value(p))], color.filled())
                }))?;
                if ink.text {
                    chart.draw_series(pts.iter().enumerate().map(|(i, p)| {
                        Text::new(
                            format!("{:.0}", value(p)),
                            (x0(i) + 0.11, value(p)),
                            ("sans-serif", 12)
                                .into_font()
                                .color(&BLACK)
                                .pos(Pos::new(HPos::Center, VPos::Bottom)),
                        )
                    }))?;
                }
            }
            plots.push(PixelRect::of(chart.plotting_area().get_pixel_range()));
        }
        finish(plots, band, &keys)
    })
}

/// An x axis of `n` groups of bars: group i spans [i, i + 1), its tick at i + 0.5.
struct Groups {
    n: usize,
}

impl Ranged for Groups {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, (lo, hi): (i32, i32)) -> i32 {
        lo + (f64::from(hi - lo) * v / self.n.max(1) as f64).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, _: H) -> Vec<f64> {
        (0..self.n).map(|i| i as f64 + 0.5).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        0.0..self.n as f64
    }
}

/// The colour of the establishment rate in the sessions chart.
const RATE: RGBColor = UL;
/// The colour of the p99 establishment latency in the sessions chart.
const P99: RGBColor = PALETTE[3];

fn sessions(v: &[SessionRatePoint], ink: Ink) -> Result<Chart, ReportError> {
    let title = "PFCP session establishment with sessions resident".to_string();
    // Each series its own mark: where a latency lands on the rate's point (one point of
    // each scales to the same height), the rate's dot shows inside the hollow marks,
    // drawn over them.
    let keys = [
        Key::line("establishments/s", RATE, Stroke::Solid, Marker::Dot),
        Key::line(
            "latency p50, ms (right axis)",
            DL,
            Stroke::Dashed,
            Marker::Triangle,
        ),
        Key::line(
            "latency p99, ms (right axis)",
            P99,
            Stroke::Dotted,
            Marker::Square,
        ),
    ];
    render("sessions", title.clone(), SINGLE, |root| {
        let (top, band) = split_legend(root, &keys, ink)?;
        let mut pts: Vec<&SessionRatePoint> = v.iter().collect();
        pts.sort_by_key(|p| p.resident);
        let keys_x = distinct(pts.iter().map(|p| p.resident as f64).collect());
        let x = log_range(keys_x.iter().copied());
        let y = up_to(pts.iter().map(|p| p.established_per_s), 1.25, 1.0);
        let y2 = up_to(pts.iter().map(|p| p.p99_ms.max(p.p50_ms)), 1.25, 0.1);
        let mut chart = builder(&top, &title, ink, true)
            .build_cartesian_2d(x.clone().log_scale().with_key_points(keys_x.clone()), y)?
            .set_secondary_coord(x.log_scale().with_key_points(keys_x), y2);
        chart
            .configure_mesh()
            .x_desc("sessions resident, log scale")
            .y_desc("establishments per second")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .light_line_style(TRANSPARENT)
            .y_label_formatter(&tick)
            .x_label_formatter(&|v| count_short(v.round() as u64))
            .draw()?;
        chart
            .configure_secondary_axes()
            .y_desc("establishment latency, ms")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .y_label_formatter(&tick)
            .draw()?;
        let col = |f: fn(&SessionRatePoint) -> f64| -> Vec<(f64, f64)> {
            pts.iter().map(|p| (p.resident as f64, f(p))).collect()
        };
        series!(chart, draw_secondary_series, col(|p| p.p99_ms), &keys[2]);
        series!(chart, draw_secondary_series, col(|p| p.p50_ms), &keys[1]);
        series!(chart, draw_series, col(|p| p.established_per_s), &keys[0]);
        let plots = vec![PixelRect::of(chart.plotting_area().get_pixel_range())];
        finish(plots, band, &keys)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RGB pixels of a chart's PNG.
    fn pixels(c: &Chart) -> Vec<[u8; 3]> {
        let mut reader = png::Decoder::new(std::io::Cursor::new(c.png.clone()))
            .read_info()
            .unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        buf.chunks(3).map(|p| [p[0], p[1], p[2]]).collect()
    }

    /// Pixels of `color` inside `r`.
    fn count_in(c: &Chart, px: &[[u8; 3]], r: &PixelRect, color: RGBColor) -> usize {
        let RGBColor(cr, cg, cb) = color;
        px.iter()
            .enumerate()
            .filter(|(i, p)| {
                let (x, y) = ((*i as u32 % c.width) as i32, (*i as u32 / c.width) as i32);
                r.contains(x, y) && **p == [cr, cg, cb]
            })
            .count()
    }

    fn two_session_points() -> Report {
        let mut r = Report::new("two sessions points (synthetic)");
        for (resident, rate) in [(1000, 9500.0), (100_000, 9100.0)] {
            r.sessions.push(SessionRatePoint {
                resident,
                established_per_s: rate,
                p50_ms: 0.9,
                p99_ms: 3.1,
                max_ms: 12.0,
                bytes_per_session: None,
                map_bytes_per_session: None,
            });
        }
        r
    }

    /// One resident count is no series: the table's row, no chart (issue 29).
    #[test]
    fn one_sessions_point_draws_no_chart() {
        let mut r = two_session_points();
        r.sessions.truncate(1);
        assert!(render_charts_without_text(&r).unwrap().charts.is_empty());
        // Two measurements at the same resident count are one point too.
        r.sessions.push(r.sessions[0].clone());
        assert!(render_charts_without_text(&r).unwrap().charts.is_empty());
    }

    #[test]
    fn the_rate_shows_where_the_p99_lands_on_it() {
        let charts = render_charts_without_text(&two_session_points()).unwrap();
        let c = &charts.charts[0];
        assert_eq!(c.name, "sessions");
        let px = pixels(c);
        let plot = c.plots[0];
        assert!(
            count_in(c, &px, &plot, RATE) >= 25,
            "the establishment rate's dot is hidden"
        );
        assert!(count_in(c, &px, &plot, P99) >= 25, "the p99 mark is hidden");
        assert!(count_in(c, &px, &plot, DL) >= 25, "the p50 mark is hidden");
    }

    #[test]
    fn legends_sit_below_the_plots_and_hold_their_keys() {
        if font().is_err() {
            return;
        }
        let mut r = two_session_points();
        r.throughput.push(ThroughputPoint::measured(
            Direction::Uplink,
            650,
            1,
            2.0,
            1.0,
        ));
        r.throughput.push(ThroughputPoint::measured(
            Direction::Downlink,
            650,
            1,
            2.0,
            1.5,
        ));
        r.no_drop.push(NoDropRate {
            direction: Direction::Uplink,
            packet_bytes: 650,
            sessions: 1,
            mpps: 1.0,
            gbps: gbps(1.0, 650),
            curve: vec![LossPoint::measured(1.0, 1.0), LossPoint::measured(2.0, 1.2)],
            rig_mpps: None,
        });
        let charts = render_charts(&r).unwrap();
        assert_eq!(charts.charts.len(), 3);
        for c in &charts.charts {
            let l = c.legend.expect("a legend");
            assert!(l.x0 >= 0 && l.x1 <= c.width as i32 && l.y1 <= c.height as i32);
            for p in &c.plots {
                assert!(!p.overlaps(&l), "{}: legend {l:?} on plot {p:?}", c.name);
                assert!(l.y0 > p.y1, "{}: legend not below the plot", c.name);
            }
            // The keys' colours are drawn inside the legend's box.
            let px = pixels(c);
            assert!(count_in(c, &px, &l, SESSIONS_PALETTE[0]) + count_in(c, &px, &l, RATE) > 10);
        }
    }
}
