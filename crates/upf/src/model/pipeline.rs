//! What the programs `xdp_n3` (G-PDUs in on N3/N9) and `xdp_n6` (IP in from the data
//! network) do to a frame, step by step, read from the session's rules (TS 29.244 clause
//! 5.2.1): find the session by its key, check the source and destination, pick the PDR,
//! apply its FAR, QERs and URRs, build the new headers, choose the egress. Where the model and the XDP
//! programs must agree on a detail (the order of checks, which header fields are
//! rewritten, how the MBR's GCRA rounds), this file is the specification.

use std::net::IpAddr;

use crate::abi::{self, DropReason, Stat};
use crate::fastpath::{Buffered, Config, Egress, Usage};
use crate::rules::{interface, Far, Pdr, Qer, Session};
use crate::sdf::{Direction, PacketFields};

use super::encap::{dec_ttl, outer_header, tunnel, udp6_checksum};
use super::packet::{parse_eth, parse_gtpu, parse_inner, Gtp, Outer};
use super::select::{candidates, pdr_takes, removal_fits, Key, Seen};
use super::{Buckets, Model, Verdict};

const NSEC_PER_SEC: u64 = 1_000_000_000;

/// A packet that found its session.
struct Packet<'f> {
    frame: &'f [u8],
    seid: u64,
    key: Key,
    outer: Outer,
    /// The user's IP packet: its length and the fields SDF filters read.
    len: usize,
    fields: PacketFields,
}

