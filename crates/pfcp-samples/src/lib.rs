//! Test vectors for the PFCP codec (crates/pfcp), kept out of its API: a corpus of PFCP messages that together hold every message type of
//! TS 29.244 clause 7 and every IE type this codec interprets, with representative values.
//!
//! Use it as known-good input: for round-trip and property tests, as fuzz seeds, for
//! differential tests against other decoders (`crates/pfcp/tests/tshark.rs` writes it to a
//! pcap and compares with tshark), and in tools that need a sample of each message.
//!
//! ```
//! for s in pfcp_samples::corpus() {
//!     let m = pfcp::Message::parse(&s.bytes).unwrap();
//!     assert_eq!(m.emit(), s.bytes, "{}", s.name);
//! }
//! ```
//!
//! Messages are built through the typed API ([`pfcp::msg`]) wherever a typed struct
//! exists; IEs that no typed struct names (MAR, TSC, ATSSS, L2TP ... groups) are
//! placed as generic [`Ie`]s in the `other` list of the message or group where the
//! specification puts them. IEs carried opaque ([`pfcp::ie::Bytes`]) appear only where a
//! grouped IE needs them. Addresses are documentation ranges (192.0.2.0/24, 198.51.100.0/24,
//! 2001:db8::/32); times are NTP seconds around 2024-01-01.
//!
//! The samples are vectors, not a conversation: to show every IE, a message may hold IEs
//! that only one side of an exchange sends (the Association Setup Request carries both UP-
//! and CP-side IEs). A sample whose header has FO set must travel bundled with the next
//! one; [`datagrams`] does that.

pub mod quirks;

use std::net::{Ipv4Addr, Ipv6Addr};

use pfcp::header::HeaderRepr;
use pfcp::ie::{
    apply_action, cp_function_features, measurement_method, node_report_type, report_type,
    reporting_frequency, reporting_triggers, requested_qos_monitoring, up_function_features,
    usage_report_trigger, Bitrate, Bytes, CauseValue, DlFlowLevelMarking,
    DownlinkDataServiceInformation, DroppedDlTrafficThreshold, FSeid, FTeid, FailedRuleId, Flags,
    FlowInformation, ForwardingPolicy, FqCsid, GprsTimer, HeaderEnrichment, Ie, Interface,
    IpAddresses, MacAddress, MacAddresses, Multiplier, Name, NodeId, OuterHeaderCreation,
    OuterHeaderRemoval, PacketCount, PacketDelayThresholds, PacketRate, PfdContents,
    QosMonitoringMeasurement, Rate, RedirectInformation, RemoteGtpuPeer, SNssai, SdfFilter,
    SmfSetId, SourceIpAddress, Text, TimeQuotaMechanism, UeIpAddress, UeIpAddressPoolIdentity,
    UserId, UserPlaneIpResourceInformation, VlanTag, Volume, VolumeMeasurement,
};
use pfcp::message::message_type as mt;
use pfcp::msg::*;

/// One test vector: a whole PFCP message (a UDP payload) and a name saying what it shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    pub name: &'static str,
    pub bytes: Vec<u8>,
}

/// Every sample, in a stable order: node messages, then session messages. Each parses with
/// [`pfcp::Message::parse`] and [`pfcp::msg::Msg::parse`] and re-encodes to its octets.
pub fn corpus() -> Vec<Sample> {
    vec![
        heartbeat_request(),
        heartbeat_request_source_mask(),
        heartbeat_response(),
        pfd_management_request(),
        pfd_management_response(),
        association_setup_request(),
        association_setup_response(),
        association_update_request(),
        association_update_response(),
        association_release_request(),
        association_release_response(),
        version_not_supported_response(),
        node_report_request(),
        node_report_response(),
        session_set_deletion_request(),
        session_set_deletion_response(),
        session_set_modification_request(),
        session_set_modification_response(),
        session_establishment_request(),
        session_establishment_request_ethernet(),
        session_establishment_request_choose(),
        session_establishment_response(),
        session_modification_request(),
        session_modification_request_outer_headers(),
        session_modification_response(),
        session_deletion_request(),
        session_deletion_response(),
        session_report_request_follow_on(),
        session_report_request(),
        session_report_response(),
    ]
}

/// The corpus as UDP payloads. A sample whose header has FO (Follow On) set is bundled
/// with the samples after it in one datagram, as clause 7.2.1A requires; every other
/// sample is a datagram of its own. Each item is the names of the samples it holds and
/// the payload.
pub fn datagrams(samples: &[Sample]) -> Vec<(Vec<&'static str>, Vec<u8>)> {
    let mut out: Vec<(Vec<&'static str>, Vec<u8>)> = Vec::new();
    let mut open = false;
    for s in samples {
        if !open {
            out.push((Vec::new(), Vec::new()));
        }
        let last = out.last_mut().expect("pushed above");
        last.0.push(s.name);
        last.1.extend_from_slice(&s.bytes);
        // FO is bit 3 of the first header octet (clause 7.2.2.1).
        open = s.bytes.first().is_some_and(|f| f & 0x04 != 0);
    }
    out
}

// Addresses and identities shared by the samples.
const SMF_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
const SMF_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x10);
const UPF_V4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 20);
const UPF_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x20);
const N3_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
const N3_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 3, 0, 0, 0, 1);
const GNB_V4: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const GNB_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0, 3, 0, 0, 0, 2);
const UE_V4: Ipv4Addr = Ipv4Addr::new(10, 45, 0, 2);
const UE_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0xcafe, 0, 0, 0, 0, 0);
/// 2024-01-01 00:00:00 UTC in NTP seconds (clause 8.2.65 counts from 1900).
const T0: u32 = 3_913_056_000;
const CP_SEID: u64 = 0x0000_0000_0000_0001;
const UP_SEID: u64 = 0x1122_3344_5566_7788;

fn sample(name: &'static str, bytes: Vec<u8>) -> Sample {
    Sample { name, bytes }
}

fn node(t: u8, seq: u32) -> HeaderRepr {
    HeaderRepr::node(t, seq)
}

fn session(t: u8, seid: u64, seq: u32) -> HeaderRepr {
    HeaderRepr::session(t, seid, seq)
}

fn flags(bits: &[u16]) -> Flags {
    Flags::from_bits(bits, 1)
}

fn smf_node_id() -> NodeId {
    NodeId::Ipv4(SMF_V4)
}

fn upf_node_id() -> NodeId {
    NodeId::Ipv4(UPF_V4)
}

fn cp_fseid() -> FSeid {
    FSeid {
        spare: 0,
        seid: CP_SEID,
        ipv4: Some(SMF_V4),
        ipv6: None,
    }
}

fn up_fseid() -> FSeid {
    FSeid {
        spare: 0,
        seid: UP_SEID,
        ipv4: Some(UPF_V4),
        ipv6: Some(UPF_V6),
    }
}

/// TBCD digits (TS 29.274 clause 8.3).
fn tbcd(digits: &str) -> Vec<u8> {
    pfcp::ie::tbcd_encode(digits)
}

fn sdf(flow: &str) -> SdfFilter {
    SdfFilter {
        flow_description: Some(flow.as_bytes().to_vec()),
        ..SdfFilter::default()
    }
}

fn ue_ip_dst(a: Ipv4Addr) -> UeIpAddress {
    UeIpAddress {
        ipv4: Some(a),
        destination: true,
        ..UeIpAddress::default()
    }
}

fn empty_pdi(source_interface: Interface) -> Pdi {
    Pdi {
        source_interface,
        local_fteid: None,
        network_instance: None,
        ue_ip_address: vec![],
        traffic_endpoint_ids: vec![],
        sdf_filters: vec![],
        application_id: None,
        ethernet_pdu_session_information: None,
        ethernet_packet_filters: vec![],
        qfis: vec![],
        framed_routes: vec![],
        framed_routing: None,
        framed_ipv6_routes: vec![],
        source_interface_type: None,
        other: vec![],
    }
}

fn create_pdr(pdr_id: u16, precedence: u32, pdi: Pdi, far_id: u32) -> CreatePdr {
    CreatePdr {
        pdr_id,
        precedence: Some(precedence),
        pdi,
        outer_header_removal: None,
        far_id: Some(far_id),
        urr_ids: vec![],
        qer_ids: vec![],
        activate_predefined_rules: vec![],
        activation_time: None,
        deactivation_time: None,
        mar_id: None,
        packet_replication_and_detection_carry_on_information: None,
        ue_ip_address_pool_identity: vec![],
        mptcp_applicable_indication: None,
        other: vec![],
    }
}

fn forwarding(destination_interface: Interface) -> ForwardingParameters {
    ForwardingParameters {
        destination_interface,
        network_instance: None,
        redirect_information: None,
        outer_header_creation: None,
        transport_level_marking: None,
        forwarding_policy: None,
        header_enrichment: None,
        linked_traffic_endpoint_id: None,
        proxying: None,
        destination_interface_type: None,
        data_network_access_identifier: None,
        other: vec![],
    }
}

fn create_far(far_id: u32, apply: Flags, fp: Option<ForwardingParameters>) -> CreateFar {
    CreateFar {
        far_id,
        apply_action: apply,
        forwarding_parameters: fp,
        duplicating_parameters: vec![],
        bar_id: None,
        other: vec![],
    }
}

fn create_qer(qer_id: u32) -> CreateQer {
    CreateQer {
        qer_id,
        qer_correlation_id: None,
        gate_status: 0,
        mbr: None,
        gbr: None,
        packet_rate: None,
        dl_flow_level_marking: None,
        qfi: None,
        rqi: None,
        paging_policy_indicator: None,
        averaging_window: None,
        qer_control_indications: None,
        other: vec![],
    }
}

fn update_pdr(pdr_id: u16) -> UpdatePdr {
    UpdatePdr {
        pdr_id,
        outer_header_removal: None,
        precedence: None,
        pdi: None,
        far_id: None,
        urr_ids: vec![],
        qer_ids: vec![],
        activate_predefined_rules: vec![],
        deactivate_predefined_rules: vec![],
        activation_time: None,
        deactivation_time: None,
        other: vec![],
    }
}

