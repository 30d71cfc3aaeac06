//! Allocation-free helpers for the data path: read a G-PDU's TEID, QFI and inner
//! packet offset, and write a G-PDU header with a PDU Session Container.
//!
//! [`parse_gpdu`] checks what the data path relies on: version 1, PT 1, message type
//! 255, the Length field against the buffer, the structure of the extension header
//! chain (TS 29.281 clause 5.2.1: no zero length, nothing past the message, at most
//! [`crate::MAX_EXTENSION_HEADERS`]) and the comprehension bits of unknown types. It
//! reads the QFI from the fixed octets of the first PDU Session Container but does not
//! validate the rest of the extension header contents; [`crate::Message::parse`] does.
//!
//! Like [`crate::Message::parse`], it accepts a G-PDU whose Length field (TS 29.281
//! clause 5.1: the octets after the first 8) announces more octets than the buffer
//! holds, provided the optional fields and the whole extension header chain are in the
//! buffer: the T-PDU is then the rest of the buffer. This follows the receiving UPF
//! (Open5GS forwards such G-PDUs) and tshark, which uses the UDP length; the inner IP
//! packet carries its own length. See [`crate::Ignored::declared_length`]. A Length
//! shorter than the optional fields it must cover is still an error, and so is a
//! header cut short by the end of the buffer.

use crate::error::{Error, Result};
use crate::ext::{is_supported, Comprehension, MAX_EXTENSION_HEADERS};
use crate::header::{field, flags};
use crate::psc;
use crate::types::{ext_type, message_type};

/// What the data path needs from a G-PDU (TS 29.281 clauses 5.1 and 6.1; QFI from
/// TS 38.415 clause 5.5.3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GpduInfo {
    /// Tunnel endpoint identifier.
    pub teid: u32,
    /// QFI of the first PDU Session Container (TS 38.415), if there is one.
    pub qfi: Option<u8>,
    /// PDU type of that container: 0 DL, 1 UL.
    pub pdu_type: Option<u8>,
    /// Offset of the T-PDU (the inner packet) in the buffer.
    pub payload_offset: usize,
    /// Length of the T-PDU: per the Length field, or up to the end of the buffer
    /// when the Length announces more octets than the buffer holds (TS 29.281
    /// clause 5.1 defines the Length; see the module documentation).
    pub payload_len: usize,
}

impl GpduInfo {
    /// The T-PDU within `buf` (the buffer given to [`parse_gpdu`]).
    pub fn payload<'b>(&self, buf: &'b [u8]) -> &'b [u8] {
        buf.get(self.payload_offset..self.payload_offset + self.payload_len)
            .unwrap_or(&[])
    }
}

