//! The HTML report as a reader sees it: a report with every section filled (synthetic
//! figures, labelled as such) is written, opened in headless Chromium, and a script
//! injected into a copy of the page checks after layout that every table, every chart and
//! every section (ping and iperf3 included) has a box inside the page, that no chart is
//! distorted and that no chart's legend covers one of its plots. Then a full-page
//! screenshot is taken into target/tmp/report_screenshot/ and checked not to be blank, with
//! ink in every chart's and every table's place.
//!
//! Needs `chromium` (Debian package; scripts/deps.sh installs it). Without it the test says
//! SKIP, or fails when UPF_REQUIRE_ORACLES=1 (scripts/test.sh).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::report_sample::sample;
use upfbench::report::*;

/// Every section of the report, of made-up figures of plausible size: the report tests'
/// sample (limits beside each trial, one-miss limit, the rig's no-drop rate and scaling
/// included), with both limit passes, the one sessions point `upfbench capacity` gives
/// (a table row, no chart), and ping and iperf3.
fn every_section() -> Report {
    use Direction::{Downlink as DL, Uplink as UL};
    let mut r = sample();
    r.title = "SYNTHETIC TEST DATA (not a measurement): report screenshot".into();
    for l in &mut r.limits {
        let (gen, io) = (l.generator_mpps.unwrap(), l.io_mpps.unwrap());
        l.generator_passes_mpps = vec![gen * 0.97, gen];
        l.io_passes_mpps = vec![io, io * 0.95];
    }
    r.sessions.clear();
    // One point, as `upfbench capacity` gives: its row in the table, and no chart of a
    // single point (issue 29).
    r.sessions.push(SessionRatePoint {
        resident: 4000,
        established_per_s: 9500.0,
        p50_ms: 0.9,
        p99_ms: 3.1,
        max_ms: 12.0,
        bytes_per_session: Some(1450),
        map_bytes_per_session: Some(506),
    });
    r.ping = Some(PingResult::parse(
        "10.45.0.1",
        "192.168.6.1",
        "--- 192.168.6.1 ping statistics ---\n\
         3 packets transmitted, 3 received, 0% packet loss, time 405ms\n\
         rtt min/avg/max/mdev = 0.052/0.066/0.079/0.011 ms\n",
    ));
    for (dir, bps, retr) in [(UL, 2.91e9, 12), (DL, 3.24e9, 0)] {
        let json = format!(
            r#"{{"end":{{"sum_sent":{{"retransmits":{retr}}},"sum_received":{{"bits_per_second":{bps}}}}}}}"#
        );
        r.iperf3.push(Iperf3Result::from_json(
            dir,
            "10.45.0.1",
            "192.168.6.1",
            3.0,
            json.as_bytes(),
        ));
    }
    r
}

