//! The data path's rate limits, GCRAs updated with atomic instructions (bpf/include/qer.h):
//! a QER's MBR (an idle session's burst passes, then the rate and nothing more, each
//! direction on its own, and the allowance comes back with time), every QER of a PDR
//! (gates and MBRs of all four), and the slow path's
//! limit on unknown-TEID packets handed to upfd. Frames go through xdp_n6 / xdp_n3 with
//! BPF_PROG_RUN. Needs CAP_BPF (root).

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{
    downlink_frame, neigh_config, root, session, set_teid, ue, uplink_frame, urr_template,
};
use pfcp::ie::Bitrate;
use upf::fastpath::FastPath;
use upf_bpf::datapath::{Capacity, Datapath};

const XDP_REDIRECT: u32 = 4;
/// bpf/include/upf_maps.h enum drop_reason.
const DROP_MBR: usize = upf::abi::DROP_MBR_EXCEEDED as usize;

/// How many of `n` copies of `frame` the program forwarded; the rest must be MBR drops.
fn forwarded(dp: &Datapath, uplink: bool, frame: &[u8], n: usize) -> usize {
    forwarded_or(dp, uplink, frame, n, DROP_MBR)
}

#[test]
fn mbr_passes_the_burst_then_the_rate_per_direction() {
    if !root() {
        return;
    }
    let cfg = neigh_config();
    let mut dp = common::loaded(Capacity::for_sessions(100), cfg);
    let mut s = session(1, "permit out ip from any to assigned", &urr_template());
    // 8 kbit/s: 1,000 octets/s, and the smallest burst, 3,000 octets.
    s.qers.get_mut(&1).unwrap().mbr = Some(Bitrate {
        ul_kbps: 8,
        dl_kbps: 8,
    });
    let teid = common::teid(1);
    set_teid(&mut s, teid);
    dp.install(None, &Arc::new(s)).unwrap();

    let down = downlink_frame(ue(1));
    let len = down.len() - 14; // the inner IP packet is what the MBR counts
                               // The burst: tat may run up to 3,000 octets' worth ahead, checked before the add.
    let burst = 3000 / len + 1;
    assert_eq!(forwarded(&dp, false, &down, burst + 20), burst);
    assert_eq!(forwarded(&dp, false, &down, 5), 0, "the rate is used up");
    // Uplink has its own allowance.
    let up = uplink_frame(teid, ue(1));
    assert_eq!(forwarded(&dp, true, &up, burst + 20), burst);
    // A second later, about a second's worth more (the coarse clock ticks every few ms).
    std::thread::sleep(Duration::from_millis(1100));
    let more = forwarded(&dp, false, &down, 100);
    let want = 1100 / len;
    assert!(more + 2 >= want && more <= want + 2, "{more} vs ~{want}");
}

/// Four QERs on each PDR, as a vendor SMF sends for IMS bearers (a flow MBR, the session
/// AMBR, a gate, and one for the QFI): every gate holds and every MBR counts, the last
/// QER's as much as the first's.
#[test]
fn every_qer_of_a_pdr_is_enforced() {
    if !root() {
        return;
    }
    let cfg = neigh_config();
    let mut dp = common::loaded(Capacity::for_sessions(100), cfg);
    let mut s = session(1, "permit out ip from any to assigned", &urr_template());
    let high = Bitrate {
        ul_kbps: 100_000_000,
        dl_kbps: 100_000_000,
    };
    let q1 = s.qers.get(&1).unwrap().clone();
    for id in 2..=4 {
        let mut q = q1.clone();
        q.id = id;
        q.qfi = None;
        q.mbr = Some(high);
        s.qers.insert(id, q);
    }
    // QER 3: the gate, closed uplink. QER 4 (the last): 8 kbit/s downlink.
    s.qers.get_mut(&3).unwrap().gate_ul_open = false;
    s.qers.get_mut(&4).unwrap().mbr = Some(Bitrate {
        ul_kbps: 100_000_000,
        dl_kbps: 8,
    });
    for p in s.pdrs.values_mut() {
        p.qer_ids = vec![1, 2, 3, 4].into();
    }
    let teid = common::teid(1);
    set_teid(&mut s, teid);
    dp.install(None, &Arc::new(s)).unwrap();

    let gate = upf::abi::DROP_GATE_CLOSED as usize;
    let closed_before = dp.stats()[gate].0;
    let up = uplink_frame(teid, ue(1));
    assert_eq!(forwarded_or(&dp, true, &up, 10, gate), 0);
    assert_eq!(
        dp.stats()[gate].0 - closed_before,
        10,
        "the third QER's gate"
    );
    let down = downlink_frame(ue(1));
    let burst = 3000 / (down.len() - 14) + 1;
    assert_eq!(
        forwarded(&dp, false, &down, burst + 20),
        burst,
        "the fourth QER's MBR"
    );
}

