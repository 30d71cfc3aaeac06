//! QoS monitoring in the SMF emulator (TS 23.501 clause 5.33.3, TS 29.244 clause 5.24.2):
//! the Session Reporting Rules each session's establishment carries ([`QosSrr`], a Create
//! SRR with one QoS Monitoring per QoS flow Control Information for the session's QoS
//! flow, the QFI of its QER) and the QoS Monitoring Reports that come back ([`QosReport`]),
//! in Session Report Requests of Report Type SESR (answered with Request accepted, as every
//! Session Report Request is: [`super::n4`]) and in Session Deletion Responses (SESRL).
//!
//! On the command line (`upfbench smf --qos-srr SPEC`, repeated for more SRRs), SPEC is
//! `SRR_ID:ITEM,...` with the items
//! - `dl`, `ul`, `rp`: the delays to measure (Requested QoS Monitoring, clause 8.2.167);
//! - `period=S`: periodic reports every S seconds (PERIO, Measurement Period);
//! - `dl-threshold=MS`, `ul-threshold=MS`, `rp-threshold=MS`: event-triggered reports
//!   past these delays (EVETT, Packet Delay Thresholds, clause 8.2.169), and
//!   `min-wait=S`: at least S seconds between two of them (Minimum Wait Time);
//! - `release`: a report at session release (SESRL), in the Session Deletion Response.
//!
//! e.g. `1:dl,ul,rp,period=1`, `2:dl,dl-threshold=30,min-wait=2`, `3:dl,ul,rp,release`.

use pfcp::ie::{
    reporting_frequency as freq, requested_qos_monitoring as req, Flags, PacketDelayThresholds,
    QosMonitoringMeasurement,
};
use pfcp::msg::{CreateSrr, QosMonitoringPerQosFlowControlInformation, SessionReport};
use serde::Serialize;

/// One Create SRR (Table 7.5.2.9-1) for QoS monitoring of the session's QoS flow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QosSrr {
    pub srr_id: u8,
    /// Requested QoS Monitoring: downlink, uplink, round trip packet delay.
    pub downlink: bool,
    pub uplink: bool,
    pub round_trip: bool,
    /// Event triggered (EVETT): the Packet Delay Thresholds, ms. None: not event
    /// triggered.
    pub thresholds: Option<PacketDelayThresholds>,
    /// Minimum Wait Time between two event-triggered reports, seconds (with EVETT).
    pub minimum_wait_s: Option<u32>,
    /// Periodic (PERIO): the Measurement Period, seconds. None: not periodic.
    pub period_s: Option<u32>,
    /// At session release (SESRL).
    pub at_release: bool,
}

impl QosSrr {
    /// The Create SRR monitoring QoS flow `qfi`.
    pub fn create_srr(&self, qfi: u8) -> CreateSrr {
        let requested: Vec<u16> = [
            (self.downlink, req::DL),
            (self.uplink, req::UL),
            (self.round_trip, req::RP),
        ]
        .iter()
        .filter_map(|&(on, bit)| on.then_some(bit))
        .collect();
        let frequency: Vec<u16> = [
            (self.thresholds.is_some(), freq::EVETT),
            (self.period_s.is_some(), freq::PERIO),
            (self.at_release, freq::SESRL),
        ]
        .iter()
        .filter_map(|&(on, bit)| on.then_some(bit))
        .collect();
        CreateSrr {
            srr_id: self.srr_id,
            access_availability_control_information: None,
            qos_monitoring_per_qos_flow_control_information: vec![
                QosMonitoringPerQosFlowControlInformation {
                    qfis: vec![qfi],
                    requested_qos_monitoring: Flags::from_bits(&requested, 1),
                    reporting_frequency: Flags::from_bits(&frequency, 1),
                    packet_delay_thresholds: self.thresholds,
                    minimum_wait_time: self.thresholds.and(self.minimum_wait_s),
                    measurement_period: self.period_s,
                    other: vec![],
                },
            ],
            direct_reporting_information: None,
            other: vec![],
        }
    }
}

impl std::str::FromStr for QosSrr {
    type Err = String;

