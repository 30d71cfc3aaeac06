//! The traffic rig in the lab: generators in gnb (uplink GTP-U) and dn (downlink IP),
//! sinks on the receiving ends (gnb n3, dn n6), and on upf's interfaces whatever is
//! measured: a drop program (generator limit), the bare forwarder (I/O limit), the
//! one-miss forwarder (one-miss limit) or the UPF. The limits take upf's interfaces for
//! their trial and put back whatever XDP program ran there (the UPF's).
//!
//! CPUs: the generators run pinned to `gen_cpu`; upf's n3 and n6 receive in their own
//! NAPI threads pinned to `fwd_cpu` (SCHED_FIFO), so the UPF's XDP programs (and the
//! sinks behind them, which receive in the softirq of the CPU that sends to them)
//! run there. A veth otherwise receives on the sender's CPU and everything would share
//! one core.

use std::io;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use bench_bpf::{
    self as b, frame_len_for_ip_len, napi_thread, set_fifo, BareConfig, BareForwarder, DropSink,
    DualGenerator, GenConfig, MissSession, Percentiles, Sink,
};

use super::models::Mix;
use crate::lab::{addr, in_netns, mac, Lab, Ns};
use crate::report::Direction;

fn bdir(d: Direction) -> b::Direction {
    match d {
        Direction::Uplink => b::Direction::Uplink,
        Direction::Downlink => b::Direction::Downlink,
    }
}

/// The ifindex of `dev` in namespace `ns`.
pub fn ifindex(ns: &str, dev: &str) -> io::Result<u32> {
    let name = std::ffi::CString::new(dev).map_err(io::Error::other)?;
    let i = in_netns(Some(ns), || {
        // SAFETY: a valid NUL-terminated name.
        unsafe { libc::if_nametoindex(name.as_ptr()) }
    })?;
    if i == 0 {
        return Err(io::Error::other(format!("{ns}: no interface {dev}")));
    }
    Ok(i)
}

/// One session as the generators see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenSession {
    /// The UPF's uplink TEID.
    pub teid: u32,
    pub ue: Ipv4Addr,
}

/// What one trial measured, per direction (index: 0 uplink, 1 downlink).
#[derive(Debug, Clone, Default)]
pub struct Trial {
    pub sent: [u64; 2],
    pub received: [u64; 2],
    /// Time each generator ran.
    pub elapsed: [Duration; 2],
    pub latency: [Option<Percentiles>; 2],
}

impl Trial {
    fn i(d: Direction) -> usize {
        d as usize
    }
    pub fn sent_pps(&self, d: Direction) -> f64 {
        self.sent[Self::i(d)] as f64 / self.elapsed[Self::i(d)].as_secs_f64().max(1e-9)
    }
    pub fn received_pps(&self, d: Direction) -> f64 {
        self.received[Self::i(d)] as f64 / self.elapsed[Self::i(d)].as_secs_f64().max(1e-9)
    }
    /// Lost fraction of what was sent, in percent.
    pub fn loss_pct(&self, d: Direction) -> f64 {
        let (s, r) = (self.sent[Self::i(d)], self.received[Self::i(d)]);
        if s == 0 {
            0.0
        } else {
            s.saturating_sub(r) as f64 * 100.0 / s as f64
        }
    }
}

/// Which limit takes the UPF's place for a trial ([`Rig::limit_trial`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// The bare forwarder.
    Io,
    /// The bare forwarder plus one read of the session's record.
    OneMiss,
}

/// The one-miss forwarder, loaded for one set of sessions (filling a million records
/// takes a while: once per set, not per trial).
struct OneMiss {
    sessions: Vec<GenSession>,
    /// The same sessions with the uplink TEIDs that find their records.
    relabelled: Vec<GenSession>,
    fwd: BareForwarder,
}

