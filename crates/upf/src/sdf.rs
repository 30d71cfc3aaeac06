//! SDF filters for PDR matching: TS 29.244 clause 8.2.5 (SDF Filter IE), with the Flow
//! Description written as an IPFilterRule (RFC 6733 clause 4.3.1) restricted by TS 29.212
//! clause 5.4.2.
//!
//! A PDI may carry several SDF Filters; a packet matches the PDI's SDF part when it
//! matches any of them. Each [`SdfRule`] is one SDF Filter: every part it carries
//! (Flow Description, ToS/Traffic Class, SPI, Flow Label) must match.
//!
//! # Direction
//!
//! A Flow Description is written for the downlink: TS 29.212 clause 5.4.2 allows only
//! direction `out` ("to the terminal", RFC 6733), its source is the remote (network) side
//! and its destination the UE side, where `assigned` may stand for the UE address. The
//! filter for uplink packets has "the source and destination address/port parameters
//! swapped" (TS 29.244 clause 8.2.5, on bidirectional SDF Filters); Open5GS SMFs send the
//! same Flow Description in the uplink and the downlink PDR.
//! So a parsed [`FlowDescription`] has a `remote` and a `ue` [`Endpoint`], and matching
//! takes the packet's [`Direction`]: uplink packets have the UE as source, downlink
//! packets as destination.
//!
//! # What is accepted
//!
//! `permit out PROTO from [!]SRC [PORTS] to [!]DST [PORTS]`, where
//!
//! * `PROTO` is `ip` (any), a decimal number 0-255, or one of the names `icmp`, `igmp`,
//!   `tcp`, `udp`, `gre`, `esp`, `ah`, `icmpv6`/`ipv6-icmp`, `sctp` (Open5GS sends `udp`);
//! * `SRC` is `any` or an address with an optional `/bits`; `DST` may also be `assigned`.
//!   Host bits beyond the mask are cleared (Open5GS sends `10.200.136.98/24`). A rule with
//!   an IPv4 (IPv6) address only matches IPv4 (IPv6) packets, as RFC 6733 says, negated
//!   or not; `any` and `assigned` match both versions;
//! * `!` before an address (attached or as its own token) negates it, as RFC 6733 allows
//!   (TS 29.212 / TS 29.214 tell senders not to use it); `!any` and `!assigned` are
//!   rejected;
//! * `PORTS` is a comma list of ports and inclusive ranges `lo-hi`, allowed with `ip`
//!   and the protocols that have ports (TCP, UDP, SCTP, DCCP, UDP-Lite). A packet without
//!   ports (non-first fragment, ICMP, ...) never matches a rule with ports (RFC 6733).
//!
//! Direction `in` is parsed and matches no packet ([`FlowDescription::inbound`]: what
//! free5GC's UPF does with what its SMF sends); [`SdfRule::require_out`] refuses it.
//!
//! Rejected with a precise [`SdfError`]: `deny`, other directions, options (`frag`,
//! `ipoptions`, `tcpoptions`, `established`, `setup`, `tcpflags`, `icmptypes`: TS 29.212
//! clause 5.4.2 allows none), `assigned` as source, mixed IP versions, anything else.
//! Keywords are matched without regard to case.
//!
//! # `assigned`
//!
//! TS 29.212 clause 5.4.2 defines `assigned` as "the value is not used for matching":
//! the PDI's UE IP Address does that job. [`SdfRule::matches`] follows it. The stricter
//! [`SdfRule::matches_with_ue`] requires the UE side address to be one of the session's
//! [`UeAddresses`]; note that it does not match an IPv6 Router Solicitation sent from the
//! UE's link-local address, which Open5GS's `permit out 58 from ff02::2/128 to assigned`
//! is meant to catch.
//!
//! # Fast path form
//!
//! This module is the rules' meaning, which the reference model (crate::model) applies
//! as it is. The XDP data path's table entries (one port range per side) are made from
//! a parsed rule by crates/bpf/src/compile.rs, tested against [`SdfRule::matches`];
//! [`SdfRule::port_range_pairs`] says how many entries a rule needs.

use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::str::FromStr;

/// A packet's direction relative to the UE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// From the UE: source is the UE side, destination the remote side.
    Uplink,
    /// To the UE: source is the remote side, destination the UE side.
    Downlink,
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// What was wrong with an SDF Filter. See [`SdfError`] for where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdfErrorKind {
    /// The Flow Description has a byte outside printable ASCII (RFC 6733: ASCII text).
    NotAscii,
    /// The text ends where this was expected.
    Missing(&'static str),
    /// A token is not what the grammar expects here.
    Expected(&'static str),
    /// Action other than `permit` (TS 29.212 clause 5.4.2).
    Action,
    /// Direction other than `out` (TS 29.212 clause 5.4.2).
    Direction,
    /// Protocol is not `ip`, a number 0-255 or a known name.
    Protocol,
    /// Not an IPv4 or IPv6 address (nor `any` / `assigned`).
    Address,
    /// Prefix length not a number within 0-32 (IPv4) or 0-128 (IPv6).
    PrefixLength,
    /// `assigned` used as the source (remote side).
    AssignedAsSource,
    /// `!` before `any` or `assigned`.
    NegatedKeyword,
    /// Source and destination addresses of different IP versions.
    MixedVersions,
    /// A port is not a decimal number 0-65535, or a port list item is empty.
    Port,
    /// A port range whose low end is above its high end.
    PortRange,
    /// More than [`MAX_PORT_ITEMS`] port items on one side.
    TooManyPorts,
    /// Ports given with a protocol that has none.
    PortsWithoutPorts {
        /// The rule's protocol.
        protocol: u8,
    },
    /// An IPFilterRule option (TS 29.212 clause 5.4.2 allows none).
    OptionNotAllowed,
    /// Text after the destination that is neither ports nor an option.
    Trailing,
    /// The SDF Filter has no Flow Description, ToS/Traffic Class, SPI, Flow Label or SDF
    /// Filter ID.
    EmptyFilter,
    /// A Flow Label (IPv6 only) with an IPv4 Flow Description: it could never match.
    FlowLabelWithIpv4,
}

impl fmt::Display for SdfErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SdfErrorKind::NotAscii => f.write_str("Flow Description is not printable ASCII text"),
            SdfErrorKind::Missing(what) => {
                write!(f, "Flow Description ends where {what} was expected")
            }
            SdfErrorKind::Expected(what) => write!(f, "expected {what}"),
            SdfErrorKind::Action => {
                f.write_str("action must be \"permit\" (TS 29.212 clause 5.4.2)")
            }
            SdfErrorKind::Direction => {
                f.write_str("direction must be \"out\" (TS 29.212 clause 5.4.2)")
            }
            SdfErrorKind::Protocol => {
                f.write_str("protocol must be \"ip\", a decimal number 0-255 or a protocol name")
            }
            SdfErrorKind::Address => {
                f.write_str("not an IPv4/IPv6 address[/bits], \"any\" or \"assigned\"")
            }
            SdfErrorKind::PrefixLength => {
                f.write_str("prefix length must be 0-32 for IPv4, 0-128 for IPv6")
            }
            SdfErrorKind::AssignedAsSource => f.write_str(
                "\"assigned\" (the UE address) is only allowed as the destination \
                 (TS 29.212 clause 5.4.2)",
            ),
            SdfErrorKind::NegatedKeyword => {
                f.write_str("\"!\" can negate an address, not \"any\" or \"assigned\"")
            }
            SdfErrorKind::MixedVersions => {
                f.write_str("source and destination addresses are of different IP versions")
            }
            SdfErrorKind::Port => f.write_str("port must be a decimal number 0-65535"),
            SdfErrorKind::PortRange => f.write_str("port range low end is above its high end"),
            SdfErrorKind::TooManyPorts => {
                write!(f, "more than {MAX_PORT_ITEMS} port items on one side")
            }
            SdfErrorKind::PortsWithoutPorts { protocol } => {
                write!(f, "ports given for protocol {protocol}, which has no ports")
            }
            SdfErrorKind::OptionNotAllowed => {
                f.write_str("IPFilterRule options are not allowed (TS 29.212 clause 5.4.2)")
            }
            SdfErrorKind::Trailing => f.write_str("unexpected text after the destination"),
            SdfErrorKind::EmptyFilter => f.write_str(
                "SDF Filter has none of Flow Description, ToS/Traffic Class, \
                 Security Parameter Index, Flow Label, SDF Filter ID",
            ),
            SdfErrorKind::FlowLabelWithIpv4 => {
                f.write_str("Flow Label (IPv6 only) given with an IPv4 Flow Description")
            }
        }
    }
}

/// An SDF Filter that cannot be installed: what was wrong, at which byte of the Flow
/// Description, and the offending token. The session layer answers with Cause "Rule
/// creation/modification failure" and the Failed Rule ID of the PDR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdfError {
    /// What was wrong.
    pub kind: SdfErrorKind,
    /// Byte offset in the Flow Description of the offending token (or of its end, for
    /// [`SdfErrorKind::Missing`]); 0 for errors about the IE as a whole.
    pub position: usize,
    /// The offending token as received, cut at [`MAX_TOKEN_IN_ERROR`] bytes; empty when
    /// there is none.
    pub token: String,
}

/// Tokens quoted in an [`SdfError`] are cut at this many bytes.
pub const MAX_TOKEN_IN_ERROR: usize = 64;

impl SdfError {
    fn new(kind: SdfErrorKind, position: usize, token: &str) -> Self {
        let mut end = token.len().min(MAX_TOKEN_IN_ERROR);
        while !token.is_char_boundary(end) {
            end -= 1;
        }
        SdfError {
            kind,
            position,
            token: token[..end].to_string(),
        }
    }

    fn whole(kind: SdfErrorKind) -> Self {
        SdfError {
            kind,
            position: 0,
            token: String::new(),
        }
    }
}

impl fmt::Display for SdfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.kind.fmt(f)?;
        match self.kind {
            SdfErrorKind::EmptyFilter | SdfErrorKind::FlowLabelWithIpv4 => Ok(()),
            SdfErrorKind::Missing(_) => write!(f, " (at byte {})", self.position),
            _ => write!(f, " (\"{}\" at byte {})", self.token, self.position),
        }
    }
}

impl std::error::Error for SdfError {}

// ---------------------------------------------------------------------------------------
// The parsed Flow Description
// ---------------------------------------------------------------------------------------

