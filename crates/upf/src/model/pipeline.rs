//! What the programs `xdp_n3` (G-PDUs in on N3/N9) and `xdp_n6` (IP in from the data
//! network) do to a frame, step by step, read from the session's rules (TS 29.244 clause
//! 5.2.1): find the session by its key, check the source and destination, pick the PDR,
//! apply its FAR, QERs and URRs, build the new headers, choose the egress. Where the model and the XDP
//! programs must agree on a detail (the order of checks, which header fields are
//! rewritten, how the MBR's GCRA rounds), this file is the specification.

use std::net::IpAddr;

use crate::abi::{self, DropReason, Stat};
use crate::fastpath::{Buffered, Config, Egress};
use crate::rules::{interface, Far, Pdr, Qer, Session};
use crate::sdf::{Direction, PacketFields};

use super::encap::{dec_ttl, outer_header, tunnel, udp6_checksum};
use super::icmp::Why;
use super::lease::{self, gcra, Mbr};
use super::packet::{parse_eth, parse_gtpu, parse_inner, Gtp, Outer};
use super::select::{candidates, pdr_takes, removal_fits, Key, Seen};
use super::{Model, Verdict, VolumeEvent};

const NSEC_PER_SEC: u64 = 1_000_000_000;

/// A packet that found its session.
pub(super) struct Packet<'f> {
    frame: &'f [u8],
    pub(super) seid: u64,
    key: Key,
    outer: Outer,
    /// The user's IP packet: its length and the fields SDF filters read.
    pub(super) len: usize,
    pub(super) fields: PacketFields,
}

impl Packet<'_> {
    pub(super) fn is_gtpu(&self) -> bool {
        matches!(self.key, Key::Teid(_))
    }

    pub(super) fn ip(&self) -> &[u8] {
        &self.frame[self.outer.inner..self.outer.inner + self.len]
    }
}

/// Whether an uplink packet's source is the session's own: its first IPv4 UE address, or
/// inside its first IPv6 UE prefix (64 bits unless the PDI says), in PDR ID order, or in
/// the longest framed route holding it, if that is the session's. A session that names
/// no UE address accepts any source.
fn source_allowed(m: &Model, s: &Session, src: IpAddr) -> bool {
    let ues = || s.pdrs.values().flat_map(|p| s.effective_pdi(p).ue_ips);
    let v4 = ues().find_map(|u| u.ipv4);
    let v6 = ues().find_map(|u| u.ipv6.map(|a| (a, u.ipv6_prefix_len.unwrap_or(64))));
    if v4.is_none() && v6.is_none() {
        return true;
    }
    let own = match src {
        IpAddr::V4(a) => v4 == Some(a),
        IpAddr::V6(a) => v6.is_some_and(|(p, len)| {
            let bits = u32::from(len.min(128));
            // The first `bits` bits equal (a shift by 128 is 0: /0 holds everything).
            (u128::from(a) ^ u128::from(p))
                .checked_shr(128 - bits)
                .unwrap_or(0)
                == 0
        }),
    };
    own || m.route_of(src).is_some_and(|(_, seid)| seid == s.up_seid)
}

/// Why an uplink packet must not go on into the core, if it must not: GTP-U, GTP-C or
/// PFCP inside the tunnel (a UE smuggling a tunnel or a control message past N3 / N4),
/// or addressed to one of the UPF's own or protected addresses (TS 33.513 clause 4.2.2,
/// TS 33.117 clause 4.2.6.2.3).
fn into_core(cfg: &Config, f: &PacketFields) -> Option<DropReason> {
    let core_port =
        |p: u16| [abi::PORT_GTPU, abi::PORT_GTPC, abi::PORT_PFCP].contains(&u32::from(p));
    if f.protocol == 17 && f.dst_port.is_some_and(core_port) {
        return Some(DropReason::CoreProtocol);
    }
    let ours = |list: &[IpAddr]| list.contains(&f.dst);
    (!f.dst.is_unspecified() && (ours(&cfg.local) || ours(&cfg.protected)))
        .then_some(DropReason::ToUpf)
}

