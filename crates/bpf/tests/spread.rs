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
//! and in every mode each flow's packets arrive in the order they were sent, every
//! packet sent is received or counted lost where it was lost (the veths' and UDP's
//! counters, the cpumap's queues, the UPF's own drop counters), and the session's URR
//! (one lane per CPU, summed) counts exactly what the UPF forwarded.
//! Addresses only inside the namespaces; sends bounded by count, waits by time;
//! everything made is removed (the namespaces, and with them the veths).

mod common;

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
/// G-PDUs sent and not yet received at most: far below every queue on the way (the
/// veths' rings of 256, the cpumap's SPREAD_QUEUE, the socket's buffer), so that a busy
/// machine delays the packets instead of losing them.
const WINDOW: u64 = 32;

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

fn build(ncpu: usize) -> Lab {
    let id = std::process::id() % 100_000;
    let lab = Lab {
        gnb: format!("sprd-gnb-{id}"),
        upf: format!("sprd-upf-{id}"),
        dn: format!("sprd-dn-{id}"),
    };
    for ns in [&lab.gnb, &lab.upf, &lab.dn] {
        sh(&["ip", "netns", "add", ns]);
        in_ns(ns, &["ip", "link", "set", "lo", "up"]);
        // No IPv6 (neighbour discovery, MLD): only the test's frames cross the veths.
        for k in ["all", "default"] {
            in_ns(
                ns,
                &[
                    "sysctl",
                    "-qw",
                    &format!("net.ipv6.conf.{k}.disable_ipv6=1"),
                ],
            );
        }
    }
    sh(&[
        "ip", "link", "add", "sp-g", "netns", &lab.gnb, "type", "veth", "peer", "name", "sp-n3",
        "netns", &lab.upf,
    ]);
    // A receive queue of sp-d per CPU: a veth counts the frames redirected into it
    // (tx_xdp_xmit) per queue, after the queue's lock, so two CPUs sending into one
    // queue can lose a count.
    // (The queue counts given for sp-n6 make the peer's too: ip and the veth driver
    // leave the ones given after `peer` unused.)
    let q = ncpu.to_string();
    sh(&[
        "ip",
        "link",
        "add",
        "sp-n6",
        "numtxqueues",
        &q,
        "numrxqueues",
        &q,
        "netns",
        &lab.upf,
        "type",
        "veth",
        "peer",
        "name",
        "sp-d",
        "netns",
        &lab.dn,
    ]);
    let ls = Command::new("ip")
        .args(["netns", "exec", &lab.dn, "ls", "/sys/class/net/sp-d/queues"])
        .output()
        .expect("ls");
    let rx = String::from_utf8_lossy(&ls.stdout)
        .split_whitespace()
        .filter(|q| q.starts_with("rx-"))
        .count();
    assert_eq!(rx, ncpu, "sp-d's receive queues");
    for (ns, dev, addr) in [
        (&lab.gnb, "sp-g", "10.77.0.1/24"),
        (&lab.upf, "sp-n3", "10.77.0.7/24"),
        (&lab.upf, "sp-n6", "10.78.0.7/24"),
        (&lab.dn, "sp-d", "10.78.0.1/24"),
    ] {
        in_ns(ns, &["ip", "addr", "add", addr, "dev", dev]);
        in_ns(ns, &["ip", "link", "set", dev, "up"]);
    }
    // The gNB knows N3's MAC: no ARP crosses sp-n3 either.
    let n3_mac = mac(&lab.upf, "sp-n3")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    in_ns(
        &lab.gnb,
        &[
            "ip",
            "neigh",
            "replace",
            "10.77.0.7",
            "lladdr",
            &n3_mac,
            "dev",
            "sp-g",
            "nud",
            "permanent",
        ],
    );
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

/// One of a namespace's files (`ip netns exec` mounts its /sys).
fn read_in(ns: &str, path: &str) -> String {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", path])
        .output()
        .expect("ip netns exec cat");
    assert!(out.status.success(), "{ns}: {path}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An interface's ethtool statistics, each summed over its queues (`rx_queue_0_drops`
/// and `rx_queue_1_drops` count as `rx_drops`).
fn ethtool(ns: &str, dev: &str) -> BTreeMap<String, u64> {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "ethtool", "-S", dev])
        .output()
        .expect("ethtool");
    assert!(out.status.success(), "ethtool -S {dev}");
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((k, v)) = line.trim().split_once(": ") else {
            continue;
        };
        let Ok(v) = v.trim().parse::<u64>() else {
            continue;
        };
        // rx_queue_N_x -> rx_x, tx_queue_N_x -> tx_x.
        let k = match k.split_once("_queue_") {
            Some((dir, rest)) => format!("{dir}_{}", rest.split_once('_').map_or(rest, |r| r.1)),
            None => k.to_string(),
        };
        *m.entry(k).or_default() += v;
    }
    m
}

