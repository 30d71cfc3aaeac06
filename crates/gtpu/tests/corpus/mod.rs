//! The GTP-U robustness corpus: messages covering every message type and extension
//! header kind. The codec's robustness test (robustness.rs) mutates them; the data path's
//! G-PDU contract test (crates/bpf/tests/gpdu_contract.rs) reads them too.

/// Messages covering every message type and extension header kind.
pub fn seeds() -> Vec<Vec<u8>> {
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
