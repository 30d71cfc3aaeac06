//! What the API answers, as types: views.rs builds them, serde writes them, and the
//! OpenAPI document (routes.rs) describes them from the same types with schemars, so the
//! document cannot say other than what is served. A field's doc comment is its
//! description in the document.
//!
//! Conventions every answer keeps: SEIDs are 0x-prefixed 64-bit hexadecimal strings
//! (JSON numbers lose precision past 2^53); a field of an `Option` type is always
//! written, `null` when there is no value, unless it says it is left out.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;

/// The schema of `T` as a route's answer: a `$ref` to its component.
pub fn schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// `/openapi.json`'s answer: the document itself (not a Rust type of ours).
pub fn document_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "description": "An OpenAPI 3.0 document",
        "required": ["openapi", "info", "paths", "components"],
        "additionalProperties": true,
    })
}

/// `/metrics`' answer: the Prometheus text format.
pub fn text_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string" })
}

/// A string that is one of `names`, the names of a table kept elsewhere (PFCP flags,
/// drop reasons).
fn one_of(names: impl IntoIterator<Item = &'static str>) -> Schema {
    let names: Vec<&str> = names.into_iter().collect();
    json_schema!({ "type": "string", "enum": names })
}

fn list_of(item: Schema) -> Schema {
    json_schema!({ "type": "array", "items": item })
}

/// An answer that is an error (4xx, 5xx).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Error {
    /// What was wrong, for a person: e.g. which parameter is malformed.
    pub error: String,
}

/// `/healthz`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Health {
    pub status: HealthStatus,
}

/// The event loop answered.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
pub enum HealthStatus {
    #[serde(rename = "ok")]
    Ok,
}

/// `/readyz`: 200 with `ready` true, or 503 with `ready` false and the reason.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Ready {
    /// The data path is attached (or `datapath.mode: none`), N4 listens, and upfd is not
    /// shutting down.
    pub ready: bool,
    /// Why not (left out when ready).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `/api/v1/status` (and `/status`).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Status {
    /// upfd's version.
    pub version: String,
    /// The UP function's Node ID (TS 29.244 clause 8.2.38).
    pub node_id: String,
    /// Where upfd listens for PFCP (N4).
    pub n4_address: String,
    /// As `/readyz`.
    pub ready: bool,
    /// Why upfd is not ready; null when it is.
    pub not_ready_because: Option<String>,
    /// Seconds since upfd started.
    pub uptime_seconds: u64,
    /// upfd's Recovery Time Stamp (clause 8.2.65): NTP seconds. A restart that keeps the
    /// sessions (`state.directory`) keeps it.
    pub recovery_time_stamp: u32,
    /// The Recovery Time Stamp as RFC 3339 (UTC).
    #[schemars(extend("format" = "date-time"))]
    pub recovery_time: String,
    /// PFCP sessions installed.
    pub sessions: usize,
    /// The CP functions associated, as `/api/v1/associations`.
    pub associations: Vec<Association>,
    pub datapath: DatapathStatus,
    /// `state.directory`, where the sessions are kept across restarts; null: not kept.
    pub state_directory: Option<String>,
    /// N4 is overloaded: the UP function asks the CP functions to send less (Overload
    /// Control Information).
    pub overloaded: bool,
}

/// The data path: its mode and where its XDP programs are attached.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DatapathStatus {
    /// `datapath.mode` of the configuration.
    pub mode: String,
    /// Each interface with an XDP program attached.
    pub attached: Vec<Attached>,
}

/// An interface with upfd's XDP program.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Attached {
    /// The network interface's name.
    pub interface: String,
    /// The reference point it serves (n3, n6, n9).
    pub reference_point: String,
    /// How the program is attached: native (in the driver) or generic (slower).
    pub mode: String,
}

/// A PFCP association with a CP function.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Association {
    /// The CP function's Node ID.
    pub node_id: String,
    /// Where requests to the CP function go (address:port).
    pub address: String,
    pub state: AssociationState,
    /// The CP function's Recovery Time Stamp (clause 8.2.65): NTP seconds.
    pub recovery_time_stamp: u32,
    /// The CP function's Recovery Time Stamp as RFC 3339 (UTC).
    #[schemars(extend("format" = "date-time"))]
    pub recovery_time: String,
    /// A Heartbeat Request to it is unanswered.
    pub heartbeat_pending: bool,
    /// The sessions it owns.
    pub sessions: usize,
}

/// Associated, or being released by this UP function (SIGINT, or SIGTERM without state;
/// Association Release, clause 6.2.8).
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AssociationState {
    Associated,
    Releasing,
}

