//! QoS monitoring per QoS flow (TS 29.244 Rel-17, clause 5.24.7 of the procedures): the
//! Session Reporting Rule IEs of the Session Establishment / Modification Request (Tables
//! 7.5.2.9-1 to -4, 7.5.4.19-1, 7.5.4.20-1) and the Session Report of the Session Report
//! Request (Tables 7.5.8.6-1 to -3), decoded from octets laid out as the clauses' figures
//! (8.2.167 to 8.2.171), encoded back, and refused with the IE named when malformed.
//! tshark's view of the same IEs is compared in tshark.rs (the corpus of pfcp-samples).

use pfcp::ie::{
    report_type, reporting_frequency, requested_qos_monitoring, types, Flags,
    PacketDelayThresholds, QosMonitoringMeasurement,
};
use pfcp::msg::{
    self, AccessAvailabilityControlInformation, CreateSrr, Msg,
    QosMonitoringPerQosFlowControlInformation, QosMonitoringReport, RemoveSrr,
    SessionEstablishmentRequest, SessionModificationRequest, SessionReport, SessionReportRequest,
    UpdateSrr,
};
use pfcp::{CauseValue, ErrorKind, HeaderRepr, Message};

/// An IE: type, length, then value octets (clause 8.1.1).
fn ie(t: u16, v: &[u8]) -> Vec<u8> {
    let mut o = t.to_be_bytes().to_vec();
    o.extend_from_slice(&(v.len() as u16).to_be_bytes());
    o.extend_from_slice(v);
    o
}

/// A session message (S=1, SEID 0x11, sequence 7) around `ies`; its header is 16 octets.
fn session_msg(t: u8, ies: &[Vec<u8>]) -> Vec<u8> {
    let body: Vec<u8> = ies.concat();
    let mut m = vec![0x21, t];
    m.extend_from_slice(&((12 + body.len()) as u16).to_be_bytes());
    m.extend_from_slice(&0x11u64.to_be_bytes());
    m.extend_from_slice(&[0, 0, 7, 0]);
    m.extend_from_slice(&body);
    m
}

fn header(message_type: u8) -> HeaderRepr {
    HeaderRepr::session(message_type, 0x11, 7)
}

fn node_id() -> Vec<u8> {
    ie(types::NODE_ID, &[0, 10, 0, 0, 1])
}
fn fseid() -> Vec<u8> {
    ie(types::FSEID, &[0x02, 0, 0, 0, 0, 0, 0, 0, 1, 10, 0, 0, 1])
}
fn pdr_and_far() -> Vec<Vec<u8>> {
    let pdi = ie(types::PDI, &ie(types::SOURCE_INTERFACE, &[0]));
    let pdr = [
        ie(types::PDR_ID, &[0, 1]),
        ie(types::PRECEDENCE, &[0, 0, 0, 255]),
        pdi,
        ie(types::FAR_ID, &[0, 0, 0, 1]),
    ];
    let far = [
        ie(types::FAR_ID, &[0, 0, 0, 1]),
        ie(types::APPLY_ACTION, &[0x02]),
    ];
    vec![
        ie(types::CREATE_PDR, &pdr.concat()),
        ie(types::CREATE_FAR, &far.concat()),
    ]
}

/// QoS Monitoring per QoS flow Control Information (Table 7.5.2.9-3) with `thresholds` as
/// the value of its Packet Delay Thresholds IE, which starts 28 octets into the value.
fn control_octets(thresholds: &[u8]) -> Vec<u8> {
    ie(
        types::QOS_MONITORING_PER_QOS_FLOW_CONTROL_INFORMATION,
        &[
            ie(types::QFI, &[9]),
            ie(types::QFI, &[5]),
            // Figure 8.2.167-1: DL, UL, RP and GTPUPM.
            ie(types::REQUESTED_QOS_MONITORING, &[0x0f]),
            // Figure 8.2.168-1: EVETT and PERIO.
            ie(types::REPORTING_FREQUENCY, &[0x03]),
            ie(types::PACKET_DELAY_THRESHOLDS, thresholds),
            // Figure 8.2.170-1: 30 s.
            ie(types::MINIMUM_WAIT_TIME, &[0, 0, 0, 30]),
            // Figure 8.2.42-1: 60 s.
            ie(types::MEASUREMENT_PERIOD, &[0, 0, 0, 60]),
        ]
        .concat(),
    )
}

