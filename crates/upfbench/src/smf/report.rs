//! What one phase of the SMF emulator did: counts by outcome, rate and latency
//! percentiles, as a table row or JSON.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use pfcp::CauseValue;
use serde::Serialize;

/// Latency from a request's first transmission to its response, in milliseconds.
#[derive(Debug, Default, Clone, Copy, PartialEq, Serialize)]
pub struct Latency {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Latency {
    /// Nearest-rank percentiles of `samples` (sorted in place). All zero when empty.
    pub fn of(samples: &mut [Duration]) -> Latency {
        if samples.is_empty() {
            return Latency::default();
        }
        samples.sort_unstable();
        let rank = |p: f64| {
            let i = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
            samples[i].as_secs_f64() * 1e3
        };
        Latency {
            p50_ms: rank(0.50),
            p99_ms: rank(0.99),
            max_ms: samples[samples.len() - 1].as_secs_f64() * 1e3,
        }
    }
}

/// Rejections with one Cause.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rejection {
    pub cause: u8,
    pub name: &'static str,
    pub count: usize,
}

/// The outcome of one phase (associate, establish, modify, delete, release).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PhaseReport {
    pub phase: &'static str,
    /// Requests sent (each counted once, whatever its retransmissions).
    pub requests: usize,
    /// Responses with Cause "Request accepted".
    pub accepted: usize,
    /// Responses with any other Cause, summed over `rejections`.
    pub rejected: usize,
    pub rejections: Vec<Rejection>,
    /// No response after all retransmissions.
    pub timed_out: usize,
    /// Responses that did not parse or were of the wrong type, and socket errors.
    pub errors: usize,
    /// Retransmissions sent in the phase.
    pub retransmissions: u64,
    /// From the first request sent to the last response received or given up on.
    pub elapsed_s: f64,
    /// Accepted responses per second of `elapsed_s`.
    pub per_second: f64,
    pub latency: Latency,
}

/// Collects the outcomes of a phase's requests.
#[derive(Debug)]
pub struct PhaseStats {
    phase: &'static str,
    requests: usize,
    accepted: usize,
    rejected: BTreeMap<u8, usize>,
    timed_out: usize,
    errors: usize,
    retransmissions: u64,
    latencies: Vec<Duration>,
}

impl PhaseStats {
    pub fn new(phase: &'static str) -> Self {
        PhaseStats {
            phase,
            requests: 0,
            accepted: 0,
            rejected: BTreeMap::new(),
            timed_out: 0,
            errors: 0,
            retransmissions: 0,
            latencies: Vec::new(),
        }
    }

    pub fn sent(&mut self) {
        self.requests += 1;
    }

    /// A response arrived with `cause`.
    pub fn answered(&mut self, cause: CauseValue, latency: Duration, retransmissions: u32) {
        self.retransmissions += u64::from(retransmissions);
        self.latencies.push(latency);
        if cause == CauseValue::REQUEST_ACCEPTED {
            self.accepted += 1;
        } else {
            *self.rejected.entry(cause.0).or_default() += 1;
        }
    }

    /// A response arrived but was not what we asked for (latency still counts).
    pub fn bad_response(&mut self, latency: Duration, retransmissions: u32) {
        self.retransmissions += u64::from(retransmissions);
        self.latencies.push(latency);
        self.errors += 1;
    }

    pub fn timed_out(&mut self, retransmissions: u32) {
        self.retransmissions += u64::from(retransmissions);
        self.timed_out += 1;
    }

    pub fn error(&mut self) {
        self.errors += 1;
    }

    pub fn finish(mut self, elapsed: Duration) -> PhaseReport {
        let secs = elapsed.as_secs_f64();
        let rejections: Vec<Rejection> = self
            .rejected
            .iter()
            .map(|(c, n)| Rejection {
                cause: *c,
                name: CauseValue(*c).name(),
                count: *n,
            })
            .collect();
        PhaseReport {
            phase: self.phase,
            requests: self.requests,
            accepted: self.accepted,
            rejected: rejections.iter().map(|r| r.count).sum(),
            rejections,
            timed_out: self.timed_out,
            errors: self.errors,
            retransmissions: self.retransmissions,
            elapsed_s: secs,
            per_second: if secs > 0.0 {
                self.accepted as f64 / secs
            } else {
                0.0
            },
            latency: Latency::of(&mut self.latencies),
        }
    }
}

impl PhaseReport {
    /// True when every request was accepted.
    pub fn all_accepted(&self) -> bool {
        self.accepted == self.requests
            && self.rejected == 0
            && self.timed_out == 0
            && self.errors == 0
    }
}

/// The phases as a fixed-width table, then one line per phase with rejections.
pub fn table(phases: &[PhaseReport]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<10} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6} {:>10} {:>10} {:>9} {:>9} {:>9}",
        "phase",
        "requests",
        "accepted",
        "rejected",
        "timed out",
        "errors",
        "rexmit",
        "elapsed s",
        "per s",
        "p50 ms",
        "p99 ms",
        "max ms"
    );
    for p in phases {
        let _ = writeln!(
            s,
            "{:<10} {:>9} {:>9} {:>9} {:>9} {:>7} {:>6} {:>10.3} {:>10.1} {:>9.3} {:>9.3} {:>9.3}",
            p.phase,
            p.requests,
            p.accepted,
            p.rejected,
            p.timed_out,
            p.errors,
            p.retransmissions,
            p.elapsed_s,
            p.per_second,
            p.latency.p50_ms,
            p.latency.p99_ms,
            p.latency.max_ms
        );
    }
    for p in phases {
        for r in &p.rejections {
            let _ = writeln!(
                s,
                "{}: {} rejected with Cause {} ({})",
                p.phase, r.count, r.cause, r.name
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let mut v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let l = Latency::of(&mut v);
        assert_eq!(l.p50_ms, 50.0);
        assert_eq!(l.p99_ms, 99.0);
        assert_eq!(l.max_ms, 100.0);
        assert_eq!(Latency::of(&mut []), Latency::default());
    }

    #[test]
    fn stats_add_up() {
        let mut s = PhaseStats::new("establish");
        for _ in 0..3 {
            s.sent();
        }
        s.answered(CauseValue::REQUEST_ACCEPTED, Duration::from_millis(1), 0);
        s.answered(
            CauseValue::NO_RESOURCES_AVAILABLE,
            Duration::from_millis(2),
            1,
        );
        s.timed_out(3);
        let r = s.finish(Duration::from_secs(1));
        assert_eq!(
            (r.requests, r.accepted, r.rejected, r.timed_out),
            (3, 1, 1, 1)
        );
        assert_eq!(r.retransmissions, 4);
        assert_eq!(r.rejections[0].cause, 75);
        assert_eq!(r.per_second, 1.0);
        assert!(!r.all_accepted());
        assert!(table(&[r]).contains("rejected with Cause 75"));
    }
}
