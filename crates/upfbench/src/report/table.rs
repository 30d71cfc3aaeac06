//! The report's content as sections of lines and tables, shared by the text and the HTML
//! renderings so both always show the same figures.

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Align {
    Left,
    Right,
}

/// A table of preformatted cells.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    pub headers: Vec<String>,
    pub align: Vec<Align>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    fn new(headers: &[&str], align: &[Align]) -> Table {
        debug_assert_eq!(headers.len(), align.len());
        Table {
            headers: headers.iter().map(|h| h.to_string()).collect(),
            align: align.to_vec(),
            rows: Vec::new(),
        }
    }

    fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len());
        self.rows.push(cells);
    }

    /// Columns padded to their widest cell, " | " between them, a rule under the header.
    pub fn to_text(&self) -> String {
        let n = self.headers.len();
        let mut width: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (w, c) in width.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i > 0 {
                    s.push_str(" | ");
                }
                let pad = width[i] - c.chars().count();
                match self.align[i] {
                    Align::Left => {
                        s.push_str(c);
                        if i + 1 < n {
                            s.extend(std::iter::repeat_n(' ', pad));
                        }
                    }
                    Align::Right => {
                        s.extend(std::iter::repeat_n(' ', pad));
                        s.push_str(c);
                    }
                }
            }
            s.push('\n');
            s
        };
        let mut out = line(&self.headers);
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        out.push_str(&rule.join("-+-"));
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

/// A part of the report: a heading, sentences, tables, and the chart that draws them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Section {
    /// Stable identifier (HTML anchor), e.g. "capacity".
    pub id: &'static str,
    pub heading: String,
    pub lines: Vec<String>,
    pub tables: Vec<Table>,
    /// File stem of the chart of this section, if the report has one.
    pub chart: Option<&'static str>,
}

use Align::{Left as L, Right as R};

fn f(x: f64, decimals: usize) -> String {
    format!("{x:.decimals$}")
}

fn opt_ratio(x: Option<f64>) -> String {
    x.map(|x| f(x, 2)).unwrap_or_else(|| "-".to_string())
}

pub(crate) fn sessions_word(n: u64) -> String {
    if n == 1 {
        "1 session".to_string()
    } else {
        format!("{} sessions", count_short(n))
    }
}

