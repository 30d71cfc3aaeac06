//! The session model: a PFCP session's rules as the UP function keeps them (TS 29.244
//! clause 5.2), resolved (CHOOSE F-TEIDs and UE addresses allocated) and checked.
//! Knows nothing of BPF: `compile` turns it into fast-path entries.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex};

use ipnet::IpNet;
use pfcp::ie::{
    apply_action, Bitrate, FSeid, Flags, GprsTimer, NodeId, OuterHeaderCreation,
    OuterHeaderRemoval, SdfFilter,
};
use pfcp::msg::{CreateUrr, UpdateUrr};
use serde::{Deserialize, Serialize};
pub use smallvec::{smallvec, SmallVec};
pub use thin_vec::{thin_vec, ThinVec};

/// A Network Instance (clause 8.2.4) as text. Every PDI and FAR of every session names
/// one and a UPF serves a few, so each distinct name is kept once and shared.
pub type NetworkInstance = Arc<str>;

/// Distinct names kept; past that (a peer sending ever new names) each gets its own copy,
/// so the table cannot grow without bound.
const NETWORK_INSTANCES_KEPT: usize = 1024;

static NETWORK_INSTANCES: Mutex<Option<HashSet<Arc<str>>>> = Mutex::new(None);

/// The shared [`NetworkInstance`] for `text`.
pub fn network_instance(text: &str) -> NetworkInstance {
    let mut kept = NETWORK_INSTANCES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let kept = kept.get_or_insert_with(HashSet::new);
    if let Some(n) = kept.get(text) {
        return n.clone();
    }
    let n: Arc<str> = Arc::from(text);
    if kept.len() < NETWORK_INSTANCES_KEPT {
        kept.insert(n.clone());
    }
    n
}

/// The rules of one kind in a session, by ID: a sorted vector, because a session holds a
/// handful of each and a tree or hash map would cost kilobytes per session at a million
/// sessions. A `ThinVec`: one word in the session instead of three (a session has seven
/// of these, three usually empty), serialized as the `Vec` it replaced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleMap<K, V> {
    entries: ThinVec<(K, V)>,
}

impl<K, V> Default for RuleMap<K, V> {
    fn default() -> Self {
        RuleMap {
            entries: ThinVec::new(),
        }
    }
}

impl<K: Ord + Copy, V> RuleMap<K, V> {
    pub fn new() -> Self {
        Self::default()
    }
    fn find(&self, k: &K) -> Result<usize, usize> {
        self.entries.binary_search_by(|(x, _)| x.cmp(k))
    }
    pub fn get(&self, k: &K) -> Option<&V> {
        self.find(k).ok().map(|i| &self.entries[i].1)
    }
    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.find(k).ok().map(|i| &mut self.entries[i].1)
    }
    pub fn contains_key(&self, k: &K) -> bool {
        self.find(k).is_ok()
    }
    /// Insert or replace; returns the value replaced.
    pub fn insert(&mut self, k: K, v: V) -> Option<V> {
        match self.find(&k) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, v)),
            Err(i) => {
                // Grow one at a time: sessions hold few rules and spare capacity is paid
                // for a million times over.
                self.entries.reserve_exact(1);
                self.entries.insert(i, (k, v));
                None
            }
        }
    }
    pub fn remove(&mut self, k: &K) -> Option<V> {
        self.find(k).ok().map(|i| self.entries.remove(i).1)
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    pub fn keys(&self) -> impl Iterator<Item = &K> {
        self.entries.iter().map(|(k, _)| k)
    }
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.entries.iter().map(|(_, v)| v)
    }
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, v)| v)
    }
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(k, v)| (k, v))
    }
    pub fn retain(&mut self, mut f: impl FnMut(&K, &mut V) -> bool) {
        self.entries.retain_mut(|(k, v)| f(k, v));
        self.entries.shrink_to_fit();
    }
}

/// Interface values (Source / Destination Interface, clauses 8.2.2 and 8.2.24).
pub mod interface {
    pub const ACCESS: u8 = 0;
    pub const CORE: u8 = 1;
    pub const SGI_LAN: u8 = 2;
    pub const CP_FUNCTION: u8 = 3;
    pub const VN_INTERNAL: u8 = 4;
}

/// A local F-TEID as allocated or claimed: TEID and the UP function's address(es).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct LocalFteid {
    pub teid: u32,
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
}

impl LocalFteid {
    pub fn to_ie(self) -> pfcp::ie::FTeid {
        pfcp::ie::FTeid::new(self.teid, self.ipv4, self.ipv6)
    }
}

/// A UE address in a PDI (clause 8.2.62), resolved if it was to be chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct UeIp {
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    /// IPv6 prefix length (IP6PL) when a prefix rather than an address is given.
    pub ipv6_prefix_len: Option<u8>,
    /// S/D = 1: the address is the destination (a downlink PDI).
    pub is_destination: bool,
}

