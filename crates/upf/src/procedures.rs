//! Session procedures (TS 29.244 clause 7.5): build a new session from an Establishment
//! Request, or a new version of a session from a Modification Request. Pure with respect
//! to the session: the caller commits the result only when it is accepted, so a request
//! that fails leaves the session exactly as it was (allocations made on the way are
//! returned by [`Resources::rollback`]).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use pfcp::ie::{types, CauseValue, FTeid, FailedRuleId, UeIpAddress};
use pfcp::msg::{
    CreateBar, CreateFar, CreatePdr, CreateQer, CreateTrafficEndpoint, CreateUrr,
    SessionEstablishmentRequest, SessionModificationRequest, UpdateFar, UpdatePdr, UpdateQer,
};

use crate::alloc::{TeidAllocator, UeIpPools};
use crate::fastpath::NiAddresses;
use crate::pfd::PfdTable;
use crate::predefined::Predefined;
use crate::rules::*;

/// Why a request is refused: the Cause, and the Offending IE or Failed Rule ID that goes
/// with it (clauses 7.5.3.1, 8.2.22, 8.2.80).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub cause: CauseValue,
    pub offending_ie: Option<u16>,
    pub failed_rule: Option<FailedRuleId>,
    /// For logs and tests.
    pub reason: String,
}

impl Rejection {
    pub fn rule(rule_type: u8, id: u32, reason: impl Into<String>) -> Self {
        Rejection {
            cause: CauseValue::RULE_CREATION_MODIFICATION_FAILURE,
            offending_ie: None,
            failed_rule: Some(FailedRuleId { rule_type, id }),
            reason: reason.into(),
        }
    }

    pub fn ie(cause: CauseValue, ie: u16, reason: impl Into<String>) -> Self {
        Rejection {
            cause,
            offending_ie: Some(ie),
            failed_rule: None,
            reason: reason.into(),
        }
    }

    pub fn cause(cause: CauseValue, reason: impl Into<String>) -> Self {
        Rejection {
            cause,
            offending_ie: None,
            failed_rule: None,
            reason: reason.into(),
        }
    }

    /// A decoding error of the request, with its Cause and Offending IE (clause 7.6).
    pub fn decode(e: &pfcp::Error) -> Self {
        Rejection {
            cause: e.cause(),
            offending_ie: e.offending_ie(),
            failed_rule: None,
            reason: e.to_string(),
        }
    }
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({}): {}",
            self.cause.0,
            self.cause.name(),
            self.reason
        )
    }
}

/// The UP function's GTP-U endpoint addresses, per interface and per Network Instance.
#[derive(Debug, Clone, Default)]
pub struct GtpuAddresses {
    /// N3 / S1-U / S5-U towards the access (Source Interface Access).
    pub access_v4: Option<Ipv4Addr>,
    pub access_v6: Option<Ipv6Addr>,
    /// N9 / S5-U / S8-U towards another UP function (Source Interface Core).
    pub core_v4: Option<Ipv4Addr>,
    pub core_v6: Option<Ipv6Addr>,
    /// Network Instances with addresses of their own (they replace the interface's on
    /// their side).
    pub network_instances: Vec<NiAddresses>,
}

impl GtpuAddresses {
    /// Ours for a PDI with `source_interface` (or a FAR towards the interface of that
    /// side) in Network Instance `ni`: the instance's addresses on that side if it has
    /// any, else the interface's (N9: else N3).
    pub fn ours(
        &self,
        source_interface: u8,
        ni: Option<&str>,
    ) -> (Option<Ipv4Addr>, Option<Ipv6Addr>) {
        let access = !matches!(source_interface, interface::CORE | interface::SGI_LAN);
        if let Some(x) = ni
            .and_then(|n| self.network_instances.iter().find(|x| x.name == n))
            .and_then(|x| x.side(access))
        {
            return x;
        }
        if access {
            (self.access_v4, self.access_v6)
        } else {
            (
                self.core_v4.or(self.access_v4),
                self.core_v6.or(self.access_v6),
            )
        }
    }
}

/// Per-session limits: requests beyond them are refused, never queued.
#[derive(Debug, Clone)]
pub struct Limits {
    pub max_pdrs: usize,
    pub max_fars: usize,
    pub max_qers: usize,
    pub max_urrs: usize,
    pub max_sdf_filters: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_pdrs: 64,
            max_fars: 64,
            max_qers: 32,
            max_urrs: 32,
            max_sdf_filters: 16,
        }
    }
}

/// What a session request did that TS 29.244 (or TS 29.212) does not allow and a real
/// CP function sends, accepted because not [`Resources::strict`] (docs/interop.md,
/// "Deliberate differences"). The N4 node counts the requests per kind and says once per
/// kind and peer what upfd made of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tolerated {
    /// An SDF filter with direction `in` (free5GC's SMF): it matches no packet, as in
    /// free5GC's UPF.
    SdfDirectionIn,
    /// Apply Action NOCP without DROP, FORW or BUFF (OAI's SPGW-C): buffered with a
    /// notification, as BUFF and NOCP.
    NocpAlone,
    /// A FAR, QER or URR created with bit 8 of its ID set (a vendor IMS SMF): a dynamic
    /// rule of that ID.
    PredefinedBitInCreate,
    /// A PDR naming a URR the session does not have (OAI's SMF with an uplink
    /// classifier): the reference is dropped.
    DanglingUrr,
    /// FORW without Forwarding Parameters (an early free5GC SMF): uplink G-PDUs leave
    /// decapsulated for their destination, downlink packets are dropped, as in
    /// free5GC's UPF.
    ForwWithoutParameters,
}

impl Tolerated {
    /// Every kind, in metric order.
    pub const ALL: [Tolerated; 5] = [
        Tolerated::SdfDirectionIn,
        Tolerated::NocpAlone,
        Tolerated::PredefinedBitInCreate,
        Tolerated::DanglingUrr,
        Tolerated::ForwWithoutParameters,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Tolerated::SdfDirectionIn => "sdf_direction_in",
            Tolerated::NocpAlone => "nocp_alone",
            Tolerated::PredefinedBitInCreate => "predefined_bit_in_create",
            Tolerated::DanglingUrr => "dangling_urr",
            Tolerated::ForwWithoutParameters => "forw_without_parameters",
        }
    }

    /// What upfd does with it, for the log.
    pub fn meaning(self) -> &'static str {
        match self {
            Tolerated::SdfDirectionIn => {
                "an SDF filter with direction \"in\" (TS 29.212 clause 5.4.2 allows \"out\" only) matches no packet, as in free5GC's UPF"
            }
            Tolerated::NocpAlone => {
                "Apply Action NOCP without BUFF is taken as BUFF and NOCP: packets are buffered and the first one notified"
            }
            Tolerated::PredefinedBitInCreate => {
                "a rule created with bit 8 of its ID set (clause 8.2.74 gives that bit to predefined rules) is a dynamic rule of that ID"
            }
            Tolerated::DanglingUrr => {
                "a PDR's reference to a URR the session does not have is dropped: the PDR is counted by its other URRs"
            }
            Tolerated::ForwWithoutParameters => {
                "FORW without Forwarding Parameters: uplink G-PDUs leave decapsulated for their destination, downlink packets are dropped (counted as unsupported), as in free5GC's UPF"
            }
        }
    }
}

/// What the UP function hands out, and what it records during one request so that a
/// failed request can give everything back.
#[derive(Debug)]
pub struct Resources {
    pub teids: TeidAllocator,
    pub ue_ips: UeIpPools,
    pub gtpu: GtpuAddresses,
    pub limits: Limits,
    /// Refuse what TS 29.244 forbids even where real CP functions send it (docs/interop.md,
    /// "Deliberate differences"): CHOOSE without an address family, a UE IP Address
    /// with the unspecified address and no CHV4/CHV6, a Network Instance not in
    /// `network_instances`.
    pub strict: bool,
    /// The Network Instances the configuration names (with GTP-U addresses or UE pools);
    /// empty: any name is taken without a word. Otherwise a request naming another is
    /// refused if `strict`, else accepted and the name noted (see
    /// [`Resources::take_unknown_network_instances`]).
    pub network_instances: Vec<String>,
    unknown_network_instances: Vec<NetworkInstance>,
    /// What the current request did that only non-strict reading accepts, with a detail
    /// (which rule).
    tolerated: Vec<(Tolerated, String)>,
    /// The predefined rules CP functions may activate (clause 5.19).
    pub predefined: Predefined,
    /// The applications PDRs may name (PDI Application ID, clause 5.11): configured
    /// (`applications`) or provisioned by PFD Management. Replaced, not changed in place,
    /// when the PFDs change ([`crate::sessions::Sessions::set_pfds`]).
    pub pfds: Arc<PfdTable>,
    taken_teids: Vec<u32>,
    taken_ue_ips: Vec<IpAddr>,
    /// The UE IPv4 address of the session the current request is for, if known: the
    /// TEIDs it CHOOSEs are allocated to match it ([`TeidAllocator::allocate_for`]).
    ue_hint: Option<Ipv4Addr>,
}

