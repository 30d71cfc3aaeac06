//! What each route answers, built from upfd's state at the moment of the request. The
//! routes are routes.rs's, the shapes those of components.json; a session shows its rules as the SMF installed them
//! (TS 29.244 clause 5.2) and its URRs' counts as the data path has them now.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use pfcp::ie::Flags;
use serde_json::{json, Value};
use upf::abi::{DropReason, Stat};
use upf::n4::N4;
use upf::report::Measurement;
use upf::rules::{interface, Session};

use super::routes::{self, Access, Endpoint};
use super::{Reply, Request, Response};
use crate::metrics;
use crate::slowpath::SlowPath;

/// Sessions in one page of `/api/v1/sessions`: by default, and at most.
const PAGE: usize = 100;
const PAGE_MAX: usize = 1000;

/// upfd as the API sees it.
pub struct Context<'a> {
    pub metrics: metrics::Sources<'a>,
    /// Ok: ready to serve (data path attached, N4 listening, not shutting down); Err: why
    /// not.
    pub ready: Result<(), String>,
    pub node_id: &'a str,
    pub n4_address: std::net::SocketAddr,
    pub datapath_mode: &'a str,
    pub state_directory: Option<&'a std::path::Path>,
    pub started: Instant,
    pub now: Instant,
}

impl Context<'_> {
    fn n4(&self) -> &N4 {
        self.metrics.n4
    }
    fn slow(&self) -> Option<&SlowPath> {
        self.metrics.slow
    }
}

/// The answer to `req` (http.rs has already refused what it may not ask), or what the
/// API's thread builds it from: the sessions, shared, with their URRs' counts now.
pub fn route(req: &Request, cx: &Context) -> Reply {
    match answer(req, cx) {
        Ok(r) => Reply::Done(r),
        Err(job) => job,
    }
}

/// The answer to `req` built here, or (Err) the job that builds it elsewhere.
fn answer(req: &Request, cx: &Context) -> Result<Response, Reply> {
    if req.method != "GET" && req.method != "HEAD" {
        return Ok(Response::error(
            405,
            format!("{} is not served: the API is read-only (GET)", req.method),
        ));
    }
    let Some((route, param)) = routes::find(&req.path) else {
        return Ok(Response::error(
            404,
            format!(
                "no route {}: see /openapi.json (routes: {})",
                req.path,
                routes::paths(&[Access::Probe, Access::Open, Access::Subscriber])
            ),
        ));
    };
    Ok(match route.endpoint {
        Endpoint::Healthz => Response::json(200, &json!({ "status": "ok" })),
        Endpoint::Readyz => match &cx.ready {
            Ok(()) => Response::json(200, &json!({ "ready": true })),
            Err(why) => Response::json(503, &json!({ "ready": false, "reason": why })),
        },
        Endpoint::Metrics => {
            Response::text(200, metrics::CONTENT_TYPE, metrics::render(&cx.metrics))
        }
        Endpoint::OpenApi => Response::json(200, &routes::document()),
        Endpoint::Status => Response::json(200, &status(cx)),
        // The event loop answers it in steps (check.rs); here, in one go.
        Endpoint::Check => check_answer(cx.n4().sessions().check(), cx.n4().sessions().len()),
        Endpoint::Associations => Response::json(200, &associations(cx.n4())),
        Endpoint::Sessions => return sessions(req, cx),
        Endpoint::Session => {
            let s = param.unwrap_or_default();
            match parse_u64(s) {
                Some(seid) => match cx.n4().sessions().get_arc(seid) {
                    Some(sess) => {
                        let m = measured(cx.n4(), &sess);
                        return Err(Reply::Render(Box::new(move || {
                            Response::json(200, &session(&sess, &m))
                        })));
                    }
                    None => Response::error(404, format!("no session has SEID {}", hex(seid))),
                },
                None => Response::error(400, format!("{s:?} is not a SEID (decimal or 0x-hex)")),
            }
        }
        Endpoint::Stats => Response::json(200, &stats(cx)),
        Endpoint::Buffers => Response::json(200, &buffers(cx)),
        Endpoint::Applications => Response::json(200, &applications(cx.n4())),
    })
}

