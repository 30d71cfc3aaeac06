//! ICMP for packets that do not fit (issue 30, docs/configuration.md "Packets that do not
//! fit"), end to end in the lab: upfd with its XDP data path, the SMF emulator, the gNB/UE
//! emulator (a TUN per UE in gnb) and the ordinary tools a host uses for path MTU
//! discovery (`ping -M do`, `tracepath`), whose kernels must learn the MTU upfd reports.
//!
//! The lab's N3 link is raised to 1600 octets on both ends, so that a UE's 1500-octet
//! packet fits in its tunnel, and upfd is given `datapath.mtu` below that: the configured
//! MTUs, not the links', decide (they take precedence over the FIB's).
//!
//! Each test builds its own lab (prefix `e-icmp…-`) and removes it; they run one at a
//! time. Root only: elsewhere each test says so and passes. `tracepath` comes from
//! scripts/deps.sh (Debian package iputils-tracepath).

mod common;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::{Duration, Instant};

use common::lab::{
    establish_custom, eventually, expect, expect_none, gpdu, root, run_bounded, serial, udp_in,
    ue_session, LabLoss, LabSmf, LabUpfd, UpfdOptions,
};
use pfcp::msg::Msg;
use pfcp::CauseValue;
use upfbench::gnb::{Gnb, GnbConfig, UeSession};
use upfbench::lab::{addr, Lab, Ns};
use upfbench::report::Direction;
use upfbench::smf::{Session, SessionState};

/// Up to 30 s: what a wait for something that will happen gives it.
const WAIT: Duration = Duration::from_secs(30);

/// The N3 link's MTU on both ends: room for a 1500-octet packet and its tunnel headers.
const N3_LINK_MTU: u32 = 1600;

/// Outer IPv4 (20), UDP (8), GTP-U with the DL PDU Session Container (8 + 4 + 4) that
/// upfd puts on a downlink packet of the SMF emulator's sessions (their QER has QFI 1;
/// [`fragmentation_needed_is_held_to_the_session_budget`] checks the header's length).
const TUNNEL_V4_PSC: u32 = 44;

const SENT: &str = "upf_datapath_packets_total{outcome=\"icmp_sent\"}";
const LIMITED: &str = "upf_datapath_packets_total{outcome=\"icmp_limited\"}";
const MTU_EXCEEDED: &str = "upf_dropped_packets_total{reason=\"mtu_exceeded\"}";
const TTL_EXCEEDED: &str = "upf_dropped_packets_total{reason=\"ttl_exceeded\"}";

/// The lab with N3 at [`N3_LINK_MTU`] on both ends, set before upfd attaches its XDP
/// programs.
fn lab(prefix: &str) -> Lab {
    let lab = Lab::up(prefix).unwrap().down_on_drop();
    let mtu = N3_LINK_MTU.to_string();
    for ns in [Ns::Gnb, Ns::Upf] {
        lab.ip(ns, &["link", "set", "dev", "n3", "mtu", &mtu])
            .unwrap_or_else(|e| panic!("N3 MTU in {}: {e}", lab.ns(ns)));
    }
    lab
}

/// upfd with these `datapath:` keys besides the lab's.
fn upfd(lab: &Lab, datapath: &[&str]) -> LabUpfd {
    LabUpfd::start(
        lab,
        &UpfdOptions {
            datapath: datapath.iter().map(|d| d.to_string()).collect(),
            ..UpfdOptions::default()
        },
    )
}

/// The gNB/UE emulator with 1500-octet TUNs: a UE sends 1500-octet packets.
fn gnb(lab: &Lab, sessions: Vec<UeSession>) -> Gnb {
    Gnb::start(
        GnbConfig {
            netns: Some(lab.ns(Ns::Gnb)),
            mtu: 1500,
            ..GnbConfig::default()
        },
        sessions,
    )
    .expect("starting the gNB/UE emulator")
}

