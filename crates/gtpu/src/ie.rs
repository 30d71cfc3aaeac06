//! GTP-U information elements (TS 29.281 clause 8).
//!
//! Types below 128 are TV: type octet, then a value whose length the type fixes
//! (clause 8.1). Types from 128 on are TLV: type octet, 2-octet length, value; except
//! the Extension Header Type List (type 141, clause 8.5), whose length is one octet.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::util::hex;

/// IE type values (TS 29.281 clause 8.1, table 8.1-1).
pub mod ie_type {
    /// Recovery (TV, clause 8.2).
    pub const RECOVERY: u8 = 14;
    /// Tunnel Endpoint Identifier Data I (TV, clause 8.3).
    pub const TEID_DATA_I: u8 = 16;
    /// GTP-U Peer Address (TLV, clause 8.4).
    pub const GTPU_PEER_ADDRESS: u8 = 133;
    /// Extension Header Type List (type, 1-octet length, value; clause 8.5).
    pub const EXTENSION_HEADER_TYPE_LIST: u8 = 141;
    /// Private Extension (TLV, clause 8.6).
    pub const PRIVATE_EXTENSION: u8 = 255;
}

/// Name of an IE type of TS 29.281 clause 8, if it has one.
pub fn ie_type_name(t: u8) -> Option<&'static str> {
    Some(match t {
        ie_type::RECOVERY => "Recovery",
        ie_type::TEID_DATA_I => "Tunnel Endpoint Identifier Data I",
        ie_type::GTPU_PEER_ADDRESS => "GTP-U Peer Address",
        ie_type::EXTENSION_HEADER_TYPE_LIST => "Extension Header Type List",
        ie_type::PRIVATE_EXTENSION => "Private Extension",
        _ => return None,
    })
}

/// A Private Extension IE (TS 29.281 clause 8.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct PrivateExtension<'a> {
    /// Extension Identifier: an IANA private enterprise number.
    pub extension_identifier: u16,
    /// Extension Value.
    #[serde(serialize_with = "hex")]
    pub value: &'a [u8],
}

/// A parsed information element (TS 29.281 clause 8).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "ie", rename_all = "snake_case")]
pub enum Ie<'a> {
    /// Recovery, type 14 (clause 8.2): the restart counter, 0 in GTP-U.
    Recovery {
        /// Restart counter.
        restart_counter: u8,
    },
    /// Tunnel Endpoint Identifier Data I, type 16 (clause 8.3).
    TeidDataI {
        /// The TEID.
        teid: u32,
    },
    /// GTP-U Peer Address, type 133 (clause 8.4): an IPv4 or IPv6 address.
    GtpuPeerAddress {
        /// The address.
        address: IpAddr,
    },
    /// Extension Header Type List, type 141 (clause 8.5).
    ExtensionHeaderTypeList {
        /// The extension header types.
        types: &'a [u8],
    },
    /// Private Extension, type 255 (clause 8.6).
    PrivateExtension(PrivateExtension<'a>),
    /// A TLV IE of another type (>= 128), kept raw.
    Unknown {
        /// The IE type.
        ie_type: u8,
        /// The value.
        #[serde(serialize_with = "hex")]
        value: &'a [u8],
    },
}

fn truncated(offset: usize, needed: usize, available: usize) -> Error {
    Error::Truncated {
        what: "information element",
        offset,
        needed,
        available,
    }
}

impl<'a> Ie<'a> {
    /// The IE type.
    pub fn ie_type(&self) -> u8 {
        match self {
            Ie::Recovery { .. } => ie_type::RECOVERY,
            Ie::TeidDataI { .. } => ie_type::TEID_DATA_I,
            Ie::GtpuPeerAddress { .. } => ie_type::GTPU_PEER_ADDRESS,
            Ie::ExtensionHeaderTypeList { .. } => ie_type::EXTENSION_HEADER_TYPE_LIST,
            Ie::PrivateExtension(_) => ie_type::PRIVATE_EXTENSION,
            Ie::Unknown { ie_type, .. } => *ie_type,
        }
    }

