//! PFCP messages as particular control planes send them, where they deviate from TS 29.244
//! or use what few others do (docs/interop.md names each peer and what upfd does with it).
//! Written octet by octet, not through the codec, so that nothing the codec does can shape
//! them: they are what the tests of upfd's tolerance feed it, as bytes and in captures.
//!
//! - [`oai`]: OAI's SMF and SPGW-C: a CHOOSE F-TEID with neither V4 nor V6 (IE length 1),
//!   Recovery Time Stamps that change with every heartbeat, label-encoded Network
//!   Instances "access.oai.org" / "core.oai.org", the downlink PDR in a modification.
//! - [`legacy`]: a pre-Rel-16 SMF that asks the UPF to allocate the UE address with V4
//!   or V6 and the unspecified address (no CHV4 / CHV6 before Rel-16).
//! - [`ims`]: a vendor SMF over IPv6 with IMS bearers: three QERs (flow MBR, session
//!   AMBR, gate) and three URRs on each PDR, Activate Predefined Rules, and the spare top
//!   bit of the UE IP Address flags set; URRs created with bit 8 of their IDs set.
//! - [`free5gc`]: free5GC's SMF: SDF filters with direction `in`; (an early version) a
//!   FAR with FORW and no Forwarding Parameters.
//!
//! And from [`oai`] too: Update FAR with Apply Action NOCP alone (the 4G SPGW-C), URR 0
//! created and URR 1 named (the 5G SMF with an uplink classifier).

use std::net::{Ipv4Addr, Ipv6Addr};

use pfcp::ie::types as t;
use pfcp::message::message_type as mt;

/// One IE: type, length, value.
pub fn ie(ie_type: u16, value: &[u8]) -> Vec<u8> {
    let mut v = ie_type.to_be_bytes().to_vec();
    v.extend_from_slice(&(value.len() as u16).to_be_bytes());
    v.extend_from_slice(value);
    v
}

/// A grouped IE of `children`.
pub fn group(ie_type: u16, children: &[Vec<u8>]) -> Vec<u8> {
    ie(ie_type, &children.concat())
}

/// A node message (S = 0): version 1, no FO/MP.
pub fn node_message(message_type: u8, seq: u32, ies: &[Vec<u8>]) -> Vec<u8> {
    let body = ies.concat();
    let mut m = vec![0x20, message_type];
    m.extend_from_slice(&((4 + body.len()) as u16).to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes()[1..]);
    m.push(0);
    m.extend_from_slice(&body);
    m
}

/// A session message (S = 1) to `seid`.
pub fn session_message(message_type: u8, seid: u64, seq: u32, ies: &[Vec<u8>]) -> Vec<u8> {
    let body = ies.concat();
    let mut m = vec![0x21, message_type];
    m.extend_from_slice(&((12 + body.len()) as u16).to_be_bytes());
    m.extend_from_slice(&seid.to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes()[1..]);
    m.push(0);
    m.extend_from_slice(&body);
    m
}

/// A name as DNS labels (clause 8.2.4 refers to TS 23.003 clause 9.1).
pub fn labels(name: &str) -> Vec<u8> {
    let mut v = Vec::new();
    for l in name.split('.') {
        v.push(l.len() as u8);
        v.extend_from_slice(l.as_bytes());
    }
    v
}

fn node_id_v4(a: Ipv4Addr) -> Vec<u8> {
    let mut v = vec![0];
    v.extend_from_slice(&a.octets());
    ie(t::NODE_ID, &v)
}

fn node_id_v6(a: Ipv6Addr) -> Vec<u8> {
    let mut v = vec![1];
    v.extend_from_slice(&a.octets());
    ie(t::NODE_ID, &v)
}

fn fseid_v4(seid: u64, a: Ipv4Addr) -> Vec<u8> {
    let mut v = vec![0x02];
    v.extend_from_slice(&seid.to_be_bytes());
    v.extend_from_slice(&a.octets());
    ie(t::FSEID, &v)
}

fn fseid_v6(seid: u64, a: Ipv6Addr) -> Vec<u8> {
    let mut v = vec![0x01];
    v.extend_from_slice(&seid.to_be_bytes());
    v.extend_from_slice(&a.octets());
    ie(t::FSEID, &v)
}

fn rts(ts: u32) -> Vec<u8> {
    ie(t::RECOVERY_TIME_STAMP, &ts.to_be_bytes())
}

