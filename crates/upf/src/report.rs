//! Usage reporting (TS 29.244 clause 5.2.2): the URR state machines that turn the data
//! path's counters into Usage Reports, and the per-URR state they keep ([`Reporting`]).
//! The session table (sessions.rs) starts and ends the measurements; the daemon polls;
//! the data path itself stops traffic when a volume quota runs out, this module reports
//! it.
//!
//! Triggers handled (Reporting Triggers, clause 8.2.19): PERIO (Measurement Period),
//! VOLTH (Volume Threshold), VOLQU (Volume Quota), TIMTH / TIMQU (Time Threshold and
//! Quota, counted in seconds with traffic), START / STOPT (start and stop of traffic, with
//! the Inactivity Detection Time), QUHTI (Quota Holding Time), LIUSA (linked URRs); IMMER
//! and TERMR come from Query URR and deletion. A URR that reports starts a new
//! measurement: counts, thresholds and quotas apply to what comes after.

use crate::seidmap::{SeidMap, SeidSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::rules::VolumeLimit;
use pfcp::ie::reporting_triggers as rt;

use crate::fastpath::{AppFlow, FastPath, Usage};
use crate::rules::{Session, Urr};
use crate::state::SavedUrr;

/// Why a report is made: one of the Usage Report Trigger bits (clause 8.2.41).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportReason {
    /// The session (or URR) is deleted: TERMR.
    Termination,
    /// The CP function asked (Query URR): IMMER.
    Immediate,
    /// Measurement Period elapsed: PERIO.
    Periodic,
    /// Volume Threshold reached: VOLTH.
    VolumeThreshold,
    /// Volume Quota used up: VOLQU.
    VolumeQuota,
    /// Time Threshold reached: TIMTH.
    TimeThreshold,
    /// Time Quota used up: TIMQU.
    TimeQuota,
    /// Traffic started: START.
    StartOfTraffic,
    /// Traffic stopped (Inactivity Detection Time): STOPT.
    StopOfTraffic,
    /// No traffic for the Quota Holding Time: QUHTI.
    QuotaHoldingTime,
    /// A linked URR reported: LIUSA.
    Linked,
}

impl ReportReason {
    /// The Usage Report Trigger bit (numbering of `pfcp::ie::usage_report_trigger`).
    pub fn bit(self) -> u16 {
        use pfcp::ie::usage_report_trigger as t;
        match self {
            ReportReason::Termination => t::TERMR,
            ReportReason::Immediate => t::IMMER,
            ReportReason::Periodic => t::PERIO,
            ReportReason::VolumeThreshold => t::VOLTH,
            ReportReason::VolumeQuota => t::VOLQU,
            ReportReason::TimeThreshold => t::TIMTH,
            ReportReason::TimeQuota => t::TIMQU,
            ReportReason::StartOfTraffic => t::START,
            ReportReason::StopOfTraffic => t::STOPT,
            ReportReason::QuotaHoldingTime => t::QUHTI,
            ReportReason::Linked => t::LIUSA,
        }
    }
}

/// A URR's usage as reported, with the sequence number the report carries (UR-SEQN).
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub urr_id: u32,
    pub seqn: u32,
    pub reason: ReportReason,
    pub usage: Usage,
    /// Seconds since the UNIX epoch when measurement started (installation or last report).
    pub start: u64,
    pub end: u64,
    /// Application Detection Information (clause 8.2.40 group in the Usage Report) of a
    /// START or STOPT report on an application's PDR.
    pub app: Option<Box<AppDetection>>,
}

/// The start or stop of one flow of an application (TS 29.244 clause 5.11.1): what the
/// Usage Report's Application Detection Information says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppDetection {
    /// The Application ID.
    pub app: String,
    /// Names this flow of the application in its START and its STOPT report: the
    /// session's SEID in hex and a number, unique while upfd runs.
    pub instance: String,
    pub flow: AppFlow,
}

impl AppDetection {
    /// The flow as a Flow Description (TS 29.212 IPFilterRule), downlink-oriented as
    /// SDF filters are: `permit out PROTO from REMOTE [PORT] to UE [PORT]`.
    pub fn flow_description(&self) -> String {
        let f = &self.flow;
        let side = |a: std::net::IpAddr, port: u16| match port {
            0 => a.to_string(),
            p => format!("{a} {p}"),
        };
        format!(
            "permit out {} from {} to {}",
            f.protocol,
            side(f.remote, f.remote_port),
            side(f.ue, f.ue_port)
        )
    }
}

