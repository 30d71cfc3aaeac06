//! `upfbench smf` and `upfbench fake-upf`.

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use serde_json::json;

use super::fake_upf::{FakeUpf, FakeUpfConfig};
use super::n4::PFCP_PORT;
use super::{report, Ipv4Pool, Pace, PhaseReport, Smf, SmfConfig, TeidMode, Timers};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The UPF's PFCP address: IP or IP:PORT ([IPv6]:PORT), port 8805 if not given.
    #[arg(long, default_value = "127.0.0.1:8805", value_parser = pfcp_addr)]
    pub upf: SocketAddr,
    /// Local PFCP address, IP or IP:PORT (default: port 8805 of the address towards the
    /// UPF, where a UPF sends its own requests; any port if 8805 is taken there).
    #[arg(long, value_parser = pfcp_addr)]
    pub bind: Option<SocketAddr>,
    /// Our Node ID and F-SEID address (default: the --bind address, else the address
    /// the kernel uses towards the UPF).
    #[arg(long)]
    pub node_id: Option<IpAddr>,
    /// Sessions to establish.
    #[arg(long, default_value_t = 1)]
    pub sessions: usize,
    /// Requests per second in each session phase; 0: as fast as responses come back.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,
    /// Requests without a response at most.
    #[arg(long, default_value_t = 32)]
    pub in_flight: usize,
    /// Always ask the UPF to CHOOSE the uplink F-TEID (default: when it announces FTUP).
    #[arg(long, conflicts_with = "explicit_teid")]
    pub choose: bool,
    /// Always pick the uplink TEID ourselves (session index + 1).
    #[arg(long)]
    pub explicit_teid: bool,
    /// The UPF's N3 address for explicit F-TEIDs (default: from its User Plane IP
    /// Resource Information, else its PFCP address).
    #[arg(long)]
    pub upf_n3: Option<Ipv4Addr>,
    /// UE addresses, one per session.
    #[arg(long, default_value = "10.45.0.0/16")]
    pub ue_pool: Ipv4Pool,
    /// The gNB's N3 address, for downlink Outer Header Creation.
    #[arg(long, default_value = "10.10.0.1")]
    pub gnb: Ipv4Addr,
    /// Network Instance (the DNN), sent label-encoded as Open5GS and OAI's SMF send it.
    #[arg(long, default_value = "internet")]
    pub dnn: String,
    /// Send the Network Instance as plain text, as free5GC's SMF does by default.
    #[arg(long)]
    pub dnn_plain: bool,
    /// The APN/DNN IE of each Session Establishment Request (default: --dnn), encoded
    /// as the Network Instance is.
    #[arg(long, conflicts_with = "no_apn_dnn")]
    pub apn_dnn: Option<String>,
    /// No APN/DNN IE.
    #[arg(long)]
    pub no_apn_dnn: bool,
    /// The first session's IMSI in the User ID IE (15 digits; session i gets it plus
    /// i), sent with an IMEISV and an MSISDN as Open5GS's SMF sends them.
    #[arg(long, default_value = "001010000000001", value_parser = imsi)]
    pub imsi: String,
    /// No User ID IE.
    #[arg(long)]
    pub no_user_id: bool,
    /// 4G style: no QFI in the uplink PDI and the QER.
    #[arg(long)]
    pub no_psc: bool,
    /// Let the UPF allocate each UE's IPv4 address (CHV4 in the downlink PDI's UE IP
    /// Address) and use the one it returns; --ue-pool then only numbers the requests.
    #[arg(long, conflicts_with = "apps")]
    pub ue_ip_choose: bool,
    /// QER MBR, uplink and downlink, kbit/s.
    #[arg(long, default_value_t = 10_000_000)]
    pub mbr_kbps: u64,
    /// An SDF filter's Flow Description in both PDRs, e.g. "permit out ip from any to
    /// assigned" (default: none).
    #[arg(long)]
    pub sdf: Option<String>,
    /// PFDs to provision with a PFD Management Request after the association: a JSON
    /// list of {"id", "domains", "urls", "flows"} (upfbench::smf::apps).
    #[arg(long)]
    pub pfds: Option<PathBuf>,
    /// Application PDRs in every session, in order: ID[:gate=closed,mbr=KBPS,start]
    /// (PDRs 3+2k and 4+2k, URR 2+k, QER 2+k; repeat for more applications).
    #[arg(long = "app")]
    pub apps: Vec<super::AppRule>,
    /// A Session Reporting Rule for QoS monitoring of each session's QoS flow (QFI 1):
    /// SRR_ID:ITEM,... with dl, ul, rp, period=S, dl-threshold=MS, ul-threshold=MS,
    /// rp-threshold=MS, min-wait=S, release (upfbench::smf::qos); repeat for more.
    #[arg(long = "qos-srr", conflicts_with = "no_psc")]
    pub qos_srrs: Vec<super::QosSrr>,
    /// Keep the sessions this many seconds after establishing them (answering the UPF's
    /// heartbeats and reports), before --delete and --release.
    #[arg(long, default_value_t = 0)]
    pub hold: u64,
    /// A second PFD Management Request, sent --pfds-update-after seconds into --hold.
    #[arg(long, requires = "hold")]
    pub pfds_update: Option<PathBuf>,
    /// Seconds into --hold for --pfds-update.
    #[arg(long, default_value_t = 0)]
    pub pfds_update_after: u64,
    /// Establish the downlink FAR as BUFF|NOCP, then switch each session to FORW towards
    /// the gNB with a Session Modification Request.
    #[arg(long)]
    pub modify: bool,
    /// Delete every session at the end.
    #[arg(long)]
    pub delete: bool,
    /// Release the association at the end.
    #[arg(long)]
    pub release: bool,
    /// T1: milliseconds to wait for a response before sending the request again.
    #[arg(long, default_value_t = 3000)]
    pub t1_ms: u64,
    /// N1: retransmissions before giving up.
    #[arg(long, default_value_t = 3)]
    pub n1: u32,
    /// Write one JSON line per session (SEIDs, UE IP, uplink F-TEID, gNB TEID) here.
    #[arg(long)]
    pub sessions_out: Option<PathBuf>,
    /// Print the report as one JSON object.
    #[arg(long)]
    pub json: bool,
}

