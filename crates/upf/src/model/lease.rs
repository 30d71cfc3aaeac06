//! Per-CPU leases (docs/architecture.md, "Leases: what stays exact"): what
//! bpf/include/lease.h does, function by function, with the same integer arithmetic, so
//! that the model and the programs agree packet by packet on one lane as on several.
//!
//! A rule (a QER, a URR) has one [`Pool`], its shared state, and one [`Lane`] per lane
//! index. A packet runs on the lane of its CPU (CPU mod lanes). With a lane per CPU a lane
//! leases MBR credit, quota and threshold allowance from the pool and spends it alone;
//! with more CPUs than lanes ([`Layout::shared`]) lanes are shared, and every packet goes
//! to the pool itself (a GCRA per packet, the quota checked and spent per packet, the
//! threshold crossed by the packet that crosses it), as lease.h's `shared_lanes`
//! branches. The model runs one packet at a time: lease.h's atomic operations and retries
//! are plain reads and writes here, wrapping as the C unsigned arithmetic wraps.

use crate::abi;

/// How many lanes a rule has and whether CPUs share them (session.h's `lanes` and
/// `shared_lanes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Lanes per rule, 1..=LANES_MAX.
    pub lanes: u32,
    /// More CPUs than lanes: no leases, every packet through the pool.
    pub shared: bool,
}

impl Default for Layout {
    /// One lane of one CPU (upfd's `datapath.mode: none`).
    fn default() -> Self {
        Layout {
            lanes: 1,
            shared: false,
        }
    }
}

/// A rule's shared state (struct pool): the MBR's GCRA per direction (QERs), the quota
/// and threshold octets not yet leased (URRs), the URR's lease epochs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pool {
    /// Theoretical arrival time per direction ([0] uplink), ns of the coarse clock.
    pub tat: [u64; 2],
    /// When each direction's GCRA last restarted idle (ns): credit charged before is
    /// not given back.
    pub restart: [u64; 2],
    /// Octets of the volume quota not yet leased.
    pub quota: i64,
    /// Octets before the volume threshold, leases counted.
    pub threshold: i64,
    /// The epochs of the quota (high 16 bits) and the threshold (low 16 bits): lane
    /// credit of another epoch is dropped.
    pub epoch: u32,
    /// URR_Q_VOLUME (SR_URR_QUOTA for the home URR): the URR has a volume quota.
    pub has_quota: bool,
    /// URR_T_ARMED (SR_URR_THRESHOLD): its volume threshold is armed.
    pub armed: bool,
    /// URR_Q_NOTIFIED: upfd was told the quota ran out.
    pub notified: bool,
}

impl Pool {
    /// upfd sets a new quota (None: none): the pool holds it, lanes drop their quota
    /// credit (epoch high half + 1), and its running out will be told again.
    pub fn set_quota(&mut self, remaining: Option<i64>) {
        self.has_quota = remaining.is_some();
        self.quota = remaining.unwrap_or(0);
        self.notified = false;
        self.epoch = self.epoch.wrapping_add(1 << 16);
    }

    /// upfd arms (Some) or disarms the threshold: lanes drop their threshold credit
    /// (epoch low half + 1, the high half unchanged).
    pub fn set_threshold(&mut self, remaining: Option<i64>) {
        self.armed = remaining.is_some();
        self.threshold = remaining.unwrap_or(0);
        self.epoch = (self.epoch & 0xffff_0000) | (self.epoch as u16).wrapping_add(1) as u32;
    }
}

/// One CPU's lane (struct lane): its counts and what it leased. Times are the coarse
/// clock >> LANE_TIME_SHIFT, wrapping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lane {
    /// [0] uplink, [1] downlink.
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    /// The first and last packet counted (0: none).
    pub first: u32,
    pub last: u32,
    /// Octets of MBR lease left per direction, good until `mbr_until`.
    pub mbr_credit: [u32; 2],
    pub mbr_until: u32,
    /// The pool's epochs `quota_credit` and `threshold_credit` are of.
    pub epoch: u32,
    pub quota_credit: u32,
    pub threshold_credit: u32,
}

/// A QER's MBR in the data path's units (struct qer_params' cost, tau, lease), per
/// direction ([0] uplink).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mbr {
    /// ns per octet x 2^QER_COST_SHIFT.
    pub cost: [u64; 2],
    /// The burst tolerance less a lease's life (LEASE_TTL), ns.
    pub tau: [u64; 2],
    /// Octets one lease grants.
    pub lease: [u32; 2],
}

