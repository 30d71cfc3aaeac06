//! GTP-U path QoS monitoring (issue 30; TS 23.501 clause 5.33.3.3, TS 29.244 clause
//! 5.24.3), end to end in the lab: the SMF emulator asks in its Association Setup
//! Request for the delay of the N3 paths (PER every second, THR past 20 ms at most every 2
//! s, IRE); upfd sends the gNB GTP-U Echo Requests, the gNB/UE emulator answers them
//! across an N3 whose delays it sets (it holds Echo Requests the downlink delay and its
//! Echo Responses the uplink delay), and the SMF emulator receives GTP-U Path QoS Reports
//! in Node Report Requests: half the round trip, (40 + 25) / 2 = 32.5 ms, within ±20 %.
//!
//! The test builds its own lab (prefix `e-gpq-`) and removes it. Root only: elsewhere it
//! says so and passes.

mod common;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use common::lab::{root, serial, LabSmf, LabUpfd, UpfdOptions};
use pfcp::ie::{gtpu_path_interface_type as iface, qos_report_trigger as trig, Flags, GprsTimer};
use pfcp::msg::{GtpuPathQosControlInformation, GtpuPathQosReport};
use upfbench::lab::{addr, Lab};
use upfbench::smf::Pace;

const DL_DELAY: Duration = Duration::from_millis(40);
const UL_DELAY: Duration = Duration::from_millis(25);
/// Half the round trip, ms (rounded down by upfd).
const WANT: u32 = 32;
const RUN: Duration = Duration::from_millis(4500);
const PERIOD: Duration = Duration::from_secs(1);
const MIN_WAIT: Duration = Duration::from_secs(2);

fn near(got: u32, want: u32) -> bool {
    got * 10 >= want * 8 && got * 10 <= want * 12
}

/// One session (so that upfd knows the gNB as an N3 peer, once its downlink FAR tunnels
/// to it), the gNB emulator delaying N3 40 ms down and 25 ms up; 4.5 s of reports:
/// one immediate report (IRE) first, periodic ones (at least 2, at most one per period
/// of the time that passed plus one), threshold ones (at least 1, at most one per
/// Minimum Waiting Time plus one); each for the gNB's address, its average within ±20 %
/// of 32 ms, minimum <= average <= maximum.
#[test]
fn gtpu_path_delay_to_the_gnb_is_reported_in_node_reports() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-gpq-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    let control = GtpuPathQosControlInformation {
        remote_gtpu_peers: vec![],
        gtpu_path_interface_type: Some(Flags::from_bits(&[iface::N3], 1)),
        qos_report_trigger: Some(Flags::from_bits(&[trig::PER, trig::THR, trig::IRE], 1)),
        transport_level_marking: None,
        measurement_period: Some(PERIOD.as_secs() as u32),
        average_packet_delay: Some(20),
        minimum_packet_delay: None,
        maximum_packet_delay: None,
        // GPRS Timer: unit "value x 2 s" (000), value 1.
        timer: Some(GprsTimer(1)),
        other: vec![],
    };
    // The downlink FAR buffers until the gNB emulator runs: upfd learns the gNB as a
    // peer (and starts its Echo Requests) only then, so that none waits in the
    // emulator's socket while it starts.
    let mut smf = LabSmf::associate(&lab, |c| {
        c.gtpu_path_qos = vec![control];
        c.dl_buffer = true;
    });
    let gnb = smf.one_session_with_gnb_delays(&lab, DL_DELAY, UL_DELAY);
    let answering = Instant::now();
    let mut reports: Vec<GtpuPathQosReport> = Vec::new();
    while answering.elapsed() < RUN {
        reports.extend(smf.smf.path_qos_reports());
        std::thread::sleep(Duration::from_millis(50));
    }
    reports.extend(smf.smf.path_qos_reports());
    let elapsed = answering.elapsed();
    let r = smf.rt.block_on(smf.smf.delete(Pace::default()));
    assert_eq!(r.accepted, 1, "deletion: {r:?}");
    let stats = gnb.stop();
    let echoes = upfd.metric("upf_slowpath_gtpu_messages_total{kind=\"echo_request_sent\"}");
    let context = format!(
        "{} reports in {elapsed:?}:\n{}\nupfd: {echoes} Echo Requests sent",
        reports.len(),
        reports
            .iter()
            .map(|r| format!("  {r:?}"))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    eprintln!("{context}\ngNB: {stats:?}");
    let of = |t: u16| -> Vec<&GtpuPathQosReport> {
        reports
            .iter()
            .filter(|r| r.qos_report_trigger.get(t))
            .collect()
    };
    for r in &reports {
        assert_eq!(
            r.remote_gtpu_peer.ipv4.map(IpAddr::V4),
            Some(IpAddr::V4(addr::GNB_N3)),
            "a report for another peer: {context}"
        );
        let q = &r.qos_information[0];
        let (avg, min, max) = (
            q.average_packet_delay,
            q.minimum_packet_delay.unwrap_or(0),
            q.maximum_packet_delay.unwrap_or(u32::MAX),
        );
        assert!(
            near(avg, WANT) && min <= avg && avg <= max,
            "path delay off by more than 20 % of {WANT} ms, or min/avg/max out of order: \
             {r:?}\n{context}"
        );
    }
    let immediate = of(trig::IRE);
    assert_eq!(immediate.len(), 1, "one immediate report: {context}");
    assert!(
        std::ptr::eq(immediate[0], &reports[0]),
        "the immediate report first: {context}"
    );
    let periodic = of(trig::PER);
    let most = elapsed.as_millis().div_ceil(PERIOD.as_millis()) as usize + 1;
    assert!(
        periodic.len() >= 2 && periodic.len() <= most,
        "{} periodic reports, want 2 to {most}: {context}",
        periodic.len()
    );
    let threshold = of(trig::THR);
    let most = elapsed.as_millis().div_ceil(MIN_WAIT.as_millis()) as usize + 1;
    assert!(
        !threshold.is_empty() && threshold.len() <= most,
        "{} threshold reports, want 1 to {most}: {context}",
        threshold.len()
    );
    let requests = smf.smf.upf_requests();
    assert_eq!(requests.unanswered, 0, "{requests:?}");
}
