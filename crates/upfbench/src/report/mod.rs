//! The report of a benchmark run (../shared/design/BENCHMARKS.md, "What every report
//! shows"; the figures of this repository's runs are in docs/benchmarks.md): one [`Report`]
//! holds what a run measured, every section optional, and is written as `report.json`, a
//! plain-text summary ([`render_text`]), one PNG chart per table ([`render_charts`]) and one
//! self-contained `report.html` that holds the tables and the charts (inlined).
//!
//! Every rate is shown beside the limits measured in the same run (generator limit: the
//! generator into a drop program; I/O limit: bare XDP decap/encap and redirect; one-miss
//! limit: the same plus one read of the session's record), because only ratios hold on a
//! noisy shared machine; a saturation trial also carries the limits measured right before
//! and after it ([`Bracket`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use upfbench::report::*;
//!
//! let mut r = Report::new("upfd capacity, veth lab");
//! r.machine = Some(Machine::probe(&[0], &[1], Duration::from_millis(200)));
//! r.limits.push(Limit { direction: Direction::Uplink, packet_bytes: 64,
//!                       generator_mpps: Some(17.5), io_mpps: Some(4.2),
//!                       ..Limit::default() });
//! r.throughput.push(ThroughputPoint::measured(Direction::Uplink, 64, 1, 17.5, 3.1));
//! r.fill_ratios();
//! print!("{}", render_text(&r));
//! let written = r.write_all("out/run1")?;
//! for w in &written.warnings { eprintln!("warning: {w}"); }
//! # Ok::<(), ReportError>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod charts;
mod html;
mod machine;
mod table;
mod text;
mod tools;

pub use charts::{render_charts, render_charts_without_text, Chart, Charts, PixelRect, FONT};
pub use html::render_html;
pub use machine::{Machine, ProcessLoad};
pub use text::render_text;
pub use tools::{Iperf3Result, PingResult, Rtt};

/// Version of the JSON layout; raised when a field changes meaning or is removed.
pub const SCHEMA: u32 = 1;

/// One benchmark run. Sections a run did not measure stay `None` or empty and are left out
/// of every rendering.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema: u32,
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Machine>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upf: Option<UpfUnderTest>,
    /// The ceilings of this machine, measured in this run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<Limit>,
    /// The carrier capacity test (Free5GC cloud paper, Table II layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityTable>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub throughput: Vec<ThroughputPoint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub no_drop: Vec<NoDropRate>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency: Vec<LatencyPoint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sessions: Vec<SessionRatePoint>,
    /// ping from a UE through the UPF to the data network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ping: Option<PingResult>,
    /// iperf3 from a UE through the UPF, each direction.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub iperf3: Vec<Iperf3Result>,
    /// The data path's programs on one CPU and on several at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scaling: Vec<ScalingCase>,
    /// Sessions established while traffic ran at half the no-drop rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub establish_under_traffic: Option<EstablishUnderTraffic>,
    /// Saturation with an application mix on sessions with application PDRs, against
    /// the same sessions count and traffic without them; per direction.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub app_mix: Vec<AppMixPoint>,
}

/// The application mix in one direction (issue 16): sessions with an application PDR
/// per named application (each with its own URR), saturated with traffic of those
/// applications in their shares, between two trials of as many sessions without
/// application PDRs and the same traffic.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AppMixPoint {
    pub direction: Direction,
    /// Sessions sent to, in each trial.
    pub sessions: u64,
    /// Average IP packet size of the mix.
    pub packet_bytes: u32,
    /// The traffic, e.g. "HTTP 85 % (TCP port 80) / UDP 15 %".
    pub mix: String,
    /// With the application PDRs: offered and received, Mpps.
    pub offered_mpps: f64,
    pub received_mpps: f64,
    /// Without application PDRs (same traffic, same sessions count): the trials right
    /// before and after, and their mean, received Mpps.
    pub without_before_mpps: f64,
    pub without_after_mpps: f64,
    pub without_mpps: f64,
    /// received_mpps / without_mpps.
    pub ratio: f64,
    /// The trials without were more than 10 % apart.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flagged: bool,
    /// Packets the generator sent and the sink received in the trial with applications.
    pub sent_packets: u64,
    pub received_packets: u64,
    /// Packets the sessions' default URR (URR 1: no application matched) counted in this
    /// direction.
    pub unmatched_packets: u64,
    pub apps: Vec<AppUsage>,
}

