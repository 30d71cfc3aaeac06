//! The GTP-U header (TS 29.281 clause 5.1): a zero-copy [`Packet`] view and the
//! parsed [`Header`].
//!
//! ```text
//!  octet 1   version(3)=1 | PT(1)=1 | spare(1) | E | S | PN
//!  octet 2   message type
//!  octets 3-4 length: octets after the first 8 (optional fields, extension headers, payload)
//!  octets 5-8 TEID
//!  octets 9-10  sequence number      \
//!  octet 11     N-PDU number          } present if any of E, S, PN is set
//!  octet 12     next extension type  /
//! ```

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};

use crate::error::{Error, Result};
use crate::ext::{ExtensionHeader, ExtensionHeaderIter};
use crate::types::message_type;

/// Byte ranges of the header fields (TS 29.281 clause 5.1, figure 5.1-1).
pub mod field {
    /// A byte range.
    pub type Field = core::ops::Range<usize>;
    /// Octet 1: version, PT, spare, E, S, PN.
    pub const FLAGS: usize = 0;
    /// Octet 2: message type.
    pub const MESSAGE_TYPE: usize = 1;
    /// Octets 3-4: length of everything after the first 8 octets.
    pub const LENGTH: Field = 2..4;
    /// Octets 5-8: tunnel endpoint identifier.
    pub const TEID: Field = 4..8;
    /// Octets 9-10: sequence number (present if E, S or PN is set).
    pub const SEQUENCE_NUMBER: Field = 8..10;
    /// Octet 11: N-PDU number (present if E, S or PN is set).
    pub const N_PDU_NUMBER: usize = 10;
    /// Octet 12: next extension header type (present if E, S or PN is set).
    pub const NEXT_EXTENSION_TYPE: usize = 11;
    /// Length of the mandatory part.
    pub const MANDATORY_LEN: usize = 8;
    /// Length of the mandatory part plus the optional fields.
    pub const OPTIONAL_END: usize = 12;
}

/// Bits of octet 1 (TS 29.281 clause 5.1).
pub mod flags {
    /// Version mask (bits 8-6).
    pub const VERSION_MASK: u8 = 0xe0;
    /// Version 1, shifted into place.
    pub const VERSION_1: u8 = 0x20;
    /// Protocol Type: 1 = GTP, 0 = GTP'.
    pub const PT: u8 = 0x10;
    /// Spare bit (bit 4): sent as 0, not evaluated by receivers.
    pub const SPARE: u8 = 0x08;
    /// Extension Header flag.
    pub const E: u8 = 0x04;
    /// Sequence number flag.
    pub const S: u8 = 0x02;
    /// N-PDU number flag.
    pub const PN: u8 = 0x01;
    /// Any of E, S, PN: the four optional octets are present.
    pub const OPTIONAL: u8 = E | S | PN;
}

