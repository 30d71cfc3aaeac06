//! `upfbench capacity --profile smoke` against this build's upfd, in its own lab: the
//! whole run works and writes its report. Root only.

mod common;

use common::lab::{root, serial};
use upfbench::lab::Lab;

/// `upfbench capacity ARGS` as the command line gives them (the first is the name).
fn capacity_args(args: &[&str]) -> upfbench::capacity::Args {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: upfbench::capacity::Args,
    }
    Cli::parse_from(args).a
}

/// `upfbench capacity --profile smoke` end to end against this upfd: limits, sessions,
/// saturation, the carrier table, no-drop search, latency, the ping/iperf3 check, and the
/// report written (JSON, charts, HTML).
#[test]
fn capacity_smoke_run_writes_the_report() {
    if !root() {
        return;
    }
    let _serial = serial();
    let dir = common::TempDir::new("capacity");
    let out = dir.0.join("report");
    let args = capacity_args(&[
        "capacity",
        "--profile",
        "smoke",
        "--prefix",
        "e-cap-",
        "--out",
        out.to_str().unwrap(),
    ]);
    let plan = upfbench::capacity::Plan::of(&args);
    let lab = Lab::up("e-cap-").unwrap().down_on_drop();
    let r = upfbench::capacity::bench(
        &args,
        &plan,
        &lab,
        std::path::Path::new(env!("CARGO_BIN_EXE_upfd")),
        &out,
    )
    .unwrap_or_else(|e| panic!("capacity run: {e:#}"));
    // Every figure of the run, so a failed check below can be read against them.
    eprintln!("{}", upfbench::report::render_text(&r));
    assert_eq!(r.limits.len(), 2, "{:?}", r.limits);
    // Every trial got packets through (a rate above 0 is a count above 0; how high, on a
    // busy machine, is the report's business).
    for l in &r.limits {
        assert!(
            l.generator_mpps.unwrap() > 0.0 && l.io_mpps.unwrap() > 0.0,
            "{l:?}"
        );
    }
    let cap = r.capacity.as_ref().expect("carrier table");
    assert_eq!(cap.rows[0].users, 100);
    // Traffic went through both ways; how much of it, on a VM that stalls, is the
    // benchmark's business (the report's loss columns), not the test's.
    assert!(
        cap.rows[0].ul_mpps > 0.0 && cap.rows[0].dl_mpps > 0.0,
        "{cap:?}"
    );
    assert_eq!(r.throughput.len(), 4);
    assert!(r
        .throughput
        .iter()
        .all(|t| t.received_mpps > 0.0 && t.vs_io.is_some()));
    // Each trial between two readings of its I/O limit; at all sessions, of the one-miss
    // limit too (which forwards only what finds its session's record: a wrong table or
    // TEID would read 0).
    for t in &r.throughput {
        let b = t
            .io_bracket
            .unwrap_or_else(|| panic!("no I/O limit beside {t:?}"));
        assert!(b.before_mpps > 0.0 && b.after_mpps > 0.0, "{t:?}");
        assert_eq!(t.one_miss_bracket.is_some(), t.sessions == 200, "{t:?}");
    }
    for l in &r.limits {
        assert!(
            l.one_miss_mpps.is_some_and(|m| m > 0.0) && l.one_miss_sessions == Some(200),
            "{l:?}"
        );
    }
    // The no-drop searches ran, the UPF's and the rig's: each tried rates and measured
    // their loss, and a rate found is one tried without loss. (A VM that stalls may lose
    // packets at every rate down to the floor: then none is found, 0, which the report
    // shows; how far the search got is the benchmark's business.)
    assert_eq!(r.no_drop.len(), 2);
    for n in &r.no_drop {
        assert!(!n.curve.is_empty(), "no rate tried: {n:?}");
        assert!(
            n.curve
                .iter()
                .all(|p| (0.0..=100.0).contains(&p.loss_pct) && p.offered_mpps > 0.0),
            "{n:?}"
        );
        assert!(
            n.mpps == 0.0 || n.curve.iter().any(|p| p.loss_pct == 0.0),
            "a no-drop rate without a loss-free trial: {n:?}"
        );
        assert!(n.rig_mpps.is_some(), "the rig's own no-drop rate: {n:?}");
        eprintln!(
            "no-drop {:?}: {:.4} Mpps, the rig's {:?}",
            n.direction, n.mpps, n.rig_mpps
        );
    }
    assert!(cap.rig_users.is_some(), "{cap:?}");
    assert_eq!(r.latency.len(), 2);
    assert_eq!(r.sessions[0].resident, 200);
    // 200 more sessions while both directions ran at half the no-drop rate.
    let u = r
        .establish_under_traffic
        .as_ref()
        .expect("establishment under traffic");
    assert_eq!(
        (u.resident, u.requested, u.established),
        (200, 200, 200),
        "{u:?}"
    );
    assert!(
        u.ul_offered_mpps > 0.0 && u.dl_offered_mpps > 0.0 && u.traffic_secs >= u.establish_secs,
        "{u:?}"
    );
    // Per-core scaling: xdp_n3 and xdp_n6, disjoint and one hot session, one CPU and two.
    assert_eq!(r.scaling.len(), 8, "{:?}", r.scaling);
    assert!(
        r.scaling
            .iter()
            .all(|c| c.aggregate_mpps > 0.0 && c.mpps_per_cpu.len() == c.cpus as usize),
        "{:?}",
        r.scaling
    );
    // The application mix: 200 sessions with web and voice PDRs, each direction between
    // two trials without; each application's URR counted its share of what crossed (85 %
    // TCP, 15 % UDP), nothing fell through to the default PDRs, and the URRs together
    // counted what the sink received at least and what the generator sent at most.
    assert_eq!(r.app_mix.len(), 2, "{:?}", r.app_mix);
    for p in &r.app_mix {
        assert_eq!(p.sessions, 200, "{p:?}");
        assert!(
            p.received_mpps > 0.0 && p.without_mpps > 0.0 && p.ratio > 0.0,
            "{p:?}"
        );
        let ids: Vec<&str> = p.apps.iter().map(|a| a.id.as_str()).collect();
        assert_eq!(ids, ["web", "voice"], "{p:?}");
        let counted: u64 = p.apps.iter().map(|a| a.packets).sum();
        assert!(
            counted >= p.received_packets && counted <= p.sent_packets,
            "URRs {counted}, received {}, sent {}: {p:?}",
            p.received_packets,
            p.sent_packets
        );
        assert_eq!(p.unmatched_packets, 0, "{p:?}");
        // Each application's share of what its URR counted is its share of what was
        // sent, unless the rig lost packets before upfd saw them (then the loss, not
        // upfd, decides which: the shares are printed).
        let loss = 1.0 - p.received_packets as f64 / p.sent_packets.max(1) as f64;
        for a in &p.apps {
            eprintln!(
                "{}: counted {:.2} %, sent {:.2} % (loss {:.2} %)",
                a.id,
                a.counted_share_pct,
                a.share_pct,
                loss * 100.0
            );
            if loss < 0.01 {
                assert!(
                    (a.counted_share_pct - a.share_pct).abs() < 2.0,
                    "{}: counted {:.2} %, sent {:.2} %: {p:?}",
                    a.id,
                    a.counted_share_pct,
                    a.share_pct
                );
            }
        }
    }
    assert!(
        upfbench::report::render_text(&r).contains("Application mix"),
        "the text report shows it"
    );
    // Every rule on: both PDRs carry the SDF filter upfd evaluates for every packet.
    let rules = &r.upf.as_ref().expect("upf").options["rules per session"];
    assert!(rules.contains("2 PDRs with an SDF filter"), "{rules}");
    let w = r.write_all(&out).unwrap();
    assert!(w.html.is_file() && w.json.is_file());
    let text = upfbench::report::render_text(&r);
    assert!(
        text.contains("users | upload Gbit/s | upload loss %"),
        "{text}"
    );
    lab.down().unwrap();
}

