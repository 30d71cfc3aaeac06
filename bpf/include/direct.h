/* SPDX-License-Identifier: GPL-2.0 */
/* Rule sets by lookup key: first the direct slot the key maps to (uplink_slots,
 * downlink_slots in upf_maps.h), then the hash table. The uplink slot is a keyed
 * bijection of the TEID's offset in upfd's TEID range, computed as
 * crates/upf/src/fastpath/teid_index.rs does (keep the two in step); the downlink slot
 * is the UE's IPv4 address mod ue_slots (crates/bpf/src/direct.rs). */
#ifndef UPF_DIRECT_H
#define UPF_DIRECT_H

#include "upf_maps.h"
#include "urr.h"

#define NO_SLOT 0xffffffffu

/* Plain loads of QER `qi`'s and URR `ui`'s cells (0: none), so that their cache and
 * TLB misses overlap each other and whatever else is loading, rather than each stalling
 * the atomic instruction that later updates it. */
static __always_inline void touch_cells(const struct upf_config *cfg, __u32 qi, __u32 ui)
{
	if (qi) {
		struct qer *q = bpf_map_lookup_elem(&qers, &qi);

		if (q)
			(void)*(volatile __u8 *)&q->gate_ul;
	}
	if (ui) {
		struct urr_shared *s = urr_shared_of(cfg, ui);
		struct urr_counters *c = urr_counters_of(cfg, ui);

		if (s)
			(void)*(volatile __u32 *)&s->quota_flags;
		if (c)
			(void)*(volatile __u64 *)&c->last_ns;
	}
}

/* upfd puts a session's first QER and URR at its direct slot + 1 when it can
 * (crates/bpf/src/datapath.rs, install): load them now, while the slot is loading,
 * not after it. At a million sessions each is a cache and TLB miss of its own; issued
 * together they overlap. Where they are not there, the loads are wasted, not wrong.
 * A global function: the verifier checks it once, not once per path that calls it. */
__attribute__((noinline)) int touch_home(__u32 slot)
{
	__u32 zero = 0;
	struct upf_config *cfg = bpf_map_lookup_elem(&upf_cfg, &zero);

	if (cfg)
		touch_cells(cfg, slot + 1, slot + 1);
	return 0;
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

/* The slot's rule set if it holds `key`'s. */
static __always_inline struct rule_set *slot_rules(void *map, __u32 slot, __u32 key)
{
	struct slot_entry *e = bpf_map_lookup_elem(map, &slot);

	if (!e || *(volatile __u32 *)&e->key != key)
		return 0;
	/* The rule set is read after its key (upfd stores the key last). */
	asm volatile("" ::: "memory");
	return &e->rs;
}

static __always_inline struct rule_set *uplink_rules(const struct upf_config *cfg, __u32 teid)
{
	__u32 slot = teid_slot(cfg, teid);
	struct rule_set *rs = 0;

	if (slot != NO_SLOT) {
		touch_home(slot);
		rs = slot_rules(&uplink_slots, slot, teid);
	}
	if (!rs) {
		struct teid_key k = { .teid = teid };

		rs = bpf_map_lookup_elem(&uplink, &k);
	}
	return rs;
}

/* By the destination of a packet from the data network: its UE address. */
static __always_inline struct rule_set *downlink_rules(const struct upf_config *cfg,
							const struct flow *f)
{
	struct rule_set *rs = 0;

	if (f->version == 4 && cfg->ue_slots) {
		__u32 a;

		__builtin_memcpy(&a, f->dst, 4);
		__u32 slot = bpf_ntohl(a) % cfg->ue_slots;

		touch_home(slot);
		rs = slot_rules(&downlink_slots, slot, a);
	}
	if (!rs) {
		struct ue_key k = {};

		k.family = f->version;
		__builtin_memcpy(k.addr, f->dst, 16);
		rs = bpf_map_lookup_elem(&downlink, &k);
	}
	return rs;
}

#endif
