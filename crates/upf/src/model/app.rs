//! Application detection (docs/application-detection.md, which this file follows to the
//! letter): which application a packet's flow belongs to, from the session's flow table,
//! the addresses learned from DNS answers, and a flow's first uplink payload (a TLS
//! ClientHello's server_name, an HTTP request's target and Host), read from the PFD table
//! (crate::pfd) itself, not from the XDP compiler's tables.
//!
//! The parsers are written for clarity, as the specification reads; they are the oracle
//! the XDP programs (bpf/include/app.h) are held to. Every field they read must lie inside
//! the bytes they are given; anything else gives no name and learns nothing (they index
//! with `get`, never panic).
//!
//! State: the flow table and the learned addresses are unbounded hash maps. The data
//! path's `app_flows` and `app_addrs` are LRU hashes; their eviction when full is not
//! modelled (a differential test must stay below their size). A removed session's flow
//! entries are forgotten with it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use pfcp::ie::reporting_triggers;

use crate::abi;
use crate::fastpath::{AppFlow, Event};
use crate::pfd::PfdTable;
use crate::rules::{Pdi, Session};
use crate::sdf::{Direction, PacketFields};

use super::packet::transport_offset;
use super::Model;

const NSEC_PER_SEC: u64 = 1_000_000_000;
/// A flow entry unused this long no longer classifies (ns).
const FLOW_IDLE_NS: u64 = abi::APP_FLOW_IDLE_SEC as u64 * NSEC_PER_SEC;
/// A flow entry's time is refreshed when it is at least this old (ns).
const FLOW_REFRESH_NS: u64 = NSEC_PER_SEC;
const NAME_MAX: usize = abi::APP_NAME_MAX as usize;
/// Octets of a URL lookup key: APP_KEY_MAX less the data path's terminator.
const URL_KEY_MAX: usize = abi::APP_KEY_MAX as usize - 1;
/// Labels of an answer record's owner name before its end (a zero octet or a pointer).
const DNS_OWNER_LABELS: usize = 16;
const DNS_PORT: u16 = 53;
const TYPE_A: u16 = 1;
const TYPE_AAAA: u16 = 28;
const CLASS_IN: u16 = 1;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    let x = b.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([x[0], x[1]]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    let x = b.get(at..at.checked_add(4)?)?;
    Some(u32::from_be_bytes([x[0], x[1], x[2], x[3]]))
}

/// `at..at + len` of `b`, if it lies inside.
fn field(b: &[u8], at: usize, len: usize) -> Option<&[u8]> {
    b.get(at..at.checked_add(len)?)
}

/// `b` as a name the data path compares: lower case, a host name (labels of 1..=63
/// octets of letters, digits, `-` and `_`, separated by dots, at most APP_NAME_MAX octets
/// in all). None if it is not one (also with a trailing dot: an empty label).
pub fn host_name(b: &[u8]) -> Option<String> {
    if b.is_empty() || b.len() > NAME_MAX {
        return None;
    }
    let label_ok = |l: &[u8]| {
        (1..=63).contains(&l.len())
            && l.iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
    };
    if !b.split(|c| *c == b'.').all(label_ok) {
        return None;
    }
    String::from_utf8(b.to_ascii_lowercase()).ok()
}

// ---------------------------------------------------------------------------------------
// DNS answers
// ---------------------------------------------------------------------------------------

/// What a DNS answer teaches: its question's name and the addresses of its first
/// APP_DNS_ANSWERS answer records that are A or AAAA records of class IN, each with the
/// record's TTL as sent (seconds; the learner caps it and skips 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsAnswer {
    pub qname: String,
    pub addrs: Vec<(IpAddr, u32)>,
}

