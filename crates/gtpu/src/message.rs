//! GTP-U messages (TS 29.281 clause 7): the [`Message`] Repr.

use core::net::IpAddr;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::ext::{ExtensionHeader, SUPPORTED_EXTENSION_HEADERS};
use crate::header::{Header, Packet};
use crate::ie::{ie_type, Ie, IeIter, PrivateExtension};
use crate::inner::TPdu;
use crate::types::{message_type, message_type_name};

/// Body of an Echo Request or Echo Response (TS 29.281 clauses 7.2.1 and 7.2.2).
///
/// The Echo Response carries Recovery with value 0 "for backward compatibility", to be
/// ignored by the receiver; parsing therefore accepts its absence, and accepts it in an
/// Echo Request too. [`Echo::response`] builds the usual response body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Echo<'a> {
    /// Recovery restart counter (clause 8.2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovery: Option<u8>,
    /// Private Extensions (clause 8.6).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub private_extensions: Vec<PrivateExtension<'a>>,
    /// Other IEs: unknown TLV IEs and known IEs this message does not define, kept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_ies: Vec<Ie<'a>>,
}

impl Echo<'_> {
    /// The body of an Echo Request: no IEs.
    pub fn request() -> Self {
        Echo::default()
    }

    /// The body of an Echo Response: Recovery 0.
    pub fn response() -> Self {
        Echo {
            recovery: Some(0),
            ..Echo::default()
        }
    }
}

/// Body of an Error Indication (TS 29.281 clause 7.3.1): the TEID and address of the
/// G-PDU the sender had no context for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorIndication<'a> {
    /// Tunnel Endpoint Identifier Data I (clause 8.3), mandatory.
    pub teid_data_i: u32,
    /// GTP-U Peer Address (clause 8.4), mandatory.
    pub peer_address: IpAddr,
    /// Private Extensions (clause 8.6).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub private_extensions: Vec<PrivateExtension<'a>>,
    /// Other IEs, kept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_ies: Vec<Ie<'a>>,
}

impl ErrorIndication<'_> {
    /// An Error Indication body for `teid` at `peer_address`.
    pub fn new(teid_data_i: u32, peer_address: IpAddr) -> Self {
        ErrorIndication {
            teid_data_i,
            peer_address,
            private_extensions: Vec::new(),
            other_ies: Vec::new(),
        }
    }
}

/// Body of a Supported Extension Headers Notification (TS 29.281 clause 7.3.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SupportedExtensionHeadersNotification<'a> {
    /// Extension Header Type List (clause 8.5), mandatory: the types the sender
    /// supports.
    pub extension_header_types: &'a [u8],
    /// Private Extensions (clause 8.6), not defined for this message but kept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub private_extensions: Vec<PrivateExtension<'a>>,
    /// Other IEs, kept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_ies: Vec<Ie<'a>>,
}

/// Body of an End Marker (TS 29.281 clause 7.3.3).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EndMarker<'a> {
    /// Private Extensions (clause 8.6).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub private_extensions: Vec<PrivateExtension<'a>>,
    /// Other IEs, kept.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_ies: Vec<Ie<'a>>,
}

