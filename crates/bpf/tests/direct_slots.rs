//! Sessions in direct slots (data path v2: bpf/include/session.h, crates/bpf/src/
//! datapath.rs; docs/architecture.md, "The data path's tables"). A session's record sits
//! in the slot its TEID maps to, which is also its UE address's when upfd aligns them
//! (TEID = index.teid(UE address mod ue_slots)). A modification rewrites the record in
//! place and takes effect at once, in the same slot; a removed session is unknown at
//! once; one reinstalled while its slot cools works from another slot, its keys in the
//! key tables, and stays there after the grace period. TEIDs outside the index, and a
//! UE address whose slot another session holds, live in the key tables, and every
//! session works; two sessions cannot share a TEID or a UE address wherever it lives. A
//! session's first QER and URR live in its record, a second URR in a cell, each counted
//! exactly, and a modification keeps their counts. Every step is checked by running
//! xdp_n3 or xdp_n6 on a frame (BPF_PROG_RUN); grace periods are stepped over with
//! injected times. Needs CAP_BPF (root).

mod common;

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    downlink_frame, neigh_config, root, session, set_teid, test_run, ue, uplink_frame, urr_template,
};
use upf::fastpath::{FastPath, FastPathError};
use upf::rules::*;
use upf_bpf::datapath::{Capacity, Datapath, Role, HOME_HANDLE, SLOT_GRACE};

const XDP_PASS: u32 = 2;
const XDP_REDIRECT: u32 = 4;
const DROP_UNKNOWN_TEID: usize = upf::abi::DROP_UNKNOWN_TEID as usize;
const DROP_FAR_DROP: usize = upf::abi::DROP_FAR_DROP as usize;
const DROP_GATE_CLOSED: usize = upf::abi::DROP_GATE_CLOSED as usize;
const STAT_PASSED: usize = upf::abi::STAT_PASSED_TO_KERNEL as usize;

const NOT_OURS: &str = "not a UE's";
const FORWARDED: &str = "forwarded";
const UNKNOWN: &str = "unknown TEID";
const DROPPED: &str = "dropped by its FAR";
const GATE_CLOSED: &str = "gate closed";

const FLOW: &str = "permit out ip from any to assigned";

/// What xdp_n3 did with an uplink frame of UE `i` on `teid`.
fn run(dp: &Datapath, teid: u32, i: u32) -> &'static str {
    run_prog(dp, Role::Gtpu, &uplink_frame(teid, ue(i)))
}

/// What xdp_n6 did with a downlink frame to `a`.
fn run_down(dp: &Datapath, a: Ipv4Addr) -> &'static str {
    run_prog(dp, Role::N6, &downlink_frame(a))
}

/// The frame's outcome, by the verdict and the one counter it moved.
fn run_prog(dp: &Datapath, role: Role, frame: &[u8]) -> &'static str {
    let before = dp.stats();
    let verdict = test_run(dp.prog_fd(role), frame);
    let after = dp.stats();
    let grew = |r: usize| after[r].0 > before[r].0;
    match verdict {
        XDP_REDIRECT => FORWARDED,
        _ if grew(DROP_UNKNOWN_TEID) => UNKNOWN,
        _ if grew(DROP_FAR_DROP) => DROPPED,
        _ if grew(DROP_GATE_CLOSED) => GATE_CLOSED,
        XDP_PASS if role == Role::N6 && grew(STAT_PASSED) => NOT_OURS,
        v => panic!("verdict {v}, stats {after:?}"),
    }
}

/// The benchmark's session `i` (uplink PDR 1 on `teid`, downlink PDR 2 on ue(i); FAR 1
/// uplink, FAR 2 downlink; QER 1 and URR 1 on both).
fn with_teid(i: u32, teid: u32) -> Session {
    let mut s = session(i, FLOW, &urr_template());
    set_teid(&mut s, teid);
    s
}

/// UE `i`'s slot, and the TEID upfd gives its session: the same slot's.
fn aligned_teid(dp: &Datapath, i: u32) -> (u32, u32) {
    let slot = u32::from(ue(i)) % dp.capacity().ue_slots;
    (slot, dp.teid_index().teid(slot))
}

/// The session with FAR `far` dropping instead of forwarding.
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

/// Just short of a grace period after `t`, on the clock the test injects (however long
/// the test itself took to get there).
fn within_grace(t: Instant) -> Instant {
    t + SLOT_GRACE - Duration::from_nanos(1)
}

/// Well past a grace period after `t`.
fn after_grace(t: Instant) -> Instant {
    t + SLOT_GRACE * 2
}

