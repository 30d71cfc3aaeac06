//! gNB/UE emulator: one TUN device per UE in the gNB's network namespace, user-space GTP-U
//! towards the UPF, so that ordinary tools (ping, iperf3) run through the UPF as a phone's
//! apps would.
//!
//! For UE `i` of the sessions (from `upfbench smf --sessions-out FILE.jsonl`, or
//! [`UeSession::from_session`] on [`crate::smf::Smf::sessions`]):
//! - TUN `ue{i}` (IFF_TUN|IFF_NO_PI, MTU 1400 by default) holds the UE's address as /32
//!   (and its IPv6 address as /128 if the session has one);
//! - policy routing sends what leaves with that source address through that TUN:
//!   `ip rule add from UE_IP table 100+i pref 100+i`, `ip route add default dev ue{i}
//!   table 100+i`;
//! - uplink: each packet read from `ue{i}` gets a G-PDU header (TEID = the UPF's uplink
//!   F-TEID of the session, a UL PDU Session Container with QFI 1 unless `psc` is off) and
//!   goes from the gNB address, port 2152, to the F-TEID's address, port 2152;
//! - downlink: a G-PDU whose TEID is a session's `gnb_teid` (the downlink TEID the SMF gave
//!   the UPF) loses its GTP-U header and extension headers and is written to that UE's
//!   TUN, if the inner destination is the UE's address; G-PDUs with other TEIDs are
//!   counted and dropped; an Echo Request gets an Echo Response;
//! - QoS monitoring (TS 23.501 clause 5.33.3.2): a downlink G-PDU whose PDU Session
//!   Container has QMP set, with or without a T-PDU, is answered as an NG-RAN answers it,
//!   with a G-PDU on the session's uplink F-TEID carrying the three time stamps of TS
//!   38.415 clause 5.5.2.2 and no T-PDU ([`qos`]); its T-PDU, if any, goes to the UE as
//!   usual;
//! - delays ([`GnbConfig::dl_delay`], [`GnbConfig::ul_delay`]): the N3 transport's, so that
//!   a UPF's delay measurements have something to measure. Everything received on N3 is
//!   held the downlink delay before it is received (stamped, delivered, answered); the
//!   emulator's answers (QoS monitoring, Echo Responses) are held the uplink delay after
//!   they are stamped; the UEs' own uplink is not held ([`delay`]).
//!
//! Counters are kept per UE and direction ([`GnbStats`]). One thread reads every TUN (epoll)
//! and one per socket reads GTP-U; buffers are allocated once.
//!
//! ```text
//! ip netns exec gnb upfbench gnb --sessions sessions.jsonl --stats 5 &
//! ip netns exec gnb ping -I 10.45.0.1 192.168.6.1
//! ip netns exec gnb iperf3 -c 192.168.6.1 -B 10.45.0.1 -t 10
//! ip netns exec dn ping 10.45.0.1
//! ```
//!
//! Library use, from any namespace (setup happens on a thread that enters `netns`; the
//! sockets and TUNs stay there):
//!
//! ```no_run
//! use upfbench::gnb::{Gnb, GnbConfig, load_sessions};
//! let sessions = load_sessions(std::path::Path::new("sessions.jsonl"))?;
//! let gnb = Gnb::start(GnbConfig { netns: Some("gnb".into()), ..GnbConfig::default() }, sessions)?;
//! // ... traffic ...
//! let stats = gnb.stop();
//! println!("{}", stats.table());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod cli;
pub mod delay;
pub mod qos;
pub mod tun;

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use gtpu::{message_type, Message, PscFields};
use serde::{Deserialize, Serialize};

use crate::lab::{addr, in_netns};
use delay::DelayLine;
use tun::Tun;

/// The GTP-U port (TS 29.281 clause 4.4.2.0).
pub const GTPU_PORT: u16 = gtpu::UDP_PORT;

/// Room in front of the inner packet for the longest G-PDU header written (12 + UL PSC).
const HEADROOM: usize = 16;
/// Receive and TUN buffers: the largest UDP payload.
const BUF_LEN: usize = 65536;
/// How often blocked threads look at the stop flag.
const TICK_MS: i32 = 200;

/// What the emulator needs of one PDU session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UeSession {
    /// Session index (names the TUN: `ue{index}` with the default prefix, and the routing
    /// table: 100 + index).
    pub index: usize,
    /// The UE's IPv4 address.
    pub ue_ip: Option<Ipv4Addr>,
    /// The UE's IPv6 address, if the session has one.
    pub ue_ip6: Option<Ipv6Addr>,
    /// The TEID the UPF sends downlink G-PDUs with (the gNB's F-TEID in the downlink FAR).
    pub gnb_teid: u32,
    /// The UPF's uplink F-TEID: TEID...
    pub ul_teid: u32,
    /// ... and address (port 2152).
    pub upf: IpAddr,
}

impl UeSession {
    /// The session's UE, if it is active and has an uplink F-TEID with a TEID and address.
    pub fn from_session(s: &crate::smf::Session) -> Option<UeSession> {
        if !s.is_active() {
            return None;
        }
        let f = s.n3_fteid.as_ref()?;
        Some(UeSession {
            index: s.index,
            ue_ip: Some(s.ue_ip),
            ue_ip6: None,
            gnb_teid: s.gnb_teid,
            ul_teid: f.teid?,
            upf: f.ipv4.map(IpAddr::V4).or(f.ipv6.map(IpAddr::V6))?,
        })
    }
}

