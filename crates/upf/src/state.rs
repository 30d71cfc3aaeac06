//! The UP function's state on disk, so that a restart (crash, upgrade, configuration
//! change) keeps every session (TS 23.527 clause 4.3: a UPF that keeps its state keeps
//! its Recovery Time Stamp, and its CP functions see nothing).
//!
//! Two files in the state directory:
//! - `state`: a snapshot, written to `state.tmp`, synced and renamed over the old one
//!   (atomic): a header, then every association, the PFD table (the applications with
//!   their data path indices and PFDs) and every session, then an end record that
//!   counts them, so a snapshot cut short is seen as such.
//! - `journal.<generation>`: what changed since the snapshot of that generation, one
//!   frame per batch of N4 work, appended before the batch's responses are sent (so
//!   nothing an SMF was told is missing), the responses themselves included (so that a
//!   request retransmitted to the next upfd is answered as it was, not executed twice).
//!   Its first frame names the generation.
//!
//! A new snapshot can be written while upfd goes on ([`StateDir::begin_journal`], then
//! [`StateDir::write_snapshot_from`] on another thread): from the moment its first
//! records are taken, batches go to both the old journal and the new one, so whichever
//! snapshot is in place when upfd is killed has a complete journal beside it. Its
//! sessions are read a few at a time between N4's batches (a fuzzy snapshot): each
//! journal record holds a session whole, so applying the journal after the snapshot
//! gives every session as it was last changed, whenever the snapshot read it.
//!
//! Each frame is `length (u32 LE) | CRC-32 (u32 LE) | postcard of Vec<Record>`. Loading
//! checks every frame, the format version and the generations; anything wrong and
//! nothing is applied ([`LoadError`]). The one exception is the journal's last frame
//! when it is incomplete: a process killed in the middle of a write leaves that, and the
//! batch it held was never answered (its requests are retransmitted by the SMFs).
//!
//! The rules are kept as the session model holds them (`rules.rs`), PFCP values in their
//! wire encoding (`wire`), so the file does not depend on the data path's layout: a new
//! data-path program or map layout is installed from the same state.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::fastpath::Usage;
use crate::rules::Session;

/// Version of the file format; a file of another version is not loaded (a clean start).
pub const FORMAT: u32 = 2;

const MAGIC: &[u8; 8] = b"UPFDSTAT";
/// A frame larger than this is taken for corruption (a snapshot frame holds one record).
const MAX_FRAME: usize = 64 << 20;

/// What a snapshot starts with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: u32,
    /// Counts snapshots; the journal names the one it follows.
    pub generation: u64,
    /// The Recovery Time Stamp CP functions know (clause 8.2.65), kept across restarts.
    pub recovery_time_stamp: u32,
    /// What of the configuration the state depends on (node ID, TEID range, pools ...):
    /// a state written under another is not loaded.
    pub config: String,
    /// The seed of the TEID index (fastpath::teid_index): restored TEIDs keep their slots.
    pub teid_seed: u64,
    pub written_unix: u64,
}

/// Where the data path that was running keeps its URR counters: the counts since the
/// last persisted state are read from there after the new data path took over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CounterTable {
    /// Kernel ID of the `sess_pages` map (the sessions' entries: the home URRs' lanes).
    pub map_id: u32,
    /// Kernel ID of the `cells` map (the other URRs' lanes).
    pub cells_map_id: u32,
    /// The layout read: lanes per entry or cell, entries and cells per page.
    pub lanes: u32,
    pub per_page: u32,
    pub cells_per_page: u32,
}

/// One association with a CP function (clause 6.2.6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedAssociation {
    #[serde(with = "wire")]
    pub node: pfcp::ie::NodeId,
    pub addr: SocketAddr,
    pub recovery_time_stamp: u32,
    #[serde(with = "wire_opt")]
    pub cp_features: Option<pfcp::ie::Flags>,
}

/// What an association asked of GTP-U path QoS monitoring (clause 5.24.3): its GTP-U
/// Path QoS Control Information IEs, their bodies wire-encoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedPathQos {
    #[serde(with = "wire")]
    pub node: pfcp::ie::NodeId,
    pub controls: Vec<Vec<u8>>,
}

impl SavedPathQos {
    pub fn of(node: &pfcp::ie::NodeId, c: &[pfcp::msg::GtpuPathQosControlInformation]) -> Self {
        SavedPathQos {
            node: node.clone(),
            controls: c
                .iter()
                .map(|c| {
                    let mut b = Vec::new();
                    pfcp::msg::Group::encode_body(c, &mut b);
                    b
                })
                .collect(),
        }
    }

    pub fn controls(&self) -> Result<Vec<pfcp::msg::GtpuPathQosControlInformation>, String> {
        self.controls
            .iter()
            .map(|b| {
                <pfcp::msg::GtpuPathQosControlInformation as pfcp::msg::Group>::decode_body(
                    b, 0, 0, 0,
                )
                .map_err(|e| format!("GTP-U path QoS control of {}: {e:?}", self.node))
            })
            .collect()
    }
}

/// A URR's reporting state (report.rs) as kept on disk.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SavedUrr {
    pub urr_id: u32,
    /// Where the data path counted it ([`crate::fastpath::FastPath::urr_handle`]).
    pub handle: Option<u32>,
    pub seqn: u32,
    pub start: u64,
    pub reported: Usage,
    /// Counted by data paths before the current one and not reported yet.
    pub carried: Usage,
    pub active_secs: u64,
    pub quota_reported: bool,
}

/// A Session Report Request sent and not answered yet: sent again after a restart,
/// with its sequence number, so its usage is not lost and not counted twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedReport {
    pub sequence: u32,
    pub to: SocketAddr,
    pub data: Vec<u8>,
}

/// One session: its rules, its URRs' reporting state and its unanswered reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedSession {
    /// Shared with the session table: saving a session copies nothing.
    pub session: std::sync::Arc<Session>,
    pub urrs: Vec<SavedUrr>,
    pub reports: Vec<SavedReport>,
}