/// Reads TEID, QFI and T-PDU position of the G-PDU at the start of `buf` without
/// allocating. Errors are those of [`crate::Message::parse`] for the same defects,
/// plus [`Error::NotGpdu`] for other message types.
///
/// A Length field (TS 29.281 clause 5.1) larger than the buffer is accepted when the
/// header fits, as the receiving UPF and tshark accept it; `payload_len` is then the
/// octets actually present after the header.
#[inline]
pub fn parse_gpdu(buf: &[u8]) -> Result<GpduInfo> {
    let Some(fixed) = buf.get(..field::MANDATORY_LEN) else {
        return Err(Error::Truncated {
            what: "GTP-U header",
            offset: 0,
            needed: field::MANDATORY_LEN,
            available: buf.len(),
        });
    };
    let octet1 = fixed[field::FLAGS];
    if octet1 >> 5 != 1 {
        return Err(Error::UnsupportedVersion {
            version: octet1 >> 5,
        });
    }
    if octet1 & flags::PT == 0 {
        return Err(Error::NotGtp);
    }
    if fixed[field::MESSAGE_TYPE] != message_type::G_PDU {
        return Err(Error::NotGpdu {
            message_type: fixed[field::MESSAGE_TYPE],
        });
    }
    let length = u16::from_be_bytes([fixed[2], fixed[3]]);
    let teid = u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]);
    let declared_end = field::MANDATORY_LEN + usize::from(length);
    // A Length past the buffer is tolerated when the whole header is in the buffer;
    // the T-PDU is then the rest of the buffer (see the module documentation).
    let overlong = buf.len() < declared_end;
    let truncated = || Error::Truncated {
        what: "GTP-U message (per the Length field)",
        offset: 0,
        needed: declared_end,
        available: buf.len(),
    };
    let end = declared_end.min(buf.len());
    let mut info = GpduInfo {
        teid,
        qfi: None,
        pdu_type: None,
        payload_offset: field::MANDATORY_LEN,
        payload_len: end - field::MANDATORY_LEN,
    };
    if octet1 & flags::OPTIONAL == 0 {
        return Ok(info);
    }
    if declared_end < field::OPTIONAL_END {
        return Err(Error::LengthTooSmall { length, needed: 4 });
    }
    if end < field::OPTIONAL_END {
        return Err(truncated());
    }
    let mut offset = field::OPTIONAL_END;
    if octet1 & flags::E != 0 {
        let mut next = buf[field::NEXT_EXTENSION_TYPE];
        let mut count = 0;
        while next != ext_type::NO_MORE {
            if count == MAX_EXTENSION_HEADERS {
                return Err(Error::TooManyExtensionHeaders {
                    max: MAX_EXTENSION_HEADERS,
                    offset,
                });
            }
            count += 1;
            let units = match buf.get(offset) {
                Some(&u) if offset < end => u,
                _ if overlong => return Err(truncated()),
                _ => {
                    return Err(Error::ExtensionHeaderOverrun {
                        ext_type: next,
                        offset,
                        len: 4,
                        end,
                    })
                }
            };
            if units == 0 {
                return Err(Error::ZeroLengthExtensionHeader {
                    ext_type: next,
                    offset,
                });
            }
            let len = usize::from(units) * 4;
            if offset + len > end {
                if overlong {
                    return Err(truncated());
                }
                return Err(Error::ExtensionHeaderOverrun {
                    ext_type: next,
                    offset,
                    len,
                    end,
                });
            }
            if next == ext_type::PDU_SESSION_CONTAINER {
                if info.qfi.is_none() {
                    let frame = psc::Frame::new_unchecked(&buf[offset + 1..offset + 3]);
                    if frame.pdu_type() <= psc::pdu_type::UL {
                        info.qfi = Some(frame.qfi());
                        info.pdu_type = Some(frame.pdu_type());
                    }
                }
            } else if !is_supported(next) && Comprehension::of(next).required_by_endpoint() {
                return Err(Error::UnsupportedExtensionHeader {
                    ext_type: next,
                    offset,
                });
            }
            offset += len;
            next = buf[offset - 1];
        }
    }
    info.payload_offset = offset;
    info.payload_len = end - offset;
    Ok(info)
}

/// The PDU Session Container to put in a G-PDU header (TS 38.415 clause 5.5.2),
/// without the optional QoS monitoring fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PscFields {
    /// DL PDU SESSION INFORMATION, as a UPF sends towards the RAN.
    Dl {
        /// QoS Flow Identifier, 0..=63.
        qfi: u8,
        /// Reflective QoS Indicator.
        rqi: bool,
        /// Paging Policy Indicator, 0..=7 (sets PPP).
        ppi: Option<u8>,
    },
    /// UL PDU SESSION INFORMATION, as a gNB sends towards the UPF.
    Ul {
        /// QoS Flow Identifier, 0..=63.
        qfi: u8,
    },
}

impl PscFields {
    /// Length of the whole extension header: 8 octets for DL with PPI, else 4.
    pub const fn ext_header_len(&self) -> usize {
        match self {
            PscFields::Dl { ppi: Some(_), .. } => 8,
            _ => 4,
        }
    }
}

/// A G-PDU header (TS 29.281 clause 5.1) to write in front of a T-PDU, with an
/// optional PDU Session Container (clause 5.2.2.7).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct GpduHeader {
    /// Tunnel endpoint identifier of the receiver.
    pub teid: u32,
    /// Sequence number (sets the S flag).
    pub sequence_number: Option<u16>,
    /// PDU Session Container (sets the E flag).
    pub psc: Option<PscFields>,
}

