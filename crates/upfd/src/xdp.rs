//! The XDP side of upfd (`datapath.mode: xdp`): the data path loaded, configured and
//! attached to the N3, N6 and N9 interfaces (detached when upfd ends), its event ring,
//! the next-hop cache's keeper and the slow path that serves what the programs hand up.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
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

/// The ifindexes of the data path's interfaces.
#[derive(Debug, Clone, Copy)]
struct Ifindexes {
    n3: u32,
    n6: u32,
    n9: Option<u32>,
}

/// The data path's configuration from upfd's: our GTP-U addresses (N3, N9, the Network
/// Instances'), the addresses user traffic must not reach, the slow path's budget, the
/// ICMP errors' (their sources read from the N6 interface unless configured) and the
/// configured MTUs by ifindex.
fn data_path_config(cfg: &Config, ifs: Ifindexes) -> anyhow::Result<DataPathConfig> {
    let n9 = cfg.gtpu.n9.as_ref();
    let per_sec = cfg.datapath.unknown_teid_to_slowpath_per_sec;
    let icmp = &cfg.datapath.icmp;
    let n6_name = cfg.datapath.n6_interface.as_deref().unwrap_or_default();
    let n6_addrs = if icmp.errors_per_sec > 0
        && (icmp.source_ipv4.is_none() || icmp.source_ipv6.is_none())
    {
        addresses_of(n6_name).with_context(|| {
            format!("datapath.icmp: the ICMP errors' source: reading the addresses of datapath.n6_interface {n6_name:?}")
        })?
    } else {
        Vec::new()
    };
    let (icmp, notes) = icmp_config(icmp, n6_name, &n6_addrs);
    for n in notes {
        info!("xdp: {n}");
    }
    Ok(DataPathConfig {
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
        icmp,
        mtus: mtus_by_ifindex(cfg, ifs)?,
    })
}

/// `datapath.mtu` by ifindex, each interface once. The check refused two MTUs for one
/// interface name; two names of one interface (altnames) are refused here.
fn mtus_by_ifindex(cfg: &Config, ifs: Ifindexes) -> anyhow::Result<Vec<(u32, u16)>> {
    let by_role = cfg
        .datapath
        .interface_mtus()
        .map_err(|(key, m)| anyhow::anyhow!("{key}: {m}"))?;
    let mut out: Vec<(&str, u32, u16)> = Vec::new();
    for (role, mtu) in by_role {
        let i = match role {
            "n3" => ifs.n3,
            "n6" => ifs.n6,
            _ => ifs.n9.unwrap_or(ifs.n3),
        };
        match out.iter().find(|(_, o, _)| *o == i) {
            Some((r, _, m)) if *m != mtu => anyhow::bail!(
                "datapath.mtu.{role}: {mtu}: datapath.{role}_interface is datapath.{r}_interface (ifindex {i}), and datapath.mtu.{r} is {m}: one MTU per interface"
            ),
            Some(_) => {}
            None => out.push((role, i, mtu)),
        }
    }
    anyhow::ensure!(
        out.len() <= upf::abi::MAX_IF_MTUS as usize,
        "datapath.mtu: {} interfaces: the data path takes {}",
        out.len(),
        upf::abi::MAX_IF_MTUS
    );
    Ok(out.into_iter().map(|(_, i, m)| (i, m)).collect())
}