fn cpus(v: &[usize]) -> String {
    if v.is_empty() {
        "not pinned".to_string()
    } else {
        v.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Every section the report has data for, in the order of the HTML page.
pub(crate) fn sections(r: &Report) -> Vec<Section> {
    let mut out = Vec::new();
    if let Some(m) = &r.machine {
        out.push(machine_section(m));
    }
    if let Some(u) = &r.upf {
        out.push(upf_section(u));
    }
    if let Some(c) = r.capacity.as_ref().filter(|c| !c.rows.is_empty()) {
        out.push(capacity_section(c, &r.no_drop));
    }
    if !r.limits.is_empty() {
        out.push(limits_section(&r.limits));
    }
    if !r.throughput.is_empty() {
        out.push(throughput_section(r));
    }
    if !r.app_mix.is_empty() {
        out.push(app_mix_section(&r.app_mix));
    }
    if !r.no_drop.is_empty() {
        out.push(no_drop_section(&r.no_drop));
    }
    if !r.latency.is_empty() {
        out.push(latency_section(&r.latency));
    }
    if !r.sessions.is_empty() || r.establish_under_traffic.is_some() {
        out.push(sessions_section(
            &r.sessions,
            r.establish_under_traffic.as_ref(),
        ));
    }
    if let Some(p) = &r.ping {
        out.push(ping_section(p));
    }
    if !r.iperf3.is_empty() {
        out.push(iperf3_section(&r.iperf3));
    }
    if !r.scaling.is_empty() {
        out.push(scaling_section(&r.scaling));
    }
    out
}

fn machine_section(m: &Machine) -> Section {
    let mut t = Table::new(&["fact", "value"], &[L, L]);
    let mut kv = |k: &str, v: String| t.row(vec![k.to_string(), v]);
    kv("date", m.date.clone());
    kv("CPU", m.cpu_model.clone());
    kv("CPUs online", m.cpus.to_string());
    kv("kernel", m.kernel.clone());
    kv("generator CPUs", cpus(&m.generator_cpus));
    kv("forwarder CPUs", cpus(&m.forwarder_cpus));
    let [a, b, c] = m.load_average;
    kv("load average", format!("{a:.2} {b:.2} {c:.2}"));
    let busy = m
        .busy_processes
        .iter()
        .map(|p| format!("{} ({}) {:.0} %", p.name, p.pid, p.cpu_pct))
        .collect::<Vec<_>>()
        .join(", ");
    kv(
        "busiest processes",
        if busy.is_empty() {
            "-".to_string()
        } else {
            busy
        },
    );
    kv("upfbench", m.upfbench_version.clone());
    kv("command", m.command_line.join(" "));
    Section {
        id: "machine",
        heading: "Machine".to_string(),
        lines: m.notes.iter().map(|n| format!("note: {n}")).collect(),
        tables: vec![t],
        chart: None,
    }
}

fn upf_section(u: &UpfUnderTest) -> Section {
    let mut t = Table::new(&["setting", "value"], &[L, L]);
    t.row(vec!["name".into(), u.name.clone()]);
    t.row(vec!["N4".into(), u.n4.clone()]);
    t.row(vec!["N3".into(), u.n3.clone()]);
    t.row(vec!["N6".into(), u.n6.clone()]);
    for (k, v) in &u.options {
        t.row(vec![k.clone(), v.clone()]);
    }
    Section {
        id: "upf",
        heading: "UPF under test".to_string(),
        lines: Vec::new(),
        tables: vec![t],
        chart: None,
    }
}

/// The capacity table in the column order of the Free5GC cloud paper's Table II.
pub(crate) fn capacity_table(c: &CapacityTable) -> Table {
    let mut t = Table::new(
        &[
            "users",
            "upload Gbit/s",
            "upload loss %",
            "download Gbit/s",
            "download loss %",
            "UL Mpps",
            "DL Mpps",
        ],
        &[R, R, R, R, R, R, R],
    );
    for row in &c.rows {
        t.row(vec![
            row.users.to_string(),
            f(row.ul_gbps, 3),
            f(row.ul_loss_pct, 3),
            f(row.dl_gbps, 3),
            f(row.dl_loss_pct, 3),
            f(row.ul_mpps, 3),
            f(row.dl_mpps, 3),
        ]);
    }
    t
}

fn capacity_section(c: &CapacityTable, no_drop: &[NoDropRate]) -> Section {
    let mut lines = vec![c.model.describe().to_string()];
    let reached = c.users_reached();
    lines.push(format!(
        "subscribers carried with loss <= {CAPACITY_LOSS_PCT} % each way: {}",
        reached.map_or_else(|| "none".to_string(), |u| u.to_string())
    ));
    if let Some(rig) = c.rig_users {
        let rates: Vec<String> = no_drop
            .iter()
            .filter_map(|n| Some(format!("{} {} Mpps", n.direction, sig3(n.rig_mpps?))))
            .collect();
        let mut l = format!(
            "the rig's own zero-loss rates ({}, the bare forwarder's no-drop search) fit {rig} \
             subscribers at the model's packet rates, both directions sharing the forwarding CPU",
            if rates.is_empty() {
                "-".to_string()
            } else {
                rates.join(", ")
            }
        );
        if reached.is_some_and(|u| u > rig) {
            l.push_str(&format!(
                "; the UPF carried more because a step counts as carried up to \
                 {CAPACITY_LOSS_PCT} % loss while the rig's search stops at its first lost \
                 packet (a stall of this machine stops it too): {rig} is where the rig first \
                 lost a packet, not what it can carry"
            ));
        }
        lines.push(l);
    }
    Section {
        id: "capacity",
        heading: format!("Capacity test (traffic model: {})", c.model),
        lines,
        tables: vec![capacity_table(c)],
        chart: Some("capacity"),
    }
}

fn limits_section(limits: &[Limit]) -> Section {
    let passes = limits
        .iter()
        .any(|l| !l.generator_passes_mpps.is_empty() || !l.io_passes_mpps.is_empty());
    let one_miss = limits.iter().any(|l| l.one_miss_mpps.is_some());
    let mut head = vec!["dir", "packet B", "generator limit Mpps", "I/O limit Mpps"];
    let mut align = vec![L, R, R, R];
    if one_miss {
        head.extend(["one-miss limit Mpps", "one-miss sessions"]);
        align.extend([R, R]);
    }
    if passes {
        head.extend(["generator, each pass", "I/O, each pass"]);
        align.extend([R, R]);
    }
    let mut t = Table::new(&head, &align);
    let each = |v: &[f64]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.iter().map(|x| f(*x, 3)).collect::<Vec<_>>().join(" / ")
        }
    };
    for l in limits {
        let mut row = vec![
            l.direction.to_string(),
            l.packet_bytes.to_string(),
            l.generator_mpps.map(|x| f(x, 3)).unwrap_or("-".into()),
            l.io_mpps.map(|x| f(x, 3)).unwrap_or("-".into()),
        ];
        if one_miss {
            row.push(l.one_miss_mpps.map_or_else(|| "-".into(), |x| f(x, 3)));
            row.push(l.one_miss_sessions.map_or_else(|| "-".into(), count_short));
        }
        if passes {
            row.push(each(&l.generator_passes_mpps));
            row.push(each(&l.io_passes_mpps));
        }
        t.row(row);
    }
    let mut lines = vec![
        "generator limit: the generator into XDP_DROP; I/O limit: bare XDP decap (UL) or \
         encap (DL) and redirect, no session logic"
            .to_string(),
    ];
    if one_miss {
        lines.push(
            "one-miss limit: the bare forwarder plus one dependent read of the session's \
             64-octet record from a table of that many sessions (UL by TEID, DL by UE \
             address), the higher of the readings around the UPF's trial"
                .to_string(),
        );
    }
    if passes {
        lines.push(
            "measured before the UPF's trials and again after them; each limit is the \
             higher pass (a saturated trial on a busy machine can only come out low)"
                .to_string(),
        );
    }
    Section {
        id: "limits",
        heading: "Limits of this machine (same run)".to_string(),
        lines,
        tables: vec![t],
        chart: None,
    }
}

