//! N4 with control planes as they really behave (docs/interop.md): each test feeds upfd's
//! N4 node the octets a particular SMF sends (pfcp_samples::quirks, written by hand, not
//! by our codec), with the reference model as the data path so that a kept session is
//! seen to keep forwarding. Each behaviour once as the tolerant default and once with
//! `strict`, which refuses or acts as TS 29.244 / TS 23.527 read.

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use pfcp::ie::{CauseValue, Flags, NodeId};
use pfcp::msg::Msg;
use pfcp_samples::quirks::{self, legacy, oai};
use upf::alloc::{TeidAllocator, UeIpPools};
use upf::fastpath::{Config, Egress};
use upf::model::{Model, Verdict};
use upf::n4::{Event, N4Config, N4};
use upf::procedures::{GtpuAddresses, Limits, Resources};
use upf::sessions::Sessions;

const N3: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 7);
const GNB: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 1);
const SMF_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 4);
const UE: Ipv4Addr = Ipv4Addr::new(10, 45, 0, 2);
const T0: u32 = 3_950_000_000;

fn at(port: u16) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(SMF_IP), port)
}

fn model_config() -> Config {
    let mut c = Config {
        local: vec![IpAddr::V4(N3)],
        n3_v4: Some(N3),
        ..Default::default()
    };
    let out = |ifindex| Egress {
        ifindex,
        mtu: 1500,
        smac: [2, 0, 0, 0, 0, 1],
        dmac: [2, 0, 0, 0, 0, 2],
    };
    c.neigh.insert(IpAddr::V4(GNB), out(3));
    c.neigh.insert(IpAddr::V4(Ipv4Addr::UNSPECIFIED), out(6));
    v6_model_config(&mut c);
    c
}

/// An N4 node on a shared reference model; `edit` changes its configuration, `n3_v6`
/// gives it an IPv6 N3 address (and no IPv4 one).
fn node(edit: impl FnOnce(&mut N4Config), n3_v6: bool) -> (N4, Rc<RefCell<Model>>) {
    node_with(edit, |_| {}, n3_v6)
}

/// The same; `res` changes its resources (addresses, known Network Instances).
fn node_with(
    edit: impl FnOnce(&mut N4Config),
    res_edit: impl FnOnce(&mut Resources),
    n3_v6: bool,
) -> (N4, Rc<RefCell<Model>>) {
    let model = Rc::new(RefCell::new(Model::new(1024, model_config())));
    let mut pools = UeIpPools::default();
    pools.add("internet", "10.45.0.0/24".parse().unwrap());
    pools.add("internet", "2001:db8:45::/48".parse().unwrap());
    let gtpu = if n3_v6 {
        GtpuAddresses {
            access_v6: Some("2001:db8:10::7".parse().unwrap()),
            ..Default::default()
        }
    } else {
        GtpuAddresses {
            access_v4: Some(N3),
            ..Default::default()
        }
    };
    let res = Resources::new(
        TeidAllocator::new(1, 0xffff_ffff),
        pools,
        gtpu,
        Limits::default(),
    );
    let mut cfg = N4Config {
        node_id: NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 7)),
        addr: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7)),
        recovery_time_stamp: 3_900_000_000,
        features: Flags::from_bits(&[pfcp::ie::up_function_features::FTUP], 2),
        allowed_peers: vec![],
        smf_peers: vec![],
        heartbeat_interval: Duration::from_secs(10),
        t1: Duration::from_secs(3),
        n1: 3,
        cache_ttl: Duration::from_secs(15),
        cache_max: 1000,
        graceful_release_period: Duration::from_secs(10),
        strict: false,
    };
    edit(&mut cfg);
    let mut res = res;
    res.strict = cfg.strict;
    res_edit(&mut res);
    let sessions = Sessions::new(res, Box::new(model.clone()), 1000);
    (N4::new(cfg, sessions), model)
}

/// Send `data` from `from`; the one response, parsed.
fn ask(n: &mut N4, from: SocketAddr, data: &[u8], now: Instant) -> Msg {
    let out = n.on_datagram(from, data, now);
    assert_eq!(out.len(), 1, "one response");
    assert_eq!(out[0].to, from, "the response goes back to the sender");
    Msg::parse(&out[0].data)
        .expect("a response upfd can parse")
        .1
}

/// OAI's association (from 8805), session (uplink from `session_port`, then the
/// downlink): the UP SEID.
fn oai_session(n: &mut N4, session_port: u16, now: Instant) -> u64 {
    oai_session_with(n, session_port, now, |_| {})
}

/// The same; `edit` changes the Session Establishment Request's octets first.
fn oai_session_with(
    n: &mut N4,
    session_port: u16,
    now: Instant,
    edit: impl FnOnce(&mut Vec<u8>),
) -> u64 {
    let mut est = oai::session_establishment(2, SMF_IP, 0x51, UE);
    edit(&mut est);
    match ask(
        n,
        at(8805),
        &oai::association_setup_request(1, SMF_IP, T0),
        now,
    ) {
        Msg::AssociationSetupResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED),
        m => panic!("{m:?}"),
    }
    let seid = match ask(n, at(session_port), &est, now) {
        Msg::SessionEstablishmentResponse(r) => {
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
            r.up_fseid.unwrap().seid
        }
        m => panic!("{m:?}"),
    };
    match ask(
        n,
        at(session_port),
        &oai::session_modification_downlink(3, seid, UE, GNB, 0x77),
        now,
    ) {
        Msg::SessionModificationResponse(r) => {
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}")
        }
        m => panic!("{m:?}"),
    }
    seid
}

/// An Ethernet frame around `ip` (IPv4 or IPv6 by its version nibble).
fn eth(ip: Vec<u8>) -> Vec<u8> {
    let ethertype = if ip.first().is_some_and(|b| b >> 4 == 6) {
        [0x86, 0xdd]
    } else {
        [0x08, 0x00]
    };
    let mut f = vec![2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 8];
    f.extend_from_slice(&ethertype);
    f.extend(ip);
    f
}

/// A frame with a G-PDU from `gnb` to our `n3`: TEID `teid`, T-PDU `inner`.
fn gpdu(gnb: IpAddr, n3: IpAddr, teid: u32, inner: Vec<u8>) -> Vec<u8> {
    let mut g = vec![0x30, 0xff];
    g.extend_from_slice(&(inner.len() as u16).to_be_bytes());
    g.extend_from_slice(&teid.to_be_bytes());
    g.extend(inner);
    eth(capture::ip_udp_packet(gnb, n3, 2152, 2152, &g))
}

