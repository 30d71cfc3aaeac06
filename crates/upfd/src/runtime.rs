//! Wiring: configuration to the N4 node and the data path, and the event loop over the
//! N4 socket, the GTP-U socket, the data path's event ring, the report poll, the HTTP
//! endpoint and the timers; graceful shutdown on SIGTERM/SIGINT.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, RawFd};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UdpSocket};

use upf::alloc::{TeidAllocator, UeIpPools};
use upf::fastpath::teid_index::TeidIndex;
use upf::fastpath::{Config as DataPathConfig, FastPath, FastPathError, Usage};
use upf::model::Model;
use upf::n4::{to_ntp, usage_report, Event, N4Config, Out, N4};
use upf::procedures::{GtpuAddresses, Limits, Resources};
use upf::rules::Session;
use upf::sessions::{unix_now, Sessions};
use upf_bpf::datapath::{AttachMode, Capacity, Datapath, Role};

use crate::config::{Config, DatapathMode, XdpAttach};
use crate::routewatch::NextHops;
use crate::slowpath::SlowPath;

/// The UP Function Features this build supports (clause 8.2.25): only what works.
pub fn features(xdp: bool) -> pfcp::ie::Flags {
    use pfcp::ie::up_function_features as f;
    // FTUP: F-TEID allocation. UEIP: UE address allocation. With the data path: BUCP
    // (buffering in the UP function), EMPU (End Marker packets), QUOAC (the data path
    // stops forwarding when a volume quota is used up).
    let mut bits = vec![f::FTUP, f::UEIP];
    if xdp {
        bits.extend([f::BUCP, f::EMPU, f::QUOAC]);
    }
    pfcp::ie::Flags::from_bits(&bits, 3)
}

/// The XDP data path shared between the session table and the slow path (one thread).
struct Shared(Rc<RefCell<Datapath>>);

impl FastPath for Shared {
    fn install(&mut self, old: Option<&Session>, new: &Arc<Session>) -> Result<(), FastPathError> {
        self.0.borrow_mut().install(old, new)
    }
    fn remove(&mut self, session: &Session) {
        self.0.borrow_mut().remove(session)
    }
    fn usage(&self, seid: u64, urr_id: u32) -> Usage {
        self.0.borrow().usage(seid, urr_id)
    }
    fn reset_usage(&mut self, seid: u64, urr_id: u32) {
        self.0.borrow_mut().reset_usage(seid, urr_id)
    }
    fn set_quota(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>) {
        self.0.borrow_mut().set_quota(seid, urr_id, remaining)
    }
    fn set_threshold(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>) {
        self.0.borrow_mut().set_threshold(seid, urr_id, remaining)
    }
    fn signals_volume(&self) -> bool {
        self.0.borrow().signals_volume()
    }
}

/// `datapath.mode: none`: the rules are kept in the reference model, nothing forwards,
/// so no volume is ever counted and no volume trigger needs polling.
struct NoForwarding(Model);