/// One application of an [`AppMixPoint`]: how it is detected, its share of the traffic
/// sent, and what its URR counted in that direction (summed over the sessions' usage
/// reports, at deletion).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AppUsage {
    /// Application ID.
    pub id: String,
    /// Its PFDs, e.g. "flow description permit out tcp from 192.168.6.0/24 80 to assigned".
    pub detected_by: String,
    /// The traffic of it that was sent, e.g. "TCP port 80, 64 B and 1316 B".
    pub traffic: String,
    /// Its share of the packets sent, percent.
    pub share_pct: f64,
    pub urr_id: u32,
    /// Counted by its URR in this direction.
    pub packets: u64,
    pub bytes: u64,
    /// Its share of what the applications' URRs counted in this direction, percent.
    pub counted_share_pct: f64,
}

/// PFCP establishments while the UPF forwards: an outage's subscribers coming back while
/// the others' traffic flows (issue 17).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EstablishUnderTraffic {
    /// Sessions resident before.
    pub resident: u64,
    pub requested: u64,
    /// Accepted ("Request accepted").
    pub established: u64,
    pub established_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// The traffic's rate as a share of the no-drop rate, percent.
    pub percent_of_no_drop: u8,
    pub packet_bytes: u32,
    pub ul_offered_mpps: f64,
    pub dl_offered_mpps: f64,
    pub ul_loss_pct: f64,
    pub dl_loss_pct: f64,
    /// How long the traffic ran, and how long the establishments took (they start
    /// 0.2 s into it); the establishments ended within the traffic when the first is
    /// larger.
    pub traffic_secs: f64,
    pub establish_secs: f64,
}

/// Direction of user traffic: uplink is gNB (N3, GTP-U) to data network (N6), downlink the
/// reverse.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    #[default]
    Uplink,
    Downlink,
}

impl Direction {
    pub const BOTH: [Direction; 2] = [Direction::Uplink, Direction::Downlink];

    /// "UL" or "DL", as tables show it.
    pub fn short(self) -> &'static str {
        match self {
            Direction::Uplink => "UL",
            Direction::Downlink => "DL",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.short())
    }
}

/// The UPF under test and how it was configured.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UpfUnderTest {
    /// e.g. "upfd 0.1.0", "eUPF v0.7.1".
    pub name: String,
    /// N4 (PFCP) address, e.g. "192.168.4.2:8805".
    pub n4: String,
    /// N3 (GTP-U) address.
    pub n3: String,
    /// N6 (data network) address.
    pub n6: String,
    /// Options that change what is measured, e.g. "CHOOSE" = "on",
    /// "PDU Session Container" = "off", "data path" = "native XDP".
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, String>,
}

/// The ceilings of the machine for one direction and packet size, measured in the same run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Limit {
    pub direction: Direction,
    /// Size of the user's IP packet (the inner packet for GTP-U), bytes.
    pub packet_bytes: u32,
    /// The generator into an XDP_DROP program, Mpps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_mpps: Option<f64>,
    /// Bare XDP GTP-U decap (uplink) or encap (downlink) and redirect, no session logic, Mpps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_mpps: Option<f64>,
    /// Each pass's generator limit in the order measured, when there was more than one
    /// ([`Report::add_limit_pass`]); `generator_mpps` is the highest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub generator_passes_mpps: Vec<f64>,
    /// Each pass's I/O limit, likewise; `io_mpps` is the highest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub io_passes_mpps: Vec<f64>,
    /// The bare forwarder plus one dependent read of the session's 64-octet record from a
    /// table of `one_miss_sessions` records (keyed by TEID / UE address), Mpps: the least a
    /// UPF that reads per-session state once per packet pays. The higher of the readings
    /// that bracket the UPF's trial at that session count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_miss_mpps: Option<f64>,
    /// Sessions in the one-miss forwarder's table (those the generator sent to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_miss_sessions: Option<u64>,
}

/// Adds a pass's figure to a limit: the limit is the highest, the passes are kept.
fn add_pass(best: &mut Option<f64>, passes: &mut Vec<f64>, new: Option<f64>) {
    let Some(n) = new else { return };
    if passes.is_empty() {
        passes.extend(*best);
    }
    passes.push(n);
    *best = Some(best.map_or(n, |b| b.max(n)));
}