/// A G-PDU from the gNB to `teid`: UDP from the UE to the data network.
fn uplink(teid: u32) -> Vec<u8> {
    let inner = capture::ip_udp_packet(
        IpAddr::V4(UE),
        IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)),
        4000,
        5000,
        &[7; 32],
    );
    gpdu(IpAddr::V4(GNB), IpAddr::V4(N3), teid, inner)
}

fn downlink() -> Vec<u8> {
    eth(capture::ip_udp_packet(
        IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)),
        IpAddr::V4(UE),
        5000,
        4000,
        &[9; 32],
    ))
}

/// Both directions of the session forward in the model.
fn forwards(model: &Rc<RefCell<Model>>, teid: u32, now_ns: u64) -> bool {
    let mut m = model.borrow_mut();
    let up = m.process_n3(&uplink(teid), now_ns);
    let down = m.process_n6(&downlink(), now_ns);
    matches!(up, Verdict::Redirect { ifindex: 6, .. })
        && matches!(down, Verdict::Redirect { ifindex: 3, .. })
}

fn teid_of(n: &N4, seid: u64) -> u32 {
    let s = n.sessions().get(seid).unwrap();
    s.pdrs.get(&1).unwrap().pdi.local_fteid.unwrap().teid
}

/// OAI's SMF for ten minutes of simulated time: a Heartbeat Request every 10 s with the
/// current time as Recovery Time Stamp (from 8805 and from an ephemeral port in turn),
/// our heartbeats answered with its constant one; the session keeps forwarding
/// throughout, and one event (and a counter per heartbeat) says what happened.
#[test]
fn growing_recovery_time_stamps_keep_the_sessions_for_ten_minutes() {
    let (mut n, model) = node(|_| {}, false);
    let t0 = Instant::now();
    let seid = oai_session(&mut n, 8805, t0);
    let teid = teid_of(&n, seid);
    n.take_events();
    let mut heartbeats = 0;
    for s in 1..=600u32 {
        let now = t0 + Duration::from_secs(u64::from(s));
        if s % 10 == 0 {
            let port = if s % 20 == 0 { 8805 } else { 40_000 + s as u16 };
            match ask(
                &mut n,
                at(port),
                &oai::heartbeat_request(1000 + s, T0 + s),
                now,
            ) {
                Msg::HeartbeatResponse(_) => heartbeats += 1,
                m => panic!("{m:?}"),
            }
        }
        for o in n.on_timer(now) {
            let (h, m) = Msg::parse(&o.data).unwrap();
            assert!(matches!(m, Msg::HeartbeatRequest(_)), "{m:?}");
            assert_eq!(o.to, at(8805));
            let r = oai::heartbeat_response(h.sequence, T0);
            assert!(n.on_datagram(o.to, &r, now).is_empty());
        }
        if s % 30 == 0 {
            assert!(
                forwards(&model, teid, u64::from(s) * 1_000_000_000),
                "forwarding at {s} s"
            );
        }
    }
    assert_eq!(n.sessions().len(), 1, "the session is kept");
    assert!(n.is_associated(&NodeId::Ipv4(SMF_IP)));
    let events = n.take_events();
    let changed: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, Event::RecoveryTimeStampChanged { .. }))
        .collect();
    assert_eq!(changed.len(), 1, "reported once: {events:?}");
    assert!(!events
        .iter()
        .any(|e| matches!(e, Event::PeerRestarted { .. } | Event::Deleted { .. })));
    assert_eq!(n.stats().recovery_time_stamp_changes, heartbeats);

    // A restart is what a new Association Setup says: that deletes the sessions.
    let later = t0 + Duration::from_secs(601);
    match ask(
        &mut n,
        at(8805),
        &oai::association_setup_request(5000, SMF_IP, T0 + 601),
        later,
    ) {
        Msg::AssociationSetupResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED),
        m => panic!("{m:?}"),
    }
    assert!(n.sessions().is_empty());
    assert!(!forwards(&model, teid, 601_000_000_000));
}

/// Strict: the first heartbeat with another Recovery Time Stamp is a restart. (The
/// session CHOOSEs an IPv4 F-TEID: strict refuses OAI's CH alone.)
#[test]
fn strict_takes_a_changed_heartbeat_time_stamp_as_a_restart() {
    let (mut n, model) = node(|c| c.strict = true, false);
    let t0 = Instant::now();
    let seid = oai_session_with(&mut n, 8805, t0, |m| {
        let ch_alone = [0x00, 0x15, 0x00, 0x01, 0x04];
        let at = m.windows(5).position(|w| w == ch_alone).unwrap();
        m[at + 4] = 0x05;
    });
    let teid = teid_of(&n, seid);
    assert!(forwards(&model, teid, 1));
    let now = t0 + Duration::from_secs(10);
    ask(&mut n, at(8805), &oai::heartbeat_request(9, T0 + 10), now);
    assert!(n.sessions().is_empty());
    assert!(n
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::PeerRestarted { sessions: 1, .. })));
    assert!(!forwards(&model, teid, 2));
}

/// OAI's SMF sends session requests from an ephemeral port: one peer with its 8805
/// (one Node ID). Our requests go where its Association Setup came from until it sends a
/// request from 8805, then to 8805.
#[test]
fn one_peer_on_two_ports_and_requests_to_8805() {
    let (mut n, _) = node(|_| {}, false);
    let t0 = Instant::now();
    match ask(
        &mut n,
        at(40_001),
        &oai::association_setup_request(1, SMF_IP, T0),
        t0,
    ) {
        Msg::AssociationSetupResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED),
        m => panic!("{m:?}"),
    }
    match ask(
        &mut n,
        at(40_002),
        &oai::session_establishment(2, SMF_IP, 1, UE),
        t0,
    ) {
        Msg::SessionEstablishmentResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED),
        m => panic!("{m:?}"),
    }
    let t1 = t0 + Duration::from_secs(10);
    let out = n.on_timer(t1);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to, at(40_001), "where its association came from");
    let seq = Msg::parse(&out[0].data).unwrap().0.sequence;
    n.on_datagram(at(40_001), &oai::heartbeat_response(seq, T0), t1);
    ask(&mut n, at(8805), &oai::heartbeat_request(3, T0), t1);
    let out = n.on_timer(t1 + Duration::from_secs(10));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to, at(8805), "to 8805 once it sent from there");
}

/// OAI's SMF associates (from 8805).
fn associate(n: &mut N4, now: Instant) {
    match ask(
        n,
        at(8805),
        &oai::association_setup_request(1, SMF_IP, T0),
        now,
    ) {
        Msg::AssociationSetupResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED),
        m => panic!("{m:?}"),
    }
}

