//! The numbers of TS 29.281: message types (table 6.1-1) and extension header types
//! (figure 5.2.1-3), with their names. Every other module of the codec uses them.

/// Message type values (TS 29.281 clause 6.1, table 6.1-1).
pub mod message_type {
    /// Echo Request (clause 7.2.1).
    pub const ECHO_REQUEST: u8 = 1;
    /// Echo Response (clause 7.2.2).
    pub const ECHO_RESPONSE: u8 = 2;
    /// Error Indication (clause 7.3.1).
    pub const ERROR_INDICATION: u8 = 26;
    /// Supported Extension Headers Notification (clause 7.3.2).
    pub const SUPPORTED_EXTENSION_HEADERS_NOTIFICATION: u8 = 31;
    /// End Marker (clause 7.3.3).
    pub const END_MARKER: u8 = 254;
    /// G-PDU: a T-PDU, the user packet (clause 6.1).
    pub const G_PDU: u8 = 255;
}

/// Name of a message type of table 6.1-1, if it has one.
pub fn message_type_name(t: u8) -> Option<&'static str> {
    Some(match t {
        message_type::ECHO_REQUEST => "Echo Request",
        message_type::ECHO_RESPONSE => "Echo Response",
        message_type::ERROR_INDICATION => "Error Indication",
        message_type::SUPPORTED_EXTENSION_HEADERS_NOTIFICATION => {
            "Supported Extension Headers Notification"
        }
        message_type::END_MARKER => "End Marker",
        message_type::G_PDU => "G-PDU",
        _ => return None,
    })
}

/// Extension header type values (TS 29.281 clause 5.2.1, figure 5.2.1-3).
pub mod ext_type {
    /// No more extension headers.
    pub const NO_MORE: u8 = 0x00;
    /// Long PDCP PDU Number, the value of later releases (clause 5.2.2.2A).
    pub const LONG_PDCP_PDU_NUMBER: u8 = 0x03;
    /// Service Class Indicator (clause 5.2.2.3).
    pub const SERVICE_CLASS_INDICATOR: u8 = 0x20;
    /// UDP Port (clause 5.2.2.1).
    pub const UDP_PORT: u8 = 0x40;
    /// RAN Container (clause 5.2.2.4).
    pub const RAN_CONTAINER: u8 = 0x81;
    /// Long PDCP PDU Number, the earlier value (clause 5.2.2.2A).
    pub const LONG_PDCP_PDU_NUMBER_LEGACY: u8 = 0x82;
    /// Xw RAN Container (clause 5.2.2.5).
    pub const XW_RAN_CONTAINER: u8 = 0x83;
    /// NR RAN Container (clause 5.2.2.6; content in TS 38.425).
    pub const NR_RAN_CONTAINER: u8 = 0x84;
    /// PDU Session Container (clause 5.2.2.7; content in TS 38.415).
    pub const PDU_SESSION_CONTAINER: u8 = 0x85;
    /// PDCP PDU Number (clause 5.2.2.2).
    pub const PDCP_PDU_NUMBER: u8 = 0xc0;
}

/// Name of an extension header type of figure 5.2.1-3, if it has one.
pub fn ext_type_name(t: u8) -> Option<&'static str> {
    Some(match t {
        ext_type::NO_MORE => "No more extension headers",
        0x01 | 0x02 | 0xc1 | 0xc2 => "Reserved - Control Plane only",
        ext_type::LONG_PDCP_PDU_NUMBER | ext_type::LONG_PDCP_PDU_NUMBER_LEGACY => {
            "Long PDCP PDU Number"
        }
        ext_type::SERVICE_CLASS_INDICATOR => "Service Class Indicator",
        ext_type::UDP_PORT => "UDP Port",
        ext_type::RAN_CONTAINER => "RAN Container",
        ext_type::XW_RAN_CONTAINER => "Xw RAN Container",
        ext_type::NR_RAN_CONTAINER => "NR RAN Container",
        ext_type::PDU_SESSION_CONTAINER => "PDU Session Container",
        ext_type::PDCP_PDU_NUMBER => "PDCP PDU Number",
        _ => return None,
    })
}
