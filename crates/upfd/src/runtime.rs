//! Wiring and the event loop: configuration to the N4 node and the data path, then one
//! loop that waits for the next thing to do ([`Wake`]: an N4 datagram, a GTP-U datagram
//! for the slow path, the data path's events or a routing change, the report poll, an
//! HTTP request, an N4 timer, a signal) and hands it to its handler; graceful shutdown
//! on SIGTERM/SIGINT.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::net::UdpSocket;

use upf::alloc::{TeidAllocator, UeIpPools};
use upf::fastpath::teid_index::TeidIndex;
use upf::fastpath::FastPath;
use upf::model::Model;
use upf::n4::{to_ntp, Event, N4Config, Out, N4};
use upf::procedures::{GtpuAddresses, Limits, Resources};
use upf::report::{unix_now, Counted};
use upf::sessions::Sessions;

use crate::api;
use crate::config::{Config, DatapathMode};
use crate::gtpu_sockets::{Datagram, GtpuSockets};
use crate::metrics::N4Metrics;
use crate::overload::N4Queue;
use crate::xdp::{self, Xdp, XdpWake};

pub fn run(cfg: Config) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(serve(cfg))
}

/// The N4 node over a session table on `fastpath`, as the configuration says.
pub(crate) fn build_n4(
    cfg: &Config,
    fastpath: Box<dyn FastPath>,
    teid_index: TeidIndex,
    recovery_time_stamp: u32,
) -> N4 {
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
            network_instances: cfg.ni_addresses(),
        },
        Limits {
            max_pdrs: cfg.limits.max_pdrs_per_session,
            max_fars: cfg.limits.max_fars_per_session,
            max_qers: cfg.limits.max_qers_per_session,
            max_urrs: cfg.limits.max_urrs_per_session,
            max_sdf_filters: cfg.limits.max_sdf_filters_per_pdr,
        },
    );
    let mut res = res;
    res.strict = cfg.n4.strict;
    res.network_instances = cfg.known_network_instances();
    // Checked when the configuration was read.
    res.predefined = cfg.predefined_rules.build().unwrap_or_default();
    let mut sessions = Sessions::new(res, fastpath, cfg.limits.max_sessions);
    sessions.reserve(cfg.limits.max_sessions);
    let n4cfg = N4Config {
        node_id: cfg.node_id(),
        addr: cfg.n4.address,
        recovery_time_stamp,
        features: cfg.up_function_features(),
        allowed_peers: cfg.n4.allowed_peers.clone(),
        smf_peers: cfg.n4.associate_with.clone(),
        heartbeat_interval: cfg.n4.heartbeat_interval,
        t1: cfg.n4.t1,
        n1: cfg.n4.n1,
        cache_ttl: cfg.n4.response_cache_ttl,
        cache_max: cfg.n4.response_cache_max,
        graceful_release_period: cfg.n4.graceful_release_period,
        strict: cfg.n4.strict,
    };
    let mut n4 = N4::new(n4cfg, sessions);
    n4.set_app_stop_after(cfg.applications_stop_after);
    n4
}

/// The data path (not attached yet) and the N4 node over it, with a new Recovery Time
/// Stamp, or the ones of the state given.
fn build(
    cfg: &Config,
    teid_seed: u64,
    recovery_time_stamp: u32,
    running: Option<u32>,
) -> anyhow::Result<(Option<Xdp>, N4)> {
    // TEIDs upfd allocates encode a direct slot of the data path's uplink table.
    let teid_index = xdp::teid_index(cfg, teid_seed);
    let xdp = match cfg.datapath.mode {
        DatapathMode::Xdp => Some(Xdp::start(cfg, teid_index, running)?),
        DatapathMode::None => None,
    };
    let fastpath: Box<dyn FastPath> = match &xdp {
        Some(x) => Box::new(x.dp.clone()),
        None => {
            let mut m = Model::without_traffic(cfg.limits.max_sessions * 4);
            m.reserve(cfg.limits.max_sessions);
            Box::new(m)
        }
    };
    let mut n4 = build_n4(cfg, fastpath, teid_index, recovery_time_stamp);
    // The configured applications, before any session names them.
    let pfds = crate::config::pfd_table(&cfg.applications)
        .map_err(|(path, e)| anyhow::anyhow!("{path}: {e}"))?;
    let ids: Vec<String> = pfds.iter().map(|a| a.id.clone()).collect();
    if !ids.is_empty() {
        n4.set_pfds(pfds, &ids)
            .context("applications: the data path did not take the PFDs")?;
    }
    Ok((xdp, n4))
}

