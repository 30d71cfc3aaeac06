//! Steps 3 and 5: throughput at saturation, each UPF trial bracketed by its limits, and
//! the ZTE and vEPC models' size mixes.

use std::time::Duration;

use anyhow::Context;

use super::models::{self, Mix};
use super::rig::{LimitKind, Rig};
use super::steps::{rig, Progress, Run};
use crate::report::{Bracket, Direction, ThroughputPoint};

impl Run<'_> {
    /// Step 3: saturation per size and direction at each session count, each trial
    /// bracketed by its limits; once the sessions' set-up has stopped keeping the CPUs
    /// busy, with the UPF's programs (attached by now, or a note says not) on the
    /// forwarding CPU. The one-miss limits go into the limits' rows.
    pub fn saturation(&mut self) -> anyhow::Result<()> {
        let (args, plan) = (self.args, self.plan);
        let rig = rig(&mut self.rig)?;
        let waited = rig.wait_quiet(Duration::from_secs(20));
        if waited > Duration::from_secs(1) {
            eprintln!("waited {waited:.1?} for the CPUs to quiet down after the set-up");
        }
        rig.pin_for_trials(Duration::from_secs(if args.external { 5 } else { 1 }));
        for &n in &plan.session_counts {
            rig.set_sessions(&self.sessions[..n as usize])?;
            for &size in &plan.sizes {
                let mix = Mix::single(size);
                for d in Direction::BOTH {
                    let one_miss = n == plan.sessions;
                    let secs = plan.trial_secs;
                    let p = bracketed_trial(rig, d, &mix, n, one_miss, secs, &mut self.progress)?;
                    if let (Some(b), Some(l)) = (
                        p.one_miss_bracket,
                        self.report
                            .limits
                            .iter_mut()
                            .find(|l| l.direction == d && l.packet_bytes == u32::from(size)),
                    ) {
                        l.one_miss_mpps = Some(b.before_mpps.max(b.after_mpps));
                        l.one_miss_sessions = Some(n);
                    }
                    self.report.throughput.push(p);
                }
            }
        }
        Ok(())
    }

    /// Step 5: the ZTE and vEPC models at all sessions (full profile).
    pub fn traffic_models(&mut self) -> anyhow::Result<()> {
        let plan = self.plan;
        if !plan.models {
            return Ok(());
        }
        let rig = rig(&mut self.rig)?;
        for mix in [models::zte(), models::vepc()] {
            for d in Direction::BOTH {
                self.progress.step(&format!("{} {d}", mix.name));
                let t = rig.trial(&[(d, &mix, None)], plan.trial_secs)?;
                self.report.throughput.push(ThroughputPoint::measured(
                    d,
                    mix.label_bytes(),
                    plan.sessions,
                    t.sent_pps(d) / 1e6,
                    t.received_pps(d) / 1e6,
                ));
            }
            self.progress.step(&format!("{} (done)", mix.name));
            self.progress.step("");
        }
        Ok(())
    }
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