impl Resources {
    pub fn new(
        teids: TeidAllocator,
        ue_ips: UeIpPools,
        gtpu: GtpuAddresses,
        limits: Limits,
    ) -> Self {
        Resources {
            teids,
            ue_ips,
            gtpu,
            limits,
            strict: false,
            network_instances: Vec::new(),
            unknown_network_instances: Vec::new(),
            tolerated: Vec::new(),
            predefined: Predefined::default(),
            pfds: Arc::default(),
            taken_teids: Vec::new(),
            taken_ue_ips: Vec::new(),
            ue_hint: None,
        }
    }

    /// Give back what the current request allocated (the request failed).
    pub fn rollback(&mut self) {
        for t in self.taken_teids.drain(..) {
            self.teids.release(t);
        }
        for a in self.taken_ue_ips.drain(..) {
            self.ue_ips.release(a);
        }
        self.ue_hint = None;
        self.tolerated.clear();
    }

    /// What requests did that only the non-strict reading accepts (see [`Tolerated`]),
    /// since the last call.
    pub fn take_tolerated(&mut self) -> Vec<(Tolerated, String)> {
        std::mem::take(&mut self.tolerated)
    }

    /// Note a deviation the current request made (not strict).
    fn tolerate(&mut self, what: Tolerated, detail: String) {
        self.tolerated.push((what, detail));
    }

    /// A FAR, QER or URR ID a Create names: see [`Predefined::check_created_id`]; an
    /// accepted ID with bit 8 set is noted.
    fn check_created_id(&mut self, rule_type: u8, id: u32) -> Result<(), Rejection> {
        self.predefined
            .check_created_id(rule_type, id, self.strict)?;
        if id & crate::predefined::PREDEFINED != 0 {
            let what = match rule_type {
                FailedRuleId::FAR => "FAR",
                FailedRuleId::QER => "QER",
                _ => "URR",
            };
            self.tolerate(Tolerated::PredefinedBitInCreate, format!("{what} {id:#x}"));
        }
        Ok(())
    }

    /// Network Instances that requests named and the configuration does not (accepted
    /// because not `strict`), since the last call.
    pub fn take_unknown_network_instances(&mut self) -> Vec<NetworkInstance> {
        std::mem::take(&mut self.unknown_network_instances)
    }

    /// Check a Network Instance a PDI, Traffic Endpoint or FAR names; `fail` words the
    /// refusal (strict).
    fn check_network_instance(
        &mut self,
        ni: Option<&NetworkInstance>,
        fail: &dyn Fn(&str) -> Rejection,
    ) -> Result<(), Rejection> {
        let Some(ni) = ni else { return Ok(()) };
        if self.network_instances.is_empty() || self.network_instances.iter().any(|n| **n == **ni) {
            return Ok(());
        }
        if self.strict {
            return Err(fail(&format!(
                "Network Instance {ni:?} is not configured (network_instances, ue_pools; n4.strict)"
            )));
        }
        if !self.unknown_network_instances.contains(ni) {
            self.unknown_network_instances.push(ni.clone());
        }
        Ok(())
    }

    /// An Application ID a PDI (or a predefined rule) names, if the application is known
    /// (configured, or given PFDs by PFD Management, now or earlier); else Cause Unknown
    /// Application ID with the Application ID as Offending IE (clause 5.11).
    pub fn known_application(&self, id: &str) -> Result<String, Rejection> {
        if self.pfds.knows(id) {
            Ok(id.to_string())
        } else {
            Err(Rejection::ie(
                CauseValue::UNKNOWN_APPLICATION_ID,
                types::APPLICATION_ID,
                format!(
                    "Application ID {id:?} is unknown: no PFD Management gave it PFDs and applications does not configure it"
                ),
            ))
        }
    }

    /// Keep what the current request allocated (the request succeeded).
    pub fn commit(&mut self) {
        self.taken_teids.clear();
        self.taken_ue_ips.clear();
        self.ue_hint = None;
    }

    /// Release what a session held and its new version no longer does.
    pub fn release_dropped(&mut self, old: &Session, new: Option<&Session>) {
        for t in &old.teids {
            if !new.is_some_and(|n| n.teids.contains(t)) {
                self.teids.release(*t);
            }
        }
        for a in &old.allocated_ue_ips {
            if !new.is_some_and(|n| n.allocated_ue_ips.contains(a)) {
                self.ue_ips.release(*a);
            }
        }
    }
}

/// What the response must report about allocations (Created PDR / Created Traffic Endpoint).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Created {
    pub pdrs: Vec<(u16, Option<LocalFteid>, Vec<UeIp>)>,
    pub traffic_endpoints: Vec<(u8, Option<LocalFteid>, Vec<UeIp>)>,
}

/// Effects of a modification the data path acts on beyond the new rules.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModifyEffects {
    pub created: Created,
    /// FARs whose Update Forwarding Parameters asked for End Markers (SNDEM, clause 5.9),
    /// with the outer header they used before the change.
    pub end_markers: Vec<(u32, pfcp::ie::OuterHeaderCreation)>,
    /// PFCPSMReq-Flags DROBU: drop the buffered packets.
    pub drop_buffered: bool,
    /// URRs to report in the response (Query URR, or QAURR for all).
    pub query_urrs: Vec<u32>,
    /// URRs removed: their final usage is reported in the response (clause 7.5.5).
    pub removed_urrs: Vec<u32>,
}

fn name(n: &Option<pfcp::ie::Name>) -> Option<NetworkInstance> {
    n.as_ref().map(|n| network_instance(&n.to_text()))
}

impl Resources {
    fn take_teid(&mut self) -> Option<u32> {
        let t = self.teids.allocate_for(self.ue_hint)?;
        self.taken_teids.push(t);
        Some(t)
    }

    /// Claim a given TEID (the CP function's, or a restored session's); false if it is
    /// taken or out of range. [`Resources::rollback`] gives it back.
    pub fn claim_teid(&mut self, t: u32) -> bool {
        if self.teids.claim(t) {
            self.taken_teids.push(t);
            true
        } else {
            false
        }
    }

    /// As [`Resources::claim_teid`], for a UE address of the pools (a restored session's).
    pub fn claim_ue_ip(&mut self, a: IpAddr) -> bool {
        if self.ue_ips.claim(a) {
            self.taken_ue_ips.push(a);
            true
        } else {
            false
        }
    }

