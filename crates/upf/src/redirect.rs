//! Redirection of HTTP (TS 29.244 clause 5.4.7, Redirect Information clause 8.2.20): a
//! FAR that forwards with Redirect Information sends none of its uplink traffic on. The
//! data path hands its TCP segments to upfd (UDP and the rest it drops, counted as
//! `redirect_not_http`), and upfd answers through the tunnel as a minimal TCP endpoint:
//! SYN-ACK to a SYN, then to an HTTP request a `302 Found` whose Location is the
//! Redirect Server Address, with FIN; the client's FIN is acknowledged. Anything else
//! the client sends on the flow (a TLS ClientHello, ...) is dropped and counted.
//!
//! The endpoint keeps no state: its initial sequence number is a keyed hash of the
//! connection's addresses and ports (as SYN cookies are), and every later answer takes
//! its sequence number from the client's acknowledgement. A flood of SYNs costs one
//! answer each and no memory, and a restart of upfd does not break a connection.
//!
//! What upfd answers is a downlink IP packet from the server to the UE: it goes back
//! through the data path as if it came from N6, so the session's downlink PDR and FAR
//! put it in the tunnel (and its URRs count it).

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use pfcp::ie::RedirectInformation;

/// Redirect Address Type values (clause 8.2.20).
pub mod address_type {
    pub const IPV4: u8 = 0;
    pub const IPV6: u8 = 1;
    pub const URL: u8 = 2;
    pub const SIP_URI: u8 = 3;
    pub const IPV4_AND_IPV6: u8 = 4;
}

/// Why a Redirect Information cannot be applied (words for the rejection).
pub fn check(r: &RedirectInformation) -> Result<(), String> {
    let text = |t: &pfcp::ie::Text| String::from_utf8_lossy(&t.0).into_owned();
    match r.address_type & 0x0f {
        address_type::IPV4 => parse_v4(&r.server_address).map(|_| ()).ok_or_else(|| {
            format!(
                "Redirect Server Address {:?} is not an IPv4 address",
                text(&r.server_address)
            )
        }),
        address_type::IPV6 => parse_v6(&r.server_address).map(|_| ()).ok_or_else(|| {
            format!(
                "Redirect Server Address {:?} is not an IPv6 address",
                text(&r.server_address)
            )
        }),
        address_type::URL => url(&r.server_address).map(|_| ()).ok_or_else(|| {
            format!(
                "Redirect Server Address {:?} is not a URL (printable ASCII, no spaces, a scheme)",
                text(&r.server_address)
            )
        }),
        address_type::SIP_URI => Err(
            "redirection to a SIP URI is not supported: upfd redirects HTTP requests only".into(),
        ),
        address_type::IPV4_AND_IPV6 => {
            let other = r.other_server_address.as_ref();
            match (parse_v4(&r.server_address), other.and_then(parse_v6)) {
                (Some(_), Some(_)) => Ok(()),
                _ => Err(
                    "Redirect Address Type 4 needs an IPv4 Redirect Server Address and an IPv6 Other Redirect Server Address"
                        .into(),
                ),
            }
        }
        t => Err(format!("Redirect Address Type {t} is spare")),
    }
}

fn parse_v4(t: &pfcp::ie::Text) -> Option<Ipv4Addr> {
    core::str::from_utf8(&t.0).ok()?.parse().ok()
}

fn parse_v6(t: &pfcp::ie::Text) -> Option<Ipv6Addr> {
    core::str::from_utf8(&t.0).ok()?.parse().ok()
}

/// A URL fit for a Location header: printable ASCII without spaces (no header can be
/// smuggled in), with a scheme.
fn url(t: &pfcp::ie::Text) -> Option<&str> {
    let s = core::str::from_utf8(&t.0).ok()?;
    let ok = !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic()) && s.contains("://");
    ok.then_some(s)
}

/// The Location a client of this IP version is sent to; None if the Redirect
/// Information does not pass [`check`].
pub fn location(r: &RedirectInformation, client_v6: bool) -> Option<String> {
    match r.address_type & 0x0f {
        address_type::IPV4 => parse_v4(&r.server_address).map(|a| format!("http://{a}/")),
        address_type::IPV6 => parse_v6(&r.server_address).map(|a| format!("http://[{a}]/")),
        address_type::URL => url(&r.server_address).map(str::to_string),
        address_type::IPV4_AND_IPV6 if client_v6 => r
            .other_server_address
            .as_ref()
            .and_then(parse_v6)
            .map(|a| format!("http://[{a}]/")),
        address_type::IPV4_AND_IPV6 => parse_v4(&r.server_address).map(|a| format!("http://{a}/")),
        _ => None,
    }
}

