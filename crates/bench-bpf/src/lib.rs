//! The bench programs of bpf/bench/: a traffic generator, sinks and the programs that
//! measure the machine's own limits, for `upfbench capacity` (BENCHMARKS.md).
//!
//! - [`Generator`]: an XDP program run by `BPF_PROG_RUN` with
//!   `BPF_F_TEST_XDP_LIVE_FRAMES`; every run writes one packet (uplink GTP-U, or downlink
//!   plain IPv4/UDP) of the next session into the frame and sends it out of a veth, to
//!   the veth's peer. [`Generator::run`] is one call; [`Generator::send`] sends a
//!   count, paced or as fast as it goes, bounded in time.
//! - [`DualGenerator`]: the same program logic for both directions at once, from one
//!   thread and one call at a time, each direction with its own configuration, pacing
//!   and counters (two paced [`Generator`]s on one CPU each get about half their rate).
//! - [`Sink`]: on a receiving end (gnb `n3`, dn `n6`), counts the generator's packets per
//!   session and direction, records their latency, drops them; passes everything else.
//! - [`DropSink`]: counts and drops everything: the generator limit.
//! - [`BareForwarder`]: GTP-U decapsulation and encapsulation with fixed next hops and no
//!   session logic, in place of upfd: the I/O limit; or, with one read of the session's
//!   64-octet record per packet, the one-miss limit ([`BareForwarder::load_one_miss`]).
//!
//! Where they go in the lab (`upfbench::lab`):
//!
//! ```text
//!   ns gnb, n3: Generator uplink (GenConfig::uplink, ifindex = gnb n3: XDP_TX sends
//!               to upf n3) and Sink (counts downlink)
//!   ns upf, n3 + n6: upfd; or BareForwarder (I/O limit); or DropSink on n3 alone
//!               (generator limit)
//!   ns dn, n6:  Generator downlink (GenConfig::downlink, ifindex = dn n6) and Sink
//!               (counts uplink)
//!   or, for both directions from one thread: DualGenerator::load(uplink config,
//!               downlink config, [Some(gnb), Some(dn)]), loaded and run from any
//!               namespace (it sends through a devmap whose entries it writes from
//!               threads in gnb and dn)
//! ```
//!
//! CPUs: pin the generators ([`GenConfig::cpu`], e.g. CPU 0). A veth receives in the
//! softirq of the CPU that sent to it, so by default the UPF's XDP programs and the
//! sinks run on the generator's CPU too ("one core"). [`napi_thread`] on upf `n3` and
//! `n6` (CPU 1) and [`set_fifo`] on the returned threads move the forwarding to CPU 1;
//! the sinks then run in CPU 1's softirq, as they are reached by redirects from there.
//! Giving the sinks NAPI threads on CPU 0 as well needs SCHED_FIFO (the spinning
//! generator starves them otherwise) and costs throughput on a VM (cross-CPU wakeups).
//!
//! Everything that names an interface by ifindex works in the network namespace of the
//! thread that loaded or attached it: a [`Generator`] runs there, a [`Sink`] is detached
//! there, whatever thread calls later (`upfbench::lab::in_netns` starts such a thread).
//! Each holds that namespace open, so drop them before removing the lab (a deleted
//! namespace lives on, nameless, until then). Attaching replaces the interface's XDP
//! program (the lab's XDP_PASS) and puts it back on drop. A veth accepts XDP_TX and
//! redirected frames only while its peer runs an XDP program, so every receiving end
//! needs one of these (or the lab's XDP_PASS).
//!
//! Table layouts are those of bpf/bench/bench.h (generated types in [`skel`]); the
//! constants below mirror it and the tests check them against the programs.
//!
//! This crate is the bench's alone: upfd does not link it.

use std::fs::File;
use std::io;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use libbpf_rs::libbpf_sys;
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{MapCore, MapFlags, OpenObject, Xdp, XdpFlags};

/// The skeletons of bpf/bench/*.bpf.c (built by build.rs as `bench_<name>`).
#[allow(clippy::all)]
pub mod skel {
    /// bpf/bench/xdp_pass.bpf.c: XDP_PASS, for the far end of a veth pair that receives
    /// redirected frames.
    pub mod pass {
        include!(concat!(env!("OUT_DIR"), "/bench_xdp_pass.skel.rs"));
    }
    /// bpf/bench/gen.bpf.c: `bench_gen`, maps `gen_cfg`, `gen_sessions`, `gen_state`.
    pub mod gen {
        include!(concat!(env!("OUT_DIR"), "/bench_gen.skel.rs"));
    }
    /// bpf/bench/sink.bpf.c: `bench_sink`, maps `sink_sessions`, `sink_totals`,
    /// `sink_latency`.
    pub mod sink {
        include!(concat!(env!("OUT_DIR"), "/bench_sink.skel.rs"));
    }
    /// bpf/bench/drop.bpf.c: `bench_drop`, map `drop_count`.
    pub mod drop {
        include!(concat!(env!("OUT_DIR"), "/bench_drop.skel.rs"));
    }
    /// bpf/bench/bare_fwd.bpf.c: `bare_n3`, `bare_n6`, `miss_n3`, `miss_n6`, maps
    /// `bare_cfg`, `bare_stats`, `miss_ul`, `miss_dl`.
    pub mod bare_fwd {
        include!(concat!(env!("OUT_DIR"), "/bench_bare_fwd.skel.rs"));
    }
}

/// The compiled object of the XDP_PASS program, for tools that load it by file
/// (`ip link set dev X xdp obj FILE sec xdp`).
pub const PASS_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/bench_xdp_pass.bpf.o"));

use skel::bare_fwd::{types as bare_types, BenchBareFwdSkel, BenchBareFwdSkelBuilder};
use skel::drop::{BenchDropSkel, BenchDropSkelBuilder};
use skel::gen::{types as gen_types, BenchGenSkel, BenchGenSkelBuilder};
use skel::sink::{types as sink_types, BenchSinkSkel, BenchSinkSkelBuilder};

/// `BENCH_MAGIC`: the first payload word of every generated packet ("UPFB").
pub const MAGIC: u32 = 0x5550_4642;
/// `BENCH_MAX_SIZES`: entries of the generator's size table (weights expanded).
pub const MAX_SIZES: usize = 64;
/// `BENCH_SIZE_TCP`: a size table entry with this bit is a TCP segment
/// ([`GenConfig::tcp_sizes`]); the rest of it is the frame length.
pub const SIZE_TCP: u16 = 0x8000;
/// Octets a TCP header (no options) takes beyond a UDP header.
pub const TCP_EXTRA: usize = 12;
/// Octets of `struct bench_payload`: magic, session, sequence, timestamp.
pub const PAYLOAD_LEN: usize = 20;
/// The largest frame accepted: `BPF_PROG_RUN` in live-frames mode takes a page less
/// headroom and tailroom (3400 works on 6.18, 3500 does not). A veth drops frames
/// longer than its MTU + 18, so in the lab (MTU 1500) 1514 is the useful maximum.
pub const MAX_FRAME_LEN: usize = 3400;
/// `HIST_LINEAR_BITS`: buckets below 2^7 us are 1 us wide.
pub const HIST_LINEAR_BITS: u32 = 7;
/// `HIST_SUB_BITS`: 16 buckets per power of two above.
pub const HIST_SUB_BITS: u32 = 4;
/// `HIST_MAX_BITS`: the last bucket holds everything from 2^32 us on.
pub const HIST_MAX_BITS: u32 = 32;
/// `HIST_BUCKETS`.
pub const HIST_BUCKETS: usize =
    (1 << HIST_LINEAR_BITS) + ((HIST_MAX_BITS - HIST_LINEAR_BITS) as usize) * (1 << HIST_SUB_BITS);
/// GTP-U's UDP port (TS 29.281 clause 4.4.2.3).
pub const GTPU_PORT: u16 = 2152;

/// BPF_F_TEST_XDP_LIVE_FRAMES: BPF_PROG_RUN sends what the program transmits.
const TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

/// Which way traffic goes; the index of a sink's counters (`BENCH_UL`, `BENCH_DL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// UE -> data network: GTP-U from the gNB, plain IP at the data network.
    Uplink = 0,
    /// Data network -> UE: plain IP from the data network, GTP-U at the gNB.
    Downlink = 1,
}

impl Direction {
    /// Both, uplink first.
    pub const BOTH: [Direction; 2] = [Direction::Uplink, Direction::Downlink];

    fn index(self) -> usize {
        self as usize
    }
}

/// Octets in front of the payload of a generated frame: Ethernet, then for uplink outer
/// IPv4, UDP, GTP-U (with `psc`: its optional fields and a PDU Session Container), then
/// the (inner) IPv4 and UDP headers.
pub fn header_len(dir: Direction, psc: bool) -> usize {
    match dir {
        Direction::Uplink => 14 + 20 + 8 + 8 + if psc { 8 } else { 0 } + 20 + 8,
        Direction::Downlink => 14 + 20 + 8,
    }
}

/// The shortest frame the generator can build (headers and payload).
pub fn min_frame_len(dir: Direction, psc: bool) -> usize {
    header_len(dir, psc) + PAYLOAD_LEN
}

/// The frame length whose user IP packet (inner for uplink, the packet itself for
/// downlink) is `ip_len` octets: how the field states packet sizes ("64 B inner").
pub fn frame_len_for_ip_len(dir: Direction, psc: bool, ip_len: usize) -> usize {
    header_len(dir, psc) - 28 + ip_len
}

fn invalid(msg: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg.into())
}

fn io_err(what: &str, e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("{what}: {e}"))
}

fn bytes_of<T: Copy>(t: &T) -> &[u8] {
    // SAFETY: T is a plain-old-data repr(C) type generated from BTF; reading its octets
    // (padding included, zero-initialised by Default) is defined.
    unsafe { std::slice::from_raw_parts(t as *const T as *const u8, std::mem::size_of::<T>()) }
}

fn from_bytes<T: Copy + Default>(b: &[u8]) -> T {
    let mut t = T::default();
    let n = b.len().min(std::mem::size_of::<T>());
    // SAFETY: as above; at most size_of::<T>() octets are copied into t.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), &mut t as *mut T as *mut u8, n) };
    t
}

/// A loaded skeleton together with the object storage it borrows from; the skeleton is
/// dropped first.
struct Loaded<S> {
    skel: ManuallyDrop<S>,
    _obj: Box<MaybeUninit<OpenObject>>,
}

impl<S> Loaded<S> {
    /// Opens the skeleton, lets `prepare` adjust it (map sizes), loads it.
    fn new<'a, B, O>(
        builder: B,
        what: &str,
        prepare: impl FnOnce(&mut O) -> io::Result<()>,
    ) -> io::Result<Self>
    where
        B: SkelBuilder<'a, Output = O>,
        O: OpenSkel<'a, Output = S>,
        S: 'a,
    {
        let mut obj = Box::new(MaybeUninit::uninit());
        // SAFETY: the skeleton borrows the boxed storage, which lives at a stable heap
        // address as long as `Loaded` and is dropped after the skeleton (see Drop).
        let storage: &'a mut MaybeUninit<OpenObject> =
            unsafe { &mut *(obj.as_mut() as *mut MaybeUninit<OpenObject>) };
        let mut open = builder
            .open(storage)
            .map_err(|e| io_err(&format!("opening {what}"), e))?;
        prepare(&mut open)?;
        let skel = open
            .load()
            .map_err(|e| io_err(&format!("loading {what} (needs CAP_BPF)"), e))?;
        Ok(Loaded {
            skel: ManuallyDrop::new(skel),
            _obj: obj,
        })
    }
}

impl<S> Drop for Loaded<S> {
    fn drop(&mut self) {
        // SAFETY: dropped exactly once, before `_obj`, which it borrows.
        unsafe { ManuallyDrop::drop(&mut self.skel) };
    }
}

impl<S> std::ops::Deref for Loaded<S> {
    type Target = S;
    fn deref(&self) -> &S {
        &self.skel
    }
}

/// A network namespace, kept open: where an ifindex means something.
#[derive(Debug)]
struct Netns(File);

impl Netns {
    /// The calling thread's.
    fn current() -> io::Result<Netns> {
        File::open("/proc/thread-self/ns/net").map(Netns)
    }

    fn id(m: &std::fs::Metadata) -> (u64, u64) {
        (m.dev(), m.ino())
    }

    fn is_current(&self) -> io::Result<bool> {
        let here = std::fs::metadata("/proc/thread-self/ns/net")?;
        Ok(Netns::id(&self.0.metadata()?) == Netns::id(&here))
    }

    /// Runs `f` in this namespace: on the calling thread if it is already there,
    /// otherwise on a new thread that enters it (the caller does not move).
    fn run<T: Send>(&self, f: impl FnOnce() -> T + Send) -> io::Result<T> {
        if self.is_current()? {
            return Ok(f());
        }
        let fd = self.0.as_raw_fd();
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns on a namespace file we hold open; moves this new thread only.
                if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(f())
            })
            .join()
            .map_err(|_| io::Error::other("thread in network namespace panicked"))?
        })
    }
}