/// What the data path that ran before a restart counted for a URR
/// ([`Reporting::restore`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counted {
    /// Not known (its counters are gone, or nothing was counted since the state was
    /// written): the counts start again from what was reported.
    Unknown,
    /// This much in all; the restarted upfd's data path counts from zero.
    Total(Usage),
    /// The restarted upfd reuses that data path: its counters go on.
    Kept,
}

/// A flow whose start was reported, waiting for its stop.
#[derive(Debug, Clone)]
struct StartedFlow {
    app: String,
    instance: String,
    flow: AppFlow,
}

/// The URRs of session `s` with reporting trigger `trigger` on a PDR naming application
/// `app` (clause 5.11.1).
fn app_urrs<'a>(s: &'a Session, app: &'a str, trigger: u16) -> impl Iterator<Item = &'a Urr> + 'a {
    let mut ids: Vec<u32> = s
        .pdrs
        .values()
        .filter(|p| p.pdi.application_id.as_deref() == Some(app))
        .flat_map(|p| p.urr_ids.iter().copied())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    ids.into_iter()
        .filter_map(|id| s.urrs.get(&id))
        .filter(move |u| u.rule.reporting_triggers.get(trigger))
}

/// Whether URR `id` of `s` counts an application's traffic (a PDR naming an Application
/// ID uses it): its START and STOPT are the application's flows', with Application
/// Detection Information, not the URR's traffic at large.
fn is_app_urr(s: &Session, id: u32) -> bool {
    s.pdrs
        .values()
        .any(|p| p.pdi.application_id.is_some() && p.urr_ids.contains(&id))
}

/// Seconds since the UNIX epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Per-URR reporting state kept beside the counters.
#[derive(Debug, Clone, Default)]
struct UrrState {
    seqn: u32,
    start: u64,
    /// Counts already reported (the data path's counters only grow).
    reported: Usage,
    /// Packets counted at the last poll, to see whether traffic flows.
    seen_packets: u64,
    last_activity: Option<Instant>,
    next_periodic: Option<Instant>,
    /// Seconds with traffic since the last report (time thresholds and quotas).
    active_secs: u64,
    last_poll: Option<Instant>,
    traffic_on: bool,
    quota_reported: bool,
    /// The data path holds a quota for this URR.
    quota_set: bool,
    /// The data path holds an armed volume threshold for this URR.
    threshold_set: bool,
    /// Counted by the data paths before this one (upfd restarted) and not reported:
    /// added to what the data path counts now.
    carried: Usage,
}

impl UrrState {
    /// What was counted for the URR in all: the data path's counts and the carried ones.
    fn total(&self, fp: &dyn FastPath, seid: u64, urr_id: u32) -> Usage {
        fp.usage(seid, urr_id).plus(&self.carried)
    }
}

impl UrrState {
    /// A measurement that starts now.
    fn starting_now() -> Box<Self> {
        Box::new(UrrState {
            start: unix_now(),
            ..UrrState::default()
        })
    }
}

/// A URR's measurement now ([`Reporting::measurement`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Measurement {
    /// Counted since the URR was created.
    pub total: Usage,
    /// Counted since its last usage report (what the next one will say).
    pub unreported: Usage,
    /// Usage reports sent for it (the last UR-SEQN + 1).
    pub reports: u32,
    /// When the current measurement period started (seconds since the UNIX epoch).
    pub start: u64,
}

/// The reporting state of every URR of every session, and which sessions need polling.
#[derive(Debug, Default)]
pub struct Reporting {
    /// Boxed, as the data path's table: growing the map moves pointers, not records.
    urrs: SeidMap<(u64, u32), Box<UrrState>>,
    /// Sessions with a URR that must be polled periodically (time triggers, or volume
    /// triggers when the data path does not signal them). The others report on the data
    /// path's signals only: polling a million sessions every half second is what this
    /// set avoids.
    polled: SeidSet,
    /// Per session, the applications' flows whose start was reported to a URR with
    /// STOPT (clause 5.11.1): their stop is reported once the data path finds them idle.
    app_flows: std::collections::HashMap<u64, Vec<StartedFlow>>,
    /// Numbers Application Instance IDs.
    app_instances: u64,
}

impl Reporting {
    /// Room for `n` URRs now, so the table never grows while SMFs wait.
    pub fn reserve(&mut self, n: usize) {
        self.urrs.reserve(n);
    }