/// The script injected before `</body>` of a copy of the page: after layout it writes its
/// verdict as JSON into `<pre id="upfbench-verdict">`.
const CHECK_SCRIPT: &str = r#"<script>
(function () {
  function run() {
    var problems = [];
    var de = document.documentElement;
    var W = Math.max(de.scrollWidth, document.body.scrollWidth);
    var H = Math.max(de.scrollHeight, document.body.scrollHeight);
    function box(el) {
      var r = el.getBoundingClientRect();
      return { x0: r.left + scrollX, y0: r.top + scrollY, x1: r.right + scrollX,
               y1: r.bottom + scrollY, w: r.width, h: r.height };
    }
    function shown(el, what) {
      var b = box(el), cs = getComputedStyle(el);
      if (!(b.w > 0 && b.h > 0)) problems.push(what + ': empty box');
      else if (b.x0 < 0 || b.y0 < 0 || b.x1 > W + 1 || b.y1 > H + 1)
        problems.push(what + ': outside the page ' + JSON.stringify(b));
      if (b.x1 > window.innerWidth + 1) problems.push(what + ': wider than the window');
      if (cs.display === 'none' || cs.visibility !== 'visible' || parseFloat(cs.opacity) === 0)
        problems.push(what + ': hidden');
      return b;
    }
    function overlap(a, b) { return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1; }
    var tables = [];
    document.querySelectorAll('table').forEach(function (t, i) {
      var sec = t.closest('section');
      var what = 'table ' + i + ' (' + (sec ? sec.id : '?') + ')';
      var b = shown(t, what);
      if (t.rows.length < 2) problems.push(what + ': no data row');
      t.querySelectorAll('th, td').forEach(function (c) {
        var r = c.getBoundingClientRect();
        if (!(r.width > 0 && r.height > 0)) problems.push(what + ': a cell has no box');
      });
      tables.push({ section: sec ? sec.id : '', x0: b.x0, y0: b.y0, x1: b.x1, y1: b.y1 });
    });
    var charts = [];
    document.querySelectorAll('img, svg').forEach(function (im, i) {
      var name = im.getAttribute('title') || ('chart ' + i);
      var what = 'chart ' + name;
      var b = shown(im, what);
      if (im.tagName !== 'IMG') { charts.push({ name: name, x0: b.x0, y0: b.y0, x1: b.x1, y1: b.y1 }); return; }
      if (!im.complete || im.naturalWidth === 0) problems.push(what + ': not decoded');
      var ar = im.naturalWidth / im.naturalHeight, shownAr = b.w / b.h;
      if (Math.abs(ar - shownAr) / ar > 0.02) problems.push(what + ': distorted, ' + ar + ' shown as ' + shownAr);
      var k = b.w / im.naturalWidth;
      function rect(s) {
        var v = s.split(',').map(Number);
        return { x0: b.x0 + v[0] * k, y0: b.y0 + v[1] * k, x1: b.x0 + v[2] * k, y1: b.y0 + v[3] * k };
      }
      var plots = (im.dataset.plots || '').split(' ').filter(Boolean).map(rect);
      if (!plots.length) problems.push(what + ': no plot area given');
      plots.forEach(function (p, j) {
        if (!(p.x1 - p.x0 > 50 && p.y1 - p.y0 > 50)) problems.push(what + ': plot ' + j + ' too small');
        if (p.x0 < b.x0 - 1 || p.y0 < b.y0 - 1 || p.x1 > b.x1 + 1 || p.y1 > b.y1 + 1)
          problems.push(what + ': plot ' + j + ' outside the image');
      });
      var legend = im.dataset.legend ? rect(im.dataset.legend) : null;
      if (!legend) problems.push(what + ': no legend');
      else {
        if (legend.x0 < b.x0 - 1 || legend.y0 < b.y0 - 1 || legend.x1 > b.x1 + 1 || legend.y1 > b.y1 + 1)
          problems.push(what + ': legend outside the image');
        plots.forEach(function (p, j) {
          if (overlap(p, legend)) problems.push(what + ': legend covers plot ' + j);
        });
      }
      charts.push({ name: name, x0: b.x0, y0: b.y0, x1: b.x1, y1: b.y1, plots: plots.length,
                    legend: !!legend });
    });
    var sections = [];
    document.querySelectorAll('section').forEach(function (s) {
      shown(s, 'section ' + s.id);
      sections.push(s.id);
    });
    var v = { problems: problems, tables: tables, charts: charts, sections: sections,
              width: W, height: H, text: document.body.innerText };
    var pre = document.createElement('pre');
    pre.id = 'upfbench-verdict';
    pre.textContent = JSON.stringify(v);
    document.body.appendChild(pre);
  }
  if (document.readyState === 'complete') run(); else window.addEventListener('load', run);
})();
</script>
"#;

/// The window's width: the page's body is at most 1250 px wide, and the charts up to 1300.
const WINDOW_W: u32 = 1400;

fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ]
    .iter()
    .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
    .find(|p| p.is_file())
}

/// What Chromium said: exit status (None when killed), stdout, stderr.
struct Ran {
    status: Option<std::process::ExitStatus>,
    stdout: String,
    stderr: String,
}

/// How long Chromium may take to start, lay out and dump or shoot a page before it is
/// killed: only a hang bound (it exits as soon as it is done; the page's own time is
/// virtual, --virtual-time-budget).
const CHROMIUM_LIMIT: Duration = Duration::from_secs(300);