fn establish(n: &mut N4, data: &[u8], now: Instant) -> pfcp::msg::SessionEstablishmentResponse {
    match ask(n, at(8805), data, now) {
        Msg::SessionEstablishmentResponse(r) => r,
        m => panic!("{m:?}"),
    }
}

/// F-TEID CH alone (OAI): an IPv4 F-TEID where we have an IPv4 N3 address, else IPv6;
/// strict: Cause 69 (Mandatory IE incorrect) naming the F-TEID.
#[test]
fn choose_without_an_address_family() {
    for v6 in [false, true] {
        let (mut n, _) = node(|_| {}, v6);
        let t0 = Instant::now();
        associate(&mut n, t0);
        let r = establish(&mut n, &oai::session_establishment(2, SMF_IP, 1, UE), t0);
        assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
        let f = r.created_pdrs[0].local_fteid.unwrap();
        assert!(f.teid.is_some_and(|t| t != 0));
        if v6 {
            assert_eq!(
                (f.ipv4, f.ipv6),
                (None, Some("2001:db8:10::7".parse().unwrap()))
            );
        } else {
            assert_eq!((f.ipv4, f.ipv6), (Some(N3), None));
        }
    }
    let (mut n, _) = node(|c| c.strict = true, false);
    let t0 = Instant::now();
    associate(&mut n, t0);
    let r = establish(&mut n, &oai::session_establishment(2, SMF_IP, 1, UE), t0);
    assert_eq!(r.cause, CauseValue::MANDATORY_IE_INCORRECT);
    assert_eq!(r.offending_ie, Some(pfcp::ie::types::FTEID));
    assert!(n.sessions().is_empty());
}

/// UE IP Address with V4 (V6) and the unspecified address, no CHV4 (CHV6): allocated
/// from the pool and reported in the Created PDR, a different one for each session;
/// strict: Cause 69 naming the UE IP Address.
#[test]
fn unspecified_ue_address_is_an_allocation() {
    let (mut n, _) = node(|_| {}, false);
    let t0 = Instant::now();
    associate(&mut n, t0);
    let mut seen: Vec<IpAddr> = Vec::new();
    for (i, v6) in [false, false, true, true].into_iter().enumerate() {
        let m =
            legacy::session_establishment(10 + i as u32, SMF_IP, 100 + i as u64, "internet", v6);
        let r = establish(&mut n, &m, t0);
        assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
        let dl = r
            .created_pdrs
            .iter()
            .find(|c| c.pdr_id == 2)
            .expect("Created PDR 2");
        let ue = dl.ue_ip_address[0];
        assert!(ue.destination);
        let a: IpAddr = match v6 {
            false => IpAddr::V4(ue.ipv4.unwrap()),
            true => IpAddr::V6(ue.ipv6.unwrap()),
        };
        assert!(!a.is_unspecified());
        assert!(match a {
            IpAddr::V4(a) => "10.45.0.0/24"
                .parse::<ipnet::Ipv4Net>()
                .unwrap()
                .contains(&a),
            IpAddr::V6(a) => "2001:db8:45::/48"
                .parse::<ipnet::Ipv6Net>()
                .unwrap()
                .contains(&a),
        });
        assert!(!seen.contains(&a), "{a} handed out twice");
        seen.push(a);
    }
    assert_eq!(n.sessions().len(), 4);
    let (mut n, _) = node(|c| c.strict = true, false);
    associate(&mut n, t0);
    let r = establish(
        &mut n,
        &legacy::session_establishment(2, SMF_IP, 1, "internet", true),
        t0,
    );
    assert_eq!(r.cause, CauseValue::MANDATORY_IE_INCORRECT);
    assert_eq!(r.offending_ie, Some(pfcp::ie::types::UE_IP_ADDRESS));
}

/// Session Deletion of OAI's session releases it (the quirk builders' deletion).
#[test]
fn oai_session_deletion() {
    let (mut n, model) = node(|_| {}, false);
    let t0 = Instant::now();
    let seid = oai_session(&mut n, 40_123, t0);
    let teid = teid_of(&n, seid);
    assert!(forwards(&model, teid, 1));
    match ask(&mut n, at(40_123), &quirks::session_deletion(9, seid), t0) {
        Msg::SessionDeletionResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED),
        m => panic!("{m:?}"),
    }
    assert!(!forwards(&model, teid, 2));
    let _ = Ipv6Addr::LOCALHOST;
}

/// A Session Establishment Request whose uplink PDR CHOOSEs an IPv4 F-TEID in Network
/// Instance `ni` (plain text), forwarding to the core.
fn establishment_in(seq: u32, cp_seid: u64, ni: &str) -> Vec<u8> {
    use pfcp::ie::types as t;
    use quirks::{group, ie};
    let mut node = vec![0];
    node.extend_from_slice(&SMF_IP.octets());
    let mut fseid = vec![0x02];
    fseid.extend_from_slice(&cp_seid.to_be_bytes());
    fseid.extend_from_slice(&SMF_IP.octets());
    let pdr = group(
        t::CREATE_PDR,
        &[
            ie(t::PDR_ID, &[0, 1]),
            ie(t::PRECEDENCE, &[0, 0, 0, 10]),
            group(
                t::PDI,
                &[
                    ie(t::SOURCE_INTERFACE, &[0]),
                    ie(t::FTEID, &[0x05]),
                    ie(t::NETWORK_INSTANCE, ni.as_bytes()),
                ],
            ),
            ie(t::FAR_ID, &[0, 0, 0, 1]),
        ],
    );
    let far = group(
        t::CREATE_FAR,
        &[
            ie(t::FAR_ID, &[0, 0, 0, 1]),
            ie(t::APPLY_ACTION, &[0x02]),
            group(
                t::FORWARDING_PARAMETERS,
                &[ie(t::DESTINATION_INTERFACE, &[1])],
            ),
        ],
    );
    quirks::session_message(
        pfcp::message::message_type::SESSION_ESTABLISHMENT_REQUEST,
        0,
        seq,
        &[ie(t::NODE_ID, &node), ie(t::FSEID, &fseid), pdr, far],
    )
}

const ACCESS2: Ipv4Addr = Ipv4Addr::new(10, 11, 0, 7);

fn with_access2(r: &mut Resources) {
    r.gtpu.network_instances = vec![upf::fastpath::NiAddresses {
        name: "access2".into(),
        n3_v4: Some(ACCESS2),
        ..Default::default()
    }];
    r.network_instances = vec!["access2".into(), "internet".into()];
}