/// A read/write view of a GTP-U message in a buffer, starting at the header
/// (TS 29.281 clause 5.1).
///
/// The getters of the mandatory fields do not check the buffer length; call
/// [`Packet::new_checked`] (or [`Packet::check_len`]) first when the buffer comes
/// from the network. After a successful check no getter panics. Setters panic if the
/// buffer is too short for the field, like indexing; the emitters of this crate size
/// their buffers first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer and checks, with [`Packet::check_len`], that it holds the
    /// whole message its Length field announces.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks that the buffer holds the mandatory header, the optional fields when a
    /// flag announces them, and all `8 + length` octets of the message. Octets after
    /// the message are allowed (they are seen in captures as UDP payload padding) and
    /// are not part of the message.
    ///
    /// This is the strict check of TS 29.281 clause 5.1. [`crate::Message::parse`] and
    /// [`crate::parse_gpdu`] relax it for G-PDUs only: see
    /// [`Ignored::declared_length`].
    pub fn check_len(&self) -> Result<()> {
        self.check_length_field()?;
        if self.buffer.as_ref().len() < self.message_len() {
            return Err(self.truncated());
        }
        Ok(())
    }

    /// Checks that the buffer holds the mandatory header and that the Length field
    /// covers the optional fields when a flag announces them, without comparing the
    /// Length with the buffer.
    fn check_length_field(&self) -> Result<()> {
        let data = self.buffer.as_ref();
        if data.len() < field::MANDATORY_LEN {
            return Err(Error::Truncated {
                what: "GTP-U header",
                offset: 0,
                needed: field::MANDATORY_LEN,
                available: data.len(),
            });
        }
        let length = self.length();
        if self.optional_fields_present()
            && usize::from(length) < field::OPTIONAL_END - field::MANDATORY_LEN
        {
            return Err(Error::LengthTooSmall {
                length,
                needed: field::OPTIONAL_END - field::MANDATORY_LEN,
            });
        }
        Ok(())
    }

    /// The error for a buffer shorter than `8 + length` (the mandatory header must
    /// be in the buffer).
    pub(crate) fn truncated(&self) -> Error {
        Error::Truncated {
            what: "GTP-U message (per the Length field)",
            offset: 0,
            needed: self.message_len(),
            available: self.buffer.as_ref().len(),
        }
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Octet 1 as received.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Version (bits 8-6 of octet 1); 1 for GTP-U.
    pub fn version(&self) -> u8 {
        self.flags() >> 5
    }

    /// Protocol Type bit: `true` for GTP, `false` for GTP'.
    pub fn protocol_type(&self) -> bool {
        self.flags() & flags::PT != 0
    }

    /// The spare bit (bit 4 of octet 1).
    pub fn spare_bit(&self) -> bool {
        self.flags() & flags::SPARE != 0
    }

    /// Extension Header flag.
    pub fn e_flag(&self) -> bool {
        self.flags() & flags::E != 0
    }

    /// Sequence number flag.
    pub fn s_flag(&self) -> bool {
        self.flags() & flags::S != 0
    }

    /// N-PDU number flag.
    pub fn pn_flag(&self) -> bool {
        self.flags() & flags::PN != 0
    }

    /// Whether the four optional octets (sequence number, N-PDU number, next
    /// extension header type) are present, i.e. any of E, S, PN is set.
    pub fn optional_fields_present(&self) -> bool {
        self.flags() & flags::OPTIONAL != 0
    }

    /// Message type (octet 2).
    pub fn message_type(&self) -> u8 {
        self.buffer.as_ref()[field::MESSAGE_TYPE]
    }

    /// Length field (octets 3-4): octets after the first 8.
    pub fn length(&self) -> u16 {
        let data = self.buffer.as_ref();
        u16::from_be_bytes([data[field::LENGTH.start], data[field::LENGTH.start + 1]])
    }

    /// Total length of the message: `8 + length`.
    pub fn message_len(&self) -> usize {
        field::MANDATORY_LEN + usize::from(self.length())
    }

    /// Tunnel endpoint identifier (octets 5-8).
    pub fn teid(&self) -> u32 {
        let data = self.buffer.as_ref();
        let mut teid = [0; 4];
        teid.copy_from_slice(&data[field::TEID]);
        u32::from_be_bytes(teid)
    }

    /// Length of the fixed part: 12 when the optional fields are present, else 8.
    pub fn fixed_header_len(&self) -> usize {
        if self.optional_fields_present() {
            field::OPTIONAL_END
        } else {
            field::MANDATORY_LEN
        }
    }

    /// Sequence number octets as received, if the optional fields are present.
    /// Meaningful only when the S flag is set.
    pub fn sequence_number(&self) -> Option<u16> {
        let data = self.buffer.as_ref();
        if !self.optional_fields_present() {
            return None;
        }
        let bytes = data.get(field::SEQUENCE_NUMBER)?;
        Some(u16::from_be_bytes([bytes[0], bytes[1]]))
    }

    /// N-PDU number as received, if the optional fields are present. Meaningful only
    /// when the PN flag is set.
    pub fn n_pdu_number(&self) -> Option<u8> {
        if !self.optional_fields_present() {
            return None;
        }
        self.buffer.as_ref().get(field::N_PDU_NUMBER).copied()
    }

    /// Next extension header type of the header, if the optional fields are present.
    /// Meaningful only when the E flag is set.
    pub fn next_extension_type(&self) -> Option<u8> {
        if !self.optional_fields_present() {
            return None;
        }
        self.buffer
            .as_ref()
            .get(field::NEXT_EXTENSION_TYPE)
            .copied()
    }

    /// Iterates over the extension header chain (TS 29.281 clause 5.2) without
    /// interpreting the headers. Empty when the E flag is clear. The walk stops at the
    /// end of the message (per the Length field) and after
    /// [`crate::MAX_EXTENSION_HEADERS`] headers, with an error.
    pub fn extension_headers(&self) -> ExtensionHeaderIter<'_> {
        let data = self.buffer.as_ref();
        let end = self.message_len().min(data.len());
        let first = match (self.e_flag(), self.next_extension_type()) {
            (true, Some(t)) => t,
            _ => 0,
        };
        ExtensionHeaderIter::new(data, field::OPTIONAL_END, end, first)
    }

    /// Offset of the payload: after the fixed part and the extension header chain.
    pub fn payload_offset(&self) -> Result<usize> {
        if !self.e_flag() {
            return Ok(self.fixed_header_len());
        }
        let mut iter = self.extension_headers();
        for header in iter.by_ref() {
            header?;
        }
        Ok(iter.offset())
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload (a T-PDU for a G-PDU, the IEs for other messages): from the end of
    /// the extension header chain to the end of the message per the Length field.
    pub fn payload(&self) -> Result<&'a [u8]> {
        let offset = self.payload_offset()?;
        let data = self.buffer.as_ref();
        let end = self.message_len();
        data.get(offset..end).ok_or(Error::Truncated {
            what: "GTP-U message (per the Length field)",
            offset: 0,
            needed: end,
            available: data.len(),
        })
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets octet 1 as a whole.
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }

    fn set_flag(&mut self, bit: u8, value: bool) {
        let octet = self.flags();
        self.set_flags(if value { octet | bit } else { octet & !bit });
    }

    /// Sets the version (3 bits).
    pub fn set_version(&mut self, version: u8) {
        let octet = self.flags();
        self.set_flags((octet & !flags::VERSION_MASK) | (version << 5));
    }

    /// Sets the Protocol Type bit.
    pub fn set_protocol_type(&mut self, gtp: bool) {
        self.set_flag(flags::PT, gtp);
    }

    /// Sets the spare bit.
    pub fn set_spare_bit(&mut self, value: bool) {
        self.set_flag(flags::SPARE, value);
    }

    /// Sets the E flag.
    pub fn set_e_flag(&mut self, value: bool) {
        self.set_flag(flags::E, value);
    }

    /// Sets the S flag.
    pub fn set_s_flag(&mut self, value: bool) {
        self.set_flag(flags::S, value);
    }

    /// Sets the PN flag.
    pub fn set_pn_flag(&mut self, value: bool) {
        self.set_flag(flags::PN, value);
    }

    /// Sets the message type.
    pub fn set_message_type(&mut self, value: u8) {
        self.buffer.as_mut()[field::MESSAGE_TYPE] = value;
    }

    /// Sets the Length field.
    pub fn set_length(&mut self, value: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the TEID.
    pub fn set_teid(&mut self, value: u32) {
        self.buffer.as_mut()[field::TEID].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the sequence number octets (the buffer must hold the optional fields).
    pub fn set_sequence_number(&mut self, value: u16) {
        self.buffer.as_mut()[field::SEQUENCE_NUMBER].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the N-PDU number octet (the buffer must hold the optional fields).
    pub fn set_n_pdu_number(&mut self, value: u8) {
        self.buffer.as_mut()[field::N_PDU_NUMBER] = value;
    }

    /// Sets the next extension header type octet of the header (the buffer must hold
    /// the optional fields).
    pub fn set_next_extension_type(&mut self, value: u8) {
        self.buffer.as_mut()[field::NEXT_EXTENSION_TYPE] = value;
    }
}

/// Header values that receivers ignore (TS 29.281 clause 5.1), kept so that
/// re-encoding a parsed message gives back the same octets. All are zero/false in a
/// message built from scratch, and need no attention.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Ignored {
    /// The spare bit of octet 1 ("sent as 0, not evaluated").
    pub spare_bit: bool,
    /// E flag set although no extension header follows (next type 0).
    pub empty_extension_chain: bool,
    /// Sequence number octets when the S flag is clear but the optional fields are
    /// present (because E or PN is set).
    pub sequence_number: u16,
    /// N-PDU number octet when the PN flag is clear but the optional fields are
    /// present.
    pub n_pdu_number: u8,
    /// Next extension header type octet when the E flag is clear but the optional
    /// fields are present.
    pub next_extension_type: u8,
    /// The Length field of a received G-PDU that announced more octets than the
    /// datagram held; `None` otherwise, and in every message built from scratch.
    ///
    /// TS 29.281 clause 5.1 defines the Length as the number of octets after the
    /// first 8 (optional fields, extension headers and T-PDU), so a receiver could
    /// discard such a G-PDU as truncated. Real peers send them: the Open5GS test gNB
    /// sent a G-PDU with Length 2096 in a 200-octet UDP payload holding the whole
    /// header and a complete IPv6 packet (open5gs-testregistration capture, frame
    /// 139), and the Open5GS UPF forwarded it while tshark decodes it using the UDP
    /// length. Parsing follows those receivers for G-PDUs (message type 255) only,
    /// since the inner IP packet carries its own length: when the fixed header, the
    /// optional fields and the whole extension header chain are in the buffer, the
    /// G-PDU is accepted, its T-PDU is the rest of the buffer and the Length received
    /// is kept here. Other message types stay strict (the Length is what delimits
    /// their IEs), and so does a Length shorter than the optional fields it must
    /// cover, or a buffer that ends inside the header.
    ///
    /// [`Header::emit`] writes this value as the Length of a G-PDU when it exceeds
    /// the actual length, so that re-emitting the parsed G-PDU gives back the octets
    /// received, Length field included. Set it to `None` before forwarding a G-PDU
    /// built from a parsed one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub declared_length: Option<u16>,
}

impl Ignored {
    /// Whether every value is the one a sender puts there.
    pub fn is_default(&self) -> bool {
        *self == Ignored::default()
    }
}

/// The parsed GTP-U header (TS 29.281 clauses 5.1 and 5.2) minus the message type and
/// the length, which the [`crate::Message`] around it gives.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Header<'a> {
    /// Tunnel endpoint identifier.
    pub teid: u32,
    /// Sequence number; `Some` iff the S flag is set.
    pub sequence_number: Option<u16>,
    /// N-PDU number; `Some` iff the PN flag is set.
    pub n_pdu_number: Option<u8>,
    /// Extension headers in order (TS 29.281 clause 5.2); the E flag is set iff this
    /// is not empty (or [`Ignored::empty_extension_chain`] is set).
    pub extension_headers: Vec<ExtensionHeader<'a>>,
    /// Values receivers ignore, kept for exact re-encoding.
    pub ignored: Ignored,
}

