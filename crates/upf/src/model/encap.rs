//! The headers the data path writes: the outer IPv4/IPv6 + UDP + GTP-U header of a FAR's
//! Outer Header Creation (TS 29.244 clause 8.2.56, TS 29.281 clause 5) with its PDU
//! Session Container (TS 38.415 clause 5.5.2), and the TTL / hop limit of a packet
//! routed through the UPF.

use std::net::IpAddr;

use crate::fastpath::Config;
use crate::rules::{interface, Forwarding};

use super::packet::GTPU_PORT;

/// Where a FAR's G-PDUs go, and from which of our addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Tunnel {
    pub peer: IpAddr,
    pub src: IpAddr,
    pub teid: u32,
    pub port: u16,
}

/// The tunnel a forwarding FAR asks for, if we can build it: GTP-U over IPv4 when the
/// Outer Header Creation asks for it and we have an IPv4 address on that side (a
/// dual-stack peer gets IPv4), else over IPv6 on the same terms. Our side is the N3
/// address towards the access network, the N9 address (else N3) towards anything else,
/// unless the FAR's Network Instance has addresses of its own on that side.
pub(super) fn tunnel(cfg: &Config, fw: &Forwarding) -> Option<Tunnel> {
    use pfcp::ie::OuterHeaderCreation as O;
    let o = fw.outer_header_creation.as_ref()?;
    let towards_access = fw.destination_interface == interface::ACCESS;
    let instance = cfg
        .network_instances
        .iter()
        .find(|x| Some(x.name.as_str()) == fw.network_instance.as_deref());
    let (own_v4, own_v6) = match instance {
        Some(x) if towards_access => (x.n3_v4, x.n3_v6),
        Some(x) => (x.n9_v4, x.n9_v6),
        None => (None, None),
    };
    let (ours_v4, ours_v6) = if own_v4.is_some() || own_v6.is_some() {
        (own_v4, own_v6)
    } else if towards_access {
        (cfg.n3_v4, cfg.n3_v6)
    } else {
        (cfg.n9_v4.or(cfg.n3_v4), cfg.n9_v6.or(cfg.n3_v6))
    };
    let v4 = o
        .has(O::GTPU_UDP_IPV4)
        .then_some(())
        .and(o.ipv4.zip(ours_v4));
    let v6 = o
        .has(O::GTPU_UDP_IPV6)
        .then_some(())
        .and(o.ipv6.zip(ours_v6));
    let (peer, src) = match (v4, v6) {
        (Some((p, s)), _) => (IpAddr::V4(p), IpAddr::V4(s)),
        (None, Some((p, s))) => (IpAddr::V6(p), IpAddr::V6(s)),
        (None, None) => return None,
    };
    Some(Tunnel {
        peer,
        src,
        teid: o.teid.unwrap_or(0),
        port: o.port.unwrap_or(GTPU_PORT),
    })
}

/// The outer header for `t` in front of a user packet of `len` octets: IP, UDP (the
/// IPv6 checksum is filled in once the packet is whole, [`udp6_checksum`]) and GTP-U
/// with `psc`. `tos` is the outer ToS / Traffic Class. None if the header cannot be
/// written (a packet too long for the Length fields).
pub(super) fn outer_header(
    t: &Tunnel,
    tos: u8,
    psc: Option<gtpu::PscFields>,
    len: usize,
) -> Option<Vec<u8>> {
    let gtp = gtpu::GpduHeader {
        teid: t.teid,
        sequence_number: None,
        psc,
    };
    let glen = gtp.header_len();
    let udp_len = 8 + glen + len;
    let mut h = match (t.src, t.peer) {
        (IpAddr::V4(src), IpAddr::V4(peer)) => {
            let mut h = vec![0u8; 20];
            h[0] = 0x45;
            h[1] = tos;
            h[2..4].copy_from_slice(&u16::try_from(20 + udp_len).ok()?.to_be_bytes());
            h[6] = 0x40; // DF
            h[8] = 64;
            h[9] = 17;
            h[12..16].copy_from_slice(&src.octets());
            h[16..20].copy_from_slice(&peer.octets());
            let c = capture::checksum(&h, 0);
            h[10..12].copy_from_slice(&c.to_be_bytes());
            h
        }
        (IpAddr::V6(src), IpAddr::V6(peer)) => {
            // Traffic Class from the Transport Level Marking, flow label 0.
            let mut h = vec![0u8; 40];
            h[0] = 0x60 | tos >> 4;
            h[1] = tos << 4;
            h[4..6].copy_from_slice(&u16::try_from(udp_len).ok()?.to_be_bytes());
            h[6] = 17;
            h[7] = 64;
            h[8..24].copy_from_slice(&src.octets());
            h[24..40].copy_from_slice(&peer.octets());
            h
        }
        _ => return None,
    };
    h.extend_from_slice(&GTPU_PORT.to_be_bytes());
    h.extend_from_slice(&t.port.to_be_bytes());
    h.extend_from_slice(&u16::try_from(udp_len).ok()?.to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    let at = h.len();
    h.resize(at + glen, 0);
    gtp.write(&mut h[at..], len).ok()?;
    Some(h)
}

/// The UDP checksum of the G-PDU in an IPv6 frame `f` (Ethernet, IPv6, UDP ...),
/// written into it: mandatory over IPv6 (RFC 8200 clause 8.1).
pub(super) fn udp6_checksum(f: &mut [u8]) {
    let (addrs, udp) = f[22..].split_at_mut(32);
    let c = capture::udp_checksum_v6(&addrs[..16], &addrs[16..], udp);
    udp[6..8].copy_from_slice(&c.to_be_bytes());
}

/// Decrement the TTL / hop limit of the IP packet `ip` (the IPv4 checksum updated as
/// RFC 1624 eqn. 3 says). False if it expired here.
pub(super) fn dec_ttl(ip: &mut [u8]) -> bool {
    if ip[0] >> 4 == 4 {
        if ip[8] <= 1 {
            return false;
        }
        let old = u16::from_be_bytes([ip[8], ip[9]]);
        ip[8] -= 1;
        let new = u16::from_be_bytes([ip[8], ip[9]]);
        let check = u16::from_be_bytes([ip[10], ip[11]]);
        // HC' = ~(~HC + ~m + m'), folded.
        let mut sum = u32::from(!check) + u32::from(!old) + u32::from(new);
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        return true;
    }
    if ip[7] <= 1 {
        return false;
    }
    ip[7] -= 1;
    true
}
