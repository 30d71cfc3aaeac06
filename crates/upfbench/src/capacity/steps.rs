//! What the steps of a capacity run share ([`Run`]): the arguments, the plan and the lab
//! every step reads, and what one step hands to the next (the rig, the UPF's sessions,
//! the SMF emulator, upfd, the report being built), with the progress bar counting them.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::rig::{GenSession, Rig};
use super::{models, upf, Args, Plan};
use crate::lab::Lab;
use crate::report::{Direction, Machine, Report};

/// One capacity run in progress. Fields drop in this order on an early return: the SMF,
/// upfd, the rig (sinks detached), then GRO back as it was.
pub(super) struct Run<'a> {
    pub args: &'a Args,
    pub plan: &'a Plan,
    pub lab: &'a Lab,
    pub progress: Progress,
    pub report: Report,
    /// The SMF emulator associated with the UPF (steps 2-9): while it lives it answers
    /// the UPF's Heartbeat Requests, so a UPF that drops unanswered peers keeps it.
    pub smf: Option<upf::LabSmf>,
    /// upfd, when this run started it (steps 2-8).
    pub upfd: Option<upf::Upfd>,
    /// The generators and sinks of steps 1-8 (step 9 attaches its own).
    pub rig: Option<Rig>,
    gro: Option<upf::GroGuard>,
    /// Sessions only the bare forwarder makes sense of, for the limits.
    pub synthetic: Vec<GenSession>,
    /// The UPF's sessions as the generators address them (shuffled unless --in-order).
    pub sessions: Vec<GenSession>,
    /// Step 7's latency rows (index into the report's), directions and rates, for the
    /// bare forwarder's latency at the same rates in step 9.
    pub bare_rates: Vec<(usize, Direction, u64)>,
    /// Printed at the end: upfd's drops, what could not be measured.
    pub check_lines: Vec<String>,
    /// Room in the generators' and sinks' session tables.
    pub max_sessions: u32,
}

impl<'a> Run<'a> {
    /// The report's header and machine, GRO for an external UPF, the sinks attached.
    pub fn new(args: &'a Args, plan: &'a Plan, lab: &'a Lab) -> anyhow::Result<Run<'a>> {
        let progress = Progress::new(total_steps(args, plan));
        let mut report = Report::new(format!(
            "{} capacity, veth lab ({:?} profile)",
            args.upf_name
                .as_deref()
                .unwrap_or(if args.external { "UPF" } else { "upfd" }),
            args.profile
        ));
        report.machine = Some(Machine::probe(
            &[args.gen_cpu],
            &[args.fwd_cpu],
            Duration::from_millis(300),
        ));
        let max_sessions = u32::try_from(plan.sessions.max(1000)).unwrap_or(u32::MAX);
        // Before our programs take upf's interfaces: whether the UPF runs native XDP there.
        let gro = args.external.then(|| upf::GroGuard::for_external(lab));
        if let (Some(m), Some(g)) = (&mut report.machine, &gro) {
            m.notes.extend(g.notes.iter().cloned());
        }
        let rig = Rig::new(lab, args.gen_cpu, args.fwd_cpu, max_sessions, !args.no_psc)
            .context("attaching the sinks")?;
        Ok(Run {
            args,
            plan,
            lab,
            progress,
            report,
            smf: None,
            upfd: None,
            rig: Some(rig),
            gro,
            synthetic: Vec::new(),
            sessions: Vec::new(),
            bare_rates: Vec::new(),
            check_lines: Vec::new(),
            max_sessions,
        })
    }

    /// Whether PDU Session Containers go into uplink G-PDUs and QFIs into the rules.
    pub fn psc(&self) -> bool {
        !self.args.no_psc
    }

    /// A note in the report's machine notes (and on stderr now).
    pub fn note(&mut self, n: String) {
        eprintln!("note: {n}");
        if let Some(m) = &mut self.report.machine {
            m.notes.push(n);
        }
    }

    /// After the last trial: the SMF releases its association (an external UPF then
    /// deletes the run's sessions itself, as TS 29.244 has it), GRO back as it was; the
    /// report.
    pub fn finish(mut self) -> Report {
        self.progress.finish();
        if let Some(mut smf) = self.smf.take() {
            let r = smf.release();
            if r.accepted != 1 {
                eprintln!("releasing the association: {r:?}");
            }
        }
        drop(self.gro.take());
        for l in &self.check_lines {
            eprintln!("{l}");
        }
        self.report
    }
}

/// The rig of steps 1-8, or why there is none.
pub(super) fn rig(rig: &mut Option<Rig>) -> anyhow::Result<&mut Rig> {
    rig.as_mut().context("the rig is closed")
}

/// The SMF of steps 2-9, or why there is none.
pub(super) fn smf(smf: &mut Option<upf::LabSmf>) -> anyhow::Result<&mut upf::LabSmf> {
    smf.as_mut().context("no SMF associated with the UPF")
}

/// The progress bar's steps: one per trial, and one per phase that takes its time.
fn total_steps(args: &Args, plan: &Plan) -> usize {
    let bracketed: usize = plan
        .session_counts
        .iter()
        .map(|&n| if n == plan.sessions { 5 } else { 3 })
        .sum();
    2 * plan.sizes.len() * 2 * 2 // limits, before and after
        + 2 // UPF up, sessions
        + plan.sizes.len() * 2 * bracketed
        + models::carrier::steps(plan.carrier_max_users).len()
        + if plan.models { 2 * 2 * 2 } else { 0 }
        + if plan.app_mix_sessions > 0 { 2 + 2 * 3 } else { 0 }
        + 2 * 2 * (plan.no_drop_iterations as usize + 1) // the UPF's and the rig's
        + 2 * plan.latency_percents.len() * 2
        + usize::from(plan.under_traffic > 0)
        + usize::from(!args.external && !args.no_scaling)
        + usize::from(!args.no_check)
}

/// A progress bar on stderr: one line per step (redrawn in place on a terminal).
pub(super) struct Progress {
    total: usize,
    done: usize,
    start: Instant,
    tty: bool,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress {
            total,
            done: 0,
            start: Instant::now(),
            tty: std::io::stderr().is_terminal(),
        }
    }

    pub fn step(&mut self, what: &str) {
        self.done = (self.done + 1).min(self.total);
        let width = 30;
        let filled = self.done * width / self.total.max(1);
        let line = format!(
            "[{}{}] {:>3}/{} {:>5.0}s  {what}",
            "#".repeat(filled),
            ".".repeat(width - filled),
            self.done,
            self.total,
            self.start.elapsed().as_secs_f64()
        );
        if self.tty {
            eprint!("\r\x1b[2K{line}");
        } else {
            eprintln!("{line}");
        }
    }

    fn finish(&self) {
        if self.tty {
            eprintln!();
        }
    }
}
