//! QoS monitoring per QoS flow by GTP-U (TS 23.501 clause 5.33.3.2, TS 29.244 clause
//! 5.24.2): for each QoS flow an SRR names (Create SRR, Table 7.5.2.9-3), upfd sends the
//! gNB monitoring packets, G-PDUs without a user packet whose PDU Session Container has
//! QMP set and the DL Sending Time Stamp T1 (TS 38.415 clause 5.5.2.1); the gNB answers
//! on the uplink with T1 repeated, its DL Received Time Stamp T2 and its UL Sending Time
//! Stamp T3 (clause 5.5.2.2), and upfd reads its own clock T4 when the answer comes. The
//! delays, with clocks in step (the UPF and the gNB synchronised, as clause 5.33.3.2
//! assumes for UL and DL separately):
//!
//! - downlink T2 - T1, uplink T4 - T3, round trip (T4 - T1) - (T3 - T2).
//!
//! The RAN's own part (the gNB's DL / UL Delay Results) is not added: a gNB reports it
//! only when the SMF asked it over NGAP. What is reported (Session Report, Table
//! 7.5.8.6-1, with a QoS Monitoring Report per flow, Table 7.5.8.6-3), as the Reporting
//! Frequency asks (clause 8.2.168):
//!
//! - periodic (PERIO): every Measurement Period, the mean of the answers that came in it,
//!   or PLMF (measurement failure) if none came;
//! - event triggered (EVETT): an answer whose delay in a requested direction is above
//!   its Packet Delay Threshold, at most once per Minimum Wait Time;
//! - at session release (SESRL): in the Session Deletion Response, the mean of the
//!   current period (or the last answer, or PLMF).
//!
//! This module is the bookkeeping alone, on clocks the caller gives: upfd sends the
//! packets and reads the answers (crates/upfd/src/slowpath.rs); N4 sends the reports.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pfcp::ie::QosMonitoringMeasurement;
use pfcp::ie::{reporting_frequency as freq, requested_qos_monitoring as req};
use pfcp::msg::{QosMonitoringReport, SessionReport};

use crate::rules::Srr;

/// Seconds between 1900-01-01 (NTP's epoch) and 1970-01-01.
pub const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// Monitoring packets per flow: one per this long at most ...
pub const PROBE_EVERY_MAX: Duration = Duration::from_secs(1);
/// ... and at least this long apart, whatever the Measurement Period.
pub const PROBE_EVERY_MIN: Duration = Duration::from_millis(100);
/// Probes per Measurement Period (when that gives more than one a second).
const PROBES_PER_PERIOD: u32 = 4;

/// `t` in the 64-bit timestamp format of RFC 5905 clause 6 (TS 38.415 clause 5.5.3.9).
pub fn ntp64(t: SystemTime) -> u64 {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = (d.as_secs() + NTP_UNIX_OFFSET) & 0xffff_ffff;
    let frac = (u64::from(d.subsec_nanos()) << 32) / 1_000_000_000;
    (secs << 32) | frac
}

/// `t` as a PFCP Time Stamp (clause 8.2.114): NTP seconds.
pub fn ntp_seconds(t: SystemTime) -> u32 {
    (ntp64(t) >> 32) as u32
}

/// Milliseconds of an interval of NTP 64-bit time (2^-32 s units); negative (clocks out
/// of step) as 0.
fn ms(units: i64) -> u32 {
    if units <= 0 {
        return 0;
    }
    ((units as u128 * 1000) >> 32).min(u128::from(u32::MAX)) as u32
}

/// One answer's delays, ms: downlink, uplink, round trip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delays {
    pub downlink: u32,
    pub uplink: u32,
    pub round_trip: u32,
}

impl Delays {
    /// From the four time stamps (NTP 64-bit): T1 sent by the UPF, T2 received by the
    /// gNB, T3 sent by the gNB, T4 received by the UPF.
    pub fn of(t1: u64, t2: u64, t3: u64, t4: u64) -> Delays {
        let d = |a: u64, b: u64| b.wrapping_sub(a) as i64;
        Delays {
            downlink: ms(d(t1, t2)),
            uplink: ms(d(t3, t4)),
            round_trip: ms(d(t1, t4) - d(t2, t3)),
        }
    }