impl UeIp {
    pub fn addrs(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.ipv4
            .map(IpAddr::V4)
            .into_iter()
            .chain(self.ipv6.map(IpAddr::V6))
    }
}

/// Packet Detection Information, Table 7.5.2.2-2.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Pdi {
    pub source_interface: u8,
    pub local_fteid: Option<LocalFteid>,
    #[serde(with = "crate::state::ni_opt")]
    pub network_instance: Option<NetworkInstance>,
    // ThinVec: one word each, and no allocation while empty (most of these usually
    // are): two PDRs per session, a million sessions (docs/benchmarks.md, heap).
    pub ue_ips: ThinVec<UeIp>,
    pub traffic_endpoint_ids: ThinVec<u8>,
    #[serde(with = "crate::state::wire_seq")]
    pub sdf_filters: ThinVec<SdfFilter>,
    pub application_id: Option<String>,
    pub qfis: ThinVec<u8>,
    pub framed_routes: ThinVec<IpNet>,
    pub framed_routing: Option<u32>,
    pub source_interface_type: Option<u8>,
}

/// Packet Detection Rule (clause 5.2.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pdr {
    pub id: u16,
    /// Lower value = higher precedence; a PDR sent without one gets `u32::MAX`.
    pub precedence: u32,
    pub pdi: Pdi,
    #[serde(with = "crate::state::wire_opt")]
    pub outer_header_removal: Option<OuterHeaderRemoval>,
    pub far_id: Option<u32>,
    // Inline up to two (16 octets, no allocation): a PDR names one or two of each.
    pub urr_ids: SmallVec<[u32; 2]>,
    pub qer_ids: SmallVec<[u32; 2]>,
    pub activation_time: Option<u32>,
    pub deactivation_time: Option<u32>,
}

/// The Apply Action of a FAR (clause 8.2.26) as flags the data path reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ApplyAction {
    pub drop: bool,
    pub forw: bool,
    pub buff: bool,
    pub nocp: bool,
    pub dupl: bool,
    pub bdpn: bool,
    pub ddpn: bool,
}

impl ApplyAction {
    pub fn from_flags(f: &Flags) -> Self {
        ApplyAction {
            drop: f.get(apply_action::DROP),
            forw: f.get(apply_action::FORW),
            buff: f.get(apply_action::BUFF),
            nocp: f.get(apply_action::NOCP),
            dupl: f.get(apply_action::DUPL),
            bdpn: f.get(apply_action::BDPN),
            ddpn: f.get(apply_action::DDPN),
        }
    }
}

/// Forwarding Parameters, Table 7.5.2.3-2.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Forwarding {
    pub destination_interface: u8,
    #[serde(with = "crate::state::ni_opt")]
    pub network_instance: Option<NetworkInstance>,
    #[serde(with = "crate::state::wire_opt")]
    pub outer_header_creation: Option<OuterHeaderCreation>,
    pub transport_level_marking: Option<u16>,
    pub linked_traffic_endpoint: Option<u8>,
    pub destination_interface_type: Option<u8>,
    /// Redirect Information (clause 8.2.20, checked by crate::redirect): the PDR's
    /// uplink HTTP requests are answered with a redirection, nothing is forwarded. Kept
    /// in the state by its own record (`state::Record::Redirects`), so that states
    /// written before it load as they are.
    #[serde(skip)]
    pub redirect: Option<pfcp::ie::RedirectInformation>,
}

/// Forwarding Action Rule (clause 5.2.1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Far {
    pub id: u32,
    pub action: ApplyAction,
    pub forwarding: Option<Forwarding>,
    pub bar_id: Option<u8>,
}

/// QoS Enforcement Rule (clause 5.2.1, Table 7.5.2.5-1).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Qer {
    pub id: u32,
    pub correlation_id: Option<u32>,
    pub gate_ul_open: bool,
    pub gate_dl_open: bool,
    #[serde(with = "crate::state::wire_opt")]
    pub mbr: Option<Bitrate>,
    #[serde(with = "crate::state::wire_opt")]
    pub gbr: Option<Bitrate>,
    pub qfi: Option<u8>,
    pub rqi: bool,
    pub ppi: Option<u8>,
    pub averaging_window: Option<u32>,
}

impl Qer {
    /// Gate Status (clause 8.2.7): UL gate in bits 4-3, DL gate in bits 2-1; 0 = open.
    pub fn set_gate(&mut self, gate_status: u8) {
        self.gate_ul_open = (gate_status >> 2) & 0x03 == 0;
        self.gate_dl_open = gate_status & 0x03 == 0;
    }
}

