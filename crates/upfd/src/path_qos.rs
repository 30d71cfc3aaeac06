//! GTP-U path QoS monitoring (TS 23.501 clause 5.33.3.3, TS 29.244 clause 5.24.3, GPQM):
//! an SMF asks in its Association Setup or Update Request (GTP-U Path QoS Control
//! Information) for the packet delay of the GTP-U paths to named remote peers, or to
//! all peers of an interface type (N3: the gNBs, N9: other UPFs). upfd sends each such
//! peer GTP-U Echo Requests (TS 29.281 clause 7.2.1) a few times per Measurement Period
//! and takes half of each round trip as the path's packet delay; it reports in Node
//! Report Requests (GPQR): every Measurement Period the average, minimum and maximum
//! (PER), when a delay passes a threshold at most once per Minimum Waiting Time (THR),
//! and once with the first measurement (IRE).

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant, SystemTime};

use pfcp::ie::{gtpu_path_interface_type as iface, qos_report_trigger as trig, NodeId};
use pfcp::msg::{
    GtpuPathQosControlInformation, GtpuPathQosReport, QosInformationInGtpuPathQosReport,
};
use upf::qos_monitoring::ntp_seconds;

/// Echo Requests per peer: at most one per this long ...
const ECHO_EVERY_MAX: Duration = Duration::from_secs(1);
/// ... and at least this long apart.
const ECHO_EVERY_MIN: Duration = Duration::from_millis(100);
/// An Echo Response later than this is not measured (T3-RESPONSE is 2-3 s).
const ECHO_TIMEOUT: Duration = Duration::from_secs(3);

/// One control of one association, with what it measured per peer.
#[derive(Debug)]
struct Monitor {
    node: NodeId,
    /// The peers named (empty: those of the interface types).
    peers: Vec<IpAddr>,
    n3: bool,
    n9: bool,
    period: Option<Duration>,
    threshold: bool,
    immediate: bool,
    /// Average, minimum, maximum packet delay thresholds, ms.
    thresholds: [Option<u32>; 3],
    min_wait: Duration,
    stats: HashMap<IpAddr, Stats>,
}

#[derive(Debug)]
struct Stats {
    period_start: SystemTime,
    next_report: Option<Instant>,
    sum: u64,
    n: u64,
    min: u32,
    max: u32,
    last_event: Option<Instant>,
    immediate_done: bool,
}

impl Stats {
    fn new(period: Option<Duration>, now: Instant, wall: SystemTime) -> Stats {
        Stats {
            period_start: wall,
            next_report: period.map(|p| now + p),
            sum: 0,
            n: 0,
            min: u32::MAX,
            max: 0,
            last_event: None,
            immediate_done: false,
        }
    }

    fn info(&self) -> Option<QosInformationInGtpuPathQosReport> {
        (self.n > 0).then(|| QosInformationInGtpuPathQosReport {
            average_packet_delay: (self.sum / self.n) as u32,
            minimum_packet_delay: Some(self.min),
            maximum_packet_delay: Some(self.max),
            transport_level_marking: None,
            other: vec![],
        })
    }
}

fn peer_ie(a: IpAddr) -> pfcp::ie::RemoteGtpuPeer {
    let (ipv4, ipv6) = match a {
        IpAddr::V4(v) => (Some(v), None),
        IpAddr::V6(v) => (None, Some(v)),
    };
    pfcp::ie::RemoteGtpuPeer {
        spare: 0,
        ipv4,
        ipv6,
        destination_interface: None,
        network_instance: None,
    }
}

/// The monitors of every association and the Echo Requests in flight.
#[derive(Debug, Default)]
pub struct PathQos {
    generation: Option<u64>,
    monitors: Vec<Monitor>,
    next_echo: HashMap<IpAddr, Instant>,
    in_flight: HashMap<u16, (IpAddr, Instant)>,
    seq: u16,
}

impl PathQos {
    /// Whether `generation` of N4's controls is the one taken already.
    pub fn is_current(&self, generation: u64) -> bool {
        self.generation == Some(generation)
    }

