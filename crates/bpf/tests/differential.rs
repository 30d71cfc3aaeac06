//! Differential test of the data path (ARCHITECTURE.md): the XDP programs, run with
//! BPF_PROG_RUN on the tables the compiler (upf_bpf::compile) made of generated
//! sessions, and the reference model (upf::model), which reads the same sessions' rules
//! itself, get the same frames, and must agree on the verdict, the output octets, every
//! counter (packets and octets per drop reason and outcome), what is handed up for
//! buffering, and the URR counts.
//!
//! UPF_DIFF_CASES (default 100000) frames; UPF_DIFF_SEED picks the generator's seed (the
//! seed is printed, so a failure can be replayed). Needs CAP_BPF (root).

mod common;

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::rc::Rc;
use std::sync::Arc;

use common::urr_template;
use libbpf_rs::{MapCore, MapFlags, RingBufferBuilder};
use pfcp::ie::{Bitrate, OuterHeaderCreation, OuterHeaderRemoval, SdfFilter};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use upf::abi::{DropReason, Stat};
use upf::fastpath::teid_index::TeidIndex;
use upf::fastpath::FastPath;
use upf::fastpath::{Config, Egress, Event, Icmp, NiAddresses};
use upf::model::{Model, Verdict};
use upf::rules::*;
use upf_bpf::datapath::{Capacity, Datapath};

const N3: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 7);
const N9: Ipv4Addr = Ipv4Addr::new(10, 20, 0, 7);
const N3_ACCESS2: Ipv4Addr = Ipv4Addr::new(10, 11, 0, 7);
const N3_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 7);
/// upfd's N4 address and a protected IPv6 one: uplink packets to them must be dropped.
const N4: Ipv4Addr = Ipv4Addr::new(10, 30, 0, 7);
const PROTECTED_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x30, 0, 0, 0, 0, 7);
const GNB: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 1);
const GNB_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 1);
const PEER_UPF_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x20, 0, 0, 0, 0, 9);
const PEER_UPF: Ipv4Addr = Ipv4Addr::new(10, 20, 0, 9);

const FLOWS: &[&str] = &[
    "permit out 17 from any to assigned",
    "permit out 6 from 192.0.2.0/24 80,443 to assigned",
    "permit out ip from any to any",
    "permit out 1 from any to assigned",
    "permit out 17 from any 1000-2000 to assigned 5000-6000",
    "permit out 58 from ff02::2/128 to assigned",
    "permit out 6 from 198.51.100.7 to assigned 1-1024",
    "permit out 50 from any to assigned",
    "permit out ip from 2001:db8:beef::/48 to assigned",
];

fn config() -> Config {
    let mut neigh = std::collections::HashMap::new();
    let e = |ifindex, mtu, n: u8| Egress {
        ifindex,
        mtu,
        smac: [2, 0, 0, 0, 0, n],
        dmac: [2, 0, 0, 0, 1, n],
    };
    neigh.insert(IpAddr::V4(Ipv4Addr::UNSPECIFIED), e(20, 1500, 1));
    neigh.insert(IpAddr::V6(Ipv6Addr::UNSPECIFIED), e(20, 1500, 2));
    neigh.insert(IpAddr::V4(GNB), e(30, 1400, 3));
    neigh.insert(IpAddr::V4(PEER_UPF), e(1, 1500, 4)); // the ingress: XDP_TX
    neigh.insert(IpAddr::V6(GNB_V6), e(30, 1400, 5));
    Config {
        local: vec![
            IpAddr::V4(N3),
            IpAddr::V4(N9),
            IpAddr::V6(N3_V6),
            IpAddr::V4(N3_ACCESS2),
        ],
        protected: vec![IpAddr::V4(N4), IpAddr::V6(PROTECTED_V6)],
        n3_v4: Some(N3),
        n9_v4: Some(N9),
        n3_v6: Some(N3_V6),
        n9_v6: None,
        // A second access network with its own IPv4 N3 address (none of IPv6, none
        // towards other UPFs): FARs in it take their outer source from there.
        network_instances: vec![NiAddresses {
            name: "access2".into(),
            n3_v4: Some(N3_ACCESS2),
            ..Default::default()
        }],
        neigh,
        slowpath_per_sec: 0,
        slowpath_burst: 0,
        // Errors for packets that do not fit, with budgets no run of this test spends:
        // the model's clock is not the programs' (rate_limits.rs tests budgets).
        icmp: Icmp {
            source_v4: Some(Ipv4Addr::new(203, 0, 113, 6)),
            source_v6: Some(Ipv6Addr::new(0x2001, 0xdb8, 6, 0, 0, 0, 0, 6)),
            per_sec: 1_000_000_000,
            burst: 1_000_000,
            session_per_sec: 1_000_000_000,
            session_burst: 1_000_000,
        },
        // The data network's link is smaller than its neighbour says: the largest
        // uplink packets do not fit.
        mtus: vec![(20, 1400)],
    }
}

