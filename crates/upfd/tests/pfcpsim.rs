//! Interoperability with an independent SMF: pfcpsim v1.4.4 (github.com/omec-project/pfcpsim,
//! built by scripts/pfcpsim.sh into .tools/bin/) associates with upfd, creates 1000 sessions
//! with SDF filters, QERs and URRs, modifies them three times (gNB address set, buffering
//! with notify-CP, forwarding to another gNB), deletes them and disassociates.
//!
//! What is checked:
//! - every pfcpctl command exits 0 and prints pfcpsim's success message;
//! - pfcpsim logs no error;
//! - on the wire (an N4 tap between pfcpsim and upfd decodes every datagram): every request
//!   pfcpsim sent was answered, with Cause "Request accepted" where the response has a
//!   Cause, and the counts of each request type are the expected ones. pfcpsim itself
//!   ignores the Cause of the Association Release Response, so its success message alone
//!   does not prove that the release was accepted;
//! - upfd's log shows the association established and ended, with no session left.
//!
//! Everything is on loopback: upfd on 127.0.0.7, the tap on 127.0.0.8 (pfcpsim's remote
//! peer), pfcpsim's N4 socket on 127.0.0.1:8805 (it takes the first IPv4 address of the
//! interface given with -i, here lo, and always port 8805), its gRPC server on a free port.
//!
//! Without .tools/bin/pfcpsim the test prints how to build it and passes, unless
//! `UPF_REQUIRE_ORACLES=1`, when it fails.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::tap::Tap;
use common::{free_tcp_port, Output, Upfd, PATIENCE};
use pfcp::message_type as mt;

const SESSIONS: usize = 1000;
/// pfcpsim hands out UE addresses from the start of this pool, one per session.
const UE_POOL: &str = "10.45.0.0/16";
const UPF_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 7);
const TAP_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 8);
/// pfcpsim's own address: the first IPv4 address of lo.
const SMF_IP: Ipv4Addr = Ipv4Addr::LOCALHOST;
const GNB_A: &str = "127.0.0.9";
const GNB_B: &str = "127.0.0.10";
/// Two SDF filters per session: each gives an uplink and a downlink PDR, a FAR, a QER and
/// two URRs of its own (see pfcpsim's internal/pfcpsim/server.go).
const APP_FILTERS: [&str; 2] = ["udp:10.0.0.0/8:80-88:allow:100", "ip:any:any:allow:200"];
/// pfcpctl's steps are ended past this, so that a hang fails the test instead of holding
/// it; not a speed requirement (the whole takes seconds; the time is printed).
const HANG: Duration = Duration::from_secs(600);

fn tools() -> Option<(PathBuf, PathBuf)> {
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin");
    let (sim, ctl) = (bin.join("pfcpsim"), bin.join("pfcpctl"));
    if sim.is_file() && ctl.is_file() {
        return Some((sim, ctl));
    }
    if std::env::var("UPF_REQUIRE_ORACLES").as_deref() == Ok("1") {
        panic!("pfcpsim missing: run scripts/pfcpsim.sh");
    }
    println!("pfcpsim not built: skipping (scripts/pfcpsim.sh builds it)");
    None
}

/// pfcpsim, the gRPC server, killed on drop.
struct Pfcpsim {
    child: Child,
    out: Output,
    grpc: String,
}

