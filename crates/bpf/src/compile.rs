//! The compiler: one session's rules (`upf::rules::Session`, TS 29.244 clause 5.2) to the
//! entries of the data path's tables (bpf/include/upf_maps.h), as pure functions. It
//! decides what the XDP programs will find: the lookup keys a session occupies, the PDRs
//! each key reaches in precedence order, and every PDR, FAR, QER and SDF match entry.
//! The installer (datapath.rs) gives the entries table indices, links them and writes
//! them; nothing here touches a map.
//!
//! The reference model (`upf::model`) reads the same rules on its own, packet by packet;
//! the differential test (tests/differential.rs) holds the two together, and
//! docs/testing.md lists the compiler bugs it has been shown to catch.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use pfcp::ie::OuterHeaderCreation;
use smallvec::SmallVec;
use upf::abi;
use upf::fastpath::{Config, FastPathError, NiAddresses};
use upf::pfd::PfdTable;
use upf::rules::{interface, Far, Pdi, Pdr, Qer, Session};
use upf::sdf::{Address, Endpoint, PortRange, SdfRule};

use crate::upf::types;

/// Our GTP-U addresses, the outer source of the tunnels we build: towards the access
/// network the N3 address, towards the core (other UPFs) the N9 address, else N3; in a
/// Network Instance with addresses of its own on that side, those.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Addresses {
    pub n3_v4: Option<Ipv4Addr>,
    pub n9_v4: Option<Ipv4Addr>,
    pub n3_v6: Option<Ipv6Addr>,
    pub n9_v6: Option<Ipv6Addr>,
    pub network_instances: Vec<NiAddresses>,
}

impl From<&Config> for Addresses {
    fn from(c: &Config) -> Self {
        Addresses {
            n3_v4: c.n3_v4,
            n9_v4: c.n9_v4,
            n3_v6: c.n3_v6,
            n9_v6: c.n9_v6,
            network_instances: c.network_instances.clone(),
        }
    }
}

/// Where a FAR's G-PDUs go and from which of our addresses (Outer Header Creation, TS
/// 29.244 clause 8.2.56).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tunnel {
    pub peer: IpAddr,
    /// Our address: the outer source.
    pub src: IpAddr,
    pub teid: u32,
    pub port: u16,
}

/// The tunnel for an Outer Header Creation towards `destination_interface` in Network
/// Instance `ni`: GTP-U/UDP/IPv4 when it asks for it and we have an IPv4 address on that
/// side, else GTP-U/UDP/IPv6 on the same terms (a dual-stack peer, as Open5GS describes
/// gNBs, gets IPv4). None: we cannot build it.
pub fn tunnel(
    a: &Addresses,
    destination_interface: u8,
    ni: Option<&str>,
    o: &OuterHeaderCreation,
) -> Option<Tunnel> {
    let access = destination_interface == interface::ACCESS;
    let own = ni
        .and_then(|n| a.network_instances.iter().find(|x| x.name == n))
        .and_then(|x| x.side(access));
    let (src4, src6) = match own {
        Some(x) => x,
        None if access => (a.n3_v4, a.n3_v6),
        None => (a.n9_v4.or(a.n3_v4), a.n9_v6.or(a.n3_v6)),
    };
    let (peer, src) = match (o.ipv4, src4, o.ipv6, src6) {
        (Some(p), Some(s), _, _) if o.has(OuterHeaderCreation::GTPU_UDP_IPV4) => {
            (IpAddr::V4(p), IpAddr::V4(s))
        }
        (_, _, Some(p), Some(s)) if o.has(OuterHeaderCreation::GTPU_UDP_IPV6) => {
            (IpAddr::V6(p), IpAddr::V6(s))
        }
        _ => return None,
    };
    Some(Tunnel {
        peer,
        src,
        teid: o.teid.unwrap_or(0),
        port: o.port.unwrap_or(2152),
    })
}

/// A lookup key of the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key {
    /// Uplink (N3, N9): a local TEID.
    Teid(u32),
    /// Downlink (N6): a UE address.
    Ue(IpAddr),
    /// Downlink: a framed route (longest prefix match).
    Framed(IpNet),
}

/// One key and the PDRs it reaches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRules {
    pub key: Key,
    /// The first PDR (by ID) that brings the key, named when the key is refused.
    pub pdr_id: u16,
    /// The PDRs the key reaches, best precedence first (lower value, then lower ID).
    pub pdrs: SmallVec<[u16; 2]>,
    /// Whether the PDRs see packets as uplink (the UE the source): the first one's
    /// Source Interface is Access.
    pub uplink: bool,
}

/// A PDR's entry before the installer links it to table indices.
#[derive(Debug, Clone)]
pub struct PdrEntry {
    pub id: u16,
    pub far_id: Option<u32>,
    pub qer_ids: SmallVec<[u32; 2]>,
    pub urr_ids: SmallVec<[u32; 2]>,
    /// Its SDF filters' match entries, in order; empty: no SDF condition.
    pub sdf: Vec<types::sdf_match>,
    /// Its Application ID's index (upf::pfd::App::index), 0: none.
    pub app: u16,
    /// QFI, Outer Header Removal; `far`, `qer`, `urr` and `sdf` are left 0 for
    /// [`PdrEntry::linked`].
    pub value: types::pdr,
}

impl PdrEntry {
    /// The entry with its references as table indices: `index_of` gives a FAR's, QER's
    /// or URR's (0: none), `sdf` the first of its SDF entries.
    pub fn linked(&self, index_of: impl Fn(Rule) -> u32, sdf: u32) -> types::pdr {
        let mut v = self.value;
        v.far = self.far_id.map_or(0, |f| index_of(Rule::Far(f)));
        for (i, q) in self.qer_ids.iter().enumerate() {
            v.qer[i] = index_of(Rule::Qer(*q));
        }
        for (i, u) in self.urr_ids.iter().enumerate() {
            v.urr[i] = index_of(Rule::Urr(*u));
        }
        if !self.sdf.is_empty() {
            v.sdf = sdf;
            v.n_sdf = self.sdf.len() as u8;
        }
        v
    }
}

/// A rule a PDR refers to, for [`PdrEntry::linked`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    Far(u32),
    Qer(u32),
    Urr(u32),
}

/// A session's table entries.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub seid: u64,
    /// Every key, uplink TEIDs first, then UE addresses, then framed routes.
    pub keys: Vec<KeyRules>,
    pub pdrs: Vec<PdrEntry>,
    pub fars: Vec<(u32, types::far)>,
    /// QERs with their rates in the data path's units and leases for its lanes.
    pub qers: Vec<(u32, types::qer_params)>,
    pub urrs: Vec<u32>,
    /// The session's UE addresses for the uplink source check: the first IPv4 address
    /// and the first IPv6 prefix (64 bits unless the PDI says) of its PDRs by ID.
    pub ue_v4: Option<Ipv4Addr>,
    pub ue_v6: Option<(Ipv6Addr, u8)>,
    /// SR_APPS and SR_APP_REPORT: a PDR of the session names an application, and one
    /// with a URR whose reporting triggers include START (TS 29.244 clause 5.11.1,
    /// 8.2.19). Session-wide: downlink packets are classified too (DNS answers, learned
    /// addresses) even where only uplink PDRs name one.
    pub app_flags: u32,
}

