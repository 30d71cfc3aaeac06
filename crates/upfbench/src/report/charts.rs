//! One PNG chart per table, drawn with plotters into memory and encoded with png.
//!
//! Text needs a TrueType font read at run time from [`FONT`] (Debian: fonts-dejavu-core);
//! without it the charts are still drawn, without any text, and a warning says so.

use std::error::Error;
use std::sync::OnceLock;

use plotters::chart::DualCoordChartContext;
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
}

impl Chart {
    pub fn file_name(&self) -> String {
        format!("{}.png", self.name)
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
    if !r.sessions.is_empty() {
        charts.push(sessions(&r.sessions, ink)?);
    }
    Ok(Charts { charts, warnings })
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
type DrawResult = Result<(), Box<dyn Error>>;

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

/// A legend sample's look: four segments of a 24 px line (always four, so every stroke
/// draws the same element type) and the fill of the marker circle (clear without one).
fn legend_shape(color: RGBColor, stroke: Stroke, marker: bool) -> ([(i32, i32); 4], ShapeStyle) {
    let segs = match stroke {
        Stroke::Solid => [(0, 8), (8, 16), (16, 24), (0, 24)],
        Stroke::Dashed => [(0, 8), (0, 8), (14, 22), (14, 22)],
        Stroke::Dotted => [(0, 2), (7, 9), (14, 16), (21, 23)],
    };
    let dot = if marker {
        color.filled()
    } else {
        color.mix(0.0).filled()
    };
    (segs, dot)
}

/// Draws a series of a stroke on `chart`, with circles at the points if `marker`.
macro_rules! series {
    ($chart:expr, $draw:ident, $pts:expr, $color:expr, $stroke:expr, $marker:expr, $label:expr, $ink:expr) => {{
        let pts: Vec<(f64, f64)> = $pts;
        let color: RGBColor = $color;
        let style = color.stroke_width(2);
        let anno = match $stroke {
            Stroke::Solid => $chart.$draw(LineSeries::new(pts.clone(), style))?,
            Stroke::Dashed => $chart.$draw(DashedLineSeries::new(pts.clone(), 9, 6, style))?,
            Stroke::Dotted => $chart.$draw(DashedLineSeries::new(pts.clone(), 3, 5, style))?,
        };
        if $ink.text {
            let (segs, dot) = legend_shape(color, $stroke, $marker);
            anno.label($label).legend(move |(x, y)| {
                let seg = |(a, b): (i32, i32)| {
                    PathElement::new(vec![(a, 0), (b, 0)], color.stroke_width(2))
                };
                EmptyElement::at((x, y))
                    + seg(segs[0])
                    + seg(segs[1])
                    + seg(segs[2])
                    + seg(segs[3])
                    + Circle::new((12, 0), 3, dot)
            });
        }
        if $marker {
            $chart.$draw(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
        }
    }};
}

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
    {
        let root = BitMapBackend::with_buffer(&mut rgb, (w, h)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        draw(&root).map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    let png = encode_png(&rgb, w, h).map_err(|e| err(format!("PNG encoding: {e}")))?;
    Ok(Chart {
        name,
        title,
        width: w,
        height: h,
        png,
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
    render("capacity", title.clone(), SINGLE, |root| {
        let users: Vec<f64> = c.rows.iter().map(|r| r.users as f64).collect();
        let x = log_range(users.iter().copied());
        let keys = distinct(users.clone());
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
        let mut chart = builder(root, &title, ink, true)
            .build_cartesian_2d(x.clone().log_scale().with_key_points(keys.clone()), y)?
            .set_secondary_coord(x.clone().log_scale().with_key_points(keys), y2);
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
        series!(
            chart,
            draw_series,
            col(|r| r.ul_gbps),
            UL,
            Stroke::Solid,
            true,
            "upload Gbit/s",
            ink
        );
        series!(
            chart,
            draw_series,
            col(|r| r.dl_gbps),
            DL,
            Stroke::Solid,
            true,
            "download Gbit/s",
            ink
        );
        series!(
            chart,
            draw_secondary_series,
            col(|r| r.ul_loss_pct),
            UL,
            Stroke::Dashed,
            false,
            "upload loss % (right axis)",
            ink
        );
        series!(
            chart,
            draw_secondary_series,
            col(|r| r.dl_loss_pct),
            DL,
            Stroke::Dashed,
            false,
            "download loss % (right axis)",
            ink
        );
        series!(
            chart,
            draw_secondary_series,
            vec![(x.start, 0.01), (x.end, 0.01)],
            LIMIT_GEN,
            Stroke::Dotted,
            false,
            "0.01 % loss (right axis)",
            ink
        );
        legend2(&mut chart, ink, SeriesLabelPosition::UpperLeft)?;
        Ok(())
    })
}

/// Draws the legend box of a chart, when there is text.
fn legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    ink: Ink,
    pos: SeriesLabelPosition,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    if ink.text {
        chart
            .configure_series_labels()
            .position(pos)
            .label_font(label_font())
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .legend_area_size(30)
            .draw()?;
    }
    Ok(())
}

/// As [`legend`], for a chart with a secondary axis.
fn legend2<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged, X2: Ranged, Y2: Ranged>(
    chart: &mut DualCoordChartContext<'a, DB, Cartesian2d<X, Y>, Cartesian2d<X2, Y2>>,
    ink: Ink,
    pos: SeriesLabelPosition,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    if ink.text {
        chart
            .configure_series_labels()
            .position(pos)
            .label_font(label_font())
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .legend_area_size(30)
            .draw()?;
    }
    Ok(())
}

/// The directions present in `v`, uplink first.
fn directions(v: impl Iterator<Item = Direction>) -> Vec<Direction> {
    let mut d: Vec<Direction> = v.collect();
    d.sort();
    d.dedup();
    d
}

fn panels<'a>(
    root: &Area<'a>,
    title: &str,
    n: usize,
    ink: Ink,
) -> Result<Vec<Area<'a>>, Box<dyn Error>> {
    let body = if ink.text {
        root.titled(title, title_font())?
    } else {
        root.clone()
    };
    Ok(body.split_evenly((1, n.max(1))))
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
    render(
        "throughput",
        title.clone(),
        panel_size(dirs.len()),
        |root| {
            for (area, dir) in panels(root, &title, dirs.len(), ink)?.iter().zip(&dirs) {
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
                let mut counts: Vec<u64> = pts.iter().map(|p| p.sessions).collect();
                counts.sort();
                counts.dedup();
                for (i, n) in counts.iter().enumerate() {
                    let mut line: Vec<(f64, f64)> = pts
                        .iter()
                        .filter(|p| p.sessions == *n)
                        .map(|p| (f64::from(p.packet_bytes), p.received_mpps))
                        .collect();
                    line.sort_by(|a, b| a.0.total_cmp(&b.0));
                    // One colour per sessions count, whatever the panel, so the panels compare.
                    let all_counts =
                        distinct(r.throughput.iter().map(|p| p.sessions as f64).collect());
                    let k = all_counts.iter().position(|c| *c == *n as f64).unwrap_or(i);
                    let color = SESSIONS_PALETTE[k % SESSIONS_PALETTE.len()];
                    let label = format!("UPF, {}", super::table::sessions_word(*n));
                    series!(
                        chart,
                        draw_series,
                        line,
                        color,
                        Stroke::Solid,
                        true,
                        label,
                        ink
                    );
                }
                let limit_line = |f: fn(&Limit) -> Option<f64>| -> Vec<(f64, f64)> {
                    let mut v: Vec<(f64, f64)> = lims
                        .iter()
                        .filter_map(|l| f(l).map(|m| (f64::from(l.packet_bytes), m)))
                        .collect();
                    v.sort_by(|a, b| a.0.total_cmp(&b.0));
                    v
                };
                let io = limit_line(|l| l.io_mpps);
                if !io.is_empty() {
                    series!(
                        chart,
                        draw_series,
                        io,
                        LIMIT_IO,
                        Stroke::Dashed,
                        true,
                        "I/O limit (bare XDP + redirect)",
                        ink
                    );
                }
                let gen = limit_line(|l| l.generator_mpps);
                if !gen.is_empty() {
                    series!(
                        chart,
                        draw_series,
                        gen,
                        LIMIT_GEN,
                        Stroke::Dotted,
                        true,
                        "generator limit (into XDP_DROP)",
                        ink
                    );
                }
                legend(&mut chart, ink, SeriesLabelPosition::UpperRight)?;
            }
            Ok(())
        },
    )
}

fn loss(v: &[NoDropRate], ink: Ink) -> Result<Chart, ReportError> {
    let title = "Offered vs received rate, and loss, around the no-drop rate".to_string();
    render("loss", title.clone(), SINGLE, |root| {
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
        let mut chart = builder(root, &title, ink, true)
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
            LIMIT_GEN,
            Stroke::Dotted,
            false,
            "received = offered",
            ink
        );
        let one_per_dir = directions(v.iter().map(|n| n.direction)).len() == v.len();
        for (i, n) in v.iter().enumerate().filter(|(_, n)| !n.curve.is_empty()) {
            let color = if one_per_dir {
                dir_color(n.direction)
            } else {
                PALETTE[i % PALETTE.len()]
            };
            let name = format!("{} {} B", n.direction, n.packet_bytes);
            let mut curve = n.curve.clone();
            curve.sort_by(|a, b| a.offered_mpps.total_cmp(&b.offered_mpps));
            let rx: Vec<(f64, f64)> = curve
                .iter()
                .map(|p| (p.offered_mpps, p.received_mpps))
                .collect();
            let lp: Vec<(f64, f64)> = curve.iter().map(|p| (p.offered_mpps, p.loss_pct)).collect();
            series!(
                chart,
                draw_series,
                rx,
                color,
                Stroke::Solid,
                true,
                format!("{name} received"),
                ink
            );
            series!(
                chart,
                draw_secondary_series,
                lp,
                color,
                Stroke::Dashed,
                false,
                format!("{name} loss % (right axis)"),
                ink
            );
            series!(
                chart,
                draw_series,
                vec![(n.mpps, 0.0), (n.mpps, y.end)],
                color,
                Stroke::Dotted,
                false,
                format!("{name} no-drop rate {} Mpps", sig3(n.mpps)),
                ink
            );
        }
        legend2(&mut chart, ink, SeriesLabelPosition::UpperLeft)?;
        Ok(())
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
    render("latency", title.clone(), panel_size(dirs.len()), |root| {
        let y = up_to(
            v.iter().map(|p| p.p999_us.max(p.p99_us).max(p.p50_us)),
            1.15,
            1.0,
        );
        for (area, dir) in panels(root, &title, dirs.len(), ink)?.iter().zip(&dirs) {
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
            for (b, (name, color)) in BARS.iter().enumerate() {
                let value = |p: &LatencyPoint| match b {
                    0 => p.p50_us,
                    1 => p.p99_us,
                    _ => p.p999_us,
                };
                let x0 = |i: usize| i as f64 + 0.14 + b as f64 * 0.24;
                let anno = chart.draw_series(pts.iter().enumerate().map(|(i, p)| {
                    Rectangle::new([(x0(i), 0.0), (x0(i) + 0.22, value(p))], color.filled())
                }))?;
                if ink.text {
                    let c = *color;
                    anno.label(*name).legend(move |(x, y)| {
                        Rectangle::new([(x, y - 6), (x + 16, y + 6)], c.filled())
                    });
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
            legend(&mut chart, ink, SeriesLabelPosition::UpperLeft)?;
        }
        Ok(())
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

fn sessions(v: &[SessionRatePoint], ink: Ink) -> Result<Chart, ReportError> {
    let title = "PFCP session establishment with sessions resident".to_string();
    render("sessions", title.clone(), SINGLE, |root| {
        let mut pts: Vec<&SessionRatePoint> = v.iter().collect();
        pts.sort_by_key(|p| p.resident);
        let keys = distinct(pts.iter().map(|p| p.resident as f64).collect());
        let x = log_range(keys.iter().copied());
        let y = up_to(pts.iter().map(|p| p.established_per_s), 1.25, 1.0);
        let y2 = up_to(pts.iter().map(|p| p.p99_ms.max(p.p50_ms)), 1.25, 0.1);
        let mut chart = builder(root, &title, ink, true)
            .build_cartesian_2d(x.clone().log_scale().with_key_points(keys.clone()), y)?
            .set_secondary_coord(x.log_scale().with_key_points(keys), y2);
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
        series!(
            chart,
            draw_series,
            col(|p| p.established_per_s),
            UL,
            Stroke::Solid,
            true,
            "establishments/s",
            ink
        );
        series!(
            chart,
            draw_secondary_series,
            col(|p| p.p50_ms),
            DL,
            Stroke::Dashed,
            true,
            "latency p50, ms (right axis)",
            ink
        );
        series!(
            chart,
            draw_secondary_series,
            col(|p| p.p99_ms),
            PALETTE[3],
            Stroke::Dotted,
            true,
            "latency p99, ms (right axis)",
            ink
        );
        legend2(&mut chart, ink, SeriesLabelPosition::LowerLeft)?;
        Ok(())
    })
}
