//! Captures in and out: pcap and pcapng reading, UDP datagram extraction over the link types
//! found in real N4/N3 captures (Ethernet, Linux cooked v1/v2, BSD loopback, raw IP), and a
//! pcap writer with IPv4/IPv6 + UDP framing so tests can hand corpora to tshark.
//!
//! Malformed input never panics: a truncated file ends the packet list with an error, a
//! packet that does not parse as UDP is skipped by [`udp_datagram`] returning `None`.

use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Link-layer header types (tcpdump.org/linktypes.html).
pub mod linktype {
    pub const NULL: u32 = 0;
    pub const ETHERNET: u32 = 1;
    pub const RAW_OLD: u32 = 12;
    pub const RAW: u32 = 101;
    pub const LOOP: u32 = 108;
    pub const LINUX_SLL: u32 = 113;
    pub const IPV4: u32 = 228;
    pub const IPV6: u32 = 229;
    pub const LINUX_SLL2: u32 = 276;
}

/// One captured frame.
#[derive(Debug, Clone)]
pub struct Frame {
    /// 1-based frame number, as tshark counts.
    pub number: usize,
    pub linktype: u32,
    /// Capture time in nanoseconds since the epoch.
    pub ts_nanos: u64,
    pub data: Vec<u8>,
}

fn bad(msg: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg.to_string())
}

/// Read every frame of a pcap or pcapng file.
pub fn read_file(path: impl AsRef<std::path::Path>) -> io::Result<Vec<Frame>> {
    read_bytes(&std::fs::read(path)?)
}

/// Parse a pcap or pcapng image held in memory.
pub fn read_bytes(b: &[u8]) -> io::Result<Vec<Frame>> {
    if b.len() < 4 {
        return Err(bad("file too short for a capture header"));
    }
    match [b[0], b[1], b[2], b[3]] {
        [0x0a, 0x0d, 0x0d, 0x0a] => read_pcapng(b),
        _ => read_pcap(b),
    }
}

struct Endian(bool); // true = big endian

impl Endian {
    fn u16(&self, b: &[u8], o: usize) -> io::Result<u16> {
        let s = b.get(o..o + 2).ok_or_else(|| bad("truncated capture"))?;
        Ok(if self.0 {
            u16::from_be_bytes([s[0], s[1]])
        } else {
            u16::from_le_bytes([s[0], s[1]])
        })
    }
    fn u32(&self, b: &[u8], o: usize) -> io::Result<u32> {
        let s = b.get(o..o + 4).ok_or_else(|| bad("truncated capture"))?;
        let a = [s[0], s[1], s[2], s[3]];
        Ok(if self.0 {
            u32::from_be_bytes(a)
        } else {
            u32::from_le_bytes(a)
        })
    }
}

fn read_pcap(b: &[u8]) -> io::Result<Vec<Frame>> {
    let magic_le = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let (e, nanos) = match magic_le {
        0xa1b2c3d4 => (Endian(false), false),
        0xa1b23c4d => (Endian(false), true),
        0xd4c3b2a1 => (Endian(true), false),
        0x4d3cb2a1 => (Endian(true), true),
        _ => return Err(bad("not a pcap or pcapng file")),
    };
    let linktype = e.u32(b, 20)? & 0x0fff_ffff;
    let mut frames = Vec::new();
    let mut o = 24;
    while o < b.len() {
        let sec = e.u32(b, o)? as u64;
        let frac = e.u32(b, o + 4)? as u64;
        let incl = e.u32(b, o + 8)? as usize;
        let data = b
            .get(o + 16..o + 16 + incl)
            .ok_or_else(|| bad("truncated pcap record"))?;
        let ts_nanos = sec * 1_000_000_000 + if nanos { frac } else { frac * 1000 };
        frames.push(Frame {
            number: frames.len() + 1,
            linktype,
            ts_nanos,
            data: data.to_vec(),
        });
        o += 16 + incl;
    }
    Ok(frames)
}

