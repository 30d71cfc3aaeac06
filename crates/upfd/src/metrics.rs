//! `/metrics` in the Prometheus text format (0.0.4), written by prometheus-client's
//! encoder: every family with `# HELP` and `# TYPE`, names in [`FAMILIES`]. What a scrape
//! reads: upfd's own counters, and the data path's per-CPU statistics table (one map read
//! of a few dozen entries: scraping never touches the per-packet path or the session
//! tables).

use std::collections::BTreeMap;
use std::time::Duration;

use prometheus_client::encoding::{prometheus_text, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;
use upf::abi::{DropReason, Stat};
use upf::n4::N4;
use upf_bpf::datapath::AttachMode;

use crate::slowpath::SlowPath;

/// The `Content-Type` of what [`render`] returns.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

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
    ("upf_qos_monitoring_packets_total", "counter"),
];

/// Upper bounds (seconds) of the request latency histogram's buckets: 50 us to 1 s.
const LATENCY_BUCKETS: [f64; 13] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
];

/// What upfd counts of the PFCP messages themselves: by direction, type and Cause, and
/// how long each request took from its arrival to its response leaving.
#[derive(Debug, Default)]
pub struct N4Metrics {
    /// (sent, message type, Cause value or None) -> messages.
    messages: BTreeMap<(bool, u8, Option<u8>), Counter>,
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
        self.messages.entry((sent, t, cause)).or_default().inc();
    }

    /// A request of type `t` answered `took` after it arrived.
    pub fn answered(&mut self, t: u8, took: Duration) {
        self.latency
            .entry(t)
            .or_insert_with(|| Histogram::new(LATENCY_BUCKETS))
            .observe(took.as_secs_f64());
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

/// A sample's labels, in the order they are written.
type Labels = Vec<(&'static str, String)>;

fn labels<const N: usize>(l: [(&'static str, &str); N]) -> Labels {
    l.into_iter().map(|(k, v)| (k, v.to_string())).collect()
}

/// One family's samples in the order given. (The library's `Family` keeps its label sets
/// in a hash map: the order of the lines would change from one scrape to the next.)
#[derive(Debug)]
struct Rows<M>(Vec<(Labels, M)>);

impl<M: EncodeMetric + TypedMetric> EncodeMetric for Rows<M> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (l, m) in &self.0 {
            m.encode(encoder.encode_family(l)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }
}

/// The families of one scrape, in the order added, each checked (in debug builds) against
/// [`FAMILIES`].
struct Exposition(Registry);

impl Exposition {
    fn family<M>(&mut self, name: &str, help: &str, rows: Vec<(Labels, M)>)
    where
        M: EncodeMetric + TypedMetric + Send + Sync + std::fmt::Debug + 'static,
    {
        let kind = match M::TYPE {
            MetricType::Counter => "counter",
            MetricType::Histogram => "histogram",
            _ => "gauge",
        };
        debug_assert!(
            FAMILIES.contains(&(name, kind)),
            "{name} ({kind}) is not in FAMILIES"
        );
        // The encoder appends `_total` to a counter's name and a full stop to the help.
        let name = match M::TYPE {
            MetricType::Counter => name.strip_suffix("_total").unwrap_or(name),
            _ => name,
        };
        self.0
            .register(name, help.strip_suffix('.').unwrap_or(help), Rows(rows));
    }

    fn counters(&mut self, name: &str, help: &str, rows: Vec<(Labels, u64)>) {
        let rows = rows
            .into_iter()
            .map(|(l, v)| (l, ConstCounter::new(v)))
            .collect();
        self.family(name, help, rows);
    }

    fn gauges(&mut self, name: &str, help: &str, rows: Vec<(Labels, u64)>) {
        let rows = rows
            .into_iter()
            .map(|(l, v)| (l, ConstGauge::new(v)))
            .collect();
        self.family(name, help, rows);
    }

    /// A counter family of one unlabelled sample.
    fn counter(&mut self, name: &str, help: &str, v: u64) {
        self.counters(name, help, vec![(Vec::new(), v)]);
    }

    /// A gauge family of one unlabelled sample.
    fn gauge(&mut self, name: &str, help: &str, v: u64) {
        self.gauges(name, help, vec![(Vec::new(), v)]);
    }
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
    let mut e = Exposition(Registry::default());
    let n4 = src.n4;
    let st = n4.stats();
    e.gauge(
        "upf_sessions",
        "PFCP sessions installed.",
        n4.sessions().len() as u64,
    );
    let assocs = n4.association_info();
    e.gauge(
        "upf_associations",
        "PFCP associations with CP functions.",
        assocs.len() as u64,
    );
    e.gauges(
        "upf_n4_association_info",
        "1 for each association: the CP function's Node ID, where requests to it go, and its state (associated, or releasing once upfd asked it to).",
        assocs
            .iter()
            .map(|a| {
                let state = if a.releasing {
                    "releasing"
                } else {
                    "associated"
                };
                let l = vec![
                    ("node_id", a.node_id.to_string()),
                    ("address", a.address.to_string()),
                    ("state", state.to_string()),
                ];
                (l, 1)
            })
            .collect(),
    );
    e.gauges(
        "upf_n4_association_sessions",
        "Sessions each CP function holds.",
        assocs
            .iter()
            .map(|a| (vec![("node_id", a.node_id.to_string())], a.sessions as u64))
            .collect(),
    );
    e.family(
        "upf_n4_messages_total",
        "PFCP messages received and sent (retransmissions included), by message type and Cause (\"none\": the message has no Cause).",
        src.n4_metrics
            .messages
            .iter()
            .map(|((sent, t, cause), n)| {
                let dir = if *sent { "sent" } else { "received" };
                let l = vec![
                    ("direction", dir.to_string()),
                    ("type", type_name(*t)),
                    ("cause", cause_name(*cause)),
                ];
                (l, n.clone())
            })
            .collect(),
    );
    e.family(
        "upf_n4_request_duration_seconds",
        "Time from a PFCP request's arrival at upfd to its response leaving (state journal write included), by request type.",
        src.n4_metrics
            .latency
            .iter()
            .map(|(t, h)| (vec![("type", type_name(*t))], h.clone()))
            .collect(),
    );
    let by_type = |m: &std::collections::HashMap<u8, u64>| {
        let mut v: Vec<_> = m.iter().map(|(t, n)| (*t, *n)).collect();
        v.sort();
        v.into_iter()
            .map(|(t, n)| (vec![("type", type_name(t))], n))
            .collect()
    };
    e.counters(
        "upf_n4_requests_total",
        "PFCP requests received, by message type (duplicates answered from the response cache not included).",
        by_type(&st.requests),
    );
    e.counters(
        "upf_n4_rejections_total",
        "PFCP requests answered with a rejection Cause, by message type.",
        by_type(&st.rejected),
    );
    e.counter(
        "upf_n4_malformed_total",
        "PFCP datagrams that could not be decoded (answered with a Cause and Offending IE where the message type allows).",
        st.malformed,
    );
    e.counter(
        "upf_n4_duplicates_total",
        "Retransmitted PFCP requests answered again from the response cache.",
        st.duplicates,
    );
    e.counter(
        "upf_n4_timeouts_total",
        "PFCP requests upfd sent that got no response after all retransmissions (n4.t1, n4.n1).",
        st.timeouts,
    );
    e.counter(
        "upf_n4_recovery_time_stamp_changes_total",
        "Heartbeats whose Recovery Time Stamp differed from the association's, sessions kept (n4.strict: false).",
        st.recovery_time_stamp_changes,
    );
    e.counter(
        "upf_n4_unknown_network_instances_total",
        "Session requests naming a Network Instance the configuration does not (accepted, n4.strict: false).",
        st.unknown_network_instances,
    );
    e.counters(
        "upf_n4_tolerated_total",
        "Session requests accepted with what TS 29.244 does not allow and real CP functions send (n4.strict: false; docs/interop.md), by deviation.",
        upf::procedures::Tolerated::ALL
            .iter()
            .map(|what| {
                let n = st.tolerated.get(what).copied().unwrap_or(0);
                (labels([("deviation", what.label())]), n)
            })
            .collect(),
    );
    e.gauge(
        "upf_n4_load_percent",
        "The Load Metric reported to CP functions: the larger of the session table's and the N4 receive queue's fill.",
        u64::from(src.n4_queue.load.metric),
    );
    e.gauge(
        "upf_n4_overloaded",
        "1 while new sessions are refused with Cause 74 (the N4 receive queue half full, until under a quarter).",
        u64::from(n4.overloaded()),
    );
    e.counter(
        "upf_n4_congestion_rejections_total",
        "Session Establishment Requests refused with Cause 74 (PFCP entity in congestion).",
        st.congestion_rejections,
    );
    e.counter(
        "upf_n4_receive_drops_total",
        "PFCP datagrams the kernel dropped: the N4 receive queue was full.",
        src.n4_queue.drops,
    );
    e.counters(
        "upf_session_reports_total",
        "Session Report Requests sent (retransmissions not included), by the report types they carry.",
        REPORT_TYPES
            .iter()
            .enumerate()
            .map(|(i, name)| (labels([("report_type", name)]), st.reports_sent[i]))
            .collect(),
    );
    e.gauges(
        "upf_xdp_attached",
        "1 for each interface upfd's XDP programs run on, with the reference point it serves and the mode (native: in the driver; generic: after the kernel built its buffer, slower).",
        src.attached
            .iter()
            .map(|(name, point, mode)| {
                let l = labels([
                    ("interface", name),
                    ("reference_point", point),
                    ("mode", attach_mode_name(*mode)),
                ]);
                (l, 1)
            })
            .collect(),
    );
    if let Some(d) = src.datapath {
        datapath(&mut e, d);
    }
    if let Some([up, down]) = src.direct {
        let dirs = |f: fn((usize, usize)) -> usize| {
            vec![
                (labels([("direction", "uplink")]), f(up) as u64),
                (labels([("direction", "downlink")]), f(down) as u64),
            ]
        };
        e.gauges(
            "upf_lookup_keys_in_slot",
            "Lookup keys (uplink: TEIDs; downlink: UE IPv4 addresses) that find their session in the slot they map to, one memory access; other keys are found through a hash table.",
            dirs(|d| d.0),
        );
        e.gauges(
            "upf_lookup_keys_slot_hashed",
            "Keys found through the key tables (a hash table): a TEID the SMF chose, a UE address whose slot holds another session, an IPv6 address, a second TEID or address of a session.",
            dirs(|d| d.1),
        );
    }
    if let Some(nh) = src.nexthops {
        e.gauge(
            "upf_nexthop_cache_on",
            "1: the data path caches next hops (routing changes are heard).",
            u64::from(nh.on),
        );
        e.gauge(
            "upf_nexthop_cache_by_destination",
            "1: next hops cached per destination (no source policy rules, no multipath routes); 0: per source and destination.",
            u64::from(nh.by_destination),
        );
        e.counter(
            "upf_nexthop_cache_invalidations_total",
            "Routing changes that emptied the next-hop cache.",
            nh.invalidations,
        );
    }
    if let Some(sp) = src.slow {
        slow_path(&mut e, sp);
    }
    let mut text = String::with_capacity(16 * 1024);
    // Writing to a String cannot fail, and none of the metrics above returns an error.
    prometheus_text::encode(&mut text, &e.0)
        .expect("the Prometheus text encoding of upfd's metrics");
    text
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
    let per_interface = |octets: bool| {
        interfaces
            .iter()
            .map(|(i, dir, s)| {
                let (p, o) = at(s.index());
                (
                    labels([("interface", i), ("direction", dir)]),
                    if octets { o } else { p },
                )
            })
            .collect()
    };
    e.counters(
        "upf_interface_packets_total",
        "Packets by reference point: in, every frame the XDP program of n3 (N3 and N9 interfaces) or n6 saw; out, the packets it forwarded there (n3: encapsulated downlink; n6: decapsulated uplink; n9: G-PDUs relayed to another UPF).",
        per_interface(false),
    );
    e.counters(
        "upf_interface_bytes_total",
        "Octets of upf_interface_packets_total: in, whole frames as received; out, the user's IP packets (without the tunnel headers added or removed).",
        per_interface(true),
    );
    let per_reason = |octets: bool| {
        DropReason::ALL
            .iter()
            .map(|r| {
                let (p, o) = at(r.index());
                (labels([("reason", r.name())]), if octets { o } else { p })
            })
            .collect()
    };
    e.counters(
        "upf_dropped_packets_total",
        "Packets the data path dropped, by reason (docs/operations.md says what each means).",
        per_reason(false),
    );
    e.counters(
        "upf_dropped_bytes_total",
        "Octets of the packets the data path dropped, by reason.",
        per_reason(true),
    );
    let per_outcome = |octets: bool| {
        Stat::ALL
            .iter()
            .filter(|o| !matches!(o, Stat::ReceivedN3 | Stat::ReceivedN6))
            .map(|o| {
                let (p, b) = at(o.index());
                (labels([("outcome", o.name())]), if octets { b } else { p })
            })
            .collect()
    };
    e.counters(
        "upf_datapath_packets_total",
        "Packets the data path did not drop, by outcome: forwarded (uplink, downlink, n9), buffered, to upfd, passed to the kernel; ICMP errors for packets too big for their link or out of TTL, sent (icmp_sent) or over their budget (icmp_limited).",
        per_outcome(false),
    );
    e.counters(
        "upf_datapath_bytes_total",
        "Octets of upf_datapath_packets_total, by outcome.",
        per_outcome(true),
    );
}

/// The slow path: GTP-U messages upfd handles itself, and its buffers.
fn slow_path(e: &mut Exposition, sp: &SlowPath) {
    let c = &sp.counters;
    let by = |label: &'static str, rows: &[(&str, u64)]| {
        rows.iter()
            .map(|(k, v)| (labels([(label, k)]), *v))
            .collect()
    };
    e.counters(
        "upf_slowpath_gtpu_messages_total",
        "GTP-U messages upfd handled or sent itself, by kind (echo requests answered and sent, error indications sent, rate-limited and received, end markers sent).",
        by(
            "kind",
            &[
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
            ],
        ),
    );
    e.gauge(
        "upf_buffered_packets",
        "Downlink packets buffered now, for sessions whose FAR buffers (idle UEs being paged).",
        sp.buffered_packets() as u64,
    );
    e.counters(
        "upf_buffer_packets_total",
        "Downlink packets by what buffering did with them: buffered, released (sent on), dropped because the buffer was full or held them too long, discarded (the SMF said drop or deleted the session); downlink_data_report counts the reports sent.",
        by(
            "event",
            &[
                ("buffered", c.buffered),
                ("released", c.buffer_released),
                ("dropped_full", c.buffer_dropped_full),
                ("dropped_expired", c.buffer_dropped_expired),
                ("discarded", c.buffer_discarded),
                ("downlink_data_report", c.downlink_data_reports),
            ],
        ),
    );
    e.counters(
        "upf_redirect_segments_total",
        "Uplink TCP segments of flows whose FAR has Redirect Information, by what upfd did: answered with a SYN-ACK, with the HTTP 302, with the ACK of the client's FIN; not_http (TLS, data before the handshake: dropped); dropped (the FAR no longer redirects).",
        by(
            "outcome",
            &[
                ("syn_ack", c.redirect_syn_acks),
                ("http_302", c.redirect_responses),
                ("fin_ack", c.redirect_fin_acks),
                ("not_http", c.redirect_not_http),
                ("dropped", c.redirect_dropped),
            ],
        ),
    );
    e.counters(
        "upf_qos_monitoring_packets_total",
        "QoS monitoring per QoS flow by GTP-U (TS 23.501 5.33.3.2): monitoring packets sent to gNBs, answers read, and packets not sent because the session had no tunnel to a gNB.",
        by(
            "kind",
            &[
                ("sent", c.qos_monitoring_sent),
                ("answered", c.qos_monitoring_answers),
                ("no_tunnel", c.qos_monitoring_no_tunnel),
            ],
        ),
    );
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
        let n4 = example_n4();
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

    /// A scrape of every part upfd can have (an association, the data path's table, the
    /// slow path, the next-hop cache, the direct lookup): the series the lab tests and
    /// scripts read keep their names, labels and values; every family of [`FAMILIES`] is
    /// written once with HELP and TYPE and nothing else is; two scrapes of the same state
    /// are the same text; and Prometheus' own linter accepts it (`promtool check metrics`,
    /// from scripts/ops-tools.sh).
    #[test]
    fn a_whole_scrape_keeps_its_series_and_passes_promtool() {
        use std::net::{Ipv4Addr, SocketAddr};
        use std::time::Instant;

        let mut m = N4Metrics::default();
        m.received(&[0x20, 1, 0, 4, 0, 0, 1, 0]);
        m.answered(50, Duration::from_micros(30));
        m.answered(50, Duration::from_millis(2));
        let mut n4 = example_n4();
        let smf: SocketAddr = "127.0.0.4:8805".parse().unwrap();
        let setup = pfcp::msg::AssociationSetupRequest::new(
            pfcp::ie::NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4)),
            1,
        );
        let h = pfcp::header::HeaderRepr::node(0, 1);
        let out = n4.on_datagram(smf, &pfcp::msg::emit(&h, &setup), Instant::now());
        assert_eq!(out.len(), 1, "an Association Setup Response");
        // Packets i, octets 100 i at statistics index i.
        let table: Vec<(u64, u64)> = (0..64).map(|i| (i, 100 * i)).collect();
        let no_pdr = DropReason::ALL
            .iter()
            .find(|r| r.name() == "no_pdr")
            .expect("the no_pdr drop reason")
            .index();
        let mut slow = SlowPath::new(
            [2, 0, 0, 0, 0, 6],
            upf::fastpath::Config::default(),
            crate::config::Buffering::default(),
            10,
        );
        slow.counters.redirect_syn_acks = 3;
        slow.counters.end_markers_sent = 4;
        let nexthops = crate::routewatch::NextHops {
            on: true,
            by_destination: false,
            invalidations: 2,
        };
        let attached = [("n3".to_string(), "n3", AttachMode::Native)];
        let scrape = || {
            render(&Sources {
                n4: &n4,
                n4_metrics: &m,
                n4_queue: &crate::overload::N4Queue::default(),
                datapath: Some(&table),
                attached: &attached,
                slow: Some(&slow),
                nexthops: Some(&nexthops),
                direct: Some([(5, 1), (6, 2)]),
            })
        };
        let text = scrape();
        assert_eq!(text, scrape(), "two scrapes of one state differ");
        for line in [
            "upf_sessions 0".to_string(),
            "upf_associations 1".into(),
            "upf_n4_association_info{node_id=\"127.0.0.4\",address=\"127.0.0.4:8805\",state=\"associated\"} 1".into(),
            "upf_n4_association_sessions{node_id=\"127.0.0.4\"} 0".into(),
            "upf_n4_messages_total{direction=\"received\",type=\"heartbeat_request\",cause=\"none\"} 1".into(),
            "upf_n4_request_duration_seconds_bucket{type=\"session_establishment_request\",le=\"5e-05\"} 1".into(),
            "upf_n4_request_duration_seconds_bucket{type=\"session_establishment_request\",le=\"0.0025\"} 2".into(),
            "upf_n4_request_duration_seconds_count{type=\"session_establishment_request\"} 2".into(),
            "upf_n4_requests_total{type=\"association_setup_request\"} 1".into(),
            "upf_n4_tolerated_total{deviation=\"sdf_direction_in\"} 0".into(),
            "upf_n4_overloaded 0".into(),
            "upf_session_reports_total{report_type=\"usage_report\"} 0".into(),
            "upf_xdp_attached{interface=\"n3\",reference_point=\"n3\",mode=\"native\"} 1".into(),
            format!("upf_dropped_packets_total{{reason=\"no_pdr\"}} {no_pdr}"),
            format!("upf_dropped_bytes_total{{reason=\"no_pdr\"}} {}", 100 * no_pdr),
            format!(
                "upf_interface_packets_total{{interface=\"n3\",direction=\"in\"}} {}",
                Stat::ReceivedN3.index()
            ),
            format!(
                "upf_datapath_packets_total{{outcome=\"forwarded_uplink\"}} {}",
                Stat::ForwardedUplink.index()
            ),
            "upf_lookup_keys_in_slot{direction=\"uplink\"} 5".into(),
            "upf_lookup_keys_slot_hashed{direction=\"downlink\"} 2".into(),
            "upf_nexthop_cache_on 1".into(),
            "upf_nexthop_cache_by_destination 0".into(),
            "upf_nexthop_cache_invalidations_total 2".into(),
            "upf_slowpath_gtpu_messages_total{kind=\"end_marker_sent\"} 4".into(),
            "upf_buffered_packets 0".into(),
            "upf_buffer_packets_total{event=\"buffered\"} 0".into(),
            "upf_redirect_segments_total{outcome=\"syn_ack\"} 3".into(),
        ] {
            assert!(text.lines().any(|l| l == line), "no {line} in\n{text}");
        }
        // Every family once, with its type; no line of any other family.
        for (name, kind) in FAMILIES {
            for (prefix, n) in [("# HELP", 1), ("# TYPE", 1)] {
                let found = text
                    .lines()
                    .filter(|l| l.starts_with(&format!("{prefix} {name} ")))
                    .count();
                assert_eq!(found, n, "{prefix} of {name}");
            }
            assert!(
                text.lines().any(|l| l == format!("# TYPE {name} {kind}")),
                "{name} is not a {kind}"
            );
        }
        for l in text.lines() {
            if let Some(help) = l.strip_prefix("# HELP ") {
                assert!(!help.ends_with(".."), "{l}");
                continue;
            }
            let series = l.split(['{', ' ']).next().unwrap_or("");
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| series.strip_suffix(s))
                .filter(|f| FAMILIES.contains(&(f, "histogram")))
                .unwrap_or(series);
            assert!(
                l.starts_with("# TYPE ") || FAMILIES.iter().any(|(n, _)| *n == family),
                "{l}: not a family of FAMILIES"
            );
        }
        promtool_check(&text);
    }

    /// `promtool check metrics` on `text`: .tools/bin/promtool or PATH's; without it a SKIP
    /// line, or a failure under UPF_REQUIRE_ORACLES=1.
    fn promtool_check(text: &str) {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let local =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin/promtool");
        let found = if local.exists() {
            Some(local)
        } else {
            std::env::var_os("PATH").and_then(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join("promtool"))
                    .find(|f| f.is_file())
            })
        };
        let Some(promtool) = found else {
            assert!(
                std::env::var("UPF_REQUIRE_ORACLES").as_deref() != Ok("1"),
                "promtool missing and UPF_REQUIRE_ORACLES=1: scripts/ops-tools.sh installs it"
            );
            println!("SKIP: promtool missing: scripts/ops-tools.sh installs it");
            return;
        };
        let mut child = Command::new(&promtool)
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("promtool runs");
        child
            .stdin
            .take()
            .expect("promtool's stdin")
            .write_all(text.as_bytes())
            .expect("the exposition to promtool");
        let out = child.wait_with_output().expect("promtool's answer");
        assert!(
            out.status.success(),
            "promtool check metrics: {}{}\n{text}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The encoder writes a counter's family as `<name>_total`: each counter of
    /// [`FAMILIES`] is named so, and no other family is.
    #[test]
    fn counters_and_only_counters_end_in_total() {
        for (name, kind) in FAMILIES {
            assert_eq!(
                name.ends_with("_total"),
                *kind == "counter",
                "{name} ({kind})"
            );
        }
    }

    fn example_n4() -> N4 {
        let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/config/upfd.yaml");
        let cfg =
            crate::config::Config::load(std::path::Path::new(example)).expect("example config");
        let fp = Box::new(upf::model::Model::without_traffic(16));
        crate::runtime::build_n4(&cfg, fp, crate::xdp::teid_index(&cfg, 1), 1)
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
