//! /metrics (Prometheus text format) and /status (JSON): sessions, associations, N4
//! requests and rejections by message type, data path packets by outcome and drops by
//! reason, the slow path's counters.

use std::fmt::Write;

use upf::abi::{DropReason, Stat};
use upf::n4::N4;

use crate::slowpath::SlowPath;

fn type_name(t: u8) -> String {
    pfcp::message_type::name(t)
        .unwrap_or("unknown")
        .to_lowercase()
        .replace(' ', "_")
}

/// The Prometheus exposition of upfd's state.
pub fn render(
    n4: &N4,
    datapath: Option<&[(u64, u64)]>,
    slow: Option<&SlowPath>,
    nexthops: Option<&crate::routewatch::NextHops>,
    direct: Option<[(usize, usize, usize); 2]>,
    n4_queue: &crate::overload::N4Queue,
) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# HELP upf_n4_load_percent The Load Metric reported to CP functions: the larger of the session table's and the N4 receive queue's fill.\n# TYPE upf_n4_load_percent gauge\nupf_n4_load_percent {}\n\
         # HELP upf_n4_overloaded 1 while new sessions are refused with Cause 74 (the N4 receive queue half full, until under a quarter).\n# TYPE upf_n4_overloaded gauge\nupf_n4_overloaded {}\n\
         # HELP upf_n4_congestion_rejections_total Session Establishment Requests refused with Cause 74 (PFCP entity in congestion).\n# TYPE upf_n4_congestion_rejections_total counter\nupf_n4_congestion_rejections_total {}\n\
         # HELP upf_n4_receive_drops_total PFCP datagrams the kernel dropped: the N4 receive queue was full.\n# TYPE upf_n4_receive_drops_total counter\nupf_n4_receive_drops_total {}",
        n4_queue.load.metric,
        u8::from(n4.overloaded()),
        n4.stats().congestion_rejections,
        n4_queue.drops
    );
    if let Some([up, down]) = direct {
        let _ = writeln!(
            s,
            "# HELP upf_lookup_keys_in_slot Lookup keys (uplink: TEIDs; downlink: UE IPv4 addresses) whose rules the data path finds in their direct slot, one memory access; other keys are found through a hash table.\n\
             # TYPE upf_lookup_keys_in_slot gauge\n\
             upf_lookup_keys_in_slot{{direction=\"uplink\"}} {}\n\
             upf_lookup_keys_in_slot{{direction=\"downlink\"}} {}\n\
             # HELP upf_lookup_keys_slot_hashed Keys with a direct slot whose rules are in the hash table: changed less than the grace period ago (they move back), or their slot holds another key.\n\
             # TYPE upf_lookup_keys_slot_hashed gauge\n\
             upf_lookup_keys_slot_hashed{{direction=\"uplink\"}} {}\n\
             upf_lookup_keys_slot_hashed{{direction=\"downlink\"}} {}",
            up.0, down.0, up.1, down.1
        );
    }
    if let Some(nh) = nexthops {
        let _ = writeln!(
            s,
            "# HELP upf_nexthop_cache_on 1: the data path caches next hops (routing changes are heard).\n\
             # TYPE upf_nexthop_cache_on gauge\nupf_nexthop_cache_on {}\n\
             # HELP upf_nexthop_cache_by_destination 1: next hops cached per destination (no source policy rules, no multipath routes); 0: per source and destination.\n\
             # TYPE upf_nexthop_cache_by_destination gauge\nupf_nexthop_cache_by_destination {}\n\
             # HELP upf_nexthop_cache_invalidations_total Routing changes that emptied the next-hop cache.\n\
             # TYPE upf_nexthop_cache_invalidations_total counter\nupf_nexthop_cache_invalidations_total {}",
            u8::from(nh.on),
            u8::from(nh.by_destination),
            nh.invalidations
        );
    }
    let _ = writeln!(
        s,
        "# HELP upf_sessions PFCP sessions installed.\n# TYPE upf_sessions gauge"
    );
    let _ = writeln!(s, "upf_sessions {}", n4.sessions().len());
    let _ = writeln!(s, "# HELP upf_associations PFCP associations with CP functions.\n# TYPE upf_associations gauge");
    let _ = writeln!(s, "upf_associations {}", n4.associations().len());
    let st = n4.stats();
    let _ = writeln!(s, "# HELP upf_n4_requests_total PFCP requests received, by message type.\n# TYPE upf_n4_requests_total counter");
    let mut req: Vec<_> = st.requests.iter().collect();
    req.sort();
    for (t, n) in req {
        let _ = writeln!(s, "upf_n4_requests_total{{type=\"{}\"}} {n}", type_name(*t));
    }
    let _ = writeln!(s, "# HELP upf_n4_rejections_total PFCP requests answered with a rejection Cause.\n# TYPE upf_n4_rejections_total counter");
    let mut rej: Vec<_> = st.rejected.iter().collect();
    rej.sort();
    for (t, n) in rej {
        let _ = writeln!(
            s,
            "upf_n4_rejections_total{{type=\"{}\"}} {n}",
            type_name(*t)
        );
    }
    let _ = writeln!(
        s,
        "# TYPE upf_n4_malformed_total counter\nupf_n4_malformed_total {}",
        st.malformed
    );
    let _ = writeln!(
        s,
        "# TYPE upf_n4_duplicates_total counter\nupf_n4_duplicates_total {}",
        st.duplicates
    );
    let _ = writeln!(
        s,
        "# TYPE upf_n4_timeouts_total counter\nupf_n4_timeouts_total {}",
        st.timeouts
    );
    let _ = writeln!(
        s,
        "# HELP upf_n4_recovery_time_stamp_changes_total Heartbeats whose Recovery Time Stamp differed from the association's, sessions kept (n4.strict: false).\n# TYPE upf_n4_recovery_time_stamp_changes_total counter\nupf_n4_recovery_time_stamp_changes_total {}",
        st.recovery_time_stamp_changes
    );
    let _ = writeln!(
        s,
        "# HELP upf_n4_unknown_network_instances_total Session requests naming a Network Instance the configuration does not (accepted, n4.strict: false).\n# TYPE upf_n4_unknown_network_instances_total counter\nupf_n4_unknown_network_instances_total {}",
        st.unknown_network_instances
    );
    if let Some(d) = datapath {
        let _ = writeln!(s, "# HELP upf_dropped_packets_total Packets the data path dropped, by reason.\n# TYPE upf_dropped_packets_total counter");
        for r in DropReason::ALL {
            let (p, _) = d.get(r.index()).copied().unwrap_or_default();
            let _ = writeln!(
                s,
                "upf_dropped_packets_total{{reason=\"{}\"}} {p}",
                r.name()
            );
        }
        let _ = writeln!(s, "# TYPE upf_dropped_bytes_total counter");
        for r in DropReason::ALL {
            let (_, b) = d.get(r.index()).copied().unwrap_or_default();
            let _ = writeln!(s, "upf_dropped_bytes_total{{reason=\"{}\"}} {b}", r.name());
        }
        let _ = writeln!(s, "# HELP upf_datapath_packets_total Packets by outcome.\n# TYPE upf_datapath_packets_total counter");
        for o in Stat::ALL {
            let (p, _) = d.get(o.index()).copied().unwrap_or_default();
            let _ = writeln!(
                s,
                "upf_datapath_packets_total{{outcome=\"{}\"}} {p}",
                o.name()
            );
        }
        let _ = writeln!(s, "# TYPE upf_datapath_bytes_total counter");
        for o in Stat::ALL {
            let (_, b) = d.get(o.index()).copied().unwrap_or_default();
            let _ = writeln!(
                s,
                "upf_datapath_bytes_total{{outcome=\"{}\"}} {b}",
                o.name()
            );
        }
    }
    if let Some(sp) = slow {
        let c = &sp.counters;
        for (name, v) in [
            ("echo_requests_answered", c.echo_requests_answered),
            ("echo_requests_sent", c.echo_requests_sent),
            ("error_indications_sent", c.error_indications_sent),
            (
                "error_indications_suppressed",
                c.error_indications_suppressed,
            ),
            ("error_indications_received", c.error_indications_received),
            ("end_markers_sent", c.end_markers_sent),
            ("buffered", c.buffered),
            ("buffer_dropped_full", c.buffer_dropped_full),
            ("buffer_dropped_expired", c.buffer_dropped_expired),
            ("buffer_discarded", c.buffer_discarded),
            ("buffer_released", c.buffer_released),
            ("downlink_data_reports", c.downlink_data_reports),
        ] {
            let _ = writeln!(
                s,
                "# TYPE upf_slowpath_{name}_total counter\nupf_slowpath_{name}_total {v}"
            );
        }
        let _ = writeln!(
            s,
            "# TYPE upf_buffered_packets gauge\nupf_buffered_packets {}",
            sp.buffered_packets()
        );
    }
    s
}

/// /status: a JSON summary.
pub fn status(n4: &N4) -> String {
    let assocs: Vec<serde_json::Value> = n4
        .associations()
        .into_iter()
        .map(|(n, a)| serde_json::json!({"node_id": n.to_string(), "address": a.to_string()}))
        .collect();
    serde_json::json!({
        "sessions": n4.sessions().len(),
        "associations": assocs,
        "recovery_time_stamp": n4.config().recovery_time_stamp,
    })
    .to_string()
}

/// /check: whether the session books agree (`Sessions::check`), with the first
/// disagreement if not.
pub fn check(n4: &N4) -> String {
    match n4.sessions().check() {
        Ok(()) => serde_json::json!({"consistent": true, "sessions": n4.sessions().len()}),
        Err(e) => serde_json::json!({"consistent": false, "error": e}),
    }
    .to_string()
}
