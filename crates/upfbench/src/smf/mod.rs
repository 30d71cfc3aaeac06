//! SMF emulator: associates with a UPF over N4 and establishes, modifies and deletes PFCP
//! sessions at a chosen rate with a bounded number of requests in flight, recording what
//! the UPF allocated (UP F-SEID, uplink F-TEID) for the gNB emulator and the capacity
//! tests, and measuring setup rate and latency per phase.
//!
//! ```no_run
//! # async fn f() -> std::io::Result<()> {
//! use upfbench::smf::{Pace, Smf, SmfConfig};
//! let mut smf = Smf::connect(SmfConfig::new("127.0.0.1:8805".parse().unwrap())).await?;
//! let assoc = smf.associate().await;
//! let est = smf.establish(1000, Pace { rate: 0.0, in_flight: 32 }).await;
//! for s in smf.sessions() {
//!     // s.ue_ip, s.n3_fteid (TEID + UPF address the gNB sends uplink to), s.gnb_teid
//! }
//! # Ok(()) }
//! ```
//!
//! Each session is what BENCHMARKS.md describes, in the form Open5GS 2.8 and eUPF accept:
//! - PDR 1, uplink: Source Interface Access, F-TEID (CHOOSE, or a TEID we pick), Network
//!   Instance, QFI 1 (unless `psc` is off), 3GPP Interface Type N3 as Source Interface
//!   Type; Outer Header Removal GTP-U/UDP/IPv4 (description 0); FAR 1, URR 1, QER 1.
//! - PDR 2, downlink: Source Interface Core, UE IP address (S/D = destination), Network
//!   Instance; FAR 2, URR 1, QER 1.
//! - FAR 1: FORW, Destination Interface Core, Network Instance, 3GPP Interface Type N6.
//! - FAR 2: FORW with Outer Header Creation GTP-U/UDP/IPv4 to the gNB and the session's
//!   gNB TEID; or, when `dl_buffer` is set (the CLI sets it with `--modify`), BUFF|NOCP
//!   without Forwarding Parameters, as a real SMF does before the gNB has answered, and
//!   [`Smf::modify`] switches it to FORW + Outer Header Creation.
//! - QER 1: gate open, MBR, QFI 1 (unless `psc` is off). URR 1: VOLUM, VOLTH with a
//!   total volume threshold. Apply Action is 2 octets; PDN Type IPv4 is sent.
//! - With [`SmfConfig::applications`], an uplink and a downlink PDR per application with
//!   its Application ID, its own FARs, URR and optionally QER ([`apps`]); the emulator
//!   provisions PFDs with [`Smf::pfd_management`] and sums usage per URR
//!   ([`Smf::usage`]) from deletions, queries ([`Smf::query_usage`]) and Session Reports.
//! - With [`SmfConfig::qos_monitoring`], a Create SRR each for QoS monitoring of QFI 1
//!   ([`qos`]); the QoS Monitoring Reports the UPF sends back, in Session Report Requests
//!   (Report Type SESR) and Session Deletion Responses, are kept per session in order
//!   ([`Smf::qos_reports`]).

pub mod apps;
pub mod cli;
pub mod fake_upf;
pub mod n4;
pub mod qos;
pub mod report;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pfcp::ie::{
    apply_action, measurement_method, reporting_triggers, up_function_features, Bitrate, FSeid,
    FTeid, Flags, Interface, Name, NodeId, OuterHeaderCreation, OuterHeaderRemoval, SdfFilter,
    UeIpAddress, UserId, Volume,
};
use pfcp::msg::{
    self, AssociationReleaseRequest, AssociationSetupRequest, CreateFar, CreatePdr, CreateQer,
    CreateUrr, ForwardingParameters, Msg, Pdi, PfdManagementResponse, QueryUrr,
    SessionDeletionRequest, SessionEstablishmentRequest, SessionModificationRequest,
    SessionReportRequest, UpdateFar, UpdateForwardingParameters, UsageReport,
};
use pfcp::{CauseValue, HeaderRepr};
use serde::Serialize;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

pub use apps::{AppIds, AppPfds, AppRule, UsageByUrr, UsageTotals};
pub use n4::{Timers, TxError, UpfRequests, N4};
pub use qos::{QosReport, QosSrr};
pub use report::{Latency, PhaseReport, Rejection};

use report::PhaseStats;

/// 3GPP Interface Type values, TS 29.244 clause 8.2.118.
pub mod interface_type {
    pub const N3_3GPP_ACCESS: u8 = 11;
    pub const N6: u8 = 17;
}

/// The Flow Description of the sessions' SDF filter: matches everything the generators
/// and the ping/iperf3 check send, yet is evaluated for every packet.
pub const DEFAULT_SDF: &str = "permit out ip from any to assigned";

/// Who picks the uplink F-TEID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TeidMode {
    /// CHOOSE when the UPF announced FTUP in its UP Function Features, else explicit.
    Auto,
    /// Always CHOOSE (to see how a UPF without FTUP answers).
    Choose,
    /// Always a TEID the emulator picks: session index + 1, at the UPF's N3 address.
    Explicit,
}

/// An IPv4 prefix that UE addresses are taken from, one per session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Ipv4Pool {
    pub base: Ipv4Addr,
    pub prefix_len: u8,
}

impl Ipv4Pool {
    /// Host addresses available (network and broadcast addresses excluded).
    pub fn capacity(&self) -> u64 {
        let hosts = 1u64 << (32 - u32::from(self.prefix_len.min(32)));
        hosts.saturating_sub(2)
    }

    /// The `i`-th host address (0-based), if the pool has it.
    pub fn nth(&self, i: u64) -> Option<Ipv4Addr> {
        if i >= self.capacity() {
            return None;
        }
        let mask = if self.prefix_len == 0 {
            0
        } else {
            u32::MAX << (32 - u32::from(self.prefix_len.min(32)))
        };
        let net = u32::from(self.base) & mask;
        Some(Ipv4Addr::from(net + 1 + i as u32))
    }
}

impl std::str::FromStr for Ipv4Pool {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, l) = s
            .split_once('/')
            .ok_or_else(|| format!("{s}: expected ADDRESS/PREFIX-LENGTH"))?;
        let base: Ipv4Addr = a.parse().map_err(|e| format!("{a}: {e}"))?;
        let prefix_len: u8 = l.parse().map_err(|e| format!("{l}: {e}"))?;
        if prefix_len > 30 {
            return Err(format!("{s}: prefix length must be 30 or less"));
        }
        Ok(Ipv4Pool { base, prefix_len })
    }
}