    /// What was counted for a URR since its last report.
    pub fn unreported(&self, fp: &dyn FastPath, seid: u64, urr_id: u32) -> Usage {
        match self.urrs.get(&(seid, urr_id)) {
            Some(st) => st.total(fp, seid, urr_id).since(&st.reported),
            None => fp.usage(seid, urr_id),
        }
    }

    /// A URR's measurement as an operator sees it (the API): what was counted since the
    /// URR was created (across restarts), since its last report, and the reports sent.
    pub fn measurement(&self, fp: &dyn FastPath, seid: u64, urr_id: u32) -> Measurement {
        match self.urrs.get(&(seid, urr_id)) {
            Some(st) => {
                let total = st.total(fp, seid, urr_id);
                Measurement {
                    unreported: total.since(&st.reported),
                    total,
                    reports: st.seqn,
                    start: st.start,
                }
            }
            None => Measurement {
                total: fp.usage(seid, urr_id),
                unreported: fp.usage(seid, urr_id),
                reports: 0,
                start: 0,
            },
        }
    }

    /// Start measuring a session's new URRs, and give the data path every URR's quota
    /// and threshold (clause 5.2.2.2: what is left since the last report).
    pub fn start(&mut self, fp: &mut dyn FastPath, s: &Session) {
        for u in s.urrs.values() {
            let st = self
                .urrs
                .entry((s.up_seid, u.id))
                .or_insert_with(UrrState::starting_now);
            // A new quota may be reported on again.
            st.quota_reported = false;
            let since = st.total(fp, s.up_seid, u.id).since(&st.reported);
            let left = quota_left(u, &since);
            let threshold = threshold_left(u, &since);
            // Only URRs that have or had a quota or threshold cost a table write.
            if left.is_some() || st.quota_set {
                st.quota_set = left.is_some();
                fp.set_quota(s.up_seid, u.id, left);
            }
            if threshold.is_some() || st.threshold_set {
                st.threshold_set = threshold.is_some();
                fp.set_threshold(s.up_seid, u.id, threshold);
            }
        }
        let signals = fp.signals_volume();
        if s.urrs
            .values()
            .any(|u| needs_polling(u, signals, is_app_urr(s, u.id)))
        {
            self.polled.insert(s.up_seid);
        } else {
            self.polled.remove(&s.up_seid);
        }
    }

    /// The reporting state of a session's URRs, to keep across a restart (state.rs).
    pub fn save(&self, fp: &dyn FastPath, s: &Session) -> Vec<SavedUrr> {
        s.urrs
            .keys()
            .filter_map(|id| {
                let st = self.urrs.get(&(s.up_seid, *id))?;
                Some(SavedUrr {
                    urr_id: *id,
                    handle: fp.urr_handle(s.up_seid, *id),
                    seqn: st.seqn,
                    start: st.start,
                    reported: st.reported,
                    carried: st.carried,
                    active_secs: st.active_secs,
                    quota_reported: st.quota_reported,
                })
            })
            .collect()
    }

    /// Take back a session's URRs' reporting state after a restart. `counted` says what
    /// the data path that ran before counted for a URR ([`Counted`]): what of it was not
    /// reported is carried into this data path's counts, unless this data path is that
    /// one. Then the data path gets the quotas and thresholds left
    /// ([`Reporting::start`] without starting anything new).
    pub fn restore(
        &mut self,
        fp: &mut dyn FastPath,
        s: &Session,
        saved: &[SavedUrr],
        counted: impl Fn(&SavedUrr) -> Counted,
    ) {
        for u in saved {
            if !s.urrs.contains_key(&u.urr_id) {
                continue;
            }
            let (reported, carried) = (u.reported, u.carried);
            let before = match counted(u) {
                // The same counters go on: what was reported and carried stays so.
                Counted::Kept => {
                    let st = UrrState {
                        seqn: u.seqn,
                        start: u.start,
                        active_secs: u.active_secs,
                        quota_reported: u.quota_reported,
                        reported,
                        carried,
                        ..UrrState::default()
                    };
                    self.urrs.insert((s.up_seid, u.urr_id), Box::new(st));
                    continue;
                }
                Counted::Total(c) => c.plus(&carried),
                Counted::Unknown => reported,
            };
            let st = UrrState {
                seqn: u.seqn,
                start: u.start,
                active_secs: u.active_secs,
                quota_reported: u.quota_reported,
                // What the new data path counts starts at zero: all that went before
                // and was not reported is carried.
                carried: before.since(&reported),
                ..UrrState::default()
            };
            self.urrs.insert((s.up_seid, u.urr_id), Box::new(st));
        }
        self.refresh(fp, s);
    }