/// `/check`: whether the session table, its indexes and the resources it holds agree.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Check {
    pub consistent: bool,
    /// The sessions read (left out when not consistent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sessions: Option<usize>,
    /// What does not agree (left out when consistent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `/api/v1/sessions`: a page of summaries without `seid`, `teid` or `ue`; with one of
/// them, the sessions found, whole.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(untagged)]
pub enum Sessions {
    Page(SessionPage),
    Found(SessionsFound),
}

/// A page of sessions in SEID order.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SessionPage {
    /// Sessions installed, on every page.
    pub total: usize,
    pub sessions: Vec<SessionSummary>,
    /// The cursor for `after`: the last SEID of this page; null on the last page.
    pub next: Option<String>,
}

/// The sessions a lookup by `seid`, `teid` or `ue` found (none, one, or more).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SessionsFound {
    pub sessions: Vec<Session>,
}

/// A session in a page: identities and how many rules of each kind.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SessionSummary {
    /// The UP F-SEID's SEID (clause 8.2.37), 0x-hex.
    pub seid: String,
    /// The CP F-SEID's SEID, 0x-hex.
    pub cp_seid: String,
    /// The Node ID of the CP function that owns the session.
    pub cp_node_id: String,
    /// The UE addresses and IPv6 prefixes (`address/length`) the PDRs name, sorted.
    pub ue_addresses: Vec<String>,
    /// The local (N3/N9) TEIDs of the session, sorted.
    pub teids: Vec<u32>,
    /// APN/DNN, if the SMF sent one.
    pub dnn: Option<String>,
    pub rules: RuleCounts,
}

/// How many rules of each kind a session has.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RuleCounts {
    pub pdrs: usize,
    pub fars: usize,
    pub qers: usize,
    pub urrs: usize,
}

/// A whole session: its identities and its rules as the SMF installed them (TS 29.244
/// clause 5.2), each URR with what it counted.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Session {
    /// The UP F-SEID's SEID (clause 8.2.37), 0x-hex.
    pub seid: String,
    /// The CP F-SEID's SEID, 0x-hex.
    pub cp_seid: String,
    /// The CP F-SEID's address (IPv4 if it has one).
    pub cp_address: Option<IpAddr>,
    /// The Node ID of the CP function that owns the session.
    pub cp_node_id: String,
    /// APN/DNN, if the SMF sent one.
    pub dnn: Option<String>,
    /// PDN Type: 1 IPv4, 2 IPv6, 3 IPv4v6, 4 Non-IP, 5 Ethernet.
    pub pdn_type: Option<u8>,
    /// The UE addresses and IPv6 prefixes (`address/length`) the PDRs name, sorted.
    pub ue_addresses: Vec<String>,
    /// The local (N3/N9) TEIDs of the session, sorted.
    pub teids: Vec<u32>,
    /// User Plane Inactivity Timer, seconds.
    pub user_plane_inactivity_timer: Option<u32>,
    /// PDRs with predefined rules active (clause 5.19).
    pub predefined_rules: Vec<PredefinedRules>,
    pub pdrs: Vec<Pdr>,
    pub fars: Vec<Far>,
    pub qers: Vec<Qer>,
    pub urrs: Vec<Urr>,
    pub bars: Vec<Bar>,
}

/// A PDR's active predefined rules.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PredefinedRules {
    pub pdr_id: u16,
    /// The rules and what the PDR had of its own before them, for diagnosis.
    pub rules: String,
}

/// An interface value (Source Interface, clause 8.2.2; Destination Interface, clause
/// 8.2.24).
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
pub enum Interface {
    #[serde(rename = "access")]
    Access,
    #[serde(rename = "core")]
    Core,
    #[serde(rename = "sgi_lan")]
    SgiLan,
    #[serde(rename = "cp_function")]
    CpFunction,
    #[serde(rename = "5g_vn_internal")]
    VnInternal,
    /// A value the specification leaves spare.
    #[serde(rename = "spare")]
    Spare,
}