/// Everything the emulator sends, with the defaults of the CLI.
#[derive(Debug, Clone, Serialize)]
pub struct SmfConfig {
    /// The UPF's PFCP address.
    pub upf: SocketAddr,
    /// Our local PFCP address (port 0: any).
    pub bind: SocketAddr,
    /// Our Node ID; None: the address the kernel uses towards the UPF.
    pub node_id: Option<IpAddr>,
    pub teid: TeidMode,
    /// With CHOOSE: set V4 in the F-TEID (CH alone otherwise, as OAI's SMF and SPGW-C
    /// send it: docs/interop.md).
    pub choose_v4: bool,
    /// Leave each UE's IPv4 address to the UPF: the downlink PDI's UE IP Address asks for
    /// one (CHV4, TS 29.244 clause 8.2.62) and the session takes the one the Created PDR
    /// returns (gtp-guard installs downlink rules only for addresses it allocated). Not
    /// with `applications` (their PDRs would need the address before it is known).
    pub ue_ip_choose: bool,
    /// The UPF's N3 address for explicit F-TEIDs; None: what the UPF announced in User
    /// Plane IP Resource Information, else its PFCP address.
    pub upf_n3: Option<Ipv4Addr>,
    pub ue_pool: Ipv4Pool,
    /// The gNB's N3 address, for downlink Outer Header Creation.
    pub gnb: Ipv4Addr,
    /// Network Instance: the DNN, sent label-encoded (`\x08internet`, as Open5GS and
    /// OAI's SMF send it and as UPFs built for them expect) unless `dnn_plain`.
    pub dnn: String,
    /// Send the Network Instance as plain text, as free5GC's SMF does by default
    /// (`nwInstFqdnEncoding: false`).
    pub dnn_plain: bool,
    /// Listen on port 8805 of our address when the bind port is 0 and 8805 is free there:
    /// a UPF sends its own requests (heartbeats, reports) to 8805 (TS 29.244 clause 7.2),
    /// and some send their first response there too.
    pub prefer_8805: bool,
    /// 5G: QFI 1 in the uplink PDI and in the QER. Off: 4G style, no QFI.
    pub psc: bool,
    /// Establish the downlink FAR as BUFF|NOCP (switched to FORW by [`Smf::modify`]).
    pub dl_buffer: bool,
    /// MBR of the session QER, uplink and downlink, kbit/s.
    pub mbr_kbps: u64,
    /// Total volume threshold of the URR, octets.
    pub volume_threshold: u64,
    /// An SDF filter (Flow Description, TS 29.244 clause 8.2.5) in both PDIs, so the UPF
    /// evaluates one per packet; None: PDRs match on the F-TEID or UE address alone.
    pub sdf_filter: Option<String>,
    /// Application PDRs in every session ([`apps`]), in this order.
    pub applications: Vec<AppRule>,
    /// The APN/DNN IE of every Session Establishment Request (TS 29.244 clause 8.2.117),
    /// encoded as the Network Instance is (label-encoded unless `dnn_plain`), as Open5GS's
    /// SMF sends it; gtp-guard refuses a session without one naming a configured access
    /// point. None: not sent.
    pub apn_dnn: Option<String>,
    /// The User ID IE (clause 8.2.101) of every Session Establishment Request: session
    /// i gets these identities plus i. None: not sent.
    pub user_id: Option<UserIds>,
    /// Session Reporting Rules for QoS monitoring of each session's QoS flow (QFI 1, its
    /// QER's: needs `psc`), in this order ([`qos`]).
    pub qos_monitoring: Vec<QosSrr>,
    /// GTP-U path QoS monitoring asked for in the Association Setup Request (TS 29.244
    /// clause 5.24.3); the UPF's GTP-U Path QoS Reports come back in Node Report
    /// Requests ([`Smf::path_qos_reports`]). Not in the printed configuration.
    #[serde(skip)]
    pub gtpu_path_qos: Vec<pfcp::msg::GtpuPathQosControlInformation>,
    pub timers: Timers,
}

/// The identities the emulator's User ID IEs carry, for the first session; session i
/// adds i to each (IMSI, IMEISV and MSISDN are TBCD digit strings). The defaults are in
/// the form Open5GS's SMF sends (IMSI, IMEI and MSISDN flags set).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserIds {
    /// 15 digits: MCC, MNC, MSIN.
    pub imsi: String,
    /// 16 digits (IMEISV), as Open5GS sends; None: IMEI flag off.
    pub imei: Option<String>,
    /// E.164 digits; None: MSISDN flag off.
    pub msisdn: Option<String>,
}

impl Default for UserIds {
    fn default() -> Self {
        UserIds {
            imsi: "001010000000001".into(),
            imei: Some("3534900698733190".into()),
            msisdn: Some("491720000001".into()),
        }
    }
}

impl UserIds {
    /// The User ID IE of session `index`.
    pub fn for_session(&self, index: usize) -> UserId {
        let enc = |digits: &str| pfcp::ie::tbcd_encode(&add_to_digits(digits, index as u64));
        UserId {
            imsi: Some(enc(&self.imsi)),
            imei: self.imei.as_deref().map(enc),
            msisdn: self.msisdn.as_deref().map(enc),
            ..UserId::default()
        }
    }
}

/// `digits` (decimal) plus `n`, keeping the number of digits (wrapping at 10^len): an
/// IMSI's MCC and MNC stay as given for any realistic session count.
pub fn add_to_digits(digits: &str, n: u64) -> String {
    let len = digits.len();
    let mut carry = n;
    let mut out: Vec<u8> = digits.bytes().collect();
    for c in out.iter_mut().rev() {
        if carry == 0 {
            break;
        }
        let d = u64::from(c.wrapping_sub(b'0')).min(9) + carry;
        *c = b'0' + (d % 10) as u8;
        carry = d / 10;
    }
    debug_assert_eq!(out.len(), len);
    String::from_utf8(out).unwrap_or_default()
}

impl SmfConfig {
    /// The Network Instance the PDIs and FARs carry (see [`SmfConfig::dnn_plain`]).
    pub fn network_instance(&self) -> Name {
        if self.dnn_plain {
            Name::plain(&self.dnn)
        } else {
            Name::labels(&self.dnn)
        }
    }

    /// The CLI's defaults towards `upf`.
    pub fn new(upf: SocketAddr) -> Self {
        SmfConfig {
            upf,
            bind: if upf.is_ipv4() {
                "0.0.0.0:0".parse().expect("literal")
            } else {
                "[::]:0".parse().expect("literal")
            },
            node_id: None,
            teid: TeidMode::Auto,
            choose_v4: true,
            ue_ip_choose: false,
            upf_n3: None,
            ue_pool: "10.45.0.0/16".parse().expect("literal"),
            gnb: Ipv4Addr::new(10, 10, 0, 1),
            dnn: "internet".into(),
            dnn_plain: false,
            prefer_8805: true,
            psc: true,
            dl_buffer: false,
            mbr_kbps: 10_000_000,
            volume_threshold: 100 * 1024 * 1024,
            sdf_filter: None,
            applications: Vec::new(),
            apn_dnn: Some("internet".into()),
            user_id: Some(UserIds::default()),
            qos_monitoring: Vec::new(),
            gtpu_path_qos: Vec::new(),
            timers: Timers::default(),
        }
    }
}

/// How fast a phase sends: `rate` requests per second (0: as fast as responses allow),
/// at most `in_flight` requests without a response.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Pace {
    pub rate: f64,
    pub in_flight: usize,
}

impl Default for Pace {
    fn default() -> Self {
        Pace {
            rate: 0.0,
            in_flight: 32,
        }
    }
}

/// Where a session stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "state", content = "cause")]
pub enum SessionState {
    /// Establishment not answered (timed out or a bad response).
    Failed,
    /// Establishment rejected with this Cause.
    Rejected(u8),
    Established,
    /// Downlink FAR switched to forwarding towards the gNB.
    Modified,
    Deleted,
}

/// One PFCP session and what the UPF allocated for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Session {
    pub index: usize,
    /// Our SEID (in our F-SEID).
    pub cp_seid: u64,
    pub ue_ip: Ipv4Addr,
    /// The TEID the gNB expects downlink G-PDUs on (we assign it: index + 1).
    pub gnb_teid: u32,
    /// The UPF's F-SEID from the Session Establishment Response.
    pub up_fseid: Option<FSeid>,
    /// Where the gNB sends uplink G-PDUs: allocated by the UPF (Created PDR of PDR 1) or
    /// picked by us.
    pub n3_fteid: Option<FTeid>,
    pub state: SessionState,
}

impl Session {
    /// Established and not yet deleted.
    pub fn is_active(&self) -> bool {
        matches!(
            self.state,
            SessionState::Established | SessionState::Modified
        )
    }
}

/// An SMF towards one UPF.
pub struct Smf {
    cfg: SmfConfig,
    n4: Arc<N4>,
    local_ip: IpAddr,
    up_features: Option<Flags>,
    upf_node_id: Option<NodeId>,
    upf_n3: Ipv4Addr,
    sessions: Vec<Session>,
    usage: UsageByUrr,
    qos_reports: Vec<QosReport>,
}

/// Rule IDs of the session template.
const PDR_UL: u16 = 1;
const PDR_DL: u16 = 2;
const FAR_UL: u32 = 1;
const FAR_DL: u32 = 2;
const URR: u32 = 1;
const QER: u32 = 1;
/// The session's QoS flow: its QER's QFI (with `psc`).
const QFI: u8 = 1;

fn apply(bits: &[u16]) -> Flags {
    // Two octets: Open5GS 2.8 rejects the one-octet form.
    Flags::from_bits(bits, 2)
}