/// Pins the calling thread to `cpu` (`sched_setaffinity`).
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    set_affinity(0, cpu)
}

/// Pins thread `pid` (0: the calling one) to `cpu`.
fn set_affinity(pid: i32, cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(invalid(format!("cpu {cpu} out of range")));
    }
    // SAFETY: cpu_set_t is plain data; cpu is within CPU_SETSIZE.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        return Err(io_err(
            &format!("pinning thread {pid} to CPU {cpu}"),
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Runs `f` with the calling thread at nice -20 if it may (CAP_SYS_NICE), then restores
/// its nice value: a CPU-bound sender yields only between batches of runs, and a
/// competitor on its CPU (a build) would otherwise take slices of milliseconds from it.
fn favoured<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: plain syscalls on the calling thread (a tid is a PRIO_PROCESS id on Linux).
    let tid = unsafe { libc::gettid() } as libc::id_t;
    // SAFETY: as above; -1 is a valid nice value, so errno tells errors apart.
    let old = unsafe {
        *libc::__errno_location() = 0;
        let n = libc::getpriority(libc::PRIO_PROCESS, tid);
        (*libc::__errno_location() == 0).then_some(n)
    };
    // SAFETY: as above.
    let raised = old.is_some() && unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, -20) } == 0;
    let t = f();
    if let (true, Some(n)) = (raised, old) {
        // SAFETY: as above; restores the value read.
        unsafe { libc::setpriority(libc::PRIO_PROCESS, tid, n) };
    }
    t
}

/// Runs `f` with the calling thread pinned to `cpu`, then restores its affinity.
fn pinned<T>(cpu: Option<usize>, f: impl FnOnce() -> T) -> io::Result<T> {
    let Some(cpu) = cpu else {
        return Ok(f());
    };
    // SAFETY: cpu_set_t is plain data filled by the kernel.
    let mut old: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: writes into `old`, which we own.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut old) } != 0
    {
        return Err(io::Error::last_os_error());
    }
    pin_current_thread(cpu)?;
    let t = f();
    // SAFETY: restores the set read above.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &old) };
    Ok(t)
}

/// Gives the NAPI instance of `dev` in the named network namespace (an `ip netns`
/// name) its own kernel thread ("threaded NAPI") and pins that thread to `cpu`; returns
/// its pid. Without this a veth receives in the softirq of the CPU that sent to it, so
/// sender and receiver share a core whatever the pinning of the sender.
///
/// The interface must run an XDP program (a veth has a NAPI instance only then; the
/// thread lives while one is attached, replacing it keeps it). Toggles
/// `/sys/class/net/DEV/threaded` through `ip netns exec` (which mounts the namespace's
/// sysfs) and tells the new `napi/DEV-ID` thread by comparing thread lists, so it must
/// not race with another threaded-NAPI change of an interface of the same name.
pub fn napi_thread(netns: &str, dev: &str, cpu: usize) -> io::Result<i32> {
    let set = |v: u8| set_threaded(netns, dev, v);
    let prefix = format!("napi/{dev}-");
    let threads = || -> Vec<i32> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .map(|c| c.trim_end().starts_with(&prefix))
                    .unwrap_or(false)
            })
            .collect()
    };
    // Off stops the thread, on starts a new one: the one not there before is ours.
    set(0)?;
    let before = threads();
    set(1)?;
    let new: Vec<i32> = threads()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    let [pid] = new[..] else {
        return Err(io::Error::other(format!(
            "{netns} {dev}: expected one new {prefix}* thread, found {new:?}"
        )));
    };
    set_affinity(pid, cpu)?;
    Ok(pid)
}

/// Turns threaded NAPI of `dev` in the named namespace off again (the flag outlives
/// the XDP program: an interface that gets one again would get an unpinned thread).
pub fn napi_unthread(netns: &str, dev: &str) -> io::Result<()> {
    set_threaded(netns, dev, 0)
}

/// Writes `/sys/class/net/DEV/threaded` of a namespace (`ip netns exec` mounts its sysfs).
fn set_threaded(netns: &str, dev: &str, v: u8) -> io::Result<()> {
    if dev.is_empty()
        || !dev
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    {
        return Err(invalid(format!("interface name {dev:?}")));
    }
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", netns, "sh", "-c"])
        .arg(format!("echo {v} > /sys/class/net/{dev}/threaded"))
        .output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{netns} {dev}: threaded={v}: {} (no XDP program attached?)",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Makes a thread (0: the calling one) SCHED_FIFO at `priority` (1-99). For NAPI
/// threads of sinks that share a core with a spinning generator: at normal priority
/// they wait for their time slice, their 256-frame veth queue overflows within
/// milliseconds, and packets are lost at rates as low as 100 kpps. (With
/// CONFIG_RT_GROUP_SCHED a user thread outside the root cgroup may be refused; kernel
/// threads are in the root cgroup.)
pub fn set_fifo(pid: i32, priority: i32) -> io::Result<()> {
    let p = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: plain syscall on a sched_param we own.
    if unsafe { libc::sched_setscheduler(pid, libc::SCHED_FIFO, &p) } != 0 {
        return Err(io_err(
            &format!("SCHED_FIFO {priority} for thread {pid}"),
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// (busy, total) jiffies of each CPU since boot, from /proc/stat (busy: all but idle
/// and iowait), indexed by CPU; empty if it cannot be read.
pub fn cpu_busy() -> Vec<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    stat.lines()
        .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
        .map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            let total: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            (total.saturating_sub(idle), total)
        })
        .collect()
}

fn ncpus() -> io::Result<usize> {
    libbpf_rs::num_possible_cpus().map_err(|e| io_err("possible CPUs", e))
}

/// Reads entries `0..n` of a per-CPU array: `f(index, cpu, value octets)` for each.
fn read_percpu_array(
    map: &impl MapCore,
    n: u32,
    mut f: impl FnMut(usize, usize, &[u8]),
) -> io::Result<()> {
    let cpus = ncpus()?;
    let vsize = (map.value_size() as usize).div_ceil(8) * 8;
    // Batches of up to 4096 entries: one syscall each instead of one per entry.
    let chunk: u32 = 4096;
    let mut keys = vec![0u32; chunk as usize];
    let mut values = vec![0u8; chunk as usize * cpus * vsize];
    let mut next: u32 = 0;
    let mut first = true;
    let mut done = 0u32;
    while done < n {
        let mut count = chunk.min(n - done);
        let mut out_batch: u32 = 0;
        let opts = libbpf_sys::bpf_map_batch_opts {
            sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
            ..Default::default()
        };
        // SAFETY: keys and values hold `count` entries (count <= chunk), as the kernel
        // requires; in/out batch tokens are u32 for an array map.
        let r = unsafe {
            libbpf_sys::bpf_map_lookup_batch(
                map.as_fd().as_raw_fd(),
                if first {
                    std::ptr::null_mut()
                } else {
                    &mut next as *mut u32 as *mut _
                },
                &mut out_batch as *mut u32 as *mut _,
                keys.as_mut_ptr() as *mut _,
                values.as_mut_ptr() as *mut _,
                &mut count,
                &opts,
            )
        };
        let err = if r < 0 {
            Some(io::Error::last_os_error())
        } else {
            None
        };
        if let Some(e) = &err {
            if e.raw_os_error() != Some(libc::ENOENT) {
                return Err(io_err("reading per-CPU counters", e));
            }
        }
        for (i, key) in keys.iter().take(count as usize).enumerate() {
            if *key >= n {
                continue;
            }
            for cpu in 0..cpus {
                let o = (i * cpus + cpu) * vsize;
                f(*key as usize, cpu, &values[o..o + vsize]);
            }
        }
        done += count;
        if err.is_some() || count == 0 {
            break;
        }
        first = false;
        next = out_batch;
    }
    Ok(())
}

/// The values of one per-CPU entry, one per possible CPU.
fn percpu_one<T: Copy + Default>(map: &impl MapCore, key: u32) -> io::Result<Vec<T>> {
    let v = map
        .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
        .map_err(|e| io_err("reading per-CPU entry", e))?
        .ok_or_else(|| io::Error::other("per-CPU entry missing"))?;
    Ok(v.iter().map(|b| from_bytes::<T>(b)).collect())
}

/// Writes entries `first..first + n` of an array map from `values` (`n` values of
/// `vsize` octets each; for a per-CPU map, one per possible CPU each, `vsize` rounded up
/// to 8), 4096 entries per syscall.
fn update_array(map: &impl MapCore, first: u32, values: &[u8], vsize: usize) -> io::Result<()> {
    let n = (values.len() / vsize.max(1)) as u32;
    let chunk: u32 = 4096;
    let opts = libbpf_sys::bpf_map_batch_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
        ..Default::default()
    };
    let mut done = 0u32;
    while done < n {
        let mut count = chunk.min(n - done);
        let keys: Vec<u32> = (first + done..first + done + count).collect();
        let v = &values[done as usize * vsize..];
        // SAFETY: `count` keys and at least `count` values of `vsize` octets.
        let r = unsafe {
            libbpf_sys::bpf_map_update_batch(
                map.as_fd().as_raw_fd(),
                keys.as_ptr() as *const _,
                v.as_ptr() as *const _,
                &mut count,
                &opts,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        done += count.max(1);
    }
    Ok(())
}

/// Zeroes entries `0..n` of a per-CPU array.
fn zero_percpu_array(map: &impl MapCore, n: u32) -> io::Result<()> {
    let vsize = (map.value_size() as usize).div_ceil(8) * 8 * ncpus()?;
    update_array(map, 0, &vec![0u8; n as usize * vsize], vsize)
        .map_err(|e| io_err("zeroing counters", e))
}

/// Packets and octets (whole frames as seen at that point, Ethernet header included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    pub packets: u64,
    pub bytes: u64,
}

impl Count {
    fn add(&mut self, c: &sink_types::bench_count) {
        self.packets += c.packets;
        self.bytes += c.bytes;
    }
}

impl std::ops::Sub for Count {
    type Output = Count;
    fn sub(self, o: Count) -> Count {
        Count {
            packets: self.packets.saturating_sub(o.packets),
            bytes: self.bytes.saturating_sub(o.bytes),
        }
    }
}

/// An XDP program attached (native mode) to an interface in a namespace; the previous
/// program goes back on drop.
///
/// A UPF that attached its program through a BPF link (eUPF does, with cilium/ebpf) cannot
/// have it replaced by a netlink attach ("Can't replace active BPF XDP link", EBUSY):
/// then the link's program is swapped (BPF_LINK_UPDATE) and swapped back, and the UPF's
/// link stays as it was; where the kernel refuses the swap (EINVAL, as for eUPF's
/// programs), the link is detached and the UPF's program goes back through netlink.
#[derive(Debug)]
struct Attachment {
    ifindex: u32,
    netns: Netns,
    /// What ran before (the lab's XDP_PASS, a UPF's program), held open so it survives
    /// being replaced.
    previous: Option<OwnedFd>,
    /// The UPF's XDP link on this interface, when it had one.
    link: Option<OwnedFd>,
}

impl Attachment {
    fn new(prog: BorrowedFd<'_>, ifindex: u32) -> io::Result<Attachment> {
        let netns = Netns::current()?;
        let xdp = Xdp::new(prog);
        let previous_id = xdp
            .query_id(ifindex as i32, XdpFlags::DRV_MODE)
            .unwrap_or(0);
        let previous = (previous_id != 0)
            .then(|| {
                // SAFETY: plain syscall wrapper; a non-negative return is a new fd we own.
                let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(previous_id) };
                // SAFETY: fd was just returned to us by the kernel.
                (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
            })
            .flatten();
        let what = format!("attaching XDP (native) to ifindex {ifindex}");
        // A program held by a link is swapped inside it (a netlink attach would fail).
        let link = match previous_id {
            0 => None,
            id => xdp_link(ifindex, id)?,
        };
        let link = match link.map(|l| link_update(&l, prog).map(|()| l)) {
            Some(Ok(l)) => Some(l),
            // EINVAL: the kernel refuses the swap (it does for eUPF v0.7.1's programs,
            // loaded by cilium/ebpf; not seen with libbpf-loaded ones). Then the link is
            // detached and the program goes back through netlink on restore: the UPF
            // forwards with the same program, no longer held by its link.
            Some(Err(e)) if e.raw_os_error() == Some(libc::EINVAL) => {
                if let Some(l) = xdp_link(ifindex, previous_id)? {
                    // SAFETY: plain syscall wrapper on a link fd we hold.
                    let r = unsafe { libbpf_sys::bpf_link_detach(l.as_raw_fd()) };
                    if r < 0 {
                        let e = io::Error::from_raw_os_error(-r);
                        return Err(io::Error::new(
                            e.kind(),
                            format!("{what}: detaching its XDP link: {e}"),
                        ));
                    }
                }
                xdp.attach(ifindex as i32, XdpFlags::DRV_MODE)
                    .map_err(|e| io_err(&what, e))?;
                None
            }
            Some(Err(e)) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("{what}: swapping its XDP link's program: {e}"),
                ))
            }
            None => {
                xdp.attach(ifindex as i32, XdpFlags::DRV_MODE)
                    .map_err(|e| io_err(&what, e))?;
                None
            }
        };
        Ok(Attachment {
            ifindex,
            netns,
            previous,
            link,
        })
    }

    fn restore(&mut self, ours: RawFd) -> io::Result<()> {
        let ifindex = self.ifindex as i32;
        let previous = self.previous.take();
        if let (Some(link), Some(p)) = (self.link.take(), &previous) {
            return link_update(&link, p.as_fd()).map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("restoring the XDP link's program on ifindex {ifindex}: {e}"),
                )
            });
        }
        self.netns.run(move || {
            // SAFETY: `ours` is the program fd of a skeleton that outlives this call.
            let ours = unsafe { BorrowedFd::borrow_raw(ours) };
            match &previous {
                Some(p) => Xdp::new(p.as_fd()).attach(ifindex, XdpFlags::DRV_MODE),
                None => Xdp::new(ours).detach(ifindex, XdpFlags::DRV_MODE),
            }
            .map_err(|e| io_err(&format!("restoring XDP on ifindex {ifindex}"), e))
        })?
    }
}

