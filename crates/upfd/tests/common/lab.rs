//! upfd with its XDP data path in the lab of `upfbench lab` (namespaces gnb, upf, dn, smf),
//! driven by the SMF emulator over the N4 veth, with the gNB/UE emulator in gnb: what the
//! end-to-end tests of tests/lab.rs stand on.
//!
//! Everything here is bounded in time, and every process and namespace goes away on drop.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream, UdpSocket};
use std::process::{Child, Command, Output as ProcOutput, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pfcp::msg::{Msg, SessionReportRequest};
use upfbench::gnb::{Gnb, GnbStats, UeSession};
use upfbench::lab::{addr, in_netns, Lab, Ns};
use upfbench::report::Direction;
use upfbench::smf::{Pace, PhaseReport, Smf, SmfConfig, Timers};

use super::{Output, TempDir};

/// Whether this process can build a lab (root).
pub fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("not root: the lab tests need network namespaces and XDP; skipping");
    }
    root
}

/// The lab tests of one binary run one at a time: each has the generators, upf's
/// forwarding CPU and the lab's fixed addresses (inside its own namespaces) to itself.
pub fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// upfd's API (/metrics) address inside upf.
pub const API: &str = "192.168.4.2:9100";

/// The bearer token of the lab upfd's subscriber routes (its API is not on loopback,
/// so upfd requires one: `api.token_file`). [`http_get_any`] sends it.
pub const API_TOKEN: &str = "lab-api-token";

/// What differs between the tests' upfd configurations.
#[derive(Clone, Debug)]
pub struct UpfdOptions {
    /// `buffering:` keys, e.g. `packets_per_session: 50`.
    pub buffering: Vec<String>,
    /// N9: (address, interface) of a second GTP-U endpoint towards other UPFs.
    pub n9: Option<(Ipv4Addr, String)>,
    /// Give N3 the lab's IPv6 address too (GTP-U over IPv6 towards IPv6 gNBs).
    pub n3_ipv6: bool,
    pub error_indications_per_sec: u32,
    pub poll_interval: &'static str,
    /// `state.directory`: sessions kept across restarts.
    pub state_dir: Option<std::path::PathBuf>,
    /// The upfd binary (None: this build's).
    pub binary: Option<std::path::PathBuf>,
    /// `limits.max_sessions` (None: the default, a million).
    pub max_sessions: Option<usize>,
    /// `state.reuse_datapath`: false makes a restart load a new data path, as after an
    /// upgrade that changed `bpf/`.
    pub reuse_datapath: bool,
    /// `state.pin_directory` (with `state_dir`): on a [`Bpffs`] the test mounted.
    pub pin_directory: Option<std::path::PathBuf>,
    /// `cpus`: the CPUs upfd runs on (empty: any).
    pub cpus: Vec<usize>,
    /// More `datapath:` keys, a line each, e.g. `mtu: { n3: 1500 }`.
    pub datapath: Vec<String>,
}

impl Default for UpfdOptions {
    fn default() -> Self {
        UpfdOptions {
            buffering: Vec::new(),
            n9: None,
            n3_ipv6: false,
            error_indications_per_sec: 10,
            poll_interval: "100ms",
            state_dir: None,
            binary: None,
            max_sessions: None,
            reuse_datapath: true,
            pin_directory: None,
            cpus: Vec::new(),
            datapath: Vec::new(),
        }
    }
}

/// A BPF filesystem the test mounts where upfd pins its data path (`state.pin_directory`),
/// as a host has one at /sys/fs/bpf: `ip netns exec` gives upfd a /sys of its own,
/// without it, but sees this one (mounted in the test's mount namespace, whose mounts it
/// receives). Unmounted on drop, which frees what is still pinned.
pub struct Bpffs(TempDir);

