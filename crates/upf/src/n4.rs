//! N4 (Sx) node procedures, TS 29.244 clause 6, without I/O: datagrams in, datagrams out,
//! timers driven by the caller. Associations (set up by either side), heartbeats with
//! T1/N1 retransmission and peer-loss and peer-restart detection (TS 23.527), the
//! duplicate-request response cache (clause 6.4), and dispatch of session requests to
//! [`Sessions`]. Every request gets a response unless the specification says to discard.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant, SystemTime};

use ipnet::IpNet;
use pfcp::header::{Header, HeaderRepr};
use pfcp::ie::{
    pfcp_association_release_request, types, CauseValue, FSeid, Flags, GprsTimer, NodeId,
    UeIpAddress, VolumeMeasurement,
};
use pfcp::message::message_type as mt;
use pfcp::msg;

use crate::load::{Load, LoadControl};
use crate::procedures::{Created, Rejection};
use crate::qos_monitoring::QosMonitor;
use crate::report::Report;
use crate::rules::UeIp;
use crate::sessions::Sessions;
use crate::state::{Record, Saved, SavedAssociation, SavedReport, SavedResponse};

/// The PFCP port (TS 29.244 clause 7.2): where requests go.
pub const PFCP_PORT: u16 = 8805;

/// Unanswered Session Report Requests allowed per association (see [`N4::can_report`]).
pub const MAX_OUTSTANDING_REPORTS: usize = 64;

/// Seconds between 1900 (NTP era 0) and 1970.
pub const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

pub fn to_ntp(unix: u64) -> u32 {
    (unix + NTP_UNIX_OFFSET) as u32
}

/// UNIX seconds of NTP seconds, [`to_ntp`] undone: era 0 ends in 2036, and a value with
/// the top bit clear is taken as past that wrap (era 1, RFC 5905 as TS 29.244 clause
/// 8.2.65 points to).
pub fn from_ntp(ntp: u32) -> u64 {
    let era = if ntp & 0x8000_0000 != 0 {
        0
    } else {
        1u64 << 32
    };
    u64::from(ntp) + era - NTP_UNIX_OFFSET
}

/// The N4 node's configuration.
#[derive(Debug, Clone)]
pub struct N4Config {
    pub node_id: NodeId,
    /// The address in the UP F-SEID of session responses.
    pub addr: IpAddr,
    /// When this UP function started, in NTP seconds (clause 8.2.65).
    pub recovery_time_stamp: u32,
    /// UP Function Features advertised in association setup (clause 8.2.25).
    pub features: Flags,
    /// CP functions allowed to associate (source address prefixes); empty = any.
    pub allowed_peers: Vec<IpNet>,
    /// CP functions this UP function asks to associate with (clause 6.2.6.2).
    pub smf_peers: Vec<SocketAddr>,
    pub heartbeat_interval: Duration,
    /// Retransmission timer and count of PFCP requests (clause 6.4).
    pub t1: Duration,
    pub n1: u32,
    /// How long a response is kept for a retransmitted request, and at most how many.
    pub cache_ttl: Duration,
    pub cache_max: usize,
    /// Period offered to CP functions for a graceful release (clause 6.2.8.2).
    pub graceful_release_period: Duration,
    /// Strict TS 29.244 / TS 23.527 reading where real CP functions deviate
    /// (docs/interop.md, "Deliberate differences"). Here: a Recovery Time Stamp in a
    /// heartbeat that differs from the association's is a restart of the CP function,
    /// and its sessions are deleted. Not strict (the default): such a change is counted
    /// and reported once per association, and a restart is what a new Association Setup
    /// Request says.
    pub strict: bool,
}

/// A datagram to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Out {
    pub to: SocketAddr,
    pub data: Vec<u8>,
}

/// Things the rest of the UP function acts on.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    AssociationUp(NodeId),
    /// The association ended; `sessions` of it were deleted.
    AssociationDown {
        node: NodeId,
        reason: &'static str,
        sessions: usize,
    },
    /// The CP function restarted (new Recovery Time Stamp): its sessions were deleted.
    PeerRestarted {
        node: NodeId,
        sessions: usize,
    },
    /// A heartbeat of the CP function carried another Recovery Time Stamp than its
    /// association (OAI's SMF sends the current time in each): its sessions were kept
    /// (not [`N4Config::strict`]). Once per association; [`Stats::recovery_time_stamp_changes`]
    /// counts them all.
    RecoveryTimeStampChanged {
        node: NodeId,
        association: u32,
        heartbeat: u32,
    },
    /// Send End Markers on the old path of FAR `far_id` (clause 5.9).
    EndMarkers {
        seid: u64,
        far_id: u32,
        old: pfcp::ie::OuterHeaderCreation,
    },
    /// Drop the packets buffered for a session (DROBU).
    DropBuffered {
        seid: u64,
    },
    /// A session was established.
    Established {
        seid: u64,
    },
    /// A session's rules changed (a Session Modification was accepted).
    Modified {
        seid: u64,
    },
    /// A session is gone (deleted, or its CP function released, restarted, lost).
    Deleted {
        seid: u64,
    },
    /// The CP function answered a Session Report Request.
    ReportAnswered {
        seid: u64,
        cause: CauseValue,
    },
    /// A CP function named a Network Instance the configuration does not (accepted: not
    /// [`crate::procedures::Resources::strict`]). Once per name;
    /// [`Stats::unknown_network_instances`] counts the requests.
    UnknownNetworkInstance {
        peer: SocketAddr,
        name: String,
    },
    /// A CP function sent what only the non-strict reading accepts
    /// ([`crate::procedures::Tolerated`]). Once per kind and peer address;
    /// [`Stats::tolerated`] counts the requests. `detail` names the first rule.
    Tolerated {
        peer: SocketAddr,
        what: crate::procedures::Tolerated,
        detail: String,
    },
    /// PFD Management changed the PFDs (the applications whose PFDs changed; the data
    /// path has them).
    PfdsChanged {
        peer: SocketAddr,
        applications: Vec<String>,
    },
    /// A request was refused: who sent it, what it was, and why.
    Rejected {
        peer: SocketAddr,
        message_type: u8,
        reason: String,
    },
}

/// An association as [`N4::association_info`] shows it.
#[derive(Debug, Clone)]
pub struct AssociationInfo {
    pub node_id: NodeId,
    /// Where requests to the CP function go.
    pub address: SocketAddr,
    /// The CP function's Recovery Time Stamp (NTP seconds).
    pub recovery_time_stamp: u32,
    /// This UP function asked it to release (SIGINT, or SIGTERM without state).
    pub releasing: bool,
    /// A Heartbeat Request to it is unanswered.
    pub heartbeat_pending: bool,
    pub sessions: usize,
}

/// Counters for metrics.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub received: u64,
    pub malformed: u64,
    pub duplicates: u64,
    pub discarded: u64,
    pub requests: HashMap<u8, u64>,
    pub rejected: HashMap<u8, u64>,
    pub timeouts: u64,
    /// Heartbeats whose Recovery Time Stamp differed from the association's and were not
    /// taken as a restart (see [`N4Config::strict`]).
    pub recovery_time_stamp_changes: u64,
    /// Session requests that named a Network Instance the configuration does not.
    pub unknown_network_instances: u64,
    /// Session requests accepted with a deviation only the non-strict reading takes,
    /// by kind (a request with several of one kind counts once).
    pub tolerated: std::collections::BTreeMap<crate::procedures::Tolerated, u64>,
    /// Session Establishment Requests refused with Cause 74 while overloaded.
    pub congestion_rejections: u64,
    /// Session Report Requests sent (not counting retransmissions), by the Report Type
    /// bits they carry (clause 8.2.21: index 0 is DLDR, 1 USAR, ...).
    pub reports_sent: [u64; 8],
    /// Application flows whose START was not reported: their CP function had
    /// MAX_OUTSTANDING_REPORTS unanswered reports.
    pub app_starts_unreported: u64,
    /// Answers to QoS monitoring packets read (clause 5.24.2), and those on a TEID no
    /// session has.
    pub qos_answers: u64,
    pub qos_answers_unmatched: u64,
}

#[derive(Debug, Clone)]
struct Association {
    /// Where requests to the CP function go: the source of its Association Setup, or
    /// port 8805 of its address once it sent a request from there (clause 7.2: requests
    /// go to 8805; OAI's SMF sends some from an ephemeral port).
    addr: SocketAddr,
    recovery_time_stamp: u32,
    /// A changed Recovery Time Stamp was reported for this association already.
    rts_change_reported: bool,
    cp_features: Option<Flags>,
    next_heartbeat: Instant,
    heartbeat_pending: bool,
    /// Set when this UP function asked the CP function to release (SARR).
    release_deadline: Option<Instant>,
    /// GTP-U path QoS monitoring the CP function asked for (clause 5.24.3: Association
    /// Setup and Update Requests).
    path_qos: Vec<msg::GtpuPathQosControlInformation>,
}

#[derive(Debug, Clone)]
enum Pending {
    AssociationSetup(SocketAddr),
    Heartbeat(NodeId),
    AssociationUpdate(NodeId),
    SessionReport(u64),
    NodeReport(NodeId),
}

#[derive(Debug, Clone)]
struct Outstanding {
    to: SocketAddr,
    data: Vec<u8>,
    next_retry: Instant,
    tries: u32,
    what: Pending,
}

/// Responses kept for retransmitted requests (clause 6.4), bounded in time and count.
#[derive(Debug, Default)]
struct ResponseCache {
    map: HashMap<(SocketAddr, u32), Vec<u8>>,
    order: VecDeque<(Instant, (SocketAddr, u32))>,
}

impl ResponseCache {
    fn expire(&mut self, now: Instant, ttl: Duration, max: usize) {
        while let Some((t, k)) = self.order.front() {
            if now.duration_since(*t) < ttl && self.map.len() <= max {
                break;
            }
            self.map.remove(k);
            self.order.pop_front();
        }
    }
}

/// What a snapshot taken in steps has still to read ([`N4::save_head`]).
#[derive(Debug)]
pub struct ToSave {
    responses: std::vec::IntoIter<(Instant, (SocketAddr, u32))>,
    seids: std::vec::IntoIter<u64>,
}

