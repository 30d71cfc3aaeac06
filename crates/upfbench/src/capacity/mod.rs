//! `upfbench capacity`: the operator capacity test of ../shared/design/BENCHMARKS.md
//! (results of this repository's runs: docs/benchmarks.md) on one machine, with
//! the machine's own limits measured in the same run.
//!
//! One run, in the lab (`upfbench::lab`):
//! 1. limits: the generator into a drop program on upf's interfaces (generator limit),
//!    then a bare XDP decap/encap-and-redirect forwarder in upf (I/O limit), per
//!    direction and packet size (with `--external`, GRO is turned on first for upf's
//!    n3 and n6 where no native XDP program runs, and off again at the end);
//! 2. the UPF: `upfd` started in upf (or any UPF already running there, `--external`),
//!    sessions established by the SMF emulator from smf (rate and latency recorded);
//!    then, right before the trials, upf's NAPI threads pinned (retried while a UPF
//!    attaches its programs; a note, never a failure, when it cannot be done);
//! 3. throughput at saturation per direction and packet size, at 1 session and at all
//!    (the full profile adds 10,000: the subscribers one core carries; `--session-counts`),
//!    each UPF trial bracketed by the limits of the same size, direction and sessions,
//!    each swapped in for its trial and the UPF's programs put back after it:
//!    I/O limit, UPF, I/O limit at 1 session; I/O limit, one-miss limit, UPF, one-miss
//!    limit, I/O limit at all sessions (one-miss: the bare forwarder plus one read of
//!    the session's 64-octet record from a table of all sessions, keyed by TEID / UE
//!    address). A pair of readings more than 10 % apart: the whole bracket once more,
//!    then flagged;
//! 4. the carrier capacity test: 100, 500, 1000, 2000 subscribers, then doubling until
//!    loss passes 0.01 %, both directions at once at the per-subscriber rates and mixes
//!    of the Free5GC cloud evaluation;
//! 5. the ZTE and vEPC models (full profile): saturation with their size mixes;
//!    then the application mix (`models::apps`): a second SMF provisions PFDs (PFD
//!    Management) for two named applications, web (TCP from port 80) and voice (UDP to
//!    the UE's ports 40000-40999), and establishes sessions with an uplink and a
//!    downlink PDR and a URR per application; per direction, ZTE's sizes with its 85 %
//!    HTTP as TCP segments saturate as many sessions without application PDRs, then
//!    those, then the first again (the ratio: with / the mean without); the sessions
//!    are deleted and each application's usage (summed from the deletions' reports)
//!    compared with its share of the traffic;
//! 6. the no-drop rate (binary search on the offered rate; zero loss) per direction, each
//!    followed by the same search with the bare forwarder in the UPF's place (the rig's
//!    own no-drop rate, and from it the subscribers the rig allows in step 4's model);
//! 7. latency p50/p99/p99.9 at 10, 50 and 90 % of the no-drop rate; then sessions
//!    established while both directions run at 50 % of it (rate, latency, loss);
//! 8. a ping and iperf3 TCP through the UPF from a UE of the gNB/UE emulator;
//! 9. the bare forwarder's latency at step 7's rates, then the limits of step 1 again;
//! 10. per-core scaling of upfd's XDP programs (not with `--external`): BPF_PROG_RUN
//!     on one CPU, then both at once, disjoint sessions and one hot session
//!     (`upf_bpf::scaling`).
//!
//! It prints the tables with every figure as a ratio of the run's limits, and writes
//! report.json, PNG charts and report.html (`upfbench::report`); the ping and iperf3
//! results are sections of the same report.

pub mod models;
pub mod rig;
pub mod upf;

use std::io::IsTerminal;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::gnb::{Gnb, GnbConfig, UeSession};
use crate::lab::{addr, Lab, Ns};
use crate::report::{
    self, Bracket, CapacityRow, CapacityTable, Direction, LatencyPoint, Limit, LossPoint, Machine,
    NoDropRate, Report, SessionRatePoint, ThroughputPoint, TrafficModel, UpfUnderTest,
};
use models::Mix;
use rig::{GenSession, LimitKind, Rig, Trial};

/// How long and how far a run goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// Seconds: for tests.
    Smoke,
    /// About a minute: the demo.
    Quick,
    /// Every step, every packet size and model, up to 1M sessions: tens of minutes (the
    /// runs of docs/benchmarks.md).
    Full,
}

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[arg(long, value_enum, default_value = "quick")]
    pub profile: Profile,
    /// Lab namespace prefix (namespaces PREFIXgnb, PREFIXupf, PREFIXdn, PREFIXsmf).
    #[arg(long, default_value = "")]
    pub prefix: String,
    /// Leave the lab (and nothing else) in place at the end.
    #[arg(long)]
    pub keep_lab: bool,
    /// The upfd binary to test (default: the one next to this upfbench).
    #[arg(long)]
    pub upfd: Option<PathBuf>,
    /// Test a UPF already running in the upf namespace of a lab made with `upfbench lab
    /// up` instead of starting upfd: N4 at --upf-n4, N3 192.168.3.2 on n3, N6 on n6
    /// (docs/benchmarks.md). The lab is used as it is and left in place.
    #[arg(long)]
    pub external: bool,
    /// With --external: the UPF's process ID, for its memory per session (default: the
    /// one process named --upf-process, if there is exactly one).
    #[arg(long)]
    pub upf_pid: Option<u32>,
    /// With --external: the UPF's process name (as in /proc/PID/comm), e.g. eupf.
    #[arg(long)]
    pub upf_process: Option<String>,
    /// Name of the UPF under test in the report.
    #[arg(long)]
    pub upf_name: Option<String>,
    /// The UPF's PFCP address.
    #[arg(long, default_value = "192.168.4.2:8805")]
    pub upf_n4: SocketAddr,
    /// Pick uplink TEIDs ourselves (for UPFs without FTUP).
    #[arg(long)]
    pub explicit_teid: bool,
    /// No PDU Session Container in uplink G-PDUs and no QFI in the rules (4G style).
    #[arg(long)]
    pub no_psc: bool,
    /// The SDF filter (Flow Description) in both PDRs of every session: every packet is
    /// matched against it, as with the operator rules the targets name.
    #[arg(long, default_value = crate::smf::DEFAULT_SDF)]
    pub sdf: String,
    /// PDRs without an SDF filter (F-TEID or UE address alone).
    #[arg(long)]
    pub no_sdf: bool,
    /// Sessions to establish (default by profile: smoke 200, quick 4000, full 1000000).
    #[arg(long)]
    pub sessions: Option<u64>,
    /// Seconds per trial (default by profile: smoke 0.3, quick 1.5, full 3).
    #[arg(long)]
    pub trial_secs: Option<f64>,
    /// Send to sessions in the order they were established. By default the generator's
    /// session table is shuffled (fixed seed): consecutive packets then belong to
    /// sessions whose state lies anywhere in the UPF's tables, as in a real traffic mix,
    /// rather than walking them in allocation order, which flatters caches and TLBs.
    #[arg(long)]
    pub in_order: bool,
    /// CPU of the generators and sinks.
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,
    /// CPU of the forwarding (upf's NAPI threads).
    #[arg(long, default_value_t = 1)]
    pub fwd_cpu: usize,
    /// Where the report goes (default: upfbench-report/<date-time>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip the ping and iperf3 check.
    #[arg(long)]
    pub no_check: bool,
    /// Session counts for saturation throughput, e.g. 1,4000,60000 (default: 1 and all;
    /// the full profile adds 10000, the subscribers one core carries at the carrier
    /// model's rates).
    #[arg(long, value_delimiter = ',')]
    pub session_counts: Vec<u64>,
    /// Sessions to establish while traffic runs at half the no-drop rate, both
    /// directions (default by profile: smoke 200, quick 2000, full 100000; 0: none).
    #[arg(long)]
    pub establish_under_traffic: Option<u64>,
    /// Skip the per-core scaling of upfd's XDP programs (BPF_PROG_RUN on each CPU).
    #[arg(long)]
    pub no_scaling: bool,
    /// Sessions with application PDRs for the application mix, at most --sessions
    /// (default by profile: smoke 200, quick 4000, full 100000; 0: no application mix).
    #[arg(long)]
    pub app_mix_sessions: Option<u64>,
    /// The APN/DNN IE in every Session Establishment Request, label-encoded as
    /// Open5GS's SMF sends it (gtp-guard needs it to name one of its access points).
    #[arg(long, default_value = "internet", conflicts_with = "no_apn_dnn")]
    pub apn_dnn: String,
    /// No APN/DNN IE.
    #[arg(long)]
    pub no_apn_dnn: bool,
    /// The first session's IMSI in the User ID IE (session i gets it plus i; the
    /// application mix's SMF starts 10,000,000 higher), with an IMEISV and an MSISDN, as
    /// Open5GS's SMF sends them.
    #[arg(long, default_value = "001010000000001", value_parser = crate::smf::cli::imsi)]
    pub imsi: String,
    /// No User ID IE.
    #[arg(long)]
    pub no_user_id: bool,
}

