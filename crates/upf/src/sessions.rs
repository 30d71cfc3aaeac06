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

/// Why a report is made, for the Usage Report Trigger (clause 8.2.41).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportReason {
    /// The session (or URR) is deleted: TERMR.
    Termination,
    /// The CP function asked (Query URR): IMMER.
    Immediate,
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
struct UrrState {
    seqn: u32,
    start: u64,
    /// Counts already reported (the data path's counters only grow).
    reported: Usage,
}

pub struct Sessions {
    sessions: HashMap<u64, Arc<Session>>,
    by_node: HashMap<NodeId, HashSet<u64>>,
    urr_state: HashMap<(u64, u32), UrrState>,
    pub res: Resources,
    pub fastpath: Box<dyn FastPath>,
    pub max_sessions: usize,
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
            res,
            fastpath,
            max_sessions,
        }
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

    fn start_urrs(&mut self, s: &Session) {
        let now = unix_now();
        for id in s.urrs.keys() {
            self.urr_state.entry((s.up_seid, *id)).or_insert(UrrState {
                start: now,
                ..UrrState::default()
            });
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

    /// A usage report for one URR: what was counted since the last report.
    pub fn report(&mut self, seid: u64, urr_id: u32, reason: ReportReason) -> Report {
        let now = unix_now();
        let total = self.fastpath.usage(seid, urr_id);
        let st = self.urr_state.entry((seid, urr_id)).or_insert(UrrState {
            start: now,
            ..UrrState::default()
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
        crate::fastpath::FastPathError::Conflict { pdr_id, why } => {
            Rejection::rule(pfcp::ie::FailedRuleId::PDR, pdr_id as u32, why)
        }
        other => Rejection::cause(CauseValue::NO_RESOURCES_AVAILABLE, other.to_string()),
    }
}
