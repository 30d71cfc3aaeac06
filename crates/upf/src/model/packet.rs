//! Reading frames as the data path does: Ethernet (one VLAN tag), the outer IP/UDP/GTP-U
//! headers of a G-PDU for one of our addresses (TS 29.281 clause 5, the PDU Session
//! Container of TS 38.415 clause 5.5.2), and the inner IP packet with the fields SDF
//! filters look at.
//!
//! The G-PDU contract shared with the codec (`gtpu::parse_gpdu`) and bpf/include/gtpu.h
//! (checked on the GTP-U robustness corpus by crates/bpf/tests/gpdu_contract.rs): the
//! same TEID, the QFI and PDU type of the first PDU Session Container of PDU type DL or
//! UL, the same T-PDU offset. Deliberate differences from the codec, because the data
//! path forwards the inner packet rather than decoding the message:
//! - the GTP-U Length field is not read: the user's packet is as long as its IP header
//!   says, and must lie within the frame;
//! - at most `abi::GTP_MAX_EXT` extension headers are walked (a longer chain is
//!   malformed), where the codec walks 16;
//! - an extension header other than a PDU Session Container that needs comprehension
//!   goes to upfd (the slow path), where the codec refuses only the ones it does not know.

use std::net::IpAddr;

use crate::fastpath::Config;
use crate::sdf::PacketFields;

/// GTP-U's UDP port (TS 29.281 clause 4.4.2.3).
pub(super) const GTPU_PORT: u16 = 2152;
const GPDU: u8 = 255;
const PDU_SESSION_CONTAINER: u8 = 0x85;

/// The outer G-PDU as the data path reads it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Outer {
    /// IP version of the outer header.
    pub family: u8,
    pub teid: u32,
    /// Offset of the T-PDU in the frame.
    pub inner: usize,
    /// The first PDU Session Container of PDU type DL (0) or UL (1): its QFI and type.
    pub qfi: Option<u8>,
    pub psc_type: u8,
}

/// What a frame on N3/N9 is.
pub(super) enum Gtp {
    Ok(Outer),
    /// Not GTP-U for one of our addresses: the kernel's.
    NotOurs,
    /// GTP-U for us that upfd answers (Echo, End Marker, unknown extension header ...).
    SlowPath,
    Malformed,
}

fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

/// Ethernet: the family (4, 6) and offset of the IP header; one VLAN tag skipped.
pub(super) fn parse_eth(f: &[u8]) -> Option<(u8, usize)> {
    if f.len() < 14 {
        return None;
    }
    let (proto, off) = match be16(f, 12) {
        0x8100 | 0x88a8 if f.len() >= 18 => (be16(f, 16), 18),
        0x8100 | 0x88a8 => return None,
        p => (p, 14),
    };
    match proto {
        0x0800 => Some((4, off)),
        0x86dd => Some((6, off)),
        _ => None,
    }
}

/// The outer IP and UDP headers at `l3`: the offset of the GTP-U header if the frame is
/// UDP to port 2152 of one of our addresses and not an IPv4 fragment (fragments go to the
/// kernel, which reassembles them for upfd).
fn gtpu_offset(f: &[u8], l3: usize, family: u8, cfg: &Config) -> Option<usize> {
    let ip = f.get(l3..)?;
    let (proto, dst, udp) = if family == 4 {
        if ip.len() < 20 || be16(ip, 6) & 0x3fff != 0 || ip[0] & 0x0f < 5 {
            return None;
        }
        let dst = IpAddr::from([ip[16], ip[17], ip[18], ip[19]]);
        (ip[9], dst, l3 + usize::from(ip[0] & 0x0f) * 4)
    } else {
        let dst: [u8; 16] = ip.get(24..40)?.try_into().ok()?;
        (ip[6], IpAddr::from(dst), l3 + 40)
    };
    let ours = !dst.is_unspecified() && cfg.local.contains(&dst);
    let port = f.get(udp..udp + 8).map(|u| be16(u, 2));
    (proto == 17 && ours && port == Some(GTPU_PORT)).then_some(udp + 8)
}

/// A frame arriving on N3/N9 with its IP header at `l3`.
pub(super) fn parse_gtpu(f: &[u8], l3: usize, family: u8, cfg: &Config) -> Gtp {
    let Some(g) = gtpu_offset(f, l3, family, cfg) else {
        return Gtp::NotOurs;
    };
    let Some(h) = f.get(g..g + 8) else {
        return Gtp::Malformed;
    };
    // Version 1, PT 1, a G-PDU: else upfd's.
    if h[0] >> 4 != 0x3 || h[1] != GPDU {
        return Gtp::SlowPath;
    }
    let mut o = Outer {
        family,
        teid: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        ..Outer::default()
    };
    let mut off = g + 8;
    let udp_end = (g - 8) + usize::from(be16(f, g - 4));
    let mut qmp = false;
    if h[0] & 0x07 != 0 {
        // Sequence number, N-PDU number, next extension header type.
        let Some(opt) = f.get(g + 8..g + 12) else {
            return Gtp::Malformed;
        };
        off += 4;
        let mut next = if h[0] & 0x04 != 0 { opt[3] } else { 0 };
        for _ in 0..crate::abi::GTP_MAX_EXT {
            if next == 0 {
                break;
            }
            let Some(&units) = f.get(off) else {
                return Gtp::Malformed;
            };
            let len = usize::from(units) * 4;
            if len == 0 {
                return Gtp::Malformed;
            }
            if next == PDU_SESSION_CONTAINER {
                let Some(c) = f.get(off..off + 4) else {
                    return Gtp::Malformed;
                };
                if o.qfi.is_none() && c[1] >> 4 <= 1 {
                    o.psc_type = c[1] >> 4;
                    o.qfi = Some(c[2] & 0x3f);
                    // A UL container with QMP: an answer to upfd's QoS monitoring
                    // (TS 38.415 clause 5.5.2.2).
                    qmp = o.psc_type == 1 && c[1] & 0x08 != 0;
                }
            } else if next & 0x80 != 0 {
                // Comprehension required (clause 5.2.1): upfd answers it.
                return Gtp::SlowPath;
            }
            let Some(&n) = f.get(off + len - 1) else {
                return Gtp::Malformed;
            };
            next = n;
            off += len;
        }
        if next != 0 {
            return Gtp::Malformed;
        }
    }
    // A QoS monitoring answer without a user packet (a dummy, TS 23.501 clause
    // 5.33.3.2) is upfd's: it reads the time stamps. One that carries a packet is
    // forwarded (its time stamps are not read).
    if qmp && off >= udp_end {
        return Gtp::SlowPath;
    }
    o.inner = off;
    Gtp::Ok(o)
}

/// The inner packet's length if it is a well-formed IPv4/IPv6 packet within `f[off..]`
/// (header lengths, total length within the frame, no jumbogram), and its fields.
pub(super) fn parse_inner(f: &[u8], off: usize) -> Option<(usize, PacketFields)> {
    let b = f.get(off..)?;
    let len = match b.first()? >> 4 {
        4 if b.len() >= 20 => {
            let ihl = usize::from(b[0] & 0x0f) * 4;
            let total = usize::from(be16(b, 2));
            (ihl >= 20 && total >= ihl && total <= b.len()).then_some(total)?
        }
        6 if b.len() >= 40 => {
            let plen = usize::from(be16(b, 4));
            (plen != 0 && 40 + plen <= b.len()).then_some(40 + plen)?
        }
        _ => return None,
    };
    Some((len, PacketFields::from_ip(&b[..len])?))
}
