//! The data path's rate limits, GCRAs updated with atomic instructions (bpf/include/qer.h):
//! a QER's MBR (an idle session's burst passes, then the rate and nothing more, each
//! direction on its own, and the allowance comes back with time) and the slow path's
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
    let progs = &dp.skel().progs;
    let prog = if uplink { &progs.xdp_n3 } else { &progs.xdp_n6 };
    let before = dp.stats()[DROP_MBR].0;
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
    let dropped = dp.stats()[DROP_MBR].0 - before;
    assert_eq!(
        fwd + dropped as usize,
        n,
        "every packet forwarded or an MBR drop"
    );
    fwd
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