/// The application mix's SMF numbers its subscribers from this far above the first's.
const APP_MIX_IMSI_OFFSET: u64 = 10_000_000;

/// The SMF emulator's configuration for the run: the lab's addresses and every rule
/// (`upf::LabSmf::config`), the identities of `args`, UE addresses from `pool`, the
/// IMSIs `imsi_offset` above `--imsi`.
fn smf_config(
    args: &Args,
    explicit_teid: bool,
    pool: crate::smf::Ipv4Pool,
    imsi_offset: u64,
) -> crate::smf::SmfConfig {
    let sdf = (!args.no_sdf).then(|| args.sdf.clone());
    let mut cfg = upf::LabSmf::config(args.upf_n4, explicit_teid, !args.no_psc, sdf, pool);
    cfg.apn_dnn = crate::smf::cli::apn_dnn(&cfg.dnn, Some(&args.apn_dnn), args.no_apn_dnn);
    let imsi = crate::smf::add_to_digits(&args.imsi, imsi_offset);
    cfg.user_id = crate::smf::cli::user_ids(&imsi, args.no_user_id);
    cfg
}

/// Extra halvings of the no-drop search when none of its trials was loss-free.
const NO_DROP_EXTRA: u32 = 8;
/// The lowest rate the no-drop search offers, packets per second.
const NO_DROP_FLOOR_PPS: f64 = 1000.0;

/// What the profile sets, after the command line's overrides.
#[derive(Debug, Clone)]
pub struct Plan {
    pub sessions: u64,
    pub trial_secs: f64,
    /// IP sizes for limits and saturation throughput.
    pub sizes: Vec<u16>,
    /// Session counts for saturation throughput (1 and all).
    pub session_counts: Vec<u64>,
    pub carrier_max_users: u64,
    pub models: bool,
    pub no_drop_iterations: u32,
    pub latency_percents: Vec<u8>,
    /// Sessions established during traffic at half the no-drop rate.
    pub under_traffic: u64,
    /// Sessions with application PDRs for the application mix (0: none).
    pub app_mix_sessions: u64,
}

impl Plan {
    pub fn of(a: &Args) -> Plan {
        let (sessions, secs, sizes, iters, models): (u64, f64, Vec<u16>, u32, bool) =
            match a.profile {
                Profile::Smoke => (200, 0.3, vec![650], 3, false),
                Profile::Quick => (4000, 1.5, vec![64, 650], 5, false),
                Profile::Full => (
                    1_000_000,
                    3.0,
                    vec![64, 128, 256, 512, 650, 1024, 1400],
                    8,
                    true,
                ),
            };
        let sessions = a.sessions.unwrap_or(sessions).max(1);
        Plan {
            sessions,
            trial_secs: a.trial_secs.unwrap_or(secs).max(0.05),
            sizes,
            session_counts: session_counts(a, sessions),
            carrier_max_users: match a.profile {
                Profile::Smoke => sessions.min(200),
                _ => sessions,
            },
            models,
            no_drop_iterations: iters,
            latency_percents: match a.profile {
                Profile::Smoke => vec![50],
                _ => vec![10, 50, 90],
            },
            under_traffic: a.establish_under_traffic.unwrap_or(match a.profile {
                Profile::Smoke => 200,
                Profile::Quick => 2000,
                Profile::Full => 100_000,
            }),
            app_mix_sessions: a
                .app_mix_sessions
                .unwrap_or(match a.profile {
                    Profile::Smoke => 200,
                    Profile::Quick => 4000,
                    Profile::Full => 100_000,
                })
                .min(sessions),
        }
    }
}

/// The session counts of the saturation trials: as given (at most all, each once), or 1,
/// [CARRIER_CORE_USERS for the full profile,] all.
fn session_counts(a: &Args, sessions: u64) -> Vec<u64> {
    let mut v: Vec<u64> = if a.session_counts.is_empty() {
        let mut v = vec![1, sessions];
        if a.profile == Profile::Full {
            v.push(CARRIER_CORE_USERS);
        }
        v
    } else {
        a.session_counts.clone()
    };
    v.retain(|&n| n >= 1 && n <= sessions);
    v.sort_unstable();
    v.dedup();
    v
}

/// About the subscribers one core carries at the carrier model's per-subscriber rates
/// (issue 17: traffic over ~10k of 1M installed sessions is the carrier-realistic load).
const CARRIER_CORE_USERS: u64 = 10_000;