    /// Add `more` to what a URR carries from an earlier data path (counted by it after
    /// [`Reporting::restore`] read it), and give the data path what is left of the
    /// session's quotas and thresholds.
    pub fn carry(&mut self, fp: &mut dyn FastPath, s: &Session, urr_id: u32, more: Usage) {
        if let Some(st) = self.urrs.get_mut(&(s.up_seid, urr_id)) {
            st.carried = more.plus(&st.carried);
        }
        self.refresh(fp, s);
    }

    /// [`Reporting::start`] for URRs that are not new: what was reported stays so.
    fn refresh(&mut self, fp: &mut dyn FastPath, s: &Session) {
        let quota_reported: Vec<(u32, bool)> = s
            .urrs
            .keys()
            .filter_map(|id| Some((*id, self.urrs.get(&(s.up_seid, *id))?.quota_reported)))
            .collect();
        self.start(fp, s);
        for (id, q) in quota_reported {
            if let Some(st) = self.urrs.get_mut(&(s.up_seid, id)) {
                st.quota_reported = q;
            }
        }
    }

    /// Forget a session's URR (removed, or the session deleted).
    pub fn forget(&mut self, seid: u64, urr_id: u32) {
        self.urrs.remove(&(seid, urr_id));
    }

    /// Forget a session: nothing of it is polled any more.
    pub fn forget_session(&mut self, s: &Session) {
        self.polled.remove(&s.up_seid);
        self.app_flows.remove(&s.up_seid);
        for u in s.urrs.keys() {
            self.urrs.remove(&(s.up_seid, *u));
        }
    }

    /// Sessions that must be polled periodically.
    pub fn polled_seids(&self) -> Vec<u64> {
        self.polled.iter().copied().collect()
    }

    /// Arm a URR's volume threshold again with what is left of it since the last report
    /// (after a report, or after the data path signalled it early: it counts both
    /// directions against the tightest of total, uplink and downlink).
    pub fn rearm_threshold(&mut self, fp: &mut dyn FastPath, seid: u64, u: &Urr) {
        let since = self.unreported(fp, seid, u.id);
        let left = threshold_left(u, &since);
        if let Some(st) = self.urrs.get_mut(&(seid, u.id)) {
            if left.is_some() || st.threshold_set {
                st.threshold_set = left.is_some();
                fp.set_threshold(seid, u.id, left);
            }
        }
    }

    /// A usage report for URR `u` of session `seid`: what was counted since the last
    /// report, which starts a new measurement.
    pub fn report(
        &mut self,
        fp: &mut dyn FastPath,
        seid: u64,
        u: &Urr,
        reason: ReportReason,
    ) -> Report {
        let now = unix_now();
        let st = self
            .urrs
            .entry((seid, u.id))
            .or_insert_with(UrrState::starting_now);
        let total = st.total(fp, seid, u.id);
        st.seqn = st.seqn.wrapping_add(1);
        let r = Report {
            urr_id: u.id,
            seqn: st.seqn - 1,
            reason,
            usage: total.since(&st.reported),
            start: st.start,
            end: now,
            app: None,
        };
        st.reported = total;
        st.start = now;
        st.active_secs = 0;
        if st.threshold_set && reason != ReportReason::Termination {
            self.rearm_threshold(fp, seid, u);
        }
        r
    }

    /// The data path classified a new flow of session `s` as application `app`: a
    /// report with trigger START and Application Detection Information for each URR
    /// with START on a PDR naming `app` (clause 5.11.1); the flow is kept for its stop
    /// if such a URR has STOPT. Nothing for a flow already started, or when no URR asks.
    pub fn app_start(
        &mut self,
        fp: &mut dyn FastPath,
        s: &Session,
        app: &str,
        flow: AppFlow,
    ) -> Vec<Report> {
        let seid = s.up_seid;
        if self
            .app_flows
            .get(&seid)
            .is_some_and(|v| v.iter().any(|f| f.flow == flow && f.app == app))
        {
            return Vec::new();
        }
        let start: Vec<Urr> = app_urrs(s, app, rt::START).cloned().collect();
        let stop = app_urrs(s, app, rt::STOPT).next().is_some();
        if start.is_empty() && !stop {
            return Vec::new();
        }
        self.app_instances += 1;
        let detected = AppDetection {
            app: app.to_string(),
            instance: format!("{seid:x}-{}", self.app_instances),
            flow,
        };
        if stop {
            self.app_flows.entry(seid).or_default().push(StartedFlow {
                app: detected.app.clone(),
                instance: detected.instance.clone(),
                flow,
            });
        }
        start
            .iter()
            .map(|u| {
                let mut r = self.report(fp, seid, u, ReportReason::StartOfTraffic);
                r.app = Some(Box::new(detected.clone()));
                r
            })
            .collect()
    }