/// At most this many port items (single ports or ranges, before merging) on one side.
pub const MAX_PORT_ITEMS: usize = 64;

/// An inclusive port range; a single port has `lo == hi`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortRange {
    /// Lowest port matched.
    pub lo: u16,
    /// Highest port matched.
    pub hi: u16,
}

impl PortRange {
    /// Whether `port` is in the range.
    pub fn contains(&self, port: u16) -> bool {
        self.lo <= port && port <= self.hi
    }
}

/// An address prefix; host bits beyond `len` are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct IpPrefix {
    addr: IpAddr,
    len: u8,
}

impl IpPrefix {
    /// The prefix of `addr` of `len` bits; `None` if `len` is too long for the family.
    /// Host bits are cleared.
    pub fn new(addr: IpAddr, len: u8) -> Option<Self> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len > max {
            return None;
        }
        let (bytes, n) = ip_bytes(&addr);
        let mask = mask_bytes(len);
        let mut out = [0u8; 16];
        for i in 0..n {
            out[i] = bytes[i] & mask[i];
        }
        let addr = if addr.is_ipv4() {
            IpAddr::V4(Ipv4Addr::new(out[0], out[1], out[2], out[3]))
        } else {
            IpAddr::V6(Ipv6Addr::from(out))
        };
        Some(IpPrefix { addr, len })
    }

    /// The network address (host bits zero).
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// The prefix length in bits.
    pub fn len(&self) -> u8 {
        self.len
    }

    /// Whether the prefix is /0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// 4 or 6.
    pub fn version(&self) -> u8 {
        if self.addr.is_ipv4() {
            4
        } else {
            6
        }
    }

    /// Whether `ip` is of the same version and within the prefix.
    pub fn contains(&self, ip: IpAddr) -> bool {
        if ip.is_ipv4() != self.addr.is_ipv4() {
            return false;
        }
        let (a, n) = ip_bytes(&ip);
        let (p, _) = ip_bytes(&self.addr);
        let m = mask_bytes(self.len);
        (0..n).all(|i| a[i] & m[i] == p[i])
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

/// The address part of one side of a Flow Description.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Address {
    /// `any`: every address of either version.
    Any,
    /// `assigned`: the UE's address(es); UE side only.
    Assigned,
    /// An address with a prefix length (`/32` or `/128` when none was written).
    Prefix(IpPrefix),
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Address::Any => f.write_str("any"),
            Address::Assigned => f.write_str("assigned"),
            Address::Prefix(p) => p.fmt(f),
        }
    }
}

/// One side of a Flow Description: address (possibly negated) and ports.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The address part.
    pub address: Address,
    /// `!` before the address: match every other address of the same version.
    pub negated: bool,
    /// Port ranges, sorted, overlapping and adjacent ones merged; empty means no port
    /// condition.
    pub ports: Vec<PortRange>,
}

impl Endpoint {
    /// `any`, no ports.
    pub const ANY: Endpoint = Endpoint {
        address: Address::Any,
        negated: false,
        ports: Vec::new(),
    };

    fn version(&self) -> Option<u8> {
        match self.address {
            Address::Prefix(p) => Some(p.version()),
            Address::Any | Address::Assigned => None,
        }
    }

    fn address_matches(&self, ip: IpAddr, ue: Option<&UeAddresses>) -> bool {
        match self.address {
            Address::Any => true,
            Address::Assigned => ue.is_none_or(|u| u.contains(ip)),
            Address::Prefix(p) => p.contains(ip) != self.negated,
        }
    }

    fn ports_match(&self, port: Option<u16>) -> bool {
        self.ports.is_empty() || port.is_some_and(|p| self.ports.iter().any(|r| r.contains(p)))
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.negated {
            f.write_str("!")?;
        }
        self.address.fmt(f)?;
        for (i, r) in self.ports.iter().enumerate() {
            f.write_str(if i == 0 { " " } else { "," })?;
            if r.lo == r.hi {
                write!(f, "{}", r.lo)?;
            } else {
                write!(f, "{}-{}", r.lo, r.hi)?;
            }
        }
        Ok(())
    }
}

/// Flow Descriptions longer than this are parsed each time, not kept.
const PARSED_TEXT_MAX: usize = 256;
/// Flow Descriptions kept parsed at most (per thread).
const PARSED_KEPT: usize = 1024;

thread_local! {
    static PARSED: std::cell::RefCell<std::collections::HashMap<Box<[u8]>, FlowDescription>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// A parsed Flow Description (TS 29.212 clause 5.4.2): always `permit out`, so only the
/// protocol and the two sides remain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FlowDescription {
    /// IP protocol (IPv6: the upper-layer Next Header); `None` for `ip` (any).
    pub protocol: Option<u8>,
    /// The `from` side: the remote (network) end.
    pub remote: Endpoint,
    /// The `to` side: the UE end.
    pub ue: Endpoint,
    /// Direction `in` (RFC 6733: from the terminal), which TS 29.212 clause 5.4.2 does
    /// not allow. free5GC's SMF sends it; its UPF takes it and matches it against no
    /// packet (gtp5g `sdf_filter_match` compares the rule's direction with OUT), and
    /// so does [`SdfRule::matches`]. Sessions refuse it under `n4.strict`, PFDs and
    /// predefined rules always ([`SdfRule::require_out`]).
    pub inbound: bool,
}

impl FlowDescription {
    /// Parses the text of a Flow Description. See the module documentation for the
    /// accepted grammar.
    pub fn parse(text: &str) -> Result<Self, SdfError> {
        Parser::new(text)?.flow_description()
    }

    /// Parses the octets of a Flow Description field as received in the IE.
    ///
    /// Remembers what it parsed: SMFs send the same few filters in every session, and
    /// each is read three times per PDR (PDI, validation, compile), which was an eighth
    /// of the instructions of an establishment (docs/benchmarks.md). Bounded: texts of at
    /// most [`PARSED_TEXT_MAX`] octets, [`PARSED_KEPT`] of them, forgotten all at once
    /// when full. Errors are not kept (they are rare and their message is built anew).
    pub fn parse_bytes(bytes: &[u8]) -> Result<Self, SdfError> {
        if bytes.len() > PARSED_TEXT_MAX {
            return Self::parse_bytes_now(bytes);
        }
        PARSED.with(|kept| {
            if let Some(f) = kept.borrow().get(bytes) {
                return Ok(f.clone());
            }
            let f = Self::parse_bytes_now(bytes)?;
            let mut kept = kept.borrow_mut();
            if kept.len() >= PARSED_KEPT {
                kept.clear();
            }
            kept.insert(bytes.into(), f.clone());
            Ok(f)
        })
    }

    fn parse_bytes_now(bytes: &[u8]) -> Result<Self, SdfError> {
        match core::str::from_utf8(bytes) {
            Ok(text) => Self::parse(text),
            Err(e) => Err(SdfError::new(SdfErrorKind::NotAscii, e.valid_up_to(), "")),
        }
    }

    /// 4 or 6 when an address fixes the IP version, `None` when both sides are `any` or
    /// `assigned`.
    pub fn ip_version(&self) -> Option<u8> {
        self.remote.version().or(self.ue.version())
    }

    /// Whether the UE side is `assigned`.
    pub fn uses_assigned(&self) -> bool {
        self.ue.address == Address::Assigned
    }

    fn matches(&self, p: &PacketFields, dir: Direction, ue: Option<&UeAddresses>) -> bool {
        if self.inbound || self.ip_version().is_some_and(|v| v != p.version) {
            return false;
        }
        if self.protocol.is_some_and(|proto| proto != p.protocol) {
            return false;
        }
        let (ue_addr, ue_port, remote_addr, remote_port) = p.sides(dir);
        self.remote.address_matches(remote_addr, None)
            && self.remote.ports_match(remote_port)
            && self.ue.address_matches(ue_addr, ue)
            && self.ue.ports_match(ue_port)
    }
}

impl FromStr for FlowDescription {
    type Err = SdfError;
    fn from_str(s: &str) -> Result<Self, SdfError> {
        Self::parse(s)
    }
}

/// The canonical text: `permit out PROTO from REMOTE [PORTS] to UE [PORTS]` (`in` if
/// [`FlowDescription::inbound`]), with decimal protocols and explicit prefix lengths;
/// it parses back to the same value.
impl fmt::Display for FlowDescription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.inbound {
            "permit in "
        } else {
            "permit out "
        })?;
        match self.protocol {
            None => f.write_str("ip")?,
            Some(p) => write!(f, "{p}")?,
        }
        write!(f, " from {} to {}", self.remote, self.ue)
    }
}

// ---------------------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------------------

/// IPFilterRule options of RFC 6733 clause 4.3.1, all refused (TS 29.212 clause 5.4.2).
const OPTIONS: [&str; 7] = [
    "frag",
    "ipoptions",
    "tcpoptions",
    "established",
    "setup",
    "tcpflags",
    "icmptypes",
];

/// Protocol names accepted besides numbers (IANA protocol numbers).
const PROTOCOL_NAMES: [(&str, u8); 10] = [
    ("icmp", 1),
    ("igmp", 2),
    ("tcp", 6),
    ("udp", 17),
    ("gre", 47),
    ("esp", 50),
    ("ah", 51),
    ("icmpv6", 58),
    ("ipv6-icmp", 58),
    ("sctp", 132),
];

