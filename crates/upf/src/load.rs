//! Load and overload control towards CP functions (TS 29.244 clauses 6.2.3 and 6.2.4,
//! Annex A). upfd measures its load (sessions against the table's size, the N4 receive
//! queue's fill) and tells the N4 node; the node reports it in Load Control Information
//! to CP functions that announced LOAD, and in Overload Control Information to those that
//! announced OVRL. While overloaded it refuses new sessions with Cause 74 "PFCP entity in
//! congestion" (cheaply: nothing is allocated), and goes on serving modifications,
//! deletions and heartbeats, so the sessions it has keep working and the queue drains.

use std::time::{Duration, Instant};

use pfcp::ie::GprsTimer;
use pfcp::msg::{LoadControlInformation, OverloadControlInformation};

/// What upfd measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Load {
    /// 0-100: how much of its capacity the UP function uses (the Load Metric, a
    /// percentage).
    pub metric: u8,
    /// 0: not overloaded; else by how many percent the CP functions should reduce the
    /// requests they send (the Overload Reduction Metric).
    pub reduction: u8,
}

/// How long an overload report holds unless renewed (Period of Validity).
pub const OVERLOAD_VALIDITY: Duration = Duration::from_secs(10);

/// A Load Metric change smaller than this is not reported (each report is a new
/// sequence number the CP function must process).
const METRIC_STEP: u8 = 5;

/// The node's load state and the sequence numbers it has reported under.
#[derive(Debug, Clone)]
pub(crate) struct LoadControl {
    lci_seq: u32,
    lci_metric: u8,
    oci_seq: u32,
    oci_metric: u8,
    /// Until when the last overload report (or the report of its end) goes out.
    oci_until: Option<Instant>,
}

impl LoadControl {
    /// Sequence numbers start at `base` (the Recovery Time Stamp: after a restart they
    /// are higher than before, as a CP function ignores a report whose sequence number
    /// is not newer than the last).
    pub(crate) fn new(base: u32) -> Self {
        LoadControl {
            lci_seq: base,
            lci_metric: 0,
            oci_seq: base,
            oci_metric: 0,
            oci_until: None,
        }
    }

    pub(crate) fn update(&mut self, l: Load, now: Instant) {
        let m = l.metric.min(100);
        if m.abs_diff(self.lci_metric) >= METRIC_STEP
            || (m != self.lci_metric && (m == 0 || m == 100))
        {
            self.lci_metric = m;
            self.lci_seq = self.lci_seq.wrapping_add(1);
        }
        let r = l.reduction.min(100);
        let was = self.oci_metric;
        if r != was {
            self.oci_metric = r;
            self.oci_seq = self.oci_seq.wrapping_add(1);
        }
        // The end of an overload is reported for a period of validity too, so that CP
        // functions stop throttling at once rather than when the last report expires.
        if r > 0 || was > 0 {
            self.oci_until = Some(now + OVERLOAD_VALIDITY);
        }
    }

    pub(crate) fn overloaded(&self) -> bool {
        self.oci_metric > 0
    }

    pub(crate) fn lci(&self) -> LoadControlInformation {
        LoadControlInformation {
            sequence_number: self.lci_seq,
            metric: self.lci_metric,
            other: Vec::new(),
        }
    }

    /// Overload Control Information while overloaded, and for a period after.
    pub(crate) fn oci(&self, now: Instant) -> Option<OverloadControlInformation> {
        (self.oci_until? > now).then(|| OverloadControlInformation {
            sequence_number: self.oci_seq,
            metric: self.oci_metric,
            // Timer unit 0: value x 2 s (clause 8.2.53 refers to TS 24.008's GPRS Timer).
            period_of_validity: GprsTimer((OVERLOAD_VALIDITY.as_secs() / 2).min(31) as u8),
            oci_flags: None,
            other: Vec::new(),
        })
    }
}