impl Smf {
    /// Bind the local endpoint and start answering the UPF (no message is sent yet).
    pub async fn connect(cfg: SmfConfig) -> std::io::Result<Smf> {
        let local_ip = match (cfg.node_id, cfg.bind.ip()) {
            (Some(ip), _) => ip,
            (None, ip) if !ip.is_unspecified() => ip,
            _ => n4::local_ip_towards(cfg.upf)?,
        };
        let node_id = match local_ip {
            IpAddr::V4(a) => NodeId::Ipv4(a),
            IpAddr::V6(a) => NodeId::Ipv6(a),
        };
        let rts = n4::recovery_time_stamp_now();
        // Port 8805 of our address first (the UPF's own requests go there); as bound
        // (any port) if that cannot be had: taken by a UPF or another SMF on this
        // address, or a Node ID that is not an address here.
        let preferred = (cfg.prefer_8805 && cfg.bind.port() == 0)
            .then(|| SocketAddr::new(local_ip, n4::PFCP_PORT));
        let on_8805 = match preferred {
            Some(p) => N4::bind(p, cfg.upf, node_id.clone(), rts, cfg.timers)
                .await
                .ok(),
            None => None,
        };
        let n4 = match on_8805 {
            Some(n4) => n4,
            None => N4::bind(cfg.bind, cfg.upf, node_id, rts, cfg.timers).await?,
        };
        let upf_n3 = match (cfg.upf_n3, cfg.upf.ip()) {
            (Some(a), _) => a,
            (None, IpAddr::V4(a)) => a,
            (None, IpAddr::V6(_)) => Ipv4Addr::LOCALHOST,
        };
        Ok(Smf {
            cfg,
            n4: Arc::new(n4),
            local_ip,
            up_features: None,
            upf_node_id: None,
            upf_n3,
            sessions: Vec::new(),
            usage: UsageByUrr::new(),
            qos_reports: Vec::new(),
        })
    }

    pub fn config(&self) -> &SmfConfig {
        &self.cfg
    }

    /// The N4 endpoint (local address, counters of UPF-initiated requests).
    pub fn n4(&self) -> &N4 {
        &self.n4
    }

    /// Every session requested so far, in order (index = position).
    pub fn sessions(&self) -> &[Session] {
        &self.sessions
    }

    /// UP Function Features from the Association Setup Response.
    pub fn up_function_features(&self) -> Option<&Flags> {
        self.up_features.as_ref()
    }

    pub fn upf_node_id(&self) -> Option<&NodeId> {
        self.upf_node_id.as_ref()
    }

    /// The N3 address used in explicit F-TEIDs.
    pub fn upf_n3(&self) -> Ipv4Addr {
        self.upf_n3
    }

    /// Whether establishments ask the UPF to CHOOSE the uplink F-TEID.
    pub fn uses_choose(&self) -> bool {
        match self.cfg.teid {
            TeidMode::Choose => true,
            TeidMode::Explicit => false,
            TeidMode::Auto => self
                .up_features
                .as_ref()
                .is_some_and(|f| f.get(up_function_features::FTUP)),
        }
    }

    pub fn upf_requests(&self) -> UpfRequests {
        self.n4.upf_requests()
    }

    fn node_id(&self) -> NodeId {
        self.n4.node_id().clone()
    }

    /// PFCP Association Setup (clause 6.2.6): Node ID, Recovery Time Stamp, CP Function
    /// Features; learns the UPF's Node ID, UP Function Features and N3 address.
    pub async fn associate(&mut self) -> PhaseReport {
        let req = AssociationSetupRequest {
            cp_function_features: Some(Flags(vec![0])),
            gtpu_path_qos_control_information: self.cfg.gtpu_path_qos.clone(),
            ..AssociationSetupRequest::new(self.node_id(), self.n4.recovery_time_stamp())
        };
        let bytes = msg::emit(&HeaderRepr::node(0, self.n4.next_sequence()), &req);
        let mut stats = PhaseStats::new("associate");
        let t0 = Instant::now();
        stats.sent();
        match self.n4.transact(&bytes).await {
            Ok(r) => match Msg::parse(&r.bytes) {
                Ok((_, Msg::AssociationSetupResponse(a))) => {
                    stats.answered(a.cause, r.latency, r.retransmissions);
                    if a.cause.is_acceptance() {
                        self.n4.saw_upf_recovery_time_stamp(a.recovery_time_stamp);
                        self.up_features = a.up_function_features.clone();
                        self.upf_node_id = Some(a.node_id.clone());
                        if self.cfg.upf_n3.is_none() {
                            if let Some(v4) = a
                                .user_plane_ip_resource_information
                                .iter()
                                .find_map(|u| u.ipv4)
                            {
                                self.upf_n3 = v4;
                            }
                        }
                    }
                }
                _ => stats.bad_response(r.latency, r.retransmissions),
            },
            Err(TxError::Timeout { retransmissions }) => stats.timed_out(retransmissions),
            Err(_) => stats.error(),
        }
        stats.finish(t0.elapsed())
    }

    /// PFCP Association Release (clause 6.2.8).
    pub async fn release(&mut self) -> PhaseReport {
        let req = AssociationReleaseRequest {
            node_id: self.node_id(),
            other: vec![],
        };
        let bytes = msg::emit(&HeaderRepr::node(0, self.n4.next_sequence()), &req);
        let mut stats = PhaseStats::new("release");
        let t0 = Instant::now();
        stats.sent();
        match self.n4.transact(&bytes).await {
            Ok(r) => match Msg::parse(&r.bytes) {
                Ok((_, Msg::AssociationReleaseResponse(a))) => {
                    stats.answered(a.cause, r.latency, r.retransmissions)
                }
                _ => stats.bad_response(r.latency, r.retransmissions),
            },
            Err(TxError::Timeout { retransmissions }) => stats.timed_out(retransmissions),
            Err(_) => stats.error(),
        }
        stats.finish(t0.elapsed())
    }

    /// PFD Management (clause 6.2.5): `apps`' PFDs replace what the UPF had for each of
    /// them (an application without PFDs has them removed). The UPF's response, or why
    /// there was none.
    pub async fn pfd_management(&self, apps: &[AppPfds]) -> Result<PfdManagementResponse, String> {
        let req = apps::pfd_management_request(apps);
        let bytes = msg::emit(&HeaderRepr::node(0, self.n4.next_sequence()), &req);
        let r = self.n4.transact(&bytes).await.map_err(|e| e.to_string())?;
        match Msg::parse(&r.bytes) {
            Ok((_, Msg::PfdManagementResponse(p))) => Ok(p),
            Ok((h, _)) => Err(format!(
                "a response of type {} to a PFD Management Request",
                h.message_type
            )),
            Err(e) => Err(format!("PFD Management Response does not parse: {e}")),
        }
    }

    /// Ask for the usage of every URR of session `index` now (Session Modification with
    /// QAURR, clause 7.5.4.4): the reports, also added to [`Smf::usage`].
    pub async fn query_usage(&mut self, index: usize) -> Result<Vec<UsageReport>, String> {
        let s = self
            .sessions
            .get(index)
            .ok_or_else(|| format!("no session {index}"))?;
        let up = s
            .up_fseid
            .ok_or_else(|| format!("session {index} has no UP F-SEID"))?
            .seid;
        let mut req = self.modification_request(s);
        req.update_fars.clear();
        req.pfcpsm_req_flags = Some(Flags::from_bits(&[pfcp::ie::pfcpsm_req_flags::QAURR], 1));
        // Also by ID: a UPF without QAURR still answers.
        req.query_urrs = std::iter::once(URR)
            .chain((0..self.cfg.applications.len()).map(|k| AppIds::of(k).urr))
            .map(|urr_id| QueryUrr {
                urr_id,
                other: vec![],
            })
            .collect();
        let bytes = msg::emit(&HeaderRepr::session(0, up, self.n4.next_sequence()), &req);
        let r = self.n4.transact(&bytes).await.map_err(|e| e.to_string())?;
        match Msg::parse(&r.bytes) {
            Ok((_, Msg::SessionModificationResponse(m))) if m.cause.is_acceptance() => {
                apps::add_usage(&mut self.usage, &m.usage_reports);
                Ok(m.usage_reports)
            }
            Ok((_, Msg::SessionModificationResponse(m))) => {
                Err(format!("usage query rejected: Cause {}", m.cause.0))
            }
            Ok((h, _)) => Err(format!(
                "a response of type {} to a Session Modification Request",
                h.message_type
            )),
            Err(e) => Err(format!("Session Modification Response does not parse: {e}")),
        }
    }

