//! Cross-check of the PFCP codec with scapy's `contrib.pfcp`, at the version pinned in
//! tests/oracles/requirements.txt:
//!
//! - `scapy_builds_we_parse`: tests/oracles/pfcp_oracle.py builds messages with scapy
//!   (Heartbeat, Association Setup with UP/CP Function Features and User Plane IP Resource
//!   Information, Session Establishment with CHOOSE F-TEIDs sharing a CHOOSE ID, UE IP
//!   address, SDF filters, FARs with Outer Header Creation, URR with volume threshold, QER
//!   with MBR/GBR/QFI, Session Modification with Update FAR, Session Report Request and
//!   Session Deletion Response with usage reports). We parse each with `pfcp::msg` and
//!   find the values scapy was given; the generic tree re-encodes to scapy's octets.
//! - `we_emit_scapy_parses`: we build the same kinds (and the UP function's responses)
//!   with the typed API, scapy dissects them and finds the values we encoded, in IEs it
//!   knows, with no octet left over except where noted.
//!
//! Run with: `scripts/python-venv.sh && UPF_REQUIRE_ORACLES=1 cargo test -p pfcp --test scapy`.
//! Without the venv the tests print why and pass, unless `UPF_REQUIRE_ORACLES=1`.
//!
//! Where scapy 2.6.1 departs from TS 29.244, the comment at the check says so; the octets
//! we emit are never bent to suit scapy.
//!
//! scapy 2.6.1 has no class for IE types above 160 (it dissects them as
//! `IE_NotImplemented`), so the QoS monitoring IEs (SRRs, Session Report, 211-248) are
//! checked against tshark only (tshark.rs) and against the clauses' figures
//! (qos_monitoring.rs).

#[path = "../../../tests/oracles/oracle.rs"]
mod oracle;

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use oracle::{assert_clean, layers, Built, Node, Oracle};
use pfcp::ie::{
    apply_action, cp_function_features, measurement_method, pfcpsm_req_flags, report_type,
    reporting_triggers, up_function_features, usage_report_trigger, Bitrate, CauseValue, FSeid,
    FTeid, Flags, Interface, Name, NodeId, OuterHeaderCreation, OuterHeaderRemoval, RemoteGtpuPeer,
    SdfFilter, UeIpAddress, UserPlaneIpResourceInformation, Volume, VolumeMeasurement,
};
use pfcp::message::message_type;
use pfcp::msg::{
    AssociationSetupRequest, AssociationSetupResponse, Body, CreateFar, CreatePdr, CreateQer,
    CreateUrr, CreatedPdr, ForwardingParameters, HeartbeatRequest, HeartbeatResponse,
    NodeReportRequest, Pdi, RemovePdr, SessionDeletionResponse, SessionEstablishmentRequest,
    SessionEstablishmentResponse, SessionModificationRequest, SessionModificationResponse,
    SessionReportRequest, UpdateFar, UpdateForwardingParameters, UsageReport,
    UserPlanePathFailureReport,
};
use pfcp::{HeaderRepr, Message};
use serde_json::Value as Json;

// ---------------------------------------------------------------------------------------
// Direction 1: scapy builds, we parse.
// ---------------------------------------------------------------------------------------

fn eu(e: &Json, k: &str) -> u64 {
    e[k].as_u64()
        .unwrap_or_else(|| panic!("expect.{k} is not a number in {e}"))
}

fn es<'a>(e: &'a Json, k: &str) -> &'a str {
    e[k].as_str()
        .unwrap_or_else(|| panic!("expect.{k} is not a string in {e}"))
}

fn eip(e: &Json, k: &str) -> Ipv4Addr {
    es(e, k).parse().unwrap()
}

fn ebits(e: &Json, k: &str) -> Vec<u16> {
    e[k].as_array()
        .unwrap_or_else(|| panic!("expect.{k} is not a list in {e}"))
        .iter()
        .map(|b| b.as_u64().unwrap() as u16)
        .collect()
}

fn bits(f: &Flags) -> Vec<u16> {
    f.bits().collect()
}

/// Parse as `B`, check the header's type is `B`'s, and return header and body.
fn typed<B: Body>(m: &Built) -> (HeaderRepr, B) {
    let (h, b) = pfcp::msg::parse::<B>(&m.bytes)
        .unwrap_or_else(|e| panic!("{}: {e} ({})", m.name, oracle::hex(&m.bytes)));
    assert_eq!(h.message_type, B::MESSAGE_TYPE, "{}", m.name);
    assert_eq!(h.version, 1);
    (h, b)
}

fn check_node_header(m: &Built, h: &HeaderRepr) {
    assert_eq!(h.seid, None, "{}: node message with SEID", m.name);
    assert_eq!(h.sequence as u64, eu(&m.expect, "seq"), "{}", m.name);
}

fn check_session_header(m: &Built, h: &HeaderRepr) {
    assert_eq!(h.seid, Some(eu(&m.expect, "seid")), "{}", m.name);
    assert_eq!(h.sequence as u64, eu(&m.expect, "seq"), "{}", m.name);
}

fn check_volume(v: &Volume, e: &Json) {
    let get = |k| e[k].as_u64();
    assert_eq!(v.total, get("total"));
    assert_eq!(v.uplink, get("uplink"));
    assert_eq!(v.downlink, get("downlink"));
}

fn check_usage_report(ur: &UsageReport, e: &Json) {
    assert_eq!(ur.urr_id as u64, eu(e, "urr_id"));
    assert_eq!(ur.ur_seqn as u64, eu(e, "ur_seqn"));
    assert_eq!(bits(&ur.usage_report_trigger), ebits(e, "trigger_bits"));
    assert_eq!(ur.start_time.map(u64::from), Some(eu(e, "start_time")));
    assert_eq!(ur.end_time.map(u64::from), Some(eu(e, "end_time")));
    let v = ur.volume_measurement.expect("Volume Measurement");
    let ev = &e["volume"];
    assert_eq!(
        (v.total, v.uplink, v.downlink),
        (
            ev["total"].as_u64(),
            ev["uplink"].as_u64(),
            ev["downlink"].as_u64()
        )
    );
    assert_eq!(
        (v.total_packets, v.uplink_packets, v.downlink_packets),
        (None, None, None)
    );
    assert_eq!(
        ur.duration_measurement.map(u64::from),
        Some(eu(e, "duration"))
    );
    assert!(ur.other.is_empty(), "unplaced IEs {:?}", ur.other);
}

fn opt_text(n: &Option<Name>) -> Option<String> {
    n.as_ref().map(Name::to_text)
}

fn check_pdr(pdr: &CreatePdr, e: &Json) {
    let ctx = format!("PDR {}", e["pdr_id"]);
    assert_eq!(pdr.pdr_id as u64, eu(e, "pdr_id"), "{ctx}");
    assert_eq!(pdr.precedence.map(u64::from), Some(eu(e, "precedence")));
    let pdi = &pdr.pdi;
    assert_eq!(
        pdi.source_interface.value() as u64,
        eu(e, "source_interface")
    );
    match e["fteid"].as_object() {
        None => assert_eq!(pdi.local_fteid, None, "{ctx}"),
        Some(f) => {
            let want = FTeid::choose(
                f["v4"].as_bool().unwrap(),
                f["v6"].as_bool().unwrap(),
                f["choose_id"].as_u64().map(|x| x as u8),
            );
            assert_eq!(pdi.local_fteid, Some(want), "{ctx}: CHOOSE F-TEID");
        }
    }
    assert_eq!(
        opt_text(&pdi.network_instance).as_deref(),
        e["network_instance"].as_str(),
        "{ctx}"
    );
    assert_eq!(pdi.ue_ip_address.len(), 1);
    let ue = pdi.ue_ip_address[0];
    assert_eq!(ue.ipv4, Some(eip(e, "ue_ipv4")));
    assert_eq!(ue.ipv6, None);
    assert_eq!(ue.destination, eu(e, "ue_sd") == 1, "{ctx}: S/D");
    assert!(!ue.choose_v4 && !ue.choose_v6);
    match e["sdf"].as_object() {
        None => assert!(pdi.sdf_filters.is_empty()),
        Some(s) => {
            assert_eq!(pdi.sdf_filters.len(), 1);
            let f = &pdi.sdf_filters[0];
            assert_eq!(
                f.flow_description.as_deref(),
                Some(s["flow_description"].as_str().unwrap().as_bytes())
            );
            assert_eq!(
                f.tos_traffic_class.map(u64::from),
                s.get("tos_traffic_class").and_then(Json::as_u64)
            );
            assert_eq!(
                f.filter_id.map(u64::from),
                s.get("sdf_filter_id").and_then(Json::as_u64)
            );
            assert_eq!((f.spi, f.flow_label), (None, None));
        }
    }
    let qfis: Vec<u64> = pdi.qfis.iter().map(|q| *q as u64).collect();
    assert_eq!(qfis, e["qfi"].as_u64().into_iter().collect::<Vec<_>>());
    assert!(
        pdi.other.is_empty(),
        "{ctx}: unplaced PDI IEs {:?}",
        pdi.other
    );
    match e["ohr"].as_object() {
        None => assert_eq!(pdr.outer_header_removal, None),
        Some(o) => {
            let r = pdr.outer_header_removal.expect("Outer Header Removal");
            assert_eq!(r.description as u64, o["description"].as_u64().unwrap());
            assert_eq!(
                r.ext_header_deletion.map(u64::from),
                o.get("ext_header_deletion").and_then(Json::as_u64)
            );
        }
    }
    assert_eq!(pdr.far_id.map(u64::from), Some(eu(e, "far_id")));
    let ids = |v: &[u32]| v.iter().map(|x| *x as u64).collect::<Vec<_>>();
    let eids = |k| {
        e[k].as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&pdr.urr_ids), eids("urr_ids"));
    assert_eq!(ids(&pdr.qer_ids), eids("qer_ids"));
    assert!(pdr.other.is_empty(), "{ctx}: unplaced IEs {:?}", pdr.other);
}