/// Whether packets of this protocol carry 16-bit source and destination ports in their
/// first four octets: TCP, UDP, DCCP, SCTP, UDP-Lite.
pub fn protocol_has_ports(protocol: u8) -> bool {
    matches!(protocol, 6 | 17 | 33 | 132 | 136)
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

type Token<'a> = (usize, &'a str);

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Result<Self, SdfError> {
        // Some C peers count a terminating NUL in the length: harmless, dropped.
        let text = text.trim_end_matches('\0');
        if let Some(i) = text
            .bytes()
            .position(|b| !(b.is_ascii_graphic() || b.is_ascii_whitespace()))
        {
            return Err(SdfError::new(SdfErrorKind::NotAscii, i, ""));
        }
        Ok(Parser { text, pos: 0 })
    }

    fn peek(&self) -> Option<Token<'a>> {
        let bytes = self.text.as_bytes();
        let mut start = self.pos;
        while start < bytes.len() && bytes[start].is_ascii_whitespace() {
            start += 1;
        }
        if start == bytes.len() {
            return None;
        }
        let mut end = start;
        while end < bytes.len() && !bytes[end].is_ascii_whitespace() {
            end += 1;
        }
        Some((start, &self.text[start..end]))
    }

    fn next(&mut self) -> Option<Token<'a>> {
        let t = self.peek()?;
        self.pos = t.0 + t.1.len();
        Some(t)
    }

    fn expect(&mut self, what: &'static str) -> Result<Token<'a>, SdfError> {
        self.next()
            .ok_or_else(|| SdfError::new(SdfErrorKind::Missing(what), self.text.len(), ""))
    }

    fn keyword(&mut self, word: &'static str, what: &'static str) -> Result<(), SdfError> {
        let (pos, tok) = self.expect(what)?;
        if tok.eq_ignore_ascii_case(word) {
            Ok(())
        } else {
            Err(SdfError::new(SdfErrorKind::Expected(what), pos, tok))
        }
    }

    fn flow_description(mut self) -> Result<FlowDescription, SdfError> {
        let (pos, action) = self.expect("the action \"permit\"")?;
        if !action.eq_ignore_ascii_case("permit") {
            return Err(SdfError::new(SdfErrorKind::Action, pos, action));
        }
        let (pos, dir) = self.expect("the direction \"out\"")?;
        let inbound = dir.eq_ignore_ascii_case("in");
        if !inbound && !dir.eq_ignore_ascii_case("out") {
            return Err(SdfError::new(SdfErrorKind::Direction, pos, dir));
        }
        let (pos, proto) = self.expect("a protocol")?;
        let protocol = parse_protocol(proto)
            .ok_or_else(|| SdfError::new(SdfErrorKind::Protocol, pos, proto))?;
        self.keyword("from", "\"from\"")?;
        let (remote, _) = self.endpoint(protocol, false)?;
        self.keyword("to", "\"to\"")?;
        let (ue, (ue_pos, ue_tok)) = self.endpoint(protocol, true)?;
        if let (Some(a), Some(b)) = (remote.version(), ue.version()) {
            if a != b {
                return Err(SdfError::new(SdfErrorKind::MixedVersions, ue_pos, ue_tok));
            }
        }
        if let Some((pos, tok)) = self.next() {
            let kind = if OPTIONS.iter().any(|o| tok.eq_ignore_ascii_case(o)) {
                SdfErrorKind::OptionNotAllowed
            } else {
                SdfErrorKind::Trailing
            };
            return Err(SdfError::new(kind, pos, tok));
        }
        Ok(FlowDescription {
            protocol,
            remote,
            ue,
            inbound,
        })
    }

    /// One side: `[!]address [ports]`. Also returns the address token, for errors.
    fn endpoint(
        &mut self,
        protocol: Option<u8>,
        is_ue: bool,
    ) -> Result<(Endpoint, Token<'a>), SdfError> {
        let what = if is_ue {
            "the destination address"
        } else {
            "the source address"
        };
        let (mut pos, mut tok) = self.expect(what)?;
        let mut negated = false;
        if tok == "!" {
            negated = true;
            (pos, tok) = self.expect(what)?;
        } else if let Some(rest) = tok.strip_prefix('!') {
            negated = true;
            pos += 1;
            tok = rest;
        }
        let address = if tok.eq_ignore_ascii_case("any") {
            Address::Any
        } else if tok.eq_ignore_ascii_case("assigned") {
            if !is_ue {
                return Err(SdfError::new(SdfErrorKind::AssignedAsSource, pos, tok));
            }
            Address::Assigned
        } else {
            Address::Prefix(parse_prefix(pos, tok)?)
        };
        if negated && !matches!(address, Address::Prefix(_)) {
            return Err(SdfError::new(SdfErrorKind::NegatedKeyword, pos, tok));
        }
        let ports = self.ports(protocol)?;
        let endpoint = Endpoint {
            address,
            negated,
            ports,
        };
        Ok((endpoint, (pos, tok)))
    }

    /// An optional port list: `{port | lo-hi}[,...]`. A list may go on in the next token
    /// after a trailing comma (`5060, 1000-2000`).
    fn ports(&mut self, protocol: Option<u8>) -> Result<Vec<PortRange>, SdfError> {
        let starts_digit = |t: &str| t.as_bytes().first().is_some_and(u8::is_ascii_digit);
        let start = match self.peek() {
            Some((pos, tok)) if starts_digit(tok) => pos,
            _ => return Ok(Vec::new()),
        };
        let mut ranges = Vec::new();
        while let Some((pos, tok)) = self.next() {
            let body = tok.strip_suffix(',').unwrap_or(tok);
            let mut item_pos = pos;
            for item in body.split(',') {
                let shown = if item.is_empty() { tok } else { item };
                if ranges.len() == MAX_PORT_ITEMS {
                    return Err(SdfError::new(SdfErrorKind::TooManyPorts, item_pos, shown));
                }
                let range =
                    parse_port_item(item).map_err(|kind| SdfError::new(kind, item_pos, shown))?;
                ranges.push(range);
                item_pos += item.len() + 1;
            }
            if !tok.ends_with(',') {
                break;
            }
            if !self.peek().is_some_and(|(_, next)| starts_digit(next)) {
                return Err(SdfError::new(SdfErrorKind::Port, pos + tok.len() - 1, tok));
            }
        }
        if let Some(p) = protocol.filter(|&p| !protocol_has_ports(p)) {
            let kind = SdfErrorKind::PortsWithoutPorts { protocol: p };
            return Err(SdfError::new(kind, start, &self.text[start..self.pos]));
        }
        Ok(merge_ranges(ranges))
    }
}

fn parse_protocol(tok: &str) -> Option<Option<u8>> {
    if tok.eq_ignore_ascii_case("ip") {
        return Some(None);
    }
    if let Some(n) = parse_decimal(tok, 255) {
        return Some(Some(n as u8));
    }
    PROTOCOL_NAMES
        .iter()
        .find(|(name, _)| tok.eq_ignore_ascii_case(name))
        .map(|&(_, n)| Some(n))
}

/// A decimal number of at most 5 digits, no sign, not above `max`.
fn parse_decimal(s: &str, max: u32) -> Option<u32> {
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n = s.bytes().fold(0u32, |n, b| n * 10 + u32::from(b - b'0'));
    (n <= max).then_some(n)
}

fn parse_prefix(pos: usize, tok: &str) -> Result<IpPrefix, SdfError> {
    let (addr_text, bits) = match tok.split_once('/') {
        Some((a, b)) => (a, Some(b)),
        None => (tok, None),
    };
    let addr: IpAddr = addr_text
        .parse()
        .map_err(|_| SdfError::new(SdfErrorKind::Address, pos, tok))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let len = match bits {
        None => max,
        Some(b) => parse_decimal(b, max)
            .ok_or_else(|| SdfError::new(SdfErrorKind::PrefixLength, pos, tok))?,
    };
    IpPrefix::new(addr, len as u8)
        .ok_or_else(|| SdfError::new(SdfErrorKind::PrefixLength, pos, tok))
}

fn parse_port_item(item: &str) -> Result<PortRange, SdfErrorKind> {
    let port = |s: &str| {
        parse_decimal(s, 65535)
            .map(|n| n as u16)
            .ok_or(SdfErrorKind::Port)
    };
    match item.split_once('-') {
        None => {
            let p = port(item)?;
            Ok(PortRange { lo: p, hi: p })
        }
        Some((lo, hi)) => {
            let (lo, hi) = (port(lo)?, port(hi)?);
            if lo > hi {
                return Err(SdfErrorKind::PortRange);
            }
            Ok(PortRange { lo, hi })
        }
    }
}

/// Sorts and merges overlapping or adjacent ranges: same set of ports, fewer entries.
fn merge_ranges(mut ranges: Vec<PortRange>) -> Vec<PortRange> {
    ranges.sort_unstable();
    let mut out: Vec<PortRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            Some(last) if u32::from(r.lo) <= u32::from(last.hi) + 1 => {
                last.hi = last.hi.max(r.hi);
            }
            _ => out.push(r),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// The SDF Filter
// ---------------------------------------------------------------------------------------

/// ToS (IPv4) / Traffic Class (IPv6) with its mask (TS 29.212 clause 5.3.15).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TosTrafficClass {
    /// Expected ToS / Traffic Class octet.
    pub value: u8,
    /// Bits of it that are compared.
    pub mask: u8,
}

impl TosTrafficClass {
    /// From the IE's two octets: value first, mask second.
    pub fn from_u16(v: u16) -> Self {
        TosTrafficClass {
            value: (v >> 8) as u8,
            mask: v as u8,
        }
    }

    /// Whether a packet's ToS / Traffic Class octet matches.
    pub fn matches(&self, tos_tc: u8) -> bool {
        tos_tc & self.mask == self.value & self.mask
    }
}

/// The addresses assigned to the UE of a session (the PDI's UE IP Address), against which
/// `assigned` is checked by [`SdfRule::matches_with_ue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct UeAddresses {
    /// The UE's IPv4 address.
    pub ipv4: Option<Ipv4Addr>,
    /// The UE's IPv6 address or prefix, with its prefix length (128 for one address).
    pub ipv6: Option<(Ipv6Addr, u8)>,
}

impl UeAddresses {
    /// Whether `ip` is the UE's IPv4 address or within its IPv6 prefix.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.ipv4 == Some(a),
            IpAddr::V6(_) => self
                .ipv6
                .and_then(|(a, len)| IpPrefix::new(IpAddr::V6(a), len))
                .is_some_and(|p| p.contains(ip)),
        }
    }
}

impl From<IpAddr> for UeAddresses {
    fn from(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(a) => UeAddresses {
                ipv4: Some(a),
                ipv6: None,
            },
            IpAddr::V6(a) => UeAddresses {
                ipv4: None,
                ipv6: Some((a, 128)),
            },
        }
    }
}

/// One SDF Filter (TS 29.244 clause 8.2.5), checked and ready to match. Every part present
/// must match; an absent part matches everything.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct SdfRule {
    /// The Flow Description.
    pub flow: Option<FlowDescription>,
    /// ToS / Traffic Class and mask.
    pub tos_traffic_class: Option<TosTrafficClass>,
    /// IPsec Security Parameter Index (ESP or AH).
    pub spi: Option<u32>,
    /// IPv6 Flow Label, 20 bits.
    pub flow_label: Option<u32>,
    /// SDF Filter ID (present for a bidirectional SDF Filter, BID flag). A filter with
    /// only an ID refers to a bidirectional filter provisioned earlier in the session
    /// (see [`SdfRule::is_reference_only`]); resolving it is the session layer's job.
    pub filter_id: Option<u32>,
}

