//! Typed values of the non-grouped IEs, TS 29.244 clause 8.2.
//!
//! Each type decodes the IE value (the octets after Type, Length and, for vendor IEs, the
//! Enterprise ID) and encodes it back. Encoders write exactly the fields their flags announce,
//! so a decoded value re-encodes to the octets it came from. Octets after the last defined
//! field ("present only if explicitly specified", clause 8.1.1) are ignored on decode.

use std::net::{Ipv4Addr, Ipv6Addr};

use serde::{Serialize, Serializer};

use crate::buf::{Put, Reader};
use crate::error::{Error, ErrorKind, Result};

use super::cause::CauseValue;

/// Decoding and encoding of one IE value.
pub trait Value: Sized {
    /// Decode from the value octets. Error offsets are relative to the value's first octet.
    fn decode(v: &[u8]) -> Result<Self>;
    /// Append the value octets.
    fn encode(&self, out: &mut Vec<u8>);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn ser_hex<S: Serializer>(b: &[u8], s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&hex(b))
}

fn ser_opt_text<S: Serializer>(b: &Option<Vec<u8>>, s: S) -> std::result::Result<S::Ok, S::Error> {
    match b {
        Some(b) => s.serialize_some(&String::from_utf8_lossy(b)),
        None => s.serialize_none(),
    }
}

fn is_zero<T: Default + PartialEq>(x: &T) -> bool {
    *x == T::default()
}

fn bit(flags: u8, n: u8) -> bool {
    flags & (1 << (n - 1)) != 0
}

fn set(cond: bool, n: u8) -> u8 {
    if cond {
        1 << (n - 1)
    } else {
        0
    }
}

macro_rules! int_value {
    ($($t:ty, $n:literal, $get:ident, $put:ident;)*) => {$(
        impl Value for $t {
            fn decode(v: &[u8]) -> Result<Self> {
                Reader::new(v).$get()
            }
            fn encode(&self, out: &mut Vec<u8>) {
                out.$put(*self)
            }
        }
    )*};
}

int_value! {
    u8, 1, u8, put_u8;
    u16, 2, u16, put_u16;
    u32, 4, u32, put_u32;
    u64, 8, u64, put_u64;
}

/// Opaque octets, shown in hex: IEs this codec carries without interpreting.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        ser_hex(&self.0, s)
    }
}

impl Value for Bytes {
    fn decode(v: &[u8]) -> Result<Self> {
        Ok(Bytes(v.to_vec()))
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0)
    }
}

/// An octet string that carries text (Application ID, predefined rule names, Framed-Route ...).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Text(pub Vec<u8>);

impl Text {
    pub fn new(s: &str) -> Self {
        Text(s.as_bytes().to_vec())
    }
    pub fn as_str(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.0)
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_str())
    }
}

impl Value for Text {
    fn decode(v: &[u8]) -> Result<Self> {
        Ok(Text(v.to_vec()))
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0)
    }
}

/// A name encoded either as DNS labels (TS 23.003 clause 9.1, as the specification asks for
/// Network Instance, APN/DNN and FQDNs) or, as several SMFs send it, as a plain string.
/// The octets are kept as received; [`Name::to_text`] gives the dotted form.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct Name(pub Vec<u8>);

impl Name {
    /// Encode `s` as DNS labels ("internet.mnc001" -> 8 "internet" 6 "mnc001").
    pub fn labels(s: &str) -> Self {
        let mut v = Vec::with_capacity(s.len() + 1);
        for l in s.split('.').filter(|l| !l.is_empty()) {
            v.push(l.len().min(63) as u8);
            v.extend_from_slice(&l.as_bytes()[..l.len().min(63)]);
        }
        Name(v)
    }
    /// Keep `s` as a plain string, as free5GC's SMF sends Network Instance by default
    /// (Open5GS and OAI's SMF label-encode it: [`Name::labels`]).
    pub fn plain(s: &str) -> Self {
        Name(s.as_bytes().to_vec())
    }
    /// True when the octets form a valid sequence of DNS labels.
    pub fn is_labels(&self) -> bool {
        decode_labels(&self.0).is_some()
    }
    /// The name in dotted form, whichever way it was encoded.
    pub fn to_text(&self) -> String {
        decode_labels(&self.0).unwrap_or_else(|| String::from_utf8_lossy(&self.0).into_owned())
    }
}

fn decode_labels(b: &[u8]) -> Option<String> {
    if b.is_empty() {
        return None;
    }
    let mut out = String::new();
    let mut i = 0;
    while i < b.len() {
        let n = b[i] as usize;
        if n == 0 {
            // A root label may only end the name.
            return (i + 1 == b.len() && !out.is_empty()).then_some(out);
        }
        if n > 63 || i + 1 + n > b.len() {
            return None;
        }
        let label = &b[i + 1..i + 1 + n];
        if !label
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || *c == b'-' || *c == b'_')
        {
            return None;
        }
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(std::str::from_utf8(label).ok()?);
        i += 1 + n;
    }
    Some(out)
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_text())
    }
}

impl Value for Name {
    fn decode(v: &[u8]) -> Result<Self> {
        Ok(Name(v.to_vec()))
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0)
    }
}

/// Flag octets of any length (UP/CP Function Features, Apply Action, Reporting Triggers,
/// the *-Flags IEs ...). Bit `n` counts from bit 1 of the first octet (octet 5 in the
/// specification's figures), then bit 1 of the next octet is bit 9, and so on.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct Flags(pub Vec<u8>);

impl Flags {
    /// Flags with the given bits set (1-based), as short as possible but at least `octets`.
    pub fn from_bits(bits: &[u16], octets: usize) -> Self {
        let mut f = Flags(vec![0; octets]);
        for b in bits {
            f.set(*b, true);
        }
        f
    }
    pub fn get(&self, n: u16) -> bool {
        let (o, b) = (((n - 1) / 8) as usize, (n - 1) % 8);
        self.0.get(o).is_some_and(|x| x & (1 << b) != 0)
    }
    pub fn set(&mut self, n: u16, on: bool) {
        let (o, b) = (((n - 1) / 8) as usize, (n - 1) % 8);
        if self.0.len() <= o {
            self.0.resize(o + 1, 0);
        }
        if on {
            self.0[o] |= 1 << b;
        } else {
            self.0[o] &= !(1 << b);
        }
    }
    /// The 1-based numbers of the bits that are set.
    pub fn bits(&self) -> impl Iterator<Item = u16> + '_ {
        (1..=(self.0.len() as u16 * 8)).filter(|n| self.get(*n))
    }
}

impl Serialize for Flags {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        ser_hex(&self.0, s)
    }
}

impl Value for Flags {
    fn decode(v: &[u8]) -> Result<Self> {
        if v.is_empty() {
            return Err(Error::value(ErrorKind::IeTooShort { needed: 1, got: 0 }));
        }
        Ok(Flags(v.to_vec()))
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0)
    }
}

impl Value for CauseValue {
    fn decode(v: &[u8]) -> Result<Self> {
        Ok(CauseValue(Reader::new(v).u8()?))
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.0)
    }
}

/// Source Interface (clause 8.2.2) and Destination Interface (clause 8.2.24): the interface
/// value in the low four bits of the octet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Interface(pub u8);

impl Interface {
    pub const ACCESS: Interface = Interface(0);
    pub const CORE: Interface = Interface(1);
    pub const SGI_LAN: Interface = Interface(2);
    pub const CP_FUNCTION: Interface = Interface(3);
    /// "5G VN Internal" (Rel-16).
    pub const VN_INTERNAL: Interface = Interface(4);

    pub fn value(self) -> u8 {
        self.0 & 0x0f
    }
    pub fn name(self) -> &'static str {
        match self.value() {
            0 => "Access",
            1 => "Core",
            2 => "SGi-LAN/N6-LAN",
            3 => "CP-function",
            4 => "5G VN Internal",
            _ => "spare",
        }
    }
}

impl Serialize for Interface {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl Value for Interface {
    fn decode(v: &[u8]) -> Result<Self> {
        Ok(Interface(Reader::new(v).u8()?))
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.0)
    }
}

