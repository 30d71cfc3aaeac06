//! The XDP data path as a [`FastPath`]: compiles sessions into the tables of
//! bpf/include/upf_maps.h and is their only writer.
//!
//! A session's entries are written so the programs never see a half-built session:
//! QERs, URRs, FARs, SDF entries and PDRs first (new indices for FARs, SDF entries and
//! PDRs: copy on write), then the lookup keys, which switch to the new rules atomically
//! one key at a time; entries no longer used are freed last, after a grace period so a
//! packet in flight never reads a reused slot.

use std::collections::{HashMap, VecDeque};
use std::mem::MaybeUninit;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use smallvec::SmallVec;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags};
use upf::fastpath::model::keys;
use upf::fastpath::pipeline::{
    qer_gcra, rule_set, session_ue, tunnel, Egress, PipelineConfig, STAT_MAX,
};
use upf::fastpath::teid_index::TeidIndex;
use upf::fastpath::{FastPath, FastPathError, Usage};
use upf::rules::Session;

use crate::direct::{ue_v4_key, DirectTable, Keying};

use crate::upf::types;
use crate::upf::{UpfSkel, UpfSkelBuilder};

/// `struct far`'s `ohc` (bpf/include/upf_maps.h OHC_*).
const OHC_GTPU_V4: u8 = 1;
const OHC_GTPU_V6: u8 = 2;
const OHC_UNSUPPORTED: u8 = 3;

/// Grace period before a freed slot is reused.
const GRACE: Duration = Duration::from_millis(50);

pub(crate) fn bytes<T: Copy>(t: &T) -> &[u8] {
    // SAFETY: T is a plain-old-data repr(C) type generated from BTF; reading its octets
    // (padding included, all zero-initialised by Default) is defined.
    unsafe { std::slice::from_raw_parts(t as *const T as *const u8, std::mem::size_of::<T>()) }
}

pub(crate) fn from_bytes<T: Copy + Default>(b: &[u8]) -> T {
    let mut t = T::default();
    let n = b.len().min(std::mem::size_of::<T>());
    // SAFETY: as above; at most size_of::<T>() octets are copied into t.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), &mut t as *mut T as *mut u8, n) };
    t
}

/// Free-list allocator of table slots; slot 0 is never handed out. A slot can also be
/// asked for by index ([`take_at`](Self::take_at), single slots only): `used` marks
/// the slots taken or cooling, so the free list and `next` skip those.
#[derive(Debug)]
struct Slots {
    next: u32,
    max: u32,
    free: Vec<u32>,
    /// Free runs of length 1..=8 for SDF blocks.
    runs: [Vec<u32>; 9],
    cooling: VecDeque<(Instant, u32, u32)>,
    used: Vec<u64>,
    in_use: u64,
}

impl Slots {
    fn new(max: u32) -> Self {
        Slots {
            next: 1,
            max,
            free: Vec::new(),
            runs: Default::default(),
            cooling: VecDeque::new(),
            used: vec![0; (max as usize).div_ceil(64)],
            in_use: 0,
        }
    }

    fn is_used(&self, i: u32) -> bool {
        self.used[i as usize / 64] & (1 << (i % 64)) != 0
    }

    fn mark(&mut self, start: u32, n: u32, on: bool) {
        for i in start..start + n {
            let w = &mut self.used[i as usize / 64];
            if on {
                *w |= 1 << (i % 64);
            } else {
                *w &= !(1 << (i % 64));
            }
        }
        if on {
            self.in_use += u64::from(n);
        } else {
            self.in_use -= u64::from(n);
        }
    }

    fn warm(&mut self, now: Instant) {
        while let Some((t, start, n)) = self.cooling.front().copied() {
            if now.duration_since(t) < GRACE {
                break;
            }
            self.cooling.pop_front();
            self.mark(start, n, false);
            if n == 1 {
                self.free.push(start);
            } else {
                self.runs[n as usize].push(start);
            }
        }
    }

    fn take(&mut self, n: u32) -> Option<u32> {
        if n == 1 {
            // Entries taken by index since they were freed are skipped.
            while let Some(i) = self.free.pop() {
                if !self.is_used(i) {
                    self.mark(i, 1, true);
                    return Some(i);
                }
            }
        } else if let Some(i) = self.runs[n as usize].pop() {
            self.mark(i, n, true);
            return Some(i);
        }
        loop {
            if self.next + n > self.max {
                return None;
            }
            let i = self.next;
            self.next += 1;
            if (i..i + n).all(|j| !self.is_used(j)) {
                self.next = i + n;
                self.mark(i, n, true);
                return Some(i);
            }
            // Too short a gap before a slot taken by index: free singles.
            if !self.is_used(i) {
                self.free.push(i);
            }
        }
    }