/// Figure 8.2.169-1 with DL, UL and RP: 20, 25 and 40 ms.
const THRESHOLDS: [u8; 13] = [0x07, 0, 0, 0, 20, 0, 0, 0, 25, 0, 0, 0, 40];

fn create_srr_octets(thresholds: &[u8]) -> Vec<u8> {
    ie(
        types::CREATE_SRR,
        &[
            ie(types::SRR_ID, &[1]),
            ie(
                types::ACCESS_AVAILABILITY_CONTROL_INFORMATION,
                &ie(types::REQUESTED_ACCESS_AVAILABILITY_INFORMATION, &[0x01]),
            ),
            control_octets(thresholds),
        ]
        .concat(),
    )
}

/// Node ID, F-SEID, then the Create SRR at offset 16 + 9 + 17 = 42, then a PDR and a FAR.
fn establishment_octets(thresholds: &[u8]) -> Vec<u8> {
    let mut ies = vec![node_id(), fseid(), create_srr_octets(thresholds)];
    ies.extend(pdr_and_far());
    session_msg(50, &ies)
}

fn control() -> QosMonitoringPerQosFlowControlInformation {
    QosMonitoringPerQosFlowControlInformation {
        qfis: vec![9, 5],
        requested_qos_monitoring: Flags::from_bits(
            &[
                requested_qos_monitoring::DL,
                requested_qos_monitoring::UL,
                requested_qos_monitoring::RP,
                requested_qos_monitoring::GTPUPM,
            ],
            1,
        ),
        reporting_frequency: Flags::from_bits(
            &[reporting_frequency::EVETT, reporting_frequency::PERIO],
            1,
        ),
        packet_delay_thresholds: Some(PacketDelayThresholds {
            downlink_ms: Some(20),
            uplink_ms: Some(25),
            round_trip_ms: Some(40),
            spare: 0,
        }),
        minimum_wait_time: Some(30),
        measurement_period: Some(60),
        other: vec![],
    }
}

fn create_srr() -> CreateSrr {
    CreateSrr {
        srr_id: 1,
        access_availability_control_information: Some(AccessAvailabilityControlInformation {
            requested_access_availability_information: Flags(vec![0x01]),
            other: vec![],
        }),
        qos_monitoring_per_qos_flow_control_information: vec![control()],
        direct_reporting_information: None,
        other: vec![],
    }
}

#[test]
fn create_srr_decodes_from_the_figures_octets() {
    let bytes = establishment_octets(&THRESHOLDS);
    let (_, m) = msg::parse::<SessionEstablishmentRequest>(&bytes).unwrap();
    assert!(m.other.is_empty(), "nothing left undecoded: {:?}", m.other);
    assert_eq!(m.create_srrs, vec![create_srr()]);
    let c = &m.create_srrs[0].qos_monitoring_per_qos_flow_control_information[0];
    assert!(c
        .requested_qos_monitoring
        .get(requested_qos_monitoring::GTPUPM));
    assert!(!c.reporting_frequency.get(reporting_frequency::SESRL));
}

#[test]
fn create_srr_encodes_to_the_figures_octets() {
    let (_, mut m) =
        msg::parse::<SessionEstablishmentRequest>(&establishment_octets(&[0x01, 0, 0, 0, 1]))
            .unwrap();
    m.create_srrs = vec![create_srr()];
    // The typed encoder writes Table 7.5.2.1-1's order: Create SRR after the PDR and FAR.
    let mut ies = vec![node_id(), fseid()];
    ies.extend(pdr_and_far());
    ies.push(create_srr_octets(&THRESHOLDS));
    assert_eq!(msg::emit(&header(50), &m), session_msg(50, &ies));
}

#[test]
fn packet_delay_thresholds_carry_only_the_flagged_delays() {
    for (octets, want) in [
        (
            vec![0x02, 0, 0, 0x01, 0x2c],
            PacketDelayThresholds {
                uplink_ms: Some(300),
                ..PacketDelayThresholds::default()
            },
        ),
        (
            vec![0x05, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff],
            PacketDelayThresholds {
                downlink_ms: Some(7),
                round_trip_ms: Some(u32::MAX),
                ..PacketDelayThresholds::default()
            },
        ),
        // Spare bits are ignored and kept.
        (
            vec![0x84, 0, 0, 0, 9],
            PacketDelayThresholds {
                round_trip_ms: Some(9),
                spare: 0x80,
                ..PacketDelayThresholds::default()
            },
        ),
    ] {
        let bytes = establishment_octets(&octets);
        let (_, m) = msg::parse::<SessionEstablishmentRequest>(&bytes).unwrap();
        let c = &m.create_srrs[0].qos_monitoring_per_qos_flow_control_information[0];
        assert_eq!(c.packet_delay_thresholds, Some(want), "{octets:02x?}");
        let (h, typed) = Msg::parse(&bytes).unwrap();
        let again = Msg::parse(&typed.emit(&h)).unwrap().1;
        assert_eq!(again, typed, "{octets:02x?}");
    }
}