/// `Proto.Field` of a namespace's /proc/net/snmp (a header line, then a value line).
fn snmp(ns: &str) -> BTreeMap<String, u64> {
    let text = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/snmp"])
        .output()
        .expect("snmp")
        .stdout;
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    let mut m = BTreeMap::new();
    for pair in lines.chunks(2) {
        let [head, vals] = pair else { continue };
        let (proto, names) = head.split_once(": ").unwrap_or_default();
        let vals = vals.split_once(": ").map_or("", |v| v.1);
        for (n, v) in names.split(' ').zip(vals.split(' ')) {
            if let Ok(v) = v.parse::<u64>() {
                m.insert(format!("{proto}.{n}"), v);
            }
        }
    }
    m
}

/// The counters along the path, each named by where it counts; [`Path::losses`] says
/// which are losses.
#[derive(Clone, Debug, Default)]
struct Path(BTreeMap<&'static str, u64>);

impl Path {
    fn read(lab: &Lab, dp: &Datapath) -> Self {
        let mut m = BTreeMap::new();
        let sys = |ns: &str, dev: &str, stat: &str| -> u64 {
            read_in(ns, &format!("/sys/class/net/{dev}/statistics/{stat}"))
                .trim()
                .parse()
                .expect("a counter")
        };
        let n3 = ethtool(&lab.upf, "sp-n3");
        let n6 = ethtool(&lab.upf, "sp-n6");
        let udp = snmp(&lab.dn);
        let get = |m: &BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
        m.insert(
            "gnb: sp-g transmit drops",
            sys(&lab.gnb, "sp-g", "tx_dropped"),
        );
        m.insert("upf: sp-n3 receive drops", get(&n3, "rx_drops"));
        m.insert(
            "upf: frames xdp ran on at sp-n3",
            get(&n3, "rx_xdp_packets"),
        );
        let stats = dp.stats();
        let at = |i: u32| stats[i as usize].0;
        m.insert(
            "upf: frames xdp_n3 counted in",
            at(upf::abi::STAT_RECEIVED_N3),
        );
        m.insert("upf: forwarded uplink", at(upf::abi::STAT_FORWARDED_UPLINK));
        m.insert(
            "upf: dropped (any reason)",
            (0..upf::abi::DROP_MAX).map(at).sum(),
        );
        m.insert(
            "upf: other outcomes",
            (upf::abi::STAT_FORWARDED_DOWNLINK..=upf::abi::STAT_ICMP_SENT)
                .map(at)
                .sum(),
        );
        m.insert("upf: sp-n6 into sp-d's ring", get(&n6, "tx_xdp_xmit"));
        m.insert("upf: sp-n6 xdp_xmit_errors", get(&n6, "tx_xdp_xmit_errors"));
        // sp-d's rx_dropped counts sp-n6's xdp_xmit_errors too: those are N6's.
        m.insert(
            "dn: sp-d receive drops",
            sys(&lab.dn, "sp-d", "rx_dropped").saturating_sub(get(&n6, "tx_xdp_xmit_errors")),
        );
        m.insert("dn: IP discards", get(&udp, "Ip.InDiscards"));
        m.insert("dn: IP header errors", get(&udp, "Ip.InHdrErrors"));
        m.insert("dn: UDP in datagrams", get(&udp, "Udp.InDatagrams"));
        m.insert("dn: UDP errors", get(&udp, "Udp.InErrors"));
        m.insert("dn: UDP no port", get(&udp, "Udp.NoPorts"));
        Path(m)
    }

    fn since(&self, before: &Path) -> Path {
        Path(
            self.0
                .iter()
                .map(|(k, v)| (*k, v - before.0.get(k).copied().unwrap_or(0)))
                .collect(),
        )
    }

    fn get(&self, k: &str) -> u64 {
        self.0[k]
    }

    /// Every frame the UPF forwarded is counted by N6's veth, into sp-d or as an error.
    fn n6_settled(&self) -> bool {
        self.get("upf: forwarded uplink")
            == self.get("upf: sp-n6 into sp-d's ring") + self.get("upf: sp-n6 xdp_xmit_errors")
    }

    /// Each loss and where: the named counters, and the cpumap's queues (frames xdp
    /// ran on at sp-n3 that no program of the UPF counted in; the kernel has no counter
    /// of its own for them).
    fn losses(&self) -> BTreeMap<&'static str, u64> {
        let mut l: BTreeMap<&'static str, u64> = [
            "gnb: sp-g transmit drops",
            "upf: sp-n3 receive drops",
            "upf: dropped (any reason)",
            "upf: other outcomes",
            "upf: sp-n6 xdp_xmit_errors",
            "dn: sp-d receive drops",
            "dn: IP discards",
            "dn: IP header errors",
            "dn: UDP errors",
            "dn: UDP no port",
        ]
        .into_iter()
        .map(|k| (k, self.get(k)))
        .collect();
        l.insert(
            "upf: cpumap queues",
            self.get("upf: frames xdp ran on at sp-n3")
                .saturating_sub(self.get("upf: frames xdp_n3 counted in")),
        );
        l
    }

    fn lost(&self) -> u64 {
        self.losses().values().sum()
    }
}