fn update_far(far_id: u32) -> UpdateFar {
    UpdateFar {
        far_id,
        apply_action: None,
        update_forwarding_parameters: None,
        update_duplicating_parameters: vec![],
        bar_id: None,
        other: vec![],
    }
}

fn update_forwarding() -> UpdateForwardingParameters {
    UpdateForwardingParameters {
        destination_interface: None,
        network_instance: None,
        redirect_information: None,
        outer_header_creation: None,
        transport_level_marking: None,
        forwarding_policy: None,
        header_enrichment: None,
        pfcpsm_req_flags: None,
        linked_traffic_endpoint_id: None,
        destination_interface_type: None,
        data_network_access_identifier: None,
        other: vec![],
    }
}

fn remote_peer_v4() -> RemoteGtpuPeer {
    RemoteGtpuPeer {
        spare: 0,
        ipv4: Some(GNB_V4),
        ipv6: None,
        destination_interface: Some(Interface::ACCESS),
        network_instance: Some(Name::labels("access.5gc")),
    }
}

fn remote_peer_v6() -> RemoteGtpuPeer {
    RemoteGtpuPeer {
        spare: 0,
        ipv4: None,
        ipv6: Some(GNB_V6),
        destination_interface: None,
        network_instance: None,
    }
}

fn s_nssai() -> SNssai {
    SNssai {
        sst: 1,
        sd: 0x010203,
    }
}

fn pool_info() -> UeIpAddressPoolInformation {
    UeIpAddressPoolInformation {
        pool_identities: vec![UeIpAddressPoolIdentity(Text::new("pool-1"))],
        network_instance: Some(Name::labels("internet")),
        s_nssais: vec![s_nssai()],
        ip_version: Some(flags(&[1, 2])),
        other: vec![],
    }
}

fn gtpu_path_qos_control() -> GtpuPathQosControlInformation {
    GtpuPathQosControlInformation {
        remote_gtpu_peers: vec![remote_peer_v4()],
        gtpu_path_interface_type: Some(flags(&[1])),
        qos_report_trigger: Some(flags(&[1, 2])),
        transport_level_marking: Some(0xb8fc),
        measurement_period: Some(300),
        average_packet_delay: Some(20),
        minimum_packet_delay: Some(5),
        maximum_packet_delay: Some(80),
        timer: Some(GprsTimer(0x21)),
        other: vec![],
    }
}

fn fq_csid_v4() -> FqCsid {
    FqCsid {
        node_id_type: 0,
        node_address: Bytes(SMF_V4.octets().to_vec()),
        csids: vec![1, 2],
    }
}

fn fq_csid_v6() -> FqCsid {
    FqCsid {
        node_id_type: 1,
        node_address: Bytes(UPF_V6.octets().to_vec()),
        csids: vec![0x0100],
    }
}

/// MCC 001, MNC 01 as 20 bits (MCC x 1000 + MNC), then a 12-bit node identifier.
fn fq_csid_plmn() -> FqCsid {
    let (mcc, mnc) = (1u32, 1u32);
    let v = ((mcc * 1000 + mnc) << 12) | 0x0ab;
    FqCsid {
        node_id_type: 2,
        node_address: Bytes(v.to_be_bytes().to_vec()),
        csids: vec![7, 8, 9],
    }
}

fn load_control() -> LoadControlInformation {
    LoadControlInformation {
        sequence_number: 12,
        metric: 40,
        other: vec![],
    }
}

fn overload_control() -> OverloadControlInformation {
    OverloadControlInformation {
        sequence_number: 13,
        metric: 60,
        period_of_validity: GprsTimer(0x25),
        oci_flags: Some(flags(&[1])),
        other: vec![],
    }
}

fn created_bridge_info() -> Ie {
    Ie::CreatedBridgeInfoForTsc(vec![Ie::DsttPortNumber(17), Ie::NwttPortNumber(18)])
}

fn tsc_management(container: fn(Vec<Ie>) -> Ie) -> Ie {
    container(vec![
        Ie::PortManagementInformationContainer(Bytes(vec![0xde, 0xad, 0xbe, 0xef])),
        Ie::NwttPortNumber(18),
    ])
}

/// 10 uplink packets remaining, then the Rate Control Status Validity Time as a 64-bit NTP
/// timestamp (clause 8.2.139).
fn packet_rate_status() -> Vec<u8> {
    let mut v = vec![0x01, 0x00, 0x0a];
    v.extend_from_slice(&((T0 as u64 + 3600) << 32).to_be_bytes());
    v
}

/// QoS monitoring of QFI 9 (Table 7.5.2.9-3): downlink, uplink and round trip, reported on
/// thresholds (all three set) and periodically.
fn qos_monitoring_control() -> QosMonitoringPerQosFlowControlInformation {
    QosMonitoringPerQosFlowControlInformation {
        qfis: vec![9],
        requested_qos_monitoring: flags(&[
            requested_qos_monitoring::DL,
            requested_qos_monitoring::UL,
            requested_qos_monitoring::RP,
        ]),
        reporting_frequency: flags(&[reporting_frequency::EVETT, reporting_frequency::PERIO]),
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
            requested_access_availability_information: flags(&[1]),
            other: vec![],
        }),
        qos_monitoring_per_qos_flow_control_information: vec![qos_monitoring_control()],
        direct_reporting_information: Some(DirectReportingInformation {
            event_notification_uri: Bytes(b"https://nwdaf.example.com/notify".to_vec()),
            notification_correlation_id: Some(Bytes(b"corr-1".to_vec())),
            reporting_flags: None,
            other: vec![],
        }),
        other: vec![],
    }
}

// ---------------------------------------------------------------------------------------
// Node messages, clause 7.4.

fn heartbeat_request() -> Sample {
    let b = HeartbeatRequest {
        recovery_time_stamp: T0,
        source_ip_address: Some(SourceIpAddress {
            spare: 0,
            ipv4: Some(SMF_V4),
            ipv6: Some(SMF_V6),
            mask_prefix_length: None,
        }),
        other: vec![],
    };
    sample(
        "heartbeat-request",
        emit(&node(mt::HEARTBEAT_REQUEST, 1), &b),
    )
}

/// Source IP Address with a mask length: the example of clause 8.2.138 (192.0.2.10/24).
fn heartbeat_request_source_mask() -> Sample {
    let b = HeartbeatRequest {
        recovery_time_stamp: T0,
        source_ip_address: Some(SourceIpAddress {
            spare: 0,
            ipv4: Some(SMF_V4),
            ipv6: None,
            mask_prefix_length: Some(24),
        }),
        other: vec![],
    };
    sample(
        "heartbeat-request/source-mask",
        emit(&node(mt::HEARTBEAT_REQUEST, 2), &b),
    )
}

fn heartbeat_response() -> Sample {
    let b = HeartbeatResponse {
        recovery_time_stamp: T0 + 3600,
        other: vec![],
    };
    sample(
        "heartbeat-response",
        emit(&node(mt::HEARTBEAT_RESPONSE, 1), &b),
    )
}

fn pfd_management_request() -> Sample {
    let contents = PfdContents {
        flow_description: Some(Text::new("permit out ip from 192.0.2.0/24 to assigned")),
        url: Some(Text::new("http://video.example.com/")),
        domain_name: Some(Text::new("example.com")),
        custom_pfd_content: Some(Bytes(vec![0x01, 0x02, 0x03])),
        domain_name_protocol: Some(Text::new("tls")),
        ..PfdContents::default()
    };
    let url_only = PfdContents {
        url: Some(Text::new("http://www.example.org/index.html")),
        ..PfdContents::default()
    };
    let b = PfdManagementRequest {
        application_ids_pfds: vec![
            ApplicationIdsPfds {
                application_id: Text::new("video-streaming"),
                pfd_contexts: vec![PfdContext {
                    pfd_contents: vec![contents, url_only],
                    other: vec![],
                }],
                other: vec![],
            },
            ApplicationIdsPfds {
                application_id: Text::new("web"),
                pfd_contexts: vec![],
                other: vec![],
            },
        ],
        node_id: Some(NodeId::Fqdn(Name::labels(
            "smf.5gc.mnc001.mcc001.3gppnetwork.org",
        ))),
        other: vec![],
    };
    sample(
        "pfd-management-request",
        emit(&node(mt::PFD_MANAGEMENT_REQUEST, 2), &b),
    )
}

fn pfd_management_response() -> Sample {
    let b = PfdManagementResponse {
        cause: CauseValue::MANDATORY_IE_INCORRECT,
        offending_ie: Some(pfcp::ie::types::PFD_CONTENTS),
        node_id: Some(upf_node_id()),
        other: vec![],
    };
    sample(
        "pfd-management-response",
        emit(&node(mt::PFD_MANAGEMENT_RESPONSE, 2), &b),
    )
}

fn association_setup_request() -> Sample {
    use up_function_features as f;
    let b = AssociationSetupRequest {
        node_id: upf_node_id(),
        recovery_time_stamp: T0,
        up_function_features: Some(Flags::from_bits(
            &[
                f::BUCP,
                f::DDND,
                f::FTUP,
                f::PDIU,
                f::UEIP,
                f::MPAS,
                f::ETHAR,
            ],
            6,
        )),
        cp_function_features: None,
        user_plane_ip_resource_information: vec![
            UserPlaneIpResourceInformation {
                spare: 0,
                teid_range_bits: 2,
                teid_range: Some(1),
                ipv4: Some(N3_V4),
                ipv6: Some(N3_V6),
                network_instance: Some(Name::labels("access.5gc")),
                source_interface: Some(Interface::ACCESS),
            },
            UserPlaneIpResourceInformation {
                spare: 0,
                teid_range_bits: 0,
                teid_range: None,
                ipv4: Some(N3_V4),
                ipv6: None,
                network_instance: None,
                source_interface: None,
            },
        ],
        alternative_smf_ip_addresses: vec![],
        smf_set_id: None,
        pfcp_session_retention_information: Some(PfcpSessionRetentionInformation {
            cp_pfcp_entity_ip_addresses: vec![
                IpAddresses {
                    ipv4: Some(SMF_V4),
                    ipv6: None,
                    other_flags: 0,
                },
                IpAddresses {
                    ipv4: Some(Ipv4Addr::new(192, 0, 2, 11)),
                    ipv6: Some(SMF_V6),
                    other_flags: 0,
                },
            ],
            other: vec![],
        }),
        ue_ip_address_pool_information: vec![pool_info()],
        gtpu_path_qos_control_information: vec![gtpu_path_qos_control()],
        pfcpas_req_flags: Some(flags(&[1])),
        other: vec![Ie::ClockDriftControlInformation(vec![
            Ie::RequestedClockDriftInformation(flags(&[1, 2])),
            Ie::TsnTimeDomainNumber(3),
            Ie::TimeOffsetThreshold(Bytes(vec![0, 0, 0, 0, 0, 0, 0x03, 0xe8])),
        ])],
    };
    sample(
        "association-setup-request",
        emit(&node(mt::ASSOCIATION_SETUP_REQUEST, 3), &b),
    )
}

