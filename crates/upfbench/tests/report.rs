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
        row(&["UL", "64", "17.500", "4.200", "3.150", "1M"]),
        // The ratio that counts (the I/O limit beside the trial), then the context.
        row(&[
            "UL", "64", "1", "17.500", "3.100", "1.587", "82.286", "0.74", "0.74", "0.18",
        ]),
        row(&["DL", "64", "3.500", "3.280", "6.286"]),
        row(&[
            "UL", "64", "90", "2.520", "40.0", "140.0", "420.0", "30.0", "110.0", "100000",
        ]),
        row(&["1M", "8200", "1.20", "4.80", "45.00", "1350", "450"]),
        // The limits beside each trial, the rig's no-drop rate, the scaling cases.
        format!(
            "{}<td>I/O: measured again; FLAGGED: readings 18 % apart</td></tr>",
            row(&[
                "UL", "64", "1M", "2.600", "3.570", "4.200", "0.67", "3.108", "3.150", "0.83",
            ])
            .trim_end_matches("</tr>")
        ),
        row(&["DL", "64", "1k", "3.000", "3.300", "0.91"]),
        "<tr><td>one hot session</td><td>xdp_n3</td><td class=\"r\">1</td><td class=\"r\">2</td>\
         <td class=\"r\">2.800 / 2.750</td><td class=\"r\">5.550</td><td class=\"r\">1.79</td></tr>"
            .to_string(),
    ] {
        assert!(html.contains(&expected), "missing {expected}");
    }
    assert!(html.contains(
        "UL 64 B, 1 session: 3.10 Mpps = 0.74 x I/O limit beside it (4.12 / 4.24 Mpps); \
         context: 0.74 x the run&#39;s I/O limit 4.20 Mpps, 0.18 x generator limit 17.5 Mpps"
    ));
    assert!(html.contains("<th>x I/O limit beside it</th><th>context: x run&#39;s I/O limit</th>"));
    assert!(html.contains("<section id=\"scaling\">"));
    assert!(html.contains("fit 9000 subscribers"));
    assert!(html.contains(
        "Under traffic: 100000 of 100000 sessions established with 1M resident, 41000/s, \
         p50 1.40 ms, p99 2.90 ms, max 31.00 ms, while 650 B packets ran at 50 % of the \
         no-drop rate (UL 0.380, DL 0.330 Mpps): loss UL 0.0000 %, DL 0.0021 %<"
    ));
}

/// The fields issue 17 adds, under the names other tools read: each trial's bracketing
/// limits, the one-miss limit, the rig's no-drop rate and the scaling cases.
#[test]
fn json_names_the_brackets_one_miss_rig_and_scaling_figures() {
    let v: serde_json::Value = serde_json::from_str(&sample().to_json()).unwrap();
    let l = &v["limits"][0];
    assert!((l["one_miss_mpps"].as_f64().unwrap() - 3.15).abs() < 1e-9);
    assert_eq!(l["one_miss_sessions"].as_u64(), Some(1_000_000));
    let t = &v["throughput"][3];
    assert_eq!(t["sessions"], 1_000_000);
    let io = &t["io_bracket"];
    assert_eq!(
        (io["before_mpps"].as_f64(), io["after_mpps"].as_f64()),
        (Some(3.57), Some(4.2))
    );
    assert_eq!(
        (io["repeated"].as_bool(), io["flagged"].as_bool()),
        (Some(true), Some(true))
    );
    assert!((io["ratio"].as_f64().unwrap() - 2.6 / 3.885).abs() < 1e-9);
    assert!(t["one_miss_bracket"]["ratio"].as_f64().is_some());
    assert!(
        v["throughput"][0]["one_miss_bracket"].is_null(),
        "1 session: I/O bracket only"
    );
    assert_eq!(
        v["throughput"][0]["io_bracket"]["flagged"],
        serde_json::Value::Null
    );
    assert!((v["no_drop"][0]["rig_mpps"].as_f64().unwrap() - 3.08).abs() < 1e-9);
    assert_eq!(v["capacity"]["rig_users"], 9000);
    let s = &v["scaling"][1];
    assert_eq!(
        (
            s["case"].as_str(),
            s["program"].as_str(),
            s["cpus"].as_u64()
        ),
        (Some("disjoint sessions"), Some("xdp_n3"), Some(2))
    );
    assert_eq!(s["mpps_per_cpu"].as_array().map(Vec::len), Some(2));
    assert_eq!(s["vs_one_cpu"].as_f64(), Some(1.95));
    let u = &v["establish_under_traffic"];
    assert_eq!(
        (u["resident"].as_u64(), u["established"].as_u64()),
        (Some(1_000_000), Some(100_000))
    );
    assert_eq!(u["dl_loss_pct"].as_f64(), Some(0.0021));
    // Absent when not measured.
    let old = serde_json::to_string(&Report::new("x")).unwrap();
    assert!(!old.contains("scaling"));
    assert!(!old.contains("establish_under_traffic"));
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
        rig_users: None,
    });
    let expected = "\
capacity
========

