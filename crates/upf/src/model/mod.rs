//! The reference model: the data path's semantics written for clarity, in Rust, straight
//! from the session's rules (TS 29.244 clause 5.2). It is the executable specification
//! the XDP programs are tested against (ARCHITECTURE.md, "Differential testing of the
//! fast path"), so it shares no code with the compiler that turns rules into the XDP
//! programs' tables (crates/bpf/src/compile.rs): it finds PDRs, UE addresses, tunnels and
//! rates in the rules itself, packet by packet. It shares the rule types, the numbers of
//! bpf/include/abi.h (limits, drop reasons) and the SDF filters' parser and matcher
//! (crate::sdf), whose compilation to table entries is the compiler's alone.
//!
//! - this file: the installed sessions, their lookup keys, counters and rate state;
//!   [`FastPath`] for upfd's `datapath.mode: none` and for tests;
//! - `lease.rs`: QER MBRs, URR counts, quotas and thresholds with per-CPU leases (lanes),
//!   as bpf/include/lease.h;
//! - `packet.rs`: reading frames (Ethernet, the outer G-PDU, the inner IP packet);
//! - `select.rs`: which PDRs a packet meets, and which takes it;
//! - `pipeline.rs`: what the programs `xdp_n3` and `xdp_n6` do to a frame;
//! - `encap.rs`: the headers the data path writes (outer IP/UDP/GTP-U, TTL);
//! - `app.rs`: application detection (docs/application-detection.md): the parsers of DNS
//!   answers, ClientHellos and HTTP requests, the flow table and the learned addresses.

pub mod app;
mod encap;
mod icmp;
mod lease;
mod packet;
mod pipeline;
mod select;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use ipnet::IpNet;

use crate::abi::{self, DropReason};
use crate::fastpath::{AppFlow, Buffered, Config, Event, FastPath, FastPathError, Reinject, Usage};
use crate::rules::{interface, Session};

use self::lease::{Layout, Rule};
use self::select::{candidates, Key};

/// What became of a frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Drop(DropReason),
    /// Left to the kernel (not for the UPF, or for upfd's sockets).
    Pass,
    /// Sent out of `ifindex` (XDP_REDIRECT, or XDP_TX when it is the ingress).
    Redirect {
        ifindex: u32,
        frame: Vec<u8>,
    },
    /// Handed to upfd for a buffering FAR.
    Buffer(Buffered),
    /// Handed to upfd for a FAR with Redirect Information (an uplink TCP segment it
    /// answers: crate::redirect).
    ToRedirect(Buffered),
}

/// How the data path reads a frame that arrives on N3/N9: the G-PDU contract it shares
/// with the codec (`gtpu::parse_gpdu`) and bpf/include/gtpu.h (packet.rs lists the
/// deliberate differences from the codec).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpduRead {
    /// Not GTP-U for one of our addresses: the kernel's.
    NotOurs,
    /// GTP-U for us that upfd answers (not a G-PDU, or an extension header it must).
    SlowPath,
    Malformed,
    /// A G-PDU: its TEID, the QFI and PDU type of its first DL or UL PDU Session
    /// Container, and the offset of its T-PDU in the frame.
    Gpdu {
        teid: u32,
        qfi: Option<u8>,
        psc_type: u8,
        inner: usize,
    },
}

/// Read a frame arriving on N3/N9 as the data path does, for our addresses in `cfg`.
pub fn read_gpdu(frame: &[u8], cfg: &Config) -> GpduRead {
    let Some((family, l3)) = packet::parse_eth(frame) else {
        return GpduRead::NotOurs;
    };
    match packet::parse_gtpu(frame, l3, family, cfg) {
        packet::Gtp::Ok(o) => GpduRead::Gpdu {
            teid: o.teid,
            qfi: o.qfi,
            psc_type: o.psc_type,
            inner: o.inner,
        },
        packet::Gtp::NotOurs => GpduRead::NotOurs,
        packet::Gtp::SlowPath => GpduRead::SlowPath,
        packet::Gtp::Malformed => GpduRead::Malformed,
    }
}