fn u16_ie(ie_type: u16, x: u16) -> Vec<u8> {
    ie(ie_type, &x.to_be_bytes())
}

fn u32_ie(ie_type: u16, x: u32) -> Vec<u8> {
    ie(ie_type, &x.to_be_bytes())
}

fn ue_v4(flags: u8, a: Ipv4Addr) -> Vec<u8> {
    let mut v = vec![flags];
    v.extend_from_slice(&a.octets());
    ie(t::UE_IP_ADDRESS, &v)
}

fn ue_v6(flags: u8, a: Ipv6Addr) -> Vec<u8> {
    let mut v = vec![flags];
    v.extend_from_slice(&a.octets());
    ie(t::UE_IP_ADDRESS, &v)
}

fn ohc_v4(teid: u32, peer: Ipv4Addr) -> Vec<u8> {
    let mut v = vec![0x01, 0x00];
    v.extend_from_slice(&teid.to_be_bytes());
    v.extend_from_slice(&peer.octets());
    ie(t::OUTER_HEADER_CREATION, &v)
}

fn ohc_v6(teid: u32, peer: Ipv6Addr) -> Vec<u8> {
    let mut v = vec![0x02, 0x00];
    v.extend_from_slice(&teid.to_be_bytes());
    v.extend_from_slice(&peer.octets());
    ie(t::OUTER_HEADER_CREATION, &v)
}

/// Create PDR: PDR ID, Precedence, a PDI of `pdi`, then `rest` (Outer Header Removal,
/// FAR ID, ...).
fn create_pdr(id: u16, precedence: u32, pdi: &[Vec<u8>], rest: &[Vec<u8>]) -> Vec<u8> {
    let mut v = vec![
        u16_ie(t::PDR_ID, id),
        u32_ie(t::PRECEDENCE, precedence),
        group(t::PDI, pdi),
    ];
    v.extend_from_slice(rest);
    group(t::CREATE_PDR, &v)
}

/// Create FAR `id` that forwards (FORW, one octet) with Forwarding Parameters `fp`.
fn forwarding_far(id: u32, fp: &[Vec<u8>]) -> Vec<u8> {
    group(
        t::CREATE_FAR,
        &[
            u32_ie(t::FAR_ID, id),
            ie(t::APPLY_ACTION, FORW),
            group(t::FORWARDING_PARAMETERS, fp),
        ],
    )
}

/// Apply Action FORW, one octet.
const FORW: &[u8] = &[0x02];
const ACCESS: &[u8] = &[0];
const CORE: &[u8] = &[1];

/// Session Deletion Request (clause 7.5.6): no IEs.
pub fn session_deletion(seq: u32, up_seid: u64) -> Vec<u8> {
    session_message(mt::SESSION_DELETION_REQUEST, up_seid, seq, &[])
}

/// OAI's SMF (5G) and SPGW-C (4G).
pub mod oai {
    use super::*;

    /// The Network Instances OAI's configuration names by default, label-encoded.
    pub const ACCESS_NI: &str = "access.oai.org";
    pub const CORE_NI: &str = "core.oai.org";

    /// Association Setup Request: Node ID, Recovery Time Stamp (the current time at each
    /// try), CP Function Features LOAD and OVRL.
    pub fn association_setup_request(seq: u32, node: Ipv4Addr, ts: u32) -> Vec<u8> {
        node_message(
            mt::ASSOCIATION_SETUP_REQUEST,
            seq,
            &[
                node_id_v4(node),
                rts(ts),
                ie(t::CP_FUNCTION_FEATURES, &[0x03]),
            ],
        )
    }

    /// Heartbeat Request with `ts` as its Recovery Time Stamp: OAI's SMF puts the current
    /// time there each time (smf_n4::send_heartbeat_request), so it grows by the
    /// heartbeat period from one to the next.
    pub fn heartbeat_request(seq: u32, ts: u32) -> Vec<u8> {
        node_message(mt::HEARTBEAT_REQUEST, seq, &[rts(ts)])
    }

    /// Heartbeat Response (its Recovery Time Stamp is the constant one).
    pub fn heartbeat_response(seq: u32, ts: u32) -> Vec<u8> {
        node_message(mt::HEARTBEAT_RESPONSE, seq, &[rts(ts)])
    }

