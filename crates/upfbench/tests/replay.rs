//! The capture replayer's mechanics against the in-process fake UPF: pairing requests with
//! the original responses, dropping repeated copies, per-SMF local addresses, and mapping
//! UP SEIDs, allocated F-TEIDs and UE addresses from the original UPF's to the fake's;
//! captures of several UPFs replayed one UPF at a time, and Created PDRs that only echo
//! what the SMF chose (informational, not a mismatch). The fake is a test double: where
//! it answers unlike the original UPF, mismatches are expected and checked to be exactly
//! those. Loopback only; every wait is bounded, and generous: a busy machine makes a
//! replay slower, never different.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{run_bounded, SETTLE};

use pfcp::ie::{
    apply_action, up_function_features, FSeid, FTeid, Flags, Interface, NodeId,
    OuterHeaderCreation, UeIpAddress,
};
use pfcp::message::message_type as mt;
use pfcp::{CauseValue, HeaderRepr, Ie, Message};
use upfbench::replay::{
    compare_responses, replay, replay_each_upf, Plan, ReplayConfig, Role, SharedSmf, Verdict,
};
use upfbench::smf::fake_upf::{FakeUpf, FakeUpfConfig};

fn pcaps() -> Option<PathBuf> {
    let dir = std::env::var_os("UPF_INTEROP_PCAPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/interop/pcaps")
        });
    if !dir.is_dir() {
        eprintln!("interop pcaps absent at {}: skipping", dir.display());
        return None;
    }
    Some(dir)
}

const SMF: &str = "10.0.0.4:8805";
const UPF: &str = "10.0.0.7:8805";

fn dgram(frame: usize, from: &str, to: &str, m: &Message) -> (usize, capture::Datagram) {
    let (s, d): (SocketAddr, SocketAddr) = (from.parse().unwrap(), to.parse().unwrap());
    (
        frame,
        capture::Datagram {
            src: s.ip(),
            dst: d.ip(),
            sport: s.port(),
            dport: d.port(),
            payload: m.emit(),
        },
    )
}

fn msg(header: HeaderRepr, ies: Vec<Ie>) -> Message {
    Message { header, ies }
}

/// A small call flow as an Open5GS SMF and UPF would have it, with the quirks a capture
/// holds: a retransmitted request, the UPF's own heartbeat, a request without response.
fn call_flow() -> Vec<(usize, capture::Datagram)> {
    let smf_ip = Ipv4Addr::new(10, 0, 0, 4);
    let upf_ip = Ipv4Addr::new(10, 0, 0, 7);
    let assoc = msg(
        HeaderRepr::node(mt::ASSOCIATION_SETUP_REQUEST, 1),
        vec![
            Ie::NodeId(NodeId::Ipv4(smf_ip).into()),
            Ie::RecoveryTimeStamp(1),
            Ie::CpFunctionFeatures(Flags(vec![0])),
        ],
    );
    let assoc_rsp = msg(
        HeaderRepr::node(mt::ASSOCIATION_SETUP_RESPONSE, 1),
        vec![
            Ie::NodeId(NodeId::Ipv4(upf_ip).into()),
            Ie::Cause(CauseValue::REQUEST_ACCEPTED),
            Ie::RecoveryTimeStamp(2),
            Ie::UpFunctionFeatures(Flags::from_bits(&[up_function_features::FTUP], 2)),
        ],
    );
    let pdr = |id: u16, pdi: Vec<Ie>| {
        Ie::CreatePdr(vec![
            Ie::PdrId(id),
            Ie::Precedence(255),
            Ie::Pdi(pdi),
            Ie::FarId(1),
        ])
    };
    let est = msg(
        HeaderRepr::session(mt::SESSION_ESTABLISHMENT_REQUEST, 0, 2),
        vec![
            Ie::NodeId(NodeId::Ipv4(smf_ip).into()),
            Ie::FSeid(FSeid {
                spare: 0,
                seid: 0x11,
                ipv4: Some(smf_ip),
                ipv6: None,
            }),
            pdr(
                1,
                vec![
                    Ie::SourceInterface(Interface::ACCESS),
                    Ie::FTeid(FTeid::choose(true, false, Some(7))),
                ],
            ),
            pdr(
                2,
                vec![
                    Ie::SourceInterface(Interface::ACCESS),
                    Ie::FTeid(FTeid::choose(true, false, Some(7))),
                ],
            ),
            pdr(
                3,
                vec![
                    Ie::SourceInterface(Interface::CORE),
                    Ie::UeIpAddress(UeIpAddress {
                        choose_v4: true,
                        destination: true,
                        ..UeIpAddress::default()
                    }),
                ],
            ),
            Ie::CreateFar(vec![
                Ie::FarId(1),
                Ie::ApplyAction(Flags::from_bits(&[apply_action::FORW], 2)),
            ]),
        ],
    );
    let orig_fteid = FTeid::new(0x5555, Some(upf_ip), None);
    let orig_ue = Ipv4Addr::new(10, 99, 0, 5);
    let est_rsp = msg(
        HeaderRepr::session(mt::SESSION_ESTABLISHMENT_RESPONSE, 0x11, 2),
        vec![
            Ie::NodeId(NodeId::Ipv4(upf_ip).into()),
            Ie::Cause(CauseValue::REQUEST_ACCEPTED),
            Ie::FSeid(FSeid {
                spare: 0,
                seid: 0xabc,
                ipv4: Some(upf_ip),
                ipv6: None,
            }),
            Ie::CreatedPdr(vec![Ie::PdrId(1), Ie::FTeid(orig_fteid)]),
            Ie::CreatedPdr(vec![Ie::PdrId(2), Ie::FTeid(orig_fteid)]),
            Ie::CreatedPdr(vec![
                Ie::PdrId(3),
                Ie::UeIpAddress(UeIpAddress {
                    ipv4: Some(orig_ue),
                    destination: true,
                    ..UeIpAddress::default()
                }),
            ]),
        ],
    );
    let modify = msg(
        HeaderRepr::session(mt::SESSION_MODIFICATION_REQUEST, 0xabc, 3),
        vec![
            Ie::UpdatePdr(vec![
                Ie::PdrId(1),
                Ie::Pdi(vec![
                    Ie::SourceInterface(Interface::ACCESS),
                    Ie::FTeid(orig_fteid),
                ]),
            ]),
            Ie::UpdatePdr(vec![
                Ie::PdrId(3),
                Ie::Pdi(vec![
                    Ie::SourceInterface(Interface::CORE),
                    Ie::UeIpAddress(UeIpAddress {
                        ipv4: Some(orig_ue),
                        destination: true,
                        ..UeIpAddress::default()
                    }),
                ]),
            ]),
            Ie::UpdateFar(vec![
                Ie::FarId(1),
                Ie::UpdateForwardingParameters(vec![Ie::OuterHeaderCreation(
                    OuterHeaderCreation::gtpu_ipv4(0x5555, upf_ip),
                )]),
            ]),
        ],
    );
    let mod_rsp = msg(
        HeaderRepr::session(mt::SESSION_MODIFICATION_RESPONSE, 0x11, 3),
        vec![Ie::Cause(CauseValue::REQUEST_ACCEPTED)],
    );
    let hb = msg(
        HeaderRepr::node(mt::HEARTBEAT_REQUEST, 9),
        vec![Ie::RecoveryTimeStamp(2)],
    );
    let hb_rsp = msg(
        HeaderRepr::node(mt::HEARTBEAT_RESPONSE, 9),
        vec![Ie::RecoveryTimeStamp(1)],
    );
    let del = msg(
        HeaderRepr::session(mt::SESSION_DELETION_REQUEST, 0xabc, 4),
        vec![],
    );
    vec![
        dgram(1, SMF, UPF, &assoc),
        dgram(2, SMF, UPF, &assoc),
        dgram(3, UPF, SMF, &assoc_rsp),
        dgram(4, SMF, UPF, &est),
        dgram(5, UPF, SMF, &est_rsp),
        dgram(6, SMF, UPF, &modify),
        dgram(7, UPF, SMF, &mod_rsp),
        dgram(8, UPF, SMF, &hb),
        dgram(9, SMF, UPF, &hb_rsp),
        dgram(10, SMF, UPF, &del),
    ]
}

