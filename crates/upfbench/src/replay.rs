//! `upfbench replay FILE --upf ADDR`: play the SMF side of a real N4 capture against a UPF
//! and compare each response with the one the original UPF sent.
//!
//! 1. [`Plan::from_datagrams`] reads the capture's PFCP datagrams (UDP port 8805 on either
//!    side), decides which endpoints are CP functions (SMF, SGW-C, PGW-C) and which are UP
//!    functions from what each sends (session requests and CP Function Features mark a CP
//!    function; Session/Node Report Requests and UP Function Features a UP function), and
//!    pairs every request a CP function sent to a UP function with the original response
//!    (same two endpoints, same sequence number, the matching response type). Copies of a
//!    request with the same octets (retransmissions, or a frame captured twice) are
//!    replayed once.
//! 2. [`replay`] gives each original CP endpoint its own socket on a distinct loopback
//!    address (127.0.0.101, .102 ...) and sends its requests, in capture order and one at a
//!    time, to the one UPF under test, answering the UPF's own requests meanwhile.
//!    Before sending, each request is rewritten so the UPF under test sees a consistent
//!    SMF (at the IE level, then re-encoded; everything else stays byte-identical):
//!    - the SMF's Node ID and F-SEID name the local address it is replayed from;
//!    - the UP SEID in the header becomes the SEID the UPF under test allocated (learnt
//!      from the original and the new Session Establishment Responses);
//!    - an F-TEID or UE address the original UPF allocated (Created PDR / Created Traffic
//!      Endpoint) becomes the one the UPF under test allocated, wherever a later request
//!      echoes it: a PDI F-TEID, or the Outer Header Creation another SMF of the capture
//!      points at it (home-routed roaming, S5/S8);
//!    - a local F-TEID the SMF picked itself (no CHOOSE) gets the N3 address of the UPF
//!      under test instead of the original UPF's, and a new TEID if two original UPFs
//!      used the same one (their sessions now share one UPF).
//! 3. Each response is compared with the original: message type, Cause, number of Created
//!    PDRs that report an allocation, and, where the request asked for CHOOSE or
//!    CHV4/CHV6, that the response carries an allocated F-TEID or UE address. Created PDRs
//!    that carry the PDR ID alone, or only echo the F-TEID or UE address the SMF chose
//!    (free5GC's go-upf), are not allocations (TS 29.244 Table 7.5.3.1-1): a difference in
//!    them is informational. Heartbeat responses, and responses to requests the capture
//!    holds no response for, are compared on type only.
//! 4. A capture may hold several UPFs ([`Plan::upfs`]). One UPF under test can stand in
//!    for all of them at once only when each SMF talks to one of them; an SMF that talks
//!    to several ([`Plan::shared_smfs`]: an uplink classifier and its anchors) would set
//!    up its association again for each. [`Plan::for_upf`] keeps one UPF's requests;
//!    [`replay_each_upf`] replays each UPF's part against a fresh UPF under test; the CLI
//!    replays the first such UPF, or the one `--capture-upf` names, and counts per UPF.

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use pfcp::ie::{FTeid, NodeId, OuterHeaderCreation, UeIpAddress};
use pfcp::message::message_type as mt;
use pfcp::msg::{CreatePdr, CreatedPdr, CreatedTrafficEndpoint, Msg};
use pfcp::{CauseValue, HeaderRepr, Ie, Message};
use serde::Serialize;

use crate::smf::n4::{self, Timers, TxError, N4};

/// The PFCP port (TS 29.244 clause 7.1).
pub const PFCP_PORT: u16 = 8805;

/// Request types a CP function sends to a UP function and that are replayed.
pub const REPLAYED: [u8; 10] = [
    mt::HEARTBEAT_REQUEST,
    mt::PFD_MANAGEMENT_REQUEST,
    mt::ASSOCIATION_SETUP_REQUEST,
    mt::ASSOCIATION_UPDATE_REQUEST,
    mt::ASSOCIATION_RELEASE_REQUEST,
    mt::SESSION_SET_DELETION_REQUEST,
    mt::SESSION_SET_MODIFICATION_REQUEST,
    mt::SESSION_ESTABLISHMENT_REQUEST,
    mt::SESSION_MODIFICATION_REQUEST,
    mt::SESSION_DELETION_REQUEST,
];

fn type_name(t: u8) -> String {
    mt::name(t)
        .map(str::to_string)
        .unwrap_or_else(|| format!("message type {t}"))
}

/// What an endpoint of the capture is, judged by what it sent and received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    Cp,
    Up,
    /// Evidence both ways (e.g. a synthetic capture of random messages): not replayed.
    Both,
    Unknown,
}

/// One request of the capture to replay, with the original response if the capture has it.
#[derive(Debug, Clone)]
pub struct Transaction {
    /// Frame number of the request (the first copy, if it was sent more than once).
    pub frame: usize,
    pub smf: SocketAddr,
    pub upf: SocketAddr,
    pub header: HeaderRepr,
    pub request: Vec<u8>,
    /// Frame number and octets of the original UPF's response.
    pub response: Option<(usize, Vec<u8>)>,
}

/// What [`Plan::from_datagrams`] found in a capture.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub transactions: Vec<Transaction>,
    pub roles: Vec<(SocketAddr, Role)>,
    /// Repeated requests with identical octets, replayed once.
    pub duplicates: usize,
    /// The UPF each of those repeated requests went to.
    duplicate_upfs: Vec<SocketAddr>,
    /// Observations worth printing (ambiguous roles, undecodable messages ...).
    pub notes: Vec<String>,
}

#[derive(Default, Clone, Copy)]
struct Votes {
    cp: u32,
    up: u32,
}

fn has_top(m: &Message, t: u16) -> bool {
    m.ies.iter().any(|ie| ie.ie_type() == t)
}

impl Plan {
    /// Read a pcap/pcapng file and plan its replay.
    pub fn from_file(path: &Path) -> io::Result<Plan> {
        let frames = capture::read_file(path)?;
        Ok(Plan::from_datagrams(&capture::datagrams(&frames)))
    }