/// A 64-bit SEID as the API writes it: JSON numbers lose precision past 2^53.
fn hex(v: u64) -> String {
    format!("{v:#018x}")
}

/// Decimal or 0x-hexadecimal.
fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn status(cx: &Context) -> Value {
    let n4 = cx.n4();
    let rts = n4.config().recovery_time_stamp;
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "node_id": cx.node_id,
        "n4_address": cx.n4_address.to_string(),
        "ready": cx.ready.is_ok(),
        "not_ready_because": cx.ready.as_ref().err(),
        "uptime_seconds": cx.now.duration_since(cx.started).as_secs(),
        "recovery_time_stamp": rts,
        "recovery_time": metrics::ntp_to_rfc3339(rts),
        "sessions": n4.sessions().len(),
        "associations": associations(n4),
        "datapath": {
            "mode": cx.datapath_mode,
            "attached": cx.metrics.attached.iter().map(|(name, point, mode)| json!({
                "interface": name, "reference_point": point,
                "mode": metrics::attach_mode_name(*mode),
            })).collect::<Vec<_>>(),
        },
        "state_directory": cx.state_directory.map(|d| d.display().to_string()),
        "overloaded": n4.overloaded(),
    })
}

/// `/check`'s answer: whether the books agree, and the sessions read, or what is wrong.
pub fn check_answer(verdict: Result<(), String>, sessions: usize) -> Response {
    let v = match verdict {
        Ok(()) => json!({"consistent": true, "sessions": sessions}),
        Err(e) => json!({"consistent": false, "error": e}),
    };
    Response::json(200, &v)
}

/// Whether `req` asks for `/check` (GET or HEAD), which the event loop answers in steps
/// (check.rs).
pub fn is_check(req: &Request) -> bool {
    (req.method == "GET" || req.method == "HEAD")
        && routes::find(&req.path).is_some_and(|(r, _)| r.endpoint == Endpoint::Check)
}

fn associations(n4: &N4) -> Value {
    n4.association_info()
        .into_iter()
        .map(|a| {
            json!({
                "node_id": a.node_id.to_string(),
                "address": a.address.to_string(),
                "state": if a.releasing { "releasing" } else { "associated" },
                "recovery_time_stamp": a.recovery_time_stamp,
                "recovery_time": metrics::ntp_to_rfc3339(a.recovery_time_stamp),
                "heartbeat_pending": a.heartbeat_pending,
                "sessions": a.sessions,
            })
        })
        .collect()
}

/// `/api/v1/sessions`: by `seid`, `teid` or `ue` (whole sessions), else a page of
/// summaries in SEID order after `after`, `limit` long.
fn sessions(req: &Request, cx: &Context) -> Result<Response, Reply> {
    let n4 = cx.n4();
    let table = n4.sessions();
    let bad = |m: String| Ok(Response::error(400, m));
    if let Some(s) = req.param("seid") {
        let Some(seid) = parse_u64(s) else {
            return bad(format!("seid={s:?}: not a SEID (decimal or 0x-hex)"));
        };
        return Err(whole(n4, table.get_arc(seid).into_iter().collect()));
    }
    if let Some(t) = req.param("teid") {
        let Some(teid) = parse_u64(t).and_then(|v| u32::try_from(v).ok()) else {
            return bad(format!("teid={t:?}: not a TEID (0-4294967295, or 0x-hex)"));
        };
        let found = table.find_by_teid(teid);
        return found_sessions(n4, found, |s| has_teid(s, teid));
    }
    if let Some(u) = req.param("ue") {
        let Ok(addr) = u.parse::<IpAddr>() else {
            return bad(format!("ue={u:?}: not an IPv4 or IPv6 address"));
        };
        let found = table.find_by_ue(addr);
        return found_sessions(n4, found, |s| has_ue(s, addr));
    }
    let limit = match req.param("limit").map(|l| l.parse::<usize>()) {
        None => PAGE,
        Some(Ok(l)) if (1..=PAGE_MAX).contains(&l) => l,
        Some(_) => return bad(format!("limit: a whole number 1-{PAGE_MAX}")),
    };
    let after = match req.param("after").map(parse_u64) {
        None => None,
        Some(Some(a)) => Some(a),
        Some(None) => return bad("after: a SEID (decimal or 0x-hex)".into()),
    };
    let (page, more) = smallest_after(table.seid_iter(), after, limit);
    let total = table.len();
    let next = if more {
        page.last().map(|s| hex(*s))
    } else {
        None
    };
    let found: Vec<Arc<Session>> = page.iter().filter_map(|s| table.get_arc(*s)).collect();
    Err(Reply::Render(Box::new(move || {
        let items: Vec<Value> = found.iter().map(|s| summary(s)).collect();
        Response::json(
            200,
            &json!({ "total": total, "sessions": items, "next": next }),
        )
    })))
}

