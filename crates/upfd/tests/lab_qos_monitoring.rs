//! QoS monitoring per QoS flow (issue 30; TS 23.501 clause 5.33.3.2, TS 29.244 clause
//! 5.24.2), end to end in the lab: upfd with its XDP data path sends the gNB monitoring
//! packets (TS 38.415 clause 5.5.2.1) for the QoS flow the SMF emulator's SRRs name, the
//! gNB/UE emulator answers them as an NG-RAN does (clause 5.5.2.2) across an N3 whose
//! delays it sets, and the SMF emulator receives the QoS Monitoring Reports: periodic,
//! event triggered, and at session release in the Session Deletion Response.
//!
//! The delays measured are the gNB emulator's set delays (25 ms and more), far above this
//! machine's scheduling noise: each must be within ±20 % of what was set, else the test
//! fails with every value printed. Counts are bounded by the time that actually passed.
//!
//! The test builds its own lab (prefix `e-qos-`) and removes it. Root only: elsewhere it
//! says so and passes.

mod common;

use std::time::{Duration, Instant};

use common::lab::{metric, root, serial, LabSmf, LabUpfd, UpfdOptions};
use upfbench::lab::Lab;
use upfbench::smf::{Pace, QosReport, QosSrr};

/// The gNB emulator's N3 delays.
const DL_DELAY: Duration = Duration::from_millis(40);
const UL_DELAY: Duration = Duration::from_millis(25);

/// What upfd must measure, ms. The round trip is (T4 - T1) - (T3 - T2) (TS 23.501 clause
/// 5.33.3.2): the gNB's own turnaround between receiving (T2) and answering (T3) is taken
/// out by the formula, so it is the downlink plus the uplink delay, 65 ms, whatever the
/// gNB takes in between (the emulator stamps T3 right after T2, and holds the answer the
/// uplink delay after T3: crates/upfbench/src/gnb/mod.rs `received`, `ul_delayed`).
const WANT_DL: u32 = 40;
const WANT_UL: u32 = 25;
const WANT_RP: u32 = WANT_DL + WANT_UL;

/// How long the session is monitored (a few periods and two Minimum Wait Times).
const RUN: Duration = Duration::from_millis(4500);

/// The SRRs: (a) periodic, every second, all three delays; (b) event triggered past 30
/// ms downlink, at most every 2 s; (c) at session release, all three delays.
const SRR_PERIODIC: u8 = 1;
const SRR_EVENT: u8 = 2;
const SRR_RELEASE: u8 = 3;
const PERIOD: Duration = Duration::from_secs(1);
const MIN_WAIT: Duration = Duration::from_secs(2);

fn srrs() -> Vec<QosSrr> {
    [
        format!("{SRR_PERIODIC}:dl,ul,rp,period=1"),
        format!("{SRR_EVENT}:dl,dl-threshold=30,min-wait=2"),
        format!("{SRR_RELEASE}:dl,ul,rp,release"),
    ]
    .iter()
    .map(|s| s.parse().expect("an SRR spec"))
    .collect()
}

/// `got` within ±20 % of `want`.
fn near(got: Option<u32>, want: u32) -> bool {
    got.is_some_and(|g| g * 10 >= want * 8 && g * 10 <= want * 12)
}

/// The three delays of `r` within ±20 % of what the gNB set (those asked for).
fn delays_ok(r: &QosReport, dl: bool, ul: bool, rp: bool) -> bool {
    let m = r.measurement;
    !m.plmf
        && (!dl || near(m.downlink_ms, WANT_DL))
        && (!ul || near(m.uplink_ms, WANT_UL))
        && (!rp || near(m.round_trip_ms, WANT_RP))
}

