//! A restart that loads nothing it can reuse (docs/architecture.md, "Restart"): when the
//! data path running on the interfaces (the previous upfd's) is this build's object with
//! the tables this upfd would make, the restarted upfd takes its programs and tables as
//! they are, instead of loading new ones (the verifier would run, and the tables would
//! be allocated and zeroed, on the forwarding CPU) and swapping them in.
//!
//! The tables were written before the journal frame that says so (the journal follows
//! every N4 batch), so they can hold what the restored state lacks. Taking them in is
//! three steps: [`Datapath::adopt`] opens them and notes what they hold (each session's
//! slot, each cell's owner, the cold entries, the keys); the restore installs every
//! session of the state as usual, and [`Datapath::place`] gives each its slot and cells
//! back, so its counts and leases go on where they are; [`Datapath::finish_adoption`]
//! removes what no restored session claimed and schedules the cold entries the
//! installs replaced for deletion. All of it before the first N4 answer.

use std::collections::{HashMap, HashSet};
use std::os::fd::{FromRawFd, OwnedFd};
use std::time::Instant;

use libbpf_rs::{MapCore, MapFlags, MapHandle};
use upf::abi;
use upf::fastpath::FastPathError;

use smallvec::SmallVec;

use super::{build_id, io, Capacity, Datapath, Installed, Maps, Place, Progs, Spread, Table};
use crate::layout::Layout;
use crate::mem::{bytes, from_bytes, Pages};
use crate::upf::types;

/// A session's cells: (a URR's (true) or a QER's, rule ID, cell).
type OwnedCells = SmallVec<[(bool, u32, u32); 1]>;

/// A record's placement, as read back.
struct Home {
    slot: u32,
    qer: Option<u32>,
    urr: Option<u32>,
    lanes_used: bool,
}

/// What an adopted data path held, until its sessions are reconciled.
#[derive(Default)]
pub(super) struct Adopted {
    /// SEID -> its slot and its record's home QER and URR (IDs), if it has them, and
    /// whether its lanes ever counted for a URR.
    slots: HashMap<u64, Home>,
    /// SEID -> its cells.
    cells: HashMap<u64, OwnedCells>,
    /// Cold entries found: the reconciled sessions write their own.
    cold: Vec<(Table, u32)>,
    /// SDF entries that belong to no run a record or cold PDR names.
    stray_sdfs: Vec<u32>,
    /// The key tables' keys found.
    keys: Vec<types::sess_key>,
    framed: Vec<types::lpm_key>,
    /// Application detection's chunks, names and URLs found (replaced by set_pfds).
    app_chunks: Vec<u32>,
}

impl Adopted {
    /// What the tables hold of session `seid`, as if this upfd had installed it: its
    /// slot, its home QER and URR, its cells (by rule ID). No keys or cold entries: the
    /// install writes its own, and [`Datapath::finish_adoption`] removes the rest.
    pub(super) fn installed(&self, seid: u64) -> Option<Installed> {
        let h = self.slots.get(&seid)?;
        let mut i = Installed {
            slot: h.slot,
            lanes_used: h.lanes_used,
            ..Default::default()
        };
        // A cell outranks the record's home for the same ID (a home URR removed and
        // the ID used again: the new one lives in a cell).
        for (urr, id, c) in self.cells.get(&seid).into_iter().flatten() {
            let m = if *urr { &mut i.urrs } else { &mut i.qers };
            m.insert(*id, Place::Cell(*c));
        }
        if let Some(q) = h.qer.filter(|q| i.qers.get(q).is_none()) {
            i.qers.insert(q, Place::Home);
        }
        if let Some(u) = h.urr.filter(|u| i.urrs.get(u).is_none()) {
            i.urrs.insert(u, Place::Home);
        }
        Some(i)
    }
}

/// Whether the running data path was reused, and if not, why.
pub enum Adoption {
    Adopted(Box<Datapath>),
    /// Not this build's, or not of this capacity, or not found: load a new one.
    Not(String),
}