impl Bpffs {
    pub fn mount(tag: &str) -> Bpffs {
        let dir = TempDir::new(tag);
        let c = std::ffi::CString::new(dir.0.as_os_str().as_encoded_bytes()).expect("a path");
        // SAFETY: NUL-terminated strings we own; no data.
        let r = unsafe {
            libc::mount(
                c"bpf".as_ptr(),
                c.as_ptr(),
                c"bpf".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        assert_eq!(
            r,
            0,
            "mount -t bpf bpf {}: {}",
            dir.0.display(),
            std::io::Error::last_os_error()
        );
        Bpffs(dir)
    }

    pub fn path(&self) -> &std::path::Path {
        &self.0 .0
    }
}

impl Drop for Bpffs {
    fn drop(&mut self) {
        // Before the directory goes (TempDir's drop, after this).
        if let Ok(c) = std::ffi::CString::new(self.0 .0.as_os_str().as_encoded_bytes()) {
            // SAFETY: a NUL-terminated path we own.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
    }
}

/// upfd running in the lab's upf namespace with `mode: xdp` on n3 and n6; killed on drop.
pub struct LabUpfd {
    child: Child,
    log: Output,
    upf_ns: String,
    /// The file of `api.token_file`.
    token_file: std::path::PathBuf,
    _dir: TempDir,
}

impl LabUpfd {
    pub fn start(lab: &Lab, o: &UpfdOptions) -> LabUpfd {
        let dir = TempDir::new("upfd-lab");
        let token_file = dir.0.join("api-token");
        std::fs::write(&token_file, API_TOKEN).expect("writing the API token");
        let mut y = format!(
            "node_id: \"{n4}\"\n\
             n4: {{ address: \"{n4}\", port: 8805, allowed_peers: [\"192.168.4.0/24\"], heartbeat_interval: 30s }}\n\
             gtpu:\n  n3: {{ ipv4: {n3}{v6} }}\n",
            n4 = addr::UPF_N4,
            n3 = addr::UPF_N3,
            v6 = if o.n3_ipv6 {
                format!(", ipv6: \"{}\"", addr::UPF_N3_V6)
            } else {
                String::new()
            },
        );
        if let Some((a, _)) = &o.n9 {
            y.push_str(&format!("  n9: {{ ipv4: {a} }}\n"));
        }
        y.push_str(&format!(
            "ue_pools:\n  - {{ network_instance: \"\", prefix: 10.46.0.0/16 }}\n\
             datapath:\n  mode: xdp\n  n3_interface: n3\n  n6_interface: n6\n  \
             error_indications_per_sec: {}\n",
            o.error_indications_per_sec
        ));
        if let Some((_, i)) = &o.n9 {
            y.push_str(&format!("  n9_interface: {i}\n"));
        }
        for d in &o.datapath {
            y.push_str(&format!("  {d}\n"));
        }
        if !o.buffering.is_empty() {
            y.push_str("buffering:\n");
            for b in &o.buffering {
                y.push_str(&format!("  {b}\n"));
            }
        }
        y.push_str(&format!(
            "reporting: {{ poll_interval: {} }}\napi: {{ listen: \"{API}\", token_file: {:?} }}\nlog: {{ level: debug }}\n",
            o.poll_interval, token_file
        ));
        if let Some(n) = o.max_sessions {
            y.push_str(&format!("limits: {{ max_sessions: {n} }}\n"));
        }
        if !o.cpus.is_empty() {
            y.push_str(&format!("cpus: {:?}\n", o.cpus));
        }
        if let Some(d) = &o.state_dir {
            let pins = o
                .pin_directory
                .as_ref()
                .map(|p| format!(", pin_directory: {p:?}"))
                .unwrap_or_default();
            y.push_str(&format!(
                "state: {{ directory: {d:?}, reuse_datapath: {}{pins} }}\n",
                o.reuse_datapath
            ));
        }
        let cfg = dir.0.join("upfd.yaml");
        std::fs::write(&cfg, &y).expect("writing upfd.yaml");
        let bin = o
            .binary
            .clone()
            .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_upfd")));
        let mut c = lab.command(Ns::Upf, bin);
        c.arg("--config")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("starting upfd");
        let log = Output::collect(child.stderr.take().expect("stderr"));
        // A debug build loading its XDP programs (the verifier) on a busy machine: generous.
        let end = Instant::now() + Duration::from_secs(60);
        while !log.text().contains(" up: node ") {
            if let Ok(Some(st)) = child.try_wait() {
                std::thread::sleep(Duration::from_millis(50));
                panic!("upfd exited ({st}):\n{y}\n{}", log.text());
            }
            if Instant::now() >= end {
                let _ = child.kill();
                let _ = child.wait();
                panic!("upfd did not start in 60 s:\n{}", log.text());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        LabUpfd {
            child,
            log,
            upf_ns: lab.ns(Ns::Upf),
            token_file,
            _dir: dir,
        }
    }

    pub fn log(&self) -> String {
        self.log.text()
    }

    /// upfd's process ID (its sockets are in /proc/PID/fd and /proc/PID/net).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        self.log.wait_for(needle, timeout)
    }

    /// Send `signal` and wait up to `timeout` for upfd to end (`ip netns exec` became
    /// upfd: same pid); whether it did.
    pub fn stop(&mut self, signal: libc::c_int, timeout: Duration) -> bool {
        super::stop_child(&mut self.child, signal, timeout)
    }

    /// Whether upfd is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// GET /metrics (Prometheus text).
    pub fn metrics(&self) -> String {
        let ns = self.upf_ns.clone();
        in_netns(Some(&ns), || http_get(API, "/metrics"))
            .expect("entering upf")
            .unwrap_or_else(|e| panic!("GET /metrics: {e}\n{}", self.log.tail(30)))
    }

    /// GET /check: whether upfd's session books agree (JSON).
    pub fn check(&self) -> String {
        let ns = self.upf_ns.clone();
        in_netns(Some(&ns), || http_get(API, "/check"))
            .expect("entering upf")
            .unwrap_or_else(|e| panic!("GET /check: {e}\n{}", self.log.tail(30)))
    }

    /// upfctl (its library, as the binary runs it) inside upf, against this upfd's API.
    pub fn upfctl(&self, args: &[&str]) -> upfctl::Outcome {
        let ns = self.upf_ns.clone();
        let token = self.token_file.to_string_lossy().into_owned();
        let mut argv = vec!["upfctl", "--api", API, "--token-file", &token];
        argv.extend_from_slice(args);
        in_netns(Some(&ns), || upfctl::execute(argv)).expect("entering upf")
    }

    /// GET `path` from the API inside upf without a token: status code and body.
    pub fn api_without_token(&self, path: &str) -> (u16, String) {
        let ns = self.upf_ns.clone();
        in_netns(Some(&ns), || http_get_as(API, path, None))
            .expect("entering upf")
            .unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", self.log.tail(30)))
    }

    /// GET `path` from the API inside upf: status code and body, whatever the status.
    pub fn api(&self, path: &str) -> (u16, String) {
        let ns = self.upf_ns.clone();
        in_netns(Some(&ns), || http_get_any(API, path))
            .expect("entering upf")
            .unwrap_or_else(|e| panic!("GET {path}: {e}\n{}", self.log.tail(30)))
    }

    /// The value of one series, e.g. `upf_dropped_packets_total{reason="unknown_teid"}`;
    /// 0 if absent.
    pub fn metric(&self, series: &str) -> u64 {
        metric(&self.metrics(), series)
    }

    /// GET /metrics, None if the API does not answer (yet, or any more).
    pub fn try_metrics(&self) -> Option<String> {
        let ns = self.upf_ns.clone();
        in_netns(Some(&ns), || http_get(API, "/metrics")).ok()?.ok()
    }

    /// Wait (at most `timeout`) until `series` is `want`; its last value. The data path's
    /// counters reach /metrics a little after the packets: compare the result.
    pub fn wait_metric(&self, series: &str, want: u64, timeout: Duration) -> u64 {
        let mut last = 0;
        eventually(timeout, || {
            last = self.metric(series);
            last == want
        });
        last
    }

    /// Every `upf_dropped_packets_total` series that is not 0.
    pub fn drops(&self) -> Vec<String> {
        nonzero_drops(&self.metrics())
    }

    /// What the first URR of UE `ue`'s session counted since it was created (the API,
    /// as `upfctl --json sessions --ue` shows it).
    pub fn urr_of_ue(&self, ue: Ipv4Addr) -> Usage {
        let o = self.upfctl(&["--json", "sessions", "--ue", &ue.to_string()]);
        assert_eq!(o.code, 0, "upfctl sessions --ue {ue}: {o:?}");
        let v: serde_json::Value = serde_json::from_str(&o.stdout).expect("upfctl --json");
        let m = &v["sessions"][0]["urrs"][0]["measured"]["since_created"];
        let n = |k: &str| {
            m[k].as_u64()
                .unwrap_or_else(|| panic!("no {k} in UE {ue}'s URR: {v:#}"))
        };
        Usage {
            ul_packets: n("ul_packets"),
            ul_bytes: n("ul_bytes"),
            dl_packets: n("dl_packets"),
            dl_bytes: n("dl_bytes"),
        }
    }
}

impl Drop for LabUpfd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("upfd log (last 60 lines):\n{}", self.log.tail(60));
        }
    }
}

/// The value of `series` in a Prometheus text exposition; 0 if absent.
pub fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .unwrap_or(0)
}

