//! ICMP errors for the packets the UPF drops as a router would (bpf/include/icmp.h is the
//! data path's twin): too big for their egress link once the UPF's headers are on them,
//! ICMPv4 Fragmentation Needed for IPv4 with DF set (RFC 792, RFC 1191 clause 4) or
//! ICMPv6 Packet Too Big (RFC 4443 clause 3.2, RFC 8201), so that path MTU discovery
//! settles behind the UPF; out of TTL / hop limit here, Time Exceeded (RFC 792, RFC 4443
//! clause 3.3), so that traceroute sees the UPF. The packet itself is dropped and
//! counted (`mtu_exceeded`, `ttl_exceeded`); the error goes back to its source on the
//! side it came from: a UE's (from a tunnel) through the UE's session's downlink rules,
//! a data network host's back by its route.

use std::net::IpAddr;

use crate::abi::{DropReason, Stat};
use crate::sdf::PacketFields;

use super::lease::gcra;
use super::packet::{parse_eth, parse_inner};
use super::pipeline::Packet;
use super::select::Key;
use super::{Model, Verdict};

/// The whole error within 576 octets for IPv4 (RFC 1812 clause 4.3.2.3), within the
/// minimum MTU for IPv6 (RFC 4443 clause 2.4 (c)).
const V4_LIMIT: usize = 576;
const V6_LIMIT: usize = 1280;
const NSEC_PER_SEC: u64 = 1_000_000_000;

/// Why a packet gets an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    /// Too big: what fits (the link's MTU less the headers the UPF adds).
    TooBig(usize),
    /// Out of TTL / hop limit at this hop.
    TtlExceeded,
}

/// Whether packet `ip` (its `fields`) may be answered with an error (RFC 1122 clause
/// 3.2.2, RFC 1812 clause 4.3.2.7, RFC 4443 clause 2.4 (e)): for Fragmentation Needed,
/// IPv4 with DF set (the data path does not fragment: without DF it is only dropped);
/// not a later fragment; not itself an ICMP error; from a unicast source; not to a
/// multicast or broadcast address (except an IPv6 Packet Too Big, clause 2.4 (e.3)).
fn eligible(ip: &[u8], f: &PacketFields, why: Why) -> bool {
    let Some(l4) = PacketFields::transport_offset(ip) else {
        return false;
    };
    let too_big = matches!(why, Why::TooBig(_));
    let addresses = match (f.src, f.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let (s, d) = (s.octets()[0], d.octets()[0]);
            (!too_big || ip[6] & 0x40 != 0) && s != 0 && s != 127 && s < 224 && d < 224
        }
        (IpAddr::V6(s), d) => {
            !s.is_unspecified() && !s.is_multicast() && (too_big || !d.is_multicast())
        }
        _ => false,
    };
    if !addresses {
        return false;
    }
    let icmp = if f.version == 4 { 1 } else { 58 };
    if f.protocol != icmp {
        return true;
    }
    match ip.get(l4) {
        None => false,
        Some(t) if f.version == 6 => *t >= 128,
        Some(t) => ![3, 4, 5, 11, 12].contains(t),
    }
}

/// The error for packet `ip` from `source`: a Packet Too Big reporting `mtu`, or a Time
/// Exceeded if `mtu` is 0; IP, ICMP and as much of the packet as fits.
fn error(ip: &[u8], source: IpAddr, to: IpAddr, mtu: u32) -> Vec<u8> {
    match (source, to) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let quote = &ip[..ip.len().min(V4_LIMIT - 28)];
            let mut e = Vec::with_capacity(28 + quote.len());
            e.extend_from_slice(&[0x45, 0]);
            e.extend_from_slice(&((28 + quote.len()) as u16).to_be_bytes());
            e.extend_from_slice(&[0, 0, 0, 0, 64, 1, 0, 0]);
            e.extend_from_slice(&s.octets());
            e.extend_from_slice(&d.octets());
            let c = capture::checksum(&e[..20], 0);
            e[10..12].copy_from_slice(&c.to_be_bytes());
            let (t, code) = if mtu != 0 { (3, 4) } else { (11, 0) };
            e.extend_from_slice(&[t, code, 0, 0, 0, 0]);
            e.extend_from_slice(&(mtu as u16).to_be_bytes());
            e.extend_from_slice(quote);
            let c = capture::checksum(&e[20..], 0);
            e[22..24].copy_from_slice(&c.to_be_bytes());
            e
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let quote = &ip[..ip.len().min(V6_LIMIT - 48)];
            let plen = (8 + quote.len()) as u16;
            let mut e = Vec::with_capacity(48 + quote.len());
            e.extend_from_slice(&[0x60, 0, 0, 0]);
            e.extend_from_slice(&plen.to_be_bytes());
            e.extend_from_slice(&[58, 64]);
            e.extend_from_slice(&s.octets());
            e.extend_from_slice(&d.octets());
            e.extend_from_slice(&[if mtu != 0 { 2 } else { 3 }, 0, 0, 0]);
            e.extend_from_slice(&mtu.to_be_bytes());
            e.extend_from_slice(quote);
            // RFC 4443 clause 2.3: the pseudo-header's addresses, length, next header.
            let addrs: u32 = e[8..40]
                .chunks_exact(2)
                .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
                .sum();
            let c = capture::checksum(&e[40..], addrs + u32::from(plen) + 58);
            e[42..44].copy_from_slice(&c.to_be_bytes());
            e
        }
        _ => Vec::new(),
    }
}

