//! The session table: every PFCP session of the UP function, the resources they hold, and
//! the data path they are installed in. Each operation is all-or-nothing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use pfcp::ie::{CauseValue, NodeId};
use pfcp::msg::{SessionEstablishmentRequest, SessionModificationRequest};
use rand::Rng;

use crate::fastpath::{FastPath, Usage};
use crate::procedures::{self, Created, ModifyEffects, Rejection, Resources};
use crate::rules::Session;

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
}

/// Per-URR reporting state kept beside the counters.
#[derive(Debug, Clone, Default)]
pub(crate) struct UrrState {
    pub(crate) seqn: u32,
    pub(crate) start: u64,
    /// Counts already reported (the data path's counters only grow).
    pub(crate) reported: Usage,
    /// Packets counted at the last poll, to see whether traffic flows.
    pub(crate) seen_packets: u64,
    pub(crate) last_activity: Option<std::time::Instant>,
    pub(crate) next_periodic: Option<std::time::Instant>,
    /// Seconds with traffic since the last report (time thresholds and quotas).
    pub(crate) active_secs: u64,
    pub(crate) last_poll: Option<std::time::Instant>,
    pub(crate) traffic_on: bool,
    pub(crate) quota_reported: bool,
    /// The data path holds a quota for this URR.
    pub(crate) quota_set: bool,
    /// The data path holds an armed volume threshold for this URR.
    pub(crate) threshold_set: bool,
}

pub struct Sessions {
    sessions: HashMap<u64, Arc<Session>>,
    by_node: HashMap<NodeId, HashSet<u64>>,
    /// Boxed, as the data path's table: growing the map moves pointers, not records.
    pub(crate) urr_state: HashMap<(u64, u32), Box<UrrState>>,
    /// Sessions with a URR that report.rs must poll periodically (time triggers, or
    /// volume triggers when the data path does not signal them). The others report on
    /// the data path's signals only: polling a million sessions every half second is
    /// what this set avoids.
    pub(crate) polled: HashSet<u64>,
    pub res: Resources,
    pub fastpath: Box<dyn FastPath>,
    pub max_sessions: usize,
    /// Sessions deleted since the owner last looked (so it can drop their buffers and
    /// report state).
    pub deleted: Vec<u64>,
}

/// Seconds since the UNIX epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

impl Sessions {
    pub fn new(res: Resources, fastpath: Box<dyn FastPath>, max_sessions: usize) -> Self {
        Sessions {
            sessions: HashMap::new(),
            by_node: HashMap::new(),
            urr_state: HashMap::new(),
            polled: HashSet::new(),
            res,
            fastpath,
            max_sessions,
            deleted: Vec::new(),
        }
    }

    /// Size the per-session tables for `n` sessions now (with one URR each), so they
    /// never grow while SMFs wait: doubling a table of a million entries stalls every
    /// request behind it. Untouched room costs address space, not memory.
    pub fn reserve(&mut self, n: usize) {
        self.sessions.reserve(n);
        self.urr_state.reserve(n);
        self.res.teids.reserve(n);
    }

    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    pub fn get(&self, seid: u64) -> Option<&Session> {
        self.sessions.get(&seid).map(|s| &**s)
    }

    pub fn iter(&self) -> impl Iterator<Item = &Session> {
        self.sessions.values().map(|s| &**s)
    }

    /// The session, shared.
    pub fn get_arc(&self, seid: u64) -> Option<Arc<Session>> {
        self.sessions.get(&seid).cloned()
    }

    /// What was counted for a URR since its last report.
    pub fn unreported(&self, seid: u64, urr_id: u32) -> Usage {
        let total = self.fastpath.usage(seid, urr_id);
        match self.urr_state.get(&(seid, urr_id)) {
            Some(st) => total.since(&st.reported),
            None => total,
        }
    }