Capacity test (traffic model: carrier)
--------------------------------------
per user UL 2089 kbit/s 422 pps, DL 3948 kbit/s 696 pps; HTTP + UDP; 600-700 B
subscribers carried with loss <= 0.01 % each way: 4000

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
        "UL 64 B, 1 session: 3.10 Mpps = 0.74 x I/O limit beside it (4.12 / 4.24 Mpps); context: 0.74 x the run's I/O limit 4.20 Mpps, 0.18 x generator limit 17.5 Mpps",
        "DL 1400 B, 1M sessions: 2.10 Mpps = 0.78 x I/O limit beside it (2.65 / 2.73 Mpps), 1.04 x one-miss limit beside it (2.00 / 2.03 Mpps), 0.88 x 1 session; context: 0.78 x the run's I/O limit 2.70 Mpps, 0.26 x generator limit 8.20 Mpps",
        "dir | packet B | % of no-drop | offered Mpps | p50 µs | p99 µs | p99.9 µs | bare p99 µs | added p99 µs | samples",
        "DL  |       64 |           90 |        2.700 |   44.0 |  154.0 |    462.0 |        30.0 |        124.0 |  100000",
        "resident sessions | established/s | p50 ms | p99 ms | max ms | bytes/session | of which BPF maps",
        "               1M |          8200 |   1.20 |   4.80 |  45.00 |          1350 |               450",
        "UL 64 B, 1M sessions: 2.60 Mpps = 0.67 x I/O limit beside it (3.57 / 4.20 Mpps; measured again; FLAGGED: readings 18 % apart), 0.83 x one-miss limit beside it (3.11 / 3.15 Mpps), 0.84 x 1 session; context: 0.62 x the run's I/O limit 4.20 Mpps, 0.15 x generator limit 17.5 Mpps",
        "dir | packet B | generator limit Mpps | I/O limit Mpps | one-miss limit Mpps | one-miss sessions",
        "UL 64 B, 1k sessions: no-drop rate 2.80 Mpps (1.43 Gbit/s) = 0.91 x the rig's own no-drop rate 3.08 Mpps (bare forwarder, same search)",
        "subscribers carried with loss <= 0.01 % each way: 4000",
        "the rig's own zero-loss rates (UL 3.08 Mpps, DL 3.30 Mpps, the bare forwarder's no-drop search) fit 9000 subscribers at the model's packet rates, both directions sharing the forwarding CPU",
        "disjoint sessions | xdp_n3  |     100k |    2 | 2.900 / 2.850 |          5.750 |    1.95",
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
        rig_users: None,
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
        rig_mpps: None,
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
        map_bytes_per_session: None,
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
        ]
    );
    assert!(
        render_text(&r).contains("DL 68 B, 1 session: 1.00 Mpps; no limit measured for DL 68 B")
    );
}

/// The application mix (synthetic figures): report.json's `app_mix[]` with the named
/// applications, their shares and URR counts; the text and HTML tables show them.
#[test]
fn app_mix_rows_show_in_json_text_and_html() {
    let mut r = Report::new("app mix sample (synthetic figures)");
    let app = |id: &str, share: f64, urr: u32, packets: u64, counted: f64| AppUsage {
        id: id.into(),
        detected_by: format!("flow description of {id}"),
        traffic: format!("{id}'s traffic"),
        share_pct: share,
        urr_id: urr,
        packets,
        bytes: packets * 690,
        counted_share_pct: counted,
    };
    for d in Direction::BOTH {
        r.app_mix.push(AppMixPoint {
            direction: d,
            sessions: 4000,
            packet_bytes: 690,
            mix: "application mix (synthetic)".into(),
            offered_mpps: 1.5,
            received_mpps: 0.9,
            without_before_mpps: 1.0,
            without_after_mpps: 0.8,
            without_mpps: 0.9,
            ratio: 1.0,
            flagged: d == Direction::Downlink,
            sent_packets: 1_500_000,
            received_packets: 900_000,
            unmatched_packets: 0,
            apps: vec![
                app("web", 85.0, 2, 765_000, 85.0),
                app("voice", 15.0, 3, 135_000, 15.0),
            ],
        });
    }
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
    let a = &v["app_mix"][0];
    assert_eq!(a["direction"], "uplink");
    assert_eq!(a["sessions"], 4000);
    assert_eq!(a["ratio"].as_f64(), Some(1.0));
    assert!(a["flagged"].is_null(), "only when flagged");
    assert_eq!(v["app_mix"][1]["flagged"], true);
    assert_eq!(a["apps"][0]["id"], "web");
    assert_eq!(a["apps"][1]["urr_id"], 3);
    assert_eq!(a["apps"][1]["packets"], 135_000);
    let back: Report = serde_json::from_str(&r.to_json()).unwrap();
    assert_eq!(back, r);
    assert!(!serde_json::to_string(&Report::new("x"))
        .unwrap()
        .contains("app_mix"));

    let text = render_text(&r);
    assert!(
        text.contains("Application mix: application PDRs and per-application URRs"),
        "{text}"
    );
    assert!(text.contains("with / without"), "{text}");
    assert!(text.contains("0.900 (1.000 / 0.800)"), "{text}");
    assert!(text.contains("web: flow description of web"), "{text}");
    assert!(
        text.contains("DL: the trials without application PDRs were more than 10 % apart"),
        "{text}"
    );
    let row = text
        .lines()
        .find(|l| l.starts_with("UL") && l.contains("voice"))
        .expect("voice's row");
    assert!(
        row.contains("15.0") && row.contains("135000"),
        "share sent, counted: {row}"
    );
    let dir = tempfile::tempdir().unwrap();
    let w = r.write_all(dir.path()).unwrap();
    let html = std::fs::read_to_string(&w.html).unwrap();
    assert!(html.contains("share counted %") && html.contains("voice"));
}

