//! The reference pipeline: what the XDP programs (bpf/upf.bpf.c) do to a frame, written
//! for clarity over the session model. Given the installed sessions and an Ethernet frame
//! arriving on N3/N9 (GTP-U) or N6 (IP), it returns the verdict and the output frame.
//!
//! The XDP programs are tested against this (crates/bpf/tests/differential.rs): the same
//! sessions and frames must give the same verdicts, octets and counters. Where the two
//! must agree on a detail (the order of checks, which header fields are rewritten, how the
//! MBR's GCRA rounds), this file is the specification.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::rules::{interface, Far, Pdr, Qer, Session};
use crate::sdf::{Direction, PacketFields, SdfRule};

use super::model::Model;
use super::Usage;

/// Why a packet was dropped; the numbering is the data path's `enum drop_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum DropReason {
    UnknownTeid = 0,
    NoPdr,
    GateClosed,
    Mbr,
    SpoofedSource,
    MalformedGtpu,
    MalformedIp,
    Mtu,
    BufferFull,
    QuotaExhausted,
    FarDrop,
    TtlExceeded,
    NoRoute,
    Unsupported,
    SlowpathLimit,
}

impl DropReason {
    pub const ALL: [DropReason; 15] = [
        DropReason::UnknownTeid,
        DropReason::NoPdr,
        DropReason::GateClosed,
        DropReason::Mbr,
        DropReason::SpoofedSource,
        DropReason::MalformedGtpu,
        DropReason::MalformedIp,
        DropReason::Mtu,
        DropReason::BufferFull,
        DropReason::QuotaExhausted,
        DropReason::FarDrop,
        DropReason::TtlExceeded,
        DropReason::NoRoute,
        DropReason::Unsupported,
        DropReason::SlowpathLimit,
    ];

    /// The name operators see in metrics (`reason` label).
    pub fn name(self) -> &'static str {
        match self {
            DropReason::UnknownTeid => "unknown_teid",
            DropReason::NoPdr => "no_pdr",
            DropReason::GateClosed => "gate_closed",
            DropReason::Mbr => "mbr_exceeded",
            DropReason::SpoofedSource => "spoofed_source",
            DropReason::MalformedGtpu => "malformed_gtpu",
            DropReason::MalformedIp => "malformed_ip",
            DropReason::Mtu => "mtu_exceeded",
            DropReason::BufferFull => "buffer_full",
            DropReason::QuotaExhausted => "quota_exhausted",
            DropReason::FarDrop => "far_drop",
            DropReason::TtlExceeded => "ttl_exceeded",
            DropReason::NoRoute => "no_route",
            DropReason::Unsupported => "unsupported",
            DropReason::SlowpathLimit => "slowpath_limit",
        }
    }
}

/// Counters after the drop reasons (`enum stat_index`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum Stat {
    FwdUl = 15,
    FwdDl,
    FwdN9,
    Buffered,
    ToSlowpath,
    Passed,
    IcmpSent,
}

pub const STAT_MAX: usize = 22;

/// What became of a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Drop(DropReason),
    /// Left to the kernel (not for the UPF, or for upfd's sockets).
    Pass,
    /// Sent out of `ifindex` (XDP_REDIRECT, or XDP_TX when it is the ingress).
    Redirect {
        ifindex: u32,
        frame: Vec<u8>,
    },
    /// Handed to upfd for a buffering FAR: the IP packet, and whether to notify (NOCP).
    Buffer {
        seid: u64,
        far_id: u32,
        pdr_id: u32,
        nocp: bool,
        packet: Vec<u8>,
    },
}

/// A configured neighbour: where packets to an address leave (CFG_F_STATIC_NEIGH).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Egress {
    pub ifindex: u32,
    pub mtu: u16,
    pub smac: [u8; 6],
    pub dmac: [u8; 6],
}

/// The data path's configuration (`struct upf_config` and the neigh table).
#[derive(Debug, Clone, Default)]
pub struct PipelineConfig {
    /// Our GTP-U addresses: G-PDUs to others are not ours.
    pub local: Vec<IpAddr>,
    /// Outer source towards the access network (N3) and towards other UPFs (N9; None:
    /// the N3 address), per IP version.
    pub n3_v4: Option<std::net::Ipv4Addr>,
    pub n9_v4: Option<std::net::Ipv4Addr>,
    pub n3_v6: Option<std::net::Ipv6Addr>,
    pub n9_v6: Option<std::net::Ipv6Addr>,
    /// Neighbours by destination; the unspecified address of a family is its default.
    pub neigh: HashMap<IpAddr, Egress>,
    pub slowpath_per_sec: u64,
    pub slowpath_burst: u64,
}