/// The APN/DNN IE's name: `given`, else the DNN; None with `none`.
pub fn apn_dnn(dnn: &str, given: Option<&str>, none: bool) -> Option<String> {
    (!none).then(|| given.unwrap_or(dnn).to_string())
}

/// The User ID IEs' identities from the first IMSI; None with `none`.
pub fn user_ids(imsi: &str, none: bool) -> Option<super::UserIds> {
    (!none).then(|| super::UserIds {
        imsi: imsi.to_string(),
        ..super::UserIds::default()
    })
}

/// A PFCP address on the command line: `IP:PORT`, `[IPv6]:PORT`, or an IP alone for
/// PFCP's port, 8805 (TS 29.244 clause 4.2.2), as operators write a UPF's N4 address.
pub fn pfcp_addr(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, PFCP_PORT));
    }
    // "[::1]" alone: an IPv6 address in brackets without a port.
    if let Some(ip) = s
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|r| r.parse::<std::net::Ipv6Addr>().ok())
    {
        return Ok(SocketAddr::new(IpAddr::V6(ip), PFCP_PORT));
    }
    let port_ok = |p: &str| p.parse::<u16>().is_ok();
    let why = if let Some(rest) = s.strip_prefix('[') {
        match rest.split_once(']') {
            Some((ip, _)) if ip.parse::<std::net::Ipv6Addr>().is_err() => {
                format!("{ip:?} is not an IPv6 address")
            }
            Some((_, port)) => match port.strip_prefix(':') {
                Some(p) if !port_ok(p) => format!("the port {p:?} is not a number from 0 to 65535"),
                _ => "after ] comes :PORT or nothing".to_string(),
            },
            None => "a [ without its ]".to_string(),
        }
    } else {
        match s.split_once(':') {
            Some((ip, port)) if !port.contains(':') => {
                if ip.parse::<std::net::Ipv4Addr>().is_err() {
                    format!("{ip:?} is not an IPv4 address (host names are not resolved)")
                } else {
                    format!("the port {port:?} is not a number from 0 to 65535")
                }
            }
            Some(_) => "not an IPv6 address (with a port, IPv6 is written [IPv6]:PORT)".to_string(),
            None => "not an IPv4 or IPv6 address (host names are not resolved)".to_string(),
        }
    };
    Err(format!(
        "{s:?}: {why}; expected IP or IP:PORT, e.g. 127.0.0.7, 127.0.0.7:8805, \
         [2001:db8::7]:8805 (the port defaults to {PFCP_PORT})"
    ))
}

