//! upfd end to end in the lab (`upfbench::lab`): the XDP data path on upf's n3 and n6,
//! sessions from the SMF emulator over the N4 veth, UEs from the gNB/UE emulator (a TUN
//! per UE in gnb), and ordinary tools as a phone's apps: ping, iperf3 TCP and UDP.
//!
//! Each test builds its own lab (prefix `e-<name>-`) and removes it; they run one at a
//! time. Root only: elsewhere each test says so and passes.

mod common;

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use common::lab::{ping, root, run_bounded, serial, LabSmf, LabUpfd, UpfdOptions};
use upfbench::gnb::{Gnb, GnbConfig, UeSession};
use upfbench::lab::{addr, Lab, Ns};

fn gnb(lab: &Lab, sessions: &[UeSession]) -> Gnb {
    Gnb::start(
        GnbConfig {
            netns: Some(lab.ns(Ns::Gnb)),
            ..GnbConfig::default()
        },
        sessions.to_vec(),
    )
    .expect("starting the gNB/UE emulator")
}

fn ue(s: &UeSession) -> Ipv4Addr {
    s.ue_ip.expect("IPv4 UE")
}

/// iperf3 between a UE and the data network for `secs` seconds: `reverse` = downlink,
/// `udp_rate` = UDP at that rate (bit/s) with 1200-octet datagrams, else TCP. The JSON
/// summary of the client.
fn iperf3(
    lab: &Lab,
    ue: Ipv4Addr,
    port: u16,
    secs: u32,
    reverse: bool,
    udp_rate: Option<u64>,
) -> serde_json::Value {
    let mut server = lab.command(Ns::Dn, "iperf3");
    server
        .args(["-s", "-1", "-B", &addr::DN_N6.to_string()])
        .args(["-p", &port.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut server = server.spawn().expect("iperf3 server");
    let mut last = String::new();
    let end = Instant::now() + Duration::from_secs(10);
    let mut result = None;
    // The server is ready when a client gets through: retry refused connections.
    while result.is_none() && Instant::now() < end {
        let mut c = lab.command(Ns::Gnb, "iperf3");
        c.args(["-c", &addr::DN_N6.to_string(), "-B", &ue.to_string()])
            .args(["-p", &port.to_string(), "-t", &secs.to_string(), "-J"]);
        if reverse {
            c.arg("-R");
        }
        if let Some(r) = udp_rate {
            c.args(["-u", "-b", &r.to_string(), "-l", "1200"]);
        }
        let out = run_bounded(c, Duration::from_secs(u64::from(secs) + 15));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if v["end"]["sum_received"].is_object() || v["end"]["sum"].is_object() {
            result = Some(v);
        } else {
            last = format!(
                "{}: {:?} {}",
                out.status,
                v["error"],
                String::from_utf8_lossy(&out.stderr)
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }
    let _ = server.kill();
    let _ = server.wait();
    result.unwrap_or_else(|| panic!("iperf3 to {ue}: {last}"))
}

/// Bits per second the receiving side got (TCP), or the UDP summary's rate.
fn received_bps(v: &serde_json::Value) -> f64 {
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .or_else(|| v["end"]["sum"]["bits_per_second"].as_f64())
        .expect("iperf3 rate")
}

#[test]
fn ping_and_iperf3_from_several_ues_both_directions() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-tr-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    let mut smf = LabSmf::associate(&lab, |_| {});
    let sessions = smf.establish(3);
    smf.modify();
    let sessions = {
        let _ = sessions;
        smf.ue_sessions()
    };
    assert_eq!(sessions.len(), 3);
    let g = gnb(&lab, &sessions);

    for s in &sessions {
        assert_eq!(
            ping(&lab, Ns::Gnb, Some(ue(s)), addr::DN_N6, 3),
            3,
            "UE {} -> DN",
            ue(s)
        );
        assert_eq!(ping(&lab, Ns::Dn, None, ue(s), 3), 3, "DN -> UE {}", ue(s));
    }
    let st = g.stats();
    for u in &st.ues {
        assert!(u.ul_packets >= 6 && u.dl_packets >= 6, "{st:?}");
    }

    let mut figures = Vec::new();
    for (i, s) in sessions.iter().take(2).enumerate() {
        for reverse in [false, true] {
            let port = 5201 + (i as u16) * 4 + u16::from(reverse);
            let tcp = received_bps(&iperf3(&lab, ue(s), port, 2, reverse, None));
            assert!(tcp > 20e6, "TCP {tcp} bit/s");
            let udp = iperf3(&lab, ue(s), port + 2, 2, reverse, Some(20_000_000));
            let sum = &udp["end"]["sum"];
            let lost = sum["lost_percent"].as_f64().unwrap_or(100.0);
            assert!(lost < 1.0, "UDP 20 Mbit/s lost {lost} %: {sum}");
            figures.push(format!(
                "UE {} {}: TCP {:.0} Mbit/s, UDP 20 Mbit/s lost {lost:.2} %",
                ue(s),
                if reverse { "downlink" } else { "uplink" },
                tcp / 1e6
            ));
        }
    }
    eprintln!(
        "through upfd (debug build of the emulator):\n  {}",
        figures.join("\n  ")
    );

    // Everything the UEs sent and received crossed the XDP data path: forwarded counts
    // on both sides, no drops for reasons a correct session never hits.
    let m = upfd.metrics();
    for reason in ["no_pdr", "unknown_teid", "spoofed_source", "malformed_gtpu"] {
        let series = format!("upf_dropped_packets_total{{reason=\"{reason}\"}}");
        assert_eq!(common::lab::metric(&m, &series), 0, "{series}\n{m}");
    }
    assert!(
        common::lab::metric(
            &m,
            "upf_datapath_packets_total{outcome=\"forwarded_uplink\"}"
        ) > 1000,
        "{m}"
    );
    assert!(
        common::lab::metric(
            &m,
            "upf_datapath_packets_total{outcome=\"forwarded_downlink\"}"
        ) > 1000,
        "{m}"
    );
    let st = g.stop();
    assert_eq!((st.malformed, st.unknown_teid), (0, 0), "{st:?}");
    drop(smf);
    drop(upfd);
    lab.down().unwrap();
}