/// MBR, quota and counter state the pipeline keeps beside the sessions.
#[derive(Debug, Clone, Default)]
pub struct PipelineState {
    pub buckets: HashMap<(u64, u32), Buckets>,
    pub quota: HashMap<(u64, u32), i64>,
    /// Volume thresholds armed by upfd (they change no verdict).
    pub threshold: HashMap<(u64, u32), i64>,
    pub stats: [(u64, u64); STAT_MAX],
    /// The slow path's GCRA (unknown TEIDs to upfd).
    pub slowpath_tat: u64,
}

/// A QER's MBR state per direction: the GCRA's theoretical arrival time (ns, 0: idle).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Buckets {
    pub tat_ul: u64,
    pub tat_dl: u64,
}

pub const NSEC_PER_SEC: u64 = 1_000_000_000;
pub const MAX_PDRS_PER_KEY: usize = 8;
pub const MAX_SDF_PER_PDR: usize = 8;
pub const MAX_QERS_PER_PDR: usize = 2;
pub const MAX_URRS_PER_PDR: usize = 4;
pub const EVENT_MAX_PACKET: usize = 2048;
const GTPU_PORT: u16 = 2152;
const GTP_MAX_EXT: usize = 4;

/// bpf/include/upf_maps.h QER_COST_SHIFT.
pub const QER_COST_SHIFT: u32 = 20;

/// A QER's maximum bit rate in the data path's units (bpf/include/qer.h): what one
/// octet adds to the GCRA's theoretical arrival time, in ns x 2^QER_COST_SHIFT, and the
/// burst tolerance in ns. The rate is capped at 100 Gbit/s; the burst is 100 ms of it,
/// at least 3000 octets, at most 1 s. A rate of 0 lets the burst through and then, in
/// effect, nothing (one octet per 2^27 ns).
pub fn qer_gcra(kbps: u64) -> (u64, u64) {
    let rate = (kbps.saturating_mul(1000) / 8).min(12_500_000_000);
    let burst = (rate / 10).max(3000).min(rate.max(3000));
    let cost = (NSEC_PER_SEC << QER_COST_SHIFT)
        .checked_div(rate)
        .map_or(1 << 47, |c| c.min(1 << 47));
    (cost, (burst * cost) >> QER_COST_SHIFT)
}

/// A packet of `bytes` octets against a direction's MBR (bpf/include/qer.h `mbr`).
fn mbr(tat: &mut u64, cost_per_octet: u64, tau: u64, bytes: u32, now: u64) -> bool {
    gcra(
        tat,
        (u64::from(bytes) * cost_per_octet) >> QER_COST_SHIFT,
        tau,
        now,
    )
}

/// One event costing `cost` ns through a GCRA (bpf/include/qer.h `gcra`, one CPU):
/// whether it conforms.
fn gcra(tat: &mut u64, cost: u64, tau: u64, now: u64) -> bool {
    if *tat > now + tau {
        return false;
    }
    *tat = (*tat).max(now) + cost;
    true
}

/// The outer G-PDU as the data path reads it.
#[derive(Debug, Clone, Copy, Default)]
struct Outer {
    family: u8,
    teid: u32,
    inner: usize,
    has_psc: bool,
    qfi: Option<u8>,
    psc_type: u8,
}

enum Gtp {
    Ok(Outer),
    NotOurs,
    SlowPath,
    Malformed,
}

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

/// Ethernet: the family (4, 6) and offset of the IP header; one VLAN tag skipped.
fn parse_eth(f: &[u8]) -> Option<(u8, usize)> {
    if f.len() < 14 {
        return None;
    }
    let mut proto = be16(f, 12);
    let mut off = 14;
    if proto == 0x8100 || proto == 0x88a8 {
        if f.len() < 18 {
            return None;
        }
        proto = be16(f, 16);
        off = 18;
    }
    match proto {
        0x0800 => Some((4, off)),
        0x86dd => Some((6, off)),
        _ => None,
    }
}

