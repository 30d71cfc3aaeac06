//! Information elements, TS 29.244 clause 8.
//!
//! [`Ie`] is the generic, ordered tree of a message's IEs: every IE type of Table 8.1.2-1
//! (Rel-17) that this codec knows has a variant holding its typed value (or, for grouped
//! IEs, its children); anything else, vendor IEs included, is kept as [`UnknownIe`] so that
//! re-encoding reproduces it. The typed message structs in [`crate::msg`] are built on the
//! same value types.

pub mod cause;
mod flags;
mod table;
pub mod types;
mod values;

pub use cause::CauseValue;
pub use flags::*;
pub use types::{ie_name, is_grouped, known_ie_types};
pub use values::*;

use serde_json::{json, Map, Value as Json};

use crate::error::{Error, ErrorKind, Result};

/// Grouped IEs nest at most this deep (Create PDR > PDI > Ethernet Packet Filter is 3).
pub const MAX_DEPTH: u8 = 8;

/// An IE as it sits in the buffer: type, optional Enterprise ID, value octets, and where.
#[derive(Debug, Clone, Copy)]
pub struct RawIe<'a> {
    pub ie_type: u16,
    pub enterprise_id: Option<u16>,
    pub value: &'a [u8],
    /// Offset of the IE's Type field from the start of the message.
    pub offset: usize,
    /// Offset of the first value octet from the start of the message.
    pub value_offset: usize,
}

/// Iterates over the TLVs of a message body or of a grouped IE, checking that each IE fits
/// its container (TS 29.244 clause 8.1.1). Stops after the first error.
pub struct Tlvs<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

/// The TLVs in `buf`, whose first octet is at offset `base` in the message.
pub fn tlvs(buf: &[u8], base: usize) -> Tlvs<'_> {
    Tlvs { buf, pos: 0, base }
}

impl<'a> Iterator for Tlvs<'a> {
    type Item = Result<RawIe<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            return None;
        }
        let offset = self.base + self.pos;
        let fail = |this: &mut Self, e: Error| {
            this.pos = this.buf.len();
            Some(Err(e))
        };
        if rest.len() < 4 {
            return fail(self, Error::new(ErrorKind::TruncatedIeHeader, None, offset));
        }
        let ie_type = u16::from_be_bytes([rest[0], rest[1]]);
        let len = u16::from_be_bytes([rest[2], rest[3]]) as usize;
        if len > rest.len() - 4 {
            let e = ErrorKind::IeOverrun {
                declared: len,
                available: rest.len() - 4,
            };
            return fail(self, Error::new(e, Some(ie_type), offset));
        }
        let mut value = &rest[4..4 + len];
        let mut value_offset = offset + 4;
        let enterprise_id = if ie_type & 0x8000 != 0 {
            if len < 2 {
                let e = ErrorKind::IeTooShort {
                    needed: 2,
                    got: len,
                };
                return fail(self, Error::new(e, Some(ie_type), offset));
            }
            let id = u16::from_be_bytes([value[0], value[1]]);
            value = &value[2..];
            value_offset += 2;
            Some(id)
        } else {
            None
        };
        self.pos += 4 + len;
        Some(Ok(RawIe {
            ie_type,
            enterprise_id,
            value,
            offset,
            value_offset,
        }))
    }
}

/// Write an IE header, let `value` append the value, then fill in the length.
pub(crate) fn put_ie(
    out: &mut Vec<u8>,
    ie_type: u16,
    enterprise_id: Option<u16>,
    value: impl FnOnce(&mut Vec<u8>),
) {
    let start = out.len();
    out.extend_from_slice(&ie_type.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    if let Some(e) = enterprise_id {
        out.extend_from_slice(&e.to_be_bytes());
    }
    value(out);
    let len = (out.len() - start - 4).min(u16::MAX as usize) as u16;
    out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// An IE this codec does not interpret (an unknown type, or a vendor-specific IE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownIe {
    pub ie_type: u16,
    pub enterprise_id: Option<u16>,
    pub value: Vec<u8>,
}

/// Decode the children of a grouped IE.
pub(crate) fn decode_children(raw: &RawIe, depth: u8) -> Result<Vec<Ie>> {
    if depth >= MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::TooDeep,
            Some(raw.ie_type),
            raw.offset,
        ));
    }
    let mut v = Vec::new();
    for r in tlvs(raw.value, raw.value_offset) {
        let r = r.map_err(|e| e.within(raw.ie_type))?;
        v.push(Ie::decode(&r, depth + 1).map_err(|e| e.within(raw.ie_type))?);
    }
    Ok(v)
}

