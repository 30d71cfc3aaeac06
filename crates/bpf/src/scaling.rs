//! Per-core scaling of the XDP programs (issue 17): the data path loaded with N sessions
//! of the benchmark's shape (uplink PDR on a TEID, downlink PDR on the UE address, each
//! with an SDF filter; FARs; a QER with MBR; a volume URR with its threshold armed), and
//! `xdp_n3` (uplink G-PDUs) or `xdp_n6` (downlink) run with BPF_PROG_RUN on one CPU
//! alone, then on two CPUs at once (a thread pinned to each, started by a barrier, the
//! same duration), for
//! - [`Sharing::Disjoint`]: each CPU its own half of the sessions (one CPU alone walks
//!   them all: the same traffic, served by one CPU or by two);
//! - [`Sharing::HotSession`]: every packet of both CPUs for one session, so every cache
//!   line the data path writes for a session is written by both.
//!
//! No generator and no syscall per packet: a driver program (bpf/scaling/) runs with a
//! large repeat count, puts the frame back as it was before each run, writes the next
//! session's TEID and UE address (each CPU walks its sessions in a shuffled order), and
//! tail-calls the UPF program. Its own cost is measured alone
//! ([`ScalingReport::driver_ns`]) and is in every figure. The one-CPU run and the
//! two-CPU run alternate (A B A B ...), and the ratio is the median of the pairs' ratios,
//! so a machine that drifts between minutes moves both sides of a ratio alike.
//!
//! While one CPU runs alone the other spins in a pause loop, so that other work on the
//! machine is pushed around the same way in both runs of a pair.
//!
//! Rates are packets over the time the kernel spent in the program (BPF_PROG_RUN's own
//! timer, whole nanoseconds per packet); `busy` says which share of the run's wall time
//! that was (below 1: the thread was preempted, by other work on the machine).
//!
//! Used by `crates/bpf/tests/scaling.rs` and `upfbench capacity`. Needs CAP_BPF.

use std::mem::MaybeUninit;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags};
use pfcp::ie::{Bitrate, FSeid, NodeId, OuterHeaderCreation, OuterHeaderRemoval, SdfFilter};
use upf::fastpath::{Config, Egress, FastPath, FastPathError};
use upf::rules::*;

use crate::datapath::{Capacity, Datapath, Role};
use crate::mem::io;
use crate::scaling_drive::ScalingDriveSkelBuilder;

/// Which rules each session has (all by default: the benchmark's shape). Taking one out
/// shows what it costs, and which cache line two CPUs fight over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// An SDF filter in both PDRs.
    pub sdf: bool,
    /// A QER with MBR (and QFI) on both PDRs.
    pub qer: bool,
    /// A volume URR on both PDRs.
    pub urr: bool,
    /// The URR's volume threshold armed (the data path then counts it down in the cell
    /// all CPUs share).
    pub threshold: bool,
}

impl Default for Rules {
    fn default() -> Self {
        Rules {
            sdf: true,
            qer: true,
            urr: true,
            threshold: true,
        }
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct ScalingConfig {
    /// Sessions installed (at least 2).
    pub sessions: u32,
    /// The two CPUs: the one-CPU runs alternate between them.
    pub cpus: [usize; 2],
    /// Length of each run.
    pub run: Duration,
    /// A B pairs per case (one CPU, then two).
    pub pairs: usize,
    pub rules: Rules,
    pub programs: Vec<Program>,
    pub sharing: Vec<Sharing>,
    /// Run the measuring (and spinning) threads SCHED_FIFO at this priority: on a busy
    /// machine other work then cannot preempt them, so the two CPUs really run at once
    /// (with `None`, a thread preempted for most of a run overlaps the other CPU's
    /// thread only part of the time, and a hot session looks cheaper than it is; see
    /// `CpuRun::busy`). The kernel keeps 5 % of each second for other work.
    pub fifo: Option<i32>,
}

impl ScalingConfig {
    /// Every rule, both programs, both cases, CPUs 0 and 1, 3 pairs of 1 s runs.
    pub fn new(sessions: u32) -> Self {
        ScalingConfig {
            sessions,
            cpus: [0, 1],
            run: Duration::from_secs(1),
            pairs: 3,
            rules: Rules::default(),
            programs: vec![Program::N3, Program::N6],
            sharing: vec![Sharing::Disjoint, Sharing::HotSession],
            fifo: None,
        }
    }
}

/// The program measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    /// `xdp_n3`: uplink G-PDUs from the gNB, decapsulated to N6.
    N3,
    /// `xdp_n6`: downlink IP packets, encapsulated to the gNB.
    N6,
}

impl Program {
    pub fn name(self) -> &'static str {
        match self {
            Program::N3 => "xdp_n3",
            Program::N6 => "xdp_n6",
        }
    }
}