/// The rig: sinks attached for its whole life, generators loaded per traffic mix.
pub struct Rig {
    gnb: String,
    upf: String,
    dn: String,
    pub gen_cpu: usize,
    pub fwd_cpu: usize,
    /// Sinks: [uplink (dn n6), downlink (gnb n3)].
    sinks: [Sink; 2],
    max_sessions: u32,
    psc: bool,
    /// Both directions from one thread (uplink mix, downlink mix, generator).
    gen: Option<(Mix, Mix, DualGenerator)>,
    /// IP sizes the generator sends as TCP segments ([`Rig::set_tcp_sizes`]), and those
    /// the loaded generator has.
    tcp_sizes: Vec<u16>,
    gen_tcp_sizes: Vec<u16>,
    sessions: Vec<GenSession>,
    one_miss: Option<OneMiss>,
    /// What could not be set up as planned (each said once), for the report.
    notes: std::cell::RefCell<Vec<String>>,
}

impl Rig {
    /// Attach the sinks (replacing the lab's XDP_PASS on gnb n3 and dn n6).
    pub fn new(
        lab: &Lab,
        gen_cpu: usize,
        fwd_cpu: usize,
        max_sessions: u32,
        psc: bool,
    ) -> io::Result<Rig> {
        let (gnb, upf, dn) = (lab.ns(Ns::Gnb), lab.ns(Ns::Upf), lab.ns(Ns::Dn));
        let gi = ifindex(&gnb, "n3")?;
        let di = ifindex(&dn, "n6")?;
        let ul = in_netns(Some(&dn), || Sink::attach(di, max_sessions))??;
        let dl = in_netns(Some(&gnb), || Sink::attach(gi, max_sessions))??;
        Ok(Rig {
            gnb,
            upf,
            dn,
            gen_cpu,
            fwd_cpu,
            sinks: [ul, dl],
            max_sessions,
            psc,
            gen: None,
            tcp_sizes: Vec::new(),
            gen_tcp_sizes: Vec::new(),
            sessions: Vec::new(),
            one_miss: None,
            notes: Default::default(),
        })
    }

    /// Give upf's n3 and n6 their own NAPI threads on the forwarding CPU (again after
    /// every change of the XDP programs there: a veth's NAPI lives with its program).
    /// Where the kernel does not allow it (no threaded NAPI, no real-time scheduling in a
    /// container), forwarding runs where the kernel puts it and a note says so.
    pub fn pin_forwarder(&self) {
        for dev in ["n3", "n6"] {
            if let Err(n) = self.try_pin_napi(dev) {
                self.note(n);
            }
        }
    }

    /// [`Rig::pin_forwarder`] for the UPF's trials, right before them: a UPF started
    /// by someone else may attach its programs (and with them the NAPI the thread
    /// belongs to) a while after it answers PFCP, so each interface is tried for up to
    /// `wait`. Never fails: what could not be pinned is a note of the report.
    pub fn pin_for_trials(&self, wait: Duration) {
        let end = Instant::now() + wait;
        for dev in ["n3", "n6"] {
            loop {
                match self.try_pin_napi(dev) {
                    Ok(()) => break,
                    Err(_) if Instant::now() < end => {
                        std::thread::sleep(Duration::from_millis(250))
                    }
                    Err(n) => {
                        self.note(format!("for the UPF's trials: {n}"));
                        break;
                    }
                }
            }
        }
    }

    /// upf's `dev` gets a NAPI thread on the forwarding CPU at SCHED_FIFO 50; what could
    /// not be done, as a note (not real-time is noted at once, it is no reason to retry).
    fn try_pin_napi(&self, dev: &str) -> Result<(), String> {
        let cpu = self.fwd_cpu;
        match napi_thread(&self.upf, dev, cpu) {
            Ok(pid) => {
                if let Err(e) = set_fifo(pid, 50) {
                    self.note(format!(
                        "upf {dev}'s NAPI thread is on CPU {cpu} but not real-time ({e})"
                    ));
                }
                Ok(())
            }
            Err(e) => Err(format!(
                "upf {dev}'s receive processing is not pinned to CPU {cpu} ({e})"
            )),
        }
    }

