//! Spreading one tunnel over CPUs (`Datapath::set_spread`, bpf/include/spread.h) on real
//! interfaces: three network namespaces made here (gNB, UPF, data network) joined by two
//! veth pairs, xdp_n3 attached natively to the UPF's N3 veth, one session. From a thread
//! pinned to one CPU the "gNB" sends numbered G-PDUs of eight inner flows, all in one
//! tunnel (one TEID, one outer 5-tuple, as one gNB sends them); the data network's
//! socket receives the decapsulated packets. Checked per mode:
//! - off: every packet forwarded on the CPU it arrived on (the sender's);
//! - teid: the tunnel's packets all on one CPU;
//! - inner: on more than one CPU;
//!
//! and in every mode each flow's packets arrive in the order they were sent.
//! Addresses only inside the namespaces; sends bounded by count, waits by time;
//! everything made is removed (the namespaces, and with them the veths).

mod common;

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags};
use upf::fastpath::{Config, Egress, FastPath};
use upf_bpf::datapath::{Capacity, Datapath, Role, Spread};

const N3: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 7);
const GNB: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const DN: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 1);
const TEID: u32 = 0x0012_3457;
const FLOWS: u16 = 8;
const PER_FLOW: u32 = 300;
const DN_PORT: u16 = 9999;

