//! Overload (TS 29.244 clauses 6.2.3, 6.2.4; issue 14): a burst of Session Establishment
//! Requests far beyond what upfd serves, into a small N4 receive queue. Every request is
//! either answered (accepted, or Cause 74 "PFCP entity in congestion" while the queue is
//! over half full) or dropped by the kernel because the bounded queue was full, and then
//! counted; nothing else. The queue never grows past its bound, and once it drains new
//! sessions are accepted again.

mod common;

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::PATIENCE;

use pfcp::ie::types as t;
use pfcp::message_type as mt;
use pfcp_samples::quirks::{group, ie, node_message, session_message};

const SMF: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 4);
const BURST: u32 = 5000;

fn node_id() -> Vec<u8> {
    let mut v = vec![0];
    v.extend_from_slice(&SMF.octets());
    ie(t::NODE_ID, &v)
}

/// An establishment with one uplink PDR (CHOOSE F-TEID) and its FAR to the core.
fn establishment(seq: u32, cp_seid: u64) -> Vec<u8> {
    let mut fseid = vec![0x02];
    fseid.extend_from_slice(&cp_seid.to_be_bytes());
    fseid.extend_from_slice(&SMF.octets());
    session_message(
        mt::SESSION_ESTABLISHMENT_REQUEST,
        0,
        seq,
        &[
            node_id(),
            ie(t::FSEID, &fseid),
            group(
                t::CREATE_PDR,
                &[
                    ie(t::PDR_ID, &1u16.to_be_bytes()),
                    ie(t::PRECEDENCE, &100u32.to_be_bytes()),
                    group(
                        t::PDI,
                        &[ie(t::SOURCE_INTERFACE, &[0]), ie(t::FTEID, &[0x05])],
                    ),
                    ie(t::FAR_ID, &1u32.to_be_bytes()),
                ],
            ),
            group(
                t::CREATE_FAR,
                &[
                    ie(t::FAR_ID, &1u32.to_be_bytes()),
                    ie(t::APPLY_ACTION, &[0x02]),
                    group(
                        t::FORWARDING_PARAMETERS,
                        &[ie(t::DESTINATION_INTERFACE, &[1])],
                    ),
                ],
            ),
        ],
    )
}

fn set_int(sock: &UdpSocket, opt: libc::c_int, v: libc::c_int) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: a valid fd and a pointer to a c_int of the given size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Datagrams a socket dropped for want of room (SO_MEMINFO's SK_MEMINFO_DROPS).
fn socket_drops(sock: &UdpSocket) -> u64 {
    use std::os::fd::AsRawFd;
    let mut m = [0u32; 9];
    let mut len = std::mem::size_of_val(&m) as libc::socklen_t;
    // SAFETY: the buffer and its length are valid for the call.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            m.as_mut_ptr().cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "SO_MEMINFO");
    u64::from(m[8])
}

/// The Cause of a response.
fn cause(b: &[u8]) -> u8 {
    match pfcp::msg::Msg::parse(b).expect("a well-formed response").1 {
        pfcp::msg::Msg::SessionEstablishmentResponse(r) => r.cause.0,
        m => panic!("unexpected {m:?}"),
    }
}

/// Whether every thread of process `pid` is stopped (SIGSTOP has taken effect).
fn stopped(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|t| {
        // The state follows the command name's closing parenthesis.
        std::fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|st| st.rsplit_once(") ").map(|(_, rest)| rest.starts_with('T')))
            .unwrap_or(false)
    })
}

