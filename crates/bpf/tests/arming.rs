//! Arming a URR is not a rule change. upfd re-arms a volume threshold after each report
//! and sets a quota when the SMF grants one, under traffic; a packet must never be
//! dropped for it. Only a change of the session's rules takes the record's sequence
//! lock (a packet that meets it at every read is dropped as `rules_changing`, and one
//! that meets a writer preempted in the middle always does): a URR's flags and epochs are
//! single stores beside it (bpf/include/upf_maps.h, `struct sess_rec`). Here one thread
//! arms and disarms the session's quota and threshold as fast as it can while this one
//! sends G-PDUs through xdp_n3: every packet is forwarded, none counted as
//! `rules_changing`. Needs CAP_BPF (root).

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use common::{neigh_config, root, session, set_teid, test_run, uplink_frame, urr_template};
use upf::fastpath::FastPath;
use upf_bpf::datapath::{Capacity, Datapath};

const XDP_REDIRECT: u32 = 4;
const RULES_CHANGING: usize = upf::abi::DROP_RULES_CHANGING as usize;

#[test]
fn arming_a_urr_under_traffic_drops_nothing() {
    if !root() {
        return;
    }
    let mut dp = common::loaded(Capacity::for_sessions(100), neigh_config());
    let mut s = session(1, "permit out ip from any to assigned", &urr_template());
    // No MBR: every packet the rules admit is forwarded.
    s.qers.get_mut(&1).unwrap().mbr = None;
    let teid = common::teid(1);
    set_teid(&mut s, teid);
    let seid = s.up_seid;
    let s = Arc::new(s);
    dp.install(None, &s).unwrap();
    let dp: &Datapath = &dp;
    let frame = uplink_frame(teid, common::ue(1));
    let before = dp.stats();

    let stop = AtomicBool::new(false);
    let armed = AtomicU64::new(0);
    let packets = 20_000;
    let forwarded = std::thread::scope(|sc| {
        sc.spawn(|| {
            // Bounded: at most 10 million changes, or until the packets are sent.
            let mut i: i64 = 0;
            while !stop.load(Ordering::Relaxed) && i < 10_000_000 {
                let on = i % 4 != 3;
                dp.write_threshold(seid, 1, on.then_some((1 << 40) + i))
                    .unwrap();
                dp.write_quota(seid, 1, on.then_some(1 << 50)).unwrap();
                armed.fetch_add(1, Ordering::Relaxed);
                i += 1;
            }
        });
        // The arming thread runs first, so that the packets meet it.
        while armed.load(Ordering::Relaxed) < 100 {
            std::thread::yield_now();
        }
        let fd = {
            use std::os::fd::AsFd;
            dp.skel().progs.xdp_n3.as_fd()
        };
        let n = (0..packets)
            .filter(|_| test_run(fd, &frame) == XDP_REDIRECT)
            .count();
        stop.store(true, Ordering::Relaxed);
        n
    });
    let after = dp.stats();
    let changing = after[RULES_CHANGING].0 - before[RULES_CHANGING].0;
    // Any other drop, by reason (upf::abi::drop_reason).
    let others: Vec<(usize, u64)> = (0..upf::abi::DROP_MAX as usize)
        .filter(|&r| r != RULES_CHANGING && after[r].0 != before[r].0)
        .map(|r| (r, after[r].0 - before[r].0))
        .collect();
    let armed = armed.load(Ordering::Relaxed);
    eprintln!("{packets} packets during {armed} arming changes");
    assert_eq!(
        (forwarded, changing, others),
        (packets, 0, vec![]),
        "(forwarded, dropped as rules_changing, other drops by reason) of {packets} packets, \
         {armed} changes"
    );
}
