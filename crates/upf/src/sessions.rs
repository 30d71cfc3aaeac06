//! The session table: every PFCP session of the UP function, the resources they hold, and
//! the data path they are installed in. Each operation is all-or-nothing.

use std::collections::HashMap;
use std::sync::Arc;

use crate::seidmap::{SeidHash, SeidMap, SeidSet};

use pfcp::ie::{CauseValue, NodeId};
use pfcp::msg::{SessionEstablishmentRequest, SessionModificationRequest};
use rand::Rng;

use crate::fastpath::{FastPath, FastPathError, Usage};
use crate::pfd::PfdTable;
use crate::procedures::{self, Created, ModifyEffects, Rejection, Resources};
use crate::report::{Report, ReportReason, Reporting};
use crate::rules::Session;

/// The session table: sessions by SEID and by CP function, the resources they hold
/// (TEIDs, UE addresses), the data path they are installed in and their URRs' reporting
/// state.
pub struct Sessions {
    sessions: SeidMap<u64, Arc<Session>>,
    /// Sessions per CP function. A count, not a set of SEIDs: a set was one more
    /// million-entry table to insert into (and to grow, stalling requests) on every
    /// establishment, for the rare release of an association, which scans instead.
    by_node: HashMap<NodeId, usize>,
    reporting: Reporting,
    res: Resources,
    fastpath: Box<dyn FastPath>,
    max_sessions: usize,
    /// Sessions deleted since the owner last looked (so it can drop their buffers).
    deleted: Vec<u64>,
    /// Sessions changed (rules, resources or reporting state) since the state was last
    /// written (state.rs), when it is kept: `None` when not.
    changed: Option<SeidSet>,
    /// Sessions changed since a check in steps began ([`Sessions::watch_begin`]).
    watched: Option<SeidSet>,
}

impl Sessions {
    pub fn new(res: Resources, fastpath: Box<dyn FastPath>, max_sessions: usize) -> Self {
        Sessions {
            sessions: SeidMap::default(),
            by_node: HashMap::new(),
            reporting: Reporting::default(),
            res,
            fastpath,
            max_sessions,
            deleted: Vec::new(),
            changed: None,
            watched: None,
        }
    }

    /// Note changed sessions from now on ([`Sessions::take_changed`]): the state is kept.
    pub fn track_changes(&mut self) {
        self.changed.get_or_insert_with(SeidSet::default);
    }

    /// Whether changes are tracked for a state ([`Sessions::track_changes`]).
    pub fn tracks_changes(&self) -> bool {
        self.changed.is_some()
    }

    /// The sessions changed (or deleted) since the last call.
    pub fn take_changed(&mut self) -> Vec<u64> {
        match &mut self.changed {
            Some(c) => c.drain().collect(),
            None => Vec::new(),
        }
    }

    /// Note a session as changed (its N4 side changed: a report sent or answered).
    pub fn mark_changed(&mut self, seid: u64) {
        if let Some(c) = &mut self.changed {
            c.insert(seid);
        }
        if let Some(w) = &mut self.watched {
            w.insert(seid);
        }
    }

    /// Note the sessions changed from now on, for a check taken in steps.
    pub fn watch_begin(&mut self) {
        self.watched = Some(self.watch_set());
    }

    /// A set for the SEIDs changed during a check, sized for every session there may
    /// be: growing it by doubling held an N4 batch 75 ms at half a million.
    fn watch_set(&self) -> SeidSet {
        let n = self.max_sessions.max(self.sessions.len());
        SeidSet::with_capacity_and_hasher(n, SeidHash::default())
    }

    /// The sessions changed since [`Sessions::watch_begin`]; no longer noted.
    pub fn watch_end(&mut self) -> Vec<u64> {
        self.watched.take().into_iter().flatten().collect()
    }

    /// A session as the state keeps it (None: no such session).
    pub fn save(&self, seid: u64) -> Option<crate::state::SavedSession> {
        let s = self.sessions.get(&seid)?;
        Some(crate::state::SavedSession {
            session: s.clone(),
            urrs: self.reporting.save(&*self.fastpath, s),
            reports: Vec::new(),
        })
    }

    /// Carry `more` into a restored URR's counts (see [`Reporting::carry`]).
    pub fn carry(&mut self, seid: u64, urr_id: u32, more: Usage) {
        if let Some(s) = self.sessions.get(&seid).cloned() {
            self.reporting.carry(&mut *self.fastpath, &s, urr_id, more);
            self.mark_changed(seid);
        }
    }

