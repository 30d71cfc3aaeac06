//! The XDP data path as a [`FastPath`]: loads the programs of bpf/upf.bpf.c, sizes and
//! configures their tables (bpf/include/upf_maps.h; docs/architecture.md, "The data
//! path's tables") and is their only writer.
//!
//! A session is one entry of `sess_pages` (record, pool, lanes; [`Layout`]): its slot is
//! its UE address's (or its TEID's, or any free one), and stays the same for the
//! session's life, so its counts and leases stay where packets find them. Installing a
//! session is four named steps over what the compiler (compile.rs) made of its rules:
//! `check` (its keys are free, the tables have room), `place` (its slot, home QER and
//! URR, cells), `write` (the cold entries: PDR lists, PDRs, FARs, SDF entries, cells) and
//! `publish` (the record, under its sequence lock, then the keys that are not the
//! slot's own). The programs never see a half-built session: cold entries are written
//! under fresh handles before the record that names them, and the old ones are deleted
//! only after a grace period, when no packet can still read them.

use std::collections::{HashMap, HashSet, VecDeque};
use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Instant;

use smallvec::SmallVec;

use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use upf::abi;
use upf::fastpath::teid_index::TeidIndex;
use upf::fastpath::{
    AppFlow, Buffered, Config, Egress, Event, FastPath, FastPathError, Reinject, Usage,
};
use upf::pfd::PfdTable;
use upf::rules::Session;

use crate::compile::{compile, sdf_entries, Addresses, Compiled, Key, RecordPlan, Rule};
use crate::layout::Layout;
use crate::mem::{bytes, from_bytes, io, LaneSums, Pages};
use crate::slots::{Slots, GRACE};
use crate::upf::types;
use crate::upf::{UpfSkel, UpfSkelBuilder};

/// How long a freed slot, cell or cold entry rests before it is used again or deleted
/// (no packet in flight can still read it then); tests step over it with
/// [`Datapath::install_at`] and [`Datapath::settle_at`].
pub const SLOT_GRACE: std::time::Duration = GRACE;

/// A URR handle's bit for the session's home URR (its slot in the low bits); without
/// it a handle names a cell ([`FastPath::urr_handle`], kept in upfd's state).
pub const HOME_HANDLE: u32 = 0x8000_0000;

/// Where a session's QER or URR lives: the home one in its entry, others in a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Home,
    Cell(u32),
}

/// Rule ID -> place for the few QERs or URRs of a session: a linear search in place
/// costs less memory than a hash map per session (docs/benchmarks.md, heap).
#[derive(Debug, Default, Clone, PartialEq)]
struct IdMap(SmallVec<[(u32, Place); 2]>);

impl IdMap {
    fn get(&self, id: &u32) -> Option<Place> {
        self.0.iter().find(|(k, _)| k == id).map(|(_, v)| *v)
    }

    fn insert(&mut self, id: u32, v: Place) {
        match self.0.iter_mut().find(|(k, _)| *k == id) {
            Some(e) => e.1 = v,
            None => self.0.push((id, v)),
        }
    }

    fn cells(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.0.iter().filter_map(|(id, p)| match p {
            Place::Cell(c) => Some((*id, *c)),
            Place::Home => None,
        })
    }

    fn home(&self) -> Option<u32> {
        self.0
            .iter()
            .find(|(_, p)| *p == Place::Home)
            .map(|(id, _)| *id)
    }
}

/// What one installed session occupies. Inline for the usual session (two keys in its
/// slot, a QER and a URR at home, nothing cold): one allocation.
#[derive(Debug, Default, Clone)]
struct Installed {
    slot: u32,
    /// Keys in the key tables (not the slot's own).
    teids: SmallVec<[u32; 1]>,
    ues: SmallVec<[types::sess_key; 1]>,
    framed: Vec<types::lpm_key>,
    /// Cold entries by handle: PDR lists, PDRs, FARs, SDF runs (start, length).
    cold: SmallVec<[(Table, u32); 2]>,
    /// Two inline: the common session's filters in both PDRs take no heap block.
    sdfs: SmallVec<[(u32, u32); 2]>,
    /// Stable across modifications: their state (pools, lanes) must survive.
    qers: IdMap,
    urrs: IdMap,
    /// The entry's lanes counted for a home URR (that may be gone since): no other URR
    /// takes them over, so a URR's counts are its lanes' sums, with no baseline to
    /// keep across a restart.
    lanes_used: bool,
}

/// The cold tables, for deferred deletes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Table {
    Lists,
    Pdrs,
    Fars,
}

/// Sizes of the tables.
#[derive(Debug, Clone, Copy)]
pub struct Capacity {
    pub sessions: u32,
    /// Keys outside their slots (TEIDs the SMF chose, collisions, IPv6 UEs): each key
    /// table (hash tables without preallocation: a table costs 8 octets per entry of
    /// room, rounded up to a power of two, plus its entries) holds this many.
    pub key_entries: u32,
    /// PDR lists, cold PDRs and FARs: this many each.
    pub cold_entries: u32,
    /// SDF entries (runs shared by sessions with the same filters).
    pub sdf_entries: u32,
    pub framed_routes: u32,
    /// QERs and URRs beyond each session's home ones (`cells`).
    pub cells: u32,
    /// The TEIDs with a direct slot: upfd passes the one its TEID allocator uses, so the
    /// TEIDs it hands out are found without hashing.
    pub teid_index: TeidIndex,
    /// Slots of UE IPv4 addresses (address mod slots): the TEID index's, so that a
    /// session's TEID and UE address find one entry (0: none).
    pub ue_slots: u32,
    /// Classified flows (app_flows, least recently used ones forgotten first).
    pub app_flows: u32,
    /// Addresses learned from DNS answers (app_addrs, LRU).
    pub app_addrs: u32,
}

impl Capacity {
    pub fn for_sessions(sessions: u32) -> Self {
        let sessions = sessions.max(64);
        let slots = sessions.saturating_add(1024);
        // Sized by what sessions use, not for the worst case of each (docs/architecture.md,
        // "Memory per session"): every session's keys may be outside their slots (an SMF
        // that chooses TEIDs, IPv6 UEs); a session in two needs cold PDRs, a QER or URR
        // beyond its first, or SDF filters of its own. A table that is full refuses the
        // session that does not fit (Cause 75, No resources available).
        Capacity {
            sessions,
            key_entries: sessions.saturating_add(1024),
            cold_entries: (sessions / 4).saturating_add(1024),
            sdf_entries: (sessions / 8).saturating_add(1024),
            framed_routes: 4096,
            cells: (sessions / 64).max(4096),
            teid_index: TeidIndex::new(1, u32::MAX, slots),
            ue_slots: slots,
            app_flows: (sessions / 16).clamp(65536, 1 << 20),
            app_addrs: 16384,
        }
    }

    /// Session entries: every TEID slot and UE slot, and room.
    fn slots(&self) -> u32 {
        self.sessions
            .saturating_add(1024)
            .max(self.teid_index.slots())
            .max(self.ue_slots)
    }
}

/// The data path's tables, open: those of the programs this upfd loaded, or of the
/// running ones it adopted ([`Datapath::adopt`]).
pub(crate) struct Maps {
    pub sess_pages: MapHandle,
    pub cells: MapHandle,
    pub keys: MapHandle,
    pub framed: MapHandle,
    pub pdr_lists: MapHandle,
    pub pdrs: MapHandle,
    pub fars: MapHandle,
    pub sdfs: MapHandle,
    pub neigh: MapHandle,
    pub upf_cfg: MapHandle,
    pub nh_gen: MapHandle,
    pub stats: MapHandle,
    pub cpus: MapHandle,
    pub apps: MapHandle,
    pub app_sdfs: MapHandle,
    pub app_names: MapHandle,
    pub app_urls: MapHandle,
    pub app_addrs: MapHandle,
    pub app_flows: MapHandle,
    pub events: MapHandle,
}

