//! upfd end to end in the lab (`upfbench::lab`): the XDP data path on upf's n3 and n6,
//! sessions from the SMF emulator over the N4 veth, UEs from the gNB/UE emulator (a TUN
//! per UE in gnb), and ordinary tools as a phone's apps: ping, iperf3 TCP and UDP.
//!
//! Each test builds its own lab (prefix `e-<name>-`) and removes it; they run one at a
//! time. Root only: elsewhere each test says so and passes.

mod common;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use common::lab::{ping, root, run_bounded, serial, LabSmf, LabUpfd, UpfdOptions};
use upfbench::gnb::{Gnb, GnbConfig, UeSession};
use upfbench::lab::{addr, Lab, Ns};

fn gnb(lab: &Lab, sessions: &[UeSession]) -> Gnb {
    Gnb::start(
        GnbConfig {
            netns: Some(lab.ns(Ns::Gnb)),
            ..GnbConfig::default()
        },
        sessions.to_vec(),
    )
    .expect("starting the gNB/UE emulator")
}

fn ue(s: &UeSession) -> Ipv4Addr {
    s.ue_ip.expect("IPv4 UE")
}

/// iperf3 between a UE and the data network for `secs` seconds: `reverse` = downlink,
/// `udp_rate` = UDP at that rate (bit/s) with 1200-octet datagrams, else TCP. The JSON
/// summary of the client.
fn iperf3(
    lab: &Lab,
    ue: Ipv4Addr,
    port: u16,
    secs: u32,
    reverse: bool,
    udp_rate: Option<u64>,
) -> serde_json::Value {
    let mut server = lab.command(Ns::Dn, "iperf3");
    server
        .args(["-s", "-1", "-B", &addr::DN_N6.to_string()])
        .args(["-p", &port.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut server = server.spawn().expect("iperf3 server");
    let mut last = String::new();
    let end = Instant::now() + Duration::from_secs(60);
    let mut result = None;
    // The server is ready when a client gets through: retry refused connections.
    while result.is_none() && Instant::now() < end {
        let mut c = lab.command(Ns::Gnb, "iperf3");
        c.args(["-c", &addr::DN_N6.to_string(), "-B", &ue.to_string()])
            .args(["-p", &port.to_string(), "-t", &secs.to_string(), "-J"]);
        if reverse {
            c.arg("-R");
        }
        if let Some(r) = udp_rate {
            c.args(["-u", "-b", &r.to_string(), "-l", "1200"]);
        }
        let out = run_bounded(c, Duration::from_secs(u64::from(secs) + 60));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if v["end"]["sum_received"].is_object() || v["end"]["sum"].is_object() {
            result = Some(v);
        } else {
            last = format!(
                "{}: {:?} {}",
                out.status,
                v["error"],
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    result.unwrap_or_else(|| panic!("iperf3 to {ue}: {last}"))
}

/// Bits per second the receiving side got (TCP), or the UDP summary's rate: a figure,
/// printed, never asserted.
fn received_bps(v: &serde_json::Value) -> f64 {
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .or_else(|| v["end"]["sum"]["bits_per_second"].as_f64())
        .expect("iperf3 rate")
}

/// Octets the receiving side got (TCP), or the UDP summary's.
fn received_bytes(v: &serde_json::Value) -> u64 {
    v["end"]["sum_received"]["bytes"]
        .as_u64()
        .or_else(|| v["end"]["sum"]["bytes"].as_u64())
        .expect("iperf3 octets")
}

#[test]
fn ping_and_iperf3_from_several_ues_both_directions() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-tr-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    let mut smf = LabSmf::associate(&lab, |_| {});
    let sessions = smf.establish(3);
    smf.modify();
    let sessions = {
        let _ = sessions;
        smf.ue_sessions()
    };
    assert_eq!(sessions.len(), 3);
    let g = gnb(&lab, &sessions);
    let ues: Vec<Ipv4Addr> = sessions.iter().map(ue).collect();
    let base = TunBaseline::now(&lab, &upfd, &g, &ues);

    for s in &sessions {
        assert_eq!(
            ping(&lab, Ns::Gnb, Some(ue(s)), addr::DN_N6, 3),
            3,
            "UE {} -> DN",
            ue(s)
        );
        assert_eq!(ping(&lab, Ns::Dn, None, ue(s), 3), 3, "DN -> UE {}", ue(s));
    }
    let st = g.stats();
    for u in &st.ues {
        assert!(u.ul_packets >= 6 && u.dl_packets >= 6, "{st:?}");
    }

    // iperf3's rates are figures (printed); what is asserted is that traffic flowed and
    // that every packet is accounted for (below).
    let mut figures = Vec::new();
    for (i, s) in sessions.iter().take(2).enumerate() {
        for reverse in [false, true] {
            let port = 5201 + (i as u16) * 4 + u16::from(reverse);
            let v = iperf3(&lab, ue(s), port, 2, reverse, None);
            assert!(received_bytes(&v) > 0, "TCP through upfd: {}", v["end"]);
            let tcp = received_bps(&v);
            let udp = iperf3(&lab, ue(s), port + 2, 2, reverse, Some(20_000_000));
            let sum = &udp["end"]["sum"];
            assert!(received_bytes(&udp) > 0, "UDP through upfd: {sum}");
            let lost = sum["lost_percent"].as_f64().unwrap_or(100.0);
            figures.push(format!(
                "UE {} {}: TCP {:.0} Mbit/s, UDP 20 Mbit/s lost {lost:.2} %",
                ue(s),
                if reverse { "downlink" } else { "uplink" },
                tcp / 1e6
            ));
        }
    }
    let build = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    eprintln!(
        "through upfd ({build} build of upfd and the gNB/UE emulator):\n  {}",
        figures.join("\n  ")
    );

    // Everything the UEs sent and received crossed the XDP data path: each URR counted
    // exactly what its UE's TUN carried (every difference a counted loss outside upfd),
    // the forwarded counts are the URRs' sums, and there are no drops for reasons a
    // correct session never hits.
    assert_urrs_are_tun(&lab, &upfd, &g, &base, || 0);
    let m = upfd.metrics();
    for reason in ["no_pdr", "unknown_teid", "spoofed_source", "malformed_gtpu"] {
        let series = format!("upf_dropped_packets_total{{reason=\"{reason}\"}}");
        assert_eq!(common::lab::metric(&m, &series), 0, "{series}\n{m}");
    }
    let urrs: Vec<_> = ues.iter().map(|u| upfd.urr_of_ue(*u)).collect();
    let ul: u64 = urrs.iter().map(|u| u.ul_packets).sum();
    let dl: u64 = urrs.iter().map(|u| u.dl_packets).sum();
    assert_eq!(
        common::lab::metric(
            &m,
            "upf_datapath_packets_total{outcome=\"forwarded_uplink\"}"
        ),
        ul,
        "{m}"
    );
    assert_eq!(
        common::lab::metric(
            &m,
            "upf_datapath_packets_total{outcome=\"forwarded_downlink\"}"
        ),
        dl,
        "{m}"
    );
    // The TEIDs upfd chose and the UE addresses are found in their direct slots: the
    // rule sets the modification rewrote go back there on upfd's timer.
    for dir in ["uplink", "downlink"] {
        let in_slot = format!("upf_lookup_keys_in_slot{{direction=\"{dir}\"}}");
        let hashed = format!("upf_lookup_keys_slot_hashed{{direction=\"{dir}\"}}");
        assert_eq!(upfd.wait_metric(&in_slot, 3, WAIT), 3, "{in_slot}");
        assert_eq!(upfd.metric(&hashed), 0, "{hashed}");
    }
    let st = g.stop();
    assert_eq!((st.malformed, st.unknown_teid), (0, 0), "{st:?}");
    drop(smf);
    drop(upfd);
    lab.down().unwrap();
}

// ---------------------------------------------------------------------------------------
// Helpers for the tests below: raw packets, custom sessions.

use std::net::{IpAddr, SocketAddr};

use common::lab::{
    assert_urrs_are_tun, coarse_now, establish_custom, eventually, expect, expect_none, gpdu,
    mbr_bound, ping_within, udp_in, ue_session, LabLoss, TunBaseline,
};
use pfcp::ie::{
    apply_action, measurement_method, pfcpsm_req_flags, report_type, reporting_triggers,
    usage_report_trigger, FTeid, Flags, Interface, OuterHeaderCreation, OuterHeaderRemoval, Volume,
};
use pfcp::msg::{Msg, SessionDeletionRequest, SessionReportRequest, UsageReport};
use pfcp::CauseValue;
use upfbench::smf::{Session, SessionState};

/// IPv4/UDP around `payload` (checksums filled in).
fn udp4(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    capture::ip_udp_packet(src.into(), dst.into(), sport, dport, payload)
}

/// Up to 30 s: what a wait for something that will happen gives it.
const WAIT: Duration = Duration::from_secs(30);

/// The `k`-th datagram's payload: its sequence number and padding to `len` octets.
fn numbered(k: u32, len: usize) -> Vec<u8> {
    let mut p = k.to_be_bytes().to_vec();
    p.resize(len, 0xa5);
    p
}

fn seq_of(p: &[u8]) -> u32 {
    u32::from_be_bytes([p[0], p[1], p[2], p[3]])
}

/// A session record for the SMF emulator's request templates (index `i`: UE 10.45.0.1+i,
/// downlink TEID i + 1, CP SEID 0x5000 + i).
fn template(i: usize) -> Session {
    Session {
        index: i,
        cp_seid: 0x5000 + i as u64,
        ue_ip: Ipv4Addr::from(u32::from(addr::UE_POOL) + 1 + i as u32),
        gnb_teid: i as u32 + 1,
        up_fseid: None,
        n3_fteid: None,
        state: SessionState::Established,
    }
}

fn delete(smf: &LabSmf, up_seid: u64) -> Vec<UsageReport> {
    match smf.transact(
        &Msg::SessionDeletionRequest(SessionDeletionRequest { other: vec![] }),
        Some(up_seid),
    ) {
        Msg::SessionDeletionResponse(r) => {
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
            r.usage_reports
        }
        other => panic!("not a deletion response: {other:?}"),
    }
}

fn triggers(r: &UsageReport) -> Vec<u16> {
    r.usage_report_trigger.bits().collect()
}

// ---------------------------------------------------------------------------------------

/// QER MBR 10 Mbit/s each way, iperf3 UDP offering 50 Mbit/s for 5 s: upfd drops the
/// excess for `mbr_exceeded`, and what passes is at most the MBR over the time the
/// traffic actually took (measured with the data path's own clock) plus the burst, at
/// the IP layer (the QER meters IP packets: 1228 octets per 1200-octet datagram). The
/// URR counts exactly what the UE's TUN carried, the uplink's MBR drops included. The
/// rates themselves are printed.
#[test]
fn mbr_of_10_mbit_holds_under_50_mbit_udp() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-mbr-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    const MBR_KBPS: u64 = 10_000;
    let mut smf = LabSmf::associate(&lab, |c| c.mbr_kbps = MBR_KBPS);
    smf.establish(1);
    smf.modify();
    let sessions = smf.ue_sessions();
    let g = gnb(&lab, &sessions);
    let ue0 = ue(&sessions[0]);
    let mbr = "upf_dropped_packets_total{reason=\"mbr_exceeded\"}";
    let mut lines = Vec::new();
    for (reverse, port) in [(false, 5301), (true, 5302)] {
        let dir = if reverse { "downlink" } else { "uplink" };
        let base = TunBaseline::now(&lab, &upfd, &g, &[ue0]);
        let dropped_before = upfd.metric(mbr);
        let c0 = coarse_now();
        let v = iperf3(&lab, ue0, port, 5, reverse, Some(50_000_000));
        // The other direction carries only iperf3's few control packets, far below the
        // MBR: the drops are this direction's.
        let ul_dropped = || {
            if reverse {
                0
            } else {
                upfd.metric(mbr) - dropped_before
            }
        };
        let (urr, _) = assert_urrs_are_tun(&lab, &upfd, &g, &base, ul_dropped)[0];
        let window = coarse_now() - c0;
        let dropped = upfd.metric(mbr) - dropped_before;
        let sum = &v["end"]["sum"];
        let packets = sum["packets"].as_u64().expect("packets");
        let lost = sum["lost_packets"].as_u64().expect("lost_packets");
        let secs = sum["seconds"].as_f64().expect("seconds");
        assert!(packets > lost, "{dir}: nothing passed: {sum}");
        assert!(
            dropped > 0,
            "{dir}: 50 Mbit/s offered, none over the MBR: {sum}"
        );
        let passed = if reverse { urr.dl_bytes } else { urr.ul_bytes };
        let bound = mbr_bound(MBR_KBPS, window, 1228);
        assert!(
            passed <= bound,
            "{dir}: {passed} octets passed a {MBR_KBPS} kbit/s MBR in {window:?} (at most {bound})"
        );
        lines.push(format!(
            "{dir}: offered {:.1} Mbit/s, received {:.3} Mbit/s (IP), {:.1} % dropped; \
             {passed} octets passed in {:.2} s ({:.3} Mbit/s, bound {bound})",
            packets as f64 * 1228.0 * 8.0 / secs / 1e6,
            (packets - lost) as f64 * 1228.0 * 8.0 / secs / 1e6,
            lost as f64 * 100.0 / packets as f64,
            window.as_secs_f64(),
            passed as f64 * 8.0 / window.as_secs_f64() / 1e6
        ));
    }
    eprintln!("MBR 10 Mbit/s:\n  {}", lines.join("\n  "));
    drop(g);
}

/// Downlink FAR BUFF|NOCP: the first packet brings exactly one Downlink Data Report; the
/// UPF keeps `packets_per_session` (50) and counts the rest as dropped; FAR FORW releases
/// the 50 in order, and later packets follow them.
#[test]
fn buffering_notifies_once_and_releases_in_order() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-buf-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(
        &lab,
        &UpfdOptions {
            buffering: vec!["packets_per_session: 50".into()],
            ..UpfdOptions::default()
        },
    );
    let mut smf = LabSmf::associate(&lab, |c| c.dl_buffer = true);
    smf.establish(1);
    let s = smf.smf.sessions()[0].clone();
    let ue = UeSession {
        index: 0,
        ue_ip: Some(s.ue_ip),
        ue_ip6: None,
        gnb_teid: s.gnb_teid,
        ul_teid: s.n3_fteid.and_then(|f| f.teid).expect("UL TEID"),
        upf: IpAddr::V4(addr::UPF_N3),
    };
    let g = gnb(&lab, std::slice::from_ref(&ue));
    let rx = udp_in(&lab, Ns::Gnb, SocketAddr::new(s.ue_ip.into(), 7000));
    let tx = udp_in(&lab, Ns::Dn, SocketAddr::new(addr::DN_N6.into(), 0));
    let to = SocketAddr::new(s.ue_ip.into(), 7000);
    for k in 0..80 {
        tx.send_to(&numbered(k, 200), to).unwrap();
    }
    let mut reports = Vec::new();
    assert!(smf.wait_reports(&mut reports, 1, WAIT));
    assert_eq!(upfd.wait_metric("upf_buffered_packets", 50, WAIT), 50);
    // All 80 handled (50 kept, 30 dropped), then a while for a second report that must
    // not come.
    assert_eq!(
        upfd.wait_metric("upf_buffer_packets_total{event=\"dropped_full\"}", 30, WAIT),
        30
    );
    std::thread::sleep(Duration::from_millis(500));
    reports.extend(smf.reports());
    assert_eq!(reports.len(), 1, "one Downlink Data Report: {reports:?}");
    let r: &SessionReportRequest = &reports[0];
    assert!(r.report_type.get(report_type::DLDR), "{r:?}");
    let dldr = r
        .downlink_data_report
        .as_ref()
        .expect("Downlink Data Report");
    assert_eq!(dldr.pdr_ids, vec![2], "the downlink PDR");
    assert!(
        expect_none(&rx, Duration::from_millis(300)).is_empty(),
        "nothing delivered while buffering"
    );
    let m = upfd.metrics();
    assert_eq!(
        common::lab::metric(&m, "upf_buffer_packets_total{event=\"buffered\"}"),
        50,
        "{m}"
    );
    assert_eq!(
        common::lab::metric(&m, "upf_buffer_packets_total{event=\"dropped_full\"}"),
        30,
        "{m}"
    );

    smf.modify();
    let got = expect(&rx, 50, WAIT);
    let seqs: Vec<u32> = got.iter().map(|p| seq_of(p)).collect();
    assert_eq!(
        seqs,
        (0..50).collect::<Vec<u32>>(),
        "buffered packets in order"
    );
    for k in 80..85 {
        tx.send_to(&numbered(k, 200), to).unwrap();
    }
    let got = expect(&rx, 5, WAIT);
    let seqs: Vec<u32> = got.iter().map(|p| seq_of(p)).collect();
    assert_eq!(seqs, (80..85).collect::<Vec<u32>>(), "after the release");
    assert!(smf.reports().is_empty(), "no second Downlink Data Report");
    assert_eq!(
        upfd.wait_metric("upf_buffer_packets_total{event=\"released\"}", 50, WAIT),
        50
    );
    assert_eq!(upfd.wait_metric("upf_buffered_packets", 0, WAIT), 0);
    drop(g);
}

/// Volume threshold 100,000 octets on the session's URR: 84 uplink datagrams of 1200 IP
/// octets (100,800) cross it; the report says VOLTH with exactly 100,800 octets and 84
/// packets uplink, nothing downlink, and the deletion's final report adds nothing.
#[test]
fn volume_threshold_report_counts_exactly_what_crossed() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-vol-").unwrap().down_on_drop();
    let _upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    let mut smf = LabSmf::associate(&lab, |c| c.volume_threshold = 100_000);
    smf.establish(1);
    smf.modify();
    let sessions = smf.ue_sessions();
    let g = gnb(&lab, &sessions);
    let ue0 = ue(&sessions[0]);
    let sink = udp_in(&lab, Ns::Dn, SocketAddr::new(addr::DN_N6.into(), 7001));
    let tx = udp_in(&lab, Ns::Gnb, SocketAddr::new(ue0.into(), 0));
    for k in 0..84 {
        tx.send_to(
            &numbered(k, 1172),
            SocketAddr::new(addr::DN_N6.into(), 7001),
        )
        .unwrap();
        if k % 16 == 15 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let arrived = expect(&sink, 84, WAIT);
    assert_eq!(arrived.len(), 84, "every datagram crossed");
    let mut reports = Vec::new();
    assert!(smf.wait_reports(&mut reports, 1, WAIT));
    // A while for a second report that must not come.
    std::thread::sleep(Duration::from_millis(300));
    reports.extend(smf.reports());
    assert_eq!(reports.len(), 1, "{reports:?}");
    let r = &reports[0];
    assert!(r.report_type.get(report_type::USAR), "{r:?}");
    let u = &r.usage_reports[0];
    assert!(triggers(u).contains(&usage_report_trigger::VOLTH), "{u:?}");
    let v = u.volume_measurement.as_ref().expect("Volume Measurement");
    assert_eq!(
        (v.total, v.uplink, v.downlink),
        (Some(84 * 1200), Some(84 * 1200), Some(0)),
        "{v:?}"
    );
    assert_eq!(
        (v.total_packets, v.uplink_packets),
        (Some(84), Some(84)),
        "{v:?}"
    );
    let s = smf.smf.sessions()[0].clone();
    let last = delete(&smf, s.up_fseid.expect("UP F-SEID").seid);
    let rest: u64 = last
        .iter()
        .filter_map(|u| u.volume_measurement.as_ref()?.total)
        .sum();
    assert_eq!(rest, 0, "the deletion's report: {last:?}");
    drop(g);
}

/// Volume quota 60,000 octets: 50 datagrams of 1200 IP octets pass, then the data path
/// stops the session on its own (drop reason quota_exhausted) and upfd reports VOLQU.
#[test]
fn volume_quota_stops_forwarding() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-quo-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    let smf = LabSmf::associate(&lab, |_| {});
    let s = template(0);
    let (_up, fteids) = establish_custom(&smf, &s, |req| {
        let u = &mut req.create_urrs[0];
        u.measurement_method = Flags::from_bits(&[measurement_method::VOLUM], 1);
        u.reporting_triggers = Flags::from_bits(&[reporting_triggers::VOLQU], 3);
        u.volume_threshold = None;
        u.volume_quota = Some(Volume {
            spare: 0,
            total: Some(60_000),
            uplink: None,
            downlink: None,
        });
    });
    let ul = fteids
        .iter()
        .find(|(id, _)| *id == 1)
        .expect("PDR 1 F-TEID")
        .1;
    let g = gnb(&lab, &[ue_session(&s, ul)]);
    let sink = udp_in(&lab, Ns::Dn, SocketAddr::new(addr::DN_N6.into(), 7002));
    let tx = udp_in(&lab, Ns::Gnb, SocketAddr::new(s.ue_ip.into(), 0));
    for k in 0..100 {
        tx.send_to(
            &numbered(k, 1172),
            SocketAddr::new(addr::DN_N6.into(), 7002),
        )
        .unwrap();
        if k % 16 == 15 {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    let mut arrived = expect(&sink, 50, WAIT);
    // All 100 handled (the last 50 dropped), then anything still on its way.
    assert_eq!(
        upfd.wait_metric(
            "upf_dropped_packets_total{reason=\"quota_exhausted\"}",
            50,
            WAIT
        ),
        50
    );
    arrived.extend(expect_none(&sink, Duration::from_millis(300)));
    assert_eq!(arrived.len(), 50, "60,000 octets of quota: 50 x 1200");
    let mut reports = Vec::new();
    assert!(smf.wait_reports(&mut reports, 1, WAIT));
    let u = &reports[0].usage_reports[0];
    assert!(triggers(u).contains(&usage_report_trigger::VOLQU), "{u:?}");
    assert_eq!(
        u.volume_measurement.as_ref().and_then(|v| v.total),
        Some(60_000),
        "{u:?}"
    );
    // Still stopped.
    tx.send_to(
        &numbered(100, 1172),
        SocketAddr::new(addr::DN_N6.into(), 7002),
    )
    .unwrap();
    assert_eq!(
        upfd.wait_metric(
            "upf_dropped_packets_total{reason=\"quota_exhausted\"}",
            51,
            WAIT
        ),
        51
    );
    assert!(expect_none(&sink, Duration::from_millis(300)).is_empty());
    drop(g);
}

/// Switch session `s`'s downlink FAR (UP SEID `up`) to `to`, asking for End Markers on
/// the old path (SNDEM, TS 29.244 clause 5.9); the UPF must accept.
fn switch_path(smf: &LabSmf, s: &Session, up: u64, to: OuterHeaderCreation) {
    let mut req = smf.smf.modification_request(s);
    {
        let f = req.update_fars[0]
            .update_forwarding_parameters
            .as_mut()
            .expect("template");
        f.outer_header_creation = Some(to);
        f.pfcpsm_req_flags = Some(Flags::from_bits(&[pfcpsm_req_flags::SNDEM], 1));
    }
    match smf.transact(&Msg::SessionModificationRequest(req), Some(up)) {
        Msg::SessionModificationResponse(r) => {
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}")
        }
        other => panic!("{other:?}"),
    }
}

/// Path switch: Update FAR with a new gNB F-TEID and SNDEM. The old gNB gets one End
/// Marker with the old TEID, new downlink G-PDUs go to the new gNB address with the new
/// TEID and a DL PDU Session Container with QFI 1.
#[test]
fn path_switch_sends_end_marker_to_old_gnb() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-em-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    let mut smf = LabSmf::associate(&lab, |_| {});
    smf.establish(1);
    smf.modify();
    let sessions = smf.ue_sessions();
    let g = gnb(&lab, &sessions);
    let ue0 = ue(&sessions[0]);
    assert_eq!(ping(&lab, Ns::Dn, None, ue0, 2), 2);

    let new_gnb = addr::GNB_N3_EXTRA[0];
    let target = udp_in(&lab, Ns::Gnb, SocketAddr::new(new_gnb.into(), 2152));
    let s = smf.smf.sessions()[0].clone();
    switch_path(
        &smf,
        &s,
        s.up_fseid.unwrap().seid,
        OuterHeaderCreation::gtpu_ipv4(0x7777, new_gnb),
    );
    assert!(
        eventually(WAIT, || g.stats().end_markers == 1),
        "End Marker at the old gNB: {:?}",
        g.stats()
    );
    assert_eq!(
        upfd.wait_metric(
            "upf_slowpath_gtpu_messages_total{kind=\"end_marker_sent\"}",
            1,
            WAIT
        ),
        1
    );

    let dn = udp_in(&lab, Ns::Dn, SocketAddr::new(addr::DN_N6.into(), 0));
    dn.send_to(b"after the switch", SocketAddr::new(ue0.into(), 9))
        .unwrap();
    // upfd also starts path management towards the new peer (an Echo Request, TS 29.281
    // clause 7.2.1): look for the G-PDU among what arrives.
    let mut got = Vec::new();
    let end = Instant::now() + WAIT;
    while !got.iter().any(|d: &Vec<u8>| gtpu::parse_gpdu(d).is_ok()) && Instant::now() < end {
        got.extend(expect(&target, 1, Duration::from_millis(500)));
    }
    let g_pdu = got
        .iter()
        .find(|d| gtpu::parse_gpdu(d).is_ok())
        .unwrap_or_else(|| panic!("no G-PDU at the new gNB: {got:?}"));
    let info = gtpu::parse_gpdu(g_pdu).unwrap();
    assert_eq!((info.teid, info.qfi), (0x7777, Some(1)));
    assert!(info.payload(g_pdu).ends_with(b"after the switch"));
    let st = g.stop();
    assert_eq!(st.end_markers, 1);
}

/// An N9 hop: the uplink FAR forwards to another UPF (GTP-U/UDP/IPv4 towards its N9
/// address) and the downlink PDR takes G-PDUs on this UPF's N9 F-TEID. The other UPF is
/// emulated in dn on a separate link (n9): it answers each ICMP echo request it receives
/// in a G-PDU with the echo reply in a G-PDU, so a UE's ping succeeds only if both
/// directions cross N9.
#[test]
fn n9_hop_carries_ping_both_ways() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-n9-").unwrap().down_on_drop();
    let (upf_n9, psa_n9) = (Ipv4Addr::new(192, 168, 9, 2), Ipv4Addr::new(192, 168, 9, 1));
    add_n9_link(&lab, upf_n9, psa_n9);
    let upfd = LabUpfd::start(
        &lab,
        &UpfdOptions {
            n9: Some((upf_n9, "n9".into())),
            ..UpfdOptions::default()
        },
    );
    let smf = LabSmf::associate(&lab, |_| {});
    let s = template(0);
    const PSA_TEID: u32 = 0x9001;
    let (_up, fteids) = establish_custom(&smf, &s, |req| {
        let far = req
            .create_fars
            .iter_mut()
            .find(|f| f.far_id == 1)
            .expect("FAR 1");
        far.forwarding_parameters
            .as_mut()
            .expect("FAR 1 forwards")
            .outer_header_creation = Some(OuterHeaderCreation::gtpu_ipv4(PSA_TEID, psa_n9));
        let dl = req
            .create_pdrs
            .iter_mut()
            .find(|p| p.pdr_id == 2)
            .expect("PDR 2");
        dl.pdi.source_interface = Interface::CORE;
        dl.pdi.local_fteid = Some(FTeid::choose(true, false, None));
        dl.outer_header_removal = Some(OuterHeaderRemoval {
            description: 0,
            ext_header_deletion: None,
        });
        // FAR 2 forwards to the gNB right away.
        let far2 = req
            .create_fars
            .iter_mut()
            .find(|f| f.far_id == 2)
            .expect("FAR 2");
        far2.apply_action = Flags::from_bits(&[apply_action::FORW], 2);
    });
    let ul = fteids.iter().find(|(id, _)| *id == 1).expect("PDR 1").1;
    let n9 = fteids.iter().find(|(id, _)| *id == 2).expect("PDR 2").1;
    assert_eq!(n9.ipv4, Some(upf_n9), "the N9 F-TEID is on the N9 address");
    let g = gnb(&lab, &[ue_session(&s, ul)]);

    let psa = udp_in(&lab, Ns::Dn, SocketAddr::new(psa_n9.into(), 2152));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let psa_thread = {
        let (stop, seen) = (stop.clone(), seen.clone());
        let n9_teid = n9.teid.unwrap();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 4096];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((n, from)) = psa.recv_from(&mut buf) else {
                    continue;
                };
                let Ok(info) = gtpu::parse_gpdu(&buf[..n]) else {
                    continue;
                };
                seen.lock().unwrap().push((info.teid, info.qfi, from));
                if let Some(reply) = echo_reply(info.payload(&buf[..n])) {
                    let out = gpdu(n9_teid, None, &reply);
                    let _ = psa.send_to(&out, SocketAddr::new(upf_n9.into(), 2152));
                }
            }
        })
    };
    let replies = ping(&lab, Ns::Gnb, Some(s.ue_ip), addr::DN_HOSTS[0], 3);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    psa_thread.join().unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(replies, 3, "ping over N9; the PSA saw {seen:?}");
    assert!(seen.len() >= 3);
    for (teid, _qfi, from) in &seen {
        assert_eq!(*teid, PSA_TEID);
        assert_eq!(from.ip(), IpAddr::V4(upf_n9), "sent from the N9 address");
    }
    assert!(eventually(WAIT, || upfd
        .metric("upf_datapath_packets_total{outcome=\"forwarded_n9\"}")
        >= 3));
    let st = g.stop();
    assert!(st.ues[0].dl_packets >= 3, "{st:?}");
}