    /// Resolve a PDI's or Traffic Endpoint's F-TEID: allocate for CHOOSE (sharing one per
    /// CHOOSE ID within the session), claim an explicit one.
    fn resolve_fteid(
        &mut self,
        f: &FTeid,
        source_interface: u8,
        ni: Option<&str>,
        session: &mut Session,
        fail: &dyn Fn(&str) -> Rejection,
    ) -> Result<LocalFteid, Rejection> {
        match f.choose {
            Some(c) => {
                if let Some(id) = c.choose_id {
                    if let Some(l) = session.choose_ids.get(&id) {
                        return Ok(*l);
                    }
                }
                let (v4, v6) = self.gtpu.ours(source_interface, ni);
                let (ipv4, ipv6) = if !c.v4 && !c.v6 {
                    // CH without V4 or V6 (clause 8.2.3 wants one): OAI's SMF sends it in
                    // every Create PDR and OAI's UPF answers with an IPv4 F-TEID. Ours:
                    // IPv4 if we have an address of it on that side, else IPv6.
                    if self.strict {
                        return Err(Rejection::ie(
                            CauseValue::MANDATORY_IE_INCORRECT,
                            types::FTEID,
                            "CHOOSE F-TEID with neither V4 nor V6 set (n4.strict)",
                        ));
                    }
                    match v4 {
                        Some(a) => (Some(a), None),
                        None => (None, v6),
                    }
                } else {
                    (if c.v4 { v4 } else { None }, if c.v6 { v6 } else { None })
                };
                if ipv4.is_none() && ipv6.is_none() {
                    return Err(Rejection::ie(
                        CauseValue::INVALID_FTEID_ALLOCATION_OPTION,
                        types::FTEID,
                        "CHOOSE asks for an address family this UP function has no GTP-U address for",
                    ));
                }
                let teid = self.take_teid().ok_or_else(|| {
                    Rejection::cause(CauseValue::NO_RESOURCES_AVAILABLE, "no TEID left")
                })?;
                session.teids.push(teid);
                let l = LocalFteid { teid, ipv4, ipv6 };
                if let Some(id) = c.choose_id {
                    session.choose_ids.insert(id, l);
                }
                Ok(l)
            }
            None => {
                let teid = f.teid.unwrap_or(0);
                // The same explicit F-TEID may appear in several PDRs of one session.
                if !session.teids.contains(&teid) {
                    if !self.claim_teid(teid) {
                        return Err(fail("the F-TEID's TEID is 0 or used by another session"));
                    }
                    session.teids.push(teid);
                }
                Ok(LocalFteid {
                    teid,
                    ipv4: f.ipv4,
                    ipv6: f.ipv6,
                })
            }
        }
    }

    /// Which families of a UE IP Address IE the UP function allocates: CHV4 / CHV6, and
    /// (unless strict) V4 / V6 with the unspecified address, which pre-Rel-16 SMFs send
    /// to ask for an allocation (clause 8.2.62 has no CHV4/CHV6 before Rel-16); the UPF
    /// in their captures answered with a Created PDR carrying the address.
    fn ue_ip_choices(&self, u: &UeIpAddress) -> Result<(bool, bool), Rejection> {
        let unspec_v4 = u.ipv4.is_some_and(|a| a.is_unspecified());
        let unspec_v6 = u.ipv6.is_some_and(|a| a.is_unspecified());
        if self.strict && (unspec_v4 || unspec_v6) {
            return Err(Rejection::ie(
                CauseValue::MANDATORY_IE_INCORRECT,
                types::UE_IP_ADDRESS,
                "UE IP Address with the unspecified address (n4.strict)",
            ));
        }
        Ok((u.choose_v4 || unspec_v4, u.choose_v6 || unspec_v6))
    }

    /// Resolve a UE IP Address IE: allocate for CHV4/CHV6 (one address per family per
    /// session, clause 5.21), keep explicit addresses.
    fn resolve_ue_ip(
        &mut self,
        u: &UeIpAddress,
        ni: Option<&str>,
        session: &mut Session,
    ) -> Result<UeIp, Rejection> {
        let ni = ni.or(session.apn_dnn.as_deref()).unwrap_or("");
        let (choose_v4, choose_v6) = self.ue_ip_choices(u)?;
        let mut ipv4 = u.ipv4.filter(|a| !a.is_unspecified());
        let mut ipv6 = u.ipv6.filter(|a| !a.is_unspecified());
        // Cause 79 either way (the SMF gets no address), the log says which.
        let exhausted = |pools: &UeIpPools, v6: bool| {
            let version = if v6 { "IPv6" } else { "IPv4" };
            let why = match pools.pool_for(ni, v6) {
                Some("") => format!("no UE address left in the default {version} pool"),
                Some(p) => format!(
                    "no UE address left in the {version} pool of network instance {p:?}"
                ),
                None if ni.is_empty() => format!(
                    "no {version} UE pool for a PDI without network instance (ue_pools has no default {version} prefix)"
                ),
                None if pools.has_own(ni) => format!(
                    "no {version} UE pool for network instance {ni:?} (ue_pools has no {version} prefix for it)"
                ),
                None => format!(
                    "no {version} UE pool for network instance {ni:?} (ue_pools has none for it, and no default {version} prefix)"
                ),
            };
            Rejection::cause(CauseValue::ALL_DYNAMIC_ADDRESSES_OCCUPIED, why)
        };
        if choose_v4 && ipv4.is_none() {
            ipv4 = match session.allocated_ue_ips.iter().find(|a| a.is_ipv4()) {
                Some(IpAddr::V4(a)) => Some(*a),
                _ => {
                    let a = match self.ue_ips.allocate_v4(ni) {
                        Some(a) => a,
                        None => return Err(exhausted(&self.ue_ips, false)),
                    };
                    self.taken_ue_ips.push(IpAddr::V4(a));
                    self.ue_hint.get_or_insert(a);
                    session.allocated_ue_ips.push(IpAddr::V4(a));
                    Some(a)
                }
            };
        }
        if choose_v6 && ipv6.is_none() {
            ipv6 = match session.allocated_ue_ips.iter().find(|a| a.is_ipv6()) {
                Some(IpAddr::V6(a)) => Some(*a),
                _ => {
                    let a = match self.ue_ips.allocate_v6(ni) {
                        Some(a) => a,
                        None => return Err(exhausted(&self.ue_ips, true)),
                    };
                    self.taken_ue_ips.push(IpAddr::V6(a));
                    session.allocated_ue_ips.push(IpAddr::V6(a));
                    Some(a)
                }
            };
        }
        Ok(UeIp {
            ipv4,
            ipv6,
            ipv6_prefix_len: u.ipv6_prefix_length,
            is_destination: u.destination,
        })
    }
}

fn build_pdi(
    res: &mut Resources,
    p: &pfcp::msg::Pdi,
    pdr_id: u16,
    session: &mut Session,
) -> Result<(Pdi, bool), Rejection> {
    let fail = |why: &str| Rejection::rule(FailedRuleId::PDR, pdr_id as u32, why);
    let source_interface = p.source_interface.value();
    if source_interface > interface::CP_FUNCTION {
        return Err(fail(
            "Source Interface not supported (5G VN internal or spare)",
        ));
    }
    let application_id = match &p.application_id {
        Some(a) => Some(res.known_application(&a.as_str())?),
        None => None,
    };
    if p.ethernet_pdu_session_information.is_some() || !p.ethernet_packet_filters.is_empty() {
        return Err(fail("Ethernet PDU sessions are not supported"));
    }
    if p.sdf_filters.len() > res.limits.max_sdf_filters {
        return Err(fail(
            "more SDF filters than this UP function allows per PDR",
        ));
    }
    let network_instance = name(&p.network_instance);
    res.check_network_instance(network_instance.as_ref(), &fail)?;
    let mut chose = false;
    // UE addresses first: a TEID chosen below is matched to the address.
    // Exact capacity: a pushed-to Vec keeps room for 4, paid a million times over.
    let mut ue_ips = ThinVec::with_capacity(p.ue_ip_address.len());
    for u in &p.ue_ip_address {
        let (v4, v6) = res.ue_ip_choices(u)?;
        chose |= v4 || v6;
        ue_ips.push(res.resolve_ue_ip(u, network_instance.as_deref(), session)?);
    }
    let local_fteid = match &p.local_fteid {
        Some(f) => {
            chose |= f.choose.is_some();
            Some(res.resolve_fteid(
                f,
                source_interface,
                network_instance.as_deref(),
                session,
                &fail,
            )?)
        }
        None => None,
    };
    let mut framed_routes = ThinVec::new();
    for r in p.framed_routes.iter().chain(&p.framed_ipv6_routes) {
        framed_routes.push(
            parse_framed_route(&r.as_str())
                .ok_or_else(|| fail("Framed-Route is not an IP prefix"))?,
        );
    }
    if p.qfis.iter().any(|q| *q > 63) {
        return Err(fail("QFI above 63"));
    }
    for f in &p.sdf_filters {
        let rule =
            crate::sdf::SdfRule::from_ie(f).map_err(|e| fail(&format!("SDF filter: {e}")))?;
        if rule.is_inbound() {
            if res.strict {
                return Err(fail(&format!(
                    "SDF filter: {} (n4.strict)",
                    crate::sdf::SdfErrorKind::Direction
                )));
            }
            res.tolerate(Tolerated::SdfDirectionIn, format!("PDR {pdr_id}"));
        }
    }
    Ok((
        Pdi {
            source_interface,
            local_fteid,
            network_instance,
            ue_ips,
            traffic_endpoint_ids: p.traffic_endpoint_ids.iter().copied().collect(),
            sdf_filters: p.sdf_filters.iter().cloned().collect(),
            application_id,
            qfis: p.qfis.iter().copied().collect(),
            framed_routes,
            framed_routing: p.framed_routing,
            source_interface_type: p.source_interface_type,
        },
        chose,
    ))
}

