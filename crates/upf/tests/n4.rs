//! N4 behaviour, driven in-process (datagrams in, datagrams out, time passed in):
//! associations, duplicate requests, all-or-nothing modification, CHOOSE ID sharing, UE IP
//! allocation and release, peer loss and restart, non-associated peers, malformed messages.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use pfcp::ie::{
    apply_action, measurement_method, reporting_triggers, types, CauseValue, FSeid, FTeid,
    FailedRuleId, Flags, Interface, Name, NodeId, OuterHeaderCreation, UeIpAddress,
};
use pfcp::msg::{self, Msg};
use pfcp::HeaderRepr;
use upf::alloc::{TeidAllocator, UeIpPools};
use upf::fastpath::teid_index::TeidIndex;
use upf::model::Model;
use upf::n4::{Event, N4Config, N4};
use upf::procedures::{GtpuAddresses, Limits, Resources};
use upf::sessions::Sessions;

const SMF: &str = "127.0.0.4:8805";
const SMF2: &str = "127.0.0.5:8805";

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn node() -> N4 {
    node_with(TeidAllocator::new(1, 0xffff_ffff))
}

fn node_with(teids: TeidAllocator) -> N4 {
    node_where(teids, |_| {})
}

/// A node whose configuration `edit` changed.
fn node_where(teids: TeidAllocator, edit: impl FnOnce(&mut N4Config)) -> N4 {
    node_with_resources(teids, |_| {}, edit)
}

/// A node whose resources (predefined rules, applications ...) `res_edit` changed.
fn node_with_resources(
    teids: TeidAllocator,
    res_edit: impl FnOnce(&mut Resources),
    edit: impl FnOnce(&mut N4Config),
) -> N4 {
    let mut pools = UeIpPools::default();
    pools.add("internet", "10.45.0.0/24".parse().unwrap());
    let mut res = Resources::new(
        teids,
        pools,
        GtpuAddresses {
            access_v4: Some(Ipv4Addr::new(10, 10, 0, 7)),
            core_v4: Some(Ipv4Addr::new(10, 20, 0, 7)),
            ..Default::default()
        },
        Limits::default(),
    );
    res_edit(&mut res);
    let sessions = Sessions::new(
        res,
        Box::new(Model::new(1 << 20, Default::default())),
        100_000,
    );
    let mut cfg = N4Config {
        node_id: NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 7)),
        addr: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7)),
        recovery_time_stamp: 3_900_000_000,
        features: Flags::from_bits(&[pfcp::ie::up_function_features::FTUP], 2),
        allowed_peers: vec!["127.0.0.0/8".parse().unwrap()],
        smf_peers: Vec::new(),
        heartbeat_interval: Duration::from_secs(5),
        t1: Duration::from_secs(1),
        n1: 2,
        cache_ttl: Duration::from_secs(10),
        cache_max: 1000,
        graceful_release_period: Duration::from_secs(10),
        strict: false,
    };
    edit(&mut cfg);
    N4::new(cfg, sessions)
}

/// Send one request, expect exactly one response, parse it.
/// The header of a first snapshot of `n`'s state (configuration "t").
fn state_header(n: &N4) -> upf::state::Header {
    upf::state::Header {
        format: upf::state::FORMAT,
        generation: 1,
        recovery_time_stamp: n.config().recovery_time_stamp,
        config: "t".into(),
        teid_seed: 0,
        written_unix: 0,
    }
}

/// The SEIDs of `n`'s sessions, sorted.
fn seids_of(n: &N4) -> Vec<u64> {
    let mut v: Vec<u64> = n.sessions().iter().map(|s| s.up_seid).collect();
    v.sort();
    v
}

/// `restored` (from `live`'s state) holds the same sessions, each as it is in `live`,
/// with the same TEIDs and UE addresses in use, and its books are consistent.
fn assert_restored_as(restored: &N4, live: &N4) {
    assert_eq!(seids_of(restored), seids_of(live));
    for seid in seids_of(live) {
        assert_eq!(
            restored.sessions().get(seid),
            live.sessions().get(seid),
            "{seid:#x}"
        );
    }
    assert_eq!(
        restored.sessions().resources().teids.in_use(),
        live.sessions().resources().teids.in_use()
    );
    assert_eq!(
        restored.sessions().resources().ue_ips.in_use(),
        live.sessions().resources().ue_ips.in_use()
    );
    restored.sessions().check().unwrap();
}

fn ask(n: &mut N4, from: &str, data: Vec<u8>, now: Instant) -> Msg {
    let out = n.on_datagram(addr(from), &data, now);
    assert_eq!(out.len(), 1, "expected one response");
    assert_eq!(out[0].to, addr(from));
    Msg::parse(&out[0].data).unwrap().1
}

fn setup(n: &mut N4, from: &str, ts: u32, now: Instant) -> Msg {
    let ip = match addr(from).ip() {
        IpAddr::V4(a) => a,
        _ => unreachable!(),
    };
    let r = msg::AssociationSetupRequest {
        cp_function_features: Some(Flags(vec![0])),
        ..msg::AssociationSetupRequest::new(NodeId::Ipv4(ip), ts)
    };
    ask(
        n,
        from,
        msg::emit(&HeaderRepr::node(0, next_seq()), &r),
        now,
    )
}

/// A fresh sequence number: reusing one within the cache time is a retransmission.
fn next_seq() -> u32 {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1 << 20);
    SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

fn pdi(si: u8, fteid: Option<FTeid>, ue: Option<UeIpAddress>) -> msg::Pdi {
    msg::Pdi {
        source_interface: Interface(si),
        local_fteid: fteid,
        network_instance: Some(Name::plain("internet")),
        ue_ip_address: ue.into_iter().collect(),
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

fn pdr(id: u16, far: u32, pdi: msg::Pdi) -> msg::CreatePdr {
    msg::CreatePdr {
        pdr_id: id,
        precedence: Some(100),
        pdi,
        outer_header_removal: None,
        far_id: Some(far),
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

fn far(id: u32, dest: u8, ohc: Option<OuterHeaderCreation>) -> msg::CreateFar {
    msg::CreateFar {
        far_id: id,
        apply_action: Flags::from_bits(&[apply_action::FORW], 2),
        forwarding_parameters: Some(msg::ForwardingParameters {
            destination_interface: Interface(dest),
            network_instance: Some(Name::plain("internet")),
            redirect_information: None,
            outer_header_creation: ohc,
            transport_level_marking: None,
            forwarding_policy: None,
            header_enrichment: None,
            linked_traffic_endpoint_id: None,
            proxying: None,
            destination_interface_type: None,
            data_network_access_identifier: None,
            other: vec![],
        }),
        duplicating_parameters: vec![],
        bar_id: None,
        other: vec![],
    }
}

fn urr(id: u32) -> msg::CreateUrr {
    let b = msg::parse::<msg::SessionEstablishmentRequest>(
        &pfcp_samples::corpus()
            .iter()
            .find(|s| s.bytes[1] == 50)
            .unwrap()
            .bytes,
    )
    .unwrap()
    .1;
    let mut u = b.create_urrs[0].clone();
    u.urr_id = id;
    u.measurement_method = Flags::from_bits(&[measurement_method::VOLUM], 1);
    u.reporting_triggers = Flags::from_bits(&[reporting_triggers::VOLTH], 2);
    u.linked_urr_ids.clear();
    u.far_id_for_quota_action = None;
    u.aggregated_urrs.clear();
    u
}

/// A typical 5G session: uplink PDR with CHOOSE F-TEID, downlink PDR on a UE address the
/// UPF allocates (CHV4), a FAR each.
fn establishment(cp_seid: u64, choose_id: Option<u8>) -> msg::SessionEstablishmentRequest {
    msg::SessionEstablishmentRequest {
        node_id: NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4)),
        cp_fseid: FSeid {
            spare: 0,
            seid: cp_seid,
            ipv4: Some(Ipv4Addr::new(127, 0, 0, 4)),
            ipv6: None,
        },
        create_pdrs: vec![
            pdr(
                1,
                1,
                pdi(0, Some(FTeid::choose(true, false, choose_id)), None),
            ),
            pdr(
                2,
                2,
                pdi(
                    1,
                    None,
                    Some(UeIpAddress {
                        destination: true,
                        choose_v4: true,
                        ..Default::default()
                    }),
                ),
            ),
        ],
        create_fars: vec![
            far(1, 1, None),
            far(
                2,
                0,
                Some(OuterHeaderCreation::gtpu_ipv4(
                    0x100,
                    Ipv4Addr::new(10, 10, 0, 1),
                )),
            ),
        ],
        create_urrs: vec![],
        create_qers: vec![],
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

fn establish(
    n: &mut N4,
    from: &str,
    seq: u32,
    r: &msg::SessionEstablishmentRequest,
    now: Instant,
) -> msg::SessionEstablishmentResponse {
    match ask(n, from, msg::emit(&HeaderRepr::session(0, 0, seq), r), now) {
        Msg::SessionEstablishmentResponse(r) => r,
        m => panic!("unexpected {m:?}"),
    }
}

fn empty_modification() -> msg::SessionModificationRequest {
    msg::parse::<msg::SessionModificationRequest>(&msg::emit(
        &HeaderRepr::session(0, 1, 1),
        &msg::SessionModificationRequest {
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
            update_pdrs: vec![],
            update_fars: vec![],
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
        },
    ))
    .unwrap()
    .1
}

fn modify(
    n: &mut N4,
    from: &str,
    seid: u64,
    seq: u32,
    r: &msg::SessionModificationRequest,
    now: Instant,
) -> msg::SessionModificationResponse {
    match ask(
        n,
        from,
        msg::emit(&HeaderRepr::session(0, seid, seq), r),
        now,
    ) {
        Msg::SessionModificationResponse(r) => r,
        m => panic!("unexpected {m:?}"),
    }
}

fn delete(
    n: &mut N4,
    from: &str,
    seid: u64,
    seq: u32,
    now: Instant,
) -> msg::SessionDeletionResponse {
    let r = msg::SessionDeletionRequest { other: vec![] };
    match ask(
        n,
        from,
        msg::emit(&HeaderRepr::session(0, seid, seq), &r),
        now,
    ) {
        Msg::SessionDeletionResponse(r) => r,
        m => panic!("unexpected {m:?}"),
    }
}

#[test]
fn association_then_session_lifecycle() {
    let mut n = node();
    let now = Instant::now();
    match setup(&mut n, SMF, 1, now) {
        Msg::AssociationSetupResponse(r) => {
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED);
            assert_eq!(r.recovery_time_stamp, 3_900_000_000);
            assert!(r
                .up_function_features
                .unwrap()
                .get(pfcp::ie::up_function_features::FTUP));
        }
        m => panic!("{m:?}"),
    }
    assert!(n
        .take_events()
        .contains(&Event::AssociationUp(NodeId::Ipv4(Ipv4Addr::new(
            127, 0, 0, 4
        )))));
    let r = establish(&mut n, SMF, 2, &establishment(0x42, None), now);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    let up = r.up_fseid.unwrap();
    assert_eq!(up.ipv4, Some(Ipv4Addr::new(127, 0, 0, 7)));
    assert_eq!(r.created_pdrs.len(), 2);
    let f = r.created_pdrs[0].local_fteid.unwrap();
    assert_eq!(
        f.ipv4,
        Some(Ipv4Addr::new(10, 10, 0, 7)),
        "N3 address for an Access PDR"
    );
    assert_ne!(f.teid, Some(0));
    let ue = r.created_pdrs[1].ue_ip_address[0];
    assert_eq!(ue.ipv4, Some(Ipv4Addr::new(10, 45, 0, 1)));
    assert!(ue.destination);
    // The data path holds the keys.
    let s = n.sessions().get(up.seid).unwrap();
    assert_eq!(s.cp_fseid.seid, 0x42);
    // Deletion answers to the CP SEID and frees everything.
    let d = delete(&mut n, SMF, up.seid, 3, now);
    assert_eq!(d.cause, CauseValue::REQUEST_ACCEPTED);
    assert!(n.sessions().is_empty());
    assert_eq!(n.sessions().resources().teids.in_use(), 0);
    assert_eq!(n.sessions().resources().ue_ips.in_use(), 0);
    n.sessions().check().unwrap();
}

#[test]
fn response_headers_carry_the_cp_seid() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let out = n.on_datagram(
        addr(SMF),
        &msg::emit(&HeaderRepr::session(0, 0, 9), &establishment(0x1234, None)),
        now,
    );
    let (h, _) = Msg::parse(&out[0].data).unwrap();
    assert_eq!(h.seid, Some(0x1234));
    assert_eq!(h.sequence, 9);
}

#[test]
fn duplicate_request_is_answered_from_the_cache() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let req = msg::emit(&HeaderRepr::session(0, 0, 77), &establishment(0x42, None));
    let a = n.on_datagram(addr(SMF), &req, now);
    let b = n.on_datagram(addr(SMF), &req, now + Duration::from_secs(2));
    assert_eq!(
        a, b,
        "the retransmission gets the same response, byte for byte"
    );
    assert_eq!(n.sessions().len(), 1, "and is not executed twice");
    assert_eq!(n.stats().duplicates, 1);
    // The same sequence number from another peer is another request.
    setup(&mut n, SMF2, 1, now);
    let mut e = establishment(0x43, None);
    e.node_id = NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 5));
    n.on_datagram(
        addr(SMF2),
        &msg::emit(&HeaderRepr::session(0, 0, 77), &e),
        now,
    );
    assert_eq!(n.sessions().len(), 2);
    // After the cache time the sequence number may be reused.
    let c = n.on_datagram(addr(SMF), &req, now + Duration::from_secs(60));
    assert_ne!(a, c);
    assert_eq!(n.sessions().len(), 3);
}