/// A veth n9 between upf and dn, fixed MACs, permanent neighbours, XDP_PASS on the dn end.
fn add_n9_link(lab: &Lab, upf: Ipv4Addr, psa: Ipv4Addr) {
    let (upf_mac, psa_mac) = ("02:00:00:00:09:02", "02:00:00:00:09:01");
    let dn = lab.ns(Ns::Dn);
    lab.ip(
        Ns::Upf,
        &[
            "link", "add", "n9", "address", upf_mac, "type", "veth", "peer", "name", "n9",
            "address", psa_mac, "netns", &dn,
        ],
    )
    .unwrap();
    for (ns, me, peer, mac) in [(Ns::Upf, upf, psa, psa_mac), (Ns::Dn, psa, upf, upf_mac)] {
        lab.ip(ns, &["addr", "add", &format!("{me}/24"), "dev", "n9"])
            .unwrap();
        lab.ip(ns, &["link", "set", "n9", "up"]).unwrap();
        lab.ip(
            ns,
            &[
                "neigh",
                "replace",
                &peer.to_string(),
                "lladdr",
                mac,
                "dev",
                "n9",
                "nud",
                "permanent",
            ],
        )
        .unwrap();
    }
    let obj = std::env::temp_dir().join(format!("upfd-lab-pass-{}.o", std::process::id()));
    std::fs::write(&obj, bench_bpf::PASS_OBJECT).unwrap();
    lab.ip(
        Ns::Dn,
        &[
            "link",
            "set",
            "dev",
            "n9",
            "xdpdrv",
            "obj",
            obj.to_str().unwrap(),
            "sec",
            "xdp",
        ],
    )
    .unwrap();
    let _ = std::fs::remove_file(&obj);
}