/// One event costing `cost` ns through the GCRA at `tat`: whether it conforms (and then
/// tat moved). Idle (tat before now): it restarts from now, which `restart` (if given)
/// records first.
pub fn gcra(tat: &mut u64, cost: u64, tau: u64, now: u64, restart: Option<&mut u64>) -> bool {
    let t = *tat;
    if t > now.wrapping_add(tau) {
        return false;
    }
    if t < now {
        if let Some(r) = restart {
            *r = now;
        }
    }
    *tat = t.max(now).wrapping_add(cost);
    true
}

fn octets_cost(cost: u64, octets: u32) -> u64 {
    (u64::from(octets).wrapping_mul(cost)) >> abi::QER_COST_SHIFT
}

/// The coarse clock `now` (ns) in lane time units (2^LANE_TIME_SHIFT ns), wrapping.
pub fn lane_time(now: u64) -> u32 {
    (now >> abi::LANE_TIME_SHIFT) as u32
}

/// Whether lane time `until` is after `t` (wrapping: `(s32)(until - t) > 0`).
fn before(t: u32, until: u32) -> bool {
    (until.wrapping_sub(t) as i32) > 0
}

/// Give back `c` octets of direction `d` a lease charged, unless the GCRA restarted at or
/// after the lease's end `until` (lane time, read against `now`): then the restart
/// forgave the charge.
fn mbr_give(pool: &mut Pool, q: &Mbr, d: usize, c: u32, until: u32, now: u64) {
    let ago = lane_time(now).wrapping_sub(until);
    let mask = (1u64 << abi::LANE_TIME_SHIFT) - 1;
    let end = (now & !mask).wrapping_sub(u64::from(ago) << abi::LANE_TIME_SHIFT);
    if c == 0 || pool.restart[d] >= end {
        return;
    }
    pool.tat[d] = pool.tat[d].wrapping_sub(octets_cost(q.cost[d], c));
}

/// `len` octets in direction `d` through a QER's MBR (None: it has none) with this
/// lane's credit: whether they conform (then they are spent).
pub fn mbr_take(
    lay: Layout,
    pool: &mut Pool,
    l: &mut Lane,
    q: Option<&Mbr>,
    d: usize,
    len: u32,
    now: u64,
) -> bool {
    let Some(q) = q else {
        return true;
    };
    let cost_len = octets_cost(q.cost[d], len);
    if lay.shared {
        let tau = q.tau[d] + (u64::from(abi::LEASE_TTL) << abi::LANE_TIME_SHIFT);
        return gcra(&mut pool.tat[d], cost_len, tau, now, None);
    }
    let t = lane_time(now);
    let live = before(t, l.mbr_until);
    let c = l.mbr_credit[d];
    if live && c >= len {
        l.mbr_credit[d] = c - len;
        return true;
    }
    // Expired: both directions' leftovers back. Short: this direction's.
    if !live {
        let until = l.mbr_until;
        for x in 0..2 {
            mbr_give(pool, q, x, l.mbr_credit[x], until, now);
            l.mbr_credit[x] = 0;
        }
    } else if c != 0 {
        pool.tat[d] = pool.tat[d].wrapping_sub(octets_cost(q.cost[d], c));
        l.mbr_credit[d] = 0;
    }
    let want = q.lease[d].max(len);
    let cost_want = octets_cost(q.cost[d], want);
    let extra = cost_want - cost_len;
    // A lease, if the packet alone would still conform after it.
    if q.tau[d] >= extra
        && gcra(
            &mut pool.tat[d],
            cost_want,
            q.tau[d] - extra,
            now,
            Some(&mut pool.restart[d]),
        )
    {
        let life = (cost_want >> abi::LANE_TIME_SHIFT).min(u64::from(abi::LEASE_TTL)) as u32;
        let mut until = t.wrapping_add(life);
        l.mbr_credit[d] = want - len;
        // Both directions' credit ends at the earlier of their ends.
        if live && l.mbr_credit[d ^ 1] != 0 && (l.mbr_until.wrapping_sub(until) as i32) < 0 {
            until = l.mbr_until;
        }
        l.mbr_until = until;
        return true;
    }
    // No room for a lease: the packet alone, as a plain GCRA would.
    want > len
        && gcra(
            &mut pool.tat[d],
            cost_len,
            q.tau[d],
            now,
            Some(&mut pool.restart[d]),
        )
}