/// `ping -n -c COUNT -i 0.2 -W WAIT ARGS...` in `ns`: replies received, and what it
/// printed (stdout and stderr: the errors it got, a local "message too long").
fn ping(lab: &Lab, ns: Ns, args: &[&str], count: u32, wait_s: u32) -> (u32, String) {
    let mut c = lab.command(ns, "ping");
    c.args(["-n", "-c", &count.to_string(), "-i", "0.2"])
        .args(["-W", &wait_s.to_string()])
        .args(args);
    let out = run_bounded(c, Duration::from_secs(u64::from(count * wait_s) + 10));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let received = text
        .lines()
        .find_map(|l| {
            let (_, rest) = l.split_once(" packets transmitted, ")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(0);
    (received, text)
}

/// `ip route get ARGS...` in `ns`: the route, with what the kernel learned for it.
fn route_get(lab: &Lab, ns: Ns, args: &[&str]) -> String {
    let mut c = lab.command(ns, "ip");
    c.args(args);
    let out = run_bounded(c, Duration::from_secs(30));
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// A UE's 1500-octet packet with DF set, for a 1400-octet N6 (`datapath.mtu.n6`): upfd
/// drops it and sends ICMP Fragmentation Needed with MTU 1400 (nothing is added on N6)
/// from its N6 address back through the UE's tunnel (RFC 1191). The UE's kernel learns
/// it: `ping -M do` of 1500 octets then fails at once with "message too long, mtu=1400",
/// `ip route get` shows the learned MTU, and 1400-octet pings get their replies: path MTU
/// discovery settled. Then `tracepath` from the UE (on its own route: tracepath cannot
/// pick a source address, so a route in gnb's main table gives it the UE's) starts at
/// 1500 octets, is told 1400 by upfd and reaches the data network host with it; its
/// first hop is upfd, whose Time Exceeded for the TTL-1 probes comes from its N6
/// address. Every packet that did not fit or ran out of TTL got its error (`icmp_sent` =
/// `mtu_exceeded` + `ttl_exceeded`, none limited).
#[test]
fn ue_df_packet_gets_fragmentation_needed_and_pmtu_settles() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = lab("e-icmp4-");
    let upfd = upfd(&lab, &["mtu: { n3: 1500, n6: 1400 }"]);
    let mut smf = LabSmf::associate(&lab, |_| {});
    let sessions = smf.establish(1);
    smf.modify();
    let ue = sessions[0].ue_ip.expect("IPv4 UE");
    let g = gnb(&lab, smf.ue_sessions());
    let (ue_s, dn_s) = (ue.to_string(), addr::DN_N6.to_string());

    // The tunnel works: a small ping both ways.
    let (n, text) = ping(&lab, Ns::Gnb, &["-I", &ue_s, &dn_s], 3, 10);
    assert_eq!(n, 3, "UE -> DN: {text}\n{:?}", g.stats());

    // 1500 octets with DF: the error, with the N6 MTU, from upfd's N6 address.
    let (n, text) = ping(
        &lab,
        Ns::Gnb,
        &["-M", "do", "-s", "1472", "-I", &ue_s, &dn_s],
        1,
        3,
    );
    assert_eq!(n, 0, "1500 octets passed a 1400-octet N6: {text}");
    assert!(
        text.contains(&format!("From {} ", addr::UPF_N6))
            && text.contains("Frag needed and DF set (mtu = 1400)"),
        "no Fragmentation Needed with MTU 1400 from upfd's N6 address: {text}\n{}",
        upfd.metrics()
    );
    assert_eq!(upfd.wait_metric(SENT, 1, WAIT), 1, "{SENT}");
    assert_eq!(upfd.metric(MTU_EXCEEDED), 1, "{MTU_EXCEEDED}");
    assert_eq!(upfd.metric(LIMITED), 0, "{LIMITED}");

    // The UE's kernel learned it: 1500 octets refused at the source, the route's MTU.
    let (n, text) = ping(
        &lab,
        Ns::Gnb,
        &["-M", "do", "-s", "1472", "-I", &ue_s, &dn_s],
        1,
        3,
    );
    assert!(
        n == 0 && text.contains("message too long, mtu=1400"),
        "the UE's kernel did not learn the MTU: {text}"
    );
    let route = route_get(&lab, Ns::Gnb, &["route", "get", &dn_s, "from", &ue_s]);
    assert!(route.contains(" mtu 1400"), "ip route get: {route}");
    // What fits passes both ways: 1400 octets (the reply too: 1400 + 44 on N3's 1500).
    let (n, text) = ping(
        &lab,
        Ns::Gnb,
        &["-M", "do", "-s", "1372", "-I", &ue_s, &dn_s],
        3,
        10,
    );
    assert_eq!(n, 3, "1400-octet pings after the error: {text}");
    assert_eq!(upfd.metric(MTU_EXCEEDED), 1, "nothing else too big");

    // tracepath from the UE on a route of its own (a fresh path: nothing learned yet).
    lab.ip(
        Ns::Gnb,
        &[
            "route",
            "add",
            &format!("{dn_s}/32"),
            "dev",
            "ue0",
            "src",
            &ue_s,
        ],
    )
    .expect("a route for tracepath");
    let mut c = lab.command(Ns::Gnb, "tracepath");
    c.args(["-n", "-m", "4", &dn_s]);
    let out = run_bounded(c, Duration::from_secs(90));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains("pmtu 1500") && text.contains("Resume: pmtu 1400"),
        "tracepath did not settle at 1400: {text}{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        upfd.metrics()
    );
    assert!(text.contains("reached"), "tracepath: {text}");
    eprintln!("tracepath from the UE:\n{text}");
    // Hop 1 is upfd: its probes (TTL 1) got Time Exceeded from its N6 address.
    let hop1 = text
        .lines()
        .find(|l| l.trim_start().starts_with("1:") && !l.contains("[LOCALHOST]"))
        .unwrap_or_default();
    assert!(
        hop1.contains(&addr::UPF_N6.to_string()),
        "tracepath's first hop is not upfd: {text}"
    );
    // Every packet too big or out of TTL got its error; none was held back.
    let sent = upfd.metric(SENT);
    let (too_big, ttl) = (upfd.metric(MTU_EXCEEDED), upfd.metric(TTL_EXCEEDED));
    assert!(
        too_big >= 2,
        "tracepath's first probe got no error: {too_big}"
    );
    assert!(ttl >= 1, "tracepath's TTL 1 probes: {ttl}");
    assert_eq!(
        too_big + ttl,
        sent,
        "{MTU_EXCEEDED} + {TTL_EXCEEDED} and {SENT}"
    );
    assert_eq!(upfd.metric(LIMITED), 0, "{LIMITED}");

    let st = g.stop();
    assert_eq!((st.malformed, st.unknown_teid), (0, 0), "{st:?}");
}

/// A data network host's 1500-octet IPv6 packet to a UE's IPv6 address: with the tunnel
/// headers (44 octets) it does not fit N3 (`datapath.mtu.n3: 1500`, though the link
/// carries 1600), so upfd drops it and sends ICMPv6 Packet Too Big with MTU 1456 from its
/// N6 address back to the host on N6 (RFC 8201, RFC 4443 clause 3.2). The host's kernel
/// learns it: `ping -6 -M do` of 1500 octets then fails at the source, `ip -6 route get`
/// shows 1456, and 1456-octet pings get their replies.
#[test]
fn dn_ipv6_packet_gets_packet_too_big_and_pmtu_settles() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = lab("e-icmp6-");
    let upfd = upfd(&lab, &["mtu: { n3: 1500 }"]);
    let smf = LabSmf::associate(&lab, |_| {});
    let ue6 = Ipv6Addr::new(0xfd00, 0x45, 0, 0, 0, 0, 0, 1);
    let s = Session {
        index: 0,
        cp_seid: 0x5000,
        ue_ip: Ipv4Addr::from(u32::from(addr::UE_POOL) + 1),
        gnb_teid: 1,
        up_fseid: None,
        n3_fteid: None,
        state: SessionState::Established,
    };
    let session = establish_dual_stack(&smf, &s, ue6);
    let g = gnb(&lab, vec![session]);
    let ue6_s = ue6.to_string();

    let (n, text) = ping(&lab, Ns::Dn, &["-6", &ue6_s], 3, 10);
    assert_eq!(n, 3, "DN -> UE over IPv6: {text}\n{:?}", g.stats());

    let fits = 1500 - TUNNEL_V4_PSC;
    let (n, text) = ping(
        &lab,
        Ns::Dn,
        &["-6", "-M", "do", "-s", "1452", &ue6_s],
        1,
        3,
    );
    assert_eq!(
        n, 0,
        "1500 octets passed a 1500-octet N3 with the tunnel: {text}"
    );
    assert!(
        text.contains(&format!("From {} ", addr::UPF_N6_V6))
            && text.contains(&format!("Packet too big: mtu={fits}")),
        "no Packet Too Big with MTU {fits} from upfd's N6 address: {text}\n{}",
        upfd.metrics()
    );
    assert_eq!(upfd.wait_metric(SENT, 1, WAIT), 1, "{SENT}");
    assert_eq!(upfd.metric(MTU_EXCEEDED), 1, "{MTU_EXCEEDED}");

    let (n, text) = ping(
        &lab,
        Ns::Dn,
        &["-6", "-M", "do", "-s", "1452", &ue6_s],
        1,
        3,
    );
    assert!(
        n == 0 && text.contains(&format!("message too long, mtu: {fits}")),
        "the host's kernel did not learn the MTU: {text}"
    );
    let route = route_get(&lab, Ns::Dn, &["-6", "route", "get", &ue6_s]);
    assert!(
        route.contains(&format!(" mtu {fits}")),
        "ip -6 route get: {route}"
    );
    // Exactly what fits passes both ways (1456 + 44 octets on N3).
    let size = (fits - 48).to_string();
    let (n, text) = ping(
        &lab,
        Ns::Dn,
        &["-6", "-M", "do", "-s", &size, &ue6_s],
        3,
        10,
    );
    assert_eq!(n, 3, "{fits}-octet pings after the error: {text}");
    assert_eq!(upfd.metric(MTU_EXCEEDED), 1, "nothing else too big");
    assert_eq!(upfd.metric(SENT), 1, "{SENT}");
    assert_eq!(upfd.metric(LIMITED), 0, "{LIMITED}");

    let st = g.stop();
    assert_eq!((st.malformed, st.unknown_teid), (0, 0), "{st:?}");
}