/// A CHOOSE F-TEID in a PDI of Network Instance "access2" comes from that instance's
/// address; in another instance (or none), from N3's. A name the configuration does not
/// know is accepted and reported once (counted each time); strict refuses it with the
/// PDR's ID.
#[test]
fn gtpu_addresses_by_network_instance() {
    let (mut n, _) = node_with(|_| {}, with_access2, false);
    let t0 = Instant::now();
    associate(&mut n, t0);
    for (i, (ni, want)) in [("access2", ACCESS2), ("internet", N3), ("access", N3)]
        .into_iter()
        .enumerate()
    {
        let r = establish(
            &mut n,
            &establishment_in(10 + i as u32, 100 + i as u64, ni),
            t0,
        );
        assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{ni}: {r:?}");
        assert_eq!(
            r.created_pdrs[0].local_fteid.unwrap().ipv4,
            Some(want),
            "{ni}"
        );
    }
    let unknown: Vec<_> = n
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::UnknownNetworkInstance { name, .. } => Some(name),
            _ => None,
        })
        .collect();
    assert_eq!(unknown, ["access"]);
    establish(&mut n, &establishment_in(20, 200, "access"), t0);
    assert!(!n
        .take_events()
        .iter()
        .any(|e| matches!(e, Event::UnknownNetworkInstance { .. })));
    assert_eq!(n.stats().unknown_network_instances, 2);

    let (mut n, _) = node_with(|c| c.strict = true, with_access2, false);
    associate(&mut n, t0);
    let r = establish(&mut n, &establishment_in(2, 1, "access"), t0);
    assert_eq!(r.cause, CauseValue::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(
        r.failed_rule_id,
        Some(pfcp::ie::FailedRuleId {
            rule_type: pfcp::ie::FailedRuleId::PDR,
            id: 1
        })
    );
    let r = establish(&mut n, &establishment_in(3, 2, "access2"), t0);
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED);
}

const N3_V6: &str = "2001:db8:10::7";
const GNB_V6: &str = "2001:db8:10::1";
const UE_V6: &str = "2001:db8:45::2";
const SMF_V6: &str = "2001:db8:4::4";

/// The predefined rules of the IMS test: "ims-gate" adds QER 1 (uplink open, downlink
/// closed) and URR 1 (volume); "ims-block" a FAR that drops.
fn ims_predefined(r: &mut Resources) {
    use upf::predefined::{Predefined, PredefinedRule};
    use upf::rules::{ApplyAction, Far, Qer, Urr};
    let urr = Urr::new(&pfcp_samples_create_urr());
    r.predefined = Predefined::new(
        vec![
            PredefinedRule {
                name: "ims-gate".into(),
                sdf_filters: vec![],
                far: None,
                qers: vec![1],
                urrs: vec![1],
            },
            PredefinedRule {
                name: "ims-block".into(),
                sdf_filters: vec![],
                far: Some(1),
                qers: vec![],
                urrs: vec![],
            },
        ],
        vec![Far {
            id: 1,
            action: ApplyAction {
                drop: true,
                ..Default::default()
            },
            forwarding: None,
            bar_id: None,
        }],
        vec![Qer {
            id: 1,
            gate_ul_open: true,
            gate_dl_open: false,
            ..Qer::default()
        }],
        vec![urr],
    )
    .unwrap();
}

/// A URR measuring volume with no trigger.
fn pfcp_samples_create_urr() -> pfcp::msg::CreateUrr {
    let m = pfcp_samples::quirks::session_message(
        pfcp::message::message_type::SESSION_ESTABLISHMENT_REQUEST,
        0,
        1,
        &[quirks::group(
            pfcp::ie::types::CREATE_URR,
            &[
                quirks::ie(pfcp::ie::types::URR_ID, &[0, 0, 0, 1]),
                quirks::ie(pfcp::ie::types::MEASUREMENT_METHOD, &[0x02]),
                quirks::ie(pfcp::ie::types::REPORTING_TRIGGERS, &[0, 0, 0]),
            ],
        )],
    );
    let g = pfcp::Message::parse(&m).unwrap();
    let pfcp::Ie::CreateUrr(children) = &g.ies[0] else {
        panic!()
    };
    let mut body = Vec::new();
    pfcp::ie::encode_ies(children, &mut body);
    let raw = pfcp::ie::RawIe {
        ie_type: pfcp::ie::types::CREATE_URR,
        enterprise_id: None,
        value: &body,
        offset: 0,
        value_offset: 4,
    };
    <pfcp::msg::CreateUrr as pfcp::msg::Field>::decode_field(&raw, 0).unwrap()
}

fn v6(s: &str) -> Ipv6Addr {
    s.parse().unwrap()
}

/// The model with an IPv6 N3 address and neighbours for the gNB and the data network.
fn v6_model_config(c: &mut Config) {
    c.local.push(IpAddr::V6(v6(N3_V6)));
    c.n3_v6 = Some(v6(N3_V6));
    let out = |ifindex| Egress {
        ifindex,
        mtu: 1500,
        smac: [2, 0, 0, 0, 0, 1],
        dmac: [2, 0, 0, 0, 0, 2],
    };
    c.neigh.insert(IpAddr::V6(v6(GNB_V6)), out(3));
    c.neigh.insert(IpAddr::V6(Ipv6Addr::UNSPECIFIED), out(6));
}

/// Uplink (G-PDU over IPv6 to `teid`) and downlink through the model: what each did.
fn ims_traffic(model: &Rc<RefCell<Model>>, teid: u32, now: u64) -> (Verdict, Verdict) {
    let inner = capture::ip_udp_packet(
        IpAddr::V6(v6(UE_V6)),
        IpAddr::V6(v6("2001:db8:99::1")),
        5060,
        5060,
        &[1; 40],
    );
    let up = gpdu(IpAddr::V6(v6(GNB_V6)), IpAddr::V6(v6(N3_V6)), teid, inner);
    let down = eth(capture::ip_udp_packet(
        IpAddr::V6(v6("2001:db8:99::1")),
        IpAddr::V6(v6(UE_V6)),
        5060,
        5060,
        &[2; 40],
    ));
    let mut m = model.borrow_mut();
    (m.process_n3(&up, now), m.process_n6(&down, now))
}