    /// Plan the replay of these datagrams (frame number, datagram), in capture order.
    pub fn from_datagrams(datagrams: &[(usize, capture::Datagram)]) -> Plan {
        let mut plan = Plan::default();
        let mut msgs: Vec<(usize, SocketAddr, SocketAddr, Message, &[u8])> = Vec::new();
        for (frame, d) in datagrams {
            if d.sport != PFCP_PORT && d.dport != PFCP_PORT {
                continue;
            }
            let (src, dst) = (
                SocketAddr::new(d.src, d.sport),
                SocketAddr::new(d.dst, d.dport),
            );
            match Message::parse(&d.payload) {
                Ok(m) => msgs.push((*frame, src, dst, m, &d.payload)),
                Err(e) => plan
                    .notes
                    .push(format!("frame {frame}: not decoded ({e}): skipped")),
            }
        }
        // Roles from evidence.
        let mut votes: HashMap<SocketAddr, Votes> = HashMap::new();
        let mut order: Vec<SocketAddr> = Vec::new();
        for (_, src, dst, m, _) in &msgs {
            for a in [src, dst] {
                if !votes.contains_key(a) {
                    order.push(*a);
                    votes.insert(*a, Votes::default());
                }
            }
            let t = m.header.message_type;
            let (cp_sender, up_sender) = match t {
                mt::PFD_MANAGEMENT_REQUEST
                | mt::SESSION_SET_MODIFICATION_REQUEST
                | mt::SESSION_ESTABLISHMENT_REQUEST
                | mt::SESSION_MODIFICATION_REQUEST
                | mt::SESSION_DELETION_REQUEST => (true, false),
                mt::SESSION_REPORT_REQUEST | mt::NODE_REPORT_REQUEST => (false, true),
                mt::ASSOCIATION_SETUP_REQUEST
                | mt::ASSOCIATION_SETUP_RESPONSE
                | mt::ASSOCIATION_UPDATE_REQUEST
                | mt::ASSOCIATION_UPDATE_RESPONSE => (
                    has_top(m, pfcp::ie::types::CP_FUNCTION_FEATURES),
                    has_top(m, pfcp::ie::types::UP_FUNCTION_FEATURES),
                ),
                _ => (false, false),
            };
            let requestish = mt::is_request(t);
            if cp_sender {
                votes.entry(*src).or_default().cp += 1;
                if requestish {
                    votes.entry(*dst).or_default().up += 1;
                }
            }
            if up_sender {
                votes.entry(*src).or_default().up += 1;
                if requestish {
                    votes.entry(*dst).or_default().cp += 1;
                }
            }
        }
        let mut roles: HashMap<SocketAddr, Role> = votes
            .iter()
            .map(|(a, v)| {
                let r = match (v.cp > 0, v.up > 0) {
                    (true, false) => Role::Cp,
                    (false, true) => Role::Up,
                    (true, true) => Role::Both,
                    (false, false) => Role::Unknown,
                };
                (*a, r)
            })
            .collect();
        // An endpoint with no evidence of its own takes the opposite role of its peers.
        for _ in 0..4 {
            let mut changed = false;
            for (_, src, dst, _, _) in &msgs {
                for (a, b) in [(src, dst), (dst, src)] {
                    if roles[a] == Role::Unknown {
                        let r = match roles[b] {
                            Role::Cp => Role::Up,
                            Role::Up => Role::Cp,
                            _ => continue,
                        };
                        roles.insert(*a, r);
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        for a in &order {
            if roles[a] == Role::Both {
                plan.notes.push(format!(
                    "{a} acts as both CP and UP function (it sends or receives both session requests and reports): its messages are not replayed"
                ));
            }
        }
        plan.roles = order.iter().map(|a| (*a, roles[a])).collect();

        // Transactions: requests CP -> UP, paired with responses UP -> CP.
        let mut latest: HashMap<(SocketAddr, SocketAddr, u32), usize> = HashMap::new();
        for (frame, src, dst, m, bytes) in &msgs {
            let t = m.header.message_type;
            let seq = m.header.sequence;
            if mt::is_request(t) {
                if !REPLAYED.contains(&t) || roles[src] != Role::Cp || roles[dst] != Role::Up {
                    continue;
                }
                let key = (*src, *dst, seq);
                if let Some(&i) = latest.get(&key) {
                    if plan.transactions[i].request == *bytes {
                        plan.duplicates += 1;
                        plan.duplicate_upfs.push(*dst);
                        continue;
                    }
                }
                latest.insert(key, plan.transactions.len());
                plan.transactions.push(Transaction {
                    frame: *frame,
                    smf: *src,
                    upf: *dst,
                    header: m.header,
                    request: bytes.to_vec(),
                    response: None,
                });
            } else if let Some(&i) = latest.get(&(*dst, *src, seq)) {
                let tx = &mut plan.transactions[i];
                let fits =
                    t == tx.header.message_type + 1 || t == mt::VERSION_NOT_SUPPORTED_RESPONSE;
                if fits && tx.response.is_none() {
                    tx.response = Some((*frame, bytes.to_vec()));
                }
            }
        }
        plan
    }

    /// The Recovery Time Stamp of `smf`'s first Association Setup Request, if any.
    pub fn recovery_time_stamp(&self, smf: SocketAddr) -> Option<u32> {
        self.transactions
            .iter()
            .filter(|t| t.smf == smf && t.header.message_type == mt::ASSOCIATION_SETUP_REQUEST)
            .find_map(|t| match Msg::parse(&t.request) {
                Ok((_, Msg::AssociationSetupRequest(a))) => Some(a.recovery_time_stamp),
                _ => None,
            })
    }

    /// The CP endpoints that have requests to replay, in order of their first request.
    pub fn smfs(&self) -> Vec<SocketAddr> {
        let mut v: Vec<SocketAddr> = Vec::new();
        for t in &self.transactions {
            if !v.contains(&t.smf) {
                v.push(t.smf);
            }
        }
        v
    }

    /// The UP endpoints that have requests to replay, in order of their first request:
    /// the UPFs of the capture, each known by the address its SMFs sent to.
    pub fn upfs(&self) -> Vec<SocketAddr> {
        let mut v: Vec<SocketAddr> = Vec::new();
        for t in &self.transactions {
            if !v.contains(&t.upf) {
                v.push(t.upf);
            }
        }
        v
    }

    /// The part of the plan that `upf` of the capture answered: its requests only.
    pub fn for_upf(&self, upf: SocketAddr) -> Plan {
        Plan {
            transactions: self
                .transactions
                .iter()
                .filter(|t| t.upf == upf)
                .cloned()
                .collect(),
            roles: self.roles.clone(),
            duplicates: self.duplicate_upfs.iter().filter(|u| **u == upf).count(),
            duplicate_upfs: self
                .duplicate_upfs
                .iter()
                .filter(|u| **u == upf)
                .copied()
                .collect(),
            notes: self.notes.clone(),
        }
    }

    /// SMFs that send requests to more than one UPF of the capture (an SMF with an uplink
    /// classifier and its anchors; SMFs associated with every UPF). One UPF under test
    /// cannot answer for all of their UPFs at once: it would see the SMF set up its
    /// association again for each (or, for an FQDN Node ID sent from several addresses,
    /// refuse all but the first as a takeover), and the sessions of one PDU session, with
    /// one UE address, side by side. An SMF is its address, or its Node ID when that is an
    /// FQDN (not rewritten, so several addresses sending one FQDN are one SMF to the UPF
    /// under test).
    pub fn shared_smfs(&self) -> Vec<SharedSmf> {
        let mut v: Vec<SharedSmf> = Vec::new();
        let mut fqdn: HashMap<SocketAddr, String> = HashMap::new();
        for t in &self.transactions {
            if let Some(name) = fqdn_node_id(&t.request) {
                fqdn.entry(t.smf).or_insert(name);
            }
        }
        for t in &self.transactions {
            let smf = fqdn
                .get(&t.smf)
                .cloned()
                .unwrap_or_else(|| t.smf.to_string());
            let i = match v.iter().position(|s| s.smf == smf) {
                Some(i) => i,
                None => {
                    v.push(SharedSmf {
                        smf,
                        upfs: Vec::new(),
                    });
                    v.len() - 1
                }
            };
            if !v[i].upfs.contains(&t.upf) {
                v[i].upfs.push(t.upf);
            }
        }
        v.retain(|s| s.upfs.len() > 1);
        v
    }

    /// The UPF of the capture that `sel` names.
    pub fn find_upf(&self, sel: &CaptureUpf) -> Result<SocketAddr, String> {
        let upfs = self.upfs();
        let hits: Vec<SocketAddr> = upfs
            .iter()
            .copied()
            .filter(|u| match sel {
                CaptureUpf::Ip(ip) => u.ip() == *ip,
                CaptureUpf::Addr(a) => u == a,
            })
            .collect();
        let list = || {
            upfs.iter()
                .map(|u| u.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match hits.as_slice() {
            [one] => Ok(*one),
            [] if upfs.is_empty() => Err(format!(
                "the capture has no UPF with requests to replay, none at {sel}"
            )),
            [] => Err(format!(
                "no UPF of the capture at {sel}; its UPFs: {}",
                list()
            )),
            _ => Err(format!(
                "several UPFs of the capture at {sel}: give the port too ({})",
                list()
            )),
        }
    }
}

/// An SMF of the capture that talks to several of its UPFs ([`Plan::shared_smfs`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SharedSmf {
    /// Its address, or its FQDN Node ID.
    pub smf: String,
    pub upfs: Vec<SocketAddr>,
}

/// A UPF of the capture, as `--capture-upf` names it: an address, with or without port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureUpf {
    Ip(IpAddr),
    Addr(SocketAddr),
}

impl std::str::FromStr for CaptureUpf {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Ok(a) = s.parse::<SocketAddr>() {
            return Ok(CaptureUpf::Addr(a));
        }
        s.parse::<IpAddr>()
            .map(CaptureUpf::Ip)
            .map_err(|_| format!("{s:?} is neither IP nor IP:PORT"))
    }
}

impl std::fmt::Display for CaptureUpf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaptureUpf::Ip(a) => write!(f, "{a}"),
            CaptureUpf::Addr(a) => write!(f, "{a}"),
        }
    }
}