    /// Slot `i` if it is free (not taken, not cooling).
    fn take_at(&mut self, i: u32) -> bool {
        if i == 0 || i >= self.max || self.is_used(i) {
            return false;
        }
        self.mark(i, 1, true);
        true
    }

    /// Slot `at` if given and free, else any single slot.
    fn take_preferring(&mut self, at: Option<u32>) -> Option<u32> {
        match at {
            Some(i) if self.take_at(i) => Some(i),
            _ => self.take(1),
        }
    }

    fn release(&mut self, start: u32, n: u32) {
        if start != 0 && n != 0 {
            self.cooling.push_back((Instant::now(), start, n));
        }
    }

    fn available(&self) -> u64 {
        u64::from(self.max.saturating_sub(1)) - self.in_use
    }
}

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
    cfg: PipelineConfig,
    cap: Capacity,
    ncpus: usize,
    boot_offset_ns: i128,
    /// `urr_state`, mapped into our memory.
    urr_mem: UrrMem,
    /// `qers`, mapped into our memory.
    qer_mem: QerMem,
    /// Where rule sets are: direct slots or the `uplink` / `downlink` hash tables.
    uplink: DirectTable,
    downlink: DirectTable,
}

pub(crate) fn io(e: impl std::fmt::Display) -> FastPathError {
    FastPathError::Io(e.to_string())
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

pub(crate) fn ue_key(a: IpAddr) -> types::ue_key {
    let mut k = types::ue_key::default();
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
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128
}

fn unix_ns() -> i128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0)
}

/// bpf/include/upf_maps.h RS_HOT_*.
const RS_HOT_PDR0: u32 = 0x01;
const RS_HOT_FAR0: u32 = 0x02;

/// The PDR and FAR values an install wrote, by table index: the rule sets copy theirs.
#[derive(Default)]
struct Written {
    pdrs: HashMap<u32, types::pdr>,
    fars: HashMap<u32, types::far>,
}

/// `struct qer` (bpf/include/upf_maps.h) as words: the gates and flags, then these.
const QER_WORDS: usize = 8;
const QER_COST_UL: usize = 1;
const QER_COST_DL: usize = 2;
const QER_TAU_UL: usize = 3;
const QER_TAU_DL: usize = 4;
const QER_TAT_UL: usize = 5;
const QER_TAT_DL: usize = 6;

/// The `qers` table, mapped into upfd's memory: the data path updates the tat words
/// with atomic instructions, so upfd writes the QER one word at a time, atomically.
struct QerMem {
    mem: MapMemory,
    entries: usize,
}

impl QerMem {
    fn qer(&self, i: u32) -> Option<&[AtomicU64; QER_WORDS]> {
        self.mem.words(i as usize, self.entries)
    }
}

/// `struct urr_shared` (bpf/include/upf_maps.h) as upfd sees it in the mapped table.
#[repr(C)]
struct UrrShared {
    quota: AtomicI64,
    threshold: AtomicI64,
    quota_flags: AtomicU32,
    threshold_armed: AtomicU32,
}

/// bpf/include/upf_maps.h URR_Q_VOLUME.
const URR_Q_VOLUME: u32 = 0x01;
const URR_CELL: usize = 64;
const _: () = assert!(std::mem::size_of::<types::urr_counters>() == URR_CELL);
const _: () = assert!(std::mem::size_of::<types::urr_shared>() == URR_CELL);
const _: () = assert!(std::mem::offset_of!(types::urr_shared, threshold_armed) == 20);

/// Cells of `urr_state`: per URR slot, the shared cell and one per possible CPU.
fn urr_cells(cap: Capacity, ncpus: usize) -> Result<u32, FastPathError> {
    let slots = u64::from(cap.qer_urr_slots());
    u32::try_from(slots * (1 + ncpus as u64))
        .map_err(|_| FastPathError::Io("urr_state: too many sessions for this many CPUs".into()))
}

