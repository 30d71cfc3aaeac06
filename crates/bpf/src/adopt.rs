//! Application detection's learned state carried across a restart (docs/architecture.md,
//! "Who owns which state"): the classified flows (`app_flows`), the addresses learned
//! from DNS answers (`app_addrs`) and, if the programs have them, the sessions' flow
//! stamps (`app_stamps`) of the data path that ran before are copied into the new one's:
//! once before the new programs replace the old ones ([`OldApps::copy`]), and once after
//! for what the old programs entered or refreshed in between ([`OldApps::copy_again`]).
//! Without them a flow classified by its first packets (a ClientHello's SNI, an HTTP
//! request's Host: not sent again) would meet the default PDR after a restart.
//!
//! The old tables are found from the old URR table, whose kernel map ID upfd's state
//! keeps ([`upf::state::CounterTable`], as [`crate::datapath::OldCounters`] reads it):
//! the loaded programs that use it, and those that share a table with them (the stages),
//! are the old data path's, and their maps of these names are its tables. They are held
//! open from then on, so they outlive the swap that unloads the old programs. The
//! entries are plain values (coarse-clock times and application indices, which the PFD
//! table in the state keeps): copied as they are. A table whose type, key or value size
//! differs from this build's (an upfd of another layout ran before) is not copied, and
//! said so. The new data path's tables are found the same way where it does not name
//! them (`app_stamps`).
//!
//! Each copy reads every old entry once (batched lookups; key by key where the kernel
//! has no batches), so it is O(entries) and ends: an LRU table is at most its
//! `max_entries`. The second copy writes only entries that changed since the first
//! (an 8-octet hash of each entry's key and value is remembered), and not over one the
//! new programs wrote themselves since: theirs is newer.

use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};

use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType};

use crate::datapath::Datapath;

/// The tables carried, by their names in bpf/include/upf_maps.h.
const TABLES: [&str; 3] = ["app_flows", "app_addrs", "app_stamps"];

/// Entries per batched lookup or update.
const BATCH: u32 = 4096;

/// The old data path's application detection tables, open.
pub struct OldApps {
    tables: Vec<OldTable>,
    /// Why a table is not carried.
    skipped: Vec<String>,
    /// Whether the first copy was made (the layouts checked).
    copied: bool,
    hasher: RandomState,
}

struct OldTable {
    name: &'static str,
    map: MapHandle,
    /// After the first copy: hash of each key copied -> hash of its value.
    copied: HashMap<u64, u64>,
    /// For an array (`app_stamps`): the values copied, by index, for the merge.
    values: Vec<Vec<u8>>,
}

/// What one copy carried.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Carried {
    /// `app_flows` entries written.
    pub flows: usize,
    /// `app_addrs` entries written.
    pub addrs: usize,
    /// `app_stamps` entries (64 stamps each) written, all-zero ones not counted.
    pub stamps: usize,
    /// Tables not carried, and why (said by the first copy only).
    pub skipped: Vec<String>,
}

impl Carried {
    fn add(&mut self, name: &str, n: usize) {
        match name {
            "app_flows" => self.flows += n,
            "app_addrs" => self.addrs += n,
            _ => self.stamps += n,
        }
    }
}

impl OldApps {
    /// Open the application tables of the data path whose URR table (`sess_pages`) has
    /// kernel map ID `urr_map_id`: those of its programs ([`data_path_maps`]). An
    /// error if no loaded program uses it (the old data path is gone). A data path
    /// without some of the tables (an upfd before application detection) gives the
    /// others, the missing ones said in [`Carried::skipped`].
    pub fn find(urr_map_id: u32) -> Result<OldApps, String> {
        let ids: Vec<u32> = data_path_maps(urr_map_id)
            .into_iter()
            .filter(|id| *id != urr_map_id)
            .collect();
        if ids.is_empty() {
            return Err(format!(
                "no loaded program uses map {urr_map_id} (the previous URR table)"
            ));
        }
        let mut found: Vec<OldTable> = Vec::new();
        for id in ids {
            // A map freed meanwhile is not one of ours any more.
            let Ok(map) = MapHandle::from_map_id(id) else {
                continue;
            };
            let Some(name) = TABLES
                .iter()
                .find(|n| map.name().to_str() == Some(**n))
                .copied()
            else {
                continue;
            };
            if found.iter().any(|t| t.name == name) {
                return Err(format!(
                    "the programs using map {urr_map_id} have two maps named {name}"
                ));
            }
            found.push(OldTable {
                name,
                map,
                copied: HashMap::new(),
                values: Vec::new(),
            });
        }
        let skipped = TABLES
            .iter()
            .filter(|n| !found.iter().any(|t| t.name == **n))
            .map(|n| format!("{n}: the previous data path has none"))
            .collect();
        Ok(OldApps {
            tables: found,
            skipped,
            copied: false,
            hasher: RandomState::new(),
        })
    }