/// The ICMPv4 echo reply to an echo request (addresses swapped), or None.
fn echo_reply(p: &[u8]) -> Option<Vec<u8>> {
    if p.len() < 28 || p[0] >> 4 != 4 || p[9] != 1 {
        return None;
    }
    let ihl = usize::from(p[0] & 15) * 4;
    if p.len() < ihl + 8 || p[ihl] != 8 {
        return None;
    }
    let mut r = p.to_vec();
    r[12..16].copy_from_slice(&p[16..20]);
    r[16..20].copy_from_slice(&p[12..16]);
    r[8] = 64;
    r[10..12].copy_from_slice(&[0, 0]);
    let c = capture::checksum(&r[..ihl], 0);
    r[10..12].copy_from_slice(&c.to_be_bytes());
    r[ihl] = 0;
    r[ihl + 2..ihl + 4].copy_from_slice(&[0, 0]);
    let c = capture::checksum(&r[ihl..], 0);
    r[ihl + 2..ihl + 4].copy_from_slice(&c.to_be_bytes());
    Some(r)
}

/// GTP-U signalling and bad input on N3: an Echo Request is answered with a Recovery IE;
/// G-PDUs with a session's TEID but a source address that is not the UE's are dropped as
/// spoofed; G-PDUs for an unknown TEID are dropped and counted, and Error Indications go
/// back at no more than `error_indications_per_sec` (burst of as many), never one per
/// packet; a downlink packet too big for N3 once encapsulated is dropped and counted.
#[test]
fn echo_spoofing_unknown_teid_and_error_indication_rate() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-sig-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(
        &lab,
        &UpfdOptions {
            error_indications_per_sec: 10,
            ..UpfdOptions::default()
        },
    );
    let mut smf = LabSmf::associate(&lab, |_| {});
    smf.establish(1);
    smf.modify();
    let sessions = smf.ue_sessions();
    let peer = udp_in(
        &lab,
        Ns::Gnb,
        SocketAddr::new(addr::GNB_N3_EXTRA[1].into(), 2152),
    );
    let upf = SocketAddr::new(addr::UPF_N3.into(), 2152);

    // Echo.
    peer.send_to(&gtpu::Message::echo_request(77).to_vec().unwrap(), upf)
        .unwrap();
    let got = expect(&peer, 1, WAIT);
    assert_eq!(got.len(), 1, "Echo Response");
    match gtpu::Message::parse(&got[0]).unwrap() {
        gtpu::Message::EchoResponse { header, body } => {
            assert_eq!(header.sequence_number, Some(77));
            let _ = body;
        }
        other => panic!("{other:?}"),
    }

    // Spoofed inner source on a valid TEID.
    let dn = udp_in(&lab, Ns::Dn, SocketAddr::new(addr::DN_N6.into(), 7003));
    let spoofed = udp4(
        Ipv4Addr::new(10, 99, 0, 1),
        addr::DN_N6,
        4000,
        7003,
        b"spoofed",
    );
    for _ in 0..10 {
        peer.send_to(&gpdu(sessions[0].ul_teid, Some(1), &spoofed), upf)
            .unwrap();
    }
    assert_eq!(
        upfd.wait_metric(
            "upf_dropped_packets_total{reason=\"spoofed_source\"}",
            10,
            WAIT
        ),
        10
    );
    assert!(
        expect_none(&dn, Duration::from_millis(300)).is_empty(),
        "spoofed packet delivered"
    );
    // The same with the UE's own address goes through (the TEID is right).
    let good = udp4(ue(&sessions[0]), addr::DN_N6, 4000, 7003, b"genuine");
    peer.send_to(&gpdu(sessions[0].ul_teid, Some(1), &good), upf)
        .unwrap();
    assert_eq!(expect(&dn, 1, WAIT).len(), 1);

    // Unknown TEID: 300 G-PDUs in a burst, then 300 more a second later. The data path
    // counts each as a drop and hands a bounded number to upfd, which answers some with
    // Error Indications and counts the rest as suppressed: wait until every one is
    // accounted for, then bound the Error Indications by the time that took.
    let slow = |kind: &str| format!("upf_slowpath_gtpu_messages_total{{kind=\"{kind}\"}}");
    let to_slowpath = "upf_datapath_packets_total{outcome=\"to_slowpath\"}";
    let handled = |m: &str| {
        common::lab::metric(m, &slow("error_indication_sent"))
            + common::lab::metric(m, &slow("error_indication_suppressed"))
    };
    let m = upfd.metrics();
    let (passed0, handled0) = (common::lab::metric(&m, to_slowpath), handled(&m));
    let (loss0, socket0) = (LabLoss::read(&lab), gtpu_socket_drops(upfd.pid()));
    let inner = udp4(ue(&sessions[0]), addr::DN_N6, 4000, 7003, b"x");
    let start = Instant::now();
    for round in 0..2 {
        for _ in 0..300 {
            peer.send_to(&gpdu(0xdead_beef, Some(1), &inner), upf)
                .unwrap();
        }
        if round == 0 {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    // What gnb's n3 could not hand to upf (its ring full) never reached upfd.
    let lost = LabLoss::read(&lab)
        .since(&loss0)
        .before_upfd(Direction::Uplink);
    let unknown = "upf_dropped_packets_total{reason=\"unknown_teid\"}";
    assert_eq!(upfd.wait_metric(unknown, 600 - lost, WAIT), 600 - lost);
    let mut last = (0, 0, 0);
    let settled = eventually(WAIT, || {
        let m = upfd.metrics();
        last = (
            common::lab::metric(&m, to_slowpath) - passed0,
            handled(&m) - handled0,
            gtpu_socket_drops(upfd.pid()) - socket0,
        );
        last.0 == last.1 + last.2
    });
    let elapsed = start.elapsed().as_secs_f64();
    assert!(
        settled,
        "handed to upfd, handled, dropped by its socket: {last:?}"
    );
    let sent = upfd.metric(&slow("error_indication_sent"))
        - common::lab::metric(&m, &slow("error_indication_sent"));
    let eis = expect(&peer, sent as usize, WAIT);
    assert_eq!(
        eis.len() as u64,
        sent,
        "every Error Indication sent arrived"
    );
    assert!(
        expect_none(&peer, Duration::from_millis(300)).is_empty(),
        "more than upfd counted"
    );
    assert!(expect_none(&dn, Duration::from_millis(100)).is_empty());
    let bound = 10.0 + 10.0 * elapsed;
    assert!(
        sent > 0 && sent as f64 <= bound,
        "{sent} Error Indications in {elapsed:.2} s (bound {bound:.0})"
    );
    for e in &eis {
        match gtpu::Message::parse(e).unwrap() {
            gtpu::Message::ErrorIndication { body, .. } => {
                assert_eq!(body.teid_data_i, 0xdead_beef);
                assert_eq!(body.peer_address, IpAddr::V4(addr::UPF_N3));
            }
            other => panic!("not an Error Indication: {other:?}"),
        }
    }
    eprintln!(
        "600 G-PDUs with an unknown TEID ({lost} lost before upfd): {} handed to upfd, {sent} Error Indications in {elapsed:.2} s",
        last.0
    );
    assert!(upfd.metric(&slow("error_indication_suppressed")) > 0);

    // A downlink packet of the N3 MTU cannot take the 36 octets of GTP-U/UDP/IPv4 and
    // container: dropped and counted (not fragmented, not passed to the kernel).
    let big = udp_in(&lab, Ns::Dn, SocketAddr::new(addr::DN_N6.into(), 0));
    big.send_to(&[0u8; 1472], SocketAddr::new(ue(&sessions[0]).into(), 9))
        .unwrap();
    let mtu = "upf_dropped_packets_total{reason=\"mtu_exceeded\"}";
    assert_eq!(upfd.wait_metric(mtu, 1, WAIT), 1);
    big.send_to(&[0u8; 1400], SocketAddr::new(ue(&sessions[0]).into(), 9))
        .unwrap();
    assert!(eventually(WAIT, || upfd.metric(
        "upf_datapath_packets_total{outcome=\"forwarded_downlink\"}"
    ) >= 1));
    assert_eq!(upfd.metric(mtu), 1);
}

/// Datagrams upfd's GTP-U socket (N3, port 2152) dropped (its receive buffer full), from
/// /proc/PID/net/udp.
fn gtpu_socket_drops(pid: u32) -> u64 {
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/udp")).unwrap_or_default();
    let n3 = format!("{:08X}:0868", u32::from_le_bytes(addr::UPF_N3.octets()));
    table
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.get(1) == Some(&n3.as_str())).then(|| f.last()?.parse::<u64>().ok())?
        })
        .sum()
}