/// Undo [`mbr_take`] for a packet a later QER refused: its octets back to the lane's
/// credit while the lease lives, else to the pool (unless a restart forgave them).
pub fn mbr_refund(
    lay: Layout,
    pool: &mut Pool,
    l: &mut Lane,
    q: Option<&Mbr>,
    d: usize,
    len: u32,
    now: u64,
) {
    let Some(q) = q else {
        return;
    };
    if lay.shared {
        pool.tat[d] = pool.tat[d].wrapping_sub(octets_cost(q.cost[d], len));
        return;
    }
    if !before(lane_time(now), l.mbr_until) {
        mbr_give(pool, q, d, len, l.mbr_until, now);
        return;
    }
    l.mbr_credit[d] = l.mbr_credit[d].wrapping_add(len);
}

/// The lane's quota and threshold credit, if of the pool's current epochs; else
/// dropped (each half on its own).
fn lane_epoch(l: &mut Lane, epoch: u32) {
    let e = l.epoch;
    if e == epoch {
        return;
    }
    if (e ^ epoch) >> 16 != 0 {
        l.quota_credit = 0;
    }
    if (e ^ epoch) & 0xffff != 0 {
        l.threshold_credit = 0;
    }
    l.epoch = epoch;
}

/// What a lease of a quota or threshold takes: at least `need`, else what is left /
/// (LEASE_SHARE x lanes), at most LEASE_OCTETS_MAX.
pub fn lease_size(lay: Layout, left: i64, need: u32) -> u32 {
    if left <= 0 {
        return need;
    }
    let share = (left as u64 / (u64::from(abi::LEASE_SHARE) * u64::from(lay.lanes)))
        .min(u64::from(abi::LEASE_OCTETS_MAX));
    if share > u64::from(need) {
        share as u32
    } else {
        need
    }
}

/// Room in the lane's quota credit for `len` octets, leased from the pool if need be.
/// Err(notify) if the quota cannot give it: the packet is dropped, and `notify` is true
/// the first time (EV_QUOTA). The octets are spent when counted ([`quota_spend`]).
pub fn quota_room(lay: Layout, pool: &mut Pool, l: &mut Lane, len: u32) -> Result<(), bool> {
    if lay.shared {
        if pool.quota >= i64::from(len) {
            return Ok(());
        }
    } else {
        lane_epoch(l, pool.epoch);
        let c = l.quota_credit;
        if c >= len {
            return Ok(());
        }
        let need = len - c;
        let q = pool.quota;
        if q >= i64::from(need) {
            let take = lease_size(lay, q, need);
            pool.quota = q - i64::from(take);
            l.quota_credit = c.wrapping_add(take);
            return Ok(());
        }
    }
    let first = !pool.notified;
    pool.notified = true;
    Err(first)
}

/// Spend `len` octets of quota (room was made by [`quota_room`]).
pub fn quota_spend(lay: Layout, pool: &mut Pool, l: &mut Lane, len: u32) {
    if lay.shared {
        pool.quota -= i64::from(len);
    } else {
        l.quota_credit = l.quota_credit.wrapping_sub(len);
    }
}

/// Count `len` octets against the threshold: whether this packet's lease took the pool
/// to zero or below (EV_THRESHOLD).
pub fn threshold_count(lay: Layout, pool: &mut Pool, l: &mut Lane, len: u32) -> bool {
    if lay.shared {
        let old = pool.threshold;
        pool.threshold -= i64::from(len);
        return old > 0 && old <= i64::from(len);
    }
    lane_epoch(l, pool.epoch);
    let c = l.threshold_credit;
    if c >= len {
        l.threshold_credit = c - len;
        return false;
    }
    let need = len - c;
    let take = lease_size(lay, pool.threshold, need);
    let old = pool.threshold;
    pool.threshold -= i64::from(take);
    l.threshold_credit = c.wrapping_add(take).wrapping_sub(len);
    old > 0 && old <= i64::from(take)
}

/// The packet's counts in the lane, uplink (the UE is the source) in [0].
pub fn lane_count(l: &mut Lane, up: bool, len: u32, now: u64) {
    // 0 means "none".
    let t = lane_time(now).max(1);
    let d = if up { 0 } else { 1 };
    l.packets[d] += 1;
    l.bytes[d] += u64::from(len);
    if l.first == 0 {
        l.first = t;
    }
    l.last = t;
}

/// Lane time `t`, taken at or before the coarse clock `clock` (ns) and less than 2^32
/// lane units (52 days) before it, in ns: the start of its 2^LANE_TIME_SHIFT ns unit.
pub fn lane_time_ns(t: u32, clock: u64) -> u64 {
    let now = clock >> abi::LANE_TIME_SHIFT;
    let ago = u64::from(lane_time(clock).wrapping_sub(t));
    now.saturating_sub(ago) << abi::LANE_TIME_SHIFT
}

