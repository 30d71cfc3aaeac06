//! TEST DOUBLE for the UPF's data path (see [`StandInUpf`]), and sessions for it from the
//! SMF emulator.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use gtpu::{message_type, GpduHeader, Message, PscFields};
use upfbench::gnb::tun::Tun;
use upfbench::gnb::UeSession;
use upfbench::lab::{addr, in_netns, Lab, Ns};

use super::run_bounded;

fn set_buffers(sock: &UdpSocket, bytes: libc::c_int) {
    use std::os::fd::AsRawFd;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_SNDBUFFORCE] {
        // SAFETY: setsockopt with a valid int value.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                (&bytes as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
    }
}

/// Per-session counters of the stand-in.
#[derive(Debug, Default)]
pub struct StandInCounters {
    /// G-PDUs received with the session's uplink TEID and written to upf0.
    pub ul_packets: AtomicU64,
    /// Packets read from upf0 for the UE and sent as G-PDUs to the gNB.
    pub dl_packets: AtomicU64,
}

/// TEST DOUBLE for the UPF's data path, so the lab and the gNB emulator can be tested end
/// to end before upfd's XDP data path exists. NOT a UPF: no PFCP, no rules, no QoS, no
/// usage counts. In the upf namespace: a UDP socket on 192.168.3.2:2152 decapsulates
/// G-PDUs whose TEID is a session's uplink TEID and writes the inner packet to TUN `upf0`;
/// the kernel (forwarding on in upf, as the lab sets it; the test makes sure) routes it out
/// of n6. Downlink: `10.45.0.0/16 dev upf0`; packets read from upf0 go back to
/// 192.168.3.1:2152 as G-PDUs with the session's gNB TEID and a DL PDU Session Container,
/// QFI 1.
pub struct StandInUpf {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    sock: Arc<UdpSocket>,
    gnb: SocketAddr,
    /// Per session, in the order given.
    pub counters: Arc<Vec<StandInCounters>>,
    pub echo_responses: Arc<AtomicU64>,
    pub unknown_teid: Arc<AtomicU64>,
    /// Where else the stand-in loses a packet, each counted: G-PDUs that did not parse,
    /// uplink TUN writes that failed, downlink packets for no session, downlink sends
    /// that failed.
    pub malformed: Arc<AtomicU64>,
    pub ul_tun_errors: Arc<AtomicU64>,
    pub dl_no_session: Arc<AtomicU64>,
    pub dl_send_errors: Arc<AtomicU64>,
}