/// A BPF_F_MMAPABLE map's values mapped into our memory, unmapped on drop.
pub(crate) struct MapMemory {
    base: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: plain shared memory; what may be read or written through it, and how, is up to
// its users (UrrMem: atomics only; DirectTable: only what no packet reads).
unsafe impl Send for MapMemory {}
unsafe impl Sync for MapMemory {}

impl MapMemory {
    /// The first `bytes` octets of the values of `m` (named `name` in errors).
    pub(crate) fn map(m: &impl AsFd, bytes: usize, name: &str) -> Result<Self, FastPathError> {
        let page = 4096;
        let len = bytes.div_ceil(page) * page;
        // SAFETY: a fresh shared mapping of the map's fd, unmapped in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                m.as_fd().as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io(format!(
                "mapping {name}: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(MapMemory {
            base: std::ptr::NonNull::new(p.cast()).ok_or_else(|| io("mmap returned null"))?,
            len,
        })
    }

    /// The mapping's start (page aligned).
    pub(crate) fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// Element `i` of `n`, elements of `W` words, as atomics: for tables the data path
    /// updates concurrently, which upfd may only touch a word at a time.
    fn words<const W: usize>(&self, i: usize, n: usize) -> Option<&[AtomicU64; W]> {
        (i < n && (i + 1) * W * 8 <= self.len).then(|| {
            // SAFETY: inside the mapping, 8-octet aligned (the mapping is page aligned),
            // and only ever accessed atomically.
            unsafe { &*self.base().add(i * W * 8).cast() }
        })
    }
}

impl Drop for MapMemory {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, no longer referenced.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// `urr_state` (a BPF_F_MMAPABLE array) mapped into our memory: the data path
/// decrements the shared cells and bumps the counters concurrently, so upfd reads and
/// writes them one word at a time, atomically, never a whole element.
struct UrrMem {
    mem: MapMemory,
    cells: usize,
    stride: usize,
}

impl UrrMem {
    fn map(m: &impl AsFd, cells: usize, stride: usize) -> Result<Self, FastPathError> {
        Ok(UrrMem {
            mem: MapMemory::map(m, cells * URR_CELL, "urr_state")?,
            cells,
            stride,
        })
    }

    fn cell(&self, i: usize) -> Option<&[AtomicU64; URR_CELL / 8]> {
        self.mem.words(i, self.cells)
    }

    fn shared(&self, slot: u32) -> Option<&UrrShared> {
        // SAFETY: UrrShared is the first 24 octets of the cell, atomics over atomics.
        self.cell(slot as usize * self.stride)
            .map(|c| unsafe { &*(c as *const [AtomicU64; URR_CELL / 8]).cast() })
    }

    fn counters(&self, slot: u32, cpu: usize) -> Option<&[AtomicU64; URR_CELL / 8]> {
        self.cell(slot as usize * self.stride + 1 + cpu)
    }

    /// A slot's cells to zero, before a new URR uses it.
    fn clear(&self, slot: u32) {
        for k in 0..self.stride {
            if let Some(c) = self.cell(slot as usize * self.stride + k) {
                c.iter().for_each(|w| w.store(0, Ordering::Relaxed));
            }
        }
    }
}

impl Datapath {
    /// Open and load the programs with tables sized for `cap`. Needs CAP_BPF.
    pub fn load(cap: Capacity, cfg: PipelineConfig) -> Result<Self, FastPathError> {
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
        let skel = open.load().map_err(io)?;
        let urr_mem = UrrMem::map(&skel.maps.urr_state, urr_cells as usize, 1 + ncpus)?;
        let qer_entries = cap.qer_urr_slots() as usize;
        let qer_mem = QerMem {
            mem: MapMemory::map(&skel.maps.qers, qer_entries * QER_WORDS * 8, "qers")?,
            entries: qer_entries,
        };
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
            cfg: PipelineConfig::default(),
            cap,
            ncpus,
            boot_offset_ns: unix_ns() - mono_ns(),
            urr_mem,
            qer_mem,
            uplink,
            downlink,
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
        let now = Instant::now();
        self.uplink.settle(&self.skel.maps, now);
        self.downlink.settle(&self.skel.maps, now);
    }

    /// Write the data path's configuration: local addresses, the interfaces traffic
    /// leaves by, configured neighbours (then the kernel FIB is not used), slow-path
    /// budget.
    pub fn configure(
        &mut self,
        cfg: PipelineConfig,
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
            urr_stride: self.urr_mem.stride as u32,
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
        let (mut n4, mut n6) = (0, 0);
        for a in &cfg.local {
            match a {
                IpAddr::V4(x) if n4 < c.local_v4.len() => {
                    c.local_v4[n4] = u32::from_ne_bytes(x.octets());
                    n4 += 1;
                }
                IpAddr::V6(x) if n6 < c.local_v6.len() => {
                    c.local_v6[n6] = x.octets();
                    n6 += 1;
                }
                _ => {}
            }
        }
        if !cfg.neigh.is_empty() {
            c.flags |= 1; // CFG_F_STATIC_NEIGH
        }
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
        Ok(())
    }