impl ToSave {
    /// Responses and sessions left.
    pub fn len(&self) -> usize {
        self.responses.len() + self.seids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// (responses, sessions) left.
    pub fn counts(&self) -> (usize, usize) {
        (self.responses.len(), self.seids.len())
    }

    /// The sessions left, in the order they will be read.
    pub fn seids_left(&self) -> &[u64] {
        self.seids.as_slice()
    }
}

/// Responses and sessions read at a time by [`N4::save_all`].
const SAVE_GROUP: usize = 64;

/// The N4 side of the UP function.
pub struct N4 {
    cfg: N4Config,
    sessions: Sessions,
    assocs: HashMap<NodeId, Association>,
    by_addr: HashMap<IpAddr, NodeId>,
    cache: ResponseCache,
    /// Responses sent since the state last took them ([`N4::take_changes`]); kept only
    /// while the sessions' changes are tracked for a state.
    unsaved_responses: Vec<SavedResponse>,
    outstanding: HashMap<u32, Outstanding>,
    setup_retry: HashMap<SocketAddr, Instant>,
    /// Unanswered Session Report Requests per CP function address.
    reports_pending: HashMap<SocketAddr, usize>,
    /// Sessions with usage reports due that their CP function had no room for yet:
    /// polled again at the next poll.
    report_retry: Vec<u64>,
    next_seq: u32,
    stats: Stats,
    events: Vec<Event>,
    /// Unknown Network Instances reported already (at most [`REPORTED_NAMES`]).
    reported_names: std::collections::HashSet<String>,
    /// (peer address, kind) of the deviations reported already (at most
    /// [`REPORTED_NAMES`]).
    reported_tolerated: std::collections::HashSet<(IpAddr, crate::procedures::Tolerated)>,
    load: LoadControl,
    /// The time of the datagram being handled (for the overload report's validity).
    now: Instant,
    /// The associations and sequence number as last written to the state (state.rs).
    saved_assocs: Vec<SavedAssociation>,
    saved_seq: u32,
    /// The PFD table as last written to the state (None: not yet).
    saved_pfds: Option<std::sync::Arc<crate::pfd::PfdTable>>,
    /// A flow of an application idle this long has stopped (STOPT).
    app_stop_after: Duration,
    /// When the application flows are next looked at (once a second).
    next_app_poll: Option<Instant>,
    /// The QoS flows the sessions' SRRs monitor (crate::qos_monitoring).
    qos: QosMonitor,
    /// Moves whenever an association's GTP-U path QoS monitoring may have changed; the
    /// one last written to the state.
    path_qos_generation: u64,
    saved_path_qos_generation: u64,
}

/// Now, in milliseconds since the UNIX epoch (the saved responses' clock: it goes on
/// across a restart, which Instant does not).
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// How often started application flows are looked at for their stop.
const APP_POLL: Duration = Duration::from_secs(1);

/// Session `seid` as the state keeps it, with its unanswered reports (taken from
/// `reports`): its records ([`Record::of_session`]); None: no such session.
fn session_record(
    sessions: &Sessions,
    reports: &mut HashMap<u64, Vec<SavedReport>>,
    seid: u64,
) -> Option<Vec<Record>> {
    let mut s = sessions.save(seid)?;
    s.reports = reports.remove(&seid).unwrap_or_default();
    Some(Record::of_session(s))
}

/// Unknown Network Instance names reported one by one; past that, only counted.
const REPORTED_NAMES: usize = 256;

fn node_header(t: u8, seq: u32) -> HeaderRepr {
    HeaderRepr::node(t, seq)
}

impl N4 {
    pub fn new(mut cfg: N4Config, sessions: Sessions) -> Self {
        // PFD Management is N4's, whatever the data path: always offered.
        cfg.features.set(pfcp::ie::up_function_features::PFDM, true);
        let cfg_rts = cfg.recovery_time_stamp;
        // Room for every response the cache may hold, now: half a million responses'
        // table doubling stalled the requests behind it (issue 28).
        let mut cache = ResponseCache::default();
        let room = cfg.cache_max.min(1 << 20);
        cache.map.reserve(room);
        cache.order.reserve(room);
        N4 {
            cfg,
            sessions,
            assocs: HashMap::new(),
            by_addr: HashMap::new(),
            cache,
            unsaved_responses: Vec::new(),
            outstanding: HashMap::new(),
            setup_retry: HashMap::new(),
            reports_pending: HashMap::new(),
            report_retry: Vec::new(),
            next_seq: 1,
            stats: Stats::default(),
            events: Vec::new(),
            reported_names: Default::default(),
            reported_tolerated: Default::default(),
            load: LoadControl::new(cfg_rts),
            now: Instant::now(),
            saved_assocs: Vec::new(),
            saved_seq: 0,
            saved_pfds: None,
            app_stop_after: crate::report::DEFAULT_INACTIVITY,
            next_app_poll: None,
            qos: QosMonitor::new(),
            path_qos_generation: 0,
            saved_path_qos_generation: 0,
        }
    }

    /// How long a flow of an application stays idle before its stop is reported (STOPT;
    /// default 10 s).
    pub fn set_app_stop_after(&mut self, d: Duration) {
        self.app_stop_after = d;
    }

    /// The associations' GTP-U path QoS monitoring as the state keeps it.
    fn saved_path_qos(&self) -> Vec<crate::state::SavedPathQos> {
        let (_, controls) = self.path_qos_controls();
        let mut v: Vec<_> = controls
            .iter()
            .map(|(n, c)| crate::state::SavedPathQos::of(n, c))
            .collect();
        v.sort_by_key(|p| p.node.to_string());
        v
    }

    /// The associations as the state keeps them, in a fixed order.
    fn saved_associations(&self) -> Vec<SavedAssociation> {
        let mut v: Vec<SavedAssociation> = self
            .assocs
            .iter()
            .map(|(n, a)| SavedAssociation {
                node: n.clone(),
                addr: a.addr,
                recovery_time_stamp: a.recovery_time_stamp,
                cp_features: a.cp_features.clone(),
            })
            .collect();
        v.sort_by_key(|a| a.node.to_string());
        v
    }

    /// Unanswered Session Report Requests by session.
    fn saved_reports(&self) -> HashMap<u64, Vec<SavedReport>> {
        let mut m: HashMap<u64, Vec<SavedReport>> = HashMap::new();
        for (seq, o) in &self.outstanding {
            if let Pending::SessionReport(seid) = o.what {
                m.entry(seid).or_default().push(SavedReport {
                    sequence: *seq,
                    to: o.to,
                    data: o.data.clone(),
                });
            }
        }
        m
    }

    /// Keep the state from now on: [`N4::take_changes`] says what changed.
    pub fn track_changes(&mut self) {
        self.sessions.track_changes();
    }

    /// Everything, as records of a state snapshot (state.rs), made one at a time as the
    /// snapshot is written; what changed from now on is what [`N4::take_changes`]
    /// returns. [`N4::save_head`], then [`N4::save_next`] until nothing is left.
    pub fn save_all(&mut self) -> impl Iterator<Item = Record> + '_ {
        let (head, mut left) = self.save_head();
        let this = &*self;
        head.into_iter().chain(
            std::iter::from_fn(move || {
                (!left.is_empty()).then(|| this.save_next(&mut left, SAVE_GROUP))
            })
            .flatten(),
        )
    }

    /// A snapshot taken in steps, so that N4 never waits for a million sessions to be
    /// read: its first records (associations, sequence, PFDs) and what is left to read
    /// ([`ToSave`]: the cached responses and every session now), which
    /// [`N4::save_next`] reads a few at a time between batches. What changes from now
    /// on is what [`N4::take_changes`] returns: each change goes to the snapshot's
    /// journal, and a journal record holds its session whole, so a session read after
    /// it changed (or gone by then) loads as the journal leaves it, whatever its step.
    pub fn save_head(&mut self) -> (Vec<Record>, ToSave) {
        let _ = self.sessions.take_changed();
        self.saved_assocs = self.saved_associations();
        self.saved_seq = self.next_seq;
        let pfds = std::sync::Arc::clone(self.sessions.pfds());
        let apps = crate::state::SavedApp::all(&pfds);
        self.saved_pfds = Some(pfds);
        // The cache as it is: what the journal held of it goes with the journal this
        // snapshot replaces; what is sent from now on goes to both journals.
        self.unsaved_responses.clear();
        self.saved_path_qos_generation = self.path_qos_generation;
        let head = vec![
            Record::Associations(self.saved_assocs.clone()),
            Record::PathQos(self.saved_path_qos()),
            Record::Sequence(self.next_seq),
            Record::Pfds(apps),
        ];
        let left = ToSave {
            responses: Vec::from(self.cache.order.clone()).into_iter(),
            seids: self.sessions.seids().into_iter(),
        };
        (head, left)
    }

    /// The next records of a snapshot taken in steps: up to `n` of what `left` has,
    /// cached responses first (one [`Record::Responses`] of them: a frame each, never
    /// one of half a million responses), then sessions, as they are now (a response
    /// expired or a session gone since [`N4::save_head`] has none).
    pub fn save_next(&self, left: &mut ToSave, n: usize) -> Vec<Record> {
        let mut out = Vec::new();
        let responses_left = left.responses.len();
        if responses_left > 0 {
            let (now, unix) = (Instant::now(), unix_ms());
            let responses: Vec<SavedResponse> = left
                .responses
                .by_ref()
                .take(n)
                .filter_map(|(t, k)| {
                    let data = self.cache.map.get(&k)?.clone();
                    let age = now.saturating_duration_since(t).as_millis() as u64;
                    Some(SavedResponse {
                        to: k.0,
                        sequence: k.1,
                        sent_unix_ms: unix.saturating_sub(age),
                        data,
                    })
                })
                .collect();
            if !responses.is_empty() {
                out.push(Record::Responses(responses));
            }
        }
        // What is left of `n` once the responses taken (kept or expired) are counted.
        let budget = n - (responses_left - left.responses.len());
        if budget > 0 && left.seids.len() > 0 {
            let mut reports = self.saved_reports();
            for seid in left.seids.by_ref().take(budget) {
                out.extend(session_record(&self.sessions, &mut reports, seid).unwrap_or_default());
            }
        }
        out
    }

