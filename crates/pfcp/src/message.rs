//! A whole PFCP message as a header and the ordered tree of its IEs: what a capture decoder
//! prints and what re-encodes byte for byte. Typed access per message is in [`crate::msg`].

use serde_json::{json, Value as Json};

use crate::error::Result;
use crate::header::{Header, HeaderRepr};
use crate::ie::{decode_ies, encode_ies, Ie};

/// Message type values, TS 29.244 Table 7.3-1.
pub mod message_type {
    pub const HEARTBEAT_REQUEST: u8 = 1;
    pub const HEARTBEAT_RESPONSE: u8 = 2;
    pub const PFD_MANAGEMENT_REQUEST: u8 = 3;
    pub const PFD_MANAGEMENT_RESPONSE: u8 = 4;
    pub const ASSOCIATION_SETUP_REQUEST: u8 = 5;
    pub const ASSOCIATION_SETUP_RESPONSE: u8 = 6;
    pub const ASSOCIATION_UPDATE_REQUEST: u8 = 7;
    pub const ASSOCIATION_UPDATE_RESPONSE: u8 = 8;
    pub const ASSOCIATION_RELEASE_REQUEST: u8 = 9;
    pub const ASSOCIATION_RELEASE_RESPONSE: u8 = 10;
    pub const VERSION_NOT_SUPPORTED_RESPONSE: u8 = 11;
    pub const NODE_REPORT_REQUEST: u8 = 12;
    pub const NODE_REPORT_RESPONSE: u8 = 13;
    pub const SESSION_SET_DELETION_REQUEST: u8 = 14;
    pub const SESSION_SET_DELETION_RESPONSE: u8 = 15;
    pub const SESSION_SET_MODIFICATION_REQUEST: u8 = 16;
    pub const SESSION_SET_MODIFICATION_RESPONSE: u8 = 17;
    pub const SESSION_ESTABLISHMENT_REQUEST: u8 = 50;
    pub const SESSION_ESTABLISHMENT_RESPONSE: u8 = 51;
    pub const SESSION_MODIFICATION_REQUEST: u8 = 52;
    pub const SESSION_MODIFICATION_RESPONSE: u8 = 53;
    pub const SESSION_DELETION_REQUEST: u8 = 54;
    pub const SESSION_DELETION_RESPONSE: u8 = 55;
    pub const SESSION_REPORT_REQUEST: u8 = 56;
    pub const SESSION_REPORT_RESPONSE: u8 = 57;

    /// The specification's name of a message type, if known.
    pub fn name(t: u8) -> Option<&'static str> {
        Some(match t {
            1 => "Heartbeat Request",
            2 => "Heartbeat Response",
            3 => "PFD Management Request",
            4 => "PFD Management Response",
            5 => "Association Setup Request",
            6 => "Association Setup Response",
            7 => "Association Update Request",
            8 => "Association Update Response",
            9 => "Association Release Request",
            10 => "Association Release Response",
            11 => "Version Not Supported Response",
            12 => "Node Report Request",
            13 => "Node Report Response",
            14 => "Session Set Deletion Request",
            15 => "Session Set Deletion Response",
            16 => "Session Set Modification Request",
            17 => "Session Set Modification Response",
            50 => "Session Establishment Request",
            51 => "Session Establishment Response",
            52 => "Session Modification Request",
            53 => "Session Modification Response",
            54 => "Session Deletion Request",
            55 => "Session Deletion Response",
            56 => "Session Report Request",
            57 => "Session Report Response",
            _ => return None,
        })
    }

    /// Whether `t` is a request (Table 7.3-1). The parity of requests flips after Version
    /// Not Supported Response (11), so the list is explicit.
    pub fn is_request(t: u8) -> bool {
        matches!(t, 1 | 3 | 5 | 7 | 9 | 12 | 14 | 16 | 50 | 52 | 54 | 56)
    }

    /// Session messages carry a SEID in the header (clause 7.2.2.1).
    pub fn is_session(t: u8) -> bool {
        t >= 50
    }
}

/// The value of the first IE of type `ie_type` at the top level of the PFCP message in
/// `buf`, without decoding the rest (for counting messages by Cause, clause 8.2.1, or
/// reports by Report Type, clause 8.2.21). None: no such IE, or the message is cut short.
pub fn top_level_ie(buf: &[u8], ie_type: u16) -> Option<&[u8]> {
    let h = Header::new_checked(buf).ok()?;
    let end = (4 + h.length() as usize).min(buf.len());
    let mut at = h.header_len();
    while at + 4 <= end {
        let t = u16::from_be_bytes([buf[at], buf[at + 1]]);
        let len = u16::from_be_bytes([buf[at + 2], buf[at + 3]]) as usize;
        let value = buf.get(at + 4..at + 4 + len)?;
        if t == ie_type {
            return Some(value);
        }
        at += 4 + len;
    }
    None
}

/// A PFCP message: header and IEs in wire order.
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub header: HeaderRepr,
    pub ies: Vec<Ie>,
}

impl Message {
    /// Parse a whole message (one UDP payload).
    pub fn parse(buf: &[u8]) -> Result<Message> {
        let h = Header::new_checked(buf)?;
        let header = HeaderRepr::parse(&h)?;
        let start = header.header_len();
        let ies = decode_ies(&buf[start..], start)?;
        Ok(Message { header, ies })
    }

    /// Encode the message; the length field is computed.
    pub fn emit(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(256);
        encode_ies(&self.ies, &mut body);
        let mut out = Vec::with_capacity(body.len() + 16);
        self.header.emit(&mut out, body.len());
        out.extend_from_slice(&body);
        out
    }

    /// The message as JSON: type, name, SEID, sequence and the IE tree.
    pub fn to_json(&self) -> Json {
        let h = &self.header;
        let mut v = json!({
            "type": h.message_type,
            "name": message_type::name(h.message_type),
            "sequence": h.sequence,
        });
        if let Some(s) = h.seid {
            v["seid"] = json!(format!("0x{s:016x}"));
        }
        if let Some(p) = h.priority {
            v["priority"] = json!(p);
        }
        if h.follow_on {
            v["follow_on"] = json!(true);
        }
        v["ies"] = Json::Array(self.ies.iter().map(Ie::to_json).collect());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::message_type::*;

    #[test]
    fn requests_and_responses() {
        for t in [1, 3, 5, 7, 9, 12, 14, 16, 50, 52, 54, 56] {
            assert!(is_request(t), "{t}");
        }
        for t in [
            2, 4, 6, 8, 10, 11, 13, 15, 17, 51, 53, 55, 57, 0, 18, 49, 58,
        ] {
            assert!(!is_request(t), "{t}");
        }
        assert!(is_session(50) && !is_session(17));
    }
}