impl GpduHeader {
    /// A header with `teid` and nothing else (8 octets).
    pub const fn new(teid: u32) -> Self {
        GpduHeader {
            teid,
            sequence_number: None,
            psc: None,
        }
    }

    /// Adds a PDU Session Container.
    pub const fn with_psc(mut self, psc: PscFields) -> Self {
        self.psc = Some(psc);
        self
    }

    /// Adds a sequence number.
    pub const fn with_sequence_number(mut self, sequence_number: u16) -> Self {
        self.sequence_number = Some(sequence_number);
        self
    }

    /// Length of the header: 8, or 12 plus the container when a flag is set.
    pub const fn header_len(&self) -> usize {
        match (self.sequence_number, self.psc) {
            (None, None) => field::MANDATORY_LEN,
            (_, None) => field::OPTIONAL_END,
            (_, Some(psc)) => field::OPTIONAL_END + psc.ext_header_len(),
        }
    }

    /// Writes the header for a T-PDU of `payload_len` octets at the start of `buf`;
    /// returns the header length. The T-PDU goes at `buf[header_len..]`.
    #[inline]
    pub fn write(&self, buf: &mut [u8], payload_len: usize) -> Result<usize> {
        let header_len = self.header_len();
        let length = header_len - field::MANDATORY_LEN + payload_len;
        let length = u16::try_from(length).map_err(|_| Error::ValueOutOfRange {
            field: "GTP-U Length",
            value: length as u64,
        })?;
        let available = buf.len();
        let out = buf.get_mut(..header_len).ok_or(Error::BufferTooSmall {
            needed: header_len,
            available,
        })?;
        let mut octet1 = flags::VERSION_1 | flags::PT;
        if self.sequence_number.is_some() {
            octet1 |= flags::S;
        }
        if self.psc.is_some() {
            octet1 |= flags::E;
        }
        out[0] = octet1;
        out[1] = message_type::G_PDU;
        out[2..4].copy_from_slice(&length.to_be_bytes());
        out[4..8].copy_from_slice(&self.teid.to_be_bytes());
        if header_len == field::MANDATORY_LEN {
            return Ok(header_len);
        }
        out[8..10].copy_from_slice(&self.sequence_number.unwrap_or(0).to_be_bytes());
        out[10] = 0;
        out[11] = if self.psc.is_some() {
            ext_type::PDU_SESSION_CONTAINER
        } else {
            ext_type::NO_MORE
        };
        let Some(psc) = self.psc else {
            return Ok(header_len);
        };
        let ext = &mut out[12..];
        ext.fill(0);
        ext[0] = (psc.ext_header_len() / 4) as u8;
        match psc {
            PscFields::Dl { qfi, rqi, ppi } => {
                if qfi > 0x3f {
                    return Err(Error::ValueOutOfRange {
                        field: "QFI",
                        value: qfi.into(),
                    });
                }
                ext[1] = psc::pdu_type::DL << 4;
                ext[2] = qfi | if rqi { psc::flags::RQI } else { 0 };
                if let Some(ppi) = ppi {
                    if ppi > 7 {
                        return Err(Error::ValueOutOfRange {
                            field: "PPI",
                            value: ppi.into(),
                        });
                    }
                    ext[2] |= psc::flags::PPP;
                    ext[3] = ppi << 5;
                }
            }
            PscFields::Ul { qfi } => {
                if qfi > 0x3f {
                    return Err(Error::ValueOutOfRange {
                        field: "QFI",
                        value: qfi.into(),
                    });
                }
                ext[1] = psc::pdu_type::UL << 4;
                ext[2] = qfi;
            }
        }
        // The last octet, the next extension header type, stays 0.
        Ok(header_len)
    }
}

