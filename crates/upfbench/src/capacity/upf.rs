//! The UPF under test in the lab: `upfd` started by us in the upf namespace, or any UPF
//! someone started there (`--external`), programmed by the SMF emulator from smf.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::lab::{addr, in_netns, Lab, Ns};
use crate::smf::{AppPfds, Pace, PhaseReport, Smf, SmfConfig, TeidMode, Timers};

/// upfd's API address in the lab (/metrics).
pub const API: &str = "192.168.4.2:9100";

/// The bearer token of the lab upfd's subscriber routes (/check, /status): its API is
/// not on loopback, so upfd requires `api.token_file`.
const API_TOKEN: &str = "upfbench-lab";

/// upfd's configuration for the lab: N4 on the N4 veth, N3 on n3, N6 on n6, the XDP data
/// path, room for `max_sessions`, of which `rich` may have six PDRs and three URRs (the
/// application mix's: four cold PDRs with their FARs, two PDR lists and two URRs beyond
/// the record's each); `token_file` holds [`API_TOKEN`].
pub fn upfd_config(max_sessions: u64, rich: u64, token_file: &Path) -> String {
    let tables = if rich == 0 {
        String::new()
    } else {
        let n = u32::try_from(max_sessions).unwrap_or(u32::MAX);
        let base = upf_bpf::datapath::Capacity::for_sessions(n);
        let more =
            |base: u32, per: u64| u32::try_from(u64::from(base) + per * rich).unwrap_or(u32::MAX);
        format!(
            ", tables: {{ cold_entries: {}, cells: {} }}",
            more(base.cold_entries, 6),
            more(base.cells, 2),
        )
    };
    format!(
        "# Written by upfbench capacity for its lab.\n\
         node_id: \"{n4}\"\n\
         n4: {{ address: \"{n4}\", port: 8805, allowed_peers: [\"192.168.4.0/24\"], heartbeat_interval: 60s }}\n\
         gtpu:\n  n3: {{ ipv4: {n3} }}\n\
         ue_pools: []\n\
         limits: {{ max_sessions: {max_sessions} }}\n\
         datapath: {{ mode: xdp, n3_interface: n3, n6_interface: n6{tables} }}\n\
         reporting: {{ poll_interval: 1s }}\n\
         api: {{ listen: \"{API}\", token_file: {token_file:?} }}\n\
         log: {{ level: info }}\n",
        n4 = addr::UPF_N4,
        n3 = addr::UPF_N3,
    )
}

/// The upfd binary to test: `given`, else the one next to this upfbench.
pub fn upfd_binary(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    match given {
        Some(p) => Ok(p.to_path_buf()),
        None => std::env::current_exe()?
            .parent()
            .map(|d| d.join("upfd"))
            .context("locating upfd"),
    }
}

/// upfd running in the lab's upf namespace; stopped (SIGTERM, then SIGKILL) on drop.
pub struct Upfd {
    child: Child,
    pub log: PathBuf,
    upf_ns: String,
}

