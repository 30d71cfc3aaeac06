//! Malformed messages each get a specific error: the IE type, its offset, the PFCP Cause
//! (TS 29.244 clause 7.6, Table 8.2.1-1) and the Offending IE a UP function would return.

use pfcp::ie::types;
use pfcp::msg::{self, HeartbeatRequest, SessionEstablishmentRequest};
use pfcp::{CauseValue, ErrorKind};

/// An IE: type, then value octets.
fn ie(t: u16, v: &[u8]) -> Vec<u8> {
    let mut o = t.to_be_bytes().to_vec();
    o.extend_from_slice(&(v.len() as u16).to_be_bytes());
    o.extend_from_slice(v);
    o
}

fn session_msg(t: u8, ies: &[Vec<u8>]) -> Vec<u8> {
    let body: Vec<u8> = ies.concat();
    let mut m = vec![0x21, t];
    m.extend_from_slice(&((12 + body.len()) as u16).to_be_bytes());
    m.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]); // SEID 0
    m.extend_from_slice(&[0, 0, 7, 0]); // sequence 7
    m.extend_from_slice(&body);
    m
}

fn node_msg(t: u8, ies: &[Vec<u8>]) -> Vec<u8> {
    let body: Vec<u8> = ies.concat();
    let mut m = vec![0x20, t];
    m.extend_from_slice(&((4 + body.len()) as u16).to_be_bytes());
    m.extend_from_slice(&[0, 0, 7, 0]);
    m.extend_from_slice(&body);
    m
}

fn node_id() -> Vec<u8> {
    ie(types::NODE_ID, &[0, 10, 0, 0, 1])
}
fn fseid() -> Vec<u8> {
    ie(types::FSEID, &[0x02, 0, 0, 0, 0, 0, 0, 0, 1, 10, 0, 0, 1])
}
fn pdi(children: &[Vec<u8>]) -> Vec<u8> {
    ie(types::PDI, &children.concat())
}
fn source_interface() -> Vec<u8> {
    ie(types::SOURCE_INTERFACE, &[0])
}
fn create_pdr(pdi: Vec<u8>) -> Vec<u8> {
    ie(
        types::CREATE_PDR,
        &[
            ie(types::PDR_ID, &[0, 1]),
            ie(types::PRECEDENCE, &[0, 0, 0, 255]),
            pdi,
            ie(types::FAR_ID, &[0, 0, 0, 1]),
        ]
        .concat(),
    )
}
fn create_far(fwd: Vec<u8>) -> Vec<u8> {
    ie(
        types::CREATE_FAR,
        &[
            ie(types::FAR_ID, &[0, 0, 0, 1]),
            ie(types::APPLY_ACTION, &[0x02]),
            fwd,
        ]
        .concat(),
    )
}
fn good_pdr() -> Vec<u8> {
    create_pdr(pdi(&[source_interface()]))
}
fn good_far() -> Vec<u8> {
    create_far(ie(
        types::FORWARDING_PARAMETERS,
        &ie(types::DESTINATION_INTERFACE, &[1]),
    ))
}

fn establishment(ies: &[Vec<u8>]) -> pfcp::Error {
    msg::parse::<SessionEstablishmentRequest>(&session_msg(50, ies)).unwrap_err()
}

#[test]
fn a_well_formed_establishment_parses() {
    let (_, m) = msg::parse::<SessionEstablishmentRequest>(&session_msg(
        50,
        &[node_id(), fseid(), good_pdr(), good_far()],
    ))
    .unwrap();
    assert_eq!(m.create_pdrs.len(), 1);
}

#[test]
fn outer_header_creation_with_wrong_length() {
    // GTP-U/UDP/IPv4 announced: TEID and IPv4 needed (10 octets), 8 given.
    let ohc = ie(types::OUTER_HEADER_CREATION, &[1, 0, 0, 0, 0, 1, 10, 0]);
    let fwd = ie(
        types::FORWARDING_PARAMETERS,
        &[ie(types::DESTINATION_INTERFACE, &[0]), ohc].concat(),
    );
    let e = establishment(&[node_id(), fseid(), good_pdr(), create_far(fwd)]);
    assert_eq!(e.kind, ErrorKind::IeTooShort { needed: 10, got: 8 });
    assert_eq!(e.ie_type, Some(types::OUTER_HEADER_CREATION));
    assert_eq!(e.cause(), CauseValue::INVALID_LENGTH);
    assert_eq!(e.offending_ie(), Some(84));
    assert_eq!(
        e.path,
        vec![types::CREATE_FAR, types::FORWARDING_PARAMETERS]
    );
    // header 16 + node id 9 + F-SEID 17 + Create PDR 4+6+8+(4+5)+8=35 -> Create FAR at 77;
    // FAR ID 8, Apply Action 5 -> Forwarding Parameters at 94; Destination Interface 5 ->
    // Outer Header Creation at 103, its value at 107; the IPv4 address is cut at +6.
    assert_eq!(e.offset, 107 + 6);
}