    /// upf's `dev` gets a NAPI thread on the forwarding CPU, or a note.
    fn pin_napi(&self, dev: &str) {
        if let Err(n) = self.try_pin_napi(dev) {
            self.note(n);
        }
    }

    fn note(&self, n: String) {
        let mut notes = self.notes.borrow_mut();
        if !notes.contains(&n) {
            eprintln!("note: {n}");
            notes.push(n);
        }
    }

    /// Wait (at most `max`) until the generator and forwarding CPUs are nearly idle: after
    /// a million sessions are set up, the kernel and the processes that made them keep
    /// these CPUs busy for a while, and a trial started then measures that. Returns how
    /// long it waited; a note says so when the CPUs did not quiet down.
    pub fn wait_quiet(&self, max: Duration) -> Duration {
        const BUSY_AT_MOST: f64 = 0.10;
        let start = Instant::now();
        let cpus = [self.gen_cpu, self.fwd_cpu];
        let jiffies = || {
            let all = b::cpu_busy();
            cpus.map(|c| all.get(c).copied())
        };
        let mut before = jiffies();
        loop {
            std::thread::sleep(Duration::from_millis(250));
            let now = jiffies();
            let busy = (0..2)
                .filter_map(|i| match (before[i], now[i]) {
                    (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                        Some((b1 - b0) as f64 / (t1 - t0) as f64)
                    }
                    _ => None,
                })
                .fold(0.0f64, f64::max);
            if busy <= BUSY_AT_MOST {
                return start.elapsed();
            }
            if start.elapsed() >= max {
                self.note(format!(
                    "CPUs {cpus:?} were still {:.0} % busy {max:?} after the sessions were set up: the first trials may read low",
                    busy * 100.0
                ));
                return start.elapsed();
            }
            before = now;
        }
    }

    /// What could not be set up as planned so far.
    pub fn notes(&self) -> Vec<String> {
        self.notes.borrow().clone()
    }

    /// The sessions the generators address, round robin.
    pub fn set_sessions(&mut self, s: &[GenSession]) -> io::Result<()> {
        self.sessions = s.to_vec();
        if let Some((_, _, g)) = &mut self.gen {
            g.set_sessions(&gen_sessions(s))?;
        }
        Ok(())
    }

    /// Send packets of these IP sizes as TCP segments (HTTP-like, to or from port 80 on
    /// the data network's side) from the next trial on; none: all UDP (the default).
    pub fn set_tcp_sizes(&mut self, ip_sizes: &[u16]) {
        self.tcp_sizes = ip_sizes.to_vec();
    }

    /// A generator configuration of `dir` for `mix`.
    fn gen_config(&self, dir: Direction, mix: &Mix) -> io::Result<GenConfig> {
        let psc = self.psc && dir == Direction::Uplink;
        let sizes: Vec<(u16, u32)> = mix
            .sizes
            .iter()
            .map(|&(ip, w)| (frame_len_for_ip_len(bdir(dir), psc, ip as usize) as u16, w))
            .collect();
        let cfg = match dir {
            Direction::Uplink => {
                let mut c = GenConfig::uplink(
                    ifindex(&self.gnb, "n3")?,
                    mac::GNB_N3,
                    mac::UPF_N3,
                    addr::GNB_N3,
                    addr::UPF_N3,
                );
                c.psc = psc;
                c.qfi = 1;
                c
            }
            Direction::Downlink => {
                GenConfig::downlink(ifindex(&self.dn, "n6")?, mac::DN_N6, mac::UPF_N6)
            }
        };
        let tcp_sizes = self
            .tcp_sizes
            .iter()
            .map(|&ip| frame_len_for_ip_len(bdir(dir), psc, ip as usize) as u16)
            .collect();
        Ok(GenConfig {
            sizes,
            tcp_sizes,
            max_sessions: self.max_sessions,
            cpu: Some(self.gen_cpu),
            timestamps: true,
            ..cfg
        })
    }