/// The `upf_dropped_packets_total` series of a Prometheus text that are not 0.
pub fn nonzero_drops(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with("upf_dropped_packets_total{") && !l.ends_with(" 0"))
        .map(str::to_string)
        .collect()
}

/// A minimal HTTP/1.0 GET (with the lab's [`API_TOKEN`], which an upfd without
/// `api.token_file` ignores): the status code and body, whatever the status.
pub fn http_get_any(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    http_get_as(addr, path, Some(API_TOKEN))
}

/// A minimal HTTP/1.0 GET with `token` as the bearer token, or none: the status code
/// and body, whatever the status.
pub fn http_get_as(addr: &str, path: &str, token: Option<&str>) -> std::io::Result<(u16, String)> {
    let a: SocketAddr = addr.parse().map_err(std::io::Error::other)?;
    // Generous: upfd's API thread may wait for the CPU on a busy machine.
    let mut s = TcpStream::connect_timeout(&a, Duration::from_secs(10))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}\r\n").as_bytes())?;
    let mut r = String::new();
    s.read_to_string(&mut r)?;
    let (head, body) = r
        .split_once("\r\n\r\n")
        .ok_or_else(|| std::io::Error::other(format!("bad response: {r:.200}")))?;
    let code = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status: {head:.100}")))?;
    Ok((code, body.to_string()))
}

