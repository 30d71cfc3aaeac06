//! Hostile input: every truncation and every single-bit flip of a set of messages, and
//! random octet strings, must parse or fail without panicking. Whatever parses must
//! re-emit to the octets it came from (unless its IEs were out of the ascending order
//! clause 8.1 requires, which the emitter restores), and the data-path helper must agree
//! with the full parser on every G-PDU the latter accepts.

use gtpu::{ie::IeIter, parse_gpdu, Message};

mod corpus;

use corpus::seeds;

fn ies_sorted(body: &[u8]) -> bool {
    let types: Vec<u8> = IeIter::new(body, 0)
        .filter_map(|r| r.ok().map(|(_, ie)| ie.ie_type()))
        .collect();
    types.windows(2).all(|w| w[0] <= w[1])
}

fn check(input: &[u8]) {
    let fast = parse_gpdu(input);
    let Ok(message) = Message::parse(input) else {
        return;
    };
    // `8 + Length`, or the whole input for a G-PDU whose Length runs past it (accepted
    // when its header is whole, and re-emitted with that Length).
    let len = (8 + usize::from(u16::from_be_bytes([input[2], input[3]]))).min(input.len());
    let out = message.to_vec().expect("a parsed message emits");
    if out != input[..len] {
        let body_start = len - (message.buffer_len() - message.header().buffer_len());
        assert!(
            !ies_sorted(&input[body_start..len]),
            "re-emit differs for {input:02x?}: {out:02x?}"
        );
    }
    assert_eq!(Message::parse(&out).as_ref(), Ok(&message));
    let _ = serde_json::to_string(&message).expect("serializes");
    if let Message::GPdu { header, t_pdu } = &message {
        let info = fast.expect("parse_gpdu accepts what Message::parse accepts");
        assert_eq!(info.teid, header.teid);
        assert_eq!(info.qfi, header.qfi());
        assert_eq!(info.payload_len, t_pdu.0.len());
        assert_eq!(info.payload(input), t_pdu.0);
    }
}

#[test]
fn seeds_round_trip() {
    for seed in seeds() {
        let message = Message::parse(&seed).unwrap_or_else(|e| panic!("{seed:02x?}: {e}"));
        assert_eq!(message.to_vec().unwrap(), seed);
        check(&seed);
    }
}

#[test]
fn truncations_and_bit_flips() {
    for seed in seeds() {
        for len in 0..seed.len() {
            check(&seed[..len]);
        }
        for bit in 0..seed.len() * 8 {
            let mut v = seed.clone();
            v[bit / 8] ^= 1 << (bit % 8);
            check(&v);
            // And with octets after the message, as in the captures.
            v.extend_from_slice(&[0; 8]);
            check(&v);
        }
    }
}

#[test]
fn random_inputs() {
    // xorshift64*, fixed seed: reproducible.
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    let flags = [0x30u8, 0x32, 0x34, 0x36, 0x31, 0x3f];
    let types = [1u8, 2, 26, 31, 254, 255, 7];
    for _ in 0..50_000 {
        let len = (next() % 64) as usize;
        let mut v: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        if v.len() >= 4 {
            v[0] = flags[(next() % flags.len() as u64) as usize];
            v[1] = types[(next() % types.len() as u64) as usize];
            let l = (v.len() as u16).saturating_sub(8 + (next() % 3) as u16);
            v[2..4].copy_from_slice(&l.to_be_bytes());
        }
        if v.len() >= 12 && next() % 2 == 0 {
            v[11] = [0x85u8, 0x40, 0x20, 0xc0, 0x03, 0x82, 0x04][(next() % 7) as usize];
        }
        check(&v);
    }
}