/// A GTP-U message (TS 29.281 clauses 6 and 7): header and body.
///
/// `parse` reads the `8 + Length` octets the header announces and ignores any octets
/// after them (real captures have UDP payloads padded past the GTP-U message).
/// Re-emitting a parsed message gives back those `8 + Length` octets, provided its IEs
/// were in ascending type order as clause 8.1 requires (the emitter writes them so).
///
/// One exception to TS 29.281 clause 5.1, which makes the Length the size of the
/// message: a G-PDU whose Length announces more octets than the buffer holds is
/// accepted when its whole header (optional fields and extension header chain) is in
/// the buffer, as the Open5GS UPF and tshark accept it; the T-PDU is the rest of the
/// buffer, since the inner IP packet carries its own length. The Length received is
/// kept in [`crate::Ignored::declared_length`], and re-emitting gives back the whole
/// buffer with that Length. Other message types stay strict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "message")]
pub enum Message<'a> {
    /// Echo Request, type 1 (clause 7.2.1).
    #[serde(rename = "Echo Request")]
    EchoRequest {
        /// The header.
        header: Header<'a>,
        /// The IEs.
        body: Echo<'a>,
    },
    /// Echo Response, type 2 (clause 7.2.2).
    #[serde(rename = "Echo Response")]
    EchoResponse {
        /// The header.
        header: Header<'a>,
        /// The IEs.
        body: Echo<'a>,
    },
    /// Error Indication, type 26 (clause 7.3.1).
    #[serde(rename = "Error Indication")]
    ErrorIndication {
        /// The header.
        header: Header<'a>,
        /// The IEs.
        body: ErrorIndication<'a>,
    },
    /// Supported Extension Headers Notification, type 31 (clause 7.3.2).
    #[serde(rename = "Supported Extension Headers Notification")]
    SupportedExtensionHeadersNotification {
        /// The header.
        header: Header<'a>,
        /// The IEs.
        body: SupportedExtensionHeadersNotification<'a>,
    },
    /// End Marker, type 254 (clause 7.3.3).
    #[serde(rename = "End Marker")]
    EndMarker {
        /// The header.
        header: Header<'a>,
        /// The IEs.
        body: EndMarker<'a>,
    },
    /// G-PDU, type 255: the header and the T-PDU (clause 6.1).
    #[serde(rename = "G-PDU")]
    GPdu {
        /// The header.
        header: Header<'a>,
        /// The T-PDU (serialized as its length and inner IP addresses).
        t_pdu: TPdu<'a>,
    },
    /// Any other message type, body kept raw.
    #[serde(rename = "Unknown")]
    Unknown {
        /// The message type.
        message_type: u8,
        /// The header.
        header: Header<'a>,
        /// The octets after the header.
        #[serde(serialize_with = "crate::util::hex")]
        body: &'a [u8],
    },
}

/// The IEs of a body, sorted by kind while parsing.
#[derive(Default)]
struct Ies<'a> {
    recovery: Option<u8>,
    teid_data_i: Option<u32>,
    peer_address: Option<IpAddr>,
    extension_header_types: Option<&'a [u8]>,
    private_extensions: Vec<PrivateExtension<'a>>,
    other: Vec<Ie<'a>>,
}