/// A minimal HTTP/1.0 GET; the body (an error unless the status is 200).
pub fn http_get(addr: &str, path: &str) -> std::io::Result<String> {
    match http_get_any(addr, path)? {
        (200, body) => Ok(body),
        (code, body) => Err(std::io::Error::other(format!("HTTP {code}: {body:.200}"))),
    }
}

/// The SMF emulator in the smf namespace, associated with the lab's upfd.
pub struct LabSmf {
    pub rt: tokio::runtime::Runtime,
    pub smf: Smf,
}

impl LabSmf {
    /// Connect from smf (`edit` adjusts the session template) and associate; retried
    /// while upfd comes up.
    pub fn associate(lab: &Lab, edit: impl FnOnce(&mut SmfConfig)) -> LabSmf {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime");
        let mut cfg = SmfConfig::new(SocketAddr::new(addr::UPF_N4.into(), 8805));
        cfg.bind = SocketAddr::new(addr::SMF_N4.into(), 0);
        cfg.gnb = addr::GNB_N3;
        // TS 29.244's usual timers: a busy machine answers late, not never.
        cfg.timers = Timers {
            t1: Duration::from_secs(3),
            n1: 3,
        };
        edit(&mut cfg);
        let handle = rt.handle().clone();
        let ns = lab.ns(Ns::Smf);
        let mut smf = in_netns(Some(&ns), move || handle.block_on(Smf::connect(cfg)))
            .expect("entering smf")
            .expect("binding the SMF's N4 socket");
        let mut last = None;
        for _ in 0..10 {
            let r = rt.block_on(smf.associate());
            if r.accepted == 1 {
                return LabSmf { rt, smf };
            }
            last = Some(r);
            std::thread::sleep(Duration::from_millis(300));
        }
        panic!("association with upfd failed: {last:?}");
    }

    /// Establish `n` sessions of the template; all must be accepted.
    pub fn establish(&mut self, n: usize) -> Vec<UeSession> {
        let r = self.rt.block_on(self.smf.establish(n, Pace::default()));
        assert_eq!(r.accepted, n, "establishment: {r:?}");
        self.ue_sessions()
    }

    /// One session whose downlink buffers (the SMF set up with `dl_buffer`) until the
    /// gNB/UE emulator runs, delaying N3 by `dl` and `ul`; then its downlink FAR switched
    /// to the gNB. So no packet of upfd's (a QoS monitoring probe, an Echo Request) waits
    /// in the emulator's socket while it starts, stamped late as if N3 were slow.
    pub fn one_session_with_gnb_delays(&mut self, lab: &Lab, dl: Duration, ul: Duration) -> Gnb {
        self.establish(1);
        let gnb = Gnb::start(
            upfbench::gnb::GnbConfig {
                netns: Some(lab.ns(Ns::Gnb)),
                dl_delay: dl,
                ul_delay: ul,
                ..Default::default()
            },
            self.ue_sessions(),
        )
        .expect("starting the gNB/UE emulator");
        self.modify();
        gnb
    }

    /// Switch every session's downlink FAR to forward to the gNB.
    pub fn modify(&mut self) -> PhaseReport {
        let r = self.rt.block_on(self.smf.modify(Pace::default()));
        assert_eq!(r.accepted, r.requests, "modification: {r:?}");
        r
    }

    pub fn ue_sessions(&self) -> Vec<UeSession> {
        self.smf
            .sessions()
            .iter()
            .filter_map(UeSession::from_session)
            .collect()
    }

    /// Send a request; the response, parsed.
    pub fn transact(&self, request: &Msg, seid: Option<u64>) -> Msg {
        let seq = self.smf.n4().next_sequence();
        let header = match seid {
            Some(s) => pfcp::HeaderRepr::session(request.message_type(), s, seq),
            None => pfcp::HeaderRepr::node(request.message_type(), seq),
        };
        let bytes = request.emit(&header);
        let r = self
            .rt
            .block_on(self.smf.n4().transact(&bytes))
            .unwrap_or_else(|e| panic!("no response from upfd: {e}"));
        Msg::parse(&r.bytes).expect("response parses").1
    }

    /// The Session Report Requests upfd sent since the last call, parsed.
    pub fn reports(&self) -> Vec<SessionReportRequest> {
        self.smf
            .n4()
            .take_session_reports()
            .iter()
            .map(|b| match Msg::parse(b) {
                Ok((_, Msg::SessionReportRequest(r))) => r,
                other => panic!("not a Session Report Request: {other:?}"),
            })
            .collect()
    }

