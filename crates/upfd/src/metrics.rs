//! `/metrics` in the Prometheus text format (0.0.4): every family with `# HELP` and
//! `# TYPE`, names in [`FAMILIES`]. What a scrape reads: upfd's own counters, and the data
//! path's per-CPU statistics table (one map read of a few dozen entries: scraping never
//! touches the per-packet path or the session tables).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

use upf::abi::{DropReason, Stat};
use upf::n4::N4;
use upf_bpf::datapath::AttachMode;

use crate::slowpath::SlowPath;

/// Every metric family upfd exports: name, type. The Grafana dashboard may name only
/// these (a test checks it), and a scrape of a lab upfd under traffic shows them all.
pub const FAMILIES: &[(&str, &str)] = &[
    ("upf_sessions", "gauge"),
    ("upf_associations", "gauge"),
    ("upf_n4_association_info", "gauge"),
    ("upf_n4_association_sessions", "gauge"),
    ("upf_n4_messages_total", "counter"),
    ("upf_n4_request_duration_seconds", "histogram"),
    ("upf_n4_requests_total", "counter"),
    ("upf_n4_rejections_total", "counter"),
    ("upf_n4_malformed_total", "counter"),
    ("upf_n4_duplicates_total", "counter"),
    ("upf_n4_timeouts_total", "counter"),
    ("upf_n4_recovery_time_stamp_changes_total", "counter"),
    ("upf_n4_unknown_network_instances_total", "counter"),
    ("upf_n4_tolerated_total", "counter"),
    ("upf_n4_load_percent", "gauge"),
    ("upf_n4_overloaded", "gauge"),
    ("upf_n4_congestion_rejections_total", "counter"),
    ("upf_n4_receive_drops_total", "counter"),
    ("upf_session_reports_total", "counter"),
    ("upf_xdp_attached", "gauge"),
    ("upf_interface_packets_total", "counter"),
    ("upf_interface_bytes_total", "counter"),
    ("upf_dropped_packets_total", "counter"),
    ("upf_dropped_bytes_total", "counter"),
    ("upf_datapath_packets_total", "counter"),
    ("upf_datapath_bytes_total", "counter"),
    ("upf_lookup_keys_in_slot", "gauge"),
    ("upf_lookup_keys_slot_hashed", "gauge"),
    ("upf_nexthop_cache_on", "gauge"),
    ("upf_nexthop_cache_by_destination", "gauge"),
    ("upf_nexthop_cache_invalidations_total", "counter"),
    ("upf_slowpath_gtpu_messages_total", "counter"),
    ("upf_buffered_packets", "gauge"),
    ("upf_buffer_packets_total", "counter"),
    ("upf_redirect_segments_total", "counter"),
];

/// Upper bounds (seconds) of the request latency histogram's buckets: 50 us to 1 s.
const LATENCY_BUCKETS: [f64; 13] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// A request latency histogram (cumulative when rendered).
#[derive(Debug, Clone, Default)]
struct Histogram {
    buckets: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// What upfd counts of the PFCP messages themselves: by direction, type and Cause, and
/// how long each request took from its arrival to its response leaving.
#[derive(Debug, Default)]
pub struct N4Metrics {
    /// (sent, message type, Cause value or None) -> messages.
    messages: BTreeMap<(bool, u8, Option<u8>), u64>,
    latency: BTreeMap<u8, Histogram>,
}

impl N4Metrics {
    /// A PFCP datagram received.
    pub fn received(&mut self, data: &[u8]) {
        self.count(false, data);
    }

    /// A PFCP datagram sent (retransmissions too: they are messages on the wire).
    pub fn sent(&mut self, data: &[u8]) {
        self.count(true, data);
    }

    fn count(&mut self, sent: bool, data: &[u8]) {
        let Some(&t) = data.get(1) else {
            return;
        };
        let cause = if pfcp::message_type::is_request(t) {
            None
        } else {
            pfcp::message::top_level_ie(data, pfcp::ie::types::CAUSE)
                .and_then(|v| v.first().copied())
        };
        *self.messages.entry((sent, t, cause)).or_default() += 1;
    }