impl<'a> Header<'a> {
    /// A header with only a TEID: no flags, no extension headers.
    pub fn new(teid: u32) -> Self {
        Header {
            teid,
            ..Header::default()
        }
    }

    /// Sets the sequence number (and so the S flag).
    pub fn with_sequence_number(mut self, sequence_number: u16) -> Self {
        self.sequence_number = Some(sequence_number);
        self
    }

    /// Appends an extension header (and so sets the E flag).
    pub fn with_extension_header(mut self, header: ExtensionHeader<'a>) -> Self {
        self.extension_headers.push(header);
        self
    }

    /// Parses the header: checks the length (as [`Packet::check_len`], except for a
    /// G-PDU whose Length exceeds the buffer, see [`Ignored::declared_length`]),
    /// version and protocol type, then walks and interprets the extension header
    /// chain.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Header<'a>> {
        Ok(Self::parse_with_offset(packet)?.0)
    }

    /// As [`Header::parse`], also returning the payload offset.
    pub(crate) fn parse_with_offset<T: AsRef<[u8]> + ?Sized>(
        packet: &Packet<&'a T>,
    ) -> Result<(Header<'a>, usize)> {
        let data: &'a [u8] = packet.buffer.as_ref();
        if data.len() < field::MANDATORY_LEN {
            return Err(Error::Truncated {
                what: "GTP-U header",
                offset: 0,
                needed: field::MANDATORY_LEN,
                available: data.len(),
            });
        }
        // Version and PT first, so that a GTPv2 or GTP' message is reported as such
        // rather than by its length.
        if packet.version() != 1 {
            return Err(Error::UnsupportedVersion {
                version: packet.version(),
            });
        }
        if !packet.protocol_type() {
            return Err(Error::NotGtp);
        }
        // A G-PDU may announce more octets than the buffer holds as long as its whole
        // header is there (see `Ignored::declared_length`); other messages may not.
        let overlong_gpdu =
            packet.message_type() == message_type::G_PDU && data.len() < packet.message_len();
        if overlong_gpdu {
            packet.check_length_field()?;
            if data.len() < packet.fixed_header_len() {
                return Err(packet.truncated());
            }
        } else {
            packet.check_len()?;
        }
        let end = packet.message_len().min(data.len());
        let mut header = Header {
            teid: packet.teid(),
            ..Header::default()
        };
        header.ignored.spare_bit = packet.spare_bit();
        if overlong_gpdu {
            header.ignored.declared_length = Some(packet.length());
        }
        let mut payload_offset = field::MANDATORY_LEN;
        if packet.optional_fields_present() {
            payload_offset = field::OPTIONAL_END;
            let seq = packet.sequence_number().unwrap_or(0);
            let npdu = packet.n_pdu_number().unwrap_or(0);
            let next = packet.next_extension_type().unwrap_or(0);
            if packet.s_flag() {
                header.sequence_number = Some(seq);
            } else {
                header.ignored.sequence_number = seq;
            }
            if packet.pn_flag() {
                header.n_pdu_number = Some(npdu);
            } else {
                header.ignored.n_pdu_number = npdu;
            }
            if packet.e_flag() {
                if next == 0 {
                    header.ignored.empty_extension_chain = true;
                }
                let mut iter = ExtensionHeaderIter::new(data, field::OPTIONAL_END, end, next);
                for raw in iter.by_ref() {
                    let raw = match raw {
                        // The chain runs past the buffer, which holds less than the
                        // Length announces: the G-PDU is truncated, not overlong.
                        Err(Error::ExtensionHeaderOverrun { .. }) if overlong_gpdu => {
                            return Err(packet.truncated())
                        }
                        raw => raw?,
                    };
                    header.extension_headers.push(ExtensionHeader::parse(&raw)?);
                }
                payload_offset = iter.offset();
            } else {
                header.ignored.next_extension_type = next;
            }
        }
        Ok((header, payload_offset))
    }

    /// Whether the E flag is to be set.
    pub fn e_flag(&self) -> bool {
        !self.extension_headers.is_empty() || self.ignored.empty_extension_chain
    }

    /// Octet 1 as it will be emitted.
    pub fn flags(&self) -> u8 {
        let mut octet = flags::VERSION_1 | flags::PT;
        if self.ignored.spare_bit {
            octet |= flags::SPARE;
        }
        if self.e_flag() {
            octet |= flags::E;
        }
        if self.sequence_number.is_some() {
            octet |= flags::S;
        }
        if self.n_pdu_number.is_some() {
            octet |= flags::PN;
        }
        octet
    }

    /// Length of the header as emitted: 8, or 12 with the optional fields, plus the
    /// extension headers.
    pub fn buffer_len(&self) -> usize {
        if self.flags() & flags::OPTIONAL == 0 {
            return field::MANDATORY_LEN;
        }
        field::OPTIONAL_END
            + self
                .extension_headers
                .iter()
                .map(ExtensionHeader::buffer_len)
                .sum::<usize>()
    }

    /// Writes the header for a message of type `message_type` whose payload (after
    /// the header) is `payload_len` octets, into the start of `buf`. Returns the header
    /// length. The payload itself is not written. The Length field counts the
    /// optional fields, extension headers and payload, unless `message_type` is a
    /// G-PDU and [`Ignored::declared_length`] is larger.
    pub fn emit(&self, message_type: u8, payload_len: usize, buf: &mut [u8]) -> Result<usize> {
        let header_len = self.buffer_len();
        if buf.len() < header_len {
            return Err(Error::BufferTooSmall {
                needed: header_len,
                available: buf.len(),
            });
        }
        let length = header_len - field::MANDATORY_LEN + payload_len;
        let length = u16::try_from(length).map_err(|_| Error::ValueOutOfRange {
            field: "GTP-U Length",
            value: length as u64,
        })?;
        let length = match self.ignored.declared_length {
            Some(declared) if message_type == message_type::G_PDU && declared > length => declared,
            _ => length,
        };
        let flags_octet = self.flags();
        let mut packet = Packet::new_unchecked(&mut buf[..header_len]);
        packet.set_flags(flags_octet);
        packet.set_message_type(message_type);
        packet.set_length(length);
        packet.set_teid(self.teid);
        if flags_octet & flags::OPTIONAL == 0 {
            return Ok(header_len);
        }
        packet.set_sequence_number(self.sequence_number.unwrap_or(self.ignored.sequence_number));
        packet.set_n_pdu_number(self.n_pdu_number.unwrap_or(self.ignored.n_pdu_number));
        let first = match self.extension_headers.first() {
            Some(h) => h.ext_type(),
            None if self.e_flag() => 0,
            None => self.ignored.next_extension_type,
        };
        packet.set_next_extension_type(first);
        let mut offset = field::OPTIONAL_END;
        for (i, ext) in self.extension_headers.iter().enumerate() {
            let next = self
                .extension_headers
                .get(i + 1)
                .map_or(0, ExtensionHeader::ext_type);
            offset += ext.emit(next, &mut buf[offset..header_len])?;
        }
        Ok(header_len)
    }

    /// The QFI of the first PDU Session Container (TS 38.415), if any.
    pub fn qfi(&self) -> Option<u8> {
        self.extension_headers.iter().find_map(|h| match h {
            ExtensionHeader::PduSessionContainer(psc) => psc.qfi(),
            _ => None,
        })
    }
}

