//! Which PDRs a packet meets: those its lookup key reaches, in precedence order (TS
//! 29.244 clause 5.2.1), and whether one takes it (its QFI, its SDF filters), read from
//! the session's rules.

use std::net::IpAddr;

use crate::pfd::PfdTable;
use crate::rules::{interface, Pdr, Session};
use crate::sdf::{Direction, PacketFields, SdfRule};

use super::app::app_matches;
use super::packet::Outer;

/// How a packet found its session.
#[derive(Debug, Clone, Copy)]
pub(super) enum Key {
    /// A G-PDU, by the TEID it was sent to.
    Teid(u32),
    /// From the data network, by its destination: a UE address or inside a framed route.
    Ue(IpAddr),
}

/// The PDRs a key reaches, best precedence first (lower value, then lower ID), and
/// whether they see the packet as uplink (the UE its source): so says the first of them.
/// A G-PDU reaches the PDRs whose local F-TEID has its TEID; a packet from the data
/// network the core-side PDRs without a local F-TEID whose UE address is its destination
/// or whose framed route holds it.
pub(super) fn candidates(s: &Session, key: Key) -> (Vec<&Pdr>, bool) {
    let mut found: Vec<(&Pdr, u8)> = s
        .pdrs
        .values()
        .filter_map(|p| {
            let pdi = s.effective_pdi(p);
            let reached = match key {
                Key::Teid(t) => pdi.local_fteid.is_some_and(|f| f.teid == t),
                Key::Ue(a) => {
                    pdi.local_fteid.is_none()
                        && pdi.source_interface != interface::ACCESS
                        && (pdi.ue_ips.iter().any(|u| u.addrs().any(|x| x == a))
                            || pdi.framed_routes.iter().any(|r| r.contains(&a)))
                }
            };
            reached.then_some((p, pdi.source_interface))
        })
        .collect();
    found.sort_by_key(|(p, _)| (p.precedence, p.id));
    let uplink = found.first().is_some_and(|(_, i)| *i == interface::ACCESS);
    (found.into_iter().map(|(p, _)| p).collect(), uplink)
}

/// How a packet meets PDRs: its fields, its direction, and for PDRs with an Application
/// ID the PFD table and the packet's application (app.rs).
pub(super) struct Seen<'a> {
    pub outer: &'a Outer,
    pub fields: &'a PacketFields,
    pub dir: Direction,
    pub pfds: &'a PfdTable,
    pub app: Option<u16>,
}

/// Whether PDR `p` takes the packet: its QFI (if any) is the PDU Session Container's,
/// it has no SDF filter or one that matches, and it names no application or the
/// packet's (its application, or one of the application's flow descriptions).
pub(super) fn pdr_takes(s: &Session, p: &Pdr, x: &Seen<'_>) -> bool {
    let pdi = s.effective_pdi(p);
    if pdi.qfis.first().is_some_and(|q| x.outer.qfi != Some(*q)) {
        return false;
    }
    let sdf = pdi.sdf_filters.is_empty()
        || pdi
            .sdf_filters
            .iter()
            .filter_map(|f| SdfRule::from_ie(f).ok())
            .any(|r| r.matches(x.fields, x.dir));
    sdf && app_matches(x.pfds, &pdi, x.app, x.fields, x.dir)
}

/// Whether Outer Header Removal (clause 8.2.64) fits how the packet came: a G-PDU needs
/// the removal of its own outer header (GTP-U/UDP/IPv4, /IPv6, or either); a plain
/// packet none.
pub(super) fn removal_fits(p: &Pdr, o: &Outer, from_gtpu: bool) -> bool {
    let ohr = p.outer_header_removal.map(|x| x.description);
    match (from_gtpu, ohr) {
        (true, Some(0)) => o.family == 4,
        (true, Some(1)) => o.family == 6,
        (true, Some(6)) => true,
        (true, _) => false,
        (false, ohr) => ohr.is_none(),
    }
}