/// A vendor SMF over IPv6 with IMS bearers: three QERs and three URRs on each PDR, the
/// spare bit of the UE IP Address flags set, and Activate Predefined Rules "ims-gate"
/// (a fourth QER, closed downlink, and a fourth URR). All enforced: the downlink is held
/// by the predefined gate until Update PDR deactivates it, and the predefined URR's
/// usage comes in that response under its predefined ID. An unknown name is Cause 80.
#[test]
fn ims_bearers_with_three_qers_three_urrs_and_a_predefined_rule() {
    use pfcp_samples::quirks::ims;
    let (mut n, model) = node_with(
        |_| {},
        |r| {
            ims_predefined(r);
            r.gtpu.access_v6 = Some(v6(N3_V6));
        },
        false,
    );
    let t0 = Instant::now();
    let smf = SocketAddr::new(IpAddr::V6(v6(SMF_V6)), 8805);
    let setup = {
        use pfcp::ie::types as t;
        let mut node = vec![1];
        node.extend_from_slice(&v6(SMF_V6).octets());
        quirks::node_message(
            pfcp::message::message_type::ASSOCIATION_SETUP_REQUEST,
            1,
            &[
                quirks::ie(t::NODE_ID, &node),
                quirks::ie(t::RECOVERY_TIME_STAMP, &T0.to_be_bytes()),
            ],
        )
    };
    ask(&mut n, smf, &setup, t0);
    let est = ims::session_establishment(
        2,
        v6(SMF_V6),
        0x99,
        v6(UE_V6),
        v6(GNB_V6),
        0x1234,
        &["ims-gate"],
    );
    let r = match ask(&mut n, smf, &est, t0) {
        Msg::SessionEstablishmentResponse(r) => r,
        m => panic!("{m:?}"),
    };
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    let seid = r.up_fseid.unwrap().seid;
    let f = r.created_pdrs[0].local_fteid.unwrap();
    assert_eq!(f.ipv6, Some(v6(N3_V6)));
    let teid = f.teid.unwrap();
    {
        let s = n.sessions().get(seid).unwrap();
        let pdr = s.pdrs.get(&1).unwrap();
        let pre = upf::predefined::PREDEFINED;
        assert_eq!(pdr.qer_ids.as_slice(), [1, 2, 3, pre | 1]);
        assert_eq!(pdr.urr_ids.as_slice(), [1, 2, 3, pre | 1]);
        assert!(s.qers.contains_key(&(pre | 1)) && s.urrs.contains_key(&(pre | 1)));
    }
    let (up, down) = ims_traffic(&model, teid, 1_000_000_000);
    assert!(matches!(up, Verdict::Redirect { ifindex: 6, .. }), "{up:?}");
    assert_eq!(
        down,
        Verdict::Drop(upf::abi::DropReason::GateClosed),
        "the predefined QER's gate"
    );

    // Deactivated on the downlink PDR: its QER and URR leave that PDR (the uplink PDR
    // keeps them, so the session keeps the instances).
    match ask(&mut n, smf, &ims::deactivate(3, seid, 2, "ims-gate"), t0) {
        Msg::SessionModificationResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED),
        m => panic!("{m:?}"),
    }
    let (_, down) = ims_traffic(&model, teid, 2_000_000_000);
    assert!(
        matches!(down, Verdict::Redirect { ifindex: 3, .. }),
        "{down:?}"
    );
    // And on the uplink PDR: the instances go, the URR's final usage in the response.
    let r = match ask(&mut n, smf, &ims::deactivate(4, seid, 1, "ims-gate"), t0) {
        Msg::SessionModificationResponse(r) => r,
        m => panic!("{m:?}"),
    };
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED);
    let pre = upf::predefined::PREDEFINED;
    let rep = r
        .usage_reports
        .iter()
        .find(|u| u.urr_id == pre | 1)
        .expect("the predefined URR's final report");
    let v = rep.volume_measurement.unwrap();
    assert_eq!(v.uplink_packets, Some(2), "two uplink packets counted");
    assert_eq!(v.downlink_packets, Some(0), "the gate dropped the downlink");
    let s = n.sessions().get(seid).unwrap();
    assert!(!s.qers.contains_key(&(pre | 1)) && !s.urrs.contains_key(&(pre | 1)));
    assert_eq!(s.pdrs.get(&1).unwrap().qer_ids.as_slice(), [1, 2, 3]);

    // Activated again by Update PDR; an unknown name refuses the request whole.
    match ask(&mut n, smf, &ims::activate(5, seid, 2, "ims-block"), t0) {
        Msg::SessionModificationResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED),
        m => panic!("{m:?}"),
    }
    assert_eq!(
        n.sessions().get(seid).unwrap().pdrs.get(&2).unwrap().far_id,
        Some(2),
        "the PDR's own FAR stays: a predefined FAR only where the PDR has none"
    );
    match ask(&mut n, smf, &ims::activate(6, seid, 1, "no-such-rule"), t0) {
        Msg::SessionModificationResponse(r) => {
            assert_eq!(r.cause, CauseValue::UNKNOWN_PREDEFINED_RULE);
            assert_eq!(
                r.offending_ie,
                Some(pfcp::ie::types::ACTIVATE_PREDEFINED_RULES)
            );
        }
        m => panic!("{m:?}"),
    }
}

/// The one (kind, detail) event of `what` among the node's events, if any.
fn tolerated_events(n: &mut N4) -> Vec<(upf::procedures::Tolerated, String)> {
    n.take_events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Tolerated { what, detail, .. } => Some((what, detail)),
            _ => None,
        })
        .collect()
}

fn tolerated_count(n: &N4, what: upf::procedures::Tolerated) -> u64 {
    n.stats().tolerated.get(&what).copied().unwrap_or(0)
}

fn failed_rule(rule_type: u8, id: u32) -> Option<pfcp::ie::FailedRuleId> {
    Some(pfcp::ie::FailedRuleId { rule_type, id })
}

