//! Direct slots for the TEIDs the UPF allocates. With a million sessions a hash lookup
//! costs the XDP program two cache and TLB misses (bucket, then element); an array
//! indexed by the TEID costs one. So the TEID allocator (`alloc.rs`) hands out TEIDs that
//! are an index in disguise, and the data path (bpf/include/direct.h) recovers the
//! index with a few arithmetic instructions, then checks that the slot holds that TEID.
//! TEIDs the CP function chose itself, and any that fall outside the slots, go to the
//! hash table as before; the mapping only decides where to look first.
//!
//! The mapping is a keyed bijection on the low `bits` bits above `lo`: two multiplications
//! by random odd numbers and two xor-shifts, each invertible modulo 2^bits, plus a random
//! offset, giving `x`; the slot is `x * slots / 2^bits` (one multiplication, no division
//! in the data path). So every TEID of the window has a slot, and each slot has about
//! 2^bits / slots TEIDs, its generations. It is not a cipher, but TEIDs remain unique,
//! spread over the configured range and not guessable from the order of allocation: the
//! allocator picks a random generation of a free slot each time, never the slot's
//! previous TEID, and the key is drawn at random when upfd starts. A session that ends
//! and a new one for the same UE address therefore get different TEIDs (a gNB still
//! sending on the old tunnel does not reach the new session, TS 29.281 clause 5.1).

use rand::{Rng, SeedableRng};

/// The keyed TEID <-> slot mapping shared by the allocator and the data path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TeidIndex {
    lo: u32,
    bits: u32,
    mask: u32,
    shift: u32,
    mul1: u32,
    mul2: u32,
    inv1: u32,
    inv2: u32,
    add: u32,
    slots: u32,
}

/// What the data path needs to compute a slot (upf_config's teid_* fields).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TeidIndexParams {
    pub lo: u32,
    pub mask: u32,
    pub shift: u32,
    pub mul1: u32,
    pub mul2: u32,
    pub add: u32,
    pub slots: u32,
    pub bits: u32,
}

/// The inverse of an odd `m` modulo 2^32 (Newton's iteration doubles the correct bits).
fn inverse(m: u32) -> u32 {
    let mut x = m;
    for _ in 0..5 {
        x = x.wrapping_mul(2u32.wrapping_sub(m.wrapping_mul(x)));
    }
    x
}

impl TeidIndex {
    /// Up to `slots` direct slots for TEIDs in `lo..=hi`, keyed at random.
    pub fn new(lo: u32, hi: u32, slots: u32) -> Self {
        Self::seeded(lo, hi, slots, rand::rng().random())
    }

    /// As [`new`](Self::new) with the key derived from `seed` (tests).
    pub fn seeded(lo: u32, hi: u32, slots: u32, seed: u64) -> Self {
        let lo = lo.max(1);
        let hi = hi.max(lo);
        // The largest power of two that fits in the range (at most 2^31: lo >= 1).
        let size = u64::from(hi - lo) + 1;
        let bits = 63 - size.leading_zeros();
        let mask = ((1u64 << bits) - 1) as u32;
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let mul1 = rng.random::<u32>() | 1;
        let mul2 = rng.random::<u32>() | 1;
        TeidIndex {
            lo,
            bits,
            mask,
            shift: bits.div_ceil(2).max(1),
            mul1,
            mul2,
            inv1: inverse(mul1),
            inv2: inverse(mul2),
            add: rng.random::<u32>() & mask,
            slots: (u64::from(slots).min(1u64 << bits)) as u32,
        }
    }

    /// No direct slots: every TEID goes to the hash table.
    pub fn none() -> Self {
        TeidIndex {
            slots: 0,
            ..Self::seeded(1, 1, 0, 0)
        }
    }

    pub fn slots(&self) -> u32 {
        self.slots
    }

    pub fn params(&self) -> TeidIndexParams {
        TeidIndexParams {
            lo: self.lo,
            mask: self.mask,
            shift: self.shift,
            mul1: self.mul1,
            mul2: self.mul2,
            add: self.add,
            slots: self.slots,
            bits: self.bits,
        }
    }

    /// The slot the data path looks in first for `teid`, if any. Keep in step with
    /// bpf/include/direct.h (`teid_slot`).
    pub fn slot(&self, teid: u32) -> Option<u32> {
        let d = teid.wrapping_sub(self.lo);
        if d & !self.mask != 0 || self.slots == 0 {
            return None;
        }
        let mut x = d.wrapping_mul(self.mul1) & self.mask;
        x ^= x >> self.shift;
        x = x.wrapping_mul(self.mul2) & self.mask;
        x ^= x >> self.shift;
        x = x.wrapping_add(self.add) & self.mask;
        Some(((u64::from(x) * u64::from(self.slots)) >> self.bits) as u32)
    }