/// Traffic models of ../shared/design/BENCHMARKS.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TrafficModel {
    /// Carrier capacity test (Free5GC cloud evaluation, Spirent Landslide).
    Carrier,
    /// Operator UPF model (ZTE/Intel cloud-native UPF).
    Zte,
    /// vEPC model (Affirmed/Intel).
    Vepc,
    /// Small packets (LH5GC thesis).
    Small,
}

impl TrafficModel {
    pub fn name(self) -> &'static str {
        match self {
            TrafficModel::Carrier => "carrier",
            TrafficModel::Zte => "zte",
            TrafficModel::Vepc => "vepc",
            TrafficModel::Small => "small",
        }
    }

    /// What one subscriber sends, as ../shared/design/BENCHMARKS.md gives it.
    pub fn describe(self) -> &'static str {
        match self {
            TrafficModel::Carrier => {
                "per user UL 2089 kbit/s 422 pps, DL 3948 kbit/s 696 pps; HTTP + UDP; 600-700 B"
            }
            TrafficModel::Zte => "HTTP 85 % / UDP 15 %; 690 B average",
            TrafficModel::Vepc => "UDP, or HTTP with DPI; 650 B",
            TrafficModel::Small => "1 session; ICMP/UDP; 68 B upward",
        }
    }
}

impl fmt::Display for TrafficModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The capacity test: one row per subscriber step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityTable {
    pub model: TrafficModel,
    pub rows: Vec<CapacityRow>,
    /// The subscribers the rig itself allows: its no-drop rates (the bare forwarder's,
    /// [`NoDropRate::rig_mpps`]) shared by both directions at the model's per-subscriber
    /// packet rates, `1 / (ul_pps / rig_ul + dl_pps / rig_dl)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rig_users: Option<u64>,
}

/// Loss above which a capacity step no longer counts as carried, % (BENCHMARKS.md).
pub const CAPACITY_LOSS_PCT: f64 = 0.01;

impl CapacityTable {
    /// The most subscribers carried with loss at most [`CAPACITY_LOSS_PCT`] each way.
    pub fn users_reached(&self) -> Option<u64> {
        self.rows
            .iter()
            .filter(|r| r.ul_loss_pct <= CAPACITY_LOSS_PCT && r.dl_loss_pct <= CAPACITY_LOSS_PCT)
            .map(|r| r.users)
            .max()
    }
}

/// One subscriber step of the capacity test (columns of the Free5GC paper's Table II, plus
/// packet rates).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityRow {
    pub users: u64,
    pub ul_gbps: f64,
    pub ul_loss_pct: f64,
    pub dl_gbps: f64,
    pub dl_loss_pct: f64,
    pub ul_mpps: f64,
    pub dl_mpps: f64,
}

/// Throughput at one offered rate (usually saturation) for a direction, packet size and
/// number of sessions installed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThroughputPoint {
    pub direction: Direction,
    /// Size of the user's IP packet (the inner packet for GTP-U), bytes.
    pub packet_bytes: u32,
    pub sessions: u64,
    pub offered_mpps: f64,
    pub received_mpps: f64,
    /// Received user bytes (`packet_bytes` each), Gbit/s.
    pub gbps: f64,
    pub loss_pct: f64,
    /// received / generator limit of the same direction and size ([`Report::fill_ratios`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_generator: Option<f64>,
    /// received / I/O limit of the same direction and size ([`Report::fill_ratios`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_io: Option<f64>,
    /// The I/O limit measured right before and right after this trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io_bracket: Option<Bracket>,
    /// The one-miss limit measured right before and right after this trial (at all
    /// sessions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_miss_bracket: Option<Bracket>,
}

/// How far apart a bracket's two readings may be before the trial is repeated, then
/// flagged: 10 %.
pub const BRACKET_SPREAD: f64 = 0.10;

/// A limit measured right before and right after one UPF trial of the same direction,
/// size and sessions, and the trial against it: on a machine whose speed moves within
/// minutes only a limit measured beside the trial says what the trial's ratio is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bracket {
    pub before_mpps: f64,
    pub after_mpps: f64,
    /// The trial's received rate / the mean of the two readings.
    pub ratio: f64,
    /// The readings differed by more than [`BRACKET_SPREAD`] and the limit, trial, limit
    /// triple was measured again (these are the second triple's).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repeated: bool,
    /// They still differ by more than [`BRACKET_SPREAD`]: the ratio is uncertain.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub flagged: bool,
}