impl SdfRule {
    /// Checks an SDF Filter IE. The Flow Label's 4 spare bits are ignored.
    pub fn from_ie(ie: &pfcp::ie::SdfFilter) -> Result<Self, SdfError> {
        let flow = match &ie.flow_description {
            Some(bytes) => Some(FlowDescription::parse_bytes(bytes)?),
            None => None,
        };
        let rule = SdfRule {
            flow,
            tos_traffic_class: ie.tos_traffic_class.map(TosTrafficClass::from_u16),
            spi: ie.spi,
            flow_label: ie.flow_label.map(|l| l & 0x000f_ffff),
            filter_id: ie.filter_id,
        };
        rule.check()?;
        Ok(rule)
    }

    /// A rule with only a Flow Description.
    pub fn from_flow_description(text: &str) -> Result<Self, SdfError> {
        let rule = SdfRule {
            flow: Some(FlowDescription::parse(text)?),
            ..SdfRule::default()
        };
        rule.check()?;
        Ok(rule)
    }

    /// Whether the Flow Description has direction `in` ([`FlowDescription::inbound`]).
    pub fn is_inbound(&self) -> bool {
        self.flow.as_ref().is_some_and(|f| f.inbound)
    }

    /// Refuse direction `in` where TS 29.212 clause 5.4.2 is the only reading: PFDs,
    /// predefined rules, and sessions under `n4.strict`.
    pub fn require_out(&self) -> Result<(), SdfError> {
        if self.is_inbound() {
            return Err(SdfError::new(SdfErrorKind::Direction, 7, "in"));
        }
        Ok(())
    }

    /// Parses a Flow Description's text (same as [`FlowDescription::parse`]).
    pub fn parse_flow_description(text: &str) -> Result<FlowDescription, SdfError> {
        FlowDescription::parse(text)
    }

    fn check(&self) -> Result<(), SdfError> {
        if self.flow.is_none()
            && self.tos_traffic_class.is_none()
            && self.spi.is_none()
            && self.flow_label.is_none()
            && self.filter_id.is_none()
        {
            return Err(SdfError::whole(SdfErrorKind::EmptyFilter));
        }
        if self.flow_label.is_some() && self.flow.as_ref().and_then(|f| f.ip_version()) == Some(4) {
            return Err(SdfError::whole(SdfErrorKind::FlowLabelWithIpv4));
        }
        Ok(())
    }

    /// Whether the filter carries only an SDF Filter ID, referring to a bidirectional
    /// filter provisioned earlier; it must be resolved before matching (on its own it
    /// matches every packet).
    pub fn is_reference_only(&self) -> bool {
        self.filter_id.is_some()
            && self.flow.is_none()
            && self.tos_traffic_class.is_none()
            && self.spi.is_none()
            && self.flow_label.is_none()
    }

    /// Whether the Flow Description's UE side is `assigned`.
    pub fn uses_assigned(&self) -> bool {
        self.flow
            .as_ref()
            .is_some_and(FlowDescription::uses_assigned)
    }

    /// Whether packet `p`, travelling in `dir`, matches. `assigned` is not used for
    /// matching (TS 29.212 clause 5.4.2): the PDI's UE IP Address checks the UE side.
    pub fn matches(&self, p: &PacketFields, dir: Direction) -> bool {
        self.matches_inner(p, dir, None)
    }

    /// Like [`SdfRule::matches`], and `assigned` must also be one of `ue`'s addresses (of
    /// the packet's IP version).
    pub fn matches_with_ue(&self, p: &PacketFields, dir: Direction, ue: &UeAddresses) -> bool {
        self.matches_inner(p, dir, Some(ue))
    }

    fn matches_inner(&self, p: &PacketFields, dir: Direction, ue: Option<&UeAddresses>) -> bool {
        self.flow.as_ref().is_none_or(|f| f.matches(p, dir, ue))
            && self.tos_traffic_class.is_none_or(|t| t.matches(p.tos_tc))
            && self.spi.is_none_or(|s| p.spi == Some(s))
            && self.flow_label.is_none_or(|l| p.flow_label == Some(l))
    }