/// Packet Detection Rule (clause 5.2.1; Create PDR, Table 7.5.2.2-1) with its PDI.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Pdr {
    pub id: u16,
    /// Lower is matched first; a PDR sent without one has 4294967295.
    pub precedence: u32,
    pub source_interface: Interface,
    /// The local F-TEID (clause 8.2.3), as allocated if the SMF asked for one (CHOOSE).
    pub local_fteid: Option<LocalFteid>,
    /// Network Instance (clause 8.2.4).
    pub network_instance: Option<String>,
    /// UE IP Address IEs (clause 8.2.62), resolved if chosen by the UP function.
    pub ue_ip: Vec<UeIp>,
    /// SDF Filters (clause 8.2.5).
    pub sdf_filters: Vec<SdfFilter>,
    /// Application ID: the application detected (clause 5.11).
    pub application_id: Option<String>,
    /// QFIs the PDI matches.
    pub qfis: Vec<u8>,
    /// Framed Routes, as prefixes.
    pub framed_routes: Vec<String>,
    pub outer_header_removal: Option<OuterHeaderRemoval>,
    pub far_id: Option<u32>,
    pub qer_ids: Vec<u32>,
    pub urr_ids: Vec<u32>,
}

/// A local F-TEID: the TEID and the UP function's address(es).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LocalFteid {
    pub teid: u32,
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
}

/// A UE IP Address of a PDI (clause 8.2.62).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UeIp {
    pub ipv4: Option<Ipv4Addr>,
    pub ipv6: Option<Ipv6Addr>,
    /// IPv6 Prefix Length (IP6PL) when `ipv6` is a prefix.
    pub ipv6_prefix_length: Option<u8>,
    /// S/D: the address is the destination (a downlink PDI).
    pub destination: bool,
}

/// An SDF Filter (clause 8.2.5); each field left out when the IE has none.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SdfFilter {
    /// Flow Description (an IPFilterRule, RFC 6733 clause 4.3).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_description: Option<String>,
    /// ToS / Traffic Class and its mask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tos_traffic_class: Option<u16>,
    /// Security Parameter Index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spi: Option<u32>,
    /// IPv6 Flow Label.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_label: Option<u32>,
    /// SDF Filter ID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_id: Option<u32>,
    /// Spare bits of the flags octet as received (left out when 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spare: Option<u8>,
    /// The spare octet as received (left out when 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spare_octet: Option<u8>,
}

/// Outer Header Removal (clause 8.2.64).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OuterHeaderRemoval {
    /// 0 GTP-U/UDP/IPv4, 1 GTP-U/UDP/IPv6, 2 UDP/IPv4, 3 UDP/IPv6, 4 IPv4, 5 IPv6,
    /// 6 GTP-U/UDP/IP, 7 VLAN S-TAG, 8 S-TAG and C-TAG.
    pub description: u8,
    /// GTP-U Extension Header Deletion (bit 1: the PDU Session Container); left out
    /// when the IE has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ext_header_deletion: Option<u8>,
}

/// Forwarding Action Rule (clause 5.2.1; Create FAR, Table 7.5.2.3-1).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Far {
    pub id: u32,
    /// The Apply Action flags set (clause 8.2.26).
    pub apply_action: Vec<ApplyAction>,
    /// Forwarding Parameters (Table 7.5.2.3-2).
    pub forwarding: Option<Forwarding>,
    pub bar_id: Option<u8>,
}

/// An Apply Action flag (clause 8.2.26).
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApplyAction {
    Drop,
    Forw,
    Buff,
    Nocp,
    Dupl,
    Bdpn,
    Ddpn,
}

/// Forwarding Parameters (Table 7.5.2.3-2).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Forwarding {
    pub destination_interface: Interface,
    /// Network Instance (clause 8.2.4).
    pub network_instance: Option<String>,
    pub outer_header_creation: Option<OuterHeaderCreation>,
    /// Transport Level Marking: ToS / Traffic Class and its mask.
    pub transport_level_marking: Option<u16>,
}

/// Outer Header Creation (clause 8.2.56); each field but `description` left out when
/// the IE has none.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OuterHeaderCreation {
    /// The Outer Header Creation Description bits (e.g. 256: GTP-U/UDP/IPv4).
    pub description: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<Ipv4Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// C-TAG, the IE's three octets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub c_tag: Option<[u8; 3]>,
    /// S-TAG, the IE's three octets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s_tag: Option<[u8; 3]>,
}

/// QoS Enforcement Rule (clause 5.2.1; Create QER, Table 7.5.2.5-1).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Qer {
    pub id: u32,
    /// Gate Status UL (clause 8.2.7).
    pub gate_ul: Gate,
    /// Gate Status DL (clause 8.2.7).
    pub gate_dl: Gate,
    /// MBR (clause 8.2.8), uplink, kbit/s.
    pub mbr_ul_kbps: Option<u64>,
    /// MBR, downlink, kbit/s.
    pub mbr_dl_kbps: Option<u64>,
    /// GBR (clause 8.2.9), uplink, kbit/s.
    pub gbr_ul_kbps: Option<u64>,
    /// GBR, downlink, kbit/s.
    pub gbr_dl_kbps: Option<u64>,
    /// QFI written into the PDU Session Container.
    pub qfi: Option<u8>,
    /// QER Correlation ID.
    pub correlation_id: Option<u32>,
}

