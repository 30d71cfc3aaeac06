//! Application detection end to end in the lab (issue 16, docs/application-detection.md):
//! upfd with its XDP data path, applications provisioned by PFD Management from the SMF
//! emulator, a session whose PDRs include an uplink and a downlink PDR per application
//! (own FAR, URR, optionally QER), one UE of the gNB emulator (a TUN in gnb), and the data
//! network's real servers in dn (`upfbench::lab::DnServices`: dnsmasq, HTTP and HTTPS).
//! The UE resolves with `dig` and fetches with `curl`, bound to its address.
//!
//! Counting is checked exactly against the UE's TUN: one step at a time (nothing else
//! uses the TUN), its counters before and after are what crossed for that step, in whole
//! IP packets as URRs count them; usage is asked for after each step (Session Modification
//! with QAURR) and summed per URR with the Session Reports in between. A packet the lab
//! loses outside upfd (a full veth ring or socket on a busy machine) is named by its
//! counter (`LabLoss`) and accounted for.
//!
//! Each test builds its own lab (prefix `a-<name>-`), removes it and kills what it started
//! even when it fails. Root only: elsewhere each test says so and passes. The tools (dnsmasq,
//! python3, openssl, curl, dig) are scripts/deps.sh's; a missing one fails the test with its
//! name and package.

mod common;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use common::lab::{
    coarse_now, mbr_bound, root, run_bounded, serial, IfCounters, LabLoss, LabSmf, LabUpfd,
    UpfdOptions,
};
use pfcp::msg::SessionReportRequest;
use upfbench::gnb::{Gnb, GnbConfig, GnbStats};
use upfbench::lab::{addr, missing_dn_tools, DnServices, DnServicesConfig, Lab, Ns};
use upfbench::report::Direction;
use upfbench::smf::{AppIds, AppPfds, AppRule, UsageByUrr, UsageTotals};

/// The default PDRs' URR.
const DEFAULT_URR: u32 = 1;
/// dn's DNS server, also a web server no DNS answer names (SNI / Host only).
const DN: Ipv4Addr = addr::DN_N6;

fn pfds(id: &str, domains: &[&str]) -> AppPfds {
    AppPfds {
        id: id.into(),
        domains: domains.iter().map(|d| d.to_string()).collect(),
        ..AppPfds::default()
    }
}

/// Everything one test runs; dropped in this order (the lab last).
struct Rig {
    gnb: Gnb,
    smf: LabSmf,
    upfd: LabUpfd,
    _dn: DnServices,
    ue: Ipv4Addr,
    tun: String,
    /// Session Reports received so far.
    reports: Vec<SessionReportRequest>,
    start: IfCounters,
    /// The lab's and the emulator's loss counters at the start.
    start_loss: (LabLoss, GnbStats),
    lab: Lab,
}

/// What one step moved: the TUN's counters and each URR's reported usage, and the
/// packets lost outside upfd meanwhile: uplink before upfd (read from the TUN, never
/// counted by a URR), downlink after it (counted, never written to the TUN).
#[derive(Debug)]
struct Step {
    what: String,
    tun: IfCounters,
    usage: UsageByUrr,
    lost_ul: u64,
    lost_dl: u64,
}

impl Step {
    fn urr(&self, id: u32) -> UsageTotals {
        self.usage.get(&id).copied().unwrap_or_default()
    }

