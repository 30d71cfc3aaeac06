//! The XDP side of upfd (`datapath.mode: xdp`): the data path loaded, configured and
//! attached to the N3, N6 and N9 interfaces (detached when upfd ends), its event ring,
//! the next-hop cache's keeper and the slow path that serves what the programs hand up.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;

use anyhow::Context;
use tokio::io::unix::AsyncFd;
use upf::fastpath::teid_index::TeidIndex;
use upf::fastpath::{Config as DataPathConfig, Event};
use upf_bpf::datapath::{
    parse_event, Adoption, AttachMode, Capacity, Datapath, Role, Spread as DpSpread,
};

use crate::config::{Config, DatapathMode, Spread, XdpAttach};
use crate::routewatch::{NextHopKeeper, RoutingEvent};
use crate::slowpath::SlowPath;

/// The TEIDs with direct slots in the data path's uplink table, which upfd's TEID
/// allocator hands out (none without a data path).
/// `seed` keys the index: a restarted upfd keeps its state's, so that the TEIDs it
/// restores have the slots they had.
pub fn teid_index(cfg: &Config, seed: u64) -> TeidIndex {
    match cfg.datapath.mode {
        DatapathMode::Xdp => {
            let slots = u32::try_from(cfg.limits.max_sessions)
                .unwrap_or(u32::MAX)
                .saturating_add(1024);
            let [lo, hi] = cfg.gtpu.teid_range;
            TeidIndex::seeded(lo, hi, slots, seed)
        }
        DatapathMode::None => TeidIndex::none(),
    }
}

fn ifindex(name: &str) -> anyhow::Result<u32> {
    let c = std::ffi::CString::new(name).context("interface name")?;
    // SAFETY: if_nametoindex reads a NUL-terminated string we own.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        anyhow::bail!("no network interface named {name:?}");
    }
    Ok(i)
}

fn mac_of(name: &str) -> [u8; 6] {
    let s = std::fs::read_to_string(format!("/sys/class/net/{name}/address")).unwrap_or_default();
    let mut m = [0u8; 6];
    for (i, p) in s.trim().split(':').take(6).enumerate() {
        m[i] = u8::from_str_radix(p, 16).unwrap_or(0);
    }
    m
}

/// The data path's configuration from upfd's: our GTP-U addresses (N3, N9, the Network
/// Instances'), the addresses user traffic must not reach and the slow path's budget.
fn data_path_config(cfg: &Config) -> DataPathConfig {
    let n9 = cfg.gtpu.n9.as_ref();
    let per_sec = cfg.datapath.unknown_teid_to_slowpath_per_sec;
    DataPathConfig {
        local: cfg.gtpu_addresses().into_iter().map(|(a, _)| a).collect(),
        protected: cfg.protected_addresses(),
        n3_v4: cfg.gtpu.n3.ipv4,
        n9_v4: n9.and_then(|e| e.ipv4),
        n3_v6: cfg.gtpu.n3.ipv6,
        n9_v6: n9.and_then(|e| e.ipv6),
        network_instances: cfg.ni_addresses(),
        neigh: Default::default(),
        slowpath_per_sec: per_sec,
        slowpath_burst: per_sec.max(1),
    }
}

/// The online CPUs (/sys/devices/system/cpu/online, e.g. "0-3,6"), at most
/// `MAX_SPREAD_CPUS`; CPU 0 if it cannot be read.
fn online_cpus() -> Vec<u32> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap_or_default();
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(lo), Ok(hi)) = (lo.parse::<u32>(), hi.parse::<u32>()) {
            v.extend(lo..=hi);
        }
    }
    v.truncate(upf::abi::MAX_SPREAD_CPUS as usize);
    if v.is_empty() {
        v.push(0);
    }
    v
}