/// A gate of Gate Status (clause 8.2.7).
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Gate {
    Open,
    Closed,
}

/// Usage Reporting Rule (clause 5.2.1; Create URR, Table 7.5.2.4-1) and what it counted.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Urr {
    pub id: u32,
    /// The Measurement Method flags set (clause 8.2.40).
    #[schemars(schema_with = "measurement_methods")]
    pub measurement_method: Vec<&'static str>,
    /// The Reporting Triggers set (clause 8.2.19).
    #[schemars(schema_with = "reporting_triggers")]
    pub reporting_triggers: Vec<&'static str>,
    /// Measurement Period, seconds.
    pub measurement_period_seconds: Option<u32>,
    /// Volume Threshold, octets.
    pub volume_threshold: Option<Volume>,
    /// Volume Quota, octets.
    pub volume_quota: Option<Volume>,
    /// Time Threshold, seconds.
    pub time_threshold_seconds: Option<u32>,
    /// Time Quota, seconds.
    pub time_quota_seconds: Option<u32>,
    pub measured: Measured,
}

fn measurement_methods(_: &mut SchemaGenerator) -> Schema {
    let names = pfcp::ie::measurement_method::NAMES.iter().map(|(_, n)| *n);
    list_of(one_of(names))
}

fn reporting_triggers(_: &mut SchemaGenerator) -> Schema {
    let names = pfcp::ie::reporting_triggers::NAMES.iter().map(|(_, n)| *n);
    list_of(one_of(names))
}

/// A volume threshold or quota, octets: total, uplink, downlink.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Volume {
    pub total: Option<u64>,
    pub ul: Option<u64>,
    pub dl: Option<u64>,
}

/// What a URR counted, as the data path has it when asked.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Measured {
    /// Since the URR was created.
    pub since_created: Usage,
    /// Since its last usage report: what the next one will say.
    pub since_last_report: Usage,
    /// Usage reports sent for it.
    pub reports_sent: u32,
    /// When its first packet was counted (seconds since the UNIX epoch; Time of First
    /// Packet).
    pub first_packet: Option<u64>,
    /// When its last packet was counted (seconds since the UNIX epoch; Time of Last
    /// Packet).
    pub last_packet: Option<u64>,
}

/// Packets and octets counted, per direction.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Usage {
    pub ul_packets: u64,
    pub ul_bytes: u64,
    pub dl_packets: u64,
    pub dl_bytes: u64,
    /// Uplink and downlink octets together.
    pub total_bytes: u64,
}

/// Buffering Action Rule (clause 5.2.1; Create BAR, Table 7.5.2.6-1).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Bar {
    pub id: u8,
    /// Downlink Data Notification Delay, in units of 50 ms.
    pub downlink_data_notification_delay: Option<u8>,
    /// Suggested Buffering Packets Count.
    pub suggested_buffering_packets_count: Option<u8>,
}

/// `/api/v1/stats`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Stats {
    pub n4: N4Stats,
    /// The data path's counts; null with `datapath.mode: none`.
    pub datapath: Option<DatapathStats>,
    /// The slow path's GTP-U messages; null with `datapath.mode: none`.
    pub slow_path: Option<SlowPathStats>,
}

/// PFCP on N4.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct N4Stats {
    /// Requests received, by message type.
    pub requests: Vec<MessageCount>,
    /// Requests rejected, by message type.
    pub rejections: Vec<MessageCount>,
    /// Messages that could not be decoded.
    pub malformed: u64,
    /// Retransmitted requests, answered from the responses kept.
    pub duplicates: u64,
    /// Requests of upfd's that got no response.
    pub timeouts: u64,
    /// Session Establishment Requests refused while overloaded (Cause 74).
    pub congestion_rejections: u64,
    /// Requests the kernel dropped because N4's receive queue was full.
    pub receive_drops: u64,
    /// The Load Metric sent to the CP functions (Load Control Information), percent.
    pub load_percent: u8,
}

/// Messages of one PFCP message type.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MessageCount {
    /// The message type's name (TS 29.244 Table 7.3-1), or "unknown".
    #[serde(rename = "type")]
    pub message_type: String,
    pub count: u64,
}

