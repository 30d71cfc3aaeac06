//! Step 2, the UPF and its sessions (upfd started, or the external UPF as it runs, and
//! the SMF emulator establishing the run's sessions), and step 7b, more sessions while
//! traffic runs.

use std::time::{Duration, Instant};

use anyhow::bail;

use super::models::Mix;
use super::rig::{GenSession, Rig, Trial};
use super::steps::{rig, smf, Run};
use super::{smf_config, upf, Args};
use crate::lab::addr;
use crate::report::{self, Direction, NoDropRate, SessionRatePoint, UpfUnderTest};

impl Run<'_> {
    /// Step 2a: upfd started in upf, sized for every session the run establishes (not
    /// with `--external`: that UPF runs already).
    pub fn start_upf(
        &mut self,
        upfd_bin: &std::path::Path,
        out: &std::path::Path,
    ) -> anyhow::Result<()> {
        self.progress.step("starting the UPF");
        if !self.args.external {
            let p = self.plan;
            self.upfd = Some(upf::Upfd::start(
                self.lab,
                upfd_bin,
                out,
                p.sessions.max(1000) + p.under_traffic + p.app_mix_sessions + 1000,
                // upfd sizes its rule tables for sessions of two PDRs, a QER and a URR;
                // the application mix's have six PDRs and three URRs.
                p.app_mix_sessions,
            )?);
        }
        Ok(())
    }

    /// Step 2b: the SMF emulator associates from smf and establishes the run's sessions
    /// (rate, latency, the UPF's memory per session into the report); the generators'
    /// view of them kept for the trials.
    pub fn establish(&mut self) -> anyhow::Result<()> {
        let (args, plan) = (self.args, self.plan);
        self.progress
            .step(&format!("establishing {} sessions", plan.sessions));
        // dn routes the lab's UE pool (10.45.0.0/16) to upf; this one too, so that the
        // data network can answer UEs (ping, iperf3).
        let pool = upf::route_ue_pool(self.lab)?;
        let cfg = smf_config(args, args.explicit_teid, pool, 0);
        let smf = self.smf.insert(upf::LabSmf::associate_with(self.lab, cfg)?);
        let est = smf.establish(plan.sessions as usize);
        if est.accepted as u64 != plan.sessions {
            bail!(
                "the UPF accepted {} of {} sessions: {est:?}",
                est.accepted,
                plan.sessions
            );
        }
        let pid = match &self.upfd {
            Some(u) => Some(u.pid()),
            None => args.upf_pid.or_else(|| {
                let name = args.upf_process.as_deref()?;
                crate::sessions::find_process(name)
            }),
        };
        let mem = pid.and_then(crate::sessions::process_memory);
        self.report.sessions.push(SessionRatePoint {
            resident: plan.sessions,
            established_per_s: est.per_second,
            p50_ms: est.latency.p50_ms,
            p99_ms: est.latency.p99_ms,
            max_ms: est.latency.max_ms,
            bytes_per_session: mem.map(|(rss, maps)| (rss + maps) / plan.sessions),
            map_bytes_per_session: mem.map(|(_, maps)| maps / plan.sessions),
        });
        self.sessions = gen_sessions(&smf.smf, args.in_order);
        if self.sessions.len() as u64 != plan.sessions {
            bail!(
                "{} sessions have an uplink F-TEID, of {}",
                self.sessions.len(),
                plan.sessions
            );
        }
        self.report.upf = Some(upf_under_test(args, smf.smf.uses_choose()));
        Ok(())
    }

    /// Step 7b: sessions established while both directions run at half the no-drop rate:
    /// an outage's subscribers coming back while the others' traffic flows (issue 17).
    pub fn establish_under_traffic(&mut self) -> anyhow::Result<()> {
        let plan = self.plan;
        if plan.under_traffic > 0 {
            self.progress.step(&format!(
                "establishing {} sessions under traffic",
                plan.under_traffic
            ));
            self.report.establish_under_traffic = Some(establish_under_traffic(
                rig(&mut self.rig)?,
                smf(&mut self.smf)?,
                &self.report.no_drop,
                &super::models::vepc(),
                plan.under_traffic,
            )?);
        }
        self.report.fill_ratios();
        Ok(())
    }
}

/// The SMF's sessions as the generators address them (uplink TEID, UE address): in the
/// order established, or shuffled with a fixed seed.
pub(super) fn gen_sessions(smf: &crate::smf::Smf, in_order: bool) -> Vec<GenSession> {
    let mut v: Vec<GenSession> = smf
        .sessions()
        .iter()
        .filter_map(|s| {
            Some(GenSession {
                teid: s.n3_fteid.and_then(|f| f.teid)?,
                ue: s.ue_ip,
            })
        })
        .collect();
    if !in_order {
        use rand::seq::SliceRandom;
        v.shuffle(&mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1));
    }
    v
}

/// The report's description of the UPF under test and of the rules the run gives it.
fn upf_under_test(args: &Args, uses_choose: bool) -> UpfUnderTest {
    let sdf = (!args.no_sdf).then_some(&args.sdf);
    let options = [
        (
            "uplink F-TEID",
            if uses_choose { "CHOOSE" } else { "explicit" }.to_string(),
        ),
        (
            "PDU Session Container",
            if args.no_psc { "off" } else { "on" }.to_string(),
        ),
        (
            "rules per session",
            format!(
                "2 PDRs{}, 2 FARs, 1 QER (MBR), 1 URR (volume threshold)",
                sdf.map(|f| format!(" with an SDF filter ({f})"))
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
    ];
    UpfUnderTest {
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
        options: options
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    }
}

/// Establish `n` sessions while both directions run at half their no-drop rate: the
/// traffic runs in trials of a second from before the first request (0.2 s) until the
/// last answer (at most a minute), and its loss is summed over them.
fn establish_under_traffic(
    rig: &mut Rig,
    smf: &mut upf::LabSmf,
    no_drop: &[NoDropRate],
    mix: &Mix,
    n: u64,
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
    let resident = smf.smf.sessions().len() as u64;
    let start = Instant::now();
    let (sum, est) = std::thread::scope(|s| {
        let h = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            let t0 = Instant::now();
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