impl Pfcpsim {
    fn start(bin: &Path) -> Pfcpsim {
        let mut last = String::new();
        for _ in 0..5 {
            let port = free_tcp_port();
            let mut child = Command::new(bin)
                .args(["-p", &port.to_string(), "-i", "lo"])
                .env("PFCPSIM_LOG_LEVEL", "info")
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("starting pfcpsim");
            let out = Output::of_child(&mut child);
            let end = Instant::now() + PATIENCE;
            while Instant::now() < end {
                if out.text().contains("server listening on port") {
                    return Pfcpsim {
                        child,
                        out,
                        grpc: format!("127.0.0.1:{port}"),
                    };
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            out.drain(PATIENCE);
            last = out.text();
        }
        panic!("pfcpsim did not start:\n{last}");
    }
}

impl Drop for Pfcpsim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Ctl<'a> {
    bin: &'a Path,
    server: String,
    deadline: Instant,
}

impl Ctl<'_> {
    /// Run pfcpctl with `args`, at most `limit` (and never past the test's deadline).
    /// Returns its exit success and output.
    fn run(&self, args: &[&str], limit: Duration) -> (bool, String, Duration) {
        let t0 = Instant::now();
        let end = (t0 + limit).min(self.deadline);
        let mut child = Command::new(self.bin)
            .arg("-s")
            .arg(&self.server)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting pfcpctl");
        let out = Output::of_child(&mut child);
        loop {
            if let Ok(Some(st)) = child.try_wait() {
                out.drain(PATIENCE);
                return (st.success(), out.text(), t0.elapsed());
            }
            if Instant::now() >= end {
                let _ = child.kill();
                let _ = child.wait();
                out.drain(PATIENCE);
                return (
                    false,
                    format!("{}\n(killed after {:?})", out.text(), t0.elapsed()),
                    t0.elapsed(),
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// pfcpsim binds 127.0.0.1:8805 for N4 when it associates; wait until nobody else has it.
fn wait_smf_port_free(timeout: Duration) {
    let end = Instant::now() + timeout;
    loop {
        match UdpSocket::bind((SMF_IP, 8805)) {
            Ok(_) => return,
            Err(e) if Instant::now() >= end => panic!(
                "{SMF_IP}:8805 stays in use ({e}): pfcpsim needs it for its N4 socket; \
                 is another pfcpsim or PFCP node running?"
            ),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
}

#[test]
fn pfcpsim_1000_sessions_with_sdf_filters_qers_urrs() {
    let Some((sim_bin, ctl_bin)) = tools() else {
        return;
    };
    let t0 = Instant::now();
    wait_smf_port_free(Duration::from_secs(60));

    // pfcpsim answers none of upfd's Heartbeat Requests (it drops them), so a heartbeat
    // interval shorter than the test would end the association, however slow the
    // machine makes the test: an hour.
    let upfd = Upfd::builder()
        .address(IpAddr::V4(UPF_IP))
        .n3(UPF_IP)
        .ue_pool("", UE_POOL)
        .heartbeat_interval("1h")
        .start();
    let tap = Tap::start(
        SocketAddr::new(IpAddr::V4(TAP_IP), 0),
        IpAddr::V4(SMF_IP),
        upfd.n4,
    );
    let sim = Pfcpsim::start(&sim_bin);
    let ctl = Ctl {
        bin: &ctl_bin,
        server: sim.grpc.clone(),
        deadline: t0 + HANG,
    };
    let started = t0.elapsed();

    let count = SESSIONS.to_string();
    let mut create: Vec<&str> = vec![
        "session",
        "create",
        "--count",
        &count,
        "--baseID",
        "1",
        "--ue-pool",
        UE_POOL,
        "--gnb-addr",
        GNB_A,
        "--qfi",
        "9",
    ];
    let mut modify_filters: Vec<&str> = Vec::new();
    for f in APP_FILTERS {
        create.extend(["--app-filter", f]);
        modify_filters.extend(["--app-filter", f]);
    }
    let modify = |extra: &[&'static str]| -> Vec<&str> {
        let mut v = vec!["session", "modify", "--count", &count, "--baseID", "1"];
        v.extend(modify_filters.iter().copied());
        v.extend(extra);
        v
    };
    let tap_addr = tap.listen.to_string();
    let upf_ip = UPF_IP.to_string();
    let n = SESSIONS;
    // Each step's limit only ends a hang (they take a second or two).
    let (short, long) = (Duration::from_secs(60), Duration::from_secs(180));
    #[rustfmt::skip]
    let steps: Vec<(&str, Vec<&str>, String, Duration)> = vec![
        ("configure",
         vec!["service", "configure", "--remote-peer-addr", &tap_addr, "--n3-addr", &upf_ip],
         "Server is configured".into(), short),
        ("associate", vec!["service", "associate"],
         "Association established".into(), short),
        ("create", create,
         format!("{n} sessions were established using 1 as baseID"), long),
        ("modify: forward to gNB A", modify(&["--gnb-addr", GNB_A]),
         format!("{n} sessions were modified"), long),
        ("modify: buffer, notify CP", modify(&["--buffer", "--notifycp"]),
         format!("{n} sessions were modified"), long),
        ("modify: forward to gNB B", modify(&["--gnb-addr", GNB_B]),
         format!("{n} sessions were modified"), long),
        ("delete", vec!["session", "delete", "--count", &count, "--baseID", "1"],
         format!("{n} sessions deleted; activeSessions: 0"), long),
        ("disassociate", vec!["service", "disassociate"],
         "Association teardown completed".into(), short),
    ];

    let mut problems: Vec<String> = Vec::new();
    let mut timings: Vec<String> = vec![format!("start upfd, tap, pfcpsim: {started:.2?}")];
    for (name, args, expect, limit) in &steps {
        let (ok, out, took) = ctl.run(args, *limit);
        timings.push(format!("{name}: {took:.2?}"));
        if !ok || !out.contains(expect.as_str()) {
            problems.push(format!(
                "step '{name}': pfcpctl {} {}: expected success and {expect:?}; got:\n{}",
                if ok { "exited 0" } else { "failed" },
                args.join(" "),
                out.trim_end()
            ));
            break;
        }
    }
    let total = t0.elapsed();

    // What upfd answered, from the wire.
    let expected = [
        (mt::ASSOCIATION_SETUP_REQUEST, 1),
        (mt::SESSION_ESTABLISHMENT_REQUEST, SESSIONS),
        (mt::SESSION_MODIFICATION_REQUEST, 3 * SESSIONS),
        (mt::SESSION_DELETION_REQUEST, SESSIONS),
        (mt::ASSOCIATION_RELEASE_REQUEST, 1),
    ];
    let exchanges = tap.exchanges();
    let mut shown = 0;
    for e in &exchanges {
        let bad = match &e.response {
            None => Some("no response".to_string()),
            Some(r) if r.cause.is_some_and(|c| c != 1) => Some(format!(
                "Cause {}{}",
                r.cause.unwrap(),
                r.offending_ie
                    .map(|t| format!(", Offending IE type {t}"))
                    .unwrap_or_default()
            )),
            Some(r) if r.parse_error.is_some() => {
                Some(format!("unparsable: {}", r.parse_error.as_ref().unwrap()))
            }
            _ => None,
        };
        // Only what upfd answers matters here; pfcpsim's own answers are its business,
        // but a missing one is shown too.
        if let Some(why) = bad {
            if !e.request.from_cp && e.request.message_type == mt::HEARTBEAT_REQUEST {
                continue; // pfcpsim drops upfd's Heartbeat Requests by design.
            }
            if shown < 5 {
                problems.push(format!(
                    "{} seq {} answered with {why}:\n  request:  {}\n  response: {}",
                    e.request.name(),
                    e.request.sequence,
                    e.request.describe(),
                    e.response
                        .as_ref()
                        .map(|r| r.describe())
                        .unwrap_or_else(|| "(none)".into())
                ));
            }
            shown += 1;
        }
    }
    if shown > 5 {
        problems.push(format!("... {} more such exchanges", shown - 5));
    }
    if problems.is_empty() {
        for (t, want) in expected {
            let (sent, accepted) = tap.accepted(t);
            if sent != want || accepted != want {
                problems.push(format!(
                    "{}: pfcpsim sent {sent}, upfd accepted {accepted}, expected {want}",
                    mt::name(t).unwrap_or("?")
                ));
            }
        }
    }

    // pfcpsim's own view.
    let sim_log = sim.out.text();
    let sim_errors: Vec<&str> = sim_log
        .lines()
        .filter(|l| l.contains("\tERROR\t") || l.contains("\tFATAL\t") || l.contains("\tPANIC\t"))
        .take(5)
        .collect();
    if !sim_errors.is_empty() {
        problems.push(format!("pfcpsim logged errors:\n{}", sim_errors.join("\n")));
    }

    // upfd's view: the association came up and went down, with no session left.
    let peer = SMF_IP.to_string();
    if !upfd.wait_for_log(&format!("association with {peer} established"), PATIENCE) {
        problems.push(format!(
            "upfd never logged 'association with {peer} established'"
        ));
    }
    let ended = format!("association with {peer} ended");
    if !upfd.wait_for_log(&ended, PATIENCE) {
        problems.push(format!("upfd never logged '{ended}'"));
    } else {
        let log = upfd.log();
        let line = log.lines().find(|l| l.contains(&ended)).unwrap_or("");
        if line.contains("session(s) deleted") && !line.contains("; 0 session(s) deleted") {
            problems.push(format!(
                "sessions were left when the association ended: {line}"
            ));
        }
    }

    let report = format!(
        "timings:\n  {}\n  total: {total:.2?}\nN4 messages seen by the tap:\n{}\
         pfcpsim reports received and answered: {}",
        timings.join("\n  "),
        tap.summary(),
        sim_log.matches("Session Report Request received").count(),
    );
    println!("{report}");
    assert!(
        problems.is_empty(),
        "pfcpsim against upfd:\n{}\n\n{report}\n\nupfd log (tail):\n{}\n\npfcpsim log (tail):\n{}",
        problems.join("\n\n"),
        upfd.log_tail(20),
        sim_log
            .lines()
            .filter(|l| !l.contains("successfully parsed application filter"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
