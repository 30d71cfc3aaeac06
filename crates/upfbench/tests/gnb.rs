//! The gNB/UE emulator end to end in the lab, with sessions from the SMF emulator (over the
//! N4 veth, against the fake UPF) and a user-space STAND-IN for the UPF's data path (a test
//! double in tests/common, not upfd): ping from each UE to the data network and from the
//! data network to each UE, iperf3 TCP both ways from one UE, Echo Request answered,
//! unknown TEIDs counted, the emulator's counters equal to the stand-in's, and nothing left
//! behind. Root only; every command is bounded in count and time.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use common::stand_in_upf::{establish_sessions, StandInUpf};
use common::{eventually, ping, root, run_bounded, wait_bounded};
use upfbench::gnb::{load_sessions, Gnb, GnbConfig, GnbStats};
use upfbench::lab::{addr, Lab, Ns};

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

/// iperf3 TCP for 3 s from `ue` to the data network (`reverse`: downlink); bits/s received.
fn iperf3(lab: &Lab, ue: std::net::Ipv4Addr, port: u16, reverse: bool) -> f64 {
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
    // The server is up when a connection gets through: retry refusals for up to 10 s.
    let mut result = None;
    let mut last = String::new();
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while result.is_none() && std::time::Instant::now() < end {
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
        let out = run_bounded(client, Duration::from_secs(15));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        result = v["end"]["sum_received"]["bits_per_second"].as_f64();
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
    let server = wait_bounded(server, Duration::from_secs(5));
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
    assert!(eventually(Duration::from_secs(2), || upf
        .echo_responses
        .load(std::sync::atomic::Ordering::Relaxed)
        == 1));
    upf.send_unknown_teid(0xdead);
    assert!(eventually(Duration::from_secs(2), || gnb
        .stats()
        .unknown_teid
        == 1));

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
    assert!(eventually(Duration::from_secs(2), || {
        let st = gnb.stats();
        (0..2).all(|i| st.ues[i].ul_packets == upf.ul(i) && st.ues[i].dl_packets == upf.dl(i))
    }));
    let st = gnb.stats();
    assert_counters_equal(&st, &upf);
    for u in &st.ues {
        // 3 echo requests + 3 echo replies each way (iputils may add nothing else).
        assert!(u.ul_packets >= 6 && u.dl_packets >= 6, "{st:?}");
    }
    assert_eq!((st.echo_requests, st.malformed), (1, 0));

    let ue0 = sessions[0].ue_ip.unwrap();
    let up = iperf3(&lab, ue0, 5301, false);
    let down = iperf3(&lab, ue0, 5302, true);
    eprintln!(
        "iperf3 TCP through the stand-in UPF, 3 s: uplink {:.0} Mbit/s, downlink {:.0} Mbit/s",
        up / 1e6,
        down / 1e6
    );
    assert!(up > 10e6 && down > 10e6, "up {up} down {down}");

    let st = gnb.stop();
    check_after_load(&st, &upf);
    upf.stop();
    lab.down().unwrap();
    assert!(Lab::present(prefix).is_empty());
}

/// TCP at full speed fills some queue until it overflows (a UDP socket buffer of either
/// side, a TUN queue): every packet the stand-in counts was counted by the emulator, every
/// packet the emulator delivered was sent by the stand-in, and most got through.
fn check_after_load(st: &GnbStats, upf: &StandInUpf) {
    let u = &st.ues[0];
    assert!(upf.ul(0) <= u.ul_packets, "{st:?}");
    assert!(u.dl_packets <= upf.dl(0), "{st:?}");
    assert!(u.ul_packets > 1000 && u.dl_packets > 1000, "{st:?}");
    assert!(
        upf.ul(0) * 10 >= u.ul_packets * 9,
        "uplink loss over 10 %: {st:?}"
    );
    assert!(
        u.dl_packets * 10 >= upf.dl(0) * 9,
        "downlink loss over 10 %: {st:?}"
    );
    eprintln!(
        "UE 0 under iperf3: uplink {} sent by the emulator, {} received by the stand-in; downlink {} sent by the stand-in, {} delivered by the emulator",
        u.ul_packets,
        upf.ul(0),
        upf.dl(0),
        u.dl_packets
    );
    assert_eq!(st.ues[1].ul_packets, upf.ul(1));
    assert_eq!(st.ues[1].dl_packets, upf.dl(1));
    assert_eq!(
        (
            u.ul_dropped,
            u.dl_dropped,
            st.send_errors,
            st.tun_write_errors
        ),
        (0, 0, 0, 0)
    );
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
    cmd.args(["gnb", "--sessions"])
        .arg(&path)
        .args(["--json", "--seconds", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let up = rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
    assert!(up.starts_with("gnb: up: 2 UEs"), "{up}");

    for s in &sessions {
        let ue = s.ue_ip.unwrap();
        assert_eq!(ping(&lab, Ns::Gnb, Some(ue), addr::DN_HOSTS[0], 2), 2);
        assert_eq!(ping(&lab, Ns::Dn, None, ue, 1), 1);
    }
    upf.send_unknown_teid(0xbeef);
    std::thread::sleep(Duration::from_millis(300));

    // SIGTERM to the emulator we started (ip netns exec execs it: same pid).
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let out = wait_bounded(child, Duration::from_secs(10));
    assert!(out.status.success(), "{out:?}");
    let st: GnbStats = serde_json::from_slice(&out.stdout).expect("final counters as JSON");
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
                    s.spawn(move || iperf3(lab, ue, 5400 + i as u16, reverse))
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
