//! GTP-U extension headers (TS 29.281 clause 5.2).
//!
//! ```text
//!  octet 1        length, in 4-octet units, counting this octet and the next-type octet
//!  octets 2..m    content
//!  octet 4n       next extension header type (0 = no more)
//! ```
//!
//! The two most significant bits of a type say what a receiver that does not know the
//! type does with it (clause 5.2.1, figure 5.2.1-2), see [`Comprehension`].

use serde::Serialize;

use crate::error::{Error, Result};
use crate::psc::PduSessionContainer;
use crate::types::ext_type;
use crate::util::hex;

/// Most extension headers the chain walk follows before it gives up with
/// [`Error::TooManyExtensionHeaders`]. TS 29.281 sets no bound; real G-PDUs carry one
/// or two. The bound keeps the work per packet small whatever the input.
pub const MAX_EXTENSION_HEADERS: usize = 16;

/// Largest extension header: the length octet counts 4-octet units.
pub const MAX_EXTENSION_HEADER_LEN: usize = 255 * 4;

/// Extension header types this crate understands: the ones it decodes and the RAN
/// containers it carries through raw. This is the list to send in a Supported
/// Extension Headers Notification (TS 29.281 clause 7.3.2).
pub const SUPPORTED_EXTENSION_HEADERS: &[u8] = &[
    ext_type::LONG_PDCP_PDU_NUMBER,
    ext_type::SERVICE_CLASS_INDICATOR,
    ext_type::UDP_PORT,
    ext_type::RAN_CONTAINER,
    ext_type::LONG_PDCP_PDU_NUMBER_LEGACY,
    ext_type::XW_RAN_CONTAINER,
    ext_type::NR_RAN_CONTAINER,
    ext_type::PDU_SESSION_CONTAINER,
    ext_type::PDCP_PDU_NUMBER,
];

/// Whether this crate understands extension header type `t`.
pub fn is_supported(t: u8) -> bool {
    SUPPORTED_EXTENSION_HEADERS.contains(&t)
}

/// What a receiver that does not know an extension header type does with it: bits 8
/// and 7 of the type (TS 29.281 clause 5.2.1, figure 5.2.1-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum Comprehension {
    /// `00`: comprehension not required; an intermediate node forwards it.
    NotRequired,
    /// `01`: comprehension not required; an intermediate node discards the header
    /// and does not forward it; the other headers are handled independently.
    NotRequiredDiscardAtIntermediateNode,
    /// `10`: comprehension required by the endpoint receiver, not by an intermediate
    /// node, which forwards it.
    RequiredByEndpointReceiver,
    /// `11`: comprehension required by every recipient.
    RequiredByAllRecipients,
}

impl Comprehension {
    /// The comprehension rule of extension header type `t`.
    pub const fn of(t: u8) -> Comprehension {
        match t >> 6 {
            0 => Comprehension::NotRequired,
            1 => Comprehension::NotRequiredDiscardAtIntermediateNode,
            2 => Comprehension::RequiredByEndpointReceiver,
            _ => Comprehension::RequiredByAllRecipients,
        }
    }

    /// Whether a GTP-U endpoint receiver that does not know the type must discard the
    /// message and send a Supported Extension Headers Notification (`10` or `11`).
    /// This crate parses as an endpoint receiver.
    pub const fn required_by_endpoint(self) -> bool {
        matches!(
            self,
            Comprehension::RequiredByEndpointReceiver | Comprehension::RequiredByAllRecipients
        )
    }
}

/// One extension header as found in the chain (TS 29.281 clause 5.2.1, figure
/// 5.2.1-1), not interpreted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawExtensionHeader<'a> {
    /// Its type (from the preceding next-type octet).
    pub ext_type: u8,
    /// Offset of its length octet in the message.
    pub offset: usize,
    /// The octets between the length octet and the next-type octet.
    pub content: &'a [u8],
    /// The type of the next header (0 = none).
    pub next_type: u8,
}

/// Walks an extension header chain (TS 29.281 clause 5.2.1), bounded by the end of the
/// message and by [`MAX_EXTENSION_HEADERS`]. Yields an error, then nothing, when the
/// chain is malformed.
#[derive(Debug, Clone)]
pub struct ExtensionHeaderIter<'a> {
    data: &'a [u8],
    offset: usize,
    end: usize,
    next_type: u8,
    count: usize,
    failed: bool,
}