/// A packet a later QER's MBR drops uses no earlier QER's rate: QER 1 (400 kbit/s, a
/// 5,000-octet burst) and QER 2 (8 kbit/s, 3,000) on one PDR; once QER 2 has refused
/// 100 packets and is taken off, QER 1 still has the 2,000 octets of burst it did not
/// give.
/// The data path and the reference model alike.
#[test]
fn a_packet_one_qer_drops_costs_the_others_nothing() {
    if !root() {
        return;
    }
    let cfg = neigh_config();
    let mut dp = common::loaded(Capacity::for_sessions(100), cfg.clone());
    let mut model = upf::model::Model::new(1024, cfg);
    // Session `i`: QER 1 400 kbit/s downlink, QER 2 8 kbit/s, both on every PDR; and the
    // same with QER 2 taken off (an updated QER keeps its arrival times).
    let sessions = |i: u32| {
        let mut s = session(i, "permit out ip from any to assigned", &urr_template());
        let q1 = s.qers.get(&1).unwrap().clone();
        s.qers.get_mut(&1).unwrap().mbr = Some(Bitrate {
            ul_kbps: 100_000_000,
            dl_kbps: 400,
        });
        let mut q2 = q1.clone();
        q2.id = 2;
        q2.qfi = None;
        q2.mbr = Some(Bitrate {
            ul_kbps: 100_000_000,
            dl_kbps: 8,
        });
        s.qers.insert(2, q2);
        for p in s.pdrs.values_mut() {
            p.qer_ids = vec![1, 2].into();
        }
        set_teid(&mut s, common::teid(i));
        let mut off = s.clone();
        for p in off.pdrs.values_mut() {
            p.qer_ids = vec![1].into();
        }
        (Arc::new(s), Arc::new(off))
    };
    let len = downlink_frame(ue(1)).len() - 14;
    let burst2 = 3000 / len + 1;
    let left = (5000 - burst2 * len) / len + 1;

    // The model: time stands still.
    let (s, off) = sessions(1);
    model.install(None, &s).unwrap();
    let down = downlink_frame(ue(1));
    let now = 5_000_000_000_000;
    let through_model = |m: &mut upf::model::Model, n: usize| {
        (0..n)
            .filter(|_| {
                matches!(
                    m.process_n6(&down, now),
                    upf::model::Verdict::Redirect { .. }
                )
            })
            .count()
    };
    assert_eq!(through_model(&mut model, burst2 + 100), burst2);
    model.install(Some(&s), &off).unwrap();
    assert_eq!(through_model(&mut model, 200), left);

    // The data path: its clock runs, and QER 1 earns 50 octets a millisecond back. The
    // test tells a refund from none while that is less than `left` packets' worth; on a
    // machine so busy that it never is (five sessions tried), only the lower bound holds.
    for i in 1..=5 {
        let (s, off) = sessions(i);
        let down = downlink_frame(ue(i));
        dp.install(None, &s).unwrap();
        assert_eq!(forwarded(&dp, false, &down, burst2 + 100), burst2);
        let t = std::time::Instant::now();
        dp.install(Some(&s), &off).unwrap();
        let more = forwarded(&dp, false, &down, 200);
        let earned = (t.elapsed().as_secs_f64() * 50_000.0 / len as f64).ceil() as usize + 2;
        assert!(
            more >= left,
            "{more} < {left}: QER 1 was charged for packets QER 2 dropped"
        );
        assert!(more <= left + earned, "{more} > {left} + {earned}");
        if earned < left {
            return;
        }
    }
    eprintln!("the machine was too busy to tell a refund from the time it takes");
}

/// How many of `n` copies of `frame` the program forwarded; the rest must be drops for
/// `reason`.
fn forwarded_or(dp: &Datapath, uplink: bool, frame: &[u8], n: usize, reason: usize) -> usize {
    let progs = &dp.skel().progs;
    let prog = if uplink { &progs.xdp_n3 } else { &progs.xdp_n6 };
    let before = dp.stats()[reason].0;
    let mut out = vec![0u8; 4096];
    let mut fwd = 0;
    for _ in 0..n {
        let input = libbpf_rs::ProgramInput {
            data_in: Some(frame),
            data_out: Some(&mut out),
            repeat: 1,
            ..Default::default()
        };
        if prog.test_run(input).expect("BPF_PROG_RUN").return_value == XDP_REDIRECT {
            fwd += 1;
        }
    }
    let dropped = dp.stats()[reason].0 - before;
    assert_eq!(
        fwd + dropped as usize,
        n,
        "every packet forwarded or dropped for reason {reason}"
    );
    fwd
}

#[test]
fn unknown_teids_reach_upfd_at_the_configured_rate_only() {
    if !root() {
        return;
    }
    const XDP_PASS: u32 = 2;
    let mut cfg = neigh_config();
    cfg.slowpath_per_sec = 10;
    cfg.slowpath_burst = 5;
    let dp = common::loaded(Capacity::for_sessions(100), cfg);
    let frame = uplink_frame(0x0bad_7eed, ue(1));
    let passed = |dp: &Datapath, n: usize| {
        let mut out = vec![0u8; 4096];
        (0..n)
            .filter(|_| {
                let input = libbpf_rs::ProgramInput {
                    data_in: Some(&frame),
                    data_out: Some(&mut out),
                    repeat: 1,
                    ..Default::default()
                };
                let v = dp.skel().progs.xdp_n3.test_run(input).unwrap().return_value;
                v == XDP_PASS
            })
            .count()
    };
    // The burst, then nothing until time passes; every packet counted as unknown.
    assert_eq!(passed(&dp, 30), 5);
    assert_eq!(
        dp.stats()[upf::abi::DROP_UNKNOWN_TEID as usize].0,
        30,
        "DROP_UNKNOWN_TEID counts them all"
    );
    std::thread::sleep(Duration::from_millis(550));
    let more = passed(&dp, 30);
    assert!((4..=7).contains(&more), "{more} after 0.55 s at 10/s");
}