    /// The sessions with application flows waiting for their stop.
    pub fn app_flow_seids(&self) -> Vec<u64> {
        self.app_flows.keys().copied().collect()
    }

    /// Whether any session has application flows waiting for their stop.
    pub fn has_app_flows(&self) -> bool {
        !self.app_flows.is_empty()
    }

    /// The stops of started application flows (clause 5.11.1): a flow the data path no
    /// longer holds, or idle for `stop_after`, is reported with trigger STOPT and its
    /// START's Application Detection Information by each URR with STOPT on a PDR naming
    /// its application, then forgotten. Sessions `may_report` refuses keep their flows
    /// for a later call.
    pub fn poll_app_flows(
        &mut self,
        fp: &mut dyn FastPath,
        session: impl Fn(u64) -> Option<Arc<Session>>,
        stop_after: Duration,
        mut may_report: impl FnMut(u64) -> bool,
    ) -> Vec<(u64, Vec<Report>)> {
        let mut out = Vec::new();
        let mut seids: Vec<u64> = self.app_flows.keys().copied().collect();
        seids.sort_unstable();
        for seid in seids {
            let Some(s) = session(seid) else {
                self.app_flows.remove(&seid);
                continue;
            };
            let flows = self.app_flows.get(&seid).cloned().unwrap_or_default();
            let stopped: Vec<StartedFlow> = flows
                .into_iter()
                .filter(|f| {
                    fp.app_flow_idle(seid, &f.flow)
                        .is_none_or(|idle| idle >= stop_after)
                })
                .collect();
            if stopped.is_empty() {
                continue;
            }
            let due = stopped
                .iter()
                .any(|f| app_urrs(&s, &f.app, rt::STOPT).next().is_some());
            if due && !may_report(seid) {
                continue;
            }
            let mut reports = Vec::new();
            for f in &stopped {
                let urrs: Vec<Urr> = app_urrs(&s, &f.app, rt::STOPT).cloned().collect();
                for u in &urrs {
                    let mut r = self.report(fp, seid, u, ReportReason::StopOfTraffic);
                    r.app = Some(Box::new(AppDetection {
                        app: f.app.clone(),
                        instance: f.instance.clone(),
                        flow: f.flow,
                    }));
                    reports.push(r);
                }
            }
            if let Some(v) = self.app_flows.get_mut(&seid) {
                v.retain(|f| !stopped.iter().any(|x| x.instance == f.instance));
                if v.is_empty() {
                    self.app_flows.remove(&seid);
                }
            }
            if !reports.is_empty() {
                out.push((seid, reports));
            }
        }
        out
    }

