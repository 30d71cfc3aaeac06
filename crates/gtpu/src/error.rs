//! Errors of the GTP-U codec.
//!
//! Every parse error says which field, extension header (TS 29.281 clause 5.2) or
//! information element (TS 29.281 clause 8) was wrong and the byte offset of the
//! offending octet, counted from the first octet of the GTP-U message (the flags
//! octet of the header in TS 29.281 clause 5.1).

use thiserror::Error;

/// Result type of this crate.
pub type Result<T> = core::result::Result<T, Error>;

/// What went wrong while parsing or emitting a GTP-U message.
///
/// Offsets are from the start of the GTP-U message. Variants that a receiving
/// GTP-U endpoint must answer in a specific way say so: an
/// [`Error::UnsupportedExtensionHeader`] calls for a Supported Extension Headers
/// Notification (TS 29.281 clauses 5.2.1 and 7.3.2); the others mean the message
/// is discarded (TS 29.281 clause 7.3.1 / 29.060 clause 11.1).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Error {
    /// The buffer ends before `what` does.
    #[error("truncated {what} at offset {offset}: need {needed} octets, have {available}")]
    Truncated {
        /// The field, header or IE that is cut short.
        what: &'static str,
        /// Where it starts.
        offset: usize,
        /// Octets it needs from `offset` on.
        needed: usize,
        /// Octets the buffer (or enclosing length) has from `offset` on.
        available: usize,
    },

    /// Version field (bits 8-6 of octet 1) is not 1 (TS 29.281 clause 5.1).
    #[error("unsupported GTP version {version} at offset 0 (GTP-U is version 1)")]
    UnsupportedVersion {
        /// The version received.
        version: u8,
    },

    /// Protocol Type bit (bit 5 of octet 1) is 0, i.e. GTP' (TS 29.281 clause 5.1).
    #[error("protocol type bit is 0 (GTP') at offset 0; GTP-U requires PT=1")]
    NotGtp,

    /// The Length field (octets 3-4) is smaller than the optional fields it must cover
    /// (TS 29.281 clause 5.1: the length includes the sequence number, N-PDU number and
    /// next extension header type octets when any of E, S, PN is set).
    #[error("length field {length} at offset 2 is too small: the header needs {needed} octets after the first 8")]
    LengthTooSmall {
        /// The Length field value.
        length: u16,
        /// Octets the header needs after the mandatory 8.
        needed: usize,
    },

    /// An extension header length octet is 0 (TS 29.281 clause 5.2.1: the length is in
    /// 4-octet units and includes the length and next-type octets, so 0 is invalid).
    #[error("extension header of type {ext_type:#04x} at offset {offset} has length 0")]
    ZeroLengthExtensionHeader {
        /// The extension header type (from the previous next-type octet).
        ext_type: u8,
        /// Offset of the length octet.
        offset: usize,
    },

    /// An extension header runs past the end of the message as given by the Length
    /// field, or past the buffer.
    #[error("extension header of type {ext_type:#04x} at offset {offset} ({len} octets) runs past the end of the message at {end}")]
    ExtensionHeaderOverrun {
        /// The extension header type.
        ext_type: u8,
        /// Offset of its length octet.
        offset: usize,
        /// Its length in octets (4 times the length octet).
        len: usize,
        /// Where the message ends.
        end: usize,
    },

    /// More than [`crate::MAX_EXTENSION_HEADERS`] extension headers are chained. The
    /// chain walk is bounded so that hostile input cannot make it long.
    #[error("more than {max} extension headers; the next one starts at offset {offset}")]
    TooManyExtensionHeaders {
        /// The bound.
        max: usize,
        /// Offset of the first header past the bound.
        offset: usize,
    },

    /// An extension header whose type this crate does not know and whose two most
    /// significant bits say comprehension is required (10 or 11, TS 29.281 clause
    /// 5.2.1). The receiver discards the message and should send a Supported
    /// Extension Headers Notification (clause 7.3.2) listing [`crate::SUPPORTED_EXTENSION_HEADERS`].
    #[error("unsupported extension header type {ext_type:#04x} at offset {offset}, comprehension required")]
    UnsupportedExtensionHeader {
        /// The extension header type.
        ext_type: u8,
        /// Offset of its length octet.
        offset: usize,
    },

    /// A known extension header whose content is malformed (wrong length for its
    /// type, a field out of range, ...).
    #[error("invalid extension header of type {ext_type:#04x} at offset {offset}: {reason}")]
    InvalidExtensionHeader {
        /// The extension header type.
        ext_type: u8,
        /// Offset of the offending octet.
        offset: usize,
        /// What is wrong.
        reason: &'static str,
    },

    /// An information element of type < 128 (TV, fixed length by type, TS 29.281
    /// clause 8.1) that this crate does not know: its length is unknown, so the rest of
    /// the message cannot be walked.
    #[error(
        "unknown TV information element type {ie_type} at offset {offset}: its length is unknown"
    )]
    UnknownTvIe {
        /// The IE type.
        ie_type: u8,
        /// Offset of the type octet.
        offset: usize,
    },

    /// An information element has a length its type does not allow.
    #[error("information element type {ie_type} at offset {offset} has invalid length {length}: {reason}")]
    InvalidIeLength {
        /// The IE type.
        ie_type: u8,
        /// Offset of the type octet.
        offset: usize,
        /// The length found.
        length: usize,
        /// What the type allows.
        reason: &'static str,
    },

    /// A mandatory information element is absent from a message (TS 29.281 clause 7).
    #[error("message type {message_type} lacks mandatory information element type {ie_type}")]
    MissingIe {
        /// The message type.
        message_type: u8,
        /// The absent IE type.
        ie_type: u8,
    },

    /// An information element that may occur once occurs again.
    #[error("information element type {ie_type} repeated at offset {offset}")]
    DuplicateIe {
        /// The IE type.
        ie_type: u8,
        /// Offset of the second occurrence.
        offset: usize,
    },

    /// The fast path was handed a message that is not a G-PDU.
    #[error("message type {message_type} is not a G-PDU (255)")]
    NotGpdu {
        /// The message type received.
        message_type: u8,
    },

    /// Emitting: the output buffer is too small.
    #[error("buffer too small: need {needed} octets, have {available}")]
    BufferTooSmall {
        /// Octets needed.
        needed: usize,
        /// Octets available.
        available: usize,
    },

    /// Emitting: a value does not fit its field.
    #[error("{field} value {value} does not fit its field")]
    ValueOutOfRange {
        /// The field.
        field: &'static str,
        /// The value.
        value: u64,
    },
}