/// A rule's pool and its lanes, one per lane index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    pub pool: Pool,
    pub lanes: Vec<Lane>,
}

impl Rule {
    /// The pool and lane `i` (lanes beyond those it has are added, empty).
    pub fn at(&mut self, i: usize) -> (&mut Pool, &mut Lane) {
        if self.lanes.len() <= i {
            self.lanes.resize(i + 1, Lane::default());
        }
        (&mut self.pool, &mut self.lanes[i])
    }
}

#[cfg(test)]
mod tests {
    use super::super::pipeline::mbr_units;
    use super::*;

    const SEC: u64 = 1_000_000_000;
    const T0: u64 = 1000 * SEC;

    /// One QER's MBR (uplink) on `lanes` lanes.
    struct Sim {
        lay: Layout,
        mbr: Mbr,
        /// Octets per second and the burst, as configured.
        rate: u64,
        burst: u64,
        r: Rule,
    }

    impl Sim {
        fn new(kbps: u64, lanes: u32, shared: bool) -> Sim {
            let u = mbr_units(kbps, lanes);
            let rate = (kbps * 1000 / 8).min(12_500_000_000);
            Sim {
                lay: Layout { lanes, shared },
                mbr: Mbr {
                    cost: [u.cost; 2],
                    tau: [u.tau; 2],
                    lease: [u.lease; 2],
                },
                rate,
                burst: (rate / 10).clamp(3000, rate.max(3000)),
                r: Rule::default(),
            }
        }

        fn offer(&mut self, lane: usize, len: u32, now: u64) -> bool {
            let (pool, l) = self.r.at(lane);
            mbr_take(self.lay, pool, l, Some(&self.mbr), 0, len, now)
        }

        /// Offer every packet (time, lane, length): the admitted ones.
        fn run(&mut self, packets: &[(u64, usize, u32)]) -> Vec<(u64, u32)> {
            packets
                .iter()
                .filter(|(t, lane, len)| self.offer(*lane, *len, *t))
                .map(|(t, _, len)| (*t, *len))
                .collect()
        }

        /// The most octets admitted in one window [t_i, t_j] between admitted packets'
        /// times beyond rate x (t_j - t_i) + burst (negative: under it).
        fn excess(&self, admitted: &[(u64, u32)]) -> i128 {
            // max over i <= j of sum(i..=j) - rate (t_j - t_i): with prefix sums P,
            // P[j+1] - rate t_j + max over i <= j of (rate t_i - P[i]).
            let (rate, sec) = (self.rate as i128, SEC as i128);
            let (mut p, mut best_start, mut worst) = (0i128, i128::MIN, i128::MIN);
            for (t, len) in admitted {
                let t = (*t - T0) as i128;
                best_start = best_start.max(rate * t - p * sec);
                p += i128::from(*len);
                worst = worst.max(p * sec - rate * t + best_start);
            }
            worst / sec - self.burst as i128
        }
    }

    /// `n` packets of `len` octets from T0, `per_tick` each `tick` ns, on the lanes
    /// `lane(i)` gives the i-th.
    fn traffic(
        n: usize,
        len: u32,
        per_tick: usize,
        tick: u64,
        lane: impl Fn(usize) -> usize,
    ) -> Traffic {
        (0..n)
            .map(|i| (T0 + (i / per_tick) as u64 * tick, lane(i), len))
            .collect()
    }

    /// A small deterministic generator (an LCG): a number below `n`.
    struct Rnd(u64);

    impl Rnd {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = (self.0)
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    /// Packets offered: time (ns), lane, length.
    type Traffic = Vec<(u64, usize, u32)>;
    /// A name, the lanes and the traffic.
    type Run = (String, u32, Traffic);
    /// Which lane the i-th packet runs on.
    type Pattern = fn(usize) -> usize;

    /// Lanes taking turns as the differential test's CPUs might: all on one, strict
    /// alternation, runs of 7 and of 500 packets.
    const PATTERNS: [(&str, Pattern); 4] = [
        ("one lane", |_| 0),
        ("alternating", |i| i % 2),
        ("runs of 7", |i| (i / 7) % 2),
        ("runs of 500", |i| (i / 500) % 2),
    ];