#[test]
fn failing_modification_changes_nothing() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let r = establish(&mut n, SMF, 2, &establishment(0x42, None), now);
    let seid = r.up_fseid.unwrap().seid;
    let before = n.sessions().get(seid).unwrap().clone();
    let teids = n.sessions().resources().teids.in_use();
    let ues = n.sessions().resources().ue_ips.in_use();
    // Valid parts (a new uplink PDR with CHOOSE, a new FAR, an update of FAR 2) followed by
    // a PDR that points at a FAR that does not exist.
    let mut m = empty_modification();
    m.create_fars.push(far(3, 1, None));
    m.create_pdrs.push(pdr(
        3,
        3,
        pdi(0, Some(FTeid::choose(true, false, None)), None),
    ));
    m.create_pdrs.push(pdr(
        4,
        99,
        pdi(0, Some(FTeid::choose(true, false, None)), None),
    ));
    m.update_fars.push(msg::UpdateFar {
        far_id: 2,
        apply_action: Some(Flags::from_bits(&[apply_action::DROP], 2)),
        update_forwarding_parameters: None,
        update_duplicating_parameters: vec![],
        bar_id: None,
        other: vec![],
    });
    let rsp = modify(&mut n, SMF, seid, 3, &m, now);
    assert_eq!(rsp.cause, CauseValue::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(
        rsp.failed_rule_id,
        Some(FailedRuleId {
            rule_type: FailedRuleId::PDR,
            id: 4
        })
    );
    assert!(rsp.created_pdrs.is_empty());
    assert_eq!(
        n.sessions().get(seid).unwrap(),
        &before,
        "the session is exactly as it was"
    );
    assert_eq!(
        n.sessions().resources().teids.in_use(),
        teids,
        "TEIDs allocated on the way were returned"
    );
    assert_eq!(n.sessions().resources().ue_ips.in_use(), ues);
    // The same change without the bad PDR is accepted.
    m.create_pdrs.pop();
    let rsp = modify(&mut n, SMF, seid, 4, &m, now);
    assert_eq!(rsp.cause, CauseValue::REQUEST_ACCEPTED, "{rsp:?}");
    assert_eq!(rsp.created_pdrs.len(), 1);
    assert!(
        n.sessions()
            .get(seid)
            .unwrap()
            .fars
            .get(&2)
            .unwrap()
            .action
            .drop
    );
    n.sessions().check().unwrap();
}

#[test]
fn removing_a_far_still_in_use_is_refused() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let seid = establish(&mut n, SMF, 2, &establishment(0x42, None), now)
        .up_fseid
        .unwrap()
        .seid;
    let mut m = empty_modification();
    m.remove_fars.push(msg::RemoveFar {
        far_id: 1,
        other: vec![],
    });
    let rsp = modify(&mut n, SMF, seid, 3, &m, now);
    assert_eq!(rsp.cause, CauseValue::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(rsp.failed_rule_id.unwrap().rule_type, FailedRuleId::PDR);
    assert!(n.sessions().get(seid).unwrap().fars.contains_key(&1));
}

#[test]
fn choose_id_shares_one_fteid() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let mut e = establishment(0x42, Some(7));
    // A second uplink PDR (another QoS flow) with the same CHOOSE ID, and a third without.
    let mut p3 = pdr(
        3,
        1,
        pdi(0, Some(FTeid::choose(true, false, Some(7))), None),
    );
    p3.pdi.qfis = vec![2];
    e.create_pdrs.push(p3);
    e.create_pdrs.push(pdr(
        4,
        1,
        pdi(0, Some(FTeid::choose(true, false, None)), None),
    ));
    let r = establish(&mut n, SMF, 2, &e, now);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    let teid = |id: u16| {
        r.created_pdrs
            .iter()
            .find(|c| c.pdr_id == id)
            .unwrap()
            .local_fteid
            .unwrap()
            .teid
            .unwrap()
    };
    assert_eq!(teid(1), teid(3), "same CHOOSE ID, same F-TEID");
    assert_ne!(teid(1), teid(4), "no CHOOSE ID, its own F-TEID");
    assert_eq!(n.sessions().resources().teids.in_use(), 2);
    // Another session's CHOOSE ID 7 is its own.
    let r2 = establish(&mut n, SMF, 3, &establishment(0x43, Some(7)), now);
    assert_ne!(
        r2.created_pdrs[0].local_fteid.unwrap().teid.unwrap(),
        teid(1)
    );
    n.sessions().check().unwrap();
}

#[test]
fn ue_ip_allocation_and_release() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let mut seids = Vec::new();
    let mut ips = std::collections::HashSet::new();
    for i in 0..10 {
        let r = establish(
            &mut n,
            SMF,
            10 + i,
            &establishment(0x100 + i as u64, None),
            now,
        );
        let ue = r.created_pdrs[1].ue_ip_address[0].ipv4.unwrap();
        assert!(ips.insert(ue), "each session gets its own address");
        seids.push(r.up_fseid.unwrap().seid);
    }
    assert_eq!(n.sessions().resources().ue_ips.in_use(), 10);
    for (i, s) in seids.iter().enumerate() {
        delete(&mut n, SMF, *s, 100 + i as u32, now);
    }
    assert_eq!(n.sessions().resources().ue_ips.in_use(), 0);
    // Released addresses are handed out again.
    let r = establish(&mut n, SMF, 200, &establishment(0x999, None), now);
    assert!(ips.contains(&r.created_pdrs[1].ue_ip_address[0].ipv4.unwrap()));
    n.sessions().check().unwrap();
}

#[test]
fn a_chosen_teid_shares_the_direct_slot_of_the_ue_address() {
    // As upfd runs with the XDP data path: TEIDs encode direct slots.
    let index = TeidIndex::seeded(1, 0xffff_ffff, 1000, 11);
    let mut n = node_with(TeidAllocator::with_index(1, 0xffff_ffff, index));
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let mut seq = 10;
    let mut session = |n: &mut N4, i: u32| {
        // The SMF names the address in the downlink PDR only, after the uplink PDR
        // that CHOOSEs the TEID (as Open5GS and upfbench smf do).
        let ue = Ipv4Addr::new(10, 46, (i >> 8) as u8, i as u8);
        let mut r = establishment(0x500 + u64::from(i), None);
        r.create_pdrs[1].pdi.ue_ip_address[0] = UeIpAddress {
            destination: true,
            ipv4: Some(ue),
            ..Default::default()
        };
        seq += 1;
        let resp = establish(n, SMF, seq, &r, now);
        let teid = resp.created_pdrs[0]
            .local_fteid
            .as_ref()
            .unwrap()
            .teid
            .unwrap();
        assert_eq!(index.slot(teid), Some(u32::from(ue) % 1000), "session {i}");
        (resp.up_fseid.unwrap().seid, teid)
    };
    let first: Vec<(u64, u32)> = (0..20).map(|i| session(&mut n, i)).collect();
    // Each ended, the same address again: the same slot, another TEID, so that a gNB
    // still sending on the old tunnel does not reach the new session.
    for (i, (seid, teid)) in first.into_iter().enumerate() {
        let d = delete(&mut n, SMF, seid, 100 + i as u32, now);
        assert_eq!(d.cause, CauseValue::REQUEST_ACCEPTED);
        let (_, again) = session(&mut n, i as u32);
        assert_ne!(again, teid, "session {i} got its predecessor's TEID");
    }
}

#[test]
fn pool_exhaustion_is_all_dynamic_addresses_occupied() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    // A /24 has 254 host addresses.
    for i in 0..254 {
        let r = establish(&mut n, SMF, 10 + i, &establishment(i as u64 + 1, None), now);
        assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "session {i}");
    }
    let teids = n.sessions().resources().teids.in_use();
    let r = establish(&mut n, SMF, 1000, &establishment(0xfff, None), now);
    assert_eq!(r.cause, CauseValue::ALL_DYNAMIC_ADDRESSES_OCCUPIED);
    assert_eq!(
        n.sessions().resources().teids.in_use(),
        teids,
        "the CHOOSE TEID of the refused session was returned"
    );
}

#[test]
fn request_from_a_peer_without_association() {
    let mut n = node();
    let now = Instant::now();
    let r = establish(&mut n, SMF, 2, &establishment(0x42, None), now);
    assert_eq!(r.cause, CauseValue::NO_ESTABLISHED_PFCP_ASSOCIATION);
    assert!(r.up_fseid.is_none());
    assert!(n.sessions().is_empty());
    // Another peer's session cannot be touched by a peer that is associated but not its owner.
    setup(&mut n, SMF, 1, now);
    setup(&mut n, SMF2, 1, now);
    let seid = establish(&mut n, SMF, 3, &establishment(0x42, None), now)
        .up_fseid
        .unwrap()
        .seid;
    let d = delete(&mut n, SMF2, seid, 4, now);
    assert_eq!(d.cause, CauseValue::SESSION_CONTEXT_NOT_FOUND);
    assert_eq!(n.sessions().len(), 1);
    // Unknown SEID.
    let d = delete(&mut n, SMF, 0xdead, 5, now);
    assert_eq!(d.cause, CauseValue::SESSION_CONTEXT_NOT_FOUND);
}

#[test]
fn association_from_a_peer_not_allowed() {
    let mut n = node_where(TeidAllocator::new(1, 0xffff_ffff), |c| {
        c.allowed_peers = vec!["192.0.2.0/24".parse().unwrap()]
    });
    match setup(&mut n, SMF, 1, Instant::now()) {
        Msg::AssociationSetupResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_REJECTED),
        m => panic!("{m:?}"),
    }
    assert!(n.associations().is_empty());
}

fn heartbeat_response(seq: u32, ts: u32) -> Vec<u8> {
    msg::emit(
        &HeaderRepr::node(0, seq),
        &msg::HeartbeatResponse {
            recovery_time_stamp: ts,
            other: vec![],
        },
    )
}

#[test]
fn heartbeats_and_peer_loss() {
    let mut n = node();
    let t0 = Instant::now();
    setup(&mut n, SMF, 1, t0);
    establish(&mut n, SMF, 2, &establishment(0x42, None), t0);
    n.take_events();
    // A heartbeat goes out after the interval; answered, the association lives on.
    let t = t0 + Duration::from_secs(5);
    let out = n.on_timer(t);
    assert_eq!(out.len(), 1);
    let (h, m) = Msg::parse(&out[0].data).unwrap();
    assert!(matches!(m, Msg::HeartbeatRequest(ref r) if r.recovery_time_stamp == 3_900_000_000));
    assert!(n
        .on_datagram(addr(SMF), &heartbeat_response(h.sequence, 1), t)
        .is_empty());
    assert_eq!(n.sessions().len(), 1);
    // The next one is not answered: T1 retransmissions, then the peer is declared lost.
    let mut t = t + Duration::from_secs(5);
    let first = n.on_timer(t);
    assert_eq!(first.len(), 1);
    for _ in 0..2 {
        t += Duration::from_secs(1);
        let again = n.on_timer(t);
        assert_eq!(again, first, "retransmitted unchanged");
    }
    t += Duration::from_secs(1);
    n.on_timer(t);
    assert!(n.associations().is_empty());
    assert!(n.sessions().is_empty(), "the lost peer's sessions are gone");
    assert!(matches!(
        n.take_events()[0],
        Event::AssociationDown { sessions: 1, .. }
    ));
}

/// Strict (TS 23.527): a new Recovery Time Stamp in a heartbeat is a restart. Not strict,
/// see tests/interop.rs.
#[test]
fn strict_peer_restart_clears_its_sessions_only() {
    let mut n = node_where(TeidAllocator::new(1, 0xffff_ffff), |c| c.strict = true);
    let t0 = Instant::now();
    setup(&mut n, SMF, 1, t0);
    setup(&mut n, SMF2, 1, t0);
    establish(&mut n, SMF, 2, &establishment(0x42, None), t0);
    let mut e = establishment(0x43, None);
    e.node_id = NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 5));
    establish(&mut n, SMF2, 2, &e, t0);
    assert_eq!(n.sessions().len(), 2);
    // SMF's heartbeat request carries a new Recovery Time Stamp: it restarted.
    let hb = msg::emit(
        &HeaderRepr::node(0, 50),
        &msg::HeartbeatRequest {
            recovery_time_stamp: 2,
            source_ip_address: None,
            other: vec![],
        },
    );
    match ask(&mut n, SMF, hb, t0) {
        Msg::HeartbeatResponse(r) => assert_eq!(r.recovery_time_stamp, 3_900_000_000),
        m => panic!("{m:?}"),
    }
    assert_eq!(n.sessions().len(), 1);
    assert!(n
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::PeerRestarted { sessions: 1, .. })));
    // The same through a heartbeat response to our own request.
    let out = n.on_timer(t0 + Duration::from_secs(5));
    let to_smf2 = out.iter().find(|o| o.to == addr(SMF2)).unwrap();
    let seq = Msg::parse(&to_smf2.data).unwrap().0.sequence;
    n.on_datagram(
        addr(SMF2),
        &heartbeat_response(seq, 99),
        t0 + Duration::from_secs(5),
    );
    assert!(n.sessions().is_empty());
}