/// The sockets a process has bound or listens on, from /proc/PID/net (its namespace's
/// tables) and /proc/PID/fd (which of those are its own): "udp 192.168.4.2:8805",
/// "tcp 192.168.4.2:9100" (TCP in LISTEN only; IPv4 tables: the lab has no IPv6 N4).
fn listening(pid: u32) -> Vec<String> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("reading upfd's fds")
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    let mut out = Vec::new();
    for (proto, file) in [
        ("udp", "udp"),
        ("tcp", "tcp"),
        ("udp6", "udp6"),
        ("tcp6", "tcp6"),
    ] {
        let table = std::fs::read_to_string(format!("/proc/{pid}/net/{file}")).unwrap();
        for l in table.lines().skip(1) {
            let f: Vec<&str> = l.split_whitespace().collect();
            // sl local rem st tx:rx tr:when retrnsmt uid timeout inode
            if f.len() < 10 || !inodes.iter().any(|i| i == f[9]) {
                continue;
            }
            if proto.starts_with("tcp") && f[3] != "0A" {
                continue;
            }
            let (a, port) = f[1].split_once(':').unwrap();
            let port = u16::from_str_radix(port, 16).unwrap();
            let addr = if a.len() == 8 {
                let v = u32::from_str_radix(a, 16).unwrap();
                Ipv4Addr::from(v.to_le_bytes()).to_string()
            } else {
                format!("[{a}]")
            };
            out.push(format!("{proto} {addr}:{port}"));
        }
    }
    out.sort();
    out
}

/// TS 33.117 clauses 4.3.2.1 / 4.3.2.2 / 4.4.2 (no unnecessary services, restricted
/// reachability, port scanning): upfd listens on exactly the configured ports and
/// addresses: PFCP on n4.address:8805, GTP-U on its N3 address:2152, the API on
/// api.listen, nothing on a wildcard address.
/// TS 33.117 clause 4.2.6.2.4 (GTP-U filtering), TS 33.513 clause 4.2.2: what a UE sends
/// through its tunnel never reaches the core network's own functions: PFCP inside
/// GTP-U (to upfd's N4 address or to any host), GTP-U inside GTP-U, and any packet to
/// upfd's own addresses are dropped in XDP and counted (`core_protocol`, `to_upf`),
/// while the session's ordinary traffic goes on.
#[test]
fn scas_only_configured_ports_and_no_core_protocols_through_the_tunnel() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-scas-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    assert_eq!(
        listening(upfd.pid()),
        vec![
            format!("tcp {}", common::lab::API),
            format!("udp {}:2152", addr::UPF_N3),
            format!("udp {}:8805", addr::UPF_N4),
        ],
        "upfd's sockets"
    );

    let mut smf = LabSmf::associate(&lab, |_| {});
    smf.establish(1);
    smf.modify();
    let s = &smf.ue_sessions()[0];
    let peer = udp_in(
        &lab,
        Ns::Gnb,
        SocketAddr::new(addr::GNB_N3_EXTRA[1].into(), 2152),
    );
    let upf = SocketAddr::new(addr::UPF_N3.into(), 2152);
    let send = |inner: &[u8]| {
        peer.send_to(&gpdu(s.ul_teid, Some(1), inner), upf).unwrap();
    };
    // Listeners in dn on the core protocols' ports and an ordinary one.
    let dn_pfcp = udp_in(&lab, Ns::Dn, SocketAddr::new(addr::DN_N6.into(), 8805));
    let dn_gtpu = udp_in(&lab, Ns::Dn, SocketAddr::new(addr::DN_N6.into(), 2152));
    let dn = udp_in(&lab, Ns::Dn, SocketAddr::new(addr::DN_N6.into(), 7003));
    let deletion = pfcp_samples::corpus()
        .into_iter()
        .find(|x| x.bytes[1] == pfcp::message::message_type::SESSION_SET_DELETION_REQUEST)
        .expect("a Session Set Deletion Request sample")
        .bytes;
    let ue_addr = ue(s);
    // PFCP smuggled to upfd's N4 and to a host behind N6; GTP-U in GTP-U to the DN's
    // 2152 and to upfd's own N3 address.
    send(&udp4(ue_addr, addr::UPF_N4, 8805, 8805, &deletion));
    send(&udp4(ue_addr, addr::DN_N6, 8805, 8805, &deletion));
    let nested = gpdu(0x1234, None, &udp4(ue_addr, addr::DN_N6, 1, 7003, b"inner"));
    send(&udp4(ue_addr, addr::DN_N6, 2152, 2152, &nested));
    send(&udp4(ue_addr, addr::UPF_N3, 2152, 2152, &nested));
    // Ordinary ports, but upfd's own addresses (N4 and API, N3, N6).
    for a in [addr::UPF_N4, addr::UPF_N3, addr::UPF_N6] {
        send(&udp4(ue_addr, a, 4000, 9100, b"to the UPF"));
    }
    // Every one handled (dropped and counted), then a while for any that got through.
    assert_eq!(
        upfd.wait_metric(
            "upf_dropped_packets_total{reason=\"core_protocol\"}",
            4,
            WAIT
        ),
        4
    );
    assert_eq!(
        upfd.wait_metric("upf_dropped_packets_total{reason=\"to_upf\"}", 2, WAIT),
        2
    );
    for (sock, what) in [(&dn_pfcp, "PFCP"), (&dn_gtpu, "GTP-U"), (&dn, "to the UPF")] {
        assert!(
            expect_none(sock, Duration::from_millis(300)).is_empty(),
            "{what} through the tunnel reached dn"
        );
    }
    // The session is untouched and still forwards its ordinary traffic.
    send(&udp4(ue_addr, addr::DN_N6, 4000, 7003, b"genuine"));
    assert_eq!(expect(&dn, 1, WAIT).len(), 1);
    assert_eq!(upfd.metric("upf_sessions"), 1);
}

// ---------------------------------------------------------------------------------------
// The capacity generators through upfd (upfbench capacity's rig).

use upfbench::capacity::models::Mix;
use upfbench::capacity::rig::{GenSession, Rig};
use upfbench::report::Direction;

/// The capacity rig's generators and sinks, loaded with the SMF emulator's sessions,
/// upf's forwarding pinned to its CPU.
fn rig_for(lab: &Lab, smf: &LabSmf) -> Rig {
    let sessions: Vec<GenSession> = smf
        .smf
        .sessions()
        .iter()
        .map(|s| GenSession {
            teid: s.n3_fteid.and_then(|f| f.teid).expect("uplink TEID"),
            ue: s.ue_ip,
        })
        .collect();
    let mut rig = Rig::new(lab, 0, 1, 1000, true).expect("sinks");
    rig.pin_forwarder();
    rig.set_sessions(&sessions).unwrap();
    rig
}

/// Every session of the SMF emulator deleted; the final usage each URR reported, in
/// session order: packets per direction ([uplink, downlink]) and the Volume
/// Measurement.
fn delete_all(smf: &LabSmf) -> ([Vec<u64>; 2], Vec<pfcp::ie::VolumeMeasurement>) {
    let mut packets = [Vec::new(), Vec::new()];
    let mut volumes = Vec::new();
    for (i, s) in smf.smf.sessions().iter().enumerate() {
        let reports = delete(smf, s.up_fseid.expect("UP F-SEID").seid);
        assert_eq!(reports.len(), 1, "session {i}: {reports:?}");
        let v = reports[0].volume_measurement.expect("Volume Measurement");
        packets[0].push(v.uplink_packets.unwrap_or(0));
        packets[1].push(v.downlink_packets.unwrap_or(0));
        volumes.push(v);
    }
    (packets, volumes)
}

/// One direction of the rig's traffic through upfd, every packet accounted for by a
/// counter that names where it went. Per session, upfd counted (`counted`: its URRs) at
/// most what the generator sent and at least what the sink received. What upfd did not
/// count, the veths before it dropped (`loss.before_upfd`: never a packet upfd saw and
/// lost uncounted); what it counted and the sink did not receive, the veths after it
/// (`loss.after_upfd`). Where a veth lost nothing, that side is exact per session.
fn assert_accounted(d: Direction, sent: &[u64], counted: &[u64], got: &[u64], loss: &LabLoss) {
    let n = sent.len();
    assert_eq!((counted.len(), got.len()), (n, n), "{d}: sessions");
    let (before, after) = (loss.before_upfd(d), loss.after_upfd(d));
    let sum = |v: &[u64]| v.iter().sum::<u64>();
    let (s, c, g) = (sum(sent), sum(counted), sum(got));
    let detail = || {
        format!(
            "{d}: sent {s}, counted by upfd {c}, received {g}; lost before upfd {before}, \
             after {after} ({loss:?})\n  sent     {sent:?}\n  counted  {counted:?}\n  \
             received {got:?}"
        )
    };
    for i in 0..n {
        assert!(
            got[i] <= counted[i] && counted[i] <= sent[i],
            "session {i}: {}",
            detail()
        );
    }
    assert_eq!(
        s - c,
        before,
        "not counted by upfd = lost before it: {}",
        detail()
    );
    assert_eq!(
        c - g,
        after,
        "counted, not received = lost after upfd: {}",
        detail()
    );
    if before == 0 {
        assert_eq!(counted, sent, "{}", detail());
    }
    if after == 0 {
        assert_eq!(got, counted, "{}", detail());
    }
}

