//! `upfbench capacity`: the operator capacity test of ../shared/design/BENCHMARKS.md
//! (results of this repository's runs: docs/benchmarks.md) on one machine, with
//! the machine's own limits measured in the same run.
//!
//! One run, in the lab (`upfbench::lab`), is [`bench`]: the steps below, each a method
//! of the run's context (`steps::Run`) that takes what earlier steps left there and
//! fills its part of the report:
//! 1. `limits` (limits.rs): the generator into a drop program on upf's interfaces
//!    (generator limit), then a bare XDP decap/encap-and-redirect forwarder in upf (I/O
//!    limit), per direction and packet size (with `--external`, GRO is turned on first
//!    for upf's n3 and n6 where no native XDP program runs, and off again at the end);
//! 2. `start_upf`, `establish` (establish.rs): `upfd` started in upf (or any UPF already
//!    running there, `--external`), sessions established by the SMF emulator from smf
//!    (rate and latency recorded); the SMF answers the UPF's requests (heartbeats) from
//!    then until the UPF's last trial;
//! 3. `saturation` (saturation.rs): right before the trials, upf's NAPI threads pinned
//!    (retried while a UPF attaches its programs; a note, never a failure, when it
//!    cannot be done); throughput at saturation per direction and packet size, at 1
//!    session and at all (the full profile adds 10,000: the subscribers one core
//!    carries; `--session-counts`), each UPF trial bracketed by the limits of the same
//!    size, direction and sessions, each swapped in for its trial and the UPF's programs
//!    put back after it: I/O limit, UPF, I/O limit at 1 session; I/O limit, one-miss
//!    limit, UPF, one-miss limit, I/O limit at all sessions (one-miss: the bare forwarder
//!    plus one read of the session's 64-octet record from a table of all sessions, keyed
//!    by TEID / UE address). A pair of readings more than 10 % apart: the whole bracket
//!    once more, then flagged;
//! 4. `carrier` (carrier.rs): the carrier capacity test: 100, 500, 1000, 2000
//!    subscribers, then doubling until loss passes 0.01 %, both directions at once at the
//!    per-subscriber rates and mixes of the Free5GC cloud evaluation;
//! 5. `traffic_models` (saturation.rs): the ZTE and vEPC models (full profile), saturation
//!    with their size mixes; then `app_mix` (app_mix.rs), the application mix
//!    (`models::apps`): a second SMF (192.168.4.3) provisions PFDs (PFD Management) for
//!    two named applications, web (TCP from port 80) and voice (UDP to the UE's ports
//!    40000-40999), and establishes sessions with an uplink and a downlink PDR and a URR
//!    per application; per direction, ZTE's sizes with its 85 % HTTP as TCP segments
//!    saturate as many sessions without application PDRs, then those, then the first
//!    again (the ratio: with / the mean without); the sessions are deleted, the second
//!    SMF's association released, and each application's usage (summed from the
//!    deletions' reports) compared with its share of the traffic. A UPF that does not
//!    announce PFDM, or does not answer PFD Management within 2 s, gets a note instead;
//! 6. `no_drop` (no_drop.rs): the no-drop rate (binary search on the offered rate; zero
//!    loss) per direction, each followed by the same search with the bare forwarder in
//!    the UPF's place (the rig's own no-drop rate, and from it the subscribers the rig
//!    allows in step 4's model);
//! 7. `latency` (no_drop.rs): latency p50/p99/p99.9 at 10, 50 and 90 % of the no-drop
//!    rate; then `establish_under_traffic` (establish.rs): sessions established while
//!    both directions run at 50 % of it (rate, latency, loss);
//! 8. `tools_check` (tools.rs): a ping and iperf3 TCP through the UPF from a UE of the
//!    gNB/UE emulator; then `stop_upfd`: upfd's drops noted, the SMF and upfd stopped
//!    (an external UPF runs on, its SMF with it);
//! 9. `bare_latency_and_limits_again` (limits.rs): the bare forwarder's latency at step
//!    7's rates, then the limits of step 1 again;
//! 10. `scaling` (scaling.rs): per-core scaling of upfd's XDP programs (not with
//!     `--external`): BPF_PROG_RUN on one CPU, then both at once, disjoint sessions and
//!     one hot session (`upf_bpf::scaling`);
//!
//! and `finish`: the SMF still associated (an external UPF's) releases its association,
//! which deletes the run's sessions in a conformant UPF; GRO back as it was.
//!
//! It prints the tables with every figure as a ratio of the run's limits, and writes
//! report.json, PNG charts and report.html (`upfbench::report`); the ping and iperf3
//! results are sections of the same report.

mod app_mix;
mod carrier;
mod establish;
mod limits;
pub mod models;
mod no_drop;
pub mod rig;
mod saturation;
mod scaling;
mod steps;
mod tools;
pub mod upf;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};

use crate::lab::Lab;
use crate::report::{self, Report};
use steps::Run;

/// How long and how far a run goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// Seconds: for tests.
    Smoke,
    /// About 4 minutes on a 2-CPU machine: the demo (scripts/demo.sh).
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
    /// The UPF's PFCP address: IP or IP:PORT, port 8805 if not given.
    #[arg(long, default_value = "192.168.4.2:8805", value_parser = crate::smf::cli::pfcp_addr)]
    pub upf_n4: SocketAddr,
    /// Pick uplink TEIDs ourselves (for UPFs without FTUP).
    #[arg(long)]
    pub explicit_teid: bool,
    /// No PDU Session Container in uplink G-PDUs and no QFI in the rules (4G style).
    #[arg(long)]
    pub no_psc: bool,
    /// Let the UPF allocate the UE addresses (CHV4 in the downlink PDI's UE IP Address):
    /// for UPFs that forward only to addresses they allocated (gtp-guard). The UPF's
    /// pool must lie in 10.64.0.0/10, which dn routes to it. No application mix.
    #[arg(long)]
    pub ue_ip_choose: bool,
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
    cfg.ue_ip_choose = args.ue_ip_choose;
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

/// The whole measurement, step by step (the module's list); the report.
pub fn bench(
    args: &Args,
    plan: &Plan,
    lab: &Lab,
    upfd_bin: &std::path::Path,
    out: &std::path::Path,
) -> anyhow::Result<Report> {
    let mut run = Run::new(args, plan, lab)?;
    run.limits()?;
    run.start_upf(upfd_bin, out)?;
    run.establish()?;
    run.saturation()?;
    run.carrier()?;
    run.traffic_models()?;
    run.app_mix()?;
    run.no_drop()?;
    run.latency()?;
    run.establish_under_traffic()?;
    run.tools_check()?;
    run.stop_upfd();
    run.bare_latency_and_limits_again()?;
    run.scaling();
    Ok(run.finish())
}