/// The session's budget (`icmp.session_errors_per_sec: 1`, `session_burst: 3`): a fake
/// gNB (a socket on the gNB address the session's downlink FAR names) sends 20 G-PDUs,
/// each a 1500-octet UDP packet with DF from the UE, for a 1400-octet N6. Each is dropped
/// as `mtu_exceeded`; the errors come back in the session's tunnel (TEID, DL PDU Session
/// Container), each ICMP type 3 code 4 with MTU 1400 from upfd's N6 address to the UE,
/// quoting the packet within 576 octets. At least the burst (3) and at most the burst
/// plus one a second over the time that passed arrive, `icmp_sent` counts exactly those
/// and `icmp_limited` the rest. After a pause of 1.5 s the budget has refilled: five more
/// packets get at least one error, and the total stays within the same bound.
#[test]
fn fragmentation_needed_is_held_to_the_session_budget() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = lab("e-icmpb-");
    let upfd = upfd(
        &lab,
        &[
            "mtu: { n3: 1500, n6: 1400 }",
            "icmp: { session_errors_per_sec: 1, session_burst: 3 }",
        ],
    );
    let mut smf = LabSmf::associate(&lab, |_| {});
    let sessions = smf.establish(1);
    smf.modify();
    let s = &sessions[0];
    let ue = s.ue_ip.expect("IPv4 UE");
    let gnb = udp_in(&lab, Ns::Gnb, SocketAddr::new(addr::GNB_N3.into(), 2152));
    let upf = SocketAddr::new(addr::UPF_N3.into(), 2152);
    let dn = udp_in(&lab, Ns::Dn, SocketAddr::new(addr::DN_N6.into(), 7003));

    // The tunnel works: a small packet up, nothing back.
    let small = capture::ip_udp_packet(ue.into(), addr::DN_N6.into(), 4000, 7003, b"fits");
    gnb.send_to(&gpdu(s.ul_teid, Some(1), &small), upf).unwrap();
    assert_eq!(
        expect(&dn, 1, WAIT).len(),
        1,
        "a small packet through the tunnel"
    );

    // 1500 octets, DF set (capture::ip_udp_packet sets it).
    let big = capture::ip_udp_packet(ue.into(), addr::DN_N6.into(), 4000, 7003, &[7; 1472]);
    assert_eq!(big.len(), 1500);
    let loss0 = LabLoss::read(&lab);
    let start = Instant::now();
    let mut total = 0;
    let mut errors = Vec::new();
    for (round, n) in [(0, 20u64), (1, 5)] {
        if round == 1 {
            // Well over a second after the last error the first round could take.
            std::thread::sleep(Duration::from_millis(1500));
        }
        let before = errors.len() as u64;
        for _ in 0..n {
            gnb.send_to(&gpdu(s.ul_teid, Some(1), &big), upf).unwrap();
        }
        total += n;
        // What gnb's n3 could not hand to upf (its ring full) never reached upfd.
        let lost = LabLoss::read(&lab)
            .since(&loss0)
            .before_upfd(Direction::Uplink);
        let seen = total - lost;
        assert_eq!(
            upfd.wait_metric(MTU_EXCEEDED, seen, WAIT),
            seen,
            "{MTU_EXCEEDED}"
        );
        let mut decided = (0, 0);
        let all = eventually(WAIT, || {
            decided = (upfd.metric(SENT), upfd.metric(LIMITED));
            decided.0 + decided.1 == seen
        });
        let elapsed = start.elapsed().as_secs_f64();
        assert!(
            all,
            "errors sent and limited {decided:?} for {seen} packets"
        );
        let sent = decided.0;
        errors.extend(expect(&gnb, (sent - before) as usize, WAIT));
        assert_eq!(errors.len() as u64, sent, "every error counted arrived");
        assert!(
            expect_none(&gnb, Duration::from_millis(300)).is_empty(),
            "more errors than upfd counted"
        );
        let bound = 3 + elapsed.ceil() as u64;
        assert!(
            sent > before && sent <= bound,
            "round {round}: {sent} errors in all for {seen} packets in {elapsed:.2} s \
             (bound {bound}; {} this round)",
            sent - before
        );
        if round == 0 {
            assert!(sent >= 3, "the burst: {sent} errors");
        }
        eprintln!(
            "round {round}: {seen} packets, {sent} errors in all, {} limited, {elapsed:.2} s",
            decided.1
        );
    }
    assert!(
        expect_none(&dn, Duration::from_millis(100)).is_empty(),
        "a packet too big reached the data network"
    );
    for e in &errors {
        check_fragmentation_needed(e, s.gnb_teid, ue, &big);
    }
}

