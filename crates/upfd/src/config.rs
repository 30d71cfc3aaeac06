//! upfd's configuration file (YAML), with overrides of any key from the environment
//! (`UPFD_N4__HEARTBEAT_INTERVAL=5s`) and `--set n4.heartbeat_interval=5s`, applied to the
//! file's YAML tree before it is read. Every key is documented here and in
//! docs/configuration.md; every error is one line naming where the value came from, the
//! key path, the value and what is allowed. [`Config::check_host`] checks what can be
//! checked on this host without starting (interfaces, local addresses, state directory).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;
use serde_norway::Value;

/// The whole file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// This UP function's PFCP Node ID: an IPv4 or IPv6 address, or an FQDN.
    pub node_id: String,
    pub n4: N4,
    pub gtpu: Gtpu,
    /// UE address pools, per network instance (DNN/APN).
    #[serde(default)]
    pub ue_pools: Vec<UePool>,
    /// Network Instances (TS 29.244 clause 8.2.4) this UPF serves, with GTP-U addresses
    /// of their own where they have them.
    #[serde(default)]
    pub network_instances: Vec<NetworkInstance>,
    /// Rules SMFs activate by name (TS 29.244 clause 5.19).
    #[serde(default)]
    pub predefined_rules: PredefinedRules,
    /// Applications and their Packet Flow Descriptions, known from the start (for
    /// predefined rules and SMFs that name applications without PFD Management; an
    /// SMF's PFDs for the same Application ID replace them): docs/application-detection.md.
    #[serde(default)]
    pub applications: Vec<Application>,
    /// How long a flow of an application stays without packets before a URR with
    /// reporting trigger STOPT reports its stop (Application Detection Information).
    #[serde(default = "default_stop_after", with = "humantime_serde")]
    pub applications_stop_after: Duration,
    #[serde(default)]
    pub limits: Limits,
    #[serde(default)]
    pub datapath: Datapath,
    #[serde(default)]
    pub buffering: Buffering,
    #[serde(default)]
    pub reporting: Reporting,
    #[serde(default)]
    pub api: Api,
    #[serde(default)]
    pub state: State,
    /// CPUs upfd's process runs on (empty: any). The XDP programs run where the NICs'
    /// queues are served, not here: keep upfd off those CPUs, or the kernel work of its
    /// start (verifying the programs, zeroing the tables) delays the packets there
    /// (docs/benchmarks.md, "Restart").
    #[serde(default)]
    pub cpus: Vec<usize>,
    #[serde(default)]
    pub log: Log,
    /// Where the values came from (the file, the environment, `--set`), for errors.
    #[serde(skip)]
    pub sources: Sources,
}

/// N4 / Sx: PFCP towards SMFs (SGW-C/PGW-C in 4G).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct N4 {
    /// Address to listen on; also the address in UP F-SEIDs.
    pub address: IpAddr,
    #[serde(default = "default_pfcp_port")]
    pub port: u16,
    /// Source prefixes of the SMFs allowed to associate. Empty: any.
    #[serde(default)]
    pub allowed_peers: Vec<IpNet>,
    /// SMFs this UPF itself asks to associate with ("10.0.0.2:8805").
    #[serde(default)]
    pub associate_with: Vec<SocketAddr>,
    #[serde(default = "default_heartbeat", with = "humantime_serde")]
    pub heartbeat_interval: Duration,
    /// PFCP request retransmission timer and count (TS 29.244 clause 6.4).
    #[serde(default = "default_t1", with = "humantime_serde")]
    pub t1: Duration,
    #[serde(default = "default_n1")]
    pub n1: u32,
    /// How long responses are kept for retransmitted requests, and at most how many.
    #[serde(default = "default_cache_ttl", with = "humantime_serde")]
    pub response_cache_ttl: Duration,
    #[serde(default = "default_cache_max")]
    pub response_cache_max: usize,
    /// Offered to SMFs on a graceful shutdown (TS 29.244 clause 6.2.8.2).
    #[serde(default = "default_release", with = "humantime_serde")]
    pub graceful_release_period: Duration,
    /// Read PFCP as TS 29.244 and TS 23.527 say where real SMFs deviate: a changed
    /// Recovery Time Stamp in a heartbeat deletes the SMF's sessions; CHOOSE F-TEIDs
    /// without V4/V6, UE IP Addresses with the unspecified address and Network Instances
    /// no configuration names are refused. Off by default (docs/interop.md).
    #[serde(default)]
    pub strict: bool,
    /// The N4 socket's receive buffer in octets (SO_RCVBUFFORCE, or SO_RCVBUF capped at
    /// net.core.rmem_max without CAP_NET_ADMIN). None: 8 MiB. The queue of requests
    /// waiting for upfd is this big: at half full upfd is overloaded (docs/security.md,
    /// "Overload").
    #[serde(default)]
    pub receive_buffer: Option<usize>,
}

/// GTP-U endpoints.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gtpu {
    /// N3 (S1-U, S5/S8-U for an SGW-U): towards gNBs/eNBs.
    pub n3: Endpoint,
    /// N9 (S5/S8-U for a PGW-U): towards other UPFs. Defaults to the N3 endpoint.
    #[serde(default)]
    pub n9: Option<Endpoint>,
    /// TEIDs handed out for CHOOSE F-TEIDs, inclusive.
    #[serde(default = "default_teid_range")]
    pub teid_range: [u32; 2],
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    #[serde(default)]
    pub ipv4: Option<Ipv4Addr>,
    #[serde(default)]
    pub ipv6: Option<Ipv6Addr>,
}

/// A Network Instance: its name as SMFs send it (label-encoded names are compared as
/// dotted text), and the GTP-U addresses a PDI or FAR in it uses on each side instead of
/// `gtpu.n3` / `gtpu.n9`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkInstance {
    pub name: String,
    #[serde(default)]
    pub n3: Option<Endpoint>,
    #[serde(default)]
    pub n9: Option<Endpoint>,
}

