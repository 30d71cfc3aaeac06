//! Table values as octets, and the tables upfd maps into its memory (BPF_F_MMAPABLE
//! arrays) because the data path updates them concurrently: `qers` (the MBR's arrival
//! times move with atomic instructions) and `urr_state` (quotas and thresholds counted
//! down, counters counted up). upfd touches those one word at a time, atomically, at
//! the offsets of the BTF-generated types, never a whole element.

use std::mem::{offset_of, size_of};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

use upf::abi;
use upf::fastpath::{FastPathError, Usage};

use crate::upf::types;

pub(crate) fn io(e: impl std::fmt::Display) -> FastPathError {
    FastPathError::Io(e.to_string())
}

/// A table value's octets.
pub(crate) fn bytes<T: Copy>(t: &T) -> &[u8] {
    // SAFETY: T is a plain-old-data repr(C) type generated from BTF; reading its octets
    // (padding included, all zero-initialised by Default) is defined.
    unsafe { std::slice::from_raw_parts(t as *const T as *const u8, size_of::<T>()) }
}

/// A table value from its octets; None unless there are exactly `size_of::<T>()`.
pub(crate) fn from_bytes<T: Copy + Default>(b: &[u8]) -> Option<T> {
    if b.len() != size_of::<T>() {
        return None;
    }
    let mut t = T::default();
    // SAFETY: as above; exactly size_of::<T>() octets are copied into t.
    unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), &mut t as *mut T as *mut u8, b.len()) };
    Some(t)
}

/// A BPF_F_MMAPABLE map's values mapped into our memory, unmapped on drop.
pub(crate) struct MapMemory {
    base: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: plain shared memory; what may be read or written through it, and how, is up to
// its users (UrrMem, QerMem: atomics only; DirectTable: only what no packet reads).
unsafe impl Send for MapMemory {}
unsafe impl Sync for MapMemory {}

impl MapMemory {
    /// The first `bytes` octets of the values of `m` (named `name` in errors).
    pub(crate) fn map(m: &impl AsFd, bytes: usize, name: &str) -> Result<Self, FastPathError> {
        let page = 4096;
        let len = bytes.div_ceil(page) * page;
        // SAFETY: a fresh shared mapping of the map's fd, unmapped in Drop.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                m.as_fd().as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io(format!(
                "mapping {name}: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(MapMemory {
            base: std::ptr::NonNull::new(p.cast()).ok_or_else(|| io("mmap returned null"))?,
            len,
        })
    }

    /// The mapping's start (page aligned).
    pub(crate) fn base(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// The atomic `A` at octet `at`, if it lies in the mapping and is aligned.
    fn atomic<A>(&self, at: usize) -> Option<&A> {
        let fits = at
            .checked_add(size_of::<A>())
            .is_some_and(|end| end <= self.len);
        (fits && at % align_of::<A>() == 0).then(|| {
            // SAFETY: inside the mapping and aligned (the mapping is page aligned); the
            // memory is only ever accessed atomically.
            unsafe { &*self.base().add(at).cast::<A>() }
        })
    }
}

impl Drop for MapMemory {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, no longer referenced.
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// The `qers` table, mapped: entry `i` is a `struct qer`.
pub(crate) struct QerMem {
    mem: MapMemory,
    entries: usize,
}

const QER: usize = size_of::<types::qer>();
// The data path updates the tat words with 8-octet atomics; upfd stores whole words.
const _: () = assert!(QER % 8 == 0 && offset_of!(types::qer, cost_ul) == 8);

impl QerMem {
    pub(crate) fn map(m: &impl AsFd, entries: usize) -> Result<Self, FastPathError> {
        Ok(QerMem {
            mem: MapMemory::map(m, entries * QER, "qers")?,
            entries,
        })
    }

    /// Write QER `i` one word at a time (packets update its tat words meanwhile): the
    /// rates first, the first word (gates, QFI, flags) last, so a packet never sees the
    /// flags of the new QER with the rates of the old. A fresh QER starts idle; an
    /// updated one keeps its arrival times.
    pub(crate) fn store(&self, i: u32, q: &types::qer, fresh: bool) -> Result<(), FastPathError> {
        let i = i as usize;
        if i >= self.entries {
            return Err(io(format!("QER index {i} outside the table")));
        }
        let tat = [
            offset_of!(types::qer, tat_ul),
            offset_of!(types::qer, tat_dl),
        ];
        let octets = bytes(q);
        for at in (8..QER).step_by(8) {
            if tat.contains(&at) && !fresh {
                continue;
            }
            let w = u64::from_ne_bytes(octets[at..at + 8].try_into().expect("8 octets"));
            self.word(i * QER + at)?.store(w, Ordering::Relaxed);
        }
        let head = u64::from_ne_bytes(octets[..8].try_into().expect("8 octets"));
        // Release: the rates are in place before the flags that switch them on.
        self.word(i * QER)?.store(head, Ordering::Release);
        Ok(())
    }