/// Usage Reporting Rule: the configuration as the CP function sent it (Create URR, merged
/// with later Update URRs). Measurement state lives in the reporting module.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Urr {
    pub id: u32,
    pub rule: UrrRule,
}

/// What of a Create URR (Table 7.5.2.4-1) this UP function acts on. Only these IEs are
/// kept: a million sessions' URRs are memory, and a whole Create URR (every optional IE)
/// is 600 octets where these are a third of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UrrRule {
    #[serde(with = "crate::state::wire")]
    pub measurement_method: Flags,
    #[serde(with = "crate::state::wire")]
    pub reporting_triggers: Flags,
    pub measurement_period: Option<u32>,
    pub volume_threshold: Option<VolumeLimit>,
    pub volume_quota: Option<VolumeLimit>,
    pub time_threshold: Option<u32>,
    pub time_quota: Option<u32>,
    pub quota_holding_time: Option<u32>,
    pub inactivity_detection_time: Option<u32>,
    pub linked_urr_ids: Vec<u32>,
    pub far_id_for_quota_action: Option<u32>,
}

/// A volume threshold or quota (clauses 8.2.13, 8.2.50) in octets: what of the Volume
/// IE a URR acts on (not its spare bits: a URR is kept for every session).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct VolumeLimit {
    pub total: Option<u64>,
    pub uplink: Option<u64>,
    pub downlink: Option<u64>,
}

impl From<pfcp::ie::Volume> for VolumeLimit {
    fn from(v: pfcp::ie::Volume) -> Self {
        VolumeLimit {
            total: v.total,
            uplink: v.uplink,
            downlink: v.downlink,
        }
    }
}

impl From<&CreateUrr> for UrrRule {
    fn from(c: &CreateUrr) -> Self {
        UrrRule {
            measurement_method: c.measurement_method.clone(),
            reporting_triggers: c.reporting_triggers.clone(),
            measurement_period: c.measurement_period,
            volume_threshold: c.volume_threshold.map(VolumeLimit::from),
            volume_quota: c.volume_quota.map(VolumeLimit::from),
            time_threshold: c.time_threshold,
            time_quota: c.time_quota,
            quota_holding_time: c.quota_holding_time,
            inactivity_detection_time: c.inactivity_detection_time,
            linked_urr_ids: c.linked_urr_ids.clone(),
            far_id_for_quota_action: c.far_id_for_quota_action,
        }
    }
}

impl Urr {
    pub fn new(c: &CreateUrr) -> Self {
        Urr {
            id: c.urr_id,
            rule: c.into(),
        }
    }

    /// Apply an Update URR: every IE present replaces the stored one (clause 7.5.4.4).
    pub fn update(&mut self, u: &UpdateUrr) {
        let r = &mut self.rule;
        macro_rules! take {
            ($($f:ident),*) => {$( if u.$f.is_some() { r.$f = u.$f.clone(); } )*};
        }
        if let Some(m) = &u.measurement_method {
            r.measurement_method = m.clone();
        }
        if let Some(t) = &u.reporting_triggers {
            r.reporting_triggers = t.clone();
        }
        if let Some(v) = u.volume_threshold {
            r.volume_threshold = Some(v.into());
        }
        if let Some(v) = u.volume_quota {
            r.volume_quota = Some(v.into());
        }
        take!(
            measurement_period,
            time_threshold,
            time_quota,
            quota_holding_time,
            inactivity_detection_time,
            far_id_for_quota_action
        );
        if !u.linked_urr_ids.is_empty() {
            r.linked_urr_ids = u.linked_urr_ids.clone();
        }
    }
}

/// Buffering Action Rule (clause 5.2.1, Tables 7.5.2.6-1 and 7.5.9.2-1).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Bar {
    pub id: u8,
    pub downlink_data_notification_delay: Option<u8>,
    pub suggested_buffering_packets_count: Option<u8>,
    #[serde(with = "crate::state::wire_opt")]
    pub dl_buffering_duration: Option<GprsTimer>,
    pub dl_buffering_suggested_packet_count: Option<u16>,
}

/// Traffic Endpoint (clause 5.2.1, Table 7.5.2.7-1): PDI parts shared by several PDRs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TrafficEndpoint {
    pub id: u8,
    pub local_fteid: Option<LocalFteid>,
    #[serde(with = "crate::state::ni_opt")]
    pub network_instance: Option<NetworkInstance>,
    pub ue_ips: Vec<UeIp>,
    pub qfis: Vec<u8>,
    pub framed_routes: Vec<IpNet>,
    pub source_interface_type: Option<u8>,
}

