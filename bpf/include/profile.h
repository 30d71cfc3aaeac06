/* SPDX-License-Identifier: GPL-2.0 */
/* Where a packet's time goes, by stage (docs/benchmarks.md, data path v2): built only
 * with UPF_BPF_PROFILE set in cargo's environment (crates/bpf/build_bpf.rs adds
 * -DUPF_PROFILE); otherwise prof_mark() is nothing. Each mark adds the time since the
 * previous mark (bpf_ktime_get_ns, itself ~20-40 ns on a VM) to its point's sum in the
 * CPU's `prof` entry; the `lookup_cost` benchmark prints the sums per packet. */
#ifndef UPF_PROFILE_H
#define UPF_PROFILE_H

#include "upf_maps.h"

enum prof_point {
	PROF_START = 0,   /* the entry program starts */
	PROF_FOUND = 1,   /* parsed, session found, record copied */
	PROF_CHECKED = 2, /* source checks, clock: about to call the next stage */
	PROF_APP = 3,     /* classified */
	PROF_PDR = 4,     /* PDR and FAR found */
	PROF_RULES = 5,   /* QERs, quota */
	PROF_PLANNED = 6, /* encapsulation planned, next hop found */
	PROF_REWRITTEN = 7,
	PROF_SENT = 8,    /* counted (URRs, stats), verdict */
	PROF_MAX = 9,
};

struct prof {
	__u64 t;
	__u64 ns[PROF_MAX];
	__u64 n[PROF_MAX];
};

#ifdef UPF_PROFILE
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct prof);
} prof SEC(".maps");

static __always_inline void prof_mark(int point)
{
	__u32 zero = 0;
	struct prof *p = bpf_map_lookup_elem(&prof, &zero);

	if (!p)
		return;
	__u64 now = bpf_ktime_get_ns();

	if (point > 0 && point < PROF_MAX) {
		p->ns[point] += now - p->t;
		p->n[point]++;
	}
	p->t = bpf_ktime_get_ns();
}
#else
#define prof_mark(point) do { } while (0)
#endif

#endif