fn parse_gtpu(f: &[u8], l3: usize, family: u8, cfg: &PipelineConfig) -> Gtp {
    let udp = if family == 4 {
        if f.len() < l3 + 20 {
            return Gtp::NotOurs;
        }
        let ip = &f[l3..];
        let dst = IpAddr::from([ip[16], ip[17], ip[18], ip[19]]);
        if ip[9] != 17 || !cfg.local.contains(&dst) || dst.is_unspecified() {
            return Gtp::NotOurs;
        }
        if be16(ip, 6) & 0x3fff != 0 {
            return Gtp::NotOurs;
        }
        let ihl = (ip[0] & 0x0f) as usize;
        if ihl < 5 {
            return Gtp::NotOurs;
        }
        l3 + ihl * 4
    } else {
        if f.len() < l3 + 40 {
            return Gtp::NotOurs;
        }
        let ip = &f[l3..];
        let mut a = [0u8; 16];
        a.copy_from_slice(&ip[24..40]);
        let dst = IpAddr::from(a);
        if ip[6] != 17 || !cfg.local.contains(&dst) || dst.is_unspecified() {
            return Gtp::NotOurs;
        }
        l3 + 40
    };
    if f.len() < udp + 8 || be16(f, udp + 2) != GTPU_PORT {
        return Gtp::NotOurs;
    }
    let g = udp + 8;
    if f.len() < g + 8 {
        return Gtp::Malformed;
    }
    if f[g] & 0xf0 != 0x30 || f[g + 1] != 255 {
        return Gtp::SlowPath;
    }
    let mut o = Outer {
        family,
        teid: u32::from_be_bytes([f[g + 4], f[g + 5], f[g + 6], f[g + 7]]),
        ..Outer::default()
    };
    let mut off = g + 8;
    if f[g] & 0x07 != 0 {
        if f.len() < g + 12 {
            return Gtp::Malformed;
        }
        off += 4;
        let mut next = if f[g] & 0x04 != 0 { f[g + 11] } else { 0 };
        let mut i = 0;
        while i < GTP_MAX_EXT && next != 0 {
            if f.len() < off + 1 {
                return Gtp::Malformed;
            }
            let elen = f[off] as usize * 4;
            if elen == 0 {
                return Gtp::Malformed;
            }
            if next == 0x85 {
                if f.len() < off + 4 {
                    return Gtp::Malformed;
                }
                o.has_psc = true;
                o.psc_type = f[off + 1] >> 4;
                o.qfi = Some(f[off + 2] & 0x3f);
            } else if next & 0x80 != 0 {
                return Gtp::SlowPath;
            }
            if f.len() < off + elen {
                return Gtp::Malformed;
            }
            next = f[off + elen - 1];
            off += elen;
            i += 1;
        }
        if next != 0 {
            return Gtp::Malformed;
        }
    }
    o.inner = off;
    Gtp::Ok(o)
}

/// The inner packet's length if it is a well-formed IPv4/IPv6 packet within `f[off..]`
/// (header lengths, total length within the frame, no jumbogram), and its fields.
fn parse_inner(f: &[u8], off: usize) -> Option<(usize, PacketFields)> {
    let b = f.get(off..)?;
    let len = match b.first()? >> 4 {
        4 => {
            if b.len() < 20 {
                return None;
            }
            let ihl = (b[0] & 0x0f) as usize * 4;
            let total = be16(b, 2) as usize;
            if ihl < 20 || total < ihl || total > b.len() {
                return None;
            }
            total
        }
        6 => {
            if b.len() < 40 {
                return None;
            }
            let plen = be16(b, 4) as usize;
            if plen == 0 || 40 + plen > b.len() {
                return None;
            }
            40 + plen
        }
        _ => return None,
    };
    let fields = PacketFields::from_ip(&b[..len])?;
    Some((len, fields))
}

/// The PDRs one lookup key reaches and the session facts the data path keeps with them
/// (`struct rule_set`).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSet<'a> {
    pub seid: u64,
    pub pdrs: Vec<&'a Pdr>,
    pub uplink: bool,
    pub ue_v4: Option<std::net::Ipv4Addr>,
    pub ue_v6: Option<(std::net::Ipv6Addr, u8)>,
}

/// The session's UE addresses for the anti-spoofing check: the first IPv4 and the first
/// IPv6 (with its prefix length, 64 by default) of its PDRs in PDR ID order.
pub fn session_ue(s: &Session) -> (Option<std::net::Ipv4Addr>, Option<(std::net::Ipv6Addr, u8)>) {
    let mut v4 = None;
    let mut v6 = None;
    for p in s.pdrs.values() {
        for u in s.effective_pdi(p).ue_ips {
            if v4.is_none() {
                v4 = u.ipv4;
            }
            if v6.is_none() {
                v6 = u
                    .ipv6
                    .map(|a| (a, u.ipv6_prefix_len.unwrap_or(64).min(128)));
            }
        }
    }
    (v4, v6)
}