/// `{"sessions": [...]}` of `found` whole, built on the API's thread; their URRs'
/// counts read here.
fn whole(n4: &N4, found: Vec<Arc<Session>>) -> Reply {
    let with: Vec<_> = found
        .into_iter()
        .map(|s| {
            let m = measured(n4, &s);
            (s, m)
        })
        .collect();
    Reply::Render(Box::new(move || {
        let v: Vec<Value> = with.iter().map(|(s, m)| session(s, m)).collect();
        Response::json(200, &json!({ "sessions": v }))
    }))
}

/// The `limit` smallest SEIDs past `after`, in order, and whether there are more: one
/// pass over the SEIDs alone, on the event loop's thread. A bounded max-heap of the
/// `limit + 1` smallest so far; past the first ones a SEID is compared with the
/// heap's largest and, at a million sessions, almost always dropped at once (pushing
/// each into the heap took 30-40 ms a page, N4 waiting).
fn smallest_after(
    seids: impl Iterator<Item = u64>,
    after: Option<u64>,
    limit: usize,
) -> (Vec<u64>, bool) {
    let mut heap = std::collections::BinaryHeap::with_capacity(limit + 1);
    for seid in seids {
        if after.is_some_and(|a| seid <= a) {
            continue;
        }
        if heap.len() <= limit {
            heap.push(seid);
        } else if let Some(mut top) = heap.peek_mut() {
            if seid < *top {
                *top = seid; // sifted down when `top` drops
            }
        }
    }
    let more = heap.len() > limit;
    let mut page = heap.into_sorted_vec();
    page.truncate(limit);
    (page, more)
}

/// The sessions a lookup found whole: the data path's answer (`Some`: its own tables, one
/// lookup), else every session that `matches` (`None`: the data path cannot say).
fn found_sessions(
    n4: &N4,
    found: Option<Option<u64>>,
    matches: impl Fn(&Session) -> bool,
) -> Result<Response, Reply> {
    let table = n4.sessions();
    let v: Vec<Arc<Session>> = match found {
        Some(seid) => seid.and_then(|x| table.get_arc(x)).into_iter().collect(),
        None => table
            .iter()
            .filter(|s| matches(s))
            .filter_map(|s| table.get_arc(s.up_seid))
            .collect(),
    };
    Err(whole(n4, v))
}

fn has_teid(s: &Session, teid: u32) -> bool {
    s.teids.contains(&teid)
        || s.pdrs
            .values()
            .any(|p| p.pdi.local_fteid.is_some_and(|f| f.teid == teid))
}

fn has_ue(s: &Session, addr: IpAddr) -> bool {
    s.allocated_ue_ips.contains(&addr)
        || s.pdrs.values().any(|p| {
            p.pdi
                .ue_ips
                .iter()
                .any(|u| match (addr, u.ipv6_prefix_len) {
                    (IpAddr::V6(a), Some(len)) => u.ipv6.is_some_and(|p| {
                        ipnet::Ipv6Net::new(p, len).is_ok_and(|n| n.trunc().contains(&a))
                    }),
                    _ => u.addrs().any(|x| x == addr),
                })
        })
}