#[test]
fn packet_delay_thresholds_too_short_for_their_flags() {
    // DL and UL announced, only the downlink threshold present.
    let bytes = establishment_octets(&[0x03, 0, 0, 0, 20]);
    let e = msg::parse::<SessionEstablishmentRequest>(&bytes).unwrap_err();
    assert_eq!(e.kind, ErrorKind::IeTooShort { needed: 9, got: 5 });
    assert_eq!(e.ie_type, Some(types::PACKET_DELAY_THRESHOLDS));
    assert_eq!(
        e.path,
        vec![
            types::CREATE_SRR,
            types::QOS_MONITORING_PER_QOS_FLOW_CONTROL_INFORMATION
        ]
    );
    assert_eq!(e.cause(), CauseValue::INVALID_LENGTH);
    assert_eq!(e.offending_ie(), Some(245));
    // Create SRR at 42, its value at 46; SRR ID 5 and Access Availability Control
    // Information 9 octets -> the control information at 60, its value at 64; two QFIs,
    // Requested QoS Monitoring and Reporting Frequency, 5 octets each -> Packet Delay
    // Thresholds at 84, its value at 88; the uplink threshold would start at +5.
    assert_eq!(e.offset, 88 + 5);
    let text = e.to_string();
    assert!(
        text.contains("Packet Delay Thresholds (245) in Create SRR > QoS Monitoring per QoS flow Control Information"),
        "{text}"
    );
    // The generic tree refuses it the same way.
    assert_eq!(Message::parse(&bytes).unwrap_err(), e);

    let e = msg::parse::<SessionEstablishmentRequest>(&establishment_octets(&[])).unwrap_err();
    assert_eq!(e.kind, ErrorKind::IeTooShort { needed: 1, got: 0 });
    assert_eq!(e.ie_type, Some(types::PACKET_DELAY_THRESHOLDS));
}

#[test]
fn control_information_without_its_mandatory_ies() {
    for (missing, body) in [
        (
            types::QFI,
            [
                ie(types::REQUESTED_QOS_MONITORING, &[0x01]),
                ie(types::REPORTING_FREQUENCY, &[0x02]),
            ]
            .concat(),
        ),
        (
            types::REQUESTED_QOS_MONITORING,
            [
                ie(types::QFI, &[9]),
                ie(types::REPORTING_FREQUENCY, &[0x02]),
            ]
            .concat(),
        ),
        (
            types::REPORTING_FREQUENCY,
            [
                ie(types::QFI, &[9]),
                ie(types::REQUESTED_QOS_MONITORING, &[0x01]),
            ]
            .concat(),
        ),
    ] {
        let srr = ie(
            types::CREATE_SRR,
            &[
                ie(types::SRR_ID, &[1]),
                ie(
                    types::QOS_MONITORING_PER_QOS_FLOW_CONTROL_INFORMATION,
                    &body,
                ),
            ]
            .concat(),
        );
        let mut ies = vec![node_id(), fseid(), srr];
        ies.extend(pdr_and_far());
        let e = msg::parse::<SessionEstablishmentRequest>(&session_msg(50, &ies)).unwrap_err();
        assert_eq!(e.kind, ErrorKind::MandatoryMissing, "{missing}");
        assert_eq!(e.ie_type, Some(missing));
        assert_eq!(e.cause(), CauseValue::MANDATORY_IE_MISSING);
        assert_eq!(
            e.path,
            vec![
                types::CREATE_SRR,
                types::QOS_MONITORING_PER_QOS_FLOW_CONTROL_INFORMATION
            ]
        );
        // Reported at the control information IE: 42 + 4 + SRR ID 5.
        assert_eq!(e.offset, 51, "{missing}");
    }

    let srr = ie(types::CREATE_SRR, &control_octets(&THRESHOLDS));
    let mut ies = vec![node_id(), fseid(), srr];
    ies.extend(pdr_and_far());
    let e = msg::parse::<SessionEstablishmentRequest>(&session_msg(50, &ies)).unwrap_err();
    assert_eq!(e.kind, ErrorKind::MandatoryMissing);
    assert_eq!(e.ie_type, Some(types::SRR_ID));
    assert_eq!(e.path, vec![types::CREATE_SRR]);
}