    fn get(&self, i: usize) -> u32 {
        [self.downlink, self.uplink, self.round_trip][i]
    }
}

/// What one SRR asks for one QoS flow (Table 7.5.2.9-3).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Control {
    /// Downlink, uplink, round trip.
    want: [bool; 3],
    event: bool,
    periodic: bool,
    release: bool,
    thresholds: [Option<u32>; 3],
    min_wait: Duration,
    period: Option<Duration>,
}

impl Control {
    fn of(c: &pfcp::msg::QosMonitoringPerQosFlowControlInformation) -> Control {
        let r = &c.requested_qos_monitoring;
        let f = &c.reporting_frequency;
        let t = c.packet_delay_thresholds.unwrap_or_default();
        Control {
            want: [r.get(req::DL), r.get(req::UL), r.get(req::RP)],
            event: f.get(freq::EVETT),
            periodic: f.get(freq::PERIO),
            release: f.get(freq::SESRL),
            thresholds: [t.downlink_ms, t.uplink_ms, t.round_trip_ms],
            min_wait: Duration::from_secs(u64::from(c.minimum_wait_time.unwrap_or(0))),
            period: c
                .measurement_period
                .filter(|p| *p > 0)
                .map(|p| Duration::from_secs(u64::from(p))),
        }
    }

    /// How often to probe: a few times per Measurement Period, within
    /// [PROBE_EVERY_MIN, PROBE_EVERY_MAX].
    fn probe_every(&self) -> Duration {
        self.period
            .map_or(PROBE_EVERY_MAX, |p| p / PROBES_PER_PERIOD)
            .clamp(PROBE_EVERY_MIN, PROBE_EVERY_MAX)
    }

    /// The measurement with the requested delays of `d`.
    fn measurement(&self, d: Option<Delays>) -> QosMonitoringMeasurement {
        let Some(d) = d else {
            return QosMonitoringMeasurement {
                plmf: true,
                ..Default::default()
            };
        };
        let pick = |i: usize| self.want[i].then(|| d.get(i));
        QosMonitoringMeasurement {
            downlink_ms: pick(0),
            uplink_ms: pick(1),
            round_trip_ms: pick(2),
            ..Default::default()
        }
    }
}

/// One monitored (session, SRR, QoS flow).
#[derive(Debug, Clone)]
struct Flow {
    control: Control,
    next_probe: Instant,
    /// When the current period began (wall clock, for Start Time) and ends.
    period_start: SystemTime,
    next_report: Option<Instant>,
    /// The answers of the current period: sums and count.
    sum: [u64; 3],
    n: u64,
    last: Option<Delays>,
    last_event: Option<Instant>,
}

impl Flow {
    fn new(control: Control, now: Instant, wall: SystemTime) -> Flow {
        Flow {
            next_report: control.period.map(|p| now + p),
            control,
            next_probe: now,
            period_start: wall,
            sum: [0; 3],
            n: 0,
            last: None,
            last_event: None,
        }
    }

    fn mean(&self) -> Option<Delays> {
        let m = |i: usize| (self.sum[i] / self.n.max(1)) as u32;
        (self.n > 0).then(|| Delays {
            downlink: m(0),
            uplink: m(1),
            round_trip: m(2),
        })
    }

    fn report(&self, qfi: u8, d: Option<Delays>, wall: SystemTime) -> QosMonitoringReport {
        QosMonitoringReport {
            qfi,
            qos_monitoring_measurement: self.control.measurement(d),
            time_stamp: ntp_seconds(wall),
            start_time: Some(ntp_seconds(self.period_start)),
            other: vec![],
        }
    }
}

/// Flows by session, then (SRR ID, QFI).
type Key = (u8, u8);

/// The QoS flows being monitored, of every session.
#[derive(Debug, Default)]
pub struct QosMonitor {
    sessions: HashMap<u64, BTreeMap<Key, Flow>>,
}

/// Reports of one session, by SRR: one Session Report each.
fn grouped(reports: Vec<(u8, QosMonitoringReport)>) -> Vec<SessionReport> {
    let mut by: BTreeMap<u8, Vec<QosMonitoringReport>> = BTreeMap::new();
    for (srr, r) in reports {
        by.entry(srr).or_default().push(r);
    }
    by.into_iter()
        .map(|(srr_id, qos_monitoring_reports)| SessionReport {
            srr_id,
            access_availability_report: None,
            qos_monitoring_reports,
            other: vec![],
        })
        .collect()
}

