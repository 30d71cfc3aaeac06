//! The SMF side of one N4 association: a UDP socket, PFCP transactions (TS 29.244 clause
//! 6.4: sequence numbers, T1 retransmission, N1 retries, responses matched by sequence
//! number), and answers to what the UPF asks on its own (Heartbeat, Session Report,
//! Association Setup/Update/Release, Node Report).
//!
//! Used by the SMF emulator ([`super::Smf`]) and by the capture replayer
//! ([`crate::replay`]), each holding one [`N4`] per local SMF address.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pfcp::ie::{Flags, NodeId};
use pfcp::message::message_type as mt;
use pfcp::{CauseValue, Header, HeaderRepr, Ie, Message};
use serde::Serialize;
use tokio::net::UdpSocket;
use tokio::sync::oneshot;

/// Seconds between the NTP epoch (1900) and the Unix epoch, for Recovery Time Stamps
/// (clause 8.2.65).
pub const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// The current time as a Recovery Time Stamp (NTP seconds, 32 bits).
pub fn recovery_time_stamp_now() -> u32 {
    let unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    (unix + NTP_UNIX_OFFSET) as u32
}

/// The PFCP port (TS 29.244 clause 7.2): where requests go.
pub const PFCP_PORT: u16 = 8805;

/// Retransmission timers of clause 6.4: wait `t1` for a response, send again at most `n1`
/// times, then give up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Timers {
    #[serde(serialize_with = "ser_ms")]
    pub t1: Duration,
    pub n1: u32,
}

fn ser_ms<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64() * 1e3)
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            t1: Duration::from_secs(3),
            n1: 3,
        }
    }
}

/// A response to one of our requests.
#[derive(Debug, Clone)]
pub struct Response {
    /// The octets as received.
    pub bytes: Vec<u8>,
    pub header: HeaderRepr,
    pub from: SocketAddr,
    /// From the first transmission of the request to the arrival of this response.
    pub latency: Duration,
    /// How many times the request was sent again before this response came.
    pub retransmissions: u32,
}

/// Why a transaction ended without a response.
#[derive(Debug)]
pub enum TxError {
    /// No response after the first transmission and `retransmissions` more, T1 apart.
    Timeout {
        retransmissions: u32,
    },
    /// The request is not a PFCP message with a header we can read a sequence number from.
    BadRequest(pfcp::Error),
    Io(io::Error),
}

impl std::fmt::Display for TxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TxError::Timeout { retransmissions } => write!(
                f,
                "no response (sent {} times)",
                retransmissions.saturating_add(1)
            ),
            TxError::BadRequest(e) => write!(f, "request does not encode: {e}"),
            TxError::Io(e) => write!(f, "socket: {e}"),
        }
    }
}

impl std::error::Error for TxError {}

/// What the UPF asked of us on its own, and how we answered.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UpfRequests {
    pub heartbeats: u64,
    pub session_reports: u64,
    /// Association Setup/Update/Release and Node Report Requests from the UPF.
    pub node_requests: u64,
    /// Requests of other types, or that did not parse: not answered.
    pub unanswered: u64,
    /// Responses that matched no outstanding request (late, after a retransmission, or
    /// duplicated).
    pub stray_responses: u64,
}

#[derive(Default)]
struct Counters {
    heartbeats: AtomicU64,
    session_reports: AtomicU64,
    node_requests: AtomicU64,
    unanswered: AtomicU64,
    stray_responses: AtomicU64,
}

struct Arrival {
    bytes: Vec<u8>,
    header: HeaderRepr,
    from: SocketAddr,
    at: Instant,
}