    /// The Session Report Requests the UPF sent since the last call (see
    /// [`N4::take_session_reports`]), parsed; their usage reports are added to
    /// [`Smf::usage`], their QoS Monitoring Reports to [`Smf::qos_reports`].
    pub fn absorb_session_reports(&mut self) -> Vec<SessionReportRequest> {
        let mut out = Vec::new();
        for b in self.n4.take_session_reports() {
            if let Ok((h, Msg::SessionReportRequest(r))) = Msg::parse(&b) {
                apps::add_usage(&mut self.usage, &r.usage_reports);
                // Our CP SEID is the session's index + 1.
                let index = h.seid.and_then(|s| usize::try_from(s).ok()?.checked_sub(1));
                if let Some(i) = index.filter(|&i| i < self.sessions.len()) {
                    self.qos_reports
                        .extend(qos::reports_of(i, &r.session_reports, false));
                }
                out.push(r);
            }
        }
        out
    }

    /// Every QoS Monitoring Report taken in so far, in the order received: from Session
    /// Report Requests passed through [`Smf::absorb_session_reports`] (call it before
    /// [`Smf::delete`] to keep them before the deletions' own) and from Session Deletion
    /// Responses.
    pub fn qos_reports(&self) -> &[QosReport] {
        &self.qos_reports
    }

    /// The GTP-U Path QoS Reports of the Node Report Requests the UPF sent since the
    /// last call (each answered with Request accepted), in order.
    pub fn path_qos_reports(&self) -> Vec<pfcp::msg::GtpuPathQosReport> {
        self.n4
            .take_node_reports()
            .iter()
            .filter_map(|b| match Msg::parse(b) {
                Ok((_, Msg::NodeReportRequest(r))) => Some(r.gtpu_path_qos_reports),
                _ => None,
            })
            .flatten()
            .collect()
    }

    /// Session `index`'s QoS Monitoring Reports, in order.
    pub fn qos_reports_of(&self, index: usize) -> impl Iterator<Item = &QosReport> {
        self.qos_reports.iter().filter(move |r| r.session == index)
    }

    /// Usage per URR ID, summed over every session and report taken in so far: deletion
    /// and query responses, and Session Reports passed through
    /// [`Smf::absorb_session_reports`]. URR 1 is the default PDRs'; application `k`'s is
    /// `AppIds::of(k).urr`.
    pub fn usage(&self) -> &UsageByUrr {
        &self.usage
    }

    /// The Session Establishment Request for `s`, as sent.
    pub fn establishment_request(&self, s: &Session) -> SessionEstablishmentRequest {
        let c = &self.cfg;
        let ni = c.network_instance();
        let qfis = if c.psc { vec![QFI] } else { vec![] };
        // With application PDRs, CHOOSE ID 1: every uplink PDR of the session on one tunnel.
        let choose_id = (!c.applications.is_empty()).then_some(1);
        let local_fteid = if self.uses_choose() {
            FTeid::choose(c.choose_v4, false, choose_id)
        } else {
            FTeid::new(s.index as u32 + 1, Some(self.upf_n3), None)
        };
        let ul_pdr = CreatePdr {
            pdr_id: PDR_UL,
            precedence: Some(200),
            pdi: Pdi {
                source_interface: Interface::ACCESS,
                local_fteid: Some(local_fteid),
                network_instance: Some(ni.clone()),
                ue_ip_address: vec![],
                traffic_endpoint_ids: vec![],
                sdf_filters: c
                    .sdf_filter
                    .iter()
                    .map(|d| SdfFilter {
                        flow_description: Some(d.as_bytes().to_vec()),
                        ..SdfFilter::default()
                    })
                    .collect(),
                application_id: None,
                ethernet_pdu_session_information: None,
                ethernet_packet_filters: vec![],
                qfis: qfis.clone(),
                framed_routes: vec![],
                framed_routing: None,
                framed_ipv6_routes: vec![],
                source_interface_type: Some(interface_type::N3_3GPP_ACCESS),
                other: vec![],
            },
            outer_header_removal: Some(OuterHeaderRemoval {
                description: OuterHeaderRemoval::GTPU_UDP_IPV4,
                ext_header_deletion: None,
            }),
            far_id: Some(FAR_UL),
            urr_ids: vec![URR],
            qer_ids: vec![QER],
            activate_predefined_rules: vec![],
            activation_time: None,
            deactivation_time: None,
            mar_id: None,
            packet_replication_and_detection_carry_on_information: None,
            ue_ip_address_pool_identity: vec![],
            mptcp_applicable_indication: None,
            other: vec![],
        };
        let dl_pdr = CreatePdr {
            pdr_id: PDR_DL,
            pdi: Pdi {
                source_interface: Interface::CORE,
                local_fteid: None,
                ue_ip_address: vec![UeIpAddress {
                    ipv4: (!c.ue_ip_choose).then_some(s.ue_ip),
                    choose_v4: c.ue_ip_choose,
                    destination: true,
                    ..UeIpAddress::default()
                }],
                qfis: vec![],
                source_interface_type: None,
                ..ul_pdr.pdi.clone()
            },
            outer_header_removal: None,
            far_id: Some(FAR_DL),
            ..ul_pdr.clone()
        };
        let ul_far = CreateFar {
            far_id: FAR_UL,
            apply_action: apply(&[apply_action::FORW]),
            forwarding_parameters: Some(ForwardingParameters {
                destination_interface: Interface::CORE,
                network_instance: Some(ni.clone()),
                redirect_information: None,
                outer_header_creation: None,
                transport_level_marking: None,
                forwarding_policy: None,
                header_enrichment: None,
                linked_traffic_endpoint_id: None,
                proxying: None,
                destination_interface_type: Some(interface_type::N6),
                data_network_access_identifier: None,
                other: vec![],
            }),
            duplicating_parameters: vec![],
            bar_id: None,
            other: vec![],
        };
        let dl_far = if c.dl_buffer {
            CreateFar {
                far_id: FAR_DL,
                apply_action: apply(&[apply_action::BUFF, apply_action::NOCP]),
                forwarding_parameters: None,
                ..ul_far.clone()
            }
        } else {
            CreateFar {
                far_id: FAR_DL,
                apply_action: apply(&[apply_action::FORW]),
                forwarding_parameters: Some(ForwardingParameters {
                    destination_interface: Interface::ACCESS,
                    network_instance: Some(ni),
                    outer_header_creation: Some(OuterHeaderCreation::gtpu_ipv4(s.gnb_teid, c.gnb)),
                    destination_interface_type: None,
                    ..ul_far
                        .forwarding_parameters
                        .clone()
                        .expect("set just above")
                }),
                ..ul_far.clone()
            }
        };
        let urr = |urr_id: u32, start: bool| {
            let mut triggers = vec![reporting_triggers::VOLTH];
            if start {
                triggers.push(reporting_triggers::START);
            }
            CreateUrr {
                urr_id,
                measurement_method: Flags::from_bits(&[measurement_method::VOLUM], 1),
                reporting_triggers: Flags::from_bits(&triggers, 3),
                measurement_period: None,
                volume_threshold: Some(Volume {
                    spare: 0,
                    total: Some(c.volume_threshold),
                    uplink: None,
                    downlink: None,
                }),
                volume_quota: None,
                event_threshold: None,
                event_quota: None,
                time_threshold: None,
                time_quota: None,
                quota_holding_time: None,
                dropped_dl_traffic_threshold: None,
                quota_validity_time: None,
                monitoring_time: None,
                subsequent_volume_threshold: None,
                subsequent_time_threshold: None,
                subsequent_volume_quota: None,
                subsequent_time_quota: None,
                subsequent_event_threshold: None,
                subsequent_event_quota: None,
                inactivity_detection_time: None,
                linked_urr_ids: vec![],
                measurement_information: None,
                time_quota_mechanism: None,
                aggregated_urrs: vec![],
                far_id_for_quota_action: None,
                ethernet_inactivity_timer: None,
                additional_monitoring_time: vec![],
                number_of_reports: None,
                exempted_application_ids: vec![],
                exempted_sdf_filters: vec![],
                user_plane_inactivity_timer: None,
                other: vec![],
            }
        };
        let qer = |qer_id: u32, gate_status: u8, mbr_kbps: u64| CreateQer {
            qer_id,
            qer_correlation_id: None,
            gate_status,
            mbr: Some(Bitrate {
                ul_kbps: mbr_kbps,
                dl_kbps: mbr_kbps,
            }),
            gbr: None,
            packet_rate: None,
            dl_flow_level_marking: None,
            qfi: c.psc.then_some(QFI),
            rqi: None,
            paging_policy_indicator: None,
            averaging_window: None,
            qer_control_indications: None,
            other: vec![],
        };
        let mut create_pdrs = vec![ul_pdr, dl_pdr];
        let mut create_fars = vec![ul_far, dl_far];
        let mut create_urrs = vec![urr(URR, false)];
        // UL and DL gates open.
        let mut create_qers = vec![qer(QER, 0, c.mbr_kbps)];
        for (k, app) in c.applications.iter().enumerate() {
            let ids = AppIds::of(k);
            let mut qer_ids = vec![QER];
            if app.has_qer() {
                // Gate Status: UL gate bits 3-4, DL gate bits 1-2; 1 = closed.
                let gate = if app.gate_closed { 0b0101 } else { 0 };
                create_qers.push(qer(ids.qer, gate, app.mbr_kbps.unwrap_or(c.mbr_kbps)));
                qer_ids.push(ids.qer);
            }
            create_urrs.push(urr(ids.urr, app.start));
            for (base, pdr_id, far_id) in [(0, ids.pdr_ul, ids.far_ul), (1, ids.pdr_dl, ids.far_dl)]
            {
                let mut p = create_pdrs[base].clone();
                p.pdr_id = pdr_id;
                p.precedence = Some(ids.precedence);
                p.pdi.application_id = Some(pfcp::ie::Text::new(&app.id));
                p.far_id = Some(far_id);
                p.urr_ids = vec![ids.urr];
                p.qer_ids = qer_ids.clone();
                create_pdrs.push(p);
            }
            for (base, far_id) in [(0, ids.far_ul), (1, ids.far_dl)] {
                let mut f = create_fars[base].clone();
                f.far_id = far_id;
                create_fars.push(f);
            }
        }
        SessionEstablishmentRequest {
            node_id: self.node_id(),
            cp_fseid: self.cp_fseid(s.cp_seid),
            create_pdrs,
            create_fars,
            create_urrs,
            create_qers,
            create_bar: None,
            create_traffic_endpoints: vec![],
            pdn_type: Some(1), // IPv4
            fq_csids: vec![],
            user_plane_inactivity_timer: None,
            user_id: c.user_id.as_ref().map(|u| u.for_session(s.index)),
            trace_information: None,
            apn_dnn: c.apn_dnn.as_deref().map(|a| {
                if c.dnn_plain {
                    Name::plain(a)
                } else {
                    Name::labels(a)
                }
            }),
            pfcpse_req_flags: None,
            create_srrs: c.qos_monitoring.iter().map(|q| q.create_srr(QFI)).collect(),
            recovery_time_stamp: None,
            s_nssai: None,
            rat_type: None,
            other: vec![],
        }
    }