/// Another session (SEID 999) with session `i`'s rules on `teid`.
fn other(i: u32, teid: u32) -> Arc<Session> {
    let mut o = with_teid(i, teid);
    o.up_seid = 999;
    Arc::new(o)
}

/// Keys in the key tables: TEIDs, UE addresses.
fn in_tables(dp: &Datapath) -> [usize; 2] {
    dp.direct_keys().map(|k| k.1)
}

fn refused(dp: &mut Datapath, s: &Arc<Session>) -> bool {
    matches!(dp.install(None, s), Err(FastPathError::Pdr { .. }))
}

#[test]
fn direct_slots_follow_installs_changes_and_removals() {
    if !root() {
        return;
    }
    let mut dp = common::loaded(Capacity::for_sessions(1000), neigh_config());
    let index = dp.teid_index();
    let (slot, t) = aligned_teid(&dp, 1);
    assert_eq!(index.slot(t), Some(slot));

    // Installed: both keys in the record of their slot, forwarded both ways.
    let s = Arc::new(with_teid(1, t));
    dp.install(None, &s).unwrap();
    assert!(dp.uplink_in_slot(t) && dp.downlink_in_slot(ue(1)));
    assert_eq!(dp.direct_keys(), [(1, 0), (1, 0)]);
    assert_eq!(dp.urr_handle(s.up_seid, 1), Some(HOME_HANDLE | slot));
    assert_eq!(run(&dp, t, 1), FORWARDED);
    assert_eq!(run_down(&dp, ue(1)), FORWARDED);

    // Changed: rewritten in place, at once; it stays in its slot, before and after the
    // grace period.
    let d = Arc::new(drop_far(&s, 1));
    let changed = Instant::now();
    dp.install_at(Some(&s), &d, changed).unwrap();
    assert!(dp.uplink_in_slot(t));
    assert_eq!(dp.direct_keys()[0], (1, 0));
    assert_eq!(run(&dp, t, 1), DROPPED);
    assert_eq!(run_down(&dp, ue(1)), FORWARDED);
    dp.settle_at(after_grace(changed));
    assert!(dp.uplink_in_slot(t));
    assert_eq!(dp.direct_keys()[0], (1, 0));
    assert_eq!(run(&dp, t, 1), DROPPED);

    // Changes in a row (within one grace period): each at once, the last one counts.
    let changed = Instant::now();
    dp.install_at(Some(&d), &s, changed).unwrap();
    assert_eq!(run(&dp, t, 1), FORWARDED);
    dp.install_at(Some(&s), &d, changed).unwrap();
    assert_eq!(run(&dp, t, 1), DROPPED);
    dp.install_at(Some(&d), &s, changed).unwrap();
    assert_eq!(run(&dp, t, 1), FORWARDED);
    assert!(dp.uplink_in_slot(t));
    assert_eq!(dp.urr_handle(s.up_seid, 1), Some(HOME_HANDLE | slot));

    // Removed: unknown at once, both ways.
    let removed = Instant::now();
    dp.remove_at(&s, removed);
    assert_eq!(dp.direct_keys(), [(0, 0), (0, 0)]);
    assert_eq!(dp.session_by_teid(t), Some(None));
    assert_eq!(run(&dp, t, 1), UNKNOWN);
    assert_eq!(run_down(&dp, ue(1)), NOT_OURS);

    // Reinstalled while its slot cools: another slot, its keys in the key tables; it
    // works, and still works from there after the grace period (it does not move).
    dp.install_at(None, &s, within_grace(removed)).unwrap();
    assert!(!dp.uplink_in_slot(t), "the slot is still cooling");
    assert!(!dp.downlink_in_slot(ue(1)));
    let elsewhere = dp.urr_handle(s.up_seid, 1).expect("a home URR");
    assert!(elsewhere & HOME_HANDLE != 0 && elsewhere != HOME_HANDLE | slot);
    assert_eq!(in_tables(&dp), [1, 1], "the TEID and the UE address");
    assert_eq!(run(&dp, t, 1), FORWARDED);
    assert_eq!(run_down(&dp, ue(1)), FORWARDED);
    dp.settle_at(after_grace(removed));
    assert!(!dp.uplink_in_slot(t));
    assert_eq!(dp.urr_handle(s.up_seid, 1), Some(elsewhere));
    assert_eq!(run(&dp, t, 1), FORWARDED);
    assert_eq!(run_down(&dp, ue(1)), FORWARDED);

    // Removed from there: gone from the key tables too. Installed after the grace
    // period: back in its own slot.
    let removed = Instant::now();
    dp.remove_at(&s, removed);
    assert_eq!(dp.direct_keys(), [(0, 0), (0, 0)]);
    assert_eq!(run(&dp, t, 1), UNKNOWN);
    assert_eq!(run_down(&dp, ue(1)), NOT_OURS);
    dp.install_at(None, &s, after_grace(removed)).unwrap();
    assert!(dp.uplink_in_slot(t) && dp.downlink_in_slot(ue(1)));
    assert_eq!(dp.direct_keys(), [(1, 0), (1, 0)]);
    assert_eq!(run(&dp, t, 1), FORWARDED);

    // A TEID outside the index (the SMF chose it) lives in teid_keys; its session's
    // record sits in its UE address's slot. Just above or below the index's window.
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
    assert!(dp.downlink_in_slot(ue(2)));
    assert_eq!(in_tables(&dp), [1, 0]);
    assert_eq!(run(&dp, outside, 2), FORWARDED);
    assert_eq!(run_down(&dp, ue(2)), FORWARDED);
    let (_, t2) = aligned_teid(&dp, 2);
    assert_eq!(
        run(&dp, t2, 2),
        UNKNOWN,
        "its UE address's slot's TEID is no key"
    );

    // One TEID, two sessions: refused wherever the first one's TEID is (its slot, the
    // key table), and the first one keeps working.
    assert!(
        refused(&mut dp, &other(3, t)),
        "TEID {t:#x} in its slot shared"
    );
    assert!(
        refused(&mut dp, &other(3, outside)),
        "TEID {outside:#x} shared"
    );
    assert_eq!(run(&dp, t, 1), FORWARDED);
    assert_eq!(run(&dp, outside, 2), FORWARDED);
    assert_eq!(in_tables(&dp), [1, 0]);
}