/// Start from the state kept (`state.directory`) if there is a usable one, else clean;
/// attach the data path (replacing the previous upfd's, which forwarded until now) and
/// start keeping the state. See persist.rs for the order of a restart.
fn restore_or_start(
    cfg: &Config,
    loaded: crate::persist::Loaded,
) -> anyhow::Result<(Option<Xdp>, N4, Option<crate::persist::Kept>)> {
    use crate::persist::{self, Kept, Loaded};
    let fresh_seed: u64 = rand::random();
    let mut fresh_rts = to_ntp(unix_now());
    let (dir, saved) = match loaded {
        Loaded::Off => {
            let (xdp, n4) = build_attached(cfg, fresh_seed, fresh_rts)?;
            return Ok((xdp, n4, None));
        }
        Loaded::Clean(dir, after_bad) => {
            if after_bad {
                persist::next_second();
                fresh_rts = to_ntp(unix_now());
            }
            (dir, None)
        }
        Loaded::Restore(dir, saved) => (dir, Some(saved)),
    };
    if let Some(saved) = saved {
        let h = &saved.header;
        let running = saved.counters.as_ref().map(|c| c.map_id);
        let (mut xdp, mut n4) = build(cfg, h.teid_seed, h.recovery_time_stamp, running)?;
        let reused = xdp.as_ref().is_some_and(|x| x.reused);
        // A reused data path's counters go on; a new one's start at zero, and what the
        // old one counted is carried.
        let old = if reused {
            None
        } else {
            persist::old_counters(&saved)
        };
        let before = persist::read_counts(old.as_ref(), &saved);
        let t = Instant::now();
        let counted = |seid: u64, u: &upf::state::SavedUrr| match before.get(&(seid, u.urr_id)) {
            _ if reused => Counted::Kept,
            Some(c) => Counted::Total(*c),
            None => Counted::Unknown,
        };
        match n4.restore(&saved, counted, t) {
            Ok(()) => {
                let mut apps = xdp
                    .as_ref()
                    .filter(|_| !reused)
                    .and_then(|x| persist::adopt_apps(&saved, &x.dp.borrow()));
                if reused {
                    if let Some(x) = &xdp {
                        persist::reconcile(&mut x.dp.borrow_mut());
                    }
                }
                let pins = &cfg.pin_root();
                if let Some(x) = &mut xdp {
                    // Pinned before it forwards: it must outlive this upfd from then on.
                    x.pin(pins);
                    x.attach()?;
                }
                let carried = match &xdp {
                    Some(x) if !reused => {
                        persist::settle_after_swap();
                        if let Some(a) = &mut apps {
                            persist::adopt_apps_again(a, &x.dp.borrow());
                        }
                        persist::carry_rest(&mut n4, old.as_ref(), &saved, &before)
                    }
                    _ => 0,
                };
                // The old data path is off the interfaces and its counts carried.
                if let Some(x) = &xdp {
                    x.unpin_others(pins);
                }
                let counters = counter_table(&xdp)?;
                info!(
                    "state: restored {} session(s) of {} association(s) in {:?} (Recovery Time Stamp {} kept; {}{} URR(s) counted during the handover){}",
                    n4.sessions().len(),
                    saved.associations.len(),
                    t.elapsed(),
                    h.recovery_time_stamp,
                    if reused {
                        "the running data path's counters going on, "
                    } else if old.is_some() {
                        "the previous data path's counts carried, "
                    } else {
                        ""
                    },
                    carried,
                    if saved.torn_tail {
                        "; the journal's last, unanswered batch dropped"
                    } else {
                        ""
                    }
                );
                if let Some(apps) = &saved.pfds {
                    info!(
                        "state: {} application(s) kept with their indices ({} provisioned by PFD Management), {} now",
                        apps.len(),
                        apps.iter().filter(|a| !a.local).count(),
                        n4.sessions().pfds().len()
                    );
                }
                let kept = Kept::resume(dir, cfg, &saved, counters, &mut n4)?;
                return Ok((xdp, n4, Some(kept)));
            }
            Err(why) => {
                // Nothing of it was attached: the new data path and N4 node go.
                persist::set_aside(&dir, &format!("restoring it: {why}"));
                drop(n4);
                drop(xdp);
                persist::next_second();
                fresh_rts = to_ntp(unix_now());
            }
        }
    }
    let (mut xdp, mut n4) = build_attached(cfg, fresh_seed, fresh_rts)?;
    if let Some(x) = &mut xdp {
        let pins = cfg.pin_root();
        x.pin(&pins);
        x.unpin_others(&pins);
    }
    let counters = counter_table(&xdp)?;
    let kept = Kept::start_clean(dir, cfg, fresh_rts, fresh_seed, counters, &mut n4)?;
    Ok((xdp, n4, Some(kept)))
}

/// [`build`], with the data path attached at once (a clean start).
fn build_attached(
    cfg: &Config,
    teid_seed: u64,
    recovery_time_stamp: u32,
) -> anyhow::Result<(Option<Xdp>, N4)> {
    let (mut xdp, n4) = build(cfg, teid_seed, recovery_time_stamp, None)?;
    if let Some(x) = &mut xdp {
        x.attach()?;
    }
    Ok((xdp, n4))
}

