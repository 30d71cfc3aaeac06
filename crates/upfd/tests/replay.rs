//! Every capture of ../shared/interop/pcaps with SMF requests, played against a fresh
//! upfd by `upfbench replay`: every response matches the original UPF's (message type,
//! Cause, Created PDRs with allocations, F-TEID and UE address when CHOOSE was asked),
//! none times out.
//!
//! Deliberate difference, not counted as a mismatch (docs/interop.md): older Open5GS
//! UPFs also return bare Created PDRs (PDR ID only) for PDRs whose F-TEID the SMF chose;
//! TS 29.244 Table 7.5.3.1-1 asks for a Created PDR only when the UP function allocated.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use upfbench::replay::{replay, Plan, ReplayConfig};

fn pcaps() -> Option<Vec<PathBuf>> {
    let dir = std::env::var_os("UPF_INTEROP_PCAPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/interop/pcaps")
        });
    if !dir.is_dir() {
        eprintln!("interop pcaps absent at {}: skipping", dir.display());
        return None;
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    v.sort();
    Some(v)
}

#[test]
fn replay_every_capture_against_a_fresh_upfd() {
    let Some(files) = pcaps() else { return };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut replayed = 0;
    let addr = Ipv4Addr::new(127, 0, 0, 70);
    for f in files {
        let plan = Plan::from_file(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let upfd = common::Upfd::builder()
            .address(IpAddr::V4(addr))
            .n3(addr)
            .heartbeat_interval("60s")
            .ue_pool("internet", "10.45.0.0/16")
            .ue_pool("internet", "cafe::/64")
            .ue_pool("", "10.46.0.0/16")
            .start();
        let mut cfg = ReplayConfig::new(upfd.n4);
        cfg.upf_n3 = vec![IpAddr::V4(addr)];
        // Patient with a busy machine: three tries of 5 s before a request counts as
        // timed out (upfd answers a retransmission from its cache).
        cfg.timeout = Duration::from_secs(5);
        cfg.retransmissions = 2;
        let report = rt.block_on(replay(&plan, &cfg, |_| {})).unwrap();
        let s = &report.summary;
        eprintln!("{name}: {s}");
        if s.requests > 0 {
            replayed += 1;
        }
        let problems: Vec<String> = report
            .outcomes
            .iter()
            .filter(|o| !matches!(o.verdict, upfbench::replay::Verdict::Matched))
            .map(|o| format!("{o:?}"))
            .collect();
        assert_eq!(
            (s.mismatched, s.timed_out),
            (0, 0),
            "{name}:\n{}\nupfd log:\n{}",
            problems.join("\n"),
            upfd.log_tail(30)
        );
        assert_eq!(s.matched, s.requests);
        let _: SocketAddr = upfd.n4;
    }
    assert!(
        replayed >= 6,
        "expected the six Open5GS captures with SMF requests, replayed {replayed}"
    );
}

/// A capture as `tcpdump` on an SMF's host would have it: each request, then the
/// recorded UPF's response. SMF at 10.0.0.4, recorded UPF at 10.0.0.7, both on 8805.
fn write_capture(path: &std::path::Path, exchanges: &[(Vec<u8>, Vec<u8>)]) {
    let (smf, upf): (IpAddr, IpAddr) = ("10.0.0.4".parse().unwrap(), "10.0.0.7".parse().unwrap());
    let mut w =
        capture::PcapWriter::new(std::fs::File::create(path).unwrap(), capture::linktype::RAW)
            .unwrap();
    for (req, rsp) in exchanges {
        w.write(0, &capture::ip_udp_packet(smf, upf, 8805, 8805, req))
            .unwrap();
        w.write(0, &capture::ip_udp_packet(upf, smf, 8805, 8805, rsp))
            .unwrap();
    }
}

mod recorded {
    //! The responses of the UPFs these SMFs ran with (OAI's SPGW-U / UPF, a vendor UPF),
    //! built with the typed codec: what `upfbench replay` compares upfd's answers with.
    use std::net::{IpAddr, Ipv4Addr};

    use pfcp::ie::{CauseValue, FSeid, FTeid, Flags, NodeId, UeIpAddress};
    use pfcp::msg::{self, CreatedPdr};
    use pfcp::HeaderRepr;

    pub const UPF: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 7);

    pub fn association(seq: u32) -> Vec<u8> {
        msg::emit(
            &HeaderRepr::node(0, seq),
            &msg::AssociationSetupResponse {
                node_id: NodeId::Ipv4(UPF),
                cause: CauseValue::REQUEST_ACCEPTED,
                recovery_time_stamp: 3_900_000_000,
                up_function_features: Some(Flags::from_bits(
                    &[pfcp::ie::up_function_features::FTUP],
                    2,
                )),
                cp_function_features: None,
                user_plane_ip_resource_information: vec![],
                alternative_smf_ip_addresses: vec![],
                smf_set_id: None,
                pfcpas_rsp_flags: None,
                ue_ip_address_pool_information: vec![],
                gtpu_path_qos_control_information: vec![],
                other: vec![],
            },
        )
    }

    pub fn heartbeat(seq: u32) -> Vec<u8> {
        msg::emit(
            &HeaderRepr::node(0, seq),
            &msg::HeartbeatResponse {
                recovery_time_stamp: 3_900_000_000,
                other: vec![],
            },
        )
    }

    /// Accepted, UP SEID `up`, and a Created PDR per (PDR ID, F-TEID, UE address).
    pub fn establishment(
        seq: u32,
        cp_seid: u64,
        up: u64,
        created: &[(u16, Option<FTeid>, Option<IpAddr>)],
    ) -> Vec<u8> {
        let created_pdrs = created
            .iter()
            .map(|(id, f, ue)| CreatedPdr {
                pdr_id: *id,
                local_fteid: *f,
                ue_ip_address: ue
                    .iter()
                    .map(|a| UeIpAddress {
                        ipv4: match a {
                            IpAddr::V4(a) => Some(*a),
                            _ => None,
                        },
                        ipv6: match a {
                            IpAddr::V6(a) => Some(*a),
                            _ => None,
                        },
                        destination: true,
                        ..Default::default()
                    })
                    .collect(),
                other: vec![],
            })
            .collect();
        msg::emit(
            &HeaderRepr::session(0, cp_seid, seq),
            &msg::SessionEstablishmentResponse {
                node_id: NodeId::Ipv4(UPF),
                cause: CauseValue::REQUEST_ACCEPTED,
                offending_ie: None,
                up_fseid: Some(FSeid {
                    seid: up,
                    ipv4: Some(UPF),
                    ipv6: None,
                    spare: 0,
                }),
                created_pdrs,
                load_control_information: None,
                overload_control_information: None,
                fq_csid: None,
                failed_rule_id: None,
                created_traffic_endpoints: vec![],
                partial_failure_information: vec![],
                other: vec![],
            },
        )
    }

    pub fn modification(seq: u32, cp_seid: u64) -> Vec<u8> {
        msg::emit(
            &HeaderRepr::session(0, cp_seid, seq),
            &msg::SessionModificationResponse {
                cause: CauseValue::REQUEST_ACCEPTED,
                offending_ie: None,
                created_pdrs: vec![],
                load_control_information: None,
                overload_control_information: None,
                usage_reports: vec![],
                failed_rule_id: None,
                additional_usage_reports_information: None,
                created_traffic_endpoints: vec![],
                partial_failure_information: vec![],
                other: vec![],
            },
        )
    }

    pub fn deletion(seq: u32, cp_seid: u64) -> Vec<u8> {
        msg::emit(
            &HeaderRepr::session(0, cp_seid, seq),
            &msg::SessionDeletionResponse {
                cause: CauseValue::REQUEST_ACCEPTED,
                offending_ie: None,
                load_control_information: None,
                overload_control_information: None,
                usage_reports: vec![],
                additional_usage_reports_information: None,
                session_reports: vec![],
                other: vec![],
            },
        )
    }
}