/// The XDP link that runs program `prog_id` on `ifindex`. Program IDs are global and an
/// XDP program is attached once per link, so the pair names the link of this namespace's
/// interface even where other namespaces have the same ifindex.
fn xdp_link(ifindex: u32, prog_id: u32) -> io::Result<Option<OwnedFd>> {
    let mut id = 0u32;
    // SAFETY: plain syscall wrappers on a u32 and a zeroed struct of the size passed; each
    // non-negative fd returned is a new one we own.
    unsafe {
        while libbpf_sys::bpf_link_get_next_id(id, &mut id) == 0 {
            let fd = libbpf_sys::bpf_link_get_fd_by_id(id);
            if fd < 0 {
                continue; // gone since, or not ours to see
            }
            let fd = OwnedFd::from_raw_fd(fd);
            let mut info: libbpf_sys::bpf_link_info = std::mem::zeroed();
            let mut len = std::mem::size_of::<libbpf_sys::bpf_link_info>() as u32;
            if libbpf_sys::bpf_link_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) != 0 {
                continue;
            }
            if info.type_ == libbpf_sys::BPF_LINK_TYPE_XDP
                && info.prog_id == prog_id
                && info.__bindgen_anon_1.xdp.ifindex == ifindex
            {
                return Ok(Some(fd));
            }
        }
    }
    Ok(None)
}

/// BPF_LINK_UPDATE: `link` runs `prog` from now on.
fn link_update(link: &OwnedFd, prog: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: plain syscall wrapper on two fds we hold; no options.
    let r = unsafe {
        libbpf_sys::bpf_link_update(link.as_raw_fd(), prog.as_raw_fd(), std::ptr::null())
    };
    if r < 0 {
        return Err(io::Error::from_raw_os_error(-r));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Generator

/// One session of the generator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// Uplink: the UPF's F-TEID for the session.
    pub teid: u32,
    /// The UE's address.
    pub ue: Ipv4Addr,
    /// The data-network host it talks to.
    pub dn: Ipv4Addr,
}

/// What the generator sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenConfig {
    /// Uplink (GTP-U, from gnb `n3`) or downlink (plain IPv4, from dn `n6`).
    pub direction: Direction,
    /// The interface the frames are run as received on, in the loading thread's
    /// namespace: XDP_TX sends them out of it, to its veth peer.
    pub ifindex: u32,
    /// Send with `bpf_redirect` to this ifindex instead of XDP_TX.
    pub redirect: Option<u32>,
    /// Ethernet source: the sending veth's MAC.
    pub src_mac: [u8; 6],
    /// Ethernet destination: its peer's MAC.
    pub dst_mac: [u8; 6],
    /// Uplink: the outer source (the gNB's N3 address).
    pub src_ip: Ipv4Addr,
    /// Uplink: the outer destination (the UPF's N3 address).
    pub dst_ip: Ipv4Addr,
    /// Inner UDP port on the UE side.
    pub ue_port: u16,
    /// Inner UDP port on the data-network side.
    pub dn_port: u16,
    /// Frame lengths of `sizes` sent as TCP segments (ACK|PSH, no options, checksum not
    /// computed: nothing on the bench's path checks it) between `ue_port` on the UE side
    /// and `tcp_port` on the data-network side, instead of UDP datagrams.
    pub tcp_sizes: Vec<u16>,
    /// The data-network side's port of TCP segments (80: HTTP-like).
    pub tcp_port: u16,
    /// Uplink: add a PDU Session Container (TS 38.415, UL PDU SESSION INFORMATION).
    pub psc: bool,
    /// Its QFI.
    pub qfi: u8,
    /// Frame sizes (Ethernet header to end, no FCS) and their weights; cycled so every
    /// session sees every size. Weights sum to at most [`MAX_SIZES`].
    pub sizes: Vec<(u16, u32)>,
    /// Write `bpf_ktime_get_ns()` into every payload (latency; costs a little rate).
    pub timestamps: bool,
    /// Size of the session table.
    pub max_sessions: u32,
    /// The CPU to generate on: the thread that makes the BPF_PROG_RUN calls is pinned
    /// there while it runs (`sched_setaffinity`). Without it, runs may move between
    /// CPUs, each with its own round robin over the sessions: the per-session counts
    /// stay exact ([`Generator::sent_per_session`]) but are no longer equal.
    pub cpu: Option<usize>,
    /// Frames per batch of the kernel's live-frames loop (0: the kernel's 64; at most
    /// 256).
    pub batch: u32,
}

impl GenConfig {
    /// Uplink G-PDUs with a PDU Session Container (QFI 9), 64-octet inner packets.
    pub fn uplink(
        ifindex: u32,
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        src_ip: Ipv4Addr,
        dst_ip: Ipv4Addr,
    ) -> GenConfig {
        GenConfig {
            direction: Direction::Uplink,
            ifindex,
            redirect: None,
            src_mac,
            dst_mac,
            src_ip,
            dst_ip,
            ue_port: 40000,
            dn_port: 9,
            tcp_sizes: Vec::new(),
            tcp_port: 80,
            psc: true,
            qfi: 9,
            sizes: vec![(frame_len_for_ip_len(Direction::Uplink, true, 64) as u16, 1)],
            timestamps: true,
            max_sessions: 1024,
            cpu: None,
            batch: 0,
        }
    }

    /// Downlink IPv4/UDP packets of 64 octets (78-octet frames).
    pub fn downlink(ifindex: u32, src_mac: [u8; 6], dst_mac: [u8; 6]) -> GenConfig {
        GenConfig {
            direction: Direction::Downlink,
            sizes: vec![(
                frame_len_for_ip_len(Direction::Downlink, false, 64) as u16,
                1,
            )],
            psc: false,
            ..GenConfig::uplink(
                ifindex,
                src_mac,
                dst_mac,
                Ipv4Addr::UNSPECIFIED,
                Ipv4Addr::UNSPECIFIED,
            )
        }
    }

    /// One frame size.
    pub fn frame_len(mut self, len: u16) -> GenConfig {
        self.sizes = vec![(len, 1)];
        self
    }

    /// The size table the program cycles through: the weights spread out (smooth
    /// weighted round robin), so a mix of 7:4:1 does not send 7 equal sizes in a row;
    /// the sizes of [`GenConfig::tcp_sizes`] marked [`SIZE_TCP`].
    pub fn size_table(&self) -> io::Result<Vec<u16>> {
        let total: u64 = self.sizes.iter().map(|&(_, w)| w as u64).sum();
        if self.sizes.is_empty() || total == 0 {
            return Err(invalid("no frame size"));
        }
        if total > MAX_SIZES as u64 {
            return Err(invalid(format!(
                "size weights sum to {total}, at most {MAX_SIZES}"
            )));
        }
        let udp_min = min_frame_len(self.direction, self.psc);
        for &(len, _) in &self.sizes {
            let tcp = self.tcp_sizes.contains(&len);
            let min = udp_min + if tcp { TCP_EXTRA } else { 0 };
            if (len as usize) < min || len as usize > MAX_FRAME_LEN {
                return Err(invalid(format!(
                    "frame size {len}: must be {min}..={MAX_FRAME_LEN} for {}{:?}{}",
                    if tcp { "TCP " } else { "" },
                    self.direction,
                    if self.psc {
                        " with PDU Session Container"
                    } else {
                        ""
                    }
                )));
            }
        }
        let mut current = vec![0i64; self.sizes.len()];
        let mut out = Vec::with_capacity(total as usize);
        for _ in 0..total {
            for (c, &(_, w)) in current.iter_mut().zip(&self.sizes) {
                *c += w as i64;
            }
            let (i, _) = current
                .iter()
                .enumerate()
                .max_by_key(|&(i, c)| (*c, std::cmp::Reverse(i)))
                .expect("non-empty");
            current[i] -= total as i64;
            let len = self.sizes[i].0;
            out.push(if self.tcp_sizes.contains(&len) {
                len | SIZE_TCP
            } else {
                len
            });
        }
        Ok(out)
    }
}

/// The generator's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenCounters {
    /// Packets generated (each was handed to XDP_TX / redirect; the veth may still drop
    /// it when its peer's queue is full).
    pub packets: u64,
    pub bytes: u64,
}

/// The result of one [`Generator::run`] call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunReport {
    pub packets: u64,
    pub bytes: u64,
    /// Wall time of the call, the kernel's waits included.
    pub elapsed: Duration,
}

impl RunReport {
    /// Packets per second over the call.
    pub fn pps(&self) -> f64 {
        self.packets as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// The result of [`Generator::send`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SendReport {
    pub packets: u64,
    pub bytes: u64,
    /// BPF_PROG_RUN calls made.
    pub calls: u64,
    pub elapsed: Duration,
    /// Achieved packets per second.
    pub pps: f64,
    /// All `total` packets were sent before the deadline.
    pub complete: bool,
}

impl SendReport {
    /// Achieved Gbit/s (frame octets, no Ethernet preamble or FCS).
    pub fn gbps(&self) -> f64 {
        self.bytes as f64 * 8.0 / self.elapsed.as_secs_f64().max(1e-9) / 1e9
    }
}

/// The traffic generator (bpf/bench/gen.bpf.c).
pub struct Generator {
    skel: Loaded<BenchGenSkel<'static>>,
    cfg: GenConfig,
    raw: gen_types::gen_config,
    frame: Vec<u8>,
    netns: Netns,
    n_sessions: u32,
    /// Per-CPU packet counts when the sessions were last set.
    baseline: Vec<u64>,
}

impl std::fmt::Debug for Generator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generator")
            .field("cfg", &self.cfg)
            .field("n_sessions", &self.n_sessions)
            .finish()
    }
}

impl Generator {
    /// Loads the generator for `cfg`. `cfg.ifindex` (and `redirect`) are interfaces of
    /// the calling thread's network namespace; runs happen there. Needs CAP_BPF and
    /// CAP_NET_ADMIN.
    pub fn load(cfg: GenConfig) -> io::Result<Generator> {
        let table = cfg.size_table()?;
        if cfg.max_sessions == 0 {
            return Err(invalid("max_sessions is 0"));
        }
        if cfg.batch > 256 {
            return Err(invalid("batch is at most 256"));
        }
        let max_sessions = cfg.max_sessions;
        let skel = Loaded::new(BenchGenSkelBuilder::default(), "bench_gen", |open| {
            open.progs.bench_gen_dual.set_autoload(false);
            open.maps
                .gen_sessions
                .set_max_entries(max_sessions)
                .map_err(|e| io_err("sizing gen_sessions", e))
        })?;
        let max_size = table
            .iter()
            .map(|&l| l & !SIZE_TCP)
            .max()
            .expect("size table is not empty");
        let mut raw = gen_types::gen_config {
            dst_mac: cfg.dst_mac,
            src_mac: cfg.src_mac,
            src_ip: u32::from_ne_bytes(cfg.src_ip.octets()),
            dst_ip: u32::from_ne_bytes(cfg.dst_ip.octets()),
            n_sessions: 0,
            n_sizes: table.len() as u32,
            redirect: cfg.redirect.unwrap_or(0),
            ue_port: cfg.ue_port,
            dn_port: cfg.dn_port,
            tcp_port: cfg.tcp_port,
            dir: cfg.direction as u8,
            psc: cfg.psc as u8,
            qfi: cfg.qfi & 0x3f,
            timestamps: cfg.timestamps as u8,
            max_size,
            ..Default::default()
        };
        raw.sizes[..table.len()].copy_from_slice(&table);
        let cpus = ncpus()?;
        let g = Generator {
            skel,
            frame: vec![0u8; max_size as usize],
            cfg,
            raw,
            netns: Netns::current()?,
            n_sessions: 0,
            baseline: vec![0; cpus],
        };
        g.write_config()?;
        Ok(g)
    }

