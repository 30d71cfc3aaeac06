//! The XDP data path as a [`FastPath`]: loads the programs of bpf/upf.bpf.c, sizes and
//! configures their tables (bpf/include/upf_maps.h), and is their only writer.
//!
//! Installing a session is four named steps over what the compiler (compile.rs) made of
//! its rules: `check` (its keys are free, the tables have room), `place` (table
//! indices), `write` (the PDR and FAR entries the programs read from the tables) and
//! `publish` (the keys). The programs never see a half-built session: QERs, URRs, FARs,
//! SDF entries and PDRs first (new indices for FARs, SDF entries and PDRs: copy on
//! write), then the lookup keys, which switch to the new rules atomically one key at a
//! time; entries no longer used are freed last, after a grace period so a packet in
//! flight never reads a reused slot.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use smallvec::SmallVec;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags};
use upf::abi;
use upf::fastpath::teid_index::TeidIndex;
use upf::fastpath::{
    AppFlow, Buffered, Config, Egress, Event, FastPath, FastPathError, Reinject, Usage,
};
use upf::pfd::PfdTable;
use upf::rules::Session;

use crate::compile::{compile, sdf_entries, Addresses, Compiled, Key, Rule};
use crate::direct::{ue_key, ue_v4_key, DirectTable, Keying};
use crate::mem::{bytes, from_bytes, io, QerMem, UrrMem};
use crate::slots::{Slots, GRACE};
use crate::upf::types;
use crate::upf::{UpfSkel, UpfSkelBuilder};

/// How long a cleared direct slot or a freed table index rests before it is used again
/// (no packet in flight can still read it then); tests step over it with
/// [`Datapath::install_at`] and [`Datapath::settle_at`].
pub const SLOT_GRACE: std::time::Duration = GRACE;

/// Rule ID -> table index for the few QERs or URRs of a session: a linear search in
/// place costs less memory than a hash map per session (docs/benchmarks.md, heap).
#[derive(Debug, Default, Clone, PartialEq)]
struct IdMap(SmallVec<[(u32, u32); 2]>);

impl IdMap {
    fn get(&self, id: &u32) -> Option<&u32> {
        self.0.iter().find(|(k, _)| k == id).map(|(_, v)| v)
    }

    fn insert(&mut self, id: u32, v: u32) {
        match self.0.iter_mut().find(|(k, _)| *k == id) {
            Some(e) => e.1 = v,
            None => self.0.push((id, v)),
        }
    }