#[test]
fn association_release_and_re_setup() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    establish(&mut n, SMF, 2, &establishment(0x42, None), now);
    // A new Association Setup from the same node replaces the association and, without
    // PFCP Session Retention Information, deletes its sessions (clause 6.2.6.2.2).
    setup(&mut n, SMF, 1, now);
    assert!(n.sessions().is_empty());
    establish(&mut n, SMF, 3, &establishment(0x42, None), now);
    let rel = msg::AssociationReleaseRequest {
        node_id: NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4)),
        other: vec![],
    };
    match ask(&mut n, SMF, msg::emit(&HeaderRepr::node(0, 4), &rel), now) {
        Msg::AssociationReleaseResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED),
        m => panic!("{m:?}"),
    }
    assert!(n.sessions().is_empty());
    assert!(n.associations().is_empty());
}

#[test]
fn graceful_release_asks_then_ends() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    establish(&mut n, SMF, 2, &establishment(0x42, None), now);
    let out = n.release_all(now);
    assert_eq!(out.len(), 1);
    match Msg::parse(&out[0].data).unwrap().1 {
        Msg::AssociationUpdateRequest(r) => {
            assert!(r.pfcp_association_release_request.unwrap().get(1), "SARR");
            assert_eq!(r.graceful_release_period.unwrap().seconds(), Some(10));
        }
        m => panic!("{m:?}"),
    }
    assert!(!n.all_released());
    n.on_timer(now + Duration::from_secs(11));
    assert!(n.all_released());
    assert!(n.sessions().is_empty());
}

#[test]
fn upf_initiated_association() {
    let mut n = node_where(TeidAllocator::new(1, 0xffff_ffff), |c| {
        c.smf_peers = vec![addr(SMF)]
    });
    let now = Instant::now();
    let out = n.start(now);
    assert_eq!(out.len(), 1);
    let (h, m) = Msg::parse(&out[0].data).unwrap();
    assert!(matches!(m, Msg::AssociationSetupRequest(_)));
    let rsp = msg::AssociationSetupResponse {
        node_id: NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4)),
        cause: CauseValue::REQUEST_ACCEPTED,
        recovery_time_stamp: 5,
        up_function_features: None,
        cp_function_features: None,
        user_plane_ip_resource_information: vec![],
        alternative_smf_ip_addresses: vec![],
        smf_set_id: None,
        pfcpas_rsp_flags: None,
        ue_ip_address_pool_information: vec![],
        gtpu_path_qos_control_information: vec![],
        other: vec![],
    };
    n.on_datagram(
        addr(SMF),
        &msg::emit(&HeaderRepr::node(0, h.sequence), &rsp),
        now,
    );
    assert_eq!(n.associations().len(), 1);
    assert_eq!(
        establish(&mut n, SMF, 2, &establishment(1, None), now).cause,
        CauseValue::REQUEST_ACCEPTED
    );
}

/// Each malformed message of the codec's negative list gets its Cause and Offending IE,
/// and the node keeps serving another peer in between.
#[test]
fn malformed_requests_get_cause_and_offending_ie() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    setup(&mut n, SMF2, 1, now);
    let good = establishment(0x42, None);
    let enc =
        |r: &msg::SessionEstablishmentRequest| msg::emit(&HeaderRepr::session(0, 0, next_seq()), r);
    let mut cases: Vec<(&str, Vec<u8>, CauseValue, Option<u16>)> = Vec::new();
    // Outer Header Creation cut short: find it in the encoding and shorten its length.
    let b = mutate(&enc(&good), types::OUTER_HEADER_CREATION, |p, i| {
        raw(p, i, |v| v.truncate(v.len() - 2))
    });
    cases.push((
        "OHC with a wrong length",
        b,
        CauseValue::INVALID_LENGTH,
        Some(types::OUTER_HEADER_CREATION),
    ));
    // MBR of 9 octets.
    let mut e = good.clone();
    e.create_qers.push(msg::CreateQer {
        qer_id: 1,
        qer_correlation_id: None,
        gate_status: 0,
        mbr: Some(pfcp::ie::Bitrate {
            ul_kbps: 1000,
            dl_kbps: 1000,
        }),
        gbr: None,
        packet_rate: None,
        dl_flow_level_marking: None,
        qfi: Some(1),
        rqi: None,
        paging_policy_indicator: None,
        averaging_window: None,
        qer_control_indications: None,
        other: vec![],
    });
    let b = mutate(&enc(&e), types::MBR, |p, i| raw(p, i, |v| v.truncate(9)));
    cases.push((
        "MBR with a wrong length",
        b,
        CauseValue::INVALID_LENGTH,
        Some(types::MBR),
    ));
    // PDI without Source Interface.
    let b = mutate(&enc(&good), types::SOURCE_INTERFACE, |p, i| {
        p.remove(i);
    });
    cases.push((
        "PDI without Source Interface",
        b,
        CauseValue::MANDATORY_IE_MISSING,
        Some(types::SOURCE_INTERFACE),
    ));
    // Without F-SEID, without Node ID.
    let b = mutate(&enc(&good), types::FSEID, |p, i| {
        p.remove(i);
    });
    cases.push((
        "no F-SEID",
        b,
        CauseValue::MANDATORY_IE_MISSING,
        Some(types::FSEID),
    ));
    let b = mutate(&enc(&good), types::NODE_ID, |p, i| {
        p.remove(i);
    });
    cases.push((
        "no Node ID",
        b,
        CauseValue::MANDATORY_IE_MISSING,
        Some(types::NODE_ID),
    ));
    // An empty request.
    let b = vec![0x21, 50, 0, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 6, 0];
    cases.push((
        "empty",
        b,
        CauseValue::MANDATORY_IE_MISSING,
        Some(types::NODE_ID),
    ));
    // A grouped IE whose child overruns it: the PDI's last child claims one octet more.
    let b = mutate(&enc(&good), types::PDI, |p, i| {
        raw(p, i, |v| {
            let n = v.len();
            // The last child is Network Instance "internet" (4 + 8 octets): bump the low
            // octet of its length.
            v[n - 9] += 1;
        })
    });
    cases.push((
        "child overruns its group",
        b,
        CauseValue::INVALID_LENGTH,
        Some(types::NETWORK_INSTANCE),
    ));
    // A message whose length field disagrees with the datagram.
    let mut b = enc(&good);
    b.push(0);
    cases.push(("message length", b, CauseValue::INVALID_LENGTH, None));

    for (i, (what, bytes, cause, offending)) in cases.into_iter().enumerate() {
        let out = n.on_datagram(addr(SMF), &bytes, now);
        assert_eq!(out.len(), 1, "{what}: one response");
        match Msg::parse(&out[0].data).unwrap().1 {
            Msg::SessionEstablishmentResponse(r) => {
                assert_eq!(r.cause, cause, "{what}");
                assert_eq!(r.offending_ie, offending, "{what}");
                assert!(r.up_fseid.is_none(), "{what}");
            }
            m => panic!("{what}: {m:?}"),
        }
        // The other peer is served in between.
        let mut e = establishment(0x500 + i as u64, None);
        e.node_id = NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 5));
        let r = establish(&mut n, SMF2, 1000 + i as u32, &e, now);
        assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{what}: other peer");
    }
    // A heartbeat without Recovery Time Stamp has no Cause to carry: discarded.
    let hb = vec![0x20, 1, 0, 4, 0, 0, 9, 0];
    assert!(n.on_datagram(addr(SMF), &hb, now).is_empty());
    // A zero-length Recovery Time Stamp in an Association Setup Request.
    let mut b = vec![0x20, 5, 0, 17, 0, 0, 10, 0];
    b.extend_from_slice(&[0, 60, 0, 5, 0, 127, 0, 0, 4, 0, 96, 0, 0]);
    match ask(&mut n, SMF, b, now) {
        Msg::AssociationSetupResponse(r) => assert_eq!(r.cause, CauseValue::INVALID_LENGTH),
        m => panic!("{m:?}"),
    }
    // Not PFCP version 1: Version Not Supported.
    let mut v2 = msg::emit(
        &HeaderRepr::node(0, 11),
        &msg::HeartbeatRequest {
            recovery_time_stamp: 1,
            source_ip_address: None,
            other: vec![],
        },
    );
    v2[0] = 0x40;
    assert!(matches!(
        ask(&mut n, SMF, v2, now),
        Msg::VersionNotSupportedResponse(_)
    ));
    assert_eq!(
        n.sessions().len(),
        8,
        "only the other peer's sessions exist"
    );
}

#[test]
fn unsupported_features_are_refused_cleanly() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let mut e = establishment(0x42, None);
    e.create_pdrs[0].pdi.application_id = Some(pfcp::ie::Text::new("youtube"));
    let r = establish(&mut n, SMF, 2, &e, now);
    assert_eq!(r.cause, CauseValue::UNKNOWN_APPLICATION_ID);
    assert_eq!(r.offending_ie, Some(types::APPLICATION_ID));
    let mut e = establishment(0x42, None);
    e.create_fars[0].apply_action = Flags::from_bits(&[apply_action::FORW, apply_action::DUPL], 2);
    let r = establish(&mut n, SMF, 3, &e, now);
    assert_eq!(r.cause, CauseValue::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(
        r.failed_rule_id,
        Some(FailedRuleId {
            rule_type: FailedRuleId::FAR,
            id: 1
        })
    );
    // FORW without Forwarding Parameters is accepted as free5GC's UPF takes it, and
    // refused with Cause 67 under n4.strict: crates/upf/tests/interop.rs tests both.
    assert!(n.sessions().is_empty());
    assert_eq!(n.sessions().resources().teids.in_use(), 0);
}

/// A tunnel needs one of our addresses of the peer's IP version (TS 29.244 clause
/// 8.2.56): this node has IPv4 only, so an IPv6-only gNB is refused with the FAR named,
/// a dual-stack one accepted (its IPv4 address used).
#[test]
fn outer_header_creation_needs_our_address_of_its_ip_version() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let gnb6: std::net::Ipv6Addr = "2001:db8:3::1".parse().unwrap();
    let mut e = establishment(0x42, None);
    e.create_fars[1] = far(2, 0, Some(OuterHeaderCreation::gtpu_ipv6(0x100, gnb6)));
    let r = establish(&mut n, SMF, 2, &e, now);
    assert_eq!(r.cause, CauseValue::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(
        r.failed_rule_id,
        Some(FailedRuleId {
            rule_type: FailedRuleId::FAR,
            id: 2
        })
    );
    assert!(n.sessions().is_empty());
    assert_eq!(n.sessions().resources().teids.in_use(), 0);

    let mut dual = OuterHeaderCreation::gtpu_ipv4(0x100, Ipv4Addr::new(10, 10, 0, 1));
    dual.description |= OuterHeaderCreation::GTPU_UDP_IPV6;
    dual.ipv6 = Some(gnb6);
    let mut e = establishment(0x42, None);
    e.create_fars[1] = far(2, 0, Some(dual));
    let r = establish(&mut n, SMF, 3, &e, now);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
}

#[test]
fn query_urr_and_usage_on_deletion() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let mut e = establishment(0x42, None);
    e.create_urrs.push(urr(1));
    e.create_pdrs[0].urr_ids = vec![1];
    let seid = establish(&mut n, SMF, 2, &e, now).up_fseid.unwrap().seid;
    let mut m = empty_modification();
    m.query_urrs.push(msg::QueryUrr {
        urr_id: 1,
        other: vec![],
    });
    let r = modify(&mut n, SMF, seid, 3, &m, now);
    assert_eq!(r.usage_reports.len(), 1);
    assert!(r.usage_reports[0]
        .usage_report_trigger
        .get(pfcp::ie::usage_report_trigger::IMMER));
    let d = delete(&mut n, SMF, seid, 4, now);
    assert_eq!(d.usage_reports.len(), 1);
    let u = &d.usage_reports[0];
    assert!(u
        .usage_report_trigger
        .get(pfcp::ie::usage_report_trigger::TERMR));
    assert_eq!(u.ur_seqn, 1, "UR-SEQN counts reports of the URR");
    assert!(u.volume_measurement.is_some());
}

/// Re-encode `b` after `f` changed the first IE of type `t` (at any depth) in place in
/// the generic tree: a way to write malformed IEs the typed encoder never would.
fn mutate(b: &[u8], t: u16, f: impl FnOnce(&mut Vec<pfcp::Ie>, usize)) -> Vec<u8> {
    fn find(ies: &mut Vec<pfcp::Ie>, t: u16) -> Option<(&mut Vec<pfcp::Ie>, usize)> {
        if let Some(i) = ies.iter().position(|x| x.ie_type() == t) {
            return Some((ies, i));
        }
        for ie in ies.iter_mut() {
            if let Some(children) = children_mut(ie) {
                if let Some(x) = find(children, t) {
                    return Some(x);
                }
            }
        }
        None
    }
    let mut m = pfcp::Message::parse(b).unwrap();
    let (parent, i) = find(&mut m.ies, t).expect("IE to mutate");
    f(parent, i);
    m.emit()
}

fn children_mut(ie: &mut pfcp::Ie) -> Option<&mut Vec<pfcp::Ie>> {
    use pfcp::Ie::*;
    match ie {
        CreatePdr(c) | Pdi(c) | CreateFar(c) | ForwardingParameters(c) | CreateQer(c) => Some(c),
        _ => None,
    }
}

/// The IE at `parent[i]` as raw octets, with `f` applied to its value.
fn raw(parent: &mut [pfcp::Ie], i: usize, f: impl FnOnce(&mut Vec<u8>)) {
    let t = parent[i].ie_type();
    let mut enc = Vec::new();
    parent[i].encode(&mut enc);
    let mut value = enc[4..].to_vec();
    f(&mut value);
    parent[i] = pfcp::Ie::Unknown(pfcp::ie::UnknownIe {
        ie_type: t,
        enterprise_id: None,
        value,
    });
}