fn build_pdr(
    res: &mut Resources,
    c: &CreatePdr,
    session: &mut Session,
    created: &mut Created,
) -> Result<Pdr, Rejection> {
    let fail = |why: &str| Rejection::rule(FailedRuleId::PDR, c.pdr_id as u32, why);
    let mut active = ThinVec::new();
    for name in &c.activate_predefined_rules {
        let i = res
            .predefined
            .find(&name.0, types::ACTIVATE_PREDEFINED_RULES)?;
        if !active.contains(&i) {
            active.push(i);
        }
    }
    if c.mar_id.is_some() {
        return Err(fail("multi-access rules (ATSSS) are not supported"));
    }
    let (pdi, chose) = build_pdi(res, &c.pdi, c.pdr_id, session)?;
    if chose {
        created
            .pdrs
            .push((c.pdr_id, pdi.local_fteid, pdi.ue_ips.to_vec()));
    }
    let mut p = Pdr {
        id: c.pdr_id,
        precedence: c.precedence.unwrap_or(u32::MAX),
        pdi,
        outer_header_removal: c.outer_header_removal,
        far_id: c.far_id,
        urr_ids: c.urr_ids.as_slice().into(),
        qer_ids: c.qer_ids.as_slice().into(),
        activation_time: c.activation_time,
        deactivation_time: c.deactivation_time,
    };
    res.predefined
        .activate(&mut session.predefined, &mut p, active);
    rule_application(res, session, &p)?;
    need_far(&p)?;
    Ok(p)
}

/// The Application ID an activated predefined rule gave the PDR must be known (a rule
/// names a configured application, which stays known: this holds unless the
/// configuration changed under a kept state); else Unknown Application ID (clause 5.11)
/// with Activate Predefined Rules as the Offending IE.
fn rule_application(res: &Resources, s: &Session, p: &Pdr) -> Result<(), Rejection> {
    let from_rule = s
        .predefined
        .iter()
        .any(|(id, a)| *id == p.id && a.application_from_rule());
    match &p.pdi.application_id {
        Some(app) if from_rule && !res.pfds.knows(app) => Err(Rejection::ie(
            CauseValue::UNKNOWN_APPLICATION_ID,
            types::ACTIVATE_PREDEFINED_RULES,
            format!(
                "PDR {}: its predefined rule names Application ID {app:?}, which is unknown",
                p.id
            ),
        )),
        _ => Ok(()),
    }
}

/// Table 7.5.2.2-1: FAR ID is there unless an activated predefined rule brings the FAR.
fn need_far(p: &Pdr) -> Result<(), Rejection> {
    if p.far_id.is_none() {
        return Err(Rejection::ie(
            CauseValue::CONDITIONAL_IE_MISSING,
            types::FAR_ID,
            format!(
                "PDR {} has no FAR ID and no activated predefined rule brings a FAR",
                p.id
            ),
        ));
    }
    Ok(())
}

/// Outer Header Creation descriptions the data path can build.
fn check_ohc(o: &pfcp::ie::OuterHeaderCreation) -> Result<(), &'static str> {
    use pfcp::ie::OuterHeaderCreation as O;
    let gtp = O::GTPU_UDP_IPV4 | O::GTPU_UDP_IPV6;
    if o.description & 0xff00 & !gtp != 0 {
        return Err("only GTP-U/UDP/IPv4 and GTP-U/UDP/IPv6 outer headers are supported");
    }
    // Both GTP-U/UDP/IPv4 and GTP-U/UDP/IPv6 may be set (a dual-stack peer, as Open5GS
    // sends): the data path uses the family it has an address of, IPv4 first.
    Ok(())
}

fn build_forwarding(
    far_id: u32,
    f: &pfcp::msg::ForwardingParameters,
) -> Result<Forwarding, Rejection> {
    let fail = |why: &str| Rejection::rule(FailedRuleId::FAR, far_id, why);
    if let Some(r) = &f.redirect_information {
        crate::redirect::check(r).map_err(|e| fail(&e))?;
    }
    if f.header_enrichment.is_some() {
        return Err(fail("header enrichment is not supported"));
    }
    if f.forwarding_policy.is_some() {
        return Err(Rejection::ie(
            CauseValue::INVALID_FORWARDING_POLICY,
            types::FORWARDING_POLICY,
            "no forwarding policies are configured",
        ));
    }
    if let Some(o) = &f.outer_header_creation {
        check_ohc(o).map_err(fail)?;
    }
    let destination_interface = f.destination_interface.value();
    if destination_interface > interface::CP_FUNCTION {
        return Err(fail("Destination Interface not supported"));
    }
    Ok(Forwarding {
        destination_interface,
        network_instance: name(&f.network_instance),
        outer_header_creation: f.outer_header_creation,
        transport_level_marking: f.transport_level_marking,
        linked_traffic_endpoint: f.linked_traffic_endpoint_id,
        destination_interface_type: f.destination_interface_type,
        redirect: f.redirect_information.clone(),
    })
}

/// Check a FAR's Apply Action (clause 8.2.26) against its Forwarding Parameters. Not
/// strict, two things real CP functions send are read as their UPFs read them
/// ([`Tolerated`]): NOCP alone becomes BUFF and NOCP, and FORW without Forwarding
/// Parameters stays as it is (the data path then forwards only decapsulated G-PDUs).
fn check_action(
    res: &mut Resources,
    far_id: u32,
    a: &mut ApplyAction,
    has_forwarding: bool,
    redirect: bool,
) -> Result<(), Rejection> {
    let fail = |why: &str| Rejection::rule(FailedRuleId::FAR, far_id, why);
    if a.dupl {
        return Err(fail("duplication (DUPL) is not supported"));
    }
    if a.nocp && !a.drop && !a.forw && !a.buff && !res.strict {
        // OAI's SPGW-C starts buffering with notification so (TS 23.214: NOCP goes
        // with BUFF); its SPGW-U notifies and drops, this UPF keeps the packets.
        a.buff = true;
        res.tolerate(Tolerated::NocpAlone, format!("FAR {far_id}"));
    }
    if [a.drop, a.forw, a.buff].iter().filter(|x| **x).count() != 1 {
        return Err(fail(
            "Apply Action must set exactly one of DROP, FORW and BUFF",
        ));
    }
    if redirect && !a.forw {
        return Err(fail("Redirect Information needs Apply Action FORW"));
    }
    if a.forw && !has_forwarding {
        if res.strict {
            return Err(Rejection::ie(
                CauseValue::CONDITIONAL_IE_MISSING,
                types::FORWARDING_PARAMETERS,
                "FORW without Forwarding Parameters (n4.strict)",
            ));
        }
        res.tolerate(Tolerated::ForwWithoutParameters, format!("FAR {far_id}"));
    }
    Ok(())
}

fn build_far(res: &mut Resources, c: &CreateFar) -> Result<Far, Rejection> {
    let mut action = ApplyAction::from_flags(&c.apply_action);
    if !c.duplicating_parameters.is_empty() {
        return Err(Rejection::rule(
            FailedRuleId::FAR,
            c.far_id,
            "duplication (Duplicating Parameters) is not supported",
        ));
    }
    let forwarding = match &c.forwarding_parameters {
        Some(f) => Some(build_forwarding(c.far_id, f)?),
        None => None,
    };
    let redirect = forwarding.as_ref().is_some_and(|f| f.redirect.is_some());
    check_action(res, c.far_id, &mut action, forwarding.is_some(), redirect)?;
    Ok(Far {
        id: c.far_id,
        action,
        forwarding,
        bar_id: c.bar_id,
    })
}

fn build_qer(c: &CreateQer) -> Result<Qer, Rejection> {
    if c.qfi.is_some_and(|q| q > 63) {
        return Err(Rejection::rule(FailedRuleId::QER, c.qer_id, "QFI above 63"));
    }
    let mut q = Qer {
        id: c.qer_id,
        correlation_id: c.qer_correlation_id,
        mbr: c.mbr,
        gbr: c.gbr,
        qfi: c.qfi,
        rqi: c.rqi.as_ref().is_some_and(|f| f.get(1)),
        ppi: c.paging_policy_indicator,
        averaging_window: c.averaging_window,
        ..Qer::default()
    };
    q.set_gate(c.gate_status);
    Ok(q)
}