    /// Poll the URRs of `seids` (sessions the data path signalled, or the periodic set;
    /// `session` finds their rules). Returns the reports due, and the sessions that had
    /// a report due but were refused by `may_report` (to be polled again later: a signal
    /// does not repeat). Volume thresholds of the polled sessions are armed again with
    /// what is left of them.
    pub fn poll(
        &mut self,
        fp: &mut dyn FastPath,
        session: impl Fn(u64) -> Option<Arc<Session>>,
        seids: &[u64],
        now: Instant,
        mut may_report: impl FnMut(u64) -> bool,
    ) -> (Vec<(u64, Vec<Report>)>, Vec<u64>) {
        let mut out = Vec::new();
        let mut deferred = Vec::new();
        for &seid in seids {
            let Some(s) = session(seid) else {
                continue;
            };
            let mut due: Vec<(u32, ReportReason)> = Vec::new();
            let mut next_states = Vec::new();
            for urr in s.urrs.values() {
                let st = self
                    .urrs
                    .entry((seid, urr.id))
                    .or_insert_with(UrrState::starting_now);
                let total = st.total(fp, seid, urr.id);
                // Whether traffic flows: kept whether or not a report goes out.
                let active = total.total_packets() > st.seen_packets;
                st.seen_packets = total.total_packets();
                if active {
                    if let Some(p) = st.last_poll {
                        st.active_secs += now.duration_since(p).as_secs().max(1);
                    }
                    st.last_activity = Some(now);
                }
                st.last_poll = Some(now);
                let u = total.since(&st.reported);
                // What a report changes is decided on a copy, kept only if it is sent.
                let mut next = (**st).clone();
                let app = is_app_urr(&s, urr.id);
                if let Some(r) = reason(urr, &mut next, &u, active, app, now) {
                    due.push((urr.id, r));
                    next_states.push((urr.id, next));
                }
            }
            if due.is_empty() {
                for u in s.urrs.values() {
                    if u.rule.reporting_triggers.get(rt::VOLTH) {
                        self.rearm_threshold(fp, seid, u);
                    }
                }
                continue;
            }
            if !may_report(seid) {
                deferred.push(seid);
                continue;
            }
            for (id, st) in next_states {
                self.urrs.insert((seid, id), Box::new(st));
            }
            // Linked URRs report with the URRs they are linked to (clause 5.2.2.4).
            let mut linked = Vec::new();
            for (id, _) in &due {
                for other in s.urrs.values() {
                    if other.rule.linked_urr_ids.contains(id)
                        && other.rule.reporting_triggers.get(rt::LIUSA)
                        && !due.iter().any(|(x, _)| *x == other.id)
                        && !linked.iter().any(|(x, _)| *x == other.id)
                    {
                        linked.push((other.id, ReportReason::Linked));
                    }
                }
            }
            due.extend(linked);
            let reports = due
                .into_iter()
                .filter_map(|(id, r)| Some(self.report(fp, seid, s.urrs.get(&id)?, r)))
                .collect();
            out.push((seid, reports));
        }
        (out, deferred)
    }
}

/// Default Inactivity Detection Time for STOPT when the URR names none (clause 8.2.14
/// leaves it to the UP function).
pub const DEFAULT_INACTIVITY: Duration = Duration::from_secs(10);

fn volume_reached(limit: &VolumeLimit, u: &Usage) -> bool {
    limit.total.is_some_and(|x| u.total_bytes() >= x)
        || limit.uplink.is_some_and(|x| u.ul_bytes >= x)
        || limit.downlink.is_some_and(|x| u.dl_bytes >= x)
}

/// The octets a URR may still use before its Volume Quota runs out, for the data path's
/// quota table (None: no quota).
fn quota_left(urr: &Urr, since_report: &Usage) -> Option<i64> {
    let q = urr.rule.volume_quota?;
    // The data path counts both directions against one number: use the tightest.
    let mut left: Option<i64> = None;
    let mut take = |x: Option<u64>, used: u64| {
        if let Some(x) = x {
            let l = x as i64 - used as i64;
            left = Some(left.map_or(l, |m: i64| m.min(l)));
        }
    };
    take(q.total, since_report.total_bytes());
    take(q.uplink, since_report.ul_bytes);
    take(q.downlink, since_report.dl_bytes);
    left
}