    /// Names of the tables that will be copied.
    pub fn tables(&self) -> Vec<&'static str> {
        self.tables.iter().map(|t| t.name).collect()
    }

    /// The first copy, before `dp`'s programs replace the old ones: every old entry
    /// into `dp`'s table (which it overwrites; `dp` has made none yet). Tables whose
    /// layout differs from `dp`'s are dropped here, and said.
    pub fn copy(&mut self, dp: &Datapath) -> Carried {
        let mut carried = Carried::default();
        if !self.copied {
            self.copied = true;
            self.check_layouts(dp);
            carried.skipped = self.skipped.clone();
        }
        let ours = new_tables(dp);
        let hasher = &self.hasher;
        for t in &mut self.tables {
            let Some(new) = ours.get(t.name) else {
                continue;
            };
            let array = t.map.map_type() == MapType::Array;
            t.copied.clear();
            let mut out = Batch::new(new);
            each_entry(&t.map, |k, v| {
                t.copied.insert(hasher.hash_one(k), hasher.hash_one(v));
                if array {
                    let i = index(k);
                    if t.values.len() <= i {
                        t.values.resize(i + 1, Vec::new());
                    }
                    t.values[i] = v.to_vec();
                    // The new array is all zeros (stamps never written).
                    if v.iter().all(|b| *b == 0) {
                        return;
                    }
                }
                out.push(k, v);
            });
            carried.add(t.name, out.finish());
        }
        carried
    }

    /// The second copy, after the swap (no packet in the old programs any more): the
    /// old entries made or changed since [`OldApps::copy`], unless `dp`'s programs
    /// wrote the entry themselves since (theirs is newer). For stamps, per stamp.
    pub fn copy_again(&mut self, dp: &Datapath) -> Carried {
        let mut carried = Carried::default();
        let ours = new_tables(dp);
        let hasher = &self.hasher;
        for t in &mut self.tables {
            let Some(new) = ours.get(t.name) else {
                continue;
            };
            let array = t.map.map_type() == MapType::Array;
            let mut n = 0;
            each_entry(&t.map, |k, v| {
                let kh = hasher.hash_one(k);
                let vh = hasher.hash_one(v);
                let before = t.copied.get(&kh).copied();
                if before == Some(vh) {
                    return;
                }
                let now = new.lookup(k, MapFlags::ANY).ok().flatten();
                let write = if array {
                    let first = t.values.get(index(k)).filter(|f| f.len() == v.len());
                    match (now, first) {
                        // Each stamp the new programs did not change since: the old one's.
                        (Some(now), Some(first)) if now.len() == v.len() => {
                            let merged: Vec<u8> = (0..v.len())
                                .map(|i| if now[i] == first[i] { v[i] } else { now[i] })
                                .collect();
                            (merged != now).then_some(merged)
                        }
                        _ => Some(v.to_vec()),
                    }
                } else {
                    match now {
                        None => Some(v.to_vec()),
                        Some(now) if before == Some(hasher.hash_one(&now[..])) => Some(v.to_vec()),
                        // Made or refreshed by the new programs: newer.
                        Some(_) => None,
                    }
                };
                if let Some(w) = write {
                    if new.update(k, &w, MapFlags::ANY).is_ok() {
                        n += 1;
                    }
                }
            });
            carried.add(t.name, n);
        }
        carried
    }

    /// Drop the tables `dp` has not, or has with another type or key or value size.
    fn check_layouts(&mut self, dp: &Datapath) {
        let new_tabs = new_tables(dp);
        let skipped = &mut self.skipped;
        self.tables.retain(|t| {
            let Some(new) = new_tabs.get(t.name) else {
                skipped.push(format!("{}: this data path has none", t.name));
                return false;
            };
            let old = (t.map.map_type(), t.map.key_size(), t.map.value_size());
            let ours = (new.map_type(), new.key_size(), new.value_size());
            if old != ours {
                skipped.push(format!(
                    "{}: the previous data path's is {:?} with {}-octet keys and {}-octet values, ours {:?} with {} and {} (another build's layout)",
                    t.name, old.0, old.1, old.2, ours.0, ours.1, ours.2
                ));
                return false;
            }
            true
        });
    }
}

