//! `upfbench gnb`: the gNB/UE emulator until SIGINT/SIGTERM (or `--seconds`), printing
//! the counters at an interval and on exit.

use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::{load_sessions, Gnb, GnbConfig, GnbStats};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Sessions, one JSON object a line, as `upfbench smf --sessions-out` writes them.
    #[arg(long)]
    pub sessions: PathBuf,
    /// Work in this named network namespace (default: the current one, e.g. under
    /// `ip netns exec gnb`).
    #[arg(long)]
    pub netns: Option<String>,
    /// The gNB's N3 address (GTP-U socket, port 2152).
    #[arg(long, default_value = "192.168.3.1")]
    pub gnb: Ipv4Addr,
    /// An IPv6 N3 address, for sessions whose uplink F-TEID is IPv6 only.
    #[arg(long)]
    pub gnb6: Option<Ipv6Addr>,
    /// 4G style: G-PDUs without a PDU Session Container.
    #[arg(long)]
    pub no_psc: bool,
    /// QFI in the UL PDU Session Container.
    #[arg(long, default_value_t = 1)]
    pub qfi: u8,
    /// MTU of the UE TUN devices.
    #[arg(long, default_value_t = 1400)]
    pub mtu: u32,
    /// TUN device names: this prefix and the session index.
    #[arg(long, default_value = "ue")]
    pub tun_prefix: String,
    /// Routing table and rule priority of UE i: this + i.
    #[arg(long, default_value_t = 100)]
    pub table_base: u32,
    /// Print the counters every this many seconds (0: only on exit).
    #[arg(long, default_value_t = 0)]
    pub stats: u64,
    /// Stop after this many seconds (0: at SIGINT or SIGTERM).
    #[arg(long, default_value_t = 0)]
    pub seconds: u64,
    /// Print the counters as JSON (one object a line).
    #[arg(long)]
    pub json: bool,
    /// Downlink delay of N3, milliseconds: everything received is held this long before
    /// it is received (QoS monitoring's DL Received Time Stamp, delivery, answers).
    /// At most 10 000.
    #[arg(long, default_value_t = 0)]
    pub dl_delay_ms: u64,
    /// Uplink delay of N3, milliseconds: the emulator's answers (QoS monitoring, Echo
    /// Responses) are held this long after their UL Sending Time Stamp. The UEs' uplink
    /// is not held. At most 10 000.
    #[arg(long, default_value_t = 0)]
    pub ul_delay_ms: u64,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn print(stats: &GnbStats, json: bool) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if json {
        writeln!(out, "{}", serde_json::to_string(stats)?)?;
    } else {
        write!(out, "{}", stats.table())?;
    }
    out.flush()?;
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.qfi > 63 {
        anyhow::bail!("--qfi must be 0 to 63");
    }
    let sessions = load_sessions(&args.sessions)?;
    let n = sessions.len();
    if u64::from(args.table_base) + sessions.iter().map(|s| s.index as u64).max().unwrap_or(0)
        >= 32766
    {
        anyhow::bail!("--table-base plus the largest session index must stay below 32766 (the main table's rule)");
    }
    let cfg = GnbConfig {
        netns: args.netns.clone(),
        gnb: args.gnb,
        gnb6: args.gnb6,
        psc: !args.no_psc,
        qfi: args.qfi,
        mtu: args.mtu,
        tun_prefix: args.tun_prefix.clone(),
        table_base: args.table_base,
        dl_delay: Duration::from_millis(args.dl_delay_ms),
        ul_delay: Duration::from_millis(args.ul_delay_ms),
        ..GnbConfig::default()
    };
    // SAFETY: installing an async-signal-safe handler (one atomic store).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    let gnb = Gnb::start(cfg, sessions).context("starting the gNB emulator")?;
    let first = gnb.sessions().first().map(|s| s.index).unwrap_or(0);
    eprintln!(
        "gnb: up: {n} UEs ({}{first}...), GTP-U from {}:{}, {}, N3 delay {} ms down, {} ms up",
        args.tun_prefix,
        args.gnb,
        super::GTPU_PORT,
        if args.no_psc {
            "no PDU Session Container".to_string()
        } else {
            format!("UL PDU Session Container QFI {}", args.qfi)
        },
        args.dl_delay_ms,
        args.ul_delay_ms
    );
    let start = Instant::now();
    let mut next_stats = start + Duration::from_secs(args.stats.max(1));
    while !STOP.load(Ordering::Relaxed) {
        if args.seconds > 0 && start.elapsed() >= Duration::from_secs(args.seconds) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        if args.stats > 0 && Instant::now() >= next_stats {
            next_stats += Duration::from_secs(args.stats);
            print(&gnb.stats(), args.json)?;
        }
    }
    let stats = gnb.stop();
    print(&stats, args.json)?;
    Ok(ExitCode::SUCCESS)
}