/// Why URR `urr` should report now, if it should. `u` is what was counted since its last
/// report; `active` whether traffic flowed since the last poll.
/// An application's URR (`app`) leaves START and STOPT to its flows (clause 5.11.1).
fn reason(
    urr: &Urr,
    st: &mut UrrState,
    u: &Usage,
    active: bool,
    app: bool,
    now: Instant,
) -> Option<ReportReason> {
    let r = &urr.rule;
    let t = &r.reporting_triggers;
    if t.get(rt::VOLQU) && !st.quota_reported {
        if let Some(q) = &r.volume_quota {
            if volume_reached(q, u) {
                st.quota_reported = true;
                return Some(ReportReason::VolumeQuota);
            }
        }
    }
    if t.get(rt::VOLTH) {
        if let Some(th) = &r.volume_threshold {
            if volume_reached(th, u) {
                return Some(ReportReason::VolumeThreshold);
            }
        }
    }
    if t.get(rt::TIMQU) && r.time_quota.is_some_and(|q| st.active_secs >= q as u64) {
        return Some(ReportReason::TimeQuota);
    }
    if t.get(rt::TIMTH) && r.time_threshold.is_some_and(|q| st.active_secs >= q as u64) {
        return Some(ReportReason::TimeThreshold);
    }
    if t.get(rt::PERIO) {
        if let Some(p) = r.measurement_period.filter(|p| *p > 0) {
            let due = *st
                .next_periodic
                .get_or_insert(now + Duration::from_secs(p as u64));
            if now >= due {
                // The next period starts where this one ended, not when we noticed.
                let mut next = due + Duration::from_secs(p as u64);
                while next <= now {
                    next += Duration::from_secs(p as u64);
                }
                st.next_periodic = Some(next);
                return Some(ReportReason::Periodic);
            }
        }
    }
    if t.get(rt::START) && !app && active && !st.traffic_on {
        st.traffic_on = true;
        return Some(ReportReason::StartOfTraffic);
    }
    if t.get(rt::STOPT) && !app && st.traffic_on {
        let idle = r
            .inactivity_detection_time
            .map(|s| Duration::from_secs(s as u64))
            .unwrap_or(DEFAULT_INACTIVITY);
        if st
            .last_activity
            .is_some_and(|a| now.duration_since(a) >= idle)
        {
            st.traffic_on = false;
            return Some(ReportReason::StopOfTraffic);
        }
    }
    if t.get(rt::QUHTI) && st.quota_reported {
        if let Some(h) = r.quota_holding_time {
            if st
                .last_activity
                .is_some_and(|a| now.duration_since(a) >= Duration::from_secs(h as u64))
            {
                st.quota_reported = false;
                return Some(ReportReason::QuotaHoldingTime);
            }
        }
    }
    None
}

/// The octets a URR may count before its Volume Threshold is reached, for the data
/// path's threshold table (None: no VOLTH). Like the quota, the tightest of total,
/// uplink and downlink: the data path counts both directions against one number and may
/// signal early; the poll that follows decides, then arms what is left.
fn threshold_left(urr: &Urr, since_report: &Usage) -> Option<i64> {
    if !urr.rule.reporting_triggers.get(rt::VOLTH) {
        return None;
    }
    let t = urr.rule.volume_threshold?;
    let mut left: Option<i64> = None;
    let mut take = |x: Option<u64>, used: u64| {
        if let Some(x) = x {
            let l = x as i64 - used as i64;
            left = Some(left.map_or(l, |m: i64| m.min(l)));
        }
    };
    take(t.total, since_report.total_bytes());
    take(t.uplink, since_report.ul_bytes);
    take(t.downlink, since_report.dl_bytes);
    left
}