/// The XDP generators of `upfbench capacity` through upfd, both directions at once,
/// 100 sessions, exactly 100 packets each way per session (10,000 at 20,000 packets/s,
/// however long that takes): upfd drops none, and every packet is accounted for per
/// session and direction ([`assert_accounted`]: the sinks count per session from the
/// payload, the URRs at deletion).
#[test]
fn generators_through_upfd_count_exactly_per_session() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-gen-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    let mut smf = LabSmf::associate(&lab, |_| {});
    smf.establish(100);
    let mut rig = rig_for(&lab, &smf);
    let mix = Mix {
        name: "test",
        sizes: vec![(100, 3), (1000, 1)],
    };
    let loss0 = LabLoss::read(&lab);
    let t = rig
        .trial_count(
            &[
                (Direction::Uplink, &mix, Some(20_000)),
                (Direction::Downlink, &mix, Some(20_000)),
            ],
            10_000,
            Duration::from_secs(120),
        )
        .unwrap();
    let loss = LabLoss::read(&lab).since(&loss0);
    assert!(upfd.drops().is_empty(), "upfd dropped: {:?}", upfd.drops());
    let mut per = Vec::new();
    for d in Direction::BOTH {
        let (sent, got) = rig.per_session(d).unwrap();
        assert_eq!(t.sent[d as usize], 10_000, "{d}: all sent");
        assert_eq!(sent, vec![100; 100], "{d}: round robin");
        assert!(t.latency[d as usize].is_some(), "{d}: latency recorded");
        per.push((sent, got[..100].to_vec()));
    }
    let (counted, _) = delete_all(&smf);
    for d in Direction::BOTH {
        let (sent, got) = &per[d as usize];
        assert_accounted(d, sent, &counted[d as usize], got, &loss);
        eprintln!(
            "{d}: 10,000 sent in {:.2} s, {} received; lost before upfd {}, after {}",
            t.elapsed[d as usize].as_secs_f64(),
            t.received[d as usize],
            loss.before_upfd(d),
            loss.after_upfd(d)
        );
    }
    rig.close().unwrap();
}

/// The data path caches next hops (bpf/include/egress.h) for up to a second; a routing
/// change must apply to the next packet once upfd has heard of it (it bumps the cache's
/// generation: `upf_nexthop_cache_invalidations_total`). A blackhole route to the data
/// network host added in upf: the next datagram, well within the second, is dropped as
/// "no route"; the route removed: datagrams pass again. A policy rule for one UE's
/// source address: that UE's packets follow it, the other UE's do not.
#[test]
fn routing_change_applies_to_the_next_packet() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-rt-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    let mut smf = LabSmf::associate(&lab, |_| {});
    smf.establish(2);
    smf.modify();
    let sessions = smf.ue_sessions();
    let _g = gnb(&lab, &sessions);
    let (u, u2) = (ue(&sessions[0]), ue(&sessions[1]));
    let ip = |args: &[&str]| {
        let mut c = lab.command(Ns::Upf, "ip");
        c.args(args);
        let out = run_bounded(c, Duration::from_secs(30));
        assert!(out.status.success(), "ip {args:?}: {out:?}");
    };
    let no_route = "upf_dropped_packets_total{reason=\"no_route\"}";
    let invalidations = "upf_nexthop_cache_invalidations_total";
    let dn = addr::DN_N6.to_string();
    let blackhole = format!("{dn}/32");
    let ue_sock = udp_in(&lab, Ns::Gnb, SocketAddr::new(u.into(), 0));
    let dn_sock = udp_in(&lab, Ns::Dn, SocketAddr::new(addr::DN_N6.into(), 7005));
    let to_dn = SocketAddr::new(addr::DN_N6.into(), 7005);
    // A round tells invalidation from expiry only if the dropped datagram came within a
    // second of the one that filled the cache: on a slow machine it may not, and the
    // round is repeated (until one does, at most two minutes).
    let end = Instant::now() + Duration::from_secs(120);
    let mut rounds = Vec::new();
    loop {
        assert!(
            Instant::now() < end,
            "no round dropped its datagram within 0.9 s of filling the cache: {rounds:?}"
        );
        // Fills the cache (an entry older than a second is gone by now): the uplink
        // next hop towards dn.
        let filled = coarse_now();
        ue_sock.send_to(b"fill", to_dn).unwrap();
        assert_eq!(expect(&dn_sock, 1, WAIT).len(), 1, "forwarding to dn");
        let (dropped0, inv0) = (upfd.metric(no_route), upfd.metric(invalidations));
        ip(&["route", "add", "blackhole", &blackhole]);
        assert!(
            eventually(WAIT, || upfd.metric(invalidations) > inv0),
            "upfd did not hear of the route"
        );
        ue_sock.send_to(b"probe", to_dn).unwrap();
        let dropped = eventually(WAIT, || upfd.metric(no_route) > dropped0);
        let within = coarse_now() - filled;
        let through = expect_none(&dn_sock, Duration::from_millis(300));
        ip(&["route", "del", "blackhole", &blackhole]);
        assert!(
            through.is_empty() && dropped,
            "the blackhole route was ignored ({within:?} after filling the cache): {through:?}"
        );
        rounds.push(within);
        if within < Duration::from_millis(900) {
            break;
        }
        std::thread::sleep(Duration::from_millis(1100));
    }
    eprintln!("dropped within {rounds:?} of filling the cache");
    // The route gone, forwarding resumes.
    assert_eq!(ping(&lab, Ns::Gnb, Some(u), addr::DN_N6, 2), 2);

    // Policy routing by source: upfd keys the cache by source and destination while
    // such a rule exists, and the UEs are routed apart as the FIB routes them.
    let by_dst = "upf_nexthop_cache_by_destination";
    assert_eq!(upfd.metric("upf_nexthop_cache_on"), 1);
    // (The check after a change runs beside upfd's loop: wait for it.)
    assert!(
        eventually(WAIT, || upfd.metric(by_dst) == 1),
        "no source rules in the lab"
    );
    assert_eq!(ping(&lab, Ns::Gnb, Some(u2), addr::DN_N6, 1), 1);
    let from = u2.to_string();
    ip(&["rule", "add", "from", &from, "lookup", "100", "pref", "100"]);
    ip(&["route", "add", "blackhole", &blackhole, "table", "100"]);
    assert!(eventually(WAIT, || upfd.metric(by_dst) == 0));
    let first = ping(&lab, Ns::Gnb, Some(u), addr::DN_N6, 1);
    let dropped0 = upfd.metric(no_route);
    // A reply that must not come: a short wait, and the drop counted.
    let second = ping_within(&lab, Ns::Gnb, Some(u2), addr::DN_N6, 1, 2);
    let dropped = eventually(WAIT, || upfd.metric(no_route) > dropped0);
    ip(&["rule", "del", "from", &from, "lookup", "100", "pref", "100"]);
    ip(&["route", "del", "blackhole", &blackhole, "table", "100"]);
    assert_eq!(
        (first, second, dropped),
        (1, 0, true),
        "UE {u} by main, UE {u2} by table 100 (dropped as no route)"
    );
    assert!(eventually(WAIT, || upfd.metric(by_dst) == 1));
    assert!(upfd.metric(invalidations) >= 4);
}

/// GTP-U over IPv6 on N3 (TS 29.281 clause 4.4: the transport may be IPv4 or IPv6; TS
/// 29.244 clause 8.2.56 GTP-U/UDP/IPv6): a gNB with only an IPv6 N3 address. upfd
/// hands out an IPv6 F-TEID for CHOOSE with V6, takes the UE's G-PDUs over IPv6 and
/// encapsulates downlink in GTP-U/UDP/IPv6 with a correct UDP checksum (the gNB's kernel
/// drops any other, RFC 8200 clause 8.1); its slow path answers Echo and unknown TEIDs
/// over IPv6 and sends the End Marker of a path switch there.
#[test]
fn n3_over_ipv6_carries_ping_iperf3_and_end_marker() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-v6-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(
        &lab,
        &UpfdOptions {
            n3_ipv6: true,
            ..UpfdOptions::default()
        },
    );
    let smf = LabSmf::associate(&lab, |_| {});
    let s = template(0);
    let (up, fteids) = establish_custom(&smf, &s, |req| {
        req.create_pdrs[0].pdi.local_fteid = Some(FTeid::choose(false, true, None));
        req.create_pdrs[0].outer_header_removal = Some(OuterHeaderRemoval {
            description: OuterHeaderRemoval::GTPU_UDP_IPV6,
            ext_header_deletion: None,
        });
        let mut fw = req.create_fars[0]
            .forwarding_parameters
            .clone()
            .expect("uplink FAR forwards");
        fw.destination_interface = Interface::ACCESS;
        fw.destination_interface_type = None;
        fw.outer_header_creation =
            Some(OuterHeaderCreation::gtpu_ipv6(s.gnb_teid, addr::GNB_N3_V6));
        req.create_fars[1].apply_action = req.create_fars[0].apply_action.clone();
        req.create_fars[1].forwarding_parameters = Some(fw);
    });
    let ul = fteids.first().expect("a Created PDR").1;
    assert_eq!(
        (ul.ipv4, ul.ipv6),
        (None, Some(addr::UPF_N3_V6)),
        "CHOOSE with V6 only: {ul:?}"
    );
    let session = UeSession {
        index: s.index,
        ue_ip: Some(s.ue_ip),
        ue_ip6: None,
        gnb_teid: s.gnb_teid,
        ul_teid: ul.teid.expect("TEID"),
        upf: IpAddr::V6(addr::UPF_N3_V6),
    };
    let g = Gnb::start(
        GnbConfig {
            netns: Some(lab.ns(Ns::Gnb)),
            gnb6: Some(addr::GNB_N3_V6),
            ..GnbConfig::default()
        },
        vec![session],
    )
    .expect("starting the gNB/UE emulator");

    let base = TunBaseline::now(&lab, &upfd, &g, &[s.ue_ip]);
    let n = ping(&lab, Ns::Gnb, Some(s.ue_ip), addr::DN_N6, 3);
    assert_eq!(n, 3, "UE -> DN: {:?}\n{}", g.stats(), upfd.metrics());
    assert_eq!(ping(&lab, Ns::Dn, None, s.ue_ip, 3), 3, "DN -> UE");
    let mut figures = Vec::new();
    for (port, reverse) in [(5301, false), (5302, true)] {
        let v = iperf3(&lab, s.ue_ip, port, 2, reverse, None);
        assert!(received_bytes(&v) > 0, "TCP over IPv6 N3: {}", v["end"]);
        figures.push(format!(
            "{} {:.0} Mbit/s",
            if reverse { "downlink" } else { "uplink" },
            received_bps(&v) / 1e6
        ));
    }
    eprintln!("iperf3 TCP over GTP-U/IPv6: {}", figures.join(", "));
    // The URR counted exactly what the UE's TUN carried.
    assert_urrs_are_tun(&lab, &upfd, &g, &base, || 0);
    let st = g.stats();
    assert_eq!((st.malformed, st.unknown_teid), (0, 0), "{st:?}");
    let m = upfd.metrics();
    for reason in [
        "no_pdr",
        "unknown_teid",
        "unsupported",
        "no_route",
        "malformed_ip",
    ] {
        let series = format!("upf_dropped_packets_total{{reason=\"{reason}\"}}");
        assert_eq!(common::lab::metric(&m, &series), 0, "{series}\n{m}");
    }

    // The slow path over IPv6: Echo, and an Error Indication for an unknown TEID.
    let probe = udp_in(&lab, Ns::Gnb, SocketAddr::new(addr::GNB_N3_V6.into(), 0));
    let upf = SocketAddr::new(addr::UPF_N3_V6.into(), 2152);
    probe
        .send_to(&gtpu::Message::echo_request(9).to_vec().unwrap(), upf)
        .unwrap();
    let got = expect(&probe, 1, WAIT);
    assert!(
        got.first().is_some_and(|d| d.len() >= 8 && d[1] == 2),
        "Echo Response over IPv6: {got:?}"
    );
    probe
        .send_to(
            &gpdu(0xdead, Some(1), &udp4(s.ue_ip, addr::DN_N6, 1, 9, b"x")),
            upf,
        )
        .unwrap();
    let got = expect(&probe, 1, WAIT);
    assert!(
        got.first().is_some_and(|d| d.len() >= 8 && d[1] == 26),
        "Error Indication over IPv6: {got:?}"
    );

    // A path switch with SNDEM: the End Marker reaches the gNB over IPv6.
    switch_path(
        &smf,
        &s,
        up,
        OuterHeaderCreation::gtpu_ipv6(0x7777, addr::GNB_N3_V6),
    );
    assert!(
        eventually(WAIT, || g.stats().end_markers == 1),
        "End Marker over IPv6: {:?}",
        g.stats()
    );
    assert_eq!(
        upfd.wait_metric(
            "upf_slowpath_gtpu_messages_total{kind=\"end_marker_sent\"}",
            1,
            WAIT
        ),
        1
    );
    g.stop();
    delete(&smf, up);
}

