//! The traffic rig in the lab: generators in gnb (uplink GTP-U) and dn (downlink IP),
//! sinks on the receiving ends (gnb n3, dn n6), and on upf's interfaces whatever is
//! measured: a drop program (generator limit), the bare forwarder (I/O limit) or the UPF.
//!
//! CPUs: the generators run pinned to `gen_cpu`; upf's n3 and n6 receive in their own
//! NAPI threads pinned to `fwd_cpu` (SCHED_FIFO), so the UPF's XDP programs (and the
//! sinks behind them, which receive in the softirq of the CPU that sends to them)
//! run there. A veth otherwise receives on the sender's CPU and everything would share
//! one core.

use std::io;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use upf_bpf::bench::{
    self as b, frame_len_for_ip_len, napi_thread, set_fifo, BareConfig, BareForwarder, DropSink,
    GenConfig, Generator, Percentiles, Sink,
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
    gens: [Option<(Mix, Generator)>; 2],
    sessions: Vec<GenSession>,
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
            gens: [None, None],
            sessions: Vec::new(),
        })
    }

    /// Give upf's n3 and n6 their own NAPI threads on the forwarding CPU (again after
    /// every change of the XDP programs there: a veth's NAPI lives with its program).
    pub fn pin_forwarder(&self) -> io::Result<()> {
        for dev in ["n3", "n6"] {
            let pid = napi_thread(&self.upf, dev, self.fwd_cpu)?;
            set_fifo(pid, 50)?;
        }
        Ok(())
    }

    /// The sessions the generators address, round robin.
    pub fn set_sessions(&mut self, s: &[GenSession]) -> io::Result<()> {
        self.sessions = s.to_vec();
        for g in self.gens.iter_mut().flatten() {
            g.1.set_sessions(&gen_sessions(s))?;
        }
        Ok(())
    }

    /// Load the generator of `dir` for `mix` (kept while the mix stays the same).
    fn generator(&mut self, dir: Direction, mix: &Mix) -> io::Result<&mut Generator> {
        let i = dir as usize;
        if self.gens[i].as_ref().is_none_or(|(m, _)| m != mix) {
            self.gens[i] = None;
            let psc = self.psc;
            let sizes: Vec<(u16, u32)> = mix
                .sizes
                .iter()
                .map(|&(ip, w)| {
                    let f = frame_len_for_ip_len(
                        bdir(dir),
                        dir == Direction::Uplink && psc,
                        ip as usize,
                    );
                    (f as u16, w)
                })
                .collect();
            let (ns, cfg) = match dir {
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
                    (self.gnb.clone(), c)
                }
                Direction::Downlink => (
                    self.dn.clone(),
                    GenConfig::downlink(ifindex(&self.dn, "n6")?, mac::DN_N6, mac::UPF_N6),
                ),
            };
            let cfg = GenConfig {
                sizes,
                max_sessions: self.max_sessions,
                cpu: Some(self.gen_cpu),
                timestamps: true,
                ..cfg
            };
            let mut g = in_netns(Some(&ns), || Generator::load(cfg))??;
            if !self.sessions.is_empty() {
                g.set_sessions(&gen_sessions(&self.sessions))?;
            }
            self.gens[i] = Some((mix.clone(), g));
        }
        Ok(&mut self.gens[i].as_mut().expect("loaded").1)
    }

    /// Per-session packets each generator sent and each sink received since the last
    /// [`Rig::reset`]: ([sent, received]) per direction.
    pub fn per_session(&mut self, dir: Direction) -> io::Result<(Vec<u64>, Vec<u64>)> {
        let sent = match &self.gens[dir as usize] {
            Some((_, g)) => g.sent_per_session()?,
            None => Vec::new(),
        };
        let got = self.sinks[dir as usize]
            .counts(bdir(dir))?
            .iter()
            .map(|c| c.packets)
            .collect();
        Ok((sent, got))
    }

    /// Zero the sinks and restart the generators' per-session counts.
    pub fn reset(&mut self) -> io::Result<()> {
        for s in &self.sinks {
            s.reset()?;
        }
        let sessions = gen_sessions(&self.sessions);
        if !sessions.is_empty() {
            for g in self.gens.iter_mut().flatten() {
                g.1.set_sessions(&sessions)?;
            }
        }
        Ok(())
    }

    /// Send for `secs` in the given directions at once: `rate` packets/s each (None:
    /// as fast as the generator goes), with `mixes`. Waits `drain` for packets in
    /// flight, then reads the sinks.
    pub fn trial(
        &mut self,
        load: &[(Direction, &Mix, Option<u64>)],
        secs: f64,
    ) -> io::Result<Trial> {
        if self.sessions.is_empty() {
            return Err(io::Error::other("no sessions"));
        }
        for (d, m, _) in load {
            self.generator(*d, m)?;
        }
        self.reset()?;
        let deadline = Duration::from_secs_f64(secs);
        let mut results: Vec<(Direction, io::Result<b::SendReport>)> = Vec::new();
        {
            let rate_of = |d: Direction| load.iter().find(|l| l.0 == d).map(|l| l.2);
            let mut jobs: Vec<(Direction, &mut Generator, Option<u64>)> = Vec::new();
            for (i, slot) in self.gens.iter_mut().enumerate() {
                let d = Direction::BOTH[i];
                if let (Some(rate), Some((_, g))) = (rate_of(d), slot.as_mut()) {
                    jobs.push((d, g, rate));
                }
            }
            std::thread::scope(|s| {
                let handles: Vec<_> = jobs
                    .into_iter()
                    .map(|(d, g, rate)| {
                        s.spawn(move || {
                            let total = match rate {
                                Some(r) => (r as f64 * secs).ceil() as u64,
                                None => u64::MAX / 2,
                            };
                            (d, g.send(rate, total.max(1), deadline))
                        })
                    })
                    .collect();
                for h in handles {
                    results.push(h.join().expect("generator thread"));
                }
            });
        }
        std::thread::sleep(Duration::from_millis(200));
        let mut t = Trial::default();
        for (d, r) in results {
            let r = r?;
            let i = d as usize;
            t.sent[i] = r.packets;
            t.elapsed[i] = r.elapsed;
            t.received[i] = self.sinks[i].totals()?.of(bdir(d)).packets;
            t.latency[i] = self.sinks[i].latency_percentiles(bdir(d))?;
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
        let pid = napi_thread(&self.upf, dev, self.fwd_cpu)?;
        set_fifo(pid, 50)?;
        let before = drop.count()?;
        self.generator(dir, mix)?;
        let start = Instant::now();
        let g = &mut self.gens[dir as usize].as_mut().expect("loaded").1;
        let r = g.send(None, u64::MAX / 2, Duration::from_secs_f64(secs))?;
        let elapsed = start.elapsed().min(r.elapsed);
        std::thread::sleep(Duration::from_millis(100));
        let got = drop.count()?.packets - before.packets;
        drop_in(&self.upf, drop)?;
        Ok(got as f64 / elapsed.as_secs_f64().max(1e-9))
    }

    /// The bare forwarder on upf's n3 and n6 (the I/O limit), pinned; detached on drop.
    pub fn bare_forwarder(&self, psc: bool) -> io::Result<BareGuard> {
        let cfg = BareConfig {
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
            psc,
            qfi: 1,
        };
        let f = in_netns(Some(&self.upf), || BareForwarder::attach(cfg))??;
        self.pin_forwarder()?;
        Ok(BareGuard {
            upf: self.upf.clone(),
            fwd: Some(f),
        })
    }

    /// Detach everything (the lab's XDP_PASS goes back on gnb n3 and dn n6).
    pub fn close(self) -> io::Result<()> {
        let Rig {
            sinks,
            gens,
            gnb,
            dn,
            ..
        } = self;
        drop(gens);
        let [ul, dl] = sinks;
        in_netns(Some(&dn), || ul.detach())??;
        in_netns(Some(&gnb), || dl.detach())??;
        Ok(())
    }
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