fn association_setup_response() -> Sample {
    use cp_function_features as f;
    let b = AssociationSetupResponse {
        node_id: NodeId::Ipv6(SMF_V6),
        cause: CauseValue::REQUEST_ACCEPTED,
        recovery_time_stamp: T0 - 86_400,
        up_function_features: None,
        cp_function_features: Some(Flags::from_bits(
            &[f::LOAD, f::OVRL, f::EPFAR, f::UIAUR, f::PSUCC],
            2,
        )),
        user_plane_ip_resource_information: vec![],
        alternative_smf_ip_addresses: vec![
            IpAddresses {
                ipv4: Some(Ipv4Addr::new(192, 0, 2, 11)),
                ipv6: None,
                other_flags: 0x04,
            },
            IpAddresses {
                ipv4: Some(Ipv4Addr::new(192, 0, 2, 12)),
                ipv6: Some(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x12)),
                other_flags: 0,
            },
        ],
        smf_set_id: Some(SmfSetId {
            fqdn: Name::labels("set1.smfset.5gc.mnc001.mcc001.3gppnetwork.org"),
            spare: 0,
        }),
        pfcpas_rsp_flags: Some(flags(&[1, 2])),
        ue_ip_address_pool_information: vec![],
        gtpu_path_qos_control_information: vec![],
        other: vec![],
    };
    sample(
        "association-setup-response",
        emit(&node(mt::ASSOCIATION_SETUP_RESPONSE, 3), &b),
    )
}

fn association_update_request() -> Sample {
    let b = AssociationUpdateRequest {
        node_id: NodeId::Fqdn(Name::labels("upf1.5gc.mnc001.mcc001.3gppnetwork.org")),
        up_function_features: Some(Flags::from_bits(&[up_function_features::EMPU], 2)),
        cp_function_features: None,
        user_plane_ip_resource_information: vec![],
        pfcp_association_release_request: Some(flags(&[1, 2])),
        graceful_release_period: Some(GprsTimer::from_seconds(120)),
        pfcpau_req_flags: Some(flags(&[1])),
        alternative_smf_ip_addresses: vec![IpAddresses {
            ipv4: None,
            ipv6: Some(SMF_V6),
            other_flags: 0,
        }],
        smf_set_id: None,
        ue_ip_address_pool_information: vec![],
        gtpu_path_qos_control_information: vec![],
        other: vec![Ie::UeIpAddressUsageInformation(vec![
            Ie::SequenceNumber(5),
            Ie::NumberOfUeIpAddresses(Bytes(vec![0x02, 0x00, 0x00, 0x10, 0x00])),
            Ie::ValidityTimer(600),
            Ie::NetworkInstance(Name::labels("internet")),
            Ie::UeIpAddressPoolIdentity(UeIpAddressPoolIdentity(Text::new("pool-1"))),
            Ie::SNssai(s_nssai()),
        ])],
    };
    sample(
        "association-update-request",
        emit(&node(mt::ASSOCIATION_UPDATE_REQUEST, 4), &b),
    )
}

fn association_update_response() -> Sample {
    let b = AssociationUpdateResponse {
        node_id: smf_node_id(),
        cause: CauseValue::REQUEST_ACCEPTED,
        up_function_features: None,
        cp_function_features: Some(flags(&[cp_function_features::LOAD])),
        other: vec![],
    };
    sample(
        "association-update-response",
        emit(&node(mt::ASSOCIATION_UPDATE_RESPONSE, 4), &b),
    )
}

fn association_release_request() -> Sample {
    let b = AssociationReleaseRequest {
        node_id: smf_node_id(),
        other: vec![],
    };
    sample(
        "association-release-request",
        emit(&node(mt::ASSOCIATION_RELEASE_REQUEST, 5), &b),
    )
}

fn association_release_response() -> Sample {
    let b = AssociationReleaseResponse {
        node_id: upf_node_id(),
        cause: CauseValue::REQUEST_ACCEPTED,
        other: vec![],
    };
    sample(
        "association-release-response",
        emit(&node(mt::ASSOCIATION_RELEASE_RESPONSE, 5), &b),
    )
}

fn version_not_supported_response() -> Sample {
    let b = VersionNotSupportedResponse { other: vec![] };
    sample(
        "version-not-supported-response",
        emit(&node(mt::VERSION_NOT_SUPPORTED_RESPONSE, 6), &b),
    )
}

fn node_report_request() -> Sample {
    use node_report_type as t;
    let b = NodeReportRequest {
        node_id: upf_node_id(),
        node_report_type: flags(&[t::UPFR, t::UPRR, t::CKDR, t::GPQR]),
        user_plane_path_failure_report: Some(UserPlanePathFailureReport {
            remote_gtpu_peers: vec![remote_peer_v4(), remote_peer_v6()],
            other: vec![],
        }),
        user_plane_path_recovery_report: Some(UserPlanePathRecoveryReport {
            remote_gtpu_peers: vec![remote_peer_v6()],
            other: vec![],
        }),
        gtpu_path_qos_reports: vec![GtpuPathQosReport {
            remote_gtpu_peer: remote_peer_v4(),
            gtpu_path_interface_type: Some(flags(&[1])),
            qos_report_trigger: flags(&[2]),
            time_stamp: T0 + 20,
            start_time: Some(T0),
            qos_information: vec![QosInformationInGtpuPathQosReport {
                average_packet_delay: 21,
                minimum_packet_delay: Some(6),
                maximum_packet_delay: Some(81),
                transport_level_marking: Some(0xb8fc),
                other: vec![],
            }],
            other: vec![],
        }],
        other: vec![Ie::ClockDriftReport(vec![
            Ie::TsnTimeDomainNumber(3),
            Ie::TimeOffsetMeasurement(Bytes(vec![0, 0, 0, 0, 0, 0, 0x07, 0xd0])),
            Ie::EventTimeStamp(T0 + 10),
        ])],
    };
    sample(
        "node-report-request",
        emit(&node(mt::NODE_REPORT_REQUEST, 7), &b),
    )
}

fn node_report_response() -> Sample {
    let b = NodeReportResponse {
        node_id: smf_node_id(),
        cause: CauseValue::REQUEST_ACCEPTED,
        offending_ie: None,
        other: vec![],
    };
    sample(
        "node-report-response",
        emit(&node(mt::NODE_REPORT_RESPONSE, 7), &b),
    )
}

fn session_set_deletion_request() -> Sample {
    let b = SessionSetDeletionRequest {
        node_id: smf_node_id(),
        fq_csids: vec![fq_csid_v4(), fq_csid_v6(), fq_csid_plmn()],
        other: vec![],
    };
    sample(
        "session-set-deletion-request",
        emit(&node(mt::SESSION_SET_DELETION_REQUEST, 8), &b),
    )
}

fn session_set_deletion_response() -> Sample {
    let b = SessionSetDeletionResponse {
        node_id: upf_node_id(),
        cause: CauseValue::REQUEST_REJECTED,
        offending_ie: Some(pfcp::ie::types::FQ_CSID),
        other: vec![],
    };
    sample(
        "session-set-deletion-response",
        emit(&node(mt::SESSION_SET_DELETION_RESPONSE, 8), &b),
    )
}

fn session_set_modification_request() -> Sample {
    let b = SessionSetModificationRequest {
        alternative_smf_ip_address: IpAddresses {
            ipv4: Some(Ipv4Addr::new(192, 0, 2, 11)),
            ipv6: None,
            other_flags: 0,
        },
        fq_csids: vec![fq_csid_v4()],
        other: vec![Ie::PfcpSessionChangeInfo(vec![
            Ie::AlternativeSmfIpAddress(IpAddresses {
                ipv4: Some(Ipv4Addr::new(192, 0, 2, 12)),
                ipv6: None,
                other_flags: 0,
            }),
            Ie::FqCsid(fq_csid_v4()),
        ])],
    };
    sample(
        "session-set-modification-request",
        emit(&node(mt::SESSION_SET_MODIFICATION_REQUEST, 9), &b),
    )
}

fn session_set_modification_response() -> Sample {
    let b = SessionSetModificationResponse {
        node_id: upf_node_id(),
        cause: CauseValue::REQUEST_ACCEPTED,
        offending_ie: None,
        other: vec![],
    };
    sample(
        "session-set-modification-response",
        emit(&node(mt::SESSION_SET_MODIFICATION_RESPONSE, 9), &b),
    )
}

// ---------------------------------------------------------------------------------------
// Session messages, clause 7.5.