/// Where the data path counts URRs, for the state (None: no data path).
fn counter_table(xdp: &Option<Xdp>) -> anyhow::Result<Option<upf::state::CounterTable>> {
    xdp.as_ref()
        .map(|x| {
            x.dp.borrow()
                .counter_table()
                .map_err(|e| anyhow::anyhow!("state: the data path's counters: {e}"))
        })
        .transpose()
}

/// PFCP datagrams handled per wakeup of the event loop, at most.
const N4_BATCH: usize = 16;

/// What the event loop acts on next.
enum Wake {
    /// A datagram on the N4 socket (its octets are in `Daemon::n4_buf`).
    N4(std::io::Result<(usize, SocketAddr)>),
    /// A datagram on a GTP-U socket: for the slow path.
    Gtpu(std::io::Result<Datagram>),
    Xdp(XdpWake),
    /// Time to poll the URRs, expire buffers and settle the direct slots.
    Poll,
    /// An API request (read by its connection's task, api/http.rs), to answer.
    Api(api::http::Call),
    /// An N4 timer (retransmission, heartbeat, release) is due.
    Timer,
    /// The next step of the snapshot being taken (persist.rs).
    Snapshot,
    /// The next step of a `/check` (api/check.rs).
    Check,
    /// QoS monitoring: packets to send, periodic reports due (upf::qos_monitoring).
    Qos,
    Shutdown(Stop),
}

/// The CPU time of the calling thread so far.
fn thread_cpu_time() -> Duration {
    // SAFETY: a zeroed timespec is valid; clock_gettime writes it.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// One PFCP datagram, counted, to the N4 node.
fn on_n4_datagram(
    n4: &mut N4,
    metrics: &mut N4Metrics,
    from: SocketAddr,
    data: &[u8],
    now: Instant,
    requests: &mut Vec<(u8, Instant)>,
) -> Vec<Out> {
    metrics.received(data);
    if let Some(&t) = data.get(1) {
        if pfcp::message_type::is_request(t) {
            requests.push((t, now));
        }
    }
    n4.on_datagram(from, data, now)
}

/// A turn of the event loop longer than this is logged (debug) with what it was.
const SLOW_TURN: Duration = Duration::from_millis(20);

impl Wake {
    fn what(&self) -> &'static str {
        match self {
            Wake::N4(_) => "N4 batch",
            Wake::Gtpu(_) => "GTP-U datagram",
            Wake::Xdp(XdpWake::Events) => "data path events",
            Wake::Xdp(XdpWake::Routing(_)) => "routing change",
            Wake::Poll => "URR poll",
            Wake::Api(_) => "API request",
            Wake::Timer => "N4 timers",
            Wake::Snapshot => "snapshot step",
            Wake::Check => "/check step",
            Wake::Qos => "QoS monitoring",
            Wake::Shutdown(_) => "shutdown",
        }
    }
}

/// upfd running: its sockets, the N4 node and the XDP side.
struct Daemon {
    cfg: Config,
    n4: N4,
    n4_sock: UdpSocket,
    n4_buf: Vec<u8>,
    /// The datagrams queued behind the one that woke the loop (mmsg.rs).
    n4_batch: crate::mmsg::RecvBatch,
    /// The N4 receive queue's fill and drops: the load reported to CP functions.
    n4_queue: N4Queue,
    xdp: Option<Xdp>,
    gtpu: GtpuSockets,
    poll: tokio::time::Interval,
    /// Since when upfd has been asking its SMFs to release (after SIGTERM or SIGINT;
    /// with `state.directory`, SIGINT only).
    releasing: Option<Instant>,
    /// The state kept across restarts (`state.directory`).
    kept: Option<crate::persist::Kept>,
    rejections: LogBudget,
    /// PFCP messages by type and Cause, request latencies (/metrics).
    n4_metrics: N4Metrics,
    /// API requests read by their connections' tasks, for the loop to answer.
    api_calls: tokio::sync::mpsc::Receiver<api::http::Call>,
    /// A `/check` being answered in steps.
    checking: Option<api::check::Checking>,
    started: Instant,
    /// When the release's progress was last said (SIGTERM/SIGINT, see `on_poll`).
    release_said: Option<Instant>,
    /// A second signal came while releasing: end now.
    exit_now: bool,
    /// `UPFD_FAILPOINT` (tests only): a SIGKILL between the journal and the send.
    kill_before_send: Option<KillBeforeSend>,
}

/// `UPFD_FAILPOINT=kill-before-send:<message type>:<n>`: upfd kills itself (SIGKILL)
/// once the n-th batch of N4 messages holding one of that type is in the journal, before
/// any of it is sent: the crash that the response cache in the state is for (a test
/// retransmits and must get the answers it would have got). Not a configuration key:
/// the test that sets it reads upfd's exit.
struct KillBeforeSend {
    message_type: u8,
    left: u32,
}

impl KillBeforeSend {
    const VAR: &'static str = "UPFD_FAILPOINT";