    /// The (remote port range, UE port range) pairs the rule's ports make: the table
    /// entries a data path with one port range per side needs for it (1 without ports).
    pub fn port_range_pairs(&self) -> usize {
        match &self.flow {
            // One entry that matches nothing (direction `in`).
            Some(f) if !f.inbound => f.remote.ports.len().max(1) * f.ue.ports.len().max(1),
            _ => 1,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Packet fields
// ---------------------------------------------------------------------------------------

/// IPv6 extension headers walked at most (RFC 8200 clause 4.1 order has 6 before the
/// upper layer; a longer chain is not classified).
pub const MAX_IPV6_EXTENSION_HEADERS: usize = 8;

/// What SDF filters look at in an IP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PacketFields {
    /// 4 or 6.
    pub version: u8,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// IPv4 Protocol; IPv6: the Next Header after Hop-by-Hop, Routing, Fragment and
    /// Destination Options headers (AH and ESP end the walk and are the protocol).
    pub protocol: u8,
    /// Source port (TCP, UDP, SCTP, DCCP, UDP-Lite; not in non-first fragments).
    pub src_port: Option<u16>,
    /// Destination port, as `src_port`.
    pub dst_port: Option<u16>,
    /// IPv4 ToS / IPv6 Traffic Class octet.
    pub tos_tc: u8,
    /// SPI of an ESP or AH header directly after the IP header (chain).
    pub spi: Option<u32>,
    /// IPv6 flow label (20 bits); `None` for IPv4.
    pub flow_label: Option<u32>,
}

/// The IPv6 extension headers of packet `b` (its payload ending at `end`) up to the
/// upper layer: Hop-by-Hop, Routing, Fragment and Destination Options, at most
/// [`MAX_IPV6_EXTENSION_HEADERS`]. Returns the upper layer's protocol, its offset and
/// whether the packet is a first fragment (or none); None if a header does not fit or
/// the chain is longer.
fn ipv6_upper_layer(b: &[u8], end: usize) -> Option<(u8, usize, bool)> {
    let mut nh = *b.get(6)?;
    let mut off = 40;
    let mut walked = 0;
    loop {
        match nh {
            0 | 43 | 60 => {
                let h = b.get(off..off + 2).filter(|_| off + 2 <= end)?;
                nh = h[0];
                off += (usize::from(h[1]) + 1) * 8;
                if off > end {
                    return None;
                }
            }
            44 => {
                let h = b.get(off..off + 8).filter(|_| off + 8 <= end)?;
                nh = h[0];
                off += 8;
                if u16::from_be_bytes([h[2], h[3]]) >> 3 != 0 {
                    return Some((nh, off, false));
                }
            }
            _ => return Some((nh, off, true)),
        }
        walked += 1;
        if walked > MAX_IPV6_EXTENSION_HEADERS {
            return None;
        }
    }
}

impl PacketFields {
    /// Reads the fields of an IPv4 (RFC 791) or IPv6 (RFC 8200) packet. `None` if it is
    /// neither, its header is truncated or inconsistent, or its IPv6 extension header chain
    /// is truncated or longer than [`MAX_IPV6_EXTENSION_HEADERS`]. Octets past the IP
    /// length are ignored; a transport header cut short leaves ports / SPI out.
    pub fn from_ip(packet: &[u8]) -> Option<PacketFields> {
        match packet.first()? >> 4 {
            4 => Self::from_ipv4(packet),
            6 => Self::from_ipv6(packet),
            _ => None,
        }
    }

    /// Where the transport header of IP packet `ip` starts: after the IPv4 header and its
    /// options, or the IPv6 header and its extension headers, walked as [`from_ip`]
    /// walks them; None for a fragment after the first and for what `from_ip` refuses.
    ///
    /// [`from_ip`]: PacketFields::from_ip
    pub fn transport_offset(ip: &[u8]) -> Option<usize> {
        let be16 = |i: usize| usize::from(u16::from_be_bytes([ip[i], ip[i + 1]]));
        match ip.first()? >> 4 {
            4 if ip.len() >= 20 => {
                let ihl = usize::from(ip[0] & 0x0f) * 4;
                let first = be16(6) & 0x1fff == 0;
                (ihl >= 20 && be16(2) >= ihl && ip.len() >= ihl && first).then_some(ihl)
            }
            6 if ip.len() >= 40 => {
                let end = match be16(4) {
                    0 => ip.len(),
                    n => (40 + n).min(ip.len()),
                };
                let (_, off, first) = ipv6_upper_layer(ip, end)?;
                first.then_some(off)
            }
            _ => None,
        }
    }

    fn from_ipv4(b: &[u8]) -> Option<PacketFields> {
        if b.len() < 20 {
            return None;
        }
        let ihl = usize::from(b[0] & 0x0f) * 4;
        let total = usize::from(u16::from_be_bytes([b[2], b[3]]));
        if ihl < 20 || total < ihl || b.len() < ihl {
            return None;
        }
        let end = total.min(b.len());
        let frag_offset = u16::from_be_bytes([b[6], b[7]]) & 0x1fff;
        let protocol = b[9];
        let mut p = PacketFields {
            version: 4,
            src: IpAddr::V4(Ipv4Addr::new(b[12], b[13], b[14], b[15])),
            dst: IpAddr::V4(Ipv4Addr::new(b[16], b[17], b[18], b[19])),
            protocol,
            src_port: None,
            dst_port: None,
            tos_tc: b[1],
            spi: None,
            flow_label: None,
        };
        if frag_offset == 0 {
            p.read_transport(&b[ihl..end]);
        }
        Some(p)
    }

    fn from_ipv6(b: &[u8]) -> Option<PacketFields> {
        if b.len() < 40 {
            return None;
        }
        let payload_len = usize::from(u16::from_be_bytes([b[4], b[5]]));
        // Payload Length 0: a jumbogram (RFC 2675); take the buffer.
        let end = if payload_len == 0 {
            b.len()
        } else {
            (40 + payload_len).min(b.len())
        };
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src.copy_from_slice(&b[8..24]);
        dst.copy_from_slice(&b[24..40]);
        let (nh, off, first_fragment) = ipv6_upper_layer(b, end)?;
        let mut p = PacketFields {
            version: 6,
            src: IpAddr::V6(Ipv6Addr::from(src)),
            dst: IpAddr::V6(Ipv6Addr::from(dst)),
            protocol: nh,
            src_port: None,
            dst_port: None,
            tos_tc: (b[0] << 4) | (b[1] >> 4),
            spi: None,
            flow_label: Some(
                (u32::from(b[1] & 0x0f) << 16) | (u32::from(b[2]) << 8) | u32::from(b[3]),
            ),
        };
        if first_fragment {
            p.read_transport(&b[off..end]);
        }
        Some(p)
    }

    fn read_transport(&mut self, l4: &[u8]) {
        let u16_at = |i: usize| u16::from_be_bytes([l4[i], l4[i + 1]]);
        let u32_at = |i: usize| u32::from_be_bytes([l4[i], l4[i + 1], l4[i + 2], l4[i + 3]]);
        match self.protocol {
            p if protocol_has_ports(p) && l4.len() >= 4 => {
                self.src_port = Some(u16_at(0));
                self.dst_port = Some(u16_at(2));
            }
            50 if l4.len() >= 4 => self.spi = Some(u32_at(0)),
            51 if l4.len() >= 8 => self.spi = Some(u32_at(4)),
            _ => {}
        }
    }

    /// (UE address, UE port, remote address, remote port) for a packet going `dir`.
    fn sides(&self, dir: Direction) -> (IpAddr, Option<u16>, IpAddr, Option<u16>) {
        match dir {
            Direction::Uplink => (self.src, self.src_port, self.dst, self.dst_port),
            Direction::Downlink => (self.dst, self.dst_port, self.src, self.src_port),
        }
    }
}

fn ip_bytes(ip: &IpAddr) -> ([u8; 16], usize) {
    let mut out = [0u8; 16];
    match ip {
        IpAddr::V4(a) => {
            out[..4].copy_from_slice(&a.octets());
            (out, 4)
        }
        IpAddr::V6(a) => (a.octets(), 16),
    }
}

fn mask_bytes(len: u8) -> [u8; 16] {
    let mut m = [0u8; 16];
    let len = usize::from(len.min(128));
    for (i, byte) in m.iter_mut().enumerate() {
        let bits = len.saturating_sub(i * 8).min(8);
        *byte = if bits == 0 { 0 } else { 0xffu8 << (8 - bits) };
    }
    m
}

#[cfg(test)]
mod tests {

    #[test]
    fn parse_bytes_kept_gives_what_parse_gives() {
        let texts: [&[u8]; 3] = [
            b"permit out ip from any to assigned",
            b"permit out 17 from 10.0.0.0/8 1000-2000 to assigned 53",
            b"permit out 17 from 10.0.0.0/8 to assigned 70000",
        ];
        for _ in 0..2 {
            for t in texts {
                let text = std::str::from_utf8(t).unwrap();
                assert_eq!(
                    FlowDescription::parse_bytes(t),
                    FlowDescription::parse(text)
                );
            }
        }
        assert!(FlowDescription::parse_bytes(texts[2]).is_err());
        let long = format!("permit out ip from any to assigned{}", " ".repeat(300));
        assert_eq!(
            FlowDescription::parse_bytes(long.as_bytes()),
            FlowDescription::parse(&long)
        );
    }
    use super::*;
    use pfcp::ie::Value;

    fn fd(text: &str) -> FlowDescription {
        FlowDescription::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn rule(text: &str) -> SdfRule {
        SdfRule::from_flow_description(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn err(text: &str) -> SdfError {
        match FlowDescription::parse(text) {
            Ok(f) => panic!("{text}: parsed as {f:?}"),
            Err(e) => e,
        }
    }

    fn prefix(s: &str) -> Address {
        let (a, l) = s.split_once('/').unwrap();
        Address::Prefix(IpPrefix::new(a.parse().unwrap(), l.parse().unwrap()).unwrap())
    }

    fn ports(list: &[(u16, u16)]) -> Vec<PortRange> {
        list.iter().map(|&(lo, hi)| PortRange { lo, hi }).collect()
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// A packet's fields, as a test states them.
    fn pkt(
        src: &str,
        dst: &str,
        protocol: u8,
        sport: Option<u16>,
        dport: Option<u16>,
    ) -> PacketFields {
        let (src, dst) = (ip(src), ip(dst));
        PacketFields {
            version: if src.is_ipv4() { 4 } else { 6 },
            src,
            dst,
            protocol,
            src_port: sport,
            dst_port: dport,
            tos_tc: 0,
            spi: None,
            flow_label: if src.is_ipv4() { None } else { Some(0) },
        }
    }

    use Direction::{Downlink as DL, Uplink as UL};

    // ----- parsing: every Flow Description found in ../shared/interop/pcaps -------------

    /// All distinct Flow Descriptions in the interop captures (`tshark -Y pfcp.flow_desc`):
    /// Open5GS 5GC (roaming HR/LBO, srsENB) and Open5GS 4G CUPS (testcups).
    const CAPTURED: [&str; 9] = [
        "permit out 58 from ff02::2/128 to assigned",
        "permit out ip from 10.45.0.1 to any",
        "permit out ip from cafe::1 to any",
        "permit out udp from any 1-65535 to 10.200.136.98/24 23455",
        "permit out udp from any 1-65535 to 10.200.136.98/32 23454",
        "permit out udp from any 1-65535 to 10.200.136.98/32 23455",
        "permit out udp from any 50020 to 10.200.136.98/32 1-65535",
        "permit out udp from any 50021 to 10.200.136.98/32 1-65535",
        // The default rule Open5GS and free5GC SMFs install (not in these captures'
        // SDF IEs, but the form the brief names).
        "permit out ip from any to assigned",
    ];

    #[test]
    fn captured_flow_descriptions_parse() {
        for text in CAPTURED {
            let f = fd(text);
            // The canonical text parses back to the same value.
            assert_eq!(fd(&f.to_string()), f, "{text}");
            assert_eq!(
                SdfRule::from_flow_description(text)
                    .unwrap()
                    .port_range_pairs(),
                1
            );
        }
        assert_eq!(
            fd(CAPTURED[0]),
            FlowDescription {
                protocol: Some(58),
                remote: Endpoint {
                    address: prefix("ff02::2/128"),
                    ..Endpoint::ANY
                },
                ue: Endpoint {
                    address: Address::Assigned,
                    ..Endpoint::ANY
                },
                inbound: false,
            }
        );
        assert_eq!(
            fd(CAPTURED[1]),
            FlowDescription {
                protocol: None,
                remote: Endpoint {
                    address: prefix("10.45.0.1/32"),
                    ..Endpoint::ANY
                },
                ue: Endpoint::ANY,
                inbound: false,
            }
        );
        assert_eq!(fd(CAPTURED[2]).remote.address, prefix("cafe::1/128"));
        // Host bits beyond /24 are cleared.
        let f = fd(CAPTURED[3]);
        assert_eq!(f.protocol, Some(17));
        assert_eq!(f.remote.ports, ports(&[(1, 65535)]));
        assert_eq!(f.ue.address, prefix("10.200.136.0/24"));
        assert_eq!(f.ue.ports, ports(&[(23455, 23455)]));
        assert_eq!(
            f.to_string(),
            "permit out 17 from any 1-65535 to 10.200.136.0/24 23455"
        );
        let f = fd(CAPTURED[6]);
        assert_eq!(f.remote.ports, ports(&[(50020, 50020)]));
        assert_eq!(f.ue.address, prefix("10.200.136.98/32"));
        assert_eq!(f.ue.ports, ports(&[(1, 65535)]));
        assert!(fd(CAPTURED[8]).uses_assigned());
        assert_eq!(fd(CAPTURED[8]).ip_version(), None);
    }

    /// SDF Filter IE values (octets after Type and Length) as captured.
    #[test]
    fn captured_sdf_filter_ies() {
        // open5gs-5g-roaming-hr.pcapng frame 1673.
        let rs = b"\x01\x00\x00\x2apermit out 58 from ff02::2/128 to assigned";
        // open5gs-testcups-4g-endmarker.pcapng frame 502.
        let v4 = b"\x01\x00\x00\x23permit out ip from 10.45.0.1 to any";
        let v6 = b"\x01\x00\x00\x21permit out ip from cafe::1 to any";
        for (bytes, text) in [
            (&rs[..], CAPTURED[0]),
            (&v4[..], CAPTURED[1]),
            (&v6[..], CAPTURED[2]),
        ] {
            let ie = pfcp::ie::SdfFilter::decode(bytes).unwrap();
            let r = SdfRule::from_ie(&ie).unwrap();
            assert_eq!(r.flow, Some(fd(text)));
            assert_eq!(
                (r.tos_traffic_class, r.spi, r.flow_label, r.filter_id),
                (None, None, None, None)
            );
        }
    }

    #[test]
    fn ie_parts() {
        // FD + TTC + SPI + FL + BID with SDF Filter ID.
        let mut v = vec![0x1f, 0x00, 0x00, 0x0e];
        v.extend_from_slice(b"permit out 50 from 2001:db8::/32 to assigned");
        v[3] = (v.len() - 4) as u8;
        v.extend_from_slice(&[0xb8, 0xfc]); // DSCP EF, mask ignoring ECN
        v.extend_from_slice(&0x1234_5678u32.to_be_bytes());
        v.extend_from_slice(&[0xf1, 0x23, 0x45]); // spare bits set: ignored
        v.extend_from_slice(&7u32.to_be_bytes());
        let ie = pfcp::ie::SdfFilter::decode(&v).unwrap();
        let r = SdfRule::from_ie(&ie).unwrap();
        assert_eq!(
            r.tos_traffic_class,
            Some(TosTrafficClass {
                value: 0xb8,
                mask: 0xfc
            })
        );
        assert_eq!(r.spi, Some(0x1234_5678));
        assert_eq!(r.flow_label, Some(0x12345));
        assert_eq!(r.filter_id, Some(7));
        assert!(r.uses_assigned() && !r.is_reference_only());

        // Only an SDF Filter ID: a reference to a bidirectional filter.
        let ie = pfcp::ie::SdfFilter::decode(&[0x10, 0, 0, 0, 0, 9]).unwrap();
        assert!(SdfRule::from_ie(&ie).unwrap().is_reference_only());

        // Nothing at all.
        let ie = pfcp::ie::SdfFilter::decode(&[0x00, 0x00]).unwrap();
        let e = SdfRule::from_ie(&ie).unwrap_err();
        assert_eq!(e.kind, SdfErrorKind::EmptyFilter);
        assert_eq!(
            e.to_string(),
            "SDF Filter has none of Flow Description, ToS/Traffic Class, \
             Security Parameter Index, Flow Label, SDF Filter ID"
        );

        // Flow Label with an IPv4 rule can never match.
        let ie = pfcp::ie::SdfFilter {
            flow_description: Some(b"permit out ip from 10.0.0.0/8 to assigned".to_vec()),
            flow_label: Some(1),
            ..Default::default()
        };
        assert_eq!(
            SdfRule::from_ie(&ie).unwrap_err().kind,
            SdfErrorKind::FlowLabelWithIpv4
        );

        // Not ASCII.
        let ie = pfcp::ie::SdfFilter {
            flow_description: Some(b"permit out ip from any to \xff".to_vec()),
            ..Default::default()
        };
        let e = SdfRule::from_ie(&ie).unwrap_err();
        assert_eq!((e.kind, e.position), (SdfErrorKind::NotAscii, 26));
    }

    #[test]
    fn accepted_variants() {
        // Keywords in any case, several spaces, tabs, trailing NUL.
        assert_eq!(
            fd("PERMIT  Out\tIP from any to ASSIGNED\0"),
            fd("permit out ip from any to assigned")
        );
        assert_eq!(fd("permit out tcp from any to any").protocol, Some(6));
        assert_eq!(fd("permit out ICMPv6 from any to any").protocol, Some(58));
        assert_eq!(fd("permit out 255 from any to any").protocol, Some(255));
        assert_eq!(fd("permit out 0 from any to any").protocol, Some(0));
        // Port lists: merged and sorted; a list may go on after ", ".
        let f =
            fd("permit out 6 from any 443,80,1000-2000,1500-2500,2501 to assigned 5060, 7000-7001");
        assert_eq!(f.remote.ports, ports(&[(80, 80), (443, 443), (1000, 2501)]));
        assert_eq!(f.ue.ports, ports(&[(5060, 5060), (7000, 7001)]));
        // Negation attached or as its own token.
        let f = fd("permit out ip from !10.0.0.0/8 to ! 10.45.0.0/16");
        assert!(f.remote.negated && f.ue.negated);
        assert_eq!(f.ue.address, prefix("10.45.0.0/16"));
        // /0 fixes the IP version.
        assert_eq!(
            fd("permit out ip from ::/0 to assigned").ip_version(),
            Some(6)
        );
        // IPv4-mapped IPv6 is IPv6.
        assert_eq!(
            fd("permit out ip from ::ffff:10.0.0.1 to any").ip_version(),
            Some(6)
        );
        // Ports with "ip": the ports of any protocol that has them.
        assert_eq!(fd("permit out ip from any 53 to any").protocol, None);
    }

    /// Direction `in` (free5GC's SMF): parsed, printed back as sent, matches no packet
    /// of either direction, refused by `require_out`.
    #[test]
    fn inbound_flow_descriptions_match_nothing() {
        let text = "permit in ip from any to assigned";
        let f = fd(text);
        assert!(f.inbound);
        assert_eq!(f.to_string(), "permit in ip from any to assigned");
        assert_eq!(fd(&f.to_string()), f);
        let rule = SdfRule::from_flow_description(text).unwrap();
        let out = SdfRule::from_flow_description("permit out ip from any to assigned").unwrap();
        let up = pkt("10.45.0.2", "198.51.100.7", 17, Some(4000), Some(53));
        let down = pkt("198.51.100.7", "10.45.0.2", 17, Some(53), Some(4000));
        for (p, dir) in [(&up, UL), (&down, DL), (&up, DL), (&down, UL)] {
            assert!(out.matches(p, dir), "{dir:?}");
            assert!(!rule.matches(p, dir), "{dir:?}");
        }
        let e = rule.require_out().unwrap_err();
        assert_eq!((e.kind, e.token.as_str()), (SdfErrorKind::Direction, "in"));
        assert!(out.require_out().is_ok());
    }

    #[test]
    fn rejected_flow_descriptions() {
        use SdfErrorKind as K;
        let cases: &[(&str, SdfErrorKind, usize, &str)] = &[
            ("", K::Missing("the action \"permit\""), 0, ""),
            ("deny out ip from any to assigned", K::Action, 0, "deny"),
            (
                "permit both ip from any to assigned",
                K::Direction,
                7,
                "both",
            ),
            ("permit out 256 from any to any", K::Protocol, 11, "256"),
            ("permit out -1 from any to any", K::Protocol, 11, "-1"),
            ("permit out foo from any to any", K::Protocol, 11, "foo"),
            ("permit out ip to any", K::Expected("\"from\""), 14, "to"),
            ("permit out ip from any", K::Missing("\"to\""), 22, ""),
            (
                "permit out ip from any to",
                K::Missing("the destination address"),
                25,
                "",
            ),
            (
                "permit out ip from 10.0.0.256 to any",
                K::Address,
                19,
                "10.0.0.256",
            ),
            (
                "permit out ip from 010.0.0.1 to any",
                K::Address,
                19,
                "010.0.0.1",
            ),
            (
                "permit out ip from fe80::1%eth0 to any",
                K::Address,
                19,
                "fe80::1%eth0",
            ),
            ("permit out ip from host to any", K::Address, 19, "host"),
            (
                "permit out ip from 10.0.0.0/33 to any",
                K::PrefixLength,
                19,
                "10.0.0.0/33",
            ),
            (
                "permit out ip from ::/129 to any",
                K::PrefixLength,
                19,
                "::/129",
            ),
            (
                "permit out ip from 10.0.0.0/ to any",
                K::PrefixLength,
                19,
                "10.0.0.0/",
            ),
            (
                "permit out ip from 10.0.0.0/255.0.0.0 to any",
                K::PrefixLength,
                19,
                "10.0.0.0/255.0.0.0",
            ),
            (
                "permit out ip from assigned to any",
                K::AssignedAsSource,
                19,
                "assigned",
            ),
            (
                "permit out ip from !any to assigned",
                K::NegatedKeyword,
                20,
                "any",
            ),
            (
                "permit out ip from any to !assigned",
                K::NegatedKeyword,
                27,
                "assigned",
            ),
            (
                "permit out ip from 10.0.0.1 to 2001:db8::1",
                K::MixedVersions,
                31,
                "2001:db8::1",
            ),
            ("permit out 17 from any 65536 to any", K::Port, 23, "65536"),
            (
                "permit out 17 from any 80-79 to any",
                K::PortRange,
                23,
                "80-79",
            ),
            (
                "permit out 17 from any 80,,81 to any",
                K::Port,
                26,
                "80,,81",
            ),
            ("permit out 17 from any 80- to any", K::Port, 23, "80-"),
            ("permit out 17 from any 80, to any", K::Port, 25, "80,"),
            (
                "permit out 17 from any 80 81 to any",
                K::Expected("\"to\""),
                26,
                "81",
            ),
            (
                "permit out 1 from any 80 to any",
                K::PortsWithoutPorts { protocol: 1 },
                22,
                "80",
            ),
            (
                "permit out 58 from any to assigned 1-2,3",
                K::PortsWithoutPorts { protocol: 58 },
                35,
                "1-2,3",
            ),
            (
                "permit out ip from any to assigned frag",
                K::OptionNotAllowed,
                35,
                "frag",
            ),
            (
                "permit out 6 from any to assigned 80 setup",
                K::OptionNotAllowed,
                37,
                "setup",
            ),
            (
                "permit out 6 from any to any tcpflags syn,!ack",
                K::OptionNotAllowed,
                29,
                "tcpflags",
            ),
            (
                "permit out 1 from any to any icmptypes 8",
                K::OptionNotAllowed,
                29,
                "icmptypes",
            ),
            (
                "permit out ip from any to any ipoptions ssrr",
                K::OptionNotAllowed,
                30,
                "ipoptions",
            ),
            (
                "permit out 6 from any to any established",
                K::OptionNotAllowed,
                29,
                "established",
            ),
            (
                "permit out 6 from any to any tcpoptions mss",
                K::OptionNotAllowed,
                29,
                "tcpoptions",
            ),
            (
                "permit out ip from any to any extra",
                K::Trailing,
                30,
                "extra",
            ),
            ("permit out ip from any to any\n\u{7}", K::NotAscii, 30, ""),
        ];
        for &(text, kind, position, token) in cases {
            let e = err(text);
            assert_eq!(
                (e.kind, e.position, e.token.as_str()),
                (kind, position, token),
                "{text:?}: {e}"
            );
        }
        let e = err("deny out ip from any to assigned");
        assert_eq!(
            e.to_string(),
            "action must be \"permit\" (TS 29.212 clause 5.4.2) (\"deny\" at byte 0)"
        );
        let e = err("permit out ip from any");
        assert_eq!(
            e.to_string(),
            "Flow Description ends where \"to\" was expected (at byte 22)"
        );
        // Too many port items; long tokens are cut in the error.
        let many: Vec<String> = (1..=65).map(|p| p.to_string()).collect();
        let e = err(&format!("permit out 6 from any {} to any", many.join(",")));
        assert_eq!((e.kind, e.token.as_str()), (K::TooManyPorts, "65"));
        let long = format!("permit out ip from {} to any", "a".repeat(1000));
        assert_eq!(err(&long).token.len(), MAX_TOKEN_IN_ERROR);
    }

    // ----- packet fields ------------------------------------------------------------

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn fields_of_captured_packets() {
        // open5gs-testcups-4g-endmarker.pcapng frame 73: Router Solicitation from the UE.
        let rs = hex("6000000000083aff fe800000000000000000000000000002
             ff020000000000000000000000000002 85007d3500000000");
        let p = PacketFields::from_ip(&rs).unwrap();
        assert_eq!(
            p,
            PacketFields {
                tos_tc: 0,
                ..pkt("fe80::2", "ff02::2", 58, None, None)
            }
        );
        // Open5GS's uplink PDR catches it; "assigned" is not matched (TS 29.212)...
        let r = rule(CAPTURED[0]);
        assert!(r.matches(&p, UL));
        assert!(!r.matches(&p, DL));
        // ...whereas checking "assigned" against the UE's prefix does not match a
        // link-local source.
        let ue = UeAddresses {
            ipv4: None,
            ipv6: Some((ip("cafe::").to_v6(), 64)),
        };
        assert!(!r.matches_with_ue(&p, UL, &ue));

        // Frame 75: ICMP echo request 10.45.0.2 -> 10.45.0.1.
        let echo4 = hex("4500001cabd70000ff01fbac0a2d00020a2d0001 08000a9ffb1ef241");
        let p = PacketFields::from_ip(&echo4).unwrap();
        assert_eq!(p, pkt("10.45.0.2", "10.45.0.1", 1, None, None));
        // "permit out ip from 10.45.0.1 to any": remote is 10.45.0.1.
        assert!(rule(CAPTURED[1]).matches(&p, UL));
        assert!(!rule(CAPTURED[1]).matches(&p, DL));
        assert!(!rule(CAPTURED[2]).matches(&p, UL));

        // Frame 77: ICMPv6 echo request cafe::2 -> cafe::1, flow label 1.
        let echo6 = hex("6000000100083aff cafe0000000000000000000000000002
             cafe0000000000000000000000000001 8000bf3146e1e3a9");
        let p = PacketFields::from_ip(&echo6).unwrap();
        assert_eq!(p.flow_label, Some(1));
        assert_eq!(
            (p.protocol, p.src, p.dst),
            (58, ip("cafe::2"), ip("cafe::1"))
        );
        assert!(rule(CAPTURED[2]).matches(&p, UL));
        assert!(!rule(CAPTURED[1]).matches(&p, UL));

        // open5gs-volte-gtpu.pcapng frame 17: first fragment of a SIP/UDP datagram
        // 192.168.101.2:5060 -> 10.4.128.21:5060 (cut after 48 octets).
        let first = hex(
            "450005dcdfc62000ff110686c0a865020a04801513c413c40655861e5349502f322e3020
             323030204f4b0d0a5669613a",
        );
        let p = PacketFields::from_ip(&first).unwrap();
        assert_eq!(
            p,
            pkt("192.168.101.2", "10.4.128.21", 17, Some(5060), Some(5060))
        );
        // Frame 13: a later fragment (offset 185 * 8) of the same kind: no ports.
        let later = hex(
            "450000a1dfc600b9ff112b08c0a865020a0480153a2a206e61636b20706c690d0a613d
             727463702d66623a2a2063636d",
        );
        let p2 = PacketFields::from_ip(&later).unwrap();
        assert_eq!(p2, pkt("192.168.101.2", "10.4.128.21", 17, None, None));
        let sip = rule("permit out 17 from 192.168.101.0/24 5060 to assigned");
        assert!(sip.matches(&p, DL));
        assert!(
            !sip.matches(&p2, DL),
            "a non-first fragment never matches a rule with ports"
        );
        assert!(rule("permit out 17 from 192.168.101.0/24 to assigned").matches(&p2, DL));
    }

    /// An IPv4 header (no options) followed by `l4`.
    fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, tos: u8, frag: u16, l4: &[u8]) -> Vec<u8> {
        let mut b = vec![0x45, tos];
        b.extend_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
        b.extend_from_slice(&[0, 1]);
        b.extend_from_slice(&frag.to_be_bytes());
        b.extend_from_slice(&[64, proto, 0, 0]);
        b.extend_from_slice(&src);
        b.extend_from_slice(&dst);
        b.extend_from_slice(l4);
        b
    }

    /// An IPv6 header followed by `rest` (extension headers and upper layer).
    fn ipv6(src: &str, dst: &str, nh: u8, tc: u8, label: u32, rest: &[u8]) -> Vec<u8> {
        let first = (6u32 << 28) | (u32::from(tc) << 20) | label;
        let mut b = first.to_be_bytes().to_vec();
        b.extend_from_slice(&(rest.len() as u16).to_be_bytes());
        b.extend_from_slice(&[nh, 64]);
        b.extend_from_slice(&ip(src).to_v6().octets());
        b.extend_from_slice(&ip(dst).to_v6().octets());
        b.extend_from_slice(rest);
        b
    }

    trait V6 {
        fn to_v6(self) -> Ipv6Addr;
    }
    impl V6 for IpAddr {
        fn to_v6(self) -> Ipv6Addr {
            match self {
                IpAddr::V6(a) => a,
                IpAddr::V4(a) => a.to_ipv6_mapped(),
            }
        }
    }

    const UDP_1234_53: [u8; 8] = [0x04, 0xd2, 0x00, 0x35, 0, 8, 0, 0];

    #[test]
    fn fields_ipv4() {
        let b = ipv4([10, 45, 0, 2], [8, 8, 8, 8], 17, 0xb9, 0x4000, &UDP_1234_53);
        let p = PacketFields::from_ip(&b).unwrap();
        assert_eq!(
            p,
            PacketFields {
                tos_tc: 0xb9,
                ..pkt("10.45.0.2", "8.8.8.8", 17, Some(1234), Some(53))
            }
        );
        // Ethernet padding after Total Length is ignored; a short buffer is not.
        let mut padded = b.clone();
        padded.extend_from_slice(&[0xee; 10]);
        assert_eq!(PacketFields::from_ip(&padded), Some(p));
        assert_eq!(PacketFields::from_ip(&b[..19]), None);
        // Transport cut short: no ports.
        assert_eq!(PacketFields::from_ip(&b[..22]).unwrap().src_port, None);
        // Options (IHL 6) are skipped.
        let mut opt = b.clone();
        opt[0] = 0x46;
        opt[3] += 4;
        opt.splice(20..20, [1, 1, 1, 0]);
        assert_eq!(PacketFields::from_ip(&opt).unwrap().dst_port, Some(53));
        // Bad IHL, Total Length below header, wrong version.
        let mut bad = b.clone();
        bad[0] = 0x44;
        assert_eq!(PacketFields::from_ip(&bad), None);
        let mut bad = b.clone();
        bad[2..4].copy_from_slice(&[0, 19]);
        assert_eq!(PacketFields::from_ip(&bad), None);
        assert_eq!(PacketFields::from_ip(&[0x55; 40]), None);
        assert_eq!(PacketFields::from_ip(&[]), None);
        // ESP: SPI; AH: SPI at offset 4.
        let esp = ipv4(
            [1, 1, 1, 1],
            [2, 2, 2, 2],
            50,
            0,
            0,
            &[0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 1],
        );
        assert_eq!(PacketFields::from_ip(&esp).unwrap().spi, Some(0xdead_beef));
        let ah = ipv4(
            [1, 1, 1, 1],
            [2, 2, 2, 2],
            51,
            0,
            0,
            &[6, 4, 0, 0, 0, 0, 0, 9, 0, 0, 0, 1],
        );
        let p = PacketFields::from_ip(&ah).unwrap();
        assert_eq!((p.protocol, p.spi, p.src_port), (51, Some(9), None));
        // A non-first ESP fragment has no SPI.
        let esp_frag = ipv4(
            [1, 1, 1, 1],
            [2, 2, 2, 2],
            50,
            0,
            0x0001,
            &[0xde, 0xad, 0xbe, 0xef],
        );
        assert_eq!(PacketFields::from_ip(&esp_frag).unwrap().spi, None);
    }

    #[test]
    fn fields_ipv6() {
        let udp = ipv6(
            "2001:db8::2",
            "2001:db8:1::1",
            17,
            0x2e,
            0xabcde,
            &UDP_1234_53,
        );
        let p = PacketFields::from_ip(&udp).unwrap();
        assert_eq!(
            p,
            PacketFields {
                tos_tc: 0x2e,
                flow_label: Some(0xabcde),
                ..pkt("2001:db8::2", "2001:db8:1::1", 17, Some(1234), Some(53))
            }
        );
        // Hop-by-Hop (8 octets) + Destination Options (16) + Fragment (offset 0) + UDP.
        let mut chain = vec![60, 0, 1, 4, 0, 0, 0, 0];
        chain.extend_from_slice(&[44, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        chain.extend_from_slice(&[17, 0, 0x00, 0x01, 0, 0, 0, 7]);
        chain.extend_from_slice(&UDP_1234_53);
        let b = ipv6("2001:db8::2", "2001:db8::1", 0, 0, 0, &chain);
        let p = PacketFields::from_ip(&b).unwrap();
        assert_eq!(
            (p.protocol, p.src_port, p.dst_port),
            (17, Some(1234), Some(53))
        );
        // Same with a non-zero fragment offset: protocol known, no ports.
        let mut later = chain.clone();
        later[26..28].copy_from_slice(&[0x00, 0x09]); // offset 1, M=1
        let b = ipv6("2001:db8::2", "2001:db8::1", 0, 0, 0, &later);
        let p = PacketFields::from_ip(&b).unwrap();
        assert_eq!((p.protocol, p.src_port, p.dst_port), (17, None, None));
        // Truncated extension header chain: not classified.
        let b = ipv6("2001:db8::2", "2001:db8::1", 0, 0, 0, &chain[..20]);
        assert_eq!(PacketFields::from_ip(&b), None);
        // A chain longer than the bound: not classified.
        let chain_of = |n: usize| {
            let mut c = Vec::new();
            for i in 0..n {
                c.extend_from_slice(&[if i + 1 < n { 60 } else { 17 }, 0, 1, 4, 0, 0, 0, 0]);
            }
            c.extend_from_slice(&UDP_1234_53);
            ipv6("::1", "::2", 60, 0, 0, &c)
        };
        let b = chain_of(MAX_IPV6_EXTENSION_HEADERS);
        assert_eq!(PacketFields::from_ip(&b).unwrap().dst_port, Some(53));
        assert_eq!(
            PacketFields::from_ip(&chain_of(MAX_IPV6_EXTENSION_HEADERS + 1)),
            None
        );
        // ESP after a Routing header: SPI.
        let mut esp = vec![50, 0, 0, 0, 0, 0, 0, 0];
        esp.extend_from_slice(&[0, 0, 0x10, 0x01, 0, 0, 0, 1]);
        let b = ipv6("::1", "::2", 43, 0, 0, &esp);
        let p = PacketFields::from_ip(&b).unwrap();
        assert_eq!((p.protocol, p.spi), (50, Some(0x1001)));
        // Header shorter than 40 octets.
        assert_eq!(PacketFields::from_ip(&udp[..39]), None);
    }

    // ----- matching -----------------------------------------------------------------

    #[test]
    fn direction_swaps_sides() {
        // Downlink-written: remote 203.0.113.0/24 port 443, UE port range 40000-40100.
        let r = rule("permit out 6 from 203.0.113.0/24 443 to assigned 40000-40100");
        let up = pkt("10.45.0.2", "203.0.113.7", 6, Some(40050), Some(443));
        let down = pkt("203.0.113.7", "10.45.0.2", 6, Some(443), Some(40050));
        assert!(r.matches(&up, UL));
        assert!(r.matches(&down, DL));
        assert!(!r.matches(&up, DL));
        assert!(!r.matches(&down, UL));
        // Ports at the range ends and just outside.
        for (port, ok) in [(40000, true), (40100, true), (39999, false), (40101, false)] {
            let p = pkt("203.0.113.7", "10.45.0.2", 6, Some(443), Some(port));
            assert_eq!(r.matches(&p, DL), ok, "{port}");
        }
        // Wrong protocol, wrong remote port, remote outside the prefix.
        assert!(!r.matches(
            &pkt("203.0.113.7", "10.45.0.2", 17, Some(443), Some(40050)),
            DL
        ));
        assert!(!r.matches(
            &pkt("203.0.113.7", "10.45.0.2", 6, Some(80), Some(40050)),
            DL
        ));
        assert!(!r.matches(
            &pkt("203.0.114.7", "10.45.0.2", 6, Some(443), Some(40050)),
            DL
        ));

        // The same for IPv6.
        let r = rule("permit out 17 from 2001:db8:53::/48 53 to assigned");
        let up = pkt("2001:db8:e::1", "2001:db8:53::53", 17, Some(5353), Some(53));
        let down = pkt("2001:db8:53::53", "2001:db8:e::1", 17, Some(53), Some(5353));
        assert!(r.matches(&up, UL) && r.matches(&down, DL));
        assert!(!r.matches(&up, DL) && !r.matches(&down, UL));
    }

    #[test]
    fn ip_versions() {
        let v4 = pkt("10.0.0.1", "10.0.0.2", 6, Some(1), Some(2));
        let v6 = pkt("2001:db8::1", "2001:db8::2", 6, Some(1), Some(2));
        let any = rule("permit out ip from any to assigned");
        assert!(any.matches(&v4, UL) && any.matches(&v6, UL));
        let only4 = rule("permit out ip from 0.0.0.0/0 to assigned");
        assert!(only4.matches(&v4, UL) && !only4.matches(&v6, UL));
        let only6 = rule("permit out ip from any to ::/0");
        assert!(!only6.matches(&v4, DL) && only6.matches(&v6, DL));
        // A negated IPv4 address still needs an IPv4 packet.
        let not4 = rule("permit out ip from !192.0.2.0/24 to any");
        assert!(not4.matches(&v4, DL) && !not4.matches(&v6, DL));
    }

    #[test]
    fn negation_and_lists() {
        let r = rule("permit out 17 from !10.0.0.0/8 53,123,5000-5010 to any");
        let from = |src: &str, port| pkt(src, "100.64.0.1", 17, Some(port), Some(9999));
        assert!(r.matches(&from("192.0.2.1", 53), DL));
        assert!(r.matches(&from("192.0.2.1", 5005), DL));
        assert!(!r.matches(&from("10.1.2.3", 53), DL), "negated address");
        assert!(!r.matches(&from("192.0.2.1", 54), DL));
        // Ports with "ip": packets without ports never match.
        let r = rule("permit out ip from any to assigned 0-65535");
        assert!(r.matches(&pkt("1.1.1.1", "10.0.0.1", 17, Some(1), Some(0)), DL));
        assert!(!r.matches(&pkt("1.1.1.1", "10.0.0.1", 1, None, None), DL));
    }

    #[test]
    fn tos_spi_flow_label() {
        let mut p = pkt("2001:db8::1", "2001:db8::2", 50, None, None);
        p.tos_tc = 0xb9; // DSCP 46 (EF), ECN 01
        p.spi = Some(0x100);
        p.flow_label = Some(0xabcde);
        let with = |tos: Option<u16>, spi: Option<u32>, fl: Option<u32>| SdfRule {
            tos_traffic_class: tos.map(TosTrafficClass::from_u16),
            spi,
            flow_label: fl,
            ..SdfRule::default()
        };
        assert!(
            with(Some(0xb8fc), None, None).matches(&p, UL),
            "DSCP EF, ECN masked out"
        );
        assert!(
            !with(Some(0xb8ff), None, None).matches(&p, UL),
            "ECN compared"
        );
        assert!(
            with(Some(0x0000), None, None).matches(&p, UL),
            "mask 0 matches all"
        );
        assert!(
            with(Some(0xffb8), None, None).matches(&p, UL),
            "value bits outside mask ignored"
        );
        assert!(with(None, Some(0x100), None).matches(&p, DL));
        assert!(!with(None, Some(0x101), None).matches(&p, DL));
        assert!(with(None, None, Some(0xabcde)).matches(&p, DL));
        assert!(!with(None, None, Some(0xabcdf)).matches(&p, DL));
        // No SPI in the packet, no flow label in IPv4.
        let q = pkt("10.0.0.1", "10.0.0.2", 17, Some(1), Some(2));
        assert!(!with(None, Some(0x100), None).matches(&q, DL));
        assert!(!with(None, None, Some(0)).matches(&q, DL));
        // All parts must match.
        let mut r = rule("permit out 50 from 2001:db8::/64 to assigned");
        r.spi = Some(0x100);
        r.tos_traffic_class = Some(TosTrafficClass {
            value: 0xb8,
            mask: 0xfc,
        });
        assert!(r.matches(&p, UL));
        r.spi = Some(1);
        assert!(!r.matches(&p, UL));
    }

    #[test]
    fn assigned_with_ue() {
        let r = rule("permit out ip from any to assigned");
        let ue = UeAddresses {
            ipv4: Some(Ipv4Addr::new(10, 45, 0, 2)),
            ipv6: Some((ip("2001:db8:e::").to_v6(), 64)),
        };
        let mine4 = pkt("10.45.0.2", "1.1.1.1", 6, Some(1), Some(2));
        let other4 = pkt("10.45.0.3", "1.1.1.1", 6, Some(1), Some(2));
        let mine6 = pkt("2001:db8:e::1234", "2001:db8::1", 6, Some(1), Some(2));
        let other6 = pkt("2001:db8:ff::1", "2001:db8::1", 6, Some(1), Some(2));
        assert!(r.matches_with_ue(&mine4, UL, &ue));
        assert!(!r.matches_with_ue(&other4, UL, &ue));
        assert!(r.matches_with_ue(&mine6, UL, &ue));
        assert!(!r.matches_with_ue(&other6, UL, &ue));
        assert!(
            r.matches(&other4, UL),
            "without the UE address, assigned matches anything"
        );
        assert!(!r.matches_with_ue(&mine6, UL, &UeAddresses::from(ip("10.45.0.2"))));
        assert!(UeAddresses::from(ip("2001:db8::1")).contains(ip("2001:db8::1")));
        // Downlink: the UE is the destination.
        let down = pkt("1.1.1.1", "10.45.0.2", 6, Some(2), Some(1));
        assert!(r.matches_with_ue(&down, DL, &ue) && !r.matches_with_ue(&down, UL, &ue));
    }

    /// xorshift64*: deterministic, no dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn pick<T: Copy>(&mut self, items: &[T]) -> T {
            items[self.below(items.len())]
        }
        fn chance(&mut self, percent: u64) -> bool {
            self.next() % 100 < percent
        }
    }

    #[test]
    fn port_range_pairs() {
        let r = rule("permit out 6 from any 80,443,8080 to assigned 1000-1999,3000");
        assert_eq!(r.port_range_pairs(), 6);
        // Adjacent ports merge into one range.
        let list: Vec<String> = (0..40).map(|i| i.to_string()).collect();
        let r = rule(&format!(
            "permit out 6 from any {} to assigned",
            list.join(",")
        ));
        assert_eq!(r.port_range_pairs(), 1);
        let r = SdfRule {
            spi: Some(5),
            ..SdfRule::default()
        };
        assert_eq!(r.port_range_pairs(), 1);
    }

    /// Arbitrary input never panics.
    #[test]
    fn robustness() {
        let mut rng = Rng(42);
        let words = [
            "permit",
            "out",
            "in",
            "ip",
            "17",
            "from",
            "to",
            "any",
            "assigned",
            "!",
            "10.0.0.1/8",
            "::1/200",
            "80,",
            ",",
            "1-2",
            "65535-0",
            "frag",
            "!any",
            "999999999999",
            "-",
            "/",
            "1.2.3.4/",
            "\u{0}",
            "é",
            "",
        ];
        for _ in 0..20000 {
            let n = rng.below(12);
            let text: Vec<&str> = (0..n).map(|_| rng.pick(&words)).collect();
            let text = text.join(if rng.chance(10) { "  " } else { " " });
            if let Ok(f) = FlowDescription::parse(&text) {
                assert_eq!(FlowDescription::parse(&f.to_string()), Ok(f));
            }
        }
        // Mutated real packets and random octets.
        let seeds = [
            ipv4([10, 0, 0, 1], [10, 0, 0, 2], 6, 0, 0, &UDP_1234_53),
            ipv6(
                "::1",
                "::2",
                0,
                0,
                0,
                &[44, 0, 0, 0, 0, 0, 0, 0, 17, 0, 0, 0, 1, 2, 3, 4, 5],
            ),
        ];
        for _ in 0..20000 {
            let mut b = seeds[rng.below(2)].clone();
            for _ in 0..rng.below(4) {
                let i = rng.below(b.len());
                b[i] = rng.next() as u8;
            }
            b.truncate(rng.below(b.len() + 1));
            let _ = PacketFields::from_ip(&b);
        }
    }

    #[test]
    fn masks() {
        assert_eq!(mask_bytes(0), [0; 16]);
        assert_eq!(mask_bytes(12)[..3], [0xff, 0xf0, 0]);
        assert_eq!(mask_bytes(128), [0xff; 16]);
    }
}