    /// Session Establishment Request with the uplink PDR only: its F-TEID is CH alone
    /// (flags 0x04, IE length 1: neither V4 nor V6, which clause 8.2.3 asks for), the UE
    /// address as source, Outer Header Removal GTP-U/UDP/IPv4, a FAR to the core network.
    pub fn session_establishment(seq: u32, node: Ipv4Addr, cp_seid: u64, ue: Ipv4Addr) -> Vec<u8> {
        uplink_establishment(seq, node, cp_seid, ue, 0x04, &[], &[], &[])
    }

    /// [`session_establishment`]'s request with F-TEID flags `fteid`, and `pdr`, `far`
    /// and `ies` after the uplink PDR's, its FAR's and the request's own IEs (before
    /// PDN Type).
    #[allow(clippy::too_many_arguments)]
    fn uplink_establishment(
        seq: u32,
        node: Ipv4Addr,
        cp_seid: u64,
        ue: Ipv4Addr,
        fteid: u8,
        pdr: &[Vec<u8>],
        far: &[Vec<u8>],
        ies: &[Vec<u8>],
    ) -> Vec<u8> {
        let mut rest = vec![ie(t::OUTER_HEADER_REMOVAL, &[0]), u32_ie(t::FAR_ID, 1)];
        rest.extend_from_slice(pdr);
        let pdr = create_pdr(
            1,
            0,
            &[
                ie(t::SOURCE_INTERFACE, ACCESS),
                ie(t::FTEID, &[fteid]),
                ie(t::NETWORK_INSTANCE, &labels(ACCESS_NI)),
                ue_v4(0x02, ue),
            ],
            &rest,
        );
        let mut fp = vec![
            ie(t::DESTINATION_INTERFACE, CORE),
            ie(t::NETWORK_INSTANCE, &labels(CORE_NI)),
        ];
        fp.extend_from_slice(far);
        let mut all = vec![
            node_id_v4(node),
            fseid_v4(cp_seid, node),
            pdr,
            forwarding_far(1, &fp),
        ];
        all.extend_from_slice(ies);
        all.push(ie(t::PDN_TYPE, &[1]));
        session_message(mt::SESSION_ESTABLISHMENT_REQUEST, 0, seq, &all)
    }

    /// Session Modification Request that adds the downlink: a PDR on the UE address
    /// (S/D set) and a FAR with the gNB's tunnel.
    pub fn session_modification_downlink(
        seq: u32,
        up_seid: u64,
        ue: Ipv4Addr,
        gnb: Ipv4Addr,
        gnb_teid: u32,
    ) -> Vec<u8> {
        let pdr = create_pdr(
            2,
            0,
            &[
                ie(t::SOURCE_INTERFACE, CORE),
                ie(t::NETWORK_INSTANCE, &labels(CORE_NI)),
                ue_v4(0x06, ue),
            ],
            &[u32_ie(t::FAR_ID, 2)],
        );
        let far = forwarding_far(
            2,
            &[
                ie(t::DESTINATION_INTERFACE, ACCESS),
                ie(t::NETWORK_INSTANCE, &labels(ACCESS_NI)),
                ohc_v4(gnb_teid, gnb),
            ],
        );
        session_message(mt::SESSION_MODIFICATION_REQUEST, up_seid, seq, &[pdr, far])
    }

    /// Session Modification Request from OAI's 4G SPGW-C when the UE goes idle: Update
    /// FAR `far_id` with Apply Action NOCP alone (one octet 0x08: neither BUFF, FORW nor
    /// DROP), meaning "buffer and tell me" (TS 23.214 pairs NOCP with BUFF).
    pub fn update_far_nocp(seq: u32, up_seid: u64, far_id: u32) -> Vec<u8> {
        session_message(
            mt::SESSION_MODIFICATION_REQUEST,
            up_seid,
            seq,
            &[group(
                t::UPDATE_FAR,
                &[u32_ie(t::FAR_ID, far_id), ie(t::APPLY_ACTION, &[0x08])],
            )],
        )
    }