    /// What changed since the last call (or [`N4::save_all`]), as records to append to
    /// the state's journal before anything is sent.
    pub fn take_changes(&mut self) -> Vec<Record> {
        let mut out = Vec::new();
        // Compared in place: this runs after everything upfd does.
        let same = self.saved_assocs.len() == self.assocs.len()
            && self.saved_assocs.iter().all(|s| {
                self.assocs.get(&s.node).is_some_and(|a| {
                    a.addr == s.addr
                        && a.recovery_time_stamp == s.recovery_time_stamp
                        && a.cp_features == s.cp_features
                })
            });
        if !same {
            let assocs = self.saved_associations();
            self.saved_assocs = assocs.clone();
            out.push(Record::Associations(assocs));
        }
        if !same || self.path_qos_generation != self.saved_path_qos_generation {
            self.saved_path_qos_generation = self.path_qos_generation;
            out.push(Record::PathQos(self.saved_path_qos()));
        }
        if self.next_seq != self.saved_seq {
            self.saved_seq = self.next_seq;
            out.push(Record::Sequence(self.next_seq));
        }
        if !self.unsaved_responses.is_empty() {
            out.push(Record::Responses(std::mem::take(
                &mut self.unsaved_responses,
            )));
        }
        // PFD Management replaces the table (never changes it in place).
        let pfds = self.sessions.pfds();
        if !self
            .saved_pfds
            .as_ref()
            .is_some_and(|s| std::sync::Arc::ptr_eq(s, pfds))
        {
            out.push(Record::Pfds(crate::state::SavedApp::all(pfds)));
            self.saved_pfds = Some(std::sync::Arc::clone(pfds));
        }
        let changed = self.sessions.take_changed();
        if changed.is_empty() {
            return out;
        }
        let mut reports = self.saved_reports();
        for seid in changed {
            out.extend(
                session_record(&self.sessions, &mut reports, seid)
                    .unwrap_or_else(|| vec![Record::SessionGone(seid)]),
            );
        }
        out
    }

    /// Carry counts of the data path that ran before a restart (see [`Sessions::carry`]).
    pub fn carry(&mut self, seid: u64, urr_id: u32, more: crate::fastpath::Usage) {
        self.sessions.carry(seid, urr_id, more);
    }

    /// Take back the state kept before a restart: the PFD table (each application with
    /// the index it had, the applications configured now taken in over it: see
    /// [`crate::pfd::PfdTable::merge_configured`]; the table this node has now is taken
    /// for the configured one), associations, sessions (see [`Sessions::restore`];
    /// `counted` reads the counts of the data path that ran) and unanswered Session
    /// Report Requests, sent again with their sequence numbers. On an error the caller
    /// drops this N4 and starts clean: nothing is half-applied.
    pub fn restore(
        &mut self,
        saved: &Saved,
        counted: impl Fn(u64, &crate::state::SavedUrr) -> crate::report::Counted,
        now: Instant,
    ) -> Result<(), String> {
        if let Some(apps) = &saved.pfds {
            let mut t = crate::state::pfd_table(apps).map_err(|e| format!("PFDs: {e}"))?;
            t.merge_configured(self.sessions.pfds())
                .map_err(|e| format!("PFDs: the configured {e}"))?;
            let ids: Vec<String> = t.iter().map(|a| a.id.clone()).collect();
            self.sessions
                .set_pfds(t, &ids)
                .map_err(|e| format!("PFDs: the data path did not take them: {e}"))?;
        }
        for a in &saved.associations {
            self.by_addr.insert(a.addr.ip(), a.node.clone());
            self.assocs.insert(
                a.node.clone(),
                Association {
                    addr: a.addr,
                    recovery_time_stamp: a.recovery_time_stamp,
                    rts_change_reported: false,
                    cp_features: a.cp_features.clone(),
                    // A heartbeat at once: the CP function hears our (same) time stamp.
                    next_heartbeat: now,
                    heartbeat_pending: false,
                    release_deadline: None,
                    path_qos: Vec::new(),
                },
            );
        }
        for p in &saved.path_qos {
            let controls = p.controls()?;
            if let Some(a) = self.assocs.get_mut(&p.node) {
                a.path_qos = controls;
                self.path_qos_generation += 1;
            }
        }
        for s in &saved.sessions {
            if !self.assocs.contains_key(&s.session.cp_node) {
                return Err(format!(
                    "session {:#x} of {}, which is not associated",
                    s.session.up_seid, s.session.cp_node
                ));
            }
            let seid = s.session.up_seid;
            self.sessions.restore(s, |u| counted(seid, u))?;
            self.qos
                .set_session(seid, s.session.srrs.values(), now, SystemTime::now());
            for r in &s.reports {
                self.outstanding.insert(
                    r.sequence,
                    Outstanding {
                        to: r.to,
                        data: r.data.clone(),
                        next_retry: now,
                        tries: 1,
                        what: Pending::SessionReport(s.session.up_seid),
                    },
                );
                *self.reports_pending.entry(r.to).or_default() += 1;
            }
        }
        if let Some(q) = saved.sequence {
            self.next_seq = q.max(1);
        }
        // The responses still within the cache's time to live: a request the old upfd
        // answered (and journalled) but whose answer the CP function did not get is
        // answered again as it was, not executed twice (clause 6.4).
        let unix = unix_ms();
        for r in &saved.responses {
            let age = Duration::from_millis(unix.saturating_sub(r.sent_unix_ms));
            let key = (r.to, r.sequence);
            if age >= self.cfg.cache_ttl || self.cache.map.contains_key(&key) {
                continue;
            }
            let sent = now.checked_sub(age).unwrap_or(now);
            self.cache.map.insert(key, r.data.clone());
            self.cache.order.push_back((sent, key));
        }
        self.saved_assocs = self.saved_associations();
        self.saved_seq = self.next_seq;
        Ok(())
    }

    /// What upfd measured of its load: reported to CP functions from the next response
    /// on; while `reduction` is above 0, new sessions are refused with Cause 74 (see
    /// [`crate::load`]).
    pub fn set_load(&mut self, l: Load, now: Instant) {
        self.load.update(l, now);
    }

    /// Whether new sessions are being refused for overload.
    pub fn overloaded(&self) -> bool {
        self.load.overloaded()
    }

    /// Load and Overload Control Information for a response to the CP function at
    /// `from`, if its CP Function Features announced LOAD / OVRL (clauses 6.2.3.1,
    /// 6.2.4.1).
    fn load_info(
        &self,
        from: SocketAddr,
    ) -> (
        Option<msg::LoadControlInformation>,
        Option<msg::OverloadControlInformation>,
    ) {
        use pfcp::ie::cp_function_features as f;
        let Some(features) = self
            .by_addr
            .get(&from.ip())
            .and_then(|n| self.assocs.get(n))
            .and_then(|a| a.cp_features.as_ref())
        else {
            return (None, None);
        };
        (
            features.get(f::LOAD).then(|| self.load.lci()),
            features
                .get(f::OVRL)
                .then(|| self.load.oci(self.now))
                .flatten(),
        )
    }

    /// The session table.
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// Begin a check of the session books in steps ([`Sessions::check_walk`]): the
    /// sessions changed from now on are noted for its end.
    pub fn check_begin(&mut self) -> crate::sessions::CheckWalk {
        self.sessions.watch_begin();
        self.sessions.check_walk()
    }

    /// About `n` more of the check ([`Sessions::check_step`]); whether any is left.
    pub fn check_step(&mut self, w: &mut crate::sessions::CheckWalk, n: usize) -> bool {
        self.sessions.check_step(w, n)
    }

    /// The end of a check that gave up: changes no longer noted for it.
    pub fn check_end_unjudged(&mut self) {
        self.sessions.watch_end();
    }

    /// The check's end and verdict ([`Sessions::check_end`]).
    pub fn check_end(&mut self, w: &mut crate::sessions::CheckWalk) -> Result<(), String> {
        self.sessions.check_end(w)
    }

    /// Replace the PFD table outside PFD Management (upfd's `applications` at start):
    /// see [`Sessions::set_pfds`].
    pub fn set_pfds(
        &mut self,
        pfds: crate::pfd::PfdTable,
        changed: &[String],
    ) -> Result<(), crate::fastpath::FastPathError> {
        self.sessions.set_pfds(pfds, changed)
    }

    pub fn config(&self) -> &N4Config {
        &self.cfg
    }

    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// Events since the last call.
    pub fn take_events(&mut self) -> Vec<Event> {
        for seid in self.sessions.take_deleted() {
            self.events.push(Event::Deleted { seid });
        }
        std::mem::take(&mut self.events)
    }

    /// Poll the URRs of `signalled` (sessions whose volume quota or threshold the data
    /// path signalled; None: the sessions polled periodically) and of the sessions left
    /// over from the last poll, and send the reports due as Session Report Requests
    /// (USAR). Each CP function takes at most MAX_OUTSTANDING_REPORTS unanswered
    /// reports; the sessions beyond keep measuring and report at a later poll.
    pub fn poll_reports(&mut self, now: Instant, signalled: Option<Vec<u64>>) -> Vec<Out> {
        let periodic = signalled.is_none();
        let mut seids = signalled.unwrap_or_else(|| self.sessions.polled_seids());
        seids.append(&mut self.report_retry);
        seids.sort_unstable();
        seids.dedup();
        let may_report = self.report_gate(seids.iter().copied());
        let (due, deferred) = self.sessions.poll_reports(&seids, now, may_report);
        self.report_retry = deferred;
        let mut out = Vec::new();
        for (seid, reports) in due {
            let body = msg::SessionReportRequest::usage(self.usage_reports(seid, &reports));
            out.extend(self.send_report(seid, body, now));
        }
        if periodic {
            out.extend(self.poll_app_flows(now));
        }
        out
    }

    /// The data path classified a new flow of session `seid` as application `app`
    /// (TS 29.244 clause 5.11.1): a Session Report Request with a Usage Report (trigger
    /// START, Application Detection Information) for each URR with START on a PDR
    /// naming `app`. Nothing if no URR asks, or the CP function has no room for a report
    /// (counted in [`Stats::app_starts_unreported`]; the flow's stop is then not
    /// reported either).
    pub fn app_start(
        &mut self,
        seid: u64,
        app: &str,
        flow: crate::fastpath::AppFlow,
        now: Instant,
    ) -> Vec<Out> {
        if !self.can_report(seid) {
            if self.sessions.get(seid).is_some() {
                self.stats.app_starts_unreported += 1;
            }
            return Vec::new();
        }
        let reports = self.sessions.app_start(seid, app, flow);
        if reports.is_empty() {
            return Vec::new();
        }
        let body = msg::SessionReportRequest::usage(self.usage_reports(seid, &reports));
        self.send_report(seid, body, now)
    }

