//! A fake UPF: just enough of the N4 procedures to exercise the SMF emulator and the
//! capture replayer without upfd. It is a test double, not a model of any UPF: it checks
//! nothing beyond what the codec checks and installs no rules.
//!
//! - Association Setup/Update/Release, Heartbeat, PFD Management, Session Set Deletion,
//!   Node Report: accepted.
//! - Session Establishment: needs an association with the sender's address (else Cause 72),
//!   allocates a UP SEID, an F-TEID for every PDI F-TEID with CHOOSE (one per CHOOSE ID
//!   within the session) and a UE IPv4/IPv6 address for CHV4/CHV6, and returns a Created
//!   PDR for each PDR it allocated something for.
//! - Session Modification: the same allocation for created PDRs; Cause 65 for an unknown
//!   SEID. Session Deletion: Cause 65 for an unknown SEID.
//! - Optionally sends its own Heartbeat Request after each association and a Session
//!   Report Request after every n-th establishment, and counts the answers.
//! - Optionally ([`FakeUpfConfig::qos_reports`]) answers QoS monitoring's Create SRRs
//!   with made-up delays: a Session Report Request (SESR) after the establishment with a
//!   QoS Monitoring Report per SRR and QFI, and at deletion the same for the SRRs that
//!   report at release (SESRL), in the Session Deletion Response. The delays are
//!   [`fake_delays`]: what the SRR asked, from its ID.
//! - A request that does not decode is answered with the Cause and Offending IE the codec
//!   maps its error to.

use std::collections::{HashMap, HashSet};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use pfcp::ie::{
    report_type, up_function_features, FSeid, FTeid, Flags, NodeId, UeIpAddress,
    UserPlaneIpResourceInformation,
};
use pfcp::message::message_type as mt;
use pfcp::msg::{
    CreatePdr, CreateSrr, CreatedPdr, Msg, QosMonitoringReport, SessionDeletionResponse,
    SessionReport, SessionReportRequest,
};
use pfcp::{CauseValue, Header, HeaderRepr, Ie, Message};
use serde::Serialize;
use tokio::net::UdpSocket;

/// How the fake behaves.
#[derive(Debug, Clone)]
pub struct FakeUpfConfig {
    /// Where it listens (port 0: any).
    pub listen: SocketAddr,
    /// Its N3 address: in allocated F-TEIDs and in User Plane IP Resource Information.
    pub n3: Ipv4Addr,
    /// Announce FTUP (F-TEID allocation by the UP function).
    pub ftup: bool,
    /// Send a Heartbeat Request to each peer right after accepting its association.
    pub heartbeat_after_association: bool,
    /// Send a Session Report Request (usage report trigger) after every n-th establishment.
    pub report_every: Option<u64>,
    /// Report QoS monitoring for the Create SRRs of each establishment (see above).
    pub qos_reports: bool,
}

impl Default for FakeUpfConfig {
    fn default() -> Self {
        FakeUpfConfig {
            listen: "127.0.0.1:0".parse().expect("literal"),
            n3: Ipv4Addr::new(127, 0, 0, 1),
            ftup: true,
            heartbeat_after_association: false,
            report_every: None,
            qos_reports: false,
        }
    }
}

/// What the fake has seen.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FakeUpfStats {
    pub requests: u64,
    pub associations: u64,
    pub releases: u64,
    pub established: u64,
    pub modified: u64,
    pub deleted: u64,
    /// Requests answered with a Cause other than accepted.
    pub rejected: u64,
    pub active_sessions: u64,
    pub fteids_allocated: u64,
    pub heartbeat_answers: u64,
    pub report_answers: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    associations: AtomicU64,
    releases: AtomicU64,
    established: AtomicU64,
    modified: AtomicU64,
    deleted: AtomicU64,
    rejected: AtomicU64,
    fteids: AtomicU64,
    heartbeat_answers: AtomicU64,
    report_answers: AtomicU64,
}

struct FakeSession {
    cp_seid: u64,
    peer: SocketAddr,
    /// CHOOSE ID -> the F-TEID allocated for it.
    chosen: HashMap<u8, FTeid>,
    srrs: Vec<CreateSrr>,
}

#[derive(Default)]
struct State {
    associated: HashSet<IpAddr>,
    sessions: HashMap<u64, FakeSession>,
    next_seid: u64,
    next_teid: u32,
    next_ue: u32,
    next_seq: u32,
}