    /// Write QER `idx` through the mapping, one word at a time (packets update its
    /// tat words meanwhile). A fresh QER starts idle; an updated one keeps its state.
    fn write_qer(&self, idx: u32, q: &upf::rules::Qer, fresh: bool) -> Result<(), FastPathError> {
        let w = self
            .qer_mem
            .qer(idx)
            .ok_or_else(|| io(format!("QER index {idx} outside the table")))?;
        let mut flags = 0u8;
        if q.rqi {
            flags |= 0x04;
        }
        let ppi = match q.ppi {
            Some(p) => {
                flags |= 0x08;
                p & 0x07
            }
            None => 0,
        };
        let (cost_ul, tau_ul, cost_dl, tau_dl) = match q.mbr {
            Some(m) => {
                flags |= 0x01 | 0x02;
                let (cu, tu) = qer_gcra(m.ul_kbps);
                let (cd, td) = qer_gcra(m.dl_kbps);
                (cu, tu, cd, td)
            }
            None => (0, 0, 0, 0),
        };
        if fresh {
            w[QER_TAT_UL].store(0, Ordering::Relaxed);
            w[QER_TAT_DL].store(0, Ordering::Relaxed);
        }
        w[QER_COST_UL].store(cost_ul, Ordering::Relaxed);
        w[QER_COST_DL].store(cost_dl, Ordering::Relaxed);
        w[QER_TAU_UL].store(tau_ul, Ordering::Relaxed);
        w[QER_TAU_DL].store(tau_dl, Ordering::Relaxed);
        // gate_ul, gate_dl, qfi, flags, ppi: the first word, in memory order.
        let head = [
            q.gate_ul_open as u8,
            q.gate_dl_open as u8,
            q.qfi.unwrap_or(0xff),
            flags,
            ppi,
            0,
            0,
            0,
        ];
        // Release: the rates are in place before the flags that switch them on.
        w[0].store(u64::from_ne_bytes(head), Ordering::Release);
        Ok(())
    }

    /// `struct far` for a FAR.
    fn far_value(&self, f: &upf::rules::Far) -> types::far {
        let mut v = types::far {
            id: f.id,
            ..Default::default()
        };
        let a = &f.action;
        v.action = (a.drop as u8) | (a.forw as u8) << 1 | (a.buff as u8) << 2 | (a.nocp as u8) << 3;
        if let Some(fw) = &f.forwarding {
            v.dest = fw.destination_interface;
            if let Some(t) = fw.transport_level_marking {
                v.flags |= 0x01;
                v.tos = (t >> 8) as u8;
            }
            if let Some(o) = &fw.outer_header_creation {
                // Never "no outer header": a tunnel we cannot build drops, counted.
                v.ohc = OHC_UNSUPPORTED;
                if let Some(t) = tunnel(&self.cfg, fw.destination_interface, o) {
                    match (t.peer, t.src) {
                        (IpAddr::V4(p), IpAddr::V4(s)) => {
                            v.ohc = OHC_GTPU_V4;
                            v.peer[..4].copy_from_slice(&p.octets());
                            v.src[..4].copy_from_slice(&s.octets());
                        }
                        (IpAddr::V6(p), IpAddr::V6(s)) => {
                            v.ohc = OHC_GTPU_V6;
                            v.peer = p.octets();
                            v.src = s.octets();
                        }
                        _ => {}
                    }
                    v.teid = t.teid;
                    v.port = t.port;
                }
            }
        }
        v
    }

    /// A key's value: its PDRs by index, with the first PDR and its FAR copied in
    /// (`written`: the values just written to the pdrs and fars tables, by index).
    fn rule_set_value(
        s: &Session,
        rs: &upf::fastpath::pipeline::RuleSet,
        pdr_index: &HashMap<u16, u32>,
        written: &Written,
    ) -> types::rule_set {
        let mut v = types::rule_set {
            seid: s.up_seid,
            n_pdrs: rs.pdrs.len() as u8,
            uplink: rs.uplink as u8,
            ..Default::default()
        };
        for (i, p) in rs.pdrs.iter().enumerate() {
            v.pdr[i] = pdr_index.get(&p.id).copied().unwrap_or(0);
        }
        if let Some(p) = written.pdrs.get(&v.pdr[0]).filter(|_| v.pdr[0] != 0) {
            v.pdr0 = *p;
            v.hot |= RS_HOT_PDR0;
            if let Some(f) = written.fars.get(&p.far).filter(|_| p.far != 0) {
                v.far0 = *f;
                v.hot |= RS_HOT_FAR0;
            }
        }
        let (v4, v6) = session_ue(s);
        if let Some(a) = v4 {
            v.has_ue_v4 = 1;
            v.ue_v4 = u32::from_ne_bytes(a.octets());
        }
        if let Some((a, l)) = v6 {
            v.ue_v6 = a.octets();
            v.ue_v6_len = l.max(1);
        }
        v
    }