/// The ICMP errors' budgets and sources: the configured sources, else the first IPv4
/// and the first global-scope IPv6 address of `n6` (`n6_addrs`, in the kernel's order).
/// With what to log once: the versions that get no errors for want of a source.
fn icmp_config(
    c: &crate::config::Icmp,
    n6: &str,
    n6_addrs: &[IpAddr],
) -> (upf::fastpath::Icmp, Vec<String>) {
    let mut icmp = upf::fastpath::Icmp {
        source_v4: c.source_ipv4,
        source_v6: c.source_ipv6,
        per_sec: c.errors_per_sec,
        burst: c.burst,
        session_per_sec: c.session_errors_per_sec,
        session_burst: c.session_burst,
    };
    let mut notes = Vec::new();
    if c.errors_per_sec == 0 {
        notes.push(
            "datapath.icmp.errors_per_sec is 0: no ICMP errors for packets that do not fit".into(),
        );
        return (icmp, notes);
    }
    if icmp.source_v4.is_none() {
        icmp.source_v4 = n6_addrs.iter().find_map(|a| match a {
            IpAddr::V4(a) => Some(*a),
            IpAddr::V6(_) => None,
        });
        if icmp.source_v4.is_none() {
            notes.push(format!(
                "no ICMPv4 Fragmentation Needed for packets that do not fit: datapath.n6_interface {n6:?} has no IPv4 address and datapath.icmp.source_ipv4 is not set"
            ));
        }
    }
    if icmp.source_v6.is_none() {
        icmp.source_v6 = n6_addrs.iter().find_map(|a| match a {
            IpAddr::V6(a) if global_scope(a) => Some(*a),
            _ => None,
        });
        if icmp.source_v6.is_none() {
            notes.push(format!(
                "no ICMPv6 Packet Too Big for packets that do not fit: datapath.n6_interface {n6:?} has no global IPv6 address and datapath.icmp.source_ipv6 is not set"
            ));
        }
    }
    (icmp, notes)
}

/// Whether an interface's IPv6 address has global scope as Linux gives it (`ip -6 addr`):
/// not loopback, link-local or (deprecated, RFC 3879) site-local. ULAs are global.
fn global_scope(a: &Ipv6Addr) -> bool {
    let s0 = a.segments()[0];
    !(a.is_loopback()
        || a.is_unspecified()
        || a.is_multicast()
        || s0 & 0xffc0 == 0xfe80
        || s0 & 0xffc0 == 0xfec0)
}

