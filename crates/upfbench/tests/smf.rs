//! The SMF emulator against the in-process fake UPF: association, 1000 sessions with
//! CHOOSE, modification, deletion and release, with the UPF's own heartbeats and reports
//! answered; explicit TEIDs at a paced rate; rejections counted by Cause; retransmission
//! and timeout bounded by T1 and N1; the CLI's JSON report. Loopback only. Rates and
//! latencies are printed, never asserted; waits return when their condition holds.

mod common;

use std::collections::HashSet;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use common::{run_bounded, SETTLE};

use upfbench::smf::fake_upf::{FakeUpf, FakeUpfConfig};
use upfbench::smf::{Pace, PhaseReport, SessionState, Smf, SmfConfig, TeidMode, Timers};

fn consistent(p: &PhaseReport) {
    assert_eq!(
        p.requests,
        p.accepted + p.rejected + p.timed_out + p.errors,
        "{p:?}"
    );
    assert_eq!(
        p.rejected,
        p.rejections.iter().map(|r| r.count).sum::<usize>()
    );
    assert!(p.latency.p50_ms <= p.latency.p99_ms && p.latency.p99_ms <= p.latency.max_ms);
    if p.accepted > 0 {
        assert!(p.per_second > 0.0 && p.elapsed_s > 0.0);
    }
}

fn config(upf: std::net::SocketAddr) -> SmfConfig {
    let mut c = SmfConfig::new(upf);
    c.bind = "127.0.0.1:0".parse().unwrap();
    c
}