    /// The configuration it was loaded with.
    pub fn config(&self) -> &GenConfig {
        &self.cfg
    }

    fn write_config(&self) -> io::Result<()> {
        self.skel
            .maps
            .gen_cfg
            .update(&0u32.to_ne_bytes(), bytes_of(&self.raw), MapFlags::ANY)
            .map_err(|e| io_err("writing gen_cfg", e))
    }

    /// Sets the sessions packets go to, round robin from the first, and restarts the
    /// round robin (so [`Generator::sent_per_session`] counts from here).
    pub fn set_sessions(&mut self, sessions: &[Session]) -> io::Result<()> {
        if sessions.is_empty() || sessions.len() > self.cfg.max_sessions as usize {
            return Err(invalid(format!(
                "{} sessions: must be 1..={}",
                sessions.len(),
                self.cfg.max_sessions
            )));
        }
        let mut table = Vec::with_capacity(sessions.len() * 12);
        for s in sessions {
            let v = gen_types::gen_session {
                teid: s.teid,
                ue: u32::from_ne_bytes(s.ue.octets()),
                dn: u32::from_ne_bytes(s.dn.octets()),
            };
            table.extend_from_slice(bytes_of(&v));
        }
        let vsize = std::mem::size_of::<gen_types::gen_session>();
        update_array(&self.skel.maps.gen_sessions, 0, &table, vsize)
            .map_err(|e| io_err("writing gen_sessions", e))?;
        self.raw.n_sessions = sessions.len() as u32;
        self.write_config()?;
        // Restart every CPU's round robin; keep its counters.
        let state = percpu_one::<gen_types::gen_cpu>(&self.skel.maps.gen_state, 0)?;
        let values: Vec<Vec<u8>> = state
            .iter()
            .map(|s| {
                let s = gen_types::gen_cpu {
                    packets: s.packets,
                    bytes: s.bytes,
                    ..Default::default()
                };
                bytes_of(&s).to_vec()
            })
            .collect();
        self.skel
            .maps
            .gen_state
            .update_percpu(&0u32.to_ne_bytes(), &values, MapFlags::ANY)
            .map_err(|e| io_err("resetting gen_state", e))?;
        self.baseline = state.iter().map(|s| s.packets).collect();
        self.n_sessions = sessions.len() as u32;
        Ok(())
    }

    /// Packets and octets generated since loading, all CPUs.
    pub fn counters(&self) -> io::Result<GenCounters> {
        let state = percpu_one::<gen_types::gen_cpu>(&self.skel.maps.gen_state, 0)?;
        Ok(state.iter().fold(GenCounters::default(), |mut c, s| {
            c.packets += s.packets;
            c.bytes += s.bytes;
            c
        }))
    }

    /// Packets generated per session since the sessions were last set: exact, from
    /// each CPU's count (every CPU goes round robin from session 0).
    pub fn sent_per_session(&self) -> io::Result<Vec<u64>> {
        let n = self.n_sessions as u64;
        let mut out = vec![0u64; n as usize];
        if n == 0 {
            return Ok(out);
        }
        let state = percpu_one::<gen_types::gen_cpu>(&self.skel.maps.gen_state, 0)?;
        for (s, base) in state.iter().zip(&self.baseline) {
            let p = s.packets - base;
            let (full, rest) = (p / n, p % n);
            for (i, o) in out.iter_mut().enumerate() {
                *o += full + u64::from((i as u64) < rest);
            }
        }
        Ok(out)
    }

    /// One BPF_PROG_RUN call generating `repeat` packets (as fast as the CPU goes; a
    /// call waits twice for an RCU grace period, so large counts are efficient).
    pub fn run(&mut self, repeat: u32) -> io::Result<RunReport> {
        if self.n_sessions == 0 {
            return Err(invalid("no sessions: call set_sessions first"));
        }
        let before = self.counters()?;
        let start = Instant::now();
        let prog = self.prog_fd();
        let (frame, ifindex, batch, cpu) =
            (&self.frame, self.cfg.ifindex, self.cfg.batch, self.cfg.cpu);
        self.netns
            .run(|| pinned(cpu, || prog_run(prog, frame, ifindex, repeat, batch)))???;
        let elapsed = start.elapsed();
        let after = self.counters()?;
        Ok(RunReport {
            packets: after.packets - before.packets,
            bytes: after.bytes - before.bytes,
            elapsed,
        })
    }

    /// The program, for BPF_PROG_RUN tests (without live frames it returns the frame).
    pub fn program(&self) -> &libbpf_rs::ProgramMut<'static> {
        &self.skel.progs.bench_gen
    }

    /// The frame handed to BPF_PROG_RUN (zeros, as long as the largest size).
    pub fn frame(&self) -> &[u8] {
        &self.frame
    }

    fn prog_fd(&self) -> RawFd {
        self.skel.progs.bench_gen.as_fd().as_raw_fd()
    }

    /// Sends `total` packets, or as many as fit before `deadline`: at `rate_pps` if
    /// given, as fast as possible otherwise. Returns what was sent and the achieved
    /// rate (over the whole time, the kernel's waits between calls included).
    ///
    /// Paced, the program spaces packets itself (`struct gen_pace`): it spins on the
    /// CPU between packets and bursts at most [`PACE_BURST`] packets to catch up. Calls
    /// last up to half a second; each call's fixed cost (two RCU grace periods, tens
    /// of ms) is a pause in the stream, made up by running the next call up to
    /// [`PACE_CATCH_UP`] times faster, so the average is the rate asked. Unpaced,
    /// every run sends, in calls of about half a second.
    pub fn send(
        &mut self,
        rate_pps: Option<u64>,
        total: u64,
        deadline: Duration,
    ) -> io::Result<SendReport> {
        if self.n_sessions == 0 {
            return Err(invalid("no sessions: call set_sessions first"));
        }
        if rate_pps == Some(0) {
            return Err(invalid("rate 0"));
        }
        let before = self.counters()?;
        if let Some(rate) = rate_pps {
            let interval = 1_000_000_000_000 / rate.min(1_000_000_000_000);
            self.write_pace(gen_types::gen_pace {
                interval_ps: interval,
                next_ps: 0,
                burst_ps: interval * PACE_BURST,
                budget: total,
                ..Default::default()
            })?;
        }
        let prog = self.prog_fd();
        // Raw descriptors: the loop may run on a thread inside the namespace.
        let pace = self.skel.maps.gen_pace.as_fd().as_raw_fd();
        let (frame, ifindex, batch, cpu) =
            (&self.frame, self.cfg.ifindex, self.cfg.batch, self.cfg.cpu);
        let result = self.netns.run(|| {
            pinned(cpu, || {
                let mut left = total;
                let start = Instant::now();
                favoured(|| {
                    drive(rate_pps, total, deadline, |n| {
                        if let Some(rate) = rate_pps {
                            // Behind schedule after the pauses between calls: catch up
                            // over the next call, a little faster.
                            let due = rate as f64 * start.elapsed().as_secs_f64();
                            let behind = (due - (total - left) as f64).max(0.0);
                            let r = (rate as f64 + behind / CALL_TARGET)
                                .min(rate as f64 * PACE_CATCH_UP);
                            let mut p = read_pace(pace, 0)?;
                            p.interval_ps = ((1e12 / r) as u64).max(1);
                            p.burst_ps = p.interval_ps * PACE_BURST;
                            write_pace(pace, 0, &p)?;
                        }
                        prog_run(prog, frame, ifindex, n, batch)?;
                        if rate_pps.is_none() {
                            return Ok(n as u64);
                        }
                        let b = read_pace(pace, 0)?.budget;
                        let sent = left.saturating_sub(b);
                        left = b;
                        Ok(sent)
                    })
                })
            })
        });
        let result = result.and_then(|r| r).and_then(|r| r);
        if rate_pps.is_some() {
            // Unpaced again, whatever happened.
            self.write_pace(gen_types::gen_pace::default())?;
        }
        let (sent, calls, elapsed) = result?;
        let after = self.counters()?;
        let packets = after.packets - before.packets;
        Ok(SendReport {
            packets,
            bytes: after.bytes - before.bytes,
            calls,
            elapsed,
            pps: packets as f64 / elapsed.as_secs_f64().max(1e-9),
            complete: sent >= total,
        })
    }

    /// Pacing state now (the budget left, when paced).
    pub fn pace(&self) -> io::Result<gen_types::gen_pace> {
        read_pace(self.skel.maps.gen_pace.as_fd().as_raw_fd(), 0)
    }

    fn write_pace(&self, p: gen_types::gen_pace) -> io::Result<()> {
        write_pace(self.skel.maps.gen_pace.as_fd().as_raw_fd(), 0, &p)
    }
}

// ---------------------------------------------------------------------------------------
// Both directions from one thread

/// Uplink and downlink from one thread and one `BPF_PROG_RUN` call at a time
/// (`bench_gen_dual` in bpf/bench/gen.bpf.c), each direction with its own
/// [`GenConfig`] (template, sizes, timestamps), pacing, budget and counters, over one
/// session table.
///
/// Why: two paced [`Generator`]s on one CPU time-share it in scheduler slices (the
/// kernel's live-frames loop yields only between batches), so each misses its schedule
/// and gets about half its rate. Here every run of the program picks the direction whose
/// packet is next: a paced one that is due (the earlier if both are), else an unpaced
/// one (both unpaced: smooth weighted round robin, [`DualGenerator::set_weights`]), else
/// none (XDP_DROP).
///
/// Where frames go: the program redirects into a devmap, entry [`Direction::Uplink`]
/// the uplink config's `ifindex` (gnb `n3`), entry [`Direction::Downlink`] the
/// downlink's (dn `n6`); a veth sends them to its peer (upf `n3`, `n6`), as XDP_TX does
/// for [`Generator`]. A devmap entry names its device in the network namespace of the
/// thread that writes it, so [`DualGenerator::load`] writes each entry from a thread in
/// that direction's namespace; the calls themselves may then run in any namespace (the
/// frames are "received" on its loopback device, which is not used).
pub struct DualGenerator {
    skel: Loaded<BenchGenSkel<'static>>,
    cfgs: [Option<GenConfig>; 2],
    raw: [gen_types::gen_config; 2],
    frame: Vec<u8>,
    cpu: Option<usize>,
    batch: u32,
    max_sessions: u32,
    n_sessions: u32,
    weights: [u32; 2],
    flush: Option<Duration>,
    /// Per direction, per-CPU packet counts when the sessions were last set.
    baseline: [Vec<u64>; 2],
}

impl std::fmt::Debug for DualGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DualGenerator")
            .field("cfgs", &self.cfgs)
            .field("cpu", &self.cpu)
            .field("n_sessions", &self.n_sessions)
            .field("weights", &self.weights)
            .field("flush", &self.flush)
            .finish()
    }
}

/// The longest flush interval of [`DualGenerator::set_flush`] (a run may wait that long
/// with the CPU's softirqs off).
pub const MAX_FLUSH: Duration = Duration::from_millis(1);

/// The largest weight of [`DualGenerator::set_weights`].
pub const MAX_WEIGHT: u32 = 1 << 20;