    fn cp_fseid(&self, seid: u64) -> FSeid {
        match self.local_ip {
            IpAddr::V4(a) => FSeid {
                spare: 0,
                seid,
                ipv4: Some(a),
                ipv6: None,
            },
            IpAddr::V6(a) => FSeid {
                spare: 0,
                seid,
                ipv4: None,
                ipv6: Some(a),
            },
        }
    }

    /// The Session Modification Request that points the downlink FAR at the gNB.
    pub fn modification_request(&self, s: &Session) -> SessionModificationRequest {
        let c = &self.cfg;
        let dl_fars =
            std::iter::once(FAR_DL).chain((0..c.applications.len()).map(|k| AppIds::of(k).far_dl));
        let update_fars = dl_fars
            .map(|far_id| UpdateFar {
                far_id,
                apply_action: Some(apply(&[apply_action::FORW])),
                update_forwarding_parameters: Some(UpdateForwardingParameters {
                    destination_interface: Some(Interface::ACCESS),
                    network_instance: Some(c.network_instance()),
                    redirect_information: None,
                    outer_header_creation: Some(OuterHeaderCreation::gtpu_ipv4(s.gnb_teid, c.gnb)),
                    transport_level_marking: None,
                    forwarding_policy: None,
                    header_enrichment: None,
                    pfcpsm_req_flags: None,
                    linked_traffic_endpoint_id: None,
                    destination_interface_type: None,
                    data_network_access_identifier: None,
                    other: vec![],
                }),
                update_duplicating_parameters: vec![],
                bar_id: None,
                other: vec![],
            })
            .collect();
        SessionModificationRequest {
            cp_fseid: None,
            remove_pdrs: vec![],
            remove_fars: vec![],
            remove_urrs: vec![],
            remove_qers: vec![],
            remove_bar: None,
            remove_traffic_endpoints: vec![],
            create_pdrs: vec![],
            create_fars: vec![],
            create_urrs: vec![],
            create_qers: vec![],
            create_bar: None,
            create_traffic_endpoints: vec![],
            update_pdrs: vec![],
            update_fars,
            update_urrs: vec![],
            update_qers: vec![],
            update_bar: None,
            update_traffic_endpoints: vec![],
            pfcpsm_req_flags: None,
            query_urrs: vec![],
            fq_csids: vec![],
            user_plane_inactivity_timer: None,
            query_urr_reference: None,
            trace_information: None,
            node_id: None,
            remove_srrs: vec![],
            create_srrs: vec![],
            update_srrs: vec![],
            s_nssai: None,
            rat_type: None,
            other: vec![],
        }
    }

    /// Establish `n` more sessions (UE addresses and SEIDs continue from the last one).
    /// Ends when every request has a response or has timed out. Requests are encoded as
    /// they are sent and responses reduced to what is recorded, so memory stays at the
    /// session records even for a million sessions.
    pub async fn establish(&mut self, n: usize, pace: Pace) -> PhaseReport {
        let first = self.sessions.len();
        for index in first..first + n {
            let Some(ue_ip) = self.cfg.ue_pool.nth(index as u64) else {
                break;
            };
            self.sessions.push(Session {
                index,
                cp_seid: index as u64 + 1,
                ue_ip,
                gnb_teid: index as u32 + 1,
                up_fseid: None,
                n3_fteid: None,
                state: SessionState::Failed,
            });
        }
        let last = self.sessions.len();
        let choose = self.uses_choose();
        let mut stats = PhaseStats::new("establish");
        let t0 = Instant::now();
        let n4 = self.n4.clone();
        let reqs = (first..last).map(|i| {
            let r = self.establishment_request(&self.sessions[i]);
            let h = HeaderRepr::session(0, 0, n4.next_sequence());
            (i, msg::emit(&h, &r))
        });
        let results = run_paced(&n4, reqs, pace, &mut stats).await;
        let mut ue_ip_missing = 0usize;
        for (i, d) in results {
            stats.record(&d);
            let s = &mut self.sessions[i];
            match d.reply {
                Reply::Established { cause, .. } if !cause.is_acceptance() => {
                    s.state = SessionState::Rejected(cause.0)
                }
                Reply::Established {
                    up_fseid,
                    ul_fteid,
                    ue_ip,
                    ..
                } => {
                    s.state = SessionState::Established;
                    s.up_fseid = up_fseid;
                    if self.cfg.ue_ip_choose {
                        match ue_ip {
                            Some(a) => s.ue_ip = a,
                            None => ue_ip_missing += 1,
                        }
                    }
                    s.n3_fteid = if choose {
                        ul_fteid
                    } else {
                        Some(FTeid::new(i as u32 + 1, Some(self.upf_n3), None))
                    };
                    if let Some(f) = up_fseid {
                        self.n4.bind_session(s.cp_seid, f.seid);
                    }
                }
                _ => {}
            }
        }
        if ue_ip_missing > 0 {
            eprintln!(
                "warning: the UPF allocated no UE address for {ue_ip_missing} session(s) (UE IP Address CHV4 asked): their UE addresses stay the pool's"
            );
        }
        stats.finish(t0.elapsed())
    }

    /// Switch every active session's downlink FAR to FORW with Outer Header Creation
    /// towards the gNB (Session Modification, clause 6.3.3).
    pub async fn modify(&mut self, pace: Pace) -> PhaseReport {
        let mut stats = PhaseStats::new("modify");
        let t0 = Instant::now();
        let n4 = self.n4.clone();
        let reqs = self
            .sessions
            .iter()
            .filter(|s| s.is_active())
            .filter_map(|s| {
                let up = s.up_fseid?.seid;
                let h = HeaderRepr::session(0, up, n4.next_sequence());
                Some((s.index, msg::emit(&h, &self.modification_request(s))))
            });
        let results = run_paced(&n4, reqs, pace, &mut stats).await;
        for (i, d) in results {
            stats.record(&d);
            if d.reply.accepted() {
                self.sessions[i].state = SessionState::Modified;
            }
        }
        stats.finish(t0.elapsed())
    }

