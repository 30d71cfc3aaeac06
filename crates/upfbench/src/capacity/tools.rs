//! Step 8: what a phone's apps see, a ping and iperf3 TCP through the UPF from a UE of the
//! gNB/UE emulator, into the report; then upfd's drop counters and upfd stopped.

use std::net::Ipv4Addr;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;

use super::steps::Run;
use super::upf;
use crate::gnb::{Gnb, GnbConfig, UeSession};
use crate::lab::{addr, Lab, Ns};
use crate::report::{self, Direction};

impl Run<'_> {
    /// Step 8: the rig's notes into the report and its sinks detached, then the ping and
    /// iperf3 check (unless --no-check) from the first session with an IPv4 UE.
    pub fn tools_check(&mut self) -> anyhow::Result<()> {
        if let Some(rig) = self.rig.take() {
            if let Some(m) = &mut self.report.machine {
                m.notes.extend(rig.notes());
            }
            rig.close().context("detaching the sinks")?;
        }
        if self.args.no_check {
            return Ok(());
        }
        self.progress.step("ping and iperf3 through the UPF");
        let ue = self
            .smf
            .as_ref()
            .and_then(|s| s.smf.sessions().iter().find_map(UeSession::from_session));
        let dn = addr::DN_N6.to_string();
        self.report.ping = Some(match ue {
            Some(u) => {
                let from = u.ue_ip.map_or_else(|| "-".to_string(), |ip| ip.to_string());
                match check_with_tools(self.lab, u, !self.args.no_psc) {
                    Ok((ping, iperf3)) => {
                        self.report.iperf3 = iperf3;
                        ping
                    }
                    Err(e) => report::PingResult::failed(
                        &from,
                        &dn,
                        format!("ping/iperf3 check failed: {e:#}"),
                    ),
                }
            }
            None => report::PingResult::failed(
                "-",
                &dn,
                "no session with an IPv4 UE and an uplink F-TEID to ping from",
            ),
        });
        Ok(())
    }

    /// After step 8, upfd (when this run started it) is done: its drops by reason noted,
    /// then the SMF, which answered its heartbeats until now, and upfd stopped, so that
    /// step 9 measures upf's interfaces without upfd's programs. An external UPF keeps
    /// running, and the SMF keeps answering it until the end ([`Run::finish`]).
    pub fn stop_upfd(&mut self) {
        let Some(u) = self.upfd.take() else {
            return;
        };
        if let Ok(m) = u.metrics() {
            let d = upf::drops(&m);
            if !d.is_empty() {
                let s: Vec<String> = d.iter().map(|(k, v)| format!("{k} {v}")).collect();
                self.check_lines.push(format!(
                    "upfd drops by reason over the run: {}",
                    s.join(", ")
                ));
            }
        }
        drop(self.smf.take());
        drop(u);
    }
}

/// Ping and iperf3 TCP (3 s each way) from one UE through the UPF to the data network,
/// its G-PDUs with a PDU Session Container unless `psc` is off (`--no-psc`, as the
/// sessions were set up).
fn check_with_tools(
    lab: &Lab,
    ue: UeSession,
    psc: bool,
) -> anyhow::Result<(report::PingResult, Vec<report::Iperf3Result>)> {
    let ip = ue.ue_ip.context("IPv4 UE")?;
    let gnb = Gnb::start(
        GnbConfig {
            netns: Some(lab.ns(Ns::Gnb)),
            psc,
            ..GnbConfig::default()
        },
        vec![ue],
    )?;
    let (ue_s, dn_s) = (ip.to_string(), addr::DN_N6.to_string());
    let mut ping = lab.command(Ns::Gnb, "ping");
    ping.args([
        "-n", "-q", "-c", "3", "-i", "0.2", "-W", "2", "-I", &ue_s, &dn_s,
    ]);
    let ping = match output_within(ping, Duration::from_secs(8)) {
        Ok(out) => {
            let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            report::PingResult::parse(&ue_s, &dn_s, &text)
        }
        Err(e) => report::PingResult::failed(&ue_s, &dn_s, format!("ping: {e}")),
    };
    let iperf3 = [Direction::Uplink, Direction::Downlink]
        .into_iter()
        .map(|d| iperf3(lab, ip, d))
        .collect();
    gnb.stop();
    Ok((ping, iperf3))
}

/// iperf3 TCP for 3 s in `d` between UE `ip` (client, in gnb) and the data network
/// (server, in dn).
fn iperf3(lab: &Lab, ip: Ipv4Addr, d: Direction) -> report::Iperf3Result {
    let (ue_s, dn_s) = (ip.to_string(), addr::DN_N6.to_string());
    let mut server = lab.command(Ns::Dn, "iperf3");
    server
        .args(["-s", "-1", "-B", &dn_s, "-p", "5299"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut server = match server.spawn() {
        Ok(s) => s,
        Err(e) => {
            return report::Iperf3Result::failed(
                d,
                &ue_s,
                &dn_s,
                3.0,
                format!("iperf3 (apt install iperf3): {e}"),
            )
        }
    };
    std::thread::sleep(Duration::from_millis(300));
    let mut c = lab.command(Ns::Gnb, "iperf3");
    c.args(["-c", &dn_s, "-B", &ue_s, "-p", "5299", "-t", "3", "-J"]);
    if d == Direction::Downlink {
        c.arg("-R");
    }
    c.args(["--connect-timeout", "3000"]);
    let o = output_within(c, Duration::from_secs(10));
    let _ = server.kill();
    let _ = server.wait();
    match o {
        Ok(o) => report::Iperf3Result::from_json(d, &ue_s, &dn_s, 3.0, &o.stdout),
        Err(e) => report::Iperf3Result::failed(d, &ue_s, &dn_s, 3.0, format!("iperf3: {e}")),
    }
}

/// Run a command, killed after `limit`; its output.
fn output_within(
    mut c: std::process::Command,
    limit: Duration,
) -> std::io::Result<std::process::Output> {
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn()?;
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if child.try_wait()?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output()
}