/// Decode a sequence of IEs (a message body).
pub fn decode_ies(buf: &[u8], base: usize) -> Result<Vec<Ie>> {
    let mut v = Vec::new();
    for r in tlvs(buf, base) {
        v.push(Ie::decode(&r?, 0)?);
    }
    Ok(v)
}

/// Encode a sequence of IEs.
pub fn encode_ies(ies: &[Ie], out: &mut Vec<u8>) {
    for ie in ies {
        ie.encode(out);
    }
}

macro_rules! ie_variant_ty {
    (group) => { Vec<Ie> };
    ($t:ty) => { $t };
}

macro_rules! ie_decode {
    (group, $v:ident, $raw:ident, $depth:ident) => {
        Ie::$v(decode_children($raw, $depth)?)
    };
    ($t:ty, $v:ident, $raw:ident, $depth:ident) => {
        Ie::$v(
            <$t as Value>::decode($raw.value).map_err(|e| e.at($raw.ie_type, $raw.value_offset))?,
        )
    };
}

macro_rules! ie_encode {
    (group, $x:ident, $out:ident) => {
        encode_ies($x, $out)
    };
    ($t:ty, $x:ident, $out:ident) => {
        Value::encode($x, $out)
    };
}

macro_rules! ie_json {
    (group, $code:expr, $x:ident) => {
        ("ies", Json::Array($x.iter().map(Ie::to_json).collect()))
    };
    (Flags, $code:expr, $x:ident) => {
        ("value", flags_json($code, $x))
    };
    ($t:ty, $code:expr, $x:ident) => {
        ("value", serde_json::to_value($x).unwrap_or(Json::Null))
    };
}

macro_rules! ie_enum {
    ($( $code:literal $variant:ident $konst:ident $name:literal $kind:tt ; )*) => {
        /// One IE with its typed value (or children), in the order it appeared.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Ie {
            $( #[doc = $name] $variant(ie_variant_ty!($kind)), )*
            /// An unknown or vendor-specific IE, kept as octets.
            Unknown(UnknownIe),
        }

        impl Ie {
            /// The IE type value.
            pub fn ie_type(&self) -> u16 {
                match self {
                    $( Ie::$variant(_) => $code, )*
                    Ie::Unknown(u) => u.ie_type,
                }
            }

            /// Decode one IE; grouped IEs are decoded recursively.
            pub fn decode(raw: &RawIe, depth: u8) -> Result<Ie> {
                if raw.enterprise_id.is_some() {
                    return Ok(Ie::Unknown(UnknownIe {
                        ie_type: raw.ie_type,
                        enterprise_id: raw.enterprise_id,
                        value: raw.value.to_vec(),
                    }));
                }
                Ok(match raw.ie_type {
                    $( $code => ie_decode!($kind, $variant, raw, depth), )*
                    _ => Ie::Unknown(UnknownIe {
                        ie_type: raw.ie_type,
                        enterprise_id: None,
                        value: raw.value.to_vec(),
                    }),
                })
            }

            /// Append the IE (header and value) to `out`.
            pub fn encode(&self, out: &mut Vec<u8>) {
                match self {
                    $( Ie::$variant(x) => put_ie(out, $code, None, |out| ie_encode!($kind, x, out)), )*
                    Ie::Unknown(u) => put_ie(out, u.ie_type, u.enterprise_id, |out| out.extend_from_slice(&u.value)),
                }
            }

            /// The IE as JSON: type, name, and value (or children).
            pub fn to_json(&self) -> Json {
                let mut m = Map::new();
                m.insert("type".into(), json!(self.ie_type()));
                if let Some(n) = ie_name(self.ie_type()) {
                    m.insert("name".into(), json!(n));
                }
                let (k, v) = match self {
                    $( Ie::$variant(x) => ie_json!($kind, $code, x), )*
                    Ie::Unknown(u) => {
                        if let Some(e) = u.enterprise_id {
                            m.insert("enterprise_id".into(), json!(e));
                        }
                        ("hex", json!(u.value.iter().map(|b| format!("{b:02x}")).collect::<String>()))
                    }
                };
                m.insert(k.into(), v);
                Json::Object(m)
            }
        }
    };
}

table::ie_table!(ie_enum);