/// A volume event the data path raises for a URR.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VolumeEvent {
    /// EV_QUOTA: a packet found the quota used up (once until upfd sets a new quota).
    QuotaExhausted { seid: u64, urr_id: u32 },
    /// EV_THRESHOLD: a lease took the threshold's pool to zero or below (up to a lease
    /// per lane before the summed counts reach it).
    ThresholdReached { seid: u64, urr_id: u32 },
}

impl From<VolumeEvent> for Event {
    fn from(e: VolumeEvent) -> Event {
        match e {
            VolumeEvent::QuotaExhausted { seid, .. } => Event::QuotaExhausted { seid },
            VolumeEvent::ThresholdReached { seid, .. } => Event::ThresholdReached { seid },
        }
    }
}

/// The model's lookup keys of a session: what a packet is found by, each with the first
/// PDR (by ID) that brings it, for errors.
#[derive(Debug, Default)]
struct SessionKeys {
    teids: Vec<(u32, u16)>,
    ues: Vec<(IpAddr, u16)>,
    routes: Vec<IpNet>,
}

impl SessionKeys {
    /// Uplink: the local TEIDs of PDRs that receive G-PDUs. Downlink: the UE addresses
    /// and framed routes of PDRs without a local F-TEID on the core side; there the UE
    /// address is the packets' destination whatever its S/D flag says (pfcpsim leaves
    /// it clear).
    fn of(s: &Session) -> Self {
        let mut k = SessionKeys::default();
        for p in s.pdrs.values() {
            let pdi = s.effective_pdi(p);
            match pdi.local_fteid {
                Some(f) => add(&mut k.teids, f.teid, p.id),
                None if pdi.source_interface != interface::ACCESS => {
                    for a in pdi.ue_ips.iter().flat_map(|u| u.addrs()) {
                        add(&mut k.ues, a, p.id);
                    }
                    for r in &pdi.framed_routes {
                        if !k.routes.contains(r) {
                            k.routes.push(*r);
                        }
                    }
                }
                None => {}
            }
        }
        k
    }
}

/// What one session may ask of the data path (bpf/include/abi.h): at most
/// MAX_PDRS_PER_KEY PDRs reached by one key, MAX_QERS_PER_PDR QERs and MAX_URRS_PER_PDR
/// URRs on one PDR.
fn check_limits(s: &Session, k: &SessionKeys) -> Result<(), FastPathError> {
    for p in s.pdrs.values() {
        let refuse = |why: String| FastPathError::Pdr { pdr_id: p.id, why };
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
    }
    let keys = (k.teids.iter().map(|(t, p)| (Key::Teid(*t), *p)))
        .chain(k.ues.iter().map(|(a, p)| (Key::Ue(*a), *p)))
        .chain(k.routes.iter().map(|r| (Key::Ue(r.network()), 0)));
    for (key, pdr_id) in keys {
        let (pdrs, _) = candidates(s, key);
        if pdrs.len() > abi::MAX_PDRS_PER_KEY as usize {
            return Err(FastPathError::Pdr {
                pdr_id: if pdr_id == 0 { pdrs[0].id } else { pdr_id },
                why: format!("more than {} PDRs on one lookup key", abi::MAX_PDRS_PER_KEY),
            });
        }
    }
    Ok(())
}

const NSEC_PER_SEC: u64 = 1_000_000_000;

fn add<K: PartialEq>(keys: &mut Vec<(K, u16)>, key: K, pdr: u16) {
    if !keys.iter().any(|(x, _)| *x == key) {
        keys.push((key, pdr));
    }
}