    /// A request of type `t` answered `took` after it arrived.
    pub fn answered(&mut self, t: u8, took: Duration) {
        let h = self.latency.entry(t).or_default();
        let secs = took.as_secs_f64();
        if let Some(i) = LATENCY_BUCKETS.iter().position(|b| secs <= *b) {
            h.buckets[i] += 1;
        }
        h.count += 1;
        h.sum += secs;
    }
}

/// A message type as a label value: "session_establishment_request".
fn type_name(t: u8) -> String {
    pfcp::message_type::name(t)
        .map(snake)
        .unwrap_or_else(|| format!("type_{t}"))
}

fn snake(s: &str) -> String {
    s.to_lowercase()
        .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
}

/// A Cause value as a label value: "request_accepted", "none" without a Cause.
fn cause_name(c: Option<u8>) -> String {
    match c {
        None => "none".into(),
        Some(c) => snake(pfcp::CauseValue(c).name()),
    }
}

/// The Report Type bits of a Session Report Request as label values (clause 8.2.21).
const REPORT_TYPES: [&str; 7] = [
    "downlink_data_report",
    "usage_report",
    "error_indication_report",
    "user_plane_inactivity_report",
    "tsc_management_information_report",
    "session_report",
    "uplink_ip_session_report",
];

/// Writes families, checking (in debug builds) that each is in [`FAMILIES`].
struct Exposition(String);

impl Exposition {
    fn family(&mut self, name: &str, help: &str) {
        let kind = FAMILIES.iter().find(|(n, _)| *n == name).map(|(_, k)| *k);
        debug_assert!(kind.is_some(), "{name} is not in FAMILIES");
        let _ = writeln!(
            self.0,
            "# HELP {name} {help}\n# TYPE {name} {}",
            kind.unwrap_or("untyped")
        );
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: impl std::fmt::Display) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"{}\"", escape(val));
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {v}");
    }

    /// A family of one unlabelled sample.
    fn single(&mut self, name: &str, help: &str, v: impl std::fmt::Display) {
        self.family(name, help);
        self.sample(name, &[], v);
    }
}

/// A label value escaped as the text format asks (backslash, quote, newline).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// What a scrape reads besides the N4 node: each part absent when upfd runs without it.
pub struct Sources<'a> {
    pub n4: &'a N4,
    pub n4_metrics: &'a N4Metrics,
    pub n4_queue: &'a crate::overload::N4Queue,
    /// The data path's statistics table: (packets, octets) by `upf::abi` index.
    pub datapath: Option<&'a [(u64, u64)]>,
    pub attached: &'a [(String, &'static str, AttachMode)],
    pub slow: Option<&'a SlowPath>,
    pub nexthops: Option<&'a crate::routewatch::NextHops>,
    pub direct: Option<[(usize, usize); 2]>,
}