/// The Node ID of a request when it is an FQDN.
fn fqdn_node_id(request: &[u8]) -> Option<String> {
    let m = Message::parse(request).ok()?;
    m.ies.iter().find_map(|ie| match ie {
        Ie::NodeId(n) if matches!(n.node_id, NodeId::Fqdn(_)) => Some(n.node_id.to_string()),
        _ => None,
    })
}

/// How to replay.
#[derive(Debug, Clone)]
pub struct ReplayConfig {
    /// The UPF under test.
    pub upf: SocketAddr,
    /// Local address of the first original SMF; the next ones count up from it.
    pub local_base: Ipv4Addr,
    /// Local port (0: any). When taken, any port is used instead.
    pub local_port: u16,
    /// Wait this long for each response, then send once more (`retransmissions` times).
    pub timeout: Duration,
    pub retransmissions: u32,
    /// The N3 address(es) of the UPF under test, for F-TEIDs the SMF picked itself.
    /// Default: its User Plane IP Resource Information, else the IP of `upf`.
    pub upf_n3: Vec<IpAddr>,
}

impl ReplayConfig {
    pub fn new(upf: SocketAddr) -> Self {
        ReplayConfig {
            upf,
            local_base: Ipv4Addr::new(127, 0, 0, 101),
            local_port: 0,
            timeout: Duration::from_secs(2),
            retransmissions: 1,
            upf_n3: Vec::new(),
        }
    }
}

/// How one replayed request fared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "result", content = "differences")]
pub enum Verdict {
    Matched,
    Mismatched(Vec<String>),
    TimedOut,
    /// Not sent: the capture does not hold what the request needs (its session was set
    /// up before the capture started, or its establishment was not replayed); why.
    NotReplayable(String),
}

#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub frame: usize,
    pub message_type: u8,
    pub smf: SocketAddr,
    pub upf: SocketAddr,
    pub local: SocketAddr,
    pub sequence: u32,
    /// (original, sent) UP SEID of a session request's header.
    pub seid: Option<(u64, u64)>,
    pub verdict: Verdict,
    /// How the request was rewritten, and anything else to know about this one.
    pub notes: Vec<String>,
}

impl Outcome {
    /// One line for the report: frame, request, endpoints, and what differed.
    pub fn line(&self) -> String {
        let what = match &self.verdict {
            Verdict::Matched => "matched".to_string(),
            Verdict::Mismatched(d) => d.join("; "),
            Verdict::TimedOut => "timed out: no response".to_string(),
            Verdict::NotReplayable(why) => format!("not replayable: {why}"),
        };
        format!(
            "frame {}: {} ({} -> {}, seq {}): {}",
            self.frame,
            type_name(self.message_type),
            self.smf,
            self.upf,
            self.sequence,
            what
        )
    }
}

/// The counts of the closing line.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Summary {
    pub requests: usize,
    pub matched: usize,
    /// The UPF under test answered otherwise than the recorded UPF.
    pub mismatched: usize,
    pub timed_out: usize,
    /// Requests the capture cannot reproduce (not sent; see [`Verdict::NotReplayable`]).
    pub not_replayable: usize,
}

impl Summary {
    /// The counts of these outcomes.
    pub fn of<'a>(outcomes: impl IntoIterator<Item = &'a Outcome>) -> Summary {
        let mut s = Summary::default();
        for o in outcomes {
            s.requests += 1;
            match o.verdict {
                Verdict::Matched => s.matched += 1,
                Verdict::Mismatched(_) => s.mismatched += 1,
                Verdict::TimedOut => s.timed_out += 1,
                Verdict::NotReplayable(_) => s.not_replayable += 1,
            }
        }
        s
    }

    fn counts(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} requests, {} responses matched, {} mismatched, {} timed out, {} not replayable",
            self.requests, self.matched, self.mismatched, self.timed_out, self.not_replayable
        )
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "replay: ")?;
        self.counts(f)
    }
}

/// The counts of the requests to one UPF of the capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct UpfSummary {
    /// The UPF of the capture (the address its SMFs sent to).
    pub upf: SocketAddr,
    pub summary: Summary,
}

impl std::fmt::Display for UpfSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "replay of UPF {}: ", self.upf)?;
        self.summary.counts(f)
    }
}

/// Everything a replay found.
#[derive(Debug, Clone, Serialize)]
pub struct ReplayReport {
    pub outcomes: Vec<Outcome>,
    /// Original SMF endpoint -> local address it was replayed from.
    pub locals: Vec<(SocketAddr, SocketAddr)>,
    /// (original UPF, original UP SEID) -> UP SEID of the UPF under test.
    pub seids: Vec<(SocketAddr, u64, u64)>,
    /// Original F-TEID (address, TEID) -> the F-TEID used with the UPF under test.
    pub fteids: Vec<(IpAddr, u32, FTeid)>,
    pub notes: Vec<String>,
    pub summary: Summary,
}

impl ReplayReport {
    /// The counts per UPF of the capture, in order of their first request.
    pub fn per_upf(&self) -> Vec<UpfSummary> {
        let mut upfs: Vec<SocketAddr> = Vec::new();
        for o in &self.outcomes {
            if !upfs.contains(&o.upf) {
                upfs.push(o.upf);
            }
        }
        upfs.into_iter()
            .map(|upf| UpfSummary {
                upf,
                summary: Summary::of(self.outcomes.iter().filter(|o| o.upf == upf)),
            })
            .collect()
    }
}

/// The replay of one UPF's part of a capture against a UPF under test of its own.
#[derive(Debug, Clone, Serialize)]
pub struct UpfReport {
    /// The UPF of the capture.
    pub upf: SocketAddr,
    /// The UPF under test that answered in its place.
    pub under_test: SocketAddr,
    pub report: ReplayReport,
}

impl UpfReport {
    pub fn summary(&self) -> UpfSummary {
        UpfSummary {
            upf: self.upf,
            summary: self.report.summary,
        }
    }
}

/// What the rewriting learnt so far.
#[derive(Default)]
struct Mapper {
    seids: HashMap<(SocketAddr, u64), u64>,
    fteids: HashMap<(IpAddr, u32), FTeid>,
    /// (address, TEID) of the UPF under test handed out for F-TEIDs the SMF picked.
    taken: HashSet<(IpAddr, u32)>,
    ue_ips: HashMap<IpAddr, IpAddr>,
    n3_v4: Option<Ipv4Addr>,
    n3_v6: Option<Ipv6Addr>,
    n3_from_cli: bool,
    n3_default_noted: bool,
    next_teid: u32,
}

