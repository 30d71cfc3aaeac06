//! Step 5b: the application mix (`models::apps`). A second SMF provisions two named
//! applications' PFDs (PFD Management) and establishes sessions with their PDRs and
//! URRs; per direction they saturate between two trials of as many sessions without
//! application PDRs; their usage per application comes from the deletions' reports.

use std::time::Duration;

use anyhow::{bail, Context};

use super::establish::gen_sessions;
use super::models::{apps, Mix};
use super::rig::{GenSession, Rig, Trial};
use super::steps::{rig, Progress, Run};
use super::{smf_config, upf, APP_MIX_IMSI_OFFSET};
use crate::report::{self, Direction};
use crate::smf::{AppIds, UsageByUrr};

/// How long the application mix waits for the answer to its PFD Management Request: a
/// UPF that does not answer it costs the run this, not T1 x (N1 + 1).
const PFD_WAIT: Duration = Duration::from_secs(2);

/// Each direction's trials: without application PDRs, with, without again.
type Trials = Vec<(Direction, Trial, Trial, Trial)>;

impl Run<'_> {
    /// Step 5b, when the plan has application-mix sessions: its rows into the report, or
    /// a note saying why there are none; the generators back on the run's sessions.
    pub fn app_mix(&mut self) -> anyhow::Result<()> {
        if self.plan.app_mix_sessions == 0 {
            return Ok(());
        }
        let pfdm = self
            .smf
            .as_ref()
            .and_then(|s| s.smf.up_function_features())
            .is_some_and(|f| f.get(pfcp::ie::up_function_features::PFDM));
        let result = if pfdm {
            let rig = rig(&mut self.rig)?;
            app_mix(
                self.args,
                self.plan,
                self.lab,
                rig,
                &self.sessions,
                &mut self.progress,
            )
        } else {
            // PFDM (clause 8.2.25) says whether the UP function supports PFD Management
            // (clause 6.2.5): without it none is sent, so no time goes on waiting.
            Err(anyhow::anyhow!(
                "the UPF does not announce PFD Management (no PFDM in its UP Function Features)"
            ))
        };
        match result {
            Ok(v) => self.report.app_mix = v,
            Err(e) => self.note(format!("application mix not measured: {e:#}")),
        }
        rig(&mut self.rig)?.set_sessions(&self.sessions)?;
        Ok(())
    }
}

/// The application mix per direction, sessions with application PDRs from a second SMF
/// against as many of `plain` without; the sessions deleted after, their usage per
/// application in the rows. The second SMF releases its association at the end.
fn app_mix(
    args: &super::Args,
    plan: &super::Plan,
    lab: &crate::lab::Lab,
    rig: &mut Rig,
    plain: &[GenSession],
    progress: &mut Progress,
) -> anyhow::Result<Vec<report::AppMixPoint>> {
    if args.explicit_teid {
        bail!("with --explicit-teid a second SMF would pick the first one's TEIDs");
    }
    if args.ue_ip_choose {
        bail!("with --ue-ip-choose the application PDRs would need each UE's address before the UPF allocates it");
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
        smf.pfd_management(&apps::pfds(), PFD_WAIT)?;
        let est = smf.establish(n);
        if est.accepted != n {
            bail!(
                "the UPF accepted {} of {n} sessions with application PDRs: {est:?}",
                est.accepted
            );
        }
        let with = gen_sessions(&smf.smf, args.in_order);
        if with.len() != n {
            bail!("{} of {n} sessions have an uplink F-TEID", with.len());
        }
        let mix = apps::mix();
        rig.set_tcp_sizes(&apps::TCP_SIZES);
        let trials = app_mix_trials(rig, &mix, &plain[..n], &with, plan.trial_secs, progress);
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

/// Per direction: `without` saturated, then `with`, then `without` again.
fn app_mix_trials(
    rig: &mut Rig,
    mix: &Mix,
    without: &[GenSession],
    with: &[GenSession],
    secs: f64,
    progress: &mut Progress,
) -> std::io::Result<Trials> {
    let n = with.len();
    let mut out = Vec::new();
    for d in Direction::BOTH {
        let mut one = |rig: &mut Rig, s: &[GenSession], what: &str| {
            progress.step(&format!("application mix {d}, {n} sessions {what}"));
            rig.set_sessions(s)?;
            rig.trial(&[(d, mix, None)], secs)
        };
        let b = one(rig, without, "without application PDRs")?;
        let w = one(rig, with, "with application PDRs")?;
        let a = one(rig, without, "without application PDRs (again)")?;
        out.push((d, b, w, a));
    }
    Ok(out)
}

/// The applications as the rows describe them: ID, flow description, the traffic, and
/// its share of the packets sent (%).
fn described() -> [(&'static str, &'static str, &'static str, f64); 2] {
    let tcp = apps::tcp_share_pct();
    [
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
    ]
}

/// The application mix's report rows from its trials (direction, without before, with,
/// without after) and the usage per URR.
fn app_mix_rows(
    sessions: u64,
    mix: &Mix,
    trials: &[(Direction, Trial, Trial, Trial)],
    usage: &UsageByUrr,
) -> Vec<report::AppMixPoint> {
    let described = described();
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