#[test]
fn release_with_an_unknown_node_id_releases_the_senders_association() {
    // pfcpsim sends Node ID 0.0.0.0 in its Association Release Request.
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    establish(&mut n, SMF, 2, &establishment(0x42, None), now);
    let rel = msg::AssociationReleaseRequest {
        node_id: NodeId::Ipv4(Ipv4Addr::UNSPECIFIED),
        other: vec![],
    };
    match ask(
        &mut n,
        SMF,
        msg::emit(&HeaderRepr::node(0, next_seq()), &rel),
        now,
    ) {
        Msg::AssociationReleaseResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED),
        m => panic!("{m:?}"),
    }
    assert!(n.associations().is_empty());
    assert!(n.sessions().is_empty());
    // From a peer with no association it is still refused.
    match ask(
        &mut n,
        SMF2,
        msg::emit(&HeaderRepr::node(0, next_seq()), &rel),
        now,
    ) {
        Msg::AssociationReleaseResponse(r) => {
            assert_eq!(r.cause, CauseValue::NO_ESTABLISHED_PFCP_ASSOCIATION)
        }
        m => panic!("{m:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Security requirements (docs/security.md): TS 33.513 / TS 33.117, named after the test
// case each checks.
// ---------------------------------------------------------------------------------------

/// TS 33.513 clause 4.2.2.6, TC_TEID_ID_UNIQUENESS_UPF: the F-TEIDs of many concurrent
/// sessions are all different, and, as TS 33.501 clause 9.3's "not predictable" asks of a
/// tunnel identifier, neither follow from one another nor repeat across UPF instances,
/// even when the SMF hands out UE addresses in order (upfd's TEIDs follow the UE
/// address's direct slot through a keyed bijection).
#[test]
fn scas_teid_id_uniqueness_upf_fteids_unique_and_unpredictable() {
    const SESSIONS: u32 = 4000;
    let run = || {
        let index = TeidIndex::new(1, 0xffff_ffff, 4096);
        let mut n = node_with(TeidAllocator::with_index(1, 0xffff_ffff, index));
        let now = Instant::now();
        setup(&mut n, SMF, 1, now);
        (0..SESSIONS)
            .map(|i| {
                let mut r = establishment(0x9000 + u64::from(i), None);
                r.create_pdrs[1].pdi.ue_ip_address[0] = UeIpAddress {
                    destination: true,
                    ipv4: Some(Ipv4Addr::from(0x0a2e_0000 + i)),
                    ..Default::default()
                };
                let resp = establish(&mut n, SMF, next_seq(), &r, now);
                assert_eq!(resp.cause, CauseValue::REQUEST_ACCEPTED, "session {i}");
                resp.created_pdrs[0]
                    .local_fteid
                    .as_ref()
                    .unwrap()
                    .teid
                    .unwrap()
            })
            .collect::<Vec<u32>>()
    };
    let a = run();
    let distinct: std::collections::HashSet<u32> = a.iter().copied().collect();
    assert_eq!(distinct.len(), a.len(), "a TEID handed out twice");
    assert!(
        !distinct.contains(&0),
        "TEID 0 is Echo's and Error Indication's"
    );
    // No stride: the difference between neighbours is (almost) never the previous one.
    let strides = a
        .windows(3)
        .filter(|w| w[1].wrapping_sub(w[0]) == w[2].wrapping_sub(w[1]))
        .count();
    assert!(strides < a.len() / 100, "{strides} equal strides");
    // Every bit the range's index uses is as often 1 as 0 (45-55 %: 6 standard
    // deviations for 4000 draws).
    let bits = TeidIndex::new(1, 0xffff_ffff, 4096).params().bits;
    assert!(bits >= 31, "TEIDs of {bits} bits");
    for bit in 0..bits {
        let ones = a.iter().filter(|t| *t >> bit & 1 == 1).count() as u32;
        assert!(
            (SESSIONS * 45 / 100..=SESSIONS * 55 / 100).contains(&ones),
            "bit {bit} is 1 in {ones} of {SESSIONS} TEIDs"
        );
    }
    // Another instance (another key), the same SMF, the same UE addresses: other TEIDs.
    let b: std::collections::HashSet<u32> = run().into_iter().collect();
    let shared = distinct.intersection(&b).count();
    assert!(shared < 10, "{shared} TEIDs repeat across instances");
}

/// TS 33.117 clause 4.2.2.2 (authorization) as TS 33.513 clause 4.2.2.0 applies it to N4:
/// a PFCP session is modified or deleted only by the CP function that owns it, never by
/// another associated peer, whether by Session Modification, Session Deletion, Session
/// Set Deletion or by taking over its association (an Association Setup Request with its
/// Node ID, with or without Session Retention Information); and nothing changes.
#[test]
fn scas_session_changed_only_by_the_smf_that_owns_it() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    setup(&mut n, SMF2, 1, now);
    let seid = establish(&mut n, SMF, next_seq(), &establishment(0x42, None), now)
        .up_fseid
        .unwrap()
        .seid;
    let before = format!("{:?}", n.sessions().get(seid).unwrap());

    // Modification: the FAR to the data network made to drop.
    let mut m = empty_modification();
    m.update_fars = vec![msg::UpdateFar {
        far_id: 1,
        apply_action: Some(Flags::from_bits(&[apply_action::DROP], 2)),
        update_forwarding_parameters: None,
        update_duplicating_parameters: vec![],
        bar_id: None,
        other: vec![],
    }];
    let r = modify(&mut n, SMF2, seid, next_seq(), &m, now);
    assert_eq!(r.cause, CauseValue::SESSION_CONTEXT_NOT_FOUND);
    // Deletion.
    let d = delete(&mut n, SMF2, seid, next_seq(), now);
    assert_eq!(d.cause, CauseValue::SESSION_CONTEXT_NOT_FOUND);
    // Session Set Deletion naming the owner's node in its FQ-CSID.
    let set = msg::SessionSetDeletionRequest {
        node_id: NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4)),
        fq_csids: vec![],
        other: vec![],
    };
    let out = n.on_datagram(
        addr(SMF2),
        &msg::emit(&HeaderRepr::node(0, next_seq()), &set),
        now,
    );
    assert_eq!(out.len(), 1);
    // Taking over the owner's association, with and without Session Retention
    // Information.
    for retain in [false, true] {
        let mut r = msg::AssociationSetupRequest {
            cp_function_features: Some(Flags(vec![0])),
            ..msg::AssociationSetupRequest::new(NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4)), 2)
        };
        if retain {
            r.pfcp_session_retention_information = Some(msg::PfcpSessionRetentionInformation {
                cp_pfcp_entity_ip_addresses: vec![],
                other: vec![],
            });
        }
        match ask(
            &mut n,
            SMF2,
            msg::emit(&HeaderRepr::node(0, next_seq()), &r),
            now,
        ) {
            Msg::AssociationSetupResponse(r) => {
                assert_eq!(r.cause, CauseValue::REQUEST_REJECTED, "retain {retain}")
            }
            m => panic!("{m:?}"),
        }
    }
    // Releasing the owner's association.
    let release = msg::AssociationReleaseRequest {
        node_id: NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4)),
        other: vec![],
    };
    match ask(
        &mut n,
        SMF2,
        msg::emit(&HeaderRepr::node(0, next_seq()), &release),
        now,
    ) {
        Msg::AssociationReleaseResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_REJECTED),
        m => panic!("{m:?}"),
    }
    assert_eq!(n.associations().len(), 2);
    assert_eq!(n.sessions().len(), 1);
    assert_eq!(format!("{:?}", n.sessions().get(seid).unwrap()), before);
    // The owner still can.
    let r = modify(&mut n, SMF, seid, next_seq(), &m, now);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED);
    let d = delete(&mut n, SMF, seid, next_seq(), now);
    assert_eq!(d.cause, CauseValue::REQUEST_ACCEPTED);
    n.sessions().check().unwrap();
}

/// TS 33.117 clause 4.2.2.2 / TS 29.244 clause 6.2.6.1: N4 requests from a peer that is
/// not allowed to associate, or allowed but not associated, change nothing: no
/// association, no session, no deletion.
#[test]
fn scas_n4_requests_from_peers_not_allowed_or_not_associated_change_nothing() {
    let mut n = node_where(TeidAllocator::new(1, 0xffff_ffff), |c| {
        c.allowed_peers = vec!["127.0.0.4/32".parse().unwrap()]
    });
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let seid = establish(&mut n, SMF, next_seq(), &establishment(0x42, None), now)
        .up_fseid
        .unwrap()
        .seid;
    // SMF2 is not allowed: its setup is refused, then everything it sends is too.
    match setup(&mut n, SMF2, 1, now) {
        Msg::AssociationSetupResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_REJECTED),
        m => panic!("{m:?}"),
    }
    let r = establish(&mut n, SMF2, next_seq(), &establishment(0x43, None), now);
    assert_eq!(r.cause, CauseValue::NO_ESTABLISHED_PFCP_ASSOCIATION);
    let d = delete(&mut n, SMF2, seid, next_seq(), now);
    assert_eq!(d.cause, CauseValue::NO_ESTABLISHED_PFCP_ASSOCIATION);
    let release = msg::AssociationReleaseRequest {
        node_id: NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4)),
        other: vec![],
    };
    let out = n.on_datagram(
        addr(SMF2),
        &msg::emit(&HeaderRepr::node(0, next_seq()), &release),
        now,
    );
    assert!(out.len() <= 1);
    assert_eq!(n.associations().len(), 1);
    assert_eq!(n.sessions().len(), 1);
}

/// A UE address is one session's (TS 23.501 clause 5.8.2.2: the UPF finds a session by
/// its UE address): a second session naming an address another session holds is
/// refused with the offending PDR, and the first keeps its traffic.
#[test]
fn scas_ue_address_installed_in_two_sessions_refused() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    setup(&mut n, SMF2, 1, now);
    let ue = Ipv4Addr::new(10, 46, 0, 9);
    let with_ue = |cp_seid| {
        let mut r = establishment(cp_seid, None);
        r.create_pdrs[1].pdi.ue_ip_address[0] = UeIpAddress {
            destination: true,
            ipv4: Some(ue),
            ..Default::default()
        };
        r
    };
    let first = establish(&mut n, SMF, next_seq(), &with_ue(0x42), now);
    assert_eq!(first.cause, CauseValue::REQUEST_ACCEPTED);
    let before = format!("{:?}", n.sessions().iter().collect::<Vec<_>>());
    for (from, cp_seid) in [(SMF, 0x43), (SMF2, 0x44)] {
        let r = establish(&mut n, from, next_seq(), &with_ue(cp_seid), now);
        assert_eq!(
            r.cause,
            CauseValue::RULE_CREATION_MODIFICATION_FAILURE,
            "{from}"
        );
        assert_eq!(
            r.failed_rule_id,
            Some(FailedRuleId {
                rule_type: FailedRuleId::PDR,
                id: 2
            }),
            "{from}"
        );
    }
    assert_eq!(
        format!("{:?}", n.sessions().iter().collect::<Vec<_>>()),
        before
    );
    n.sessions().check().unwrap();
}