fn fteid_addrs(f: &FTeid) -> impl Iterator<Item = IpAddr> {
    f.ipv4
        .map(IpAddr::V4)
        .into_iter()
        .chain(f.ipv6.map(IpAddr::V6))
}

impl Mapper {
    /// A local F-TEID (PDI, traffic endpoint) the SMF sends without CHOOSE.
    fn local_fteid(&mut self, f: FTeid, notes: &mut Vec<String>) -> FTeid {
        let Some(teid) = f.teid else { return f };
        for a in fteid_addrs(&f) {
            if let Some(m) = self.fteids.get(&(a, teid)) {
                return merge(f, *m);
            }
        }
        if self.n3_v4.is_none() && self.n3_v6.is_none() && !self.n3_default_noted {
            self.n3_default_noted = true;
            notes.push(
                "the N3 address of the UPF under test is not known (no User Plane IP Resource Information, no --upf-n3): F-TEIDs the SMF picked keep the original address".into(),
            );
        }
        let v4 = f.ipv4.map(|a| self.n3_v4.unwrap_or(a));
        let v6 = f.ipv6.map(|a| self.n3_v6.unwrap_or(a));
        let new_addrs: Vec<IpAddr> = v4
            .map(IpAddr::V4)
            .into_iter()
            .chain(v6.map(IpAddr::V6))
            .collect();
        let mut t = teid;
        if self.next_teid == 0 {
            self.next_teid = 0x7000_0001;
        }
        while new_addrs.iter().any(|a| self.taken.contains(&(*a, t))) {
            t = self.next_teid;
            self.next_teid = self.next_teid.wrapping_add(1).max(1);
        }
        for a in &new_addrs {
            self.taken.insert((*a, t));
        }
        let new = FTeid::new(t, v4, v6);
        for a in fteid_addrs(&f) {
            self.fteids.insert((a, teid), new);
        }
        if t != teid {
            notes.push(format!(
                "F-TEID 0x{teid:08x} is used by two original UPFs: sent as 0x{t:08x}"
            ));
        }
        new
    }

    fn outer_header_creation(&self, o: &mut OuterHeaderCreation) -> bool {
        let Some(teid) = o.teid else { return false };
        let hit = o
            .ipv4
            .map(IpAddr::V4)
            .and_then(|a| self.fteids.get(&(a, teid)))
            .or_else(|| {
                o.ipv6
                    .map(IpAddr::V6)
                    .and_then(|a| self.fteids.get(&(a, teid)))
            })
            .copied();
        let Some(m) = hit else { return false };
        o.teid = m.teid;
        if o.ipv4.is_some() {
            o.ipv4 = m.ipv4.or(o.ipv4);
        }
        if o.ipv6.is_some() {
            o.ipv6 = m.ipv6.or(o.ipv6);
        }
        true
    }

    fn ue_ip(&self, u: &mut UeIpAddress) -> bool {
        let mut changed = false;
        if let Some(IpAddr::V4(a)) = u.ipv4.and_then(|a| self.ue_ips.get(&IpAddr::V4(a))) {
            u.ipv4 = Some(*a);
            changed = true;
        }
        if let Some(IpAddr::V6(a)) = u.ipv6.and_then(|a| self.ue_ips.get(&IpAddr::V6(a))) {
            u.ipv6 = Some(*a);
            changed = true;
        }
        changed
    }

    /// Learn from a pair of Created PDRs / Created Traffic Endpoints (original, ours).
    fn learn_allocation(
        &mut self,
        orig: (Option<FTeid>, &[UeIpAddress]),
        ours: (Option<FTeid>, &[UeIpAddress]),
    ) {
        if let (Some(o), Some(n)) = (orig.0, ours.0) {
            if let Some(teid) = o.teid {
                for a in fteid_addrs(&o) {
                    self.fteids.insert((a, teid), n);
                }
            }
        }
        for (o, n) in orig.1.iter().zip(ours.1) {
            if let (Some(a), Some(b)) = (o.ipv4, n.ipv4) {
                self.ue_ips.insert(IpAddr::V4(a), IpAddr::V4(b));
            }
            if let (Some(a), Some(b)) = (o.ipv6, n.ipv6) {
                self.ue_ips.insert(IpAddr::V6(a), IpAddr::V6(b));
            }
        }
    }
}

/// `orig` rewritten with the TEID and addresses of `m`, keeping the address families
/// `orig` had.
fn merge(orig: FTeid, m: FTeid) -> FTeid {
    FTeid::new(
        m.teid.unwrap_or(0),
        orig.ipv4.map(|a| m.ipv4.unwrap_or(a)),
        orig.ipv6.map(|a| m.ipv6.unwrap_or(a)),
    )
}

/// Grouped IEs of SMF requests that hold F-TEIDs, Outer Header Creations or UE addresses.
fn children_mut(ie: &mut Ie) -> Option<&mut Vec<Ie>> {
    match ie {
        Ie::CreatePdr(v)
        | Ie::Pdi(v)
        | Ie::UpdatePdr(v)
        | Ie::CreateFar(v)
        | Ie::ForwardingParameters(v)
        | Ie::DuplicatingParameters(v)
        | Ie::UpdateFar(v)
        | Ie::UpdateForwardingParameters(v)
        | Ie::UpdateDuplicatingParameters(v)
        | Ie::CreateTrafficEndpoint(v)
        | Ie::UpdateTrafficEndpoint(v)
        | Ie::RedundantTransmissionParameters(v)
        | Ie::RedundantTransmissionForwardingParameters(v) => Some(v),
        _ => None,
    }
}

fn rewrite_nested(ies: &mut [Ie], map: &mut Mapper, changed: &mut Vec<String>) {
    for ie in ies {
        match ie {
            Ie::FTeid(f) if f.choose.is_none() => {
                let new = map.local_fteid(*f, changed);
                if new != *f {
                    changed.push(format!(
                        "F-TEID 0x{:08x} {} -> 0x{:08x} {}",
                        f.teid.unwrap_or(0),
                        addrs_text(f.ipv4, f.ipv6),
                        new.teid.unwrap_or(0),
                        addrs_text(new.ipv4, new.ipv6)
                    ));
                    *f = new;
                }
            }
            Ie::OuterHeaderCreation(o) => {
                let before = *o;
                if map.outer_header_creation(o) && before != *o {
                    changed.push(format!(
                        "Outer Header Creation 0x{:08x} {} -> 0x{:08x} {}",
                        before.teid.unwrap_or(0),
                        addrs_text(before.ipv4, before.ipv6),
                        o.teid.unwrap_or(0),
                        addrs_text(o.ipv4, o.ipv6)
                    ));
                }
            }
            Ie::UeIpAddress(u) if !u.choose_v4 && !u.choose_v6 => {
                let before = *u;
                if map.ue_ip(u) {
                    changed.push(format!(
                        "UE IP {} -> {}",
                        addrs_text(before.ipv4, before.ipv6),
                        addrs_text(u.ipv4, u.ipv6)
                    ));
                }
            }
            other => {
                if let Some(children) = children_mut(other) {
                    rewrite_nested(children, map, changed);
                }
            }
        }
    }
}

fn addrs_text(v4: Option<Ipv4Addr>, v6: Option<Ipv6Addr>) -> String {
    match (v4, v6) {
        (Some(a), Some(b)) => format!("{a}/{b}"),
        (Some(a), None) => a.to_string(),
        (None, Some(b)) => b.to_string(),
        (None, None) => "-".into(),
    }
}

/// A request rewritten for the UPF under test.
struct Rewritten {
    bytes: Vec<u8>,
    /// (original, sent) UP SEID.
    seid: Option<(u64, u64)>,
    changes: Vec<String>,
}