impl Bracket {
    /// The bracket of a trial that received `received_mpps`; `flagged` from the spread.
    pub fn new(before_mpps: f64, after_mpps: f64, received_mpps: f64, repeated: bool) -> Bracket {
        let mean = (before_mpps + after_mpps) / 2.0;
        let mut b = Bracket {
            before_mpps,
            after_mpps,
            ratio: if mean > 0.0 {
                received_mpps / mean
            } else {
                0.0
            },
            repeated,
            flagged: false,
        };
        b.flagged = b.spread() > BRACKET_SPREAD;
        b
    }

    /// |before - after| / the lower of the two (1.0 when one is 0).
    pub fn spread(&self) -> f64 {
        let lo = self.before_mpps.min(self.after_mpps);
        if lo <= 0.0 {
            return if self.before_mpps == self.after_mpps {
                0.0
            } else {
                1.0
            };
        }
        (self.before_mpps - self.after_mpps).abs() / lo
    }
}

/// The data path's programs run on `cpus` CPUs at once (BPF_PROG_RUN on each, no
/// generator): how the rate grows with CPUs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingCase {
    /// e.g. "disjoint sessions", "one hot session".
    pub case: String,
    /// e.g. "xdp_n3".
    pub program: String,
    pub sessions: u64,
    pub cpus: u32,
    /// Each CPU's rate, Mpps.
    pub mpps_per_cpu: Vec<f64>,
    pub aggregate_mpps: f64,
    /// aggregate / the same case's rate on one CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vs_one_cpu: Option<f64>,
}

impl ThroughputPoint {
    /// A point from offered and received packet rates; Gbit/s and loss derived.
    pub fn measured(
        direction: Direction,
        packet_bytes: u32,
        sessions: u64,
        offered_mpps: f64,
        received_mpps: f64,
    ) -> ThroughputPoint {
        ThroughputPoint {
            direction,
            packet_bytes,
            sessions,
            offered_mpps,
            received_mpps,
            gbps: gbps(received_mpps, packet_bytes),
            loss_pct: loss_pct(offered_mpps, received_mpps),
            vs_generator: None,
            vs_io: None,
            io_bracket: None,
            one_miss_bracket: None,
        }
    }
}

/// The largest offered rate with zero loss, and what happened above it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoDropRate {
    pub direction: Direction,
    pub packet_bytes: u32,
    pub sessions: u64,
    pub mpps: f64,
    pub gbps: f64,
    /// Offered rates tried (search steps and higher rates), ascending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub curve: Vec<LossPoint>,
    /// The rig's own no-drop rate: the same search with the bare forwarder in place of
    /// the UPF (generator, veths and sink alone), Mpps.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rig_mpps: Option<f64>,
}

impl NoDropRate {
    /// The UPF's no-drop rate / the rig's.
    pub fn vs_rig(&self) -> Option<f64> {
        self.rig_mpps.filter(|r| *r > 0.0).map(|r| self.mpps / r)
    }
}

/// One offered rate of a loss curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossPoint {
    pub offered_mpps: f64,
    pub received_mpps: f64,
    pub loss_pct: f64,
}

impl LossPoint {
    pub fn measured(offered_mpps: f64, received_mpps: f64) -> LossPoint {
        LossPoint {
            offered_mpps,
            received_mpps,
            loss_pct: loss_pct(offered_mpps, received_mpps),
        }
    }
}

/// Latency through the UPF at a fraction of the no-drop rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyPoint {
    pub direction: Direction,
    pub packet_bytes: u32,
    /// 10, 50 or 90 (% of the no-drop rate).
    pub percent_of_no_drop: u8,
    pub offered_mpps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// Packets timed.
    pub samples: u64,
    /// The bare forwarder's percentiles at the same offered rate, same run: what the
    /// generator, veth and sink add by themselves. The UPF's figure minus these is the
    /// latency the UPF adds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bare: Option<Percentiles>,
}

/// Latency percentiles, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
}