/// One application of the PFD table (pfd.rs) as kept on disk: its data path index, so
/// that restored PDRs and the data path go on naming it by the same one, and its PFDs as
/// text (flow descriptions as received, `http://` URLs, domain names with their
/// `abi::APP_P_*` bits), read back through pfd.rs with the same checks as at first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedApp {
    pub id: String,
    pub index: u16,
    /// Configured (`applications`), not provisioned by an SMF.
    pub local: bool,
    pub flow_descriptions: Vec<String>,
    pub urls: Vec<String>,
    pub domains: Vec<(String, u8)>,
}

impl SavedApp {
    pub fn of(a: &crate::pfd::App) -> SavedApp {
        SavedApp {
            id: a.id.clone(),
            index: a.index,
            local: a.local,
            flow_descriptions: a.pfds.flow_texts.clone(),
            urls: a
                .pfds
                .urls
                .iter()
                .map(|u| format!("http://{}{}", u.host, u.path))
                .collect(),
            domains: a
                .pfds
                .domains
                .iter()
                .map(|d| (d.name.clone(), d.protocols))
                .collect(),
        }
    }

    /// Every application of `t`.
    pub fn all(t: &crate::pfd::PfdTable) -> Vec<SavedApp> {
        t.iter().map(SavedApp::of).collect()
    }

    /// The PFDs, checked as pfd.rs checks an SMF's.
    pub fn pfds(&self) -> Result<crate::pfd::AppPfds, String> {
        let mut p = crate::pfd::AppPfds::default();
        for f in &self.flow_descriptions {
            p.add_flow(f)?;
        }
        for u in &self.urls {
            p.add_url(u)?;
        }
        for (name, protocols) in &self.domains {
            p.add_domain_bits(name, *protocols)?;
        }
        Ok(p)
    }
}

/// The PFD table of saved applications, every one with its index.
pub fn pfd_table(apps: &[SavedApp]) -> Result<crate::pfd::PfdTable, String> {
    let mut t = crate::pfd::PfdTable::new();
    for a in apps {
        let pfds = a
            .pfds()
            .map_err(|e| format!("application {:?}: {e}", a.id))?;
        t.set_with_index(&a.id, a.index, pfds, a.local)
            .map_err(|e| e.to_string())?;
    }
    Ok(t)
}

/// What a frame holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Record {
    Header(Header),
    /// The associations now (all of them: there are few).
    Associations(Vec<SavedAssociation>),
    Session(Box<SavedSession>),
    SessionGone(u64),
    Counters(CounterTable),
    /// The sequence number of the next request upfd sends (clause 7.6.4): not reused
    /// after a restart, or a CP function may take a new request for a retransmission.
    Sequence(u32),
    /// Last record of a snapshot: how many records came before it.
    End {
        records: u64,
    },
    /// First record of a journal: the snapshot generation it follows.
    JournalOf {
        generation: u64,
    },
    /// The PFD table now (every application, with its index and PFDs): in every
    /// snapshot, and journalled when PFD Management (or the configuration at start)
    /// changed it. Absent in states of upfd before it: no application is kept.
    Pfds(Vec<SavedApp>),
    /// The Redirect Information of a session's FARs (clause 8.2.20), wire-encoded by
    /// FAR ID: right after the session's record, whenever it has any. A record of its
    /// own so that the session's encoding (and every state written before it) stays
    /// as it was.
    Redirects {
        seid: u64,
        fars: Vec<(u32, Vec<u8>)>,
    },
    /// Responses upfd sent (clause 6.4's cache): a request retransmitted to a restarted
    /// upfd, whose answer was lost when the old one stopped, is answered as it was
    /// instead of being executed twice (a second session for one establishment).
    Responses(Vec<SavedResponse>),
    /// A session's Session Reporting Rules (clause 5.2.1): by SRR ID, the bodies of its
    /// QoS Monitoring per QoS flow Control Information IEs, wire-encoded. Right after
    /// the session's record, whenever it has any; a record of its own, as `Redirects`.
    Srrs {
        seid: u64,
        srrs: Vec<(u8, Vec<Vec<u8>>)>,
    },
    /// The associations' GTP-U path QoS monitoring now (those that asked for any): after
    /// every `Associations` record, and whenever it changed.
    PathQos(Vec<SavedPathQos>),
}

/// A response of the cache (n4.rs), as kept on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedResponse {
    /// Where the request came from, and its sequence number: the cache's key.
    pub to: SocketAddr,
    pub sequence: u32,
    /// When it was sent, milliseconds since the UNIX epoch (it is kept for the cache's
    /// time to live from then).
    pub sent_unix_ms: u64,
    pub data: Vec<u8>,
}

impl Record {
    /// The records that keep `s`: its own, then its FARs' Redirect Information if any.
    pub fn of_session(s: SavedSession) -> Vec<Record> {
        let seid = s.session.up_seid;
        let fars: Vec<(u32, Vec<u8>)> = s
            .session
            .fars
            .values()
            .filter_map(|f| {
                let r = f.forwarding.as_ref()?.redirect.as_ref()?;
                let mut b = Vec::new();
                pfcp::ie::Value::encode(r, &mut b);
                Some((f.id, b))
            })
            .collect();
        let srrs: Vec<(u8, Vec<Vec<u8>>)> = s
            .session
            .srrs
            .values()
            .map(|r| {
                let bodies = r
                    .qos
                    .iter()
                    .map(|c| {
                        let mut b = Vec::new();
                        pfcp::msg::Group::encode_body(c, &mut b);
                        b
                    })
                    .collect();
                (r.id, bodies)
            })
            .collect();
        let mut v = vec![Record::Session(Box::new(s))];
        if !fars.is_empty() {
            v.push(Record::Redirects { seid, fars });
        }
        if !srrs.is_empty() {
            v.push(Record::Srrs { seid, srrs });
        }
        v
    }
}