/// The response to an HTTP request: `302 Found` to `location`, closing.
pub fn http_response(location: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
    )
    .into_bytes()
}

/// The methods an HTTP/1.x request line starts with (RFC 9110 clause 9).
const METHODS: [&[u8]; 8] = [
    b"GET ",
    b"HEAD ",
    b"POST ",
    b"PUT ",
    b"DELETE ",
    b"OPTIONS ",
    b"PATCH ",
    b"TRACE ",
];

/// What upfd does with an uplink packet of a redirected flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// Send this downlink IP packet to the UE: `what` says which answer it is.
    Send { what: Sent, packet: Vec<u8> },
    /// Not HTTP (a TLS ClientHello, data before a SYN was answered, not TCP): dropped,
    /// counted.
    NotHttp,
    /// Nothing to answer (a bare ACK, a RST, a malformed packet).
    Nothing,
}

/// Which answer was sent (the metric's label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Sent {
    SynAck,
    Redirect,
    FinAck,
}

impl Sent {
    pub fn label(self) -> &'static str {
        match self {
            Sent::SynAck => "syn_ack",
            Sent::Redirect => "http_302",
            Sent::FinAck => "fin_ack",
        }
    }
}

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// The segment's parts upfd answers from.
struct Segment<'a> {
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    dport: u16,
    seq: u32,
    ack: u32,
    flags: u8,
    payload: &'a [u8],
}

/// The TCP segment in uplink IP packet `p` (IPv4 without fragments, or IPv6 with TCP as
/// its first Next Header), checksums not verified (the UE's stack made them; a corrupt
/// one gets an answer the client drops).
fn segment(p: &[u8]) -> Option<Segment<'_>> {
    let (src, dst, l4) = match p.first()? >> 4 {
        4 => {
            let ihl = usize::from(p[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([*p.get(2)?, *p.get(3)?]));
            let frag = u16::from_be_bytes([*p.get(6)?, *p.get(7)?]);
            if ihl < 20 || *p.get(9)? != 6 || frag & 0x3fff != 0 || total < ihl {
                return None;
            }
            let src: [u8; 4] = p.get(12..16)?.try_into().ok()?;
            let dst: [u8; 4] = p.get(16..20)?.try_into().ok()?;
            (IpAddr::from(src), IpAddr::from(dst), p.get(ihl..total)?)
        }
        6 => {
            let len = usize::from(u16::from_be_bytes([*p.get(4)?, *p.get(5)?]));
            if *p.get(6)? != 6 {
                return None;
            }
            let src: [u8; 16] = p.get(8..24)?.try_into().ok()?;
            let dst: [u8; 16] = p.get(24..40)?.try_into().ok()?;
            (IpAddr::from(src), IpAddr::from(dst), p.get(40..40 + len)?)
        }
        _ => return None,
    };
    let off = usize::from(*l4.get(12)? >> 4) * 4;
    if off < 20 {
        return None;
    }
    Some(Segment {
        src,
        dst,
        sport: u16::from_be_bytes([l4[0], l4[1]]),
        dport: u16::from_be_bytes([l4[2], l4[3]]),
        seq: u32::from_be_bytes(l4[4..8].try_into().ok()?),
        ack: u32::from_be_bytes(l4[8..12].try_into().ok()?),
        flags: *l4.get(13)?,
        payload: l4.get(off..)?,
    })
}

/// The endpoint's initial sequence number for a connection: a keyed hash (SipHash-like
/// mixing of `secret` and the four-tuple), so that no state is kept.
fn isn(secret: u64, s: &Segment<'_>) -> u32 {
    let mut h = secret ^ 0x9e37_79b9_7f4a_7c15;
    let mut mix = |x: u64| {
        h ^= x;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
    };
    for a in [s.src, s.dst] {
        match a {
            IpAddr::V4(a) => mix(u64::from(u32::from(a))),
            IpAddr::V6(a) => {
                let v = u128::from(a);
                mix(v as u64);
                mix((v >> 64) as u64);
            }
        }
    }
    mix((u64::from(s.sport) << 16) | u64::from(s.dport));
    h as u32
}