    /// Every SEID.
    pub fn seids(&self) -> Vec<u64> {
        self.sessions.keys().copied().collect()
    }

    /// Take back a session kept in the state (after a restart): its TEIDs and UE
    /// addresses claimed, its rules installed in the data path, its URRs' reporting
    /// state restored with `counted` (see [`Reporting::restore`]). An error names what
    /// did not fit; the caller then starts clean (nothing half-applied).
    pub fn restore(
        &mut self,
        saved: &crate::state::SavedSession,
        counted: impl Fn(&crate::state::SavedUrr) -> crate::report::Counted,
    ) -> Result<(), String> {
        let s = &saved.session;
        let seid = s.up_seid;
        if seid == 0 || self.sessions.contains_key(&seid) {
            return Err(format!("session {seid:#x} twice, or SEID 0"));
        }
        if self.sessions.len() >= self.max_sessions {
            return Err(format!(
                "more sessions than limits.max_sessions ({})",
                self.max_sessions
            ));
        }
        for t in &s.teids {
            if !self.res.claim_teid(*t) {
                self.res.rollback();
                return Err(format!(
                    "session {seid:#x}: TEID {t:#x} taken or outside gtpu.teid_range"
                ));
            }
        }
        for a in &s.allocated_ue_ips {
            if !self.res.claim_ue_ip(*a) {
                self.res.rollback();
                return Err(format!(
                    "session {seid:#x}: UE address {a} taken or in no pool of ue_pools"
                ));
            }
        }
        let arc = saved.session.clone();
        if let Err(e) = self.fastpath.install(None, &arc) {
            self.res.rollback();
            return Err(format!("session {seid:#x}: {e}"));
        }
        self.res.commit();
        self.count_in(&s.cp_node);
        self.reporting
            .restore(&mut *self.fastpath, &arc, &saved.urrs, counted);
        self.sessions.insert(seid, arc);
        Ok(())
    }

    /// Size the per-session tables for `n` sessions now (with one URR each), so they
    /// never grow while SMFs wait: doubling a table of a million entries stalls every
    /// request behind it. Untouched room costs address space, not memory.
    pub fn reserve(&mut self, n: usize) {
        self.sessions.reserve(n);
        self.reporting.reserve(n);
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
        self.reporting.unreported(&*self.fastpath, seid, urr_id)
    }

    /// A URR's measurement now, for the API (see [`Reporting::measurement`]).
    pub fn measurement(&self, seid: u64, urr_id: u32) -> crate::report::Measurement {
        self.reporting.measurement(&*self.fastpath, seid, urr_id)
    }

