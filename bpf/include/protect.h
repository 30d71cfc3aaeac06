/* SPDX-License-Identifier: GPL-2.0 */
/* Uplink packets the user plane must never carry into the core: ones addressed to the
 * UPF itself (its GTP-U, N4 and API addresses, and the operator's protected list), and
 * GTP-U, GTP-C or PFCP inside the tunnel (a UE smuggling a tunnel or a control message
 * past the N3 / N4 boundary; TS 33.513 clause 4.2.2, TS 33.117 clause 4.2.6.2.3). The
 * reference is crates/upf/src/model/pipeline.rs `into_core`. */
#ifndef UPF_PROTECT_H
#define UPF_PROTECT_H

#include "abi.h"
#include "parse.h"
#include "upf_maps.h"

/* Whether `a` is one of the first `n` (at most `max`) of `list`. */
static __always_inline int v6_in(const __u8 (*list)[16], int max, int n, const __u8 *a)
{
	__u64 a0, a1, l0, l1;
	int i;

	__builtin_memcpy(&a0, a, 8);
	__builtin_memcpy(&a1, a + 8, 8);
	for (i = 0; i < max; i++) {
		if (i >= n)
			break;
		__builtin_memcpy(&l0, list[i], 8);
		__builtin_memcpy(&l1, list[i] + 8, 8);
		if ((l0 | l1) && l0 == a0 && l1 == a1)
			return 1;
	}
	return 0;
}

static __always_inline int v4_in(const __u32 *list, int max, int n, __u32 a)
{
	int i;

	for (i = 0; i < max; i++) {
		if (i >= n)
			break;
		if (list[i] && list[i] == a)
			return 1;
	}
	return 0;
}

/* 0 if an uplink packet may go on; else the drop reason. */
static __always_inline int into_core(const struct upf_config *cfg, const struct flow *f)
{
	if (f->has_ports && f->proto == IPPROTO_UDP &&
	    (f->dport == PORT_GTPU || f->dport == PORT_GTPC || f->dport == PORT_PFCP))
		return DROP_CORE_PROTOCOL;
	if (f->version == 4) {
		__u32 d;

		__builtin_memcpy(&d, f->dst, 4);
		if (v4_in(cfg->local_v4, MAX_LOCAL_ADDRS, cfg->n_local_v4, d) ||
		    v4_in(cfg->protected_v4, MAX_PROTECTED_ADDRS, cfg->n_protected_v4, d))
			return DROP_TO_UPF;
	} else if (v6_in(cfg->local_v6, MAX_LOCAL_ADDRS, cfg->n_local_v6, f->dst) ||
		   v6_in(cfg->protected_v6, MAX_PROTECTED_ADDRS, cfg->n_protected_v6, f->dst)) {
		return DROP_TO_UPF;
	}
	return 0;
}

#endif
