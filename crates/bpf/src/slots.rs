//! Free-list allocation of table indices (session entries, cells, application SDF
//! chunks). Index 0 is never handed out where 0 means "none" in the tables' references
//! (cells, chunks); session entries start at 0. A freed index cools
//! for a grace period before it is handed out again, so a packet in flight never reads
//! a reused entry.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Grace period before a freed slot is reused.
pub(crate) const GRACE: Duration = Duration::from_millis(50);

/// Free-list allocator of table slots from `first` (1: slot 0 is never handed out). A slot can also be
/// asked for by index ([`take_at`](Self::take_at), single slots only): `used` marks
/// the slots taken or cooling, so the free list and `next` skip those.
#[derive(Debug)]
pub(crate) struct Slots {
    /// The lowest index handed out (0 or 1).
    first: u32,
    next: u32,
    max: u32,
    free: Vec<u32>,
    /// Free runs of length 1..=8 for SDF blocks.
    runs: [Vec<u32>; 9],
    cooling: VecDeque<(Instant, u32, u32)>,
    used: Vec<u64>,
    in_use: u64,
}

impl Slots {
    pub(crate) fn new(max: u32) -> Self {
        Self::from(1, max)
    }

    /// Indices `first..max` (`first` 0 where 0 is a valid index).
    pub(crate) fn from(first: u32, max: u32) -> Self {
        Slots {
            first,
            next: first,
            max,
            free: Vec::new(),
            runs: Default::default(),
            cooling: VecDeque::new(),
            used: vec![0; (max as usize).div_ceil(64)],
            in_use: 0,
        }
    }

    fn is_used(&self, i: u32) -> bool {
        self.used[i as usize / 64] & (1 << (i % 64)) != 0
    }

    fn mark(&mut self, start: u32, n: u32, on: bool) {
        for i in start..start + n {
            let w = &mut self.used[i as usize / 64];
            if on {
                *w |= 1 << (i % 64);
            } else {
                *w &= !(1 << (i % 64));
            }
        }
        if on {
            self.in_use += u64::from(n);
        } else {
            self.in_use -= u64::from(n);
        }
    }

    pub(crate) fn warm(&mut self, now: Instant) {
        while let Some((t, start, n)) = self.cooling.front().copied() {
            if now.duration_since(t) < GRACE {
                break;
            }
            self.cooling.pop_front();
            self.mark(start, n, false);
            if n == 1 {
                self.free.push(start);
            } else {
                self.runs[n as usize].push(start);
            }
        }
    }

    pub(crate) fn take(&mut self, n: u32) -> Option<u32> {
        if n == 1 {
            // Entries taken by index since they were freed are skipped.
            while let Some(i) = self.free.pop() {
                if !self.is_used(i) {
                    self.mark(i, 1, true);
                    return Some(i);
                }
            }
        } else if let Some(i) = self.runs[n as usize].pop() {
            self.mark(i, n, true);
            return Some(i);
        }
        loop {
            if self.next + n > self.max {
                return None;
            }
            let i = self.next;
            self.next += 1;
            if (i..i + n).all(|j| !self.is_used(j)) {
                self.next = i + n;
                self.mark(i, n, true);
                return Some(i);
            }
            // Too short a gap before a slot taken by index: free singles.
            if !self.is_used(i) {
                self.free.push(i);
            }
        }
    }

    /// Slot `i` if it is free (not taken, not cooling).
    pub(crate) fn take_at(&mut self, i: u32) -> bool {
        if i < self.first || i >= self.max || self.is_used(i) {
            return false;
        }
        self.mark(i, 1, true);
        true
    }

    /// Free `n` slots from `start` once they cooled (from `now`).
    pub(crate) fn release(&mut self, start: u32, n: u32, now: Instant) {
        if start >= self.first && n != 0 {
            self.cooling.push_back((now, start, n));
        }
    }

    /// Slots taken or cooling.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> u64 {
        self.in_use
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_taken_by_index_are_never_handed_out_twice() {
        let mut s = Slots::new(10);
        assert_eq!(s.in_use(), 0);
        assert!(s.take_at(3));
        assert!(!s.take_at(3), "taken");
        assert!(
            !s.take_at(0) && !s.take_at(10),
            "0 and past the end are never slots"
        );
        // The sequential ones step over slot 3.
        let seq: Vec<u32> = (0..8).map(|_| s.take(1).unwrap()).collect();
        assert_eq!(seq, [1, 2, 4, 5, 6, 7, 8, 9]);
        assert_eq!(s.take(1), None);
        assert_eq!(s.in_use(), 9);
        // Released slots cool before they are free, by index or from the list.
        let t0 = Instant::now();
        s.release(5, 1, t0);
        assert!(!s.take_at(5));
        s.warm(t0 + GRACE);
        assert_eq!(s.in_use(), 8);
        assert!(s.take_at(5), "free again");
        // The free list still names 5: it is skipped, not handed out a second time.
        assert_eq!(s.take(1), None);
        s.release(5, 1, t0);
        s.warm(t0 + GRACE);
        assert_eq!(s.take(1), Some(5));
        assert_eq!(s.take(1), None);
    }

    #[test]
    fn runs_step_over_slots_taken_by_index() {
        let mut s = Slots::new(20);
        assert!(s.take_at(3));
        assert_eq!(s.take(4), Some(4));
        assert_eq!(s.take(2), Some(8));
        assert_eq!(s.in_use(), 7);
        // The gap it stepped over is not lost: single slots.
        assert_eq!(s.take(1), Some(2));
        assert_eq!(s.take(1), Some(1));
        assert_eq!(s.take(1), Some(10));
    }
}
