//! `upfbench sessions`: PFCP session establishment rate and latency with 1k, 100k and 1M
//! sessions already installed in the UPF, and the UPF's memory per session
//! (BENCHMARKS.md, "PFCP: sessions established per second ... memory per session").
//!
//! For each resident level R (ascending) the SMF emulator fills the UPF to R - M sessions
//! as fast as it answers (not measured), then establishes M more (measured: rate,
//! latency p50/p99/max), so the figure is the rate at R resident. Memory: the UPF
//! process's resident set (VmRSS) above its level before the first session, plus the BPF
//! maps it holds (the `memlock` of each map in /proc/PID/fdinfo: kernel memory that RSS
//! does not show; preallocated for the configured capacity), divided by the resident
//! sessions. Works against any UPF; memory only when its process is on this machine.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use serde::Serialize;

use crate::report::{Report, SessionRatePoint, UpfUnderTest};
use crate::smf::{Ipv4Pool, Pace, PhaseReport, Smf, SmfConfig, TeidMode, Timers};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The UPF's PFCP address: IP or IP:PORT, port 8805 if not given.
    #[arg(long, default_value = "127.0.0.1:8805", value_parser = crate::smf::cli::pfcp_addr)]
    pub upf: SocketAddr,
    /// Local PFCP address, IP or IP:PORT.
    #[arg(long, value_parser = crate::smf::cli::pfcp_addr)]
    pub bind: Option<SocketAddr>,
    /// Resident session levels, ascending.
    #[arg(long, value_delimiter = ',', default_value = "1000,100000,1000000")]
    pub resident: Vec<usize>,
    /// Sessions established in each measured phase (at most the level itself).
    #[arg(long, default_value_t = 10_000)]
    pub measure: usize,
    /// Requests without a response at most.
    #[arg(long, default_value_t = 32)]
    pub in_flight: usize,
    /// UE addresses, one per session (must hold the largest level).
    #[arg(long, default_value = "10.64.0.0/10")]
    pub ue_pool: Ipv4Pool,
    /// The gNB's N3 address in downlink FARs.
    #[arg(long, default_value = "192.168.3.1")]
    pub gnb: std::net::Ipv4Addr,
    /// Always pick uplink TEIDs ourselves (default: CHOOSE when the UPF has FTUP).
    #[arg(long)]
    pub explicit_teid: bool,
    /// 4G style: no QFI.
    #[arg(long)]
    pub no_psc: bool,
    /// The SDF filter (Flow Description) in both PDRs of every session.
    #[arg(long, default_value = crate::smf::DEFAULT_SDF)]
    pub sdf: String,
    /// PDRs without an SDF filter.
    #[arg(long)]
    pub no_sdf: bool,
    /// The UPF's process ID, for memory per session (default: the one process named
    /// `--upf-process`, if there is exactly one).
    #[arg(long)]
    pub upf_pid: Option<u32>,
    #[arg(long, default_value = "upfd")]
    pub upf_process: String,
    /// Delete every session and release the association at the end.
    #[arg(long)]
    pub cleanup: bool,
    /// Write the report (report.json, sessions.png, report.html) into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

/// One measured level.
#[derive(Debug, Clone, Serialize)]
pub struct Level {
    pub resident: usize,
    pub fill: PhaseReport,
    pub measured: PhaseReport,
    /// VmRSS of the UPF process above its level before the first session.
    pub rss_delta_bytes: Option<u64>,
    /// memlock of the BPF maps the UPF process holds (constant: preallocated).
    pub bpf_map_bytes: Option<u64>,
    /// (RSS delta + BPF maps) / resident.
    pub bytes_per_session: Option<u64>,
    /// The UPF process's CPU time (user + system, every thread) over the measured
    /// phase, per establishment accepted in it, µs (issue 28's gate: on a machine the
    /// emulator, the kernel and the UPF share, the rate alone says little).
    pub upf_cpu_us_per_establishment: Option<f64>,
    /// The same for this process (the SMF emulator): whether it, not the UPF, was the
    /// bottleneck.
    pub smf_cpu_us_per_establishment: Option<f64>,
}