    /// Delete every active session (clause 6.3.4).
    pub async fn delete(&mut self, pace: Pace) -> PhaseReport {
        self.delete_where(pace, |_| true).await
    }

    /// Delete the active sessions `which` picks (e.g. the ones established since some
    /// index, for churn beside long-lived sessions).
    pub async fn delete_where(
        &mut self,
        pace: Pace,
        which: impl Fn(&Session) -> bool,
    ) -> PhaseReport {
        let mut stats = PhaseStats::new("delete");
        let t0 = Instant::now();
        let n4 = self.n4.clone();
        let reqs = self
            .sessions
            .iter()
            .filter(|s| s.is_active() && which(s))
            .filter_map(|s| {
                let up = s.up_fseid?.seid;
                let h = HeaderRepr::session(0, up, n4.next_sequence());
                Some((
                    s.index,
                    msg::emit(&h, &SessionDeletionRequest { other: vec![] }),
                ))
            });
        let results = run_paced(&n4, reqs, pace, &mut stats).await;
        for (i, d) in results {
            stats.record(&d);
            apps::add_usage(&mut self.usage, &d.usage);
            self.qos_reports
                .extend(qos::reports_of(i, &d.session_reports, true));
            // Accepted, or the UPF no longer knows it: either way it is gone.
            let gone = match d.reply {
                Reply::Cause(c) => c.is_acceptance() || c == CauseValue::SESSION_CONTEXT_NOT_FOUND,
                _ => false,
            };
            if gone {
                let s = &mut self.sessions[i];
                s.state = SessionState::Deleted;
                self.n4.unbind_session(s.cp_seid);
            }
        }
        stats.finish(t0.elapsed())
    }
}

/// A response reduced to what the phases record.
#[derive(Debug, Clone, Copy)]
enum Reply {
    /// A Session Establishment Response.
    Established {
        cause: CauseValue,
        up_fseid: Option<FSeid>,
        /// The F-TEID of the uplink PDR's Created PDR.
        ul_fteid: Option<FTeid>,
        /// The UE IPv4 address of a Created PDR (the UPF allocated it: CHV4).
        ue_ip: Option<Ipv4Addr>,
    },
    /// Another response of the expected type.
    Cause(CauseValue),
    /// Not the expected type, or does not decode.
    Bad,
    TimedOut,
    /// Socket error.
    Failed,
}

impl Reply {
    fn accepted(&self) -> bool {
        match self {
            Reply::Established { cause, .. } | Reply::Cause(cause) => cause.is_acceptance(),
            _ => false,
        }
    }
}

/// One request's outcome.
#[derive(Debug, Clone)]
struct Digest {
    reply: Reply,
    latency: Duration,
    retransmissions: u32,
    /// The usage reports of a modification or deletion response.
    usage: Vec<UsageReport>,
    /// The Session Reports of a deletion response (SESRL).
    session_reports: Vec<msg::SessionReport>,
}

fn digest(request_type: u8, r: Result<n4::Response, TxError>) -> Digest {
    let r = match r {
        Ok(r) => r,
        Err(TxError::Timeout { retransmissions }) => {
            return Digest {
                reply: Reply::TimedOut,
                latency: Duration::ZERO,
                retransmissions,
                usage: vec![],
                session_reports: vec![],
            }
        }
        Err(_) => {
            return Digest {
                reply: Reply::Failed,
                latency: Duration::ZERO,
                retransmissions: 0,
                usage: vec![],
                session_reports: vec![],
            }
        }
    };
    let mut usage = vec![];
    let mut session_reports = vec![];
    let reply = match Msg::parse(&r.bytes) {
        Ok((h, m)) if h.message_type == request_type + 1 => match m {
            Msg::SessionEstablishmentResponse(e) => Reply::Established {
                cause: e.cause,
                up_fseid: e.up_fseid,
                ul_fteid: e
                    .created_pdrs
                    .iter()
                    .find(|c| c.pdr_id == PDR_UL)
                    .and_then(|c| c.local_fteid),
                ue_ip: e
                    .created_pdrs
                    .iter()
                    .flat_map(|c| c.ue_ip_address.iter())
                    .find_map(|u| u.ipv4),
            },
            Msg::SessionModificationResponse(m) => {
                usage = m.usage_reports;
                Reply::Cause(m.cause)
            }
            Msg::SessionDeletionResponse(d) => {
                usage = d.usage_reports;
                session_reports = d.session_reports;
                Reply::Cause(d.cause)
            }
            _ => Reply::Bad,
        },
        _ => Reply::Bad,
    };
    Digest {
        reply,
        latency: r.latency,
        retransmissions: r.retransmissions,
        usage,
        session_reports,
    }
}

impl PhaseStats {
    fn record(&mut self, d: &Digest) {
        match d.reply {
            Reply::Established { cause, .. } | Reply::Cause(cause) => {
                self.answered(cause, d.latency, d.retransmissions)
            }
            Reply::Bad => self.bad_response(d.latency, d.retransmissions),
            Reply::TimedOut => self.timed_out(d.retransmissions),
            Reply::Failed => self.error(),
        }
    }
}