/// Runs headless Chromium with `args` on `page`, killed after [`CHROMIUM_LIMIT`]. Each run
/// has its own profile (a killed run's lock cannot turn the next one away). Its output
/// goes through files: a dumped DOM is larger than a pipe holds.
fn run_chromium(bin: &Path, profile: &Path, args: &[String], page: &Path) -> Ran {
    use std::os::unix::process::CommandExt;
    let run = tempfile::Builder::new()
        .prefix("run")
        .tempdir_in(profile)
        .unwrap();
    let out_path = run.path().join("stdout");
    let err_path = run.path().join("stderr");
    let mut c = Command::new(bin);
    c.args([
        "--headless",
        "--disable-gpu",
        "--no-sandbox",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
    ])
    .arg(format!(
        "--user-data-dir={}",
        run.path().join("profile").display()
    ))
    .args(args)
    .arg(format!("file://{}", page.display()))
    .stdin(Stdio::null())
    .stdout(std::fs::File::create(&out_path).unwrap())
    .stderr(std::fs::File::create(&err_path).unwrap())
    // Its own process group, so that a hung run is killed with its helper processes.
    .process_group(0);
    let mut child = c.spawn().expect("starting chromium");
    let started = Instant::now();
    let end = started + CHROMIUM_LIMIT;
    let mut exited = false;
    while Instant::now() < end {
        if child.try_wait().unwrap().is_some() {
            exited = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if !exited {
        // SAFETY: SIGKILL to the process group of the child we started (its pid).
        unsafe { libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL) };
    }
    let waited = child.wait().unwrap();
    eprintln!("chromium {args:?}: {:?}", started.elapsed());
    let status = exited.then_some(waited);
    let read =
        |p: &Path| String::from_utf8_lossy(&std::fs::read(p).unwrap_or_default()).into_owned();
    Ran {
        status,
        stdout: read(&out_path),
        stderr: read(&err_path),
    }
}

/// Per chart of the page: its title, size, plots and legend, from its `<img>`'s attributes.
type Geometry = (String, (i32, i32), Vec<PixelRect>, Option<PixelRect>);

fn chart_geometry(html: &str) -> Vec<Geometry> {
    let attr = |tag: &str, name: &str| -> Option<String> {
        let (_, rest) = tag.split_once(&format!(" {name}=\""))?;
        Some(rest.split_once('"')?.0.to_string())
    };
    let rect = |s: &str| {
        let v: Vec<i32> = s.split(',').map(|x| x.parse().unwrap()).collect();
        PixelRect {
            x0: v[0],
            y0: v[1],
            x1: v[2],
            y1: v[3],
        }
    };
    html.split("<img ")
        .skip(1)
        .map(|t| {
            let tag = t.split_once('>').unwrap().0;
            let num = |n: &str| attr(tag, n).unwrap().parse::<i32>().unwrap();
            (
                attr(tag, "title").unwrap(),
                (num("width"), num("height")),
                attr(tag, "data-plots")
                    .unwrap_or_default()
                    .split(' ')
                    .filter(|s| !s.is_empty())
                    .map(rect)
                    .collect(),
                attr(tag, "data-legend").map(|l| rect(&l)),
            )
        })
        .collect()
}

/// The text of an element as serialized by --dump-dom.
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&nbsp;", "\u{a0}")
        .replace("&amp;", "&")
}

/// Width, height, channels and pixels of a PNG.
fn decode_png(path: &Path) -> (u32, u32, usize, Vec<u8>) {
    let bytes = std::fs::read(path).unwrap();
    let mut dec = png::Decoder::new(std::io::Cursor::new(bytes));
    dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = dec.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    let channels = match info.color_type {
        png::ColorType::Grayscale => 1,
        png::ColorType::GrayscaleAlpha => 2,
        png::ColorType::Rgb => 3,
        png::ColorType::Rgba => 4,
        png::ColorType::Indexed => panic!("indexed PNG after EXPAND"),
    };
    (info.width, info.height, channels, buf)
}

/// Share of the pixels in `x0..x1, y0..y1` that are not (near) white (every other row and
/// column).
fn ink(img: &(u32, u32, usize, Vec<u8>), x0: f64, y0: f64, x1: f64, y1: f64) -> f64 {
    let (w, h, ch, px) = img;
    let (x0, x1) = (x0.max(0.0) as u32, (x1 as u32).min(*w));
    let (y0, y1) = (y0.max(0.0) as u32, (y1 as u32).min(*h));
    let (mut inked, mut all) = (0usize, 0usize);
    for y in (y0..y1).step_by(2) {
        for x in (x0..x1).step_by(2) {
            let i = (y as usize * *w as usize + x as usize) * ch;
            let p = &px[i..i + (*ch).min(3)];
            all += 1;
            if p.iter().any(|c| *c < 235) {
                inked += 1;
            }
        }
    }
    inked as f64 / all.max(1) as f64
}