/// A point's rate as a share of a limit: (ratio, limit Mpps).
type Ratio = Option<(f64, f64)>;

/// A point against the generator and the I/O limit: the ratio the point holds, else one
/// computed from the report's limits.
fn ratios(r: &Report, p: &ThroughputPoint) -> (Ratio, Ratio) {
    let l = r.limit(p.direction, p.packet_bytes);
    let pick = |stored: Option<f64>, limit: Option<f64>| {
        let limit = limit.filter(|x| *x > 0.0)?;
        Some((stored.unwrap_or(p.received_mpps / limit), limit))
    };
    (
        pick(p.vs_generator, l.and_then(|l| l.generator_mpps)),
        pick(p.vs_io, l.and_then(|l| l.io_mpps)),
    )
}

/// One line per trial with one ratio that counts. With the limits measured beside the
/// trial (docs/benchmarks.md, "Limits next to their trial"): "UL 64 B, 1 session: 3.10
/// Mpps = 0.74 x I/O limit beside it (4.12 / 4.24 Mpps)[, x one-miss limit beside it][, x
/// 1 session]; context: 0.74 x the run's I/O limit 4.20 Mpps, 0.18 x generator limit 17.5
/// Mpps". Without them, the run's limits are the only ones and count: "... = 0.74 x I/O
/// limit 4.20 Mpps, 0.18 x generator limit 17.5 Mpps".
pub(crate) fn ratio_line(r: &Report, p: &ThroughputPoint) -> String {
    let head = format!(
        "{} {} B, {}: {} Mpps",
        p.direction,
        p.packet_bytes,
        sessions_word(p.sessions),
        sig3(p.received_mpps)
    );
    let (gen, io) = ratios(r, p);
    let mut counts = Vec::new();
    let mut context = Vec::new();
    let beside = p.io_bracket.is_some();
    if let Some(b) = &p.io_bracket {
        counts.push(bracket_phrase(b, "I/O limit"));
    }
    if let Some(b) = &p.one_miss_bracket {
        counts.push(bracket_phrase(b, "one-miss limit"));
    }
    let run_io = io.map(|(x, l)| {
        if beside {
            format!("{x:.2} x the run's I/O limit {} Mpps", sig3(l))
        } else {
            format!("{x:.2} x I/O limit {} Mpps", sig3(l))
        }
    });
    let run_gen = gen.map(|(x, l)| format!("{x:.2} x generator limit {} Mpps", sig3(l)));
    if beside {
        context.extend(run_io);
        context.extend(run_gen);
    } else {
        counts.extend(run_io);
        counts.extend(run_gen);
    }
    // The target: throughput with many sessions as a share of one session's.
    let one = r.throughput.iter().find(|q| {
        q.sessions == 1 && q.direction == p.direction && q.packet_bytes == p.packet_bytes
    });
    if let Some(one) = one.filter(|q| p.sessions > 1 && q.received_mpps > 0.0) {
        counts.push(format!(
            "{:.2} x 1 session",
            p.received_mpps / one.received_mpps
        ));
    }
    if counts.is_empty() {
        return format!(
            "{head}; no limit measured for {} {} B",
            p.direction, p.packet_bytes
        );
    }
    let mut line = format!("{head} = {}", counts.join(", "));
    if !context.is_empty() {
        line.push_str(&format!("; context: {}", context.join(", ")));
    }
    line
}