    fn from_env() -> anyhow::Result<Option<KillBeforeSend>> {
        let Ok(v) = std::env::var(Self::VAR) else {
            return Ok(None);
        };
        let parse = || -> Option<KillBeforeSend> {
            let mut f = v.strip_prefix("kill-before-send:")?.split(':');
            let message_type = f.next()?.parse().ok()?;
            let left = f.next()?.parse().ok().filter(|n| *n > 0)?;
            f.next()
                .is_none()
                .then_some(KillBeforeSend { message_type, left })
        };
        match parse() {
            Some(k) => Ok(Some(k)),
            None => anyhow::bail!(
                "environment {}: {v:?}: expected kill-before-send:<message type>:<n>, n from 1",
                Self::VAR
            ),
        }
    }

    /// A batch journaled, about to be sent.
    fn before_send(&mut self, outs: &[Out]) {
        if !outs
            .iter()
            .any(|o| o.data.get(1) == Some(&self.message_type))
        {
            return;
        }
        self.left -= 1;
        if self.left == 0 {
            error!(
                "{}: killing upfd after journaling this batch, before sending it",
                Self::VAR
            );
            // SAFETY: getpid and kill have no preconditions.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
    }
}

async fn serve(cfg: Config) -> anyhow::Result<()> {
    let mut d = Daemon::start(cfg).await?;
    let mut signals = Signals::new()?;
    let out = d.n4.start(Instant::now());
    d.send_n4(out).await;
    loop {
        let wake = d.next(&mut signals).await;
        if let Wake::Shutdown(Stop::Keep) = wake {
            if d.releasing.is_none() && d.kept.as_ref().is_some_and(|k| k.working()) {
                d.exit_keeping_state();
                return Ok(());
            }
        }
        // Timed only for the debug line (two clock reads a turn, one a system call).
        let timed = crate::log::enabled(crate::log::DEBUG)
            .then(|| (wake.what(), Instant::now(), thread_cpu_time()));
        d.handle(wake).await;
        if let Some((what, t, cpu)) = timed {
            let took = t.elapsed();
            if took >= SLOW_TURN {
                // Every SMF waits behind a turn this long: say what it was, and how
                // much of it upfd ran (the rest: other threads and processes had the CPU).
                debug!(
                    "slow turn: {what} took {took:?} ({:?} of it on the CPU)",
                    thread_cpu_time().saturating_sub(cpu)
                );
            }
        }
        if d.exit_now {
            let left = d.n4.association_info();
            warn!(
                "second signal: exiting now, {} association(s) not released ({}); their SMFs will find upfd gone by their heartbeats",
                left.len(),
                describe_associations(&left)
            );
            d.end_released();
            return Ok(());
        }
        if d.releasing.is_some() && d.n4.all_released() {
            info!("all associations released; exiting");
            d.end_released();
            return Ok(());
        }
    }
}

/// How upfd was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// SIGTERM (systemd, Kubernetes, an upgrade): with `state.directory`, exit keeping
    /// the sessions, the data path forwarding until the next upfd takes over.
    Keep,
    /// SIGINT: release every association (the SMFs move their sessions) and end.
    Release,
}

/// Bind the API's listeners (`api.listen`, `api.probe_address`) and serve them on a
/// thread of their own (api/http.rs): TLS, HTTP and slow clients never take the event
/// loop's time. The requests that need upfd's state come to the event loop through the
/// receiver returned.
fn start_api(
    cfg: &crate::config::Api,
) -> anyhow::Result<tokio::sync::mpsc::Receiver<api::http::Call>> {
    use api::http::Listener;
    let token = match &cfg.token_file {
        Some(f) => {
            Some(crate::config::read_token(f).map_err(|e| anyhow::anyhow!("api.token_file: {e}"))?)
        }
        None => None,
    };
    let tls = match (&cfg.tls_cert_file, &cfg.tls_key_file) {
        (Some(c), Some(k)) => Some(api::http::tls_acceptor(c, k)?),
        _ => None,
    };
    let mut listeners = Vec::new();
    for (key, addr, kind) in [
        ("api.listen", cfg.listen, Listener::Main),
        ("api.probe_address", cfg.probe_address, Listener::Probe),
    ] {
        if let Some(a) = addr {
            let l = std::net::TcpListener::bind(a)
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .with_context(|| format!("{key}: binding {a}"))?;
            listeners.push((l, kind));
        }
    }
    let (tx, rx) = tokio::sync::mpsc::channel(cfg.max_connections);
    let settings = api::http::Settings {
        token,
        request_timeout: cfg.request_timeout,
        max_connections: cfg.max_connections,
        tls,
    };
    api::http::spawn_thread(listeners, settings, tx).context("api: starting its thread")?;
    Ok(rx)
}