    /// The URRs `ids` together against the TUN: exact while nothing was lost outside
    /// upfd; else their packets are the TUN's less (uplink) or plus (downlink) the
    /// packets lost, and their octets bounded by the TUN's.
    fn against_tun(&self, ids: &[u32]) {
        let sum = |f: fn(&UsageTotals) -> u64| ids.iter().map(|i| f(&self.urr(*i))).sum::<u64>();
        let (ul_p, dl_p) = (sum(|u| u.uplink_packets), sum(|u| u.downlink_packets));
        let (ul_b, dl_b) = (sum(|u| u.uplink), sum(|u| u.downlink));
        let t = &self.tun;
        if self.lost_ul == 0 && self.lost_dl == 0 {
            assert_eq!(
                (ul_b + dl_b, ul_p + dl_p),
                (t.bytes(), t.packets()),
                "{}: URRs {ids:?} against the TUN: {self:?}",
                self.what
            );
            assert_eq!(
                (ul_b, dl_b),
                (t.tx_bytes, t.rx_bytes),
                "{}: URRs {ids:?} per direction: {self:?}",
                self.what
            );
        } else {
            assert_eq!(
                (ul_p + self.lost_ul, dl_p),
                (t.tx_packets, t.rx_packets + self.lost_dl),
                "{}: URRs {ids:?} against the TUN and the packets lost: {self:?}",
                self.what
            );
            assert!(
                ul_b <= t.tx_bytes && dl_b >= t.rx_bytes,
                "{}: URRs {ids:?} octets against the TUN: {self:?}",
                self.what
            );
        }
    }

    /// Whether the URRs' packets balance the TUN's, losses included.
    fn balanced(&self) -> bool {
        let (ul, dl) = self.usage.values().fold((0, 0), |(u, d), v| {
            (u + v.uplink_packets, d + v.downlink_packets)
        });
        ul + self.lost_ul == self.tun.tx_packets && dl == self.tun.rx_packets + self.lost_dl
    }

    fn line(&self) -> String {
        let mut s = format!(
            "{}: TUN {} octets / {} packets;",
            self.what,
            self.tun.bytes(),
            self.tun.packets()
        );
        for (id, u) in &self.usage {
            if u.total > 0 || u.total_packets > 0 {
                s.push_str(&format!(
                    " URR {id} {} octets / {} packets",
                    u.total, u.total_packets
                ));
            }
        }
        s
    }

    /// Every octet and packet of the step in URR `id`'s reports, none in another's.
    fn all_in(&self, id: u32) {
        self.against_tun(&[id]);
        for (other, v) in &self.usage {
            if *other != id {
                assert_eq!(v.total, 0, "{}: URR {other} counted: {self:?}", self.what);
            }
        }
    }

    /// A flow classified by its first payload (TLS SNI or HTTP Host): the TCP handshake
    /// (SYN, SYN-ACK, ACK: 3 packets) is the default PDRs', the rest URR `id`'s (a lost
    /// handshake packet is sent again: exactly 3 only without loss).
    fn handshake_then(&self, id: u32) {
        let d = self.urr(DEFAULT_URR);
        let a = self.urr(id);
        if self.lost_ul == 0 && self.lost_dl == 0 {
            assert_eq!(
                (d.uplink_packets, d.downlink_packets),
                (2, 1),
                "{}: the default URR has the handshake only, SYN and ACK up, SYN-ACK down: {self:?}",
                self.what
            );
        } else {
            assert!(
                d.uplink_packets >= 2 && d.downlink_packets >= 1,
                "{}: the default URR has the handshake: {self:?}",
                self.what
            );
        }
        self.against_tun(&[DEFAULT_URR, id]);
        assert!(a.total > 0, "{}: nothing for URR {id}: {self:?}", self.what);
        for (other, v) in &self.usage {
            if *other != id && *other != DEFAULT_URR {
                assert_eq!(v.total, 0, "{}: URR {other} counted: {self:?}", self.what);
            }
        }
    }
}