/// What an F-TEID with CH = 1 asks the UP function to allocate (clause 5.5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Choose {
    pub v4: bool,
    pub v6: bool,
    /// CHOOSE ID: PDRs with the same CHOOSE ID get the same F-TEID.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choose_id: Option<u8>,
}

/// F-TEID, clause 8.2.3. Either a TEID with at least one address, or (CH = 1) a request
/// for the UP function to choose them. A one-octet F-TEID with CH and V4 is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct FTeid {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<Ipv4Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub choose: Option<Choose>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl FTeid {
    pub fn new(teid: u32, ipv4: Option<Ipv4Addr>, ipv6: Option<Ipv6Addr>) -> Self {
        FTeid {
            teid: Some(teid),
            ipv4,
            ipv6,
            choose: None,
            spare: 0,
        }
    }
    pub fn choose(v4: bool, v6: bool, choose_id: Option<u8>) -> Self {
        FTeid {
            teid: None,
            ipv4: None,
            ipv6: None,
            choose: Some(Choose { v4, v6, choose_id }),
            spare: 0,
        }
    }
}

impl Value for FTeid {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let flags = r.u8()?;
        let (v4, v6, ch, chid) = (bit(flags, 1), bit(flags, 2), bit(flags, 3), bit(flags, 4));
        let spare = flags & 0xf0;
        if ch {
            // CH without V4 or V6 is what OAI's SMF sends in every Create PDR (clause
            // 8.2.3 asks for at least one): read as "any address family", the UP function
            // picks (see upf::procedures).
            let choose_id = if chid { Some(r.u8()?) } else { None };
            return Ok(FTeid {
                spare,
                ..FTeid::choose(v4, v6, choose_id)
            });
        }
        if !v4 && !v6 {
            return Err(r.invalid("F-TEID with neither V4 nor V6 set"));
        }
        if chid {
            return Err(r.invalid("F-TEID with CHID set but CH not set"));
        }
        let teid = r.u32()?;
        let ipv4 = if v4 { Some(r.ipv4()?) } else { None };
        let ipv6 = if v6 { Some(r.ipv6()?) } else { None };
        Ok(FTeid {
            spare,
            ..FTeid::new(teid, ipv4, ipv6)
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        match self.choose {
            Some(c) => {
                out.put_u8(
                    set(c.v4, 1)
                        | set(c.v6, 2)
                        | set(true, 3)
                        | set(c.choose_id.is_some(), 4)
                        | self.spare,
                );
                if let Some(id) = c.choose_id {
                    out.put_u8(id);
                }
            }
            None => {
                out.put_u8(set(self.ipv4.is_some(), 1) | set(self.ipv6.is_some(), 2) | self.spare);
                out.put_u32(self.teid.unwrap_or(0));
                if let Some(a) = self.ipv4 {
                    out.extend_from_slice(&a.octets());
                }
                if let Some(a) = self.ipv6 {
                    out.extend_from_slice(&a.octets());
                }
            }
        }
    }
}

/// MBR (clause 8.2.8) and GBR (clause 8.2.9): uplink and downlink in kbit/s, 5 octets each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct Bitrate {
    pub ul_kbps: u64,
    pub dl_kbps: u64,
}

impl Value for Bitrate {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        Ok(Bitrate {
            ul_kbps: r.u40()?,
            dl_kbps: r.u40()?,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u40(self.ul_kbps);
        out.put_u40(self.dl_kbps);
    }
}

/// SDF Filter, clause 8.2.5. The flow description is an IPFilterRule (RFC 6733) as text.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct SdfFilter {
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_opt_text"
    )]
    pub flow_description: Option<Vec<u8>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tos_traffic_class: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spi: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_label: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filter_id: Option<u32>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
    /// Octet 6, spare, as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare_octet: u8,
}

impl Value for SdfFilter {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let flags = r.u8()?;
        let mut f = SdfFilter {
            spare: flags & 0xe0,
            spare_octet: r.u8()?,
            ..SdfFilter::default()
        };
        if bit(flags, 1) {
            f.flow_description = Some(r.len16_bytes()?.to_vec());
        }
        if bit(flags, 2) {
            f.tos_traffic_class = Some(r.u16()?);
        }
        if bit(flags, 3) {
            f.spi = Some(r.u32()?);
        }
        if bit(flags, 4) {
            f.flow_label = Some(r.u24()?);
        }
        if bit(flags, 5) {
            f.filter_id = Some(r.u32()?);
        }
        Ok(f)
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(
            set(self.flow_description.is_some(), 1)
                | set(self.tos_traffic_class.is_some(), 2)
                | set(self.spi.is_some(), 3)
                | set(self.flow_label.is_some(), 4)
                | set(self.filter_id.is_some(), 5)
                | self.spare,
        );
        out.put_u8(self.spare_octet);
        if let Some(d) = &self.flow_description {
            out.put_len16(d);
        }
        if let Some(x) = self.tos_traffic_class {
            out.put_u16(x);
        }
        if let Some(x) = self.spi {
            out.put_u32(x);
        }
        if let Some(x) = self.flow_label {
            out.put_u24(x);
        }
        if let Some(x) = self.filter_id {
            out.put_u32(x);
        }
    }
}

/// Volume Threshold, Volume Quota and their Subsequent forms (clauses 8.2.13, 8.2.50,
/// 8.2.16, 8.2.95): octets, total / uplink / downlink, each present when its flag is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct Volume {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uplink: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub downlink: Option<u64>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for Volume {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let flags = r.u8()?;
        let mut x = Volume {
            spare: flags & 0xf8,
            ..Volume::default()
        };
        if bit(flags, 1) {
            x.total = Some(r.u64()?);
        }
        if bit(flags, 2) {
            x.uplink = Some(r.u64()?);
        }
        if bit(flags, 3) {
            x.downlink = Some(r.u64()?);
        }
        Ok(x)
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(
            set(self.total.is_some(), 1)
                | set(self.uplink.is_some(), 2)
                | set(self.downlink.is_some(), 3)
                | self.spare,
        );
        for x in [self.total, self.uplink, self.downlink]
            .into_iter()
            .flatten()
        {
            out.put_u64(x);
        }
    }
}

/// Volume Measurement, clause 8.2.44: octets and packets, total / uplink / downlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct VolumeMeasurement {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uplink: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub downlink: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_packets: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uplink_packets: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub downlink_packets: Option<u64>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for VolumeMeasurement {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let flags = r.u8()?;
        let mut read = |n| -> Result<Option<u64>> {
            if bit(flags, n) {
                Ok(Some(r.u64()?))
            } else {
                Ok(None)
            }
        };
        Ok(VolumeMeasurement {
            total: read(1)?,
            uplink: read(2)?,
            downlink: read(3)?,
            total_packets: read(4)?,
            uplink_packets: read(5)?,
            downlink_packets: read(6)?,
            spare: flags & 0xc0,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let all = [
            self.total,
            self.uplink,
            self.downlink,
            self.total_packets,
            self.uplink_packets,
            self.downlink_packets,
        ];
        let mut flags = 0;
        for (i, x) in all.iter().enumerate() {
            flags |= set(x.is_some(), i as u8 + 1);
        }
        out.put_u8(flags | self.spare);
        for x in all.into_iter().flatten() {
            out.put_u64(x);
        }
    }
}

/// Redirect Information, clause 8.2.20.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RedirectInformation {
    /// Low four bits: 0 IPv4, 1 IPv6, 2 URL, 3 SIP URI, 4 IPv4 and IPv6 addresses.
    pub address_type: u8,
    pub server_address: Text,
    /// Present with address type 4 (Rel-16).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub other_server_address: Option<Text>,
}

impl Value for RedirectInformation {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let address_type = r.u8()?;
        let server_address = Text(r.len16_bytes()?.to_vec());
        let other_server_address = if r.remaining() >= 2 {
            Some(Text(r.len16_bytes()?.to_vec()))
        } else {
            None
        };
        Ok(RedirectInformation {
            address_type,
            server_address,
            other_server_address,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.address_type);
        out.put_len16(&self.server_address.0);
        if let Some(o) = &self.other_server_address {
            out.put_len16(&o.0);
        }
    }
}