    /// Once a second: the stops of application flows idle for `app_stop_after` (or
    /// gone from the data path), as Usage Reports with trigger STOPT.
    fn poll_app_flows(&mut self, now: Instant) -> Vec<Out> {
        if self.next_app_poll.is_some_and(|t| now < t) || !self.sessions.has_app_flows() {
            return Vec::new();
        }
        self.next_app_poll = Some(now + APP_POLL);
        let may_report = self.report_gate(self.sessions.app_flow_seids());
        let due = self
            .sessions
            .poll_app_flows(self.app_stop_after, may_report);
        let mut out = Vec::new();
        for (seid, reports) in due {
            let body = msg::SessionReportRequest::usage(self.usage_reports(seid, &reports));
            out.extend(self.send_report(seid, body, now));
        }
        out
    }

    /// Whether the CP function of session `seid` can take another Session Report
    /// Request now: at most MAX_OUTSTANDING_REPORTS unanswered per association, so an
    /// SMF that does not answer is not flooded (the measurements keep counting and are
    /// reported once it answers again).
    pub fn can_report(&self, seid: u64) -> bool {
        self.report_budget(seid).is_some_and(|(_, free)| free > 0)
    }

    /// Whether a report of session `seid` may go now, for the sessions `seids`: each CP
    /// function takes MAX_OUTSTANDING_REPORTS unanswered reports ([`N4::report_budget`]),
    /// and each `true` uses one of its room.
    fn report_gate(&self, seids: impl IntoIterator<Item = u64>) -> impl FnMut(u64) -> bool {
        let mut peer_of = HashMap::new();
        let mut free = HashMap::new();
        for seid in seids {
            if let Some((peer, f)) = self.report_budget(seid) {
                peer_of.insert(seid, peer);
                free.entry(peer).or_insert(f);
            }
        }
        move |seid| match peer_of.get(&seid).and_then(|p| free.get_mut(p)) {
            Some(f) if *f > 0 => {
                *f -= 1;
                true
            }
            _ => false,
        }
    }

    /// The CP function of session `seid` and how many more Session Report Requests it
    /// can take now (see [`N4::can_report`]).
    pub fn report_budget(&self, seid: u64) -> Option<(SocketAddr, usize)> {
        let s = self.sessions.get(seid)?;
        let a = self.assocs.get(&s.cp_node)?;
        let pending = self.reports_pending.get(&a.addr).copied().unwrap_or(0);
        Some((a.addr, MAX_OUTSTANDING_REPORTS.saturating_sub(pending)))
    }