/// The usual IP session: an uplink PDR on N3 with an explicit IPv4 F-TEID, a downlink PDR
/// with SDF filters and the UE address, FARs, a URR with every threshold, QERs, a BAR and
/// a traffic endpoint; then the Rel-16/17 groups an SMF may add.
fn session_establishment_request() -> Sample {
    let mut ul = empty_pdi(Interface::ACCESS);
    ul.local_fteid = Some(FTeid::new(0x0000_1001, Some(N3_V4), None));
    ul.network_instance = Some(Name::labels("access.5gc"));
    ul.ue_ip_address = vec![UeIpAddress {
        ipv4: Some(UE_V4),
        ..UeIpAddress::default()
    }];
    ul.qfis = vec![9];
    ul.source_interface_type = Some(11); // N3 3GPP Access (clause 8.2.118)
    ul.other = vec![
        Ie::RedundantTransmissionParameters(vec![
            Ie::FTeid(FTeid::new(
                0x0000_1002,
                Some(Ipv4Addr::new(198, 51, 100, 3)),
                None,
            )),
            Ie::NetworkInstance(Name::plain("access-redundant")),
        ]),
        Ie::IpMulticastAddressingInfo(vec![
            Ie::IpMulticastAddress(Bytes(vec![0x02, 232, 1, 1, 1])),
            Ie::SourceIpAddress(SourceIpAddress {
                spare: 0,
                ipv4: Some(Ipv4Addr::new(192, 0, 2, 99)),
                ipv6: None,
                mask_prefix_length: None,
            }),
        ]),
    ];
    let mut pdr_ul = create_pdr(1, 100, ul, 1);
    pdr_ul.outer_header_removal = Some(OuterHeaderRemoval {
        description: OuterHeaderRemoval::GTPU_UDP_IPV4,
        ext_header_deletion: Some(1),
    });
    pdr_ul.urr_ids = vec![1];
    pdr_ul.qer_ids = vec![1, 2];
    pdr_ul.activation_time = Some(T0 + 5);
    pdr_ul.deactivation_time = Some(T0 + 86_400);
    pdr_ul.mar_id = Some(1);
    pdr_ul.packet_replication_and_detection_carry_on_information = Some(flags(&[1, 4]));
    pdr_ul.ue_ip_address_pool_identity = vec![UeIpAddressPoolIdentity(Text::new("pool-1"))];
    pdr_ul.mptcp_applicable_indication = Some(flags(&[1]));

    let mut dl = empty_pdi(Interface::CORE);
    dl.network_instance = Some(Name::plain("internet"));
    dl.ue_ip_address = vec![ue_ip_dst(UE_V4)];
    dl.sdf_filters = vec![
        SdfFilter {
            flow_description: Some(b"permit out ip from any to assigned".to_vec()),
            filter_id: Some(1),
            ..SdfFilter::default()
        },
        SdfFilter {
            tos_traffic_class: Some(0xb8fc),
            spi: Some(0x0000_1234),
            flow_label: Some(0x0a_bcde),
            filter_id: Some(2),
            ..SdfFilter::default()
        },
        SdfFilter {
            spare: 0,
            spare_octet: 0,
            flow_description: Some(b"permit out 17 from 192.0.2.0/24 5060 to assigned".to_vec()),
            tos_traffic_class: Some(0x2efc),
            spi: Some(7),
            flow_label: Some(0x1),
            filter_id: Some(3),
        },
    ];
    dl.application_id = Some(Text::new("video-streaming"));
    dl.framed_routes = vec![Text::new("198.51.100.128/25 0.0.0.0 1")];
    dl.framed_routing = Some(1);
    dl.framed_ipv6_routes = vec![Text::new("2001:db8:beef::/48 :: 1")];
    let mut pdr_dl = create_pdr(2, 200, dl, 2);
    pdr_dl.urr_ids = vec![1];
    pdr_dl.qer_ids = vec![1];
    pdr_dl.activate_predefined_rules = vec![Text::new("rule-gold")];

    let mut te_pdi = empty_pdi(Interface::ACCESS);
    te_pdi.traffic_endpoint_ids = vec![1];
    let pdr_te = create_pdr(3, 300, te_pdi, 3);

    let mut fp_core = forwarding(Interface::CORE);
    fp_core.network_instance = Some(Name::labels("internet"));
    fp_core.forwarding_policy = Some(ForwardingPolicy(Text::new("policy-a")));
    fp_core.header_enrichment = Some(HeaderEnrichment {
        header_type: 0,
        name: Text::new("X-MSISDN"),
        value: Text::new("15551234567"),
    });
    fp_core.proxying = Some(flags(&[1, 2]));
    fp_core.destination_interface_type = Some(17); // N6 (clause 8.2.118)
    fp_core.data_network_access_identifier = Some(Text::new("dnai-edge-1"));
    fp_core.other = vec![Ie::RedundantTransmissionForwardingParameters(vec![
        Ie::OuterHeaderCreation(OuterHeaderCreation::gtpu_ipv4(
            0x0000_2002,
            Ipv4Addr::new(198, 51, 100, 4),
        )),
        Ie::NetworkInstance(Name::labels("access.5gc")),
    ])];
    let mut far_ul = create_far(1, flags(&[apply_action::FORW]), Some(fp_core));
    far_ul.duplicating_parameters = vec![DuplicatingParameters {
        destination_interface: Interface::CP_FUNCTION,
        outer_header_creation: Some(OuterHeaderCreation {
            description: OuterHeaderCreation::UDP_IPV4,
            teid: None,
            ipv4: Some(Ipv4Addr::new(192, 0, 2, 50)),
            ipv6: None,
            port: Some(9000),
            c_tag: None,
            s_tag: None,
        }),
        transport_level_marking: Some(0x28fc),
        forwarding_policy: Some(ForwardingPolicy(Text::new("li"))),
        other: vec![],
    }];

    let mut fp_access = forwarding(Interface::ACCESS);
    fp_access.network_instance = Some(Name::plain("access"));
    fp_access.outer_header_creation = Some(OuterHeaderCreation::gtpu_ipv4(0x0000_2001, GNB_V4));
    fp_access.transport_level_marking = Some(0xb8fc);
    fp_access.linked_traffic_endpoint_id = Some(1);
    let mut far_dl = create_far(
        2,
        Flags::from_bits(&[apply_action::FORW, apply_action::DDPN], 2),
        Some(fp_access),
    );
    far_dl.bar_id = Some(1);

    let mut fp_redirect = forwarding(Interface::CORE);
    fp_redirect.redirect_information = Some(RedirectInformation {
        address_type: 2,
        server_address: Text::new("http://portal.example.com/"),
        other_server_address: None,
    });
    let far_redirect = create_far(3, flags(&[apply_action::FORW]), Some(fp_redirect));
    let far_buffer = create_far(4, flags(&[apply_action::BUFF, apply_action::NOCP]), None);

    use measurement_method as mm;
    use reporting_triggers as rt;
    let urr = CreateUrr {
        urr_id: 1,
        measurement_method: flags(&[mm::DURAT, mm::VOLUM, mm::EVENT]),
        reporting_triggers: Flags::from_bits(&[rt::PERIO, rt::VOLTH, rt::TIMTH, rt::VOLQU], 3),
        measurement_period: Some(600),
        volume_threshold: Some(Volume {
            spare: 0,
            total: Some(10_000_000),
            uplink: Some(4_000_000),
            downlink: Some(6_000_000),
        }),
        volume_quota: Some(Volume {
            spare: 0,
            total: Some(100_000_000),
            uplink: None,
            downlink: None,
        }),
        event_threshold: Some(50),
        event_quota: Some(500),
        time_threshold: Some(3600),
        time_quota: Some(7200),
        quota_holding_time: Some(120),
        dropped_dl_traffic_threshold: Some(DroppedDlTrafficThreshold {
            spare: 0,
            packets: Some(1000),
            bytes: Some(1_500_000),
        }),
        quota_validity_time: Some(86_400),
        monitoring_time: Some(T0 + 43_200),
        subsequent_volume_threshold: Some(Volume {
            spare: 0,
            total: Some(20_000_000),
            uplink: None,
            downlink: Some(12_000_000),
        }),
        subsequent_time_threshold: Some(1800),
        subsequent_volume_quota: Some(Volume {
            spare: 0,
            total: None,
            uplink: Some(5_000_000),
            downlink: Some(5_000_000),
        }),
        subsequent_time_quota: Some(900),
        subsequent_event_threshold: Some(25),
        subsequent_event_quota: Some(250),
        inactivity_detection_time: Some(30),
        linked_urr_ids: vec![2],
        measurement_information: Some(flags(&[1, 2, 4])),
        time_quota_mechanism: Some(TimeQuotaMechanism {
            btit: 0,
            base_time_interval: 60,
        }),
        aggregated_urrs: vec![AggregatedUrrs {
            aggregated_urr_id: 10,
            multiplier: Multiplier {
                value_digits: 12_345,
                exponent: -2,
            },
            other: vec![],
        }],
        far_id_for_quota_action: Some(4),
        ethernet_inactivity_timer: Some(300),
        additional_monitoring_time: vec![AdditionalMonitoringTime {
            monitoring_time: T0 + 64_800,
            subsequent_volume_threshold: Some(Volume {
                spare: 0,
                total: Some(30_000_000),
                uplink: None,
                downlink: None,
            }),
            subsequent_time_threshold: Some(600),
            subsequent_volume_quota: None,
            subsequent_time_quota: Some(300),
            subsequent_event_threshold: None,
            subsequent_event_quota: Some(10),
            other: vec![],
        }],
        number_of_reports: Some(3),
        exempted_application_ids: vec![Text::new("zero-rated")],
        exempted_sdf_filters: vec![sdf("permit out ip from 203.0.113.0/24 to assigned")],
        user_plane_inactivity_timer: None,
        other: vec![],
    };

    let mut qer1 = create_qer(1);
    qer1.qer_correlation_id = Some(77);
    qer1.mbr = Some(Bitrate {
        ul_kbps: 100_000,
        dl_kbps: 200_000,
    });
    qer1.gbr = Some(Bitrate {
        ul_kbps: 10_000,
        dl_kbps: 20_000,
    });
    qer1.packet_rate = Some(PacketRate {
        spare: 0,
        uplink: Some(Rate {
            time_unit: 0,
            max_packets: 1000,
        }),
        downlink: Some(Rate {
            time_unit: 2,
            max_packets: 60_000,
        }),
        additional_uplink: Some(Rate {
            time_unit: 3,
            max_packets: 100,
        }),
        additional_downlink: Some(Rate {
            time_unit: 4,
            max_packets: 200,
        }),
    });
    qer1.dl_flow_level_marking = Some(DlFlowLevelMarking {
        spare: 0,
        tos_traffic_class: Some(0xb8fc),
        service_class_indicator: Some(0x0100),
    });
    qer1.qfi = Some(9);
    qer1.rqi = Some(flags(&[1]));
    qer1.paging_policy_indicator = Some(3);
    qer1.averaging_window = Some(2000);
    qer1.qer_control_indications = Some(flags(&[1]));
    qer1.other = vec![Ie::TransportDelayReporting(vec![
        Ie::RemoteGtpuPeer(remote_peer_v4()),
        Ie::TransportLevelMarking(0xb8fc),
    ])];
    let mut qer2 = create_qer(2);
    qer2.gate_status = 0x05; // UL and DL closed
    qer2.mbr = Some(Bitrate {
        ul_kbps: 1,
        dl_kbps: 10_000_000_000,
    });

    let b = SessionEstablishmentRequest {
        node_id: smf_node_id(),
        cp_fseid: cp_fseid(),
        create_pdrs: vec![pdr_ul, pdr_dl, pdr_te],
        create_fars: vec![far_ul, far_dl, far_redirect, far_buffer],
        create_urrs: vec![urr],
        create_qers: vec![qer1, qer2],
        create_bar: Some(CreateBar {
            bar_id: 1,
            downlink_data_notification_delay: Some(20),
            suggested_buffering_packets_count: Some(10),
            mt_edt_control_information: Some(flags(&[1])),
            other: vec![],
        }),
        create_traffic_endpoints: vec![CreateTrafficEndpoint {
            traffic_endpoint_id: 1,
            local_fteid: Some(FTeid::new(0x0000_1003, Some(N3_V4), Some(N3_V6))),
            network_instance: Some(Name::labels("access.5gc")),
            ue_ip_address: vec![UeIpAddress {
                ipv4: Some(UE_V4),
                ..UeIpAddress::default()
            }],
            ethernet_pdu_session_information: None,
            framed_routes: vec![Text::new("198.51.100.128/25")],
            framed_routing: Some(2),
            framed_ipv6_routes: vec![],
            qfis: vec![5],
            source_interface_type: Some(11),
            other: vec![],
        }],
        pdn_type: Some(1),
        fq_csids: vec![fq_csid_v4()],
        user_plane_inactivity_timer: Some(3600),
        user_id: Some(UserId {
            spare: 0,
            imsi: Some(tbcd("001010123456789")),
            imei: Some(tbcd("3534900698733190")),
            msisdn: Some(tbcd("15551234567")),
            nai: Some(b"user@example.com".to_vec()),
            supi: None,
            gpsi: None,
            pei: None,
        }),
        trace_information: None,
        apn_dnn: Some(Name::labels("internet.mnc001.mcc001.gprs")),
        pfcpse_req_flags: Some(flags(&[2])),
        create_srrs: vec![create_srr()],
        recovery_time_stamp: Some(T0),
        s_nssai: Some(s_nssai()),
        rat_type: Some(1),
        other: vec![
            Ie::CreateMar(vec![
                Ie::MarId(1),
                Ie::SteeringFunctionality(1),
                Ie::SteeringMode(2),
                Ie::AccessForwardingActionInformation1(vec![
                    Ie::FarId(1),
                    Ie::Weight(60),
                    Ie::Priority(1),
                    Ie::UrrId(1),
                ]),
                Ie::AccessForwardingActionInformation2(vec![
                    Ie::FarId(3),
                    Ie::Weight(40),
                    Ie::Priority(2),
                ]),
            ]),
            Ie::ProvideAtsssControlInformation(vec![
                Ie::MptcpControlInformation(flags(&[1])),
                Ie::AtsssLlControlInformation(flags(&[1])),
            ]),
            Ie::ProvideRdsConfigurationInformation(vec![Ie::RdsConfigurationInformation(flags(
                &[1],
            ))]),
            Ie::CreateBridgeInfoForTsc(flags(&[1])),
            Ie::L2tpTunnelInformation(vec![Ie::LnsAddress(Bytes(vec![192, 0, 2, 70]))]),
            Ie::L2tpSessionInformationEstablishmentRequest(vec![Ie::CallingNumber(Bytes(
                b"15551234567".to_vec(),
            ))]),
        ],
    };
    sample(
        "session-establishment-request",
        emit(&session(mt::SESSION_ESTABLISHMENT_REQUEST, 0, 10), &b),
    )
}

