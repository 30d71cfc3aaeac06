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

/// Runs `cmd` to completion within `limit`; killed (by its pid) when it takes longer.
pub fn run_bounded(mut cmd: Command, limit: Duration) -> Output {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn");
    wait_bounded(child, limit)
}

/// Waits for `child` up to `limit`, then kills it.
pub fn wait_bounded(mut child: Child, limit: Duration) -> Output {
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
    child.wait_with_output().expect("wait")
}

/// Waits (bounded) until `f` holds.
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

/// Echo requests answered out of `count`, from namespace `ns` (source address `src` if
/// given) to `dst`: iputils `ping` when installed (what a user runs), else the same
/// exchange on a raw ICMP socket.
pub fn ping(lab: &Lab, ns: Ns, src: Option<Ipv4Addr>, dst: Ipv4Addr, count: u16) -> u16 {
    if have("ping") {
        let mut c = lab.command(ns, "ping");
        c.args(["-c", &count.to_string(), "-i", "0.2", "-W", "2", "-n", "-q"]);
        if let Some(s) = src {
            c.args(["-I", &s.to_string()]);
        }
        c.arg(dst.to_string());
        let out = run_bounded(c, Duration::from_secs(u64::from(count) + 5));
        let text = String::from_utf8_lossy(&out.stdout);
        // "3 packets transmitted, 3 received, 0% packet loss"
        return text
            .lines()
            .find_map(|l| {
                let (_, rest) = l.split_once("transmitted, ")?;
                rest.split_whitespace().next()?.parse().ok()
            })
            .unwrap_or(0);
    }
    in_netns(Some(&lab.ns(ns)), || raw_ping(src, dst, count)).expect("netns")
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
            let end = Instant::now() + Duration::from_secs(2);
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