/// A progress bar on stderr: one line per step (redrawn in place on a terminal).
struct Progress {
    total: usize,
    done: usize,
    start: Instant,
    tty: bool,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress {
            total,
            done: 0,
            start: Instant::now(),
            tty: std::io::stderr().is_terminal(),
        }
    }

    fn step(&mut self, what: &str) {
        self.done = (self.done + 1).min(self.total);
        let width = 30;
        let filled = self.done * width / self.total.max(1);
        let line = format!(
            "[{}{}] {:>3}/{} {:>5.0}s  {what}",
            "#".repeat(filled),
            ".".repeat(width - filled),
            self.done,
            self.total,
            self.start.elapsed().as_secs_f64()
        );
        if self.tty {
            eprint!("\r\x1b[2K{line}");
        } else {
            eprintln!("{line}");
        }
    }

    fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("capacity builds network namespaces and loads XDP programs: run it as root");
    }
    let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
    if args.gen_cpu >= ncpu || args.fwd_cpu >= ncpu {
        bail!(
            "--gen-cpu {} / --fwd-cpu {}: this machine has {ncpu} CPUs",
            args.gen_cpu,
            args.fwd_cpu
        );
    }
    let plan = Plan::of(&args);
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("upfbench-report").join(chrono_like_now()));
    let upfd_bin = upf::upfd_binary(args.upfd.as_deref())?;
    if !args.external && !upfd_bin.is_file() {
        bail!(
            "{}: no upfd binary (build it with `cargo build --release`, or give --upfd PATH, or --external)",
            upfd_bin.display()
        );
    }
    let lab = lab_for(&args)?;
    let result = bench(&args, &plan, &lab, &upfd_bin, &out);
    if args.external {
        eprintln!(
            "lab left as it was, with the UPF in it: `upfbench lab down --prefix '{}'` removes it",
            args.prefix
        );
    } else if !args.keep_lab {
        lab.down().context("removing the lab")?;
    } else {
        eprintln!(
            "lab kept: `upfbench lab down --prefix '{}'` removes it",
            args.prefix
        );
    }
    let report = result?;
    print!("{}", report::render_text(&report));
    let w = report
        .write_all(&out)
        .with_context(|| format!("writing the report into {}", out.display()))?;
    for x in &w.warnings {
        eprintln!("warning: {x}");
    }
    println!(
        "\nreport: {} (and report.json, the PNG charts beside it)",
        w.html.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The lab to measure in: a new one (removed at the end unless --keep-lab), or with
/// --external the one the UPF under test already runs in, as it is (building a new one
/// would remove its namespaces, and the UPF with them).
pub fn lab_for(args: &Args) -> anyhow::Result<Lab> {
    if !args.external {
        let lab = Lab::up(&args.prefix).context("building the lab")?;
        return Ok(if args.keep_lab {
            lab
        } else {
            lab.down_on_drop()
        });
    }
    let present = Lab::present(&args.prefix);
    if present.len() != crate::lab::Ns::ALL.len() {
        bail!(
            "--external measures the UPF running in the lab, but the lab of prefix {:?} is not there (namespaces found: {}): build it with `upfbench lab up{}`, start the UPF with `ip netns exec {}upf ...`, then run this again (docs/benchmarks.md, \"Measuring another UPF\")",
            args.prefix,
            if present.is_empty() { "none".to_string() } else { present.join(", ") },
            if args.prefix.is_empty() { String::new() } else { format!(" --prefix '{}'", args.prefix) },
            args.prefix
        );
    }
    Ok(Lab::attach(&args.prefix))
}

/// "YYYYmmdd-HHMMSS" in UTC, for the report directory.
fn chrono_like_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (d, s) = (secs / 86400, secs % 86400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = d as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}-{:02}{:02}{:02}",
        s / 3600,
        s % 3600 / 60,
        s % 60
    )
}

