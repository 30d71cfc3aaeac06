//! The benchmark report: JSON, text, PNG charts and the HTML page, from a report of
//! synthetic figures (clearly labelled as such; nothing here was measured).
//!
//! To look at the charts: `REPORT_SAMPLE_DIR=/tmp/report cargo test -p upfbench --test
//! report` also writes the sample report there.

use std::path::Path;

mod common;

use common::report_sample::{capacity_rows, sample};
use upfbench::report::*;

const PNG_SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// Width, height and RGB pixels of a PNG file.
fn decode(path: &Path) -> (u32, u32, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(bytes[..8], PNG_SIGNATURE, "{} is not a PNG", path.display());
    let mut reader = png::Decoder::new(std::io::Cursor::new(bytes))
        .read_info()
        .unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

fn pixels_of(rgb: &[u8], color: [u8; 3]) -> usize {
    rgb.chunks(3).filter(|p| *p == color).count()
}

fn dark_pixels(rgb: &[u8]) -> usize {
    rgb.chunks(3).filter(|p| p.iter().all(|c| *c < 80)).count()
}

#[test]
fn write_all_writes_json_charts_and_one_html_page() {
    let r = sample();
    let dir = tempfile::tempdir().unwrap();
    let w = r.write_all(dir.path()).unwrap();
    if let Some(out) = std::env::var_os("REPORT_SAMPLE_DIR") {
        r.write_all(&out).unwrap();
        std::fs::write(Path::new(&out).join("report.txt"), render_text(&r)).unwrap();
    }

    let names: Vec<String> = w
        .paths()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "report.json",
            "capacity.png",
            "throughput.png",
            "loss.png",
            "latency.png",
            "sessions.png",
            "report.html"
        ]
    );

    // Real PNGs of the promised sizes, with the data drawn in the direction colours.
    const BLUE: [u8; 3] = [31, 119, 180]; // uplink, first series
    const GREEN: [u8; 3] = [44, 160, 44]; // p50 bars
    for (name, size, color) in [
        ("capacity.png", (1000, 560), BLUE),
        ("throughput.png", (1300, 540), BLUE),
        ("loss.png", (1000, 560), BLUE),
        ("latency.png", (1300, 540), GREEN),
        ("sessions.png", (1000, 560), BLUE),
    ] {
        let (width, height, rgb) = decode(&dir.path().join(name));
        assert_eq!((width, height), size, "{name}");
        assert!(pixels_of(&rgb, color) > 100, "{name}: no data drawn");
    }
    let (_, _, rgb) = decode(&dir.path().join("capacity.png"));
    assert!(
        pixels_of(&rgb, [255, 127, 14]) > 100,
        "capacity.png: no downlink series"
    );

    // Text is drawn when the font is there, and the reader is told when it is not.
    let plain = render_charts_without_text(&r).unwrap();
    assert!(plain.warnings.is_empty());
    let (_, _, plain_rgb) = {
        let p = dir.path().join("plain-capacity.png");
        std::fs::write(&p, &plain.charts[0].png).unwrap();
        decode(&p)
    };
    if Path::new(FONT).exists() {
        assert!(w.warnings.is_empty(), "{:?}", w.warnings);
        assert!(
            dark_pixels(&rgb) > dark_pixels(&plain_rgb) + 2000,
            "capacity.png has no more text than the chart drawn without text"
        );
    } else {
        assert!(
            w.warnings.iter().any(|x| x.contains("without text")),
            "{:?}",
            w.warnings
        );
    }

    // The JSON file reads back as the same report.
    assert_eq!(Report::read_json(&w.json).unwrap(), r);
}