    /// Sessions of one CP function.
    pub fn of_node(&self, node: &NodeId) -> Vec<u64> {
        self.by_node
            .get(node)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    fn new_seid(&self) -> u64 {
        let mut rng = rand::rng();
        loop {
            let s: u64 = rng.random();
            if s != 0 && !self.sessions.contains_key(&s) {
                return s;
            }
        }
    }

    /// Start measuring new URRs, and give the data path every URR's quota (clause
    /// 5.2.2.2: what is left of the Volume Quota since the last report).
    fn start_urrs(&mut self, s: &Session) {
        let now = unix_now();
        for u in s.urrs.values() {
            let st = self.urr_state.entry((s.up_seid, u.id)).or_insert_with(|| {
                Box::new(UrrState {
                    start: now,
                    ..UrrState::default()
                })
            });
            // A new quota may be reported on again.
            st.quota_reported = false;
            let used = self.fastpath.usage(s.up_seid, u.id);
            let since = match self.urr_state.get(&(s.up_seid, u.id)) {
                Some(st) => used.since(&st.reported),
                None => used,
            };
            let left = crate::report::quota_left(u, &since);
            let threshold = crate::report::threshold_left(u, &since);
            // Only URRs that have or had a quota or threshold cost a table write.
            if let Some(st) = self.urr_state.get_mut(&(s.up_seid, u.id)) {
                if left.is_some() || st.quota_set {
                    st.quota_set = left.is_some();
                    self.fastpath.set_quota(s.up_seid, u.id, left);
                }
                if threshold.is_some() || st.threshold_set {
                    st.threshold_set = threshold.is_some();
                    self.fastpath.set_threshold(s.up_seid, u.id, threshold);
                }
            }
        }
        let signals = self.fastpath.signals_volume();
        if s.urrs
            .values()
            .any(|u| crate::report::needs_polling(u, signals))
        {
            self.polled.insert(s.up_seid);
        } else {
            self.polled.remove(&s.up_seid);
        }
    }

    /// Sessions report.rs polls periodically (see `polled`).
    pub fn polled_seids(&self) -> Vec<u64> {
        self.polled.iter().copied().collect()
    }

    /// Arm a URR's volume threshold again with what is left of it since the last report
    /// (after a report, or after the data path signalled it early: it counts both
    /// directions against the tightest of total, uplink and downlink).
    pub fn rearm_threshold(&mut self, seid: u64, urr_id: u32) {
        let Some(u) = self.sessions.get(&seid).and_then(|s| s.urrs.get(&urr_id)) else {
            return;
        };
        let since = self.unreported(seid, urr_id);
        let left = crate::report::threshold_left(u, &since);
        if let Some(st) = self.urr_state.get_mut(&(seid, urr_id)) {
            if left.is_some() || st.threshold_set {
                st.threshold_set = left.is_some();
                self.fastpath.set_threshold(seid, urr_id, left);
            }
        }
    }

    /// PFCP Session Establishment (clause 6.3.2 / 7.5.2).
    pub fn establish(
        &mut self,
        node: &NodeId,
        req: &SessionEstablishmentRequest,
    ) -> Result<(u64, Created), Rejection> {
        if self.sessions.len() >= self.max_sessions {
            return Err(Rejection::cause(
                CauseValue::NO_RESOURCES_AVAILABLE,
                "session table full",
            ));
        }
        let seid = self.new_seid();
        let built = procedures::establish(&mut self.res, seid, node.clone(), req);
        let (s, created) = match built {
            Ok(x) => x,
            Err(e) => {
                self.res.rollback();
                return Err(e);
            }
        };
        let s = Arc::new(s);
        if let Err(e) = self.fastpath.install(None, &s) {
            self.res.rollback();
            return Err(fastpath_rejection(e));
        }
        self.res.commit();
        self.by_node.entry(node.clone()).or_default().insert(seid);
        self.start_urrs(&s);
        self.sessions.insert(seid, s);
        Ok((seid, created))
    }

    /// PFCP Session Modification (clause 6.3.3 / 7.5.4). Returns the effects and the usage
    /// reports the response carries (queried or removed URRs).
    pub fn modify(
        &mut self,
        seid: u64,
        req: &SessionModificationRequest,
    ) -> Result<(ModifyEffects, Vec<Report>), Rejection> {
        let old = self
            .sessions
            .get(&seid)
            .ok_or_else(|| {
                Rejection::cause(CauseValue::SESSION_CONTEXT_NOT_FOUND, "no such session")
            })?
            .clone();
        let old: &Session = &old;
        let (new, fx) = match procedures::modify(&mut self.res, old, req) {
            Ok(x) => x,
            Err(e) => {
                self.res.rollback();
                return Err(e);
            }
        };
        // Final counts of removed URRs must be read before the data path forgets them.
        let mut reports = Vec::new();
        for u in &fx.removed_urrs {
            reports.push(self.report(seid, *u, ReportReason::Termination));
        }
        let new = Arc::new(new);
        if let Err(e) = self.fastpath.install(Some(old), &new) {
            self.res.rollback();
            return Err(fastpath_rejection(e));
        }
        self.res.commit();
        self.res.release_dropped(old, Some(&new));
        for u in &fx.removed_urrs {
            self.urr_state.remove(&(seid, *u));
        }
        for u in &fx.query_urrs {
            reports.push(self.report(seid, *u, ReportReason::Immediate));
        }
        self.start_urrs(&new);
        self.sessions.insert(seid, new);
        Ok((fx, reports))
    }

    /// Change a session's BAR outside a modification (Update BAR in a Session Report
    /// Response, clause 7.5.9.2): the data path does not read the BAR.
    pub fn update_bar(&mut self, seid: u64, u: &pfcp::msg::UpdateBarReportResponse) {
        let Some(s) = self.sessions.get_mut(&seid) else {
            return;
        };
        let s = Arc::make_mut(s);
        if let Some(b) = s.bars.get_mut(&u.bar_id) {
            if u.downlink_data_notification_delay.is_some() {
                b.downlink_data_notification_delay = u.downlink_data_notification_delay;
            }
            if u.dl_buffering_duration.is_some() {
                b.dl_buffering_duration = u.dl_buffering_duration;
            }
            if let Some(c) = u.dl_buffering_suggested_packet_count {
                b.dl_buffering_suggested_packet_count = Some(c.value);
            }
            if u.suggested_buffering_packets_count.is_some() {
                b.suggested_buffering_packets_count = u.suggested_buffering_packets_count;
            }
        }
    }

    /// A usage report for one URR: what was counted since the last report.
    pub fn report(&mut self, seid: u64, urr_id: u32, reason: ReportReason) -> Report {
        let now = unix_now();
        let total = self.fastpath.usage(seid, urr_id);
        let st = self.urr_state.entry((seid, urr_id)).or_insert_with(|| {
            Box::new(UrrState {
                start: now,
                ..UrrState::default()
            })
        });
        st.seqn = st.seqn.wrapping_add(1);
        let r = Report {
            urr_id,
            seqn: st.seqn - 1,
            reason,
            usage: total.since(&st.reported),
            start: st.start,
            end: now,
        };
        st.reported = total;
        st.start = now;
        st.active_secs = 0;
        let armed = st.threshold_set;
        if armed && reason != ReportReason::Termination {
            self.rearm_threshold(seid, urr_id);
        }
        r
    }

    /// PFCP Session Deletion (clause 6.3.4): remove, with a final report per URR.
    pub fn delete(&mut self, seid: u64) -> Option<(Arc<Session>, Vec<Report>)> {
        let urrs: Vec<u32> = self.sessions.get(&seid)?.urrs.keys().copied().collect();
        let reports = urrs
            .into_iter()
            .map(|u| self.report(seid, u, ReportReason::Termination))
            .collect();
        let s = self.sessions.remove(&seid)?;
        self.polled.remove(&seid);
        self.deleted.push(seid);
        self.fastpath.remove(&s);
        self.res.release_dropped(&s, None);
        for u in s.urrs.keys() {
            self.urr_state.remove(&(seid, *u));
        }
        if let Some(set) = self.by_node.get_mut(&s.cp_node) {
            set.remove(&seid);
            if set.is_empty() {
                self.by_node.remove(&s.cp_node);
            }
        }
        Some((s, reports))
    }

    /// Delete every session of a CP function (association released, peer restarted or
    /// lost: TS 23.527 clause 4.3.2). Returns how many.
    pub fn delete_node(&mut self, node: &NodeId) -> usize {
        let seids = self.of_node(node);
        for s in &seids {
            self.delete(*s);
        }
        seids.len()
    }
}

fn fastpath_rejection(e: crate::fastpath::FastPathError) -> Rejection {
    match e {
        crate::fastpath::FastPathError::Pdr { pdr_id, why } => {
            Rejection::rule(pfcp::ie::FailedRuleId::PDR, pdr_id as u32, why)
        }
        other => Rejection::cause(CauseValue::NO_RESOURCES_AVAILABLE, other.to_string()),
    }
}