/// The whole measurement; the report.
pub fn bench(
    args: &Args,
    plan: &Plan,
    lab: &Lab,
    upfd_bin: &std::path::Path,
    out: &std::path::Path,
) -> anyhow::Result<Report> {
    let psc = !args.no_psc;
    let sdf = (!args.no_sdf).then(|| args.sdf.clone());
    let secs = plan.trial_secs;
    let bracketed: usize = plan
        .session_counts
        .iter()
        .map(|&n| if n == plan.sessions { 5 } else { 3 })
        .sum();
    let steps = 2 * plan.sizes.len() * 2 * 2 // limits, before and after
        + 2 // UPF up, sessions
        + plan.sizes.len() * 2 * bracketed
        + models::carrier::steps(plan.carrier_max_users).len()
        + if plan.models { 2 * 2 * 2 } else { 0 }
        + if plan.app_mix_sessions > 0 { 2 + 2 * 3 } else { 0 }
        + 2 * 2 * (plan.no_drop_iterations as usize + 1) // the UPF's and the rig's
        + 2 * plan.latency_percents.len() * 2
        + usize::from(plan.under_traffic > 0)
        + usize::from(!args.external && !args.no_scaling)
        + usize::from(!args.no_check);
    let mut progress = Progress::new(steps);
    let mut r = Report::new(format!(
        "{} capacity, veth lab ({:?} profile)",
        args.upf_name
            .as_deref()
            .unwrap_or(if args.external { "UPF" } else { "upfd" }),
        args.profile
    ));
    r.machine = Some(Machine::probe(
        &[args.gen_cpu],
        &[args.fwd_cpu],
        Duration::from_millis(300),
    ));
    let max_sessions = u32::try_from(plan.sessions.max(1000)).unwrap_or(u32::MAX);
    // Before our programs take upf's interfaces: whether the UPF runs native XDP there.
    let gro = args.external.then(|| upf::GroGuard::for_external(lab));
    if let (Some(m), Some(g)) = (&mut r.machine, &gro) {
        m.notes.extend(g.notes.iter().cloned());
    }
    let mut rig = Rig::new(lab, args.gen_cpu, args.fwd_cpu, max_sessions, psc)
        .context("attaching the sinks")?;

    // 1. Limits, with sessions that only the bare forwarder needs to make sense of.
    let synthetic: Vec<GenSession> = (0..1000u32)
        .map(|i| GenSession {
            teid: 0x1000 + i,
            ue: Ipv4Addr::from(u32::from(addr::UE_POOL) + 1 + i),
        })
        .collect();
    rig.set_sessions(&synthetic)?;
    r.limits = limit_pass(&mut rig, &plan.sizes, psc, secs, &mut progress, "")?;

    // 2. The UPF and its sessions.
    progress.step("starting the UPF");
    let upfd = if args.external {
        None
    } else {
        Some(upf::Upfd::start(
            lab,
            upfd_bin,
            out,
            // upfd sizes its rule tables by sessions of two PDRs, one URR: the application
            // mix's sessions have six PDRs and three URRs, so each takes three.
            plan.sessions.max(1000) + plan.under_traffic + 3 * plan.app_mix_sessions + 1000,
        )?)
    };
    progress.step(&format!("establishing {} sessions", plan.sessions));
    // dn routes the lab's UE pool (10.45.0.0/16) to upf; this one too, so that the
    // data network can answer UEs (ping, iperf3).
    let pool = upf::route_ue_pool(lab)?;
    let mut smf = upf::LabSmf::associate_with(lab, smf_config(args, args.explicit_teid, pool, 0))?;
    let est = smf.establish(plan.sessions as usize);
    if est.accepted as u64 != plan.sessions {
        bail!(
            "the UPF accepted {} of {} sessions: {est:?}",
            est.accepted,
            plan.sessions
        );
    }
    let pid = match &upfd {
        Some(u) => Some(u.pid()),
        None => args.upf_pid.or_else(|| {
            let name = args.upf_process.as_deref()?;
            crate::sessions::find_process(name)
        }),
    };
    let mem = pid.and_then(crate::sessions::process_memory);
    r.sessions.push(SessionRatePoint {
        resident: plan.sessions,
        established_per_s: est.per_second,
        p50_ms: est.latency.p50_ms,
        p99_ms: est.latency.p99_ms,
        max_ms: est.latency.max_ms,
        bytes_per_session: mem.map(|(rss, maps)| (rss + maps) / plan.sessions),
    });
    let mut sessions: Vec<GenSession> = smf
        .smf
        .sessions()
        .iter()
        .filter_map(|s| {
            Some(GenSession {
                teid: s.n3_fteid.and_then(|f| f.teid)?,
                ue: s.ue_ip,
            })
        })
        .collect();
    if !args.in_order {
        use rand::seq::SliceRandom;
        sessions.shuffle(&mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1));
    }
    if sessions.len() as u64 != plan.sessions {
        bail!(
            "{} sessions have an uplink F-TEID, of {}",
            sessions.len(),
            plan.sessions
        );
    }
    r.upf = Some(UpfUnderTest {
        name: args.upf_name.clone().unwrap_or_else(|| {
            if args.external {
                "external UPF".into()
            } else {
                format!("upfd {}", env!("CARGO_PKG_VERSION"))
            }
        }),
        n4: args.upf_n4.to_string(),
        n3: addr::UPF_N3.to_string(),
        n6: addr::UPF_N6.to_string(),
        options: [
            (
                "uplink F-TEID",
                if smf.smf.uses_choose() {
                    "CHOOSE"
                } else {
                    "explicit"
                }
                .to_string(),
            ),
            (
                "PDU Session Container",
                if psc { "on" } else { "off" }.to_string(),
            ),
            (
                "rules per session",
                format!(
                    "2 PDRs{}, 2 FARs, 1 QER (MBR), 1 URR (volume threshold)",
                    sdf.as_ref()
                        .map(|f| format!(" with an SDF filter ({f})"))
                        .unwrap_or_default()
                ),
            ),
            (
                "session order",
                if args.in_order {
                    "as established (the generator walks the UPF's tables in order)"
                } else {
                    "shuffled (consecutive packets hit unrelated table slots)"
                }
                .to_string(),
            ),
            ("generator CPU", args.gen_cpu.to_string()),
            (
                "forwarding CPU",
                format!("{} (upf n3/n6 NAPI threads, SCHED_FIFO)", args.fwd_cpu),
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    });

    // 3. Saturation throughput per size, at 1 session and at all, each trial bracketed
    // by its limits; once the sessions' set-up has stopped keeping the CPUs busy, with
    // the UPF's programs (attached by now, or a note says not) on the forwarding CPU.
    let waited = rig.wait_quiet(Duration::from_secs(20));
    if waited > Duration::from_secs(1) {
        eprintln!("waited {waited:.1?} for the CPUs to quiet down after the set-up");
    }
    rig.pin_for_trials(Duration::from_secs(if args.external { 5 } else { 1 }));
    for &n in &plan.session_counts {
        rig.set_sessions(&sessions[..n as usize])?;
        for &size in &plan.sizes {
            let mix = Mix::single(size);
            for d in Direction::BOTH {
                let one_miss = n == plan.sessions;
                let p = bracketed_trial(&mut rig, d, &mix, n, one_miss, secs, &mut progress)?;
                if let (Some(b), Some(l)) = (
                    p.one_miss_bracket,
                    r.limits
                        .iter_mut()
                        .find(|l| l.direction == d && l.packet_bytes == u32::from(size)),
                ) {
                    l.one_miss_mpps = Some(b.before_mpps.max(b.after_mpps));
                    l.one_miss_sessions = Some(n);
                }
                r.throughput.push(p);
            }
        }
    }

    // 4. The carrier capacity test.
    let mix_ul = models::carrier::mix(Direction::Uplink);
    let mix_dl = models::carrier::mix(Direction::Downlink);
    let mut rows = Vec::new();
    for users in models::carrier::steps(plan.carrier_max_users) {
        progress.step(&format!("carrier test, {users} subscribers"));
        rig.set_sessions(&sessions[..users as usize])?;
        let t = rig.trial(
            &[
                (
                    Direction::Uplink,
                    &mix_ul,
                    Some(users * models::carrier::pps(Direction::Uplink)),
                ),
                (
                    Direction::Downlink,
                    &mix_dl,
                    Some(users * models::carrier::pps(Direction::Downlink)),
                ),
            ],
            secs,
        )?;
        let row = CapacityRow {
            users,
            ul_gbps: t.received_pps(Direction::Uplink) * mix_ul.average() * 8.0 / 1e9,
            ul_loss_pct: t.loss_pct(Direction::Uplink),
            dl_gbps: t.received_pps(Direction::Downlink) * mix_dl.average() * 8.0 / 1e9,
            dl_loss_pct: t.loss_pct(Direction::Downlink),
            ul_mpps: t.received_pps(Direction::Uplink) / 1e6,
            dl_mpps: t.received_pps(Direction::Downlink) / 1e6,
        };
        let over = row.ul_loss_pct > 0.01 || row.dl_loss_pct > 0.01;
        rows.push(row);
        if over {
            break;
        }
    }
    r.capacity = Some(CapacityTable {
        model: TrafficModel::Carrier,
        rows,
        rig_users: None,
    });
    rig.set_sessions(&sessions)?;

    // 5. The ZTE and vEPC models at all sessions.
    if plan.models {
        for mix in [models::zte(), models::vepc()] {
            for d in Direction::BOTH {
                progress.step(&format!("{} {d}", mix.name));
                let t = rig.trial(&[(d, &mix, None)], secs)?;
                r.throughput.push(ThroughputPoint::measured(
                    d,
                    mix.label_bytes(),
                    plan.sessions,
                    t.sent_pps(d) / 1e6,
                    t.received_pps(d) / 1e6,
                ));
            }
            progress.step(&format!("{} (done)", mix.name));
            progress.step("");
        }
    }

    // 5b. The application mix: sessions with application PDRs against as many without.
    if plan.app_mix_sessions > 0 {
        match app_mix(args, plan, lab, &mut rig, &sessions, &mut progress) {
            Ok(v) => r.app_mix = v,
            Err(e) => {
                let n = format!("application mix not measured: {e:#}");
                eprintln!("note: {n}");
                if let Some(m) = &mut r.machine {
                    m.notes.push(n);
                }
            }
        }
        rig.set_sessions(&sessions)?;
    }

    // 6. No-drop rate at 650 B (the vEPC packet), all sessions; then the rig's own, the
    // same search with the bare forwarder in the UPF's place.
    let mix = models::vepc();
    let mut no_drop = Vec::new();
    for d in Direction::BOTH {
        let (mpps, curve) = no_drop_search(&mut rig, d, &mix, plan, &mut progress, "")?;
        let bare = rig
            .bare_forwarder(psc)
            .context("attaching the bare forwarder")?;
        let rig_mpps = no_drop_search(&mut rig, d, &mix, plan, &mut progress, " (rig)");
        drop(bare);
        no_drop.push(NoDropRate {
            direction: d,
            packet_bytes: mix.label_bytes(),
            sessions: plan.sessions,
            mpps,
            gbps: report::gbps(mpps, mix.label_bytes()),
            curve,
            rig_mpps: Some(rig_mpps?.0),
        });
    }
    if let Some(c) = &mut r.capacity {
        c.rig_users = carrier_users_allowed(&no_drop);
    }

    // 7. Latency at fractions of the no-drop rate (and, once upfd is gone, the bare
    // forwarder's at the same rates).
    let mut bare_rates = Vec::new();
    for nd in &no_drop {
        for &p in &plan.latency_percents {
            let d = nd.direction;
            let rate = (nd.mpps * 1e6 * f64::from(p) / 100.0).max(1000.0);
            progress.step(&format!("latency {d} at {p} % of the no-drop rate"));
            // No flush batching: packets leave when due, so waiting in a batch does not
            // show up as latency.
            let t = rig.trial_with(&[(d, &mix, Some(rate as u64))], secs, None)?;
            if let Some(lat) = &t.latency[d as usize] {
                let l = percentiles(lat);
                r.latency.push(LatencyPoint {
                    direction: d,
                    packet_bytes: mix.label_bytes(),
                    percent_of_no_drop: p,
                    offered_mpps: t.sent_pps(d) / 1e6,
                    p50_us: l.p50_us,
                    p99_us: l.p99_us,
                    p999_us: l.p999_us,
                    samples: lat.samples,
                    bare: None,
                });
                bare_rates.push((r.latency.len() - 1, d, rate as u64));
            }
        }
    }
    // 7b. Establishment while both directions run at half the no-drop rate: an outage's
    // subscribers coming back while the others' traffic flows (issue 17).
    if plan.under_traffic > 0 {
        progress.step(&format!(
            "establishing {} sessions under traffic",
            plan.under_traffic
        ));
        r.establish_under_traffic = Some(establish_under_traffic(
            &mut rig, &mut smf, &no_drop, &mix, plan,
        )?);
    }
    r.no_drop = no_drop;
    r.fill_ratios();

    if let Some(m) = &mut r.machine {
        m.notes.extend(rig.notes());
    }

    // 8. What a phone's apps see: ping and iperf3 through the UPF, into the report.
    rig.close().context("detaching the sinks")?;
    let mut check_lines = Vec::new();
    if !args.no_check {
        progress.step("ping and iperf3 through the UPF");
        let ue = smf.smf.sessions().iter().find_map(UeSession::from_session);
        let dn = addr::DN_N6.to_string();
        match ue {
            Some(u) => {
                let from = u.ue_ip.map_or_else(|| "-".to_string(), |ip| ip.to_string());
                match check_with_tools(lab, u) {
                    Ok((ping, iperf3)) => {
                        r.ping = Some(ping);
                        r.iperf3 = iperf3;
                    }
                    Err(e) => {
                        r.ping = Some(report::PingResult::failed(
                            &from,
                            &dn,
                            format!("ping/iperf3 check failed: {e:#}"),
                        ))
                    }
                }
            }
            None => {
                r.ping = Some(report::PingResult::failed(
                    "-",
                    &dn,
                    "no session with an IPv4 UE and an uplink F-TEID to ping from",
                ))
            }
        }
    }
    if let Some(u) = &upfd {
        if let Ok(m) = u.metrics() {
            let d = upf::drops(&m);
            if !d.is_empty() {
                let s: Vec<String> = d.iter().map(|(k, v)| format!("{k} {v}")).collect();
                check_lines.push(format!(
                    "upfd drops by reason over the run: {}",
                    s.join(", ")
                ));
            }
        }
    }
    drop(smf);
    drop(upfd);

    // 9. The bare forwarder's latency at the rates of step 7 (upfd's programs are off
    // upf's interfaces now; an external UPF's are put back after each, as in step 1),
    // then the limits again: on a machine whose speed drifts, a pass before and one after
    // the UPF's trials bracket them.
    {
        let mut rig = Rig::new(lab, args.gen_cpu, args.fwd_cpu, max_sessions, psc)
            .context("attaching the sinks")?;
        rig.set_sessions(&synthetic)?;
        if !bare_rates.is_empty() {
            let bare = rig
                .bare_forwarder(psc)
                .context("attaching the bare forwarder")?;
            for (i, d, rate) in bare_rates {
                progress.step(&format!(
                    "bare forwarder latency {d} at {:.3} Mpps",
                    rate as f64 / 1e6
                ));
                let t = rig.trial_with(&[(d, &mix, Some(rate))], secs, None)?;
                if let Some(l) = &t.latency[d as usize] {
                    r.latency[i].bare = Some(percentiles(l));
                }
            }
            drop(bare);
        }
        let again = limit_pass(&mut rig, &plan.sizes, psc, secs, &mut progress, " (again)")?;
        r.add_limit_pass(&again);
        r.fill_ratios();
        rig.close().context("detaching the sinks")?;
    }
    // 10. Per-core scaling of upfd's programs, once nothing else runs: BPF_PROG_RUN on
    // one CPU, then on both at once (disjoint sessions, one hot session).
    if !args.external && !args.no_scaling {
        progress.step("per-core scaling (BPF_PROG_RUN on one CPU, then both)");
        match scaling(args, plan) {
            Ok(v) => r.scaling = v,
            Err(e) => check_lines.push(format!("per-core scaling not measured: {e}")),
        }
    }
    // GRO back as it was (also on an early return, by drop).
    drop(gro);
    progress.finish();
    for l in check_lines {
        eprintln!("{l}");
    }
    Ok(r)
}

/// Establish `plan.under_traffic` sessions while both directions run at half their
/// no-drop rate: the traffic runs in trials of a second from before the first request
/// (0.2 s) until the last answer (at most a minute), and its loss is summed over them.
fn establish_under_traffic(
    rig: &mut Rig,
    smf: &mut upf::LabSmf,
    no_drop: &[NoDropRate],
    mix: &Mix,
    plan: &Plan,
) -> anyhow::Result<report::EstablishUnderTraffic> {
    const PERCENT: u8 = 50;
    const MAX: Duration = Duration::from_secs(60);
    let rate = |d: Direction| {
        let mpps = no_drop
            .iter()
            .find(|n| n.direction == d)
            .map_or(0.0, |n| n.mpps);
        (mpps * 1e6 * f64::from(PERCENT) / 100.0).max(1000.0) as u64
    };
    let load: Vec<(Direction, &Mix, Option<u64>)> = Direction::BOTH
        .iter()
        .map(|&d| (d, mix, Some(rate(d))))
        .collect();
    let n = plan.under_traffic;
    let resident = smf.smf.sessions().len() as u64;
    let start = std::time::Instant::now();
    let (sum, est) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            let t0 = std::time::Instant::now();
            let e = smf.establish(n as usize);
            (e, t0.elapsed())
        });
        let mut sum = Trial::default();
        let traffic = (|| loop {
            let t = rig.trial(&load, 1.0)?;
            for i in 0..2 {
                sum.sent[i] += t.sent[i];
                sum.received[i] += t.received[i];
                sum.elapsed[i] += t.elapsed[i];
            }
            if h.is_finished() || start.elapsed() > MAX {
                return Ok::<_, std::io::Error>(());
            }
        })();
        (traffic.map(|()| sum), h.join())
    });
    let trial = sum?;
    let (est, took) = est.map_err(|_| anyhow::anyhow!("the establishing thread panicked"))?;
    Ok(report::EstablishUnderTraffic {
        resident,
        requested: n,
        established: est.accepted as u64,
        established_per_s: est.per_second,
        p50_ms: est.latency.p50_ms,
        p99_ms: est.latency.p99_ms,
        max_ms: est.latency.max_ms,
        percent_of_no_drop: PERCENT,
        packet_bytes: mix.label_bytes(),
        ul_offered_mpps: trial.sent_pps(Direction::Uplink) / 1e6,
        dl_offered_mpps: trial.sent_pps(Direction::Downlink) / 1e6,
        ul_loss_pct: trial.loss_pct(Direction::Uplink),
        dl_loss_pct: trial.loss_pct(Direction::Downlink),
        traffic_secs: start.elapsed().as_secs_f64(),
        establish_secs: took.as_secs_f64(),
    })
}