    fn report_done(&mut self, to: SocketAddr) {
        if let Some(n) = self.reports_pending.get_mut(&to) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.reports_pending.remove(&to);
            }
        }
    }

    /// Send a Session Report Request for session `seid` to its CP function (clause
    /// 7.5.8), retransmitted like every request. Nothing if the session or its
    /// association is gone.
    pub fn send_report(
        &mut self,
        seid: u64,
        body: msg::SessionReportRequest,
        now: Instant,
    ) -> Vec<Out> {
        let mut out = Vec::new();
        let Some(s) = self.sessions.get(seid) else {
            return out;
        };
        let cp_seid = s.cp_fseid.seid;
        let Some(a) = self.assocs.get(&s.cp_node) else {
            return out;
        };
        let to = a.addr;
        let seq = self.seq();
        let data = msg::emit(&HeaderRepr::session(0, cp_seid, seq), &body);
        *self.reports_pending.entry(to).or_default() += 1;
        self.request(to, seq, data, Pending::SessionReport(seid), now, &mut out);
        self.sessions.mark_changed(seid);
        out
    }

    pub fn associations(&self) -> Vec<(NodeId, SocketAddr)> {
        self.assocs
            .iter()
            .map(|(n, a)| (n.clone(), a.addr))
            .collect()
    }

    /// Every association as an operator sees it (the API, the metrics), by Node ID.
    pub fn association_info(&self) -> Vec<AssociationInfo> {
        let mut v: Vec<AssociationInfo> = self
            .assocs
            .iter()
            .map(|(n, a)| AssociationInfo {
                node_id: n.clone(),
                address: a.addr,
                recovery_time_stamp: a.recovery_time_stamp,
                releasing: a.release_deadline.is_some(),
                heartbeat_pending: a.heartbeat_pending,
                sessions: self.sessions.count_of_node(n),
            })
            .collect();
        v.sort_by_key(|a| a.node_id.to_string());
        v
    }

    pub fn is_associated(&self, node: &NodeId) -> bool {
        self.assocs.contains_key(node)
    }

    fn seq(&mut self) -> u32 {
        let s = self.next_seq;
        self.next_seq = (self.next_seq + 1) & 0x00ff_ffff;
        if self.next_seq == 0 {
            self.next_seq = 1;
        }
        s
    }

    /// Start: ask the configured CP functions to associate.
    pub fn start(&mut self, now: Instant) -> Vec<Out> {
        let mut out = Vec::new();
        for a in self.cfg.smf_peers.clone() {
            // Associated already: restored after a restart (the heartbeat says so).
            if self.assocs.values().any(|x| x.addr.ip() == a.ip()) {
                continue;
            }
            self.send_setup(a, now, &mut out);
        }
        out
    }

    fn send_setup(&mut self, to: SocketAddr, now: Instant, out: &mut Vec<Out>) {
        let seq = self.seq();
        let body = msg::AssociationSetupRequest {
            up_function_features: Some(self.cfg.features.clone()),
            ..msg::AssociationSetupRequest::new(
                self.cfg.node_id.clone(),
                self.cfg.recovery_time_stamp,
            )
        };
        self.request(
            to,
            seq,
            msg::emit(&node_header(0, seq), &body),
            Pending::AssociationSetup(to),
            now,
            out,
        );
    }

    fn request(
        &mut self,
        to: SocketAddr,
        seq: u32,
        data: Vec<u8>,
        what: Pending,
        now: Instant,
        out: &mut Vec<Out>,
    ) {
        if let Pending::SessionReport(_) = what {
            let types = pfcp::message::top_level_ie(&data, pfcp::ie::types::REPORT_TYPE);
            let bits = types.and_then(|v| v.first().copied()).unwrap_or(0);
            for (i, n) in self.stats.reports_sent.iter_mut().enumerate() {
                *n += u64::from(bits >> i & 1);
            }
        }
        out.push(Out {
            to,
            data: data.clone(),
        });
        self.outstanding.insert(
            seq,
            Outstanding {
                to,
                data,
                next_retry: now + self.cfg.t1,
                tries: 1,
                what,
            },
        );
    }

    /// Graceful release (clause 6.2.8.2): ask every CP function to release its sessions
    /// and the association within the graceful release period.
    pub fn release_all(&mut self, now: Instant) -> Vec<Out> {
        let mut out = Vec::new();
        let nodes: Vec<NodeId> = self.assocs.keys().cloned().collect();
        for n in nodes {
            let seq = self.seq();
            let body = msg::AssociationUpdateRequest {
                node_id: self.cfg.node_id.clone(),
                up_function_features: None,
                cp_function_features: None,
                user_plane_ip_resource_information: Vec::new(),
                pfcp_association_release_request: Some(Flags::from_bits(
                    &[pfcp_association_release_request::SARR],
                    1,
                )),
                graceful_release_period: Some(GprsTimer::from_seconds(
                    self.cfg.graceful_release_period.as_secs(),
                )),
                pfcpau_req_flags: None,
                alternative_smf_ip_addresses: Vec::new(),
                smf_set_id: None,
                ue_ip_address_pool_information: Vec::new(),
                gtpu_path_qos_control_information: Vec::new(),
                other: Vec::new(),
            };
            let data = msg::emit(&node_header(0, seq), &body);
            if let Some(a) = self.assocs.get_mut(&n) {
                a.release_deadline = Some(now + self.cfg.graceful_release_period);
                let to = a.addr;
                self.request(
                    to,
                    seq,
                    data,
                    Pending::AssociationUpdate(n.clone()),
                    now,
                    &mut out,
                );
            }
        }
        self.setup_retry.clear();
        self.cfg.smf_peers.clear();
        out
    }

    /// True once no association is left (after [`N4::release_all`]).
    pub fn all_released(&self) -> bool {
        self.assocs.is_empty()
    }

    /// The earliest time [`N4::on_timer`] has work to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        let a = self.assocs.values().flat_map(|a| {
            [
                (!a.heartbeat_pending).then_some(a.next_heartbeat),
                a.release_deadline,
            ]
        });
        let o = self.outstanding.values().map(|o| Some(o.next_retry));
        let s = self.setup_retry.values().map(|t| Some(*t));
        a.chain(o).chain(s).flatten().min()
    }

    /// Heartbeats, retransmissions, timeouts, association retries, release deadlines.
    pub fn on_timer(&mut self, now: Instant) -> Vec<Out> {
        let mut out = Vec::new();
        // Retransmit or give up.
        let due: Vec<u32> = self
            .outstanding
            .iter()
            .filter(|(_, o)| o.next_retry <= now)
            .map(|(s, _)| *s)
            .collect();
        for seq in due {
            let Some(mut o) = self.outstanding.remove(&seq) else {
                continue;
            };
            if o.tries <= self.cfg.n1 {
                o.tries += 1;
                o.next_retry = now + self.cfg.t1;
                out.push(Out {
                    to: o.to,
                    data: o.data.clone(),
                });
                self.outstanding.insert(seq, o);
                continue;
            }
            self.stats.timeouts += 1;
            match o.what {
                Pending::AssociationSetup(addr) => {
                    self.setup_retry
                        .insert(addr, now + self.cfg.heartbeat_interval);
                }
                Pending::Heartbeat(node) => {
                    self.drop_association(&node, "peer lost: no heartbeat response");
                }
                Pending::AssociationUpdate(_) | Pending::NodeReport(_) => {}
                Pending::SessionReport(seid) => {
                    self.report_done(o.to);
                    self.sessions.mark_changed(seid);
                }
            }
        }
        // Association setup retries towards configured CP functions.
        let retry: Vec<SocketAddr> = self
            .setup_retry
            .iter()
            .filter(|(_, t)| **t <= now)
            .map(|(a, _)| *a)
            .collect();
        for a in retry {
            self.setup_retry.remove(&a);
            let associated = self.assocs.values().any(|x| x.addr == a);
            if !associated {
                self.send_setup(a, now, &mut out);
            }
        }
        // Heartbeats and graceful-release deadlines.
        let nodes: Vec<NodeId> = self.assocs.keys().cloned().collect();
        for n in nodes {
            let Some(a) = self.assocs.get(&n) else {
                continue;
            };
            if a.release_deadline.is_some_and(|d| d <= now) {
                self.drop_association(&n, "graceful release period over");
                continue;
            }
            if !a.heartbeat_pending && a.next_heartbeat <= now {
                let to = a.addr;
                let seq = self.seq();
                let body = msg::HeartbeatRequest {
                    recovery_time_stamp: self.cfg.recovery_time_stamp,
                    source_ip_address: None,
                    other: Vec::new(),
                };
                let data = msg::emit(&node_header(0, seq), &body);
                if let Some(a) = self.assocs.get_mut(&n) {
                    a.heartbeat_pending = true;
                }
                self.request(to, seq, data, Pending::Heartbeat(n.clone()), now, &mut out);
            }
        }
        out
    }

    fn drop_association(&mut self, node: &NodeId, reason: &'static str) {
        let dropped_addr = self.assocs.get(node).map(|a| a.addr);
        if let Some(a) = self.assocs.remove(node) {
            self.path_qos_generation += 1;
            self.by_addr.retain(|_, n| n != node);
            let sessions = self.sessions.delete_node(node);
            self.events.push(Event::AssociationDown {
                node: node.clone(),
                reason,
                sessions,
            });
            // Keep trying to associate with a configured CP function.
            if self.cfg.smf_peers.contains(&a.addr) {
                self.setup_retry
                    .insert(a.addr, Instant::now() + self.cfg.heartbeat_interval);
            }
        }
        self.outstanding.retain(|_, o| match &o.what {
            Pending::Heartbeat(n) | Pending::AssociationUpdate(n) | Pending::NodeReport(n) => {
                n != node
            }
            _ => true,
        });
        if let Some(a) = &dropped_addr {
            self.reports_pending.remove(a);
            self.outstanding
                .retain(|_, o| !(o.to == *a && matches!(o.what, Pending::SessionReport(_))));
        }
    }

    /// A heartbeat carried Recovery Time Stamp `ts`. Strict: a new one means the CP
    /// function restarted (TS 23.527 clause 4.3.2) and its sessions go. Otherwise the
    /// sessions stay: OAI's SMF puts the current time in every Heartbeat Request (and an
    /// older build a constant unlike its Association Setup's), and the UPFs it is run
    /// with (OAI's, UPG-VPP; Open5GS's too) ignore it. A restarted CP function sets up
    /// its association again, and that deletes its sessions ([`N4::association_setup`]).
    fn check_restart(&mut self, node: &NodeId, ts: u32) {
        let strict = self.cfg.strict;
        let Some(a) = self.assocs.get_mut(node) else {
            return;
        };
        if a.recovery_time_stamp == ts {
            return;
        }
        if strict {
            a.recovery_time_stamp = ts;
            let sessions = self.sessions.delete_node(node);
            self.events.push(Event::PeerRestarted {
                node: node.clone(),
                sessions,
            });
            return;
        }
        self.stats.recovery_time_stamp_changes += 1;
        if !a.rts_change_reported {
            a.rts_change_reported = true;
            self.events.push(Event::RecoveryTimeStampChanged {
                node: node.clone(),
                association: a.recovery_time_stamp,
                heartbeat: ts,
            });
        }
    }

    /// A request came from `from`: if it is port 8805 of an associated CP function that
    /// we reach at another port, send our requests to 8805 from now on.
    fn note_request_port(&mut self, from: SocketAddr) {
        if from.port() != PFCP_PORT {
            return;
        }
        if let Some(a) = self
            .by_addr
            .get(&from.ip())
            .and_then(|n| self.assocs.get_mut(n))
        {
            a.addr = from;
        }
    }

    /// Handle one UDP datagram from `from`. Several messages may be bundled with the
    /// Follow On flag (clause 7.2.2.1).
    pub fn on_datagram(&mut self, from: SocketAddr, data: &[u8], now: Instant) -> Vec<Out> {
        self.now = now;
        let mut out = Vec::new();
        let mut rest = data;
        // A datagram holds at most a few bundled messages; bound the walk anyway.
        for _ in 0..64 {
            self.stats.received += 1;
            let fo = rest.first().is_some_and(|b| b & 0x04 != 0);
            let this = if fo && rest.len() >= 4 {
                let len = 4 + u16::from_be_bytes([rest[2], rest[3]]) as usize;
                &rest[..len.min(rest.len())]
            } else {
                rest
            };
            self.on_message(from, this, now, &mut out);
            rest = &rest[this.len()..];
            if !fo || rest.is_empty() {
                break;
            }
        }
        out
    }

    fn on_message(&mut self, from: SocketAddr, data: &[u8], now: Instant, out: &mut Vec<Out>) {
        let h = match Header::new_checked(data) {
            Ok(h) => h,
            Err(_) => {
                // Too short for a header: silently discarded (clause 7.6.3).
                self.stats.malformed += 1;
                return;
            }
        };
        let t = h.message_type();
        let seq = h.sequence();
        if h.version() != pfcp::header::VERSION {
            // Clause 7.6.2.
            let hdr = node_header(mt::VERSION_NOT_SUPPORTED_RESPONSE, seq);
            out.push(Out {
                to: from,
                data: msg::emit(
                    &hdr,
                    &msg::VersionNotSupportedResponse { other: Vec::new() },
                ),
            });
            return;
        }
        if !mt::is_request(t) {
            self.on_response(from, t, data, now);
            return;
        }
        // Clause 6.4: a retransmitted request is answered from the cache.
        self.cache
            .expire(now, self.cfg.cache_ttl, self.cfg.cache_max);
        if let Some(r) = self.cache.map.get(&(from, seq)) {
            self.stats.duplicates += 1;
            out.push(Out {
                to: from,
                data: r.clone(),
            });
            return;
        }
        *self.stats.requests.entry(t).or_default() += 1;
        self.note_request_port(from);
        let response = self.on_request(from, t, seq, data, now);
        if let Some(r) = response {
            if r.len() >= 8 && cause_of(&r).is_some_and(|c| !c.is_acceptance()) {
                *self.stats.rejected.entry(t).or_default() += 1;
            }
            self.cache.map.insert((from, seq), r.clone());
            self.cache.order.push_back((now, (from, seq)));
            if self.sessions.tracks_changes() {
                self.unsaved_responses.push(SavedResponse {
                    to: from,
                    sequence: seq,
                    sent_unix_ms: unix_ms(),
                    data: r.clone(),
                });
            }
            out.push(Out { to: from, data: r });
        } else {
            self.stats.discarded += 1;
        }
    }

    fn on_response(&mut self, from: SocketAddr, t: u8, data: &[u8], now: Instant) {
        let Ok((h, m)) = msg::Msg::parse(data) else {
            self.stats.malformed += 1;
            return;
        };
        let Some(o) = self.outstanding.remove(&h.sequence) else {
            // A response to nothing we sent (or a late one): discarded (clause 7.6.5).
            self.stats.discarded += 1;
            return;
        };
        if let (Pending::SessionReport(seid), msg::Msg::SessionReportResponse(_)) = (&o.what, &m) {
            self.report_done(o.to);
            self.sessions.mark_changed(*seid);
        }
        match (o.what, m) {
            (Pending::Heartbeat(node), msg::Msg::HeartbeatResponse(r)) => {
                if let Some(a) = self.assocs.get_mut(&node) {
                    a.heartbeat_pending = false;
                    a.next_heartbeat = now + self.cfg.heartbeat_interval;
                }
                self.check_restart(&node, r.recovery_time_stamp);
            }
            (Pending::AssociationSetup(addr), msg::Msg::AssociationSetupResponse(r)) => {
                if r.cause.is_acceptance() {
                    self.add_association(
                        r.node_id,
                        from,
                        r.recovery_time_stamp,
                        r.cp_function_features,
                        now,
                    );
                } else {
                    self.setup_retry
                        .insert(addr, now + self.cfg.heartbeat_interval);
                }
            }
            (Pending::AssociationUpdate(_), msg::Msg::AssociationUpdateResponse(_)) => {}
            (Pending::NodeReport(_), msg::Msg::NodeReportResponse(_)) => {}
            (Pending::SessionReport(seid), msg::Msg::SessionReportResponse(r)) => {
                // Clause 7.5.9: a CP function that no longer knows the session asks the
                // UP function to delete it.
                if r.cause == CauseValue::SESSION_CONTEXT_NOT_FOUND {
                    self.sessions.delete(seid);
                } else {
                    if let Some(u) = &r.update_bar {
                        self.sessions.update_bar(seid, u);
                    }
                    if r.pfcpsr_rsp_flags
                        .as_ref()
                        .is_some_and(|f| f.get(pfcp::ie::pfcpsr_rsp_flags::DROBU))
                    {
                        self.events.push(Event::DropBuffered { seid });
                    }
                }
                self.events.push(Event::ReportAnswered {
                    seid,
                    cause: r.cause,
                });
            }
            (what, _) => {
                // Wrong response type for the sequence number: discard, keep waiting.
                let _ = t;
                self.outstanding.insert(
                    h.sequence,
                    Outstanding {
                        to: o.to,
                        data: o.data,
                        next_retry: o.next_retry,
                        tries: o.tries,
                        what,
                    },
                );
                self.stats.discarded += 1;
            }
        }
    }

    fn add_association(
        &mut self,
        node: NodeId,
        addr: SocketAddr,
        ts: u32,
        cp_features: Option<Flags>,
        now: Instant,
    ) {
        let is_new = !self.assocs.contains_key(&node);
        self.by_addr.retain(|_, n| *n != node);
        self.by_addr.insert(addr.ip(), node.clone());
        self.assocs.insert(
            node.clone(),
            Association {
                addr,
                recovery_time_stamp: ts,
                rts_change_reported: false,
                cp_features,
                next_heartbeat: now + self.cfg.heartbeat_interval,
                heartbeat_pending: false,
                release_deadline: None,
                path_qos: Vec::new(),
            },
        );
        self.path_qos_generation += 1;
        self.setup_retry.remove(&addr);
        self.outstanding
            .retain(|_, o| !matches!(o.what, Pending::AssociationSetup(a) if a == addr));
        if is_new {
            self.events.push(Event::AssociationUp(node));
        }
    }

    fn allowed(&self, ip: IpAddr) -> bool {
        self.cfg.allowed_peers.is_empty() || self.cfg.allowed_peers.iter().any(|n| n.contains(&ip))
    }

    fn on_request(
        &mut self,
        from: SocketAddr,
        t: u8,
        seq: u32,
        data: &[u8],
        now: Instant,
    ) -> Option<Vec<u8>> {
        let node = node_header(0, seq);
        match t {
            mt::HEARTBEAT_REQUEST => {
                // No Cause in a Heartbeat Response: a malformed request is discarded.
                let (_, r) = msg::parse::<msg::HeartbeatRequest>(data).ok()?;
                if let Some(n) = self.by_addr.get(&from.ip()).cloned() {
                    self.check_restart(&n, r.recovery_time_stamp);
                }
                Some(msg::emit(
                    &node,
                    &msg::HeartbeatResponse {
                        recovery_time_stamp: self.cfg.recovery_time_stamp,
                        other: Vec::new(),
                    },
                ))
            }
            mt::ASSOCIATION_SETUP_REQUEST => Some(self.association_setup(from, &node, data, now)),
            mt::ASSOCIATION_UPDATE_REQUEST => {
                let cause = match msg::parse::<msg::AssociationUpdateRequest>(data) {
                    Err(e) => e.cause(),
                    Ok((_, r)) => match self.assocs.get_mut(&r.node_id) {
                        None => CauseValue::NO_ESTABLISHED_PFCP_ASSOCIATION,
                        Some(a) => {
                            if r.cp_function_features.is_some() {
                                a.cp_features = r.cp_function_features;
                            }
                            // Clause 7.4.4.3: present, they replace what was asked before.
                            if !r.gtpu_path_qos_control_information.is_empty() {
                                a.path_qos = r.gtpu_path_qos_control_information;
                                self.path_qos_generation += 1;
                            }
                            CauseValue::REQUEST_ACCEPTED
                        }
                    },
                };
                Some(msg::emit(
                    &node,
                    &msg::AssociationUpdateResponse {
                        node_id: self.cfg.node_id.clone(),
                        cause,
                        up_function_features: None,
                        cp_function_features: None,
                        other: Vec::new(),
                    },
                ))
            }
            mt::ASSOCIATION_RELEASE_REQUEST => {
                let cause = match msg::parse::<msg::AssociationReleaseRequest>(data) {
                    Err(e) => e.cause(),
                    Ok((_, r)) => {
                        // A CP function releases its own association: the one of the
                        // sender's address. The Node ID names it (clause 7.4.4.5), but
                        // pfcpsim sends 0.0.0.0 there, so a Node ID we have no association
                        // with is read as the sender's; one naming another CP function's
                        // association is refused (it would delete that one's sessions).
                        match self.by_addr.get(&from.ip()).cloned() {
                            Some(n) if n == r.node_id || !self.assocs.contains_key(&r.node_id) => {
                                self.drop_association(&n, "released by the CP function");
                                CauseValue::REQUEST_ACCEPTED
                            }
                            Some(_) => {
                                self.rejected(
                                    from,
                                    mt::ASSOCIATION_RELEASE_REQUEST,
                                    &Rejection::cause(
                                        CauseValue::REQUEST_REJECTED,
                                        format!("names {}, another CP function", r.node_id),
                                    ),
                                );
                                CauseValue::REQUEST_REJECTED
                            }
                            None => CauseValue::NO_ESTABLISHED_PFCP_ASSOCIATION,
                        }
                    }
                };
                Some(msg::emit(
                    &node,
                    &msg::AssociationReleaseResponse {
                        node_id: self.cfg.node_id.clone(),
                        cause,
                        other: Vec::new(),
                    },
                ))
            }
            mt::PFD_MANAGEMENT_REQUEST => {
                let (cause, offending_ie) = self.pfd_management(from, data);
                Some(msg::emit(
                    &node,
                    &msg::PfdManagementResponse {
                        cause,
                        offending_ie,
                        node_id: Some(self.cfg.node_id.clone()),
                        other: Vec::new(),
                    },
                ))
            }
            mt::SESSION_SET_DELETION_REQUEST => {
                let (cause, offending_ie) = match msg::parse::<msg::SessionSetDeletionRequest>(data)
                {
                    Err(e) => (e.cause(), e.offending_ie()),
                    Ok((_, r)) => match self.by_addr.get(&from.ip()).cloned() {
                        None => (CauseValue::NO_ESTABLISHED_PFCP_ASSOCIATION, None),
                        Some(n) => {
                            self.delete_session_set(&n, &r.fq_csids);
                            (CauseValue::REQUEST_ACCEPTED, None)
                        }
                    },
                };
                Some(msg::emit(
                    &node,
                    &msg::SessionSetDeletionResponse {
                        node_id: self.cfg.node_id.clone(),
                        cause,
                        offending_ie,
                        other: Vec::new(),
                    },
                ))
            }
            mt::SESSION_SET_MODIFICATION_REQUEST => {
                let (cause, offending_ie) =
                    match msg::parse::<msg::SessionSetModificationRequest>(data) {
                        Err(e) => (e.cause(), e.offending_ie()),
                        Ok(_) => (CauseValue::SERVICE_NOT_SUPPORTED, None),
                    };
                Some(msg::emit(
                    &node,
                    &msg::SessionSetModificationResponse {
                        node_id: self.cfg.node_id.clone(),
                        cause,
                        offending_ie,
                        other: Vec::new(),
                    },
                ))
            }
            mt::SESSION_ESTABLISHMENT_REQUEST => {
                let r = self.establishment(from, seq, data);
                self.note_unknown_names(from);
                self.note_tolerated(from);
                Some(r)
            }
            mt::SESSION_MODIFICATION_REQUEST => {
                let r = self.modification(from, seq, data);
                self.note_unknown_names(from);
                self.note_tolerated(from);
                Some(r)
            }
            mt::SESSION_DELETION_REQUEST => Some(self.deletion(from, seq, data)),
            // Requests a CP function does not send (Node Report, Session Report, unknown
            // types): discarded (clauses 7.6.4 and 7.6.5).
            _ => None,
        }
    }

    fn association_setup(
        &mut self,
        from: SocketAddr,
        node: &HeaderRepr,
        data: &[u8],
        now: Instant,
    ) -> Vec<u8> {
        let mut rsp = msg::AssociationSetupResponse {
            node_id: self.cfg.node_id.clone(),
            cause: CauseValue::REQUEST_ACCEPTED,
            recovery_time_stamp: self.cfg.recovery_time_stamp,
            up_function_features: Some(self.cfg.features.clone()),
            cp_function_features: None,
            user_plane_ip_resource_information: Vec::new(),
            alternative_smf_ip_addresses: Vec::new(),
            smf_set_id: None,
            pfcpas_rsp_flags: None,
            ue_ip_address_pool_information: Vec::new(),
            gtpu_path_qos_control_information: Vec::new(),
            other: Vec::new(),
        };
        match msg::parse::<msg::AssociationSetupRequest>(data) {
            Err(e) => {
                rsp.cause = e.cause();
                rsp.up_function_features = None;
            }
            Ok(_) if !self.allowed(from.ip()) => {
                rsp.cause = CauseValue::REQUEST_REJECTED;
                rsp.up_function_features = None;
            }
            // A peer may not take over another's association: that would delete the
            // other's sessions, or (with Session Retention Information) hand them to it.
            // A CP function that moved to a new address gets its association once the
            // old one is lost (heartbeats unanswered). TS 33.117 clause 4.2.2.2.
            Ok((_, r))
                if self
                    .assocs
                    .get(&r.node_id)
                    .is_some_and(|a| a.addr.ip() != from.ip()) =>
            {
                let held = self.assocs[&r.node_id].addr.ip();
                self.rejected(
                    from,
                    mt::ASSOCIATION_SETUP_REQUEST,
                    &Rejection::cause(
                        CauseValue::REQUEST_REJECTED,
                        format!("Node ID {} is associated from {held}", r.node_id),
                    ),
                );
                rsp.cause = CauseValue::REQUEST_REJECTED;
                rsp.up_function_features = None;
            }
            Ok((_, r)) => {
                // Clause 6.2.6.2.2: a new association replaces an existing one; its sessions
                // are kept only if the CP function asks to retain them.
                if self.assocs.contains_key(&r.node_id) {
                    if r.pfcp_session_retention_information.is_some() {
                        rsp.pfcpas_rsp_flags =
                            Some(Flags::from_bits(&[pfcp::ie::pfcpas_rsp_flags::PSREI], 1));
                    } else {
                        let sessions = self.sessions.delete_node(&r.node_id);
                        if sessions > 0 {
                            self.events.push(Event::PeerRestarted {
                                node: r.node_id.clone(),
                                sessions,
                            });
                        }
                    }
                }
                let node_id = r.node_id.clone();
                self.add_association(
                    r.node_id,
                    from,
                    r.recovery_time_stamp,
                    r.cp_function_features,
                    now,
                );
                if let Some(a) = self.assocs.get_mut(&node_id) {
                    a.path_qos = r.gtpu_path_qos_control_information;
                }
            }
        }
        msg::emit(node, &rsp)
    }

    /// PFD Management (clauses 6.2.5, 7.4.3): the PFDs of the request replace the
    /// applications' ones (pfd.rs, all or nothing), the data path takes the new table,
    /// and the Cause and Offending IE of the response are returned.
    fn pfd_management(&mut self, from: SocketAddr, data: &[u8]) -> (CauseValue, Option<u16>) {
        let r = match msg::parse::<msg::PfdManagementRequest>(data) {
            Err(e) => return (e.cause(), e.offending_ie()),
            Ok((_, r)) => r,
        };
        if !self.by_addr.contains_key(&from.ip()) {
            return (CauseValue::NO_ESTABLISHED_PFCP_ASSOCIATION, None);
        }
        let mut next = (**self.sessions.pfds()).clone();
        let refused = |n4: &mut Self, rej: Rejection| {
            n4.rejected(from, mt::PFD_MANAGEMENT_REQUEST, &rej);
            (rej.cause, rej.offending_ie)
        };
        let changed = match next.apply(&r) {
            Ok(c) => c,
            Err(e) => {
                let rej = Rejection::ie(e.cause, e.offending_ie, e.to_string());
                return refused(self, rej);
            }
        };
        if next != **self.sessions.pfds() {
            if let Err(e) = self.sessions.set_pfds(next, &changed) {
                let rej = Rejection::cause(
                    CauseValue::SYSTEM_FAILURE,
                    format!("the data path did not take the PFDs: {e}"),
                );
                return refused(self, rej);
            }
            self.events.push(Event::PfdsChanged {
                peer: from,
                applications: changed,
            });
        }
        (CauseValue::REQUEST_ACCEPTED, None)
    }

    /// Count and (once per kind and peer) report the deviations a request was accepted
    /// with.
    fn note_tolerated(&mut self, from: SocketAddr) {
        let seen = self.sessions.take_tolerated();
        let mut counted = Vec::new();
        for (what, detail) in seen {
            if counted.contains(&what) {
                continue;
            }
            counted.push(what);
            *self.stats.tolerated.entry(what).or_default() += 1;
            if self.reported_tolerated.len() < REPORTED_NAMES
                && self.reported_tolerated.insert((from.ip(), what))
            {
                self.events.push(Event::Tolerated {
                    peer: from,
                    what,
                    detail,
                });
            }
        }
    }

    /// Count and (once per name) report the unknown Network Instances of a request.
    fn note_unknown_names(&mut self, from: SocketAddr) {
        let names = self.sessions.take_unknown_network_instances();
        if names.is_empty() {
            return;
        }
        self.stats.unknown_network_instances += 1;
        for n in names {
            if self.reported_names.len() < REPORTED_NAMES
                && self.reported_names.insert(n.to_string())
            {
                self.events.push(Event::UnknownNetworkInstance {
                    peer: from,
                    name: n.to_string(),
                });
            }
        }
    }

    fn delete_session_set(&mut self, node: &NodeId, csids: &[pfcp::ie::FqCsid]) {
        let doomed: Vec<u64> = self
            .sessions
            .of_node(node)
            .into_iter()
            .filter(|s| {
                self.sessions.get(*s).is_some_and(|s| {
                    s.fq_csids.iter().any(|mine| {
                        csids.iter().any(|req| {
                            req.node_address == mine.node_address
                                && req.csids.iter().any(|c| mine.csids.contains(c))
                        })
                    })
                })
            })
            .collect();
        for s in doomed {
            self.sessions.delete(s);
        }
    }

    fn rejected(&mut self, peer: SocketAddr, message_type: u8, rej: &Rejection) {
        self.events.push(Event::Rejected {
            peer,
            message_type,
            reason: rej.to_string(),
        });
    }

    fn session_header(t: u8, seid: u64, seq: u32) -> HeaderRepr {
        HeaderRepr::session(t, seid, seq)
    }

    fn establishment(&mut self, from: SocketAddr, seq: u32, data: &[u8]) -> Vec<u8> {
        let mut rsp = msg::SessionEstablishmentResponse {
            node_id: self.cfg.node_id.clone(),
            cause: CauseValue::REQUEST_ACCEPTED,
            offending_ie: None,
            up_fseid: None,
            created_pdrs: Vec::new(),
            load_control_information: None,
            overload_control_information: None,
            fq_csid: None,
            failed_rule_id: None,
            created_traffic_endpoints: Vec::new(),
            partial_failure_information: Vec::new(),
            other: Vec::new(),
        };
        let parsed = msg::parse::<msg::SessionEstablishmentRequest>(data);
        // The response goes to the CP function's SEID, 0 if it could not be read.
        let cp_seid = match &parsed {
            Ok((_, r)) => r.cp_fseid.seid,
            Err(_) => cp_seid_of(data).unwrap_or(0),
        };
        (
            rsp.load_control_information,
            rsp.overload_control_information,
        ) = self.load_info(from);
        let result = match (&parsed, self.by_addr.get(&from.ip()).cloned()) {
            (_, None) => Err(Rejection::cause(
                CauseValue::NO_ESTABLISHED_PFCP_ASSOCIATION,
                "no PFCP association with this peer",
            )),
            (Err(e), _) => Err(Rejection::decode(e)),
            (Ok(_), Some(_)) if self.load.overloaded() => {
                self.stats.congestion_rejections += 1;
                Err(Rejection::cause(
                    CauseValue::PFCP_ENTITY_IN_CONGESTION,
                    "overloaded: new sessions refused until the N4 queue drains",
                ))
            }
            (Ok((_, r)), Some(node)) => self.sessions.establish(&node, r),
        };
        match result {
            Ok((seid, created)) => {
                self.events.push(Event::Established { seid });
                self.monitor_qos(seid);
                rsp.up_fseid = Some(self.fseid(seid));
                add_created(
                    &created,
                    &mut rsp.created_pdrs,
                    &mut rsp.created_traffic_endpoints,
                );
            }
            Err(rej) => {
                self.rejected(from, mt::SESSION_ESTABLISHMENT_REQUEST, &rej);
                reject(
                    &rej,
                    &mut rsp.cause,
                    &mut rsp.offending_ie,
                    &mut rsp.failed_rule_id,
                )
            }
        }
        msg::emit(
            &Self::session_header(mt::SESSION_ESTABLISHMENT_RESPONSE, cp_seid, seq),
            &rsp,
        )
    }

    fn fseid(&self, seid: u64) -> FSeid {
        match self.cfg.addr {
            IpAddr::V4(a) => FSeid {
                spare: 0,
                seid,
                ipv4: Some(a),
                ipv6: None,
            },
            IpAddr::V6(a) => FSeid {
                spare: 0,
                seid,
                ipv4: None,
                ipv6: Some(a),
            },
        }
    }

    /// The session a session request names, if it exists and belongs to the sender's
    /// association (a CP function cannot touch another's sessions: clause 6.3).
    fn own_session(&self, from: SocketAddr, data: &[u8]) -> Result<(u64, u64), Rejection> {
        let seid = Header::new_unchecked(data).seid().unwrap_or(0);
        let not_found =
            || Rejection::cause(CauseValue::SESSION_CONTEXT_NOT_FOUND, "no such session");
        let node = self.by_addr.get(&from.ip()).ok_or_else(|| {
            Rejection::cause(
                CauseValue::NO_ESTABLISHED_PFCP_ASSOCIATION,
                "no PFCP association with this peer",
            )
        })?;
        let s = self.sessions.get(seid).ok_or_else(not_found)?;
        if &s.cp_node != node {
            return Err(not_found());
        }
        Ok((seid, s.cp_fseid.seid))
    }

    fn modification(&mut self, from: SocketAddr, seq: u32, data: &[u8]) -> Vec<u8> {
        let mut rsp = msg::SessionModificationResponse {
            cause: CauseValue::REQUEST_ACCEPTED,
            offending_ie: None,
            created_pdrs: Vec::new(),
            load_control_information: None,
            overload_control_information: None,
            usage_reports: Vec::new(),
            failed_rule_id: None,
            additional_usage_reports_information: None,
            created_traffic_endpoints: Vec::new(),
            partial_failure_information: Vec::new(),
            other: Vec::new(),
        };
        (
            rsp.load_control_information,
            rsp.overload_control_information,
        ) = self.load_info(from);
        let mut cp_seid = 0;
        let result = self.own_session(from, data).and_then(|(seid, cp)| {
            cp_seid = cp;
            let (_, r) = msg::parse::<msg::SessionModificationRequest>(data)
                .map_err(|e| Rejection::decode(&e))?;
            let (fx, reports) = self.sessions.modify(seid, &r)?;
            if let Some(s) = self.sessions.get(seid) {
                cp_seid = s.cp_fseid.seid;
            }
            Ok((seid, fx, reports))
        });
        match result {
            Ok((seid, fx, reports)) => {
                add_created(
                    &fx.created,
                    &mut rsp.created_pdrs,
                    &mut rsp.created_traffic_endpoints,
                );
                rsp.usage_reports = self.usage_reports(seid, &reports);
                self.events.push(Event::Modified { seid });
                self.monitor_qos(seid);
                for (far_id, old) in fx.end_markers {
                    self.events.push(Event::EndMarkers { seid, far_id, old });
                }
                if fx.drop_buffered {
                    self.events.push(Event::DropBuffered { seid });
                }
            }
            Err(rej) => {
                self.rejected(from, mt::SESSION_MODIFICATION_REQUEST, &rej);
                reject(
                    &rej,
                    &mut rsp.cause,
                    &mut rsp.offending_ie,
                    &mut rsp.failed_rule_id,
                )
            }
        }
        msg::emit(
            &Self::session_header(mt::SESSION_MODIFICATION_RESPONSE, cp_seid, seq),
            &rsp,
        )
    }

    fn deletion(&mut self, from: SocketAddr, seq: u32, data: &[u8]) -> Vec<u8> {
        let mut rsp = msg::SessionDeletionResponse {
            cause: CauseValue::REQUEST_ACCEPTED,
            offending_ie: None,
            load_control_information: None,
            overload_control_information: None,
            usage_reports: Vec::new(),
            additional_usage_reports_information: None,
            session_reports: Vec::new(),
            other: Vec::new(),
        };
        (
            rsp.load_control_information,
            rsp.overload_control_information,
        ) = self.load_info(from);
        let mut cp_seid = 0;
        let result = self.own_session(from, data).and_then(|(seid, cp)| {
            cp_seid = cp;
            msg::parse::<msg::SessionDeletionRequest>(data).map_err(|e| Rejection::decode(&e))?;
            Ok(seid)
        });
        match result {
            Ok(seid) => {
                if let Some((s, reports)) = self.sessions.delete(seid) {
                    rsp.usage_reports = reports
                        .iter()
                        .filter_map(|r| s.urrs.get(&r.urr_id).map(|u| usage_report(u, r)))
                        .collect();
                }
                // QoS monitoring that reports at release (SESRL, clause 5.24.2).
                rsp.session_reports = self.qos.release(seid, SystemTime::now());
            }
            Err(rej) => {
                self.rejected(from, mt::SESSION_DELETION_REQUEST, &rej);
                rsp.cause = rej.cause;
                rsp.offending_ie = rej.offending_ie;
            }
        }
        msg::emit(
            &Self::session_header(mt::SESSION_DELETION_RESPONSE, cp_seid, seq),
            &rsp,
        )
    }

    /// Session `seid`'s SRRs as they are now, monitored from now on.
    fn monitor_qos(&mut self, seid: u64) {
        if let Some(s) = self.sessions.get(seid) {
            let srrs: Vec<crate::rules::Srr> = s.srrs.values().cloned().collect();
            self.qos
                .set_session(seid, srrs.iter(), self.now, SystemTime::now());
        }
    }

    /// What the associations ask of GTP-U path QoS monitoring (clause 5.24.3), with a
    /// generation that moves when that may have changed.
    pub fn path_qos_controls(
        &self,
    ) -> (u64, Vec<(NodeId, Vec<msg::GtpuPathQosControlInformation>)>) {
        let v = self
            .assocs
            .iter()
            .filter(|(_, a)| !a.path_qos.is_empty())
            .map(|(n, a)| (n.clone(), a.path_qos.clone()))
            .collect();
        (self.path_qos_generation, v)
    }

    /// GTP-U Path QoS Reports to the CP function of association `node`: a Node Report
    /// Request (Node Report Type GPQR, clause 7.4.5.1), retransmitted like every request.
    pub fn send_path_qos_reports(
        &mut self,
        node: &NodeId,
        reports: Vec<msg::GtpuPathQosReport>,
        now: Instant,
    ) -> Vec<Out> {
        let mut out = Vec::new();
        let Some(a) = self.assocs.get(node) else {
            return out;
        };
        let to = a.addr;
        let body = msg::NodeReportRequest {
            node_id: self.cfg.node_id.clone(),
            node_report_type: Flags::from_bits(&[pfcp::ie::node_report_type::GPQR], 1),
            user_plane_path_failure_report: None,
            user_plane_path_recovery_report: None,
            gtpu_path_qos_reports: reports,
            other: Vec::new(),
        };
        let seq = self.seq();
        let data = msg::emit(&node_header(mt::NODE_REPORT_REQUEST, seq), &body);
        self.request(
            to,
            seq,
            data,
            Pending::NodeReport(node.clone()),
            now,
            &mut out,
        );
        out
    }

    /// QoS flows monitored now (clause 5.24.2).
    pub fn qos_flows(&self) -> usize {
        self.qos.flows()
    }

    /// The QoS monitoring packets due at `now`: (session, QFI) pairs, for upfd to send
    /// to the gNB of each (crate::qos_monitoring).
    pub fn qos_probes(&mut self, now: Instant) -> Vec<(u64, u8)> {
        self.qos.due_probes(now)
    }

    /// When QoS monitoring next has something to do.
    pub fn qos_next_due(&self) -> Option<Instant> {
        self.qos.next_due()
    }

    /// The session whose PDRs have local TEID `teid`: the data path's answer, or the
    /// sessions' own when the data path cannot say.
    pub fn session_of_teid(&self, teid: u32) -> Option<u64> {
        match self.sessions.find_by_teid(teid) {
            Some(found) => found,
            None => self.sessions.iter().find_map(|s| {
                s.pdrs
                    .values()
                    .any(|p| p.pdi.local_fteid.is_some_and(|f| f.teid == teid))
                    .then_some(s.up_seid)
            }),
        }
    }

    /// A gNB's answer to a QoS monitoring packet, on uplink TEID `teid` for QoS flow
    /// `qfi`, with delays `d`: the event-triggered Session Reports it causes, sent.
    pub fn qos_answer(
        &mut self,
        teid: u32,
        qfi: u8,
        d: crate::qos_monitoring::Delays,
        now: Instant,
    ) -> Vec<Out> {
        let Some(seid) = self.session_of_teid(teid) else {
            self.stats.qos_answers_unmatched += 1;
            return Vec::new();
        };
        self.stats.qos_answers += 1;
        let reports = self.qos.answer(seid, qfi, d, now, SystemTime::now());
        if reports.is_empty() || !self.can_report(seid) {
            return Vec::new();
        }
        self.send_report(seid, msg::SessionReportRequest::session(reports), now)
    }

    /// The periodic QoS monitoring reports due at `now`, sent; flows of sessions gone
    /// without a release (their association ended) forgotten.
    pub fn poll_qos(&mut self, now: Instant) -> Vec<Out> {
        for seid in self.qos.seids() {
            if self.sessions.get(seid).is_none() {
                self.qos.forget(seid);
            }
        }
        let mut out = Vec::new();
        for (seid, reports) in self.qos.due_reports(now, SystemTime::now()) {
            if self.can_report(seid) {
                out.extend(self.send_report(
                    seid,
                    msg::SessionReportRequest::session(reports),
                    now,
                ));
            }
        }
        out
    }

    fn usage_reports(&self, seid: u64, reports: &[Report]) -> Vec<msg::UsageReport> {
        let Some(s) = self.sessions.get(seid) else {
            return Vec::new();
        };
        reports
            .iter()
            .map(|r| match s.urrs.get(&r.urr_id) {
                Some(u) => usage_report(u, r),
                // A removed URR: report with the default method (volume).
                None => usage_report_plain(r),
            })
            .collect()
    }

    /// How many responses are cached for retransmitted requests.
    pub fn cached_responses(&self) -> usize {
        self.cache.map.len()
    }
}

