//! Keeping sessions across restarts (`state.directory`): the state loaded at start and
//! handed to the N4 node, the data path of the upfd that ran before replaced without a
//! lost packet and its last counts carried, and the journal written before every N4
//! output. The file format is upf::state.
//!
//! A restart in order:
//! 1. load and check the state (a bad one is set aside: a clean start with a new
//!    Recovery Time Stamp, which tells every CP function; TS 23.527 clause 4.3.2);
//! 2. load a new data path (not attached: the old one keeps forwarding) and install
//!    every session into it, with the old data path's counts as they are then; copy the
//!    old data path's classified flows and learned addresses into it (upf_bpf::adopt);
//! 3. pin its program arrays (pins.rs: without a pin the kernel empties them when upfd
//!    ends, and the programs left attached drop everything), then attach it, replacing
//!    the old programs on each interface in one step;
//! 4. once no packet can still be in the old programs, read their counts again and
//!    carry what they counted since step 2: the usage reports stay exact; likewise the
//!    flows and addresses they made or changed since; then remove the old data path's
//!    pins, which frees it;
//! 5. write a new snapshot, which names the new data path's counters, on another
//!    thread: upfd serves N4 meanwhile, its batches going to both journals.
//!
//! A snapshot (at every start, and when the journal has grown past `journal_limit`)
//! never stops N4 for long: its sessions are read a step at a time ([`Kept::step`], at
//! most [`STEP_TIME`]) between N4's batches and written on another thread; the journal
//! beside it makes up for sessions that changed after their step (upf::state).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use upf::fastpath::Usage;
use upf::n4::N4;
use upf::state::{CounterTable, Header, Journal, Saved, StateDir};
use upf_bpf::adopt::OldApps;

use crate::config::Config;

/// A new snapshot once the journal is past this (and at every start).
const JOURNAL_LIMIT: u64 = 256 << 20;

/// The records the writer thread gets, in order, until the end; an error if the
/// snapshot was abandoned before it (upfd stopped keeping the state).
fn records_of(
    chunks: std::sync::mpsc::Receiver<Chunk>,
) -> impl Iterator<Item = std::io::Result<upf::state::Record>> {
    let mut chunk = Vec::new().into_iter();
    let mut ended = false;
    std::iter::from_fn(move || loop {
        if let Some(r) = chunk.next() {
            return Some(Ok(r));
        }
        if ended {
            return None;
        }
        match chunks.recv() {
            Ok(Chunk::Records(v)) => chunk = v.into_iter(),
            Ok(Chunk::End) => ended = true,
            Err(_) => {
                ended = true;
                return Some(Err(std::io::Error::other("the snapshot was abandoned")));
            }
        }
    })
}

/// The state being kept.
pub struct Kept {
    dir: StateDir,
    header: Header,
    journal: Option<Journal>,
    limit: u64,
    counters: Option<CounterTable>,
    /// A snapshot being written on another thread.
    writing: Option<Writing>,
}

/// A snapshot on its way: its header, the journal that follows it (appended to beside
/// the current one until it is in place), the sessions still to be read and the
/// writer's result.
struct Writing {
    header: Header,
    journal: Journal,
    started: Instant,
    /// The cached responses and sessions still to be read, a step at a time.
    left: upf::n4::ToSave,
    /// (responses, sessions) to read when it started, for the log.
    counts: (usize, usize),
    /// Not before then: a step leaves N4 at least as long as it took.
    next_step: Instant,
    /// To the writer thread; None once every record went (or the snapshot is
    /// abandoned: the writer then removes what it wrote).
    to_writer: Option<std::sync::mpsc::Sender<Chunk>>,
    /// Steps taken, and the longest (N4 waits for a step).
    steps: u32,
    longest: Duration,
    done: std::sync::mpsc::Receiver<std::io::Result<()>>,
}

/// What the writer thread gets.
enum Chunk {
    Records(Vec<upf::state::Record>),
    /// Every record went: finish the snapshot and put it in place.
    End,
}

/// How long one step of a snapshot may hold N4: it reads responses and sessions in
/// groups of [`STEP_GROUP`] until this has passed, and at most [`STEP_MAX`] of them.
/// The next step waits as long as this one took, so N4 has at least half the time.
const STEP_TIME: Duration = Duration::from_millis(1);
const STEP_GROUP: usize = 64;
const STEP_MAX: usize = 1024;

/// What was loaded, or why not.
pub enum Loaded {
    /// No state directory configured.
    Off,
    /// Nothing kept (first start; false), or a state that could not be used (said, and
    /// set aside; true): a clean start.
    Clean(StateDir, bool),
    Restore(StateDir, Box<Saved>),
}

