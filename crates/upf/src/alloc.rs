//! Allocation of what the UP function hands out: TEIDs for CHOOSE F-TEIDs (TS 29.244
//! clause 5.5.3) and UE IP addresses for CHV4/CHV6 (clause 5.21).

use std::collections::{BTreeMap, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use rand::Rng;

use crate::fastpath::teid_index::TeidIndex;

/// TEIDs are drawn at random from a configured range so that they are unique and not
/// predictable (an off-path attacker cannot guess a live tunnel). With a
/// [`TeidIndex`] they are drawn from its free slots first, so the data path finds them
/// without hashing: a random generation of the slot, never the one it had last, so that
/// a slot's next session does not inherit its previous tunnel.
#[derive(Debug)]
pub struct TeidAllocator {
    lo: u32,
    hi: u32,
    used: HashSet<u32>,
    index: TeidIndex,
    /// Per slot of `index`: the TEID handed out in it last (0: never). The slot is
    /// taken while that TEID is in use.
    last: Vec<u32>,
}

impl TeidAllocator {
    /// TEIDs in `lo..=hi`; 0 is never handed out (it is reserved for Echo and Error
    /// Indication, TS 29.281 clause 5.1).
    pub fn new(lo: u32, hi: u32) -> Self {
        TeidAllocator {
            lo: lo.max(1),
            hi: hi.max(lo.max(1)),
            used: HashSet::new(),
            index: TeidIndex::none(),
            last: Vec::new(),
        }
    }

    /// As [`new`](Self::new), preferring the TEIDs of `index`'s slots (which must be
    /// for the same range).
    pub fn with_index(lo: u32, hi: u32, index: TeidIndex) -> Self {
        TeidAllocator {
            last: vec![0; index.slots() as usize],
            index,
            ..Self::new(lo, hi)
        }
    }

    pub fn capacity(&self) -> u64 {
        (self.hi - self.lo) as u64 + 1
    }

    /// Room for `n` TEIDs in use, allocated now (see `Sessions::reserve`).
    pub fn reserve(&mut self, n: usize) {
        self.used.reserve(n);
    }

    pub fn in_use(&self) -> usize {
        self.used.len()
    }

    /// A fresh TEID, or `None` when the range is (nearly) exhausted.
    pub fn allocate(&mut self) -> Option<u32> {
        self.allocate_for(None)
    }

    /// As [`allocate`](Self::allocate), preferring the TEID whose direct slot is the one
    /// the session's UE IPv4 address has in the downlink table (address mod slots, the
    /// same number of slots): the data path then finds both directions' rules, and the
    /// QER and URR cells upfd puts at that index, from the key alone, and loads them all
    /// at once (docs/benchmarks.md, "aligned slots"). The TEID stays unguessable: the
    /// index is a keyed bijection.
    pub fn allocate_for(&mut self, ue: Option<Ipv4Addr>) -> Option<u32> {
        if self.used.len() as u64 >= self.capacity() {
            return None;
        }
        let mut rng = rand::rng();
        let n = self.index.slots();
        if n > 0 {
            // The UE address's slot, else a random free one while they are not nearly all
            // taken (TEIDs the CP function chose may occupy some too).
            let hint = ue.map(|a| u32::from(a) % n);
            for slot in hint
                .into_iter()
                .chain((0..16).map(|_| rng.random_range(0..n)))
            {
                if let Some(t) = self.fresh_in_slot(slot) {
                    return Some(t);
                }
            }
        }
        // Random probing; the range is kept far from full in practice, and the bound makes
        // a pathological fill fall back to a linear scan.
        for _ in 0..64 {
            let t = rng.random_range(self.lo..=self.hi);
            if self.used.insert(t) {
                self.occupy(t);
                return Some(t);
            }
        }
        let start = rng.random_range(self.lo..=self.hi);
        let span = self.capacity();
        for i in 0..span {
            let t = self.lo + ((start - self.lo) as u64 + i).rem_euclid(span) as u32;
            if self.used.insert(t) {
                self.occupy(t);
                return Some(t);
            }
        }
        None
    }

    /// A TEID of `slot` if the slot is free: a random generation, not its last TEID.
    fn fresh_in_slot(&mut self, slot: u32) -> Option<u32> {
        let s = slot as usize;
        if self.used.contains(&self.last[s]) {
            return None;
        }
        let mut rng = rand::rng();
        let generations = self.index.generations(slot);
        for _ in 0..8 {
            let t = self.index.teid_at(slot, rng.random_range(0..generations));
            if (t != self.last[s] || generations == 1) && self.used.insert(t) {
                self.occupy(t);
                return Some(t);
            }
        }
        None
    }

    /// Note `teid` (just taken) as its slot's TEID if the slot was free.
    fn occupy(&mut self, teid: u32) {
        if let Some(slot) = self.index.slot(teid) {
            let last = &mut self.last[slot as usize];
            if !self.used.contains(last) {
                *last = teid;
            }
        }
    }

    /// Claim a TEID the CP function chose; false if it is taken or out of range.
    pub fn claim(&mut self, teid: u32) -> bool {
        let fresh = teid != 0 && self.used.insert(teid);
        if fresh {
            self.occupy(teid);
        }
        fresh
    }

    /// Give `teid` back; its slot, if it held one, is free again (and keeps it as the
    /// TEID not to hand out next).
    pub fn release(&mut self, teid: u32) {
        self.used.remove(&teid);
    }

    pub fn is_used(&self, teid: u32) -> bool {
        self.used.contains(&teid)
    }

    /// The slot books agree with the TEIDs: each slot's last TEID is one of that slot
    /// (tests and fuzzing).
    pub fn check(&self) -> Result<(), String> {
        self.check_slots(0, usize::MAX).map(|_| ())
    }

    /// Slots in the books ([`TeidAllocator::check_slots`]).
    pub fn slots(&self) -> usize {
        self.last.len()
    }

    /// [`TeidAllocator::check`] for up to `n` slots from `from` (a check in steps):
    /// the next slot to check and the budget left.
    pub fn check_slots(&self, from: usize, n: usize) -> Result<(usize, usize), String> {
        let to = from.saturating_add(n).min(self.last.len()).max(from);
        for (s, &t) in self.last.iter().enumerate().take(to).skip(from) {
            if t != 0 && self.index.slot(t) != Some(s as u32) {
                return Err(format!("slot {s} holds TEID {t:#x} of another slot"));
            }
        }
        Ok((to, n - (to - from)))
    }
}

/// A UE address pool: the free addresses of a prefix, handed out lowest first.
#[derive(Debug)]
struct Pool {
    net: IpNet,
    next: u128,
    free: Vec<IpAddr>,
    used: Taken,
}

/// The addresses of a pool in use, by their offset from the prefix's first address: a
/// bit each for the first [`Taken::BITS`] offsets (a /8 at most: 2 MiB, grown as the
/// pool is used), beyond that a set (IPv6 prefixes of more). A million addresses cost
/// 128 KiB instead of a hash set's 38 MB, and the set never doubles while an SMF waits
/// (issue 28: a million sessions' table doubling stalled an establishment).
#[derive(Debug, Default)]
struct Taken {
    bits: Vec<u64>,
    beyond: HashSet<u128>,
    count: usize,
}

impl Taken {
    const BITS: u128 = 1 << 24;

    /// Mark `i` taken: false if it was already.
    fn insert(&mut self, i: u128) -> bool {
        let new = if i < Self::BITS {
            let (w, b) = ((i / 64) as usize, i % 64);
            if w >= self.bits.len() {
                // Amortised as any Vec's growth: the pool is mostly used from its start.
                self.bits.resize(w + 1, 0);
            }
            let was = self.bits[w] & (1 << b) != 0;
            self.bits[w] |= 1 << b;
            !was
        } else {
            self.beyond.insert(i)
        };
        self.count += usize::from(new);
        new
    }

    /// Mark `i` free: false if it was not taken.
    fn remove(&mut self, i: u128) -> bool {
        let was = if i < Self::BITS {
            let (w, b) = ((i / 64) as usize, i % 64);
            match self.bits.get_mut(w) {
                Some(x) if *x & (1 << b) != 0 => {
                    *x &= !(1 << b);
                    true
                }
                _ => false,
            }
        } else {
            self.beyond.remove(&i)
        };
        self.count -= usize::from(was);
        was
    }

    fn len(&self) -> usize {
        self.count
    }
}

impl Pool {
    fn new(net: IpNet) -> Self {
        Pool {
            net,
            next: 0,
            free: Vec::new(),
            used: Taken::default(),
        }
    }

    /// `a`'s offset from the prefix's first address (`a` is in the prefix).
    fn offset(&self, a: IpAddr) -> u128 {
        match (self.net, a) {
            (IpNet::V4(n), IpAddr::V4(a)) => u128::from(u32::from(a) - u32::from(n.network())),
            (IpNet::V6(n), IpAddr::V6(a)) => u128::from(a) - u128::from(n.network()),
            _ => u128::MAX,
        }
    }

    fn nth(&self, i: u128) -> Option<IpAddr> {
        match self.net {
            IpNet::V4(n) => {
                let base = u32::from(n.network()) as u128;
                let size = 1u128 << (32 - n.prefix_len());
                // Skip the network and broadcast addresses of IPv4 pools.
                let i = i + 1;
                (i < size.saturating_sub(1)).then(|| IpAddr::V4(Ipv4Addr::from((base + i) as u32)))
            }
            IpNet::V6(n) => {
                // One /64 per UE would be right for SLAAC; here an address per UE (/128).
                let base = u128::from(n.network());
                let bits = 128 - n.prefix_len() as u32;
                let size = if bits >= 128 {
                    u128::MAX
                } else {
                    1u128 << bits
                };
                let i = i + 1;
                (i < size).then(|| IpAddr::V6(Ipv6Addr::from(base + i)))
            }
        }
    }

    /// Take `a` (in the prefix): false if it is taken.
    fn take(&mut self, a: IpAddr) -> bool {
        let i = self.offset(a);
        self.used.insert(i)
    }

    fn allocate(&mut self) -> Option<IpAddr> {
        while let Some(a) = self.free.pop() {
            if self.take(a) {
                return Some(a);
            }
        }
        loop {
            let a = self.nth(self.next)?;
            self.next += 1;
            if self.take(a) {
                return Some(a);
            }
        }
    }

    fn release(&mut self, a: IpAddr) -> bool {
        if self.used.remove(self.offset(a)) {
            self.free.push(a);
            true
        } else {
            false
        }
    }
}

/// UE IP pools per network instance (or DNN), each with an IPv4 and/or IPv6 prefix.
#[derive(Debug, Default)]
pub struct UeIpPools {
    pools: BTreeMap<String, (Option<Pool>, Option<Pool>)>,
}

impl UeIpPools {
    /// Add a prefix to the pool of `network_instance` ("" is the default pool, used when a
    /// PDI names no network instance or one without a pool).
    pub fn add(&mut self, network_instance: &str, net: IpNet) {
        let e = self.pools.entry(network_instance.to_string()).or_default();
        match net {
            IpNet::V4(_) => e.0 = Some(Pool::new(net)),
            IpNet::V6(_) => e.1 = Some(Pool::new(net)),
        }
    }

    pub fn add_v4(&mut self, ni: &str, net: Ipv4Net) {
        self.add(ni, IpNet::V4(net))
    }

    pub fn add_v6(&mut self, ni: &str, net: Ipv6Net) {
        self.add(ni, IpNet::V6(net))
    }

    fn pool(&mut self, ni: &str) -> Option<&mut (Option<Pool>, Option<Pool>)> {
        if self.pools.contains_key(ni) {
            self.pools.get_mut(ni)
        } else {
            self.pools.get_mut("")
        }
    }

    /// Whether the configuration names `ni` in a pool of its own.
    pub fn has_own(&self, ni: &str) -> bool {
        self.pools.contains_key(ni)
    }

    /// The pool an allocation of that IP version for `ni` draws from: `ni`'s own if
    /// the configuration names `ni`, else the default one (""), whether or not it has a
    /// prefix of that version. Some(name) if it has one, None if not.
    pub fn pool_for(&self, ni: &str, v6: bool) -> Option<&str> {
        let (name, e) = match self.pools.get_key_value(ni) {
            Some(x) => x,
            None => self.pools.get_key_value("")?,
        };
        let has = if v6 { e.1.is_some() } else { e.0.is_some() };
        has.then_some(name.as_str())
    }

    pub fn allocate_v4(&mut self, ni: &str) -> Option<Ipv4Addr> {
        match self.pool(ni)?.0.as_mut()?.allocate()? {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(_) => None,
        }
    }

    pub fn allocate_v6(&mut self, ni: &str) -> Option<Ipv6Addr> {
        match self.pool(ni)?.1.as_mut()?.allocate()? {
            IpAddr::V6(a) => Some(a),
            IpAddr::V4(_) => None,
        }
    }

    /// Take a given address (a session restored after a restart): false if it is in no
    /// pool or taken.
    pub fn claim(&mut self, a: IpAddr) -> bool {
        for (v4, v6) in self.pools.values_mut() {
            let p = if a.is_ipv4() { v4 } else { v6 };
            if let Some(p) = p {
                if p.net.contains(&a) {
                    return p.take(a);
                }
            }
        }
        false
    }

    /// Return an address to whichever pool holds it.
    pub fn release(&mut self, a: IpAddr) {
        for (v4, v6) in self.pools.values_mut() {
            let p = if a.is_ipv4() { v4 } else { v6 };
            if let Some(p) = p {
                if p.net.contains(&a) && p.release(a) {
                    return;
                }
            }
        }
    }

    pub fn in_use(&self) -> usize {
        self.pools
            .values()
            .map(|(a, b)| {
                a.as_ref().map_or(0, |p| p.used.len()) + b.as_ref().map_or(0, |p| p.used.len())
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn teids_are_unique_and_in_range() {
        let mut a = TeidAllocator::new(100, 1100);
        let mut seen = HashSet::new();
        for _ in 0..1001 {
            let t = a.allocate().unwrap();
            assert!((100..=1100).contains(&t));
            assert!(seen.insert(t));
        }
        assert_eq!(a.allocate(), None);
        a.release(500);
        assert_eq!(a.allocate(), Some(500));
    }

    #[test]
    fn teids_come_from_the_index_slots_until_they_run_out() {
        let ix = TeidIndex::seeded(1, u32::MAX, 100, 3);
        let mut a = TeidAllocator::with_index(1, u32::MAX, ix);
        // 16 random probes miss when 30 % of the slots are taken with p = 0.3^16.
        let v: Vec<u32> = (0..30).map(|_| a.allocate().unwrap()).collect();
        let slots: HashSet<u32> = v.iter().map(|t| ix.slot(*t).unwrap()).collect();
        assert_eq!(slots.len(), 30, "each in a slot of its own: {v:?}");
        // Past the slots, TEIDs still come, from the rest of the range (where some share
        // a slot, which the data path then leaves to its hash table).
        let more: Vec<u32> = (0..200).map(|_| a.allocate().unwrap()).collect();
        let slots: HashSet<u32> = v.iter().chain(&more).filter_map(|t| ix.slot(*t)).collect();
        assert_eq!(slots.len(), 100, "every slot used");
        let all: HashSet<u32> = v.iter().chain(&more).copied().collect();
        assert_eq!(all.len(), 230, "unique");
    }

    #[test]
    fn a_ue_address_picks_the_teid_of_its_slot_while_free() {
        let ix = TeidIndex::seeded(1, u32::MAX, 100, 5);
        let mut a = TeidAllocator::with_index(1, u32::MAX, ix);
        let ue = Ipv4Addr::new(10, 45, 0, 7);
        let slot = u32::from(ue) % 100;
        let t = a.allocate_for(Some(ue)).unwrap();
        assert_eq!(ix.slot(t), Some(slot));
        // Taken: another free TEID, never the same one twice.
        let u = a.allocate_for(Some(ue)).unwrap();
        assert_ne!(u, t);
        // Freed, the slot is the address's again, with another of its TEIDs: a gNB still
        // sending on the old tunnel does not reach the next session of that address.
        let mut seen = HashSet::from([t]);
        let mut prev = t;
        for _ in 0..50 {
            a.release(prev);
            let n = a.allocate_for(Some(ue)).unwrap();
            assert_eq!(ix.slot(n), Some(slot));
            assert_ne!(n, prev, "the slot's last TEID is not handed out again");
            a.check().unwrap();
            seen.insert(n);
            prev = n;
        }
        assert!(seen.len() > 40, "random generations: {}", seen.len());
        // Without direct slots the address changes nothing.
        let mut plain = TeidAllocator::new(1, 10);
        let v: HashSet<u32> = (0..10)
            .map(|_| plain.allocate_for(Some(ue)).unwrap())
            .collect();
        assert_eq!(v.len(), 10);
    }

    #[test]
    fn slot_books_hold_through_random_allocations_claims_and_releases() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let ix = TeidIndex::seeded(1, 4096, 64, 2);
        let mut a = TeidAllocator::with_index(1, 4096, ix);
        let mut held: Vec<u32> = Vec::new();
        for step in 0..20_000 {
            match rng.random_range(0..10) {
                0..=3 => {
                    let ue = Ipv4Addr::from(0x0a2d_0000 + rng.random_range(0..200u32));
                    held.extend(a.allocate_for(Some(ue)));
                }
                4 => held.extend(a.allocate()),
                5 => {
                    let t = rng.random_range(1..=4096);
                    if a.claim(t) {
                        held.push(t);
                    }
                }
                _ if !held.is_empty() => {
                    let t = held.swap_remove(rng.random_range(0..held.len()));
                    a.release(t);
                }
                _ => {}
            }
            assert_eq!(a.in_use(), held.len(), "step {step}");
            a.check().unwrap_or_else(|e| panic!("step {step}: {e}"));
        }
    }

    #[test]
    fn teids_are_not_sequential() {
        let mut a = TeidAllocator::new(1, u32::MAX);
        let v: Vec<u32> = (0..8).map(|_| a.allocate().unwrap()).collect();
        let sequential = v.windows(2).all(|w| w[1] == w[0].wrapping_add(1));
        assert!(!sequential, "{v:?}");
        assert!(!a.claim(v[0]));
        assert!(!a.claim(0));
    }

    #[test]
    fn ue_pools() {
        let mut p = UeIpPools::default();
        p.add("internet", "10.45.0.0/30".parse().unwrap());
        p.add("", "10.99.0.0/24".parse().unwrap());
        p.add("internet", "2001:db8::/64".parse().unwrap());
        assert_eq!(p.allocate_v4("internet"), Some(Ipv4Addr::new(10, 45, 0, 1)));
        assert_eq!(p.allocate_v4("internet"), Some(Ipv4Addr::new(10, 45, 0, 2)));
        assert_eq!(
            p.allocate_v4("internet"),
            None,
            "a /30 has two host addresses"
        );
        p.release(IpAddr::V4(Ipv4Addr::new(10, 45, 0, 1)));
        assert_eq!(p.allocate_v4("internet"), Some(Ipv4Addr::new(10, 45, 0, 1)));
        assert_eq!(p.allocate_v4("ims"), Some(Ipv4Addr::new(10, 99, 0, 1)));
        assert_eq!(
            p.allocate_v6("internet"),
            Some("2001:db8::1".parse().unwrap())
        );
        assert_eq!(p.allocate_v6("ims"), None);
        assert_eq!(p.in_use(), 4);
    }

    /// Claims (restored sessions, addresses the SMF chose) anywhere in a prefix: in the
    /// bits, past them (an IPv6 /64), at its first address; each address once; sequential
    /// allocation steps over claimed addresses; releases free exactly what was taken.
    #[test]
    fn pool_addresses_are_taken_once_wherever_they_are() {
        let mut p = UeIpPools::default();
        p.add("", "10.64.0.0/10".parse().unwrap());
        p.add("", "2001:db8::/64".parse().unwrap());
        let v4 = |s: &str| IpAddr::V4(s.parse().unwrap());
        let v6 = |s: &str| IpAddr::V6(s.parse().unwrap());
        let far = v6("2001:db8::ffff:ffff:ffff");
        for a in [v4("10.64.0.2"), v4("10.127.255.254"), v4("10.64.0.0"), far] {
            assert!(p.claim(a), "{a}");
            assert!(!p.claim(a), "{a} twice");
        }
        assert!(!p.claim(v4("10.128.0.1")), "outside every pool");
        assert_eq!(p.allocate_v4(""), Some(Ipv4Addr::new(10, 64, 0, 1)));
        assert_eq!(
            p.allocate_v4(""),
            Some(Ipv4Addr::new(10, 64, 0, 3)),
            "10.64.0.2 is claimed"
        );
        assert_eq!(p.in_use(), 6);
        p.release(far);
        p.release(far);
        p.release(v4("10.127.255.254"));
        p.release(v4("10.100.0.1"));
        assert_eq!(p.in_use(), 4);
        assert!(p.claim(far) && p.claim(v4("10.127.255.254")));
        // A million taken and given back leave nothing taken.
        let all: Vec<Ipv4Addr> = (0..1_000_000).map(|_| p.allocate_v4("").unwrap()).collect();
        assert_eq!(p.in_use(), 1_000_006);
        for a in &all {
            p.release(IpAddr::V4(*a));
        }
        assert_eq!(p.in_use(), 6);
    }
}