fn build_urr(c: &CreateUrr) -> Result<Urr, Rejection> {
    if c.measurement_method.bits().next().is_none() {
        return Err(Rejection::rule(
            FailedRuleId::URR,
            c.urr_id,
            "Measurement Method has no method set",
        ));
    }
    Ok(Urr::new(c))
}

fn build_bar(c: &CreateBar) -> Bar {
    Bar {
        id: c.bar_id,
        downlink_data_notification_delay: c.downlink_data_notification_delay,
        suggested_buffering_packets_count: c.suggested_buffering_packets_count,
        ..Bar::default()
    }
}

fn build_te(
    res: &mut Resources,
    c: &CreateTrafficEndpoint,
    session: &mut Session,
    created: &mut Created,
) -> Result<TrafficEndpoint, Rejection> {
    let fail = |why: &str| {
        Rejection::ie(
            CauseValue::RULE_CREATION_MODIFICATION_FAILURE,
            types::CREATE_TRAFFIC_ENDPOINT,
            why,
        )
    };
    let network_instance = name(&c.network_instance);
    res.check_network_instance(network_instance.as_ref(), &fail)?;
    let mut chose = false;
    let local_fteid = match &c.local_fteid {
        Some(f) => {
            chose = f.choose.is_some();
            // A Traffic Endpoint with an F-TEID receives GTP-U from the access side.
            Some(res.resolve_fteid(
                f,
                interface::ACCESS,
                network_instance.as_deref(),
                session,
                &fail,
            )?)
        }
        None => None,
    };
    let mut ue_ips = Vec::new();
    for u in &c.ue_ip_address {
        let (v4, v6) = res.ue_ip_choices(u)?;
        chose |= v4 || v6;
        ue_ips.push(res.resolve_ue_ip(u, network_instance.as_deref(), session)?);
    }
    let mut framed_routes = Vec::new();
    for r in c.framed_routes.iter().chain(&c.framed_ipv6_routes) {
        framed_routes.push(parse_framed_route(&r.as_str()).ok_or_else(|| fail("Framed-Route"))?);
    }
    if chose {
        created
            .traffic_endpoints
            .push((c.traffic_endpoint_id, local_fteid, ue_ips.clone()));
    }
    Ok(TrafficEndpoint {
        id: c.traffic_endpoint_id,
        local_fteid,
        network_instance,
        ue_ips,
        qfis: c.qfis.clone(),
        framed_routes,
        source_interface_type: c.source_interface_type,
    })
}

fn insert_unique<K: Ord + Copy, V>(
    map: &mut RuleMap<K, V>,
    k: K,
    v: V,
    dup: impl FnOnce() -> Rejection,
) -> Result<(), Rejection> {
    if map.contains_key(&k) {
        return Err(dup());
    }
    map.insert(k, v);
    Ok(())
}

/// Check that every reference inside the session resolves and limits hold.
pub fn validate(s: &Session, limits: &Limits, gtpu: &GtpuAddresses) -> Result<(), Rejection> {
    if s.pdrs.len() > limits.max_pdrs
        || s.fars.len() > limits.max_fars
        || s.qers.len() > limits.max_qers
        || s.urrs.len() > limits.max_urrs
    {
        return Err(Rejection::cause(
            CauseValue::NO_RESOURCES_AVAILABLE,
            "more rules than this UP function allows per session",
        ));
    }
    // What one PDR may carry in the data path (bpf/include/abi.h).
    use crate::abi::{MAX_PDRS_PER_KEY, MAX_QERS_PER_PDR, MAX_SDF_PER_PDR, MAX_URRS_PER_PDR};
    for p in s.pdrs.values() {
        let fail = |why: String| Rejection::rule(FailedRuleId::PDR, p.id as u32, why);
        if p.qer_ids.len() > MAX_QERS_PER_PDR as usize {
            return Err(fail(format!(
                "more than {MAX_QERS_PER_PDR} QERs on one PDR"
            )));
        }
        if p.urr_ids.len() > MAX_URRS_PER_PDR as usize {
            return Err(fail(format!(
                "more than {MAX_URRS_PER_PDR} URRs on one PDR"
            )));
        }
        let pdi = s.effective_pdi(p);
        if pdi.qfis.len() > 1 {
            return Err(fail("more than one QFI in one PDI".into()));
        }
        let mut entries = 0;
        for f in &pdi.sdf_filters {
            let rule =
                crate::sdf::SdfRule::from_ie(f).map_err(|e| fail(format!("SDF filter: {e}")))?;
            entries += rule.port_range_pairs();
        }
        if entries > MAX_SDF_PER_PDR as usize {
            return Err(fail(format!(
                "the SDF filters need {entries} match entries, more than {MAX_SDF_PER_PDR}"
            )));
        }
        if let Some(f) = p.far_id {
            if !s.fars.contains_key(&f) {
                return Err(fail(format!(
                    "PDR {} refers to FAR {f}, which does not exist",
                    p.id
                )));
            }
        }
        for q in &p.qer_ids {
            if !s.qers.contains_key(q) {
                return Err(fail(format!(
                    "PDR {} refers to QER {q}, which does not exist",
                    p.id
                )));
            }
        }
        for u in &p.urr_ids {
            if !s.urrs.contains_key(u) {
                return Err(fail(format!(
                    "PDR {} refers to URR {u}, which does not exist",
                    p.id
                )));
            }
        }
        for t in &p.pdi.traffic_endpoint_ids {
            if !s.traffic_endpoints.contains_key(t) {
                return Err(fail(format!(
                    "PDR {} refers to Traffic Endpoint {t}, which does not exist",
                    p.id
                )));
            }
        }
    }
    // A tunnel needs an address of ours of an IP version the peer has (8.2.56).
    for f in s.fars.values() {
        let Some(fw) = &f.forwarding else { continue };
        let Some(o) = &fw.outer_header_creation else {
            continue;
        };
        let side = if fw.destination_interface == interface::ACCESS {
            interface::ACCESS
        } else {
            interface::CORE
        };
        let (v4, v6) = gtpu.ours(side, fw.network_instance.as_deref());
        let v4_ok =
            o.has(pfcp::ie::OuterHeaderCreation::GTPU_UDP_IPV4) && o.ipv4.is_some() && v4.is_some();
        let v6_ok =
            o.has(pfcp::ie::OuterHeaderCreation::GTPU_UDP_IPV6) && o.ipv6.is_some() && v6.is_some();
        if !v4_ok && !v6_ok {
            return Err(Rejection::rule(
                FailedRuleId::FAR,
                f.id,
                "Outer Header Creation: no GTP-U address of ours of the peer's IP version",
            ));
        }
    }
    // PDRs one lookup key reaches: a local F-TEID's TEID.
    let mut per_teid: Vec<(u32, u16, usize)> = Vec::new();
    for p in s.pdrs.values() {
        if let Some(f) = s.effective_pdi(p).local_fteid {
            match per_teid.iter_mut().find(|(t, _, _)| *t == f.teid) {
                Some(e) => e.2 += 1,
                None => per_teid.push((f.teid, p.id, 1)),
            }
        }
    }
    if let Some((_, pdr, _)) = per_teid
        .iter()
        .find(|(_, _, n)| *n > MAX_PDRS_PER_KEY as usize)
    {
        return Err(Rejection::rule(
            FailedRuleId::PDR,
            *pdr as u32,
            format!("more than {MAX_PDRS_PER_KEY} PDRs on one F-TEID"),
        ));
    }
    for f in s.fars.values() {
        if let Some(b) = f.bar_id {
            if !s.bars.contains_key(&b) {
                return Err(Rejection::rule(
                    FailedRuleId::FAR,
                    f.id,
                    format!("FAR {} refers to BAR {b}, which does not exist", f.id),
                ));
            }
        }
    }
    for u in s.urrs.values() {
        for l in &u.rule.linked_urr_ids {
            if !s.urrs.contains_key(l) {
                return Err(Rejection::rule(
                    FailedRuleId::URR,
                    u.id,
                    format!("URR {} links URR {l}, which does not exist", u.id),
                ));
            }
        }
        if let Some(f) = u.rule.far_id_for_quota_action {
            if !s.fars.contains_key(&f) {
                return Err(Rejection::rule(
                    FailedRuleId::URR,
                    u.id,
                    format!("URR {}: FAR ID for Quota Action {f} does not exist", u.id),
                ));
            }
        }
    }
    if s.bars.len() > 1 {
        return Err(Rejection::rule(
            FailedRuleId::BAR,
            *s.bars.keys().nth(1).unwrap_or(&0) as u32,
            "a session has at most one BAR",
        ));
    }
    Ok(())
}