/// Writes a G-PDU header for `teid`, with a PDU Session Container if `psc` is given,
/// for a T-PDU of `payload_len` octets, at the start of `buf`. Returns the header
/// length (8, 16 or 20). See [`GpduHeader`] for a sequence number.
#[inline]
pub fn write_gpdu_header(
    buf: &mut [u8],
    teid: u32,
    psc: Option<PscFields>,
    payload_len: usize,
) -> Result<usize> {
    GpduHeader {
        teid,
        sequence_number: None,
        psc,
    }
    .write(buf, payload_len)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Message;

    // 5g-roaming-hr capture, gNB -> UPF: UL PDU Session Container, QFI 1, then an
    // ICMP echo request (first octets).
    static UL_GPDU: [u8; 16] = [
        0x34, 0xff, 0x00, 0x0c, 0x00, 0x00, 0xc0, 0xbb, 0x00, 0x00, 0x00, 0x85, 0x01, 0x10, 0x01,
        0x00,
    ];

    #[test]
    fn parse_captured_ul() {
        let mut bytes = UL_GPDU.to_vec();
        bytes.extend_from_slice(&[0x45, 0x00, 0x00, 0x1c]);
        let info = parse_gpdu(&bytes).unwrap();
        assert_eq!(
            info,
            GpduInfo {
                teid: 0xc0bb,
                qfi: Some(1),
                pdu_type: Some(1),
                payload_offset: 16,
                payload_len: 4
            }
        );
        assert_eq!(info.payload(&bytes), &[0x45, 0x00, 0x00, 0x1c]);
    }

    #[test]
    fn parse_length_past_the_buffer_from_capture() {
        let bytes = &crate::testdata::OPEN5GS_FRAME_139;
        let info = parse_gpdu(bytes).unwrap();
        assert_eq!(
            info,
            GpduInfo {
                teid: 1,
                qfi: Some(1),
                pdu_type: Some(1),
                payload_offset: 16,
                payload_len: 184
            }
        );
        // The T-PDU is what is present; the inner IPv6 header gives the packet's end.
        let t_pdu = info.payload(bytes);
        assert_eq!(t_pdu, &bytes[16..]);
        assert_eq!(t_pdu[0] >> 4, 6);
        assert_eq!(
            40 + usize::from(u16::from_be_bytes([t_pdu[4], t_pdu[5]])),
            48
        );
        // Without optional fields too: Length 100, 9 octets.
        let info = parse_gpdu(&[0x30, 0xff, 0x00, 0x64, 0, 0, 0, 5, 0x45]).unwrap();
        assert_eq!((info.payload_offset, info.payload_len), (8, 1));
    }

    #[test]
    fn parse_plain() {
        let bytes = [0x30, 0xff, 0x00, 0x01, 0, 0, 0, 5, 0x45];
        let info = parse_gpdu(&bytes).unwrap();
        assert_eq!(
            (info.teid, info.qfi, info.payload_offset, info.payload_len),
            (5, None, 8, 1)
        );
        // S flag only (testattach capture).
        let bytes = [0x32, 0xff, 0x00, 0x05, 0, 0, 0, 5, 0, 0, 0, 0, 0x60];
        let info = parse_gpdu(&bytes).unwrap();
        assert_eq!((info.payload_offset, info.payload_len), (12, 1));
    }

    #[test]
    fn parse_errors_match_message_parse() {
        let cases: &[&[u8]] = &[
            &[0x34, 0xff, 0x00],
            &[0x54, 0xff, 0x00, 0x00, 0, 0, 0, 0],
            &[0x24, 0xff, 0x00, 0x00, 0, 0, 0, 0],
            &[0x34, 0xff, 0x00, 0x02, 0, 0, 0, 0, 0, 0],
            &[
                0x34, 0xff, 0x00, 0x08, 0, 0, 0, 1, 0, 0, 0, 0x85, 0, 0, 1, 0,
            ],
            &[
                0x34, 0xff, 0x00, 0x08, 0, 0, 0, 1, 0, 0, 0, 0x85, 2, 0, 1, 0,
            ],
            &[
                0x34, 0xff, 0x00, 0x08, 0, 0, 0, 1, 0, 0, 0, 0x85, 1, 0, 1, 0x85,
            ],
            &[
                0x34, 0xff, 0x00, 0x08, 0, 0, 0, 1, 0, 0, 0, 0xc1, 1, 0, 1, 0,
            ],
            &[0x34, 0xff, 0x00, 0x10, 0, 0, 0, 1, 0, 0, 0, 0x85],
            // Length past the buffer and the header cut short: truncated.
            &[0x34, 0xff, 0x08, 0x30, 0, 0, 0, 1, 0, 0],
            &[
                0x34, 0xff, 0x08, 0x30, 0, 0, 0, 1, 0, 0, 0, 0x85, 0x01, 0x10, 0x01,
            ],
            &[
                0x34, 0xff, 0x08, 0x30, 0, 0, 0, 1, 0, 0, 0, 0x85, 0x02, 0x10, 0x01, 0x00,
            ],
            // Length past the buffer, but the chain is malformed within it.
            &[
                0x34, 0xff, 0x08, 0x30, 0, 0, 0, 1, 0, 0, 0, 0x85, 0x00, 0x10, 0x01, 0x00,
            ],
            &[
                0x34, 0xff, 0x08, 0x30, 0, 0, 0, 1, 0, 0, 0, 0xc1, 0x01, 0x10, 0x01, 0x00,
            ],
            // Length past the buffer but shorter than the optional fields.
            &[0x32, 0xff, 0x00, 0x03, 0, 0, 0, 1],
        ];
        for bytes in cases {
            assert_eq!(
                parse_gpdu(bytes).unwrap_err(),
                Message::parse(bytes).unwrap_err(),
                "{bytes:02x?}"
            );
        }
        assert_eq!(
            parse_gpdu(&[0x30, 0xfe, 0, 0, 0, 0, 0, 1]),
            Err(Error::NotGpdu { message_type: 254 })
        );
    }

    #[test]
    fn build_matches_capture() {
        let mut buf = [0u8; 16];
        let n = write_gpdu_header(&mut buf, 0xc0bb, Some(PscFields::Ul { qfi: 1 }), 4).unwrap();
        assert_eq!(n, 16);
        assert_eq!(buf, UL_GPDU);
        let n = write_gpdu_header(
            &mut buf,
            0x9c40,
            Some(PscFields::Dl {
                qfi: 1,
                rqi: false,
                ppi: None,
            }),
            0x24 - 8,
        )
        .unwrap();
        assert_eq!(n, 16);
        assert_eq!(
            buf,
            [
                0x34, 0xff, 0x00, 0x24, 0x00, 0x00, 0x9c, 0x40, 0, 0, 0, 0x85, 0x01, 0x00, 0x01,
                0x00
            ]
        );
    }

    #[test]
    fn build_and_parse_back() {
        let headers = [
            GpduHeader::new(7),
            GpduHeader::new(7).with_sequence_number(9),
            GpduHeader::new(7).with_psc(PscFields::Dl {
                qfi: 63,
                rqi: true,
                ppi: Some(5),
            }),
            GpduHeader::new(7)
                .with_sequence_number(1)
                .with_psc(PscFields::Ul { qfi: 2 }),
        ];
        for h in headers {
            let mut buf = [0xeeu8; 64];
            let n = h.write(&mut buf, 3).unwrap();
            assert_eq!(n, h.header_len());
            buf[n..n + 3].copy_from_slice(&[0x45, 1, 2]);
            let bytes = &buf[..n + 3];
            let info = parse_gpdu(bytes).unwrap();
            assert_eq!(info.teid, 7);
            assert_eq!(info.payload_offset, n);
            assert_eq!(info.payload_len, 3);
            let message = Message::parse(bytes).unwrap();
            assert_eq!(message.header().qfi(), info.qfi);
            assert_eq!(message.to_vec().unwrap(), bytes);
        }
    }

    #[test]
    fn build_errors() {
        let mut small = [0u8; 10];
        assert!(matches!(
            write_gpdu_header(&mut small, 1, Some(PscFields::Ul { qfi: 1 }), 0),
            Err(Error::BufferTooSmall { needed: 16, .. })
        ));
        let mut buf = [0u8; 20];
        assert!(write_gpdu_header(&mut buf, 1, Some(PscFields::Ul { qfi: 64 }), 0).is_err());
        assert!(write_gpdu_header(
            &mut buf,
            1,
            Some(PscFields::Dl {
                qfi: 1,
                rqi: false,
                ppi: Some(8)
            }),
            0
        )
        .is_err());
        assert!(write_gpdu_header(&mut buf, 1, None, 65536).is_err());
    }
}