/// Load the state of `cfg.state.directory`, if configured.
pub fn load(cfg: &Config) -> Loaded {
    let Some(d) = &cfg.state.directory else {
        return Loaded::Off;
    };
    let dir = StateDir::new(d);
    match dir.load(&cfg.state_fingerprint()) {
        Ok(None) => {
            info!("state: none in {} (first start)", d.display());
            Loaded::Clean(dir, false)
        }
        Ok(Some(s)) => {
            if s.torn_tail {
                info!(
                    "state: the journal's last batch was cut short (upfd was killed while writing it) and is dropped: its requests were never answered"
                );
            }
            Loaded::Restore(dir, Box::new(s))
        }
        Err(e) => {
            set_aside(&dir, &e.to_string());
            Loaded::Clean(dir, true)
        }
    }
}

/// Say why a state is not used and move it out of the way (`.bad`).
pub fn set_aside(dir: &StateDir, why: &str) {
    error!(
        "state: not used: {why}. Starting clean with a new Recovery Time Stamp: CP functions see the restart and set their sessions up again"
    );
    if let Err(e) = dir.set_aside() {
        error!("state: setting the bad state aside: {e}");
    }
}

/// Wait for the next second: a Recovery Time Stamp taken then (seconds, clause 8.2.65)
/// differs from that of any upfd started before, whose state could not be read.
pub fn next_second() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    std::thread::sleep(Duration::from_nanos(
        1_000_000_000 - u64::from(now.subsec_nanos()) + 1_000_000,
    ));
}

/// Every URR of `saved` the old data path counted: (SEID, URR ID) and its handle.
fn handles(saved: &Saved) -> impl Iterator<Item = ((u64, u32), u32)> + '_ {
    saved.sessions.iter().flat_map(|s| {
        s.urrs
            .iter()
            .filter_map(move |u| Some(((s.session.up_seid, u.urr_id), u.handle?)))
    })
}

/// The old data path's URR counts (None: not readable), read for every URR of `saved`
/// that has a handle.
pub fn read_counts(
    old: Option<&upf_bpf::datapath::OldCounters>,
    saved: &Saved,
) -> HashMap<(u64, u32), Usage> {
    let Some(old) = old else {
        return HashMap::new();
    };
    handles(saved)
        .filter_map(|(key, h)| Some((key, old.usage(h)?)))
        .collect()
}

/// Open the counters the state names, if any; a warning if they are gone.
pub fn old_counters(saved: &Saved) -> Option<upf_bpf::datapath::OldCounters> {
    let t = saved.counters.as_ref()?;
    match upf_bpf::datapath::OldCounters::open(t) {
        Ok(c) => Some(c),
        Err(e) => {
            warn!(
                "state: the previous data path's counters cannot be read ({e}): what it counted since its last report is not in the next usage reports"
            );
            None
        }
    }
}

/// The previous data path's application detection state (classified flows, learned
/// addresses: upf_bpf::adopt), found by the URR table the state names, copied into `dp`
/// before the swap. None (said) if there is none to carry.
pub fn adopt_apps(saved: &Saved, dp: &upf_bpf::datapath::Datapath) -> Option<OldApps> {
    let t = saved.counters.as_ref()?;
    let mut apps = match OldApps::find(t.map_id) {
        Ok(a) => a,
        Err(e) => {
            warn!(
                "state: the previous data path's classified flows and learned addresses cannot be carried ({e}): flows classified by their first packets go by their sessions' other PDRs"
            );
            return None;
        }
    };
    let t0 = Instant::now();
    let c = apps.copy(dp);
    for why in &c.skipped {
        info!("state: application detection: {why}: not carried");
    }
    info!(
        "state: application detection: {} classified flow(s), {} learned address(es) and {} stamp block(s) of the previous data path carried ({:?})",
        c.flows,
        c.addrs,
        c.stamps,
        t0.elapsed()
    );
    Some(apps)
}

/// After the swap: what the old programs classified or learned since [`adopt_apps`].
pub fn adopt_apps_again(apps: &mut OldApps, dp: &upf_bpf::datapath::Datapath) {
    let t0 = Instant::now();
    let c = apps.copy_again(dp);
    info!(
        "state: application detection: {} flow(s), {} address(es) and {} stamp block(s) the previous data path made or changed during the handover carried ({:?})",
        c.flows,
        c.addrs,
        c.stamps,
        t0.elapsed()
    );
}

/// A reused data path (the one the upfd before left running), after every session of
/// the state was installed in it: what it holds that the state does not know (written
/// after the journal's last frame: never answered to an SMF) goes.
pub fn reconcile(dp: &mut upf_bpf::datapath::Datapath) {
    let t0 = Instant::now();
    let r = dp.finish_adoption(t0);
    info!(
        "state: the running data path reconciled with the state in {:?}: {} session(s), {} cell(s) and {} key(s) it held beyond the state removed, {} cold entries rewritten",
        t0.elapsed(),
        r.sessions_removed,
        r.cells_freed,
        r.keys_removed,
        r.cold_replaced
    );
}