    fn iter(&self) -> impl Iterator<Item = (&u32, &u32)> {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

/// What one installed session occupies. Inline for the usual session (one or two keys,
/// two PDRs and FARs, a QER, a URR): one allocation instead of nine.
#[derive(Debug, Default, Clone)]
struct Installed {
    teids: SmallVec<[u32; 2]>,
    ues: SmallVec<[types::ue_key; 1]>,
    framed: Vec<types::lpm_key>,
    pdrs: SmallVec<[u32; 2]>,
    fars: SmallVec<[u32; 2]>,
    sdfs: SmallVec<[(u32, u32); 2]>,
    /// Stable across modifications: their state (buckets, counters) must survive.
    qers: IdMap,
    urrs: IdMap,
}

/// Sizes of the tables.
#[derive(Debug, Clone, Copy)]
pub struct Capacity {
    pub sessions: u32,
    pub pdrs: u32,
    pub sdf_entries: u32,
    pub framed_routes: u32,
    /// The TEIDs with a direct uplink slot: upfd passes the one its TEID allocator
    /// uses, so the TEIDs it hands out are found without hashing.
    pub teid_index: TeidIndex,
    /// Direct downlink slots, for UE IPv4 addresses (address mod slots).
    pub ue_slots: u32,
    /// Classified flows (app_flows, least recently used ones forgotten first).
    pub app_flows: u32,
    /// Addresses learned from DNS answers (app_addrs, LRU).
    pub app_addrs: u32,
}

impl Capacity {
    pub fn for_sessions(sessions: u32) -> Self {
        let sessions = sessions.max(64);
        Capacity {
            sessions,
            pdrs: sessions.saturating_mul(2).saturating_add(1024),
            sdf_entries: sessions.saturating_add(1024),
            framed_routes: 4096,
            teid_index: TeidIndex::new(1, u32::MAX, sessions.saturating_add(1024)),
            ue_slots: sessions.saturating_add(1024),
            app_flows: (sessions / 4).clamp(65536, 1 << 20),
            app_addrs: 16384,
        }
    }

    /// Slots of the QER and URR tables: one QER and one URR per session, and room; at
    /// least one past every direct slot, since a session's first QER and URR go to its
    /// slot + 1 (`Datapath::install`).
    fn qer_urr_slots(&self) -> u32 {
        self.sessions
            .saturating_add(1024)
            .max(self.teid_index.slots())
            .max(self.ue_slots)
            .saturating_add(1)
    }
}

/// Cells of `urr_state`: per URR slot, the shared cell and one per possible CPU.
fn urr_cells(cap: Capacity, ncpus: usize) -> Result<u32, FastPathError> {
    let slots = u64::from(cap.qer_urr_slots());
    u32::try_from(slots * (1 + ncpus as u64))
        .map_err(|_| FastPathError::Io("urr_state: too many sessions for this many CPUs".into()))
}

/// The XDP data path.
pub struct Datapath {
    skel: UpfSkel<'static>,
    pdr_slots: Slots,
    far_slots: Slots,
    qer_slots: Slots,
    urr_slots: Slots,
    sdf_slots: Slots,
    /// SDF blocks by content: a PDR's compiled filters are written once and shared by
    /// every PDR with the same ones (operators' filters come from a few policies, and
    /// "assigned" is the session's own address in the data path, not a copy), so a
    /// million sessions with the same filters use one block.
    sdf_blocks: HashMap<Vec<u8>, u32>,
    /// Per block start: PDRs using it, and its content (the key of `sdf_blocks`).
    sdf_refs: HashMap<u32, (u32, Vec<u8>)>,
    /// Boxed: the table moves 8-octet pointers when it grows (at ~917,000 sessions it
    /// doubles), not 200-octet records, which stalled N4 for two seconds.
    sessions: HashMap<u64, Box<Installed>>,
    /// The next-hop cache's generation (31 bits, never 0) and key mode.
    nh_gen: u32,
    nh_by_destination: bool,
    cfg: Config,
    /// Where frames from the data network arrive (`configure`): buffered packets are
    /// sent through the N6 program as if they arrived there.
    n6_ifindex: u32,
    cap: Capacity,
    ncpus: usize,
    boot_offset_ns: i128,
    urr_mem: UrrMem,
    qer_mem: QerMem,
    /// Where rule sets are: direct slots or the `uplink` / `downlink` hash tables.
    uplink: DirectTable,
    downlink: DirectTable,
    /// G-PDUs spread over CPUs ([`Datapath::set_spread`]).
    spread: Spread,
    spread_cpus: Vec<u32>,
    /// The PFDs of every application (application detection, include/app.h).
    pfds: Arc<upf::pfd::PfdTable>,
    /// What `set_pfds` wrote: app_sdfs chunks (APP_MAX_SDF entries each) by application
    /// index, with their content; app_names and app_urls entries by key.
    app_sdf_chunks: Slots,
    app_blocks: HashMap<u16, (u32, Vec<u8>)>,
    app_names: HashMap<Vec<u8>, types::app_name>,
    app_urls: HashMap<Vec<u8>, u16>,
}

/// How `xdp_n3` spreads G-PDUs over CPUs ([`Datapath::set_spread`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Spread {
    /// Each G-PDU is processed on the CPU it arrived on.
    #[default]
    Off,
    /// By TEID: each tunnel on one CPU.
    Teid,
    /// By the inner packet's addresses, protocol and ports: each flow on one CPU.
    Inner,
}

/// Remove a UE address key, from its direct slot or the hash table.
fn delete_ue(
    downlink: &mut DirectTable,
    maps: &crate::upf::UpfMaps<'static>,
    k: &types::ue_key,
    now: Instant,
) {
    if k.family == 4 {
        let a = std::net::Ipv4Addr::new(k.addr[0], k.addr[1], k.addr[2], k.addr[3]);
        downlink.delete(maps, ue_v4_key(a), now);
    } else {
        let _ = maps.downlink.delete(bytes(k));
    }
}

fn lpm_key(n: &ipnet::IpNet) -> types::lpm_key {
    let mut k = types::lpm_key::default();
    match n {
        ipnet::IpNet::V4(x) => {
            k.family = 4;
            k.addr[..4].copy_from_slice(&x.network().octets());
        }
        ipnet::IpNet::V6(x) => {
            k.family = 6;
            k.addr.copy_from_slice(&x.network().octets());
        }
    }
    k.prefixlen = 8 + n.prefix_len() as u32;
    k
}

fn mono_ns() -> i128 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// A clock's time in ns.
fn clock_ns(clock: libc::clockid_t) -> i128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

fn unix_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// The PDR and FAR values an install wrote, by table index (the rule sets copy a key's
/// first PDR and FAR), and each PDR's index by ID.
#[derive(Default)]
struct Written {
    pdrs: HashMap<u32, types::pdr>,
    fars: HashMap<u32, types::far>,
    pdr_index: HashMap<u16, u32>,
}

/// The octets of an SDF block: the key under which it is shared.
fn sdf_content(entries: &[types::sdf_match]) -> Vec<u8> {
    entries.iter().flat_map(|e| bytes(e).to_vec()).collect()
}

impl Datapath {
    /// Open and load the programs with tables sized for `cap`. Needs CAP_BPF.
    pub fn load(cap: Capacity, cfg: Config) -> Result<Self, FastPathError> {
        let obj: &'static mut MaybeUninit<libbpf_rs::OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = UpfSkelBuilder::default().open(obj).map_err(io)?;
        let m = &mut open.maps;
        m.uplink
            .set_max_entries(cap.sessions.saturating_mul(2))
            .map_err(io)?;
        let (up_keys, down_keys) = (
            Keying::Teid(cap.teid_index),
            Keying::UeV4 {
                slots: cap.ue_slots,
            },
        );
        m.uplink_slots
            .set_max_entries(DirectTable::entries(&up_keys))
            .map_err(io)?;
        m.downlink_slots
            .set_max_entries(DirectTable::entries(&down_keys))
            .map_err(io)?;
        m.downlink
            .set_max_entries(cap.sessions.saturating_mul(2))
            .map_err(io)?;
        m.framed.set_max_entries(cap.framed_routes).map_err(io)?;
        m.pdrs.set_max_entries(cap.pdrs).map_err(io)?;
        m.fars.set_max_entries(cap.pdrs).map_err(io)?;
        m.qers.set_max_entries(cap.qer_urr_slots()).map_err(io)?;
        let ncpus = libbpf_rs::num_possible_cpus().map_err(io)?;
        let urr_cells = urr_cells(cap, ncpus)?;
        m.urr_state.set_max_entries(urr_cells).map_err(io)?;
        m.sdfs.set_max_entries(cap.sdf_entries).map_err(io)?;
        m.cpus.set_max_entries(ncpus as u32).map_err(io)?;
        m.app_flows
            .set_max_entries(cap.app_flows.max(1))
            .map_err(io)?;
        m.app_addrs
            .set_max_entries(cap.app_addrs.max(1))
            .map_err(io)?;
        let app_sdf_chunks = m.app_sdfs.max_entries() / abi::APP_MAX_SDF;
        let skel = open.load().map_err(io)?;
        let urr_mem = UrrMem::map(&skel.maps.urr_state, urr_cells as usize, 1 + ncpus)?;
        let qer_mem = QerMem::map(&skel.maps.qers, cap.qer_urr_slots() as usize)?;
        let uplink = DirectTable::map(&skel.maps.uplink_slots, up_keys, GRACE)?;
        let downlink = DirectTable::map(&skel.maps.downlink_slots, down_keys, GRACE)?;
        let mut d = Datapath {
            skel,
            pdr_slots: Slots::new(cap.pdrs),
            far_slots: Slots::new(cap.pdrs),
            qer_slots: Slots::new(cap.qer_urr_slots()),
            urr_slots: Slots::new(cap.qer_urr_slots()),
            sdf_slots: Slots::new(cap.sdf_entries),
            sdf_blocks: HashMap::new(),
            sdf_refs: HashMap::new(),
            // Sized for the capacity now: growing it later stalls installs (see `sessions`).
            sessions: HashMap::with_capacity(cap.sessions as usize),
            nh_gen: 0,
            nh_by_destination: false,
            cfg: Config::default(),
            n6_ifindex: 0,
            cap,
            ncpus,
            boot_offset_ns: unix_ns() - mono_ns(),
            urr_mem,
            qer_mem,
            uplink,
            downlink,
            spread: Spread::Off,
            spread_cpus: Vec::new(),
            pfds: Arc::default(),
            app_sdf_chunks: Slots::new(app_sdf_chunks),
            app_blocks: HashMap::new(),
            app_names: HashMap::new(),
            app_urls: HashMap::new(),
        };
        d.configure(cfg, 0, 0, 0)?;
        d.bump_nexthop_generation()?;
        Ok(d)
    }

    pub fn skel(&self) -> &UpfSkel<'static> {
        &self.skel
    }

    /// The TEIDs with direct uplink slots (see `Capacity::teid_index`).
    pub fn teid_index(&self) -> TeidIndex {
        match self.uplink.keying() {
            Keying::Teid(ix) => ix,
            Keying::UeV4 { .. } => TeidIndex::none(),
        }
    }

    /// Whether `teid`'s uplink rules are in its direct slot (else in the hash table).
    pub fn uplink_in_slot(&self, teid: u32) -> bool {
        self.uplink.in_slot(teid)
    }

    /// Whether the downlink rules of UE address `a` are in its direct slot.
    pub fn downlink_in_slot(&self, a: std::net::Ipv4Addr) -> bool {
        self.downlink.in_slot(ue_v4_key(a))
    }

    /// Uplink and downlink keys: (in direct slots, with a slot but in the hash table,
    /// waiting to move to their slot).
    pub fn direct_keys(&self) -> [(usize, usize, usize); 2] {
        [self.uplink.counts(), self.downlink.counts()]
    }

    /// Move changed rule sets back into their direct slots once it is safe (installs do
    /// it too; upfd also calls this on its timer, for quiet times).
    pub fn settle(&mut self) {
        self.settle_at(Instant::now())
    }

    /// [`settle`](Self::settle) as if at `now`: tests choose the time the grace period
    /// is measured at, so that neither side of it depends on how fast they run.
    pub fn settle_at(&mut self, now: Instant) {
        self.uplink.settle(&self.skel.maps, now);
        self.downlink.settle(&self.skel.maps, now);
    }