    /// The generator for these mixes (kept while they stay the same; a direction not
    /// given keeps its mix).
    fn generator(&mut self, ul: Option<&Mix>, dl: Option<&Mix>) -> io::Result<&mut DualGenerator> {
        let default = Mix::single(650);
        let (cur_ul, cur_dl) = match &self.gen {
            Some((u, d, _)) => (u.clone(), d.clone()),
            None => (default.clone(), default),
        };
        let want_ul = ul.cloned().unwrap_or(cur_ul);
        let want_dl = dl.cloned().unwrap_or(cur_dl);
        let reload = self
            .gen
            .as_ref()
            .is_none_or(|(u, d, _)| *u != want_ul || *d != want_dl)
            || self.gen_tcp_sizes != self.tcp_sizes;
        if reload {
            self.gen_tcp_sizes = self.tcp_sizes.clone();
            self.gen = None;
            let ul_cfg = self.gen_config(Direction::Uplink, &want_ul)?;
            let dl_cfg = self.gen_config(Direction::Downlink, &want_dl)?;
            let mut g = DualGenerator::load(
                Some(ul_cfg),
                Some(dl_cfg),
                [Some(self.gnb.as_str()), Some(self.dn.as_str())],
            )?;
            if !self.sessions.is_empty() {
                g.set_sessions(&gen_sessions(&self.sessions))?;
            }
            self.gen = Some((want_ul, want_dl, g));
        }
        Ok(&mut self.gen.as_mut().expect("loaded").2)
    }

    /// Per-session packets the generator sent and the sink received since the last
    /// [`Rig::reset`], in `dir`: (sent, received).
    pub fn per_session(&mut self, dir: Direction) -> io::Result<(Vec<u64>, Vec<u64>)> {
        let sent = match &self.gen {
            Some((_, _, g)) => g.sent_per_session(bdir(dir))?,
            None => Vec::new(),
        };
        let got = self.sinks[dir as usize]
            .counts(bdir(dir))?
            .iter()
            .map(|c| c.packets)
            .collect();
        Ok((sent, got))
    }

    /// Zero the sinks and restart the generator's per-session counts.
    pub fn reset(&mut self) -> io::Result<()> {
        for s in &self.sinks {
            s.reset()?;
        }
        let sessions = gen_sessions(&self.sessions);
        if let (false, Some((_, _, g))) = (sessions.is_empty(), &mut self.gen) {
            g.set_sessions(&sessions)?;
        }
        Ok(())
    }