/// Wait until no packet can still be in the programs just replaced (XDP runs in the
/// kernel's receive path under RCU: a packet is done within one NAPI poll).
pub fn settle_after_swap() {
    std::thread::sleep(Duration::from_millis(50));
}

/// After the swap: carry what the old data path counted since `before` was read.
pub fn carry_rest(
    n4: &mut N4,
    old: Option<&upf_bpf::datapath::OldCounters>,
    saved: &Saved,
    before: &HashMap<(u64, u32), Usage>,
) -> usize {
    let Some(old) = old else {
        return 0;
    };
    let mut carried = 0;
    for (key, h) in handles(saved) {
        let (Some(now), Some(then)) = (old.usage(h), before.get(&key)) else {
            continue;
        };
        let more = now.since(then);
        if more.total_packets() > 0 {
            n4.carry(key.0, key.1, more);
            carried += 1;
        }
    }
    carried
}

impl Kept {
    /// Start keeping state in `dir` after a clean start: an empty snapshot, written now.
    pub fn start_clean(
        dir: StateDir,
        cfg: &Config,
        recovery_time_stamp: u32,
        teid_seed: u64,
        counters: Option<CounterTable>,
        n4: &mut N4,
    ) -> anyhow::Result<Kept> {
        n4.track_changes();
        let header = Header {
            format: upf::state::FORMAT,
            generation: 1,
            recovery_time_stamp,
            config: cfg.state_fingerprint(),
            teid_seed,
            written_unix: upf::report::unix_now(),
        };
        let counters_record = counters.map(upf::state::Record::Counters);
        let journal = dir
            .write_snapshot(&header, n4.save_all().chain(counters_record))
            .map_err(|e| {
                anyhow::anyhow!("state: writing {}: {e}", dir.snapshot_path().display())
            })?;
        Ok(Kept {
            dir,
            header,
            journal: Some(journal),
            limit: cfg.state.journal_limit.unwrap_or(JOURNAL_LIMIT),
            counters,
            writing: None,
        })
    }

    /// Go on keeping the state `saved` was loaded from (its journal appended to), and
    /// write a new snapshot at once: it names the new data path's counters.
    pub fn resume(
        dir: StateDir,
        cfg: &Config,
        saved: &Saved,
        counters: Option<CounterTable>,
        n4: &mut N4,
    ) -> anyhow::Result<Kept> {
        n4.track_changes();
        let journal = dir
            .continue_journal(saved.header.generation, Some(saved.journal_len))
            .map_err(|e| anyhow::anyhow!("state: opening the journal: {e}"))?;
        let mut k = Kept {
            dir,
            header: saved.header.clone(),
            journal: Some(journal),
            limit: cfg.state.journal_limit.unwrap_or(JOURNAL_LIMIT),
            counters,
            writing: None,
        };
        // The counters of the new data path, and the URRs' new handles, in the journal
        // too: until the new snapshot is in place the old one is what a restart reads.
        k.snapshot(n4)?;
        Ok(k)
    }