/// The reference data path: installed sessions, the keys packets find them by, and
/// the state the programs keep (per QER and URR a pool and its lanes: MBRs, quotas,
/// thresholds, URR counts; the per-reason counters).
#[derive(Debug, Default)]
pub struct Model {
    config: Config,
    /// Capacity of the lookup tables (what the BPF maps are sized to).
    max_keys: usize,
    /// The installed sessions (shared with the session table, not copied).
    sessions: HashMap<u64, Arc<Session>>,
    by_teid: HashMap<u32, u64>,
    by_ue: HashMap<IpAddr, u64>,
    routes: HashMap<IpNet, u64>,
    /// Per (session, QER ID): the MBR's pool and lanes (lease.rs).
    qers: HashMap<(u64, u32), Rule>,
    /// Per (session, URR ID): the counts (in the lanes), quota and threshold.
    urrs: HashMap<(u64, u32), Rule>,
    /// How many lanes a rule has, shared or not ([`Model::set_lanes`]).
    layout: Layout,
    /// The CPU the next packet runs on ([`Model::set_cpu`]); its lane is CPU mod lanes.
    cpu: usize,
    /// The latest coarse clock a packet was counted at (ns): lane times are read
    /// against it.
    clock: u64,
    /// EV_QUOTA and EV_THRESHOLD raised, oldest first.
    volume_events: Vec<VolumeEvent>,
    /// Packets and octets per drop reason and outcome (the stats table's indices).
    stats: Vec<(u64, u64)>,
    /// The slow path's GCRA (unknown TEIDs to upfd).
    slowpath_tat: u64,
    /// The ICMP errors' GCRAs (icmp.rs): over all sessions, and per session.
    icmp_tat: u64,
    icmp_tats: HashMap<u64, u64>,
    /// Verdicts of the frames sent through the model again ([`Reinject`]).
    injected: Vec<Verdict>,
    /// When the model's clock started: `reinject_n6` times frames from it.
    epoch: Option<Instant>,
    /// Whether it claims to signal volume thresholds and quotas (see `without_traffic`).
    signals_volume: bool,
    /// The PFDs of every application (application detection, app.rs).
    pfds: Arc<crate::pfd::PfdTable>,
    /// The flow table, the learned addresses and the events of application detection.
    apps: app::AppState,
}

impl Model {
    /// A model whose lookup tables hold `max_keys` keys per direction.
    pub fn new(max_keys: usize, config: Config) -> Self {
        Model {
            config,
            max_keys,
            stats: vec![(0, 0); crate::abi::STAT_MAX as usize],
            ..Model::default()
        }
    }

    /// A model that will see no traffic (upfd's `datapath.mode: none`): no volume is
    /// ever counted, so no URR needs polling for a volume trigger.
    pub fn without_traffic(max_keys: usize) -> Self {
        Model {
            signals_volume: true,
            ..Model::new(max_keys, Config::default())
        }
    }

    /// Size the tables for `n` sessions (a key each way, a QER and a URR each) now, so
    /// that none doubles while SMFs wait: upfd's `datapath.mode: none` runs on this
    /// model, whose tables alone were not reserved as the session table's are (issue 28
    /// saw a 230-300 ms longest establishment in every run of that mode). Untouched
    /// room costs address space, not memory.
    pub fn reserve(&mut self, n: usize) {
        self.sessions.reserve(n);
        self.by_teid.reserve(n);
        self.by_ue.reserve(n);
        self.qers.reserve(n);
        self.urrs.reserve(n);
    }

    /// The capacities of the per-session tables ([`Model::reserve`]).
    pub fn capacities(&self) -> [usize; 5] {
        [
            self.sessions.capacity(),
            self.by_teid.capacity(),
            self.by_ue.capacity(),
            self.qers.capacity(),
            self.urrs.capacity(),
        ]
    }

    /// Lanes per QER and URR: `lanes` (upfd gives min(ncpus, LANES_MAX); clamped to
    /// 1..=LANES_MAX) for `ncpus` CPUs, shared by several CPUs (no leases) when there
    /// are more CPUs than lanes. Default: one lane, one CPU. Set before traffic: rules
    /// keep the lanes they have, and gain empty ones.
    pub fn set_lanes(&mut self, lanes: usize, ncpus: usize) {
        let lanes = lanes.clamp(1, abi::LANES_MAX as usize);
        self.layout = Layout {
            lanes: lanes as u32,
            shared: ncpus > lanes,
        };
    }

    /// The CPU the next packets run on: they use lane `cpu` mod lanes. Default: 0.
    pub fn set_cpu(&mut self, cpu: usize) {
        self.cpu = cpu;
    }

    /// The lane the current packet runs on.
    fn lane(&self) -> usize {
        self.cpu % self.layout.lanes as usize
    }