struct Gen {
    rng: StdRng,
    urr: pfcp::msg::CreateUrr,
    next_teid: u32,
    /// Half the TEIDs are as upfd allocates them, in direct slots: the first 200 in
    /// turn, so a slot is reused soon after its session is removed.
    index: TeidIndex,
    next_slot: u32,
    /// The data path's downlink slots (UE address mod ue_slots).
    ue_slots: u32,
}

/// What a generated session offers the frame generator.
#[derive(Clone)]
struct SessionInfo {
    teids: Vec<u32>,
    ue_v4: Option<Ipv4Addr>,
    ue_v6: Option<Ipv6Addr>,
    framed: Option<ipnet::Ipv4Net>,
    qfis: Vec<u8>,
}

impl Gen {
    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn sdf(&mut self) -> SdfFilter {
        let d = FLOWS[self.rng.random_range(0..FLOWS.len())];
        let mut f = SdfFilter {
            flow_description: Some(d.as_bytes().to_vec()),
            ..Default::default()
        };
        if self.chance(0.1) {
            f.tos_traffic_class = Some(((self.rng.random::<u8>() as u16) << 8) | 0xfc);
        }
        if self.chance(0.05) && d.contains(" 50 ") {
            f.spi = Some(self.rng.random_range(1..4));
        }
        f
    }