    /// Start a new snapshot (generation + 1), written on another thread: its first
    /// records and the list of sessions are taken now; the sessions' records follow in
    /// steps ([`Kept::step`]). From now on every batch also goes to its journal.
    fn snapshot(&mut self, n4: &mut N4) -> anyhow::Result<()> {
        if self.writing.is_some() {
            return Ok(());
        }
        let header = Header {
            generation: self.header.generation + 1,
            written_unix: upf::report::unix_now(),
            ..self.header.clone()
        };
        let journal = self
            .dir
            .begin_journal(header.generation)
            .map_err(|e| anyhow::anyhow!("state: starting a journal: {e}"))?;
        let t = Instant::now();
        let (mut head, left) = n4.save_head();
        head.extend(self.counters.map(upf::state::Record::Counters));
        let (to_writer, chunks) = std::sync::mpsc::channel();
        let (tx, done) = std::sync::mpsc::channel();
        let (dir, h) = (self.dir.clone(), header.clone());
        std::thread::Builder::new()
            .name("state".into())
            .spawn(move || {
                // Behind N4 and the data path's helpers when CPUs are short: the
                // snapshot can wait, an SMF should not.
                // SAFETY: setpriority on this thread (Linux: a thread's own nice value).
                unsafe { libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as u32, 10) };
                let _ = tx.send(dir.write_snapshot_from(&h, records_of(chunks)));
            })
            .map_err(|e| anyhow::anyhow!("state: starting the writer: {e}"))?;
        let _ = to_writer.send(Chunk::Records(head));
        let took = t.elapsed();
        self.writing = Some(Writing {
            header,
            journal,
            started: Instant::now(),
            counts: left.counts(),
            left,
            next_step: Instant::now() + took,
            to_writer: Some(to_writer),
            steps: 1,
            longest: took,
            done,
        });
        Ok(())
    }

    /// When the next step of the snapshot being taken is due ([`Kept::step`]); None:
    /// no snapshot has anything left to read.
    pub fn step_due(&self) -> Option<Instant> {
        self.writing
            .as_ref()
            .filter(|w| w.to_writer.is_some())
            .map(|w| w.next_step)
    }

    /// One step of the snapshot being taken: the records of the next responses and
    /// sessions, for [`STEP_TIME`], to the writer; after the last, the end.
    pub fn step(&mut self, n4: &N4) {
        let Some(w) = &mut self.writing else {
            return;
        };
        let Some(to) = &w.to_writer else {
            return;
        };
        let t = Instant::now();
        let mut records = Vec::new();
        let mut read = 0;
        while !w.left.is_empty() {
            let before = w.left.len();
            records.extend(n4.save_next(&mut w.left, STEP_GROUP));
            read += before - w.left.len();
            if read >= STEP_MAX || t.elapsed() >= STEP_TIME {
                break;
            }
        }
        // A writer that ended early said why through `done`: persist() reads it.
        let _ = to.send(Chunk::Records(records));
        let took = t.elapsed();
        w.steps += 1;
        w.longest = w.longest.max(took);
        w.next_step = Instant::now() + took;
        if w.left.is_empty() {
            let _ = to.send(Chunk::End);
            w.to_writer = None;
            debug!(
                "state: snapshot {}: {} sessions and {} cached responses read in {} steps over {:?} (the longest {:?})",
                w.header.generation,
                w.counts.1,
                w.counts.0,
                w.steps,
                w.started.elapsed(),
                w.longest
            );
        }
    }

    /// Append what changed to the journal(s) (before anything is sent); take the new
    /// snapshot's journal once it is in place; start a new snapshot when the journal is
    /// long. An error stops the keeping: the state is removed (a stale one would bring
    /// back deleted sessions) and said.
    pub fn persist(&mut self, n4: &mut N4) -> bool {
        let Some(j) = &mut self.journal else {
            return false;
        };
        let records = n4.take_changes();
        let mut result = j.append(&records);
        if let Some(w) = &mut self.writing {
            result = result.and_then(|()| w.journal.append(&records));
        }
        if let Err(e) = result {
            self.fail(&format!("appending to the journal: {e}"));
            return false;
        }
        let finished = match &self.writing {
            Some(w) => match w.done.try_recv() {
                Ok(r) => Some(r),
                Err(std::sync::mpsc::TryRecvError::Empty) => None,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    Some(Err(std::io::Error::other("the writer thread ended")))
                }
            },
            None => None,
        };
        match finished {
            Some(Ok(())) => {
                if let Some(w) = self.writing.take() {
                    debug!(
                        "state: snapshot {} written ({} sessions, {:?})",
                        w.header.generation,
                        w.counts.1,
                        w.started.elapsed()
                    );
                    self.header = w.header;
                    // The old journal was unlinked by the writer: closing it frees its
                    // blocks and pages (a hundred megabytes), which held N4 for 30-80 ms
                    // at a million sessions. Closed on a thread of its own.
                    if let Some(old) = self.journal.replace(w.journal) {
                        let _ = std::thread::Builder::new()
                            .name("state-close".into())
                            .spawn(move || drop(old));
                    }
                }
            }
            Some(Err(e)) => {
                self.fail(&format!(
                    "writing {}: {e}",
                    self.dir.snapshot_path().display()
                ));
                return false;
            }
            None => {}
        }
        let long = self
            .journal
            .as_ref()
            .is_some_and(|j| j.bytes() > self.limit);
        if long && self.writing.is_none() {
            if let Err(e) = self.snapshot(n4) {
                self.fail(&e.to_string());
                return false;
            }
        }
        true
    }

    fn fail(&mut self, why: &str) {
        error!("state: {why}: sessions are no longer kept across a restart");
        self.journal = None;
        self.wait_for_writer();
        if let Err(e) = self.dir.remove() {
            error!("state: removing the state: {e}");
        }
    }

    /// Whether the state is being kept (no write failed).
    pub fn working(&self) -> bool {
        self.journal.is_some()
    }

    /// A snapshot being written is finished (or failed) before the state is removed: it
    /// would otherwise come into place after.
    fn wait_for_writer(&mut self) {
        if let Some(mut w) = self.writing.take() {
            // Not finished: abandoned (the writer removes what it wrote).
            w.to_writer = None;
            let _ = w.done.recv();
        }
    }

    /// Remove the state: upfd ends for good (its sessions released).
    pub fn remove(mut self) {
        self.wait_for_writer();
        if let Err(e) = self.dir.remove() {
            error!("state: removing the state: {e}");
        }
    }
}