/// free5GC's SMF: downlink PDR 3 (precedence 32, before the default PDR 2) has the SDF
/// filter `permit in ...`. Accepted, and it matches no packet, as in free5GC's UPF
/// (gtp5g compares a filter's direction with OUT): a downlink packet from the filter's
/// network goes by PDR 2 and URR 3 counts nothing. Counted per request, said once per
/// peer. Strict: Cause 73 naming PDR 3.
#[test]
fn sdf_filter_with_direction_in_matches_no_packet() {
    use pfcp_samples::quirks::free5gc;
    use upf::procedures::Tolerated;
    let (mut n, model) = node(|_| {}, false);
    let t0 = Instant::now();
    associate(&mut n, t0);
    let r = establish(
        &mut n,
        &free5gc::session_establishment(2, SMF_IP, 0x21, UE, GNB, 0x77, false),
        t0,
    );
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    let seid = r.up_fseid.unwrap().seid;
    assert!(forwards(&model, teid_of(&n, seid), 1));
    let from_filtered_net = eth(capture::ip_udp_packet(
        IpAddr::V4(Ipv4Addr::new(192, 0, 2, 9)),
        IpAddr::V4(UE),
        5000,
        4000,
        &[3; 20],
    ));
    let v = model.borrow_mut().process_n6(&from_filtered_net, 2);
    assert!(matches!(v, Verdict::Redirect { ifindex: 3, .. }), "{v:?}");
    use upf::fastpath::FastPath;
    let u3 = model.borrow().usage(seid, 3);
    assert_eq!(
        (u3.ul_packets, u3.dl_packets),
        (0, 0),
        "PDR 3 matched nothing"
    );
    assert_eq!(
        tolerated_events(&mut n),
        vec![(Tolerated::SdfDirectionIn, "PDR 3".to_string())]
    );
    // A second session: counted again, not said again.
    let r = establish(
        &mut n,
        &free5gc::session_establishment(
            3,
            SMF_IP,
            0x22,
            Ipv4Addr::new(10, 45, 0, 3),
            GNB,
            0x78,
            false,
        ),
        t0,
    );
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    assert_eq!(tolerated_events(&mut n), vec![]);
    assert_eq!(tolerated_count(&n, Tolerated::SdfDirectionIn), 2);

    let (mut n, _) = node(|c| c.strict = true, false);
    associate(&mut n, t0);
    let r = establish(
        &mut n,
        &free5gc::session_establishment(2, SMF_IP, 0x21, UE, GNB, 0x77, false),
        t0,
    );
    assert_eq!(r.cause, CauseValue::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(
        r.failed_rule_id,
        failed_rule(pfcp::ie::FailedRuleId::PDR, 3)
    );
    assert!(n.sessions().is_empty());
    assert_eq!(tolerated_count(&n, Tolerated::SdfDirectionIn), 0);
}

/// An early free5GC SMF: FAR 1 of the uplink PDR is FORW without Forwarding Parameters.
/// Accepted; as in free5GC's UPF (gtp5g decapsulates a G-PDU whose FAR has no
/// parameters and routes it), uplink packets leave for their destination. A later
/// Update FAR can still bring parameters. Strict: Cause 67 (Conditional IE missing),
/// Offending IE Forwarding Parameters.
#[test]
fn forw_without_forwarding_parameters_forwards_the_uplink() {
    use pfcp_samples::quirks::free5gc;
    use upf::procedures::Tolerated;
    let (mut n, model) = node(|_| {}, false);
    let t0 = Instant::now();
    associate(&mut n, t0);
    let r = establish(
        &mut n,
        &free5gc::session_establishment(2, SMF_IP, 0x21, UE, GNB, 0x77, true),
        t0,
    );
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    let seid = r.up_fseid.unwrap().seid;
    assert!(n
        .sessions()
        .get(seid)
        .unwrap()
        .fars
        .get(&1)
        .unwrap()
        .forwarding
        .is_none());
    assert!(forwards(&model, teid_of(&n, seid), 1), "both directions");
    let events = tolerated_events(&mut n);
    assert!(
        events.contains(&(Tolerated::ForwWithoutParameters, "FAR 1".to_string())),
        "{events:?}"
    );
    assert_eq!(tolerated_count(&n, Tolerated::ForwWithoutParameters), 1);

    let (mut n, _) = node(|c| c.strict = true, false);
    associate(&mut n, t0);
    let mut est = free5gc::session_establishment(2, SMF_IP, 0x21, UE, GNB, 0x77, true);
    // Without the `in` filter's PDR, so that the FAR is what strict refuses.
    let pfcp::msg::Msg::SessionEstablishmentRequest(mut req) = Msg::parse(&est).unwrap().1 else {
        panic!()
    };
    req.create_pdrs.retain(|p| p.pdr_id != 3);
    req.create_urrs.clear();
    est = pfcp::msg::emit(
        &pfcp::HeaderRepr::session(
            pfcp::message::message_type::SESSION_ESTABLISHMENT_REQUEST,
            0,
            2,
        ),
        &req,
    );
    let r = establish(&mut n, &est, t0);
    assert_eq!(r.cause, CauseValue::CONDITIONAL_IE_MISSING, "{r:?}");
    assert_eq!(r.offending_ie, Some(pfcp::ie::types::FORWARDING_PARAMETERS));
    assert!(n.sessions().is_empty());
}

/// OAI's 4G SPGW-C sends Update FAR with Apply Action NOCP alone when the UE goes idle.
/// Accepted as BUFF and NOCP: the next downlink packet is buffered (OAI's SPGW-U
/// notifies and drops it; upfd keeps it for when the UE is back). Strict: Cause 73
/// naming FAR 2.
#[test]
fn apply_action_nocp_alone_buffers_with_notification() {
    use upf::procedures::Tolerated;
    let (mut n, model) = node(|_| {}, false);
    let t0 = Instant::now();
    let seid = oai_session(&mut n, 8805, t0);
    assert!(forwards(&model, teid_of(&n, seid), 1));
    match ask(&mut n, at(8805), &oai::update_far_nocp(4, seid, 2), t0) {
        Msg::SessionModificationResponse(r) => {
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}")
        }
        m => panic!("{m:?}"),
    }
    let a = n.sessions().get(seid).unwrap().fars.get(&2).unwrap().action;
    assert!(a.buff && a.nocp && !a.forw && !a.drop, "{a:?}");
    let v = model.borrow_mut().process_n6(&downlink(), 2);
    assert!(matches!(v, Verdict::Buffer(_)), "{v:?}");
    assert_eq!(
        tolerated_events(&mut n),
        vec![(Tolerated::NocpAlone, "FAR 2".to_string())]
    );

    let (mut n, model) = node(|c| c.strict = true, false);
    let seid = oai_session_strict(&mut n, t0);
    match ask(&mut n, at(8805), &oai::update_far_nocp(4, seid, 2), t0) {
        Msg::SessionModificationResponse(r) => {
            assert_eq!(r.cause, CauseValue::RULE_CREATION_MODIFICATION_FAILURE);
            assert_eq!(
                r.failed_rule_id,
                failed_rule(pfcp::ie::FailedRuleId::FAR, 2)
            );
        }
        m => panic!("{m:?}"),
    }
    let v = model.borrow_mut().process_n6(&downlink(), 2);
    assert!(
        matches!(v, Verdict::Redirect { ifindex: 3, .. }),
        "unchanged: {v:?}"
    );
}

