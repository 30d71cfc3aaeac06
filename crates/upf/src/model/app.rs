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
        let label = field(p, at + 1, n)?;
        if label.contains(&b'.') {
            // Not a host name's label (host_name below checks the other octets).
            return None;
        }
        if !name.is_empty() {
            name.push(b'.');
        }
        name.extend_from_slice(label);
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
/// request-target (from `/` up to the next space), ` HTTP/1.`, then the first header
/// line starting with `Host:` (any case) before the empty line that ends the headers: its value after spaces and tabs, up to CR, LF, space
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
    // Header lines: each starts after a LF; an empty one (LF or CR LF) ends them.
    let mut at = end + 8;
    let value = loop {
        let lf = at + w.get(at..)?.iter().position(|c| *c == b'\n')?;
        let line = &w[lf + 1..];
        if line.starts_with(b"\n") || line.starts_with(b"\r\n") {
            return None;
        }
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
    let l4 = PacketFields::transport_offset(ip)?;
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
    let l4 = PacketFields::transport_offset(ip)?;
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
    /// is then learned from (docs/application-detection.md, "What is parsed"): it does
    /// not classify itself.
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
        let app = self.classify_flow(s, ip, f, dir, now);
        // After the packet's own classification: a DNS answer to the UE is learned from.
        if dir == Direction::Downlink {
            if let Some(p) = dns_payload(ip, f) {
                self.learn_dns(p, now);
            }
        }
        app
    }

    /// The flow's application, first that applies: its flow table entry, its remote
    /// address learned from a DNS answer, its uplink TCP payload; a flow classified by
    /// the last two is entered in the flow table (and its start reported if asked).
    fn classify_flow(
        &mut self,
        s: &Session,
        ip: &[u8],
        f: &PacketFields,
        dir: Direction,
        now: u64,
    ) -> Option<u16> {
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

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};
    use std::sync::Arc;

    use pfcp::ie::{FSeid, Flags, NodeId, OuterHeaderCreation, OuterHeaderRemoval};

    use super::*;
    use crate::fastpath::{Config, Egress, FastPath};
    use crate::model::Verdict;
    use crate::pfd::AppPfds;
    use crate::rules::*;

    // -- DNS ----------------------------------------------------------------------------

    fn wire_name(name: &str) -> Vec<u8> {
        let mut w = Vec::new();
        for l in name.split('.') {
            w.push(l.len() as u8);
            w.extend_from_slice(l.as_bytes());
        }
        w.push(0);
        w
    }

    fn record(owner: &[u8], ty: u16, ttl: u32, rdata: &[u8]) -> Vec<u8> {
        let mut r = owner.to_vec();
        r.extend(ty.to_be_bytes());
        r.extend(CLASS_IN.to_be_bytes());
        r.extend(ttl.to_be_bytes());
        r.extend((rdata.len() as u16).to_be_bytes());
        r.extend_from_slice(rdata);
        r
    }

    /// A response (QR 1, RD, RA) to one question for `qname`, with `records` as its
    /// ANCOUNT answers.
    fn dns(qname: &[u8], records: &[Vec<u8>]) -> Vec<u8> {
        let mut m = vec![0x12, 0x34, 0x81, 0x80, 0, 1];
        m.extend((records.len() as u16).to_be_bytes());
        m.extend([0, 0, 0, 0]);
        m.extend_from_slice(qname);
        m.extend([0, 1, 0, 1]);
        for r in records {
            m.extend(r);
        }
        m
    }

    /// A CNAME from the question (a pointer to offset 12) to `cdn.edge.net`, then its
    /// A and AAAA records, whose owner names point into the CNAME's data.
    fn cname_then_addresses() -> Vec<u8> {
        let q = wire_name("WWW.Video.example");
        let cname = record(&[0xc0, 12], 5, 300, &wire_name("cdn.edge.net"));
        // The CNAME's data starts after the header, the question and its own 12 octets.
        let target = (12 + q.len() + 4 + 12) as u8;
        let a = record(&[0xc0, target], TYPE_A, 60, &[203, 0, 113, 10]);
        let aaaa = record(
            &[3, b'c', b'd', b'n', 0xc0, target + 4],
            TYPE_AAAA,
            100_000,
            &Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 10).octets(),
        );
        dns(&q, &[cname, a, aaaa])
    }

    #[test]
    fn dns_cname_then_addresses_through_compression_pointers() {
        let got = parse_dns(&cname_then_addresses()).unwrap();
        assert_eq!(got.qname, "www.video.example");
        assert_eq!(
            got.addrs,
            vec![
                (IpAddr::from([203, 0, 113, 10]), 60),
                (
                    IpAddr::from(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 10)),
                    100_000
                ),
            ]
        );
    }

    #[test]
    fn dns_truncated_answers_keep_the_records_before_the_cut() {
        let m = cname_then_addresses();
        let full = parse_dns(&m).unwrap().addrs.len();
        let question_end = 12 + wire_name("www.video.example").len() + 4;
        for cut in 0..m.len() {
            match parse_dns(&m[..cut]) {
                None => assert!(cut < question_end, "cut {cut}"),
                Some(a) => {
                    assert!(cut >= question_end, "cut {cut}");
                    assert!(a.addrs.len() < full, "cut {cut}");
                }
            }
        }
        // The AAAA record cut inside its RDATA: the A record before it counts.
        let a = parse_dns(&m[..m.len() - 1]).unwrap();
        assert_eq!(a.addrs, vec![(IpAddr::from([203, 0, 113, 10]), 60)]);
    }

    #[test]
    fn dns_malformed_headers_and_questions_teach_nothing() {
        let a = record(&[0xc0, 12], TYPE_A, 60, &[192, 0, 2, 1]);
        let good = dns(&wire_name("a.example"), std::slice::from_ref(&a));
        assert!(parse_dns(&good).is_some());
        let with = |i: usize, v: u8| {
            let mut m = good.clone();
            m[i] = v;
            m
        };
        assert!(parse_dns(&with(2, 0x01)).is_none(), "a query (QR 0)");
        assert!(parse_dns(&with(2, 0x81 | 0x10)).is_none(), "opcode 2");
        assert!(parse_dns(&with(3, 0x83)).is_none(), "NXDOMAIN");
        assert!(parse_dns(&with(5, 2)).is_none(), "two questions");
        assert!(parse_dns(&with(5, 0)).is_none(), "no question");
        // A compressed question name is not read.
        let m = dns(&[0xc0, 12], std::slice::from_ref(&a));
        assert!(parse_dns(&m).is_none());
        // Names that are not host names.
        for bad in [&b"\x03a b\x07example\x00"[..], b"\x03a.b\x00", b"\x00"] {
            let m = dns(bad, std::slice::from_ref(&a));
            assert!(parse_dns(&m).is_none(), "{bad:?}");
        }
        let long = format!("{}.example", vec!["a".repeat(63); 4].join("."));
        assert!(long.len() > 253);
        assert!(parse_dns(&dns(&wire_name(&long), std::slice::from_ref(&a))).is_none());
        let mut label64 = vec![64];
        label64.extend([b'a'; 64]);
        label64.push(0);
        assert!(parse_dns(&dns(&label64, &[a])).is_none());
    }

    #[test]
    fn dns_records_other_than_a_and_aaaa_in_are_skipped_and_the_walk_is_bounded() {
        let q = wire_name("a.example");
        let mut chaos = record(&[0xc0, 12], TYPE_A, 60, &[192, 0, 2, 1]);
        chaos[4] = 3; // CLASS CH
        let short_a = record(&[0xc0, 12], TYPE_A, 60, &[192, 0, 2, 2, 0]);
        let zero = record(&[0xc0, 12], TYPE_A, 0, &[192, 0, 2, 3]);
        let ok = record(&[0xc0, 12], TYPE_A, 7, &[192, 0, 2, 4]);
        let got = parse_dns(&dns(&q, &[chaos, short_a, zero, ok.clone()])).unwrap();
        // TTL 0 is reported as sent: the learner does not use it.
        assert_eq!(
            got.addrs,
            vec![
                (IpAddr::from([192, 0, 2, 3]), 0),
                (IpAddr::from([192, 0, 2, 4]), 7)
            ]
        );
        // Only APP_DNS_ANSWERS records are read.
        let many: Vec<Vec<u8>> = (0..10)
            .map(|i| record(&[0xc0, 12], TYPE_A, 9, &[192, 0, 2, i]))
            .collect();
        let got = parse_dns(&dns(&q, &many)).unwrap();
        assert_eq!(got.addrs.len(), abi::APP_DNS_ANSWERS as usize);
        // ANCOUNT bounds the walk too.
        let mut m = dns(&q, &many);
        m[7] = 2;
        assert_eq!(parse_dns(&m).unwrap().addrs.len(), 2);
        // An owner name of 16 labels then a pointer parses; 17 labels end the walk.
        let owner = |n: usize| {
            let mut o = [1, b'x'].repeat(n);
            o.extend([0xc0, 12]);
            o
        };
        let sixteen = record(&owner(16), TYPE_A, 9, &[192, 0, 2, 16]);
        let seventeen = record(&owner(17), TYPE_A, 9, &[192, 0, 2, 17]);
        let got = parse_dns(&dns(&q, &[sixteen, seventeen, ok])).unwrap();
        assert_eq!(got.addrs, vec![(IpAddr::from([192, 0, 2, 16]), 9)]);
        // A reserved label type (0x40) in an owner name ends the walk.
        let bad = record(&[0x41, b'x', 0], TYPE_A, 9, &[192, 0, 2, 1]);
        assert!(parse_dns(&dns(&q, &[bad])).unwrap().addrs.is_empty());
    }

    // -- TLS ----------------------------------------------------------------------------

    fn sni_ext(name: &[u8]) -> (u16, Vec<u8>) {
        let mut d = ((name.len() + 3) as u16).to_be_bytes().to_vec();
        d.push(0);
        d.extend((name.len() as u16).to_be_bytes());
        d.extend_from_slice(name);
        (0, d)
    }

    fn client_hello(exts: &[(u16, Vec<u8>)]) -> Vec<u8> {
        let mut body = vec![0x03, 0x03];
        body.extend([7; 32]);
        body.push(32);
        body.extend([1; 32]);
        body.extend([0, 4, 0x13, 0x01, 0x13, 0x02]);
        body.extend([1, 0]);
        let mut e = Vec::new();
        for (ty, data) in exts {
            e.extend(ty.to_be_bytes());
            e.extend((data.len() as u16).to_be_bytes());
            e.extend(data);
        }
        body.extend((e.len() as u16).to_be_bytes());
        body.extend(e);
        let mut hs = vec![0x01, 0];
        hs.extend((body.len() as u16).to_be_bytes());
        hs.extend(body);
        let mut rec = vec![0x16, 0x03, 0x01];
        rec.extend((hs.len() as u16).to_be_bytes());
        rec.extend(hs);
        rec
    }

    fn usual_extensions(name: &[u8]) -> Vec<(u16, Vec<u8>)> {
        vec![
            (0xff01, vec![0]),                // renegotiation_info
            (10, vec![0, 4, 0, 29, 0, 23]),   // supported_groups
            (16, b"\x00\x03\x02h2".to_vec()), // ALPN
            (43, vec![2, 3, 4]),              // supported_versions
            sni_ext(name),
            (45, vec![1, 1]), // psk_key_exchange_modes
        ]
    }

    #[test]
    fn sni_after_several_extensions() {
        let ch = client_hello(&usual_extensions(b"WWW.Chat.Example"));
        assert_eq!(parse_sni(&ch).as_deref(), Some("www.chat.example"));
        // The record and handshake lengths are not read: a ClientHello cut after its
        // server_name, with the extensions' length cut to match, still gives it.
        let mut exts = usual_extensions(b"a.example");
        exts.truncate(5);
        assert_eq!(
            parse_sni(&client_hello(&exts)).as_deref(),
            Some("a.example")
        );
        // No server_name: none.
        let mut exts = usual_extensions(b"a.example");
        exts.remove(4);
        assert_eq!(parse_sni(&client_hello(&exts)), None);
    }

    #[test]
    fn sni_truncated_or_malformed_gives_no_name() {
        let ch = client_hello(&usual_extensions(b"www.chat.example"));
        // The last extension (psk_key_exchange_modes, 6 octets) follows server_name:
        // cut there, the server_name is still inside the packet.
        for cut in 0..ch.len() {
            let want = (cut >= ch.len() - 6).then_some("www.chat.example");
            assert_eq!(parse_sni(&ch[..cut]).as_deref(), want, "cut {cut}");
        }
        let with = |i: usize, v: u8| {
            let mut m = ch.clone();
            m[i] = v;
            m
        };
        assert_eq!(parse_sni(&with(0, 0x17)), None, "not a handshake");
        assert_eq!(parse_sni(&with(1, 0x02)), None, "not TLS");
        assert_eq!(parse_sni(&with(5, 0x02)), None, "a ServerHello");
        assert_eq!(parse_sni(&with(43, 33)), None, "session ID over 32");
        // The name outside its extension's data: none.
        let (ty, mut data) = sni_ext(b"www.chat.example");
        data.pop();
        assert_eq!(parse_sni(&client_hello(&[(ty, data)])), None);
        // A first entry that is not a host_name.
        let (ty, mut data) = sni_ext(b"www.chat.example");
        data[2] = 1;
        assert_eq!(parse_sni(&client_hello(&[(ty, data)])), None);
        // Names that are not host names.
        for bad in [&b""[..], b"a..b", b"a.b.", b"a b", b"caf\xc3\xa9"] {
            assert_eq!(parse_sni(&client_hello(&[sni_ext(bad)])), None, "{bad:?}");
        }
        // An extension running past the extensions' length ends the walk (server_name
        // is followed by 6 octets of psk_key_exchange_modes).
        let mut m = ch.clone();
        let ext_len_at = 43 + 1 + 32 + 2 + 4 + 1 + 1;
        let l = u16::from_be_bytes([m[ext_len_at], m[ext_len_at + 1]]);
        m[ext_len_at..ext_len_at + 2].copy_from_slice(&(l - 6).to_be_bytes());
        assert_eq!(parse_sni(&m).as_deref(), Some("www.chat.example"));
        m[ext_len_at..ext_len_at + 2].copy_from_slice(&(l - 7).to_be_bytes());
        assert_eq!(parse_sni(&m), None);
        m[ext_len_at..ext_len_at + 2].copy_from_slice(&l.to_be_bytes());
        assert_eq!(parse_sni(&m).as_deref(), Some("www.chat.example"));
    }

    #[test]
    fn sni_among_the_first_32_extensions_only() {
        let pad = |n: usize| -> Vec<(u16, Vec<u8>)> {
            (0..n).map(|i| (100 + i as u16, vec![])).collect()
        };
        let mut exts = pad(31);
        exts.push(sni_ext(b"a.example"));
        assert_eq!(
            parse_sni(&client_hello(&exts)).as_deref(),
            Some("a.example")
        );
        let mut exts = pad(32);
        exts.push(sni_ext(b"a.example"));
        assert_eq!(parse_sni(&client_hello(&exts)), None);
    }

    // -- HTTP ---------------------------------------------------------------------------

    #[test]
    fn http_host_in_odd_case_with_a_port() {
        let r = parse_http(
            b"GET /v/a.mp4?x=1 HTTP/1.1\r\nUser-Agent: t\r\nhOsT: \t Video.Example:8080\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.host, "video.example");
        assert_eq!(r.target, b"/v/a.mp4?x=1");
        assert_eq!(r.url_key(), b"video.example/v/a.mp4?x=1");
        let r = parse_http(b"OPTIONS / HTTP/1.0\nHost:a.example\n\n").unwrap();
        assert_eq!((r.host.as_str(), &r.target[..]), ("a.example", &b"/"[..]));
    }

    #[test]
    fn http_malformed_or_truncated_gives_nothing() {
        let good = b"POST /up HTTP/1.1\r\nHost: a.example\r\n\r\nbody";
        assert!(parse_http(good).is_some());
        for cut in 0..good.len() {
            let r = parse_http(&good[..cut]);
            // The Host's value must end (CR) inside the packet.
            let cr = "POST /up HTTP/1.1\r\nHost: a.example".len();
            assert_eq!(r.is_some(), cut > cr, "cut {cut}");
        }
        for bad in [
            &b"get / HTTP/1.1\r\nHost: a.example\r\n"[..], // lower-case method
            b"CONNECTS / HTTP/1.1\r\nHost: a.example\r\n", // 8 letters
            b" / HTTP/1.1\r\nHost: a.example\r\n",         // no method
            b"GET http://a.example/ HTTP/1.1\r\nHost: a.example\r\n", // absolute form
            b"GET / HTTP/2\r\nHost: a.example\r\n",
            b"GET / HTTP/1.1\r\nX-Host: a.example\r\n",
            b"GET / HTTP/1.1\r\nHost: a..example\r\n",
            b"GET / HTTP/1.1\r\nHost: \r\n",
            b"GET / HTTP/1.1\r\nHost: :80\r\n",
            b"GET / HTTP/1.1\r\n\r\nHost: a.example\r\n", // after the headers
            b"GET / HTTP/1.1\r\nHost : a.example\r\n",
        ] {
            assert_eq!(parse_http(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn http_host_within_the_first_512_octets_and_the_key_cut_at_255() {
        let req = |pad: usize| {
            let mut r = format!(
                "GET / HTTP/1.1\r\nX: {}\r\nHost: a.example\r\n",
                "y".repeat(pad)
            );
            r.push_str("\r\n");
            r.into_bytes()
        };
        let fits = 512 - "GET / HTTP/1.1\r\nX: \r\nHost: a.example\r".len();
        assert!(parse_http(&req(fits)).is_some());
        assert!(parse_http(&req(fits + 1)).is_none());
        let target = format!("/{}", "p".repeat(400));
        let r =
            parse_http(format!("GET {target} HTTP/1.1\r\nHost: a.example\r\n").as_bytes()).unwrap();
        let key = r.url_key();
        assert_eq!(key.len(), 255);
        assert!(key.starts_with(b"a.example/ppp"));
    }

    // -- Lookups ------------------------------------------------------------------------

    /// An application: its ID, domains (with their Domain Name Protocol), URLs, flow
    /// descriptions.
    type AppSpec<'a> = (
        &'a str,
        &'a [(&'a str, Option<&'a str>)],
        &'a [&'a str],
        &'a [&'a str],
    );

    fn table(apps: &[AppSpec<'_>]) -> PfdTable {
        let mut t = PfdTable::new();
        for (id, domains, urls, flows) in apps {
            let mut p = AppPfds::default();
            for (d, proto) in *domains {
                p.add_domain(d, *proto).unwrap();
            }
            for u in *urls {
                p.add_url(u).unwrap();
            }
            for f in *flows {
                p.add_flow(f).unwrap();
            }
            t.set(id, p, true).unwrap();
        }
        t
    }

    #[test]
    fn the_longest_domain_decides_then_the_protocol() {
        let t = table(&[
            ("a", &[("example.com", None)], &[], &[]),
            ("b", &[("video.example.com", Some("TLS_SNI"))], &[], &[]),
            ("c", &[("video.example.com", Some("TLS_SNI"))], &[], &[]),
            ("d", &[("san.example.com", Some("TLS_SAN"))], &[], &[]),
        ]);
        let (a, b) = (Some(1), Some(2));
        assert_eq!(name_app(&t, "example.com", abi::APP_P_DNS), a);
        assert_eq!(name_app(&t, "www.example.com", abi::APP_P_HOST), a);
        // Two applications list the same domain for SNI: the lowest index.
        assert_eq!(name_app(&t, "cdn.video.example.com", abi::APP_P_SNI), b);
        assert_eq!(name_app(&t, "video.example.com", abi::APP_P_SNI), b);
        // The longest domain lists no application for DNS: none, example.com is not tried.
        assert_eq!(name_app(&t, "cdn.video.example.com", abi::APP_P_DNS), None);
        // A domain that detects nothing (TLS_SAN) still is the longest.
        assert_eq!(name_app(&t, "x.san.example.com", abi::APP_P_SNI), None);
        // Suffixes only on a label boundary.
        assert_eq!(name_app(&t, "badexample.com", abi::APP_P_DNS), None);
        assert_eq!(name_app(&t, "xvideo.example.com", abi::APP_P_SNI), a);
        assert_eq!(name_app(&t, "xvideo.example.com", abi::APP_P_HOST), a);
        assert_eq!(name_app(&t, "com", abi::APP_P_DNS), None);
    }

    #[test]
    fn the_longest_url_decides_else_the_host() {
        let t = table(&[
            (
                "a",
                &[("shop.example", None)],
                &["http://shop.example/"],
                &[],
            ),
            ("b", &[], &["http://Shop.example:8080/cart"], &[]),
            ("c", &[], &["http://shop.example/cart"], &[]),
            (
                "d",
                &[("video.example", Some("DNS_QNAME"))],
                &["https://video.example/x"],
                &[],
            ),
        ]);
        assert_eq!(url_app(&t, b"shop.example/cart/1"), Some(2));
        assert_eq!(url_app(&t, b"shop.example/car"), Some(1));
        assert_eq!(url_app(&t, b"shop.examples/cart"), None);
        let get = |req: &str| payload_app(&t, req.as_bytes());
        assert_eq!(
            get("GET /cart HTTP/1.1\r\nHost: SHOP.example:80\r\n\r\n"),
            Some(2)
        );
        assert_eq!(
            get("GET /Cart HTTP/1.1\r\nHost: shop.example\r\n\r\n"),
            Some(1)
        );
        // No URL for the host: the Host's application (protocol HTTP Host).
        assert_eq!(
            get("GET / HTTP/1.1\r\nHost: img.shop.example\r\n\r\n"),
            Some(1)
        );
        // https:// URLs are SNI names, not HTTP Hosts; DNS_QNAME is not for Hosts.
        assert_eq!(get("GET /x HTTP/1.1\r\nHost: video.example\r\n\r\n"), None);
        let ch = client_hello(&usual_extensions(b"video.example"));
        assert_eq!(payload_app(&t, &ch), Some(4));
    }

    #[test]
    fn parsers_never_panic_on_mutated_input() {
        let samples = [
            cname_then_addresses(),
            client_hello(&usual_extensions(b"www.chat.example")),
            b"GET /a HTTP/1.1\r\nHost: a.example:1\r\n\r\n".to_vec(),
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for s in &samples {
            for _ in 0..3000 {
                let mut m = s.clone();
                for _ in 0..1 + next() % 4 {
                    let i = (next() % m.len() as u64) as usize;
                    m[i] = next() as u8;
                }
                let cut = (next() % (m.len() as u64 + 1)) as usize;
                let m = &m[..cut];
                let _ = (parse_dns(m), parse_sni(m), parse_http(m));
            }
        }
    }

    // -- The model ----------------------------------------------------------------------

    const N3: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 7);
    const GNB: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 1);
    const UE: Ipv4Addr = Ipv4Addr::new(10, 45, 0, 2);
    const RESOLVER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
    const CDN: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 10);
    const CHAT: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 20);
    const TEID: u32 = 0x100;
    const SEID: u64 = 7;
    const SEC: u64 = NSEC_PER_SEC;
    // URRs: one per application PDR pair, one for the default PDRs.
    const URR_A: u32 = 1;
    const URR_B: u32 = 2;
    const URR_DEFAULT: u32 = 3;

    fn config() -> Config {
        let mut c = Config {
            local: vec![IpAddr::V4(N3)],
            n3_v4: Some(N3),
            ..Default::default()
        };
        let out = |ifindex| Egress {
            ifindex,
            mtu: 1500,
            smac: [2, 0, 0, 0, 0, 1],
            dmac: [2, 0, 0, 0, 0, 2],
        };
        c.neigh.insert(IpAddr::V4(GNB), out(3));
        c.neigh.insert(IpAddr::V4(Ipv4Addr::UNSPECIFIED), out(6));
        c
    }

    fn pfds() -> PfdTable {
        table(&[
            ("A", &[("video.example", None)], &[], &[]),
            (
                "B",
                &[("chat.example", Some("TLS_SNI"))],
                &[],
                &["permit out 17 from 198.51.100.9 to assigned"],
            ),
        ])
    }

    fn urr(id: u32, start: bool) -> Urr {
        let triggers = if start {
            vec![reporting_triggers::START]
        } else {
            vec![]
        };
        Urr {
            id,
            rule: UrrRule {
                measurement_method: Flags::from_bits(&[2], 1),
                reporting_triggers: Flags::from_bits(&triggers, 3),
                measurement_period: None,
                volume_threshold: None,
                volume_quota: None,
                time_threshold: None,
                time_quota: None,
                quota_holding_time: None,
                inactivity_detection_time: None,
                linked_urr_ids: vec![],
                far_id_for_quota_action: None,
            },
        }
    }

    /// A session with, each way, a PDR for application A (precedence 10), one for B
    /// (20) and a default PDR (100); URR_A counts A, URR_B counts B (with trigger START
    /// if `start`), URR_DEFAULT the rest. `extra` is one more uplink PDR (precedence 5).
    fn session(start: bool, extra: Option<&str>) -> Arc<Session> {
        let mut s = Session::new(
            SEID,
            FSeid {
                spare: 0,
                seid: SEID,
                ipv4: Some(Ipv4Addr::LOCALHOST),
                ipv6: None,
            },
            NodeId::Ipv4(Ipv4Addr::LOCALHOST),
        );
        let far = |id, dest, ohc| Far {
            id,
            action: ApplyAction {
                forw: true,
                ..Default::default()
            },
            forwarding: Some(Forwarding {
                destination_interface: dest,
                outer_header_creation: ohc,
                ..Default::default()
            }),
            bar_id: None,
        };
        s.fars.insert(1, far(1, interface::CORE, None));
        let to_gnb = OuterHeaderCreation::gtpu_ipv4(0x200, GNB);
        s.fars.insert(2, far(2, interface::ACCESS, Some(to_gnb)));
        s.urrs.insert(URR_A, urr(URR_A, false));
        s.urrs.insert(URR_B, urr(URR_B, start));
        s.urrs.insert(URR_DEFAULT, urr(URR_DEFAULT, false));
        let ue = UeIp {
            ipv4: Some(UE),
            ..Default::default()
        };
        let mut rules = vec![
            (1, 10, Some("A"), URR_A),
            (2, 20, Some("B"), URR_B),
            (3, 100, None, URR_DEFAULT),
        ];
        if let Some(app) = extra {
            rules.push((4, 5, Some(app), URR_DEFAULT));
        }
        for (id, precedence, app, urr) in rules {
            let up = Pdi {
                source_interface: interface::ACCESS,
                local_fteid: Some(LocalFteid {
                    teid: TEID,
                    ipv4: Some(N3),
                    ipv6: None,
                }),
                ue_ips: thin_vec![ue],
                application_id: app.map(str::to_string),
                ..Default::default()
            };
            let down = Pdi {
                source_interface: interface::CORE,
                ue_ips: thin_vec![UeIp {
                    is_destination: true,
                    ..ue
                }],
                application_id: app.map(str::to_string),
                ..Default::default()
            };
            let ohr = OuterHeaderRemoval {
                description: 0,
                ext_header_deletion: None,
            };
            for (pdr_id, pdi, far_id, ohr) in [(id, up, 1, Some(ohr)), (id + 10, down, 2, None)] {
                if id == 4 && far_id == 2 {
                    continue;
                }
                s.pdrs.insert(
                    pdr_id,
                    Pdr {
                        id: pdr_id,
                        precedence,
                        pdi,
                        outer_header_removal: ohr,
                        far_id: Some(far_id),
                        urr_ids: smallvec![urr],
                        qer_ids: smallvec![],
                        activation_time: None,
                        deactivation_time: None,
                    },
                );
            }
        }
        Arc::new(s)
    }

    fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, l4: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45, 0];
        p.extend(((20 + l4.len()) as u16).to_be_bytes());
        p.extend([0, 0, 0x40, 0, 64, proto, 0, 0]);
        p.extend(src.octets());
        p.extend(dst.octets());
        p.extend_from_slice(l4);
        p
    }

    fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut u = sport.to_be_bytes().to_vec();
        u.extend(dport.to_be_bytes());
        u.extend(((8 + payload.len()) as u16).to_be_bytes());
        u.extend([0, 0]);
        u.extend_from_slice(payload);
        u
    }

    fn tcp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut t = sport.to_be_bytes().to_vec();
        t.extend(dport.to_be_bytes());
        t.extend([0, 0, 0, 1, 0, 0, 0, 1]);
        // Data offset 8 (12 octets of options), ACK PSH.
        t.extend([0x80, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        t.extend([1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        t.extend_from_slice(payload);
        t
    }

    fn eth(ip: &[u8]) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 8, 0x08, 0x00];
        f.extend_from_slice(ip);
        f
    }

    /// The IP packet `ip` from the UE in a G-PDU to our TEID.
    fn gpdu(ip: &[u8]) -> Vec<u8> {
        let mut g = vec![0x30, 0xff];
        g.extend((ip.len() as u16).to_be_bytes());
        g.extend(TEID.to_be_bytes());
        g.extend_from_slice(ip);
        eth(&ipv4(GNB, N3, 17, &udp(2152, 2152, &g)))
    }

    fn up(m: &mut Model, remote: Ipv4Addr, proto_l4: (u8, Vec<u8>), now: u64) -> Verdict {
        m.process_n3(&gpdu(&ipv4(UE, remote, proto_l4.0, &proto_l4.1)), now)
    }

    fn down(m: &mut Model, remote: Ipv4Addr, proto_l4: (u8, Vec<u8>), now: u64) -> Verdict {
        m.process_n6(&eth(&ipv4(remote, UE, proto_l4.0, &proto_l4.1)), now)
    }

    /// Which URR counted since `before`, and which way.
    fn counted(m: &Model, before: &[Usage]) -> (u32, bool) {
        let now: Vec<Usage> = [URR_A, URR_B, URR_DEFAULT]
            .iter()
            .map(|u| m.usage(SEID, *u))
            .collect();
        let i = (0..3)
            .find(|i| now[*i] != before[*i])
            .expect("a URR counted");
        (
            [URR_A, URR_B, URR_DEFAULT][i],
            now[i].ul_packets != before[i].ul_packets,
        )
    }

    fn usages(m: &Model) -> Vec<Usage> {
        [URR_A, URR_B, URR_DEFAULT]
            .iter()
            .map(|u| m.usage(SEID, *u))
            .collect()
    }

    /// Send one packet; which URR (so which PDR) counted it.
    fn through(m: &mut Model, f: impl FnOnce(&mut Model) -> Verdict) -> u32 {
        let before = usages(m);
        let v = f(m);
        assert!(matches!(v, Verdict::Redirect { .. }), "{v:?}");
        counted(m, &before).0
    }

    use crate::fastpath::Usage;

    fn model(start: bool, extra: Option<&str>) -> Model {
        let mut m = Model::new(64, config());
        m.set_pfds(&Arc::new(pfds()), &[]).unwrap();
        m.install(None, &session(start, extra)).unwrap();
        m
    }

    fn dns_answer(qname: &str, addr: Ipv4Addr, ttl: u32) -> (u8, Vec<u8>) {
        let cname = record(&[0xc0, 12], 5, 300, &wire_name("edge.cdn.net"));
        let a = record(&[0xc0, 12], TYPE_A, ttl, &addr.octets());
        (17, udp(53, 40000, &dns(&wire_name(qname), &[cname, a])))
    }

    #[test]
    fn a_learned_dns_answer_classifies_the_uplink_to_its_address() {
        let mut m = model(false, None);
        let t0 = 1000 * SEC;
        // Before the answer: the default PDR.
        let udp443 = (17, udp(40001, 443, b"quic"));
        assert_eq!(
            through(&mut m, |m| up(m, CDN, udp443.clone(), t0)),
            URR_DEFAULT
        );
        // The answer itself is the resolver's traffic (default PDR), and teaches CDN.
        let answer = dns_answer("WWW.video.example", CDN, 30);
        assert_eq!(
            through(&mut m, |m| down(m, RESOLVER, answer.clone(), t0)),
            URR_DEFAULT
        );
        assert_eq!(m.learned_app(IpAddr::V4(CDN), t0), Some(1));
        // A new flow to CDN: A, both ways, and entered in the flow table.
        let flow2 = (17, udp(40002, 443, b"quic"));
        assert_eq!(through(&mut m, |m| up(m, CDN, flow2, t0 + SEC)), URR_A);
        let back = (17, udp(443, 40002, b"back"));
        assert_eq!(
            through(&mut m, |m| down(m, CDN, back.clone(), t0 + SEC)),
            URR_A
        );
        // The flow that had passed unclassified is classified now too (the address).
        assert_eq!(
            through(&mut m, |m| up(m, CDN, udp443.clone(), t0 + SEC)),
            URR_A
        );
        let flow = AppFlow {
            protocol: 17,
            ue: IpAddr::V4(UE),
            ue_port: 40002,
            remote: IpAddr::V4(CDN),
            remote_port: 443,
        };
        assert_eq!(m.flow_app(SEID, &flow), Some(1));
        // After the TTL (30 s) the address no longer classifies new flows; the flow
        // entered keeps A while it has packets.
        let t1 = t0 + 31 * SEC;
        assert_eq!(m.learned_app(IpAddr::V4(CDN), t1), None);
        let flow3 = (17, udp(40003, 443, b"quic"));
        assert_eq!(through(&mut m, |m| up(m, CDN, flow3, t1)), URR_DEFAULT);
        assert_eq!(through(&mut m, |m| down(m, CDN, back.clone(), t1)), URR_A);
        // Idle for APP_FLOW_IDLE_SEC: the entry no longer classifies.
        let t2 = t1 + u64::from(abi::APP_FLOW_IDLE_SEC) * SEC;
        assert_eq!(m.app_flow_idle(SEID, &flow), Some(Duration::ZERO));
        up(&mut m, CDN, (17, udp(40009, 443, b"q")), t1 + 5 * SEC);
        assert_eq!(m.app_flow_idle(SEID, &flow), Some(Duration::from_secs(5)));
        assert_eq!(
            through(&mut m, |m| down(m, CDN, back.clone(), t2)),
            URR_DEFAULT
        );
        assert_eq!(m.app_flow_idle(SEID, &flow), None);
        // TTL 0 teaches nothing; no event without a START trigger.
        down(&mut m, RESOLVER, dns_answer("video.example", CHAT, 0), t2);
        assert_eq!(m.learned_app(IpAddr::V4(CHAT), t2), None);
        assert!(m.take_app_events().is_empty());
    }

    #[test]
    fn an_sni_classifies_its_flow_both_ways_and_reports_its_start() {
        let mut m = model(true, None);
        let t0 = 50 * SEC;
        let hello = (
            6,
            tcp(
                50000,
                443,
                &client_hello(&usual_extensions(b"web.chat.example")),
            ),
        );
        assert_eq!(through(&mut m, |m| up(m, CHAT, hello.clone(), t0)), URR_B);
        // Later packets without payload, both ways.
        let ack = (6, tcp(50000, 443, b""));
        assert_eq!(through(&mut m, |m| up(m, CHAT, ack.clone(), t0 + 1)), URR_B);
        let data = (6, tcp(443, 50000, b"server data"));
        assert_eq!(
            through(&mut m, |m| down(m, CHAT, data.clone(), t0 + 2)),
            URR_B
        );
        // Another flow to the same server without a ClientHello: not B.
        let other = (6, tcp(50001, 443, b""));
        assert_eq!(through(&mut m, |m| up(m, CHAT, other, t0 + 3)), URR_DEFAULT);
        // One event, for the new flow only.
        let flow = AppFlow {
            protocol: 6,
            ue: IpAddr::V4(UE),
            ue_port: 50000,
            remote: IpAddr::V4(CHAT),
            remote_port: 443,
        };
        assert_eq!(
            m.take_app_events(),
            vec![Event::AppStart {
                seid: SEID,
                app: "B".into(),
                flow
            }]
        );
        // The flow's time is refreshed once it is a second old.
        // (by the model's clock: the latest packet's time, t0 + 3)
        assert_eq!(m.app_flow_idle(SEID, &flow), Some(Duration::from_nanos(3)));
        up(&mut m, CHAT, ack.clone(), t0 + 2 * SEC);
        up(&mut m, CHAT, ack.clone(), t0 + 2 * SEC + 500);
        assert_eq!(
            m.app_flow_idle(SEID, &flow),
            Some(Duration::from_nanos(500))
        );
        // B's flow description classifies without a flow entry.
        let fd = (17, udp(40000, 5000, b"x"));
        assert_eq!(
            through(&mut m, |m| up(m, Ipv4Addr::new(198, 51, 100, 9), fd, t0)),
            URR_B
        );
        assert!(m.take_app_events().is_empty());
        // SNI for a domain listed for SNI only: an HTTP Host of it is not B.
        let http = (
            6,
            tcp(50002, 80, b"GET / HTTP/1.1\r\nHost: chat.example\r\n\r\n"),
        );
        assert_eq!(through(&mut m, |m| up(m, CHAT, http, t0)), URR_DEFAULT);
        // A removed session's flows go with it.
        m.remove(&session(true, None));
        assert_eq!(m.app_flow_idle(SEID, &flow), None);
    }

    #[test]
    fn changed_pfds_apply_to_new_flows_only() {
        let mut m = model(false, None);
        let t0 = 10 * SEC;
        down(&mut m, RESOLVER, dns_answer("video.example", CDN, 600), t0);
        let old_a = (17, udp(40010, 443, b"x"));
        assert_eq!(through(&mut m, |m| up(m, CDN, old_a.clone(), t0)), URR_A);
        let hello = |port| {
            (
                6,
                tcp(port, 443, &client_hello(&usual_extensions(b"chat.example"))),
            )
        };
        assert_eq!(through(&mut m, |m| up(m, CHAT, hello(50010), t0)), URR_B);
        // A's and B's PFDs change: A moves to another domain, B loses its SNI domain.
        let mut next = pfds();
        let mut a = AppPfds::default();
        a.add_domain("movies.example", None).unwrap();
        next.set("A", a, true).unwrap();
        let mut b = next.get("B").unwrap().pfds.clone();
        b.domains.clear();
        next.set("B", b, true).unwrap();
        m.set_pfds(&Arc::new(next), &["A".into(), "B".into()])
            .unwrap();
        // What A learned is forgotten; the flows already classified keep their
        // application.
        assert_eq!(m.learned_app(IpAddr::V4(CDN), t0), None);
        let t1 = t0 + SEC;
        assert_eq!(through(&mut m, |m| up(m, CDN, old_a.clone(), t1)), URR_A);
        assert_eq!(
            through(&mut m, |m| up(m, CHAT, (6, tcp(50010, 443, b"")), t1)),
            URR_B
        );
        // New flows follow the new PFDs.
        assert_eq!(
            through(&mut m, |m| up(m, CDN, (17, udp(40011, 443, b"x")), t1)),
            URR_DEFAULT
        );
        assert_eq!(
            through(&mut m, |m| up(m, CHAT, hello(50011), t1)),
            URR_DEFAULT
        );
        down(
            &mut m,
            RESOLVER,
            dns_answer("www.movies.example", CDN, 600),
            t1,
        );
        assert_eq!(
            through(&mut m, |m| up(m, CDN, (17, udp(40012, 443, b"x")), t1)),
            URR_A
        );
    }

    #[test]
    fn an_unknown_application_matches_nothing_and_plain_sessions_learn_nothing() {
        // PDR 4 (precedence 5) names an application the table does not know.
        let mut m = model(false, Some("Z"));
        let t0 = SEC;
        let hello = (
            6,
            tcp(
                50000,
                443,
                &client_hello(&usual_extensions(b"chat.example")),
            ),
        );
        assert_eq!(through(&mut m, |m| up(m, CHAT, hello, t0)), URR_B);
        // A session without application PDRs: no classification, nothing learned.
        let mut plain = Model::new(64, config());
        plain.set_pfds(&Arc::new(pfds()), &[]).unwrap();
        let mut s = (*session(false, None)).clone();
        for p in s.pdrs.values_mut() {
            p.pdi.application_id = None;
        }
        plain.install(None, &Arc::new(s)).unwrap();
        down(
            &mut plain,
            RESOLVER,
            dns_answer("video.example", CDN, 600),
            t0,
        );
        assert_eq!(plain.learned_app(IpAddr::V4(CDN), t0), None);
    }
}