struct Shared {
    sock: UdpSocket,
    pending: Mutex<HashMap<u32, oneshot::Sender<Arrival>>>,
    /// CP SEID -> UP SEID, to address our Session Report Responses.
    sessions: Mutex<HashMap<u64, u64>>,
    node_id: NodeId,
    recovery_time_stamp: u32,
    counters: Counters,
    /// The latest Session Report Requests, as received, for callers that check their
    /// contents (at most [`REPORTS_KEPT`]; older ones are dropped first).
    reports: Mutex<VecDeque<Vec<u8>>>,
    /// The Node Report Requests received, as `reports`.
    node_reports: Mutex<VecDeque<Vec<u8>>>,
    /// The UPF's Recovery Time Stamps as seen (Association Setup Response, its Heartbeat
    /// Requests), each new value once, in order: more than one means it restarted
    /// without its state (TS 23.527 clause 4.3.2).
    upf_time_stamps: Mutex<Vec<u32>>,
}

impl Shared {
    fn saw_upf_time_stamp(&self, ts: u32) {
        let mut v = lock(&self.upf_time_stamps);
        if v.last() != Some(&ts) {
            v.push(ts);
        }
    }
}

/// Session Report Requests kept for [`N4::take_session_reports`].
pub const REPORTS_KEPT: usize = 4096;

/// One local PFCP endpoint of the SMF towards one UPF.
pub struct N4 {
    shared: Arc<Shared>,
    upf: SocketAddr,
    timers: Timers,
    next_sequence: AtomicU32,
    receiver: tokio::task::JoinHandle<()>,
}

impl Drop for N4 {
    fn drop(&mut self) {
        self.receiver.abort();
    }
}

/// The source address the kernel would use towards `peer`: a sensible Node ID when the
/// socket is bound to the unspecified address.
pub fn local_ip_towards(peer: SocketAddr) -> io::Result<IpAddr> {
    let any: SocketAddr = if peer.is_ipv4() {
        "0.0.0.0:0".parse().expect("literal")
    } else {
        "[::]:0".parse().expect("literal")
    };
    let s = std::net::UdpSocket::bind(any)?;
    s.connect(peer)?;
    Ok(s.local_addr()?.ip())
}