/// The UE addresses a session's PDRs name.
fn ue_addresses(s: &Session) -> Vec<String> {
    let mut v: Vec<String> = s
        .pdrs
        .values()
        .flat_map(|p| p.pdi.ue_ips.iter())
        .flat_map(|u| {
            let v6 = u.ipv6.map(|a| match u.ipv6_prefix_len {
                Some(l) => format!("{a}/{l}"),
                None => a.to_string(),
            });
            u.ipv4.map(|a| a.to_string()).into_iter().chain(v6)
        })
        .collect();
    v.sort();
    v.dedup();
    v
}

fn local_teids(s: &Session) -> Vec<u32> {
    let mut v: Vec<u32> = s
        .pdrs
        .values()
        .filter_map(|p| p.pdi.local_fteid.map(|f| f.teid))
        .chain(s.teids.iter().copied())
        .collect();
    v.sort();
    v.dedup();
    v
}

/// A session in a listing.
fn summary(s: &Session) -> Value {
    json!({
        "seid": hex(s.up_seid),
        "cp_seid": hex(s.cp_fseid.seid),
        "cp_node_id": s.cp_node.to_string(),
        "ue_addresses": ue_addresses(s),
        "teids": local_teids(s),
        "dnn": s.apn_dnn,
        "rules": { "pdrs": s.pdrs.len(), "fars": s.fars.len(), "qers": s.qers.len(), "urrs": s.urrs.len() },
    })
}

fn interface_name(i: u8) -> &'static str {
    match i {
        interface::ACCESS => "access",
        interface::CORE => "core",
        interface::SGI_LAN => "sgi_lan",
        interface::CP_FUNCTION => "cp_function",
        interface::VN_INTERNAL => "5g_vn_internal",
        _ => "spare",
    }
}