/// The state as loaded: what to restore.
#[derive(Debug, Clone, PartialEq)]
pub struct Saved {
    pub header: Header,
    pub associations: Vec<SavedAssociation>,
    /// By UP SEID, in no particular order.
    pub sessions: Vec<SavedSession>,
    pub counters: Option<CounterTable>,
    pub sequence: Option<u32>,
    /// The PFD table ([`pfd_table`]); None: the state has none (written before upfd kept
    /// it).
    pub pfds: Option<Vec<SavedApp>>,
    /// The responses of the cache, oldest first (later ones replace earlier ones of the
    /// same key).
    pub responses: Vec<SavedResponse>,
    /// GTP-U path QoS monitoring by association (empty in states before it).
    pub path_qos: Vec<SavedPathQos>,
    /// An incomplete last journal frame was dropped (upfd killed while writing it).
    pub torn_tail: bool,
    /// Octets of the journal up to the end of its last complete frame: where appending
    /// goes on ([`StateDir::begin_journal`] cuts the rest).
    pub journal_len: u64,
}

/// Why a state was not loaded. Nothing of it is applied.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{path}: not an upfd state file")]
    NotState { path: PathBuf },
    #[error("{path}: format version {found}, this upfd reads {FORMAT}")]
    Version { path: PathBuf, found: u32 },
    #[error("{path}: frame at offset {offset}: {why}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        why: String,
    },
    #[error("{path}: {why}")]
    Inconsistent { path: PathBuf, why: String },
    #[error("written for another configuration ({found:?}; now {now:?})")]
    Config { found: String, now: String },
}

/// The state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
}

/// The journal, open for appending.
pub struct Journal {
    file: File,
    path: PathBuf,
    bytes: u64,
}