impl QosMonitor {
    pub fn new() -> Self {
        Self::default()
    }

    /// Flows monitored in all.
    pub fn flows(&self) -> usize {
        self.sessions.values().map(BTreeMap::len).sum()
    }

    /// Session `seid` now has `srrs`: flows that stay keep their measurements (those
    /// whose control changed start a new period), new ones start now, the rest end.
    pub fn set_session<'a>(
        &mut self,
        seid: u64,
        srrs: impl Iterator<Item = &'a Srr>,
        now: Instant,
        wall: SystemTime,
    ) {
        let mut old = self.sessions.remove(&seid).unwrap_or_default();
        let mut new = BTreeMap::new();
        for s in srrs {
            for c in &s.qos {
                let control = Control::of(c);
                for qfi in &c.qfis {
                    let key = (s.id, *qfi & 0x3f);
                    let flow = match old.remove(&key) {
                        Some(f) if f.control == control => f,
                        _ => Flow::new(control.clone(), now, wall),
                    };
                    new.insert(key, flow);
                }
            }
        }
        if !new.is_empty() {
            self.sessions.insert(seid, new);
        }
    }

    /// Session `seid` is released: its flows end, and those that report at release
    /// (SESRL) give their Session Reports (for the Session Deletion Response).
    pub fn release(&mut self, seid: u64, wall: SystemTime) -> Vec<SessionReport> {
        let Some(flows) = self.sessions.remove(&seid) else {
            return Vec::new();
        };
        grouped(
            flows
                .iter()
                .filter(|(_, f)| f.control.release)
                .map(|((srr, qfi), f)| (*srr, f.report(*qfi, f.mean().or(f.last), wall)))
                .collect(),
        )
    }

    /// Session `seid` went without a release (its association ended): nothing to report.
    pub fn forget(&mut self, seid: u64) {
        self.sessions.remove(&seid);
    }

    /// The sessions monitored (to find those gone).
    pub fn seids(&self) -> Vec<u64> {
        self.sessions.keys().copied().collect()
    }

    /// The monitoring packets due at `now`: (session, QFI), one per QoS flow however
    /// many SRRs name it; each flow's next one scheduled.
    pub fn due_probes(&mut self, now: Instant) -> Vec<(u64, u8)> {
        let mut out = Vec::new();
        for (seid, flows) in &mut self.sessions {
            for ((_, qfi), f) in flows.iter_mut() {
                if f.next_probe <= now {
                    f.next_probe = now + f.control.probe_every();
                    if !out.contains(&(*seid, *qfi)) {
                        out.push((*seid, *qfi));
                    }
                }
            }
        }
        out
    }

    /// An answer for QoS flow `qfi` of session `seid` with the delays `d`: counted in
    /// each flow's period; the event-triggered reports it causes (a delay over its
    /// threshold, the Minimum Wait Time since the last such report passed).
    pub fn answer(
        &mut self,
        seid: u64,
        qfi: u8,
        d: Delays,
        now: Instant,
        wall: SystemTime,
    ) -> Vec<SessionReport> {
        let Some(flows) = self.sessions.get_mut(&seid) else {
            return Vec::new();
        };
        let mut reports = Vec::new();
        for ((srr, q), f) in flows.iter_mut() {
            if *q != qfi {
                continue;
            }
            for i in 0..3 {
                f.sum[i] += u64::from(d.get(i));
            }
            f.n += 1;
            f.last = Some(d);
            let c = &f.control;
            let over = (0..3).any(|i| c.want[i] && c.thresholds[i].is_some_and(|t| d.get(i) > t));
            let waited = f
                .last_event
                .is_none_or(|t| now.duration_since(t) >= c.min_wait);
            if c.event && over && waited {
                f.last_event = Some(now);
                reports.push((*srr, f.report(qfi, Some(d), wall)));
            }
        }
        grouped(reports)
    }

    /// The periodic reports due at `now` (PERIO), by session; each flow's next period
    /// begins.
    pub fn due_reports(
        &mut self,
        now: Instant,
        wall: SystemTime,
    ) -> Vec<(u64, Vec<SessionReport>)> {
        let mut out = Vec::new();
        for (seid, flows) in &mut self.sessions {
            let mut reports = Vec::new();
            for ((srr, qfi), f) in flows.iter_mut() {
                let (Some(at), Some(p)) = (f.next_report, f.control.period) else {
                    continue;
                };
                if at > now {
                    continue;
                }
                if f.control.periodic {
                    reports.push((*srr, f.report(*qfi, f.mean(), wall)));
                }
                f.sum = [0; 3];
                f.n = 0;
                f.period_start = wall;
                // The next period from now (not from `at`): a late poll does not
                // make a burst of reports.
                f.next_report = Some(now.max(at) + p);
            }
            if !reports.is_empty() {
                out.push((*seid, grouped(reports)));
            }
        }
        out
    }

    /// When something is next due (a probe or a periodic report).
    pub fn next_due(&self) -> Option<Instant> {
        self.sessions
            .values()
            .flat_map(|fs| fs.values())
            .flat_map(|f| [Some(f.next_probe), f.next_report])
            .flatten()
            .min()
    }
}