/// Forwarding Policy, clause 8.2.23: a one-octet length and the policy identifier.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ForwardingPolicy(pub Text);

impl Value for ForwardingPolicy {
    fn decode(v: &[u8]) -> Result<Self> {
        Ok(ForwardingPolicy(Text(
            Reader::new(v).len8_bytes()?.to_vec(),
        )))
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_len8(&self.0 .0)
    }
}

/// Downlink Data Service Information, clause 8.2.27: Paging Policy Indication and QFI
/// octets (value in the low six bits; see [`DownlinkDataServiceInformation::ppi_value`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct DownlinkDataServiceInformation {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ppi: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qfi: Option<u8>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl DownlinkDataServiceInformation {
    pub fn ppi_value(&self) -> Option<u8> {
        self.ppi.map(|x| x & 0x3f)
    }
    pub fn qfi_value(&self) -> Option<u8> {
        self.qfi.map(|x| x & 0x3f)
    }
}

impl Value for DownlinkDataServiceInformation {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let flags = r.u8()?;
        // Kept whole (spare bits included) so the IE re-encodes as received.
        let ppi = if bit(flags, 1) { Some(r.u8()?) } else { None };
        let qfi = if bit(flags, 2) { Some(r.u8()?) } else { None };
        Ok(DownlinkDataServiceInformation {
            ppi,
            qfi,
            spare: flags & 0xfc,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(set(self.ppi.is_some(), 1) | set(self.qfi.is_some(), 2) | self.spare);
        for x in [self.ppi, self.qfi].into_iter().flatten() {
            out.put_u8(x);
        }
    }
}

/// A timer coded as in TS 24.008 GPRS Timer: unit in bits 8-6, value in bits 5-1
/// (DL Buffering Duration clause 8.2.28, Timer clause 8.2.38, Graceful Release Period).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GprsTimer(pub u8);

impl GprsTimer {
    pub fn unit(self) -> u8 {
        self.0 >> 5
    }
    pub fn value(self) -> u8 {
        self.0 & 0x1f
    }
    /// The duration in seconds; `None` means infinite.
    pub fn seconds(self) -> Option<u64> {
        let v = self.value() as u64;
        match self.unit() {
            0 => Some(v * 2),
            1 => Some(v * 60),
            2 => Some(v * 600),
            3 => Some(v * 3600),
            4 => Some(v * 36000),
            7 => None,
            // Other values are read as one minute (TS 29.244 clause 8.2.28).
            _ => Some(v * 60),
        }
    }
    /// The closest encoding of `secs` that is not shorter.
    pub fn from_seconds(secs: u64) -> Self {
        for (unit, step) in [(0u8, 2u64), (1, 60), (2, 600), (3, 3600), (4, 36000)] {
            let v = secs.div_ceil(step);
            if v <= 31 {
                return GprsTimer((unit << 5) | v as u8);
            }
        }
        GprsTimer(0xe0)
    }
}

impl Serialize for GprsTimer {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self.seconds() {
            Some(x) => s.serialize_u64(x),
            None => s.serialize_str("infinite"),
        }
    }
}

impl Value for GprsTimer {
    fn decode(v: &[u8]) -> Result<Self> {
        Ok(GprsTimer(Reader::new(v).u8()?))
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.0)
    }
}

/// DL Buffering Suggested Packet Count, clause 8.2.29: one or two octets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PacketCount {
    pub value: u16,
    #[serde(skip)]
    pub two_octets: bool,
}

impl Value for PacketCount {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        if v.len() >= 2 {
            Ok(PacketCount {
                value: r.u16()?,
                two_octets: true,
            })
        } else {
            Ok(PacketCount {
                value: r.u8()? as u16,
                two_octets: false,
            })
        }
    }
    fn encode(&self, out: &mut Vec<u8>) {
        if self.two_octets || self.value > 255 {
            out.put_u16(self.value)
        } else {
            out.put_u8(self.value as u8)
        }
    }
}

/// F-SEID, clause 8.2.37.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct FSeid {
    pub seid: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<Ipv4Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Addr>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for FSeid {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let flags = r.u8()?;
        if !bit(flags, 1) && !bit(flags, 2) {
            return Err(r.invalid("F-SEID with neither V4 nor V6 set"));
        }
        let seid = r.u64()?;
        let ipv4 = if bit(flags, 2) { Some(r.ipv4()?) } else { None };
        let ipv6 = if bit(flags, 1) { Some(r.ipv6()?) } else { None };
        Ok(FSeid {
            seid,
            ipv4,
            ipv6,
            spare: flags & 0xfc,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(set(self.ipv6.is_some(), 1) | set(self.ipv4.is_some(), 2) | self.spare);
        out.put_u64(self.seid);
        if let Some(a) = self.ipv4 {
            out.extend_from_slice(&a.octets());
        }
        if let Some(a) = self.ipv6 {
            out.extend_from_slice(&a.octets());
        }
    }
}

/// Node ID, clause 8.2.38: an IPv4 or IPv6 address, or an FQDN (as DNS labels, or as a
/// plain string, which several SMFs send).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NodeId {
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    Fqdn(Name),
}

impl std::fmt::Display for NodeId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeId::Ipv4(a) => write!(f, "{a}"),
            NodeId::Ipv6(a) => write!(f, "{a}"),
            NodeId::Fqdn(n) => write!(f, "{}", n.to_text()),
        }
    }
}

impl Serialize for NodeId {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(1))?;
        match self {
            NodeId::Ipv4(a) => m.serialize_entry("ipv4", a)?,
            NodeId::Ipv6(a) => m.serialize_entry("ipv6", a)?,
            NodeId::Fqdn(n) => m.serialize_entry("fqdn", n)?,
        }
        m.end()
    }
}

impl Value for NodeId {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        match r.u8()? & 0x0f {
            0 => Ok(NodeId::Ipv4(r.ipv4()?)),
            1 => Ok(NodeId::Ipv6(r.ipv6()?)),
            2 => {
                let n = r.rest();
                if n.is_empty() {
                    return Err(Error::value(ErrorKind::IeTooShort { needed: 2, got: 1 }));
                }
                Ok(NodeId::Fqdn(Name(n.to_vec())))
            }
            _ => Err(Error::value(ErrorKind::Invalid(
                "Node ID type is not 0, 1 or 2",
            ))),
        }
    }
    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            NodeId::Ipv4(a) => {
                out.put_u8(0);
                out.extend_from_slice(&a.octets())
            }
            NodeId::Ipv6(a) => {
                out.put_u8(1);
                out.extend_from_slice(&a.octets())
            }
            NodeId::Fqdn(n) => {
                out.put_u8(2);
                out.extend_from_slice(&n.0)
            }
        }
    }
}

/// A Node ID IE as received: the Node ID, and the spare bits 5-8 of its type octet (kept
/// so the IE re-encodes as received). The generic layer ([`super::Ie::NodeId`]) holds
/// this; typed messages hold the [`NodeId`] alone, which is what identifies a peer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeIdIe {
    pub node_id: NodeId,
    pub spare: u8,
}

impl From<NodeId> for NodeIdIe {
    fn from(node_id: NodeId) -> Self {
        NodeIdIe { node_id, spare: 0 }
    }
}

impl Serialize for NodeIdIe {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        match &self.node_id {
            NodeId::Ipv4(a) => m.serialize_entry("ipv4", a)?,
            NodeId::Ipv6(a) => m.serialize_entry("ipv6", a)?,
            NodeId::Fqdn(n) => m.serialize_entry("fqdn", n)?,
        }
        if self.spare != 0 {
            m.serialize_entry("spare", &self.spare)?;
        }
        m.end()
    }
}