/// An IMSI on the command line: 6 to 15 decimal digits (TS 23.003 clause 2.2).
pub fn imsi(s: &str) -> Result<String, String> {
    if (6..=15).contains(&s.len()) && s.bytes().all(|c| c.is_ascii_digit()) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?}: an IMSI is 6 to 15 decimal digits (MCC, MNC, MSIN)"
        ))
    }
}

impl Args {
    pub fn config(&self) -> SmfConfig {
        let mut c = SmfConfig::new(self.upf);
        if let Some(b) = self.bind {
            c.bind = b;
        }
        c.node_id = self.node_id;
        c.teid = if self.choose {
            TeidMode::Choose
        } else if self.explicit_teid {
            TeidMode::Explicit
        } else {
            TeidMode::Auto
        };
        c.upf_n3 = self.upf_n3;
        c.ue_pool = self.ue_pool;
        c.gnb = self.gnb;
        c.dnn = self.dnn.clone();
        c.dnn_plain = self.dnn_plain;
        c.apn_dnn = apn_dnn(&self.dnn, self.apn_dnn.as_deref(), self.no_apn_dnn);
        c.user_id = user_ids(&self.imsi, self.no_user_id);
        c.psc = !self.no_psc;
        c.ue_ip_choose = self.ue_ip_choose;
        c.dl_buffer = self.modify;
        c.mbr_kbps = self.mbr_kbps;
        c.sdf_filter = self.sdf.clone();
        c.applications = self.apps.clone();
        c.qos_monitoring = self.qos_srrs.clone();
        c.timers = Timers {
            t1: Duration::from_millis(self.t1_ms.max(1)),
            n1: self.n1,
        };
        c
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.sessions as u64 > args.ue_pool.capacity() {
        bail!(
            "--ue-pool {}/{} holds {} addresses, fewer than --sessions {}",
            args.ue_pool.base,
            args.ue_pool.prefix_len,
            args.ue_pool.capacity(),
            args.sessions
        );
    }
    if !(args.rate >= 0.0 && args.rate.is_finite()) {
        bail!("--rate must be 0 or a positive number");
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run_async(args))
}

async fn run_async(args: Args) -> anyhow::Result<ExitCode> {
    let cfg = args.config();
    let pace = Pace {
        rate: args.rate,
        in_flight: args.in_flight.max(1),
    };
    let mut smf = Smf::connect(cfg)
        .await
        .context("binding the local PFCP socket")?;
    let mut phases: Vec<PhaseReport> = Vec::new();
    let pfds = args
        .pfds
        .as_deref()
        .map(super::apps::load_pfds)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let pfds_update = args
        .pfds_update
        .as_deref()
        .map(super::apps::load_pfds)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let mut pfd_causes = Vec::new();
    let assoc = associate_telling(&mut smf).await?;
    let associated = assoc.accepted == 1;
    let failure = (!associated).then(|| association_failure(&smf, &assoc));
    phases.push(assoc);
    if let Some(why) = &failure {
        if args.json {
            // Scripts still get the phase, its counts and the reason (also on stderr).
            let v = json!({
                "upf": smf.config().upf.to_string(),
                "local": smf.n4().local_addr()?.to_string(),
                "node_id": smf.n4().node_id().to_string(),
                "phases": phases,
                "error": why,
            });
            println!("{v}");
        }
        bail!("{why}");
    }
    if associated {
        eprintln!(
            "associated with UPF node id {}; establishing {} sessions ...",
            smf.upf_node_id().map(|n| n.to_string()).unwrap_or_default(),
            args.sessions
        );
        if let Some(p) = &pfds {
            pfd_causes.push(send_pfds(&smf, p, "PFD Management").await?);
        }
        phases.push(smf.establish(args.sessions, pace).await);
        if args.modify {
            phases.push(smf.modify(pace).await);
        }
        // Written before the hold, so that a gNB emulator can start on the sessions
        // while they are held.
        if let Some(path) = &args.sessions_out {
            write_sessions(path, smf.sessions())?;
            eprintln!(
                "wrote {} sessions to {}",
                smf.sessions().len(),
                path.display()
            );
        }
        if args.hold > 0 {
            let hold = Duration::from_secs(args.hold);
            let start = tokio::time::Instant::now();
            eprintln!("holding the sessions for {} ...", secs(hold));
            if let Some(p) = &pfds_update {
                let at = Duration::from_secs(args.pfds_update_after).min(hold);
                tokio::time::sleep_until(start + at).await;
                pfd_causes.push(send_pfds(&smf, p, "PFD Management (update)").await?);
            }
            tokio::time::sleep_until(start + hold).await;
        }
        smf.absorb_session_reports();
        if args.delete {
            phases.push(smf.delete(pace).await);
        }
        if args.release {
            phases.push(smf.release().await);
        }
    }
    let ok = associated
        && phases.iter().all(PhaseReport::all_accepted)
        && pfd_causes.iter().all(|&c| c == 1);
    let established = smf
        .sessions()
        .iter()
        .filter(|s| s.up_fseid.is_some())
        .count();
    let with_fteid = smf
        .sessions()
        .iter()
        .filter(|s| s.n3_fteid.is_some())
        .count();
    let upf_requests = smf.upf_requests();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        let v = json!({
            "upf": smf.config().upf.to_string(),
            "local": smf.n4().local_addr()?.to_string(),
            "node_id": smf.n4().node_id().to_string(),
            "upf_node_id": smf.upf_node_id().map(|n| n.to_string()),
            "up_function_features": smf.up_function_features().map(|f| f.0.iter().map(|b| format!("{b:02x}")).collect::<String>()),
            "choose": smf.uses_choose(),
            "upf_n3": smf.upf_n3().to_string(),
            "sessions": args.sessions,
            "rate": args.rate,
            "in_flight": pace.in_flight,
            "phases": phases,
            "sessions_established": established,
            "uplink_fteids": with_fteid,
            "upf_requests": upf_requests,
            "pfd_management_causes": pfd_causes,
            "usage_by_urr": smf.usage(),
            "qos_reports": smf.qos_reports(),
        });
        writeln!(out, "{v}")?;
    } else {
        writeln!(
            out,
            "smf {} -> upf {} ({}), node id {}; uplink F-TEID {}; {} sessions, rate {}, {} in flight",
            smf.n4().local_addr()?,
            smf.config().upf,
            smf.upf_node_id()
                .map(|n| n.to_string())
                .unwrap_or_else(|| "not associated".into()),
            smf.n4().node_id(),
            if smf.uses_choose() {
                "CHOOSE (allocated by the UPF)".to_string()
            } else {
                format!("explicit, at {}", smf.upf_n3())
            },
            args.sessions,
            if args.rate > 0.0 {
                format!("{}/s", args.rate)
            } else {
                "unpaced".into()
            },
            pace.in_flight
        )?;
        write!(out, "{}", report::table(&phases))?;
        writeln!(
            out,
            "sessions: {established} established, {with_fteid} with an uplink F-TEID; UPF requests answered: {} heartbeats, {} session reports, {} node requests",
            upf_requests.heartbeats, upf_requests.session_reports, upf_requests.node_requests
        )?;
        for (urr, u) in smf.usage() {
            let app = (0..args.apps.len())
                .find(|&k| super::AppIds::of(k).urr == *urr)
                .map(|k| format!(" (application {})", args.apps[k].id))
                .unwrap_or_default();
            writeln!(
                out,
                "URR {urr}{app}: {} octets ({} up, {} down), {} packets, in {} reports, {} with application detection",
                u.total, u.uplink, u.downlink, u.total_packets, u.reports, u.app_detections
            )?;
        }
        for q in &args.qos_srrs {
            writeln!(out, "{}", qos_summary(q.srr_id, smf.qos_reports()))?;
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// "SRR 1: 4 QoS monitoring reports (1 at deletion, 0 measurement failures), mean DL 40
/// ms, UL 25 ms, RP 65 ms".
fn qos_summary(srr_id: u8, reports: &[super::QosReport]) -> String {
    let of: Vec<_> = reports.iter().filter(|r| r.srr_id == srr_id).collect();
    let at_deletion = of.iter().filter(|r| r.at_deletion).count();
    let failures = of.iter().filter(|r| r.measurement.plmf).count();
    let mean = |f: fn(&super::QosReport) -> Option<u32>| {
        let v: Vec<u64> = of.iter().filter_map(|r| f(r)).map(u64::from).collect();
        (!v.is_empty()).then(|| v.iter().sum::<u64>() / v.len() as u64)
    };
    let means: Vec<String> = [
        ("DL", mean(|r| r.measurement.downlink_ms)),
        ("UL", mean(|r| r.measurement.uplink_ms)),
        ("RP", mean(|r| r.measurement.round_trip_ms)),
    ]
    .iter()
    .filter_map(|(k, m)| m.map(|m| format!("{k} {m} ms")))
    .collect();
    format!(
        "SRR {srr_id}: {} ({at_deletion} at deletion, {failures} measurement failures){}",
        count(of.len() as u64, "QoS monitoring report"),
        if means.is_empty() {
            String::new()
        } else {
            format!(", mean {}", means.join(", "))
        }
    )
}

/// One JSON line per session into `path`, written beside it and renamed into place, so
/// that a reader waiting for the file never sees part of it.
fn write_sessions(path: &std::path::Path, sessions: &[super::Session]) -> anyhow::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".part");
    let tmp = PathBuf::from(tmp);
    let mut f = std::io::BufWriter::new(
        std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?,
    );
    for s in sessions {
        writeln!(f, "{}", serde_json::to_string(s)?)?;
    }
    f.flush()
        .with_context(|| format!("writing {}", tmp.display()))?;
    drop(f);
    std::fs::rename(&tmp, path)
        .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
}

/// Send a PFD Management Request; its Cause (said on stderr if not accepted).
async fn send_pfds(smf: &Smf, apps: &[super::AppPfds], what: &str) -> anyhow::Result<u8> {
    let r = smf
        .pfd_management(apps)
        .await
        .map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
    let ids: Vec<&str> = apps.iter().map(|a| a.id.as_str()).collect();
    if r.cause.is_acceptance() {
        eprintln!("{what}: PFDs of {} accepted", ids.join(", "));
    } else {
        eprintln!(
            "{what}: PFDs of {} rejected: Cause {}, offending IE {:?}",
            ids.join(", "),
            r.cause.0,
            r.offending_ie
        );
    }
    Ok(r.cause.0)
}

/// The Association Setup, saying at once what is being done and, while the UPF does not
/// answer, each retransmission as it is due (on stderr).
async fn associate_telling(smf: &mut Smf) -> anyhow::Result<PhaseReport> {
    let upf = smf.config().upf;
    let local = smf.n4().local_addr()?;
    let Timers { t1, n1 } = smf.n4().timers();
    eprintln!(
        "associating with the UPF at {upf} from {local} (PFCP Association Setup Request; \
         sent again after {} without an answer, at most {}) ...",
        secs(t1),
        count(u64::from(n1), "time")
    );
    let fut = smf.associate();
    tokio::pin!(fut);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + t1, t1);
    let mut sent_again = 0;
    loop {
        tokio::select! {
            a = &mut fut => return Ok(a),
            _ = tick.tick() => {
                sent_again += 1;
                if sent_again <= n1 {
                    eprintln!(
                        "no answer from {upf} after {}; sending again ({sent_again} of {n1})",
                        secs(t1 * sent_again)
                    );
                }
            }
        }
    }
}