/// Step 5b: the application mix (`models::apps`) per direction, sessions with
/// application PDRs from a second SMF against as many of `plain` without; the sessions
/// deleted after, their usage per application in the rows.
fn app_mix(
    args: &Args,
    plan: &Plan,
    lab: &Lab,
    rig: &mut Rig,
    plain: &[GenSession],
    progress: &mut Progress,
) -> anyhow::Result<Vec<report::AppMixPoint>> {
    use models::apps;
    if args.explicit_teid {
        bail!("with --explicit-teid a second SMF would pick the first one's TEIDs");
    }
    let n = plan.app_mix_sessions.min(plain.len() as u64) as usize;
    progress.step(&format!(
        "application mix: PFDs and {n} sessions with application PDRs"
    ));
    let _addr = upf::AppSmfAddress::add(lab)?;
    let mut cfg = smf_config(args, false, upf::app_ue_pool(), APP_MIX_IMSI_OFFSET);
    cfg.bind = std::net::SocketAddr::new(upf::APP_SMF_N4.into(), 0);
    cfg.applications = apps::rules();
    let mut smf = upf::LabSmf::associate_with(lab, cfg).context("the second SMF")?;
    let result = (|| {
        smf.pfd_management(&apps::pfds())?;
        let est = smf.establish(n);
        if est.accepted != n {
            bail!(
                "the UPF accepted {} of {n} sessions with application PDRs: {est:?}",
                est.accepted
            );
        }
        let mut with: Vec<GenSession> = smf
            .smf
            .sessions()
            .iter()
            .filter_map(|s| {
                Some(GenSession {
                    teid: s.n3_fteid.and_then(|f| f.teid)?,
                    ue: s.ue_ip,
                })
            })
            .collect();
        if !args.in_order {
            use rand::seq::SliceRandom;
            with.shuffle(&mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1));
        }
        if with.len() != n {
            bail!("{} of {n} sessions have an uplink F-TEID", with.len());
        }
        let mix = apps::mix();
        rig.set_tcp_sizes(&apps::TCP_SIZES);
        let trials = (|| {
            let mut out = Vec::new();
            for d in Direction::BOTH {
                let mut one = |rig: &mut Rig, s: &[GenSession], what: &str| {
                    progress.step(&format!("application mix {d}, {n} sessions {what}"));
                    rig.set_sessions(s)?;
                    rig.trial(&[(d, &mix, None)], plan.trial_secs)
                };
                let b = one(rig, &plain[..n], "without application PDRs")?;
                let w = one(rig, &with, "with application PDRs")?;
                let a = one(rig, &plain[..n], "without application PDRs (again)")?;
                out.push((d, b, w, a));
            }
            Ok::<_, std::io::Error>(out)
        })();
        rig.set_tcp_sizes(&[]);
        let trials = trials?;
        progress.step(&format!("application mix: deleting the {n} sessions"));
        // Reports sent while the traffic ran (volume thresholds), then the deletions'.
        std::thread::sleep(Duration::from_millis(300));
        smf.smf.absorb_session_reports();
        let del = smf.delete_all();
        smf.smf.absorb_session_reports();
        if del.accepted != n {
            bail!("the UPF deleted {} of {n} sessions: {del:?}", del.accepted);
        }
        let usage = smf.smf.usage().clone();
        Ok(app_mix_rows(n as u64, &mix, &trials, &usage))
    })();
    smf.release();
    drop(smf);
    result
}