impl<'a> Ies<'a> {
    /// Parses `body` (at offset `base` in the message) for a message of type `mt`,
    /// taking the IEs that message defines into their slots.
    fn parse(body: &'a [u8], base: usize, mt: u8) -> Result<Ies<'a>> {
        use message_type::*;
        let mut ies = Ies::default();
        for item in IeIter::new(body, base) {
            let (offset, ie) = item?;
            let dup = |t| Error::DuplicateIe { ie_type: t, offset };
            match ie {
                Ie::Recovery { restart_counter } if matches!(mt, ECHO_REQUEST | ECHO_RESPONSE) => {
                    if ies.recovery.replace(restart_counter).is_some() {
                        return Err(dup(ie_type::RECOVERY));
                    }
                }
                Ie::TeidDataI { teid } if mt == ERROR_INDICATION => {
                    if ies.teid_data_i.replace(teid).is_some() {
                        return Err(dup(ie_type::TEID_DATA_I));
                    }
                }
                Ie::GtpuPeerAddress { address } if mt == ERROR_INDICATION => {
                    if ies.peer_address.replace(address).is_some() {
                        return Err(dup(ie_type::GTPU_PEER_ADDRESS));
                    }
                }
                Ie::ExtensionHeaderTypeList { types }
                    if mt == SUPPORTED_EXTENSION_HEADERS_NOTIFICATION =>
                {
                    if ies.extension_header_types.replace(types).is_some() {
                        return Err(dup(ie_type::EXTENSION_HEADER_TYPE_LIST));
                    }
                }
                Ie::PrivateExtension(p) => ies.private_extensions.push(p),
                other => ies.other.push(other),
            }
        }
        // In the order `emit` writes them (ascending type, clause 8.1), so that what we
        // parse equals what we re-encode parsed again.
        ies.other.sort_by_key(Ie::ie_type);
        Ok(ies)
    }
}

fn missing(message_type: u8, ie_type: u8) -> Error {
    Error::MissingIe {
        message_type,
        ie_type,
    }
}

impl<'a> Message<'a> {
    /// Parses a GTP-U message from the start of `buf` (a UDP payload).
    pub fn parse(buf: &'a [u8]) -> Result<Message<'a>> {
        let packet = Packet::new_unchecked(buf);
        let (header, offset) = Header::parse_with_offset(&packet)?;
        // `8 + Length`, or the end of the buffer for a G-PDU whose Length announces
        // more than it holds (`Ignored::declared_length`): the header parse has
        // rejected every other message that is shorter than its Length.
        let end = packet.message_len().min(buf.len());
        let body = buf.get(offset..end).ok_or_else(|| packet.truncated())?;
        let mt = packet.message_type();
        use message_type::*;
        Ok(match mt {
            G_PDU => Message::GPdu {
                header,
                t_pdu: TPdu(body),
            },
            ECHO_REQUEST | ECHO_RESPONSE => {
                let ies = Ies::parse(body, offset, mt)?;
                let body = Echo {
                    recovery: ies.recovery,
                    private_extensions: ies.private_extensions,
                    other_ies: ies.other,
                };
                if mt == ECHO_REQUEST {
                    Message::EchoRequest { header, body }
                } else {
                    Message::EchoResponse { header, body }
                }
            }
            ERROR_INDICATION => {
                let ies = Ies::parse(body, offset, mt)?;
                Message::ErrorIndication {
                    header,
                    body: ErrorIndication {
                        teid_data_i: ies.teid_data_i.ok_or(missing(mt, ie_type::TEID_DATA_I))?,
                        peer_address: ies
                            .peer_address
                            .ok_or(missing(mt, ie_type::GTPU_PEER_ADDRESS))?,
                        private_extensions: ies.private_extensions,
                        other_ies: ies.other,
                    },
                }
            }
            SUPPORTED_EXTENSION_HEADERS_NOTIFICATION => {
                let ies = Ies::parse(body, offset, mt)?;
                Message::SupportedExtensionHeadersNotification {
                    header,
                    body: SupportedExtensionHeadersNotification {
                        extension_header_types: ies
                            .extension_header_types
                            .ok_or(missing(mt, ie_type::EXTENSION_HEADER_TYPE_LIST))?,
                        private_extensions: ies.private_extensions,
                        other_ies: ies.other,
                    },
                }
            }
            END_MARKER => {
                let ies = Ies::parse(body, offset, mt)?;
                Message::EndMarker {
                    header,
                    body: EndMarker {
                        private_extensions: ies.private_extensions,
                        other_ies: ies.other,
                    },
                }
            }
            _ => Message::Unknown {
                message_type: mt,
                header,
                body,
            },
        })
    }

    /// The message type.
    pub fn message_type(&self) -> u8 {
        use message_type::*;
        match self {
            Message::EchoRequest { .. } => ECHO_REQUEST,
            Message::EchoResponse { .. } => ECHO_RESPONSE,
            Message::ErrorIndication { .. } => ERROR_INDICATION,
            Message::SupportedExtensionHeadersNotification { .. } => {
                SUPPORTED_EXTENSION_HEADERS_NOTIFICATION
            }
            Message::EndMarker { .. } => END_MARKER,
            Message::GPdu { .. } => G_PDU,
            Message::Unknown { message_type, .. } => *message_type,
        }
    }

    /// The message type's name ("G-PDU", "Echo Request", ...; "Unknown" otherwise).
    pub fn name(&self) -> &'static str {
        message_type_name(self.message_type()).unwrap_or("Unknown")
    }

    /// The header.
    pub fn header(&self) -> &Header<'a> {
        match self {
            Message::EchoRequest { header, .. }
            | Message::EchoResponse { header, .. }
            | Message::ErrorIndication { header, .. }
            | Message::SupportedExtensionHeadersNotification { header, .. }
            | Message::EndMarker { header, .. }
            | Message::GPdu { header, .. }
            | Message::Unknown { header, .. } => header,
        }
    }