impl DualGenerator {
    /// Loads the generator for an `uplink` and a `downlink` configuration (either may be
    /// absent, not both). Each config's `ifindex` is the interface its frames leave by
    /// (uplink: gnb `n3`; downlink: dn `n6`), in the network namespace named in
    /// `netns` (an `ip netns` name, /var/run/netns/NAME; None: the calling thread's).
    ///
    /// Shared settings come from the configs: `cpu` (pins the calling thread during
    /// calls; the configs must not name different CPUs), `batch` (the larger), and the
    /// session table's size (the larger `max_sessions`). `redirect` must be None. Needs
    /// CAP_BPF, CAP_NET_ADMIN and CAP_SYS_ADMIN (setns).
    pub fn load(
        uplink: Option<GenConfig>,
        downlink: Option<GenConfig>,
        netns: [Option<&str>; 2],
    ) -> io::Result<DualGenerator> {
        let cfgs = [uplink, downlink];
        if cfgs.iter().all(Option::is_none) {
            return Err(invalid("no direction to generate"));
        }
        let mut tables: [Vec<u16>; 2] = [Vec::new(), Vec::new()];
        let (mut cpu, mut batch, mut max_sessions) = (None, 0u32, 0u32);
        for (i, c) in cfgs.iter().enumerate() {
            let Some(c) = c else { continue };
            let dir = Direction::BOTH[i];
            if c.direction != dir {
                return Err(invalid(format!(
                    "the {dir:?} config is for {:?}",
                    c.direction
                )));
            }
            if c.redirect.is_some() {
                return Err(invalid(
                    "redirect: DualGenerator sends to each config's ifindex",
                ));
            }
            if c.batch > 256 {
                return Err(invalid("batch is at most 256"));
            }
            if c.max_sessions == 0 {
                return Err(invalid("max_sessions is 0"));
            }
            match (cpu, c.cpu) {
                (Some(a), Some(b)) if a != b => {
                    return Err(invalid(format!(
                        "the configs name CPUs {a} and {b}: one thread runs both"
                    )))
                }
                (None, b) => cpu = b,
                _ => {}
            }
            batch = batch.max(c.batch);
            max_sessions = max_sessions.max(c.max_sessions);
            tables[i] = c.size_table()?;
        }
        let skel = Loaded::new(BenchGenSkelBuilder::default(), "bench_gen_dual", |open| {
            open.progs.bench_gen.set_autoload(false);
            open.maps
                .gen_sessions
                .set_max_entries(max_sessions)
                .map_err(|e| io_err("sizing gen_sessions", e))
        })?;
        // One frame for both: as long as the largest size of either.
        let max_size = tables
            .iter()
            .flatten()
            .map(|&l| l & !SIZE_TCP)
            .max()
            .expect("a size");
        let mut raw = [gen_types::gen_config::default(); 2];
        for (i, c) in cfgs.iter().enumerate() {
            let Some(c) = c else { continue };
            let r = &mut raw[i];
            *r = gen_types::gen_config {
                dst_mac: c.dst_mac,
                src_mac: c.src_mac,
                src_ip: u32::from_ne_bytes(c.src_ip.octets()),
                dst_ip: u32::from_ne_bytes(c.dst_ip.octets()),
                n_sessions: 0,
                n_sizes: tables[i].len() as u32,
                redirect: 0,
                ue_port: c.ue_port,
                dn_port: c.dn_port,
                tcp_port: c.tcp_port,
                dir: i as u8,
                psc: c.psc as u8,
                qfi: c.qfi & 0x3f,
                timestamps: c.timestamps as u8,
                max_size,
                ..Default::default()
            };
            r.sizes[..tables[i].len()].copy_from_slice(&tables[i]);
        }
        let cpus = ncpus()?;
        let g = DualGenerator {
            skel,
            cfgs,
            raw,
            frame: vec![0u8; max_size as usize],
            cpu,
            batch,
            max_sessions,
            n_sessions: 0,
            weights: [1, 1],
            flush: None,
            baseline: [vec![0; cpus], vec![0; cpus]],
        };
        g.write_config()?;
        g.rest()?;
        for (i, c) in g.cfgs.iter().enumerate() {
            if let Some(c) = c {
                g.set_port(Direction::BOTH[i], c.ifindex, netns[i])?;
            }
        }
        Ok(g)
    }

    /// Points the devmap entry of `dir` at `ifindex` of namespace `netns`.
    fn set_port(&self, dir: Direction, ifindex: u32, netns: Option<&str>) -> io::Result<()> {
        let ns = match netns {
            Some(name) => File::open(format!("/var/run/netns/{name}"))
                .map(Netns)
                .map_err(|e| io_err(&format!("network namespace {name}"), e))?,
            None => Netns::current()?,
        };
        let fd = self.skel.maps.gen_ports.as_fd().as_raw_fd();
        let key = dir.index() as u32;
        ns.run(|| {
            // SAFETY: key and value of the map's sizes (u32, u32).
            let r = unsafe {
                libbpf_sys::bpf_map_update_elem(
                    fd,
                    &key as *const u32 as *const _,
                    &ifindex as *const u32 as *const _,
                    0,
                )
            };
            if r < 0 {
                return Err(io_err(
                    &format!(
                        "{dir:?} port: ifindex {ifindex} in {}",
                        netns.unwrap_or("the calling thread's namespace")
                    ),
                    io::Error::last_os_error(),
                ));
            }
            Ok(())
        })?
    }

    /// The configuration of `dir`, if it generates that way.
    pub fn config(&self, dir: Direction) -> Option<&GenConfig> {
        self.cfgs[dir.index()].as_ref()
    }

    /// Shares of the runs when both directions are unpaced (default 1:1), each
    /// 1..=[`MAX_WEIGHT`]: e.g. [1, 3] sends three downlink packets per uplink one,
    /// interleaved.
    pub fn set_weights(&mut self, weights: [u32; 2]) -> io::Result<()> {
        if weights.iter().any(|&w| w == 0 || w > MAX_WEIGHT) {
            return Err(invalid(format!(
                "weights {weights:?}: each must be 1..={MAX_WEIGHT}"
            )));
        }
        self.weights = weights;
        self.rest()
    }

    /// Paced sends ([`DualGenerator::send`] with only paced directions): None (the
    /// default), packets leave within microseconds of their time, in the kernel's
    /// batches of runs (64, or the configs' `batch`), most of which do not send. With
    /// `Some(flush)` (at most [`MAX_FLUSH`]), every run waits for its packet and a batch
    /// holds about `flush` worth of them (at most 256, or the configs' `batch`): the
    /// kernel hands each batch to the veths at its end, so packets leave in bursts
    /// of up to `flush`, and their timestamps (latency) include up to `flush` of waiting.
    ///
    /// Why: each batch that sends wakes the receivers' NAPI threads if they sleep; on
    /// this VM a wakeup costs CPU 0 several microseconds (an IPI, nested
    /// virtualization), so with receivers on CPU 1 that keep up easily, paced sending
    /// without `flush` falls behind from a few hundred kpps (about 0.9 Mpps combined
    /// through the bare forwarder); with 200 us it holds 1 Mpps combined exactly.
    pub fn set_flush(&mut self, flush: Option<Duration>) -> io::Result<()> {
        if let Some(f) = flush {
            if f < Duration::from_micros(1) || f > MAX_FLUSH {
                return Err(invalid(format!(
                    "flush {f:?}: must be 1 us..={MAX_FLUSH:?}"
                )));
            }
        }
        self.flush = flush;
        Ok(())
    }

    fn write_config(&self) -> io::Result<()> {
        for (i, r) in self.raw.iter().enumerate() {
            self.skel
                .maps
                .gen_cfg
                .update(&(i as u32).to_ne_bytes(), bytes_of(r), MapFlags::ANY)
                .map_err(|e| io_err("writing gen_cfg", e))?;
        }
        Ok(())
    }

    fn pace_fd(&self) -> RawFd {
        self.skel.maps.gen_pace.as_fd().as_raw_fd()
    }

    /// The state between sends: the directions present unpaced with no end (by weight),
    /// as [`DualGenerator::run`] and BPF_PROG_RUN tests find them.
    fn rest(&self) -> io::Result<()> {
        for (i, c) in self.cfgs.iter().enumerate() {
            let p = gen_types::gen_pace {
                budget: if c.is_some() { u64::MAX } else { 0 },
                weight: self.weights[i],
                ..Default::default()
            };
            write_pace(self.pace_fd(), i as u32, &p)?;
        }
        Ok(())
    }

    /// Sets the sessions, shared by both directions (uplink: `teid`, `ue`, `dn`;
    /// downlink: `dn` to `ue`), and restarts both round robins (so
    /// [`DualGenerator::sent_per_session`] counts from here).
    pub fn set_sessions(&mut self, sessions: &[Session]) -> io::Result<()> {
        if sessions.is_empty() || sessions.len() > self.max_sessions as usize {
            return Err(invalid(format!(
                "{} sessions: must be 1..={}",
                sessions.len(),
                self.max_sessions
            )));
        }
        let mut table = Vec::with_capacity(sessions.len() * 12);
        for s in sessions {
            let v = gen_types::gen_session {
                teid: s.teid,
                ue: u32::from_ne_bytes(s.ue.octets()),
                dn: u32::from_ne_bytes(s.dn.octets()),
            };
            table.extend_from_slice(bytes_of(&v));
        }
        let vsize = std::mem::size_of::<gen_types::gen_session>();
        update_array(&self.skel.maps.gen_sessions, 0, &table, vsize)
            .map_err(|e| io_err("writing gen_sessions", e))?;
        for (i, c) in self.cfgs.iter().enumerate() {
            if c.is_some() {
                self.raw[i].n_sessions = sessions.len() as u32;
            }
        }
        self.write_config()?;
        // Restart every CPU's round robins and weights; keep the counters.
        for (i, base) in self.baseline.iter_mut().enumerate() {
            let key = (i as u32).to_ne_bytes();
            let state = percpu_one::<gen_types::gen_cpu>(&self.skel.maps.gen_state, i as u32)?;
            let values: Vec<Vec<u8>> = state
                .iter()
                .map(|s| {
                    let s = gen_types::gen_cpu {
                        packets: s.packets,
                        bytes: s.bytes,
                        ..Default::default()
                    };
                    bytes_of(&s).to_vec()
                })
                .collect();
            self.skel
                .maps
                .gen_state
                .update_percpu(&key, &values, MapFlags::ANY)
                .map_err(|e| io_err("resetting gen_state", e))?;
            *base = state.iter().map(|s| s.packets).collect();
        }
        self.n_sessions = sessions.len() as u32;
        Ok(())
    }

    /// Packets and octets generated in `dir` since loading, all CPUs.
    pub fn counters(&self, dir: Direction) -> io::Result<GenCounters> {
        let state =
            percpu_one::<gen_types::gen_cpu>(&self.skel.maps.gen_state, dir.index() as u32)?;
        Ok(state.iter().fold(GenCounters::default(), |mut c, s| {
            c.packets += s.packets;
            c.bytes += s.bytes;
            c
        }))
    }

    /// Packets generated in `dir` per session since the sessions were last set: exact,
    /// as [`Generator::sent_per_session`]. Empty for a direction not generated.
    pub fn sent_per_session(&self, dir: Direction) -> io::Result<Vec<u64>> {
        if self.cfgs[dir.index()].is_none() {
            return Ok(Vec::new());
        }
        let n = self.n_sessions as u64;
        let mut out = vec![0u64; n as usize];
        if n == 0 {
            return Ok(out);
        }
        let state =
            percpu_one::<gen_types::gen_cpu>(&self.skel.maps.gen_state, dir.index() as u32)?;
        for (s, base) in state.iter().zip(&self.baseline[dir.index()]) {
            let p = s.packets - base;
            let (full, rest) = (p / n, p % n);
            for (i, o) in out.iter_mut().enumerate() {
                *o += full + u64::from((i as u64) < rest);
            }
        }
        Ok(out)
    }