impl Compiled {
    /// The position in `k.pdrs` of the PDR its rule set holds a copy of (with its FAR):
    /// the first without an Application ID, what traffic of no application (most
    /// traffic) meets; the first if every one has one. Without application PDRs: 0.
    pub fn hot_at(&self, k: &KeyRules) -> usize {
        k.pdrs
            .iter()
            .position(|id| {
                self.pdrs
                    .iter()
                    .find(|p| p.id == *id)
                    .is_some_and(|p| p.app == 0)
            })
            .unwrap_or(0)
    }

    /// A PDR's entry by ID.
    pub fn pdr(&self, id: u16) -> Option<&PdrEntry> {
        self.pdrs.iter().find(|p| p.id == id)
    }

    /// A FAR's entry by ID.
    pub fn far(&self, id: u32) -> Option<&types::far> {
        self.fars.iter().find(|(i, _)| *i == id).map(|(_, f)| f)
    }

    /// The primary keys of a record (its two key lines): its first TEID key, and its
    /// first IPv4 UE key if that is the session's source-check address (the record has
    /// one field for both), else none.
    pub fn primary_keys(&self) -> [Option<&KeyRules>; 2] {
        [
            self.keys.iter().find(|k| matches!(k.key, Key::Teid(_))),
            self.keys
                .iter()
                .find(|k| matches!(k.key, Key::Ue(IpAddr::V4(_))))
                .filter(|k| match k.key {
                    Key::Ue(IpAddr::V4(a)) => self.ue_v4.is_none_or(|x| x == a),
                    _ => false,
                }),
        ]
    }

    /// The QER and URR a new record holds (its home ones, [`RecordPlan`]): the first of
    /// its first primary key's hot PDR.
    pub fn home_candidates(&self) -> (Option<u32>, Option<u32>) {
        let hot = self
            .primary_keys()
            .into_iter()
            .flatten()
            .next()
            .and_then(|k| k.pdrs.get(self.hot_at(k)))
            .and_then(|id| self.pdr(*id));
        (
            hot.and_then(|p| p.qer_ids.first().copied()),
            hot.and_then(|p| p.urr_ids.first().copied()),
        )
    }

    /// The session's record, placed as `p` says.
    pub fn record(&self, p: &RecordPlan<'_>) -> types::sess_rec {
        let mut r = types::sess_rec {
            seid: self.seid,
            flags: (self.app_flags | u32::from(p.urr_flags)) as u16,
            epoch: p.epoch,
            list: p.lists,
            ..Default::default()
        };
        if let Some(a) = self.ue_v4 {
            r.flags |= abi::SR_UE_V4 as u16;
            r.ue_v4 = u32::from_ne_bytes(a.octets());
        }
        if let Some((a, l)) = self.ue_v6 {
            r.ue_v6 = a.octets();
            // 0 is "none" in the table: a /0 prefix (any source) is not representable.
            r.ue_v6_len = l.clamp(1, 128);
        }
        for (line, k) in p.keys.iter().enumerate() {
            let Some(k) = k else {
                continue;
            };
            match k.key {
                Key::Teid(t) => r.teid = t,
                Key::Ue(IpAddr::V4(a)) => {
                    r.ue_v4 = u32::from_ne_bytes(a.octets());
                    r.flags |= abi::SR_UE_KEY as u16;
                }
                _ => {}
            }
            let at = self.hot_at(k);
            r.n_pdrs[line] = k.pdrs.len() as u8;
            r.hot_at[line] = at as u8;
            if let Some(pdr) = k.pdrs.get(at).and_then(|id| self.pdr(*id)) {
                let mut d = self.dir_rules(pdr, k.uplink, p);
                if let Some([a, b]) = self
                    .apps_before_hot(k)
                    .filter(|_| at > 0 && d.flags & abi::DR_COLD as u8 == 0)
                {
                    d.flags |= abi::DR_APPS as u8;
                    d.more = u32::from(a) | u32::from(b) << 16;
                }
                r.dir[line] = d;
            }
        }
        if let Some((_, q)) = p
            .home_qer
            .and_then(|id| self.qers.iter().find(|(i, _)| *i == id))
        {
            r.home = *q;
        }
        r.home.urr_id = p.home_urr.unwrap_or(0);
        // What a restarted upfd reads back (datapath/reuse.rs): which home rules the
        // record holds, and whether its lanes ever counted for a URR.
        r.home.home = (p.home_qer.is_some() as u8 * abi::HOME_QER as u8)
            | (p.home_urr.is_some() as u8 * abi::HOME_URR as u8)
            | ((p.lanes_used || p.home_urr.is_some()) as u8 * abi::HOME_LANES_USED as u8);
        r.home.seid = self.seid;
        r
    }

    /// The applications of a key's PDRs before its hot one, if they are all application
    /// PDRs of at most two applications (abi::DR_APPS): what a packet must be of, or
    /// match a flow description of, to need any PDR but the hot one before it.
    fn apps_before_hot(&self, k: &KeyRules) -> Option<[u16; 2]> {
        let at = self.hot_at(k);
        let mut apps = [0u16; 2];
        for id in &k.pdrs[..at] {
            let a = self.pdr(*id)?.app;
            if a == 0 {
                return None;
            }
            if !apps.contains(&a) {
                *apps.iter_mut().find(|x| **x == 0)? = a;
            }
        }
        Some(apps)
    }

    /// A key's hot PDR and its FAR as a line of the record.
    fn dir_rules(&self, pdr: &PdrEntry, up: bool, p: &RecordPlan<'_>) -> types::dir_rules {
        let mut d = types::dir_rules {
            pdr_id: pdr.id,
            qfi: pdr.value.qfi,
            ohr: pdr.value.ohr,
            ohr_ext: pdr.value.ohr_ext,
            n_sdf: pdr.sdf.len() as u8,
            flags: abi::DR_VALID as u8,
            up: up as u8,
            ..Default::default()
        };
        if !pdr.sdf.is_empty() {
            d.sdf = p.sdf.get(&pdr.id).copied().unwrap_or(0);
        }
        if needs_cold(pdr, p.home_qer, p.home_urr) {
            d.flags |= abi::DR_COLD as u8;
            d.more = p.cold.get(&pdr.id).copied().unwrap_or(0);
        } else {
            if !pdr.qer_ids.is_empty() {
                d.flags |= abi::DR_QER_HOME as u8;
            }
            if !pdr.urr_ids.is_empty() {
                d.flags |= abi::DR_URR_HOME as u8;
            }
        }
        if let Some(f) = pdr.far_id.and_then(|id| self.far(id)) {
            d.far_id = f.id;
            d.action = f.action;
            d.dest = f.dest;
            d.ohc = f.ohc;
            d.far_flags = f.flags;
            d.tos = f.tos;
            d.port = f.port;
            d.teid = f.teid;
            d.peer = f.peer;
            d.src = f.src;
        }
        d
    }

    /// The PDRs whose full entries the programs read from the `pdrs` table: a primary
    /// key's PDRs other than its hot one, its hot one when the record cannot hold it
    /// ([`needs_cold`]), and every PDR of the other keys.
    pub fn cold_pdrs(&self, home_qer: Option<u32>, home_urr: Option<u32>) -> Vec<u16> {
        let primary = self.primary_keys();
        let mut v: Vec<u16> = Vec::new();
        for k in &self.keys {
            let is_primary = primary.iter().flatten().any(|p| p.key == k.key);
            let at = self.hot_at(k);
            for (i, id) in k.pdrs.iter().enumerate() {
                let hot = is_primary && i == at;
                let cold = !hot
                    || self
                        .pdr(*id)
                        .is_some_and(|p| needs_cold(p, home_qer, home_urr));
                if cold && !v.contains(id) {
                    v.push(*id);
                }
            }
        }
        v
    }
}