impl Model {
    /// Packet `p` (of session `p.seid`) is dropped for `why`, and counted so (as
    /// `mtu_exceeded` or `ttl_exceeded`); an error goes back if the packet may have one
    /// and the budgets, the session's then the total, allow. The verdict is the packet's
    /// (a drop) or, for an error to a UE, what the UE's downlink rules did with the error.
    pub(super) fn icmp_error(
        &mut self,
        p: &Packet<'_>,
        uplink: bool,
        why: Why,
        now: u64,
    ) -> Verdict {
        let reason = match why {
            Why::TooBig(_) => DropReason::MtuExceeded,
            Why::TtlExceeded => DropReason::TtlExceeded,
        };
        self.count(reason.index(), p.len);
        let dropped = Verdict::Drop(reason);
        let to_ue = match (uplink, p.is_gtpu()) {
            (true, true) => true,
            (false, false) => false,
            _ => return dropped,
        };
        let source = match p.fields.src {
            IpAddr::V4(_) => self.config.icmp.source_v4.map(IpAddr::V4),
            IpAddr::V6(_) => self.config.icmp.source_v6.map(IpAddr::V6),
        };
        let Some(source) = source else {
            return dropped;
        };
        if self.config.icmp.per_sec == 0 || self.config.icmp.session_per_sec == 0 {
            return dropped;
        }
        if !eligible(p.ip(), &p.fields, why) {
            return dropped;
        }
        if !self.icmp_budget(p.seid, now) {
            self.count(Stat::IcmpLimited.index(), p.len);
            return dropped;
        }
        let least = if p.fields.version == 4 { 68 } else { 1280 };
        let mtu = match why {
            Why::TooBig(fits) => (fits as u32).max(least),
            Why::TtlExceeded => 0,
        };
        let e = error(p.ip(), source, p.fields.src, mtu);
        if to_ue {
            self.count(Stat::IcmpSent.index(), e.len());
            return self.made_for_ue(&e, now);
        }
        let Some(eg) = self.egress(p.fields.src) else {
            return self.dropped(DropReason::NoRoute, e.len());
        };
        self.count(Stat::IcmpSent.index(), e.len());
        let mut frame = Vec::with_capacity(14 + e.len());
        frame.extend_from_slice(&eg.dmac);
        frame.extend_from_slice(&eg.smac);
        let ethertype: u16 = if p.fields.version == 6 {
            0x86dd
        } else {
            0x0800
        };
        frame.extend_from_slice(&ethertype.to_be_bytes());
        frame.extend_from_slice(&e);
        Verdict::Redirect {
            ifindex: eg.ifindex,
            frame,
        }
    }

    /// The budgets (GCRAs): the session's, then the one over all sessions; a refusal by
    /// the second has spent the first's.
    fn icmp_budget(&mut self, seid: u64, now: u64) -> bool {
        let c = &self.config.icmp;
        let (per_sec, burst, s_per_sec, s_burst) =
            (c.per_sec, c.burst, c.session_per_sec, c.session_burst);
        let cost = NSEC_PER_SEC / s_per_sec;
        let tat = self.icmp_tats.entry(seid).or_default();
        if !gcra(tat, cost, (s_burst.max(1) - 1) * cost, now, None) {
            return false;
        }
        let cost = NSEC_PER_SEC / per_sec;
        gcra(
            &mut self.icmp_tat,
            cost,
            (burst.max(1) - 1) * cost,
            now,
            None,
        )
    }

    /// An error for a UE: through the downlink rules of the session that has the UE's
    /// address, as a packet from N6 would go (the program `stage_downlink`), but not
    /// counted as received; dropped as `no_route` if no session has the address.
    fn made_for_ue(&mut self, ip: &[u8], now: u64) -> Verdict {
        let mut frame = vec![0u8; 12];
        let ethertype: u16 = if ip[0] >> 4 == 6 { 0x86dd } else { 0x0800 };
        frame.extend_from_slice(&ethertype.to_be_bytes());
        frame.extend_from_slice(ip);
        let Some((_, l3)) = parse_eth(&frame) else {
            return self.dropped(DropReason::MalformedIp, frame.len());
        };
        let Some((len, fields)) = parse_inner(&frame, l3) else {
            return self.dropped(DropReason::MalformedIp, frame.len());
        };
        let Some(seid) = self.downlink_session(fields.dst) else {
            return self.dropped(DropReason::NoRoute, len);
        };
        self.process_downlink(&frame, l3, seid, Key::Ue(fields.dst), len, fields, now)
    }
}