    /// The program, for BPF_PROG_RUN tests: between sends both directions present are
    /// unpaced, by weight, so without live frames each run returns the next packet
    /// (XDP_REDIRECT).
    pub fn program(&self) -> &libbpf_rs::ProgramMut<'static> {
        &self.skel.progs.bench_gen_dual
    }

    /// The frame handed to BPF_PROG_RUN (zeros, as long as the largest size of both).
    pub fn frame(&self) -> &[u8] {
        &self.frame
    }

    /// Pacing state of `dir` now.
    pub fn pace(&self, dir: Direction) -> io::Result<gen_types::gen_pace> {
        read_pace(self.pace_fd(), dir.index() as u32)
    }

    fn counters_both(&self) -> io::Result<[GenCounters; 2]> {
        Ok([
            self.counters(Direction::Uplink)?,
            self.counters(Direction::Downlink)?,
        ])
    }

    /// One BPF_PROG_RUN call of `repeat` runs, every one sending: both directions
    /// unpaced, interleaved by weight. Per direction.
    pub fn run(&mut self, repeat: u32) -> io::Result<[RunReport; 2]> {
        if self.n_sessions == 0 {
            return Err(invalid("no sessions: call set_sessions first"));
        }
        let before = self.counters_both()?;
        let start = Instant::now();
        let prog = self.skel.progs.bench_gen_dual.as_fd().as_raw_fd();
        pinned(self.cpu, || {
            prog_run(prog, &self.frame, 0, repeat, self.batch)
        })??;
        let elapsed = start.elapsed();
        let after = self.counters_both()?;
        Ok(std::array::from_fn(|i| RunReport {
            packets: after[i].packets - before[i].packets,
            bytes: after[i].bytes - before[i].bytes,
            elapsed,
        }))
    }

    /// Sends `totals[d]` packets in each direction `d` (0 or `rates[d] == Some(0)`:
    /// none), or as many as fit before `deadline`, each at `rates[d]` if given, as fast
    /// as possible otherwise, all from the calling thread (pinned to the configured CPU
    /// meanwhile). Per direction: what was sent and the rate achieved.
    ///
    /// Paced, the program spaces packets itself, per direction: runs that find no packet
    /// due end without one. Unlike [`Generator::send`] it keeps each schedule across
    /// calls (packet k is due k intervals after the first): each call's fixed cost (tens
    /// of ms) is a pause in both streams, after which the packets behind go at
    /// [`PACE_CATCH_UP`] times the rate until the schedule is caught up. The program
    /// records when a call's runs begin and end; a short first call measures how long
    /// runs take, the next ones are sized to about half a second of runs, or the rest
    /// (kept clear of the deadline by the measured fixed cost). A paced direction's
    /// `elapsed` is the time from its first packet to its last plus one interval, so
    /// `pps` is the rate on the wire, pauses included, the first call's start and the
    /// last one's end not; an unpaced direction's is the time until it had sent its
    /// total, or the whole time.
    ///
    /// Unpaced directions take the runs no paced one needs (both unpaced: interleaved by
    /// weight, [`DualGenerator::set_weights`]); so with one paced and one unpaced, the
    /// unpaced one gets what the CPU has left.
    pub fn send(
        &mut self,
        rates: [Option<u64>; 2],
        totals: [u64; 2],
        deadline: Duration,
    ) -> io::Result<[SendReport; 2]> {
        if self.n_sessions == 0 {
            return Err(invalid("no sessions: call set_sessions first"));
        }
        let mut totals = totals;
        for i in 0..2 {
            if rates[i] == Some(0) {
                totals[i] = 0;
            }
            if totals[i] > 0 && self.cfgs[i].is_none() {
                return Err(invalid(format!(
                    "{:?}: loaded without it",
                    Direction::BOTH[i]
                )));
            }
        }
        let rates = std::array::from_fn(|i| rates[i].filter(|_| totals[i] > 0));
        let before = self.counters_both()?;
        let fd = self.pace_fd();
        let paced_only = (0..2).all(|i| totals[i] == 0 || rates[i].is_some());
        let combined: f64 = (0..2).filter_map(|i| rates[i].map(|r| r as f64)).sum();
        // Flushing in batches (paced only): every run waits for its packet, so runs come
        // at the combined rate (or one per `flush`, if slower), and a batch of runs lasts
        // about `flush`.
        let flush = self.flush.filter(|_| paced_only);
        let interval = |r: u64| 1_000_000_000_000 / r.min(1_000_000_000_000);
        for i in 0..2 {
            let iv = rates[i].map_or(0, interval);
            write_pace(
                fd,
                i as u32,
                &gen_types::gen_pace {
                    interval_ps: iv,
                    gap_ps: (iv as f64 / PACE_CATCH_UP) as u64,
                    budget: totals[i],
                    weight: self.weights[i],
                    spin_ns: flush.map_or(0, |f| f.as_nanos() as u32),
                    ..Default::default()
                },
            )?;
        }
        let (first, batch) = match flush {
            // Runs take a known time: the first call is sized by it.
            Some(f) => {
                let f = f.as_secs_f64();
                let need = (0..2)
                    .filter_map(|i| Some(totals[i] as f64 / rates[i]? as f64))
                    .fold(0.0, f64::max);
                let secs = CALL_TARGET
                    .min(deadline.as_secs_f64())
                    .min(need * 1.05 + 0.002);
                let max = if self.batch == 0 { 256 } else { self.batch };
                (
                    Some((secs * combined.max(1.0 / f)) as u64),
                    ((combined * f).round() as u32).clamp(1, max),
                )
            }
            // Paced: a short first call measures how long runs take (the program
            // records when a call's runs begin and end), then calls are sized by it.
            None => (paced_only.then_some(1 << 16), self.batch),
        };
        let prog = self.skel.progs.bench_gen_dual.as_fd().as_raw_fd();
        let frame = &self.frame;
        let result = pinned(self.cpu, || {
            let mut left = totals;
            favoured(|| {
                drive_n(rates, totals, deadline, first, |n| {
                    for i in 0..2 {
                        let mut p = read_pace(fd, i)?;
                        (p.run_first_ns, p.run_last_ns) = (0, 0);
                        write_pace(fd, i, &p)?;
                    }
                    prog_run(prog, frame, 0, n, batch)?;
                    let mut got = [0u64; 2];
                    let (mut from, mut to) = (u64::MAX, 0u64);
                    for i in 0..2 {
                        let p = read_pace(fd, i as u32)?;
                        got[i] = left[i].saturating_sub(p.budget);
                        left[i] = p.budget;
                        if p.run_first_ns > 0 {
                            from = from.min(p.run_first_ns);
                            to = to.max(p.run_last_ns);
                        }
                    }
                    Ok((got, (to > from).then(|| Duration::from_nanos(to - from))))
                })
            })
        });
        let paces = [self.pace(Direction::Uplink), self.pace(Direction::Downlink)];
        // Unpaced and unbounded again, whatever happened.
        self.rest()?;
        let d = result??;
        let after = self.counters_both()?;
        let mut out = [SendReport {
            packets: 0,
            bytes: 0,
            calls: d.calls,
            elapsed: Duration::ZERO,
            pps: 0.0,
            complete: true,
        }; 2];
        for (i, o) in out.iter_mut().enumerate() {
            o.packets = after[i].packets - before[i].packets;
            o.bytes = after[i].bytes - before[i].bytes;
            o.complete = d.sent[i] >= totals[i];
            o.elapsed = match (rates[i], &paces[i]) {
                (Some(rate), Ok(p)) if p.first_ns > 0 => {
                    Duration::from_nanos(p.last_ns - p.first_ns + interval(rate) / 1000)
                }
                _ => d.done[i],
            };
            if o.packets > 0 {
                o.pps = o.packets as f64 / o.elapsed.as_secs_f64().max(1e-9);
            }
        }
        Ok(out)
    }
}

/// Entry `key` of a gen_pace map.
fn read_pace(fd: RawFd, key: u32) -> io::Result<gen_types::gen_pace> {
    let mut p = gen_types::gen_pace::default();
    // SAFETY: key and value buffers of the map's sizes (u32, struct gen_pace).
    let r = unsafe {
        libbpf_sys::bpf_map_lookup_elem(
            fd,
            &key as *const u32 as *const _,
            &mut p as *mut gen_types::gen_pace as *mut _,
        )
    };
    if r < 0 {
        return Err(io_err("reading gen_pace", io::Error::last_os_error()));
    }
    Ok(p)
}

fn write_pace(fd: RawFd, key: u32, p: &gen_types::gen_pace) -> io::Result<()> {
    // SAFETY: key and value of the map's sizes (u32, struct gen_pace).
    let r = unsafe {
        libbpf_sys::bpf_map_update_elem(
            fd,
            &key as *const u32 as *const _,
            p as *const gen_types::gen_pace as *const _,
            0,
        )
    };
    if r < 0 {
        return Err(io_err("writing gen_pace", io::Error::last_os_error()));
    }
    Ok(())
}

/// How much faster than asked a paced generator may go to make up for the pauses
/// between calls.
pub const PACE_CATCH_UP: f64 = 1.2;

/// Packets a paced generator may send back to back to catch up with its schedule
/// (veth queues hold 256 frames).
pub const PACE_BURST: u64 = 32;

/// How long one BPF_PROG_RUN call of [`Generator::send`] aims to last.
const CALL_TARGET: f64 = 0.5;

/// The loop of [`Generator::send`]: `run(repeat)` makes one call and returns the
/// packets it sent (all of them unpaced; those that were due, paced). Stops when
/// `total` went or `deadline` passed; sizes calls to [`CALL_TARGET`] from the last
/// call's speed, shorter near the deadline or the end. Returns (packets, calls, elapsed).
fn drive(
    rate_pps: Option<u64>,
    total: u64,
    deadline: Duration,
    mut run: impl FnMut(u32) -> io::Result<u64>,
) -> io::Result<(u64, u64, Duration)> {
    let d = drive_n([rate_pps], [total], deadline, None, |n| {
        Ok(([run(n)?], None))
    })?;
    Ok((d.sent[0], d.calls, d.elapsed))
}

/// What [`drive_n`] did.
#[derive(Debug)]
struct Driven<const N: usize> {
    /// Packets per stream.
    sent: [u64; N],
    calls: u64,
    /// Per stream: when it had sent its total (the end of that call), else `elapsed`.
    done: [Duration; N],
    elapsed: Duration,
}

/// [`drive`] for `N` streams generated by the same calls (`DualGenerator`):
/// `run(repeat)` makes one call and returns the packets each stream sent and, if it
/// knows, how long its runs took (the call less its fixed cost). Runs that send: every
/// run while an unpaced stream has packets left (then calls are bounded by what is
/// left), else those that were due. `first`: the size of the first call (None: as
/// [`drive`]).
///
/// With the runs' time known, calls are sized by it, their fixed cost is kept out of
/// the deadline, the last call takes the whole rest (rather than leave a short one),
/// and while only paced streams are left no call shorter than [`MIN_PACED_CALL`] is
/// started (its pause would cost more than it sends).
fn drive_n<const N: usize>(
    rates: [Option<u64>; N],
    totals: [u64; N],
    deadline: Duration,
    first: Option<u64>,
    mut run: impl FnMut(u32) -> io::Result<([u64; N], Option<Duration>)>,
) -> io::Result<Driven<N>> {
    let start = Instant::now();
    let end = start + deadline;
    let mut sent = [0u64; N];
    let mut done: [Option<Duration>; N] = std::array::from_fn(|i| {
        if totals[i] == 0 {
            Some(Duration::ZERO)
        } else {
            None
        }
    });
    let mut calls = 0u64;
    let open = |sent: &[u64; N]| (0..N).filter(|&i| sent[i] < totals[i]).collect::<Vec<_>>();
    let paced_only = |sent: &[u64; N]| {
        let o = open(sent);
        !o.is_empty() && o.iter().all(|&i| rates[i].is_some())
    };
    // Paced, runs that are not due cost a few tens of ns each; start at a few ms.
    let mut repeat: u64 = match first {
        Some(n) => n.clamp(64, MAX_REPEAT),
        None if paced_only(&sent) => 1 << 18,
        None => 1 << 16,
    };
    loop {
        let streams = open(&sent);
        if streams.is_empty() || calls >= MAX_CALLS {
            break;
        }
        let now = Instant::now();
        if now >= end {
            break;
        }
        // Only paced streams left: runs that are not due send nothing. Otherwise every
        // run sends, and no more are needed than packets are left.
        let n = if paced_only(&sent) {
            repeat
        } else {
            let left = streams
                .iter()
                .fold(0u64, |a, &i| a.saturating_add(totals[i] - sent[i]));
            repeat.min(left)
        };
        let (got, runs) = run(n as u32)?;
        calls += 1;
        for i in 0..N {
            sent[i] += got[i].min(totals[i] - sent[i]);
            if sent[i] >= totals[i] && done[i].is_none() {
                done[i] = Some(start.elapsed());
            }
        }
        let took = now.elapsed().as_secs_f64().max(1e-6);
        let rest = end.saturating_duration_since(Instant::now()).as_secs_f64();
        let mut want = CALL_TARGET.min(rest);
        let busy = match runs {
            Some(r) => {
                let busy = r.as_secs_f64().clamp(1e-6, took);
                // The fixed cost of the next call is not time to run.
                let rest = rest - (took - busy);
                want = if rest < 1.5 * CALL_TARGET {
                    rest
                } else {
                    CALL_TARGET
                };
                if want < MIN_PACED_CALL.as_secs_f64() && paced_only(&sent) {
                    break;
                }
                busy
            }
            None => took,
        };
        if paced_only(&sent) {
            // No longer than the rest needs (plus a little), so the tail does not spin.
            let need = open(&sent)
                .iter()
                .map(|&i| (totals[i] - sent[i]) as f64 / rates[i].unwrap_or(1) as f64)
                .fold(0.0, f64::max);
            want = want.min(need * 1.05 + 0.002);
        }
        repeat = ((n as f64 * want.max(0.0) / busy) as u64).clamp(64, MAX_REPEAT);
    }
    let elapsed = start.elapsed();
    Ok(Driven {
        sent,
        calls,
        done: done.map(|t| t.unwrap_or(elapsed)),
        elapsed,
    })
}

/// The shortest call [`DualGenerator::send`] starts while only paced directions have
/// packets left: a call's fixed cost (tens of ms) pauses both streams.
pub const MIN_PACED_CALL: Duration = Duration::from_millis(50);

/// Bounds on [`drive`]: runs per call, calls per send.
const MAX_REPEAT: u64 = 1 << 30;
const MAX_CALLS: u64 = 1 << 20;

