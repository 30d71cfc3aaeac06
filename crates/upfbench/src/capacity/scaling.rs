//! Step 10: per-core scaling of upfd's XDP programs (`upf_bpf::scaling`), once nothing
//! else runs.

use std::time::Duration;

use super::steps::Run;
use super::{Args, Plan, Profile};
use crate::report;

impl Run<'_> {
    /// Step 10 (not with `--external` or `--no-scaling`): BPF_PROG_RUN on one CPU, then
    /// on both at once (disjoint sessions, one hot session); when it cannot be measured,
    /// a line at the end says why.
    pub fn scaling(&mut self) {
        if self.args.external || self.args.no_scaling {
            return;
        }
        self.progress
            .step("per-core scaling (BPF_PROG_RUN on one CPU, then both)");
        match scaling(self.args, self.plan) {
            Ok(v) => self.report.scaling = v,
            Err(e) => self
                .check_lines
                .push(format!("per-core scaling not measured: {e}")),
        }
    }
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