impl Serialize for Header<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> core::result::Result<S::Ok, S::Error> {
        let mut s = serializer.serialize_struct("Header", 6)?;
        s.serialize_field("flags", &format_args!("{:#04x}", self.flags()))?;
        s.serialize_field("teid", &self.teid)?;
        if let Some(seq) = self.sequence_number {
            s.serialize_field("sequence_number", &seq)?;
        } else {
            s.skip_field("sequence_number")?;
        }
        if let Some(npdu) = self.n_pdu_number {
            s.serialize_field("n_pdu_number", &npdu)?;
        } else {
            s.skip_field("n_pdu_number")?;
        }
        if self.e_flag() {
            s.serialize_field("extension_headers", &self.extension_headers)?;
        } else {
            s.skip_field("extension_headers")?;
        }
        if self.ignored.is_default() {
            s.skip_field("ignored")?;
        } else {
            s.serialize_field("ignored", &self.ignored)?;
        }
        s.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ext::ExtensionHeader;
    use crate::psc::{DlPduSessionInfo, PduSessionContainer};

    // Open5GS UPF -> gNB, 5g-roaming-hr capture: G-PDU, E flag, PDU Session Container
    // DL QFI 1, then the first octets of an IPv4 ICMP echo reply.
    static DL_GPDU_HEADER: [u8; 16] = [
        0x34, 0xff, 0x00, 0x24, 0x00, 0x00, 0x9c, 0x40, 0x00, 0x00, 0x00, 0x85, 0x01, 0x00, 0x01,
        0x00,
    ];