/// One line of `upfbench smf --sessions-out` (extra fields are ignored).
#[derive(Deserialize)]
struct SessionRecord {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    ue_ip: Option<Ipv4Addr>,
    #[serde(default)]
    ue_ip6: Option<Ipv6Addr>,
    gnb_teid: u32,
    #[serde(default)]
    n3_fteid: Option<FTeidRecord>,
    #[serde(default)]
    state: Option<StateRecord>,
}

#[derive(Deserialize)]
struct FTeidRecord {
    #[serde(default)]
    teid: Option<u32>,
    #[serde(default)]
    ipv4: Option<Ipv4Addr>,
    #[serde(default)]
    ipv6: Option<Ipv6Addr>,
}

#[derive(Deserialize)]
struct StateRecord {
    state: String,
}

/// Why a sessions file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Read { path: String, source: io::Error },
    /// A line is not a session.
    #[error("{path}:{line}: {message}")]
    Line {
        path: String,
        line: usize,
        message: String,
    },
    /// Nothing usable.
    #[error("{path}: no active session with an uplink F-TEID ({skipped} skipped)")]
    Empty { path: String, skipped: usize },
}

/// Reads sessions written by `upfbench smf --sessions-out`: one JSON object a line.
/// Sessions that are not established or modified, or lack an uplink F-TEID, are skipped.
pub fn load_sessions(path: &Path) -> Result<Vec<UeSession>, SessionsError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| SessionsError::Read {
        path: p.clone(),
        source,
    })?;
    let (sessions, skipped) =
        parse_sessions(&text).map_err(|(line, message)| SessionsError::Line {
            path: p.clone(),
            line,
            message,
        })?;
    if sessions.is_empty() {
        return Err(SessionsError::Empty { path: p, skipped });
    }
    Ok(sessions)
}

/// Parses JSON lines of sessions; returns the usable ones and how many were skipped, or
/// the 1-based line number and what is wrong with it.
pub fn parse_sessions(text: &str) -> Result<(Vec<UeSession>, usize), (usize, String)> {
    let mut out = Vec::new();
    let mut skipped = 0;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let r: SessionRecord = serde_json::from_str(line).map_err(|e| (i + 1, e.to_string()))?;
        let active = r
            .state
            .as_ref()
            .is_none_or(|s| matches!(s.state.as_str(), "established" | "modified"));
        let ftd = r.n3_fteid.as_ref();
        let (Some(teid), Some(upf)) = (
            ftd.and_then(|f| f.teid),
            ftd.and_then(|f| f.ipv4.map(IpAddr::V4).or(f.ipv6.map(IpAddr::V6))),
        ) else {
            skipped += 1;
            continue;
        };
        if !active || (r.ue_ip.is_none() && r.ue_ip6.is_none()) {
            skipped += 1;
            continue;
        }
        out.push(UeSession {
            index: r.index.unwrap_or(out.len()),
            ue_ip: r.ue_ip,
            ue_ip6: r.ue_ip6,
            gnb_teid: r.gnb_teid,
            ul_teid: teid,
            upf,
        });
    }
    Ok((out, skipped))
}

/// How the emulator runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GnbConfig {
    /// Named network namespace to work in (`/var/run/netns/NAME`); None: the caller's.
    pub netns: Option<String>,
    /// The gNB's N3 address: the GTP-U socket is bound to it, port 2152.
    pub gnb: Ipv4Addr,
    /// An IPv6 N3 address, for sessions whose F-TEID is IPv6 only.
    pub gnb6: Option<Ipv6Addr>,
    /// UDP port (both ends).
    pub port: u16,
    /// Send a UL PDU Session Container (5G); off: 4G style, plain G-PDUs.
    pub psc: bool,
    /// QFI in the container.
    pub qfi: u8,
    /// MTU of the TUN devices: 1400 leaves room for the outer IPv4/UDP/GTP-U headers on
    /// a 1500-octet N3.
    pub mtu: u32,
    /// TUN names: this prefix and the session index.
    pub tun_prefix: String,
    /// Routing table (and rule priority) of UE `index`: `table_base + index`.
    pub table_base: u32,
    /// Socket send and receive buffer, octets.
    pub socket_buffer: usize,
    /// Downlink delay: every GTP-U message received on N3 is held this long before the
    /// emulator receives it (stamps QoS monitoring's DL Received Time Stamp, delivers,
    /// answers). Zero: none. At most [`delay::MAX_DELAY`].
    pub dl_delay: Duration,
    /// Uplink delay: the emulator's answers (QoS monitoring, Echo Responses) are held
    /// this long after they are stamped (QoS monitoring's UL Sending Time Stamp) before
    /// they are sent. The UEs' uplink data is not held. Zero: none. At most
    /// [`delay::MAX_DELAY`].
    pub ul_delay: Duration,
}

impl Default for GnbConfig {
    fn default() -> Self {
        GnbConfig {
            netns: None,
            gnb: addr::GNB_N3,
            gnb6: None,
            port: GTPU_PORT,
            psc: true,
            qfi: 1,
            mtu: 1400,
            tun_prefix: "ue".into(),
            table_base: 100,
            socket_buffer: 4 << 20,
            dl_delay: Duration::ZERO,
            ul_delay: Duration::ZERO,
        }
    }
}