/// Rewrite one request of `tx` for the UPF under test.
fn rewrite(tx: &Transaction, local: Ipv4Addr, map: &mut Mapper) -> Result<Rewritten, pfcp::Error> {
    let mut m = Message::parse(&tx.request)?;
    let mut changed = Vec::new();
    let mut seid = None;
    let t = m.header.message_type;
    if t != mt::SESSION_ESTABLISHMENT_REQUEST {
        if let Some(s) = m.header.seid {
            match map.seids.get(&(tx.upf, s)) {
                Some(&n) => {
                    m.header.seid = Some(n);
                    seid = Some((s, n));
                    changed.push(format!("UP SEID 0x{s:x} -> 0x{n:x}"));
                }
                None => {
                    seid = Some((s, s));
                    changed.push(format!(
                        "UP SEID 0x{s:x} unknown (its establishment failed or is not in the capture): sent unchanged"
                    ));
                }
            }
        }
    }
    for ie in m.ies.iter_mut() {
        match ie {
            Ie::NodeId(n) if matches!(n.node_id, NodeId::Ipv4(_) | NodeId::Ipv6(_)) => {
                n.node_id = NodeId::Ipv4(local)
            }
            Ie::FSeid(f) => {
                f.ipv4 = Some(local);
                f.ipv6 = None;
            }
            _ => {}
        }
    }
    rewrite_nested(&mut m.ies, map, &mut changed);
    Ok(Rewritten {
        bytes: m.emit(),
        seid,
        changes: changed,
    })
}

fn cause_of(m: &Msg) -> Option<CauseValue> {
    Some(match m {
        Msg::PfdManagementResponse(r) => r.cause,
        Msg::AssociationSetupResponse(r) => r.cause,
        Msg::AssociationUpdateResponse(r) => r.cause,
        Msg::AssociationReleaseResponse(r) => r.cause,
        Msg::NodeReportResponse(r) => r.cause,
        Msg::SessionSetDeletionResponse(r) => r.cause,
        Msg::SessionSetModificationResponse(r) => r.cause,
        Msg::SessionEstablishmentResponse(r) => r.cause,
        Msg::SessionModificationResponse(r) => r.cause,
        Msg::SessionDeletionResponse(r) => r.cause,
        Msg::SessionReportResponse(r) => r.cause,
        _ => return None,
    })
}

fn created_pdrs(m: &Msg) -> Option<&[CreatedPdr]> {
    match m {
        Msg::SessionEstablishmentResponse(r) => Some(&r.created_pdrs),
        Msg::SessionModificationResponse(r) => Some(&r.created_pdrs),
        _ => None,
    }
}

fn created_traffic_endpoints(m: &Msg) -> &[CreatedTrafficEndpoint] {
    match m {
        Msg::SessionEstablishmentResponse(r) => &r.created_traffic_endpoints,
        Msg::SessionModificationResponse(r) => &r.created_traffic_endpoints,
        _ => &[],
    }
}

fn create_pdrs(m: &Msg) -> &[CreatePdr] {
    match m {
        Msg::SessionEstablishmentRequest(r) => &r.create_pdrs,
        Msg::SessionModificationRequest(r) => &r.create_pdrs,
        _ => &[],
    }
}

fn cause_text(c: Option<CauseValue>) -> String {
    match c {
        Some(c) => format!("{} ({})", c.0, c.name()),
        None => "none".into(),
    }
}

/// What a Created PDR (TS 29.244 Table 7.5.3.1-1, 7.5.5.1-1) says, judged against the
/// Create PDR of the same ID in the request it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CreatedKind {
    /// The PDR ID alone (older Open5GS UPFs, for every PDR).
    Bare,
    /// Only the F-TEID or UE address the SMF chose itself, given back (free5GC's go-upf
    /// echoes the UE address).
    Echo,
    /// Something the UP function allocated (CHOOSE, CHV4/CHV6), or that differs from what
    /// the SMF sent: what the table asks a Created PDR for.
    Allocation,
}

fn created_kind(c: &CreatedPdr, asked: Option<&CreatePdr>) -> CreatedKind {
    if c.local_fteid.is_none() && c.ue_ip_address.is_empty() {
        return CreatedKind::Bare;
    }
    let Some(p) = asked else {
        return CreatedKind::Allocation;
    };
    let fteid_echoed = match (c.local_fteid, p.pdi.local_fteid) {
        (None, _) => true,
        (Some(got), Some(sent)) => {
            sent.choose.is_none()
                && got.teid == sent.teid
                && got.ipv4.is_none_or(|a| sent.ipv4 == Some(a))
                && got.ipv6.is_none_or(|a| sent.ipv6 == Some(a))
        }
        (Some(_), None) => false,
    };
    // Pre-Rel-16 SMFs ask with the unspecified address (docs/interop.md).
    let chosen_by_smf = |u: &UeIpAddress| {
        !u.choose_v4
            && !u.choose_v6
            && !u.ipv4.is_some_and(|a| a.is_unspecified())
            && !u.ipv6.is_some_and(|a| a.is_unspecified())
    };
    let ue_echoed = c.ue_ip_address.iter().all(|got| {
        p.pdi.ue_ip_address.iter().any(|sent| {
            chosen_by_smf(sent)
                && (got.ipv4.is_some() || got.ipv6.is_some())
                && got.ipv4.is_none_or(|a| sent.ipv4 == Some(a))
                && got.ipv6.is_none_or(|a| sent.ipv6 == Some(a))
        })
    });
    if fteid_echoed && ue_echoed {
        CreatedKind::Echo
    } else {
        CreatedKind::Allocation
    }
}

/// How many Created PDRs of `response` are of `kind`, judged against `request`.
fn count_created(request: Option<&Msg>, response: &Msg, kind: CreatedKind) -> usize {
    let asked = request.map(create_pdrs).unwrap_or(&[]);
    created_pdrs(response)
        .unwrap_or(&[])
        .iter()
        .filter(|c| created_kind(c, asked.iter().find(|p| p.pdr_id == c.pdr_id)) == kind)
        .count()
}

/// A response compared with the original one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// What the UPF under test answered otherwise: a mismatch.
    pub differences: Vec<String>,
    /// Differences that are not mismatches (Created PDRs echoing what the SMF chose).
    pub informational: Vec<String>,
}

/// The differences between the response of the UPF under test and the original one.
pub fn compare(request: &[u8], original: Option<&[u8]>, ours: &[u8]) -> Vec<String> {
    compare_responses(request, request, original, ours).differences
}

/// Compare `ours`, the answer to `sent`, with `original`, the recorded UPF's answer to
/// `original_request` (the capture's octets of the same request, before rewriting).
pub fn compare_responses(
    original_request: &[u8],
    sent: &[u8],
    original: Option<&[u8]>,
    ours: &[u8],
) -> Comparison {
    let mut c = Comparison::default();
    compare_into(original_request, sent, original, ours, &mut c);
    c
}