#[test]
fn downlink_slots_by_ue_address() {
    if !root() {
        return;
    }
    let cap = Capacity::for_sessions(1000);
    let mut dp = common::loaded(cap, neigh_config());

    // A TEID the SMF chose (outside the index): the record in the UE address's slot.
    let s = Arc::new(with_teid(5, common::teid(5)));
    dp.install(None, &s).unwrap();
    assert!(dp.downlink_in_slot(ue(5)));
    assert_eq!(dp.direct_keys()[1], (1, 0));
    assert_eq!(in_tables(&dp), [1, 0], "the TEID in teid_keys");
    assert_eq!(run_down(&dp, ue(5)), FORWARDED);
    assert_eq!(run(&dp, common::teid(5), 5), FORWARDED);

    // Changed: at once, in the same slot.
    let d = Arc::new(drop_far(&s, 2));
    dp.install(Some(&s), &d).unwrap();
    assert!(dp.downlink_in_slot(ue(5)));
    assert_eq!(dp.direct_keys()[1], (1, 0));
    assert_eq!(run_down(&dp, ue(5)), DROPPED);
    assert_eq!(run(&dp, common::teid(5), 5), FORWARDED);

    // An address with the same slot: in ue_keys, and both work.
    let i2 = 5 + cap.ue_slots;
    assert_eq!(
        u32::from(ue(i2)) % cap.ue_slots,
        u32::from(ue(5)) % cap.ue_slots
    );
    let s2 = Arc::new(with_teid(i2, common::teid(i2)));
    dp.install(None, &s2).unwrap();
    assert!(!dp.downlink_in_slot(ue(i2)));
    assert!(dp.downlink_in_slot(ue(5)));
    assert_eq!(in_tables(&dp), [2, 1], "both TEIDs, s2's UE address");
    assert_eq!(run_down(&dp, ue(i2)), FORWARDED);
    assert_eq!(run(&dp, common::teid(i2), i2), FORWARDED);
    assert_eq!(run_down(&dp, ue(5)), DROPPED);

    // One address, two sessions: refused wherever the first one's address is (its
    // slot, ue_keys); both keep working.
    assert!(
        refused(&mut dp, &other(5, common::teid(6))),
        "UE address in its slot"
    );
    assert!(
        refused(&mut dp, &other(i2, common::teid(7))),
        "UE address in ue_keys"
    );
    assert_eq!(run_down(&dp, ue(5)), DROPPED);
    assert_eq!(run_down(&dp, ue(i2)), FORWARDED);

    // Removed: the address is no UE's at once; the other one still works.
    dp.remove(&d);
    assert_eq!(run_down(&dp, ue(5)), NOT_OURS);
    assert_eq!(run(&dp, common::teid(5), 5), UNKNOWN);
    assert_eq!(run_down(&dp, ue(i2)), FORWARDED);
    dp.remove(&s2);
    assert_eq!(run_down(&dp, ue(i2)), NOT_OURS);
    assert_eq!(dp.direct_keys(), [(0, 0), (0, 0)]);
}