    /// Random traffic on `lanes` lanes: bursts of 1 to 40 packets of 64 to 1500 octets,
    /// back to back or 0-20 ms apart (leases expire) or up to 2 s apart (the GCRA goes
    /// idle while lanes hold credit), at 1 ms ticks.
    fn random_traffic(rnd: &mut Rnd, lanes: u32, bursts: usize) -> Traffic {
        let mut t = T0;
        let mut p = Vec::new();
        for _ in 0..bursts {
            t += match rnd.below(10) {
                0 => rnd.below(2 * SEC),
                1..=3 => rnd.below(20_000_000),
                _ => 0,
            };
            t -= t % 1_000_000;
            let lane = rnd.below(u64::from(lanes)) as usize;
            let len = (rnd.below(1437) + 64) as u32;
            for _ in 0..=rnd.below(40) {
                p.push((t, lane, len));
            }
        }
        p
    }

    #[test]
    fn the_mbr_admits_the_burst_and_a_lease_per_lane_in_any_window() {
        // Offered three times the rate at 1 ms ticks, in every pattern on two lanes:
        // over every window between packets no more than rate x window + the burst +
        // one lease (a GCRA per packet: + one packet); over the run, the rate.
        for kbps in [1_000, 10_000, 200_000] {
            for (name, lane) in PATTERNS {
                let mut s = Sim::new(kbps, 2, false);
                let per_tick = ((s.rate * 3 / 1000 / 1250) as usize).max(1);
                let n = per_tick * 3000;
                let p = traffic(n, 1250, per_tick, 1_000_000, lane);
                let a = s.run(&p);
                let lease = i128::from(s.mbr.lease[0]);
                let excess = s.excess(&a);
                assert!(excess <= lease, "{kbps} kbit/s, {name}: {excess} > {lease}");
                // From the first packet to the end of the last tick: the rate, and the
                // burst less a lease's life.
                let secs = (p[n - 1].0 + 1_000_000 - T0) as f64 / SEC as f64;
                let total: u64 = a.iter().map(|x| u64::from(x.1)).sum();
                let ratio = total as f64 / (s.rate as f64 * secs + s.burst as f64);
                assert!((0.97..=1.01).contains(&ratio), "{kbps}, {name}: {ratio}");
            }
        }
        // Random traffic, 2 to 8 lanes: up to a lease per lane beyond the burst (a lane
        // may give back credit after the GCRA restarted from idle: see
        // the_mbr_never_exceeds_the_burst_and_a_packet).
        let mut rnd = Rnd(1);
        for kbps in [1_000, 10_000, 200_000] {
            for lanes in [2, 4, 8] {
                for _ in 0..10 {
                    let mut s = Sim::new(kbps, lanes, false);
                    let a = s.run(&random_traffic(&mut rnd, lanes, 2000));
                    let most = i128::from(lanes) * i128::from(s.mbr.lease[0].max(1500));
                    let excess = s.excess(&a);
                    assert!(excess <= most, "{kbps} kbit/s, {lanes}: {excess} > {most}");
                }
            }
        }
    }

    /// The bound docs/architecture.md states ("never exceed rate x interval + the burst,
    /// as with a GCRA per packet", which allows one packet more), in the two ways
    /// lease.h passes it.
    #[test]
    fn the_mbr_never_exceeds_the_burst_and_a_packet() {
        // 10 Mbit/s on two lanes (leases of 31250 octets), 30 Mbit/s offered on one lane
        // from idle: 135000 octets in the first 8 ms (burst 125000, rate x 8 ms 10000).
        let mut s = Sim::new(10_000, 2, false);
        let a = s.run(&traffic(3000, 1250, 3, 1_000_000, |_| 0));
        let one_lane = s.excess(&a);
        // One packet on lane 0, the GCRA idle for a second, then a burst on lane 1 and
        // one on lane 0 at the same instant: lane 0 gives back its old lease's 30000
        // octets, which the restart had forgiven: 156250 octets at once.
        let mut s = Sim::new(10_000, 2, false);
        let mut p = vec![(T0, 0, 1250)];
        p.extend((0..200).map(|_| (T0 + SEC, 1, 1250)));
        p.extend((0..200).map(|_| (T0 + SEC, 0, 1250)));
        let a = s.run(&p);
        let restart = s.excess(&a);
        assert!(
            one_lane <= 1250 && restart <= 1250,
            "{one_lane}, {restart} octets beyond the burst"
        );
    }

    /// One URR on `lanes` lanes, through what the data path does to a packet: the quota
    /// checked (rules stage), then counted, quota spent, threshold counted (egress).
    struct UrrSim {
        lay: Layout,
        r: Rule,
        /// Octets and packets counted, summed over the lanes.
        counted: u64,
        packets: u64,
        /// EV_QUOTA and EV_THRESHOLD raised.
        quota_events: usize,
        threshold_events: usize,
        /// The last quota and threshold lease each lane took.
        quota_lease: Vec<u32>,
        threshold_lease: Vec<u32>,
    }