/// Which sessions the CPUs' packets are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// Each CPU its own half of the sessions; one CPU alone, all of them.
    Disjoint,
    /// Every packet for one session, on both CPUs.
    HotSession,
}

impl Sharing {
    pub fn name(self) -> &'static str {
        match self {
            Sharing::Disjoint => "disjoint",
            Sharing::HotSession => "one hot session",
        }
    }
}

/// One CPU's part of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuRun {
    pub cpu: usize,
    pub packets: u64,
    /// Packets per second over the time the kernel spent in the program, in millions.
    pub mpps: f64,
    /// That time as a share of the run's wall time.
    pub busy: f64,
}

/// One A B pair: one CPU alone, then both.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub one: CpuRun,
    pub both: [CpuRun; 2],
}

impl Pair {
    pub fn aggregate_mpps(&self) -> f64 {
        self.both[0].mpps + self.both[1].mpps
    }

    pub fn ratio(&self) -> f64 {
        self.aggregate_mpps() / self.one.mpps
    }
}

/// One program and sharing: the medians over its pairs.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingCase {
    pub program: Program,
    pub sharing: Sharing,
    /// Sessions the packets are for: all installed (Disjoint), or 1.
    pub sessions: u32,
    /// Sessions installed.
    pub installed: u32,
    /// One CPU alone, Mpps (median).
    pub one_cpu_mpps: f64,
    /// Each CPU of the two-CPU runs, Mpps (median of each).
    pub per_cpu_mpps: [f64; 2],
    /// Both CPUs together, Mpps (median).
    pub aggregate_mpps: f64,
    /// Aggregate over one CPU: the median of the pairs' ratios.
    pub ratio: f64,
    /// The lowest `busy` of any CPU in any run of the case.
    pub min_busy: f64,
    pub pairs: Vec<Pair>,
}

/// Everything measured.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingReport {
    pub cases: Vec<ScalingCase>,
    /// What the driver alone costs a packet (no UPF program), ns, per program: in every
    /// figure above.
    pub driver_ns: Vec<(Program, f64)>,
    pub rules: Rules,
    /// Time taken to install the sessions.
    pub install: Duration,
}

/// BPF_PROG_RUN repeats per call: long enough that the syscall is nothing, short
/// enough that a run ends close to its deadline (~20-100 ms a call).
const REPEAT: i32 = 200_000;

const XDP_REDIRECT: u32 = 4;
const XDP_DROP: u32 = 1;

// The benchmark's addresses and frames, shared with crates/bpf/tests (common/mod.rs).
/// The UPF's N3 address.
pub const N3: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 7);
/// The gNB's N3 address.
pub const GNB: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 1);
/// The data network's host.
pub const DN: Ipv4Addr = Ipv4Addr::new(192, 168, 6, 1);
const IFINDEX: u32 = 20;

/// Session `i`'s UE address.
pub fn ue(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(0x0a40_0000 + i + 1)
}