/// The namespaces of this test, removed on drop.
struct Lab {
    gnb: String,
    upf: String,
    dn: String,
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [&self.gnb, &self.upf, &self.dn] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .expect(args[0]);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn in_ns(ns: &str, args: &[&str]) {
    let mut a = vec!["ip", "netns", "exec", ns];
    a.extend_from_slice(args);
    sh(&a);
}

/// Move the calling thread into network namespace `ns`.
fn enter(ns: &str) {
    let f = std::fs::File::open(format!("/var/run/netns/{ns}")).expect("netns file");
    // SAFETY: setns on an open namespace file; changes this thread only.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns {ns}: {}", std::io::Error::last_os_error());
}

fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is empty; the calls touch only the set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

fn mac(ns: &str, dev: &str) -> [u8; 6] {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat"])
        .arg(format!("/sys/class/net/{dev}/address"))
        .output()
        .expect("ip");
    let s = String::from_utf8_lossy(&out.stdout);
    let mut m = [0u8; 6];
    for (i, p) in s.trim().split(':').take(6).enumerate() {
        m[i] = u8::from_str_radix(p, 16).expect("MAC");
    }
    m
}

fn build() -> Lab {
    let id = std::process::id() % 100_000;
    let lab = Lab {
        gnb: format!("sprd-gnb-{id}"),
        upf: format!("sprd-upf-{id}"),
        dn: format!("sprd-dn-{id}"),
    };
    for ns in [&lab.gnb, &lab.upf, &lab.dn] {
        sh(&["ip", "netns", "add", ns]);
        in_ns(ns, &["ip", "link", "set", "lo", "up"]);
    }
    sh(&[
        "ip", "link", "add", "sp-g", "netns", &lab.gnb, "type", "veth", "peer", "name", "sp-n3",
        "netns", &lab.upf,
    ]);
    sh(&[
        "ip", "link", "add", "sp-n6", "netns", &lab.upf, "type", "veth", "peer", "name", "sp-d",
        "netns", &lab.dn,
    ]);
    for (ns, dev, addr) in [
        (&lab.gnb, "sp-g", "10.77.0.1/24"),
        (&lab.upf, "sp-n3", "10.77.0.7/24"),
        (&lab.upf, "sp-n6", "10.78.0.7/24"),
        (&lab.dn, "sp-d", "10.78.0.1/24"),
    ] {
        in_ns(ns, &["ip", "addr", "add", addr, "dev", dev]);
        in_ns(ns, &["ip", "link", "set", dev, "up"]);
    }
    // Frames XDP redirects into a veth reach its peer through NAPI: GRO turns it on
    // without a program there.
    in_ns(&lab.dn, &["ethtool", "-K", "sp-d", "gro", "on"]);
    // The UEs' addresses are not the data network's: no reverse-path check there.
    for k in ["all", "default", "sp-d"] {
        in_ns(
            &lab.dn,
            &["sysctl", "-qw", &format!("net.ipv4.conf.{k}.rp_filter=0")],
        );
    }
    lab
}

/// A G-PDU (PDU Session Container, QFI 1) carrying flow `flow`'s packet `seq`.
fn gpdu(flow: u16, seq: u32) -> Vec<u8> {
    let ue = upf_bpf_session_ue();
    let mut payload = flow.to_be_bytes().to_vec();
    payload.extend_from_slice(&seq.to_be_bytes());
    payload.resize(32, 0x55);
    let inner = capture::ip_udp_packet(ue.into(), DN.into(), 40000 + flow, DN_PORT, &payload);
    let mut g = vec![0x34, 0xff];
    g.extend_from_slice(&((inner.len() + 8) as u16).to_be_bytes());
    g.extend_from_slice(&TEID.to_be_bytes());
    g.extend_from_slice(&[0, 0, 0, 0x85, 1, 0x10, 1, 0]);
    g.extend(inner);
    g
}

/// The UE address of `upf_bpf::scaling::session(0, ..)`.
fn upf_bpf_session_ue() -> Ipv4Addr {
    Ipv4Addr::new(10, 64, 0, 1)
}

/// Packets each CPU forwarded uplink so far.
fn forwarded_per_cpu(dp: &Datapath) -> Vec<u64> {
    let k = upf::abi::STAT_FORWARDED_UPLINK;
    let v = dp
        .skel()
        .maps
        .stats
        .lookup_percpu(&k.to_ne_bytes(), MapFlags::ANY)
        .expect("stats")
        .expect("stats entry");
    v.iter()
        .map(|b| u64::from_ne_bytes(b[..8].try_into().expect("8 octets")))
        .collect()
}

/// Send every flow's packets interleaved from CPU `cpu` in the gNB namespace; receive
/// them in the data network's. What arrived per flow, in arrival order.
fn send_and_receive(lab: &Lab, cpu: usize) -> Vec<Vec<u32>> {
    let dn = lab.dn.clone();
    let ready = Arc::new(std::sync::Barrier::new(2));
    let r2 = ready.clone();
    let receiver = std::thread::spawn(move || {
        enter(&dn);
        let s = UdpSocket::bind(SocketAddrV4::new(DN, DN_PORT)).expect("bind in dn");
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        r2.wait();
        let mut got = vec![Vec::new(); FLOWS as usize];
        let mut buf = [0u8; 2048];
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut idle = 0;
        let want = u64::from(FLOWS) * u64::from(PER_FLOW);
        let mut n = 0u64;
        while Instant::now() < deadline && n < want && idle < 10 {
            match s.recv(&mut buf) {
                Ok(len) if len >= 6 => {
                    idle = 0;
                    let flow = u16::from_be_bytes([buf[0], buf[1]]) as usize;
                    let seq = u32::from_be_bytes([buf[2], buf[3], buf[4], buf[5]]);
                    if flow < got.len() {
                        got[flow].push(seq);
                        n += 1;
                    }
                }
                Ok(_) => {}
                Err(_) => idle += 1,
            }
        }
        got
    });
    let gnb = lab.gnb.clone();
    let sender = std::thread::spawn(move || {
        enter(&gnb);
        pin(cpu);
        let s = UdpSocket::bind(SocketAddrV4::new(GNB, 2152)).expect("bind in gnb");
        ready.wait();
        for seq in 0..PER_FLOW {
            for flow in 0..FLOWS {
                s.send_to(&gpdu(flow, seq), SocketAddrV4::new(N3, 2152))
                    .expect("send");
            }
            // A little room for the CPUs' queues: loss is allowed, not the point.
            if seq % 16 == 15 {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    });
    sender.join().expect("sender");
    receiver.join().expect("receiver")
}

#[test]
fn spread_keeps_flows_in_order_and_uses_cpus() {
    if !common::root() {
        return;
    }
    let ncpu = std::thread::available_parallelism().map_or(1, |p| p.get());
    if ncpu < 2 {
        eprintln!("one CPU: nothing to spread over");
        return;
    }
    let lab = build();
    // This test's thread is the UPF: the programs attach to its namespace's veths.
    enter(&lab.upf);
    let n3_if = nix_ifindex("sp-n3");
    let n6_if = nix_ifindex("sp-n6");
    let mut neigh = std::collections::HashMap::new();
    neigh.insert(
        std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        Egress {
            ifindex: n6_if,
            mtu: 1500,
            smac: mac(&lab.upf, "sp-n6"),
            dmac: mac(&lab.dn, "sp-d"),
        },
    );
    let cfg = Config {
        local: vec![N3.into()],
        n3_v4: Some(N3),
        neigh,
        ..Default::default()
    };
    let mut dp = Datapath::load(Capacity::for_sessions(64), cfg.clone()).expect("load");
    dp.configure(cfg, n3_if, n6_if, 0).expect("configure");
    let s = Arc::new(upf_bpf::scaling::session(
        0,
        TEID,
        upf_bpf::scaling::Rules::default(),
    ));
    assert_eq!(
        s.pdrs.get(&1).map(|p| p.pdi.ue_ips[0].ipv4),
        Some(Some(upf_bpf_session_ue()))
    );
    dp.install(None, &s).expect("install");
    let mode = dp.attach(Role::Gtpu, n3_if, true).expect("attach");
    eprintln!("xdp_n3 on sp-n3: {mode:?}; N6 sp-n6 ({n6_if})");
    // Removing the namespaces removes the veth and the program with it, if a check fails.
    let sender_cpu = 0;
    let cpus: Vec<u32> = (0..ncpu as u32).collect();
    for how in [Spread::Off, Spread::Teid, Spread::Inner] {
        dp.set_spread(how, &cpus).expect("set_spread");
        let before = forwarded_per_cpu(&dp);
        let got = send_and_receive(&lab, sender_cpu);
        let after = forwarded_per_cpu(&dp);
        let per_cpu: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        let received: usize = got.iter().map(Vec::len).sum();
        eprintln!(
            "{how:?}: received {received} of {}; forwarded per CPU {per_cpu:?}; per flow {:?}",
            u32::from(FLOWS) * PER_FLOW,
            got.iter().map(Vec::len).collect::<Vec<_>>()
        );
        for (flow, seqs) in got.iter().enumerate() {
            assert!(
                seqs.windows(2).all(|w| w[0] < w[1]),
                "{how:?}: flow {flow} out of order: {seqs:?}"
            );
        }
        assert!(
            received as u32 >= u32::from(FLOWS) * PER_FLOW / 2,
            "{how:?}: only {received} received: {:?}",
            dp.stats()
        );
        let busy = per_cpu.iter().filter(|n| **n > 0).count();
        match how {
            Spread::Off => assert_eq!(
                per_cpu[sender_cpu],
                per_cpu.iter().sum::<u64>(),
                "off: all on the CPU they arrived on"
            ),
            Spread::Teid => assert_eq!(busy, 1, "teid: one tunnel, one CPU: {per_cpu:?}"),
            Spread::Inner => assert!(busy > 1, "inner: flows on several CPUs: {per_cpu:?}"),
        }
    }
    dp.set_spread(Spread::Off, &[]).expect("spread off");
    dp.detach(Role::Gtpu, n3_if);
}

fn nix_ifindex(name: &str) -> u32 {
    let c = std::ffi::CString::new(name).unwrap();
    // SAFETY: if_nametoindex reads the NUL-terminated name we own.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    assert!(i > 0, "no interface {name} here");
    i
}