/// The application mix's report rows from its trials (direction, without before, with,
/// without after) and the usage per URR.
fn app_mix_rows(
    sessions: u64,
    mix: &Mix,
    trials: &[(Direction, Trial, Trial, Trial)],
    usage: &crate::smf::UsageByUrr,
) -> Vec<report::AppMixPoint> {
    use crate::smf::AppIds;
    use models::apps;
    let tcp = apps::tcp_share_pct();
    let described = [
        (
            apps::WEB,
            apps::WEB_FLOW,
            "TCP port 80 (HTTP-like), 64 B and 1316 B",
            tcp,
        ),
        (
            apps::VOICE,
            apps::VOICE_FLOW,
            "UDP to UE ports 40000-40999, 690 B",
            100.0 - tcp,
        ),
    ];
    let of = |urr: u32, d: Direction| {
        let u = usage.get(&urr).copied().unwrap_or_default();
        match d {
            Direction::Uplink => (u.uplink_packets, u.uplink),
            Direction::Downlink => (u.downlink_packets, u.downlink),
        }
    };
    trials
        .iter()
        .map(|(d, b, w, a)| {
            let d = *d;
            let before = b.received_pps(d) / 1e6;
            let after = a.received_pps(d) / 1e6;
            let without = (before + after) / 2.0;
            let received = w.received_pps(d) / 1e6;
            let counted: Vec<(u64, u64)> = (0..described.len())
                .map(|k| of(AppIds::of(k).urr, d))
                .collect();
            let all: u64 = counted.iter().map(|c| c.0).sum();
            let apps = described
                .iter()
                .zip(&counted)
                .enumerate()
                .map(
                    |(k, ((id, flow, traffic, share), &(packets, bytes)))| report::AppUsage {
                        id: id.to_string(),
                        detected_by: format!("flow description {flow}"),
                        traffic: traffic.to_string(),
                        share_pct: *share,
                        urr_id: AppIds::of(k).urr,
                        packets,
                        bytes,
                        counted_share_pct: packets as f64 * 100.0 / all.max(1) as f64,
                    },
                )
                .collect();
            report::AppMixPoint {
                direction: d,
                sessions,
                packet_bytes: mix.label_bytes(),
                mix: mix.name.to_string(),
                offered_mpps: w.sent_pps(d) / 1e6,
                received_mpps: received,
                without_before_mpps: before,
                without_after_mpps: after,
                without_mpps: without,
                ratio: if without > 0.0 {
                    received / without
                } else {
                    0.0
                },
                flagged: before.max(after) > 1.1 * before.min(after),
                sent_packets: w.sent[d as usize],
                received_packets: w.received[d as usize],
                unmatched_packets: of(1, d).0,
                apps,
            }
        })
        .collect()
}