/// OAI's session where strict accepts it: its F-TEID with an address family (strict
/// refuses CH alone), from 8805.
fn oai_session_strict(n: &mut N4, now: Instant) -> u64 {
    oai_session_with(n, 8805, now, |est| {
        // F-TEID IE (type 21, length 1, flags CH) -> length 1, flags CH | V4.
        let at = est
            .windows(5)
            .position(|w| w == [0x00, 0x15, 0x00, 0x01, 0x04])
            .expect("the CH-alone F-TEID");
        est[at + 4] = 0x05;
    })
}

/// OAI's SMF with an uplink classifier creates URR 0 and names URR 1 in its PDR.
/// Accepted (UPG-VPP accepts it): the dangling reference is dropped, URR 0 stays, the
/// session forwards; counted per request, said once per peer. Strict: Cause 73 naming
/// PDR 1, "refers to URR 1, which does not exist".
#[test]
fn a_pdr_naming_a_urr_that_was_not_created() {
    use upf::procedures::Tolerated;
    let (mut n, _) = node(|_| {}, false);
    let t0 = Instant::now();
    associate(&mut n, t0);
    for (k, ue) in [UE, Ipv4Addr::new(10, 45, 0, 3)].into_iter().enumerate() {
        let r = establish(
            &mut n,
            &oai::session_establishment_ulcl(2 + k as u32, SMF_IP, 0x31 + k as u64, ue),
            t0,
        );
        assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
        let s = n.sessions().get(r.up_fseid.unwrap().seid).unwrap();
        assert!(s.pdrs.get(&1).unwrap().urr_ids.is_empty());
        assert!(s.urrs.contains_key(&0));
    }
    assert_eq!(
        tolerated_events(&mut n),
        vec![(Tolerated::DanglingUrr, "PDR 1 names URR 1".to_string())]
    );
    assert_eq!(tolerated_count(&n, Tolerated::DanglingUrr), 2);

    let (mut n, _) = node(|c| c.strict = true, false);
    associate(&mut n, t0);
    let mut est = oai::session_establishment_ulcl(2, SMF_IP, 0x31, UE);
    let at = est
        .windows(5)
        .position(|w| w == [0x00, 0x15, 0x00, 0x01, 0x04])
        .unwrap();
    est[at + 4] = 0x05;
    let r = establish(&mut n, &est, t0);
    assert_eq!(r.cause, CauseValue::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(
        r.failed_rule_id,
        failed_rule(pfcp::ie::FailedRuleId::PDR, 1)
    );
    assert!(n.sessions().is_empty());
}

/// The vendor IMS SMF's association (Node ID IPv6).
fn ims_associate(n: &mut N4, smf: SocketAddr, t0: Instant) {
    use pfcp::ie::types as t;
    let mut node = vec![1];
    node.extend_from_slice(&v6(SMF_V6).octets());
    let setup = quirks::node_message(
        pfcp::message::message_type::ASSOCIATION_SETUP_REQUEST,
        1,
        &[
            quirks::ie(t::NODE_ID, &node),
            quirks::ie(t::RECOVERY_TIME_STAMP, &T0.to_be_bytes()),
        ],
    );
    match ask(n, smf, &setup, t0) {
        Msg::AssociationSetupResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED),
        m => panic!("{m:?}"),
    }
}

/// The vendor IMS SMF creates URRs 0x80010009-0x8001000b (bit 8 set) and names them
/// from its PDRs, with predefined rules configured. A Create defines a dynamic rule:
/// accepted, counted in those URRs, and the session's later Update FAR and deletion go
/// through (they failed with "FAR that does not exist" while the establishment was
/// refused). A Create with the ID of a configured predefined URR is refused whatever
/// the setting; strict refuses any ID with bit 8 set (clause 8.2.74's reading).
#[test]
fn rules_created_with_bit_8_set_are_dynamic() {
    use pfcp_samples::quirks::ims;
    use upf::procedures::Tolerated;
    let res = |r: &mut Resources| {
        ims_predefined(r);
        r.gtpu.access_v6 = Some(v6(N3_V6));
    };
    let smf = SocketAddr::new(IpAddr::V6(v6(SMF_V6)), 8805);
    let t0 = Instant::now();
    let est = |seq, urrs| {
        ims::session_establishment_with_urrs(
            seq,
            v6(SMF_V6),
            0x99,
            v6(UE_V6),
            v6(GNB_V6),
            0x1234,
            &[],
            urrs,
        )
    };
    let (mut n, model) = node_with(|_| {}, res, false);
    ims_associate(&mut n, smf, t0);
    let r = match ask(&mut n, smf, &est(2, ims::HIGH_URRS), t0) {
        Msg::SessionEstablishmentResponse(r) => r,
        m => panic!("{m:?}"),
    };
    assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
    let seid = r.up_fseid.unwrap().seid;
    let teid = r.created_pdrs[0].local_fteid.unwrap().teid.unwrap();
    {
        let s = n.sessions().get(seid).unwrap();
        assert_eq!(s.pdrs.get(&1).unwrap().urr_ids.as_slice(), ims::HIGH_URRS);
        assert!(ims::HIGH_URRS.iter().all(|u| s.urrs.contains_key(u)));
    }
    let (up, down) = ims_traffic(&model, teid, 1_000_000_000);
    assert!(matches!(up, Verdict::Redirect { ifindex: 6, .. }), "{up:?}");
    assert!(
        matches!(down, Verdict::Redirect { ifindex: 3, .. }),
        "{down:?}"
    );
    {
        use upf::fastpath::FastPath;
        let u = model.borrow().usage(seid, ims::HIGH_URRS[0]);
        assert_eq!((u.ul_packets, u.dl_packets), (1, 1));
    }
    let events = tolerated_events(&mut n);
    assert_eq!(
        events,
        vec![(
            Tolerated::PredefinedBitInCreate,
            "URR 0x80010009".to_string()
        )]
    );
    match ask(
        &mut n,
        smf,
        &ims::update_far_tunnel(3, seid, 2, v6(GNB_V6), 0x4321),
        t0,
    ) {
        Msg::SessionModificationResponse(r) => {
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}")
        }
        m => panic!("{m:?}"),
    }
    match ask(&mut n, smf, &quirks::session_deletion(4, seid), t0) {
        Msg::SessionDeletionResponse(r) => {
            assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED);
            let ids: Vec<u32> = r.usage_reports.iter().map(|u| u.urr_id).collect();
            assert!(ims::HIGH_URRS.iter().all(|u| ids.contains(u)), "{ids:?}");
        }
        m => panic!("{m:?}"),
    }

    // The ID of the configured predefined URR 1.
    let pre = upf::predefined::PREDEFINED;
    let r = match ask(&mut n, smf, &est(5, [1, 2, pre | 1]), t0) {
        Msg::SessionEstablishmentResponse(r) => r,
        m => panic!("{m:?}"),
    };
    assert_eq!(r.cause, CauseValue::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(
        r.failed_rule_id,
        failed_rule(pfcp::ie::FailedRuleId::URR, pre | 1)
    );

    let (mut n, _) = node_with(|c| c.strict = true, res, false);
    ims_associate(&mut n, smf, t0);
    let r = match ask(&mut n, smf, &est(2, ims::HIGH_URRS), t0) {
        Msg::SessionEstablishmentResponse(r) => r,
        m => panic!("{m:?}"),
    };
    assert_eq!(r.cause, CauseValue::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(
        r.failed_rule_id,
        failed_rule(pfcp::ie::FailedRuleId::URR, ims::HIGH_URRS[0])
    );
}

/// The refusals of a UE address nobody can give (issue 27, item 7): a network instance
/// whose pool has IPv4 only, asked for `::`; one with no pool at all, on a UPF without a
/// default pool; a full pool. Each is Cause 79 with a reason (the log line's) naming
/// the network instance and the IP version, as docs/configuration.md shows.
#[test]
fn a_ue_address_of_a_version_without_a_pool_names_both() {
    let reasons = |n: &mut N4| -> Vec<String> {
        n.take_events()
            .into_iter()
            .filter_map(|e| match e {
                Event::Rejected { reason, .. } => Some(reason),
                _ => None,
            })
            .collect()
    };
    let (mut n, _) = node_with(
        |_| {},
        |r| {
            r.ue_ips = UeIpPools::default();
            r.ue_ips.add("ims", "10.46.0.0/30".parse().unwrap());
        },
        false,
    );
    let t0 = Instant::now();
    associate(&mut n, t0);
    let _ = reasons(&mut n);
    let r = establish(
        &mut n,
        &legacy::session_establishment(2, SMF_IP, 1, "ims", true),
        t0,
    );
    assert_eq!(r.cause, CauseValue::ALL_DYNAMIC_ADDRESSES_OCCUPIED);
    let r = establish(
        &mut n,
        &legacy::session_establishment(3, SMF_IP, 2, "web", false),
        t0,
    );
    assert_eq!(r.cause, CauseValue::ALL_DYNAMIC_ADDRESSES_OCCUPIED);
    // A /30 has two addresses to give.
    for k in 0..3u32 {
        let r = establish(
            &mut n,
            &legacy::session_establishment(4 + k, SMF_IP, 3 + u64::from(k), "ims", false),
            t0,
        );
        let want = if k < 2 {
            CauseValue::REQUEST_ACCEPTED
        } else {
            CauseValue::ALL_DYNAMIC_ADDRESSES_OCCUPIED
        };
        assert_eq!(r.cause, want, "session {k}");
    }
    let got = reasons(&mut n);
    let want = [
        "no IPv6 UE pool for network instance \"ims\" (ue_pools has no IPv6 prefix for it)",
        "no IPv4 UE pool for network instance \"web\" (ue_pools has none for it, and no default IPv4 prefix)",
        "no UE address left in the IPv4 pool of network instance \"ims\"",
    ];
    assert_eq!(got.len(), want.len(), "{got:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(g.contains(w), "{g:?} should say {w:?}");
    }
    let docs = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/configuration.md"
    ))
    .unwrap();
    assert!(
        docs.contains(want[0]),
        "docs/configuration.md shows {:?}",
        want[0]
    );
}