/// The Prometheus exposition of upfd's state.
pub fn render(src: &Sources) -> String {
    let mut e = Exposition(String::with_capacity(16 * 1024));
    let n4 = src.n4;
    let st = n4.stats();
    e.single(
        "upf_sessions",
        "PFCP sessions installed.",
        n4.sessions().len(),
    );
    let assocs = n4.association_info();
    e.single(
        "upf_associations",
        "PFCP associations with CP functions.",
        assocs.len(),
    );
    e.family(
        "upf_n4_association_info",
        "1 for each association: the CP function's Node ID, where requests to it go, and its state (associated, or releasing once upfd asked it to).",
    );
    for a in &assocs {
        let (node, addr) = (a.node_id.to_string(), a.address.to_string());
        let state = if a.releasing {
            "releasing"
        } else {
            "associated"
        };
        e.sample(
            "upf_n4_association_info",
            &[("node_id", &node), ("address", &addr), ("state", state)],
            1,
        );
    }
    e.family(
        "upf_n4_association_sessions",
        "Sessions each CP function holds.",
    );
    for a in &assocs {
        e.sample(
            "upf_n4_association_sessions",
            &[("node_id", &a.node_id.to_string())],
            a.sessions,
        );
    }
    e.family(
        "upf_n4_messages_total",
        "PFCP messages received and sent (retransmissions included), by message type and Cause (\"none\": the message has no Cause).",
    );
    for ((sent, t, cause), n) in &src.n4_metrics.messages {
        let dir = if *sent { "sent" } else { "received" };
        e.sample(
            "upf_n4_messages_total",
            &[
                ("direction", dir),
                ("type", &type_name(*t)),
                ("cause", &cause_name(*cause)),
            ],
            n,
        );
    }
    e.family(
        "upf_n4_request_duration_seconds",
        "Time from a PFCP request's arrival at upfd to its response leaving (state journal write included), by request type.",
    );
    for (t, h) in &src.n4_metrics.latency {
        let ty = type_name(*t);
        let mut cum = 0;
        for (b, n) in LATENCY_BUCKETS.iter().zip(h.buckets) {
            cum += n;
            e.sample(
                "upf_n4_request_duration_seconds_bucket",
                &[("type", &ty), ("le", &b.to_string())],
                cum,
            );
        }
        e.sample(
            "upf_n4_request_duration_seconds_bucket",
            &[("type", &ty), ("le", "+Inf")],
            h.count,
        );
        e.sample(
            "upf_n4_request_duration_seconds_sum",
            &[("type", &ty)],
            h.sum,
        );
        e.sample(
            "upf_n4_request_duration_seconds_count",
            &[("type", &ty)],
            h.count,
        );
    }
    e.family(
        "upf_n4_requests_total",
        "PFCP requests received, by message type (duplicates answered from the response cache not included).",
    );
    let mut req: Vec<_> = st.requests.iter().collect();
    req.sort();
    for (t, n) in req {
        e.sample("upf_n4_requests_total", &[("type", &type_name(*t))], n);
    }
    e.family(
        "upf_n4_rejections_total",
        "PFCP requests answered with a rejection Cause, by message type.",
    );
    let mut rej: Vec<_> = st.rejected.iter().collect();
    rej.sort();
    for (t, n) in rej {
        e.sample("upf_n4_rejections_total", &[("type", &type_name(*t))], n);
    }
    e.single(
        "upf_n4_malformed_total",
        "PFCP datagrams that could not be decoded (answered with a Cause and Offending IE where the message type allows).",
        st.malformed,
    );
    e.single(
        "upf_n4_duplicates_total",
        "Retransmitted PFCP requests answered again from the response cache.",
        st.duplicates,
    );
    e.single(
        "upf_n4_timeouts_total",
        "PFCP requests upfd sent that got no response after all retransmissions (n4.t1, n4.n1).",
        st.timeouts,
    );
    e.single(
        "upf_n4_recovery_time_stamp_changes_total",
        "Heartbeats whose Recovery Time Stamp differed from the association's, sessions kept (n4.strict: false).",
        st.recovery_time_stamp_changes,
    );
    e.single(
        "upf_n4_unknown_network_instances_total",
        "Session requests naming a Network Instance the configuration does not (accepted, n4.strict: false).",
        st.unknown_network_instances,
    );
    e.family(
        "upf_n4_tolerated_total",
        "Session requests accepted with what TS 29.244 does not allow and real CP functions send (n4.strict: false; docs/interop.md), by deviation.",
    );
    for what in upf::procedures::Tolerated::ALL {
        let n = st.tolerated.get(&what).copied().unwrap_or(0);
        e.sample("upf_n4_tolerated_total", &[("deviation", what.label())], n);
    }
    e.single(
        "upf_n4_load_percent",
        "The Load Metric reported to CP functions: the larger of the session table's and the N4 receive queue's fill.",
        src.n4_queue.load.metric,
    );
    e.single(
        "upf_n4_overloaded",
        "1 while new sessions are refused with Cause 74 (the N4 receive queue half full, until under a quarter).",
        u8::from(n4.overloaded()),
    );
    e.single(
        "upf_n4_congestion_rejections_total",
        "Session Establishment Requests refused with Cause 74 (PFCP entity in congestion).",
        st.congestion_rejections,
    );
    e.single(
        "upf_n4_receive_drops_total",
        "PFCP datagrams the kernel dropped: the N4 receive queue was full.",
        src.n4_queue.drops,
    );
    e.family(
        "upf_session_reports_total",
        "Session Report Requests sent (retransmissions not included), by the report types they carry.",
    );
    for (i, name) in REPORT_TYPES.iter().enumerate() {
        e.sample(
            "upf_session_reports_total",
            &[("report_type", name)],
            st.reports_sent[i],
        );
    }
    e.family(
        "upf_xdp_attached",
        "1 for each interface upfd's XDP programs run on, with the reference point it serves and the mode (native: in the driver; generic: after the kernel built its buffer, slower).",
    );
    for (name, point, mode) in src.attached {
        e.sample(
            "upf_xdp_attached",
            &[
                ("interface", name),
                ("reference_point", point),
                ("mode", attach_mode_name(*mode)),
            ],
            1,
        );
    }
    if let Some(d) = src.datapath {
        datapath(&mut e, d);
    }
    if let Some([up, down]) = src.direct {
        e.family(
            "upf_lookup_keys_in_slot",
            "Lookup keys (uplink: TEIDs; downlink: UE IPv4 addresses) that find their session in the slot they map to, one memory access; other keys are found through a hash table.",
        );
        e.sample("upf_lookup_keys_in_slot", &[("direction", "uplink")], up.0);
        e.sample(
            "upf_lookup_keys_in_slot",
            &[("direction", "downlink")],
            down.0,
        );
        e.family(
            "upf_lookup_keys_slot_hashed",
            "Keys found through the key tables (a hash table): a TEID the SMF chose, a UE address whose slot holds another session, an IPv6 address, a second TEID or address of a session.",
        );
        e.sample(
            "upf_lookup_keys_slot_hashed",
            &[("direction", "uplink")],
            up.1,
        );
        e.sample(
            "upf_lookup_keys_slot_hashed",
            &[("direction", "downlink")],
            down.1,
        );
    }
    if let Some(nh) = src.nexthops {
        e.single(
            "upf_nexthop_cache_on",
            "1: the data path caches next hops (routing changes are heard).",
            u8::from(nh.on),
        );
        e.single(
            "upf_nexthop_cache_by_destination",
            "1: next hops cached per destination (no source policy rules, no multipath routes); 0: per source and destination.",
            u8::from(nh.by_destination),
        );
        e.single(
            "upf_nexthop_cache_invalidations_total",
            "Routing changes that emptied the next-hop cache.",
            nh.invalidations,
        );
    }
    if let Some(sp) = src.slow {
        slow_path(&mut e, sp);
    }
    e.0
}