/// A process's CPU time so far (user + system, all its threads), from
/// `/proc/<pid>/stat` (`pid`: a number or "self").
pub fn process_cpu(pid: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    cpu_of_stat(&stat, u64::try_from(hz).ok().filter(|h| *h > 0)?)
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line, ticks of `hz`. The
/// command name (field 2) is in parentheses and may hold spaces and parentheses: the
/// fields are counted from the last ')'.
fn cpu_of_stat(stat: &str, hz: u64) -> Option<Duration> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (the state).
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_nanos(ticks.checked_mul(1_000_000_000)? / hz))
}

/// µs of `cpu` per one of `n` (None without a reading, or with nothing done).
fn per_establishment(cpu: Option<(Duration, Duration)>, n: usize) -> Option<f64> {
    let (a, b) = cpu?;
    (n > 0).then(|| b.saturating_sub(a).as_secs_f64() * 1e6 / n as f64)
}

/// The memory a process holds: its anonymous resident memory (bytes) and the memlock of
/// its BPF map fds.
pub fn process_memory(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb = |key: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    // Anonymous memory: the process's own. Not VmRSS, which also counts file-backed
    // pages: the binary's text, and BPF maps the process has mapped (upfd maps its URR
    // table), which memlock below already counts.
    let rss_kb = kb("RssAnon:").or_else(|| kb("VmRSS:"))?;
    Some((rss_kb * 1024, bpf_map_memlock(pid)))
}

/// Sum of `memlock` over the BPF maps `pid` holds file descriptors of (0 if none or
/// unreadable), each map once: a process may hold several descriptors of one map (a
/// library's and its own), and fdinfo gives each the whole map's memory.
pub fn bpf_map_memlock(pid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fdinfo")) else {
        return 0;
    };
    let mut maps = std::collections::BTreeMap::new();
    for e in dir.flatten() {
        let Ok(info) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        if !info.lines().any(|l| l.starts_with("map_type:")) {
            continue;
        }
        if let (Some(id), Some(v)) = (field("map_id:"), field("memlock:")) {
            maps.insert(id, v);
        }
    }
    maps.values().sum()
}

/// The PID of the one process whose comm is `name`.
pub fn find_process(name: &str) -> Option<u32> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if std::fs::read_to_string(e.path().join("comm")).is_ok_and(|c| c.trim() == name) {
            found.push(pid);
        }
    }
    (found.len() == 1).then(|| found[0])
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut levels = args.resident.clone();
    if levels.is_empty() || levels.windows(2).any(|w| w[0] >= w[1]) {
        bail!("--resident must be ascending, e.g. 1000,100000,1000000");
    }
    levels.dedup();
    let top = *levels.last().expect("non-empty");
    if top as u64 > args.ue_pool.capacity() {
        bail!(
            "--ue-pool {}/{} holds {} addresses, fewer than {top} sessions",
            args.ue_pool.base,
            args.ue_pool.prefix_len,
            args.ue_pool.capacity()
        );
    }
    let pid = args.upf_pid.or_else(|| find_process(&args.upf_process));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let (result, upf) = rt.block_on(measure(&args, &levels, pid))?;
    let mut report = Report::new("PFCP session establishment with sessions resident");
    report.machine = Some(crate::report::Machine::probe(
        &[],
        &[],
        Duration::from_millis(300),
    ));
    report.upf = Some(upf);
    report.sessions = result
        .iter()
        .map(|l| SessionRatePoint {
            resident: l.resident as u64,
            established_per_s: l.measured.per_second,
            p50_ms: l.measured.latency.p50_ms,
            p99_ms: l.measured.latency.p99_ms,
            max_ms: l.measured.latency.max_ms,
            bytes_per_session: l.bytes_per_session,
            map_bytes_per_session: l.bpf_map_bytes.map(|m| m / (l.resident as u64).max(1)),
        })
        .collect();
    if args.json {
        println!(
            "{}",
            serde_json::json!({ "levels": result, "upf_pid": pid, "in_flight": args.in_flight })
        );
    } else {
        print!("{}", table(&result, pid));
    }
    if let Some(dir) = &args.out {
        write_report(&report, dir)?;
    }
    let ok = result
        .iter()
        .all(|l| l.fill.all_accepted() && l.measured.all_accepted());
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn write_report(report: &Report, dir: &Path) -> anyhow::Result<()> {
    let w = report
        .write_all(dir)
        .with_context(|| format!("writing the report into {}", dir.display()))?;
    for x in &w.warnings {
        eprintln!("warning: {x}");
    }
    eprintln!("report: {}", w.html.display());
    Ok(())
}