impl FastPath for NoForwarding {
    fn install(&mut self, old: Option<&Session>, new: &Arc<Session>) -> Result<(), FastPathError> {
        self.0.install(old, new)
    }
    fn remove(&mut self, session: &Session) {
        self.0.remove(session)
    }
    fn usage(&self, seid: u64, urr_id: u32) -> Usage {
        self.0.usage(seid, urr_id)
    }
    fn reset_usage(&mut self, seid: u64, urr_id: u32) {
        self.0.reset_usage(seid, urr_id)
    }
    fn set_quota(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>) {
        self.0.set_quota(seid, urr_id, remaining)
    }
    fn set_threshold(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>) {
        self.0.set_threshold(seid, urr_id, remaining)
    }
    fn signals_volume(&self) -> bool {
        true
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

/// The XDP side: the data path, the interfaces it runs on, and the slow path.
struct Xdp {
    dp: Rc<RefCell<Datapath>>,
    attached: Vec<(Role, u32)>,
    slow: SlowPath,
}

impl Drop for Xdp {
    fn drop(&mut self) {
        let dp = self.dp.borrow();
        for (role, i) in &self.attached {
            dp.detach(*role, *i);
        }
    }
}

fn build(cfg: &Config, fastpath: Box<dyn FastPath>, teid_index: TeidIndex) -> N4 {
    let mut pools = UeIpPools::default();
    for p in &cfg.ue_pools {
        pools.add(&p.network_instance, p.prefix);
    }
    let n9 = cfg.gtpu.n9.as_ref();
    let res = Resources::new(
        TeidAllocator::with_index(cfg.gtpu.teid_range[0], cfg.gtpu.teid_range[1], teid_index),
        pools,
        GtpuAddresses {
            access_v4: cfg.gtpu.n3.ipv4,
            access_v6: cfg.gtpu.n3.ipv6,
            core_v4: n9.and_then(|e| e.ipv4),
            core_v6: n9.and_then(|e| e.ipv6),
        },
        Limits {
            max_pdrs: cfg.limits.max_pdrs_per_session,
            max_fars: cfg.limits.max_fars_per_session,
            max_qers: cfg.limits.max_qers_per_session,
            max_urrs: cfg.limits.max_urrs_per_session,
            max_sdf_filters: cfg.limits.max_sdf_filters_per_pdr,
        },
    );
    let mut sessions = Sessions::new(res, fastpath, cfg.limits.max_sessions);
    sessions.reserve(cfg.limits.max_sessions);
    let n4cfg = N4Config {
        node_id: cfg.node_id(),
        addr: cfg.n4.address,
        recovery_time_stamp: to_ntp(unix_now()),
        features: features(cfg.datapath.mode == DatapathMode::Xdp),
        allowed_peers: cfg.n4.allowed_peers.clone(),
        smf_peers: cfg.n4.associate_with.clone(),
        heartbeat_interval: cfg.n4.heartbeat_interval,
        t1: cfg.n4.t1,
        n1: cfg.n4.n1,
        cache_ttl: cfg.n4.response_cache_ttl,
        cache_max: cfg.n4.response_cache_max,
        graceful_release_period: cfg.n4.graceful_release_period,
    };
    N4::new(n4cfg, sessions)
}

fn start_xdp(cfg: &Config, teid_index: TeidIndex) -> anyhow::Result<Xdp> {
    let d = &cfg.datapath;
    let n3_name = d.n3_interface.as_deref().unwrap_or_default();
    let n6_name = d.n6_interface.as_deref().unwrap_or_default();
    let n3_if = ifindex(n3_name).context("datapath.n3_interface")?;
    let n6_if = ifindex(n6_name).context("datapath.n6_interface")?;
    let n9_if = match &d.n9_interface {
        Some(n) => Some(ifindex(n).context("datapath.n9_interface")?),
        None => None,
    };
    let n9 = cfg.gtpu.n9.as_ref();
    let (n3_v4, n3_v6) = (cfg.gtpu.n3.ipv4, cfg.gtpu.n3.ipv6);
    let (n9_v4, n9_v6) = (n9.and_then(|e| e.ipv4), n9.and_then(|e| e.ipv6));
    let local = [n3_v4.map(IpAddr::V4), n9_v4.map(IpAddr::V4)]
        .into_iter()
        .chain([n3_v6.map(IpAddr::V6), n9_v6.map(IpAddr::V6)])
        .flatten()
        .collect();
    let pcfg = DataPathConfig {
        local,
        n3_v4,
        n9_v4,
        n3_v6,
        n9_v6,
        neigh: Default::default(),
        slowpath_per_sec: d.unknown_teid_to_slowpath_per_sec,
        slowpath_burst: d.unknown_teid_to_slowpath_per_sec.max(1),
    };
    let max = u32::try_from(cfg.limits.max_sessions).unwrap_or(u32::MAX);
    let base = Capacity::for_sessions(max);
    let cap = Capacity {
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
    };
    let mut dp = Datapath::load(cap, pcfg.clone())
        .map_err(|e| anyhow::anyhow!("loading the XDP data path: {e}"))?;
    dp.configure(pcfg.clone(), n3_if, n6_if, n9_if.unwrap_or(0))
        .map_err(|e| anyhow::anyhow!("configuring the XDP data path: {e}"))?;
    let native = d.xdp_attach == XdpAttach::Native;
    let mut attached = Vec::new();
    let mut ifs = vec![(Role::Gtpu, n3_if, n3_name), (Role::N6, n6_if, n6_name)];
    if let (Some(i), Some(n)) = (n9_if, d.n9_interface.as_deref()) {
        if i != n3_if {
            ifs.push((Role::Gtpu, i, n));
        }
    }
    for (role, i, name) in ifs {
        let mode = dp
            .attach(role, i, native)
            .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        if native && mode == AttachMode::Generic {
            warn!("xdp: {name} refused native XDP: attached in generic mode (slower)");
        }
        info!(
            "xdp: {:?} program on {name} (ifindex {i}), {mode:?} mode",
            role
        );
        attached.push((role, i));
    }
    let dp = Rc::new(RefCell::new(dp));
    let slow = SlowPath::new(
        dp.clone(),
        n6_if,
        mac_of(n6_name),
        pcfg,
        cfg.buffering.clone(),
        d.error_indications_per_sec,
    );
    Ok(Xdp { dp, attached, slow })
}

/// An HTTP request's head: read until the blank line that ends it, 1 KiB or 500 ms,
/// whichever comes first (a client may send its request in several segments).
async fn read_request_head(conn: &mut tokio::net::TcpStream) -> Vec<u8> {
    let mut req = Vec::with_capacity(256);
    let mut buf = [0u8; 512];
    let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
    while req.len() < 1024 && !req.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => req.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    req
}

/// Invalidate the next-hop cache, keyed by destination alone when the FIB's answer cannot
/// depend on the source (checked now, at start); says which; returns it.
fn nexthop_mode(dp: &mut Datapath) -> bool {
    let now = crate::routewatch::source_independent();
    log_nexthop_mode(now);
    if let Err(e) = dp.set_nexthop_by_destination(now) {
        warn!("xdp: invalidating the next-hop cache: {e}");
    }
    now
}

fn log_nexthop_mode(by_destination: bool) {
    info!(
        "xdp: next hops cached per {}",
        if by_destination {
            "destination (no source policy rules, no multipath routes)"
        } else {
            "source and destination (source policy rules or multipath routes present)"
        }
    );
}

/// PFCP datagrams handled per wakeup of the event loop, at most.
const N4_BATCH: usize = 16;

async fn send_all(sock: &UdpSocket, outs: Vec<Out>) {
    for o in outs {
        if let Err(e) = sock.send_to(&o.data, o.to).await {
            warn!("n4: send to {}: {e}", o.to);
        }
    }
}

/// upfd's GTP-U sockets on the N3 addresses (UDP 2152), one per IP version: what the
/// data path hands up arrives on them; Echo, Error Indication and End Marker leave.
#[derive(Default)]
struct GtpuSockets {
    v4: Option<(UdpSocket, IpAddr)>,
    v6: Option<(UdpSocket, IpAddr)>,
}

impl GtpuSockets {
    async fn bind(cfg: &Config) -> anyhow::Result<Self> {
        let mut s = GtpuSockets::default();
        if let Some(a) = cfg.gtpu.n3.ipv4 {
            s.v4 = Some((
                bind_gtpu(IpAddr::V4(a), "gtpu.n3.ipv4").await?,
                IpAddr::V4(a),
            ));
        }
        if let Some(a) = cfg.gtpu.n3.ipv6 {
            s.v6 = Some((
                bind_gtpu(IpAddr::V6(a), "gtpu.n3.ipv6").await?,
                IpAddr::V6(a),
            ));
        }
        Ok(s)
    }

    async fn send(&self, outs: Vec<(SocketAddr, Vec<u8>)>) {
        for (to, d) in outs {
            let sock = if to.is_ipv4() { &self.v4 } else { &self.v6 };
            let Some((sock, _)) = sock else {
                debug!("gtpu: no N3 address of {to}'s IP version to send from");
                continue;
            };
            if let Err(e) = sock.send_to(&d, to).await {
                debug!("gtpu: send to {to}: {e}");
            }
        }
    }
}

async fn bind_gtpu(a: IpAddr, key: &str) -> anyhow::Result<UdpSocket> {
    let at = SocketAddr::new(a, 2152);
    UdpSocket::bind(at)
        .await
        .with_context(|| format!("{key}: binding {at}"))
}

async fn recv_on(
    s: &Option<(UdpSocket, IpAddr)>,
    buf: &mut [u8],
) -> (std::io::Result<(usize, SocketAddr)>, IpAddr) {
    match s {
        Some((sock, local)) => (sock.recv_from(buf).await, *local),
        None => std::future::pending().await,
    }
}

struct Fd(RawFd);

impl AsRawFd for Fd {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

pub fn run(cfg: Config) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(serve(cfg))
}

/// Poll the URRs of `seids` (None: the sessions polled periodically) and turn the due
/// reports into Session Report Requests. Sessions refused for lack of report budget go
/// to `retry`, polled again on the next tick.
fn usage_reports(
    n4: &mut N4,
    now: Instant,
    seids: Option<Vec<u64>>,
    retry: &mut Vec<u64>,
) -> Vec<Out> {
    let mut seids = seids.unwrap_or_else(|| n4.sessions.polled_seids());
    seids.append(retry);
    seids.sort_unstable();
    seids.dedup();
    // Each CP function takes at most MAX_OUTSTANDING_REPORTS unanswered reports; the
    // sessions beyond keep measuring and report on a later poll.
    let mut peer_of = std::collections::HashMap::new();
    let mut free = std::collections::HashMap::new();
    for &seid in &seids {
        if let Some((peer, f)) = n4.report_budget(seid) {
            peer_of.insert(seid, peer);
            free.entry(peer).or_insert(f);
        }
    }
    let (due, deferred) = upf::report::poll_sessions(&mut n4.sessions, &seids, now, |seid| {
        let Some(f) = peer_of.get(&seid).and_then(|p| free.get_mut(p)) else {
            return false;
        };
        if *f == 0 {
            return false;
        }
        *f -= 1;
        true
    });
    *retry = deferred;
    let mut out = Vec::new();
    for (seid, reports) in due {
        let Some(s) = n4.sessions.get_arc(seid) else {
            continue;
        };
        let usage_reports = reports
            .iter()
            .filter_map(|r| s.urrs.get(&r.urr_id).map(|u| usage_report(u, r)))
            .collect();
        let req = pfcp::msg::SessionReportRequest {
            report_type: pfcp::ie::Flags::from_bits(&[pfcp::ie::report_type::USAR], 1),
            downlink_data_report: None,
            usage_reports,
            error_indication_report: None,
            load_control_information: None,
            overload_control_information: None,
            additional_usage_reports_information: None,
            pfcpsr_req_flags: None,
            old_cp_fseid: None,
            cause: None,
            other: vec![],
        };
        out.extend(n4.send_report(seid, req, now));
    }
    out
}

async fn serve(cfg: Config) -> anyhow::Result<()> {
    let addr = SocketAddr::new(cfg.n4.address, cfg.n4.port);
    let sock = UdpSocket::bind(addr)
        .await
        .with_context(|| format!("n4.address: binding {addr}"))?;
    // TEIDs upfd allocates encode a direct slot of the data path's uplink table.
    let teid_index = match cfg.datapath.mode {
        DatapathMode::Xdp => {
            let slots = u32::try_from(cfg.limits.max_sessions)
                .unwrap_or(u32::MAX)
                .saturating_add(1024);
            let [lo, hi] = cfg.gtpu.teid_range;
            TeidIndex::new(lo, hi, slots)
        }
        DatapathMode::None => TeidIndex::none(),
    };
    let mut xdp = match cfg.datapath.mode {
        DatapathMode::Xdp => Some(start_xdp(&cfg, teid_index)?),
        DatapathMode::None => None,
    };
    let fastpath: Box<dyn FastPath> = match &xdp {
        Some(x) => Box::new(Shared(x.dp.clone())),
        None => Box::new(NoForwarding(Model::new(
            cfg.limits.max_sessions * 4,
            DataPathConfig::default(),
        ))),
    };
    let mut n4 = build(&cfg, fastpath, teid_index);
    let gtpu = match &xdp {
        Some(_) => GtpuSockets::bind(&cfg).await?,
        None => GtpuSockets::default(),
    };
    // The data path's event ring, read when its epoll fd is readable.
    let queue: Rc<RefCell<VecDeque<Vec<u8>>>> = Rc::new(RefCell::new(VecDeque::new()));
    let ring = match &xdp {
        Some(x) => {
            let q = queue.clone();
            let rb =
                x.dp.borrow()
                    .events(move |d| {
                        q.borrow_mut().push_back(d.to_vec());
                        0
                    })
                    .map_err(|e| anyhow::anyhow!("event ring: {e}"))?;
            // SAFETY: the epoll fd belongs to `rb`, which lives as long as this AsyncFd
            // (both are dropped together at the end of serve()).
            let fd = unsafe {
                AsyncFd::register_with_interest(Fd(rb.epoll_fd()), tokio::io::Interest::READABLE)
            }
            .map_err(|e| anyhow::anyhow!("event ring fd: {e}"))?;
            Some((rb, fd))
        }
        None => None,
    };
    // Routing changes invalidate the data path's next-hop cache; without the
    // notifications the cache is off and every packet asks the kernel FIB.
    let mut nh = NextHops::default();
    let mut watch = match &xdp {
        Some(x) => match crate::routewatch::RouteWatch::open() {
            Ok(w) => {
                nh.by_destination = nexthop_mode(&mut x.dp.borrow_mut());
                Some(w)
            }
            Err(e) => {
                warn!("xdp: no routing notifications ({e}): next-hop cache off");
                if let Err(e) = x.dp.borrow_mut().disable_nexthop_cache() {
                    warn!("xdp: turning the next-hop cache off: {e}");
                }
                None
            }
        },
        None => None,
    };
    // The last settled keying (for the log) and the check of it in flight, with the
    // invalidation count it was asked at.
    let mut nh_keyed_by_destination = nh.by_destination;
    let mut nh_check: Option<(u64, tokio::task::JoinHandle<bool>)> = None;
    let api = match cfg.api.listen {
        Some(a) => Some(
            TcpListener::bind(a)
                .await
                .with_context(|| format!("api.listen: binding {a}"))?,
        ),
        None => None,
    };
    info!(
        "upfd {} up: node {}, N4 {addr}, datapath {:?}{}",
        env!("CARGO_PKG_VERSION"),
        cfg.node_id,
        cfg.datapath.mode,
        cfg.api
            .listen
            .map(|a| format!(", API http://{a}"))
            .unwrap_or_default()
    );
    send_all(&sock, n4.start(Instant::now())).await;
    let mut buf = vec![0u8; 65536];
    let mut gbuf = vec![0u8; 65536];
    let mut gbuf6 = vec![0u8; 65536];
    let mut shutdown = std::pin::pin!(shutdown_signal());
    let mut releasing: Option<Instant> = None;
    let mut poll = tokio::time::interval(cfg.reporting.poll_interval);
    // Sessions with reports due that their SMF had no room for yet.
    let mut retry: Vec<u64> = Vec::new();
    let mut rejections = LogBudget::new();
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let deadline = n4
            .next_deadline()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            r = sock.recv_from(&mut buf) => {
                match r {
                    Ok((n, from)) => {
                        let mut outs = n4.on_datagram(from, &buf[..n], Instant::now());
                        // Whatever else is already queued, then the responses together:
                        // a peer on this machine is woken once for the batch, not once
                        // per response (the wakeup was a quarter of upfd's time when
                        // establishing sessions in the lab). Bounded, so timers and the
                        // data path's events wait for at most N4_BATCH requests.
                        for _ in 1..N4_BATCH {
                            let Ok((n, from)) = sock.try_recv_from(&mut buf) else {
                                break;
                            };
                            outs.extend(n4.on_datagram(from, &buf[..n], Instant::now()));
                        }
                        send_all(&sock, outs).await;
                    }
                    Err(e) => warn!("n4: receive: {e}"),
                }
            }
            (r, local) = async {
                tokio::select! {
                    x = recv_on(&gtpu.v4, &mut gbuf) => x,
                    x = recv_on(&gtpu.v6, &mut gbuf6) => x,
                }
            } => {
                if let (Ok((n, from)), Some(x)) = (r, xdp.as_mut()) {
                    let data = if local.is_ipv4() { &gbuf[..n] } else { &gbuf6[..n] };
                    let (g, o) = x.slow.on_gtpu(from, local, data, &mut n4, Instant::now());
                    gtpu.send(g).await;
                    send_all(&sock, o).await;
                }
            }
            r = async { ring.as_ref().unwrap().1.readable().await }, if ring.is_some() => {
                if let Ok(mut guard) = r {
                    guard.clear_ready();
                }
                if let Some((rb, _)) = &ring {
                    let _ = rb.consume();
                }
                let now = Instant::now();
                let events: Vec<Vec<u8>> = queue.borrow_mut().drain(..).collect();
                if let Some(x) = xdp.as_mut() {
                    for e in events {
                        let outs = x.slow.on_event(&e, &mut n4, now);
                        send_all(&sock, outs).await;
                    }
                    if !x.slow.signalled.is_empty() {
                        let seids = std::mem::take(&mut x.slow.signalled);
                        let outs = usage_reports(&mut n4, now, Some(seids), &mut retry);
                        send_all(&sock, outs).await;
                    }
                }
            }
            r = async { watch.as_ref().unwrap().changed().await }, if watch.is_some() => {
                if let Some(x) = xdp.as_ref() {
                    let mut dp = x.dp.borrow_mut();
                    match r {
                        Ok(_) => {
                            // Invalidate at once, keyed by source and destination (right
                            // whatever changed) until a check finds the FIB's answer
                            // cannot depend on the source. The check dumps every rule and
                            // route, so it runs off this loop: with a large routing table
                            // it takes long, and N4 must not wait for it.
                            if let Err(e) = dp.set_nexthop_by_destination(false) {
                                warn!("xdp: invalidating the next-hop cache: {e}");
                            }
                            nh.invalidations += 1;
                            if nh_check.is_none() {
                                nh_check = Some((nh.invalidations, tokio::task::spawn_blocking(crate::routewatch::source_independent)));
                            }
                        }
                        Err(e) => {
                            // Unwatched from here on: the cache goes off for good.
                            warn!("xdp: routing notifications failed ({e}): next-hop cache off");
                            let _ = dp.disable_nexthop_cache();
                            watch = None;
                        }
                    }
                }
            }
            r = async { (&mut nh_check.as_mut().unwrap().1).await }, if nh_check.is_some() => {
                let asked_at = nh_check.take().map_or(0, |c| c.0);
                if asked_at != nh.invalidations {
                    // Routing changed again while the check ran: ask again.
                    nh_check = Some((nh.invalidations, tokio::task::spawn_blocking(crate::routewatch::source_independent)));
                } else if let Some(x) = xdp.as_ref() {
                    let now = r.unwrap_or(false);
                    let mut dp = x.dp.borrow_mut();
                    if now != nh_keyed_by_destination {
                        log_nexthop_mode(now);
                        nh_keyed_by_destination = now;
                    }
                    if now {
                        if let Err(e) = dp.set_nexthop_by_destination(true) {
                            warn!("xdp: invalidating the next-hop cache: {e}");
                        }
                    }
                    nh.by_destination = now;
                }
            }
            _ = poll.tick() => {
                let now = Instant::now();
                rejections.roll(now, REJECTIONS);
                let outs = usage_reports(&mut n4, now, None, &mut retry);
                send_all(&sock, outs).await;
                if let Some(x) = xdp.as_mut() {
                    x.slow.expire(&n4, now);
                    x.dp.borrow_mut().settle();
                }
            }
            r = async { api.as_ref().unwrap().accept().await }, if api.is_some() => {
                if let Ok((mut conn, _)) = r {
                    let stats = xdp.as_ref().map(|x| x.dp.borrow().stats());
                    let body_metrics = crate::metrics::render(&n4, stats.as_deref(), xdp.as_ref().map(|x| &x.slow), xdp.as_ref().map(|_| NextHops { on: watch.is_some(), ..nh }).as_ref(), xdp.as_ref().map(|x| x.dp.borrow().direct_keys()));
                    let body_status = crate::metrics::status(&n4);
                    let req = read_request_head(&mut conn).await;
                    let line = String::from_utf8_lossy(&req);
                    let (code, ctype, body) = if line.starts_with("GET /metrics") {
                        ("200 OK", "text/plain; version=0.0.4", body_metrics)
                    } else if line.starts_with("GET /status") {
                        ("200 OK", "application/json", body_status)
                    } else {
                        ("404 Not Found", "text/plain", "try /metrics or /status\n".to_string())
                    };
                    let resp = format!("HTTP/1.0 {code}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
                    let _ = tokio::time::timeout(Duration::from_millis(500), conn.write_all(resp.as_bytes())).await;
                }
            }
            _ = tokio::time::sleep_until(deadline.into()) => {
                let outs = n4.on_timer(Instant::now());
                send_all(&sock, outs).await;
            }
            _ = &mut shutdown, if releasing.is_none() => {
                info!("shutting down: asking {} SMF(s) to release within {:?}", n4.associations().len(), cfg.n4.graceful_release_period);
                releasing = Some(Instant::now());
                let outs = n4.release_all(Instant::now());
                send_all(&sock, outs).await;
            }
        }
        for e in n4.take_events() {
            handle_event(e, &mut n4, xdp.as_mut(), &gtpu, &mut rejections).await;
        }
        if releasing.is_some() && n4.all_released() {
            info!("all associations released; exiting");
            if let Some(x) = &xdp {
                log_stats(&x.dp.borrow());
            }
            return Ok(());
        }
    }
}

fn log_stats(dp: &Datapath) {
    let s = dp.stats();
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

const REJECTIONS: &str = "rejected requests (upf_n4_rejections_total counts them all)";

/// At most `PER_SEC` lines a second for one kind of event, the rest counted and said in
/// one line: an SMF retrying against a full UPF must not flood the log.
struct LogBudget {
    window: Instant,
    logged: u32,
    suppressed: u64,
}

impl LogBudget {
    const PER_SEC: u32 = 10;

    fn new() -> Self {
        LogBudget {
            window: Instant::now(),
            logged: 0,
            suppressed: 0,
        }
    }

    /// Once the second is over: say how many lines were left out (`what` names them)
    /// and start a new one.
    fn roll(&mut self, now: Instant, what: &str) {
        if now.duration_since(self.window) >= Duration::from_secs(1) {
            if self.suppressed > 0 {
                info!(
                    "n4: {} more {what} not logged in the last second",
                    self.suppressed
                );
            }
            *self = LogBudget {
                window: now,
                logged: 0,
                suppressed: 0,
            };
        }
    }

    /// Whether to log one more line now.
    fn allow(&mut self, now: Instant, what: &str) -> bool {
        self.roll(now, what);
        if self.logged < Self::PER_SEC {
            self.logged += 1;
            true
        } else {
            self.suppressed += 1;
            false
        }
    }
}

async fn handle_event(
    e: Event,
    n4: &mut N4,
    xdp: Option<&mut Xdp>,
    gtpu: &GtpuSockets,
    rejections: &mut LogBudget,
) {
    match e {
        Event::AssociationUp(n) => info!("n4: association with {n} established"),
        Event::AssociationDown {
            node,
            reason,
            sessions,
        } => info!("n4: association with {node} ended ({reason}); {sessions} session(s) deleted"),
        Event::PeerRestarted { node, sessions } => {
            info!("n4: {node} restarted; its {sessions} session(s) deleted")
        }
        Event::Rejected {
            peer,
            message_type,
            reason,
        } => {
            if rejections.allow(Instant::now(), REJECTIONS) {
                info!(
                    "n4: {} from {peer} rejected: {reason}",
                    pfcp::message_type::name(message_type).unwrap_or("request")
                )
            }
        }
        Event::ReportAnswered { seid, cause } => {
            if !cause.is_acceptance() {
                info!(
                    "n4: Session Report for {seid:#x} answered with Cause {} ({})",
                    cause.0,
                    cause.name()
                )
            }
        }
        Event::Established { seid } => {
            if let Some(x) = xdp {
                let out = x.slow.new_peers(n4, seid);
                gtpu.send(out).await;
            }
        }
        Event::Modified { seid } => {
            if let Some(x) = xdp {
                x.slow.on_modified(seid, n4);
                let out = x.slow.new_peers(n4, seid);
                gtpu.send(out).await;
            }
        }
        Event::EndMarkers { seid, far_id, old } => {
            debug!("n4: session {seid:#x} FAR {far_id}: end markers to the old path");
            if let Some(x) = xdp {
                let out = x.slow.end_markers(&old);
                gtpu.send(out).await;
            }
        }
        Event::DropBuffered { seid } | Event::Deleted { seid } => {
            if let Some(x) = xdp {
                x.slow.discard(seid);
            }
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_budget_allows_ten_lines_a_second_and_counts_the_rest() {
        let t0 = Instant::now();
        let mut b = LogBudget::new();
        let allowed = (0..25).filter(|_| b.allow(t0, REJECTIONS)).count();
        assert_eq!(allowed, 10);
        assert_eq!(b.suppressed, 15);
        // Within the second: still nothing.
        assert!(!b.allow(t0 + Duration::from_millis(900), REJECTIONS));
        // The next second starts afresh (and says what was left out).
        let t1 = t0 + Duration::from_millis(1100);
        b.roll(t1, REJECTIONS);
        assert_eq!((b.logged, b.suppressed), (0, 0));
        assert!(b.allow(t1, REJECTIONS));
    }
}