/// What one mode's run saw: each flow's sequence numbers in arrival order, the G-PDUs
/// sent, and the path's counters over the run.
struct Run {
    got: Vec<Vec<u32>>,
    sent: u64,
    path: Path,
}

/// Send every flow's packets interleaved from CPU `cpu` in the gNB namespace, at most
/// [`WINDOW`] ahead of the receiver; receive them in the data network's until every
/// packet sent is received or counted lost.
fn send_and_receive(lab: &Lab, dp: &Datapath, cpu: usize) -> Run {
    let before = Path::read(lab, dp);
    let want = u64::from(FLOWS) * u64::from(PER_FLOW);
    let received = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let dn = lab.dn.clone();
    let ready = Arc::new(std::sync::Barrier::new(2));
    let (r2, received2, stop2) = (ready.clone(), received.clone(), stop.clone());
    let receiver = std::thread::spawn(move || {
        enter(&dn);
        let s = UdpSocket::bind(SocketAddrV4::new(DN, DN_PORT)).expect("bind in dn");
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        r2.wait();
        let mut got = vec![Vec::new(); FLOWS as usize];
        let mut buf = [0u8; 2048];
        // Until told, or everything came; the deadline only stops a lost test thread.
        let deadline = Instant::now() + Duration::from_secs(300);
        let mut n = 0u64;
        while !stop2.load(Ordering::Acquire) && n < want && Instant::now() < deadline {
            if let Ok(len) = s.recv(&mut buf) {
                if len >= 6 {
                    let flow = u16::from_be_bytes([buf[0], buf[1]]) as usize;
                    let seq = u32::from_be_bytes([buf[2], buf[3], buf[4], buf[5]]);
                    if flow < got.len() {
                        got[flow].push(seq);
                        n += 1;
                        received2.store(n, Ordering::Release);
                    }
                }
            }
        }
        got
    });
    let gnb = lab.gnb.clone();
    let received3 = received.clone();
    let sender = std::thread::spawn(move || {
        enter(&gnb);
        pin(cpu);
        let s = UdpSocket::bind(SocketAddrV4::new(GNB, 2152)).expect("bind in gnb");
        ready.wait();
        let (mut sent, mut unsent) = (0u64, 0u64);
        // Raised by WINDOW each time the receiver makes no progress for 0.2 s (packets
        // lost, counted below): pacing, never a wait for a packet to arrive.
        let mut allowance = WINDOW;
        for seq in 0..PER_FLOW {
            for flow in 0..FLOWS {
                let t = Instant::now();
                while sent - received3.load(Ordering::Acquire) >= allowance {
                    if t.elapsed() > Duration::from_millis(200) {
                        allowance += WINDOW;
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(50));
                }
                match s.send_to(&gpdu(flow, seq), SocketAddrV4::new(N3, 2152)) {
                    Ok(_) => sent += 1,
                    Err(_) => unsent += 1,
                }
            }
        }
        if unsent > 0 {
            eprintln!("{unsent} G-PDUs not sent (send_to failed): not counted as sent");
        }
        sent
    });
    let sent = sender.join().expect("sender");
    // Every packet sent is received or lost where a counter says so: wait for that.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut path = Path::read(lab, dp).since(&before);
    loop {
        let n = received.load(Ordering::Acquire);
        if n == sent || n + path.lost() >= sent || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        path = Path::read(lab, dp).since(&before);
    }
    stop.store(true, Ordering::Release);
    let got = receiver.join().expect("receiver");
    // veth_xdp_xmit adds a redirected frame to sp-d's queue counter after it has woken
    // sp-d's NAPI: a vCPU descheduled in between (a busy VM) lets the frame be received,
    // and the counters read, before it is counted. So read until the N6 veth's counts
    // agree with what the UPF forwarded, for at most 2 s; the test asserts the last read.
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut path = Path::read(lab, dp).since(&before);
    while !path.n6_settled() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        path = Path::read(lab, dp).since(&before);
    }
    Run { got, sent, path }
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
    let lab = build(ncpu);
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
        let urr_before = dp.usage(s.up_seid, 1);
        let Run { got, sent, path } = send_and_receive(&lab, &dp, sender_cpu);
        let after = forwarded_per_cpu(&dp);
        let urr = dp.usage(s.up_seid, 1);
        let per_cpu: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
        let received: u64 = got.iter().map(|f| f.len() as u64).sum();
        let losses: BTreeMap<_, _> = path.losses().into_iter().filter(|l| l.1 > 0).collect();
        eprintln!(
            "{how:?}: sent {sent} of {}, received {received}, lost {losses:?}; forwarded per CPU {per_cpu:?}; per flow {:?}",
            u32::from(FLOWS) * PER_FLOW,
            got.iter().map(Vec::len).collect::<Vec<_>>()
        );
        for (flow, seqs) in got.iter().enumerate() {
            assert!(
                seqs.windows(2).all(|w| w[0] < w[1]),
                "{how:?}: flow {flow} out of order: {seqs:?}"
            );
        }
        // Every packet received or lost where a counter says so, and each stage's
        // counts add up.
        assert_eq!(
            sent,
            received + path.lost(),
            "{how:?}: sent = received + losses: {path:#?}"
        );
        let p = |k| path.get(k);
        assert_eq!(
            sent,
            p("gnb: sp-g transmit drops")
                + p("upf: sp-n3 receive drops")
                + p("upf: frames xdp ran on at sp-n3"),
            "{how:?}: the gNB's veth: {path:#?}"
        );
        if how == Spread::Off {
            assert_eq!(
                p("upf: frames xdp ran on at sp-n3"),
                p("upf: frames xdp_n3 counted in"),
                "off: no cpumap: {path:#?}"
            );
        }
        assert_eq!(
            p("upf: frames xdp_n3 counted in"),
            p("upf: forwarded uplink") + p("upf: dropped (any reason)") + p("upf: other outcomes"),
            "{how:?}: the UPF's outcomes: {path:#?}"
        );
        assert_eq!(
            p("upf: forwarded uplink"),
            p("upf: sp-n6 into sp-d's ring") + p("upf: sp-n6 xdp_xmit_errors"),
            "{how:?}: N6's veth: {path:#?}"
        );
        assert_eq!(
            received,
            p("dn: UDP in datagrams"),
            "{how:?}: what the socket took is what the receiver read: {path:#?}"
        );
        // The session's URR, counted in one lane per CPU, sums to what was forwarded
        // whichever CPUs forwarded it.
        assert_eq!(
            (
                urr.ul_packets - urr_before.ul_packets,
                urr.dl_packets - urr_before.dl_packets
            ),
            (p("upf: forwarded uplink"), 0),
            "{how:?}: the URR's counts: {urr:?}, before {urr_before:?}"
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