/// The data path's statistics table: per interface, per drop reason, per outcome.
fn datapath(e: &mut Exposition, d: &[(u64, u64)]) {
    let at = |i: usize| d.get(i).copied().unwrap_or_default();
    // In: every frame each program saw; out: what it forwarded there.
    let interfaces = [
        ("n3", "in", Stat::ReceivedN3),
        ("n6", "in", Stat::ReceivedN6),
        ("n3", "out", Stat::ForwardedDownlink),
        ("n6", "out", Stat::ForwardedUplink),
        ("n9", "out", Stat::ForwardedN9),
    ];
    e.family(
        "upf_interface_packets_total",
        "Packets by reference point: in, every frame the XDP program of n3 (N3 and N9 interfaces) or n6 saw; out, the packets it forwarded there (n3: encapsulated downlink; n6: decapsulated uplink; n9: G-PDUs relayed to another UPF).",
    );
    for (i, dir, s) in interfaces {
        e.sample(
            "upf_interface_packets_total",
            &[("interface", i), ("direction", dir)],
            at(s.index()).0,
        );
    }
    e.family(
        "upf_interface_bytes_total",
        "Octets of upf_interface_packets_total: in, whole frames as received; out, the user's IP packets (without the tunnel headers added or removed).",
    );
    for (i, dir, s) in interfaces {
        e.sample(
            "upf_interface_bytes_total",
            &[("interface", i), ("direction", dir)],
            at(s.index()).1,
        );
    }
    e.family(
        "upf_dropped_packets_total",
        "Packets the data path dropped, by reason (docs/operations.md says what each means).",
    );
    for r in DropReason::ALL {
        e.sample(
            "upf_dropped_packets_total",
            &[("reason", r.name())],
            at(r.index()).0,
        );
    }
    e.family(
        "upf_dropped_bytes_total",
        "Octets of the packets the data path dropped, by reason.",
    );
    for r in DropReason::ALL {
        e.sample(
            "upf_dropped_bytes_total",
            &[("reason", r.name())],
            at(r.index()).1,
        );
    }
    let outcomes = Stat::ALL
        .iter()
        .filter(|o| !matches!(o, Stat::ReceivedN3 | Stat::ReceivedN6));
    e.family(
        "upf_datapath_packets_total",
        "Packets the data path did not drop, by outcome: forwarded (uplink, downlink, n9), buffered, to upfd, passed to the kernel, icmp_sent (0: the data path sends no ICMP errors yet).",
    );
    for o in outcomes.clone() {
        e.sample(
            "upf_datapath_packets_total",
            &[("outcome", o.name())],
            at(o.index()).0,
        );
    }
    e.family(
        "upf_datapath_bytes_total",
        "Octets of upf_datapath_packets_total, by outcome.",
    );
    for o in outcomes {
        e.sample(
            "upf_datapath_bytes_total",
            &[("outcome", o.name())],
            at(o.index()).1,
        );
    }
}