    /// EV_QUOTA and EV_THRESHOLD raised since last asked, oldest first, taken out.
    pub fn take_volume_events(&mut self) -> Vec<VolumeEvent> {
        std::mem::take(&mut self.volume_events)
    }

    /// The counters by index (drop reasons, then `abi::Stat`): packets and octets.
    pub fn stats(&self) -> &[(u64, u64)] {
        &self.stats
    }

    /// The verdicts of the frames sent through the model again ([`Reinject`]), oldest
    /// first, taken out.
    pub fn take_injected(&mut self) -> Vec<Verdict> {
        std::mem::take(&mut self.injected)
    }

    /// The session a downlink packet to `dst` belongs to: exact UE address, else the
    /// longest framed route that holds it.
    fn downlink_session(&self, dst: IpAddr) -> Option<u64> {
        self.by_ue
            .get(&dst)
            .copied()
            .or_else(|| self.route_of(dst).map(|(_, s)| s))
    }

    /// The longest framed route holding `a`, and its session.
    fn route_of(&self, a: IpAddr) -> Option<(IpNet, u64)> {
        self.routes
            .iter()
            .filter(|(n, _)| n.contains(&a))
            .max_by_key(|(n, _)| n.prefix_len())
            .map(|(n, s)| (*n, *s))
    }

    /// Keys of `k` taken by another session, or tables that would overflow. Keys the
    /// session already holds are its own.
    fn check_keys(&self, seid: u64, k: &SessionKeys) -> Result<(), FastPathError> {
        for (t, pdr) in &k.teids {
            if self.by_teid.get(t).is_some_and(|o| *o != seid) {
                return Err(FastPathError::Pdr {
                    pdr_id: *pdr,
                    why: format!("TEID {t:#x} is already installed for another session"),
                });
            }
        }
        for (a, pdr) in &k.ues {
            if self.by_ue.get(a).is_some_and(|o| *o != seid) {
                return Err(FastPathError::Pdr {
                    pdr_id: *pdr,
                    why: format!("UE address {a} is already installed for another session"),
                });
            }
        }
        let new_teids = k
            .teids
            .iter()
            .filter(|(t, _)| !self.by_teid.contains_key(t));
        if self.by_teid.len() + new_teids.count() > self.max_keys {
            return Err(FastPathError::Full("uplink"));
        }
        let new_ues = k.ues.iter().filter(|(a, _)| !self.by_ue.contains_key(a));
        if self.by_ue.len() + new_ues.count() > self.max_keys {
            return Err(FastPathError::Full("downlink"));
        }
        Ok(())
    }

    fn unindex(&mut self, seid: u64, k: &SessionKeys) {
        for (t, _) in &k.teids {
            if self.by_teid.get(t) == Some(&seid) {
                self.by_teid.remove(t);
            }
        }
        for (a, _) in &k.ues {
            if self.by_ue.get(a) == Some(&seid) {
                self.by_ue.remove(a);
            }
        }
        for r in &k.routes {
            if self.routes.get(r) == Some(&seid) {
                self.routes.remove(r);
            }
        }
    }
}

impl FastPath for Model {
    fn session_by_teid(&self, teid: u32) -> Option<Option<u64>> {
        Some(self.by_teid.get(&teid).copied())
    }

    fn session_by_ue(&self, a: IpAddr) -> Option<Option<u64>> {
        Some(self.downlink_session(a))
    }

    fn install(&mut self, old: Option<&Session>, new: &Arc<Session>) -> Result<(), FastPathError> {
        let seid = new.up_seid;
        let k = SessionKeys::of(new);
        check_limits(new, &k)?;
        self.check_keys(seid, &k)?;
        if let Some(old) = old {
            self.unindex(seid, &SessionKeys::of(old));
            // URRs that no longer exist lose their counters, quotas and thresholds,
            // QERs their rate state; new ones start at zero (a new cell).
            for u in old.urrs.keys() {
                if !new.urrs.contains_key(u) {
                    self.urrs.remove(&(seid, *u));
                }
            }
            for q in old.qers.keys() {
                if !new.qers.contains_key(q) {
                    self.qers.remove(&(seid, *q));
                }
            }
        }
        self.by_teid.extend(k.teids.iter().map(|(t, _)| (*t, seid)));
        self.by_ue.extend(k.ues.iter().map(|(a, _)| (*a, seid)));
        self.routes.extend(k.routes.iter().map(|r| (*r, seid)));
        self.sessions.insert(seid, Arc::clone(new));
        Ok(())
    }

