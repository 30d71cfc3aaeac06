//! The gNB/UE emulator end to end in the lab, with sessions from the SMF emulator (over the
//! N4 veth, against the fake UPF) and a user-space STAND-IN for the UPF's data path (a test
//! double in tests/common, not upfd): ping from each UE to the data network and from the
//! data network to each UE, iperf3 TCP both ways from one UE, Echo Request answered,
//! unknown TEIDs counted, the emulator's counters equal to the stand-in's and to the
//! kernel's counters of its TUNs (under load: every packet either arrived or was dropped
//! where a counter says so), and nothing left behind. Root only; every command is bounded
//! in count and time; rates are printed, never asserted.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::stand_in_upf::{establish_sessions, StandInUpf};
use common::{
    eventually, link_stats, ping, root, run_bounded, udp_drops, wait_bounded, LinkStats, SETTLE,
};
use upfbench::gnb::{load_sessions, Gnb, GnbConfig, GnbStats, GTPU_PORT};
use upfbench::lab::{addr, iface, Lab, Ns};

/// A directory removed when dropped, also when the test fails.
struct TempDir(std::path::PathBuf);

impl std::ops::Deref for TempDir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn temp_dir(name: &str) -> TempDir {
    let d = std::env::temp_dir().join(format!("upfbench-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    TempDir(d)
}

/// What one iperf3 run measured.
#[derive(Debug, Clone, Copy)]
struct Iperf3 {
    /// Received, bits/s (a figure to print, not to assert).
    bits_per_second: f64,
    /// Payload octets the receiving end got.
    bytes: u64,
}

/// iperf3 TCP for 3 s from `ue` to the data network (`reverse`: downlink).
fn iperf3(lab: &Lab, ue: std::net::Ipv4Addr, port: u16, reverse: bool) -> Iperf3 {
    let mut server = lab.command(Ns::Dn, "iperf3");
    server
        .args([
            "-s",
            "-1",
            "-B",
            &addr::DN_N6.to_string(),
            "-p",
            &port.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let server = server.spawn().expect("iperf3 server");
    // The server is up when a connection gets through: retry refusals, however long a
    // busy machine takes to start it (bounded).
    let mut result = None;
    let mut last = String::new();
    let end = Instant::now() + 2 * SETTLE;
    while result.is_none() && Instant::now() < end {
        let mut client = lab.command(Ns::Gnb, "iperf3");
        client.args([
            "-c",
            &addr::DN_N6.to_string(),
            "-B",
            &ue.to_string(),
            "-p",
            &port.to_string(),
            "-t",
            "3",
            "-J",
        ]);
        if reverse {
            client.arg("-R");
        }
        let out = run_bounded(client, 2 * SETTLE);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        let r = &v["end"]["sum_received"];
        result = r["bits_per_second"].as_f64().zip(r["bytes"].as_u64()).map(
            |(bits_per_second, bytes)| Iperf3 {
                bits_per_second,
                bytes,
            },
        );
        last = format!(
            "{}: error {:?}, stderr {:?}",
            out.status,
            v["error"],
            String::from_utf8_lossy(&out.stderr)
        );
        if result.is_none() {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    let server = wait_bounded(server, SETTLE);
    result.unwrap_or_else(|| panic!("iperf3 client: {last}; server: {server:?}"))
}

fn assert_counters_equal(stats: &GnbStats, upf: &StandInUpf) {
    for (i, u) in stats.ues.iter().enumerate() {
        assert_eq!(u.ul_packets, upf.ul(i), "UE {i} uplink: {stats:?}");
        assert_eq!(u.dl_packets, upf.dl(i), "UE {i} downlink: {stats:?}");
        assert_eq!((u.ul_dropped, u.dl_dropped), (0, 0), "UE {i}: {stats:?}");
    }
}

#[test]
fn gnb_emulator_ping_iperf3_through_stand_in_upf() {
    if !root() {
        return;
    }
    assert!(
        common::have("iperf3"),
        "iperf3 is needed (scripts/deps.sh installs it)"
    );
    let prefix = "t-gnb-";
    let lab = Lab::up(prefix).unwrap().down_on_drop();
    let dir = temp_dir("gnb");
    let path = establish_sessions(&lab, 2, &dir);
    let sessions = load_sessions(&path).unwrap();
    assert_eq!(sessions.len(), 2);
    assert_eq!(sessions[0].upf, std::net::IpAddr::from(addr::UPF_N3));

    let upf = StandInUpf::start(&lab, &sessions);
    let gnb = Gnb::start(
        GnbConfig {
            netns: Some(lab.ns(Ns::Gnb)),
            ..GnbConfig::default()
        },
        sessions.clone(),
    )
    .unwrap();
    let links = lab.ip(Ns::Gnb, &["-br", "addr"]).unwrap();
    assert!(
        links.contains("ue0") && links.contains("10.45.0.2/32"),
        "{links}"
    );

    // GTP-U signalling: Echo Request answered, unknown TEID counted and dropped.
    upf.send_echo_request(7);
    assert!(eventually(SETTLE, || upf.echo_responses.load(Relaxed) == 1));
    upf.send_unknown_teid(0xdead);
    assert!(eventually(SETTLE, || gnb.stats().unknown_teid == 1));

    for s in &sessions {
        let ue = s.ue_ip.unwrap();
        assert_eq!(
            ping(&lab, Ns::Gnb, Some(ue), addr::DN_N6, 3),
            3,
            "UE {ue} -> DN"
        );
        assert_eq!(ping(&lab, Ns::Dn, None, ue, 3), 3, "DN -> UE {ue}");
    }
    // Quiet now: every packet counted on one side is counted on the other.
    assert!(eventually(SETTLE, || counts_equal(&gnb.stats(), &upf)));
    let st = gnb.stats();
    assert_counters_equal(&st, &upf);
    for u in &st.ues {
        // 3 echo requests + 3 echo replies each way (iputils may add nothing else).
        assert!(u.ul_packets >= 6 && u.dl_packets >= 6, "{st:?}");
    }
    assert_eq!(
        (
            st.echo_requests,
            st.malformed,
            st.send_errors,
            st.tun_write_errors
        ),
        (1, 0, 0, 0)
    );

    let before = Books::take(&lab, &gnb, &upf);
    let ue0 = sessions[0].ue_ip.unwrap();
    let up = iperf3(&lab, ue0, 5301, false);
    let down = iperf3(&lab, ue0, 5302, true);
    eprintln!(
        "iperf3 TCP through the stand-in UPF, 3 s: uplink {:.0} Mbit/s, downlink {:.0} Mbit/s",
        up.bits_per_second / 1e6,
        down.bits_per_second / 1e6
    );
    assert!(up.bytes > 0 && down.bytes > 0, "{up:?} {down:?}");
    check_after_load(&lab, &gnb, &upf, &before, up, down);

    gnb.stop();
    upf.stop();
    lab.down().unwrap();
    assert!(Lab::present(prefix).is_empty());
}

/// Every counter the load test balances, at one moment: the emulator's, the stand-in's
/// and the kernel's (the UEs' TUNs, both ends of N3, the GTP-U sockets' drops).
#[derive(Debug, Clone, PartialEq)]
struct Books {
    gnb: GnbStats,
    upf_ul: Vec<u64>,
    upf_dl: Vec<u64>,
    upf_unknown: u64,
    upf_malformed: u64,
    upf_ul_tun_errors: u64,
    upf_dl_no_session: u64,
    upf_dl_send_errors: u64,
    /// Datagrams the kernel dropped at the stand-in's socket (receive buffer full).
    upf_socket_drops: u64,
    /// ... and at the emulator's.
    gnb_socket_drops: u64,
    n3_gnb: LinkStats,
    n3_upf: LinkStats,
    /// The UEs' TUNs as the kernel counts them: tx is what the emulator read, rx what it
    /// wrote.
    ue_tuns: Vec<LinkStats>,
    upf0: LinkStats,
}

impl Books {
    fn take(lab: &Lab, gnb: &Gnb, upf: &StandInUpf) -> Books {
        let gnb_stats = gnb.stats();
        let ue_tuns = gnb_stats
            .ues
            .iter()
            .map(|u| link_stats(lab, Ns::Gnb, &u.tun))
            .collect();
        let n = gnb_stats.ues.len();
        Books {
            gnb: gnb_stats,
            upf_ul: (0..n).map(|i| upf.ul(i)).collect(),
            upf_dl: (0..n).map(|i| upf.dl(i)).collect(),
            upf_unknown: upf.unknown_teid.load(Relaxed),
            upf_malformed: upf.malformed.load(Relaxed),
            upf_ul_tun_errors: upf.ul_tun_errors.load(Relaxed),
            upf_dl_no_session: upf.dl_no_session.load(Relaxed),
            upf_dl_send_errors: upf.dl_send_errors.load(Relaxed),
            upf_socket_drops: udp_drops(lab, Ns::Upf, GTPU_PORT),
            gnb_socket_drops: udp_drops(lab, Ns::Gnb, GTPU_PORT),
            n3_gnb: link_stats(lab, Ns::Gnb, iface::N3),
            n3_upf: link_stats(lab, Ns::Upf, iface::N3),
            ue_tuns,
            upf0: link_stats(lab, Ns::Upf, "upf0"),
        }
    }
}

/// Where the G-PDUs sent between `before` and `after` went, per direction: sent, arrived
/// (counted by the receiver whatever it did with them), dropped at the receiving socket,
/// and the rest, which can only have been dropped on the N3 veth pair.
#[derive(Debug)]
struct Balance {
    ul: [i64; 4],
    dl: [i64; 4],
    n3_drops: i64,
}

impl Balance {
    fn of(before: &Books, after: &Books) -> Balance {
        let d = |a: u64, b: u64| a as i64 - b as i64;
        let sum = |v: &[u64]| v.iter().sum::<u64>();
        let (g0, g1) = (&before.gnb, &after.gnb);
        let ul_sent = d(g1.ul_packets(), g0.ul_packets());
        let ul_arrived = d(sum(&after.upf_ul), sum(&before.upf_ul))
            + d(after.upf_ul_tun_errors, before.upf_ul_tun_errors)
            + d(after.upf_malformed, before.upf_malformed)
            + d(after.upf_unknown, before.upf_unknown);
        let ul_socket = d(after.upf_socket_drops, before.upf_socket_drops);
        let dl_dropped = |g: &GnbStats| g.ues.iter().map(|u| u.dl_dropped).sum::<u64>();
        let dl_sent = d(sum(&after.upf_dl), sum(&before.upf_dl));
        let dl_arrived = d(g1.dl_packets(), g0.dl_packets())
            + d(dl_dropped(g1), dl_dropped(g0))
            + d(g1.unknown_teid, g0.unknown_teid)
            + d(g1.malformed, g0.malformed);
        let dl_socket = d(after.gnb_socket_drops, before.gnb_socket_drops);
        let drops = |l: &LinkStats| l.rx_dropped + l.tx_dropped;
        Balance {
            ul: [
                ul_sent,
                ul_arrived,
                ul_socket,
                ul_sent - ul_arrived - ul_socket,
            ],
            dl: [
                dl_sent,
                dl_arrived,
                dl_socket,
                dl_sent - dl_arrived - dl_socket,
            ],
            n3_drops: d(drops(&after.n3_gnb), drops(&before.n3_gnb))
                + d(drops(&after.n3_upf), drops(&before.n3_upf)),
        }
    }

    /// Every packet accounted for: what is missing was dropped on N3, as it counts.
    fn holds(&self) -> bool {
        self.ul[3] >= 0 && self.dl[3] >= 0 && self.ul[3] + self.dl[3] == self.n3_drops
    }
}

/// TCP at full speed fills some queue until it overflows (a TUN queue, a socket buffer,
/// the veth's backlog): the test names each loss by the counter of where it happened
/// instead of bounding it. Once nothing moves any more (bounded wait): every G-PDU the
/// emulator sent arrived at the stand-in or was dropped at its socket or on N3, and the
/// same downlink; the emulator's counters equal the kernel's counts of its TUNs; the
/// emulator's own drops are its named errors; every payload octet iperf3 received went
/// through the emulator.
fn check_after_load(
    lab: &Lab,
    gnb: &Gnb,
    upf: &StandInUpf,
    before: &Books,
    up: Iperf3,
    down: Iperf3,
) {
    let mut prev: Option<Books> = None;
    let settled = eventually(SETTLE, || {
        let now = Books::take(lab, gnb, upf);
        let ok = prev.as_ref() == Some(&now) && Balance::of(before, &now).holds();
        prev = Some(now);
        ok
    });
    let after = prev.expect("taken at least once");
    let b = Balance::of(before, &after);
    let report = format!(
        "[sent, arrived, dropped at the socket, missing]: uplink {:?}, downlink {:?}; \
         N3 veth drops {}\nbefore {before:#?}\nafter {after:#?}",
        b.ul, b.dl, b.n3_drops
    );
    assert!(settled, "unaccounted packets after {SETTLE:?}: {report}");

    let (g0, g1) = (&before.gnb, &after.gnb);
    for (i, (u0, u1)) in g0.ues.iter().zip(&g1.ues).enumerate() {
        let tun = after.ue_tuns[i].since(&before.ue_tuns[i]);
        assert_eq!(
            tun.tx_packets,
            (u1.ul_packets + u1.ul_dropped) - (u0.ul_packets + u0.ul_dropped),
            "UE {i}: read from its TUN: {report}"
        );
        assert_eq!(
            tun.rx_packets,
            u1.dl_packets - u0.dl_packets,
            "UE {i}: written to its TUN: {report}"
        );
    }
    let sum =
        |g: &GnbStats, f: fn(&upfbench::gnb::UeStats) -> u64| g.ues.iter().map(f).sum::<u64>();
    assert_eq!(
        sum(g1, |u| u.ul_dropped),
        g1.send_errors,
        "uplink drops are failed sends: {report}"
    );
    assert_eq!(
        sum(g1, |u| u.dl_dropped),
        g1.tun_write_errors,
        "downlink drops are failed TUN writes: {report}"
    );
    // UE 1 was idle: nothing to lose.
    assert_eq!(g1.ues[1].ul_packets, upf.ul(1), "{report}");
    assert_eq!(g1.ues[1].dl_packets, upf.dl(1), "{report}");
    assert_eq!(
        (after.upf_unknown, after.upf_malformed, g1.malformed),
        (0, 0, 0),
        "{report}"
    );
    let (u0, u1) = (&g0.ues[0], &g1.ues[0]);
    assert!(
        u1.ul_bytes - u0.ul_bytes >= up.bytes,
        "iperf3 received {} octets uplink, the emulator sent {}: {report}",
        up.bytes,
        u1.ul_bytes - u0.ul_bytes
    );
    assert!(
        u1.dl_bytes - u0.dl_bytes >= down.bytes,
        "iperf3 received {} octets downlink, the emulator delivered {}: {report}",
        down.bytes,
        u1.dl_bytes - u0.dl_bytes
    );
    let ue0 = after.ue_tuns[0].since(&before.ue_tuns[0]);
    let upf0 = after.upf0.since(&before.upf0);
    eprintln!(
        "UE 0 under iperf3, G-PDUs [sent, arrived, dropped at the socket, dropped on N3]: \
         uplink {:?}, downlink {:?}; dropped before being read: UE 0's TUN queue {}, upf0's \
         {}; emulator send errors {}, TUN write errors {}; stand-in TUN write errors {}, \
         send errors {}",
        b.ul,
        b.dl,
        ue0.tx_dropped,
        upf0.tx_dropped,
        g1.send_errors,
        g1.tun_write_errors,
        after.upf_ul_tun_errors,
        after.upf_dl_send_errors
    );
}

fn counts_equal(stats: &GnbStats, upf: &StandInUpf) -> bool {
    stats
        .ues
        .iter()
        .enumerate()
        .all(|(i, u)| u.ul_packets == upf.ul(i) && u.dl_packets == upf.dl(i))
}

#[test]
fn gnb_cli_in_netns_prints_counters_on_sigterm() {
    if !root() {
        return;
    }
    let prefix = "t-gnbcli-";
    let lab = Lab::up(prefix).unwrap().down_on_drop();
    let dir = temp_dir("gnbcli");
    let path = establish_sessions(&lab, 2, &dir);
    let sessions = load_sessions(&path).unwrap();
    let upf = StandInUpf::start(&lab, &sessions);

    let mut cmd = lab.command(Ns::Gnb, env!("CARGO_BIN_EXE_upfbench"));
    // Counters every second, to see when they settle; --seconds only as a backstop.
    cmd.args(["gnb", "--sessions"])
        .arg(&path)
        .args(["--json", "--stats", "1", "--seconds", "600"])
        // N3 delays: the pings and the unknown TEID go through them.
        .args(["--dl-delay-ms", "20", "--ul-delay-ms", "10"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let lines = |pipe: Box<dyn std::io::Read + Send>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        rx
    };
    let err = lines(Box::new(child.stderr.take().unwrap()));
    let out = lines(Box::new(child.stdout.take().unwrap()));
    let up = err.recv_timeout(2 * SETTLE).unwrap_or_default();
    assert!(up.starts_with("gnb: up: 2 UEs"), "{up}");
    assert!(up.ends_with("N3 delay 20 ms down, 10 ms up"), "{up}");

    for s in &sessions {
        let ue = s.ue_ip.unwrap();
        assert_eq!(ping(&lab, Ns::Gnb, Some(ue), addr::DN_HOSTS[0], 2), 2);
        assert_eq!(ping(&lab, Ns::Dn, None, ue, 1), 1);
    }
    upf.send_unknown_teid(0xbeef);
    // Until the emulator's own report shows the unknown TEID and every packet the
    // stand-in counted: then nothing is in flight.
    let mut last = String::new();
    let settled = eventually(SETTLE, || {
        while let Ok(l) = out.try_recv() {
            last = l;
        }
        serde_json::from_str::<GnbStats>(&last)
            .is_ok_and(|st| st.unknown_teid == 1 && counts_equal(&st, &upf))
    });
    assert!(settled, "the emulator's last counters: {last}");

    // SIGTERM to the emulator we started (ip netns exec execs it: same pid).
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let exit = wait_bounded(child, SETTLE);
    assert!(exit.status.success(), "{exit:?}");
    // Its last line, printed on the way out: the final counters.
    let end = Instant::now() + SETTLE;
    while let Ok(l) = out.recv_timeout(end.saturating_duration_since(Instant::now())) {
        last = l;
    }
    let st: GnbStats = serde_json::from_str(&last).expect("final counters as JSON");
    assert_counters_equal(&st, &upf);
    assert_eq!(st.unknown_teid, 1);
    for u in &st.ues {
        assert!(u.ul_packets >= 3 && u.dl_packets >= 3, "{st:?}");
    }
    // The emulator removed its policy rules; its TUNs went with it.
    let rules = lab.ip(Ns::Gnb, &["rule"]).unwrap();
    assert!(!rules.contains("10.45.0.1"), "{rules}");
    assert!(!lab.ip(Ns::Gnb, &["link"]).unwrap().contains("ue0"));

    upf.stop();
    lab.down().unwrap();
    assert!(Lab::present(prefix).is_empty());
}

/// Four UEs, one iperf3 TCP stream each, at once (3 s, uplink then downlink). A measurement,
/// not a check: `cargo test --release -p upfbench --test gnb -- --ignored --nocapture`.
#[test]
#[ignore = "measurement: run by hand"]
fn gnb_four_ues_iperf3_at_once() {
    if !root() {
        return;
    }
    let prefix = "t-gnb4-";
    let lab = Lab::up(prefix).unwrap().down_on_drop();
    let dir = temp_dir("gnb4");
    let path = establish_sessions(&lab, 4, &dir);
    let sessions = load_sessions(&path).unwrap();
    let upf = StandInUpf::start(&lab, &sessions);
    let gnb = Gnb::start(
        GnbConfig {
            netns: Some(lab.ns(Ns::Gnb)),
            ..GnbConfig::default()
        },
        sessions.clone(),
    )
    .unwrap();
    for reverse in [false, true] {
        let rates: Vec<f64> = std::thread::scope(|s| {
            let handles: Vec<_> = sessions
                .iter()
                .enumerate()
                .map(|(i, se)| {
                    let lab = &lab;
                    let ue = se.ue_ip.unwrap();
                    s.spawn(move || iperf3(lab, ue, 5400 + i as u16, reverse).bits_per_second)
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        eprintln!(
            "4 UEs, iperf3 TCP {}: {:?} Mbit/s, total {:.0} Mbit/s",
            if reverse { "downlink" } else { "uplink" },
            rates.iter().map(|r| (r / 1e6).round()).collect::<Vec<_>>(),
            rates.iter().sum::<f64>() / 1e6
        );
    }
    let st = gnb.stop();
    eprint!("{}", st.table());
    upf.stop();
    lab.down().unwrap();
}

/// The 64-bit timestamp format of RFC 5905 clause 6, written here apart from the
/// emulator's: seconds since 1900 (modulo 2^32) and the fraction in units of 2^-32 s.
fn ntp(t: std::time::SystemTime) -> u64 {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap();
    let secs = (d.as_secs() + 2_208_988_800) % (1 << 32);
    let frac = (u128::from(d.subsec_nanos()) << 32) / 1_000_000_000;
    (secs << 32) | frac as u64
}

/// A duration in units of 2^-32 s (rounded down), to compare NTP time stamps with.
fn ntp_units(d: Duration) -> u64 {
    ((d.as_nanos() << 32) / 1_000_000_000) as u64
}

/// RFC 1071 checksum.
fn inet_checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An ICMP echo request from `src` to `dst`, id 0x5157, sequence `seq`, 8 octets of data.
fn echo_request(src: std::net::Ipv4Addr, dst: std::net::Ipv4Addr, seq: u16) -> Vec<u8> {
    let mut icmp = vec![8, 0, 0, 0, 0x51, 0x57];
    icmp.extend_from_slice(&seq.to_be_bytes());
    icmp.extend_from_slice(b"qosmon\0\0");
    let c = inet_checksum(&icmp);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 1, 0, 0];
    ip[2..4].copy_from_slice(&((20 + icmp.len()) as u16).to_be_bytes());
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let c = inet_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip.extend_from_slice(&icmp);
    ip
}

/// A DL G-PDU as a UPF sends it: DL PDU SESSION INFORMATION with QFI `qfi` and, with
/// `t1`, QMP set and that DL Sending Time Stamp (TS 38.415 clause 5.5.2.1); then `t_pdu`.
fn dl_gpdu(teid: u32, qfi: u8, t1: Option<u64>, t_pdu: &[u8]) -> Vec<u8> {
    let mut header = gtpu::Header::new(teid);
    let mut dl = gtpu::DlPduSessionInfo::new(qfi);
    dl.dl_sending_time_stamp = t1;
    header
        .extension_headers
        .push(gtpu::ExtensionHeader::PduSessionContainer(
            gtpu::PduSessionContainer::Dl(dl),
        ));
    let m = gtpu::Message::GPdu {
        header,
        t_pdu: gtpu::TPdu(t_pdu),
    };
    m.to_vec().unwrap()
}

/// What the fake UPF received from the emulator, and when.
#[derive(Debug, Clone)]
struct Received {
    data: Vec<u8>,
    at: std::time::SystemTime,
}

/// The UL PDU SESSION INFORMATION time stamps of a QoS monitoring answer, if `data` is
/// one.
fn answer_time_stamps(data: &[u8]) -> Option<gtpu::UlTimeStamps> {
    let gtpu::Message::GPdu { header, .. } = gtpu::Message::parse(data).ok()? else {
        return None;
    };
    header.extension_headers.iter().find_map(|h| match h {
        gtpu::ExtensionHeader::PduSessionContainer(gtpu::PduSessionContainer::Ul(ul)) => {
            ul.qos_monitoring
        }
        _ => None,
    })
}

/// tshark's view of one GTP-U datagram from the gNB to the UPF, decoded as GTP-U
/// (`-d udp.port==2152,gtp`): the fields named, tab-separated. None without tshark.
fn tshark_fields(data: &[u8], dir: &std::path::Path, fields: &[&str]) -> Option<Vec<String>> {
    if !common::have("tshark") {
        eprintln!("tshark not found: the answer is not checked against it");
        return None;
    }
    let pcap = dir.join("answer.pcap");
    let packet = capture::ip_udp_packet(
        addr::GNB_N3.into(),
        addr::UPF_N3.into(),
        GTPU_PORT,
        GTPU_PORT,
        data,
    );
    let mut w = capture::PcapWriter::new(
        std::fs::File::create(&pcap).unwrap(),
        capture::linktype::RAW,
    )
    .unwrap();
    w.write(0, &packet).unwrap();
    drop(w);
    let mut cmd = std::process::Command::new("tshark");
    cmd.args(["-n", "-r"])
        .arg(&pcap)
        .args(["-d", "udp.port==2152,gtp", "-T", "fields"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = run_bounded(cmd, SETTLE);
    assert!(out.status.success(), "tshark: {out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.trim_end_matches('\n')
            .split('\t')
            .map(str::to_string)
            .collect(),
    )
}

/// QoS monitoring (TS 23.501 clause 5.33.3.2) with downlink delay `dl` and uplink delay
/// `ul`, against a fake UPF's N3 socket in upf (no stand-in, no UPF): a DL G-PDU with
/// QMP and no T-PDU gets exactly one answer on the uplink TEID, octet by octet, with T1
/// repeated, T1 + dl <= T2 <= T3 and T3 + ul <= the time the fake UPF received it; a DL
/// ICMP echo request with QMP reaches the UE (whose kernel answers it through the
/// emulator's uplink) and is answered; one without QMP reaches the UE and is not
/// answered. Only order and lower bounds of time are asserted.
fn qos_monitoring_case(prefix: &str, dl: Duration, ul: Duration) {
    use std::net::{IpAddr, Ipv4Addr, UdpSocket};
    use std::time::SystemTime;

    let lab = Lab::up(prefix).unwrap().down_on_drop();
    let dir = temp_dir(prefix.trim_end_matches('-'));
    let ue_ip = Ipv4Addr::new(10, 45, 0, 1);
    let (gnb_teid, ul_teid, qfi) = (0x1001, 0x0002_2002, 9);
    let session = upfbench::gnb::UeSession {
        index: 0,
        ue_ip: Some(ue_ip),
        ue_ip6: None,
        gnb_teid,
        ul_teid,
        upf: IpAddr::V4(addr::UPF_N3),
    };
    let upf = upfbench::lab::in_netns(Some(&lab.ns(Ns::Upf)), || {
        UdpSocket::bind((addr::UPF_N3, GTPU_PORT))
    })
    .unwrap()
    .expect("the fake UPF's N3 socket");
    upf.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let gnb = Gnb::start(
        GnbConfig {
            netns: Some(lab.ns(Ns::Gnb)),
            dl_delay: dl,
            ul_delay: ul,
            ..GnbConfig::default()
        },
        vec![session],
    )
    .unwrap();
    let to_gnb = (addr::GNB_N3, GTPU_PORT);

    // Until `until` holds of what came, or SETTLE; then a quiet 500 ms more, so that
    // an extra answer would be seen.
    let collect = |until: &dyn Fn(&[Received]) -> bool| {
        let mut got: Vec<Received> = Vec::new();
        let mut buf = [0u8; 2048];
        let end = Instant::now() + SETTLE;
        let mut quiet_until: Option<Instant> = None;
        loop {
            let now = Instant::now();
            if quiet_until.is_some_and(|q| now >= q) || now >= end {
                break;
            }
            if let Ok((n, from)) = upf.recv_from(&mut buf) {
                let at = SystemTime::now();
                assert_eq!(from, (addr::GNB_N3, GTPU_PORT).into());
                got.push(Received {
                    data: buf[..n].to_vec(),
                    at,
                });
            }
            if quiet_until.is_none() && until(&got) {
                quiet_until = Some(Instant::now() + Duration::from_millis(500));
            }
        }
        got
    };
    let is_echo_reply = |r: &Received, seq: u16| {
        gtpu::parse_gpdu(&r.data).is_ok_and(|i| {
            let p = i.payload(&r.data);
            i.teid == ul_teid
                && p.len() >= 28
                && p[9] == 1
                && p[12..16] == ue_ip.octets()
                && p[20] == 0
                && p[26..28] == seq.to_be_bytes()
        })
    };

    // 1. No QMP: delivered (the UE's kernel answers), not answered by the gNB.
    let t_pdu = echo_request(addr::DN_N6, ue_ip, 1);
    upf.send_to(&dl_gpdu(gnb_teid, qfi, None, &t_pdu), to_gnb)
        .unwrap();
    let got = collect(&|g| g.iter().any(|r| is_echo_reply(r, 1)));
    assert_eq!(got.len(), 1, "only the UE's echo reply: {got:02x?}");
    assert!(is_echo_reply(&got[0], 1), "{got:02x?}");
    assert_eq!(answer_time_stamps(&got[0].data), None);

    // 2. QMP, no T-PDU (a dummy monitoring packet): exactly one answer.
    let t1 = ntp(SystemTime::now());
    upf.send_to(&dl_gpdu(gnb_teid, qfi, Some(t1), &[]), to_gnb)
        .unwrap();
    let got = collect(&|g| !g.is_empty());
    assert_eq!(got.len(), 1, "one answer: {got:02x?}");
    let answer = &got[0];
    let a = &answer.data;
    assert_eq!(a.len(), 40, "{a:02x?}");
    assert_eq!(
        a[..15],
        [
            0x34, 0xff, 0x00, 0x20, // E flag, G-PDU, Length 32: no T-PDU
            0x00, 0x02, 0x20, 0x02, // the uplink TEID
            0, 0, 0, 0x85, // no sequence number or N-PDU number; a PDU Session Container
            7, 0x18, qfi, // 28 octets; UL PDU SESSION INFORMATION, QMP alone; the QFI
        ],
        "{a:02x?}"
    );
    assert_eq!(a[39], 0, "no further extension header");
    let ts = answer_time_stamps(a).expect("QoS monitoring time stamps");
    assert_eq!(a[15..23], t1.to_be_bytes());
    assert_eq!(ts.dl_sending_time_stamp_repeated, t1);
    assert!(
        ts.dl_received_time_stamp >= t1 + ntp_units(dl),
        "T2 {:#x} before T1 {t1:#x} + {dl:?}",
        ts.dl_received_time_stamp
    );
    assert!(
        ts.ul_sending_time_stamp >= ts.dl_received_time_stamp,
        "{ts:?}"
    );
    assert!(
        ntp(answer.at) >= ts.ul_sending_time_stamp + ntp_units(ul),
        "received at {:#x}, before T3 + {ul:?}: {ts:?}",
        ntp(answer.at)
    );
    let m = gtpu::Message::parse(a).unwrap();
    assert!(
        matches!(&m, gtpu::Message::GPdu { header, t_pdu } if header.teid == ul_teid && t_pdu.0.is_empty()),
        "{m:?}"
    );
    assert_eq!(m.to_vec().unwrap(), *a, "re-encodes to the same octets");
    let fields = [
        "frame.protocols",
        "gtp.teid",
        "gtp.length",
        "gtp.ext_hdr.length",
        "gtp.ext_hdr.pdu_ses_con.pdu_type",
        // tshark 4.0 shows the flag bits of a UL container's first octet (QMP, DL
        // Delay Ind, UL Delay Ind, SNP) as one spare field: QMP alone is 0x08.
        "gtp.spare.h1",
        "gtp.ext_hdr.pdu_ses_con.qos_flow_id",
    ];
    if let Some(t) = tshark_fields(a, &dir, &fields) {
        assert_eq!(
            t,
            [
                "raw:ip:udp:gtp",
                "0x00022002",
                "32",
                "7",
                "1",
                "0x08",
                &qfi.to_string()
            ],
            "tshark's fields {fields:?}"
        );
    }

    // 3. QMP and a T-PDU: delivered to the UE and answered.
    let t1 = ntp(SystemTime::now());
    let t_pdu = echo_request(addr::DN_N6, ue_ip, 2);
    upf.send_to(&dl_gpdu(gnb_teid, qfi, Some(t1), &t_pdu), to_gnb)
        .unwrap();
    let got = collect(&|g| g.len() >= 2);
    assert_eq!(
        got.len(),
        2,
        "an answer and the UE's echo reply: {got:02x?}"
    );
    let answers: Vec<_> = got
        .iter()
        .filter_map(|r| answer_time_stamps(&r.data).map(|ts| (r, ts)))
        .collect();
    assert_eq!(answers.len(), 1, "{got:02x?}");
    let (r, ts) = answers[0];
    assert_eq!(r.data.len(), 40, "the answer carries no T-PDU");
    assert_eq!(r.data[4..8], ul_teid.to_be_bytes());
    assert_eq!(r.data[14], qfi);
    assert_eq!(ts.dl_sending_time_stamp_repeated, t1);
    assert!(ts.dl_received_time_stamp >= t1 + ntp_units(dl), "{ts:?}");
    assert!(
        ts.ul_sending_time_stamp >= ts.dl_received_time_stamp,
        "{ts:?}"
    );
    assert!(got.iter().any(|r| is_echo_reply(r, 2)), "{got:02x?}");

    let st = gnb.stop();
    assert_eq!(
        st.ues[0].dl_packets, 2,
        "two echo requests delivered: {st:?}"
    );
    assert_eq!(st.ues[0].ul_packets, 2, "two echo replies: {st:?}");
    assert_eq!(
        (
            st.qos_monitoring,
            st.qos_answers,
            st.malformed,
            st.unknown_teid
        ),
        (2, 2, 0, 0),
        "{st:?}"
    );
    assert_eq!(
        (
            st.ues[0].dl_dropped,
            st.send_errors,
            st.dl_delay_dropped,
            st.ul_delay_dropped
        ),
        (0, 0, 0, 0),
        "{st:?}"
    );
    lab.down().unwrap();
    assert!(Lab::present(prefix).is_empty());
}

#[test]
fn gnb_answers_qos_monitoring() {
    if !root() {
        return;
    }
    qos_monitoring_case("t-gnbqm-", Duration::ZERO, Duration::ZERO);
}

/// The Done-when figure of issue 30 needs at least 20 ms; 40 ms down, 30 ms up here.
#[test]
fn gnb_answers_qos_monitoring_after_its_delays() {
    if !root() {
        return;
    }
    qos_monitoring_case(
        "t-gnbqd-",
        Duration::from_millis(40),
        Duration::from_millis(30),
    );
}
