//! Sequences of N4 messages from three peers through the N4 node: associations set up,
//! updated and released, heartbeats, sessions established, modified and deleted with
//! rules referring to each other (or to nothing), raw mutated datagrams, time passing.
//! No panic, at most one response per request, and the books balance after every step:
//! every session belongs to an associated peer, TEIDs and UE addresses in use are exactly
//! those the sessions hold.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use pfcp::ie::{apply_action, FSeid, FTeid, Flags, Interface, Name, NodeId, UeIpAddress};
use pfcp::msg;
use pfcp::HeaderRepr;
use upf::alloc::{TeidAllocator, UeIpPools};
use upf::model::Model;
use upf::fastpath::teid_index::TeidIndex;
use upf::n4::{N4Config, N4};
use upf::procedures::{GtpuAddresses, Limits, Resources};
use upf::sessions::Sessions;

#[derive(Arbitrary, Debug)]
enum Op {
    Setup {
        peer: u8,
        ts: u8,
    },
    Release {
        peer: u8,
    },
    Update {
        peer: u8,
    },
    Heartbeat {
        peer: u8,
        ts: u8,
    },
    Establish {
        peer: u8,
        cp_seid: u8,
        pdrs: Vec<PdrSpec>,
        fars: Vec<FarSpec>,
    },
    Modify {
        peer: u8,
        session: u8,
        create: Vec<PdrSpec>,
        create_fars: Vec<FarSpec>,
        remove_pdrs: Vec<u8>,
        remove_fars: Vec<u8>,
        update_fars: Vec<FarSpec>,
    },
    Delete {
        peer: u8,
        session: u8,
    },
    /// A previous request with some octets changed.
    Raw {
        peer: u8,
        index: u8,
        flips: Vec<(u16, u8)>,
    },
    /// The same request again (a retransmission).
    Again {
        peer: u8,
    },
    Wait {
        secs: u8,
    },
}

#[derive(Arbitrary, Debug, Clone)]
struct PdrSpec {
    id: u8,
    far: u8,
    uplink: bool,
    choose_id: Option<u8>,
    chv4: bool,
}

#[derive(Arbitrary, Debug, Clone)]
struct FarSpec {
    id: u8,
    action: u8,
}

fn peer_addr(p: u8) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + p % 3)), 8805)
}

fn node() -> N4 {
    let mut pools = UeIpPools::default();
    pools.add("internet", "10.45.0.0/28".parse().unwrap());
    let res = Resources::new(
        // As upfd with the XDP data path: TEIDs from 64 direct slots first (64 TEIDs
        // each), so that slot reuse and its bookkeeping are driven too.
        TeidAllocator::with_index(1, 4096, TeidIndex::seeded(1, 4096, 64, 1)),
        pools,
        GtpuAddresses {
            access_v4: Some(Ipv4Addr::new(10, 10, 0, 7)),
            ..Default::default()
        },
        Limits::default(),
    );
    N4::new(
        N4Config {
            node_id: NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 7)),
            addr: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7)),
            recovery_time_stamp: 1,
            features: Flags(vec![0x10, 0, 0]),
            allowed_peers: Vec::new(),
            smf_peers: vec![peer_addr(2)],
            heartbeat_interval: Duration::from_secs(5),
            t1: Duration::from_secs(1),
            n1: 1,
            cache_ttl: Duration::from_secs(5),
            cache_max: 64,
            graceful_release_period: Duration::from_secs(3),
            strict: false,
        },
        Sessions::new(res, Box::new(Model::new(1 << 16, Default::default())), 64),
    )
}