/// A QER's maximum bit rate in the data path's units (struct qer_params, used by
/// lease.rs) for rules with `lanes` lanes: the time one octet takes at the rate, in
/// 2^-QER_COST_SHIFT ns rounded down; the burst tolerance in ns less a lease's life
/// (LEASE_TTL lane time units, 0 at least): an octet is charged up to that long before it
/// is sent; and the octets of one lease, burst / (LEASE_SHARE x lanes). The rate is at most 100 Gbit/s; the burst is 100 ms of it, at least 3000
/// octets, at most a second of it; a rate of 0 costs 2^47 units an octet (a burst, then
/// in effect nothing).
pub(super) fn mbr_units(kbps: u64, lanes: u32) -> MbrUnits {
    let octets_per_sec = (kbps.saturating_mul(1000) / 8).min(12_500_000_000);
    let burst = (octets_per_sec / 10).clamp(3000, octets_per_sec.max(3000));
    let unit = NSEC_PER_SEC << abi::QER_COST_SHIFT;
    let cost = unit
        .checked_div(octets_per_sec)
        .map_or(1 << 47, |c| c.min(1 << 47));
    let ttl = u64::from(abi::LEASE_TTL) << abi::LANE_TIME_SHIFT;
    let tau = ((burst * cost) >> abi::QER_COST_SHIFT).saturating_sub(ttl);
    let share = u64::from(abi::LEASE_SHARE) * u64::from(lanes.max(1));
    let lease = (burst / share).min(u64::from(u32::MAX)) as u32;
    MbrUnits { cost, tau, lease }
}

/// One direction's MBR in the data path's units ([`mbr_units`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct MbrUnits {
    /// ns per octet x 2^QER_COST_SHIFT.
    pub cost: u64,
    /// The burst tolerance less LEASE_TTL, ns.
    pub tau: u64,
    /// Octets of one lease.
    pub lease: u32,
}

/// A QER's MBR in both directions (None: it has none), for `lanes` lanes.
fn qer_mbr(q: &Qer, lanes: u32) -> Option<Mbr> {
    let m = q.mbr?;
    let (ul, dl) = (mbr_units(m.ul_kbps, lanes), mbr_units(m.dl_kbps, lanes));
    Some(Mbr {
        cost: [ul.cost, dl.cost],
        tau: [ul.tau, dl.tau],
        lease: [ul.lease, dl.lease],
    })
}

impl Model {
    pub(super) fn count(&mut self, i: usize, bytes: usize) {
        self.stats[i].0 += 1;
        self.stats[i].1 += bytes as u64;
    }

    pub(super) fn dropped(&mut self, r: DropReason, bytes: usize) -> Verdict {
        self.count(r.index(), bytes);
        Verdict::Drop(r)
    }

    fn passed(&mut self, s: Stat, bytes: usize) -> Verdict {
        self.count(s.index(), bytes);
        Verdict::Pass
    }

    /// A frame arriving on an N3/N9 interface (the program `xdp_n3`) at time `now` (ns).
    pub fn process_n3(&mut self, frame: &[u8], now: u64) -> Verdict {
        self.count(Stat::ReceivedN3.index(), frame.len());
        let Some((family, l3)) = parse_eth(frame) else {
            return self.passed(Stat::PassedToKernel, frame.len());
        };
        let outer = match parse_gtpu(frame, l3, family, &self.config) {
            Gtp::Ok(o) => o,
            Gtp::NotOurs => return self.passed(Stat::PassedToKernel, frame.len()),
            Gtp::SlowPath => return self.passed(Stat::ToSlowpath, frame.len()),
            Gtp::Malformed => return self.dropped(DropReason::MalformedGtpu, frame.len()),
        };
        let Some((len, fields)) = parse_inner(frame, outer.inner) else {
            return self.dropped(DropReason::MalformedIp, frame.len());
        };
        let Some(seid) = self.by_teid.get(&outer.teid).copied() else {
            return self.unknown_teid(len, now);
        };
        let key = Key::Teid(outer.teid);
        self.process(
            Packet {
                frame,
                seid,
                key,
                outer,
                len,
                fields,
            },
            now,
        )
    }

    /// A frame arriving on the N6 interface (the program `xdp_n6`) at time `now` (ns).
    pub fn process_n6(&mut self, frame: &[u8], now: u64) -> Verdict {
        self.count(Stat::ReceivedN6.index(), frame.len());
        let Some((_, l3)) = parse_eth(frame) else {
            return self.passed(Stat::PassedToKernel, frame.len());
        };
        let Some((len, fields)) = parse_inner(frame, l3) else {
            return self.passed(Stat::PassedToKernel, frame.len());
        };
        let Some(seid) = self.downlink_session(fields.dst) else {
            return self.passed(Stat::PassedToKernel, frame.len());
        };
        self.process_downlink(frame, l3, seid, Key::Ue(fields.dst), len, fields, now)
    }