/// What finishing an adoption removed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reconciled {
    /// Sessions in the tables the state did not know (written after the last journal
    /// frame that reached the disk): removed.
    pub sessions_removed: usize,
    pub cells_freed: usize,
    pub keys_removed: usize,
    /// Cold entries replaced by the reconciled sessions' (deleted after the grace period).
    pub cold_replaced: usize,
}

fn prog_fd(id: u32) -> Result<OwnedFd, FastPathError> {
    // SAFETY: no preconditions; a negative result is an error.
    let fd = unsafe { libbpf_rs::libbpf_sys::bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        return Err(io(format!(
            "program {id}: {}",
            std::io::Error::from_raw_os_error(-fd)
        )));
    }
    // SAFETY: a fresh fd we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Every key of a hash table.
fn keys(m: &MapHandle) -> Vec<Vec<u8>> {
    m.keys().collect()
}

impl Datapath {
    /// The data path running now, if it is this build's with the tables `cap` and this
    /// machine give: found by its `sess_pages` table (`sess_pages_id`, which upfd's state
    /// keeps), its programs and tables opened, what they hold noted. The caller then
    /// configures it as a loaded one ([`Datapath::configure`], [`Datapath::set_spread`]:
    /// what is unchanged is not rewritten), installs the state's sessions (each gets its
    /// slot and cells back) and calls [`Datapath::finish_adoption`].
    pub fn adopt(cap: Capacity, sess_pages_id: u32) -> Adoption {
        match Self::try_adopt(cap, sess_pages_id) {
            Ok(Some(mut d)) => match d.take_running_config() {
                Ok(()) => Adoption::Adopted(Box::new(d)),
                Err(e) => Adoption::Not(format!("reading its configuration: {e}")),
            },
            Ok(None) => Adoption::Not("it is another build's, or of other table sizes".into()),
            Err(e) => Adoption::Not(e.to_string()),
        }
    }

    /// The next-hop cache's generation and key, and the spreading, as they run: a
    /// configuration that keeps them does not disturb the traffic. The cache is
    /// invalidated all the same (routes may have changed while no upfd watched).
    fn take_running_config(&mut self) -> Result<(), FastPathError> {
        let word = self
            .maps
            .nh_gen
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(io)?
            .and_then(|v| <[u8; 4]>::try_from(v.as_slice()).ok())
            .map_or(0, u32::from_ne_bytes);
        self.nh_gen = word >> 1;
        self.nh_by_destination = word & abi::NH_BY_DESTINATION != 0;
        self.bump_nexthop_generation()?;
        let c: types::upf_config = self
            .maps
            .upf_cfg
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(io)?
            .and_then(|b| from_bytes(&b))
            .ok_or_else(|| io("upf_cfg: no configuration"))?;
        let n = (c.n_spread as usize).min(c.spread_cpu.len());
        self.spread = match c.spread {
            abi::SPREAD_TEID if n > 0 => Spread::Teid,
            abi::SPREAD_INNER if n > 0 => Spread::Inner,
            _ => Spread::Off,
        };
        self.spread_cpus = if self.spread == Spread::Off {
            Vec::new()
        } else {
            c.spread_cpu[..n].to_vec()
        };
        Ok(())
    }

    fn try_adopt(cap: Capacity, sess_pages_id: u32) -> Result<Option<Datapath>, FastPathError> {
        // The programs that use the sessions' table, and their tables.
        // The programs that share a table with it, and theirs, until none is added (the
        // stages share only their scratch table with the entry programs).
        let opts = libbpf_rs::query::ProgInfoQueryOptions::default().include_map_ids(true);
        let all: Vec<(String, u32, Vec<u32>)> =
            libbpf_rs::query::ProgInfoIter::with_query_opts(opts)
                .map(|p| (p.name.to_string_lossy().into_owned(), p.id, p.map_ids))
                .collect();
        let mut progs: HashMap<String, u32> = HashMap::new();
        let mut map_ids: HashSet<u32> = HashSet::from([sess_pages_id]);
        let mut taken: HashSet<u32> = HashSet::new();
        loop {
            let before = taken.len();
            for (name, id, maps) in &all {
                if !taken.contains(id) && maps.iter().any(|m| map_ids.contains(m)) {
                    taken.insert(*id);
                    progs.insert(name.clone(), *id);
                    map_ids.extend(maps.iter().copied());
                }
            }
            if taken.len() == before {
                break;
            }
        }
        if progs.is_empty() {
            return Err(io(format!("no loaded program uses map {sess_pages_id}")));
        }
        let mut by_name: HashMap<String, MapHandle> = HashMap::new();
        for id in map_ids {
            if let Ok(m) = MapHandle::from_map_id(id) {
                by_name.insert(m.name().to_string_lossy().into_owned(), m);
            }
        }
        let ncpus = libbpf_rs::num_possible_cpus().map_err(io)?;
        let layout = Layout::new(cap.slots(), cap.cells, ncpus);
        // The build and sizes it was loaded with.
        let ro = by_name
            .iter()
            .find(|(n, _)| n.ends_with(".rodata"))
            .map(|(_, m)| m)
            .ok_or_else(|| io("its read-only globals are not among its tables"))?;
        let v = ro
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .map_err(io)?
            .ok_or_else(|| io("its read-only globals are empty"))?;
        let at = std::mem::offset_of!(types::rodata, build_id);
        let id = v
            .get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_ne_bytes)
            .ok_or_else(|| io("its read-only globals are of another layout"))?;
        if id != build_id(&cap, &layout) {
            return Ok(None);
        }
        let prog = |n: &str| -> Result<OwnedFd, FastPathError> {
            prog_fd(
                *progs
                    .get(n)
                    .ok_or_else(|| io(format!("its program {n} is not loaded")))?,
            )
        };
        let progs = Progs {
            xdp_n3: prog("xdp_n3")?,
            xdp_n6: prog("xdp_n6")?,
            xdp_n3_cpu: prog("xdp_n3_cpu")?,
        };
        let maps = Maps::open(|name| {
            let m = by_name
                .get(name)
                .ok_or_else(|| io(format!("its table {name} is not open")))?;
            MapHandle::try_from(m).map_err(io)
        })?;
        let entries = Pages::map(&maps.sess_pages, layout, false)?;
        let cells = Pages::map(&maps.cells, layout, true)?;
        let app_chunks = maps.app_sdfs.max_entries() / abi::APP_MAX_SDF;
        let mut d = Datapath::with_tables(
            None,
            maps,
            progs,
            layout,
            (entries, cells),
            cap,
            ncpus,
            app_chunks,
        );
        d.note_adopted()?;
        Ok(Some(d))
    }

    /// Read what the adopted tables hold.
    fn note_adopted(&mut self) -> Result<(), FastPathError> {
        let mut a = Adopted::default();
        for slot in 0..self.layout.slots {
            let Some(r) = self.entries.record(slot) else {
                continue;
            };
            if r.seid == 0 {
                continue;
            }
            self.slots.take_at(slot);
            let h = r.home;
            let flag = |f: u32| h.home & f as u8 != 0;
            a.slots.insert(
                r.seid,
                Home {
                    slot,
                    qer: flag(abi::HOME_QER).then_some(h.qer_id),
                    urr: flag(abi::HOME_URR).then_some(h.urr_id),
                    lanes_used: flag(abi::HOME_LANES_USED),
                },
            );
        }
        for c in 2..self.layout.cells {
            let Some(p) = self.cells.params(c) else {
                continue;
            };
            if p.seid == 0 {
                continue;
            }
            self.cell_slots.take_at(c);
            let urr = p.home & abi::HOME_URR as u8 != 0;
            let id = if urr { p.urr_id } else { p.qer_id };
            a.cells.entry(p.seid).or_default().push((urr, id, c));
        }
        let maps = &self.maps;
        let mut top = 0u32;
        for (t, m) in [
            (Table::Lists, &maps.pdr_lists),
            (Table::Pdrs, &maps.pdrs),
            (Table::Fars, &maps.fars),
        ] {
            for k in keys(m) {
                if let Ok(h) = <[u8; 4]>::try_from(k.as_slice()) {
                    let h = u32::from_ne_bytes(h);
                    top = top.max(h);
                    a.cold.push((t, h));
                }
            }
        }
        // SDF runs: those the records and the cold PDRs name, shared by content again.
        let sdfs: HashMap<u32, types::sdf_match> = keys(&maps.sdfs)
            .into_iter()
            .filter_map(|k| {
                let h = u32::from_ne_bytes(<[u8; 4]>::try_from(k.as_slice()).ok()?);
                let v = maps.sdfs.lookup(&k, MapFlags::ANY).ok()??;
                Some((h, from_bytes(&v)?))
            })
            .collect();
        let mut runs: Vec<(u32, u32)> = Vec::new();
        for h in a.slots.values() {
            if let Some(r) = self.entries.record(h.slot) {
                for d in &r.dir {
                    if d.flags & abi::DR_VALID as u8 != 0 && d.n_sdf > 0 {
                        runs.push((d.sdf, u32::from(d.n_sdf)));
                    }
                }
            }
        }
        for (_, h) in a.cold.iter().filter(|(t, _)| *t == Table::Pdrs) {
            let p = maps
                .pdrs
                .lookup(&h.to_ne_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
                .and_then(|v| from_bytes::<types::pdr>(&v));
            if let Some(p) = p.filter(|p| p.n_sdf > 0) {
                runs.push((p.sdf, u32::from(p.n_sdf)));
            }
        }
        runs.sort_unstable();
        runs.dedup();
        let mut in_runs: HashSet<u32> = HashSet::new();
        for (start, n) in runs {
            let entries: Option<Vec<types::sdf_match>> = (0..n)
                .map(|j| sdfs.get(&start.wrapping_add(j)).copied())
                .collect();
            let Some(entries) = entries else {
                continue;
            };
            let content = super::sdf_content(&entries);
            if self.sdf_runs.contains_key(&content) {
                continue;
            }
            in_runs.extend((0..n).map(|j| start.wrapping_add(j)));
            top = top.max(start.wrapping_add(n));
            self.sdf_runs.insert(content.clone(), start);
            self.sdf_refs.insert(start, (0, n, content));
        }
        for h in sdfs.keys() {
            top = top.max(*h);
            if !in_runs.contains(h) {
                a.stray_sdfs.push(*h);
            }
        }
        self.next_handle = top.wrapping_add(1).max(1);
        a.keys = keys(&maps.keys)
            .iter()
            .filter_map(|k| from_bytes(k))
            .collect();
        a.framed = keys(&maps.framed)
            .iter()
            .filter_map(|k| from_bytes(k))
            .collect();
        // Application detection: the chunks in use stay taken until set_pfds replaces
        // them; the names and URLs are what set_pfds compares with.
        for i in 0..abi::APP_MAX {
            let e = maps
                .apps
                .lookup(&i.to_ne_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
                .and_then(|v| from_bytes::<types::app_entry>(&v));
            if let Some(e) = e.filter(|e| e.n_sdf > 0) {
                let chunk = e.sdf / abi::APP_MAX_SDF;
                self.app_sdf_chunks.take_at(chunk);
                a.app_chunks.push(chunk);
            }
        }
        for k in keys(&maps.app_names) {
            let (Some(key), Some(v)) = (
                from_bytes::<types::app_key>(&k),
                maps.app_names
                    .lookup(&k, MapFlags::ANY)
                    .ok()
                    .flatten()
                    .and_then(|v| from_bytes::<types::app_name>(&v)),
            ) else {
                continue;
            };
            let data = key.data[..(key.prefixlen / 8) as usize].to_vec();
            self.app_names.insert(data, v);
        }
        for k in keys(&maps.app_urls) {
            let (Some(key), Some(v)) = (
                from_bytes::<types::app_key>(&k),
                maps.app_urls
                    .lookup(&k, MapFlags::ANY)
                    .ok()
                    .flatten()
                    .and_then(|v| <[u8; 2]>::try_from(v.as_slice()).ok()),
            ) else {
                continue;
            };
            let data = key.data[..(key.prefixlen / 8) as usize].to_vec();
            self.app_urls.insert(data, u16::from_ne_bytes(v));
        }
        self.adopted = Some(Box::new(a));
        Ok(())
    }

    /// Whether this data path was adopted and is being reconciled.
    pub fn adopting(&self) -> bool {
        self.adopted.is_some()
    }

    /// After the state's sessions were installed: remove what none of them claimed (the
    /// sessions written after the last journal frame, their cells and keys), schedule the
    /// cold entries they replaced for deletion, and give back the application chunks
    /// no application uses now.
    pub fn finish_adoption(&mut self, now: Instant) -> Reconciled {
        let Some(a) = self.adopted.take() else {
            return Reconciled::default();
        };
        let mut r = Reconciled::default();
        let claimed: HashSet<u32> = self.sessions.values().map(|i| i.slot).collect();
        for h in a.slots.values().filter(|h| !claimed.contains(&h.slot)) {
            if let Some(mut rec) = self.entries.record(h.slot) {
                rec.seid = 0;
                rec.home.home = 0;
                rec.teid = 0;
                rec.ue_v4 = 0;
                rec.flags = 0;
                rec.dir = Default::default();
                let _ = self.entries.write_record(h.slot, &rec);
            }
            self.slots.release(h.slot, 1, now);
            r.sessions_removed += 1;
        }
        let cells: HashSet<u32> = self
            .sessions
            .values()
            .flat_map(|i| i.qers.cells().chain(i.urrs.cells()).map(|(_, c)| c))
            .collect();
        for c in a.cells.values().flatten().map(|(_, _, c)| *c) {
            if !cells.contains(&c) {
                self.cells.clear_owner(c);
                self.cell_slots.release(c, 1, now);
                r.cells_freed += 1;
            }
        }
        for (t, h) in a.cold {
            self.doomed.push_back((now, t, h));
            r.cold_replaced += 1;
        }
        let runs: Vec<u32> = self
            .sdf_refs
            .iter()
            .filter(|(_, v)| v.0 == 0)
            .map(|(s, _)| *s)
            .collect();
        for start in runs {
            if let Some((_, n, content)) = self.sdf_refs.remove(&start) {
                self.sdf_runs.remove(&content);
                self.doomed_sdfs.push_back((now, start, n));
            }
        }
        for h in a.stray_sdfs {
            self.doomed_sdfs.push_back((now, h, 1));
        }
        let maps = &self.maps;
        let teids: HashSet<u32> = self
            .sessions
            .values()
            .flat_map(|i| i.teids.iter().copied())
            .collect();
        let teid_of = |k: &types::sess_key| {
            (u32::from(k.kind) == abi::KEY_TEID)
                .then(|| u32::from_ne_bytes([k.addr[0], k.addr[1], k.addr[2], k.addr[3]]))
        };
        for k in a
            .keys
            .iter()
            .filter(|k| teid_of(k).is_some_and(|t| !teids.contains(&t)))
        {
            let _ = maps.keys.delete(bytes(k));
            r.keys_removed += 1;
        }
        let ues: HashSet<Vec<u8>> = self
            .sessions
            .values()
            .flat_map(|i| i.ues.iter().map(|k| bytes(k).to_vec()))
            .collect();
        for k in a
            .keys
            .iter()
            .filter(|k| teid_of(k).is_none() && !ues.contains(bytes(*k)))
        {
            let _ = maps.keys.delete(bytes(k));
            r.keys_removed += 1;
        }
        let framed: HashSet<Vec<u8>> = self
            .sessions
            .values()
            .flat_map(|i| i.framed.iter().map(|k| bytes(k).to_vec()))
            .collect();
        for k in a.framed.iter().filter(|k| !framed.contains(bytes(*k))) {
            let _ = maps.framed.delete(bytes(k));
            r.keys_removed += 1;
        }
        let used: HashSet<u32> = self.app_blocks.values().map(|(c, _)| *c).collect();
        for c in a.app_chunks.iter().filter(|c| !used.contains(c)) {
            self.app_sdf_chunks.release(*c, 1, now);
        }
        r
    }
}