/// The rule set of the uplink key `teid` or the downlink key `ue` in `s`.
pub fn rule_set<'a>(s: &'a Session, teid: Option<u32>, ue: Option<IpAddr>) -> RuleSet<'a> {
    let mut pdrs: Vec<&Pdr> = s
        .pdrs_by_precedence()
        .into_iter()
        .filter(|p| {
            let pdi = s.effective_pdi(p);
            match (teid, ue) {
                (Some(t), _) => pdi.local_fteid.is_some_and(|f| f.teid == t),
                (None, Some(a)) => {
                    pdi.local_fteid.is_none()
                        && pdi.source_interface != interface::ACCESS
                        && (pdi.ue_ips.iter().any(|u| u.addrs().any(|x| x == a))
                            || pdi.framed_routes.iter().any(|r| r.contains(&a)))
                }
                (None, None) => false,
            }
        })
        .collect();
    pdrs.truncate(MAX_PDRS_PER_KEY);
    let uplink = pdrs
        .first()
        .is_some_and(|p| s.effective_pdi(p).source_interface == interface::ACCESS);
    let (ue_v4, ue_v6) = session_ue(s);
    RuleSet {
        seid: s.up_seid,
        pdrs,
        uplink,
        ue_v4,
        ue_v6,
    }
}

fn v6_prefix_match(a: &std::net::Ipv6Addr, p: &std::net::Ipv6Addr, len: u8) -> bool {
    let (a, p) = (u128::from(*a), u128::from(*p));
    let len = len.min(128) as u32;
    if len == 0 {
        return true;
    }
    let mask = if len == 128 {
        u128::MAX
    } else {
        !(u128::MAX >> len)
    };
    a & mask == p & mask
}

impl Model {
    fn stat(&mut self, i: usize, bytes: usize) {
        self.state.stats[i].0 += 1;
        self.state.stats[i].1 += bytes as u64;
    }

    fn drop_(&mut self, r: DropReason, bytes: usize) -> Verdict {
        self.stat(r as usize, bytes);
        Verdict::Drop(r)
    }

    /// A frame arriving on an N3/N9 interface (the program `xdp_n3`) at time `now` (ns).
    pub fn process_n3(&mut self, frame: &[u8], now: u64) -> Verdict {
        let Some((family, l3)) = parse_eth(frame) else {
            self.stat(Stat::Passed as usize, frame.len());
            return Verdict::Pass;
        };
        let o = match parse_gtpu(frame, l3, family, &self.config) {
            Gtp::Ok(o) => o,
            Gtp::NotOurs => {
                self.stat(Stat::Passed as usize, frame.len());
                return Verdict::Pass;
            }
            Gtp::SlowPath => {
                self.stat(Stat::ToSlowpath as usize, frame.len());
                return Verdict::Pass;
            }
            Gtp::Malformed => return self.drop_(DropReason::MalformedGtpu, frame.len()),
        };
        let Some((len, fields)) = parse_inner(frame, o.inner) else {
            return self.drop_(DropReason::MalformedIp, frame.len());
        };
        let Some(seid) = self.by_teid.get(&o.teid).copied() else {
            return self.unknown_teid(len, now);
        };
        self.process(frame, now, seid, Some(o.teid), None, o, len, fields, true)
    }

    /// A frame arriving on the N6 interface (the program `xdp_n6`) at time `now` (ns).
    pub fn process_n6(&mut self, frame: &[u8], now: u64) -> Verdict {
        let Some((_, l3)) = parse_eth(frame) else {
            self.stat(Stat::Passed as usize, frame.len());
            return Verdict::Pass;
        };
        let Some((len, fields)) = parse_inner(frame, l3) else {
            self.stat(Stat::Passed as usize, frame.len());
            return Verdict::Pass;
        };
        let Some(seid) = self.downlink_session(fields.dst) else {
            self.stat(Stat::Passed as usize, frame.len());
            return Verdict::Pass;
        };
        let o = Outer {
            family: fields.version,
            inner: l3,
            ..Outer::default()
        };
        self.process(
            frame,
            now,
            seid,
            None,
            Some(fields.dst),
            o,
            len,
            fields,
            false,
        )
    }

