//! Typed messages (TS 29.244 clause 7) and grouped IEs, with their mandatory IEs checked.
//!
//! Each struct lists the IEs of its table in the specification, in table order: mandatory
//! IEs as plain fields, conditional and optional ones as `Option`, repeatable ones as `Vec`.
//! IEs a struct does not name (unknown, vendor-specific, a second copy of a single IE,
//! clause 7.6.10) are kept in `other` so nothing is lost. Encoding writes the IEs in table
//! order followed by `other`.

use crate::error::{Error, ErrorKind, Result};
use crate::header::{Header, HeaderRepr};
use crate::ie::{tlvs, RawIe, Value, MAX_DEPTH};

mod node;
mod rules;
mod session;

pub use node::*;
pub use rules::*;
pub use session::*;

/// How one field of a grouped IE or message is decoded and encoded.
pub trait Field: Sized {
    fn decode_field(raw: &RawIe, depth: u8) -> Result<Self>;
    /// Append the value octets (not the IE header).
    fn encode_field(&self, out: &mut Vec<u8>);
}

impl<T: Value> Field for T {
    fn decode_field(raw: &RawIe, _depth: u8) -> Result<Self> {
        T::decode(raw.value).map_err(|e| e.at(raw.ie_type, raw.value_offset))
    }
    fn encode_field(&self, out: &mut Vec<u8>) {
        self.encode(out)
    }
}

/// A list of IEs with a struct layout: grouped IEs and message bodies.
pub trait Group: Sized {
    /// Decode from the octets of the children; `at` is the container's own offset, used
    /// for "mandatory IE missing" errors.
    fn decode_body(body: &[u8], base: usize, at: usize, depth: u8) -> Result<Self>;
    fn encode_body(&self, out: &mut Vec<u8>);
}

/// A message body.
pub trait Body: Group {
    const MESSAGE_TYPE: u8;
}

pub(crate) fn nested<G: Group>(raw: &RawIe, depth: u8) -> Result<G> {
    if depth + 1 >= MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::TooDeep,
            Some(raw.ie_type),
            raw.offset,
        ));
    }
    G::decode_body(raw.value, raw.value_offset, raw.offset, depth + 1)
        .map_err(|e| e.within(raw.ie_type))
}

pub(crate) fn missing(ie_type: u16, at: usize) -> Error {
    Error::new(ErrorKind::MandatoryMissing, Some(ie_type), at)
}

/// Iterate over the TLVs of a body; used by the generated decoders.
pub(crate) fn body_tlvs(body: &[u8], base: usize) -> crate::ie::Tlvs<'_> {
    tlvs(body, base)
}

macro_rules! slot_ty {
    (M, $t:ty) => { $t };
    (MV, $t:ty) => { Vec<$t> };
    (O, $t:ty) => { Option<$t> };
    (V, $t:ty) => { Vec<$t> };
}

macro_rules! slot_tmp {
    (M, $t:ty) => { Option<$t> };
    (MV, $t:ty) => { Vec<$t> };
    (O, $t:ty) => { Option<$t> };
    (V, $t:ty) => { Vec<$t> };
}

macro_rules! slot_put {
    (M, $slot:ident, $v:expr, $raw:ident, $depth:ident, $other:ident) => {
        if $slot.is_none() {
            $slot = Some($v);
        } else {
            $other.push($crate::ie::Ie::decode(&$raw, $depth)?);
        }
    };
    (O, $slot:ident, $v:expr, $raw:ident, $depth:ident, $other:ident) => {
        $crate::msg::slot_put!(M, $slot, $v, $raw, $depth, $other)
    };
    (MV, $slot:ident, $v:expr, $raw:ident, $depth:ident, $other:ident) => {
        $slot.push($v)
    };
    (V, $slot:ident, $v:expr, $raw:ident, $depth:ident, $other:ident) => {
        $slot.push($v)
    };
}

macro_rules! slot_finish {
    (M, $slot:ident, $code:expr, $at:ident) => {
        $slot.ok_or_else(|| $crate::msg::missing($code, $at))?
    };
    (MV, $slot:ident, $code:expr, $at:ident) => {
        if $slot.is_empty() {
            return Err($crate::msg::missing($code, $at));
        } else {
            $slot
        }
    };
    (O, $slot:ident, $code:expr, $at:ident) => {
        $slot
    };
    (V, $slot:ident, $code:expr, $at:ident) => {
        $slot
    };
}

macro_rules! slot_encode {
    (M, $x:expr, $code:expr, $out:ident) => {
        $crate::ie::put_ie($out, $code, None, |o| {
            $crate::msg::Field::encode_field($x, o)
        })
    };
    (O, $x:expr, $code:expr, $out:ident) => {
        if let Some(v) = $x {
            $crate::ie::put_ie($out, $code, None, |o| {
                $crate::msg::Field::encode_field(v, o)
            })
        }
    };
    (MV, $x:expr, $code:expr, $out:ident) => {
        for v in $x {
            $crate::ie::put_ie($out, $code, None, |o| {
                $crate::msg::Field::encode_field(v, o)
            })
        }
    };
    (V, $x:expr, $code:expr, $out:ident) => {
        $crate::msg::slot_encode!(MV, $x, $code, $out)
    };
}