#[test]
fn html_page_holds_every_table_and_inlined_chart() {
    let r = sample();
    let dir = tempfile::tempdir().unwrap();
    let w = r.write_all(dir.path()).unwrap();
    let html = std::fs::read_to_string(&w.html).unwrap();

    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("<h1>SYNTHETIC TEST DATA (not a measurement): upfbench capacity</h1>"));
    assert!(html.contains("<a href=\"report.json\">report.json</a>"));
    // Self-contained: no script, nothing fetched from elsewhere.
    assert!(!html.contains("<script"));
    assert!(!html.contains("src=\"http"));
    assert!(!html.contains("href=\"http"));
    assert_eq!(html.matches("<img src=\"data:image/png;base64,").count(), 5);

    // Machine facts and the UPF under test.
    assert!(html.contains("<tr><td>CPU</td><td>Synthetic CPU @ 2.00GHz (test data)</td></tr>"));
    assert!(html.contains("<tr><td>generator CPUs</td><td>0</td></tr>"));
    assert!(html.contains("<tr><td>busiest processes</td><td>upfd (4242) 97 %</td></tr>"));
    assert!(html.contains("<tr><td>CHOOSE</td><td>on</td></tr>"));
    // One row of each table.
    let row = |cells: &[&str]| {
        let tds: String = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 && c.chars().all(|c| c.is_ascii_alphabetic()) {
                    format!("<td>{c}</td>")
                } else {
                    format!("<td class=\"r\">{c}</td>")
                }
            })
            .collect();
        format!("<tr>{tds}</tr>")
    };
    for users in [100, 500, 1000, 2000, 4000, 8000, 16000] {
        assert!(
            html.contains(&format!("<tr><td class=\"r\">{users}</td>")),
            "users {users}"
        );
    }
    for expected in [
        row(&[
            "8000", "12.410", "0.012", "16.020", "0.310", "2.507", "2.829",
        ]),
        row(&["UL", "64", "17.500", "4.200"]),
        row(&[
            "UL", "64", "1", "17.500", "3.100", "1.587", "82.286", "0.74", "0.18",
        ]),
        row(&["DL", "64", "3.500", "3.280", "6.286"]),
        row(&[
            "UL", "64", "90", "2.520", "40.0", "140.0", "420.0", "30.0", "110.0", "100000",
        ]),
        row(&["1M", "8200", "1.20", "4.80", "45.00", "1350"]),
    ] {
        assert!(html.contains(&expected), "missing {expected}");
    }
    assert!(html.contains(
        "UL 64 B, 1 session: 3.10 Mpps = 0.74 x I/O limit 4.20 Mpps, 0.18 x generator limit 17.5 Mpps"
    ));
}