    /// Wait until at least `n` reports arrived in all (collected into `into`).
    pub fn wait_reports(
        &self,
        into: &mut Vec<SessionReportRequest>,
        n: usize,
        timeout: Duration,
    ) -> bool {
        let end = Instant::now() + timeout;
        loop {
            into.extend(self.reports());
            if into.len() >= n {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A UDP socket bound in a namespace (usable from any thread afterwards).
pub fn udp_in(lab: &Lab, ns: Ns, bind: SocketAddr) -> UdpSocket {
    let name = lab.ns(ns);
    let s = in_netns(Some(&name), move || UdpSocket::bind(bind))
        .expect("entering namespace")
        .unwrap_or_else(|e| panic!("binding {bind} in {name}: {e}"));
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    s
}

/// Run a command, killing it after `limit`; its output.
pub fn run_bounded(mut c: Command, limit: Duration) -> ProcOutput {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawning");
    let end = Instant::now() + limit;
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if Instant::now() >= end {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collecting output")
}

/// `ping -c count` from `ns` (optionally from `src`), each reply awaited up to 10 s
/// (ping ends as soon as all came back); replies received. For replies that must not
/// come, [`ping_within`] with a short wait.
pub fn ping(lab: &Lab, ns: Ns, src: Option<Ipv4Addr>, dst: Ipv4Addr, count: u32) -> u32 {
    ping_within(lab, ns, src, dst, count, 10)
}

/// [`ping`] awaiting each reply up to `wait_s` seconds.
pub fn ping_within(
    lab: &Lab,
    ns: Ns,
    src: Option<Ipv4Addr>,
    dst: Ipv4Addr,
    count: u32,
    wait_s: u32,
) -> u32 {
    let mut c = lab.command(ns, "ping");
    c.args(["-n", "-q", "-c", &count.to_string(), "-i", "0.2"])
        .args(["-W", &wait_s.to_string()]);
    if let Some(s) = src {
        c.args(["-I", &s.to_string()]);
    }
    c.arg(dst.to_string());
    let limit = u64::from(count) * u64::from(wait_s) + 10;
    let out = run_bounded(c, Duration::from_secs(limit));
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            let (_, rest) = l.split_once(" packets transmitted, ")?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .unwrap_or(0)
}

/// Whether `f` becomes true within `timeout`.
pub fn eventually(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A TUN's (or any interface's) counters inside a namespace, from
/// /sys/class/net/DEV/statistics: what the kernel sent into it (for a UE's TUN: the UE's
/// uplink packets, read by the gNB emulator) and what it received (the downlink the
/// emulator wrote). Octets are whole IP packets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IfCounters {
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub rx_packets: u64,
}

impl IfCounters {
    pub fn read(lab: &Lab, ns: Ns, dev: &str) -> IfCounters {
        let d = format!("/sys/class/net/{dev}/statistics");
        let files =
            ["tx_bytes", "tx_packets", "rx_bytes", "rx_packets"].map(|f| format!("{d}/{f}"));
        let mut c = lab.command(ns, "cat");
        c.args(&files);
        let out = run_bounded(c, Duration::from_secs(30));
        let v: Vec<u64> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        assert_eq!(v.len(), 4, "reading {d} in {}: {out:?}", lab.ns(ns));
        IfCounters {
            tx_bytes: v[0],
            tx_packets: v[1],
            rx_bytes: v[2],
            rx_packets: v[3],
        }
    }

    /// What changed since `before`.
    pub fn since(&self, before: &IfCounters) -> IfCounters {
        IfCounters {
            tx_bytes: self.tx_bytes - before.tx_bytes,
            tx_packets: self.tx_packets - before.tx_packets,
            rx_bytes: self.rx_bytes - before.rx_bytes,
            rx_packets: self.rx_packets - before.rx_packets,
        }
    }

    pub fn bytes(&self) -> u64 {
        self.tx_bytes + self.rx_bytes
    }

    pub fn packets(&self) -> u64 {
        self.tx_packets + self.rx_packets
    }
}

/// Packets and octets each way (whole IP packets), as a URR or the gNB emulator counts
/// them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub ul_packets: u64,
    pub ul_bytes: u64,
    pub dl_packets: u64,
    pub dl_bytes: u64,
}

impl Usage {
    /// What the gNB emulator sent uplink (handed to its socket) and wrote to the TUN
    /// downlink for UE `ue`.
    pub fn emulated(st: &GnbStats, ue: Ipv4Addr) -> Usage {
        let u = st
            .ues
            .iter()
            .find(|u| u.ue_ip == Some(ue))
            .unwrap_or_else(|| panic!("no UE {ue} in the emulator: {st:?}"));
        Usage {
            ul_packets: u.ul_packets,
            ul_bytes: u.ul_bytes,
            dl_packets: u.dl_packets,
            dl_bytes: u.dl_bytes,
        }
    }

    /// What changed since `b`.
    pub fn since(&self, b: &Usage) -> Usage {
        Usage {
            ul_packets: self.ul_packets - b.ul_packets,
            ul_bytes: self.ul_bytes - b.ul_bytes,
            dl_packets: self.dl_packets - b.dl_packets,
            dl_bytes: self.dl_bytes - b.dl_bytes,
        }
    }
}

/// The counters that name where the lab, outside upfd's XDP programs, loses a packet on
/// the way between gnb and dn (veths hold 256 frames; on a busy machine a ring fills):
/// - `tx_dropped` of the far ends (gnb n3, dn n6): what they could not hand to upf's
///   ring, the kernel's packets (the gNB emulator's, a tool's in dn) and the generators'
///   XDP frames alike (a veth counts its peer's `xdp_xmit_errors` there too);
/// - `tx_queue_*_xdp_xmit_errors` (`ethtool -S`) of upf n3 and n6: frames upfd's
///   programs redirected into a veth whose peer's ring was full;
/// - `rx_queue_*_drops` of upf n3 and n6: frames whose redirect out of upfd's program
///   failed;
/// - the drops of the gNB emulator's GTP-U socket (gnb, port 2152).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LabLoss {
    pub gnb_n3_tx_dropped: u64,
    pub dn_n6_tx_dropped: u64,
    pub upf_n3_xmit_errors: u64,
    pub upf_n3_rx_drops: u64,
    pub upf_n6_xmit_errors: u64,
    pub upf_n6_rx_drops: u64,
    pub gnb_gtpu_socket_drops: u64,
}

impl LabLoss {
    pub fn read(lab: &Lab) -> LabLoss {
        let (upf_n3_xmit_errors, upf_n3_rx_drops) = veth_xdp_losses(lab, Ns::Upf, "n3");
        let (upf_n6_xmit_errors, upf_n6_rx_drops) = veth_xdp_losses(lab, Ns::Upf, "n6");
        LabLoss {
            gnb_n3_tx_dropped: sys_counter(lab, Ns::Gnb, "n3", "tx_dropped"),
            dn_n6_tx_dropped: sys_counter(lab, Ns::Dn, "n6", "tx_dropped"),
            upf_n3_xmit_errors,
            upf_n3_rx_drops,
            upf_n6_xmit_errors,
            upf_n6_rx_drops,
            gnb_gtpu_socket_drops: gnb_gtpu_socket_drops(lab),
        }
    }

    /// What changed since `b`.
    pub fn since(&self, b: &LabLoss) -> LabLoss {
        LabLoss {
            gnb_n3_tx_dropped: self.gnb_n3_tx_dropped - b.gnb_n3_tx_dropped,
            dn_n6_tx_dropped: self.dn_n6_tx_dropped - b.dn_n6_tx_dropped,
            upf_n3_xmit_errors: self.upf_n3_xmit_errors - b.upf_n3_xmit_errors,
            upf_n3_rx_drops: self.upf_n3_rx_drops - b.upf_n3_rx_drops,
            upf_n6_xmit_errors: self.upf_n6_xmit_errors - b.upf_n6_xmit_errors,
            upf_n6_rx_drops: self.upf_n6_rx_drops - b.upf_n6_rx_drops,
            gnb_gtpu_socket_drops: self.gnb_gtpu_socket_drops - b.gnb_gtpu_socket_drops,
        }
    }

    /// Packets of `d` lost on the way to upfd (neither counted by a URR nor received).
    pub fn before_upfd(&self, d: Direction) -> u64 {
        match d {
            Direction::Uplink => self.gnb_n3_tx_dropped,
            Direction::Downlink => self.dn_n6_tx_dropped,
        }
    }

    /// Packets of `d` lost after upfd counted them (in a URR) and sent them on.
    pub fn after_upfd(&self, d: Direction) -> u64 {
        match d {
            Direction::Uplink => self.upf_n6_xmit_errors + self.upf_n3_rx_drops,
            Direction::Downlink => {
                self.upf_n3_xmit_errors + self.upf_n6_rx_drops + self.gnb_gtpu_socket_drops
            }
        }
    }
}

/// `ethtool -S DEV` in `ns`: the sums of `tx_queue_*_xdp_xmit_errors` and
/// `rx_queue_*_drops`.
pub fn veth_xdp_losses(lab: &Lab, ns: Ns, dev: &str) -> (u64, u64) {
    let mut c = lab.command(ns, "ethtool");
    c.args(["-S", dev]);
    let out = run_bounded(c, Duration::from_secs(30));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("_xdp_xmit_errors:"),
        "ethtool -S {dev} in {}: {out:?}",
        lab.ns(ns)
    );
    let (mut xmit, mut rx) = (0, 0);
    for l in text.lines() {
        let Some((k, v)) = l.trim().split_once(": ") else {
            continue;
        };
        let v: u64 = v.trim().parse().unwrap_or(0);
        if k.starts_with("tx_queue_") && k.ends_with("_xdp_xmit_errors") {
            xmit += v;
        } else if k.starts_with("rx_queue_") && k.ends_with("_drops") && !k.ends_with("xdp_drops") {
            rx += v;
        }
    }
    (xmit, rx)
}

/// /sys/class/net/DEV/statistics/NAME inside `ns`.
fn sys_counter(lab: &Lab, ns: Ns, dev: &str, name: &str) -> u64 {
    let mut c = lab.command(ns, "cat");
    c.arg(format!("/sys/class/net/{dev}/statistics/{name}"));
    let out = run_bounded(c, Duration::from_secs(30));
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{dev} {name} in {}: {out:?}", lab.ns(ns)))
}

/// Datagrams the gNB emulator's GTP-U sockets (gnb, GNB_N3:2152 and IPv6 port 2152)
/// dropped, from /proc/net/udp{,6} (the last column).
fn gnb_gtpu_socket_drops(lab: &Lab) -> u64 {
    let mut c = lab.command(Ns::Gnb, "cat");
    c.args(["/proc/net/udp", "/proc/net/udp6"]);
    let out = run_bounded(c, Duration::from_secs(30));
    let gnb = format!("{:08X}:0868", u32::from_le_bytes(addr::GNB_N3.octets()));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let local = *f.get(1)?;
            let v6 = local.len() == 37 && local.ends_with(":0868");
            (local == gnb || v6).then(|| f.last()?.parse::<u64>().ok())?
        })
        .sum()
}