fn read_pcapng(b: &[u8]) -> io::Result<Vec<Frame>> {
    let mut frames = Vec::new();
    let mut e = Endian(false);
    // Per section: (linktype, ticks per second) of each interface.
    let mut ifaces: Vec<(u32, u64)> = Vec::new();
    let mut o = 0;
    while o + 12 <= b.len() {
        let raw_type = u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        if raw_type == 0x0a0d0d0a {
            // Section Header Block: the byte-order magic decides the endianness.
            let bom = b.get(o + 8..o + 12).ok_or_else(|| bad("truncated SHB"))?;
            e = Endian(bom == [0x1a, 0x2b, 0x3c, 0x4d]);
            ifaces.clear();
        }
        let btype = e.u32(b, o)?;
        let blen = e.u32(b, o + 4)? as usize;
        if blen < 12 || o + blen > b.len() {
            return Err(bad("pcapng block length out of range"));
        }
        let body = &b[o + 8..o + blen - 4];
        match btype {
            1 => {
                // Interface Description Block.
                let lt = e.u16(body, 0)? as u32;
                let mut tsres = 1_000_000u64;
                let mut p = 8;
                while p + 4 <= body.len() {
                    let code = e.u16(body, p)?;
                    let len = e.u16(body, p + 2)? as usize;
                    if code == 0 {
                        break;
                    }
                    if code == 9 && len >= 1 && p + 4 < body.len() {
                        let v = body[p + 4];
                        tsres = if v & 0x80 != 0 {
                            1u64.checked_shl((v & 0x7f) as u32).unwrap_or(u64::MAX)
                        } else {
                            10u64.checked_pow(v as u32).unwrap_or(u64::MAX)
                        };
                    }
                    p += 4 + len.div_ceil(4) * 4;
                }
                ifaces.push((lt, tsres.max(1)));
            }
            6 | 2 => {
                // Enhanced Packet Block (6) or obsolete Packet Block (2).
                let (iface, ts_hi, ts_lo, caplen) = if btype == 6 {
                    (
                        e.u32(body, 0)? as usize,
                        e.u32(body, 4)? as u64,
                        e.u32(body, 8)? as u64,
                        e.u32(body, 12)? as usize,
                    )
                } else {
                    (
                        e.u16(body, 0)? as usize,
                        e.u32(body, 4)? as u64,
                        e.u32(body, 8)? as u64,
                        e.u32(body, 12)? as usize,
                    )
                };
                let data = body
                    .get(20..20 + caplen)
                    .ok_or_else(|| bad("truncated packet block"))?;
                let (lt, res) = *ifaces
                    .get(iface)
                    .ok_or_else(|| bad("packet block names an unknown interface"))?;
                let ticks = (ts_hi << 32) | ts_lo;
                let ts_nanos = (ticks as u128 * 1_000_000_000 / res as u128) as u64;
                frames.push(Frame {
                    number: frames.len() + 1,
                    linktype: lt,
                    ts_nanos,
                    data: data.to_vec(),
                });
            }
            3 => {
                // Simple Packet Block: interface 0, no timestamp.
                let len = e.u32(body, 0)? as usize;
                let lt = ifaces.first().map(|x| x.0).unwrap_or(linktype::ETHERNET);
                let data = body
                    .get(4..4 + len.min(body.len().saturating_sub(4)))
                    .ok_or_else(|| bad("truncated simple packet block"))?;
                frames.push(Frame {
                    number: frames.len() + 1,
                    linktype: lt,
                    ts_nanos: 0,
                    data: data.to_vec(),
                });
            }
            _ => {}
        }
        o += blen;
    }
    Ok(frames)
}

/// A UDP datagram found in a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
    pub payload: Vec<u8>,
}