/// An Ethernet PDU session: Ethernet packet filters in the PDI, an IPv6 CP F-SEID, the
/// SUPI/GPSI/PEI forms of User ID, the header with message priority (MP = 1).
fn session_establishment_request_ethernet() -> Sample {
    let mut pdi = empty_pdi(Interface::ACCESS);
    pdi.local_fteid = Some(FTeid::new(0x0000_3001, None, Some(N3_V6)));
    pdi.ethernet_pdu_session_information = Some(flags(&[1]));
    pdi.ethernet_packet_filters = vec![EthernetPacketFilter {
        ethernet_filter_id: Some(1),
        ethernet_filter_properties: Some(flags(&[1])),
        mac_addresses: vec![MacAddress {
            spare: 0,
            source: Some([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]),
            destination: Some([0x02, 0x00, 0x00, 0x00, 0x00, 0x02]),
            upper_source: None,
            upper_destination: None,
        }],
        ethertype: Some(0x0800),
        c_tag: Some(VlanTag([0x07, 0x1d, 0x23])),
        s_tag: Some(VlanTag([0x04, 0x00, 0x64])),
        sdf_filters: vec![sdf("permit out ip from any to any")],
        other: vec![],
    }];
    let pdr = create_pdr(1, 10, pdi, 1);
    let mut fp = forwarding(Interface::CORE);
    fp.network_instance = Some(Name::labels("ethernet.lan"));
    let far = create_far(1, flags(&[apply_action::FORW]), Some(fp));
    let b = SessionEstablishmentRequest {
        node_id: NodeId::Ipv6(SMF_V6),
        cp_fseid: FSeid {
            spare: 0,
            seid: CP_SEID + 1,
            ipv4: None,
            ipv6: Some(SMF_V6),
        },
        create_pdrs: vec![pdr],
        create_fars: vec![far],
        create_urrs: vec![],
        create_qers: vec![],
        create_bar: None,
        create_traffic_endpoints: vec![],
        pdn_type: Some(5),
        fq_csids: vec![],
        user_plane_inactivity_timer: None,
        user_id: Some(UserId {
            spare: 0,
            imsi: None,
            imei: None,
            msisdn: None,
            nai: None,
            supi: Some(b"imsi-001010123456789".to_vec()),
            gpsi: Some(b"msisdn-15551234567".to_vec()),
            pei: Some(b"imeisv-3534900698733190".to_vec()),
        }),
        trace_information: None,
        apn_dnn: None,
        pfcpse_req_flags: None,
        create_srrs: vec![],
        recovery_time_stamp: None,
        s_nssai: None,
        rat_type: None,
        other: vec![],
    };
    let mut h = session(mt::SESSION_ESTABLISHMENT_REQUEST, 0, 11);
    h.priority = Some(5);
    sample("session-establishment-request/ethernet-mp", emit(&h, &b))
}

/// F-TEID and UE IP address allocation by the UP function (clause 5.5.3, 5.21): CHOOSE
/// with V4 only (one octet), V6, V4+V6 with CHOOSE ID, UE IP with CHV4 and with a
/// delegated IPv6 prefix.
fn session_establishment_request_choose() -> Sample {
    let choose = [
        (FTeid::choose(true, false, None), None),
        (FTeid::choose(false, true, None), None),
        (FTeid::choose(true, true, Some(7)), None),
        (
            FTeid::choose(true, false, Some(7)),
            Some(UeIpAddress {
                choose_v4: true,
                destination: true,
                ..UeIpAddress::default()
            }),
        ),
        (
            FTeid::new(0x0000_4001, Some(N3_V4), Some(N3_V6)),
            Some(UeIpAddress {
                ipv6: Some(UE_V6),
                destination: true,
                ipv6_prefix_delegation_bits: Some(8),
                ipv6_prefix_length: Some(56),
                ..UeIpAddress::default()
            }),
        ),
    ];
    let pdrs = choose
        .into_iter()
        .enumerate()
        .map(|(i, (f, ue))| {
            let mut pdi = empty_pdi(Interface::ACCESS);
            pdi.local_fteid = Some(f);
            pdi.ue_ip_address = ue.into_iter().collect();
            create_pdr(i as u16 + 1, 100 + i as u32, pdi, 1)
        })
        .collect();
    let b = SessionEstablishmentRequest {
        node_id: smf_node_id(),
        cp_fseid: FSeid {
            spare: 0,
            seid: CP_SEID + 2,
            ipv4: Some(SMF_V4),
            ipv6: Some(SMF_V6),
        },
        create_pdrs: pdrs,
        create_fars: vec![create_far(1, flags(&[apply_action::DROP]), None)],
        create_urrs: vec![],
        create_qers: vec![],
        create_bar: None,
        create_traffic_endpoints: vec![],
        pdn_type: Some(3),
        fq_csids: vec![],
        user_plane_inactivity_timer: None,
        user_id: None,
        trace_information: None,
        apn_dnn: Some(Name::labels("ims.mnc001.mcc001.gprs")),
        pfcpse_req_flags: None,
        create_srrs: vec![],
        recovery_time_stamp: None,
        s_nssai: None,
        rat_type: None,
        other: vec![],
    };
    sample(
        "session-establishment-request/choose",
        emit(&session(mt::SESSION_ESTABLISHMENT_REQUEST, 0, 12), &b),
    )
}