/// Send `reqs` (index, encoded request) at `pace`, encoding each only when its turn
/// comes; return each digested outcome with its index, in completion order. Counts each
/// request as sent.
async fn run_paced(
    n4: &Arc<N4>,
    reqs: impl Iterator<Item = (usize, Vec<u8>)>,
    pace: Pace,
    stats: &mut PhaseStats,
) -> Vec<(usize, Digest)> {
    let sem = Arc::new(Semaphore::new(pace.in_flight.max(1)));
    let mut set = JoinSet::new();
    let mut out = Vec::new();
    let start = tokio::time::Instant::now();
    let interval = (pace.rate > 0.0).then(|| Duration::from_secs_f64(1.0 / pace.rate));
    for (k, (i, bytes)) in reqs.enumerate() {
        if let Some(iv) = interval {
            tokio::time::sleep_until(start + iv.mul_f64(k as f64)).await;
        }
        let Ok(permit) = sem.clone().acquire_owned().await else {
            break;
        };
        while let Some(r) = set.try_join_next() {
            if let Ok(x) = r {
                out.push(x);
            }
        }
        stats.sent();
        let n4 = n4.clone();
        let request_type = bytes.get(1).copied().unwrap_or(0);
        set.spawn(async move {
            let r = n4.transact(&bytes).await;
            drop(permit);
            (i, digest(request_type, r))
        });
    }
    while let Some(r) = set.join_next().await {
        if let Ok(x) = r {
            out.push(x);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfcp::message::message_type as mt;

    #[test]
    fn pool_hosts() {
        let p: Ipv4Pool = "10.45.0.0/16".parse().unwrap();
        assert_eq!(p.capacity(), 65534);
        assert_eq!(p.nth(0), Some(Ipv4Addr::new(10, 45, 0, 1)));
        assert_eq!(p.nth(65533), Some(Ipv4Addr::new(10, 45, 255, 254)));
        assert_eq!(p.nth(65534), None);
        assert!("10.0.0.0/31".parse::<Ipv4Pool>().is_err());
        assert!("10.0.0.0".parse::<Ipv4Pool>().is_err());
    }

    /// Session 0 of the emulator, before its establishment.
    fn sample_session() -> Session {
        Session {
            index: 0,
            cp_seid: 1,
            ue_ip: Ipv4Addr::new(10, 45, 0, 1),
            gnb_teid: 1,
            up_fseid: None,
            n3_fteid: None,
            state: SessionState::Failed,
        }
    }

    /// The DNN label-encoded by default (Open5GS, OAI), plain text on request (free5GC).
    #[tokio::test]
    async fn network_instance_is_label_encoded_unless_asked_plain() {
        let mut cfg = SmfConfig::new("127.0.0.1:8805".parse().unwrap());
        cfg.bind = "127.0.0.1:0".parse().unwrap();
        cfg.prefer_8805 = false;
        let smf = Smf::connect(cfg.clone()).await.unwrap();
        let req = smf.establishment_request(&sample_session());
        let ni = req.create_pdrs[0].pdi.network_instance.clone().unwrap();
        assert_eq!(ni.0, b"\x08internet".to_vec());
        cfg.dnn_plain = true;
        let smf = Smf::connect(cfg).await.unwrap();
        let req = smf.establishment_request(&sample_session());
        let ni = req.create_pdrs[0].pdi.network_instance.clone().unwrap();
        assert_eq!(ni.0, b"internet".to_vec());
    }

    /// APN/DNN and User ID as Open5GS's SMF sends them (its 5G roaming capture in
    /// ../shared/interop: APN/DNN label-encoded, User ID flags IMSI|IMEI|MSISDN with 8,
    /// 8 and 6 octets of TBCD), one subscriber per session; either can be left out.
    #[tokio::test]
    async fn apn_dnn_and_user_id_as_open5gs_sends_them() {
        let mut cfg = SmfConfig::new("127.0.0.1:8805".parse().unwrap());
        cfg.bind = "127.0.0.1:0".parse().unwrap();
        cfg.prefer_8805 = false;
        let smf = Smf::connect(cfg.clone()).await.unwrap();
        let mut s = sample_session();
        s.index = 41;
        let req = smf.establishment_request(&s);
        let bytes = msg::emit(&HeaderRepr::session(0, 0, 7), &req);
        let find = |t: u16| {
            let mut at = 16;
            while at + 4 <= bytes.len() {
                let ty = u16::from_be_bytes([bytes[at], bytes[at + 1]]);
                let len = usize::from(u16::from_be_bytes([bytes[at + 2], bytes[at + 3]]));
                if ty == t {
                    return Some(bytes[at + 4..at + 4 + len].to_vec());
                }
                at += 4 + len;
            }
            None
        };
        assert_eq!(find(159).unwrap(), b"\x08internet".to_vec(), "APN/DNN");
        let uid = find(141).unwrap();
        // Flags, then IMSI 001010000000042, IMEISV 3534900698733231, MSISDN 491720000042.
        assert_eq!(
            uid,
            [
                &[0x07, 8][..],
                &[0x00, 0x01, 0x01, 0x00, 0x00, 0x00, 0x40, 0xf2],
                &[8, 0x53, 0x43, 0x09, 0x60, 0x89, 0x37, 0x23, 0x13],
                &[6, 0x94, 0x71, 0x02, 0x00, 0x00, 0x24],
            ]
            .concat()
        );
        let (_, back) = msg::parse::<SessionEstablishmentRequest>(&bytes).unwrap();
        let u = back.user_id.unwrap();
        assert_eq!(
            pfcp::ie::tbcd(u.imsi.as_deref().unwrap()),
            "001010000000042"
        );
        cfg.apn_dnn = None;
        cfg.user_id = None;
        let smf = Smf::connect(cfg).await.unwrap();
        let req = smf.establishment_request(&s);
        assert!(req.apn_dnn.is_none() && req.user_id.is_none());
    }

    /// The three SRRs of the lab test (crates/upfd/tests/lab_qos_monitoring.rs).
    fn lab_srrs() -> Vec<QosSrr> {
        [
            "1:dl,ul,rp,period=1",
            "2:dl,dl-threshold=30,min-wait=2",
            "3:dl,ul,rp,release",
        ]
        .iter()
        .map(|s| s.parse().unwrap())
        .collect()
    }

    /// Each SRR is a Create SRR (TS 29.244 Table 7.5.2.9-1) on the QER's QFI, as octets;
    /// the codec reads back what was configured.
    #[tokio::test]
    async fn establishment_carries_a_create_srr_per_qos_srr() {
        let mut cfg = SmfConfig::new("127.0.0.1:8805".parse().unwrap());
        cfg.bind = "127.0.0.1:0".parse().unwrap();
        cfg.prefer_8805 = false;
        cfg.qos_monitoring = lab_srrs();
        let smf = Smf::connect(cfg.clone()).await.unwrap();
        let req = smf.establishment_request(&sample_session());
        let bytes = msg::emit(&HeaderRepr::session(0, 0, 7), &req);
        #[rustfmt::skip]
        let srr2: &[u8] = &[
            0x00, 0xd4, 0x00, 0x29,             // Create SRR (212), 41 octets
            0x00, 0xd7, 0x00, 0x01, 2,          //   SRR ID (215): 2
            0x00, 0xf2, 0x00, 0x20,             //   QoS Monitoring per QoS flow Control Information (242)
            0x00, 0x7c, 0x00, 0x01, 1,          //     QFI (124): 1
            0x00, 0xf3, 0x00, 0x01, 0x01,       //     Requested QoS Monitoring (243): DL
            0x00, 0xf4, 0x00, 0x01, 0x01,       //     Reporting Frequency (244): EVETT
            0x00, 0xf5, 0x00, 0x05, 0x01, 0, 0, 0, 30, // Packet Delay Thresholds (245): DL 30 ms
            0x00, 0xf6, 0x00, 0x04, 0, 0, 0, 2, //     Minimum Wait Time (246): 2 s
        ];
        #[rustfmt::skip]
        let srr1: &[u8] = &[
            0x00, 0xd4, 0x00, 0x20,
            0x00, 0xd7, 0x00, 0x01, 1,
            0x00, 0xf2, 0x00, 0x17,
            0x00, 0x7c, 0x00, 0x01, 1,
            0x00, 0xf3, 0x00, 0x01, 0x07,       // DL, UL, RP
            0x00, 0xf4, 0x00, 0x01, 0x02,       // PERIO
            0x00, 0x40, 0x00, 0x04, 0, 0, 0, 1, // Measurement Period (64): 1 s
        ];
        #[rustfmt::skip]
        let srr3: &[u8] = &[
            0x00, 0xd4, 0x00, 0x18,
            0x00, 0xd7, 0x00, 0x01, 3,
            0x00, 0xf2, 0x00, 0x0f,
            0x00, 0x7c, 0x00, 0x01, 1,
            0x00, 0xf3, 0x00, 0x01, 0x07,
            0x00, 0xf4, 0x00, 0x01, 0x04,       // SESRL
        ];
        let at = |needle: &[u8]| bytes.windows(needle.len()).position(|w| w == needle);
        let (a, b, c) = (at(srr1), at(srr2), at(srr3));
        assert!(a.is_some() && b.is_some() && c.is_some(), "{bytes:02x?}");
        assert!(a < b && b < c, "in the configured order");
        let (_, back) = msg::parse::<SessionEstablishmentRequest>(&bytes).unwrap();
        assert_eq!(back, req);
        let want: Vec<_> = cfg.qos_monitoring.iter().map(|q| q.create_srr(1)).collect();
        assert_eq!(back.create_srrs, want);
        assert_eq!(
            back.create_qers[0].qfi,
            Some(1),
            "the QFI monitored is the QER's"
        );
        // None by default.
        cfg.qos_monitoring.clear();
        let smf = Smf::connect(cfg).await.unwrap();
        assert!(smf
            .establishment_request(&sample_session())
            .create_srrs
            .is_empty());
    }

    /// QoS Monitoring Reports come back in Session Report Requests (SESR, answered with
    /// Request accepted) and in Session Deletion Responses: kept per session, in order,
    /// with SRR ID, QFI, measurement and time stamp.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn qos_reports_are_kept_per_session_in_order() {
        use fake_upf::{fake_delays, FakeUpf, FakeUpfConfig};
        let upf = FakeUpf::start(FakeUpfConfig {
            qos_reports: true,
            ..FakeUpfConfig::default()
        })
        .await
        .unwrap();
        let mut cfg = SmfConfig::new(upf.addr());
        cfg.bind = "127.0.0.1:0".parse().unwrap();
        cfg.prefer_8805 = false;
        cfg.qos_monitoring = lab_srrs();
        let mut smf = Smf::connect(cfg).await.unwrap();
        assert_eq!(smf.associate().await.accepted, 1);
        assert_eq!(smf.establish(2, Pace::default()).await.accepted, 2);
        // One Session Report Request per establishment, answered.
        let end = Instant::now() + Duration::from_secs(10);
        while upf.stats().report_answers < 2 && Instant::now() < end {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(upf.stats().report_answers, 2);
        assert_eq!(smf.upf_requests().session_reports, 2);
        let reqs = smf.absorb_session_reports();
        assert!(reqs
            .iter()
            .all(|r| r.report_type.get(pfcp::ie::report_type::SESR)));
        assert_eq!(smf.delete(Pace::default()).await.accepted, 2);
        // (SRR ID, at deletion, [DL, UL, RP]).
        type Row = (u8, bool, [Option<u32>; 3]);
        let all = |srr: u8, k: u32| {
            let (dl, ul, rp) = fake_delays(srr, k);
            [Some(dl), Some(ul), Some(rp)]
        };
        for i in 0..2 {
            let got: Vec<Row> = smf
                .qos_reports_of(i)
                .map(|r| {
                    assert_eq!((r.session, r.qfi), (i, 1));
                    assert!(r.time_stamp > n4::NTP_UNIX_OFFSET as u32);
                    let m = r.measurement;
                    (
                        r.srr_id,
                        r.at_deletion,
                        [m.downlink_ms, m.uplink_ms, m.round_trip_ms],
                    )
                })
                .collect();
            let want: Vec<Row> = vec![
                (1, false, all(1, 1)),
                (2, false, [all(2, 1)[0], None, None]),
                (3, false, all(3, 1)),
                // At deletion: SESRL's SRR 3 alone.
                (3, true, all(3, 2)),
            ];
            assert_eq!(got, want, "session {i}");
        }
        assert_eq!(smf.qos_reports().len(), 8);
        // The deletions come after every Session Report Request's reports.
        assert!(smf.qos_reports()[..6].iter().all(|r| !r.at_deletion));
    }

    #[test]
    fn digits_count_up_keeping_their_length() {
        assert_eq!(add_to_digits("001010000000001", 41), "001010000000042");
        assert_eq!(add_to_digits("0099", 1), "0100");
        assert_eq!(add_to_digits("999", 2), "001", "wraps at 10^len");
        assert_eq!(add_to_digits("12", 0), "12");
    }

    /// A UPF sends its own requests to port 8805 of the SMF: the emulator listens there
    /// when it is free on its address, and on any port when it is not.
    #[tokio::test]
    async fn the_emulator_listens_on_8805_when_it_can() {
        // An address of the loopback range no other test binds.
        let mut cfg = SmfConfig::new("127.0.0.1:8805".parse().unwrap());
        cfg.node_id = Some("127.0.0.61".parse().unwrap());
        let first = Smf::connect(cfg.clone()).await.unwrap();
        assert_eq!(
            first.n4.local_addr().unwrap(),
            "127.0.0.61:8805".parse().unwrap()
        );
        let second = Smf::connect(cfg).await.unwrap();
        let other = second.n4.local_addr().unwrap();
        assert_ne!(other.port(), 8805, "8805 is taken: any port");
    }

    #[tokio::test]
    async fn sdf_filter_goes_into_both_pdrs() {
        let mut cfg = SmfConfig::new("127.0.0.1:8805".parse().unwrap());
        cfg.bind = "127.0.0.1:0".parse().unwrap();
        let flow = "permit out ip from any to assigned";
        cfg.sdf_filter = Some(flow.into());
        let smf = Smf::connect(cfg).await.unwrap();
        let s = sample_session();
        let req = smf.establishment_request(&s);
        let bytes = msg::emit(&HeaderRepr::session(0, 0, 7), &req);
        let (_, back) = msg::parse::<SessionEstablishmentRequest>(&bytes).unwrap();
        for p in &back.create_pdrs {
            assert_eq!(p.pdi.sdf_filters.len(), 1, "PDR {}", p.pdr_id);
            assert_eq!(
                p.pdi.sdf_filters[0].flow_description.as_deref(),
                Some(flow.as_bytes())
            );
        }
        // Off by default.
        let smf = Smf::connect(SmfConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            ..SmfConfig::new("127.0.0.1:8805".parse().unwrap())
        })
        .await
        .unwrap();
        let req = smf.establishment_request(&s);
        assert!(req.create_pdrs.iter().all(|p| p.pdi.sdf_filters.is_empty()));
    }

    #[tokio::test]
    async fn application_rules_get_their_own_pdrs_fars_urrs_and_qers() {
        let mut cfg = SmfConfig::new("127.0.0.1:8805".parse().unwrap());
        cfg.bind = "127.0.0.1:0".parse().unwrap();
        cfg.teid = TeidMode::Choose;
        cfg.applications = vec![
            "video:mbr=2000,start".parse().unwrap(),
            "chat:gate=closed".parse().unwrap(),
            "plain".parse().unwrap(),
        ];
        let smf = Smf::connect(cfg).await.unwrap();
        let req = smf.establishment_request(&sample_session());
        let bytes = msg::emit(&HeaderRepr::session(0, 0, 7), &req);
        let (_, back) = msg::parse::<SessionEstablishmentRequest>(&bytes).unwrap();
        assert_eq!(back, req);
        let ids: Vec<u16> = req.create_pdrs.iter().map(|p| p.pdr_id).collect();
        assert_eq!(ids, vec![1, 2, 3, 4, 5, 6, 7, 8]);
        for (k, app) in ["video", "chat", "plain"].iter().enumerate() {
            let a = AppIds::of(k);
            for pdr_id in [a.pdr_ul, a.pdr_dl] {
                let p = req.create_pdrs.iter().find(|p| p.pdr_id == pdr_id).unwrap();
                assert_eq!(
                    p.pdi.application_id.as_ref().map(|t| t.0.clone()),
                    Some(app.as_bytes().to_vec())
                );
                assert!(p.precedence.unwrap() < 200);
                assert_eq!(p.urr_ids, vec![a.urr]);
                assert_eq!(p.qer_ids.len(), if k < 2 { 2 } else { 1 });
            }
        }
        // One tunnel for every uplink PDR: CHOOSE ID 1.
        for p in req
            .create_pdrs
            .iter()
            .filter(|p| p.pdi.local_fteid.is_some())
        {
            assert_eq!(
                p.pdi.local_fteid.unwrap().choose.unwrap().choose_id,
                Some(1)
            );
        }
        assert_eq!(req.create_fars.len(), 8);
        assert_eq!(req.create_urrs.len(), 4);
        let start = |id: u32| {
            let u = req.create_urrs.iter().find(|u| u.urr_id == id).unwrap();
            u.reporting_triggers.get(reporting_triggers::START)
        };
        assert!(start(2) && !start(3) && !start(1));
        let q = |id: u32| req.create_qers.iter().find(|q| q.qer_id == id).unwrap();
        assert_eq!(q(2).mbr.unwrap().dl_kbps, 2000);
        assert_eq!(q(3).gate_status, 0b0101);
        assert_eq!(req.create_qers.len(), 3);
        let m = smf.modification_request(&sample_session());
        let fars: Vec<u32> = m.update_fars.iter().map(|f| f.far_id).collect();
        assert_eq!(fars, vec![2, 4, 6, 8]);
    }

    #[tokio::test]
    async fn establishment_request_round_trips_and_has_the_interop_ies() {
        let mut cfg = SmfConfig::new("127.0.0.1:8805".parse().unwrap());
        cfg.bind = "127.0.0.1:0".parse().unwrap();
        cfg.teid = TeidMode::Choose;
        let smf = Smf::connect(cfg).await.unwrap();
        let s = sample_session();
        let req = smf.establishment_request(&s);
        let bytes = msg::emit(&HeaderRepr::session(0, 0, 7), &req);
        let (h, back) = msg::parse::<SessionEstablishmentRequest>(&bytes).unwrap();
        assert_eq!(h.message_type, mt::SESSION_ESTABLISHMENT_REQUEST);
        assert_eq!(back, req);
        let ul = &req.create_pdrs[0];
        assert!(ul.pdi.local_fteid.unwrap().choose.unwrap().v4);
        assert_eq!(ul.pdi.qfis, vec![1]);
        assert_eq!(ul.pdi.source_interface_type, Some(11));
        assert_eq!(req.create_fars[0].apply_action.0.len(), 2);
        assert_eq!(
            req.create_fars[0]
                .forwarding_parameters
                .as_ref()
                .unwrap()
                .destination_interface_type,
            Some(17)
        );
        assert_eq!(req.pdn_type, Some(1));
        let dl = &req.create_pdrs[1];
        assert!(dl.pdi.ue_ip_address[0].destination);
        assert_eq!(dl.qer_ids, vec![1]);
        assert_eq!(dl.urr_ids, vec![1]);
        let ohc = req.create_fars[1]
            .forwarding_parameters
            .as_ref()
            .unwrap()
            .outer_header_creation
            .unwrap();
        assert_eq!(
            (ohc.teid, ohc.ipv4),
            (Some(1), Some(Ipv4Addr::new(10, 10, 0, 1)))
        );
    }
}