/// `d` is a G-PDU for `teid` with a DL PDU Session Container, carrying ICMP Fragmentation
/// Needed with MTU 1400 from upfd's N6 address to `ue`, quoting `packet`'s first 548
/// octets.
fn check_fragmentation_needed(d: &[u8], teid: u32, ue: Ipv4Addr, packet: &[u8]) {
    let (header, ip) = match gtpu::Message::parse(d) {
        Ok(gtpu::Message::GPdu { header, t_pdu }) => (header, t_pdu.as_bytes()),
        other => panic!("not a G-PDU: {other:?}"),
    };
    assert_eq!(header.teid, teid);
    assert_eq!(
        d.len() - ip.len(),
        (TUNNEL_V4_PSC - 28) as usize,
        "GTP-U header with the DL PDU Session Container: {header:?}"
    );
    assert_eq!(ip.len(), 576, "the error within 576 octets");
    assert_eq!(
        &ip[..4],
        &[0x45, 0, 0x02, 0x40],
        "IPv4 header, total length 576"
    );
    assert_eq!(ip[9], 1, "ICMP");
    assert_eq!(capture::checksum(&ip[..20], 0), 0, "IPv4 header checksum");
    assert_eq!(
        &ip[12..16],
        &addr::UPF_N6.octets(),
        "from upfd's N6 address"
    );
    assert_eq!(&ip[16..20], &ue.octets(), "to the UE");
    let icmp = &ip[20..];
    assert_eq!((icmp[0], icmp[1]), (3, 4), "Fragmentation Needed");
    assert_eq!(capture::checksum(icmp, 0), 0, "ICMP checksum");
    assert_eq!(u16::from_be_bytes([icmp[6], icmp[7]]), 1400, "Next-Hop MTU");
    assert_eq!(&icmp[8..], &packet[..548], "the packet quoted");
}

/// Establish the SMF emulator's template for `s` with IPv6 UE address `ue6` too (PDN type
/// IPv4v6), its downlink forwarding to the gNB at once; the emulator's view of it.
fn establish_dual_stack(smf: &LabSmf, s: &Session, ue6: Ipv6Addr) -> UeSession {
    let (up, fteids) = establish_custom(smf, s, |req| {
        req.pdn_type = Some(3);
        req.create_pdrs[1].pdi.ue_ip_address[0].ipv6 = Some(ue6);
    });
    let ul = fteids.first().expect("the uplink F-TEID").1;
    let req = smf.smf.modification_request(s);
    match smf.transact(&Msg::SessionModificationRequest(req), Some(up)) {
        Msg::SessionModificationResponse(r) => {
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}")
        }
        other => panic!("not a modification response: {other:?}"),
    }
    UeSession {
        ue_ip6: Some(ue6),
        ..ue_session(s, ul)
    }
}