impl Daemon {
    /// Bind the N4 socket, start the data path (if configured), the N4 node over it, the
    /// GTP-U sockets and the HTTP endpoint.
    async fn start(cfg: Config) -> anyhow::Result<Daemon> {
        let addr = SocketAddr::new(cfg.n4.address, cfg.n4.port);
        let n4_sock = UdpSocket::bind(addr)
            .await
            .with_context(|| format!("n4.address: binding {addr}"))?;
        let b = cfg
            .n4
            .receive_buffer
            .unwrap_or(crate::overload::DEFAULT_RECEIVE_BUFFER);
        crate::overload::set_receive_buffer(&n4_sock, b)
            .with_context(|| format!("n4.receive_buffer: {b}"))?;
        let loaded = crate::persist::load(&cfg);
        let (xdp, n4, kept) = restore_or_start(&cfg, loaded)?;
        let gtpu = match &xdp {
            Some(_) => GtpuSockets::bind(&cfg).await?,
            None => GtpuSockets::default(),
        };
        let api_calls = start_api(&cfg.api)?;
        info!(
            "upfd {} up: node {}, N4 {addr}, datapath {:?}{}",
            env!("CARGO_PKG_VERSION"),
            cfg.node_id,
            cfg.datapath.mode,
            cfg.api
                .listen
                .map(|a| format!(
                    ", API http://{a} ({})",
                    if cfg.api.token_file.is_some() {
                        "subscriber routes need the token of api.token_file"
                    } else {
                        "loopback, no token"
                    }
                ))
                .unwrap_or_default()
                + &cfg
                    .api
                    .probe_address
                    .map(|a| format!(", probes and metrics http://{a}"))
                    .unwrap_or_default()
        );
        let mut poll = tokio::time::interval(cfg.reporting.poll_interval);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Ok(Daemon {
            cfg,
            n4,
            n4_sock,
            n4_buf: vec![0u8; 65536],
            n4_batch: crate::mmsg::RecvBatch::new(N4_BATCH - 1),
            n4_queue: N4Queue::default(),
            xdp,
            gtpu,
            poll,
            releasing: None,
            kept,
            rejections: LogBudget::new(),
            n4_metrics: N4Metrics::default(),
            api_calls,
            checking: None,
            started: Instant::now(),
            release_said: None,
            exit_now: false,
            kill_before_send: KillBeforeSend::from_env()?,
        })
    }

    /// Wait for the next thing to act on.
    async fn next(&mut self, signals: &mut Signals) -> Wake {
        let deadline = self
            .n4
            .next_deadline()
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        // QoS monitoring's packets go out through the data path's GTP-U socket.
        // ... and so do GTP-U path QoS monitoring's Echo Requests (slowpath.rs).
        let qos = self.xdp.as_ref().map(|x| {
            let path = x.slow.path_qos_next_due();
            self.n4.qos_next_due().map_or(path, |t| t.min(path))
        });
        let xdp = async {
            match self.xdp.as_mut() {
                Some(x) => x.next().await,
                None => std::future::pending().await,
            }
        };
        let step = self.kept.as_ref().and_then(|k| k.step_due());
        let check = self.checking.as_ref().map(|c| c.step_due());
        tokio::select! {
            r = self.n4_sock.recv_from(&mut self.n4_buf) => Wake::N4(r),
            r = self.gtpu.recv() => Wake::Gtpu(r),
            w = xdp => Wake::Xdp(w),
            _ = self.poll.tick() => Wake::Poll,
            Some(c) = self.api_calls.recv() => Wake::Api(c),
            _ = tokio::time::sleep_until(deadline.into()) => Wake::Timer,
            stop = signals.next() => Wake::Shutdown(stop),
            // A step at most every other millisecond: N4 waits for at most one.
            _ = tokio::time::sleep_until(step.unwrap_or(deadline).into()), if step.is_some() => Wake::Snapshot,
            // As the snapshot's: a step at most every other millisecond.
            _ = tokio::time::sleep_until(check.unwrap_or(deadline).into()), if check.is_some() => Wake::Check,
            _ = tokio::time::sleep_until(qos.unwrap_or(deadline).into()), if qos.is_some() => Wake::Qos,
        }
    }