/// Measure per-core scaling as `cfg` says. Loads its own data path (tables for
/// `cfg.sessions`); errors if it cannot (not root) or a run does not forward.
pub fn measure(cfg: &ScalingConfig) -> Result<ScalingReport, FastPathError> {
    let n = cfg.sessions.max(2);
    let ncpu = std::thread::available_parallelism().map_or(1, |p| p.get());
    if cfg.cpus[0] == cfg.cpus[1] || cfg.cpus.iter().any(|c| *c >= ncpu) {
        return Err(io(format!(
            "two distinct CPUs below {ncpu} needed, got {:?}",
            cfg.cpus
        )));
    }
    let cap = Capacity::for_sessions(n + 16);
    let dcfg = neigh_config();
    let mut dp = Datapath::load(cap, dcfg.clone())?;
    dp.configure(dcfg, IFINDEX, IFINDEX, 0)?;
    let index = dp.teid_index();
    // As upfd allocates them: the TEID whose uplink slot is the UE address's downlink
    // slot, so a session's state is at one index (lookup_cost's default).
    let teid_of = |i: u32| index.teid(u32::from(ue(i)) % cap.ue_slots);
    let t0 = Instant::now();
    for i in 0..n {
        let s = Arc::new(session(i, teid_of(i), cfg.rules));
        dp.install(None, &s)?;
        if cfg.rules.urr && cfg.rules.threshold {
            dp.write_threshold(s.up_seid, 1, Some(1 << 60))?;
        }
    }
    let install = t0.elapsed();

    let drv = Driver::load(n)?;
    // Walk order: each half shuffled (the tables are met as a busy UPF meets them,
    // mostly not in the cache), the first half first.
    let mut order: Vec<u32> = (0..n).collect();
    let half = (n / 2) as usize;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    shuffle(&mut order[..half], &mut rng);
    shuffle(&mut order[half..], &mut rng);
    let keys: Vec<(u32, Ipv4Addr)> = order.iter().map(|&i| (teid_of(i), ue(i))).collect();
    drv.write_sessions(&keys)?;

    let mut report = ScalingReport {
        cases: Vec::new(),
        driver_ns: Vec::new(),
        rules: cfg.rules,
        install,
    };
    for &program in &cfg.programs {
        drv.set_frame(program)?;
        // The driver alone: the tail call to an empty slot falls through to XDP_DROP.
        drv.set_target(None)?;
        drv.set_walks(&[(cfg.cpus[0], 0, n)])?;
        let alone = run(drv.fd(), &[cfg.cpus[0]], cfg.run / 4, XDP_DROP, cfg.fifo)?;
        report.driver_ns.push((program, 1e3 / alone[0].mpps));
        let prog = match program {
            Program::N3 => dp.prog_fd(Role::Gtpu),
            Program::N6 => dp.prog_fd(Role::N6),
        };
        drv.set_target(Some(prog.as_raw_fd()))?;
        for &sharing in &cfg.sharing {
            let mut pairs = Vec::new();
            for p in 0..cfg.pairs.max(1) {
                let alone_cpu = cfg.cpus[p % 2];
                let (one_walk, both_walks) = match sharing {
                    Sharing::Disjoint => (
                        (alone_cpu, 0, n),
                        [(cfg.cpus[0], 0, n / 2), (cfg.cpus[1], n / 2, n - n / 2)],
                    ),
                    Sharing::HotSession => (
                        (alone_cpu, 0, 1),
                        [(cfg.cpus[0], 0, 1), (cfg.cpus[1], 0, 1)],
                    ),
                };
                drv.set_walks(&[one_walk])?;
                let other = cfg.cpus[(p + 1) % 2];
                let one = run_beside_spin(drv.fd(), alone_cpu, other, cfg.run, cfg.fifo)?;
                drv.set_walks(&both_walks)?;
                let both = run(drv.fd(), &cfg.cpus, cfg.run, XDP_REDIRECT, cfg.fifo)?;
                pairs.push(Pair {
                    one,
                    both: [both[0], both[1]],
                });
            }
            let med = |f: &dyn Fn(&Pair) -> f64| median(pairs.iter().map(f).collect());
            report.cases.push(ScalingCase {
                program,
                sharing,
                sessions: if sharing == Sharing::Disjoint { n } else { 1 },
                installed: n,
                one_cpu_mpps: med(&|p| p.one.mpps),
                per_cpu_mpps: [med(&|p| p.both[0].mpps), med(&|p| p.both[1].mpps)],
                aggregate_mpps: med(&|p| p.aggregate_mpps()),
                ratio: med(&|p| p.ratio()),
                min_busy: pairs
                    .iter()
                    .flat_map(|p| [p.one.busy, p.both[0].busy, p.both[1].busy])
                    .fold(1.0, f64::min),
                pairs,
            });
        }
    }
    Ok(report)
}

