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
//!
//! Application detection (docs/application-detection.md): `UPF_COST_APPS=1` installs a
//! PFD table of two applications (domain names, an `http://` URL, a flow description)
//! and gives every session two application PDRs in each direction, each with its own
//! URR, at a higher precedence than the default PDRs; the traffic is of no application
//! (the common case: each packet misses the flow table and the learned addresses, and
//! is checked against the applications' flow descriptions). `UPF_COST_APPS=classified`
//! makes it one application's: a DNS answer names the data network host for the first
//! application, and one packet per session before the measurement enters each session's
//! flow in the flow table, so every measured packet is classified by one flow-table hit
//! and counted by the application PDR's URR. `UPF_COST_APPS=below` puts the application
//! PDRs after the default ones (what classifying costs alone). With any UPF_COST_APPS the tables are sized
//! for six PDRs and three URRs per session and a flow table of one flow per session;
//! `UPF_COST_APPS=none` is the same tables without applications, the runs' baseline.

mod common;

use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use common::{
    downlink_frame, neigh_config, session, set_teid, timed_run, ue, uplink_frame, urr_template, DN,
};
use rand::{Rng, SeedableRng};
use upf::fastpath::FastPath;
use upf::pfd::{AppPfds, PfdTable};
use upf_bpf::datapath::{Capacity, Datapath, Role};

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
    // UPF_COST_APPS=none: the tables of the application runs, without applications
    // (the same run's baseline).
    let app_tables = std::env::var_os("UPF_COST_APPS").is_some();
    let apps = std::env::var("UPF_COST_APPS")
        .ok()
        .filter(|v| !matches!(v.as_str(), "" | "0" | "none"));
    let classified = apps.as_deref() == Some("classified");
    if app_tables {
        // Six PDRs and FARs and three URRs per session (the slot tables are as before),
        // and one flow per session in the flow table (its default holds a quarter).
        cap.cold_entries = 6 * (n + 16) + 1024;
        cap.sdf_entries = cap.sdf_entries.max(4 * (n + 16));
        cap.cells = 3 * (n + 16);
        cap.app_flows = cap.app_flows.max(n + 16);
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
    if apps.is_some() {
        dp.set_pfds(&Arc::new(pfd_table()), &[]).expect("PFDs");
    }
    let t0 = std::time::Instant::now();
    for i in 0..n {
        let mut s = session(i, "permit out ip from any to assigned", &urr);
        set_teid(&mut s, teid_of(i));
        if apps.is_some() {
            add_app_pdrs(&mut s, &urr, apps.as_deref() == Some("below"));
        }
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
            if apps.is_some() {
                for u in [2, 3] {
                    dp.write_threshold(s.up_seid, u, Some(1 << 60)).unwrap();
                }
            }
        }
    }
    if classified {
        // The data network host learned for "video", then one packet per session (its
        // flow, the same both ways, enters the flow table).
        let answer = dns_answer(ue(0), DN, "video.example");
        let r = dp
            .skel()
            .progs
            .xdp_n6
            .test_run(libbpf_rs::ProgramInput {
                data_in: Some(&answer),
                ..Default::default()
            })
            .expect("BPF_PROG_RUN");
        assert_eq!(r.return_value, 4, "the DNS answer forwarded");
        for i in 0..n {
            let input = libbpf_rs::ProgramInput {
                data_in: Some(&uplink_frame(teid_of(i), ue(i))),
                ..Default::default()
            };
            dp.skel()
                .progs
                .xdp_n3
                .test_run(input)
                .expect("BPF_PROG_RUN");
        }
    }
    eprintln!("applications: {apps:?}");
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
    // The yardstick in the same harness: the one-miss forwarder (GTP-U decapsulation or
    // encapsulation plus one dependent read of the session's 64-octet record from a table
    // of n records, keyed as upfd's slots are), BPF_PROG_RUN on the same sessions' frames.
    let sessions: Vec<bench_bpf::MissSession> = (0..n)
        .map(|i| bench_bpf::MissSession {
            ue: ue(i),
            dl_teid: i + 1,
        })
        .collect();
    let (miss, layout) = bench_bpf::BareForwarder::load_one_miss(
        bench_bpf::BareConfig {
            n3_ifindex: 20,
            n6_ifindex: 20,
            n3_mac: [2, 0, 0, 0, 0, 3],
            gnb_mac: [2, 0, 0, 0, 0, 1],
            n6_mac: [2, 0, 0, 0, 0, 6],
            dn_mac: [2, 0, 0, 0, 0, 9],
            n3_ip: common::N3,
            gnb_ip: common::GNB,
            n6_ip: std::net::Ipv4Addr::new(192, 168, 6, 2),
            teid: 1,
            psc: true,
            qfi: 1,
        },
        &sessions,
    )
    .expect("the one-miss forwarder (root)");
    assert_eq!(layout.unslotted, 0, "every session in its one-miss slot");
    let (miss_n3, miss_n6) = miss.programs();
    // Pairs of runs, upfd's program then the one-miss one on the same sessions, so that
    // each ratio divides readings taken next to each other (the VM's speed drifts).
    let pairs: u32 = std::env::var("UPF_COST_PAIRS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5)
        .max(1);
    let per_pair = (runs / pairs).max(1);
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    for (name, uplink) in [("xdp_n3 (uplink)", true), ("xdp_n6 (downlink)", false)] {
        let prog = if uplink {
            dp.prog_fd(Role::Gtpu)
        } else {
            dp.prog_fd(Role::N6)
        };
        let yardstick = if uplink { miss_n3 } else { miss_n6 };
        let before = if apps.is_some() {
            counted_by(&dp, n)
        } else {
            (0, 0)
        };
        let mut total = Duration::ZERO;
        let mut redirected = 0;
        let mut ratios = Vec::new();
        for pair in 0..pairs {
            let picks: Vec<u32> = (0..per_pair).map(|_| rng.random_range(0..n)).collect();
            let (mut upf_ns, mut miss_ns) = (Duration::ZERO, Duration::ZERO);
            for &i in &picks {
                let frame = if uplink {
                    uplink_frame(teid_of(i), ue(i))
                } else {
                    downlink_frame(ue(i))
                };
                let (verdict, took) = timed_run(prog, &frame);
                redirected += u32::from(verdict == 4);
                upf_ns += took;
            }
            for &i in &picks {
                let frame = if uplink {
                    uplink_frame(layout.uplink_teids[i as usize], ue(i))
                } else {
                    downlink_frame(ue(i))
                };
                let (verdict, took) = timed_run(yardstick.as_fd(), &frame);
                assert_eq!(verdict, 4, "the one-miss forwarder forwards session {i}");
                miss_ns += took;
            }
            total += upf_ns;
            let ratio = miss_ns.as_secs_f64() / upf_ns.as_secs_f64();
            eprintln!(
                "{n} sessions, {name}, pair {}: upfd {:.1} ns, one-miss {:.1} ns per packet: {ratio:.2} x the one-miss rate",
                pair + 1,
                upf_ns.as_nanos() as f64 / f64::from(per_pair),
                miss_ns.as_nanos() as f64 / f64::from(per_pair)
            );
            ratios.push(ratio);
        }
        let runs = per_pair * pairs;
        assert_eq!(redirected, runs, "every frame forwarded: {:?}", dp.stats());
        if apps.is_some() {
            // Which URR counted the measured packets: the default PDR's (1) or the
            // application's (2).
            let after = counted_by(&dp, n);
            let (default, app) = (after.0 - before.0, after.1 - before.1);
            eprintln!("packets counted by the default URR {default}, by the application's {app}");
            if classified {
                assert_eq!(
                    (default, app),
                    (0, u64::from(runs)),
                    "every packet classified"
                );
            } else {
                assert_eq!((default, app), (u64::from(runs), 0), "no packet classified");
            }
        }
        print_profile(&dp, name);
        ratios.sort_by(f64::total_cmp);
        eprintln!(
            "{n} sessions, {name}: {:.1} ns per packet over {runs} runs; x one-miss rate: median {:.2} (pairs {})",
            total.as_nanos() as f64 / f64::from(runs),
            ratios[ratios.len() / 2],
            ratios
                .iter()
                .map(|r| format!("{r:.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

/// With a profiling build (UPF_BPF_PROFILE set when cargo built the object:
/// bpf/include/profile.h), the time per packet between the stages' marks, summed over
/// CPUs; the sums are then cleared for the next direction.
fn print_profile(dp: &Datapath, name: &str) {
    use libbpf_rs::skel::Skel;
    use libbpf_rs::MapCore;
    let Some(m) = dp
        .skel()
        .object()
        .maps()
        .find(|m| m.name().to_str() == Some("prof"))
    else {
        return;
    };
    // bpf/include/profile.h enum prof_point; struct prof: t, ns[MAX], n[MAX].
    const POINTS: [&str; 9] = [
        "start",
        "found",
        "checked",
        "app",
        "pdr",
        "rules",
        "planned",
        "rewritten",
        "sent",
    ];
    const MAX: usize = POINTS.len();
    let Ok(Some(per_cpu)) = m.lookup_percpu(&0u32.to_ne_bytes(), libbpf_rs::MapFlags::ANY) else {
        return;
    };
    let word = |v: &[u8], i: usize| u64::from_ne_bytes(v[8 * i..8 * i + 8].try_into().unwrap());
    let mut line = Vec::new();
    for (i, p) in POINTS.iter().enumerate().skip(1) {
        let (ns, n) = per_cpu.iter().fold((0, 0), |(a, b), v| {
            (a + word(v, 1 + i), b + word(v, 1 + MAX + i))
        });
        if n > 0 {
            line.push(format!("{p} {:.0}", ns as f64 / n as f64));
        }
    }
    eprintln!("{name}: ns from the previous mark to: {}", line.join(", "));
    let zero = vec![vec![0u8; per_cpu[0].len()]; per_cpu.len()];
    let _ = m.update_percpu(&0u32.to_ne_bytes(), &zero, libbpf_rs::MapFlags::ANY);
}

/// Packets counted by every session's URR 1 (the default PDRs') and URR 2 (the first
/// application's).
fn counted_by(dp: &Datapath, n: u32) -> (u64, u64) {
    (0..n).fold((0, 0), |(d, a), i| {
        let seid = u64::from(i) + 1;
        (
            d + dp.usage(seid, 1).total_packets(),
            a + dp.usage(seid, 2).total_packets(),
        )
    })
}

/// Two applications: "video" (a domain name and an `http://` URL) and "chat" (a domain
/// name and a flow description the benchmark's traffic does not match).
fn pfd_table() -> PfdTable {
    let mut video = AppPfds::default();
    video.add_domain("video.example", None).unwrap();
    video.add_url("http://media.example/v/").unwrap();
    let mut chat = AppPfds::default();
    chat.add_domain("chat.example", None).unwrap();
    chat.add_flow("permit out 17 from 203.0.113.0/24 to assigned")
        .unwrap();
    let mut t = PfdTable::new();
    t.set("video", video, true).unwrap();
    t.set("chat", chat, true).unwrap();
    t
}

/// Two application PDRs in each direction ahead of the session's default PDRs (1 up, 2
/// down, precedence 100): "video" (precedence 10) and "chat" (20), with the default
/// PDRs' FAR and QER and each application its own URR (2, 3). `below`: after the
/// default PDRs instead (precedence 210, 220; `UPF_COST_APPS=below`), to tell the cost of
/// classifying from that of the default PDR no longer being the rule set's first.
fn add_app_pdrs(s: &mut upf::rules::Session, urr: &pfcp::msg::CreateUrr, below: bool) {
    for (k, app) in ["video", "chat"].into_iter().enumerate() {
        let urr_id = 2 + k as u32;
        let mut rule = urr.clone();
        rule.urr_id = urr_id;
        s.urrs.insert(urr_id, upf::rules::Urr::new(&rule));
        for base in [1u16, 2] {
            let mut p = s.pdrs.get(&base).expect("default PDR").clone();
            p.id = 3 + 2 * k as u16 + (base - 1);
            p.precedence = 10 * (k as u32 + 1) + if below { 200 } else { 0 };
            p.pdi.sdf_filters.clear();
            p.pdi.application_id = Some(app.to_string());
            p.urr_ids = upf::rules::smallvec![urr_id];
            s.pdrs.insert(p.id, p);
        }
    }
}

/// A DNS answer from port 53 to `ue`: `name` has the A record `addr` (TTL 3600).
fn dns_answer(ue: std::net::Ipv4Addr, addr: std::net::Ipv4Addr, name: &str) -> Vec<u8> {
    let mut p = vec![0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0];
    for l in name.split('.') {
        p.push(l.len() as u8);
        p.extend_from_slice(l.as_bytes());
    }
    p.extend_from_slice(&[0, 0, 1, 0, 1]);
    p.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4]);
    p.extend_from_slice(&addr.octets());
    let mut f = vec![2, 0, 0, 0, 9, 9, 2, 0, 0, 0, 8, 8, 8, 0];
    f.extend(capture::ip_udp_packet(
        std::net::Ipv4Addr::new(192, 0, 2, 53).into(),
        ue.into(),
        53,
        40000,
        &p,
    ));
    f
}

/// Sum of `memlock` over this process's BPF map descriptors (each map once); with
/// UPF_COST_MAPS set, each map's figure is printed (the kernel's count of what it uses:
/// hash tables without preallocation count their entries, not their room).
fn bpf_memlock() -> u64 {
    let mut maps: std::collections::HashMap<u32, (String, u64)> = Default::default();
    for e in std::fs::read_dir("/proc/self/fdinfo")
        .into_iter()
        .flatten()
        .flatten()
    {
        let info = std::fs::read_to_string(e.path()).unwrap_or_default();
        if !info.lines().any(|l| l.starts_with("map_type:")) {
            continue;
        }
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let id = field("map_id:") as u32;
        let name = e
            .file_name()
            .to_str()
            .and_then(|f| f.parse::<i32>().ok())
            .map(map_name)
            .unwrap_or_default();
        maps.insert(id, (name, field("memlock:")));
    }
    if std::env::var_os("UPF_COST_MAPS").is_some() {
        let mut v: Vec<_> = maps.values().collect();
        v.sort_by_key(|(_, m)| std::cmp::Reverse(*m));
        for (name, m) in v.iter().filter(|(_, m)| *m >= 1 << 20) {
            eprintln!("  map {name}: {:.1} MiB", *m as f64 / f64::from(1u32 << 20));
        }
    }
    maps.values().map(|(_, m)| m).sum()
}

/// The name of the map behind descriptor `fd`.
fn map_name(fd: i32) -> String {
    let mut info = libbpf_rs::libbpf_sys::bpf_map_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a bpf_map_info of `len` octets; the kernel fills at most that.
    let r = unsafe { libbpf_rs::libbpf_sys::bpf_map_get_info_by_fd(fd, &mut info, &mut len) };
    if r != 0 {
        return String::new();
    }
    let n: Vec<u8> = info
        .name
        .iter()
        .take_while(|c| **c != 0)
        .map(|c| *c as u8)
        .collect();
    String::from_utf8_lossy(&n).into_owned()
}