/// "0.74 x I/O limit beside it (4.12 / 4.24 Mpps; measured again; FLAGGED: readings
/// 18 % apart)".
fn bracket_phrase(b: &Bracket, what: &str) -> String {
    let mut s = format!(
        "{:.2} x {what} beside it ({} / {} Mpps",
        b.ratio,
        sig3(b.before_mpps),
        sig3(b.after_mpps)
    );
    s.push_str(&bracket_note(b).map_or_else(String::new, |n| format!("; {n}")));
    s.push(')');
    s
}

/// "measured again", "FLAGGED: readings 18 % apart", both, or nothing.
fn bracket_note(b: &Bracket) -> Option<String> {
    let mut v = Vec::new();
    if b.repeated {
        v.push("measured again".to_string());
    }
    if b.flagged {
        v.push(format!(
            "FLAGGED: readings {:.0} % apart",
            b.spread() * 100.0
        ));
    }
    (!v.is_empty()).then(|| v.join("; "))
}

fn throughput_section(r: &Report) -> Section {
    // With limits beside the trials, their ratio is the one that counts; the run's
    // limits (the Limits table) are context, named as such.
    let beside = r.throughput.iter().any(|p| p.io_bracket.is_some());
    let (io_head, gen_head) = if beside {
        ("context: x run's I/O limit", "context: x generator limit")
    } else {
        ("x I/O limit", "x generator limit")
    };
    let mut head = vec![
        "dir",
        "packet B",
        "sessions",
        "offered Mpps",
        "received Mpps",
        "Gbit/s",
        "loss %",
    ];
    let mut align = vec![L, R, R, R, R, R, R];
    if beside {
        head.push("x I/O limit beside it");
        align.push(R);
    }
    head.extend([io_head, gen_head]);
    align.extend([R, R]);
    let mut t = Table::new(&head, &align);
    for p in &r.throughput {
        let (gen, io) = ratios(r, p);
        let mut row = vec![
            p.direction.to_string(),
            p.packet_bytes.to_string(),
            count_short(p.sessions),
            f(p.offered_mpps, 3),
            f(p.received_mpps, 3),
            f(p.gbps, 3),
            f(p.loss_pct, 3),
        ];
        if beside {
            row.push(opt_ratio(p.io_bracket.map(|b| b.ratio)));
        }
        row.push(opt_ratio(io.map(|x| x.0)));
        row.push(opt_ratio(gen.map(|x| x.0)));
        t.row(row);
    }
    let mut lines: Vec<String> = r.throughput.iter().map(|p| ratio_line(r, p)).collect();
    let mut tables = vec![t];
    let bracketed: Vec<&ThroughputPoint> = r
        .throughput
        .iter()
        .filter(|p| p.io_bracket.is_some() || p.one_miss_bracket.is_some())
        .collect();
    if beside {
        lines.push(
            "the ratio that counts: x I/O limit beside it (and at all sessions x one-miss \
             limit beside it), the limits measured right before and after the trial; \
             context: the run's limits (the Limits table, the higher of its passes), which \
             on a machine whose speed moves within minutes can be far off the trial's"
                .to_string(),
        );
    }
    if !bracketed.is_empty() {
        lines.push(format!(
            "beside it: the limit measured right before and right after the UPF's trial (same direction, size and sessions); the ratio is against their mean; a pair more than {:.0} % apart is measured again (limits and trial), then flagged.",
            BRACKET_SPREAD * 100.0
        ));
        let mut b = Table::new(
            &[
                "dir",
                "packet B",
                "sessions",
                "received Mpps",
                "I/O before",
                "I/O after",
                "x I/O",
                "one-miss before",
                "one-miss after",
                "x one-miss",
                "note",
            ],
            &[L, R, R, R, R, R, R, R, R, R, L],
        );
        let dash = || "-".to_string();
        for p in bracketed {
            let cells = |x: &Option<Bracket>| match x {
                Some(x) => [f(x.before_mpps, 3), f(x.after_mpps, 3), f(x.ratio, 2)],
                None => [dash(), dash(), dash()],
            };
            let notes: Vec<String> = [(&p.io_bracket, "I/O"), (&p.one_miss_bracket, "one-miss")]
                .into_iter()
                .filter_map(|(x, w)| Some(format!("{w}: {}", bracket_note(x.as_ref()?)?)))
                .collect();
            let mut row = vec![
                p.direction.to_string(),
                p.packet_bytes.to_string(),
                count_short(p.sessions),
                f(p.received_mpps, 3),
            ];
            row.extend(cells(&p.io_bracket));
            row.extend(cells(&p.one_miss_bracket));
            row.push(if notes.is_empty() {
                dash()
            } else {
                notes.join("; ")
            });
            b.row(row);
        }
        tables.push(b);
    }
    Section {
        id: "throughput",
        heading: "Throughput".to_string(),
        lines,
        tables,
        chart: Some("throughput"),
    }
}