/// Load and overload control (TS 29.244 clauses 6.2.3, 6.2.4): a CP function that
/// announced LOAD and OVRL gets the load in every session response and the overload
/// while it lasts; one that did not gets neither. While overloaded, new sessions are
/// refused with Cause 74 and nothing is allocated, while modifications, deletions and
/// heartbeats are served; when it ends, a report of reduction 0 under a new sequence
/// number goes out for a period of validity, and sessions are accepted again.
#[test]
fn overload_refuses_new_sessions_serves_the_rest_and_is_reported() {
    use pfcp::ie::cp_function_features as cpf;
    use upf::load::{Load, OVERLOAD_VALIDITY};
    let mut n = node();
    let t0 = Instant::now();
    let r = msg::AssociationSetupRequest {
        cp_function_features: Some(Flags::from_bits(&[cpf::LOAD, cpf::OVRL], 1)),
        ..msg::AssociationSetupRequest::new(NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4)), 1)
    };
    ask(
        &mut n,
        SMF,
        msg::emit(&HeaderRepr::node(0, next_seq()), &r),
        t0,
    );
    setup(&mut n, SMF2, 1, t0); // announces neither
    let with_smf2 = |mut r: msg::SessionEstablishmentRequest| {
        r.node_id = NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 5));
        r.cp_fseid.ipv4 = Some(Ipv4Addr::new(127, 0, 0, 5));
        r
    };

    n.set_load(
        Load {
            metric: 40,
            reduction: 0,
        },
        t0,
    );
    let a = establish(&mut n, SMF, next_seq(), &establishment(0x1, None), t0);
    assert_eq!(a.cause, CauseValue::REQUEST_ACCEPTED);
    let lci = a
        .load_control_information
        .clone()
        .expect("LCI for a LOAD peer");
    assert_eq!(lci.metric, 40);
    assert!(a.overload_control_information.is_none(), "not overloaded");
    let b = establish(
        &mut n,
        SMF2,
        next_seq(),
        &with_smf2(establishment(0x2, None)),
        t0,
    );
    assert_eq!(b.cause, CauseValue::REQUEST_ACCEPTED);
    assert!(b.load_control_information.is_none() && b.overload_control_information.is_none());
    let seid = a.up_fseid.unwrap().seid;

    // A change under the reporting step is not a new report; a larger one is.
    n.set_load(
        Load {
            metric: 42,
            reduction: 0,
        },
        t0,
    );
    let m = modify(&mut n, SMF, seid, next_seq(), &empty_modification(), t0);
    assert_eq!(m.load_control_information.as_ref(), Some(&lci));
    n.set_load(
        Load {
            metric: 90,
            reduction: 30,
        },
        t0,
    );
    let teids_before = n.sessions().resources().teids.in_use();
    let c = establish(&mut n, SMF, next_seq(), &establishment(0x3, None), t0);
    assert_eq!(c.cause, CauseValue::PFCP_ENTITY_IN_CONGESTION);
    assert!(c.up_fseid.is_none());
    let lci2 = c.load_control_information.unwrap();
    assert_eq!(lci2.metric, 90);
    assert!(lci2.sequence_number > lci.sequence_number);
    let oci = c
        .overload_control_information
        .expect("OCI for an OVRL peer");
    assert_eq!(oci.metric, 30);
    assert_eq!(
        oci.period_of_validity.value() as u64 * 2,
        OVERLOAD_VALIDITY.as_secs()
    );
    let d = establish(
        &mut n,
        SMF2,
        next_seq(),
        &with_smf2(establishment(0x4, None)),
        t0,
    );
    assert_eq!(
        d.cause,
        CauseValue::PFCP_ENTITY_IN_CONGESTION,
        "also without OVRL"
    );
    assert_eq!(n.sessions().resources().teids.in_use(), teids_before);
    assert_eq!(n.stats().congestion_rejections, 2);
    // The sessions there are still served.
    let m = modify(&mut n, SMF, seid, next_seq(), &empty_modification(), t0);
    assert_eq!(m.cause, CauseValue::REQUEST_ACCEPTED);
    assert_eq!(m.overload_control_information.unwrap().metric, 30);
    let hb = msg::emit(
        &HeaderRepr::node(0, next_seq()),
        &msg::HeartbeatRequest {
            recovery_time_stamp: 1,
            source_ip_address: None,
            other: vec![],
        },
    );
    assert!(matches!(
        ask(&mut n, SMF, hb, t0),
        Msg::HeartbeatResponse(_)
    ));

    // The end: reported as reduction 0 for a period of validity, then not at all.
    let t1 = t0 + Duration::from_secs(1);
    n.set_load(
        Load {
            metric: 50,
            reduction: 0,
        },
        t1,
    );
    let e = establish(&mut n, SMF, next_seq(), &establishment(0x5, None), t1);
    assert_eq!(e.cause, CauseValue::REQUEST_ACCEPTED);
    let end = e
        .overload_control_information
        .expect("the end of the overload");
    assert_eq!(end.metric, 0);
    assert!(end.sequence_number > oci.sequence_number);
    let t2 = t1 + OVERLOAD_VALIDITY + Duration::from_secs(1);
    n.set_load(
        Load {
            metric: 50,
            reduction: 0,
        },
        t2,
    );
    let d = delete(&mut n, SMF, seid, next_seq(), t2);
    assert_eq!(d.cause, CauseValue::REQUEST_ACCEPTED);
    assert!(d.overload_control_information.is_none());
    assert_eq!(d.load_control_information.unwrap().metric, 50);
    n.sessions().check().unwrap();
}