/// Read the CP F-SEID's SEID from a request the typed decoder rejected, if it is there.
fn cp_seid_of(data: &[u8]) -> Option<u64> {
    let h = Header::new_checked(data).ok()?;
    let start = h.header_len();
    for r in pfcp::ie::tlvs(data.get(start..)?, start) {
        let r = r.ok()?;
        if r.ie_type == types::FSEID {
            return <FSeid as pfcp::ie::Value>::decode(r.value)
                .ok()
                .map(|f| f.seid);
        }
    }
    None
}

fn cause_of(rsp: &[u8]) -> Option<CauseValue> {
    let h = Header::new_checked(rsp).ok()?;
    let start = h.header_len();
    for r in pfcp::ie::tlvs(rsp.get(start..)?, start) {
        let r = r.ok()?;
        if r.ie_type == types::CAUSE {
            return r.value.first().map(|c| CauseValue(*c));
        }
    }
    None
}

fn reject(
    rej: &Rejection,
    cause: &mut CauseValue,
    offending: &mut Option<u16>,
    failed: &mut Option<pfcp::ie::FailedRuleId>,
) {
    *cause = rej.cause;
    *offending = rej.offending_ie;
    *failed = rej.failed_rule;
}

fn ue_ip_ie(u: &UeIp) -> UeIpAddress {
    UeIpAddress {
        spare: 0,
        ipv4: u.ipv4,
        ipv6: u.ipv6,
        destination: u.is_destination,
        choose_v4: false,
        choose_v6: false,
        ipv6_prefix_delegation_bits: None,
        ipv6_prefix_length: u.ipv6_prefix_len,
    }
}