/// Predefined rules (TS 29.244 clause 5.19): FARs, QERs and URRs by ID (1 to 2^31 - 1;
/// on the wire with bit 8 of the first octet set), and the named rules an SMF activates
/// on a PDR, each adding SDF filters, a FAR (when the PDR has none), QERs and URRs.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PredefinedRules {
    pub fars: Vec<PredefinedFar>,
    pub qers: Vec<PredefinedQer>,
    pub urrs: Vec<PredefinedUrr>,
    pub rules: Vec<PredefinedRule>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FarAction {
    Forward,
    Drop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum InterfaceName {
    Access,
    Core,
    SgiLan,
    CpFunction,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredefinedFar {
    pub id: u32,
    pub action: FarAction,
    /// With `forward`: where to (no Outer Header Creation: a tunnel is per session).
    #[serde(default)]
    pub destination_interface: Option<InterfaceName>,
    #[serde(default)]
    pub network_instance: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Gate {
    Open,
    Closed,
}

fn open() -> Gate {
    Gate::Open
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredefinedQer {
    pub id: u32,
    #[serde(default = "open")]
    pub gate_ul: Gate,
    #[serde(default = "open")]
    pub gate_dl: Gate,
    /// Maximum bit rates, kbit/s (both or neither).
    #[serde(default)]
    pub mbr_ul_kbps: Option<u64>,
    #[serde(default)]
    pub mbr_dl_kbps: Option<u64>,
    #[serde(default)]
    pub qfi: Option<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Measurement {
    Volume,
    Duration,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredefinedUrr {
    pub id: u32,
    pub measurement_method: Vec<Measurement>,
    /// A Usage Report every period (PERIO).
    #[serde(default, with = "humantime_serde")]
    pub measurement_period: Option<Duration>,
    /// A Usage Report when this many octets (both directions) were counted (VOLTH).
    #[serde(default)]
    pub volume_threshold_bytes: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PredefinedRule {
    /// The Predefined Rules Name SMFs send (Activate Predefined Rules, clause 8.2.72).
    pub name: String,
    #[serde(default)]
    pub sdf_filters: Vec<String>,
    #[serde(default)]
    pub far: Option<u32>,
    #[serde(default)]
    pub qers: Vec<u32>,
    #[serde(default)]
    pub urrs: Vec<u32>,
    /// An Application ID of `applications`: a PDR the rule is activated on (that names
    /// no Application ID itself) matches that application's traffic.
    #[serde(default, alias = "application_id")]
    pub application: Option<String>,
}

impl PredefinedRules {
    /// As upf takes them; the error names what is wrong.
    pub fn build(&self) -> Result<upf::predefined::Predefined, String> {
        use pfcp::ie::{measurement_method as mm, reporting_triggers as rt};
        use upf::rules::{interface, ApplyAction, Far, Forwarding, Qer, Urr, UrrRule};
        let fars = self
            .fars
            .iter()
            .map(|f| {
                let forw = f.action == FarAction::Forward;
                let forwarding = match (forw, f.destination_interface) {
                    (true, None) => {
                        return Err(format!("FAR {}: forward needs destination_interface", f.id))
                    }
                    (true, Some(d)) => Some(Forwarding {
                        destination_interface: match d {
                            InterfaceName::Access => interface::ACCESS,
                            InterfaceName::Core => interface::CORE,
                            InterfaceName::SgiLan => interface::SGI_LAN,
                            InterfaceName::CpFunction => interface::CP_FUNCTION,
                        },
                        network_instance: f
                            .network_instance
                            .as_deref()
                            .map(upf::rules::network_instance),
                        ..Default::default()
                    }),
                    (false, _) => None,
                };
                Ok(Far {
                    id: f.id,
                    action: ApplyAction {
                        forw,
                        drop: !forw,
                        ..Default::default()
                    },
                    forwarding,
                    bar_id: None,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let qers = self
            .qers
            .iter()
            .map(|q| {
                let mbr = match (q.mbr_ul_kbps, q.mbr_dl_kbps) {
                    (Some(ul), Some(dl)) => Some(pfcp::ie::Bitrate {
                        ul_kbps: ul,
                        dl_kbps: dl,
                    }),
                    (None, None) => None,
                    _ => {
                        return Err(format!(
                            "QER {}: mbr_ul_kbps and mbr_dl_kbps go together",
                            q.id
                        ))
                    }
                };
                if q.qfi.is_some_and(|x| x > 63) {
                    return Err(format!("QER {}: QFI above 63", q.id));
                }
                Ok(Qer {
                    id: q.id,
                    gate_ul_open: q.gate_ul == Gate::Open,
                    gate_dl_open: q.gate_dl == Gate::Open,
                    mbr,
                    qfi: q.qfi,
                    ..Qer::default()
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let urrs = self
            .urrs
            .iter()
            .map(|u| {
                if u.measurement_method.is_empty() {
                    return Err(format!("URR {}: measurement_method is empty", u.id));
                }
                let method: Vec<u16> = u
                    .measurement_method
                    .iter()
                    .map(|m| match m {
                        Measurement::Volume => mm::VOLUM,
                        Measurement::Duration => mm::DURAT,
                    })
                    .collect();
                let mut triggers = Vec::new();
                if u.measurement_period.is_some() {
                    triggers.push(rt::PERIO);
                }
                if u.volume_threshold_bytes.is_some() {
                    triggers.push(rt::VOLTH);
                }
                let period = match u.measurement_period {
                    Some(p) if p.as_secs() == 0 => {
                        return Err(format!("URR {}: measurement_period below 1s", u.id))
                    }
                    Some(p) => Some(u32::try_from(p.as_secs()).unwrap_or(u32::MAX)),
                    None => None,
                };
                Ok(Urr {
                    id: u.id,
                    rule: UrrRule {
                        measurement_method: pfcp::ie::Flags::from_bits(&method, 1),
                        reporting_triggers: pfcp::ie::Flags::from_bits(&triggers, 3),
                        measurement_period: period,
                        volume_threshold: u.volume_threshold_bytes.map(|b| {
                            upf::rules::VolumeLimit {
                                total: Some(b),
                                ..Default::default()
                            }
                        }),
                        volume_quota: None,
                        time_threshold: None,
                        time_quota: None,
                        quota_holding_time: None,
                        inactivity_detection_time: None,
                        linked_urr_ids: Vec::new(),
                        far_id_for_quota_action: None,
                    },
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let rules = self
            .rules
            .iter()
            .map(|r| upf::predefined::PredefinedRule {
                name: r.name.clone(),
                sdf_filters: r
                    .sdf_filters
                    .iter()
                    .map(|f| pfcp::ie::SdfFilter {
                        flow_description: Some(f.as_bytes().to_vec()),
                        ..Default::default()
                    })
                    .collect(),
                far: r.far,
                qers: r.qers.clone(),
                urrs: r.urrs.clone(),
            })
            .collect();
        let mut p = upf::predefined::Predefined::new(rules, fars, qers, urrs)?;
        for r in &self.rules {
            if let Some(a) = &r.application {
                p.set_application(&r.name, a)?;
            }
        }
        Ok(p)
    }

    /// Each rule's application must be one of `applications`: the key path and what is
    /// wrong.
    pub fn check_applications(&self, applications: &[Application]) -> Result<(), (String, String)> {
        for (i, r) in self.rules.iter().enumerate() {
            let Some(a) = &r.application else { continue };
            if !applications.iter().any(|x| x.id == *a) {
                let ids: Vec<&str> = applications.iter().map(|x| x.id.as_str()).collect();
                return Err((
                    format!("predefined_rules.rules[{i}].application"),
                    format!(
                        "{a:?} is not among applications ({})",
                        if ids.is_empty() {
                            "none is configured".to_string()
                        } else {
                            format!("configured: {}", ids.join(", "))
                        }
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// One application (`applications[]`): its Application ID and PFDs, as PFD Management
/// would give them (TS 29.244 clause 8.2.39).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Application {
    /// The Application ID PDRs name.
    pub id: String,
    /// IPFilterRules, downlink-oriented as SDF filters: `permit out 17 from 192.0.2.0/24
    /// to assigned`.
    #[serde(default)]
    pub flow_descriptions: Vec<String>,
    /// `http://host[/path]` (HTTP requests for host under path) or `https://host`.
    #[serde(default)]
    pub urls: Vec<String>,
    /// Domain names (a name and every name below it), each for every protocol or for
    /// the one given (DNS_QNAME, TLS_SNI, TLS_SAN, TLS_SCN).
    #[serde(default)]
    pub domain_names: Vec<DomainName>,
}

/// `applications[].domain_names[]`: a name, or `{ name, protocol }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum DomainName {
    Name(String),
    WithProtocol(DomainNameProtocol),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomainNameProtocol {
    pub name: String,
    #[serde(default)]
    pub protocol: Option<String>,
}

/// The PFD table of `applications` (every application local); Err: the key path and
/// what is wrong.
pub fn pfd_table(apps: &[Application]) -> Result<upf::pfd::PfdTable, (String, String)> {
    let mut t = upf::pfd::PfdTable::new();
    for (i, a) in apps.iter().enumerate() {
        let at = |k: &str| format!("applications[{i}].{k}");
        if a.id.is_empty() {
            return Err((
                at("id"),
                "\"\": expected an Application ID (text), not empty".into(),
            ));
        }
        if let Some(j) = apps[..i].iter().position(|b| b.id == a.id) {
            return Err((
                at("id"),
                format!("{:?}: defined twice (applications[{j}] too)", a.id),
            ));
        }
        let mut p = upf::pfd::AppPfds::default();
        for (j, f) in a.flow_descriptions.iter().enumerate() {
            p.add_flow(f).map_err(|e| {
                (
                    at(&format!("flow_descriptions[{j}]")),
                    format!("{f:?}: {e}"),
                )
            })?;
        }
        for (j, u) in a.urls.iter().enumerate() {
            p.add_url(u).map_err(|e| (at(&format!("urls[{j}]")), e))?;
        }
        for (j, d) in a.domain_names.iter().enumerate() {
            let (name, protocol) = match d {
                DomainName::Name(n) => (n, None),
                DomainName::WithProtocol(d) => (&d.name, d.protocol.as_deref()),
            };
            p.add_domain(name, protocol)
                .map_err(|e| (at(&format!("domain_names[{j}]")), format!("{name:?}: {e}")))?;
        }
        t.set(&a.id, p, true)
            .map_err(|e| ("applications".to_string(), e.why))?;
    }
    Ok(t)
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UePool {
    /// Network instance (or DNN) whose CHV4/CHV6 requests this pool serves; "" or absent
    /// for the default pool.
    #[serde(default)]
    pub network_instance: String,
    pub prefix: IpNet,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    pub max_sessions: usize,
    pub max_pdrs_per_session: usize,
    pub max_fars_per_session: usize,
    pub max_qers_per_session: usize,
    pub max_urrs_per_session: usize,
    pub max_sdf_filters_per_pdr: usize,
}

impl Default for Limits {
    fn default() -> Self {
        let l = upf::procedures::Limits::default();
        Limits {
            max_sessions: 1_000_000,
            max_pdrs_per_session: l.max_pdrs,
            max_fars_per_session: l.max_fars,
            max_qers_per_session: l.max_qers,
            max_urrs_per_session: l.max_urrs,
            max_sdf_filters_per_pdr: l.max_sdf_filters,
        }
    }
}

/// Which data path forwards the traffic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DatapathMode {
    /// No forwarding: N4 only, rules kept in the reference model's tables (for testing
    /// an SMF against upfd without network interfaces).
    #[default]
    None,
    /// The XDP programs on the N3/N9 and N6 interfaces.
    Xdp,
}

/// How XDP programs are attached.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum XdpAttach {
    /// In the driver; falls back to generic mode with a warning if refused.
    #[default]
    Native,
    /// In the kernel's generic path (slower; for drivers without XDP).
    Generic,
}

/// Whether the N3 program hands G-PDUs to other CPUs (`datapath.spread`), and by what.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Spread {
    /// Each G-PDU is forwarded on the CPU that received it.
    #[default]
    Off,
    /// By TEID: each tunnel on one CPU.
    Teid,
    /// By the inner packet's addresses, protocol and ports (IPv4, not fragments) or flow
    /// label (IPv6): each flow on one CPU.
    Inner,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Datapath {
    pub mode: DatapathMode,
    /// Interfaces for `mode: xdp`: GTP-U from gNBs (N3), from other UPFs (N9, optional),
    /// and the data network (N6).
    pub n3_interface: Option<String>,
    pub n9_interface: Option<String>,
    pub n6_interface: Option<String>,
    pub xdp_attach: XdpAttach,
    /// G-PDUs with an unknown TEID handed to upfd per second (for Error Indications);
    /// the rest are only dropped and counted.
    pub unknown_teid_to_slowpath_per_sec: u64,
    /// Error Indications sent per second at most (TS 29.281 clause 7.3.1), whatever
    /// arrives.
    pub error_indications_per_sec: u64,
    /// Addresses besides upfd's own (GTP-U, N4, API) that uplink user traffic must never
    /// reach, e.g. the SMFs' N4 or a management network's: dropped and counted as
    /// `to_upf` (TS 33.513 clause 4.2.2). With the N4 and API addresses, at most
    /// `MAX_PROTECTED_ADDRS` (8) of each IP version.
    pub protected_addresses: Vec<IpAddr>,
    /// Spread G-PDUs arriving on N3 (and N9) over `spread_cpus` through a cpumap, by
    /// TEID or by inner flow: for one gNB's tunnel that the NIC delivers to one queue
    /// (docs/configuration.md). A flow stays on one CPU, in order.
    pub spread: Spread,
    /// The CPUs `spread` hands G-PDUs to (empty: every online CPU), at most
    /// `MAX_SPREAD_CPUS` (64).
    pub spread_cpus: Vec<usize>,
    /// Sizes of the data path's tables beyond the sessions' own records, for SMFs whose
    /// sessions carry more than two PDRs, a QER and a URR (docs/configuration.md).
    pub tables: Tables,
    /// ICMP errors for packets that do not fit their egress link once encapsulated.
    pub icmp: Icmp,
    /// MTUs of the data path's interfaces, over the kernel FIB's.
    pub mtu: Mtu,
}

/// ICMP errors for packets too big for their egress link with the headers the UPF adds:
/// Fragmentation Needed (type 3 code 4) for IPv4 with DF set (RFC 1191), Packet Too Big
/// for IPv6 (RFC 8201; RFC 4443 clause 3.2), so that path MTU discovery settles behind
/// the UPF. Budgets are token buckets: a rate and what may go at once.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Icmp {
    /// The errors' source per IP version; unset: the first IPv4 address / the first
    /// global-scope IPv6 address `n6_interface` has at start (none: no errors of that
    /// version).
    pub source_ipv4: Option<Ipv4Addr>,
    pub source_ipv6: Option<Ipv6Addr>,
    /// Errors per second over all sessions (0: none at all), and at once. Linux's own
    /// defaults for the ICMP it sends (`net.ipv4.icmp_msgs_per_sec` 1000,
    /// `icmp_msgs_burst` 50).
    pub errors_per_sec: u64,
    pub burst: u64,
    /// Errors per second for the packets of one session (0: none), and at once: one
    /// busy UE or one host flooding one UE does not use up the budget of all. Above
    /// `errors_per_sec` is allowed: the whole's budget still bounds it.
    pub session_errors_per_sec: u64,
    pub session_burst: u64,
}

impl Default for Icmp {
    fn default() -> Self {
        Icmp {
            source_ipv4: None,
            source_ipv6: None,
            errors_per_sec: 1000,
            burst: 50,
            session_errors_per_sec: 10,
            session_burst: 10,
        }
    }
}

/// MTUs of the interfaces by role; each one set takes precedence over the kernel FIB's
/// MTU for packets leaving by that interface. An MTU is the interface's: roles that
/// share an interface share it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Mtu {
    pub n3: Option<u16>,
    pub n6: Option<u16>,
    pub n9: Option<u16>,
}

/// An MTU's range: IPv4's minimum (RFC 791) to the largest jumbo frame switches
/// commonly carry.
pub const MTU_RANGE: std::ops::RangeInclusive<u16> = 68..=9216;

impl Datapath {
    /// The configured MTUs by role (`n3`, `n6`, `n9`), each interface once (the first
    /// role naming it); errors name the key: an MTU out of [`MTU_RANGE`], one for an
    /// interface that is not configured, two different ones for one interface.
    pub fn interface_mtus(&self) -> Result<Vec<(&'static str, u16)>, (String, String)> {
        let roles = [
            ("n3", self.mtu.n3, &self.n3_interface),
            ("n6", self.mtu.n6, &self.n6_interface),
            ("n9", self.mtu.n9, &self.n9_interface),
        ];
        let mut out: Vec<(&'static str, u16)> = Vec::new();
        for (i, (role, mtu, name)) in roles.iter().enumerate() {
            let (role, mtu) = (*role, *mtu);
            let Some(mtu) = mtu else { continue };
            let key = format!("datapath.mtu.{role}");
            if !MTU_RANGE.contains(&mtu) {
                return Err((
                    key,
                    format!(
                        "{mtu} is out of range: an MTU in octets, {}-{}",
                        MTU_RANGE.start(),
                        MTU_RANGE.end()
                    ),
                ));
            }
            let Some(name) = name else {
                let why = if role == "n9" {
                    " (without it N9 traffic goes by datapath.n3_interface: set datapath.mtu.n3)"
                } else {
                    ""
                };
                return Err((key, format!("{mtu}: needs datapath.{role}_interface{why}")));
            };
            let earlier = roles[..i]
                .iter()
                .find(|(_, m, n)| m.is_some() && n.as_ref() == Some(name));
            match earlier {
                Some((r, Some(m), _)) if *m != mtu => {
                    return Err((
                        key,
                        format!(
                            "{mtu}: datapath.{role}_interface and datapath.{r}_interface are both {name:?}, and datapath.mtu.{r} is {m}: one MTU per interface"
                        ),
                    ))
                }
                // The interface has this MTU already.
                Some(_) => {}
                None => out.push((role, mtu)),
            }
        }
        Ok(out)
    }
}

/// Entries of the tables that hold what does not fit in a session's record; each unset
/// one is sized from `limits.max_sessions`. A full table refuses the session that does
/// not fit with Cause 75 (No resources available) and says which table is full.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tables {
    /// PDR lists, PDRs beyond a session's first per direction, and their FARs
    /// (default `max_sessions` / 4 + 1024).
    pub cold_entries: Option<u32>,
    /// SDF filter entries, shared by sessions with the same filters (default
    /// `max_sessions` / 8 + 1024).
    pub sdf_entries: Option<u32>,
    /// QERs and URRs beyond a session's first: each takes 128 octets plus 64 per CPU
    /// (default `max_sessions` / 64, at least 4096).
    pub cells: Option<u32>,
}

impl Default for Datapath {
    fn default() -> Self {
        Datapath {
            mode: DatapathMode::None,
            n3_interface: None,
            n9_interface: None,
            n6_interface: None,
            xdp_attach: XdpAttach::Native,
            unknown_teid_to_slowpath_per_sec: 100,
            error_indications_per_sec: 10,
            protected_addresses: Vec::new(),
            spread: Spread::Off,
            spread_cpus: Vec::new(),
            tables: Tables::default(),
            icmp: Icmp::default(),
            mtu: Mtu::default(),
        }
    }
}

/// Downlink buffering (FAR BUFF, TS 29.244 clause 5.2.1): bounded per session and in
/// total; never an unbounded queue.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Buffering {
    /// Packets per session unless the session's BAR suggests fewer.
    pub packets_per_session: usize,
    /// Packets over all sessions.
    pub packets_total: usize,
    /// How long a packet is kept unless the BAR's DL Buffering Duration says otherwise.
    #[serde(with = "humantime_serde")]
    pub duration: Duration,
}

impl Default for Buffering {
    fn default() -> Self {
        Buffering {
            packets_per_session: 64,
            packets_total: 65536,
            duration: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Reporting {
    /// How often usage counters are compared with thresholds, quotas and periods.
    #[serde(with = "humantime_serde")]
    pub poll_interval: Duration,
}

impl Default for Reporting {
    fn default() -> Self {
        Reporting {
            poll_interval: Duration::from_millis(500),
        }
    }
}

/// The HTTP API (docs/configuration.md, "api"; docs/security.md for what each key
/// stops).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Api {
    /// HTTP listen address of the API, /metrics and the probes, e.g. 127.0.0.1:9100.
    #[serde(default)]
    pub listen: Option<SocketAddr>,
    /// A file holding the bearer token the subscriber routes (/api/v1/*, /status,
    /// /check) require. Unset: `listen` must be a loopback address.
    #[serde(default)]
    pub token_file: Option<std::path::PathBuf>,
    /// A plain listener of its own for /healthz, /readyz and /metrics alone (kubelet
    /// probes and scraping), with its own connection limit.
    #[serde(default)]
    pub probe_address: Option<SocketAddr>,
    /// Connections open at once per listener; more are closed at once.
    #[serde(default = "default_api_connections")]
    pub max_connections: usize,
    /// A request's head must arrive within this (from the connection's start, or the
    /// end of the previous answer), and an answer must be taken within it; else the
    /// connection is closed.
    #[serde(default = "default_api_timeout", with = "humantime_serde")]
    pub request_timeout: Duration,
    /// TLS on `listen` (not on `probe_address`): the server's certificate chain and its
    /// private key, PEM files; both or neither.
    #[serde(default)]
    pub tls_cert_file: Option<std::path::PathBuf>,
    #[serde(default)]
    pub tls_key_file: Option<std::path::PathBuf>,
}

impl Default for Api {
    fn default() -> Self {
        Api {
            listen: None,
            token_file: None,
            probe_address: None,
            max_connections: default_api_connections(),
            request_timeout: default_api_timeout(),
            tls_cert_file: None,
            tls_key_file: None,
        }
    }
}

fn default_api_connections() -> usize {
    64
}

fn default_api_timeout() -> Duration {
    Duration::from_secs(5)
}

/// Keeping sessions across restarts (docs/configuration.md, "state").
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct State {
    /// Directory of the state file and its journal. Set: a restart (SIGKILL, a crash,
    /// SIGTERM for an upgrade) keeps every session, its counts and the Recovery Time
    /// Stamp, and the data path keeps forwarding meanwhile. Unset: sessions end with upfd.
    #[serde(default)]
    pub directory: Option<std::path::PathBuf>,
    /// A new snapshot is written when the journal has grown past this many octets.
    #[serde(default)]
    pub journal_limit: Option<u64>,
    /// A restart takes the running data path as it is when it is this build's with
    /// these table sizes (no program loaded, no table allocated: nothing is lost);
    /// false: it always loads a new one and swaps it in (make-before-break).
    #[serde(default = "yes")]
    pub reuse_datapath: bool,
    /// A directory on a BPF filesystem where upfd pins its data path's program arrays
    /// (under its Node ID): the kernel empties them when no process holds them, and the
    /// programs left attached would then drop every packet until the next upfd takes
    /// over (pins.rs).
    #[serde(default = "pin_directory")]
    pub pin_directory: std::path::PathBuf,
}

fn yes() -> bool {
    true
}

fn pin_directory() -> std::path::PathBuf {
    "/sys/fs/bpf/upfd".into()
}

impl Default for State {
    fn default() -> Self {
        State {
            directory: None,
            journal_limit: None,
            reuse_datapath: true,
            pin_directory: pin_directory(),
        }
    }
}

impl Config {
    /// Where this UPF pins its data paths (pins.rs): `state.pin_directory`/its Node ID
    /// (other characters than letters, digits and `-` as `_`: 192_0_2_7), so that UPFs
    /// sharing a BPF filesystem never touch each other's pins.
    pub fn pin_root(&self) -> std::path::PathBuf {
        let id: String = self
            .node_id
            .chars()
            .map(|c| match c {
                // A BPF filesystem refuses names with a dot.
                'a'..='z' | 'A'..='Z' | '0'..='9' | '-' => c,
                _ => '_',
            })
            .collect();
        self.state.pin_directory.join(id)
    }

    /// What of this configuration a kept state depends on: a state written under
    /// another is not loaded (its TEIDs, addresses or SEIDs may not fit).
    pub fn state_fingerprint(&self) -> String {
        let pools: Vec<String> = self
            .ue_pools
            .iter()
            .map(|p| format!("{}={}", p.network_instance, p.prefix))
            .collect();
        format!(
            "node {}; teids {}-{}; max_sessions {}; datapath {:?}; n3 {:?}/{:?}; n9 {:?}; pools {}",
            self.node_id,
            self.gtpu.teid_range[0],
            self.gtpu.teid_range[1],
            self.limits.max_sessions,
            self.datapath.mode,
            self.gtpu.n3.ipv4,
            self.gtpu.n3.ipv6,
            self.gtpu.n9.as_ref().map(|e| (e.ipv4, e.ipv6)),
            pools.join(",")
        )
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    /// "error", "warn", "info" or "debug".
    pub level: String,
}

impl Default for Log {
    fn default() -> Self {
        Log {
            level: "info".into(),
        }
    }
}

fn default_stop_after() -> Duration {
    Duration::from_secs(10)
}

fn default_pfcp_port() -> u16 {
    8805
}
fn default_heartbeat() -> Duration {
    Duration::from_secs(10)
}
fn default_t1() -> Duration {
    Duration::from_secs(3)
}
fn default_n1() -> u32 {
    3
}
fn default_cache_ttl() -> Duration {
    Duration::from_secs(15)
}
fn default_cache_max() -> usize {
    500_000
}
fn default_release() -> Duration {
    Duration::from_secs(30)
}
fn default_teid_range() -> [u32; 2] {
    [1, 0xffff_ffff]
}

/// A configuration error, on one line: where the value came from (the file, with the
/// line when known; an environment variable; `--set`), the key path, the value and what
/// is allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file's path, `environment UPFD_...` or `--set`.
    pub origin: String,
    /// The line in the file, when known.
    pub line: Option<usize>,
    /// The key path (`gtpu.n3.ipv4`, `ue_pools[1].prefix`); empty: the file or variable
    /// as a whole.
    pub path: String,
    pub message: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.origin)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Where an override came from (the file's values are named by the file's path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// An environment variable, by its name.
    Env(String),
    /// A `--set` flag.
    Set,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Origin::Env(n) => write!(f, "environment {n}"),
            Origin::Set => f.write_str("--set"),
        }
    }
}

/// Environment variables with this prefix override keys of the file.
pub const ENV_PREFIX: &str = "UPFD_";

/// One step of a key path: a map's key or a list's index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seg {
    Key(String),
    Index(usize),
}

/// A key path as errors print it: `n4.port`, `ue_pools[1].prefix`.
fn path_string(segs: &[Seg]) -> String {
    let mut s = String::new();
    for g in segs {
        match g {
            Seg::Key(k) => {
                if !s.is_empty() {
                    s.push('.');
                }
                s.push_str(k);
            }
            Seg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

/// Key path steps from their text: lower-case keys (`a-z`, `0-9`, `_`), a number
/// indexing a list; the first a key. None if malformed.
fn segments<'a>(parts: impl Iterator<Item = &'a str>) -> Option<Vec<Seg>> {
    let mut v = Vec::new();
    for p in parts {
        let ok = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_';
        if p.is_empty() || !p.bytes().all(ok) {
            return None;
        }
        if p.bytes().all(|b| b.is_ascii_digit()) {
            v.push(Seg::Index(p.parse().ok()?));
        } else {
            v.push(Seg::Key(p.to_string()));
        }
    }
    matches!(v.first(), Some(Seg::Key(_))).then_some(v)
}

/// A value given for one key besides the file: `UPFD_<PATH>` in the environment or
/// `--set KEY.PATH=VALUE`. It replaces the key's value in the file's YAML tree (maps on
/// the way are created) before the tree is read, so every key can be overridden and is
/// checked as in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Override {
    /// The key path, as errors print it.
    pub key: String,
    segs: Vec<Seg>,
    /// The value as given, read as YAML (`5s`, `[10.0.0.0/8]`, `{ ipv4: 10.0.0.7 }`).
    pub value: String,
    pub origin: Origin,
}

impl Override {
    /// `UPFD_N4__HEARTBEAT_INTERVAL=5s`: the key path upper-cased, `.` written `__`, a
    /// list's entry by its index (`UPFD_UE_POOLS__0__PREFIX`).
    pub fn from_env(name: &str, value: &str) -> Result<Override, ConfigError> {
        let origin = Origin::Env(name.to_string());
        let key = name
            .strip_prefix(ENV_PREFIX)
            .unwrap_or(name)
            .to_ascii_lowercase();
        let segs = segments(key.split("__")).ok_or_else(|| ConfigError {
            origin: origin.to_string(),
            line: None,
            path: String::new(),
            message: format!(
                "not a key path: expected {ENV_PREFIX} and the key path upper-cased with `.` as `__`, e.g. UPFD_N4__HEARTBEAT_INTERVAL"
            ),
        })?;
        Ok(Override {
            key: path_string(&segs),
            segs,
            value: value.to_string(),
            origin,
        })
    }

    /// `--set n4.heartbeat_interval=5s`; a list's entry by its index
    /// (`ue_pools[0].prefix=...` or `ue_pools.0.prefix=...`).
    pub fn from_set(arg: &str) -> Result<Override, ConfigError> {
        let bad = |message: String| ConfigError {
            origin: Origin::Set.to_string(),
            line: None,
            path: String::new(),
            message,
        };
        let Some((key, value)) = arg.split_once('=') else {
            return Err(bad(format!(
                "{arg:?}: expected KEY.PATH=VALUE, e.g. n4.heartbeat_interval=5s"
            )));
        };
        let dotted = key.trim().replace('[', ".").replace(']', "");
        let segs = segments(dotted.split('.')).ok_or_else(|| {
            bad(format!(
                "{key:?}: not a key path: expected keys separated by `.`, e.g. n4.heartbeat_interval or ue_pools[0].prefix"
            ))
        })?;
        Ok(Override {
            key: path_string(&segs),
            segs,
            value: value.to_string(),
            origin: Origin::Set,
        })
    }

    fn error(&self, message: String) -> ConfigError {
        ConfigError {
            origin: self.origin.to_string(),
            line: None,
            path: self.key.clone(),
            message,
        }
    }

    /// Put the value into `tree`.
    fn apply(&self, tree: &mut Value) -> Result<(), ConfigError> {
        let value: Value = serde_norway::from_str(&self.value).map_err(|e| {
            self.error(format!(
                "{:?}: not a YAML value: {}",
                self.value,
                yaml_message(&e.to_string())
            ))
        })?;
        let mut cur = tree;
        for (i, seg) in self.segs.iter().enumerate() {
            if cur.is_null() && matches!(seg, Seg::Key(_)) {
                *cur = Value::Mapping(serde_norway::Mapping::new());
            }
            let here = match path_string(&self.segs[..i]) {
                p if p.is_empty() => "the file".to_string(),
                p => p,
            };
            cur = match (seg, cur) {
                (Seg::Key(k), Value::Mapping(m)) => {
                    m.entry(Value::String(k.clone())).or_insert(Value::Null)
                }
                (Seg::Index(n), Value::Sequence(s)) => {
                    let len = s.len();
                    match s.get_mut(*n) {
                        Some(v) => v,
                        None => {
                            return Err(self.error(format!(
                                "{here} has {len} entries: an index 0-{} (an override replaces an entry, it adds none)",
                                len.saturating_sub(1)
                            )))
                        }
                    }
                }
                (Seg::Key(_), other) => {
                    return Err(self.error(format!("{here} is {}, not a map", kind(other))))
                }
                (Seg::Index(_), other) => {
                    return Err(self.error(format!("{here} is {}, not a list", kind(other))))
                }
            };
        }
        *cur = value;
        Ok(())
    }
}

/// The top-level keys of the file ([`Config`]'s fields): an environment variable is an
/// override when its first key is one of these.
pub const TOP_KEYS: &[&str] = &[
    "node_id",
    "n4",
    "gtpu",
    "ue_pools",
    "network_instances",
    "predefined_rules",
    "applications",
    "applications_stop_after",
    "limits",
    "datapath",
    "buffering",
    "reporting",
    "api",
    "state",
    "cpus",
    "log",
];

/// Whether environment variable `name` is meant as an override: `UPFD_` and a top-level
/// key, then the end or `__`. Kubernetes puts `UPFD_N4_SERVICE_HOST` and the like into a
/// pod's environment for a Service named `upfd-n4` (service links): those are not.
fn is_override(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(ENV_PREFIX) else {
        return false;
    };
    let first = rest.split("__").next().unwrap_or("").to_ascii_lowercase();
    TOP_KEYS.contains(&first.as_str())
}

/// The overrides in the environment: every variable `UPFD_<KEY>` or `UPFD_<KEY>__...`
/// whose first key is a top-level key, in name order; and the other `UPFD_` variables'
/// names (ignored, to be said).
pub fn env_overrides() -> Result<(Vec<Override>, Vec<String>), ConfigError> {
    let all: Vec<(String, std::ffi::OsString)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v)))
        .filter(|(k, _)| k.starts_with(ENV_PREFIX))
        .collect();
    let (mut vars, ignored): (Vec<_>, Vec<_>) = all.into_iter().partition(|(k, _)| is_override(k));
    let mut ignored: Vec<String> = ignored.into_iter().map(|(k, _)| k).collect();
    ignored.sort();
    vars.sort();
    let overrides = vars
        .into_iter()
        .map(|(k, v)| match v.into_string() {
            Ok(v) => Override::from_env(&k, &v),
            Err(_) => Err(ConfigError {
                origin: Origin::Env(k).to_string(),
                line: None,
                path: String::new(),
                message: "the value is not UTF-8".into(),
            }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((overrides, ignored))
}

/// Where a loaded configuration's values came from: the file, and the overrides in the
/// order applied (the last of a key wins).
#[derive(Debug, Clone, Default)]
pub struct Sources {
    pub file: String,
    pub overrides: Vec<Override>,
}

impl Sources {
    /// The override that set `path` (or a key above it), the last one applied; None:
    /// the file.
    fn override_of(&self, path: &str) -> Option<&Override> {
        let below = |a: &str, b: &str| {
            a.strip_prefix(b)
                .is_some_and(|r| r.starts_with('.') || r.starts_with('['))
        };
        self.overrides
            .iter()
            .rev()
            .find(|o| path == o.key || below(path, &o.key))
            // A value an override made a map of (`--set n4.port.x=1`).
            .or_else(|| {
                self.overrides
                    .iter()
                    .rev()
                    .find(|o| !path.is_empty() && below(&o.key, path))
            })
    }

    /// An error about the value at `path`, saying where the value came from.
    fn error(&self, path: &str, message: String) -> ConfigError {
        ConfigError {
            origin: match self.override_of(path) {
                Some(o) => o.origin.to_string(),
                None => self.file.clone(),
            },
            line: None,
            path: path.to_string(),
            message,
        }
    }
}

/// What a YAML value is, for "not a map" and the like.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Sequence(_) => "a list",
        Value::Mapping(_) => "a map",
        Value::Tagged(_) => "a tagged value",
    }
}

/// A YAML value on one line, as short as it stays readable: strings quoted, lists and
/// maps in flow style.
fn show(v: &Value) -> String {
    let s = match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Sequence(s) => {
            let items: Vec<String> = s.iter().map(show).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Mapping(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| {
                    let k = match k {
                        Value::String(s) => s.clone(),
                        other => show(other),
                    };
                    format!("{k}: {}", show(v))
                })
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        Value::Tagged(t) => format!("{} {}", t.tag, show(&t.value)),
    };
    if s.chars().count() > 60 {
        let cut: String = s.chars().take(57).collect();
        format!("{cut}...")
    } else {
        s
    }
}

/// The value at `segs` in `tree`, if there is one.
fn lookup<'a>(tree: &'a Value, segs: &[Seg]) -> Option<&'a Value> {
    let mut cur = tree;
    for g in segs {
        cur = match (g, cur) {
            (Seg::Key(k), Value::Mapping(m)) => m.get(k.as_str())?,
            (Seg::Index(i), Value::Sequence(s)) => s.get(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// A YAML library message without the key path and position it may carry (both are
/// said once, by the error itself).
fn yaml_message(m: &str) -> String {
    let m = m.trim();
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    if let Some(i) = m.find(" at line ") {
        let rest = &m[i + " at line ".len()..];
        let l = digits(rest);
        if l > 0 {
            if let Some(rest) = rest[l..].strip_prefix(" column ") {
                let c = digits(rest);
                if c > 0 {
                    return format!("{}{}", &m[..i], &rest[c..]);
                }
            }
        }
    }
    m.to_string()
}

/// The text between `start` and the next `end` in `s`.
fn between<'a>(s: &'a str, start: &str, end: &str) -> Option<&'a str> {
    let i = s.find(start)? + start.len();
    let j = s[i..].find(end)?;
    Some(&s[i..i + j])
}

const DURATION: &str = "a duration with units: 10s, 500ms, 2m";
const WHOLE: &str = "a whole number 0-18446744073709551615";
const IP: &str = "an IP address, e.g. 192.0.2.7 or \"2001:db8::7\"";
const IPV4: &str = "an IPv4 address, e.g. 192.0.2.7";
const IPV6: &str = "an IPv6 address, e.g. \"2001:db8::7\"";
const PREFIX: &str = "a prefix, e.g. 10.45.0.0/16 or \"2001:db8:cafe::/48\"";
const NAME: &str = "a name (text)";
const RULE_ID: &str = "an ID, a whole number 1-2147483647";
const NODE_ID: &str = "an IPv4 or IPv6 address or an FQDN, e.g. upf1.example.org";

/// What a key takes, in words (ranges, units, examples); None for a key not listed.
fn allowed(path: &str) -> Option<String> {
    // Indices do not matter: `ue_pools[3].prefix` is `ue_pools[].prefix`.
    let mut p = String::new();
    let mut skip = false;
    for c in path.chars() {
        match c {
            '[' => {
                p.push('[');
                skip = true;
            }
            ']' => {
                p.push(']');
                skip = false;
            }
            _ if skip => {}
            _ => p.push(c),
        }
    }
    let s = match p.as_str() {
        "node_id" => NODE_ID,
        "n4.address" | "datapath.protected_addresses[]" => IP,
        "n4.port" => "a UDP port, 1-65535",
        "n4.allowed_peers" => "a list of prefixes, e.g. [10.0.0.0/8]",
        "n4.allowed_peers[]" | "ue_pools[].prefix" => PREFIX,
        "n4.associate_with" => "a list of IP:port, e.g. [\"10.0.0.2:8805\"]",
        "n4.associate_with[]" => "IP:port, e.g. \"10.0.0.2:8805\" or \"[2001:db8::2]:8805\"",
        "n4.heartbeat_interval"
        | "n4.t1"
        | "n4.response_cache_ttl"
        | "n4.graceful_release_period"
        | "buffering.duration"
        | "reporting.poll_interval"
        | "applications_stop_after"
        | "predefined_rules.urrs[].measurement_period" => DURATION,
        "n4.n1" => "a whole number of retransmissions 0-10",
        "n4.response_cache_max" => "a whole number of responses 0-18446744073709551615",
        "n4.strict" => "true or false",
        "n4.receive_buffer" | "state.journal_limit" => {
            "a size in octets, a whole number, e.g. 8388608"
        }
        "gtpu.n3" | "gtpu.n9" | "network_instances[].n3" | "network_instances[].n9" => {
            "a map { ipv4, ipv6 }, e.g. { ipv4: 192.0.2.7 }"
        }
        "gtpu.n3.ipv4"
        | "gtpu.n9.ipv4"
        | "network_instances[].n3.ipv4"
        | "network_instances[].n9.ipv4" => IPV4,
        "gtpu.n3.ipv6"
        | "gtpu.n9.ipv6"
        | "network_instances[].n3.ipv6"
        | "network_instances[].n9.ipv6" => IPV6,
        "gtpu.teid_range" => "[min, max], whole numbers 1-4294967295, at least 1024 TEIDs",
        "gtpu.teid_range[]" => "a TEID, a whole number 1-4294967295",
        "ue_pools" => "a list of { network_instance, prefix }",
        "network_instances" => "a list of { name, n3, n9 }",
        "ue_pools[].network_instance"
        | "network_instances[].name"
        | "predefined_rules.fars[].network_instance"
        | "predefined_rules.rules[].name" => NAME,
        "predefined_rules.fars[].id"
        | "predefined_rules.qers[].id"
        | "predefined_rules.urrs[].id"
        | "predefined_rules.rules[].far"
        | "predefined_rules.rules[].qers[]"
        | "predefined_rules.rules[].urrs[]" => RULE_ID,
        "predefined_rules.fars[].action" => "forward or drop",
        "predefined_rules.fars[].destination_interface" => "access, core, sgi-lan or cp-function",
        "predefined_rules.qers[].gate_ul" | "predefined_rules.qers[].gate_dl" => "open or closed",
        "predefined_rules.qers[].mbr_ul_kbps" | "predefined_rules.qers[].mbr_dl_kbps" => {
            "kbit/s, a whole number 0-18446744073709551615"
        }
        "predefined_rules.qers[].qfi" => "a QFI, a whole number 0-63",
        "predefined_rules.urrs[].measurement_method" => "a list of volume, duration",
        "predefined_rules.urrs[].measurement_method[]" => "volume or duration",
        "predefined_rules.urrs[].volume_threshold_bytes" => {
            "octets, a whole number 0-18446744073709551615"
        }
        "predefined_rules.rules[].application" | "predefined_rules.rules[].application_id" => {
            "an Application ID of applications[]"
        }
        "predefined_rules.rules[].sdf_filters" => {
            "a list of IPFilterRules, e.g. [\"permit out ip from any to assigned\"]"
        }
        "applications" => "a list of { id, flow_descriptions, urls, domain_names }",
        "applications[].id" => "an Application ID (text)",
        "applications[].flow_descriptions" => {
            "a list of IPFilterRules, e.g. [\"permit out 17 from 192.0.2.0/24 to assigned\"]"
        }
        "applications[].flow_descriptions[]" => {
            "an IPFilterRule, e.g. \"permit out 6 from 192.0.2.0/24 443 to assigned\""
        }
        "applications[].urls" => "a list of URLs, e.g. [\"http://video.example/live\"]",
        "applications[].urls[]" => "a URL, http://host[:port][/path] or https://host",
        "applications[].domain_names" => {
            "a list of domain names, e.g. [example.com, { name: cdn.example, protocol: TLS_SNI }]"
        }
        "applications[].domain_names[]" => {
            "a domain name, or { name, protocol } with protocol DNS_QNAME, TLS_SNI, TLS_SAN or TLS_SCN"
        }
        "limits.max_sessions" => "a whole number 1-4294967295",
        "limits.max_pdrs_per_session"
        | "limits.max_fars_per_session"
        | "limits.max_qers_per_session"
        | "limits.max_urrs_per_session"
        | "limits.max_sdf_filters_per_pdr"
        | "buffering.packets_per_session"
        | "buffering.packets_total"
        | "datapath.unknown_teid_to_slowpath_per_sec"
        | "datapath.error_indications_per_sec"
        | "datapath.icmp.errors_per_sec"
        | "datapath.icmp.burst"
        | "datapath.icmp.session_errors_per_sec"
        | "datapath.icmp.session_burst" => WHOLE,
        "datapath.icmp.source_ipv4" => IPV4,
        "datapath.icmp.source_ipv6" => IPV6,
        "datapath.icmp" => {
            "a map { source_ipv4, source_ipv6, errors_per_sec, burst, session_errors_per_sec, session_burst }"
        }
        "datapath.mtu" => "a map { n3, n6, n9 }, e.g. { n3: 1500 }",
        "datapath.mtu.n3" | "datapath.mtu.n6" | "datapath.mtu.n9" => {
            return Some(format!(
                "an MTU in octets, {}-{}",
                MTU_RANGE.start(),
                MTU_RANGE.end()
            ))
        }
        "datapath.tables.cold_entries"
        | "datapath.tables.sdf_entries"
        | "datapath.tables.cells" => "a whole number of entries 1-4294967295",
        "datapath.mode" => "none or xdp",
        "datapath.n3_interface" | "datapath.n9_interface" | "datapath.n6_interface" => {
            "an interface name, e.g. eth1"
        }
        "datapath.xdp_attach" => "native or generic",
        "datapath.spread" => "off, teid or inner",
        "datapath.spread_cpus" => "a list of CPU numbers, e.g. [0, 1]",
        "datapath.spread_cpus[]" => {
            return Some(format!("a CPU number 0-{}", cpus_configured() - 1))
        }
        "datapath.protected_addresses" => "a list of IP addresses, e.g. [10.0.0.2]",
        "api.listen" | "api.probe_address" => {
            "IP:port, e.g. \"127.0.0.1:9100\" or \"0.0.0.0:9100\""
        }
        "api.token_file" => "a file path, e.g. /etc/upfd/api/token",
        "api.max_connections" => "a whole number of connections, e.g. 64",
        "api.request_timeout" => "a duration, e.g. 5s",
        "api.tls_cert_file" => "a PEM file of the API's certificate chain",
        "api.tls_key_file" => "a PEM file of the API certificate's private key",
        "state.directory" => "a directory path, e.g. /var/lib/upfd",
        "state.reuse_datapath" => "true or false",
        "state.pin_directory" => "a directory on a BPF filesystem, e.g. /sys/fs/bpf/upfd",
        "cpus" => "a list of CPU numbers, e.g. [0, 1]",
        "cpus[]" => return Some(format!("a CPU number 0-{}", cpus_configured() - 1)),
        "log.level" => "error, warn, info or debug",
        _ => return None,
    };
    Some(s.to_string())
}

/// What serde's "expected ..." says, in words of this file (for keys [`allowed`] does
/// not list).
fn expected_in_words(raw: &str) -> String {
    let e = raw.rsplit("expected ").next().unwrap_or(raw).trim();
    match e {
        "u8" => "a whole number 0-255".into(),
        "u16" => "a whole number 0-65535".into(),
        "u32" => "a whole number 0-4294967295".into(),
        "u64" | "usize" => WHOLE.into(),
        "a boolean" => "true or false".into(),
        "a sequence" => "a list".into(),
        "a string" => "text".into(),
        _ if e.starts_with("struct ") || e == "a map" => "a map".into(),
        _ => e.replace('`', ""),
    }
}

/// A deserialising error in words: the key path and the message (value, what is wrong,
/// what is allowed).
fn describe(e: &serde_path_to_error::Error<serde_norway::Error>, tree: &Value) -> (String, String) {
    use serde_path_to_error::Segment;
    let mut segs: Vec<Seg> = e
        .path()
        .iter()
        .filter_map(|s| match s {
            Segment::Seq { index } => Some(Seg::Index(*index)),
            Segment::Map { key } | Segment::Enum { variant: key } => Some(Seg::Key(key.clone())),
            Segment::Unknown => None,
        })
        .collect();
    let raw = yaml_message(&e.inner().to_string());
    // The library may start with the path too: say it once.
    let raw = match raw.split_once(": ") {
        Some((p, rest)) if p == path_string(&segs) => rest.to_string(),
        _ => raw,
    };
    if let Some(field) = between(&raw, "missing field `", "`") {
        segs.push(Seg::Key(field.to_string()));
        let path = path_string(&segs);
        let want = allowed(&path).unwrap_or_else(|| "a value".into());
        return (path, format!("missing: required, {want}"));
    }
    if let Some(field) = between(&raw, "unknown field `", "`") {
        if segs.last() != Some(&Seg::Key(field.to_string())) {
            segs.push(Seg::Key(field.to_string()));
        }
        let parent = match path_string(&segs[..segs.len() - 1]) {
            p if p.is_empty() => "the top level".to_string(),
            p => p,
        };
        let keys: Vec<&str> = raw
            .split_once("expected")
            .map(|(_, k)| k.split('`').skip(1).step_by(2).collect())
            .unwrap_or_default();
        let message = if keys.is_empty() {
            format!("unknown key: {parent} has no keys")
        } else {
            format!("unknown key: {parent} has {}", keys.join(", "))
        };
        return (path_string(&segs), message);
    }
    let path = path_string(&segs);
    let want = allowed(&path).unwrap_or_else(|| expected_in_words(&raw));
    let Some(value) = lookup(tree, &segs) else {
        return (path, format!("{raw}: expected {want}"));
    };
    let shown = show(value);
    let number = match value {
        Value::Number(_) => true,
        Value::String(s) => s.trim().parse::<f64>().is_ok(),
        _ => false,
    };
    if want == DURATION && number {
        return (
            path,
            format!("{shown}: a duration needs units: 10s, 500ms, 2m"),
        );
    }
    if raw.starts_with("invalid value: integer") {
        return (path, format!("{shown} is out of range: {want}"));
    }
    (path, format!("{shown}: expected {want}"))
}

/// The CPUs of this machine (configured, online or not).
fn cpus_configured() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize
}

/// A duration as the file writes them.
fn show_duration(d: Duration) -> String {
    if d.is_zero() {
        "0s".into()
    } else {
        format!("{d:?}")
    }
}

impl Config {
    /// The file alone (no overrides).
    #[cfg(test)]
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Self::load_with(path, &[])
    }

    /// The file with the overrides applied in order (the environment's first, then
    /// `--set`'s: the last of a key wins).
    pub fn load_with(path: &Path, overrides: &[Override]) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            origin: file.clone(),
            line: None,
            path: String::new(),
            message: format!("cannot read it: {e}"),
        })?;
        Self::parse_with(&text, &file, overrides)
    }

    #[cfg(test)]
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        Self::parse_with(text, file, &[])
    }

    /// `text` is the file's (named `file` in errors), then the overrides.
    pub fn parse_with(
        text: &str,
        file: &str,
        overrides: &[Override],
    ) -> Result<Config, ConfigError> {
        let sources = Sources {
            file: file.to_string(),
            overrides: overrides.to_vec(),
        };
        let mut tree: Value = serde_norway::from_str(text).map_err(|e| ConfigError {
            origin: file.to_string(),
            line: e.location().map(|l| l.line()),
            path: String::new(),
            message: format!("not YAML: {}", yaml_message(&e.to_string())),
        })?;
        for o in overrides {
            o.apply(&mut tree)?;
        }
        let mut cfg: Config = serde_path_to_error::deserialize(tree.clone()).map_err(|e| {
            let (path, message) = describe(&e, &tree);
            let mut err = sources.error(&path, message);
            if sources.override_of(&path).is_none() {
                err.line = file_line(text, &path);
            }
            err
        })?;
        cfg.check()
            .map_err(|(path, message)| sources.error(&path, message))?;
        cfg.sources = sources;
        Ok(cfg)
    }

    /// Checks that need more than one key's type; the first error.
    fn check(&self) -> Result<(), (String, String)> {
        fn err(path: impl Into<String>, message: String) -> Result<(), (String, String)> {
            Err((path.into(), message))
        }
        if self.node_id.trim().is_empty() {
            return err("node_id", format!("{:?}: expected {NODE_ID}", self.node_id));
        }
        if self.n4.address.is_unspecified() {
            return err(
                "n4.address",
                format!(
                    "{}: expected an address of this host that SMFs reach (it is in UP F-SEIDs), not a wildcard",
                    self.n4.address
                ),
            );
        }
        if self.n4.port == 0 {
            return err("n4.port", "0 is out of range: a UDP port, 1-65535".into());
        }
        let endpoints = [
            ("gtpu.n3", Some(&self.gtpu.n3)),
            ("gtpu.n9", self.gtpu.n9.as_ref()),
        ];
        for (key, e) in endpoints {
            if e.is_some_and(|e| e.ipv4.is_none() && e.ipv6.is_none()) {
                return err(
                    key,
                    "{}: needs ipv4 or ipv6, e.g. { ipv4: 192.0.2.7 }".into(),
                );
            }
        }
        let [lo, hi] = self.gtpu.teid_range;
        if lo == 0 || lo > hi || hi - lo < 1023 {
            return err(
                "gtpu.teid_range",
                format!(
                    "[{lo}, {hi}]: expected [min, max] with 1 <= min <= max <= 4294967295 and at least 1024 TEIDs (unpredictable ones)"
                ),
            );
        }
        for (key, d) in [
            ("n4.t1", self.n4.t1),
            ("n4.heartbeat_interval", self.n4.heartbeat_interval),
        ] {
            if d.is_zero() {
                return err(
                    key,
                    format!("{}: expected more than 0, {DURATION}", show_duration(d)),
                );
            }
        }
        if self.n4.n1 > 10 {
            return err(
                "n4.n1",
                format!(
                    "{} is out of range: a whole number of retransmissions 0-10",
                    self.n4.n1
                ),
            );
        }
        if self.datapath.mode == DatapathMode::Xdp {
            for (key, i) in [
                ("datapath.n3_interface", &self.datapath.n3_interface),
                ("datapath.n6_interface", &self.datapath.n6_interface),
            ] {
                if i.is_none() {
                    return err(
                        key,
                        "missing: required with datapath.mode xdp, an interface name, e.g. eth1"
                            .into(),
                    );
                }
            }
        }
        if self.reporting.poll_interval < Duration::from_millis(10) {
            return err(
                "reporting.poll_interval",
                format!(
                    "{}: expected at least 10ms, {DURATION}",
                    show_duration(self.reporting.poll_interval)
                ),
            );
        }
        if self.buffering.packets_per_session > self.buffering.packets_total {
            return err(
                "buffering.packets_per_session",
                format!(
                    "{}: expected at most buffering.packets_total ({})",
                    self.buffering.packets_per_session, self.buffering.packets_total
                ),
            );
        }
        let m = self.limits.max_sessions;
        if m == 0 || m > u32::MAX as usize {
            return err(
                "limits.max_sessions",
                format!("{m} is out of range: a whole number 1-4294967295"),
            );
        }
        for (key, n) in [
            (
                "datapath.tables.cold_entries",
                self.datapath.tables.cold_entries,
            ),
            (
                "datapath.tables.sdf_entries",
                self.datapath.tables.sdf_entries,
            ),
            ("datapath.tables.cells", self.datapath.tables.cells),
        ] {
            if n == Some(0) {
                return err(
                    key,
                    "0 is out of range: a whole number of entries 1-4294967295".into(),
                );
            }
        }
        let configured = cpus_configured();
        for (key, list) in [
            ("cpus", &self.cpus),
            ("datapath.spread_cpus", &self.datapath.spread_cpus),
        ] {
            if let Some((i, c)) = list.iter().enumerate().find(|(_, c)| **c >= configured) {
                return err(
                    format!("{key}[{i}]"),
                    format!(
                        "{c} is out of range: a CPU number 0-{} (this machine's)",
                        configured - 1
                    ),
                );
            }
        }
        if let Some((i, c)) = self
            .datapath
            .spread_cpus
            .iter()
            .enumerate()
            .find(|(i, c)| self.datapath.spread_cpus[..*i].contains(c))
        {
            return err(
                format!("datapath.spread_cpus[{i}]"),
                format!("{c} is listed twice: each CPU once"),
            );
        }
        if self.datapath.spread_cpus.len() > upf::abi::MAX_SPREAD_CPUS as usize {
            return err(
                "datapath.spread_cpus",
                format!(
                    "{} CPUs: at most {}",
                    self.datapath.spread_cpus.len(),
                    upf::abi::MAX_SPREAD_CPUS
                ),
            );
        }
        if self.datapath.spread != Spread::Off && self.datapath.mode != DatapathMode::Xdp {
            return err(
                "datapath.spread",
                "spreads what the XDP programs receive: needs datapath.mode xdp".into(),
            );
        }
        self.datapath.interface_mtus()?;
        let icmp = &self.datapath.icmp;
        for (key, per_sec, burst) in [
            ("errors_per_sec", icmp.errors_per_sec, icmp.burst),
            (
                "session_errors_per_sec",
                icmp.session_errors_per_sec,
                icmp.session_burst,
            ),
        ] {
            if per_sec > 0 && burst == 0 {
                let burst_key = key.replace("errors_per_sec", "burst");
                return err(
                    format!("datapath.icmp.{burst_key}"),
                    format!(
                        "0 is out of range: at least 1 (errors sent at once) while datapath.icmp.{key} is {per_sec}; {key}: 0 sends none"
                    ),
                );
            }
        }
        let sources = [
            ("source_ipv4", icmp.source_ipv4.map(IpAddr::V4)),
            ("source_ipv6", icmp.source_ipv6.map(IpAddr::V6)),
        ];
        for (key, a) in sources {
            let Some(a) = a else { continue };
            let broadcast = matches!(a, IpAddr::V4(v4) if v4.is_broadcast());
            if a.is_unspecified() || a.is_multicast() || broadcast {
                return err(
                    format!("datapath.icmp.{key}"),
                    format!("{a}: expected a unicast address of this UPF (the ICMP errors' source, RFC 1812 clause 4.3.2.4)"),
                );
            }
        }
        for (i, p) in self.ue_pools.iter().enumerate() {
            let key = format!("ue_pools[{i}].prefix");
            let too_small = match p.prefix {
                IpNet::V4(n) => n.prefix_len() > 30,
                IpNet::V6(n) => n.prefix_len() > 126,
            };
            if too_small {
                return err(
                    key,
                    format!(
                        "{}: leaves no room for UE addresses: expected an IPv4 prefix of /30 or shorter, IPv6 /126 or shorter",
                        p.prefix
                    ),
                );
            }
            for (j, q) in self.ue_pools[..i].iter().enumerate() {
                let (a, b) = (p.prefix.trunc(), q.prefix.trunc());
                if a.contains(&b.network()) || b.contains(&a.network()) {
                    return err(
                        key,
                        format!(
                            "{}: overlaps ue_pools[{j}].prefix {}: UE pools must not overlap, in one network instance or across (the data path finds a session by its UE address alone)",
                            p.prefix, q.prefix
                        ),
                    );
                }
                if p.network_instance == q.network_instance
                    && p.prefix.addr().is_ipv4() == q.prefix.addr().is_ipv4()
                {
                    return err(
                        key,
                        format!(
                            "{}: network instance {:?} has an {} pool already (ue_pools[{j}]): one prefix per IP version and network instance",
                            p.prefix,
                            p.network_instance,
                            if p.prefix.addr().is_ipv4() { "IPv4" } else { "IPv6" }
                        ),
                    );
                }
            }
        }
        for (i, n) in self.network_instances.iter().enumerate() {
            if n.name.trim().is_empty() {
                return err(
                    format!("network_instances[{i}].name"),
                    format!("{:?}: expected a name (text), not empty", n.name),
                );
            }
            if let Some(j) = self.network_instances[..i]
                .iter()
                .position(|m| m.name == n.name)
            {
                return err(
                    format!("network_instances[{i}].name"),
                    format!("{:?}: named twice (network_instances[{j}] too)", n.name),
                );
            }
            for (side, e) in [("n3", &n.n3), ("n9", &n.n9)] {
                if e.as_ref()
                    .is_some_and(|e| e.ipv4.is_none() && e.ipv6.is_none())
                {
                    return err(
                        format!("network_instances[{i}].{side}"),
                        "{}: needs ipv4 or ipv6, e.g. { ipv4: 192.0.2.7 }".into(),
                    );
                }
            }
        }
        for (a, key) in self.gtpu_addresses() {
            if a.is_unspecified() {
                return err(
                    key,
                    format!("{a}: expected an address of this host that gNBs and UPFs reach (it is in F-TEIDs), not a wildcard"),
                );
            }
        }
        if let Err(e) = self.predefined_rules.build() {
            return err("predefined_rules", e);
        }
        pfd_table(&self.applications)?;
        self.predefined_rules
            .check_applications(&self.applications)?;
        if self.applications_stop_after < Duration::from_secs(1) {
            return err(
                "applications_stop_after",
                format!(
                    "{}: expected at least 1s (flows are looked at once a second)",
                    show_duration(self.applications_stop_after)
                ),
            );
        }
        let addrs = self.gtpu_addresses();
        for v4 in [true, false] {
            let n = addrs.iter().filter(|(a, _)| a.is_ipv4() == v4).count();
            if n > upf::abi::MAX_LOCAL_ADDRS as usize {
                return err(
                    "network_instances",
                    format!(
                        "{n} distinct GTP-U {} addresses (gtpu and network_instances); the data path takes {}",
                        if v4 { "IPv4" } else { "IPv6" },
                        upf::abi::MAX_LOCAL_ADDRS
                    ),
                );
            }
        }
        let protected = self.protected_addresses();
        for v4 in [true, false] {
            let n = protected.iter().filter(|a| a.is_ipv4() == v4).count();
            if n > upf::abi::MAX_PROTECTED_ADDRS as usize {
                return err(
                    "datapath.protected_addresses",
                    format!(
                        "{n} distinct {} addresses with n4.address and api.listen; the data path takes {}",
                        if v4 { "IPv4" } else { "IPv6" },
                        upf::abi::MAX_PROTECTED_ADDRS
                    ),
                );
            }
        }
        if let Some(a) = self.api.listen {
            if self.api.token_file.is_none() && !a.ip().is_loopback() {
                return err(
                    "api.listen",
                    format!(
                        "{a} is not a loopback address and api.token_file is not set: the API shows every subscriber's sessions, UE addresses and TEIDs; set api.token_file to a file holding a bearer token, or listen on 127.0.0.1 (docs/security.md)"
                    ),
                );
            }
        }
        match (&self.api.tls_cert_file, &self.api.tls_key_file) {
            (Some(_), None) => {
                return err(
                    "api.tls_key_file",
                    "not set, but api.tls_cert_file is: TLS needs the certificate and its key"
                        .into(),
                )
            }
            (None, Some(_)) => {
                return err(
                    "api.tls_cert_file",
                    "not set, but api.tls_key_file is: TLS needs the certificate and its key"
                        .into(),
                )
            }
            _ => {}
        }
        if self.api.max_connections == 0 {
            return err(
                "api.max_connections",
                "0: at least 1 (a limit of open connections per listener)".into(),
            );
        }
        if self.api.request_timeout.is_zero() {
            return err(
                "api.request_timeout",
                "0s: a request needs time to arrive, e.g. 5s".into(),
            );
        }
        if !["error", "warn", "info", "debug"].contains(&self.log.level.as_str()) {
            return err(
                "log.level",
                format!("{:?}: expected error, warn, info or debug", self.log.level),
            );
        }
        Ok(())
    }

    /// What can be checked on this host (this network namespace) without starting, each
    /// problem once: the interfaces the data path goes on exist; the addresses upfd
    /// binds are this host's (N4, the API unless a wildcard, with `datapath.mode: xdp`
    /// the GTP-U ones); the state directory is writable or can be created; the API's
    /// token file holds a token and its TLS certificate and key go together. `check-config`
    /// runs these after the file's checks, and so does the start, before anything else.
    pub fn check_host(&self) -> Vec<ConfigError> {
        let mut errs: Vec<(String, String)> = Vec::new();
        let xdp = self.datapath.mode == DatapathMode::Xdp;
        if xdp {
            let d = &self.datapath;
            for (key, name) in [
                ("datapath.n3_interface", &d.n3_interface),
                ("datapath.n9_interface", &d.n9_interface),
                ("datapath.n6_interface", &d.n6_interface),
            ] {
                if let Some(Err(m)) = name.as_deref().map(interface_exists) {
                    errs.push((key.into(), m));
                }
            }
        }
        if let Err(m) = is_local(self.n4.address) {
            errs.push(("n4.address".into(), m));
        }
        for (key, a) in [
            ("api.listen", self.api.listen),
            ("api.probe_address", self.api.probe_address),
        ] {
            if let Some(Err(m)) = a.map(|a| is_local(a.ip())) {
                errs.push((key.into(), m));
            }
        }
        if xdp {
            for (a, key) in self.gtpu_addresses() {
                if let Err(m) = is_local(a) {
                    errs.push((key, m));
                }
            }
        }
        if let Some(d) = &self.state.directory {
            if let Err(m) = writable_dir(d) {
                errs.push(("state.directory".into(), m));
            }
        }
        // The API's files as the start reads them: a Secret not mounted, or a
        // certificate that does not go with its key, found before anything starts.
        if let Some(Err(m)) = self.api.token_file.as_deref().map(read_token) {
            errs.push(("api.token_file".into(), m));
        }
        if let (Some(c), Some(k)) = (&self.api.tls_cert_file, &self.api.tls_key_file) {
            if let Err(e) = crate::api::http::tls_acceptor(c, k) {
                // The message begins with the key it is about.
                let e = e.to_string();
                let key = ["api.tls_key_file", "api.tls_cert_file"]
                    .into_iter()
                    .find(|k| e.starts_with(&format!("{k}: ")))
                    .unwrap_or("api.tls_cert_file");
                let m = e
                    .strip_prefix(&format!("{key}: "))
                    .unwrap_or(&e)
                    .to_string();
                errs.push((key.into(), m));
            }
        }
        errs.into_iter()
            .map(|(p, m)| self.sources.error(&p, m))
            .collect()
    }
}

/// The line of the file where reading the file alone fails at `path`, if it does.
fn file_line(text: &str, path: &str) -> Option<usize> {
    let de = serde_norway::Deserializer::from_str(text);
    let e = serde_path_to_error::deserialize::<_, Config>(de).err()?;
    if e.inner().to_string().contains("missing field") {
        // The line would be the map's, not the key's.
        return None;
    }
    let tree: Value = serde_norway::from_str(text).ok()?;
    (describe(&e, &tree).0 == path)
        .then(|| e.inner().location().map(|l| l.line()))
        .flatten()
}

/// Whether a network interface of this name is in this network namespace.
fn interface_exists(name: &str) -> Result<(), String> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| format!("{name:?}: expected an interface name, e.g. eth1"))?;
    // SAFETY: if_nametoindex reads a NUL-terminated string we own.
    if unsafe { libc::if_nametoindex(c.as_ptr()) } != 0 {
        return Ok(());
    }
    let mut here: Vec<String> = std::fs::read_dir("/sys/class/net")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    here.sort();
    Err(format!(
        "{name:?}: no such network interface here; this network namespace has {}",
        here.join(", ")
    ))
}

/// Whether `a` is an address of this host (of this network namespace), or a wildcard:
/// a UDP socket binds to it (port 0) or fails with EADDRNOTAVAIL.
fn is_local(a: IpAddr) -> Result<(), String> {
    match std::net::UdpSocket::bind(SocketAddr::new(a, 0)) {
        Ok(_) => Ok(()),
        Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => Err(format!(
            "{a}: not an address of this host: no interface in this network namespace has it (ip address)"
        )),
        Err(e) => Err(format!("{a}: cannot be bound here: {e}")),
    }
}

/// The bearer token in `path`: its content without surrounding white space (a Secret
/// mounted as a file often ends in a newline).
pub fn read_token(path: &std::path::Path) -> Result<Vec<u8>, String> {
    let raw =
        std::fs::read(path).map_err(|e| format!("{}: cannot read it: {e}", path.display()))?;
    let token = raw.trim_ascii();
    if token.is_empty() {
        return Err(format!(
            "{}: empty (it holds the bearer token the subscriber routes require)",
            path.display()
        ));
    }
    Ok(token.to_vec())
}

/// Whether `d` is a directory this process can write in, or can be created (its
/// nearest existing ancestor is such a directory).
fn writable_dir(d: &Path) -> Result<(), String> {
    use std::os::unix::ffi::OsStrExt;
    let mut p = d;
    loop {
        let here = if p.as_os_str().is_empty() {
            Path::new(".")
        } else {
            p
        };
        match std::fs::metadata(here) {
            Ok(m) if m.is_dir() => {
                let c = std::ffi::CString::new(here.as_os_str().as_bytes())
                    .map_err(|_| format!("{:?}: expected a directory path", d))?;
                // SAFETY: access reads a NUL-terminated string we own.
                if unsafe { libc::access(c.as_ptr(), libc::W_OK | libc::X_OK) } == 0 {
                    return Ok(());
                }
                let e = std::io::Error::last_os_error();
                return Err(if here == d {
                    format!("{:?}: expected a directory upfd can write in: {e}", d)
                } else {
                    format!(
                        "{:?}: does not exist and cannot be created: {} is not writable: {e}",
                        d,
                        here.display()
                    )
                });
            }
            Ok(_) => {
                return Err(format!(
                    "{:?}: expected a directory: {} is not one",
                    d,
                    here.display()
                ))
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    || e.raw_os_error() == Some(libc::ENOTDIR) =>
            {
                match p.parent() {
                    Some(up) => p = up,
                    None => return Err(format!("{:?}: {e}", d)),
                }
            }
            Err(e) => return Err(format!("{:?}: {e}", d)),
        }
    }
}

impl Config {
    /// The addresses besides our GTP-U ones that uplink user traffic must not reach:
    /// N4's, the API's (unless it listens on a wildcard address) and
    /// `datapath.protected_addresses`, each once.
    pub fn protected_addresses(&self) -> Vec<IpAddr> {
        let mut v = vec![self.n4.address];
        v.extend(self.api.listen.map(|a| a.ip()));
        v.extend(self.api.probe_address.map(|a| a.ip()));
        v.extend(self.datapath.protected_addresses.iter().copied());
        let gtpu = self.gtpu_addresses();
        let mut out: Vec<IpAddr> = Vec::new();
        for a in v {
            if !a.is_unspecified() && !out.contains(&a) && !gtpu.iter().any(|(g, _)| *g == a) {
                out.push(a);
            }
        }
        out
    }

    /// Every GTP-U address of ours, each once, with the key that names it: N3's first
    /// (IPv4, IPv6), then N9's, then the Network Instances'.
    pub fn gtpu_addresses(&self) -> Vec<(IpAddr, String)> {
        let mut v: Vec<(IpAddr, String)> = Vec::new();
        let mut add = |e: &Endpoint, key: &str| {
            let both = [
                e.ipv4.map(|a| (IpAddr::V4(a), format!("{key}.ipv4"))),
                e.ipv6.map(|a| (IpAddr::V6(a), format!("{key}.ipv6"))),
            ];
            for (a, k) in both.into_iter().flatten() {
                if !v.iter().any(|(b, _)| *b == a) {
                    v.push((a, k));
                }
            }
        };
        add(&self.gtpu.n3, "gtpu.n3");
        if let Some(e) = &self.gtpu.n9 {
            add(e, "gtpu.n9");
        }
        for (i, n) in self.network_instances.iter().enumerate() {
            if let Some(e) = &n.n3 {
                add(e, &format!("network_instances[{i}].n3"));
            }
            if let Some(e) = &n.n9 {
                add(e, &format!("network_instances[{i}].n9"));
            }
        }
        v
    }

    /// The Network Instances the configuration names: in `network_instances` and in
    /// `ue_pools` (empty when it names none: then SMFs may name any).
    pub fn known_network_instances(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .network_instances
            .iter()
            .map(|n| n.name.clone())
            .collect();
        for p in &self.ue_pools {
            if !p.network_instance.is_empty() && !v.contains(&p.network_instance) {
                v.push(p.network_instance.clone());
            }
        }
        v
    }

    /// The Network Instances with GTP-U addresses of their own, as the data path and
    /// the N4 procedures take them.
    pub fn ni_addresses(&self) -> Vec<upf::fastpath::NiAddresses> {
        self.network_instances
            .iter()
            .filter(|n| n.n3.is_some() || n.n9.is_some())
            .map(|n| upf::fastpath::NiAddresses {
                name: n.name.clone(),
                n3_v4: n.n3.as_ref().and_then(|e| e.ipv4),
                n3_v6: n.n3.as_ref().and_then(|e| e.ipv6),
                n9_v4: n.n9.as_ref().and_then(|e| e.ipv4),
                n9_v6: n.n9.as_ref().and_then(|e| e.ipv6),
            })
            .collect()
    }

    /// The UP Function Features to announce (clause 8.2.25): only what this
    /// configuration does. FTUP: F-TEID allocation. UEIP: UE address allocation, with UE
    /// pools. ADPDP: predefined rules, with some configured. With the XDP data path: BUCP (buffering in the UP function), EMPU (End
    /// Marker packets), QUOAC (forwarding stops when a volume quota is used up), QFQM
    /// (QoS monitoring per QoS flow by GTP-U, clause 5.24.2: upfd sends the monitoring
    /// packets and reads the gNB's answers), GPQM (GTP-U path QoS monitoring by Echo,
    /// clause 5.24.3).
    pub fn up_function_features(&self) -> pfcp::ie::Flags {
        use pfcp::ie::up_function_features as f;
        let mut bits = vec![f::FTUP];
        if !self.ue_pools.is_empty() {
            bits.push(f::UEIP);
        }
        if !self.predefined_rules.rules.is_empty() {
            bits.push(f::ADPDP);
        }
        if self.datapath.mode == DatapathMode::Xdp {
            bits.extend([f::BUCP, f::EMPU, f::QUOAC, f::QFQM, f::GPQM]);
        }
        // PFD Management (application detection).
        bits.push(f::PFDM);
        pfcp::ie::Flags::from_bits(&bits, 3)
    }

    /// The Node ID as PFCP encodes it.
    pub fn node_id(&self) -> pfcp::ie::NodeId {
        match self.node_id.parse::<IpAddr>() {
            Ok(IpAddr::V4(a)) => pfcp::ie::NodeId::Ipv4(a),
            Ok(IpAddr::V6(a)) => pfcp::ie::NodeId::Ipv6(a),
            Err(_) => pfcp::ie::NodeId::Fqdn(pfcp::ie::Name::labels(&self.node_id)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TOP_KEYS (which environment variables are overrides) are the file's top-level
    /// keys, every one.
    #[test]
    fn the_top_keys_are_the_files() {
        let e = Config::parse("zzz: 1\n", "t.yaml").unwrap_err().to_string();
        let listed = e.split("the top level has ").nth(1).expect(&e);
        assert_eq!(listed, TOP_KEYS.join(", "));
        assert!(is_override("UPFD_NODE_ID"));
        assert!(is_override("UPFD_N4__PORT"));
        assert!(is_override("UPFD_UE_POOLS__0__PREFIX"));
        assert!(!is_override("UPFD_N4_SERVICE_HOST"));
        assert!(!is_override("UPFD_API_PORT_9100_TCP_ADDR"));
        assert!(!is_override("UPFDX"));
    }

    const GOOD: &str = "
node_id: upf.example.org
n4:
  address: 127.0.0.7
  allowed_peers: [127.0.0.0/8]
  heartbeat_interval: 5s
gtpu:
  n3: { ipv4: 10.10.0.7 }
ue_pools:
  - { network_instance: internet, prefix: 10.45.0.0/16 }
";

    #[test]
    fn good_file() {
        let c = Config::parse(GOOD, "t.yaml").unwrap();
        assert_eq!(c.n4.port, 8805);
        assert_eq!(c.n4.heartbeat_interval, Duration::from_secs(5));
        assert!(matches!(c.node_id(), pfcp::ie::NodeId::Fqdn(_)));
        assert_eq!(c.node_id().to_string(), "upf.example.org");
    }

    fn err(text: &str) -> String {
        Config::parse(text, "t.yaml").unwrap_err().to_string()
    }

    #[test]
    fn state_directory_and_cpus() {
        let c = Config::parse(
            &format!("{GOOD}state: {{ directory: /var/lib/upfd }}\ncpus: [0]\n"),
            "t.yaml",
        )
        .unwrap();
        assert_eq!(
            c.state.directory.as_deref(),
            Some(std::path::Path::new("/var/lib/upfd"))
        );
        assert_eq!(c.cpus, [0]);
        // The pins under the Node ID, without the dots a BPF filesystem refuses.
        assert_eq!(
            c.pin_root(),
            std::path::Path::new("/sys/fs/bpf/upfd").join(c.node_id.replace('.', "_"))
        );
        let p = Config::parse(
            &format!("{GOOD}state: {{ directory: /d, pin_directory: /bpf/x }}\n"),
            "t.yaml",
        )
        .unwrap();
        assert!(p.pin_root().starts_with("/bpf/x"), "{:?}", p.pin_root());
        assert!(!p.pin_root().to_string_lossy().contains('.'));
        let e = err(&format!("{GOOD}cpus: [100000]\n"));
        assert!(
            e.starts_with("t.yaml: cpus[0]: 100000 is out of range: a CPU number 0-"),
            "{e}"
        );
        let e = err(&format!("{GOOD}state: {{ dir: /x }}\n"));
        assert!(e.contains("state"), "{e}");
        // What a kept state depends on: the UE pools are in it, the log level is not.
        let a = Config::parse(GOOD, "t.yaml").unwrap();
        let b = Config::parse(&format!("{GOOD}log: {{ level: debug }}\n"), "t.yaml").unwrap();
        assert_eq!(a.state_fingerprint(), b.state_fingerprint());
        let mut other = a.clone();
        other.gtpu.teid_range = [1, 1 << 20];
        assert_ne!(a.state_fingerprint(), other.state_fingerprint());
    }

    #[test]
    fn network_instances_and_the_features_announced() {
        let text = format!(
            "{GOOD}network_instances:\n  - {{ name: access2, n3: {{ ipv4: 10.11.0.7 }} }}\n  - {{ name: ims }}\n"
        );
        let c = Config::parse(&text, "t.yaml").unwrap();
        let addrs: Vec<_> = c.gtpu_addresses().into_iter().map(|(a, _)| a).collect();
        assert_eq!(
            addrs,
            [
                "10.10.0.7".parse::<IpAddr>().unwrap(),
                "10.11.0.7".parse().unwrap()
            ]
        );
        assert_eq!(c.known_network_instances(), ["access2", "ims", "internet"]);
        assert_eq!(c.ni_addresses().len(), 1, "ims has no addresses of its own");
        use pfcp::ie::up_function_features as f;
        assert!(c.up_function_features().get(f::UEIP), "pools: UEIP");
        let no_pools = GOOD.split("ue_pools:").next().unwrap();
        let c = Config::parse(no_pools, "t.yaml").unwrap();
        assert!(!c.up_function_features().get(f::UEIP), "no pools: no UEIP");
        assert!(c.up_function_features().get(f::FTUP));
        assert!(c.known_network_instances().is_empty());

        let e = err(&format!("{text}  - {{ name: ims }}\n"));
        assert_eq!(
            e,
            "t.yaml: network_instances[2].name: \"ims\": named twice (network_instances[1] too)"
        );
        let mut many = format!("{GOOD}network_instances:\n");
        for i in 1..=4 {
            many.push_str(&format!(
                "  - {{ name: a{i}, n3: {{ ipv4: 10.11.0.{i} }} }}\n"
            ));
        }
        let e = err(&many);
        assert!(
            e.starts_with("t.yaml: network_instances: 5 distinct GTP-U IPv4 addresses"),
            "{e}"
        );
    }

    #[test]
    fn the_api_off_loopback_needs_a_token_file() {
        let c = Config::parse(GOOD, "t.yaml").unwrap();
        assert_eq!(c.api.max_connections, 64);
        assert_eq!(c.api.request_timeout, Duration::from_secs(5));
        assert!(c.api.token_file.is_none() && c.api.probe_address.is_none());
        for ok in ["127.0.0.1:9100", "[::1]:9100"] {
            let text = format!("{GOOD}api: {{ listen: \"{ok}\" }}\n");
            assert!(Config::parse(&text, "t.yaml").is_ok(), "{ok}");
        }
        let open = format!("{GOOD}api: {{ listen: \"0.0.0.0:9100\" }}\n");
        let e = err(&open);
        assert!(
            e.starts_with("t.yaml: api.listen: 0.0.0.0:9100 is not a loopback address and api.token_file is not set"),
            "{e}"
        );
        let text = format!(
            "{GOOD}api: {{ listen: \"0.0.0.0:9100\", token_file: /etc/upfd/api/token, probe_address: \"0.0.0.0:9101\", max_connections: 8, request_timeout: 1s }}\n"
        );
        let c = Config::parse(&text, "t.yaml").unwrap();
        assert_eq!(c.api.probe_address, Some("0.0.0.0:9101".parse().unwrap()));
        assert_eq!(c.api.max_connections, 8);
        assert_eq!(c.api.request_timeout, Duration::from_secs(1));
        let zero = format!("{GOOD}api: {{ max_connections: 0 }}\n");
        assert!(err(&zero).starts_with("t.yaml: api.max_connections: 0"));
    }

    #[test]
    fn protected_addresses_are_n4_api_and_the_configured_ones_within_the_limit() {
        let text = format!(
            "{GOOD}api: {{ listen: \"127.0.0.9:9100\" }}\ndatapath:\n  protected_addresses: [10.10.0.7, 127.0.0.7, 192.0.2.4, \"2001:db8::4\"]\n"
        );
        let c = Config::parse(&text, "t.yaml").unwrap();
        let want: Vec<IpAddr> = ["127.0.0.7", "127.0.0.9", "192.0.2.4", "2001:db8::4"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        // N4's, the API's, the configured ones; each once; GTP-U's are checked anyway.
        assert_eq!(c.protected_addresses(), want);
        let wildcard = format!("{GOOD}api: {{ listen: \"0.0.0.0:9100\", token_file: /run/t }}\n");
        let c = Config::parse(&wildcard, "t.yaml").unwrap();
        assert_eq!(
            c.protected_addresses(),
            ["127.0.0.7".parse::<IpAddr>().unwrap()]
        );
        let many: Vec<String> = (1..=8).map(|i| format!("192.0.2.{i}")).collect();
        let e = err(&format!(
            "{GOOD}datapath:\n  protected_addresses: [{}]\n",
            many.join(", ")
        ));
        assert!(
            e.starts_with("t.yaml: datapath.protected_addresses: 9 distinct IPv4 addresses"),
            "{e}"
        );
    }

    #[test]
    fn table_sizes_are_taken_as_given_and_zero_is_refused_by_its_path() {
        let c = Config::parse(
            &format!("{GOOD}datapath:\n  tables: {{ cold_entries: 500000, cells: 250000 }}\n"),
            "t.yaml",
        )
        .unwrap();
        let t = &c.datapath.tables;
        assert_eq!(
            (t.cold_entries, t.sdf_entries, t.cells),
            (Some(500_000), None, Some(250_000))
        );
        let e = err(&format!("{GOOD}datapath:\n  tables: {{ cells: 0 }}\n"));
        assert!(
            e.starts_with("t.yaml: datapath.tables.cells: 0 is out of range"),
            "{e}"
        );
        let e = err(&format!("{GOOD}datapath:\n  tables: {{ cold: 5 }}\n"));
        assert!(e.contains("datapath.tables"), "{e}");
    }

    #[test]
    fn icmp_defaults_are_linux_s_and_a_zero_burst_is_refused_by_its_key() {
        let i = Config::parse(GOOD, "t.yaml").unwrap().datapath.icmp;
        assert_eq!(
            (
                i.source_ipv4,
                i.source_ipv6,
                i.errors_per_sec,
                i.burst,
                i.session_errors_per_sec,
                i.session_burst
            ),
            (None, None, 1000, 50, 10, 10)
        );
        let with = |icmp: &str| format!("{GOOD}datapath:\n  icmp: {icmp}\n");
        // Per session above the whole: allowed (the whole's budget still bounds it).
        let c = Config::parse(
            &with("{ source_ipv4: 192.0.2.1, source_ipv6: \"2001:db8::1\", errors_per_sec: 5, burst: 1, session_errors_per_sec: 20 }"),
            "t.yaml",
        )
        .unwrap();
        assert_eq!(
            c.datapath.icmp.source_ipv4,
            Some(Ipv4Addr::new(192, 0, 2, 1))
        );
        // None at all: the bursts do not matter.
        Config::parse(&with("{ errors_per_sec: 0, burst: 0 }"), "t.yaml").unwrap();
        Config::parse(
            &with("{ session_errors_per_sec: 0, session_burst: 0 }"),
            "t.yaml",
        )
        .unwrap();
        for (icmp, want) in [
            ("{ burst: 0 }", "t.yaml: datapath.icmp.burst: 0 is out of range: at least 1 (errors sent at once) while datapath.icmp.errors_per_sec is 1000; errors_per_sec: 0 sends none"),
            ("{ session_burst: 0 }", "t.yaml: datapath.icmp.session_burst: 0 is out of range: at least 1 (errors sent at once) while datapath.icmp.session_errors_per_sec is 10; session_errors_per_sec: 0 sends none"),
            ("{ source_ipv4: 0.0.0.0 }", "t.yaml: datapath.icmp.source_ipv4: 0.0.0.0: expected a unicast address of this UPF (the ICMP errors' source, RFC 1812 clause 4.3.2.4)"),
            ("{ source_ipv6: \"ff02::1\" }", "t.yaml: datapath.icmp.source_ipv6: ff02::1: expected a unicast address of this UPF (the ICMP errors' source, RFC 1812 clause 4.3.2.4)"),
            ("{ source_ipv4: \"2001:db8::1\" }", "t.yaml:12: datapath.icmp.source_ipv4: \"2001:db8::1\": expected an IPv4 address, e.g. 192.0.2.7"),
            ("{ burst: -1 }", "t.yaml:12: datapath.icmp.burst: -1 is out of range: a whole number 0-18446744073709551615"),
        ] {
            assert_eq!(err(&with(icmp)), want, "{icmp}");
        }
    }

    #[test]
    fn mtus_by_interface_each_once_and_errors_name_the_keys() {
        let with = |dp: &str| {
            format!("{GOOD}datapath: {{ n3_interface: eth1, n6_interface: eth2, {dp} }}\n")
        };
        let mtus = |dp: &str| {
            Config::parse(&with(dp), "t.yaml")
                .unwrap()
                .datapath
                .interface_mtus()
                .unwrap()
        };
        assert_eq!(mtus(""), vec![]);
        assert_eq!(
            mtus("mtu: { n3: 1500, n6: 9000 }"),
            vec![("n3", 1500), ("n6", 9000)]
        );
        assert_eq!(mtus("mtu: { n6: 68 }"), vec![("n6", 68)]);
        // N9 on an interface of its own, or on N3's with the same MTU (said once).
        assert_eq!(
            mtus("n9_interface: eth3, mtu: { n9: 9216 }"),
            vec![("n9", 9216)]
        );
        assert_eq!(
            mtus("n9_interface: eth1, mtu: { n3: 1400, n9: 1400 }"),
            vec![("n3", 1400)]
        );
        for (dp, want) in [
            ("mtu: { n6: 40 }", "t.yaml: datapath.mtu.n6: 40 is out of range: an MTU in octets, 68-9216"),
            ("mtu: { n3: 9217 }", "t.yaml: datapath.mtu.n3: 9217 is out of range: an MTU in octets, 68-9216"),
            ("mtu: { n9: 70000 }", "t.yaml:11: datapath.mtu.n9: 70000 is out of range: an MTU in octets, 68-9216"),
            ("mtu: { n9: 1400 }", "t.yaml: datapath.mtu.n9: 1400: needs datapath.n9_interface (without it N9 traffic goes by datapath.n3_interface: set datapath.mtu.n3)"),
            ("n9_interface: eth1, mtu: { n3: 1500, n9: 1400 }", "t.yaml: datapath.mtu.n9: 1400: datapath.n9_interface and datapath.n3_interface are both \"eth1\", and datapath.mtu.n3 is 1500: one MTU per interface"),
            ("n6_interface: eth1, mtu: { n3: 1500, n6: 1400 }", "t.yaml: datapath.mtu.n6: 1400: datapath.n6_interface and datapath.n3_interface are both \"eth1\", and datapath.mtu.n3 is 1500: one MTU per interface"),
            ("mtu: { n4: 1500 }", "t.yaml:11: datapath.mtu.n4: unknown key: datapath.mtu has n3, n6, n9"),
        ] {
            let text = with(dp).replace("n6_interface: eth2, n6_interface", "n6_interface");
            assert_eq!(err(&text), want, "{dp}");
        }
        // Without its interface, N3's MTU is refused too (datapath.mode none).
        let e = err(&format!("{GOOD}datapath:\n  mtu: {{ n3: 1500 }}\n"));
        assert_eq!(
            e,
            "t.yaml: datapath.mtu.n3: 1500: needs datapath.n3_interface"
        );
    }

    #[test]
    fn the_example_file_is_valid_and_announces_what_it_configures() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/config/upfd.yaml");
        let c = Config::load(Path::new(path)).unwrap();
        // The README's /metrics answers with the example as it is.
        assert_eq!(c.api.listen, Some("127.0.0.7:9100".parse().unwrap()));
        let p = c.predefined_rules.build().unwrap();
        assert_eq!(p.rules().len(), 2);
        use pfcp::ie::up_function_features as f;
        let features = c.up_function_features();
        assert!(features.get(f::ADPDP) && features.get(f::UEIP) && features.get(f::FTUP));
    }

    #[test]
    fn predefined_rules_errors_say_what() {
        let e = err(&format!(
            "{GOOD}predefined_rules:\n  rules:\n    - {{ name: x, qers: [3] }}\n"
        ));
        assert_eq!(
            e,
            "t.yaml: predefined_rules: predefined rule \"x\": no QER 3"
        );
        let e = err(&format!(
            "{GOOD}predefined_rules:\n  fars:\n    - {{ id: 1, action: forward }}\n"
        ));
        assert_eq!(
            e,
            "t.yaml: predefined_rules: FAR 1: forward needs destination_interface"
        );
        let e = err(&format!(
            "{GOOD}predefined_rules:\n  qers:\n    - {{ id: 2147483648 }}\n"
        ));
        assert_eq!(
            e,
            "t.yaml: predefined_rules: QER ID 2147483648 is not between 1 and 2^31 - 1"
        );
        let e = err(&format!(
            "{GOOD}predefined_rules:\n  rules:\n    - {{ name: v, application: video }}\n"
        ));
        assert_eq!(
            e,
            "t.yaml: predefined_rules.rules[0].application: \"video\" is not among applications (none is configured)"
        );
    }

    #[test]
    fn a_predefined_rule_carries_its_application() {
        let c = Config::parse(
            &format!(
                "{GOOD}applications:\n  - id: video\npredefined_rules:\n  rules:\n    - {{ name: plain }}\n    - {{ name: v, application_id: video }}\n"
            ),
            "t.yaml",
        )
        .unwrap();
        let p = c.predefined_rules.build().unwrap();
        assert_eq!((p.application(0), p.application(1)), (None, Some("video")));
    }

    /// The first error of `text` with the environment variables `env` and the flags
    /// `set` (as upfd takes them: the environment's first, then the flags').
    fn first_error(text: &str, env: &[(&str, &str)], set: &[&str]) -> String {
        let overrides: Result<Vec<Override>, ConfigError> = env
            .iter()
            .map(|(k, v)| Override::from_env(k, v))
            .chain(set.iter().map(|a| Override::from_set(a)))
            .collect();
        let e = match overrides {
            Ok(o) => Config::parse_with(text, "t.yaml", &o).unwrap_err(),
            Err(e) => e,
        };
        e.to_string()
    }

    /// A broken file, the environment's overrides, --set's, the error line.
    type Case = (
        String,
        Vec<(&'static str, &'static str)>,
        Vec<&'static str>,
        String,
    );

    const N4_KEYS: &str = "address, port, allowed_peers, associate_with, heartbeat_interval, t1, n1, response_cache_ttl, response_cache_max, graceful_release_period, strict, receive_buffer";

    /// Broken configurations: each gives exactly one line, naming where the value came
    /// from, the key path, the value and what is allowed (range, units, choices).
    #[test]
    fn every_error_is_one_line_with_the_key_the_value_and_what_is_allowed() {
        let with = |extra: &str| format!("{GOOD}{extra}");
        let port = GOOD.replace(
            "  address: 127.0.0.7\n",
            "  address: 127.0.0.7\n  port: 70000\n",
        );
        let cases: Vec<Case> = vec![
            (
                port,
                vec![],
                vec![],
                "t.yaml:5: n4.port: 70000 is out of range: a UDP port, 1-65535".into(),
            ),
            (
                GOOD.replace("10.10.0.7", "10.10.0.300"),
                vec![],
                vec![],
                "t.yaml:8: gtpu.n3.ipv4: \"10.10.0.300\": expected an IPv4 address, e.g. 192.0.2.7".into(),
            ),
            (
                GOOD.replace("heartbeat_interval: 5s", "heartbeat_interval: 10"),
                vec![],
                vec![],
                "t.yaml:6: n4.heartbeat_interval: 10: a duration needs units: 10s, 500ms, 2m".into(),
            ),
            (
                GOOD.replace("heartbeat_interval: 5s", "heartbeat_interval: five"),
                vec![],
                vec![],
                "t.yaml:6: n4.heartbeat_interval: \"five\": expected a duration with units: 10s, 500ms, 2m".into(),
            ),
            (
                GOOD.replace("heartbeat_interval: 5s", "heartbeat_intervall: 5s"),
                vec![],
                vec![],
                format!("t.yaml:6: n4.heartbeat_intervall: unknown key: n4 has {N4_KEYS}"),
            ),
            (
                GOOD.replace("[127.0.0.0/8]", "127.0.0.0/8"),
                vec![],
                vec![],
                "t.yaml:5: n4.allowed_peers: \"127.0.0.0/8\": expected a list of prefixes, e.g. [10.0.0.0/8]".into(),
            ),
            (
                GOOD.replace("10.45.0.0/16", "10.45.0.0/33"),
                vec![],
                vec![],
                "t.yaml:10: ue_pools[0].prefix: \"10.45.0.0/33\": expected a prefix, e.g. 10.45.0.0/16 or \"2001:db8:cafe::/48\"".into(),
            ),
            (
                with("datapath: { mode: xdp, n3_interface: eth1 }\n"),
                vec![],
                vec![],
                "t.yaml: datapath.n6_interface: missing: required with datapath.mode xdp, an interface name, e.g. eth1".into(),
            ),
            (
                with("datapath: { mode: xdpp }\n"),
                vec![],
                vec![],
                "t.yaml:11: datapath.mode: \"xdpp\": expected none or xdp".into(),
            ),
            (
                with("datapath: { mode: xdp, n3_interface: eth1, n6_interface: eth2, spread: flow }\n"),
                vec![],
                vec![],
                "t.yaml:11: datapath.spread: \"flow\": expected off, teid or inner".into(),
            ),
            (
                with("datapath: { spread: inner }\n"),
                vec![],
                vec![],
                "t.yaml: datapath.spread: spreads what the XDP programs receive: needs datapath.mode xdp".into(),
            ),
            (
                with("datapath: { mode: xdp, n3_interface: eth1, n6_interface: eth2, spread: teid, spread_cpus: [0, 0] }\n"),
                vec![],
                vec![],
                "t.yaml: datapath.spread_cpus[1]: 0 is listed twice: each CPU once".into(),
            ),
            (
                GOOD.replace("node_id: upf.example.org\n", ""),
                vec![],
                vec![],
                "t.yaml: node_id: missing: required, an IPv4 or IPv6 address or an FQDN, e.g. upf1.example.org".into(),
            ),
            (
                with("  - { network_instance: ims, prefix: 10.45.128.0/17 }\n"),
                vec![],
                vec![],
                "t.yaml: ue_pools[1].prefix: 10.45.128.0/17: overlaps ue_pools[0].prefix 10.45.0.0/16: UE pools must not overlap, in one network instance or across (the data path finds a session by its UE address alone)".into(),
            ),
            (
                with("  - { network_instance: internet, prefix: 10.46.0.0/16 }\n"),
                vec![],
                vec![],
                "t.yaml: ue_pools[1].prefix: 10.46.0.0/16: network instance \"internet\" has an IPv4 pool already (ue_pools[0]): one prefix per IP version and network instance".into(),
            ),
            (
                GOOD.replace("  n3: { ipv4: 10.10.0.7 }\n", "  n3: { ipv4: 10.10.0.7 }\n  teid_range: [5, 1]\n"),
                vec![],
                vec![],
                "t.yaml: gtpu.teid_range: [5, 1]: expected [min, max] with 1 <= min <= max <= 4294967295 and at least 1024 TEIDs (unpredictable ones)".into(),
            ),
            (
                with("limits: { max_sessions: -1 }\n"),
                vec![],
                vec![],
                "t.yaml:11: limits.max_sessions: -1 is out of range: a whole number 1-4294967295".into(),
            ),
            (
                with("log: { level: loud }\n"),
                vec![],
                vec![],
                "t.yaml: log.level: \"loud\": expected error, warn, info or debug".into(),
            ),
            (
                GOOD.to_string(),
                vec![("UPFD_N4__PORT", "abc")],
                vec![],
                "environment UPFD_N4__PORT: n4.port: \"abc\": expected a UDP port, 1-65535".into(),
            ),
            (
                GOOD.to_string(),
                vec![("UPFD_N4__N1", "11")],
                vec![],
                "environment UPFD_N4__N1: n4.n1: 11 is out of range: a whole number of retransmissions 0-10".into(),
            ),
            (
                GOOD.to_string(),
                vec![("UPFD_API__LISTNE", "127.0.0.1:9100")],
                vec![],
                "environment UPFD_API__LISTNE: api.listne: unknown key: api has listen, token_file, probe_address, max_connections, request_timeout, tls_cert_file, tls_key_file".into(),
            ),
            (
                GOOD.to_string(),
                vec![("UPFD_N4____PORT", "1")],
                vec![],
                "environment UPFD_N4____PORT: not a key path: expected UPFD_ and the key path upper-cased with `.` as `__`, e.g. UPFD_N4__HEARTBEAT_INTERVAL".into(),
            ),
            (
                GOOD.to_string(),
                vec![],
                vec!["n4.t1=10"],
                "--set: n4.t1: 10: a duration needs units: 10s, 500ms, 2m".into(),
            ),
            (
                GOOD.to_string(),
                vec![],
                vec!["n4.t1"],
                "--set: \"n4.t1\": expected KEY.PATH=VALUE, e.g. n4.heartbeat_interval=5s".into(),
            ),
            (
                GOOD.to_string(),
                vec![],
                vec!["n4.allowed_peers=[10.0.0.0/8"],
                "--set: n4.allowed_peers: \"[10.0.0.0/8\": not a YAML value: did not find expected ',' or ']', while parsing a flow sequence".into(),
            ),
            (
                GOOD.to_string(),
                vec![],
                vec!["n4.heartbeat_interval.x=1"],
                "--set: n4.heartbeat_interval.x: n4.heartbeat_interval is a string, not a map".into(),
            ),
            (
                GOOD.to_string(),
                vec![],
                vec!["ue_pools[1].prefix=10.47.0.0/16"],
                "--set: ue_pools[1].prefix: ue_pools has 1 entries: an index 0-0 (an override replaces an entry, it adds none)".into(),
            ),
            (
                GOOD.to_string(),
                vec![("UPFD_N4__PORT", "9000")],
                vec!["n4.port=0"],
                "--set: n4.port: 0 is out of range: a UDP port, 1-65535".into(),
            ),
            (
                "node_id: x\nn4: [\n".into(),
                vec![],
                vec![],
                "t.yaml:3: not YAML: did not find expected node content, while parsing a flow node".into(),
            ),
        ];
        assert!(cases.len() >= 12);
        for (text, env, set, want) in cases {
            let got = first_error(&text, &env, &set);
            assert_eq!(got, want, "for {env:?} {set:?} over:\n{text}");
            assert!(!got.contains('\n'), "{got}");
        }
    }

    #[test]
    fn overrides_replace_any_key_the_flags_win_over_the_environment() {
        let o = |env: &[(&str, &str)], set: &[&str]| -> Config {
            let v: Vec<Override> = env
                .iter()
                .map(|(k, v)| Override::from_env(k, v).unwrap())
                .chain(set.iter().map(|a| Override::from_set(a).unwrap()))
                .collect();
            Config::parse_with(GOOD, "t.yaml", &v).unwrap()
        };
        assert_eq!(o(&[], &[]).n4.port, 8805);
        assert_eq!(o(&[("UPFD_N4__PORT", "9000")], &[]).n4.port, 9000);
        assert_eq!(
            o(&[("UPFD_N4__PORT", "9000")], &["n4.port=9001"]).n4.port,
            9001
        );
        let c = o(
            &[
                ("UPFD_N4__HEARTBEAT_INTERVAL", "7s"),
                ("UPFD_API__LISTEN", "0.0.0.0:9100"),
                ("UPFD_API__TOKEN_FILE", "/run/upfd/token"),
                ("UPFD_N4__ALLOWED_PEERS", "[10.0.0.0/8, 192.0.2.0/24]"),
                ("UPFD_DATAPATH__MODE", "xdp"),
                ("UPFD_DATAPATH__N3_INTERFACE", "eth1"),
                ("UPFD_DATAPATH__N6_INTERFACE", "eth2"),
            ],
            &[
                "ue_pools[0].prefix=10.50.0.0/16",
                "gtpu.n9={ ipv4: 10.10.0.9 }",
            ],
        );
        assert_eq!(c.n4.heartbeat_interval, Duration::from_secs(7));
        assert_eq!(c.api.listen, Some("0.0.0.0:9100".parse().unwrap()));
        assert_eq!(c.n4.allowed_peers.len(), 2);
        assert_eq!(c.datapath.mode, DatapathMode::Xdp);
        assert_eq!(c.datapath.n6_interface.as_deref(), Some("eth2"));
        assert_eq!(c.ue_pools[0].prefix.to_string(), "10.50.0.0/16");
        assert_eq!(
            c.gtpu.n9.as_ref().and_then(|e| e.ipv4),
            Some(Ipv4Addr::new(10, 10, 0, 9))
        );
        assert_eq!(c.sources.overrides.len(), 9);
        // The same key in both forms.
        let a = Override::from_set("ue_pools.0.prefix=x").unwrap();
        let b = Override::from_env("UPFD_UE_POOLS__0__PREFIX", "x").unwrap();
        assert_eq!(
            (a.key.as_str(), b.key.as_str()),
            ("ue_pools[0].prefix", "ue_pools[0].prefix")
        );
        // An empty value unsets an optional key.
        assert_eq!(o(&[("UPFD_API__LISTEN", "")], &[]).api.listen, None);
    }

    #[test]
    fn an_error_names_the_override_that_set_the_key_or_one_above_it() {
        let e = first_error(GOOD, &[("UPFD_N4", "{ address: 127.0.0.7, port: 0 }")], &[]);
        assert_eq!(
            e,
            "environment UPFD_N4: n4.port: 0 is out of range: a UDP port, 1-65535"
        );
        // The file's error, not the override's, when the override is elsewhere.
        let e = first_error(
            &GOOD.replace("heartbeat_interval: 5s", "heartbeat_interval: 5"),
            &[("UPFD_N4__PORT", "9000")],
            &["n4.t1=1s"],
        );
        assert_eq!(
            e,
            "t.yaml:6: n4.heartbeat_interval: 5: a duration needs units: 10s, 500ms, 2m"
        );
    }

    #[test]
    fn host_checks_name_the_key_and_where_it_came_from() {
        // Nothing here but loopback is sure to exist: 127.0.0.7 is local (127/8), and
        // TEST-NET-3 addresses are taken to be nobody's here.
        let text = format!("{GOOD}datapath: {{ mode: xdp, n3_interface: lo, n6_interface: lo }}\n")
            .replace("10.10.0.7", "127.0.0.7");
        let c = Config::parse(&text, "t.yaml").unwrap();
        assert_eq!(c.check_host(), []);
        let set = Override::from_set("datapath.n6_interface=upfd-nonesuch0").unwrap();
        let c = Config::parse_with(&text, "t.yaml", &[set]).unwrap();
        let errs: Vec<String> = c.check_host().iter().map(|e| e.to_string()).collect();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("--set: datapath.n6_interface: \"upfd-nonesuch0\": no such network interface here; this network namespace has "),
            "{errs:?}"
        );
        if std::net::UdpSocket::bind("203.0.113.77:0").is_err() {
            let text =
                format!("{text}api: {{ listen: \"203.0.113.77:9100\", token_file: /run/t }}\n");
            let c = Config::parse(&text, "t.yaml").unwrap();
            let errs: Vec<String> = c.check_host().iter().map(|e| e.to_string()).collect();
            assert_eq!(
                errs,
                [
                    "t.yaml: api.listen: 203.0.113.77: not an address of this host: no interface in this network namespace has it (ip address)",
                    "t.yaml: api.token_file: /run/t: cannot read it: No such file or directory (os error 2)",
                ]
            );
        }
    }

    #[test]
    fn the_state_directory_must_be_writable_or_creatable() {
        let d = std::env::temp_dir().join(format!("upfd-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        assert_eq!(writable_dir(&d), Ok(()));
        assert_eq!(
            writable_dir(&d.join("a/b")),
            Ok(()),
            "created when upfd starts"
        );
        let f = d.join("file");
        std::fs::write(&f, "").unwrap();
        assert_eq!(
            writable_dir(&f.join("x")),
            Err(format!(
                "{:?}: expected a directory: {} is not one",
                f.join("x"),
                f.display()
            ))
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn errors_name_the_key() {
        let e = err(&GOOD.replace("n3: { ipv4: 10.10.0.7 }", "n3: {}"));
        assert_eq!(
            e,
            "t.yaml: gtpu.n3: {}: needs ipv4 or ipv6, e.g. { ipv4: 192.0.2.7 }"
        );
        let e = err(&GOOD.replace("address: 127.0.0.7", "address: 0.0.0.0"));
        assert_eq!(
            e,
            "t.yaml: n4.address: 0.0.0.0: expected an address of this host that SMFs reach (it is in UP F-SEIDs), not a wildcard"
        );
        let e = err(&format!("{GOOD}reporting: {{ poll_interval: 1ms }}\n"));
        assert_eq!(
            e,
            "t.yaml: reporting.poll_interval: 1ms: expected at least 10ms, a duration with units: 10s, 500ms, 2m"
        );
        let e = err("");
        assert_eq!(
            e,
            "t.yaml: node_id: missing: required, an IPv4 or IPv6 address or an FQDN, e.g. upf1.example.org"
        );
        // Pools of different network instances and IP versions: fine.
        let ok = format!("{GOOD}  - {{ network_instance: internet, prefix: \"2001:db8::/48\" }}\n  - {{ network_instance: ims, prefix: 10.46.0.0/16 }}\n");
        Config::parse(&ok, "t.yaml").unwrap();
    }
}