impl Rig {
    fn start(
        prefix: &str,
        apps: &[AppPfds],
        rules: &[&str],
        records: &[(&str, Ipv4Addr)],
        files: &[(&str, usize)],
    ) -> Rig {
        let missing = missing_dn_tools();
        assert!(
            missing.is_empty(),
            "the application lab tests need {}: install them (scripts/deps.sh)",
            missing.join(", ")
        );
        let lab = Lab::up(prefix).unwrap().down_on_drop();
        let dn = DnServices::start(
            &lab,
            DnServicesConfig {
                records: records.iter().map(|(n, a)| (n.to_string(), *a)).collect(),
                files: files.iter().map(|(n, s)| (n.to_string(), *s)).collect(),
                ..DnServicesConfig::default()
            },
        )
        .expect("starting dnsmasq and the web server in dn");
        let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
        let rules: Vec<AppRule> = rules.iter().map(|r| r.parse().unwrap()).collect();
        let mut smf = LabSmf::associate(&lab, |c| c.applications = rules);
        let r = smf
            .rt
            .block_on(smf.smf.pfd_management(apps))
            .expect("PFD Management Response");
        assert!(
            r.cause.is_acceptance(),
            "PFD Management rejected: {r:?}\n{}",
            upfd.log()
        );
        let sessions = smf.establish(1);
        let gnb = Gnb::start(
            GnbConfig {
                netns: Some(lab.ns(Ns::Gnb)),
                ..GnbConfig::default()
            },
            sessions.clone(),
        )
        .expect("starting the gNB/UE emulator");
        let tun = gnb.stats().ues[0].tun.clone();
        let start = IfCounters::read(&lab, Ns::Gnb, &tun);
        let start_loss = (LabLoss::read(&lab), gnb.stats());
        Rig {
            gnb,
            smf,
            upfd,
            _dn: dn,
            ue: sessions[0].ue_ip.expect("IPv4 UE"),
            tun,
            reports: Vec::new(),
            start,
            start_loss,
            lab,
        }
    }

    /// Usage reported so far per URR (asks for it now).
    fn usage(&mut self) -> UsageByUrr {
        let q = self.smf.rt.block_on(self.smf.smf.query_usage(0));
        q.unwrap_or_else(|e| panic!("usage query: {e}\n{}", self.upfd.log()));
        let r = self.smf.smf.absorb_session_reports();
        self.reports.extend(r);
        self.smf.smf.usage().clone()
    }

    /// Run `f` alone on the UE; what crossed the TUN and what each URR reported for it.
    fn step(&mut self, what: &str, f: impl FnOnce(&Rig)) -> Step {
        let before_usage = self.usage();
        let before = IfCounters::read(&self.lab, Ns::Gnb, &self.tun);
        let (loss0, emu0) = (LabLoss::read(&self.lab), self.gnb.stats());
        f(self);
        // The last segments (FIN, ACK) and the reports settle: wait until the TUN's
        // counters and the usage stop changing and balance (or stay unbalanced, e.g.
        // packets upfd dropped on purpose, for a while), at most 30 s.
        let end = Instant::now() + Duration::from_secs(30);
        let (mut last, mut still) = (None, 0);
        loop {
            std::thread::sleep(Duration::from_millis(200));
            let tun = IfCounters::read(&self.lab, Ns::Gnb, &self.tun).since(&before);
            let after = self.usage();
            let loss = LabLoss::read(&self.lab).since(&loss0);
            let (ul_dropped, dl_dropped) = emulator_drops(&self.gnb.stats(), &emu0);
            let s = Step {
                what: what.to_string(),
                tun,
                usage: usage_since(&after, &before_usage),
                lost_ul: loss.before_upfd(Direction::Uplink) + ul_dropped,
                lost_dl: loss.after_upfd(Direction::Downlink) + dl_dropped,
            };
            // (Each query adds a report: compare the counts only.)
            let counts: Vec<_> = s
                .usage
                .iter()
                .map(|(id, u)| {
                    (
                        *id,
                        u.uplink,
                        u.downlink,
                        u.uplink_packets,
                        u.downlink_packets,
                    )
                })
                .collect();
            let now = (s.tun, counts, s.lost_ul, s.lost_dl);
            still = if last.as_ref() == Some(&now) {
                still + 1
            } else {
                0
            };
            last = Some(now);
            if (still >= 1 && s.balanced()) || still >= 3 || Instant::now() >= end {
                if s.lost_ul + s.lost_dl > 0 {
                    eprintln!("{what}: lost outside upfd (and counted): {loss:?}");
                }
                eprintln!("{}", s.line());
                return s;
            }
        }
    }