#[cfg(test)]
mod tests {
    use pfcp::ie::{Flags, PacketDelayThresholds};
    use pfcp::msg::QosMonitoringPerQosFlowControlInformation as Control;

    use super::*;

    const MS: u64 = (1u64 << 32) / 1000;

    fn control(freq_bits: &[u16], period: Option<u32>, dl_threshold: Option<u32>) -> Control {
        Control {
            qfis: vec![5],
            requested_qos_monitoring: Flags::from_bits(&[req::DL, req::UL, req::RP], 1),
            reporting_frequency: Flags::from_bits(freq_bits, 1),
            packet_delay_thresholds: dl_threshold.map(|t| PacketDelayThresholds {
                downlink_ms: Some(t),
                ..Default::default()
            }),
            minimum_wait_time: Some(5),
            measurement_period: period,
            other: vec![],
        }
    }

    fn srr(id: u8, c: Control) -> Srr {
        Srr { id, qos: vec![c] }
    }

    /// T1 at `base`, the gNB receiving `dl` ms later and answering 1 ms after that, the
    /// answer arriving `ul` ms after.
    fn delays(dl: u64, ul: u64) -> Delays {
        let t1 = 0xe000_0000_0000_0000u64;
        let t2 = t1 + dl * MS;
        let t3 = t2 + MS;
        Delays::of(t1, t2, t3, t3 + ul * MS)
    }

    #[test]
    fn delays_from_the_four_time_stamps() {
        let d = delays(30, 4);
        assert_eq!((d.downlink, d.uplink, d.round_trip), (29, 3, 33));
        // Clocks out of step: a negative one-way delay is 0, the round trip stands.
        let t1 = 1000 * MS;
        let d = Delays::of(t1, t1 - 5 * MS, t1 - 4 * MS, t1 + 10 * MS);
        assert_eq!((d.downlink, d.uplink, d.round_trip), (0, 13, 8));
    }

    #[test]
    fn periodic_reports_the_mean_of_the_period_then_plmf_without_answers() {
        let (t0, wall) = (Instant::now(), SystemTime::now());
        let mut m = QosMonitor::new();
        m.set_session(
            7,
            [srr(1, control(&[freq::PERIO], Some(2), None))].iter(),
            t0,
            wall,
        );
        // A probe at once, then every period / 4 = 500 ms.
        assert_eq!(m.due_probes(t0), vec![(7, 5)]);
        assert_eq!(m.due_probes(t0 + Duration::from_millis(400)), vec![]);
        assert_eq!(m.due_probes(t0 + Duration::from_millis(500)), vec![(7, 5)]);
        assert!(m.answer(7, 5, delays(20, 10), t0, wall).is_empty());
        assert!(m.answer(7, 5, delays(40, 10), t0, wall).is_empty());
        assert!(
            m.answer(7, 6, delays(90, 90), t0, wall).is_empty(),
            "another QFI"
        );
        assert!(m
            .due_reports(t0 + Duration::from_millis(1999), wall)
            .is_empty());
        let r = m.due_reports(t0 + Duration::from_secs(2), wall);
        assert_eq!(r.len(), 1);
        let (seid, reports) = &r[0];
        assert_eq!((*seid, reports.len(), reports[0].srr_id), (7, 1, 1));
        let q = &reports[0].qos_monitoring_reports[0];
        assert_eq!(q.qfi, 5);
        let x = q.qos_monitoring_measurement;
        assert_eq!(
            (x.downlink_ms, x.uplink_ms, x.round_trip_ms),
            (Some(29), Some(9), Some(39))
        );
        assert!(!x.plmf);
        // The next period had no answer: measurement failure.
        let r = m.due_reports(t0 + Duration::from_secs(4), wall);
        let x = r[0].1[0].qos_monitoring_reports[0].qos_monitoring_measurement;
        assert!(x.plmf && x.downlink_ms.is_none(), "{x:?}");
    }

