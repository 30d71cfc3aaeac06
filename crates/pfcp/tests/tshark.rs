//! tshark as an independent decoder of our encoder's output.
//!
//! The corpus of `pfcp_samples` (every message type, every IE type the codec interprets)
//! is written to a pcap, decoded by `tshark -T json`, and for every frame:
//! - tshark must report no malformed packet and no expert item of severity note or above,
//!   except the rows of [`KNOWN`], each a place where tshark 4.0 contradicts TS 29.244
//!   (clause given; docs/pfcp-tshark-differences.md explains them);
//! - tshark's IE tree must have the IEs of ours, in the same order and nesting, with the same
//!   lengths, and for every interpreted IE type the value fields tshark shows must equal our
//!   decode (header fields too).
//!
//! Run: `cargo test -p pfcp --test tshark -- --nocapture` prints the counts. tshark comes
//! from Debian 12's `tshark` package (4.0); without it the test is skipped, unless
//! `UPF_REQUIRE_ORACLES=1`, which makes its absence a failure.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Display;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::Command;

use pfcp::ie::{self, Flags, Ie, Name};
use pfcp::Message;
use pfcp_samples as samples;

/// What tshark does at a known place.
#[derive(Debug, Clone, Copy, PartialEq)]
enum What {
    /// An exception ("Malformed Packet") while dissecting this IE.
    Malformed,
    /// An expert item whose message starts with this text.
    Expert(&'static str),
    /// A value field that is absent or differs from the clause; a trailing `*` matches a
    /// prefix.
    Field(&'static str),
}

/// A place where tshark 4.0.17 (Debian 12) contradicts TS 29.244 Rel-17; our encoding
/// follows the clause.
struct Known {
    sample: &'static str,
    ie_type: u16,
    what: What,
    clause: &'static str,
    why: &'static str,
}

const SOURCE_MASK: &str =
    "8.2.138: the mask/prefix length is one octet (its EXAMPLE 1 encodes 24 for \
     192.0.2.10/24); tshark 4.0 reads it as a 16-octet field, runs off the IE and drops the value";
const APRC: &str = "8.2.63: APRC is bit 3 of octet 5; tshark 4.0 shows that bit as APRC but tests \
     bit 4 before decoding the additional uplink/downlink rates, so it leaves them undecoded";
const RATE_VALIDITY: &str = "8.2.139: the Rate Control Status Validity Time takes octets e to \
     (e+7); tshark 4.0 declares the field as a 32-bit integer and warns when it reads the 8 octets";
const EXPONENT: &str = "8.2.84: Exponent is set as the Exponent AVP (TS 32.299, RFC 4006: \
     Integer32, signed); tshark 4.0 shows it unsigned, -2 as 4294967294";

const KNOWN: &[Known] = &[
    Known {
        sample: "heartbeat-request/source-mask",
        ie_type: ie::types::SOURCE_IP_ADDRESS,
        what: What::Malformed,
        clause: "8.2.138",
        why: SOURCE_MASK,
    },
    Known {
        sample: "heartbeat-request/source-mask",
        ie_type: ie::types::SOURCE_IP_ADDRESS,
        what: What::Field("pfcp.source_ip_address.mpl"),
        clause: "8.2.138",
        why: SOURCE_MASK,
    },
    Known {
        sample: "session-establishment-request",
        ie_type: ie::types::PACKET_RATE,
        what: What::Expert("IE data not decoded by WS yet"),
        clause: "8.2.63",
        why: APRC,
    },
    Known {
        sample: "session-establishment-request",
        ie_type: ie::types::PACKET_RATE,
        what: What::Field("pfcp.a_*"),
        clause: "8.2.63",
        why: APRC,
    },
    Known {
        sample: "session-establishment-request",
        ie_type: ie::types::MULTIPLIER,
        what: What::Field("pfcp.multiplier.exponent"),
        clause: "8.2.84",
        why: EXPONENT,
    },
    Known {
        sample: "session-modification-response",
        ie_type: ie::types::PACKET_RATE_STATUS,
        what: What::Expert("Trying to fetch an unsigned integer with length 8"),
        clause: "8.2.139",
        why: RATE_VALIDITY,
    },
    Known {
        sample: "session-deletion-response",
        ie_type: ie::types::PACKET_RATE_STATUS,
        what: What::Expert("Trying to fetch an unsigned integer with length 8"),
        clause: "8.2.139",
        why: RATE_VALIDITY,
    },
];

/// Interpreted IE types whose value tshark 4.0 does not show in any field we can compare.
/// Empty: every interpreted type gets at least one value comparison.
const NO_FIELD: &[u16] = &[];

#[test]
fn tshark_decodes_the_corpus_as_we_do() {
    let Some(tshark) = tshark() else { return };
    let corpus = samples::corpus();
    let grams = samples::datagrams(&corpus);

    let dir = std::env::temp_dir().join(format!("pfcp-tshark-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pcap = dir.join("corpus.pcap");
    write_pcap(&pcap, &grams);
    let json = run_tshark(&tshark, &pcap, &dir);
    let _ = std::fs::remove_dir_all(&dir);

    let packets = match parse_json(&json) {
        J::Arr(a) => a,
        other => panic!("tshark -T json gave no array: {other:?}"),
    };
    assert_eq!(packets.len(), grams.len(), "one frame per datagram");

    let by_name: BTreeMap<&str, &samples::Sample> = corpus.iter().map(|s| (s.name, s)).collect();
    let mut st = State::default();
    for (frame, (packet, (names, _))) in packets.iter().zip(&grams).enumerate() {
        let layers = packet
            .get("_source")
            .and_then(|s| s.get("layers"))
            .and_then(J::obj)
            .unwrap_or_else(|| panic!("frame {}: no layers", frame + 1));
        let pfcp: Vec<&[(String, J)]> = layers
            .iter()
            .filter(|(k, _)| k == "pfcp")
            .filter_map(|(_, v)| v.obj())
            .collect();
        assert_eq!(
            pfcp.len(),
            names.len(),
            "frame {}: tshark saw {} PFCP messages, we bundled {names:?}",
            frame + 1,
            pfcp.len()
        );
        expert_items(&mut st, layers, names);
        for (layer, name) in pfcp.into_iter().zip(names) {
            let bytes = &by_name[name].bytes;
            let msg = Message::parse(bytes).unwrap();
            compare_message(&mut st, name, &msg, bytes.len(), layer);
        }
    }

    report(&st);
    let stale: Vec<_> = KNOWN
        .iter()
        .enumerate()
        .filter(|(i, _)| !st.known_hit.contains(i))
        .map(|(_, k)| format!("{} IE {} {:?}", k.sample, k.ie_type, k.what))
        .collect();
    if !stale.is_empty() {
        // A newer tshark may have fixed these; not a failure of our codec.
        eprintln!("known tshark deviations not seen this run: {stale:#?}");
    }
    assert!(
        st.failures.is_empty(),
        "{} disagreement(s) with tshark:\n{}",
        st.failures.len(),
        st.failures.join("\n")
    );

    // Every interpreted IE type was checked field by field (grouped: children, order and
    // lengths).
    let mut unchecked = Vec::new();
    for (t, kind) in ie::known_ie_types() {
        if *kind == "Bytes" || NO_FIELD.contains(t) {
            continue;
        }
        let seen = if *kind == "group" {
            st.ie_seen.contains(t)
        } else {
            st.value_checks.get(t).copied().unwrap_or(0) > 0
        };
        if !seen {
            unchecked.push(format!("{t} {}", ie::ie_name(*t).unwrap_or("?")));
        }
    }
    assert!(
        unchecked.is_empty(),
        "interpreted IE types never compared with tshark: {unchecked:#?}"
    );
}

// ---------------------------------------------------------------------------------------
// Running tshark.

fn tshark() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("tshark"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        if std::env::var("UPF_REQUIRE_ORACLES").as_deref() == Ok("1") {
            panic!("tshark not installed and UPF_REQUIRE_ORACLES=1 (scripts/deps.sh installs it)");
        }
        eprintln!("tshark not installed: skipping (scripts/deps.sh installs it)");
    }
    found
}

/// Raw IP (no link header), 127.0.0.1:8805 -> 127.0.0.2:8805, one datagram per frame.
fn write_pcap(path: &std::path::Path, grams: &[(Vec<&str>, Vec<u8>)]) {
    let f = std::fs::File::create(path).unwrap();
    let mut w =
        capture::PcapWriter::new(std::io::BufWriter::new(f), capture::linktype::RAW).unwrap();
    let (a, b): (IpAddr, IpAddr) = ("127.0.0.1".parse().unwrap(), "127.0.0.2".parse().unwrap());
    for (i, (_, payload)) in grams.iter().enumerate() {
        let p = capture::ip_udp_packet(a, b, 8805, 8805, payload);
        // 2024-01-01 00:00:00 UTC, then one millisecond per frame.
        w.write(1_704_067_200_000_000 + i as u64 * 1000, &p)
            .unwrap();
    }
    use std::io::Write;
    w.into_inner().flush().unwrap();
}

fn run_tshark(tshark: &std::path::Path, pcap: &std::path::Path, dir: &std::path::Path) -> String {
    let out = Command::new(tshark)
        .arg("-r")
        .arg(pcap)
        .args(["-d", "udp.port==8805,pfcp", "-T", "json"])
        // Times print in UTC; an empty profile so local preferences cannot change the
        // dissection.
        .env("TZ", "UTC")
        .env("WIRESHARK_CONFIG_DIR", dir)
        .output()
        .expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("tshark JSON is UTF-8")
}

// ---------------------------------------------------------------------------------------
// Expert items.

// Severity values of epan/proto.h.
const PI_NOTE: u64 = 0x0040_0000;

fn known_index(sample: &str, ie_type: u16, pred: impl Fn(What) -> bool) -> Option<usize> {
    KNOWN
        .iter()
        .position(|k| k.sample == sample && k.ie_type == ie_type && pred(k.what))
}

/// Check every expert item of a frame. An item inside an IE's subtree belongs to that IE;
/// a malformed-packet layer belongs to the last IE tshark had begun.
fn expert_items(st: &mut State, layers: &[(String, J)], names: &[&'static str]) {
    let mut msg_index = 0usize;
    let mut last_ie: (usize, u16) = (0, 0);
    for (k, v) in layers {
        match (k.as_str(), v.obj()) {
            ("pfcp", Some(o)) => {
                let mut items = Vec::new();
                collect_expert(o, 0, &mut items, &mut last_ie.1);
                last_ie.0 = msg_index;
                for (ie_type, sev, text) in items {
                    expert_item(st, names[msg_index], ie_type, sev, &text);
                }
                msg_index += 1;
            }
            ("_ws.malformed", _) => {
                let sample = names[last_ie.0.min(names.len() - 1)];
                match known_index(sample, last_ie.1, |w| w == What::Malformed) {
                    Some(i) => {
                        st.known_hit.insert(i);
                    }
                    None => st.failures.push(format!(
                        "{sample}: tshark: malformed packet in IE {} ({})",
                        last_ie.1,
                        ie::ie_name(last_ie.1).unwrap_or("?")
                    )),
                }
            }
            _ => {}
        }
    }
}

fn expert_item(st: &mut State, sample: &'static str, ie_type: u16, sev: u64, text: &str) {
    if sev < PI_NOTE {
        return;
    }
    match known_index(
        sample,
        ie_type,
        |w| matches!(w, What::Expert(t) if text.starts_with(t)),
    ) {
        Some(i) => {
            st.known_hit.insert(i);
        }
        None => st.failures.push(format!(
            "{sample}: tshark expert item (severity 0x{sev:x}) in IE {ie_type} ({}): {text}",
            ie::ie_name(ie_type).unwrap_or("message")
        )),
    }
}

fn collect_expert(
    o: &[(String, J)],
    ie_type: u16,
    out: &mut Vec<(u16, u64, String)>,
    last: &mut u16,
) {
    for (k, v) in o {
        let Some(child) = v.obj() else { continue };
        if k == "_ws.expert" {
            let sev = child
                .iter()
                .find(|(k, _)| k == "_ws.expert.severity")
                .and_then(|(_, v)| v.str())
                .and_then(|s| s.parse().ok())
                .unwrap_or(u64::MAX);
            let text = child
                .iter()
                .find(|(k, _)| k == "_ws.expert.message")
                .and_then(|(_, v)| v.str())
                .unwrap_or("")
                .to_string();
            out.push((ie_type, sev, text));
        } else if let Some(t) = ie_type_of(child) {
            *last = t;
            collect_expert(child, t, out, last);
        } else {
            collect_expert(child, ie_type, out, last);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Comparing trees.

#[derive(Default)]
struct State {
    /// Every comparison made: header fields, IE type, length, child count, value fields.
    comparisons: usize,
    /// Value-field comparisons per IE type.
    value_checks: BTreeMap<u16, usize>,
    ie_seen: BTreeSet<u16>,
    messages: usize,
    ies: usize,
    known_hit: BTreeSet<usize>,
    failures: Vec<String>,
}

fn ie_type_of(o: &[(String, J)]) -> Option<u16> {
    o.iter()
        .find(|(k, _)| k == "pfcp.ie_type")
        .and_then(|(_, v)| v.str())
        .and_then(|s| s.parse().ok())
}

/// The IEs directly inside a message or grouped IE, in order.
fn child_ies(o: &[(String, J)]) -> Vec<&[(String, J)]> {
    let mut v = Vec::new();
    for (_, x) in o {
        if let Some(c) = x.obj() {
            if ie_type_of(c).is_some() {
                v.push(c);
            } else if !c.iter().any(|(k, _)| k.starts_with("pfcp.ie")) {
                // A plain subtree (flags): IEs never hide in one, but look anyway.
                v.extend(child_ies(c));
            }
        }
    }
    v
}

/// The children of one of our grouped IEs (empty for a leaf).
fn our_children(x: &Ie) -> Vec<Ie> {
    if !ie::is_grouped(x.ie_type()) {
        return vec![];
    }
    let mut b = Vec::new();
    x.encode(&mut b);
    ie::decode_ies(&b[4..], 4).unwrap()
}

fn value_len(x: &Ie) -> usize {
    let mut b = Vec::new();
    x.encode(&mut b);
    b.len() - 4
}

fn compare_message(
    st: &mut State,
    sample: &'static str,
    m: &Message,
    wire_len: usize,
    layer: &[(String, J)],
) {
    st.messages += 1;
    let h = &m.header;
    let mut c = Check {
        st,
        sample,
        path: "header".into(),
        ie_type: 0,
        node: layer,
    };
    c.uint("pfcp.version", h.version as u64);
    c.uint("pfcp.msg_type", h.message_type as u64);
    c.uint("pfcp.length", (wire_len - 4) as u64);
    c.flag("pfcp.s", h.seid.is_some());
    c.flag("pfcp.mp_flag", h.priority.is_some());
    c.flag("pfcp.fo_flag", h.follow_on);
    if let Some(seid) = h.seid {
        c.uint("pfcp.seid", seid);
    }
    c.uint("pfcp.seqno", h.sequence as u64);
    if let Some(p) = h.priority {
        c.uint("pfcp.mp", p as u64);
    }
    compare_ies(st, sample, "", &m.ies, layer);
}

fn compare_ies(
    st: &mut State,
    sample: &'static str,
    path: &str,
    ours: &[Ie],
    theirs: &[(String, J)],
) {
    let theirs = child_ies(theirs);
    st.comparisons += 1;
    if ours.len() != theirs.len() {
        st.failures.push(format!(
            "{sample}: {path}: we have {} IEs, tshark shows {}",
            ours.len(),
            theirs.len()
        ));
    }
    for (i, (x, t)) in ours.iter().zip(theirs).enumerate() {
        let name = ie::ie_name(x.ie_type()).unwrap_or("?");
        let p = format!("{path}/{name}[{i}]");
        st.comparisons += 1;
        let their_type = ie_type_of(t).unwrap_or(0);
        if their_type != x.ie_type() {
            st.failures.push(format!(
                "{sample}: {p}: tshark shows IE type {their_type} where we have {}",
                x.ie_type()
            ));
            continue;
        }
        st.ies += 1;
        st.ie_seen.insert(x.ie_type());
        let mut c = Check {
            st,
            sample,
            path: p.clone(),
            ie_type: x.ie_type(),
            node: t,
        };
        c.structural("pfcp.ie_len", value_len(x) as u64);
        if ie::is_grouped(x.ie_type()) {
            compare_ies(st, sample, &p, &our_children(x), t);
        } else {
            leaf(x, &mut c);
        }
    }
}

/// One IE's subtree in tshark's output and the checks made against it.
struct Check<'s, 'j> {
    st: &'s mut State,
    sample: &'static str,
    path: String,
    ie_type: u16,
    node: &'j [(String, J)],
}

impl Check<'_, '_> {
    /// Every value of `field` in this IE (not in its child IEs), in order.
    fn all(&self, field: &str) -> Vec<String> {
        fn walk(o: &[(String, J)], field: &str, out: &mut Vec<String>) {
            for (k, v) in o {
                match v {
                    J::Str(s) if k == field => out.push(s.clone()),
                    J::Obj(c) if ie_type_of(c).is_none() => walk(c, field, out),
                    _ => {}
                }
            }
        }
        let mut out = Vec::new();
        walk(self.node, field, &mut out);
        out
    }

    fn count(&mut self, structural: bool) {
        self.st.comparisons += 1;
        if !structural && self.ie_type != 0 {
            *self.st.value_checks.entry(self.ie_type).or_default() += 1;
        }
    }

    fn differ(&mut self, field: &str, want: &dyn Display, got: Option<&str>) {
        let hit = KNOWN.iter().position(|k| {
            k.sample == self.sample
                && k.ie_type == self.ie_type
                && match k.what {
                    What::Field(f) => match f.strip_suffix('*') {
                        Some(prefix) => field.starts_with(prefix),
                        None => f == field,
                    },
                    _ => false,
                }
        });
        match hit {
            Some(i) => {
                self.st.known_hit.insert(i);
            }
            None => self.st.failures.push(format!(
                "{}: {}: {field}: we decode {want}, tshark shows {}",
                self.sample,
                self.path,
                got.map(|g| format!("{g:?}"))
                    .unwrap_or_else(|| "nothing".into())
            )),
        }
    }

    /// Compare the `nth` value of `field` using `eq` on tshark's text.
    fn cmp_nth(
        &mut self,
        field: &str,
        nth: usize,
        want: &dyn Display,
        eq: impl Fn(&str) -> bool,
        structural: bool,
    ) {
        self.count(structural);
        let all = self.all(field);
        match all.get(nth) {
            Some(got) if eq(got) => {}
            got => {
                let got = got.cloned();
                self.differ(field, want, got.as_deref());
            }
        }
    }

    fn structural(&mut self, field: &str, want: u64) {
        self.cmp_nth(field, 0, &want, |g| parse_uint(g) == Some(want), true);
    }

    fn uint(&mut self, field: &str, want: u64) {
        self.uint_nth(field, 0, want);
    }

    fn uint_nth(&mut self, field: &str, nth: usize, want: u64) {
        self.cmp_nth(field, nth, &want, |g| parse_uint(g) == Some(want), false);
    }

    fn int(&mut self, field: &str, want: i64) {
        self.cmp_nth(
            field,
            0,
            &want,
            |g| g.parse::<i64>().ok() == Some(want),
            false,
        );
    }

    fn flag(&mut self, field: &str, want: bool) {
        let w = want as u8;
        self.cmp_nth(field, 0, &w, |g| parse_bool(g) == Some(want), false);
    }

    fn text(&mut self, field: &str, want: &str) {
        self.text_nth(field, 0, want);
    }

    fn text_nth(&mut self, field: &str, nth: usize, want: &str) {
        self.cmp_nth(field, nth, &format!("{want:?}"), |g| g == want, false);
    }

    fn ip(&mut self, field: &str, want: impl Into<IpAddr>) {
        let want = want.into();
        self.cmp_nth(
            field,
            0,
            &want,
            |g| g.parse::<IpAddr>().ok() == Some(want),
            false,
        );
    }

    fn bytes(&mut self, field: &str, want: &[u8]) {
        self.bytes_nth(field, 0, want);
    }

    fn bytes_nth(&mut self, field: &str, nth: usize, want: &[u8]) {
        let hex: String = want.iter().map(|b| format!("{b:02x}")).collect();
        self.cmp_nth(
            field,
            nth,
            &hex,
            |g| parse_hex(g).as_deref() == Some(want),
            false,
        );
    }

    /// An NTP timestamp (seconds since 1900), which tshark prints as a UTC date.
    fn time(&mut self, field: &str, ntp: u32) {
        let want = ntp_to_text(ntp);
        self.cmp_nth(field, 0, &want, |g| g == want, false);
    }

    /// Flag bits (1-based, as [`Flags`] counts them) against tshark's boolean fields.
    fn bits(&mut self, f: &Flags, table: &[(u16, &str)]) {
        for (bit, field) in table {
            if (*bit as usize) <= f.0.len() * 8 {
                self.flag(field, f.get(*bit));
            }
        }
    }

    fn mac(&mut self, field: &str, nth: usize, want: &[u8; 6]) {
        self.bytes_nth(field, nth, want);
    }
}

fn parse_uint(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "True" | "true" => Some(true),
        "0" | "False" | "false" => Some(false),
        _ => None,
    }
}

/// tshark prints FT_BYTES as "aa:bb:cc" (or without separators).
fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let h: Vec<u8> = s.bytes().filter(|c| *c != b':').collect();
    h.chunks(2)
        .map(|p| match p {
            [a, b] => u8::from_str_radix(std::str::from_utf8(&[*a, *b]).ok()?, 16).ok(),
            _ => None,
        })
        .collect()
}

/// "Jan  1, 2024 00:00:00.000000000 UTC", as tshark 4.0 prints an absolute time with TZ=UTC.
fn ntp_to_text(ntp: u32) -> String {
    let unix = ntp as i64 - 2_208_988_800;
    let (days, secs) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{} {day:>2}, {year} {:02}:{:02}:{:02}.000000000 UTC",
        MONTHS[(month - 1) as usize],
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

// ---------------------------------------------------------------------------------------
// Value fields per IE type. Field names are tshark 4.0's (`tshark -G fields`); several are
// oddly named or shared between IEs in tshark (noted where it matters), which changes
// nothing for the comparison.

/// Integer IEs shown by one field holding the whole value.
const INT_FIELDS: &[(u16, &str)] = &[
    (28, "pfcp.qer_correlation_id"),
    (29, "pfcp.precedence"),
    (32, "pfcp.time_threshold"),
    (35, "pfcp.subsequent_time_threshold"),
    (36, "pfcp.inactivity_detection_time"),
    (40, "pfcp.offending_ie"),
    (46, "pfcp.dl_data_notification_delay"),
    (52, "pfcp.sequence_number"),
    (53, "pfcp.metric"),
    (56, "pfcp.pdr_id"),
    (64, "pfcp.measurement_period"),
    (67, "pfcp.duration_measurement"),
    (71, "pfcp.quota_holding_time"),
    (74, "pfcp.time_quota"),
    (88, "pfcp.bar_id"),
    (104, "pfcp.ur_seqn"),
    (113, "pfcp.pdn_type"),
    (117, "pfcp.user_plane_inactivity_time"),
    (122, "pfcp.subsequent_time_quota"),
    (124, "pfcp.qfi_value"),
    (125, "pfcp.query_urr_reference"),
    (131, "pfcp.traffic_endpoint_id"),
    (136, "pfcp.ethertype"),
    (138, "pfcp.ethertype_filter_id"),
    (140, "pfcp.suggested_buffering_packets_count.packet_count"),
    (146, "pfcp.ethernet"),
    (148, "pfcp.event_quota"),
    (149, "pfcp.event_threshold"),
    (150, "pfcp.subsequent_event_quota"),
    (151, "pfcp.subsequent_event_threshold"),
    (157, "pfcp.averaging_window"),
    (158, "pfcp.ppi"),
    (160, "pfcp.tgpp_interface_type"),
    (170, "pfcp.mar_id"),
    (171, "pfcp.steering_functionality"),
    (172, "pfcp.steering_mode"),
    (173, "pfcp.weight"),
    (174, "pfcp.priority"),
    (181, "pfcp.validity_time_value"),
    (182, "pfcp.number_of_reports"),
    (196, "pfcp.ds_tt_port_number"),
    (197, "pfcp.nw_tt_port_number"),
    (206, "pfcp.time_domain_number_value"),
    (215, "pfcp.srr_id_value"),
    // tshark shows all three delays under the Average Packet Delay field.
    (234, "pfcp.average_packet_delay.milliseconds"),
    (235, "pfcp.average_packet_delay.milliseconds"),
    (236, "pfcp.average_packet_delay.milliseconds"),
    (246, "pfcp.minimum_wait_time.seconds"),
    (250, "pfcp.dl_data_packets_size"),
    (269, "pfcp.validity_timer"),
    (275, "pfcp.rattype"),
];

/// NTP timestamps (clause 8.2.65 and the IEs defined like it).
const TIME_FIELDS: &[(u16, &str)] = &[
    (33, "pfcp.monitoring_time"),
    (69, "pfcp.time_of_first_packet"),
    (70, "pfcp.time_of_last_packet"),
    (75, "pfcp.start_time"),
    (76, "pfcp.end_time"),
    (96, "pfcp.recovery_time_stamp"),
    (156, "pfcp.time_stamp"),
    (163, "pfcp.activation_time"),
    (164, "pfcp.deactivation_time"),
];

/// Rule IDs whose top bit tells who allocated them (FAR, QER, URR ID clauses).
const RULE_ID_FIELDS: &[(u16, &str, &str)] = &[
    (81, "pfcp.urr_id_flg", "pfcp.urr_id"),
    (82, "pfcp.urr_id_flg", "pfcp.urr_id"),
    (108, "pfcp.far_id_flg", "pfcp.far_id"),
    (109, "pfcp.qer_id_flg", "pfcp.qer_id"),
    (120, "pfcp.urr_id_flg", "pfcp.urr_id"),
];

/// Text carried as is.
const TEXT_FIELDS: &[(u16, &str)] = &[
    (24, "pfcp.application_id_str"),
    (91, "pfcp.application_instance_id_str"),
    (153, "pfcp.framed_route"),
    (155, "pfcp.framed_ipv6_route"),
];

/// Octet strings tshark shows as bytes.
const BYTES_FIELDS: &[(u16, &str)] = &[
    (106, "pfcp.predef_rules_name"),
    (107, "pfcp.predef_rules_name"),
    (232, "pfcp.data_network_access_identifier"),
];

fn flag_table(t: u16) -> Option<Vec<(u16, String)>> {
    fn named(prefix: &str, names: &[&str]) -> Vec<(u16, String)> {
        names
            .iter()
            .enumerate()
            .filter(|(_, n)| !n.is_empty())
            .map(|(i, n)| (i as u16 + 1, format!("{prefix}{n}")))
            .collect()
    }
    Some(match t {
        37 => named(
            "pfcp.reporting_triggers_flags.",
            &[
                "perio", "volth", "timth", "quhti", "start", "stopt", "droth", "liusa", "volqu",
                "timqu", "envcl", "macar", "eveth", "evequ", "ipmjl", "quvti", "reemr", "upint",
            ],
        ),
        39 => named(
            "pfcp.report_type.",
            &["dldr", "usar", "erir", "upir", "tmir", "sesr", "uisr"],
        ),
        43 => {
            // Our names, lower-cased, are tshark's but for three; PSUCC (bit 51) has no
            // field in tshark 4.0.
            ie::up_function_features::NAMES
                .iter()
                .filter(|(_, n)| *n != "PSUCC")
                .map(|(b, n)| {
                    let f = match *n {
                        "MTE" => "mte_n4".to_string(),
                        "MT_EDT" => "mtedt".to_string(),
                        "EPPPI" => "eppi".to_string(),
                        n => n.to_lowercase(),
                    };
                    (*b, format!("pfcp.up_function_features.{f}"))
                })
                .collect()
        }
        44 => named(
            "pfcp.apply_action.",
            &[
                "drop", "forw", "buff", "nocp", "dupl", "ipma", "ipmd", "dfrt", "edrt", "bdpn",
                "ddpn", "fssm", "mbsu",
            ],
        ),
        49 => named(
            "pfcp.smreq_flags.",
            &["drobu", "sndem", "qaurr", "sumpc", "rumuc"],
        ),
        50 => named("pfcp.srrsp_flags.", &["drobu"]),
        62 => named(
            "pfcp.measurement_method_flags.",
            &["durat", "volume", "event"],
        ),
        63 => {
            let mut v = named(
                "pfcp.usage_report_trigger_flags.",
                &[
                    "perio", "volth", "timth", "quhti", "start", "stopt", "droth", "", "volqu",
                    "timqu", "liusa", "", "", "envcl", "macar", "eveth", "evequ", "tebur", "ipmjl",
                    "quvti", "emrre", "upint",
                ],
            );
            v.push((8, "pfcp.usage_report_trigger.immer".into()));
            v.push((12, "pfcp.usage_report_trigger.term".into()));
            v.push((13, "pfcp.usage_report_trigger.monit".into()));
            v
        }
        89 => named(
            "pfcp.cp_function_features.",
            &[
                "load", "ovrl", "epfar", "sset", "bundl", "mpas", "ardr", "uiaur", "psucc", "rpgur",
            ],
        ),
        90 => named("pfcp.usage_information.", &["bef", "aft", "uae", "ube"]),
        // Bit 1 is MBQE; tshark names its field "fd".
        100 => named(
            "pfcp.measurement_info.",
            &[
                "fd", "inam", "radi", "istm", "mnop", "sspoc", "aspoc", "ciam",
            ],
        ),
        101 => named(
            "pfcp.node_report_type.",
            &["upfr", "uprr", "ckdr", "gpqr", "purr", "pvsrurr"],
        ),
        110 => named("pfcp.oci_flags.", &["aoci"]),
        111 => named("pfcp.assoc_rel_req.", &["sarr"]),
        123 => named("pfcp.", &["rqi_flag"]),
        137 => named("pfcp.proxying.flags.", &["arp", "ins"]),
        139 => named("pfcp.ethertype_filter_properties.flags.", &["bide"]),
        142 => named("pfcp.ethernet_pdu_session_information.flags.", &["ethi"]),
        161 => named("pfcp.srreq_flags.", &["psdbu"]),
        162 => named("pfcp.aureq_flags.", &["parps"]),
        179 => named(
            "pfcp.packet_replication_and_detection_carry_on_information.flags.",
            &["priueai", "prin19i", "prin6i", "dcaroni"],
        ),
        184 => named("pfcp.asrsp_flags.flags.", &["psrei", "uupsi"]),
        186 => named("pfcp.sereq_flags.flags.", &["resti", "sumpc"]),
        194 => named("pfcp.create_bridge_info_for_tsc.flags.", &["bii"]),
        204 => named(
            "pfcp.requested_clock_drift_control_information.flags.",
            &["rrto", "rrcr"],
        ),
        217 => named(
            "pfcp.requested_access_availability_control_information.flags.",
            &["rrca"],
        ),
        222 => named("pfcp.mptcp_control_information.flags.", &["tci"]),
        223 => named("pfcp.atsss_ll_control_information.flags.", &["lli"]),
        231 => named("pfcp.atsss_ll_information.flags.", &["lli"]),
        // Bit 1 is PER; tshark names its field "v4".
        237 => named("pfcp.qos_report_trigger.flags.", &["v4", "thr", "ire"]),
        241 => vec![
            (
                1,
                "pfcp.qos_report_trigtp_u_path_interface_typegger.flags.n9".into(),
            ),
            (2, "pfcp.gtp_u_path_interface_type.flags.n3".into()),
        ],
        243 => named(
            "pfcp.requested_qos_monitoring.flags.",
            &["dl", "ul", "rp", "gtpupm"],
        ),
        244 => named(
            "pfcp.reporting_frequency.flags.",
            &["evett", "perio", "sesrl"],
        ),
        249 => named("pfcp.mt_edt_control_information.flags.", &["rdsi"]),
        251 => named("pfcp.qer_control_indications.", &["rcsr"]),
        258 => named("pfcp.ip_version.", &["v4", "v6"]),
        259 => named("pfcp.asreq_flags.flags.", &["uupsi"]),
        260 => named("pfcp.data_status.flags.", &["drop", "buff"]),
        262 => named("pfcp.rds_configuration_information.flags.", &["rds"]),
        265 => named("pfcp.mptcp_application_indication.flags.", &["mai"]),
        _ => return None,
    })
}

/// Our value's octets read as one big-endian integer (for the integer IEs).
fn be_value(x: &Ie) -> u64 {
    let mut b = Vec::new();
    x.encode(&mut b);
    b[4..].iter().fold(0u64, |a, o| (a << 8) | *o as u64)
}

fn name_text(n: &Name) -> String {
    n.to_text()
}

fn leaf(x: &Ie, c: &mut Check) {
    let t = x.ie_type();
    let opaque = ie::known_ie_types()
        .iter()
        .any(|(k, kind)| *k == t && *kind == "Bytes");
    if opaque {
        // Carried, not interpreted by our codec: type and length were compared above.
        return;
    }
    if let Some((_, f)) = INT_FIELDS.iter().find(|(k, _)| *k == t) {
        return c.uint(f, be_value(x));
    }
    if let Some((_, f)) = TIME_FIELDS.iter().find(|(k, _)| *k == t) {
        return c.time(f, be_value(x) as u32);
    }
    if let Some((_, flg, f)) = RULE_ID_FIELDS.iter().find(|(k, ..)| *k == t) {
        let v = be_value(x);
        c.uint(flg, v >> 31);
        return c.uint(f, v & 0x7fff_ffff);
    }
    if let Some((_, f)) = TEXT_FIELDS.iter().find(|(k, _)| *k == t) {
        let mut b = Vec::new();
        x.encode(&mut b);
        return c.text(f, &String::from_utf8_lossy(&b[4..]));
    }
    if let Some((_, f)) = BYTES_FIELDS.iter().find(|(k, _)| *k == t) {
        let mut b = Vec::new();
        x.encode(&mut b);
        return c.bytes(f, &b[4..]);
    }
    if let Some(table) = flag_table(t) {
        let mut b = Vec::new();
        x.encode(&mut b);
        let table: Vec<(u16, &str)> = table.iter().map(|(b, f)| (*b, f.as_str())).collect();
        return c.bits(&Flags(b[4..].to_vec()), &table);
    }
    match x {
        Ie::Cause(v) => c.uint("pfcp.cause", v.0 as u64),
        Ie::SourceInterface(v) => c.uint("pfcp.source_interface", v.value() as u64),
        Ie::DestinationInterface(v) => c.uint("pfcp.dst_interface", v.value() as u64),
        Ie::FTeid(v) => {
            let ch = v.choose;
            c.flag("pfcp.f_teid_flags.ch", ch.is_some());
            c.flag(
                "pfcp.f_teid_flags.ch_id",
                ch.is_some_and(|x| x.choose_id.is_some()),
            );
            c.flag(
                "pfcp.f_teid_flags.v4",
                v.ipv4.is_some() || ch.is_some_and(|x| x.v4),
            );
            c.flag(
                "pfcp.f_teid_flags.v6",
                v.ipv6.is_some() || ch.is_some_and(|x| x.v6),
            );
            if let Some(id) = ch.and_then(|x| x.choose_id) {
                c.bytes("pfcp.f_teid.choose_id", &[id]);
            }
            if let Some(teid) = v.teid {
                c.uint("pfcp.f_teid.teid", teid as u64);
            }
            if let Some(a) = v.ipv4 {
                c.ip("pfcp.f_teid.ipv4_addr", a);
            }
            if let Some(a) = v.ipv6 {
                c.ip("pfcp.f_teid.ipv6_addr", a);
            }
        }
        Ie::NetworkInstance(n) => c.text("pfcp.network_instance", &name_text(n)),
        Ie::ApnDnn(n) => c.text("pfcp.apn_dnn", &name_text(n)),
        Ie::SdfFilter(v) => {
            c.flag("pfcp.sdf_filter.fd", v.flow_description.is_some());
            c.flag("pfcp.sdf_filter.ttc", v.tos_traffic_class.is_some());
            c.flag("pfcp.sdf_filter.spi", v.spi.is_some());
            c.flag("pfcp.sdf_filter.fl", v.flow_label.is_some());
            c.flag("pfcp.sdf_filter.bid", v.filter_id.is_some());
            if let Some(d) = &v.flow_description {
                c.text("pfcp.flow_desc", &String::from_utf8_lossy(d));
            }
            if let Some(x) = v.tos_traffic_class {
                c.uint("pfcp.traffic_class", (x >> 8) as u64);
                c.uint("pfcp.traffic_mask", (x & 0xff) as u64);
            }
            if let Some(x) = v.spi {
                c.uint("pfcp.spi", x as u64);
            }
            if let Some(x) = v.flow_label {
                c.uint("pfcp.flow_label", x as u64);
            }
            if let Some(x) = v.filter_id {
                c.uint("pfcp.sdf_filter_id", x as u64);
            }
        }
        Ie::GateStatus(v) => {
            c.uint("pfcp.gate_status.ulgate", ((v >> 2) & 3) as u64);
            c.uint("pfcp.gate_status.dlgate", (v & 3) as u64);
        }
        Ie::Mbr(v) => {
            c.uint("pfcp.ul_mbr", v.ul_kbps);
            c.uint("pfcp.dl_mbr", v.dl_kbps);
        }
        Ie::Gbr(v) => {
            c.uint("pfcp.ul_gbr", v.ul_kbps);
            c.uint("pfcp.dl_gbr", v.dl_kbps);
        }
        Ie::TransportLevelMarking(v) => {
            c.uint("pfcp.traffic_class", (v >> 8) as u64);
            c.uint("pfcp.traffic_mask", (v & 0xff) as u64);
        }
        Ie::VolumeThreshold(v) => volume(
            c,
            v,
            "pfcp.volume_threshold_flags.",
            "",
            "pfcp.volume_threshold.",
        ),
        Ie::SubsequentVolumeThreshold(v) => volume(
            c,
            v,
            "pfcp.subseq_volume_threshold.",
            "_flg",
            "pfcp.subseq_volume_threshold.",
        ),
        Ie::VolumeQuota(v) => volume(c, v, "pfcp.volume_quota_flags.", "", "pfcp.volume_quota."),
        Ie::SubsequentVolumeQuota(v) => volume(
            c,
            v,
            "pfcp.subsequent_volume_quota_flags.",
            "",
            "pfcp.subsequent_volume_quota.",
        ),
        Ie::RedirectInformation(v) => {
            c.uint("pfcp.redirect_address_type", (v.address_type & 0x0f) as u64);
            c.text("pfcp.redirect_server_address", &v.server_address.as_str());
            if let Some(o) = &v.other_server_address {
                c.text("pfcp.other_redirect_server_address", &o.as_str());
            }
        }
        Ie::ForwardingPolicy(v) => c.bytes("pfcp.forwarding_policy_id", &v.0 .0),
        Ie::DownlinkDataServiceInformation(v) => {
            c.flag("pfcp.dl_data_service_inf.ppi", v.ppi.is_some());
            c.flag("pfcp.dl_data_service_inf.qfii", v.qfi.is_some());
            if let Some(p) = v.ppi_value() {
                c.uint("pfcp.ppi", p as u64);
            }
            if let Some(q) = v.qfi_value() {
                c.uint("pfcp.qfi_value", q as u64);
            }
        }
        Ie::DlBufferingDuration(v) | Ie::Timer(v) | Ie::GracefulReleasePeriod(v) => {
            c.uint("pfcp.timer_unit", v.unit() as u64);
            c.uint("pfcp.timer_value", v.value() as u64);
        }
        Ie::DlBufferingSuggestedPacketCount(v) => c.uint("pfcp.packet_count", v.value as u64),
        Ie::FSeid(v) => {
            c.flag("pfcp.f_seid_flags.v4", v.ipv4.is_some());
            c.flag("pfcp.f_seid_flags.v6", v.ipv6.is_some());
            c.uint("pfcp.seid", v.seid);
            if let Some(a) = v.ipv4 {
                c.ip("pfcp.f_seid.ipv4", a);
            }
            if let Some(a) = v.ipv6 {
                c.ip("pfcp.f_seid.ipv6", a);
            }
        }
        Ie::NodeId(v) => match &v.node_id {
            ie::NodeId::Ipv4(a) => {
                c.uint("pfcp.node_id_type", 0);
                c.ip("pfcp.node_id_ipv4", *a);
            }
            ie::NodeId::Ipv6(a) => {
                c.uint("pfcp.node_id_type", 1);
                c.ip("pfcp.node_id_ipv6", *a);
            }
            ie::NodeId::Fqdn(n) => {
                c.uint("pfcp.node_id_type", 2);
                c.text("pfcp.node_id_fqdn", &name_text(n));
            }
        },
        Ie::PfdContents(v) => {
            let p = "pfcp.pfd_contents_flags.";
            c.flag(&format!("{p}fd"), v.flow_description.is_some());
            c.flag(&format!("{p}url"), v.url.is_some());
            c.flag(&format!("{p}dn"), v.domain_name.is_some());
            c.flag(&format!("{p}cp"), v.custom_pfd_content.is_some());
            c.flag(&format!("{p}dnp"), v.domain_name_protocol.is_some());
            c.flag(&format!("{p}afd"), v.additional_flow_descriptions.is_some());
            c.flag(&format!("{p}aurl"), v.additional_urls.is_some());
            c.flag(
                &format!("{p}adnp"),
                v.additional_domain_names_and_protocols.is_some(),
            );
            if let Some(x) = &v.flow_description {
                c.text("pfcp.flow_desc", &x.as_str());
            }
            if let Some(x) = &v.url {
                c.text("pfcp.url", &x.as_str());
            }
            // tshark shows Domain Name and Domain Name Protocol both as "pfcp.dn".
            let mut dn = 0;
            if let Some(x) = &v.domain_name {
                c.text_nth("pfcp.dn", dn, &x.as_str());
                dn += 1;
            }
            if let Some(x) = &v.custom_pfd_content {
                c.bytes("pfcp.cp", &x.0);
            }
            if let Some(x) = &v.domain_name_protocol {
                c.text_nth("pfcp.dn", dn, &x.as_str());
            }
        }
        Ie::FqCsid(v) => {
            c.uint("pfcp.fq_csid_node_id_type", v.node_id_type as u64);
            c.uint("pfcp.num_csid", v.csids.len() as u64);
            let a = &v.node_address.0;
            match v.node_id_type {
                0 => c.ip(
                    "pfcp.q_csid_node_id.ipv4",
                    <[u8; 4]>::try_from(&a[..]).unwrap(),
                ),
                1 => c.ip(
                    "pfcp.q_csid_node_id.ipv6",
                    <[u8; 16]>::try_from(&a[..]).unwrap(),
                ),
                _ => {
                    let n = u32::from_be_bytes(<[u8; 4]>::try_from(&a[..]).unwrap());
                    c.uint("pfcp.q_csid_node_id.mcc_mnc", (n >> 12) as u64);
                    c.uint("pfcp.q_csid_node_id.int", (n & 0xfff) as u64);
                }
            }
            for (i, csid) in v.csids.iter().enumerate() {
                c.uint_nth("pfcp.csid", i, *csid as u64);
            }
        }
        Ie::VolumeMeasurement(v) => {
            let all = [
                ("tovol", "tovol", v.total),
                ("ulvol", "ulvol", v.uplink),
                ("dlvol", "dlvol", v.downlink),
                ("tonop", "tonop", v.total_packets),
                ("ulnop", "ulnop", v.uplink_packets),
                ("dlnops", "dlnop", v.downlink_packets),
            ];
            for (flag, field, x) in all {
                c.flag(
                    &format!("pfcp.volume_measurement_flags.{flag}"),
                    x.is_some(),
                );
                if let Some(x) = x {
                    c.uint(&format!("pfcp.volume_measurement.{field}"), x);
                }
            }
        }
        Ie::DroppedDlTrafficThreshold(v) => {
            c.flag(
                "pfcp.dropped_dl_traffic_threshold.dlpa_flg",
                v.packets.is_some(),
            );
            c.flag(
                "pfcp.dropped_dl_traffic_threshold.dlby_flg",
                v.bytes.is_some(),
            );
            if let Some(x) = v.packets {
                c.uint("pfcp.downlink_packets", x);
            }
            if let Some(x) = v.bytes {
                c.uint("pfcp.bytes_downlink_data", x);
            }
        }
        Ie::OuterHeaderCreation(v) => {
            c.uint("pfcp.outer_hdr_desc", v.description as u64);
            if let Some(x) = v.teid {
                c.uint("pfcp.outer_hdr_creation.teid", x as u64);
            }
            if let Some(a) = v.ipv4 {
                c.ip("pfcp.outer_hdr_creation.ipv4", a);
            }
            if let Some(a) = v.ipv6 {
                c.ip("pfcp.outer_hdr_creation.ipv6", a);
            }
            if let Some(p) = v.port {
                c.uint("pfcp.outer_hdr_creation.port", p as u64);
            }
            if let Some(tag) = v.c_tag {
                vlan(c, &ie::VlanTag(tag), "pfcp.c_tag.", "cvid");
            }
            if let Some(tag) = v.s_tag {
                vlan(c, &ie::VlanTag(tag), "pfcp.s_tag.", "svid");
            }
        }
        Ie::FlowInformation(v) => {
            c.uint("pfcp.flow_dir", (v.direction & 0x07) as u64);
            c.text("pfcp.flow_desc", &v.flow_description.as_str());
        }
        Ie::UeIpAddress(v) => {
            let p = "pfcp.ue_ip_address_flag.";
            c.flag(&format!("{p}v6"), v.ipv6.is_some());
            c.flag(&format!("{p}v4"), v.ipv4.is_some());
            c.flag(&format!("{p}sd"), v.destination);
            c.flag(&format!("{p}v6d"), v.ipv6_prefix_delegation_bits.is_some());
            c.flag(&format!("{p}chv4"), v.choose_v4);
            c.flag(&format!("{p}chv6"), v.choose_v6);
            c.flag(&format!("{p}v6pl"), v.ipv6_prefix_length.is_some());
            if let Some(a) = v.ipv4 {
                c.ip("pfcp.ue_ip_addr_ipv4", a);
            }
            if let Some(a) = v.ipv6 {
                c.ip("pfcp.ue_ip_addr_ipv6", a);
            }
            if let Some(x) = v.ipv6_prefix_delegation_bits {
                c.uint("pfcp.ue_ip_addr_ipv6_prefix", x as u64);
            }
            if let Some(x) = v.ipv6_prefix_length {
                c.uint("pfcp.ue_ip_addr_ipv6_prefix_length", x as u64);
            }
        }
        Ie::PacketRate(v) => {
            let aprc = v.additional_uplink.is_some() || v.additional_downlink.is_some();
            c.flag("pfcp.packet_rate.ulpr", v.uplink.is_some());
            c.flag("pfcp.packet_rate.dlpr", v.downlink.is_some());
            c.flag("pfcp.packet_rate.aprc", aprc);
            let rates = [
                (v.uplink, "pfcp.ul_time_unit", "pfcp.max_ul_pr"),
                (v.downlink, "pfcp.dl_time_unit", "pfcp.max_dl_pr"),
                (
                    v.additional_uplink,
                    "pfcp.a_ul_time_unit",
                    "pfcp.a_max_ul_pr",
                ),
                (
                    v.additional_downlink,
                    "pfcp.a_dl_time_unit",
                    "pfcp.a_max_dl_pr",
                ),
            ];
            for (r, unit, max) in rates {
                if let Some(r) = r {
                    c.uint(unit, (r.time_unit & 0x07) as u64);
                    c.uint(max, r.max_packets as u64);
                }
            }
        }
        Ie::OuterHeaderRemoval(v) => {
            c.uint("pfcp.out_hdr_desc", v.description as u64);
            if let Some(x) = v.ext_header_deletion {
                c.flag("pfcp.gtpu_ext_hdr_del.pdu_sess_cont", x & 1 != 0);
            }
        }
        Ie::DlFlowLevelMarking(v) => {
            c.flag(
                "pfcp.dl_flow_level_marking.ttc",
                v.tos_traffic_class.is_some(),
            );
            c.flag(
                "pfcp.dl_flow_level_marking.sci",
                v.service_class_indicator.is_some(),
            );
            if let Some(x) = v.tos_traffic_class {
                c.uint("pfcp.traffic_class", (x >> 8) as u64);
                c.uint("pfcp.traffic_mask", (x & 0xff) as u64);
            }
            if let Some(x) = v.service_class_indicator {
                c.uint("pfcp.sci", x as u64);
            }
        }
        Ie::HeaderEnrichment(v) => {
            c.uint("pfcp.header_type", (v.header_type & 0x1f) as u64);
            c.bytes("pfcp.hf_name", &v.name.0);
            c.bytes("pfcp.hf_val", &v.value.0);
        }
        Ie::RemoteGtpuPeer(v) => {
            let p = "pfcp.remote_gtp_u_peer_flags.";
            c.flag(&format!("{p}v6"), v.ipv6.is_some());
            c.flag(&format!("{p}v4"), v.ipv4.is_some());
            c.flag(&format!("{p}di"), v.destination_interface.is_some());
            c.flag(&format!("{p}ni"), v.network_instance.is_some());
            // tshark shows the peer's addresses under the Node ID fields.
            if let Some(a) = v.ipv4 {
                c.ip("pfcp.node_id_ipv4", a);
            }
            if let Some(a) = v.ipv6 {
                c.ip("pfcp.node_id_ipv6", a);
            }
            if let Some(d) = v.destination_interface {
                c.uint("pfcp.dst_interface", d.value() as u64);
            }
            if let Some(n) = &v.network_instance {
                c.text("pfcp.network_instance", &name_text(n));
            }
        }
        Ie::FailedRuleId(v) => {
            c.uint("pfcp.failed_rule_id_type", (v.rule_type & 0x1f) as u64);
            let id = v.id as u64;
            match v.rule_type & 0x1f {
                0 => c.uint("pfcp.pdr_id", id),
                1 => c.uint("pfcp.far_id", id & 0x7fff_ffff),
                2 => c.uint("pfcp.qer_id", id & 0x7fff_ffff),
                3 => c.uint("pfcp.urr_id", id & 0x7fff_ffff),
                4 => c.uint("pfcp.bar_id", id),
                5 => c.uint("pfcp.mar_id", id),
                _ => c.uint("pfcp.srr_id_value", id),
            }
        }
        Ie::TimeQuotaMechanism(v) => {
            c.uint("pfcp.time_quota_mechanism_bti_type", (v.btit & 0x03) as u64);
            c.uint("pfcp.time_quota_mechanism_bti", v.base_time_interval as u64);
        }
        Ie::UserPlaneIpResourceInformation(v) => {
            let p = "pfcp.upiri_flags.";
            c.flag(&format!("{p}v4"), v.ipv4.is_some());
            c.flag(&format!("{p}v6"), v.ipv6.is_some());
            c.uint(&format!("{p}teidri"), v.teid_range_bits as u64);
            c.flag(&format!("{p}assoni"), v.network_instance.is_some());
            c.flag(&format!("{p}assosi"), v.source_interface.is_some());
            if let Some(r) = v.teid_range {
                c.uint("pfcp.upiri.teid_range", r as u64);
            }
            if let Some(a) = v.ipv4 {
                c.ip("pfcp.upiri.ipv4_addr", a);
            }
            if let Some(a) = v.ipv6 {
                c.ip("pfcp.upiri.ipv6_addr", a);
            }
            if let Some(n) = &v.network_instance {
                c.text("pfcp.network_instance", &name_text(n));
            }
            if let Some(s) = v.source_interface {
                c.uint("pfcp.source_interface", s.value() as u64);
            }
        }
        Ie::Multiplier(v) => {
            c.int("pfcp.multiplier.value_digits", v.value_digits);
            c.int("pfcp.multiplier.exponent", v.exponent as i64);
        }
        Ie::AdditionalUsageReportsInformation(v) => {
            c.flag(
                "pfcp.additional_usage_reports_information_auri",
                v >> 15 != 0,
            );
            c.uint(
                "pfcp.additional_usage_reports_information_value",
                (v & 0x7fff) as u64,
            );
        }
        Ie::MacAddress(v) => {
            let p = "pfcp.mac_address.";
            let all = [
                ("sour", "sour", v.source),
                ("dest", "dest", v.destination),
                ("usuo", "usou", v.upper_source),
                ("udes", "udes", v.upper_destination),
            ];
            for (flag, field, m) in all {
                c.flag(&format!("{p}flags.{flag}"), m.is_some());
                if let Some(m) = m {
                    c.mac(&format!("{p}{field}"), 0, &m);
                }
            }
        }
        Ie::CTag(v) => vlan(c, v, "pfcp.c_tag.", "cvid"),
        Ie::STag(v) => vlan(c, v, "pfcp.s_tag.", "svid"),
        Ie::UserId(v) => {
            let p = "pfcp.user_id.flags.";
            let flags = [
                ("imsif", &v.imsi),
                ("imeif", &v.imei),
                ("msisdnf", &v.msisdn),
                ("naif", &v.nai),
                ("supif", &v.supi),
                ("gpsif", &v.gpsi),
                ("peif", &v.pei),
            ];
            for (f, x) in flags {
                c.flag(&format!("{p}{f}"), x.is_some());
            }
            // IMSI and MSISDN are handed to tshark's E.212 and E.164 decoders.
            if let Some(x) = &v.imsi {
                c.text("e212.imsi", &ie::tbcd(x));
            }
            if let Some(x) = &v.imei {
                c.text("pfcp.user_id.imei", &ie::tbcd(x));
            }
            if let Some(x) = &v.msisdn {
                c.text("e164.msisdn", &ie::tbcd(x));
            }
            for (field, x) in [
                ("pfcp.user_id.nai", &v.nai),
                ("pfcp.user_id.supi", &v.supi),
                ("pfcp.user_id.gpsi", &v.gpsi),
                ("pfcp.user_id.pei", &v.pei),
            ] {
                if let Some(x) = x {
                    c.text(field, &String::from_utf8_lossy(x));
                }
            }
        }
        Ie::MacAddressesDetected(v) => {
            c.uint(
                "pfcp.mac_addresses_detected.number_of_mac_addresses",
                v.addresses.len() as u64,
            );
            for (i, m) in v.addresses.iter().enumerate() {
                c.mac("pfcp.mac_addresses_detected.mac_address", i, m);
            }
        }
        Ie::MacAddressesRemoved(v) => {
            c.uint(
                "pfcp.mac_addresses_removed.number_of_mac_address",
                v.addresses.len() as u64,
            );
            for (i, m) in v.addresses.iter().enumerate() {
                c.mac("pfcp.mac_addresses_removed.mac_addresses", i, m);
            }
        }
        Ie::FramedRouting(_) => {
            let v = be_value(x) as u32;
            c.bytes("pfcp.framed_routing", &v.to_be_bytes());
        }
        Ie::UeIpAddressPoolIdentity(v) => {
            c.uint("pfcp.ue_ip_address_pool_length", v.0 .0.len() as u64);
            c.bytes("pfcp.ue_ip_address_pool_identity", &v.0 .0);
        }
        Ie::AlternativeSmfIpAddress(v) => {
            // tshark shows the V4/V6 bits under the F-SEID flag fields.
            c.flag("pfcp.f_seid_flags.v4", v.ipv4.is_some());
            c.flag("pfcp.f_seid_flags.v6", v.ipv6.is_some());
            c.flag(
                "pfcp.alternative_smf_ip_address_flags.ppe",
                v.other_flags & 0x04 != 0,
            );
            if let Some(a) = v.ipv4 {
                c.ip("pfcp.alternative_smf_ip_address.ipv4", a);
            }
            if let Some(a) = v.ipv6 {
                c.ip("pfcp.alternative_smf_ip_address.ipv6", a);
            }
        }
        Ie::CpPfcpEntityIpAddress(v) => {
            c.flag("pfcp.f_seid_flags.v4", v.ipv4.is_some());
            c.flag("pfcp.f_seid_flags.v6", v.ipv6.is_some());
            if let Some(a) = v.ipv4 {
                c.ip("pfcp.cp_pfcp_entity_ip_address.ipv4", a);
            }
            if let Some(a) = v.ipv6 {
                c.ip("pfcp.cp_pfcp_entity_ip_address.ipv6", a);
            }
        }
        Ie::SmfSetId(v) => c.text("pfcp.node_id_fqdn", &name_text(&v.fqdn)),
        Ie::SourceIpAddress(v) => {
            c.flag("pfcp.f_seid_flags.v4", v.ipv4.is_some());
            c.flag("pfcp.f_seid_flags.v6", v.ipv6.is_some());
            c.flag(
                "pfcp.source_ip_address.flags.mpl",
                v.mask_prefix_length.is_some(),
            );
            if let Some(a) = v.ipv4 {
                c.ip("pfcp.source_ip_address.ipv4", a);
            }
            if let Some(a) = v.ipv6 {
                c.ip("pfcp.source_ip_address.ipv6", a);
            }
            if let Some(m) = v.mask_prefix_length {
                c.uint("pfcp.source_ip_address.mpl", m as u64);
            }
        }
        Ie::AccessAvailabilityInformation(v) => {
            // Access Type (bits 1-2) then Availability Status (bits 3-4); tshark 4.0 files
            // both under the Failed Rule ID Type field name.
            c.uint_nth("pfcp.failed_rule_id_type", 0, (v & 0x03) as u64);
            c.uint_nth("pfcp.failed_rule_id_type", 1, ((v >> 2) & 0x03) as u64);
        }
        Ie::SNssai(v) => {
            c.bytes("pfcp.s_nssai_sst.sst", &[v.sst]);
            c.bytes("pfcp.s_nssai_sst.sd", &v.sd.to_be_bytes()[1..]);
        }
        Ie::PacketDelayThresholds(v) => delays(
            c,
            "pfcp.packet_delay_thresholds.",
            [v.downlink_ms, v.uplink_ms, v.round_trip_ms],
        ),
        Ie::QosMonitoringMeasurement(v) => {
            c.flag("pfcp.qos_monitoring_measurement.flags.plmf", v.plmf);
            delays(
                c,
                "pfcp.qos_monitoring_measurement.",
                [v.downlink_ms, v.uplink_ms, v.round_trip_ms],
            )
        }
        other => {
            c.st.failures.push(format!(
                "{}: {}: no comparison written for IE type {}",
                c.sample,
                c.path,
                other.ie_type()
            ));
        }
    }
}

fn volume(c: &mut Check, v: &ie::Volume, flags: &str, flag_suffix: &str, values: &str) {
    for (name, x) in [
        ("tovol", v.total),
        ("ulvol", v.uplink),
        ("dlvol", v.downlink),
    ] {
        c.flag(&format!("{flags}{name}{flag_suffix}"), x.is_some());
        if let Some(x) = x {
            c.uint(&format!("{values}{name}"), x);
        }
    }
}

/// The DL / UL / RP flags and delays (milliseconds) of clauses 8.2.169 and 8.2.171.
fn delays(c: &mut Check, prefix: &str, ms: [Option<u32>; 3]) {
    for ((flag, value), x) in [("dl", "downlink"), ("ul", "uplink"), ("rp", "roundtrip")]
        .into_iter()
        .zip(ms)
    {
        c.flag(&format!("{prefix}flags.{flag}"), x.is_some());
        if let Some(x) = x {
            c.uint(&format!("{prefix}{value}"), x as u64);
        }
    }
}

fn vlan(c: &mut Check, v: &ie::VlanTag, p: &str, vid: &str) {
    c.flag(&format!("{p}flags.pcp"), v.pcp().is_some());
    c.flag(&format!("{p}flags.dei"), v.dei().is_some());
    c.flag(&format!("{p}flags.vid"), v.vid().is_some());
    if let Some(x) = v.pcp() {
        c.uint(&format!("{p}pcp"), x as u64);
    }
    if let Some(x) = v.dei() {
        c.flag(&format!("{p}dei_flag"), x);
    }
    if let Some(x) = v.vid() {
        c.uint(&format!("{p}{vid}"), x as u64);
    }
}

fn report(st: &State) {
    let types = st.ie_seen.len();
    let fields: usize = st.value_checks.values().sum();
    eprintln!(
        "tshark: {} messages, {} IEs of {types} types; {} comparisons ({fields} value fields \
         over {} IE types); {} known tshark deviations seen",
        st.messages,
        st.ies,
        st.comparisons,
        st.value_checks.len(),
        st.known_hit.len()
    );
    for i in &st.known_hit {
        let k = &KNOWN[*i];
        eprintln!(
            "  known: {} IE {} {:?} (TS 29.244 clause {}): {}",
            k.sample, k.ie_type, k.what, k.clause, k.why
        );
    }
}

// ---------------------------------------------------------------------------------------
// A small JSON reader that keeps object members in order and keeps duplicate keys:
// tshark's JSON repeats a key for each IE of the same name.

#[derive(Debug)]
#[allow(dead_code)] // numbers and literals are kept for Debug output only
enum J {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    fn obj(&self) -> Option<&[(String, J)]> {
        match self {
            J::Obj(o) => Some(o),
            _ => None,
        }
    }
    fn str(&self) -> Option<&str> {
        match self {
            J::Str(s) => Some(s),
            _ => None,
        }
    }
    fn get(&self, key: &str) -> Option<&J> {
        self.obj()?.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

fn parse_json(s: &str) -> J {
    let mut p = Parser {
        b: s.as_bytes(),
        i: 0,
    };
    let v = p.value();
    p.ws();
    assert_eq!(p.i, p.b.len(), "trailing data after JSON");
    v
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && self.b[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) {
        self.ws();
        assert_eq!(
            self.b.get(self.i),
            Some(&c),
            "JSON: expected '{}' at {}",
            c as char,
            self.i
        );
        self.i += 1;
    }

    fn value(&mut self) -> J {
        self.ws();
        match self.b[self.i] {
            b'{' => {
                self.i += 1;
                let mut o = Vec::new();
                self.ws();
                if self.b[self.i] == b'}' {
                    self.i += 1;
                    return J::Obj(o);
                }
                loop {
                    self.ws();
                    let k = self.string();
                    self.eat(b':');
                    let v = self.value();
                    o.push((k, v));
                    self.ws();
                    self.i += 1;
                    match self.b[self.i - 1] {
                        b',' => continue,
                        b'}' => return J::Obj(o),
                        c => panic!("JSON: unexpected '{}' at {}", c as char, self.i),
                    }
                }
            }
            b'[' => {
                self.i += 1;
                let mut a = Vec::new();
                self.ws();
                if self.b[self.i] == b']' {
                    self.i += 1;
                    return J::Arr(a);
                }
                loop {
                    a.push(self.value());
                    self.ws();
                    self.i += 1;
                    match self.b[self.i - 1] {
                        b',' => continue,
                        b']' => return J::Arr(a),
                        c => panic!("JSON: unexpected '{}' at {}", c as char, self.i),
                    }
                }
            }
            b'"' => J::Str(self.string()),
            b't' => self.word("true", J::Bool(true)),
            b'f' => self.word("false", J::Bool(false)),
            b'n' => self.word("null", J::Null),
            _ => {
                let start = self.i;
                while self.i < self.b.len() && b"+-.eE0123456789".contains(&self.b[self.i]) {
                    self.i += 1;
                }
                let t = std::str::from_utf8(&self.b[start..self.i]).unwrap();
                J::Num(
                    t.parse()
                        .unwrap_or_else(|_| panic!("JSON: bad number {t:?}")),
                )
            }
        }
    }

    fn word(&mut self, w: &str, v: J) -> J {
        assert!(
            self.b[self.i..].starts_with(w.as_bytes()),
            "JSON: bad literal at {}",
            self.i
        );
        self.i += w.len();
        v
    }

    fn string(&mut self) -> String {
        self.eat(b'"');
        let mut out = Vec::new();
        loop {
            let c = self.b[self.i];
            self.i += 1;
            match c {
                b'"' => break,
                b'\\' => {
                    let e = self.b[self.i];
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'b' => out.push(8),
                        b'f' => out.push(12),
                        b'u' => {
                            let mut cp = self.hex4();
                            if (0xd800..0xdc00).contains(&cp)
                                && self.b[self.i..].starts_with(b"\\u")
                            {
                                self.i += 2;
                                let lo = self.hex4();
                                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                            }
                            let ch = char::from_u32(cp).unwrap_or('\u{fffd}');
                            out.extend_from_slice(ch.to_string().as_bytes());
                        }
                        other => out.push(other),
                    }
                }
                c => out.push(c),
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }

    fn hex4(&mut self) -> u32 {
        let t = std::str::from_utf8(&self.b[self.i..self.i + 4]).unwrap();
        self.i += 4;
        u32::from_str_radix(t, 16).unwrap()
    }
}

#[test]
fn ntp_dates() {
    assert_eq!(
        ntp_to_text(3_913_056_000),
        "Jan  1, 2024 00:00:00.000000000 UTC"
    );
    assert_eq!(
        ntp_to_text(3_913_056_000 + 86_400 * 60 + 3661),
        "Mar  1, 2024 01:01:01.000000000 UTC"
    );
}

#[test]
fn json_reader_keeps_order_and_duplicates() {
    let j = parse_json(r#"{"b": "1", "a": {"x": "\u00e9\"", "x": "2"}, "b": [1, true, null]}"#);
    let o = j.obj().unwrap();
    assert_eq!(
        o.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>(),
        ["b", "a", "b"]
    );
    let a = o[1].1.obj().unwrap();
    assert_eq!(a[0].1.str(), Some("é\""));
    assert_eq!(a[1].1.str(), Some("2"));
}