impl LatencyPoint {
    /// p99 through the UPF minus p99 through the bare forwarder at the same rate (may be
    /// negative: two tails measured at different times; [`LatencyPoint::added_p99`] says
    /// what of it can be told apart from the rig).
    pub fn added_p99_us(&self) -> Option<f64> {
        self.bare.map(|b| self.p99_us - b.p99_us)
    }

    /// The rig's own spread at this rate: the bare forwarder's p99 minus its p50, µs.
    pub fn rig_noise_us(&self) -> Option<f64> {
        self.bare.map(|b| (b.p99_us - b.p50_us).max(0.0))
    }

    /// The p99 the UPF adds, or that it is not above the rig's noise: a difference of two
    /// tails no larger than the rig's own spread says nothing (and is never shown as a
    /// negative latency).
    pub fn added_p99(&self) -> Option<AddedLatency> {
        let added = self.added_p99_us()?;
        let noise = self.rig_noise_us()?;
        Some(if added <= noise {
            AddedLatency::BelowNoise { noise_us: noise }
        } else {
            AddedLatency::Us(added)
        })
    }
}

/// Latency a UPF adds over the rig (the bare forwarder at the same rate).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AddedLatency {
    /// Above the rig's noise, µs.
    Us(f64),
    /// Not above the rig's own spread at that rate (its p99 minus its p50), µs.
    BelowNoise { noise_us: f64 },
}

impl fmt::Display for AddedLatency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AddedLatency::Us(x) => write!(f, "{x:.1}"),
            AddedLatency::BelowNoise { noise_us } => write!(f, "< noise ({noise_us:.0})"),
        }
    }
}

/// PFCP session establishment with a number of sessions already resident.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRatePoint {
    pub resident: u64,
    pub established_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    /// Growth of the UPF's memory per session, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_per_session: Option<u64>,
    /// Of which the UPF's BPF maps (the kernel's `memlock` of each, as bpftool shows
    /// it, for the capacity they were created for), bytes per resident session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub map_bytes_per_session: Option<u64>,
}

/// What went wrong writing a report, and where.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: report JSON: {source}", path.display())]
    Json {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("chart {chart}: {message}")]
    Chart {
        chart: &'static str,
        message: String,
    },
}

/// What [`Report::write_all`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    pub json: PathBuf,
    pub charts: Vec<PathBuf>,
    pub html: PathBuf,
    /// Things the reader should know, e.g. charts drawn without text for want of a font.
    pub warnings: Vec<String>,
}

impl Written {
    /// Every file written: report.json, the PNGs, report.html.
    pub fn paths(&self) -> Vec<PathBuf> {
        let mut v = vec![self.json.clone()];
        v.extend(self.charts.iter().cloned());
        v.push(self.html.clone());
        v
    }
}

impl Report {
    pub fn new(title: impl Into<String>) -> Report {
        Report {
            schema: SCHEMA,
            title: title.into(),
            machine: None,
            upf: None,
            limits: Vec::new(),
            capacity: None,
            throughput: Vec::new(),
            no_drop: Vec::new(),
            latency: Vec::new(),
            sessions: Vec::new(),
            ping: None,
            iperf3: Vec::new(),
            scaling: Vec::new(),
            establish_under_traffic: None,
            app_mix: Vec::new(),
        }
    }

    /// The limits measured for a direction and packet size.
    pub fn limit(&self, direction: Direction, packet_bytes: u32) -> Option<&Limit> {
        self.limits
            .iter()
            .find(|l| l.direction == direction && l.packet_bytes == packet_bytes)
    }

    /// Another pass of limit measurements. A limit is the highest rate any pass reached:
    /// on a busy or drifting machine a saturated trial can come out low, never high, so
    /// limits measured before and after the UPF's trials keep the ratios from claiming
    /// more than the machine gave. Each pass's figures are kept (`*_passes_mpps`).
    pub fn add_limit_pass(&mut self, pass: &[Limit]) {
        for p in pass {
            match self
                .limits
                .iter_mut()
                .find(|l| l.direction == p.direction && l.packet_bytes == p.packet_bytes)
            {
                Some(l) => {
                    add_pass(
                        &mut l.generator_mpps,
                        &mut l.generator_passes_mpps,
                        p.generator_mpps,
                    );
                    add_pass(&mut l.io_mpps, &mut l.io_passes_mpps, p.io_mpps);
                    if p.one_miss_mpps.is_some() {
                        l.one_miss_mpps = p.one_miss_mpps;
                        l.one_miss_sessions = p.one_miss_sessions;
                    }
                }
                None => self.limits.push(p.clone()),
            }
        }
    }