/// Whether a hot PDR needs its full entry: it has QERs or URRs other than the home ones,
/// or more than one of either.
pub fn needs_cold(pdr: &PdrEntry, home_qer: Option<u32>, home_urr: Option<u32>) -> bool {
    let only_home = |ids: &[u32], home: Option<u32>| match ids {
        [] => true,
        [one] => Some(*one) == home,
        _ => false,
    };
    !only_home(&pdr.qer_ids, home_qer) || !only_home(&pdr.urr_ids, home_urr)
}

/// How a session's record is placed: its primary keys, its home QER and URR, the
/// handles of its cold entries, and the home URR's lease epochs and flags.
#[derive(Debug, Default)]
pub struct RecordPlan<'a> {
    /// The keys of the record's lines: [the TEID key, the IPv4 UE key].
    pub keys: [Option<&'a KeyRules>; 2],
    pub home_qer: Option<u32>,
    pub home_urr: Option<u32>,
    /// PDR ID -> its handle in `pdrs` (hot PDRs that need one, [`needs_cold`]).
    pub cold: HashMap<u16, u32>,
    /// PDR ID -> the first of its SDF entries in `sdfs`.
    pub sdf: HashMap<u16, u32>,
    /// Each line's PDR list in `pdr_lists` (0: the hot PDR alone).
    pub lists: [u32; 2],
    pub epoch: u32,
    /// SR_URR_QUOTA, SR_URR_THRESHOLD.
    pub urr_flags: u16,
    /// The entry's lanes counted for a home URR before (it may be gone): no other URR
    /// takes them over (its counts would start at theirs).
    pub lanes_used: bool,
}

/// Compile a session. Errors name the PDR the data path cannot hold.
/// `pfds` gives the index of each PDR's Application ID (one it does not know is refused).
/// `lanes`: the data path's lanes (leases are sized by them).
pub fn compile(
    s: &Session,
    addrs: &Addresses,
    pfds: &PfdTable,
    lanes: u32,
) -> Result<Compiled, FastPathError> {
    // Each PDR with its effective PDI (completed by its Traffic Endpoints), by PDR ID.
    let pdis: Vec<(&Pdr, Pdi)> = s.pdrs.values().map(|p| (p, s.effective_pdi(p))).collect();
    let mut pdrs = Vec::with_capacity(pdis.len());
    let mut app_flags = 0;
    for (p, pdi) in &pdis {
        let e = pdr_entry(p, pdi, pfds)?;
        if e.app != 0 {
            app_flags |= abi::SR_APPS;
            let start = |u: &u32| {
                s.urrs.get(u).is_some_and(|u| {
                    u.rule
                        .reporting_triggers
                        .get(pfcp::ie::reporting_triggers::START)
                })
            };
            if p.urr_ids.iter().any(start) {
                app_flags |= abi::SR_APP_REPORT;
            }
        }
        pdrs.push(e);
    }
    let (ue_v4, ue_v6) = ue_addresses(&pdis);
    Ok(Compiled {
        seid: s.up_seid,
        keys: keys(&pdis)?,
        pdrs,
        fars: s.fars.values().map(|f| (f.id, far(f, addrs))).collect(),
        qers: s.qers.values().map(|q| (q.id, qer(q, lanes))).collect(),
        urrs: s.urrs.keys().copied().collect(),
        ue_v4,
        ue_v6,
        app_flags,
    })
}

/// The session's keys, each with the PDRs it reaches. A PDR with a local F-TEID is
/// reached by its TEID; a core-side PDR without one by its UE addresses and framed
/// routes (there the UE address is the packets' destination whatever its S/D flag
/// says: pfcpsim leaves it clear). A UE address key also reaches the PDRs whose framed
/// route holds it; a framed route key those whose framed route holds the whole route.
fn keys(pdis: &[(&Pdr, Pdi)]) -> Result<Vec<KeyRules>, FastPathError> {
    let mut by_precedence: Vec<&(&Pdr, Pdi)> = pdis.iter().collect();
    by_precedence.sort_by_key(|(p, _)| (p.precedence, p.id));
    let mut keys: Vec<(Key, u16)> = Vec::new();
    let mut add = |k: Key, pdr: u16| {
        if !keys.iter().any(|(x, _)| *x == k) {
            keys.push((k, pdr));
        }
    };
    // Keys in PDR ID order: TEIDs, then UE addresses, then framed routes.
    for (p, pdi) in pdis {
        if let Some(f) = pdi.local_fteid {
            add(Key::Teid(f.teid), p.id);
        }
    }
    let downlink =
        |pdi: &Pdi| pdi.local_fteid.is_none() && pdi.source_interface != interface::ACCESS;
    for (p, pdi) in pdis {
        if downlink(pdi) {
            for a in pdi.ue_ips.iter().flat_map(|u| u.addrs()) {
                add(Key::Ue(a), p.id);
            }
        }
    }
    for (p, pdi) in pdis {
        if downlink(pdi) {
            for r in &pdi.framed_routes {
                add(Key::Framed(*r), p.id);
            }
        }
    }
    keys.into_iter()
        .map(|(key, pdr_id)| {
            let reached: SmallVec<[(u16, u8); 2]> = by_precedence
                .iter()
                .filter(|(_, pdi)| match key {
                    Key::Teid(t) => pdi.local_fteid.is_some_and(|f| f.teid == t),
                    Key::Ue(a) => {
                        downlink(pdi)
                            && (pdi.ue_ips.iter().any(|u| u.addrs().any(|x| x == a))
                                || pdi.framed_routes.iter().any(|r| r.contains(&a)))
                    }
                    Key::Framed(n) => {
                        downlink(pdi)
                            && pdi.framed_routes.iter().any(|r| {
                                r.contains(&n.network()) && r.prefix_len() <= n.prefix_len()
                            })
                    }
                })
                .map(|(p, pdi)| (p.id, pdi.source_interface))
                .collect();
            if reached.len() > abi::MAX_PDRS_PER_KEY as usize {
                return Err(FastPathError::Pdr {
                    pdr_id,
                    why: format!("more than {} PDRs on one lookup key", abi::MAX_PDRS_PER_KEY),
                });
            }
            Ok(KeyRules {
                key,
                pdr_id,
                uplink: reached
                    .first()
                    .is_some_and(|(_, i)| *i == interface::ACCESS),
                pdrs: reached.iter().map(|(id, _)| *id).collect(),
            })
        })
        .collect()
}

/// The first IPv4 address and the first IPv6 prefix among the session's PDRs by ID.
fn ue_addresses(pdis: &[(&Pdr, Pdi)]) -> (Option<Ipv4Addr>, Option<(Ipv6Addr, u8)>) {
    let (mut v4, mut v6) = (None, None);
    for (_, pdi) in pdis {
        for u in &pdi.ue_ips {
            v4 = v4.or(u.ipv4);
            v6 = v6.or(u
                .ipv6
                .map(|a| (a, u.ipv6_prefix_len.unwrap_or(64).min(128))));
        }
    }
    (v4, v6)
}