/// Why the association failed, with the address and what was tried.
fn association_failure(smf: &Smf, a: &PhaseReport) -> String {
    let upf = smf.config().upf;
    let local = smf
        .n4()
        .local_addr()
        .map_or_else(|_| "?".to_string(), |l| l.to_string());
    let Timers { t1, n1 } = smf.n4().timers();
    if a.timed_out > 0 {
        format!(
            "no answer from the UPF at {upf}: the PFCP Association Setup Request from {local} \
             was sent {} ({}, {} apart) over {}. Is a UPF running there, listening for PFCP \
             on that address and port, and reachable from this host (or namespace)? --t1-ms \
             and --n1 set the timers",
            count(a.retransmissions + 1, "time"),
            count(a.retransmissions, "retransmission"),
            secs(t1),
            secs(t1 * (n1 + 1))
        )
    } else if let Some(r) = a.rejections.first() {
        format!(
            "the UPF at {upf} rejected the PFCP Association Setup Request from {local}: \
             Cause {} ({})",
            r.cause, r.name
        )
    } else {
        format!(
            "no Association Setup Response from the UPF at {upf} to the request from {local}: \
             {} (an answer that did not parse or was of another type, or a socket error), \
             after {}",
            count(a.errors as u64, "error"),
            count(a.retransmissions, "retransmission")
        )
    }
}

