//! Table values as octets, and the tables upfd maps into its memory (BPF_F_MMAPABLE
//! arrays) because the data path updates them concurrently: `sess_pages` (records, pools
//! and lanes) and `cells` (cold QERs and URRs). upfd touches those one word at a time,
//! atomically, at the offsets of the BTF-generated types (`Pages`), never a whole
//! element.

use std::mem::{offset_of, size_of};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{fence, AtomicI64, AtomicU16, AtomicU32, AtomicU64, Ordering};

use upf::fastpath::{FastPathError, Usage};

use crate::layout::{self, Layout};

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

/// A page array mapped (`sess_pages` or `cells`), with its layout: typed access to the
/// records, parameters, pools and lanes it holds.
pub(crate) struct Pages {
    mem: MapMemory,
    layout: Layout,
    /// `cells` rather than `sess_pages`.
    cells: bool,
}

/// The counts of one URR's lanes: (packets, octets) per direction, first and last packet
/// in lane time units (the coarse clock >> LANE_TIME_SHIFT; 0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LaneSums {
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    pub first: Option<u32>,
    pub last: Option<u32>,
}

impl LaneSums {
    /// As a Usage of the data path's clock: lane times (2^20 ns units, 32 bits) read
    /// against `now_ns` (the coarse clock now) into ns, then UNIX seconds with
    /// `boot_offset_ns`; times are within the last 52 days.
    pub(crate) fn usage(&self, now_ns: i128, boot_offset_ns: i128) -> Usage {
        let shift = upf::abi::LANE_TIME_SHIFT;
        let now_units = (now_ns >> shift) as u32;
        let to_unix = |t: u32| {
            let ago = i128::from(now_units.wrapping_sub(t)) << shift;
            ((now_ns - ago + boot_offset_ns).max(0) / 1_000_000_000) as u64
        };
        Usage {
            ul_packets: self.packets[0],
            ul_bytes: self.bytes[0],
            dl_packets: self.packets[1],
            dl_bytes: self.bytes[1],
            first_packet: self.first.map(to_unix),
            last_packet: self.last.map(to_unix),
        }
    }
}

impl Pages {
    pub(crate) fn map(m: &impl AsFd, layout: Layout, cells: bool) -> Result<Self, FastPathError> {
        let pages = if cells {
            layout.cell_pages
        } else {
            layout.pages
        };
        let name = if cells { "cells" } else { "sess_pages" };
        Ok(Pages {
            mem: MapMemory::map(m, pages as usize * layout::PAGE, name)?,
            layout,
            cells,
        })
    }

    /// Where entry or cell `i` starts.
    fn at(&self, i: u32) -> Option<usize> {
        if self.cells {
            self.layout.cell_at(i)
        } else {
            self.layout.entry_at(i)
        }
    }

    fn word(&self, at: usize) -> Option<&AtomicU64> {
        self.mem.atomic(at)
    }

    fn u32_at(&self, at: usize) -> Option<&AtomicU32> {
        self.mem.atomic(at)
    }

    fn i64_at(&self, at: usize) -> Option<&AtomicI64> {
        self.mem.atomic(at)
    }

    fn pool_at(&self, i: u32) -> Option<usize> {
        let base = self.at(i)?;
        Some(
            base + if self.cells {
                layout::CELL_POOL_AT
            } else {
                layout::POOL_AT
            },
        )
    }

    fn lanes_at(&self, i: u32) -> Option<usize> {
        let base = self.at(i)?;
        Some(
            base + if self.cells {
                layout::CELL_LANES_AT
            } else {
                layout::LANES_AT
            },
        )
    }

    /// Entry `slot`'s record as it is (only upfd writes records).
    pub(crate) fn record(&self, slot: u32) -> Option<types::sess_rec> {
        let at = self.at(slot)?;
        let mut b = [0u8; size_of::<types::sess_rec>()];
        for (k, w) in b.chunks_mut(8).enumerate() {
            w.copy_from_slice(&self.word(at + 8 * k)?.load(Ordering::Relaxed).to_ne_bytes());
        }
        from_bytes(&b)
    }