/// Read a DNS message (the UDP payload `p`) as the data path does. None if it is not a
/// response (QR 1, opcode 0, RCODE 0) with one question whose name is an uncompressed
/// host name followed by QTYPE and QCLASS. The answer records are walked until one does
/// not fit or does not parse: the ones before it count.
pub fn parse_dns(p: &[u8]) -> Option<DnsAnswer> {
    let h = field(p, 0, 12)?;
    let qr = h[2] >> 7;
    let opcode = (h[2] >> 3) & 0x0f;
    let rcode = h[3] & 0x0f;
    let qdcount = u16::from_be_bytes([h[4], h[5]]);
    let ancount = u16::from_be_bytes([h[6], h[7]]);
    if qr != 1 || opcode != 0 || rcode != 0 || qdcount != 1 {
        return None;
    }
    // The question's name: uncompressed labels ending in a zero octet.
    let mut at = 12;
    let mut name: Vec<u8> = Vec::new();
    loop {
        let n = usize::from(*p.get(at)?);
        if n == 0 {
            at += 1;
            break;
        }
        if n > 63 {
            // A compression pointer (or a reserved label type): not read.
            return None;
        }
        if !name.is_empty() {
            name.push(b'.');
        }
        name.extend_from_slice(field(p, at + 1, n)?);
        if name.len() > NAME_MAX {
            return None;
        }
        at += 1 + n;
    }
    let qname = host_name(&name)?;
    field(p, at, 4)?; // QTYPE, QCLASS
    at += 4;
    let mut addrs = Vec::new();
    for _ in 0..usize::from(ancount).min(abi::APP_DNS_ANSWERS as usize) {
        let Some((learned, next)) = answer_record(p, at) else {
            break;
        };
        addrs.extend(learned);
        at = next;
    }
    Some(DnsAnswer { qname, addrs })
}

/// The answer record at `at`: its address if it is an A or AAAA record of class IN, and
/// where the next record starts. None if it does not fit or its owner name does not parse.
fn answer_record(p: &[u8], at: usize) -> Option<(Option<(IpAddr, u32)>, usize)> {
    let at = owner_name_end(p, at)?;
    let ty = be16(p, at)?;
    let class = be16(p, at + 2)?;
    let ttl = be32(p, at + 4)?;
    let rdlength = usize::from(be16(p, at + 8)?);
    let rdata = field(p, at + 10, rdlength)?;
    let addr = match (ty, class, rdata.len()) {
        (TYPE_A, CLASS_IN, 4) => Some(IpAddr::from(<[u8; 4]>::try_from(rdata).ok()?)),
        (TYPE_AAAA, CLASS_IN, 16) => Some(IpAddr::from(<[u8; 16]>::try_from(rdata).ok()?)),
        _ => None,
    };
    Some((addr.map(|a| (a, ttl)), at + 10 + rdlength))
}

/// Where an owner name at `at` ends: up to DNS_OWNER_LABELS labels (not checked), then a
/// zero octet or a two-octet compression pointer (not followed).
fn owner_name_end(p: &[u8], mut at: usize) -> Option<usize> {
    for _ in 0..=DNS_OWNER_LABELS {
        let n = *p.get(at)?;
        match n {
            0 => return Some(at + 1),
            0xc0..=0xff => return field(p, at, 2).map(|_| at + 2),
            1..=63 => {
                field(p, at + 1, usize::from(n))?;
                at += 1 + usize::from(n);
            }
            _ => return None,
        }
    }
    None
}

// ---------------------------------------------------------------------------------------
// TLS ClientHello
// ---------------------------------------------------------------------------------------

/// The server_name of a TLS ClientHello starting the TCP payload `p`. The record and
/// handshake lengths are not read; the extensions are walked (at most
/// APP_TLS_EXTENSIONS) inside both their length and `p`; the first server_name extension
/// decides: its first entry must be a host_name inside the extension's data.
pub fn parse_sni(p: &[u8]) -> Option<String> {
    if *p.first()? != 0x16 || *p.get(1)? != 0x03 || *p.get(5)? != 0x01 {
        return None;
    }
    // From offset 9: version (2), random (32).
    let mut at = 9 + 2 + 32;
    let session_id = usize::from(*p.get(at)?);
    if session_id > 32 {
        return None;
    }
    at += 1 + session_id;
    let cipher_suites = usize::from(be16(p, at)?);
    at += 2 + cipher_suites;
    let compression = usize::from(*p.get(at)?);
    at += 1 + compression;
    let extensions = usize::from(be16(p, at)?);
    at += 2;
    let end = at + extensions;
    for _ in 0..abi::APP_TLS_EXTENSIONS {
        if at + 4 > end {
            return None;
        }
        let ty = be16(p, at)?;
        let len = usize::from(be16(p, at + 2)?);
        if at + 4 + len > end {
            return None;
        }
        let data = field(p, at + 4, len)?;
        if ty == 0 {
            return server_name(data);
        }
        at += 4 + len;
    }
    None
}

/// The server_name extension's data: list length (2, not checked), the first entry's
/// type (0: host_name), its length (2) and the name.
fn server_name(d: &[u8]) -> Option<String> {
    be16(d, 0)?;
    if *d.get(2)? != 0 {
        return None;
    }
    let n = usize::from(be16(d, 3)?);
    host_name(field(d, 5, n)?)
}

// ---------------------------------------------------------------------------------------
// HTTP requests
// ---------------------------------------------------------------------------------------

