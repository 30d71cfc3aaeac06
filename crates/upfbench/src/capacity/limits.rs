//! Steps 1 and 9: the machine's own limits on upf's interfaces, measured before the UPF's
//! trials and again after them, and the bare forwarder's latency at step 7's rates.

use std::net::Ipv4Addr;

use anyhow::Context;

use super::models::Mix;
use super::no_drop::percentiles;
use super::rig::{GenSession, Rig};
use super::steps::{rig, Progress, Run};
use crate::lab::addr;
use crate::report::{Direction, Limit};

impl Run<'_> {
    /// Step 1: the generator and I/O limits per size and direction, with sessions that
    /// only the bare forwarder needs to make sense of.
    pub fn limits(&mut self) -> anyhow::Result<()> {
        self.synthetic = (0..1000u32)
            .map(|i| GenSession {
                teid: 0x1000 + i,
                ue: Ipv4Addr::from(u32::from(addr::UE_POOL) + 1 + i),
            })
            .collect();
        let rig = rig(&mut self.rig)?;
        rig.set_sessions(&self.synthetic)?;
        self.report.limits = limit_pass(
            rig,
            &self.plan.sizes,
            !self.args.no_psc,
            self.plan.trial_secs,
            &mut self.progress,
            "",
        )?;
        Ok(())
    }

    /// Step 9: the bare forwarder's latency at the rates of step 7 (upfd's programs are
    /// off upf's interfaces now; an external UPF's are put back after each, as in step
    /// 1), then the limits again: on a machine whose speed drifts, a pass before and one
    /// after the UPF's trials bracket them.
    pub fn bare_latency_and_limits_again(&mut self) -> anyhow::Result<()> {
        let (args, plan, psc) = (self.args, self.plan, self.psc());
        let mut rig = Rig::new(self.lab, args.gen_cpu, args.fwd_cpu, self.max_sessions, psc)
            .context("attaching the sinks")?;
        rig.set_sessions(&self.synthetic)?;
        if !self.bare_rates.is_empty() {
            let mix = super::models::vepc();
            let bare = rig
                .bare_forwarder(psc)
                .context("attaching the bare forwarder")?;
            for &(i, d, rate) in &self.bare_rates {
                self.progress.step(&format!(
                    "bare forwarder latency {d} at {:.3} Mpps",
                    rate as f64 / 1e6
                ));
                let t = rig.trial_with(&[(d, &mix, Some(rate))], plan.trial_secs, None)?;
                if let Some(l) = &t.latency[d as usize] {
                    self.report.latency[i].bare = Some(percentiles(l));
                }
            }
            drop(bare);
        }
        let again = limit_pass(
            &mut rig,
            &plan.sizes,
            psc,
            plan.trial_secs,
            &mut self.progress,
            " (again)",
        )?;
        self.report.add_limit_pass(&again);
        self.report.fill_ratios();
        rig.close().context("detaching the sinks")?;
        Ok(())
    }
}

/// One pass over the packet sizes: the generator into a drop program (generator limit),
/// then the bare forwarder (I/O limit), both directions, on upf's interfaces.
pub(super) fn limit_pass(
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