#[test]
fn outer_header_creation_with_no_header_to_create() {
    let ohc = ie(types::OUTER_HEADER_CREATION, &[0, 0]);
    let fwd = ie(
        types::FORWARDING_PARAMETERS,
        &[ie(types::DESTINATION_INTERFACE, &[0]), ohc].concat(),
    );
    let e = establishment(&[node_id(), fseid(), good_pdr(), create_far(fwd)]);
    assert!(matches!(e.kind, ErrorKind::Invalid(_)));
    assert_eq!(e.cause(), CauseValue::MANDATORY_IE_INCORRECT);
    assert_eq!(e.offending_ie(), Some(types::OUTER_HEADER_CREATION));
}

#[test]
fn bit_rate_with_wrong_length() {
    for t in [types::MBR, types::GBR] {
        let qer = ie(
            types::CREATE_QER,
            &[
                ie(types::QER_ID, &[0, 0, 0, 1]),
                ie(types::GATE_STATUS, &[0]),
                ie(t, &[0, 0, 0, 0x27, 0x10, 0, 0, 0, 0x27]),
            ]
            .concat(),
        );
        let e = establishment(&[node_id(), fseid(), good_pdr(), good_far(), qer]);
        assert_eq!(e.kind, ErrorKind::IeTooShort { needed: 10, got: 9 });
        assert_eq!(e.ie_type, Some(t));
        assert_eq!(e.cause(), CauseValue::INVALID_LENGTH);
        assert_eq!(e.path, vec![types::CREATE_QER]);
    }
}

#[test]
fn zero_length_recovery_time_stamp() {
    let m = node_msg(1, &[ie(types::RECOVERY_TIME_STAMP, &[])]);
    let e = msg::parse::<HeartbeatRequest>(&m).unwrap_err();
    assert_eq!(e.kind, ErrorKind::IeTooShort { needed: 4, got: 0 });
    assert_eq!(e.ie_type, Some(96));
    assert_eq!(e.offset, 12);
    assert_eq!(e.cause(), CauseValue::INVALID_LENGTH);
}

#[test]
fn heartbeat_without_recovery_time_stamp() {
    let e = msg::parse::<HeartbeatRequest>(&node_msg(1, &[])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::MandatoryMissing);
    assert_eq!(e.offending_ie(), Some(types::RECOVERY_TIME_STAMP));
    assert_eq!(e.cause(), CauseValue::MANDATORY_IE_MISSING);
}

#[test]
fn pdi_without_source_interface() {
    let pdr = create_pdr(pdi(&[ie(types::NETWORK_INSTANCE, b"internet")]));
    let e = establishment(&[node_id(), fseid(), pdr, good_far()]);
    assert_eq!(e.kind, ErrorKind::MandatoryMissing);
    assert_eq!(e.offending_ie(), Some(types::SOURCE_INTERFACE));
    assert_eq!(e.cause(), CauseValue::MANDATORY_IE_MISSING);
    assert_eq!(e.path, vec![types::CREATE_PDR, types::PDI]);
    // The PDI starts after the header (16), Node ID (9), F-SEID (17), PDR ID (6), Precedence (8).
    assert_eq!(e.offset, 16 + 9 + 17 + 4 + 6 + 8);
}

#[test]
fn establishment_without_fseid_or_node_id() {
    let e = establishment(&[node_id(), good_pdr(), good_far()]);
    assert_eq!(e.offending_ie(), Some(types::FSEID));
    assert_eq!(e.cause(), CauseValue::MANDATORY_IE_MISSING);
    let e = establishment(&[fseid(), good_pdr(), good_far()]);
    assert_eq!(e.offending_ie(), Some(types::NODE_ID));
    assert_eq!(e.cause(), CauseValue::MANDATORY_IE_MISSING);
}