impl Upfd {
    pub fn start(
        lab: &Lab,
        binary: &Path,
        dir: &Path,
        max_sessions: u64,
        rich: u64,
    ) -> anyhow::Result<Upfd> {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let cfg = dir.join("upfd.yaml");
        let token_file = dir.join("api-token");
        std::fs::write(&token_file, API_TOKEN)
            .with_context(|| format!("writing {}", token_file.display()))?;
        std::fs::write(&cfg, upfd_config(max_sessions, rich, &token_file))
            .with_context(|| format!("writing {}", cfg.display()))?;
        let log = dir.join("upfd.log");
        let logf = std::fs::File::create(&log)?;
        let child = lab
            .command(Ns::Upf, binary)
            .arg("--config")
            .arg(&cfg)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(logf)
            .spawn()
            .with_context(|| format!("starting {}", binary.display()))?;
        let mut u = Upfd {
            child,
            log,
            upf_ns: lab.ns(Ns::Upf),
        };
        let end = Instant::now() + Duration::from_secs(30);
        loop {
            let text = std::fs::read_to_string(&u.log).unwrap_or_default();
            if u.metrics().is_ok() {
                return Ok(u);
            }
            if let Some(st) = u.child.try_wait()? {
                bail!("upfd exited ({st}):\n{text}");
            }
            if Instant::now() >= end {
                bail!("upfd did not start within 30 s:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// GET /metrics.
    pub fn metrics(&self) -> anyhow::Result<String> {
        self.get("/metrics")
    }

    /// GET `path` of upfd's API (/metrics, /status, /check).
    pub fn get(&self, path: &str) -> anyhow::Result<String> {
        in_netns(Some(&self.upf_ns), || http_get(API, path))?
    }
}

impl Drop for Upfd {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let end = Instant::now() + Duration::from_secs(3);
        while Instant::now() < end {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn http_get(addr: &str, path: &str) -> anyhow::Result<String> {
    let a: SocketAddr = addr.parse()?;
    let mut s = TcpStream::connect_timeout(&a, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    // One write: a server that reads what has arrived may otherwise see half a line.
    s.write_all(
        format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nAuthorization: Bearer {API_TOKEN}\r\n\r\n")
            .as_bytes(),
    )?;
    let mut r = String::new();
    s.read_to_string(&mut r)?;
    match r.split_once("\r\n\r\n") {
        Some((h, body)) if h.contains(" 200") => Ok(body.to_string()),
        _ => bail!("GET {path}: {r:.200}"),
    }
}

/// The value of one series (e.g. `upf_sessions`) in a Prometheus exposition; 0 if absent.
pub fn metric(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// Drop counters from a Prometheus exposition: (reason, packets), largest first, zeros
/// left out.
pub fn drops(metrics: &str) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = metrics
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("upf_dropped_packets_total{reason=\"")?;
            let (reason, value) = rest.split_once("\"} ")?;
            let n = value.trim().parse::<f64>().ok()? as u64;
            (n > 0).then(|| (reason.to_string(), n))
        })
        .collect();
    v.sort_by_key(|e| std::cmp::Reverse(e.1));
    v
}

/// The UE pool the lab's SMF emulator uses for capacity and soak runs (4M addresses), and
/// dn's route for it through upf (so that the data network can answer UEs): `lab up`
/// makes it since 2026-11-28, this again for a lab made before.
pub fn route_ue_pool(lab: &Lab) -> anyhow::Result<crate::smf::Ipv4Pool> {
    let pool = crate::smf::Ipv4Pool {
        base: addr::BENCH_UE_POOL,
        prefix_len: addr::BENCH_UE_POOL_LEN,
    };
    let net = format!("{}/{}", pool.base, pool.prefix_len);
    lab.ip(
        Ns::Dn,
        &["route", "replace", &net, "via", &addr::UPF_N6.to_string()],
    )
    .context("routing the UE pool in dn")?;
    Ok(pool)
}

/// The SMF emulator in smf, associated with the UPF at `n4`.
pub struct LabSmf {
    pub rt: tokio::runtime::Runtime,
    pub smf: Smf,
}

impl LabSmf {
    pub fn associate(
        lab: &Lab,
        n4: SocketAddr,
        explicit_teid: bool,
        psc: bool,
        sdf_filter: Option<String>,
        ue_pool: crate::smf::Ipv4Pool,
    ) -> anyhow::Result<LabSmf> {
        let cfg = Self::config(n4, explicit_teid, psc, sdf_filter, ue_pool);
        Self::associate_with(lab, cfg)
    }

    /// The capacity test's SMF configuration: the lab's addresses, every rule on.
    pub fn config(
        n4: SocketAddr,
        explicit_teid: bool,
        psc: bool,
        sdf_filter: Option<String>,
        ue_pool: crate::smf::Ipv4Pool,
    ) -> SmfConfig {
        let mut cfg = SmfConfig::new(n4);
        cfg.bind = SocketAddr::new(addr::SMF_N4.into(), 0);
        cfg.gnb = addr::GNB_N3;
        cfg.psc = psc;
        cfg.sdf_filter = sdf_filter;
        cfg.ue_pool = ue_pool;
        // Every rule on, none binding: the session QER's MBR (100 Gbit/s) is enforced but
        // above what one session can reach here (at 10 Gbit/s it capped 1400 B traffic).
        cfg.mbr_kbps = 100_000_000;
        cfg.teid = if explicit_teid {
            cfg.upf_n3 = Some(addr::UPF_N3);
            TeidMode::Explicit
        } else {
            TeidMode::Auto
        };
        cfg.timers = Timers {
            t1: Duration::from_secs(1),
            n1: 3,
        };
        cfg
    }

    /// An SMF of `cfg` in smf, associated with the UPF.
    pub fn associate_with(lab: &Lab, cfg: SmfConfig) -> anyhow::Result<LabSmf> {
        let n4 = cfg.upf;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let h = rt.handle().clone();
        let ns = lab.ns(Ns::Smf);
        let mut smf = in_netns(Some(&ns), move || h.block_on(Smf::connect(cfg)))??;
        let mut last = None;
        for _ in 0..20 {
            let r = rt.block_on(smf.associate());
            if r.accepted == 1 {
                return Ok(LabSmf { rt, smf });
            }
            last = Some(r);
            std::thread::sleep(Duration::from_millis(250));
        }
        bail!("the UPF at {n4} did not accept an association: {last:?}")
    }

    /// PFD Management with `apps`' PFDs, waiting at most `wait` for the answer (T1's
    /// retransmissions within it); an error unless the UPF accepted them.
    pub fn pfd_management(&self, apps: &[AppPfds], wait: Duration) -> anyhow::Result<()> {
        let r = self
            .rt
            .block_on(async { tokio::time::timeout(wait, self.smf.pfd_management(apps)).await })
            .map_err(|_| {
                anyhow::anyhow!("the UPF does not answer PFD Management (nothing within {wait:?})")
            })?
            .map_err(|e| anyhow::anyhow!("PFD Management: {e}"))?;
        if !r.cause.is_acceptance() {
            bail!("PFD Management refused: {r:?}");
        }
        Ok(())
    }

    /// Delete every active session, 64 requests in flight (their usage is summed in
    /// [`Smf::usage`]).
    pub fn delete_all(&mut self) -> PhaseReport {
        self.rt.block_on(self.smf.delete(Pace {
            rate: 0.0,
            in_flight: 64,
        }))
    }

    /// PFCP Association Release.
    pub fn release(&mut self) -> PhaseReport {
        self.rt.block_on(self.smf.release())
    }

    /// Establish `n` more sessions, 64 requests in flight.
    pub fn establish(&mut self, n: usize) -> PhaseReport {
        self.rt.block_on(self.smf.establish(
            n,
            Pace {
                rate: 0.0,
                in_flight: 64,
            },
        ))
    }
}

/// GRO turned on for a UPF without a native XDP program on upf's `n3` and `n6`
/// (`--external`): frames the generators send into a veth reach its receiver only through
/// the veth's NAPI, which a native XDP program or GRO turns on; without it a socket or
/// TUN UPF gets none. Each interface it turned on is turned off again on drop.
pub struct GroGuard {
    upf_ns: String,
    turned_on: Vec<&'static str>,
    /// What was done or could not be, for the report's machine notes.
    pub notes: Vec<String>,
}

impl GroGuard {
    pub fn for_external(lab: &Lab) -> GroGuard {
        let mut g = GroGuard {
            upf_ns: lab.ns(Ns::Upf),
            turned_on: Vec::new(),
            notes: Vec::new(),
        };
        for dev in ["n3", "n6"] {
            match native_xdp(lab, dev) {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => {
                    g.notes.push(format!(
                        "upf {dev}: XDP state unknown ({e:#}); GRO left as it is"
                    ));
                    continue;
                }
            }
            match ethtool(&g.upf_ns, &["-k", dev]) {
                Ok(out) if out.lines().any(|l| l.trim() == "generic-receive-offload: on") => {
                    g.notes.push(format!(
                        "upf {dev} has no native XDP program; its GRO was already on (frames from the generators reach the UPF)"
                    ));
                }
                Ok(_) => match ethtool(&g.upf_ns, &["-K", dev, "gro", "on"]) {
                    Ok(_) => {
                        g.turned_on.push(dev);
                        g.notes.push(format!(
                            "upf {dev} has no native XDP program: GRO turned on for the run (a veth hands redirected frames to its receiver only with one of the two), off again after"
                        ));
                    }
                    Err(e) => g.notes.push(format!(
                        "upf {dev} has no native XDP program and GRO could not be turned on ({e:#}): the UPF may receive none of the generators' frames"
                    )),
                },
                Err(e) => g.notes.push(format!("upf {dev}: reading GRO: {e:#}")),
            }
        }
        for n in &g.notes {
            eprintln!("note: {n}");
        }
        g
    }
}

impl Drop for GroGuard {
    fn drop(&mut self) {
        for dev in self.turned_on.drain(..) {
            if let Err(e) = ethtool(&self.upf_ns, &["-K", dev, "gro", "off"]) {
                eprintln!("upf {dev}: turning GRO off again: {e:#}");
            }
        }
    }
}

/// `ethtool ARGS` in namespace `ns`; its output.
fn ethtool(ns: &str, args: &[&str]) -> anyhow::Result<String> {
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "ethtool"])
        .args(args)
        .output()
        .context("running ethtool")?;
    if !out.status.success() {
        bail!(
            "ethtool {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Whether upf's `dev` runs an XDP program in native (driver) mode: generic mode does
/// not turn on a veth's NAPI.
fn native_xdp(lab: &Lab, dev: &str) -> anyhow::Result<bool> {
    let out = lab.ip(Ns::Upf, &["-j", "link", "show", "dev", dev])?;
    let v: serde_json::Value = serde_json::from_str(&out)?;
    let xdp = &v[0]["xdp"];
    // XDP_ATTACHED_DRV = 1; MULTI = 4 lists each attachment with its mode.
    Ok(xdp["mode"].as_u64() == Some(1)
        || xdp["attached"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["mode"].as_u64() == Some(1))))
}

/// The second SMF's address (on smf's n4): the application mix's sessions come from a
/// control-plane node of their own, so that their SEIDs, TEIDs and UE addresses never
/// meet the first SMF's.
pub const APP_SMF_N4: std::net::Ipv4Addr = std::net::Ipv4Addr::new(192, 168, 4, 3);

/// The application mix's UE pool: the top eighth of the routed 10.64.0.0/10
/// ([`addr::BENCH_UE_POOL`]; the first SMF's sessions start at its bottom).
pub fn app_ue_pool() -> crate::smf::Ipv4Pool {
    crate::smf::Ipv4Pool {
        base: std::net::Ipv4Addr::new(10, 120, 0, 0),
        prefix_len: 13,
    }
}

/// [`APP_SMF_N4`] on smf's n4 (and its neighbour entry in upf) while this lives.
pub struct AppSmfAddress<'a> {
    lab: &'a Lab,
}

impl<'a> AppSmfAddress<'a> {
    pub fn add(lab: &'a Lab) -> anyhow::Result<AppSmfAddress<'a>> {
        let a = format!("{APP_SMF_N4}/32");
        lab.ip(Ns::Smf, &["addr", "replace", &a, "dev", "n4"])
            .context("adding the second SMF's address")?;
        let m = crate::lab::mac::SMF_N4;
        let mac = format!(
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        );
        lab.ip(
            Ns::Upf,
            &[
                "neigh",
                "replace",
                &APP_SMF_N4.to_string(),
                "lladdr",
                &mac,
                "dev",
                "n4",
                "nud",
                "permanent",
            ],
        )
        .context("upf's neighbour entry for the second SMF")?;
        Ok(AppSmfAddress { lab })
    }
}

impl Drop for AppSmfAddress<'_> {
    fn drop(&mut self) {
        let a = format!("{APP_SMF_N4}/32");
        let _ = self.lab.ip(Ns::Smf, &["addr", "del", &a, "dev", "n4"]);
        let _ = self.lab.ip(
            Ns::Upf,
            &["neigh", "del", &APP_SMF_N4.to_string(), "dev", "n4"],
        );
    }
}