/// Captures written as OAI's SMF, a pre-Rel-16 SMF and a vendor IMS SMF send (their
/// octets from pfcp_samples::quirks) with what the UPFs they ran with answered, replayed
/// against upfd: every answer matches. Before upfd read them as docs/interop.md says,
/// OAI's sessions were refused (CH alone) or deleted by its heartbeats, the second
/// unspecified UE address was refused, the IMS session was refused (three QERs, then
/// Activate Predefined Rules). And the second round (issue 27): free5GC's `permit in`
/// filter and its FAR with FORW and no Forwarding Parameters, OAI's Update FAR with NOCP
/// alone and its PDR naming a URR it did not create, the IMS SMF's URR IDs with bit 8
/// set followed by an Update FAR: each refused before.
#[test]
fn replay_captures_of_real_smfs_quirks_against_upfd() {
    use pfcp_samples::quirks::{self, ims, legacy, oai};
    use recorded::UPF;
    let smf = Ipv4Addr::new(10, 0, 0, 4);
    let ue = Ipv4Addr::new(10, 45, 0, 9);
    let fteid = |teid| Some(pfcp::ie::FTeid::new(teid, Some(UPF), None));
    let t0 = 3_950_000_000u32;
    let mut oai_flow = vec![
        (
            oai::association_setup_request(1, smf, t0),
            recorded::association(1),
        ),
        (
            oai::session_establishment(2, smf, 0x51, ue),
            recorded::establishment(2, 0x51, 0x1001, &[(1, fteid(0x77), None)]),
        ),
        (
            oai::session_modification_downlink(3, 0x1001, ue, Ipv4Addr::new(10, 0, 0, 1), 0x99),
            recorded::modification(3, 0x51),
        ),
    ];
    // Ten heartbeats, each with the time it was sent.
    for k in 0..10 {
        oai_flow.push((
            oai::heartbeat_request(10 + k, t0 + 10 * (k + 1)),
            recorded::heartbeat(10 + k),
        ));
    }
    oai_flow.push((
        quirks::session_deletion(30, 0x1001),
        recorded::deletion(30, 0x51),
    ));
    // Two sessions asking 0.0.0.0, one asking ::; what the recorded UPF allocated.
    let mut legacy_flow = vec![(
        oai::association_setup_request(1, smf, t0),
        recorded::association(1),
    )];
    let asks: [(bool, IpAddr); 3] = [
        (false, IpAddr::V4(Ipv4Addr::new(10, 45, 0, 2))),
        (false, IpAddr::V4(Ipv4Addr::new(10, 45, 0, 3))),
        (true, "cafe::2".parse().unwrap()),
    ];
    for (k, (v6, got)) in asks.into_iter().enumerate() {
        let (seq, cp) = (2 + k as u32, 0x61 + k as u64);
        legacy_flow.push((
            legacy::session_establishment(seq, smf, cp, "internet", v6),
            recorded::establishment(
                seq,
                cp,
                0x2001 + k as u64,
                &[(1, fteid(0x81 + k as u32), None), (2, None, Some(got))],
            ),
        ));
    }
    let v6 = |s: &str| -> std::net::Ipv6Addr { s.parse().unwrap() };
    let ims_flow = vec![
        (
            oai::association_setup_request(1, smf, t0),
            recorded::association(1),
        ),
        (
            ims::session_establishment(
                2,
                v6("2001:db8:4::4"),
                0x71,
                v6("cafe::9"),
                v6("2001:db8:10::1"),
                0x1234,
                &["ims-policy"],
            ),
            recorded::establishment(
                2,
                0x71,
                0x3001,
                &[(
                    1,
                    Some(pfcp::ie::FTeid::new(0x91, None, Some(v6("2001:db8:7::7")))),
                    None,
                )],
            ),
        ),
        (
            ims::deactivate(3, 0x3001, 2, "ims-policy"),
            recorded::modification(3, 0x71),
        ),
        (
            quirks::session_deletion(4, 0x3001),
            recorded::deletion(4, 0x71),
        ),
    ];
    let gnb = Ipv4Addr::new(10, 0, 0, 1);
    let free5gc_flow = |bare: bool| {
        use pfcp_samples::quirks::free5gc;
        vec![
            (
                oai::association_setup_request(1, smf, t0),
                recorded::association(1),
            ),
            (
                free5gc::session_establishment(2, smf, 0x81, ue, gnb, 0x55, bare),
                recorded::establishment(2, 0x81, 0x4001, &[(1, fteid(0xa1), None)]),
            ),
            (
                quirks::session_deletion(3, 0x4001),
                recorded::deletion(3, 0x81),
            ),
        ]
    };
    let oai_round_two = vec![
        (
            oai::association_setup_request(1, smf, t0),
            recorded::association(1),
        ),
        (
            oai::session_establishment(2, smf, 0x51, ue),
            recorded::establishment(2, 0x51, 0x1001, &[(1, fteid(0x77), None)]),
        ),
        (
            oai::session_modification_downlink(3, 0x1001, ue, gnb, 0x99),
            recorded::modification(3, 0x51),
        ),
        (
            oai::update_far_nocp(4, 0x1001, 2),
            recorded::modification(4, 0x51),
        ),
        (
            oai::session_establishment_ulcl(5, smf, 0x52, Ipv4Addr::new(10, 45, 0, 10)),
            recorded::establishment(5, 0x52, 0x1002, &[(1, fteid(0x78), None)]),
        ),
        (
            quirks::session_deletion(6, 0x1001),
            recorded::deletion(6, 0x51),
        ),
        (
            quirks::session_deletion(7, 0x1002),
            recorded::deletion(7, 0x52),
        ),
    ];
    let ims_high_urrs = vec![
        (
            oai::association_setup_request(1, smf, t0),
            recorded::association(1),
        ),
        (
            ims::session_establishment_with_urrs(
                2,
                v6("2001:db8:4::4"),
                0x72,
                v6("cafe::9"),
                v6("2001:db8:10::1"),
                0x1234,
                &["ims-policy"],
                ims::HIGH_URRS,
            ),
            recorded::establishment(
                2,
                0x72,
                0x3002,
                &[(
                    1,
                    Some(pfcp::ie::FTeid::new(0x92, None, Some(v6("2001:db8:7::7")))),
                    None,
                )],
            ),
        ),
        (
            ims::update_far_tunnel(3, 0x3002, 2, v6("2001:db8:10::2"), 0x4321),
            recorded::modification(3, 0x72),
        ),
        (
            quirks::session_deletion(4, 0x3002),
            recorded::deletion(4, 0x72),
        ),
    ];
    let dir = common::TempDir::new("quirks-replay");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let addr = Ipv4Addr::new(127, 0, 0, 71);
    for (name, flow) in [
        ("oai", oai_flow),
        ("legacy", legacy_flow),
        ("ims", ims_flow),
        ("free5gc-sdf-in", free5gc_flow(false)),
        ("free5gc-forw-bare", free5gc_flow(true)),
        ("oai-nocp-and-dangling-urr", oai_round_two),
        ("ims-urr-ids-bit-8", ims_high_urrs),
    ] {
        let file = dir.0.join(format!("{name}.pcap"));
        write_capture(&file, &flow);
        let plan = Plan::from_file(&file).unwrap();
        let upfd = common::Upfd::builder()
            .address(IpAddr::V4(addr))
            .n3(addr)
            .n3_v6(v6("2001:db8:7::7"))
            .heartbeat_interval("60s")
            .ue_pool("internet", "10.45.0.0/16")
            .ue_pool("internet", "cafe::/64")
            .extra_yaml(
                "predefined_rules:\n  qers:\n    - { id: 1, mbr_ul_kbps: 2000, mbr_dl_kbps: 2000 }\n  urrs:\n    - { id: 1, measurement_method: [volume] }\n  rules:\n    - { name: ims-policy, qers: [1], urrs: [1] }\n",
            )
            .start();
        let mut cfg = ReplayConfig::new(upfd.n4);
        cfg.upf_n3 = vec![IpAddr::V4(addr)];
        // Patient with a busy machine: three tries of 5 s before a request counts as
        // timed out (upfd answers a retransmission from its cache).
        cfg.timeout = Duration::from_secs(5);
        cfg.retransmissions = 2;
        let report = rt.block_on(replay(&plan, &cfg, |_| {})).unwrap();
        let s = &report.summary;
        eprintln!("{name}: {s}");
        let problems: Vec<String> = report
            .outcomes
            .iter()
            .filter(|o| !matches!(o.verdict, upfbench::replay::Verdict::Matched))
            .map(|o| o.line())
            .collect();
        assert_eq!(
            (s.matched, s.requests),
            (flow.len(), flow.len()),
            "{name}:\n{}\nupfd log:\n{}",
            problems.join("\n"),
            upfd.log_tail(30)
        );
    }
}