impl StateDir {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        StateDir { dir: dir.into() }
    }

    pub fn snapshot_path(&self) -> PathBuf {
        self.dir.join("state")
    }

    /// The journal that follows the snapshot of `generation`.
    pub fn journal_path(&self, generation: u64) -> PathBuf {
        self.dir.join(format!("journal.{generation}"))
    }

    /// The state's files: the snapshot and every journal, whatever its generation.
    fn files(&self) -> Vec<PathBuf> {
        let mut v = vec![self.snapshot_path()];
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if let Some(g) = name.strip_prefix("journal.") {
                    if g.parse::<u64>().is_ok() {
                        v.push(e.path());
                    }
                }
            }
        }
        v
    }

    /// The state kept, if there is one. `config` is [`Header::config`] of the running
    /// configuration. `Ok(None)`: no state (a first start).
    pub fn load(&self, config: &str) -> Result<Option<Saved>, LoadError> {
        let path = self.snapshot_path();
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(LoadError::Io { path, err }),
        };
        let journal = |generation| {
            let jpath = self.journal_path(generation);
            match std::fs::read(&jpath) {
                Ok(j) => Ok(Some((jpath, j))),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(err) => Err(LoadError::Io { path: jpath, err }),
            }
        };
        parse(&path, &bytes, journal, config).map(Some)
    }

    /// Start the journal that will follow the snapshot of `generation`: empty but for
    /// its first frame (one left by a snapshot that never came into place is stale).
    pub fn begin_journal(&self, generation: u64) -> std::io::Result<Journal> {
        self.continue_journal(generation, Some(0))
    }

    /// Go on with the journal of `generation`, keeping only its first `keep` octets
    /// (what loaded, [`Saved::journal_len`]: an incomplete last frame is cut; None: all
    /// of it).
    pub fn continue_journal(&self, generation: u64, keep: Option<u64>) -> std::io::Result<Journal> {
        std::fs::create_dir_all(&self.dir)?;
        let path = self.journal_path(generation);
        let mut file = OpenOptions::new().append(true).create(true).open(&path)?;
        if let Some(k) = keep {
            if file.metadata()?.len() > k {
                file.set_len(k)?;
            }
        }
        let mut bytes = file.metadata()?.len();
        if bytes == 0 {
            let mut frame = Vec::new();
            encode_frame(&[Record::JournalOf { generation }], &mut frame)?;
            file.write_all(&frame)?;
            bytes = frame.len() as u64;
        }
        Ok(Journal { file, path, bytes })
    }

    /// Write the snapshot of `header.generation` (`records` after the header), synced,
    /// and put it in place of the last one in one rename; then the journal of the
    /// generation before is no longer needed and goes. The new generation's journal
    /// ([`StateDir::begin_journal`]) must exist before: a crash after the rename finds
    /// it beside the snapshot.
    pub fn write_snapshot_file(
        &self,
        header: &Header,
        records: impl IntoIterator<Item = Record>,
    ) -> std::io::Result<()> {
        self.write_snapshot_from(header, records.into_iter().map(Ok))
    }

    /// [`StateDir::write_snapshot_file`] of records that come as they are taken (from
    /// N4's thread, a step at a time): an error among them abandons the snapshot (the
    /// one in place stays, with its journal) and is returned.
    pub fn write_snapshot_from(
        &self,
        header: &Header,
        records: impl IntoIterator<Item = std::io::Result<Record>>,
    ) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let tmp = self.dir.join("state.tmp");
        let written = (|| {
            let mut f = std::io::BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
            f.write_all(MAGIC)?;
            f.write_all(&FORMAT.to_le_bytes())?;
            let mut n = 0u64;
            let mut frame = Vec::new();
            for r in std::iter::once(Ok(Record::Header(header.clone()))).chain(records) {
                encode_frame(std::slice::from_ref(&r?), &mut frame)?;
                f.write_all(&frame)?;
                n += 1;
            }
            encode_frame(&[Record::End { records: n }], &mut frame)?;
            f.write_all(&frame)?;
            let f = f.into_inner().map_err(|e| e.into_error())?;
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, self.snapshot_path())?;
        if let Ok(d) = File::open(&self.dir) {
            let _ = d.sync_all();
        }
        // Journals of earlier generations: their snapshot is gone.
        for p in self.files().into_iter().skip(1) {
            let older = p
                .extension()
                .and_then(|g| g.to_str()?.parse::<u64>().ok())
                .is_some_and(|g| g < header.generation);
            if older {
                let _ = std::fs::remove_file(p);
            }
        }
        Ok(())
    }

    /// Write a snapshot of `records` and start its empty journal, all before returning.
    pub fn write_snapshot(
        &self,
        header: &Header,
        records: impl IntoIterator<Item = Record>,
    ) -> std::io::Result<Journal> {
        let j = self.begin_journal(header.generation)?;
        self.write_snapshot_file(header, records)?;
        Ok(j)
    }

    /// Remove the state (a clean start that must not come back).
    pub fn remove(&self) -> std::io::Result<()> {
        for p in self.files() {
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Set a bad state aside (renamed with `.bad`), for whoever looks into it.
    pub fn set_aside(&self) -> std::io::Result<()> {
        for p in self.files() {
            if p.exists() {
                let mut bad = p.clone().into_os_string();
                bad.push(".bad");
                std::fs::rename(&p, bad)?;
            }
        }
        Ok(())
    }
}

/// A state from its octets: the snapshot (`path`, for errors), and the journal of its
/// generation as `journal` reads it (its path and octets; None: there is none). Every
/// check of [`StateDir::load`] is here (and fuzzed: `fuzz/fuzz_targets/state_load.rs`).
pub fn parse(
    path: &Path,
    bytes: &[u8],
    journal: impl FnOnce(u64) -> Result<Option<(PathBuf, Vec<u8>)>, LoadError>,
    config: &str,
) -> Result<Saved, LoadError> {
    let path = path.to_path_buf();
    if bytes.len() < 12 || &bytes[..8] != MAGIC {
        return Err(LoadError::NotState { path });
    }
    let found = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if found != FORMAT {
        return Err(LoadError::Version { path, found });
    }
    let (decoded, torn) = frames(&path, bytes, 12)?;
    if torn {
        return Err(LoadError::Inconsistent {
            path,
            why: "cut short (no end record)".into(),
        });
    }
    let mut records = decoded.into_iter().flat_map(|(r, _)| r);
    let header = match records.next() {
        Some(Record::Header(h)) => h,
        _ => {
            return Err(LoadError::Inconsistent {
                path,
                why: "does not start with a header".into(),
            })
        }
    };
    if header.format != FORMAT {
        return Err(LoadError::Version {
            path,
            found: header.format,
        });
    }
    if header.config != config {
        return Err(LoadError::Config {
            found: header.config,
            now: config.to_string(),
        });
    }
    let mut s = Builder::default();
    let mut ended = false;
    // The header was record 0.
    for (count, r) in (1u64..).zip(records) {
        if ended {
            return Err(LoadError::Inconsistent {
                path,
                why: "records after the end record".into(),
            });
        }
        match r {
            Record::End { records } if records == count => ended = true,
            Record::End { records } => {
                return Err(LoadError::Inconsistent {
                    path,
                    why: format!("end record counts {records} records, there are {count}"),
                })
            }
            other => s.apply(other).map_err(|why| LoadError::Inconsistent {
                path: path.clone(),
                why,
            })?,
        }
    }
    if !ended {
        return Err(LoadError::Inconsistent {
            path,
            why: "cut short (no end record)".into(),
        });
    }
    let mut torn_tail = false;
    let mut journal_len = 0;
    if let Some((jpath, j)) = journal(header.generation)? {
        let (decoded, torn) = frames(&jpath, &j, 0)?;
        torn_tail = torn;
        journal_len = decoded.last().map_or(0, |(_, end)| *end);
        let mut records = decoded.into_iter().flat_map(|(r, _)| r);
        match records.next() {
            None => {}
            Some(Record::JournalOf { generation }) if generation == header.generation => {
                for r in records {
                    match r {
                        Record::Header(_) | Record::End { .. } | Record::JournalOf { .. } => {
                            return Err(LoadError::Inconsistent {
                                path: jpath,
                                why: "a snapshot record in the journal".into(),
                            })
                        }
                        other => s.apply(other).map_err(|why| LoadError::Inconsistent {
                            path: jpath.clone(),
                            why,
                        })?,
                    }
                }
            }
            Some(other) => {
                return Err(LoadError::Inconsistent {
                    path: jpath,
                    why: format!(
                        "starts with {other:.40?}, not the journal of generation {}",
                        header.generation
                    ),
                })
            }
        }
    }
    Ok(Saved {
        header,
        associations: s.associations,
        sessions: s.sessions.into_values().collect(),
        counters: s.counters,
        sequence: s.sequence,
        pfds: s.pfds,
        responses: s.responses,
        path_qos: s.path_qos,
        torn_tail,
        journal_len,
    })
}

impl Journal {
    /// Append one frame of `records` (one write: a batch is kept whole or, cut short by
    /// a kill, dropped whole on load).
    pub fn append(&mut self, records: &[Record]) -> std::io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut frame = Vec::new();
        encode_frame(records, &mut frame)?;
        self.file.write_all(&frame)?;
        self.bytes += frame.len() as u64;
        Ok(())
    }

    /// Octets written so far (to decide when a new snapshot is due).
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// One frame of `records`, as the journal holds it (tests and fuzzing).
pub fn encode_records(records: &[Record]) -> std::io::Result<Vec<u8>> {
    let mut v = Vec::new();
    encode_frame(records, &mut v)?;
    Ok(v)
}

fn encode_frame(records: &[Record], out: &mut Vec<u8>) -> std::io::Result<()> {
    out.clear();
    out.extend_from_slice(&[0; 8]);
    let out2 = std::mem::take(out);
    let mut v = postcard::to_extend(records, out2).map_err(std::io::Error::other)?;
    let len = v.len() - 8;
    if len > MAX_FRAME {
        return Err(std::io::Error::other(format!(
            "a state frame of {len} octets (at most {MAX_FRAME})"
        )));
    }
    let crc = crc32fast::hash(&v[8..]);
    v[..4].copy_from_slice(&(len as u32).to_le_bytes());
    v[4..8].copy_from_slice(&crc.to_le_bytes());
    *out = v;
    Ok(())
}

/// A frame's records and the offset just past it.
type Frame = (Vec<Record>, u64);

/// The frames of `bytes` from `at`, decoded, and whether the last one was incomplete.
fn frames(path: &Path, bytes: &[u8], mut at: usize) -> Result<(Vec<Frame>, bool), LoadError> {
    let mut out = Vec::new();
    while at < bytes.len() {
        let corrupt = |why: String| LoadError::Corrupt {
            path: path.to_path_buf(),
            offset: at as u64,
            why,
        };
        if bytes.len() - at < 8 {
            return Ok((out, true));
        }
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap_or_default()) as usize;
        let crc = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap_or_default());
        if len > MAX_FRAME {
            return Err(corrupt(format!("length {len} is more than {MAX_FRAME}")));
        }
        let Some(payload) = bytes.get(at + 8..at + 8 + len) else {
            return Ok((out, true));
        };
        if crc32fast::hash(payload) != crc {
            return Err(corrupt("checksum mismatch".into()));
        }
        let records: Vec<Record> =
            postcard::from_bytes(payload).map_err(|e| corrupt(format!("undecodable: {e}")))?;
        at += 8 + len;
        out.push((records, at as u64));
    }
    Ok((out, false))
}