    /// Write the data path's configuration: local addresses, the interfaces traffic
    /// leaves by, configured neighbours (then the kernel FIB is not used), slow-path
    /// budget.
    pub fn configure(
        &mut self,
        cfg: Config,
        n3_ifindex: u32,
        n6_ifindex: u32,
        n9_ifindex: u32,
    ) -> Result<(), FastPathError> {
        let mut c = types::upf_config {
            n3_ifindex,
            n6_ifindex,
            n9_ifindex,
            slowpath_per_sec: cfg.slowpath_per_sec,
            slowpath_burst: cfg.slowpath_burst,
            urr_stride: self.urr_mem.stride() as u32,
            ..Default::default()
        };
        let t = self.teid_index().params();
        c.teid_lo = t.lo;
        c.teid_mask = t.mask;
        c.teid_shift = t.shift;
        c.teid_mul1 = t.mul1;
        c.teid_mul2 = t.mul2;
        c.teid_add = t.add;
        c.teid_slots = t.slots;
        c.teid_bits = t.bits;
        if let Keying::UeV4 { slots } = self.downlink.keying() {
            c.ue_slots = slots;
        }
        // Beyond the tables' room: upfd's configuration check refuses more GTP-U
        // addresses; protected ones fail here too, as a silent cut would leave addresses
        // open that the reference model closes.
        (c.n_local_v4, c.n_local_v6) = fill_addresses(&cfg.local, &mut c.local_v4, &mut c.local_v6);
        (c.n_protected_v4, c.n_protected_v6) =
            fill_addresses(&cfg.protected, &mut c.protected_v4, &mut c.protected_v6);
        if cfg.protected.len() > usize::from(c.n_protected_v4) + usize::from(c.n_protected_v6) {
            return Err(FastPathError::Io(format!(
                "more than {} protected addresses of one IP version",
                abi::MAX_PROTECTED_ADDRS
            )));
        }
        if !cfg.neigh.is_empty() {
            c.flags |= abi::CFG_F_STATIC_NEIGH;
        }
        self.spread_fields(&mut c);
        let maps = &self.skel.maps;
        maps.upf_cfg
            .update(&0u32.to_ne_bytes(), bytes(&c), MapFlags::ANY)
            .map_err(io)?;
        // Replace the neighbour table.
        let old: Vec<Vec<u8>> = maps.neigh.keys().collect();
        for k in old {
            let _ = maps.neigh.delete(&k);
        }
        for (a, e) in &cfg.neigh {
            let mut k = types::neigh_key::default();
            match a {
                IpAddr::V4(x) => {
                    k.family = 4;
                    k.addr[..4].copy_from_slice(&x.octets());
                }
                IpAddr::V6(x) => {
                    k.family = 6;
                    k.addr.copy_from_slice(&x.octets());
                }
            }
            let v = types::egress {
                ifindex: e.ifindex,
                mtu: e.mtu,
                smac: e.smac,
                dmac: e.dmac,
                ..Default::default()
            };
            maps.neigh
                .update(bytes(&k), bytes(&v), MapFlags::ANY)
                .map_err(io)?;
        }
        self.cfg = cfg;
        self.n6_ifindex = n6_ifindex;
        Ok(())
    }

    /// Spread G-PDUs arriving on N3 over `cpus` by `how` (ARCHITECTURE.md: one gNB's
    /// tunnel often arrives on one receive queue): `xdp_n3` then hashes each G-PDU's
    /// TEID or inner flow and redirects it to `xdp_n3_cpu` on the CPU picked, through a
    /// cpumap queue of `abi::SPREAD_QUEUE` frames per CPU (bpf/include/spread.h). A flow
    /// always goes to one CPU, in order. `Spread::Off` (or no CPUs): each G-PDU is
    /// processed on the CPU it arrived on.
    pub fn set_spread(&mut self, how: Spread, cpus: &[u32]) -> Result<(), FastPathError> {
        if cpus.len() > abi::MAX_SPREAD_CPUS as usize {
            return Err(io(format!(
                "spreading over {} CPUs: at most {}",
                cpus.len(),
                abi::MAX_SPREAD_CPUS
            )));
        }
        if let Some(c) = cpus.iter().find(|c| **c as usize >= self.ncpus) {
            return Err(io(format!(
                "CPU {c}: this machine has CPUs 0-{}",
                self.ncpus - 1
            )));
        }
        let maps = &self.skel.maps;
        let on = how != Spread::Off && !cpus.is_empty();
        // Queues first, then the configuration that sends to them; off: the other way.
        if on {
            use std::os::fd::{AsFd, AsRawFd};
            let fd = self.skel.progs.xdp_n3_cpu.as_fd().as_raw_fd();
            let mut v = [0u8; 8];
            v[..4].copy_from_slice(&abi::SPREAD_QUEUE.to_ne_bytes());
            v[4..].copy_from_slice(&fd.to_ne_bytes());
            for c in cpus {
                maps.cpus
                    .update(&c.to_ne_bytes(), &v, MapFlags::ANY)
                    .map_err(|e| io(format!("cpumap entry for CPU {c}: {e}")))?;
            }
        }
        self.spread = if on { how } else { Spread::Off };
        self.spread_cpus = if on { cpus.to_vec() } else { Vec::new() };
        let mut c: types::upf_config = maps
            .upf_cfg
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(io)?
            .and_then(|b| from_bytes(&b))
            .ok_or_else(|| io("upf_cfg: no configuration"))?;
        self.spread_fields(&mut c);
        maps.upf_cfg
            .update(&0u32.to_ne_bytes(), bytes(&c), MapFlags::ANY)
            .map_err(io)?;
        for cpu in 0..self.ncpus as u32 {
            if !self.spread_cpus.contains(&cpu) {
                let _ = maps.cpus.delete(&cpu.to_ne_bytes());
            }
        }
        Ok(())
    }

    fn spread_fields(&self, c: &mut types::upf_config) {
        c.spread = match self.spread {
            Spread::Off => abi::SPREAD_OFF,
            Spread::Teid => abi::SPREAD_TEID,
            Spread::Inner => abi::SPREAD_INNER,
        };
        c.n_spread = self.spread_cpus.len() as u32;
        c.spread_cpu = [0; abi::MAX_SPREAD_CPUS as usize];
        c.spread_cpu[..self.spread_cpus.len()].copy_from_slice(&self.spread_cpus);
    }

    /// The start of a block holding `entries`: a shared one with the same content (one
    /// more PDR using it), else a new one written to the sdfs table. Blocks never
    /// change once written, so sharing one is safe while packets read it.
    fn sdf_block(&mut self, entries: &[types::sdf_match]) -> Result<u32, FastPathError> {
        let content = sdf_content(entries);
        if let Some(&start) = self.sdf_blocks.get(&content) {
            if let Some(r) = self.sdf_refs.get_mut(&start) {
                r.0 += 1;
            }
            return Ok(start);
        }
        let n = entries.len() as u32;
        let start = self.sdf_slots.take(n).ok_or(FastPathError::Full("sdfs"))?;
        for (j, e) in entries.iter().enumerate() {
            if let Err(e) = self.skel.maps.sdfs.update(
                &(start + j as u32).to_ne_bytes(),
                bytes(e),
                MapFlags::ANY,
            ) {
                self.sdf_slots.release(start, n);
                return Err(io(e));
            }
        }
        self.sdf_blocks.insert(content.clone(), start);
        self.sdf_refs.insert(start, (1, content));
        Ok(start)
    }