/// One PFCP session as installed (clause 5.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// The UP function's SEID (its F-SEID towards the CP function).
    pub up_seid: u64,
    #[serde(with = "crate::state::wire")]
    pub cp_fseid: FSeid,
    /// The CP function (association) that owns the session.
    #[serde(with = "crate::state::wire")]
    pub cp_node: NodeId,
    pub pdrs: RuleMap<u16, Pdr>,
    pub fars: RuleMap<u32, Far>,
    pub qers: RuleMap<u32, Qer>,
    pub urrs: RuleMap<u32, Urr>,
    pub bars: RuleMap<u8, Bar>,
    pub traffic_endpoints: RuleMap<u8, TrafficEndpoint>,
    /// CHOOSE ID -> the F-TEID allocated for it (clause 5.5.3).
    pub choose_ids: RuleMap<u8, LocalFteid>,
    /// TEIDs this session holds in the allocator.
    pub teids: ThinVec<u32>,
    /// UE addresses this session took from the pools (CHV4/CHV6).
    pub allocated_ue_ips: ThinVec<IpAddr>,
    pub pdn_type: Option<u8>,
    pub apn_dnn: Option<String>,
    /// FQ-CSIDs the CP function sent, for Session Set Deletion (clause 7.4.6).
    #[serde(with = "crate::state::wire_seq")]
    pub fq_csids: ThinVec<pfcp::ie::FqCsid>,
    pub user_plane_inactivity_timer: Option<u32>,
    /// PDRs with predefined rules active (clause 5.19): the rules and what each PDR had
    /// of its own. One word and no allocation for the sessions without (most).
    pub predefined: ThinVec<(u16, crate::predefined::Activated)>,
    /// Session Reporting Rules (clause 5.2.1: QoS monitoring per QoS flow, clause
    /// 5.24.2). Kept in the state by their own record (`state::Record::Srrs`), so that
    /// states written before them load as they are.
    #[serde(skip)]
    pub srrs: RuleMap<u8, Srr>,
}

/// Session Reporting Rule (clause 5.2.1, Create SRR Table 7.5.2.9-1): what the UP
/// function measures per session and reports in Session Reports; upfd measures QoS
/// flows' packet delays (crate::qos_monitoring).
#[derive(Debug, Clone, PartialEq)]
pub struct Srr {
    pub id: u8,
    /// The QoS flows to monitor, and how to report (Table 7.5.2.9-3).
    pub qos: Vec<pfcp::msg::QosMonitoringPerQosFlowControlInformation>,
}

impl Session {
    /// A session without rules or resources yet, owned by `cp_node`.
    pub fn new(up_seid: u64, cp_fseid: FSeid, cp_node: NodeId) -> Self {
        Session {
            up_seid,
            cp_fseid,
            cp_node,
            pdrs: RuleMap::new(),
            fars: RuleMap::new(),
            qers: RuleMap::new(),
            urrs: RuleMap::new(),
            bars: RuleMap::new(),
            traffic_endpoints: RuleMap::new(),
            choose_ids: RuleMap::new(),
            teids: ThinVec::new(),
            allocated_ue_ips: ThinVec::new(),
            pdn_type: None,
            apn_dnn: None,
            fq_csids: ThinVec::new(),
            user_plane_inactivity_timer: None,
            predefined: ThinVec::new(),
            srrs: RuleMap::new(),
        }
    }

    /// The PDRs in the order the data path evaluates them: precedence, then PDR ID.
    pub fn pdrs_by_precedence(&self) -> Vec<&Pdr> {
        let mut v: Vec<&Pdr> = self.pdrs.values().collect();
        v.sort_by_key(|p| (p.precedence, p.id));
        v
    }

    /// The effective PDI of a PDR: its own fields completed by its Traffic Endpoints.
    pub fn effective_pdi(&self, pdr: &Pdr) -> Pdi {
        let mut pdi = pdr.pdi.clone();
        for te_id in &pdr.pdi.traffic_endpoint_ids {
            if let Some(te) = self.traffic_endpoints.get(te_id) {
                if pdi.local_fteid.is_none() {
                    pdi.local_fteid = te.local_fteid;
                }
                if pdi.network_instance.is_none() {
                    pdi.network_instance = te.network_instance.clone();
                }
                pdi.ue_ips.extend(te.ue_ips.iter().copied());
                pdi.qfis.extend(te.qfis.iter().copied());
                pdi.framed_routes.extend(te.framed_routes.iter().copied());
                if pdi.source_interface_type.is_none() {
                    pdi.source_interface_type = te.source_interface_type;
                }
            }
        }
        pdi
    }
}

/// Parse a Framed-Route (RFC 2865 clause 5.22: "prefix[/len] [gateway [metric ...]]").
pub fn parse_framed_route(s: &str) -> Option<IpNet> {
    let first = s.split_whitespace().next()?;
    if let Ok(n) = first.parse::<IpNet>() {
        return Some(n.trunc());
    }
    // Classful form without a length: a bare address is a host route.
    first.parse::<IpAddr>().ok().map(IpNet::from)
}
