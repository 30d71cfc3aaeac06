//! What the data path's table lookups cost as the session count grows: N sessions of the
//! benchmark's shape (uplink PDR on a TEID and downlink PDR on the UE address, each with
//! an SDF filter; FARs; a QER with MBR; a volume URR with its threshold armed) are
//! installed through the Datapath API, then xdp_n3 and xdp_n6 run once per frame
//! (BPF_PROG_RUN, repeat 1) on frames of sessions picked at random, so each run finds
//! the tables as a busy UPF's packets would: mostly not in the cache. The kernel times
//! each run on its own; the mean is printed per direction.
//!
//! Run by hand (root, release build; about a minute for 1M sessions):
//! `UPF_COST_SESSIONS=1000000 cargo test --release -p upf-bpf --test lookup_cost -- --ignored --nocapture`
//! `UPF_COST_OMIT=sdf,qer,urr` (any of them) installs sessions without those rules, to
//! see what each one adds; `UPF_COST_HASHED=1` gives the sessions TEIDs with no direct
//! slot (as when the SMF chooses them) and turns the downlink slots off, so every key is
//! found through the hash tables; `UPF_COST_UNALIGNED=1` gives each session a TEID whose
//! slot is not its UE address's (as upfd does when it learns the address only after
//! choosing the TEID), so its QER and URR are not where the data path loads them early.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{downlink_frame, neigh_config, session, set_teid, ue, uplink_frame, urr_template};
use rand::{Rng, SeedableRng};
use upf::fastpath::FastPath;
use upf_bpf::datapath::{Capacity, Datapath};

#[test]
#[ignore]
fn lookup_cost_by_session_count() {
    let n: u32 = std::env::var("UPF_COST_SESSIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000);
    let runs: u32 = std::env::var("UPF_COST_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(200_000);
    let cfg = neigh_config();
    let hashed = std::env::var_os("UPF_COST_HASHED").is_some();
    let mut cap = Capacity::for_sessions(n + 16);
    if hashed {
        cap.ue_slots = 0;
    }
    let mut dp = Datapath::load(cap, cfg.clone()).expect("load (root)");
    let index = dp.teid_index();
    // TEIDs as upfd allocates them (CHOOSE) and UE addresses from a pool: each in its
    // direct slot; with UPF_COST_HASHED, TEIDs an SMF chose and no downlink slots, all
    // in the hash tables.
    // Unless UPF_COST_UNALIGNED is set, each TEID is the one upfd picks for the
    // session's UE address (the uplink slot equal to the downlink slot,
    // upf::alloc::TeidAllocator::allocate_for).
    let unaligned = std::env::var_os("UPF_COST_UNALIGNED").is_some();
    let teid_of = |i: u32| {
        if hashed {
            common::teid(i)
        } else if unaligned {
            index.teid(i)
        } else {
            index.teid(u32::from(ue(i)) % cap.ue_slots)
        }
    };
    dp.configure(cfg, 20, 20, 0).unwrap();
    let urr = urr_template();
    let omit = std::env::var("UPF_COST_OMIT").unwrap_or_default();
    let omit: Vec<&str> = omit.split(',').collect();
    let t0 = std::time::Instant::now();
    for i in 0..n {
        let mut s = session(i, "permit out ip from any to assigned", &urr);
        set_teid(&mut s, teid_of(i));
        for pdr in s.pdrs.values_mut() {
            if omit.contains(&"sdf") {
                pdr.pdi.sdf_filters.clear();
            }
            if omit.contains(&"qer") {
                pdr.qer_ids.clear();
            }
            if omit.contains(&"urr") {
                pdr.urr_ids.clear();
            }
        }
        if omit.contains(&"qer") {
            s.qers.remove(&1);
        }
        if omit.contains(&"urr") {
            s.urrs.remove(&1);
        }
        let s = Arc::new(s);
        dp.install(None, &s).expect("install");
        if !omit.contains(&"urr") {
            dp.write_threshold(s.up_seid, 1, Some(1 << 60)).unwrap();
        }
    }
    eprintln!(
        "omitted: {omit:?}; keys (in slots, hashed, waiting) up, down: {:?}",
        dp.direct_keys()
    );
    eprintln!(
        "{n} sessions installed in {:.1?} ({:.1} us each): BPF maps {} MiB (memlock)",
        t0.elapsed(),
        t0.elapsed().as_secs_f64() * 1e6 / f64::from(n),
        bpf_memlock() >> 20
    );
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for (name, uplink) in [("xdp_n3 (uplink)", true), ("xdp_n6 (downlink)", false)] {
        let prog = if uplink {
            &dp.skel().progs.xdp_n3
        } else {
            &dp.skel().progs.xdp_n6
        };
        let mut total = Duration::ZERO;
        let mut redirected = 0;
        let mut out = vec![0u8; 4096];
        for _ in 0..runs {
            let i = rng.random_range(0..n);
            let frame = if uplink {
                uplink_frame(teid_of(i), ue(i))
            } else {
                downlink_frame(ue(i))
            };
            let input = libbpf_rs::ProgramInput {
                data_in: Some(&frame),
                data_out: Some(&mut out),
                repeat: 1,
                ..Default::default()
            };
            let r = prog.test_run(input).expect("BPF_PROG_RUN");
            redirected += u32::from(r.return_value == 4);
            total += r.duration;
        }
        assert_eq!(redirected, runs, "every frame forwarded: {:?}", dp.stats());
        eprintln!(
            "{n} sessions, {name}: {:.1} ns per packet over {runs} runs",
            total.as_nanos() as f64 / f64::from(runs)
        );
    }
}

/// Sum of `memlock` over this process's BPF map descriptors.
fn bpf_memlock() -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir("/proc/self/fdinfo")
        .into_iter()
        .flatten()
        .flatten()
    {
        let info = std::fs::read_to_string(e.path()).unwrap_or_default();
        if info.lines().any(|l| l.starts_with("map_type:")) {
            total += info
                .lines()
                .find_map(|l| l.strip_prefix("memlock:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    total
}
