//! Where things are in the data path's page arrays (bpf/include/upf_maps.h,
//! include/session.h): a session's entry in `sess_pages` (record, pool, lanes) and a cold
//! QER or URR cell in `cells` (parameters, pool, lanes), each inside one 4096-octet page.
//! The programs read the layout from read-only globals set before they load; the
//! division of a slot by the entries per page is a multiplication and a shift
//! ([`Reciprocal`]), exact for every slot.

use upf::abi;

/// Octets of a page of `sess_pages` or `cells`.
pub const PAGE: usize = abi::PAGE_SIZE_SESS as usize;
/// Octets of a session's record, and where its pool and lanes start.
pub const REC: usize = 256;
pub const POOL_AT: usize = REC;
pub const LANES_AT: usize = REC + 64;
/// Where a cell's pool and lanes start (its first line: a QER's parameters).
pub const CELL_POOL_AT: usize = 64;
pub const CELL_LANES_AT: usize = 128;
/// Octets of a pool or a lane.
pub const LINE: usize = 64;

/// x / d as (x * mul) >> shift, exact for every x below the limit it was made for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reciprocal {
    pub mul: u32,
    pub shift: u32,
}

impl Reciprocal {
    /// For divisor `d` (1..=64) and every x < 2^27.
    pub fn new(d: u32) -> Self {
        let d = d.clamp(1, 64);
        // s = 27 + ceil(log2 d): mul = ceil(2^s / d) < 2^28, x * mul < 2^55, and the
        // error of the rounding stays below 1/d for every x < 2^27.
        let shift = 27 + (32 - (d - 1).leading_zeros());
        let mul = ((1u64 << shift).div_ceil(u64::from(d))) as u32;
        Reciprocal { mul, shift }
    }

    pub fn div(&self, x: u32) -> u32 {
        ((u64::from(x) * u64::from(self.mul)) >> self.shift) as u32
    }
}

/// The layout of the page arrays for a number of session slots and cells on a machine
/// of `ncpus` possible CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Lanes per entry or cell: one per CPU, at most LANES_MAX.
    pub lanes: u32,
    /// More CPUs than lanes: the lanes are shared, with atomic instructions, no leases.
    pub shared: bool,
    pub entry_size: u32,
    pub per_page: u32,
    pub slots: u32,
    pub pages: u32,
    pub page_div: Reciprocal,
    pub cell_size: u32,
    pub cells_per_page: u32,
    pub cells: u32,
    pub cell_pages: u32,
    pub cell_div: Reciprocal,
}

impl Layout {
    /// At least `slots` session entries (all of `pages` pages are usable) and `cells` cold
    /// cells (cell 0 is never used: 0 means none).
    pub fn new(slots: u32, cells: u32, ncpus: usize) -> Self {
        let lanes = (ncpus.max(1) as u32).min(abi::LANES_MAX);
        let entry_size = (LANES_AT as u32) + LINE as u32 * lanes;
        let per_page = PAGE as u32 / entry_size;
        let pages = slots.max(1).div_ceil(per_page);
        let cell_size = CELL_LANES_AT as u32 + LINE as u32 * lanes;
        let cells_per_page = PAGE as u32 / cell_size;
        let cell_pages = cells.saturating_add(1).max(1).div_ceil(cells_per_page);
        Layout {
            lanes,
            shared: ncpus > lanes as usize,
            entry_size,
            per_page,
            slots: pages * per_page,
            pages,
            page_div: Reciprocal::new(per_page),
            cell_size,
            cells_per_page,
            cells: cell_pages * cells_per_page,
            cell_pages,
            cell_div: Reciprocal::new(cells_per_page),
        }
    }

    /// The octet where slot `slot`'s entry starts in the mapping of `sess_pages`.
    pub fn entry_at(&self, slot: u32) -> Option<usize> {
        (slot < self.slots).then(|| {
            let page = self.page_div.div(slot);
            page as usize * PAGE + (slot - page * self.per_page) as usize * self.entry_size as usize
        })
    }

    /// The octet where cell `h` starts in the mapping of `cells`.
    pub fn cell_at(&self, h: u32) -> Option<usize> {
        (h < self.cells).then(|| {
            let page = self.cell_div.div(h);
            page as usize * PAGE
                + (h - page * self.cells_per_page) as usize * self.cell_size as usize
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reciprocals_divide_exactly() {
        for d in 1..=64u32 {
            let r = Reciprocal::new(d);
            assert!(u64::from(r.mul) < 1 << 32, "{d}");
            for x in (0..(1u32 << 20)).chain((1u32 << 27) - 4096..(1u32 << 27)) {
                assert_eq!(r.div(x), x / d, "{x} / {d}");
            }
        }
    }

    #[test]
    fn entries_and_cells_stay_in_their_pages() {
        for ncpus in [1, 2, 3, 4, 8, 9, 64, 256] {
            let l = Layout::new(1_000_000, 100_000, ncpus);
            assert!(l.per_page >= 1 && l.per_page * l.entry_size <= PAGE as u32);
            assert!(l.cells_per_page >= 1 && l.cells_per_page * l.cell_size <= PAGE as u32);
            assert!(l.slots >= 1_000_000 && l.cells > 100_000);
            for s in [0, 1, l.per_page - 1, l.per_page, l.slots - 1] {
                let at = l.entry_at(s).unwrap();
                assert_eq!(at / PAGE, (at + l.entry_size as usize - 1) / PAGE, "{s}");
            }
            assert_eq!(l.entry_at(l.slots), None);
            assert_eq!(l.shared, ncpus > abi::LANES_MAX as usize);
        }
        // Two CPUs: 448 octets an entry, 9 to a page.
        let l = Layout::new(9, 0, 2);
        assert_eq!((l.entry_size, l.per_page, l.pages), (448, 9, 1));
    }
}