    /// Write entry `slot`'s record under its sequence lock: seq odd, the rest, seq even
    /// (a packet that read across the change sees seq move and reads again).
    pub(crate) fn write_record(&self, slot: u32, r: &types::sess_rec) -> Option<()> {
        let at = self.at(slot)?;
        let seq = self.u32_at(at + offset_of!(types::sess_rec, seq))?;
        let s = seq.load(Ordering::Relaxed);
        let s = if s & 1 == 1 { s + 1 } else { s };
        seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        let octets = bytes(r);
        // seq is the first 4 octets of the first word: the rest of that word alone.
        self.u32_at(at + 4)?.store(
            u32::from_ne_bytes(octets[4..8].try_into().expect("4 octets")),
            Ordering::Relaxed,
        );
        for k in 1..octets.len() / 8 {
            let w = u64::from_ne_bytes(octets[8 * k..8 * k + 8].try_into().expect("8 octets"));
            self.word(at + 8 * k)?.store(w, Ordering::Relaxed);
        }
        fence(Ordering::Release);
        seq.store(s.wrapping_add(2), Ordering::Release);
        Some(())
    }

    /// Zero entry or cell `i` but for a record's seq (no packet can reach it).
    pub(crate) fn clear(&self, i: u32) -> Option<()> {
        let at = self.at(i)?;
        let size = if self.cells {
            self.layout.cell_size
        } else {
            self.layout.entry_size
        } as usize;
        let first = if self.cells { 0 } else { 8 };
        if !self.cells {
            self.u32_at(at + 4)?.store(0, Ordering::Relaxed);
        }
        for o in (first..size).step_by(8) {
            self.word(at + o)?.store(0, Ordering::Relaxed);
        }
        fence(Ordering::Release);
        Some(())
    }

    /// Write cell `h`'s QER parameters a word at a time (packets read them meanwhile):
    /// the rates first, the first word (gates, QFI, flags) last, so a packet never sees
    /// the flags of the new parameters with the rates of the old.
    pub(crate) fn write_params(&self, h: u32, q: &types::qer_params) -> Option<()> {
        let at = self.at(h)?;
        let octets = bytes(q);
        for k in (1..octets.len() / 8).rev() {
            let w = u64::from_ne_bytes(octets[8 * k..8 * k + 8].try_into().expect("8 octets"));
            self.word(at + 8 * k)?.store(w, Ordering::Relaxed);
        }
        let head = u64::from_ne_bytes(octets[..8].try_into().expect("8 octets"));
        self.word(at)?.store(head, Ordering::Release);
        Some(())
    }

    /// Cell `h`'s parameters as they are (a QER's; a URR cell's owner).
    pub(crate) fn params(&self, h: u32) -> Option<types::qer_params> {
        let at = self.at(h)?;
        let mut b = [0u8; size_of::<types::qer_params>()];
        for (k, w) in b.chunks_mut(8).enumerate() {
            w.copy_from_slice(&self.word(at + 8 * k)?.load(Ordering::Relaxed).to_ne_bytes());
        }
        from_bytes(&b)
    }

    /// Forget cell `h`'s owner (it is freed; packets may still read its rates).
    pub(crate) fn clear_owner(&self, h: u32) -> Option<()> {
        let at = self.at(h)?;
        self.word(at + offset_of!(types::qer_params, seid))?
            .store(0, Ordering::Relaxed);
        Some(())
    }

    /// Entry or cell `i`'s pool as it is now.
    pub(crate) fn pool(&self, i: u32) -> Option<types::pool> {
        let p = self.pool_at(i)?;
        let mut b = [0u8; size_of::<types::pool>()];
        for (k, w) in b.chunks_mut(8).enumerate() {
            w.copy_from_slice(&self.word(p + 8 * k)?.load(Ordering::Relaxed).to_ne_bytes());
        }
        from_bytes(&b)
    }