/// Counters of one UE. Uplink: packets read from its TUN and sent as G-PDUs (inner octets);
/// dropped: not from the UE's address, or not sent. Downlink: G-PDUs with its TEID written
/// to its TUN; dropped: inner destination not the UE, or the TUN write failed.
#[derive(Debug, Default)]
struct UeCounters {
    ul_packets: AtomicU64,
    ul_bytes: AtomicU64,
    ul_dropped: AtomicU64,
    dl_packets: AtomicU64,
    dl_bytes: AtomicU64,
    dl_dropped: AtomicU64,
}

#[derive(Debug, Default)]
struct Counters {
    unknown_teid: AtomicU64,
    malformed: AtomicU64,
    echo_requests: AtomicU64,
    echo_responses: AtomicU64,
    error_indications: AtomicU64,
    end_markers: AtomicU64,
    other_messages: AtomicU64,
    send_errors: AtomicU64,
    tun_write_errors: AtomicU64,
    qos_monitoring: AtomicU64,
    qos_answers: AtomicU64,
    dl_delay_dropped: AtomicU64,
    ul_delay_dropped: AtomicU64,
}

/// One UE's counters.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UeStats {
    pub index: usize,
    pub tun: String,
    pub ue_ip: Option<Ipv4Addr>,
    pub ue_ip6: Option<Ipv6Addr>,
    /// Uplink TEID (the UPF's).
    pub ul_teid: u32,
    /// Downlink TEID (ours).
    pub dl_teid: u32,
    pub ul_packets: u64,
    pub ul_bytes: u64,
    pub ul_dropped: u64,
    pub dl_packets: u64,
    pub dl_bytes: u64,
    pub dl_dropped: u64,
}

/// Every counter of the emulator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GnbStats {
    pub ues: Vec<UeStats>,
    /// G-PDUs with a TEID that is no session's `gnb_teid`.
    pub unknown_teid: u64,
    /// GTP-U messages that did not parse.
    pub malformed: u64,
    /// Echo Requests received (each answered).
    pub echo_requests: u64,
    /// Echo Responses received.
    pub echo_responses: u64,
    pub error_indications: u64,
    pub end_markers: u64,
    pub other_messages: u64,
    /// UDP sends that failed.
    pub send_errors: u64,
    /// TUN writes that failed.
    pub tun_write_errors: u64,
    /// QoS monitoring packets received for a session (DL PDU Session Container with QMP
    /// set).
    #[serde(default)]
    pub qos_monitoring: u64,
    /// QoS monitoring answers made (each sent, or counted in `ul_delay_dropped` or
    /// `send_errors`).
    #[serde(default)]
    pub qos_answers: u64,
    /// Datagrams received that the downlink delay had no room to hold.
    #[serde(default)]
    pub dl_delay_dropped: u64,
    /// Answers the uplink delay had no room to hold.
    #[serde(default)]
    pub ul_delay_dropped: u64,
}

impl GnbStats {
    /// Uplink packets sent, all UEs.
    pub fn ul_packets(&self) -> u64 {
        self.ues.iter().map(|u| u.ul_packets).sum()
    }

    /// Downlink packets delivered, all UEs.
    pub fn dl_packets(&self) -> u64 {
        self.ues.iter().map(|u| u.dl_packets).sum()
    }

    /// A text table, one line per UE, then the other counters.
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:>5} {:<8} {:<15} {:>10} {:>10} {:>10} {:>14} {:>8} {:>10} {:>14} {:>8}\n",
            "ue",
            "tun",
            "address",
            "ul teid",
            "dl teid",
            "ul pkts",
            "ul octets",
            "ul drop",
            "dl pkts",
            "dl octets",
            "dl drop"
        );
        for u in &self.ues {
            let a = u
                .ue_ip
                .map(|a| a.to_string())
                .or(u.ue_ip6.map(|a| a.to_string()))
                .unwrap_or_default();
            s.push_str(&format!(
                "{:>5} {:<8} {:<15} {:>#10x} {:>#10x} {:>10} {:>14} {:>8} {:>10} {:>14} {:>8}\n",
                u.index,
                u.tun,
                a,
                u.ul_teid,
                u.dl_teid,
                u.ul_packets,
                u.ul_bytes,
                u.ul_dropped,
                u.dl_packets,
                u.dl_bytes,
                u.dl_dropped
            ));
        }
        s.push_str(&format!(
            "unknown TEID {}, malformed {}, echo requests {} (answered), echo responses {}, error indications {}, end markers {}, other {}, send errors {}, TUN write errors {}\n",
            self.unknown_teid,
            self.malformed,
            self.echo_requests,
            self.echo_responses,
            self.error_indications,
            self.end_markers,
            self.other_messages,
            self.send_errors,
            self.tun_write_errors
        ));
        s.push_str(&format!(
            "QoS monitoring packets {}, answered {}; not held for lack of room: downlink {}, uplink {}\n",
            self.qos_monitoring, self.qos_answers, self.dl_delay_dropped, self.ul_delay_dropped
        ));
        s
    }
}

struct Ue {
    session: UeSession,
    tun: Tun,
    /// Where its uplink goes.
    dst: SocketAddr,
    counters: UeCounters,
}

struct Shared {
    stop: AtomicBool,
    ues: Vec<Ue>,
    /// gnb_teid -> index into `ues`.
    by_teid: HashMap<u32, usize>,
    counters: Counters,
    cfg: GnbConfig,
    /// Holds what N3 delivers, when there is a downlink delay.
    dl_line: Option<DelayLine>,
    /// Holds the answers, when there is an uplink delay.
    ul_line: Option<DelayLine>,
}