    /// Session Establishment Request of OAI's SMF steering the UE to a captive portal:
    /// [`session_establishment`] whose FAR 1 forwards with Redirect Information
    /// (clause 8.2.20: Redirect Address Type `address_type`, Redirect Server Address
    /// `address`).
    pub fn session_establishment_redirect(
        seq: u32,
        node: Ipv4Addr,
        cp_seid: u64,
        ue: Ipv4Addr,
        address_type: u8,
        address: &str,
    ) -> Vec<u8> {
        let mut redirect = vec![address_type];
        redirect.extend_from_slice(&(address.len() as u16).to_be_bytes());
        redirect.extend_from_slice(address.as_bytes());
        let redirect = ie(t::REDIRECT_INFORMATION, &redirect);
        uplink_establishment(seq, node, cp_seid, ue, 0x05, &[], &[redirect], &[])
    }

    /// Session Establishment Request of OAI's SMF with an uplink classifier (2023): the
    /// uplink PDR of [`session_establishment`] names URR 1, and the request creates URR
    /// 0 (volume, periodic every 60 s) instead.
    pub fn session_establishment_ulcl(
        seq: u32,
        node: Ipv4Addr,
        cp_seid: u64,
        ue: Ipv4Addr,
    ) -> Vec<u8> {
        let urr = group(
            t::CREATE_URR,
            &[
                u32_ie(t::URR_ID, 0),
                ie(t::MEASUREMENT_METHOD, &[0x02]),
                ie(t::REPORTING_TRIGGERS, &[0x01, 0x00]),
                u32_ie(t::MEASUREMENT_PERIOD, 60),
            ],
        );
        uplink_establishment(
            seq,
            node,
            cp_seid,
            ue,
            0x04,
            &[u32_ie(t::URR_ID, 1)],
            &[],
            &[urr],
        )
    }
}

/// A pre-Rel-16 SMF: no CHV4 / CHV6 in the UE IP Address (clause 8.2.62 has them from
/// Rel-16), so it asks the UPF to allocate with V4 or V6 set and the unspecified address.
pub mod legacy {
    use super::*;

    /// Session Establishment Request: an uplink PDR that CHOOSEs an IPv4 F-TEID, a
    /// downlink PDR whose UE IP Address is 0.0.0.0 (`v6` false: V4 | S/D) or :: (`v6`
    /// true: V6 | S/D), in Network Instance `ni` (plain text), FARs both ways (the
    /// downlink one buffering until the gNB is known).
    pub fn session_establishment(
        seq: u32,
        node: Ipv4Addr,
        cp_seid: u64,
        ni: &str,
        v6: bool,
    ) -> Vec<u8> {
        let ue = if v6 {
            ue_v6(0x05, Ipv6Addr::UNSPECIFIED)
        } else {
            ue_v4(0x06, Ipv4Addr::UNSPECIFIED)
        };
        let ul = create_pdr(
            1,
            255,
            &[
                ie(t::SOURCE_INTERFACE, ACCESS),
                ie(t::FTEID, &[0x05]),
                ie(t::NETWORK_INSTANCE, ni.as_bytes()),
            ],
            &[ie(t::OUTER_HEADER_REMOVAL, &[0]), u32_ie(t::FAR_ID, 1)],
        );
        let dl = create_pdr(
            2,
            255,
            &[
                ie(t::SOURCE_INTERFACE, CORE),
                ie(t::NETWORK_INSTANCE, ni.as_bytes()),
                ue,
            ],
            &[u32_ie(t::FAR_ID, 2)],
        );
        let far_ul = forwarding_far(1, &[ie(t::DESTINATION_INTERFACE, CORE)]);
        // BUFF: the gNB's tunnel comes in a modification.
        let far_dl = group(
            t::CREATE_FAR,
            &[u32_ie(t::FAR_ID, 2), ie(t::APPLY_ACTION, &[0x04])],
        );
        session_message(
            mt::SESSION_ESTABLISHMENT_REQUEST,
            0,
            seq,
            &[
                node_id_v4(node),
                fseid_v4(cp_seid, node),
                ul,
                dl,
                far_ul,
                far_dl,
            ],
        )
    }
}

/// A vendor SMF over IPv6 with IMS bearers.
pub mod ims {
    use super::*;

    /// The QER IDs of each PDR: flow MBR, session AMBR, gate (with the QFI).
    pub const QERS: [u32; 3] = [1, 2, 3];
    /// The URR IDs of each PDR: volume (threshold), time, and the bearer's total.
    pub const URRS: [u32; 3] = [1, 2, 3];
    /// Flow MBR of QER 1, kbit/s, both directions.
    pub const FLOW_MBR_KBPS: u64 = 128;