fn add_created(
    c: &Created,
    pdrs: &mut Vec<msg::CreatedPdr>,
    tes: &mut Vec<msg::CreatedTrafficEndpoint>,
) {
    for (id, f, ue) in &c.pdrs {
        pdrs.push(msg::CreatedPdr {
            pdr_id: *id,
            local_fteid: f.map(|f| f.to_ie()),
            ue_ip_address: ue.iter().map(ue_ip_ie).collect(),
            other: Vec::new(),
        });
    }
    for (id, f, ue) in &c.traffic_endpoints {
        tes.push(msg::CreatedTrafficEndpoint {
            traffic_endpoint_id: *id,
            local_fteid: f.map(|f| f.to_ie()),
            ue_ip_address: ue.iter().map(ue_ip_ie).collect(),
            other: Vec::new(),
        });
    }
}

fn trigger(r: &Report) -> Flags {
    Flags::from_bits(&[r.reason.bit()], 3)
}

/// Flow Direction of Flow Information (clause 8.2.91): bidirectional.
const FLOW_BIDIRECTIONAL: u8 = 3;

fn usage_report_plain(r: &Report) -> msg::UsageReport {
    let u = &r.usage;
    msg::UsageReport {
        urr_id: r.urr_id,
        ur_seqn: r.seqn,
        usage_report_trigger: trigger(r),
        start_time: Some(to_ntp(r.start)),
        end_time: Some(to_ntp(r.end)),
        volume_measurement: Some(VolumeMeasurement {
            spare: 0,
            total: Some(u.total_bytes()),
            uplink: Some(u.ul_bytes),
            downlink: Some(u.dl_bytes),
            total_packets: Some(u.total_packets()),
            uplink_packets: Some(u.ul_packets),
            downlink_packets: Some(u.dl_packets),
        }),
        duration_measurement: None,
        application_detection_information: r.app.as_ref().map(|a| {
            msg::ApplicationDetectionInformation {
                application_id: pfcp::ie::Text::new(&a.app),
                application_instance_id: Some(pfcp::ie::Text::new(&a.instance)),
                flow_information: Some(pfcp::ie::FlowInformation {
                    // The flow both ways, written downlink-oriented.
                    direction: FLOW_BIDIRECTIONAL,
                    flow_description: pfcp::ie::Text::new(&a.flow_description()),
                }),
                pdr_id: None,
                other: Vec::new(),
            }
        }),
        ue_ip_address: None,
        network_instance: None,
        time_of_first_packet: u.first_packet.map(to_ntp),
        time_of_last_packet: u.last_packet.map(to_ntp),
        usage_information: None,
        query_urr_reference: None,
        event_time_stamps: Vec::new(),
        ethernet_traffic_information: None,
        other: Vec::new(),
    }
}

/// A Usage Report for a URR (clause 7.5.5.2): the measurements its Measurement Method asks.
fn usage_report(urr: &crate::rules::Urr, r: &Report) -> msg::UsageReport {
    let mut rep = usage_report_plain(r);
    let m = &urr.rule.measurement_method;
    if !m.get(pfcp::ie::measurement_method::VOLUM) {
        rep.volume_measurement = None;
    }
    if m.get(pfcp::ie::measurement_method::DURAT) {
        rep.duration_measurement = Some(r.end.saturating_sub(r.start) as u32);
    }
    rep
}
