//! GTP-U wire codec (3GPP TS 29.281) with the PDU Session Container of TS 38.415.
//! No I/O: it reads and writes octets in caller-supplied buffers.
//!
//! The layout follows smoltcp's `wire` modules:
//!
//! * zero-copy views with one getter/setter per field and the field offsets in a
//!   `field` module: [`Packet`] (the GTP-U header, clause 5.1) and [`psc::Frame`]
//!   (the fixed part of a PDU Session Container);
//! * Reprs, the parsed meaning, each with `parse`, `buffer_len` and `emit`:
//!   [`Message`] (clause 7), [`Header`] (clause 5.1), [`ExtensionHeader`]
//!   (clause 5.2), [`PduSessionContainer`] (TS 38.415 clause 5.5.2) and [`Ie`]
//!   (clause 8). They borrow from the parsed buffer and derive `serde::Serialize`
//!   for printing messages as JSON;
//! * a data-path fast path, [`parse_gpdu`] and [`write_gpdu_header`] /
//!   [`GpduHeader`], which do not allocate.
//!
//! Parsing never panics and every error ([`Error`]) names the field, extension header
//! or IE concerned and its offset from the start of the message. Re-emitting a parsed
//! message gives back the octets it was parsed from: values receivers must ignore
//! (spare bits, fields whose flag is clear, container padding) are kept.
//!
//! The Length field (TS 29.281 clause 5.1) is checked against the buffer, with one
//! tolerance for G-PDUs only: a G-PDU whose Length announces more octets than the
//! buffer holds is accepted when its whole header is there, and its T-PDU is the rest
//! of the buffer. The Open5GS UPF and tshark (which uses the UDP length) receive such
//! G-PDUs, and the inner IP packet carries its own length. The Length received is kept
//! in [`Ignored::declared_length`] so that re-emitting reproduces it.
//!
//! The extension header chain walk is bounded at [`MAX_EXTENSION_HEADERS`] headers.
//! Parsing acts as a GTP-U endpoint receiver (clause 5.2.1): an unknown extension
//! header whose type has comprehension bits `10` or `11` fails with
//! [`Error::UnsupportedExtensionHeader`], so that the caller can answer with a
//! Supported Extension Headers Notification listing [`SUPPORTED_EXTENSION_HEADERS`];
//! unknown headers with bits `00` or `01` are kept raw.
//!
//! ```
//! use gtpu::{Message, PscFields, parse_gpdu, write_gpdu_header};
//!
//! // A gNB wraps an uplink packet for QoS flow 1 of the tunnel with TEID 0xc0bb.
//! let inner = [0x45u8, 0, 0, 20, 0, 0, 0, 0, 64, 1, 0, 0, 10, 46, 0, 2, 10, 45, 0, 1];
//! let mut buf = [0u8; 64];
//! let n = write_gpdu_header(&mut buf, 0xc0bb, Some(PscFields::Ul { qfi: 1 }), inner.len())?;
//! buf[n..n + inner.len()].copy_from_slice(&inner);
//! let gpdu = &buf[..n + inner.len()];
//!
//! // The UPF's data path finds the tunnel, the flow and the inner packet.
//! let info = parse_gpdu(gpdu)?;
//! assert_eq!((info.teid, info.qfi, info.payload_offset), (0xc0bb, Some(1), 16));
//!
//! // A tool parses the whole message and prints it.
//! let message = Message::parse(gpdu)?;
//! assert_eq!(message.name(), "G-PDU");
//! assert_eq!(message.to_vec()?, gpdu);
//! # Ok::<(), gtpu::Error>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod error;
pub mod ext;
pub mod fastpath;
pub mod header;
pub mod ie;
pub mod inner;
pub mod message;
pub mod psc;
pub mod types;
mod util;

pub use error::{Error, Result};
pub use ext::{
    Comprehension, ExtensionHeader, ExtensionHeaderIter, LongPdcpPduNumber, RawExtensionHeader,
    ServiceClassIndicator, MAX_EXTENSION_HEADERS, SUPPORTED_EXTENSION_HEADERS,
};
pub use fastpath::{parse_gpdu, write_gpdu_header, GpduHeader, GpduInfo, PscFields};
pub use header::{Header, Ignored, Packet};
pub use ie::{ie_type, Ie, IeIter, PrivateExtension};
pub use inner::{inner_ip, InnerIp, TPdu};
pub use message::{
    Echo, EndMarker, ErrorIndication, Message, SupportedExtensionHeadersNotification,
};
pub use psc::{DlPduSessionInfo, PduSessionContainer, UlPduSessionInfo, UlTimeStamps};
pub use types::{ext_type, ext_type_name, message_type, message_type_name};

/// The registered UDP port of GTP-U (TS 29.281 clause 4.4.2.0).
pub const UDP_PORT: u16 = 2152;

/// Octets taken from real captures, shared by the unit tests of several modules.
#[cfg(test)]
pub(crate) mod testdata {
    /// The UDP payload of frame 139 of open5gs-testregistration.pcapng
    /// (`tshark -r open5gs-testregistration.pcapng -Y frame.number==139 -T fields -e
    /// udp.payload`): a G-PDU from the Open5GS test gNB to the UPF, E flag, TEID 1, UL
    /// PDU Session Container QFI 1, then a whole 48-octet IPv6 ICMPv6 echo request
    /// cafe::2 -> cafe::1, then 136 zero octets. The Length field says 2096 (0x0830)
    /// although the UDP payload has 200 octets; the UPF answered the ping (frame 140).
    pub(crate) const OPEN5GS_FRAME_139: [u8; 200] = {
        const HEAD: [u8; 64] = [
            0x34, 0xff, 0x08, 0x30, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x85, 0x01, 0x10,
            0x01, 0x00, // GTP-U header, PDU Session Container
            0x60, 0x00, 0x00, 0x01, 0x00, 0x08, 0x3a, 0xff, // IPv6, payload 8, ICMPv6
            0xca, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, // cafe::2
            0xca, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, // cafe::1
            0x80, 0x00, 0xd4, 0x44, 0x29, 0x1f, 0xec, 0x58, // echo request
        ];
        let mut bytes = [0u8; 200];
        let mut i = 0;
        while i < HEAD.len() {
            bytes[i] = HEAD[i];
            i += 1;
        }
        bytes
    };
}
