//! upfd's configuration file (YAML). Every key is documented here and in
//! docs/configuration.md; every error names the key path and what is wrong.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use ipnet::IpNet;
use serde::Deserialize;

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
        upf::predefined::Predefined::new(rules, fars, qers, urrs)
    }
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

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Api {
    /// HTTP listen address for /metrics (Prometheus) and /status, e.g. 127.0.0.1:9090.
    #[serde(default)]
    pub listen: Option<SocketAddr>,
}

/// Keeping sessions across restarts (docs/configuration.md, "state").
#[derive(Debug, Clone, Default, Deserialize)]
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
}

impl Config {
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

/// A configuration error: the key path (e.g. `gtpu.n3.ipv4`) and what is wrong.
#[derive(Debug, thiserror::Error)]
#[error("{file}: {path}: {message}")]
pub struct ConfigError {
    pub file: String,
    pub path: String,
    pub message: String,
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: file.clone(),
            path: "(file)".into(),
            message: e.to_string(),
        })?;
        Self::parse(&text, &file)
    }

    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigError> {
        let de = serde_norway::Deserializer::from_str(text);
        let cfg: Config = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            ConfigError {
                file: file.into(),
                path: if path == "." {
                    "(top level)".into()
                } else {
                    path
                },
                message: e.into_inner().to_string(),
            }
        })?;
        cfg.check().map_err(|(path, message)| ConfigError {
            file: file.into(),
            path: path.into(),
            message,
        })?;
        Ok(cfg)
    }

    /// Checks that need more than one key's type.
    fn check(&self) -> Result<(), (&'static str, String)> {
        if self.node_id.trim().is_empty() {
            return Err(("node_id", "must be an IP address or an FQDN".into()));
        }
        if self.gtpu.n3.ipv4.is_none() && self.gtpu.n3.ipv6.is_none() {
            return Err(("gtpu.n3", "needs ipv4 or ipv6".into()));
        }
        if let Some(n9) = &self.gtpu.n9 {
            if n9.ipv4.is_none() && n9.ipv6.is_none() {
                return Err(("gtpu.n9", "needs ipv4 or ipv6".into()));
            }
        }
        let [lo, hi] = self.gtpu.teid_range;
        if lo == 0 || lo > hi {
            return Err((
                "gtpu.teid_range",
                format!("[{lo}, {hi}] must be [min, max] with 1 <= min <= max"),
            ));
        }
        if hi - lo < 1023 {
            return Err((
                "gtpu.teid_range",
                "must hold at least 1024 TEIDs so that they stay unpredictable".into(),
            ));
        }
        if self.n4.t1.is_zero() {
            return Err(("n4.t1", "must be more than 0".into()));
        }
        if self.n4.heartbeat_interval.is_zero() {
            return Err(("n4.heartbeat_interval", "must be more than 0".into()));
        }
        if self.n4.n1 > 10 {
            return Err(("n4.n1", "at most 10 retransmissions".into()));
        }
        if self.datapath.mode == DatapathMode::Xdp {
            if self.datapath.n3_interface.is_none() {
                return Err(("datapath.n3_interface", "needed with mode: xdp".into()));
            }
            if self.datapath.n6_interface.is_none() {
                return Err(("datapath.n6_interface", "needed with mode: xdp".into()));
            }
        }
        if self.reporting.poll_interval < Duration::from_millis(10) {
            return Err(("reporting.poll_interval", "at least 10ms".into()));
        }
        if self.buffering.packets_per_session > self.buffering.packets_total {
            return Err((
                "buffering.packets_per_session",
                "more than buffering.packets_total".into(),
            ));
        }
        if self.limits.max_sessions == 0 {
            return Err(("limits.max_sessions", "must be more than 0".into()));
        }
        // SAFETY: sysconf has no preconditions.
        let configured = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) }.max(1) as usize;
        if let Some(c) = self.cpus.iter().find(|c| **c >= configured) {
            return Err((
                "cpus",
                format!("CPU {c}: this machine has CPUs 0 to {}", configured - 1),
            ));
        }
        for p in &self.ue_pools {
            let too_small = match p.prefix {
                IpNet::V4(n) => n.prefix_len() > 30,
                IpNet::V6(n) => n.prefix_len() > 126,
            };
            if too_small {
                return Err((
                    "ue_pools[].prefix",
                    format!("{} leaves no room for UE addresses", p.prefix),
                ));
            }
        }
        for (i, n) in self.network_instances.iter().enumerate() {
            if n.name.trim().is_empty() {
                return Err(("network_instances[].name", "must not be empty".into()));
            }
            if self.network_instances[..i].iter().any(|m| m.name == n.name) {
                return Err((
                    "network_instances[].name",
                    format!("{:?} is named twice", n.name),
                ));
            }
            for e in [&n.n3, &n.n9].into_iter().flatten() {
                if e.ipv4.is_none() && e.ipv6.is_none() {
                    return Err((
                        "network_instances[].n3/n9",
                        format!("{:?}: needs ipv4 or ipv6", n.name),
                    ));
                }
            }
        }
        self.predefined_rules
            .build()
            .map_err(|e| ("predefined_rules", e))?;
        let addrs = self.gtpu_addresses();
        for v4 in [true, false] {
            let n = addrs.iter().filter(|(a, _)| a.is_ipv4() == v4).count();
            if n > upf::abi::MAX_LOCAL_ADDRS as usize {
                return Err((
                    "network_instances",
                    format!(
                        "{n} distinct GTP-U {} addresses (gtpu and network_instances); the data path takes {}",
                        if v4 { "IPv4" } else { "IPv6" },
                        upf::abi::MAX_LOCAL_ADDRS
                    ),
                ));
            }
        }
        let protected = self.protected_addresses();
        for v4 in [true, false] {
            let n = protected.iter().filter(|a| a.is_ipv4() == v4).count();
            if n > upf::abi::MAX_PROTECTED_ADDRS as usize {
                return Err((
                    "datapath.protected_addresses",
                    format!(
                        "{n} distinct {} addresses with n4.address and api.listen; the data path takes {}",
                        if v4 { "IPv4" } else { "IPv6" },
                        upf::abi::MAX_PROTECTED_ADDRS
                    ),
                ));
            }
        }
        if !["error", "warn", "info", "debug"].contains(&self.log.level.as_str()) {
            return Err((
                "log.level",
                format!(
                    "{:?} is not one of error, warn, info, debug",
                    self.log.level
                ),
            ));
        }
        Ok(())
    }

    /// The addresses besides our GTP-U ones that uplink user traffic must not reach:
    /// N4's, the API's (unless it listens on a wildcard address) and
    /// `datapath.protected_addresses`, each once.
    pub fn protected_addresses(&self) -> Vec<IpAddr> {
        let mut v = vec![self.n4.address];
        v.extend(self.api.listen.map(|a| a.ip()));
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
        for n in &self.network_instances {
            if let Some(e) = &n.n3 {
                add(e, &format!("network_instances[{}].n3", n.name));
            }
            if let Some(e) = &n.n9 {
                add(e, &format!("network_instances[{}].n9", n.name));
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
    /// Marker packets), QUOAC (forwarding stops when a volume quota is used up).
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
            bits.extend([f::BUCP, f::EMPU, f::QUOAC]);
        }
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
        let e = err(&format!("{GOOD}cpus: [100000]\n"));
        assert!(
            e.contains("cpus: CPU 100000: this machine has CPUs 0 to"),
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
            "t.yaml: network_instances[].name: \"ims\" is named twice"
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
        let wildcard = format!("{GOOD}api: {{ listen: \"0.0.0.0:9100\" }}\n");
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
    fn the_example_file_is_valid_and_announces_what_it_configures() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/config/upfd.yaml");
        let c = Config::load(Path::new(path)).unwrap();
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
    }

    #[test]
    fn errors_name_the_key() {
        let e = err(&GOOD.replace("10.10.0.7", "10.10.0.300"));
        assert!(e.starts_with("t.yaml: gtpu.n3.ipv4: "), "{e}");
        let e = err(&GOOD.replace("heartbeat_interval: 5s", "heartbeat_intervall: 5s"));
        assert!(
            e.contains("n4.heartbeat_intervall") && e.contains("unknown field"),
            "{e}"
        );
        let e = err(&GOOD.replace("5s", "five"));
        assert!(e.starts_with("t.yaml: n4.heartbeat_interval: "), "{e}");
        let e = err(&GOOD.replace("10.45.0.0/16", "10.45.0.0/33"));
        assert!(e.starts_with("t.yaml: ue_pools[0].prefix: "), "{e}");
        let e = err(&GOOD.replace("n3: { ipv4: 10.10.0.7 }", "n3: {}"));
        assert_eq!(e, "t.yaml: gtpu.n3: needs ipv4 or ipv6");
        let e = err(&GOOD.replace(
            "n3: { ipv4: 10.10.0.7 }",
            "n3: { ipv4: 10.10.0.7 }\n  teid_range: [5, 1]",
        ));
        assert_eq!(
            e,
            "t.yaml: gtpu.teid_range: [5, 1] must be [min, max] with 1 <= min <= max"
        );
        let e = err(&GOOD.replace("node_id: upf.example.org\n", ""));
        assert!(e.contains("missing field `node_id`"), "{e}");
    }
}