/// The Create IEs of an Establishment or Modification Request.
struct NewRules<'a> {
    bar: Option<&'a CreateBar>,
    fars: &'a [CreateFar],
    qers: &'a [CreateQer],
    urrs: &'a [CreateUrr],
    tes: &'a [CreateTrafficEndpoint],
    pdrs: &'a [CreatePdr],
}

/// The session's UE IPv4 address as far as known before anything is allocated: one it
/// has, or one the request names (SMFs usually put it only in the downlink PDR, after
/// the uplink PDR that CHOOSEs the TEID).
fn ue_v4_hint(s: &Session, tes: &[CreateTrafficEndpoint], pdrs: &[CreatePdr]) -> Option<Ipv4Addr> {
    let installed = s
        .pdrs
        .values()
        .flat_map(|p| &p.pdi.ue_ips)
        .chain(s.traffic_endpoints.values().flat_map(|t| &t.ue_ips))
        .find_map(|u| u.ipv4);
    installed.or_else(|| {
        pdrs.iter()
            .flat_map(|c| &c.pdi.ue_ip_address)
            .chain(tes.iter().flat_map(|t| &t.ue_ip_address))
            .find_map(|u| u.ipv4.filter(|a| !a.is_unspecified()))
    })
}

/// Add rules in dependency order: what PDRs point at first.
fn add_rules(
    res: &mut Resources,
    s: &mut Session,
    created: &mut Created,
    new: NewRules,
) -> Result<(), Rejection> {
    let NewRules {
        bar,
        fars,
        qers,
        urrs,
        tes,
        pdrs,
    } = new;
    res.ue_hint = ue_v4_hint(s, tes, pdrs);
    if let Some(b) = bar {
        insert_unique(&mut s.bars, b.bar_id, build_bar(b), || {
            Rejection::rule(FailedRuleId::BAR, b.bar_id as u32, "BAR ID already in use")
        })?;
    }
    for c in fars {
        res.check_created_id(FailedRuleId::FAR, c.far_id)?;
        let f = build_far(res, c)?;
        let fail = |why: &str| Rejection::rule(FailedRuleId::FAR, c.far_id, why);
        let ni = f
            .forwarding
            .as_ref()
            .and_then(|x| x.network_instance.as_ref());
        res.check_network_instance(ni, &fail)?;
        insert_unique(&mut s.fars, c.far_id, f, || {
            Rejection::rule(FailedRuleId::FAR, c.far_id, "FAR ID already in use")
        })?;
    }
    for c in qers {
        res.check_created_id(FailedRuleId::QER, c.qer_id)?;
        let q = build_qer(c)?;
        insert_unique(&mut s.qers, c.qer_id, q, || {
            Rejection::rule(FailedRuleId::QER, c.qer_id, "QER ID already in use")
        })?;
    }
    for c in urrs {
        res.check_created_id(FailedRuleId::URR, c.urr_id)?;
        let u = build_urr(c)?;
        insert_unique(&mut s.urrs, c.urr_id, u, || {
            Rejection::rule(FailedRuleId::URR, c.urr_id, "URR ID already in use")
        })?;
    }
    for c in tes {
        if s.traffic_endpoints.contains_key(&c.traffic_endpoint_id) {
            return Err(Rejection::ie(
                CauseValue::RULE_CREATION_MODIFICATION_FAILURE,
                types::CREATE_TRAFFIC_ENDPOINT,
                "Traffic Endpoint ID already in use",
            ));
        }
        let te = build_te(res, c, s, created)?;
        s.traffic_endpoints.insert(c.traffic_endpoint_id, te);
    }
    for c in pdrs {
        if s.pdrs.contains_key(&c.pdr_id) {
            return Err(Rejection::rule(
                FailedRuleId::PDR,
                c.pdr_id as u32,
                "PDR ID already in use",
            ));
        }
        let p = build_pdr(res, c, s, created)?;
        s.pdrs.insert(c.pdr_id, p);
    }
    Ok(())
}

/// Build a session from an Establishment Request (clause 7.5.2). On error the caller
/// calls [`Resources::rollback`].
pub fn establish(
    res: &mut Resources,
    up_seid: u64,
    cp_node: pfcp::ie::NodeId,
    r: &SessionEstablishmentRequest,
) -> Result<(Session, Created), Rejection> {
    let mut s = Session {
        pdn_type: r.pdn_type,
        apn_dnn: r.apn_dnn.as_ref().map(|n| n.to_text()),
        fq_csids: r.fq_csids.iter().cloned().collect(),
        user_plane_inactivity_timer: r.user_plane_inactivity_timer,
        ..Session::new(up_seid, r.cp_fseid, cp_node)
    };
    let mut created = Created::default();
    add_rules(
        res,
        &mut s,
        &mut created,
        NewRules {
            bar: r.create_bar.as_ref(),
            fars: &r.create_fars,
            qers: &r.create_qers,
            urrs: &r.create_urrs,
            tes: &r.create_traffic_endpoints,
            pdrs: &r.create_pdrs,
        },
    )?;
    for c in &r.create_srrs {
        create_srr(&mut s, c)?;
    }
    res.predefined.settle(&mut s);
    drop_dangling_urrs(res, &mut s);
    validate(&s, &res.limits, &res.gtpu)?;
    Ok((s, created))
}

/// QoS Monitoring per QoS flow Control Information (Table 7.5.2.9-3) as upfd can measure
/// it: a delay asked for, the Packet Delay Thresholds an event-triggered report needs,
/// the Measurement Period a periodic one needs (Cause 67 Conditional IE missing,
/// naming it), QFIs of 6 bits.
fn check_qos_monitoring(
    qos: &[pfcp::msg::QosMonitoringPerQosFlowControlInformation],
) -> Result<(), Rejection> {
    use pfcp::ie::{reporting_frequency as f, requested_qos_monitoring as q};
    let info = types::QOS_MONITORING_PER_QOS_FLOW_CONTROL_INFORMATION;
    for c in qos {
        let r = &c.requested_qos_monitoring;
        if ![q::DL, q::UL, q::RP].iter().any(|b| r.get(*b)) {
            return Err(Rejection::ie(
                CauseValue::RULE_CREATION_MODIFICATION_FAILURE,
                types::REQUESTED_QOS_MONITORING,
                "Requested QoS Monitoring asks for no packet delay (DL, UL or RP)",
            ));
        }
        let fr = &c.reporting_frequency;
        if ![f::EVETT, f::PERIO, f::SESRL].iter().any(|b| fr.get(*b)) {
            return Err(Rejection::ie(
                CauseValue::RULE_CREATION_MODIFICATION_FAILURE,
                types::REPORTING_FREQUENCY,
                "Reporting Frequency names no way to report (EVETT, PERIO or SESRL)",
            ));
        }
        if fr.get(f::EVETT) && c.packet_delay_thresholds.is_none() {
            return Err(Rejection::ie(
                CauseValue::CONDITIONAL_IE_MISSING,
                types::PACKET_DELAY_THRESHOLDS,
                "event-triggered QoS monitoring (EVETT) without Packet Delay Thresholds",
            ));
        }
        if fr.get(f::PERIO) && c.measurement_period.is_none_or(|p| p == 0) {
            return Err(Rejection::ie(
                CauseValue::CONDITIONAL_IE_MISSING,
                types::MEASUREMENT_PERIOD,
                "periodic QoS monitoring (PERIO) without a Measurement Period",
            ));
        }
        if let Some(bad) = c.qfis.iter().find(|x| **x > 63) {
            return Err(Rejection::ie(
                CauseValue::RULE_CREATION_MODIFICATION_FAILURE,
                info,
                format!("QFI {bad}: a QFI has 6 bits"),
            ));
        }
    }
    Ok(())
}