#[test]
fn json_round_trips_through_serde() {
    let r = sample();
    let json = r.to_json();
    let back: Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    // Sections a run did not measure are left out, and read back as absent.
    let empty = Report::new("nothing measured");
    let json = serde_json::to_string(&empty).unwrap();
    assert_eq!(json, r#"{"schema":1,"title":"nothing measured"}"#);
    assert_eq!(serde_json::from_str::<Report>(&json).unwrap(), empty);
}

#[test]
fn text_shows_the_capacity_table_in_the_papers_column_order() {
    let mut r = Report::new("capacity");
    r.capacity = Some(CapacityTable {
        model: TrafficModel::Carrier,
        rows: capacity_rows()[3..6].to_vec(),
    });
    let expected = "\
capacity
========

Capacity test (traffic model: carrier)
--------------------------------------
per user UL 2089 kbit/s 422 pps, DL 3948 kbit/s 696 pps; HTTP + UDP; 600-700 B

users | upload Gbit/s | upload loss % | download Gbit/s | download loss % | UL Mpps | DL Mpps
------+---------------+---------------+-----------------+-----------------+---------+--------
 2000 |         4.178 |         0.000 |           7.896 |           0.001 |   0.844 |   1.392
 4000 |         8.356 |         0.004 |          15.790 |           0.009 |   1.688 |   2.784
 8000 |        12.410 |         0.012 |          16.020 |           0.310 |   2.507 |   2.829
";
    assert_eq!(render_text(&r), expected);
}

#[test]
fn text_shows_limits_ratios_no_drop_latency_sessions_and_machine() {
    let text = render_text(&sample());
    for line in [
        "UL 64 B, 1 session: 3.10 Mpps = 0.74 x I/O limit 4.20 Mpps, 0.18 x generator limit 17.5 Mpps",
        "DL 1400 B, 1M sessions: 2.10 Mpps = 0.78 x I/O limit 2.70 Mpps, 0.26 x generator limit 8.20 Mpps, 0.88 x 1 session",
        "UL 64 B, 1k sessions: no-drop rate 2.80 Mpps (1.43 Gbit/s)",
        "dir | packet B | % of no-drop | offered Mpps | p50 µs | p99 µs | p99.9 µs | bare p99 µs | added p99 µs | samples",
        "DL  |       64 |           90 |        2.700 |   44.0 |  154.0 |    462.0 |        30.0 |        124.0 |  100000",
        "resident sessions | established/s | p50 ms | p99 ms | max ms | bytes/session",
        "               1M |          8200 |   1.20 |   4.80 |  45.00 |          1350",
        "generator CPUs    | 0",
        "kernel            | Linux 6.1.0-test #1 SMP x86_64",
    ] {
        assert!(text.lines().any(|l| l == line), "missing line {line:?} in\n{text}");
    }
    // Results first, the machine last.
    assert!(text.find("Capacity test").unwrap() < text.find("Machine\n").unwrap());
}

#[test]
fn a_report_with_nothing_measured_still_writes_json_and_html() {
    let dir = tempfile::tempdir().unwrap();
    let w = Report::new("empty")
        .write_all(dir.path().join("new-dir"))
        .unwrap();
    assert!(w.charts.is_empty());
    assert!(w.json.exists());
    let html = std::fs::read_to_string(&w.html).unwrap();
    assert!(html.contains("<h1>empty</h1>"));
    assert!(!html.contains("<img"));
}

#[test]
fn charts_without_text_are_still_real_pngs() {
    let charts = render_charts_without_text(&sample()).unwrap();
    assert_eq!(charts.charts.len(), 5);
    for c in &charts.charts {
        assert_eq!(c.png[..8], PNG_SIGNATURE);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(c.file_name());
        std::fs::write(&p, &c.png).unwrap();
        assert_eq!(decode(&p).0, c.width);
    }
}

#[test]
fn charts_of_one_point_each_and_no_limits() {
    let mut r = Report::new("one point each (synthetic)");
    r.capacity = Some(CapacityTable {
        model: TrafficModel::Small,
        rows: capacity_rows()[..1].to_vec(),
    });
    r.throughput.push(ThroughputPoint::measured(
        Direction::Downlink,
        68,
        1,
        1.0,
        1.0,
    ));
    r.no_drop.push(NoDropRate {
        direction: Direction::Downlink,
        packet_bytes: 68,
        sessions: 1,
        mpps: 1.0,
        gbps: gbps(1.0, 68),
        curve: vec![LossPoint::measured(1.0, 1.0)],
    });
    r.latency.push(LatencyPoint {
        direction: Direction::Downlink,
        packet_bytes: 68,
        percent_of_no_drop: 50,
        offered_mpps: 0.5,
        p50_us: 0.0,
        p99_us: 0.0,
        p999_us: 0.0,
        samples: 0,
        bare: None,
    });
    r.sessions.push(SessionRatePoint {
        resident: 1000,
        established_per_s: 0.0,
        p50_ms: 0.0,
        p99_ms: 0.0,
        max_ms: 0.0,
        bytes_per_session: None,
    });
    let charts = render_charts(&r).unwrap();
    let sizes: Vec<(&str, u32, u32)> = charts
        .charts
        .iter()
        .map(|c| (c.name, c.width, c.height))
        .collect();
    assert_eq!(
        sizes,
        [
            ("capacity", 1000, 560),
            ("throughput", 900, 540),
            ("loss", 1000, 560),
            ("latency", 900, 540),
            ("sessions", 1000, 560),
        ]
    );
    assert!(
        render_text(&r).contains("DL 68 B, 1 session: 1.00 Mpps; no limit measured for DL 68 B")
    );
}
