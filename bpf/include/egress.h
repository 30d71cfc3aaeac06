/* SPDX-License-Identifier: GPL-2.0 */
/* Where a packet leaves and with which link-layer header: the kernel FIB
 * (bpf_fib_lookup) or, with CFG_F_STATIC_NEIGH, configured neighbours (the neigh table,
 * which the differential tests and some deployments use). */
#ifndef UPF_EGRESS_H
#define UPF_EGRESS_H

#include <linux/if_ether.h>
#include "upf_maps.h"

#ifndef AF_INET
#define AF_INET 2
#endif
#ifndef AF_INET6
#define AF_INET6 10
#endif

enum egress_result {
	EGRESS_OK = 0,
	EGRESS_NO_ROUTE,
	EGRESS_NO_NEIGH,  /* route known, neighbour unresolved: the kernel resolves it */
};

static __always_inline int static_neigh(__u8 family, const __u8 *dst, struct egress *out)
{
	struct neigh_key k = {};

	k.family = family;
	if (family == 4)
		__builtin_memcpy(k.addr, dst, 4);
	else
		__builtin_memcpy(k.addr, dst, 16);
	struct egress *e = bpf_map_lookup_elem(&neigh, &k);

	if (!e) {
		__builtin_memset(k.addr, 0, 16);
		e = bpf_map_lookup_elem(&neigh, &k);
	}
	if (!e)
		return EGRESS_NO_ROUTE;
	*out = *e;
	return EGRESS_OK;
}

static __always_inline int egress_lookup(struct xdp_md *ctx, struct upf_config *cfg, __u8 family,
					 const __u8 *src, const __u8 *dst, __u16 l3_len,
					 struct egress *out)
{
	if (cfg->flags & CFG_F_STATIC_NEIGH)
		return static_neigh(family, dst, out);

	struct bpf_fib_lookup p = {};
	int rc;

	p.ifindex = ctx->ingress_ifindex;
	p.tot_len = l3_len;
	if (family == 4) {
		p.family = AF_INET;
		__builtin_memcpy(&p.ipv4_src, src, 4);
		__builtin_memcpy(&p.ipv4_dst, dst, 4);
	} else {
		p.family = AF_INET6;
		__builtin_memcpy(p.ipv6_src, src, 16);
		__builtin_memcpy(p.ipv6_dst, dst, 16);
	}
	rc = bpf_fib_lookup(ctx, &p, sizeof(p), 0);
	if (rc == BPF_FIB_LKUP_RET_NO_NEIGH)
		return EGRESS_NO_NEIGH;
	if (rc != BPF_FIB_LKUP_RET_SUCCESS && rc != BPF_FIB_LKUP_RET_FRAG_NEEDED)
		return EGRESS_NO_ROUTE;
	out->ifindex = p.ifindex;
	/* FRAG_NEEDED leaves the MTU in mtu_result; SUCCESS means the packet fits. */
	out->mtu = rc == BPF_FIB_LKUP_RET_FRAG_NEEDED ? p.mtu_result : 0xffff;
	__builtin_memcpy(out->smac, p.smac, 6);
	__builtin_memcpy(out->dmac, p.dmac, 6);
	return EGRESS_OK;
}

#endif