/// A restart with the state kept (upf::state), in-process: everything `save_all` wrote
/// and the journal's changes after it, restored into a fresh node, give the same
/// sessions, resources and association; the configured SMF is not asked to associate
/// again; a heartbeat goes out at once with the same Recovery Time Stamp; the sessions
/// answer to their SEIDs; the sequence numbers go on from where they were.
#[test]
fn a_node_restored_from_its_state_goes_on_where_it_was() {
    use upf::state::StateDir;
    let dir = std::env::temp_dir().join(format!("upf-n4-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let edit = |c: &mut N4Config| c.smf_peers = vec![addr(SMF)];
    let mut n = node_where(TeidAllocator::new(1, 0xffff_ffff), edit);
    let now = Instant::now();
    assert!(matches!(
        setup(&mut n, SMF, 1, now),
        Msg::AssociationSetupResponse(_)
    ));
    n.track_changes();
    let ups: Vec<u64> = (0..3)
        .map(|k| {
            let r = establish(&mut n, SMF, next_seq(), &establishment(0x50 + k, None), now);
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
            r.up_fseid.unwrap().seid
        })
        .collect();
    let header = state_header(&n);
    // A Session Report Request the SMF has not answered yet.
    let report = n.send_report(
        ups[1],
        msg::SessionReportRequest::new(Flags::from_bits(&[pfcp::ie::report_type::DLDR], 1)),
        now,
    );
    let report_seq = Msg::parse(&report[0].data).unwrap().0.sequence;
    let state = StateDir::new(&dir);
    let mut journal = state.write_snapshot(&header, n.save_all()).unwrap();
    // After the snapshot: one session deleted, one more established, a heartbeat sent.
    assert_eq!(
        delete(&mut n, SMF, ups[0], next_seq(), now).cause,
        CauseValue::REQUEST_ACCEPTED
    );
    let r = establish(&mut n, SMF, next_seq(), &establishment(0x60, None), now);
    let fourth = r.up_fseid.unwrap().seid;
    let _ = n.on_timer(now + Duration::from_secs(6));
    journal.append(&n.take_changes()).unwrap();

    let saved = state.load("t").unwrap().unwrap();
    let mut m = node_where(TeidAllocator::new(1, 0xffff_ffff), edit);
    m.restore(&saved, |_, _| upf::report::Counted::Unknown, now)
        .unwrap();
    assert!(
        m.start(now).is_empty(),
        "associated already: no Association Setup"
    );
    let mut want: Vec<u64> = vec![ups[1], ups[2], fourth];
    want.sort();
    assert_eq!(seids_of(&m), want);
    assert_restored_as(&m, &n);
    assert_eq!(m.associations(), n.associations());
    // A heartbeat at once, with the time stamp the SMF knows, after n's sequence numbers;
    // the unanswered report again, with its sequence number.
    let out = m.on_timer(now);
    let reports: Vec<u32> = out
        .iter()
        .filter_map(|o| match Msg::parse(&o.data).ok()? {
            (h, Msg::SessionReportRequest(_)) => Some(h.sequence),
            _ => None,
        })
        .collect();
    assert_eq!(reports, [report_seq]);
    let hb: Vec<_> = out
        .iter()
        .filter_map(|o| match Msg::parse(&o.data).ok()? {
            (h, Msg::HeartbeatRequest(r)) => Some((h.sequence, r.recovery_time_stamp)),
            _ => None,
        })
        .collect();
    assert_eq!(hb.len(), 1, "{hb:?}");
    assert_eq!(hb[0].1, 3_900_000_000);
    let n_hb: Vec<u32> = n
        .on_timer(now + Duration::from_secs(20))
        .iter()
        .filter_map(|o| Some(Msg::parse(&o.data).ok()?.0.sequence))
        .collect();
    assert!(n_hb.iter().all(|s| hb[0].0 >= *s), "{hb:?} after {n_hb:?}");
    // The sessions answer to their SEIDs; a TEID or UE address they hold is not handed
    // out again.
    assert_eq!(
        delete(&mut m, SMF, ups[1], next_seq(), now).cause,
        CauseValue::REQUEST_ACCEPTED
    );
    let r = establish(&mut m, SMF, next_seq(), &establishment(0x70, None), now);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED);
    m.sessions().check().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Session `from` gives up its uplink PDR (PDR 1, its CHOOSE F-TEID) and session `to`
/// creates PDR 3 with a CHOOSE F-TEID: with every other TEID taken, `to` gets the one
/// `from` held.
fn move_uplink_teid(n: &mut N4, from: u64, to: u64, now: Instant) {
    let mut m = empty_modification();
    m.remove_pdrs.push(msg::RemovePdr {
        pdr_id: 1,
        other: vec![],
    });
    assert_eq!(
        modify(n, SMF, from, next_seq(), &m, now).cause,
        CauseValue::REQUEST_ACCEPTED
    );
    let mut m = empty_modification();
    m.create_pdrs.push(pdr(
        3,
        1,
        pdi(0, Some(FTeid::choose(true, false, None)), None),
    ));
    assert_eq!(
        modify(n, SMF, to, next_seq(), &m, now).cause,
        CauseValue::REQUEST_ACCEPTED
    );
}

/// Session `seid`'s downlink FAR (FAR 2) set to buffer: a change of its rules alone.
fn buffer_downlink(n: &mut N4, seid: u64, now: Instant) {
    let mut m = empty_modification();
    m.update_fars.push(msg::UpdateFar {
        far_id: 2,
        apply_action: Some(Flags::from_bits(&[apply_action::BUFF], 2)),
        update_forwarding_parameters: None,
        update_duplicating_parameters: vec![],
        bar_id: None,
        other: vec![],
    });
    assert_eq!(
        modify(n, SMF, seid, next_seq(), &m, now).cause,
        CauseValue::REQUEST_ACCEPTED
    );
}

/// A snapshot taken in steps while N4 goes on (upfd's persist.rs: N4 never waits for
/// a million sessions to be read): sessions deleted, changed and established between
/// the steps, before and after the step that reads them, and a TEID freed by a session
/// already read taken by one read later (so the snapshot alone holds it twice). The
/// snapshot and the journal written beside it load as the node is.
#[test]
fn a_snapshot_taken_in_steps_while_sessions_change_loads_as_the_node_is() {
    use upf::state::{Record, StateDir};
    let dir = std::env::temp_dir().join(format!("upf-n4-steps-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // As many TEIDs as sessions: a TEID freed is the one the next CHOOSE gets.
    const N: u64 = 40;
    let mut n = node_with(TeidAllocator::new(1, N as u32));
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    n.track_changes();
    for k in 0..N {
        let r = establish(
            &mut n,
            SMF,
            next_seq(),
            &establishment(0x100 + k, None),
            now,
        );
        assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    }
    let state = StateDir::new(&dir);
    let header = state_header(&n);
    let mut journal = state.begin_journal(header.generation).unwrap();
    let (mut records, mut to_save) = n.save_head();
    let all = to_save.seids_left().to_vec();
    assert_eq!(all.len(), N as usize);
    assert!(to_save.counts().0 > N as usize, "the cached responses too");
    let mut cp = 0x200;
    let mut taken_twice = 0;
    while !to_save.is_empty() {
        records.extend(n.save_next(&mut to_save, 7));
        let left = to_save.seids_left().to_vec();
        let read: Vec<u64> = all.iter().copied().filter(|s| !left.contains(s)).collect();
        let live = |n: &N4, v: &[u64]| -> Vec<u64> {
            v.iter()
                .copied()
                .filter(|s| n.sessions().get(*s).is_some())
                .collect()
        };
        // Every TEID taken before the move below.
        while n.sessions().resources().teids.in_use() < N as usize {
            cp += 1;
            let r = establish(&mut n, SMF, next_seq(), &establishment(cp, None), now);
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
        }
        let (done, todo) = (live(&n, &read), live(&n, &left));
        // A session read already gives up its uplink TEID, and one still to be read
        // takes it (the only TEID free).
        let with_uplink = done
            .iter()
            .copied()
            .find(|s| n.sessions().get(*s).unwrap().pdrs.contains_key(&1));
        if let (Some(b), Some(&a)) = (with_uplink, todo.first()) {
            move_uplink_teid(&mut n, b, a, now);
            taken_twice += 1;
        }
        // One read and one to be read deleted; a new one established if that freed a
        // TEID.
        for v in [&done, &todo] {
            if let Some(&s) = v.get(1) {
                assert_eq!(
                    delete(&mut n, SMF, s, next_seq(), now).cause,
                    CauseValue::REQUEST_ACCEPTED
                );
                if n.sessions().resources().teids.in_use() < N as usize {
                    cp += 1;
                    let r = establish(&mut n, SMF, next_seq(), &establishment(cp, None), now);
                    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
                }
            }
        }
        // A FAR changed in one read and one to be read (not the ones deleted).
        for v in [&done, &todo] {
            if let Some(&s) = v.first() {
                buffer_downlink(&mut n, s, now);
            }
        }
        journal.append(&n.take_changes()).unwrap();
    }
    assert!(taken_twice >= 3, "{taken_twice}");
    assert_eq!(
        n.sessions().resources().teids.in_use(),
        N as usize,
        "every TEID taken"
    );
    let snapshot_sessions = records
        .iter()
        .filter(|r| matches!(r, Record::Session(_)))
        .count();
    assert!(
        snapshot_sessions < N as usize,
        "some were gone before their step"
    );
    let mut holders: std::collections::HashMap<u32, usize> = Default::default();
    for r in &records {
        if let Record::Session(s) = r {
            for p in s.session.pdrs.values() {
                if let Some(f) = &p.pdi.local_fteid {
                    *holders.entry(f.teid).or_default() += 1;
                }
            }
        }
    }
    assert!(
        holders.values().any(|n| *n > 1),
        "the snapshot alone holds a TEID twice"
    );
    state.write_snapshot_file(&header, records).unwrap();

    let saved = state.load("t").unwrap().unwrap();
    let mut m = node_with(TeidAllocator::new(1, N as u32));
    m.restore(&saved, |_, _| upf::report::Counted::Unknown, now)
        .unwrap();
    assert!(seids_of(&n).len() >= N as usize / 2, "{:?}", seids_of(&n));
    assert_restored_as(&m, &n);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `/check` read in steps while N4 works ([`upf::sessions::CheckWalk`]): sessions read
/// early give up TEIDs that sessions read late take, some are deleted and some
/// established between the steps. The walk judges the books of its last moment:
/// consistent. The same walk that does not count the changed sessions again at its end
/// finds a TEID held twice or counts that disagree with the allocator (which is why it
/// must).
#[test]
fn a_check_taken_in_steps_while_sessions_change_judges_the_books_of_one_moment() {
    // As many TEIDs as sessions: a TEID freed is the one the next CHOOSE gets.
    const N: u64 = 40;
    let mut n = node_with(TeidAllocator::new(1, N as u32));
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    for k in 0..N {
        let r = establish(
            &mut n,
            SMF,
            next_seq(),
            &establishment(0x100 + k, None),
            now,
        );
        assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    }
    // Changed sessions are counted again in steps once more than 2 changed.
    let mut walk = n.check_begin().recount_in_steps_above(2);
    let mut blind = n.sessions().check_walk();
    let all = walk.seids_left().to_vec();
    let (mut cp, mut moved, mut deleted) = (0x200, 0, 0);
    loop {
        let more = n.check_step(&mut walk, 7);
        n.sessions().check_read(&mut blind, 7);
        if !more {
            break;
        }
        let left = walk.seids_left().to_vec();
        if left.is_empty() {
            continue; // the changed ones counted again, in steps
        }
        let live = |n: &N4, read: bool| -> Vec<u64> {
            all.iter()
                .copied()
                .filter(|s| left.contains(s) != read && n.sessions().get(*s).is_some())
                .collect()
        };
        while n.sessions().resources().teids.in_use() < N as usize {
            cp += 1;
            let r = establish(&mut n, SMF, next_seq(), &establishment(cp, None), now);
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
        }
        let (done, todo) = (live(&n, true), live(&n, false));
        // A session read already gives up its uplink TEID, and one still to be read
        // takes it (the only TEID free).
        let has = |s: u64, pdr: u16| n.sessions().get(s).unwrap().pdrs.contains_key(&pdr);
        let giver = done.iter().copied().find(|s| has(*s, 1));
        let taker = todo.iter().copied().find(|s| !has(*s, 3));
        if let (Some(b), Some(a)) = (giver, taker) {
            move_uplink_teid(&mut n, b, a, now);
            moved += 1;
        }
        // One session read and one to be read deleted.
        for v in [&done, &todo] {
            if let Some(&s) = v.get(1) {
                assert_eq!(
                    delete(&mut n, SMF, s, next_seq(), now).cause,
                    CauseValue::REQUEST_ACCEPTED
                );
                deleted += 1;
            }
        }
    }
    assert!(
        moved >= 2 && deleted >= 4,
        "{moved} moved, {deleted} deleted"
    );
    assert!(
        walk.recounted() > 0,
        "changed sessions counted again in steps"
    );
    assert_eq!(n.check_end(&mut walk), Ok(()));
    let e = n
        .sessions()
        .check_judge(&blind)
        .expect_err("the books as read at different moments disagree");
    assert!(e.contains("held twice") || e.contains("in use"), "{e}");
    assert_eq!(n.sessions().check(), Ok(()));
}

/// A check whose sessions change faster than it counts them again gives up (no verdict)
/// rather than end with one long step, and stops noting changes.
#[test]
fn a_check_gives_up_when_sessions_change_faster_than_it_counts_them_again() {
    let mut n = node_with(TeidAllocator::new(1, 1000));
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    for k in 0..4 {
        let r = establish(
            &mut n,
            SMF,
            next_seq(),
            &establishment(0x300 + k, None),
            now,
        );
        assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    }
    let seids = n.sessions().seids();
    let mut walk = n.check_begin().recount_in_steps_above(0);
    let mut steps = 0;
    // One session counted a step, two changed.
    while n.check_step(&mut walk, 1) {
        for s in &seids[..2] {
            buffer_downlink(&mut n, *s, now);
        }
        steps += 1;
        assert!(steps < 10_000, "the walk neither ended nor gave up");
    }
    assert!(walk.gave_up(), "{steps} steps");
    n.check_end_unjudged();
    assert_eq!(n.sessions().check(), Ok(()));
}

// PFD Management (clauses 6.2.5, 7.4.3) and Application ID in a PDI (clause 5.11).

fn pfd_request(apps: &[(&str, Vec<pfcp::ie::PfdContents>)]) -> msg::PfdManagementRequest {
    msg::PfdManagementRequest {
        application_ids_pfds: apps
            .iter()
            .map(|(id, contents)| msg::ApplicationIdsPfds {
                application_id: pfcp::ie::Text::new(id),
                pfd_contexts: if contents.is_empty() {
                    vec![]
                } else {
                    vec![msg::PfdContext {
                        pfd_contents: contents.clone(),
                        other: vec![],
                    }]
                },
                other: vec![],
            })
            .collect(),
        node_id: Some(NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4))),
        other: vec![],
    }
}

fn domain(name: &str) -> pfcp::ie::PfdContents {
    pfcp::ie::PfdContents {
        domain_name: Some(pfcp::ie::Text::new(name)),
        ..Default::default()
    }
}

fn flow(fd: &str) -> pfcp::ie::PfdContents {
    pfcp::ie::PfdContents {
        flow_description: Some(pfcp::ie::Text::new(fd)),
        ..Default::default()
    }
}

fn pfd_management(
    n: &mut N4,
    from: &str,
    r: &msg::PfdManagementRequest,
    now: Instant,
) -> msg::PfdManagementResponse {
    match ask(n, from, msg::emit(&HeaderRepr::node(0, next_seq()), r), now) {
        Msg::PfdManagementResponse(r) => r,
        m => panic!("unexpected {m:?}"),
    }
}

/// The typical session with its downlink PDR naming application `app`.
fn app_establishment(cp_seid: u64, app: &str) -> msg::SessionEstablishmentRequest {
    let mut e = establishment(cp_seid, None);
    let mut p = e.create_pdrs[1].clone();
    p.pdr_id = 3;
    p.precedence = Some(10);
    p.pdi.application_id = Some(pfcp::ie::Text::new(app));
    e.create_pdrs.push(p);
    e
}

#[test]
fn pfd_management_makes_applications_known_to_pdrs() {
    let mut n = node();
    let now = Instant::now();
    match setup(&mut n, SMF, 1, now) {
        Msg::AssociationSetupResponse(r) => assert!(r
            .up_function_features
            .unwrap()
            .get(pfcp::ie::up_function_features::PFDM)),
        m => panic!("{m:?}"),
    }
    // Unknown before PFD Management: Cause 81, Offending IE Application ID.
    let r = establish(
        &mut n,
        SMF,
        next_seq(),
        &app_establishment(0x42, "video"),
        now,
    );
    assert_eq!(r.cause, CauseValue::UNKNOWN_APPLICATION_ID);
    assert_eq!(r.offending_ie, Some(types::APPLICATION_ID));
    let req = pfd_request(&[
        (
            "video",
            vec![
                domain("video.example"),
                flow("permit out 6 from 192.0.2.0/24 443 to assigned"),
            ],
        ),
        ("chat", vec![domain("chat.example")]),
    ]);
    let r = pfd_management(&mut n, SMF, &req, now);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    assert_eq!(n.sessions().pfds().len(), 2);
    assert!(n
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::PfdsChanged { applications, .. } if applications.len() == 2)));
    let r = establish(
        &mut n,
        SMF,
        next_seq(),
        &app_establishment(0x42, "video"),
        now,
    );
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    let seid = r.up_fseid.unwrap().seid;
    let s = n.sessions().get(seid).unwrap();
    assert_eq!(
        s.pdrs.get(&3).unwrap().pdi.application_id.as_deref(),
        Some("video")
    );
    assert_eq!(s.pdrs.get(&2).unwrap().pdi.application_id, None);
    // Still unknown: another name.
    let r = establish(
        &mut n,
        SMF,
        next_seq(),
        &app_establishment(0x43, "games"),
        now,
    );
    assert_eq!(r.cause, CauseValue::UNKNOWN_APPLICATION_ID);
    assert_eq!(r.offending_ie, Some(types::APPLICATION_ID));
    // An Update PDR naming an unknown application is refused, the session unchanged.
    let mut m = empty_modification();
    m.update_pdrs.push(msg::UpdatePdr {
        pdr_id: 3,
        outer_header_removal: None,
        precedence: None,
        pdi: Some({
            let mut p = pdi(1, None, None);
            p.application_id = Some(pfcp::ie::Text::new("games"));
            p
        }),
        far_id: None,
        urr_ids: vec![],
        qer_ids: vec![],
        activate_predefined_rules: vec![],
        deactivate_predefined_rules: vec![],
        activation_time: None,
        deactivation_time: None,
        other: vec![],
    });
    let r = modify(&mut n, SMF, seid, next_seq(), &m, now);
    assert_eq!(r.cause, CauseValue::UNKNOWN_APPLICATION_ID);
    assert_eq!(
        n.sessions()
            .get(seid)
            .unwrap()
            .pdrs
            .get(&3)
            .unwrap()
            .pdi
            .application_id
            .as_deref(),
        Some("video")
    );
}

#[test]
fn pfd_management_refusals_change_nothing() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let ok = pfd_request(&[("video", vec![domain("video.example")])]);
    assert_eq!(
        pfd_management(&mut n, SMF, &ok, now).cause,
        CauseValue::REQUEST_ACCEPTED
    );
    let before = (**n.sessions().pfds()).clone();
    // Custom PFD content: Service not supported, Offending IE PFD Contents.
    let custom = pfcp::ie::PfdContents {
        custom_pfd_content: Some(pfcp::ie::Bytes(b"opaque".to_vec())),
        ..Default::default()
    };
    let r = pfd_management(
        &mut n,
        SMF,
        &pfd_request(&[
            ("chat", vec![domain("chat.example")]),
            ("video", vec![custom]),
        ]),
        now,
    );
    assert_eq!(r.cause, CauseValue::SERVICE_NOT_SUPPORTED);
    assert_eq!(r.offending_ie, Some(types::PFD_CONTENTS));
    // A flow description that does not parse: Mandatory IE incorrect.
    let r = pfd_management(
        &mut n,
        SMF,
        &pfd_request(&[("chat", vec![flow("permit sideways 6 from me to you")])]),
        now,
    );
    assert_eq!(r.cause, CauseValue::MANDATORY_IE_INCORRECT);
    assert_eq!(r.offending_ie, Some(types::PFD_CONTENTS));
    // A domain name that is not one, or an unknown Domain Name Protocol: the same.
    let r = pfd_management(
        &mut n,
        SMF,
        &pfd_request(&[("chat", vec![domain("not a name")])]),
        now,
    );
    assert_eq!(r.cause, CauseValue::MANDATORY_IE_INCORRECT);
    let bad_dnp = pfcp::ie::PfdContents {
        domain_name_protocol: Some(pfcp::ie::Text::new("QUIC")),
        ..domain("chat.example")
    };
    let r = pfd_management(&mut n, SMF, &pfd_request(&[("chat", vec![bad_dnp])]), now);
    assert_eq!(r.cause, CauseValue::MANDATORY_IE_INCORRECT);
    assert_eq!(**n.sessions().pfds(), before, "all or nothing");
    assert!(!n.sessions().pfds().knows("chat"));
    // From a peer without an association: refused, nothing changed.
    let r = pfd_management(
        &mut n,
        SMF2,
        &pfd_request(&[("chat", vec![domain("chat.example")])]),
        now,
    );
    assert_eq!(r.cause, CauseValue::NO_ESTABLISHED_PFCP_ASSOCIATION);
    assert!(!n.sessions().pfds().knows("chat"));
}

#[test]
fn an_empty_pfd_management_request_removes_the_smfs_pfds() {
    let mut n = node();
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    // A configured application (as upfd's `applications` makes one).
    let mut t = (**n.sessions().pfds()).clone();
    let mut local = upf::pfd::AppPfds::default();
    local.add_domain("local.example", None).unwrap();
    t.set("local", local, true).unwrap();
    n.set_pfds(t, &["local".into()]).unwrap();
    let req = pfd_request(&[("video", vec![domain("video.example")])]);
    assert_eq!(
        pfd_management(&mut n, SMF, &req, now).cause,
        CauseValue::REQUEST_ACCEPTED
    );
    assert!(!n.sessions().pfds().get("video").unwrap().pfds.is_empty());
    // A retransmission is answered from the cache.
    let seq = next_seq();
    let data = msg::emit(&HeaderRepr::node(0, seq), &pfd_request(&[]));
    let first = n.on_datagram(addr(SMF), &data, now);
    let again = n.on_datagram(addr(SMF), &data, now);
    assert_eq!(first, again);
    match Msg::parse(&first[0].data).unwrap().1 {
        Msg::PfdManagementResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED),
        m => panic!("{m:?}"),
    }
    let t = n.sessions().pfds();
    // The application stays known (PDRs naming it stay valid), without PFDs; the
    // configured one keeps its own.
    assert!(t.get("video").unwrap().pfds.is_empty());
    assert!(!t.get("local").unwrap().pfds.is_empty());
    let r = establish(
        &mut n,
        SMF,
        next_seq(),
        &app_establishment(0x42, "video"),
        now,
    );
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    let r = establish(
        &mut n,
        SMF,
        next_seq(),
        &app_establishment(0x43, "local"),
        now,
    );
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
}