/// Whether a URR needs periodic polling: time-based triggers and duration measurement
/// always; volume thresholds and quotas only when the data path does not signal them
/// (`signals_volume`); linked usage reports ride on other URRs' reports.
/// An application's URR (`app`) reports START and STOPT from the data path's flows
/// ([`Reporting::app_start`], [`Reporting::poll_app_flows`]), not from polling.
fn needs_polling(urr: &Urr, signals_volume: bool, app: bool) -> bool {
    let t = &urr.rule.reporting_triggers;
    let volume = [rt::VOLTH, rt::VOLQU, rt::LIUSA];
    let flows = [rt::START, rt::STOPT];
    let timed = t
        .bits()
        .any(|b| !(volume.contains(&b) || app && flows.contains(&b)));
    let duration = urr
        .rule
        .measurement_method
        .get(pfcp::ie::measurement_method::DURAT);
    timed || duration || (!signals_volume && (t.get(rt::VOLTH) || t.get(rt::VOLQU)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfcp::msg::CreateUrr;

    fn urr(triggers: &[u16]) -> Urr {
        let est = pfcp_samples::corpus()
            .into_iter()
            .find(|s| s.bytes[1] == 50)
            .unwrap();
        let (_, m) =
            pfcp::msg::parse::<pfcp::msg::SessionEstablishmentRequest>(&est.bytes).unwrap();
        let mut rule: CreateUrr = m.create_urrs[0].clone();
        rule.reporting_triggers = pfcp::ie::Flags::from_bits(triggers, 3);
        rule.volume_threshold = None;
        rule.volume_quota = None;
        rule.measurement_period = None;
        rule.time_threshold = None;
        rule.time_quota = None;
        rule.quota_holding_time = None;
        rule.inactivity_detection_time = None;
        Urr::new(&rule)
    }

    #[test]
    fn thresholds_for_the_data_path_and_what_needs_polling() {
        let mut u = urr(&[rt::VOLTH]);
        u.rule.measurement_method =
            pfcp::ie::Flags::from_bits(&[pfcp::ie::measurement_method::VOLUM], 1);
        assert_eq!(threshold_left(&u, &usage(0, 0)), None, "no threshold value");
        u.rule.volume_threshold = Some(VolumeLimit {
            total: Some(1000),
            uplink: Some(300),
            downlink: None,
        });
        // The tightest of total and uplink.
        assert_eq!(threshold_left(&u, &usage(100, 500)), Some(200));
        assert_eq!(threshold_left(&u, &usage(350, 0)), Some(-50));
        assert!(
            !needs_polling(&u, true, false),
            "VOLTH is signalled by the data path"
        );
        assert!(needs_polling(&u, false, false), "else polled");
        let mut t = urr(&[rt::VOLTH, rt::PERIO]);
        t.rule.measurement_method =
            pfcp::ie::Flags::from_bits(&[pfcp::ie::measurement_method::VOLUM], 1);
        assert!(needs_polling(&t, true, false), "a period is a time trigger");
        let mut d = urr(&[rt::VOLQU]);
        d.rule.measurement_method =
            pfcp::ie::Flags::from_bits(&[pfcp::ie::measurement_method::DURAT], 1);
        assert!(
            needs_polling(&d, true, false),
            "duration is measured by polling"
        );
        assert_eq!(threshold_left(&urr(&[rt::PERIO]), &usage(0, 0)), None);
    }

    fn usage(ul: u64, dl: u64) -> Usage {
        Usage {
            ul_bytes: ul,
            dl_bytes: dl,
            ul_packets: 1,
            dl_packets: 1,
            ..Default::default()
        }
    }

    #[test]
    fn volume_threshold_and_quota() {
        let mut u = urr(&[rt::VOLTH, rt::VOLQU]);
        u.rule.volume_threshold = Some(VolumeLimit {
            total: Some(1000),
            ..Default::default()
        });
        u.rule.volume_quota = Some(VolumeLimit {
            uplink: Some(5000),
            ..Default::default()
        });
        let mut st = Default::default();
        let now = Instant::now();
        assert_eq!(
            reason(&u, &mut st, &usage(400, 500), true, false, now),
            None
        );
        assert_eq!(
            reason(&u, &mut st, &usage(400, 600), true, false, now),
            Some(ReportReason::VolumeThreshold)
        );
        assert_eq!(
            reason(&u, &mut st, &usage(5000, 0), true, false, now),
            Some(ReportReason::VolumeQuota)
        );
        assert_eq!(quota_left(&u, &usage(1200, 9)), Some(3800));
    }

    #[test]
    fn periodic_keeps_its_cadence() {
        let mut u = urr(&[rt::PERIO]);
        u.rule.measurement_period = Some(10);
        let mut st = Default::default();
        let t0 = Instant::now();
        assert_eq!(reason(&u, &mut st, &usage(0, 0), false, false, t0), None);
        assert_eq!(
            reason(
                &u,
                &mut st,
                &usage(0, 0),
                false,
                false,
                t0 + Duration::from_secs(10)
            ),
            Some(ReportReason::Periodic)
        );
        assert_eq!(
            reason(
                &u,
                &mut st,
                &usage(0, 0),
                false,
                false,
                t0 + Duration::from_secs(19)
            ),
            None
        );
        assert_eq!(
            reason(
                &u,
                &mut st,
                &usage(0, 0),
                false,
                false,
                t0 + Duration::from_secs(20)
            ),
            Some(ReportReason::Periodic)
        );
    }

    #[test]
    fn start_and_stop_of_traffic() {
        let mut u = urr(&[rt::START, rt::STOPT]);
        u.rule.inactivity_detection_time = Some(5);
        let mut st = UrrState::default();
        let t0 = Instant::now();
        assert_eq!(
            reason(&u, &mut st, &usage(1, 0), true, false, t0),
            Some(ReportReason::StartOfTraffic)
        );
        st.last_activity = Some(t0);
        assert_eq!(
            reason(
                &u,
                &mut st,
                &usage(1, 0),
                false,
                false,
                t0 + Duration::from_secs(4)
            ),
            None
        );
        assert_eq!(
            reason(
                &u,
                &mut st,
                &usage(1, 0),
                false,
                false,
                t0 + Duration::from_secs(5)
            ),
            Some(ReportReason::StopOfTraffic)
        );
    }
}