/// What a check of URRs against the gNB emulator ([`assert_urrs_are_tun`]) counts from.
#[derive(Debug, Clone)]
pub struct TunBaseline {
    loss: LabLoss,
    emulator_dl_drops: u64,
    /// Per UE: the URR's and the emulator's counts.
    ues: Vec<(Ipv4Addr, Usage, Usage)>,
}

/// Downlink packets the emulator received and did not write to a TUN.
fn emulator_dl_drops(st: &GnbStats) -> u64 {
    st.unknown_teid + st.malformed + st.ues.iter().map(|u| u.dl_dropped).sum::<u64>()
}

impl TunBaseline {
    /// The counts now (no traffic in flight) of `ues`.
    pub fn now(lab: &Lab, upfd: &LabUpfd, gnb: &Gnb, ues: &[Ipv4Addr]) -> TunBaseline {
        let st = gnb.stats();
        TunBaseline {
            loss: LabLoss::read(lab),
            emulator_dl_drops: emulator_dl_drops(&st),
            ues: ues
                .iter()
                .map(|&u| (u, upfd.urr_of_ue(u), Usage::emulated(&st, u)))
                .collect(),
        }
    }
}

/// Each UE's URR counted, since `base`, exactly what the gNB emulator sent uplink and
/// wrote to the UE's TUN downlink, every difference named by a counter: uplink,
/// the packets the lab lost before upfd ([`LabLoss::before_upfd`]) and `ul_dropped()`
/// (packets upfd dropped on purpose and counted, e.g. over an MBR); downlink, those it
/// lost after upfd ([`LabLoss::after_upfd`]) and the emulator's own drops. Exact per UE
/// (packets and octets) while no such loss happened; with loss, the sums' packets
/// exactly and each UE's counts bounded. Waits (at most 30 s) until the counts agree in
/// two reads 200 ms apart; panics with them otherwise. The changes: (URR, emulator)
/// per UE.
pub fn assert_urrs_are_tun(
    lab: &Lab,
    upfd: &LabUpfd,
    gnb: &Gnb,
    base: &TunBaseline,
    ul_dropped: impl Fn() -> u64,
) -> Vec<(Usage, Usage)> {
    let read = || {
        let ul_dropped = ul_dropped();
        let st = gnb.stats();
        let loss = LabLoss::read(lab).since(&base.loss);
        let emu_drops = emulator_dl_drops(&st) - base.emulator_dl_drops;
        let per_ue: Vec<(Usage, Usage)> = base
            .ues
            .iter()
            .map(|(u, urr0, emu0)| {
                (
                    upfd.urr_of_ue(*u).since(urr0),
                    Usage::emulated(&st, *u).since(emu0),
                )
            })
            .collect();
        (loss, emu_drops, ul_dropped, per_ue)
    };
    let check =
        |(loss, emu_drops, ul_dropped, per_ue): &(LabLoss, u64, u64, Vec<(Usage, Usage)>)| {
            let before_ul = loss.before_upfd(Direction::Uplink) + ul_dropped;
            let after_dl = loss.after_upfd(Direction::Downlink) + emu_drops;
            let sum = |f: fn(&Usage) -> u64, urr: bool| -> u64 {
                per_ue.iter().map(|(a, b)| f(if urr { a } else { b })).sum()
            };
            let ul = (sum(|u| u.ul_packets, false), sum(|u| u.ul_packets, true));
            let dl = (sum(|u| u.dl_packets, true), sum(|u| u.dl_packets, false));
            if ul.0 != ul.1 + before_ul || dl.0 != dl.1 + after_dl {
                return false;
            }
            per_ue.iter().all(|(urr, emu)| {
                let up = if before_ul == 0 {
                    (urr.ul_packets, urr.ul_bytes) == (emu.ul_packets, emu.ul_bytes)
                } else {
                    urr.ul_packets <= emu.ul_packets && urr.ul_bytes <= emu.ul_bytes
                };
                let down = if after_dl == 0 {
                    (urr.dl_packets, urr.dl_bytes) == (emu.dl_packets, emu.dl_bytes)
                } else {
                    urr.dl_packets >= emu.dl_packets && urr.dl_bytes >= emu.dl_bytes
                };
                up && down
            })
        };
    let end = Instant::now() + Duration::from_secs(30);
    let mut last = read();
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = read();
        if now == last && check(&now) {
            let (loss, emu_drops, _, per_ue) = now;
            if loss != LabLoss::default() || emu_drops > 0 {
                eprintln!("lost outside upfd (and counted): {loss:?}, emulator {emu_drops}");
            }
            return per_ue;
        }
        if Instant::now() >= end {
            let (loss, emu_drops, ul_dropped, per_ue) = now;
            panic!(
                "URRs against the gNB emulator (URR, emulator) per UE {:?}: {per_ue:#?}\n\
                 lost outside upfd: {loss:?}, emulator downlink drops {emu_drops}, \
                 dropped by upfd uplink {ul_dropped}\nupfd: {:?}",
                base.ues.iter().map(|u| u.0).collect::<Vec<_>>(),
                upfd.drops()
            );
        }
        last = now;
    }
}