    impl UrrSim {
        fn new(lanes: u32, shared: bool, quota: Option<i64>, threshold: Option<i64>) -> Self {
            let mut r = Rule::default();
            r.pool.set_quota(quota);
            r.pool.set_threshold(threshold);
            UrrSim {
                lay: Layout { lanes, shared },
                r,
                counted: 0,
                packets: 0,
                quota_events: 0,
                threshold_events: 0,
                quota_lease: vec![0; lanes as usize],
                threshold_lease: vec![0; lanes as usize],
            }
        }

        /// A packet of `len` octets on `lane`: whether it passed the quota (and was
        /// counted).
        fn packet(&mut self, lane: usize, len: u32, now: u64) -> bool {
            let lay = self.lay;
            let (pool, l) = self.r.at(lane);
            if pool.has_quota {
                let before = pool.quota;
                if let Err(notify) = quota_room(lay, pool, l, len) {
                    self.quota_events += usize::from(notify);
                    return false;
                }
                if pool.quota != before {
                    self.quota_lease[lane] = (before - pool.quota) as u32;
                }
            }
            lane_count(l, true, len, now);
            if pool.has_quota {
                quota_spend(lay, pool, l, len);
            }
            if pool.armed {
                let before = pool.threshold;
                if threshold_count(lay, pool, l, len) {
                    self.threshold_events += 1;
                }
                if pool.threshold != before {
                    self.threshold_lease[lane] = (before - pool.threshold) as u32;
                }
            }
            self.counted += u64::from(len);
            self.packets += 1;
            true
        }

        fn credit(&self, f: impl Fn(&Lane) -> u32) -> u64 {
            self.r.lanes.iter().map(|l| u64::from(f(l))).sum()
        }
    }

    #[test]
    fn a_quota_is_never_exceeded_and_lanes_hold_a_lease_each_when_it_runs_out() {
        let q: u64 = 1_000_000;
        let mut runs: Vec<Run> = PATTERNS
            .iter()
            .map(|(name, lane)| (name.to_string(), 2, traffic(1600, 1250, 4, 1_000_000, lane)))
            .collect();
        let mut rnd = Rnd(7);
        for lanes in [1, 2, 4, 8] {
            runs.push((
                format!("random, {lanes} lanes"),
                lanes,
                random_traffic(&mut rnd, lanes, 400),
            ));
        }
        for (name, lanes, packets) in runs {
            let mut u = UrrSim::new(lanes, false, Some(q as i64), None);
            let mut ran_out = false;
            for (t, lane, len) in packets {
                let passed = u.packet(lane, len, t);
                // Every octet is counted, leased to a lane or left in the pool.
                let left = u.r.pool.quota as u64 + u.credit(|l| l.quota_credit);
                assert_eq!(u.counted + left, q, "{name}");
                assert!(u.counted <= q, "{name}");
                if !passed && !ran_out {
                    ran_out = true;
                    // The pool could not give what the packet lacked; each lane holds
                    // at most the last lease it took.
                    for (i, l) in u.r.lanes.iter().enumerate() {
                        assert!(l.quota_credit <= u.quota_lease[i], "{name}: lane {i}");
                    }
                    assert!(
                        left < u64::from(len) + u.credit(|l| l.quota_credit),
                        "{name}"
                    );
                }
            }
            assert!(ran_out, "{name}");
            assert_eq!(u.quota_events, 1, "{name}: EV_QUOTA once");
            // A new quota: told again when it runs out.
            u.r.pool.set_quota(Some(0));
            assert!(!u.packet(0, 100, T0));
            assert_eq!(u.quota_events, 2, "{name}");
        }
        // Offered on both lanes to the end, the quota is used up to less than a packet
        // per lane and what the pool could not give.
        for (name, lane) in PATTERNS {
            let mut u = UrrSim::new(2, false, Some(q as i64), None);
            for (t, l, len) in traffic(2000, 1250, 4, 1_000_000, lane) {
                u.packet(l, len, t);
            }
            if name != "one lane" {
                assert!(q - u.counted < 3 * 1250, "{name}: {} left", q - u.counted);
            }
        }
    }

