//! Rule sets in direct slots: with a million sessions a hash lookup costs the XDP
//! program two cache and TLB misses (bucket, then element), an array access one. Uplink
//! keys are TEIDs, whose slot upfd's allocator encodes in them (upf::fastpath::teid_index);
//! downlink keys are UE IPv4 addresses, in slot `address mod slots`, so a pool's
//! consecutive addresses never collide. A key with no slot, or whose slot another key
//! holds, stays in the hash table (`uplink`, `downlink`): the data path looks in the slot
//! first and checks its key (bpf/include/direct.h).
//!
//! A hash update replaces the element atomically; a slot is rewritten in place, so a
//! packet reading it meanwhile could see half of each version. A slot's rule set is
//! therefore only written while its key field is 0 and has been for a grace period (no
//! packet still reads it), and the key is stored last. Changing the rules of a key in its
//! slot puts the new rule set in the hash table and clears the slot's key, so packets
//! switch to the new rules at once; once the grace period has passed, [`settle`] moves it
//! back into the slot and out of the hash table.
//!
//! [`settle`]: DirectTable::settle

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags, MapMut};
use upf::fastpath::teid_index::TeidIndex;
use upf::fastpath::FastPathError;

use crate::mem::{bytes, from_bytes, io, MapMemory};
use crate::upf::{types, UpfMaps};

/// How keys find their slots.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Keying {
    /// Uplink: TEIDs, slot by the TEID index (host order key).
    Teid(TeidIndex),
    /// Downlink: UE IPv4 addresses (key: the octets in network order, read as a
    /// native u32, as the data path sees them), slot = address mod `slots`.
    UeV4 { slots: u32 },
}

impl Keying {
    fn slots(&self) -> u32 {
        match self {
            Keying::Teid(ix) => ix.slots(),
            Keying::UeV4 { slots } => *slots,
        }
    }

    fn slot(&self, key: u32) -> Option<u32> {
        match self {
            Keying::Teid(ix) => ix.slot(key),
            Keying::UeV4 { slots } => (*slots > 0 && key != 0).then(|| u32::from_be(key) % slots),
        }
    }
}

/// The `downlink` hash table's key of a UE address.
pub(crate) fn ue_key(a: IpAddr) -> types::ue_key {
    let mut k = types::ue_key::default();
    match a {
        IpAddr::V4(x) => {
            k.family = 4;
            k.addr[..4].copy_from_slice(&x.octets());
        }
        IpAddr::V6(x) => {
            k.family = 6;
            k.addr.copy_from_slice(&x.octets());
        }
    }
    k
}

/// The key of an IPv4 UE address in a [`Keying::UeV4`] table.
pub(crate) fn ue_v4_key(a: Ipv4Addr) -> u32 {
    u32::from_ne_bytes(a.octets())
}

pub(crate) struct DirectTable {
    keying: Keying,
    mem: MapMemory,
    grace: Duration,
    /// Slot -> the key whose rule set it holds, 0: none (a copy of the slots' key
    /// fields, which only we write; sized once, so it never grows during installs).
    owner: Vec<u32>,
    /// Slots holding a key.
    used: usize,
    /// Keys with a slot whose rule set is in the hash table.
    hashed: HashSet<u32>,
    /// Slots whose key was cleared less than a grace period ago, and when (also in
    /// `cleared_order`, oldest first, to forget them).
    cleared: HashMap<u32, Instant>,
    cleared_order: VecDeque<(Instant, u32)>,
    /// Keys in `hashed` to move into their slot, and from when.
    waiting: VecDeque<(Instant, u32)>,
}

const ENTRY: usize = std::mem::size_of::<types::slot_entry>();
const RS: usize = std::mem::offset_of!(types::slot_entry, rs);

impl DirectTable {
    /// The number of entries to give the map (an array needs one).
    pub(crate) fn entries(keying: &Keying) -> u32 {
        keying.slots().max(1)
    }