/// upfd's answer to uplink packet `p` of a flow redirected to `location`.
pub fn answer(p: &[u8], location: &str, secret: u64) -> Answer {
    let Some(s) = segment(p) else {
        return Answer::NotHttp;
    };
    if s.flags & RST != 0 {
        return Answer::Nothing;
    }
    if s.flags & SYN != 0 {
        if s.flags & ACK != 0 {
            return Answer::Nothing;
        }
        let packet = reply(&s, isn(secret, &s), s.seq.wrapping_add(1), SYN | ACK, &[]);
        return Answer::Send {
            what: Sent::SynAck,
            packet,
        };
    }
    // Every later segment acknowledges our SYN: it must carry the ISN + 1 at least.
    let ours = isn(secret, &s).wrapping_add(1);
    if s.flags & ACK == 0 || s.ack.wrapping_sub(ours) > 1 << 16 {
        return if s.payload.is_empty() {
            Answer::Nothing
        } else {
            Answer::NotHttp
        };
    }
    let fin = u32::from(s.flags & FIN != 0);
    let after = s.seq.wrapping_add(s.payload.len() as u32).wrapping_add(fin);
    if !s.payload.is_empty() {
        if s.ack != ours {
            // Data after our response: the client goes on talking; acknowledge it.
            let packet = reply(&s, s.ack, after, ACK, &[]);
            return Answer::Send {
                what: Sent::FinAck,
                packet,
            };
        }
        if !METHODS.iter().any(|m| s.payload.starts_with(m)) {
            return Answer::NotHttp;
        }
        let body = http_response(location);
        let packet = reply(&s, ours, after, ACK | PSH | FIN, &body);
        return Answer::Send {
            what: Sent::Redirect,
            packet,
        };
    }
    if fin == 1 {
        let packet = reply(&s, s.ack, after, ACK, &[]);
        return Answer::Send {
            what: Sent::FinAck,
            packet,
        };
    }
    Answer::Nothing
}

/// A downlink IP packet answering segment `s`: server to UE, `flags`, `payload`.
fn reply(s: &Segment<'_>, seq: u32, ack: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    // MSS 1360 on the SYN-ACK: fits any tunnel over a 1500-octet path.
    let opts: &[u8] = if flags & SYN != 0 {
        &[2, 4, 0x05, 0x50]
    } else {
        &[]
    };
    let tcp_len = 20 + opts.len() + payload.len();
    let mut tcp = Vec::with_capacity(tcp_len);
    tcp.extend_from_slice(&s.dport.to_be_bytes());
    tcp.extend_from_slice(&s.sport.to_be_bytes());
    tcp.extend_from_slice(&seq.to_be_bytes());
    tcp.extend_from_slice(&ack.to_be_bytes());
    tcp.push((((20 + opts.len()) / 4) as u8) << 4);
    tcp.push(flags);
    tcp.extend_from_slice(&65535u16.to_be_bytes());
    tcp.extend_from_slice(&[0, 0, 0, 0]);
    tcp.extend_from_slice(opts);
    tcp.extend_from_slice(payload);
    // The answer goes from the server (the segment's destination) to the UE.
    let (src, dst) = (s.dst, s.src);
    let mut sum = pseudo_sum(src, dst, tcp_len as u32);
    sum = add(sum, &tcp);
    let c = !fold(sum);
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    let mut p = Vec::with_capacity(40 + tcp_len);
    match (src, dst) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            p.extend_from_slice(&[0x45, 0]);
            p.extend_from_slice(&((20 + tcp_len) as u16).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0x40, 0, 64, 6, 0, 0]);
            p.extend_from_slice(&a.octets());
            p.extend_from_slice(&b.octets());
            let c = !fold(add(0, &p));
            p[10..12].copy_from_slice(&c.to_be_bytes());
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            p.extend_from_slice(&[0x60, 0, 0, 0]);
            p.extend_from_slice(&(tcp_len as u16).to_be_bytes());
            p.extend_from_slice(&[6, 64]);
            p.extend_from_slice(&a.octets());
            p.extend_from_slice(&b.octets());
        }
        _ => unreachable!("one IP version per packet"),
    }
    p.extend_from_slice(&tcp);
    p
}

fn add(mut sum: u32, b: &[u8]) -> u32 {
    for c in b.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from(c[0]) << 8
        };
        sum = sum.wrapping_add(u32::from(w));
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