/// Create SRR (Table 7.5.2.9-1): a new SRR ID.
fn create_srr(s: &mut Session, c: &pfcp::msg::CreateSrr) -> Result<(), Rejection> {
    if s.srrs.contains_key(&c.srr_id) {
        return Err(Rejection::ie(
            CauseValue::RULE_CREATION_MODIFICATION_FAILURE,
            types::CREATE_SRR,
            format!("Create SRR {}: the session has that SRR already", c.srr_id),
        ));
    }
    check_qos_monitoring(&c.qos_monitoring_per_qos_flow_control_information)?;
    s.srrs.insert(
        c.srr_id,
        crate::rules::Srr {
            id: c.srr_id,
            qos: c.qos_monitoring_per_qos_flow_control_information.clone(),
        },
    );
    Ok(())
}

fn update_pdr(
    res: &mut Resources,
    s: &mut Session,
    u: &UpdatePdr,
    created: &mut Created,
) -> Result<(), Rejection> {
    let fail = |why: &str| Rejection::rule(FailedRuleId::PDR, u.pdr_id as u32, why);
    let mut p = s
        .pdrs
        .get(&u.pdr_id)
        .cloned()
        .ok_or_else(|| fail("Update PDR for a PDR that does not exist"))?;
    // The update applies to what the PDR has of its own; the predefined rules active
    // after it (those before, less the deactivated, plus the activated) are added back.
    let mut active = Predefined::restore(&mut s.predefined, &mut p);
    for name in &u.deactivate_predefined_rules {
        let i = res
            .predefined
            .find(&name.0, types::DEACTIVATE_PREDEFINED_RULES)?;
        active.retain(|x| *x != i);
    }
    for name in &u.activate_predefined_rules {
        let i = res
            .predefined
            .find(&name.0, types::ACTIVATE_PREDEFINED_RULES)?;
        if !active.contains(&i) {
            active.push(i);
        }
    }
    if let Some(pdi) = &u.pdi {
        let (new_pdi, chose) = build_pdi(res, pdi, u.pdr_id, s)?;
        if chose {
            created
                .pdrs
                .push((u.pdr_id, new_pdi.local_fteid, new_pdi.ue_ips.to_vec()));
        }
        p.pdi = new_pdi;
    }
    if let Some(o) = u.outer_header_removal {
        p.outer_header_removal = Some(o);
    }
    if let Some(x) = u.precedence {
        p.precedence = x;
    }
    if let Some(f) = u.far_id {
        p.far_id = Some(f);
    }
    if !u.urr_ids.is_empty() {
        p.urr_ids = u.urr_ids.as_slice().into();
    }
    if !u.qer_ids.is_empty() {
        p.qer_ids = u.qer_ids.as_slice().into();
    }
    if u.activation_time.is_some() {
        p.activation_time = u.activation_time;
    }
    if u.deactivation_time.is_some() {
        p.deactivation_time = u.deactivation_time;
    }
    res.predefined.activate(&mut s.predefined, &mut p, active);
    rule_application(res, s, &p)?;
    need_far(&p)?;
    s.pdrs.insert(u.pdr_id, p);
    Ok(())
}

fn update_far(
    res: &mut Resources,
    s: &mut Session,
    u: &UpdateFar,
    fx: &mut ModifyEffects,
) -> Result<(), Rejection> {
    let fail = |why: &str| Rejection::rule(FailedRuleId::FAR, u.far_id, why);
    let mut f = s
        .fars
        .get(&u.far_id)
        .cloned()
        .ok_or_else(|| fail("Update FAR for a FAR that does not exist"))?;
    if !u.update_duplicating_parameters.is_empty() {
        return Err(fail("duplication is not supported"));
    }
    if let Some(a) = &u.apply_action {
        f.action = ApplyAction::from_flags(a);
    }
    if let Some(b) = u.bar_id {
        f.bar_id = Some(b);
    }
    if let Some(up) = &u.update_forwarding_parameters {
        let old_ohc = f.forwarding.as_ref().and_then(|x| x.outer_header_creation);
        let mut fw = f.forwarding.clone().unwrap_or_default();
        if up.header_enrichment.is_some() {
            return Err(fail("header enrichment is not supported"));
        }
        if let Some(r) = &up.redirect_information {
            crate::redirect::check(r).map_err(|e| fail(&e))?;
            fw.redirect = Some(r.clone());
        }
        if up.forwarding_policy.is_some() {
            return Err(Rejection::ie(
                CauseValue::INVALID_FORWARDING_POLICY,
                types::FORWARDING_POLICY,
                "no forwarding policies are configured",
            ));
        }
        if let Some(d) = up.destination_interface {
            fw.destination_interface = d.value();
        }
        if let n @ Some(_) = name(&up.network_instance) {
            res.check_network_instance(n.as_ref(), &fail)?;
            fw.network_instance = n;
        }
        if let Some(o) = up.outer_header_creation {
            check_ohc(&o).map_err(fail)?;
            fw.outer_header_creation = Some(o);
        }
        if let Some(t) = up.transport_level_marking {
            fw.transport_level_marking = Some(t);
        }
        if let Some(t) = up.linked_traffic_endpoint_id {
            fw.linked_traffic_endpoint = Some(t);
        }
        if let Some(t) = up.destination_interface_type {
            fw.destination_interface_type = Some(t);
        }
        // SNDEM: send End Markers on the old path when the outer header changes (clause 5.9).
        let sndem = up
            .pfcpsm_req_flags
            .as_ref()
            .is_some_and(|x| x.get(pfcp::ie::pfcpsm_req_flags::SNDEM));
        if sndem {
            if let Some(o) = old_ohc {
                if Some(o) != fw.outer_header_creation {
                    fx.end_markers.push((f.id, o));
                }
            }
        }
        f.forwarding = Some(fw);
    }
    let redirect = f.forwarding.as_ref().is_some_and(|x| x.redirect.is_some());
    check_action(res, f.id, &mut f.action, f.forwarding.is_some(), redirect)?;
    s.fars.insert(u.far_id, f);
    Ok(())
}

fn update_qer(s: &mut Session, u: &UpdateQer) -> Result<(), Rejection> {
    let mut q = s.qers.get(&u.qer_id).cloned().ok_or_else(|| {
        Rejection::rule(
            FailedRuleId::QER,
            u.qer_id,
            "Update QER for a QER that does not exist",
        )
    })?;
    if let Some(g) = u.gate_status {
        q.set_gate(g);
    }
    if u.mbr.is_some() {
        q.mbr = u.mbr;
    }
    if u.gbr.is_some() {
        q.gbr = u.gbr;
    }
    if let Some(x) = u.qfi {
        if x > 63 {
            return Err(Rejection::rule(FailedRuleId::QER, u.qer_id, "QFI above 63"));
        }
        q.qfi = Some(x);
    }
    if let Some(r) = &u.rqi {
        q.rqi = r.get(1);
    }
    if u.qer_correlation_id.is_some() {
        q.correlation_id = u.qer_correlation_id;
    }
    if u.paging_policy_indicator.is_some() {
        q.ppi = u.paging_policy_indicator;
    }
    if u.averaging_window.is_some() {
        q.averaging_window = u.averaging_window;
    }
    s.qers.insert(u.qer_id, q);
    Ok(())
}