fn check_ohc(o: &OuterHeaderCreation, e: &Json) {
    assert_eq!(o.description as u64, eu(e, "description"));
    assert_eq!(o.teid.map(u64::from), Some(eu(e, "teid")));
    assert_eq!(o.ipv4, Some(eip(e, "ipv4")));
    assert_eq!((o.ipv6, o.port, o.c_tag, o.s_tag), (None, None, None, None));
}

fn check_far(far: &CreateFar, e: &Json) {
    assert_eq!(far.far_id as u64, eu(e, "far_id"));
    assert_eq!(bits(&far.apply_action), ebits(e, "apply_action_bits"));
    let fp = far
        .forwarding_parameters
        .as_ref()
        .expect("Forwarding Parameters");
    assert_eq!(
        fp.destination_interface.value() as u64,
        eu(e, "destination_interface")
    );
    assert_eq!(
        opt_text(&fp.network_instance).as_deref(),
        e["network_instance"].as_str()
    );
    match e["ohc"].is_null() {
        true => assert_eq!(fp.outer_header_creation, None),
        false => check_ohc(fp.outer_header_creation.as_ref().unwrap(), &e["ohc"]),
    }
    assert!(fp.other.is_empty() && far.other.is_empty());
}

fn check_built(m: &Built) {
    let e = &m.expect;
    match m.name.as_str() {
        "heartbeat_request" => {
            let (h, b) = typed::<HeartbeatRequest>(m);
            check_node_header(m, &h);
            assert_eq!(b.recovery_time_stamp as u64, eu(e, "recovery_time_stamp"));
            assert!(b.source_ip_address.is_none() && b.other.is_empty());
        }
        "heartbeat_response" => {
            let (h, b) = typed::<HeartbeatResponse>(m);
            check_node_header(m, &h);
            assert_eq!(b.recovery_time_stamp as u64, eu(e, "recovery_time_stamp"));
            assert!(b.other.is_empty());
        }
        "association_setup_request" => {
            let (h, b) = typed::<AssociationSetupRequest>(m);
            check_node_header(m, &h);
            assert_eq!(b.node_id, NodeId::Ipv4(eip(e, "node_id_ipv4")));
            assert_eq!(b.recovery_time_stamp as u64, eu(e, "recovery_time_stamp"));
            let f = b.up_function_features.expect("UP Function Features");
            assert_eq!(f.0.len() as u64, eu(e, "up_function_features_len"));
            assert_eq!(bits(&f), ebits(e, "up_function_features_bits"));
            // The names agree with scapy's: it was given BUCP, FTUP, EMPU, PDIU, QUOAC.
            use up_function_features::*;
            assert_eq!(bits(&f), [BUCP, FTUP, EMPU, PDIU, QUOAC]);
            assert!(b.other.is_empty());
        }
        "association_setup_request_cp" => {
            let (h, b) = typed::<AssociationSetupRequest>(m);
            check_node_header(m, &h);
            assert_eq!(b.node_id.to_string(), es(e, "node_id_fqdn"));
            assert!(matches!(&b.node_id, NodeId::Fqdn(n) if n.is_labels()));
            let f = b.cp_function_features.expect("CP Function Features");
            assert_eq!(bits(&f), ebits(e, "cp_function_features_bits"));
            assert_eq!(
                bits(&f),
                [cp_function_features::LOAD, cp_function_features::OVRL]
            );
            assert!(b.other.is_empty());
        }
        "association_setup_response" => {
            let (h, b) = typed::<AssociationSetupResponse>(m);
            check_node_header(m, &h);
            assert_eq!(b.node_id.to_string(), es(e, "node_id_fqdn"));
            assert_eq!(b.cause.0 as u64, eu(e, "cause"));
            assert_eq!(b.recovery_time_stamp as u64, eu(e, "recovery_time_stamp"));
            let f = b.up_function_features.expect("UP Function Features");
            assert_eq!(bits(&f), ebits(e, "up_function_features_bits"));
            assert_eq!(b.user_plane_ip_resource_information.len(), 1);
            let u = &b.user_plane_ip_resource_information[0];
            let eu_ = &e["upiri"];
            assert_eq!(u.teid_range_bits as u64, eu(eu_, "teid_range_bits"));
            assert_eq!(u.teid_range.map(u64::from), Some(eu(eu_, "teid_range")));
            assert_eq!(u.ipv4, Some(eip(eu_, "ipv4")));
            assert_eq!(u.ipv6, None);
            assert_eq!(
                opt_text(&u.network_instance).as_deref(),
                Some(es(eu_, "network_instance"))
            );
            assert_eq!(
                u.source_interface.map(|i| i.value() as u64),
                Some(eu(eu_, "source_interface"))
            );
            assert!(b.other.is_empty());
        }
        "session_establishment_request" => {
            let (h, b) = typed::<SessionEstablishmentRequest>(m);
            check_session_header(m, &h);
            assert_eq!(b.node_id, NodeId::Ipv4(eip(e, "node_id_ipv4")));
            let f = &e["cp_fseid"];
            assert_eq!(
                b.cp_fseid,
                FSeid {
                    spare: 0,
                    seid: eu(f, "seid"),
                    ipv4: Some(eip(f, "ipv4")),
                    ipv6: None
                }
            );
            let pdrs = e["pdrs"].as_array().unwrap();
            assert_eq!(b.create_pdrs.len(), pdrs.len());
            for (p, ep) in b.create_pdrs.iter().zip(pdrs) {
                check_pdr(p, ep);
            }
            // Clause 5.5.3: the two uplink PDRs ask for one F-TEID through CHOOSE ID 5.
            let ids: BTreeSet<_> = b
                .create_pdrs
                .iter()
                .filter_map(|p| p.pdi.local_fteid?.choose?.choose_id)
                .collect();
            assert_eq!(ids, BTreeSet::from([5]));
            let fars = e["fars"].as_array().unwrap();
            assert_eq!(b.create_fars.len(), fars.len());
            for (f, ef) in b.create_fars.iter().zip(fars) {
                check_far(f, ef);
            }
            let eurr = &e["urr"];
            assert_eq!(b.create_urrs.len(), 1);
            let urr = &b.create_urrs[0];
            assert_eq!(urr.urr_id as u64, eu(eurr, "urr_id"));
            assert_eq!(
                bits(&urr.measurement_method),
                ebits(eurr, "measurement_method_bits")
            );
            assert_eq!(
                bits(&urr.measurement_method),
                [measurement_method::DURAT, measurement_method::VOLUM]
            );
            assert_eq!(
                bits(&urr.reporting_triggers),
                ebits(eurr, "reporting_triggers_bits")
            );
            assert_eq!(
                bits(&urr.reporting_triggers),
                [reporting_triggers::PERIO, reporting_triggers::VOLTH]
            );
            // scapy writes Reporting Triggers as two octets (clause 8.2.19 has three
            // since Rel-16; the third is "present only if explicitly specified").
            assert_eq!(urr.reporting_triggers.0.len(), 2);
            assert_eq!(
                urr.measurement_period.map(u64::from),
                Some(eu(eurr, "measurement_period"))
            );
            check_volume(
                urr.volume_threshold.as_ref().unwrap(),
                &eurr["volume_threshold"],
            );
            check_volume(urr.volume_quota.as_ref().unwrap(), &eurr["volume_quota"]);
            assert!(urr.other.is_empty());
            let eqer = &e["qer"];
            assert_eq!(b.create_qers.len(), 1);
            let qer = &b.create_qers[0];
            assert_eq!(qer.qer_id as u64, eu(eqer, "qer_id"));
            // Clause 8.2.7: UL gate in bits 4-3, DL gate in bits 2-1; scapy: ul=0, dl=1.
            assert_eq!(qer.gate_status as u64, eu(eqer, "gate_status"));
            let br = |b: Option<Bitrate>| b.map(|b| (b.ul_kbps, b.dl_kbps));
            let ebr = |k: &str| Some((eu(&eqer[k], "ul"), eu(&eqer[k], "dl")));
            assert_eq!(br(qer.mbr), ebr("mbr"));
            assert_eq!(br(qer.gbr), ebr("gbr"));
            assert_eq!(qer.qfi.map(u64::from), Some(eu(eqer, "qfi")));
            assert!(qer.other.is_empty());
            assert_eq!(b.pdn_type.map(u64::from), Some(eu(e, "pdn_type")));
            assert!(b.other.is_empty(), "unplaced IEs {:?}", b.other);
        }
        "session_modification_request" => {
            let (h, b) = typed::<SessionModificationRequest>(m);
            check_session_header(m, &h);
            let removed: Vec<u64> = b.remove_pdrs.iter().map(|r| r.pdr_id as u64).collect();
            assert_eq!(removed, vec![3]);
            assert_eq!(b.update_fars.len(), 1);
            let u = &b.update_fars[0];
            assert_eq!(u.far_id as u64, eu(e, "far_id"));
            assert_eq!(
                u.apply_action.as_ref().map(bits),
                Some(ebits(e, "apply_action_bits"))
            );
            let p = u
                .update_forwarding_parameters
                .as_ref()
                .expect("Update Forwarding Parameters");
            assert_eq!(
                p.destination_interface.map(|i| i.value() as u64),
                Some(eu(e, "destination_interface"))
            );
            check_ohc(p.outer_header_creation.as_ref().unwrap(), &e["ohc"]);
            let flags = p.pfcpsm_req_flags.as_ref().expect("PFCPSMReq-Flags");
            assert_eq!(bits(flags), ebits(e, "pfcpsm_req_flags_bits"));
            assert_eq!(bits(flags), [pfcpsm_req_flags::SNDEM]);
            assert!(p.other.is_empty() && u.other.is_empty() && b.other.is_empty());
        }
        "session_report_request" => {
            let (h, b) = typed::<SessionReportRequest>(m);
            check_session_header(m, &h);
            assert_eq!(bits(&b.report_type), ebits(e, "report_type_bits"));
            assert_eq!(bits(&b.report_type), [report_type::USAR]);
            let urs = e["usage_reports"].as_array().unwrap();
            assert_eq!(b.usage_reports.len(), urs.len());
            for (ur, eur) in b.usage_reports.iter().zip(urs) {
                check_usage_report(ur, eur);
            }
            use usage_report_trigger::*;
            assert_eq!(bits(&b.usage_reports[0].usage_report_trigger), [VOLTH]);
            assert_eq!(
                bits(&b.usage_reports[1].usage_report_trigger),
                [PERIO, LIUSA]
            );
            assert!(b.other.is_empty());
        }
        "session_deletion_response" => {
            let (h, b) = typed::<SessionDeletionResponse>(m);
            check_session_header(m, &h);
            assert_eq!(b.cause.0 as u64, eu(e, "cause"));
            let urs = e["usage_reports"].as_array().unwrap();
            assert_eq!(b.usage_reports.len(), urs.len());
            for (ur, eur) in b.usage_reports.iter().zip(urs) {
                check_usage_report(ur, eur);
            }
            assert_eq!(
                bits(&b.usage_reports[0].usage_report_trigger),
                [usage_report_trigger::TERMR]
            );
            assert!(b.other.is_empty());
        }
        other => panic!("no assertions for the scapy-built message {other}"),
    }
}

