//! What the data path's tests share: the benchmark's session shape, a URR template.
#![allow(dead_code)] // each test binary uses part of it

pub mod app;

use std::net::Ipv4Addr;

use pfcp::ie::{Bitrate, FSeid, NodeId, OuterHeaderCreation, OuterHeaderRemoval, SdfFilter};
use upf::fastpath::Config;
use upf::rules::*;

#[allow(unused_imports)] // each test binary uses part of it
pub use upf_bpf::scaling::{downlink_frame, neigh_config, ue, uplink_frame, DN, GNB, N3};

/// Whether we are root; says so when not (loading BPF programs needs CAP_BPF).
pub fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let r = unsafe { libc::geteuid() } == 0;
    if !r {
        eprintln!("not root: skipping (loading BPF programs needs CAP_BPF)");
    }
    r
}

/// The data path loaded with tables for `cap`, configured with `cfg` and the test
/// interfaces (ifindex 20 for N3 and N6, no N9).
pub fn loaded(cap: upf_bpf::datapath::Capacity, cfg: Config) -> upf_bpf::datapath::Datapath {
    let mut dp = upf_bpf::datapath::Datapath::load(cap, cfg.clone()).expect("load (root)");
    dp.configure(cfg, 20, 20, 0).expect("configure");
    dp
}

/// The first Create URR of the corpus' establishment sample, without links to other
/// rules.
pub fn urr_template() -> pfcp::msg::CreateUrr {
    let est = pfcp_samples::corpus()
        .into_iter()
        .find(|s| s.bytes[1] == 50)
        .expect("an establishment sample");
    let (_, m) = pfcp::msg::parse::<pfcp::msg::SessionEstablishmentRequest>(&est.bytes).unwrap();
    let mut u = m.create_urrs[0].clone();
    u.linked_urr_ids.clear();
    u.far_id_for_quota_action = None;
    u.aggregated_urrs.clear();
    u
}

/// Session `i`'s uplink TEID: spread like the allocator's random TEIDs, unique.
pub fn teid(i: u32) -> u32 {
    i.wrapping_mul(0x9e37_79b1) | 1 << 31
}

/// A session without rules, `seid` on both sides, owned by a CP function on loopback.
pub fn empty_session(seid: u64) -> Session {
    Session::new(
        seid,
        FSeid {
            spare: 0,
            seid,
            ipv4: Some(Ipv4Addr::LOCALHOST),
            ipv6: None,
        },
        NodeId::Ipv4(Ipv4Addr::LOCALHOST),
    )
}

/// A session as the benchmark's SMF builds it: an uplink PDR on a TEID (QFI 1, Outer
/// Header Removal) and a downlink PDR on the UE address, each with `flow` as its SDF
/// filter; FARs to N6 and to the gNB; a QER with MBR and QFI; `urr` on both PDRs.
pub fn session(i: u32, flow: &str, urr: &pfcp::msg::CreateUrr) -> Session {
    let mut s = empty_session(u64::from(i) + 1);
    let sdf = SdfFilter {
        flow_description: Some(flow.as_bytes().to_vec()),
        ..Default::default()
    };
    s.qers.insert(
        1,
        Qer {
            id: 1,
            gate_ul_open: true,
            gate_dl_open: true,
            mbr: Some(Bitrate {
                ul_kbps: 100_000_000,
                dl_kbps: 100_000_000,
            }),
            qfi: Some(1),
            ..Qer::default()
        },
    );
    let mut rule = urr.clone();
    rule.urr_id = 1;
    s.urrs.insert(1, Urr::new(&rule));
    s.fars.insert(
        1,
        Far {
            id: 1,
            action: ApplyAction {
                forw: true,
                ..Default::default()
            },
            forwarding: Some(Forwarding {
                destination_interface: interface::CORE,
                ..Default::default()
            }),
            bar_id: None,
        },
    );
    s.fars.insert(
        2,
        Far {
            id: 2,
            action: ApplyAction {
                forw: true,
                ..Default::default()
            },
            forwarding: Some(Forwarding {
                destination_interface: interface::ACCESS,
                outer_header_creation: Some(OuterHeaderCreation::gtpu_ipv4(i + 1, GNB)),
                ..Default::default()
            }),
            bar_id: None,
        },
    );
    let ue_ip = UeIp {
        ipv4: Some(ue(i)),
        ..Default::default()
    };
    for (id, far, pdi, ohr) in [
        (
            1u16,
            1u32,
            Pdi {
                source_interface: interface::ACCESS,
                local_fteid: Some(LocalFteid {
                    teid: teid(i),
                    ipv4: Some(N3),
                    ipv6: None,
                }),
                ue_ips: thin_vec![ue_ip],
                qfis: thin_vec![1],
                sdf_filters: thin_vec![sdf.clone()],
                ..Default::default()
            },
            Some(OuterHeaderRemoval {
                description: 0,
                ext_header_deletion: None,
            }),
        ),
        (
            2,
            2,
            Pdi {
                source_interface: interface::CORE,
                ue_ips: thin_vec![UeIp {
                    is_destination: true,
                    ..ue_ip
                }],
                sdf_filters: thin_vec![sdf.clone()],
                ..Default::default()
            },
            None,
        ),
    ] {
        s.pdrs.insert(
            id,
            Pdr {
                id,
                precedence: 100,
                pdi,
                outer_header_removal: ohr,
                far_id: Some(far),
                urr_ids: upf::rules::smallvec![1],
                qer_ids: upf::rules::smallvec![1],
                activation_time: None,
                deactivation_time: None,
            },
        );
    }
    s
}