    /// The header, mutably.
    pub fn header_mut(&mut self) -> &mut Header<'a> {
        match self {
            Message::EchoRequest { header, .. }
            | Message::EchoResponse { header, .. }
            | Message::ErrorIndication { header, .. }
            | Message::SupportedExtensionHeadersNotification { header, .. }
            | Message::EndMarker { header, .. }
            | Message::GPdu { header, .. }
            | Message::Unknown { header, .. } => header,
        }
    }

    /// The IEs of the body in the order they are emitted: ascending type (clause 8.1),
    /// stable among equal types. `None` for a G-PDU or an unknown message.
    pub fn ies(&self) -> Option<Vec<Ie<'a>>> {
        let mut ies = Vec::new();
        let (privates, others) = match self {
            Message::EchoRequest { body, .. } | Message::EchoResponse { body, .. } => {
                if let Some(restart_counter) = body.recovery {
                    ies.push(Ie::Recovery { restart_counter });
                }
                (&body.private_extensions, &body.other_ies)
            }
            Message::ErrorIndication { body, .. } => {
                ies.push(Ie::TeidDataI {
                    teid: body.teid_data_i,
                });
                ies.push(Ie::GtpuPeerAddress {
                    address: body.peer_address,
                });
                (&body.private_extensions, &body.other_ies)
            }
            Message::SupportedExtensionHeadersNotification { body, .. } => {
                ies.push(Ie::ExtensionHeaderTypeList {
                    types: body.extension_header_types,
                });
                (&body.private_extensions, &body.other_ies)
            }
            Message::EndMarker { body, .. } => (&body.private_extensions, &body.other_ies),
            Message::GPdu { .. } | Message::Unknown { .. } => return None,
        };
        ies.extend(others.iter().cloned());
        ies.extend(privates.iter().map(|p| Ie::PrivateExtension(*p)));
        ies.sort_by_key(Ie::ie_type);
        Some(ies)
    }

    fn body_len(&self, ies: Option<&[Ie<'a>]>) -> usize {
        match (self, ies) {
            (Message::GPdu { t_pdu, .. }, _) => t_pdu.0.len(),
            (Message::Unknown { body, .. }, _) => body.len(),
            (_, Some(ies)) => ies.iter().map(Ie::buffer_len).sum(),
            (_, None) => 0,
        }
    }

    /// Length of the message as emitted.
    pub fn buffer_len(&self) -> usize {
        let ies = self.ies();
        self.header().buffer_len() + self.body_len(ies.as_deref())
    }

    /// Writes the message at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let ies = self.ies();
        let body_len = self.body_len(ies.as_deref());
        let header = self.header();
        let total = header.buffer_len() + body_len;
        if buf.len() < total {
            return Err(Error::BufferTooSmall {
                needed: total,
                available: buf.len(),
            });
        }
        let mut offset = header.emit(self.message_type(), body_len, buf)?;
        match (self, ies) {
            (Message::GPdu { t_pdu, .. }, _) => {
                buf[offset..total].copy_from_slice(t_pdu.0);
            }
            (Message::Unknown { body, .. }, _) => {
                buf[offset..total].copy_from_slice(body);
            }
            (_, Some(ies)) => {
                for ie in &ies {
                    offset += ie.emit(&mut buf[offset..total])?;
                }
            }
            (_, None) => {}
        }
        Ok(total)
    }

    /// The message as a new vector.
    pub fn to_vec(&self) -> Result<Vec<u8>> {
        let mut out = vec![0; self.buffer_len()];
        let len = self.emit(&mut out)?;
        out.truncate(len);
        Ok(out)
    }

    /// A G-PDU for `teid` carrying `t_pdu`, with no optional header fields; add a PDU
    /// Session Container with [`Header::with_extension_header`] on `header_mut()`.
    pub fn g_pdu(teid: u32, t_pdu: &'a [u8]) -> Message<'a> {
        Message::GPdu {
            header: Header::new(teid),
            t_pdu: TPdu(t_pdu),
        }
    }

    /// An Error Indication (clause 7.3.1) for a G-PDU to `teid_data_i` received from
    /// UDP source port `udp_port` (carried in a UDP Port extension header, clause
    /// 5.2.2.1); `peer_address` is this node's address the G-PDU was sent to. TEID 0,
    /// S flag set (clause 5.1), sequence number 0.
    pub fn error_indication(
        teid_data_i: u32,
        peer_address: IpAddr,
        udp_port: Option<u16>,
    ) -> Message<'a> {
        let mut header = Header::new(0).with_sequence_number(0);
        if let Some(port) = udp_port {
            header = header.with_extension_header(ExtensionHeader::UdpPort { port });
        }
        Message::ErrorIndication {
            header,
            body: ErrorIndication::new(teid_data_i, peer_address),
        }
    }

    /// A Supported Extension Headers Notification (clause 7.3.2) listing the extension
    /// headers this crate understands ([`crate::SUPPORTED_EXTENSION_HEADERS`]), in
    /// answer to a message that failed with [`Error::UnsupportedExtensionHeader`].
    /// TEID 0, S flag set with `sequence_number` (clause 5.1).
    pub fn supported_extension_headers_notification(sequence_number: u16) -> Message<'a> {
        Message::SupportedExtensionHeadersNotification {
            header: Header::new(0).with_sequence_number(sequence_number),
            body: SupportedExtensionHeadersNotification {
                extension_header_types: SUPPORTED_EXTENSION_HEADERS,
                private_extensions: Vec::new(),
                other_ies: Vec::new(),
            },
        }
    }

    /// An Echo Request with a sequence number (S flag), as peers send it.
    pub fn echo_request(sequence_number: u16) -> Message<'a> {
        Message::EchoRequest {
            header: Header::new(0).with_sequence_number(sequence_number),
            body: Echo::request(),
        }
    }

    /// The Echo Response to an Echo Request: TEID 0, the request's sequence number
    /// (clause 7.2.2 / TS 29.060 clause 9.3.1.1), Recovery 0.
    pub fn echo_response_to(request: &Header<'_>) -> Message<'a> {
        let mut header = Header::new(0);
        header.sequence_number = Some(request.sequence_number.unwrap_or(0));
        Message::EchoResponse {
            header,
            body: Echo::response(),
        }
    }
}

