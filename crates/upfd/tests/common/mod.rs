//! Shared helpers for upfd's integration tests: run the `upfd` binary of this build on a
//! temporary configuration and read its log.
//!
//! ```ignore
//! mod common;
//! let upfd = common::Upfd::builder().ue_pool("", "10.45.0.0/16").start();
//! // upfd.n4 is its PFCP address; upfd.log() its stderr so far.
//! ```
//!
//! [`Upfd`] is a guard: dropping it kills the process and removes the temporary directory.

#![allow(dead_code)]

pub mod lab;
pub mod tap;

use std::io::{BufRead, BufReader};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a wait for something that will happen may take before the test gives up:
/// long enough for a machine busy with other work, returned from as soon as it happens.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A private temporary directory, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .subsec_nanos();
        let p = std::env::temp_dir().join(format!(
            "{tag}-{}-{}-{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p).expect("creating a temporary directory");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Lines a child process writes, collected by a thread per stream.
#[derive(Clone, Default)]
pub struct Output(Arc<Mutex<String>>, Arc<Mutex<Vec<JoinHandle<()>>>>);

impl Output {
    /// Collect `r` line by line until it closes.
    pub fn collect(r: impl std::io::Read + Send + 'static) -> Output {
        let out = Output::default();
        out.add(r);
        out
    }

    /// Also collect `r` (e.g. a child's stderr besides its stdout), line by line.
    pub fn add(&self, r: impl std::io::Read + Send + 'static) {
        let o = self.0.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(r).lines() {
                let Ok(line) = line else { break };
                let mut s = o.lock().unwrap();
                s.push_str(&line);
                s.push('\n');
            }
        });
        self.1.lock().unwrap().push(reader);
    }

    /// Wait until every stream has closed and its last line is in (call it once the
    /// process has ended: the streams then close at once, however busy the machine);
    /// false if one is still open after `timeout` (e.g. a grandchild holds it).
    pub fn drain(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        loop {
            let mut readers = self.1.lock().unwrap();
            if readers.iter().all(|r| r.is_finished()) {
                for r in readers.drain(..) {
                    let _ = r.join();
                }
                return true;
            }
            drop(readers);
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A child's stdout and stderr (both piped), interleaved by line.
    pub fn of_child(child: &mut Child) -> Output {
        let out = Output::default();
        if let Some(o) = child.stdout.take() {
            out.add(o);
        }
        if let Some(e) = child.stderr.take() {
            out.add(e);
        }
        out
    }

    pub fn text(&self) -> String {
        self.0.lock().unwrap().clone()
    }

    /// Wait until the output contains `needle`; false on timeout.
    pub fn wait_for(&self, needle: &str, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        loop {
            if self.text().contains(needle) {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last `n` lines, for failure messages.
    pub fn tail(&self, n: usize) -> String {
        let t = self.text();
        let lines: Vec<&str> = t.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

/// What goes into upfd's configuration file (deploy/config/upfd.yaml documents the keys).
#[derive(Clone, Debug)]
pub struct UpfdBuilder {
    pub address: IpAddr,
    /// 0: a free port is picked.
    pub port: u16,
    pub allowed_peers: Vec<String>,
    pub heartbeat_interval: String,
    pub n3: Ipv4Addr,
    pub n3_v6: Option<std::net::Ipv6Addr>,
    /// (network instance, prefix)
    pub ue_pools: Vec<(String, String)>,
    pub log_level: String,
    /// Appended verbatim at the top level (e.g. a `limits:` block).
    pub extra_yaml: String,
    pub start_timeout: Duration,
    /// `n4.receive_buffer` (octets), if set.
    pub receive_buffer: Option<usize>,
    /// The upfd binary to run (None: this build's).
    pub binary: Option<PathBuf>,
    /// `n4.graceful_release_period`, if set (e.g. "1s").
    pub graceful_release_period: Option<String>,
    /// Environment variables set for upfd.
    pub env: Vec<(String, String)>,
}

impl Default for UpfdBuilder {
    fn default() -> Self {
        UpfdBuilder {
            address: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7)),
            port: 0,
            allowed_peers: vec!["127.0.0.0/8".into()],
            heartbeat_interval: "10s".into(),
            n3: Ipv4Addr::new(127, 0, 0, 7),
            n3_v6: None,
            ue_pools: Vec::new(),
            log_level: "info".into(),
            extra_yaml: String::new(),
            // Ends as soon as upfd answers: generous for a busy machine.
            start_timeout: Duration::from_secs(60),
            receive_buffer: None,
            binary: None,
            graceful_release_period: None,
            env: Vec::new(),
        }
    }
}

impl UpfdBuilder {
    pub fn address(mut self, a: IpAddr) -> Self {
        self.address = a;
        self
    }
    pub fn port(mut self, p: u16) -> Self {
        self.port = p;
        self
    }
    pub fn heartbeat_interval(mut self, d: &str) -> Self {
        self.heartbeat_interval = d.into();
        self
    }
    pub fn n3(mut self, a: Ipv4Addr) -> Self {
        self.n3 = a;
        self
    }
    pub fn n3_v6(mut self, a: std::net::Ipv6Addr) -> Self {
        self.n3_v6 = Some(a);
        self
    }
    pub fn ue_pool(mut self, network_instance: &str, prefix: &str) -> Self {
        self.ue_pools.push((network_instance.into(), prefix.into()));
        self
    }
    pub fn log_level(mut self, l: &str) -> Self {
        self.log_level = l.into();
        self
    }
    pub fn receive_buffer(mut self, octets: usize) -> Self {
        self.receive_buffer = Some(octets);
        self
    }
    pub fn graceful_release_period(mut self, d: &str) -> Self {
        self.graceful_release_period = Some(d.into());
        self
    }
    /// Run another upfd binary (an upgrade).
    pub fn binary(mut self, p: &Path) -> Self {
        self.binary = Some(p.to_path_buf());
        self
    }
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }
    pub fn extra_yaml(mut self, y: &str) -> Self {
        self.extra_yaml.push_str(y);
        self
    }

    /// The configuration file for N4 port `port`.
    pub fn yaml(&self, port: u16) -> String {
        let peers: Vec<String> = self
            .allowed_peers
            .iter()
            .map(|p| format!("{p:?}"))
            .collect();
        let mut y = format!(
            "node_id: \"{a}\"\n\
             n4:\n  address: \"{a}\"\n  port: {port}\n  allowed_peers: [{peers}]\n  \
             heartbeat_interval: {hb}\n\
             gtpu:\n  n3: {{ ipv4: {n3} }}\n\
             ue_pools:\n",
            a = self.address,
            peers = peers.join(", "),
            hb = self.heartbeat_interval,
            n3 = self.n3,
        );
        if let Some(g) = &self.graceful_release_period {
            y = y.replace(
                "gtpu:\n",
                &format!("  graceful_release_period: {g}\ngtpu:\n"),
            );
        }
        if let Some(b) = self.receive_buffer {
            y = y.replace("gtpu:\n", &format!("  receive_buffer: {b}\ngtpu:\n"));
        }
        if self.ue_pools.is_empty() {
            y = y.replace("ue_pools:\n", "ue_pools: []\n");
        }
        if let Some(v6) = self.n3_v6 {
            let n3 = format!("n3: {{ ipv4: {} }}", self.n3);
            y = y.replace(&n3, &format!("n3: {{ ipv4: {}, ipv6: \"{v6}\" }}", self.n3));
        }
        for (ni, prefix) in &self.ue_pools {
            y.push_str(&format!(
                "  - {{ network_instance: {ni:?}, prefix: {prefix:?} }}\n"
            ));
        }
        y.push_str(&format!(
            "datapath:\n  mode: none\nlog:\n  level: {}\n",
            self.log_level
        ));
        y.push_str(&self.extra_yaml);
        y
    }

    /// Start upfd; panics (with its log) if it does not answer a PFCP Heartbeat in time.
    pub fn start(self) -> Upfd {
        let dir = TempDir::new("upfd-test");
        let mut last_log = String::new();
        // A picked free port can be taken by someone else before upfd binds it: retry.
        for _ in 0..5 {
            let port = if self.port != 0 {
                self.port
            } else {
                free_udp_port(self.address)
            };
            let cfg = dir.0.join("upfd.yaml");
            std::fs::write(&cfg, self.yaml(port)).expect("writing upfd.yaml");
            let bin = self
                .binary
                .clone()
                .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_upfd")));
            let mut child = Command::new(bin)
                .arg("--config")
                .arg(&cfg)
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("starting upfd");
            let log = Output::collect(child.stderr.take().unwrap());
            let n4 = SocketAddr::new(self.address, port);
            let end = Instant::now() + self.start_timeout;
            loop {
                if let Ok(Some(status)) = child.try_wait() {
                    log.drain(PATIENCE);
                    last_log = log.text();
                    if last_log.contains("in use") && self.port == 0 {
                        break;
                    }
                    panic!("upfd exited ({status}) while starting:\n{last_log}");
                }
                if heartbeat(n4, Duration::from_millis(200)) {
                    return Upfd {
                        child,
                        n4,
                        log,
                        _dir: dir,
                    };
                }
                if Instant::now() >= end {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "upfd did not answer a Heartbeat on {n4} within {:?}:\n{}",
                        self.start_timeout,
                        log.text()
                    );
                }
            }
        }
        panic!("upfd could not bind a free N4 port:\n{last_log}");
    }
}

/// A running upfd, killed on drop.
pub struct Upfd {
    child: Child,
    /// Its N4 (PFCP) address.
    pub n4: SocketAddr,
    log: Output,
    _dir: TempDir,
}

impl Upfd {
    pub fn builder() -> UpfdBuilder {
        UpfdBuilder::default()
    }

    /// Its stderr (the log) so far.
    pub fn log(&self) -> String {
        self.log.text()
    }

    /// Wait until its log contains `needle`; false on timeout.
    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        self.log.wait_for(needle, timeout)
    }

    pub fn log_tail(&self, n: usize) -> String {
        self.log.tail(n)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Send `signal` (libc::SIGKILL, SIGTERM ...) and wait up to `timeout` for the end;
    /// whether it ended. Once it has, [`Upfd::log`] holds all it wrote.
    pub fn stop(&mut self, signal: libc::c_int, timeout: Duration) -> bool {
        stop_and_drain(&mut self.child, &self.log, signal, timeout)
    }

    /// Send `signal` (SIGSTOP, SIGCONT ...) without waiting for anything.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }
}

/// Send `signal` to `child` and wait up to `timeout` for it to end; whether it did.
/// Its output may still be on its way: with the [`Output`] at hand, use
/// [`stop_and_drain`].
pub fn stop_child(child: &mut Child, signal: libc::c_int, timeout: Duration) -> bool {
    if !signal_and_wait(child, signal, timeout) {
        return false;
    }
    // Let the reader thread drain stderr (best effort: the Output is not at hand).
    std::thread::sleep(Duration::from_millis(50));
    true
}

/// [`stop_child`], then wait until `out` has all `child` wrote (its streams closed).
pub fn stop_and_drain(
    child: &mut Child,
    out: &Output,
    signal: libc::c_int,
    timeout: Duration,
) -> bool {
    signal_and_wait(child, signal, timeout) && out.drain(PATIENCE)
}

fn signal_and_wait(child: &mut Child, signal: libc::c_int, timeout: Duration) -> bool {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

impl Drop for Upfd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A UDP port free on `ip` at the time of asking.
pub fn free_udp_port(ip: IpAddr) -> u16 {
    UdpSocket::bind((ip, 0))
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("binding a UDP port")
}

/// A TCP port free on all addresses at the time of asking.
pub fn free_tcp_port() -> u16 {
    std::net::TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))
        .and_then(|s| s.local_addr())
        .map(|a| a.port())
        .expect("binding a TCP port")
}

/// Send a PFCP Heartbeat Request (clause 7.4.2.1) to `to`; true if a Heartbeat Response
/// with the same sequence number comes back within `timeout`.
pub fn heartbeat(to: SocketAddr, timeout: Duration) -> bool {
    heartbeat_time_stamp(to, timeout).is_some()
}

/// The Recovery Time Stamp `to` answers a Heartbeat Request with, asked again each second
/// (a datagram or its answer may be lost on a busy machine) for up to [`PATIENCE`].
pub fn recovery_time_stamp(to: SocketAddr) -> Option<u32> {
    let end = Instant::now() + PATIENCE;
    loop {
        if let Some(ts) = heartbeat_time_stamp(to, Duration::from_secs(1)) {
            return Some(ts);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// [`heartbeat`], returning the Recovery Time Stamp of the response.
pub fn heartbeat_time_stamp(to: SocketAddr, timeout: Duration) -> Option<u32> {
    let local: SocketAddr = if to.is_ipv4() {
        (Ipv4Addr::LOCALHOST, 0).into()
    } else {
        (std::net::Ipv6Addr::LOCALHOST, 0).into()
    };
    let sock = UdpSocket::bind(local).ok()?;
    let _ = sock.set_read_timeout(Some(timeout));
    let seq = 0x00ab_cdef;
    let req = pfcp::msg::emit(
        &pfcp::HeaderRepr::node(pfcp::message_type::HEARTBEAT_REQUEST, seq),
        &pfcp::msg::HeartbeatRequest {
            recovery_time_stamp: 0xe000_0000,
            source_ip_address: None,
            other: Vec::new(),
        },
    );
    sock.send_to(&req, to).ok()?;
    let mut buf = [0u8; 2048];
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        let (n, _) = sock.recv_from(&mut buf).ok()?;
        if let Ok((h, pfcp::msg::Msg::HeartbeatResponse(r))) = pfcp::msg::Msg::parse(&buf[..n]) {
            if h.sequence == seq {
                return Some(r.recovery_time_stamp);
            }
        }
    }
    None
}