/// The record of `slot` as the data path reads it (its page in sess_pages).
fn record(dp: &Datapath, slot: u32) -> upf_bpf::upf::types::sess_rec {
    use libbpf_rs::MapCore;
    let l = dp.layout();
    let page = slot / l.per_page;
    let at = ((slot % l.per_page) * l.entry_size) as usize;
    let v = dp
        .map_named("sess_pages")
        .expect("sess_pages")
        .lookup(&page.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
        .expect("lookup")
        .expect("a page");
    let b = &v[at..at + std::mem::size_of::<upf_bpf::upf::types::sess_rec>()];
    // SAFETY: sess_rec is plain data of that many octets (any bit pattern is valid).
    unsafe { std::ptr::read_unaligned(b.as_ptr().cast()) }
}

/// Session `s` with QER 1's uplink gate closed (`open` false) or open.
fn uplink_gate(s: &Session, open: bool) -> Session {
    let mut m = s.clone();
    if let Some(q) = m.qers.get_mut(&1) {
        q.gate_ul_open = open;
    }
    m
}

/// Session `s` with a second URR (2) on its uplink PDR.
fn with_second_urr(s: &Session) -> Session {
    let mut m = s.clone();
    let mut rule = urr_template();
    rule.urr_id = 2;
    m.urrs.insert(2, Urr::new(&rule));
    if let Some(p) = m.pdrs.get_mut(&1) {
        p.urr_ids.push(2);
    }
    m
}

/// A URR's (uplink, downlink) packets and octets.
fn counts(dp: &Datapath, seid: u64, urr: u32) -> [u64; 4] {
    let u = dp.usage(seid, urr);
    [u.ul_packets, u.dl_packets, u.ul_bytes, u.dl_bytes]
}

#[test]
fn a_sessions_first_qer_and_urr_live_in_its_record() {
    if !root() {
        return;
    }
    let cap = Capacity::for_sessions(1000);
    let mut dp = common::loaded(cap, neigh_config());
    let (slot, teid) = aligned_teid(&dp, 7);

    // Its QER's parameters and URR's arming are in the record, its URR's counts in its
    // entry's lanes.
    let s = Arc::new(with_teid(7, teid));
    dp.install(None, &s).unwrap();
    let r = record(&dp, slot);
    assert_eq!((r.seid, r.teid), (s.up_seid, teid));
    let home = upf::abi::HOME_QER | upf::abi::HOME_URR | upf::abi::HOME_LANES_USED;
    assert_eq!(
        (u32::from(r.home.home), r.home.qer_id, r.home.urr_id),
        (home, 1, 1)
    );
    assert_eq!(r.home.gate, [1, 1]);
    assert_eq!(
        r.home.cost[0],
        upf_bpf::compile::qer_gcra(100_000_000).0,
        "the template's 100 Gbit/s"
    );
    assert_eq!(dp.urr_handle(s.up_seid, 1), Some(HOME_HANDLE | slot));
    assert_eq!(run(&dp, teid, 7), FORWARDED);
    assert_eq!(run(&dp, teid, 7), FORWARDED);
    assert_eq!(run_down(&dp, ue(7)), FORWARDED);
    let c = counts(&dp, s.up_seid, 1);
    assert_eq!(c[..2], [2, 1], "{c:?}");
    let (up_octets, down_octets) = (c[2] / 2, c[3]);
    assert!(up_octets > 0 && down_octets > 0, "{c:?}");

    // The home QER rewritten in place: its gate closes and opens at once.
    let closed = Arc::new(uplink_gate(&s, false));
    dp.install(Some(&s), &closed).unwrap();
    assert_eq!(record(&dp, slot).home.gate, [0, 1]);
    assert_eq!(run(&dp, teid, 7), GATE_CLOSED);
    assert_eq!(run_down(&dp, ue(7)), FORWARDED);
    dp.install(Some(&closed), &s).unwrap();
    assert_eq!(run(&dp, teid, 7), FORWARDED);
    // Gated packets are not counted.
    let c = counts(&dp, s.up_seid, 1);
    assert_eq!(c, [3, 2, 3 * up_octets, 2 * down_octets], "{c:?}");

    // A second URR on the uplink PDR: in a cell, counted exactly from then on; the
    // first one's counts go on in the record's lanes.
    let two = Arc::new(with_second_urr(&s));
    dp.install(Some(&s), &two).unwrap();
    assert_eq!(dp.urr_handle(s.up_seid, 1), Some(HOME_HANDLE | slot));
    let cell = dp.urr_handle(s.up_seid, 2).expect("URR 2 installed");
    assert_eq!(cell & HOME_HANDLE, 0, "URR 2 in a cell: {cell:#x}");
    for _ in 0..3 {
        assert_eq!(run(&dp, teid, 7), FORWARDED);
    }
    assert_eq!(run_down(&dp, ue(7)), FORWARDED);
    assert_eq!(
        counts(&dp, s.up_seid, 1),
        [6, 3, 6 * up_octets, 3 * down_octets]
    );
    assert_eq!(counts(&dp, s.up_seid, 2), [3, 0, 3 * up_octets, 0]);

    // A modification keeps both where they are, with their counts.
    let m = Arc::new(drop_far(&two, 2));
    dp.install(Some(&two), &m).unwrap();
    assert_eq!(dp.urr_handle(s.up_seid, 1), Some(HOME_HANDLE | slot));
    assert_eq!(dp.urr_handle(s.up_seid, 2), Some(cell));
    assert_eq!(
        counts(&dp, s.up_seid, 1),
        [6, 3, 6 * up_octets, 3 * down_octets]
    );
    assert_eq!(counts(&dp, s.up_seid, 2), [3, 0, 3 * up_octets, 0]);
    assert_eq!(run(&dp, teid, 7), FORWARDED);
    assert_eq!(run_down(&dp, ue(7)), DROPPED);
    assert_eq!(counts(&dp, s.up_seid, 1)[..2], [7, 3]);
    assert_eq!(counts(&dp, s.up_seid, 2)[..2], [4, 0]);

    // A session whose UE address's slot is taken (downlink only): its record, with its
    // home URR, in another slot, counted exactly there and not in the first one's.
    let i2 = 7 + cap.ue_slots;
    let mut d = with_teid(i2, 0);
    d.pdrs.remove(&1);
    d.fars.remove(&1);
    let d = Arc::new(d);
    dp.install(None, &d).unwrap();
    let h = dp.urr_handle(d.up_seid, 1).expect("its URR");
    assert!(h & HOME_HANDLE != 0 && h != HOME_HANDLE | slot, "{h:#x}");
    assert_eq!(run_down(&dp, ue(i2)), FORWARDED);
    assert_eq!(run_down(&dp, ue(i2)), FORWARDED);
    assert_eq!(counts(&dp, d.up_seid, 1), [0, 2, 0, 2 * down_octets]);
    assert_eq!(counts(&dp, s.up_seid, 1)[..2], [7, 3]);
    assert_eq!(counts(&dp, s.up_seid, 2)[..2], [4, 0]);
}

/// Sessions as upfd gives them TEIDs (each its UE address's slot) all sit in their slots,
/// slot 0 included, with nothing in the key tables; a session whose slot is taken (a
/// UE address one `ue_slots` further) goes elsewhere without taking the next addresses'
/// slots. (Slot 0 was once never handed out: its session took the next slot, whose
/// session took the next, and a third of them ended in the key tables.)
#[test]
fn sessions_as_upfd_places_them_sit_in_their_slots() {
    if !root() {
        return;
    }
    let cap = Capacity::for_sessions(1000);
    let mut dp = common::loaded(cap, neigh_config());
    // The UE addresses of a pool, in order, from one that maps to slot 0.
    let first = (0..cap.ue_slots)
        .find(|i| u32::from(ue(*i)) % cap.ue_slots == 0)
        .expect("an address of slot 0");
    let n = 1000.min(cap.ue_slots);
    for i in first..first + n {
        let (_, teid) = aligned_teid(&dp, i);
        dp.install(None, &Arc::new(with_teid(i, teid))).unwrap();
    }
    assert_eq!(
        dp.direct_keys(),
        [(n as usize, 0), (n as usize, 0)],
        "every key in its slot"
    );
    // Colliding downlink-only sessions go elsewhere: the rest stay where they are.
    for i in first..first + 10 {
        let mut d = with_teid(i + cap.ue_slots, 0);
        d.pdrs.remove(&1);
        d.fars.remove(&1);
        dp.install(None, &Arc::new(d)).unwrap();
    }
    assert_eq!(dp.direct_keys(), [(n as usize, 0), (n as usize, 10)]);
    assert_eq!(run_down(&dp, ue(first)), FORWARDED);
    assert_eq!(run_down(&dp, ue(first + cap.ue_slots)), FORWARDED);
}