/// The network-layer packet a frame carries (IPv4 or IPv6), if any.
pub fn l3_packet(linktype: u32, data: &[u8]) -> Option<&[u8]> {
    let ip = match linktype {
        linktype::ETHERNET => {
            let mut o = 12;
            let mut et = u16::from_be_bytes([*data.get(o)?, *data.get(o + 1)?]);
            // 802.1Q / 802.1ad tags.
            while et == 0x8100 || et == 0x88a8 {
                o += 4;
                et = u16::from_be_bytes([*data.get(o)?, *data.get(o + 1)?]);
            }
            if et != 0x0800 && et != 0x86dd {
                return None;
            }
            data.get(o + 2..)?
        }
        linktype::LINUX_SLL => {
            let et = u16::from_be_bytes([*data.get(14)?, *data.get(15)?]);
            if et != 0x0800 && et != 0x86dd {
                return None;
            }
            data.get(16..)?
        }
        linktype::LINUX_SLL2 => {
            let et = u16::from_be_bytes([*data.first()?, *data.get(1)?]);
            if et != 0x0800 && et != 0x86dd {
                return None;
            }
            data.get(20..)?
        }
        linktype::NULL | linktype::LOOP => data.get(4..)?,
        linktype::RAW | linktype::RAW_OLD | linktype::IPV4 | linktype::IPV6 => data,
        _ => return None,
    };
    Some(ip)
}

/// The UDP datagram carried by a frame, if it is an unfragmented IPv4/IPv6 UDP packet.
/// ICMP errors quoting UDP, fragments and everything else give `None`; use
/// [`datagrams`] to have fragments reassembled.
pub fn udp_datagram(linktype: u32, data: &[u8]) -> Option<Datagram> {
    ip_udp(l3_packet(linktype, data)?)
}

/// Every UDP datagram of a capture, IPv4 and IPv6 fragments reassembled, with the number
/// of the frame that completed it.
pub fn datagrams(frames: &[Frame]) -> Vec<(usize, Datagram)> {
    let mut r = Reassembler::default();
    let mut out = Vec::new();
    for f in frames {
        let Some(ip) = l3_packet(f.linktype, &f.data) else {
            continue;
        };
        let whole;
        let ip = match fragment_of(ip) {
            None => ip,
            Some(frag) => match r.push(frag) {
                Some(p) => {
                    whole = p;
                    &whole[..]
                }
                None => continue,
            },
        };
        if let Some(d) = ip_udp(ip) {
            out.push((f.number, d));
        }
    }
    out
}

/// One IP fragment: the identity of its datagram, where its data goes, and the header
/// to put in front of the reassembled payload.
struct Fragment<'a> {
    key: (IpAddr, IpAddr, u32),
    offset: usize,
    more: bool,
    data: &'a [u8],
    /// The unfragmentable header, rewritten as an unfragmented header for `proto`.
    header: Vec<u8>,
}