#[test]
fn empty_request() {
    // A header and nothing else: the first mandatory IE is reported.
    let e = establishment(&[]);
    assert_eq!(e.kind, ErrorKind::MandatoryMissing);
    assert_eq!(e.offending_ie(), Some(types::NODE_ID));
    // Not even a header.
    let e = pfcp::Message::parse(&[]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::TruncatedHeader);
    let e = msg::parse::<HeartbeatRequest>(&[0x20, 0x01, 0x00]).unwrap_err();
    assert_eq!(e.kind, ErrorKind::TruncatedHeader);
}

#[test]
fn grouped_ie_whose_inner_length_overruns_it() {
    // PDI claims 5 octets of content; the Source Interface inside claims 2 value octets.
    let mut bad_pdi = ie(types::PDI, &[0, 20, 0, 2, 0]);
    bad_pdi.truncate(9);
    let pdr = create_pdr(bad_pdi);
    let e = establishment(&[node_id(), fseid(), pdr, good_far()]);
    assert_eq!(
        e.kind,
        ErrorKind::IeOverrun {
            declared: 2,
            available: 1
        }
    );
    assert_eq!(e.ie_type, Some(types::SOURCE_INTERFACE));
    assert_eq!(e.path, vec![types::CREATE_PDR, types::PDI]);
    assert_eq!(e.cause(), CauseValue::INVALID_LENGTH);
    // The same through the generic decoder.
    let m = session_msg(
        50,
        &[
            node_id(),
            fseid(),
            create_pdr(ie(types::PDI, &[0, 20, 0, 2, 0])),
        ],
    );
    let e2 = pfcp::Message::parse(&m).unwrap_err();
    assert_eq!(e2.ie_type, Some(types::SOURCE_INTERFACE));
    assert_eq!(e2.cause(), CauseValue::INVALID_LENGTH);
}

#[test]
fn top_level_ie_overruns_the_message() {
    let mut m = session_msg(50, &[node_id(), fseid()]);
    m.extend_from_slice(&[0, 1, 0, 40, 0, 56]); // Create PDR claiming 40 octets, 2 present
    let len = (m.len() - 4) as u16;
    m[2..4].copy_from_slice(&len.to_be_bytes());
    let e = pfcp::Message::parse(&m).unwrap_err();
    assert_eq!(
        e.kind,
        ErrorKind::IeOverrun {
            declared: 40,
            available: 2
        }
    );
    assert_eq!(e.ie_type, Some(types::CREATE_PDR));
    assert_eq!(e.offset, 16 + 9 + 17);
}

#[test]
fn fteid_without_v4_or_v6() {
    // An explicit F-TEID (CH=0) needs an address. CH=1 alone is accepted: OAI's SMF sends
    // it (docs/interop.md).
    let pdr = create_pdr(pdi(&[
        source_interface(),
        ie(types::FTEID, &[0x00, 0, 0, 0, 1]),
    ]));
    let e = establishment(&[node_id(), fseid(), pdr, good_far()]);
    assert!(matches!(e.kind, ErrorKind::Invalid(_)));
    assert_eq!(e.offending_ie(), Some(types::FTEID));
    assert_eq!(e.cause(), CauseValue::MANDATORY_IE_INCORRECT);
}

#[test]
fn message_length_disagrees_with_datagram() {
    let mut m = node_msg(1, &[ie(types::RECOVERY_TIME_STAMP, &[1, 2, 3, 4])]);
    m.push(0); // one octet more than the Length field says
    let e = pfcp::Message::parse(&m).unwrap_err();
    assert!(matches!(e.kind, ErrorKind::MessageLength { .. }));
    assert_eq!(e.cause(), CauseValue::INVALID_LENGTH);
}

#[test]
fn unsupported_version() {
    let mut m = node_msg(1, &[ie(types::RECOVERY_TIME_STAMP, &[1, 2, 3, 4])]);
    m[0] = 0x40;
    let e = pfcp::Message::parse(&m).unwrap_err();
    assert_eq!(e.kind, ErrorKind::UnsupportedVersion(2));
}

#[test]
fn nesting_is_bounded() {
    // PDI inside PDI inside ... deeper than any real message: rejected, no stack overflow.
    let mut v = source_interface();
    for _ in 0..2000 {
        v = ie(types::PDI, &v);
    }
    let e = pfcp::Message::parse(&session_msg(50, &[v])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::TooDeep);
}

#[test]
fn errors_read_well() {
    let pdr = create_pdr(pdi(&[]));
    let e = establishment(&[node_id(), fseid(), pdr, good_far()]);
    assert_eq!(
        e.to_string(),
        "mandatory IE missing; IE Source Interface (20) in Create PDR > PDI at offset 60; Cause 66 (Mandatory IE missing)"
    );
}