    /// `SRR_ID:ITEM,...` (see the module's documentation).
    fn from_str(s: &str) -> Result<Self, String> {
        let (id, items) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?}: expected SRR_ID:ITEM,... e.g. 1:dl,ul,rp,period=1"))?;
        let srr_id: u8 = id
            .parse()
            .map_err(|_| format!("{s:?}: the SRR ID {id:?} is not a number from 0 to 255"))?;
        let mut q = QosSrr {
            srr_id,
            ..QosSrr::default()
        };
        let num = |k: &str, v: Option<&str>| -> Result<u32, String> {
            v.and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{s:?}: {k} needs =NUMBER (a whole number)"))
        };
        let mut th = PacketDelayThresholds::default();
        for item in items.split(',') {
            let (k, v) = match item.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (item, None),
            };
            match k {
                "dl" => q.downlink = true,
                "ul" => q.uplink = true,
                "rp" => q.round_trip = true,
                "release" => q.at_release = true,
                "period" => q.period_s = Some(num(k, v)?),
                "min-wait" => q.minimum_wait_s = Some(num(k, v)?),
                "dl-threshold" => th.downlink_ms = Some(num(k, v)?),
                "ul-threshold" => th.uplink_ms = Some(num(k, v)?),
                "rp-threshold" => th.round_trip_ms = Some(num(k, v)?),
                _ => {
                    return Err(format!(
                        "{s:?}: unknown item {item:?} (dl, ul, rp, period=S, dl-threshold=MS, \
                         ul-threshold=MS, rp-threshold=MS, min-wait=S, release)"
                    ))
                }
            }
        }
        if th != PacketDelayThresholds::default() {
            q.thresholds = Some(th);
        }
        if !(q.downlink || q.uplink || q.round_trip) {
            return Err(format!("{s:?}: no delay to measure (dl, ul, rp)"));
        }
        if q.thresholds.is_none() && q.period_s.is_none() && !q.at_release {
            return Err(format!(
                "{s:?}: no reporting frequency (a threshold, period=S or release)"
            ));
        }
        if q.period_s == Some(0) {
            return Err(format!("{s:?}: period must be 1 s or more"));
        }
        if q.minimum_wait_s.is_some() && q.thresholds.is_none() {
            return Err(format!("{s:?}: min-wait goes with a threshold"));
        }
        Ok(q)
    }
}

/// One QoS Monitoring Report (Table 7.5.8.6-3) the UPF sent, as the emulator keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QosReport {
    /// The session's index.
    pub session: usize,
    pub srr_id: u8,
    pub qfi: u8,
    pub measurement: QosMonitoringMeasurement,
    /// When the UPF made the report, NTP seconds.
    pub time_stamp: u32,
    /// When the measurement behind it began, NTP seconds.
    pub start_time: Option<u32>,
    /// From the Session Deletion Response (SESRL), not a Session Report Request.
    pub at_deletion: bool,
}

/// The QoS Monitoring Reports of `reports`, for session `session`, in order.
pub fn reports_of(session: usize, reports: &[SessionReport], at_deletion: bool) -> Vec<QosReport> {
    reports
        .iter()
        .flat_map(|r| {
            r.qos_monitoring_reports.iter().map(move |q| QosReport {
                session,
                srr_id: r.srr_id,
                qfi: q.qfi,
                measurement: q.qos_monitoring_measurement,
                time_stamp: q.time_stamp,
                start_time: q.start_time,
                at_deletion,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_into_srrs() {
        let a: QosSrr = "1:dl,ul,rp,period=1".parse().unwrap();
        assert_eq!(
            a,
            QosSrr {
                srr_id: 1,
                downlink: true,
                uplink: true,
                round_trip: true,
                period_s: Some(1),
                ..QosSrr::default()
            }
        );
        let b: QosSrr = "2:dl,dl-threshold=30,min-wait=2".parse().unwrap();
        assert_eq!(b.thresholds.unwrap().downlink_ms, Some(30));
        assert_eq!(b.thresholds.unwrap().uplink_ms, None);
        assert_eq!(b.minimum_wait_s, Some(2));
        let c: QosSrr = "3:rp,release".parse().unwrap();
        assert!(c.at_release && c.round_trip && !c.downlink);
        for bad in [
            "1",
            "x:dl,release",
            "256:dl,release",
            "1:release",
            "1:dl",
            "1:dl,period=0",
            "1:dl,period",
            "1:dl,period=1,min-wait=2",
            "1:dl,dl-threshold=ms",
            "1:dl,release,jitter",
        ] {
            assert!(bad.parse::<QosSrr>().is_err(), "{bad} parsed");
        }
    }

    #[test]
    fn the_create_srr_carries_flags_thresholds_and_times() {
        let b: QosSrr = "2:dl,ul,dl-threshold=30,min-wait=2,period=5,release"
            .parse()
            .unwrap();
        let c = b.create_srr(1);
        assert_eq!(c.srr_id, 2);
        let q = &c.qos_monitoring_per_qos_flow_control_information[0];
        assert_eq!(q.qfis, vec![1]);
        assert!(q.requested_qos_monitoring.get(req::DL) && q.requested_qos_monitoring.get(req::UL));
        assert!(!q.requested_qos_monitoring.get(req::RP));
        for bit in [freq::EVETT, freq::PERIO, freq::SESRL] {
            assert!(q.reporting_frequency.get(bit), "bit {bit}");
        }
        assert_eq!(q.packet_delay_thresholds.unwrap().downlink_ms, Some(30));
        assert_eq!(
            (q.minimum_wait_time, q.measurement_period),
            (Some(2), Some(5))
        );
    }
}