fn compare_into(
    original_request: &[u8],
    request: &[u8],
    original: Option<&[u8]>,
    ours: &[u8],
    c: &mut Comparison,
) {
    let d = &mut c.differences;
    let req_type = request.get(1).copied().unwrap_or(0);
    let ours = match Msg::parse(ours) {
        Ok((_, m)) => m,
        Err(e) => {
            d.push(format!("response does not decode: {e}"));
            return;
        }
    };
    let orig = original.and_then(|o| Msg::parse(o).ok().map(|(_, m)| m));
    let expected_type = orig.as_ref().map(Msg::message_type).unwrap_or(req_type + 1);
    if ours.message_type() != expected_type {
        d.push(format!(
            "{}, original {}",
            type_name(ours.message_type()),
            type_name(expected_type)
        ));
        return;
    }
    let Some(orig) = orig else { return };
    if req_type == mt::HEARTBEAT_REQUEST {
        return;
    }
    let (c_ours, c_orig) = (cause_of(&ours), cause_of(&orig));
    if c_ours != c_orig {
        d.push(format!(
            "Cause {}, original {}",
            cause_text(c_ours),
            cause_text(c_orig)
        ));
    }
    // Created PDRs are compared by those that report an allocation. TS 29.244 Table
    // 7.5.3.1-1 asks for a Created PDR only when the UP function allocated an F-TEID or
    // a UE address; older Open5GS UPFs also return one with the PDR ID alone for every
    // PDR, and free5GC's go-upf one echoing the UE address the SMF chose. free5GC's SMF
    // reads no Created PDR (it picks F-TEIDs and UE addresses itself), so neither kind
    // is a mismatch (docs/interop.md); an echo is reported as informational.
    if created_pdrs(&ours).is_some() && created_pdrs(&orig).is_some() {
        let sent_req = Msg::parse(request).ok().map(|(_, m)| m);
        let orig_req = Msg::parse(original_request).ok().map(|(_, m)| m);
        let a = count_created(sent_req.as_ref(), &ours, CreatedKind::Allocation);
        let b = count_created(orig_req.as_ref(), &orig, CreatedKind::Allocation);
        if a != b {
            d.push(format!("{a} Created PDRs with an allocation, original {b}"));
        }
        let a = count_created(sent_req.as_ref(), &ours, CreatedKind::Echo);
        let b = count_created(orig_req.as_ref(), &orig, CreatedKind::Echo);
        if a != b {
            c.informational.push(format!(
                "{a} Created PDRs echo the F-TEID or UE address the SMF chose, original {b} (TS 29.244 Table 7.5.3.1-1 asks for none): informational"
            ));
        }
    }
    if c_ours.is_some_and(CauseValue::is_acceptance) {
        if let Ok((_, req)) = Msg::parse(request) {
            let created = created_pdrs(&ours).unwrap_or(&[]);
            for p in create_pdrs(&req) {
                let c = created.iter().find(|c| c.pdr_id == p.pdr_id);
                if p.pdi.local_fteid.is_some_and(|f| f.choose.is_some()) {
                    let ok = c.and_then(|c| c.local_fteid).is_some_and(|f| {
                        f.teid.is_some() && (f.ipv4.is_some() || f.ipv6.is_some())
                    });
                    if !ok {
                        d.push(format!(
                            "PDR {} asked CHOOSE: no allocated F-TEID in a Created PDR",
                            p.pdr_id
                        ));
                    }
                }
                for u in &p.pdi.ue_ip_address {
                    let got = c.map(|c| c.ue_ip_address.as_slice()).unwrap_or(&[]);
                    // Pre-Rel-16 SMFs ask with the unspecified address (docs/interop.md).
                    let choose_v4 = u.choose_v4 || u.ipv4.is_some_and(|a| a.is_unspecified());
                    let choose_v6 = u.choose_v6 || u.ipv6.is_some_and(|a| a.is_unspecified());
                    if choose_v4 && !got.iter().any(|g| g.ipv4.is_some()) {
                        d.push(format!(
                            "PDR {} asked CHV4: no UE IPv4 address in a Created PDR",
                            p.pdr_id
                        ));
                    }
                    if choose_v6 && !got.iter().any(|g| g.ipv6.is_some()) {
                        d.push(format!(
                            "PDR {} asked CHV6: no UE IPv6 address in a Created PDR",
                            p.pdr_id
                        ));
                    }
                }
            }
        }
    }
}

