//! Restart without loss (issue 14), on loopback without a data path (datapath: none):
//! upfd with `state.directory` killed (SIGKILL) and stopped for an upgrade (SIGTERM, a
//! new binary started) keeps every session and association, and its Recovery Time
//! Stamp, so the SMF sees nothing (TS 23.527 clause 4.3); a corrupt, cut short, newer or
//! foreign state is set aside and upfd starts clean with a new Recovery Time Stamp,
//! which tells the SMF. The same with traffic through the XDP data path, and the
//! counts, is the lab test `restart_under_traffic_keeps_every_session_and_counts_exactly`.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{
    free_tcp_port, free_udp_port, lab::http_get, recovery_time_stamp, TempDir, Upfd, UpfdBuilder,
    PATIENCE,
};
use upfbench::smf::{Pace, Smf, SmfConfig};

const UPF: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 7);
const SMF: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 8);

struct Setup {
    port: u16,
    api: String,
    state: TempDir,
}

impl Setup {
    fn new() -> Setup {
        Setup {
            port: free_udp_port(IpAddr::V4(UPF)),
            api: format!("{UPF}:{}", free_tcp_port()),
            state: TempDir::new("upfd-state"),
        }
    }

    fn builder(&self, pool: &str) -> UpfdBuilder {
        Upfd::builder()
            .port(self.port)
            .ue_pool("", pool)
            .heartbeat_interval("1s")
            .graceful_release_period("1s")
            .extra_yaml(&format!(
                "state:\n  directory: {:?}\napi:\n  listen: \"{}\"\n",
                self.state.0, self.api
            ))
    }

    fn start(&self) -> Upfd {
        self.builder("10.70.0.0/16").start()
    }

    fn metric(&self, series: &str) -> u64 {
        common::lab::metric(
            &http_get(&self.api, "/metrics").expect("GET /metrics"),
            series,
        )
    }

    fn consistent(&self) -> String {
        http_get(&self.api, "/check").expect("GET /check")
    }

    fn snapshot(&self) -> std::path::PathBuf {
        self.state.0.join("state")
    }
}

struct LoopSmf {
    rt: tokio::runtime::Runtime,
    smf: Smf,
}

impl LoopSmf {
    fn associate(upf: SocketAddr) -> LoopSmf {
        LoopSmf::associate_with(upf, |_| {})
    }

    /// [`LoopSmf::associate`] with the emulator's configuration changed by `edit`.
    fn associate_with(upf: SocketAddr, edit: impl FnOnce(&mut SmfConfig)) -> LoopSmf {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let mut cfg = SmfConfig::new(upf);
        cfg.bind = SocketAddr::new(SMF.into(), 0);
        cfg.ue_pool = "10.70.0.0/16".parse().unwrap();
        // Patient with a busy machine: a request unanswered for 20 s fails the test.
        cfg.timers.t1 = Duration::from_secs(5);
        edit(&mut cfg);
        let mut smf = rt.block_on(Smf::connect(cfg)).expect("SMF socket");
        let r = rt.block_on(smf.associate());
        assert_eq!(r.accepted, 1, "{r:?}");
        LoopSmf { rt, smf }
    }

    fn heartbeats(&self) -> u64 {
        self.smf.n4().upf_requests().heartbeats
    }

