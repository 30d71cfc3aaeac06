//! Frames for application detection tests (docs/application-detection.md): IPv4 TCP and
//! UDP packets, in a G-PDU (uplink) or an Ethernet frame (downlink), DNS answers, TLS
//! ClientHellos and HTTP requests.
#![allow(dead_code)] // each test binary uses part of it

use std::net::Ipv4Addr;

use super::{GNB, N3};

fn eth(ethertype: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 8];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An IPv4 TCP packet (ACK|PSH, no options) carrying `payload`.
pub fn ip_tcp(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut tcp = Vec::with_capacity(20 + payload.len());
    tcp.extend_from_slice(&sport.to_be_bytes());
    tcp.extend_from_slice(&dport.to_be_bytes());
    tcp.extend_from_slice(&1u32.to_be_bytes());
    tcp.extend_from_slice(&1u32.to_be_bytes());
    tcp.extend_from_slice(&[0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    tcp.extend_from_slice(payload);
    let total = (20 + tcp.len()) as u16;
    let mut ip = vec![0x45, 0, 0, 0, 0, 1, 0x40, 0, 64, 6, 0, 0];
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&src.octets());
    ip.extend_from_slice(&dst.octets());
    let c = capture::checksum(&ip, 0);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    ip.extend(tcp);
    ip
}

/// An IPv4 UDP packet.
pub fn ip_udp(src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    capture::ip_udp_packet(src.into(), dst.into(), sport, dport, payload)
}

/// `inner` in a G-PDU from the gNB on `teid` (PDU Session Container, QFI 1).
pub fn uplink(teid: u32, inner: &[u8]) -> Vec<u8> {
    let mut g = vec![0x34, 0xff];
    g.extend_from_slice(&((inner.len() + 8) as u16).to_be_bytes());
    g.extend_from_slice(&teid.to_be_bytes());
    g.extend_from_slice(&[0, 0, 0, 0x85, 1, 0x10, 1, 0]);
    g.extend_from_slice(inner);
    let mut f = eth(0x0800);
    f.extend(capture::ip_udp_packet(
        GNB.into(),
        N3.into(),
        2152,
        2152,
        &g,
    ));
    f
}

/// `inner` as it arrives from the data network.
pub fn downlink(inner: &[u8]) -> Vec<u8> {
    let mut f = eth(0x0800);
    f.extend_from_slice(inner);
    f
}

/// A name's wire form (labels, then 0).
pub fn dns_name(name: &str) -> Vec<u8> {
    let mut v = Vec::new();
    for l in name.split('.') {
        v.push(l.len() as u8);
        v.extend_from_slice(l.as_bytes());
    }
    v.push(0);
    v
}

/// A DNS response to `question` (type A) with a CNAME to `cname` (owner compressed to
/// the question) and A records for `addrs` (owner compressed), each with `ttl`.
pub fn dns_answer(question: &str, cname: Option<&str>, addrs: &[Ipv4Addr], ttl: u32) -> Vec<u8> {
    let n = addrs.len() + usize::from(cname.is_some());
    let mut m = vec![0x12, 0x34, 0x81, 0x80, 0, 1, 0, n as u8, 0, 0, 0, 0];
    m.extend(dns_name(question));
    m.extend_from_slice(&[0, 1, 0, 1]);
    if let Some(c) = cname {
        let data = dns_name(c);
        m.extend_from_slice(&[0xc0, 12, 0, 5, 0, 1]);
        m.extend_from_slice(&ttl.to_be_bytes());
        m.extend_from_slice(&(data.len() as u16).to_be_bytes());
        m.extend(data);
    }
    for a in addrs {
        m.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1]);
        m.extend_from_slice(&ttl.to_be_bytes());
        m.extend_from_slice(&[0, 4]);
        m.extend_from_slice(&a.octets());
    }
    m
}

/// A TLS 1.3-style ClientHello record with server_name `sni` after a few other
/// extensions.
pub fn client_hello(sni: &str) -> Vec<u8> {
    let mut exts = Vec::new();
    // supported_groups, ec_point_formats: before the server_name.
    exts.extend_from_slice(&[0x00, 0x0a, 0x00, 0x04, 0x00, 0x02, 0x00, 0x1d]);
    exts.extend_from_slice(&[0x00, 0x0b, 0x00, 0x02, 0x01, 0x00]);
    let name = sni.as_bytes();
    let mut sn = Vec::new();
    sn.extend_from_slice(&((name.len() + 3) as u16).to_be_bytes());
    sn.push(0);
    sn.extend_from_slice(&(name.len() as u16).to_be_bytes());
    sn.extend_from_slice(name);
    exts.extend_from_slice(&[0x00, 0x00]);
    exts.extend_from_slice(&(sn.len() as u16).to_be_bytes());
    exts.extend(sn);
    let mut body = vec![0x03, 0x03];
    body.extend_from_slice(&[7; 32]);
    body.push(32);
    body.extend_from_slice(&[9; 32]);
    body.extend_from_slice(&[0, 4, 0x13, 0x01, 0x13, 0x02]);
    body.extend_from_slice(&[1, 0]);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend(exts);
    let mut hs = vec![0x01, 0];
    hs.extend_from_slice(&(body.len() as u16).to_be_bytes());
    hs.extend(body);
    let mut rec = vec![0x16, 0x03, 0x01];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend(hs);
    rec
}

/// An HTTP/1.1 GET of `target` with Host `host`.
pub fn http_get(host: &str, target: &str) -> Vec<u8> {
    format!("GET {target} HTTP/1.1\r\nUser-Agent: t\r\nHost: {host}\r\nAccept: */*\r\n\r\n")
        .into_bytes()
}