    /// Take N4's controls (generation `generation`): monitors of unchanged controls
    /// keep their measurements.
    pub fn set(
        &mut self,
        generation: u64,
        controls: Vec<(NodeId, Vec<GtpuPathQosControlInformation>)>,
    ) {
        let mut old = std::mem::take(&mut self.monitors);
        for (node, cs) in controls {
            for c in cs {
                let t = c.qos_report_trigger.as_ref();
                let has = |b: u16| t.is_some_and(|f| f.get(b));
                let types = c.gtpu_path_interface_type.as_ref();
                let (n3, n9) = match types {
                    Some(f) => (f.get(iface::N3), f.get(iface::N9)),
                    None => (true, false),
                };
                let mut m = Monitor {
                    node: node.clone(),
                    peers: c
                        .remote_gtpu_peers
                        .iter()
                        .filter_map(|p| p.ipv4.map(IpAddr::V4).or(p.ipv6.map(IpAddr::V6)))
                        .collect(),
                    n3,
                    n9,
                    period: c
                        .measurement_period
                        .filter(|p| *p > 0)
                        .map(|p| Duration::from_secs(u64::from(p))),
                    threshold: has(trig::THR),
                    immediate: has(trig::IRE),
                    thresholds: [
                        c.average_packet_delay,
                        c.minimum_packet_delay,
                        c.maximum_packet_delay,
                    ],
                    min_wait: Duration::from_secs(c.timer.and_then(|t| t.seconds()).unwrap_or(0)),
                    stats: HashMap::new(),
                };
                if !has(trig::PER) {
                    m.period = None;
                }
                if let Some(i) = old.iter().position(|o| {
                    o.node == m.node
                        && o.peers == m.peers
                        && (o.n3, o.n9, o.period, o.threshold, o.immediate)
                            == (m.n3, m.n9, m.period, m.threshold, m.immediate)
                        && o.thresholds == m.thresholds
                        && o.min_wait == m.min_wait
                }) {
                    m.stats = old.swap_remove(i).stats;
                }
                self.monitors.push(m);
            }
        }
        self.generation = Some(generation);
    }

    /// A sequence number for an Echo Request not measured (one to a new peer): from the
    /// same counter, so that its response is never taken for a measured one's.
    pub fn next_seq(&mut self) -> u16 {
        self.seq = self.seq.wrapping_add(1);
        self.in_flight.remove(&self.seq);
        self.seq
    }

    /// The peers to measure now, of those known by side (`access`: N3, else N9): an
    /// Echo Request's sequence number for each that is due.
    pub fn due_echoes(
        &mut self,
        known: &HashMap<IpAddr, bool>,
        now: Instant,
        wall: SystemTime,
    ) -> Vec<(IpAddr, u16)> {
        self.in_flight
            .retain(|_, (_, sent)| now.duration_since(*sent) < ECHO_TIMEOUT);
        let mut every: HashMap<IpAddr, Duration> = HashMap::new();
        for m in &mut self.monitors {
            let peers: Vec<IpAddr> = if m.peers.is_empty() {
                known
                    .iter()
                    .filter(|(_, access)| if **access { m.n3 } else { m.n9 })
                    .map(|(a, _)| *a)
                    .collect()
            } else {
                m.peers.clone()
            };
            let e = m
                .period
                .map_or(ECHO_EVERY_MAX, |p| p / 4)
                .clamp(ECHO_EVERY_MIN, ECHO_EVERY_MAX);
            for p in peers {
                m.stats
                    .entry(p)
                    .or_insert_with(|| Stats::new(m.period, now, wall));
                let x = every.entry(p).or_insert(e);
                *x = (*x).min(e);
            }
        }
        // Peers no longer monitored are not due again.
        self.next_echo.retain(|p, _| every.contains_key(p));
        let mut out = Vec::new();
        for (peer, e) in every {
            let due = self.next_echo.get(&peer).is_none_or(|t| *t <= now);
            if due {
                self.next_echo.insert(peer, now + e);
                self.seq = self.seq.wrapping_add(1);
                self.in_flight.insert(self.seq, (peer, now));
                out.push((peer, self.seq));
            }
        }
        out
    }