/// Application Detection Information (clause 5.11.1): a new flow of an application is
/// reported by its PDR's URR with START (Application ID, Instance ID, Flow Information),
/// and its stop with STOPT once the data path no longer holds it.
#[test]
fn application_flows_start_and_stop_are_reported() {
    let mut n = node();
    let mut now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let req = pfd_request(&[("video", vec![domain("video.example")])]);
    assert_eq!(
        pfd_management(&mut n, SMF, &req, now).cause,
        CauseValue::REQUEST_ACCEPTED
    );
    let mut e = app_establishment(0x42, "video");
    let mut u = urr(7);
    u.reporting_triggers =
        Flags::from_bits(&[reporting_triggers::START, reporting_triggers::STOPT], 2);
    e.create_urrs.push(u);
    e.create_pdrs[2].urr_ids = vec![7];
    let r = establish(&mut n, SMF, next_seq(), &e, now);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    let seid = r.up_fseid.unwrap().seid;
    let flow = upf::fastpath::AppFlow {
        protocol: 6,
        ue: "10.45.0.2".parse().unwrap(),
        ue_port: 40000,
        remote: "192.0.2.10".parse().unwrap(),
        remote_port: 443,
    };
    let report = |out: &[upf::n4::Out]| -> msg::UsageReport {
        assert_eq!(out.len(), 1, "one Session Report Request");
        match Msg::parse(&out[0].data).unwrap().1 {
            Msg::SessionReportRequest(r) => {
                assert!(r.report_type.get(pfcp::ie::report_type::USAR));
                assert_eq!(r.usage_reports.len(), 1);
                r.usage_reports[0].clone()
            }
            m => panic!("{m:?}"),
        }
    };
    let out = n.app_start(seid, "video", flow, now);
    let start = report(&out);
    assert_eq!(start.urr_id, 7);
    assert!(start
        .usage_report_trigger
        .get(pfcp::ie::usage_report_trigger::START));
    let adi = start.application_detection_information.unwrap();
    assert_eq!(adi.application_id.as_str(), "video");
    let instance = adi.application_instance_id.unwrap();
    assert!(instance.as_str().starts_with(&format!("{seid:x}-")));
    let fi = adi.flow_information.unwrap();
    assert_eq!(fi.direction, 3, "bidirectional");
    assert_eq!(
        fi.flow_description.as_str(),
        "permit out 6 from 192.0.2.10 443 to 10.45.0.2 40000"
    );
    // The same flow again: nothing new.
    assert!(n.app_start(seid, "video", flow, now).is_empty());
    // Another application (no PDR names it) or another session: nothing.
    assert!(n.app_start(seid, "chat", flow, now).is_empty());
    assert!(n.app_start(seid ^ 1, "video", flow, now).is_empty());
    // The data path holds no such flow (this model classifies nothing): stopped at the
    // next look, a second on.
    now += Duration::from_secs(1);
    let out = n.poll_reports(now, None);
    let stop = report(&out);
    assert_eq!(stop.urr_id, 7);
    assert_eq!(stop.ur_seqn, start.ur_seqn + 1);
    assert!(stop
        .usage_report_trigger
        .get(pfcp::ie::usage_report_trigger::STOPT));
    let adi = stop.application_detection_information.unwrap();
    assert_eq!(adi.application_id.as_str(), "video");
    assert_eq!(adi.application_instance_id.unwrap(), instance);
    // Reported once; a new flow gets a new instance.
    now += Duration::from_secs(1);
    assert!(n.poll_reports(now, None).is_empty());
    let other = upf::fastpath::AppFlow {
        ue_port: 40001,
        ..flow
    };
    let again = report(&n.app_start(seid, "video", other, now));
    assert_ne!(
        again
            .application_detection_information
            .unwrap()
            .application_instance_id
            .unwrap(),
        instance
    );
    // The session ends: its flows are forgotten (no STOPT for a deleted session).
    delete(&mut n, SMF, seid, next_seq(), now);
    now += Duration::from_secs(1);
    assert!(n.poll_reports(now, None).is_empty());
}