#[test]
fn a_burst_beyond_capacity_is_answered_or_counted_and_the_queue_stays_bounded() {
    let api = SocketAddr::new(Ipv4Addr::new(127, 0, 0, 7).into(), common::free_tcp_port());
    let upfd = common::Upfd::builder()
        .receive_buffer(65536)
        .extra_yaml(&format!("api:\n  listen: \"{api}\"\n"))
        .start();
    // start() saw it answer a heartbeat; its log reaches us through a reader thread.
    assert!(upfd.wait_for_log("up: node", PATIENCE));
    let sock = UdpSocket::bind((SMF, 0)).unwrap();
    // Room for the responses on our side too (as root: past net.core.rmem_max); what
    // our socket still drops is counted below.
    let _ = set_int(&sock, libc::SO_RCVBUFFORCE, 8 << 20);
    sock.set_read_timeout(Some(PATIENCE)).unwrap();
    let setup = node_message(
        mt::ASSOCIATION_SETUP_REQUEST,
        1,
        &[
            node_id(),
            ie(t::RECOVERY_TIME_STAMP, &0xe000_0000u32.to_be_bytes()),
        ],
    );
    sock.send_to(&setup, upfd.n4).unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = sock
        .recv_from(&mut buf)
        .expect("Association Setup Response");
    assert_eq!(buf[1], mt::ASSOCIATION_SETUP_RESPONSE, "{:?}", &buf[..n]);

    // A reader that keeps up, so that no response is lost on our side; it reads until
    // told that every request is accounted for.
    let reader = sock.try_clone().unwrap();
    let causes: Arc<Mutex<HashMap<u32, u8>>> = Arc::default();
    let done = Arc::new(AtomicBool::new(false));
    let got = {
        let (causes, done) = (causes.clone(), done.clone());
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            reader
                .set_read_timeout(Some(Duration::from_millis(100)))
                .unwrap();
            while !done.load(Ordering::Relaxed) {
                let Ok((n, _)) = reader.recv_from(&mut buf) else {
                    continue;
                };
                let seq = u32::from_be_bytes([0, buf[12], buf[13], buf[14]]);
                let c = cause(&buf[..n]);
                let first = causes.lock().unwrap().insert(seq, c).is_none();
                assert!(first, "two answers to {seq}");
            }
        })
    };
    // The overload must not depend on upfd being slower than this sender: the first half
    // of the burst goes into the queue of a stopped upfd, more than the queue holds (its
    // octets alone exceed the kernel's doubled 64 KiB), so upfd wakes to a full queue
    // and refuses; the second half comes while it works through it.
    let requests: Vec<Vec<u8>> = (0..BURST)
        .map(|i| establishment(1000 + i, u64::from(i) + 1))
        .collect();
    let half = BURST as usize / 2;
    assert!(requests[..half].iter().map(Vec::len).sum::<usize>() > 2 * 65536);
    upfd.signal(libc::SIGSTOP);
    let end = Instant::now() + PATIENCE;
    while !stopped(upfd.pid()) {
        assert!(Instant::now() < end, "upfd did not stop");
        std::thread::sleep(Duration::from_millis(10));
    }
    for r in &requests[..half] {
        sock.send_to(r, upfd.n4).unwrap();
    }
    upfd.signal(libc::SIGCONT);
    for r in &requests[half..] {
        sock.send_to(r, upfd.n4).unwrap();
    }
    // Every request is answered or counted as dropped (by upfd's queue, whose count upfd
    // reads at each batch and poll, or by our socket): wait until they add up.
    let metrics = || common::lab::http_get(&api.to_string(), "/metrics").unwrap();
    let tally = |m: &str| {
        let c = causes.lock().unwrap();
        let accepted = c.values().filter(|c| **c == 1).count() as u64;
        let congested = c.values().filter(|c| **c == 74).count() as u64;
        let other: Vec<u8> = c
            .values()
            .filter(|c| **c != 1 && **c != 74)
            .copied()
            .collect();
        let drops = common::lab::metric(m, "upf_n4_receive_drops_total");
        (accepted, congested, other, drops, socket_drops(&sock))
    };
    let t0 = Instant::now();
    let mut t = tally(&metrics());
    while t.0 + t.1 + t.2.len() as u64 + t.3 + t.4 < u64::from(BURST)
        && t0.elapsed() < Duration::from_secs(60)
    {
        std::thread::sleep(Duration::from_millis(100));
        t = tally(&metrics());
    }
    done.store(true, Ordering::Relaxed);
    got.join().unwrap();
    // upfd's counters as of now, when it has answered all (the last ones fetched may
    // predate the last answers); anything more than the burst (a late answer) shows here.
    let m = metrics();
    let (accepted, congested, other, drops, lost_here) = tally(&m);
    eprintln!(
        "burst of {BURST}: {accepted} accepted, {congested} refused with Cause 74, {drops} dropped by the kernel, {lost_here} responses dropped by our socket, in {:.2?}",
        t0.elapsed()
    );
    assert!(other.is_empty(), "other causes: {other:?}");
    assert!(congested > 0, "the burst did not overload upfd");
    assert_eq!(
        accepted + congested + drops + lost_here,
        u64::from(BURST),
        "every request answered or counted ({lost_here} responses dropped by our socket)"
    );
    let metric = |name: &str| common::lab::metric(&m, name);
    assert_eq!(metric("upf_n4_congestion_rejections_total"), congested);
    assert_eq!(metric("upf_sessions"), accepted);
    assert!(
        upfd.wait_for_log("n4: overloaded (receive queue", PATIENCE),
        "{}",
        upfd.log_tail(20)
    );

    // Drained: new sessions are accepted again.
    sock.send_to(&establishment(99, 999_999), upfd.n4).unwrap();
    let (n, _) = sock
        .recv_from(&mut buf)
        .expect("a response after the burst");
    assert_eq!(cause(&buf[..n]), 1);
    let m = common::lab::http_get(&api.to_string(), "/metrics").unwrap();
    assert_eq!(common::lab::metric(&m, "upf_n4_overloaded"), 0);
}