/// `dp`'s tables of [`TABLES`], open: by name where `dp` keeps them, else among the
/// maps of its programs (found from its `sess_pages` as the old ones are).
fn new_tables(dp: &Datapath) -> HashMap<&'static str, MapHandle> {
    let mut t: HashMap<&'static str, MapHandle> = HashMap::new();
    for name in TABLES {
        if let Some(m) = dp.map_named(name).and_then(|m| MapHandle::try_from(m).ok()) {
            t.insert(name, m);
        }
    }
    if t.len() < TABLES.len() {
        let seed = dp.counter_table().map(|c| c.map_id).unwrap_or(0);
        for id in data_path_maps(seed) {
            let Ok(m) = MapHandle::from_map_id(id) else {
                continue;
            };
            if let Some(name) = TABLES.iter().find(|n| m.name().to_str() == Some(**n)) {
                t.entry(name).or_insert(m);
            }
        }
    }
    t
}

/// The kernel IDs of the maps of one data path, `seed` one of them: the maps of the
/// loaded programs that use `seed`, then of those that share a map with these, until
/// none is added (the stages that read the application tables share only their scratch
/// table with the entry programs; datapath/reuse.rs finds them so too). Empty if no
/// loaded program uses `seed`. Data paths share no maps, so none of another is taken.
fn data_path_maps(seed: u32) -> Vec<u32> {
    let opts = libbpf_rs::query::ProgInfoQueryOptions::default().include_map_ids(true);
    let progs: Vec<Vec<u32>> = libbpf_rs::query::ProgInfoIter::with_query_opts(opts)
        .map(|p| p.map_ids)
        .collect();
    let mut ids: Vec<u32> = vec![seed];
    let mut taken = vec![false; progs.len()];
    loop {
        let before = ids.len();
        for (i, maps) in progs.iter().enumerate() {
            if !taken[i] && maps.iter().any(|m| ids.contains(m)) {
                taken[i] = true;
                for m in maps {
                    if !ids.contains(m) {
                        ids.push(*m);
                    }
                }
            }
        }
        if ids.len() == before {
            break;
        }
    }
    if !taken.contains(&true) {
        return Vec::new();
    }
    ids
}

/// An array's index from its 4-octet key.
fn index(k: &[u8]) -> usize {
    k.get(..4)
        .and_then(|b| b.try_into().ok())
        .map_or(usize::MAX, |b| u32::from_ne_bytes(b) as usize)
}

/// Every entry of `map` once, read in batches; key by key if the kernel reads none in
/// batches (at most `max_entries` keys: iterating keys of a table being changed may
/// start over).
fn each_entry(map: &MapHandle, mut f: impl FnMut(&[u8], &[u8])) {
    let mut any = false;
    if let Ok(it) = map.lookup_batch(BATCH, MapFlags::ANY, MapFlags::ANY) {
        for (k, v) in it {
            any = true;
            f(&k, &v);
        }
    }
    if any {
        return;
    }
    for k in map.keys().take(map.max_entries() as usize) {
        if let Ok(Some(v)) = map.lookup(&k, MapFlags::ANY) {
            f(&k, &v);
        }
    }
}

/// Entries written to a map in batches (one by one if a batch is refused).
struct Batch<'a> {
    map: &'a MapHandle,
    keys: Vec<u8>,
    values: Vec<u8>,
    n: u32,
    written: usize,
}

impl<'a> Batch<'a> {
    fn new(map: &'a MapHandle) -> Self {
        Batch {
            map,
            keys: Vec::new(),
            values: Vec::new(),
            n: 0,
            written: 0,
        }
    }

    fn push(&mut self, k: &[u8], v: &[u8]) {
        self.keys.extend_from_slice(k);
        self.values.extend_from_slice(v);
        self.n += 1;
        if self.n == BATCH {
            self.flush();
        }
    }

    fn flush(&mut self) {
        if self.n == 0 {
            return;
        }
        let m = self.map;
        if m.update_batch(
            &self.keys,
            &self.values,
            self.n,
            MapFlags::ANY,
            MapFlags::ANY,
        )
        .is_ok()
        {
            self.written += self.n as usize;
        } else {
            let (ks, vs) = (m.key_size() as usize, m.value_size() as usize);
            for (k, v) in self.keys.chunks(ks).zip(self.values.chunks(vs)) {
                if m.update(k, v, MapFlags::ANY).is_ok() {
                    self.written += 1;
                }
            }
        }
        self.keys.clear();
        self.values.clear();
        self.n = 0;
    }

    /// Entries written.
    fn finish(mut self) -> usize {
        self.flush();
        self.written
    }
}