/// Replay `plan` against `cfg.upf`. Calls `each` with every outcome as it is known.
pub async fn replay(
    plan: &Plan,
    cfg: &ReplayConfig,
    mut each: impl FnMut(&Outcome),
) -> io::Result<ReplayReport> {
    let mut notes = plan.notes.clone();
    let mut map = Mapper::default();
    for a in &cfg.upf_n3 {
        match a {
            IpAddr::V4(v) => map.n3_v4 = Some(*v),
            IpAddr::V6(v) => map.n3_v6 = Some(*v),
        }
    }
    map.n3_from_cli = !cfg.upf_n3.is_empty();
    let recovery = n4::recovery_time_stamp_now();
    let timers = Timers {
        t1: cfg.timeout,
        n1: cfg.retransmissions,
    };
    for shared in plan.shared_smfs() {
        let upfs: Vec<String> = shared.upfs.iter().map(|u| u.to_string()).collect();
        notes.push(format!(
            "SMF {} sends to {} UPFs of the capture ({}), all replayed against the one UPF under test: it sees that SMF associate again for each; replay one UPF at a time (--capture-upf)",
            shared.smf,
            upfs.len(),
            upfs.join(", ")
        ));
    }
    let smfs = plan.smfs();
    let mut sockets: HashMap<SocketAddr, (Ipv4Addr, N4)> = HashMap::new();
    let mut locals = Vec::new();
    for (k, smf) in smfs.iter().enumerate() {
        let ip = Ipv4Addr::from(u32::from(cfg.local_base).wrapping_add(k as u32));
        // Answer heartbeats with the Recovery Time Stamp this SMF announced in its
        // Association Setup Request: another one would tell the UPF that we restarted.
        let recovery = plan.recovery_time_stamp(*smf).unwrap_or(recovery);
        let node = NodeId::Ipv4(ip);
        let n4 = match N4::bind(
            SocketAddr::new(IpAddr::V4(ip), cfg.local_port),
            cfg.upf,
            node.clone(),
            recovery,
            timers,
        )
        .await
        {
            Ok(s) => s,
            Err(e) if cfg.local_port != 0 => {
                notes.push(format!(
                    "{ip}:{}: {e}: using any port instead",
                    cfg.local_port
                ));
                N4::bind(
                    SocketAddr::new(IpAddr::V4(ip), 0),
                    cfg.upf,
                    node,
                    recovery,
                    timers,
                )
                .await?
            }
            Err(e) => return Err(e),
        };
        locals.push((*smf, n4.local_addr()?));
        sockets.insert(*smf, (ip, n4));
    }
    // SMFs whose association was set up before the capture started (or by the UPF):
    // we set one up ourselves before their first request that needs one.
    let mut need_association: HashSet<SocketAddr> = HashSet::new();
    let mut seen_setup: HashSet<SocketAddr> = HashSet::new();
    // Sessions the capture establishes: (recorded UPF, its UP SEID) -> frame.
    let mut established: HashMap<(SocketAddr, u64), usize> = HashMap::new();
    for t in &plan.transactions {
        match t.header.message_type {
            mt::ASSOCIATION_SETUP_REQUEST => {
                seen_setup.insert(t.smf);
            }
            mt::SESSION_ESTABLISHMENT_REQUEST
            | mt::SESSION_MODIFICATION_REQUEST
            | mt::SESSION_DELETION_REQUEST
            | mt::ASSOCIATION_UPDATE_REQUEST
            | mt::ASSOCIATION_RELEASE_REQUEST
            | mt::SESSION_SET_DELETION_REQUEST
                if !seen_setup.contains(&t.smf) =>
            {
                need_association.insert(t.smf);
            }
            _ => {}
        }
        if t.header.message_type == mt::SESSION_ESTABLISHMENT_REQUEST {
            let up = t.response.as_ref().and_then(|(_, b)| match Msg::parse(b) {
                Ok((_, Msg::SessionEstablishmentResponse(r))) => r.up_fseid.map(|f| f.seid),
                _ => None,
            });
            if let Some(up) = up {
                established.entry((t.upf, up)).or_insert(t.frame);
            }
        }
    }

    let mut outcomes = Vec::new();
    let mut summary = Summary::default();
    // Responses whose Created PDRs echo what the SMF chose, unlike the original's.
    let mut echo_frames: Vec<usize> = Vec::new();
    for tx in &plan.transactions {
        let Some((local_ip, n4)) = sockets.get(&tx.smf) else {
            continue;
        };
        if need_association.remove(&tx.smf) {
            let r = associate(n4, *local_ip).await;
            if let Some(n3) = r.1 {
                learn_n3(&mut map, &n3);
            }
            notes.push(format!(
                "{}: the capture has no Association Setup Request from this SMF before its sessions: sent one from {}: {}",
                tx.smf, local_ip, r.0
            ));
        }
        summary.requests += 1;
        let unknown_session = tx
            .header
            .seid
            .filter(|s| *s != 0 && tx.header.message_type != mt::SESSION_ESTABLISHMENT_REQUEST)
            .filter(|s| !map.seids.contains_key(&(tx.upf, *s)));
        let mut o = Outcome {
            frame: tx.frame,
            message_type: tx.header.message_type,
            smf: tx.smf,
            upf: tx.upf,
            local: n4.local_addr()?,
            sequence: tx.header.sequence,
            seid: None,
            verdict: Verdict::Matched,
            notes: Vec::new(),
        };
        if let Some(s) = unknown_session {
            let why = match established.get(&(tx.upf, s)) {
                Some(f) if *f < tx.frame => format!(
                    "its session (UP SEID 0x{s:x}) was established at frame {f}, which the UPF under test did not accept"
                ),
                _ => format!(
                    "its session (UP SEID 0x{s:x}) was established before the capture started"
                ),
            };
            o.seid = Some((s, s));
            summary.not_replayable += 1;
            o.verdict = Verdict::NotReplayable(why);
            each(&o);
            outcomes.push(o);
            continue;
        }
        let Rewritten {
            bytes,
            seid,
            changes,
        } = match rewrite(tx, *local_ip, &mut map) {
            Ok(x) => x,
            // Cannot happen for a plan made from decoded messages; send as captured.
            Err(e) => Rewritten {
                bytes: tx.request.clone(),
                seid: None,
                changes: vec![format!("not rewritten: {e}")],
            },
        };
        o.seid = seid;
        o.notes = changes;
        match n4.transact(&bytes).await {
            Ok(resp) => {
                let orig = tx.response.as_ref().map(|(_, b)| b.as_slice());
                let Comparison {
                    differences: diffs,
                    informational,
                } = compare_responses(&tx.request, &bytes, orig, &resp.bytes);
                learn(&mut map, tx, &bytes, orig, &resp.bytes, n4);
                if tx.response.is_none() {
                    o.notes
                        .push("no original response in the capture: compared on type only".into());
                }
                if !informational.is_empty() {
                    echo_frames.push(tx.frame);
                    o.notes.extend(informational);
                }
                if diffs.is_empty() {
                    summary.matched += 1;
                } else {
                    summary.mismatched += 1;
                    o.verdict = Verdict::Mismatched(diffs);
                }
            }
            Err(TxError::Timeout { .. }) => {
                summary.timed_out += 1;
                o.verdict = Verdict::TimedOut;
            }
            Err(e) => return Err(io::Error::other(e.to_string())),
        }
        each(&o);
        outcomes.push(o);
    }
    if !echo_frames.is_empty() {
        let frames: Vec<String> = echo_frames.iter().map(|f| f.to_string()).collect();
        let (n, differ, frame) = match echo_frames.len() {
            1 => (1, "response differs", "frame"),
            n => (n, "responses differ", "frames"),
        };
        notes.push(format!(
            "{n} {differ} from the original in Created PDRs that echo the F-TEID or UE address the SMF chose ({frame} {}): informational, not a mismatch (TS 29.244 Table 7.5.3.1-1 asks for a Created PDR only for what the UP function allocated)",
            frames.join(", ")
        ));
    }
    let mut seids: Vec<(SocketAddr, u64, u64)> =
        map.seids.iter().map(|((u, s), n)| (*u, *s, *n)).collect();
    seids.sort();
    let mut fteids: Vec<(IpAddr, u32, FTeid)> =
        map.fteids.iter().map(|((a, t), f)| (*a, *t, *f)).collect();
    fteids.sort_by_key(|(a, t, _)| (*a, *t));
    Ok(ReplayReport {
        outcomes,
        locals,
        seids,
        fteids,
        notes,
        summary,
    })
}

/// Replay each UPF's part of `plan` in turn ([`Plan::upfs`], [`Plan::for_upf`]), each
/// against a fresh UPF under test: `fresh(upf)` starts one for the capture's `upf` and
/// gives its address and a guard, dropped when that part is done. Each part's SMFs
/// replay from `cfg.local_base` again; nothing learnt in one part carries into the next.
pub async fn replay_each_upf<G, F, Fut>(
    plan: &Plan,
    cfg: &ReplayConfig,
    mut fresh: F,
    mut each: impl FnMut(&Outcome),
) -> io::Result<Vec<UpfReport>>
where
    F: FnMut(SocketAddr) -> Fut,
    Fut: std::future::Future<Output = io::Result<(SocketAddr, G)>>,
{
    let mut reports = Vec::new();
    for upf in plan.upfs() {
        let (under_test, guard) = fresh(upf).await?;
        let mut c = cfg.clone();
        c.upf = under_test;
        let report = replay(&plan.for_upf(upf), &c, &mut each).await?;
        drop(guard);
        reports.push(UpfReport {
            upf,
            under_test,
            report,
        });
    }
    Ok(reports)
}

fn learn_n3(map: &mut Mapper, n3: &[pfcp::ie::UserPlaneIpResourceInformation]) {
    if map.n3_from_cli {
        return;
    }
    if map.n3_v4.is_none() {
        map.n3_v4 = n3.iter().find_map(|u| u.ipv4);
    }
    if map.n3_v6.is_none() {
        map.n3_v6 = n3.iter().find_map(|u| u.ipv6);
    }
}

/// Our own Association Setup, for an SMF whose association the capture does not show.
async fn associate(
    n4: &N4,
    local: Ipv4Addr,
) -> (
    String,
    Option<Vec<pfcp::ie::UserPlaneIpResourceInformation>>,
) {
    let m = Message {
        header: HeaderRepr::node(mt::ASSOCIATION_SETUP_REQUEST, n4.next_sequence()),
        ies: vec![
            Ie::NodeId(NodeId::Ipv4(local).into()),
            Ie::RecoveryTimeStamp(n4.recovery_time_stamp()),
            Ie::CpFunctionFeatures(pfcp::ie::Flags(vec![0])),
        ],
    };
    match n4.transact(&m.emit()).await {
        Ok(r) => match Msg::parse(&r.bytes) {
            Ok((_, Msg::AssociationSetupResponse(a))) => (
                format!("Cause {}", cause_text(Some(a.cause))),
                Some(a.user_plane_ip_resource_information),
            ),
            Ok((h, _)) => (format!("answered with {}", type_name(h.message_type)), None),
            Err(e) => (format!("response does not decode: {e}"), None),
        },
        Err(e) => (e.to_string(), None),
    }
}