impl N4 {
    /// Bind `local` and start answering the UPF at `upf`. `node_id` and
    /// `recovery_time_stamp` go into our answers to its node requests; the Recovery Time
    /// Stamp stays constant for the life of this endpoint, as peers expect (a changed one
    /// means we restarted, and Open5GS then deletes every session).
    pub async fn bind(
        local: SocketAddr,
        upf: SocketAddr,
        node_id: NodeId,
        recovery_time_stamp: u32,
        timers: Timers,
    ) -> io::Result<N4> {
        let sock = UdpSocket::bind(local).await?;
        let shared = Arc::new(Shared {
            sock,
            pending: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            node_id,
            recovery_time_stamp,
            counters: Counters::default(),
            reports: Mutex::new(VecDeque::new()),
            node_reports: Mutex::new(VecDeque::new()),
            upf_time_stamps: Mutex::new(Vec::new()),
        });
        let receiver = tokio::spawn(receive_loop(shared.clone()));
        Ok(N4 {
            shared,
            upf,
            timers,
            next_sequence: AtomicU32::new(1),
            receiver,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.shared.sock.local_addr()
    }

    pub fn upf(&self) -> SocketAddr {
        self.upf
    }

    pub fn node_id(&self) -> &NodeId {
        &self.shared.node_id
    }

    pub fn recovery_time_stamp(&self) -> u32 {
        self.shared.recovery_time_stamp
    }

    pub fn timers(&self) -> Timers {
        self.timers
    }

    /// A fresh sequence number (24 bits, wrapping, never 0).
    pub fn next_sequence(&self) -> u32 {
        loop {
            let s = self.next_sequence.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
            if s != 0 {
                return s;
            }
        }
    }

    /// Remember which UP SEID belongs to our CP SEID, so a Session Report Request for it
    /// is answered with the right SEID in the header.
    pub fn bind_session(&self, cp_seid: u64, up_seid: u64) {
        lock(&self.shared.sessions).insert(cp_seid, up_seid);
    }

    pub fn unbind_session(&self, cp_seid: u64) {
        lock(&self.shared.sessions).remove(&cp_seid);
    }

    /// The Session Report Requests received since the last call (the newest
    /// [`REPORTS_KEPT`]), oldest first; each was answered with Request accepted.
    pub fn take_session_reports(&self) -> Vec<Vec<u8>> {
        lock(&self.shared.reports).drain(..).collect()
    }

    /// The Node Report Requests received since the last call, as
    /// [`N4::take_session_reports`].
    pub fn take_node_reports(&self) -> Vec<Vec<u8>> {
        lock(&self.shared.node_reports).drain(..).collect()
    }

    /// The UPF's Recovery Time Stamps seen so far, each change once (see `Shared`).
    pub fn upf_recovery_time_stamps(&self) -> Vec<u32> {
        lock(&self.shared.upf_time_stamps).clone()
    }

    /// Note the Recovery Time Stamp of the UPF's Association Setup Response.
    pub fn saw_upf_recovery_time_stamp(&self, ts: u32) {
        self.shared.saw_upf_time_stamp(ts);
    }

    pub fn upf_requests(&self) -> UpfRequests {
        let c = &self.shared.counters;
        UpfRequests {
            heartbeats: c.heartbeats.load(Ordering::Relaxed),
            session_reports: c.session_reports.load(Ordering::Relaxed),
            node_requests: c.node_requests.load(Ordering::Relaxed),
            unanswered: c.unanswered.load(Ordering::Relaxed),
            stray_responses: c.stray_responses.load(Ordering::Relaxed),
        }
    }

    /// Send one encoded request to the UPF and wait for the response with the same
    /// sequence number: T1 between transmissions, at most N1 retransmissions of the same
    /// octets. Ends within T1 x (N1 + 1).
    pub async fn transact(&self, request: &[u8]) -> Result<Response, TxError> {
        let header = Header::new_checked(request)
            .and_then(|h| HeaderRepr::parse(&h))
            .map_err(TxError::BadRequest)?;
        let seq = header.sequence;
        let (tx, mut rx) = oneshot::channel();
        lock(&self.shared.pending).insert(seq, tx);
        let guard = PendingGuard {
            shared: &self.shared,
            seq,
        };
        let first = Instant::now();
        let mut retransmissions = 0;
        loop {
            if let Err(e) = self.shared.sock.send_to(request, self.upf).await {
                drop(guard);
                return Err(TxError::Io(e));
            }
            match tokio::time::timeout(self.timers.t1, &mut rx).await {
                Ok(Ok(a)) => {
                    drop(guard);
                    return Ok(Response {
                        bytes: a.bytes,
                        header: a.header,
                        from: a.from,
                        latency: a.at.saturating_duration_since(first),
                        retransmissions,
                    });
                }
                // The receiver went away: the endpoint is shutting down.
                Ok(Err(_)) => {
                    return Err(TxError::Io(io::Error::other("receiver stopped")));
                }
                Err(_) if retransmissions < self.timers.n1 => retransmissions += 1,
                Err(_) => {
                    drop(guard);
                    return Err(TxError::Timeout { retransmissions });
                }
            }
        }
    }

    /// Send octets to the UPF without waiting (e.g. a response we build ourselves).
    pub async fn send_raw(&self, bytes: &[u8]) -> io::Result<()> {
        self.shared.sock.send_to(bytes, self.upf).await.map(|_| ())
    }
}

/// Removes a pending transaction when the waiting side gives up.
struct PendingGuard<'a> {
    shared: &'a Shared,
    seq: u32,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(&self.shared.pending).remove(&self.seq);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

async fn receive_loop(shared: Arc<Shared>) {
    let mut buf = vec![0u8; 65536];
    loop {
        let (n, from) = match shared.sock.recv_from(&mut buf).await {
            Ok(x) => x,
            // ICMP errors (port unreachable) surface here on Linux: keep receiving.
            Err(_) => continue,
        };
        let at = Instant::now();
        let bytes = &buf[..n];
        let header = match Header::new_checked(bytes).and_then(|h| HeaderRepr::parse(&h)) {
            Ok(h) => h,
            Err(_) => {
                shared.counters.unanswered.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        if mt::is_request(header.message_type) {
            if header.message_type == mt::HEARTBEAT_REQUEST {
                if let Ok((_, hb)) = pfcp::msg::parse::<pfcp::msg::HeartbeatRequest>(bytes) {
                    shared.saw_upf_time_stamp(hb.recovery_time_stamp);
                }
            }
            if header.message_type == mt::NODE_REPORT_REQUEST {
                let mut r = lock(&shared.node_reports);
                if r.len() == REPORTS_KEPT {
                    r.pop_front();
                }
                r.push_back(bytes.to_vec());
            }
            if header.message_type == mt::SESSION_REPORT_REQUEST {
                let mut r = lock(&shared.reports);
                if r.len() == REPORTS_KEPT {
                    r.pop_front();
                }
                r.push_back(bytes.to_vec());
            }
            if let Some(answer) = answer_upf_request(&shared, &header) {
                let _ = shared.sock.send_to(&answer, from).await;
            }
            continue;
        }
        let waiter = lock(&shared.pending).remove(&header.sequence);
        match waiter {
            Some(tx) => {
                let _ = tx.send(Arrival {
                    bytes: bytes.to_vec(),
                    header,
                    from,
                    at,
                });
            }
            None => {
                shared
                    .counters
                    .stray_responses
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// Our answer to a request the UPF sent on its own, if we answer that type.
fn answer_upf_request(shared: &Shared, h: &HeaderRepr) -> Option<Vec<u8>> {
    let c = &shared.counters;
    let accepted = Ie::Cause(CauseValue::REQUEST_ACCEPTED);
    let node_id = Ie::NodeId(shared.node_id.clone().into());
    let (rtype, seid, ies) = match h.message_type {
        mt::HEARTBEAT_REQUEST => {
            c.heartbeats.fetch_add(1, Ordering::Relaxed);
            (
                mt::HEARTBEAT_RESPONSE,
                None,
                vec![Ie::RecoveryTimeStamp(shared.recovery_time_stamp)],
            )
        }
        mt::SESSION_REPORT_REQUEST => {
            c.session_reports.fetch_add(1, Ordering::Relaxed);
            let cp = h.seid.unwrap_or(0);
            let up = lock(&shared.sessions).get(&cp).copied().unwrap_or(0);
            (mt::SESSION_REPORT_RESPONSE, Some(up), vec![accepted])
        }
        mt::ASSOCIATION_SETUP_REQUEST => {
            c.node_requests.fetch_add(1, Ordering::Relaxed);
            (
                mt::ASSOCIATION_SETUP_RESPONSE,
                None,
                vec![
                    node_id,
                    accepted,
                    Ie::RecoveryTimeStamp(shared.recovery_time_stamp),
                    Ie::CpFunctionFeatures(Flags(vec![0])),
                ],
            )
        }
        mt::ASSOCIATION_UPDATE_REQUEST => {
            c.node_requests.fetch_add(1, Ordering::Relaxed);
            (
                mt::ASSOCIATION_UPDATE_RESPONSE,
                None,
                vec![node_id, accepted],
            )
        }
        mt::ASSOCIATION_RELEASE_REQUEST => {
            c.node_requests.fetch_add(1, Ordering::Relaxed);
            (
                mt::ASSOCIATION_RELEASE_RESPONSE,
                None,
                vec![node_id, accepted],
            )
        }
        mt::NODE_REPORT_REQUEST => {
            c.node_requests.fetch_add(1, Ordering::Relaxed);
            (mt::NODE_REPORT_RESPONSE, None, vec![node_id, accepted])
        }
        _ => {
            c.unanswered.fetch_add(1, Ordering::Relaxed);
            return None;
        }
    };
    let header = match seid {
        Some(s) => HeaderRepr::session(rtype, s, h.sequence),
        None => HeaderRepr::node(rtype, h.sequence),
    };
    Some(Message { header, ies }.emit())
}