    /// Send in `load`'s directions at once for `secs`: each at its rate (None: as fast as
    /// the generator goes) with its mix. `flush`: let a paced generator hand packets to
    /// the veths in bursts of up to this long (high paced rates on this kind of VM; the
    /// bursts' waiting shows in latency), None for latency measurements. Waits 200 ms
    /// for packets in flight, then reads the sinks (quick, for the capacity trials; a
    /// test that counts every packet waits with [`Rig::settle_sinks`], or uses
    /// [`Rig::trial_count`] or [`Rig::trial_while`]).
    pub fn trial_with(
        &mut self,
        load: &[(Direction, &Mix, Option<u64>)],
        secs: f64,
        flush: Option<Duration>,
    ) -> io::Result<Trial> {
        if self.sessions.is_empty() {
            return Err(io::Error::other("no sessions"));
        }
        let mix_of = |d: Direction| load.iter().find(|l| l.0 == d).map(|l| l.1);
        self.generator(mix_of(Direction::Uplink), mix_of(Direction::Downlink))?;
        self.reset()?;
        let mut rates = [None, None];
        let mut totals = [0u64, 0];
        for (d, _, rate) in load {
            let i = *d as usize;
            rates[i] = *rate;
            totals[i] = match rate {
                Some(r) => (*r as f64 * secs).ceil() as u64,
                None => u64::MAX / 4,
            };
        }
        let g = &mut self.gen.as_mut().expect("loaded").2;
        g.set_flush(if rates.iter().any(Option::is_some) {
            flush
        } else {
            None
        })?;
        // Paced directions send their total at their rate; the deadline leaves room for
        // the calls' fixed cost (the first call's setup is not made up).
        let deadline = if rates.iter().any(Option::is_some) {
            secs * 1.25 + 0.3
        } else {
            secs
        };
        let reports = g.send(rates, totals, Duration::from_secs_f64(deadline))?;
        std::thread::sleep(Duration::from_millis(200));
        let mut t = Trial::default();
        for (d, _, _) in load {
            let i = *d as usize;
            t.sent[i] = reports[i].packets;
            t.elapsed[i] = reports[i].elapsed;
            t.received[i] = self.sinks[i].totals()?.of(bdir(*d)).packets;
            t.latency[i] = self.sinks[i].latency_percentiles(bdir(*d))?;
        }
        Ok(t)
    }

    /// [`Rig::trial_with`] with 200 us flushes for paced rates over 200 kpps in all.
    pub fn trial(
        &mut self,
        load: &[(Direction, &Mix, Option<u64>)],
        secs: f64,
    ) -> io::Result<Trial> {
        self.trial_with(load, secs, flush_for(load))
    }

    /// Send exactly `packets` in each of `load`'s directions (at its rate, or as fast as
    /// the generator goes), giving up only at `max`; then wait (at most 30 s) until the
    /// sinks' counts settle, and read them. For tests: what was sent is a count, not a
    /// rate times a time (a busy machine sends it later, not less of it).
    pub fn trial_count(
        &mut self,
        load: &[(Direction, &Mix, Option<u64>)],
        packets: u64,
        max: Duration,
    ) -> io::Result<Trial> {
        let rates = self.start_load(load)?;
        let mut totals = [0u64, 0];
        for (d, _, _) in load {
            totals[*d as usize] = packets;
        }
        let g = &mut self.gen.as_mut().expect("loaded").2;
        let reports = g.send(rates, totals, max)?;
        let sent = [reports[0].packets, reports[1].packets];
        self.finish_load(load, sent, [reports[0].elapsed, reports[1].elapsed])
    }

    /// Send in `load`'s directions in calls of about `chunk_secs` for as long as
    /// `keep_going` says (asked before each call; at least one call), at most `max_secs`
    /// in all. The sinks and the per-session counts are reset once, at the start, so the
    /// trial and [`Rig::per_session`] cover the whole run. Then wait (at most 30 s) until
    /// the sinks' counts settle, and read them. For traffic that must last as long as
    /// something else takes (e.g. restarts of the UPF), however slow the machine is.
    pub fn trial_while(
        &mut self,
        load: &[(Direction, &Mix, Option<u64>)],
        chunk_secs: f64,
        keep_going: impl Fn() -> bool,
        max_secs: f64,
    ) -> io::Result<Trial> {
        let rates = self.start_load(load)?;
        let mut totals = [0u64, 0];
        for (d, _, rate) in load {
            totals[*d as usize] = match rate {
                Some(r) => (*r as f64 * chunk_secs).ceil() as u64,
                None => u64::MAX / 4,
            };
        }
        let deadline = if rates.iter().any(Option::is_some) {
            chunk_secs * 1.25 + 0.3
        } else {
            chunk_secs
        };
        let start = Instant::now();
        let (mut sent, mut elapsed) = ([0u64; 2], [Duration::ZERO; 2]);
        loop {
            let left = max_secs - start.elapsed().as_secs_f64();
            let g = &mut self.gen.as_mut().expect("loaded").2;
            let reports = g.send(
                rates,
                totals,
                Duration::from_secs_f64(deadline.min(left).max(0.001)),
            )?;
            for i in 0..2 {
                sent[i] += reports[i].packets;
                elapsed[i] += reports[i].elapsed;
            }
            if !keep_going() || start.elapsed().as_secs_f64() >= max_secs {
                break;
            }
        }
        self.finish_load(load, sent, elapsed)
    }