/// The names of the bits set in a flags IE (the specification's: "VOLUM", "PERIO").
fn flag_names(f: &Flags, names: &[(u16, &'static str)]) -> Vec<&'static str> {
    names
        .iter()
        .filter(|(b, _)| f.get(*b))
        .map(|(_, n)| *n)
        .collect()
}

/// Each URR's counts now, in the order of `s.urrs`.
fn measured(n4: &N4, s: &Session) -> Vec<Measurement> {
    let table = n4.sessions();
    s.urrs
        .values()
        .map(|u| table.measurement(s.up_seid, u.id))
        .collect()
}

/// A whole session: identities, every rule, and each URR's counts (`measured`, in the
/// order of `s.urrs`).
pub fn session(s: &Session, measured: &[Measurement]) -> Value {
    let pdrs: Vec<Value> = s
        .pdrs
        .values()
        .map(|p| {
            let d = &p.pdi;
            json!({
                "id": p.id,
                "precedence": p.precedence,
                "source_interface": interface_name(d.source_interface),
                "local_fteid": d.local_fteid.map(|f| json!({
                    "teid": f.teid, "ipv4": f.ipv4, "ipv6": f.ipv6,
                })),
                "network_instance": d.network_instance.as_deref(),
                "ue_ip": d.ue_ips.iter().map(|u| json!({
                    "ipv4": u.ipv4, "ipv6": u.ipv6, "ipv6_prefix_length": u.ipv6_prefix_len,
                    "destination": u.is_destination,
                })).collect::<Vec<_>>(),
                "sdf_filters": d.sdf_filters.iter().map(|f| serde_json::to_value(f).unwrap_or_default()).collect::<Vec<_>>(),
                "application_id": d.application_id,
                "qfis": d.qfis.to_vec(),
                "framed_routes": d.framed_routes.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
                "outer_header_removal": p.outer_header_removal.map(|o| serde_json::to_value(o).unwrap_or_default()),
                "far_id": p.far_id,
                "qer_ids": p.qer_ids.to_vec(),
                "urr_ids": p.urr_ids.to_vec(),
            })
        })
        .collect();
    let fars: Vec<Value> = s
        .fars
        .values()
        .map(|f| {
            let a = f.action;
            let actions: Vec<&str> = [
                (a.drop, "drop"),
                (a.forw, "forw"),
                (a.buff, "buff"),
                (a.nocp, "nocp"),
                (a.dupl, "dupl"),
                (a.bdpn, "bdpn"),
                (a.ddpn, "ddpn"),
            ]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, n)| *n)
            .collect();
            json!({
                "id": f.id,
                "apply_action": actions,
                "forwarding": f.forwarding.as_ref().map(|w| json!({
                    "destination_interface": interface_name(w.destination_interface),
                    "network_instance": w.network_instance.as_deref(),
                    "outer_header_creation": w.outer_header_creation.as_ref().map(|o| serde_json::to_value(o).unwrap_or_default()),
                    "transport_level_marking": w.transport_level_marking,
                })),
                "bar_id": f.bar_id,
            })
        })
        .collect();
    let qers: Vec<Value> = s
        .qers
        .values()
        .map(|q| {
            let gate = |open: bool| if open { "open" } else { "closed" };
            json!({
                "id": q.id,
                "gate_ul": gate(q.gate_ul_open),
                "gate_dl": gate(q.gate_dl_open),
                "mbr_ul_kbps": q.mbr.map(|b| b.ul_kbps),
                "mbr_dl_kbps": q.mbr.map(|b| b.dl_kbps),
                "gbr_ul_kbps": q.gbr.map(|b| b.ul_kbps),
                "gbr_dl_kbps": q.gbr.map(|b| b.dl_kbps),
                "qfi": q.qfi,
                "correlation_id": q.correlation_id,
            })
        })
        .collect();
    let urrs: Vec<Value> = s
        .urrs
        .values()
        .zip(measured.iter().chain(std::iter::repeat(&Measurement::default())))
        .map(|(u, m)| {
            let r = &u.rule;
            let usage = |x: &upf::fastpath::Usage| {
                json!({
                    "ul_packets": x.ul_packets, "ul_bytes": x.ul_bytes,
                    "dl_packets": x.dl_packets, "dl_bytes": x.dl_bytes,
                    "total_bytes": x.total_bytes(),
                })
            };
            json!({
                "id": u.id,
                "measurement_method": flag_names(&r.measurement_method, pfcp::ie::measurement_method::NAMES),
                "reporting_triggers": flag_names(&r.reporting_triggers, pfcp::ie::reporting_triggers::NAMES),
                "measurement_period_seconds": r.measurement_period,
                "volume_threshold": r.volume_threshold.map(|v| json!({"total": v.total, "ul": v.uplink, "dl": v.downlink})),
                "volume_quota": r.volume_quota.map(|v| json!({"total": v.total, "ul": v.uplink, "dl": v.downlink})),
                "time_threshold_seconds": r.time_threshold,
                "time_quota_seconds": r.time_quota,
                "measured": {
                    "since_created": usage(&m.total),
                    "since_last_report": usage(&m.unreported),
                    "reports_sent": m.reports,
                    "first_packet": m.total.first_packet,
                    "last_packet": m.total.last_packet,
                },
            })
        })
        .collect();
    let bars: Vec<Value> = s
        .bars
        .values()
        .map(|b| {
            json!({
                "id": b.id,
                "downlink_data_notification_delay": b.downlink_data_notification_delay,
                "suggested_buffering_packets_count": b.suggested_buffering_packets_count,
            })
        })
        .collect();
    json!({
        "seid": hex(s.up_seid),
        "cp_seid": hex(s.cp_fseid.seid),
        "cp_address": s.cp_fseid.ipv4.map(IpAddr::V4).or(s.cp_fseid.ipv6.map(IpAddr::V6)),
        "cp_node_id": s.cp_node.to_string(),
        "dnn": s.apn_dnn,
        "pdn_type": s.pdn_type,
        "ue_addresses": ue_addresses(s),
        "teids": local_teids(s),
        "user_plane_inactivity_timer": s.user_plane_inactivity_timer,
        "predefined_rules": s.predefined.iter().map(|(pdr, a)| json!({"pdr_id": pdr, "rules": format!("{a:?}")})).collect::<Vec<_>>(),
        "pdrs": pdrs,
        "fars": fars,
        "qers": qers,
        "urrs": urrs,
        "bars": bars,
    })
}

fn stats(cx: &Context) -> Value {
    let n4 = cx.n4();
    let st = n4.stats();
    let mut requests: Vec<(&u8, &u64)> = st.requests.iter().collect();
    requests.sort();
    let mut rejected: Vec<(&u8, &u64)> = st.rejected.iter().collect();
    rejected.sort();
    let by_type = |v: Vec<(&u8, &u64)>| {
        v.into_iter()
            .map(|(t, n)| json!({"type": pfcp::message_type::name(*t).unwrap_or("unknown"), "count": n}))
            .collect::<Vec<_>>()
    };
    let datapath = cx.metrics.datapath.map(|d| {
        let at = |i: usize| d.get(i).copied().unwrap_or_default();
        let pb = |(p, b): (u64, u64)| json!({"packets": p, "bytes": b});
        json!({
            "interfaces": [
                {"interface": "n3", "in": pb(at(Stat::ReceivedN3.index())), "out": pb(at(Stat::ForwardedDownlink.index()))},
                {"interface": "n6", "in": pb(at(Stat::ReceivedN6.index())), "out": pb(at(Stat::ForwardedUplink.index()))},
                {"interface": "n9", "out": pb(at(Stat::ForwardedN9.index()))},
            ],
            "drops": DropReason::ALL.iter().map(|r| {
                let (p, b) = at(r.index());
                json!({"reason": r.name(), "packets": p, "bytes": b})
            }).collect::<Vec<_>>(),
            "outcomes": Stat::ALL.iter().filter(|o| !matches!(o, Stat::ReceivedN3 | Stat::ReceivedN6)).map(|o| {
                let (p, b) = at(o.index());
                json!({"outcome": o.name(), "packets": p, "bytes": b})
            }).collect::<Vec<_>>(),
        })
    });
    json!({
        "n4": {
            "requests": by_type(requests),
            "rejections": by_type(rejected),
            "malformed": st.malformed,
            "duplicates": st.duplicates,
            "timeouts": st.timeouts,
            "congestion_rejections": st.congestion_rejections,
            "receive_drops": cx.metrics.n4_queue.drops,
            "load_percent": cx.metrics.n4_queue.load.metric,
        },
        "datapath": datapath,
        "slow_path": cx.slow().map(|sp| {
            let c = &sp.counters;
            json!({
                "echo_requests_answered": c.echo_requests_answered,
                "echo_requests_sent": c.echo_requests_sent,
                "error_indications_sent": c.error_indications_sent,
                "error_indications_suppressed": c.error_indications_suppressed,
                "error_indications_received": c.error_indications_received,
                "end_markers_sent": c.end_markers_sent,
            })
        }),
    })
}

/// The applications PDRs may name and their PFDs (configured, or provisioned by PFD
/// Management), by Application ID.
fn applications(n4: &upf::n4::N4) -> Value {
    use upf::abi;
    let protocols = |p: u8| {
        let mut v = Vec::new();
        for (bit, name) in [
            (abi::APP_P_DNS, "dns"),
            (abi::APP_P_SNI, "tls_sni"),
            (abi::APP_P_HOST, "http_host"),
        ] {
            if u32::from(p) & bit != 0 {
                v.push(name);
            }
        }
        v
    };
    let t = n4.sessions().pfds();
    json!({
        "applications": t.iter().map(|a| json!({
            "id": a.id,
            "index": a.index,
            "source": if a.local { "configuration" } else { "pfd_management" },
            "flow_descriptions": a.pfds.flow_texts,
            "urls": a.pfds.urls.iter().map(|u| format!("http://{}{}", u.host, u.path)).collect::<Vec<_>>(),
            "domain_names": a.pfds.domains.iter().map(|d| json!({
                "name": d.name,
                "protocols": protocols(d.protocols),
            })).collect::<Vec<_>>(),
        })).collect::<Vec<_>>(),
    })
}

fn buffers(cx: &Context) -> Value {
    let Some(sp) = cx.slow() else {
        return json!({"buffered_packets": 0, "sessions": [], "note": "no data path (datapath.mode: none): nothing is buffered"});
    };
    let c = &sp.counters;
    json!({
        "buffered_packets": sp.buffered_packets(),
        "sessions": sp.buffers(cx.now).iter().map(|b| json!({
            "seid": hex(b.seid),
            "far_id": b.far_id,
            "packets": b.packets,
            "octets": b.octets,
            "oldest_ms": b.oldest.map(|d| d.as_millis() as u64),
            "smf_notified": b.notified,
        })).collect::<Vec<_>>(),
        "totals": {
            "buffered": c.buffered,
            "released": c.buffer_released,
            "dropped_full": c.buffer_dropped_full,
            "dropped_expired": c.buffer_dropped_expired,
            "discarded": c.buffer_discarded,
            "downlink_data_reports": c.downlink_data_reports,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applications_show_their_pfds_and_where_they_came_from() {
        let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/config/upfd.yaml");
        let cfg =
            crate::config::Config::load(std::path::Path::new(example)).expect("example config");
        let fp = Box::new(upf::model::Model::without_traffic(16));
        let mut n4 = crate::runtime::build_n4(&cfg, fp, crate::xdp::teid_index(&cfg, 1), 1);
        let mut t = upf::pfd::PfdTable::new();
        let mut p = upf::pfd::AppPfds::default();
        p.add_flow("permit out 17 from 192.0.2.0/24 to assigned")
            .unwrap();
        p.add_url("http://Video.example/live").unwrap();
        p.add_url("https://secure.example/").unwrap();
        p.add_domain("cdn.example", None).unwrap();
        t.set("video", p, true).unwrap();
        t.set("chat", Default::default(), false).unwrap();
        n4.set_pfds(t, &[]).unwrap();
        let v = applications(&n4);
        let apps = v["applications"].as_array().unwrap();
        assert_eq!(apps.len(), 2);
        assert_eq!(apps[0]["id"], "chat");
        assert_eq!(apps[0]["source"], "pfd_management");
        let video = &apps[1];
        assert_eq!(video["source"], "configuration");
        assert_eq!(
            video["flow_descriptions"],
            json!(["permit out 17 from 192.0.2.0/24 to assigned"])
        );
        assert_eq!(video["urls"], json!(["http://video.example/live"]));
        assert_eq!(
            video["domain_names"],
            json!([
                { "name": "secure.example", "protocols": ["tls_sni"] },
                { "name": "cdn.example", "protocols": ["dns", "tls_sni", "http_host"] },
            ])
        );
    }

    /// A page is the `limit` smallest SEIDs past the cursor whatever order the table
    /// gives them in; paging from `next` to `next` visits each SEID once.
    #[test]
    fn pages_are_the_smallest_seids_after_the_cursor() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut seids: Vec<u64> = (0..5000).map(|_| rng.random_range(1u64..1 << 40)).collect();
        seids.extend([1, 2, 3, u64::MAX]);
        seids.sort();
        seids.dedup();
        let mut shuffled = seids.clone();
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, rng.random_range(0..=i));
        }
        for limit in [1, 7, 100, 1000] {
            let mut after = None;
            let mut seen: Vec<u64> = Vec::new();
            loop {
                let (page, more) = smallest_after(shuffled.iter().copied(), after, limit);
                let want: Vec<u64> = seids
                    .iter()
                    .copied()
                    .filter(|s| after.is_none_or(|a| *s > a))
                    .take(limit)
                    .collect();
                assert_eq!(page, want, "limit {limit} after {after:?}");
                seen.extend(&page);
                if !more {
                    break;
                }
                after = page.last().copied();
            }
            assert_eq!(seen, seids, "limit {limit}");
        }
        assert_eq!(
            smallest_after([5, 9].into_iter(), Some(9), 10),
            (vec![], false)
        );
    }
}