    /// A plain IP packet at `l3` in `frame` that found session `seid` by its destination.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn process_downlink(
        &mut self,
        frame: &[u8],
        l3: usize,
        seid: u64,
        key: Key,
        len: usize,
        fields: PacketFields,
        now: u64,
    ) -> Verdict {
        let outer = Outer {
            family: fields.version,
            inner: l3,
            ..Outer::default()
        };
        self.process(
            Packet {
                frame,
                seid,
                key,
                outer,
                len,
                fields,
            },
            now,
        )
    }

    /// A G-PDU for a TEID no session has: counted as a drop; up to `slowpath_burst` at
    /// once, then `slowpath_per_sec`, also go to upfd (an Error Indication).
    fn unknown_teid(&mut self, len: usize, now: u64) -> Verdict {
        self.count(DropReason::UnknownTeid.index(), len);
        let per_sec = self.config.slowpath_per_sec;
        if per_sec == 0 {
            return Verdict::Drop(DropReason::UnknownTeid);
        }
        let cost = NSEC_PER_SEC / per_sec;
        let tau = self.config.slowpath_burst.max(1).saturating_sub(1) * cost;
        if gcra(&mut self.slowpath_tat, cost, tau, now, None) {
            self.passed(Stat::ToSlowpath, len)
        } else {
            Verdict::Drop(DropReason::UnknownTeid)
        }
    }

    fn process(&mut self, p: Packet<'_>, now: u64) -> Verdict {
        let len = p.len;
        match self.apply_rules(&p, now) {
            Ok(v) => v,
            Err(r) => self.dropped(r, len),
        }
    }

    /// The session's rules applied to the packet, in the data path's order.
    fn apply_rules(&mut self, p: &Packet<'_>, now: u64) -> Result<Verdict, DropReason> {
        let Some(s) = self.sessions.get(&p.seid).cloned() else {
            return Err(DropReason::NoPdr);
        };
        let (pdrs, uplink) = candidates(&s, p.key);
        if uplink {
            if !source_allowed(self, &s, p.fields.src) {
                return Err(DropReason::SpoofedSource);
            }
            if let Some(r) = into_core(&self.config, &p.fields) {
                return Err(r);
            }
        }
        let dir = if uplink {
            Direction::Uplink
        } else {
            Direction::Downlink
        };
        // Application detection (app.rs), for sessions with a PDR naming an application.
        let app = self.classify(&s, p.ip(), &p.fields, dir, now);
        let seen = Seen {
            outer: &p.outer,
            fields: &p.fields,
            dir,
            pfds: &self.pfds,
            app,
        };
        let pdr = *pdrs
            .iter()
            .find(|x| pdr_takes(&s, x, &seen))
            .ok_or(DropReason::NoPdr)?;
        let far = pdr
            .far_id
            .and_then(|id| s.fars.get(&id))
            .ok_or(DropReason::NoPdr)?;
        if far.action.drop {
            return Err(DropReason::FarDrop);
        }
        if far.action.buff {
            return self.buffer(p, pdr, far);
        }
        if !far.action.forw || !removal_fits(pdr, &p.outer, p.is_gtpu()) {
            return Err(DropReason::Unsupported);
        }
        if far
            .forwarding
            .as_ref()
            .is_some_and(|f| f.redirect.is_some())
        {
            return self.redirect(p, pdr, far, uplink);
        }
        let qfi_qer = self.enforce_qers(&s, pdr, uplink, p.len, now)?;
        let urrs: Vec<u32> = pdr
            .urr_ids
            .iter()
            .take(abi::MAX_URRS_PER_PDR as usize)
            .copied()
            .collect();
        self.check_quotas(p.seid, &urrs, p.len)?;
        let (header, peer) = self.new_header(far, pdr, qfi_qer, p)?;
        let out_v6 = match peer {
            Some(a) => a.is_ipv6(),
            None => p.fields.version == 6,
        };
        let eg = self
            .egress(peer.unwrap_or(p.fields.dst))
            .ok_or(DropReason::NoRoute)?;
        let mtu = usize::from(self.configured_mtu(eg.ifindex).unwrap_or(eg.mtu));
        if header.len() + p.len > mtu {
            let fits = mtu.saturating_sub(header.len());
            return Ok(self.icmp_error(p, uplink, Why::TooBig(fits), now));
        }
        let mut ip = p.ip().to_vec();
        // The user's packet crosses this UPF as a router hop, except on an N9 relay.
        let relay = p.is_gtpu() && !header.is_empty();
        if !relay && !dec_ttl(&mut ip) {
            return Ok(self.icmp_error(p, uplink, Why::TtlExceeded, now));
        }
        let mut frame = Vec::with_capacity(14 + header.len() + ip.len());
        frame.extend_from_slice(&eg.dmac);
        frame.extend_from_slice(&eg.smac);
        frame.extend_from_slice(&if out_v6 { 0x86ddu16 } else { 0x0800 }.to_be_bytes());
        frame.extend_from_slice(&header);
        frame.extend_from_slice(&ip);
        if out_v6 && !header.is_empty() {
            udp6_checksum(&mut frame);
        }
        self.count_usage(p.seid, &urrs, uplink, p.len, now);
        let outcome = match (header.is_empty(), p.is_gtpu()) {
            (true, _) => Stat::ForwardedUplink,
            (false, true) => Stat::ForwardedN9,
            (false, false) => Stat::ForwardedDownlink,
        };
        self.count(outcome.index(), p.len);
        Ok(Verdict::Redirect {
            ifindex: eg.ifindex,
            frame,
        })
    }

    /// A buffering FAR (clause 5.2.1, BUFF): the packet goes to upfd, which keeps it.
    fn buffer(&mut self, p: &Packet<'_>, pdr: &Pdr, far: &Far) -> Result<Verdict, DropReason> {
        if p.len > abi::EVENT_MAX_PACKET as usize {
            return Err(DropReason::BufferFull);
        }
        Ok(Verdict::Buffer(self.hand_up(p, pdr, far, Stat::Buffered)))
    }

    /// A packet of a FAR with Redirect Information (crate::redirect): uplink TCP to upfd,
    /// the rest dropped; not counted in URRs, not metered by QERs (nothing is forwarded).
    fn redirect(
        &mut self,
        p: &Packet<'_>,
        pdr: &Pdr,
        far: &Far,
        uplink: bool,
    ) -> Result<Verdict, DropReason> {
        if !uplink || p.fields.protocol != 6 || p.len > abi::EVENT_MAX_PACKET as usize {
            return Err(DropReason::RedirectNotHttp);
        }
        Ok(Verdict::ToRedirect(self.hand_up(
            p,
            pdr,
            far,
            Stat::Redirected,
        )))
    }

    /// The packet as the event ring hands it to upfd (upf.bpf.c `hand_up`), counted
    /// under `stat`; NOCP only for a buffering FAR.
    fn hand_up(&mut self, p: &Packet<'_>, pdr: &Pdr, far: &Far, stat: Stat) -> Buffered {
        self.count(stat.index(), p.len);
        Buffered {
            seid: p.seid,
            far_id: far.id,
            pdr_id: pdr.id,
            nocp: far.action.buff && far.action.nocp,
            packet: p.ip().to_vec(),
        }
    }

    /// The PDR's QERs in order (clause 5.2.1): each gate must be open and each MBR have
    /// room in the packet's direction, from this lane's lease (lease.rs). Returns the
    /// first QER with a QFI, which gives the PDU Session Container of the packets sent to
    /// the access network.
    fn enforce_qers<'s>(
        &mut self,
        s: &'s Session,
        pdr: &Pdr,
        uplink: bool,
        len: usize,
        now: u64,
    ) -> Result<Option<&'s Qer>, DropReason> {
        let (lay, lane, d) = (self.layout, self.lane(), if uplink { 0 } else { 1 });
        let len = len as u32;
        let qers: Vec<&Qer> = (pdr.qer_ids.iter().take(abi::MAX_QERS_PER_PDR as usize))
            .filter_map(|id| s.qers.get(id))
            .collect();
        let mut with_qfi = None;
        let mut refused = None;
        for (i, q) in qers.iter().enumerate() {
            let open = if uplink {
                q.gate_ul_open
            } else {
                q.gate_dl_open
            };
            let v = if !open {
                Some(DropReason::GateClosed)
            } else if let Some(mbr) = qer_mbr(q, lay.lanes) {
                let (pool, l) = self.qers.entry((s.up_seid, q.id)).or_default().at(lane);
                (!lease::mbr_take(lay, pool, l, Some(&mbr), d, len, now))
                    .then_some(DropReason::MbrExceeded)
            } else {
                None
            };
            if let Some(v) = v {
                refused = Some((i, v));
                break;
            }
            if with_qfi.is_none() && q.qfi.is_some() {
                with_qfi = Some(*q);
            }
        }
        let Some((refused, v)) = refused else {
            return Ok(with_qfi);
        };
        // A dropped packet uses no QER's rate: those before the one that refused give
        // back what they charged, in order.
        for q in &qers[..refused] {
            if let Some(mbr) = qer_mbr(q, lay.lanes) {
                let (pool, l) = self.qers.entry((s.up_seid, q.id)).or_default().at(lane);
                lease::mbr_refund(lay, pool, l, Some(&mbr), d, len, now);
            }
        }
        Err(v)
    }

    /// Every URR of the PDR with a volume quota must have room for `len` octets in this
    /// lane, leased if need be, in the PDR's order: the first that cannot drops the
    /// packet (and raises EV_QUOTA the first time); those before it keep their leases.
    fn check_quotas(&mut self, seid: u64, urrs: &[u32], len: usize) -> Result<(), DropReason> {
        let (lay, lane) = (self.layout, self.lane());
        for u in urrs {
            let Some(r) = self.urrs.get_mut(&(seid, *u)) else {
                continue;
            };
            if !r.pool.has_quota {
                continue;
            }
            let (pool, l) = r.at(lane);
            if let Err(notify) = lease::quota_room(lay, pool, l, len as u32) {
                if notify {
                    (self.volume_events).push(VolumeEvent::QuotaExhausted { seid, urr_id: *u });
                }
                return Err(DropReason::QuotaExhausted);
            }
        }
        Ok(())
    }

    /// The outer header the FAR's Outer Header Creation asks for (empty: none, the
    /// packet goes out as the IP packet it is) and the address it goes to (None: the
    /// packet's own destination).
    fn new_header(
        &self,
        far: &Far,
        pdr: &Pdr,
        qfi_qer: Option<&Qer>,
        p: &Packet<'_>,
    ) -> Result<(Vec<u8>, Option<IpAddr>), DropReason> {
        let fw = far.forwarding.as_ref();
        if fw.is_none_or(|f| f.outer_header_creation.is_none()) {
            // Only a decapsulated G-PDU leaves without a tunnel.
            return if p.is_gtpu() {
                Ok((Vec::new(), None))
            } else {
                Err(DropReason::Unsupported)
            };
        }
        let fw = fw.ok_or(DropReason::Unsupported)?;
        let t = tunnel(&self.config, fw).ok_or(DropReason::Unsupported)?;
        let psc = pdu_session_container(fw.destination_interface, pdr, qfi_qer, p);
        let tos = fw.transport_level_marking.map_or(0, |t| (t >> 8) as u8);
        let h = outer_header(&t, tos, psc, p.len).ok_or(DropReason::Unsupported)?;
        Ok((h, Some(t.peer)))
    }

    /// URR counts (clause 5.2.2) in this lane, URR by URR: packets and octets of the
    /// user's packet per direction, the times of the first and last packet; then the
    /// quota spent (room was made by `check_quotas`); then an armed threshold counted,
    /// raising EV_THRESHOLD when its lease takes it to zero.
    fn count_usage(&mut self, seid: u64, urrs: &[u32], uplink: bool, len: usize, now: u64) {
        let (lay, lane, len) = (self.layout, self.lane(), len as u32);
        self.clock = self.clock.max(now);
        for u in urrs {
            let (pool, l) = self.urrs.entry((seid, *u)).or_default().at(lane);
            lease::lane_count(l, uplink, len, now);
            if pool.has_quota {
                lease::quota_spend(lay, pool, l, len);
            }
            if pool.armed && lease::threshold_count(lay, pool, l, len) {
                (self.volume_events).push(VolumeEvent::ThresholdReached { seid, urr_id: *u });
            }
        }
    }

    /// The MTU configured for interface `ifindex`, if any: it takes precedence over the
    /// neighbour's (or the FIB's).
    fn configured_mtu(&self, ifindex: u32) -> Option<u16> {
        (self.config.mtus.iter().take(abi::MAX_IF_MTUS as usize))
            .find(|(i, _)| *i == ifindex && *i != 0)
            .map(|(_, m)| *m)
    }

    /// The configured neighbour for `dst`, else the family's default.
    pub(super) fn egress(&self, dst: IpAddr) -> Option<Egress> {
        let default = match dst {
            IpAddr::V4(_) => IpAddr::from([0u8; 4]),
            IpAddr::V6(_) => IpAddr::from([0u8; 16]),
        };
        let n = &self.config.neigh;
        n.get(&dst).or_else(|| n.get(&default)).copied()
    }
}