/// The slow path: GTP-U messages upfd handles itself, and its buffers.
fn slow_path(e: &mut Exposition, sp: &SlowPath) {
    let c = &sp.counters;
    e.family(
        "upf_slowpath_gtpu_messages_total",
        "GTP-U messages upfd handled or sent itself, by kind (echo requests answered and sent, error indications sent, rate-limited and received, end markers sent).",
    );
    for (kind, v) in [
        ("echo_request_answered", c.echo_requests_answered),
        ("echo_request_sent", c.echo_requests_sent),
        ("error_indication_sent", c.error_indications_sent),
        (
            "error_indication_suppressed",
            c.error_indications_suppressed,
        ),
        ("error_indication_received", c.error_indications_received),
        ("end_marker_sent", c.end_markers_sent),
        ("other", c.gtpu_other),
    ] {
        e.sample("upf_slowpath_gtpu_messages_total", &[("kind", kind)], v);
    }
    e.single(
        "upf_buffered_packets",
        "Downlink packets buffered now, for sessions whose FAR buffers (idle UEs being paged).",
        sp.buffered_packets(),
    );
    e.family(
        "upf_buffer_packets_total",
        "Downlink packets by what buffering did with them: buffered, released (sent on), dropped because the buffer was full or held them too long, discarded (the SMF said drop or deleted the session); downlink_data_report counts the reports sent.",
    );
    for (event, v) in [
        ("buffered", c.buffered),
        ("released", c.buffer_released),
        ("dropped_full", c.buffer_dropped_full),
        ("dropped_expired", c.buffer_dropped_expired),
        ("discarded", c.buffer_discarded),
        ("downlink_data_report", c.downlink_data_reports),
    ] {
        e.sample("upf_buffer_packets_total", &[("event", event)], v);
    }
    e.family(
        "upf_redirect_segments_total",
        "Uplink TCP segments of flows whose FAR has Redirect Information, by what upfd did: answered with a SYN-ACK, with the HTTP 302, with the ACK of the client's FIN; not_http (TLS, data before the handshake: dropped); dropped (the FAR no longer redirects).",
    );
    for (what, v) in [
        ("syn_ack", c.redirect_syn_acks),
        ("http_302", c.redirect_responses),
        ("fin_ack", c.redirect_fin_acks),
        ("not_http", c.redirect_not_http),
        ("dropped", c.redirect_dropped),
    ] {
        e.sample("upf_redirect_segments_total", &[("outcome", what)], v);
    }
}

/// An XDP attach mode as the metrics and the API name it.
pub fn attach_mode_name(mode: AttachMode) -> &'static str {
    match mode {
        AttachMode::Native => "native",
        AttachMode::Generic => "generic",
    }
}