    #[test]
    fn event_reports_over_the_threshold_once_per_minimum_wait_time() {
        let (t0, wall) = (Instant::now(), SystemTime::now());
        let mut m = QosMonitor::new();
        m.set_session(
            7,
            [srr(2, control(&[freq::EVETT], None, Some(25)))].iter(),
            t0,
            wall,
        );
        assert!(
            m.answer(7, 5, delays(20, 1), t0, wall).is_empty(),
            "under the threshold"
        );
        let r = m.answer(7, 5, delays(30, 1), t0, wall);
        assert_eq!(r.len(), 1);
        assert_eq!(
            r[0].qos_monitoring_reports[0]
                .qos_monitoring_measurement
                .downlink_ms,
            Some(29)
        );
        let later = t0 + Duration::from_secs(4);
        assert!(
            m.answer(7, 5, delays(30, 1), later, wall).is_empty(),
            "within the wait"
        );
        let later = t0 + Duration::from_secs(5);
        assert_eq!(m.answer(7, 5, delays(30, 1), later, wall).len(), 1);
        // No period: no periodic report, ever.
        assert!(m.due_reports(t0 + Duration::from_secs(60), wall).is_empty());
    }

    #[test]
    fn release_reports_only_what_asks_for_it_and_ends_the_flows() {
        let (t0, wall) = (Instant::now(), SystemTime::now());
        let mut m = QosMonitor::new();
        let mut both = control(&[freq::SESRL], None, None);
        both.qfis = vec![5, 6];
        let srrs = [
            srr(1, both),
            srr(2, control(&[freq::PERIO], Some(10), None)),
        ];
        m.set_session(7, srrs.iter(), t0, wall);
        assert_eq!(m.flows(), 3);
        m.answer(7, 5, delays(10, 2), t0, wall);
        let r = m.release(7, wall);
        assert_eq!(r.len(), 1, "SRR 1 only");
        let q = &r[0].qos_monitoring_reports;
        assert_eq!(q.len(), 2);
        assert_eq!(q[0].qos_monitoring_measurement.downlink_ms, Some(9));
        assert!(q[1].qos_monitoring_measurement.plmf, "QFI 6 never answered");
        assert_eq!(m.flows(), 0);
        assert!(m.due_probes(t0 + Duration::from_secs(9)).is_empty());
    }

    #[test]
    fn a_changed_srr_starts_a_new_period_an_unchanged_one_keeps_its_answers() {
        let (t0, wall) = (Instant::now(), SystemTime::now());
        let mut m = QosMonitor::new();
        let a = [srr(1, control(&[freq::PERIO], Some(2), None))];
        m.set_session(7, a.iter(), t0, wall);
        m.answer(7, 5, delays(10, 2), t0, wall);
        m.set_session(7, a.iter(), t0, wall);
        let r = m.due_reports(t0 + Duration::from_secs(2), wall);
        assert!(
            !r[0].1[0].qos_monitoring_reports[0]
                .qos_monitoring_measurement
                .plmf
        );
        m.answer(7, 5, delays(10, 2), t0, wall);
        let b = [srr(1, control(&[freq::PERIO], Some(3), None))];
        m.set_session(7, b.iter(), t0 + Duration::from_secs(2), wall);
        let r = m.due_reports(t0 + Duration::from_secs(5), wall);
        assert!(
            r[0].1[0].qos_monitoring_reports[0]
                .qos_monitoring_measurement
                .plmf
        );
        m.set_session(7, [].iter(), t0, wall);
        assert_eq!((m.flows(), m.next_due()), (0, None));
    }
}