    /// The pool's quota and threshold words, its epoch and flags (cells).
    pub(crate) fn set_quota(&self, i: u32, octets: i64) -> Option<()> {
        let p = self.pool_at(i)?;
        self.i64_at(p + offset_of!(types::pool, quota))?
            .store(octets, Ordering::SeqCst);
        // A new quota may run out again: upfd will be told.
        self.u32_at(p + offset_of!(types::pool, flags))?
            .fetch_and(!upf::abi::URR_Q_NOTIFIED, Ordering::SeqCst);
        Some(())
    }

    pub(crate) fn set_threshold(&self, i: u32, octets: i64) -> Option<()> {
        let p = self.pool_at(i)?;
        self.i64_at(p + offset_of!(types::pool, threshold))?
            .store(octets, Ordering::SeqCst);
        Some(())
    }

    /// The home URR's flags (SR_URR_QUOTA, SR_URR_THRESHOLD: `set` on, `clear` off) and
    /// epochs in entry `slot`'s record, as a cell's are: outside the record's sequence
    /// lock, because re-arming a threshold is not a rule change and a packet must not be
    /// dropped while upfd does it (a packet reads each field whole). The epochs first:
    /// a packet that sees the new flags sees their epochs.
    pub(crate) fn set_record_urr(&self, slot: u32, set: u16, clear: u16, epoch: u32) -> Option<()> {
        let at = self.at(slot)?;
        self.u32_at(at + offset_of!(types::sess_rec, epoch))?
            .store(epoch, Ordering::SeqCst);
        let f: &AtomicU16 = self.mem.atomic(at + offset_of!(types::sess_rec, flags))?;
        let v = f.load(Ordering::SeqCst);
        f.store((v | set) & !clear, Ordering::SeqCst);
        Some(())
    }

    /// A cell's URR flags (URR_Q_VOLUME, URR_T_ARMED) and epochs.
    pub(crate) fn set_cell_urr(&self, h: u32, flags: u32, epoch: u32) -> Option<()> {
        let p = self.pool_at(h)?;
        self.u32_at(p + offset_of!(types::pool, epoch))?
            .store(epoch, Ordering::SeqCst);
        let f = self.u32_at(p + offset_of!(types::pool, flags))?;
        let keep = f.load(Ordering::SeqCst) & upf::abi::URR_Q_NOTIFIED;
        f.store(keep | flags, Ordering::SeqCst);
        Some(())
    }

    /// The sums of entry or cell `i`'s lanes.
    pub(crate) fn lane_sums(&self, i: u32) -> Option<LaneSums> {
        let base = self.lanes_at(i)?;
        let mut s = LaneSums::default();
        let mut first: Option<u32> = None;
        let mut last: Option<u32> = None;
        for k in 0..self.layout.lanes as usize {
            let l = base + k * layout::LINE;
            let w = |o: usize| -> Option<u64> { Some(self.word(l + o)?.load(Ordering::Relaxed)) };
            for d in 0..2 {
                s.packets[d] += w(offset_of!(types::lane, packets) + 8 * d)?;
                s.bytes[d] += w(offset_of!(types::lane, bytes) + 8 * d)?;
            }
            let f = self
                .u32_at(l + offset_of!(types::lane, first))?
                .load(Ordering::Relaxed);
            let t = self
                .u32_at(l + offset_of!(types::lane, last))?
                .load(Ordering::Relaxed);
            // Lane times wrap (32 bits): the earliest and latest by distance from a
            // common reference, the last packet of any lane.
            if f != 0 {
                first = Some(match first {
                    Some(x) if (f.wrapping_sub(x) as i32) >= 0 => x,
                    _ => f,
                });
            }
            if t != 0 {
                last = Some(match last {
                    Some(x) if (t.wrapping_sub(x) as i32) <= 0 => x,
                    _ => t,
                });
            }
        }
        s.first = first;
        s.last = last;
        Some(s)
    }

    /// Zero every lane's first-packet time (a report starts a new measurement: the data
    /// path writes it only where it is 0).
    pub(crate) fn clear_first(&self, i: u32) -> Option<()> {
        let base = self.lanes_at(i)?;
        for k in 0..self.layout.lanes as usize {
            self.u32_at(base + k * layout::LINE + offset_of!(types::lane, first))?
                .store(0, Ordering::Relaxed);
        }
        Some(())
    }
}