/// OAI's SMF in the lab: its CHOOSE F-TEIDs carry neither V4 nor V6, and each of its
/// Heartbeat Requests carries the time it was sent as Recovery Time Stamp. While a UE
/// pings the data network for 12 s the SMF sends a heartbeat every 0.5 s, each with a
/// later time stamp: every ping is answered, the session stays, and upfd counts the
/// changed time stamps (before, the first such heartbeat deleted the session).
#[test]
fn oai_smf_heartbeats_with_growing_time_stamps_keep_the_session_forwarding() {
    use pfcp::msg::{HeartbeatRequest, Msg};
    use upfbench::smf::TeidMode;
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-oai-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    let mut smf = LabSmf::associate(&lab, |c| {
        c.teid = TeidMode::Choose;
        c.choose_v4 = false;
    });
    smf.establish(1);
    smf.modify();
    let sessions = smf.ue_sessions();
    let g = gnb(&lab, &sessions);
    let ue0 = ue(&sessions[0]);
    let pinger = {
        let mut c = lab.command(Ns::Gnb, "ping");
        // Each reply awaited up to 10 s: ping sends on its own schedule and ends when the
        // last reply came (12 s here), bounded by the 60 waits.
        c.args(["-n", "-q", "-c", "60", "-i", "0.2", "-W", "10", "-I"])
            .arg(ue0.to_string())
            .arg(addr::DN_N6.to_string());
        std::thread::spawn(move || run_bounded(c, Duration::from_secs(60 * 10)))
    };
    let t0 = upfbench::smf::n4::recovery_time_stamp_now();
    let mut sent = 0;
    for k in 1..=24u32 {
        std::thread::sleep(Duration::from_millis(500));
        let hb = Msg::HeartbeatRequest(HeartbeatRequest {
            recovery_time_stamp: t0 + k,
            source_ip_address: None,
            other: vec![],
        });
        match smf.transact(&hb, None) {
            Msg::HeartbeatResponse(_) => sent += 1,
            other => panic!("{other:?}"),
        }
    }
    let out = pinger.join().expect("ping thread");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("60 packets transmitted, 60 received"),
        "{text}"
    );
    assert_eq!(upfd.metric("upf_sessions"), 1);
    assert_eq!(
        upfd.metric("upf_n4_recovery_time_stamp_changes_total"),
        sent
    );
    assert!(
        upfd.wait_for_log("sessions kept", WAIT),
        "reported once in the log"
    );
    drop(g);
}

/// One to four random mutations of `b` (bit flips, byte values, truncation, a slice
/// repeated, the length field moved, another message's tail spliced on).
fn mutate(rng: &mut impl rand::Rng, b: &[u8], other: &[u8]) -> Vec<u8> {
    let mut v = b.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        if v.is_empty() {
            break;
        }
        let i = rng.random_range(0..v.len());
        match rng.random_range(0..7) {
            0 | 1 => v[i] ^= 1 << rng.random_range(0..8),
            2 => v[i] = [0, 0xff, rng.random()][rng.random_range(0..3)],
            3 => v.truncate(i.max(1)),
            4 => {
                let j = rng.random_range(i..v.len());
                let s = v[i..=j.min(i + 64)].to_vec();
                v.splice(i..i, s);
            }
            5 if v.len() >= 4 => {
                let l = u16::from_be_bytes([v[2], v[3]])
                    .wrapping_add(rng.random_range(0..9u16))
                    .wrapping_sub(4);
                v[2..4].copy_from_slice(&l.to_be_bytes());
            }
            _ => {
                let j = rng.random_range(0..other.len().max(1));
                v.truncate(i);
                v.extend_from_slice(other.get(j..).unwrap_or_default());
            }
        }
    }
    v
}

