//! The bench programs (bpf/bench/, bench_bpf).
//!
//! - Frames: BPF_PROG_RUN without live frames returns what the generator builds, the
//!   sink counts and the bare forwarder forwards; they are parsed and checked octet by
//!   octet against the spec (the gtpu crate parses the GTP-U).
//! - Traffic: namespaces tg-gnb, tg-upf, tg-dn (the lab's addresses and MACs; removed at
//!   the end, also on failure); the bare forwarder in upf, sinks in gnb and dn; 10,000
//!   uplink packets for 100 sessions and 10,000 downlink packets arrive exactly, session
//!   by session; the generator into a drop program works.
//! - Both directions from one thread (DualGenerator): frames of both templates
//!   interleaved by weight; through the bare forwarder, 20 kpps up and 30 kpps down at
//!   once each spend their budget, never ahead of their schedules, and arrive exactly,
//!   session by session.
//! - Exactly: what the generator sent is what the sinks counted plus what the veths
//!   counted lost, by place (`ethtool -S`: xdp_xmit_errors, drops), per session; waits
//!   end as soon as that holds (at most a minute). Rates and latencies are printed,
//!   never asserted: a busy machine is slower, not wrong.
//! - `measure_limits` (ignored; run by hand) prints the generator limit and the bare
//!   forwarder's rate:
//!   `cargo test --release -p bench-bpf --test bench -- --ignored --nocapture measure_limits`
//!   and `measure_dual` the same for both directions from one thread, and how close
//!   paced sends keep to the rate asked.
//!
//! Needs root (CAP_BPF, CAP_NET_ADMIN, `ip netns`); skipped with a message otherwise.

use std::fs::File;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::{Duration, Instant};

use bench_bpf::*;
use libbpf_rs::ProgramInput;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

macro_rules! require_root {
    () => {
        if !is_root() {
            eprintln!("skipped: needs root (CAP_BPF, CAP_NET_ADMIN, network namespaces)");
            return;
        }
    };
}

// The lab's addresses and MACs (upfbench::lab::{addr, mac}).
const GNB_N3: Ipv4Addr = Ipv4Addr::new(192, 168, 3, 1);
const UPF_N3: Ipv4Addr = Ipv4Addr::new(192, 168, 3, 2);
const UPF_N6: Ipv4Addr = Ipv4Addr::new(192, 168, 6, 2);
const DN_N6: Ipv4Addr = Ipv4Addr::new(192, 168, 6, 1);
const DN_HOSTS: [Ipv4Addr; 2] = [
    Ipv4Addr::new(192, 168, 6, 10),
    Ipv4Addr::new(192, 168, 6, 11),
];
const MAC_GNB_N3: [u8; 6] = [0x02, 0, 0, 0, 0x03, 0x01];
const MAC_UPF_N3: [u8; 6] = [0x02, 0, 0, 0, 0x03, 0x02];
const MAC_UPF_N6: [u8; 6] = [0x02, 0, 0, 0, 0x06, 0x02];
const MAC_DN_N6: [u8; 6] = [0x02, 0, 0, 0, 0x06, 0x01];
const DL_TEID: u32 = 0x00bb_0001;

fn sessions(n: u32) -> Vec<Session> {
    (0..n)
        .map(|i| Session {
            teid: 0x1000 + i,
            ue: Ipv4Addr::new(10, 45, (i >> 8) as u8, (i & 0xff) as u8 + 1),
            dn: DN_HOSTS[(i % 2) as usize],
        })
        .collect()
}

fn uplink(ifindex: u32) -> GenConfig {
    GenConfig::uplink(ifindex, MAC_GNB_N3, MAC_UPF_N3, GNB_N3, UPF_N3)
}

fn downlink(ifindex: u32) -> GenConfig {
    GenConfig::downlink(ifindex, MAC_DN_N6, MAC_UPF_N6)
}

fn bare_config(n3: u32, n6: u32) -> BareConfig {
    BareConfig {
        n3_ifindex: n3,
        n6_ifindex: n6,
        n3_mac: MAC_UPF_N3,
        gnb_mac: MAC_GNB_N3,
        n6_mac: MAC_UPF_N6,
        dn_mac: MAC_DN_N6,
        n3_ip: UPF_N3,
        gnb_ip: GNB_N3,
        n6_ip: UPF_N6,
        teid: DL_TEID,
        psc: true,
        qfi: 5,
    }
}

fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Runs a program once on `frame` (no live frames): (XDP action, output frame).
fn run_once(prog: &libbpf_rs::ProgramMut<'static>, frame: &[u8]) -> (u32, Vec<u8>) {
    let mut out = vec![0u8; 4096];
    let input = ProgramInput {
        data_in: Some(frame),
        data_out: Some(&mut out),
        ..Default::default()
    };
    let o = prog.test_run(input).expect("BPF_PROG_RUN");
    let data = o.data.expect("output").to_vec();
    (o.return_value, data)
}

/// Keeps the calling thread on one CPU until dropped, then gives it its old affinity
/// back. BPF_PROG_RUN without live frames runs the program on the caller's CPU, and
/// the generator's round robin (`gen_state`: session, round, credit) is per CPU: a
/// migration between two runs would restart the sequence a test checks packet by packet.
struct OneCpu {
    old: libc::cpu_set_t,
}

impl OneCpu {
    fn new() -> OneCpu {
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
        pin_current_thread(cpu as usize).expect("pinning the test thread");
        OneCpu { old }
    }
}

impl Drop for OneCpu {
    fn drop(&mut self) {
        // SAFETY: restores the set read in new.
        unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&self.old), &self.old) };
    }
}

const XDP_DROP: u32 = 1;
const XDP_PASS: u32 = 2;
const XDP_TX: u32 = 3;
const XDP_REDIRECT: u32 = 4;

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