/// A PDR's entry: QFI, Outer Header Removal, the rules it names and its SDF entries.
fn pdr_entry(p: &Pdr, pdi: &Pdi, pfds: &PfdTable) -> Result<PdrEntry, FastPathError> {
    let refuse = |why: String| FastPathError::Pdr { pdr_id: p.id, why };
    let app = match &pdi.application_id {
        Some(id) => pfds
            .get(id)
            .map(|a| a.index)
            .ok_or_else(|| refuse(format!("unknown Application ID {id:?}")))?,
        None => 0,
    };
    if p.qer_ids.len() > abi::MAX_QERS_PER_PDR as usize {
        return Err(refuse(format!(
            "more than {} QERs on one PDR",
            abi::MAX_QERS_PER_PDR
        )));
    }
    if p.urr_ids.len() > abi::MAX_URRS_PER_PDR as usize {
        return Err(refuse(format!(
            "more than {} URRs on one PDR",
            abi::MAX_URRS_PER_PDR
        )));
    }
    let mut sdf = Vec::new();
    for f in &pdi.sdf_filters {
        let rule = SdfRule::from_ie(f).map_err(|e| refuse(format!("SDF filter: {e}")))?;
        sdf.extend(sdf_entries(&rule));
    }
    if sdf.len() > abi::MAX_SDF_PER_PDR as usize {
        return Err(refuse(format!(
            "the SDF filters need {} match entries, more than {}",
            sdf.len(),
            abi::MAX_SDF_PER_PDR
        )));
    }
    let removal = p.outer_header_removal;
    Ok(PdrEntry {
        id: p.id,
        far_id: p.far_id,
        qer_ids: p.qer_ids.clone(),
        urr_ids: p.urr_ids.clone(),
        sdf,
        app,
        value: types::pdr {
            id: u32::from(p.id),
            qfi: pdi.qfis.first().copied().unwrap_or(abi::QFI_ANY as u8),
            ohr: removal.map_or(abi::OHR_NONE as u8, |o| o.description),
            ohr_ext: removal.and_then(|o| o.ext_header_deletion).unwrap_or(0),
            ..Default::default()
        },
    })
}

/// The IP version of an SDF entry that matches no packet (bpf/include/sdf.h).
pub const NO_IP_VERSION: u8 = 0xff;

/// A FAR's entry: Apply Action, and for forwarding the destination, the outer ToS and
/// the tunnel (a tunnel we cannot build is OHC_UNSUPPORTED: its packets are dropped and
/// counted, never sent without their outer header).
pub fn far(f: &Far, addrs: &Addresses) -> types::far {
    let a = &f.action;
    let mut v = types::far {
        id: f.id,
        action: [
            (a.drop, abi::FAR_DROP),
            (a.forw, abi::FAR_FORW),
            (a.buff, abi::FAR_BUFF),
            (a.nocp, abi::FAR_NOCP),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .fold(0, |bits, (_, bit)| bits | *bit as u8),
        ohc: abi::OHC_NONE as u8,
        ..Default::default()
    };
    let Some(fw) = &f.forwarding else {
        return v;
    };
    v.dest = fw.destination_interface;
    if fw.redirect.is_some() {
        v.flags |= abi::FAR_F_REDIRECT as u8;
    }
    if let Some(t) = fw.transport_level_marking {
        v.flags |= abi::FAR_F_TOS as u8;
        v.tos = (t >> 8) as u8;
    }
    if let Some(o) = &fw.outer_header_creation {
        v.ohc = abi::OHC_UNSUPPORTED as u8;
        if let Some(t) = tunnel(
            addrs,
            fw.destination_interface,
            fw.network_instance.as_deref(),
            o,
        ) {
            match (t.peer, t.src) {
                (IpAddr::V4(p), IpAddr::V4(s)) => {
                    v.ohc = abi::OHC_GTPU_V4 as u8;
                    v.peer[..4].copy_from_slice(&p.octets());
                    v.src[..4].copy_from_slice(&s.octets());
                }
                (IpAddr::V6(p), IpAddr::V6(s)) => {
                    v.ohc = abi::OHC_GTPU_V6 as u8;
                    v.peer = p.octets();
                    v.src = s.octets();
                }
                _ => {}
            }
            v.teid = t.teid;
            v.port = t.port;
        }
    }
    v
}

/// A QER's parameters: gates, QFI, RQI, PPI and the MBR per direction as a GCRA
/// ([`qer_gcra`]) with the size of the leases its `lanes` lanes take ([`mbr_lease`]).
pub fn qer(q: &Qer, lanes: u32) -> types::qer_params {
    let mut v = types::qer_params {
        gate: [q.gate_ul_open as u8, q.gate_dl_open as u8],
        qfi: q.qfi.unwrap_or(abi::QFI_ANY as u8),
        qer_id: q.id,
        ..Default::default()
    };
    if q.rqi {
        v.flags |= abi::QER_F_RQI as u8;
    }
    if let Some(p) = q.ppi {
        v.flags |= abi::QER_F_PPI as u8;
        v.ppi = p & 0x07;
    }
    if let Some(m) = q.mbr {
        v.flags |= (abi::QER_F_MBR_UL | abi::QER_F_MBR_DL) as u8;
        for (d, kbps) in [m.ul_kbps, m.dl_kbps].into_iter().enumerate() {
            let (cost, tau) = qer_gcra(kbps);
            v.cost[d] = cost;
            // A lease is spent within its life after it is charged: the burst the GCRA
            // allows is the configured one less that (docs/architecture.md, "Leases").
            v.tau[d] = tau.saturating_sub(LEASE_TTL_NS);
            v.lease[d] = mbr_lease(kbps, lanes);
        }
    }
    v
}

/// An MBR lease's life in ns (abi::LEASE_TTL lane time units).
pub const LEASE_TTL_NS: u64 = (abi::LEASE_TTL as u64) << abi::LANE_TIME_SHIFT;

/// Octets an MBR lease of a rate of `kbps` grants with `lanes` lanes: the burst /
/// (LEASE_SHARE x lanes) (a lease then lasts at least 12.5 ms of the rate with up to 4
/// lanes, longer than it lives).
pub fn mbr_lease(kbps: u64, lanes: u32) -> u32 {
    let rate = (kbps.saturating_mul(1000) / 8).min(12_500_000_000);
    let burst = (rate / 10).max(3000).min(rate.max(3000));
    let share = burst / (u64::from(abi::LEASE_SHARE) * u64::from(lanes.max(1)));
    share.min(u64::from(u32::MAX)) as u32
}

/// A maximum bit rate in the data path's units (bpf/include/qer.h): what one octet adds
/// to the GCRA's theoretical arrival time, in ns x 2^QER_COST_SHIFT, and the burst
/// tolerance in ns. The rate is capped at 100 Gbit/s; the burst is 100 ms of it, at
/// least 3000 octets, at most 1 s. A rate of 0 lets the burst through and then, in
/// effect, nothing (one octet per 2^27 ns).
pub fn qer_gcra(kbps: u64) -> (u64, u64) {
    let rate = (kbps.saturating_mul(1000) / 8).min(12_500_000_000);
    let burst = (rate / 10).max(3000).min(rate.max(3000));
    let cost = (1_000_000_000u64 << abi::QER_COST_SHIFT)
        .checked_div(rate)
        .map_or(1 << 47, |c| c.min(1 << 47));
    (cost, (burst * cost) >> abi::QER_COST_SHIFT)
}

/// An SDF Filter's match entries (bpf/include/sdf.h): a packet matches the filter
/// exactly when it matches one of them. A side with several port ranges needs an entry
/// per range, so a filter needs (remote ranges) x (UE ranges) entries
/// ([`SdfRule::port_range_pairs`]).
pub fn sdf_entries(rule: &SdfRule) -> Vec<types::sdf_match> {
    let mut base = types::sdf_match::default();
    if let Some(t) = rule.tos_traffic_class {
        base.flags |= abi::SDF_F_TOS;
        base.tos_value = t.value & t.mask;
        base.tos_mask = t.mask;
    }
    if let Some(s) = rule.spi {
        base.flags |= abi::SDF_F_SPI;
        base.spi = s;
    }
    if let Some(l) = rule.flow_label {
        base.flags |= abi::SDF_F_FLOW_LABEL;
        base.flow_label = l;
    }
    let Some(flow) = &rule.flow else {
        return vec![base];
    };
    if flow.inbound {
        // Direction `in` matches no packet (SdfRule::matches): an IP version no packet
        // has (bpf/include/sdf.h compares it first).
        base.ip_version = NO_IP_VERSION;
        return vec![base];
    }
    base.ip_version = flow.ip_version().unwrap_or(0);
    if let Some(p) = flow.protocol {
        base.flags |= abi::SDF_F_PROTOCOL;
        base.protocol = p;
    }
    base.flags |= side(&flow.remote, &mut base.remote, abi::SDF_F_REMOTE_ADDR);
    if flow.remote.negated {
        base.flags |= abi::SDF_F_REMOTE_NEGATE;
    }
    base.flags |= side(&flow.ue, &mut base.ue, abi::SDF_F_UE_ADDR);
    if flow.ue.negated {
        base.flags |= abi::SDF_F_UE_NEGATE;
    }
    if flow.ue.address == Address::Assigned {
        base.flags |= abi::SDF_F_UE_ASSIGNED;
    }
    let mut out = Vec::with_capacity(rule.port_range_pairs());
    for r in ranges(&flow.remote.ports) {
        for u in ranges(&flow.ue.ports) {
            let mut m = base;
            if let Some(r) = r {
                m.flags |= abi::SDF_F_REMOTE_PORTS;
                (m.remote.port_lo, m.remote.port_hi) = (r.lo, r.hi);
            }
            if let Some(u) = u {
                m.flags |= abi::SDF_F_UE_PORTS;
                (m.ue.port_lo, m.ue.port_hi) = (u.lo, u.hi);
            }
            out.push(m);
        }
    }
    out
}

/// Each port range of a side, or one `None` for a side without ports.
fn ranges(r: &[PortRange]) -> impl Iterator<Item = Option<PortRange>> + '_ {
    let none = r.is_empty().then_some(None);
    r.iter().map(|&x| Some(x)).chain(none)
}