#[test]
fn scapy_builds_we_parse() {
    let Some(oracle) = Oracle::new("pfcp_oracle.py") else {
        return;
    };
    let built = oracle.build();
    let names: Vec<&str> = built.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "heartbeat_request",
            "heartbeat_response",
            "association_setup_request",
            "association_setup_response",
            "session_establishment_request",
            "session_modification_request",
            "session_report_request",
            "session_deletion_response",
            "association_setup_request_cp",
        ]
    );
    for m in &built {
        // The generic tree takes every IE and gives back scapy's octets.
        let generic = Message::parse(&m.bytes)
            .unwrap_or_else(|e| panic!("{}: {e} ({})", m.name, oracle::hex(&m.bytes)));
        assert_eq!(
            oracle::hex(&generic.emit()),
            oracle::hex(&m.bytes),
            "{}: re-encoding",
            m.name
        );
        check_built(m);
    }
    eprintln!(
        "scapy {}: {} messages built by scapy parsed",
        oracle.scapy_version,
        built.len()
    );
}

// ---------------------------------------------------------------------------------------
// Direction 2: we emit, scapy parses.
// ---------------------------------------------------------------------------------------

const RECOVERY: u32 = 3_900_000_000;
const CP_SEID: u64 = 0x1122_3344_5566_7788;
const UP_SEID: u64 = 0x0000_0001_0000_0001;
const SMF: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const UPF: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 7);
const UPF_N3: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 10);
const GNB: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 20);
const UE: Ipv4Addr = Ipv4Addr::new(10, 45, 0, 2);
const DNN: &str = "internet.example";