/// A running emulator. [`Gnb::stop`] (or drop) stops its threads and removes its rules;
/// the TUN devices disappear with their file descriptors.
pub struct Gnb {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
    stopped: bool,
}

/// Why the emulator could not start.
#[derive(Debug, thiserror::Error)]
pub enum GnbError {
    #[error("no session to emulate")]
    NoSessions,
    #[error("two sessions with downlink TEID {0:#x}")]
    DuplicateTeid(u32),
    #[error("session {0}: its uplink F-TEID is IPv6 and no IPv6 gNB address is set (--gnb6)")]
    NeedIpv6(usize),
    #[error("{which} delay {value:?} is longer than {max:?}", max = delay::MAX_DELAY)]
    Delay {
        which: &'static str,
        value: Duration,
    },
    #[error("{what}: {source}")]
    Io { what: String, source: io::Error },
    #[error("{command}: {stderr}")]
    Command { command: String, stderr: String },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> GnbError {
    let what = what.into();
    move |source| GnbError::Io { what, source }
}

/// `ip [-6] [-force] -batch -` in the calling thread's namespace.
fn ip_batch(v6: bool, force: bool, lines: &[String]) -> Result<(), GnbError> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut c = Command::new("ip");
    if v6 {
        c.arg("-6");
    }
    if force {
        c.arg("-force");
    }
    c.args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let command = format!("ip{} -batch", if v6 { " -6" } else { "" });
    let mut child = c.spawn().map_err(io_err(command.clone()))?;
    if let Some(mut stdin) = child.stdin.take() {
        let mut text = lines.join("\n");
        text.push('\n');
        stdin
            .write_all(text.as_bytes())
            .map_err(io_err(command.clone()))?;
    }
    let out = child.wait_with_output().map_err(io_err(command.clone()))?;
    if !out.status.success() && !force {
        return Err(GnbError::Command {
            command,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

fn set_buffers(sock: &UdpSocket, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        for opt in [force, plain] {
            // SAFETY: setsockopt with a valid int option value.
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
                break;
            }
        }
    }
}

fn cleanup_lines(cfg: &GnbConfig, sessions: &[UeSession]) -> (Vec<String>, Vec<String>) {
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for s in sessions {
        let t = cfg.table_base + s.index as u32;
        v4.push(format!("rule del pref {t}"));
        v6.push(format!("rule del pref {t}"));
        if let Some(a) = s.ue_ip {
            v4.push(format!("rule del from {a}"));
        }
        if let Some(a) = s.ue_ip6 {
            v6.push(format!("rule del from {a}"));
        }
    }
    (v4, v6)
}

impl Gnb {
    /// Creates the sockets and TUN devices and the routing, then starts forwarding.
    pub fn start(cfg: GnbConfig, sessions: Vec<UeSession>) -> Result<Gnb, GnbError> {
        if sessions.is_empty() {
            return Err(GnbError::NoSessions);
        }
        let mut by_teid = HashMap::new();
        for (i, s) in sessions.iter().enumerate() {
            if by_teid.insert(s.gnb_teid, i).is_some() {
                return Err(GnbError::DuplicateTeid(s.gnb_teid));
            }
            if s.upf.is_ipv6() && cfg.gnb6.is_none() {
                return Err(GnbError::NeedIpv6(s.index));
            }
        }
        for (which, value) in [("downlink", cfg.dl_delay), ("uplink", cfg.ul_delay)] {
            if value > delay::MAX_DELAY {
                return Err(GnbError::Delay { which, value });
            }
        }
        let netns = cfg.netns.clone();
        let setup = in_netns(netns.as_deref(), || Gnb::setup(&cfg, &sessions))
            .map_err(io_err(format!("entering network namespace {netns:?}")))??;
        let (sock4, sock6, tuns) = setup;
        let ues = sessions
            .into_iter()
            .zip(tuns)
            .map(|(session, tun)| Ue {
                dst: SocketAddr::new(session.upf, cfg.port),
                session,
                tun,
                counters: UeCounters::default(),
            })
            .collect();
        let line = |d: Duration| (!d.is_zero()).then(|| DelayLine::new(d));
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            ues,
            by_teid,
            counters: Counters::default(),
            dl_line: line(cfg.dl_delay),
            ul_line: line(cfg.ul_delay),
            cfg,
        });
        let sock4 = Arc::new(sock4);
        let sock6 = sock6.map(Arc::new);
        let mut threads = Vec::new();
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(io_err("spawning a thread"))
        };
        {
            let (sh, s4, s6) = (shared.clone(), sock4.clone(), sock6.clone());
            threads.push(spawn(
                "gnb-uplink",
                Box::new(move || uplink(&sh, &s4, s6.as_deref())),
            )?);
        }
        {
            let (sh, s4, s6) = (shared.clone(), sock4.clone(), sock6.clone());
            threads.push(spawn(
                "gnb-downlink",
                Box::new(move || downlink(&sh, &s4, &Tx::new(&s4, s6.as_deref()))),
            )?);
        }
        if let Some(s6) = sock6.clone() {
            let (sh, s4) = (shared.clone(), sock4.clone());
            threads.push(spawn(
                "gnb-downlink6",
                Box::new(move || downlink(&sh, &s6, &Tx::new(&s4, Some(&s6)))),
            )?);
        }
        if shared.dl_line.is_some() {
            let (sh, s4, s6) = (shared.clone(), sock4.clone(), sock6.clone());
            threads.push(spawn(
                "gnb-dl-delay",
                Box::new(move || dl_delayed(&sh, &Tx::new(&s4, s6.as_deref()))),
            )?);
        }
        if shared.ul_line.is_some() {
            let (sh, s4, s6) = (shared.clone(), sock4.clone(), sock6.clone());
            threads.push(spawn(
                "gnb-ul-delay",
                Box::new(move || ul_delayed(&sh, &Tx::new(&s4, s6.as_deref()))),
            )?);
        }
        Ok(Gnb {
            shared,
            threads,
            stopped: false,
        })
    }

    #[allow(clippy::type_complexity)]
    fn setup(
        cfg: &GnbConfig,
        sessions: &[UeSession],
    ) -> Result<(UdpSocket, Option<UdpSocket>, Vec<Tun>), GnbError> {
        let bind4 = SocketAddr::new(cfg.gnb.into(), cfg.port);
        let sock4 = UdpSocket::bind(bind4).map_err(io_err(format!("binding {bind4}")))?;
        set_buffers(&sock4, cfg.socket_buffer);
        let sock6 = match cfg.gnb6 {
            Some(a) => {
                let b = SocketAddr::new(a.into(), cfg.port);
                let s = UdpSocket::bind(b).map_err(io_err(format!("binding {b}")))?;
                set_buffers(&s, cfg.socket_buffer);
                Some(s)
            }
            None => None,
        };
        for s in [Some(&sock4), sock6.as_ref()].into_iter().flatten() {
            s.set_read_timeout(Some(Duration::from_millis(TICK_MS as u64)))
                .map_err(io_err("SO_RCVTIMEO"))?;
        }
        // Rules a crashed emulator left for these UEs.
        let (c4, c6) = cleanup_lines(cfg, sessions);
        ip_batch(false, true, &c4)?;
        ip_batch(true, true, &c6)?;

        let mut tuns = Vec::with_capacity(sessions.len());
        let mut l4 = Vec::new();
        let mut l6 = Vec::new();
        for s in sessions {
            let name = format!("{}{}", cfg.tun_prefix, s.index);
            let tun = Tun::open(&name).map_err(io_err(format!("TUN {name}")))?;
            if s.ue_ip6.is_none() {
                // No IPv6 chatter (MLD, router solicitations) into the uplink counters.
                let p = format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6");
                let _ = std::fs::write(&p, "1");
            }
            let t = cfg.table_base + s.index as u32;
            l4.push(format!(
                "link set dev {name} mtu {} addrgenmode none up",
                cfg.mtu
            ));
            if let Some(a) = s.ue_ip {
                l4.push(format!("addr add {a}/32 dev {name}"));
                l4.push(format!("rule add from {a} table {t} pref {t}"));
                l4.push(format!("route add default dev {name} table {t}"));
            }
            if let Some(a) = s.ue_ip6 {
                l6.push(format!("addr add {a}/128 dev {name} nodad"));
                l6.push(format!("rule add from {a} table {t} pref {t}"));
                l6.push(format!("route add default dev {name} table {t}"));
            }
            tuns.push(tun);
        }
        let configured = ip_batch(false, false, &l4).and_then(|_| ip_batch(true, false, &l6));
        if let Err(e) = configured {
            // The TUNs go when `tuns` is dropped; the rules added before the failure do not.
            let _ = ip_batch(false, true, &c4);
            let _ = ip_batch(true, true, &c6);
            return Err(e);
        }
        Ok((sock4, sock6, tuns))
    }

    /// The UEs, in session order.
    pub fn sessions(&self) -> Vec<UeSession> {
        self.shared.ues.iter().map(|u| u.session.clone()).collect()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> GnbStats {
        let sh = &self.shared;
        let c = &sh.counters;
        GnbStats {
            ues: sh
                .ues
                .iter()
                .map(|u| UeStats {
                    index: u.session.index,
                    tun: u.tun.name().to_string(),
                    ue_ip: u.session.ue_ip,
                    ue_ip6: u.session.ue_ip6,
                    ul_teid: u.session.ul_teid,
                    dl_teid: u.session.gnb_teid,
                    ul_packets: u.counters.ul_packets.load(Relaxed),
                    ul_bytes: u.counters.ul_bytes.load(Relaxed),
                    ul_dropped: u.counters.ul_dropped.load(Relaxed),
                    dl_packets: u.counters.dl_packets.load(Relaxed),
                    dl_bytes: u.counters.dl_bytes.load(Relaxed),
                    dl_dropped: u.counters.dl_dropped.load(Relaxed),
                })
                .collect(),
            unknown_teid: c.unknown_teid.load(Relaxed),
            malformed: c.malformed.load(Relaxed),
            echo_requests: c.echo_requests.load(Relaxed),
            echo_responses: c.echo_responses.load(Relaxed),
            error_indications: c.error_indications.load(Relaxed),
            end_markers: c.end_markers.load(Relaxed),
            other_messages: c.other_messages.load(Relaxed),
            send_errors: c.send_errors.load(Relaxed),
            tun_write_errors: c.tun_write_errors.load(Relaxed),
            qos_monitoring: c.qos_monitoring.load(Relaxed),
            qos_answers: c.qos_answers.load(Relaxed),
            dl_delay_dropped: c.dl_delay_dropped.load(Relaxed),
            ul_delay_dropped: c.ul_delay_dropped.load(Relaxed),
        }
    }

    /// Stops forwarding, removes the policy rules and returns the final counters.
    pub fn stop(mut self) -> GnbStats {
        self.shutdown();
        self.stats()
    }

    fn shutdown(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        self.shared.stop.store(true, Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let sessions = self.sessions();
        let (c4, c6) = cleanup_lines(&self.shared.cfg, &sessions);
        let r = in_netns(self.shared.cfg.netns.as_deref(), || {
            ip_batch(false, true, &c4).and_then(|_| ip_batch(true, true, &c6))
        });
        if let Err(e) = r {
            eprintln!("gnb: removing policy rules: {e}");
        }
    }
}

impl Drop for Gnb {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Reads every TUN, sends G-PDUs.
fn uplink(sh: &Shared, sock4: &UdpSocket, sock6: Option<&UdpSocket>) {
    // SAFETY: plain epoll syscalls on descriptors owned by `sh` for the thread's life.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        eprintln!("gnb: epoll_create1: {}", io::Error::last_os_error());
        return;
    }
    for (i, ue) in sh.ues.iter().enumerate() {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: i as u64,
        };
        // SAFETY: valid epoll fd, TUN fd and event.
        let r = unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, ue.tun.as_raw_fd(), &mut ev) };
        if r < 0 {
            eprintln!("gnb: epoll_ctl: {}", io::Error::last_os_error());
        }
    }
    let psc = sh.cfg.psc.then_some(PscFields::Ul { qfi: sh.cfg.qfi });
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
    let mut buf = vec![0u8; HEADROOM + BUF_LEN];
    while !sh.stop.load(Relaxed) {
        // SAFETY: events has room for events.len() entries.
        let n = unsafe { libc::epoll_wait(ep, events.as_mut_ptr(), events.len() as i32, TICK_MS) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            eprintln!("gnb: epoll_wait: {e}");
            break;
        }
        for ev in &events[..n as usize] {
            let Some(ue) = sh.ues.get(ev.u64 as usize) else {
                continue;
            };
            let sock = if ue.dst.is_ipv4() {
                sock4
            } else {
                match sock6 {
                    Some(s) => s,
                    None => continue,
                }
            };
            // A bounded batch per wake-up, so one busy UE does not starve the others.
            for _ in 0..64 {
                let len = match ue.tun.read(&mut buf[HEADROOM..]) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(_) => {
                        ue.counters.ul_dropped.fetch_add(1, Relaxed);
                        break;
                    }
                };
                let inner = &buf[HEADROOM..HEADROOM + len];
                if !from_ue(inner, &ue.session) {
                    ue.counters.ul_dropped.fetch_add(1, Relaxed);
                    continue;
                }
                let hlen = gtpu::GpduHeader {
                    teid: ue.session.ul_teid,
                    sequence_number: None,
                    psc,
                }
                .header_len();
                let start = HEADROOM - hlen;
                if gtpu::write_gpdu_header(&mut buf[start..], ue.session.ul_teid, psc, len).is_err()
                {
                    ue.counters.ul_dropped.fetch_add(1, Relaxed);
                    continue;
                }
                match sock.send_to(&buf[start..HEADROOM + len], ue.dst) {
                    Ok(_) => {
                        ue.counters.ul_packets.fetch_add(1, Relaxed);
                        ue.counters.ul_bytes.fetch_add(len as u64, Relaxed);
                    }
                    Err(_) => {
                        ue.counters.ul_dropped.fetch_add(1, Relaxed);
                        sh.counters.send_errors.fetch_add(1, Relaxed);
                    }
                }
            }
        }
    }
    // SAFETY: closing the epoll descriptor we created.
    unsafe { libc::close(ep) };
}