/// A side's address as prefix octets and mask, in network order (IPv4 in the first 4
/// octets); returns `flag` if the side has an address condition.
fn side(ep: &Endpoint, side: &mut types::sdf_side, flag: u32) -> u32 {
    let Address::Prefix(p) = ep.address else {
        return 0;
    };
    let mut octets = [0u8; 16];
    let n = match p.addr() {
        IpAddr::V4(a) => {
            octets[..4].copy_from_slice(&a.octets());
            4
        }
        IpAddr::V6(a) => {
            octets = a.octets();
            16
        }
    };
    for (i, octet) in octets.iter().enumerate().take(n) {
        let bits = usize::from(p.len()).saturating_sub(i * 8).min(8);
        side.mask[i] = if bits == 0 { 0 } else { 0xff << (8 - bits) };
        side.addr[i] = octet & side.mask[i];
    }
    flag
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfcp::ie::{Bitrate, FSeid, NodeId, OuterHeaderRemoval};
    use upf::rules::{ApplyAction, Forwarding, LocalFteid, Pdi, UeIp};
    use upf::sdf::{Direction, PacketFields, TosTrafficClass};

    fn rule(text: &str) -> SdfRule {
        SdfRule::from_flow_description(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn addrs() -> Addresses {
        Addresses {
            n3_v4: Some(Ipv4Addr::new(10, 10, 0, 7)),
            n9_v4: Some(Ipv4Addr::new(10, 20, 0, 7)),
            n3_v6: Some("2001:db8:3::7".parse().unwrap()),
            n9_v6: None,
            network_instances: vec![NiAddresses {
                name: "access2".into(),
                n3_v4: Some(Ipv4Addr::new(10, 11, 0, 7)),
                ..Default::default()
            }],
        }
    }

    fn session() -> Session {
        Session::new(
            7,
            FSeid {
                spare: 0,
                seid: 7,
                ipv4: Some(Ipv4Addr::LOCALHOST),
                ipv6: None,
            },
            NodeId::Ipv4(Ipv4Addr::LOCALHOST),
        )
    }

    fn pdr(id: u16, precedence: u32, pdi: Pdi) -> Pdr {
        Pdr {
            id,
            precedence,
            pdi,
            outer_header_removal: None,
            far_id: Some(1),
            urr_ids: Default::default(),
            qer_ids: Default::default(),
            activation_time: None,
            deactivation_time: None,
        }
    }

    fn on_teid(teid: u32) -> Pdi {
        Pdi {
            source_interface: interface::ACCESS,
            local_fteid: Some(LocalFteid {
                teid,
                ipv4: Some(Ipv4Addr::new(10, 10, 0, 7)),
                ipv6: None,
            }),
            ..Default::default()
        }
    }

    fn on_ue(a: Ipv4Addr) -> Pdi {
        Pdi {
            source_interface: interface::CORE,
            ue_ips: upf::rules::thin_vec![UeIp {
                ipv4: Some(a),
                is_destination: true,
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn keys_reach_their_pdrs_best_precedence_first() {
        let mut s = session();
        let ue = Ipv4Addr::new(10, 45, 0, 2);
        s.pdrs.insert(1, pdr(1, 300, on_teid(0x100)));
        s.pdrs.insert(2, pdr(2, 100, on_teid(0x100)));
        s.pdrs.insert(3, pdr(3, 100, on_teid(0x200)));
        s.pdrs.insert(4, pdr(4, 50, on_ue(ue)));
        // Same precedence: the lower PDR ID first.
        s.pdrs.insert(5, pdr(5, 300, on_teid(0x100)));
        let mut routed = on_ue(ue);
        routed.framed_routes = upf::rules::thin_vec!["172.16.0.0/24".parse().unwrap()];
        s.pdrs.insert(6, pdr(6, 10, routed));
        let c = compile(&s, &addrs(), &PfdTable::new(), 2).unwrap();
        let keys: Vec<(Key, u16, Vec<u16>, bool)> = c
            .keys
            .iter()
            .map(|k| (k.key, k.pdr_id, k.pdrs.to_vec(), k.uplink))
            .collect();
        assert_eq!(
            keys,
            vec![
                (Key::Teid(0x100), 1, vec![2, 1, 5], true),
                (Key::Teid(0x200), 3, vec![3], true),
                (Key::Ue(IpAddr::V4(ue)), 4, vec![6, 4], false),
                (
                    Key::Framed("172.16.0.0/24".parse().unwrap()),
                    6,
                    vec![6],
                    false
                ),
            ]
        );
        // The record holds the hot PDR of its primary keys (TEID 0x100, the UE
        // address): the others are read from the pdrs table, and every PDR of the other
        // keys (TEID 0x200, the framed route).
        assert_eq!(c.cold_pdrs(None, None), vec![1, 5, 3, 4, 6]);
        assert_eq!(c.ue_v4, Some(ue));
    }

    #[test]
    fn framed_routes_reach_the_pdrs_whose_route_holds_them() {
        let mut s = session();
        let route = |net: &str, ue: u8| {
            let mut pdi = on_ue(Ipv4Addr::new(10, 45, 0, ue));
            pdi.framed_routes = upf::rules::thin_vec![net.parse().unwrap()];
            pdi
        };
        s.pdrs.insert(1, pdr(1, 100, route("172.16.0.0/16", 2)));
        s.pdrs.insert(2, pdr(2, 50, route("172.16.1.0/24", 2)));
        let c = compile(&s, &addrs(), &PfdTable::new(), 2).unwrap();
        let of = |net: &str| -> Vec<u16> {
            let k = Key::Framed(net.parse().unwrap());
            c.keys.iter().find(|x| x.key == k).unwrap().pdrs.to_vec()
        };
        // A packet in the /24 is in the /16 too; one outside the /24 is not in it.
        assert_eq!(of("172.16.1.0/24"), vec![2, 1]);
        assert_eq!(of("172.16.0.0/16"), vec![1]);
    }

    #[test]
    fn the_source_check_takes_the_first_ue_addresses_by_pdr_id() {
        let mut s = session();
        s.pdrs
            .insert(2, pdr(2, 100, on_ue(Ipv4Addr::new(10, 45, 0, 3))));
        s.pdrs
            .insert(1, pdr(1, 100, on_ue(Ipv4Addr::new(10, 45, 0, 2))));
        let mut v6 = on_ue(Ipv4Addr::new(10, 45, 0, 4));
        v6.ue_ips[0].ipv6 = Some("2001:db8:45::".parse().unwrap());
        v6.ue_ips[0].ipv6_prefix_len = Some(56);
        s.pdrs.insert(3, pdr(3, 100, v6));
        let c = compile(&s, &addrs(), &PfdTable::new(), 2).unwrap();
        assert_eq!(c.ue_v4, Some(Ipv4Addr::new(10, 45, 0, 2)));
        assert_eq!(c.ue_v6, Some(("2001:db8:45::".parse().unwrap(), 56)));
        let r = c.record(&RecordPlan::default());
        assert_eq!(
            (r.flags & abi::SR_UE_V4 as u16, r.ue_v4),
            (abi::SR_UE_V4 as u16, u32::from_ne_bytes([10, 45, 0, 2]))
        );
        assert_eq!(r.ue_v6_len, 56);
    }

    #[test]
    fn the_record_holds_the_first_pdr_without_an_application() {
        let mut t = PfdTable::new();
        let mut a = upf::pfd::AppPfds::default();
        a.add_domain("a.example", None).unwrap();
        t.set("A", a, true).unwrap();
        let mut s = session();
        let mut app = on_teid(0x100);
        app.application_id = Some("A".into());
        s.pdrs.insert(1, pdr(1, 100, on_teid(0x100)));
        s.pdrs.insert(2, pdr(2, 10, app.clone()));
        s.pdrs.insert(3, pdr(3, 200, on_teid(0x100)));
        app.local_fteid.as_mut().unwrap().teid = 0x180;
        s.pdrs.insert(4, pdr(4, 10, app));
        s.pdrs.insert(5, pdr(5, 100, on_teid(0x200)));
        let c = compile(&s, &addrs(), &t, 2).unwrap();
        assert_eq!(c.keys[0].pdrs.to_vec(), vec![2, 1, 3]);
        assert_eq!(c.keys[1].pdrs.to_vec(), vec![4]);
        assert_eq!(c.keys[2].pdrs.to_vec(), vec![5]);
        // Key 0: PDR 1 (after A's); key 1: A's only PDR, the first; key 2: the first.
        assert_eq!(
            c.keys.iter().map(|k| c.hot_at(k)).collect::<Vec<_>>(),
            vec![1, 0, 0]
        );
        let keys = c.primary_keys();
        assert_eq!(keys[0].map(|k| k.key), Some(Key::Teid(0x100)));
        s.fars.insert(1, forwarding(1, None));
        let c = compile(&s, &addrs(), &t, 2).unwrap();
        let rp = RecordPlan {
            keys: c.primary_keys(),
            lists: [7, 0],
            ..Default::default()
        };
        let r = c.record(&rp);
        // Line 0: TEID 0x100's hot PDR, 1, its FAR copied in; the list names all three.
        assert_eq!(
            (r.teid, r.n_pdrs[0], r.hot_at[0], r.list[0]),
            (0x100, 3, 1, 7)
        );
        assert_eq!((r.dir[0].pdr_id, r.dir[0].far_id, r.dir[0].up), (1, 1, 1));
        assert_eq!(r.dir[0].action, abi::FAR_FORW as u8);
        assert_ne!(r.dir[0].flags & abi::DR_VALID as u8, 0);
        assert_eq!(r.flags & abi::SR_APPS as u16, abi::SR_APPS as u16);
        // The pdrs table holds the PDRs the record does not: 2 and 3 (key 0x100), 4 and 5
        // (the keys that are not the record's).
        assert_eq!(c.cold_pdrs(None, None), vec![2, 3, 4, 5]);
    }

    #[test]
    fn too_many_pdrs_on_one_key_name_the_first() {
        let mut s = session();
        for id in 1..=9 {
            s.pdrs.insert(id, pdr(id, 100, on_teid(0x100)));
        }
        match compile(&s, &addrs(), &PfdTable::new(), 2) {
            Err(FastPathError::Pdr { pdr_id: 1, why }) => assert!(why.contains("more than 8")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pdr_entries_and_their_links() {
        let mut s = session();
        let mut p = pdr(1, 100, on_teid(0x100));
        p.pdi.qfis = upf::rules::thin_vec![9];
        p.outer_header_removal = Some(OuterHeaderRemoval {
            description: 0,
            ext_header_deletion: Some(1),
        });
        p.qer_ids = upf::rules::smallvec![4, 3];
        p.urr_ids = upf::rules::smallvec![7];
        s.pdrs.insert(1, p);
        s.pdrs
            .insert(2, pdr(2, 100, on_ue(Ipv4Addr::new(10, 45, 0, 2))));
        let c = compile(&s, &addrs(), &PfdTable::new(), 2).unwrap();
        let e = &c.pdrs[0];
        assert_eq!((e.value.qfi, e.value.ohr, e.value.ohr_ext), (9, 0, 1));
        let d = &c.pdrs[1];
        assert_eq!(
            (d.value.qfi, d.value.ohr),
            (abi::QFI_ANY as u8, abi::OHR_NONE as u8)
        );
        let v = e.linked(
            |r| match r {
                Rule::Far(1) => 11,
                Rule::Qer(3) => 33,
                Rule::Qer(4) => 44,
                Rule::Urr(7) => 77,
                other => panic!("{other:?}"),
            },
            5,
        );
        assert_eq!((v.far, v.qer, v.urr), (11, [44, 33, 0, 0], [77, 0, 0, 0]));
        assert_eq!((v.sdf, v.n_sdf), (0, 0), "no SDF filter: no SDF block");
        let qer_limit = abi::MAX_QERS_PER_PDR as usize;
        s.pdrs.get_mut(&1).unwrap().qer_ids = (0..=qer_limit as u32).collect();
        assert!(matches!(
            compile(&s, &addrs(), &PfdTable::new(), 2),
            Err(FastPathError::Pdr { pdr_id: 1, .. })
        ));
    }

    fn forwarding(dest: u8, o: Option<OuterHeaderCreation>) -> Far {
        Far {
            id: 1,
            action: ApplyAction {
                forw: true,
                ..Default::default()
            },
            forwarding: Some(Forwarding {
                destination_interface: dest,
                outer_header_creation: o,
                transport_level_marking: Some(0xb8fc),
                ..Default::default()
            }),
            bar_id: None,
        }
    }

    #[test]
    fn far_entries_and_their_tunnels() {
        let gnb = Ipv4Addr::new(10, 10, 0, 1);
        let o4 = OuterHeaderCreation::gtpu_ipv4(0x1234, gnb);
        let f = far(&forwarding(interface::ACCESS, Some(o4)), &addrs());
        assert_eq!(
            (f.action, f.ohc, f.dest),
            (abi::FAR_FORW as u8, abi::OHC_GTPU_V4 as u8, 0)
        );
        assert_eq!((f.teid, f.port), (0x1234, 2152));
        assert_eq!(
            (&f.peer[..4], &f.src[..4]),
            (&[10, 10, 0, 1][..], &[10, 10, 0, 7][..])
        );
        assert_eq!((f.flags, f.tos), (abi::FAR_F_TOS as u8, 0xb8));
        // Towards the core: the N9 address.
        let f = far(&forwarding(interface::CORE, Some(o4)), &addrs());
        assert_eq!(&f.src[..4], &[10, 20, 0, 7]);
        // A dual-stack peer gets IPv4; IPv6 alone, IPv6 from the N3 address.
        let peer6: Ipv6Addr = "2001:db8:3::1".parse().unwrap();
        let mut dual = o4;
        dual.description |= OuterHeaderCreation::GTPU_UDP_IPV6;
        dual.ipv6 = Some(peer6);
        assert_eq!(
            far(&forwarding(0, Some(dual)), &addrs()).ohc,
            abi::OHC_GTPU_V4 as u8
        );
        let o6 = OuterHeaderCreation::gtpu_ipv6(9, peer6);
        let f = far(&forwarding(0, Some(o6)), &addrs());
        assert_eq!(
            (f.ohc, f.peer, f.src),
            (
                abi::OHC_GTPU_V6 as u8,
                peer6.octets(),
                addrs().n3_v6.unwrap().octets()
            )
        );
        // In a Network Instance with an address of its own on that side, that one; on
        // the other side (none of its own) or in another instance, the interface's.
        let mut in_access2 = forwarding(interface::ACCESS, Some(o4));
        in_access2.forwarding.as_mut().unwrap().network_instance = Some("access2".into());
        assert_eq!(&far(&in_access2, &addrs()).src[..4], &[10, 11, 0, 7]);
        let fw = in_access2.forwarding.as_mut().unwrap();
        fw.destination_interface = interface::CORE;
        assert_eq!(&far(&in_access2, &addrs()).src[..4], &[10, 20, 0, 7]);
        let fw = in_access2.forwarding.as_mut().unwrap();
        fw.destination_interface = interface::ACCESS;
        fw.network_instance = Some("internet".into());
        assert_eq!(&far(&in_access2, &addrs()).src[..4], &[10, 10, 0, 7]);
        // A tunnel we cannot build is never sent without its header.
        let no_v4 = Addresses {
            n3_v4: None,
            n9_v4: None,
            ..addrs()
        };
        assert_eq!(
            far(&forwarding(0, Some(o4)), &no_v4).ohc,
            abi::OHC_UNSUPPORTED as u8
        );
        // No Outer Header Creation: none.
        assert_eq!(far(&forwarding(1, None), &addrs()).ohc, abi::OHC_NONE as u8);
        let mut buff = forwarding(0, None);
        buff.action = ApplyAction {
            buff: true,
            nocp: true,
            ..Default::default()
        };
        assert_eq!(
            far(&buff, &addrs()).action,
            (abi::FAR_BUFF | abi::FAR_NOCP) as u8
        );
    }

    #[test]
    fn qer_entries() {
        let q = Qer {
            id: 1,
            gate_ul_open: true,
            gate_dl_open: false,
            mbr: Some(Bitrate {
                ul_kbps: 10_000,
                dl_kbps: 80_000,
            }),
            qfi: Some(5),
            rqi: true,
            ppi: Some(9),
            ..Default::default()
        };
        let v = qer(&q, 2);
        assert_eq!((v.gate, v.qfi, v.ppi, v.qer_id), ([1, 0], 5, 1, 1));
        let f = abi::QER_F_MBR_UL | abi::QER_F_MBR_DL | abi::QER_F_RQI | abi::QER_F_PPI;
        assert_eq!(u32::from(v.flags), f);
        // 10 Mbit/s: 800 ns an octet; the burst 100 ms of the rate, less a lease's life.
        assert_eq!(v.cost[0] >> abi::QER_COST_SHIFT, 800);
        assert_eq!(v.tau[0], 100_000_000 - LEASE_TTL_NS);
        assert_eq!(v.cost[1] >> abi::QER_COST_SHIFT, 100);
        // A lease: the burst (125,000 octets at 10 Mbit/s) / (2 x 2 lanes).
        assert_eq!(v.lease, [31_250, 250_000]);
        assert_eq!(qer(&q, 1).lease, [62_500, 500_000]);
        assert_eq!(qer(&Qer::default(), 2).flags, 0);
    }

    #[test]
    fn sdf_entries_of_captured_filters() {
        let e = sdf_entries(&rule(
            "permit out udp from any 1-65535 to 10.200.136.98/32 23454",
        ));
        assert_eq!(e.len(), 1);
        let e = e[0];
        assert_eq!(
            e.flags,
            abi::SDF_F_PROTOCOL
                | abi::SDF_F_REMOTE_PORTS
                | abi::SDF_F_UE_ADDR
                | abi::SDF_F_UE_PORTS
        );
        assert_eq!((e.ip_version, e.protocol), (4, 17));
        assert_eq!((e.remote.port_lo, e.remote.port_hi), (1, 65535));
        assert_eq!(e.ue.addr[..5], [10, 200, 136, 98, 0]);
        assert_eq!(e.ue.mask[..5], [255, 255, 255, 255, 0]);
        assert_eq!((e.ue.port_lo, e.ue.port_hi), (23454, 23454));
        let m = sdf_entries(&rule("permit out 58 from ff02::2/128 to assigned"));
        assert_eq!(
            m[0].flags,
            abi::SDF_F_PROTOCOL | abi::SDF_F_REMOTE_ADDR | abi::SDF_F_UE_ASSIGNED
        );
        assert_eq!((m[0].ip_version, m[0].remote.mask), (6, [0xff; 16]));
        // Host bits are cleared, the mask is the prefix's.
        let m = sdf_entries(&rule("permit out ip from !10.0.0.3/30 to any"));
        assert_eq!(
            m[0].flags,
            abi::SDF_F_REMOTE_ADDR | abi::SDF_F_REMOTE_NEGATE
        );
        assert_eq!((m[0].remote.addr[3], m[0].remote.mask[3]), (0, 0xfc));
        // 3 x 2 port ranges: 6 entries.
        let r = rule("permit out 6 from any 80,443,8080 to assigned 1000-1999,3000");
        assert_eq!(sdf_entries(&r).len(), r.port_range_pairs());
        assert_eq!(sdf_entries(&r).len(), 6);
        // No Flow Description: one entry with the other parts.
        let r = SdfRule {
            spi: Some(5),
            tos_traffic_class: Some(TosTrafficClass {
                value: 0xb9,
                mask: 0xfc,
            }),
            ..SdfRule::default()
        };
        let e = sdf_entries(&r);
        assert_eq!(e.len(), 1);
        assert_eq!((e[0].flags, e[0].spi), (abi::SDF_F_SPI | abi::SDF_F_TOS, 5));
        assert_eq!((e[0].tos_value, e[0].tos_mask), (0xb8, 0xfc));
    }

    /// A reading of bpf/include/sdf.h `sdf_matches` over an entry, for the property test
    /// below: entries made from a filter match a packet exactly when the filter does.
    fn entry_matches(m: &types::sdf_match, p: &PacketFields, dir: Direction) -> bool {
        let f = m.flags;
        if m.ip_version != 0 && m.ip_version != p.version {
            return false;
        }
        if f & abi::SDF_F_PROTOCOL != 0 && m.protocol != p.protocol {
            return false;
        }
        let (ue, ue_port, remote, remote_port) = match dir {
            Direction::Uplink => (p.src, p.src_port, p.dst, p.dst_port),
            Direction::Downlink => (p.dst, p.dst_port, p.src, p.src_port),
        };
        let side = |s: &types::sdf_side, a: IpAddr, port: Option<u16>, fa, fneg, fports| {
            if f & fa != 0 {
                let (b, n) = match a {
                    IpAddr::V4(x) => (x.to_ipv6_mapped().octets()[12..].to_vec(), 4),
                    IpAddr::V6(x) => (x.octets().to_vec(), 16),
                };
                let inside = (0..n).all(|i| b[i] & s.mask[i] == s.addr[i]);
                if inside == (f & fneg != 0) {
                    return false;
                }
            }
            f & fports == 0 || port.is_some_and(|x| s.port_lo <= x && x <= s.port_hi)
        };
        side(
            &m.remote,
            remote,
            remote_port,
            abi::SDF_F_REMOTE_ADDR,
            abi::SDF_F_REMOTE_NEGATE,
            abi::SDF_F_REMOTE_PORTS,
        ) && side(
            &m.ue,
            ue,
            ue_port,
            abi::SDF_F_UE_ADDR,
            abi::SDF_F_UE_NEGATE,
            abi::SDF_F_UE_PORTS,
        ) && (f & abi::SDF_F_TOS == 0 || p.tos_tc & m.tos_mask == m.tos_value)
            && (f & abi::SDF_F_SPI == 0 || p.spi == Some(m.spi))
            && (f & abi::SDF_F_FLOW_LABEL == 0 || p.flow_label == Some(m.flow_label))
    }

    /// xorshift64*: deterministic, no dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn pick<T: Copy>(&mut self, items: &[T]) -> T {
            items[self.below(items.len())]
        }
        fn chance(&mut self, percent: u64) -> bool {
            self.next() % 100 < percent
        }
    }

    const V4_POOL: [&str; 5] = ["10.0.0.0", "10.0.0.1", "10.0.0.3", "10.0.1.1", "192.0.2.9"];
    const V6_POOL: [&str; 5] = [
        "2001:db8::",
        "2001:db8::1",
        "2001:db8::3",
        "2001:db8:0:1::1",
        "fe80::2",
    ];
    const PORT_POOL: [u16; 8] = [0, 1, 79, 80, 81, 443, 8080, 65535];

    fn gen_address(rng: &mut Rng, v6: bool, is_ue: bool) -> String {
        match rng.below(6) {
            0 => "any".into(),
            1 if is_ue => "assigned".into(),
            _ => {
                let neg = if rng.chance(20) { "!" } else { "" };
                if v6 {
                    let len = rng.pick(&[0u8, 32, 64, 126, 127, 128]);
                    format!("{neg}{}/{len}", rng.pick(&V6_POOL))
                } else {
                    let len = rng.pick(&[0u8, 8, 24, 30, 31, 32]);
                    format!("{neg}{}/{len}", rng.pick(&V4_POOL))
                }
            }
        }
    }

    fn gen_ports(rng: &mut Rng) -> String {
        if rng.chance(50) {
            return String::new();
        }
        let n = 1 + rng.below(4);
        let items: Vec<String> = (0..n)
            .map(|_| {
                let a = rng.pick(&PORT_POOL);
                if rng.chance(50) {
                    a.to_string()
                } else {
                    let b = rng.pick(&PORT_POOL);
                    format!("{}-{}", a.min(b), a.max(b))
                }
            })
            .collect();
        format!(" {}", items.join(","))
    }

    fn gen_rule(rng: &mut Rng) -> SdfRule {
        let v6 = rng.chance(50);
        let flow = if rng.chance(90) {
            let proto = rng.pick(&["ip", "6", "17", "1", "58", "50", "255"]);
            let ports_ok = matches!(proto, "ip" | "6" | "17");
            let (rp, up) = if ports_ok {
                (gen_ports(rng), gen_ports(rng))
            } else {
                (String::new(), String::new())
            };
            // Direction `in` (free5GC's SMF) now and then: one entry, matching nothing.
            let dir = if rng.chance(5) { "in" } else { "out" };
            let text = format!(
                "permit {dir} {proto} from {}{rp} to {}{up}",
                gen_address(rng, v6, false),
                gen_address(rng, v6, true)
            );
            Some(upf::sdf::FlowDescription::parse(&text).unwrap_or_else(|e| panic!("{text}: {e}")))
        } else {
            None
        };
        let ipv4_flow = flow.as_ref().and_then(|f| f.ip_version()) == Some(4);
        SdfRule {
            flow,
            tos_traffic_class: rng.chance(20).then(|| TosTrafficClass {
                value: rng.next() as u8,
                mask: rng.pick(&[0, 0xfc, 0xff, 0xe0]),
            }),
            spi: rng.chance(15).then(|| rng.pick(&[1u32, 2])),
            flow_label: (!ipv4_flow && rng.chance(15)).then(|| rng.pick(&[0u32, 1, 0xfffff])),
            filter_id: None,
        }
    }

    fn gen_packet(rng: &mut Rng) -> PacketFields {
        let v6 = rng.chance(50);
        let addr = |rng: &mut Rng| -> IpAddr {
            if v6 {
                rng.pick(&V6_POOL).parse().unwrap()
            } else {
                rng.pick(&V4_POOL).parse().unwrap()
            }
        };
        let protocol = rng.pick(&[6u8, 17, 1, 58, 50, 51, 255, 132]);
        let has_ports = upf::sdf::protocol_has_ports(protocol) && rng.chance(85);
        PacketFields {
            version: if v6 { 6 } else { 4 },
            src: addr(rng),
            dst: addr(rng),
            protocol,
            src_port: has_ports.then(|| rng.pick(&PORT_POOL)),
            dst_port: has_ports.then(|| rng.pick(&PORT_POOL)),
            tos_tc: rng.pick(&[0u8, 0xb8, 0xb9, 0x20, 0xff]),
            spi: matches!(protocol, 50 | 51).then(|| rng.pick(&[1u32, 2])),
            flow_label: v6.then(|| rng.pick(&[0u32, 1, 0xfffff])),
        }
    }

    /// Entries made from generated filters match generated packets exactly when the
    /// filter does, in both directions.
    #[test]
    fn sdf_entries_agree_with_the_filter() {
        let mut rng = Rng(0x5df1_7e57);
        let (mut checked, mut matched) = (0, 0);
        for _ in 0..3000 {
            let r = gen_rule(&mut rng);
            let entries = sdf_entries(&r);
            assert_eq!(entries.len(), r.port_range_pairs());
            for _ in 0..40 {
                let p = gen_packet(&mut rng);
                for dir in [Direction::Uplink, Direction::Downlink] {
                    let want = r.matches(&p, dir);
                    let got = entries.iter().any(|m| entry_matches(m, &p, dir));
                    assert_eq!(want, got, "{r:?}\n{p:?} {dir:?}\n{entries:?}");
                    checked += 1;
                    matched += usize::from(want);
                }
            }
        }
        // The generator must exercise both outcomes.
        assert!(
            matched > checked / 50 && matched < checked / 2,
            "{matched} of {checked}"
        );
    }
}