    /// Sets each throughput point's ratios to the limits of its direction and packet size,
    /// where such a limit was measured (others are left as they are).
    pub fn fill_ratios(&mut self) {
        let limits = self.limits.clone();
        for p in &mut self.throughput {
            let Some(l) = limits
                .iter()
                .find(|l| l.direction == p.direction && l.packet_bytes == p.packet_bytes)
            else {
                continue;
            };
            if let Some(g) = l.generator_mpps.filter(|g| *g > 0.0) {
                p.vs_generator = Some(p.received_mpps / g);
            }
            if let Some(io) = l.io_mpps.filter(|io| *io > 0.0) {
                p.vs_io = Some(p.received_mpps / io);
            }
        }
    }

    pub fn to_json(&self) -> String {
        // A Report holds only strings, numbers and maps with string keys: it always encodes.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    pub fn write_json(&self, path: impl AsRef<Path>) -> Result<(), ReportError> {
        let path = path.as_ref();
        let mut s = self.to_json();
        s.push('\n');
        write_file(path, s.as_bytes())
    }

    pub fn read_json(path: impl AsRef<Path>) -> Result<Report, ReportError> {
        let path = path.as_ref();
        let s = std::fs::read_to_string(path).map_err(|source| ReportError::Io {
            path: path.to_owned(),
            source,
        })?;
        serde_json::from_str(&s).map_err(|source| ReportError::Json {
            path: path.to_owned(),
            source,
        })
    }