/// An IP packet with the UE's source address.
fn from_ue(p: &[u8], s: &UeSession) -> bool {
    match p.first().map(|b| b >> 4) {
        Some(4) => matches!((p.get(12..16), s.ue_ip), (Some(a), Some(ue)) if a == ue.octets()),
        Some(6) => matches!((p.get(8..24), s.ue_ip6), (Some(a), Some(ue)) if a == ue.octets()),
        _ => false,
    }
}

/// An IP packet for the UE: its IPv4 address, or an address in its IPv6 /64.
fn to_ue(p: &[u8], s: &UeSession) -> bool {
    match p.first().map(|b| b >> 4) {
        Some(4) => matches!((p.get(16..20), s.ue_ip), (Some(a), Some(ue)) if a == ue.octets()),
        Some(6) => {
            matches!((p.get(24..32), s.ue_ip6), (Some(a), Some(ue)) if a == &ue.octets()[..8])
        }
        _ => false,
    }
}

/// The sockets answers leave from: the IPv4 one or the IPv6 one, by the peer's address.
struct Tx<'a> {
    sock4: &'a UdpSocket,
    sock6: Option<&'a UdpSocket>,
}

impl<'a> Tx<'a> {
    fn new(sock4: &'a UdpSocket, sock6: Option<&'a UdpSocket>) -> Self {
        Tx { sock4, sock6 }
    }

