//! Steps 6 and 7: the no-drop rate (the UPF's, then the rig's own with the bare forwarder
//! in the UPF's place), and latency at fractions of it.

use std::time::Duration;

use anyhow::Context;

use super::carrier::carrier_users_allowed;
use super::models::{self, Mix};
use super::rig::{Rig, Trial};
use super::steps::{rig, Progress, Run};
use super::{Plan, NO_DROP_EXTRA, NO_DROP_FLOOR_PPS};
use crate::report::{self, Direction, LatencyPoint, LossPoint, NoDropRate};

impl Run<'_> {
    /// Step 6: the no-drop rate at 650 B (the vEPC packet), all sessions, per direction;
    /// each followed by the rig's own, the same search with the bare forwarder in the
    /// UPF's place (and from the two the subscribers the rig allows in step 4's model).
    pub fn no_drop(&mut self) -> anyhow::Result<()> {
        let (plan, psc) = (self.plan, self.psc());
        let rig = rig(&mut self.rig)?;
        let mix = models::vepc();
        let mut no_drop = Vec::new();
        for d in Direction::BOTH {
            let (mpps, curve) = no_drop_search(rig, d, &mix, plan, &mut self.progress, "")?;
            let bare = rig
                .bare_forwarder(psc)
                .context("attaching the bare forwarder")?;
            let rig_mpps = no_drop_search(rig, d, &mix, plan, &mut self.progress, " (rig)");
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
        if let Some(c) = &mut self.report.capacity {
            c.rig_users = carrier_users_allowed(&no_drop);
        }
        self.report.no_drop = no_drop;
        Ok(())
    }

    /// Step 7: latency p50/p99/p99.9 at fractions of each direction's no-drop rate, the
    /// rates kept for the bare forwarder's latency at step 9.
    pub fn latency(&mut self) -> anyhow::Result<()> {
        let plan = self.plan;
        let rig = rig(&mut self.rig)?;
        let mix = models::vepc();
        for nd in &self.report.no_drop {
            for &p in &plan.latency_percents {
                let d = nd.direction;
                let rate = (nd.mpps * 1e6 * f64::from(p) / 100.0).max(1000.0);
                self.progress
                    .step(&format!("latency {d} at {p} % of the no-drop rate"));
                // No flush batching: packets leave when due, so waiting in a batch does
                // not show up as latency.
                let t = rig.trial_with(&[(d, &mix, Some(rate as u64))], plan.trial_secs, None)?;
                if let Some(lat) = &t.latency[d as usize] {
                    let l = percentiles(lat);
                    self.report.latency.push(LatencyPoint {
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
                    let row = self.report.latency.len() - 1;
                    self.bare_rates.push((row, d, rate as u64));
                }
            }
        }
        Ok(())
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

pub(super) fn percentiles(l: &bench_bpf::Percentiles) -> report::Percentiles {
    let us = |x: Duration| x.as_secs_f64() * 1e6;
    report::Percentiles {
        p50_us: us(l.p50),
        p99_us: us(l.p99),
        p999_us: us(l.p999),
    }
}