    /// One PDR less uses the block at `start`; the last one frees it (after the grace
    /// period, as every slot).
    fn release_sdf_block(&mut self, start: u32, n: u32) {
        let Some(r) = self.sdf_refs.get_mut(&start) else {
            return;
        };
        r.0 -= 1;
        if r.0 == 0 {
            if let Some((_, content)) = self.sdf_refs.remove(&start) {
                self.sdf_blocks.remove(&content);
            }
            self.sdf_slots.release(start, n);
        }
    }

    /// Invalidate the data path's next-hop cache: every entry filled before is looked up
    /// in the kernel FIB again. upfd calls it on each route, rule, neighbour, address or
    /// link change in its namespace (the cache starts on, per source and destination).
    pub fn bump_nexthop_generation(&mut self) -> Result<(), FastPathError> {
        self.nh_gen = match self.nh_gen.wrapping_add(1) & 0x7fff_ffff {
            0 => 1,
            n => n,
        };
        self.write_nh_word()
    }

    /// Key the next-hop cache by destination alone (`true`: the FIB's answer cannot
    /// depend on the source) or by source and destination; invalidates it.
    pub fn set_nexthop_by_destination(&mut self, on: bool) -> Result<(), FastPathError> {
        self.nh_by_destination = on;
        self.bump_nexthop_generation()
    }

    /// Turn the next-hop cache off: every packet asks the kernel FIB, as when nothing
    /// can tell upfd about routing changes. The next bump turns it on again.
    pub fn disable_nexthop_cache(&mut self) -> Result<(), FastPathError> {
        self.write_nh(0)
    }

    fn write_nh_word(&self) -> Result<(), FastPathError> {
        self.write_nh(
            (self.nh_gen << 1) | (abi::NH_BY_DESTINATION * u32::from(self.nh_by_destination)),
        )
    }

    fn write_nh(&self, word: u32) -> Result<(), FastPathError> {
        self.skel
            .maps
            .nh_gen
            .update(&0u32.to_ne_bytes(), &word.to_ne_bytes(), MapFlags::ANY)
            .map_err(io)
    }

    /// Distinct SDF blocks in the table, and PDRs using them.
    pub fn sdf_blocks(&self) -> (usize, u64) {
        (
            self.sdf_refs.len(),
            self.sdf_refs.values().map(|r| u64::from(r.0)).sum(),
        )
    }

    fn release(&mut self, inst: &Installed, keep_qers: &IdMap, keep_urrs: &IdMap) {
        for p in &inst.pdrs {
            self.pdr_slots.release(*p, 1);
        }
        for f in &inst.fars {
            self.far_slots.release(*f, 1);
        }
        for (s, n) in &inst.sdfs {
            self.release_sdf_block(*s, *n);
        }
        for (id, q) in inst.qers.iter() {
            if keep_qers.get(id) != Some(q) {
                self.qer_slots.release(*q, 1);
            }
        }
        for (id, u) in inst.urrs.iter() {
            if keep_urrs.get(id) != Some(u) {
                self.urr_slots.release(*u, 1);
            }
        }
    }

    /// The data path's counters by index (drop reasons, then `Stat`), summed over CPUs.
    pub fn stats(&self) -> Vec<(u64, u64)> {
        (0..abi::STAT_MAX)
            .map(|i| {
                let Ok(Some(per_cpu)) = self
                    .skel
                    .maps
                    .stats
                    .lookup_percpu(&i.to_ne_bytes(), MapFlags::ANY)
                else {
                    return (0, 0);
                };
                per_cpu.iter().fold((0, 0), |(p, b), x| {
                    let s: types::stat = from_bytes(x).unwrap_or_default();
                    (p + s.packets, b + s.bytes)
                })
            })
            .collect()
    }

    /// A session's URR's slot in `urr_state`.
    fn urr_slot(&self, seid: u64, urr_id: u32) -> Result<u32, FastPathError> {
        self.sessions
            .get(&seid)
            .and_then(|s| s.urrs.get(&urr_id))
            .copied()
            .ok_or_else(|| io(format!("no URR {urr_id} in session {seid:#x}")))
    }

    /// Set the volume quota a URR may still use (None: no quota).
    pub fn write_quota(
        &self,
        seid: u64,
        urr_id: u32,
        remaining: Option<i64>,
    ) -> Result<(), FastPathError> {
        let slot = self.urr_slot(seid, urr_id)?;
        self.urr_mem
            .set_quota(slot, remaining)
            .ok_or_else(|| io(format!("URR slot {slot} out of range")))
    }

    /// Arm (Some: octets left) or disarm (None) a URR's volume threshold: the data path
    /// raises EV_THRESHOLD on the packet that uses it up.
    pub fn write_threshold(
        &self,
        seid: u64,
        urr_id: u32,
        remaining: Option<i64>,
    ) -> Result<(), FastPathError> {
        let slot = self.urr_slot(seid, urr_id)?;
        self.urr_mem
            .set_threshold(slot, remaining)
            .ok_or_else(|| io(format!("URR slot {slot} out of range")))
    }

    /// A URR slot's counts, summed over the CPUs, with the times of its first and last
    /// packet in seconds since the UNIX epoch.
    fn read_urr(&self, slot: u32) -> Usage {
        self.urr_mem
            .usage(slot, self.ncpus, self.boot_offset_ns)
            .unwrap_or_default()
    }

    /// Where this data path counts URRs (the `urr_state` map's kernel ID and layout):
    /// kept in upfd's state, so that the next upfd reads the counts of this data path
    /// after its own took over ([`OldCounters`]).
    pub fn counter_table(&self) -> Result<upf::state::CounterTable, FastPathError> {
        let info = self.skel.maps.urr_state.info().map_err(io)?;
        Ok(upf::state::CounterTable {
            map_id: info.info.id,
            stride: self.urr_mem.stride() as u32,
            cell: info.info.value_size,
        })
    }

    pub fn capacity(&self) -> Capacity {
        self.cap
    }

    pub fn ncpus(&self) -> usize {
        self.ncpus
    }

    /// Neighbours configured in the data path.
    pub fn neighbours(&self) -> &HashMap<IpAddr, Egress> {
        &self.cfg.neigh
    }
}

impl Datapath {
    /// Cooled slots back to their free lists; changed rule sets back into their direct
    /// slots once no packet can see the old ones.
    fn reclaim(&mut self, now: Instant) {
        for s in [
            &mut self.pdr_slots,
            &mut self.far_slots,
            &mut self.qer_slots,
            &mut self.urr_slots,
            &mut self.sdf_slots,
        ] {
            s.warm(now);
        }
        self.settle_at(now);
    }

    /// [`FastPath::install`] as if at `now` (the time grace periods count from and are
    /// measured at; see [`settle_at`](Self::settle_at)).
    pub fn install_at(
        &mut self,
        old: Option<&Session>,
        new: &Arc<Session>,
        now: Instant,
    ) -> Result<(), FastPathError> {
        self.reclaim(now);
        let plan = compile(new, &Addresses::from(&self.cfg), &self.pfds)?;
        self.check(&plan)?;
        let prev = match old {
            Some(_) => self.sessions.get(&new.up_seid).cloned().unwrap_or_default(),
            None => Box::default(),
        };
        let mut inst = Box::new(self.place(&plan, &prev)?);
        let written = self.write(&plan, &inst)?;
        self.publish(&plan, &written, &prev, &mut inst, now)?;
        self.release(&prev, &inst.qers, &inst.urrs);
        self.sessions.insert(new.up_seid, inst);
        Ok(())
    }