/// The data network host the frames below talk to.
/// Put the session's uplink PDRs on local TEID `teid`.
pub fn set_teid(s: &mut Session, teid: u32) {
    for p in s.pdrs.values_mut() {
        if let Some(f) = p.pdi.local_fteid.as_mut() {
            f.teid = teid;
        }
    }
}

/// A clock's time in ns: CLOCK_MONOTONIC_COARSE is the data path's
/// bpf_ktime_get_coarse_ns, CLOCK_MONOTONIC its bpf_ktime_get_ns.
pub fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// How far apart two readings of `clock` can be (a tick of the coarse clock, a few ms).
pub fn clock_res_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_getres writes into the timespec we own.
    unsafe { libc::clock_getres(clock, &mut ts) };
    (ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64).max(1)
}

/// Keeps the calling thread on the CPU it is on until dropped, then gives it its old
/// affinity back. BPF_PROG_RUN without live frames runs the program on the caller's CPU,
/// and the data path's lanes (leases, counts) are per CPU: the reference model is told
/// which one (`Model::set_cpu`), so the thread must stay there.
pub struct OneCpu {
    old: libc::cpu_set_t,
    pub cpu: usize,
}

impl OneCpu {
    pub fn new() -> OneCpu {
        // SAFETY: cpu_set_t is plain data, filled by the kernel.
        let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: writes into `old`, which we own.
        let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&old), &mut old) };
        assert_eq!(
            r,
            0,
            "sched_getaffinity: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: no preconditions.
        let cpu = unsafe { libc::sched_getcpu() };
        assert!(
            cpu >= 0,
            "sched_getcpu: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: a set of one CPU, ours.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: cpu < CPU_SETSIZE (the kernel gave it).
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
        // SAFETY: applies `set` to this thread.
        let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
        assert_eq!(
            r,
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
        OneCpu {
            old,
            cpu: cpu as usize,
        }
    }
}

impl Drop for OneCpu {
    fn drop(&mut self) {
        // SAFETY: restores the set read in new.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&self.old), &self.old) };
    }
}

/// Run `frame` through the program `fd` once (BPF_PROG_RUN): its XDP verdict.
pub fn test_run(fd: std::os::fd::BorrowedFd<'_>, frame: &[u8]) -> u32 {
    timed_run(fd, frame).0
}

/// One BPF_PROG_RUN of `frame` through the program `fd`: its XDP verdict and the time
/// the kernel measured.
pub fn timed_run(fd: std::os::fd::BorrowedFd<'_>, frame: &[u8]) -> (u32, std::time::Duration) {
    use std::os::fd::AsRawFd;
    let mut out = vec![0u8; 4096];
    let mut o = libbpf_rs::libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_test_run_opts>() as _,
        data_in: frame.as_ptr().cast(),
        data_size_in: frame.len() as u32,
        data_out: out.as_mut_ptr().cast(),
        data_size_out: out.len() as u32,
        repeat: 1,
        ..Default::default()
    };
    // SAFETY: `o` points at `frame` and `out`, which outlive the call.
    let r = unsafe { libbpf_rs::libbpf_sys::bpf_prog_test_run_opts(fd.as_raw_fd(), &mut o) };
    assert_eq!(
        r,
        0,
        "BPF_PROG_RUN: {}",
        std::io::Error::from_raw_os_error(-r)
    );
    (
        o.retval,
        std::time::Duration::from_nanos(u64::from(o.duration)),
    )
}