    /// `dig NAME` from the UE through dn's dnsmasq; the address of the answer.
    fn dig(&self, name: &str) -> Ipv4Addr {
        let mut c = self.lab.command(Ns::Gnb, "dig");
        c.args(["-b", &self.ue.to_string(), &format!("@{DN}")])
            .args(["+short", "+time=5", "+tries=3", name]);
        let out = run_bounded(c, Duration::from_secs(60));
        let text = String::from_utf8_lossy(&out.stdout);
        text.lines()
            .find_map(|l| l.trim().parse().ok())
            .unwrap_or_else(|| panic!("dig {name} from {}: {out:?}\n{}", self.ue, self.upfd.log()))
    }

    /// `curl` from the UE: `url` (its host at `at`, as if resolved), at most `max_s`
    /// seconds. The outcome: exit status, HTTP code, octets of the body, seconds.
    fn curl(&self, url: &str, at: Ipv4Addr, max_s: u32) -> Curl {
        let (scheme, rest) = url.split_once("://").expect("scheme");
        let host = rest.split('/').next().expect("host");
        let port = if scheme == "https" { 443 } else { 80 };
        let mut c = self.lab.command(Ns::Gnb, "curl");
        c.args([
            "-sS",
            "-k",
            "-o",
            "/dev/null",
            "--interface",
            &self.ue.to_string(),
        ])
        .args(["--max-time", &max_s.to_string()])
        .args(["--resolve", &format!("{host}:{port}:{at}")])
        .args(["-w", "%{http_code} %{size_download} %{time_total}"])
        .arg(url);
        let out = run_bounded(c, Duration::from_secs(u64::from(max_s) + 30));
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let f: Vec<&str> = text.split_whitespace().collect();
        Curl {
            ok: out.status.success(),
            code: f.first().and_then(|v| v.parse().ok()).unwrap_or(0),
            size: f.get(1).and_then(|v| v.parse().ok()).unwrap_or(0),
            secs: f.get(2).and_then(|v| v.parse().ok()).unwrap_or(0.0),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }
    }

    /// `curl` that must fetch `size` octets with 200 OK (however long that takes, up to
    /// two minutes: through an MBR of 2 Mbit/s on a busy machine, a while).
    fn fetch(&self, url: &str, at: Ipv4Addr, size: usize) -> Curl {
        let c = self.curl(url, at, 120);
        assert!(
            c.ok && c.code == 200 && c.size == size as u64,
            "curl {url} at {at}: {c:?}\n{}",
            self.upfd.log()
        );
        c
    }