    /// An Echo Response from `from` with sequence number `seq`: measured if it answers
    /// one of ours; the threshold and immediate reports it causes, by association.
    pub fn echo_response(
        &mut self,
        from: IpAddr,
        seq: u16,
        now: Instant,
        wall: SystemTime,
    ) -> Vec<(NodeId, GtpuPathQosReport)> {
        let Some((peer, sent)) = self.in_flight.remove(&seq) else {
            return Vec::new();
        };
        if peer != from {
            return Vec::new();
        }
        let delay = (now.duration_since(sent).as_micros() / 2000).min(u128::from(u32::MAX)) as u32;
        let mut out = Vec::new();
        for m in &mut self.monitors {
            let Some(s) = m.stats.get_mut(&peer) else {
                continue;
            };
            s.sum += u64::from(delay);
            s.n += 1;
            s.min = s.min.min(delay);
            s.max = s.max.max(delay);
            let report = |trigger: u16, s: &Stats| GtpuPathQosReport {
                remote_gtpu_peer: peer_ie(peer),
                gtpu_path_interface_type: None,
                qos_report_trigger: pfcp::ie::Flags::from_bits(&[trigger], 1),
                time_stamp: ntp_seconds(wall),
                start_time: Some(ntp_seconds(s.period_start)),
                qos_information: s.info().into_iter().collect(),
                other: vec![],
            };
            if m.immediate && !s.immediate_done {
                s.immediate_done = true;
                out.push((m.node.clone(), report(trig::IRE, s)));
            }
            let over = m.thresholds.iter().any(|t| t.is_some_and(|t| delay > t));
            let waited = s
                .last_event
                .is_none_or(|t| now.duration_since(t) >= m.min_wait);
            if m.threshold && over && waited {
                s.last_event = Some(now);
                out.push((m.node.clone(), report(trig::THR, s)));
            }
        }
        out
    }

    /// The periodic reports due, by association; each peer's next period begins.
    pub fn due_reports(
        &mut self,
        now: Instant,
        wall: SystemTime,
    ) -> Vec<(NodeId, GtpuPathQosReport)> {
        let mut out = Vec::new();
        for m in &mut self.monitors {
            let Some(p) = m.period else {
                continue;
            };
            for (peer, s) in m.stats.iter_mut() {
                let Some(at) = s.next_report.filter(|t| *t <= now) else {
                    continue;
                };
                if let Some(info) = s.info() {
                    out.push((
                        m.node.clone(),
                        GtpuPathQosReport {
                            remote_gtpu_peer: peer_ie(*peer),
                            gtpu_path_interface_type: None,
                            qos_report_trigger: pfcp::ie::Flags::from_bits(&[trig::PER], 1),
                            time_stamp: ntp_seconds(wall),
                            start_time: Some(ntp_seconds(s.period_start)),
                            qos_information: vec![info],
                            other: vec![],
                        },
                    ));
                }
                *s = Stats {
                    next_report: Some(now.max(at) + p),
                    last_event: s.last_event,
                    immediate_done: s.immediate_done,
                    ..Stats::new(None, now, wall)
                };
            }
        }
        out
    }