    async fn handle(&mut self, wake: Wake) {
        let now = Instant::now();
        match wake {
            Wake::N4(r) => self.on_n4(r, now).await,
            Wake::Gtpu(r) => self.on_gtpu(r, now).await,
            Wake::Xdp(XdpWake::Events) => self.on_data_path_events(now).await,
            Wake::Xdp(XdpWake::Routing(e)) => {
                if let Some(x) = self.xdp.as_mut() {
                    x.nexthops.apply(e, &mut x.dp.borrow_mut());
                }
            }
            Wake::Poll => self.on_poll(now).await,
            Wake::Api(c) => self.answer_api(c),
            Wake::Timer => {
                let out = self.n4.on_timer(now);
                self.send_n4(out).await;
            }
            Wake::Snapshot => {
                if let Some(k) = &mut self.kept {
                    k.step(&self.n4);
                }
            }
            Wake::Check => {
                self.checking = self.checking.take().and_then(|c| c.step(&mut self.n4));
            }
            Wake::Qos => {
                if let Some(x) = self.xdp.as_mut() {
                    let mut probes = x.slow.qos_probes(&mut self.n4, now);
                    let (echoes, reports) = x.slow.path_qos_tick(&mut self.n4, now);
                    probes.extend(echoes);
                    self.gtpu.send(probes).await;
                    self.send_n4(reports).await;
                }
                let out = self.n4.poll_qos(now);
                self.send_n4(out).await;
            }
            Wake::Shutdown(_) if self.releasing.is_some() => self.exit_now = true,
            Wake::Shutdown(stop) => {
                let assocs = self.n4.association_info();
                info!(
                    "shutting down ({}): asking {} SMF(s) to release their sessions within {}: {}; upfd ends when each has released or the period is over (send SIGTERM or SIGINT again to end now)",
                    match stop {
                        Stop::Keep => "SIGTERM",
                        Stop::Release => "SIGINT",
                    },
                    assocs.len(),
                    seconds(self.cfg.n4.graceful_release_period),
                    describe_associations(&assocs)
                );
                self.releasing = Some(now);
                self.release_said = Some(now);
                let out = self.n4.release_all(now);
                self.send_n4(out).await;
            }
        }
        for e in self.n4.take_events() {
            self.on_n4_event(e).await;
        }
        self.persist();
    }

    /// Write what changed to the state's journal (before anything is sent).
    fn persist(&mut self) {
        if let Some(k) = &mut self.kept {
            k.persist(&mut self.n4);
        }
    }

    /// The end of a release (all released, or a second signal): say what the data path
    /// dropped and remove the state (the sessions end with upfd).
    fn end_released(&mut self) {
        if let Some(x) = &self.xdp {
            x.log_drops();
        }
        if let Some(k) = self.kept.take() {
            k.remove();
        }
    }

    /// SIGTERM with the state kept: write it, leave the data path attached and end.
    fn exit_keeping_state(&mut self) {
        self.persist();
        if let Some(x) = &mut self.xdp {
            x.keep_attached();
            x.log_drops();
        }
        info!(
            "exiting with {} session(s) of {} association(s) kept in {}; {}",
            self.n4.sessions().len(),
            self.n4.associations().len(),
            self.cfg
                .state
                .directory
                .as_ref()
                .map(|d| d.display().to_string())
                .unwrap_or_default(),
            while_away(self.cfg.datapath.mode)
        );
    }

    async fn send_n4(&mut self, outs: Vec<Out>) {
        self.persist();
        if let Some(k) = &mut self.kill_before_send {
            k.before_send(&outs);
        }
        for o in &outs {
            self.n4_metrics.sent(&o.data);
        }
        // In one system call; what the kernel did not take now (a full send buffer,
        // an error) one by one, waiting.
        let batch: Vec<(SocketAddr, &[u8])> =
            outs.iter().map(|o| (o.to, o.data.as_slice())).collect();
        let sent = crate::mmsg::send_batch(&self.n4_sock, &batch);
        for o in &outs[sent..] {
            if let Err(e) = self.n4_sock.send_to(&o.data, o.to).await {
                warn!("n4: send to {}: {e}", o.to);
            }
        }
    }

    /// A PFCP datagram, then whatever else is already queued (at most N4_BATCH), then
    /// the responses together: a peer on this machine is woken once for the batch, not
    /// once per response (the wakeup was a quarter of upfd's time when establishing
    /// sessions in the lab). Bounded, so timers and the data path's events wait for at
    /// most N4_BATCH requests.
    async fn on_n4(&mut self, r: std::io::Result<(usize, SocketAddr)>, now: Instant) {
        let (n, from) = match r {
            Ok(x) => x,
            Err(e) => {
                warn!("n4: receive: {e}");
                return;
            }
        };
        self.measure_load(now);
        // The requests of the batch and when each arrived, for their latency.
        let mut requests: Vec<(u8, Instant)> = Vec::new();
        let data = &self.n4_buf[..n];
        let (n4, metrics) = (&mut self.n4, &mut self.n4_metrics);
        let mut outs = on_n4_datagram(n4, metrics, from, data, now, &mut requests);
        // What is queued behind it, in one system call.
        match self.n4_batch.receive(&self.n4_sock, N4_BATCH - 1) {
            Ok(_) => {
                let now = Instant::now();
                for (from, data) in self.n4_batch.datagrams() {
                    outs.extend(on_n4_datagram(n4, metrics, from, data, now, &mut requests));
                }
            }
            Err(e) => warn!("n4: receive: {e}"),
        }
        self.send_n4(outs).await;
        let sent = Instant::now();
        for (t, at) in requests {
            self.n4_metrics.answered(t, sent.duration_since(at));
        }
    }