/// BPF_PROG_RUN in live-frames mode: `repeat` runs of `prog` on `frame`, as received on
/// `ifindex` of the calling thread's namespace.
fn prog_run(prog: RawFd, frame: &[u8], ifindex: u32, repeat: u32, batch: u32) -> io::Result<()> {
    // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
    // egress_ifindex.
    let mut ctx = [0u32; 6];
    ctx[1] = frame.len() as u32;
    ctx[3] = ifindex;
    let opts = libbpf_sys::bpf_test_run_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_test_run_opts>() as _,
        data_in: frame.as_ptr() as *const _,
        data_size_in: frame.len() as u32,
        ctx_in: ctx.as_ptr() as *const _,
        ctx_size_in: std::mem::size_of_val(&ctx) as u32,
        // The kernel reads repeat as an unsigned count.
        repeat: repeat as i32,
        flags: TEST_XDP_LIVE_FRAMES,
        batch_size: batch,
        ..Default::default()
    };
    let mut opts = opts;
    // SAFETY: data and context buffers outlive the call; the kernel only reads them
    // (no output buffers are given).
    let r = unsafe { libbpf_sys::bpf_prog_test_run_opts(prog, &mut opts) };
    if r < 0 {
        return Err(io_err(
            "BPF_PROG_RUN (live frames)",
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Latency histogram

/// The bucket of a latency of `us` microseconds (bench.h, `hist_bucket` in sink.bpf.c).
pub fn hist_bucket(us: u64) -> usize {
    let linear = 1u64 << HIST_LINEAR_BITS;
    if us < linear {
        return us as usize;
    }
    if us >> HIST_MAX_BITS != 0 {
        return HIST_BUCKETS - 1;
    }
    let e = 63 - us.leading_zeros();
    let sub = (us >> (e - HIST_SUB_BITS)) & ((1 << HIST_SUB_BITS) - 1);
    linear as usize + (((e - HIST_LINEAR_BITS) as usize) << HIST_SUB_BITS) + sub as usize
}

/// The microseconds bucket `i` holds: `[low, high)`.
pub fn hist_bounds(i: usize) -> (u64, u64) {
    let linear = 1usize << HIST_LINEAR_BITS;
    if i < linear {
        return (i as u64, i as u64 + 1);
    }
    let j = i - linear;
    let e = HIST_LINEAR_BITS + (j >> HIST_SUB_BITS) as u32;
    let sub = (j & ((1 << HIST_SUB_BITS) - 1)) as u64;
    let width = 1u64 << (e - HIST_SUB_BITS);
    let low = (1u64 << e) + sub * width;
    (low, low + width)
}

/// A latency histogram ([`HIST_BUCKETS`] log-linear buckets of microseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Histogram {
    pub buckets: Vec<u64>,
}

/// Latency percentiles, each the upper edge of its bucket (at most 1 us high below
/// 128 us, about 6 % above).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Percentiles {
    pub samples: u64,
    pub p50: Duration,
    pub p99: Duration,
    pub p999: Duration,
    pub max: Duration,
}

impl Histogram {
    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// The `q`-quantile (0 < q <= 1), as its bucket's upper edge; None when empty.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        // The rank of the sample, 1-based, rounded up.
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(Duration::from_micros(hist_bounds(i).1));
            }
        }
        None
    }

    /// p50, p99, p99.9 and the maximum; None when empty.
    pub fn percentiles(&self) -> Option<Percentiles> {
        Some(Percentiles {
            samples: self.count(),
            p50: self.quantile(0.5)?,
            p99: self.quantile(0.99)?,
            p999: self.quantile(0.999)?,
            max: self.quantile(1.0)?,
        })
    }
}

// ---------------------------------------------------------------------------------------
// Sink

/// A sink's totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkTotals {
    /// The generator's packets, counted and dropped, by [`Direction`] index.
    pub dir: [Count; 2],
    /// Other frames, passed to the kernel.
    pub other: Count,
    /// The generator's packets with a session index beyond the table (dropped).
    pub bad_session: u64,
}

impl SinkTotals {
    /// Counted packets of one direction.
    pub fn of(&self, dir: Direction) -> Count {
        self.dir[dir.index()]
    }
}

/// Counts the generator's packets on a receiving end (bpf/bench/sink.bpf.c).
pub struct Sink {
    skel: Loaded<BenchSinkSkel<'static>>,
    attachment: Option<Attachment>,
    max_sessions: u32,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("attachment", &self.attachment)
            .field("max_sessions", &self.max_sessions)
            .finish()
    }
}

impl Sink {
    /// Loads a sink for session indices `0..max_sessions` without attaching it (for
    /// BPF_PROG_RUN tests).
    pub fn load(max_sessions: u32) -> io::Result<Sink> {
        if max_sessions == 0 {
            return Err(invalid("max_sessions is 0"));
        }
        let skel = Loaded::new(BenchSinkSkelBuilder::default(), "bench_sink", |open| {
            open.maps
                .sink_sessions
                .set_max_entries(max_sessions)
                .map_err(|e| io_err("sizing sink_sessions", e))
        })?;
        let entries = skel.maps.sink_latency.max_entries();
        if entries as usize != 2 * HIST_BUCKETS {
            return Err(io::Error::other(format!(
                "sink_latency has {entries} entries, bench_bpf expects {}: bench.h and bench_bpf disagree",
                2 * HIST_BUCKETS
            )));
        }
        Ok(Sink {
            skel,
            attachment: None,
            max_sessions,
        })
    }

    /// Loads a sink and attaches it (native XDP) to `ifindex` of the calling thread's
    /// namespace, in place of what ran there (put back on drop).
    pub fn attach(ifindex: u32, max_sessions: u32) -> io::Result<Sink> {
        let mut s = Sink::load(max_sessions)?;
        s.attachment = Some(Attachment::new(s.skel.progs.bench_sink.as_fd(), ifindex)?);
        Ok(s)
    }

    /// The program, for BPF_PROG_RUN.
    pub fn program(&self) -> &libbpf_rs::ProgramMut<'static> {
        &self.skel.progs.bench_sink
    }

    /// Packets and octets per session `0..max_sessions` in one direction.
    pub fn counts(&self, dir: Direction) -> io::Result<Vec<Count>> {
        let mut out = vec![Count::default(); self.max_sessions as usize];
        read_percpu_array(
            &self.skel.maps.sink_sessions,
            self.max_sessions,
            |i, _, b| {
                let s: sink_types::sink_session = from_bytes(b);
                out[i].add(&s.dir[dir.index()]);
            },
        )?;
        Ok(out)
    }

    /// The totals, all CPUs.
    pub fn totals(&self) -> io::Result<SinkTotals> {
        let v = percpu_one::<sink_types::sink_totals>(&self.skel.maps.sink_totals, 0)?;
        let mut t = SinkTotals::default();
        for c in &v {
            t.dir[0].add(&c.dir[0]);
            t.dir[1].add(&c.dir[1]);
            t.other.add(&c.other);
            t.bad_session += c.bad_session;
        }
        Ok(t)
    }

    /// The latency histogram of one direction.
    pub fn latency(&self, dir: Direction) -> io::Result<Histogram> {
        let mut buckets = vec![0u64; 2 * HIST_BUCKETS];
        read_percpu_array(
            &self.skel.maps.sink_latency,
            2 * HIST_BUCKETS as u32,
            |i, _, b| {
                buckets[i] += from_bytes::<u64>(b);
            },
        )?;
        let o = dir.index() * HIST_BUCKETS;
        Ok(Histogram {
            buckets: buckets[o..o + HIST_BUCKETS].to_vec(),
        })
    }

    /// p50/p99/p99.9/max latency of one direction; None without samples.
    pub fn latency_percentiles(&self, dir: Direction) -> io::Result<Option<Percentiles>> {
        Ok(self.latency(dir)?.percentiles())
    }

    /// Zeroes every counter and the histogram (between measurements).
    pub fn reset(&self) -> io::Result<()> {
        let m = &self.skel.maps;
        zero_percpu_array(&m.sink_sessions, self.max_sessions)?;
        zero_percpu_array(&m.sink_totals, 1)?;
        zero_percpu_array(&m.sink_latency, 2 * HIST_BUCKETS as u32)
    }

    /// Detaches now, putting back what ran before; errors are reported, not ignored.
    pub fn detach(mut self) -> io::Result<()> {
        self.restore()
    }

    fn restore(&mut self) -> io::Result<()> {
        let fd = self.skel.progs.bench_sink.as_fd().as_raw_fd();
        match self.attachment.take() {
            Some(mut a) => a.restore(fd),
            None => Ok(()),
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        if let Err(e) = self.restore() {
            eprintln!("bench sink: {e}");
        }
    }
}

/// Counts and drops every frame on an interface (bpf/bench/drop.bpf.c): the receiving
/// end of the generator-limit measurement.
pub struct DropSink {
    skel: Loaded<BenchDropSkel<'static>>,
    attachment: Option<Attachment>,
}

impl std::fmt::Debug for DropSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DropSink")
            .field("attachment", &self.attachment)
            .finish()
    }
}

impl DropSink {
    /// Loads it and attaches it to `ifindex` of the calling thread's namespace (the
    /// previous program goes back on drop).
    pub fn attach(ifindex: u32) -> io::Result<DropSink> {
        let skel = Loaded::new(BenchDropSkelBuilder::default(), "bench_drop", |_| Ok(()))?;
        let attachment = Some(Attachment::new(skel.progs.bench_drop.as_fd(), ifindex)?);
        Ok(DropSink { skel, attachment })
    }

    /// IPv4/UDP frames counted and dropped, all CPUs (other frames pass uncounted).
    pub fn count(&self) -> io::Result<Count> {
        let v = percpu_one::<sink_types::bench_count>(&self.skel.maps.drop_count, 0)?;
        let mut c = Count::default();
        v.iter().for_each(|x| c.add(x));
        Ok(c)
    }
}

impl Drop for DropSink {
    fn drop(&mut self) {
        let fd = self.skel.progs.bench_drop.as_fd().as_raw_fd();
        if let Some(mut a) = self.attachment.take() {
            if let Err(e) = a.restore(fd) {
                eprintln!("bench drop: {e}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Bare forwarder

/// The bare forwarder's fixed next hops and addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BareConfig {
    /// upf `n3`, in the attaching thread's namespace.
    pub n3_ifindex: u32,
    /// upf `n6`.
    pub n6_ifindex: u32,
    /// upf `n3`'s MAC (source of downlink frames).
    pub n3_mac: [u8; 6],
    /// gnb `n3`'s MAC.
    pub gnb_mac: [u8; 6],
    /// upf `n6`'s MAC (source of uplink frames).
    pub n6_mac: [u8; 6],
    /// dn `n6`'s MAC.
    pub dn_mac: [u8; 6],
    /// Our N3 address: uplink G-PDUs to it are decapsulated; downlink's outer source.
    pub n3_ip: Ipv4Addr,
    /// The gNB: downlink's outer destination.
    pub gnb_ip: Ipv4Addr,
    /// Our N6 address: downlink packets to it are left to the kernel.
    pub n6_ip: Ipv4Addr,
    /// Downlink TEID.
    pub teid: u32,
    /// Downlink: add a PDU Session Container (DL PDU SESSION INFORMATION) with `qfi`.
    pub psc: bool,
    pub qfi: u8,
}

/// The bare forwarder's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BareStats {
    /// Decapsulated and redirected to N6.
    pub uplink: Count,
    /// Encapsulated and redirected to N3.
    pub downlink: Count,
    /// Left to the kernel.
    pub passed: Count,
    /// Failed to adjust the frame (dropped).
    pub errors: Count,
    /// One-miss: no record of the key, or an uplink source not the record's UE (dropped).
    pub misses: Count,
}

/// One session of the one-miss forwarder's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissSession {
    /// The UE's address: the downlink key, and the source uplink packets must have.
    pub ue: Ipv4Addr,
    /// The downlink TEID it puts into the header.
    pub dl_teid: u32,
}

/// Where the one-miss forwarder's tables put the sessions ([`BareForwarder::load_one_miss`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissLayout {
    /// The uplink TEID of each session (in the order given) that finds its record: the
    /// slot in disguise, as upfd's TEIDs are. The generator must send these.
    pub uplink_teids: Vec<u32>,
    /// Records (slots) in each table.
    pub slots: u32,
    /// Sessions whose slot another session's address took (their packets are dropped);
    /// 0 for a pool's consecutive addresses.
    pub unslotted: u32,
}

/// Uplink TEID of the one-miss forwarder's slot 0.
pub const MISS_TEID_LO: u32 = 0x0100_0000;

/// Which programs a [`BareForwarder`] attaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BareKind {
    /// `bare_n3`, `bare_n6`: the I/O limit.
    Bare,
    /// `miss_n3`, `miss_n6`: the one-miss limit.
    OneMiss,
}

/// GTP-U decapsulation (N3 -> N6) and encapsulation (N6 -> N3) with fixed next hops and
/// no session logic (bpf/bench/bare_fwd.bpf.c): the I/O limit, in place of upfd. Or,
/// loaded with [`BareForwarder::load_one_miss`], the same plus one read of the session's
/// record per packet: the one-miss limit.
pub struct BareForwarder {
    skel: Loaded<BenchBareFwdSkel<'static>>,
    kind: BareKind,
    cfg: BareConfig,
    n3: Option<Attachment>,
    n6: Option<Attachment>,
}

