//! What each route answers, built from upfd's state at the moment of the request. The
//! routes are routes.rs's, the answers answers.rs's types (which the OpenAPI document
//! describes); a session shows its rules as the SMF installed them (TS 29.244 clause
//! 5.2) and its URRs' counts as the data path has them now.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use pfcp::ie::Flags;
use upf::abi::{DropReason, Stat};
use upf::n4::N4;
use upf::report::Measurement;
use upf::rules::{interface, Session};

use super::answers as a;
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
        Endpoint::Healthz => Response::json(
            200,
            &a::Health {
                status: a::HealthStatus::Ok,
            },
        ),
        Endpoint::Readyz => match &cx.ready {
            Ok(()) => Response::json(
                200,
                &a::Ready {
                    ready: true,
                    reason: None,
                },
            ),
            Err(why) => Response::json(
                503,
                &a::Ready {
                    ready: false,
                    reason: Some(why.clone()),
                },
            ),
        },
        Endpoint::Metrics => {
            Response::text(200, metrics::CONTENT_TYPE, metrics::render(&cx.metrics))
        }
        Endpoint::OpenApi => Response::json(200, routes::served_document()),
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

fn status(cx: &Context) -> a::Status {
    let n4 = cx.n4();
    let rts = n4.config().recovery_time_stamp;
    a::Status {
        version: env!("CARGO_PKG_VERSION").to_string(),
        node_id: cx.node_id.to_string(),
        n4_address: cx.n4_address.to_string(),
        ready: cx.ready.is_ok(),
        not_ready_because: cx.ready.as_ref().err().cloned(),
        uptime_seconds: cx.now.duration_since(cx.started).as_secs(),
        recovery_time_stamp: rts,
        recovery_time: metrics::ntp_to_rfc3339(rts),
        sessions: n4.sessions().len(),
        associations: associations(n4),
        datapath: a::DatapathStatus {
            mode: cx.datapath_mode.to_string(),
            attached: cx
                .metrics
                .attached
                .iter()
                .map(|(name, point, mode)| a::Attached {
                    interface: name.clone(),
                    reference_point: point.to_string(),
                    mode: metrics::attach_mode_name(*mode).to_string(),
                })
                .collect(),
        },
        state_directory: cx.state_directory.map(|d| d.display().to_string()),
        overloaded: n4.overloaded(),
    }
}

/// `/check`'s answer: whether the books agree, and the sessions read, or what is wrong.
pub fn check_answer(verdict: Result<(), String>, sessions: usize) -> Response {
    let v = match verdict {
        Ok(()) => a::Check {
            consistent: true,
            sessions: Some(sessions),
            error: None,
        },
        Err(e) => a::Check {
            consistent: false,
            sessions: None,
            error: Some(e),
        },
    };
    Response::json(200, &v)
}

/// Whether `req` asks for `/check` (GET or HEAD), which the event loop answers in steps
/// (check.rs).
pub fn is_check(req: &Request) -> bool {
    (req.method == "GET" || req.method == "HEAD")
        && routes::find(&req.path).is_some_and(|(r, _)| r.endpoint == Endpoint::Check)
}

fn associations(n4: &N4) -> Vec<a::Association> {
    n4.association_info()
        .into_iter()
        .map(|x| a::Association {
            node_id: x.node_id.to_string(),
            address: x.address.to_string(),
            state: if x.releasing {
                a::AssociationState::Releasing
            } else {
                a::AssociationState::Associated
            },
            recovery_time_stamp: x.recovery_time_stamp,
            recovery_time: metrics::ntp_to_rfc3339(x.recovery_time_stamp),
            heartbeat_pending: x.heartbeat_pending,
            sessions: x.sessions,
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
        let page = a::SessionPage {
            total,
            sessions: found.iter().map(|s| summary(s)).collect(),
            next,
        };
        Response::json(200, &a::Sessions::Page(page))
    })))
}