/// An HTTP/1 request's Host (lower case, without port) and request-target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    pub host: String,
    pub target: Vec<u8>,
}

impl HttpRequest {
    /// The URL lookup key: the Host followed by the request-target, cut at
    /// APP_KEY_MAX - 1 octets.
    pub fn url_key(&self) -> Vec<u8> {
        let mut k = self.host.as_bytes().to_vec();
        k.extend_from_slice(&self.target);
        k.truncate(URL_KEY_MAX);
        k
    }
}

/// An HTTP request starting the TCP payload `p`, read within its first APP_HTTP_SCAN
/// octets: a method of 1 to 7 upper-case letters and a space, an origin-form
/// request-target (from `/` up to the next space), ` HTTP/1.`, then the first line
/// starting with `Host:` (any case): its value after spaces and tabs, up to CR, LF, space
/// or tab (which must come within the window), without `:port`, a host name.
pub fn parse_http(p: &[u8]) -> Option<HttpRequest> {
    let w = &p[..p.len().min(abi::APP_HTTP_SCAN as usize)];
    let sp = w.iter().take(8).position(|c| *c == b' ')?;
    if sp == 0 || !w[..sp].iter().all(u8::is_ascii_uppercase) {
        return None;
    }
    let start = sp + 1;
    if *w.get(start)? != b'/' {
        return None;
    }
    let end = start + w[start..].iter().position(|c| *c == b' ')?;
    let target = w[start..end].to_vec();
    if !w[end..].starts_with(b" HTTP/1.") {
        return None;
    }
    // Header lines: each starts after a LF.
    let mut at = end + 8;
    let value = loop {
        let lf = at + w.get(at..)?.iter().position(|c| *c == b'\n')?;
        let line = &w[lf + 1..];
        if line.len() >= 5 && line[..5].eq_ignore_ascii_case(b"host:") {
            break &line[5..];
        }
        at = lf + 1;
    };
    let blank = |c: &u8| *c == b' ' || *c == b'\t';
    let from = value.iter().position(|c| !blank(c))?;
    let value = &value[from..];
    let len = value
        .iter()
        .position(|c| matches!(c, b'\r' | b'\n' | b' ' | b'\t'))?;
    let value = &value[..len];
    let host = match value.iter().position(|c| *c == b':') {
        Some(colon) => &value[..colon],
        None => value,
    };
    Some(HttpRequest {
        host: host_name(host)?,
        target,
    })
}

// ---------------------------------------------------------------------------------------
// Looking names and URLs up in the PFD table
// ---------------------------------------------------------------------------------------