    /// The first `x` of `slot`: the smallest with `x * slots / 2^bits == slot`.
    fn first_x(&self, slot: u32) -> u64 {
        (u64::from(slot) << self.bits).div_ceil(u64::from(self.slots))
    }

    /// How many TEIDs have `slot` (< [`slots`](Self::slots)): at least one.
    pub fn generations(&self, slot: u32) -> u32 {
        (self.first_x(slot + 1) - self.first_x(slot)) as u32
    }

    /// The first TEID whose slot is `slot` (< [`slots`](Self::slots)).
    pub fn teid(&self, slot: u32) -> u32 {
        self.teid_at(slot, 0)
    }

    /// The TEID of `slot`'s generation `generation` (< [`generations`](Self::generations)).
    pub fn teid_at(&self, slot: u32, generation: u32) -> u32 {
        debug_assert!(slot < self.slots && generation < self.generations(slot));
        let mut x = (self.first_x(slot) as u32)
            .wrapping_add(generation)
            .wrapping_sub(self.add)
            & self.mask;
        x = self.unshift(x);
        x = x.wrapping_mul(self.inv2) & self.mask;
        x = self.unshift(x);
        x = x.wrapping_mul(self.inv1) & self.mask;
        self.lo + x
    }

    /// The inverse of `x ^= x >> shift` on `bits` bits.
    fn unshift(&self, y: u32) -> u32 {
        let mut x = y;
        for _ in 0..=self.bits / self.shift {
            x = y ^ (x >> self.shift);
        }
        x
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_and_teids_are_inverse_and_stay_in_range() {
        for (lo, hi, slots) in [
            (1, u32::MAX, 1 << 20),
            (1, u32::MAX, 3),
            (100, 1100, 5000),
            (0x4000_0000, 0x4fff_ffff, 70_000),
            (7, 7, 4),
            (5, 6, 4),
        ] {
            for seed in 0..4 {
                let ix = TeidIndex::seeded(lo, hi, slots, seed);
                assert!(ix.slots() <= slots && ix.slots() >= 1, "{ix:?}");
                let mut slots_seen = std::collections::HashSet::new();
                let mut teids_seen = std::collections::HashSet::new();
                let n = ix.slots().min(20_000);
                for s in (0..n).chain(ix.slots() - n..ix.slots()) {
                    let t = ix.teid(s);
                    assert!((lo.max(1)..=hi).contains(&t), "{t} from slot {s}: {ix:?}");
                    assert_eq!(ix.slot(t), Some(s), "{ix:?}");
                    let g = ix.generations(s);
                    assert!(g >= 1);
                    let last = ix.teid_at(s, g - 1);
                    assert!((lo.max(1)..=hi).contains(&last), "{last}: {ix:?}");
                    assert_eq!(ix.slot(last), Some(s), "the last generation: {ix:?}");
                    slots_seen.insert(s);
                    teids_seen.insert(t);
                }
                assert_eq!(
                    teids_seen.len(),
                    slots_seen.len(),
                    "one first TEID per slot"
                );
            }
        }
    }

    #[test]
    fn every_teid_of_the_window_has_a_slot_and_is_one_of_its_generations() {
        let ix = TeidIndex::seeded(1000, 2000, 10, 1);
        assert_eq!(ix.slot(999), None);
        assert_eq!(ix.slot(0), None);
        // 1001 TEIDs: the window is the largest power of two in it, 512.
        assert_eq!(ix.slot(1000 + 512), None, "above the power of two");
        let mut by_slot = vec![std::collections::BTreeSet::new(); 10];
        for t in 1000..1000 + 512 {
            by_slot[ix.slot(t).expect("inside the window") as usize].insert(t);
        }
        for (s, teids) in by_slot.iter().enumerate() {
            let s = s as u32;
            let gens: std::collections::BTreeSet<u32> =
                (0..ix.generations(s)).map(|g| ix.teid_at(s, g)).collect();
            assert_eq!(&gens, teids, "slot {s}");
            assert!(
                (51..=52).contains(&teids.len()),
                "512 / 10 each: {}",
                teids.len()
            );
        }
        assert_eq!(TeidIndex::none().slot(1), None);
    }

    #[test]
    fn consecutive_slots_do_not_give_consecutive_teids() {
        let ix = TeidIndex::seeded(1, u32::MAX, 1 << 20, 9);
        let v: Vec<u32> = (0..16).map(|s| ix.teid(s)).collect();
        assert!(v.windows(2).all(|w| w[1].abs_diff(w[0]) > 1), "{v:?}");
        let other = TeidIndex::seeded(1, u32::MAX, 1 << 20, 10);
        assert_ne!(ix.teid(0), other.teid(0), "the key changes the mapping");
    }
}