impl<'a> ExtensionHeaderIter<'a> {
    /// A walk over `data[offset..end]` whose first header has type `first_type`
    /// (0 = the chain is empty).
    pub fn new(data: &'a [u8], offset: usize, end: usize, first_type: u8) -> Self {
        ExtensionHeaderIter {
            data,
            offset,
            end: end.min(data.len()),
            next_type: first_type,
            count: 0,
            failed: false,
        }
    }

    /// Offset just past the headers walked so far; once the walk is over without an
    /// error, the offset of the payload.
    pub fn offset(&self) -> usize {
        self.offset
    }
}

impl<'a> Iterator for ExtensionHeaderIter<'a> {
    type Item = Result<RawExtensionHeader<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.next_type == ext_type::NO_MORE {
            return None;
        }
        let ext_type = self.next_type;
        let offset = self.offset;
        let result = (|| {
            if self.count == MAX_EXTENSION_HEADERS {
                return Err(Error::TooManyExtensionHeaders {
                    max: MAX_EXTENSION_HEADERS,
                    offset,
                });
            }
            let Some(&units) = self.data.get(offset).filter(|_| offset < self.end) else {
                return Err(Error::ExtensionHeaderOverrun {
                    ext_type,
                    offset,
                    len: 4,
                    end: self.end,
                });
            };
            if units == 0 {
                return Err(Error::ZeroLengthExtensionHeader { ext_type, offset });
            }
            let len = usize::from(units) * 4;
            let header_end = offset + len;
            if header_end > self.end {
                return Err(Error::ExtensionHeaderOverrun {
                    ext_type,
                    offset,
                    len,
                    end: self.end,
                });
            }
            let content = &self.data[offset + 1..header_end - 1];
            let next_type = self.data[header_end - 1];
            Ok(RawExtensionHeader {
                ext_type,
                offset,
                content,
                next_type,
            })
        })();
        match &result {
            Ok(raw) => {
                self.count += 1;
                self.offset += raw.content.len() + 2;
                self.next_type = raw.next_type;
            }
            Err(_) => self.failed = true,
        }
        Some(result)
    }
}

/// A Long PDCP PDU Number extension header (TS 29.281 clause 5.2.2.2A): an 18-bit
/// number in 8 octets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
pub struct LongPdcpPduNumber {
    /// `0x03` or, from earlier releases, `0x82`.
    pub ext_type: u8,
    /// The PDCP PDU number, 18 bits.
    pub number: u32,
    /// The spare bits: bits 8-3 of content octet 1 in `spare[0]` (as a 6-bit value),
    /// content octets 4-6 in `spare[1..]`. Zero when sent; kept for re-encoding.
    #[serde(skip_serializing_if = "is_zero4")]
    pub spare: [u8; 4],
}

fn is_zero4(v: &[u8; 4]) -> bool {
    *v == [0; 4]
}

fn is_zero(v: &u8) -> bool {
    *v == 0
}