/// CLOCK_MONOTONIC_COARSE: the clock upfd's XDP programs meter MBRs with
/// (`bpf_ktime_get_coarse_ns`), so a window measured with it around traffic holds every
/// instant the data path saw.
pub fn coarse_now() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The most octets a QER's MBR of `kbps` lets through in `window`: the rate over the
/// window plus the burst upfd gives it (100 ms of the rate, at least 3000 octets:
/// crates/bpf/src/compile.rs `qer_gcra`) plus one packet of `max_packet` octets (the GCRA
/// admits a packet that starts within the burst).
pub fn mbr_bound(kbps: u64, window: Duration, max_packet: u64) -> u64 {
    let rate = kbps * 1000 / 8;
    let burst = (rate / 10).max(3000);
    (rate as f64 * window.as_secs_f64()).ceil() as u64 + burst + max_packet
}

/// A G-PDU for `teid` around `inner`, with a UL PDU Session Container if `qfi` is given.
pub fn gpdu(teid: u32, qfi: Option<u8>, inner: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 32 + inner.len()];
    let psc = qfi.map(|qfi| gtpu::PscFields::Ul { qfi });
    let n = gtpu::write_gpdu_header(&mut b, teid, psc, inner.len()).expect("G-PDU header");
    b.truncate(n);
    b.extend_from_slice(inner);
    b
}