fn fragment_of(ip: &[u8]) -> Option<Fragment<'_>> {
    match ip.first()? >> 4 {
        4 => {
            let ihl = ((ip[0] & 0x0f) as usize) * 4;
            let total = (u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]) as usize).min(ip.len());
            let frag = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]);
            if frag & 0x3fff == 0 || ihl < 20 || total < ihl {
                return None;
            }
            let src = IpAddr::V4(Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]));
            let dst = IpAddr::V4(Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]));
            let id = u16::from_be_bytes([ip[4], ip[5]]) as u32 | ((ip[9] as u32) << 16);
            let mut header = ip[..ihl].to_vec();
            header[6] = 0;
            header[7] = 0;
            Some(Fragment {
                key: (src, dst, id),
                offset: ((frag & 0x1fff) as usize) * 8,
                more: frag & 0x2000 != 0,
                data: &ip[ihl..total],
                header,
            })
        }
        6 => {
            let plen = u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]) as usize;
            let end = (40 + plen).min(ip.len());
            let mut next = *ip.get(6)?;
            let mut prev_next_at = 6;
            let mut o = 40;
            for _ in 0..8 {
                match next {
                    0 | 43 | 60 => {
                        prev_next_at = o;
                        next = *ip.get(o)?;
                        o += (*ip.get(o + 1)? as usize + 1) * 8;
                    }
                    44 => {
                        let nh = *ip.get(o)?;
                        let off = u16::from_be_bytes([*ip.get(o + 2)?, *ip.get(o + 3)?]);
                        let id = u32::from_be_bytes([
                            *ip.get(o + 4)?,
                            *ip.get(o + 5)?,
                            *ip.get(o + 6)?,
                            *ip.get(o + 7)?,
                        ]);
                        let mut a = [0u8; 16];
                        a.copy_from_slice(ip.get(8..24)?);
                        let src = IpAddr::V6(Ipv6Addr::from(a));
                        a.copy_from_slice(ip.get(24..40)?);
                        let dst = IpAddr::V6(Ipv6Addr::from(a));
                        let mut header = ip[..o].to_vec();
                        header[prev_next_at] = nh;
                        return Some(Fragment {
                            key: (src, dst, id),
                            offset: ((off >> 3) as usize) * 8,
                            more: off & 1 != 0,
                            data: ip.get(o + 8..end)?,
                            header,
                        });
                    }
                    _ => return None,
                }
            }
            None
        }
        _ => None,
    }
}

/// Reassembles IP fragments with bounded memory: at most 256 datagrams in progress and
/// 65,535 octets each; the oldest datagram in progress is dropped when full.
#[derive(Default)]
struct Reassembler {
    pending: Vec<Pending>,
}

struct Pending {
    key: (IpAddr, IpAddr, u32),
    header: Option<Vec<u8>>,
    pieces: Vec<(usize, Vec<u8>)>,
    total: Option<usize>,
}

impl Reassembler {
    fn push(&mut self, f: Fragment) -> Option<Vec<u8>> {
        if f.offset + f.data.len() > 65_535 {
            return None;
        }
        let i = match self.pending.iter().position(|p| p.key == f.key) {
            Some(i) => i,
            None => {
                if self.pending.len() >= 256 {
                    self.pending.remove(0);
                }
                self.pending.push(Pending {
                    key: f.key,
                    header: None,
                    pieces: Vec::new(),
                    total: None,
                });
                self.pending.len() - 1
            }
        };
        let p = &mut self.pending[i];
        if f.offset == 0 {
            p.header = Some(f.header);
        }
        if !f.more {
            p.total = Some(f.offset + f.data.len());
        }
        p.pieces.push((f.offset, f.data.to_vec()));
        let total = p.total?;
        p.header.as_ref()?;
        p.pieces.sort_by_key(|x| x.0);
        let mut covered = 0;
        for (o, d) in &p.pieces {
            if *o > covered {
                return None;
            }
            covered = covered.max(o + d.len());
        }
        if covered < total {
            return None;
        }
        let p = self.pending.remove(i);
        let mut payload = vec![0u8; total];
        for (o, d) in &p.pieces {
            let end = (o + d.len()).min(total);
            payload[*o..end].copy_from_slice(&d[..end - o]);
        }
        let mut ip = p.header?;
        if ip[0] >> 4 == 4 {
            let len = (ip.len() + total) as u16;
            ip[2..4].copy_from_slice(&len.to_be_bytes());
        } else {
            let len = (ip.len() - 40 + total) as u16;
            ip[4..6].copy_from_slice(&len.to_be_bytes());
        }
        ip.extend_from_slice(&payload);
        Some(ip)
    }
}