/// Applies records in order.
#[derive(Default)]
struct Builder {
    associations: Vec<SavedAssociation>,
    sessions: std::collections::HashMap<u64, SavedSession>,
    counters: Option<CounterTable>,
    sequence: Option<u32>,
    pfds: Option<Vec<SavedApp>>,
    responses: Vec<SavedResponse>,
    path_qos: Vec<SavedPathQos>,
}

impl Builder {
    fn apply(&mut self, r: Record) -> Result<(), String> {
        match r {
            Record::Associations(a) => self.associations = a,
            Record::PathQos(p) => self.path_qos = p,
            Record::Session(s) => {
                let seid = s.session.up_seid;
                if seid == 0 {
                    return Err("a session with SEID 0".into());
                }
                self.sessions.insert(seid, *s);
            }
            Record::SessionGone(seid) => {
                self.sessions.remove(&seid);
            }
            Record::Counters(c) => self.counters = Some(c),
            Record::Sequence(q) => self.sequence = Some(q),
            Record::Pfds(p) => self.pfds = Some(p),
            Record::Responses(r) => self.responses.extend(r),
            Record::Redirects { seid, fars } => {
                let s = self.sessions.get_mut(&seid).ok_or_else(|| {
                    format!("Redirect Information of session {seid:#x}, which is not there")
                })?;
                let session = std::sync::Arc::make_mut(&mut s.session);
                for (far, wire) in fars {
                    let r = <pfcp::ie::RedirectInformation as pfcp::ie::Value>::decode(&wire)
                        .map_err(|e| {
                            format!("session {seid:#x} FAR {far}: Redirect Information: {e:?}")
                        })?;
                    let fw = session
                        .fars
                        .get_mut(&far)
                        .and_then(|f| f.forwarding.as_mut())
                        .ok_or_else(|| format!("Redirect Information of session {seid:#x}'s FAR {far}, which does not forward"))?;
                    fw.redirect = Some(r);
                }
            }
            Record::Srrs { seid, srrs } => {
                let s = self
                    .sessions
                    .get_mut(&seid)
                    .ok_or_else(|| format!("SRRs of session {seid:#x}, which is not there"))?;
                let session = std::sync::Arc::make_mut(&mut s.session);
                for (id, bodies) in srrs {
                    let qos = bodies
                        .iter()
                        .map(|b| {
                            <pfcp::msg::QosMonitoringPerQosFlowControlInformation as pfcp::msg::Group>::decode_body(b, 0, 0, 0)
                                .map_err(|e| format!("session {seid:#x} SRR {id}: {e:?}"))
                        })
                        .collect::<Result<Vec<_>, String>>()?;
                    session.srrs.insert(id, crate::rules::Srr { id, qos });
                }
            }
            Record::Header(_) => return Err("a second header".into()),
            Record::End { .. } | Record::JournalOf { .. } => {
                return Err("a journal or end record inside the snapshot".into())
            }
        }
        Ok(())
    }
}

/// Serde for PFCP values in their wire encoding (TS 29.244 clause 8.2): the codec is the
/// one the N4 tests check against tshark, and the encoding does not change between
/// versions the way a struct layout may.
pub mod wire {
    use pfcp::ie::Value;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Value, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        let mut b = Vec::new();
        v.encode(&mut b);
        b.serialize(s)
    }

    pub fn deserialize<'de, T: Value, D: Deserializer<'de>>(d: D) -> Result<T, D::Error> {
        let b = Vec::<u8>::deserialize(d)?;
        T::decode(&b).map_err(|e| serde::de::Error::custom(format!("{e:?}")))
    }
}

/// [`wire`] for an optional value.
pub mod wire_opt {
    use pfcp::ie::Value;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub fn serialize<T: Value, S: Serializer>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
        v.as_ref()
            .map(|v| {
                let mut b = Vec::new();
                v.encode(&mut b);
                b
            })
            .serialize(s)
    }

    pub fn deserialize<'de, T: Value, D: Deserializer<'de>>(d: D) -> Result<Option<T>, D::Error> {
        match Option::<Vec<u8>>::deserialize(d)? {
            None => Ok(None),
            Some(b) => T::decode(&b)
                .map(Some)
                .map_err(|e| serde::de::Error::custom(format!("{e:?}"))),
        }
    }
}

/// [`wire`] for a list of values.
pub mod wire_seq {
    use pfcp::ie::Value;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use thin_vec::ThinVec;

    pub fn serialize<T: Value, S: Serializer>(v: &ThinVec<T>, s: S) -> Result<S::Ok, S::Error> {
        let all: Vec<Vec<u8>> = v
            .iter()
            .map(|v| {
                let mut b = Vec::new();
                v.encode(&mut b);
                b
            })
            .collect();
        all.serialize(s)
    }