/// "1 time", "3 times".
fn count(n: u64, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// "3 s", "300 ms".
fn secs(d: Duration) -> String {
    if d.as_millis() % 1000 == 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// `upfbench fake-upf`: the test double of [`super::fake_upf`], standalone, to try the
/// SMF emulator and the replayer by hand.
#[derive(clap::Args, Debug)]
pub struct FakeArgs {
    #[arg(long, default_value = "127.0.0.1:8805", value_parser = pfcp_addr)]
    pub listen: SocketAddr,
    /// N3 address in allocated F-TEIDs.
    #[arg(long, default_value = "127.0.0.1")]
    pub n3: Ipv4Addr,
    /// Do not announce FTUP.
    #[arg(long)]
    pub no_ftup: bool,
    /// Stop after this many seconds (0: run until killed).
    #[arg(long, default_value_t = 0)]
    pub seconds: u64,
}

pub fn run_fake(args: FakeArgs) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let upf = FakeUpf::start(FakeUpfConfig {
            listen: args.listen,
            n3: args.n3,
            ftup: !args.no_ftup,
            ..FakeUpfConfig::default()
        })
        .await
        .with_context(|| format!("binding {}", args.listen))?;
        eprintln!("fake-upf listening on {}", upf.addr());
        if args.seconds > 0 {
            tokio::time::sleep(Duration::from_secs(args.seconds)).await;
        } else {
            std::future::pending::<()>().await;
        }
        println!("{}", serde_json::to_string(&upf.stats())?);
        Ok(ExitCode::SUCCESS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: Args,
    }

    #[test]
    fn qos_srrs_on_the_command_line() {
        let cli = Cli::parse_from([
            "smf",
            "--qos-srr",
            "1:dl,ul,rp,period=1",
            "--qos-srr",
            "3:rp,release",
        ]);
        let c = cli.a.config();
        assert_eq!(c.qos_monitoring.len(), 2);
        assert_eq!(c.qos_monitoring[0].period_s, Some(1));
        assert!(c.qos_monitoring[1].at_release);
        assert!(Cli::try_parse_from(["smf", "--qos-srr", "1:dl"]).is_err());
        assert!(Cli::try_parse_from(["smf", "--no-psc", "--qos-srr", "1:dl,release"]).is_err());
        let m = |dl| pfcp::ie::QosMonitoringMeasurement {
            downlink_ms: Some(dl),
            ..Default::default()
        };
        let r = |srr_id, dl, at_deletion| super::super::QosReport {
            session: 0,
            srr_id,
            qfi: 1,
            measurement: m(dl),
            time_stamp: 0,
            start_time: None,
            at_deletion,
        };
        let reports = [r(2, 40, false), r(2, 44, true), r(1, 9, false)];
        assert_eq!(
            qos_summary(2, &reports),
            "SRR 2: 2 QoS monitoring reports (1 at deletion, 0 measurement failures), mean DL 42 ms"
        );
    }

    #[tokio::test]
    async fn a_upf_that_does_not_answer_fails_with_its_address_and_what_was_tried() {
        let silent = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let upf = silent.local_addr().unwrap().to_string();
        let cli = Cli::parse_from([
            "smf",
            "--upf",
            &upf,
            "--bind",
            "127.0.0.1:0",
            "--t1-ms",
            "50",
            "--n1",
            "2",
        ]);
        let e = run_async(cli.a).await.unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("no answer from the UPF at {upf}: the PFCP Association Setup Request from 127.0.0.1:")),
            "{e}"
        );
        assert!(
            e.contains("was sent 3 times (2 retransmissions, 50 ms apart) over 150 ms"),
            "{e}"
        );
    }
}