    /// Sends at once.
    fn send(&self, sh: &Shared, data: &[u8], to: SocketAddr) {
        let sock = if to.is_ipv4() {
            Some(self.sock4)
        } else {
            self.sock6
        };
        if sock.is_none_or(|s| s.send_to(data, to).is_err()) {
            sh.counters.send_errors.fetch_add(1, Relaxed);
        }
    }

    /// Sends an answer stamped at `stamped`: at once, or once the uplink delay has held
    /// it.
    fn answer(&self, sh: &Shared, data: &[u8], to: SocketAddr, stamped: SystemTime) {
        match &sh.ul_line {
            Some(line) => {
                if !line.push(data, to, stamped) {
                    sh.counters.ul_delay_dropped.fetch_add(1, Relaxed);
                }
            }
            None => self.send(sh, data, to),
        }
    }
}

/// Reads GTP-U from one socket: each message received at once, or held the downlink
/// delay first.
fn downlink(sh: &Shared, sock: &UdpSocket, tx: &Tx) {
    let mut buf = vec![0u8; BUF_LEN];
    let mut out = [0u8; 64];
    while !sh.stop.load(Relaxed) {
        let (len, from) = match sock.recv_from(&mut buf) {
            Ok(r) => r,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                eprintln!("gnb: recv: {e}");
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let arrived = SystemTime::now();
        let msg = &buf[..len];
        match &sh.dl_line {
            Some(line) => {
                if !line.push(msg, from, arrived) {
                    sh.counters.dl_delay_dropped.fetch_add(1, Relaxed);
                }
            }
            None => received(sh, tx, msg, from, arrived, &mut out),
        }
    }
}

/// Receives what the downlink delay held, once it is due.
fn dl_delayed(sh: &Shared, tx: &Tx) {
    let Some(line) = &sh.dl_line else { return };
    let mut out = [0u8; 64];
    line.run(&sh.stop, |h| {
        // Not before arrival plus the delay by the wall clock either, which the time
        // stamps are read from (the line waits by the monotonic clock).
        let at = SystemTime::now().max(h.at + line.delay());
        received(sh, tx, &h.data, h.addr, at, &mut out);
    });
}

/// Sends the answers the uplink delay held, once due.
fn ul_delayed(sh: &Shared, tx: &Tx) {
    let Some(line) = &sh.ul_line else { return };
    line.run(&sh.stop, |h| {
        // Held the delay by the wall clock too, which the UPF reads its receive time
        // from (the line waits by the monotonic clock): at most a slew's worth more.
        let due = h.at + line.delay();
        if let Ok(short) = due.duration_since(SystemTime::now()) {
            std::thread::sleep(short.min(line.delay()));
        }
        tx.send(sh, &h.data, h.addr)
    });
}

/// One GTP-U message from `from`, received at `at`: a G-PDU to its UE's TUN and, when
/// it is a QoS monitoring packet, answered; an Echo Request answered.
fn received(sh: &Shared, tx: &Tx, msg: &[u8], from: SocketAddr, at: SystemTime, out: &mut [u8]) {
    if msg.len() >= 2 && msg[1] == message_type::G_PDU {
        let info = match gtpu::parse_gpdu(msg) {
            Ok(i) => i,
            Err(_) => {
                sh.counters.malformed.fetch_add(1, Relaxed);
                return;
            }
        };
        let Some(ue) = sh.by_teid.get(&info.teid).and_then(|&i| sh.ues.get(i)) else {
            sh.counters.unknown_teid.fetch_add(1, Relaxed);
            return;
        };
        let Ok(monitoring) = qos::dl_monitoring(msg, &info) else {
            sh.counters.malformed.fetch_add(1, Relaxed);
            return;
        };
        let inner = trim_to_ip_length(info.payload(msg));
        // A monitoring packet may carry no T-PDU: nothing for the UE then.
        if monitoring.is_none() || !inner.is_empty() {
            deliver(sh, ue, inner);
        }
        if let Some(dl) = monitoring {
            sh.counters.qos_monitoring.fetch_add(1, Relaxed);
            // T3 >= T2 even if the wall clock stepped back meanwhile.
            let sent = SystemTime::now().max(at);
            match qos::write_answer(
                out,
                ue.session.ul_teid,
                dl,
                qos::ntp64(at),
                qos::ntp64(sent),
            ) {
                Ok(n) => {
                    sh.counters.qos_answers.fetch_add(1, Relaxed);
                    tx.answer(sh, &out[..n], ue.dst, sent);
                }
                Err(_) => {
                    sh.counters.send_errors.fetch_add(1, Relaxed);
                }
            }
        }
        return;
    }
    // Signalling messages are rare: the full parser may allocate.
    match Message::parse(msg) {
        Ok(m @ Message::EchoRequest { .. }) => {
            sh.counters.echo_requests.fetch_add(1, Relaxed);
            let resp = Message::echo_response_to(m.header());
            if let Ok(n) = resp.emit(out) {
                tx.answer(sh, &out[..n], from, SystemTime::now());
            }
        }
        Ok(Message::EchoResponse { .. }) => {
            sh.counters.echo_responses.fetch_add(1, Relaxed);
        }
        Ok(Message::ErrorIndication { .. }) => {
            sh.counters.error_indications.fetch_add(1, Relaxed);
        }
        Ok(Message::EndMarker { .. }) => {
            sh.counters.end_markers.fetch_add(1, Relaxed);
        }
        Ok(_) => {
            sh.counters.other_messages.fetch_add(1, Relaxed);
        }
        Err(_) => {
            sh.counters.malformed.fetch_add(1, Relaxed);
        }
    }
}

/// Writes a downlink packet to the UE's TUN, if it is for the UE.
fn deliver(sh: &Shared, ue: &Ue, inner: &[u8]) {
    if !to_ue(inner, &ue.session) {
        ue.counters.dl_dropped.fetch_add(1, Relaxed);
        return;
    }
    match ue.tun.write(inner) {
        Ok(_) => {
            ue.counters.dl_packets.fetch_add(1, Relaxed);
            ue.counters.dl_bytes.fetch_add(inner.len() as u64, Relaxed);
        }
        Err(_) => {
            ue.counters.dl_dropped.fetch_add(1, Relaxed);
            sh.counters.tun_write_errors.fetch_add(1, Relaxed);
        }
    }
}

/// The inner packet up to the length its IP header gives (a G-PDU may carry padding after
/// it, see the gtpu crate on the Length field); unchanged when the header is short.
fn trim_to_ip_length(p: &[u8]) -> &[u8] {
    let len = match p.first().map(|b| b >> 4) {
        Some(4) if p.len() >= 20 => usize::from(u16::from_be_bytes([p[2], p[3]])),
        Some(6) if p.len() >= 40 => 40 + usize::from(u16::from_be_bytes([p[4], p[5]])),
        _ => return p,
    };
    if len > 0 && len <= p.len() {
        &p[..len]
    } else {
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_from_smf_output() {
        let text = r#"{"index":0,"cp_seid":1,"ue_ip":"10.45.0.1","gnb_teid":1,"up_fseid":{"seid":1,"ipv4":"127.0.0.1"},"n3_fteid":{"teid":1,"ipv4":"192.168.3.2"},"state":{"state":"established"}}
{"index":1,"cp_seid":2,"ue_ip":"10.45.0.2","gnb_teid":2,"up_fseid":{"seid":2,"ipv4":"127.0.0.1"},"n3_fteid":{"teid":2,"ipv4":"192.168.3.2"},"state":{"state":"modified"}}
{"index":2,"cp_seid":3,"ue_ip":"10.45.0.3","gnb_teid":3,"state":{"state":"failed"}}
{"index":3,"cp_seid":4,"ue_ip":"10.45.0.4","gnb_teid":4,"n3_fteid":{"teid":9,"ipv4":"192.168.3.2"},"state":{"state":"deleted"}}

{"index":4,"ue_ip6":"fd00:45::5","gnb_teid":5,"n3_fteid":{"teid":10,"ipv6":"fd00:3::2"}}
"#;
        let (s, skipped) = parse_sessions(text).unwrap();
        assert_eq!(skipped, 2);
        assert_eq!(s.len(), 3);
        assert_eq!(
            s[1],
            UeSession {
                index: 1,
                ue_ip: Some(Ipv4Addr::new(10, 45, 0, 2)),
                ue_ip6: None,
                gnb_teid: 2,
                ul_teid: 2,
                upf: "192.168.3.2".parse().unwrap(),
            }
        );
        assert_eq!(s[2].upf, "fd00:3::2".parse::<IpAddr>().unwrap());
        assert_eq!(parse_sessions("{}\n").unwrap_err().0, 1);
    }

    #[test]
    fn delays_are_bounded() {
        let s = UeSession {
            index: 0,
            ue_ip: Some(Ipv4Addr::new(10, 45, 0, 1)),
            ue_ip6: None,
            gnb_teid: 1,
            ul_teid: 1,
            upf: "192.168.3.2".parse().unwrap(),
        };
        let too_long = delay::MAX_DELAY + Duration::from_millis(1);
        // Refused before anything is set up (no namespace, socket or TUN needed).
        let r = Gnb::start(
            GnbConfig {
                ul_delay: too_long,
                ..GnbConfig::default()
            },
            vec![s],
        );
        assert!(
            matches!(r, Err(GnbError::Delay { which: "uplink", value }) if value == too_long),
            "{:?}",
            r.err()
        );
    }

    #[test]
    fn address_checks() {
        let s = UeSession {
            index: 0,
            ue_ip: Some(Ipv4Addr::new(10, 45, 0, 1)),
            ue_ip6: Some("fd00:45::1".parse().unwrap()),
            gnb_teid: 1,
            ul_teid: 1,
            upf: "192.168.3.2".parse().unwrap(),
        };
        let mut v4 = [0u8; 20];
        v4[0] = 0x45;
        v4[3] = 20;
        v4[12..16].copy_from_slice(&[10, 45, 0, 1]);
        v4[16..20].copy_from_slice(&[192, 168, 6, 1]);
        assert!(from_ue(&v4, &s));
        assert!(!to_ue(&v4, &s));
        v4[12..16].copy_from_slice(&[192, 168, 6, 1]);
        v4[16..20].copy_from_slice(&[10, 45, 0, 1]);
        assert!(!from_ue(&v4, &s));
        assert!(to_ue(&v4, &s));
        let mut v6 = [0u8; 40];
        v6[0] = 0x60;
        v6[24..40].copy_from_slice(&"fd00:45::77".parse::<Ipv6Addr>().unwrap().octets());
        assert!(to_ue(&v6, &s));
        assert!(!from_ue(&[0x45], &s));
        let mut padded = v4.to_vec();
        padded.extend_from_slice(&[0; 8]);
        assert_eq!(trim_to_ip_length(&padded).len(), 20);
    }
}
