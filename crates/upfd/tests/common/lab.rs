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
use upfbench::gnb::UeSession;
use upfbench::lab::{addr, in_netns, Lab, Ns};
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

/// The lab tests of one binary run one at a time: they measure rates on a 2-CPU machine
/// and a parallel test would disturb them.
pub fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    M.lock().unwrap_or_else(|e| e.into_inner())
}

/// upfd's API (/metrics) address inside upf.
pub const API: &str = "192.168.4.2:9100";

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
        }
    }
}

/// upfd running in the lab's upf namespace with `mode: xdp` on n3 and n6; killed on drop.
pub struct LabUpfd {
    child: Child,
    log: Output,
    upf_ns: String,
    _dir: TempDir,
}

impl LabUpfd {
    pub fn start(lab: &Lab, o: &UpfdOptions) -> LabUpfd {
        let dir = TempDir::new("upfd-lab");
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
        if !o.buffering.is_empty() {
            y.push_str("buffering:\n");
            for b in &o.buffering {
                y.push_str(&format!("  {b}\n"));
            }
        }
        y.push_str(&format!(
            "reporting: {{ poll_interval: {} }}\napi: {{ listen: \"{API}\" }}\nlog: {{ level: debug }}\n",
            o.poll_interval
        ));
        if let Some(n) = o.max_sessions {
            y.push_str(&format!("limits: {{ max_sessions: {n} }}\n"));
        }
        if let Some(d) = &o.state_dir {
            y.push_str(&format!("state: {{ directory: {d:?} }}\n"));
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
        let end = Instant::now() + Duration::from_secs(20);
        while !log.text().contains(" up: node ") {
            if let Ok(Some(st)) = child.try_wait() {
                std::thread::sleep(Duration::from_millis(50));
                panic!("upfd exited ({st}):\n{y}\n{}", log.text());
            }
            if Instant::now() >= end {
                let _ = child.kill();
                let _ = child.wait();
                panic!("upfd did not start in 20 s:\n{}", log.text());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        LabUpfd {
            child,
            log,
            upf_ns: lab.ns(Ns::Upf),
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
        let mut argv = vec!["upfctl", "--api", API];
        argv.extend_from_slice(args);
        in_netns(Some(&ns), || upfctl::execute(argv)).expect("entering upf")
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

/// A minimal HTTP/1.0 GET: the status code and body, whatever the status.
pub fn http_get_any(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    let a: SocketAddr = addr.parse().map_err(std::io::Error::other)?;
    let mut s = TcpStream::connect_timeout(&a, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())?;
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
        cfg.timers = Timers {
            t1: Duration::from_millis(500),
            n1: 2,
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

/// `ping -c count` from `ns` (optionally from `src`); replies received.
pub fn ping(lab: &Lab, ns: Ns, src: Option<Ipv4Addr>, dst: Ipv4Addr, count: u32) -> u32 {
    let mut c = lab.command(ns, "ping");
    c.args(["-n", "-q", "-c", &count.to_string(), "-i", "0.2", "-W", "2"]);
    if let Some(s) = src {
        c.args(["-I", &s.to_string()]);
    }
    c.arg(dst.to_string());
    let out = run_bounded(c, Duration::from_secs(u64::from(count) + 5));
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
        let out = run_bounded(c, Duration::from_secs(5));
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