    #[test]
    fn deconstruct() {
        let mut bytes = DL_GPDU_HEADER.to_vec();
        bytes.resize(8 + 0x24, 0);
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.version(), 1);
        assert!(packet.protocol_type());
        assert!(!packet.spare_bit());
        assert!(packet.e_flag());
        assert!(!packet.s_flag());
        assert!(!packet.pn_flag());
        assert_eq!(packet.message_type(), 255);
        assert_eq!(packet.length(), 0x24);
        assert_eq!(packet.teid(), 0x9c40);
        assert_eq!(packet.sequence_number(), Some(0));
        assert_eq!(packet.n_pdu_number(), Some(0));
        assert_eq!(packet.next_extension_type(), Some(0x85));
        assert_eq!(packet.fixed_header_len(), 12);
        assert_eq!(packet.payload_offset(), Ok(16));
        assert_eq!(packet.payload().unwrap().len(), 0x24 - 8);
        let exts: Vec<_> = packet.extension_headers().map(|h| h.unwrap()).collect();
        assert_eq!(exts.len(), 1);
        assert_eq!(exts[0].ext_type, 0x85);
        assert_eq!(exts[0].offset, 12);
        assert_eq!(exts[0].content, &[0x00, 0x01]);
        assert_eq!(exts[0].next_type, 0);
    }

    #[test]
    fn construct() {
        let mut bytes = [0xa5u8; 16];
        let mut packet = Packet::new_unchecked(&mut bytes[..]);
        packet.set_flags(0);
        packet.set_version(1);
        packet.set_protocol_type(true);
        packet.set_e_flag(true);
        packet.set_message_type(255);
        packet.set_length(0x24);
        packet.set_teid(0x9c40);
        packet.set_sequence_number(0);
        packet.set_n_pdu_number(0);
        packet.set_next_extension_type(0x85);
        bytes[12..16].copy_from_slice(&[0x01, 0x00, 0x01, 0x00]);
        assert_eq!(bytes, DL_GPDU_HEADER);
    }

    #[test]
    fn parse_and_emit() {
        let mut bytes = DL_GPDU_HEADER.to_vec();
        bytes.resize(8 + 0x24, 0);
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        let (header, offset) = Header::parse_with_offset(&packet).unwrap();
        assert_eq!(offset, 16);
        let expected = Header::new(0x9c40).with_extension_header(
            ExtensionHeader::PduSessionContainer(PduSessionContainer::Dl(DlPduSessionInfo::new(1))),
        );
        assert_eq!(header, expected);
        assert_eq!(header.qfi(), Some(1));
        assert_eq!(header.buffer_len(), 16);
        let mut out = [0u8; 16];
        assert_eq!(header.emit(255, 0x24 - 8, &mut out), Ok(16));
        assert_eq!(out, DL_GPDU_HEADER);
    }

    #[test]
    fn minimal_header_round_trip() {
        // srsenb capture: 0x30 flags, no optional fields.
        let bytes = [
            0x30, 0xff, 0x00, 0x04, 0x00, 0x00, 0x00, 0x01, 0x45, 0, 0, 0,
        ];
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(packet.sequence_number(), None);
        assert_eq!(packet.next_extension_type(), None);
        let header = Header::parse(&packet).unwrap();
        assert_eq!(header, Header::new(1));
        let mut out = [0u8; 8];
        assert_eq!(header.emit(255, 4, &mut out), Ok(8));
        assert_eq!(out, bytes[..8]);
    }

    #[test]
    fn ignored_values_round_trip() {
        // S clear, PN set, E clear but a non-zero next type and sequence, spare bit set.
        let bytes = [
            0x39, 0x01, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x12, 0x34, 0x56, 0x85,
        ];
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        let header = Header::parse(&packet).unwrap();
        assert_eq!(header.sequence_number, None);
        assert_eq!(header.n_pdu_number, Some(0x56));
        assert_eq!(
            header.ignored,
            Ignored {
                spare_bit: true,
                empty_extension_chain: false,
                sequence_number: 0x1234,
                n_pdu_number: 0,
                next_extension_type: 0x85,
                declared_length: None,
            }
        );
        let mut out = [0u8; 12];
        assert_eq!(header.emit(1, 0, &mut out), Ok(12));
        assert_eq!(out, bytes);
    }

    #[test]
    fn e_flag_with_empty_chain_round_trip() {
        let bytes = [0x34, 0x01, 0x00, 0x04, 0, 0, 0, 0, 0, 0, 0, 0];
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        let header = Header::parse(&packet).unwrap();
        assert!(header.extension_headers.is_empty());
        assert!(header.ignored.empty_extension_chain);
        let mut out = [0u8; 12];
        header.emit(1, 0, &mut out).unwrap();
        assert_eq!(out, bytes);
    }

    #[test]
    fn truncated_header() {
        for len in 0..8 {
            let bytes = &DL_GPDU_HEADER[..len];
            assert!(matches!(
                Packet::new_checked(bytes),
                Err(Error::Truncated {
                    offset: 0,
                    needed: 8,
                    ..
                })
            ));
        }
        // Length announces 0x24 octets, buffer has fewer.
        assert_eq!(
            Packet::new_checked(&DL_GPDU_HEADER[..]),
            Err(Error::Truncated {
                what: "GTP-U message (per the Length field)",
                offset: 0,
                needed: 8 + 0x24,
                available: 16,
            })
        );
        // Flags announce the optional fields but the length is 2.
        let bytes = [0x32, 0xff, 0x00, 0x02, 0, 0, 0, 1, 0, 0];
        assert_eq!(
            Packet::new_checked(&bytes[..]),
            Err(Error::LengthTooSmall {
                length: 2,
                needed: 4
            })
        );
    }

    #[test]
    fn wrong_version_and_pt() {
        let bytes = [0x50, 0xff, 0x00, 0x00, 0, 0, 0, 1];
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            Header::parse(&packet),
            Err(Error::UnsupportedVersion { version: 2 })
        );
        let bytes = [0x20, 0xff, 0x00, 0x00, 0, 0, 0, 1];
        let packet = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Header::parse(&packet), Err(Error::NotGtp));
    }

    #[test]
    fn emit_checks() {
        let header = Header::new(1);
        let mut small = [0u8; 7];
        assert_eq!(
            header.emit(255, 0, &mut small),
            Err(Error::BufferTooSmall {
                needed: 8,
                available: 7
            })
        );
        let mut buf = [0u8; 8];
        assert!(matches!(
            header.emit(255, 70000, &mut buf),
            Err(Error::ValueOutOfRange { .. })
        ));
    }
}