fn no_drop_section(v: &[NoDropRate]) -> Section {
    let lines = v
        .iter()
        .map(|n| {
            let rig = match (n.rig_mpps, n.vs_rig()) {
                (Some(m), Some(x)) => format!(
                    " = {x:.2} x the rig's own no-drop rate {} Mpps (bare forwarder, same search)",
                    sig3(m)
                ),
                (Some(m), None) => format!("; the rig's own: {} Mpps", sig3(m)),
                _ => String::new(),
            };
            format!(
                "{} {} B, {}: no-drop rate {} Mpps ({} Gbit/s){rig}",
                n.direction,
                n.packet_bytes,
                sessions_word(n.sessions),
                sig3(n.mpps),
                sig3(n.gbps)
            )
        })
        .collect();
    let mut t = Table::new(
        &["dir", "packet B", "offered Mpps", "received Mpps", "loss %"],
        &[L, R, R, R, R],
    );
    for n in v {
        for p in &n.curve {
            t.row(vec![
                n.direction.to_string(),
                n.packet_bytes.to_string(),
                f(p.offered_mpps, 3),
                f(p.received_mpps, 3),
                f(p.loss_pct, 3),
            ]);
        }
    }
    let has_curve = !t.rows.is_empty();
    let mut tables = if has_curve { vec![t] } else { Vec::new() };
    if v.iter().any(|n| n.rig_mpps.is_some()) {
        let mut rig = Table::new(
            &[
                "dir",
                "packet B",
                "sessions",
                "UPF no-drop Mpps",
                "rig no-drop Mpps",
                "UPF / rig",
            ],
            &[L, R, R, R, R, R],
        );
        for n in v {
            rig.row(vec![
                n.direction.to_string(),
                n.packet_bytes.to_string(),
                count_short(n.sessions),
                f(n.mpps, 3),
                n.rig_mpps.map_or_else(|| "-".to_string(), |m| f(m, 3)),
                opt_ratio(n.vs_rig()),
            ]);
        }
        tables.insert(0, rig);
    }
    Section {
        id: "no-drop",
        heading: "No-drop rate and loss above it".to_string(),
        lines,
        tables,
        chart: has_curve.then_some("loss"),
    }
}