    pub fn deserialize<'de, T: Value, D: Deserializer<'de>>(d: D) -> Result<ThinVec<T>, D::Error> {
        Vec::<Vec<u8>>::deserialize(d)?
            .iter()
            .map(|b| T::decode(b).map_err(|e| serde::de::Error::custom(format!("{e:?}"))))
            .collect()
    }
}

/// A Network Instance: the text, shared again on load ([`crate::rules::network_instance`]).
pub mod ni_opt {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::rules::NetworkInstance;

    pub fn serialize<S: Serializer>(v: &Option<NetworkInstance>, s: S) -> Result<S::Ok, S::Error> {
        v.as_deref().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<NetworkInstance>, D::Error> {
        Ok(Option::<String>::deserialize(d)?.map(|t| crate::rules::network_instance(&t)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::*;
    use pfcp::ie::{FSeid, Flags, NodeId, OuterHeaderCreation, SdfFilter};
    use std::net::Ipv4Addr;

    fn tmp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "upf-state-{tag}-{}-{}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn header() -> Header {
        Header {
            format: FORMAT,
            generation: 1,
            recovery_time_stamp: 0xe000_0001,
            config: "cfg".into(),
            teid_seed: 7,
            written_unix: 1,
        }
    }

    /// A session with one of every kind of rule, PFCP values of every wire-encoded kind.
    fn session(seid: u64) -> SavedSession {
        let node = NodeId::Ipv4(Ipv4Addr::new(10, 0, 0, 2));
        let mut s = Session::new(
            seid,
            FSeid {
                seid: seid + 1,
                ipv4: Some(Ipv4Addr::new(10, 0, 0, 2)),
                ipv6: None,
                spare: 0,
            },
            node,
        );
        s.pdrs.insert(
            1,
            Pdr {
                id: 1,
                precedence: 100,
                pdi: Pdi {
                    local_fteid: Some(LocalFteid {
                        teid: 0x1234,
                        ipv4: Some(Ipv4Addr::new(10, 1, 0, 1)),
                        ipv6: None,
                    }),
                    network_instance: Some(network_instance("internet")),
                    sdf_filters: thin_vec![SdfFilter {
                        flow_description: Some(b"permit out ip from any to assigned".to_vec()),
                        ..SdfFilter::default()
                    }],
                    ..Pdi::default()
                },
                outer_header_removal: Some(pfcp::ie::OuterHeaderRemoval {
                    description: 0,
                    ext_header_deletion: None,
                }),
                far_id: Some(1),
                urr_ids: smallvec![1],
                qer_ids: smallvec![],
                activation_time: None,
                deactivation_time: None,
            },
        );
        s.fars.insert(
            1,
            Far {
                id: 1,
                action: ApplyAction {
                    forw: true,
                    ..ApplyAction::default()
                },
                forwarding: Some(Forwarding {
                    destination_interface: interface::ACCESS,
                    outer_header_creation: Some(OuterHeaderCreation {
                        description: OuterHeaderCreation::GTPU_UDP_IPV4,
                        teid: Some(9),
                        ipv4: Some(Ipv4Addr::new(10, 10, 0, 1)),
                        ipv6: None,
                        port: None,
                        c_tag: None,
                        s_tag: None,
                    }),
                    ..Forwarding::default()
                }),
                bar_id: None,
            },
        );
        s.urrs.insert(
            1,
            Urr {
                id: 1,
                rule: UrrRule {
                    measurement_method: Flags(vec![0x02]),
                    reporting_triggers: Flags(vec![0x01, 0x00]),
                    measurement_period: None,
                    volume_threshold: Some(VolumeLimit {
                        total: Some(1000),
                        uplink: None,
                        downlink: None,
                    }),
                    volume_quota: None,
                    time_threshold: None,
                    time_quota: None,
                    quota_holding_time: None,
                    inactivity_detection_time: None,
                    linked_urr_ids: vec![],
                    far_id_for_quota_action: None,
                },
            },
        );
        s.teids.push(0x1234);
        s.allocated_ue_ips.push("10.45.0.2".parse().unwrap());
        SavedSession {
            session: std::sync::Arc::new(s),
            urrs: vec![SavedUrr {
                urr_id: 1,
                handle: Some(3),
                seqn: 2,
                reported: Usage {
                    ul_packets: 5,
                    ..Usage::default()
                },
                ..SavedUrr::default()
            }],
            reports: vec![],
        }
    }

    fn write(dir: &Path, sessions: &[u64]) -> Journal {
        StateDir::new(dir)
            .write_snapshot(
                &header(),
                sessions
                    .iter()
                    .map(|s| Record::Session(Box::new(session(*s))))
                    .collect::<Vec<_>>(),
            )
            .unwrap()
    }

    #[test]
    fn a_snapshot_and_its_journal_load_as_written() {
        let d = tmp("ok");
        let mut j = write(&d, &[1, 2, 3]);
        j.append(&[Record::SessionGone(2), Record::Sequence(77)])
            .unwrap();
        j.append(&[Record::Session(Box::new(session(4)))]).unwrap();
        let s = StateDir::new(&d).load("cfg").unwrap().unwrap();
        let mut seids: Vec<u64> = s.sessions.iter().map(|x| x.session.up_seid).collect();
        seids.sort();
        assert_eq!(seids, [1, 3, 4]);
        let one = s.sessions.iter().find(|x| x.session.up_seid == 1).unwrap();
        assert_eq!(*one, session(1), "every rule and value as it was");
        assert_eq!(s.header, header());
        assert_eq!(s.sequence, Some(77));
        assert!(!s.torn_tail);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A FAR's Redirect Information goes in a record of its own after its session's
    /// (the session's own encoding unchanged): kept in the snapshot and the journal, and
    /// gone when a later version of the session has none.
    #[test]
    fn redirect_information_is_kept_beside_its_session() {
        let with_redirect = |seid: u64| {
            let mut s = session(seid);
            let sess = std::sync::Arc::make_mut(&mut s.session);
            let far = sess.fars.values_mut().next().unwrap();
            far.forwarding.get_or_insert_with(Default::default).redirect =
                Some(pfcp::ie::RedirectInformation {
                    address_type: 2,
                    server_address: pfcp::ie::Text(b"http://portal.example/".to_vec()),
                    other_server_address: None,
                });
            s
        };
        let d = tmp("redirect");
        let dir = StateDir::new(&d);
        let mut j = dir
            .write_snapshot(
                &header(),
                [with_redirect(1), session(2)]
                    .into_iter()
                    .flat_map(Record::of_session)
                    .collect::<Vec<_>>(),
            )
            .unwrap();
        j.append(&Record::of_session(with_redirect(3))).unwrap();
        let loaded = dir.load("cfg").unwrap().unwrap();
        let get = |seid: u64| {
            loaded
                .sessions
                .iter()
                .find(|x| x.session.up_seid == seid)
                .unwrap()
                .clone()
        };
        assert_eq!(get(1), with_redirect(1));
        assert_eq!(get(2), session(2));
        assert_eq!(get(3), with_redirect(3));
        // The redirect removed: the session's next record has none.
        j.append(&Record::of_session(session(1))).unwrap();
        let loaded = dir.load("cfg").unwrap().unwrap();
        let one = loaded
            .sessions
            .iter()
            .find(|x| x.session.up_seid == 1)
            .unwrap();
        assert_eq!(*one, session(1));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_pfd_table_is_kept_with_its_indices_and_read_back_through_pfd_rs() {
        use crate::pfd::{AppPfds, PfdTable};
        let mut t = PfdTable::new();
        let mut p = AppPfds::default();
        p.add_flow("permit out 17 from 192.0.2.0/24 to assigned")
            .unwrap();
        p.add_url("http://Video.example:8080/live?x=1").unwrap();
        p.add_url("https://secure.example/x").unwrap();
        p.add_domain("cdn.example", Some("DNS_QNAME")).unwrap();
        t.set_with_index("video", 7, p, false).unwrap();
        t.set_with_index("local", 2, AppPfds::default(), true)
            .unwrap();
        let apps = SavedApp::all(&t);
        assert_eq!(
            pfd_table(&apps).unwrap(),
            t,
            "the same table, indices and all"
        );

        let d = tmp("pfds");
        let dir = StateDir::new(&d);
        let mut j = dir
            .write_snapshot(&header(), vec![Record::Pfds(Vec::new())])
            .unwrap();
        assert_eq!(dir.load("cfg").unwrap().unwrap().pfds, Some(Vec::new()));
        j.append(&[Record::Pfds(apps.clone())]).unwrap();
        let s = dir.load("cfg").unwrap().unwrap();
        assert_eq!(s.pfds.as_deref(), Some(&apps[..]), "the journal's last one");
        // A state without one (written before upfd kept PFDs): none.
        let _ = write(&d, &[1]);
        assert_eq!(dir.load("cfg").unwrap().unwrap().pfds, None);
        // PFDs that no longer pass pfd.rs's checks are refused, not half taken.
        let mut bad = apps.clone();
        bad[0].domains.push(("not a name".into(), 1));
        assert!(pfd_table(&bad).unwrap_err().contains("not a name"));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_journal_frame_cut_short_is_dropped_whole_and_said() {
        let d = tmp("torn");
        let mut j = write(&d, &[1]);
        j.append(&[Record::Session(Box::new(session(2)))]).unwrap();
        j.append(&[
            Record::Session(Box::new(session(3))),
            Record::SessionGone(1),
        ])
        .unwrap();
        let p = StateDir::new(&d).journal_path(1);
        let len = std::fs::metadata(&p).unwrap().len();
        let f = OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(len - 5).unwrap();
        let s = StateDir::new(&d).load("cfg").unwrap().unwrap();
        let mut seids: Vec<u64> = s.sessions.iter().map(|x| x.session.up_seid).collect();
        seids.sort();
        assert_eq!(seids, [1, 2], "the last batch is dropped whole");
        assert!(s.torn_tail);
        // Appending goes on after the last whole frame: the cut one is gone for good.
        let mut j = StateDir::new(&d)
            .continue_journal(1, Some(s.journal_len))
            .unwrap();
        j.append(&[Record::SessionGone(2)]).unwrap();
        let s = StateDir::new(&d).load("cfg").unwrap().unwrap();
        let seids: Vec<u64> = s.sessions.iter().map(|x| x.session.up_seid).collect();
        assert_eq!(seids, [1]);
        assert!(!s.torn_tail);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn damage_anywhere_is_refused_and_nothing_is_returned() {
        let d = tmp("bad");
        let mut j = write(&d, &[1, 2]);
        j.append(&[Record::SessionGone(2)]).unwrap();
        let dir = StateDir::new(&d);
        let good = std::fs::read(dir.snapshot_path()).unwrap();
        let journal = std::fs::read(dir.journal_path(1)).unwrap();
        // Every single octet of the snapshot changed, one at a time: never loaded as if
        // nothing happened (a changed octet in a length may read as "cut short"; both
        // refuse).
        for at in 0..good.len() {
            let mut b = good.clone();
            b[at] ^= 0x41;
            std::fs::write(dir.snapshot_path(), &b).unwrap();
            assert!(dir.load("cfg").is_err(), "octet {at} changed, still loaded");
        }
        // Cut short anywhere.
        for n in [0, 5, 12, 20, good.len() / 2, good.len() - 1] {
            std::fs::write(dir.snapshot_path(), &good[..n]).unwrap();
            assert!(dir.load("cfg").is_err(), "cut at {n}, still loaded");
        }
        std::fs::write(dir.snapshot_path(), &good).unwrap();
        // A damaged journal frame (not the last one cut short) is refused too.
        let mut jb = journal.clone();
        let at = jb.len() - 2;
        jb[at] ^= 1;
        std::fs::write(dir.journal_path(1), &jb).unwrap();
        assert!(matches!(dir.load("cfg"), Err(LoadError::Corrupt { .. })));
        std::fs::write(dir.journal_path(1), &journal).unwrap();
        // Another version, another configuration.
        let mut b = good.clone();
        b[8..12].copy_from_slice(&(FORMAT + 1).to_le_bytes());
        std::fs::write(dir.snapshot_path(), &b).unwrap();
        assert!(matches!(dir.load("cfg"), Err(LoadError::Version { .. })));
        std::fs::write(dir.snapshot_path(), &good).unwrap();
        assert!(matches!(dir.load("other"), Err(LoadError::Config { .. })));
        assert!(dir.load("cfg").unwrap().is_some(), "undamaged, it loads");
        dir.set_aside().unwrap();
        assert!(dir.load("cfg").unwrap().is_none(), "set aside: no state");
        assert!(d.join("state.bad").exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// Seeds for the `state_load` fuzz target (scripts/fuzz.sh runs this): real states,
    /// as the target reads them (2 octets of snapshot length, snapshot, journal).
    #[test]
    #[ignore]
    fn write_fuzz_seeds() {
        let Ok(out) = std::env::var("UPF_STATE_SEEDS") else {
            return;
        };
        std::fs::create_dir_all(&out).unwrap();
        for (k, sessions) in [vec![], vec![1u64], vec![1, 2, 3]].iter().enumerate() {
            let d = tmp("seed");
            let mut j = write(&d, sessions);
            j.append(&[Record::SessionGone(1), Record::Sequence(9)])
                .unwrap();
            j.append(&[Record::Associations(vec![SavedAssociation {
                node: NodeId::Ipv4(Ipv4Addr::new(10, 0, 0, 2)),
                addr: "10.0.0.2:8805".parse().unwrap(),
                recovery_time_stamp: 7,
                cp_features: Some(Flags(vec![1])),
            }])])
            .unwrap();
            j.append(&[Record::Pfds(vec![SavedApp {
                id: "video".into(),
                index: 3,
                local: false,
                flow_descriptions: vec!["permit out 6 from 192.0.2.0/24 to assigned".into()],
                urls: vec!["http://video.example/live".into()],
                domains: vec![("cdn.example".into(), 7)],
            }])])
            .unwrap();
            // As the target takes them: payloads with a 2-octet length, the snapshot's
            // then the journal's, an empty one between.
            let payloads = |b: &[u8], from: usize| -> Vec<u8> {
                let (f, _) = frames(Path::new(""), b, from).unwrap();
                let mut out = Vec::new();
                for (records, _) in f {
                    let p = postcard::to_allocvec(&records).unwrap();
                    out.extend_from_slice(&(p.len() as u16).to_le_bytes());
                    out.extend_from_slice(&p);
                }
                out
            };
            let snap = std::fs::read(d.join("state")).unwrap();
            let journal = std::fs::read(d.join("journal.1")).unwrap();
            let mut seed = payloads(&snap, 12);
            seed.extend_from_slice(&[0, 0]);
            seed.extend_from_slice(&payloads(&journal, 0));
            std::fs::write(Path::new(&out).join(format!("state-{k}")), seed).unwrap();
            std::fs::remove_dir_all(&d).unwrap();
        }
    }

    #[test]
    fn an_abandoned_snapshot_leaves_the_one_in_place_and_no_file_behind() {
        let d = tmp("abandon");
        let dir = StateDir::new(&d);
        let _j = write(&d, &[1, 2]);
        let mut h = header();
        h.generation = 2;
        let _new = dir.begin_journal(2).unwrap();
        let records = vec![
            Ok(Record::Session(Box::new(session(1)))),
            Err(std::io::Error::other("the snapshot was abandoned")),
            Ok(Record::Session(Box::new(session(3)))),
        ];
        let e = dir.write_snapshot_from(&h, records).unwrap_err();
        assert_eq!(e.to_string(), "the snapshot was abandoned");
        assert!(!d.join("state.tmp").exists());
        let s = dir.load("cfg").unwrap().unwrap();
        assert_eq!(s.header.generation, 1);
        assert_eq!(s.sessions.len(), 2);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_snapshot_written_while_batches_go_on_loses_none_wherever_it_stops() {
        let d = tmp("bg");
        let dir = StateDir::new(&d);
        let mut old = write(&d, &[1, 2]);
        // Generation 2's records are taken; from now on batches go to both journals.
        let mut h = header();
        h.generation = 2;
        let records = vec![
            Record::Session(Box::new(session(1))),
            Record::Session(Box::new(session(2))),
        ];
        let mut new = dir.begin_journal(2).unwrap();
        for j in [&mut old, &mut new] {
            j.append(&[
                Record::SessionGone(1),
                Record::Session(Box::new(session(3))),
            ])
            .unwrap();
        }
        let seids = |s: Saved| {
            let mut v: Vec<u64> = s.sessions.iter().map(|x| x.session.up_seid).collect();
            v.sort();
            v
        };
        // Killed before the new snapshot is in place: the old one and its journal.
        assert_eq!(seids(dir.load("cfg").unwrap().unwrap()), [2, 3]);
        // In place: the new one and its journal; the old journal is gone.
        dir.write_snapshot_file(&h, records).unwrap();
        let s = dir.load("cfg").unwrap().unwrap();
        assert_eq!(s.header.generation, 2);
        assert_eq!(seids(s), [2, 3]);
        assert!(!dir.journal_path(1).exists());
        // A journal of generation 3 left by a snapshot that never came into place (upfd
        // ended while writing it) is started afresh, not appended to.
        let mut stale = dir.begin_journal(3).unwrap();
        stale.append(&[Record::SessionGone(2)]).unwrap();
        let mut h3 = header();
        h3.generation = 3;
        dir.write_snapshot(&h3, vec![Record::Session(Box::new(session(2)))])
            .unwrap();
        assert_eq!(seids(dir.load("cfg").unwrap().unwrap()), [2]);
        dir.set_aside().unwrap();
        assert!(d.join("journal.3.bad").exists());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