#[test]
fn html_report_shows_every_table_and_chart_in_headless_chromium() {
    let r = every_section();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report_screenshot");
    let _ = std::fs::remove_dir_all(&dir);
    let w = r.write_all(&dir).unwrap();

    let html = std::fs::read_to_string(&w.html).unwrap();

    // ping and iperf3 in the text and in report.json, as in the page below.
    let text = render_text(&r);
    for line in [
        "from (UE) | to          | sent | received | loss % | rtt min ms | rtt avg ms | rtt max ms | rtt mdev ms",
        "10.45.0.1 | 192.168.6.1 |    3 |        3 |    0.0 |      0.052 |      0.066 |      0.079 |       0.011",
        "UL  | TCP      | 10.45.0.1 | 192.168.6.1 |     3.0 |   2.91 |          12",
        "DL  | TCP      | 10.45.0.1 | 192.168.6.1 |     3.0 |   3.24 |           0",
    ] {
        assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
    }
    let back = Report::read_json(&w.json).unwrap();
    assert_eq!(back, r);
    assert_eq!(back.ping.as_ref().unwrap().rtt_ms.unwrap().avg, 0.066);
    assert_eq!(back.iperf3[1].gbps, Some(3.24));

    // Without a browser: by the geometry each chart gives in the page, no legend covers a
    // plot.
    assert_eq!(w.charts.len(), 4);
    let with_text = Path::new(FONT).exists();
    let charts = chart_geometry(&html);
    assert_eq!(charts.len(), 4, "{charts:?}");
    for (name, (width, height), plots, legend) in &charts {
        assert!(!plots.is_empty(), "{name}: no plot");
        if with_text {
            let l = legend.unwrap_or_else(|| panic!("{name}: no legend"));
            assert!(l.x0 >= 0 && l.y0 >= 0 && l.x1 <= *width && l.y1 <= *height);
            for p in plots {
                assert!(!p.overlaps(&l), "{name}: legend {l:?} covers plot {p:?}");
            }
        }
    }
    let Some(bin) = chromium() else {
        if std::env::var("UPF_REQUIRE_ORACLES").as_deref() == Ok("1") {
            panic!(
                "chromium not found (UPF_REQUIRE_ORACLES=1): install it with \
                 `apt-get install chromium` (scripts/deps.sh does), or set CHROMIUM=/path"
            );
        }
        eprintln!("SKIP: chromium not found (apt-get install chromium, or set CHROMIUM=/path)");
        return;
    };
    assert!(
        with_text,
        "{FONT} missing: the charts have no legends to check"
    );
    let profile = tempfile::tempdir().unwrap();

    // 1. The page with the checking script, its DOM after layout.
    let check = dir.join("check.html");
    assert!(html.contains("</body>"));
    std::fs::write(
        &check,
        html.replace("</body>", &format!("{CHECK_SCRIPT}</body>")),
    )
    .unwrap();
    let out = run_chromium(
        &bin,
        profile.path(),
        &[
            format!("--window-size={WINDOW_W},1000"),
            "--virtual-time-budget=5000".into(),
            "--dump-dom".into(),
        ],
        &check,
    );
    let dom = &out.stdout;
    let verdict = dom
        .split_once("<pre id=\"upfbench-verdict\">")
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .map(|(v, _)| unescape(v))
        .unwrap_or_else(|| {
            panic!(
                "no verdict in the DOM chromium dumped (exit {:?}, None: killed after {:?}); \
                 stderr:\n{}",
                out.status, CHROMIUM_LIMIT, out.stderr
            )
        });
    let v: serde_json::Value = serde_json::from_str(&verdict).unwrap();
    let problems: Vec<&str> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p.as_str())
        .collect();
    assert!(problems.is_empty(), "the page as laid out: {problems:#?}");
    let tables = v["tables"].as_array().unwrap();
    assert_eq!(tables.len(), html.matches("<table>").count());
    let table_sections: HashSet<&str> = tables
        .iter()
        .filter_map(|t| t["section"].as_str())
        .collect();
    let sections: Vec<&str> = v["sections"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s.as_str())
        .collect();
    for id in [
        "machine",
        "upf",
        "capacity",
        "limits",
        "throughput",
        "no-drop",
        "latency",
        "sessions",
        "ping",
        "iperf3",
        "scaling",
    ] {
        assert!(sections.contains(&id), "no section {id}: {sections:?}");
        assert!(table_sections.contains(id), "no table in section {id}");
    }
    let shown: Vec<&str> = v["charts"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(
        shown,
        ["capacity.png", "throughput.png", "loss.png", "latency.png",]
    );
    // ping and iperf3 as the reader sees them.
    let text = v["text"].as_str().unwrap();
    for s in [
        "ping through the UPF",
        "10.45.0.1\t192.168.6.1\t3\t3\t0.0\t0.052\t0.066\t0.079\t0.011",
        "iperf3 through the UPF",
        "UL\tTCP\t10.45.0.1\t192.168.6.1\t3.0\t2.91\t12",
        "DL\tTCP\t10.45.0.1\t192.168.6.1\t3.0\t3.24\t0",
        // One ratio per trial that counts, the run's named as context; latency the rig
        // cannot tell apart from its own spread said so, never negative (issue 29).
        "loss %\tx I/O limit beside it\tcontext: x run's I/O limit\tcontext: x generator limit",
        "the ratio that counts: x I/O limit beside it",
        "; context: 0.74 x the run's I/O limit 4.20 Mpps",
        "\t< noise (20)\t",
        "fit 9000 subscribers",
    ] {
        assert!(text.contains(s), "the page does not show {s:?}:\n{text}");
    }

    // The check sees what it is for: a copy of the page whose first chart's legend is
    // said to lie on its plot, and whose ping table is hidden, fails it.
    let (_, _, plots, _) = &charts[0];
    let broken = html
        .replacen(" data-legend=\"", " data-old-legend=\"", 1)
        .replacen(
            " data-plots=\"",
            &format!(" data-legend=\"{}\" data-plots=\"", plots[0].to_attr()),
            1,
        )
        .replace(
            "<section id=\"ping\">",
            "<section id=\"ping\" style=\"display:none\">",
        )
        .replace("</body>", &format!("{CHECK_SCRIPT}</body>"));
    let broken_page = dir.join("broken.html");
    std::fs::write(&broken_page, broken).unwrap();
    let out = run_chromium(
        &bin,
        profile.path(),
        &[
            format!("--window-size={WINDOW_W},1000"),
            "--virtual-time-budget=5000".into(),
            "--dump-dom".into(),
        ],
        &broken_page,
    );
    let bad = out
        .stdout
        .split_once("<pre id=\"upfbench-verdict\">")
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .map(|(v, _)| unescape(v))
        .expect("a verdict on the broken page");
    for expected in [
        "chart capacity.png: legend covers plot 0",
        "section ping: empty box",
        "(ping): empty box",
    ] {
        assert!(bad.contains(expected), "{expected:?} not found in {bad}");
    }
    std::fs::remove_file(&broken_page).unwrap();

    // 2. A full-page screenshot of the report itself: not blank, ink where each chart and
    // table is.
    let height = v["height"].as_f64().unwrap().ceil() as u32;
    assert!(height > 2000, "page height {height}");
    let shot = dir.join("screenshot.png");
    let out = run_chromium(
        &bin,
        profile.path(),
        &[
            format!("--window-size={WINDOW_W},{height}"),
            "--virtual-time-budget=5000".into(),
            format!("--screenshot={}", shot.display()),
        ],
        &w.html,
    );
    assert!(
        shot.is_file(),
        "no screenshot (exit {:?}): {}",
        out.status,
        out.stderr
    );
    let img = decode_png(&shot);
    assert_eq!((img.0, img.1), (WINDOW_W, height));
    let distinct: HashSet<&[u8]> = img.3.chunks(img.2).step_by(7).collect();
    assert!(distinct.len() > 200, "{} colours: blank?", distinct.len());
    assert!(ink(&img, 0.0, 0.0, img.0 as f64, img.1 as f64) > 0.03);
    let rect = |c: &serde_json::Value| {
        let g = |k: &str| c[k].as_f64().unwrap();
        (g("x0"), g("y0"), g("x1"), g("y1"))
    };
    for c in v["charts"].as_array().unwrap() {
        let (x0, y0, x1, y1) = rect(c);
        let k = ink(&img, x0, y0, x1, y1);
        assert!(
            k > 0.02,
            "chart {} nearly blank in the screenshot ({k})",
            c["name"]
        );
    }
    for t in tables {
        let (x0, y0, x1, y1) = rect(t);
        let k = ink(&img, x0, y0, x1, y1);
        assert!(
            k > 0.05,
            "table of {} nearly blank in the screenshot ({k})",
            t["section"]
        );
    }
    eprintln!("screenshot: {}", shot.display());
}
