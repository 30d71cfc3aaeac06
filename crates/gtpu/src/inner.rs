//! The T-PDU of a G-PDU (TS 29.281 clause 6.1): the user packet, and a look at its IP
//! header for printing.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

/// The T-PDU carried by a G-PDU. Serializes as its length and, if it starts with an
/// IPv4 or IPv6 header, the inner IP version, protocol and addresses (not the octets).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TPdu<'a>(pub &'a [u8]);

impl<'a> TPdu<'a> {
    /// The octets.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.0
    }

    /// The inner IP header summary, if the T-PDU starts with one.
    pub fn ip(&self) -> Option<InnerIp> {
        inner_ip(self.0)
    }
}

impl Serialize for TPdu<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("TPdu", 2)?;
        s.serialize_field("length", &self.0.len())?;
        match self.ip() {
            Some(ip) => s.serialize_field("ip", &ip)?,
            None => s.skip_field("ip")?,
        }
        s.end()
    }
}

/// Version, protocol and addresses of an IP header (RFC 791, RFC 8200).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct InnerIp {
    /// 4 or 6.
    pub version: u8,
    /// IPv4 Protocol or IPv6 Next Header.
    pub protocol: u8,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
}

/// Reads the version, protocol and addresses of the IP header at the start of
/// `packet`; `None` if it is not a whole IPv4 or IPv6 fixed header.
pub fn inner_ip(packet: &[u8]) -> Option<InnerIp> {
    let version = packet.first()? >> 4;
    match version {
        4 => {
            let h = packet.get(..20)?;
            let addr = |i: usize| IpAddr::V4(Ipv4Addr::new(h[i], h[i + 1], h[i + 2], h[i + 3]));
            Some(InnerIp {
                version,
                protocol: h[9],
                src: addr(12),
                dst: addr(16),
            })
        }
        6 => {
            let h = packet.get(..40)?;
            let addr = |i: usize| {
                let mut a = [0u8; 16];
                a.copy_from_slice(&h[i..i + 16]);
                IpAddr::V6(Ipv6Addr::from(a))
            };
            Some(InnerIp {
                version,
                protocol: h[6],
                src: addr(8),
                dst: addr(24),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_and_ipv6() {
        // From the 5g-roaming-hr capture: ICMP echo request 10.46.0.2 -> 10.45.0.1.
        let v4 = [
            0x45, 0x00, 0x00, 0x1c, 0x69, 0x98, 0x00, 0x00, 0xff, 0x01, 0x3d, 0xeb, 0x0a, 0x2e,
            0x00, 0x02, 0x0a, 0x2d, 0x00, 0x01,
        ];
        assert_eq!(
            inner_ip(&v4),
            Some(InnerIp {
                version: 4,
                protocol: 1,
                src: "10.46.0.2".parse().unwrap(),
                dst: "10.45.0.1".parse().unwrap(),
            })
        );
        assert_eq!(inner_ip(&v4[..19]), None);
        // Router solicitation fe80::2 -> ff02::2 (ICMPv6).
        let mut v6 = vec![0x60, 0, 0, 0, 0x00, 0x08, 0x3a, 0xff];
        v6.extend_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        v6.extend_from_slice(&[0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        let ip = inner_ip(&v6).unwrap();
        assert_eq!(ip.version, 6);
        assert_eq!(ip.protocol, 58);
        assert_eq!(ip.src, "fe80::2".parse::<IpAddr>().unwrap());
        assert_eq!(ip.dst, "ff02::2".parse::<IpAddr>().unwrap());
        assert_eq!(inner_ip(&[]), None);
        assert_eq!(inner_ip(&[0x50; 40]), None);
    }
}
