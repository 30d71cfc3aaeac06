//! `upfbench soak`: upfd under steady traffic and session churn for a long time (issue
//! 14). The lab and upfd as `capacity` builds them; `--sessions` long-lived sessions
//! carry uplink and downlink traffic at `--fraction` of their no-drop rate (measured
//! first, both directions at once) while the same SMF establishes and deletes `--churn`
//! other sessions per second. At the end:
//! - loss on the long-lived sessions, per session (sent by the generator, received by
//!   the sinks);
//! - their usage reports (threshold reports during the run, the final one in the
//!   deletion response) against what the sinks received, octet for octet;
//! - upfd's memory (anonymous RSS and BPF maps) sampled every minute;
//! - the books (`/check`) and the session count after everything is deleted.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::Parser;
use pfcp::msg::{Msg, SessionDeletionRequest};
use pfcp::HeaderRepr;

use crate::capacity::models::Mix;
use crate::capacity::rig::{GenSession, Rig};
use crate::capacity::upf::{LabSmf, Upfd};
use crate::lab::Lab;
use crate::report::Direction;
use crate::smf::Pace;

#[derive(Debug, Clone, Parser)]
pub struct Args {
    /// How long the traffic and the churn run, minutes.
    #[arg(long, default_value_t = 30.0)]
    pub minutes: f64,
    /// Long-lived sessions that carry the traffic.
    #[arg(long, default_value_t = 10_000)]
    pub sessions: u64,
    /// Sessions established and deleted per second beside them.
    #[arg(long, default_value_t = 1000)]
    pub churn: u64,
    /// The traffic's rate as a fraction of the no-drop rate measured first.
    #[arg(long, default_value_t = 0.5)]
    pub fraction: f64,
    /// Packets per second per direction instead of measuring the no-drop rate.
    #[arg(long)]
    pub pps: Option<u64>,
    /// IP packet size, octets.
    #[arg(long, default_value_t = 650)]
    pub size: u16,
    /// The traffic runs in segments this long (counts are read between them).
    #[arg(long, default_value_t = 10.0)]
    pub segment_secs: f64,
    /// Prefix of the lab's namespaces.
    #[arg(long, default_value = "soak-")]
    pub prefix: String,
    /// The upfd binary (default: the one next to this upfbench).
    #[arg(long)]
    pub upfd: Option<PathBuf>,
    /// CPU of the generators and sinks.
    #[arg(long, default_value_t = 0)]
    pub gen_cpu: usize,
    /// CPU of the forwarding (upf's NAPI threads).
    #[arg(long, default_value_t = 1)]
    pub fwd_cpu: usize,
    /// Where upfd's configuration and log go.
    #[arg(long, default_value = "upfbench-soak")]
    pub out: PathBuf,
}

/// One long-lived session: where the generator sends, and how upfd knows it.
struct Stable {
    gen: GenSession,
    cp_seid: u64,
    up_seid: u64,
}