/// TS 33.117 clause 4.4.4 (robustness and fuzz testing) against a running upfd with the
/// XDP data path: for `UPF_LIVE_FUZZ_SECONDS` (default 8), mutated PFCP from the
/// associated SMF's address (every message of the sample corpus, with live SEIDs half of
/// the time) and mutated G-PDUs with live TEIDs into N3 (mutated headers, extension
/// headers and inner packets through `xdp_n3`). upfd must stay up, answer heartbeats all
/// along, keep its books consistent (`/check`), and afterwards establish a new session
/// and forward its traffic. `UPF_LIVE_FUZZ_SEED` replays a run.
#[test]
fn scas_fuzzed_pfcp_and_gtpu_leave_a_running_upfd_up_and_consistent() {
    use rand::{Rng, SeedableRng};
    if !root() {
        return;
    }
    let _serial = serial();
    let secs: u64 = std::env::var("UPF_LIVE_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let seed: u64 = std::env::var("UPF_LIVE_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    eprintln!("live fuzz: {secs} s, UPF_LIVE_FUZZ_SEED={seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let lab = Lab::up("e-fuzz-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    let mut smf = LabSmf::associate(&lab, |_| {});
    smf.establish(20);
    smf.modify();
    let live = smf.ue_sessions();
    let seids: Vec<u64> = smf
        .smf
        .sessions()
        .iter()
        .filter_map(|s| Some(s.up_fseid.as_ref()?.seid))
        .collect();
    let corpus: Vec<Vec<u8>> = pfcp_samples::corpus()
        .into_iter()
        .map(|s| s.bytes)
        .collect();
    let n4 = udp_in(&lab, Ns::Smf, SocketAddr::new(addr::SMF_N4.into(), 0));
    n4.set_nonblocking(true).unwrap();
    let gnb = udp_in(
        &lab,
        Ns::Gnb,
        SocketAddr::new(addr::GNB_N3_EXTRA[2].into(), 2152),
    );
    let upf_n4 = SocketAddr::new(addr::UPF_N4.into(), 8805);
    let upf_n3 = SocketAddr::new(addr::UPF_N3.into(), 2152);
    let heartbeat = pfcp::msg::Msg::HeartbeatRequest(pfcp::msg::HeartbeatRequest {
        recovery_time_stamp: 0xe000_0000,
        source_ip_address: None,
        other: vec![],
    });

    let (mut pfcp_sent, mut gtpu_sent, mut heartbeats) = (0u64, 0u64, 0u32);
    let end = Instant::now() + Duration::from_secs(secs);
    let mut next_heartbeat = Instant::now();
    let mut sink = [0u8; 4096];
    while Instant::now() < end {
        for _ in 0..32 {
            let a = &corpus[rng.random_range(0..corpus.len())];
            let b = &corpus[rng.random_range(0..corpus.len())];
            let mut m = a.clone();
            // Session messages (S flag): a live SEID half of the time.
            if m.len() >= 12 && m[0] & 0x01 != 0 && rng.random_bool(0.5) {
                let seid = seids[rng.random_range(0..seids.len())];
                m[4..12].copy_from_slice(&seid.to_be_bytes());
            }
            let _ = n4.send_to(&mutate(&mut rng, &m, b), upf_n4);
            pfcp_sent += 1;
        }
        for _ in 0..64 {
            let s = &live[rng.random_range(0..live.len())];
            let inner = udp4(ue(s), addr::DN_N6, 4000, 7003, b"fuzz");
            let g = gpdu(s.ul_teid, Some(1), &inner);
            let _ = gnb.send_to(&mutate(&mut rng, &g, &inner), upf_n3);
            gtpu_sent += 1;
        }
        while n4.recv(&mut sink).is_ok() {}
        if Instant::now() >= next_heartbeat {
            match smf.transact(&heartbeat, None) {
                pfcp::msg::Msg::HeartbeatResponse(_) => heartbeats += 1,
                m => panic!("heartbeat answered with {m:?}"),
            }
            next_heartbeat = Instant::now() + Duration::from_secs(1);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    eprintln!(
        "live fuzz: {pfcp_sent} PFCP and {gtpu_sent} GTP-U datagrams sent, {heartbeats} heartbeats answered, {} malformed PFCP counted",
        upfd.metric("upf_n4_malformed_total")
    );
    let check = upfd.check();
    assert!(check.contains("\"consistent\":true"), "{check}");
    // Still serving: a new association of the SMF (the fuzz may have released it), a
    // new session, its uplink through XDP.
    let mut smf = LabSmf::associate(&lab, |c| c.ue_pool = "10.47.0.0/16".parse().unwrap());
    smf.establish(1);
    let s = smf.ue_sessions()[0].clone();
    let dn = udp_in(&lab, Ns::Dn, SocketAddr::new(addr::DN_N6.into(), 7004));
    gnb.send_to(
        &gpdu(
            s.ul_teid,
            Some(1),
            &udp4(ue(&s), addr::DN_N6, 4000, 7004, b"after"),
        ),
        upf_n3,
    )
    .unwrap();
    assert_eq!(expect(&dn, 1, WAIT).len(), 1, "forwarding after the fuzz");
    let check = upfd.check();
    assert!(check.contains("\"consistent\":true"), "{check}");
}

/// Restart without loss (issue 14): 20 sessions carry traffic each way through the XDP
/// data path while upfd (with `state.directory`) is killed with SIGKILL and started
/// again, and then stopped with SIGTERM and a new binary started (an upgrade); the
/// traffic lasts until the second upfd forwards, however long the starts take. No
/// session is lost, the SMF emulator sees one Recovery Time Stamp throughout, upfd
/// drops nothing, and every packet is accounted for per session ([`assert_accounted`]):
/// each URR's usage at deletion is what its sink received plus what the veths after
/// upfd dropped (the counts of the data paths that were replaced are carried), and what
/// no URR counted the veths before upfd dropped. So a packet upfd loses in a restart,
/// or a count not carried, fails the test; packets the busy machine's veths lose do not.
///
/// How many packets the rig lost (ms of traffic) is printed: a benchmark
/// (docs/benchmarks.md, "Restart") with UPF_RESTART_RATE (packets/s each way, paced by
/// the generator; without it, 4,000 in bursts of 32), UPF_RESTART_MAX_SESSIONS (`limits.max_sessions`: what upfd allocates at
/// start), UPF_RESTART_SECS (the traffic's least length; it runs until the restarts
/// are over and a second more in any case), UPF_RESTART_BINARY (the upfd to start
/// first, e.g. a wrapper that pins it to a CPU), UPF_RESTART_UPGRADE_CPUS (the upgraded
/// upfd's `cpus`, e.g. `0` to keep it off the forwarding CPU) and UPF_RESTART_ATTEMPTS
/// (rounds of two restarts each, each round's loss printed; default 1).
#[test]
fn restart_under_traffic_keeps_every_session_and_counts_exactly() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Mutex;
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-rst-").unwrap().down_on_drop();
    let state = common::TempDir::new("upfd-lab-state");
    // Where upfd pins its data path, so that it forwards while no upfd runs.
    let bpffs = common::lab::Bpffs::mount("upfd-lab-bpffs");
    let opts = UpfdOptions {
        binary: std::env::var("UPF_RESTART_BINARY").ok().map(Into::into),
        state_dir: Some(state.0.join("state")),
        pin_directory: Some(bpffs.path().join("upfd")),
        max_sessions: Some(env_or("UPF_RESTART_MAX_SESSIONS", 10_000) as usize),
        ..UpfdOptions::default()
    };
    let upgraded = state.0.join("upfd-upgraded");
    std::fs::copy(env!("CARGO_BIN_EXE_upfd"), &upgraded).expect("copying upfd");
    // The copy is this build: `reuse_datapath: false` makes it load its own data path
    // and swap it in, as an upgrade that changed the object does.
    let upgrade = UpfdOptions {
        binary: Some(upgraded),
        reuse_datapath: false,
        cpus: std::env::var("UPF_RESTART_UPGRADE_CPUS")
            .map(|v| {
                v.split(',')
                    .map(|c| {
                        c.trim()
                            .parse()
                            .expect("UPF_RESTART_UPGRADE_CPUS: CPU numbers")
                    })
                    .collect()
            })
            .unwrap_or_default(),
        ..opts.clone()
    };
    let mut upfd = LabUpfd::start(&lab, &opts);
    let mut smf = LabSmf::associate(&lab, |_| {});
    smf.establish(20);
    let stamps = smf.smf.n4().upf_recovery_time_stamps();
    assert_eq!(stamps.len(), 1);
    let mut rig = rig_for(&lab, &smf);
    let mix = Mix {
        name: "restart",
        sizes: vec![(200, 1)],
    };
    let rate = env_or("UPF_RESTART_RATE", 4_000);
    // The test sends in bursts of 32 packets, leaving the generator's CPU to upfd's
    // starts in between (a paced generator spins on it, and on a busy machine the
    // starts would wait for the traffic to end); the benchmark, with a rate given,
    // paces.
    let paced = std::env::var_os("UPF_RESTART_RATE").is_some();
    let rounds = env_or("UPF_RESTART_ATTEMPTS", 1).max(1);
    let least = env_or("UPF_RESTART_SECS", 0) as f64;
    let restored = "state: restored 20 session(s)";
    let loss0 = LabLoss::read(&lab);
    let (mut sent, mut got) = (
        [vec![0u64; 20], vec![0u64; 20]],
        [vec![0u64; 20], vec![0u64; 20]],
    );
    for round in 1..=rounds {
        // The restarts happen while the generators run, which run until the restarts
        // are over (and a second more): `done` says when, even if a restart fails.
        let done = AtomicBool::new(false);
        let done_at = Mutex::new(None::<Instant>);
        struct Done<'a>(&'a AtomicBool, &'a Mutex<Option<Instant>>);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                *self.1.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let began = Instant::now();
        let (t, (up, swaps, mut windows)) = std::thread::scope(|sc| {
            let lab = &lab;
            let (opts, upgrade) = (&opts, &upgrade);
            let (done, done_at) = (&done, &done_at);
            let mut old = upfd;
            // The data paths pinned (one directory each, under the UPF's Node ID): what
            // outlives an upfd.
            let pins = opts
                .pin_directory
                .clone()
                .expect("pin_directory")
                .join(addr::UPF_N4.to_string().replace('.', "_"));
            let pinned = move || -> Vec<String> {
                let mut v: Vec<String> = std::fs::read_dir(&pins)
                    .map(|d| {
                        d.flatten()
                            .map(|e| e.file_name().to_string_lossy().into_owned())
                            .collect()
                    })
                    .unwrap_or_default();
                v.sort();
                v
            };
            let restarts = sc.spawn(move || {
                let _done = Done(done, done_at);
                // Each upfd is stopped only once it forwards the traffic both ways.
                assert!(forwarding(&old), "traffic through the first upfd");
                // The veths' losses around each restart (the benchmark's split: every
                // packet the rig loses is in these counters, as the test checks below).
                let mut windows = vec![(Instant::now(), LabLoss::read(lab))];
                assert!(old.drops().is_empty(), "upfd dropped: {:?}", old.drops());
                let first = pinned();
                assert_eq!(first.len(), 1, "{first:?}\n{}", old.log());
                assert!(old.stop(libc::SIGKILL, Duration::from_secs(30)), "SIGKILL");
                drop(old);
                let mut up = LabUpfd::start(lab, opts);
                assert!(
                    up.wait_for_log(restored, Duration::from_secs(60)),
                    "{}",
                    up.log()
                );
                // The same build: the running data path is taken as it is.
                assert!(
                    up.log().contains("is this build's: reused as it is"),
                    "{}",
                    up.log()
                );
                assert!(forwarding(&up), "traffic through the restarted upfd");
                assert!(up.drops().is_empty(), "upfd dropped: {:?}", up.drops());
                assert_eq!(pinned(), first, "the reused data path's pins kept");
                let first_at = Instant::now();
                windows.push((first_at, LabLoss::read(lab)));
                assert!(up.stop(libc::SIGTERM, Duration::from_secs(60)), "SIGTERM");
                assert!(
                    up.log()
                        .contains("exiting with 20 session(s) of 1 association(s) kept"),
                    "{}",
                    up.log()
                );
                drop(up);
                let up = LabUpfd::start(lab, upgrade);
                assert!(
                    up.wait_for_log(restored, Duration::from_secs(60)),
                    "{}",
                    up.log()
                );
                assert!(up.log().contains("loading a new"), "{}", up.log());
                assert!(forwarding(&up), "traffic through the upgraded upfd");
                // The replaced data path's pins removed (its tables freed), the new
                // one's in place.
                let now = pinned();
                assert!(now.len() == 1 && now != first, "{now:?} after {first:?}");
                windows.push((Instant::now(), LabLoss::read(lab)));
                (up, [first_at, Instant::now()], windows)
            });
            let keep_going = || {
                let after = done_at
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .map(|t| t.elapsed());
                !done.load(Ordering::SeqCst)
                    || after.is_none_or(|a| a < Duration::from_secs(1))
                    || began.elapsed().as_secs_f64() < least
            };
            let load = [
                (Direction::Uplink, &mix, Some(rate)),
                (Direction::Downlink, &mix, Some(rate)),
            ];
            let t = if paced {
                rig.trial_while(&load, 0.5, keep_going, least + 120.0)
            } else {
                rig.trial_while_bursts(&load, 32, keep_going, least + 120.0)
            }
            .unwrap();
            (t, restarts.join().expect("restarts"))
        });
        upfd = up;
        windows.push((Instant::now(), LabLoss::read(&lab)));
        for (w, name) in windows.windows(2).zip([
            "SIGKILL to the restarted upfd forwarding",
            "SIGTERM to the upgraded upfd forwarding",
            "after the restarts, to the traffic's end",
        ]) {
            let l = w[1].1.since(&w[0].1);
            eprintln!(
                "round {round}: {name} ({:.1} s): lost UL {} before upfd, {} after; DL {} before, {} after",
                (w[1].0 - w[0].0).as_secs_f64(),
                l.before_upfd(Direction::Uplink),
                l.after_upfd(Direction::Uplink),
                l.before_upfd(Direction::Downlink),
                l.after_upfd(Direction::Downlink),
            );
        }
        eprintln!(
            "round {round}: restarts {:.1} s and {:.1} s into a run of {:.1} s",
            (swaps[0] - began).as_secs_f64(),
            (swaps[1] - began).as_secs_f64(),
            began.elapsed().as_secs_f64()
        );
        // The benchmark's figure: what the rig lost, in ms of traffic (not asserted:
        // the veths of a busy machine lose packets; where is asserted below).
        for d in Direction::BOTH {
            let (s, g) = rig.per_session(d).unwrap();
            let i = d as usize;
            assert_eq!(s.iter().sum::<u64>(), t.sent[i], "{d}");
            for k in 0..20 {
                sent[i][k] += s[k];
                got[i][k] += g[k];
            }
            let (s, g) = (t.sent[i], t.received[i]);
            eprintln!(
                "attempt {round}: {d}: {s} sent, {g} received: {:.1} ms of traffic lost",
                (s - g) as f64 / rate as f64 * 1000.0
            );
        }
    }
    let loss = LabLoss::read(&lab).since(&loss0);
    for d in Direction::BOTH {
        eprintln!(
            "{d}: lost before upfd {} (veths into upf), after upfd {} (veths out of upf): {loss:?}",
            loss.before_upfd(d),
            loss.after_upfd(d)
        );
    }
    assert!(upfd.drops().is_empty(), "upfd dropped: {:?}", upfd.drops());
    assert_eq!(
        smf.smf.n4().upf_recovery_time_stamps(),
        stamps,
        "one Recovery Time Stamp throughout"
    );
    assert!(upfd.check().contains("\"consistent\":true"));
    // Every session's URR reports what became of its packets, through three data paths.
    let (counted, volumes) = delete_all(&smf);
    for d in Direction::BOTH {
        let i = d as usize;
        assert_accounted(d, &sent[i], &counted[i], &got[i], &loss);
    }
    // Every packet is of one size (200 IP octets): the octets are packets times that.
    for (i, v) in volumes.iter().enumerate() {
        assert_eq!(v.uplink, Some(counted[0][i] * 200), "session {i}: {v:?}");
        assert_eq!(v.downlink, Some(counted[1][i] * 200), "session {i}: {v:?}");
    }
    rig.close().unwrap();
}

/// Whether `upfd`'s data path forwards the rig's traffic both ways: its forwarded
/// counts grow (at most 60 s; its API may not answer at first).
fn forwarding(upfd: &LabUpfd) -> bool {
    let read = || {
        let m = upfd.try_metrics()?;
        Some(["uplink", "downlink"].map(|d| {
            common::lab::metric(
                &m,
                &format!("upf_datapath_packets_total{{outcome=\"forwarded_{d}\"}}"),
            )
        }))
    };
    let mut first = None;
    eventually(Duration::from_secs(60), || match (first, read()) {
        (None, now) => {
            first = now;
            false
        }
        (Some(a), Some(b)) => b[0] > a[0] && b[1] > a[1],
        (Some(_), None) => false,
    })
}

/// A number from the environment, else `default`.
fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

// ---------------------------------------------------------------------------------------
// The operator surface: API, upfctl, metrics.

/// promtool (Prometheus's linter): `.tools/bin/promtool` (scripts/ops-tools.sh) or PATH.
fn promtool() -> Option<std::path::PathBuf> {
    let local = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin/promtool");
    if local.exists() {
        return Some(local);
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("promtool"))
            .find(|f| f.exists())
    })
}

/// A UE's session through the API and upfctl: the rules the SMF emulator installed, and
/// URR counts equal to what the gNB/UE emulator sent and received; /metrics families
/// move with the traffic, pass promtool's linter, and include every family the Grafana
/// dashboard queries.
#[test]
fn the_api_and_upfctl_show_a_live_session_with_its_rules_and_exact_counters() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-api-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    assert_eq!(upfd.api("/readyz").0, 200, "ready once attached");
    let mut smf = LabSmf::associate(&lab, |_| {});
    smf.establish(2);
    smf.modify();
    let sessions = smf.ue_sessions();
    let g = gnb(&lab, &sessions);
    let before = upfd.metrics();

    // Traffic of one UE only, both ways; the other UE's session stays at zero.
    let (s0, s1) = (&sessions[0], &sessions[1]);
    let base = TunBaseline::now(&lab, &upfd, &g, &[ue(s0)]);
    assert_eq!(ping(&lab, Ns::Gnb, Some(ue(s0)), addr::DN_N6, 5), 5);
    assert_eq!(ping(&lab, Ns::Dn, None, ue(s0), 3), 3);
    // The URR counted exactly what the emulator carried (waits for the counts to
    // settle; every difference a counted loss outside upfd).
    let (urr0, emu0) = assert_urrs_are_tun(&lab, &upfd, &g, &base, || 0)[0];
    assert!(emu0.ul_packets >= 8 && emu0.dl_packets >= 8, "{emu0:?}");

    // By UE address, whole, as JSON.
    let o = upfd.upfctl(&["--json", "sessions", "--ue", &ue(s0).to_string()]);
    assert_eq!(o.code, 0, "{o:?}");
    let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("upfctl --json");
    let found = v["sessions"].as_array().expect("sessions");
    assert_eq!(found.len(), 1, "{v:#}");
    let sess = &found[0];
    let seid = sess["seid"].as_str().expect("seid").to_string();
    // The rules as the SMF emulator installed them (and upfd chose the uplink TEID).
    let pdrs = sess["pdrs"].as_array().expect("pdrs");
    let ul = pdrs
        .iter()
        .find(|p| p["source_interface"] == "access")
        .expect("uplink PDR");
    assert_eq!(ul["local_fteid"]["teid"], u64::from(s0.ul_teid), "{sess:#}");
    let dl = pdrs
        .iter()
        .find(|p| p["source_interface"] == "core")
        .expect("downlink PDR");
    assert_eq!(dl["ue_ip"][0]["ipv4"], ue(s0).to_string(), "{sess:#}");
    let fars = sess["fars"].as_array().expect("fars");
    let to_gnb = fars
        .iter()
        .find(|f| f["forwarding"]["destination_interface"] == "access")
        .expect("downlink FAR");
    assert_eq!(
        to_gnb["apply_action"],
        serde_json::json!(["forw"]),
        "{sess:#}"
    );
    assert_eq!(
        to_gnb["forwarding"]["outer_header_creation"]["teid"],
        u64::from(s0.gnb_teid),
        "{sess:#}"
    );
    assert_eq!(sess["qers"][0]["gate_ul"], "open", "{sess:#}");
    // The URR as the JSON shows it: the counts checked against the TUN above.
    let urr = &sess["urrs"][0]["measured"]["since_created"];
    assert_eq!(
        (
            urr["ul_packets"].as_u64(),
            urr["ul_bytes"].as_u64(),
            urr["dl_packets"].as_u64(),
            urr["dl_bytes"].as_u64()
        ),
        (
            Some(urr0.ul_packets),
            Some(urr0.ul_bytes),
            Some(urr0.dl_packets),
            Some(urr0.dl_bytes)
        ),
        "URR {urr} against the UE's TUN {emu0:?}"
    );

    // The same session by SEID and by TEID; the table says the same numbers.
    let by_teid = upfd.upfctl(&["--json", "sessions", "--teid", &s0.ul_teid.to_string()]);
    assert!(by_teid.stdout.contains(&seid), "{by_teid:?}");
    let t = upfd.upfctl(&["session", &seid]);
    assert_eq!(t.code, 0, "{t:?}");
    for needle in [
        seid.clone(),
        ue(s0).to_string(),
        urr0.ul_bytes.to_string(),
        urr0.dl_bytes.to_string(),
        format!("{}@", s0.gnb_teid),
    ] {
        assert!(t.stdout.contains(&needle), "no {needle} in\n{}", t.stdout);
    }
    eprintln!("upfctl session {seid}:\n{}", t.stdout);
    // The idle UE's session counted nothing.
    let idle = upfd.upfctl(&["--json", "sessions", "--ue", &ue(s1).to_string()]);
    let iv: serde_json::Value = serde_json::from_str(&idle.stdout).expect("JSON");
    assert_eq!(
        iv["sessions"][0]["urrs"][0]["measured"]["since_created"]["total_bytes"],
        0
    );

    // Listing, associations, stats, buffers, an unknown SEID.
    let list = upfd.upfctl(&["sessions", "--limit", "1"]);
    assert!(
        list.stdout
            .contains("1 of 2 session(s); next page: --after"),
        "{list:?}"
    );
    let assoc = upfd.upfctl(&["associations"]);
    assert!(assoc.stdout.contains("associated  2"), "{assoc:?}");
    let stats = upfd.upfctl(&["stats"]);
    assert!(
        stats.stdout.contains("Session Establishment Request  2"),
        "{stats:?}"
    );
    assert!(upfd
        .upfctl(&["buffers"])
        .stdout
        .contains("0 packet(s) buffered"));
    let missing = upfd.upfctl(&["session", "0x1"]);
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("no session has SEID"),
        "{missing:?}"
    );
    assert_eq!(upfd.upfctl(&["ready"]).stdout, "ready\n");
    assert_eq!(upfd.upfctl(&["applications"]).stdout, "no applications\n");
    // Off loopback, the subscriber routes need the token; the probes and metrics not.
    let (code, body) = upfd.api_without_token(&format!("/api/v1/sessions/{seid}"));
    assert_eq!(code, 401, "{body}");
    assert_eq!(upfd.api_without_token("/check").0, 401);
    assert_eq!(upfd.api_without_token("/readyz").0, 200);
    assert_eq!(upfd.api_without_token("/metrics").0, 200);

    // Metrics: the families moved with the traffic.
    let after = upfd.metrics();
    let grew = |series: &str, by: u64| {
        let (b, a) = (
            common::lab::metric(&before, series),
            common::lab::metric(&after, series),
        );
        assert!(a >= b + by, "{series}: {b} -> {a}, expected +{by}\n{after}");
    };
    let (ul, dl) = (urr0.ul_packets, urr0.dl_packets);
    grew(
        "upf_interface_packets_total{interface=\"n3\",direction=\"in\"}",
        ul,
    );
    grew(
        "upf_interface_packets_total{interface=\"n6\",direction=\"out\"}",
        ul,
    );
    grew(
        "upf_interface_packets_total{interface=\"n6\",direction=\"in\"}",
        dl,
    );
    grew(
        "upf_interface_packets_total{interface=\"n3\",direction=\"out\"}",
        dl,
    );
    grew(
        "upf_interface_bytes_total{interface=\"n6\",direction=\"out\"}",
        urr0.ul_bytes,
    );
    grew(
        "upf_datapath_packets_total{outcome=\"forwarded_uplink\"}",
        ul,
    );
    assert_eq!(
        common::lab::metric(
            &after,
            "upf_n4_messages_total{direction=\"sent\",type=\"session_establishment_response\",cause=\"request_accepted\"}"
        ),
        2,
        "{after}"
    );
    assert_eq!(
        common::lab::metric(
            &after,
            "upf_n4_request_duration_seconds_count{type=\"session_modification_request\"}"
        ),
        2
    );
    assert!(
        after.contains("upf_xdp_attached{interface=\"n3\",reference_point=\"n3\""),
        "{after}"
    );
    assert!(
        after.contains("upf_n4_association_info{node_id="),
        "{after}"
    );
    // Every family once with HELP and TYPE, every family the dashboard queries present.
    let helps: Vec<&str> = after
        .lines()
        .filter_map(|l| l.strip_prefix("# HELP "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let types = after.lines().filter(|l| l.starts_with("# TYPE ")).count();
    assert_eq!(helps.len(), types, "HELP and TYPE pair up");
    let mut unique = helps.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), helps.len(), "a family twice");
    let dash = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/grafana/upfd-dashboard.json"
    ))
    .expect("the Grafana dashboard");
    for word in dash.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if !word.starts_with("upf_") {
            continue;
        }
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| word.strip_suffix(s))
            .filter(|f| helps.contains(f))
            .unwrap_or(word);
        assert!(
            helps.contains(&family),
            "the dashboard queries {word}, which this upfd does not export"
        );
    }
    // Prometheus's own linter.
    match promtool() {
        Some(p) => {
            let mut c = std::process::Command::new(p);
            c.args(["check", "metrics"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped());
            let mut child = c.spawn().expect("promtool");
            use std::io::Write as _;
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(after.as_bytes())
                .expect("to promtool");
            let out = child.wait_with_output().expect("promtool");
            assert!(
                out.status.success(),
                "promtool check metrics: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        None if std::env::var_os("UPF_REQUIRE_ORACLES").is_some() => {
            panic!("promtool is missing: scripts/deps.sh installs it (scripts/ops-tools.sh)")
        }
        None => {
            eprintln!("SKIP promtool check metrics: promtool not installed (scripts/ops-tools.sh)")
        }
    }
    g.stop();
    drop(smf);
    drop(upfd);
    lab.down().unwrap();
}

/// A captive portal (TS 29.244 clause 5.4.7, Redirect Information clause 8.2.20): the
/// SMF gives the UE's uplink FAR a Redirect Information with a URL. The UE's `curl
/// http://...` gets `302 Found` with that Location from upfd and a closed connection
/// (curl exits 0); its `curl https://...` of the same flow gets nothing (the ClientHello
/// is not HTTP: dropped, counted) and its UDP is dropped in the data path
/// (redirect_not_http); nothing of the flow reaches the data network. Upfd's answers
/// go back through the tunnel, counted by the downlink URR.
#[test]
fn redirect_answers_http_with_302_and_drops_the_rest_of_the_flow() {
    use pfcp::ie::{RedirectInformation, Text};
    use pfcp::msg::{SessionModificationRequest, UpdateFar, UpdateForwardingParameters};
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-rd-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    let mut smf = LabSmf::associate(&lab, |_| {});
    smf.establish(1);
    smf.modify();
    let sessions = smf.ue_sessions();
    let _g = gnb(&lab, &sessions);
    let u = ue(&sessions[0]);
    assert_eq!(ping(&lab, Ns::Gnb, Some(u), addr::DN_N6, 2), 2, "before");

    let portal = "http://portal.example/welcome?from=upfd";
    let s = smf.smf.sessions()[0].clone();
    let mut req: SessionModificationRequest = smf.smf.modification_request(&s);
    req.update_fars = vec![UpdateFar {
        far_id: 1,
        apply_action: None,
        update_forwarding_parameters: Some(UpdateForwardingParameters {
            destination_interface: None,
            network_instance: None,
            redirect_information: Some(RedirectInformation {
                address_type: 2,
                server_address: Text(portal.as_bytes().to_vec()),
                other_server_address: None,
            }),
            outer_header_creation: None,
            transport_level_marking: None,
            forwarding_policy: None,
            header_enrichment: None,
            pfcpsm_req_flags: None,
            linked_traffic_endpoint_id: None,
            destination_interface_type: None,
            data_network_access_identifier: None,
            other: vec![],
        }),
        update_duplicating_parameters: vec![],
        bar_id: None,
        other: vec![],
    }];
    match smf.transact(
        &Msg::SessionModificationRequest(req),
        Some(s.up_fseid.unwrap().seid),
    ) {
        Msg::SessionModificationResponse(r) => {
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}")
        }
        other => panic!("{other:?}"),
    }
    let dn = addr::DN_N6.to_string();
    let curl = |url: &str, max_s: u32| {
        let mut c = lab.command(Ns::Gnb, "curl");
        c.args([
            "-sS",
            "-k",
            "-o",
            "/dev/null",
            "--interface",
            &u.to_string(),
        ])
        .args(["--max-time", &max_s.to_string()])
        .args(["-w", "%{http_code} %{redirect_url}"])
        .arg(url);
        run_bounded(c, Duration::from_secs(u64::from(max_s) + 30))
    };
    let out = curl(&format!("http://{dn}/index.html"), 20);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success() && text == format!("302 {portal}"),
        "curl http: {out:?}\n{}",
        upfd.log()
    );
    let m = upfd.metrics();
    let seg = |o: &str| {
        common::lab::metric(
            &m,
            &format!("upf_redirect_segments_total{{outcome=\"{o}\"}}"),
        )
    };
    assert!(seg("syn_ack") >= 1 && seg("http_302") >= 1, "{m}");

    // HTTPS on the same flow: the ClientHello is not HTTP.
    let out = curl(&format!("https://{dn}/"), 3);
    assert!(!out.status.success(), "curl https must fail: {out:?}");
    assert!(
        eventually(WAIT, || {
            common::lab::metric(
                &upfd.metrics(),
                "upf_redirect_segments_total{outcome=\"not_http\"}",
            ) >= 1
        }),
        "the ClientHello counted as not HTTP\n{}",
        upfd.metrics()
    );
    // UDP of the flow: dropped in the data path.
    let sink = udp_in(&lab, Ns::Dn, SocketAddr::new(addr::DN_N6.into(), 7006));
    let tx = udp_in(&lab, Ns::Gnb, SocketAddr::new(u.into(), 0));
    let before = upfd.metric("upf_dropped_packets_total{reason=\"redirect_not_http\"}");
    tx.send_to(b"not http", SocketAddr::new(addr::DN_N6.into(), 7006))
        .unwrap();
    assert_eq!(
        upfd.wait_metric(
            "upf_dropped_packets_total{reason=\"redirect_not_http\"}",
            before + 1,
            WAIT
        ),
        before + 1
    );
    assert!(expect_none(&sink, Duration::from_millis(300)).is_empty());
    assert!(
        upfd.metric("upf_datapath_packets_total{outcome=\"redirected\"}") >= 2,
        "SYN, request, ... handed to upfd"
    );
}