impl Maps {
    /// A table by its name in the object.
    pub fn named(&self, name: &str) -> Option<&MapHandle> {
        let i = MAP_NAMES.iter().position(|n| *n == name)?;
        Some(
            [
                &self.sess_pages,
                &self.cells,
                &self.keys,
                &self.framed,
                &self.pdr_lists,
                &self.pdrs,
                &self.fars,
                &self.sdfs,
                &self.neigh,
                &self.upf_cfg,
                &self.nh_gen,
                &self.stats,
                &self.cpus,
                &self.apps,
                &self.app_sdfs,
                &self.app_names,
                &self.app_urls,
                &self.app_addrs,
                &self.app_flows,
                &self.events,
            ][i],
        )
    }
}

/// The map names of [`Maps`], in its order.
const MAP_NAMES: [&str; 20] = [
    "sess_pages",
    "cells",
    "keys",
    "framed",
    "pdr_lists",
    "pdrs",
    "fars",
    "sdfs",
    "neigh",
    "upf_cfg",
    "nh_gen",
    "stats",
    "cpus",
    "apps",
    "app_sdfs",
    "app_names",
    "app_urls",
    "app_addrs",
    "app_flows",
    "events",
];

impl Maps {
    /// The tables by name, each opened by `open`.
    fn open(
        mut open: impl FnMut(&str) -> Result<MapHandle, FastPathError>,
    ) -> Result<Self, FastPathError> {
        let mut m = MAP_NAMES.iter().map(|n| open(n));
        let mut next = || m.next().expect("every name");
        Ok(Maps {
            sess_pages: next()?,
            cells: next()?,
            keys: next()?,
            framed: next()?,
            pdr_lists: next()?,
            pdrs: next()?,
            fars: next()?,
            sdfs: next()?,
            neigh: next()?,
            upf_cfg: next()?,
            nh_gen: next()?,
            stats: next()?,
            cpus: next()?,
            apps: next()?,
            app_sdfs: next()?,
            app_names: next()?,
            app_urls: next()?,
            app_addrs: next()?,
            app_flows: next()?,
            events: next()?,
        })
    }
}

/// The entry programs, open (the stages are reached through their program arrays).
struct Progs {
    xdp_n3: OwnedFd,
    xdp_n6: OwnedFd,
    xdp_n3_cpu: OwnedFd,
}

/// The XDP data path.
pub struct Datapath {
    /// The programs as this upfd loaded them (None: adopted from the upfd before).
    skel: Option<UpfSkel<'static>>,
    maps: Maps,
    progs: Progs,
    layout: Layout,
    entries: Pages,
    cells: Pages,
    slots: Slots,
    cell_slots: Slots,
    /// Handles of cold entries (hash keys): never reused while upfd runs.
    next_handle: u32,
    /// Cold entries to delete once no packet can read them.
    doomed: VecDeque<(Instant, Table, u32)>,
    /// SDF runs by content: a PDR's compiled filters are written once and shared by every
    /// PDR with the same ones (operators' filters come from a few policies, and
    /// "assigned" is the session's own address in the data path, not a copy).
    sdf_runs: HashMap<Vec<u8>, u32>,
    /// Per run start: PDRs using it, its length, and its content.
    sdf_refs: HashMap<u32, (u32, u32, Vec<u8>)>,
    /// SDF runs to delete once no packet can read them: (when, start, length).
    doomed_sdfs: VecDeque<(Instant, u32, u32)>,
    /// Boxed: the table moves 8-octet pointers when it grows, not records.
    sessions: HashMap<u64, Box<Installed>>,
    /// What a URR had counted when its usage was last reset (usage is the counts less
    /// this): only URRs reset at least once.
    baselines: HashMap<(u64, u32), LaneSums>,
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
    /// What the data path held when it was adopted, until [`Datapath::finish_adoption`].
    adopted: Option<Box<reuse::Adopted>>,
}

mod reuse;
pub use reuse::{Adoption, Reconciled};

