//! The PFCP message header, TS 29.244 clause 7.2.2.
//!
//! ```text
//!  octet 1    version(3) spare(2) FO MP S
//!  octet 2    message type
//!  octets 3-4 message length (octets after the first 4)
//!  octets 5-12 SEID                     (only if S = 1)
//!  3 octets   sequence number
//!  1 octet    message priority(4) spare(4)   (priority only if MP = 1)
//! ```

use serde::Serialize;

use crate::error::{Error, ErrorKind, Result};

mod field {
    pub const FLAGS: usize = 0;
    pub const MSG_TYPE: usize = 1;
    pub const LENGTH: std::ops::Range<usize> = 2..4;
    pub const SEID: std::ops::Range<usize> = 4..12;
}

/// The only PFCP version defined (clause 7.2.2.1).
pub const VERSION: u8 = 1;
/// Octets of a header without SEID (node messages).
pub const NODE_HEADER_LEN: usize = 8;
/// Octets of a header with SEID (session messages).
pub const SESSION_HEADER_LEN: usize = 16;

const FLAG_S: u8 = 0x01;
const FLAG_MP: u8 = 0x02;
const FLAG_FO: u8 = 0x04;

/// A zero-copy view of a PFCP header at the start of a buffer.
#[derive(Debug, Clone, Copy)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wrap a buffer without checks.
    pub fn new_unchecked(buffer: T) -> Self {
        Header { buffer }
    }

    /// Wrap a buffer, checking that the whole header (with SEID if S is set) is present.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let h = Header { buffer };
        let b = h.buffer.as_ref();
        if b.len() < NODE_HEADER_LEN || b.len() < h.header_len() {
            return Err(Error::new(ErrorKind::TruncatedHeader, None, 0));
        }
        Ok(h)
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS] >> 5
    }
    pub fn has_seid(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_S != 0
    }
    pub fn has_priority(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_MP != 0
    }
    pub fn follow_on(&self) -> bool {
        self.buffer.as_ref()[field::FLAGS] & FLAG_FO != 0
    }
    pub fn message_type(&self) -> u8 {
        self.buffer.as_ref()[field::MSG_TYPE]
    }
    /// The Message Length field: octets after the first four.
    pub fn length(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }
    pub fn header_len(&self) -> usize {
        if self.has_seid() {
            SESSION_HEADER_LEN
        } else {
            NODE_HEADER_LEN
        }
    }
    pub fn seid(&self) -> Option<u64> {
        if !self.has_seid() {
            return None;
        }
        let b = &self.buffer.as_ref()[field::SEID];
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_be_bytes(a))
    }
    pub fn sequence(&self) -> u32 {
        let o = self.header_len() - 4;
        let b = &self.buffer.as_ref()[o..o + 3];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }
    /// The last header octet: message priority (if MP) in the upper four bits, spare below.
    pub fn last_octet(&self) -> u8 {
        self.buffer.as_ref()[self.header_len() - 1]
    }
    pub fn priority(&self) -> Option<u8> {
        self.has_priority().then(|| self.last_octet() >> 4)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    pub fn set_message_type(&mut self, t: u8) {
        self.buffer.as_mut()[field::MSG_TYPE] = t;
    }
    pub fn set_length(&mut self, len: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&len.to_be_bytes());
    }
    pub fn set_sequence(&mut self, seq: u32) {
        let o = self.header_len() - 4;
        self.buffer.as_mut()[o..o + 3].copy_from_slice(&seq.to_be_bytes()[1..]);
    }
    pub fn set_seid(&mut self, seid: u64) {
        if self.has_seid() {
            self.buffer.as_mut()[field::SEID].copy_from_slice(&seid.to_be_bytes());
        }
    }
}

/// The parsed header. `spare_flags` and `spare_last` keep the spare bits so that a message
/// re-encodes to the octets it was parsed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HeaderRepr {
    pub version: u8,
    pub follow_on: bool,
    pub message_type: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seid: Option<u64>,
    pub sequence: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    #[serde(skip)]
    pub spare_flags: u8,
    #[serde(skip)]
    pub spare_last: u8,
}

impl HeaderRepr {
    /// A header for a node message (no SEID).
    pub fn node(message_type: u8, sequence: u32) -> Self {
        HeaderRepr {
            version: VERSION,
            follow_on: false,
            message_type,
            seid: None,
            sequence: sequence & 0x00ff_ffff,
            priority: None,
            spare_flags: 0,
            spare_last: 0,
        }
    }

    /// A header for a session message.
    pub fn session(message_type: u8, seid: u64, sequence: u32) -> Self {
        HeaderRepr {
            seid: Some(seid),
            ..HeaderRepr::node(message_type, sequence)
        }
    }