    /// The load now (queue and session table), for the N4 node's reports and its
    /// overload decisions; logged when overload starts and ends.
    fn measure_load(&mut self, now: Instant) {
        let was = self.n4.overloaded();
        let load = self.n4_queue.measure(
            &self.n4_sock,
            self.n4.sessions().len(),
            self.cfg.limits.max_sessions,
        );
        self.n4.set_load(load, now);
        match (was, self.n4.overloaded()) {
            (false, true) => warn!(
                "n4: overloaded (receive queue {} of {} octets): new sessions refused with Cause 74 until it is under a quarter full",
                self.n4_queue.queued, self.n4_queue.size
            ),
            (true, false) => info!("n4: overload over; new sessions accepted"),
            _ => {}
        }
    }

    /// GTP-U for upfd: Echo, Error Indication, a G-PDU for an unknown TEID.
    async fn on_gtpu(&mut self, r: std::io::Result<Datagram>, now: Instant) {
        let (Ok(d), Some(x)) = (r, self.xdp.as_mut()) else {
            return;
        };
        let (g, o) = x.slow.on_gtpu(d.from, d.local, &d.data, &mut self.n4, now);
        // Answered from the address it was sent to.
        self.gtpu.send_from(Some(d.local), g).await;
        self.send_n4(o).await;
    }

    /// The data path's events: buffered packets, then the sessions whose volume quota or
    /// threshold it signalled, whose URRs are polled now.
    async fn on_data_path_events(&mut self, now: Instant) {
        let Some(x) = self.xdp.as_mut() else {
            return;
        };
        let mut outs = Vec::new();
        for e in x.take_events() {
            match e {
                // Answered through the data path (borrowed for that alone: N4's work
                // in on_event may read it).
                upf::fastpath::Event::Redirected(b) => {
                    x.slow.redirect(b, &self.n4, &mut *x.dp.borrow_mut(), now)
                }
                e => outs.extend(x.slow.on_event(e, &mut self.n4, now)),
            }
        }
        let signalled = std::mem::take(&mut x.slow.signalled);
        if !signalled.is_empty() {
            outs.extend(self.n4.poll_reports(now, Some(signalled)));
        }
        self.send_n4(outs).await;
    }

    /// The periodic poll: usage reports due, buffers past their duration, direct slots
    /// to settle.
    async fn on_poll(&mut self, now: Instant) {
        self.rejections.roll(now, REJECTIONS);
        self.say_release_progress(now);
        self.measure_load(now);
        let outs = self.n4.poll_reports(now, None);
        self.send_n4(outs).await;
        if let Some(x) = self.xdp.as_mut() {
            x.slow.expire(&self.n4, now);
            x.dp.borrow_mut().settle();
        }
    }

    /// Answer an API request from upfd's state now (its connection's task writes it);
    /// `/check` in steps.
    fn answer_api(&mut self, call: api::http::Call) {
        if api::views::is_check(&call.req) {
            if self.checking.is_some() {
                // http.rs lets one through at a time; this is not it.
                let busy = api::Response::error(429, "a /check is running: try again");
                let _ = call.reply.send(busy.into());
            } else {
                self.checking = Some(api::check::Checking::begin(&mut self.n4, call.reply));
            }
            return;
        }
        let x = self.xdp.as_ref();
        let stats = x.map(|x| x.dp.borrow().stats());
        let nexthops = x.map(|x| x.nexthops.state());
        let ready = if self.releasing.is_some() {
            Err("shutting down: releasing the associations".to_string())
        } else if x.is_some_and(|x| x.modes.is_empty()) {
            Err("the data path is not attached".to_string())
        } else {
            Ok(())
        };
        let cx = api::views::Context {
            metrics: crate::metrics::Sources {
                n4: &self.n4,
                n4_metrics: &self.n4_metrics,
                n4_queue: &self.n4_queue,
                datapath: stats.as_deref(),
                attached: x.map(|x| x.modes.as_slice()).unwrap_or_default(),
                slow: x.map(|x| &x.slow),
                nexthops: nexthops.as_ref(),
                direct: x.map(|x| x.dp.borrow().direct_keys()),
            },
            ready,
            node_id: &self.cfg.node_id,
            n4_address: SocketAddr::new(self.cfg.n4.address, self.cfg.n4.port),
            datapath_mode: match self.cfg.datapath.mode {
                DatapathMode::Xdp => "xdp",
                DatapathMode::None => "none",
            },
            state_directory: self.cfg.state.directory.as_deref(),
            started: self.started,
            now: Instant::now(),
        };
        let _ = call.reply.send(api::views::route(&call.req, &cx));
    }

    /// While releasing: every 5 s, which associations upfd still waits for.
    fn say_release_progress(&mut self, now: Instant) {
        let (Some(since), Some(said)) = (self.releasing, self.release_said) else {
            return;
        };
        if now.duration_since(said) < Duration::from_secs(5) {
            return;
        }
        self.release_said = Some(now);
        let left = self.n4.association_info();
        let period = self.cfg.n4.graceful_release_period;
        info!(
            "still waiting for {} SMF(s) to release: {}; {} of the {} period left (SIGTERM or SIGINT again ends now)",
            left.len(),
            describe_associations(&left),
            seconds(period.saturating_sub(now.duration_since(since))),
            seconds(period)
        );
    }

