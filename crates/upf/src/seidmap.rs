//! Hash maps keyed by SEID (and SEID + rule ID). SEIDs are this UP function's own,
//! drawn at random (`Sessions::new_seid`), so the key needs no SipHash to spread or to
//! resist chosen keys: one folded multiply does, with a per-process seed. At a million
//! sessions these maps take several lookups per request, and SipHash was a visible part
//! of an establishment (docs/benchmarks.md, establishment profile).

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};

/// A map keyed by SEID, or by anything that hashes as integers (SEID + rule ID).
pub type SeidMap<K, V> = HashMap<K, V, SeidHash>;
/// A set of SEIDs.
pub type SeidSet = HashSet<u64, SeidHash>;

const K: u64 = 0x9e37_79b9_7f4a_7c15;

/// Builds [`SeidHasher`]s with this process's seed.
#[derive(Clone, Copy, Debug)]
pub struct SeidHash(u64);

impl Default for SeidHash {
    fn default() -> Self {
        use std::sync::OnceLock;
        static SEED: OnceLock<u64> = OnceLock::new();
        SeidHash(*SEED.get_or_init(rand::random))
    }
}

impl BuildHasher for SeidHash {
    type Hasher = SeidHasher;
    fn build_hasher(&self) -> SeidHasher {
        SeidHasher(self.0)
    }
}

/// Folded multiply: both halves of the 128-bit product mixed, so the bucket index (low
/// bits) and hashbrown's tag (high bits) both depend on every key bit.
#[derive(Clone, Copy, Debug)]
pub struct SeidHasher(u64);

#[inline]
fn fold(a: u64, b: u64) -> u64 {
    let p = (a as u128).wrapping_mul(b as u128);
    (p as u64) ^ ((p >> 64) as u64)
}

impl Hasher for SeidHasher {
    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = fold(self.0 ^ x, K);
    }
    #[inline]
    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64);
    }
    #[inline]
    fn write_u16(&mut self, x: u16) {
        self.write_u64(x as u64);
    }
    #[inline]
    fn write_u8(&mut self, x: u8) {
        self.write_u64(x as u64);
    }
    #[inline]
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
        self.write_usize(bytes.len());
    }
    #[inline]
    fn finish(&self) -> u64 {
        fold(self.0, K ^ 0x5851_f42d_4c95_7f2d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_consecutive_keys_over_buckets_and_tags() {
        let b = SeidHash::default();
        let mut low = HashSet::new();
        let mut high = HashSet::new();
        for k in 0u64..4096 {
            let h = b.hash_one(k);
            low.insert(h & 4095);
            high.insert(h >> 57);
        }
        // 4096 keys into 4096 buckets: a random function fills ~63 % of them.
        assert!(low.len() > 2400, "{}", low.len());
        assert_eq!(high.len(), 128);
        assert_ne!(b.hash_one((1u64, 2u32)), b.hash_one((2u64, 1u32)));
    }

    #[test]
    fn a_map_keeps_what_it_is_given() {
        let mut m: SeidMap<(u64, u32), u32> = SeidMap::default();
        for i in 0..10_000u64 {
            m.insert((i * 0x1_0000_0001, i as u32), i as u32);
        }
        assert!((0..10_000u64).all(|i| m.get(&(i * 0x1_0000_0001, i as u32)) == Some(&(i as u32))));
        assert_eq!(m.len(), 10_000);
    }
}