struct Inner {
    cfg: FakeUpfConfig,
    sock: UdpSocket,
    node_id: NodeId,
    recovery_time_stamp: u32,
    state: Mutex<State>,
    counters: Counters,
}

/// A running fake UPF; stops when dropped.
pub struct FakeUpf {
    inner: Arc<Inner>,
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeUpf {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl FakeUpf {
    pub async fn start(cfg: FakeUpfConfig) -> io::Result<FakeUpf> {
        let sock = UdpSocket::bind(cfg.listen).await?;
        let addr = sock.local_addr()?;
        let node_id = match addr.ip() {
            IpAddr::V4(a) => NodeId::Ipv4(a),
            IpAddr::V6(a) => NodeId::Ipv6(a),
        };
        let inner = Arc::new(Inner {
            cfg,
            sock,
            node_id,
            recovery_time_stamp: super::n4::recovery_time_stamp_now(),
            state: Mutex::new(State {
                next_seid: 1,
                next_teid: 1,
                next_ue: 1,
                next_seq: 1,
                ..State::default()
            }),
            counters: Counters::default(),
        });
        let task = tokio::spawn(serve(inner.clone()));
        Ok(FakeUpf { inner, addr, task })
    }

    /// Its PFCP address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stats(&self) -> FakeUpfStats {
        let c = &self.inner.counters;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        FakeUpfStats {
            requests: g(&c.requests),
            associations: g(&c.associations),
            releases: g(&c.releases),
            established: g(&c.established),
            modified: g(&c.modified),
            deleted: g(&c.deleted),
            rejected: g(&c.rejected),
            active_sessions: lock(&self.inner.state).sessions.len() as u64,
            fteids_allocated: g(&c.fteids),
            heartbeat_answers: g(&c.heartbeat_answers),
            report_answers: g(&c.report_answers),
        }
    }

    /// The CP F-SEID SEIDs of the sessions it holds, by UP SEID.
    pub fn sessions(&self) -> HashMap<u64, u64> {
        lock(&self.inner.state)
            .sessions
            .iter()
            .map(|(up, s)| (*up, s.cp_seid))
            .collect()
    }
}

async fn serve(inner: Arc<Inner>) {
    let mut buf = vec![0u8; 65536];
    loop {
        let Ok((n, from)) = inner.sock.recv_from(&mut buf).await else {
            continue;
        };
        let bytes = &buf[..n];
        let Ok(header) = Header::new_checked(bytes).and_then(|h| HeaderRepr::parse(&h)) else {
            continue;
        };
        if !mt::is_request(header.message_type) {
            match header.message_type {
                mt::HEARTBEAT_RESPONSE => &inner.counters.heartbeat_answers,
                mt::SESSION_REPORT_RESPONSE => &inner.counters.report_answers,
                _ => continue,
            }
            .fetch_add(1, Ordering::Relaxed);
            continue;
        }
        inner.counters.requests.fetch_add(1, Ordering::Relaxed);
        let (answer, extra) = handle(&inner, &header, bytes, from);
        if let Some(a) = answer {
            let _ = inner.sock.send_to(&a, from).await;
        }
        for (to, m) in extra {
            let _ = inner.sock.send_to(&m, to).await;
        }
    }
}

fn response_type(request: u8) -> u8 {
    request + 1
}

/// Requests of our own to send after an answer: destination and octets.
type Extra = Vec<(SocketAddr, Vec<u8>)>;

/// The answer to one request, and requests of our own to send after it.
fn handle(
    inner: &Inner,
    h: &HeaderRepr,
    bytes: &[u8],
    from: SocketAddr,
) -> (Option<Vec<u8>>, Extra) {
    let c = &inner.counters;
    let node = || Ie::NodeId(inner.node_id.clone().into());
    let cause = |v: CauseValue| Ie::Cause(v);
    let rt = response_type(h.message_type);
    let node_reply = |ies: Vec<Ie>| {
        Message {
            header: HeaderRepr::node(rt, h.sequence),
            ies,
        }
        .emit()
    };
    let parsed = match Msg::parse(bytes) {
        Ok((_, m)) => m,
        Err(e) => {
            c.rejected.fetch_add(1, Ordering::Relaxed);
            let mut ies = vec![cause(e.cause())];
            if let Some(o) = e.offending_ie() {
                ies.push(Ie::OffendingIe(o));
            }
            let header = if mt::is_session(h.message_type) {
                HeaderRepr::session(rt, 0, h.sequence)
            } else {
                ies.insert(0, node());
                HeaderRepr::node(rt, h.sequence)
            };
            return (Some(Message { header, ies }.emit()), vec![]);
        }
    };
    let mut extra = Vec::new();
    let answer = match parsed {
        Msg::HeartbeatRequest(_) => {
            node_reply(vec![Ie::RecoveryTimeStamp(inner.recovery_time_stamp)])
        }
        Msg::AssociationSetupRequest(_) => {
            c.associations.fetch_add(1, Ordering::Relaxed);
            lock(&inner.state).associated.insert(from.ip());
            let mut features = Flags(vec![0, 0]);
            if inner.cfg.ftup {
                features.set(up_function_features::FTUP, true);
            }
            if inner.cfg.heartbeat_after_association {
                let seq = next_seq(inner);
                let hb = Message {
                    header: HeaderRepr::node(mt::HEARTBEAT_REQUEST, seq),
                    ies: vec![Ie::RecoveryTimeStamp(inner.recovery_time_stamp)],
                };
                extra.push((from, hb.emit()));
            }
            node_reply(vec![
                node(),
                cause(CauseValue::REQUEST_ACCEPTED),
                Ie::RecoveryTimeStamp(inner.recovery_time_stamp),
                Ie::UpFunctionFeatures(features),
                Ie::UserPlaneIpResourceInformation(UserPlaneIpResourceInformation {
                    spare: 0,
                    teid_range_bits: 0,
                    teid_range: None,
                    ipv4: Some(inner.cfg.n3),
                    ipv6: None,
                    network_instance: None,
                    source_interface: None,
                }),
            ])
        }
        Msg::AssociationUpdateRequest(_) => {
            node_reply(vec![node(), cause(CauseValue::REQUEST_ACCEPTED)])
        }
        Msg::AssociationReleaseRequest(_) => {
            c.releases.fetch_add(1, Ordering::Relaxed);
            let mut st = lock(&inner.state);
            st.associated.remove(&from.ip());
            st.sessions.retain(|_, s| s.peer.ip() != from.ip());
            node_reply(vec![node(), cause(CauseValue::REQUEST_ACCEPTED)])
        }
        Msg::PfdManagementRequest(_) => node_reply(vec![cause(CauseValue::REQUEST_ACCEPTED)]),
        Msg::SessionSetDeletionRequest(_) | Msg::NodeReportRequest(_) => {
            node_reply(vec![node(), cause(CauseValue::REQUEST_ACCEPTED)])
        }
        Msg::SessionSetModificationRequest(_) => {
            node_reply(vec![node(), cause(CauseValue::REQUEST_ACCEPTED)])
        }
        Msg::SessionEstablishmentRequest(r) => {
            let mut st = lock(&inner.state);
            if !st.associated.contains(&from.ip()) {
                c.rejected.fetch_add(1, Ordering::Relaxed);
                let ies = vec![node(), cause(CauseValue::NO_ESTABLISHED_PFCP_ASSOCIATION)];
                let header = HeaderRepr::session(rt, r.cp_fseid.seid, h.sequence);
                return (Some(Message { header, ies }.emit()), vec![]);
            }
            let up_seid = st.next_seid;
            st.next_seid += 1;
            let mut chosen = HashMap::new();
            let created = allocate(inner, &mut st, &mut chosen, &r.create_pdrs);
            st.sessions.insert(
                up_seid,
                FakeSession {
                    cp_seid: r.cp_fseid.seid,
                    peer: from,
                    chosen,
                    srrs: r.create_srrs.clone(),
                },
            );
            let n = c.established.fetch_add(1, Ordering::Relaxed) + 1;
            if inner.cfg.report_every.and_then(|k| n.checked_rem(k)) == Some(0) {
                let seq = st.next_seq;
                st.next_seq = (st.next_seq + 1) & 0x00ff_ffff;
                let report = Message {
                    header: HeaderRepr::session(mt::SESSION_REPORT_REQUEST, r.cp_fseid.seid, seq),
                    ies: vec![Ie::ReportType(Flags::from_bits(&[report_type::USAR], 1))],
                };
                extra.push((from, report.emit()));
            }
            if inner.cfg.qos_reports && !r.create_srrs.is_empty() {
                let seq = st.next_seq;
                st.next_seq = (st.next_seq + 1) & 0x00ff_ffff;
                let h = HeaderRepr::session(0, r.cp_fseid.seid, seq);
                let req =
                    SessionReportRequest::session(qos_session_reports(&r.create_srrs, 1, |_| true));
                extra.push((from, pfcp::msg::emit(&h, &req)));
            }
            let (v4, v6) = match inner.node_id {
                NodeId::Ipv6(a) => (None, Some(a)),
                NodeId::Ipv4(a) => (Some(a), None),
                NodeId::Fqdn(_) => (Some(inner.cfg.n3), None),
            };
            let mut ies = vec![
                node(),
                cause(CauseValue::REQUEST_ACCEPTED),
                Ie::FSeid(FSeid {
                    spare: 0,
                    seid: up_seid,
                    ipv4: v4,
                    ipv6: v6,
                }),
            ];
            ies.extend(created.into_iter().map(created_pdr_ie));
            let header = HeaderRepr::session(rt, r.cp_fseid.seid, h.sequence);
            Message { header, ies }.emit()
        }
        Msg::SessionModificationRequest(r) => {
            let mut st = lock(&inner.state);
            let up = h.seid.unwrap_or(0);
            let Some(mut sess) = st.sessions.remove(&up) else {
                c.rejected.fetch_add(1, Ordering::Relaxed);
                let header = HeaderRepr::session(rt, 0, h.sequence);
                let ies = vec![cause(CauseValue::SESSION_CONTEXT_NOT_FOUND)];
                return (Some(Message { header, ies }.emit()), vec![]);
            };
            let created = allocate(inner, &mut st, &mut sess.chosen, &r.create_pdrs);
            let cp = r.cp_fseid.map(|f| f.seid).unwrap_or(sess.cp_seid);
            sess.cp_seid = cp;
            st.sessions.insert(up, sess);
            c.modified.fetch_add(1, Ordering::Relaxed);
            let mut ies = vec![cause(CauseValue::REQUEST_ACCEPTED)];
            ies.extend(created.into_iter().map(created_pdr_ie));
            let header = HeaderRepr::session(rt, cp, h.sequence);
            Message { header, ies }.emit()
        }
        Msg::SessionDeletionRequest(_) => {
            let up = h.seid.unwrap_or(0);
            let removed = lock(&inner.state).sessions.remove(&up);
            match removed {
                Some(s) => {
                    c.deleted.fetch_add(1, Ordering::Relaxed);
                    let header = HeaderRepr::session(rt, s.cp_seid, h.sequence);
                    let mut d = SessionDeletionResponse {
                        cause: CauseValue::REQUEST_ACCEPTED,
                        offending_ie: None,
                        load_control_information: None,
                        overload_control_information: None,
                        usage_reports: vec![],
                        additional_usage_reports_information: None,
                        session_reports: vec![],
                        other: vec![],
                    };
                    if inner.cfg.qos_reports {
                        d.session_reports = qos_session_reports(&s.srrs, 2, |f| {
                            f.get(pfcp::ie::reporting_frequency::SESRL)
                        });
                    }
                    pfcp::msg::emit(&header, &d)
                }
                None => {
                    c.rejected.fetch_add(1, Ordering::Relaxed);
                    let header = HeaderRepr::session(rt, 0, h.sequence);
                    let ies = vec![cause(CauseValue::SESSION_CONTEXT_NOT_FOUND)];
                    Message { header, ies }.emit()
                }
            }
        }
        // Requests a UP function receives but the fake does not handle, and requests only
        // a UP function sends (Session Report): Service not supported.
        _ => {
            c.rejected.fetch_add(1, Ordering::Relaxed);
            let ies = vec![cause(CauseValue::SERVICE_NOT_SUPPORTED)];
            let header = match h.seid {
                Some(s) => HeaderRepr::session(rt, s, h.sequence),
                None => HeaderRepr::node(rt, h.sequence),
            };
            Message { header, ies }.emit()
        }
    };
    (Some(answer), extra)
}

/// The delays the fake reports for SRR `srr_id`, ms: downlink `srr_id` x 10 + `k`,
/// uplink that + 1, round trip the sum (`k`: 1 in Session Reports, 2 at deletion).
pub fn fake_delays(srr_id: u8, k: u32) -> (u32, u32, u32) {
    let dl = u32::from(srr_id) * 10 + k;
    (dl, dl + 1, 2 * dl + 1)
}

/// One Session Report per SRR whose control informations' Reporting Frequency `which`
/// picks, with a QoS Monitoring Report per QFI of the delays it asked for.
fn qos_session_reports(
    srrs: &[CreateSrr],
    k: u32,
    which: impl Fn(&Flags) -> bool,
) -> Vec<SessionReport> {
    use pfcp::ie::requested_qos_monitoring as req;
    srrs.iter()
        .filter_map(|s| {
            let (dl, ul, rp) = fake_delays(s.srr_id, k);
            let reports: Vec<QosMonitoringReport> = s
                .qos_monitoring_per_qos_flow_control_information
                .iter()
                .filter(|c| which(&c.reporting_frequency))
                .flat_map(|c| {
                    let r = &c.requested_qos_monitoring;
                    let m = pfcp::ie::QosMonitoringMeasurement {
                        downlink_ms: r.get(req::DL).then_some(dl),
                        uplink_ms: r.get(req::UL).then_some(ul),
                        round_trip_ms: r.get(req::RP).then_some(rp),
                        ..Default::default()
                    };
                    c.qfis.iter().map(move |&qfi| QosMonitoringReport {
                        qfi,
                        qos_monitoring_measurement: m,
                        time_stamp: super::n4::recovery_time_stamp_now(),
                        start_time: None,
                        other: vec![],
                    })
                })
                .collect();
            (!reports.is_empty()).then(|| SessionReport {
                srr_id: s.srr_id,
                access_availability_report: None,
                qos_monitoring_reports: reports,
                other: vec![],
            })
        })
        .collect()
}

fn next_seq(inner: &Inner) -> u32 {
    let mut st = lock(&inner.state);
    let s = st.next_seq;
    st.next_seq = (st.next_seq + 1) & 0x00ff_ffff;
    s
}

fn created_pdr_ie(c: CreatedPdr) -> Ie {
    let mut ies = vec![Ie::PdrId(c.pdr_id)];
    if let Some(f) = c.local_fteid {
        ies.push(Ie::FTeid(f));
    }
    ies.extend(c.ue_ip_address.into_iter().map(Ie::UeIpAddress));
    Ie::CreatedPdr(ies)
}

/// Allocate F-TEIDs (CHOOSE) and UE addresses (CHV4/CHV6) for `pdrs`.
fn allocate(
    inner: &Inner,
    st: &mut State,
    chosen: &mut HashMap<u8, FTeid>,
    pdrs: &[CreatePdr],
) -> Vec<CreatedPdr> {
    let mut out = Vec::new();
    for p in pdrs {
        let mut created = CreatedPdr {
            pdr_id: p.pdr_id,
            local_fteid: None,
            ue_ip_address: vec![],
            other: vec![],
        };
        if let Some(ch) = p.pdi.local_fteid.and_then(|f| f.choose) {
            let reuse = ch.choose_id.and_then(|id| chosen.get(&id).copied());
            let f = reuse.unwrap_or_else(|| {
                let teid = st.next_teid;
                st.next_teid = st.next_teid.wrapping_add(1).max(1);
                inner.counters.fteids.fetch_add(1, Ordering::Relaxed);
                FTeid::new(
                    teid,
                    (ch.v4 || !ch.v6).then_some(inner.cfg.n3),
                    (ch.v6 && !ch.v4).then_some(Ipv6Addr::LOCALHOST),
                )
            });
            if let Some(id) = ch.choose_id {
                chosen.insert(id, f);
            }
            created.local_fteid = Some(f);
        }
        for u in &p.pdi.ue_ip_address {
            if u.choose_v4 || u.choose_v6 {
                let n = st.next_ue;
                st.next_ue += 1;
                created.ue_ip_address.push(UeIpAddress {
                    ipv4: u
                        .choose_v4
                        .then(|| Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 60, 0, 0)) + n)),
                    ipv6: u.choose_v6.then(|| {
                        Ipv6Addr::new(0xfd00, 0x60, 0, 0, 0, 0, (n >> 16) as u16, n as u16)
                    }),
                    destination: u.destination,
                    ..UeIpAddress::default()
                });
            }
        }
        if created.local_fteid.is_some() || !created.ue_ip_address.is_empty() {
            out.push(created);
        }
    }
    out
}