    /// [`FastPath::remove`] as if at `now` (when its direct slots start to cool).
    pub fn remove_at(&mut self, session: &Session, now: Instant) {
        let Some(inst) = self.sessions.remove(&session.up_seid) else {
            return;
        };
        let maps = &self.skel.maps;
        for t in &inst.teids {
            self.uplink.delete(maps, *t, now);
        }
        for k in &inst.ues {
            delete_ue(&mut self.downlink, maps, k, now);
        }
        for k in &inst.framed {
            let _ = maps.framed.delete(bytes(k));
        }
        self.release(&inst, &IdMap::default(), &IdMap::default());
    }

    /// The rule set installed for a key, wherever it is.
    fn installed(&self, key: &Key) -> Option<types::rule_set> {
        let maps = &self.skel.maps;
        match key {
            Key::Teid(t) => self.uplink.get(maps, *t),
            Key::Ue(IpAddr::V4(a)) => self.downlink.get(maps, ue_v4_key(*a)),
            Key::Ue(a) => from_bytes(
                &maps
                    .downlink
                    .lookup(bytes(&ue_key(*a)), MapFlags::ANY)
                    .ok()??,
            ),
            // A framed route is the session's own: LPM entries are not shared.
            Key::Framed(_) => None,
        }
    }

    /// Step 1: the session's keys must be free or its own, and the tables must have
    /// room for its rules and for the SDF blocks not yet in the table.
    fn check(&self, plan: &Compiled) -> Result<(), FastPathError> {
        for k in &plan.keys {
            if self
                .installed(&k.key)
                .is_some_and(|rs| rs.seid != plan.seid)
            {
                let why = match k.key {
                    Key::Teid(t) => format!("TEID {t:#x} is already installed for another session"),
                    Key::Ue(a) => {
                        format!("UE address {a} is already installed for another session")
                    }
                    Key::Framed(n) => format!("framed route {n} is already installed"),
                };
                return Err(FastPathError::Pdr {
                    pdr_id: k.pdr_id,
                    why,
                });
            }
        }
        if self.pdr_slots.available() < plan.pdrs.len() as u64
            || self.far_slots.available() < plan.fars.len() as u64
            || self.qer_slots.available() < plan.qers.len() as u64
            || self.urr_slots.available() < plan.urrs.len() as u64
        {
            return Err(FastPathError::Full("rules"));
        }
        let mut new_blocks = std::collections::HashSet::new();
        let new_sdf_entries: u64 = plan
            .pdrs
            .iter()
            .filter(|p| !p.sdf.is_empty())
            .map(|p| sdf_content(&p.sdf))
            .filter(|c| !self.sdf_blocks.contains_key(c) && new_blocks.insert(c.clone()))
            .map(|c| (c.len() / std::mem::size_of::<types::sdf_match>()) as u64)
            .sum();
        if self.sdf_slots.available() < new_sdf_entries {
            return Err(FastPathError::Full("sdfs"));
        }
        Ok(())
    }

    /// The direct slot a packet of the session's first key is looked up in: its
    /// TEID's, else its UE IPv4 address's.
    fn home_slot(&self, plan: &Compiled) -> Option<u32> {
        plan.keys.iter().find_map(|k| match k.key {
            Key::Teid(t) => Some(self.cap.teid_index.slot(t)),
            Key::Ue(IpAddr::V4(a)) if self.cap.ue_slots > 0 => {
                Some(Some(u32::from(a) % self.cap.ue_slots))
            }
            _ => None,
        })?
    }

    /// Step 2: table indices for the session's rules. QERs and URRs keep theirs (and
    /// their state) across modifications; FARs, PDRs and SDF blocks get new ones (copy
    /// on write). The first QER and URR of the first key's hot PDR (the one its rule set
    /// holds, [`Compiled::hot_at`]: what most packets meet) go to the index the data
    /// path computes from the key (its direct slot + 1), if free: it loads them while it
    /// loads the slot instead of after (bpf/include/direct.h).
    fn place(&mut self, plan: &Compiled, prev: &Installed) -> Result<Installed, FastPathError> {
        let mut inst = Installed::default();
        let home = self.home_slot(plan).map(|s| s + 1);
        let first = plan
            .keys
            .first()
            .and_then(|k| k.pdrs.get(plan.hot_at(k)))
            .and_then(|id| plan.pdrs.iter().find(|p| p.id == *id));
        let home_qer = first.and_then(|p| p.qer_ids.first().copied());
        let home_urr = first.and_then(|p| p.urr_ids.first().copied());
        for (id, q) in &plan.qers {
            let (idx, fresh) = match prev.qers.get(id) {
                Some(i) => (*i, false),
                None => (
                    self.qer_slots
                        .take_preferring(home.filter(|_| home_qer == Some(*id)))
                        .ok_or(FastPathError::Full("qers"))?,
                    true,
                ),
            };
            self.qer_mem.store(idx, q, fresh)?;
            inst.qers.insert(*id, idx);
        }
        for id in &plan.urrs {
            let idx = match prev.urrs.get(id) {
                Some(i) => *i,
                None => {
                    let i = self
                        .urr_slots
                        .take_preferring(home.filter(|_| home_urr == Some(*id)))
                        .ok_or(FastPathError::Full("urrs"))?;
                    self.urr_mem.clear(i, 0);
                    i
                }
            };
            inst.urrs.insert(*id, idx);
        }
        for _ in &plan.fars {
            inst.fars
                .push(self.far_slots.take(1).ok_or(FastPathError::Full("fars"))?);
        }
        for p in &plan.pdrs {
            if !p.sdf.is_empty() {
                let start = self.sdf_block(&p.sdf)?;
                inst.sdfs.push((start, p.sdf.len() as u32));
            }
            inst.pdrs
                .push(self.pdr_slots.take(1).ok_or(FastPathError::Full("pdrs"))?);
        }
        Ok(inst)
    }

    /// Step 3: the linked FAR and PDR values by table index, written to the `fars` and
    /// `pdrs` tables where a program reads them there: only the PDRs found after a key's
    /// first and their FARs (a key's first PDR and its FAR travel in its rule set).
    fn write(&self, plan: &Compiled, inst: &Installed) -> Result<Written, FastPathError> {
        let (pdrs_in_tables, fars_in_tables) = plan.in_tables();
        let maps = &self.skel.maps;
        let mut w = Written::default();
        let far_index: HashMap<u32, u32> = plan
            .fars
            .iter()
            .zip(&inst.fars)
            .map(|((id, _), idx)| (*id, *idx))
            .collect();
        for ((id, v), idx) in plan.fars.iter().zip(&inst.fars) {
            if fars_in_tables.contains(id) {
                maps.fars
                    .update(&idx.to_ne_bytes(), bytes(v), MapFlags::ANY)
                    .map_err(io)?;
            }
            w.fars.insert(*idx, *v);
        }
        let mut sdfs = inst.sdfs.iter();
        for (p, idx) in plan.pdrs.iter().zip(&inst.pdrs) {
            let sdf = if p.sdf.is_empty() {
                0
            } else {
                sdfs.next().map_or(0, |(start, _)| *start)
            };
            let v = p.linked(
                |r| match r {
                    Rule::Far(f) => far_index.get(&f).copied().unwrap_or(0),
                    Rule::Qer(q) => inst.qers.get(&q).copied().unwrap_or(0),
                    Rule::Urr(u) => inst.urrs.get(&u).copied().unwrap_or(0),
                },
                sdf,
            );
            if pdrs_in_tables.contains(&p.id) {
                maps.pdrs
                    .update(&idx.to_ne_bytes(), bytes(&v), MapFlags::ANY)
                    .map_err(io)?;
            }
            w.pdrs.insert(*idx, v);
            w.pdr_index.insert(p.id, *idx);
        }
        Ok(w)
    }