    fn qer(id: u32, mbr_kbps: Option<u64>, qfi: Option<u8>) -> Vec<u8> {
        let mut v = vec![u32_ie(t::QER_ID, id), ie(t::GATE_STATUS, &[0x00])];
        if let Some(k) = mbr_kbps {
            let mut b = Vec::new();
            b.extend_from_slice(&k.to_be_bytes()[3..]);
            b.extend_from_slice(&k.to_be_bytes()[3..]);
            v.push(ie(t::MBR, &b));
        }
        if let Some(q) = qfi {
            v.push(ie(t::QFI, &[q]));
        }
        group(t::CREATE_QER, &v)
    }

    fn urr(id: u32, method: u8, triggers: [u8; 3], extra: Vec<Vec<u8>>) -> Vec<u8> {
        let mut v = vec![
            u32_ie(t::URR_ID, id),
            ie(t::MEASUREMENT_METHOD, &[method]),
            ie(t::REPORTING_TRIGGERS, &triggers),
        ];
        v.extend(extra);
        group(t::CREATE_URR, &v)
    }

    /// URR IDs with bit 8 of the first octet set, as the vendor SMF creates them in
    /// some deployments (volume, time, total).
    pub const HIGH_URRS: [u32; 3] = [0x8001_0009, 0x8001_000a, 0x8001_000b];

    /// Session Establishment Request: an uplink PDR that CHOOSEs an IPv6 F-TEID and a
    /// downlink PDR on the UE's IPv6 address, each with QERs [`QERS`], URRs [`URRS`] and
    /// Activate Predefined Rules `predefined` (one IE per name); the UE IP Address flags
    /// have their spare top bit set.
    pub fn session_establishment(
        seq: u32,
        node: Ipv6Addr,
        cp_seid: u64,
        ue: Ipv6Addr,
        gnb: Ipv6Addr,
        gnb_teid: u32,
        predefined: &[&str],
    ) -> Vec<u8> {
        session_establishment_with_urrs(seq, node, cp_seid, ue, gnb, gnb_teid, predefined, URRS)
    }

    /// The same with URR IDs `urrs` (created and named by both PDRs), e.g. [`HIGH_URRS`].
    #[allow(clippy::too_many_arguments)]
    pub fn session_establishment_with_urrs(
        seq: u32,
        node: Ipv6Addr,
        cp_seid: u64,
        ue: Ipv6Addr,
        gnb: Ipv6Addr,
        gnb_teid: u32,
        predefined: &[&str],
        urrs: [u32; 3],
    ) -> Vec<u8> {
        let pdr = |id: u16, pdi: &[Vec<u8>]| {
            let mut rest = Vec::new();
            if id == 1 {
                rest.push(ie(t::OUTER_HEADER_REMOVAL, &[1]));
            }
            rest.push(u32_ie(t::FAR_ID, u32::from(id)));
            rest.extend(urrs.iter().map(|u| u32_ie(t::URR_ID, *u)));
            rest.extend(QERS.iter().map(|q| u32_ie(t::QER_ID, *q)));
            rest.extend(
                predefined
                    .iter()
                    .map(|n| ie(t::ACTIVATE_PREDEFINED_RULES, n.as_bytes())),
            );
            create_pdr(id, 100, pdi, &rest)
        };
        let ul = pdr(
            1,
            &[
                ie(t::SOURCE_INTERFACE, ACCESS),
                ie(t::FTEID, &[0x06]),
                ie(t::NETWORK_INSTANCE, &labels("ims")),
                ue_v6(0x81, ue),
            ],
        );
        let dl = pdr(
            2,
            &[
                ie(t::SOURCE_INTERFACE, CORE),
                ie(t::NETWORK_INSTANCE, &labels("ims")),
                ue_v6(0x85, ue),
            ],
        );
        let far_ul = forwarding_far(
            1,
            &[
                ie(t::DESTINATION_INTERFACE, CORE),
                ie(t::NETWORK_INSTANCE, &labels("ims")),
            ],
        );
        let far_dl = forwarding_far(
            2,
            &[ie(t::DESTINATION_INTERFACE, ACCESS), ohc_v6(gnb_teid, gnb)],
        );
        let volume_threshold = {
            let mut v = vec![0x01];
            v.extend_from_slice(&(1u64 << 40).to_be_bytes());
            ie(t::VOLUME_THRESHOLD, &v)
        };
        session_message(
            mt::SESSION_ESTABLISHMENT_REQUEST,
            0,
            seq,
            &[
                node_id_v6(node),
                fseid_v6(cp_seid, node),
                ul,
                dl,
                far_ul,
                far_dl,
                // VOLUM with VOLTH; DURAT with TIMTH; VOLUM with no trigger.
                urr(urrs[0], 0x02, [0x02, 0x00, 0x00], vec![volume_threshold]),
                urr(
                    urrs[1],
                    0x01,
                    [0x04, 0x00, 0x00],
                    vec![u32_ie(t::TIME_THRESHOLD, 3600)],
                ),
                urr(urrs[2], 0x02, [0x00, 0x00, 0x00], vec![]),
                qer(1, Some(FLOW_MBR_KBPS), None),
                qer(2, Some(100_000), None),
                qer(3, None, Some(5)),
            ],
        )
    }