/// Issue 29's reading of a real report: one "x I/O limit" per trial that counts (the
/// limit beside it), the run's limit named as context; an added p99 below the rig's noise
/// shown as such, never negative; the rig's subscribers said for what they are when the
/// UPF carried more; no PFCP chart of a single point.
#[test]
fn the_report_says_which_ratio_counts_and_shows_no_negative_latency() {
    let mut r = sample();
    // The figures of the run the issue read: added p99 -10 and -138 µs, the rig's
    // zero-loss rates fitting 57 subscribers where 100 were carried, one sessions point.
    for (p, (p99, bare_p99)) in r.latency.iter_mut().zip([(40.0, 50.0), (62.0, 200.0)]) {
        p.p99_us = p99;
        p.bare = Some(Percentiles {
            p50_us: 20.0,
            p99_us: bare_p99,
            p999_us: 400.0,
        });
    }
    let c = r.capacity.as_mut().unwrap();
    c.rows.truncate(1);
    c.rig_users = Some(57);
    r.sessions.truncate(1);

    let text = render_text(&r);
    let dir = tempfile::tempdir().unwrap();
    let html = std::fs::read_to_string(r.write_all(dir.path()).unwrap().html).unwrap();
    for p in &r.throughput {
        let line = text
            .lines()
            .find(|l| {
                l.starts_with(&format!(
                    "{} {} B, {}:",
                    p.direction,
                    p.packet_bytes,
                    if p.sessions == 1 {
                        "1 session".to_string()
                    } else {
                        format!("{} sessions", upfbench::report::count_short(p.sessions))
                    }
                ))
            })
            .unwrap_or_else(|| panic!("no line for {p:?} in\n{text}"));
        let (counts, context) = line.split_once("; context: ").expect(line);
        assert_eq!(counts.matches("x I/O limit").count(), 1, "{line}");
        assert!(counts.contains("x I/O limit beside it"), "{line}");
        assert!(context.starts_with(&format!("{:.2} x the run's I/O limit", p.vs_io.unwrap())));
    }
    assert!(
        text.contains("the ratio that counts: x I/O limit beside it"),
        "{text}"
    );
    // The latency table: "< noise (N)" where the difference is not above the rig's
    // spread, never a negative number.
    let latency = text
        .split("Latency through the UPF\n")
        .nth(1)
        .unwrap()
        .split("\n\n")
        .find(|t| t.starts_with("dir |"))
        .unwrap();
    let added: Vec<&str> = latency
        .lines()
        .skip(2)
        .map(|l| l.split(" | ").nth(8).unwrap().trim())
        .collect();
    assert_eq!(&added[..2], ["< noise (30)", "< noise (180)"], "{latency}");
    assert!(added.iter().all(|a| !a.starts_with('-')), "{latency}");
    assert!(html.contains("&lt; noise (180)"));
    // The rig's subscribers, and why the UPF carried more.
    assert!(text.contains("subscribers carried with loss <= 0.01 % each way: 100"));
    assert!(text.contains(
        "fit 57 subscribers at the model's packet rates, both directions sharing the \
         forwarding CPU; the UPF carried more because a step counts as carried up to 0.01 % \
         loss while the rig's search stops at its first lost packet"
    ));
    // One resident count: the table's row, no chart.
    assert!(html.contains("<section id=\"sessions\">"));
    assert!(!html.contains("title=\"sessions.png\""));
    assert_eq!(html.matches("<img src=\"data:image/png;base64,").count(), 4);
}