    fn session(&mut self, seid: u64, index: u32) -> (Session, SessionInfo) {
        let mut s = common::empty_session(seid);
        // Now and then an address with the same direct slot as the previous session's.
        let ue_v4 = if index % 256 > 0 && self.chance(0.2) {
            Ipv4Addr::from(0x0a2d_0000 + index + self.ue_slots * 20)
        } else {
            Ipv4Addr::from(0x0a2d_0000 + index + 1)
        };
        let ue_v6 = self
            .chance(0.3)
            .then(|| Ipv6Addr::new(0x2001, 0xdb8, 0x45, index as u16, 0, 0, 0, 1));
        let framed = self
            .chance(0.1)
            .then(|| ipnet::Ipv4Net::new(Ipv4Addr::from(0xac10_0000 + (index << 8)), 24).unwrap());
        // QERs and URRs.
        let n_qer = self.rng.random_range(0..=upf::abi::MAX_QERS_PER_PDR);
        let mut qfis = Vec::new();
        for q in 1..=n_qer {
            let mut qer = Qer {
                id: q,
                gate_ul_open: !self.chance(0.08),
                gate_dl_open: !self.chance(0.08),
                mbr: self.chance(0.5).then_some(Bitrate {
                    ul_kbps: 100_000_000,
                    dl_kbps: 100_000_000,
                }),
                qfi: self.chance(0.7).then(|| self.rng.random_range(1..10)),
                rqi: self.chance(0.2),
                ppi: self.chance(0.2).then(|| self.rng.random_range(0..8)),
                ..Qer::default()
            };
            if let Some(x) = qer.qfi {
                qfis.push(x);
            }
            qer.correlation_id = None;
            s.qers.insert(q, qer);
        }
        let n_urr = self.rng.random_range(0..=upf::abi::MAX_URRS_PER_PDR);
        for u in 1..=n_urr {
            let mut rule = self.urr.clone();
            rule.urr_id = u;
            s.urrs.insert(u, Urr::new(&rule));
        }
        let pick_ids = |g: &mut Gen, n: u32, max: usize| -> Vec<u32> {
            let mut v: Vec<u32> = (1..=n).filter(|_| g.chance(0.6)).collect();
            v.truncate(max);
            v
        };
        // Uplink PDRs on one or two F-TEIDs.
        let n_teid = if self.chance(0.2) { 2 } else { 1 };
        let teids: Vec<u32> = (0..n_teid)
            .map(|_| {
                if self.chance(0.5) {
                    self.next_slot = (self.next_slot + 1) % 200;
                    return self.index.teid(self.next_slot);
                }
                self.next_teid += self.rng.random_range(1..1000);
                // Every TEID of the index's window has a slot (which another key may
                // hold); those above it have none.
                if self.chance(0.5) {
                    return 0x8000_0000 + self.next_teid;
                }
                self.next_teid
            })
            .collect();
        let mut pdr_id = 1u16;
        let mut far_id = 1u32;
        for _ in 0..self.rng.random_range(1..4) {
            let teid = teids[self.rng.random_range(0..teids.len())];
            let far = self.far(far_id, true);
            s.fars.insert(far_id, far);
            let pdi = Pdi {
                source_interface: interface::ACCESS,
                local_fteid: Some(LocalFteid {
                    teid,
                    ipv4: Some(N3),
                    ipv6: None,
                }),
                network_instance: Some("internet".into()),
                ue_ips: match self.rng.random_range(0..100) {
                    0..20 => thin_vec![UeIp {
                        ipv4: Some(ue_v4),
                        ..Default::default()
                    }],
                    // Another address first: the source check takes the first by PDR ID.
                    20..23 => thin_vec![UeIp {
                        ipv4: Some(Ipv4Addr::from(u32::from(ue_v4) ^ 0x0080_0000)),
                        ..Default::default()
                    }],
                    _ => thin_vec![],
                },
                qfis: if self.chance(0.3) {
                    thin_vec![self.rng.random_range(1..10)]
                } else {
                    thin_vec![]
                },
                sdf_filters: if self.chance(0.4) {
                    thin_vec![self.sdf()]
                } else {
                    thin_vec![]
                },
                ..Default::default()
            };
            let ohr = match self.rng.random_range(0..20) {
                0 => None,
                1 => Some(1),
                2 => Some(6),
                3 => Some(4),
                _ => Some(0),
            };
            let pdr = Pdr {
                id: pdr_id,
                precedence: self.rng.random_range(1..300),
                pdi,
                outer_header_removal: ohr.map(|d| OuterHeaderRemoval {
                    description: d,
                    ext_header_deletion: self.chance(0.2).then_some(1),
                }),
                far_id: Some(far_id),
                urr_ids: pick_ids(self, n_urr, upf::abi::MAX_URRS_PER_PDR as usize).into(),
                qer_ids: pick_ids(self, n_qer, upf::abi::MAX_QERS_PER_PDR as usize).into(),
                activation_time: None,
                deactivation_time: None,
            };
            s.pdrs.insert(pdr_id, pdr);
            pdr_id += 1;
            far_id += 1;
        }
        // Downlink PDRs on the UE address (and framed route).
        for i in 0..self.rng.random_range(1..3) {
            let far = self.far(far_id, false);
            s.fars.insert(far_id, far);
            let mut ue = UeIp {
                ipv4: Some(ue_v4),
                is_destination: true,
                ..Default::default()
            };
            if i == 0 {
                ue.ipv6 = ue_v6;
            }
            // Now and then a second PDR routes the lower half of the framed route: a
            // packet there is in both routes, one in the upper half in the wider alone.
            let half = i == 1 && self.chance(0.5);
            let routes = framed.iter().map(|n| match half {
                true => ipnet::Ipv4Net::new(n.network(), n.prefix_len() + 1).unwrap(),
                false => *n,
            });
            let pdi = Pdi {
                source_interface: interface::CORE,
                network_instance: Some("internet".into()),
                ue_ips: thin_vec![ue],
                framed_routes: routes.map(ipnet::IpNet::V4).collect(),
                sdf_filters: if self.chance(0.4) {
                    thin_vec![self.sdf()]
                } else {
                    thin_vec![]
                },
                ..Default::default()
            };
            let pdr = Pdr {
                id: pdr_id,
                precedence: self.rng.random_range(1..300),
                pdi,
                outer_header_removal: None,
                far_id: Some(far_id),
                urr_ids: pick_ids(self, n_urr, upf::abi::MAX_URRS_PER_PDR as usize).into(),
                qer_ids: pick_ids(self, n_qer, upf::abi::MAX_QERS_PER_PDR as usize).into(),
                activation_time: None,
                deactivation_time: None,
            };
            s.pdrs.insert(pdr_id, pdr);
            pdr_id += 1;
            far_id += 1;
        }
        let info = SessionInfo {
            teids,
            ue_v4: Some(ue_v4),
            ue_v6,
            framed,
            qfis,
        };
        (s, info)
    }