    #[test]
    fn a_threshold_event_comes_at_most_a_lease_per_lane_early_and_never_late() {
        let th: u64 = 2_000_000;
        let mut rnd = Rnd(3);
        let mut runs: Vec<Run> = PATTERNS
            .iter()
            .map(|(name, lane)| (name.to_string(), 2, traffic(3000, 1250, 4, 1_000_000, lane)))
            .collect();
        for lanes in [1, 2, 4, 8] {
            for _ in 0..5 {
                let p = random_traffic(&mut rnd, lanes, 800);
                runs.push((format!("random, {lanes} lanes"), lanes, p));
            }
        }
        for (name, lanes, packets) in runs {
            let mut u = UrrSim::new(lanes, false, None, Some(th as i64));
            let mut fired_at = None;
            for (t, lane, len) in packets {
                assert!(u.packet(lane, len, t));
                if fired_at.is_none() && u.threshold_events == 1 {
                    fired_at = Some(u.counted);
                    // Early by what the lanes hold: at most the last lease of each.
                    let early = th.saturating_sub(u.counted);
                    let held = u.credit(|l| l.threshold_credit);
                    let leases: u64 = u.threshold_lease.iter().map(|x| u64::from(*x)).sum();
                    assert!(early <= held && held <= leases, "{name}: {early} early");
                    assert!(leases <= u64::from(lanes) * u64::from(abi::LEASE_OCTETS_MAX));
                }
                // Never late: by the packet that takes the count to the threshold.
                if u.counted >= th {
                    assert_eq!(u.threshold_events, 1, "{name}: at {}", u.counted);
                }
            }
            assert!(u.counted >= th, "{name}: ran to the threshold");
            assert!(fired_at.is_some_and(|c| c <= th + 1500), "{name}");
        }
    }

    #[test]
    fn counts_are_exact_per_lane_and_summed() {
        let mut rnd = Rnd(11);
        let packets = random_traffic(&mut rnd, 4, 500);
        let mut u = UrrSim::new(4, false, Some(1 << 40), Some(1 << 20));
        let mut per_lane = [(0u64, 0u64); 4];
        for (t, lane, len) in &packets {
            assert!(u.packet(*lane, *len, *t));
            per_lane[*lane].0 += 1;
            per_lane[*lane].1 += u64::from(*len);
        }
        for (i, l) in u.r.lanes.iter().enumerate() {
            assert_eq!((l.packets[0], l.bytes[0]), per_lane[i], "lane {i}");
            assert_eq!((l.packets[1], l.bytes[1]), (0, 0));
        }
        let first = packets.first().map(|p| lane_time(p.0)).unwrap();
        let last = packets.last().map(|p| lane_time(p.0)).unwrap();
        let firsts = u.r.lanes.iter().map(|l| l.first).filter(|f| *f != 0);
        assert_eq!(firsts.min(), Some(first));
        assert_eq!(u.r.lanes.iter().map(|l| l.last).max(), Some(last));
        // A lane time of 0 is stored as 1 ("none" is 0); times read back across the
        // lane clock's wrap (2^52 ns).
        let mut l = Lane::default();
        lane_count(&mut l, false, 100, 5);
        assert_eq!((l.first, l.packets[1], l.bytes[1]), (1, 1, 100));
        let wrap = 1u64 << 52;
        let t = lane_time(wrap - 3 * SEC);
        assert_eq!(lane_time_ns(t, wrap + SEC), (wrap - 3 * SEC) >> 20 << 20);
    }

    #[test]
    fn a_new_epoch_drops_the_stale_credit_of_its_half() {
        let mut u = UrrSim::new(2, false, Some(100_000), Some(100_000));
        assert!(u.packet(0, 1000, T0));
        let l = u.r.lanes[0];
        // Leases of what is left / (2 x 2 lanes), less this packet.
        assert_eq!((l.quota_credit, l.threshold_credit), (24_000, 24_000));
        // A new quota: the quota credit goes, the threshold credit stays.
        u.r.pool.set_quota(Some(10_000));
        assert!(u.packet(0, 1000, T0));
        let l = u.r.lanes[0];
        assert_eq!(
            (l.quota_credit, l.threshold_credit),
            (10_000 / 4 - 1000, 23_000)
        );
        assert_eq!(u.r.pool.quota, 10_000 - 2500);
        // A new threshold: the other way round; the packet's own lease (what it
        // lacks, more than 100 / 4) takes the 100 octets left below zero.
        u.r.pool.set_threshold(Some(100));
        assert!(u.packet(0, 1000, T0));
        let l = u.r.lanes[0];
        assert_eq!((l.quota_credit, l.threshold_credit), (500, 0));
        assert_eq!(u.threshold_events, 1);
        assert_eq!(u.r.pool.threshold, 100 - 1000);
        // The epoch's halves wrap on their own.
        let mut p = Pool {
            epoch: 0xffff_ffff,
            ..Pool::default()
        };
        p.set_threshold(None);
        assert_eq!(p.epoch, 0xffff_0000);
        p.set_quota(None);
        assert_eq!(p.epoch, 0);
    }

