//! Rule sets in direct slots (bpf/include/direct.h, crates/bpf/src/direct.rs). Uplink: a
//! TEID of the index is found in its slot; changed rules take effect at once through the
//! hash table and return to the slot after the grace period; a removed TEID is unknown
//! at once, and one reinstalled at once works; TEIDs outside the index use the hash
//! table; two sessions cannot share a TEID wherever it lives. Downlink: the same for UE
//! addresses, and two addresses with the same slot both work. A session's QER and URR
//! sit at its slot + 1 when that is free, elsewhere when not. Every step is checked by
//! running xdp_n3 or xdp_n6 on a frame (BPF_PROG_RUN). Needs CAP_BPF (root).

mod common;

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    downlink_frame, neigh_config, root, session, set_teid, ue, uplink_frame, urr_template,
};
use upf::fastpath::{FastPath, FastPathError};
use upf::rules::*;
use upf_bpf::datapath::{Capacity, Datapath, SLOT_GRACE};

const XDP_REDIRECT: u32 = 4;
/// bpf/include/upf_maps.h enum drop_reason.
const DROP_UNKNOWN_TEID: usize = upf::abi::DROP_UNKNOWN_TEID as usize;
const DROP_FAR_DROP: usize = upf::abi::DROP_FAR_DROP as usize;

const XDP_PASS: u32 = 2;
/// enum stat_index: left to the kernel.
const STAT_PASSED: usize = upf::abi::STAT_PASSED_TO_KERNEL as usize;

const NOT_OURS: &str = "not a UE's";
const FORWARDED: &str = "forwarded";
const UNKNOWN: &str = "unknown TEID";
const DROPPED: &str = "dropped by its FAR";

/// What xdp_n3 did with an uplink frame of UE `i` on `teid`.
fn run(dp: &Datapath, teid: u32, i: u32) -> &'static str {
    run_prog(dp, true, &uplink_frame(teid, ue(i)))
}

/// What xdp_n6 did with a downlink frame to `a`.
fn run_down(dp: &Datapath, a: Ipv4Addr) -> &'static str {
    run_prog(dp, false, &downlink_frame(a))
}

fn run_prog(dp: &Datapath, uplink: bool, frame: &[u8]) -> &'static str {
    let before = dp.stats();
    let mut out = vec![0u8; 4096];
    let input = libbpf_rs::ProgramInput {
        data_in: Some(frame),
        data_out: Some(&mut out),
        repeat: 1,
        ..Default::default()
    };
    let progs = &dp.skel().progs;
    let prog = if uplink { &progs.xdp_n3 } else { &progs.xdp_n6 };
    let verdict = prog.test_run(input).expect("BPF_PROG_RUN").return_value;
    let after = dp.stats();
    let grew = |r: usize| after[r].0 > before[r].0;
    match verdict {
        XDP_REDIRECT => FORWARDED,
        _ if grew(DROP_UNKNOWN_TEID) => UNKNOWN,
        _ if grew(DROP_FAR_DROP) => DROPPED,
        XDP_PASS if !uplink && grew(STAT_PASSED) => NOT_OURS,
        v => panic!("verdict {v}, stats {after:?}"),
    }
}

fn with_teid(i: u32, teid: u32) -> Session {
    let mut s = session(i, "permit out ip from any to assigned", &urr_template());
    set_teid(&mut s, teid);
    s
}

/// The session with its uplink FAR dropping instead of forwarding.
fn dropping(s: &Session) -> Session {
    drop_far(s, 1)
}

fn drop_far(s: &Session, far: u32) -> Session {
    let mut m = s.clone();
    if let Some(f) = m.fars.get_mut(&far) {
        f.action = ApplyAction {
            drop: true,
            ..Default::default()
        };
    }
    m
}

/// Past the data path's grace period (50 ms), then let it settle. (The sleep only
/// lengthens on a busy machine, which cannot make the slot come back later.)
fn after_grace(dp: &mut Datapath) {
    std::thread::sleep(SLOT_GRACE + Duration::from_millis(10));
    dp.settle();
}

/// Just short of a grace period after `t`: what the data path does at that moment, on
/// the clock the tests inject (however long the test itself took to get there).
fn within_grace(t: Instant) -> Instant {
    t + SLOT_GRACE - Duration::from_nanos(1)
}