    fn word(&self, at: usize) -> Result<&AtomicU64, FastPathError> {
        self.mem
            .atomic(at)
            .ok_or_else(|| io(format!("qers: octet {at} outside the mapping")))
    }
}

/// `urr_state`, mapped: per URR slot a run of `stride` cells of abi::URR_CELL octets, the
/// one all CPUs share (`struct urr_shared`) and then one per possible CPU (`struct
/// urr_counters`).
pub(crate) struct UrrMem {
    mem: MapMemory,
    cells: usize,
    stride: usize,
}

pub(crate) const CELL: usize = abi::URR_CELL as usize;
const _: () = assert!(size_of::<types::urr_counters>() == CELL);
const _: () = assert!(size_of::<types::urr_shared>() == CELL);

impl UrrMem {
    pub(crate) fn map(m: &impl AsFd, cells: usize, stride: usize) -> Result<Self, FastPathError> {
        Ok(UrrMem {
            mem: MapMemory::map(m, cells * CELL, "urr_state")?,
            cells,
            stride,
        })
    }

    pub(crate) fn stride(&self) -> usize {
        self.stride
    }

    /// The octet where field `at` of cell `k` of URR slot `slot` lies, if in the table.
    fn at(&self, slot: u32, k: usize, at: usize) -> Option<usize> {
        let cell = (slot as usize).checked_mul(self.stride)?.checked_add(k)?;
        (cell < self.cells && k < self.stride).then_some(cell * CELL + at)
    }

    fn shared_i64(&self, slot: u32, at: usize) -> Option<&AtomicI64> {
        self.mem.atomic(self.at(slot, 0, at)?)
    }

    fn shared_u32(&self, slot: u32, at: usize) -> Option<&AtomicU32> {
        self.mem.atomic(self.at(slot, 0, at)?)
    }

    /// Arm a slot's volume quota with `r` octets left (None: disarm). The amount before
    /// the flag that makes the data path read it; the flag first when disarming; the
    /// notified flag cleared: a new quota may run out again.
    pub(crate) fn set_quota(&self, slot: u32, r: Option<i64>) -> Option<()> {
        let quota = self.shared_i64(slot, offset_of!(types::urr_shared, quota))?;
        let flags = self.shared_u32(slot, offset_of!(types::urr_shared, quota_flags))?;
        match r {
            Some(r) => {
                quota.store(r, Ordering::SeqCst);
                flags.store(abi::URR_Q_VOLUME, Ordering::SeqCst);
            }
            None => {
                flags.store(0, Ordering::SeqCst);
                quota.store(0, Ordering::SeqCst);
            }
        }
        Some(())
    }

    /// Arm a slot's volume threshold with `r` octets left (None: disarm): the data path
    /// raises EV_THRESHOLD on the packet that uses it up.
    pub(crate) fn set_threshold(&self, slot: u32, r: Option<i64>) -> Option<()> {
        let left = self.shared_i64(slot, offset_of!(types::urr_shared, threshold))?;
        let armed = self.shared_u32(slot, offset_of!(types::urr_shared, threshold_armed))?;
        match r {
            Some(r) => {
                left.store(r, Ordering::SeqCst);
                armed.store(1, Ordering::SeqCst);
            }
            None => {
                armed.store(0, Ordering::SeqCst);
                left.store(0, Ordering::SeqCst);
            }
        }
        Some(())
    }

    /// The counts of a slot summed over `ncpus` CPUs, with the times of its first and
    /// last packet in seconds since the UNIX epoch (the data path's clock is monotonic
    /// nanoseconds: `boot_offset_ns` turns it into UNIX time). None: no such slot.
    pub(crate) fn usage(&self, slot: u32, ncpus: usize, boot_offset_ns: i128) -> Option<Usage> {
        let (mut u, times) = self.counters(slot, ncpus)?;
        let to_unix = |ns: u64| ((ns as i128 + boot_offset_ns) / 1_000_000_000) as u64;
        if let Some((first, last)) = times {
            u.first_packet = Some(to_unix(first));
            u.last_packet = Some(to_unix(last));
        }
        Some(u)
    }

    /// The counters of a slot summed over `ncpus` CPUs, times as the data path's
    /// monotonic nanoseconds (first: the earliest non-zero, last: the latest).
    fn counters(&self, slot: u32, ncpus: usize) -> Option<(Usage, Option<(u64, u64)>)> {
        let mut u = Usage::default();
        let (mut first, mut last) = (u64::MAX, 0u64);
        for cpu in 0..ncpus {
            let w = |at: usize| -> Option<u64> {
                let a: &AtomicU64 = self.mem.atomic(self.at(slot, 1 + cpu, at)?)?;
                Some(a.load(Ordering::Relaxed))
            };
            u.ul_packets += w(offset_of!(types::urr_counters, ul_packets))?;
            u.ul_bytes += w(offset_of!(types::urr_counters, ul_bytes))?;
            u.dl_packets += w(offset_of!(types::urr_counters, dl_packets))?;
            u.dl_bytes += w(offset_of!(types::urr_counters, dl_bytes))?;
            let f = w(offset_of!(types::urr_counters, first_ns))?;
            if f != 0 {
                first = first.min(f);
            }
            last = last.max(w(offset_of!(types::urr_counters, last_ns))?);
        }
        Some((u, (first != u64::MAX).then_some((first, last))))
    }

    /// Zero cells `from..stride` of a slot: all of them before a new URR uses the slot
    /// (from 0), or its counters alone (from 1).
    pub(crate) fn clear(&self, slot: u32, from: usize) {
        for k in from..self.stride {
            for at in (0..CELL).step_by(8) {
                let w = self
                    .at(slot, k, at)
                    .and_then(|o| self.mem.atomic::<AtomicU64>(o));
                if let Some(w) = w {
                    w.store(0, Ordering::Relaxed);
                }
            }
        }
    }
}
