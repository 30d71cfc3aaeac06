//! The verifier's budget (issue 26): every program of the data path's object, loaded as
//! upfd loads it for 1,000,000 sessions, is verified in at most 400,000 instructions
//! (40 % of the kernel's 1,000,000), so that a new per-packet feature still fits. Prints
//! each program's `verified_insns` (bpf_prog_info; Debian's bpftool does not show it).
//! Needs CAP_BPF (root).
//!
//! The object is the one upfd runs in every profile: crates/bpf/build_bpf.rs passes
//! clang the same flags (`-O2 -g -mcpu=v3`, libbpf-cargo's `-target bpf`) whatever
//! cargo's profile, so the debug build's object is the release build's.

mod common;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use libbpf_rs::skel::Skel;
use upf::fastpath::Config;
use upf_bpf::datapath::{Capacity, Datapath};

/// The kernel's limit on instructions processed per program (BPF_COMPLEXITY_LIMIT_INSNS).
const LIMIT: u32 = 1_000_000;
/// The budget: 40 % of the limit.
const BUDGET: u32 = 400_000;

/// Every entry and stage program (include/pipeline.h): one missing fails the test, so a
/// stage dropped from the object cannot pass by not being measured.
const EXPECTED: [&str; 13] = [
    "xdp_n3",
    "xdp_n6",
    "xdp_n3_cpu",
    "stage_app",
    "stage_rules",
    "stage_egress",
    "stage_app_cpu",
    "stage_rules_cpu",
    "stage_egress_cpu",
    "stage_icmp",
    "stage_downlink",
    "stage_icmp_cpu",
    "stage_downlink_cpu",
];

/// Instructions the verifier processed for a loaded program.
fn verified_insns(fd: BorrowedFd<'_>) -> u32 {
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a bpf_prog_info of `len` octets; the kernel fills at most that.
    let r = unsafe {
        libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len)
    };
    assert_eq!(
        r,
        0,
        "bpf_prog_get_info_by_fd: {}",
        std::io::Error::last_os_error()
    );
    info.verified_insns
}

#[test]
fn every_program_is_verified_within_40_percent_of_the_limit() {
    if !common::root() {
        return;
    }
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    println!("kernel {}", kernel.trim());
    // The read-only globals (lanes per entry, entries per page) are fixed at load and
    // prune what the verifier walks: loaded as upfd loads them at its default capacity.
    let dp =
        Datapath::load(Capacity::for_sessions(1_000_000), Config::default()).expect("load (root)");
    let mut measured = Vec::new();
    for p in dp.skel().object().progs() {
        let name = p.name().to_string_lossy().into_owned();
        let n = verified_insns(p.as_fd());
        println!(
            "{name:<18} {n:>9} verified instructions, {:>5.1} % of the limit",
            f64::from(n) * 100.0 / f64::from(LIMIT)
        );
        measured.push((name, n));
    }
    for want in EXPECTED {
        let found = measured.iter().find(|(name, _)| name == want);
        assert!(
            found.is_some_and(|(_, n)| *n > 0),
            "{want} is not in the data path's object (or was not verified)"
        );
    }
    let over: Vec<String> = measured
        .iter()
        .filter(|(_, n)| *n > BUDGET)
        .map(|(name, n)| format!("{name} ({n})"))
        .collect();
    assert!(
        over.is_empty(),
        "over the budget of {BUDGET} verified instructions: {}",
        over.join(", ")
    );
}