/// The first `n` datagrams a socket receives, waiting at most `timeout` for them (fewer
/// then): for what must arrive, so a generous timeout that ends at the n-th.
pub fn expect(sock: &UdpSocket, n: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    let end = Instant::now() + timeout;
    while out.len() < n && Instant::now() < end {
        if let Ok(n) = sock.recv(&mut buf) {
            out.push(buf[..n].to_vec());
        }
    }
    out
}

/// What a socket receives within `window`: for what must not arrive (a slow machine
/// can only make such a check pass, never fail).
pub fn expect_none(sock: &UdpSocket, window: Duration) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    let end = Instant::now() + window;
    while Instant::now() < end {
        if let Ok(n) = sock.recv(&mut buf) {
            out.push(buf[..n].to_vec());
        }
    }
    out
}

/// Establish the emulator's session template for `s`, changed by `edit`; returns the UP
/// SEID and the F-TEIDs the UPF allocated, by PDR ID.
pub fn establish_custom(
    smf: &LabSmf,
    s: &upfbench::smf::Session,
    edit: impl FnOnce(&mut pfcp::msg::SessionEstablishmentRequest),
) -> (u64, Vec<(u16, pfcp::ie::FTeid)>) {
    let mut req = smf.smf.establishment_request(s);
    edit(&mut req);
    let rsp = match smf.transact(&Msg::SessionEstablishmentRequest(req), Some(0)) {
        Msg::SessionEstablishmentResponse(r) => r,
        other => panic!("not an establishment response: {other:?}"),
    };
    assert_eq!(rsp.cause, pfcp::CauseValue::REQUEST_ACCEPTED, "{rsp:?}");
    let up = rsp.up_fseid.expect("UP F-SEID").seid;
    smf.smf.n4().bind_session(s.cp_seid, up);
    let fteids = rsp
        .created_pdrs
        .iter()
        .filter_map(|c| Some((c.pdr_id, c.local_fteid?)))
        .collect();
    (up, fteids)
}

/// The gNB emulator's view of session `s`, whose uplink F-TEID is `ul`.
pub fn ue_session(s: &upfbench::smf::Session, ul: pfcp::ie::FTeid) -> UeSession {
    UeSession {
        index: s.index,
        ue_ip: Some(s.ue_ip),
        ue_ip6: None,
        gnb_teid: s.gnb_teid,
        ul_teid: ul.teid.expect("TEID"),
        upf: std::net::IpAddr::V4(ul.ipv4.expect("IPv4 F-TEID")),
    }
}