/// A Recovery Time Stamp (NTP seconds, clause 8.2.65) as RFC 3339 UTC.
pub fn ntp_to_rfc3339(ntp: u32) -> String {
    crate::log::utc(upf::n4::from_ntp(ntp) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recovery_time_stamps_read_as_utc() {
        // 2026-11-26T00:00:00Z is UNIX 1795651200.
        assert_eq!(
            ntp_to_rfc3339((1_795_651_200u64 + 2_208_988_800) as u32),
            "2026-11-26T00:00:00Z"
        );
        assert_eq!(ntp_to_rfc3339(2_208_988_800), "1970-01-01T00:00:00Z");
        // Past NTP era 0's end in 2036: the wrapped value reads as era 1.
        assert_eq!(
            ntp_to_rfc3339(upf::n4::to_ntp(2_208_988_800)),
            "2040-01-01T00:00:00Z"
        );
    }

    #[test]
    fn messages_count_by_type_and_cause_and_latency_is_cumulative() {
        let mut m = N4Metrics::default();
        // A Heartbeat Request (no Cause) and a Session Establishment Response with
        // Cause 1 (Request accepted).
        m.received(&[0x20, 1, 0, 4, 0, 0, 1, 0]);
        let resp = [
            0x21, 51, 0, 17, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 2, 0, 0, 19, 0, 1, 1,
        ];
        m.sent(&resp);
        m.sent(&resp);
        m.answered(50, Duration::from_micros(700));
        m.answered(50, Duration::from_secs(3));
        let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/config/upfd.yaml");
        let cfg =
            crate::config::Config::load(std::path::Path::new(example)).expect("example config");
        let fp = Box::new(upf::model::Model::without_traffic(16));
        let n4 = crate::runtime::build_n4(&cfg, fp, crate::xdp::teid_index(&cfg, 1), 1);
        let text = render(&Sources {
            n4: &n4,
            n4_metrics: &m,
            n4_queue: &crate::overload::N4Queue::default(),
            datapath: None,
            attached: &[],
            slow: None,
            nexthops: None,
            direct: None,
        });
        for line in [
            "upf_n4_messages_total{direction=\"received\",type=\"heartbeat_request\",cause=\"none\"} 1",
            "upf_n4_messages_total{direction=\"sent\",type=\"session_establishment_response\",cause=\"request_accepted\"} 2",
            "upf_n4_request_duration_seconds_bucket{type=\"session_establishment_request\",le=\"0.0005\"} 0",
            "upf_n4_request_duration_seconds_bucket{type=\"session_establishment_request\",le=\"0.001\"} 1",
            "upf_n4_request_duration_seconds_bucket{type=\"session_establishment_request\",le=\"1\"} 1",
            "upf_n4_request_duration_seconds_bucket{type=\"session_establishment_request\",le=\"+Inf\"} 2",
            "upf_n4_request_duration_seconds_count{type=\"session_establishment_request\"} 2",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line} in\n{text}");
        }
        // Every family rendered has HELP and TYPE, once.
        for (name, _) in FAMILIES {
            let helps = text
                .lines()
                .filter(|l| l.starts_with(&format!("# HELP {name} ")))
                .count();
            assert!(helps <= 1, "{name}: {helps} HELP lines");
        }
    }

    /// The Grafana dashboard (deploy/grafana) names only metrics upfd exports.
    #[test]
    fn the_dashboard_queries_only_exported_metrics() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/grafana/upfd-dashboard.json"
        );
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let dash: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
        let mut exprs = Vec::new();
        collect_exprs(&dash, &mut exprs);
        assert!(exprs.len() >= 8, "only {} queries in {path}", exprs.len());
        let mut named = 0;
        for ex in &exprs {
            for name in metric_names(ex) {
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s))
                    .filter(|f| FAMILIES.iter().any(|(n, k)| n == f && *k == "histogram"))
                    .unwrap_or(&name);
                assert!(
                    FAMILIES.iter().any(|(n, _)| *n == family),
                    "{path}: query {ex:?} names {name}, which upfd does not export"
                );
                named += 1;
            }
        }
        assert!(named >= exprs.len(), "queries without upf_ metrics");
    }

    fn collect_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    match (k.as_str(), x) {
                        ("expr" | "query", serde_json::Value::String(s)) => out.push(s.clone()),
                        _ => collect_exprs(x, out),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| collect_exprs(x, out)),
            _ => {}
        }
    }

    /// The `upf_*` identifiers in a PromQL expression.
    fn metric_names(expr: &str) -> Vec<String> {
        let mut names = Vec::new();
        let b = expr.as_bytes();
        let mut i = 0;
        while i < b.len() {
            let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b':';
            if word(b[i]) && (i == 0 || !word(b[i - 1])) {
                let start = i;
                while i < b.len() && word(b[i]) {
                    i += 1;
                }
                let w = &expr[start..i];
                if w.starts_with("upf_") {
                    names.push(w.to_string());
                }
            } else {
                i += 1;
            }
        }
        names
    }
}