/// 5 s for each response, 3 sends: against a fake that answers, a busy machine only
/// delays the replay.
fn cfg(upf: SocketAddr, base: [u8; 4]) -> ReplayConfig {
    let mut c = ReplayConfig::new(upf);
    c.local_base = Ipv4Addr::from(base);
    c.timeout = Duration::from_secs(5);
    c.retransmissions = 2;
    c
}

/// The CLI's timers, as [`cfg`].
const CLI_TIMERS: [&str; 4] = ["--timeout-ms", "5000", "--retransmissions", "2"];

#[test]
fn replay_plan_pairs_requests_with_original_responses() {
    let plan = Plan::from_datagrams(&call_flow());
    let (smf, upf): (SocketAddr, SocketAddr) = (SMF.parse().unwrap(), UPF.parse().unwrap());
    assert_eq!(plan.roles, vec![(smf, Role::Cp), (upf, Role::Up)]);
    assert_eq!(plan.duplicates, 1);
    assert_eq!(plan.recovery_time_stamp(smf), Some(1));
    assert_eq!(plan.recovery_time_stamp(upf), None);
    let t: Vec<(usize, u8, Option<usize>)> = plan
        .transactions
        .iter()
        .map(|t| {
            (
                t.frame,
                t.header.message_type,
                t.response.as_ref().map(|r| r.0),
            )
        })
        .collect();
    assert_eq!(
        t,
        vec![
            (1, mt::ASSOCIATION_SETUP_REQUEST, Some(3)),
            (4, mt::SESSION_ESTABLISHMENT_REQUEST, Some(5)),
            (6, mt::SESSION_MODIFICATION_REQUEST, Some(7)),
            (10, mt::SESSION_DELETION_REQUEST, None),
        ]
    );
}

#[tokio::test]
async fn replay_maps_seids_fteids_and_ue_addresses() {
    // The fake also sends its own Heartbeat Request and a Session Report Request: the
    // replayer answers both while it waits for its responses.
    let upf = FakeUpf::start(FakeUpfConfig {
        heartbeat_after_association: true,
        report_every: Some(1),
        ..FakeUpfConfig::default()
    })
    .await
    .unwrap();
    let plan = Plan::from_datagrams(&call_flow());
    let c = cfg(upf.addr(), [127, 0, 40, 101]);
    let report = replay(&plan, &c, |_| {}).await.unwrap();
    let s = report.summary;
    assert_eq!(
        (s.requests, s.matched, s.mismatched, s.timed_out),
        (4, 4, 0, 0),
        "{:#?}",
        report.outcomes
    );
    assert_eq!(
        report.locals,
        vec![(SMF.parse().unwrap(), report.outcomes[0].local)]
    );
    assert_eq!(report.outcomes[0].local.ip(), IpAddr::V4(c.local_base));
    // The fake allocated UP SEID 1: modification and deletion were sent with it.
    assert_eq!(report.seids, vec![(UPF.parse().unwrap(), 0xabc, 1)]);
    assert_eq!(report.outcomes[2].seid, Some((0xabc, 1)));
    assert_eq!(report.outcomes[3].seid, Some((0xabc, 1)));
    let st = upf.stats();
    assert_eq!(
        (st.established, st.modified, st.deleted, st.rejected),
        (1, 1, 1, 0)
    );
    // The echoed F-TEID, the Outer Header Creation towards it and the UE address were
    // rewritten to what the fake allocated (TEID 1 at 127.0.0.1, UE 10.60.0.1).
    let notes = report.outcomes[2].notes.join("\n");
    assert!(
        notes.contains("F-TEID 0x00005555 10.0.0.7 -> 0x00000001 127.0.0.1"),
        "{notes}"
    );
    assert!(notes.contains("Outer Header Creation 0x00005555 10.0.0.7 -> 0x00000001 127.0.0.1"));
    assert!(notes.contains("UE IP 10.99.0.5 -> 10.60.0.1"));
    let end = Instant::now() + SETTLE;
    while (upf.stats().heartbeat_answers, upf.stats().report_answers) != (1, 1) {
        assert!(Instant::now() < end, "{:?}", upf.stats());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(report.outcomes[3]
        .notes
        .iter()
        .any(|n| n.contains("no original response")));
}

#[tokio::test]
async fn replay_times_out_against_a_silent_upf_within_bounds() {
    let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let plan = Plan::from_datagrams(&call_flow());
    let mut c = cfg(silent.local_addr().unwrap(), [127, 0, 41, 101]);
    c.timeout = Duration::from_millis(50);
    c.retransmissions = 1;
    let t0 = Instant::now();
    // Bounded only to catch a hang; the bounds that matter are what was sent.
    let report = tokio::time::timeout(2 * SETTLE, replay(&plan, &c, |_| {}))
        .await
        .expect("the replay gives up in the end")
        .unwrap();
    let took = t0.elapsed();
    eprintln!("two requests, 50 ms x 2 sends each: gave up after {took:?}");
    // Each of the two requests was sent twice, the same octets, and it waited after each.
    assert!(took >= Duration::from_millis(200), "{took:?}");
    let mut sent = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // Wait for the four; then briefly for a fifth that must not come.
        let wait = if sent.len() < 4 {
            SETTLE
        } else {
            Duration::from_millis(200)
        };
        match tokio::time::timeout(wait, silent.recv_from(&mut buf)).await {
            Ok(Ok((n, _))) => sent.push(buf[..n].to_vec()),
            _ => break,
        }
        if sent.len() > 10 {
            break;
        }
    }
    let types: Vec<u8> = sent.iter().map(|m| m[1]).collect();
    assert_eq!(
        types,
        [
            mt::ASSOCIATION_SETUP_REQUEST,
            mt::ASSOCIATION_SETUP_REQUEST,
            mt::SESSION_ESTABLISHMENT_REQUEST,
            mt::SESSION_ESTABLISHMENT_REQUEST
        ]
    );
    assert_eq!(sent[0], sent[1]);
    assert_eq!(sent[2], sent[3]);
    let s = report.summary;
    assert_eq!((s.requests, s.matched, s.timed_out), (4, 0, 2));
    // Association and establishment time out; the session's modification and deletion
    // then have no session to go to: not replayable, not sent.
    assert!(report.outcomes[..2]
        .iter()
        .all(|o| o.verdict == Verdict::TimedOut));
    for o in &report.outcomes[2..] {
        assert!(
            o.line()
                .ends_with("not replayable: its session (UP SEID 0xabc) was established at frame 4, which the UPF under test did not accept"),
            "{}",
            o.line()
        );
    }
    assert_eq!(
        s.to_string(),
        "replay: 4 requests, 0 responses matched, 0 mismatched, 2 timed out, 2 not replayable"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replay_interop_captures_against_the_fake() {
    let Some(dir) = pcaps() else { return };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    for (k, path) in files.iter().enumerate() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let plan = Plan::from_file(path).unwrap();
        let upf = FakeUpf::start(FakeUpfConfig::default()).await.unwrap();
        let c = cfg(upf.addr(), [127, 0, 60 + k as u8, 101]);
        let report = replay(&plan, &c, |_| {}).await.unwrap();
        let s = report.summary;
        eprintln!("{name}: {s}");
        assert_eq!(s.requests, plan.transactions.len(), "{name}");
        assert_eq!(
            s.requests,
            s.matched + s.mismatched + s.timed_out + s.not_replayable,
            "{name}"
        );
        assert_eq!(s.timed_out, 0, "{name}");
        // Every session request found its session: the SEID mapping works.
        assert!(
            report
                .outcomes
                .iter()
                .flat_map(|o| &o.notes)
                .all(|n| !n.contains("unknown")),
            "{name}"
        );
        assert_eq!(upf.stats().rejected, 0, "{name}: {:?}", upf.stats());
        // The only differences the fake may show: older Open5GS UPFs answer a Created
        // PDR (PDR ID only) for every PDR with an F-TEID the SMF picked; the fake, as the
        // specification asks, only for what it allocated.
        for o in &report.outcomes {
            if let Verdict::Mismatched(d) = &o.verdict {
                assert!(
                    d.iter()
                        .all(|x| x.contains("Created PDRs") && x.contains("carry only a PDR ID")),
                    "{name}: {}",
                    o.line()
                );
            }
        }
        match name.as_str() {
            "open5gs-5g-roaming-hr.pcapng" => {
                assert_eq!((s.requests, s.matched), (13, 13));
                assert_eq!(plan.duplicates, 2, "frame 225 again as 387, seq 1");
                // V-SMF/V-UPF and H-SMF/H-UPF: two local SMFs, two SEIDs mapped.
                assert_eq!(report.locals.len(), 2);
                assert_ne!(report.locals[0].1.ip(), report.locals[1].1.ip());
                let orig: Vec<(String, u64)> = report
                    .seids
                    .iter()
                    .map(|(u, s, _)| (u.to_string(), *s))
                    .collect();
                assert_eq!(
                    orig,
                    vec![
                        ("127.0.0.7:8805".to_string(), 0x90),
                        ("127.0.1.7:8805".to_string(), 0x22d)
                    ]
                );
                // The H-SMF's N9 Outer Header Creation points at the V-UPF's F-TEID.
                assert!(
                    report
                        .fteids
                        .iter()
                        .any(|(a, t, _)| *a == IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7))
                            && *t == 0x3edb)
                );
                let h_est = report.outcomes.iter().find(|o| o.frame == 1673).unwrap();
                assert!(h_est
                    .notes
                    .iter()
                    .any(|n| n.starts_with("Outer Header Creation 0x00003edb 127.0.0.7 ->")));
            }
            "open5gs-5g-roaming-lbo.pcapng" => assert_eq!((s.requests, s.matched), (8, 8)),
            "open5gs-srsenb-4g-cups.pcapng" => assert_eq!((s.requests, s.matched), (12, 12)),
            "open5gs-testattach-4g-cups.pcapng" => {
                assert_eq!(s.requests, 65);
                // SGW-U and PGW-U both used TEID 1..: now one UPF, so renumbered.
                assert!(report
                    .outcomes
                    .iter()
                    .flat_map(|o| &o.notes)
                    .any(|n| n.contains("used by two original UPFs")));
            }
            "gopfcp-association.pcap" => {
                // The UPF set the association up: nothing for an SMF to replay.
                assert_eq!(s.requests, 0);
                let roles: Vec<(u16, Role)> =
                    plan.roles.iter().map(|(a, r)| (a.port(), *r)).collect();
                assert_eq!(roles, vec![(57966, Role::Up), (8805, Role::Cp)]);
            }
            "synthetic-pfcplib-all-types.pcap" => {
                assert_eq!(s.requests, 0);
                assert!(report.notes.iter().any(|n| n.contains("both CP and UP")));
            }
            "free5gc-usage-reports.pcapng" | "open5gs-volte-gtpu.pcapng" => {
                assert_eq!(s.requests, 0)
            }
            _ => {}
        }
    }
}