fn session_establishment_response() -> Sample {
    let b = SessionEstablishmentResponse {
        node_id: upf_node_id(),
        cause: CauseValue::REQUEST_PARTIALLY_ACCEPTED,
        offending_ie: Some(pfcp::ie::types::CREATE_QER),
        up_fseid: Some(up_fseid()),
        created_pdrs: vec![
            CreatedPdr {
                pdr_id: 1,
                local_fteid: Some(FTeid::new(0x0000_5001, Some(N3_V4), None)),
                ue_ip_address: vec![],
                other: vec![],
            },
            CreatedPdr {
                pdr_id: 4,
                local_fteid: Some(FTeid::new(0x0000_5002, Some(N3_V4), None)),
                ue_ip_address: vec![ue_ip_dst(UE_V4)],
                other: vec![],
            },
        ],
        load_control_information: Some(load_control()),
        overload_control_information: Some(overload_control()),
        fq_csid: Some(fq_csid_v6()),
        failed_rule_id: Some(FailedRuleId {
            rule_type: FailedRuleId::QER,
            id: 2,
        }),
        created_traffic_endpoints: vec![CreatedTrafficEndpoint {
            traffic_endpoint_id: 1,
            local_fteid: Some(FTeid::new(0x0000_5003, Some(N3_V4), Some(N3_V6))),
            ue_ip_address: vec![],
            other: vec![],
        }],
        partial_failure_information: vec![PartialFailureInformation {
            failed_rule_id: FailedRuleId {
                rule_type: FailedRuleId::PDR,
                id: 3,
            },
            cause: CauseValue::RULE_CREATION_MODIFICATION_FAILURE,
            offending_ie_information: vec![],
            other: vec![],
        }],
        other: vec![
            created_bridge_info(),
            Ie::AtsssControlParameters(vec![
                Ie::MptcpParameters(vec![Ie::MptcpAddressInformation(Bytes(vec![
                    0x01, 0x01, 0x1f, 0x90, 198, 51, 100, 9,
                ]))]),
                Ie::AtsssLlParameters(vec![Ie::AtsssLlInformation(flags(&[1]))]),
                Ie::PmfParameters(vec![Ie::PmfAddressInformation(Bytes(vec![
                    0x01, 198, 51, 100, 9, 0x1f, 0x91, 0x1f, 0x92,
                ]))]),
            ]),
            Ie::L2tpSessionInformationEstablishmentResponse(vec![Ie::DnsServerAddress(Bytes(
                vec![192, 0, 2, 53],
            ))]),
        ],
    };
    sample(
        "session-establishment-response",
        emit(
            &session(mt::SESSION_ESTABLISHMENT_RESPONSE, CP_SEID, 10),
            &b,
        ),
    )
}

fn session_modification_request() -> Sample {
    let mut upd_pdr = update_pdr(2);
    upd_pdr.precedence = Some(250);
    let mut pdi = empty_pdi(Interface::CORE);
    pdi.ue_ip_address = vec![ue_ip_dst(UE_V4)];
    upd_pdr.pdi = Some(pdi);
    upd_pdr.far_id = Some(2);
    upd_pdr.urr_ids = vec![3];
    upd_pdr.qer_ids = vec![1];
    upd_pdr.activate_predefined_rules = vec![Text::new("rule-silver")];
    upd_pdr.deactivate_predefined_rules = vec![Text::new("rule-gold")];
    upd_pdr.activation_time = Some(T0 + 100);
    upd_pdr.deactivation_time = Some(T0 + 200);

    let mut ufp = update_forwarding();
    ufp.destination_interface = Some(Interface::ACCESS);
    ufp.network_instance = Some(Name::labels("access.5gc"));
    ufp.redirect_information = Some(RedirectInformation {
        address_type: 4,
        server_address: Text::new("192.0.2.80"),
        other_server_address: Some(Text::new("2001:db8::80")),
    });
    ufp.outer_header_creation = Some(OuterHeaderCreation::gtpu_ipv4(0x0000_2005, GNB_V4));
    ufp.transport_level_marking = Some(0x48fc);
    ufp.forwarding_policy = Some(ForwardingPolicy(Text::new("policy-b")));
    ufp.header_enrichment = Some(HeaderEnrichment {
        header_type: 0,
        name: Text::new("X-IMSI"),
        value: Text::new("001010123456789"),
    });
    ufp.pfcpsm_req_flags = Some(flags(&[2])); // SNDEM: send end marker
    ufp.linked_traffic_endpoint_id = Some(1);
    ufp.destination_interface_type = Some(11);
    ufp.data_network_access_identifier = Some(Text::new("dnai-edge-2"));
    let mut upd_far = update_far(2);
    upd_far.apply_action = Some(flags(&[apply_action::FORW]));
    upd_far.update_forwarding_parameters = Some(ufp);
    upd_far.update_duplicating_parameters = vec![UpdateDuplicatingParameters {
        destination_interface: Some(Interface::CP_FUNCTION),
        outer_header_creation: Some(OuterHeaderCreation {
            description: OuterHeaderCreation::UDP_IPV4,
            teid: None,
            ipv4: Some(Ipv4Addr::new(192, 0, 2, 51)),
            ipv6: None,
            port: Some(9001),
            c_tag: None,
            s_tag: None,
        }),
        transport_level_marking: Some(0x28fc),
        forwarding_policy: Some(ForwardingPolicy(Text::new("li"))),
        other: vec![],
    }];
    upd_far.bar_id = Some(1);

    use reporting_triggers as rt;
    let upd_urr = UpdateUrr {
        urr_id: 1,
        measurement_method: Some(flags(&[measurement_method::VOLUM])),
        reporting_triggers: Some(flags(&[rt::VOLTH])),
        measurement_period: Some(300),
        volume_threshold: Some(Volume {
            spare: 0,
            total: Some(5_000_000),
            uplink: None,
            downlink: None,
        }),
        volume_quota: Some(Volume {
            spare: 0,
            total: None,
            uplink: None,
            downlink: Some(50_000_000),
        }),
        time_threshold: Some(1800),
        time_quota: Some(3600),
        event_threshold: Some(5),
        event_quota: Some(50),
        quota_holding_time: Some(60),
        dropped_dl_traffic_threshold: Some(DroppedDlTrafficThreshold {
            spare: 0,
            packets: Some(10),
            bytes: None,
        }),
        quota_validity_time: Some(600),
        monitoring_time: Some(T0 + 7200),
        subsequent_volume_threshold: Some(Volume {
            spare: 0,
            total: Some(1_000_000),
            uplink: None,
            downlink: None,
        }),
        subsequent_time_threshold: Some(900),
        subsequent_volume_quota: Some(Volume {
            spare: 0,
            total: Some(2_000_000),
            uplink: None,
            downlink: None,
        }),
        subsequent_time_quota: Some(450),
        subsequent_event_threshold: Some(3),
        subsequent_event_quota: Some(30),
        inactivity_detection_time: Some(60),
        linked_urr_ids: vec![3],
        measurement_information: Some(flags(&[3])),
        time_quota_mechanism: Some(TimeQuotaMechanism {
            btit: 1,
            base_time_interval: 30,
        }),
        aggregated_urrs: vec![],
        far_id_for_quota_action: Some(4),
        ethernet_inactivity_timer: Some(120),
        additional_monitoring_time: vec![],
        number_of_reports: Some(1),
        exempted_application_ids: vec![],
        exempted_sdf_filters: vec![],
        user_plane_inactivity_timer: None,
        other: vec![],
    };

    let upd_qer = UpdateQer {
        qer_id: 1,
        qer_correlation_id: Some(78),
        gate_status: Some(0x04), // UL closed, DL open
        mbr: Some(Bitrate {
            ul_kbps: 50_000,
            dl_kbps: 150_000,
        }),
        gbr: Some(Bitrate {
            ul_kbps: 5_000,
            dl_kbps: 15_000,
        }),
        packet_rate: Some(PacketRate {
            spare: 0,
            uplink: Some(Rate {
                time_unit: 1,
                max_packets: 500,
            }),
            downlink: None,
            additional_uplink: None,
            additional_downlink: None,
        }),
        dl_flow_level_marking: Some(DlFlowLevelMarking {
            spare: 0,
            tos_traffic_class: Some(0x28fc),
            service_class_indicator: None,
        }),
        qfi: Some(5),
        rqi: Some(flags(&[1])),
        paging_policy_indicator: Some(1),
        averaging_window: Some(1000),
        qer_control_indications: Some(flags(&[1])),
        other: vec![],
    };

    let mut create_pdi = empty_pdi(Interface::ACCESS);
    create_pdi.local_fteid = Some(FTeid::new(0x0000_6001, Some(N3_V4), None));
    let b = SessionModificationRequest {
        cp_fseid: Some(cp_fseid()),
        remove_pdrs: vec![RemovePdr {
            pdr_id: 3,
            other: vec![],
        }],
        remove_fars: vec![RemoveFar {
            far_id: 3,
            other: vec![],
        }],
        remove_urrs: vec![RemoveUrr {
            urr_id: 2,
            other: vec![],
        }],
        remove_qers: vec![RemoveQer {
            qer_id: 2,
            other: vec![],
        }],
        remove_bar: Some(RemoveBar {
            bar_id: 2,
            other: vec![],
        }),
        remove_traffic_endpoints: vec![RemoveTrafficEndpoint {
            traffic_endpoint_id: 2,
            other: vec![],
        }],
        create_pdrs: vec![create_pdr(5, 500, create_pdi, 5)],
        create_fars: vec![create_far(5, flags(&[apply_action::DROP]), None)],
        create_urrs: vec![],
        create_qers: vec![],
        create_bar: Some(CreateBar {
            bar_id: 3,
            downlink_data_notification_delay: None,
            suggested_buffering_packets_count: Some(5),
            mt_edt_control_information: None,
            other: vec![],
        }),
        create_traffic_endpoints: vec![],
        update_pdrs: vec![upd_pdr],
        update_fars: vec![upd_far],
        update_urrs: vec![upd_urr],
        update_qers: vec![upd_qer],
        update_bar: Some(UpdateBar {
            bar_id: 1,
            downlink_data_notification_delay: Some(40),
            suggested_buffering_packets_count: Some(20),
            mt_edt_control_information: Some(flags(&[1])),
            other: vec![],
        }),
        update_traffic_endpoints: vec![UpdateTrafficEndpoint {
            traffic_endpoint_id: 1,
            local_fteid: Some(FTeid::new(0x0000_6002, Some(N3_V4), None)),
            network_instance: Some(Name::plain("access")),
            ue_ip_address: vec![],
            framed_routes: vec![Text::new("198.51.100.0/26")],
            framed_routing: Some(1),
            framed_ipv6_routes: vec![Text::new("2001:db8:f00d::/48")],
            qfis: vec![6],
            source_interface_type: Some(11),
            other: vec![],
        }],
        pfcpsm_req_flags: Some(flags(&[1, 3])),
        query_urrs: vec![QueryUrr {
            urr_id: 1,
            other: vec![],
        }],
        fq_csids: vec![fq_csid_v4()],
        user_plane_inactivity_timer: Some(1800),
        query_urr_reference: Some(42),
        trace_information: None,
        node_id: Some(smf_node_id()),
        remove_srrs: vec![RemoveSrr {
            srr_id: 2,
            other: vec![],
        }],
        // Round trip by GTP-U path monitoring for two QoS flows, reported at release.
        create_srrs: vec![CreateSrr {
            srr_id: 3,
            access_availability_control_information: None,
            qos_monitoring_per_qos_flow_control_information: vec![
                QosMonitoringPerQosFlowControlInformation {
                    qfis: vec![5, 6],
                    requested_qos_monitoring: flags(&[
                        requested_qos_monitoring::RP,
                        requested_qos_monitoring::GTPUPM,
                    ]),
                    reporting_frequency: flags(&[reporting_frequency::SESRL]),
                    packet_delay_thresholds: None,
                    minimum_wait_time: None,
                    measurement_period: None,
                    other: vec![],
                },
            ],
            direct_reporting_information: None,
            other: vec![],
        }],
        // An uplink threshold alone now, and the access availability request again.
        update_srrs: vec![UpdateSrr {
            srr_id: 1,
            access_availability_control_information: Some(AccessAvailabilityControlInformation {
                requested_access_availability_information: flags(&[1]),
                other: vec![],
            }),
            qos_monitoring_per_qos_flow_control_information: vec![
                QosMonitoringPerQosFlowControlInformation {
                    packet_delay_thresholds: Some(PacketDelayThresholds {
                        uplink_ms: Some(15),
                        ..PacketDelayThresholds::default()
                    }),
                    reporting_frequency: flags(&[reporting_frequency::EVETT]),
                    measurement_period: None,
                    ..qos_monitoring_control()
                },
            ],
            direct_reporting_information: None,
            other: vec![],
        }],
        s_nssai: Some(s_nssai()),
        rat_type: Some(2),
        other: vec![
            Ie::RemoveMar(vec![Ie::MarId(2)]),
            Ie::UpdateMar(vec![
                Ie::MarId(1),
                Ie::SteeringFunctionality(0),
                Ie::SteeringMode(1),
                Ie::UpdateAccessForwardingActionInformation1(vec![
                    Ie::FarId(1),
                    Ie::Weight(70),
                    Ie::Priority(2),
                ]),
                Ie::UpdateAccessForwardingActionInformation2(vec![Ie::FarId(3), Ie::Weight(30)]),
            ]),
            tsc_management(Ie::TscManagementInformationSessionModificationRequest),
            Ie::EthernetContextInformation(vec![Ie::MacAddressesDetected(MacAddresses {
                addresses: vec![[0x02, 0, 0, 0, 0, 0x0a]],
                tags: Bytes::default(),
            })]),
            Ie::QueryPacketRateStatus(vec![Ie::QerId(1)]),
        ],
    };
    sample(
        "session-modification-request",
        emit(&session(mt::SESSION_MODIFICATION_REQUEST, UP_SEID, 13), &b),
    )
}