    /// [`Rig::trial_while`] in bursts: as often as the rates of `load` ask, each
    /// direction sends up to `burst` packets at once (unpaced, the highest rate's
    /// direction `burst`, the others in proportion), and the generator's CPU is free in
    /// between: a paced generator spins on its CPU for the whole time, which on a busy
    /// machine starves whatever else needs the CPU (a UPF starting). Late bursts are
    /// not made up: a slow machine sends less, at the same burst size. A burst should
    /// fit the veths' rings (256 frames).
    pub fn trial_while_bursts(
        &mut self,
        load: &[(Direction, &Mix, Option<u64>)],
        burst: u64,
        keep_going: impl Fn() -> bool,
        max_secs: f64,
    ) -> io::Result<Trial> {
        self.start_load(load)?;
        let top = load.iter().filter_map(|l| l.2).max().unwrap_or(0).max(1);
        let mut totals = [0u64, 0];
        for (d, _, rate) in load {
            let r = rate.unwrap_or(top);
            totals[*d as usize] = (burst * r).div_ceil(top).max(1);
        }
        let every = Duration::from_secs_f64(burst as f64 / top as f64);
        let start = Instant::now();
        let mut next = start;
        let mut sent = [0u64; 2];
        loop {
            let g = &mut self.gen.as_mut().expect("loaded").2;
            let reports = g.send([None, None], totals, Duration::from_secs(1))?;
            for i in 0..2 {
                sent[i] += reports[i].packets;
            }
            if !keep_going() || start.elapsed().as_secs_f64() >= max_secs {
                break;
            }
            next = (next + every).max(Instant::now());
            std::thread::sleep(next.saturating_duration_since(Instant::now()));
        }
        let elapsed = start.elapsed();
        self.finish_load(load, sent, [elapsed; 2])
    }

    /// Wait until the sinks' counts stop changing (two reads [`SETTLE_GAP`] apart agree),
    /// at most `max`: packets still in the veths' rings and the sinks' softirqs are
    /// counted then. Whether they settled.
    pub fn settle_sinks(&self, max: Duration) -> io::Result<bool> {
        let end = Instant::now() + max;
        let read = |rig: &Rig| -> io::Result<[u64; 2]> {
            Ok([
                rig.sinks[0].totals()?.of(b::Direction::Uplink).packets,
                rig.sinks[1].totals()?.of(b::Direction::Downlink).packets,
            ])
        };
        let mut last = read(self)?;
        loop {
            std::thread::sleep(SETTLE_GAP);
            let now = read(self)?;
            if now == last {
                return Ok(true);
            }
            if Instant::now() >= end {
                return Ok(false);
            }
            last = now;
        }
    }

    /// The generator for `load`, reset (sinks and per-session counts), its flush set;
    /// the rates per direction.
    fn start_load(
        &mut self,
        load: &[(Direction, &Mix, Option<u64>)],
    ) -> io::Result<[Option<u64>; 2]> {
        if self.sessions.is_empty() {
            return Err(io::Error::other("no sessions"));
        }
        let mix_of = |d: Direction| load.iter().find(|l| l.0 == d).map(|l| l.1);
        self.generator(mix_of(Direction::Uplink), mix_of(Direction::Downlink))?;
        self.reset()?;
        let mut rates = [None, None];
        for (d, _, rate) in load {
            rates[*d as usize] = *rate;
        }
        let flush = flush_for(load);
        let g = &mut self.gen.as_mut().expect("loaded").2;
        g.set_flush(if rates.iter().any(Option::is_some) {
            flush
        } else {
            None
        })?;
        Ok(rates)
    }

