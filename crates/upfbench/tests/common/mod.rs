//! Shared by the lab and gNB emulator tests: the root check, bounded commands, ping, and
//! (in [`stand_in_upf`]) a user-space stand-in for the UPF's data path (a TEST DOUBLE, not
//! a UPF).
#![allow(dead_code)]

pub mod report_sample;
pub mod stand_in_upf;

use std::io;
use std::net::Ipv4Addr;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use upfbench::lab::{in_netns, Lab, Ns};

/// True when running as root; otherwise prints "not root: skipping".
pub fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: skipping");
        return false;
    }
    true
}

/// Whether `program` is on PATH.
pub fn have(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
        .unwrap_or(false)
}

/// How long a wait for something that will happen may take on a busy machine before the
/// test gives up (waits return as soon as the condition holds).
pub const SETTLE: Duration = Duration::from_secs(30);

/// Runs `cmd` to completion within `limit`; killed (by its pid) when it takes longer.
pub fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn");
    wait_bounded(child, limit)
}

/// Waits for `child` up to `limit`, then kills it. Its piped output is read meanwhile, so
/// a child that writes more than a pipe holds is not blocked into the limit.
pub fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    fn drain<R: io::Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<Vec<u8>> {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut v);
            }
            v
        })
    }
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let end = Instant::now() + limit;
    loop {
        match child.try_wait().expect("try_wait") {
            Some(_) => break,
            None if Instant::now() >= end => {
                let _ = child.kill();
                break;
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    let status = child.wait().expect("wait");
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// Waits (bounded) until `f` holds; returns as soon as it does.
pub fn eventually(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

/// The kernel's counters of one interface (`ip -s -j link`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    pub rx_packets: u64,
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
}

impl LinkStats {
    /// What changed since `before`.
    pub fn since(&self, before: &LinkStats) -> LinkStats {
        LinkStats {
            rx_packets: self.rx_packets - before.rx_packets,
            rx_dropped: self.rx_dropped - before.rx_dropped,
            tx_packets: self.tx_packets - before.tx_packets,
            tx_dropped: self.tx_dropped - before.tx_dropped,
        }
    }
}

/// The counters of interface `dev` in namespace `ns`.
pub fn link_stats(lab: &Lab, ns: Ns, dev: &str) -> LinkStats {
    let text = lab
        .ip(ns, &["-s", "-j", "link", "show", "dev", dev])
        .unwrap_or_else(|e| panic!("ip -s link show dev {dev} in {ns:?}: {e}"));
    let v: serde_json::Value = serde_json::from_str(&text).expect("ip -j output");
    let s = &v[0]["stats64"];
    let n = |d: &str, k: &str| {
        s[d][k]
            .as_u64()
            .unwrap_or_else(|| panic!("no stats64.{d}.{k} in {text}"))
    };
    LinkStats {
        rx_packets: n("rx", "packets"),
        rx_dropped: n("rx", "dropped"),
        tx_packets: n("tx", "packets"),
        tx_dropped: n("tx", "dropped"),
    }
}

/// Datagrams the kernel dropped at the IPv4 UDP sockets bound to `port` in namespace `ns`
/// (receive buffer full: the last column of /proc/net/udp).
pub fn udp_drops(lab: &Lab, ns: Ns, port: u16) -> u64 {
    let text = lab
        .run(ns, &["cat", "/proc/net/udp"])
        .expect("/proc/net/udp");
    let port = format!(":{port:04X}");
    text.lines()
        .skip(1)
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|local| local.ends_with(&port))
        })
        .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
        .sum()
}

/// Echo requests answered out of `count`, from namespace `ns` (source address `src` if
/// given) to `dst`: iputils `ping` when installed (what a user runs), else the same
/// exchange on a raw ICMP socket. One request at a time, each waited for up to 10 s
/// (`ping -c 1 -W 10` returns as soon as the answer comes; with `-c N` ping would wait
/// only twice the fastest round trip for the last answers once one has come, which a
/// busy machine can exceed).
pub fn ping(lab: &Lab, ns: Ns, src: Option<Ipv4Addr>, dst: Ipv4Addr, count: u16) -> u16 {
    if !have("ping") {
        return in_netns(Some(&lab.ns(ns)), || raw_ping(src, dst, count)).expect("netns");
    }
    let mut answered = 0;
    for _ in 0..count {
        let mut c = lab.command(ns, "ping");
        c.args(["-c", "1", "-W", "10", "-n", "-q"]);
        if let Some(s) = src {
            c.args(["-I", &s.to_string()]);
        }
        c.arg(dst.to_string());
        let out = run_bounded(c, SETTLE);
        let text = String::from_utf8_lossy(&out.stdout);
        // "1 packets transmitted, 1 received, 0% packet loss"
        answered += text
            .lines()
            .find_map(|l| {
                let (_, rest) = l.split_once("transmitted, ")?;
                rest.split_whitespace().next()?.parse::<u16>().ok()
            })
            .unwrap_or(0);
    }
    answered
}

fn checksum(b: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in b.chunks(2) {
        s += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

fn raw_ping(src: Option<Ipv4Addr>, dst: Ipv4Addr, count: u16) -> u16 {
    // SAFETY: plain socket calls with checked results and valid buffers.
    unsafe {
        let fd = libc::socket(
            libc::AF_INET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::IPPROTO_ICMP,
        );
        assert!(fd >= 0, "raw socket: {}", io::Error::last_os_error());
        let sa = |a: Ipv4Addr| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(a.octets()),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if let Some(s) = src {
            let a = sa(s);
            assert_eq!(
                libc::bind(fd, (&a as *const libc::sockaddr_in).cast(), len),
                0
            );
        }
        let tv = libc::timeval {
            tv_sec: 0,
            tv_usec: 200_000,
        };
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&tv as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        );
        let id = (std::process::id() as u16) ^ 0x5a5a;
        let to = sa(dst);
        let mut answered = 0;
        for seq in 0..count {
            let mut pkt = [0u8; 16];
            pkt[0] = 8;
            pkt[4..6].copy_from_slice(&id.to_be_bytes());
            pkt[6..8].copy_from_slice(&seq.to_be_bytes());
            let c = checksum(&pkt);
            pkt[2..4].copy_from_slice(&c.to_be_bytes());
            libc::sendto(
                fd,
                pkt.as_ptr().cast(),
                pkt.len(),
                0,
                (&to as *const libc::sockaddr_in).cast(),
                len,
            );
            let end = Instant::now() + Duration::from_secs(10);
            let mut buf = [0u8; 1500];
            while Instant::now() < end {
                let n = libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0);
                if n < 28 {
                    continue;
                }
                let ihl = usize::from(buf[0] & 0x0f) * 4;
                let icmp = &buf[ihl..n as usize];
                if buf[12..16] == dst.octets()
                    && icmp.len() >= 8
                    && icmp[0] == 0
                    && icmp[4..6] == id.to_be_bytes()
                    && icmp[6..8] == seq.to_be_bytes()
                {
                    answered += 1;
                    break;
                }
            }
        }
        libc::close(fd);
        answered
    }
}