impl Value for NodeIdIe {
    fn decode(v: &[u8]) -> Result<Self> {
        Ok(NodeIdIe {
            node_id: NodeId::decode(v)?,
            spare: v.first().map_or(0, |t| t & 0xf0),
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let at = out.len();
        self.node_id.encode(out);
        out[at] |= self.spare;
    }
}

/// PFD Contents, clause 8.2.39: each field is a 2-octet length and its octets.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct PfdContents {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow_description: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain_name: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub custom_pfd_content: Option<Bytes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain_name_protocol: Option<Text>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_flow_descriptions: Option<Bytes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_urls: Option<Bytes>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_domain_names_and_protocols: Option<Bytes>,
    /// Octet 6, spare, as received (kept so the IE re-encodes as received).
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for PfdContents {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let flags = r.u8()?;
        let spare = r.u8()?;
        let mut get = |n| -> Result<Option<Vec<u8>>> {
            if bit(flags, n) {
                Ok(Some(r.len16_bytes()?.to_vec()))
            } else {
                Ok(None)
            }
        };
        Ok(PfdContents {
            flow_description: get(1)?.map(Text),
            url: get(2)?.map(Text),
            domain_name: get(3)?.map(Text),
            custom_pfd_content: get(4)?.map(Bytes),
            domain_name_protocol: get(5)?.map(Text),
            additional_flow_descriptions: get(6)?.map(Bytes),
            additional_urls: get(7)?.map(Bytes),
            additional_domain_names_and_protocols: get(8)?.map(Bytes),
            spare,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let fields: [Option<&Vec<u8>>; 8] = [
            self.flow_description.as_ref().map(|x| &x.0),
            self.url.as_ref().map(|x| &x.0),
            self.domain_name.as_ref().map(|x| &x.0),
            self.custom_pfd_content.as_ref().map(|x| &x.0),
            self.domain_name_protocol.as_ref().map(|x| &x.0),
            self.additional_flow_descriptions.as_ref().map(|x| &x.0),
            self.additional_urls.as_ref().map(|x| &x.0),
            self.additional_domain_names_and_protocols
                .as_ref()
                .map(|x| &x.0),
        ];
        let mut flags = 0;
        for (i, f) in fields.iter().enumerate() {
            flags |= set(f.is_some(), i as u8 + 1);
        }
        out.put_u8(flags);
        out.put_u8(self.spare);
        for f in fields.into_iter().flatten() {
            out.put_len16(f);
        }
    }
}

/// FQ-CSID, clause 8.2.46.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FqCsid {
    /// 0 IPv4, 1 IPv6, 2 MCC/MNC + node identifier (4 octets).
    pub node_id_type: u8,
    pub node_address: Bytes,
    pub csids: Vec<u16>,
}

impl Value for FqCsid {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let o = r.u8()?;
        let node_id_type = o >> 4;
        let count = (o & 0x0f) as usize;
        let alen = match node_id_type {
            0 | 2 => 4,
            1 => 16,
            _ => return Err(r.invalid("FQ-CSID node-ID type is not 0, 1 or 2")),
        };
        let node_address = Bytes(r.bytes(alen)?.to_vec());
        let mut csids = Vec::with_capacity(count);
        for _ in 0..count {
            csids.push(r.u16()?);
        }
        Ok(FqCsid {
            node_id_type,
            node_address,
            csids,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8((self.node_id_type << 4) | (self.csids.len().min(15) as u8));
        out.extend_from_slice(&self.node_address.0);
        for c in self.csids.iter().take(15) {
            out.put_u16(*c);
        }
    }
}

/// Dropped DL Traffic Threshold, clause 8.2.49.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct DroppedDlTrafficThreshold {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packets: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for DroppedDlTrafficThreshold {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let flags = r.u8()?;
        let packets = if bit(flags, 1) { Some(r.u64()?) } else { None };
        let bytes = if bit(flags, 2) { Some(r.u64()?) } else { None };
        Ok(DroppedDlTrafficThreshold {
            packets,
            bytes,
            spare: flags & 0xfc,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(set(self.packets.is_some(), 1) | set(self.bytes.is_some(), 2) | self.spare);
        for x in [self.packets, self.bytes].into_iter().flatten() {
            out.put_u64(x);
        }
    }
}

/// Outer Header Creation, clause 8.2.56. `description` is the 2-octet bitmask of
/// Table 8.2.56-1; the fields it implies follow in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct OuterHeaderCreation {
    pub description: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<Ipv4Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub c_tag: Option<[u8; 3]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub s_tag: Option<[u8; 3]>,
}

impl OuterHeaderCreation {
    pub const GTPU_UDP_IPV4: u16 = 0x0100;
    pub const GTPU_UDP_IPV6: u16 = 0x0200;
    pub const UDP_IPV4: u16 = 0x0400;
    pub const UDP_IPV6: u16 = 0x0800;
    pub const IPV4: u16 = 0x1000;
    pub const IPV6: u16 = 0x2000;
    pub const C_TAG: u16 = 0x4000;
    pub const S_TAG: u16 = 0x8000;
    pub const N19_INDICATION: u16 = 0x0001;
    pub const N6_INDICATION: u16 = 0x0002;

    /// GTP-U/UDP/IPv4 towards `peer` with `teid`.
    pub fn gtpu_ipv4(teid: u32, peer: Ipv4Addr) -> Self {
        OuterHeaderCreation {
            description: Self::GTPU_UDP_IPV4,
            teid: Some(teid),
            ipv4: Some(peer),
            ipv6: None,
            port: None,
            c_tag: None,
            s_tag: None,
        }
    }

    /// GTP-U/UDP/IPv6 towards `peer` with `teid`.
    pub fn gtpu_ipv6(teid: u32, peer: Ipv6Addr) -> Self {
        OuterHeaderCreation {
            description: Self::GTPU_UDP_IPV6,
            ipv4: None,
            ipv6: Some(peer),
            ..Self::gtpu_ipv4(teid, Ipv4Addr::UNSPECIFIED)
        }
    }

    pub fn has(&self, d: u16) -> bool {
        self.description & d != 0
    }
}

impl Value for OuterHeaderCreation {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let d = r.u16()?;
        let has = |x: u16| d & x != 0;
        if d & 0xff00 == 0 {
            return Err(
                r.invalid("Outer Header Creation Description announces no header to create")
            );
        }
        let gtp = has(Self::GTPU_UDP_IPV4) || has(Self::GTPU_UDP_IPV6);
        let teid = if gtp { Some(r.u32()?) } else { None };
        let ipv4 = if has(Self::GTPU_UDP_IPV4) || has(Self::UDP_IPV4) || has(Self::IPV4) {
            Some(r.ipv4()?)
        } else {
            None
        };
        let ipv6 = if has(Self::GTPU_UDP_IPV6) || has(Self::UDP_IPV6) || has(Self::IPV6) {
            Some(r.ipv6()?)
        } else {
            None
        };
        let port = if has(Self::UDP_IPV4) || has(Self::UDP_IPV6) {
            Some(r.u16()?)
        } else {
            None
        };
        let mut tag = |f| -> Result<Option<[u8; 3]>> {
            if has(f) {
                let b = r.bytes(3)?;
                Ok(Some([b[0], b[1], b[2]]))
            } else {
                Ok(None)
            }
        };
        let c_tag = tag(Self::C_TAG)?;
        let s_tag = tag(Self::S_TAG)?;
        Ok(OuterHeaderCreation {
            description: d,
            teid,
            ipv4,
            ipv6,
            port,
            c_tag,
            s_tag,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u16(self.description);
        if let Some(t) = self.teid {
            out.put_u32(t);
        }
        if let Some(a) = self.ipv4 {
            out.extend_from_slice(&a.octets());
        }
        if let Some(a) = self.ipv6 {
            out.extend_from_slice(&a.octets());
        }
        if let Some(p) = self.port {
            out.put_u16(p);
        }
        for t in [self.c_tag, self.s_tag].into_iter().flatten() {
            out.extend_from_slice(&t);
        }
    }
}

/// Flow Information, clause 8.2.61: direction and an IPFilterRule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FlowInformation {
    /// Low three bits: 0 unspecified, 1 downlink, 2 uplink, 3 bidirectional.
    pub direction: u8,
    pub flow_description: Text,
}

impl Value for FlowInformation {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let direction = r.u8()?;
        let flow_description = Text(r.len16_bytes()?.to_vec());
        Ok(FlowInformation {
            direction,
            flow_description,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.direction);
        out.put_len16(&self.flow_description.0);
    }
}

/// UE IP Address, clause 8.2.62.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize)]
pub struct UeIpAddress {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<Ipv4Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Addr>,
    /// S/D: the address is a destination address (downlink PDI) when true.
    pub destination: bool,
    /// CHV4 / CHV6: the UP function shall allocate the address.
    pub choose_v4: bool,
    pub choose_v6: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6_prefix_delegation_bits: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6_prefix_length: Option<u8>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for UeIpAddress {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let f = r.u8()?;
        let ipv4 = if bit(f, 2) { Some(r.ipv4()?) } else { None };
        let ipv6 = if bit(f, 1) { Some(r.ipv6()?) } else { None };
        let ipv6_prefix_delegation_bits = if bit(f, 4) { Some(r.u8()?) } else { None };
        let ipv6_prefix_length = if bit(f, 7) { Some(r.u8()?) } else { None };
        Ok(UeIpAddress {
            ipv4,
            ipv6,
            destination: bit(f, 3),
            choose_v4: bit(f, 5),
            choose_v6: bit(f, 6),
            ipv6_prefix_delegation_bits,
            ipv6_prefix_length,
            spare: f & 0x80,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(
            set(self.ipv6.is_some(), 1)
                | set(self.ipv4.is_some(), 2)
                | set(self.destination, 3)
                | set(self.ipv6_prefix_delegation_bits.is_some(), 4)
                | set(self.choose_v4, 5)
                | set(self.choose_v6, 6)
                | set(self.ipv6_prefix_length.is_some(), 7)
                | self.spare,
        );
        if let Some(a) = self.ipv4 {
            out.extend_from_slice(&a.octets());
        }
        if let Some(a) = self.ipv6 {
            out.extend_from_slice(&a.octets());
        }
        if let Some(b) = self.ipv6_prefix_delegation_bits {
            out.put_u8(b);
        }
        if let Some(b) = self.ipv6_prefix_length {
            out.put_u8(b);
        }
    }
}

/// One direction of a Packet Rate: time unit (0 minute, 1 6 minutes, 2 hour, 3 day,
/// 4 week) and the maximum number of packets per unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Rate {
    pub time_unit: u8,
    pub max_packets: u16,
}

/// Packet Rate, clause 8.2.63.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct PacketRate {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uplink: Option<Rate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub downlink: Option<Rate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_uplink: Option<Rate>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_downlink: Option<Rate>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for PacketRate {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let f = r.u8()?;
        let mut rate = |on: bool| -> Result<Option<Rate>> {
            if on {
                Ok(Some(Rate {
                    time_unit: r.u8()?,
                    max_packets: r.u16()?,
                }))
            } else {
                Ok(None)
            }
        };
        let (ul, dl, aprc) = (bit(f, 1), bit(f, 2), bit(f, 3));
        Ok(PacketRate {
            uplink: rate(ul)?,
            downlink: rate(dl)?,
            additional_uplink: rate(aprc && ul)?,
            additional_downlink: rate(aprc && dl)?,
            spare: f & 0xf8,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let aprc = self.additional_uplink.is_some() || self.additional_downlink.is_some();
        out.put_u8(
            set(self.uplink.is_some(), 1)
                | set(self.downlink.is_some(), 2)
                | set(aprc, 3)
                | self.spare,
        );
        for x in [
            self.uplink,
            self.downlink,
            self.additional_uplink,
            self.additional_downlink,
        ]
        .into_iter()
        .flatten()
        {
            out.put_u8(x.time_unit);
            out.put_u16(x.max_packets);
        }
    }
}

/// Outer Header Removal, clause 8.2.64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct OuterHeaderRemoval {
    /// 0 GTP-U/UDP/IPv4, 1 GTP-U/UDP/IPv6, 2 UDP/IPv4, 3 UDP/IPv6, 4 IPv4, 5 IPv6,
    /// 6 GTP-U/UDP/IP, 7 VLAN S-TAG, 8 S-TAG and C-TAG.
    pub description: u8,
    /// GTP-U Extension Header Deletion: bit 1 = delete the PDU Session Container.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ext_header_deletion: Option<u8>,
}

impl OuterHeaderRemoval {
    pub const GTPU_UDP_IPV4: u8 = 0;
    pub const GTPU_UDP_IPV6: u8 = 1;
    pub const UDP_IPV4: u8 = 2;
    pub const UDP_IPV6: u8 = 3;
    pub const IPV4: u8 = 4;
    pub const IPV6: u8 = 5;
    pub const GTPU_UDP_IP: u8 = 6;
    pub const VLAN_S_TAG: u8 = 7;
    pub const S_TAG_AND_C_TAG: u8 = 8;
}

impl Value for OuterHeaderRemoval {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let description = r.u8()?;
        let ext_header_deletion = if r.is_empty() { None } else { Some(r.u8()?) };
        Ok(OuterHeaderRemoval {
            description,
            ext_header_deletion,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.description);
        if let Some(x) = self.ext_header_deletion {
            out.put_u8(x);
        }
    }
}

/// DL Flow Level Marking, clause 8.2.66.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct DlFlowLevelMarking {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tos_traffic_class: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_class_indicator: Option<u16>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for DlFlowLevelMarking {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let f = r.u8()?;
        let tos_traffic_class = if bit(f, 1) { Some(r.u16()?) } else { None };
        let service_class_indicator = if bit(f, 2) { Some(r.u16()?) } else { None };
        Ok(DlFlowLevelMarking {
            tos_traffic_class,
            service_class_indicator,
            spare: f & 0xfc,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(
            set(self.tos_traffic_class.is_some(), 1)
                | set(self.service_class_indicator.is_some(), 2)
                | self.spare,
        );
        for x in [self.tos_traffic_class, self.service_class_indicator]
            .into_iter()
            .flatten()
        {
            out.put_u16(x);
        }
    }
}

/// Header Enrichment, clause 8.2.67.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeaderEnrichment {
    /// 0 = HTTP.
    pub header_type: u8,
    pub name: Text,
    pub value: Text,
}

impl Value for HeaderEnrichment {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        Ok(HeaderEnrichment {
            header_type: r.u8()?,
            name: Text(r.len8_bytes()?.to_vec()),
            value: Text(r.len8_bytes()?.to_vec()),
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.header_type);
        out.put_len8(&self.name.0);
        out.put_len8(&self.value.0);
    }
}

/// Remote GTP-U Peer, clause 8.2.70.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RemoteGtpuPeer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<Ipv4Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination_interface: Option<Interface>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_instance: Option<Name>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for RemoteGtpuPeer {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let f = r.u8()?;
        let ipv4 = if bit(f, 2) { Some(r.ipv4()?) } else { None };
        let ipv6 = if bit(f, 1) { Some(r.ipv6()?) } else { None };
        let destination_interface = if bit(f, 3) {
            let d = r.len16_bytes()?;
            Some(Interface::decode(d)?)
        } else {
            None
        };
        let network_instance = if bit(f, 4) {
            Some(Name(r.len16_bytes()?.to_vec()))
        } else {
            None
        };
        Ok(RemoteGtpuPeer {
            ipv4,
            ipv6,
            destination_interface,
            network_instance,
            spare: f & 0xf0,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(
            set(self.ipv6.is_some(), 1)
                | set(self.ipv4.is_some(), 2)
                | set(self.destination_interface.is_some(), 3)
                | set(self.network_instance.is_some(), 4)
                | self.spare,
        );
        if let Some(a) = self.ipv4 {
            out.extend_from_slice(&a.octets());
        }
        if let Some(a) = self.ipv6 {
            out.extend_from_slice(&a.octets());
        }
        if let Some(d) = self.destination_interface {
            out.put_len16(&[d.0]);
        }
        if let Some(n) = &self.network_instance {
            out.put_len16(&n.0);
        }
    }
}

/// Failed Rule ID, clause 8.2.80.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FailedRuleId {
    /// Low five bits: 0 PDR, 1 FAR, 2 QER, 3 URR, 4 BAR, 5 MAR, 6 SRR.
    pub rule_type: u8,
    pub id: u32,
}