    fn far(&mut self, id: u32, uplink: bool) -> Far {
        let roll = self.rng.random_range(0..100);
        let mut action = ApplyAction::default();
        let mut forwarding = None;
        if roll < 10 {
            action.drop = true;
        } else if roll < 22 {
            action.buff = true;
            action.nocp = self.chance(0.5);
        } else {
            action.forw = true;
            let mut fw = Forwarding {
                destination_interface: if uplink {
                    interface::CORE
                } else {
                    interface::ACCESS
                },
                ..Default::default()
            };
            let tunnel = if uplink { roll >= 90 } else { roll < 97 };
            if tunnel {
                let peer = if uplink { PEER_UPF } else { GNB };
                let peer6 = if uplink { PEER_UPF_V6 } else { GNB_V6 };
                let teid = self.rng.random();
                // IPv4, IPv6, or a dual-stack peer (IPv4 wins).
                let mut o = match self.rng.random_range(0..10) {
                    0..6 => OuterHeaderCreation::gtpu_ipv4(teid, peer),
                    6..9 => OuterHeaderCreation::gtpu_ipv6(teid, peer6),
                    _ => {
                        let mut o = OuterHeaderCreation::gtpu_ipv4(teid, peer);
                        o.description |= OuterHeaderCreation::GTPU_UDP_IPV6;
                        o.ipv6 = Some(peer6);
                        o
                    }
                };
                if self.chance(0.05) {
                    o.port = Some(2153);
                    o.description |= OuterHeaderCreation::UDP_IPV4;
                    o.description &= !OuterHeaderCreation::UDP_IPV4;
                }
                fw.outer_header_creation = Some(o);
            }
            if self.chance(0.1) {
                fw.transport_level_marking = Some(0xb8fc);
            }
            fw.network_instance = match self.rng.random_range(0..10) {
                0..3 => Some("access2".into()),
                3 => Some("elsewhere".into()),
                _ => Some("internet".into()),
            };
            // Redirect Information (TS 29.244 8.2.20): uplink TCP to upfd, the rest
            // dropped as redirect_not_http (a downlink FAR with it too, now and then).
            if self.chance(if uplink { 0.08 } else { 0.02 }) {
                fw.redirect = Some(pfcp::ie::RedirectInformation {
                    address_type: 2,
                    server_address: pfcp::ie::Text(b"http://portal.example/".to_vec()),
                    other_server_address: None,
                });
            }
            forwarding = Some(fw);
        }
        Far {
            id,
            action,
            forwarding,
            bar_id: None,
        }
    }

    // ---- frames ----