/// upfd's XDP programs at the run's session count on the generator's and the
/// forwarder's CPUs, one alone then both at once (`upf_bpf::scaling`), as report rows:
/// per case a one-CPU row and a two-CPU row with the median of the pairs' ratios.
fn scaling(args: &Args, plan: &Plan) -> anyhow::Result<Vec<report::ScalingCase>> {
    use upf_bpf::scaling::{measure, ScalingConfig};
    let mut cfg = ScalingConfig::new(u32::try_from(plan.sessions).unwrap_or(u32::MAX).max(2));
    cfg.cpus = [args.gen_cpu, args.fwd_cpu];
    // The measuring threads at real-time priority: at normal priority they ran 20-50 % of
    // the time on this VM, so the two CPUs' runs overlapped only partly.
    cfg.fifo = Some(50);
    match args.profile {
        Profile::Smoke => {
            cfg.pairs = 1;
            cfg.run = Duration::from_millis(200);
        }
        Profile::Quick => cfg.run = Duration::from_millis(500),
        Profile::Full => {}
    }
    let rep = measure(&cfg).map_err(|e| anyhow::anyhow!("{e}"))?;
    let mut out = Vec::new();
    for c in &rep.cases {
        let case = match c.sharing {
            upf_bpf::scaling::Sharing::Disjoint => "disjoint sessions",
            upf_bpf::scaling::Sharing::HotSession => "one hot session",
        };
        out.push(report::ScalingCase {
            case: case.to_string(),
            program: c.program.name().to_string(),
            sessions: u64::from(c.sessions),
            cpus: 1,
            mpps_per_cpu: vec![c.one_cpu_mpps],
            aggregate_mpps: c.one_cpu_mpps,
            vs_one_cpu: None,
        });
        out.push(report::ScalingCase {
            case: case.to_string(),
            program: c.program.name().to_string(),
            sessions: u64::from(c.sessions),
            cpus: 2,
            mpps_per_cpu: c.per_cpu_mpps.to_vec(),
            aggregate_mpps: c.aggregate_mpps,
            vs_one_cpu: Some(c.ratio),
        });
    }
    Ok(out)
}

/// One saturated UPF trial of `d` with `mix` at `sessions`, bracketed: I/O limit,
/// [one-miss limit,] UPF, [one-miss limit,] I/O limit; the whole bracket once more when a
/// pair of readings is more than 10 % apart, then kept and flagged.
fn bracketed_trial(
    rig: &mut Rig,
    d: Direction,
    mix: &Mix,
    sessions: u64,
    one_miss: bool,
    secs: f64,
    progress: &mut Progress,
) -> anyhow::Result<ThroughputPoint> {
    let size = mix.label_bytes();
    let mut repeated = false;
    loop {
        let tag = format!(
            "{d} {size} B, {sessions} sessions{}",
            if repeated { " (again)" } else { "" }
        );
        let limit = |rig: &mut Rig,
                     progress: &mut Progress,
                     kind: LimitKind,
                     when: &str|
         -> anyhow::Result<f64> {
            let what = match kind {
                LimitKind::Io => "I/O limit",
                LimitKind::OneMiss => "one-miss limit",
            };
            progress.step(&format!("{what} {when} saturation {tag}"));
            let pps = rig
                .limit_trial(kind, d, mix, secs)
                .with_context(|| format!("{what} {when} saturation {tag}"))?;
            Ok(pps / 1e6)
        };
        let io0 = limit(rig, progress, LimitKind::Io, "before")?;
        let m0 = if one_miss {
            Some(limit(rig, progress, LimitKind::OneMiss, "before")?)
        } else {
            None
        };
        progress.step(&format!("saturation {tag}"));
        let t = rig.trial(&[(d, mix, None)], secs)?;
        let m1 = if one_miss {
            Some(limit(rig, progress, LimitKind::OneMiss, "after")?)
        } else {
            None
        };
        let io1 = limit(rig, progress, LimitKind::Io, "after")?;
        let mut p = ThroughputPoint::measured(
            d,
            size,
            sessions,
            t.sent_pps(d) / 1e6,
            t.received_pps(d) / 1e6,
        );
        p.io_bracket = Some(Bracket::new(io0, io1, p.received_mpps, repeated));
        p.one_miss_bracket = m0
            .zip(m1)
            .map(|(a, b)| Bracket::new(a, b, p.received_mpps, repeated));
        let unsteady = [p.io_bracket, p.one_miss_bracket]
            .iter()
            .flatten()
            .any(|b| b.flagged);
        if unsteady && !repeated {
            repeated = true;
            continue;
        }
        return Ok(p);
    }
}

/// The no-drop search of step 6 in `d` with whatever forwards on upf's interfaces: the
/// no-drop rate (Mpps) and the loss curve of its trials.
fn no_drop_search(
    rig: &mut Rig,
    d: Direction,
    mix: &Mix,
    plan: &Plan,
    progress: &mut Progress,
    who: &str,
) -> anyhow::Result<(f64, Vec<LossPoint>)> {
    let secs = plan.trial_secs;
    progress.step(&format!("no-drop rate {d}{who}: saturation"));
    let sat = rig.trial(&[(d, mix, None)], secs)?;
    let (mut lo, mut hi) = (0.0f64, sat.sent_pps(d).max(1.0));
    let mut curve = vec![LossPoint::measured(
        sat.sent_pps(d) / 1e6,
        sat.received_pps(d) / 1e6,
    )];
    let mut best = None::<Trial>;
    let mut rate = sat.received_pps(d) * 0.95;
    // The bisection's trials, then, if none of them was loss-free (a noisy machine), up
    // to NO_DROP_EXTRA more halvings until one is: a lower bound is always found unless
    // even the floor rate loses packets.
    let mut i = 0;
    while i < plan.no_drop_iterations
        || (best.is_none()
            && i < plan.no_drop_iterations + NO_DROP_EXTRA
            && rate >= NO_DROP_FLOOR_PPS)
    {
        i += 1;
        progress.step(&format!(
            "no-drop rate {d}{who}: trial {i} at {:.3} Mpps",
            rate / 1e6
        ));
        let t = rig.trial(&[(d, mix, Some(rate.max(NO_DROP_FLOOR_PPS) as u64))], secs)?;
        curve.push(LossPoint::measured(
            t.sent_pps(d) / 1e6,
            t.received_pps(d) / 1e6,
        ));
        if t.received[d as usize] >= t.sent[d as usize] {
            lo = rate;
            if best.as_ref().is_none_or(|b| b.sent_pps(d) < t.sent_pps(d)) {
                best = Some(t);
            }
        } else {
            hi = rate;
        }
        rate = (lo + hi) / 2.0;
    }
    curve.sort_by(|a, b| a.offered_mpps.total_cmp(&b.offered_mpps));
    Ok((best.as_ref().map_or(0.0, |b| b.sent_pps(d) / 1e6), curve))
}

