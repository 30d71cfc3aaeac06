//! Every way our encoder writes different octets than it parsed, each with the clause of
//! TS 29.244 that makes the two encodings equivalent. Nothing in the interop captures needs
//! any of these (tests/captures.rs checks byte-identical re-encoding); they apply to inputs
//! such as fuzzer output. Parse-emit-parse stays the identity in every case. Spare bits
//! and spare octets are not among them: they come back as received (checked bit by bit
//! below), as a receiver that ignores them must not change a message it relays or logs.

use pfcp::ie::types;
use pfcp::Message;

struct Case {
    what: &'static str,
    clause: &'static str,
    /// The IE as received (type, length, value).
    input: &'static [u8],
    /// The IE as we re-encode it.
    output: &'static [u8],
}

const CASES: &[Case] = &[
    Case {
        what: "octets after the last field of a fixed-size IE are dropped (Traffic Endpoint ID, 1 octet, sent with 4)",
        clause: "8.1.1 and the IE figures: octets past the defined fields are \"present only if explicitly specified\" and a receiver ignores what it does not know (7.6.1 forward compatibility)",
        input: &[0x00, 0x83, 0x00, 0x04, 0x3c, 0x31, 0x01, 0x67],
        output: &[0x00, 0x83, 0x00, 0x01, 0x3c],
    },
    Case {
        what: "octets after the last field of a structured IE are dropped (F-SEID with V4, one trailing octet)",
        clause: "8.1.1, 8.2.37 (\"These octet(s) is/are present only if explicitly specified\")",
        input: &[
            0x00, 0x39, 0x00, 0x0e, 0x02, 0, 0, 0, 0, 0, 0, 0, 1, 10, 0, 0, 1, 0xee,
        ],
        output: &[0x00, 0x39, 0x00, 0x0d, 0x02, 0, 0, 0, 0, 0, 0, 0, 1, 10, 0, 0, 1],
    },
];

fn heartbeat_with(ie: &[u8]) -> Vec<u8> {
    let mut body = vec![0x00, 0x60, 0x00, 0x04, 1, 2, 3, 4];
    body.extend_from_slice(ie);
    let mut m = vec![0x20, 0x01];
    m.extend_from_slice(&((4 + body.len()) as u16).to_be_bytes());
    m.extend_from_slice(&[0, 0, 1, 0]);
    m.extend_from_slice(&body);
    m
}

#[test]
fn normalisations_are_the_listed_ones() {
    for c in CASES {
        let input = heartbeat_with(c.input);
        let m = Message::parse(&input).unwrap_or_else(|e| panic!("{}: {e}", c.what));
        let out = m.emit();
        assert_eq!(out, heartbeat_with(c.output), "{} ({})", c.what, c.clause);
        assert_ne!(out, input, "{}: not a normalisation", c.what);
        assert_eq!(
            Message::parse(&out).unwrap(),
            m,
            "{}: parse-emit-parse",
            c.what
        );
    }
}

#[test]
fn typed_layer_writes_ies_in_table_order() {
    // Clause 7.2.3.1: IEs in a message may come in any order; the typed encoder writes them
    // in the order of the message's table. Recovery Time Stamp before Node ID comes back
    // after it in an Association Setup Request.
    let mut m = vec![0x20, 0x05, 0x00, 0x15, 0, 0, 1, 0];
    m.extend_from_slice(&[0x00, 0x60, 0x00, 0x04, 1, 2, 3, 4]);
    m.extend_from_slice(&[0x00, 0x3c, 0x00, 0x05, 0, 10, 0, 0, 1]);
    let (h, typed) = pfcp::msg::Msg::parse(&m).unwrap();
    let out = typed.emit(&h);
    assert_eq!(&out[8..17], &[0x00, 0x3c, 0x00, 0x05, 0, 10, 0, 0, 1]);
    assert_eq!(&out[17..], &[0x00, 0x60, 0x00, 0x04, 1, 2, 3, 4]);
    // The generic layer keeps the order.
    assert_eq!(Message::parse(&m).unwrap().emit(), m);
    assert_eq!(pfcp::msg::Msg::parse(&out).unwrap().1, typed);
}

/// Regression: found by fuzz/parse_emit_parse. The header's received length used to be
/// part of the parsed value, so a message whose IEs were normalised (a 4-octet Traffic
/// Endpoint ID) did not compare equal to itself after a round trip.
#[test]
fn fuzz_parse_emit_parse_header_length() {
    let input = hex("210200790000000000000009000000000018000000570044002c000103002e00015b007000019f00210004ffffffff003200010000740024239cccecc4e37ed0ad32eb65de6bf1bd2b92e9556e0e4d4c4661764b6a56646f3241576c00110007005b00030fb0548005000a48f9404f490101000000008300043c310167");
    let m = Message::parse(&input).unwrap();
    let out = m.emit();
    let m2 = Message::parse(&out).unwrap();
    assert_eq!(m, m2);
    assert_eq!(out, m2.emit());
    assert_eq!(
        m.ies.last().map(|i| i.ie_type()),
        Some(types::TRAFFIC_ENDPOINT_ID)
    );
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Every leaf IE of the sample corpus, as (type, value octets).
fn leaf_values() -> Vec<(u16, Vec<u8>)> {
    fn walk(ies: &[pfcp::Ie], out: &mut Vec<(u16, Vec<u8>)>) {
        for ie in ies {
            let mut b = Vec::new();
            ie.encode(&mut b);
            if matches!(ie, pfcp::Ie::Unknown(_)) {
                continue;
            }
            if pfcp::ie::is_grouped(ie.ie_type()) {
                walk(&pfcp::ie::decode_ies(&b[4..], 4).unwrap(), out);
            } else {
                out.push((ie.ie_type(), b[4..].to_vec()));
            }
        }
    }
    let mut out = Vec::new();
    for s in pfcp_samples::corpus() {
        let m = Message::parse(&s.bytes).unwrap();
        walk(&m.ies, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

/// Spare bits (TS 29.244 clause 8.1.1: "set to 0 by the sender and ignored by the
/// receiver") come back as they were received: a value that decodes with any one bit
/// flipped re-encodes to exactly the flipped octets. Covers every leaf IE type of the
/// sample corpus, every bit of its value.
#[test]
fn a_value_that_decodes_re_encodes_identically_bit_for_bit() {
    let mut lost = std::collections::BTreeSet::new();
    for (t, v) in leaf_values() {
        for bit in 0..v.len() * 8 {
            let mut f = v.clone();
            f[bit / 8] ^= 0x80 >> (bit % 8);
            let raw = pfcp::ie::RawIe {
                ie_type: t,
                enterprise_id: None,
                value: &f,
                offset: 0,
                value_offset: 4,
            };
            let Ok(ie) = pfcp::Ie::decode(&raw, 0) else {
                continue;
            };
            let mut out = Vec::new();
            ie.encode(&mut out);
            // Octets past the fields the flags select are dropped (the first case above);
            // anything else is a loss.
            if !f.starts_with(&out[4..]) {
                lost.insert(format!(
                    "{} ({t}): octet {} bit {}",
                    pfcp::ie::ie_name(t).unwrap_or("?"),
                    bit / 8 + 5,
                    8 - bit % 8
                ));
            }
        }
    }
    assert!(
        lost.is_empty(),
        "{} losses:\n{}",
        lost.len(),
        lost.into_iter().collect::<Vec<_>>().join("\n")
    );
}