    /// After a test's load: the sinks settled (at most 30 s; a note if they did not),
    /// then what they received.
    fn finish_load(
        &mut self,
        load: &[(Direction, &Mix, Option<u64>)],
        sent: [u64; 2],
        elapsed: [Duration; 2],
    ) -> io::Result<Trial> {
        if !self.settle_sinks(Duration::from_secs(30))? {
            self.note("the sinks' counts were still changing 30 s after the load".into());
        }
        let mut t = Trial::default();
        for (d, _, _) in load {
            let i = *d as usize;
            t.sent[i] = sent[i];
            t.elapsed[i] = elapsed[i];
            t.received[i] = self.sinks[i].totals()?.of(bdir(*d)).packets;
            t.latency[i] = self.sinks[i].latency_percentiles(bdir(*d))?;
        }
        Ok(t)
    }

    /// The generator limit of `dir` for `mix`: the generator into a drop program on
    /// upf's receiving interface, as fast as it goes for `secs`. Packets per second.
    pub fn generator_limit(&mut self, dir: Direction, mix: &Mix, secs: f64) -> io::Result<f64> {
        let dev = match dir {
            Direction::Uplink => "n3",
            Direction::Downlink => "n6",
        };
        let i = ifindex(&self.upf, dev)?;
        let drop = in_netns(Some(&self.upf), || DropSink::attach(i))??;
        self.pin_napi(dev);
        let before = drop.count()?;
        let (ul, dl) = match dir {
            Direction::Uplink => (Some(mix), None),
            Direction::Downlink => (None, Some(mix)),
        };
        let g = self.generator(ul, dl)?;
        g.set_flush(None)?;
        let mut totals = [0u64, 0];
        totals[dir as usize] = u64::MAX / 4;
        let start = Instant::now();
        let r = g.send([None, None], totals, Duration::from_secs_f64(secs))?;
        let elapsed = start.elapsed().min(r[dir as usize].elapsed);
        std::thread::sleep(Duration::from_millis(100));
        let got = drop.count()?.packets - before.packets;
        drop_in(&self.upf, drop)?;
        Ok(got as f64 / elapsed.as_secs_f64().max(1e-9))
    }

    /// A saturated trial of `dir` with `kind` in place of whatever runs on upf's n3 and
    /// n6, which is put back after it (the UPF keeps forwarding). Received packets per
    /// second. The one-miss forwarder's table holds the rig's sessions, and for its trial
    /// the generator sends them with the uplink TEIDs that encode their slots.
    pub fn limit_trial(
        &mut self,
        kind: LimitKind,
        dir: Direction,
        mix: &Mix,
        secs: f64,
    ) -> io::Result<f64> {
        if kind == LimitKind::Io {
            let bare = self.bare_forwarder(self.psc)?;
            let t = self.trial(&[(dir, mix, None)], secs);
            drop(bare);
            return Ok(t?.received_pps(dir));
        }
        let mut m = match self.one_miss.take() {
            Some(m) if m.sessions == self.sessions => m,
            old => {
                drop(old);
                self.load_one_miss()?
            }
        };
        let attached = in_netns(Some(&self.upf), || m.fwd.attach_here());
        let t = match attached {
            Ok(Ok(())) => {
                self.pin_forwarder();
                let saved = std::mem::take(&mut self.sessions);
                let t = self
                    .set_sessions(&m.relabelled)
                    .and_then(|()| self.trial(&[(dir, mix, None)], secs));
                let back = self.set_sessions(&saved);
                let detached = m.fwd.detach();
                t.and_then(|t| back.and(detached).map(|()| t))
            }
            Ok(Err(e)) | Err(e) => Err(e),
        };
        self.one_miss = Some(m);
        Ok(t?.received_pps(dir))
    }