    fn unknown_teid(&mut self, len: usize, now: u64) -> Verdict {
        self.stat(DropReason::UnknownTeid as usize, len);
        if self.config.slowpath_per_sec == 0 {
            return Verdict::Drop(DropReason::UnknownTeid);
        }
        // slowpath_burst events at once, then slowpath_per_sec (bpf/upf.bpf.c).
        let cost = NSEC_PER_SEC / self.config.slowpath_per_sec;
        let tau = self.config.slowpath_burst.max(1).saturating_sub(1) * cost;
        if gcra(&mut self.state.slowpath_tat, cost, tau, now) {
            self.stat(Stat::ToSlowpath as usize, len);
            Verdict::Pass
        } else {
            Verdict::Drop(DropReason::UnknownTeid)
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn process(
        &mut self,
        frame: &[u8],
        now: u64,
        seid: u64,
        teid: Option<u32>,
        ue: Option<IpAddr>,
        o: Outer,
        len: usize,
        f: PacketFields,
        from_gtpu: bool,
    ) -> Verdict {
        let Some(session) = self.sessions.get(&seid).cloned() else {
            return self.drop_(DropReason::NoPdr, len);
        };
        // Downlink keys: exact UE address, or the framed route (whose rule set is the
        // session's PDRs on framed routes).
        let rs = match ue {
            Some(a) if !self.by_ue_ip.contains_key(&a) => {
                let route = self
                    .framed_routes
                    .iter()
                    .filter(|(n, s)| n.contains(&a) && **s == seid)
                    .max_by_key(|(n, _)| n.prefix_len())
                    .map(|(n, _)| n.network());
                rule_set(&session, None, route.or(Some(a)))
            }
            _ => rule_set(&session, teid, ue),
        };
        let dir = if rs.uplink {
            Direction::Uplink
        } else {
            Direction::Downlink
        };
        if rs.uplink && !self.source_allowed(&rs, &f) {
            return self.drop_(DropReason::SpoofedSource, len);
        }
        let Some(pdr) = rs.pdrs.iter().copied().find(|p| {
            let pdi = session.effective_pdi(p);
            if let Some(q) = pdi.qfis.first() {
                if !o.has_psc || o.qfi != Some(*q) {
                    return false;
                }
            }
            pdi.sdf_filters.is_empty()
                || pdi
                    .sdf_filters
                    .iter()
                    .filter_map(|s| SdfRule::from_ie(s).ok())
                    .any(|r| r.matches(&f, dir))
        }) else {
            return self.drop_(DropReason::NoPdr, len);
        };
        let Some(far) = pdr.far_id.and_then(|id| session.fars.get(&id)) else {
            return self.drop_(DropReason::NoPdr, len);
        };
        if far.action.drop {
            return self.drop_(DropReason::FarDrop, len);
        }
        if far.action.buff {
            if len > EVENT_MAX_PACKET {
                return self.drop_(DropReason::BufferFull, len);
            }
            self.stat(Stat::Buffered as usize, len);
            return Verdict::Buffer {
                seid,
                far_id: far.id,
                pdr_id: pdr.id as u32,
                nocp: far.action.nocp,
                packet: frame[o.inner..o.inner + len].to_vec(),
            };
        }
        if !far.action.forw {
            return self.drop_(DropReason::Unsupported, len);
        }
        let ohr = pdr.outer_header_removal.map(|x| x.description);
        if from_gtpu {
            let ok = match ohr {
                Some(0) => o.family == 4,
                Some(1) => o.family == 6,
                Some(6) => true,
                _ => false,
            };
            if !ok {
                return self.drop_(DropReason::Unsupported, len);
            }
        } else if ohr.is_some() {
            return self.drop_(DropReason::Unsupported, len);
        }
        // QERs in order; the first with a QFI gives the PDU Session Container's QFI.
        let mut qfi_qer: Option<Qer> = None;
        for qid in pdr.qer_ids.iter().take(MAX_QERS_PER_PDR) {
            let Some(q) = session.qers.get(qid) else {
                continue;
            };
            if let Some(r) = self.qer_check(seid, q, rs.uplink, len as u32, now) {
                return self.drop_(r, len);
            }
            if qfi_qer.is_none() && q.qfi.is_some() {
                qfi_qer = Some(q.clone());
            }
        }
        let urrs: Vec<u32> = pdr.urr_ids.iter().take(MAX_URRS_PER_PDR).copied().collect();
        for u in &urrs {
            if let Some(rem) = self.state.quota.get(&(seid, *u)) {
                if *rem < len as i64 {
                    return self.drop_(DropReason::QuotaExhausted, len);
                }
            }
        }
        let (header, peer) = match self.outer_header(far, pdr, qfi_qer.as_ref(), &o, from_gtpu, len)
        {
            Ok(x) => x,
            Err(r) => return self.drop_(r, len),
        };
        let out_family = match peer {
            Some(IpAddr::V6(_)) => 6,
            Some(IpAddr::V4(_)) => 4,
            None => f.version,
        };
        let dst = peer.unwrap_or(f.dst);
        let l3_len = header.len() + len;
        let Some(eg) = self.egress(dst) else {
            return self.drop_(DropReason::NoRoute, len);
        };
        if l3_len > eg.mtu as usize {
            return self.drop_(DropReason::Mtu, len);
        }
        let mut inner = frame[o.inner..o.inner + len].to_vec();
        // The user's packet crosses this UPF as a router hop, except on an N9 relay.
        let relay = from_gtpu && !header.is_empty();
        if !relay && !dec_ttl(&mut inner) {
            return self.drop_(DropReason::TtlExceeded, len);
        }
        let mut out = Vec::with_capacity(14 + l3_len);
        out.extend_from_slice(&eg.dmac);
        out.extend_from_slice(&eg.smac);
        out.extend_from_slice(&if out_family == 4 { 0x0800u16 } else { 0x86dd }.to_be_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&inner);
        if out_family == 6 && !header.is_empty() {
            // IPv6 has no header checksum; the UDP checksum is mandatory (RFC 8200 8.1).
            let (addrs, udp) = out[22..].split_at_mut(32);
            let c = capture::udp_checksum_v6(&addrs[..16], &addrs[16..], udp);
            udp[6..8].copy_from_slice(&c.to_be_bytes());
        }
        self.count_urrs(seid, &urrs, rs.uplink, len, now);
        let stat = if header.is_empty() {
            Stat::FwdUl
        } else if from_gtpu {
            Stat::FwdN9
        } else {
            Stat::FwdDl
        };
        self.stat(stat as usize, len);
        Verdict::Redirect {
            ifindex: eg.ifindex,
            frame: out,
        }
    }

    fn source_allowed(&self, rs: &RuleSet, f: &PacketFields) -> bool {
        if rs.ue_v4.is_none() && rs.ue_v6.is_none() {
            return true;
        }
        match f.src {
            IpAddr::V4(a) if rs.ue_v4 == Some(a) => return true,
            IpAddr::V6(a) => {
                if let Some((p, l)) = rs.ue_v6 {
                    if v6_prefix_match(&a, &p, l) {
                        return true;
                    }
                }
            }
            _ => {}
        }
        // A framed route of the same session.
        self.framed_routes
            .iter()
            .filter(|(n, _)| n.contains(&f.src))
            .max_by_key(|(n, _)| n.prefix_len())
            .is_some_and(|(_, s)| *s == rs.seid)
    }

    fn qer_check(
        &mut self,
        seid: u64,
        q: &Qer,
        uplink: bool,
        bytes: u32,
        now: u64,
    ) -> Option<DropReason> {
        let b = self.state.buckets.entry((seid, q.id)).or_default();
        if uplink {
            if !q.gate_ul_open {
                return Some(DropReason::GateClosed);
            }
            if let Some(m) = q.mbr {
                let (cost, tau) = qer_gcra(m.ul_kbps);
                if !mbr(&mut b.tat_ul, cost, tau, bytes, now) {
                    return Some(DropReason::Mbr);
                }
            }
        } else {
            if !q.gate_dl_open {
                return Some(DropReason::GateClosed);
            }
            if let Some(m) = q.mbr {
                let (cost, tau) = qer_gcra(m.dl_kbps);
                if !mbr(&mut b.tat_dl, cost, tau, bytes, now) {
                    return Some(DropReason::Mbr);
                }
            }
        }
        None
    }

    fn count_urrs(&mut self, seid: u64, urrs: &[u32], uplink: bool, bytes: usize, now: u64) {
        for u in urrs {
            let c: &mut Usage = self.usage.entry((seid, *u)).or_default();
            if uplink {
                c.ul_packets += 1;
                c.ul_bytes += bytes as u64;
            } else {
                c.dl_packets += 1;
                c.dl_bytes += bytes as u64;
            }
            let secs = now / NSEC_PER_SEC;
            c.first_packet.get_or_insert(secs);
            c.last_packet = Some(secs);
            if let Some(r) = self.state.quota.get_mut(&(seid, *u)) {
                *r -= bytes as i64;
            }
        }
    }

    fn egress(&self, dst: IpAddr) -> Option<Egress> {
        let default = match dst {
            IpAddr::V4(_) => IpAddr::from([0u8; 4]),
            IpAddr::V6(_) => IpAddr::from([0u8; 16]),
        };
        self.config
            .neigh
            .get(&dst)
            .or_else(|| self.config.neigh.get(&default))
            .copied()
    }

    /// The outer header to put in front of the user's packet (empty: none) and the
    /// address to route towards (the peer; None: the inner destination).
    fn outer_header(
        &self,
        far: &Far,
        pdr: &Pdr,
        q: Option<&Qer>,
        o: &Outer,
        from_gtpu: bool,
        len: usize,
    ) -> Result<(Vec<u8>, Option<IpAddr>), DropReason> {
        let ohc = far
            .forwarding
            .as_ref()
            .and_then(|f| f.outer_header_creation.as_ref());
        let Some(ohc) = ohc else {
            if !from_gtpu {
                return Err(DropReason::Unsupported);
            }
            return Ok((Vec::new(), None));
        };
        let fw = far.forwarding.as_ref().ok_or(DropReason::Unsupported)?;
        let t =
            tunnel(&self.config, fw.destination_interface, ohc).ok_or(DropReason::Unsupported)?;
        // The PDU Session Container (TS 38.415 clause 5.5.2).
        let keep = from_gtpu
            && o.has_psc
            && pdr
                .outer_header_removal
                .and_then(|r| r.ext_header_deletion)
                .is_none_or(|x| x & 1 == 0);
        let qfi = q.and_then(|q| q.qfi).or(if keep { o.qfi } else { None });
        let psc = match qfi {
            None => None,
            Some(qfi) if fw.destination_interface == interface::ACCESS => {
                Some(gtpu::PscFields::Dl {
                    qfi,
                    rqi: q.is_some_and(|q| q.rqi),
                    ppi: q.and_then(|q| q.ppi).map(|p| p & 0x07),
                })
            }
            Some(qfi) if keep => {
                if o.psc_type == 1 {
                    Some(gtpu::PscFields::Ul { qfi })
                } else {
                    Some(gtpu::PscFields::Dl {
                        qfi,
                        rqi: false,
                        ppi: None,
                    })
                }
            }
            Some(_) => None,
        };
        let gtp = gtpu::GpduHeader {
            teid: t.teid,
            sequence_number: None,
            psc,
        };
        let glen = gtp.header_len();
        let tos = fw
            .transport_level_marking
            .map(|t| (t >> 8) as u8)
            .unwrap_or(0);
        let mut h = match (t.src, t.peer) {
            (IpAddr::V4(src), IpAddr::V4(peer)) => {
                let l3_len = 20 + 8 + glen + len;
                let mut h = vec![0u8; 28 + glen];
                h[0] = 0x45;
                h[1] = tos;
                h[2..4].copy_from_slice(&(l3_len as u16).to_be_bytes());
                h[6] = 0x40;
                h[8] = 64;
                h[9] = 17;
                h[12..16].copy_from_slice(&src.octets());
                h[16..20].copy_from_slice(&peer.octets());
                let c = capture::checksum(&h[..20], 0);
                h[10..12].copy_from_slice(&c.to_be_bytes());
                h
            }
            (IpAddr::V6(src), IpAddr::V6(peer)) => {
                // Traffic Class from the Transport Level Marking, flow label 0.
                let mut h = vec![0u8; 48 + glen];
                h[0] = 0x60 | tos >> 4;
                h[1] = tos << 4;
                h[4..6].copy_from_slice(&((8 + glen + len) as u16).to_be_bytes());
                h[6] = 17;
                h[7] = 64;
                h[8..24].copy_from_slice(&src.octets());
                h[24..40].copy_from_slice(&peer.octets());
                h
            }
            _ => return Err(DropReason::Unsupported),
        };
        let ip = h.len() - 8 - glen;
        let udp_len = 8 + glen + len;
        h[ip..ip + 2].copy_from_slice(&GTPU_PORT.to_be_bytes());
        h[ip + 2..ip + 4].copy_from_slice(&t.port.to_be_bytes());
        h[ip + 4..ip + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
        gtp.write(&mut h[ip + 8..], len)
            .map_err(|_| DropReason::Unsupported)?;
        Ok((h, Some(t.peer)))
    }
}

/// Where and from where a FAR's G-PDUs go (Outer Header Creation, TS 29.244 clause
/// 8.2.56), as the data path builds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunnel {
    pub peer: IpAddr,
    /// Our address: the outer source.
    pub src: IpAddr,
    pub teid: u32,
    pub port: u16,
}

/// The tunnel for an Outer Header Creation: GTP-U/UDP/IPv4 when it asks for it and we
/// have an IPv4 address on that side, else GTP-U/UDP/IPv6 on the same terms (a
/// dual-stack peer, as Open5GS describes gNBs, gets IPv4). None: we cannot build it.
/// The source is the N3 address towards the access network, the N9 address (else N3)
/// towards the core.
pub fn tunnel(
    cfg: &PipelineConfig,
    destination_interface: u8,
    o: &pfcp::ie::OuterHeaderCreation,
) -> Option<Tunnel> {
    let access = destination_interface == interface::ACCESS;
    let src4 = if access {
        cfg.n3_v4
    } else {
        cfg.n9_v4.or(cfg.n3_v4)
    };
    let src6 = if access {
        cfg.n3_v6
    } else {
        cfg.n9_v6.or(cfg.n3_v6)
    };
    tunnel_from(src4, src6, o)
}

/// The tunnel for an Outer Header Creation given our addresses on that side (see
/// `tunnel`); N4 uses it to refuse a FAR the data path could not serve.
pub fn tunnel_from(
    src4: Option<std::net::Ipv4Addr>,
    src6: Option<std::net::Ipv6Addr>,
    o: &pfcp::ie::OuterHeaderCreation,
) -> Option<Tunnel> {
    use pfcp::ie::OuterHeaderCreation as O;
    let (peer, src) = match (o.ipv4, src4, o.ipv6, src6) {
        (Some(p), Some(s), _, _) if o.has(O::GTPU_UDP_IPV4) => (IpAddr::V4(p), IpAddr::V4(s)),
        (_, _, Some(p), Some(s)) if o.has(O::GTPU_UDP_IPV6) => (IpAddr::V6(p), IpAddr::V6(s)),
        _ => return None,
    };
    Some(Tunnel {
        peer,
        src,
        teid: o.teid.unwrap_or(0),
        port: o.port.unwrap_or(GTPU_PORT),
    })
}

/// Decrement TTL / hop limit (RFC 1624 for the IPv4 checksum). False if it expired.
fn dec_ttl(ip: &mut [u8]) -> bool {
    match ip[0] >> 4 {
        4 => {
            if ip[8] <= 1 {
                return false;
            }
            let old = u16::from_be_bytes([ip[8], ip[9]]);
            ip[8] -= 1;
            let new = u16::from_be_bytes([ip[8], ip[9]]);
            let check = u16::from_be_bytes([ip[10], ip[11]]);
            let c = csum_replace2(check, old, new);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            true
        }
        _ => {
            if ip[7] <= 1 {
                return false;
            }
            ip[7] -= 1;
            true
        }
    }
}

/// RFC 1624 eqn. 3, as the data path computes it (bpf/include/csum.h).
pub fn csum_replace2(check: u16, old: u16, new: u16) -> u16 {
    let mut sum: u64 = (!check) as u64;
    sum += (!old) as u64;
    sum += new as u64;
    for _ in 0..3 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Octets a GCRA lets through in `secs` of packets of `size` octets offered at
    /// `offered` octets/s, with the coarse clock's 4 ms ticks.
    fn admitted(kbps: u64, offered: u64, size: u32, secs: u64) -> u64 {
        let (cost, tau) = qer_gcra(kbps);
        let tick = 4_000_000;
        let per_tick = offered * tick / NSEC_PER_SEC / u64::from(size);
        let mut tat = 0;
        let mut passed = 0;
        for t in 0..secs * NSEC_PER_SEC / tick {
            let now = 1_000_000_000_000 + t * tick;
            for _ in 0..per_tick {
                if mbr(&mut tat, cost, tau, size, now) {
                    passed += u64::from(size);
                }
            }
        }
        passed
    }

    #[test]
    fn the_mbr_holds_over_time_after_one_burst() {
        // 10 Mbit/s offered 50 Mbit/s for 10 s: the rate plus the 100 ms burst.
        let rate = 10_000_000 / 8;
        let got = admitted(10_000, 50_000_000 / 8, 1250, 10);
        let want = rate * 10 + rate / 10;
        assert!(got.abs_diff(want) < want / 100, "{got} vs {want}");
        // Under the rate nothing is dropped.
        assert_eq!(
            admitted(10_000, 5_000_000 / 8, 1250, 10),
            5_000_000 / 8 * 10
        );
        // 100 Gbit/s, the cap, is still exact to well under 1 %.
        let got = admitted(100_000_000, 20_000_000_000, 1500, 1);
        let want = 12_500_000_000 + 1_250_000_000;
        assert!(got.abs_diff(want) < want / 100, "{got} vs {want}");
    }

    #[test]
    fn gcra_units_never_overflow() {
        for kbps in [0, 1, 7, 1_000, 10_000_000, 100_000_000, u64::MAX] {
            let (cost, tau) = qer_gcra(kbps);
            assert!(cost <= 1 << 47, "{kbps}");
            // A 64 KiB packet's cost fits in 64 bits, and now + tau in any uptime.
            assert!((65_535u64).checked_mul(cost).is_some());
            assert!(tau < 1 << 62, "{kbps}");
        }
        // A rate of 0: the burst, then nothing.
        let got = admitted(0, 1_000_000, 1000, 2);
        assert!((3000..=4000).contains(&got), "{got}");
    }
}