    /// iperf3 UDP from dn's `server` address to the UE for `secs` at `rate` bit/s,
    /// 1200-octet datagrams; the client's JSON summary.
    fn iperf3_udp_down(
        &self,
        server: Ipv4Addr,
        port: u16,
        secs: u32,
        rate: u64,
    ) -> serde_json::Value {
        let mut srv = self.lab.command(Ns::Dn, "iperf3");
        srv.args([
            "-s",
            "-1",
            "-B",
            &server.to_string(),
            "-p",
            &port.to_string(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
        let mut srv = srv.spawn().expect("iperf3 server");
        let mut last = String::new();
        let mut result = None;
        // The server is ready when a client gets through.
        for _ in 0..10 {
            let mut c = self.lab.command(Ns::Gnb, "iperf3");
            c.args(["-c", &server.to_string(), "-B", &self.ue.to_string()])
                .args(["-p", &port.to_string(), "-t", &secs.to_string(), "-J", "-R"])
                .args(["-u", "-b", &rate.to_string(), "-l", "1200"]);
            let out = run_bounded(c, Duration::from_secs(u64::from(secs) + 60));
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            if v["end"]["sum"].is_object() {
                result = Some(v);
                break;
            }
            last = format!("{}: {:?}", out.status, v["error"]);
            std::thread::sleep(Duration::from_millis(300));
        }
        let _ = srv.kill();
        let _ = srv.wait();
        result.unwrap_or_else(|| panic!("iperf3 from {server}: {last}"))
    }

    /// Everything that crossed the TUN since the start against every URR's reports.
    /// (Every step settled before: nothing is in flight.)
    fn check_total(&mut self) -> (IfCounters, u64) {
        let tun = IfCounters::read(&self.lab, Ns::Gnb, &self.tun).since(&self.start);
        let usage = self.usage();
        let reported: u64 = usage.values().map(|u| u.total).sum();
        let g = self.gnb.stats();
        let loss = LabLoss::read(&self.lab).since(&self.start_loss.0);
        let (ul_dropped, dl_dropped) = emulator_drops(&g, &self.start_loss.1);
        let all = Step {
            what: "the whole run: the TUN against the sum of the usage reports".into(),
            tun,
            usage: usage.clone(),
            lost_ul: loss.before_upfd(Direction::Uplink) + ul_dropped,
            lost_dl: loss.after_upfd(Direction::Downlink) + dl_dropped,
        };
        let ids: Vec<u32> = usage.keys().copied().collect();
        all.against_tun(&ids);
        // The emulator sent what it read from the TUN and wrote what it passed on, but
        // for what it dropped itself.
        let u = &g.ues[0];
        if ul_dropped == 0 && dl_dropped == 0 {
            assert_eq!(
                (u.ul_bytes, u.dl_bytes),
                (tun.tx_bytes, tun.rx_bytes),
                "the emulator's counters against the TUN's: {g:?}"
            );
        }
        assert_eq!(
            (u.ul_packets + ul_dropped, u.dl_packets),
            (tun.tx_packets, tun.rx_packets),
            "the emulator's counters against the TUN's: {g:?}"
        );
        (tun, reported)
    }

    /// The Application IDs of the START reports (Application Detection Information).
    fn detected(&self) -> Vec<String> {
        self.reports
            .iter()
            .flat_map(|r| &r.usage_reports)
            .filter_map(|u| u.application_detection_information.as_ref())
            .map(|a| String::from_utf8_lossy(&a.application_id.0).into_owned())
            .collect()
    }
}

/// The per-URR usage added since `before`.
fn usage_since(after: &UsageByUrr, before: &UsageByUrr) -> UsageByUrr {
    let mut usage = UsageByUrr::new();
    for (id, a) in after {
        let b = before.get(id).copied().unwrap_or_default();
        usage.insert(
            *id,
            UsageTotals {
                reports: a.reports - b.reports,
                total: a.total - b.total,
                uplink: a.uplink - b.uplink,
                downlink: a.downlink - b.downlink,
                total_packets: a.total_packets - b.total_packets,
                uplink_packets: a.uplink_packets - b.uplink_packets,
                downlink_packets: a.downlink_packets - b.downlink_packets,
                app_detections: a.app_detections - b.app_detections,
            },
        );
    }
    usage
}

/// Packets the gNB emulator dropped since `before`: (uplink read from the TUN and not
/// sent, downlink received and not written to the TUN).
fn emulator_drops(now: &GnbStats, before: &GnbStats) -> (u64, u64) {
    let ul = |s: &GnbStats| s.ues.iter().map(|u| u.ul_dropped).sum::<u64>();
    let dl = |s: &GnbStats| {
        s.unknown_teid + s.malformed + s.ues.iter().map(|u| u.dl_dropped).sum::<u64>()
    };
    (ul(now) - ul(before), dl(now) - dl(before))
}

#[derive(Debug)]
struct Curl {
    ok: bool,
    code: u16,
    size: u64,
    secs: f64,
    stderr: String,
}

/// Two applications by their domains (video.test, chat.test); the UE resolves both with
/// dig and fetches from each over HTTP and HTTPS: every fetch is counted by its
/// application's URR exactly (every octet and packet through the TUN, both directions),
/// the DNS exchanges by the default URR, and the TUN's total equals the sum of the usage
/// reports. With START, each application's first flow is reported with Application
/// Detection Information.
#[test]
fn two_applications_resolved_fetched_and_counted_exactly() {
    if !root() {
        return;
    }
    let _serial = serial();
    let size = 200_000;
    let mut rig = Rig::start(
        "a-cnt-",
        &[pfds("video", &["video.test"]), pfds("chat", &["chat.test"])],
        &["video:start", "chat:start"],
        &[
            ("video.test", addr::DN_APPS[0]),
            ("chat.test", addr::DN_APPS[1]),
        ],
        &[("file", size)],
    );
    let mut at = Vec::new();
    let dns = rig.step("dig video.test, chat.test", |r| {
        at.push(r.dig("video.test"));
        at.push(r.dig("chat.test"));
    });
    assert_eq!(at, vec![addr::DN_APPS[0], addr::DN_APPS[1]]);
    dns.all_in(DEFAULT_URR);
    // Two queries, two answers (more if dig asked again after 5 s without one).
    assert!(
        dns.tun.tx_packets >= 2 && dns.tun.rx_packets >= 2,
        "two queries, two answers: {dns:?}"
    );
    let mut per_app = [0u64; 2];
    for (k, name) in ["video.test", "chat.test"].iter().enumerate() {
        for scheme in ["http", "https"] {
            let url = format!("{scheme}://{name}/file");
            let s = rig.step(&format!("curl {url}"), |r| {
                r.fetch(&url, at[k], size);
            });
            s.all_in(AppIds::of(k).urr);
            assert!(s.tun.rx_bytes > size as u64, "{s:?}");
            per_app[k] += s.tun.bytes();
        }
    }
    let (tun, reported) = rig.check_total();
    let usage = rig.usage();
    for k in 0..2 {
        assert_eq!(
            usage[&AppIds::of(k).urr].total,
            per_app[k],
            "application {k}'s URR over the run"
        );
    }
    eprintln!(
        "TUN {} octets ({} up, {} down), {} packets; usage reports {} octets: default {}, video {}, chat {}",
        tun.bytes(),
        tun.tx_bytes,
        tun.rx_bytes,
        tun.packets(),
        reported,
        usage[&DEFAULT_URR].total,
        usage[&AppIds::of(0).urr].total,
        usage[&AppIds::of(1).urr].total
    );
    let detected = rig.detected();
    eprintln!("START reports for {detected:?}");
    for app in ["video", "chat"] {
        assert!(
            detected.iter().any(|d| d == app),
            "no START report with Application Detection Information for {app}: {:?}",
            rig.reports
        );
    }
    assert!(
        rig.upfd.check().contains("\"consistent\":true"),
        "{}",
        rig.upfd.check()
    );
}

/// chat's QER closes its gates: fetching from it fails (nothing comes back, its URR counts
/// nothing) while video, with a QER of MBR 2 Mbit/s, still works: UDP offered at 10 Mbit/s
/// from video's server is cut to the MBR (drops counted as `mbr_exceeded`), and what
/// passes of it and of curl's TCP download is at most the MBR over the time the step
/// actually took (the data path's clock) plus its burst; both are counted by video's URR
/// exactly. The rates are printed.
#[test]
fn closed_gate_blocks_one_application_and_mbr_paces_the_other() {
    if !root() {
        return;
    }
    let _serial = serial();
    let big = 1_000_000;
    let mut rig = Rig::start(
        "a-qer-",
        &[pfds("video", &["video.test"]), pfds("chat", &["chat.test"])],
        &["video:mbr=2000", "chat:gate=closed"],
        &[
            ("video.test", addr::DN_APPS[0]),
            ("chat.test", addr::DN_APPS[1]),
        ],
        &[("file", 10_000), ("big", big)],
    );
    let (video, chat) = (AppIds::of(0).urr, AppIds::of(1).urr);
    let mut at = Vec::new();
    rig.step("dig", |r| {
        at.push(r.dig("video.test"));
        at.push(r.dig("chat.test"));
    })
    .all_in(DEFAULT_URR);
    for scheme in ["http", "https"] {
        let url = format!("{scheme}://chat.test/file");
        let mut outcome = None;
        let s = rig.step(&format!("curl {url} (gate closed)"), |r| {
            outcome = Some(r.curl(&url, at[1], 3));
        });
        let c = outcome.expect("curl ran");
        assert!(!c.ok && c.size == 0, "{url} through a closed gate: {c:?}");
        eprintln!("  curl: {}", c.stderr);
        assert_eq!(s.tun.rx_bytes, 0, "nothing came back: {s:?}");
        assert!(s.tun.tx_packets >= 1, "the UE tried: {s:?}");
        let u = s.urr(chat);
        assert_eq!(u.downlink, 0, "{s:?}");
        assert!(u.uplink <= s.tun.tx_bytes, "{s:?}");
        assert_eq!(s.urr(video).total + s.urr(DEFAULT_URR).total, 0, "{s:?}");
    }
    // TCP through the MBR: curl's rate is what the UE sees; TCP against a policer (no
    // queue) backs off at each loss. What passed is bounded by the MBR over the step's
    // window (the coarse clock the data path meters with), whatever the machine's pace.
    const MBR_KBPS: u64 = 2000;
    let mbr = "upf_dropped_packets_total{reason=\"mbr_exceeded\"}";
    let mut got = None;
    let c0 = coarse_now();
    let s = rig.step("curl http://video.test/big (MBR 2 Mbit/s)", |r| {
        got = Some(r.fetch("http://video.test/big", at[0], big));
    });
    let tcp_window = coarse_now() - c0;
    s.all_in(video);
    let c = got.expect("curl ran");
    let tcp_passed = s.urr(video).downlink;
    let tcp_bound = mbr_bound(MBR_KBPS, tcp_window, 1500);
    assert!(
        tcp_passed <= tcp_bound,
        "TCP: {tcp_passed} octets down through an MBR of 2 Mbit/s in {tcp_window:?} (at most {tcp_bound})"
    );
    let tcp_bps = s.tun.rx_bytes as f64 * 8.0 / c.secs;
    // UDP offered at 10 Mbit/s from video's server for 4 s: cut to the MBR.
    let mut udp = None;
    let dropped0 = rig.upfd.metric(mbr);
    let c0 = coarse_now();
    let s = rig.step("iperf3 UDP 10 Mbit/s from video.test (MBR 2 Mbit/s)", |r| {
        udp = Some(r.iperf3_udp_down(at[0], 5401, 4, 10_000_000));
    });
    let udp_window = coarse_now() - c0;
    s.all_in(video);
    let dropped = rig.upfd.metric(mbr) - dropped0;
    let sum = &udp.expect("iperf3 ran")["end"]["sum"];
    let packets = sum["packets"].as_f64().expect("packets");
    let lost = sum["lost_packets"].as_f64().expect("lost_packets");
    let secs = sum["seconds"].as_f64().expect("seconds");
    let udp_passed = s.urr(video).downlink;
    let udp_bound = mbr_bound(MBR_KBPS, udp_window, 1228);
    assert!(packets > lost, "UDP: nothing passed: {sum}");
    assert!(
        dropped > 0,
        "UDP offered at 5 x the MBR, none dropped over it: {sum}"
    );
    assert!(
        udp_passed <= udp_bound,
        "UDP: {udp_passed} octets down through an MBR of 2 Mbit/s in {udp_window:?} (at most {udp_bound})"
    );
    let udp_bps = (packets - lost) * 1228.0 * 8.0 / secs;
    eprintln!(
        "MBR 2000 kbit/s: TCP (curl, {big} octets in {:.2} s) {:.3} Mbit/s of IP downlink \
         ({tcp_passed} octets in a {:.2} s step, bound {tcp_bound}); UDP offered {:.1} Mbit/s, \
         passed {:.3} Mbit/s (IP), {:.1} % dropped ({udp_passed} octets in a {:.2} s step, \
         bound {udp_bound}; {dropped} over the MBR)",
        c.secs,
        tcp_bps / 1e6,
        tcp_window.as_secs_f64(),
        packets * 1228.0 * 8.0 / secs / 1e6,
        udp_bps / 1e6,
        lost * 100.0 / packets,
        udp_window.as_secs_f64()
    );
    let s = rig.step("curl https://video.test/file", |r| {
        r.fetch("https://video.test/file", at[0], 10_000);
    });
    s.all_in(video);
}

/// Without DNS, a flow is classified from its first payload: a TLS ClientHello's SNI or
/// an HTTP request's Host (`curl --resolve` to dn's own address, which no answer names):
/// the handshake is the default PDRs', the rest the application's. Then PFD Management
/// replaces video's domain video.test with new.test: new flows to new.test are video's
/// (by Host, and by address once a DNS answer for new.test crossed), new flows to
/// video.test no longer are.
#[test]
fn pfd_change_applies_to_new_flows_and_sni_or_host_classify_without_dns() {
    if !root() {
        return;
    }
    let _serial = serial();
    let size = 50_000;
    let mut rig = Rig::start(
        "a-pfd-",
        &[pfds("video", &["video.test"]), pfds("chat", &["chat.test"])],
        &["video", "chat"],
        &[("new.test", addr::DN_APPS[2])],
        &[("file", size)],
    );
    let (video, chat) = (AppIds::of(0).urr, AppIds::of(1).urr);
    rig.step("SNI video.test (no DNS)", |r| {
        r.fetch("https://video.test/file", DN, size);
    })
    .handshake_then(video);
    rig.step("Host chat.test (no DNS)", |r| {
        r.fetch("http://chat.test/file", DN, size);
    })
    .handshake_then(chat);
    rig.step("Host new.test before the change", |r| {
        r.fetch("http://new.test/file", DN, size);
    })
    .all_in(DEFAULT_URR);
    let mut new_at = addr::DN_N6;
    rig.step("dig new.test before the change", |r| {
        new_at = r.dig("new.test");
    })
    .all_in(DEFAULT_URR);
    assert_eq!(new_at, addr::DN_APPS[2]);
    rig.step("HTTP to new.test's address before the change", |r| {
        r.fetch("http://new.test/file", new_at, size);
    })
    .all_in(DEFAULT_URR);

    let r = rig
        .smf
        .rt
        .block_on(rig.smf.smf.pfd_management(&[pfds("video", &["new.test"])]))
        .expect("PFD Management Response");
    assert!(r.cause.is_acceptance(), "PFD update rejected: {r:?}");

    rig.step("Host new.test after the change", |r| {
        r.fetch("http://new.test/file", DN, size);
    })
    .handshake_then(video);
    rig.step("SNI new.test after the change", |r| {
        r.fetch("https://new.test/file", DN, size);
    })
    .handshake_then(video);
    rig.step("dig new.test after the change", |r| {
        r.dig("new.test");
    })
    .all_in(DEFAULT_URR);
    rig.step("HTTPS to new.test's learned address", |r| {
        r.fetch("https://new.test/file", new_at, size);
    })
    .all_in(video);
    rig.step("SNI video.test after the change", |r| {
        r.fetch("https://video.test/file", DN, size);
    })
    .all_in(DEFAULT_URR);
    rig.step("Host chat.test still chat", |r| {
        r.fetch("http://chat.test/file", DN, size);
    })
    .handshake_then(chat);
    let (tun, reported) = rig.check_total();
    eprintln!(
        "TUN {} octets, {} packets; usage reports {reported} octets",
        tun.bytes(),
        tun.packets()
    );
}