    /// Parses the IE at the start of `data`, which sits at offset `base` in the
    /// message (for error offsets). Returns the IE and its length on the wire.
    pub fn parse(data: &'a [u8], base: usize) -> Result<(Ie<'a>, usize)> {
        let Some(&t) = data.first() else {
            return Err(truncated(base, 1, 0));
        };
        let fixed = |n: usize| -> Result<&'a [u8]> {
            data.get(1..1 + n)
                .ok_or_else(|| truncated(base, 1 + n, data.len()))
        };
        match t {
            ie_type::RECOVERY => {
                let v = fixed(1)?;
                return Ok((
                    Ie::Recovery {
                        restart_counter: v[0],
                    },
                    2,
                ));
            }
            ie_type::TEID_DATA_I => {
                let v = fixed(4)?;
                let teid = u32::from_be_bytes([v[0], v[1], v[2], v[3]]);
                return Ok((Ie::TeidDataI { teid }, 5));
            }
            ie_type::EXTENSION_HEADER_TYPE_LIST => {
                let n = usize::from(fixed(1)?[0]);
                let types = data
                    .get(2..2 + n)
                    .ok_or_else(|| truncated(base, 2 + n, data.len()))?;
                return Ok((Ie::ExtensionHeaderTypeList { types }, 2 + n));
            }
            _ if t < 128 => {
                return Err(Error::UnknownTvIe {
                    ie_type: t,
                    offset: base,
                })
            }
            _ => {}
        }
        let l = fixed(2)?;
        let length = usize::from(u16::from_be_bytes([l[0], l[1]]));
        let value = data
            .get(3..3 + length)
            .ok_or_else(|| truncated(base, 3 + length, data.len()))?;
        let bad_length = |reason| Error::InvalidIeLength {
            ie_type: t,
            offset: base,
            length,
            reason,
        };
        let ie = match t {
            ie_type::GTPU_PEER_ADDRESS => {
                let address = if let Ok(v4) = <[u8; 4]>::try_from(value) {
                    IpAddr::V4(Ipv4Addr::from(v4))
                } else if let Ok(v6) = <[u8; 16]>::try_from(value) {
                    IpAddr::V6(Ipv6Addr::from(v6))
                } else {
                    return Err(bad_length(
                        "GTP-U Peer Address is 4 (IPv4) or 16 (IPv6) octets",
                    ));
                };
                Ie::GtpuPeerAddress { address }
            }
            ie_type::PRIVATE_EXTENSION => {
                if value.len() < 2 {
                    return Err(bad_length(
                        "Private Extension needs its 2-octet Extension Identifier",
                    ));
                }
                Ie::PrivateExtension(PrivateExtension {
                    extension_identifier: u16::from_be_bytes([value[0], value[1]]),
                    value: &value[2..],
                })
            }
            _ => Ie::Unknown { ie_type: t, value },
        };
        Ok((ie, 3 + length))
    }

    /// Length on the wire.
    pub fn buffer_len(&self) -> usize {
        match self {
            Ie::Recovery { .. } => 2,
            Ie::TeidDataI { .. } => 5,
            Ie::GtpuPeerAddress { address } => match address {
                IpAddr::V4(_) => 3 + 4,
                IpAddr::V6(_) => 3 + 16,
            },
            Ie::ExtensionHeaderTypeList { types } => 2 + types.len(),
            Ie::PrivateExtension(p) => 3 + 2 + p.value.len(),
            Ie::Unknown { value, .. } => 3 + value.len(),
        }
    }

    /// Writes the IE at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let available = buf.len();
        let out = buf.get_mut(..len).ok_or(Error::BufferTooSmall {
            needed: len,
            available,
        })?;
        out[0] = self.ie_type();
        let tlv_length = |out: &mut [u8]| -> Result<()> {
            let l = u16::try_from(len - 3).map_err(|_| Error::ValueOutOfRange {
                field: "IE length",
                value: (len - 3) as u64,
            })?;
            out[1..3].copy_from_slice(&l.to_be_bytes());
            Ok(())
        };
        match self {
            Ie::Recovery { restart_counter } => out[1] = *restart_counter,
            Ie::TeidDataI { teid } => out[1..5].copy_from_slice(&teid.to_be_bytes()),
            Ie::GtpuPeerAddress { address } => {
                tlv_length(out)?;
                match address {
                    IpAddr::V4(a) => out[3..].copy_from_slice(&a.octets()),
                    IpAddr::V6(a) => out[3..].copy_from_slice(&a.octets()),
                }
            }
            Ie::ExtensionHeaderTypeList { types } => {
                out[1] = u8::try_from(types.len()).map_err(|_| Error::ValueOutOfRange {
                    field: "Extension Header Type List length",
                    value: types.len() as u64,
                })?;
                out[2..].copy_from_slice(types);
            }
            Ie::PrivateExtension(p) => {
                tlv_length(out)?;
                out[3..5].copy_from_slice(&p.extension_identifier.to_be_bytes());
                out[5..].copy_from_slice(p.value);
            }
            Ie::Unknown { ie_type, value } => {
                if *ie_type < 128 {
                    return Err(Error::ValueOutOfRange {
                        field: "type of a raw (TLV) IE",
                        value: u64::from(*ie_type),
                    });
                }
                tlv_length(out)?;
                out[3..].copy_from_slice(value);
            }
        }
        Ok(len)
    }
}