/// Learn SEIDs, F-TEIDs and UE addresses from the original and the new response.
fn learn(
    map: &mut Mapper,
    tx: &Transaction,
    sent: &[u8],
    original: Option<&[u8]>,
    ours: &[u8],
    n4: &N4,
) {
    let Ok((_, ours)) = Msg::parse(ours) else {
        return;
    };
    if let Msg::AssociationSetupResponse(a) = &ours {
        learn_n3(map, &a.user_plane_ip_resource_information);
    }
    if let (Ok((_, Msg::SessionEstablishmentRequest(req))), Msg::SessionEstablishmentResponse(r)) =
        (Msg::parse(sent), &ours)
    {
        if let Some(f) = r.up_fseid {
            n4.bind_session(req.cp_fseid.seid, f.seid);
        }
    }
    let Some(Ok((_, orig))) = original.map(Msg::parse) else {
        return;
    };
    if let (Msg::SessionEstablishmentResponse(o), Msg::SessionEstablishmentResponse(n)) =
        (&orig, &ours)
    {
        if let (Some(fo), Some(fn_)) = (o.up_fseid, n.up_fseid) {
            map.seids.insert((tx.upf, fo.seid), fn_.seid);
        }
    }
    if let (Some(o), Some(n)) = (created_pdrs(&orig), created_pdrs(&ours)) {
        for c in o {
            if let Some(m) = n.iter().find(|m| m.pdr_id == c.pdr_id) {
                map.learn_allocation(
                    (c.local_fteid, &c.ue_ip_address),
                    (m.local_fteid, &m.ue_ip_address),
                );
            }
        }
    }
    let (o, n) = (
        created_traffic_endpoints(&orig),
        created_traffic_endpoints(&ours),
    );
    for c in o {
        if let Some(m) = n
            .iter()
            .find(|m| m.traffic_endpoint_id == c.traffic_endpoint_id)
        {
            map.learn_allocation(
                (c.local_fteid, &c.ue_ip_address),
                (m.local_fteid, &m.ue_ip_address),
            );
        }
    }
}

#[derive(clap::Args, Debug)]
pub struct Args {
    /// A pcap or pcapng file with N4 (PFCP, UDP 8805) traffic.
    pub file: PathBuf,
    /// The UPF under test: IP or IP:PORT, port 8805 if not given.
    #[arg(long, value_parser = crate::smf::cli::pfcp_addr)]
    pub upf: SocketAddr,
    /// Local address for the first SMF of the capture; the next SMFs count up from it.
    #[arg(long, default_value = "127.0.0.101")]
    pub local_base: Ipv4Addr,
    /// Local PFCP port (0: any; if taken, any is used).
    #[arg(long, default_value_t = PFCP_PORT)]
    pub local_port: u16,
    /// Milliseconds to wait for each response before sending the request once more.
    #[arg(long, default_value_t = 2000)]
    pub timeout_ms: u64,
    /// Retransmissions of a request without a response.
    #[arg(long, default_value_t = 1)]
    pub retransmissions: u32,
    /// N3 address of the UPF under test, for F-TEIDs the SMF picked itself (repeat for
    /// IPv4 and IPv6).
    #[arg(long)]
    pub upf_n3: Vec<IpAddr>,
    /// Replay only the requests to this UPF of the capture (IP, or IP:PORT when several
    /// UPFs share an IP): the address its SMFs sent to.
    ///
    /// A capture may hold several UPFs: an SMF with an uplink classifier and its anchors,
    /// SMFs of several slices each associated with every UPF, or a V-UPF and an H-UPF. When
    /// every SMF of the capture talks to one UPF only, all are replayed against the UPF
    /// under test at once (each SMF from its own local address). When an SMF talks to
    /// several, one UPF under test cannot answer for them at once (that SMF sets up its
    /// association again for each, or is refused as a takeover when its FQDN Node ID comes
    /// from several addresses; one PDU session's sessions sit side by side): only the
    /// first UPF of the capture is replayed, a note says which and gives the --capture-upf
    /// of each other one; replay each against a fresh UPF.
    /// With several UPFs, a `replay of UPF ADDR:` line counts each UPF's requests before
    /// the closing `replay:` line.
    #[arg(long, value_name = "ADDR")]
    pub capture_upf: Option<CaptureUpf>,
    /// Also print matched requests and how each request was rewritten.
    #[arg(long, short)]
    pub verbose: bool,
}

/// The part of `whole` to replay, and what to say about the choice.
fn choose_part(whole: Plan, sel: Option<&CaptureUpf>) -> anyhow::Result<(Plan, Vec<String>)> {
    let upfs = whole.upfs();
    let count = |u: SocketAddr| whole.transactions.iter().filter(|t| t.upf == u).count();
    let others = |chosen: SocketAddr| {
        upfs.iter()
            .filter(|u| **u != chosen)
            .map(|u| format!("--capture-upf {u} ({} requests)", count(*u)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if let Some(sel) = sel {
        let upf = whole.find_upf(sel).map_err(anyhow::Error::msg)?;
        let mut notes = Vec::new();
        if upfs.len() > 1 {
            notes.push(format!(
                "replaying the {} requests to UPF {upf} only, of the capture's {} UPFs; the {}: {}",
                count(upf),
                upfs.len(),
                if upfs.len() == 2 { "other" } else { "others" },
                others(upf)
            ));
        }
        return Ok((whole.for_upf(upf), notes));
    }
    let shared = whole.shared_smfs();
    if upfs.len() < 2 || shared.is_empty() {
        return Ok((whole, Vec::new()));
    }
    let first = upfs[0];
    let who: Vec<String> = shared
        .iter()
        .map(|s| {
            let u: Vec<String> = s.upfs.iter().map(|u| u.to_string()).collect();
            format!("SMF {} sends to {}", s.smf, u.join(", "))
        })
        .collect();
    let notes = vec![
        format!(
            "the capture has {} UPFs and {}: one UPF under test cannot answer for them at once",
            upfs.len(),
            who.join("; ")
        ),
        format!(
            "replaying the first UPF, {first} ({} requests); for the {}, run again against a fresh UPF with {}",
            count(first),
            if upfs.len() == 2 { "other" } else { "others" },
            others(first)
        ),
    ];
    Ok((whole.for_upf(first), notes))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let whole =
        Plan::from_file(&args.file).with_context(|| format!("reading {}", args.file.display()))?;
    let several_upfs = whole.upfs().len() > 1;
    let (plan, choice) = choose_part(whole, args.capture_upf.as_ref())?;
    {
        let mut out = io::stdout().lock();
        for n in &choice {
            writeln!(out, "note: {n}")?;
        }
    }
    let mut cfg = ReplayConfig::new(args.upf);
    cfg.local_base = args.local_base;
    cfg.local_port = args.local_port;
    cfg.timeout = Duration::from_millis(args.timeout_ms.max(1));
    cfg.retransmissions = args.retransmissions;
    cfg.upf_n3 = args.upf_n3.clone();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let stdout = io::stdout();
    let verbose = args.verbose;
    let report = rt.block_on(replay(&plan, &cfg, |o| {
        let mut out = stdout.lock();
        if verbose || o.verdict != Verdict::Matched {
            let _ = writeln!(out, "{}", o.line());
        }
        if verbose {
            for n in &o.notes {
                let _ = writeln!(out, "  {n}");
            }
        }
    }))?;
    let mut out = stdout.lock();
    if plan.duplicates > 0 {
        writeln!(
            out,
            "note: {} repeated requests with identical octets replayed once",
            plan.duplicates
        )?;
    }
    for n in &report.notes {
        writeln!(out, "note: {n}")?;
    }
    if several_upfs {
        for s in report.per_upf() {
            writeln!(out, "{s}")?;
        }
    }
    writeln!(out, "{}", report.summary)?;
    let s = report.summary;
    Ok(if s.mismatched == 0 && s.timed_out == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