    /// The one-miss forwarder for the rig's sessions, loaded and filled.
    fn load_one_miss(&self) -> io::Result<OneMiss> {
        let miss: Vec<MissSession> = self
            .sessions
            .iter()
            .map(|s| MissSession {
                ue: s.ue,
                dl_teid: s.teid,
            })
            .collect();
        let (fwd, layout) = BareForwarder::load_one_miss(self.bare_config()?, &miss)?;
        if layout.unslotted > 0 {
            self.note(format!(
                "one-miss limit: {} of {} sessions share a UE address slot with another (their packets are dropped)",
                layout.unslotted,
                miss.len()
            ));
        }
        let relabelled = self
            .sessions
            .iter()
            .zip(&layout.uplink_teids)
            .map(|(s, &teid)| GenSession { teid, ue: s.ue })
            .collect();
        Ok(OneMiss {
            sessions: self.sessions.clone(),
            relabelled,
            fwd,
        })
    }

    fn bare_config(&self) -> io::Result<BareConfig> {
        Ok(BareConfig {
            n3_ifindex: ifindex(&self.upf, "n3")?,
            n6_ifindex: ifindex(&self.upf, "n6")?,
            n3_mac: mac::UPF_N3,
            gnb_mac: mac::GNB_N3,
            n6_mac: mac::UPF_N6,
            dn_mac: mac::DN_N6,
            n3_ip: addr::UPF_N3,
            gnb_ip: addr::GNB_N3,
            n6_ip: addr::UPF_N6,
            teid: 1,
            psc: self.psc,
            qfi: 1,
        })
    }

    /// The bare forwarder on upf's n3 and n6 (the I/O limit), pinned; detached on drop.
    pub fn bare_forwarder(&self, psc: bool) -> io::Result<BareGuard> {
        let cfg = BareConfig {
            psc,
            ..self.bare_config()?
        };
        let f = in_netns(Some(&self.upf), || BareForwarder::attach(cfg))??;
        self.pin_forwarder();
        Ok(BareGuard {
            upf: self.upf.clone(),
            fwd: Some(f),
        })
    }

    /// Detach everything (the lab's XDP_PASS goes back on gnb n3 and dn n6).
    pub fn close(self) -> io::Result<()> {
        let Rig {
            sinks,
            gen,
            gnb,
            dn,
            one_miss,
            ..
        } = self;
        drop(one_miss);
        drop(gen);
        let [ul, dl] = sinks;
        in_netns(Some(&dn), || ul.detach())??;
        in_netns(Some(&gnb), || dl.detach())??;
        Ok(())
    }
}

/// How far apart two reads of the sinks must agree for [`Rig::settle_sinks`].
pub const SETTLE_GAP: Duration = Duration::from_millis(200);

/// 200 us flushes for paced rates over 200 kpps in all ([`Rig::trial_with`]).
fn flush_for(load: &[(Direction, &Mix, Option<u64>)]) -> Option<Duration> {
    let paced: u64 = load.iter().filter_map(|l| l.2).sum();
    (paced > 200_000).then_some(Duration::from_micros(200))
}

fn drop_in<T: Send>(ns: &str, t: T) -> io::Result<()> {
    in_netns(Some(ns), move || drop(t))
}

fn gen_sessions(s: &[GenSession]) -> Vec<b::Session> {
    s.iter()
        .enumerate()
        .map(|(i, s)| b::Session {
            teid: s.teid,
            ue: s.ue,
            dn: addr::DN_HOSTS[i % addr::DN_HOSTS.len()],
        })
        .collect()
}

/// The bare forwarder in place; detached (in upf) when dropped.
pub struct BareGuard {
    upf: String,
    fwd: Option<BareForwarder>,
}

impl Drop for BareGuard {
    fn drop(&mut self) {
        if let Some(f) = self.fwd.take() {
            let _ = drop_in(&self.upf, f);
        }
    }
}