impl StandInUpf {
    pub fn start(lab: &Lab, sessions: &[UeSession]) -> StandInUpf {
        lab.run(Ns::Upf, &["sysctl", "-qw", "net.ipv4.ip_forward=1"])
            .expect("forwarding on in upf for the stand-in");
        let (sock, tun) = in_netns(Some(&lab.ns(Ns::Upf)), || {
            let sock = UdpSocket::bind((addr::UPF_N3, gtpu::UDP_PORT)).expect("bind N3");
            sock.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            set_buffers(&sock, 4 << 20);
            let tun = Tun::open("upf0").expect("TUN upf0");
            (sock, tun)
        })
        .expect("netns upf");
        lab.ip(Ns::Upf, &["link", "set", "dev", "upf0", "up"])
            .unwrap();
        lab.ip(
            Ns::Upf,
            &[
                "route",
                "add",
                &format!("{}/{}", addr::UE_POOL, addr::UE_POOL_LEN),
                "dev",
                "upf0",
            ],
        )
        .unwrap();
        let by_ul: HashMap<u32, usize> = sessions
            .iter()
            .enumerate()
            .map(|(i, s)| (s.ul_teid, i))
            .collect();
        let by_ue: HashMap<Ipv4Addr, (usize, u32)> = sessions
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((s.ue_ip?, (i, s.gnb_teid))))
            .collect();
        let counters: Arc<Vec<StandInCounters>> = Arc::new(
            sessions
                .iter()
                .map(|_| StandInCounters::default())
                .collect(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let sock = Arc::new(sock);
        let tun = Arc::new(tun);
        let echo_responses = Arc::new(AtomicU64::new(0));
        let unknown_teid = Arc::new(AtomicU64::new(0));
        let malformed = Arc::new(AtomicU64::new(0));
        let ul_tun_errors = Arc::new(AtomicU64::new(0));
        let dl_no_session = Arc::new(AtomicU64::new(0));
        let dl_send_errors = Arc::new(AtomicU64::new(0));
        let gnb = SocketAddr::new(addr::GNB_N3.into(), gtpu::UDP_PORT);
        let mut threads = Vec::new();
        {
            let (stop, sock, tun, counters, echo, unknown, malformed, tun_errors) = (
                stop.clone(),
                sock.clone(),
                tun.clone(),
                counters.clone(),
                echo_responses.clone(),
                unknown_teid.clone(),
                malformed.clone(),
                ul_tun_errors.clone(),
            );
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !stop.load(Relaxed) {
                    let Ok((n, _)) = sock.recv_from(&mut buf) else {
                        continue;
                    };
                    let msg = &buf[..n];
                    if n > 1 && msg[1] == message_type::G_PDU {
                        let Ok(info) = gtpu::parse_gpdu(msg) else {
                            malformed.fetch_add(1, Relaxed);
                            continue;
                        };
                        match by_ul.get(&info.teid) {
                            Some(&i) => {
                                if tun.write(info.payload(msg)).is_ok() {
                                    counters[i].ul_packets.fetch_add(1, Relaxed);
                                } else {
                                    tun_errors.fetch_add(1, Relaxed);
                                }
                            }
                            None => {
                                unknown.fetch_add(1, Relaxed);
                            }
                        }
                    } else if let Ok(Message::EchoResponse { .. }) = Message::parse(msg) {
                        echo.fetch_add(1, Relaxed);
                    }
                }
            }));
        }
        {
            let (stop, sock, tun, counters, no_session, send_errors) = (
                stop.clone(),
                sock.clone(),
                tun.clone(),
                counters.clone(),
                dl_no_session.clone(),
                dl_send_errors.clone(),
            );
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                const ROOM: usize = 16;
                while !stop.load(Relaxed) {
                    if !tun.wait_readable(200).unwrap_or(false) {
                        continue;
                    }
                    while let Ok(n) = tun.read(&mut buf[ROOM..]) {
                        let p = &buf[ROOM..ROOM + n];
                        if n < 20 || p[0] >> 4 != 4 {
                            continue;
                        }
                        let dst = Ipv4Addr::new(p[16], p[17], p[18], p[19]);
                        let Some(&(i, teid)) = by_ue.get(&dst) else {
                            no_session.fetch_add(1, Relaxed);
                            continue;
                        };
                        let h = GpduHeader::new(teid).with_psc(PscFields::Dl {
                            qfi: 1,
                            rqi: false,
                            ppi: None,
                        });
                        let start = ROOM - h.header_len();
                        h.write(&mut buf[start..], n).unwrap();
                        if sock.send_to(&buf[start..ROOM + n], gnb).is_ok() {
                            counters[i].dl_packets.fetch_add(1, Relaxed);
                        } else {
                            send_errors.fetch_add(1, Relaxed);
                        }
                    }
                }
            }));
        }
        StandInUpf {
            stop,
            threads,
            sock,
            gnb,
            counters,
            echo_responses,
            unknown_teid,
            malformed,
            ul_tun_errors,
            dl_no_session,
            dl_send_errors,
        }
    }

    /// Sends an Echo Request to the gNB.
    pub fn send_echo_request(&self, seq: u16) {
        let m = Message::echo_request(seq).to_vec().unwrap();
        self.sock.send_to(&m, self.gnb).unwrap();
    }

    /// Sends a G-PDU with a TEID the gNB does not know.
    pub fn send_unknown_teid(&self, teid: u32) {
        let mut buf = [0u8; 64];
        let inner = [
            0x45u8, 0, 0, 20, 0, 0, 0, 0, 64, 1, 0, 0, 192, 168, 6, 1, 10, 45, 0, 1,
        ];
        let n = gtpu::write_gpdu_header(&mut buf, teid, None, inner.len()).unwrap();
        buf[n..n + inner.len()].copy_from_slice(&inner);
        self.sock
            .send_to(&buf[..n + inner.len()], self.gnb)
            .unwrap();
    }

    pub fn ul(&self, i: usize) -> u64 {
        self.counters[i].ul_packets.load(Relaxed)
    }

    pub fn dl(&self, i: usize) -> u64 {
        self.counters[i].dl_packets.load(Relaxed)
    }

    pub fn stop(mut self) {
        self.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for StandInUpf {
    fn drop(&mut self) {
        self.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// A child killed (by its pid) and reaped when dropped, also when the test fails.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs the SMF emulator against the fake UPF (both CLIs, over the lab's N4 veth) and
/// returns the path of the sessions file it wrote.
pub fn establish_sessions(lab: &Lab, n: usize, dir: &std::path::Path) -> std::path::PathBuf {
    let bin = env!("CARGO_BIN_EXE_upfbench");
    let upf_n4 = format!("{}:8805", addr::UPF_N4);
    let mut fake = lab.command(Ns::Upf, bin);
    // --seconds: only a backstop; it is killed below.
    fake.args([
        "fake-upf",
        "--listen",
        &upf_n4,
        "--n3",
        &addr::UPF_N3.to_string(),
        "--seconds",
        "600",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let mut fake = KillOnDrop(fake.spawn().expect("fake-upf"));
    // Ready once it says it listens (it binds first), however long that takes.
    let stderr = fake.0.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let ready = rx.recv_timeout(Duration::from_secs(60)).unwrap_or_default();
    assert!(
        ready.starts_with("fake-upf listening on"),
        "fake-upf did not start: {ready:?}"
    );
    let path = dir.join("sessions.jsonl");
    let mut smf = lab.command(Ns::Smf, bin);
    // The PFCP timers' defaults (T1 3 s, N1 3): a slow answer is retransmitted, not lost.
    smf.args([
        "smf",
        "--upf",
        &upf_n4,
        "--bind",
        &format!("{}:0", addr::SMF_N4),
        "--sessions",
        &n.to_string(),
        "--gnb",
        &addr::GNB_N3.to_string(),
        "--sessions-out",
    ])
    .arg(&path);
    let out = run_bounded(smf, Duration::from_secs(120));
    drop(fake);
    assert!(
        out.status.success(),
        "the SMF emulator did not establish {n} sessions: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    path
}