fn app_mix_section(v: &[AppMixPoint]) -> Section {
    let mut lines = Vec::new();
    if let Some(p) = v.first() {
        lines.push(format!(
            "{}: {} with an uplink and a downlink PDR per application ({}), each application with its own URR, against as many sessions without application PDRs, same traffic (the trials right before and after); ratio = with / without.",
            p.mix,
            sessions_word(p.sessions),
            p.apps
                .iter()
                .map(|a| format!("{}: {}", a.id, a.detected_by))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    for p in v.iter().filter(|p| p.flagged) {
        lines.push(format!(
            "{}: the trials without application PDRs were more than 10 % apart ({:.3} and {:.3} Mpps).",
            p.direction, p.without_before_mpps, p.without_after_mpps
        ));
    }
    let mut t = Table::new(
        &[
            "dir",
            "packet B",
            "sessions",
            "with apps Mpps",
            "without Mpps (before / after)",
            "with / without",
        ],
        &[L, R, R, R, R, R],
    );
    for p in v {
        t.row(vec![
            p.direction.to_string(),
            p.packet_bytes.to_string(),
            count_short(p.sessions),
            f(p.received_mpps, 3),
            format!(
                "{} ({} / {})",
                f(p.without_mpps, 3),
                f(p.without_before_mpps, 3),
                f(p.without_after_mpps, 3)
            ),
            f(p.ratio, 2),
        ]);
    }
    let mut u = Table::new(
        &[
            "dir",
            "application",
            "traffic",
            "share sent %",
            "URR",
            "packets counted",
            "share counted %",
        ],
        &[L, L, L, R, R, R, R],
    );
    for p in v {
        for a in &p.apps {
            u.row(vec![
                p.direction.to_string(),
                a.id.clone(),
                a.traffic.clone(),
                f(a.share_pct, 1),
                a.urr_id.to_string(),
                a.packets.to_string(),
                f(a.counted_share_pct, 1),
            ]);
        }
        u.row(vec![
            p.direction.to_string(),
            "(none: default PDRs)".to_string(),
            "-".to_string(),
            f(0.0, 1),
            "1".to_string(),
            p.unmatched_packets.to_string(),
            "-".to_string(),
        ]);
    }
    Section {
        id: "app-mix",
        heading: "Application mix: application PDRs and per-application URRs at saturation"
            .to_string(),
        lines,
        tables: vec![t, u],
        chart: None,
    }
}

fn scaling_section(v: &[ScalingCase]) -> Section {
    let mut t = Table::new(
        &[
            "case",
            "program",
            "sessions",
            "CPUs",
            "Mpps per CPU",
            "aggregate Mpps",
            "x 1 CPU",
        ],
        &[L, L, R, R, R, R, R],
    );
    for c in v {
        t.row(vec![
            c.case.clone(),
            c.program.clone(),
            count_short(c.sessions),
            c.cpus.to_string(),
            c.mpps_per_cpu
                .iter()
                .map(|x| f(*x, 3))
                .collect::<Vec<_>>()
                .join(" / "),
            f(c.aggregate_mpps, 3),
            opt_ratio(c.vs_one_cpu),
        ]);
    }
    Section {
        id: "scaling",
        heading: "Per-core scaling of the data path (BPF_PROG_RUN on each CPU at once)".to_string(),
        lines: Vec::new(),
        tables: vec![t],
        chart: None,
    }
}

fn latency_section(v: &[LatencyPoint]) -> Section {
    let mut t = Table::new(
        &[
            "dir",
            "packet B",
            "% of no-drop",
            "offered Mpps",
            "p50 µs",
            "p99 µs",
            "p99.9 µs",
            "bare p99 µs",
            "added p99 µs",
            "samples",
        ],
        &[L, R, R, R, R, R, R, R, R, R],
    );
    for p in v {
        let dash = || "-".to_string();
        t.row(vec![
            p.direction.to_string(),
            p.packet_bytes.to_string(),
            p.percent_of_no_drop.to_string(),
            f(p.offered_mpps, 3),
            f(p.p50_us, 1),
            f(p.p99_us, 1),
            f(p.p999_us, 1),
            p.bare.map_or_else(dash, |b| f(b.p99_us, 1)),
            p.added_p99().map_or_else(dash, |a| a.to_string()),
            p.samples.to_string(),
        ]);
    }
    let lines = if v.iter().any(|p| p.bare.is_some()) {
        vec![
            "bare: the bare XDP forwarder at the same offered rate, same run (generator, veth and sink alone); added = UPF minus bare.".to_string(),
            "< noise (N): the UPF's p99 is not above the bare forwarder's by more than the rig's own spread at that rate (its p99 minus its p50, N µs): what the UPF adds, if anything, cannot be told apart from the rig.".to_string(),
        ]
    } else {
        Vec::new()
    };
    Section {
        id: "latency",
        heading: "Latency through the UPF".to_string(),
        lines,
        tables: vec![t],
        chart: Some("latency"),
    }
}

fn sessions_section(v: &[SessionRatePoint], under: Option<&EstablishUnderTraffic>) -> Section {
    let mut t = Table::new(
        &[
            "resident sessions",
            "established/s",
            "p50 ms",
            "p99 ms",
            "max ms",
            "bytes/session",
            "of which BPF maps",
        ],
        &[R, R, R, R, R, R, R],
    );
    for p in v {
        t.row(vec![
            count_short(p.resident),
            f(p.established_per_s, 0),
            f(p.p50_ms, 2),
            f(p.p99_ms, 2),
            f(p.max_ms, 2),
            p.bytes_per_session
                .map(|b| b.to_string())
                .unwrap_or("-".into()),
            p.map_bytes_per_session
                .map(|b| b.to_string())
                .unwrap_or("-".into()),
        ]);
    }
    let mut lines = Vec::new();
    if let Some(u) = under {
        lines.push(format!(
            "Under traffic: {} of {} sessions established with {} resident, {:.0}/s, \
             p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, while {} B packets ran at {} % of \
             the no-drop rate (UL {:.3}, DL {:.3} Mpps): loss UL {:.4} %, DL {:.4} %{}",
            u.established,
            u.requested,
            count_short(u.resident),
            u.established_per_s,
            u.p50_ms,
            u.p99_ms,
            u.max_ms,
            u.packet_bytes,
            u.percent_of_no_drop,
            u.ul_offered_mpps,
            u.dl_offered_mpps,
            u.ul_loss_pct,
            u.dl_loss_pct,
            if u.establish_secs + 0.2 <= u.traffic_secs {
                String::new()
            } else {
                format!(
                    " (the establishments took {:.1} s, longer than the {:.1} s of traffic)",
                    u.establish_secs, u.traffic_secs
                )
            }
        ));
    }
    Section {
        id: "sessions",
        heading: "PFCP session establishment".to_string(),
        lines,
        tables: vec![t],
        chart: super::charts::sessions_chart_has_a_series(v).then_some("sessions"),
    }
}

fn ping_section(p: &PingResult) -> Section {
    let mut t = Table::new(
        &[
            "from (UE)",
            "to",
            "sent",
            "received",
            "loss %",
            "rtt min ms",
            "rtt avg ms",
            "rtt max ms",
            "rtt mdev ms",
        ],
        &[L, L, R, R, R, R, R, R, R],
    );
    let rtt = |g: fn(&Rtt) -> f64| p.rtt_ms.as_ref().map_or("-".to_string(), |r| f(g(r), 3));
    t.row(vec![
        p.from.clone(),
        p.to.clone(),
        p.transmitted.to_string(),
        p.received.to_string(),
        f(p.loss_pct, 1),
        rtt(|r| r.min),
        rtt(|r| r.avg),
        rtt(|r| r.max),
        rtt(|r| r.mdev),
    ]);
    Section {
        id: "ping",
        heading: "ping through the UPF (UE to data network)".to_string(),
        lines: p
            .error
            .iter()
            .map(|e| format!("ping failed: {e}"))
            .collect(),
        tables: vec![t],
        chart: None,
    }
}

fn iperf3_section(v: &[Iperf3Result]) -> Section {
    let mut t = Table::new(
        &[
            "dir",
            "protocol",
            "UE",
            "server",
            "seconds",
            "Gbit/s",
            "retransmits",
        ],
        &[L, L, L, L, R, R, R],
    );
    for r in v {
        t.row(vec![
            r.direction.to_string(),
            r.protocol.clone(),
            r.ue.clone(),
            r.server.clone(),
            f(r.seconds, 1),
            r.gbps.map_or("-".to_string(), |g| f(g, 2)),
            r.retransmits.map_or("-".to_string(), |n| n.to_string()),
        ]);
    }
    Section {
        id: "iperf3",
        heading: "iperf3 through the UPF (one stream, UE to and from the data network)".to_string(),
        lines: v
            .iter()
            .filter_map(|r| {
                r.error
                    .as_ref()
                    .map(|e| format!("iperf3 {} failed: {e}", r.direction))
            })
            .collect(),
        tables: vec![t],
        chart: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_table_aligns_and_leaves_no_trailing_space() {
        let mut t = Table::new(&["name", "n"], &[L, R]);
        t.row(vec!["a".into(), "100".into()]);
        t.row(vec!["longer".into(), "2".into()]);
        assert_eq!(
            t.to_text(),
            "name   |   n\n-------+----\na      | 100\nlonger |   2\n"
        );
        let mut t = Table::new(&["n", "name"], &[R, L]);
        t.row(vec!["1".into(), "x".into()]);
        assert_eq!(t.to_text(), "n | name\n--+-----\n1 | x\n");
    }

    #[test]
    fn ratio_line_without_limits_says_so() {
        let mut r = Report::new("test");
        r.throughput.push(ThroughputPoint::measured(
            Direction::Downlink,
            128,
            1000,
            5.0,
            2.5,
        ));
        assert_eq!(
            ratio_line(&r, &r.throughput[0]),
            "DL 128 B, 1k sessions: 2.50 Mpps; no limit measured for DL 128 B"
        );
    }

    #[test]
    fn ratio_line_compares_many_sessions_with_one() {
        let mut r = Report::new("test");
        for (sessions, mpps) in [(1, 2.0), (1_000_000, 0.5)] {
            r.throughput.push(ThroughputPoint::measured(
                Direction::Uplink,
                650,
                sessions,
                5.0,
                mpps,
            ));
        }
        r.throughput.push(ThroughputPoint::measured(
            Direction::Downlink,
            650,
            1_000_000,
            5.0,
            0.5,
        ));
        assert_eq!(
            ratio_line(&r, &r.throughput[1]),
            "UL 650 B, 1M sessions: 0.500 Mpps = 0.25 x 1 session"
        );
        assert_eq!(
            ratio_line(&r, &r.throughput[0]),
            "UL 650 B, 1 session: 2.00 Mpps; no limit measured for UL 650 B"
        );
        assert!(ratio_line(&r, &r.throughput[2]).ends_with("no limit measured for DL 650 B"));
    }
}