/// Walks the IEs of a message body (TS 29.281 clause 8). Yields `(offset, ie)` with offsets in the message
/// (the body starts at `base`), and stops after the first error.
#[derive(Debug, Clone)]
pub struct IeIter<'a> {
    data: &'a [u8],
    offset: usize,
    base: usize,
    failed: bool,
}

impl<'a> IeIter<'a> {
    /// A walk over `body`, which starts at offset `base` in the message.
    pub fn new(body: &'a [u8], base: usize) -> Self {
        IeIter {
            data: body,
            offset: 0,
            base,
            failed: false,
        }
    }
}

impl<'a> Iterator for IeIter<'a> {
    type Item = Result<(usize, Ie<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let rest = self.data.get(self.offset..).filter(|r| !r.is_empty())?;
        let at = self.base + self.offset;
        match Ie::parse(rest, at) {
            Ok((ie, len)) => {
                self.offset += len;
                Some(Ok((at, ie)))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(bytes: &[u8]) -> Ie<'_> {
        let (ie, len) = Ie::parse(bytes, 0).unwrap();
        assert_eq!(len, bytes.len());
        assert_eq!(ie.buffer_len(), bytes.len());
        let mut out = vec![0; bytes.len()];
        assert_eq!(ie.emit(&mut out), Ok(bytes.len()));
        assert_eq!(out, bytes);
        ie
    }

    #[test]
    fn tv_ies() {
        assert_eq!(round_trip(&[14, 0]), Ie::Recovery { restart_counter: 0 });
        assert_eq!(
            round_trip(&[16, 0x00, 0x00, 0xc0, 0xbb]),
            Ie::TeidDataI { teid: 0xc0bb }
        );
    }

    #[test]
    fn tlv_ies() {
        assert_eq!(
            round_trip(&[133, 0, 4, 127, 0, 0, 7]),
            Ie::GtpuPeerAddress {
                address: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7))
            }
        );
        let v6 = [
            133, 0, 16, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
        ];
        assert_eq!(
            round_trip(&v6),
            Ie::GtpuPeerAddress {
                address: "2001:db8::1".parse().unwrap()
            }
        );
        assert_eq!(
            round_trip(&[141, 2, 0x40, 0x85]),
            Ie::ExtensionHeaderTypeList {
                types: &[0x40, 0x85]
            }
        );
        assert_eq!(
            round_trip(&[255, 0, 4, 0x28, 0xaf, 0xde, 0xad]),
            Ie::PrivateExtension(PrivateExtension {
                extension_identifier: 10415,
                value: &[0xde, 0xad]
            })
        );
        assert_eq!(
            round_trip(&[200, 0, 1, 9]),
            Ie::Unknown {
                ie_type: 200,
                value: &[9]
            }
        );
    }

    #[test]
    fn bad_ies() {
        assert_eq!(
            Ie::parse(&[133, 0, 5, 1, 2, 3, 4, 5], 20),
            Err(Error::InvalidIeLength {
                ie_type: 133,
                offset: 20,
                length: 5,
                reason: "GTP-U Peer Address is 4 (IPv4) or 16 (IPv6) octets"
            })
        );
        assert_eq!(
            Ie::parse(&[3, 1], 9),
            Err(Error::UnknownTvIe {
                ie_type: 3,
                offset: 9
            })
        );
        assert!(matches!(
            Ie::parse(&[16, 0, 0], 9),
            Err(Error::Truncated {
                offset: 9,
                needed: 5,
                available: 3,
                ..
            })
        ));
        assert!(matches!(
            Ie::parse(&[133, 0, 4, 1], 9),
            Err(Error::Truncated {
                offset: 9,
                needed: 7,
                ..
            })
        ));
        assert!(matches!(
            Ie::parse(&[255, 0, 1, 1], 0),
            Err(Error::InvalidIeLength { ie_type: 255, .. })
        ));
        assert!(matches!(
            Ie::parse(&[141, 3, 1], 0),
            Err(Error::Truncated { .. })
        ));
    }

    #[test]
    fn iter_stops_after_error() {
        let body = [14, 0, 16, 0, 0, 0, 1, 3, 0];
        let items: Vec<_> = IeIter::new(&body, 8).collect();
        assert_eq!(items.len(), 3);
        assert_eq!(items[0], Ok((8, Ie::Recovery { restart_counter: 0 })));
        assert_eq!(items[1], Ok((10, Ie::TeidDataI { teid: 1 })));
        assert_eq!(
            items[2],
            Err(Error::UnknownTvIe {
                ie_type: 3,
                offset: 15
            })
        );
    }
}