#[test]
fn direct_slots_follow_installs_changes_and_removals() {
    if !root() {
        return;
    }
    let cfg = neigh_config();
    let mut dp = common::loaded(Capacity::for_sessions(1000), cfg);
    let index = dp.teid_index();
    let t = index.teid(17);
    assert_eq!(index.slot(t), Some(17));

    // Installed: in the slot, forwarded.
    let s = Arc::new(with_teid(1, t));
    dp.install(None, &s).unwrap();
    assert!(dp.uplink_in_slot(t));
    assert_eq!(run(&dp, t, 1), FORWARDED);

    // Changed: the new rules at once, from the hash table; back in the slot later.
    let d = Arc::new(dropping(&s));
    let changed = Instant::now();
    dp.install_at(Some(&s), &d, changed).unwrap();
    assert!(!dp.uplink_in_slot(t));
    assert_eq!(dp.direct_keys()[0], (0, 1, 1));
    assert_eq!(run(&dp, t, 1), DROPPED);
    dp.settle_at(within_grace(changed));
    assert!(!dp.uplink_in_slot(t), "not before the grace period");
    after_grace(&mut dp);
    assert!(dp.uplink_in_slot(t));
    assert_eq!(dp.direct_keys()[0], (1, 0, 0));
    assert_eq!(run(&dp, t, 1), DROPPED, "the slot holds the new rules");

    // Two changes within the grace period: the last one counts.
    let changed = Instant::now();
    dp.install_at(Some(&d), &s, changed).unwrap();
    dp.install_at(Some(&s), &d, changed).unwrap();
    dp.install_at(Some(&d), &s, changed).unwrap();
    assert_eq!(run(&dp, t, 1), FORWARDED);
    after_grace(&mut dp);
    assert!(dp.uplink_in_slot(t));
    assert_eq!(run(&dp, t, 1), FORWARDED);

    // Removed: unknown at once; reinstalled at once: it works from
    // the hash table, then from the slot.
    let removed = Instant::now();
    dp.remove_at(&s, removed);
    assert_eq!(dp.direct_keys()[0], (0, 0, 0));
    assert_eq!(run(&dp, t, 1), UNKNOWN);
    dp.install_at(None, &s, within_grace(removed)).unwrap();
    assert!(!dp.uplink_in_slot(t), "the slot is still cooling");
    assert_eq!(run(&dp, t, 1), FORWARDED);
    after_grace(&mut dp);
    assert!(dp.uplink_in_slot(t));
    assert_eq!(run(&dp, t, 1), FORWARDED);

    // Removed while waiting in the hash table: gone from both.
    let d = Arc::new(dropping(&s));
    dp.install(Some(&s), &d).unwrap();
    dp.remove(&d);
    after_grace(&mut dp);
    assert_eq!(dp.direct_keys()[0], (0, 0, 0));
    assert_eq!(run(&dp, t, 1), UNKNOWN);

    // A TEID with no slot (the SMF chose it) lives in the hash table.
    // Just below or just above the index's window (a search from 1 takes a minute).
    let w = index.params();
    let outside = if w.lo > 1 {
        w.lo - 1
    } else {
        w.lo + w.mask + 1
    };
    assert_eq!(index.slot(outside), None);
    let o = Arc::new(with_teid(2, outside));
    dp.install(None, &o).unwrap();
    assert!(!dp.uplink_in_slot(outside));
    assert_eq!(run(&dp, outside, 2), FORWARDED);
    assert_eq!(run(&dp, t, 1), UNKNOWN, "the neighbouring slot stays empty");

    // One TEID, two sessions: refused wherever the first one's rules are.
    let s3 = Arc::new(with_teid(3, index.teid(18)));
    dp.install(None, &s3).unwrap();
    for teid in [index.teid(18), outside] {
        let mut other = with_teid(4, teid);
        other.up_seid = 999;
        match dp.install(None, &Arc::new(other)) {
            Err(FastPathError::Pdr { .. }) => {}
            r => panic!("TEID {teid:#x} shared: {r:?}"),
        }
    }
    assert_eq!(run(&dp, index.teid(18), 3), FORWARDED);
}

