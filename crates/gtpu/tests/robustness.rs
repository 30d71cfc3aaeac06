//! Hostile input: every truncation and every single-bit flip of a set of messages, and
//! random octet strings, must parse or fail without panicking. Whatever parses must
//! re-emit to the octets it came from (unless its IEs were out of the ascending order
//! clause 8.1 requires, which the emitter restores), and the data-path helper must agree
//! with the full parser on every G-PDU the latter accepts.

use gtpu::{ie::IeIter, parse_gpdu, Message};

/// Messages covering every message type and extension header kind.
fn seeds() -> Vec<Vec<u8>> {
    vec![
        // G-PDU, DL PDU Session Container QFI 1 (5g-roaming-hr capture), IPv4 start.
        vec![
            0x34, 0xff, 0x00, 0x0c, 0x00, 0x00, 0x9c, 0x40, 0x00, 0x00, 0x00, 0x85, 0x01, 0x00,
            0x01, 0x00, 0x45, 0x00, 0x00, 0x1c,
        ],
        // G-PDU with S flag (testattach capture).
        vec![0x32, 0xff, 0x00, 0x05, 0, 0, 0, 2, 0, 0, 0, 0, 0x60],
        // G-PDU: UL container with every optional field, then UDP Port, Long PDCP,
        // Service Class Indicator, PDCP PDU Number and an unknown 0x04 header.
        {
            let mut v = vec![0x34, 0xff, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0x85];
            let mut c = vec![0x1f, 0xc7];
            c.extend_from_slice(&[1; 24]);
            c.extend_from_slice(&[2; 4]);
            c.extend_from_slice(&[3; 4]);
            c.extend_from_slice(&[4; 3]);
            c.extend_from_slice(&[5; 4]);
            c.push(0x01);
            c.push(0x01);
            while c.len() % 4 != 2 {
                c.push(0);
            }
            v.push(((c.len() + 2) / 4) as u8);
            v.extend_from_slice(&c);
            v.push(0x40);
            v.extend_from_slice(&[0x01, 0x08, 0x68, 0x03]);
            v.extend_from_slice(&[0x02, 0x01, 0x23, 0x45, 0, 0, 0, 0x20]);
            v.extend_from_slice(&[0x01, 0x07, 0x00, 0xc0]);
            v.extend_from_slice(&[0x01, 0x12, 0x34, 0x04]);
            v.extend_from_slice(&[0x01, 0xaa, 0xbb, 0x00]);
            v.extend_from_slice(&[0x45, 0, 0, 20]);
            let len = (v.len() - 8) as u16;
            v[2..4].copy_from_slice(&len.to_be_bytes());
            v
        },
        // G-PDU: DL container with PPI, time stamp, sequence numbers.
        vec![
            0x34, 0xff, 0x00, 0x1c, 0, 0, 0, 1, 0, 0, 0, 0x85, 0x05, 0x0e, 0xc5, 0xc0, 1, 2, 3, 4,
            5, 6, 7, 8, 0xaa, 0xbb, 0xcc, 0, 0, 0, 9, 0x00, 0x60, 0, 0, 0,
        ],
        // G-PDU whose Length (2096) runs past the 200-octet UDP payload, UL container
        // QFI 1, IPv6 echo request, zero padding (open5gs-testregistration, frame 139).
        {
            let mut v = vec![
                0x34, 0xff, 0x08, 0x30, 0, 0, 0, 1, 0, 0, 0, 0x85, 0x01, 0x10, 0x01, 0x00, 0x60, 0,
                0, 0x01, 0x00, 0x08, 0x3a, 0xff, 0xca, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0x02, 0xca, 0xfe, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x80, 0x00, 0xd4,
                0x44, 0x29, 0x1f, 0xec, 0x58,
            ];
            v.resize(200, 0);
            v
        },
        // Echo Request with sequence, Echo Response with Recovery and Private Extension.
        vec![0x32, 0x01, 0x00, 0x04, 0, 0, 0, 0, 0x12, 0x34, 0, 0],
        vec![
            0x32, 0x02, 0x00, 0x0e, 0, 0, 0, 0, 0, 7, 0, 0, 14, 0, 255, 0, 5, 0x28, 0xaf, 1, 2, 3,
        ],
        // Error Indication with UDP Port, TEID Data I, IPv6 peer address.
        vec![
            0x36, 0x1a, 0x00, 0x20, 0, 0, 0, 0, 0, 1, 0, 0x40, 0x01, 0x08, 0x68, 0x00, 16, 0, 0,
            0xc0, 0xbb, 133, 0, 16, 0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1,
        ],
        // Supported Extension Headers Notification.
        vec![0x30, 0x1f, 0x00, 0x04, 0, 0, 0, 0, 141, 2, 0x40, 0x85],
        // End Marker with an unknown TLV IE.
        vec![0x30, 0xfe, 0x00, 0x04, 0, 0, 0, 1, 200, 0, 1, 7],
    ]
}

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