impl ScalingReport {
    /// The figures as a table, one line per case.
    pub fn table(&self) -> String {
        let mut s = String::from(
            "program  sharing          sessions  1 CPU Mpps  2 CPUs Mpps (each)      aggregate  ratio  pairs' ratios       min busy\n",
        );
        for c in &self.cases {
            let ratios: Vec<String> = c
                .pairs
                .iter()
                .map(|p| format!("{:.2}", p.ratio()))
                .collect();
            s += &format!(
                "{:<8} {:<16} {:>8}  {:>10.3}  {:>6.3} + {:<6.3}         {:>9.3}  {:>5.2}  {:<18}  {:.2}\n",
                c.program.name(),
                c.sharing.name(),
                c.sessions,
                c.one_cpu_mpps,
                c.per_cpu_mpps[0],
                c.per_cpu_mpps[1],
                c.aggregate_mpps,
                c.ratio,
                ratios.join(" "),
                c.min_busy
            );
        }
        for (p, ns) in &self.driver_ns {
            s += &format!(
                "driver alone before {}: {ns:.1} ns/packet (in every figure)\n",
                p.name()
            );
        }
        s
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn shuffle(v: &mut [u32], state: &mut u64) {
    for i in (1..v.len()).rev() {
        // xorshift64*
        *state ^= *state >> 12;
        *state ^= *state << 25;
        *state ^= *state >> 27;
        let r = state.wrapping_mul(0x2545_f491_4f6c_dd1d);
        v.swap(i, (r % (i as u64 + 1)) as usize);
    }
}

/// Run the driver on `cpus` at once, each a thread pinned to its CPU, started together,
/// for `len`; every call must return `want`.
fn run(
    fd: i32,
    cpus: &[usize],
    len: Duration,
    want: u32,
    fifo: Option<i32>,
) -> Result<Vec<CpuRun>, FastPathError> {
    let barrier = Arc::new(Barrier::new(cpus.len()));
    let threads: Vec<_> = cpus
        .iter()
        .map(|&cpu| {
            let barrier = barrier.clone();
            std::thread::spawn(move || -> Result<CpuRun, String> {
                pin(cpu, fifo)?;
                // The frame comes from the driver's template: this only sizes the buffer.
                let data = [0u8; 64];
                barrier.wait();
                let start = Instant::now();
                let (mut packets, mut kernel_ns) = (0u64, 0u64);
                // At least one call: a thread preempted right after `start` (a busy
                // machine) still measures something rather than nothing.
                while packets == 0 || start.elapsed() < len {
                    let mut o = libbpf_rs::libbpf_sys::bpf_test_run_opts {
                        sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_test_run_opts>() as _,
                        data_in: data.as_ptr().cast(),
                        data_size_in: data.len() as u32,
                        repeat: REPEAT,
                        ..Default::default()
                    };
                    // SAFETY: `o` points at `data`, which outlives the call.
                    let r = unsafe { libbpf_rs::libbpf_sys::bpf_prog_test_run_opts(fd, &mut o) };
                    if r != 0 {
                        return Err(format!(
                            "BPF_PROG_RUN on CPU {cpu}: {}",
                            std::io::Error::from_raw_os_error(-r)
                        ));
                    }
                    if o.retval != want {
                        return Err(format!(
                            "CPU {cpu}: the program returned {} (wanted {want}): see the data path's drop counters",
                            o.retval
                        ));
                    }
                    packets += REPEAT as u64;
                    kernel_ns += u64::from(o.duration) * REPEAT as u64;
                }
                let wall = start.elapsed().as_nanos() as f64;
                Ok(CpuRun {
                    cpu,
                    packets,
                    mpps: packets as f64 * 1e3 / kernel_ns.max(1) as f64,
                    busy: kernel_ns as f64 / wall,
                })
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| {
            t.join()
                .map_err(|_| io("a run's thread panicked"))?
                .map_err(io)
        })
        .collect()
}

/// Run on `cpu` alone while a thread spins on `other` (a pause loop, no memory
/// traffic): the rest of the machine's work then meets two busy CPUs, as in the two-CPU
/// run, instead of crowding onto the idle one and sharing its caches with the run.
fn run_beside_spin(
    fd: i32,
    cpu: usize,
    other: usize,
    len: Duration,
    fifo: Option<i32>,
) -> Result<CpuRun, FastPathError> {
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s = stop.clone();
    let spinner = std::thread::spawn(move || {
        let pinned = pin(other, fifo);
        while !s.load(std::sync::atomic::Ordering::Relaxed) {
            std::hint::spin_loop();
        }
        pinned
    });
    let r = run(fd, &[cpu], len, XDP_REDIRECT, fifo);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spinner
        .join()
        .map_err(|_| io("the spinning thread panicked"))?
        .map_err(io)?;
    Ok(r?[0])
}

/// Pin this thread to `cpu`, and make it SCHED_FIFO at `fifo` if given.
fn pin(cpu: usize, fifo: Option<i32>) -> Result<(), String> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET and sched_setaffinity (0: this
    // thread) read and write only the set we own.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(format!(
                "pinning to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY (as above): sched_setscheduler (0: this thread) reads the param we own.
        if let Some(prio) = fifo {
            let p = libc::sched_param {
                sched_priority: prio,
            };
            if libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) != 0 {
                return Err(format!(
                    "SCHED_FIFO {prio}: {}",
                    std::io::Error::last_os_error()
                ));
            }
        }
    }
    Ok(())
}

/// The driver program (bpf/scaling/scaling_drive.bpf.c) and its tables.
struct Driver {
    skel: crate::scaling_drive::ScalingDriveSkel<'static>,
}

/// The layouts of bpf/scaling/scaling_drive.bpf.c.
const FRAME_MAX: usize = 256;

impl Driver {
    fn load(sessions: u32) -> Result<Self, FastPathError> {
        let obj: &'static mut MaybeUninit<libbpf_rs::OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = ScalingDriveSkelBuilder::default().open(obj).map_err(io)?;
        open.maps.sessions.set_max_entries(sessions).map_err(io)?;
        let skel = open.load().map_err(io)?;
        Ok(Driver { skel })
    }

    fn fd(&self) -> i32 {
        self.skel.progs.drive.as_fd().as_raw_fd()
    }

    fn write_sessions(&self, keys: &[(u32, Ipv4Addr)]) -> Result<(), FastPathError> {
        let m = &self.skel.maps.sessions;
        for (k, (teid, ue)) in keys.iter().enumerate() {
            let mut v = [0u8; 8];
            v[..4].copy_from_slice(&teid.to_be_bytes());
            v[4..].copy_from_slice(&ue.octets());
            m.update(&(k as u32).to_ne_bytes(), &v, MapFlags::ANY)
                .map_err(io)?;
        }
        Ok(())
    }

    fn set_frame(&self, program: Program) -> Result<(), FastPathError> {
        let (frame, teid_off, ue_off) = match program {
            Program::N3 => (uplink_frame(0, ue(0)), 46u32, 70u32),
            Program::N6 => (downlink_frame(ue(0)), 0, 30),
        };
        let mut v = vec![0u8; 16 + FRAME_MAX];
        v[0..4].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
        v[4..8].copy_from_slice(&teid_off.to_ne_bytes());
        v[8..12].copy_from_slice(&ue_off.to_ne_bytes());
        v[16..16 + frame.len()].copy_from_slice(&frame);
        self.skel
            .maps
            .template
            .update(&0u32.to_ne_bytes(), &v, MapFlags::ANY)
            .map_err(io)
    }

    fn set_target(&self, fd: Option<i32>) -> Result<(), FastPathError> {
        let m = &self.skel.maps.target;
        match fd {
            Some(fd) => m
                .update(&0u32.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
                .map_err(io),
            None => {
                let _ = m.delete(&0u32.to_ne_bytes());
                Ok(())
            }
        }
    }

    /// Each CPU's walk: (cpu, first, count) over the sessions table.
    fn set_walks(&self, walks: &[(usize, u32, u32)]) -> Result<(), FastPathError> {
        let ncpus = libbpf_rs::num_possible_cpus().map_err(io)?;
        let mut values = vec![vec![0u8; 16]; ncpus];
        for &(cpu, lo, n) in walks {
            let v = values
                .get_mut(cpu)
                .ok_or_else(|| io(format!("CPU {cpu} out of range")))?;
            v[4..8].copy_from_slice(&lo.to_ne_bytes());
            v[8..12].copy_from_slice(&n.to_ne_bytes());
        }
        self.skel
            .maps
            .walks
            .update_percpu(&0u32.to_ne_bytes(), &values, MapFlags::ANY)
            .map_err(io)
    }
}

/// N3 on 10.10.0.7, every packet leaving by ifindex 20 through configured neighbours (no
/// kernel FIB), so BPF_PROG_RUN forwards without interfaces.
pub fn neigh_config() -> Config {
    let e = |n: u8| Egress {
        ifindex: IFINDEX,
        mtu: 1500,
        smac: [2, 0, 0, 0, 0, n],
        dmac: [2, 0, 0, 0, 1, n],
    };
    let mut neigh = std::collections::HashMap::new();
    neigh.insert(IpAddr::V4(Ipv4Addr::UNSPECIFIED), e(1));
    neigh.insert(IpAddr::V6(Ipv6Addr::UNSPECIFIED), e(2));
    Config {
        local: vec![IpAddr::V4(N3)],
        n3_v4: Some(N3),
        neigh,
        ..Default::default()
    }
}

fn eth(ethertype: u16) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 8];
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// A G-PDU from the gNB on `teid` (PDU Session Container, QFI 1) from `ue` to the data
/// network: TEID at octet 46, the inner source at 70.
pub fn uplink_frame(teid: u32, ue: Ipv4Addr) -> Vec<u8> {
    let inner = capture::ip_udp_packet(ue.into(), DN.into(), 40000, 9, &[0x55; 64]);
    let mut g = vec![0x34, 0xff];
    g.extend_from_slice(&((inner.len() + 8) as u16).to_be_bytes());
    g.extend_from_slice(&teid.to_be_bytes());
    g.extend_from_slice(&[0, 0, 0, 0x85, 1, 0x10, 1, 0]);
    g.extend(inner);
    let mut f = eth(0x0800);
    f.extend(capture::ip_udp_packet(
        GNB.into(),
        N3.into(),
        2152,
        2152,
        &g,
    ));
    f
}

/// A packet from the data network to `ue`: the destination at octet 30.
pub fn downlink_frame(ue: Ipv4Addr) -> Vec<u8> {
    let mut f = eth(0x0800);
    f.extend(capture::ip_udp_packet(
        DN.into(),
        ue.into(),
        9,
        40000,
        &[0x55; 64],
    ));
    f
}

/// Session `i` as the benchmark's SMF builds it (crates/bpf/tests/common `session`):
/// uplink PDR on `teid` (QFI 1, Outer Header Removal), downlink PDR on the UE address,
/// each with an SDF filter; FARs to N6 and to the gNB; a QER with MBR and QFI; a volume
/// URR on both PDRs; less what `rules` leaves out.
pub fn session(i: u32, teid: u32, rules: Rules) -> Session {
    let seid = u64::from(i) + 1;
    let mut s = Session::new(
        seid,
        FSeid {
            spare: 0,
            seid,
            ipv4: Some(Ipv4Addr::LOCALHOST),
            ipv6: None,
        },
        NodeId::Ipv4(Ipv4Addr::LOCALHOST),
    );
    let sdf = SdfFilter {
        flow_description: Some(b"permit out ip from any to assigned".to_vec()),
        ..Default::default()
    };
    if rules.qer {
        s.qers.insert(
            1,
            Qer {
                id: 1,
                gate_ul_open: true,
                gate_dl_open: true,
                mbr: Some(Bitrate {
                    ul_kbps: 100_000_000,
                    dl_kbps: 100_000_000,
                }),
                qfi: Some(1),
                ..Qer::default()
            },
        );
    }
    if rules.urr {
        let rule = UrrRule {
            // VOLUM; reporting trigger VOLTH (the threshold is armed below, in measure).
            measurement_method: pfcp::ie::Flags::from_bits(&[2], 1),
            reporting_triggers: pfcp::ie::Flags::from_bits(&[2], 2),
            measurement_period: None,
            volume_threshold: Some(VolumeLimit {
                total: Some(1 << 40),
                ..Default::default()
            }),
            volume_quota: None,
            time_threshold: None,
            time_quota: None,
            quota_holding_time: None,
            inactivity_detection_time: None,
            linked_urr_ids: Vec::new(),
            far_id_for_quota_action: None,
        };
        s.urrs.insert(1, Urr { id: 1, rule });
    }
    for (id, dest, ohc) in [
        (1u32, interface::CORE, None),
        (
            2,
            interface::ACCESS,
            Some(OuterHeaderCreation::gtpu_ipv4(i + 1, GNB)),
        ),
    ] {
        s.fars.insert(
            id,
            Far {
                id,
                action: ApplyAction {
                    forw: true,
                    ..Default::default()
                },
                forwarding: Some(Forwarding {
                    destination_interface: dest,
                    outer_header_creation: ohc,
                    ..Default::default()
                }),
                bar_id: None,
            },
        );
    }
    let ue_ip = UeIp {
        ipv4: Some(ue(i)),
        ..Default::default()
    };
    let sdfs = || {
        if rules.sdf {
            thin_vec![sdf.clone()]
        } else {
            thin_vec![]
        }
    };
    for (id, far, pdi, ohr) in [
        (
            1u16,
            1u32,
            Pdi {
                source_interface: interface::ACCESS,
                local_fteid: Some(LocalFteid {
                    teid,
                    ipv4: Some(N3),
                    ipv6: None,
                }),
                ue_ips: thin_vec![ue_ip],
                qfis: thin_vec![1],
                sdf_filters: sdfs(),
                ..Default::default()
            },
            Some(OuterHeaderRemoval {
                description: 0,
                ext_header_deletion: None,
            }),
        ),
        (
            2,
            2,
            Pdi {
                source_interface: interface::CORE,
                ue_ips: thin_vec![UeIp {
                    is_destination: true,
                    ..ue_ip
                }],
                sdf_filters: sdfs(),
                ..Default::default()
            },
            None,
        ),
    ] {
        s.pdrs.insert(
            id,
            Pdr {
                id,
                precedence: 100,
                pdi,
                outer_header_removal: ohr,
                far_id: Some(far),
                urr_ids: if rules.urr { smallvec![1] } else { smallvec![] },
                qer_ids: if rules.qer { smallvec![1] } else { smallvec![] },
                activation_time: None,
                deactivation_time: None,
            },
        );
    }
    s
}