impl FailedRuleId {
    pub const PDR: u8 = 0;
    pub const FAR: u8 = 1;
    pub const QER: u8 = 2;
    pub const URR: u8 = 3;
    pub const BAR: u8 = 4;
    pub const MAR: u8 = 5;
    pub const SRR: u8 = 6;
}

impl Value for FailedRuleId {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let rule_type = r.u8()?;
        let id = match rule_type & 0x1f {
            0 | 5 => r.u16()? as u32,
            1..=3 => r.u32()?,
            4 | 6 => r.u8()? as u32,
            _ => return Err(r.invalid("Failed Rule ID type is spare")),
        };
        Ok(FailedRuleId { rule_type, id })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.rule_type);
        match self.rule_type & 0x1f {
            0 | 5 => out.put_u16(self.id as u16),
            4 | 6 => out.put_u8(self.id as u8),
            _ => out.put_u32(self.id),
        }
    }
}

/// Time Quota Mechanism, clause 8.2.81.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TimeQuotaMechanism {
    /// Base Time Interval Type: 0 CTP, 1 DTP.
    pub btit: u8,
    pub base_time_interval: u32,
}

impl Value for TimeQuotaMechanism {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        Ok(TimeQuotaMechanism {
            btit: r.u8()?,
            base_time_interval: r.u32()?,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.btit);
        out.put_u32(self.base_time_interval);
    }
}