fn be32(b: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn ne32(b: &[u8], o: usize) -> u32 {
    u32::from_ne_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

/// Checks an IPv4/UDP header at `o` of `len` total octets from `src` to `dst`
/// (checksum included); returns the UDP payload's offset.
fn check_ipv4_udp(f: &[u8], o: usize, len: usize, src: Ipv4Addr, dst: Ipv4Addr) -> usize {
    assert_eq!(f[o], 0x45, "IPv4, no options");
    assert_eq!(be16(f, o + 2) as usize, len, "IPv4 total length");
    assert_eq!(f[o + 9], 17, "UDP");
    assert_eq!(Ipv4Addr::from(be32(f, o + 12)), src);
    assert_eq!(Ipv4Addr::from(be32(f, o + 16)), dst);
    let sum: u32 = (0..10).map(|i| be16(f, o + 2 * i) as u32).sum();
    let sum = (sum & 0xffff) + (sum >> 16);
    assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff, "IPv4 header checksum");
    assert_eq!(be16(f, o + 24) as usize, len - 20, "UDP length");
    assert_eq!(be16(f, o + 26), 0, "no UDP checksum");
    o + 28
}

/// Checks a payload: (session, timestamp).
fn check_payload(f: &[u8], o: usize) -> (u32, u64) {
    assert_eq!(ne32(f, o), MAGIC);
    (
        ne32(f, o + 4),
        ne32(f, o + 12) as u64 | (ne32(f, o + 16) as u64) << 32,
    )
}

#[test]
fn uplink_frames_are_gpdus_of_each_session_and_size() {
    require_root!();
    let _cpu = OneCpu::new();
    let mut cfg = uplink(1);
    cfg.sizes = vec![(122, 1), (300, 1), (1000, 2)];
    let table = cfg.size_table().unwrap();
    let mut g = Generator::load(cfg).expect("load generator");
    let ss = sessions(3);
    g.set_sessions(&ss).unwrap();
    let frame = g.frame().to_vec();
    let before = mono_ns();
    for k in 0..24usize {
        let (act, f) = run_once(g.program(), &frame);
        assert_eq!(act, XDP_TX);
        let s = k % 3;
        let size = table[(s % table.len() + (k / 3) % table.len()) % table.len()];
        assert_eq!(f.len(), size as usize, "packet {k}: size");
        assert_eq!(&f[0..6], &MAC_UPF_N3);
        assert_eq!(&f[6..12], &MAC_GNB_N3);
        assert_eq!(be16(&f, 12), 0x0800);
        let udp = check_ipv4_udp(&f, 14, f.len() - 14, GNB_N3, UPF_N3);
        assert_eq!(be16(&f, 34), GTPU_PORT);
        assert_eq!(be16(&f, 36), GTPU_PORT);
        let info = gtpu::fastpath::parse_gpdu(&f[udp..]).expect("G-PDU");
        assert_eq!(info.teid, ss[s].teid);
        assert_eq!(info.qfi, Some(9));
        assert_eq!(info.pdu_type, Some(1), "UL PDU SESSION INFORMATION");
        let inner = udp + info.payload_offset;
        assert_eq!(info.payload_len, f.len() - inner);
        let pl = check_ipv4_udp(&f, inner, f.len() - inner, ss[s].ue, ss[s].dn);
        assert_eq!(be16(&f, inner + 20), 40000);
        assert_eq!(be16(&f, inner + 22), 9);
        let (session, ts) = check_payload(&f, pl);
        assert_eq!(session as usize, s);
        assert!(ts >= before && ts <= mono_ns(), "timestamp");
    }
    assert_eq!(g.sent_per_session().unwrap(), vec![8, 8, 8]);
    let c = g.counters().unwrap();
    assert_eq!(c.packets, 24);
    assert_eq!(
        c.bytes,
        (0..24)
            .map(|k| table[(k % 3 + k / 3) % 4] as u64)
            .sum::<u64>()
    );
}

#[test]
fn uplink_without_container_and_downlink_frames() {
    require_root!();
    let _cpu = OneCpu::new();
    let mut cfg = uplink(1);
    cfg.psc = false;
    cfg.timestamps = false;
    let cfg = cfg.frame_len(min_frame_len(Direction::Uplink, false) as u16);
    let mut g = Generator::load(cfg).unwrap();
    g.set_sessions(&sessions(1)).unwrap();
    let (_, f) = run_once(g.program(), g.frame());
    assert_eq!(f.len(), 98);
    let info = gtpu::fastpath::parse_gpdu(&f[42..]).unwrap();
    assert_eq!((info.qfi, info.payload_offset), (None, 8));
    assert_eq!(f[42], 0x30, "no optional fields");
    assert_eq!(check_payload(&f, 78), (0, 0), "no timestamp");

    let mut g = Generator::load(downlink(1).frame_len(64)).unwrap();
    let ss = sessions(2);
    g.set_sessions(&ss).unwrap();
    for s in [0usize, 1, 0] {
        let (act, f) = run_once(g.program(), g.frame());
        assert_eq!(act, XDP_TX);
        assert_eq!(f.len(), 64);
        assert_eq!(&f[0..12], &[MAC_UPF_N6, MAC_DN_N6].concat()[..]);
        let pl = check_ipv4_udp(&f, 14, 50, ss[s].dn, ss[s].ue);
        assert_eq!(be16(&f, 34), 9);
        assert_eq!(be16(&f, 36), 40000);
        assert_eq!(check_payload(&f, pl).0 as usize, s);
    }
    // Redirect instead of XDP_TX.
    let mut cfg = downlink(1);
    cfg.redirect = Some(7);
    let mut g = Generator::load(cfg).unwrap();
    g.set_sessions(&sessions(1)).unwrap();
    assert_eq!(run_once(g.program(), g.frame()).0, XDP_REDIRECT);
}

/// Checks a generated uplink frame (container with QFI 9, timestamps): its session.
fn check_uplink_frame(f: &[u8], ss: &[Session]) -> usize {
    assert_eq!(&f[0..12], &[MAC_UPF_N3, MAC_GNB_N3].concat()[..]);
    assert_eq!(be16(f, 12), 0x0800);
    let udp = check_ipv4_udp(f, 14, f.len() - 14, GNB_N3, UPF_N3);
    assert_eq!((be16(f, 34), be16(f, 36)), (GTPU_PORT, GTPU_PORT));
    let info = gtpu::fastpath::parse_gpdu(&f[udp..]).expect("G-PDU");
    assert_eq!((info.qfi, info.pdu_type), (Some(9), Some(1)));
    let inner = udp + info.payload_offset;
    assert_eq!(info.payload_len, f.len() - inner);
    let (session, ts) = check_payload(f, inner + 28);
    let s = &ss[session as usize];
    assert_eq!(info.teid, s.teid);
    check_ipv4_udp(f, inner, f.len() - inner, s.ue, s.dn);
    assert_eq!((be16(f, inner + 20), be16(f, inner + 22)), (40000, 9));
    assert!(ts > 0 && ts <= mono_ns(), "timestamp");
    session as usize
}

/// Checks a generated downlink frame (timestamps): its session.
fn check_downlink_frame(f: &[u8], ss: &[Session]) -> usize {
    assert_eq!(&f[0..12], &[MAC_UPF_N6, MAC_DN_N6].concat()[..]);
    assert_eq!(be16(f, 12), 0x0800);
    let (session, ts) = check_payload(f, 42);
    let s = &ss[session as usize];
    check_ipv4_udp(f, 14, f.len() - 14, s.dn, s.ue);
    assert_eq!((be16(f, 34), be16(f, 36)), (9, 40000));
    assert!(ts > 0 && ts <= mono_ns(), "timestamp");
    session as usize
}

#[test]
fn dual_generator_interleaves_both_templates() {
    require_root!();
    let _cpu = OneCpu::new();
    let mut ul = uplink(1);
    ul.sizes = vec![(122, 1), (300, 1)];
    let mut dl = downlink(1);
    dl.sizes = vec![(78, 1), (1000, 1), (64, 1)];
    dl.max_sessions = 8;
    let (ut, dt) = (ul.size_table().unwrap(), dl.size_table().unwrap());
    // Both ports on lo of this namespace: BPF_PROG_RUN without live frames sends nothing.
    let mut g = DualGenerator::load(Some(ul), Some(dl), [None, None]).expect("load");
    assert_eq!(g.frame().len(), 1000, "the largest size of both");
    let ss = sessions(3);
    g.set_sessions(&ss).unwrap();
    g.set_weights([1, 2]).unwrap();
    // Smooth weighted round robin 1:2: downlink, uplink, downlink, again.
    let (mut nu, mut nd) = (0usize, 0usize);
    let mut bytes = [0u64; 2];
    for k in 0..36 {
        let (act, f) = run_once(g.program(), g.frame());
        assert_eq!(act, XDP_REDIRECT, "packet {k}");
        if k % 3 == 1 {
            let s = check_uplink_frame(&f, &ss);
            assert_eq!(s, nu % 3, "uplink packet {nu}: session");
            let size = ut[(s % ut.len() + (nu / 3) % ut.len()) % ut.len()];
            assert_eq!(f.len(), size as usize, "uplink packet {nu}: size");
            nu += 1;
            bytes[0] += f.len() as u64;
        } else {
            let s = check_downlink_frame(&f, &ss);
            assert_eq!(s, nd % 3, "downlink packet {nd}: session");
            let size = dt[(s % dt.len() + (nd / 3) % dt.len()) % dt.len()];
            assert_eq!(f.len(), size as usize, "downlink packet {nd}: size");
            nd += 1;
            bytes[1] += f.len() as u64;
        }
    }
    assert_eq!((nu, nd), (12, 24));
    for (i, dir) in Direction::BOTH.into_iter().enumerate() {
        let c = g.counters(dir).unwrap();
        assert_eq!((c.packets, c.bytes), ([12, 24][i], bytes[i]), "{dir:?}");
    }
    assert_eq!(g.sent_per_session(Direction::Uplink).unwrap(), vec![4; 3]);
    assert_eq!(g.sent_per_session(Direction::Downlink).unwrap(), vec![8; 3]);
    // New sessions restart the round robins and per-session counts, not the counters.
    g.set_sessions(&sessions(2)).unwrap();
    g.set_weights([1, 1]).unwrap();
    let (_, f) = run_once(g.program(), g.frame());
    assert_eq!(check_uplink_frame(&f, &ss), 0);
    let (_, f) = run_once(g.program(), g.frame());
    assert_eq!(check_downlink_frame(&f, &ss), 0);
    assert_eq!(g.sent_per_session(Direction::Uplink).unwrap(), vec![1, 0]);
    assert_eq!(g.counters(Direction::Downlink).unwrap().packets, 25);

    // One direction: that one only; the other cannot be asked for.
    let mut g = DualGenerator::load(None, Some(downlink(1)), [None, None]).unwrap();
    g.set_sessions(&ss).unwrap();
    for _ in 0..4 {
        let (act, f) = run_once(g.program(), g.frame());
        assert_eq!(act, XDP_REDIRECT);
        check_downlink_frame(&f, &ss);
    }
    assert_eq!(g.counters(Direction::Uplink).unwrap().packets, 0);
    assert!(g.sent_per_session(Direction::Uplink).unwrap().is_empty());
    assert!(g
        .send([None, None], [1, 0], Duration::from_secs(1))
        .is_err());
    assert!(g.set_weights([0, 1]).is_err());
    assert!(g.set_flush(Some(Duration::from_secs(1))).is_err());
    // Configs in the wrong slot, or on different CPUs.
    assert!(DualGenerator::load(Some(downlink(1)), None, [None, None]).is_err());
    let (mut a, mut b) = (uplink(1), downlink(1));
    (a.cpu, b.cpu) = (Some(0), Some(1));
    assert!(DualGenerator::load(Some(a), Some(b), [None, None]).is_err());
    // A port that is not in the namespace named.
    assert!(DualGenerator::load(Some(uplink(9999)), None, [None, None]).is_err());
}

#[test]
fn sink_counts_ours_and_passes_the_rest() {
    require_root!();
    let _cpu = OneCpu::new();
    let mut ul = Generator::load(uplink(1)).unwrap();
    ul.set_sessions(&sessions(4)).unwrap();
    let mut dl = Generator::load(downlink(1)).unwrap();
    dl.set_sessions(&sessions(4)).unwrap();
    let sink = Sink::load(4).unwrap();
    let mut bytes = [0u64; 2];
    // Uplink generator frames are GTP-U: the sink counts them as downlink arrivals,
    // plain ones as uplink arrivals.
    for _ in 0..5 {
        let (_, f) = run_once(ul.program(), ul.frame());
        assert_eq!(run_once(sink.program(), &f).0, XDP_DROP);
        bytes[1] += f.len() as u64;
        let (_, f) = run_once(dl.program(), dl.frame());
        assert_eq!(run_once(sink.program(), &f).0, XDP_DROP);
        bytes[0] += f.len() as u64;
    }
    // Not ours: passed, counted as other.
    let (_, mut f) = run_once(dl.program(), dl.frame());
    f[42] ^= 0xff;
    assert_eq!(run_once(sink.program(), &f).0, XDP_PASS);
    assert_eq!(run_once(sink.program(), &[0u8; 60]).0, XDP_PASS);
    // Ours, but no such session.
    let (_, mut f) = run_once(dl.program(), dl.frame());
    f[46..50].copy_from_slice(&99u32.to_ne_bytes());
    assert_eq!(run_once(sink.program(), &f).0, XDP_DROP);

    let t = sink.totals().unwrap();
    assert_eq!(
        t.of(Direction::Uplink),
        Count {
            packets: 5,
            bytes: bytes[0]
        }
    );
    assert_eq!(t.of(Direction::Downlink).packets, 5);
    assert_eq!(t.of(Direction::Downlink).bytes, bytes[1]);
    assert_eq!(t.other.packets, 2);
    assert_eq!(t.bad_session, 1);
    let up: Vec<u64> = sink
        .counts(Direction::Uplink)
        .unwrap()
        .iter()
        .map(|c| c.packets)
        .collect();
    assert_eq!(up, vec![2, 1, 1, 1]);
    let down: Vec<u64> = sink
        .counts(Direction::Downlink)
        .unwrap()
        .iter()
        .map(|c| c.packets)
        .collect();
    assert_eq!(down, vec![2, 1, 1, 1]);
    assert_eq!(sink.latency(Direction::Uplink).unwrap().count(), 5);

    // A packet 5 ms old when stamped lands in the bucket of 5 ms plus the time the sink
    // took to see it, measured around it: BPF and Rust agree on the buckets.
    sink.reset().unwrap();
    assert_eq!(sink.totals().unwrap(), SinkTotals::default());
    let (_, mut f) = run_once(dl.program(), dl.frame());
    let before = mono_ns();
    let ts = before - 5_000_000;
    f[54..58].copy_from_slice(&(ts as u32).to_ne_bytes());
    f[58..62].copy_from_slice(&((ts >> 32) as u32).to_ne_bytes());
    assert_eq!(run_once(sink.program(), &f).0, XDP_DROP);
    let took_us = (mono_ns() - before).div_ceil(1000);
    let h = sink.latency(Direction::Uplink).unwrap();
    let at: Vec<usize> = (0..h.buckets.len()).filter(|&i| h.buckets[i] > 0).collect();
    assert_eq!(at.len(), 1, "one sample");
    assert_eq!(h.buckets[at[0]], 1, "one sample");
    let (lo, hi) = (hist_bucket(5000), hist_bucket(5000 + took_us));
    assert!(
        (lo..=hi).contains(&at[0]),
        "bucket {} {:?}, not within {lo} (5 ms) ..= {hi} (5 ms + {took_us} us)",
        at[0],
        hist_bounds(at[0])
    );
    eprintln!(
        "5 ms + {took_us} us: bucket {} {:?} us",
        at[0],
        hist_bounds(at[0])
    );
    assert_eq!(sink.latency(Direction::Downlink).unwrap().count(), 0);
}

/// Checks an IPv4/TCP header at `o` of `len` total octets from `src` to `dst` between
/// `ports` (ACK|PSH, 20 octets); returns the payload's offset.
fn check_ipv4_tcp(
    f: &[u8],
    o: usize,
    len: usize,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ports: (u16, u16),
) -> usize {
    assert_eq!(f[o], 0x45, "IPv4, no options");
    assert_eq!(be16(f, o + 2) as usize, len, "IPv4 total length");
    assert_eq!(f[o + 9], 6, "TCP");
    assert_eq!(Ipv4Addr::from(be32(f, o + 12)), src);
    assert_eq!(Ipv4Addr::from(be32(f, o + 16)), dst);
    let sum: u32 = (0..10).map(|i| be16(f, o + 2 * i) as u32).sum();
    let sum = (sum & 0xffff) + (sum >> 16);
    assert_eq!((sum & 0xffff) + (sum >> 16), 0xffff, "IPv4 header checksum");
    assert_eq!((be16(f, o + 20), be16(f, o + 22)), ports);
    assert_eq!(f[o + 32], 5 << 4, "data offset: no options");
    assert_eq!(f[o + 33], 0x18, "ACK, PSH");
    o + 40
}

/// Size table entries marked TCP are TCP segments to / from port 80 (HTTP-like), the
/// others UDP, both ways; the sink counts both, session by session.
#[test]
fn tcp_sizes_are_segments_and_the_sink_counts_them() {
    require_root!();
    let _cpu = OneCpu::new();
    let ss = sessions(2);
    let sink = Sink::load(2).unwrap();
    let mut cfg = uplink(1);
    let (udp_len, tcp_len) = (
        frame_len_for_ip_len(Direction::Uplink, true, 690) as u16,
        frame_len_for_ip_len(Direction::Uplink, true, 64) as u16,
    );
    cfg.sizes = vec![(tcp_len, 1), (udp_len, 1)];
    cfg.tcp_sizes = vec![tcp_len];
    let mut g = Generator::load(cfg).unwrap();
    g.set_sessions(&ss).unwrap();
    let (mut tcp, mut udp) = (0, 0);
    for _ in 0..8 {
        let (act, f) = run_once(g.program(), g.frame());
        assert_eq!(act, XDP_TX);
        let info = gtpu::fastpath::parse_gpdu(&f[42..]).expect("G-PDU");
        let inner = 42 + info.payload_offset;
        let pl = if f.len() == tcp_len as usize {
            tcp += 1;
            let (session, _) = check_payload(&f, inner + 40);
            let s = &ss[session as usize];
            check_ipv4_tcp(&f, inner, 64, s.ue, s.dn, (40000, 80))
        } else {
            udp += 1;
            let (session, _) = check_payload(&f, inner + 28);
            let s = &ss[session as usize];
            check_ipv4_udp(&f, inner, 690, s.ue, s.dn)
        };
        check_payload(&f, pl);
        assert_eq!(run_once(sink.program(), &f).0, XDP_DROP, "counted");
    }
    assert_eq!((tcp, udp), (4, 4));
    let mut cfg = downlink(1);
    cfg.sizes = vec![(78, 1)];
    cfg.tcp_sizes = vec![78];
    let mut g = Generator::load(cfg).unwrap();
    g.set_sessions(&ss).unwrap();
    for s in [0usize, 1] {
        let (_, f) = run_once(g.program(), g.frame());
        assert_eq!(f.len(), 78);
        let pl = check_ipv4_tcp(&f, 14, 64, ss[s].dn, ss[s].ue, (80, 40000));
        assert_eq!(check_payload(&f, pl).0 as usize, s);
        assert_eq!(run_once(sink.program(), &f).0, XDP_DROP, "counted");
    }
    let t = sink.totals().unwrap();
    assert_eq!(
        (
            t.of(Direction::Uplink).packets,
            t.of(Direction::Downlink).packets
        ),
        (2, 8)
    );
    assert_eq!(t.other.packets, 0);
    // 50 octets of IP are too few for a TCP segment with its payload.
    let mut cfg = downlink(1);
    cfg.tcp_sizes = vec![64];
    assert!(Generator::load(cfg.frame_len(64)).is_err());
}

#[test]
fn bare_forwarder_decapsulates_and_encapsulates() {
    require_root!();
    let _cpu = OneCpu::new();
    let b = BareForwarder::load(bare_config(3, 6)).unwrap();
    let (n3, n6) = b.programs();
    let mut ul = Generator::load(uplink(1)).unwrap();
    let ss = sessions(1);
    ul.set_sessions(&ss).unwrap();
    let (_, g) = run_once(ul.program(), ul.frame());
    let (act, f) = run_once(n3, &g);
    assert_eq!(act, XDP_REDIRECT);
    assert_eq!(&f[0..12], &[MAC_DN_N6, MAC_UPF_N6].concat()[..]);
    assert_eq!(be16(&f, 12), 0x0800);
    assert_eq!(&f[14..], &g[58..], "the inner packet, untouched");

    let mut dl = Generator::load(downlink(1)).unwrap();
    dl.set_sessions(&ss).unwrap();
    let (_, g) = run_once(dl.program(), dl.frame());
    let (act, f) = run_once(n6, &g);
    assert_eq!(act, XDP_REDIRECT);
    assert_eq!(&f[0..12], &[MAC_GNB_N3, MAC_UPF_N3].concat()[..]);
    let udp = check_ipv4_udp(&f, 14, f.len() - 14, UPF_N3, GNB_N3);
    let info = gtpu::fastpath::parse_gpdu(&f[udp..]).unwrap();
    assert_eq!(
        (info.teid, info.qfi, info.pdu_type),
        (DL_TEID, Some(5), Some(0))
    );
    assert_eq!(info.payload(&f[udp..]), &g[14..]);

    // Not for the forwarder: to its own N6 address, or not a G-PDU to its N3 address.
    let mut to_us = g.clone();
    to_us[30..34].copy_from_slice(&UPF_N6.octets());
    assert_eq!(run_once(n6, &to_us).0, XDP_PASS);
    assert_eq!(run_once(n3, &g).0, XDP_PASS);
    let s = b.stats().unwrap();
    assert_eq!(
        (s.uplink.packets, s.downlink.packets, s.passed.packets),
        (1, 1, 2)
    );
}

#[test]
fn one_miss_forwarder_reads_each_sessions_record() {
    require_root!();
    let _cpu = OneCpu::new();
    let ss = sessions(3);
    let miss: Vec<MissSession> = ss
        .iter()
        .enumerate()
        .map(|(i, s)| MissSession {
            ue: s.ue,
            dl_teid: 0xd000 + i as u32,
        })
        .collect();
    let (b, layout) = BareForwarder::load_one_miss(bare_config(3, 6), &miss).unwrap();
    assert_eq!((layout.slots, layout.unslotted), (3, 0));
    let (n3, n6) = b.programs();
    // Uplink: the TEIDs the layout gives find their records; the UE's source is checked.
    let gen_ss: Vec<Session> = ss
        .iter()
        .zip(&layout.uplink_teids)
        .map(|(s, t)| Session { teid: *t, ..*s })
        .collect();
    let mut ul = Generator::load(uplink(1)).unwrap();
    ul.set_sessions(&gen_ss).unwrap();
    for _ in 0..3 {
        let (_, g) = run_once(ul.program(), ul.frame());
        let (act, f) = run_once(n3, &g);
        assert_eq!(act, XDP_REDIRECT);
        assert_eq!(&f[14..], &g[58..], "the inner packet, untouched");
    }
    let (_, g) = run_once(ul.program(), ul.frame());
    let mut spoofed = g.clone();
    spoofed[58 + 12..58 + 16].copy_from_slice(&Ipv4Addr::new(10, 99, 0, 1).octets());
    assert_eq!(run_once(n3, &spoofed).0, XDP_DROP, "not the session's UE");
    let mut unknown = g.clone();
    unknown[46..50].copy_from_slice(&0x1234u32.to_be_bytes());
    assert_eq!(run_once(n3, &unknown).0, XDP_DROP, "no record of the TEID");
    // Downlink: each UE's packets carry its session's TEID.
    let mut dl = Generator::load(downlink(1)).unwrap();
    dl.set_sessions(&ss).unwrap();
    for _ in 0..3 {
        let (_, g) = run_once(dl.program(), dl.frame());
        let (act, f) = run_once(n6, &g);
        assert_eq!(act, XDP_REDIRECT);
        let ue = Ipv4Addr::from(be32(&g, 30));
        let i = ss.iter().position(|s| s.ue == ue).expect("a session's UE");
        let udp = check_ipv4_udp(&f, 14, f.len() - 14, UPF_N3, GNB_N3);
        let info = gtpu::fastpath::parse_gpdu(&f[udp..]).unwrap();
        assert_eq!((info.teid, info.qfi), (0xd000 + i as u32, Some(5)));
    }
    let (_, mut g) = run_once(dl.program(), dl.frame());
    g[30..34].copy_from_slice(&Ipv4Addr::new(10, 99, 0, 1).octets());
    assert_eq!(run_once(n6, &g).0, XDP_DROP, "no record of the UE");
    let s = b.stats().unwrap();
    assert_eq!(
        (s.uplink.packets, s.downlink.packets, s.misses.packets),
        (3, 3, 3)
    );
}

// ---------------------------------------------------------------------------------------
// Namespaces

fn sh(args: &[&str]) -> Result<String, String> {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .map_err(|e| format!("{}: {e}", args.join(" ")))?;
    if !out.status.success() {
        return Err(format!(
            "{}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// gnb --n3-- upf --n6-- dn, as the lab builds them (addresses, MACs, static
/// neighbours, XDP_PASS on gnb n3 and dn n6). Removed on drop.
struct Topo {
    prefix: String,
}

impl Topo {
    fn up(prefix: &str) -> Topo {
        let t = Topo {
            prefix: prefix.to_string(),
        };
        t.remove();
        t.build()
            .unwrap_or_else(|e| panic!("building {prefix} namespaces: {e}"));
        t
    }

    fn ns(&self, role: &str) -> String {
        format!("{}{role}", self.prefix)
    }

    fn build(&self) -> Result<(), String> {
        let (gnb, upf, dn) = (self.ns("gnb"), self.ns("upf"), self.ns("dn"));
        for n in [&gnb, &upf, &dn] {
            sh(&["ip", "netns", "add", n])?;
            sh(&["ip", "-n", n, "link", "set", "lo", "up"])?;
        }
        let mac = |m: [u8; 6]| {
            m.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(":")
        };
        for (a, am, b, bm, dev) in [
            (&gnb, MAC_GNB_N3, &upf, MAC_UPF_N3, "n3"),
            (&upf, MAC_UPF_N6, &dn, MAC_DN_N6, "n6"),
        ] {
            sh(&[
                "ip",
                "link",
                "add",
                dev,
                "netns",
                a,
                "address",
                &mac(am),
                "type",
                "veth",
                "peer",
                "name",
                dev,
                "netns",
                b,
                "address",
                &mac(bm),
            ])?;
            sh(&["ip", "-n", a, "link", "set", dev, "up"])?;
            sh(&["ip", "-n", b, "link", "set", dev, "up"])?;
        }
        let addr = |n: &str, a: Ipv4Addr, dev: &str| {
            sh(&["ip", "-n", n, "addr", "add", &format!("{a}/24"), "dev", dev])
        };
        let neigh = |n: &str, a: Ipv4Addr, m: [u8; 6], dev: &str| {
            sh(&[
                "ip",
                "-n",
                n,
                "neigh",
                "replace",
                &a.to_string(),
                "lladdr",
                &mac(m),
                "dev",
                dev,
                "nud",
                "permanent",
            ])
        };
        addr(&gnb, GNB_N3, "n3")?;
        addr(&upf, UPF_N3, "n3")?;
        addr(&upf, UPF_N6, "n6")?;
        addr(&dn, DN_N6, "n6")?;
        neigh(&gnb, UPF_N3, MAC_UPF_N3, "n3")?;
        neigh(&upf, GNB_N3, MAC_GNB_N3, "n3")?;
        neigh(&upf, DN_N6, MAC_DN_N6, "n6")?;
        neigh(&dn, UPF_N6, MAC_UPF_N6, "n6")?;
        let obj = std::env::temp_dir().join(format!("bench-test-pass-{}.o", std::process::id()));
        std::fs::write(&obj, bench_bpf::PASS_OBJECT).map_err(|e| e.to_string())?;
        let obj_s = obj.to_string_lossy().into_owned();
        let r = (|| {
            for (n, dev) in [(&gnb, "n3"), (&dn, "n6")] {
                sh(&[
                    "ip", "-n", n, "link", "set", "dev", dev, "xdpdrv", "obj", &obj_s, "sec", "xdp",
                ])?;
            }
            Ok(())
        })();
        let _ = std::fs::remove_file(&obj);
        r
    }

    fn remove(&self) {
        for role in ["gnb", "upf", "dn"] {
            let n = self.ns(role);
            if std::path::Path::new("/var/run/netns").join(&n).exists() {
                if let Err(e) = sh(&["ip", "netns", "del", &n]) {
                    eprintln!("{e}");
                }
            }
        }
    }

    /// The id of the XDP program on `dev` in `role`, if any.
    fn xdp_prog(&self, role: &str, dev: &str) -> Option<String> {
        let out = sh(&["ip", "-n", &self.ns(role), "-d", "link", "show", "dev", dev]).ok()?;
        let i = out.find("prog/xdp id ")?;
        out[i + 12..].split_whitespace().next().map(str::to_string)
    }
}

impl Drop for Topo {
    fn drop(&mut self) {
        self.remove();
    }
}

/// Serialises the tests that send through namespaces: they pin generators to CPU 0 and
/// read the veths' counters.
fn live() -> std::sync::MutexGuard<'static, ()> {
    static LIVE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Moves the calling thread between namespaces; back where it started on drop.
struct NsGuard {
    home: File,
}

impl NsGuard {
    fn new() -> NsGuard {
        NsGuard {
            home: File::open("/proc/thread-self/ns/net").expect("own netns"),
        }
    }

    fn enter(&self, name: &str) {
        let f = File::open(format!("/var/run/netns/{name}")).expect("netns");
        // SAFETY: setns on an open namespace file; moves this thread only.
        assert_eq!(unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) }, 0);
    }

    fn ifindex(&self, dev: &str) -> u32 {
        let name = std::ffi::CString::new(dev).unwrap();
        // SAFETY: a valid C string.
        let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert_ne!(i, 0, "no interface {dev}");
        i
    }
}

impl Drop for NsGuard {
    fn drop(&mut self) {
        // SAFETY: as in enter.
        unsafe { libc::setns(self.home.as_raw_fd(), libc::CLONE_NEWNET) };
    }
}

/// The lab with the bare forwarder in upf and sinks in gnb and dn.
struct Rig {
    ul: Generator,
    dl: Generator,
    gnb_sink: Sink,
    dn_sink: Sink,
    bare: Option<BareForwarder>,
    gnb_n3: u32,
    upf_n3: u32,
}

fn rig(ns: &NsGuard, topo: &Topo, max_sessions: u32) -> Rig {
    ns.enter(&topo.ns("gnb"));
    let gnb_n3 = ns.ifindex("n3");
    let gnb_sink = Sink::attach(gnb_n3, max_sessions).expect("sink on gnb n3");
    let mut cfg = uplink(gnb_n3);
    cfg.max_sessions = max_sessions;
    // One CPU: one round robin, so every session gets the same share.
    cfg.cpu = Some(0);
    let ul = Generator::load(cfg).expect("uplink generator");
    ns.enter(&topo.ns("dn"));
    let dn_n6 = ns.ifindex("n6");
    let dn_sink = Sink::attach(dn_n6, max_sessions).expect("sink on dn n6");
    let mut cfg = downlink(dn_n6);
    cfg.max_sessions = max_sessions;
    cfg.cpu = Some(0);
    let dl = Generator::load(cfg).expect("downlink generator");
    ns.enter(&topo.ns("upf"));
    let (upf_n3, upf_n6) = (ns.ifindex("n3"), ns.ifindex("n6"));
    let bare = BareForwarder::attach(bare_config(upf_n3, upf_n6)).expect("bare forwarder");
    Rig {
        ul,
        dl,
        gnb_sink,
        dn_sink,
        bare: Some(bare),
        gnb_n3,
        upf_n3,
    }
}

fn ping(topo: &Topo, role: &str, to: Ipv4Addr) -> bool {
    // One echo, its answer awaited up to 10 s (a busy machine may be slow to run either
    // side): bounded by that.
    sh(&[
        "ip",
        "netns",
        "exec",
        &topo.ns(role),
        "ping",
        "-c",
        "1",
        "-W",
        "10",
        &to.to_string(),
    ])
    .is_ok()
}

/// How long a wait for something that will happen may take before the test fails:
/// generous, since every wait ends as soon as its condition holds.
const SETTLE: Duration = Duration::from_secs(60);

/// Waits until `f` holds (frames still in flight in the veths), at most [`SETTLE`].
fn settle(mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + SETTLE;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// A veth's own drop counters (`ethtool -S`, summed over its queues).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct VethDrops {
    /// Frames redirected or sent out of it (ndo_xdp_xmit) that its peer's ring had no
    /// room for.
    xmit_errors: u64,
    /// Frames its XDP program redirected (or passed) that the kernel then dropped.
    rx_drops: u64,
}

fn veth_drops(topo: &Topo, role: &str, dev: &str) -> VethDrops {
    let out = sh(&["ip", "netns", "exec", &topo.ns(role), "ethtool", "-S", dev])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut d = VethDrops::default();
    for line in out.lines() {
        let Some((k, v)) = line.trim().split_once(':') else {
            continue;
        };
        let Ok(v) = v.trim().parse::<u64>() else {
            continue;
        };
        if k.starts_with("tx_queue_") && k.ends_with("_xdp_xmit_errors") {
            d.xmit_errors += v;
        } else if k.starts_with("rx_queue_") && k.ends_with("_drops") && !k.ends_with("_xdp_drops")
        {
            d.rx_drops += v;
        }
    }
    d
}

/// Where the rig can lose a direction's frames between the generator and the sink, each
/// by the veth counter that names the place.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Losses {
    /// Into upf: no room in the ring of upf's side (the sending veth's xdp_xmit_errors:
    /// gnb n3 uplink, dn n6 downlink).
    into_upf: u64,
    /// In upf: the forwarder's redirect failed (upf's ingress veth's drops).
    in_upf: u64,
    /// Out of upf: no room in the ring of the sink's side (upf's egress veth's
    /// xdp_xmit_errors).
    out_of_upf: u64,
}

impl Losses {
    fn read(topo: &Topo, dir: Direction) -> Losses {
        let ((role, dev), ingress, egress) = match dir {
            Direction::Uplink => (("gnb", "n3"), "n3", "n6"),
            Direction::Downlink => (("dn", "n6"), "n6", "n3"),
        };
        Losses {
            into_upf: veth_drops(topo, role, dev).xmit_errors,
            in_upf: veth_drops(topo, "upf", ingress).rx_drops,
            out_of_upf: veth_drops(topo, "upf", egress).xmit_errors,
        }
    }

    fn since(self, o: Losses) -> Losses {
        Losses {
            into_upf: self.into_upf - o.into_upf,
            in_upf: self.in_upf - o.in_upf,
            out_of_upf: self.out_of_upf - o.out_of_upf,
        }
    }

    fn total(&self) -> u64 {
        self.into_upf + self.in_upf + self.out_of_upf
    }
}

/// What reached the far end of one direction, and what the veths lost on the way.
#[derive(Debug, Clone, Copy)]
struct Arrived {
    packets: u64,
    lost: Losses,
}

/// Waits (at most [`SETTLE`]) until each of the `sent` packets of `dir` arrived (`got`:
/// the far end's count of them) or was counted lost by a veth (from `lost0`, read
/// before sending), and checks that they add up exactly.
fn arrive(topo: &Topo, dir: Direction, sent: u64, lost0: Losses, got: impl Fn() -> u64) -> Arrived {
    let mut a = Arrived {
        packets: 0,
        lost: Losses::default(),
    };
    settle(|| {
        a = Arrived {
            packets: got(),
            lost: Losses::read(topo, dir).since(lost0),
        };
        a.packets + a.lost.total() >= sent
    });
    assert_eq!(
        a.packets + a.lost.total(),
        sent,
        "{dir:?}: {sent} sent, {a:?} (arrived + lost must be what was sent)"
    );
    if a.lost.total() > 0 {
        eprintln!(
            "{dir:?}: {} of {sent} lost in the veths, {:?}",
            a.lost.total(),
            a.lost
        );
    }
    a
}

/// Each session's packets at a sink against what the generator sent it: equal when
/// nothing was lost, else none more, and the shortfall exactly the packets lost.
fn check_sessions(dir: Direction, got: &[Count], sent: &[u64], lost: u64) {
    let others: u64 = got[sent.len()..].iter().map(|c| c.packets).sum();
    assert_eq!(others, 0, "{dir:?}: packets of sessions not sent to");
    let mut short = 0;
    for (s, (c, p)) in got.iter().zip(sent).enumerate() {
        assert!(c.packets <= *p, "{dir:?} session {s}: {} of {p}", c.packets);
        short += p - c.packets;
    }
    assert_eq!(
        short, lost,
        "{dir:?}: the sessions' shortfall is the packets lost"
    );
}

/// The octets at a sink against the generator's: `sent` packets of `bytes` octets
/// (frames of `sizes`), each `grown` octets longer through the forwarder (uplink,
/// decapsulated: -44; downlink, encapsulated: +44). `lost` packets are missing by at
/// least as many of the smallest frames and at most as many of the largest: exact when
/// nothing was lost or with one size.
fn check_bytes(
    dir: Direction,
    got: u64,
    sent: u64,
    bytes: u64,
    sizes: &[(u16, u32)],
    grown: i64,
    lost: u64,
) {
    let all = (bytes as i64 + grown * sent as i64) as u64;
    let min = sizes.iter().map(|s| s.0).min().expect("a size") as i64 + grown;
    let max = sizes.iter().map(|s| s.0).max().expect("a size") as i64 + grown;
    let (lo, hi) = (all - lost * max as u64, all - lost * min as u64);
    assert!(
        (lo..=hi).contains(&got),
        "{dir:?}: {got} octets, not within {lo}..={hi} ({sent} packets sent, {bytes} octets, {lost} lost)"
    );
}

/// A sink's latencies in `dir`: one per packet that arrived, none longer than the time
/// since `since` (read before the packets were stamped). Printed, never judged.
fn check_latency(dir: Direction, sink: &Sink, arrived: u64, since: Instant) -> Percentiles {
    let bound = since.elapsed();
    let h = sink.latency(dir).unwrap();
    assert_eq!(h.count(), arrived, "{dir:?}: a latency per packet");
    let top = (0..h.buckets.len())
        .rev()
        .find(|&i| h.buckets[i] > 0)
        .expect("a latency");
    let (lo, _) = hist_bounds(top);
    assert!(
        Duration::from_micros(lo) <= bound,
        "{dir:?}: a latency of at least {lo} us, in {bound:?}"
    );
    h.percentiles().expect("a latency")
}

#[test]
fn traffic_through_the_bare_forwarder_arrives_exactly() {
    require_root!();
    let _live = live();
    let started = Instant::now();
    let topo = Topo::up("tg-");
    let ns = NsGuard::new();
    let pass_gnb = topo.xdp_prog("gnb", "n3").expect("XDP_PASS on gnb n3");
    let mut r = rig(&ns, &topo, 128);

    // Foreign traffic still works through sinks and forwarder (ARP and ICMP passed).
    assert!(
        ping(&topo, "gnb", UPF_N3),
        "gnb -> upf n3 ping with the sink attached"
    );
    assert!(ping(&topo, "dn", UPF_N6), "dn -> upf n6 ping");
    assert!(r.gnb_sink.totals().unwrap().other.packets >= 1);

    let ss = sessions(100);
    let bare = |r: &Rig| r.bare.as_ref().unwrap().stats().unwrap();
    // Uplink: 10,000 packets for 100 sessions, paced (a veth loses none at this rate
    // unless its receiver starves; what it loses, it counts).
    r.ul.set_sessions(&ss).unwrap();
    let (lost0, b0, t0) = (
        Losses::read(&topo, Direction::Uplink),
        bare(&r),
        Instant::now(),
    );
    let sent = r.ul.send(Some(50_000), 10_000, SETTLE).unwrap();
    assert!(sent.complete, "{sent:?}");
    assert_eq!(sent.packets, 10_000);
    let per = r.ul.sent_per_session().unwrap();
    assert_eq!(per, vec![100; 100]);
    let up = |s: &Sink| s.totals().unwrap().of(Direction::Uplink).packets;
    let a = arrive(&topo, Direction::Uplink, sent.packets, lost0, || {
        up(&r.dn_sink)
    });
    let got = r.dn_sink.counts(Direction::Uplink).unwrap();
    check_sessions(Direction::Uplink, &got, &per, a.lost.total());
    let t = r.dn_sink.totals().unwrap();
    assert_eq!(t.of(Direction::Uplink).packets, a.packets);
    // Decapsulated: 44 octets of outer IPv4, UDP, GTP-U and container less.
    let sizes = &r.ul.config().sizes;
    let (n, b) = (sent.packets, sent.bytes);
    let lost = a.lost.total();
    check_bytes(
        Direction::Uplink,
        t.of(Direction::Uplink).bytes,
        n,
        b,
        sizes,
        -44,
        lost,
    );
    assert_eq!(t.bad_session, 0);
    // The forwarder forwarded every packet that reached it.
    let b1 = bare(&r);
    assert_eq!(b1.uplink.packets - b0.uplink.packets, n - a.lost.into_upf);
    let lat = check_latency(Direction::Uplink, &r.dn_sink, a.packets, t0);
    eprintln!("uplink {sent:?} ({:.0} pps), latency {lat:?}", sent.pps);

    // Downlink: 10,000 packets.
    r.dl.set_sessions(&ss).unwrap();
    let (lost0, b0, t0) = (
        Losses::read(&topo, Direction::Downlink),
        bare(&r),
        Instant::now(),
    );
    let sent = r.dl.send(Some(50_000), 10_000, SETTLE).unwrap();
    assert!(sent.complete && sent.packets == 10_000, "{sent:?}");
    let per = r.dl.sent_per_session().unwrap();
    let down = |s: &Sink| s.totals().unwrap().of(Direction::Downlink).packets;
    let a = arrive(&topo, Direction::Downlink, sent.packets, lost0, || {
        down(&r.gnb_sink)
    });
    let got = r.gnb_sink.counts(Direction::Downlink).unwrap();
    check_sessions(Direction::Downlink, &got, &per, a.lost.total());
    let t = r.gnb_sink.totals().unwrap();
    assert_eq!(t.of(Direction::Downlink).packets, a.packets);
    let sizes = &r.dl.config().sizes;
    let (n, b) = (sent.packets, sent.bytes);
    let lost = a.lost.total();
    check_bytes(
        Direction::Downlink,
        t.of(Direction::Downlink).bytes,
        n,
        b,
        sizes,
        44,
        lost,
    );
    let lat = check_latency(Direction::Downlink, &r.gnb_sink, a.packets, t0);
    eprintln!("downlink {sent:?} ({:.0} pps), latency {lat:?}", sent.pps);
    let b1 = bare(&r);
    assert_eq!(
        b1.downlink.packets - b0.downlink.packets,
        n - a.lost.into_upf
    );
    assert_eq!(b1.errors.packets, 0);

    // A size mix up to the MTU: every frame gets through, the octets add up.
    ns.enter(&topo.ns("gnb"));
    let mut cfg = uplink(r.gnb_n3);
    cfg.cpu = Some(0);
    cfg.max_sessions = 128;
    cfg.sizes = vec![(122, 2), (700, 1), (1514, 1)];
    let mut mix = Generator::load(cfg).unwrap();
    mix.set_sessions(&ss).unwrap();
    let before = r.dn_sink.totals().unwrap().of(Direction::Uplink);
    let lost0 = Losses::read(&topo, Direction::Uplink);
    let sent = mix.send(Some(50_000), 1000, SETTLE).unwrap();
    assert!(sent.complete, "{sent:?}");
    assert_eq!(sent.bytes, 250 * (2 * 122 + 700 + 1514));
    let a = arrive(&topo, Direction::Uplink, sent.packets, lost0, || {
        up(&r.dn_sink) - before.packets
    });
    let got = r.dn_sink.totals().unwrap().of(Direction::Uplink) - before;
    let sizes = &mix.config().sizes;
    let lost = a.lost.total();
    check_bytes(
        Direction::Uplink,
        got.bytes,
        1000,
        sent.bytes,
        sizes,
        -44,
        lost,
    );
    drop(mix);

    // Generator limit: the uplink generator into a drop program on upf n3.
    r.bare = None;
    ns.enter(&topo.ns("upf"));
    let dropper = DropSink::attach(r.upf_n3).expect("drop on upf n3");
    // Only the generator's IPv4/UDP frames are counted and dropped: ARP and ping pass.
    assert!(
        ping(&topo, "gnb", UPF_N3),
        "ping with the drop program attached"
    );
    assert_eq!(dropper.count().unwrap().packets, 0);
    let lost0 = Losses::read(&topo, Direction::Uplink);
    let sent = r.ul.send(None, 200_000, Duration::from_secs(5)).unwrap();
    assert!(sent.packets > 0);
    // As fast as it goes the veth's ring may overflow: every packet is dropped by the
    // program or counted lost by the veth.
    let a = arrive(&topo, Direction::Uplink, sent.packets, lost0, || {
        dropper.count().unwrap().packets
    });
    assert!(a.packets > 0, "{a:?}");
    eprintln!(
        "generator -> drop (debug build, not a measurement): {:.2} Mpps, {} dropped by the program, {} lost in the veth",
        sent.pps / 1e6,
        a.packets,
        a.lost.total()
    );

    // Detaching puts the lab's XDP_PASS back.
    drop(dropper);
    drop(r);
    assert_eq!(topo.xdp_prog("gnb", "n3"), Some(pass_gnb));
    assert!(topo.xdp_prog("upf", "n3").is_none());
    drop(ns);
    drop(topo);
    eprintln!("took {:?}", started.elapsed());
}

/// Both directions from one thread, through the bare forwarder: `totals` at `rates`
/// within `deadline`, the sinks reset first. Returns the reports and checks that every
/// packet sent arrived, session by session, or was counted lost by a veth.
fn dual_trial(
    g: &mut DualGenerator,
    r: &Rig,
    topo: &Topo,
    rates: [Option<u64>; 2],
    totals: [u64; 2],
    deadline: Duration,
) -> [SendReport; 2] {
    r.gnb_sink.reset().unwrap();
    r.dn_sink.reset().unwrap();
    g.set_sessions(&sessions(100)).unwrap();
    let lost0 = Direction::BOTH.map(|d| Losses::read(topo, d));
    let b0 = r.bare.as_ref().unwrap().stats().unwrap();
    let rep = g.send(rates, totals, deadline).unwrap();
    let sinks = [
        (&r.dn_sink, Direction::Uplink),
        (&r.gnb_sink, Direction::Downlink),
    ];
    for (sink, dir) in sinks {
        let i = dir as usize;
        let want = rep[i].packets;
        let sent = g.sent_per_session(dir).unwrap();
        assert_eq!(sent.iter().sum::<u64>(), want, "{dir:?}");
        let a = arrive(topo, dir, want, lost0[i], || {
            sink.totals().unwrap().of(dir).packets
        });
        check_sessions(dir, &sink.counts(dir).unwrap(), &sent, a.lost.total());
        let t = sink.totals().unwrap();
        // Decapsulated uplink loses, encapsulated downlink gains 44 octets.
        let grown = match dir {
            Direction::Uplink => -44,
            Direction::Downlink => 44,
        };
        let sizes = &g.config(dir).expect("both directions").sizes;
        let lost = a.lost.total();
        check_bytes(dir, t.of(dir).bytes, want, rep[i].bytes, sizes, grown, lost);
        assert_eq!(t.bad_session, 0);
        // The forwarder forwarded every packet that reached it.
        let b1 = r.bare.as_ref().unwrap().stats().unwrap();
        let fwd = match dir {
            Direction::Uplink => b1.uplink.packets - b0.uplink.packets,
            Direction::Downlink => b1.downlink.packets - b0.downlink.packets,
        };
        assert_eq!(fwd, want - a.lost.into_upf, "{dir:?}: forwarded");
    }
    rep
}

/// A paced direction never runs ahead of its schedule: packet k leaves no sooner than
/// k intervals after the first, so `n` packets take at least n intervals as
/// [`DualGenerator::send`] counts (first to last, plus one). A slow machine only makes
/// it longer; a generator that does not pace is tens of times too fast.
fn check_schedule(dir: Direction, rate: u64, rep: &SendReport) {
    let interval_ps = 1_000_000_000_000 / rate;
    let n = rep.packets;
    let least = (n - 1) * interval_ps / 1000 + interval_ps / 1000;
    assert!(
        rep.elapsed >= Duration::from_nanos(least),
        "{dir:?}: {n} packets at {rate} pps in {:?}, ahead of the schedule ({least} ns)",
        rep.elapsed
    );
}

#[test]
fn dual_generator_paces_both_directions_from_one_thread() {
    require_root!();
    let _live = live();
    let topo = Topo::up("tg-2-");
    let ns = NsGuard::new();
    let r = rig(&ns, &topo, 128);
    ns.enter(&topo.ns("dn"));
    let dn_n6 = ns.ifindex("n6");
    let (mut ul, mut dl) = (uplink(r.gnb_n3), downlink(dn_n6));
    (ul.cpu, dl.cpu) = (Some(0), Some(0));
    dl.sizes = vec![(78, 3), (500, 1)];
    let (gnb, dn) = (topo.ns("gnb"), topo.ns("dn"));
    // Loaded and run in upf's namespace: the ports are written in gnb and dn.
    ns.enter(&topo.ns("upf"));
    let mut g = DualGenerator::load(Some(ul), Some(dl), [Some(gnb.as_str()), Some(dn.as_str())])
        .expect("dual generator");

    // 20 kpps up and 30 kpps down at once, half a second's worth, as the capacity
    // trials ask; then again with packets flushed in batches of 200 us. Each direction
    // spends its whole budget (the deadline is generous) and never runs ahead of its
    // schedule; how close to the rate asked it keeps is measured by `measure_dual`.
    let rates = [20_000u64, 30_000];
    let totals = rates.map(|x| x / 2);
    for flush in [None, Some(Duration::from_micros(200))] {
        g.set_flush(flush).unwrap();
        let rep = dual_trial(&mut g, &r, &topo, rates.map(Some), totals, SETTLE);
        for (i, dir) in Direction::BOTH.into_iter().enumerate() {
            eprintln!(
                "{dir:?} asked {} pps, flush {flush:?}: achieved {:.0} pps, {:?}",
                rates[i], rep[i].pps, rep[i]
            );
            assert!(rep[i].complete, "{dir:?}: {rep:?}");
            assert_eq!(rep[i].packets, totals[i], "{dir:?}: the budget, spent");
            check_schedule(dir, rates[i], &rep[i]);
        }
    }
    g.set_flush(None).unwrap();

    // One paced, one unpaced: the unpaced one takes the runs left; one absent.
    let rep = dual_trial(
        &mut g,
        &r,
        &topo,
        [Some(20_000), None],
        [4_000, 30_000],
        SETTLE,
    );
    assert!(rep[0].complete && rep[1].complete, "{rep:?}");
    assert_eq!((rep[0].packets, rep[1].packets), (4_000, 30_000));
    check_schedule(Direction::Uplink, 20_000, &rep[0]);
    let rep = dual_trial(&mut g, &r, &topo, [None, Some(0)], [5_000, 1], SETTLE);
    assert_eq!((rep[0].packets, rep[1].packets), (5_000, 0));
    // Both unpaced, 1:3.
    g.set_weights([1, 3]).unwrap();
    let rep = dual_trial(&mut g, &r, &topo, [None, None], [2_000, 6_000], SETTLE);
    assert_eq!((rep[0].packets, rep[1].packets), (2_000, 6_000));
    let b = r.bare.as_ref().unwrap().stats().unwrap();
    assert_eq!(b.errors.packets, 0);
    drop(g);
    drop(r);
    drop(ns);
    drop(topo);
}

/// Mpps of `n` packets over `d`.
fn mpps(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64() / 1e6
}

/// Offered, forwarded and received Mpps of the bare forwarder at saturation, each way.
fn saturate(r: &mut Rig, secs: u64, label: &str) {
    for dir in Direction::BOTH {
        let (g, sink) = match dir {
            Direction::Uplink => (&mut r.ul, &r.dn_sink),
            Direction::Downlink => (&mut r.dl, &r.gnb_sink),
        };
        let bare = r.bare.as_ref().unwrap();
        let (b0, s0) = (bare.stats().unwrap(), sink.totals().unwrap().of(dir));
        let c0 = cpu_busy();
        let s = g.send(None, u64::MAX, Duration::from_secs(secs)).unwrap();
        let c1 = cpu_busy();
        std::thread::sleep(Duration::from_millis(200));
        let (b1, s1) = (bare.stats().unwrap(), sink.totals().unwrap().of(dir));
        let fwd = match dir {
            Direction::Uplink => b1.uplink.packets - b0.uplink.packets,
            Direction::Downlink => b1.downlink.packets - b0.downlink.packets,
        };
        println!(
            "bare forwarder, {label}, {dir:?}, 64 B user packets: offered {:.2} Mpps, forwarded {:.2} Mpps, at the sink {:.2} Mpps",
            s.pps / 1e6,
            mpps(fwd, s.elapsed),
            mpps(s1.packets - s0.packets, s.elapsed)
        );
        println!("  CPUs busy: {}", busy(&c0, &c1));
    }
}

/// "a %, b %": how busy each CPU was between two [`cpu_busy`] readings.
fn busy(c0: &[(u64, u64)], c1: &[(u64, u64)]) -> String {
    c0.iter()
        .zip(c1)
        .map(|(a, b)| {
            format!(
                "{:.0} %",
                100.0 * (b.0 - a.0) as f64 / (b.1 - a.1).max(1) as f64
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Both directions from one thread (not an assertion on speed): a [`DualGenerator`] on
/// CPU 0, 64 B user packets, 1000 sessions, timestamps on as in upfbench; unpaced 1:1
/// through the bare forwarder (NAPI threads real-time on CPU 1), paced at several rates
/// (the rate achieved against the rate asked, the packets sent of the totals and the
/// time they took: the pacing accuracy, which the tests do not assert), then unpaced
/// into drop programs on upf n3 and n6 (one core, then CPU 1). BENCH_SECS (default 3)
/// per figure:
/// `cargo test --release -p bench-bpf --test bench -- --ignored --nocapture measure_dual`
#[test]
#[ignore = "a measurement: run by hand, in release mode"]
fn measure_dual() {
    require_root!();
    let secs: u64 = std::env::var("BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let _live = live();
    let topo = Topo::up("tg-m2-");
    let ns = NsGuard::new();
    let ss = sessions(1000);
    let mut r = rig(&ns, &topo, 1000);
    for dev in ["n3", "n6"] {
        let pid = napi_thread(&topo.ns("upf"), dev, 1).unwrap();
        set_fifo(pid, 50).unwrap();
    }
    // Through the bare forwarder on CPU 1: unpaced, then paced.
    ns.enter(&topo.ns("dn"));
    let dn_n6 = ns.ifindex("n6");
    let (mut ulc, mut dlc) = (uplink(r.gnb_n3), downlink(dn_n6));
    (ulc.cpu, dlc.cpu) = (Some(0), Some(0));
    (ulc.max_sessions, dlc.max_sessions) = (1000, 1000);
    let (gnb, dn) = (topo.ns("gnb"), topo.ns("dn"));
    let mut d = DualGenerator::load(Some(ulc), Some(dlc), [Some(&gnb), Some(&dn)]).unwrap();
    d.set_sessions(&ss).unwrap();
    let bare = r.bare.as_ref().unwrap();
    let (b0, c0) = (bare.stats().unwrap(), cpu_busy());
    let (u0, d0) = (
        r.dn_sink.totals().unwrap().of(Direction::Uplink),
        r.gnb_sink.totals().unwrap().of(Direction::Downlink),
    );
    let s = d
        .send([None, None], [u64::MAX / 2; 2], Duration::from_secs(secs))
        .unwrap();
    let c1 = cpu_busy();
    std::thread::sleep(Duration::from_millis(200));
    let b1 = bare.stats().unwrap();
    let (u1, d1) = (
        r.dn_sink.totals().unwrap().of(Direction::Uplink),
        r.gnb_sink.totals().unwrap().of(Direction::Downlink),
    );
    println!(
        "dual, bare forwarder on CPU 1, unpaced 1:1: offered {:.2} + {:.2} Mpps (up + down), forwarded {:.2} + {:.2}, at the sinks {:.2} + {:.2}; CPUs busy {}",
        s[0].pps / 1e6,
        s[1].pps / 1e6,
        mpps(b1.uplink.packets - b0.uplink.packets, s[0].elapsed),
        mpps(b1.downlink.packets - b0.downlink.packets, s[1].elapsed),
        mpps((u1 - u0).packets, s[0].elapsed),
        mpps((d1 - d0).packets, s[1].elapsed),
        busy(&c0, &c1),
    );
    for (flush, rates) in [None, Some(Duration::from_micros(200))]
        .into_iter()
        .flat_map(|f| {
            [
                [20_000u64, 30_000],
                [200_000, 300_000],
                [500_000, 500_000],
                [1_000_000, 1_000_000],
            ]
            .map(|r| (f, r))
        })
    {
        d.set_flush(flush).unwrap();
        r.dn_sink.reset().unwrap();
        r.gnb_sink.reset().unwrap();
        let totals = rates.map(|x| x * secs);
        let s = d
            .send(rates.map(Some), totals, Duration::from_secs(secs))
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let got = [
            r.dn_sink.totals().unwrap().of(Direction::Uplink).packets,
            r.gnb_sink.totals().unwrap().of(Direction::Downlink).packets,
        ];
        let lat = [
            r.dn_sink.latency_percentiles(Direction::Uplink).unwrap(),
            r.gnb_sink.latency_percentiles(Direction::Downlink).unwrap(),
        ];
        let lat: Vec<String> = lat
            .iter()
            .map(|l| match l {
                Some(p) => format!("p50 {:?} p99 {:?} p99.9 {:?}", p.p50, p.p99, p.p999),
                None => "-".into(),
            })
            .collect();
        // How close to the rate asked: the figure the test suite does not assert.
        let off = |i: usize| 100.0 * (s[i].pps - rates[i] as f64) / rates[i] as f64;
        println!(
            "dual paced {rates:?} pps for {secs} s, flush {flush:?}: achieved {:.0} + {:.0} pps ({:+.1} %, {:+.1} % of asked) in {} calls, {:?} + {:?}; sent {} + {} of {} + {}, received {} + {}; latency up {}, down {}",
            s[0].pps, s[1].pps, off(0), off(1), s[0].calls, s[0].elapsed, s[1].elapsed, s[0].packets, s[1].packets, totals[0], totals[1], got[0], got[1], lat[0], lat[1]
        );
    }

    // Into drop programs on upf n3 and n6: the generator limit, both ways at once.
    r.bare = None;
    ns.enter(&topo.ns("upf"));
    let (upf_n3, upf_n6) = (ns.ifindex("n3"), ns.ifindex("n6"));
    let drops = [
        DropSink::attach(upf_n3).unwrap(),
        DropSink::attach(upf_n6).unwrap(),
    ];
    for threaded in [false, true] {
        for dev in ["n3", "n6"] {
            if threaded {
                let pid = napi_thread(&topo.ns("upf"), dev, 1).unwrap();
                set_fifo(pid, 50).unwrap();
            } else {
                napi_unthread(&topo.ns("upf"), dev).unwrap();
            }
        }
        let before = drops.each_ref().map(|x| x.count().unwrap());
        let c0 = cpu_busy();
        let s = d
            .send([None, None], [u64::MAX / 2; 2], Duration::from_secs(secs))
            .unwrap();
        let c1 = cpu_busy();
        std::thread::sleep(Duration::from_millis(200));
        let got: Vec<u64> = drops
            .iter()
            .zip(&before)
            .map(|(x, b)| (x.count().unwrap() - *b).packets)
            .collect();
        println!(
            "dual -> drop on upf n3 + n6, {}, unpaced 1:1: generated {:.2} + {:.2} Mpps, dropped {:.2} + {:.2}; CPUs busy {}",
            if threaded { "drops on CPU 1" } else { "one core" },
            s[0].pps / 1e6,
            s[1].pps / 1e6,
            mpps(got[0], s[0].elapsed),
            mpps(got[1], s[1].elapsed),
            busy(&c0, &c1),
        );
    }
    for dev in ["n3", "n6"] {
        napi_unthread(&topo.ns("upf"), dev).unwrap();
    }
    drop(drops);
    drop(d);
    drop(r);
    drop(ns);
    drop(topo);
}

/// The machine's limits (not an assertion on speed): the generator into a drop
/// program, and the bare forwarder both ways, 64-octet user packets, 1000 sessions,
/// generator on CPU 0. BENCH_SECS (default 3) per figure, BENCH_BATCH frames per
/// live-frames batch (default: the kernel's 64).
#[test]
#[ignore = "a measurement: run by hand, in release mode"]
fn measure_limits() {
    require_root!();
    let secs: u64 = std::env::var("BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let _live = live();
    let topo = Topo::up("tg-m-");
    let ns = NsGuard::new();
    let ss = sessions(1000);

    ns.enter(&topo.ns("upf"));
    let upf_n3 = ns.ifindex("n3");
    let dropper = DropSink::attach(upf_n3).unwrap();
    ns.enter(&topo.ns("gnb"));
    let mut cfg = uplink(ns.ifindex("n3"));
    cfg.cpu = Some(0);
    cfg.max_sessions = 1000;
    cfg.timestamps = false;
    cfg.batch = std::env::var("BENCH_BATCH")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut g = Generator::load(cfg).unwrap();
    g.set_sessions(&ss).unwrap();

    // The program alone (no live frames: the kernel times the runs), then the cost of
    // a live-frames call.
    let frame = g.frame().to_vec();
    let input = ProgramInput {
        data_in: Some(&frame),
        repeat: 1_000_000,
        ..Default::default()
    };
    let o = g.program().test_run(input).unwrap();
    println!(
        "generator program alone, uplink 122 B: {:?} per packet",
        o.duration
    );
    for n in [1u32, 1000, 1_000_000] {
        let r = g.run(n).unwrap();
        println!("BPF_PROG_RUN live frames, repeat {n}: {:?}", r.elapsed);
    }

    // Generator limit: the drop program in the generator's softirq (one core), then
    // in a real-time NAPI thread on CPU 1.
    for threaded in [false, true] {
        if threaded {
            let pid = napi_thread(&topo.ns("upf"), "n3", 1).unwrap();
            set_fifo(pid, 50).unwrap();
        }
        let before = dropper.count().unwrap();
        let s = g.send(None, u64::MAX, Duration::from_secs(secs)).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let d = dropper.count().unwrap() - before;
        println!(
            "generator -> drop, uplink 122 B, drop {}: generated {:.2} Mpps, dropped {:.2} Mpps",
            if threaded {
                "on CPU 1"
            } else {
                "on CPU 0 (one core)"
            },
            s.pps / 1e6,
            mpps(d.packets, s.elapsed),
        );
    }
    napi_unthread(&topo.ns("upf"), "n3").unwrap();
    drop(dropper);
    drop(g);

    // Bare forwarder on one core (everything in CPU 0's softirq), then its NAPI
    // threads real-time on CPU 1 (the sinks run in its softirq: a veth receives on the
    // CPU that sent to it).
    let mut r = rig(&ns, &topo, 1000);
    r.ul.set_sessions(&ss).unwrap();
    r.dl.set_sessions(&ss).unwrap();
    saturate(&mut r, secs, "one core");
    for dev in ["n3", "n6"] {
        let pid = napi_thread(&topo.ns("upf"), dev, 1).unwrap();
        set_fifo(pid, 50).unwrap();
    }
    saturate(&mut r, secs, "NAPI threads on CPU 1");

    // Pacing: achieved rate and loss.
    for rate in [100_000u64, 1_000_000] {
        r.dn_sink.reset().unwrap();
        let fwd0 = r.bare.as_ref().unwrap().stats().unwrap().uplink.packets;
        let s =
            r.ul.send(Some(rate), rate * secs, Duration::from_secs(secs * 2))
                .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let got = r.dn_sink.totals().unwrap().of(Direction::Uplink);
        let fwd = r.bare.as_ref().unwrap().stats().unwrap().uplink.packets - fwd0;
        let lat = r.dn_sink.latency_percentiles(Direction::Uplink).unwrap();
        println!(
            "paced uplink at {rate} pps: achieved {:.0} pps in {} calls; sent {}, forwarded {fwd}, received {}; latency {lat:?}",
            s.pps, s.calls, s.packets, got.packets
        );
    }
    drop(r);
    drop(ns);
    drop(topo);
}

/// A UPF that attached its XDP programs through BPF links (eUPF does) keeps forwarding
/// with them: the bare forwarder swaps each link's program for its own (a netlink attach
/// would fail, "Can't replace active BPF XDP link") and swaps it back when detached.
/// (Where the kernel refuses the swap, EINVAL, as it did for eUPF v0.7.1's programs, the
/// link is detached and the program put back through netlink: not reproduced here with
/// libbpf-loaded programs; the eUPF runs of docs/benchmarks.md went that way.)
#[test]
fn bare_forwarder_swaps_a_upfs_xdp_links_and_puts_their_programs_back() {
    require_root!();
    let _live = live();
    let topo = Topo::up("tk-");
    let ns = NsGuard::new();
    ns.enter(&topo.ns("upf"));
    let (n3, n6) = (ns.ifindex("n3"), ns.ifindex("n6"));
    let ids = || [topo.xdp_prog("upf", "n3"), topo.xdp_prog("upf", "n6")];
    for round in 0..2 {
        let obj = libbpf_rs::ObjectBuilder::default()
            .open_memory(PASS_OBJECT)
            .expect("open the XDP_PASS object")
            .load()
            .expect("load it");
        let prog = obj.progs_mut().next().expect("a program");
        // The "UPF's" links, held for the whole case as the UPF would hold them.
        let links = [n3, n6].map(|i| prog.attach_xdp(i as i32).expect("XDP link"));
        let upf = ids();
        assert!(upf.iter().all(Option::is_some), "{upf:?}");

        let mut bare = BareForwarder::attach(bare_config(n3, n6)).expect("bare forwarder");
        let swapped = ids();
        assert!(
            swapped[0] != upf[0] && swapped[1] != upf[1] && swapped.iter().all(Option::is_some),
            "the bare forwarder runs: {swapped:?}, was {upf:?}"
        );
        bare.detach().expect("detach");
        assert_eq!(ids(), upf, "the UPF's programs back (round {round})");
        // Again (capacity swaps around every trial), then dropped rather than detached.
        bare.attach_here().expect("attach again");
        assert_ne!(topo.xdp_prog("upf", "n3"), upf[0]);
        drop(bare);
        assert_eq!(ids(), upf);
        drop(links);
        assert_eq!(
            ids(),
            [None, None],
            "the links gone, their programs too (round {round})"
        );
    }
}