/// `found` whole, built on the API's thread; their URRs' counts read here.
fn whole(n4: &N4, found: Vec<Arc<Session>>) -> Reply {
    let with: Vec<_> = found
        .into_iter()
        .map(|s| {
            let m = measured(n4, &s);
            (s, m)
        })
        .collect();
    Reply::Render(Box::new(move || {
        let sessions = with.iter().map(|(s, m)| session(s, m)).collect();
        Response::json(200, &a::Sessions::Found(a::SessionsFound { sessions }))
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
fn summary(s: &Session) -> a::SessionSummary {
    a::SessionSummary {
        seid: hex(s.up_seid),
        cp_seid: hex(s.cp_fseid.seid),
        cp_node_id: s.cp_node.to_string(),
        ue_addresses: ue_addresses(s),
        teids: local_teids(s),
        dnn: s.apn_dnn.clone(),
        rules: a::RuleCounts {
            pdrs: s.pdrs.len(),
            fars: s.fars.len(),
            qers: s.qers.len(),
            urrs: s.urrs.len(),
        },
    }
}

fn interface(i: u8) -> a::Interface {
    match i {
        interface::ACCESS => a::Interface::Access,
        interface::CORE => a::Interface::Core,
        interface::SGI_LAN => a::Interface::SgiLan,
        interface::CP_FUNCTION => a::Interface::CpFunction,
        interface::VN_INTERNAL => a::Interface::VnInternal,
        _ => a::Interface::Spare,
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
pub fn session(s: &Session, measured: &[Measurement]) -> a::Session {
    a::Session {
        seid: hex(s.up_seid),
        cp_seid: hex(s.cp_fseid.seid),
        cp_address: s
            .cp_fseid
            .ipv4
            .map(IpAddr::V4)
            .or(s.cp_fseid.ipv6.map(IpAddr::V6)),
        cp_node_id: s.cp_node.to_string(),
        dnn: s.apn_dnn.clone(),
        pdn_type: s.pdn_type,
        ue_addresses: ue_addresses(s),
        teids: local_teids(s),
        user_plane_inactivity_timer: s.user_plane_inactivity_timer,
        predefined_rules: s
            .predefined
            .iter()
            .map(|(pdr, x)| a::PredefinedRules {
                pdr_id: *pdr,
                rules: format!("{x:?}"),
            })
            .collect(),
        pdrs: s.pdrs.values().map(pdr).collect(),
        fars: s.fars.values().map(far).collect(),
        qers: s.qers.values().map(qer).collect(),
        urrs: s
            .urrs
            .values()
            .zip(
                measured
                    .iter()
                    .chain(std::iter::repeat(&Measurement::default())),
            )
            .map(|(u, m)| urr(u, m))
            .collect(),
        bars: s
            .bars
            .values()
            .map(|b| a::Bar {
                id: b.id,
                downlink_data_notification_delay: b.downlink_data_notification_delay,
                suggested_buffering_packets_count: b.suggested_buffering_packets_count,
            })
            .collect(),
    }
}

fn pdr(p: &upf::rules::Pdr) -> a::Pdr {
    let d = &p.pdi;
    a::Pdr {
        id: p.id,
        precedence: p.precedence,
        source_interface: interface(d.source_interface),
        local_fteid: d.local_fteid.map(|f| a::LocalFteid {
            teid: f.teid,
            ipv4: f.ipv4,
            ipv6: f.ipv6,
        }),
        network_instance: d.network_instance.as_deref().map(str::to_string),
        ue_ip: d
            .ue_ips
            .iter()
            .map(|u| a::UeIp {
                ipv4: u.ipv4,
                ipv6: u.ipv6,
                ipv6_prefix_length: u.ipv6_prefix_len,
                destination: u.is_destination,
            })
            .collect(),
        sdf_filters: d.sdf_filters.iter().map(sdf_filter).collect(),
        application_id: d.application_id.clone(),
        qfis: d.qfis.to_vec(),
        framed_routes: d.framed_routes.iter().map(|r| r.to_string()).collect(),
        outer_header_removal: p.outer_header_removal.map(|o| a::OuterHeaderRemoval {
            description: o.description,
            ext_header_deletion: o.ext_header_deletion,
        }),
        far_id: p.far_id,
        qer_ids: p.qer_ids.to_vec(),
        urr_ids: p.urr_ids.to_vec(),
    }
}

fn sdf_filter(f: &pfcp::ie::SdfFilter) -> a::SdfFilter {
    let nonzero = |x: u8| (x != 0).then_some(x);
    a::SdfFilter {
        flow_description: f
            .flow_description
            .as_deref()
            .map(|b| String::from_utf8_lossy(b).into_owned()),
        tos_traffic_class: f.tos_traffic_class,
        spi: f.spi,
        flow_label: f.flow_label,
        filter_id: f.filter_id,
        spare: nonzero(f.spare),
        spare_octet: nonzero(f.spare_octet),
    }
}

fn far(f: &upf::rules::Far) -> a::Far {
    let x = f.action;
    let apply_action = [
        (x.drop, a::ApplyAction::Drop),
        (x.forw, a::ApplyAction::Forw),
        (x.buff, a::ApplyAction::Buff),
        (x.nocp, a::ApplyAction::Nocp),
        (x.dupl, a::ApplyAction::Dupl),
        (x.bdpn, a::ApplyAction::Bdpn),
        (x.ddpn, a::ApplyAction::Ddpn),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, n)| n)
    .collect();
    a::Far {
        id: f.id,
        apply_action,
        forwarding: f.forwarding.as_ref().map(|w| a::Forwarding {
            destination_interface: interface(w.destination_interface),
            network_instance: w.network_instance.as_deref().map(str::to_string),
            outer_header_creation: w.outer_header_creation.map(|o| a::OuterHeaderCreation {
                description: o.description,
                teid: o.teid,
                ipv4: o.ipv4,
                ipv6: o.ipv6,
                port: o.port,
                c_tag: o.c_tag,
                s_tag: o.s_tag,
            }),
            transport_level_marking: w.transport_level_marking,
        }),
        bar_id: f.bar_id,
    }
}

fn qer(q: &upf::rules::Qer) -> a::Qer {
    let gate = |open: bool| if open { a::Gate::Open } else { a::Gate::Closed };
    a::Qer {
        id: q.id,
        gate_ul: gate(q.gate_ul_open),
        gate_dl: gate(q.gate_dl_open),
        mbr_ul_kbps: q.mbr.map(|b| b.ul_kbps),
        mbr_dl_kbps: q.mbr.map(|b| b.dl_kbps),
        gbr_ul_kbps: q.gbr.map(|b| b.ul_kbps),
        gbr_dl_kbps: q.gbr.map(|b| b.dl_kbps),
        qfi: q.qfi,
        correlation_id: q.correlation_id,
    }
}

fn urr(u: &upf::rules::Urr, m: &Measurement) -> a::Urr {
    let r = &u.rule;
    let usage = |x: &upf::fastpath::Usage| a::Usage {
        ul_packets: x.ul_packets,
        ul_bytes: x.ul_bytes,
        dl_packets: x.dl_packets,
        dl_bytes: x.dl_bytes,
        total_bytes: x.total_bytes(),
    };
    let volume = |v: upf::rules::VolumeLimit| a::Volume {
        total: v.total,
        ul: v.uplink,
        dl: v.downlink,
    };
    a::Urr {
        id: u.id,
        measurement_method: flag_names(&r.measurement_method, pfcp::ie::measurement_method::NAMES),
        reporting_triggers: flag_names(&r.reporting_triggers, pfcp::ie::reporting_triggers::NAMES),
        measurement_period_seconds: r.measurement_period,
        volume_threshold: r.volume_threshold.map(volume),
        volume_quota: r.volume_quota.map(volume),
        time_threshold_seconds: r.time_threshold,
        time_quota_seconds: r.time_quota,
        measured: a::Measured {
            since_created: usage(&m.total),
            since_last_report: usage(&m.unreported),
            reports_sent: m.reports,
            first_packet: m.total.first_packet,
            last_packet: m.total.last_packet,
        },
    }
}

fn stats(cx: &Context) -> a::Stats {
    let n4 = cx.n4();
    let st = n4.stats();
    let by_type = |m: &std::collections::HashMap<u8, u64>| {
        let mut v: Vec<(&u8, &u64)> = m.iter().collect();
        v.sort();
        v.into_iter()
            .map(|(t, n)| a::MessageCount {
                message_type: pfcp::message_type::name(*t)
                    .unwrap_or("unknown")
                    .to_string(),
                count: *n,
            })
            .collect()
    };
    let datapath = cx.metrics.datapath.map(|d| {
        let at = |i: usize| {
            let (packets, bytes) = d.get(i).copied().unwrap_or_default();
            a::Counted { packets, bytes }
        };
        let side = |name: &str, received: Option<Stat>, sent: Stat| a::InterfaceStats {
            interface: name.to_string(),
            received: received.map(|r| at(r.index())),
            sent: at(sent.index()),
        };
        a::DatapathStats {
            interfaces: vec![
                side("n3", Some(Stat::ReceivedN3), Stat::ForwardedDownlink),
                side("n6", Some(Stat::ReceivedN6), Stat::ForwardedUplink),
                side("n9", None, Stat::ForwardedN9),
            ],
            drops: DropReason::ALL
                .iter()
                .map(|r| {
                    let c = at(r.index());
                    a::DropCount {
                        reason: r.name(),
                        packets: c.packets,
                        bytes: c.bytes,
                    }
                })
                .collect(),
            outcomes: Stat::ALL
                .iter()
                .filter(|o| !matches!(o, Stat::ReceivedN3 | Stat::ReceivedN6))
                .map(|o| {
                    let c = at(o.index());
                    a::OutcomeCount {
                        outcome: o.name(),
                        packets: c.packets,
                        bytes: c.bytes,
                    }
                })
                .collect(),
        }
    });
    a::Stats {
        n4: a::N4Stats {
            requests: by_type(&st.requests),
            rejections: by_type(&st.rejected),
            malformed: st.malformed,
            duplicates: st.duplicates,
            timeouts: st.timeouts,
            congestion_rejections: st.congestion_rejections,
            receive_drops: cx.metrics.n4_queue.drops,
            load_percent: cx.metrics.n4_queue.load.metric,
        },
        datapath,
        slow_path: cx.slow().map(|sp| {
            let c = &sp.counters;
            a::SlowPathStats {
                echo_requests_answered: c.echo_requests_answered,
                echo_requests_sent: c.echo_requests_sent,
                error_indications_sent: c.error_indications_sent,
                error_indications_suppressed: c.error_indications_suppressed,
                error_indications_received: c.error_indications_received,
                end_markers_sent: c.end_markers_sent,
            }
        }),
    }
}

/// The applications PDRs may name and their PFDs (configured, or provisioned by PFD
/// Management), by Application ID.
fn applications(n4: &upf::n4::N4) -> a::Applications {
    use upf::abi;
    let protocols = |p: u8| {
        [
            (abi::APP_P_DNS, a::DetectedIn::Dns),
            (abi::APP_P_SNI, a::DetectedIn::TlsSni),
            (abi::APP_P_HOST, a::DetectedIn::HttpHost),
        ]
        .into_iter()
        .filter(|(bit, _)| u32::from(p) & bit != 0)
        .map(|(_, d)| d)
        .collect::<Vec<_>>()
    };
    let t = n4.sessions().pfds();
    a::Applications {
        applications: t
            .iter()
            .map(|x| a::Application {
                id: x.id.clone(),
                index: x.index,
                source: if x.local {
                    a::ApplicationSource::Configuration
                } else {
                    a::ApplicationSource::PfdManagement
                },
                flow_descriptions: x.pfds.flow_texts.clone(),
                urls: x
                    .pfds
                    .urls
                    .iter()
                    .map(|u| format!("http://{}{}", u.host, u.path))
                    .collect(),
                domain_names: x
                    .pfds
                    .domains
                    .iter()
                    .map(|d| a::DomainName {
                        name: d.name.clone(),
                        protocols: protocols(d.protocols),
                    })
                    .collect(),
            })
            .collect(),
    }
}

fn buffers(cx: &Context) -> a::Buffers {
    let Some(sp) = cx.slow() else {
        return a::Buffers {
            buffered_packets: 0,
            sessions: Vec::new(),
            totals: None,
            note: Some("no data path (datapath.mode: none): nothing is buffered".to_string()),
        };
    };
    let c = &sp.counters;
    a::Buffers {
        buffered_packets: sp.buffered_packets(),
        sessions: sp
            .buffers(cx.now)
            .iter()
            .map(|b| a::Buffered {
                seid: hex(b.seid),
                far_id: b.far_id,
                packets: b.packets,
                octets: b.octets,
                oldest_ms: b.oldest.map(|d| d.as_millis() as u64),
                smf_notified: b.notified,
            })
            .collect(),
        totals: Some(a::BufferTotals {
            buffered: c.buffered,
            released: c.buffer_released,
            dropped_full: c.buffer_dropped_full,
            dropped_expired: c.buffer_dropped_expired,
            discarded: c.buffer_discarded,
            downlink_data_reports: c.downlink_data_reports,
        }),
        note: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A session with a rule of every kind and every optional value set, and its URR's
    /// counts.
    fn rich_session() -> (Session, Vec<Measurement>) {
        use pfcp::ie::{
            measurement_method as mm, reporting_triggers as rt, Bitrate, FSeid, NodeId,
            OuterHeaderCreation, OuterHeaderRemoval, SdfFilter,
        };
        use upf::rules::*;
        let mut s = Session::new(
            0x1234_5678_9abc_def0,
            FSeid {
                seid: 0xfedc_ba98_7654_3210,
                ipv4: Some([192, 0, 2, 1].into()),
                ipv6: None,
                spare: 0,
            },
            NodeId::Ipv4([192, 0, 2, 1].into()),
        );
        s.apn_dnn = Some("internet".into());
        s.pdn_type = Some(1);
        s.user_plane_inactivity_timer = Some(300);
        s.teids = thin_vec![0x100];
        let uplink = Pdi {
            source_interface: interface::ACCESS,
            local_fteid: Some(LocalFteid {
                teid: 0x100,
                ipv4: Some([198, 51, 100, 1].into()),
                ipv6: None,
            }),
            network_instance: Some(network_instance("internet")),
            ue_ips: thin_vec![UeIp {
                ipv4: Some([10, 45, 0, 1].into()),
                ipv6: Some("2001:db8:1::".parse().unwrap()),
                ipv6_prefix_len: Some(64),
                is_destination: false,
            }],
            sdf_filters: thin_vec![SdfFilter {
                flow_description: Some(b"permit out ip from any to assigned".to_vec()),
                filter_id: Some(7),
                spare: 0x20,
                ..Default::default()
            }],
            application_id: Some("video".into()),
            qfis: thin_vec![9],
            framed_routes: thin_vec!["192.0.2.0/24".parse().unwrap()],
            ..Default::default()
        };
        s.pdrs.insert(
            1,
            Pdr {
                id: 1,
                precedence: 100,
                pdi: uplink,
                outer_header_removal: Some(OuterHeaderRemoval {
                    description: 0,
                    ext_header_deletion: Some(1),
                }),
                far_id: Some(1),
                urr_ids: smallvec![1],
                qer_ids: smallvec![1],
                activation_time: None,
                deactivation_time: None,
            },
        );
        s.pdrs.insert(
            2,
            Pdr {
                id: 2,
                precedence: u32::MAX,
                pdi: Pdi {
                    source_interface: 9,
                    ..Default::default()
                },
                outer_header_removal: None,
                far_id: None,
                urr_ids: smallvec![],
                qer_ids: smallvec![],
                activation_time: None,
                deactivation_time: None,
            },
        );
        s.fars.insert(
            1,
            Far {
                id: 1,
                action: ApplyAction {
                    forw: true,
                    ..Default::default()
                },
                forwarding: Some(Forwarding {
                    destination_interface: interface::CORE,
                    network_instance: Some(network_instance("internet")),
                    outer_header_creation: Some(OuterHeaderCreation::gtpu_ipv4(
                        0x200,
                        [198, 51, 100, 2].into(),
                    )),
                    transport_level_marking: Some(0xb8fc),
                    ..Default::default()
                }),
                bar_id: None,
            },
        );
        s.fars.insert(
            2,
            Far {
                id: 2,
                action: ApplyAction {
                    buff: true,
                    nocp: true,
                    ..Default::default()
                },
                forwarding: None,
                bar_id: Some(1),
            },
        );
        s.qers.insert(
            1,
            Qer {
                id: 1,
                gate_ul_open: true,
                gate_dl_open: false,
                mbr: Some(Bitrate {
                    ul_kbps: 1000,
                    dl_kbps: 2000,
                }),
                gbr: Some(Bitrate {
                    ul_kbps: 100,
                    dl_kbps: 200,
                }),
                qfi: Some(9),
                correlation_id: Some(5),
                ..Default::default()
            },
        );
        s.urrs.insert(
            1,
            Urr {
                id: 1,
                rule: UrrRule {
                    measurement_method: Flags::from_bits(&[mm::DURAT, mm::VOLUM], 1),
                    reporting_triggers: Flags::from_bits(&[rt::PERIO, rt::VOLTH], 3),
                    measurement_period: Some(60),
                    volume_threshold: Some(VolumeLimit {
                        total: Some(1000),
                        uplink: None,
                        downlink: Some(500),
                    }),
                    volume_quota: None,
                    time_threshold: Some(30),
                    time_quota: None,
                    quota_holding_time: None,
                    inactivity_detection_time: None,
                    linked_urr_ids: Vec::new(),
                    far_id_for_quota_action: None,
                },
            },
        );
        s.bars.insert(
            1,
            Bar {
                id: 1,
                downlink_data_notification_delay: Some(2),
                suggested_buffering_packets_count: Some(10),
                ..Default::default()
            },
        );
        let m = Measurement {
            total: upf::fastpath::Usage {
                ul_packets: 3,
                ul_bytes: 300,
                dl_packets: 2,
                dl_bytes: 2000,
                first_packet: Some(1_700_000_000),
                last_packet: Some(1_700_000_060),
            },
            unreported: upf::fastpath::Usage {
                ul_packets: 1,
                ul_bytes: 100,
                ..Default::default()
            },
            reports: 2,
            start: 0,
        };
        (s, vec![m])
    }

    /// A whole session and its summary are written as upfctl and scripts read them:
    /// every field, null where there is no value, absent where an IE has none, SEIDs as
    /// 0x-hex strings.
    #[test]
    fn a_session_is_written_field_for_field() {
        let (s, m) = rich_session();
        let v = serde_json::to_value(session(&s, &m)).unwrap();
        let pdrs = json!([
            {"id": 1, "precedence": 100, "source_interface": "access",
             "local_fteid": {"teid": 256, "ipv4": "198.51.100.1", "ipv6": null},
             "network_instance": "internet",
             "ue_ip": [{"ipv4": "10.45.0.1", "ipv6": "2001:db8:1::", "ipv6_prefix_length": 64,
                        "destination": false}],
             "sdf_filters": [{"flow_description": "permit out ip from any to assigned",
                              "filter_id": 7, "spare": 32}],
             "application_id": "video", "qfis": [9], "framed_routes": ["192.0.2.0/24"],
             "outer_header_removal": {"description": 0, "ext_header_deletion": 1},
             "far_id": 1, "qer_ids": [1], "urr_ids": [1]},
            {"id": 2, "precedence": 4294967295u32, "source_interface": "spare",
             "local_fteid": null, "network_instance": null, "ue_ip": [], "sdf_filters": [],
             "application_id": null, "qfis": [], "framed_routes": [],
             "outer_header_removal": null, "far_id": null, "qer_ids": [], "urr_ids": []},
        ]);
        let fars = json!([
            {"id": 1, "apply_action": ["forw"],
             "forwarding": {"destination_interface": "core", "network_instance": "internet",
                            "outer_header_creation": {"description": 256, "teid": 512,
                                                      "ipv4": "198.51.100.2"},
                            "transport_level_marking": 47356},
             "bar_id": null},
            {"id": 2, "apply_action": ["buff", "nocp"], "forwarding": null, "bar_id": 1},
        ]);
        let qers = json!([
            {"id": 1, "gate_ul": "open", "gate_dl": "closed", "mbr_ul_kbps": 1000,
             "mbr_dl_kbps": 2000, "gbr_ul_kbps": 100, "gbr_dl_kbps": 200, "qfi": 9,
             "correlation_id": 5},
        ]);
        let urrs = json!([
            {"id": 1, "measurement_method": ["DURAT", "VOLUM"],
             "reporting_triggers": ["PERIO", "VOLTH"], "measurement_period_seconds": 60,
             "volume_threshold": {"total": 1000, "ul": null, "dl": 500}, "volume_quota": null,
             "time_threshold_seconds": 30, "time_quota_seconds": null,
             "measured": {
                 "since_created": {"ul_packets": 3, "ul_bytes": 300, "dl_packets": 2,
                                   "dl_bytes": 2000, "total_bytes": 2300},
                 "since_last_report": {"ul_packets": 1, "ul_bytes": 100, "dl_packets": 0,
                                       "dl_bytes": 0, "total_bytes": 100},
                 "reports_sent": 2, "first_packet": 1700000000, "last_packet": 1700000060}},
        ]);
        let bars = json!([
            {"id": 1, "downlink_data_notification_delay": 2,
             "suggested_buffering_packets_count": 10},
        ]);
        assert_eq!(
            v,
            json!({
                "seid": "0x123456789abcdef0", "cp_seid": "0xfedcba9876543210",
                "cp_address": "192.0.2.1", "cp_node_id": "192.0.2.1", "dnn": "internet",
                "pdn_type": 1, "ue_addresses": ["10.45.0.1", "2001:db8:1::/64"],
                "teids": [256], "user_plane_inactivity_timer": 300, "predefined_rules": [],
                "pdrs": pdrs, "fars": fars, "qers": qers, "urrs": urrs, "bars": bars,
            })
        );
        assert_eq!(
            serde_json::to_value(summary(&s)).unwrap(),
            json!({
                "seid": "0x123456789abcdef0", "cp_seid": "0xfedcba9876543210",
                "cp_node_id": "192.0.2.1", "ue_addresses": ["10.45.0.1", "2001:db8:1::/64"],
                "teids": [256], "dnn": "internet",
                "rules": {"pdrs": 2, "fars": 2, "qers": 1, "urrs": 1},
            })
        );
    }

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
        let v = serde_json::to_value(applications(&n4)).unwrap();
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