/// User Plane IP Resource Information, clause 8.2.82 (removed in Rel-16, still sent by
/// Rel-15 UP functions and understood by their CP functions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UserPlaneIpResourceInformation {
    /// Number of significant bits of the TEID range (TEIDRI) and the range value.
    pub teid_range_bits: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub teid_range: Option<u8>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<Ipv4Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_instance: Option<Name>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source_interface: Option<Interface>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for UserPlaneIpResourceInformation {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let f = r.u8()?;
        let teid_range_bits = (f >> 2) & 0x07;
        let teid_range = if teid_range_bits != 0 {
            Some(r.u8()?)
        } else {
            None
        };
        let ipv4 = if bit(f, 1) { Some(r.ipv4()?) } else { None };
        let ipv6 = if bit(f, 2) { Some(r.ipv6()?) } else { None };
        let (assoni, assosi) = (bit(f, 6), bit(f, 7));
        let network_instance = if assoni {
            let n = r.remaining().saturating_sub(assosi as usize);
            Some(Name(r.bytes(n)?.to_vec()))
        } else {
            None
        };
        let source_interface = if assosi {
            Some(Interface(r.u8()?))
        } else {
            None
        };
        Ok(UserPlaneIpResourceInformation {
            teid_range_bits,
            teid_range,
            ipv4,
            ipv6,
            network_instance,
            source_interface,
            spare: f & 0x80,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(
            set(self.ipv4.is_some(), 1)
                | set(self.ipv6.is_some(), 2)
                | ((self.teid_range_bits & 0x07) << 2)
                | set(self.network_instance.is_some(), 6)
                | set(self.source_interface.is_some(), 7)
                | self.spare,
        );
        if self.teid_range_bits != 0 {
            out.put_u8(self.teid_range.unwrap_or(0));
        }
        if let Some(a) = self.ipv4 {
            out.extend_from_slice(&a.octets());
        }
        if let Some(a) = self.ipv6 {
            out.extend_from_slice(&a.octets());
        }
        if let Some(n) = &self.network_instance {
            out.extend_from_slice(&n.0);
        }
        if let Some(s) = self.source_interface {
            out.put_u8(s.0);
        }
    }
}

/// Multiplier, clause 8.2.84: value = value_digits x 10^exponent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Multiplier {
    pub value_digits: i64,
    pub exponent: i32,
}

impl Value for Multiplier {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        Ok(Multiplier {
            value_digits: r.u64()? as i64,
            exponent: r.u32()? as i32,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u64(self.value_digits as u64);
        out.put_u32(self.exponent as u32);
    }
}

/// MAC address, clause 8.2.93.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct MacAddress {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<[u8; 6]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destination: Option<[u8; 6]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper_source: Option<[u8; 6]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper_destination: Option<[u8; 6]>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

fn mac(r: &mut Reader) -> Result<[u8; 6]> {
    let b = r.bytes(6)?;
    let mut m = [0u8; 6];
    m.copy_from_slice(b);
    Ok(m)
}

impl Value for MacAddress {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let f = r.u8()?;
        let mut get = |n| -> Result<Option<[u8; 6]>> {
            if bit(f, n) {
                Ok(Some(mac(&mut r)?))
            } else {
                Ok(None)
            }
        };
        Ok(MacAddress {
            source: get(1)?,
            destination: get(2)?,
            upper_source: get(3)?,
            upper_destination: get(4)?,
            spare: f & 0xf0,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let all = [
            self.source,
            self.destination,
            self.upper_source,
            self.upper_destination,
        ];
        let mut f = 0;
        for (i, m) in all.iter().enumerate() {
            f |= set(m.is_some(), i as u8 + 1);
        }
        out.put_u8(f | self.spare);
        for m in all.into_iter().flatten() {
            out.extend_from_slice(&m);
        }
    }
}

/// C-TAG (clause 8.2.94) and S-TAG (clause 8.2.95): flags PCP/DEI/VID, then the tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag(pub [u8; 3]);

impl VlanTag {
    pub fn pcp(&self) -> Option<u8> {
        bit(self.0[0], 1).then_some(self.0[1] & 0x07)
    }
    pub fn dei(&self) -> Option<bool> {
        bit(self.0[0], 2).then_some(self.0[1] & 0x08 != 0)
    }
    pub fn vid(&self) -> Option<u16> {
        bit(self.0[0], 3).then_some((((self.0[1] >> 4) as u16) << 8) | self.0[2] as u16)
    }
}

impl Serialize for VlanTag {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        if let Some(x) = self.pcp() {
            m.serialize_entry("pcp", &x)?;
        }
        if let Some(x) = self.dei() {
            m.serialize_entry("dei", &x)?;
        }
        if let Some(x) = self.vid() {
            m.serialize_entry("vid", &x)?;
        }
        m.end()
    }
}

impl Value for VlanTag {
    fn decode(v: &[u8]) -> Result<Self> {
        let b = Reader::new(v).bytes(3)?;
        Ok(VlanTag([b[0], b[1], b[2]]))
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0)
    }
}

/// User ID, clause 8.2.101: IMSI, IMEI, MSISDN (TBCD), NAI, SUPI, GPSI, PEI.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UserId {
    pub imsi: Option<Vec<u8>>,
    pub imei: Option<Vec<u8>>,
    pub msisdn: Option<Vec<u8>>,
    pub nai: Option<Vec<u8>>,
    pub supi: Option<Vec<u8>>,
    pub gpsi: Option<Vec<u8>>,
    pub pei: Option<Vec<u8>>,
    /// Spare bit 8 of the flags octet as received (kept so the IE re-encodes as received).
    pub spare: u8,
}

/// Encode decimal digits as TBCD (TS 29.274 clause 8.3): low nibble first, an odd count
/// padded with 0xf. Characters other than '0'-'9' are left out.
pub fn tbcd_encode(digits: &str) -> Vec<u8> {
    let d: Vec<u8> = digits
        .bytes()
        .filter(u8::is_ascii_digit)
        .map(|c| c - b'0')
        .collect();
    d.chunks(2)
        .map(|p| p[0] | (p.get(1).copied().unwrap_or(0x0f) << 4))
        .collect()
}

/// Decode TBCD digits (TS 29.274 clause 8.3): low nibble first, 0xf fills.
pub fn tbcd(b: &[u8]) -> String {
    let mut s = String::new();
    for x in b {
        for n in [x & 0x0f, x >> 4] {
            if n <= 9 {
                s.push((b'0' + n) as char);
            } else if n != 0x0f {
                s.push('?');
            }
        }
    }
    s
}

impl UserId {
    fn fields(&self) -> [&Option<Vec<u8>>; 7] {
        [
            &self.imsi,
            &self.imei,
            &self.msisdn,
            &self.nai,
            &self.supi,
            &self.gpsi,
            &self.pei,
        ]
    }
}