    /// Session Modification Request: Update PDR `pdr_id` with Deactivate Predefined Rules
    /// `name`.
    pub fn deactivate(seq: u32, up_seid: u64, pdr_id: u16, name: &str) -> Vec<u8> {
        update_pdr(seq, up_seid, pdr_id, t::DEACTIVATE_PREDEFINED_RULES, name)
    }

    /// Session Modification Request: Update PDR `pdr_id` with Activate Predefined Rules
    /// `name`.
    pub fn activate(seq: u32, up_seid: u64, pdr_id: u16, name: &str) -> Vec<u8> {
        update_pdr(seq, up_seid, pdr_id, t::ACTIVATE_PREDEFINED_RULES, name)
    }

    /// Session Modification Request after a handover: Update FAR `far_id` with the new
    /// gNB tunnel (Update Forwarding Parameters, Outer Header Creation GTP-U/UDP/IPv6).
    pub fn update_far_tunnel(
        seq: u32,
        up_seid: u64,
        far_id: u32,
        gnb: Ipv6Addr,
        gnb_teid: u32,
    ) -> Vec<u8> {
        session_message(
            mt::SESSION_MODIFICATION_REQUEST,
            up_seid,
            seq,
            &[group(
                t::UPDATE_FAR,
                &[
                    u32_ie(t::FAR_ID, far_id),
                    group(t::UPDATE_FORWARDING_PARAMETERS, &[ohc_v6(gnb_teid, gnb)]),
                ],
            )],
        )
    }

    fn update_pdr(seq: u32, up_seid: u64, pdr_id: u16, ie_type: u16, name: &str) -> Vec<u8> {
        session_message(
            mt::SESSION_MODIFICATION_REQUEST,
            up_seid,
            seq,
            &[group(
                t::UPDATE_PDR,
                &[u16_ie(t::PDR_ID, pdr_id), ie(ie_type, name.as_bytes())],
            )],
        )
    }
}

/// free5GC's SMF (Go). Its UPF is go-upf over the gtp5g kernel module.
pub mod free5gc {
    use super::*;

    /// The Flow Description of the extra downlink PDR: direction `in`, which TS 29.212
    /// clause 5.4.2 does not allow; gtp5g takes it and matches no packet with it.
    pub const FLOW_IN: &str = "permit in ip from 192.0.2.0/24 to assigned";