fn ip_udp(ip: &[u8]) -> Option<Datagram> {
    let (src, dst, udp) = match ip.first()? >> 4 {
        4 => {
            let ihl = ((ip[0] & 0x0f) as usize) * 4;
            let total = u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]) as usize;
            let frag = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]);
            if ip.get(9)? != &17 || frag & 0x3fff != 0 || ihl < 20 {
                return None;
            }
            let end = total.min(ip.len());
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            (IpAddr::V4(src), IpAddr::V4(dst), ip.get(ihl..end)?)
        }
        6 => {
            let plen = u16::from_be_bytes([*ip.get(4)?, *ip.get(5)?]) as usize;
            let mut next = *ip.get(6)?;
            let mut o = 40;
            let end = (40 + plen).min(ip.len());
            let mut a = [0u8; 16];
            a.copy_from_slice(ip.get(8..24)?);
            let src = Ipv6Addr::from(a);
            a.copy_from_slice(ip.get(24..40)?);
            let dst = Ipv6Addr::from(a);
            // Walk a bounded number of extension headers.
            for _ in 0..8 {
                match next {
                    17 => break,
                    0 | 43 | 60 => {
                        next = *ip.get(o)?;
                        o += (*ip.get(o + 1)? as usize + 1) * 8;
                    }
                    _ => return None, // fragments and other protocols
                }
            }
            if next != 17 {
                return None;
            }
            (IpAddr::V6(src), IpAddr::V6(dst), ip.get(o..end)?)
        }
        _ => return None,
    };
    let sport = u16::from_be_bytes([*udp.first()?, *udp.get(1)?]);
    let dport = u16::from_be_bytes([*udp.get(2)?, *udp.get(3)?]);
    let ulen = u16::from_be_bytes([*udp.get(4)?, *udp.get(5)?]) as usize;
    if ulen < 8 {
        return None;
    }
    let payload = udp.get(8..ulen.min(udp.len()))?.to_vec();
    Some(Datagram {
        src,
        dst,
        sport,
        dport,
        payload,
    })
}