/// OAI's SMF steers a UE to a captive portal with Redirect Information (clause 8.2.20)
/// in FAR 1's Forwarding Parameters. IPv4, IPv6 and URL addresses are taken (the model
/// hands the UE's TCP to upfd, drops its UDP as redirect_not_http); a SIP URI is refused
/// with Cause 73 naming the FAR and saying why.
#[test]
fn redirect_information_is_taken_and_sip_uris_are_refused() {
    let (mut n, model) = node(|_| {}, false);
    let t0 = Instant::now();
    associate(&mut n, t0);
    for (k, (t, a)) in [
        (0u8, "192.0.2.80"),
        (1, "2001:db8::80"),
        (2, "http://portal.example/"),
    ]
    .into_iter()
    .enumerate()
    {
        let ue = Ipv4Addr::new(10, 45, 0, 2 + k as u8);
        let r = establish(
            &mut n,
            &oai::session_establishment_redirect(2 + k as u32, SMF_IP, 0x41 + k as u64, ue, t, a),
            t0,
        );
        assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{a}: {r:?}");
        let seid = r.up_fseid.unwrap().seid;
        let s = n.sessions().get(seid).unwrap();
        let got = s
            .fars
            .get(&1)
            .unwrap()
            .forwarding
            .as_ref()
            .unwrap()
            .redirect
            .clone();
        assert_eq!(got.map(|r| r.server_address.0), Some(a.as_bytes().to_vec()));
        let teid = teid_of(&n, seid);
        let tcp = {
            let mut p = capture::ip_udp_packet(
                IpAddr::V4(ue),
                IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)),
                40000,
                80,
                &[0; 20],
            );
            p[9] = 6; // TCP (the model reads the protocol, not the checksum)
            p
        };
        let v = model
            .borrow_mut()
            .process_n3(&gpdu(IpAddr::V4(GNB), IpAddr::V4(N3), teid, tcp), 1);
        assert!(
            matches!(v, Verdict::ToRedirect(ref b) if b.seid == seid && b.far_id == 1),
            "{v:?}"
        );
        let udp = capture::ip_udp_packet(
            IpAddr::V4(ue),
            IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)),
            40000,
            53,
            &[0; 20],
        );
        let v = model
            .borrow_mut()
            .process_n3(&gpdu(IpAddr::V4(GNB), IpAddr::V4(N3), teid, udp), 2);
        assert_eq!(v, Verdict::Drop(upf::abi::DropReason::RedirectNotHttp));
    }
    let r = establish(
        &mut n,
        &oai::session_establishment_redirect(
            9,
            SMF_IP,
            0x49,
            Ipv4Addr::new(10, 45, 0, 9),
            3,
            "sip:portal@example.org",
        ),
        t0,
    );
    assert_eq!(r.cause, CauseValue::RULE_CREATION_MODIFICATION_FAILURE);
    assert_eq!(
        r.failed_rule_id,
        failed_rule(pfcp::ie::FailedRuleId::FAR, 1)
    );
    let reason = n
        .take_events()
        .into_iter()
        .find_map(|e| match e {
            Event::Rejected { reason, .. } => Some(reason),
            _ => None,
        })
        .unwrap();
    assert!(reason.contains("SIP URI"), "{reason}");
}