/// Build the new version of `old` from a Modification Request (clause 7.5.4): removals
/// first, then creations, then updates; the result is validated as a whole.
pub fn modify(
    res: &mut Resources,
    old: &Session,
    r: &SessionModificationRequest,
) -> Result<(Session, ModifyEffects), Rejection> {
    let mut s = old.clone();
    let mut fx = ModifyEffects::default();
    if let Some(f) = r.cp_fseid {
        s.cp_fseid = f;
    }
    for x in &r.remove_pdrs {
        if s.pdrs.remove(&x.pdr_id).is_none() {
            return Err(Rejection::rule(
                FailedRuleId::PDR,
                x.pdr_id as u32,
                "Remove PDR for a PDR that does not exist",
            ));
        }
    }
    for x in &r.remove_fars {
        if s.fars.remove(&x.far_id).is_none() {
            return Err(Rejection::rule(
                FailedRuleId::FAR,
                x.far_id,
                "Remove FAR for a FAR that does not exist",
            ));
        }
    }
    for x in &r.remove_urrs {
        if s.urrs.remove(&x.urr_id).is_none() {
            return Err(Rejection::rule(
                FailedRuleId::URR,
                x.urr_id,
                "Remove URR for a URR that does not exist",
            ));
        }
        fx.removed_urrs.push(x.urr_id);
    }
    for x in &r.remove_qers {
        if s.qers.remove(&x.qer_id).is_none() {
            return Err(Rejection::rule(
                FailedRuleId::QER,
                x.qer_id,
                "Remove QER for a QER that does not exist",
            ));
        }
    }
    if let Some(x) = &r.remove_bar {
        if s.bars.remove(&x.bar_id).is_none() {
            return Err(Rejection::rule(
                FailedRuleId::BAR,
                x.bar_id as u32,
                "Remove BAR for a BAR that does not exist",
            ));
        }
        // FARs that pointed at the removed BAR no longer buffer under it (clause 7.5.4.12).
        for f in s.fars.values_mut() {
            if f.bar_id == Some(x.bar_id) {
                f.bar_id = None;
            }
        }
    }
    for x in &r.remove_srrs {
        if s.srrs.remove(&x.srr_id).is_none() {
            return Err(Rejection::ie(
                CauseValue::RULE_CREATION_MODIFICATION_FAILURE,
                types::REMOVE_SRR,
                format!("Remove SRR {}: the session has no such SRR", x.srr_id),
            ));
        }
    }
    for c in &r.create_srrs {
        create_srr(&mut s, c)?;
    }
    for u in &r.update_srrs {
        // Table 7.5.4.20-1: the QoS monitoring control IEs, when present, replace those
        // provisioned before.
        let srr = s.srrs.get_mut(&u.srr_id).ok_or_else(|| {
            Rejection::ie(
                CauseValue::RULE_CREATION_MODIFICATION_FAILURE,
                types::UPDATE_SRR,
                format!("Update SRR {}: the session has no such SRR", u.srr_id),
            )
        })?;
        if !u.qos_monitoring_per_qos_flow_control_information.is_empty() {
            check_qos_monitoring(&u.qos_monitoring_per_qos_flow_control_information)?;
            srr.qos = u.qos_monitoring_per_qos_flow_control_information.clone();
        }
    }
    for x in &r.remove_traffic_endpoints {
        if s.traffic_endpoints.remove(&x.traffic_endpoint_id).is_none() {
            return Err(Rejection::ie(
                CauseValue::RULE_CREATION_MODIFICATION_FAILURE,
                types::REMOVE_TRAFFIC_ENDPOINT,
                "Remove Traffic Endpoint for one that does not exist",
            ));
        }
    }
    // F-TEIDs of removed PDRs and Traffic Endpoints are released once the new version is
    // committed: recompute what the session still holds.
    add_rules(
        res,
        &mut s,
        &mut fx.created,
        NewRules {
            bar: r.create_bar.as_ref(),
            fars: &r.create_fars,
            qers: &r.create_qers,
            urrs: &r.create_urrs,
            tes: &r.create_traffic_endpoints,
            pdrs: &r.create_pdrs,
        },
    )?;
    for u in &r.update_pdrs {
        update_pdr(res, &mut s, u, &mut fx.created)?;
    }
    for u in &r.update_fars {
        update_far(res, &mut s, u, &mut fx)?;
    }
    for u in &r.update_urrs {
        let urr = s.urrs.get_mut(&u.urr_id).ok_or_else(|| {
            Rejection::rule(
                FailedRuleId::URR,
                u.urr_id,
                "Update URR for a URR that does not exist",
            )
        })?;
        urr.update(u);
    }
    for u in &r.update_qers {
        update_qer(&mut s, u)?;
    }
    if let Some(u) = &r.update_bar {
        let b = s.bars.get_mut(&u.bar_id).ok_or_else(|| {
            Rejection::rule(
                FailedRuleId::BAR,
                u.bar_id as u32,
                "Update BAR for a BAR that does not exist",
            )
        })?;
        if u.downlink_data_notification_delay.is_some() {
            b.downlink_data_notification_delay = u.downlink_data_notification_delay;
        }
        if u.suggested_buffering_packets_count.is_some() {
            b.suggested_buffering_packets_count = u.suggested_buffering_packets_count;
        }
    }
    for u in &r.update_traffic_endpoints {
        let mut created = Created::default();
        let te = s
            .traffic_endpoints
            .get(&u.traffic_endpoint_id)
            .cloned()
            .ok_or_else(|| {
                Rejection::ie(
                    CauseValue::RULE_CREATION_MODIFICATION_FAILURE,
                    types::UPDATE_TRAFFIC_ENDPOINT,
                    "Update Traffic Endpoint for one that does not exist",
                )
            })?;
        let c = CreateTrafficEndpoint {
            traffic_endpoint_id: u.traffic_endpoint_id,
            local_fteid: u.local_fteid,
            network_instance: u.network_instance.clone(),
            ue_ip_address: u.ue_ip_address.clone(),
            ethernet_pdu_session_information: None,
            framed_routes: u.framed_routes.clone(),
            framed_routing: u.framed_routing,
            framed_ipv6_routes: u.framed_ipv6_routes.clone(),
            qfis: u.qfis.clone(),
            source_interface_type: u.source_interface_type,
            other: Vec::new(),
        };
        let mut new = build_te(res, &c, &mut s, &mut created)?;
        if new.local_fteid.is_none() {
            new.local_fteid = te.local_fteid;
        }
        if new.network_instance.is_none() {
            new.network_instance = te.network_instance.clone();
        }
        if new.ue_ips.is_empty() {
            new.ue_ips = te.ue_ips.clone();
        }
        if new.qfis.is_empty() {
            new.qfis = te.qfis.clone();
        }
        if new.framed_routes.is_empty() {
            new.framed_routes = te.framed_routes.clone();
        }
        fx.created
            .traffic_endpoints
            .extend(created.traffic_endpoints);
        s.traffic_endpoints.insert(u.traffic_endpoint_id, new);
    }
    if let Some(fl) = &r.pfcpsm_req_flags {
        fx.drop_buffered = fl.get(pfcp::ie::pfcpsm_req_flags::DROBU);
        if fl.get(pfcp::ie::pfcpsm_req_flags::QAURR) {
            fx.query_urrs = s.urrs.keys().copied().collect();
        }
    }
    for q in &r.query_urrs {
        if !s.urrs.contains_key(&q.urr_id) {
            return Err(Rejection::rule(
                FailedRuleId::URR,
                q.urr_id,
                "Query URR for a URR that does not exist",
            ));
        }
        if !fx.query_urrs.contains(&q.urr_id) {
            fx.query_urrs.push(q.urr_id);
        }
    }
    fx.removed_urrs.extend(res.predefined.settle(&mut s));
    retain_held(&mut s);
    drop_dangling_urrs(res, &mut s);
    validate(&s, &res.limits, &res.gtpu)?;
    Ok((s, fx))
}

/// Not strict: a PDR's references to URRs the session does not have are dropped and
/// noted (OAI's SMF with an uplink classifier creates URR 0 and names URR 1; UPG-VPP
/// accepts it). Strict: kept, so that [`validate`] refuses them.
fn drop_dangling_urrs(res: &mut Resources, s: &mut Session) {
    if res.strict {
        return;
    }
    let urrs = &s.urrs;
    for p in s.pdrs.values_mut() {
        if p.urr_ids.iter().all(|u| urrs.contains_key(u)) {
            continue;
        }
        for u in p.urr_ids.iter().filter(|u| !urrs.contains_key(u)) {
            res.tolerated.push((
                Tolerated::DanglingUrr,
                format!("PDR {} names URR {u}", p.id),
            ));
        }
        p.urr_ids.retain(|u| urrs.contains_key(u));
    }
}

/// Drop TEIDs and CHOOSE IDs no PDR or Traffic Endpoint uses any more.
fn retain_held(s: &mut Session) {
    let mut live: Vec<u32> = s
        .pdrs
        .values()
        .filter_map(|p| p.pdi.local_fteid.map(|f| f.teid))
        .collect();
    live.extend(
        s.traffic_endpoints
            .values()
            .filter_map(|t| t.local_fteid.map(|f| f.teid)),
    );
    s.teids.retain(|t| live.contains(t));
    s.choose_ids.retain(|_, f| live.contains(&f.teid));
}