#[test]
fn modification_removes_creates_and_updates_srrs() {
    let update = ie(
        types::UPDATE_SRR,
        &[
            ie(types::SRR_ID, &[1]),
            ie(
                types::QOS_MONITORING_PER_QOS_FLOW_CONTROL_INFORMATION,
                &[
                    ie(types::QFI, &[9]),
                    ie(types::REQUESTED_QOS_MONITORING, &[0x02]),
                    ie(types::REPORTING_FREQUENCY, &[0x04]),
                ]
                .concat(),
            ),
        ]
        .concat(),
    );
    // Table 7.5.4.1-1's order: Remove SRR, Create SRR, Update SRR.
    let ies = vec![
        ie(types::REMOVE_SRR, &ie(types::SRR_ID, &[2])),
        create_srr_octets(&THRESHOLDS),
        update,
    ];
    let bytes = session_msg(52, &ies);
    let (_, m) = msg::parse::<SessionModificationRequest>(&bytes).unwrap();
    assert!(m.other.is_empty());
    assert_eq!(
        m.remove_srrs,
        vec![RemoveSrr {
            srr_id: 2,
            other: vec![]
        }]
    );
    assert_eq!(m.create_srrs, vec![create_srr()]);
    assert_eq!(
        m.update_srrs,
        vec![UpdateSrr {
            srr_id: 1,
            access_availability_control_information: None,
            qos_monitoring_per_qos_flow_control_information: vec![
                QosMonitoringPerQosFlowControlInformation {
                    qfis: vec![9],
                    requested_qos_monitoring: Flags(vec![0x02]),
                    reporting_frequency: Flags(vec![0x04]),
                    packet_delay_thresholds: None,
                    minimum_wait_time: None,
                    measurement_period: None,
                    other: vec![],
                }
            ],
            direct_reporting_information: None,
            other: vec![],
        }]
    );
    assert_eq!(msg::emit(&header(52), &m), bytes);
}

/// Session Report (Table 7.5.8.6-1) for SRR 1 with one QoS Monitoring Report (Table
/// 7.5.8.6-3) whose measurement value is `measurement`; Report Type SESR at offset 16,
/// Session Report at 21, QoS Monitoring Report at 30, QoS Monitoring Measurement at 39.
fn report_octets(measurement: &[u8]) -> Vec<u8> {
    let qmr = ie(
        types::QOS_MONITORING_REPORT,
        &[
            ie(types::QFI, &[9]),
            ie(types::QOS_MONITORING_MEASUREMENT, measurement),
            // Figure 8.2.114-1: NTP seconds; 2024-01-01 00:00:40 UTC, started 40 s before.
            ie(types::EVENT_TIME_STAMP, &0xe93c_7f28u32.to_be_bytes()),
            ie(types::START_TIME, &0xe93c_7f00u32.to_be_bytes()),
        ]
        .concat(),
    );
    let sr = ie(
        types::SESSION_REPORT,
        &[ie(types::SRR_ID, &[1]), qmr].concat(),
    );
    // Figure 8.2.21-1: SESR is bit 6.
    session_msg(56, &[ie(types::REPORT_TYPE, &[0x20]), sr])
}

#[test]
fn qos_monitoring_report_decodes_from_the_figures_octets() {
    // Figure 8.2.171-1: DL, UL and RP, 12, 15 and 27 ms.
    let bytes = report_octets(&[0x07, 0, 0, 0, 12, 0, 0, 0, 15, 0, 0, 0, 27]);
    let (_, m) = msg::parse::<SessionReportRequest>(&bytes).unwrap();
    assert!(m.other.is_empty());
    let want = QosMonitoringReport {
        qfi: 9,
        qos_monitoring_measurement: QosMonitoringMeasurement {
            downlink_ms: Some(12),
            uplink_ms: Some(15),
            round_trip_ms: Some(27),
            plmf: false,
            spare: 0,
        },
        time_stamp: 0xe93c_7f28,
        start_time: Some(0xe93c_7f00),
        other: vec![],
    };
    let built = SessionReportRequest::session(vec![SessionReport {
        srr_id: 1,
        access_availability_report: None,
        qos_monitoring_reports: vec![want],
        other: vec![],
    }]);
    assert!(built.report_type.get(report_type::SESR));
    assert_eq!(m, built);
    assert_eq!(msg::emit(&header(56), &built), bytes);
}