/// One session with the three SRRs on its QoS flow (QFI 1, its QER's), its downlink FAR
/// switched from buffering to the gNB once the gNB emulator runs, delaying N3 40 ms down
/// and 25 ms up; monitored for 4.5 s more and deleted:
/// periodic reports of SRR 1 (at least 2, each DL, UL and RP within ±20 %; a measurement
/// failure only for a period that ended before the gNB was answering), event-triggered
/// reports of SRR 2 (at least 1, at most one per Minimum Wait Time of the time that
/// passed plus one, each DL over its 30 ms threshold and within ±20 %), and SRR 3's
/// report in the Session Deletion Response with the three delays within ±20 %. upfd's
/// `upf_qos_monitoring_packets_total`: answers read > 0, no more than were sent, none
/// without a tunnel; each Session Report Request answered.
#[test]
fn qos_monitoring_reports_the_gnbs_delays_periodic_on_threshold_and_at_release() {
    if !root() {
        return;
    }
    let _serial = serial();
    let lab = Lab::up("e-qos-").unwrap().down_on_drop();
    let upfd = LabUpfd::start(&lab, &UpfdOptions::default());
    // The downlink FAR buffers until the gNB runs (as a real SMF establishes before the
    // gNB has answered): upfd's probes meanwhile have no tunnel. A probe that reached
    // the emulator while it was starting would wait in its socket and be stamped late
    // (T2 is read when it is read), a delay of the emulator's start, not of N3.
    let mut smf = LabSmf::associate(&lab, |c| {
        c.qos_monitoring = srrs();
        c.dl_buffer = true;
    });
    let established = Instant::now();
    let gnb = smf.one_session_with_gnb_delays(&lab, DL_DELAY, UL_DELAY);
    let answering = Instant::now();

    // Take the reports in as they come, noting when: (arrived, report).
    let mut seen: Vec<(Instant, QosReport)> = Vec::new();
    let take = |smf: &mut LabSmf, seen: &mut Vec<(Instant, QosReport)>| {
        smf.smf.absorb_session_reports();
        let now = Instant::now();
        let all = smf.smf.qos_reports();
        seen.extend(all[seen.len()..].iter().map(|r| (now, *r)));
    };
    while answering.elapsed() < RUN {
        take(&mut smf, &mut seen);
        std::thread::sleep(Duration::from_millis(50));
    }
    take(&mut smf, &mut seen);
    let r = smf.rt.block_on(smf.smf.delete(Pace::default()));
    let elapsed = established.elapsed();
    assert_eq!(r.accepted, 1, "deletion: {r:?}");
    let all: Vec<QosReport> = smf.smf.qos_reports_of(0).copied().collect();
    let stats = gnb.stop();
    let metrics = upfd.metrics();
    let series = |kind: &str| {
        metric(
            &metrics,
            &format!("upf_qos_monitoring_packets_total{{kind=\"{kind}\"}}"),
        )
    };
    let (sent, answered, no_tunnel) = (series("sent"), series("answered"), series("no_tunnel"));
    let context = format!(
        "{} reports over {elapsed:?} (gNB answering after {:?}):\n{}\nupfd: sent {sent}, \
         answered {answered}, no tunnel {no_tunnel}; gNB: {} monitoring packets, {} answers",
        all.len(),
        answering - established,
        all.iter()
            .map(|r| format!("  {r:?}"))
            .collect::<Vec<_>>()
            .join("\n"),
        stats.qos_monitoring,
        stats.qos_answers,
    );
    eprintln!("{context}");
    assert!(
        all.iter().all(|r| r.session == 0 && r.qfi == 1),
        "a report for another QoS flow: {context}"
    );

    // (a) Periodic: a measurement failure only for a period that ended before the gNB
    // answered its first probe (a period and a round trip after it was up, with margin).
    let periodic: Vec<&(Instant, QosReport)> = seen
        .iter()
        .filter(|(_, r)| r.srr_id == SRR_PERIODIC)
        .collect();
    let measured = periodic.iter().filter(|(_, r)| !r.measurement.plmf).count();
    assert!(measured >= 2, "fewer than 2 periodic reports: {context}");
    for (at, r) in &periodic {
        let early = *at < answering + PERIOD + Duration::from_millis(500);
        assert!(
            delays_ok(r, true, true, true) || (r.measurement.plmf && early),
            "periodic report off by more than 20 % of DL {WANT_DL}, UL {WANT_UL}, RP \
             {WANT_RP} ms: {r:?}\n{context}"
        );
    }
    let most = elapsed.as_millis().div_ceil(PERIOD.as_millis()) as usize + 1;
    assert!(
        periodic.len() <= most,
        "{} periodic reports in {elapsed:?}: {context}",
        periodic.len()
    );

    // (b) Event triggered: every answer is over 30 ms, so one at the first answer and
    // then one per Minimum Wait Time at most.
    let events: Vec<&QosReport> = all.iter().filter(|r| r.srr_id == SRR_EVENT).collect();
    let most = elapsed.as_millis().div_ceil(MIN_WAIT.as_millis()) as usize + 1;
    assert!(
        !events.is_empty() && events.len() <= most,
        "{} event-triggered reports, want 1 to {most} in {elapsed:?}: {context}",
        events.len()
    );
    for r in &events {
        assert!(
            !r.at_deletion && r.measurement.downlink_ms.is_some_and(|d| d > 30),
            "an event-triggered report at or under its 30 ms threshold: {r:?}\n{context}"
        );
        assert!(
            delays_ok(r, true, false, false)
                && r.measurement.uplink_ms.is_none()
                && r.measurement.round_trip_ms.is_none(),
            "event-triggered report: DL off by more than 20 % of {WANT_DL} ms, or a delay \
             not asked for: {r:?}\n{context}"
        );
    }

    // (c) At release: in the deletion response alone, once.
    let release: Vec<&QosReport> = all.iter().filter(|r| r.srr_id == SRR_RELEASE).collect();
    assert!(
        release.len() == 1 && release[0].at_deletion,
        "SRR {SRR_RELEASE} reports once, in the Session Deletion Response: {context}"
    );
    assert!(
        delays_ok(release[0], true, true, true),
        "release report off by more than 20 % of DL {WANT_DL}, UL {WANT_UL}, RP {WANT_RP} \
         ms: {:?}\n{context}",
        release[0]
    );
    assert!(
        all.iter()
            .filter(|r| r.at_deletion)
            .all(|r| r.srr_id == SRR_RELEASE),
        "only SESRL reports at deletion: {context}"
    );

    // upfd's counters: answers read, each for a packet it sent; every report answered.
    assert!(
        answered > 0 && sent >= answered,
        "upf_qos_monitoring_packets_total: {context}"
    );
    assert!(
        answered <= stats.qos_answers && stats.qos_monitoring <= sent,
        "upfd read more answers than the gNB made, or the gNB got more than upfd sent: \
         {context}"
    );
    let requests = smf.smf.upf_requests();
    assert_eq!(requests.unanswered, 0, "{requests:?}");
    assert!(
        requests.session_reports as usize >= periodic.len(),
        "a Session Report Request per periodic report at least: {requests:?}\n{context}"
    );
}