/// Every Outer Header Removal description 0..6 (clause 8.2.64), with and without the GTP-U
/// Extension Header Deletion octet, and Outer Header Creation for GTP-U/UDP/IPv4, IPv6 and
/// both, UDP/IPv4 and UDP/IPv6 with a port, IPv4, and a C-TAG (clause 8.2.56).
fn session_modification_request_outer_headers() -> Sample {
    let ohr: Vec<UpdatePdr> = (0..=6u8)
        .map(|d| {
            let mut p = update_pdr(10 + d as u16);
            p.outer_header_removal = Some(OuterHeaderRemoval {
                description: d,
                ext_header_deletion: (d == 6).then_some(1),
            });
            p
        })
        .collect();
    let none = OuterHeaderCreation {
        description: 0,
        teid: None,
        ipv4: None,
        ipv6: None,
        port: None,
        c_tag: None,
        s_tag: None,
    };
    let ohc = [
        OuterHeaderCreation::gtpu_ipv4(0x0000_7001, GNB_V4),
        OuterHeaderCreation {
            description: OuterHeaderCreation::GTPU_UDP_IPV6,
            teid: Some(0x0000_7002),
            ipv6: Some(GNB_V6),
            ..none
        },
        OuterHeaderCreation {
            description: OuterHeaderCreation::GTPU_UDP_IPV4 | OuterHeaderCreation::GTPU_UDP_IPV6,
            teid: Some(0x0000_7003),
            ipv4: Some(GNB_V4),
            ipv6: Some(GNB_V6),
            ..none
        },
        OuterHeaderCreation {
            description: OuterHeaderCreation::UDP_IPV4,
            ipv4: Some(Ipv4Addr::new(192, 0, 2, 60)),
            port: Some(2152),
            ..none
        },
        OuterHeaderCreation {
            description: OuterHeaderCreation::UDP_IPV6,
            ipv6: Some(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0x60)),
            port: Some(5004),
            ..none
        },
        OuterHeaderCreation {
            description: OuterHeaderCreation::IPV4,
            ipv4: Some(Ipv4Addr::new(192, 0, 2, 61)),
            ..none
        },
        OuterHeaderCreation {
            description: OuterHeaderCreation::C_TAG,
            c_tag: Some([0x07, 0x1d, 0x23]),
            ..none
        },
    ];
    let fars: Vec<UpdateFar> = ohc
        .into_iter()
        .enumerate()
        .map(|(i, o)| {
            let mut f = update_far(20 + i as u32);
            let mut u = update_forwarding();
            u.outer_header_creation = Some(o);
            f.update_forwarding_parameters = Some(u);
            f
        })
        .collect();
    let b = SessionModificationRequest {
        cp_fseid: None,
        remove_pdrs: vec![],
        remove_fars: vec![],
        remove_urrs: vec![],
        remove_qers: vec![],
        remove_bar: None,
        remove_traffic_endpoints: vec![],
        create_pdrs: vec![],
        create_fars: vec![],
        create_urrs: vec![],
        create_qers: vec![],
        create_bar: None,
        create_traffic_endpoints: vec![],
        update_pdrs: ohr,
        update_fars: fars,
        update_urrs: vec![],
        update_qers: vec![],
        update_bar: None,
        update_traffic_endpoints: vec![],
        pfcpsm_req_flags: None,
        query_urrs: vec![],
        fq_csids: vec![],
        user_plane_inactivity_timer: None,
        query_urr_reference: None,
        trace_information: None,
        node_id: None,
        remove_srrs: vec![],
        create_srrs: vec![],
        update_srrs: vec![],
        s_nssai: None,
        rat_type: None,
        other: vec![],
    };
    sample(
        "session-modification-request/outer-headers",
        emit(&session(mt::SESSION_MODIFICATION_REQUEST, UP_SEID, 14), &b),
    )
}

fn usage_report(urr_id: u32, seqn: u32, triggers: &[u16]) -> UsageReport {
    UsageReport {
        urr_id,
        ur_seqn: seqn,
        usage_report_trigger: Flags::from_bits(triggers, 3),
        start_time: Some(T0),
        end_time: Some(T0 + 60),
        volume_measurement: Some(VolumeMeasurement {
            spare: 0,
            total: Some(1_500_000),
            uplink: Some(500_000),
            downlink: Some(1_000_000),
            total_packets: Some(1500),
            uplink_packets: Some(600),
            downlink_packets: Some(900),
        }),
        duration_measurement: Some(60),
        application_detection_information: None,
        ue_ip_address: None,
        network_instance: None,
        time_of_first_packet: Some(T0 + 1),
        time_of_last_packet: Some(T0 + 59),
        usage_information: Some(flags(&[2])),
        query_urr_reference: None,
        event_time_stamps: vec![],
        ethernet_traffic_information: None,
        other: vec![],
    }
}

fn session_modification_response() -> Sample {
    use usage_report_trigger as t;
    let mut ur = usage_report(1, 3, &[t::IMMER]);
    ur.query_urr_reference = Some(42);
    ur.volume_measurement = Some(VolumeMeasurement {
        spare: 0,
        total: Some(2_000),
        uplink: None,
        downlink: Some(2_000),
        total_packets: None,
        uplink_packets: None,
        downlink_packets: Some(4),
    });
    let b = SessionModificationResponse {
        cause: CauseValue::REQUEST_ACCEPTED,
        offending_ie: None,
        created_pdrs: vec![CreatedPdr {
            pdr_id: 5,
            local_fteid: Some(FTeid::new(0x0000_6003, None, Some(N3_V6))),
            ue_ip_address: vec![],
            other: vec![],
        }],
        load_control_information: Some(load_control()),
        overload_control_information: None,
        usage_reports: vec![ur],
        failed_rule_id: Some(FailedRuleId {
            rule_type: FailedRuleId::FAR,
            id: 5,
        }),
        additional_usage_reports_information: Some(0x8000), // AURI
        created_traffic_endpoints: vec![],
        partial_failure_information: vec![],
        other: vec![
            tsc_management(Ie::TscManagementInformationSessionModificationResponse),
            Ie::PacketRateStatusReportSessionModificationResponse(vec![
                Ie::QerId(1),
                Ie::PacketRateStatus(Bytes(packet_rate_status())),
            ]),
            Ie::UpdatedPdr(vec![
                Ie::PdrId(1),
                Ie::FTeid(FTeid::new(0x0000_6004, Some(N3_V4), None)),
            ]),
        ],
    };
    sample(
        "session-modification-response",
        emit(&session(mt::SESSION_MODIFICATION_RESPONSE, CP_SEID, 13), &b),
    )
}

fn session_deletion_request() -> Sample {
    let b = SessionDeletionRequest { other: vec![] };
    sample(
        "session-deletion-request",
        emit(&session(mt::SESSION_DELETION_REQUEST, UP_SEID, 15), &b),
    )
}

