//! Per-core scaling of the XDP programs (issue 17; `upf_bpf::scaling`): xdp_n3 and
//! xdp_n6 run with BPF_PROG_RUN on one CPU, then on two at once, with each CPU its own
//! half of the sessions and with one hot session for both.
//!
//! Measured by hand (root, release build; ~30 s at 1,000 sessions, ~2 min at 1M):
//! `UPF_SCALING_SESSIONS=1000000 cargo test --release -p upf-bpf --test scaling -- --ignored --nocapture`
//! `UPF_SCALING_OMIT=qer,urr,threshold,sdf` (any of them) installs sessions without those
//! rules, to find which cache line two CPUs fight over; `UPF_SCALING_PAIRS` (3) and
//! `UPF_SCALING_SECS` (1) set the alternating pairs and the length of each run;
//! `UPF_SCALING_ONLY=hot` or `=disjoint` measures one of the two cases;
//! `UPF_SCALING_FIFO=50` runs the measuring threads SCHED_FIFO 50, so that on a busy
//! machine the two CPUs really run at once (min busy near 1; without it, on this shared
//! VM, 0.2-0.5, and the hot-session ratios come out too high).

mod common;

use std::time::Duration;

use upf_bpf::scaling::{measure, Program, ScalingConfig, Sharing};

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

#[test]
#[ignore]
fn scaling_by_session_count() {
    let mut cfg = ScalingConfig::new(env("UPF_SCALING_SESSIONS").unwrap_or(1000));
    cfg.pairs = env("UPF_SCALING_PAIRS").unwrap_or(3);
    cfg.run = Duration::from_secs_f64(env("UPF_SCALING_SECS").unwrap_or(1.0));
    cfg.fifo = env("UPF_SCALING_FIFO");
    match std::env::var("UPF_SCALING_ONLY").as_deref() {
        Ok("hot") => cfg.sharing = vec![Sharing::HotSession],
        Ok("disjoint") => cfg.sharing = vec![Sharing::Disjoint],
        _ => {}
    }
    let omit = std::env::var("UPF_SCALING_OMIT").unwrap_or_default();
    for o in omit.split(',') {
        match o {
            "sdf" => cfg.rules.sdf = false,
            "qer" => cfg.rules.qer = false,
            "urr" => cfg.rules.urr = false,
            "threshold" => cfg.rules.threshold = false,
            "" => {}
            x => panic!("UPF_SCALING_OMIT: {x:?} is none of sdf, qer, urr, threshold"),
        }
    }
    let r = measure(&cfg).expect("measure (root)");
    eprintln!(
        "{} sessions installed in {:.1?}; rules {:?}; CPUs {:?}, {} pairs of {:?} runs",
        cfg.sessions, r.install, r.rules, cfg.cpus, cfg.pairs, cfg.run
    );
    eprint!("{}", r.table());
}

/// The measurement works: both CPUs ran packets, every one forwarded, the figures are
/// positive. Not a timed pass/fail: the machine's speed is not the test's business.
#[test]
fn scaling_measurement_runs() {
    if !common::root() {
        return;
    }
    if std::thread::available_parallelism().map_or(1, |p| p.get()) < 2 {
        eprintln!("one CPU: nothing to scale to");
        return;
    }
    let mut cfg = ScalingConfig::new(64);
    cfg.run = Duration::from_millis(100);
    cfg.pairs = 1;
    let r = measure(&cfg).expect("measure");
    assert_eq!(r.cases.len(), 4, "{r:#?}");
    for (c, (program, sharing)) in r.cases.iter().zip([
        (Program::N3, Sharing::Disjoint),
        (Program::N3, Sharing::HotSession),
        (Program::N6, Sharing::Disjoint),
        (Program::N6, Sharing::HotSession),
    ]) {
        assert_eq!((c.program, c.sharing), (program, sharing));
        assert_eq!(c.pairs.len(), 1);
        let p = &c.pairs[0];
        assert!(p.one.packets > 0 && p.one.mpps > 0.0, "{c:#?}");
        for (run, cpu) in p.both.iter().zip(cfg.cpus) {
            assert_eq!(run.cpu, cpu);
            assert!(run.packets > 0 && run.mpps > 0.0, "{c:#?}");
        }
        assert!(c.aggregate_mpps > 0.0 && c.ratio > 0.0, "{c:#?}");
    }
    assert!(r.driver_ns.iter().all(|(_, ns)| *ns > 0.0), "{r:#?}");
    eprint!("{}", r.table());
}