impl Serialize for UserId {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        let names = ["imsi", "imei", "msisdn", "nai", "supi", "gpsi", "pei"];
        for (i, f) in self.fields().iter().enumerate() {
            if let Some(b) = f {
                let v = if i < 3 {
                    tbcd(b)
                } else {
                    String::from_utf8_lossy(b).into_owned()
                };
                m.serialize_entry(names[i], &v)?;
            }
        }
        if self.spare != 0 {
            m.serialize_entry("spare", &self.spare)?;
        }
        m.end()
    }
}

impl Value for UserId {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let f = r.u8()?;
        let mut get = |n| -> Result<Option<Vec<u8>>> {
            if bit(f, n) {
                Ok(Some(r.len8_bytes()?.to_vec()))
            } else {
                Ok(None)
            }
        };
        Ok(UserId {
            imsi: get(1)?,
            imei: get(2)?,
            msisdn: get(3)?,
            nai: get(4)?,
            supi: get(5)?,
            gpsi: get(6)?,
            pei: get(7)?,
            spare: f & 0x80,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let mut f = 0;
        for (i, x) in self.fields().iter().enumerate() {
            f |= set(x.is_some(), i as u8 + 1);
        }
        out.put_u8(f | self.spare);
        for b in self.fields().into_iter().flatten() {
            out.put_len8(b);
        }
    }
}

/// MAC Addresses Detected (clause 8.2.103) and Removed (clause 8.2.104).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MacAddresses {
    pub addresses: Vec<[u8; 6]>,
    /// C-TAG and S-TAG fields that may follow (Rel-16), kept as octets.
    #[serde(skip_serializing_if = "Bytes::is_empty")]
    pub tags: Bytes,
}

impl Bytes {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Value for MacAddresses {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let n = r.u8()?;
        let mut addresses = Vec::with_capacity(n as usize);
        for _ in 0..n {
            addresses.push(mac(&mut r)?);
        }
        Ok(MacAddresses {
            addresses,
            tags: Bytes(r.rest().to_vec()),
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.addresses.len().min(255) as u8);
        for m in self.addresses.iter().take(255) {
            out.extend_from_slice(m);
        }
        out.extend_from_slice(&self.tags.0);
    }
}

/// S-NSSAI, clause 8.2.160: SST and SD.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SNssai {
    pub sst: u8,
    pub sd: u32,
}

impl Value for SNssai {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        Ok(SNssai {
            sst: r.u8()?,
            sd: r.u24()?,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.sst);
        out.put_u24(self.sd);
    }
}

/// UE IP address Pool Identity, clause 8.2.128: a 2-octet length and the identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UeIpAddressPoolIdentity(pub Text);

impl Value for UeIpAddressPoolIdentity {
    fn decode(v: &[u8]) -> Result<Self> {
        Ok(UeIpAddressPoolIdentity(Text(
            Reader::new(v).len16_bytes()?.to_vec(),
        )))
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_len16(&self.0 .0)
    }
}

/// Alternative SMF IP Address (clause 8.2.129) and CP PFCP Entity IP Address (clause
/// 8.2.136): V6 in bit 1, V4 in bit 2 (and PPE in bit 3 for the former), then addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct IpAddresses {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<Ipv4Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Addr>,
    /// Flag bits above V4/V6 (PPE), kept as received.
    pub other_flags: u8,
}

impl Value for IpAddresses {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let f = r.u8()?;
        let ipv4 = if bit(f, 2) { Some(r.ipv4()?) } else { None };
        let ipv6 = if bit(f, 1) { Some(r.ipv6()?) } else { None };
        Ok(IpAddresses {
            ipv4,
            ipv6,
            other_flags: f & !0x03,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.other_flags | set(self.ipv6.is_some(), 1) | set(self.ipv4.is_some(), 2));
        if let Some(a) = self.ipv4 {
            out.extend_from_slice(&a.octets());
        }
        if let Some(a) = self.ipv6 {
            out.extend_from_slice(&a.octets());
        }
    }
}

/// SMF Set ID, clause 8.2.131: a spare octet and an FQDN.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SmfSetId {
    pub fqdn: Name,
    /// Octet 5, spare, as received (kept so the IE re-encodes as received).
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for SmfSetId {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let spare = r.u8()?;
        Ok(SmfSetId {
            fqdn: Name(r.rest().to_vec()),
            spare,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(self.spare);
        out.extend_from_slice(&self.fqdn.0);
    }
}

/// Source IP Address, clause 8.2.138.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct SourceIpAddress {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<Ipv4Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Addr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mask_prefix_length: Option<u8>,
    /// Spare bits of the flags octet as received: ignored (clause 8.1.1, "set to 0 by
    /// the sender and ignored by the receiver") but kept, so the IE re-encodes as received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for SourceIpAddress {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let f = r.u8()?;
        let ipv4 = if bit(f, 2) { Some(r.ipv4()?) } else { None };
        let ipv6 = if bit(f, 1) { Some(r.ipv6()?) } else { None };
        let mask_prefix_length = if bit(f, 3) { Some(r.u8()?) } else { None };
        Ok(SourceIpAddress {
            ipv4,
            ipv6,
            mask_prefix_length,
            spare: f & 0xf8,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.put_u8(
            set(self.ipv6.is_some(), 1)
                | set(self.ipv4.is_some(), 2)
                | set(self.mask_prefix_length.is_some(), 3)
                | self.spare,
        );
        if let Some(a) = self.ipv4 {
            out.extend_from_slice(&a.octets());
        }
        if let Some(a) = self.ipv6 {
            out.extend_from_slice(&a.octets());
        }
        if let Some(m) = self.mask_prefix_length {
            out.put_u8(m);
        }
    }
}

/// The downlink, uplink and round-trip packet delays, in milliseconds, each an Unsigned32
/// present when its flag is set (bits 1, 2 and 3 of the first octet, in that order): the
/// layout that Packet Delay Thresholds (clause 8.2.169) and QoS Monitoring Measurement
/// (clause 8.2.171) share.
fn read_delays(r: &mut Reader, flags: u8) -> Result<[Option<u32>; 3]> {
    let mut out = [None; 3];
    for (i, d) in out.iter_mut().enumerate() {
        if bit(flags, i as u8 + 1) {
            *d = Some(r.u32()?);
        }
    }
    Ok(out)
}

fn delay_flags(delays: [Option<u32>; 3]) -> u8 {
    delays
        .iter()
        .enumerate()
        .fold(0, |f, (i, d)| f | set(d.is_some(), i as u8 + 1))
}

/// Packet Delay Thresholds, clause 8.2.169 (IE 245): the delays, in milliseconds, past which
/// event-triggered QoS monitoring reports (Table 7.5.2.9-3). The specification asks for at
/// least one flag; none set decodes to no threshold, so the IE re-encodes as received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct PacketDelayThresholds {
    /// DL: downlink packet delay threshold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub downlink_ms: Option<u32>,
    /// UL: uplink packet delay threshold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uplink_ms: Option<u32>,
    /// RP: round trip packet delay threshold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_trip_ms: Option<u32>,
    /// Spare bits 4 to 8 of the flags octet as received, kept so the IE re-encodes as
    /// received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for PacketDelayThresholds {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let f = r.u8()?;
        let [downlink_ms, uplink_ms, round_trip_ms] = read_delays(&mut r, f)?;
        Ok(PacketDelayThresholds {
            downlink_ms,
            uplink_ms,
            round_trip_ms,
            spare: f & 0xf8,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let d = [self.downlink_ms, self.uplink_ms, self.round_trip_ms];
        out.put_u8(delay_flags(d) | self.spare);
        for x in d.into_iter().flatten() {
            out.put_u32(x);
        }
    }
}

/// QoS Monitoring Measurement, clause 8.2.171 (IE 248): the packet delays the UP function
/// measured for a QoS flow, in milliseconds, or PLMF (Packet Delay Measurement Failure: no
/// time stamp came back within the Packet Delay Thresholds or the Measurement Period).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct QosMonitoringMeasurement {
    /// DL: downlink packet delay, UPF (PSA) to UE.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub downlink_ms: Option<u32>,
    /// UL: uplink packet delay, UE to UPF (PSA).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uplink_ms: Option<u32>,
    /// RP: round trip packet delay between the UPF (PSA) and the UE.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_trip_ms: Option<u32>,
    /// PLMF, bit 4: packet delay measurement failure.
    #[serde(skip_serializing_if = "is_zero")]
    pub plmf: bool,
    /// Spare bits 5 to 8 of the flags octet as received, kept so the IE re-encodes as
    /// received.
    #[serde(skip_serializing_if = "is_zero")]
    pub spare: u8,
}