/// The identity of a data path as loaded: this build's object and the sizes of its
/// tables (a restarted upfd reuses the running one only if it would load the same).
pub(crate) fn build_id(cap: &Capacity, layout: &Layout) -> u64 {
    let t = cap.teid_index.params();
    [
        u64::from(layout.slots),
        u64::from(layout.cells),
        u64::from(layout.lanes),
        u64::from(layout.per_page),
        u64::from(layout.cells_per_page),
        u64::from(cap.key_entries.max(1024)),
        u64::from(cap.cold_entries.max(1024)),
        u64::from(cap.sdf_entries.max(1024)),
        u64::from(cap.framed_routes),
        u64::from(cap.app_flows.max(1)),
        u64::from(cap.app_addrs.max(1)),
        u64::from(cap.ue_slots),
        u64::from(t.slots),
        u64::from(t.lo),
        u64::from(t.mask),
    ]
    .iter()
    .fold(crate::OBJECT_ID, |h, x| {
        (h ^ x).wrapping_mul(0x0000_0100_0000_01b3)
    })
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

/// The `keys` key of a TEID.
pub(crate) fn teid_key(teid: u32) -> types::sess_key {
    let mut k = types::sess_key {
        kind: abi::KEY_TEID as u8,
        ..Default::default()
    };
    k.addr[..4].copy_from_slice(&teid.to_ne_bytes());
    k
}

/// The `keys` key of a UE address.
pub(crate) fn ue_key(a: IpAddr) -> types::sess_key {
    let mut k = types::sess_key::default();
    match a {
        IpAddr::V4(x) => {
            k.kind = 4;
            k.addr[..4].copy_from_slice(&x.octets());
        }
        IpAddr::V6(x) => {
            k.kind = 6;
            k.addr.copy_from_slice(&x.octets());
        }
    }
    k
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

/// The octets of an SDF run: the key under which it is shared.
fn sdf_content(entries: &[types::sdf_match]) -> Vec<u8> {
    entries.iter().flat_map(|e| bytes(e).to_vec()).collect()
}

/// The stages, by their slots in the program arrays (include/pipeline.h).
fn stages<'a>(skel: &'a UpfSkel<'static>) -> [(&'a libbpf_rs::ProgramMut<'static>, bool, u32); 10] {
    let p = &skel.progs;
    [
        (&p.stage_app, false, abi::CALL_APP),
        (&p.stage_rules, false, abi::CALL_RULES),
        (&p.stage_egress, false, abi::CALL_EGRESS),
        (&p.stage_icmp, false, abi::CALL_ICMP),
        (&p.stage_downlink, false, abi::CALL_DOWNLINK),
        (&p.stage_app_cpu, true, abi::CALL_APP),
        (&p.stage_rules_cpu, true, abi::CALL_RULES),
        (&p.stage_egress_cpu, true, abi::CALL_EGRESS),
        (&p.stage_icmp_cpu, true, abi::CALL_ICMP),
        (&p.stage_downlink_cpu, true, abi::CALL_DOWNLINK),
    ]
}

impl Datapath {
    /// Open and load the programs with tables sized for `cap`. Needs CAP_BPF.
    pub fn load(cap: Capacity, cfg: Config) -> Result<Self, FastPathError> {
        let ncpus = libbpf_rs::num_possible_cpus().map_err(io)?;
        let layout = Layout::new(cap.slots(), cap.cells, ncpus);
        let obj: &'static mut MaybeUninit<libbpf_rs::OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = UpfSkelBuilder::default().open(obj).map_err(io)?;
        {
            let ro = open
                .maps
                .rodata_data
                .as_deref_mut()
                .ok_or_else(|| io("the programs' read-only globals are not mapped"))?;
            ro.lanes = layout.lanes;
            ro.per_page = layout.per_page;
            ro.shared_lanes = u32::from(layout.shared);
            ro.cells_per_page = layout.cells_per_page;
            ro.build_id = build_id(&cap, &layout);
        }
        let m = &mut open.maps;
        m.sess_pages.set_max_entries(layout.pages).map_err(io)?;
        m.cells.set_max_entries(layout.cell_pages).map_err(io)?;
        m.keys
            .set_max_entries(cap.key_entries.max(1024))
            .map_err(io)?;
        for t in [&mut m.pdr_lists, &mut m.pdrs, &mut m.fars] {
            t.set_max_entries(cap.cold_entries.max(1024)).map_err(io)?;
        }
        m.sdfs
            .set_max_entries(cap.sdf_entries.max(1024))
            .map_err(io)?;
        m.framed.set_max_entries(cap.framed_routes).map_err(io)?;
        m.cpus.set_max_entries(ncpus as u32).map_err(io)?;
        m.app_flows
            .set_max_entries(cap.app_flows.max(1))
            .map_err(io)?;
        m.app_addrs
            .set_max_entries(cap.app_addrs.max(1))
            .map_err(io)?;
        let app_sdf_chunks = m.app_sdfs.max_entries() / abi::APP_MAX_SDF;
        let skel = open.load().map_err(io)?;
        for (prog, cpumap, at) in stages(&skel) {
            use std::os::fd::{AsFd, AsRawFd};
            let fd = prog.as_fd().as_raw_fd();
            let array = if cpumap {
                &skel.maps.calls_cpu
            } else {
                &skel.maps.calls
            };
            array
                .update(&at.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
                .map_err(|e| io(format!("stage {at} into its program array: {e}")))?;
        }
        let entries = Pages::map(&skel.maps.sess_pages, layout, false)?;
        let cells = Pages::map(&skel.maps.cells, layout, true)?;
        let maps = Maps::open(|name| {
            let m = skel
                .object()
                .maps()
                .find(|m| m.name().to_str() == Some(name))
                .ok_or_else(|| io(format!("no map {name} in the object")))?;
            MapHandle::try_from(&m).map_err(io)
        })?;
        let dup = |p: &libbpf_rs::ProgramMut<'static>| p.as_fd().try_clone_to_owned().map_err(io);
        let progs = Progs {
            xdp_n3: dup(&skel.progs.xdp_n3)?,
            xdp_n6: dup(&skel.progs.xdp_n6)?,
            xdp_n3_cpu: dup(&skel.progs.xdp_n3_cpu)?,
        };
        let mut d = Datapath::with_tables(
            Some(skel),
            maps,
            progs,
            layout,
            (entries, cells),
            cap,
            ncpus,
            app_sdf_chunks,
        );
        d.configure(cfg, 0, 0, 0)?;
        d.bump_nexthop_generation()?;
        Ok(d)
    }

    /// A data path over these tables and programs, with nothing installed (what
    /// [`Datapath::load`] made, or what [`Datapath::adopt`] found: it then marks what
    /// is in them).
    #[allow(clippy::too_many_arguments)]
    fn with_tables(
        skel: Option<UpfSkel<'static>>,
        maps: Maps,
        progs: Progs,
        layout: Layout,
        (entries, cells): (Pages, Pages),
        cap: Capacity,
        ncpus: usize,
        app_sdf_chunks: u32,
    ) -> Datapath {
        // Cell 1 is never handed out: a PDR's reference 1 (REF_HOME) is its session's
        // home QER or URR.
        let mut cell_slots = Slots::new(layout.cells);
        cell_slots.take_at(abi::REF_HOME);
        Datapath {
            skel,
            maps,
            progs,
            layout,
            entries,
            cells,
            // Every entry is a session's: the TEID index and UE addresses map to 0 too.
            slots: Slots::from(0, layout.slots),
            cell_slots,
            next_handle: 1,
            doomed: VecDeque::new(),
            sdf_runs: HashMap::new(),
            sdf_refs: HashMap::new(),
            doomed_sdfs: VecDeque::new(),
            // Sized for the capacity now: growing it later stalls installs.
            sessions: HashMap::with_capacity(cap.sessions as usize),
            baselines: HashMap::new(),
            nh_gen: 0,
            nh_by_destination: false,
            cfg: Config::default(),
            n6_ifindex: 0,
            cap,
            ncpus,
            boot_offset_ns: unix_ns() - mono_ns(),
            spread: Spread::Off,
            spread_cpus: Vec::new(),
            pfds: Arc::default(),
            app_sdf_chunks: Slots::new(app_sdf_chunks),
            app_blocks: HashMap::new(),
            app_names: HashMap::new(),
            app_urls: HashMap::new(),
            adopted: None,
        }
    }

    /// The programs as this upfd loaded them (tests). Panics for a data path adopted
    /// from the upfd that ran before ([`Datapath::adopt`]).
    pub fn skel(&self) -> &UpfSkel<'static> {
        self.skel.as_ref().expect("a data path this upfd loaded")
    }

    /// The table named `name` in the object, if upfd uses it.
    pub fn map_named(&self, name: &str) -> Option<&MapHandle> {
        self.maps.named(name)
    }

    /// Where the page arrays keep what (entries per page, lanes).
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The TEIDs with direct slots (see `Capacity::teid_index`).
    pub fn teid_index(&self) -> TeidIndex {
        self.cap.teid_index
    }

    /// The slot a UE IPv4 address finds first.
    fn ue_slot(&self, a: Ipv4Addr) -> Option<u32> {
        (self.cap.ue_slots > 0).then(|| u32::from(a) % self.cap.ue_slots)
    }

    /// Whether `teid` finds its session in the slot it maps to (else through the key
    /// table).
    pub fn uplink_in_slot(&self, teid: u32) -> bool {
        self.cap
            .teid_index
            .slot(teid)
            .and_then(|s| self.entries.record(s))
            .is_some_and(|r| r.teid == teid)
    }

    /// Whether UE address `a` finds its session in the slot it maps to.
    pub fn downlink_in_slot(&self, a: Ipv4Addr) -> bool {
        self.ue_slot(a)
            .and_then(|s| self.entries.record(s))
            .is_some_and(|r| {
                r.flags & abi::SR_UE_KEY as u16 != 0 && r.ue_v4 == u32::from_ne_bytes(a.octets())
            })
    }

    /// TEID keys and UE address keys: (found in their slots, in the key tables).
    pub fn direct_keys(&self) -> [(usize, usize); 2] {
        // A record holds its primary keys wherever it is: a key is in its slot when it
        // maps to the record's own slot.
        let in_slots = |f: &dyn Fn(&types::sess_rec) -> Option<u32>| {
            self.sessions
                .values()
                .filter(|i| {
                    self.entries
                        .record(i.slot)
                        .is_some_and(|r| f(&r) == Some(i.slot))
                })
                .count()
        };
        let up = in_slots(&|r| {
            (r.teid != 0)
                .then(|| self.cap.teid_index.slot(r.teid))
                .flatten()
        });
        let down = in_slots(&|r| {
            (r.flags & abi::SR_UE_KEY as u16 != 0)
                .then(|| self.ue_slot(Ipv4Addr::from(r.ue_v4.to_ne_bytes())))
                .flatten()
        });
        let (t, u): (usize, usize) = self
            .sessions
            .values()
            .fold((0, 0), |(t, u), i| (t + i.teids.len(), u + i.ues.len()));
        [(up, t), (down, u)]
    }

    /// Free what cooled: slots, cells, and cold entries past their grace (installs do
    /// it too; upfd also calls this on its timer, for quiet times).
    pub fn settle(&mut self) {
        self.settle_at(Instant::now())
    }

    /// [`settle`](Self::settle) as if at `now`: tests choose the time the grace period
    /// is measured at, so that neither side of it depends on how fast they run.
    pub fn settle_at(&mut self, now: Instant) {
        self.slots.warm(now);
        self.cell_slots.warm(now);
        self.app_sdf_chunks.warm(now);
        let maps = &self.maps;
        while let Some((t, table, h)) = self.doomed.front().copied() {
            if now.saturating_duration_since(t) < GRACE {
                break;
            }
            self.doomed.pop_front();
            let map = match table {
                Table::Lists => &maps.pdr_lists,
                Table::Pdrs => &maps.pdrs,
                Table::Fars => &maps.fars,
            };
            let _ = map.delete(&h.to_ne_bytes());
        }
        while let Some((t, start, n)) = self.doomed_sdfs.front().copied() {
            if now.saturating_duration_since(t) < GRACE {
                break;
            }
            self.doomed_sdfs.pop_front();
            for j in start..start + n {
                let _ = maps.sdfs.delete(&j.to_ne_bytes());
            }
        }
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
        let l = &self.layout;
        let mut c = types::upf_config {
            n3_ifindex,
            n6_ifindex,
            n9_ifindex,
            slowpath_per_sec: cfg.slowpath_per_sec,
            slowpath_burst: cfg.slowpath_burst,
            slots: l.slots,
            page_mul: l.page_div.mul,
            page_shift: l.page_div.shift,
            cells: l.cells,
            cell_mul: l.cell_div.mul,
            cell_shift: l.cell_div.shift,
            ue_slots: self.cap.ue_slots,
            ..Default::default()
        };
        let t = self.cap.teid_index.params();
        c.teid_lo = t.lo;
        c.teid_mask = t.mask;
        c.teid_shift = t.shift;
        c.teid_mul1 = t.mul1;
        c.teid_mul2 = t.mul2;
        c.teid_add = t.add;
        c.teid_slots = t.slots;
        c.teid_bits = t.bits;
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
        let icmp = &cfg.icmp;
        c.icmp_src_v4 = icmp.source_v4.map_or(0, |a| u32::from_ne_bytes(a.octets()));
        c.icmp_src_v6 = icmp.source_v6.map_or([0; 16], |a| a.octets());
        c.icmp_per_sec = icmp.per_sec;
        c.icmp_burst = icmp.burst;
        c.icmp_sess_per_sec = icmp.session_per_sec;
        c.icmp_sess_burst = icmp.session_burst;
        if cfg.mtus.len() > abi::MAX_IF_MTUS as usize {
            return Err(FastPathError::Io(format!(
                "MTUs configured for {} interfaces: at most {}",
                cfg.mtus.len(),
                abi::MAX_IF_MTUS
            )));
        }
        for (to, (ifindex, mtu)) in c.if_mtu.iter_mut().zip(&cfg.mtus) {
            to.ifindex = *ifindex;
            to.mtu = u32::from(*mtu);
        }
        c.n_if_mtu = cfg.mtus.len() as u32;
        self.spread_fields(&mut c);
        let maps = &self.maps;
        maps.upf_cfg
            .update(&0u32.to_ne_bytes(), bytes(&c), MapFlags::ANY)
            .map_err(io)?;
        // Replace the neighbour table: entries written over in place, those no longer
        // configured removed (a neighbour kept is never missing, even for a moment).
        let wanted: HashSet<Vec<u8>> = cfg
            .neigh
            .keys()
            .map(|a| bytes(&neigh_key(*a)).to_vec())
            .collect();
        let old: Vec<Vec<u8>> = maps.neigh.keys().collect();
        for k in old.iter().filter(|k| !wanted.contains(*k)) {
            let _ = maps.neigh.delete(k);
        }
        for (a, e) in &cfg.neigh {
            let k = neigh_key(*a);
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
        let maps = &self.maps;
        let on = how != Spread::Off && !cpus.is_empty();
        // Queues first, then the configuration that sends to them; off: the other way.
        if on {
            let fd = self.progs.xdp_n3_cpu.as_raw_fd();
            let mut v = [0u8; 8];
            v[..4].copy_from_slice(&abi::SPREAD_QUEUE.to_ne_bytes());
            v[4..].copy_from_slice(&fd.to_ne_bytes());
            // An entry already sending to this program with this queue stays (replacing
            // it would stop its kthread: an adopted data path keeps its queues).
            let same = prog_id(self.progs.xdp_n3_cpu.as_fd()).map(|id| {
                let mut w = [0u8; 8];
                w[..4].copy_from_slice(&abi::SPREAD_QUEUE.to_ne_bytes());
                w[4..].copy_from_slice(&id.to_ne_bytes());
                w
            });
            for c in cpus {
                let now = maps
                    .cpus
                    .lookup(&c.to_ne_bytes(), MapFlags::ANY)
                    .ok()
                    .flatten();
                if now.is_some_and(|n| Some(n.as_slice()) == same.as_ref().map(|w| &w[..])) {
                    continue;
                }
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

    /// A fresh handle for a cold entry.
    fn handle(&mut self) -> u32 {
        let h = self.next_handle;
        self.next_handle = match self.next_handle.wrapping_add(1) {
            0 => 1,
            n => n,
        };
        h
    }

    /// The start of a run holding `entries`: a shared one with the same content (one
    /// more PDR using it), else a new one written to the sdfs table. Runs never change
    /// once written, so sharing one is safe while packets read it.
    fn sdf_run(&mut self, entries: &[types::sdf_match]) -> Result<u32, FastPathError> {
        let content = sdf_content(entries);
        if let Some(&start) = self.sdf_runs.get(&content) {
            if let Some(r) = self.sdf_refs.get_mut(&start) {
                r.0 += 1;
            }
            return Ok(start);
        }
        let n = entries.len() as u32;
        let start = self.handle();
        for _ in 1..n {
            self.handle();
        }
        for (j, e) in entries.iter().enumerate() {
            let k = start.wrapping_add(j as u32);
            if let Err(e) = self
                .maps
                .sdfs
                .update(&k.to_ne_bytes(), bytes(e), MapFlags::ANY)
            {
                for i in 0..j as u32 {
                    let _ = self.maps.sdfs.delete(&start.wrapping_add(i).to_ne_bytes());
                }
                return Err(if table_full(&e) {
                    FastPathError::Full("sdfs")
                } else {
                    io(e)
                });
            }
        }
        self.sdf_runs.insert(content.clone(), start);
        self.sdf_refs.insert(start, (1, n, content));
        Ok(start)
    }

    /// One PDR less uses the run at `start`; the last one frees it (after the grace
    /// period: a packet may still read it).
    fn release_sdf_run(&mut self, start: u32, now: Instant) {
        let Some(r) = self.sdf_refs.get_mut(&start) else {
            return;
        };
        r.0 -= 1;
        if r.0 == 0 {
            if let Some((_, n, content)) = self.sdf_refs.remove(&start) {
                self.sdf_runs.remove(&content);
                self.doomed_sdfs.push_back((now, start, n));
            }
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
        self.maps
            .nh_gen
            .update(&0u32.to_ne_bytes(), &word.to_ne_bytes(), MapFlags::ANY)
            .map_err(io)
    }

    /// Distinct SDF runs in the table, and PDRs using them.
    pub fn sdf_blocks(&self) -> (usize, u64) {
        (
            self.sdf_refs.len(),
            self.sdf_refs.values().map(|r| u64::from(r.0)).sum(),
        )
    }

    /// The data path's counters by index (drop reasons, then `Stat`), summed over CPUs.
    pub fn stats(&self) -> Vec<(u64, u64)> {
        (0..abi::STAT_MAX)
            .map(|i| {
                let Ok(Some(per_cpu)) = self
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

    /// Where a session's URR lives (its slot if home, else its cell).
    fn urr_place(&self, seid: u64, urr_id: u32) -> Result<(u32, Place), FastPathError> {
        let inst = self
            .sessions
            .get(&seid)
            .ok_or_else(|| io(format!("no session {seid:#x}")))?;
        inst.urrs
            .get(&urr_id)
            .map(|p| (inst.slot, p))
            .ok_or_else(|| io(format!("no URR {urr_id} in session {seid:#x}")))
    }

    /// A URR's lanes summed, where it lives.
    fn urr_sums(&self, slot: u32, place: Place) -> Option<LaneSums> {
        match place {
            Place::Home => self.entries.lane_sums(slot),
            Place::Cell(c) => self.cells.lane_sums(c),
        }
    }

    /// Change the home URR's flags (SR_URR_*) and bump one of its epochs (quota: the
    /// high 16 bits; threshold: the low 16) in the record, outside its sequence lock
    /// (`Pages::set_record_urr`).
    fn rewrite_home_urr(&self, slot: u32, flag: u16, on: bool, quota: bool) -> Option<()> {
        let r = self.entries.record(slot)?;
        let epoch = if quota {
            r.epoch.wrapping_add(1 << 16)
        } else {
            (r.epoch & 0xffff_0000) | (r.epoch.wrapping_add(1) & 0xffff)
        };
        let (set, clear) = if on { (flag, 0) } else { (0, flag) };
        self.entries.set_record_urr(slot, set, clear, epoch)
    }

    /// A cold URR's flags and epochs, as the home URR's are in the record.
    fn rewrite_cell_urr(&self, cell: u32, flag: u32, on: bool, quota: bool) -> Option<()> {
        let pool = self.cells.pool(cell)?;
        let flags = if on {
            pool.flags | flag
        } else {
            pool.flags & !flag
        } & !abi::URR_Q_NOTIFIED;
        let epoch = if quota {
            pool.epoch.wrapping_add(1 << 16)
        } else {
            (pool.epoch & 0xffff_0000) | (pool.epoch.wrapping_add(1) & 0xffff)
        };
        self.cells.set_cell_urr(cell, flags, epoch)
    }

    /// A URR's pool value (`set`) and its flag and epoch (`arm`). Arming, the value
    /// first: no packet sees the flag over a value it does not belong to. Disarming, the
    /// flag alone: a packet that read the flags just before still finds the value it
    /// would have found a moment earlier, not a zero that drops it.
    fn arm_in_order(
        on: bool,
        set: impl FnOnce() -> Option<()>,
        arm: impl FnOnce() -> Option<()>,
    ) -> Option<()> {
        if on {
            set().and_then(|_| arm())
        } else {
            arm()
        }
    }

    /// Set the volume quota a URR may still use (None: no quota): the pool and the
    /// flag with a new epoch (lanes drop credit of the old quota).
    pub fn write_quota(
        &self,
        seid: u64,
        urr_id: u32,
        remaining: Option<i64>,
    ) -> Result<(), FastPathError> {
        let (slot, place) = self.urr_place(seid, urr_id)?;
        let on = remaining.is_some();
        let octets = remaining.unwrap_or(0);
        let done = match place {
            Place::Home => Self::arm_in_order(
                on,
                || self.entries.set_quota(slot, octets),
                || self.rewrite_home_urr(slot, abi::SR_URR_QUOTA as u16, on, true),
            ),
            Place::Cell(c) => Self::arm_in_order(
                on,
                || self.cells.set_quota(c, octets),
                || self.rewrite_cell_urr(c, abi::URR_Q_VOLUME, on, true),
            ),
        };
        done.ok_or_else(|| io(format!("URR {urr_id} of session {seid:#x}: out of range")))
    }

    /// Arm (Some: octets left) or disarm (None) a URR's volume threshold: the data path
    /// raises EV_THRESHOLD on the lease that uses it up.
    pub fn write_threshold(
        &self,
        seid: u64,
        urr_id: u32,
        remaining: Option<i64>,
    ) -> Result<(), FastPathError> {
        let (slot, place) = self.urr_place(seid, urr_id)?;
        let on = remaining.is_some();
        let octets = remaining.unwrap_or(0);
        let done = match place {
            Place::Home => Self::arm_in_order(
                on,
                || self.entries.set_threshold(slot, octets),
                || self.rewrite_home_urr(slot, abi::SR_URR_THRESHOLD as u16, on, false),
            ),
            Place::Cell(c) => Self::arm_in_order(
                on,
                || self.cells.set_threshold(c, octets),
                || self.rewrite_cell_urr(c, abi::URR_T_ARMED, on, false),
            ),
        };
        done.ok_or_else(|| io(format!("URR {urr_id} of session {seid:#x}: out of range")))
    }

    /// Where this data path counts URRs (the kernel IDs of `sess_pages` and `cells` and
    /// their layout): kept in upfd's state, so that the next upfd reads the counts of
    /// this data path after its own took over ([`OldCounters`]).
    pub fn counter_table(&self) -> Result<upf::state::CounterTable, FastPathError> {
        let pages = self.maps.sess_pages.info().map_err(io)?;
        let cells = self.maps.cells.info().map_err(io)?;
        Ok(upf::state::CounterTable {
            map_id: pages.info.id,
            cells_map_id: cells.info.id,
            lanes: self.layout.lanes,
            per_page: self.layout.per_page,
            cells_per_page: self.layout.cells_per_page,
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

/// Whether a table update failed because the table is full: a hash table without
/// preallocation says E2BIG at max_entries, one with it ENOMEM.
fn table_full(e: &libbpf_rs::Error) -> bool {
    matches!(
        e.kind(),
        libbpf_rs::ErrorKind::OutOfMemory | libbpf_rs::ErrorKind::TooBig
    )
}

/// A loaded program's ID.
pub(crate) fn prog_id(fd: std::os::fd::BorrowedFd<'_>) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let mut info = libbpf_rs::libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: info is a bpf_prog_info of `len` octets; the kernel fills at most that.
    let r = unsafe {
        libbpf_rs::libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len)
    };
    (r == 0).then_some(info.id)
}

/// A key's session as the key tables say: its slot.
fn neigh_key(a: IpAddr) -> types::neigh_key {
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
    k
}

fn key_ref_slot(b: Option<Vec<u8>>) -> Option<u32> {
    b.and_then(|b| from_bytes::<types::key_ref>(&b))
        .map(|r| r.slot)
}

impl Datapath {
    /// The session that holds a key now, if any: the slot's record, else the key tables.
    fn holder(&self, key: &Key) -> Option<u64> {
        let maps = &self.maps;
        let seid_of = |slot: u32| self.entries.record(slot).map(|r| r.seid);
        match key {
            Key::Teid(t) => {
                if let Some(r) = self
                    .cap
                    .teid_index
                    .slot(*t)
                    .and_then(|s| self.entries.record(s))
                    .filter(|r| r.teid == *t)
                {
                    return Some(r.seid);
                }
                key_ref_slot(maps.keys.lookup(bytes(&teid_key(*t)), MapFlags::ANY).ok()?)
                    .and_then(seid_of)
            }
            Key::Ue(a) => {
                if let IpAddr::V4(v4) = a {
                    let own = u32::from_ne_bytes(v4.octets());
                    if let Some(r) = self
                        .ue_slot(*v4)
                        .and_then(|s| self.entries.record(s))
                        .filter(|r| r.flags & abi::SR_UE_KEY as u16 != 0 && r.ue_v4 == own)
                    {
                        return Some(r.seid);
                    }
                }
                key_ref_slot(maps.keys.lookup(bytes(&ue_key(*a)), MapFlags::ANY).ok()?)
                    .and_then(seid_of)
            }
            Key::Framed(n) => {
                key_ref_slot(maps.framed.lookup(bytes(&lpm_key(n)), MapFlags::ANY).ok()?)
                    .and_then(seid_of)
            }
        }
    }

    /// Step 1: the session's keys must be free or its own.
    fn check(&self, plan: &Compiled) -> Result<(), FastPathError> {
        for k in &plan.keys {
            if self.holder(&k.key).is_some_and(|s| s != plan.seid) {
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
        Ok(())
    }

    /// Step 2: the session's slot (its old one; else the one both primary keys map to,
    /// its UE address's, its TEID's, any free one), its home QER and URR (the old ones
    /// while they exist; else the first of its first hot PDR, if new), and a cell for
    /// every other QER and URR (the old one if it had one).
    fn place(
        &mut self,
        plan: &Compiled,
        prev: Option<&Installed>,
        now: Instant,
    ) -> Result<Installed, FastPathError> {
        let mut inst = Installed::default();
        let [t, u] = plan.primary_keys();
        inst.slot = match prev {
            Some(p) => p.slot,
            None => {
                let ts = t.and_then(|k| match k.key {
                    Key::Teid(x) => self.cap.teid_index.slot(x),
                    _ => None,
                });
                let us = u.and_then(|k| match k.key {
                    Key::Ue(IpAddr::V4(a)) => self.ue_slot(a),
                    _ => None,
                });
                let both = ts.filter(|s| Some(*s) == us);
                // Else a slot picked by the SEID's hash: the next in order is likely
                // the next UE address's (pools hand them out in order), which would
                // then take another, and so on down the line.
                let n = u64::from(self.layout.slots);
                let probe = |k: u64| {
                    let mut z = plan
                        .seid
                        .wrapping_add(k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
                    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
                    ((z ^ (z >> 31)) % n.max(1)) as u32
                };
                let slot = [both, us, ts]
                    .into_iter()
                    .flatten()
                    .chain((1..=16).map(probe))
                    .find(|s| self.slots.take_at(*s))
                    .or_else(|| self.slots.take(1))
                    .ok_or(FastPathError::Full("sessions"))?;
                // Nothing reaches a slot that cooled: clear its pool and lanes.
                self.entries.clear(slot);
                slot
            }
        };
        let (cand_qer, cand_urr) = plan.home_candidates();
        let old_qers = prev.map(|p| &p.qers);
        let old_urrs = prev.map(|p| &p.urrs);
        let home_qer = old_qers
            .and_then(|q| q.home())
            .filter(|o| plan.qers.iter().any(|(i, _)| i == o))
            .or(cand_qer.filter(|c| old_qers.is_none_or(|q| q.get(c).is_none())));
        let lanes_used = prev.is_some_and(|p| p.lanes_used || p.urrs.home().is_some());
        let home_urr = old_urrs
            .and_then(|q| q.home())
            .filter(|o| plan.urrs.contains(o))
            .or(cand_urr.filter(|c| !lanes_used && old_urrs.is_none_or(|q| q.get(c).is_none())));
        inst.lanes_used = lanes_used || home_urr.is_some();
        for (id, q) in &plan.qers {
            if Some(*id) == home_qer {
                inst.qers.insert(*id, Place::Home);
                continue;
            }
            let cell = match old_qers.and_then(|o| o.get(id)) {
                Some(Place::Cell(c)) => c,
                _ => self.new_cell(now)?,
            };
            // Its owner too, for a restarted upfd (datapath/reuse.rs).
            let q = types::qer_params {
                seid: plan.seid,
                ..*q
            };
            self.cells
                .write_params(cell, &q)
                .ok_or_else(|| io("cells: out of range"))?;
            inst.qers.insert(*id, Place::Cell(cell));
        }
        for id in &plan.urrs {
            if Some(*id) == home_urr {
                inst.urrs.insert(*id, Place::Home);
                continue;
            }
            let cell = match old_urrs.and_then(|o| o.get(id)) {
                Some(Place::Cell(c)) => c,
                _ => {
                    let c = self.new_cell(now)?;
                    // Its owner, for a restarted upfd (datapath/reuse.rs).
                    let owner = types::qer_params {
                        seid: plan.seid,
                        urr_id: *id,
                        home: abi::HOME_URR as u8,
                        ..Default::default()
                    };
                    self.cells
                        .write_params(c, &owner)
                        .ok_or_else(|| io("cells: out of range"))?;
                    c
                }
            };
            inst.urrs.insert(*id, Place::Cell(cell));
        }
        Ok(inst)
    }

    fn new_cell(&mut self, _now: Instant) -> Result<u32, FastPathError> {
        let c = self
            .cell_slots
            .take(1)
            .ok_or(FastPathError::Full("cells"))?;
        self.cells.clear(c);
        Ok(c)
    }

    /// Write one cold entry of `table` under a fresh handle.
    fn put_cold(
        &mut self,
        inst: &mut Installed,
        table: Table,
        value: &[u8],
    ) -> Result<u32, FastPathError> {
        let h = self.handle();
        let (map, full) = match table {
            Table::Lists => (&self.maps.pdr_lists, "pdr_lists"),
            Table::Pdrs => (&self.maps.pdrs, "pdrs"),
            Table::Fars => (&self.maps.fars, "fars"),
        };
        map.update(&h.to_ne_bytes(), value, MapFlags::ANY)
            .map_err(|e| {
                if table_full(&e) {
                    FastPathError::Full(full)
                } else {
                    io(e)
                }
            })?;
        inst.cold.push((table, h));
        Ok(h)
    }

    /// Step 3: the cold entries the record and the keys will name: SDF runs, the PDRs
    /// and FARs the record cannot hold, the PDR lists. Returns the record's placement.
    fn write<'c>(
        &mut self,
        plan: &'c Compiled,
        inst: &mut Installed,
    ) -> Result<(RecordPlan<'c>, HashMap<Key, u32>), FastPathError> {
        let [t, u] = plan.primary_keys();
        let mut rp = RecordPlan {
            keys: [t, u],
            home_qer: inst.qers.home(),
            home_urr: inst.urrs.home(),
            lanes_used: inst.lanes_used,
            ..Default::default()
        };
        for p in &plan.pdrs {
            if !p.sdf.is_empty() {
                let start = self.sdf_run(&p.sdf)?;
                inst.sdfs.push((start, p.sdf.len() as u32));
                rp.sdf.insert(p.id, start);
            }
        }
        let place = |r: Rule| -> u32 {
            match r {
                Rule::Qer(q) => match inst.qers.get(&q) {
                    Some(Place::Home) => abi::REF_HOME,
                    Some(Place::Cell(c)) => c,
                    None => 0,
                },
                Rule::Urr(x) => match inst.urrs.get(&x) {
                    Some(Place::Home) => abi::REF_HOME,
                    Some(Place::Cell(c)) => c,
                    None => 0,
                },
                Rule::Far(_) => 0,
            }
        };
        let mut linked = Vec::new();
        for id in plan.cold_pdrs(rp.home_qer, rp.home_urr) {
            let Some(p) = plan.pdr(id) else {
                continue;
            };
            let mut v = p.linked(place, rp.sdf.get(&id).copied().unwrap_or(0));
            v.far = 0;
            linked.push((p, v));
        }
        let mut far_handle: HashMap<u32, u32> = HashMap::new();
        let mut cold: HashMap<u16, u32> = HashMap::new();
        for (p, mut v) in linked {
            if let Some(f) = p.far_id.and_then(|fid| plan.far(fid).map(|f| (fid, *f))) {
                let h = match far_handle.get(&f.0) {
                    Some(h) => *h,
                    None => {
                        let h = self.put_cold(inst, Table::Fars, bytes(&f.1))?;
                        far_handle.insert(f.0, h);
                        h
                    }
                };
                v.far = h;
            }
            let h = self.put_cold(inst, Table::Pdrs, bytes(&v))?;
            cold.insert(p.id, h);
        }
        rp.cold = cold.clone();
        // A list for each key the record does not hold alone.
        let mut lists: HashMap<Key, u32> = HashMap::new();
        for k in &plan.keys {
            let line = rp
                .keys
                .iter()
                .position(|p| p.is_some_and(|p| p.key == k.key));
            if line.is_some() && k.pdrs.len() == 1 {
                continue;
            }
            let at = plan.hot_at(k);
            let mut l = types::pdr_list {
                n: k.pdrs.len() as u8,
                hot_at: if line.is_some() { at as u8 } else { 0xff },
                ..Default::default()
            };
            for (i, id) in k.pdrs.iter().enumerate() {
                l.pdr[i] = cold.get(id).copied().unwrap_or(0);
                l.app[i] = plan.pdr(*id).map_or(0, |p| p.app);
            }
            let h = self.put_cold(inst, Table::Lists, bytes(&l))?;
            if let Some(line) = line {
                rp.lists[line] = h;
            }
            lists.insert(k.key, h);
        }
        Ok((rp, lists))
    }

    /// Step 4: the record, under its sequence lock (its home URR's flags and epochs
    /// kept), then the keys that are not the slot's own; then the keys the new version
    /// no longer has are removed.
    fn publish(
        &mut self,
        plan: &Compiled,
        mut rp: RecordPlan<'_>,
        lists: &HashMap<Key, u32>,
        prev: Option<&Installed>,
        inst: &mut Installed,
    ) -> Result<(), FastPathError> {
        if prev.is_some() {
            if let Some(old) = self.entries.record(inst.slot) {
                let urr = (abi::SR_URR_QUOTA | abi::SR_URR_THRESHOLD) as u16;
                rp.urr_flags = old.flags & urr;
                rp.epoch = old.epoch;
            }
        }
        let rec = plan.record(&rp);
        self.entries
            .write_record(inst.slot, &rec)
            .ok_or_else(|| io("sess_pages: out of range"))?;
        let maps = &self.maps;
        for k in &plan.keys {
            let line = rp
                .keys
                .iter()
                .position(|p| p.is_some_and(|p| p.key == k.key));
            let own_slot = match (k.key, line) {
                (Key::Teid(t), Some(_)) => self.cap.teid_index.slot(t) == Some(inst.slot),
                (Key::Ue(IpAddr::V4(a)), Some(_)) => self.ue_slot(a) == Some(inst.slot),
                _ => false,
            };
            if own_slot {
                continue;
            }
            let v = types::key_ref {
                slot: inst.slot,
                list: lists.get(&k.key).copied().unwrap_or(0),
                up: k.uplink as u8,
                primary: line.is_some() as u8,
                ..Default::default()
            };
            let full = |e: libbpf_rs::Error, name| {
                if table_full(&e) {
                    FastPathError::Full(name)
                } else {
                    io(e)
                }
            };
            match k.key {
                Key::Teid(t) => {
                    maps.keys
                        .update(bytes(&teid_key(t)), bytes(&v), MapFlags::ANY)
                        .map_err(|e| full(e, "keys"))?;
                    inst.teids.push(t);
                }
                Key::Ue(a) => {
                    maps.keys
                        .update(bytes(&ue_key(a)), bytes(&v), MapFlags::ANY)
                        .map_err(|e| full(e, "keys"))?;
                    inst.ues.push(ue_key(a));
                }
                Key::Framed(n) => {
                    let key = lpm_key(&n);
                    maps.framed
                        .update(bytes(&key), bytes(&v), MapFlags::ANY)
                        .map_err(|e| full(e, "framed"))?;
                    inst.framed.push(key);
                }
            }
        }
        if let Some(prev) = prev {
            for t in &prev.teids {
                if !inst.teids.contains(t) {
                    let _ = maps.keys.delete(bytes(&teid_key(*t)));
                }
            }
            for k in &prev.ues {
                if !inst.ues.iter().any(|x| bytes(x) == bytes(k)) {
                    let _ = maps.keys.delete(bytes(k));
                }
            }
            for k in &prev.framed {
                if !inst.framed.iter().any(|x| bytes(x) == bytes(k)) {
                    let _ = maps.framed.delete(bytes(k));
                }
            }
        }
        Ok(())
    }

    /// What `old` used that `new` (None: nothing) does not: its cold entries and SDF runs
    /// after the grace period, its cells and, for a removed session, its slot.
    fn release(&mut self, old: &Installed, new: Option<&Installed>, now: Instant) {
        for (t, h) in &old.cold {
            self.doomed.push_back((now, *t, *h));
        }
        for (start, _) in &old.sdfs {
            self.release_sdf_run(*start, now);
        }
        let kept = |m: Option<&IdMap>, c: u32| m.is_some_and(|m| m.cells().any(|(_, x)| x == c));
        for (_, c) in old.qers.cells() {
            if !kept(new.map(|n| &n.qers), c) {
                self.cells.clear_owner(c);
                self.cell_slots.release(c, 1, now);
            }
        }
        for (_, c) in old.urrs.cells() {
            if !kept(new.map(|n| &n.urrs), c) {
                self.cells.clear_owner(c);
                self.cell_slots.release(c, 1, now);
            }
        }
        if new.is_none() {
            self.slots.release(old.slot, 1, now);
        }
    }

    /// [`FastPath::install`] as if at `now` (the time grace periods count from and are
    /// measured at; see [`settle_at`](Self::settle_at)).
    pub fn install_at(
        &mut self,
        old: Option<&Session>,
        new: &Arc<Session>,
        now: Instant,
    ) -> Result<(), FastPathError> {
        self.settle_at(now);
        let plan = compile(
            new,
            &Addresses::from(&self.cfg),
            &self.pfds,
            self.layout.lanes,
        )?;
        self.check(&plan)?;
        let prev = match old {
            Some(_) => self.sessions.remove(&new.up_seid),
            None => None,
        };
        // A session the adopted tables hold (a restart): installed as a modification of
        // what they hold, so that it keeps its slot, cells, counts and leases.
        let adopted = match (&prev, &self.adopted) {
            (None, Some(a)) => a.installed(new.up_seid),
            _ => None,
        };
        let prev = prev.or(adopted.map(Box::new));
        match self.install_plan(&plan, prev.as_deref(), now) {
            Ok(inst) => {
                if let Some(p) = &prev {
                    self.release(p, Some(&inst), now);
                    for id in p.urrs.0.iter().map(|(i, _)| *i) {
                        if inst.urrs.get(&id).is_none() {
                            self.baselines.remove(&(new.up_seid, id));
                        }
                    }
                }
                self.sessions.insert(new.up_seid, Box::new(inst));
                Ok(())
            }
            Err(e) => {
                if let (Some(p), Some(_)) = (prev, old) {
                    self.sessions.insert(new.up_seid, p);
                }
                Err(e)
            }
        }
    }

    fn install_plan(
        &mut self,
        plan: &Compiled,
        prev: Option<&Installed>,
        now: Instant,
    ) -> Result<Installed, FastPathError> {
        let mut inst = self.place(plan, prev, now)?;
        let written = self
            .write(plan, &mut inst)
            .and_then(|(rp, lists)| self.publish(plan, rp, &lists, prev, &mut inst));
        if let Err(e) = written {
            // Undo what this attempt wrote; the previous version stays as it was.
            let partial = Installed {
                slot: inst.slot,
                cold: inst.cold.clone(),
                sdfs: inst.sdfs.clone(),
                ..Default::default()
            };
            self.release(&partial, prev.or(Some(&inst)), now);
            let maps = &self.maps;
            for t in inst
                .teids
                .iter()
                .filter(|t| prev.is_none_or(|p| !p.teids.contains(t)))
            {
                let _ = maps.keys.delete(bytes(&teid_key(*t)));
            }
            let fresh = |m: &IdMap, o: Option<&IdMap>| -> Vec<u32> {
                m.cells()
                    .filter(|(_, c)| o.is_none_or(|o| !o.cells().any(|(_, x)| x == *c)))
                    .map(|(_, c)| c)
                    .collect()
            };
            for c in fresh(&inst.qers, prev.map(|p| &p.qers))
                .into_iter()
                .chain(fresh(&inst.urrs, prev.map(|p| &p.urrs)))
            {
                self.cell_slots.release(c, 1, now);
            }
            if prev.is_none() {
                self.slots.release(inst.slot, 1, now);
            }
            return Err(e);
        }
        Ok(inst)
    }

    /// [`FastPath::remove`] as if at `now` (when its slot starts to cool).
    pub fn remove_at(&mut self, session: &Session, now: Instant) {
        let Some(inst) = self.sessions.remove(&session.up_seid) else {
            return;
        };
        // The record first: its keys gone, packets no longer find it.
        if let Some(mut r) = self.entries.record(inst.slot) {
            r.seid = 0;
            r.home.home = 0;
            r.teid = 0;
            r.ue_v4 = 0;
            r.flags &= !(abi::SR_UE_KEY as u16);
            r.dir = Default::default();
            let _ = self.entries.write_record(inst.slot, &r);
        }
        let maps = &self.maps;
        for t in &inst.teids {
            let _ = maps.keys.delete(bytes(&teid_key(*t)));
        }
        for k in &inst.ues {
            let _ = maps.keys.delete(bytes(k));
        }
        for k in &inst.framed {
            let _ = maps.framed.delete(bytes(k));
        }
        for id in inst.urrs.0.iter().map(|(i, _)| *i) {
            self.baselines.remove(&(session.up_seid, id));
        }
        self.release(&inst, None, now);
    }

    /// The counts of a URR, less what they were when it was last reset.
    fn urr_usage(&self, seid: u64, urr_id: u32) -> Option<Usage> {
        let (slot, place) = self.urr_place(seid, urr_id).ok()?;
        let mut s = self.urr_sums(slot, place)?;
        if let Some(b) = self.baselines.get(&(seid, urr_id)) {
            for d in 0..2 {
                s.packets[d] = s.packets[d].saturating_sub(b.packets[d]);
                s.bytes[d] = s.bytes[d].saturating_sub(b.bytes[d]);
            }
            if s.packets == [0, 0] {
                s.first = None;
                s.last = None;
            }
        }
        Some(s.usage(coarse_ns(), self.boot_offset_ns))
    }
}

impl FastPath for Datapath {
    fn session_by_teid(&self, teid: u32) -> Option<Option<u64>> {
        Some(self.holder(&Key::Teid(teid)))
    }

    fn session_by_ue(&self, a: IpAddr) -> Option<Option<u64>> {
        // Framed routes and UE IPv6 prefixes are in the LPM table: not looked up here.
        match (self.holder(&Key::Ue(a)), a) {
            (Some(s), _) => Some(Some(s)),
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
            let maps = &self.maps;
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
        match self.urr_place(seid, urr_id).ok()? {
            (slot, Place::Home) => Some(HOME_HANDLE | slot),
            (_, Place::Cell(c)) => Some(c),
        }
    }

    fn usage(&self, seid: u64, urr_id: u32) -> Usage {
        self.urr_usage(seid, urr_id).unwrap_or_default()
    }

    /// A new measurement starts: the counts from now on (a baseline: the lanes are
    /// written by the CPUs, never cleared under them), the first packet's time anew.
    fn reset_usage(&mut self, seid: u64, urr_id: u32) {
        let Ok((slot, place)) = self.urr_place(seid, urr_id) else {
            return;
        };
        let _ = match place {
            Place::Home => self.entries.clear_first(slot),
            Place::Cell(c) => self.cells.clear_first(c),
        };
        if let Some(s) = self.urr_sums(slot, place) {
            self.baselines.insert((seid, urr_id), s);
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
    /// The entry program of an interface role.
    pub fn prog_fd(&self, role: Role) -> std::os::fd::BorrowedFd<'_> {
        match role {
            Role::Gtpu => self.progs.xdp_n3.as_fd(),
            Role::N6 => self.progs.xdp_n6.as_fd(),
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
        let xdp = Xdp::new(self.prog_fd(role));
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
        let xdp = Xdp::new(self.prog_fd(role));
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
        let mut o = libbpf_rs::libbpf_sys::bpf_test_run_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_test_run_opts>() as _,
            data_in: frame.as_ptr().cast(),
            data_size_in: len,
            ctx_in: ctx.as_ptr().cast(),
            ctx_size_in: ctx.len() as u32,
            flags: TEST_XDP_LIVE_FRAMES,
            repeat: 1,
            ..Default::default()
        };
        // SAFETY: `o` points at `frame` and `ctx`, which outlive the call.
        let r = unsafe {
            libbpf_rs::libbpf_sys::bpf_prog_test_run_opts(self.prog_fd(role).as_raw_fd(), &mut o)
        };
        if r != 0 {
            return Err(io(std::io::Error::from_raw_os_error(-r)));
        }
        Ok(o.retval)
    }

    /// A ring buffer reader over the events table calling `f` for each record (the
    /// event header, then packet octets for EV_BUFFER).
    pub fn events(
        &self,
        f: impl FnMut(&[u8]) -> i32 + 'static,
    ) -> Result<libbpf_rs::RingBuffer<'static>, FastPathError> {
        let handle: &'static MapHandle = Box::leak(Box::new(
            MapHandle::try_from(&self.maps.events).map_err(io)?,
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
        t @ (abi::EV_BUFFER | abi::EV_REDIRECT) => {
            let b = Buffered {
                seid: e.seid,
                far_id: e.far_id,
                pdr_id: u16::try_from(e.pdr_id).ok()?,
                nocp: e.nocp != 0,
                packet: b.get(h..h.checked_add(e.len as usize)?)?.to_vec(),
            };
            if t == abi::EV_BUFFER {
                Event::Buffered(b)
            } else {
                Event::Redirected(b)
            }
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
    entries: Pages,
    cells: Pages,
    boot_offset_ns: i128,
}

impl OldCounters {
    /// Open the `sess_pages` and `cells` maps `t` describes; an error if they are gone
    /// (the old data path was removed) or are not of this build's layout on this machine.
    pub fn open(t: &upf::state::CounterTable) -> Result<Self, FastPathError> {
        let open = |id: u32, name: &str| -> Result<libbpf_rs::MapHandle, FastPathError> {
            let m =
                libbpf_rs::MapHandle::from_map_id(id).map_err(|e| io(format!("map {id}: {e}")))?;
            if m.name().to_str() != Some(name) || m.value_size() as usize != crate::layout::PAGE {
                return Err(io(format!(
                    "map {id} is {:?} with {}-octet values, not {name} of {}-octet pages",
                    m.name(),
                    m.value_size(),
                    crate::layout::PAGE
                )));
            }
            Ok(m)
        };
        let pages = open(t.map_id, "sess_pages")?;
        let cells = open(t.cells_map_id, "cells")?;
        let ncpus = libbpf_rs::num_possible_cpus().map_err(io)?;
        let mut l = Layout::new(
            pages.max_entries() * t.per_page.max(1),
            cells.max_entries() * t.cells_per_page.max(1),
            ncpus,
        );
        if (l.lanes, l.per_page, l.cells_per_page) != (t.lanes, t.per_page, t.cells_per_page) {
            return Err(io(format!(
                "tables of {} lanes, {} entries and {} cells a page on a machine whose layout has {}, {} and {}",
                t.lanes, t.per_page, t.cells_per_page, l.lanes, l.per_page, l.cells_per_page
            )));
        }
        // The pages the maps have, whatever this build would size.
        l.pages = pages.max_entries();
        l.slots = l.pages * l.per_page;
        l.cell_pages = cells.max_entries();
        l.cells = l.cell_pages * l.cells_per_page;
        Ok(OldCounters {
            entries: Pages::map(&pages, l, false)?,
            cells: Pages::map(&cells, l, true)?,
            boot_offset_ns: unix_ns() - mono_ns(),
        })
    }

    /// The counts of URR `handle` (FastPath::urr_handle: HOME_HANDLE | slot, or a cell),
    /// summed over the lanes (None: no such place).
    pub fn usage(&self, handle: u32) -> Option<Usage> {
        let s = if handle & HOME_HANDLE != 0 {
            self.entries.lane_sums(handle & !HOME_HANDLE)?
        } else {
            self.cells.lane_sums(handle)?
        };
        Some(s.usage(coarse_ns(), self.boot_offset_ns))
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
            let maps = &self.maps;
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
                        self.app_sdf_chunks.release(chunk, 1, Instant::now());
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
                self.app_sdf_chunks.release(c, 1, Instant::now());
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
        let maps = &self.maps;
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