#[test]
fn downlink_slots_by_ue_address() {
    if !root() {
        return;
    }
    let cfg = neigh_config();
    let cap = Capacity::for_sessions(1000);
    let mut dp = common::loaded(cap, cfg);

    let s = Arc::new(with_teid(5, common::teid(5)));
    dp.install(None, &s).unwrap();
    assert!(dp.downlink_in_slot(ue(5)));
    assert_eq!(run_down(&dp, ue(5)), FORWARDED);

    // Changed: at once, then back in the slot.
    let d = Arc::new(drop_far(&s, 2));
    dp.install(Some(&s), &d).unwrap();
    assert!(!dp.downlink_in_slot(ue(5)));
    assert_eq!(run_down(&dp, ue(5)), DROPPED);
    after_grace(&mut dp);
    assert!(dp.downlink_in_slot(ue(5)));
    assert_eq!(dp.direct_keys()[1], (1, 0, 0));
    assert_eq!(run_down(&dp, ue(5)), DROPPED);

    // An address with the same slot: in the hash table, and both work.
    let i2 = 5 + cap.ue_slots;
    let s2 = Arc::new(with_teid(i2, common::teid(i2)));
    dp.install(None, &s2).unwrap();
    assert!(!dp.downlink_in_slot(ue(i2)));
    assert_eq!(run_down(&dp, ue(i2)), FORWARDED);
    assert_eq!(run_down(&dp, ue(5)), DROPPED);

    // Removed: the address is no UE's at once; the other one still works.
    dp.remove(&d);
    assert_eq!(run_down(&dp, ue(5)), NOT_OURS);
    assert_eq!(run_down(&dp, ue(i2)), FORWARDED);
    dp.remove(&s2);
    assert_eq!(run_down(&dp, ue(i2)), NOT_OURS);
    assert_eq!(dp.direct_keys()[1], (0, 0, 0));

    // One address, two sessions: refused.
    dp.install(None, &s).unwrap();
    let mut other = with_teid(5, common::teid(6));
    other.up_seid = 999;
    match dp.install(None, &Arc::new(other)) {
        Err(FastPathError::Pdr { .. }) => {}
        r => panic!("UE address shared: {r:?}"),
    }
}

/// Packets counted in the URR cells at `idx` (bpf/include/upf_maps.h `urr_state`: the
/// shared cell, then one `struct urr_counters` per CPU), both directions.
fn packets_in_urr_cells(dp: &Datapath, idx: u32) -> u64 {
    use libbpf_rs::MapCore;
    let stride = dp.ncpus() as u32 + 1;
    (0..dp.ncpus() as u32)
        .map(|cpu| {
            let k = idx * stride + 1 + cpu;
            let v = dp
                .skel()
                .maps
                .urr_state
                .lookup(&k.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
                .unwrap()
                .unwrap();
            let word = |i: usize| u64::from_ne_bytes(v[i * 8..i * 8 + 8].try_into().unwrap());
            word(0) + word(2) // ul_packets, dl_packets
        })
        .sum()
}

#[test]
fn a_sessions_qer_and_urr_sit_at_its_slot_when_free() {
    if !root() {
        return;
    }
    use libbpf_rs::MapCore;
    let cfg = neigh_config();
    let cap = Capacity::for_sessions(1000);
    let mut dp = common::loaded(cap, cfg);
    let index = dp.teid_index();

    // As upfd allocates: the TEID of the UE address's slot. Its QER and URR go to
    // slot + 1, where the data path loads them while it loads the slot.
    let slot = u32::from(ue(7)) % cap.ue_slots;
    let teid = index.teid(slot);
    let s = Arc::new(with_teid(7, teid));
    dp.install(None, &s).unwrap();
    assert_eq!(run(&dp, teid, 7), FORWARDED);
    assert_eq!(run_down(&dp, ue(7)), FORWARDED);
    let home = slot + 1;
    let q = dp
        .skel()
        .maps
        .qers
        .lookup(&home.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
        .unwrap()
        .unwrap();
    // struct qer: gate_ul at 0; cost_ul at 8, for 100 Gbit/s in the template.
    assert_eq!(q[0], 1, "gate_ul of the session's QER");
    assert_eq!(
        u64::from_ne_bytes(q[8..16].try_into().unwrap()),
        upf_bpf::compile::qer_gcra(100_000_000).0
    );
    assert_eq!(packets_in_urr_cells(&dp, home), 2);
    // A modification keeps them there (with their state).
    let m = Arc::new(drop_far(&s, 2));
    dp.install(Some(&s), &m).unwrap();
    assert_eq!(run(&dp, teid, 7), FORWARDED);
    assert_eq!(packets_in_urr_cells(&dp, home), 3);

    // A session whose home is taken (downlink only, its UE address in the same slot)
    // gets cells elsewhere, and is counted exactly there.
    let i2 = 7 + cap.ue_slots;
    let mut d = with_teid(i2, 0);
    d.pdrs.remove(&1);
    d.fars.remove(&1);
    let d = Arc::new(d);
    dp.install(None, &d).unwrap();
    assert_eq!(run_down(&dp, ue(i2)), FORWARDED);
    assert_eq!(run_down(&dp, ue(i2)), FORWARDED);
    assert_eq!(
        packets_in_urr_cells(&dp, home),
        3,
        "not in the first session's cells"
    );
    assert_eq!(dp.usage(d.up_seid, 1).dl_packets, 2);
    assert_eq!(dp.usage(s.up_seid, 1).ul_packets, 2);
    assert_eq!(dp.usage(s.up_seid, 1).dl_packets, 1);
}