fn pdr(p: &PdrSpec) -> msg::CreatePdr {
    let fteid = p
        .uplink
        .then(|| FTeid::choose(true, false, p.choose_id.map(|c| c % 4)));
    let ue = (!p.uplink).then(|| UeIpAddress {
        destination: true,
        choose_v4: p.chv4,
        ipv4: (!p.chv4).then(|| Ipv4Addr::new(10, 99, 0, p.id)),
        ..Default::default()
    });
    msg::CreatePdr {
        pdr_id: (p.id % 8) as u16,
        precedence: Some(p.id as u32),
        pdi: msg::Pdi {
            source_interface: Interface(if p.uplink { 0 } else { 1 }),
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
        },
        outer_header_removal: None,
        far_id: Some((p.far % 8) as u32),
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

fn far(f: &FarSpec) -> msg::CreateFar {
    let bit = [apply_action::DROP, apply_action::FORW, apply_action::BUFF][(f.action % 3) as usize];
    msg::CreateFar {
        far_id: (f.id % 8) as u32,
        apply_action: Flags::from_bits(&[bit], 1 + (f.action as usize >> 7)),
        forwarding_parameters: (f.action % 3 == 1).then(|| msg::ForwardingParameters {
            destination_interface: Interface(1),
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
        }),
        duplicating_parameters: vec![],
        bar_id: None,
        other: vec![],
    }
}

struct World {
    n4: N4,
    now: Instant,
    seq: u32,
    sent: Vec<(SocketAddr, Vec<u8>)>,
    /// UP SEIDs learnt from responses.
    seids: Vec<u64>,
}

/// How many messages a datagram holds (Follow On bundles, clause 7.2.2.1).
fn bundled(mut d: &[u8]) -> usize {
    let mut n = 0;
    while !d.is_empty() && n < 64 {
        n += 1;
        if d[0] & 0x04 == 0 || d.len() < 4 {
            break;
        }
        let len = 4 + u16::from_be_bytes([d[2], d[3]]) as usize;
        d = &d[len.min(d.len())..];
    }
    n.max(1)
}

impl World {
    fn send(&mut self, peer: SocketAddr, data: Vec<u8>) {
        let outs = self.n4.on_datagram(peer, &data, self.now);
        assert!(outs.len() <= bundled(&data), "more responses than requests");
        for o in outs {
            if let Ok((_, msg::Msg::SessionEstablishmentResponse(r))) = msg::Msg::parse(&o.data) {
                if let Some(f) = r.up_fseid {
                    self.seids.push(f.seid);
                }
            }
        }
        self.sent.push((peer, data));
        if self.sent.len() > 32 {
            self.sent.remove(0);
        }
    }

    fn seq(&mut self) -> u32 {
        self.seq += 1;
        self.seq
    }

    fn check(&self) {
        let s = &self.n4.sessions();
        for x in s.iter() {
            assert!(
                self.n4.is_associated(&x.cp_node),
                "session of a peer without association"
            );
        }
        // TEIDs and UE addresses held vs in use, each held once, the slot books.
        if let Err(e) = s.check() {
            panic!("books: {e}");
        }
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut w = World {
        n4: node(),
        now: Instant::now(),
        seq: 0,
        sent: Vec::new(),
        seids: Vec::new(),
    };
    let _ = w.n4.start(w.now);
    for op in ops.into_iter().take(64) {
        match op {
            Op::Setup { peer, ts } => {
                let a = peer_addr(peer);
                let IpAddr::V4(ip) = a.ip() else {
                    unreachable!()
                };
                let r = msg::AssociationSetupRequest::new(NodeId::Ipv4(ip), ts as u32);
                let s = w.seq();
                w.send(a, msg::emit(&HeaderRepr::node(0, s), &r));
            }
            Op::Release { peer } => {
                let a = peer_addr(peer);
                let IpAddr::V4(ip) = a.ip() else {
                    unreachable!()
                };
                let s = w.seq();
                w.send(
                    a,
                    msg::emit(
                        &HeaderRepr::node(0, s),
                        &msg::AssociationReleaseRequest {
                            node_id: NodeId::Ipv4(ip),
                            other: vec![],
                        },
                    ),
                );
            }
            Op::Update { peer } => {
                let a = peer_addr(peer);
                let IpAddr::V4(ip) = a.ip() else {
                    unreachable!()
                };
                let r = msg::AssociationUpdateRequest {
                    node_id: NodeId::Ipv4(ip),
                    up_function_features: None,
                    cp_function_features: Some(Flags(vec![1])),
                    user_plane_ip_resource_information: vec![],
                    pfcp_association_release_request: None,
                    graceful_release_period: None,
                    pfcpau_req_flags: None,
                    alternative_smf_ip_addresses: vec![],
                    smf_set_id: None,
                    ue_ip_address_pool_information: vec![],
                    gtpu_path_qos_control_information: vec![],
                    other: vec![],
                };
                let s = w.seq();
                w.send(a, msg::emit(&HeaderRepr::node(0, s), &r));
            }
            Op::Heartbeat { peer, ts } => {
                let s = w.seq();
                w.send(
                    peer_addr(peer),
                    msg::emit(
                        &HeaderRepr::node(0, s),
                        &msg::HeartbeatRequest {
                            recovery_time_stamp: ts as u32,
                            source_ip_address: None,
                            other: vec![],
                        },
                    ),
                );
            }
            Op::Establish {
                peer,
                cp_seid,
                pdrs,
                fars,
            } => {
                let a = peer_addr(peer);
                let IpAddr::V4(ip) = a.ip() else {
                    unreachable!()
                };
                let r = msg::SessionEstablishmentRequest {
                    node_id: NodeId::Ipv4(ip),
                    cp_fseid: FSeid {
                        seid: cp_seid as u64,
                        ipv4: Some(ip),
                        ipv6: None,
                        spare: 0,
                    },
                    create_pdrs: pdrs.iter().take(8).map(pdr).collect(),
                    create_fars: fars.iter().take(8).map(far).collect(),
                    create_urrs: vec![],
                    create_qers: vec![],
                    create_bar: None,
                    create_traffic_endpoints: vec![],
                    pdn_type: None,
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
                };
                let s = w.seq();
                w.send(a, msg::emit(&HeaderRepr::session(0, 0, s), &r));
            }
            Op::Modify {
                peer,
                session,
                create,
                create_fars,
                remove_pdrs,
                remove_fars,
                update_fars,
            } => {
                let seid = w
                    .seids
                    .get(session as usize % w.seids.len().max(1))
                    .copied()
                    .unwrap_or(session as u64);
                let r = msg::SessionModificationRequest {
                    cp_fseid: None,
                    remove_pdrs: remove_pdrs
                        .iter()
                        .take(4)
                        .map(|i| msg::RemovePdr {
                            pdr_id: (*i % 8) as u16,
                            other: vec![],
                        })
                        .collect(),
                    remove_fars: remove_fars
                        .iter()
                        .take(4)
                        .map(|i| msg::RemoveFar {
                            far_id: (*i % 8) as u32,
                            other: vec![],
                        })
                        .collect(),
                    remove_urrs: vec![],
                    remove_qers: vec![],
                    remove_bar: None,
                    remove_traffic_endpoints: vec![],
                    create_pdrs: create.iter().take(4).map(pdr).collect(),
                    create_fars: create_fars.iter().take(4).map(far).collect(),
                    create_urrs: vec![],
                    create_qers: vec![],
                    create_bar: None,
                    create_traffic_endpoints: vec![],
                    update_pdrs: vec![],
                    update_fars: update_fars
                        .iter()
                        .take(4)
                        .map(|f| msg::UpdateFar {
                            far_id: (f.id % 8) as u32,
                            apply_action: Some(far(f).apply_action),
                            update_forwarding_parameters: None,
                            update_duplicating_parameters: vec![],
                            bar_id: None,
                            other: vec![],
                        })
                        .collect(),
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
                let s = w.seq();
                w.send(
                    peer_addr(peer),
                    msg::emit(&HeaderRepr::session(0, seid, s), &r),
                );
            }
            Op::Delete { peer, session } => {
                let seid = w
                    .seids
                    .get(session as usize % w.seids.len().max(1))
                    .copied()
                    .unwrap_or(0);
                let s = w.seq();
                w.send(
                    peer_addr(peer),
                    msg::emit(
                        &HeaderRepr::session(0, seid, s),
                        &msg::SessionDeletionRequest { other: vec![] },
                    ),
                );
            }
            Op::Raw { peer, index, flips } => {
                if let Some((_, d)) = w.sent.get(index as usize % w.sent.len().max(1)).cloned() {
                    let mut d = d;
                    for (at, x) in flips.iter().take(8) {
                        if !d.is_empty() {
                            let i = *at as usize % d.len();
                            d[i] ^= x;
                        }
                    }
                    w.send(peer_addr(peer), d);
                }
            }
            Op::Again { peer } => {
                if let Some((_, d)) = w.sent.last().cloned() {
                    w.send(peer_addr(peer), d);
                }
            }
            Op::Wait { secs } => {
                w.now += Duration::from_secs(secs as u64 % 16);
                let _ = w.n4.on_timer(w.now);
            }
        }
        w.check();
    }
});