    fn set_pfds(
        &mut self,
        pfds: &Arc<crate::pfd::PfdTable>,
        changed: &[String],
    ) -> Result<(), FastPathError> {
        let old = std::mem::replace(&mut self.pfds, Arc::clone(pfds));
        // What was learned for a changed application goes; classified flows stay.
        self.forget_learned(&old, changed);
        Ok(())
    }

    fn app_flow_idle(&self, seid: u64, flow: &AppFlow) -> Option<std::time::Duration> {
        self.flow_idle(seid, flow)
    }

    fn remove(&mut self, session: &Session) {
        let seid = session.up_seid;
        self.unindex(seid, &SessionKeys::of(session));
        self.sessions.remove(&seid);
        self.icmp_tats.remove(&seid);
        self.forget_flows(seid);
        // Everything kept per rule goes with the session (a million sessions churned
        // left 36 octets each behind when thresholds stayed: upfbench soak, heap test).
        for u in session.urrs.keys() {
            self.urrs.remove(&(seid, *u));
        }
        for q in session.qers.keys() {
            self.qers.remove(&(seid, *q));
        }
    }

    /// The lanes' counts summed; the first packet the earliest lane's, the last the
    /// latest lane's, each the start of its lane time unit (2^LANE_TIME_SHIFT ns, read
    /// against the latest clock counted at) in whole seconds of the clock, rounded down:
    /// up to 1.05 ms earlier than the packet's own time, so a packet in the first
    /// 1.05 ms of a second counts in the second before.
    fn usage(&self, seid: u64, urr_id: u32) -> Usage {
        let mut u = Usage::default();
        let Some(r) = self.urrs.get(&(seid, urr_id)) else {
            return u;
        };
        let mut times: Option<(u64, u64)> = None;
        for l in &r.lanes {
            u.ul_packets += l.packets[0];
            u.ul_bytes += l.bytes[0];
            u.dl_packets += l.packets[1];
            u.dl_bytes += l.bytes[1];
            if l.first != 0 {
                let first = lease::lane_time_ns(l.first, self.clock);
                let last = lease::lane_time_ns(l.last, self.clock);
                times = Some(times.map_or((first, last), |(f, t)| (f.min(first), t.max(last))));
            }
        }
        if let Some((first, last)) = times {
            u.first_packet = Some(first / NSEC_PER_SEC);
            u.last_packet = Some(last / NSEC_PER_SEC);
        }
        u
    }

    /// Zeroes the lanes' counts and times (their credit stays, as in the data path).
    fn reset_usage(&mut self, seid: u64, urr_id: u32) {
        if let Some(r) = self.urrs.get_mut(&(seid, urr_id)) {
            for l in &mut r.lanes {
                l.packets = [0; 2];
                l.bytes = [0; 2];
                l.first = 0;
                l.last = 0;
            }
        }
    }

    fn set_quota(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>) {
        let r = self.urrs.entry((seid, urr_id)).or_default();
        r.pool.set_quota(remaining);
    }

    fn set_threshold(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>) {
        // The model raises EV_THRESHOLD (take_volume_events) but does not claim to
        // signal volume (signals_volume): report.rs polls its URRs.
        let r = self.urrs.entry((seid, urr_id)).or_default();
        r.pool.set_threshold(remaining);
    }

    fn signals_volume(&self) -> bool {
        self.signals_volume
    }
}

impl Reinject for Model {
    /// Processed as `xdp_n6` would, the verdict kept for [`Model::take_injected`].
    fn reinject_n6(&mut self, frame: &[u8], now: Instant) -> Result<(), FastPathError> {
        let epoch = *self.epoch.get_or_insert(now);
        let ns = now.saturating_duration_since(epoch).as_nanos() as u64;
        let v = self.process_n6(frame, ns);
        self.injected.push(v);
        Ok(())
    }
}