/// `upfbench capacity --external` as docs/benchmarks.md tells a user to run it: the lab
/// made first, the UPF started in it (here upfd), then the run. The run uses that lab as
/// it is and leaves it, and the UPF, in place; the limits are measured before and after
/// the UPF's trials and beside each of them (the UPF's programs put back each time), and
/// the report has the UPF's memory per session; the SMF emulator answers the UPF's
/// heartbeats until the end and then releases its association. Without the lab, it says
/// what to do first.
#[test]
fn capacity_external_measures_the_running_upf_in_its_lab_and_leaves_both() {
    if !root() {
        return;
    }
    let _serial = serial();
    let missing = capacity_args(&["capacity", "--external", "--prefix", "e-none-"]);
    let e = upfbench::capacity::lab_for(&missing).unwrap_err();
    assert!(
        format!("{e:#}").contains("the lab of prefix \"e-none-\" is not there"),
        "{e:#}"
    );

    let lab = Lab::up("e-ext-").unwrap().down_on_drop();
    let dir = common::TempDir::new("capacity-ext");
    // upfd heartbeats its SMFs every second, as a UPF that notices a lost peer soon does
    // (UpfdOptions has no key for it: a wrapper adds the override; `exec` keeps the pid).
    // In the build tree, which runs programs; a /tmp mounted noexec would not.
    let bin = common::TempDir(
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("capacity-ext-{}", std::process::id())),
    );
    std::fs::create_dir_all(&bin.0).unwrap();
    let wrapper = bin.0.join("upfd-heartbeat-1s");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec '{}' \"$@\" --set n4.heartbeat_interval=1s\n",
            env!("CARGO_BIN_EXE_upfd")
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mut upfd = common::lab::LabUpfd::start(
        &lab,
        &common::lab::UpfdOptions {
            binary: Some(wrapper),
            ..common::lab::UpfdOptions::default()
        },
    );
    let out = dir.0.join("report");
    let pid = upfd.pid().to_string();
    let args = capacity_args(&[
        "capacity",
        "--profile",
        "smoke",
        "--external",
        "--upf-name",
        "upfd as an external UPF",
        "--upf-pid",
        &pid,
        "--prefix",
        "e-ext-",
        "--out",
        out.to_str().unwrap(),
    ]);
    let code = upfbench::capacity::run(args).unwrap_or_else(|e| panic!("capacity: {e:#}"));
    assert_eq!(code, std::process::ExitCode::SUCCESS);
    // The lab and the UPF are still there, and the UPF still answers.
    assert_eq!(Lab::present("e-ext-").len(), 4);
    assert!(upfd.running(), "upfd ended:\n{}", upfd.log());
    assert!(upfd.metrics().contains("upf_sessions"));
    heartbeats_answered_until_the_release(&upfd);
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    for l in r["limits"].as_array().expect("limits") {
        assert_eq!(
            l["io_passes_mpps"].as_array().map(Vec::len),
            Some(2),
            "two passes bracket the trials: {l}"
        );
        assert!(l["one_miss_mpps"].as_f64().is_some(), "{l}");
    }
    // Swapping the limits in and out beside each trial leaves the UPF forwarding: every
    // UPF trial, each after a limit's, got packets through.
    for t in r["throughput"].as_array().expect("throughput") {
        assert!(t["io_bracket"]["before_mpps"].as_f64().is_some(), "{t}");
        assert!(t["received_mpps"].as_f64().unwrap() > 0.0, "{t}");
    }
    assert!(
        r["sessions"][0]["bytes_per_session"]
            .as_u64()
            .is_some_and(|b| b > 0),
        "memory per session: {}",
        r["sessions"][0]
    );
    drop(upfd);
    lab.down().unwrap();
}