#[test]
fn replay_cli_summary_line_and_exit_status() {
    let Some(dir) = pcaps() else { return };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upf = rt
        .block_on(FakeUpf::start(FakeUpfConfig::default()))
        .unwrap();
    let run = |file: &str, base: &str| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_upfbench"));
        c.arg("replay")
            .arg(dir.join(file))
            .args([
                "--upf",
                &upf.addr().to_string(),
                "--local-base",
                base,
                "--local-port",
                "0",
            ])
            .args(CLI_TIMERS);
        run_bounded(c, 4 * SETTLE)
    };
    let out = run("open5gs-5g-roaming-hr.pcapng", "127.0.70.101");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout.lines().last(),
        Some("replay: 13 requests, 13 responses matched, 0 mismatched, 0 timed out, 0 not replayable"),
        "{stdout}"
    );
    assert!(out.status.success());
    // Mismatches: a UPF that rejects every request. One line per mismatch, exit 1.
    let rejecting = RejectingUpf::start();
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_upfbench"));
    c.arg("replay")
        .arg(dir.join("open5gs-5g-roaming-hr.pcapng"))
        .args(["--upf", &rejecting.addr.to_string()])
        .args(["--local-base", "127.0.71.101", "--local-port", "0"])
        .args(["--timeout-ms", "5000", "--retransmissions", "0"]);
    let out = run_bounded(c, 4 * SETTLE);
    let answered = rejecting.stop();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(answered > 0, "{stdout}");
    let last = stdout.lines().last().unwrap();
    assert!(last.starts_with("replay: 13 requests, "), "{last}");
    assert!(!last.contains(" 0 mismatched"), "{last}");
    assert!(
        stdout.lines().any(|l| l.starts_with("frame ")
            && l.contains("Cause 64 (Request rejected), original 1 (Request accepted)")),
        "{stdout}"
    );
}

/// A UPF that answers every request with Cause "Request rejected" (heartbeats aside): the
/// replayer must report each such answer as a mismatch. Loopback; stops within 100 ms.
struct RejectingUpf {
    addr: SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl RejectingUpf {
    fn start() -> Self {
        use std::sync::atomic::{AtomicBool, Ordering};
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let addr = sock.local_addr().unwrap();
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut answered = 0;
            let mut buf = [0u8; 65536];
            while !flag.load(Ordering::Relaxed) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else {
                    continue;
                };
                let Ok(h) = pfcp::header::Header::new_checked(&buf[..n]) else {
                    continue;
                };
                let Ok(h) = HeaderRepr::parse(&h) else {
                    continue;
                };
                let rt = h.message_type + 1;
                let node = Ie::NodeId(NodeId::Ipv4(Ipv4Addr::LOCALHOST).into());
                let (header, ies) = if h.message_type == mt::HEARTBEAT_REQUEST {
                    (
                        HeaderRepr::node(rt, h.sequence),
                        vec![Ie::RecoveryTimeStamp(1)],
                    )
                } else if h.seid.is_some() {
                    // Node ID: mandatory in an Establishment Response (Table 7.5.3.1-1).
                    (
                        HeaderRepr::session(rt, 0, h.sequence),
                        vec![node, Ie::Cause(CauseValue::REQUEST_REJECTED)],
                    )
                } else {
                    // Recovery Time Stamp: mandatory in an Association Setup Response.
                    (
                        HeaderRepr::node(rt, h.sequence),
                        vec![
                            node,
                            Ie::Cause(CauseValue::REQUEST_REJECTED),
                            Ie::RecoveryTimeStamp(1),
                        ],
                    )
                };
                let _ = sock.send_to(&Message { header, ies }.emit(), from);
                answered += 1;
            }
            answered
        });
        RejectingUpf { addr, stop, thread }
    }

    fn stop(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap()
    }
}