/// The addresses of interface `name`, in the kernel's order (getifaddrs(3)).
fn addresses_of(name: &str) -> std::io::Result<Vec<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list it allocates to `head`; freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is an entry of the list getifaddrs returned, not yet freed; its
        // name is NUL-terminated, its address (if any) a sockaddr of its family.
        unsafe {
            let ifa = &*p;
            p = ifa.ifa_next;
            if ifa.ifa_addr.is_null()
                || std::ffi::CStr::from_ptr(ifa.ifa_name).to_bytes() != name.as_bytes()
            {
                continue;
            }
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                        sin.sin_addr.s_addr,
                    ))));
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    out.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                }
                _ => {}
            }
        }
    }
    // SAFETY: `head` is the list getifaddrs returned, freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
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
        let ifs = Ifindexes {
            n3: n3_if,
            n6: n6_if,
            n9: n9_if,
        };
        let dcfg = data_path_config(cfg, ifs)?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn icmp(yaml: &str) -> crate::config::Icmp {
        let text = format!(
            "node_id: 127.0.0.7\nn4: {{ address: 127.0.0.7 }}\ngtpu: {{ n3: {{ ipv4: 127.0.0.7 }} }}\ndatapath: {{ icmp: {yaml} }}\n"
        );
        Config::parse(&text, "t.yaml").unwrap().datapath.icmp
    }

    #[test]
    fn icmp_sources_are_the_configured_ones_else_n6_s_first_of_each_version() {
        let n6: Vec<IpAddr> = [
            "fe80::1",
            "192.0.2.7",
            "fec0::1",
            "2001:db8::7",
            "198.51.100.7",
            "2001:db8::8",
        ]
        .iter()
        .map(|a| a.parse().unwrap())
        .collect();
        let (i, notes) = icmp_config(&icmp("{}"), "eth2", &n6);
        assert_eq!(
            (i.source_v4, i.source_v6),
            (
                Some("192.0.2.7".parse().unwrap()),
                Some("2001:db8::7".parse().unwrap())
            )
        );
        assert_eq!(
            (i.per_sec, i.burst, i.session_per_sec, i.session_burst),
            (1000, 50, 10, 10)
        );
        assert!(notes.is_empty(), "{notes:?}");
        // Configured sources win.
        let (i, _) = icmp_config(
            &icmp("{ source_ipv4: 203.0.113.1, source_ipv6: \"2001:db8::1\" }"),
            "eth2",
            &n6,
        );
        assert_eq!(
            (i.source_v4, i.source_v6),
            (
                Some("203.0.113.1".parse().unwrap()),
                Some("2001:db8::1".parse().unwrap())
            )
        );
        // A version N6 has no (global) address of: none, said once.
        let local_only: Vec<IpAddr> = vec!["fe80::1".parse().unwrap(), "::1".parse().unwrap()];
        let (i, notes) = icmp_config(&icmp("{}"), "eth2", &local_only);
        assert_eq!((i.source_v4, i.source_v6), (None, None));
        assert_eq!(
            notes,
            vec![
                "no ICMPv4 Fragmentation Needed for packets that do not fit: datapath.n6_interface \"eth2\" has no IPv4 address and datapath.icmp.source_ipv4 is not set",
                "no ICMPv6 Packet Too Big for packets that do not fit: datapath.n6_interface \"eth2\" has no global IPv6 address and datapath.icmp.source_ipv6 is not set",
            ]
        );
        let (i, notes) = icmp_config(&icmp("{ source_ipv4: 192.0.2.1 }"), "eth2", &[]);
        assert_eq!(i.source_v4, Some("192.0.2.1".parse().unwrap()));
        assert_eq!(notes.len(), 1, "{notes:?}");
        assert!(notes[0].starts_with("no ICMPv6"), "{notes:?}");
        // None at all: the per_sec the data path reads is 0.
        let (i, notes) = icmp_config(&icmp("{ errors_per_sec: 0 }"), "eth2", &n6);
        assert_eq!(i.per_sec, 0);
        assert_eq!(notes.len(), 1, "{notes:?}");
    }

    #[test]
    fn the_loopback_interface_s_addresses_are_read() {
        let a = addresses_of("lo").unwrap();
        assert!(a.contains(&IpAddr::V4(Ipv4Addr::LOCALHOST)), "{a:?}");
        assert!(addresses_of("upfd-nonesuch0").unwrap().is_empty());
    }

    #[test]
    fn mtus_go_by_ifindex_each_interface_once() {
        let cfg = |dp: &str| {
            let text = format!(
                "node_id: 127.0.0.7\nn4: {{ address: 127.0.0.7 }}\ngtpu: {{ n3: {{ ipv4: 127.0.0.7 }} }}\ndatapath: {{ n3_interface: eth1, n6_interface: eth2, {dp} }}\n"
            );
            Config::parse(&text, "t.yaml").unwrap()
        };
        let ifs = Ifindexes {
            n3: 3,
            n6: 4,
            n9: Some(5),
        };
        let c = cfg("n9_interface: eth3, mtu: { n3: 1500, n6: 9000, n9: 1400 }");
        assert_eq!(
            mtus_by_ifindex(&c, ifs).unwrap(),
            vec![(3, 1500), (4, 9000), (5, 1400)]
        );
        assert_eq!(mtus_by_ifindex(&cfg(""), ifs).unwrap(), vec![]);
        // Two names of one interface (an altname) with two MTUs.
        let c = cfg("n9_interface: eth3, mtu: { n3: 1500, n9: 1400 }");
        let same = Ifindexes { n9: Some(3), ..ifs };
        assert_eq!(
            mtus_by_ifindex(&c, same).unwrap_err().to_string(),
            "datapath.mtu.n9: 1400: datapath.n9_interface is datapath.n3_interface (ifindex 3), and datapath.mtu.n3 is 1500: one MTU per interface"
        );
        let c = cfg("n9_interface: eth3, mtu: { n3: 1500, n9: 1500 }");
        assert_eq!(mtus_by_ifindex(&c, same).unwrap(), vec![(3, 1500)]);
    }
}