    /// Session Establishment Request: an uplink PDR (F-TEID chosen by the UPF, IPv4) with
    /// FAR 1 to the data network, a default downlink PDR 2 and, before it (precedence
    /// 32), downlink PDR 3 whose SDF filter is [`FLOW_IN`] and which counts in URR 3; both
    /// downlink PDRs forward with FAR 2 to the gNB. `bare_forw`: FAR 1 is FORW with no
    /// Forwarding Parameters at all (an early free5GC SMF), else it names the core.
    pub fn session_establishment(
        seq: u32,
        node: Ipv4Addr,
        cp_seid: u64,
        ue: Ipv4Addr,
        gnb: Ipv4Addr,
        gnb_teid: u32,
        bare_forw: bool,
    ) -> Vec<u8> {
        let ul = create_pdr(
            1,
            255,
            &[
                ie(t::SOURCE_INTERFACE, ACCESS),
                ie(t::FTEID, &[0x05]),
                ie(t::NETWORK_INSTANCE, b"internet"),
                ue_v4(0x02, ue),
            ],
            &[ie(t::OUTER_HEADER_REMOVAL, &[0]), u32_ie(t::FAR_ID, 1)],
        );
        let dl = create_pdr(
            2,
            255,
            &[
                ie(t::SOURCE_INTERFACE, CORE),
                ie(t::NETWORK_INSTANCE, b"internet"),
                ue_v4(0x06, ue),
            ],
            &[u32_ie(t::FAR_ID, 2)],
        );
        // SDF Filter: FD flag, spare octet, length, text (clause 8.2.5).
        let mut sdf = vec![0x01, 0x00];
        sdf.extend_from_slice(&(FLOW_IN.len() as u16).to_be_bytes());
        sdf.extend_from_slice(FLOW_IN.as_bytes());
        let dl_in = create_pdr(
            3,
            32,
            &[
                ie(t::SOURCE_INTERFACE, CORE),
                ie(t::NETWORK_INSTANCE, b"internet"),
                ue_v4(0x06, ue),
                ie(t::SDF_FILTER, &sdf),
            ],
            &[u32_ie(t::FAR_ID, 2), u32_ie(t::URR_ID, 3)],
        );
        let far_ul = if bare_forw {
            group(
                t::CREATE_FAR,
                &[u32_ie(t::FAR_ID, 1), ie(t::APPLY_ACTION, FORW)],
            )
        } else {
            forwarding_far(1, &[ie(t::DESTINATION_INTERFACE, CORE)])
        };
        let far_dl = forwarding_far(
            2,
            &[ie(t::DESTINATION_INTERFACE, ACCESS), ohc_v4(gnb_teid, gnb)],
        );
        let urr = group(
            t::CREATE_URR,
            &[
                u32_ie(t::URR_ID, 3),
                ie(t::MEASUREMENT_METHOD, &[0x02]),
                ie(t::REPORTING_TRIGGERS, &[0x00, 0x00]),
            ],
        );
        session_message(
            mt::SESSION_ESTABLISHMENT_REQUEST,
            0,
            seq,
            &[
                node_id_v4(node),
                fseid_v4(cp_seid, node),
                ul,
                dl,
                dl_in,
                far_ul,
                far_dl,
                urr,
                ie(t::PDN_TYPE, &[1]),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every message parses (typed and generic) and re-encodes to its octets.
    #[test]
    fn every_quirk_parses_and_re_encodes_identically() {
        let v4 = Ipv4Addr::new(192, 0, 2, 1);
        let v6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        let all = [
            oai::association_setup_request(1, v4, 7),
            oai::heartbeat_request(2, 8),
            oai::heartbeat_response(3, 9),
            oai::session_establishment(4, v4, 1, Ipv4Addr::new(10, 45, 0, 2)),
            oai::session_modification_downlink(5, 9, Ipv4Addr::new(10, 45, 0, 2), v4, 7),
            legacy::session_establishment(6, v4, 2, "internet", false),
            legacy::session_establishment(7, v4, 3, "internet", true),
            ims::session_establishment(8, v6, 4, v6, v6, 5, &["ims-gate"]),
            ims::deactivate(9, 9, 1, "ims-gate"),
            ims::activate(10, 9, 1, "ims-gate"),
            session_deletion(11, 9),
            oai::update_far_nocp(12, 9, 2),
            oai::session_establishment_redirect(
                18,
                v4,
                9,
                Ipv4Addr::new(10, 45, 0, 6),
                2,
                "http://portal.example/",
            ),
            oai::session_establishment_ulcl(13, v4, 5, Ipv4Addr::new(10, 45, 0, 3)),
            ims::session_establishment_with_urrs(14, v6, 6, v6, v6, 7, &[], ims::HIGH_URRS),
            ims::update_far_tunnel(15, 9, 2, v6, 8),
            free5gc::session_establishment(16, v4, 7, Ipv4Addr::new(10, 45, 0, 4), v4, 9, false),
            free5gc::session_establishment(17, v4, 8, Ipv4Addr::new(10, 45, 0, 5), v4, 9, true),
        ];
        for (i, m) in all.iter().enumerate() {
            let g = pfcp::Message::parse(m).unwrap_or_else(|e| panic!("#{i}: {e}"));
            assert_eq!(&g.emit(), m, "#{i} re-encodes");
            pfcp::msg::Msg::parse(m).unwrap_or_else(|e| panic!("#{i} typed: {e}"));
        }
    }
}