/// The Internet checksum (RFC 1071) of `data`, folded, starting from `sum`.
pub fn checksum(data: &[u8], mut sum: u32) -> u16 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [x] = chunks.remainder() {
        sum += (*x as u32) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The checksum of a UDP datagram over IPv6 (RFC 8200 clause 8.1): `udp` is the whole
/// datagram, its checksum field taken as zero. Never 0 (that means "none").
pub fn udp_checksum_v6(src: &[u8], dst: &[u8], udp: &[u8]) -> u16 {
    let mut sum = 17 + udp.len() as u32;
    let head = &udp[..udp.len().min(6)];
    for c in src.chunks(2).chain(dst.chunks(2)).chain(head.chunks(2)) {
        sum += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    match checksum(udp.get(8..).unwrap_or_default(), sum) {
        0 => 0xffff,
        c => c,
    }
}

/// An IP packet carrying one UDP datagram, with valid checksums.
pub fn ip_udp_packet(src: IpAddr, dst: IpAddr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let ulen = 8 + payload.len();
    let mut udp = Vec::with_capacity(ulen);
    udp.extend_from_slice(&sport.to_be_bytes());
    udp.extend_from_slice(&dport.to_be_bytes());
    udp.extend_from_slice(&(ulen as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let mut pseudo = 0u32;
    let mut add = |b: &[u8]| {
        for c in b.chunks(2) {
            pseudo += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
        }
    };
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            add(&s.octets());
            add(&d.octets());
            pseudo += 17 + ulen as u32;
            let c = match checksum(&udp, pseudo) {
                0 => 0xffff,
                c => c,
            };
            udp[6..8].copy_from_slice(&c.to_be_bytes());
            let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0];
            ip[2..4].copy_from_slice(&((20 + ulen) as u16).to_be_bytes());
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            let c = checksum(&ip, 0);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            ip.extend_from_slice(&udp);
            ip
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let c = udp_checksum_v6(&s.octets(), &d.octets(), &udp);
            udp[6..8].copy_from_slice(&c.to_be_bytes());
            let mut ip = vec![0x60, 0, 0, 0];
            ip.extend_from_slice(&(ulen as u16).to_be_bytes());
            ip.extend_from_slice(&[17, 64]);
            ip.extend_from_slice(&s.octets());
            ip.extend_from_slice(&d.octets());
            ip.extend_from_slice(&udp);
            ip
        }
        _ => panic!("ip_udp_packet: source and destination must be the same IP version"),
    }
}

/// Writes a classic pcap file (microsecond timestamps).
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    pub fn new(mut out: W, linktype: u32) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&65535u32.to_le_bytes());
        h.extend_from_slice(&linktype.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out })
    }

    pub fn write(&mut self, ts_micros: u64, data: &[u8]) -> io::Result<()> {
        let mut h = Vec::with_capacity(16);
        h.extend_from_slice(&((ts_micros / 1_000_000) as u32).to_le_bytes());
        h.extend_from_slice(&((ts_micros % 1_000_000) as u32).to_le_bytes());
        h.extend_from_slice(&(data.len() as u32).to_le_bytes());
        h.extend_from_slice(&(data.len() as u32).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(data)
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_read_raw_ip() {
        let p = ip_udp_packet(
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            8805,
            8805,
            b"hello",
        );
        let mut w = PcapWriter::new(Vec::new(), linktype::RAW).unwrap();
        w.write(1_500_000, &p).unwrap();
        let frames = read_bytes(&w.into_inner()).unwrap();
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].ts_nanos, 1_500_000_000);
        let d = udp_datagram(frames[0].linktype, &frames[0].data).unwrap();
        assert_eq!(d.payload, b"hello");
        assert_eq!((d.sport, d.dport), (8805, 8805));
        // A correct IPv4 header sums to zero.
        assert_eq!(checksum(&p[..20], 0), 0);
    }

    #[test]
    fn ipv6_udp() {
        let s: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let d: Ipv6Addr = "2001:db8::2".parse().unwrap();
        let p = ip_udp_packet(IpAddr::V6(s), IpAddr::V6(d), 2152, 2152, &[1, 2, 3]);
        let g = udp_datagram(linktype::RAW, &p).unwrap();
        assert_eq!(g.src, IpAddr::V6(s));
        assert_eq!(g.payload, vec![1, 2, 3]);
    }

    #[test]
    fn ipv4_fragments_reassemble() {
        let payload: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
        let whole = ip_udp_packet(
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            2152,
            2152,
            &payload,
        );
        // Split the UDP datagram into 1480-octet fragments, sent last first.
        let body = &whole[20..];
        let mut frames = Vec::new();
        for (k, chunk) in body.chunks(1480).enumerate().rev() {
            let mut ip = whole[..20].to_vec();
            let more = (k + 1) * 1480 < body.len();
            let frag = ((k * 1480 / 8) as u16) | if more { 0x2000 } else { 0 };
            ip[6..8].copy_from_slice(&frag.to_be_bytes());
            ip[2..4].copy_from_slice(&((20 + chunk.len()) as u16).to_be_bytes());
            ip.extend_from_slice(chunk);
            frames.push(Frame {
                number: frames.len() + 1,
                linktype: linktype::RAW,
                ts_nanos: 0,
                data: ip,
            });
        }
        assert!(udp_datagram(linktype::RAW, &frames[0].data).is_none());
        let d = datagrams(&frames);
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].0, 3);
        assert_eq!(d[0].1.payload, payload);
    }

    #[test]
    fn garbage_does_not_panic() {
        for n in 0..64 {
            let junk: Vec<u8> = (0..n).map(|i| (i * 37 + 11) as u8).collect();
            let _ = read_bytes(&junk);
            for lt in [0, 1, 101, 113, 276, 228] {
                let _ = udp_datagram(lt, &junk);
                let f = Frame {
                    number: 1,
                    linktype: lt,
                    ts_nanos: 0,
                    data: junk.clone(),
                };
                let _ = datagrams(&[f.clone(), f]);
            }
        }
    }
}