/// The table sizes for `limits.max_sessions`.
fn capacity(cfg: &Config, teid_index: TeidIndex) -> Capacity {
    let max = u32::try_from(cfg.limits.max_sessions).unwrap_or(u32::MAX);
    let base = Capacity::for_sessions(max);
    let t = &cfg.datapath.tables;
    Capacity {
        cold_entries: t.cold_entries.unwrap_or(base.cold_entries),
        sdf_entries: t.sdf_entries.unwrap_or(base.sdf_entries),
        cells: t.cells.unwrap_or(base.cells),
        teid_index,
        // As many downlink slots as TEID slots: the TEID allocator then gives a session
        // the uplink slot of its UE address's downlink slot, and the data path finds
        // all of the session's state at one index (alloc.rs `allocate_for`).
        ue_slots: if teid_index.slots() >= max {
            teid_index.slots()
        } else {
            base.ue_slots
        },
        ..base
    }
}

struct Fd(RawFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// What woke the XDP side.
pub enum XdpWake {
    /// The event ring has records.
    Events,
    Routing(RoutingEvent),
}

/// The XDP side: the data path, the interfaces it runs on, its event ring, the
/// next-hop cache's keeper and the slow path.
pub struct Xdp {
    /// The data path is the one the upfd before left running ([`Xdp::start`]).
    pub reused: bool,
    pub dp: Rc<RefCell<Datapath>>,
    pub slow: SlowPath,
    pub nexthops: NextHopKeeper,
    attached: Vec<(Role, u32)>,
    /// Where the programs go ([`Xdp::attach`]): role, ifindex, name, reference point
    /// ("n3", "n6", "n9").
    interfaces: Vec<(Role, u32, String, &'static str)>,
    /// How each interface's program is attached: name, reference point, mode (the
    /// metrics' `upf_xdp_attached`).
    pub modes: Vec<(String, &'static str, AttachMode)>,
    native: bool,
    /// The pins that keep this data path whole without upfd (pins.rs): removed when upfd
    /// ends detaching it, forgotten when it ends leaving it forwarding.
    pins: Option<crate::pins::Pins>,
    // The ring's epoll fd is registered before the ring that owns it is dropped.
    ring_fd: AsyncFd<Fd>,
    ring: upf_bpf::libbpf_rs::RingBuffer<'static>,
    records: Rc<RefCell<VecDeque<Vec<u8>>>>,
}

impl Drop for Xdp {
    fn drop(&mut self) {
        let dp = self.dp.borrow();
        for (role, i) in &self.attached {
            dp.detach(*role, *i);
        }
        if let Some(p) = &self.pins {
            p.remove();
        }
    }
}

impl Xdp {
    /// Load the data path with tables for `limits.max_sessions`, configure it and open
    /// its event ring; [`Xdp::attach`] puts it on the interfaces.
    /// `running`: the `sess_pages` table of the data path the upfd before this one left
    /// running (the state names it): taken as it is if it is this build's with these
    /// sizes (`state.reuse_datapath`), see [`Datapath::adopt`].
    pub fn start(cfg: &Config, teid_index: TeidIndex, running: Option<u32>) -> anyhow::Result<Xdp> {
        let d = &cfg.datapath;
        let n3_name = d.n3_interface.as_deref().unwrap_or_default();
        let n6_name = d.n6_interface.as_deref().unwrap_or_default();
        let n3_if = ifindex(n3_name).context("datapath.n3_interface")?;
        let n6_if = ifindex(n6_name).context("datapath.n6_interface")?;
        let n9_if = match &d.n9_interface {
            Some(n) => Some(ifindex(n).context("datapath.n9_interface")?),
            None => None,
        };
        let dcfg = data_path_config(cfg);
        let cap = capacity(cfg, teid_index);
        if running.is_some() && !cfg.state.reuse_datapath {
            info!("xdp: state.reuse_datapath is false: loading a new data path");
        }
        let adopted = match running.filter(|_| cfg.state.reuse_datapath) {
            Some(id) => match Datapath::adopt(cap, id) {
                Adoption::Adopted(d) => {
                    info!("xdp: the running data path (table {id}) is this build's: reused as it is, nothing loaded");
                    Some(*d)
                }
                Adoption::Not(why) => {
                    info!("xdp: the running data path (table {id}) is not reused ({why}): loading a new one");
                    None
                }
            },
            None => None,
        };
        let reused = adopted.is_some();
        let mut dp = match adopted {
            Some(d) => d,
            None => Datapath::load(cap, dcfg.clone())
                .map_err(|e| anyhow::anyhow!("loading the XDP data path: {e}"))?,
        };
        dp.configure(dcfg.clone(), n3_if, n6_if, n9_if.unwrap_or(0))
            .map_err(|e| anyhow::anyhow!("configuring the XDP data path: {e}"))?;
        let how = match d.spread {
            Spread::Off => DpSpread::Off,
            Spread::Teid => DpSpread::Teid,
            Spread::Inner => DpSpread::Inner,
        };
        if how != DpSpread::Off {
            let cpus: Vec<u32> = if d.spread_cpus.is_empty() {
                online_cpus()
            } else {
                d.spread_cpus.iter().map(|c| *c as u32).collect()
            };
            dp.set_spread(how, &cpus)
                .map_err(|e| anyhow::anyhow!("datapath.spread: {e}"))?;
            info!("xdp: G-PDUs on N3/N9 spread by {how:?} over CPUs {cpus:?}");
        }
        let native = d.xdp_attach == XdpAttach::Native;
        let mut interfaces = vec![
            (Role::Gtpu, n3_if, n3_name.to_string(), "n3"),
            (Role::N6, n6_if, n6_name.to_string(), "n6"),
        ];
        if let (Some(i), Some(n)) = (n9_if, d.n9_interface.as_deref()) {
            if i != n3_if {
                interfaces.push((Role::Gtpu, i, n.to_string(), "n9"));
            }
        }
        let nexthops = NextHopKeeper::start(&mut dp);
        let records: Rc<RefCell<VecDeque<Vec<u8>>>> = Rc::default();
        let q = records.clone();
        let ring = dp
            .events(move |d| {
                q.borrow_mut().push_back(d.to_vec());
                0
            })
            .map_err(|e| anyhow::anyhow!("event ring: {e}"))?;
        // SAFETY: the epoll fd belongs to `ring`, which outlives this registration
        // (`ring_fd` is dropped first).
        let ring_fd = unsafe {
            AsyncFd::register_with_interest(Fd(ring.epoll_fd()), tokio::io::Interest::READABLE)
        }
        .map_err(|e| anyhow::anyhow!("event ring fd: {e}"))?;
        let slow = SlowPath::new(
            mac_of(n6_name),
            dcfg,
            cfg.buffering.clone(),
            d.error_indications_per_sec,
        );
        Ok(Xdp {
            reused,
            dp: Rc::new(RefCell::new(dp)),
            slow,
            nexthops,
            attached: Vec::new(),
            interfaces,
            modes: Vec::new(),
            native,
            pins: None,
            ring_fd,
            ring,
            records,
        })
    }

    /// Attach the programs to the N3, N6 (and N9) interfaces. A program already there
    /// (the data path of the upfd that ran before) is replaced at once, interface by
    /// interface: no packet goes unprocessed. A reused data path's programs are there
    /// already: the kernel leaves an interface alone when it gets the program it runs.
    pub fn attach(&mut self) -> anyhow::Result<()> {
        let dp = self.dp.borrow();
        for (role, i, name, point) in &self.interfaces {
            let mode = match dp.attach(*role, *i, self.native) {
                Ok(m) => m,
                Err(e) => {
                    for (r, i) in &self.attached {
                        dp.detach(*r, *i);
                    }
                    self.attached.clear();
                    anyhow::bail!("{name}: {e}");
                }
            };
            if self.native && mode == AttachMode::Generic {
                warn!("xdp: {name} refused native XDP: attached in generic mode (slower)");
            }
            info!("xdp: {role:?} program on {name} (ifindex {i}), {mode:?} mode");
            self.attached.push((*role, *i));
            self.modes.push((name.clone(), point, mode));
        }
        Ok(())
    }

    /// Leave the programs attached when upfd ends: they keep forwarding until the next
    /// upfd takes over (state.directory).
    pub fn keep_attached(&mut self) {
        self.attached.clear();
        self.pins = None;
    }

    /// Pin what keeps this data path whole when upfd ends (pins.rs, `state.pin_directory`):
    /// said, not fatal, if it cannot be. A reused data path's pins are there already.
    pub fn pin(&mut self, root: &std::path::Path) {
        use std::os::fd::AsFd;
        let dp = self.dp.borrow();
        let id = match dp.counter_table() {
            Ok(t) => t.map_id,
            Err(e) => {
                warn!("xdp: the data path's tables: {e}");
                return;
            }
        };
        let pinned = match crate::pins::pinned(root, id, &crate::pins::PINNED) {
            Some(p) => Ok(p),
            None if self.reused => crate::pins::running(id).and_then(|objs| {
                let fds: Vec<_> = objs.iter().map(|(n, f)| (n.clone(), f.as_fd())).collect();
                crate::pins::pin(root, id, &fds)
            }),
            None => {
                let s = dp.skel();
                let fds = [
                    ("calls", s.maps.calls.as_fd()),
                    ("calls_cpu", s.maps.calls_cpu.as_fd()),
                    ("xdp_n3_cpu", s.progs.xdp_n3_cpu.as_fd()),
                ]
                .map(|(n, f)| (n.to_string(), f));
                crate::pins::pin(root, id, &fds)
            }
        };
        drop(dp);
        match pinned {
            Ok(p) => {
                debug!("xdp: the data path's program arrays pinned in {}", p.dir.display());
                self.pins = Some(p);
            }
            Err(e) => warn!(
                "xdp: state.pin_directory: {e}: when upfd ends, its data path drops every packet until the next upfd takes over, and that one cannot reuse it"
            ),
        }
    }

    /// Remove the pins of the data paths the upfds before this one left (this one has
    /// replaced them, or reused its own).
    pub fn unpin_others(&self, root: &std::path::Path) {
        let n = crate::pins::remove_others(root, self.pins.as_ref().map(|p| p.dir.as_path()));
        if n > 0 {
            info!(
                "xdp: the pins of {n} data path(s) the upfd before left removed: their tables are freed"
            );
        }
    }

    /// The next thing the XDP side must act on.
    pub async fn next(&mut self) -> XdpWake {
        let (ring, nexthops) = (&self.ring_fd, &mut self.nexthops);
        tokio::select! {
            r = ring.readable() => {
                if let Ok(mut guard) = r {
                    guard.clear_ready();
                }
                XdpWake::Events
            }
            e = nexthops.next() => XdpWake::Routing(e),
        }
    }

    /// The records in the event ring, parsed (records that are not events are dropped).
    pub fn take_events(&mut self) -> Vec<Event> {
        let _ = self.ring.consume();
        let records: Vec<Vec<u8>> = self.records.borrow_mut().drain(..).collect();
        // EV_APP_START names its application by index: the data path's PFD table.
        let pfds = self.dp.borrow().pfds();
        records
            .iter()
            .filter_map(|r| parse_event(r, &pfds))
            .collect()
    }

    /// Say what the data path dropped, by reason (at exit).
    pub fn log_drops(&self) {
        let s = self.dp.borrow().stats();
        let drops: Vec<String> = upf::abi::DropReason::ALL
            .iter()
            .filter(|r| s[r.index()].0 > 0)
            .map(|r| format!("{}={}", r.name(), s[r.index()].0))
            .collect();
        info!(
            "data path drops: {}",
            if drops.is_empty() {
                "none".into()
            } else {
                drops.join(" ")
            }
        );
    }
}