    /// The start of a block holding `entries` (whose octets are `content`): a shared one
    /// with the same content (one more PDR using it), else a new one written to the sdfs
    /// table. Blocks never change once written, so sharing one is safe while packets
    /// read it.
    fn sdf_block(
        &mut self,
        entries: &[upf::sdf::SdfMatch],
        content: Vec<u8>,
    ) -> Result<u32, FastPathError> {
        if let Some(&start) = self.sdf_blocks.get(&content) {
            if let Some(r) = self.sdf_refs.get_mut(&start) {
                r.0 += 1;
            }
            return Ok(start);
        }
        let n = entries.len() as u32;
        let start = self.sdf_slots.take(n).ok_or(FastPathError::Full("sdfs"))?;
        for (j, e) in entries.iter().enumerate() {
            let m: types::sdf_match = from_bytes(bytes(e));
            if let Err(e) = self.skel.maps.sdfs.update(
                &(start + j as u32).to_ne_bytes(),
                bytes(&m),
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
        self.write_nh((self.nh_gen << 1) | u32::from(self.nh_by_destination))
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

    /// The direct slot a packet of the session's first key is looked up in: its
    /// TEID's, else its UE IPv4 address's.
    fn home_slot(&self, k: &upf::fastpath::model::Keys) -> Option<u32> {
        if let Some((t, _)) = k.teids.first() {
            return self.cap.teid_index.slot(*t);
        }
        k.ue_ips.iter().find_map(|(a, _)| match a {
            IpAddr::V4(a) if self.cap.ue_slots > 0 => Some(u32::from(*a) % self.cap.ue_slots),
            _ => None,
        })
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

    /// Sum a URR's per-CPU counters.
    fn read_urr(&self, idx: u32) -> Usage {
        let mut u = Usage::default();
        let (mut first, mut last) = (u64::MAX, 0u64);
        for cpu in 0..self.ncpus {
            let Some(c) = self.urr_mem.counters(idx, cpu) else {
                return Usage::default();
            };
            let w = |i: usize| c[i].load(Ordering::Relaxed);
            u.ul_packets += w(0);
            u.ul_bytes += w(1);
            u.dl_packets += w(2);
            u.dl_bytes += w(3);
            if w(4) != 0 {
                first = first.min(w(4));
            }
            last = last.max(w(5));
        }
        let to_unix = |ns: u64| ((ns as i128 + self.boot_offset_ns) / 1_000_000_000) as u64;
        if first != u64::MAX {
            u.first_packet = Some(to_unix(first));
            u.last_packet = Some(to_unix(last));
        }
        u
    }

    /// The data path's counters by index (drop reasons, then `Stat`), summed over CPUs.
    pub fn stats(&self) -> Vec<(u64, u64)> {
        (0..STAT_MAX as u32)
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
                    let s: types::stat = from_bytes(x);
                    (p + s.packets, b + s.bytes)
                })
            })
            .collect()
    }

    /// Set the volume quota a URR may still use (None: no quota).
    pub fn write_quota(
        &self,
        seid: u64,
        urr_id: u32,
        remaining: Option<i64>,
    ) -> Result<(), FastPathError> {
        let c = self.urr_shared(seid, urr_id)?;
        // The amount before the flag that makes the data path read it; the flag first
        // when disarming. NOTIFIED is cleared: a new quota may run out again.
        match remaining {
            Some(r) => {
                c.quota.store(r, Ordering::SeqCst);
                c.quota_flags.store(URR_Q_VOLUME, Ordering::SeqCst);
            }
            None => {
                c.quota_flags.store(0, Ordering::SeqCst);
                c.quota.store(0, Ordering::SeqCst);
            }
        }
        Ok(())
    }

    /// The cell of a session's URR that every CPU shares.
    fn urr_shared(&self, seid: u64, urr_id: u32) -> Result<&UrrShared, FastPathError> {
        let Some(idx) = self
            .sessions
            .get(&seid)
            .and_then(|s| s.urrs.get(&urr_id))
            .copied()
        else {
            return Err(FastPathError::Io(format!(
                "no URR {urr_id} in session {seid:#x}"
            )));
        };
        self.urr_mem
            .shared(idx)
            .ok_or_else(|| FastPathError::Io(format!("URR slot {idx} out of range")))
    }