fn pseudo_sum(src: IpAddr, dst: IpAddr, len: u32) -> u32 {
    let mut sum = 0;
    for a in [src, dst] {
        sum = match a {
            IpAddr::V4(a) => add(sum, &a.octets()),
            IpAddr::V6(a) => add(sum, &a.octets()),
        };
    }
    sum = add(sum, &len.to_be_bytes());
    add(sum, &[0, 6])
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfcp::ie::Text;

    fn info(t: u8, a: &str, other: Option<&str>) -> RedirectInformation {
        RedirectInformation {
            address_type: t,
            server_address: Text(a.as_bytes().to_vec()),
            other_server_address: other.map(|o| Text(o.as_bytes().to_vec())),
        }
    }

    #[test]
    fn addresses_and_urls_give_locations_sip_uris_are_refused() {
        let v4 = info(0, "192.0.2.80", None);
        assert_eq!(check(&v4), Ok(()));
        assert_eq!(location(&v4, false).unwrap(), "http://192.0.2.80/");
        let v6 = info(1, "2001:db8::80", None);
        assert_eq!(location(&v6, true).unwrap(), "http://[2001:db8::80]/");
        let u = info(2, "https://portal.example/welcome?x=1", None);
        assert_eq!(
            location(&u, false).unwrap(),
            "https://portal.example/welcome?x=1"
        );
        let both = info(4, "192.0.2.80", Some("2001:db8::80"));
        assert_eq!(check(&both), Ok(()));
        assert_eq!(location(&both, false).unwrap(), "http://192.0.2.80/");
        assert_eq!(location(&both, true).unwrap(), "http://[2001:db8::80]/");
        let sip = info(3, "sip:portal@example.org", None);
        assert!(check(&sip).unwrap_err().contains("SIP URI"));
        for bad in [
            info(0, "2001:db8::80", None),
            info(1, "192.0.2.80", None),
            info(2, "http://a/\r\nSet-Cookie: x", None),
            info(2, "portal.example", None),
            info(4, "192.0.2.80", None),
            info(5, "192.0.2.80", None),
        ] {
            assert!(check(&bad).is_err(), "{bad:?}");
            assert!(
                location(&bad, false).is_none() || bad.address_type == 4,
                "{bad:?}"
            );
        }
    }

    /// A TCP segment from the UE (10.45.0.2:40000) to the server (198.51.100.7:80).
    fn uplink(flags: u8, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
        let s = Segment {
            src: "198.51.100.7".parse().unwrap(),
            dst: "10.45.0.2".parse().unwrap(),
            sport: 80,
            dport: 40000,
            seq,
            ack,
            flags,
            payload,
        };
        // reply() builds server -> UE from a segment UE -> server: swap to get UE -> server.
        reply(&s, seq, ack, flags, payload)
    }

    fn parsed(p: &[u8]) -> (u8, u32, u32, Vec<u8>) {
        let s = segment(p).unwrap();
        (s.flags, s.seq, s.ack, s.payload.to_vec())
    }

    /// The checksums of an IPv4 packet upfd builds verify (sum to 0xffff).
    fn checksums_ok(p: &[u8]) -> bool {
        let ihl = usize::from(p[0] & 0x0f) * 4;
        let ip_ok = fold(add(0, &p[..ihl])) == 0xffff;
        let src = IpAddr::from(<[u8; 4]>::try_from(&p[12..16]).unwrap());
        let dst = IpAddr::from(<[u8; 4]>::try_from(&p[16..20]).unwrap());
        let tcp = &p[ihl..];
        let tcp_ok = fold(add(pseudo_sum(src, dst, tcp.len() as u32), tcp)) == 0xffff;
        ip_ok && tcp_ok
    }

    #[test]
    fn a_connection_gets_syn_ack_then_the_302_with_fin_then_its_fin_acknowledged() {
        let loc = "http://192.0.2.80/";
        let secret = 7;
        let Answer::Send { what, packet } = answer(&uplink(SYN, 1000, 0, &[]), loc, secret) else {
            panic!()
        };
        assert_eq!(what, Sent::SynAck);
        assert!(checksums_ok(&packet));
        let (flags, isn, ack, _) = parsed(&packet);
        assert_eq!((flags, ack), (SYN | ACK, 1001));
        assert_eq!(&packet[12..16], &[198, 51, 100, 7], "from the server");
        assert_eq!(&packet[16..20], &[10, 45, 0, 2], "to the UE");
        // The same SYN again: the same answer (no state).
        assert_eq!(
            answer(&uplink(SYN, 1000, 0, &[]), loc, secret),
            Answer::Send {
                what,
                packet: packet.clone()
            }
        );
        // The handshake's ACK: nothing.
        let a = isn.wrapping_add(1);
        assert_eq!(
            answer(&uplink(ACK, 1001, a, &[]), loc, secret),
            Answer::Nothing
        );
        let req = b"GET / HTTP/1.1\r\nHost: 198.51.100.7\r\n\r\n";
        let Answer::Send { what, packet } = answer(&uplink(ACK | PSH, 1001, a, req), loc, secret)
        else {
            panic!()
        };
        assert_eq!(what, Sent::Redirect);
        assert!(checksums_ok(&packet));
        let (flags, seq, ack, body) = parsed(&packet);
        assert_eq!(
            (flags, seq, ack),
            (ACK | PSH | FIN, a, 1001 + req.len() as u32)
        );
        let text = String::from_utf8(body.clone()).unwrap();
        assert!(text.starts_with("HTTP/1.1 302 Found\r\nLocation: http://192.0.2.80/\r\n"));
        // The client's FIN after reading it: acknowledged from where it says we are.
        let our_end = a.wrapping_add(body.len() as u32 + 1);
        let fin_seq = 1001 + req.len() as u32;
        let Answer::Send { what, packet } =
            answer(&uplink(ACK | FIN, fin_seq, our_end, &[]), loc, secret)
        else {
            panic!()
        };
        assert_eq!(what, Sent::FinAck);
        let (flags, seq, ack, _) = parsed(&packet);
        assert_eq!((flags, seq, ack), (ACK, our_end, fin_seq + 1));
        // A RST: nothing.
        assert_eq!(
            answer(&uplink(RST, fin_seq, 0, &[]), loc, secret),
            Answer::Nothing
        );
    }

    #[test]
    fn tls_data_without_a_handshake_and_other_protocols_are_not_http() {
        let loc = "http://192.0.2.80/";
        let Answer::Send { packet, .. } = answer(&uplink(SYN, 5, 0, &[]), loc, 1) else {
            panic!()
        };
        let a = parsed(&packet).1.wrapping_add(1);
        let hello = [0x16, 0x03, 0x01, 0x00, 0x40, 0x01];
        assert_eq!(
            answer(&uplink(ACK | PSH, 6, a, &hello), loc, 1),
            Answer::NotHttp
        );
        // Data acknowledging a SYN-ACK this endpoint never sent.
        let get = b"GET / HTTP/1.1\r\n\r\n";
        assert_eq!(
            answer(&uplink(ACK | PSH, 6, a.wrapping_add(1 << 20), get), loc, 1),
            Answer::NotHttp
        );
        // Not TCP (UDP), and not IP.
        let mut udp = uplink(SYN, 5, 0, &[]);
        udp[9] = 17;
        assert_eq!(answer(&udp, loc, 1), Answer::NotHttp);
        assert_eq!(answer(&[0x00; 30], loc, 1), Answer::NotHttp);
        assert_eq!(answer(&[], loc, 1), Answer::NotHttp);
    }

    #[test]
    fn ipv6_connections_get_answers_with_valid_checksums() {
        let s = Segment {
            src: "2001:db8::7".parse().unwrap(),
            dst: "2001:db8:45::2".parse().unwrap(),
            sport: 80,
            dport: 40001,
            seq: 9,
            ack: 0,
            flags: SYN,
            payload: &[],
        };
        let syn = reply(&s, 9, 0, SYN, &[]);
        let Answer::Send { what, packet } = answer(&syn, "http://[2001:db8::80]/", 3) else {
            panic!()
        };
        assert_eq!(what, Sent::SynAck);
        assert_eq!(packet[0] >> 4, 6);
        let tcp = &packet[40..];
        let src = IpAddr::from(<[u8; 16]>::try_from(&packet[8..24]).unwrap());
        let dst = IpAddr::from(<[u8; 16]>::try_from(&packet[24..40]).unwrap());
        assert_eq!(
            fold(add(pseudo_sum(src, dst, tcp.len() as u32), tcp)),
            0xffff
        );
        assert_eq!(
            src,
            "2001:db8::7".parse::<IpAddr>().unwrap(),
            "from the server"
        );
        assert_eq!(
            dst,
            "2001:db8:45::2".parse::<IpAddr>().unwrap(),
            "to the UE"
        );
    }
}