/// Wait (bounded, generously) until `f` holds.
async fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + SETTLE;
    while Instant::now() < end {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    f()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn smf_runs_1000_sessions_with_choose_through_every_phase() {
    let upf = FakeUpf::start(FakeUpfConfig {
        n3: Ipv4Addr::new(127, 0, 0, 9),
        heartbeat_after_association: true,
        report_every: Some(100),
        ..FakeUpfConfig::default()
    })
    .await
    .unwrap();
    let mut cfg = config(upf.addr());
    cfg.dl_buffer = true;
    let mut smf = Smf::connect(cfg).await.unwrap();

    let a = smf.associate().await;
    consistent(&a);
    assert_eq!((a.requests, a.accepted), (1, 1));
    assert!(smf.uses_choose(), "the fake announces FTUP");

    let pace = Pace {
        rate: 0.0,
        in_flight: 32,
    };
    let e = smf.establish(1000, pace).await;
    consistent(&e);
    assert_eq!((e.requests, e.accepted, e.timed_out), (1000, 1000, 0));
    let sessions = smf.sessions();
    assert_eq!(sessions.len(), 1000);
    let mut teids = HashSet::new();
    let mut ues = HashSet::new();
    let mut seids = HashSet::new();
    for s in sessions {
        assert_eq!(s.state, SessionState::Established);
        let f = s.n3_fteid.expect("allocated F-TEID recorded");
        assert_eq!(f.ipv4, Some(Ipv4Addr::new(127, 0, 0, 9)));
        assert!(teids.insert(f.teid.unwrap()), "TEIDs are unique");
        assert!(ues.insert(s.ue_ip));
        assert!(seids.insert(s.up_fseid.unwrap().seid));
        assert_eq!(s.gnb_teid, s.index as u32 + 1);
    }
    assert_eq!(sessions[0].ue_ip, Ipv4Addr::new(10, 45, 0, 1));
    // What the fake holds is what we recorded.
    let held = upf.sessions();
    for s in sessions {
        assert_eq!(held.get(&s.up_fseid.unwrap().seid), Some(&s.cp_seid));
    }

    let m = smf.modify(pace).await;
    consistent(&m);
    assert_eq!((m.requests, m.accepted), (1000, 1000));
    assert!(smf
        .sessions()
        .iter()
        .all(|s| s.state == SessionState::Modified));

    let d = smf.delete(pace).await;
    consistent(&d);
    assert_eq!((d.requests, d.accepted), (1000, 1000));
    let r = smf.release().await;
    assert_eq!((r.requests, r.accepted), (1, 1));

    let st = upf.stats();
    assert_eq!(
        (st.associations, st.established, st.modified, st.deleted),
        (1, 1000, 1000, 1000)
    );
    assert_eq!((st.active_sessions, st.rejected), (0, 0));
    assert_eq!(st.fteids_allocated, 1000);
    // The fake's heartbeat and its 10 usage reports were answered.
    assert!(
        eventually(|| upf.stats().heartbeat_answers == 1 && upf.stats().report_answers == 10).await
    );
    let q = smf.upf_requests();
    assert_eq!((q.heartbeats, q.session_reports), (1, 10));
    eprintln!(
        "fake UPF, 1000 sessions, 32 in flight (debug build): establish {:.0}/s p50 {:.3} ms p99 {:.3} ms",
        e.per_second, e.latency.p50_ms, e.latency.p99_ms
    );
}

#[tokio::test]
async fn smf_explicit_teids_at_a_paced_rate() {
    let upf = FakeUpf::start(FakeUpfConfig::default()).await.unwrap();
    let mut cfg = config(upf.addr());
    cfg.teid = TeidMode::Explicit;
    cfg.psc = false;
    let mut smf = Smf::connect(cfg).await.unwrap();
    assert_eq!(smf.associate().await.accepted, 1);
    assert!(!smf.uses_choose());
    let e = smf
        .establish(
            20,
            Pace {
                rate: 200.0,
                in_flight: 4,
            },
        )
        .await;
    consistent(&e);
    assert_eq!(e.accepted, 20);
    // 20 requests at 200/s: the last leaves 95 ms after the first.
    assert!(e.elapsed_s >= 0.09, "{}", e.elapsed_s);
    for s in smf.sessions() {
        let f = s.n3_fteid.unwrap();
        assert_eq!(f.teid, Some(s.index as u32 + 1));
        // The N3 address the fake announced in User Plane IP Resource Information.
        assert_eq!(f.ipv4, Some(Ipv4Addr::LOCALHOST));
    }
    assert_eq!(upf.stats().fteids_allocated, 0);
}

#[tokio::test]
async fn smf_counts_rejections_by_cause() {
    let upf = FakeUpf::start(FakeUpfConfig::default()).await.unwrap();
    let mut smf = Smf::connect(config(upf.addr())).await.unwrap();
    // No association: the fake answers Cause 72.
    let e = smf.establish(5, Pace::default()).await;
    consistent(&e);
    assert_eq!((e.accepted, e.rejected), (0, 5));
    assert_eq!(e.rejections.len(), 1);
    assert_eq!((e.rejections[0].cause, e.rejections[0].count), (72, 5));
    assert!(smf
        .sessions()
        .iter()
        .all(|s| s.state == SessionState::Rejected(72)));
    // Nothing to modify or delete.
    assert_eq!(smf.delete(Pace::default()).await.requests, 0);
}

#[tokio::test]
async fn smf_retransmits_n1_times_then_gives_up() {
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut cfg = config(silent.local_addr().unwrap());
    cfg.timers = Timers {
        t1: Duration::from_millis(50),
        n1: 2,
    };
    let mut smf = Smf::connect(cfg).await.unwrap();
    let t0 = Instant::now();
    // Bounded only to catch a hang: a busy machine may stretch T1 as much as it likes.
    let a = tokio::time::timeout(2 * SETTLE, smf.associate())
        .await
        .expect("the association gives up in the end");
    let took = t0.elapsed();
    consistent(&a);
    assert_eq!((a.timed_out, a.retransmissions), (1, 2));
    // It waited T1 after each of the three sends.
    assert!(took >= Duration::from_millis(150), "{took:?}");
    eprintln!("T1 50 ms, N1 2: gave up after {took:?}");
    // The same request arrived three times: wait for three, then briefly for a fourth
    // that must not come (a slow machine can only hide one, not invent one).
    let mut buf = [0u8; 2048];
    let mut copies = Vec::new();
    loop {
        let wait = if copies.len() < 3 {
            SETTLE
        } else {
            Duration::from_millis(200)
        };
        match tokio::time::timeout(wait, silent.recv_from(&mut buf)).await {
            Ok(Ok((n, _))) => copies.push(buf[..n].to_vec()),
            _ => break,
        }
        if copies.len() > 10 {
            break;
        }
    }
    assert_eq!(copies.len(), 3);
    assert!(copies.iter().all(|c| c == &copies[0]));
}

#[test]
fn smf_cli_json_report() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upf = rt
        .block_on(FakeUpf::start(FakeUpfConfig::default()))
        .unwrap();
    // The PFCP timers' defaults (T1 3 s, N1 3): a late answer is waited for, not lost.
    let mut smf = std::process::Command::new(env!("CARGO_BIN_EXE_upfbench"));
    smf.args([
        "smf",
        "--upf",
        &upf.addr().to_string(),
        "--bind",
        "127.0.0.1:0",
        "--sessions",
        "50",
        "--modify",
        "--delete",
        "--release",
        "--json",
    ]);
    let out = run_bounded(smf, 4 * SETTLE);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let phases: Vec<(String, u64, u64)> = v["phases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["phase"].as_str().unwrap().to_string(),
                p["requests"].as_u64().unwrap(),
                p["accepted"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        phases,
        [
            ("associate".into(), 1, 1),
            ("establish".into(), 50, 50),
            ("modify".into(), 50, 50),
            ("delete".into(), 50, 50),
            ("release".into(), 1, 1),
        ]
    );
    assert_eq!(v["choose"], true);
    assert_eq!(v["sessions_established"], 50);
    let st = upf.stats();
    assert_eq!((st.established, st.deleted, st.releases), (50, 50, 1));
}

/// The benchmarks run phases on spawned tasks: the futures must be Send.
#[allow(dead_code)]
fn phases_are_send(smf: &mut Smf) {
    fn send<T: Send>(_: T) {}
    send(smf.establish(1, Pace::default()));
}

/// `ue_ip_choose`: the downlink PDI asks the UPF for the UE's IPv4 address (CHV4, no
/// address of ours) and each session takes the one its Created PDR returns, as an SMF
/// that leaves allocation to the UPF does (gtp-guard forwards only to those).
#[tokio::test]
async fn smf_takes_the_ue_addresses_the_upf_allocates() {
    let upf = FakeUpf::start(FakeUpfConfig::default()).await.unwrap();
    let mut cfg = config(upf.addr());
    cfg.ue_ip_choose = true;
    let mut smf = Smf::connect(cfg).await.unwrap();
    assert_eq!(smf.associate().await.accepted, 1);
    let req = smf.establishment_request(&upfbench::smf::Session {
        index: 0,
        cp_seid: 1,
        ue_ip: Ipv4Addr::new(10, 45, 0, 1),
        gnb_teid: 1,
        up_fseid: None,
        n3_fteid: None,
        state: SessionState::Failed,
    });
    let dl = req
        .create_pdrs
        .iter()
        .find(|p| p.pdi.local_fteid.is_none())
        .expect("a downlink PDR");
    assert_eq!(dl.pdi.ue_ip_address.len(), 1);
    let u = &dl.pdi.ue_ip_address[0];
    assert!(u.choose_v4 && u.destination && u.ipv4.is_none(), "{u:?}");
    let e = smf.establish(3, Pace::default()).await;
    assert_eq!(e.accepted, 3, "{e:?}");
    // The fake allocates 10.60.0.1, .2, ... one address per request, in arrival order.
    let mut got: Vec<Ipv4Addr> = smf.sessions().iter().map(|s| s.ue_ip).collect();
    got.sort();
    assert_eq!(
        got,
        (1..=3)
            .map(|n| Ipv4Addr::new(10, 60, 0, n))
            .collect::<Vec<_>>()
    );
}

/// `--upf` takes an address without a port as PFCP's (8805), as operators write a UPF's
/// N4 address; an address it cannot take is named with what is wrong and the forms it
/// takes (issue 29: it answered only "invalid socket address syntax").
#[test]
fn smf_cli_upf_address_without_port_is_pfcp_port() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // A loopback address of its own: port 8805 there is this test's.
    let upf = rt
        .block_on(FakeUpf::start(FakeUpfConfig {
            listen: "127.0.0.29:8805".parse().unwrap(),
            ..FakeUpfConfig::default()
        }))
        .unwrap();
    let mut smf = std::process::Command::new(env!("CARGO_BIN_EXE_upfbench"));
    smf.args([
        "smf",
        "--upf",
        "127.0.0.29",
        "--bind",
        "127.0.0.30", // its port 8805, on an address of its own too
        "--sessions",
        "2",
    ]);
    let out = run_bounded(smf, 4 * SETTLE);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(upf.stats().established, 2);

    for (bad, says) in [
        (
            "127.0.0.29:88o5",
            "the port \"88o5\" is not a number from 0 to 65535",
        ),
        ("upf.example:8805", "\"upf.example\" is not an IPv4 address"),
        (
            "2001:db8::7::8805",
            "not an IPv6 address (with a port, IPv6 is written [IPv6]:PORT)",
        ),
        ("[2001:db8::7]:x", "the port \"x\" is not a number"),
    ] {
        let mut smf = std::process::Command::new(env!("CARGO_BIN_EXE_upfbench"));
        smf.args(["smf", "--upf", bad]);
        let out = run_bounded(smf, SETTLE);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {err}");
        assert!(err.contains(says), "{bad}: {err}");
        assert!(err.contains("expected IP or IP:PORT"), "{bad}: {err}");
    }
}

