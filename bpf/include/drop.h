/* SPDX-License-Identifier: GPL-2.0 */
/* Counting: every drop has a named reason (upf_maps.h enum drop_reason), counted per
 * CPU with its octets; so are forwards, buffering and hand-offs to upfd. */
#ifndef UPF_DROP_H
#define UPF_DROP_H

#include "upf_maps.h"

static __always_inline void count(__u32 idx, __u64 bytes)
{
	struct stat *s = bpf_map_lookup_elem(&stats, &idx);

	if (s) {
		s->packets++;
		s->bytes += bytes;
	}
}

static __always_inline int drop(__u32 reason, __u64 bytes)
{
	count(reason, bytes);
	return XDP_DROP;
}

#endif