/// Associate with the UPF of `args` and measure each of `levels` (ascending); memory
/// when `pid` (the UPF's process) is given.
pub async fn measure(
    args: &Args,
    levels: &[usize],
    pid: Option<u32>,
) -> anyhow::Result<(Vec<Level>, UpfUnderTest)> {
    let mut cfg = SmfConfig::new(args.upf);
    if let Some(b) = args.bind {
        cfg.bind = b;
    }
    cfg.ue_pool = args.ue_pool;
    cfg.gnb = args.gnb;
    cfg.psc = !args.no_psc;
    cfg.sdf_filter = (!args.no_sdf).then(|| args.sdf.clone());
    cfg.teid = if args.explicit_teid {
        TeidMode::Explicit
    } else {
        TeidMode::Auto
    };
    cfg.timers = Timers {
        t1: Duration::from_secs(3),
        n1: 3,
    };
    let mut smf = Smf::connect(cfg).await.context("binding the PFCP socket")?;
    let before = pid.and_then(process_memory);
    let assoc = smf.associate().await;
    if assoc.accepted != 1 {
        bail!(
            "the UPF at {} did not accept the association: {assoc:?}",
            args.upf
        );
    }
    let pace = Pace {
        rate: 0.0,
        in_flight: args.in_flight.max(1),
    };
    let mut out = Vec::new();
    let mut resident = 0usize;
    for &level in levels {
        let m = args.measure.min(level).max(1);
        let fill_n = level.saturating_sub(m).saturating_sub(resident);
        let fill = smf.establish(fill_n, pace).await;
        let upf_cpu_now = || pid.and_then(|p| process_cpu(&p.to_string()));
        let (upf0, smf0) = (upf_cpu_now(), process_cpu("self"));
        let measured = smf.establish(level - resident - fill_n, pace).await;
        let (upf1, smf1) = (upf_cpu_now(), process_cpu("self"));
        let upf_cpu = per_establishment(upf0.zip(upf1), measured.accepted);
        let smf_cpu = per_establishment(smf0.zip(smf1), measured.accepted);
        resident = level;
        let after = pid.and_then(process_memory);
        let (rss_delta, maps) = match (before, after) {
            (Some((r0, _)), Some((r1, m1))) => (Some(r1.saturating_sub(r0)), Some(m1)),
            _ => (None, None),
        };
        let per = match (rss_delta, maps) {
            (Some(r), Some(m)) => Some((r + m) / level as u64),
            _ => None,
        };
        eprintln!(
            "resident {level}: {:.0} establishments/s, p50 {:.3} ms, p99 {:.3} ms{}{}",
            measured.per_second,
            measured.latency.p50_ms,
            measured.latency.p99_ms,
            per.map(|b| format!(", {b} B/session")).unwrap_or_default(),
            upf_cpu
                .map(|c| format!(", UPF CPU {c:.1} µs/establishment"))
                .unwrap_or_default()
        );
        let stop = !(fill.all_accepted() && measured.all_accepted());
        out.push(Level {
            resident: level,
            fill,
            measured,
            rss_delta_bytes: rss_delta,
            bpf_map_bytes: maps,
            bytes_per_session: per,
            upf_cpu_us_per_establishment: upf_cpu,
            smf_cpu_us_per_establishment: smf_cpu,
        });
        if stop {
            eprintln!("stopping: the UPF refused or did not answer some requests");
            break;
        }
    }
    if args.cleanup {
        let _ = smf.delete(pace).await;
        let _ = smf.release().await;
    }
    let upf = UpfUnderTest {
        name: smf
            .upf_node_id()
            .map(|n| format!("UPF {n}"))
            .unwrap_or_else(|| "UPF".into()),
        n4: args.upf.to_string(),
        n3: smf
            .sessions()
            .iter()
            .find_map(|s| s.n3_fteid.and_then(|f| f.ipv4))
            .unwrap_or(smf.upf_n3())
            .to_string(),
        n6: String::new(),
        options: [
            ("in_flight".to_string(), args.in_flight.to_string()),
            (
                "uplink F-TEID".to_string(),
                if smf.uses_choose() {
                    "CHOOSE".into()
                } else {
                    "explicit".into()
                },
            ),
            ("measured per level".to_string(), args.measure.to_string()),
            (
                "SDF filter".to_string(),
                if args.no_sdf {
                    "none".to_string()
                } else {
                    args.sdf.clone()
                },
            ),
        ]
        .into_iter()
        .collect(),
    };
    Ok((out, upf))
}