impl Value for QosMonitoringMeasurement {
    fn decode(v: &[u8]) -> Result<Self> {
        let mut r = Reader::new(v);
        let f = r.u8()?;
        let [downlink_ms, uplink_ms, round_trip_ms] = read_delays(&mut r, f)?;
        Ok(QosMonitoringMeasurement {
            downlink_ms,
            uplink_ms,
            round_trip_ms,
            plmf: bit(f, 4),
            spare: f & 0xf0,
        })
    }
    fn encode(&self, out: &mut Vec<u8>) {
        let d = [self.downlink_ms, self.uplink_ms, self.round_trip_ms];
        out.put_u8(delay_flags(d) | set(self.plmf, 4) | self.spare);
        for x in d.into_iter().flatten() {
            out.put_u32(x);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round<T: Value + PartialEq + std::fmt::Debug>(bytes: &[u8]) -> T {
        let v = T::decode(bytes).unwrap();
        let mut out = Vec::new();
        v.encode(&mut out);
        assert_eq!(out, bytes, "{v:?} re-encodes differently");
        v
    }

    #[test]
    fn fteid_choose_one_octet() {
        // CH=1, V4=1: "allocate an IPv4 F-TEID" (open5gs-5g-roaming-hr.pcapng sends CH V4 V6).
        let f: FTeid = round(&[0x05]);
        assert_eq!(
            f.choose,
            Some(Choose {
                v4: true,
                v6: false,
                choose_id: None
            })
        );
        let f: FTeid = round(&[0x0f, 0x07]);
        assert_eq!(f.choose.unwrap().choose_id, Some(7));
    }

    #[test]
    fn fteid_explicit() {
        let f: FTeid = round(&[0x01, 0x00, 0x00, 0x00, 0x2a, 10, 0, 0, 1]);
        assert_eq!(f, FTeid::new(42, Some(Ipv4Addr::new(10, 0, 0, 1)), None));
    }

    #[test]
    fn fteid_choose_without_an_address_family() {
        // CH=1 alone: OAI's SMF sends this in every Create PDR (length 1, flags 0x04).
        let f: FTeid = round(&[0x04]);
        assert_eq!(
            f.choose,
            Some(Choose {
                v4: false,
                v6: false,
                choose_id: None
            })
        );
        let f: FTeid = round(&[0x0c, 0x03]);
        assert_eq!(f.choose.unwrap().choose_id, Some(3));
    }

    #[test]
    fn spare_bits_come_back() {
        let f: FTeid = round(&[0x85]);
        assert_eq!(f.spare, 0x80);
        let f: FTeid = round(&[0x41, 0, 0, 0, 1, 10, 0, 0, 1]);
        assert_eq!(f.teid, Some(1));
        let u: UeIpAddress = round(&[0x82, 10, 45, 0, 2]);
        assert_eq!((u.ipv4, u.spare), (Some(Ipv4Addr::new(10, 45, 0, 2)), 0x80));
        let n: NodeIdIe = round(&[0x30, 10, 0, 0, 1]);
        assert_eq!(n.node_id, NodeId::Ipv4(Ipv4Addr::new(10, 0, 0, 1)));
    }

    #[test]
    fn fteid_rejects_forbidden() {
        let e = FTeid::decode(&[0x00, 0, 0, 0, 1]).unwrap_err();
        assert_eq!(
            e.kind,
            ErrorKind::Invalid("F-TEID with neither V4 nor V6 set")
        );
        let e = FTeid::decode(&[0x09, 0, 0, 0, 1, 1, 2, 3, 4]).unwrap_err();
        assert_eq!(
            e.kind,
            ErrorKind::Invalid("F-TEID with CHID set but CH not set")
        );
        let e = FTeid::decode(&[0x01, 0, 0, 0, 1, 1, 2]).unwrap_err();
        assert!(matches!(e.kind, ErrorKind::IeTooShort { .. }));
    }

    #[test]
    fn bitrate() {
        let b: Bitrate = round(&[0, 0, 0, 0x27, 0x10, 0, 0, 0, 0x4e, 0x20]);
        assert_eq!((b.ul_kbps, b.dl_kbps), (10_000, 20_000));
        assert!(matches!(
            Bitrate::decode(&[0; 8]).unwrap_err().kind,
            ErrorKind::IeTooShort { needed: 10, got: 8 }
        ));
    }

    #[test]
    fn names_as_labels_or_plain() {
        let n = Name::labels("internet.mnc001.mcc001");
        assert_eq!(n.0[0], 8);
        assert_eq!(n.to_text(), "internet.mnc001.mcc001");
        assert!(n.is_labels());
        let p = Name::plain("internet");
        assert!(!p.is_labels());
        assert_eq!(p.to_text(), "internet");
    }

    #[test]
    fn node_id_forms() {
        assert_eq!(
            round::<NodeId>(&[0, 127, 0, 0, 4]),
            NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4))
        );
        let n: NodeId = round(&[2, 3, b'u', b'p', b'f', 3, b'c', b'o', b'm']);
        assert_eq!(n.to_string(), "upf.com");
        let n: NodeId = round(&[2, b'u', b'p', b'f']);
        assert_eq!(n.to_string(), "upf");
        assert!(NodeId::decode(&[3, 1, 2, 3, 4]).is_err());
    }

    #[test]
    fn outer_header_creation() {
        let o: OuterHeaderCreation = round(&[1, 0, 0, 0, 0, 1, 10, 0, 0, 2]);
        assert_eq!(
            o,
            OuterHeaderCreation::gtpu_ipv4(1, Ipv4Addr::new(10, 0, 0, 2))
        );
        // GTP-U/UDP/IPv4 announced but the address cut short.
        assert!(matches!(
            OuterHeaderCreation::decode(&[1, 0, 0, 0, 0, 1, 10, 0])
                .unwrap_err()
                .kind,
            ErrorKind::IeTooShort { needed: 10, got: 8 }
        ));
        assert!(OuterHeaderCreation::decode(&[0, 0]).is_err());
    }

    #[test]
    fn outer_header_removal_every_value() {
        for d in 0..=8u8 {
            let o: OuterHeaderRemoval = round(&[d]);
            assert_eq!(o.description, d);
        }
        let o: OuterHeaderRemoval = round(&[6, 1]);
        assert_eq!(o.ext_header_deletion, Some(1));
    }

    #[test]
    fn flags_bits() {
        let mut f = Flags(vec![0x02]);
        assert!(f.get(2));
        f.set(12, true);
        assert_eq!(f.0, vec![0x02, 0x08]);
        assert_eq!(f.bits().collect::<Vec<_>>(), vec![2, 12]);
    }

    #[test]
    fn ue_ip_and_sdf() {
        let u: UeIpAddress = round(&[0x06, 10, 45, 0, 2]);
        assert!(u.destination);
        assert_eq!(u.ipv4, Some(Ipv4Addr::new(10, 45, 0, 2)));
        let s: SdfFilter = round(&[
            0x01, 0x00, 0x00, 0x0f, b'p', b'e', b'r', b'm', b'i', b't', b' ', b'o', b'u', b't',
            b' ', b'i', b'p', b' ', b'x',
        ]);
        assert_eq!(s.flow_description.unwrap().len(), 15);
    }

    #[test]
    fn gprs_timer() {
        assert_eq!(GprsTimer(0x05).seconds(), Some(10));
        assert_eq!(GprsTimer(0x21).seconds(), Some(60));
        assert_eq!(GprsTimer(0xe0).seconds(), None);
        assert_eq!(GprsTimer::from_seconds(20).seconds(), Some(20));
        assert_eq!(GprsTimer::from_seconds(600).seconds(), Some(600));
    }
}