fn session_deletion_response() -> Sample {
    use usage_report_trigger as t;
    let b = SessionDeletionResponse {
        cause: CauseValue::REQUEST_ACCEPTED,
        offending_ie: None,
        load_control_information: None,
        overload_control_information: Some(overload_control()),
        usage_reports: vec![usage_report(1, 4, &[t::TERMR])],
        additional_usage_reports_information: Some(3),
        session_reports: vec![],
        other: vec![Ie::PacketRateStatusReport(vec![
            Ie::QerId(1),
            Ie::PacketRateStatus(Bytes(packet_rate_status())),
        ])],
    };
    sample(
        "session-deletion-response",
        emit(&session(mt::SESSION_DELETION_RESPONSE, CP_SEID, 15), &b),
    )
}

fn session_report_request() -> Sample {
    use report_type as r;
    use usage_report_trigger as t;
    let mut ur = usage_report(1, 1, &[t::PERIO, t::VOLTH, t::START]);
    ur.application_detection_information = Some(ApplicationDetectionInformation {
        application_id: Text::new("video-streaming"),
        application_instance_id: Some(Text::new("instance-1")),
        flow_information: Some(FlowInformation {
            direction: 2,
            flow_description: Text::new("permit out 6 from 192.0.2.7 443 to 10.45.0.2 50000"),
        }),
        pdr_id: Some(2),
        other: vec![],
    });
    ur.ue_ip_address = Some(ue_ip_dst(UE_V4));
    ur.network_instance = Some(Name::labels("internet"));
    ur.event_time_stamps = vec![T0 + 30, T0 + 31];
    ur.ethernet_traffic_information = Some(EthernetTrafficInformation {
        mac_addresses_detected: vec![MacAddresses {
            addresses: vec![[0x02, 0, 0, 0, 0, 0x0b], [0x02, 0, 0, 0, 0, 0x0c]],
            tags: Bytes::default(),
        }],
        mac_addresses_removed: vec![MacAddresses {
            addresses: vec![[0x02, 0, 0, 0, 0, 0x0d]],
            tags: Bytes::default(),
        }],
        other: vec![],
    });
    ur.other = vec![
        Ie::JoinIpMulticastInformation(vec![
            Ie::IpMulticastAddress(Bytes(vec![0x02, 232, 1, 1, 1])),
            Ie::SourceIpAddress(SourceIpAddress {
                spare: 0,
                ipv4: Some(Ipv4Addr::new(192, 0, 2, 99)),
                ipv6: None,
                mask_prefix_length: None,
            }),
        ]),
        Ie::LeaveIpMulticastInformation(vec![Ie::IpMulticastAddress(Bytes(vec![
            0x02, 232, 1, 1, 2,
        ]))]),
    ];
    let b = SessionReportRequest {
        report_type: flags(&[r::DLDR, r::USAR, r::ERIR, r::SESR]),
        downlink_data_report: Some(DownlinkDataReport {
            pdr_ids: vec![2],
            downlink_data_service_information: vec![DownlinkDataServiceInformation {
                spare: 0,
                ppi: Some(3),
                qfi: Some(9),
            }],
            dl_data_packets_size: Some(1400),
            data_status: Some(flags(&[2])),
            other: vec![],
        }),
        usage_reports: vec![ur],
        error_indication_report: Some(ErrorIndicationReport {
            remote_fteids: vec![FTeid::new(0x0000_2001, Some(GNB_V4), None)],
            other: vec![],
        }),
        load_control_information: Some(load_control()),
        overload_control_information: Some(overload_control()),
        additional_usage_reports_information: Some(0x0005),
        pfcpsr_req_flags: Some(flags(&[1])),
        old_cp_fseid: Some(cp_fseid()),
        session_reports: vec![SessionReport {
            srr_id: 1,
            access_availability_report: Some(AccessAvailabilityReport {
                access_availability_information: vec![0x05],
                other: vec![],
            }),
            qos_monitoring_reports: vec![
                QosMonitoringReport {
                    qfi: 9,
                    qos_monitoring_measurement: QosMonitoringMeasurement {
                        downlink_ms: Some(12),
                        uplink_ms: Some(15),
                        round_trip_ms: Some(27),
                        plmf: false,
                        spare: 0,
                    },
                    time_stamp: T0 + 40,
                    start_time: Some(T0),
                    other: vec![],
                },
                // No time stamp came back for QFI 5: a measurement failure, no delay.
                QosMonitoringReport {
                    qfi: 5,
                    qos_monitoring_measurement: QosMonitoringMeasurement {
                        plmf: true,
                        ..QosMonitoringMeasurement::default()
                    },
                    time_stamp: T0 + 40,
                    start_time: None,
                    other: vec![],
                },
            ],
            other: vec![],
        }],
        cause: None,
        other: vec![tsc_management(
            Ie::TscManagementInformationSessionReportRequest,
        )],
    };
    sample(
        "session-report-request",
        emit(&session(mt::SESSION_REPORT_REQUEST, CP_SEID, 16), &b),
    )
}

/// A Session Report Request with the FO flag: the next sample follows it in the same UDP
/// datagram (clause 7.2.1A, see [`datagrams`]). A downlink data report only, its DDSI
/// carrying QFI alone; the header also has message priority.
fn session_report_request_follow_on() -> Sample {
    let b = SessionReportRequest {
        report_type: flags(&[report_type::DLDR]),
        downlink_data_report: Some(DownlinkDataReport {
            pdr_ids: vec![2, 4],
            downlink_data_service_information: vec![DownlinkDataServiceInformation {
                spare: 0,
                ppi: None,
                qfi: Some(5),
            }],
            dl_data_packets_size: None,
            data_status: None,
            other: vec![],
        }),
        usage_reports: vec![],
        error_indication_report: None,
        load_control_information: None,
        overload_control_information: None,
        additional_usage_reports_information: None,
        pfcpsr_req_flags: None,
        old_cp_fseid: None,
        session_reports: vec![],
        cause: Some(CauseValue::REQUEST_ACCEPTED),
        other: vec![],
    };
    let mut h = session(mt::SESSION_REPORT_REQUEST, CP_SEID, 17);
    h.follow_on = true;
    h.priority = Some(2);
    sample("session-report-request/follow-on", emit(&h, &b))
}

fn session_report_response() -> Sample {
    let b = SessionReportResponse {
        cause: CauseValue::REQUEST_ACCEPTED,
        offending_ie: None,
        update_bar: Some(UpdateBarReportResponse {
            bar_id: 1,
            downlink_data_notification_delay: Some(10),
            dl_buffering_duration: Some(GprsTimer::from_seconds(60)),
            dl_buffering_suggested_packet_count: Some(PacketCount {
                value: 300,
                two_octets: true,
            }),
            suggested_buffering_packets_count: Some(15),
            other: vec![],
        }),
        pfcpsr_rsp_flags: Some(flags(&[1])),
        cp_fseid: Some(FSeid {
            spare: 0,
            seid: CP_SEID + 9,
            ipv4: Some(Ipv4Addr::new(192, 0, 2, 11)),
            ipv6: None,
        }),
        n4u_fteid: Some(FTeid::new(
            0x0000_8001,
            Some(Ipv4Addr::new(192, 0, 2, 11)),
            None,
        )),
        alternative_smf_ip_address: Some(IpAddresses {
            ipv4: Some(Ipv4Addr::new(192, 0, 2, 11)),
            ipv6: None,
            other_flags: 0,
        }),
        other: vec![],
    };
    sample(
        "session-report-response",
        emit(&session(mt::SESSION_REPORT_RESPONSE, UP_SEID, 16), &b),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use pfcp::ie::known_ie_types;
    use pfcp::message::{message_type, Message};
    use pfcp::msg::Msg;

    fn walk(ies: &[Ie], seen: &mut BTreeMap<u16, usize>) {
        for ie in ies {
            *seen.entry(ie.ie_type()).or_default() += 1;
            walk(&children(ie), seen);
        }
    }

    /// The children of a grouped IE (none for a leaf): its value decoded as IEs.
    fn children(ie: &Ie) -> Vec<Ie> {
        if !pfcp::ie::is_grouped(ie.ie_type()) {
            return vec![];
        }
        let mut b = Vec::new();
        ie.encode(&mut b);
        pfcp::ie::decode_ies(&b[4..], 4).unwrap()
    }

    #[test]
    fn every_sample_round_trips() {
        let corpus = corpus();
        let names: BTreeSet<_> = corpus.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), corpus.len(), "sample names are unique");
        for s in &corpus {
            let m = Message::parse(&s.bytes).unwrap_or_else(|e| panic!("{}: {e}", s.name));
            assert_eq!(m.emit(), s.bytes, "{} re-encodes differently", s.name);
            let (h, typed) = Msg::parse(&s.bytes).unwrap_or_else(|e| panic!("{}: {e}", s.name));
            assert_eq!(typed.emit(&h), s.bytes, "{}: typed re-encoding", s.name);
        }
    }

    #[test]
    fn covers_every_message_type_and_header_form() {
        let corpus = corpus();
        let headers: Vec<_> = corpus
            .iter()
            .map(|s| Message::parse(&s.bytes).unwrap().header)
            .collect();
        let types: BTreeSet<u8> = headers.iter().map(|h| h.message_type).collect();
        let all: BTreeSet<u8> = (1..=17).chain(50..=57).collect();
        assert_eq!(types, all);
        for t in all {
            assert!(message_type::name(t).is_some());
        }
        assert!(headers.iter().any(|h| h.seid.is_none()));
        assert!(headers.iter().any(|h| h.seid.is_some()));
        assert!(headers.iter().any(|h| h.priority.is_some()));
        assert!(headers.iter().any(|h| h.follow_on));
    }

    #[test]
    fn covers_every_interpreted_ie_type() {
        let mut seen = BTreeMap::new();
        for s in corpus() {
            walk(&Message::parse(&s.bytes).unwrap().ies, &mut seen);
        }
        let missing: Vec<String> = known_ie_types()
            .iter()
            .filter(|(t, kind)| *kind != "Bytes" && !seen.contains_key(t))
            .map(|(t, _)| format!("{t} {}", pfcp::ie::ie_name(*t).unwrap_or("?")))
            .collect();
        assert!(missing.is_empty(), "not in the corpus: {missing:#?}");
    }
}