/// A Service Class Indicator extension header (TS 29.281 clause 5.2.2.3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
pub struct ServiceClassIndicator {
    /// The Service Class Indicator value.
    pub sci: u8,
    /// The spare octet after it; zero when sent, kept for re-encoding.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

/// A parsed extension header (TS 29.281 clause 5.2.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExtensionHeader<'a> {
    /// PDU Session Container, type 0x85 (clause 5.2.2.7, TS 38.415 clause 5.5.2).
    PduSessionContainer(PduSessionContainer<'a>),
    /// UDP Port, type 0x40 (clause 5.2.2.1): the UDP source port of the message that
    /// triggered an Error Indication.
    UdpPort {
        /// The port.
        port: u16,
    },
    /// PDCP PDU Number, type 0xC0 (clause 5.2.2.2).
    PdcpPduNumber {
        /// The 2 octets of PDCP PDU number.
        number: u16,
    },
    /// Long PDCP PDU Number, type 0x03 or 0x82 (clause 5.2.2.2A).
    LongPdcpPduNumber(LongPdcpPduNumber),
    /// Service Class Indicator, type 0x20 (clause 5.2.2.3).
    ServiceClassIndicator(ServiceClassIndicator),
    /// Any other type, kept raw: the RAN containers (0x81, 0x83, 0x84) and unknown
    /// types whose comprehension is not required.
    Other {
        /// The type (not 0).
        ext_type: u8,
        /// The octets between the length octet and the next-type octet; its length
        /// plus 2 is a multiple of 4.
        #[serde(serialize_with = "hex")]
        content: &'a [u8],
    },
}

fn invalid(ext_type: u8, offset: usize, reason: &'static str) -> Error {
    Error::InvalidExtensionHeader {
        ext_type,
        offset,
        reason,
    }
}

impl<'a> ExtensionHeader<'a> {
    /// Interprets a header found in the chain. Unknown types whose two most
    /// significant bits are `10` or `11` give [`Error::UnsupportedExtensionHeader`].
    pub fn parse(raw: &RawExtensionHeader<'a>) -> Result<ExtensionHeader<'a>> {
        let t = raw.ext_type;
        let c = raw.content;
        let content_offset = raw.offset + 1;
        let fixed = |n: usize| {
            if c.len() == n {
                Ok(())
            } else {
                Err(invalid(t, raw.offset, "wrong length for this type"))
            }
        };
        Ok(match t {
            ext_type::PDU_SESSION_CONTAINER => ExtensionHeader::PduSessionContainer(
                PduSessionContainer::parse(c).map_err(|e| e.shifted(content_offset))?,
            ),
            ext_type::UDP_PORT => {
                fixed(2)?;
                ExtensionHeader::UdpPort {
                    port: u16::from_be_bytes([c[0], c[1]]),
                }
            }
            ext_type::PDCP_PDU_NUMBER => {
                fixed(2)?;
                ExtensionHeader::PdcpPduNumber {
                    number: u16::from_be_bytes([c[0], c[1]]),
                }
            }
            ext_type::LONG_PDCP_PDU_NUMBER | ext_type::LONG_PDCP_PDU_NUMBER_LEGACY => {
                fixed(6)?;
                ExtensionHeader::LongPdcpPduNumber(LongPdcpPduNumber {
                    ext_type: t,
                    number: (u32::from(c[0] & 0x03) << 16)
                        | (u32::from(c[1]) << 8)
                        | u32::from(c[2]),
                    spare: [c[0] >> 2, c[3], c[4], c[5]],
                })
            }
            ext_type::SERVICE_CLASS_INDICATOR => {
                fixed(2)?;
                ExtensionHeader::ServiceClassIndicator(ServiceClassIndicator {
                    sci: c[0],
                    spare: c[1],
                })
            }
            ext_type::RAN_CONTAINER | ext_type::XW_RAN_CONTAINER | ext_type::NR_RAN_CONTAINER => {
                ExtensionHeader::Other {
                    ext_type: t,
                    content: c,
                }
            }
            _ if Comprehension::of(t).required_by_endpoint() => {
                return Err(Error::UnsupportedExtensionHeader {
                    ext_type: t,
                    offset: raw.offset,
                })
            }
            _ => ExtensionHeader::Other {
                ext_type: t,
                content: c,
            },
        })
    }

    /// The extension header type.
    pub fn ext_type(&self) -> u8 {
        match self {
            ExtensionHeader::PduSessionContainer(_) => ext_type::PDU_SESSION_CONTAINER,
            ExtensionHeader::UdpPort { .. } => ext_type::UDP_PORT,
            ExtensionHeader::PdcpPduNumber { .. } => ext_type::PDCP_PDU_NUMBER,
            ExtensionHeader::LongPdcpPduNumber(l) => l.ext_type,
            ExtensionHeader::ServiceClassIndicator(_) => ext_type::SERVICE_CLASS_INDICATOR,
            ExtensionHeader::Other { ext_type, .. } => *ext_type,
        }
    }

    fn content_len(&self) -> usize {
        match self {
            ExtensionHeader::PduSessionContainer(psc) => psc.buffer_len(),
            ExtensionHeader::UdpPort { .. }
            | ExtensionHeader::PdcpPduNumber { .. }
            | ExtensionHeader::ServiceClassIndicator(_) => 2,
            ExtensionHeader::LongPdcpPduNumber(_) => 6,
            ExtensionHeader::Other { content, .. } => content.len(),
        }
    }

    /// Length of the header as emitted, length and next-type octets included: a
    /// multiple of 4.
    pub fn buffer_len(&self) -> usize {
        (self.content_len() + 2).next_multiple_of(4)
    }

    /// Writes the header, with `next_type` in its last octet, at the start of `buf`.
    /// Returns its length.
    pub fn emit(&self, next_type: u8, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        if len > MAX_EXTENSION_HEADER_LEN {
            return Err(Error::ValueOutOfRange {
                field: "extension header length",
                value: len as u64,
            });
        }
        if buf.len() < len {
            return Err(Error::BufferTooSmall {
                needed: len,
                available: buf.len(),
            });
        }
        let out = &mut buf[..len];
        out.fill(0);
        out[0] = (len / 4) as u8;
        out[len - 1] = next_type;
        let content = &mut out[1..len - 1];
        match self {
            ExtensionHeader::PduSessionContainer(psc) => {
                psc.emit(content)?;
            }
            ExtensionHeader::UdpPort { port } => content.copy_from_slice(&port.to_be_bytes()),
            ExtensionHeader::PdcpPduNumber { number } => {
                content.copy_from_slice(&number.to_be_bytes())
            }
            ExtensionHeader::LongPdcpPduNumber(l) => {
                if !matches!(
                    l.ext_type,
                    ext_type::LONG_PDCP_PDU_NUMBER | ext_type::LONG_PDCP_PDU_NUMBER_LEGACY
                ) {
                    return Err(Error::ValueOutOfRange {
                        field: "Long PDCP PDU Number type",
                        value: l.ext_type.into(),
                    });
                }
                if l.number > 0x3_ffff || l.spare[0] > 0x3f {
                    return Err(Error::ValueOutOfRange {
                        field: "Long PDCP PDU Number",
                        value: l.number.into(),
                    });
                }
                let n = l.number.to_be_bytes();
                content.copy_from_slice(&[
                    (l.spare[0] << 2) | n[1],
                    n[2],
                    n[3],
                    l.spare[1],
                    l.spare[2],
                    l.spare[3],
                ]);
            }
            ExtensionHeader::ServiceClassIndicator(s) => content.copy_from_slice(&[s.sci, s.spare]),
            ExtensionHeader::Other {
                ext_type,
                content: raw,
            } => {
                if *ext_type == ext_type::NO_MORE {
                    return Err(Error::ValueOutOfRange {
                        field: "extension header type",
                        value: 0,
                    });
                }
                if (raw.len() + 2) % 4 != 0 {
                    return Err(Error::ValueOutOfRange {
                        field: "raw extension header content length (must be 4n-2)",
                        value: raw.len() as u64,
                    });
                }
                content.copy_from_slice(raw);
            }
        }
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(data: &[u8], first: u8) -> Vec<Result<RawExtensionHeader<'_>>> {
        ExtensionHeaderIter::new(data, 0, data.len(), first).collect()
    }

    #[test]
    fn comprehension_bits() {
        assert_eq!(Comprehension::of(0x20), Comprehension::NotRequired);
        assert_eq!(
            Comprehension::of(0x40),
            Comprehension::NotRequiredDiscardAtIntermediateNode
        );
        assert_eq!(
            Comprehension::of(0x85),
            Comprehension::RequiredByEndpointReceiver
        );
        assert_eq!(
            Comprehension::of(0xc0),
            Comprehension::RequiredByAllRecipients
        );
        assert!(!Comprehension::of(0x7f).required_by_endpoint());
        assert!(Comprehension::of(0x86).required_by_endpoint());
    }

    #[test]
    fn chain_of_two() {
        // UDP Port 2152, then PDCP PDU Number 0x1234.
        let data = [0x01, 0x08, 0x68, 0xc0, 0x01, 0x12, 0x34, 0x00, 0xee];
        let headers = walk(&data, 0x40);
        assert_eq!(headers.len(), 2);
        let a = headers[0].clone().unwrap();
        let b = headers[1].clone().unwrap();
        assert_eq!(
            (a.ext_type, a.offset, a.content, a.next_type),
            (0x40, 0, &[0x08, 0x68][..], 0xc0)
        );
        assert_eq!(
            (b.ext_type, b.offset, b.content, b.next_type),
            (0xc0, 4, &[0x12, 0x34][..], 0)
        );
        assert_eq!(
            ExtensionHeader::parse(&a),
            Ok(ExtensionHeader::UdpPort { port: 2152 })
        );
        assert_eq!(
            ExtensionHeader::parse(&b),
            Ok(ExtensionHeader::PdcpPduNumber { number: 0x1234 })
        );
        let mut it = ExtensionHeaderIter::new(&data, 0, data.len(), 0x40);
        assert!(it.by_ref().all(|h| h.is_ok()));
        assert_eq!(it.offset(), 8);
    }

    #[test]
    fn zero_length() {
        let data = [0x00, 0x00, 0x00, 0x00];
        assert_eq!(
            walk(&data, 0x85),
            vec![Err(Error::ZeroLengthExtensionHeader {
                ext_type: 0x85,
                offset: 0
            })]
        );
    }

    #[test]
    fn runs_past_end() {
        // Length 2 (8 octets) but only 4 left.
        let data = [0x02, 0x00, 0x01, 0x00];
        assert_eq!(
            walk(&data, 0x85),
            vec![Err(Error::ExtensionHeaderOverrun {
                ext_type: 0x85,
                offset: 0,
                len: 8,
                end: 4
            })]
        );
        // The first header announces a next one that is not there.
        let data = [0x01, 0x00, 0x01, 0x85];
        let headers = walk(&data, 0x85);
        assert_eq!(headers.len(), 2);
        assert_eq!(
            headers[1],
            Err(Error::ExtensionHeaderOverrun {
                ext_type: 0x85,
                offset: 4,
                len: 4,
                end: 4
            })
        );
    }

    #[test]
    fn bounded_walk() {
        // A chain of 17 Service Class Indicators.
        let mut data = Vec::new();
        for _ in 0..17 {
            data.extend_from_slice(&[0x01, 0x05, 0x00, 0x20]);
        }
        let headers = walk(&data, 0x20);
        assert_eq!(headers.len(), MAX_EXTENSION_HEADERS + 1);
        assert_eq!(
            headers[MAX_EXTENSION_HEADERS],
            Err(Error::TooManyExtensionHeaders {
                max: MAX_EXTENSION_HEADERS,
                offset: 64
            })
        );
    }

    #[test]
    fn unknown_types() {
        let raw = RawExtensionHeader {
            ext_type: 0x86,
            offset: 12,
            content: &[1, 2],
            next_type: 0,
        };
        assert_eq!(
            ExtensionHeader::parse(&raw),
            Err(Error::UnsupportedExtensionHeader {
                ext_type: 0x86,
                offset: 12
            })
        );
        let raw = RawExtensionHeader {
            ext_type: 0xc1,
            ..raw
        };
        assert!(matches!(
            ExtensionHeader::parse(&raw),
            Err(Error::UnsupportedExtensionHeader { ext_type: 0xc1, .. })
        ));
        // Not required: kept raw and re-emitted as is.
        let raw = RawExtensionHeader {
            ext_type: 0x04,
            ..raw
        };
        let header = ExtensionHeader::parse(&raw).unwrap();
        assert_eq!(
            header,
            ExtensionHeader::Other {
                ext_type: 0x04,
                content: &[1, 2]
            }
        );
        let mut out = [0u8; 4];
        assert_eq!(header.emit(0x85, &mut out), Ok(4));
        assert_eq!(out, [0x01, 1, 2, 0x85]);
    }

    #[test]
    fn wrong_length_of_known_type() {
        let raw = RawExtensionHeader {
            ext_type: 0x40,
            offset: 12,
            content: &[0, 0, 0, 0, 0, 0],
            next_type: 0,
        };
        assert_eq!(
            ExtensionHeader::parse(&raw),
            Err(Error::InvalidExtensionHeader {
                ext_type: 0x40,
                offset: 12,
                reason: "wrong length for this type"
            })
        );
    }

    #[test]
    fn long_pdcp_and_sci_round_trip() {
        let bytes = [0x02, 0xfe, 0x34, 0x56, 0x00, 0x00, 0x07, 0x20];
        let raw = walk(&bytes, 0x82).remove(0).unwrap();
        let header = ExtensionHeader::parse(&raw).unwrap();
        assert_eq!(
            header,
            ExtensionHeader::LongPdcpPduNumber(LongPdcpPduNumber {
                ext_type: 0x82,
                number: 0x2_3456,
                spare: [0x3f, 0, 0, 7],
            })
        );
        let mut out = [0u8; 8];
        assert_eq!(header.emit(0x20, &mut out), Ok(8));
        assert_eq!(out, bytes);

        let bytes = [0x01, 0x2a, 0x00, 0x00];
        let raw = walk(&bytes, 0x20).remove(0).unwrap();
        let header = ExtensionHeader::parse(&raw).unwrap();
        assert_eq!(
            header,
            ExtensionHeader::ServiceClassIndicator(ServiceClassIndicator { sci: 42, spare: 0 })
        );
        let mut out = [0u8; 4];
        header.emit(0, &mut out).unwrap();
        assert_eq!(out, bytes);
    }

    #[test]
    fn emit_rejects_bad_raw() {
        let header = ExtensionHeader::Other {
            ext_type: 0x04,
            content: &[1, 2, 3],
        };
        let mut out = [0u8; 8];
        assert!(matches!(
            header.emit(0, &mut out),
            Err(Error::ValueOutOfRange { .. })
        ));
        let header = ExtensionHeader::UdpPort { port: 1 };
        assert_eq!(
            header.emit(0, &mut out[..3]),
            Err(Error::BufferTooSmall {
                needed: 4,
                available: 3
            })
        );
    }
}