/// Whether PFD domain `domain` is `name` or a suffix of it on a label boundary.
fn covers(domain: &str, name: &str) -> bool {
    name == domain
        || name
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// A name's application for protocol `proto` (an `abi::APP_P_*` bit): the longest PFD
/// domain (of any application, whatever its protocols) that is the name or a suffix of
/// it on a label boundary decides; the lowest index of the applications that list it for
/// `proto`, else none (a shorter domain is not tried).
pub fn name_app(pfds: &PfdTable, name: &str, proto: u32) -> Option<u16> {
    let domains = || {
        pfds.iter()
            .flat_map(|a| a.pfds.domains.iter().map(move |d| (a, d)))
    };
    let longest = domains()
        .filter(|(_, d)| covers(&d.name, name))
        .map(|(_, d)| d.name.len())
        .max()?;
    domains()
        .filter(|(_, d)| d.name.len() == longest && covers(&d.name, name))
        .filter(|(_, d)| u32::from(d.protocols) & proto != 0)
        .map(|(a, _)| a.index)
        .min()
}

/// A URL lookup key's application: the longest `host + path` of an application's
/// `http://` URLs that is a prefix of `key`; the lowest index among equals.
pub fn url_app(pfds: &PfdTable, key: &[u8]) -> Option<u16> {
    pfds.iter()
        .flat_map(|a| a.pfds.urls.iter().map(move |u| (a.index, u)))
        .filter_map(|(index, u)| {
            let prefix = [u.host.as_bytes(), u.path.as_bytes()].concat();
            key.starts_with(&prefix).then_some((prefix.len(), index))
        })
        .max_by(|(l1, i1), (l2, i2)| l1.cmp(l2).then(i2.cmp(i1)))
        .map(|(_, index)| index)
}

/// A ClientHello's or HTTP request's application (a TCP payload of an uplink packet):
/// the SNI's (protocol SNI); else the longest matching `http://` URL's, else the Host's
/// (protocol HTTP Host).
pub fn payload_app(pfds: &PfdTable, payload: &[u8]) -> Option<u16> {
    if let Some(sni) = parse_sni(payload) {
        return name_app(pfds, &sni, abi::APP_P_SNI);
    }
    let req = parse_http(payload)?;
    url_app(pfds, &req.url_key()).or_else(|| name_app(pfds, &req.host, abi::APP_P_HOST))
}

/// Whether a PDR's PDI with an Application ID takes a packet whose application is `app`:
/// it is that application, or the packet matches one of the application's flow
/// descriptions in `dir`. An application the table does not know matches nothing.
pub fn app_matches(
    pfds: &PfdTable,
    pdi: &Pdi,
    app: Option<u16>,
    f: &PacketFields,
    dir: Direction,
) -> bool {
    let Some(id) = &pdi.application_id else {
        return true;
    };
    let Some(a) = pfds.get(id) else {
        return false;
    };
    app == Some(a.index) || a.pfds.flows.iter().any(|r| r.matches(f, dir))
}

// ---------------------------------------------------------------------------------------
// The model's state
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
struct FlowEntry {
    app: u16,
    /// When its last packet was seen (refreshed at most once a second), ns.
    last: u64,
}

#[derive(Debug, Clone, Copy)]
struct Learned {
    app: u16,
    /// The DNS answer's TTL runs out at this time (ns): usable while now < expires.
    expires: u64,
}

/// What application detection keeps: the flow table (per session), the learned
/// addresses (shared by every session), the events not yet taken.
#[derive(Debug, Default)]
pub(super) struct AppState {
    /// (SEID, flow) -> application: the data path's `app_flows` (an LRU there).
    flows: HashMap<(u64, AppFlow), FlowEntry>,
    /// Address -> application: the data path's `app_addrs` (an LRU there).
    addrs: HashMap<IpAddr, Learned>,
    events: Vec<Event>,
    /// The latest time a packet was processed at (ns): `app_flow_idle`'s now.
    clock: u64,
}

/// The flow of a packet going `dir`: the UE side is the source of uplink packets.
/// Ports are 0 when the packet has none (protocols without ports, later fragments).
pub fn flow_of(f: &PacketFields, dir: Direction) -> AppFlow {
    let (src_port, dst_port) = (f.src_port.unwrap_or(0), f.dst_port.unwrap_or(0));
    match dir {
        Direction::Uplink => AppFlow {
            protocol: f.protocol,
            ue: f.src,
            ue_port: src_port,
            remote: f.dst,
            remote_port: dst_port,
        },
        Direction::Downlink => AppFlow {
            protocol: f.protocol,
            ue: f.dst,
            ue_port: dst_port,
            remote: f.src,
            remote_port: src_port,
        },
    }
}

/// Whether the session has a PDR with an Application ID: its packets are classified.
fn classifies(s: &Session) -> bool {
    s.pdrs.values().any(|p| p.pdi.application_id.is_some())
}

/// Whether the session asks for Application Detection Information: a PDR with an
/// Application ID has a URR with reporting trigger START.
fn reports_start(s: &Session) -> bool {
    s.pdrs
        .values()
        .filter(|p| p.pdi.application_id.is_some())
        .flat_map(|p| p.urr_ids.iter())
        .filter_map(|u| s.urrs.get(u))
        .any(|u| u.rule.reporting_triggers.get(reporting_triggers::START))
}

/// The UDP payload of a DNS answer to the UE in IP packet `ip`: UDP from port 53, the
/// first fragment (or none), the UDP header inside the packet.
fn dns_payload<'p>(ip: &'p [u8], f: &PacketFields) -> Option<&'p [u8]> {
    if f.protocol != 17 || f.src_port != Some(DNS_PORT) {
        return None;
    }
    let l4 = transport_offset(ip)?;
    field(ip, l4, 8)?;
    ip.get(l4 + 8..)
}

/// The payload of a TCP segment in IP packet `ip` (first fragment): after the TCP header
/// and its options; None when empty or when the header does not fit (or says it is
/// shorter than 20 octets).
fn tcp_payload<'p>(ip: &'p [u8], f: &PacketFields) -> Option<&'p [u8]> {
    if f.protocol != 6 {
        return None;
    }
    let l4 = transport_offset(ip)?;
    let doff = usize::from(*ip.get(l4 + 12)? >> 4) * 4;
    if doff < 20 {
        return None;
    }
    let payload = ip.get(l4 + doff..)?;
    (!payload.is_empty()).then_some(payload)
}