fn pdi(source_interface: Interface) -> Pdi {
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

fn create_pdr(pdr_id: u16, precedence: u32, pdi: Pdi) -> CreatePdr {
    CreatePdr {
        pdr_id,
        precedence: Some(precedence),
        pdi,
        outer_header_removal: None,
        far_id: None,
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

fn forwarding_parameters(destination_interface: Interface) -> ForwardingParameters {
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

fn create_far(far_id: u32, apply_action: Flags, fp: ForwardingParameters) -> CreateFar {
    CreateFar {
        far_id,
        apply_action,
        forwarding_parameters: Some(fp),
        duplicating_parameters: vec![],
        bar_id: None,
        other: vec![],
    }
}

fn create_urr(urr_id: u32, measurement_method: Flags, reporting_triggers: Flags) -> CreateUrr {
    CreateUrr {
        urr_id,
        measurement_method,
        reporting_triggers,
        measurement_period: None,
        volume_threshold: None,
        volume_quota: None,
        event_threshold: None,
        event_quota: None,
        time_threshold: None,
        time_quota: None,
        quota_holding_time: None,
        dropped_dl_traffic_threshold: None,
        quota_validity_time: None,
        monitoring_time: None,
        subsequent_volume_threshold: None,
        subsequent_time_threshold: None,
        subsequent_volume_quota: None,
        subsequent_time_quota: None,
        subsequent_event_threshold: None,
        subsequent_event_quota: None,
        inactivity_detection_time: None,
        linked_urr_ids: vec![],
        measurement_information: None,
        time_quota_mechanism: None,
        aggregated_urrs: vec![],
        far_id_for_quota_action: None,
        ethernet_inactivity_timer: None,
        additional_monitoring_time: vec![],
        number_of_reports: None,
        exempted_application_ids: vec![],
        exempted_sdf_filters: vec![],
        user_plane_inactivity_timer: None,
        other: vec![],
    }
}

fn create_qer(qer_id: u32, gate_status: u8) -> CreateQer {
    CreateQer {
        qer_id,
        qer_correlation_id: None,
        gate_status,
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

fn usage_report(
    urr_id: u32,
    ur_seqn: u32,
    trigger: &[u16],
    times: (u32, u32),
    volume: VolumeMeasurement,
) -> UsageReport {
    UsageReport {
        urr_id,
        ur_seqn,
        usage_report_trigger: Flags::from_bits(trigger, 2),
        start_time: Some(times.0),
        end_time: Some(times.1),
        volume_measurement: Some(volume),
        duration_measurement: Some(times.1 - times.0),
        application_detection_information: None,
        ue_ip_address: None,
        network_instance: None,
        time_of_first_packet: None,
        time_of_last_packet: None,
        usage_information: None,
        query_urr_reference: None,
        event_time_stamps: vec![],
        ethernet_traffic_information: None,
        other: vec![],
    }
}

fn volume(total: u64, uplink: u64, downlink: u64) -> VolumeMeasurement {
    VolumeMeasurement {
        total: Some(total),
        uplink: Some(uplink),
        downlink: Some(downlink),
        ..Default::default()
    }
}

fn ue_ip(destination: bool) -> UeIpAddress {
    UeIpAddress {
        ipv4: Some(UE),
        destination,
        ..Default::default()
    }
}

/// The messages we emit, with the values the assertions look for.
struct Emitted {
    name: &'static str,
    header: HeaderRepr,
    bytes: Vec<u8>,
}

fn emitted<B: Body>(name: &'static str, header: HeaderRepr, body: &B) -> Emitted {
    let bytes = pfcp::msg::emit(&header, body);
    // What scapy is given parses back to the same body here too.
    let (h, back) = pfcp::msg::parse::<B>(&bytes).unwrap();
    assert_eq!(h.sequence, header.sequence);
    let again = pfcp::msg::emit(&h, &back);
    assert_eq!(again, bytes, "{name}: emit-parse-emit");
    let mut header = header;
    header.message_type = B::MESSAGE_TYPE;
    Emitted {
        name,
        header,
        bytes,
    }
}

fn establishment_request() -> SessionEstablishmentRequest {
    let mut ul = pdi(Interface::ACCESS);
    ul.local_fteid = Some(FTeid::choose(true, false, Some(5)));
    ul.network_instance = Some(Name::labels(DNN));
    ul.ue_ip_address = vec![ue_ip(false)];
    ul.sdf_filters = vec![SdfFilter {
        flow_description: Some(b"permit out ip from any to assigned".to_vec()),
        ..Default::default()
    }];
    ul.qfis = vec![9];
    let mut pdr1 = create_pdr(1, 200, ul);
    pdr1.outer_header_removal = Some(OuterHeaderRemoval {
        description: OuterHeaderRemoval::GTPU_UDP_IPV4,
        ext_header_deletion: None,
    });
    pdr1.far_id = Some(1);
    pdr1.urr_ids = vec![1];
    pdr1.qer_ids = vec![1];

    let mut ul2 = pdi(Interface::ACCESS);
    ul2.local_fteid = Some(FTeid::choose(true, false, Some(5)));
    ul2.ue_ip_address = vec![ue_ip(false)];
    ul2.sdf_filters = vec![SdfFilter {
        flow_description: Some(b"permit out 17 from 10.45.0.2 to 198.51.100.1 5060".to_vec()),
        tos_traffic_class: Some(0xb8fc),
        filter_id: Some(77),
        ..Default::default()
    }];
    ul2.qfis = vec![5];
    let mut pdr3 = create_pdr(3, 100, ul2);
    pdr3.outer_header_removal = Some(OuterHeaderRemoval {
        description: OuterHeaderRemoval::GTPU_UDP_IP,
        ext_header_deletion: Some(1),
    });
    pdr3.far_id = Some(1);
    pdr3.urr_ids = vec![1];

    let mut dl = pdi(Interface::CORE);
    dl.network_instance = Some(Name::labels(DNN));
    dl.ue_ip_address = vec![ue_ip(true)];
    let mut pdr2 = create_pdr(2, 200, dl);
    pdr2.far_id = Some(2);
    pdr2.urr_ids = vec![1];
    pdr2.qer_ids = vec![1];

    let forw = Flags::from_bits(&[apply_action::FORW], 1);
    let mut fp1 = forwarding_parameters(Interface::CORE);
    fp1.network_instance = Some(Name::labels(DNN));
    let mut fp2 = forwarding_parameters(Interface::ACCESS);
    fp2.outer_header_creation = Some(OuterHeaderCreation::gtpu_ipv4(0x0a0b_0c0d, GNB));

    let mut urr = create_urr(
        1,
        Flags::from_bits(&[measurement_method::DURAT, measurement_method::VOLUM], 1),
        Flags::from_bits(&[reporting_triggers::PERIO, reporting_triggers::VOLTH], 2),
    );
    urr.measurement_period = Some(60);
    urr.volume_threshold = Some(Volume {
        spare: 0,
        total: Some(10_000_000),
        uplink: Some(4_000_000),
        downlink: Some(6_000_000),
    });
    urr.volume_quota = Some(Volume {
        total: Some(1_000_000_000),
        ..Default::default()
    });

    let mut qer = create_qer(1, 0x01);
    qer.mbr = Some(Bitrate {
        ul_kbps: 200_000,
        dl_kbps: 1_000_000,
    });
    qer.gbr = Some(Bitrate {
        ul_kbps: 10_000,
        dl_kbps: 20_000,
    });
    qer.qfi = Some(9);

    SessionEstablishmentRequest {
        node_id: NodeId::Ipv4(SMF),
        cp_fseid: FSeid {
            spare: 0,
            seid: CP_SEID,
            ipv4: Some(SMF),
            ipv6: None,
        },
        create_pdrs: vec![pdr1, pdr3, pdr2],
        create_fars: vec![create_far(1, forw.clone(), fp1), create_far(2, forw, fp2)],
        create_urrs: vec![urr],
        create_qers: vec![qer],
        create_bar: None,
        create_traffic_endpoints: vec![],
        pdn_type: Some(1),
        fq_csids: vec![],
        user_plane_inactivity_timer: None,
        user_id: None,
        trace_information: None,
        apn_dnn: None,
        pfcpse_req_flags: None,
        create_srrs: vec![],
        recovery_time_stamp: None,
        s_nssai: None,
        rat_type: None,
        other: vec![],
    }
}

fn modification_request() -> SessionModificationRequest {
    let mut ufp = UpdateForwardingParameters {
        destination_interface: Some(Interface::ACCESS),
        network_instance: None,
        redirect_information: None,
        outer_header_creation: Some(OuterHeaderCreation::gtpu_ipv4(
            0x1234,
            Ipv4Addr::new(192, 0, 2, 30),
        )),
        transport_level_marking: None,
        forwarding_policy: None,
        header_enrichment: None,
        pfcpsm_req_flags: None,
        linked_traffic_endpoint_id: None,
        destination_interface_type: None,
        data_network_access_identifier: None,
        other: vec![],
    };
    ufp.pfcpsm_req_flags = Some(Flags::from_bits(&[pfcpsm_req_flags::SNDEM], 1));
    SessionModificationRequest {
        cp_fseid: None,
        remove_pdrs: vec![RemovePdr {
            pdr_id: 3,
            other: vec![],
        }],
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
        update_pdrs: vec![],
        update_fars: vec![UpdateFar {
            far_id: 2,
            apply_action: Some(Flags::from_bits(&[apply_action::FORW], 1)),
            update_forwarding_parameters: Some(ufp),
            update_duplicating_parameters: vec![],
            bar_id: None,
            other: vec![],
        }],
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
    }
}

fn our_messages() -> Vec<Emitted> {
    use message_type::*;
    let node = HeaderRepr::node;
    let session = HeaderRepr::session;
    let mut v = Vec::new();

    v.push(emitted(
        "heartbeat_request",
        node(HEARTBEAT_REQUEST, 0xfe_dcba),
        &HeartbeatRequest {
            recovery_time_stamp: RECOVERY,
            source_ip_address: None,
            other: vec![],
        },
    ));
    v.push(emitted(
        "heartbeat_response",
        node(HEARTBEAT_RESPONSE, 0xfe_dcba),
        &HeartbeatResponse {
            recovery_time_stamp: RECOVERY + 1,
            other: vec![],
        },
    ));

    // The UP function's Association Setup Request: two octets of UP Function Features,
    // all of them bits scapy names.
    use up_function_features as upff;
    v.push(emitted(
        "association_setup_request",
        node(ASSOCIATION_SETUP_REQUEST, 7),
        &AssociationSetupRequest {
            up_function_features: Some(Flags::from_bits(
                &[upff::BUCP, upff::FTUP, upff::EMPU, upff::PDIU, upff::QUOAC],
                2,
            )),
            ..AssociationSetupRequest::new(NodeId::Ipv4(UPF), RECOVERY)
        },
    ));

    // Its Association Setup Response: FQDN Node ID, seven octets of UP Function Features
    // (Rel-17 bits scapy 2.6.1 does not name, clause 8.2.25), User Plane IP Resource
    // Information.
    v.push(emitted(
        "association_setup_response",
        node(ASSOCIATION_SETUP_RESPONSE, 8),
        &AssociationSetupResponse {
            node_id: NodeId::Fqdn(Name::labels("upf.5gc.example")),
            cause: CauseValue::REQUEST_ACCEPTED,
            recovery_time_stamp: RECOVERY,
            up_function_features: Some(Flags::from_bits(
                &[
                    upff::FTUP,
                    upff::EMPU,
                    upff::TRACE,
                    upff::UEIP,
                    upff::MPTCP,
                    upff::QFQM,
                    upff::DRQOS,
                ],
                7,
            )),
            cp_function_features: None,
            user_plane_ip_resource_information: vec![UserPlaneIpResourceInformation {
                spare: 0,
                teid_range_bits: 2,
                teid_range: Some(3),
                ipv4: Some(UPF_N3),
                ipv6: None,
                network_instance: Some(Name::labels(DNN)),
                source_interface: Some(Interface::ACCESS),
            }],
            alternative_smf_ip_addresses: vec![],
            smf_set_id: None,
            pfcpas_rsp_flags: None,
            ue_ip_address_pool_information: vec![],
            gtpu_path_qos_control_information: vec![],
            other: vec![],
        },
    ));

    v.push(emitted(
        "session_establishment_request",
        session(SESSION_ESTABLISHMENT_REQUEST, 0, 9),
        &establishment_request(),
    ));

    // The UP function's answer: the F-TEID it chose once for CHOOSE ID 5, in both
    // Created PDRs (clause 5.5.3).
    let fteid = FTeid::new(0x0000_0100, Some(UPF_N3), None);
    let created = |pdr_id| CreatedPdr {
        pdr_id,
        local_fteid: Some(fteid),
        ue_ip_address: vec![],
        other: vec![],
    };
    v.push(emitted(
        "session_establishment_response",
        session(SESSION_ESTABLISHMENT_RESPONSE, CP_SEID, 9),
        &SessionEstablishmentResponse {
            node_id: NodeId::Ipv4(UPF),
            cause: CauseValue::REQUEST_ACCEPTED,
            offending_ie: None,
            up_fseid: Some(FSeid {
                spare: 0,
                seid: UP_SEID,
                ipv4: Some(UPF),
                ipv6: None,
            }),
            created_pdrs: vec![created(1), created(3)],
            load_control_information: None,
            overload_control_information: None,
            fq_csid: None,
            failed_rule_id: None,
            created_traffic_endpoints: vec![],
            partial_failure_information: vec![],
            other: vec![],
        },
    ));

    v.push(emitted(
        "session_modification_request",
        session(SESSION_MODIFICATION_REQUEST, UP_SEID, 10),
        &modification_request(),
    ));

    use usage_report_trigger as urt;
    v.push(emitted(
        "session_modification_response",
        session(SESSION_MODIFICATION_RESPONSE, CP_SEID, 10),
        &SessionModificationResponse {
            cause: CauseValue::REQUEST_ACCEPTED,
            offending_ie: None,
            created_pdrs: vec![],
            load_control_information: None,
            overload_control_information: None,
            usage_reports: vec![usage_report(
                2,
                4,
                &[urt::IMMER],
                (RECOVERY + 10, RECOVERY + 20),
                volume(3_000, 1_000, 2_000),
            )],
            failed_rule_id: None,
            additional_usage_reports_information: None,
            created_traffic_endpoints: vec![],
            partial_failure_information: vec![],
            other: vec![],
        },
    ));

    // Session Report Request with message priority (clause 7.2.2.4.2), a volume report and
    // a periodic one whose Volume Measurement also carries packet counts (Rel-16 TONOP,
    // ULNOP, DLNOP, clause 8.2.44), which scapy 2.6.1 does not know.
    let mut header = session(SESSION_REPORT_REQUEST, CP_SEID, 0x00_1234);
    header.priority = Some(5);
    let mut counted = volume(1_500, 500, 1_000);
    counted.total_packets = Some(15);
    counted.uplink_packets = Some(5);
    counted.downlink_packets = Some(10);
    v.push(emitted(
        "session_report_request",
        header,
        &SessionReportRequest {
            report_type: Flags::from_bits(&[report_type::USAR], 1),
            downlink_data_report: None,
            usage_reports: vec![
                usage_report(
                    1,
                    7,
                    &[urt::VOLTH],
                    (RECOVERY + 100, RECOVERY + 160),
                    volume(10_000_123, 4_000_100, 6_000_023),
                ),
                usage_report(
                    2,
                    0,
                    &[urt::PERIO, urt::LIUSA],
                    (RECOVERY + 100, RECOVERY + 130),
                    counted,
                ),
            ],
            error_indication_report: None,
            load_control_information: None,
            overload_control_information: None,
            additional_usage_reports_information: None,
            pfcpsr_req_flags: None,
            old_cp_fseid: None,
            session_reports: vec![],
            cause: None,
            other: vec![],
        },
    ));

    v.push(emitted(
        "session_deletion_response",
        session(SESSION_DELETION_RESPONSE, CP_SEID, 11),
        &SessionDeletionResponse {
            cause: CauseValue::REQUEST_ACCEPTED,
            offending_ie: None,
            load_control_information: None,
            overload_control_information: None,
            usage_reports: vec![usage_report(
                1,
                8,
                &[urt::TERMR],
                (RECOVERY + 160, RECOVERY + 170),
                volume(2_000, 1_200, 800),
            )],
            additional_usage_reports_information: None,
            session_reports: vec![],
            other: vec![],
        },
    ));

    // Node Report Request for a GTP-U path failure (clause 7.4.5.1). Only V4 is set in the
    // Remote GTP-U Peer: scapy 2.6.1 reads the "Length of Destination Interface field" as
    // one octet where clause 8.2.70 (Figure 8.2.70-1, octets q to q+1) has two, so DI and
    // NI would be misread.
    v.push(emitted(
        "node_report_request",
        node(NODE_REPORT_REQUEST, 12),
        &NodeReportRequest {
            node_id: NodeId::Ipv4(UPF),
            node_report_type: Flags::from_bits(&[pfcp::ie::node_report_type::UPFR], 1),
            user_plane_path_failure_report: Some(UserPlanePathFailureReport {
                remote_gtpu_peers: vec![RemoteGtpuPeer {
                    spare: 0,
                    ipv4: Some(GNB),
                    ipv6: None,
                    destination_interface: None,
                    network_instance: None,
                }],
                other: vec![],
            }),
            user_plane_path_recovery_report: None,
            gtpu_path_qos_reports: vec![],
            other: vec![],
        },
    ));
    v
}

/// Scapy's bits of a flags IE, by its field names, mapped to our bit numbers.
fn scapy_bits(n: Node, names: &[(&str, u16)]) -> Vec<u16> {
    let mut v: Vec<u16> = names
        .iter()
        .filter(|(f, _)| n.u64(f) == 1)
        .map(|(_, b)| *b)
        .collect();
    v.sort();
    v
}

fn scapy_up_features(n: Node) -> Vec<u16> {
    use up_function_features::*;
    scapy_bits(
        n,
        &[
            ("BUCP", BUCP),
            ("DDND", DDND),
            ("DLBD", DLBD),
            ("TRST", TRST),
            ("FTUP", FTUP),
            ("PFDM", PFDM),
            ("HEEU", HEEU),
            ("TREU", TREU),
            ("EMPU", EMPU),
            ("PDIU", PDIU),
            ("UDBC", UDBC),
            ("QUOAC", QUOAC),
            ("TRACE", TRACE),
            ("FRRT", FRRT),
            ("PFDE", PFDE),
        ],
    )
}

fn scapy_trigger(n: Node) -> Vec<u16> {
    use usage_report_trigger::*;
    scapy_bits(
        n,
        &[
            ("PERIO", PERIO),
            ("VOLTH", VOLTH),
            ("TIMTH", TIMTH),
            ("QUHTI", QUHTI),
            ("START", START),
            ("STOPT", STOPT),
            ("DROTH", DROTH),
            ("IMMER", IMMER),
            ("VOLQU", VOLQU),
            ("TIMQU", TIMQU),
            ("LIUSA", LIUSA),
            ("TERMR", TERMR),
            ("MONIT", MONIT),
            ("ENVCL", ENVCL),
            ("MACAR", MACAR),
            ("EVETH", EVETH),
        ],
    )
}

fn scapy_apply_action(n: Node) -> Vec<u16> {
    use apply_action::*;
    scapy_bits(
        n,
        &[
            ("DROP", DROP),
            ("FORW", FORW),
            ("BUFF", BUFF),
            ("NOCP", NOCP),
            ("DUPL", DUPL),
        ],
    )
}

fn check_scapy_header(l: Node, m: &Emitted) {
    let h = &m.header;
    assert_eq!(l.class(), "PFCP");
    assert_eq!(l.u64("version"), 1);
    assert_eq!(l.u64("message_type"), h.message_type as u64, "{}", m.name);
    assert_eq!(l.u64("length"), m.bytes.len() as u64 - 4, "{}", m.name);
    assert_eq!(l.u64("S"), h.seid.is_some() as u64, "{}", m.name);
    assert_eq!(l.u64("MP"), h.priority.is_some() as u64, "{}", m.name);
    assert_eq!(l.u64("seq"), h.sequence as u64, "{}", m.name);
    assert_eq!(l.has("seid"), h.seid.is_some());
    if let Some(s) = h.seid {
        assert_eq!(l.u64("seid"), s);
    }
    match h.priority {
        Some(p) => assert_eq!(l.u64("priority"), p as u64),
        None => assert_eq!(l.u64("spare_oct"), 0),
    }
    for s in ["spare_b2", "spare_b3", "spare_b4"] {
        assert_eq!(l.u64(s), 0);
    }
}

fn check_scapy_ipv4_node_id(n: Node, ip: Ipv4Addr) {
    assert_eq!(n.u64("id_type"), 0);
    assert_eq!(n.str("ipv4"), ip.to_string());
}

fn check_scapy_usage_report(ur: Node, want: &UsageReport) {
    assert_eq!(
        ur.classes(),
        [
            "IE_URR_Id",
            "IE_UR_SEQN",
            "IE_UsageReportTrigger",
            "IE_StartTime",
            "IE_EndTime",
            "IE_VolumeMeasurement",
            "IE_DurationMeasurement"
        ]
    );
    assert_eq!(ur.one("IE_URR_Id").u64("id"), want.urr_id as u64);
    assert_eq!(ur.one("IE_UR_SEQN").u64("number"), want.ur_seqn as u64);
    assert_eq!(
        scapy_trigger(ur.one("IE_UsageReportTrigger")),
        bits(&want.usage_report_trigger)
    );
    assert_eq!(
        ur.one("IE_StartTime").u64("timestamp"),
        want.start_time.unwrap() as u64
    );
    assert_eq!(
        ur.one("IE_EndTime").u64("timestamp"),
        want.end_time.unwrap() as u64
    );
    assert_eq!(
        ur.one("IE_DurationMeasurement").u64("duration"),
        want.duration_measurement.unwrap() as u64
    );
    let vm = ur.one("IE_VolumeMeasurement");
    let v = want.volume_measurement.unwrap();
    assert_eq!(vm.u64("TOVOL"), 1);
    assert_eq!(vm.u64("ULVOL"), 1);
    assert_eq!(vm.u64("DLVOL"), 1);
    assert_eq!(vm.u64("total"), v.total.unwrap());
    assert_eq!(vm.u64("uplink"), v.uplink.unwrap());
    assert_eq!(vm.u64("downlink"), v.downlink.unwrap());
    match (v.total_packets, v.uplink_packets, v.downlink_packets) {
        (None, None, None) => {
            assert_eq!(vm.u64("spare"), 0);
            assert_eq!(vm.str("extra_data"), "");
        }
        (Some(t), Some(u), Some(d)) => {
            // scapy 2.6.1 stops at DLVOL (Rel-15): TONOP, ULNOP and DLNOP (bits 4-6 of
            // octet 5, clause 8.2.44) are its "spare" bits and the counts its extra data,
            // which still shows where we put them: after the volumes, in that order.
            assert_eq!(vm.u64("spare"), 0b00111);
            let mut counts = Vec::new();
            for x in [t, u, d] {
                counts.extend_from_slice(&x.to_be_bytes());
            }
            assert_eq!(vm.bytes("extra_data"), counts);
        }
        other => panic!("test builds no such report: {other:?}"),
    }
}

fn check_dissected(m: &Emitted, d: &Json) {
    match m.name {
        "heartbeat_request" | "heartbeat_response" => {
            let (req, class) = if m.name == "heartbeat_request" {
                (true, "PFCPHeartbeatRequest")
            } else {
                (false, "PFCPHeartbeatResponse")
            };
            let l = layers(d, &["PFCP", class]);
            check_scapy_header(l[0], m);
            assert_clean(l[1], &[]);
            assert_eq!(l[1].classes(), ["IE_RecoveryTimeStamp"]);
            let ts = l[1].one("IE_RecoveryTimeStamp").u64("timestamp");
            assert_eq!(ts, RECOVERY as u64 + if req { 0 } else { 1 });
        }
        "association_setup_request" => {
            let l = layers(d, &["PFCP", "PFCPAssociationSetupRequest"]);
            check_scapy_header(l[0], m);
            assert_clean(l[1], &[]);
            let b = l[1];
            assert_eq!(
                b.classes(),
                ["IE_NodeId", "IE_RecoveryTimeStamp", "IE_UPFunctionFeatures"]
            );
            check_scapy_ipv4_node_id(b.one("IE_NodeId"), UPF);
            assert_eq!(
                b.one("IE_RecoveryTimeStamp").u64("timestamp"),
                RECOVERY as u64
            );
            use up_function_features::*;
            assert_eq!(
                scapy_up_features(b.one("IE_UPFunctionFeatures")),
                [BUCP, FTUP, EMPU, PDIU, QUOAC]
            );
        }
        "association_setup_response" => {
            let l = layers(d, &["PFCP", "PFCPAssociationSetupResponse"]);
            check_scapy_header(l[0], m);
            let b = l[1];
            assert_clean(b, &["IE_UPFunctionFeatures"]);
            assert_eq!(
                b.classes(),
                [
                    "IE_NodeId",
                    "IE_Cause",
                    "IE_RecoveryTimeStamp",
                    "IE_UPFunctionFeatures",
                    "IE_UserPlaneIPResourceInformation"
                ]
            );
            let n = b.one("IE_NodeId");
            assert_eq!(n.u64("id_type"), 2);
            assert_eq!(n.bytes("id"), b"upf.5gc.example");
            assert_eq!(b.one("IE_Cause").u64("cause"), 1);
            let f = b.one("IE_UPFunctionFeatures");
            use up_function_features::*;
            assert_eq!(scapy_up_features(f), [FTUP, EMPU, TRACE]);
            // Octets 7-11 (UEIP is bit 3 of octet 7, MPTCP bit 8 of octet 8, QFQM bit 2 of
            // octet 9, DRQOS bit 1 of octet 11) are past what scapy 2.6.1 names (octets 5
            // and 6): its extra data, octet for octet.
            let want = Flags::from_bits(&[UEIP, MPTCP, QFQM, DRQOS], 7);
            assert_eq!(f.bytes("extra_data"), want.0[2..]);
            assert_eq!(f.u64("length"), 7);
            let u = b.one("IE_UserPlaneIPResourceInformation");
            assert_eq!(
                (u.u64("V4"), u.u64("V6"), u.u64("TEIDRI")),
                (1, 0, 2),
                "UPIRI flags"
            );
            assert_eq!(u.u64("teid_range"), 3);
            assert_eq!(u.str("ipv4"), UPF_N3.to_string());
            assert_eq!((u.u64("ASSONI"), u.u64("ASSOSI")), (1, 1));
            assert_eq!(u.bytes("network_instance"), DNN.as_bytes());
            assert_eq!(u.u64("interface"), 0);
        }
        "session_establishment_request" => {
            let l = layers(d, &["PFCP", "PFCPSessionEstablishmentRequest"]);
            check_scapy_header(l[0], m);
            let b = l[1];
            assert_clean(b, &[]);
            assert_eq!(
                b.classes(),
                [
                    "IE_NodeId",
                    "IE_FSEID",
                    "IE_CreatePDR",
                    "IE_CreatePDR",
                    "IE_CreatePDR",
                    "IE_CreateFAR",
                    "IE_CreateFAR",
                    "IE_CreateURR",
                    "IE_CreateQER",
                    "IE_PDNType"
                ]
            );
            let want = establishment_request();
            check_scapy_ipv4_node_id(b.one("IE_NodeId"), SMF);
            let f = b.one("IE_FSEID");
            assert_eq!((f.u64("v4"), f.u64("v6")), (1, 0));
            assert_eq!(f.u64("seid"), CP_SEID);
            assert_eq!(f.str("ipv4"), SMF.to_string());
            for (n, p) in b.all("IE_CreatePDR").into_iter().zip(&want.create_pdrs) {
                check_scapy_pdr(n, p);
            }
            for (n, f) in b.all("IE_CreateFAR").into_iter().zip(&want.create_fars) {
                assert_eq!(n.one("IE_FAR_Id").u64("id"), f.far_id as u64);
                assert_eq!(
                    scapy_apply_action(n.one("IE_ApplyAction")),
                    bits(&f.apply_action)
                );
                let fp = n.one("IE_ForwardingParameters");
                let wfp = f.forwarding_parameters.as_ref().unwrap();
                assert_eq!(
                    fp.one("IE_DestinationInterface").u64("interface"),
                    wfp.destination_interface.0 as u64
                );
                match &wfp.network_instance {
                    Some(ni) => assert_eq!(
                        fp.one("IE_NetworkInstance").bytes("instance"),
                        ni.to_text().as_bytes()
                    ),
                    None => assert!(fp.all("IE_NetworkInstance").is_empty()),
                }
                match &wfp.outer_header_creation {
                    Some(o) => check_scapy_ohc(fp.one("IE_OuterHeaderCreation"), o),
                    None => assert!(fp.all("IE_OuterHeaderCreation").is_empty()),
                }
            }
            let u = b.one("IE_CreateURR");
            assert_eq!(
                u.classes(),
                [
                    "IE_URR_Id",
                    "IE_MeasurementMethod",
                    "IE_ReportingTriggers",
                    "IE_MeasurementPeriod",
                    "IE_VolumeThreshold",
                    "IE_VolumeQuota"
                ]
            );
            assert_eq!(u.one("IE_URR_Id").u64("id"), 1);
            let mm = u.one("IE_MeasurementMethod");
            assert_eq!(
                (mm.u64("DURAT"), mm.u64("VOLUM"), mm.u64("EVENT")),
                (1, 1, 0)
            );
            let rt = u.one("IE_ReportingTriggers");
            assert_eq!(rt.u64("periodic_reporting"), 1);
            assert_eq!(rt.u64("volume_threshold"), 1);
            for other in [
                "time_threshold",
                "quota_holding_time",
                "start_of_traffic",
                "stop_of_traffic",
                "dropped_dl_traffic_threshold",
                "linked_usage_reporting",
                "volume_quota",
                "time_quota",
                "envelope_closure",
                "mac_addresses_reporting",
                "event_threshold",
                "event_quota",
            ] {
                assert_eq!(rt.u64(other), 0, "Reporting Triggers {other}");
            }
            assert_eq!(u.one("IE_MeasurementPeriod").u64("period"), 60);
            let vt = u.one("IE_VolumeThreshold");
            assert_eq!(
                (vt.u64("TOVOL"), vt.u64("ULVOL"), vt.u64("DLVOL")),
                (1, 1, 1)
            );
            assert_eq!(
                (vt.u64("total"), vt.u64("uplink"), vt.u64("downlink")),
                (10_000_000, 4_000_000, 6_000_000)
            );
            let vq = u.one("IE_VolumeQuota");
            assert_eq!(
                (vq.u64("TOVOL"), vq.u64("ULVOL"), vq.u64("DLVOL")),
                (1, 0, 0)
            );
            assert_eq!(vq.u64("total"), 1_000_000_000);
            let q = b.one("IE_CreateQER");
            assert_eq!(
                q.classes(),
                ["IE_QER_Id", "IE_GateStatus", "IE_MBR", "IE_GBR", "IE_QFI"]
            );
            assert_eq!(q.one("IE_QER_Id").u64("id"), 1);
            let g = q.one("IE_GateStatus");
            assert_eq!((g.u64("ul"), g.u64("dl")), (0, 1));
            let mbr = q.one("IE_MBR");
            assert_eq!((mbr.u64("ul"), mbr.u64("dl")), (200_000, 1_000_000));
            let gbr = q.one("IE_GBR");
            assert_eq!((gbr.u64("ul"), gbr.u64("dl")), (10_000, 20_000));
            assert_eq!(q.one("IE_QFI").u64("QFI"), 9);
            assert_eq!(b.one("IE_PDNType").u64("pdn_type"), 1);
        }
        "session_establishment_response" => {
            let l = layers(d, &["PFCP", "PFCPSessionEstablishmentResponse"]);
            check_scapy_header(l[0], m);
            let b = l[1];
            assert_clean(b, &[]);
            assert_eq!(
                b.classes(),
                [
                    "IE_NodeId",
                    "IE_Cause",
                    "IE_FSEID",
                    "IE_CreatedPDR",
                    "IE_CreatedPDR"
                ]
            );
            check_scapy_ipv4_node_id(b.one("IE_NodeId"), UPF);
            assert_eq!(b.one("IE_Cause").u64("cause"), 1);
            let f = b.one("IE_FSEID");
            assert_eq!((f.u64("seid"), f.str("ipv4")), (UP_SEID, "10.0.0.7"));
            for (n, id) in b.all("IE_CreatedPDR").into_iter().zip([1, 3]) {
                assert_eq!(n.classes(), ["IE_PDR_Id", "IE_FTEID"]);
                assert_eq!(n.one("IE_PDR_Id").u64("id"), id);
                let t = n.one("IE_FTEID");
                assert_eq!(
                    (t.u64("CH"), t.u64("CHID"), t.u64("V4"), t.u64("V6")),
                    (0, 0, 1, 0)
                );
                assert_eq!(t.u64("TEID"), 0x100);
                assert_eq!(t.str("ipv4"), UPF_N3.to_string());
                assert!(!t.has("choose_id"));
            }
        }
        "session_modification_request" => {
            let l = layers(d, &["PFCP", "PFCPSessionModificationRequest"]);
            check_scapy_header(l[0], m);
            let b = l[1];
            assert_clean(b, &[]);
            assert_eq!(b.classes(), ["IE_RemovePDR", "IE_UpdateFAR"]);
            assert_eq!(b.one("IE_RemovePDR").one("IE_PDR_Id").u64("id"), 3);
            let u = b.one("IE_UpdateFAR");
            assert_eq!(
                u.classes(),
                [
                    "IE_FAR_Id",
                    "IE_ApplyAction",
                    "IE_UpdateForwardingParameters"
                ]
            );
            assert_eq!(u.one("IE_FAR_Id").u64("id"), 2);
            assert_eq!(
                scapy_apply_action(u.one("IE_ApplyAction")),
                [apply_action::FORW]
            );
            let p = u.one("IE_UpdateForwardingParameters");
            assert_eq!(
                p.classes(),
                [
                    "IE_DestinationInterface",
                    "IE_OuterHeaderCreation",
                    "IE_PFCPSMReqFlags"
                ]
            );
            assert_eq!(p.one("IE_DestinationInterface").u64("interface"), 0);
            check_scapy_ohc(
                p.one("IE_OuterHeaderCreation"),
                &OuterHeaderCreation::gtpu_ipv4(0x1234, Ipv4Addr::new(192, 0, 2, 30)),
            );
            let fl = p.one("IE_PFCPSMReqFlags");
            // scapy calls QAURR (clause 8.2.31 bit 3) "QUARR".
            assert_eq!(
                (fl.u64("DROBU"), fl.u64("SNDEM"), fl.u64("QUARR")),
                (0, 1, 0)
            );
        }
        "session_modification_response" | "session_deletion_response" => {
            let (class, ur_class) = if m.name == "session_modification_response" {
                ("PFCPSessionModificationResponse", "IE_UsageReport_SMR")
            } else {
                ("PFCPSessionDeletionResponse", "IE_UsageReport_SDR")
            };
            let l = layers(d, &["PFCP", class]);
            check_scapy_header(l[0], m);
            let b = l[1];
            assert_clean(b, &[]);
            assert_eq!(b.classes(), ["IE_Cause", ur_class]);
            assert_eq!(b.one("IE_Cause").u64("cause"), 1);
            let want = if m.name == "session_modification_response" {
                usage_report(
                    2,
                    4,
                    &[usage_report_trigger::IMMER],
                    (RECOVERY + 10, RECOVERY + 20),
                    volume(3_000, 1_000, 2_000),
                )
            } else {
                usage_report(
                    1,
                    8,
                    &[usage_report_trigger::TERMR],
                    (RECOVERY + 160, RECOVERY + 170),
                    volume(2_000, 1_200, 800),
                )
            };
            check_scapy_usage_report(b.one(ur_class), &want);
        }
        "session_report_request" => {
            let l = layers(d, &["PFCP", "PFCPSessionReportRequest"]);
            check_scapy_header(l[0], m);
            let b = l[1];
            assert_clean(b, &["IE_VolumeMeasurement"]);
            assert_eq!(
                b.classes(),
                ["IE_ReportType", "IE_UsageReport_SRR", "IE_UsageReport_SRR"]
            );
            let rt = b.one("IE_ReportType");
            assert_eq!(
                (
                    rt.u64("DLDR"),
                    rt.u64("USAR"),
                    rt.u64("ERIR"),
                    rt.u64("UPIR")
                ),
                (0, 1, 0, 0)
            );
            use usage_report_trigger as urt;
            let mut counted = volume(1_500, 500, 1_000);
            counted.total_packets = Some(15);
            counted.uplink_packets = Some(5);
            counted.downlink_packets = Some(10);
            let want = [
                usage_report(
                    1,
                    7,
                    &[urt::VOLTH],
                    (RECOVERY + 100, RECOVERY + 160),
                    volume(10_000_123, 4_000_100, 6_000_023),
                ),
                usage_report(
                    2,
                    0,
                    &[urt::PERIO, urt::LIUSA],
                    (RECOVERY + 100, RECOVERY + 130),
                    counted,
                ),
            ];
            for (n, w) in b.all("IE_UsageReport_SRR").into_iter().zip(&want) {
                check_scapy_usage_report(n, w);
            }
        }
        "node_report_request" => {
            let l = layers(d, &["PFCP", "PFCPNodeReportRequest"]);
            check_scapy_header(l[0], m);
            let b = l[1];
            assert_clean(b, &[]);
            assert_eq!(
                b.classes(),
                [
                    "IE_NodeId",
                    "IE_NodeReportType",
                    "IE_UserPlanePathFailureReport"
                ]
            );
            check_scapy_ipv4_node_id(b.one("IE_NodeId"), UPF);
            assert_eq!(b.one("IE_NodeReportType").u64("UPFR"), 1);
            let p = b
                .one("IE_UserPlanePathFailureReport")
                .one("IE_RemoteGTP_U_Peer");
            assert_eq!(
                (p.u64("V4"), p.u64("V6"), p.u64("DI"), p.u64("NI")),
                (1, 0, 0, 0)
            );
            assert_eq!(p.str("ipv4"), GNB.to_string());
        }
        other => panic!("no assertions for {other}"),
    }
}

fn check_scapy_ohc(n: Node, o: &OuterHeaderCreation) {
    // Clause 8.2.56: octet 5 bit 1 GTP-U/UDP/IPv4 ... bit 8 S-TAG; octet 6 N19/N6.
    assert_eq!(o.description, OuterHeaderCreation::GTPU_UDP_IPV4);
    assert_eq!(n.u64("GTPUUDPIPV4"), 1);
    for f in [
        "GTPUUDPIPV6",
        "UDPIPV4",
        "UDPIPV6",
        "IPV4",
        "IPV6",
        "CTAG",
        "STAG",
    ] {
        assert_eq!(n.u64(f), 0, "Outer Header Creation {f}");
    }
    assert_eq!(n.u64("spare"), 0);
    assert_eq!(n.u64("TEID"), o.teid.unwrap() as u64);
    assert_eq!(n.str("ipv4"), o.ipv4.unwrap().to_string());
    assert!(!n.has("port"));
}

fn check_scapy_pdr(n: Node, p: &CreatePdr) {
    let ctx = format!("PDR {}", p.pdr_id);
    assert_eq!(n.one("IE_PDR_Id").u64("id"), p.pdr_id as u64);
    assert_eq!(
        n.one("IE_Precedence").u64("precedence"),
        p.precedence.unwrap() as u64
    );
    let pdi = n.one("IE_PDI");
    assert_eq!(
        pdi.one("IE_SourceInterface").u64("interface"),
        p.pdi.source_interface.0 as u64,
        "{ctx}"
    );
    match p.pdi.local_fteid {
        Some(f) => {
            let c = f.choose.unwrap();
            let t = pdi.one("IE_FTEID");
            assert_eq!(
                (t.u64("CH"), t.u64("CHID"), t.u64("V4"), t.u64("V6")),
                (1, 1, c.v4 as u64, c.v6 as u64),
                "{ctx}: F-TEID flags"
            );
            // Clause 8.2.3: with CH set neither TEID nor address is present, the CHOOSE ID
            // follows the flags octet.
            assert!(!t.has("TEID") && !t.has("ipv4"), "{ctx}");
            assert_eq!(t.u64("choose_id"), c.choose_id.unwrap() as u64);
            assert_eq!(t.u64("length"), 2);
        }
        None => assert!(pdi.all("IE_FTEID").is_empty()),
    }
    match &p.pdi.network_instance {
        Some(ni) => assert_eq!(
            pdi.one("IE_NetworkInstance").bytes("instance"),
            ni.to_text().as_bytes()
        ),
        None => assert!(pdi.all("IE_NetworkInstance").is_empty()),
    }
    let ue = pdi.one("IE_UE_IP_Address");
    let w = p.pdi.ue_ip_address[0];
    assert_eq!(
        (ue.u64("V4"), ue.u64("V6"), ue.u64("SD")),
        (1, 0, w.destination as u64),
        "{ctx}: UE IP flags"
    );
    assert_eq!(ue.u64("spare"), 0);
    assert_eq!(ue.str("ipv4"), w.ipv4.unwrap().to_string());
    match p.pdi.sdf_filters.first() {
        Some(f) => {
            let s = pdi.one("IE_SDF_Filter");
            assert_eq!(s.u64("FD"), 1);
            assert_eq!(
                s.bytes("flow_description"),
                f.flow_description.clone().unwrap()
            );
            match f.tos_traffic_class {
                Some(t) => {
                    assert_eq!(s.u64("TTC"), 1);
                    assert_eq!(
                        (s.u64("tos_traffic_class"), s.u64("tos_traffic_mask")),
                        ((t >> 8) as u64, (t & 0xff) as u64)
                    );
                }
                None => assert_eq!(s.u64("TTC"), 0),
            }
            match f.filter_id {
                Some(id) => {
                    assert_eq!(s.u64("BID"), 1);
                    assert_eq!(s.u64("sdf_filter_id"), id as u64);
                }
                None => assert_eq!(s.u64("BID"), 0),
            }
            assert_eq!((s.u64("SPI"), s.u64("FL")), (0, 0));
        }
        None => assert!(pdi.all("IE_SDF_Filter").is_empty()),
    }
    let qfis: Vec<u64> = pdi.all("IE_QFI").iter().map(|q| q.u64("QFI")).collect();
    assert_eq!(
        qfis,
        p.pdi.qfis.iter().map(|q| *q as u64).collect::<Vec<_>>()
    );
    match p.outer_header_removal {
        Some(o) => {
            let r = n.one("IE_OuterHeaderRemoval");
            assert_eq!(r.u64("header"), o.description as u64);
            match o.ext_header_deletion {
                Some(x) => assert_eq!(r.u64("pdu_session_container"), x as u64),
                None => assert!(!r.has("pdu_session_container")),
            }
        }
        None => assert!(n.all("IE_OuterHeaderRemoval").is_empty()),
    }
    assert_eq!(n.one("IE_FAR_Id").u64("id"), p.far_id.unwrap() as u64);
    let ids = |c| n.all(c).iter().map(|x| x.u64("id")).collect::<Vec<_>>();
    let want = |v: &[u32]| v.iter().map(|x| *x as u64).collect::<Vec<_>>();
    assert_eq!(ids("IE_URR_Id"), want(&p.urr_ids), "{ctx}");
    assert_eq!(ids("IE_QER_Id"), want(&p.qer_ids), "{ctx}");
}

#[test]
fn we_emit_scapy_parses() {
    let Some(oracle) = Oracle::new("pfcp_oracle.py") else {
        return;
    };
    let ours = our_messages();
    let input: Vec<(&str, Vec<u8>)> = ours.iter().map(|m| (m.name, m.bytes.clone())).collect();
    let dissected = oracle.dissect(&input);
    for (m, d) in ours.iter().zip(&dissected) {
        check_dissected(m, d);
    }
    eprintln!(
        "scapy {}: {} messages we emitted dissected",
        oracle.scapy_version,
        ours.len()
    );
}