    /// Every SEID, without reading the sessions (the API pages through these).
    pub fn seid_iter(&self) -> impl Iterator<Item = u64> + '_ {
        self.sessions.keys().copied()
    }

    /// The session the data path finds under local TEID `teid` (`None`: the data path
    /// cannot say; see [`FastPath::session_by_teid`]).
    pub fn find_by_teid(&self, teid: u32) -> Option<Option<u64>> {
        self.fastpath.session_by_teid(teid)
    }

    /// The session downlink packets to `a` go to, as the data path finds it.
    pub fn find_by_ue(&self, a: std::net::IpAddr) -> Option<Option<u64>> {
        self.fastpath.session_by_ue(a)
    }

    /// How many sessions CP function `node` has.
    pub fn count_of_node(&self, node: &NodeId) -> usize {
        self.by_node.get(node).copied().unwrap_or(0)
    }

    /// Network Instances requests named that the configuration does not (see
    /// [`Resources::take_unknown_network_instances`]).
    pub fn take_unknown_network_instances(&mut self) -> Vec<crate::rules::NetworkInstance> {
        self.res.take_unknown_network_instances()
    }

    /// What requests were accepted with only because not strict (see
    /// [`crate::procedures::Resources::take_tolerated`]).
    pub fn take_tolerated(&mut self) -> Vec<(crate::procedures::Tolerated, String)> {
        self.res.take_tolerated()
    }

    /// The TEIDs and UE addresses the sessions hold.
    pub fn resources(&self) -> &Resources {
        &self.res
    }

    /// The applications PDRs may name and their PFDs (pfd.rs).
    pub fn pfds(&self) -> &Arc<PfdTable> {
        &self.res.pfds
    }

    /// Replace the PFD table (PFD Management, or the configuration at start): the data
    /// path takes it first (`changed`: the applications whose PFDs changed, see
    /// [`FastPath::set_pfds`]); on its error nothing changed.
    pub fn set_pfds(&mut self, pfds: PfdTable, changed: &[String]) -> Result<(), FastPathError> {
        let pfds = Arc::new(pfds);
        self.fastpath.set_pfds(&pfds, changed)?;
        self.res.pfds = pfds;
        Ok(())
    }

    /// The sessions deleted since the last call (so their buffers can be dropped).
    pub fn take_deleted(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.deleted)
    }

    /// Sessions of one CP function (a scan of every session: for releases and Session
    /// Set Deletions, which are rare).
    pub fn of_node(&self, node: &NodeId) -> Vec<u64> {
        if !self.by_node.contains_key(node) {
            return Vec::new();
        }
        self.sessions
            .iter()
            .filter(|(_, s)| s.cp_node == *node)
            .map(|(seid, _)| *seid)
            .collect()
    }

    /// One more session of `node`.
    fn count_in(&mut self, node: &NodeId) {
        match self.by_node.get_mut(node) {
            Some(n) => *n += 1,
            None => {
                self.by_node.insert(node.clone(), 1);
            }
        }
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

    /// Sessions polled periodically for their URRs (see [`Reporting::poll`]).
    pub fn polled_seids(&self) -> Vec<u64> {
        self.reporting.polled_seids()
    }

    /// Poll the URRs of `seids` (sessions the data path signalled, or the periodic set):
    /// the reports due by session, and the sessions `may_report` refused (to poll again).
    pub fn poll_reports(
        &mut self,
        seids: &[u64],
        now: std::time::Instant,
        may_report: impl FnMut(u64) -> bool,
    ) -> (Vec<(u64, Vec<Report>)>, Vec<u64>) {
        let sessions = &self.sessions;
        let (due, deferred) = self.reporting.poll(
            &mut *self.fastpath,
            |seid| sessions.get(&seid).cloned(),
            seids,
            now,
            may_report,
        );
        for (seid, _) in &due {
            self.mark_changed(*seid);
        }
        (due, deferred)
    }

    /// The data path classified a new flow of session `seid` as application `app`: the
    /// START reports with Application Detection Information due (see
    /// [`Reporting::app_start`]); none for an unknown session.
    pub fn app_start(
        &mut self,
        seid: u64,
        app: &str,
        flow: crate::fastpath::AppFlow,
    ) -> Vec<Report> {
        let Some(s) = self.sessions.get(&seid).cloned() else {
            return Vec::new();
        };
        let reports = self.reporting.app_start(&mut *self.fastpath, &s, app, flow);
        if !reports.is_empty() {
            self.mark_changed(seid);
        }
        reports
    }

    /// Whether application flows wait for their stop ([`Sessions::poll_app_flows`]).
    pub fn has_app_flows(&self) -> bool {
        self.reporting.has_app_flows()
    }

    /// The sessions with application flows waiting for their stop.
    pub fn app_flow_seids(&self) -> Vec<u64> {
        self.reporting.app_flow_seids()
    }

    /// The STOPT reports of application flows idle for `stop_after` (see
    /// [`Reporting::poll_app_flows`]).
    pub fn poll_app_flows(
        &mut self,
        stop_after: std::time::Duration,
        may_report: impl FnMut(u64) -> bool,
    ) -> Vec<(u64, Vec<Report>)> {
        let sessions = &self.sessions;
        let due = self.reporting.poll_app_flows(
            &mut *self.fastpath,
            |seid| sessions.get(&seid).cloned(),
            stop_after,
            may_report,
        );
        for (seid, _) in &due {
            self.mark_changed(*seid);
        }
        due
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
        self.count_in(node);
        self.reporting.start(&mut *self.fastpath, &s);
        self.sessions.insert(seid, s);
        self.mark_changed(seid);
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
            reports.extend(self.report(old, *u, ReportReason::Termination));
        }
        let new = Arc::new(new);
        if let Err(e) = self.fastpath.install(Some(old), &new) {
            self.res.rollback();
            return Err(fastpath_rejection(e));
        }
        self.res.commit();
        self.res.release_dropped(old, Some(&new));
        for u in &fx.removed_urrs {
            self.reporting.forget(seid, *u);
        }
        for u in &fx.query_urrs {
            reports.extend(self.report(&new, *u, ReportReason::Immediate));
        }
        self.reporting.start(&mut *self.fastpath, &new);
        self.sessions.insert(seid, new);
        self.mark_changed(seid);
        Ok((fx, reports))
    }

    /// Change a session's BAR outside a modification (Update BAR in a Session Report
    /// Response, clause 7.5.9.2): the data path does not read the BAR.
    pub fn update_bar(&mut self, seid: u64, u: &pfcp::msg::UpdateBarReportResponse) {
        if !self.sessions.contains_key(&seid) {
            return;
        }
        self.mark_changed(seid);
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

    /// A usage report for URR `urr_id` of session `s`: what was counted since the last
    /// report (None: the session has no such URR).
    fn report(&mut self, s: &Session, urr_id: u32, reason: ReportReason) -> Option<Report> {
        let u = s.urrs.get(&urr_id)?;
        Some(
            self.reporting
                .report(&mut *self.fastpath, s.up_seid, u, reason),
        )
    }

    /// PFCP Session Deletion (clause 6.3.4): remove, with a final report per URR.
    pub fn delete(&mut self, seid: u64) -> Option<(Arc<Session>, Vec<Report>)> {
        let s = self.sessions.remove(&seid)?;
        let reports = s
            .urrs
            .keys()
            .filter_map(|u| self.report(&s, *u, ReportReason::Termination))
            .collect();
        self.reporting.forget_session(&s);
        self.deleted.push(seid);
        self.mark_changed(seid);
        self.fastpath.remove(&s);
        self.res.release_dropped(&s, None);
        if let Some(n) = self.by_node.get_mut(&s.cp_node) {
            *n -= 1;
            if *n == 0 {
                self.by_node.remove(&s.cp_node);
            }
        }
        Some((s, reports))
    }

    /// Whether the books agree (tests, fuzzing and `/check`): every TEID and allocated
    /// UE address is held by one session and the allocators hold exactly those; every
    /// F-TEID a PDR uses is one its session holds; every CP function's count of sessions
    /// is right; the TEID allocator's slot books are right. O(sessions), in one go: see
    /// [`CheckWalk`] for the same in steps.
    pub fn check(&self) -> Result<(), String> {
        let mut w = self.check_walk();
        self.check_read(&mut w, usize::MAX);
        self.check_slots(&mut w, usize::MAX);
        self.check_judge(&w)
    }

    /// A check of the books in steps, between which sessions may change: begin it
    /// with [`Sessions::watch_begin`], then [`Sessions::check_step`] until it says
    /// done, then [`Sessions::check_end`].
    pub fn check_walk(&self) -> CheckWalk {
        let left = self.seids();
        // Sized up front for every session there may be by the end (those established
        // meanwhile are counted too): growing a map of hundreds of thousands by
        // doubling took one step 120 ms.
        let n = self.max_sessions.max(left.len());
        CheckWalk {
            read: SeidMap::with_capacity_and_hasher(n, SeidHash::default()),
            left,
            recount: Vec::new(),
            teids: HashMap::with_capacity_and_hasher(
                n.max(self.res.teids.in_use()),
                SeidHash::default(),
            ),
            ues: HashMap::with_capacity_and_hasher(
                n.max(self.res.ue_ips.in_use()),
                SeidHash::default(),
            ),
            twice: 0,
            per_node: HashMap::new(),
            slot: 0,
            error: None,
            end_recount: CHECK_END_RECOUNT,
            recounts: 0,
            gave_up: false,
        }
    }

    /// About `n` more of the walk: the sessions, then those changed meanwhile counted
    /// again (until few are left to the end), then the TEID allocator's slot books;
    /// whether any is left.
    pub fn check_step(&mut self, w: &mut CheckWalk, n: usize) -> bool {
        let mut budget = n;
        loop {
            budget = self.check_read(w, budget);
            if w.error.is_some() {
                return false;
            }
            if budget == 0 {
                return true;
            }
            // What changed since it was read (or since it was last counted again) is
            // counted again, a batch at a time, until the end can take the rest at once.
            // Should N4 change sessions faster than the walk counts them again, it gives
            // up rather than end with a long step.
            let watched = self.watched.as_ref().map_or(0, |x| x.len());
            if watched <= w.end_recount {
                break;
            }
            if w.recounts >= CHECK_RECOUNTS {
                w.gave_up = true;
                return false;
            }
            w.recounts += 1;
            let fresh = self.watch_set();
            w.recount = self.watched.replace(fresh).into_iter().flatten().collect();
        }
        self.check_slots(w, budget);
        w.error.is_none() && w.slot < self.res.teids.slots()
    }

    /// Read up to `n` of the sessions not read yet and of those to count again; the
    /// budget left. A session is checked on its own as it is now (its TEIDs in use,
    /// its PDRs' F-TEIDs its own) and counted into the walk's books.
    pub fn check_read(&self, w: &mut CheckWalk, n: usize) -> usize {
        let mut budget = n;
        while budget > 0 && w.error.is_none() {
            if let Some(seid) = w.left.pop() {
                if let Some(s) = self.sessions.get(&seid) {
                    self.check_one(w, s.clone());
                }
            } else if let Some(seid) = w.recount.pop() {
                self.check_again(w, seid);
            } else {
                break;
            }
            budget -= 1;
        }
        budget
    }

    /// Up to `n` slots of the TEID allocator's books (each slot's last TEID is one of
    /// that slot, at every moment); the budget left.
    fn check_slots(&self, w: &mut CheckWalk, n: usize) -> usize {
        if w.error.is_some() {
            return n;
        }
        match self.res.teids.check_slots(w.slot, n) {
            Ok((next, left)) => {
                w.slot = next;
                left
            }
            Err(e) => {
                w.error = Some(e);
                n
            }
        }
    }

    /// Session `seid` counted out as it was read and in as it is now.
    fn check_again(&self, w: &mut CheckWalk, seid: u64) {
        if let Some(old) = w.read.remove(&seid) {
            w.count(&old, -1);
        }
        if let Some(s) = self.sessions.get(&seid) {
            self.check_one(w, s.clone());
        }
    }

    /// Session `s` checked on its own now, and counted into `w`.
    fn check_one(&self, w: &mut CheckWalk, s: Arc<Session>) {
        let seid = s.up_seid;
        for t in &s.teids {
            if !self.res.teids.is_used(*t) {
                w.error.get_or_insert(format!(
                    "TEID {t:#x} of session {seid:#x} is free in the allocator"
                ));
            }
        }
        for p in s.pdrs.values() {
            if let Some(f) = s.effective_pdi(p).local_fteid {
                if !s.teids.contains(&f.teid) {
                    w.error.get_or_insert(format!(
                        "PDR {} of session {seid:#x} uses TEID {:#x}, which the session does not hold",
                        p.id, f.teid
                    ));
                }
            }
        }
        w.count(&s, 1);
        w.read.insert(seid, s);
    }

    /// The end of walk `w`, in one go: the sessions changed since they were read
    /// counted again, then the verdict ([`Sessions::check_judge`]) on the books of
    /// this moment.
    /// The walk is left to the caller to drop: it holds a reference to every session
    /// read (at a million, dropping it takes tens of milliseconds).
    pub fn check_end(&mut self, w: &mut CheckWalk) -> Result<(), String> {
        for seid in self.watch_end() {
            self.check_again(w, seid);
        }
        self.check_judge(w)
    }

    /// The verdict on walk `w`'s books against the allocators and the counts per CP
    /// function as they are now. O(CP functions), but for naming a TEID or UE address
    /// held twice.
    pub fn check_judge(&self, w: &CheckWalk) -> Result<(), String> {
        if let Some(e) = &w.error {
            return Err(e.clone());
        }
        if w.twice > 0 {
            if let Some((t, (_, seid))) = w.teids.iter().find(|(_, (n, _))| *n > 1) {
                return Err(format!("TEID {t:#x} held twice (session {seid:#x})"));
            }
            if let Some((a, (_, seid))) = w.ues.iter().find(|(_, (n, _))| *n > 1) {
                return Err(format!(
                    "UE address {a} allocated twice (session {seid:#x})"
                ));
            }
        }
        if w.teids.len() != self.res.teids.in_use() {
            return Err(format!(
                "the allocator has {} TEIDs in use, the sessions hold {}",
                self.res.teids.in_use(),
                w.teids.len()
            ));
        }
        if w.ues.len() != self.res.ue_ips.in_use() {
            return Err(format!(
                "the pools have {} UE addresses in use, the sessions hold {}",
                self.res.ue_ips.in_use(),
                w.ues.len()
            ));
        }
        if w.per_node.len() != self.by_node.len()
            || w.per_node
                .iter()
                .any(|(node, n)| self.by_node.get(node) != Some(n))
        {
            return Err(format!(
                "sessions counted by CP function {:?}, held {:?}",
                self.by_node, w.per_node
            ));
        }
        if w.slot < self.res.teids.slots() {
            return Err(format!(
                "the walk read {} of the TEID allocator's {} slots",
                w.slot,
                self.res.teids.slots()
            ));
        }
        Ok(())
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

/// Sessions changed during a check that its end counts again at once; more are counted
/// again in steps before it, in at most [`CHECK_RECOUNTS`] batches (then it gives up).
const CHECK_END_RECOUNT: usize = 1024;
const CHECK_RECOUNTS: u32 = 64;

/// A check of the session books taken in steps ([`Sessions::check_walk`]). Sessions
/// read at different moments may have passed a TEID or a UE address on between them,
/// so the walk counts holders, keeps each session as it read it, and counts the
/// sessions changed since again (in steps, the last few at its end): the books it
/// judges are those of its last moment.
pub struct CheckWalk {
    /// SEIDs not read yet.
    left: Vec<u64>,
    /// SEIDs changed since they were read, to count again.
    recount: Vec<u64>,
    /// Each session read, as it was then.
    read: SeidMap<u64, Arc<Session>>,
    /// TEID: how many sessions read hold it, and one of them.
    teids: HashMap<u32, (usize, u64), SeidHash>,
    /// Allocated UE address: how many sessions read hold it, and one of them.
    ues: HashMap<std::net::IpAddr, (usize, u64), SeidHash>,
    /// TEIDs and UE addresses held more than once now.
    twice: usize,
    per_node: HashMap<NodeId, usize>,
    /// The TEID allocator's next slot to check.
    slot: usize,
    /// A session that was wrong on its own when read, or a slot book.
    error: Option<String>,
    /// Changed sessions its end counts again at once ([`CHECK_END_RECOUNT`]).
    end_recount: usize,
    /// Batches of changed sessions counted again so far.
    recounts: u32,
    /// N4 changed sessions faster than the walk could count them again.
    gave_up: bool,
}

impl CheckWalk {
    /// Count `s`'s TEIDs, UE addresses and CP function in (`by` 1) or out (-1).
    fn count(&mut self, s: &Session, by: isize) {
        fn add<K: std::hash::Hash + Eq + Copy>(
            m: &mut HashMap<K, (usize, u64), SeidHash>,
            twice: &mut usize,
            k: K,
            seid: u64,
            by: isize,
        ) {
            let e = m.entry(k).or_insert((0, seid));
            let before = e.0;
            e.0 = e.0.saturating_add_signed(by);
            if by > 0 {
                e.1 = seid;
            }
            match (before > 1, e.0 > 1) {
                (false, true) => *twice += 1,
                (true, false) => *twice -= 1,
                _ => {}
            }
            if e.0 == 0 {
                m.remove(&k);
            }
        }
        for t in &s.teids {
            add(&mut self.teids, &mut self.twice, *t, s.up_seid, by);
        }
        for a in &s.allocated_ue_ips {
            add(&mut self.ues, &mut self.twice, *a, s.up_seid, by);
        }
        // Looked up before inserting: an FQDN Node ID is cloned once per CP function.
        let n = match self.per_node.get_mut(&s.cp_node) {
            Some(n) => n,
            None => self.per_node.entry(s.cp_node.clone()).or_default(),
        };
        *n = n.saturating_add_signed(by);
        if *n == 0 {
            self.per_node.remove(&s.cp_node);
        }
    }

    /// Count again in steps while more than `n` sessions changed (tests: a small `n`
    /// makes a few changes take that path).
    pub fn recount_in_steps_above(mut self, n: usize) -> Self {
        self.end_recount = n;
        self
    }

    /// Batches of changed sessions counted again in steps so far.
    pub fn recounted(&self) -> u32 {
        self.recounts
    }

    /// Whether it gave up: sessions changed faster than it could count them again (no
    /// verdict; the books were not found wrong).
    pub fn gave_up(&self) -> bool {
        self.gave_up
    }

    /// The SEIDs not read yet (in the order they will not be read: from the end).
    pub fn seids_left(&self) -> &[u64] {
        &self.left
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