#[test]
fn qos_monitoring_measurement_forms() {
    for (octets, want) in [
        // PLMF alone: no time stamp came back, no delay.
        (
            vec![0x08],
            QosMonitoringMeasurement {
                plmf: true,
                ..QosMonitoringMeasurement::default()
            },
        ),
        (
            vec![0x02, 0, 0, 0, 3],
            QosMonitoringMeasurement {
                uplink_ms: Some(3),
                ..QosMonitoringMeasurement::default()
            },
        ),
        // Downlink with PLMF, and a spare bit kept.
        (
            vec![0x49, 0, 1, 0, 0],
            QosMonitoringMeasurement {
                downlink_ms: Some(65_536),
                plmf: true,
                spare: 0x40,
                ..QosMonitoringMeasurement::default()
            },
        ),
    ] {
        let bytes = report_octets(&octets);
        let (_, m) = msg::parse::<SessionReportRequest>(&bytes).unwrap();
        let r = &m.session_reports[0].qos_monitoring_reports[0];
        assert_eq!(r.qos_monitoring_measurement, want, "{octets:02x?}");
        assert_eq!(msg::emit(&header(56), &m), bytes, "{octets:02x?}");
    }
}

#[test]
fn qos_monitoring_measurement_flags_a_delay_that_is_missing() {
    // DL and RP announced, only the downlink delay present.
    let bytes = report_octets(&[0x05, 0, 0, 0, 12]);
    let e = msg::parse::<SessionReportRequest>(&bytes).unwrap_err();
    assert_eq!(e.kind, ErrorKind::IeTooShort { needed: 9, got: 5 });
    assert_eq!(e.ie_type, Some(types::QOS_MONITORING_MEASUREMENT));
    assert_eq!(
        e.path,
        vec![types::SESSION_REPORT, types::QOS_MONITORING_REPORT]
    );
    assert_eq!(e.cause(), CauseValue::INVALID_LENGTH);
    // Its value starts at 39 + 4; the round trip delay would start at +5.
    assert_eq!(e.offset, 43 + 5);
    assert!(
        e.to_string()
            .contains("QoS Monitoring Measurement (248) in Session Report > QoS Monitoring Report"),
        "{e}"
    );
    assert_eq!(Message::parse(&bytes).unwrap_err(), e);
}

#[test]
fn qos_monitoring_report_without_its_time_stamp() {
    let qmr = ie(
        types::QOS_MONITORING_REPORT,
        &[
            ie(types::QFI, &[9]),
            ie(types::QOS_MONITORING_MEASUREMENT, &[0x08]),
        ]
        .concat(),
    );
    let sr = ie(
        types::SESSION_REPORT,
        &[ie(types::SRR_ID, &[1]), qmr].concat(),
    );
    let bytes = session_msg(56, &[ie(types::REPORT_TYPE, &[0x20]), sr]);
    let e = msg::parse::<SessionReportRequest>(&bytes).unwrap_err();
    assert_eq!(e.kind, ErrorKind::MandatoryMissing);
    assert_eq!(e.ie_type, Some(types::EVENT_TIME_STAMP));
    assert_eq!(
        e.path,
        vec![types::SESSION_REPORT, types::QOS_MONITORING_REPORT]
    );
    assert_eq!(e.offset, 30);
}

#[test]
fn json_names_the_flags_and_the_delays() {
    let bytes = establishment_octets(&THRESHOLDS);
    let m = Message::parse(&bytes).unwrap();
    let j = serde_json::to_string(&m.to_json()).unwrap();
    for want in [
        r#""name":"Requested QoS Monitoring","value":{"hex":"0f","set":["DL","UL","RP","GTPUPM"]}"#,
        r#""name":"Reporting Frequency","value":{"hex":"03","set":["EVETT","PERIO"]}"#,
        r#""name":"Packet Delay Thresholds","value":{"downlink_ms":20,"uplink_ms":25,"round_trip_ms":40}"#,
    ] {
        assert!(j.contains(want), "{want} not in {j}");
    }
    let m = Message::parse(&report_octets(&[0x09, 0, 0, 0, 12])).unwrap();
    let j = serde_json::to_string(&m.to_json()).unwrap();
    let want = r#""name":"QoS Monitoring Measurement","value":{"downlink_ms":12,"plmf":true}"#;
    assert!(j.contains(want), "{want} not in {j}");
}