    /// Step 4: the keys, last, each switching to the new rules at once; then the keys
    /// the new version no longer has are removed.
    fn publish(
        &mut self,
        plan: &Compiled,
        w: &Written,
        prev: &Installed,
        inst: &mut Installed,
        now: Instant,
    ) -> Result<(), FastPathError> {
        let maps = &self.skel.maps;
        for k in &plan.keys {
            let v = plan.rule_set(k, &w.pdr_index, &w.pdrs, &w.fars);
            match k.key {
                Key::Teid(t) => {
                    self.uplink.put(maps, t, &v, now)?;
                    inst.teids.push(t);
                }
                Key::Ue(a) => {
                    match a {
                        IpAddr::V4(x) => self.downlink.put(maps, ue_v4_key(x), &v, now)?,
                        IpAddr::V6(_) => maps
                            .downlink
                            .update(bytes(&ue_key(a)), bytes(&v), MapFlags::ANY)
                            .map_err(io)?,
                    }
                    inst.ues.push(ue_key(a));
                }
                Key::Framed(n) => {
                    let key = lpm_key(&n);
                    maps.framed
                        .update(bytes(&key), bytes(&v), MapFlags::ANY)
                        .map_err(io)?;
                    inst.framed.push(key);
                }
            }
        }
        for t in &prev.teids {
            if !inst.teids.contains(t) {
                self.uplink.delete(maps, *t, now);
            }
        }
        for k in &prev.ues {
            if !inst.ues.iter().any(|x| bytes(x) == bytes(k)) {
                delete_ue(&mut self.downlink, maps, k, now);
            }
        }
        for k in &prev.framed {
            if !inst.framed.iter().any(|x| bytes(x) == bytes(k)) {
                let _ = maps.framed.delete(bytes(k));
            }
        }
        Ok(())
    }
}

impl FastPath for Datapath {
    fn session_by_teid(&self, teid: u32) -> Option<Option<u64>> {
        match self.uplink.keying() {
            Keying::Teid(_) => Some(self.uplink.get(&self.skel.maps, teid).map(|r| r.seid)),
            Keying::UeV4 { .. } => None,
        }
    }

    fn session_by_ue(&self, a: IpAddr) -> Option<Option<u64>> {
        let rs = match a {
            IpAddr::V4(v4) => self.downlink.get(&self.skel.maps, ue_v4_key(v4)),
            IpAddr::V6(_) => self
                .skel
                .maps
                .downlink
                .lookup(bytes(&ue_key(a)), MapFlags::ANY)
                .ok()
                .flatten()
                .and_then(|b| from_bytes::<types::rule_set>(&b)),
        };
        // Framed routes and UE IPv6 prefixes are in the LPM table: not looked up here.
        match (rs, a) {
            (Some(r), _) => Some(Some(r.seid)),
            (None, IpAddr::V4(_)) => Some(None),
            (None, IpAddr::V6(_)) => None,
        }
    }

    /// Compile the session, then check, place, write and publish its entries; what the
    /// old version used and the new one does not is freed last.
    fn install(&mut self, old: Option<&Session>, new: &Arc<Session>) -> Result<(), FastPathError> {
        self.install_at(old, new, Instant::now())
    }

    /// Write the applications' tables (include/app.h): each application's flow
    /// descriptions, then the domain names and URLs; entries no longer wanted are removed
    /// last. What was learned for the `changed` applications (DNS addresses) is forgotten;
    /// classified flows keep their application (docs/application-detection.md).
    fn set_pfds(&mut self, pfds: &Arc<PfdTable>, changed: &[String]) -> Result<(), FastPathError> {
        let (flows, names, urls) = app_tables(pfds)?;
        self.app_sdf_chunks.warm(Instant::now());
        self.write_app_flows(&flows)?;
        self.write_app_keys(names, urls)?;
        let changed: Vec<u16> = changed
            .iter()
            .filter_map(|id| pfds.get(id).map(|a| a.index))
            .collect();
        if !changed.is_empty() {
            let maps = &self.skel.maps;
            let keys: Vec<Vec<u8>> = maps.app_addrs.keys().collect();
            for k in keys {
                let app = maps
                    .app_addrs
                    .lookup(&k, MapFlags::ANY)
                    .ok()
                    .flatten()
                    .and_then(|v| from_bytes::<types::app_addr>(&v));
                if app.is_some_and(|a| changed.contains(&a.app)) {
                    let _ = maps.app_addrs.delete(&k);
                }
            }
        }
        self.pfds = Arc::clone(pfds);
        Ok(())
    }

    fn app_flow_idle(&self, seid: u64, flow: &AppFlow) -> Option<std::time::Duration> {
        let k = app_flow_key(seid, flow);
        let v: types::app_flow = self
            .skel
            .maps
            .app_flows
            .lookup(bytes(&k), MapFlags::ANY)
            .ok()
            .flatten()
            .and_then(|b| from_bytes(&b))?;
        let idle = u64::try_from(coarse_ns() - i128::from(v.last_ns)).unwrap_or(0);
        let idle = std::time::Duration::from_nanos(idle);
        (idle < std::time::Duration::from_secs(u64::from(abi::APP_FLOW_IDLE_SEC))).then_some(idle)
    }

    fn remove(&mut self, session: &Session) {
        self.remove_at(session, Instant::now())
    }

    fn urr_handle(&self, seid: u64, urr_id: u32) -> Option<u32> {
        self.urr_slot(seid, urr_id).ok()
    }

    fn usage(&self, seid: u64, urr_id: u32) -> Usage {
        match self.urr_slot(seid, urr_id) {
            Ok(slot) => self.read_urr(slot),
            Err(_) => Usage::default(),
        }
    }

    fn reset_usage(&mut self, seid: u64, urr_id: u32) {
        if let Ok(slot) = self.urr_slot(seid, urr_id) {
            self.urr_mem.clear(slot, 1);
        }
    }

    fn set_quota(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>) {
        let _ = self.write_quota(seid, urr_id, remaining);
    }

    fn set_threshold(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>) {
        let _ = self.write_threshold(seid, urr_id, remaining);
    }

    fn signals_volume(&self) -> bool {
        true
    }
}

/// Write `addrs` into a v4 and a v6 table of `upf_config` (network order; the rest stays
/// 0), as many as fit; how many of each were written.
fn fill_addresses(addrs: &[IpAddr], v4: &mut [u32], v6: &mut [[u8; 16]]) -> (u8, u8) {
    let (mut n4, mut n6) = (0, 0);
    for a in addrs {
        match a {
            IpAddr::V4(x) if n4 < v4.len() => {
                v4[n4] = u32::from_ne_bytes(x.octets());
                n4 += 1;
            }
            IpAddr::V6(x) if n6 < v6.len() => {
                v6[n6] = x.octets();
                n6 += 1;
            }
            _ => {}
        }
    }
    (n4 as u8, n6 as u8)
}