/// A capture that starts after the association and the session were set up (its first
/// requests are the session's modification and deletion) is not a list of mismatches:
/// the replayer sets up an association itself, reports both requests as not replayable
/// with the reason, sends neither, and exits 0.
#[test]
fn a_capture_that_starts_mid_session_is_not_replayable_not_mismatched() {
    let flow = call_flow();
    let from_frame_6: Vec<_> = flow.into_iter().filter(|(f, _)| *f >= 6).collect();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mid-session.pcap");
    let mut w = capture::PcapWriter::new(
        std::fs::File::create(&file).unwrap(),
        capture::linktype::RAW,
    )
    .unwrap();
    for (_, d) in &from_frame_6 {
        let pkt = capture::ip_udp_packet(d.src, d.dst, d.sport, d.dport, &d.payload);
        w.write(0, &pkt).unwrap();
    }
    drop(w);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upf = rt
        .block_on(FakeUpf::start(FakeUpfConfig::default()))
        .unwrap();
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_upfbench"));
    c.arg("replay")
        .arg(&file)
        .args(["--upf", &upf.addr().to_string()])
        .args(["--local-base", "127.0.72.101", "--local-port", "0"])
        .args(CLI_TIMERS);
    let out = run_bounded(c, 4 * SETTLE);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{stdout}");
    assert_eq!(
        stdout.lines().last(),
        Some(
            "replay: 2 requests, 0 responses matched, 0 mismatched, 0 timed out, 2 not replayable"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("not replayable: its session (UP SEID 0xabc) was established before the capture started"),
        "{stdout}"
    );
    assert!(stdout.contains("the capture has no Association Setup Request from this SMF"));
    let st = upf.stats();
    assert_eq!((st.modified, st.deleted), (0, 0), "neither was sent");
}

// Captures of several UPFs, and of a UPF that echoes in Created PDRs what the SMF chose
// (issue 27, items 8 and 9). Each is written here as an SMF's `tcpdump` would hold it.

fn ip4(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn assoc_req(seq: u32, smf: &str) -> Message {
    msg(
        HeaderRepr::node(mt::ASSOCIATION_SETUP_REQUEST, seq),
        vec![
            Ie::NodeId(NodeId::Ipv4(ip4(smf)).into()),
            Ie::RecoveryTimeStamp(1),
            Ie::CpFunctionFeatures(Flags(vec![0])),
        ],
    )
}

fn assoc_rsp(seq: u32, upf: &str) -> Message {
    msg(
        HeaderRepr::node(mt::ASSOCIATION_SETUP_RESPONSE, seq),
        vec![
            Ie::NodeId(NodeId::Ipv4(ip4(upf)).into()),
            Ie::Cause(CauseValue::REQUEST_ACCEPTED),
            Ie::RecoveryTimeStamp(2),
            Ie::UpFunctionFeatures(Flags::from_bits(&[up_function_features::FTUP], 2)),
        ],
    )
}

/// A Create PDR with FAR 1 and this PDI.
fn create_pdr(id: u16, pdi: Vec<Ie>) -> Ie {
    Ie::CreatePdr(vec![
        Ie::PdrId(id),
        Ie::Precedence(255),
        Ie::Pdi(pdi),
        Ie::FarId(1),
    ])
}

fn ue(addr: &str, destination: bool) -> Ie {
    Ie::UeIpAddress(UeIpAddress {
        ipv4: Some(ip4(addr)),
        destination,
        ..UeIpAddress::default()
    })
}

/// FAR 1: forward to the core.
fn far_forw() -> Ie {
    Ie::CreateFar(vec![
        Ie::FarId(1),
        Ie::ApplyAction(Flags::from_bits(&[apply_action::FORW], 2)),
        Ie::ForwardingParameters(vec![Ie::DestinationInterface(Interface::CORE)]),
    ])
}

fn est_req(seq: u32, smf: &str, cp_seid: u64, mut ies: Vec<Ie>) -> Message {
    let mut all = vec![
        Ie::NodeId(NodeId::Ipv4(ip4(smf)).into()),
        Ie::FSeid(FSeid {
            spare: 0,
            seid: cp_seid,
            ipv4: Some(ip4(smf)),
            ipv6: None,
        }),
    ];
    all.append(&mut ies);
    msg(
        HeaderRepr::session(mt::SESSION_ESTABLISHMENT_REQUEST, 0, seq),
        all,
    )
}

/// Accepted, UP SEID `up`, with these Created PDRs.
fn est_rsp(seq: u32, cp_seid: u64, upf: &str, up: u64, created: Vec<Ie>) -> Message {
    let mut ies = vec![
        Ie::NodeId(NodeId::Ipv4(ip4(upf)).into()),
        Ie::Cause(CauseValue::REQUEST_ACCEPTED),
        Ie::FSeid(FSeid {
            spare: 0,
            seid: up,
            ipv4: Some(ip4(upf)),
            ipv6: None,
        }),
    ];
    ies.extend(created);
    msg(
        HeaderRepr::session(mt::SESSION_ESTABLISHMENT_RESPONSE, cp_seid, seq),
        ies,
    )
}

fn session_req(t: u8, seq: u32, up: u64, ies: Vec<Ie>) -> Message {
    msg(HeaderRepr::session(t, up, seq), ies)
}

/// Accepted, and these IEs (Created PDRs of a modification).
fn session_rsp(t: u8, seq: u32, cp_seid: u64, mut ies: Vec<Ie>) -> Message {
    ies.insert(0, Ie::Cause(CauseValue::REQUEST_ACCEPTED));
    msg(HeaderRepr::session(t, cp_seid, seq), ies)
}

/// free5GC's SMF picks every F-TEID and UE address itself; its go-upf (v1.2.4 to v1.2.12,
/// internal/pfcp/session.go) answers a Created PDR echoing the PDI's UE address for every
/// PDR that has one, and some UPFs echo the SMF's F-TEID too. Here PDR 1 gets both echoed,
/// PDR 2 its UE address, PDR 3 an F-TEID the UPF allocated (CHOOSE), and the modification's
/// new PDR 4 its F-TEID echoed.
fn echoing_upf_flow() -> Vec<(usize, capture::Datagram)> {
    let upf_ip = ip4("10.0.0.7");
    let ul = FTeid::new(0x10, Some(upf_ip), None);
    let est = est_req(
        2,
        "10.0.0.4",
        0x21,
        vec![
            create_pdr(
                1,
                vec![
                    Ie::SourceInterface(Interface::ACCESS),
                    Ie::FTeid(ul),
                    ue("10.60.0.1", false),
                ],
            ),
            create_pdr(
                2,
                vec![Ie::SourceInterface(Interface::CORE), ue("10.60.0.1", true)],
            ),
            create_pdr(
                3,
                vec![
                    Ie::SourceInterface(Interface::ACCESS),
                    Ie::FTeid(FTeid::choose(true, false, None)),
                ],
            ),
            far_forw(),
        ],
    );
    let est_rsp = est_rsp(
        2,
        0x21,
        "10.0.0.7",
        0x700,
        vec![
            Ie::CreatedPdr(vec![Ie::PdrId(1), Ie::FTeid(ul), ue("10.60.0.1", false)]),
            Ie::CreatedPdr(vec![Ie::PdrId(2), ue("10.60.0.1", true)]),
            Ie::CreatedPdr(vec![
                Ie::PdrId(3),
                Ie::FTeid(FTeid::new(0x5555, Some(upf_ip), None)),
            ]),
        ],
    );
    let n9 = FTeid::new(0x11, Some(upf_ip), None);
    let modify = session_req(
        mt::SESSION_MODIFICATION_REQUEST,
        3,
        0x700,
        vec![create_pdr(
            4,
            vec![Ie::SourceInterface(Interface::CORE), Ie::FTeid(n9)],
        )],
    );
    let mod_rsp = session_rsp(
        mt::SESSION_MODIFICATION_RESPONSE,
        3,
        0x21,
        vec![Ie::CreatedPdr(vec![Ie::PdrId(4), Ie::FTeid(n9)])],
    );
    let del = session_req(mt::SESSION_DELETION_REQUEST, 4, 0x700, vec![]);
    let del_rsp = session_rsp(mt::SESSION_DELETION_RESPONSE, 4, 0x21, vec![]);
    vec![
        dgram(1, SMF, UPF, &assoc_req(1, "10.0.0.4")),
        dgram(2, UPF, SMF, &assoc_rsp(1, "10.0.0.7")),
        dgram(3, SMF, UPF, &est),
        dgram(4, UPF, SMF, &est_rsp),
        dgram(5, SMF, UPF, &modify),
        dgram(6, UPF, SMF, &mod_rsp),
        dgram(7, SMF, UPF, &del),
        dgram(8, UPF, SMF, &del_rsp),
    ]
}

/// Created PDRs that only echo the F-TEID or UE address the SMF chose are no
/// allocation (TS 29.244 Table 7.5.3.1-1): the fake sends none for them, as upfd, and
/// that is informational, not a mismatch. The PDR that asked CHOOSE is still compared.
#[tokio::test]
async fn created_pdrs_echoing_what_the_smf_chose_are_informational() {
    let upf = FakeUpf::start(FakeUpfConfig::default()).await.unwrap();
    let plan = Plan::from_datagrams(&echoing_upf_flow());
    let report = replay(&plan, &cfg(upf.addr(), [127, 0, 42, 101]), |_| {})
        .await
        .unwrap();
    let lines: Vec<String> = report.outcomes.iter().map(|o| o.line()).collect();
    assert_eq!(
        report.summary.to_string(),
        "replay: 4 requests, 4 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
        "{lines:#?}"
    );
    assert_eq!(upf.stats().rejected, 0);
    // Said once for the replay, and on each response.
    assert!(
        report.notes.iter().any(|n| n.starts_with(
            "2 responses differ from the original in Created PDRs that echo the F-TEID or UE address the SMF chose (frames 3, 5): informational"
        )),
        "{:#?}",
        report.notes
    );
    let echo = |k: usize| {
        report.outcomes[k]
            .notes
            .iter()
            .find(|n| n.contains("Created PDRs echo"))
            .cloned()
            .unwrap_or_default()
    };
    assert!(
        echo(1)
            .starts_with("0 Created PDRs echo the F-TEID or UE address the SMF chose, original 2 "),
        "{}",
        echo(1)
    );
    assert!(
        echo(2)
            .starts_with("0 Created PDRs echo the F-TEID or UE address the SMF chose, original 1 "),
        "{}",
        echo(2)
    );
}

/// The same comparison on single responses: an echo is informational, but a Created PDR
/// whose F-TEID differs from the one the SMF chose is an allocation, and one missing is a
/// mismatch; so is an allocation the UPF under test did not make for CHOOSE.
#[test]
fn a_created_pdr_unlike_what_the_smf_chose_is_an_allocation() {
    let flow = echoing_upf_flow();
    let est = flow[2].1.payload.clone();
    let est_rsp = |created: Vec<Ie>| est_rsp(2, 0x21, "10.0.0.7", 0x700, created).emit();
    let upf_ip = ip4("10.0.0.7");
    let allocated = Ie::CreatedPdr(vec![
        Ie::PdrId(3),
        Ie::FTeid(FTeid::new(0x5555, Some(upf_ip), None)),
    ]);
    let ours = est_rsp(vec![allocated.clone()]);
    // The original echoed PDR 1's F-TEID: informational.
    let echoed = est_rsp(vec![
        Ie::CreatedPdr(vec![
            Ie::PdrId(1),
            Ie::FTeid(FTeid::new(0x10, Some(upf_ip), None)),
        ]),
        allocated.clone(),
    ]);
    let c = compare_responses(&est, &est, Some(&echoed), &ours);
    assert!(c.differences.is_empty(), "{c:?}");
    assert_eq!(c.informational.len(), 1, "{c:?}");
    // The original gave PDR 1 another TEID than the SMF's: that is an allocation.
    let replaced = est_rsp(vec![
        Ie::CreatedPdr(vec![
            Ie::PdrId(1),
            Ie::FTeid(FTeid::new(0x99, Some(upf_ip), None)),
        ]),
        allocated.clone(),
    ]);
    let c = compare_responses(&est, &est, Some(&replaced), &ours);
    assert_eq!(
        c.differences,
        vec!["1 Created PDRs with an allocation, original 2".to_string()]
    );
    assert!(c.informational.is_empty(), "{c:?}");
    // Ours echoes and allocates nothing for CHOOSE: a mismatch, the echo informational.
    let ours_echo = est_rsp(vec![Ie::CreatedPdr(vec![
        Ie::PdrId(2),
        ue("10.60.0.1", true),
    ])]);
    let c = compare_responses(&est, &est, Some(&ours), &ours_echo);
    assert_eq!(
        c.differences,
        vec![
            "0 Created PDRs with an allocation, original 1".to_string(),
            "PDR 3 asked CHOOSE: no allocated F-TEID in a Created PDR".to_string()
        ]
    );
    assert_eq!(c.informational.len(), 1, "{c:?}");
}

/// Frames numbered in order, from (from, to, message).
fn frames(v: Vec<(String, String, Message)>) -> Vec<(usize, capture::Datagram)> {
    v.iter()
        .enumerate()
        .map(|(k, (from, to, m))| dgram(k + 1, from, to, m))
        .collect()
}

const ULCL: &str = "10.0.0.7:8805";
const PSA: &str = "10.0.0.8:8805";

/// free5GC's SMF with an uplink classifier (10.0.0.7) and its anchor (10.0.0.8), one PDU
/// session through both: the SMF picks every F-TEID and the UE address, and its go-upf
/// UPFs echo the UE address in Created PDRs. One SMF, two associations, the same CP SEID
/// and UE address in both sessions.
fn ulcl_flow() -> Vec<(usize, capture::Datagram)> {
    let s = |a: &str| a.to_string();
    let session = |seq: u32, upf: &str, fteids: [u32; 2], up: u64| {
        let ip = ip4(upf.split(':').next().unwrap());
        let req = est_req(
            seq,
            "10.0.0.4",
            0x1,
            vec![
                create_pdr(
                    1,
                    vec![
                        Ie::SourceInterface(Interface::ACCESS),
                        Ie::FTeid(FTeid::new(fteids[0], Some(ip), None)),
                        ue("10.60.0.1", false),
                    ],
                ),
                create_pdr(
                    2,
                    vec![
                        Ie::SourceInterface(Interface::CORE),
                        Ie::FTeid(FTeid::new(fteids[1], Some(ip), None)),
                        ue("10.60.0.1", true),
                    ],
                ),
                far_forw(),
            ],
        );
        let rsp = est_rsp(
            seq,
            0x1,
            &ip.to_string(),
            up,
            vec![
                Ie::CreatedPdr(vec![Ie::PdrId(1), ue("10.60.0.1", false)]),
                Ie::CreatedPdr(vec![Ie::PdrId(2), ue("10.60.0.1", true)]),
            ],
        );
        (req, rsp)
    };
    let (psa_est, psa_est_rsp) = session(3, PSA, [0x20, 0x21], 0x800);
    let (ulcl_est, ulcl_est_rsp) = session(4, ULCL, [0x10, 0x11], 0x700);
    let modify = session_req(
        mt::SESSION_MODIFICATION_REQUEST,
        5,
        0x700,
        vec![Ie::UpdateFar(vec![
            Ie::FarId(1),
            Ie::UpdateForwardingParameters(vec![Ie::OuterHeaderCreation(
                OuterHeaderCreation::gtpu_ipv4(0x99, ip4("10.0.0.1")),
            )]),
        ])],
    );
    let rsp = |t, seq| session_rsp(t, seq, 0x1, vec![]);
    let del = |seq, up| session_req(mt::SESSION_DELETION_REQUEST, seq, up, vec![]);
    frames(vec![
        (s(SMF), s(ULCL), assoc_req(1, "10.0.0.4")),
        (s(ULCL), s(SMF), assoc_rsp(1, "10.0.0.7")),
        (s(SMF), s(PSA), assoc_req(2, "10.0.0.4")),
        (s(PSA), s(SMF), assoc_rsp(2, "10.0.0.8")),
        (s(SMF), s(PSA), psa_est),
        (s(PSA), s(SMF), psa_est_rsp),
        (s(SMF), s(ULCL), ulcl_est),
        (s(ULCL), s(SMF), ulcl_est_rsp),
        (s(SMF), s(ULCL), modify),
        (s(ULCL), s(SMF), rsp(mt::SESSION_MODIFICATION_RESPONSE, 5)),
        (s(SMF), s(ULCL), del(6, 0x700)),
        (s(ULCL), s(SMF), rsp(mt::SESSION_DELETION_RESPONSE, 6)),
        (s(SMF), s(PSA), del(7, 0x800)),
        (s(PSA), s(SMF), rsp(mt::SESSION_DELETION_RESPONSE, 7)),
    ])
}

/// Three SMFs (10.0.k.4) and three UPFs (10.0.k.7), a slice each, as Open5GS has them
/// (the UPF allocates the F-TEID). With `every_upf`, each SMF associates with every UPF
/// and SMF 3 also has a session on UPF 1; else each SMF knows its own UPF only.
fn slicing_flow(every_upf: bool) -> Vec<(usize, capture::Datagram)> {
    let smf = |k: u8| format!("10.0.{k}.4:8805");
    let upf = |k: u8| format!("10.0.{k}.7:8805");
    let ip = |k: u8, h: u8| Ipv4Addr::new(10, 0, k, h).to_string();
    let mut v = Vec::new();
    let mut seq = [0u32; 4];
    for k in 1..=3u8 {
        for u in 1..=3u8 {
            if every_upf || u == k {
                seq[k as usize] += 1;
                let n = seq[k as usize];
                v.push((smf(k), upf(u), assoc_req(n, &ip(k, 4))));
                v.push((upf(u), smf(k), assoc_rsp(n, &ip(u, 7))));
            }
        }
    }
    // (SMF, UPF, CP SEID, UP SEID, modified)
    let mut sessions = vec![
        (1u8, 1u8, 0x11u64, 0x1100u64, true),
        (2, 2, 0x21, 0x2200, true),
        (3, 3, 0x31, 0x3300, true),
    ];
    if every_upf {
        sessions.push((3, 1, 0x32, 0x1101, false));
    }
    let next = |seq: &mut [u32; 4], k: u8| {
        seq[k as usize] += 1;
        seq[k as usize]
    };
    for &(k, u, cp, up, _) in &sessions {
        let n = next(&mut seq, k);
        let ue_addr = format!("10.{}.0.{}", 60 + k, up & 0xff);
        let req = est_req(
            n,
            &ip(k, 4),
            cp,
            vec![
                create_pdr(
                    1,
                    vec![
                        Ie::SourceInterface(Interface::ACCESS),
                        Ie::FTeid(FTeid::choose(true, false, None)),
                    ],
                ),
                create_pdr(
                    2,
                    vec![Ie::SourceInterface(Interface::CORE), ue(&ue_addr, true)],
                ),
                far_forw(),
            ],
        );
        let fteid = FTeid::new(up as u32, Some(ip4(&ip(u, 7))), None);
        let rsp = est_rsp(
            n,
            cp,
            &ip(u, 7),
            up,
            vec![Ie::CreatedPdr(vec![Ie::PdrId(1), Ie::FTeid(fteid)])],
        );
        v.push((smf(k), upf(u), req));
        v.push((upf(u), smf(k), rsp));
    }
    for &(k, u, cp, up, modified) in &sessions {
        if !modified {
            continue;
        }
        let n = next(&mut seq, k);
        let fteid = FTeid::new(up as u32, Some(ip4(&ip(u, 7))), None);
        let req = session_req(
            mt::SESSION_MODIFICATION_REQUEST,
            n,
            up,
            vec![Ie::UpdatePdr(vec![
                Ie::PdrId(1),
                Ie::Pdi(vec![
                    Ie::SourceInterface(Interface::ACCESS),
                    Ie::FTeid(fteid),
                ]),
            ])],
        );
        v.push((smf(k), upf(u), req));
        v.push((
            upf(u),
            smf(k),
            session_rsp(mt::SESSION_MODIFICATION_RESPONSE, n, cp, vec![]),
        ));
    }
    for &(k, u, cp, up, _) in &sessions {
        let n = next(&mut seq, k);
        v.push((
            smf(k),
            upf(u),
            session_req(mt::SESSION_DELETION_REQUEST, n, up, vec![]),
        ));
        v.push((
            upf(u),
            smf(k),
            session_rsp(mt::SESSION_DELETION_RESPONSE, n, cp, vec![]),
        ));
    }
    frames(v)
}

/// A fresh fake UPF per part of a capture, kept for their counts afterwards.
type Fakes = std::rc::Rc<std::cell::RefCell<Vec<(SocketAddr, FakeUpf)>>>;

async fn fresh_fake(fakes: Fakes, upf: SocketAddr) -> std::io::Result<(SocketAddr, ())> {
    let fake = FakeUpf::start(FakeUpfConfig::default()).await?;
    let addr = fake.addr();
    fakes.borrow_mut().push((upf, fake));
    Ok((addr, ()))
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// An SMF with an uplink classifier and an anchor: replayed together, the one UPF under
/// test would get that SMF's association twice and the UE address in two sessions; each
/// UPF's part is replayed against a fresh UPF instead, in order of its first request,
/// and counted on its own line.
#[tokio::test]
async fn an_uplink_classifier_and_its_anchor_replay_one_upf_at_a_time() {
    let plan = Plan::from_datagrams(&ulcl_flow());
    assert_eq!(plan.upfs(), vec![addr(ULCL), addr(PSA)]);
    assert_eq!(
        plan.shared_smfs(),
        vec![SharedSmf {
            smf: SMF.to_string(),
            upfs: vec![addr(ULCL), addr(PSA)]
        }]
    );
    let frames_of = |p: &Plan| p.transactions.iter().map(|t| t.frame).collect::<Vec<_>>();
    assert_eq!(frames_of(&plan.for_upf(addr(ULCL))), vec![1, 7, 9, 11]);
    assert_eq!(frames_of(&plan.for_upf(addr(PSA))), vec![3, 5, 13]);
    assert!(plan.for_upf(addr(PSA)).shared_smfs().is_empty());

    let fakes = Fakes::default();
    let mut c = cfg(addr("127.0.0.1:9"), [127, 0, 43, 101]);
    c.local_port = 0;
    let f = fakes.clone();
    let reports = replay_each_upf(&plan, &c, move |u| fresh_fake(f.clone(), u), |_| {})
        .await
        .unwrap();
    let lines: Vec<String> = reports.iter().map(|r| r.summary().to_string()).collect();
    assert_eq!(
        lines,
        vec![
            "replay of UPF 10.0.0.7:8805: 4 requests, 4 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
            "replay of UPF 10.0.0.8:8805: 3 requests, 3 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
        ],
        "{:#?}",
        reports.iter().flat_map(|r| r.report.outcomes.iter().map(|o| o.line())).collect::<Vec<_>>()
    );
    let fakes = fakes.take();
    assert_eq!(fakes.len(), 2);
    for (r, (upf, fake)) in reports.iter().zip(fakes.iter()) {
        assert_eq!(r.upf, *upf);
        assert_eq!(r.under_test, fake.addr());
        let st = fake.stats();
        let modified = u64::from(*upf == addr(ULCL));
        assert_eq!(
            (
                st.associations,
                st.established,
                st.modified,
                st.deleted,
                st.rejected
            ),
            (1, 1, modified, 1, 0),
            "{upf}"
        );
        // Each part's one SMF replays from the first local address.
        assert_eq!(r.report.locals.len(), 1);
        assert_eq!(r.report.locals[0].1.ip(), IpAddr::V4(c.local_base));
        // go-upf's echoed UE addresses: informational.
        assert!(r.report.notes.iter().any(|n| n.contains("informational")));
    }
    // Replayed all at once, the replay says why that cannot stand for both UPFs.
    let upf = FakeUpf::start(FakeUpfConfig::default()).await.unwrap();
    let whole = replay(&plan, &cfg(upf.addr(), [127, 0, 44, 101]), |_| {})
        .await
        .unwrap();
    assert!(
        whole.notes.iter().any(|n| n.starts_with(
            "SMF 10.0.0.4:8805 sends to 2 UPFs of the capture (10.0.0.7:8805, 10.0.0.8:8805)"
        )),
        "{:#?}",
        whole.notes
    );
    assert_eq!(upf.stats().associations, 2, "one SMF associated twice");
}

/// Three SMFs, each associated with three UPFs: each UPF's part holds the associations
/// of all three SMFs (each from its own local address) and the sessions it served.
#[tokio::test]
async fn three_smfs_with_three_upfs_replay_per_upf() {
    let plan = Plan::from_datagrams(&slicing_flow(true));
    let upfs = vec![
        addr("10.0.1.7:8805"),
        addr("10.0.2.7:8805"),
        addr("10.0.3.7:8805"),
    ];
    assert_eq!(plan.upfs(), upfs);
    let shared = plan.shared_smfs();
    assert_eq!(
        shared.iter().map(|s| s.smf.as_str()).collect::<Vec<_>>(),
        vec!["10.0.1.4:8805", "10.0.2.4:8805", "10.0.3.4:8805"]
    );
    assert!(shared.iter().all(|s| s.upfs == upfs));
    let fakes = Fakes::default();
    let mut c = cfg(addr("127.0.0.1:9"), [127, 0, 45, 101]);
    c.local_port = 0;
    let f = fakes.clone();
    let reports = replay_each_upf(&plan, &c, move |u| fresh_fake(f.clone(), u), |_| {})
        .await
        .unwrap();
    let lines: Vec<String> = reports.iter().map(|r| r.summary().to_string()).collect();
    assert_eq!(
        lines,
        vec![
            "replay of UPF 10.0.1.7:8805: 8 requests, 8 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
            "replay of UPF 10.0.2.7:8805: 6 requests, 6 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
            "replay of UPF 10.0.3.7:8805: 6 requests, 6 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
        ],
        "{:#?}",
        reports.iter().flat_map(|r| r.report.outcomes.iter().map(|o| o.line())).collect::<Vec<_>>()
    );
    let fakes = fakes.borrow();
    let counts: Vec<(u64, u64, u64, u64, u64)> = fakes
        .iter()
        .map(|(_, f)| {
            let s = f.stats();
            (
                s.associations,
                s.established,
                s.modified,
                s.deleted,
                s.rejected,
            )
        })
        .collect();
    assert_eq!(
        counts,
        vec![(3, 2, 1, 2, 0), (3, 1, 1, 1, 0), (3, 1, 1, 1, 0)]
    );
    for r in &reports {
        // The three SMFs, from three local addresses, in order of their first request.
        let smfs: Vec<String> = r.report.locals.iter().map(|(s, _)| s.to_string()).collect();
        assert_eq!(
            smfs,
            vec!["10.0.1.4:8805", "10.0.2.4:8805", "10.0.3.4:8805"]
        );
        let locals: Vec<IpAddr> = r.report.locals.iter().map(|(_, l)| l.ip()).collect();
        assert_eq!(
            locals,
            [101u8, 102, 103]
                .map(|h| IpAddr::V4(Ipv4Addr::new(127, 0, 45, h)))
                .to_vec()
        );
        // Every session request found its session at the fresh UPF.
        assert!(r
            .report
            .outcomes
            .iter()
            .flat_map(|o| &o.notes)
            .all(|n| !n.contains("unknown")));
    }
    // UPF 1's part: SMF 1's session, then SMF 3's, in capture order.
    let order: Vec<(u8, String)> = reports[0]
        .report
        .outcomes
        .iter()
        .filter(|o| o.message_type != mt::ASSOCIATION_SETUP_REQUEST)
        .map(|o| (o.message_type, o.smf.to_string()))
        .collect();
    assert_eq!(
        order,
        vec![
            (mt::SESSION_ESTABLISHMENT_REQUEST, "10.0.1.4:8805".into()),
            (mt::SESSION_ESTABLISHMENT_REQUEST, "10.0.3.4:8805".into()),
            (mt::SESSION_MODIFICATION_REQUEST, "10.0.1.4:8805".into()),
            (mt::SESSION_DELETION_REQUEST, "10.0.1.4:8805".into()),
            (mt::SESSION_DELETION_REQUEST, "10.0.3.4:8805".into()),
        ]
    );
}

fn write_pcap(path: &std::path::Path, flow: &[(usize, capture::Datagram)]) {
    let mut w =
        capture::PcapWriter::new(std::fs::File::create(path).unwrap(), capture::linktype::RAW)
            .unwrap();
    for (_, d) in flow {
        let pkt = capture::ip_udp_packet(d.src, d.dst, d.sport, d.dport, &d.payload);
        w.write(0, &pkt).unwrap();
    }
}

fn cli_replay(
    file: &std::path::Path,
    upf: SocketAddr,
    base: &str,
    extra: &[&str],
) -> std::process::Output {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_upfbench"));
    c.arg("replay")
        .arg(file)
        .args(["--upf", &upf.to_string()])
        .args(["--local-base", base, "--local-port", "0"])
        .args(CLI_TIMERS)
        .args(extra);
    run_bounded(c, 4 * SETTLE)
}

/// The CLI on a capture whose SMF talks to two UPFs: it replays the first, says so and
/// how to replay the other, and counts per UPF; `--capture-upf` picks the other.
#[test]
fn the_cli_replays_one_upf_of_an_uplink_classifier_capture() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ulcl.pcap");
    write_pcap(&file, &ulcl_flow());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let first = rt
        .block_on(FakeUpf::start(FakeUpfConfig::default()))
        .unwrap();
    let out = cli_replay(&file, first.addr(), "127.0.73.101", &[]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    eprintln!("{stdout}");
    assert!(out.status.success(), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[..2],
        [
            "note: the capture has 2 UPFs and SMF 10.0.0.4:8805 sends to 10.0.0.7:8805, 10.0.0.8:8805: one UPF under test cannot answer for them at once",
            "note: replaying the first UPF, 10.0.0.7:8805 (4 requests); for the other, run again against a fresh UPF with --capture-upf 10.0.0.8:8805 (3 requests)",
        ],
        "{stdout}"
    );
    assert_eq!(
        lines[lines.len() - 2..],
        [
            "replay of UPF 10.0.0.7:8805: 4 requests, 4 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
            "replay: 4 requests, 4 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
        ],
        "{stdout}"
    );
    let st = first.stats();
    assert_eq!((st.associations, st.established, st.deleted), (1, 1, 1));

    let second = rt
        .block_on(FakeUpf::start(FakeUpfConfig::default()))
        .unwrap();
    let out = cli_replay(
        &file,
        second.addr(),
        "127.0.74.101",
        &["--capture-upf", "10.0.0.8"],
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    eprintln!("{stdout}");
    assert!(out.status.success(), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0],
        "note: replaying the 3 requests to UPF 10.0.0.8:8805 only, of the capture's 2 UPFs; the other: --capture-upf 10.0.0.7:8805 (4 requests)"
    );
    assert_eq!(
        lines[lines.len() - 2..],
        [
            "replay of UPF 10.0.0.8:8805: 3 requests, 3 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
            "replay: 3 requests, 3 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
        ],
        "{stdout}"
    );
    let st = second.stats();
    assert_eq!(
        (st.associations, st.established, st.modified, st.deleted),
        (1, 1, 0, 1)
    );

    // A UPF the capture does not have: exit 2, and the capture's UPFs named.
    let out = cli_replay(
        &file,
        second.addr(),
        "127.0.74.101",
        &["--capture-upf", "10.0.0.9"],
    );
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr
            .contains("no UPF of the capture at 10.0.0.9; its UPFs: 10.0.0.7:8805, 10.0.0.8:8805"),
        "{stderr}"
    );
    assert_eq!(second.stats().requests, 3, "nothing more sent");
}

/// Several UPFs whose SMFs each talk to one of them (a slice per SMF, like V-SMF/V-UPF
/// and H-SMF/H-UPF in roaming): the CLI replays them all at once and counts per UPF.
#[test]
fn the_cli_replays_upfs_of_their_own_smfs_at_once_and_counts_each() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("slices.pcap");
    write_pcap(&file, &slicing_flow(false));
    let rt = tokio::runtime::Runtime::new().unwrap();
    let upf = rt
        .block_on(FakeUpf::start(FakeUpfConfig::default()))
        .unwrap();
    let out = cli_replay(&file, upf.addr(), "127.0.75.101", &[]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{stdout}");
    assert!(!stdout.contains("note:"), "{stdout}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        vec![
            "replay of UPF 10.0.1.7:8805: 4 requests, 4 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
            "replay of UPF 10.0.2.7:8805: 4 requests, 4 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
            "replay of UPF 10.0.3.7:8805: 4 requests, 4 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
            "replay: 12 requests, 12 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
        ]
    );
    let st = upf.stats();
    assert_eq!(
        (st.associations, st.established, st.deleted, st.rejected),
        (3, 3, 3, 0)
    );
}

/// One SMF with an FQDN Node ID and an N4 address per UPF (10.0.0.4 towards 10.0.0.7,
/// 10.0.0.5 towards 10.0.0.8), the UPFs allocating F-TEIDs. The replay keeps an FQDN as
/// sent, so one UPF under test would see that Node ID associate from two addresses (upfd
/// refuses the second as a takeover): the two endpoints are one SMF with two UPFs.
fn fqdn_smf_flow() -> Vec<(usize, capture::Datagram)> {
    let node = || Ie::NodeId(NodeId::Fqdn(pfcp::ie::Name::labels("smf.5gc.example")).into());
    let mut v = Vec::new();
    for (k, (smf, upf)) in [("10.0.0.4:8805", ULCL), ("10.0.0.5:8805", PSA)]
        .into_iter()
        .enumerate()
    {
        let (s, u) = (smf.to_string(), upf.to_string());
        let upf_ip = upf.split(':').next().unwrap();
        let smf_ip = ip4(smf.split(':').next().unwrap());
        let mut assoc = assoc_req(1, "0.0.0.0");
        assoc.ies[0] = node();
        let mut est = est_req(
            2,
            "0.0.0.0",
            0x40 + k as u64,
            vec![
                create_pdr(
                    1,
                    vec![
                        Ie::SourceInterface(Interface::ACCESS),
                        Ie::FTeid(FTeid::choose(true, false, None)),
                    ],
                ),
                far_forw(),
            ],
        );
        est.ies[0] = node();
        est.ies[1] = Ie::FSeid(FSeid {
            spare: 0,
            seid: 0x40 + k as u64,
            ipv4: Some(smf_ip),
            ipv6: None,
        });
        let up = 0x900 + k as u64;
        let fteid = FTeid::new(0x77, Some(ip4(upf_ip)), None);
        v.push((s.clone(), u.clone(), assoc));
        v.push((u.clone(), s.clone(), assoc_rsp(1, upf_ip)));
        v.push((s.clone(), u.clone(), est));
        v.push((
            u.clone(),
            s.clone(),
            est_rsp(
                2,
                0x40 + k as u64,
                upf_ip,
                up,
                vec![Ie::CreatedPdr(vec![Ie::PdrId(1), Ie::FTeid(fteid)])],
            ),
        ));
        v.push((
            s.clone(),
            u.clone(),
            session_req(mt::SESSION_DELETION_REQUEST, 3, up, vec![]),
        ));
        v.push((
            u,
            s,
            session_rsp(mt::SESSION_DELETION_RESPONSE, 3, 0x40 + k as u64, vec![]),
        ));
    }
    frames(v)
}

#[tokio::test]
async fn one_fqdn_node_id_from_two_addresses_is_one_smf_with_two_upfs() {
    let plan = Plan::from_datagrams(&fqdn_smf_flow());
    assert_eq!(plan.smfs().len(), 2);
    assert_eq!(
        plan.shared_smfs(),
        vec![SharedSmf {
            smf: "smf.5gc.example".into(),
            upfs: vec![addr(ULCL), addr(PSA)]
        }]
    );
    let fakes = Fakes::default();
    let mut c = cfg(addr("127.0.0.1:9"), [127, 0, 46, 101]);
    c.local_port = 0;
    let f = fakes.clone();
    let reports = replay_each_upf(&plan, &c, move |u| fresh_fake(f.clone(), u), |_| {})
        .await
        .unwrap();
    let lines: Vec<String> = reports.iter().map(|r| r.summary().to_string()).collect();
    assert_eq!(
        lines,
        vec![
            "replay of UPF 10.0.0.7:8805: 3 requests, 3 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
            "replay of UPF 10.0.0.8:8805: 3 requests, 3 responses matched, 0 mismatched, 0 timed out, 0 not replayable",
        ]
    );
    for (_, fake) in fakes.borrow().iter() {
        let st = fake.stats();
        assert_eq!((st.associations, st.established, st.deleted), (1, 1, 1));
    }
}