/// Octets and packets per direction (0 uplink, 1 downlink).
#[derive(Debug, Default, Clone, Copy)]
struct Usage {
    octets: [u64; 2],
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("soak builds network namespaces and loads XDP programs: run it as root");
    }
    let upfd_bin = crate::capacity::upf::upfd_binary(args.upfd.as_deref())?;
    let lab = Lab::up(&args.prefix)
        .context("building the lab")?
        .down_on_drop();
    let result = soak(&args, &lab, &upfd_bin);
    lab.down().context("removing the lab")?;
    let ok = result?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn soak(args: &Args, lab: &Lab, upfd_bin: &std::path::Path) -> anyhow::Result<bool> {
    let n = args.sessions;
    let max_sessions = n + 4 * args.churn + 1000;
    let mut rig = Rig::new(
        lab,
        args.gen_cpu,
        args.fwd_cpu,
        u32::try_from(n.max(1000)).unwrap_or(u32::MAX),
        true,
    )
    .context("attaching the sinks")?;
    let upfd = Upfd::start(lab, upfd_bin, &args.out, max_sessions, 0)?;
    rig.pin_forwarder();
    let pool = crate::capacity::upf::route_ue_pool(lab)?;
    let mut smf = LabSmf::associate(
        lab,
        "192.168.4.2:8805".parse()?,
        false,
        true,
        Some(crate::smf::DEFAULT_SDF.to_string()),
        pool,
    )?;
    let mix = Mix::single(args.size);
    let both = |pps: Option<u64>| [(Direction::Uplink, pps), (Direction::Downlink, pps)];
    let gen_sessions = |smf: &LabSmf| -> Vec<GenSession> {
        smf.smf
            .sessions()
            .iter()
            .filter(|s| s.is_active())
            .filter_map(|s| {
                Some(GenSession {
                    teid: s.n3_fteid.and_then(|f| f.teid)?,
                    ue: s.ue_ip,
                })
            })
            .collect()
    };

    // The no-drop rate, both directions at once (each at the rate), over sessions of its
    // own: the soak's sessions then start with their usage at zero.
    let pps = match args.pps {
        Some(p) => p,
        None => {
            let est = smf.establish(n as usize);
            if est.accepted as u64 != n {
                bail!("upfd accepted {} of {n} sessions: {est:?}", est.accepted);
            }
            rig.set_sessions(&gen_sessions(&smf))?;
            rig.wait_quiet(Duration::from_secs(2));
            let load = both(None);
            let sat = rig.trial(&load.map(|(d, r)| (d, &mix, r)), 2.0)?;
            let (mut lo, mut hi) = (
                0.0f64,
                sat.received_pps(Direction::Uplink)
                    .min(sat.received_pps(Direction::Downlink)),
            );
            let mut rate = hi * 0.9;
            for _ in 0..7 {
                let load = both(Some(rate as u64));
                let t = rig.trial(&load.map(|(d, r)| (d, &mix, r)), 2.0)?;
                if t.received[0] >= t.sent[0] && t.received[1] >= t.sent[1] {
                    lo = rate;
                } else {
                    hi = rate;
                }
                rate = (lo + hi) / 2.0;
            }
            println!(
                "no-drop rate, both directions at once: {:.3} Mpps each ({} B IP packets, {n} sessions)",
                lo / 1e6,
                args.size
            );
            let d = smf.rt.block_on(smf.smf.delete(Pace::default()));
            if d.accepted != d.requests {
                bail!("deleting the search's sessions: {d:?}");
            }
            (lo * args.fraction) as u64
        }
    };
    let est = smf.establish(n as usize);
    if est.accepted as u64 != n {
        bail!("upfd accepted {} of {n} sessions: {est:?}", est.accepted);
    }
    let mut stable: Vec<Stable> = smf
        .smf
        .sessions()
        .iter()
        .filter(|s| s.is_active())
        .filter_map(|s| {
            Some(Stable {
                gen: GenSession {
                    teid: s.n3_fteid.and_then(|f| f.teid)?,
                    ue: s.ue_ip,
                },
                cp_seid: s.cp_seid,
                up_seid: s.up_fseid?.seid,
            })
        })
        .collect();
    {
        use rand::seq::SliceRandom;
        stable.shuffle(&mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1));
    }
    let by_cp: HashMap<u64, usize> = stable
        .iter()
        .enumerate()
        .map(|(i, s)| (s.cp_seid, i))
        .collect();
    let gens: Vec<GenSession> = stable.iter().map(|s| s.gen).collect();
    rig.set_sessions(&gens)?;
    rig.wait_quiet(Duration::from_secs(2));

    println!(
        "soak: {:.1} min at {:.3} Mpps each way over {n} sessions, {} establishments and deletions per second beside them",
        args.minutes,
        pps as f64 / 1e6,
        args.churn
    );

    let mem0 = crate::sessions::process_memory(upfd.pid());
    let stop = AtomicBool::new(false);
    let end = Instant::now() + Duration::from_secs_f64(args.minutes * 60.0);
    let n_stable = stable.len();
    let mut sent = [vec![0u64; n_stable], vec![0u64; n_stable]];
    let mut got = [vec![0u64; n_stable], vec![0u64; n_stable]];
    let mut memory: Vec<(f64, u64, u64, u64)> = Vec::new();
    let t0 = Instant::now();
    let churn_total = std::thread::scope(|scope| -> anyhow::Result<_> {
        let smf = &mut smf;
        let stop = &stop;
        let churn = scope.spawn(move || {
            let (mut est, mut del, mut failed) = (0u64, 0u64, 0u64);
            let mut reports = Vec::new();
            let pace = Pace {
                rate: args.churn as f64 * 2.0,
                in_flight: 64,
            };
            let first = smf.smf.sessions().len();
            while !stop.load(Ordering::Relaxed) {
                let tick = Instant::now();
                let e = smf
                    .rt
                    .block_on(smf.smf.establish(args.churn as usize, pace));
                let d = smf
                    .rt
                    .block_on(smf.smf.delete_where(pace, |s| s.index >= first));
                est += e.accepted as u64;
                del += d.accepted as u64;
                failed += (e.requests - e.accepted + d.requests - d.accepted) as u64;
                reports.extend(smf.smf.n4().take_session_reports());
                if let Some(rest) = Duration::from_secs(1).checked_sub(tick.elapsed()) {
                    std::thread::sleep(rest);
                }
            }
            (est, del, failed, reports)
        });
        let mut next_sample = Instant::now();
        let mut segments = 0u32;
        while Instant::now() < end {
            if Instant::now() >= next_sample {
                let (rss, maps) = crate::sessions::process_memory(upfd.pid()).unwrap_or((0, 0));
                let sessions = crate::capacity::upf::metric(&upfd.metrics()?, "upf_sessions");
                memory.push((t0.elapsed().as_secs_f64() / 60.0, rss, maps, sessions));
                next_sample += Duration::from_secs(60);
            }
            let secs = args
                .segment_secs
                .min(end.saturating_duration_since(Instant::now()).as_secs_f64())
                .max(0.5);
            let load = both(Some(pps));
            rig.trial(&load.map(|(d, r)| (d, &mix, r)), secs)?;
            for d in Direction::BOTH {
                let (s, g) = rig.per_session(d)?;
                let i = d as usize;
                for k in 0..n_stable {
                    sent[i][k] += s.get(k).copied().unwrap_or(0);
                    got[i][k] += g.get(k).copied().unwrap_or(0);
                }
            }
            segments += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let c = churn.join().expect("the churn thread");
        println!("{segments} traffic segments");
        Ok(c)
    })?;
    let (established, deleted, churn_failed, reports) = churn_total;
    let minutes = t0.elapsed().as_secs_f64() / 60.0;

    // Usage: threshold reports during the run, then the final report of each deletion.
    let mut usage = vec![Usage::default(); n_stable];
    let mut add = |i: usize, r: &pfcp::msg::UsageReport| {
        if let Some(v) = &r.volume_measurement {
            usage[i].octets[0] += v.uplink.unwrap_or(0);
            usage[i].octets[1] += v.downlink.unwrap_or(0);
        }
    };
    let mut threshold_reports = 0;
    for b in reports
        .iter()
        .chain(smf.smf.n4().take_session_reports().iter())
    {
        if let Ok((h, Msg::SessionReportRequest(r))) = Msg::parse(b) {
            if let Some(&i) = h.seid.and_then(|s| by_cp.get(&s)) {
                threshold_reports += 1;
                for u in &r.usage_reports {
                    add(i, u);
                }
            }
        }
    }
    let mut not_deleted = 0;
    for (i, s) in stable.iter().enumerate() {
        let bytes = pfcp::msg::emit(
            &HeaderRepr::session(0, s.up_seid, smf.smf.n4().next_sequence()),
            &SessionDeletionRequest { other: vec![] },
        );
        match smf.rt.block_on(smf.smf.n4().transact(&bytes)) {
            Ok(r) => match Msg::parse(&r.bytes) {
                Ok((_, Msg::SessionDeletionResponse(d))) if d.cause.is_acceptance() => {
                    for u in &d.usage_reports {
                        add(i, u);
                    }
                }
                _ => not_deleted += 1,
            },
            Err(_) => not_deleted += 1,
        }
    }

    // What the numbers say.
    let size = u64::from(args.size);
    let mut ok = true;
    println!("\nafter {minutes:.1} min:");
    for d in Direction::BOTH {
        let i = d as usize;
        let (s, g): (u64, u64) = (sent[i].iter().sum(), got[i].iter().sum());
        let lossy = (0..n_stable).filter(|&k| got[i][k] < sent[i][k]).count();
        let wrong = (0..n_stable)
            .filter(|&k| usage[k].octets[i] != got[i][k] * size)
            .count();
        let reported: u64 = usage.iter().map(|u| u.octets[i]).sum();
        println!(
            "  {d}: {s} packets sent, {g} received ({:.4} % lost), {lossy} of {n_stable} sessions lost packets; usage reports {reported} octets for {} received: {wrong} sessions differ",
            100.0 * (s - g.min(s)) as f64 / s.max(1) as f64,
            g * size
        );
        ok &= lossy == 0 && wrong == 0;
    }
    println!(
        "  churn: {established} sessions established and {deleted} deleted ({:.0} and {:.0} per second), {churn_failed} requests refused or unanswered; {threshold_reports} threshold reports",
        established as f64 / (minutes * 60.0),
        deleted as f64 / (minutes * 60.0)
    );
    ok &= churn_failed == 0 && not_deleted == 0;
    let m = upfd.metrics()?;
    let left = crate::capacity::upf::metric(&m, "upf_sessions");
    let check = upfd.get("/check")?;
    println!("  after deleting everything: {left} sessions left; /check: {check}");
    ok &= left == 0 && check.contains("\"consistent\":true");
    println!("  memory (minute, anonymous RSS MiB, BPF maps MiB, sessions):");
    if let Some((rss, maps)) = mem0 {
        println!(
            "    before: {:.1} MiB, {:.1} MiB",
            rss as f64 / 1048576.0,
            maps as f64 / 1048576.0
        );
    }
    for (t, rss, maps, sessions) in &memory {
        println!(
            "    {t:5.1}: {:8.1} {:8.1} {sessions}",
            *rss as f64 / 1048576.0,
            *maps as f64 / 1048576.0
        );
    }
    // Flat: after the first five minutes, no sample more than 5 % above the one then.
    if let Some(base) = memory.iter().find(|m| m.0 >= 5.0).map(|m| m.1) {
        let peak = memory
            .iter()
            .filter(|m| m.0 >= 5.0)
            .map(|m| m.1)
            .max()
            .unwrap_or(base);
        let flat = peak as f64 <= base as f64 * 1.05;
        println!(
            "  memory {} (peak {:.1} MiB against {:.1} MiB at 5 min)",
            if flat { "flat" } else { "GREW" },
            peak as f64 / 1048576.0,
            base as f64 / 1048576.0
        );
        ok &= flat;
    }
    let drops = crate::capacity::upf::drops(&m);
    println!("  upfd's drops: {drops:?}");
    println!("{}", if ok { "soak: PASS" } else { "soak: FAIL" });
    rig.close()?;
    Ok(ok)
}