/// How an XDP program ended up attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachMode {
    Native,
    Generic,
}

/// Which program an interface runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// GTP-U in: N3 and N9.
    Gtpu,
    /// IP in from the data network: N6.
    N6,
}

/// BPF_F_TEST_XDP_LIVE_FRAMES: BPF_PROG_RUN sends what the program redirects.
const TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

impl Datapath {
    fn prog(&self, role: Role) -> &libbpf_rs::ProgramMut<'static> {
        match role {
            Role::Gtpu => &self.skel.progs.xdp_n3,
            Role::N6 => &self.skel.progs.xdp_n6,
        }
    }

    /// Attach a program to an interface: native (driver) mode, or generic mode when
    /// `native` is false or the driver refuses.
    pub fn attach(
        &self,
        role: Role,
        ifindex: u32,
        native: bool,
    ) -> Result<AttachMode, FastPathError> {
        use libbpf_rs::{Xdp, XdpFlags};
        use std::os::fd::AsFd;
        let xdp = Xdp::new(self.prog(role).as_fd());
        if native && xdp.attach(ifindex as i32, XdpFlags::DRV_MODE).is_ok() {
            return Ok(AttachMode::Native);
        }
        xdp.attach(ifindex as i32, XdpFlags::SKB_MODE)
            .map_err(|e| FastPathError::Io(format!("attaching XDP to ifindex {ifindex}: {e}")))?;
        Ok(AttachMode::Generic)
    }

    /// Remove whatever XDP program an interface runs.
    pub fn detach(&self, role: Role, ifindex: u32) {
        use libbpf_rs::{Xdp, XdpFlags};
        use std::os::fd::AsFd;
        let xdp = Xdp::new(self.prog(role).as_fd());
        let _ = xdp.detach(ifindex as i32, XdpFlags::DRV_MODE);
        let _ = xdp.detach(ifindex as i32, XdpFlags::SKB_MODE);
    }

    /// Run a frame through a program as if it arrived on `ifindex`, sending what the
    /// program forwards (BPF_PROG_RUN with live frames). Returns the XDP action.
    fn inject(&self, role: Role, ifindex: u32, frame: &[u8]) -> Result<u32, FastPathError> {
        // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
        // egress_ifindex. The kernel wants data_end = the frame's length (else EINVAL).
        let len = u32::try_from(frame.len()).map_err(|_| io("frame too long"))?;
        let mut ctx = [0u8; 24];
        ctx[4..8].copy_from_slice(&len.to_ne_bytes());
        ctx[12..16].copy_from_slice(&ifindex.to_ne_bytes());
        let input = libbpf_rs::ProgramInput {
            context_in: Some(&mut ctx),
            data_in: Some(frame),
            flags: TEST_XDP_LIVE_FRAMES,
            repeat: 1,
            ..Default::default()
        };
        let out = self.prog(role).test_run(input).map_err(io)?;
        Ok(out.return_value)
    }

    /// A ring buffer reader over the events table calling `f` for each record (the
    /// event header, then packet octets for EV_BUFFER).
    pub fn events(
        &self,
        f: impl FnMut(&[u8]) -> i32 + 'static,
    ) -> Result<libbpf_rs::RingBuffer<'static>, FastPathError> {
        let handle: &'static libbpf_rs::MapHandle = Box::leak(Box::new(
            libbpf_rs::MapHandle::try_from(&self.skel.maps.events).map_err(io)?,
        ));
        let mut b = libbpf_rs::RingBufferBuilder::new();
        b.add(handle, f).map_err(io)?;
        b.build().map_err(io)
    }
}

impl Reinject for Datapath {
    /// Through `xdp_n6`, as if the frame arrived on the N6 interface: how buffered
    /// packets are released, in order, once their FAR forwards.
    fn reinject_n6(&mut self, frame: &[u8], _now: Instant) -> Result<(), FastPathError> {
        self.inject(Role::N6, self.n6_ifindex, frame).map(|_| ())
    }
}

/// An event record of the data path's ring (`struct event`, then for EV_BUFFER the
/// packet's octets; `struct app_event` for EV_APP_START, whose application index `pfds`
/// names); None for a record that is not one, or an index `pfds` does not know.
pub fn parse_event(b: &[u8], pfds: &PfdTable) -> Option<Event> {
    if b.get(..4)? == abi::EV_APP_START.to_ne_bytes() {
        let e: types::app_event = from_bytes(b.get(..std::mem::size_of::<types::app_event>())?)?;
        let f = &e.flow;
        let addr = |a: &[u8; 16]| -> IpAddr {
            if f.version == 4 {
                IpAddr::from([a[0], a[1], a[2], a[3]])
            } else {
                IpAddr::from(*a)
            }
        };
        return Some(Event::AppStart {
            seid: f.seid,
            app: pfds.by_index(u16::try_from(e.app).ok()?)?.id.clone(),
            flow: AppFlow {
                protocol: f.proto,
                ue: addr(&f.ue),
                ue_port: f.ue_port,
                remote: addr(&f.remote),
                remote_port: f.remote_port,
            },
        });
    }
    let h = std::mem::size_of::<types::event>();
    let e: types::event = from_bytes(b.get(..h)?)?;
    Some(match e.r#type {
        abi::EV_BUFFER => {
            let packet = b.get(h..h.checked_add(e.len as usize)?)?.to_vec();
            Event::Buffered(Buffered {
                seid: e.seid,
                far_id: e.far_id,
                pdr_id: u16::try_from(e.pdr_id).ok()?,
                nocp: e.nocp != 0,
                packet,
            })
        }
        abi::EV_QUOTA => Event::QuotaExhausted { seid: e.seid },
        abi::EV_THRESHOLD => Event::ThresholdReached { seid: e.seid },
        _ => return None,
    })
}

/// The URR counters of a data path this upfd did not load: the one that ran before a
/// restart, still attached (and counting) until the new one replaces it. Read once the
/// new one is attached: then they no longer change.
pub struct OldCounters {
    mem: UrrMem,
    slots: u32,
    ncpus: usize,
    boot_offset_ns: i128,
}

impl OldCounters {
    /// Open the `urr_state` map `t` describes; an error if it is gone (the old data path
    /// was removed) or is not a URR table of this layout.
    pub fn open(t: &upf::state::CounterTable) -> Result<Self, FastPathError> {
        let m = libbpf_rs::MapHandle::from_map_id(t.map_id)
            .map_err(|e| io(format!("map {}: {e}", t.map_id)))?;
        if m.name().to_str() != Some("urr_state")
            || m.value_size() as usize != crate::mem::CELL
            || t.cell as usize != crate::mem::CELL
        {
            return Err(io(format!(
                "map {} is {:?} with {}-octet values, not a URR table of {}-octet cells",
                t.map_id,
                m.name(),
                m.value_size(),
                crate::mem::CELL
            )));
        }
        let ncpus = libbpf_rs::num_possible_cpus().map_err(io)?;
        if t.stride as usize != 1 + ncpus {
            return Err(io(format!(
                "URR table of stride {} on a machine of {ncpus} possible CPUs",
                t.stride
            )));
        }
        let cells = m.max_entries() as usize;
        Ok(OldCounters {
            mem: UrrMem::map(&m, cells, t.stride as usize)?,
            slots: (cells / t.stride as usize) as u32,
            ncpus,
            boot_offset_ns: unix_ns() - mono_ns(),
        })
    }