#[cfg(test)]
mod tests {
    use core::net::Ipv4Addr;

    use super::*;

    fn round_trip(bytes: &[u8]) -> Message<'_> {
        let message = Message::parse(bytes).unwrap();
        assert_eq!(message.buffer_len(), bytes.len());
        assert_eq!(message.to_vec().unwrap(), bytes);
        message
    }

    #[test]
    fn echo_request_with_sequence() {
        // S flag, TEID 0, sequence 0x1234, N-PDU 0, next type 0, no IEs.
        let bytes = [0x32, 0x01, 0x00, 0x04, 0, 0, 0, 0, 0x12, 0x34, 0x00, 0x00];
        let message = round_trip(&bytes);
        assert_eq!(message, Message::echo_request(0x1234));
        assert_eq!(message.name(), "Echo Request");
        let response = Message::echo_response_to(message.header());
        assert_eq!(
            response.to_vec().unwrap(),
            [0x32, 0x02, 0x00, 0x06, 0, 0, 0, 0, 0x12, 0x34, 0x00, 0x00, 14, 0]
        );
        assert_eq!(
            round_trip(&response.to_vec().unwrap()),
            Message::EchoResponse {
                header: Header::new(0).with_sequence_number(0x1234),
                body: Echo::response()
            }
        );
    }

    #[test]
    fn echo_response_with_private_extension() {
        let bytes = [
            0x32, 0x02, 0x00, 0x0e, 0, 0, 0, 0, 0, 7, 0, 0, 14, 0, 255, 0, 5, 0x28, 0xaf, 1, 2, 3,
        ];
        let message = round_trip(&bytes);
        let Message::EchoResponse { body, .. } = &message else {
            panic!("{message:?}")
        };
        assert_eq!(body.recovery, Some(0));
        assert_eq!(body.private_extensions[0].extension_identifier, 10415);
        assert_eq!(body.private_extensions[0].value, &[1, 2, 3]);
    }

    #[test]
    fn error_indication() {
        // S flag and a UDP Port extension header, TEID Data I, peer address.
        let bytes = [
            0x36, 0x1a, 0x00, 0x14, 0, 0, 0, 0, 0, 1, 0, 0x40, 0x01, 0x08, 0x68, 0x00, 16, 0, 0,
            0xc0, 0xbb, 133, 0, 4, 127, 0, 0, 2,
        ];
        let message = round_trip(&bytes);
        let expected = Message::ErrorIndication {
            header: Header::new(0)
                .with_sequence_number(1)
                .with_extension_header(ExtensionHeader::UdpPort { port: 2152 }),
            body: ErrorIndication::new(0xc0bb, IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))),
        };
        assert_eq!(message, expected);
    }

    #[test]
    fn constructors() {
        let built =
            Message::error_indication(0xc0bb, IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), Some(2152));
        let mut expected = round_trip(&[
            0x36, 0x1a, 0x00, 0x14, 0, 0, 0, 0, 0, 1, 0, 0x40, 0x01, 0x08, 0x68, 0x00, 16, 0, 0,
            0xc0, 0xbb, 133, 0, 4, 127, 0, 0, 2,
        ]);
        expected.header_mut().sequence_number = Some(0);
        assert_eq!(built, expected);

        let sehn = Message::supported_extension_headers_notification(5);
        let bytes = sehn.to_vec().unwrap();
        assert_eq!(
            bytes[..14],
            [0x32, 0x1f, 0x00, 0x0f, 0, 0, 0, 0, 0, 5, 0, 0, 141, 9]
        );
        assert_eq!(bytes[14..], *SUPPORTED_EXTENSION_HEADERS);
        assert_eq!(Message::parse(&bytes), Ok(sehn));

        let payload = [0x45, 0, 0, 20];
        let mut gpdu = Message::g_pdu(7, &payload);
        let h = gpdu.header_mut();
        *h = core::mem::take(h).with_extension_header(ExtensionHeader::PduSessionContainer(
            crate::PduSessionContainer::dl(9),
        ));
        assert_eq!(
            gpdu.to_vec().unwrap(),
            [
                0x34, 0xff, 0x00, 0x0c, 0, 0, 0, 7, 0, 0, 0, 0x85, 0x01, 0x00, 0x09, 0x00, 0x45, 0,
                0, 20
            ]
        );
    }

    #[test]
    fn error_indication_missing_ies() {
        // Only the peer address.
        let bytes = [0x30, 0x1a, 0x00, 0x07, 0, 0, 0, 0, 133, 0, 4, 127, 0, 0, 2];
        assert_eq!(
            Message::parse(&bytes),
            Err(Error::MissingIe {
                message_type: 26,
                ie_type: 16
            })
        );
        // Only the TEID Data I.
        let bytes = [0x30, 0x1a, 0x00, 0x05, 0, 0, 0, 0, 16, 0, 0, 0, 1];
        assert_eq!(
            Message::parse(&bytes),
            Err(Error::MissingIe {
                message_type: 26,
                ie_type: 133
            })
        );
        // Peer address of 3 octets.
        let bytes = [
            0x30, 0x1a, 0x00, 0x0b, 0, 0, 0, 0, 16, 0, 0, 0, 1, 133, 0, 3, 127, 0, 0,
        ];
        assert_eq!(
            Message::parse(&bytes),
            Err(Error::InvalidIeLength {
                ie_type: 133,
                offset: 13,
                length: 3,
                reason: "GTP-U Peer Address is 4 (IPv4) or 16 (IPv6) octets"
            })
        );
        // Two TEID Data I.
        let bytes = [
            0x30, 0x1a, 0x00, 0x11, 0, 0, 0, 0, 16, 0, 0, 0, 1, 16, 0, 0, 0, 2, 133, 0, 4, 1, 2, 3,
            4,
        ];
        assert_eq!(
            Message::parse(&bytes),
            Err(Error::DuplicateIe {
                ie_type: 16,
                offset: 13
            })
        );
    }

    #[test]
    fn supported_extension_headers_notification() {
        let bytes = [0x30, 0x1f, 0x00, 0x04, 0, 0, 0, 0, 141, 2, 0x40, 0x85];
        let message = round_trip(&bytes);
        assert_eq!(
            message,
            Message::SupportedExtensionHeadersNotification {
                header: Header::new(0),
                body: SupportedExtensionHeadersNotification {
                    extension_header_types: &[0x40, 0x85],
                    private_extensions: vec![],
                    other_ies: vec![],
                }
            }
        );
        let bytes = [0x30, 0x1f, 0x00, 0x00, 0, 0, 0, 0];
        assert_eq!(
            Message::parse(&bytes),
            Err(Error::MissingIe {
                message_type: 31,
                ie_type: 141
            })
        );
    }

    #[test]
    fn end_marker_from_capture() {
        // open5gs-testcups-4g-endmarker: End Marker, TEID 1, followed in the UDP
        // payload by 92 octets of zero padding that are not part of the message.
        let mut bytes = vec![0x30, 0xfe, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01];
        bytes.resize(100, 0);
        let message = Message::parse(&bytes).unwrap();
        assert_eq!(
            message,
            Message::EndMarker {
                header: Header::new(1),
                body: EndMarker::default()
            }
        );
        assert_eq!(message.to_vec().unwrap(), bytes[..8]);
    }

    #[test]
    fn gpdu_with_length_past_the_buffer_from_capture() {
        let bytes = &crate::testdata::OPEN5GS_FRAME_139;
        let message = Message::parse(bytes).unwrap();
        let Message::GPdu { header, t_pdu } = &message else {
            panic!("{message:?}")
        };
        let mut expected = Header::new(1).with_extension_header(
            ExtensionHeader::PduSessionContainer(crate::PduSessionContainer::ul(1)),
        );
        expected.ignored.declared_length = Some(2096);
        assert_eq!(*header, expected);
        // The T-PDU is the rest of the UDP payload: the IPv6 packet and the zeros.
        assert_eq!(t_pdu.0, &bytes[16..]);
        assert_eq!(t_pdu.0.len(), 184);
        let ip = t_pdu.ip().unwrap();
        assert_eq!((ip.version, ip.protocol), (6, 58));
        assert_eq!(ip.src, "cafe::2".parse::<IpAddr>().unwrap());
        assert_eq!(ip.dst, "cafe::1".parse::<IpAddr>().unwrap());
        // Re-emitting gives back the UDP payload, Length 2096 included.
        assert_eq!(message.buffer_len(), 200);
        assert_eq!(message.to_vec().unwrap(), bytes);
        assert_eq!(
            Message::parse(&message.to_vec().unwrap()),
            Ok(message.clone())
        );
        let json = serde_json::to_value(&message).unwrap();
        assert_eq!(json["header"]["ignored"]["declared_length"], 2096);
        assert_eq!(json["t_pdu"]["length"], 184);

        // Octets after the header are optional, the header is not: cut inside the
        // PDU Session Container, or before it, the G-PDU is truncated.
        assert_eq!(
            Message::parse(&bytes[..16]).unwrap().to_vec().unwrap(),
            bytes[..16]
        );
        for len in [8, 11, 12, 13, 15] {
            assert_eq!(
                Message::parse(&bytes[..len]),
                Err(Error::Truncated {
                    what: "GTP-U message (per the Length field)",
                    offset: 0,
                    needed: 8 + 2096,
                    available: len,
                }),
                "{len}"
            );
        }
        // A Length shorter than the optional fields stays an error.
        let mut short = bytes.to_vec();
        short[2..4].copy_from_slice(&[0, 3]);
        assert_eq!(
            Message::parse(&short),
            Err(Error::LengthTooSmall {
                length: 3,
                needed: 4
            })
        );
        // A header built by hand does not inherit the Length: a smaller declared
        // length, or one on another message type, is not emitted.
        let mut built = message.clone();
        built.header_mut().ignored.declared_length = Some(10);
        assert_eq!(built.to_vec().unwrap()[2..4], [0x00, 0xc0]);
        let mut echo = Message::echo_request(7);
        echo.header_mut().ignored.declared_length = Some(100);
        assert_eq!(echo.to_vec().unwrap()[2..4], [0x00, 0x04]);
    }

    #[test]
    fn other_messages_with_length_past_the_buffer_are_rejected() {
        // Echo Request, S flag, Length 8 in 12 octets.
        let bytes = [0x32, 0x01, 0x00, 0x08, 0, 0, 0, 0, 0x12, 0x34, 0x00, 0x00];
        assert_eq!(
            Message::parse(&bytes),
            Err(Error::Truncated {
                what: "GTP-U message (per the Length field)",
                offset: 0,
                needed: 16,
                available: 12,
            })
        );
        // End Marker and Error Indication likewise, and an unknown message type.
        for mt in [2, 26, 31, 254, 0x63] {
            let bytes = [0x30, mt, 0x00, 0x10, 0, 0, 0, 1, 14, 0];
            assert!(
                matches!(
                    Message::parse(&bytes),
                    Err(Error::Truncated {
                        needed: 24,
                        available: 10,
                        ..
                    })
                ),
                "{mt}"
            );
        }
    }

    #[test]
    fn unknown_tv_ie_and_kept_tlv() {
        let bytes = [0x30, 0xfe, 0x00, 0x02, 0, 0, 0, 1, 3, 0];
        assert_eq!(
            Message::parse(&bytes),
            Err(Error::UnknownTvIe {
                ie_type: 3,
                offset: 8
            })
        );
        let bytes = [0x30, 0xfe, 0x00, 0x04, 0, 0, 0, 1, 200, 0, 1, 7];
        let message = round_trip(&bytes);
        let Message::EndMarker { body, .. } = message else {
            panic!()
        };
        assert_eq!(
            body.other_ies,
            vec![Ie::Unknown {
                ie_type: 200,
                value: &[7]
            }]
        );
    }

    #[test]
    fn unknown_message_type() {
        let bytes = [0x30, 0x63, 0x00, 0x02, 0, 0, 0, 9, 0xab, 0xcd];
        let message = round_trip(&bytes);
        assert_eq!(message.message_type(), 0x63);
        assert_eq!(message.name(), "Unknown");
    }

    #[test]
    fn unknown_comprehension_required_ext_header() {
        // G-PDU with an extension header of type 0x86 (10xxxxxx, unknown).
        let bytes = [
            0x34, 0xff, 0x00, 0x08, 0, 0, 0, 1, 0, 0, 0, 0x86, 0x01, 0, 0, 0,
        ];
        assert_eq!(
            Message::parse(&bytes),
            Err(Error::UnsupportedExtensionHeader {
                ext_type: 0x86,
                offset: 12
            })
        );
    }

    #[test]
    fn ext_chain_past_length() {
        // The Length (8) covers the optional fields and one 4-octet header, whose
        // next type announces another that lies outside the message.
        let bytes = [
            0x34, 0xff, 0x00, 0x08, 0, 0, 0, 1, 0, 0, 0, 0x85, 0x01, 0x00, 0x01, 0x40, 0x01, 0x08,
            0x68, 0x00,
        ];
        assert_eq!(
            Message::parse(&bytes),
            Err(Error::ExtensionHeaderOverrun {
                ext_type: 0x40,
                offset: 16,
                len: 4,
                end: 16
            })
        );
        // A header whose length runs past the end of the buffer.
        let bytes = [
            0x34, 0xff, 0x00, 0x08, 0, 0, 0, 1, 0, 0, 0, 0x85, 0x02, 0x00, 0x01, 0x00,
        ];
        assert_eq!(
            Message::parse(&bytes),
            Err(Error::ExtensionHeaderOverrun {
                ext_type: 0x85,
                offset: 12,
                len: 8,
                end: 16
            })
        );
        // Zero length.
        let bytes = [
            0x34, 0xff, 0x00, 0x08, 0, 0, 0, 1, 0, 0, 0, 0x85, 0x00, 0x00, 0x01, 0x00,
        ];
        assert_eq!(
            Message::parse(&bytes),
            Err(Error::ZeroLengthExtensionHeader {
                ext_type: 0x85,
                offset: 12
            })
        );
    }

    #[test]
    fn out_of_order_ies_are_reordered() {
        // Peer address before TEID Data I: parsed, emitted in ascending order.
        let bytes = [
            0x30, 0x1a, 0x00, 0x0c, 0, 0, 0, 0, 133, 0, 4, 1, 2, 3, 4, 16, 0, 0, 0, 1,
        ];
        let message = Message::parse(&bytes).unwrap();
        let out = message.to_vec().unwrap();
        assert_eq!(out[8..], [16, 0, 0, 0, 1, 133, 0, 4, 1, 2, 3, 4]);
    }

    #[test]
    fn ies_a_message_does_not_define_are_kept_in_emitted_order() {
        // Found by the parse_emit_parse fuzz target: an End Marker carrying an Extension
        // Header Type List (141) before a Recovery (14) parsed to a different value than
        // its re-encoding, which puts them in ascending order.
        let bytes = [
            0x30, 0xfe, 0x00, 0x06, 0x0e, 0x46, 0x0e, 0x00, 0x8d, 0x02, 0x00, 0x04, 0x0e, 0x23,
        ];
        let message = Message::parse(&bytes).unwrap();
        let out = message.to_vec().unwrap();
        assert_eq!(out[8..], [0x0e, 0x23, 0x8d, 0x02, 0x00, 0x04]);
        assert_eq!(Message::parse(&out).unwrap(), message);
    }

    #[test]
    fn serialize_json() {
        let bytes = [
            0x34, 0xff, 0x00, 0x24, 0x00, 0x00, 0x9c, 0x40, 0x00, 0x00, 0x00, 0x85, 0x01, 0x00,
            0x01, 0x00, 0x45, 0x00, 0x00, 0x1c, 0x31, 0xb2, 0x00, 0x00, 0x40, 0x01, 0x34, 0xd2,
            0x0a, 0x2d, 0x00, 0x01, 0x0a, 0x2e, 0x00, 0x02, 0x00, 0x00, 0x3a, 0xdb, 0x51, 0xdc,
            0x73, 0x48,
        ];
        let message = round_trip(&bytes);
        let json = serde_json::to_value(&message).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "message": "G-PDU",
                "header": {
                    "flags": "0x34",
                    "teid": 0x9c40,
                    "extension_headers": [{
                        "type": "pdu_session_container",
                        "pdu_type": "dl_pdu_session_information",
                        "qfi": 1,
                        "rqi": false
                    }]
                },
                "t_pdu": {
                    "length": 28,
                    "ip": { "version": 4, "protocol": 1, "src": "10.45.0.1", "dst": "10.46.0.2" }
                }
            })
        );
        let error = Message::ErrorIndication {
            header: Header::new(0).with_sequence_number(3),
            body: ErrorIndication::new(7, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))),
        };
        assert_eq!(
            serde_json::to_value(&error).unwrap(),
            serde_json::json!({
                "message": "Error Indication",
                "header": { "flags": "0x32", "teid": 0, "sequence_number": 3 },
                "body": { "teid_data_i": 7, "peer_address": "10.0.0.1" }
            })
        );
    }
}
