/* SPDX-License-Identifier: GPL-2.0 */
/* Finding a packet's session: its key's slot in sess_pages (include/upf_maps.h), else
 * the key tables. The uplink slot is a keyed bijection of the TEID's offset in upfd's
 * TEID range, computed as crates/upf/src/fastpath/teid_index.rs does (keep the two in
 * step); the downlink slot is the UE's IPv4 address mod ue_slots, the same slots: upfd
 * gives a session the TEID whose slot is its UE address's (crates/upf/src/alloc.rs), so
 * one entry serves both directions. */
#ifndef UPF_SESSION_H
#define UPF_SESSION_H

#include "upf_maps.h"
#include "parse.h"

/* The layout of a page of sess_pages, set by upfd before it loads the programs
 * (crates/bpf/src/layout.rs): read-only globals, which the verifier takes as the
 * constants they are, so every access into a page is checked against its size. */
const volatile __u32 lanes = 1;        /* lanes per entry, 1..LANES_MAX */
const volatile __u32 per_page = 1;     /* entries per page: 4096 / entry size */
const volatile __u32 shared_lanes = 0; /* more CPUs than lanes: lanes are shared */
const volatile __u32 cells_per_page = 1; /* cells per page of `cells`: 4096 / cell size */
/* Not read by the programs: the object and the table sizes upfd loaded them with, which
 * a restarted upfd compares with its own before it reuses them (Datapath::adopt). */
const volatile __u64 build_id = 0;

#define REC_SIZE 256
#define POOL_AT REC_SIZE
#define LANES_AT (REC_SIZE + 64)
#define NO_SLOT 0xffffffffu

static __always_inline __u32 entry_size(void)
{
	return LANES_AT + 64 * lanes;
}


/* The entry of `slot`: its record; 0 if there is none. The offsets are checked as the
 * verifier sees them (bpf_helpers.h barrier_var keeps the compiler from moving the checks). */
static __always_inline struct sess_rec *sess_at(const struct upf_config *cfg, __u32 slot)
{
	if (slot >= cfg->slots)
		return 0;
	__u32 page = ((__u64)slot * cfg->page_mul) >> (cfg->page_shift & 63);
	__u64 off = (__u64)(slot - page * per_page) * entry_size();

	barrier_var(off);
	if (off > PAGE_SIZE_SESS - entry_size())
		return 0;
	struct sess_page *p = bpf_map_lookup_elem(&sess_pages, &page);

	if (!p)
		return 0;
	barrier_var(off);
	return (struct sess_rec *)(p->b + off);
}

static __always_inline struct pool *pool_of(struct sess_rec *r)
{
	return (struct pool *)((__u8 *)r + POOL_AT);
}

/* This CPU's lane number. */
static __always_inline __u32 lane_no(void)
{
	__u32 cpu = bpf_get_smp_processor_id();

	return cpu < lanes ? cpu : cpu % lanes;
}

/* This CPU's lane of the entry at `e` whose lanes start at `lanes_at` and which is
 * `size` octets long. */
static __always_inline struct lane *lane_at(void *e, __u32 lanes_at, __u32 size)
{
	__u64 at = lanes_at + 64 * (__u64)lane_no();

	barrier_var(at);
	if (at > size - 64)
		return 0;
	barrier_var(at);
	return (struct lane *)((__u8 *)e + at);
}

static __always_inline struct lane *lane_of(struct sess_rec *r)
{
	return lane_at(r, LANES_AT, entry_size());
}

static __always_inline __u32 cell_size(void)
{
	return CELL_LANES_AT + 64 * lanes;
}

/* Cold cell `h`: its first octet (the QER's parameters), 0 if there is none. */
static __always_inline void *cell_at(const struct upf_config *cfg, __u32 h)
{
	if (h >= cfg->cells)
		return 0;
	__u32 page = ((__u64)h * cfg->cell_mul) >> (cfg->cell_shift & 63);
	__u64 off = (__u64)(h - page * cells_per_page) * cell_size();

	barrier_var(off);
	if (off > PAGE_SIZE_SESS - cell_size())
		return 0;
	struct sess_page *p = bpf_map_lookup_elem(&cells, &page);

	if (!p)
		return 0;
	barrier_var(off);
	return p->b + off;
}

static __always_inline __u32 teid_slot(const struct upf_config *cfg, __u32 teid)
{
	__u32 mask = cfg->teid_mask;
	__u32 shift = cfg->teid_shift & 31;
	__u32 x = teid - cfg->teid_lo;

	if (x & ~mask)
		return NO_SLOT;
	x = (x * cfg->teid_mul1) & mask;
	x ^= x >> shift;
	x = (x * cfg->teid_mul2) & mask;
	x ^= x >> shift;
	x = (x + cfg->teid_add) & mask;
	/* x * slots / 2^bits: every TEID of the window has a slot, each slot a few
	 * (its generations), found with a multiplication, not a division. */
	if (!cfg->teid_slots)
		return NO_SLOT;
	return (__u32)(((__u64)x * cfg->teid_slots) >> (cfg->teid_bits & 31));
}

/* Copy what the packet will read of record `r` into `head` (its first line), `dir` (the
 * key's line) and `home` (the home QER), consistently: upfd rewrites a record in place,
 * bracketed by odd and even values of seq. 0, or -1 if every try met a write. */
static __always_inline int rec_copy(const struct sess_rec *r, int d, struct sess_rec *to)
{
	int i;

	for (i = 0; i < 3; i++) {
		__u32 s1 = *(volatile __u32 *)&r->seq;

		if (s1 & 1)
			continue;
		asm volatile("" ::: "memory");
		__builtin_memcpy(to, r, 64);
		if (d)
			__builtin_memcpy(&to->dir[1], &r->dir[1], sizeof(struct dir_rules));
		else
			__builtin_memcpy(&to->dir[0], &r->dir[0], sizeof(struct dir_rules));
		__builtin_memcpy(&to->home, &r->home, sizeof(struct qer_params));
		asm volatile("" ::: "memory");
		if (*(volatile __u32 *)&r->seq == s1)
			return 0;
	}
	return -1;
}

#endif