    /// Arm (Some: octets left) or disarm (None) a URR's volume threshold: the data path
    /// raises EV_THRESHOLD on the packet that uses it up.
    pub fn write_threshold(
        &self,
        seid: u64,
        urr_id: u32,
        remaining: Option<i64>,
    ) -> Result<(), FastPathError> {
        let c = self.urr_shared(seid, urr_id)?;
        match remaining {
            Some(r) => {
                c.threshold.store(r, Ordering::SeqCst);
                c.threshold_armed.store(1, Ordering::SeqCst);
            }
            None => {
                c.threshold_armed.store(0, Ordering::SeqCst);
                c.threshold.store(0, Ordering::SeqCst);
            }
        }
        Ok(())
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

impl FastPath for Datapath {
    fn install(&mut self, old: Option<&Session>, new: &Arc<Session>) -> Result<(), FastPathError> {
        let now = Instant::now();
        for s in [
            &mut self.pdr_slots,
            &mut self.far_slots,
            &mut self.qer_slots,
            &mut self.urr_slots,
            &mut self.sdf_slots,
        ] {
            s.warm(now);
        }
        self.settle();
        let seid = new.up_seid;
        let prev = match old {
            Some(_) => self.sessions.get(&seid).cloned().unwrap_or_default(),
            None => Box::default(),
        };
        let k = keys(new);
        // Keys must be free or ours; tables must have room.
        let maps = &self.skel.maps;
        for (t, pdr) in &k.teids {
            if let Some(rs) = self.uplink.get(maps, *t) {
                if rs.seid != seid {
                    return Err(FastPathError::Conflict {
                        pdr_id: *pdr,
                        why: format!("TEID {t:#x} is already installed for another session"),
                    });
                }
            }
        }
        for (a, pdr) in &k.ue_ips {
            let installed = match a {
                IpAddr::V4(x) => self.downlink.get(maps, ue_v4_key(*x)),
                IpAddr::V6(_) => maps
                    .downlink
                    .lookup(bytes(&ue_key(*a)), MapFlags::ANY)
                    .ok()
                    .flatten()
                    .map(|v| from_bytes::<types::rule_set>(&v)),
            };
            if let Some(rs) = installed {
                if rs.seid != seid {
                    return Err(FastPathError::Conflict {
                        pdr_id: *pdr,
                        why: format!("UE address {a} is already installed for another session"),
                    });
                }
            }
        }
        // Each PDR's SDF filters, compiled; the blocks not yet in the table must fit.
        let mut compiled = HashMap::new();
        let mut new_sdf_entries = 0u64;
        let mut new_blocks = std::collections::HashSet::new();
        for p in new.pdrs.values() {
            let mut entries = Vec::new();
            for f in &new.effective_pdi(p).sdf_filters {
                let rule = upf::sdf::SdfRule::from_ie(f).map_err(io)?;
                entries.extend(rule.compile().map_err(io)?);
            }
            let content: Vec<u8> = entries.iter().flat_map(|e| bytes(e).to_vec()).collect();
            if !entries.is_empty()
                && !self.sdf_blocks.contains_key(&content)
                && new_blocks.insert(content.clone())
            {
                new_sdf_entries += entries.len() as u64;
            }
            compiled.insert(p.id, (entries, content));
        }
        if self.pdr_slots.available() < new.pdrs.len() as u64
            || self.far_slots.available() < new.fars.len() as u64
            || self.qer_slots.available() < new.qers.len() as u64
            || self.urr_slots.available() < new.urrs.len() as u64
        {
            return Err(FastPathError::Full("rules"));
        }
        if self.sdf_slots.available() < new_sdf_entries {
            return Err(FastPathError::Full("sdfs"));
        }
        let mut inst = Box::<Installed>::default();
        // Each key's PDRs. Its first PDR (and that PDR's FAR) travel in the key's value;
        // only PDRs found after the first of some key, and their FARs, are read from
        // the pdrs and fars tables, so only they are written there (two to four
        // syscalls fewer for a typical session).
        let sets: Vec<_> = k
            .teids
            .iter()
            .map(|(t, _)| rule_set(new, Some(*t), None))
            .chain(k.ue_ips.iter().map(|(a, _)| rule_set(new, None, Some(*a))))
            .chain(
                k.framed_routes
                    .iter()
                    .map(|r| rule_set(new, None, Some(r.network()))),
            )
            .collect();
        // The QER and URR a packet of the session's first key meets first go to the
        // index the data path computes from the key (its direct slot + 1), if free: it
        // loads them while it loads the slot instead of after (bpf/include/direct.h).
        let home = self.home_slot(&k).map(|s| s + 1);
        let first = sets.first().and_then(|rs| rs.pdrs.first());
        let home_qer = first.and_then(|p| p.qer_ids.first().copied());
        let home_urr = first.and_then(|p| p.urr_ids.first().copied());
        // QERs and URRs keep their slots (and state) across modifications.
        for q in new.qers.values() {
            let (idx, fresh) = match prev.qers.get(&q.id) {
                Some(i) => (*i, false),
                None => (
                    self.qer_slots
                        .take_preferring(home.filter(|_| home_qer == Some(q.id)))
                        .ok_or(FastPathError::Full("qers"))?,
                    true,
                ),
            };
            self.write_qer(idx, q, fresh)?;
            inst.qers.insert(q.id, idx);
        }
        for u in new.urrs.values() {
            let idx = match prev.urrs.get(&u.id) {
                Some(i) => *i,
                None => {
                    let i = self
                        .urr_slots
                        .take_preferring(home.filter(|_| home_urr == Some(u.id)))
                        .ok_or(FastPathError::Full("urrs"))?;
                    self.urr_mem.clear(i);
                    i
                }
            };
            inst.urrs.insert(u.id, idx);
        }
        let in_tables: std::collections::HashSet<u16> = sets
            .iter()
            .flat_map(|rs| rs.pdrs.iter().skip(1).map(|p| p.id))
            .collect();
        let far_in_tables: std::collections::HashSet<u32> = new
            .pdrs
            .values()
            .filter(|p| in_tables.contains(&p.id))
            .filter_map(|p| p.far_id)
            .collect();
        let mut far_index = HashMap::new();
        let mut written = Written::default();
        for f in new.fars.values() {
            let idx = self.far_slots.take(1).ok_or(FastPathError::Full("fars"))?;
            let v = self.far_value(f);
            if far_in_tables.contains(&f.id) {
                self.skel
                    .maps
                    .fars
                    .update(&idx.to_ne_bytes(), bytes(&v), MapFlags::ANY)
                    .map_err(io)?;
            }
            written.fars.insert(idx, v);
            inst.fars.push(idx);
            far_index.insert(f.id, idx);
        }
        let mut pdr_index = HashMap::new();
        for p in new.pdrs.values() {
            let pdi = new.effective_pdi(p);
            let (entries, content) = compiled.remove(&p.id).unwrap_or_default();
            let mut v = types::pdr {
                id: p.id as u32,
                far: p
                    .far_id
                    .and_then(|f| far_index.get(&f))
                    .copied()
                    .unwrap_or(0),
                qfi: pdi.qfis.first().copied().unwrap_or(0xff),
                ohr: p
                    .outer_header_removal
                    .map(|o| o.description)
                    .unwrap_or(0xff),
                ohr_ext: p
                    .outer_header_removal
                    .and_then(|o| o.ext_header_deletion)
                    .unwrap_or(0),
                ..Default::default()
            };
            for (i, q) in p.qer_ids.iter().take(v.qer.len()).enumerate() {
                v.qer[i] = inst.qers.get(q).copied().unwrap_or(0);
            }
            for (i, u) in p.urr_ids.iter().take(v.urr.len()).enumerate() {
                v.urr[i] = inst.urrs.get(u).copied().unwrap_or(0);
            }
            if !entries.is_empty() {
                let n = entries.len() as u32;
                let start = self.sdf_block(&entries, content)?;
                inst.sdfs.push((start, n));
                v.sdf = start;
                v.n_sdf = n as u8;
            }
            let idx = self.pdr_slots.take(1).ok_or(FastPathError::Full("pdrs"))?;
            if in_tables.contains(&p.id) {
                self.skel
                    .maps
                    .pdrs
                    .update(&idx.to_ne_bytes(), bytes(&v), MapFlags::ANY)
                    .map_err(io)?;
            }
            written.pdrs.insert(idx, v);
            inst.pdrs.push(idx);
            pdr_index.insert(p.id, idx);
        }
        // Keys last: each switches to the new rules at once.
        let maps = &self.skel.maps;
        let mut sets = sets.iter();
        for (t, _) in &k.teids {
            let rs = sets.next().expect("one rule set per key");
            let v = Self::rule_set_value(new, rs, &pdr_index, &written);
            self.uplink.put(maps, *t, &v, now)?;
            inst.teids.push(*t);
        }
        for (a, _) in &k.ue_ips {
            let rs = sets.next().expect("one rule set per key");
            let v = Self::rule_set_value(new, rs, &pdr_index, &written);
            let key = ue_key(*a);
            match a {
                IpAddr::V4(x) => self.downlink.put(maps, ue_v4_key(*x), &v, now)?,
                IpAddr::V6(_) => maps
                    .downlink
                    .update(bytes(&key), bytes(&v), MapFlags::ANY)
                    .map_err(io)?,
            }
            inst.ues.push(key);
        }
        for r in &k.framed_routes {
            let rs = sets.next().expect("one rule set per key");
            let v = Self::rule_set_value(new, rs, &pdr_index, &written);
            let key = lpm_key(r);
            maps.framed
                .update(bytes(&key), bytes(&v), MapFlags::ANY)
                .map_err(io)?;
            inst.framed.push(key);
        }
        // Keys the new version no longer has.
        for t in &prev.teids {
            if !inst.teids.contains(t) {
                self.uplink.delete(maps, *t, now);
            }
        }
        for kk in &prev.ues {
            if !inst.ues.iter().any(|x| bytes(x) == bytes(kk)) {
                delete_ue(&mut self.downlink, maps, kk, now);
            }
        }
        for kk in &prev.framed {
            if !inst.framed.iter().any(|x| bytes(x) == bytes(kk)) {
                let _ = maps.framed.delete(bytes(kk));
            }
        }
        let (kq, ku) = (inst.qers.clone(), inst.urrs.clone());
        self.release(&prev, &kq, &ku);
        self.sessions.insert(seid, inst);
        Ok(())
    }

    fn remove(&mut self, session: &Session) {
        let Some(inst) = self.sessions.remove(&session.up_seid) else {
            return;
        };
        let maps = &self.skel.maps;
        let now = Instant::now();
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

    fn usage(&self, seid: u64, urr_id: u32) -> Usage {
        match self.sessions.get(&seid).and_then(|s| s.urrs.get(&urr_id)) {
            Some(idx) => self.read_urr(*idx),
            None => Usage::default(),
        }
    }

    fn reset_usage(&mut self, seid: u64, urr_id: u32) {
        if let Some(idx) = self
            .sessions
            .get(&seid)
            .and_then(|s| s.urrs.get(&urr_id))
            .copied()
        {
            for cpu in 0..self.ncpus {
                if let Some(c) = self.urr_mem.counters(idx, cpu) {
                    c.iter().for_each(|w| w.store(0, Ordering::Relaxed));
                }
            }
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
    /// program forwards (BPF_PROG_RUN with live frames): how buffered packets are
    /// released, in order, once their FAR forwards. Returns the XDP action.
    pub fn inject(&self, role: Role, ifindex: u32, frame: &[u8]) -> Result<u32, FastPathError> {
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

/// An event record from the data path (bpf/include/upf_maps.h `struct event`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub kind: u32,
    pub seid: u64,
    pub far_id: u32,
    pub pdr_id: u32,
    pub urr: u32,
    pub nocp: bool,
    pub ts_ns: u64,
    pub packet: Vec<u8>,
}

/// EV_BUFFER, EV_QUOTA and EV_THRESHOLD (bpf/include/upf_maps.h).
pub const EV_BUFFER: u32 = 1;
pub const EV_QUOTA: u32 = 2;
pub const EV_THRESHOLD: u32 = 3;

impl Event {
    pub fn parse(b: &[u8]) -> Option<Event> {
        let h = std::mem::size_of::<types::event>();
        if b.len() < h {
            return None;
        }
        let e: types::event = from_bytes(&b[..h]);
        let len = (e.len as usize).min(b.len() - h);
        Some(Event {
            kind: e.r#type,
            seid: e.seid,
            far_id: e.far_id,
            pdr_id: e.pdr_id,
            urr: e.urr,
            nocp: e.nocp != 0,
            ts_ns: e.ts_ns,
            packet: b[h..h + len].to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_taken_by_index_are_never_handed_out_twice() {
        let mut s = Slots::new(10);
        assert_eq!(s.available(), 9);
        assert!(s.take_at(3));
        assert!(!s.take_at(3), "taken");
        assert!(
            !s.take_at(0) && !s.take_at(10),
            "0 and past the end are never slots"
        );
        // The sequential ones step over slot 3.
        let seq: Vec<u32> = (0..8).map(|_| s.take(1).unwrap()).collect();
        assert_eq!(seq, [1, 2, 4, 5, 6, 7, 8, 9]);
        assert_eq!(s.take(1), None);
        assert_eq!(s.available(), 0);
        // Released slots cool before they are free, by index or from the list.
        s.release(5, 1);
        assert!(!s.take_at(5));
        s.warm(Instant::now() + GRACE);
        assert_eq!(s.available(), 1);
        assert!(s.take_at(5), "free again");
        // The free list still names 5: it is skipped, not handed out a second time.
        assert_eq!(s.take(1), None);
        s.release(5, 1);
        s.warm(Instant::now() + GRACE);
        assert_eq!(s.take(1), Some(5));
        assert_eq!(s.take(1), None);
    }

    #[test]
    fn runs_step_over_slots_taken_by_index() {
        let mut s = Slots::new(20);
        assert!(s.take_at(3));
        assert_eq!(s.take(4), Some(4));
        assert_eq!(s.take(2), Some(8));
        assert_eq!(s.available(), 19 - 7);
        // The gap it stepped over is not lost: single slots.
        assert_eq!(s.take(1), Some(2));
        assert_eq!(s.take(1), Some(1));
        assert_eq!(s.take(1), Some(10));
    }
}