impl Model {
    /// The application of a packet of session `s` going `dir` (the IP packet `ip`, its
    /// fields `f`) at `now` (ns), as the data path decides it right before choosing the
    /// PDR; None for sessions without a PDR naming an application. A DNS answer to the UE
    /// is learned from first (docs/application-detection.md, "What is parsed").
    pub(super) fn classify(
        &mut self,
        s: &Session,
        ip: &[u8],
        f: &PacketFields,
        dir: Direction,
        now: u64,
    ) -> Option<u16> {
        self.apps.clock = self.apps.clock.max(now);
        if !classifies(s) {
            return None;
        }
        if dir == Direction::Downlink {
            if let Some(p) = dns_payload(ip, f) {
                self.learn_dns(p, now);
            }
        }
        let flow = flow_of(f, dir);
        let key = (s.up_seid, flow);
        // 1. The flow table.
        if let Some(e) = self.apps.flows.get_mut(&key) {
            let age = now.saturating_sub(e.last);
            if age < FLOW_IDLE_NS {
                if age >= FLOW_REFRESH_NS {
                    e.last = now;
                }
                return Some(e.app);
            }
        }
        // 2. A learned address; 3. an uplink TCP payload.
        let app = self.learned_app(flow.remote, now).or_else(|| {
            let payload = (dir == Direction::Uplink).then(|| tcp_payload(ip, f))??;
            payload_app(&self.pfds, payload)
        })?;
        self.apps.flows.insert(key, FlowEntry { app, last: now });
        if reports_start(s) {
            if let Some(a) = self.pfds.by_index(app) {
                self.apps.events.push(Event::AppStart {
                    seid: s.up_seid,
                    app: a.id.clone(),
                    flow,
                });
            }
        }
        Some(app)
    }

    /// Learn the A/AAAA records of a DNS answer (UDP payload `p`) for its question's
    /// application (protocol DNS), until now + TTL (capped at APP_TTL_MAX; TTL 0: not
    /// learned). The last answer wins.
    fn learn_dns(&mut self, p: &[u8], now: u64) {
        let Some(answer) = parse_dns(p) else {
            return;
        };
        let Some(app) = name_app(&self.pfds, &answer.qname, abi::APP_P_DNS) else {
            return;
        };
        for (addr, ttl) in answer.addrs {
            if ttl == 0 {
                continue;
            }
            let ttl = u64::from(ttl.min(abi::APP_TTL_MAX));
            let expires = now + ttl * NSEC_PER_SEC;
            self.apps.addrs.insert(addr, Learned { app, expires });
        }
    }

    /// The application index address `a` was learned for, if its TTL has not run out
    /// at `now` (ns).
    pub fn learned_app(&self, a: IpAddr, now: u64) -> Option<u16> {
        self.apps
            .addrs
            .get(&a)
            .filter(|l| now < l.expires)
            .map(|l| l.app)
    }

    /// The application index of a flow of session `seid` in the flow table, if its entry
    /// is not idle (at the latest time the model processed a packet at).
    pub fn flow_app(&self, seid: u64, flow: &AppFlow) -> Option<u16> {
        let e = self.apps.flows.get(&(seid, *flow))?;
        (self.apps.clock.saturating_sub(e.last) < FLOW_IDLE_NS).then_some(e.app)
    }

    /// The Application Detection Information events (`Event::AppStart`) raised since
    /// last asked, oldest first, taken out.
    pub fn take_app_events(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.apps.events)
    }

    /// After `set_pfds`: the applications in `changed` forget their learned addresses.
    pub(super) fn forget_learned(&mut self, old: &PfdTable, changed: &[String]) {
        let gone: Vec<u16> = changed
            .iter()
            .filter_map(|id| self.pfds.get(id).or_else(|| old.get(id)))
            .map(|a| a.index)
            .collect();
        self.apps.addrs.retain(|_, l| !gone.contains(&l.app));
    }

    /// A removed session's flow entries go with it.
    pub(super) fn forget_flows(&mut self, seid: u64) {
        if !self.apps.flows.is_empty() {
            self.apps.flows.retain(|(s, _), _| *s != seid);
        }
    }

    /// How long ago a classified flow of a session last had a packet, by the model's
    /// clock (the latest time it processed a packet at); None if it has no entry or the
    /// entry is idle past APP_FLOW_IDLE_SEC.
    pub(super) fn flow_idle(&self, seid: u64, flow: &AppFlow) -> Option<Duration> {
        let e = self.apps.flows.get(&(seid, *flow))?;
        let idle = self.apps.clock.saturating_sub(e.last);
        (idle < FLOW_IDLE_NS).then(|| Duration::from_nanos(idle))
    }
}