    /// The table over `m`, a BPF_F_MMAPABLE array of [`entries`](Self::entries)
    /// `struct slot_entry`.
    pub(crate) fn map(m: &MapMut, keying: Keying, grace: Duration) -> Result<Self, FastPathError> {
        const _: () = assert!(ENTRY % 8 == 0, "array elements are not padded");
        let bytes = Self::entries(&keying) as usize * ENTRY;
        let name = m.name().to_string_lossy();
        Ok(DirectTable {
            keying,
            mem: MapMemory::map(m, bytes, &name)?,
            grace,
            owner: vec![0; keying.slots() as usize],
            used: 0,
            hashed: HashSet::new(),
            cleared: HashMap::new(),
            cleared_order: VecDeque::new(),
            waiting: VecDeque::new(),
        })
    }

    pub(crate) fn keying(&self) -> Keying {
        self.keying
    }

    fn hash<'a>(&self, maps: &'a UpfMaps<'static>) -> &'a MapMut<'static> {
        match self.keying {
            Keying::Teid(_) => &maps.uplink,
            Keying::UeV4 { .. } => &maps.downlink,
        }
    }

    fn hash_key(&self, key: u32) -> Vec<u8> {
        match self.keying {
            Keying::Teid(_) => key.to_ne_bytes().to_vec(),
            Keying::UeV4 { .. } => {
                bytes(&ue_key(IpAddr::V4(Ipv4Addr::from(key.to_ne_bytes())))).to_vec()
            }
        }
    }

    fn hash_put(
        &self,
        maps: &UpfMaps<'static>,
        key: u32,
        v: &types::rule_set,
    ) -> Result<(), FastPathError> {
        self.hash(maps)
            .update(&self.hash_key(key), bytes(v), MapFlags::ANY)
            .map_err(io)
    }

    fn hash_delete(&self, maps: &UpfMaps<'static>, key: u32) {
        let _ = self.hash(maps).delete(&self.hash_key(key));
    }

    /// Whether `key`'s rule set is in its slot (not in the hash table).
    pub(crate) fn in_slot(&self, key: u32) -> bool {
        self.keying
            .slot(key)
            .is_some_and(|s| self.owner[s as usize] == key)
    }

    fn entry(&self, slot: u32) -> *mut u8 {
        assert!(slot < self.keying.slots());
        // SAFETY: in bounds of the mapping (slots * ENTRY <= len).
        unsafe { self.mem.base().add(slot as usize * ENTRY) }
    }

    fn key_word(&self, slot: u32) -> &AtomicU32 {
        // SAFETY: the entry's first field, 8-octet aligned; the data path only reads it.
        unsafe { &*self.entry(slot).cast::<AtomicU32>() }
    }

    fn cool(&self, slot: u32, now: Instant) -> bool {
        self.cleared
            .get(&slot)
            .is_none_or(|t| now.duration_since(*t) >= self.grace)
    }

    fn write(&mut self, slot: u32, key: u32, v: &types::rule_set) {
        // SAFETY: the rule set's octets into the entry; no packet reads them (the slot's
        // key is 0 and has been for a grace period).
        unsafe {
            std::ptr::copy_nonoverlapping(
                (v as *const types::rule_set).cast::<u8>(),
                self.entry(slot).add(RS),
                std::mem::size_of::<types::rule_set>(),
            );
        }
        self.key_word(slot).store(key, Ordering::Release);
        if self.owner[slot as usize] == 0 {
            self.used += 1;
        }
        self.owner[slot as usize] = key;
    }

    fn clear(&mut self, slot: u32, now: Instant) {
        self.key_word(slot).store(0, Ordering::Release);
        if self.owner[slot as usize] != 0 {
            self.used -= 1;
        }
        self.owner[slot as usize] = 0;
        self.cleared.insert(slot, now);
        self.cleared_order.push_back((now, slot));
    }

    /// The rule set installed for `key`, wherever it is.
    pub(crate) fn get(&self, maps: &UpfMaps<'static>, key: u32) -> Option<types::rule_set> {
        if self.in_slot(key) {
            let slot = self.keying.slot(key)?;
            let mut v = types::rule_set::default();
            // SAFETY: the entry's rule set, which only we write.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.entry(slot).add(RS),
                    (&mut v as *mut types::rule_set).cast::<u8>(),
                    std::mem::size_of::<types::rule_set>(),
                );
            }
            return Some(v);
        }
        if self.keying.slot(key).is_some() && !self.hashed.contains(&key) {
            // A key with a slot is in the hash table only if `hashed` says so: no syscall.
            return None;
        }
        let b = self
            .hash(maps)
            .lookup(&self.hash_key(key), MapFlags::ANY)
            .ok()??;
        from_bytes(&b)
    }

    /// Install `key`'s rule set or replace it; packets see the new one from now on.
    pub(crate) fn put(
        &mut self,
        maps: &UpfMaps<'static>,
        key: u32,
        v: &types::rule_set,
        now: Instant,
    ) -> Result<(), FastPathError> {
        let Some(slot) = self.keying.slot(key) else {
            return self.hash_put(maps, key, v);
        };
        match Some(self.owner[slot as usize]).filter(|k| *k != 0) {
            Some(k) if k == key => {
                // Not in place: to the hash table, then the slot stops answering.
                self.hash_put(maps, key, v)?;
                self.hashed.insert(key);
                self.clear(slot, now);
                self.waiting.push_back((now + self.grace, key));
            }
            Some(_) => {
                // Another key's slot: this one stays in the hash table.
                self.hash_put(maps, key, v)?;
                self.hashed.insert(key);
            }
            None if self.cool(slot, now) => {
                self.write(slot, key, v);
                if self.hashed.remove(&key) {
                    self.hash_delete(maps, key);
                }
            }
            None => {
                self.hash_put(maps, key, v)?;
                self.hashed.insert(key);
                self.waiting
                    .push_back((self.cleared[&slot] + self.grace, key));
            }
        }
        Ok(())
    }

    pub(crate) fn delete(&mut self, maps: &UpfMaps<'static>, key: u32, now: Instant) {
        match self.keying.slot(key) {
            Some(slot) => {
                if self.owner[slot as usize] == key {
                    self.clear(slot, now);
                }
                if self.hashed.remove(&key) {
                    self.hash_delete(maps, key);
                }
            }
            None => self.hash_delete(maps, key),
        }
    }

    /// Move rule sets waiting in the hash table into their slots once no packet can
    /// still read what the slot held; forget slots cleared long enough ago.
    pub(crate) fn settle(&mut self, maps: &UpfMaps<'static>, now: Instant) {
        while let Some(&(t, slot)) = self.cleared_order.front() {
            if now.duration_since(t) < self.grace {
                break;
            }
            self.cleared_order.pop_front();
            if self.cleared.get(&slot) == Some(&t) {
                self.cleared.remove(&slot);
            }
        }
        let mut later = Vec::new();
        while let Some(&(ready, key)) = self.waiting.front() {
            if ready > now {
                break;
            }
            self.waiting.pop_front();
            let Some(slot) = self.keying.slot(key) else {
                continue;
            };
            if !self.hashed.contains(&key) || self.owner[slot as usize] != 0 {
                continue;
            }
            if !self.cool(slot, now) {
                later.push((self.cleared[&slot] + self.grace, key));
                continue;
            }
            let Some(v) = self.get(maps, key) else {
                self.hashed.remove(&key);
                continue;
            };
            self.write(slot, key, &v);
            self.hashed.remove(&key);
            self.hash_delete(maps, key);
        }
        self.waiting.extend(later);
    }

    /// (keys in slots, keys with a slot in the hash table, of which waiting to move).
    pub(crate) fn counts(&self) -> (usize, usize, usize) {
        (self.used, self.hashed.len(), self.waiting.len())
    }
}