    /// When an Echo Request or a periodic report is next due (peers not seen yet are
    /// looked for at the caller's next regular look).
    pub fn next_due(&self) -> Option<Instant> {
        if self.monitors.is_empty() {
            return None;
        }
        let reports = self
            .monitors
            .iter()
            .flat_map(|m| m.stats.values().filter_map(|s| s.next_report));
        let echoes = self.next_echo.values().copied();
        reports.chain(echoes).min()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use pfcp::ie::{Flags, GprsTimer};

    use super::*;

    const GNB: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 10, 0, 1));

    fn node() -> NodeId {
        NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4))
    }

    fn control(
        triggers: &[u16],
        period: Option<u32>,
        avg: Option<u32>,
    ) -> GtpuPathQosControlInformation {
        GtpuPathQosControlInformation {
            remote_gtpu_peers: vec![],
            gtpu_path_interface_type: Some(Flags::from_bits(&[iface::N3], 1)),
            qos_report_trigger: Some(Flags::from_bits(triggers, 1)),
            transport_level_marking: None,
            measurement_period: period,
            average_packet_delay: avg,
            minimum_packet_delay: None,
            maximum_packet_delay: None,
            // 2 s: unit "value x 2 seconds" (000) and value 1.
            timer: Some(GprsTimer(1)),
            other: vec![],
        }
    }

    fn known() -> HashMap<IpAddr, bool> {
        [
            (GNB, true),
            (IpAddr::V4(Ipv4Addr::new(10, 20, 0, 9)), false),
        ]
        .into()
    }

    #[test]
    fn periodic_reports_half_the_round_trips_of_the_n3_peers() {
        let (t0, wall) = (Instant::now(), SystemTime::now());
        let mut q = PathQos::default();
        q.set(
            1,
            vec![(node(), vec![control(&[trig::PER], Some(2), None)])],
        );
        assert!(q.is_current(1));
        let e = q.due_echoes(&known(), t0, wall);
        assert_eq!(e.len(), 1, "the N3 peer only: {e:?}");
        assert_eq!(e[0].0, GNB);
        assert!(q
            .due_echoes(&known(), t0 + Duration::from_millis(400), wall)
            .is_empty());
        assert!(q
            .echo_response(GNB, e[0].1, t0 + Duration::from_millis(40), wall)
            .is_empty());
        let e2 = q.due_echoes(&known(), t0 + Duration::from_millis(500), wall);
        assert!(q
            .echo_response(GNB, e2[0].1, t0 + Duration::from_millis(580), wall)
            .is_empty());
        // A response to nothing of ours, or from another address: not measured.
        assert!(q.echo_response(GNB, 999, t0, wall).is_empty());
        let r = q.due_reports(t0 + Duration::from_secs(2), wall);
        assert_eq!(r.len(), 1);
        let info = &r[0].1.qos_information[0];
        assert_eq!(
            (
                info.average_packet_delay,
                info.minimum_packet_delay,
                info.maximum_packet_delay
            ),
            (30, Some(20), Some(40))
        );
        assert!(r[0].1.qos_report_trigger.get(trig::PER));
        // No answer in the next period: nothing to report.
        assert!(q.due_reports(t0 + Duration::from_secs(4), wall).is_empty());
    }

    #[test]
    fn threshold_reports_once_per_minimum_waiting_time_and_immediate_once() {
        let (t0, wall) = (Instant::now(), SystemTime::now());
        let mut q = PathQos::default();
        q.set(
            1,
            vec![(
                node(),
                vec![control(&[trig::THR, trig::IRE], None, Some(15))],
            )],
        );
        let mut at = t0;
        let answer = |q: &mut PathQos, rtt_ms: u64, at: Instant| {
            let e = q.due_echoes(&known(), at, wall);
            q.echo_response(GNB, e[0].1, at + Duration::from_millis(rtt_ms), wall)
        };
        let r = answer(&mut q, 20, at);
        assert_eq!(r.len(), 1, "immediate, under the threshold: {r:?}");
        assert!(r[0].1.qos_report_trigger.get(trig::IRE));
        at += Duration::from_secs(1);
        let r = answer(&mut q, 40, at);
        assert_eq!(r.len(), 1);
        assert!(r[0].1.qos_report_trigger.get(trig::THR));
        at += Duration::from_secs(1);
        assert!(answer(&mut q, 40, at).is_empty(), "within the 2 s wait");
        at += Duration::from_secs(1);
        assert_eq!(answer(&mut q, 40, at).len(), 1);
        // A new generation without controls: nothing more.
        q.set(2, vec![]);
        assert_eq!(q.next_due(), None, "no monitor: nothing due");
    }
}