    /// Parse and check version and length against the octets available
    /// (clauses 7.6.2 and 7.6.3).
    pub fn parse<T: AsRef<[u8]>>(h: &Header<T>) -> Result<Self> {
        if h.version() != VERSION {
            return Err(Error::new(
                ErrorKind::UnsupportedVersion(h.version()),
                None,
                0,
            ));
        }
        let available = h.buffer.as_ref().len() - 4;
        let declared = h.length() as usize;
        if declared + 4 < h.header_len() || declared != available {
            return Err(Error::new(
                ErrorKind::MessageLength {
                    declared,
                    available,
                },
                None,
                2,
            ));
        }
        let flags = h.buffer.as_ref()[field::FLAGS];
        Ok(HeaderRepr {
            version: h.version(),
            follow_on: h.follow_on(),
            message_type: h.message_type(),
            seid: h.seid(),
            sequence: h.sequence(),
            priority: h.priority(),
            spare_flags: flags & 0x18,
            spare_last: if h.has_priority() {
                h.last_octet() & 0x0f
            } else {
                h.last_octet()
            },
        })
    }

    pub fn header_len(&self) -> usize {
        if self.seid.is_some() {
            SESSION_HEADER_LEN
        } else {
            NODE_HEADER_LEN
        }
    }

    /// Write the header; `body_len` is the number of IE octets that follow it.
    pub fn emit(&self, out: &mut Vec<u8>, body_len: usize) {
        let mut flags = (self.version << 5) | (self.spare_flags & 0x18);
        if self.follow_on {
            flags |= FLAG_FO;
        }
        if self.priority.is_some() {
            flags |= FLAG_MP;
        }
        if self.seid.is_some() {
            flags |= FLAG_S;
        }
        out.push(flags);
        out.push(self.message_type);
        let len = self.header_len() - 4 + body_len;
        out.extend_from_slice(&(len as u16).to_be_bytes());
        if let Some(seid) = self.seid {
            out.extend_from_slice(&seid.to_be_bytes());
        }
        out.extend_from_slice(&self.sequence.to_be_bytes()[1..]);
        let last = match self.priority {
            Some(p) => (p << 4) | (self.spare_last & 0x0f),
            None => self.spare_last,
        };
        out.push(last);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Heartbeat Request from open5gs-5g-roaming-hr.pcapng: node header, sequence 1.
    static HEARTBEAT: [u8; 16] = [
        0x20, 0x01, 0x00, 0x0c, 0x00, 0x00, 0x01, 0x00, 0x00, 0x60, 0x00, 0x04, 0xec, 0x24, 0xbe,
        0xce,
    ];

    // Session Deletion Request header: S=1, SEID 0x1be, sequence 5, with empty body.
    static SESSION: [u8; 16] = [
        0x21, 0x36, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xbe, 0x00, 0x00, 0x05,
        0x00,
    ];

    #[test]
    fn deconstruct_node() {
        let h = Header::new_checked(&HEARTBEAT[..]).unwrap();
        assert_eq!(h.version(), 1);
        assert!(!h.has_seid());
        assert_eq!(h.message_type(), 1);
        assert_eq!(h.length(), 12);
        assert_eq!(h.sequence(), 1);
        assert_eq!(h.header_len(), 8);
    }

    #[test]
    fn deconstruct_session() {
        let h = Header::new_checked(&SESSION[..]).unwrap();
        assert!(h.has_seid());
        assert_eq!(h.seid(), Some(0x1be));
        assert_eq!(h.sequence(), 5);
        assert_eq!(h.priority(), None);
    }

    #[test]
    fn parse_emit_session() {
        let h = Header::new_checked(&SESSION[..]).unwrap();
        let r = HeaderRepr::parse(&h).unwrap();
        assert_eq!(r, HeaderRepr::session(54, 0x1be, 5));
        let mut out = Vec::new();
        r.emit(&mut out, 0);
        assert_eq!(out, SESSION);
    }

    #[test]
    fn priority_round_trip() {
        let mut r = HeaderRepr::session(50, 7, 9);
        r.priority = Some(0xa);
        let mut out = Vec::new();
        r.emit(&mut out, 0);
        assert_eq!(out[0], 0x23);
        assert_eq!(out[15], 0xa0);
        let h = Header::new_checked(&out[..]).unwrap();
        assert_eq!(h.priority(), Some(0xa));
        assert_eq!(HeaderRepr::parse(&h).unwrap().priority, Some(0xa));
    }

    #[test]
    fn construct_sets_fields() {
        let mut buf = SESSION;
        let mut h = Header::new_unchecked(&mut buf[..]);
        h.set_sequence(0x123456);
        h.set_seid(0x1122334455667788);
        h.set_message_type(52);
        assert_eq!(
            &buf[..],
            &[
                0x21, 0x34, 0x00, 0x0c, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x12, 0x34,
                0x56, 0x00
            ]
        );
    }

    #[test]
    fn truncated_and_bad_version() {
        assert_eq!(
            Header::new_checked(&SESSION[..10]).unwrap_err().kind,
            ErrorKind::TruncatedHeader
        );
        let mut v2 = HEARTBEAT;
        v2[0] = 0x40;
        let h = Header::new_checked(&v2[..]).unwrap();
        assert_eq!(
            HeaderRepr::parse(&h).unwrap_err().kind,
            ErrorKind::UnsupportedVersion(2)
        );
    }

    #[test]
    fn length_mismatch() {
        let h = Header::new_checked(&HEARTBEAT[..12]).unwrap();
        assert_eq!(
            HeaderRepr::parse(&h).unwrap_err().kind,
            ErrorKind::MessageLength {
                declared: 12,
                available: 8
            }
        );
    }
}