    /// Writes `report.json`, one PNG per table that has data, and `report.html` (tables,
    /// charts inlined, a link to report.json) into `dir`, creating it if needed.
    pub fn write_all(&self, dir: impl AsRef<Path>) -> Result<Written, ReportError> {
        let dir = dir.as_ref();
        std::fs::create_dir_all(dir).map_err(|source| ReportError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let json = dir.join("report.json");
        self.write_json(&json)?;
        let charts = render_charts(self)?;
        let mut chart_paths = Vec::new();
        for c in &charts.charts {
            let p = dir.join(c.file_name());
            write_file(&p, &c.png)?;
            chart_paths.push(p);
        }
        let html = dir.join("report.html");
        write_file(&html, render_html(self, &charts.charts).as_bytes())?;
        Ok(Written {
            json,
            charts: chart_paths,
            html,
            warnings: charts.warnings,
        })
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), ReportError> {
    std::fs::write(path, bytes).map_err(|source| ReportError::Io {
        path: path.to_owned(),
        source,
    })
}

/// Gbit/s of `mpps` million packets per second of `packet_bytes` each.
pub fn gbps(mpps: f64, packet_bytes: u32) -> f64 {
    mpps * f64::from(packet_bytes) * 8.0 / 1000.0
}

/// Loss in % of what was offered; 0 when nothing was offered or more came back.
pub fn loss_pct(offered: f64, received: f64) -> f64 {
    if offered > 0.0 && received < offered {
        (offered - received) / offered * 100.0
    } else {
        0.0
    }
}

/// 3 significant digits, no exponent: 17.5, 3.10, 0.0420, 1234.
pub fn sig3(x: f64) -> String {
    if !x.is_finite() {
        return x.to_string();
    }
    if x == 0.0 {
        return "0".to_string();
    }
    let digits = x.abs().log10().floor() as i32;
    let decimals = (2 - digits).max(0) as usize;
    format!("{x:.decimals$}")
}

/// A count as people say it: 1000 -> "1k", 100000 -> "100k", 1000000 -> "1M", 1500 -> "1500".
pub fn count_short(n: u64) -> String {
    if n >= 1_000_000 && n % 1_000_000 == 0 {
        format!("{}M", n / 1_000_000)
    } else if n >= 1000 && n % 1000 == 0 {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sig3_keeps_three_digits() {
        assert_eq!(sig3(17.5), "17.5");
        assert_eq!(sig3(3.1), "3.10");
        assert_eq!(sig3(4.2), "4.20");
        assert_eq!(sig3(0.042), "0.0420");
        assert_eq!(sig3(1234.4), "1234");
        assert_eq!(sig3(0.0), "0");
    }

    #[test]
    fn gbps_and_loss() {
        assert!((gbps(1.0, 1000) - 8.0).abs() < 1e-12);
        assert_eq!(loss_pct(2.0, 1.5), 25.0);
        assert_eq!(loss_pct(0.0, 0.0), 0.0);
        assert_eq!(loss_pct(1.0, 1.1), 0.0);
    }

    #[test]
    fn counts() {
        assert_eq!(count_short(1000), "1k");
        assert_eq!(count_short(100_000), "100k");
        assert_eq!(count_short(1_000_000), "1M");
        assert_eq!(count_short(1500), "1500");
        assert_eq!(count_short(1), "1");
    }

    #[test]
    fn a_second_limit_pass_keeps_the_higher_figure_and_both_passes() {
        let limit = |d, gen: Option<f64>, io: Option<f64>| Limit {
            direction: d,
            packet_bytes: 650,
            generator_mpps: gen,
            io_mpps: io,
            ..Limit::default()
        };
        let mut r = Report::new("test");
        r.limits
            .push(limit(Direction::Uplink, Some(5.0), Some(1.6)));
        r.add_limit_pass(&[
            limit(Direction::Uplink, Some(4.0), Some(2.7)),
            limit(Direction::Downlink, None, Some(2.0)),
        ]);
        let ul = r.limit(Direction::Uplink, 650).unwrap();
        assert_eq!(ul.generator_mpps, Some(5.0));
        assert_eq!(ul.generator_passes_mpps, vec![5.0, 4.0]);
        assert_eq!(ul.io_mpps, Some(2.7));
        assert_eq!(ul.io_passes_mpps, vec![1.6, 2.7]);
        let dl = r.limit(Direction::Downlink, 650).unwrap();
        assert_eq!(
            dl.io_mpps,
            Some(2.0),
            "a limit only the second pass measured"
        );
        assert!(dl.io_passes_mpps.is_empty());
    }

    #[test]
    fn a_bracket_is_flagged_when_its_readings_differ_by_more_than_ten_percent() {
        let b = Bracket::new(2.0, 2.1, 1.025, false);
        assert!((b.ratio - 0.5).abs() < 1e-12);
        assert!(!b.flagged && (b.spread() - 0.05).abs() < 1e-12);
        let b = Bracket::new(2.0, 2.3, 1.0, true);
        assert!(b.flagged && b.repeated);
        assert!(Bracket::new(0.0, 1.0, 1.0, false).flagged);
        // Left out of the JSON when false.
        let j = serde_json::to_string(&Bracket::new(1.0, 1.0, 0.5, false)).unwrap();
        assert_eq!(j, r#"{"before_mpps":1.0,"after_mpps":1.0,"ratio":0.5}"#);
    }

    #[test]
    fn capacity_reached_is_the_most_users_within_the_loss_bound() {
        let row = |users, loss| CapacityRow {
            users,
            ul_gbps: 0.0,
            ul_loss_pct: 0.0,
            dl_gbps: 0.0,
            dl_loss_pct: loss,
            ul_mpps: 0.0,
            dl_mpps: 0.0,
        };
        let t = CapacityTable {
            model: TrafficModel::Carrier,
            rows: vec![row(100, 0.0), row(500, 0.01), row(1000, 0.2)],
            rig_users: None,
        };
        assert_eq!(t.users_reached(), Some(500));
    }

    #[test]
    fn ratios_use_the_limit_of_the_same_direction_and_size() {
        let mut r = Report::new("test");
        r.limits.push(Limit {
            direction: Direction::Uplink,
            packet_bytes: 64,
            generator_mpps: Some(20.0),
            io_mpps: Some(4.0),
            ..Limit::default()
        });
        r.throughput.push(ThroughputPoint::measured(
            Direction::Uplink,
            64,
            1,
            20.0,
            2.0,
        ));
        r.throughput.push(ThroughputPoint::measured(
            Direction::Downlink,
            64,
            1,
            20.0,
            2.0,
        ));
        r.fill_ratios();
        assert_eq!(r.throughput[0].vs_generator, Some(0.1));
        assert_eq!(r.throughput[0].vs_io, Some(0.5));
        assert_eq!(r.throughput[1].vs_generator, None);
        assert_eq!(r.throughput[1].vs_io, None);
    }
}