/// Define a struct whose fields are the IEs of a grouped IE or message body.
/// `field: KIND Type = IE_TYPE_CONST` with KIND one of M (mandatory), MV (mandatory,
/// repeatable), O (conditional or optional), V (repeatable).
macro_rules! group {
    (
        $(#[$m:meta])*
        pub struct $name:ident {
            $( $(#[$fm:meta])* $field:ident : $kind:ident $ty:ty = $code:ident ),* $(,)?
        }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            $( $(#[$fm])* pub $field: $crate::msg::slot_ty!($kind, $ty), )*
            /// IEs this struct does not name, in the order received.
            pub other: Vec<$crate::ie::Ie>,
        }

        impl $crate::msg::Group for $name {
            #[allow(unused_variables)]
            fn decode_body(body: &[u8], base: usize, at: usize, depth: u8) -> $crate::error::Result<Self> {
                $( let mut $field: $crate::msg::slot_tmp!($kind, $ty) = Default::default(); )*
                let mut other = Vec::new();
                for raw in $crate::msg::body_tlvs(body, base) {
                    let raw = raw?;
                    if raw.enterprise_id.is_some() {
                        other.push($crate::ie::Ie::decode(&raw, depth)?);
                        continue;
                    }
                    match raw.ie_type {
                        $( $crate::ie::types::$code => {
                            let v = <$ty as $crate::msg::Field>::decode_field(&raw, depth)?;
                            $crate::msg::slot_put!($kind, $field, v, raw, depth, other);
                        } )*
                        _ => other.push($crate::ie::Ie::decode(&raw, depth)?),
                    }
                }
                Ok($name {
                    $( $field: $crate::msg::slot_finish!($kind, $field, $crate::ie::types::$code, at), )*
                    other,
                })
            }

            fn encode_body(&self, out: &mut Vec<u8>) {
                $( $crate::msg::slot_encode!($kind, &self.$field, $crate::ie::types::$code, out); )*
                $crate::ie::encode_ies(&self.other, out);
            }
        }

        impl $crate::msg::Field for $name {
            fn decode_field(raw: &$crate::ie::RawIe, depth: u8) -> $crate::error::Result<Self> {
                $crate::msg::nested(raw, depth)
            }
            fn encode_field(&self, out: &mut Vec<u8>) {
                $crate::msg::Group::encode_body(self, out)
            }
        }
    };
}

/// Define a message body: a [`group!`] plus its message type.
macro_rules! message {
    (
        $(#[$m:meta])*
        pub struct $name:ident = $mt:ident { $($body:tt)* }
    ) => {
        $crate::msg::group! { $(#[$m])* pub struct $name { $($body)* } }
        impl $crate::msg::Body for $name {
            const MESSAGE_TYPE: u8 = $crate::message::message_type::$mt;
        }
    };
}

pub(crate) use {group, message, slot_encode, slot_finish, slot_put, slot_tmp, slot_ty};

/// Parse a whole message as body type `B`. The header's message type is not checked
/// against `B`: use [`Msg::parse`] to dispatch on it.
pub fn parse<B: Body>(buf: &[u8]) -> Result<(HeaderRepr, B)> {
    let h = Header::new_checked(buf)?;
    let header = HeaderRepr::parse(&h)?;
    let start = header.header_len();
    let body = B::decode_body(&buf[start..], start, 0, 0)?;
    Ok((header, body))
}

/// Encode `body` behind `header` (whose message type is set from `B`).
pub fn emit<B: Body>(header: &HeaderRepr, body: &B) -> Vec<u8> {
    let mut b = Vec::with_capacity(256);
    body.encode_body(&mut b);
    let mut h = *header;
    h.message_type = B::MESSAGE_TYPE;
    let mut out = Vec::with_capacity(b.len() + 16);
    h.emit(&mut out, b.len());
    out.extend_from_slice(&b);
    out
}

macro_rules! msg_enum {
    ($($v:ident),* $(,)?) => {
        /// Any message, typed, selected by the header's message type.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Msg {
            $( $v($v), )*
            /// A message type this codec does not know (clause 7.6.4: discarded).
            Unknown(u8),
        }

        impl Msg {
            /// Parse the header, then the body as the type it names.
            pub fn parse(buf: &[u8]) -> Result<(HeaderRepr, Msg)> {
                let h = Header::new_checked(buf)?;
                let header = HeaderRepr::parse(&h)?;
                let s = header.header_len();
                let body = &buf[s..];
                let m = match header.message_type {
                    $( <$v as Body>::MESSAGE_TYPE => Msg::$v($v::decode_body(body, s, 0, 0)?), )*
                    t => Msg::Unknown(t),
                };
                Ok((header, m))
            }

            /// Encode behind `header`.
            pub fn emit(&self, header: &HeaderRepr) -> Vec<u8> {
                match self {
                    $( Msg::$v(b) => emit(header, b), )*
                    Msg::Unknown(t) => {
                        let mut h = *header;
                        h.message_type = *t;
                        let mut out = Vec::new();
                        h.emit(&mut out, 0);
                        out
                    }
                }
            }

            pub fn message_type(&self) -> u8 {
                match self {
                    $( Msg::$v(_) => <$v as Body>::MESSAGE_TYPE, )*
                    Msg::Unknown(t) => *t,
                }
            }
        }
    };
}

msg_enum!(
    HeartbeatRequest,
    HeartbeatResponse,
    PfdManagementRequest,
    PfdManagementResponse,
    AssociationSetupRequest,
    AssociationSetupResponse,
    AssociationUpdateRequest,
    AssociationUpdateResponse,
    AssociationReleaseRequest,
    AssociationReleaseResponse,
    VersionNotSupportedResponse,
    NodeReportRequest,
    NodeReportResponse,
    SessionSetDeletionRequest,
    SessionSetDeletionResponse,
    SessionSetModificationRequest,
    SessionSetModificationResponse,
    SessionEstablishmentRequest,
    SessionEstablishmentResponse,
    SessionModificationRequest,
    SessionModificationResponse,
    SessionDeletionRequest,
    SessionDeletionResponse,
    SessionReportRequest,
    SessionReportResponse,
);