/// PFDs an SMF provisioned are kept in the state (snapshot and journal) and restored
/// with the indices they had, the configured applications taken in over them: restored
/// PDRs naming them stay, and a modification naming one needs no PFDs again.
#[test]
fn pfds_are_kept_across_a_restore_with_their_indices() {
    use upf::state::{Record, StateDir};
    let dir = std::env::temp_dir().join(format!("upf-n4-pfds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let edit = |c: &mut N4Config| c.smf_peers = vec![addr(SMF)];
    let configured = |n: &mut N4, name: &str| {
        let mut t = upf::pfd::PfdTable::new();
        let mut p = upf::pfd::AppPfds::default();
        p.add_domain(name, None).unwrap();
        t.set("local", p, true).unwrap();
        n.set_pfds(t, &["local".into()]).unwrap();
    };
    let mut n = node_where(TeidAllocator::new(1, 0xffff_ffff), edit);
    configured(&mut n, "local.example");
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    n.track_changes();
    let header = state_header(&n);
    let state = StateDir::new(&dir);
    let mut journal = state.write_snapshot(&header, n.save_all()).unwrap();
    assert!(n.take_changes().is_empty(), "the snapshot has the table");
    let req = pfd_request(&[
        ("chat", vec![domain("chat.example")]),
        ("video", vec![domain("video.example")]),
    ]);
    assert_eq!(
        pfd_management(&mut n, SMF, &req, now).cause,
        CauseValue::REQUEST_ACCEPTED
    );
    let changes = n.take_changes();
    assert!(
        changes
            .iter()
            .any(|r| matches!(r, Record::Pfds(a) if a.len() == 3)),
        "PFD Management journalled: {changes:?}"
    );
    journal.append(&changes).unwrap();
    let r = establish(
        &mut n,
        SMF,
        next_seq(),
        &app_establishment(0x42, "video"),
        now,
    );
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    let seid = r.up_fseid.unwrap().seid;
    let changes = n.take_changes();
    assert!(!changes.iter().any(|r| matches!(r, Record::Pfds(_))));
    journal.append(&changes).unwrap();
    let index = |n: &N4, id: &str| n.sessions().pfds().get(id).map(|a| a.index);
    let before: Vec<_> = ["local", "chat", "video"]
        .iter()
        .map(|id| index(&n, id))
        .collect();

    // Restored under a configuration that changed the local application's PFDs and
    // added one: configured before the restore, as upfd does, with other indices.
    let saved = state.load("t").unwrap().unwrap();
    let mut m = node_where(TeidAllocator::new(1, 0xffff_ffff), edit);
    let mut t = upf::pfd::PfdTable::new();
    t.set("new", upf::pfd::AppPfds::default(), true).unwrap();
    let mut p = upf::pfd::AppPfds::default();
    p.add_domain("other.example", None).unwrap();
    t.set("local", p.clone(), true).unwrap();
    m.set_pfds(t, &["new".into(), "local".into()]).unwrap();
    m.restore(&saved, |_, _| upf::report::Counted::Unknown, now)
        .unwrap();
    let after: Vec<_> = ["local", "chat", "video"]
        .iter()
        .map(|id| index(&m, id))
        .collect();
    assert_eq!(after, before, "the indices the PDRs and the data path know");
    assert_eq!(index(&m, "new"), Some(4), "the next free index");
    let pfds = m.sessions().pfds();
    assert_eq!(
        pfds.get("local").unwrap().pfds,
        p,
        "the configuration's PFDs"
    );
    assert!(!pfds.get("video").unwrap().local);
    assert_eq!(
        pfds.get("video").unwrap().pfds,
        n.sessions().pfds().get("video").unwrap().pfds
    );
    assert_eq!(m.sessions().get(seid), n.sessions().get(seid));
    m.sessions().check().unwrap();
    // A modification naming the application: accepted without PFDs again.
    let mut md = empty_modification();
    let mut c = app_establishment(0x42, "chat").create_pdrs[2].clone();
    c.pdr_id = 4;
    md.create_pdrs.push(c);
    let r = modify(&mut m, SMF, seid, next_seq(), &md, now);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    // The restored node journals its table at its first snapshot or change.
    m.track_changes();
    assert!(m
        .take_changes()
        .iter()
        .any(|r| matches!(r, Record::Pfds(a) if a.len() == 4)));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A predefined rule naming an application (upfd's `predefined_rules.rules[].application`):
/// activated on a PDR that names none, the PDR carries the application's ID (and so
/// matches its traffic) until the rule is deactivated; a PDR's own Application ID wins;
/// a rule naming an application upfd does not know is refused with Unknown Application
/// ID.
#[test]
fn activate_predefined_rules_with_an_application() {
    use upf::predefined::{Predefined, PredefinedRule};
    let rule = |name: &str| PredefinedRule {
        name: name.into(),
        sdf_filters: vec![],
        far: None,
        qers: vec![],
        urrs: vec![],
    };
    let mut n = node_with_resources(
        TeidAllocator::new(1, 0xffff_ffff),
        |r| {
            let mut p = Predefined::new(
                vec![rule("video-rule"), rule("ghost-rule")],
                vec![],
                vec![],
                vec![],
            )
            .unwrap();
            p.set_application("video-rule", "video").unwrap();
            p.set_application("ghost-rule", "ghost").unwrap();
            r.predefined = p;
            let mut t = upf::pfd::PfdTable::new();
            let mut v = upf::pfd::AppPfds::default();
            v.add_domain("video.example", None).unwrap();
            t.set("video", v, true).unwrap();
            t.set("chat", upf::pfd::AppPfds::default(), true).unwrap();
            r.pfds = std::sync::Arc::new(t);
        },
        |_| {},
    );
    let now = Instant::now();
    setup(&mut n, SMF, 1, now);
    let with_rule = |cp_seid: u64, rule: &str, own: Option<&str>| {
        let mut e = establishment(cp_seid, None);
        let mut p = e.create_pdrs[1].clone();
        p.pdr_id = 3;
        p.precedence = Some(10);
        p.pdi.application_id = own.map(pfcp::ie::Text::new);
        p.activate_predefined_rules = vec![pfcp::ie::Text::new(rule)];
        e.create_pdrs.push(p);
        e
    };
    let r = establish(
        &mut n,
        SMF,
        next_seq(),
        &with_rule(0x42, "video-rule", None),
        now,
    );
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    let seid = r.up_fseid.unwrap().seid;
    let app = |n: &N4, seid: u64| {
        n.sessions()
            .get(seid)
            .unwrap()
            .pdrs
            .get(&3)
            .unwrap()
            .pdi
            .application_id
            .clone()
    };
    assert_eq!(app(&n, seid).as_deref(), Some("video"));
    assert_eq!(
        n.sessions()
            .get(seid)
            .unwrap()
            .pdrs
            .get(&2)
            .unwrap()
            .pdi
            .application_id,
        None
    );
    n.sessions().check().unwrap();
    // Deactivated: the PDR is back to its own PDI, without an application.
    let mut m = empty_modification();
    m.update_pdrs.push(msg::UpdatePdr {
        pdr_id: 3,
        outer_header_removal: None,
        precedence: None,
        pdi: None,
        far_id: None,
        urr_ids: vec![],
        qer_ids: vec![],
        activate_predefined_rules: vec![],
        deactivate_predefined_rules: vec![pfcp::ie::Text::new("video-rule")],
        activation_time: None,
        deactivation_time: None,
        other: vec![],
    });
    let r = modify(&mut n, SMF, seid, next_seq(), &m, now);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    assert_eq!(app(&n, seid), None);
    // Activated again by Update PDR: the application again.
    let u = &mut m.update_pdrs[0];
    u.activate_predefined_rules = std::mem::take(&mut u.deactivate_predefined_rules);
    let r = modify(&mut n, SMF, seid, next_seq(), &m, now);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    assert_eq!(app(&n, seid).as_deref(), Some("video"));
    // A PDR's own Application ID wins over the rule's.
    let r = establish(
        &mut n,
        SMF,
        next_seq(),
        &with_rule(0x43, "video-rule", Some("chat")),
        now,
    );
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    assert_eq!(app(&n, r.up_fseid.unwrap().seid).as_deref(), Some("chat"));
    // A rule naming an application upfd does not know (the configuration checks this:
    // only a changed configuration under a kept state gets here).
    let r = establish(
        &mut n,
        SMF,
        next_seq(),
        &with_rule(0x44, "ghost-rule", None),
        now,
    );
    assert_eq!(r.cause, CauseValue::UNKNOWN_APPLICATION_ID);
    assert_eq!(r.offending_ie, Some(types::ACTIVATE_PREDEFINED_RULES));
    assert_eq!(n.sessions().len(), 2);
}

/// An SMF whose response was lost when upfd stopped (killed after the journal frame,
/// before the answer left) retransmits the request to the restarted upfd (issue 28: a
/// second session for one establishment, the first leaked). The responses go into the
/// state with the sessions (`Record::Responses`), so the restarted node answers the
/// retransmitted establishment, modification and deletion with the octets it sent, and
/// executes none of them again (clause 6.4); a response older than the cache's time to
/// live is not kept, and its request is executed as new.
#[test]
fn requests_retransmitted_to_a_restarted_node_get_the_answers_sent_before() {
    use upf::state::StateDir;
    let dir = std::env::temp_dir().join(format!("upf-n4-responses-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut n = node();
    let now = Instant::now();
    assert!(matches!(
        setup(&mut n, SMF, 1, now),
        Msg::AssociationSetupResponse(_)
    ));
    n.track_changes();
    let header = state_header(&n);
    let state = StateDir::new(&dir);
    // One session in the snapshot, the rest in the journal.
    let est =
        |seq: u32, cp: u64| msg::emit(&HeaderRepr::session(0, 0, seq), &establishment(cp, None));
    let (e1, e2) = (est(next_seq(), 0x71), est(next_seq(), 0x72));
    let a1 = n.on_datagram(addr(SMF), &e1, now);
    let mut journal = state.write_snapshot(&header, n.save_all()).unwrap();
    let a2 = n.on_datagram(addr(SMF), &e2, now);
    let up2 = match Msg::parse(&a2[0].data).unwrap().1 {
        Msg::SessionEstablishmentResponse(r) => r.up_fseid.unwrap().seid,
        m => panic!("{m:?}"),
    };
    let del = msg::emit(
        &HeaderRepr::session(0, up2, next_seq()),
        &msg::SessionDeletionRequest { other: vec![] },
    );
    let a3 = n.on_datagram(addr(SMF), &del, now);
    journal.append(&n.take_changes()).unwrap();

    let saved = state.load("t").unwrap().unwrap();
    assert_eq!(
        saved.responses.len(),
        4,
        "setup, two establishments, a deletion"
    );
    let mut m = node();
    m.restore(&saved, |_, _| upf::report::Counted::Unknown, now)
        .unwrap();
    let sessions = m.sessions().len();
    assert_eq!(sessions, 1, "the first session; the second was deleted");
    for (req, sent) in [(&e1, &a1), (&e2, &a2), (&del, &a3)] {
        let again = m.on_datagram(addr(SMF), req, now);
        assert_eq!(again.len(), 1);
        assert_eq!(
            again[0].data, sent[0].data,
            "the answer sent before, octet for octet"
        );
    }
    assert_eq!(m.sessions().len(), sessions, "nothing executed twice");
    assert_eq!(m.stats().duplicates, 3);

    // Past the cache's time to live (15 s here), a restart keeps none of them.
    let mut late = saved.clone();
    for r in &mut late.responses {
        r.sent_unix_ms -= 16_000;
    }
    let mut l = node();
    l.restore(&late, |_, _| upf::report::Counted::Unknown, now)
        .unwrap();
    let again = l.on_datagram(addr(SMF), &e2, now);
    match Msg::parse(&again[0].data).unwrap().1 {
        Msg::SessionEstablishmentResponse(r) => {
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED);
            assert_ne!(r.up_fseid.unwrap().seid, up2, "executed as a new request");
        }
        m => panic!("{m:?}"),
    }
    assert_eq!(l.stats().duplicates, 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Create SRR of QoS monitoring (clause 5.24.2, Table 7.5.2.9-3) for QFI 5: DL, UL
/// and round-trip delay, reported as `freq` says.
fn qos_srr(id: u8, freq: &[u16], period: Option<u32>, dl_threshold: Option<u32>) -> msg::CreateSrr {
    use pfcp::ie::requested_qos_monitoring as q;
    msg::CreateSrr {
        srr_id: id,
        access_availability_control_information: None,
        qos_monitoring_per_qos_flow_control_information: vec![
            msg::QosMonitoringPerQosFlowControlInformation {
                qfis: vec![5],
                requested_qos_monitoring: Flags::from_bits(&[q::DL, q::UL, q::RP], 1),
                reporting_frequency: Flags::from_bits(freq, 1),
                packet_delay_thresholds: dl_threshold.map(|t| pfcp::ie::PacketDelayThresholds {
                    downlink_ms: Some(t),
                    ..Default::default()
                }),
                minimum_wait_time: None,
                measurement_period: period,
                other: vec![],
            },
        ],
        direct_reporting_information: None,
        other: vec![],
    }
}

/// QoS monitoring per QoS flow through N4 (TS 29.244 clause 5.24.2): an SRR that cannot
/// be measured is refused with its cause and offending IE; a periodic one gives
/// monitoring packets to send for its QFI, reads the gNB's answers on the session's
/// TEID and sends a Session Report Request (SESR) with the mean delays each period; one
/// that reports at release puts its Session Report in the Session Deletion Response.
/// The SRRs are kept in the state (snapshot and journal) and monitored again after a
/// restore.
#[test]
fn qos_monitoring_srrs_probe_report_periodically_and_at_release_and_are_kept() {
    use pfcp::ie::reporting_frequency as f;
    use upf::qos_monitoring::Delays;
    use upf::state::StateDir;
    let dir = std::env::temp_dir().join(format!("upf-n4-srr-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut n = node();
    let t0 = Instant::now();
    assert!(matches!(
        setup(&mut n, SMF, 1, t0),
        Msg::AssociationSetupResponse(_)
    ));
    n.track_changes();

    // EVETT without Packet Delay Thresholds, PERIO without a Measurement Period.
    for (srr, missing) in [
        (
            qos_srr(1, &[f::EVETT], None, None),
            types::PACKET_DELAY_THRESHOLDS,
        ),
        (
            qos_srr(1, &[f::PERIO], None, None),
            types::MEASUREMENT_PERIOD,
        ),
    ] {
        let mut e = establishment(0x900, None);
        e.create_srrs = vec![srr];
        let r = establish(&mut n, SMF, next_seq(), &e, t0);
        assert_eq!(r.cause, CauseValue::CONDITIONAL_IE_MISSING, "{r:?}");
        assert_eq!(r.offending_ie, Some(missing));
    }
    assert_eq!(n.qos_flows(), 0);

    let mut e = establishment(0x901, None);
    e.create_srrs = vec![
        qos_srr(1, &[f::PERIO], Some(2), None),
        qos_srr(2, &[f::SESRL], None, None),
    ];
    let r = establish(&mut n, SMF, next_seq(), &e, t0);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    let seid = r.up_fseid.unwrap().seid;
    let teid = r.created_pdrs[0].local_fteid.unwrap().teid.expect("a TEID");
    assert_eq!(n.qos_flows(), 2);
    // One monitoring packet for QFI 5, however many SRRs name it.
    assert_eq!(n.qos_probes(t0), vec![(seid, 5)]);
    assert!(n.qos_probes(t0 + Duration::from_millis(100)).is_empty());
    let ms = |d, u, r| Delays {
        downlink: d,
        uplink: u,
        round_trip: r,
    };
    assert!(n.qos_answer(teid, 5, ms(30, 4, 35), t0).is_empty());
    assert!(n.qos_answer(teid, 5, ms(50, 6, 57), t0).is_empty());
    assert!(
        n.qos_answer(teid + 999, 5, ms(1, 1, 1), t0).is_empty(),
        "no such TEID"
    );
    assert!(n.poll_qos(t0 + Duration::from_millis(1900)).is_empty());
    let out = n.poll_qos(t0 + Duration::from_secs(2));
    assert_eq!(out.len(), 1);
    let Msg::SessionReportRequest(rr) = Msg::parse(&out[0].data).unwrap().1 else {
        panic!("not a report: {out:?}");
    };
    assert!(rr.report_type.get(pfcp::ie::report_type::SESR));
    assert_eq!(rr.session_reports.len(), 1);
    assert_eq!(rr.session_reports[0].srr_id, 1);
    let q = &rr.session_reports[0].qos_monitoring_reports[0];
    assert_eq!(q.qfi, 5);
    let m = q.qos_monitoring_measurement;
    assert_eq!(
        (m.downlink_ms, m.uplink_ms, m.round_trip_ms),
        (Some(40), Some(5), Some(46))
    );

    // Kept across a restart: the restored node monitors the same flows.
    let header = state_header(&n);
    let state = StateDir::new(&dir);
    let mut journal = state.write_snapshot(&header, n.save_all()).unwrap();
    let mut m = empty_modification();
    m.remove_srrs = vec![msg::RemoveSrr {
        srr_id: 1,
        other: vec![],
    }];
    let r = modify(&mut n, SMF, seid, next_seq(), &m, t0);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    assert_eq!(n.qos_flows(), 1);
    let mut bad = empty_modification();
    bad.remove_srrs = vec![msg::RemoveSrr {
        srr_id: 1,
        other: vec![],
    }];
    let r = modify(&mut n, SMF, seid, next_seq(), &bad, t0);
    assert_eq!(r.cause, CauseValue::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(r.offending_ie, Some(types::REMOVE_SRR));
    journal.append(&n.take_changes()).unwrap();
    let saved = state.load("t").unwrap().unwrap();
    let mut restored = node();
    restored
        .restore(&saved, |_, _| upf::report::Counted::Unknown, t0)
        .unwrap();
    assert_restored_as(&restored, &n);
    assert_eq!(restored.qos_flows(), 1);
    std::fs::remove_dir_all(&dir).unwrap();

    // Released: SRR 2 (SESRL) reports the answers so far in the Deletion Response.
    assert!(n.qos_answer(teid, 5, ms(10, 2, 13), t0).is_empty());
    let r = delete(&mut n, SMF, seid, next_seq(), t0);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED);
    assert_eq!(r.session_reports.len(), 1, "{r:?}");
    assert_eq!(r.session_reports[0].srr_id, 2);
    let m = r.session_reports[0].qos_monitoring_reports[0].qos_monitoring_measurement;
    assert_eq!(m.downlink_ms, Some(30), "the mean of 30, 50 and 10");
    assert_eq!(n.qos_flows(), 0);
}

/// GTP-U path QoS monitoring through N4 (clause 5.24.3): the controls of an Association
/// Setup Request are kept per association (and replaced by an Update's), kept in the
/// state across a restart; a GTP-U Path QoS Report goes to the association's CP
/// function in a Node Report Request (GPQR), and its response is taken as such.
#[test]
fn gtpu_path_qos_controls_are_kept_and_reports_go_in_node_reports() {
    use pfcp::ie::{gtpu_path_interface_type as iface, qos_report_trigger as trig};
    use upf::state::StateDir;
    let dir = std::env::temp_dir().join(format!("upf-n4-gpqm-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let control = |period: u32| msg::GtpuPathQosControlInformation {
        remote_gtpu_peers: vec![],
        gtpu_path_interface_type: Some(Flags::from_bits(&[iface::N3], 1)),
        qos_report_trigger: Some(Flags::from_bits(&[trig::PER], 1)),
        transport_level_marking: None,
        measurement_period: Some(period),
        average_packet_delay: None,
        minimum_packet_delay: None,
        maximum_packet_delay: None,
        timer: None,
        other: vec![],
    };
    let mut n = node();
    let t0 = Instant::now();
    n.track_changes();
    let smf = NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4));
    let r = msg::AssociationSetupRequest {
        cp_function_features: Some(Flags(vec![0])),
        gtpu_path_qos_control_information: vec![control(5)],
        ..msg::AssociationSetupRequest::new(smf.clone(), 7)
    };
    let m = ask(
        &mut n,
        SMF,
        msg::emit(&HeaderRepr::node(0, next_seq()), &r),
        t0,
    );
    assert!(matches!(m, Msg::AssociationSetupResponse(_)));
    let (g1, c) = n.path_qos_controls();
    assert_eq!(c, vec![(smf.clone(), vec![control(5)])]);

    let header = state_header(&n);
    let state = StateDir::new(&dir);
    let mut journal = state.write_snapshot(&header, n.save_all()).unwrap();
    let u = msg::AssociationUpdateRequest {
        node_id: smf.clone(),
        up_function_features: None,
        cp_function_features: None,
        user_plane_ip_resource_information: vec![],
        pfcp_association_release_request: None,
        graceful_release_period: None,
        pfcpau_req_flags: None,
        alternative_smf_ip_addresses: vec![],
        smf_set_id: None,
        ue_ip_address_pool_information: vec![],
        gtpu_path_qos_control_information: vec![control(9)],
        other: vec![],
    };
    let m = ask(
        &mut n,
        SMF,
        msg::emit(&HeaderRepr::node(0, next_seq()), &u),
        t0,
    );
    assert!(
        matches!(m, Msg::AssociationUpdateResponse(ref r) if r.cause == CauseValue::REQUEST_ACCEPTED),
        "{m:?}"
    );
    let (g2, c) = n.path_qos_controls();
    assert!(g2 > g1);
    assert_eq!(c[0].1, vec![control(9)]);
    journal.append(&n.take_changes()).unwrap();
    let saved = state.load("t").unwrap().unwrap();
    let mut restored = node();
    restored
        .restore(&saved, |_, _| upf::report::Counted::Unknown, t0)
        .unwrap();
    assert_eq!(restored.path_qos_controls().1, c, "kept across a restart");
    std::fs::remove_dir_all(&dir).unwrap();

    let report = msg::GtpuPathQosReport {
        remote_gtpu_peer: pfcp::ie::RemoteGtpuPeer {
            spare: 0,
            ipv4: Some(Ipv4Addr::new(10, 10, 0, 1)),
            ipv6: None,
            destination_interface: None,
            network_instance: None,
        },
        gtpu_path_interface_type: None,
        qos_report_trigger: Flags::from_bits(&[trig::PER], 1),
        time_stamp: 3_900_000_100,
        start_time: Some(3_900_000_091),
        qos_information: vec![msg::QosInformationInGtpuPathQosReport {
            average_packet_delay: 12,
            minimum_packet_delay: Some(10),
            maximum_packet_delay: Some(15),
            transport_level_marking: None,
            other: vec![],
        }],
        other: vec![],
    };
    let out = n.send_path_qos_reports(&smf, vec![report.clone()], t0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to, addr(SMF));
    let (h, m) = Msg::parse(&out[0].data).unwrap();
    let Msg::NodeReportRequest(nr) = m else {
        panic!("not a Node Report Request: {m:?}");
    };
    assert!(nr.node_report_type.get(pfcp::ie::node_report_type::GPQR));
    assert_eq!(nr.gtpu_path_qos_reports, vec![report]);
    // The response closes it: nothing retransmitted later.
    let rsp = msg::NodeReportResponse {
        node_id: smf,
        cause: CauseValue::REQUEST_ACCEPTED,
        offending_ie: None,
        other: vec![],
    };
    let out = n.on_datagram(
        addr(SMF),
        &msg::emit(&HeaderRepr::node(0, h.sequence), &rsp),
        t0,
    );
    assert!(out.is_empty(), "{out:?}");
    let later = n.on_timer(t0 + Duration::from_secs(3));
    assert!(
        later.iter().all(|o| !matches!(
            Msg::parse(&o.data).map(|x| x.1),
            Ok(Msg::NodeReportRequest(_))
        )),
        "retransmitted after its response"
    );
}