/// `--sessions-out` is written once the sessions are established, before `--hold`, so
/// that the gNB emulator can start on them while the SMF holds them (issue 29).
#[test]
fn smf_cli_writes_sessions_before_holding_them() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upf = rt
        .block_on(FakeUpf::start(FakeUpfConfig::default()))
        .unwrap();
    let dir = std::env::temp_dir().join(format!("upfbench-hold-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("sessions.jsonl");
    let mut smf = std::process::Command::new(env!("CARGO_BIN_EXE_upfbench"));
    smf.args([
        "smf",
        "--upf",
        &upf.addr().to_string(),
        "--bind",
        "127.0.0.1:0",
    ])
    .args([
        "--sessions",
        "3",
        "--hold",
        "600",
        "--delete",
        "--sessions-out",
    ])
    .arg(&file)
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    let mut child = smf.spawn().unwrap();
    let written = common::eventually(4 * SETTLE, || {
        std::fs::read_to_string(&file).is_ok_and(|t| t.lines().count() == 3)
    });
    let still_holding = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    let _ = child.wait();
    let text = std::fs::read_to_string(&file).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        written,
        "no 3 sessions in the file during the hold: {text:?}"
    );
    assert!(still_holding, "the SMF ended before its 600 s hold");
    // What the gNB emulator reads: every session active, with its uplink F-TEID.
    let (ues, skipped) = upfbench::gnb::parse_sessions(&text).unwrap();
    assert_eq!((ues.len(), skipped), (3, 0));
    assert_eq!(upf.stats().established, 3);
}

/// The address forms every PFCP address option of upfbench takes.
#[test]
fn pfcp_addresses_default_to_port_8805() {
    use upfbench::smf::cli::pfcp_addr;
    for (given, want) in [
        ("127.0.0.7", "127.0.0.7:8805"),
        ("127.0.0.7:9805", "127.0.0.7:9805"),
        ("2001:db8::7", "[2001:db8::7]:8805"),
        ("[2001:db8::7]", "[2001:db8::7]:8805"),
        ("[2001:db8::7]:0", "[2001:db8::7]:0"),
    ] {
        assert_eq!(pfcp_addr(given), Ok(want.parse().unwrap()), "{given}");
    }
    for bad in [
        "",
        "127.0.0.7:",
        "127.0.0.7:65536",
        "[2001:db8::7",
        "[2001:db8::7]8805",
        "[127.0.0.7]:1",
    ] {
        assert!(pfcp_addr(bad).is_err(), "{bad:?} taken");
    }
}