    #[test]
    fn a_refund_goes_back_to_a_live_lease_or_to_the_pool() {
        let mut s = Sim::new(10_000, 2, false);
        let (lay, mbr, lease) = (s.lay, s.mbr, s.mbr.lease[0]);
        let cost = |octets: u32| (u64::from(octets) * mbr.cost[0]) >> abi::QER_COST_SHIFT;
        let later = T0 + (u64::from(abi::LEASE_TTL) << abi::LANE_TIME_SHIFT);
        let (pool, l) = s.r.at(0);
        // From idle: a lease, charged from now, good for LEASE_TTL.
        assert!(mbr_take(lay, pool, l, Some(&mbr), 0, 1000, T0));
        assert_eq!(
            (l.mbr_credit[0], pool.tat[0]),
            (lease - 1000, T0 + cost(lease))
        );
        assert_eq!(l.mbr_until, lane_time(T0) + abi::LEASE_TTL);
        // Live: the refund goes to the lane.
        mbr_refund(lay, pool, l, Some(&mbr), 0, 1000, T0);
        assert_eq!((l.mbr_credit[0], pool.tat[0]), (lease, T0 + cost(lease)));
        // The downlink's lease, taken while the uplink's lives, ends with it.
        assert!(mbr_take(lay, pool, l, Some(&mbr), 1, 1000, T0 + 1_000_000));
        assert_eq!(l.mbr_credit[1], lease - 1000);
        assert_eq!(l.mbr_until, lane_time(T0) + abi::LEASE_TTL);
        // Expired: a refund goes to the pool.
        mbr_refund(lay, pool, l, Some(&mbr), 0, 1000, later);
        assert_eq!(
            (l.mbr_credit[0], pool.tat[0]),
            (lease, T0 + cost(lease) - cost(1000))
        );
        // Taking after expiry gives back both directions' credit first, then the GCRA,
        // idle, restarts from now with the new lease.
        assert!(mbr_take(lay, pool, l, Some(&mbr), 0, 1000, later));
        assert_eq!(pool.tat[0], later + cost(lease));
        assert_eq!(
            pool.tat[1],
            T0 + 1_000_000 + cost(lease) - cost(lease - 1000)
        );
        assert_eq!(l.mbr_credit, [lease - 1000, 0]);
        assert_eq!(l.mbr_until, lane_time(later) + abi::LEASE_TTL);
    }

    #[test]
    fn shared_lanes_are_the_per_packet_semantics() {
        // MBR: a GCRA per packet with the same tolerance, whatever the lanes.
        let mut rnd = Rnd(5);
        for kbps in [1_000, 10_000] {
            let p = random_traffic(&mut rnd, 8, 2000);
            let mut s = Sim::new(kbps, 4, true);
            // Shared lanes have the whole burst tolerance back.
            let ttl = u64::from(abi::LEASE_TTL) << abi::LANE_TIME_SHIFT;
            let (cost, tau) = (s.mbr.cost[0], s.mbr.tau[0] + ttl);
            let mut tat = 0;
            for (t, lane, len) in p {
                let plain = gcra(
                    &mut tat,
                    (u64::from(len) * cost) >> abi::QER_COST_SHIFT,
                    tau,
                    t,
                    None,
                );
                assert_eq!(s.offer(lane % 4, len, t), plain);
                assert_eq!(s.r.pool.tat[0], tat);
            }
            assert!(s.r.lanes.iter().all(|l| l.mbr_credit == [0, 0]));
        }
        // Quota: a packet passes while the quota has its octets, which it spends; the
        // threshold is crossed by the packet whose count reaches it.
        let mut u = UrrSim::new(4, true, Some(100_000), Some(60_000));
        let mut reached = None;
        for i in 0..200usize {
            let before = u.counted;
            let passed = u.packet(i % 4, 1000 + i as u32, T0);
            assert_eq!(passed, 100_000 - before >= 1000 + i as u64, "packet {i}");
            if passed && before < 60_000 && u.counted >= 60_000 {
                reached = Some(i);
            }
            if reached == Some(i) {
                assert_eq!(u.threshold_events, 1, "at packet {i}");
            } else if reached.is_none() {
                assert_eq!(u.threshold_events, 0, "before, at packet {i}");
            }
            assert_eq!(u.r.pool.quota, 100_000 - u.counted as i64);
        }
        assert_eq!(u.quota_events, 1);
        assert!(u
            .r
            .lanes
            .iter()
            .all(|l| l.quota_credit == 0 && l.threshold_credit == 0));
    }
}