    /// The counts of URR slot `handle`, summed over the CPUs (None: no such slot).
    pub fn usage(&self, handle: u32) -> Option<Usage> {
        if handle >= self.slots {
            return None;
        }
        self.mem.usage(handle, self.ncpus, self.boot_offset_ns)
    }
}

/// The app_flows key of a session's flow (bpf/include/upf_maps.h `app_flow_key`).
pub fn app_flow_key(seid: u64, flow: &AppFlow) -> types::app_flow_key {
    let mut k = types::app_flow_key {
        seid,
        proto: flow.protocol,
        ue_port: flow.ue_port,
        remote_port: flow.remote_port,
        ..Default::default()
    };
    let put = |a: IpAddr, to: &mut [u8; 16]| match a {
        IpAddr::V4(x) => {
            to[..4].copy_from_slice(&x.octets());
            4
        }
        IpAddr::V6(x) => {
            *to = x.octets();
            6
        }
    };
    k.version = put(flow.ue, &mut k.ue);
    put(flow.remote, &mut k.remote);
    k
}

/// The data path's coarse clock (bpf_ktime_get_coarse_ns), in ns.
fn coarse_ns() -> i128 {
    clock_ns(libc::CLOCK_MONOTONIC_COARSE)
}

/// An app_names or app_urls key of `data` (at most APP_KEY_MAX octets).
fn app_key(data: &[u8]) -> types::app_key {
    let mut k = types::app_key {
        prefixlen: (data.len() * 8) as u32,
        ..Default::default()
    };
    k.data[..data.len()].copy_from_slice(data);
    k
}

/// A domain's app_names key data: the name reversed after a leading dot
/// (`www.example.com`: `moc.elpmaxe.www.`).
pub fn app_name_data(name: &str) -> Vec<u8> {
    let mut v: Vec<u8> = name.bytes().rev().collect();
    v.push(b'.');
    v
}

type AppFlows = Vec<(u16, Vec<types::sdf_match>)>;
type AppNames = HashMap<Vec<u8>, types::app_name>;
type AppUrls = HashMap<Vec<u8>, u16>;

/// The applications' table entries: flow descriptions per application, domain names
/// (per protocol, the lowest application index when several list a domain), URLs (the
/// lowest index too).
fn app_tables(pfds: &PfdTable) -> Result<(AppFlows, AppNames, AppUrls), FastPathError> {
    let mut apps: Vec<&upf::pfd::App> = pfds.iter().collect();
    apps.sort_by_key(|a| a.index);
    let mut flows = Vec::new();
    let mut names: AppNames = HashMap::new();
    let mut urls: AppUrls = HashMap::new();
    for a in apps {
        let entries: Vec<types::sdf_match> = a.pfds.flows.iter().flat_map(sdf_entries).collect();
        if entries.len() > abi::APP_MAX_SDF as usize {
            return Err(io(format!(
                "application {:?}: its flow descriptions need {} match entries, more than {}",
                a.id,
                entries.len(),
                abi::APP_MAX_SDF
            )));
        }
        flows.push((a.index, entries));
        for d in &a.pfds.domains {
            let data = app_name_data(&d.name);
            if data.len() > abi::APP_KEY_MAX as usize {
                continue; // normalize_name keeps names within APP_NAME_MAX
            }
            let v = names.entry(data).or_default();
            for (bit, slot) in [
                (abi::APP_P_DNS, &mut v.dns),
                (abi::APP_P_SNI, &mut v.sni),
                (abi::APP_P_HOST, &mut v.host),
            ] {
                if u32::from(d.protocols) & bit != 0 && *slot == 0 {
                    *slot = a.index;
                }
            }
        }
        for u in &a.pfds.urls {
            let mut data = u.host.as_bytes().to_vec();
            data.extend_from_slice(u.path.as_bytes());
            data.truncate(abi::APP_KEY_MAX as usize - 1);
            urls.entry(data).or_insert(a.index);
        }
    }
    Ok((flows, names, urls))
}

impl Datapath {
    /// Each application's flow descriptions: a changed block goes to a new chunk of
    /// app_sdfs, then `apps` points at it, then the old chunk is freed (after the grace
    /// period).
    fn write_app_flows(&mut self, flows: &AppFlows) -> Result<(), FastPathError> {
        let stride = abi::APP_MAX_SDF;
        for (index, entries) in flows {
            let content: Vec<u8> = entries.iter().flat_map(|e| bytes(e).to_vec()).collect();
            let old = self.app_blocks.get(index).cloned();
            if old.as_ref().map(|(_, c)| c) == Some(&content)
                || (old.is_none() && entries.is_empty())
            {
                continue;
            }
            let maps = &self.skel.maps;
            let mut v = types::app_entry::default();
            let mut chunk = 0;
            if !entries.is_empty() {
                chunk = self
                    .app_sdf_chunks
                    .take(1)
                    .ok_or(FastPathError::Full("app_sdfs"))?;
                for (j, e) in entries.iter().enumerate() {
                    let at = chunk * stride + j as u32;
                    if let Err(e) = maps
                        .app_sdfs
                        .update(&at.to_ne_bytes(), bytes(e), MapFlags::ANY)
                    {
                        self.app_sdf_chunks.release(chunk, 1);
                        return Err(io(e));
                    }
                }
                v.sdf = chunk * stride;
                v.n_sdf = entries.len() as u32;
            }
            maps.apps
                .update(&u32::from(*index).to_ne_bytes(), bytes(&v), MapFlags::ANY)
                .map_err(io)?;
            if let Some((c, _)) = old {
                self.app_sdf_chunks.release(c, 1);
            }
            if entries.is_empty() {
                self.app_blocks.remove(index);
            } else {
                self.app_blocks.insert(*index, (chunk, content));
            }
        }
        Ok(())
    }

    /// The domain names and URLs: new and changed entries, then the removed ones.
    fn write_app_keys(&mut self, names: AppNames, urls: AppUrls) -> Result<(), FastPathError> {
        let maps = &self.skel.maps;
        for (data, v) in &names {
            if self.app_names.get(data).map(bytes) != Some(bytes(v)) {
                maps.app_names
                    .update(bytes(&app_key(data)), bytes(v), MapFlags::ANY)
                    .map_err(|e| io(format!("app_names: {e}")))?;
            }
        }
        for (data, v) in &urls {
            if self.app_urls.get(data) != Some(v) {
                maps.app_urls
                    .update(bytes(&app_key(data)), &v.to_ne_bytes(), MapFlags::ANY)
                    .map_err(|e| io(format!("app_urls: {e}")))?;
            }
        }
        for data in self.app_names.keys().filter(|d| !names.contains_key(*d)) {
            let _ = maps.app_names.delete(bytes(&app_key(data)));
        }
        for data in self.app_urls.keys().filter(|d| !urls.contains_key(*d)) {
            let _ = maps.app_urls.delete(bytes(&app_key(data)));
        }
        self.app_names = names;
        self.app_urls = urls;
        Ok(())
    }

    /// The PFDs the data path holds.
    pub fn pfds(&self) -> Arc<PfdTable> {
        Arc::clone(&self.pfds)
    }
}