/// The PDU Session Container of an outgoing G-PDU (TS 38.415 clause 5.5.2): towards the
/// access network a DL container with the QFI of the first QER that has one (with its
/// RQI and PPI), else the QFI that came in; on a relay to another UPF the container that
/// came in (PDU type and QFI), unless Outer Header Removal asked to delete it (bit 0 of
/// the GTP-U Extension Header Deletion, clause 8.2.64).
fn pdu_session_container(
    destination_interface: u8,
    pdr: &Pdr,
    qer: Option<&Qer>,
    p: &Packet<'_>,
) -> Option<gtpu::PscFields> {
    let deleted = pdr
        .outer_header_removal
        .and_then(|r| r.ext_header_deletion)
        .is_some_and(|x| x & 1 != 0);
    let kept = p.outer.qfi.filter(|_| p.is_gtpu() && !deleted);
    let qfi = qer.and_then(|q| q.qfi).or(kept)?;
    if destination_interface == interface::ACCESS {
        return Some(gtpu::PscFields::Dl {
            qfi,
            rqi: qer.is_some_and(|q| q.rqi),
            ppi: qer.and_then(|q| q.ppi).map(|x| x & 0x07),
        });
    }
    kept?;
    Some(match p.outer.psc_type {
        1 => gtpu::PscFields::Ul { qfi },
        _ => gtpu::PscFields::Dl {
            qfi,
            rqi: false,
            ppi: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::lease::{Layout, Rule};
    use super::*;
    use crate::fastpath::Usage;

    /// Octets an MBR lets through in `secs` of packets of `size` octets offered at
    /// `offered` octets/s, with the coarse clock's 4 ms ticks, on one lane.
    fn admitted(kbps: u64, offered: u64, size: u64, secs: u64) -> u64 {
        let lay = Layout::default();
        let u = mbr_units(kbps, lay.lanes);
        let mbr = Mbr {
            cost: [u.cost; 2],
            tau: [u.tau; 2],
            lease: [u.lease; 2],
        };
        let tick = 4_000_000;
        let per_tick = offered * tick / NSEC_PER_SEC / size;
        let mut r = Rule::default();
        let (pool, l) = r.at(0);
        let mut passed = 0;
        for t in 0..secs * NSEC_PER_SEC / tick {
            let now = 1_000_000_000_000 + t * tick;
            for _ in 0..per_tick {
                if lease::mbr_take(lay, pool, l, Some(&mbr), 0, size as u32, now) {
                    passed += size;
                }
            }
        }
        passed
    }

    /// What an MBR of `rate` octets/s lets through from idle over the `secs` of
    /// [`admitted`] (its last tick starts 4 ms before the end): the rate over that time
    /// and the burst (100 ms of the rate). The GCRA's tolerance is a lease's life short
    /// of the burst, which the leases' life gives back.
    fn allowed(rate: u64, secs: u64) -> u64 {
        rate * (secs * NSEC_PER_SEC - 4_000_000) / NSEC_PER_SEC + rate / 10
    }

    #[test]
    fn the_mbr_holds_over_time_after_one_burst() {
        // 10 Mbit/s offered 50 Mbit/s for 10 s: the rate plus the burst.
        let rate = 10_000_000 / 8;
        let got = admitted(10_000, 50_000_000 / 8, 1250, 10);
        let want = allowed(rate, 10);
        assert!(got.abs_diff(want) < want / 1000, "{got} vs {want}");
        // Under the rate nothing is dropped.
        assert_eq!(
            admitted(10_000, 5_000_000 / 8, 1250, 10),
            5_000_000 / 8 * 10
        );
        // 100 Gbit/s, the cap, is still exact to well under 1 %.
        let got = admitted(100_000_000, 20_000_000_000, 1500, 1);
        let want = allowed(12_500_000_000, 1);
        assert!(got.abs_diff(want) < want / 1000, "{got} vs {want}");
    }

    #[test]
    fn gcra_units_never_overflow() {
        for kbps in [0, 1, 7, 1_000, 10_000_000, 100_000_000, u64::MAX] {
            for lanes in 1..=abi::LANES_MAX {
                let u = mbr_units(kbps, lanes);
                assert!(u.cost <= 1 << 47, "{kbps}");
                // A lease's or a 64 KiB packet's cost fits in 64 bits, and now + tau in
                // any uptime.
                assert!(u.lease > 0, "{kbps}");
                assert!(u64::from(u.lease.max(65_535)).checked_mul(u.cost).is_some());
                assert!(u.tau < 1 << 62, "{kbps}");
                // The burst less a lease's life still holds a lease or more.
                assert!(u.tau >= (u64::from(u.lease) * u.cost) >> abi::QER_COST_SHIFT);
            }
        }
        // A rate of 0: the burst (two leases of 1500 octets), then nothing.
        let got = admitted(0, 1_000_000, 1000, 2);
        assert!((3000..=4000).contains(&got), "{got}");
    }

    // -- Lanes through the pipeline ------------------------------------------------------

    use std::net::Ipv4Addr;
    use std::sync::Arc;

    use pfcp::ie::{Bitrate, FSeid, Flags, NodeId, OuterHeaderRemoval};
    use smallvec::smallvec;
    use thin_vec::thin_vec;

    use crate::fastpath::FastPath;
    use crate::rules::*;

    const N3: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 7);
    const GNB: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 1);
    const UE: Ipv4Addr = Ipv4Addr::new(10, 45, 0, 2);
    const TEID: u32 = 0x100;
    const SEID: u64 = 7;
    const SEC: u64 = NSEC_PER_SEC;

    /// Tables reserved for n sessions (a key each way, a QER and a URR each) do not grow
    /// while n sessions come: with `datapath.mode: none` upfd runs on the model, and a
    /// table doubling at a million sessions stalled an establishment (issue 28).
    #[test]
    fn reserved_tables_do_not_grow_as_sessions_come() {
        let n = 3000u32;
        let mut m = Model::without_traffic(4 * n as usize);
        m.reserve(n as usize);
        let before = m.capacities();
        for i in 0..n {
            let mut s = (*session(&[1000])).clone();
            s.up_seid = u64::from(i) + 1;
            s.urrs.remove(&2);
            let p = s.pdrs.get_mut(&1).unwrap();
            p.urr_ids = smallvec![1];
            p.pdi.local_fteid.as_mut().unwrap().teid = 0x1000 + i;
            p.pdi.ue_ips[0].ipv4 = Some(Ipv4Addr::from(0x0a2d_0000 + i));
            p.pdi.ue_ips[0].is_destination = true;
            m.install(None, &Arc::new(s)).unwrap();
        }
        let after = m.capacities();
        assert_eq!(
            after, before,
            "capacities of sessions, TEIDs, UEs, QERs, URRs"
        );
    }

    /// A session with one uplink PDR, decapsulating to N6, with QERs of these rates
    /// (kbit/s both ways) and URRs 1 and 2.
    fn session(qers: &[u64]) -> Arc<Session> {
        let mut s = Session::new(
            SEID,
            FSeid {
                spare: 0,
                seid: SEID,
                ipv4: Some(Ipv4Addr::LOCALHOST),
                ipv6: None,
            },
            NodeId::Ipv4(Ipv4Addr::LOCALHOST),
        );
        let forward = ApplyAction {
            forw: true,
            ..Default::default()
        };
        s.fars.insert(
            1,
            Far {
                id: 1,
                action: forward,
                forwarding: Some(Forwarding {
                    destination_interface: interface::CORE,
                    ..Default::default()
                }),
                bar_id: None,
            },
        );
        for (i, kbps) in qers.iter().enumerate() {
            let id = i as u32 + 1;
            let mut q = Qer::default();
            (q.id, q.gate_ul_open, q.gate_dl_open) = (id, true, true);
            q.mbr = Some(Bitrate {
                ul_kbps: *kbps,
                dl_kbps: *kbps,
            });
            s.qers.insert(id, q);
        }
        for id in [1, 2] {
            let rule = UrrRule {
                measurement_method: Flags::from_bits(&[2], 1),
                reporting_triggers: Flags::from_bits(&[], 3),
                measurement_period: None,
                volume_threshold: None,
                volume_quota: None,
                time_threshold: None,
                time_quota: None,
                quota_holding_time: None,
                inactivity_detection_time: None,
                linked_urr_ids: vec![],
                far_id_for_quota_action: None,
            };
            s.urrs.insert(id, Urr { id, rule });
        }
        let pdi = Pdi {
            source_interface: interface::ACCESS,
            local_fteid: Some(LocalFteid {
                teid: TEID,
                ipv4: Some(N3),
                ipv6: None,
            }),
            ue_ips: thin_vec![UeIp {
                ipv4: Some(UE),
                ..Default::default()
            }],
            ..Default::default()
        };
        s.pdrs.insert(
            1,
            Pdr {
                id: 1,
                precedence: 1,
                pdi,
                outer_header_removal: Some(OuterHeaderRemoval {
                    description: 0,
                    ext_header_deletion: None,
                }),
                far_id: Some(1),
                urr_ids: smallvec![1, 2],
                qer_ids: (1..=qers.len() as u32).collect(),
                activation_time: None,
                deactivation_time: None,
            },
        );
        Arc::new(s)
    }

    fn model(qers: &[u64], lanes: usize, ncpus: usize) -> Model {
        let mut c = Config {
            local: vec![IpAddr::V4(N3)],
            n3_v4: Some(N3),
            ..Default::default()
        };
        let out = Egress {
            ifindex: 6,
            mtu: 1500,
            smac: [2, 0, 0, 0, 0, 1],
            dmac: [2, 0, 0, 0, 0, 2],
        };
        c.neigh.insert(IpAddr::V4(Ipv4Addr::UNSPECIFIED), out);
        let mut m = Model::new(64, c);
        m.set_lanes(lanes, ncpus);
        m.install(None, &session(qers)).unwrap();
        m
    }

    fn ipv4_udp(src: Ipv4Addr, dst: Ipv4Addr, port: u16, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0x45, 0];
        p.extend(((28 + payload.len()) as u16).to_be_bytes());
        p.extend([0, 0, 0x40, 0, 64, 17, 0, 0]);
        p.extend(src.octets());
        p.extend(dst.octets());
        p.extend(port.to_be_bytes());
        p.extend(port.to_be_bytes());
        p.extend(((8 + payload.len()) as u16).to_be_bytes());
        p.extend([0, 0]);
        p.extend_from_slice(payload);
        p
    }

    /// A G-PDU from the UE carrying an IPv4 packet of 100 octets.
    fn frame() -> Vec<u8> {
        let inner = ipv4_udp(UE, Ipv4Addr::new(198, 51, 100, 7), 5000, &[7; 72]);
        let mut g = vec![0x30, 0xff];
        g.extend((inner.len() as u16).to_be_bytes());
        g.extend(TEID.to_be_bytes());
        g.extend(inner);
        let mut f = vec![2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 8, 0x08, 0x00];
        f.extend(ipv4_udp(GNB, N3, 2152, &g));
        f
    }

    #[test]
    fn urrs_count_in_the_lanes_of_their_cpus_and_lease_quota_and_threshold() {
        let mut m = model(&[10_000], 2, 2);
        m.set_quota(SEID, 1, Some(5_050));
        m.set_threshold(SEID, 2, Some(2_000));
        let f = frame();
        let now = 5 * SEC + SEC / 2;
        let mut passed = 0u64;
        for i in 0..80 {
            m.set_cpu(i % 2);
            match m.process_n3(&f, now + i as u64 * 1_000_000) {
                Verdict::Redirect { .. } => passed += 1,
                Verdict::Drop(DropReason::QuotaExhausted) => {}
                v => panic!("{v:?}"),
            }
        }
        // 5050 octets of quota, leased a quarter of what is left at a time, and at the
        // end what a packet lacks: both lanes drain it to the last 50 octets.
        assert_eq!(passed, 50);
        for urr in [1, 2] {
            let u = m.usage(SEID, urr);
            assert_eq!(
                (u.ul_packets, u.ul_bytes),
                (passed, passed * 100),
                "URR {urr}"
            );
            assert_eq!((u.first_packet, u.last_packet), (Some(5), Some(5)));
            let lanes = &m.urrs[&(SEID, urr)].lanes;
            assert_eq!(lanes.len(), 2);
            assert!(lanes.iter().all(|l| l.packets[0] >= passed / 2));
        }
        assert_eq!(
            m.take_volume_events(),
            [
                VolumeEvent::ThresholdReached {
                    seid: SEID,
                    urr_id: 2
                },
                VolumeEvent::QuotaExhausted {
                    seid: SEID,
                    urr_id: 1
                },
            ]
        );
        m.reset_usage(SEID, 1);
        assert_eq!(m.usage(SEID, 1), Usage::default());
        // Shared lanes (4 CPUs on 2 lanes): no leases, the quota spent per packet.
        let mut m = model(&[10_000], 2, 4);
        m.set_quota(SEID, 1, Some(5_050));
        for i in 0..60 {
            m.set_cpu(i % 4);
            m.process_n3(&f, now);
        }
        assert_eq!(m.usage(SEID, 1).ul_bytes, 5_000);
        assert_eq!(m.urrs[&(SEID, 1)].pool.quota, 50);
    }

    #[test]
    fn a_qer_that_refuses_refunds_the_ones_before_it() {
        // QER 1 at 10 Mbit/s, QER 2 at 0: its burst of 3000 octets, then nothing.
        let mut m = model(&[10_000, 0], 2, 2);
        let f = frame();
        let now = 5 * SEC;
        let mut passed = 0;
        // Bounded: a burst that never ends (a lease not spent) fails, not loops.
        loop {
            assert!(passed <= 1000, "QER 2's burst never ran out");
            let before = m.qers.get(&(SEID, 1)).cloned();
            match m.process_n3(&f, now) {
                Verdict::Redirect { .. } => passed += 1,
                Verdict::Drop(DropReason::MbrExceeded) => {
                    // QER 1 charged the packet and gave it back to its lane.
                    assert_eq!(m.qers.get(&(SEID, 1)), before.as_ref());
                    break;
                }
                v => panic!("{v:?}"),
            }
        }
        // Leases of 3000 / (2 x 2) = 750 octets, each taken only if the packet alone
        // would still conform after it: as a GCRA per packet, the 3000-octet burst of
        // 100-octet packets.
        assert_eq!(passed, 30);
        assert!(m.qers[&(SEID, 1)].lanes[0].mbr_credit[0] > 0);
    }
}