impl std::fmt::Debug for BareForwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BareForwarder")
            .field("kind", &self.kind)
            .field("n3", &self.n3)
            .field("n6", &self.n6)
            .finish()
    }
}

impl BareForwarder {
    /// Loads it and attaches `bare_n3` to `cfg.n3_ifindex` and `bare_n6` to
    /// `cfg.n6_ifindex`, interfaces of the calling thread's namespace (upf).
    pub fn attach(cfg: BareConfig) -> io::Result<BareForwarder> {
        let mut b = BareForwarder::load(cfg)?;
        b.attach_here()?;
        Ok(b)
    }

    /// Loads and configures it without attaching (for BPF_PROG_RUN tests).
    pub fn load(cfg: BareConfig) -> io::Result<BareForwarder> {
        Self::load_kind(cfg, BareKind::Bare, 1, 0)
    }

    /// Loads the one-miss forwarder with a record per session, each at the slot its key
    /// maps to (downlink: the UE address mod the session count, as upfd's downlink slots;
    /// uplink: the same slot, encoded in the TEID it returns), without attaching
    /// ([`BareForwarder::attach_here`] does). Sessions in the order the generator sends
    /// them: shuffled, each packet's read is a miss.
    pub fn load_one_miss(
        cfg: BareConfig,
        sessions: &[MissSession],
    ) -> io::Result<(BareForwarder, MissLayout)> {
        let slots =
            u32::try_from(sessions.len().max(1)).map_err(|_| invalid("more than 2^32 sessions"))?;
        let b = Self::load_kind(cfg, BareKind::OneMiss, slots, MISS_TEID_LO)?;
        let rec = std::mem::size_of::<bare_types::miss_record>();
        let mut ul = vec![0u8; slots as usize * rec];
        let mut dl = vec![0u8; slots as usize * rec];
        let mut taken = vec![false; slots as usize];
        let mut layout = MissLayout {
            uplink_teids: Vec::with_capacity(sessions.len()),
            slots,
            unslotted: 0,
        };
        for s in sessions {
            let ue = u32::from_ne_bytes(s.ue.octets());
            let slot = u32::from(s.ue) % slots;
            let teid = MISS_TEID_LO + slot;
            layout.uplink_teids.push(teid);
            if std::mem::replace(&mut taken[slot as usize], true) {
                layout.unslotted += 1;
                continue;
            }
            let mut r = bare_types::miss_record {
                key: teid,
                ue,
                teid: s.dl_teid,
                qfi: cfg.qfi & 0x3f,
                ..Default::default()
            };
            let o = slot as usize * rec;
            ul[o..o + rec].copy_from_slice(bytes_of(&r));
            r.key = ue;
            dl[o..o + rec].copy_from_slice(bytes_of(&r));
        }
        update_array(&b.skel.maps.miss_ul, 0, &ul, rec)
            .map_err(|e| io_err("writing miss_ul", e))?;
        update_array(&b.skel.maps.miss_dl, 0, &dl, rec)
            .map_err(|e| io_err("writing miss_dl", e))?;
        Ok((b, layout))
    }

    fn load_kind(
        cfg: BareConfig,
        kind: BareKind,
        slots: u32,
        teid_lo: u32,
    ) -> io::Result<BareForwarder> {
        let skel = Loaded::new(
            BenchBareFwdSkelBuilder::default(),
            "bench_bare_fwd",
            |open| {
                for m in [&mut open.maps.miss_ul, &mut open.maps.miss_dl] {
                    m.set_max_entries(slots)
                        .map_err(|e| io_err("sizing the one-miss tables", e))?;
                }
                Ok(())
            },
        )?;
        let raw = bare_types::bare_config {
            n3_ifindex: cfg.n3_ifindex,
            n6_ifindex: cfg.n6_ifindex,
            n3_src_mac: cfg.n3_mac,
            n3_dst_mac: cfg.gnb_mac,
            n6_src_mac: cfg.n6_mac,
            n6_dst_mac: cfg.dn_mac,
            n3_ip: u32::from_ne_bytes(cfg.n3_ip.octets()),
            gnb_ip: u32::from_ne_bytes(cfg.gnb_ip.octets()),
            n6_ip: u32::from_ne_bytes(cfg.n6_ip.octets()),
            teid: cfg.teid,
            psc: cfg.psc as u8,
            qfi: cfg.qfi & 0x3f,
            pad: [0; 2],
            teid_lo,
            miss_slots: if kind == BareKind::OneMiss { slots } else { 0 },
        };
        skel.maps
            .bare_cfg
            .update(&0u32.to_ne_bytes(), bytes_of(&raw), MapFlags::ANY)
            .map_err(|e| io_err("writing bare_cfg", e))?;
        Ok(BareForwarder {
            n3: None,
            n6: None,
            kind,
            cfg,
            skel,
        })
    }

    /// Attaches its programs to `n3_ifindex` and `n6_ifindex` of the calling thread's
    /// namespace (upf), keeping what ran there to put back ([`BareForwarder::detach`],
    /// or drop).
    pub fn attach_here(&mut self) -> io::Result<()> {
        self.detach()?;
        let (p3, p6) = self.programs();
        let (p3, p6) = (p3.as_fd().as_raw_fd(), p6.as_fd().as_raw_fd());
        // SAFETY: program fds of our skeleton, which outlives these calls.
        let (p3, p6) = unsafe { (BorrowedFd::borrow_raw(p3), BorrowedFd::borrow_raw(p6)) };
        self.n3 = Some(Attachment::new(p3, self.cfg.n3_ifindex)?);
        self.n6 = Some(Attachment::new(p6, self.cfg.n6_ifindex)?);
        Ok(())
    }

    /// Puts back what ran on the interfaces before (in the namespace it was attached
    /// in, whatever thread calls); nothing if not attached.
    pub fn detach(&mut self) -> io::Result<()> {
        let (p3, p6) = self.programs();
        let (n3, n6) = (p3.as_fd().as_raw_fd(), p6.as_fd().as_raw_fd());
        let mut first_err = None;
        for (a, fd) in [(self.n3.take(), n3), (self.n6.take(), n6)] {
            if let Some(mut a) = a {
                if let Err(e) = a.restore(fd) {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    /// Its uplink and downlink programs: `bare_n3` and `bare_n6`, or for the one-miss
    /// forwarder `miss_n3` and `miss_n6`.
    pub fn programs(
        &self,
    ) -> (
        &libbpf_rs::ProgramMut<'static>,
        &libbpf_rs::ProgramMut<'static>,
    ) {
        match self.kind {
            BareKind::Bare => (&self.skel.progs.bare_n3, &self.skel.progs.bare_n6),
            BareKind::OneMiss => (&self.skel.progs.miss_n3, &self.skel.progs.miss_n6),
        }
    }

    /// Its counters, all CPUs.
    pub fn stats(&self) -> io::Result<BareStats> {
        let m = &self.skel.maps.bare_stats;
        let get = |k: u32| -> io::Result<Count> {
            let v = percpu_one::<sink_types::bench_count>(m, k)?;
            let mut c = Count::default();
            v.iter().for_each(|x| c.add(x));
            Ok(c)
        };
        Ok(BareStats {
            uplink: get(0)?,
            downlink: get(1)?,
            passed: get(2)?,
            errors: get(3)?,
            misses: get(4)?,
        })
    }
}

impl Drop for BareForwarder {
    fn drop(&mut self) {
        if let Err(e) = self.detach() {
            eprintln!("bench bare forwarder: {e}");
        }
    }
}

// SAFETY: each of these owns its whole libbpf object (libbpf-rs declares `Object` Send);
// the map and program handles inside point into that object only, and every use goes
// through &self or &mut self, so moving the owner to another thread is sound.
unsafe impl Send for Generator {}
unsafe impl Send for DualGenerator {}
unsafe impl Send for Sink {}
unsafe impl Send for DropSink {}
unsafe impl Send for BareForwarder {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets() {
        assert_eq!(HIST_BUCKETS, 528);
        for us in [
            0u64,
            1,
            99,
            127,
            128,
            129,
            255,
            256,
            1000,
            5000,
            1 << 20,
            (1 << 32) - 1,
        ] {
            let b = hist_bucket(us);
            let (lo, hi) = hist_bounds(b);
            assert!(lo <= us && us < hi, "{us} in bucket {b} [{lo}, {hi})");
        }
        assert_eq!(hist_bucket(1 << 40), HIST_BUCKETS - 1);
        // Contiguous and increasing.
        for i in 1..HIST_BUCKETS {
            assert_eq!(hist_bounds(i - 1).1, hist_bounds(i).0, "bucket {i}");
        }
    }

    #[test]
    fn quantiles() {
        let mut h = Histogram {
            buckets: vec![0; HIST_BUCKETS],
        };
        assert_eq!(h.percentiles(), None);
        h.buckets[10] = 990;
        h.buckets[hist_bucket(1000)] = 9;
        h.buckets[hist_bucket(20_000)] = 1;
        let p = h.percentiles().unwrap();
        assert_eq!(p.samples, 1000);
        assert_eq!(p.p50, Duration::from_micros(11));
        assert_eq!(p.p99, Duration::from_micros(11));
        assert_eq!(
            p.p999,
            Duration::from_micros(hist_bounds(hist_bucket(1000)).1)
        );
        assert_eq!(
            p.max,
            Duration::from_micros(hist_bounds(hist_bucket(20_000)).1)
        );
    }

    #[test]
    fn size_table_spreads_weights() {
        let mut c = GenConfig::downlink(1, [0; 6], [0; 6]);
        c.sizes = vec![(100, 3), (200, 1)];
        assert_eq!(c.size_table().unwrap(), vec![100, 100, 200, 100]);
        c.sizes = vec![(60, 1)];
        assert!(c.size_table().is_err(), "shorter than headers and payload");
        c.sizes = vec![(100, 65)];
        assert!(c.size_table().is_err(), "more than MAX_SIZES");
        // TCP sizes marked; a TCP segment needs 12 octets more than a datagram.
        c.sizes = vec![(100, 1), (200, 1)];
        c.tcp_sizes = vec![200];
        assert_eq!(c.size_table().unwrap(), vec![100, 200 | SIZE_TCP]);
        c.sizes = vec![(min_frame_len(Direction::Downlink, false) as u16, 1)];
        c.tcp_sizes = vec![c.sizes[0].0];
        assert!(c.size_table().is_err(), "too short for TCP");
        c.tcp_sizes = vec![c.sizes[0].0 + TCP_EXTRA as u16];
        assert!(c.size_table().is_ok(), "UDP only");
    }

    #[test]
    fn constants_match_bench_h() {
        assert_eq!(gen_types::gen_config::default().sizes.len(), MAX_SIZES);
        assert_eq!(std::mem::size_of::<gen_types::gen_session>(), 12);
        assert_eq!(std::mem::size_of::<bare_types::miss_record>(), 64);
    }

    #[test]
    fn lengths() {
        assert_eq!(min_frame_len(Direction::Downlink, false), 62);
        assert_eq!(min_frame_len(Direction::Uplink, true), 106);
        assert_eq!(min_frame_len(Direction::Uplink, false), 98);
        assert_eq!(frame_len_for_ip_len(Direction::Uplink, true, 64), 122);
        assert_eq!(frame_len_for_ip_len(Direction::Downlink, false, 64), 78);
    }

    #[test]
    fn sending_is_bounded() {
        // Unpaced: exactly `total`, in calls.
        let mut runs = Vec::new();
        let (sent, calls, _) = drive(None, 200_000, Duration::from_secs(5), |n| {
            runs.push(n);
            Ok(n as u64)
        })
        .unwrap();
        assert_eq!(sent, 200_000);
        assert_eq!(runs.iter().map(|&n| n as u64).sum::<u64>(), 200_000);
        assert_eq!(calls, runs.len() as u64);
        // Paced, nothing ever due: ends at the deadline. Each call takes at least 1 ms,
        // so more than 100 calls mean it ran past the 100 ms deadline (the closure stops
        // it there rather than let it run on).
        let mut n = 0u64;
        let (sent, calls, elapsed) = drive(Some(10), 1_000, Duration::from_millis(100), |_| {
            n += 1;
            if n > 100 {
                return Err(io::Error::other("a call started after the deadline"));
            }
            std::thread::sleep(Duration::from_millis(1));
            Ok(0)
        })
        .unwrap();
        assert_eq!(sent, 0);
        assert_eq!(calls, n);
        assert!(calls >= 1);
        assert!(
            elapsed >= Duration::from_millis(100),
            "not before it: {elapsed:?}"
        );
    }
}