    /// Wait for upfd's next Heartbeat Request (a restored upfd sends one at once).
    fn wait_heartbeat(&self, after: u64) -> bool {
        let end = Instant::now() + PATIENCE;
        while Instant::now() < end {
            if self.heartbeats() > after {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}

fn copy_binary(to: &Path) -> std::path::PathBuf {
    let p = to.join("upfd-upgraded");
    std::fs::copy(env!("CARGO_BIN_EXE_upfd"), &p).expect("copying upfd");
    p
}

#[test]
fn sigkill_and_upgrade_keep_sessions_associations_and_the_recovery_time_stamp() {
    let setup = Setup::new();
    let mut upfd = setup.start();
    let smf = LoopSmf::associate(upfd.n4);
    let mut smf = smf;
    let r = smf.rt.block_on(smf.smf.establish(300, Pace::default()));
    assert_eq!(r.accepted, 300, "{r:?}");
    let stamps = smf.smf.n4().upf_recovery_time_stamps();
    assert_eq!(stamps.len(), 1, "{stamps:?}");

    // A crash: SIGKILL, then the same binary again.
    assert!(upfd.stop(libc::SIGKILL, PATIENCE));
    drop(upfd);
    let hb = smf.heartbeats();
    let mut upfd = setup.start();
    assert!(
        upfd.wait_for_log(
            "state: restored 300 session(s) of 1 association(s)",
            PATIENCE
        ),
        "{}",
        upfd.log()
    );
    assert!(
        smf.wait_heartbeat(hb),
        "a heartbeat from the restarted upfd"
    );
    assert_eq!(
        smf.smf.n4().upf_recovery_time_stamps(),
        stamps,
        "the SMF sees the same Recovery Time Stamp"
    );
    assert!(setup.consistent().contains("\"consistent\":true"));
    assert_eq!(setup.metric("upf_sessions"), 300);
    // Every session answers to its SEID as before.
    let r = smf.rt.block_on(smf.smf.modify(Pace::default()));
    assert_eq!((r.accepted, r.requests), (300, 300), "{r:?}");

    // A planned upgrade: SIGTERM, then another binary on the same state.
    // stop() returns once upfd has ended and its log is all in.
    assert!(upfd.stop(libc::SIGTERM, PATIENCE));
    assert!(
        upfd.log()
            .contains("exiting with 300 session(s) of 1 association(s) kept"),
        "{}",
        upfd.log()
    );
    // Without a data path nothing forwards meanwhile, and upfd says so.
    assert!(
        upfd.log()
            .contains("no data path (datapath.mode: none): nothing forwards until the next upfd restores them")
            && !upfd.log().contains("keeps forwarding"),
        "{}",
        upfd.log()
    );
    drop(upfd);
    let bin = copy_binary(&setup.state.0);
    let hb = smf.heartbeats();
    let upfd = setup.builder("10.70.0.0/16").binary(&bin).start();
    assert!(
        upfd.wait_for_log("state: restored 300 session(s)", PATIENCE),
        "{}",
        upfd.log()
    );
    assert!(smf.wait_heartbeat(hb));
    assert_eq!(smf.smf.n4().upf_recovery_time_stamps(), stamps);
    // New sessions take TEIDs and UE addresses the kept ones do not hold.
    let r = smf.rt.block_on(smf.smf.establish(100, Pace::default()));
    assert_eq!(r.accepted, 100, "{r:?}");
    assert!(setup.consistent().contains("\"consistent\":true"));
    let r = smf.rt.block_on(smf.smf.delete(Pace::default()));
    assert_eq!((r.accepted, r.requests), (400, 400), "{r:?}");
    assert_eq!(setup.metric("upf_sessions"), 0);
    assert!(setup.consistent().contains("\"consistent\":true"));
    assert_eq!(smf.smf.n4().upf_recovery_time_stamps(), stamps);

    // SIGINT ends upfd for good: associations released (the emulator does not release
    // when asked, so after n4.graceful_release_period), the state removed, and the next
    // start is a first start with a new Recovery Time Stamp.
    let mut upfd = upfd;
    assert!(upfd.stop(libc::SIGINT, PATIENCE));
    assert!(
        upfd.log().contains("all associations released; exiting"),
        "{}",
        upfd.log()
    );
    drop(upfd);
    assert!(!setup.snapshot().exists(), "the state is removed");
    let upfd = setup.start();
    assert!(
        upfd.wait_for_log("(first start)", PATIENCE),
        "{}",
        upfd.log()
    );
    let ts = recovery_time_stamp(upfd.n4).expect("a heartbeat response");
    assert_ne!(ts, stamps[0]);
}

/// A snapshot is taken in steps between N4's batches (issue 28: N4 never waits for
/// every session to be read): with a small journal limit upfd takes one snapshot after
/// another while the SMF establishes and modifies 3,000 sessions, each read in more
/// than one step; killed while that goes on, upfd comes back with every session.
#[test]
fn snapshots_taken_in_steps_while_n4_works_lose_nothing_at_a_sigkill() {
    const SESSIONS: usize = 3000;
    let setup = Setup::new();
    let builder = || {
        Upfd::builder()
            .port(setup.port)
            .ue_pool("", "10.70.0.0/16")
            .heartbeat_interval("1s")
            .log_level("debug")
            .extra_yaml(&format!(
                "state:\n  directory: {:?}\n  journal_limit: 65536\napi:\n  listen: \"{}\"\n",
                setup.state.0, setup.api
            ))
    };
    let mut upfd = builder().start();
    let mut smf = LoopSmf::associate(upfd.n4);
    let r = smf
        .rt
        .block_on(smf.smf.establish(SESSIONS, Pace::default()));
    assert_eq!(r.accepted, SESSIONS, "{r:?}");
    let r = smf.rt.block_on(smf.smf.modify(Pace::default()));
    assert_eq!((r.accepted, r.requests), (SESSIONS, SESSIONS), "{r:?}");
    // A snapshot of every session (and of the cached responses), read in steps of at
    // most 1,024 (persist.rs STEP_MAX), the first step being the associations and the
    // rest.
    let read = format!("{SESSIONS} sessions and ");
    assert!(upfd.wait_for_log(&read, PATIENCE), "{}", upfd.log_tail(30));
    let log = upfd.log();
    let steps: Vec<u64> = log
        .lines()
        .filter(|l| l.contains(&read))
        .filter_map(|l| l.split(" read in ").nth(1)?.split(' ').next()?.parse().ok())
        .collect();
    assert!(
        !steps.is_empty() && steps.iter().all(|s| *s >= 4),
        "{steps:?}\n{}",
        upfd.log_tail(30)
    );
    for l in log.lines().filter(|l| l.contains(&read)) {
        eprintln!("{l}");
    }
    assert!(log.contains(" written ("), "{}", upfd.log_tail(30));
    // More changes, and a kill while snapshots go on.
    let r = smf.rt.block_on(smf.smf.modify(Pace::default()));
    assert_eq!((r.accepted, r.requests), (SESSIONS, SESSIONS), "{r:?}");
    assert!(upfd.stop(libc::SIGKILL, PATIENCE));
    drop(upfd);
    let hb = smf.heartbeats();
    let upfd = builder().start();
    assert!(
        upfd.wait_for_log(
            &format!("state: restored {SESSIONS} session(s) of 1 association(s)"),
            PATIENCE
        ),
        "{}",
        upfd.log_tail(30)
    );
    assert!(smf.wait_heartbeat(hb));
    assert!(setup.consistent().contains("\"consistent\":true"));
    let r = smf.rt.block_on(smf.smf.modify(Pace::default()));
    assert_eq!((r.accepted, r.requests), (SESSIONS, SESSIONS), "{r:?}");
    let r = smf.rt.block_on(smf.smf.delete(Pace::default()));
    assert_eq!((r.accepted, r.requests), (SESSIONS, SESSIONS), "{r:?}");
    assert_eq!(setup.metric("upf_sessions"), 0);
    drop(upfd);
}

/// Killed after a batch is in the journal and before its responses leave (the
/// failpoint `UPFD_FAILPOINT`, runtime.rs), upfd restarts from its state; the SMF
/// retransmits what went unanswered and each request gets the answer it would have
/// got: the establishments of the lost batch are answered from the response cache kept
/// in the state (issue 28), not executed again, so no session is duplicated or leaked.
#[test]
fn a_kill_between_journal_and_send_duplicates_and_leaks_nothing() {
    const SESSIONS: usize = 200;
    let setup = Setup::new();
    let mut upfd = setup
        .builder("10.70.0.0/16")
        .env("UPFD_FAILPOINT", "kill-before-send:51:3")
        .start();
    let smf = LoopSmf::associate_with(upfd.n4, |c| {
        // Retransmitting for 30 s: a busy machine's restart of upfd fits in that.
        c.timers.t1 = Duration::from_secs(3);
        c.timers.n1 = 10;
    });
    let establishing = std::thread::spawn(move || {
        let mut smf = smf;
        let r = smf
            .rt
            .block_on(smf.smf.establish(SESSIONS, Pace::default()));
        (smf, r)
    });
    let end = Instant::now() + PATIENCE;
    while upfd.running() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(upfd.stop(libc::SIGKILL, PATIENCE));
    assert!(
        upfd.log()
            .contains("UPFD_FAILPOINT: killing upfd after journaling this batch"),
        "{}",
        upfd.log_tail(30)
    );
    drop(upfd);
    let upfd = setup.start();
    let (smf, r) = establishing.join().expect("the establishing thread");
    assert_eq!((r.accepted, r.requests), (SESSIONS, SESSIONS), "{r:?}");
    assert!(r.retransmissions > 0, "{r:?}");
    // The lost batch's requests were answered from the restored cache.
    assert!(setup.metric("upf_n4_duplicates_total") > 0);
    assert_eq!(setup.metric("upf_sessions"), SESSIONS as u64);
    assert!(setup.consistent().contains("\"consistent\":true"));
    let mut smf = smf;
    let r = smf.rt.block_on(smf.smf.delete(Pace::default()));
    assert_eq!((r.accepted, r.requests), (SESSIONS, SESSIONS), "{r:?}");
    assert_eq!(setup.metric("upf_sessions"), 0, "none leaked");
    assert!(setup.consistent().contains("\"consistent\":true"));
    drop(upfd);
}

/// While it waits for its SMFs to release, upfd says every 5 s how long is left, in
/// whole seconds ("25 s of the 30 s period left", not "24.992646041s of the 30s").
#[test]
fn the_release_progress_is_said_in_whole_seconds() {
    let setup = Setup::new();
    let mut upfd = setup
        .builder("10.70.0.0/16")
        .graceful_release_period("30s")
        .start();
    // The emulator does not release when asked: upfd waits.
    let _smf = LoopSmf::associate(upfd.n4);
    upfd.signal(libc::SIGINT);
    assert!(
        upfd.wait_for_log("still waiting for 1 SMF(s) to release", PATIENCE),
        "{}",
        upfd.log()
    );
    assert!(
        upfd.log()
            .contains("to release their sessions within 30 s:"),
        "{}",
        upfd.log()
    );
    let log = upfd.log();
    let line = log
        .lines()
        .find(|l| l.contains("still waiting for"))
        .unwrap();
    let left = line
        .split("; ")
        .last()
        .and_then(|t| t.strip_suffix(" of the 30 s period left (SIGTERM or SIGINT again ends now)"))
        .unwrap_or_else(|| panic!("{line}"));
    let n: u64 = left
        .strip_suffix(" s")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not whole seconds: {line}"));
    assert!(n <= 30, "{line}");
    // A second signal ends it now.
    assert!(upfd.stop(libc::SIGINT, PATIENCE), "{}", upfd.log());
}

/// How a test damages the state.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// One octet changed inside a session's record.
    Flipped,
    /// The snapshot cut in half (a disk full, a copy interrupted).
    CutShort,
    /// Written by a newer upfd (another format version).
    NewerFormat,
    /// Written under another configuration (another UE pool).
    OtherConfig,
}

#[test]
fn a_corrupt_cut_short_newer_or_foreign_state_is_set_aside_and_upfd_starts_clean() {
    // A newer upfd's state: the next format version.
    let newer = upf::state::FORMAT + 1;
    let newer_why = format!(
        "format version {newer}, this upfd reads {}",
        upf::state::FORMAT
    );
    for (damage, why) in [
        (Damage::Flipped, "checksum mismatch"),
        (Damage::CutShort, "cut short"),
        (Damage::NewerFormat, newer_why.as_str()),
        (Damage::OtherConfig, "written for another configuration"),
    ] {
        let setup = Setup::new();
        let mut upfd = setup.start();
        let mut smf = LoopSmf::associate(upfd.n4);
        let r = smf.rt.block_on(smf.smf.establish(20, Pace::default()));
        assert_eq!(r.accepted, 20, "{r:?}");
        let stamps = smf.smf.n4().upf_recovery_time_stamps();
        assert!(upfd.stop(libc::SIGKILL, PATIENCE));
        drop(upfd);
        let path = setup.snapshot();
        let mut b = std::fs::read(&path).expect("the state file");
        let pool = match damage {
            Damage::Flipped => {
                // Inside the last session record, before the end record.
                let at = b.len() - 40;
                b[at] ^= 0x5a;
                "10.70.0.0/16"
            }
            Damage::CutShort => {
                b.truncate(b.len() / 2);
                "10.70.0.0/16"
            }
            Damage::NewerFormat => {
                b[8..12].copy_from_slice(&newer.to_le_bytes());
                "10.70.0.0/16"
            }
            Damage::OtherConfig => "10.71.0.0/16",
        };
        std::fs::write(&path, &b).unwrap();
        let hb = smf.heartbeats();
        let upfd = setup.builder(pool).start();
        // Said before upfd answers N4; the log reaches us through a reader thread.
        upfd.wait_for_log("Starting clean with a new Recovery Time Stamp", PATIENCE);
        let log = upfd.log();
        assert!(
            log.contains("state: not used: ") && log.contains(why),
            "{damage:?}: {log}"
        );
        assert!(log.contains("Starting clean with a new Recovery Time Stamp"));
        assert!(
            !log.contains("state: restored"),
            "{damage:?}: nothing applied"
        );
        assert!(
            setup.state.0.join("state.bad").exists(),
            "{damage:?}: set aside"
        );
        assert_eq!(setup.metric("upf_sessions"), 0, "{damage:?}");
        // The SMF learns of the restart: a new time stamp in upfd's heartbeat (the
        // association is gone, so upfd only answers; ask it).
        let _ = hb;
        let ts = recovery_time_stamp(upfd.n4).expect("a heartbeat response");
        assert_ne!(ts, stamps[0], "{damage:?}: a new Recovery Time Stamp");
        // A fresh state was written: the next restart keeps the new time stamp.
        let r = smf.rt.block_on(smf.smf.associate());
        assert_eq!(r.accepted, 1);
        drop(upfd);
        let upfd = setup.builder(pool).start();
        assert!(
            upfd.wait_for_log("state: restored 0 session(s) of 1 association(s)", PATIENCE),
            "{damage:?}: {}",
            upfd.log()
        );
        assert_eq!(recovery_time_stamp(upfd.n4), Some(ts));
        smf.smf.n4().take_session_reports();
    }
}

/// The applications GET /api/v1/applications shows: Application ID, index and source.
fn applications(setup: &Setup) -> Vec<(String, u64, String)> {
    let body = http_get(&setup.api, "/api/v1/applications").expect("GET /api/v1/applications");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let mut apps: Vec<(String, u64, String)> = v["applications"]
        .as_array()
        .expect("a list of applications")
        .iter()
        .map(|a| {
            (
                a["id"].as_str().unwrap().to_string(),
                a["index"].as_u64().unwrap(),
                a["source"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    apps.sort();
    apps
}

/// PFDs an SMF provisioned by PFD Management are kept in the state: after a restart
/// its applications have the indices they had (the restored PDRs and the data path name
/// them by those), the sessions with application PDRs are restored, and a modification
/// naming an application is accepted without the SMF sending its PFDs again. The
/// configured applications are taken in over them (a new one gets the next index).
#[test]
fn pfds_provisioned_by_pfd_management_survive_a_restart_with_their_indices() {
    use pfcp::msg::{self, Msg};
    use upfbench::smf::{AppPfds, AppRule};
    let setup = Setup::new();
    let local = "applications:\n  - id: local\n    domain_names: [local.example]\n";
    let mut upfd = setup.builder("10.70.0.0/16").extra_yaml(local).start();
    let mut smf = LoopSmf::associate_with(upfd.n4, |c| {
        c.applications = vec!["video:start".parse::<AppRule>().unwrap()];
    });
    let pfds = [
        AppPfds {
            id: "chat".into(),
            domains: vec!["chat.example".into()],
            ..AppPfds::default()
        },
        AppPfds {
            id: "video".into(),
            domains: vec!["video.example".into()],
            urls: vec!["http://video.example/live".into()],
            flows: vec!["permit out 6 from 192.0.2.0/24 443 to assigned".into()],
        },
    ];
    let r = smf
        .rt
        .block_on(smf.smf.pfd_management(&pfds))
        .expect("a response");
    assert!(r.cause.is_acceptance(), "{r:?}");
    let r = smf.rt.block_on(smf.smf.establish(2, Pace::default()));
    assert_eq!(r.accepted, 2, "{r:?}");
    let before = applications(&setup);
    assert_eq!(
        before,
        [
            ("chat".to_string(), 2, "pfd_management".to_string()),
            ("local".to_string(), 1, "configuration".to_string()),
            ("video".to_string(), 3, "pfd_management".to_string()),
        ]
    );

    // A crash; the new upfd's configuration has one more application.
    assert!(upfd.stop(libc::SIGKILL, PATIENCE));
    drop(upfd);
    let more = "  - id: fresh\n    domain_names: [fresh.example]\n";
    let upfd = setup
        .builder("10.70.0.0/16")
        .extra_yaml(local)
        .extra_yaml(more)
        .start();
    assert!(
        upfd.wait_for_log("state: restored 2 session(s) of 1 association(s)", PATIENCE),
        "{}",
        upfd.log()
    );
    let mut after = before.clone();
    after.insert(1, ("fresh".to_string(), 4, "configuration".to_string()));
    assert_eq!(applications(&setup), after, "the same indices");
    // The sessions' application PDRs are there, naming the application.
    let up = smf.smf.sessions()[0].up_fseid.expect("established").seid;
    let body = http_get(&setup.api, &format!("/api/v1/sessions/{up:#x}")).expect("the session");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let named: Vec<&str> = v["pdrs"]
        .as_array()
        .expect("its PDRs")
        .iter()
        .filter_map(|p| p["application_id"].as_str())
        .collect();
    assert_eq!(named, ["video", "video"], "{body}");
    assert!(setup.consistent().contains("\"consistent\":true"));
    // The sessions answer to modifications of their application PDRs' FARs, and a new
    // PDR naming an application is accepted without PFD Management again.
    let r = smf.rt.block_on(smf.smf.modify(Pace::default()));
    assert_eq!((r.accepted, r.requests), (2, 2), "{r:?}");
    let s = &smf.smf.sessions()[0];
    let mut req = smf.smf.modification_request(s);
    req.update_fars.clear();
    let mut pdr = smf.smf.establishment_request(s).create_pdrs[3].clone();
    pdr.pdr_id = 20;
    pdr.precedence = Some(150);
    pdr.pdi.application_id = Some(pfcp::ie::Text::new("chat"));
    req.create_pdrs.push(pdr);
    let n4 = smf.smf.n4();
    let bytes = msg::emit(&pfcp::HeaderRepr::session(0, up, n4.next_sequence()), &req);
    let rsp = smf.rt.block_on(n4.transact(&bytes)).expect("a response");
    match Msg::parse(&rsp.bytes) {
        Ok((_, Msg::SessionModificationResponse(m))) => {
            assert!(m.cause.is_acceptance(), "{m:?}")
        }
        other => panic!("{other:?}"),
    }
    let body = http_get(&setup.api, &format!("/api/v1/sessions/{up:#x}")).unwrap();
    assert!(body.contains("\"chat\""), "{body}");
    let r = smf.rt.block_on(smf.smf.delete(Pace::default()));
    assert_eq!((r.accepted, r.requests), (2, 2), "{r:?}");
}