    /// What the N4 node tells the rest of upfd.
    async fn on_n4_event(&mut self, e: Event) {
        match e {
            Event::AssociationUp(n) => info!("n4: association with {n} established"),
            Event::AssociationDown {
                node,
                reason,
                sessions,
            } => {
                info!("n4: association with {node} ended ({reason}); {sessions} session(s) deleted")
            }
            Event::PeerRestarted { node, sessions } => {
                info!("n4: {node} restarted; its {sessions} session(s) deleted")
            }
            Event::RecoveryTimeStampChanged {
                node,
                association,
                heartbeat,
            } => {
                info!(
                    "n4: {node}'s heartbeat has Recovery Time Stamp {heartbeat}, its association {association}: sessions kept (as OAI's SMF needs; n4.strict takes it as a restart; upf_n4_recovery_time_stamp_changes_total counts them)"
                )
            }
            Event::UnknownNetworkInstance { peer, name } => info!(
                "n4: {peer} named Network Instance {name:?}, which no network_instances or ue_pools entry names: accepted (n4.strict refuses; upf_n4_unknown_network_instances_total counts the requests)"
            ),
            Event::Tolerated { peer, what, detail } => info!(
                "n4: {peer} sent what TS 29.244 does not allow ({detail}): accepted, {} (n4.strict refuses; upf_n4_tolerated_total{{deviation=\"{}\"}} counts the requests)",
                what.meaning(),
                what.label()
            ),
            Event::PfdsChanged { peer, applications } => info!(
                "n4: PFD Management from {peer}: PFDs of {} application(s) changed{}",
                applications.len(),
                if applications.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", applications.join(", "))
                }
            ),
            Event::Rejected {
                peer,
                message_type,
                reason,
            } => {
                if self.rejections.allow(Instant::now(), REJECTIONS) {
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
                if let Some(x) = self.xdp.as_mut() {
                    let out = x.slow.new_peers(&self.n4, seid);
                    self.gtpu.send(out).await;
                }
            }
            Event::Modified { seid } => {
                if let Some(x) = self.xdp.as_mut() {
                    let now = Instant::now();
                    x.slow
                        .on_modified(seid, &self.n4, &mut *x.dp.borrow_mut(), now);
                    let out = x.slow.new_peers(&self.n4, seid);
                    self.gtpu.send(out).await;
                }
            }
            Event::EndMarkers { seid, far_id, old } => {
                debug!("n4: session {seid:#x} FAR {far_id}: end markers to the old path");
                if let Some(x) = self.xdp.as_mut() {
                    let out = x.slow.end_markers(&old);
                    self.gtpu.send(out).await;
                }
            }
            Event::DropBuffered { seid } | Event::Deleted { seid } => {
                if let Some(x) = self.xdp.as_mut() {
                    x.slow.discard(seid);
                }
            }
        }
    }
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

/// What happens to the user plane between this upfd's exit (keeping the sessions) and
/// the next one's start, for each data path mode.
fn while_away(mode: DatapathMode) -> &'static str {
    match mode {
        DatapathMode::Xdp => "the data path keeps forwarding until the next upfd takes over",
        DatapathMode::None => {
            "no data path (datapath.mode: none): nothing forwards until the next upfd restores them"
        }
    }
}

/// A duration for people, in whole seconds (rounded): "25 s", not "24.992646041s".
fn seconds(d: Duration) -> String {
    format!("{} s", (d.as_millis() + 500) / 1000)
}

/// "10.0.0.2 (120 sessions), smf.example (3 sessions)".
fn describe_associations(a: &[upf::n4::AssociationInfo]) -> String {
    if a.is_empty() {
        return "none".into();
    }
    a.iter()
        .map(|a| format!("{} at {} ({} sessions)", a.node_id, a.address, a.sessions))
        .collect::<Vec<_>>()
        .join(", ")
}

/// SIGTERM and SIGINT, every time they come (a second one ends a graceful release).
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate()).context("handling SIGTERM")?,
            int: signal(SignalKind::interrupt()).context("handling SIGINT")?,
        })
    }

    async fn next(&mut self) -> Stop {
        tokio::select! {
            _ = self.int.recv() => Stop::Release,
            _ = self.term.recv() => Stop::Keep,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_are_said_in_whole_seconds_and_the_exit_as_the_mode_makes_it() {
        assert_eq!(seconds(Duration::from_nanos(24_992_646_041)), "25 s");
        assert_eq!(seconds(Duration::from_secs(30)), "30 s");
        assert_eq!(seconds(Duration::from_millis(400)), "0 s");
        assert!(while_away(DatapathMode::Xdp).contains("keeps forwarding"));
        assert!(!while_away(DatapathMode::None).contains("forwarding"));
    }

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