/// The carrier test's subscribers the rig allows: both directions share the forwarding
/// CPU, each subscriber taking UL pps / rig UL + DL pps / rig DL of it.
fn carrier_users_allowed(no_drop: &[NoDropRate]) -> Option<u64> {
    let share = |d: Direction| -> Option<f64> {
        let rig = no_drop.iter().find(|n| n.direction == d)?.rig_mpps? * 1e6;
        (rig > 0.0).then(|| models::carrier::pps(d) as f64 / rig)
    };
    let per_user = share(Direction::Uplink)? + share(Direction::Downlink)?;
    // The epsilon keeps an exact quotient from flooring one short.
    Some((1.0 / per_user + 1e-9).floor() as u64)
}

/// One pass over the packet sizes: the generator into a drop program (generator limit),
/// then the bare forwarder (I/O limit), both directions, on upf's interfaces.
fn limit_pass(
    rig: &mut Rig,
    sizes: &[u16],
    psc: bool,
    secs: f64,
    progress: &mut Progress,
    pass: &str,
) -> anyhow::Result<Vec<Limit>> {
    let mut limits = Vec::new();
    for &size in sizes {
        let mix = Mix::single(size);
        let mut lim = Direction::BOTH.map(|direction| Limit {
            direction,
            packet_bytes: u32::from(size),
            ..Limit::default()
        });
        for (i, d) in Direction::BOTH.into_iter().enumerate() {
            progress.step(&format!("generator limit {d} {size} B{pass}"));
            lim[i].generator_mpps = Some(rig.generator_limit(d, &mix, secs)? / 1e6);
        }
        let bare = rig
            .bare_forwarder(psc)
            .context("attaching the bare forwarder")?;
        for (i, d) in Direction::BOTH.into_iter().enumerate() {
            progress.step(&format!(
                "I/O limit (bare XDP forwarder) {d} {size} B{pass}"
            ));
            let t = rig.trial(&[(d, &mix, None)], secs)?;
            lim[i].io_mpps = Some(t.received_pps(d) / 1e6);
        }
        drop(bare);
        limits.extend(lim);
    }
    Ok(limits)
}

fn percentiles(l: &bench_bpf::Percentiles) -> report::Percentiles {
    let us = |x: Duration| x.as_secs_f64() * 1e6;
    report::Percentiles {
        p50_us: us(l.p50),
        p99_us: us(l.p99),
        p999_us: us(l.p999),
    }
}

/// Ping and iperf3 TCP (3 s each way) from one UE through the UPF to the data network.
fn check_with_tools(
    lab: &Lab,
    ue: UeSession,
) -> anyhow::Result<(report::PingResult, Vec<report::Iperf3Result>)> {
    let ip = ue.ue_ip.context("IPv4 UE")?;
    let gnb = Gnb::start(
        GnbConfig {
            netns: Some(lab.ns(Ns::Gnb)),
            ..GnbConfig::default()
        },
        vec![ue],
    )?;
    let (ue_s, dn_s) = (ip.to_string(), addr::DN_N6.to_string());
    let mut ping = lab.command(Ns::Gnb, "ping");
    ping.args([
        "-n",
        "-q",
        "-c",
        "3",
        "-i",
        "0.2",
        "-W",
        "2",
        "-I",
        &ip.to_string(),
        &addr::DN_N6.to_string(),
    ]);
    let ping = match output_within(ping, Duration::from_secs(8)) {
        Ok(out) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            report::PingResult::parse(&ue_s, &dn_s, &text)
        }
        Err(e) => report::PingResult::failed(&ue_s, &dn_s, format!("ping: {e}")),
    };
    let mut iperf3 = Vec::new();
    for reverse in [false, true] {
        let direction = if reverse {
            Direction::Downlink
        } else {
            Direction::Uplink
        };
        let mut server = lab.command(Ns::Dn, "iperf3");
        server
            .args(["-s", "-1", "-B", &addr::DN_N6.to_string(), "-p", "5299"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let mut server = match server.spawn() {
            Ok(s) => s,
            Err(e) => {
                iperf3.push(report::Iperf3Result::failed(
                    direction,
                    &ue_s,
                    &dn_s,
                    3.0,
                    format!("iperf3 (apt install iperf3): {e}"),
                ));
                continue;
            }
        };
        std::thread::sleep(Duration::from_millis(300));
        let mut c = lab.command(Ns::Gnb, "iperf3");
        c.args([
            "-c",
            &addr::DN_N6.to_string(),
            "-B",
            &ip.to_string(),
            "-p",
            "5299",
            "-t",
            "3",
            "-J",
        ]);
        if reverse {
            c.arg("-R");
        }
        c.args(["--connect-timeout", "3000"]);
        let o = output_within(c, Duration::from_secs(10));
        let _ = server.kill();
        let _ = server.wait();
        iperf3.push(match o {
            Ok(o) => report::Iperf3Result::from_json(direction, &ue_s, &dn_s, 3.0, &o.stdout),
            Err(e) => {
                report::Iperf3Result::failed(direction, &ue_s, &dn_s, 3.0, format!("iperf3: {e}"))
            }
        });
    }
    gnb.stop();
    Ok((ping, iperf3))
}

/// Run a command, killed after `limit`; its output.
fn output_within(
    mut c: std::process::Command,
    limit: Duration,
) -> std::io::Result<std::process::Output> {
    use std::process::Stdio;
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn()?;
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if child.try_wait()?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rig_allows_the_subscribers_whose_packets_fill_both_directions_shares() {
        let nd = |d, rig| NoDropRate {
            direction: d,
            packet_bytes: 650,
            sessions: 1,
            mpps: 0.0,
            gbps: 0.0,
            curve: Vec::new(),
            rig_mpps: rig,
        };
        // 422 + 696 pps per subscriber: 1000 of them take half of each direction's rate.
        let v = [
            nd(Direction::Uplink, Some(0.844)),
            nd(Direction::Downlink, Some(1.392)),
        ];
        assert_eq!(carrier_users_allowed(&v), Some(1000));
        assert_eq!(
            carrier_users_allowed(&[nd(Direction::Uplink, Some(1.0))]),
            None,
            "both directions needed"
        );
    }
}