    fn payload(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.rng.random()).collect()
    }

    fn inner(&mut self, src: IpAddr, dst: IpAddr) -> Vec<u8> {
        let proto = [6u8, 17, 1, 58, 50, 17, 6][self.rng.random_range(0..7)];
        let mut l4 = Vec::new();
        match proto {
            6 | 17 => {
                let sp: u16 = if self.chance(0.3) {
                    self.rng.random_range(1000..2001)
                } else {
                    self.rng.random()
                };
                let dp: u16 = if self.chance(0.03) {
                    [2152, 2123, 8805][self.rng.random_range(0..3)] // GTP / PFCP inside
                } else {
                    [80, 443, 5000, 5500, 23, self.rng.random()][self.rng.random_range(0..6)]
                };
                l4.extend_from_slice(&sp.to_be_bytes());
                l4.extend_from_slice(&dp.to_be_bytes());
                l4.extend_from_slice(&[0; 4]);
            }
            50 => l4.extend_from_slice(&self.rng.random_range(1u32..4).to_be_bytes()),
            // Echo requests and replies, and errors of both versions' numbering (an
            // error gets no error about itself).
            _ => {
                let t = [8u8, 0, 3, 11, 128, 129, 2, 1][self.rng.random_range(0..8)];
                l4.extend_from_slice(&[t, 0, 0, 0]);
            }
        }
        let n = if self.chance(0.1) {
            self.rng.random_range(1300..1450)
        } else {
            self.rng.random_range(0..200)
        };
        l4.extend(self.payload(n));
        let ttl = if self.chance(0.03) {
            self.rng.random_range(0..2)
        } else {
            64
        };
        let tos: u8 = self.rng.random();
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let total = 20 + l4.len();
                let mut ip = vec![
                    0x45,
                    tos,
                    (total >> 8) as u8,
                    total as u8,
                    0,
                    1,
                    0,
                    0,
                    ttl,
                    proto,
                    0,
                    0,
                ];
                if self.chance(0.7) {
                    ip[6] = 0x40; // DF: too big gets an error, not silence
                }
                if self.chance(0.02) {
                    ip[6] = 0x00;
                    ip[7] = 0x10; // a later fragment: no ports
                }
                ip.extend_from_slice(&s.octets());
                ip.extend_from_slice(&d.octets());
                let c = capture::checksum(&ip, 0);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                ip.extend(l4);
                ip
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let proto = if proto == 1 { 58 } else { proto };
                let mut ip = vec![0x60 | (tos >> 4), tos << 4, 0, self.rng.random_range(0..3)];
                ip.extend_from_slice(&(l4.len() as u16).to_be_bytes());
                ip.push(proto);
                ip.push(ttl);
                ip.extend_from_slice(&s.octets());
                ip.extend_from_slice(&d.octets());
                ip.extend(l4);
                ip
            }
            _ => unreachable!(),
        }
    }

    fn eth(&mut self, ethertype: u16) -> Vec<u8> {
        let mut e = vec![2, 0, 0, 0, 9, 9, 2, 0, 0, 0, 8, 8];
        if self.chance(0.05) {
            e.extend_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
        }
        e.extend_from_slice(&ethertype.to_be_bytes());
        e
    }

    fn uplink_frame(&mut self, s: &SessionInfo) -> Vec<u8> {
        let ue: IpAddr = match (s.ue_v6, self.chance(0.2)) {
            (Some(v6), true) => IpAddr::V6(v6),
            _ => IpAddr::V4(s.ue_v4.unwrap()),
        };
        let spoof = self.chance(0.05);
        let src = match (ue, spoof) {
            (IpAddr::V4(_), true) => IpAddr::V4(Ipv4Addr::new(10, 99, 0, 1)),
            (IpAddr::V6(_), true) => IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0x99, 0, 0, 0, 0, 1)),
            (IpAddr::V4(a), false) if self.chance(0.05) && s.framed.is_some() => {
                let _ = a;
                IpAddr::V4(Ipv4Addr::from(u32::from(s.framed.unwrap().network()) + 5))
            }
            (a, false) => a,
        };
        let to_upf = self.chance(0.03);
        let dst = match ue {
            IpAddr::V4(_) if to_upf => {
                IpAddr::V4([N3, N9, N4, N3_ACCESS2][self.rng.random_range(0..4)])
            }
            IpAddr::V6(_) if to_upf => IpAddr::V6(if self.chance(0.5) {
                N3_V6
            } else {
                PROTECTED_V6
            }),
            IpAddr::V4(_) => IpAddr::V4(if self.chance(0.3) {
                Ipv4Addr::new(192, 0, 2, self.rng.random())
            } else {
                Ipv4Addr::new(198, 51, 100, 7)
            }),
            IpAddr::V6(_) => IpAddr::V6(if self.chance(0.2) {
                "ff02::2".parse().unwrap()
            } else {
                Ipv6Addr::new(0x2001, 0xdb8, 0xbeef, 0, 0, 0, 0, self.rng.random())
            }),
        };
        let mut inner = self.inner(src, dst);
        if self.chance(0.02) {
            inner.truncate(inner.len().saturating_sub(5).max(10)); // shorter than it says
        }
        if self.chance(0.03) {
            inner.extend_from_slice(&[0; 6]); // padding after the packet
        }
        let teid = if self.chance(0.05) {
            self.rng.random()
        } else {
            s.teids[self.rng.random_range(0..s.teids.len())]
        };
        let mut gtp = Vec::new();
        let kind = self.rng.random_range(0..100);
        let (flags, ext): (u8, Vec<u8>) = if kind < 60 {
            let qfi = if !s.qfis.is_empty() && self.chance(0.7) {
                s.qfis[self.rng.random_range(0..s.qfis.len())]
            } else {
                self.rng.random_range(1..10)
            };
            // Now and then an answer to QoS monitoring (QMP), some without a packet.
            let ul = if self.chance(0.03) { 0x18 } else { 0x10 };
            (0x34, vec![0, 0, 0, 0x85, 1, ul, qfi, 0])
        } else if kind < 63 {
            (0x32, vec![0, 7, 0, 0])
        } else if kind < 65 {
            (0x34, vec![0, 0, 0, 0xc0, 1, 0x12, 0x34, 0]) // comprehension required, unknown
        } else if kind < 66 {
            (0x34, vec![0, 0, 0, 0x85, 0, 0x10, 1, 0]) // zero length
        } else if kind < 67 {
            (0x34, vec![0, 0, 0, 0x85, 3, 0x10, 1, 0]) // runs past the packet
        } else {
            (0x30, vec![])
        };
        let msg_type = if self.chance(0.02) { 1 } else { 255 };
        // A monitoring answer without a packet: upfd's.
        if ext.get(5) == Some(&0x18) && self.chance(0.5) {
            inner.clear();
        }
        let body_len = ext.len() + inner.len();
        gtp.push(flags);
        gtp.push(msg_type);
        gtp.extend_from_slice(&(body_len as u16).to_be_bytes());
        gtp.extend_from_slice(&teid.to_be_bytes());
        gtp.extend(ext);
        if kind == 66 {
            gtp.truncate(gtp.len().min(14));
        } else {
            gtp.extend(inner);
        }
        let dport: u16 = if self.chance(0.02) { 2123 } else { 2152 };
        let outer_v6 = self.chance(0.05);
        let dst_outer = if self.chance(0.03) {
            Ipv4Addr::new(10, 10, 0, 8)
        } else if self.chance(0.1) {
            N3_ACCESS2
        } else {
            N3
        };
        let ip = if outer_v6 {
            capture::ip_udp_packet(
                IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 3, 0, 0, 0, 0, 1)),
                IpAddr::V6(N3_V6),
                2152,
                dport,
                &gtp,
            )
        } else {
            capture::ip_udp_packet(IpAddr::V4(GNB), IpAddr::V4(dst_outer), 2152, dport, &gtp)
        };
        let mut f = self.eth(if outer_v6 { 0x86dd } else { 0x0800 });
        f.extend(ip);
        f
    }

    fn downlink_frame(&mut self, s: &SessionInfo) -> Vec<u8> {
        let roll = self.rng.random_range(0..100);
        let dst: IpAddr = if roll < 10 {
            IpAddr::V4(Ipv4Addr::new(10, 46, 0, self.rng.random()))
        } else if roll < 20 && s.ue_v6.is_some() {
            IpAddr::V6(s.ue_v6.unwrap())
        } else if let (true, Some(net)) = (roll < 28, s.framed) {
            // The lower or the upper half of the route.
            let host = if self.chance(0.5) { 9 } else { 200 };
            IpAddr::V4(Ipv4Addr::from(u32::from(net.network()) + host))
        } else {
            IpAddr::V4(s.ue_v4.unwrap())
        };
        let src = match dst {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0xbeef, 0, 0, 0, 0, 5)),
        };
        let mut inner = self.inner(src, dst);
        if self.chance(0.03) {
            inner.extend_from_slice(&[0; 4]);
        }
        let mut f = self.eth(if dst.is_ipv4() { 0x0800 } else { 0x86dd });
        f.extend(inner);
        f
    }
}