impl Error {
    /// Offset of the offending octet from the start of the message, where there is one.
    pub fn offset(&self) -> Option<usize> {
        match *self {
            Error::Truncated { offset, .. }
            | Error::ZeroLengthExtensionHeader { offset, .. }
            | Error::ExtensionHeaderOverrun { offset, .. }
            | Error::TooManyExtensionHeaders { offset, .. }
            | Error::UnsupportedExtensionHeader { offset, .. }
            | Error::InvalidExtensionHeader { offset, .. }
            | Error::UnknownTvIe { offset, .. }
            | Error::InvalidIeLength { offset, .. }
            | Error::DuplicateIe { offset, .. } => Some(offset),
            Error::UnsupportedVersion { .. } | Error::NotGtp => Some(0),
            Error::LengthTooSmall { .. } => Some(2),
            Error::NotGpdu { .. } => Some(1),
            Error::MissingIe { .. }
            | Error::BufferTooSmall { .. }
            | Error::ValueOutOfRange { .. } => None,
        }
    }

    /// Adds `base` to the offset, for errors found in a slice that starts at `base`
    /// within the message.
    pub(crate) fn shifted(mut self, base: usize) -> Self {
        match &mut self {
            Error::Truncated { offset, .. }
            | Error::ZeroLengthExtensionHeader { offset, .. }
            | Error::ExtensionHeaderOverrun { offset, .. }
            | Error::TooManyExtensionHeaders { offset, .. }
            | Error::UnsupportedExtensionHeader { offset, .. }
            | Error::InvalidExtensionHeader { offset, .. }
            | Error::UnknownTvIe { offset, .. }
            | Error::InvalidIeLength { offset, .. }
            | Error::DuplicateIe { offset, .. } => *offset += base,
            _ => {}
        }
        self
    }
}