/// The data path's packets and octets.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DatapathStats {
    /// Per interface, in and out.
    pub interfaces: Vec<InterfaceStats>,
    /// Per drop reason.
    pub drops: Vec<DropCount>,
    /// Per outcome of a packet.
    pub outcomes: Vec<OutcomeCount>,
}

/// What came in on and went out of one interface.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InterfaceStats {
    /// n3, n6 or n9.
    pub interface: String,
    /// Received (left out for n9, which shares n3's interface).
    #[serde(rename = "in", skip_serializing_if = "Option::is_none")]
    pub received: Option<Counted>,
    /// Forwarded out of it.
    #[serde(rename = "out")]
    pub sent: Counted,
}

/// Packets and octets.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Counted {
    pub packets: u64,
    pub bytes: u64,
}

/// Packets dropped for one reason (docs/operations.md, troubleshooting by drop reason).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DropCount {
    #[schemars(schema_with = "drop_reasons")]
    pub reason: &'static str,
    pub packets: u64,
    pub bytes: u64,
}

fn drop_reasons(_: &mut SchemaGenerator) -> Schema {
    one_of(upf::abi::DropReason::ALL.iter().map(|r| r.name()))
}

/// Packets with one outcome.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OutcomeCount {
    #[schemars(schema_with = "outcomes")]
    pub outcome: &'static str,
    pub packets: u64,
    pub bytes: u64,
}

fn outcomes(_: &mut SchemaGenerator) -> Schema {
    one_of(upf::abi::Stat::ALL.iter().map(|o| o.name()))
}

/// GTP-U messages of the slow path (TS 29.281).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SlowPathStats {
    pub echo_requests_answered: u64,
    pub echo_requests_sent: u64,
    pub error_indications_sent: u64,
    /// Error Indications not sent: over their rate limit.
    pub error_indications_suppressed: u64,
    pub error_indications_received: u64,
    pub end_markers_sent: u64,
}

/// `/api/v1/buffers`: downlink packets buffered for FARs with BUFF.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Buffers {
    /// Packets buffered now, all sessions together.
    pub buffered_packets: usize,
    /// Each session's buffer.
    pub sessions: Vec<Buffered>,
    /// Since upfd started (left out with `datapath.mode: none`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub totals: Option<BufferTotals>,
    /// Why nothing is buffered (only with `datapath.mode: none`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One session's buffer.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Buffered {
    /// The session's SEID, 0x-hex.
    pub seid: String,
    /// The FAR that buffers.
    pub far_id: u32,
    pub packets: usize,
    pub octets: usize,
    /// How long the oldest packet has waited, milliseconds; null when none waits.
    pub oldest_ms: Option<u64>,
    /// The SMF was told (a Downlink Data Report).
    pub smf_notified: bool,
}

/// Buffering since upfd started, packets.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BufferTotals {
    pub buffered: u64,
    /// Sent on when the FAR forwarded again.
    pub released: u64,
    /// Dropped: the buffer was full.
    pub dropped_full: u64,
    /// Dropped: they waited too long.
    pub dropped_expired: u64,
    /// Dropped: the FAR stopped buffering without forwarding, or the session went.
    pub discarded: u64,
    /// Session Report Requests with a Downlink Data Report sent.
    pub downlink_data_reports: u64,
}

/// `/api/v1/applications`: the applications PDRs may name (PDI Application ID, clause
/// 5.11) and their PFDs (PFD Contents, clause 8.2.39), by Application ID.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Applications {
    pub applications: Vec<Application>,
}

/// One application: an SMF removing its PFDs leaves it, without PFDs.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Application {
    /// The Application ID.
    pub id: String,
    /// Its index in the data path, stable while upfd runs.
    pub index: u16,
    pub source: ApplicationSource,
    /// Flow descriptions (FD, AFD) as received.
    pub flow_descriptions: Vec<String>,
    /// http:// URLs (https:// ones are kept as domain names detected in TLS SNI).
    pub urls: Vec<String>,
    pub domain_names: Vec<DomainName>,
}

/// Where an application's PFDs come from: the configuration (`applications`), or an
/// SMF's PFD Management Request (clause 6.2.5), which replaces a configured one's.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApplicationSource {
    Configuration,
    PfdManagement,
}

/// A domain name and where it is detected.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct DomainName {
    pub name: String,
    /// Empty: a protocol the data path cannot see (TLS_SAN, TLS_SCN), nothing detected.
    pub protocols: Vec<DetectedIn>,
}

/// A protocol a domain name is detected in.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DetectedIn {
    /// DNS answers.
    Dns,
    /// TLS Server Name Indication.
    TlsSni,
    /// HTTP Host.
    HttpHost,
}