/// The terminal table.
pub fn table(levels: &[Level], pid: Option<u32>) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>9} | {:>10} | {:>8} | {:>8} | {:>8} | {:>10} | {:>9} | {:>9} | {:>10} | {:>10}",
        "resident",
        "est/s",
        "p50 ms",
        "p99 ms",
        "max ms",
        "RSS MiB",
        "maps MiB",
        "B/session",
        "UPF µs/est",
        "SMF µs/est"
    );
    let _ = writeln!(s, "{}", "-".repeat(122));
    let us = |c: Option<f64>| c.map(|c| format!("{c:.1}")).unwrap_or_else(|| "-".into());
    let mib = |b: Option<u64>| {
        b.map(|b| format!("{:.1}", b as f64 / (1 << 20) as f64))
            .unwrap_or_else(|| "-".into())
    };
    for l in levels {
        let _ = writeln!(
            s,
            "{:>9} | {:>10.0} | {:>8.3} | {:>8.3} | {:>8.3} | {:>10} | {:>9} | {:>9} | {:>10} | {:>10}",
            l.resident,
            l.measured.per_second,
            l.measured.latency.p50_ms,
            l.measured.latency.p99_ms,
            l.measured.latency.max_ms,
            mib(l.rss_delta_bytes),
            mib(l.bpf_map_bytes),
            l.bytes_per_session
                .map(|b| b.to_string())
                .unwrap_or_else(|| "-".into()),
            us(l.upf_cpu_us_per_establishment),
            us(l.smf_cpu_us_per_establishment)
        );
    }
    match pid {
        Some(p) => {
            let _ = writeln!(
                s,
                "memory: UPF process {p}: VmRSS above its level before the first session, plus the memlock of its BPF maps (preallocated for its capacity), per resident session"
            );
            let _ = writeln!(
                s,
                "CPU: user + system time of the UPF process (every thread) and of this emulator over each measured phase, per establishment accepted in it"
            );
        }
        None => {
            let _ = writeln!(
                s,
                "memory: UPF process not found on this machine (--upf-pid)"
            );
        }
    }
    s
}

#[cfg(test)]
mod cpu_tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat =
            "4242 (upf d) (x)) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 100 0 0";
        assert_eq!(cpu_of_stat(stat, 100), Some(Duration::from_millis(3250)));
        assert_eq!(cpu_of_stat("4242 (upfd) S 1", 100), None, "cut short");
        assert!(process_cpu("self").is_some());
        assert_eq!(
            per_establishment(
                Some((Duration::from_millis(1), Duration::from_millis(3))),
                100
            ),
            Some(20.0)
        );
        assert_eq!(
            per_establishment(Some((Duration::ZERO, Duration::ZERO)), 0),
            None
        );
    }
}