/// upfd heartbeated both of the run's SMFs (its own and the application mix's) every
/// second, and each answered every Heartbeat Request while associated: none went
/// unanswered through upfd's retransmissions (n4.t1 3 s, n4.n1 3: a silence of 12 s
/// counts as a timeout and drops the association), every request but one in flight per
/// SMF at its release got its response, and both associations ended by the SMF's release
/// at the end of its part of the run, none by a lost peer. Before, the SMF emulator was
/// dropped after the ping and iperf3 check, unreleased, and upfd lost it during the last
/// limit pass (or right after the run).
fn heartbeats_answered_until_the_release(upfd: &common::lab::LabUpfd) {
    // A peer that went silent without a release is dropped within 13 s: wait for the
    // associations to end either way, then read how they ended.
    let end = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while upfd.metric("upf_associations") > 0 && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let m = upfd.metrics();
    let log = upfd.log();
    let series = |dir: &str, ty: &str| {
        common::lab::metric(
            &m,
            &format!("upf_n4_messages_total{{direction=\"{dir}\",type=\"{ty}\",cause=\"none\"}}"),
        )
    };
    let sent = series("sent", "heartbeat_request");
    let answered = series("received", "heartbeat_response");
    eprintln!("upfd's heartbeats: {sent} sent, {answered} answered");
    assert_eq!(common::lab::metric(&m, "upf_associations"), 0, "{log}");
    assert!(
        !log.contains("peer lost"),
        "an SMF stopped answering:\n{log}"
    );
    assert_eq!(
        log.matches("ended (released by the CP function)").count(),
        2,
        "the run's SMF and the application mix's release their associations:\n{log}"
    );
    assert_eq!(common::lab::metric(&m, "upf_n4_timeouts_total"), 0, "{log}");
    assert!(
        sent > 0 && answered <= sent && answered + 2 >= sent,
        "{sent} Heartbeat Requests, {answered} answered:\n{log}"
    );
}