impl Packet<'_> {
    fn is_gtpu(&self) -> bool {
        matches!(self.key, Key::Teid(_))
    }

    fn ip(&self) -> &[u8] {
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

/// A QER's maximum bit rate in the data path's units (the GCRA of bpf/include/qer.h):
/// the time one octet takes at the rate, in 2^-QER_COST_SHIFT ns rounded down, and the
/// burst tolerance in ns. The rate is at most 100 Gbit/s; the burst is 100 ms of it, at
/// least 3000 octets, at most a second of it; a rate of 0 costs 2^47 units an octet (a
/// burst, then in effect nothing).
fn mbr_units(kbps: u64) -> (u64, u64) {
    let octets_per_sec = (kbps.saturating_mul(1000) / 8).min(12_500_000_000);
    let burst = (octets_per_sec / 10).clamp(3000, octets_per_sec.max(3000));
    let unit = NSEC_PER_SEC << abi::QER_COST_SHIFT;
    let cost = unit
        .checked_div(octets_per_sec)
        .map_or(1 << 47, |c| c.min(1 << 47));
    (cost, (burst * cost) >> abi::QER_COST_SHIFT)
}

/// One event costing `cost` ns against a GCRA at `tat` with tolerance `tau`: whether it
/// conforms (and then it moves tat).
fn gcra(tat: &mut u64, cost: u64, tau: u64, now: u64) -> bool {
    if *tat > now + tau {
        return false;
    }
    *tat = (*tat).max(now) + cost;
    true
}

impl Model {
    fn count(&mut self, i: usize, bytes: usize) {
        self.stats[i].0 += 1;
        self.stats[i].1 += bytes as u64;
    }

    fn dropped(&mut self, r: DropReason, bytes: usize) -> Verdict {
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
        let outer = Outer {
            family: fields.version,
            inner: l3,
            ..Outer::default()
        };
        let key = Key::Ue(fields.dst);
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
        if gcra(&mut self.slowpath_tat, cost, tau, now) {
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
        if header.len() + p.len > usize::from(eg.mtu) {
            return Err(DropReason::MtuExceeded);
        }
        let mut ip = p.ip().to_vec();
        // The user's packet crosses this UPF as a router hop, except on an N9 relay.
        let relay = p.is_gtpu() && !header.is_empty();
        if !relay && !dec_ttl(&mut ip) {
            return Err(DropReason::TtlExceeded);
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
        self.count(Stat::Buffered.index(), p.len);
        Ok(Verdict::Buffer(Buffered {
            seid: p.seid,
            far_id: far.id,
            pdr_id: pdr.id,
            nocp: far.action.nocp,
            packet: p.ip().to_vec(),
        }))
    }

    /// The PDR's QERs in order (clause 5.2.1): each gate must be open and each MBR have
    /// room in the packet's direction. Returns the first QER with a QFI, which gives the
    /// PDU Session Container of the packets sent to the access network.
    fn enforce_qers<'s>(
        &mut self,
        s: &'s Session,
        pdr: &Pdr,
        uplink: bool,
        len: usize,
        now: u64,
    ) -> Result<Option<&'s Qer>, DropReason> {
        // In order, each gate then each MBR; a QER that refuses gives back what the ones
        // before it charged, so a dropped packet uses no QER's rate.
        let mut charged: Vec<(u32, u64)> = Vec::new();
        let mut with_qfi = None;
        let refund = |m: &mut Self, charged: Vec<(u32, u64)>| {
            for (id, c) in charged {
                if let Some(b) = m.buckets.get_mut(&(s.up_seid, id)) {
                    let tat = if uplink { &mut b.tat_ul } else { &mut b.tat_dl };
                    *tat -= c;
                }
            }
        };
        for id in pdr.qer_ids.iter().take(abi::MAX_QERS_PER_PDR as usize) {
            let Some(q) = s.qers.get(id) else {
                continue;
            };
            let (open, kbps) = if uplink {
                (q.gate_ul_open, q.mbr.map(|m| m.ul_kbps))
            } else {
                (q.gate_dl_open, q.mbr.map(|m| m.dl_kbps))
            };
            if !open {
                refund(self, charged);
                return Err(DropReason::GateClosed);
            }
            if let Some(kbps) = kbps {
                let (per_octet, tau) = mbr_units(kbps);
                let b: &mut Buckets = self.buckets.entry((s.up_seid, q.id)).or_default();
                let tat = if uplink { &mut b.tat_ul } else { &mut b.tat_dl };
                let cost = (len as u64 * per_octet) >> abi::QER_COST_SHIFT;
                if !gcra(tat, cost, tau, now) {
                    refund(self, charged);
                    return Err(DropReason::MbrExceeded);
                }
                charged.push((q.id, cost));
            }
            if with_qfi.is_none() && q.qfi.is_some() {
                with_qfi = Some(q);
            }
        }
        Ok(with_qfi)
    }

    /// Every URR of the PDR with a volume quota must have `len` octets left.
    fn check_quotas(&self, seid: u64, urrs: &[u32], len: usize) -> Result<(), DropReason> {
        let short = urrs
            .iter()
            .any(|u| self.quota.get(&(seid, *u)).is_some_and(|q| *q < len as i64));
        if short {
            return Err(DropReason::QuotaExhausted);
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

    /// URR counts (clause 5.2.2): packets and octets of the user's packet per direction,
    /// the times of the first and last packet, and the quota used.
    fn count_usage(&mut self, seid: u64, urrs: &[u32], uplink: bool, len: usize, now: u64) {
        for u in urrs {
            let c: &mut Usage = self.usage.entry((seid, *u)).or_default();
            if uplink {
                c.ul_packets += 1;
                c.ul_bytes += len as u64;
            } else {
                c.dl_packets += 1;
                c.dl_bytes += len as u64;
            }
            let secs = now / NSEC_PER_SEC;
            c.first_packet.get_or_insert(secs);
            c.last_packet = Some(secs);
            if let Some(q) = self.quota.get_mut(&(seid, *u)) {
                *q -= len as i64;
            }
        }
    }

    /// The configured neighbour for `dst`, else the family's default.
    fn egress(&self, dst: IpAddr) -> Option<Egress> {
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
    use super::*;

    /// Octets a GCRA lets through in `secs` of packets of `size` octets offered at
    /// `offered` octets/s, with the coarse clock's 4 ms ticks.
    fn admitted(kbps: u64, offered: u64, size: u64, secs: u64) -> u64 {
        let (per_octet, tau) = mbr_units(kbps);
        let tick = 4_000_000;
        let per_tick = offered * tick / NSEC_PER_SEC / size;
        let mut tat = 0;
        let mut passed = 0;
        for t in 0..secs * NSEC_PER_SEC / tick {
            let now = 1_000_000_000_000 + t * tick;
            for _ in 0..per_tick {
                if gcra(
                    &mut tat,
                    (size * per_octet) >> abi::QER_COST_SHIFT,
                    tau,
                    now,
                ) {
                    passed += size;
                }
            }
        }
        passed
    }

    #[test]
    fn the_mbr_holds_over_time_after_one_burst() {
        // 10 Mbit/s offered 50 Mbit/s for 10 s: the rate plus the 100 ms burst.
        let rate = 10_000_000 / 8;
        let got = admitted(10_000, 50_000_000 / 8, 1250, 10);
        let want = rate * 10 + rate / 10;
        assert!(got.abs_diff(want) < want / 100, "{got} vs {want}");
        // Under the rate nothing is dropped.
        assert_eq!(
            admitted(10_000, 5_000_000 / 8, 1250, 10),
            5_000_000 / 8 * 10
        );
        // 100 Gbit/s, the cap, is still exact to well under 1 %.
        let got = admitted(100_000_000, 20_000_000_000, 1500, 1);
        let want = 12_500_000_000 + 1_250_000_000;
        assert!(got.abs_diff(want) < want / 100, "{got} vs {want}");
    }

    #[test]
    fn gcra_units_never_overflow() {
        for kbps in [0, 1, 7, 1_000, 10_000_000, 100_000_000, u64::MAX] {
            let (cost, tau) = mbr_units(kbps);
            assert!(cost <= 1 << 47, "{kbps}");
            // A 64 KiB packet's cost fits in 64 bits, and now + tau in any uptime.
            assert!((65_535u64).checked_mul(cost).is_some());
            assert!(tau < 1 << 62, "{kbps}");
        }
        // A rate of 0: the burst, then nothing.
        let got = admitted(0, 1_000_000, 1000, 2);
        assert!((3000..=4000).contains(&got), "{got}");
    }
}