/// The name of the stats table's counter `i`.
fn counter_name(i: usize) -> &'static str {
    let drops = DropReason::ALL.iter().map(|r| (r.index(), r.name()));
    let outcomes = Stat::ALL.iter().map(|s| (s.index(), s.name()));
    drops
        .chain(outcomes)
        .find(|(x, _)| *x == i)
        .map_or("?", |(_, n)| n)
}

/// What each counter grew by between two readings: (index, packets, octets).
fn grown(before: &[(u64, u64)], after: &[(u64, u64)]) -> Vec<(usize, u64, u64)> {
    before
        .iter()
        .zip(after)
        .enumerate()
        .filter(|(_, (b, a))| a != b)
        .map(|(i, (b, a))| (i, a.0 - b.0, a.1 - b.1))
        .collect()
}

#[test]
fn xdp_agrees_with_the_reference_pipeline() {
    let cases: usize = std::env::var("UPF_DIFF_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let seed: u64 = std::env::var("UPF_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    eprintln!("differential: {cases} frames, UPF_DIFF_SEED={seed}");
    // Every frame on one CPU, the model told which: leases and counts are per CPU.
    let one = common::OneCpu::new();
    let cfg = config();
    let cap = Capacity::for_sessions(4096);
    let mut dp = Datapath::load(cap, cfg.clone()).expect("load (needs root)");
    let mut g = Gen {
        rng: StdRng::seed_from_u64(seed),
        urr: urr_template(),
        next_teid: 0x100,
        index: dp.teid_index(),
        next_slot: 0,
        ue_slots: cap.ue_slots,
    };
    dp.configure(cfg.clone(), 30, 20, 0).unwrap();
    let mut model = Model::new(1 << 20, cfg);
    model.set_lanes(dp.layout().lanes as usize, dp.ncpus());
    model.set_cpu(one.cpu);

    // Buffered packets the data path hands up, collected per frame.
    let events: Rc<RefCell<Vec<Vec<u8>>>> = Rc::new(RefCell::new(Vec::new()));
    let ev2 = events.clone();
    let mut rb = RingBufferBuilder::new();
    rb.add(&dp.skel().maps.events, move |d| {
        ev2.borrow_mut().push(d.to_vec());
        0
    })
    .unwrap();
    let rb = rb.build().unwrap();

    let per_batch = 40;
    let mut done = 0;
    let mut batch = 0u64;
    let mut by_verdict: std::collections::BTreeMap<String, usize> = Default::default();
    let mut places: std::collections::BTreeMap<&str, usize> = Default::default();
    while done < cases {
        batch += 1;
        // A batch of sessions, installed in both.
        let mut infos = Vec::new();
        let mut installed = Vec::new();
        for i in 0..per_batch {
            let seid = batch * 1000 + i as u64;
            let (s, info) = g.session(seid, (batch as u32 % 200) * 256 + i as u32);
            let s = Arc::new(s);
            let a = model.install(None, &s);
            let b = dp.install(None, &s);
            assert_eq!(
                a.is_ok(),
                b.is_ok(),
                "install of {s:?}: model {a:?} xdp {b:?}"
            );
            if a.is_ok() {
                // Some URRs get a small volume quota.
                for u in s.urrs.keys() {
                    if g.chance(0.1) {
                        let q = g.rng.random_range(0..3000i64);
                        model.set_quota(seid, *u, Some(q));
                        dp.write_quota(seid, *u, Some(q)).unwrap();
                    }
                }
                for t in &info.teids {
                    let place = match (g.index.slot(*t), dp.uplink_in_slot(*t)) {
                        (None, _) => "no slot",
                        (Some(_), true) => "in its slot",
                        (Some(_), false) => "slot taken or cooling",
                    };
                    *places.entry(place).or_insert(0usize) += 1;
                }
                if let Some(a) = info.ue_v4 {
                    let place = if dp.downlink_in_slot(a) {
                        "UE in its slot"
                    } else {
                        "UE hashed"
                    };
                    *places.entry(place).or_insert(0usize) += 1;
                }
                infos.push(info);
                installed.push(s);
            }
        }
        for _ in 0..(cases - done).min(2500) {
            let si = g.rng.random_range(0..infos.len());
            let uplink = g.chance(0.6);
            let frame = if uplink {
                g.uplink_frame(&infos[si])
            } else {
                g.downlink_frame(&infos[si])
            };
            let before = dp.stats();
            let model_before = model.stats().to_vec();
            let expect = if uplink {
                model.process_n3(&frame, 1_000_000_000 + done as u64)
            } else {
                model.process_n6(&frame, 1_000_000_000 + done as u64)
            };
            let prog = if uplink {
                &dp.skel().progs.xdp_n3
            } else {
                &dp.skel().progs.xdp_n6
            };
            let mut out = vec![0u8; frame.len() + 256];
            let input = libbpf_rs::ProgramInput {
                data_in: Some(&frame),
                data_out: Some(&mut out),
                ..Default::default()
            };
            let r = prog.test_run(input).expect("BPF_PROG_RUN");
            let action = r.return_value;
            let data = r.data.map(|d| d.to_vec()).unwrap_or_default();
            let counted = grown(&before, &dp.stats());
            let model_counted = grown(&model_before, model.stats());
            events.borrow_mut().clear();
            rb.consume().unwrap();
            let ctx = || {
                format!(
                    "frame {done} ({}): {:02x?}\nexpected {expect:?}\nXDP action {action}, counted {:?}",
                    if uplink { "n3" } else { "n6" },
                    frame,
                    counted.iter().map(|(i, p, b)| (counter_name(*i), p, b)).collect::<Vec<_>>(),
                )
            };
            assert_eq!(counted, model_counted, "counters: {}", ctx());
            let key = match &expect {
                Verdict::Drop(r) => {
                    assert_eq!(action, 1, "{}", ctx());
                    assert!(
                        counted.iter().any(|(i, _, _)| *i == r.index()),
                        "drop reason: {}",
                        ctx()
                    );
                    format!("drop {}", r.name())
                }
                Verdict::Pass => {
                    assert_eq!(action, 2, "{}", ctx());
                    "pass".to_string()
                }
                Verdict::Redirect { ifindex, frame: f } => {
                    assert_eq!(action, if *ifindex == 1 { 3 } else { 4 }, "{}", ctx());
                    assert_eq!(&data, f, "output octets: {}", ctx());
                    // Outer UDP from port 2152: a G-PDU we built.
                    let gtpu = |ip: usize, udp: usize| f[ip] == 17 && f[udp..udp + 2] == [8, 0x68];
                    if f.len() > 62 && f[12..14] == [0x86, 0xdd] && gtpu(20, 54) {
                        "encap v6".into()
                    } else if f.len() > 42 && f[12..14] == [8, 0] && gtpu(23, 34) {
                        "encap".into()
                    } else {
                        "forward".into()
                    }
                }
                Verdict::Buffer(b) => {
                    assert_eq!(action, 1, "{}", ctx());
                    let ev = events.borrow();
                    assert_eq!(ev.len(), 1, "one buffered packet handed up: {}", ctx());
                    assert_eq!(
                        upf_bpf::datapath::parse_event(&ev[0], &upf::pfd::PfdTable::new()),
                        Some(Event::Buffered(b.clone())),
                        "buffered: {}",
                        ctx()
                    );
                    "buffer".into()
                }
                Verdict::ToRedirect(b) => {
                    assert_eq!(action, 1, "{}", ctx());
                    let ev = events.borrow();
                    assert_eq!(ev.len(), 1, "one segment handed up: {}", ctx());
                    assert_eq!(
                        upf_bpf::datapath::parse_event(&ev[0], &upf::pfd::PfdTable::new()),
                        Some(Event::Redirected(b.clone())),
                        "redirected: {}",
                        ctx()
                    );
                    "redirect".into()
                }
            };
            // An ICMP error made for a packet that did not fit or ran out of TTL: what
            // became of it.
            let has = |s: usize| counted.iter().any(|(i, _, _)| *i == s);
            let key = match (
                has(Stat::IcmpSent.index()),
                has(DropReason::TtlExceeded.index()),
            ) {
                (true, true) => format!("icmp ttl {key}"),
                (true, false) => format!("icmp {key}"),
                _ => key,
            };
            *by_verdict.entry(key).or_default() += 1;
            done += 1;
        }
        // Counters agree, per URR.
        for s in &installed {
            for u in s.urrs.keys() {
                let a = model.usage(s.up_seid, *u);
                let b = dp.usage(s.up_seid, *u);
                assert_eq!(
                    (a.ul_packets, a.ul_bytes, a.dl_packets, a.dl_bytes),
                    (b.ul_packets, b.ul_bytes, b.dl_packets, b.dl_bytes),
                    "URR {u} of session {:#x} (all: {:?})",
                    s.up_seid,
                    s.urrs
                        .keys()
                        .map(|x| (*x, model.usage(s.up_seid, *x), dp.usage(s.up_seid, *x)))
                        .collect::<Vec<_>>(),
                );
            }
        }
        for s in installed {
            model.remove(&s);
            dp.remove(&s);
        }
    }
    eprintln!("differential: {done} frames agree: {by_verdict:?}; keys: {places:?}");
    assert_eq!(places.len(), 5, "keys in every place: {places:?}");
    // The generator must reach every outcome that matters.
    for k in [
        "forward",
        "encap",
        "encap v6",
        "buffer",
        "redirect",
        "drop redirect_not_http",
        "pass",
        "drop no_pdr",
        "drop spoofed_source",
        "drop to_upf",
        "drop core_protocol",
        "drop unknown_teid",
        "drop malformed_gtpu",
        "drop malformed_ip",
        "drop far_drop",
        "drop gate_closed",
        "drop mtu_exceeded",
        "icmp encap",
        "icmp forward",
        "icmp ttl encap",
        "icmp ttl forward",
    ] {
        if cases >= 20_000 {
            assert!(
                by_verdict.get(k).copied().unwrap_or(0) > 0,
                "no case reached {k}: {by_verdict:?}"
            );
        }
    }
    let _ = MapFlags::ANY;
    let _ = dp.skel().maps.stats.map_type();
}
