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

/* The next-hop cache's slot for these FIB inputs (the source left out by destination). */
static __always_inline __u32 nh_slot(__u32 ifindex, __u8 family, const __u8 *src,
				     const __u8 *dst, int by_dst)
{
	__u32 h = ifindex * 0x9e3779b1u ^ family;
	__u32 w;
	int i;

	for (i = 0; i < 16; i += 4) {
		if (family == 4 && i)
			break;
		__builtin_memcpy(&w, dst + i, 4);
		h = (h ^ w) * 0x9e3779b1u;
		if (by_dst)
			continue;
		__builtin_memcpy(&w, src + i, 4);
		h = (h ^ w) * 0x85ebca6bu;
	}
	return (h ^ (h >> 16)) & (NH_CACHE_SLOTS - 1);
}

static __always_inline int same_addr(const __u8 *a, const __u8 *b, __u8 family)
{
	__u32 x, y;
	int i;

	for (i = 0; i < 16; i += 4) {
		if (family == 4 && i)
			break;
		__builtin_memcpy(&x, a + i, 4);
		__builtin_memcpy(&y, b + i, 4);
		if (x != y)
			return 0;
	}
	return 1;
}

static __always_inline int egress_lookup(struct xdp_md *ctx, struct upf_config *cfg, __u8 family,
					 const __u8 *src, const __u8 *dst, __u16 l3_len,
					 __u64 now, struct egress *out)
{
	if (cfg->flags & CFG_F_STATIC_NEIGH)
		return static_neigh(family, dst, out);

	/* The cache: the same inputs give the same next hop until the generation moves. */
	__u32 zero = 0;
	__u32 *genp = bpf_map_lookup_elem(&nh_gen, &zero);
	__u32 gen = genp ? *genp : 0;
	__u32 ifin = ctx->ingress_ifindex;
	int by_dst = gen & NH_BY_DESTINATION;
	__u32 slot = nh_slot(ifin, family, src, dst, by_dst);
	struct nh_entry *e = gen ? bpf_map_lookup_elem(&nh_cache, &slot) : 0;

	if (e && e->gen == gen && e->ifindex_in == ifin && e->family == family &&
	    now - e->filled_ns < NH_MAX_AGE_NS && same_addr(e->dst, dst, family) &&
	    (by_dst || same_addr(e->src, src, family))) {
		*out = e->eg;
		return EGRESS_OK;
	}

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
	/* Cached with the route's MTU, so that later packets of other sizes are checked
	 * against it: SUCCESS leaves it in mtu_result (kernel >= 5.12). Where that cannot
	 * be told from this packet's own length (which older kernels leave there), the
	 * answer is not cached. */
	if (e && rc == BPF_FIB_LKUP_RET_SUCCESS && p.mtu_result > l3_len) {
		e->gen = gen;
		e->ifindex_in = ifin;
		e->family = family;
		__builtin_memcpy(e->src, src, 16); /* not compared by destination */
		__builtin_memcpy(e->dst, dst, 16);
		e->filled_ns = now;
		e->eg = *out;
		e->eg.mtu = p.mtu_result;
	}
	return EGRESS_OK;
}

/* The MTU of the link a packet leaves by: the configured one, if any, else what the FIB
 * or the neighbour said. */
static __always_inline __u32 configured_mtu(const struct upf_config *cfg, __u32 ifindex,
					    __u32 mtu)
{
	int i;

	for (i = 0; i < MAX_IF_MTUS; i++) {
		if (i >= cfg->n_if_mtu)
			break;
		if (cfg->if_mtu[i].ifindex == ifindex)
			return cfg->if_mtu[i].mtu;
	}
	return mtu;
}

#endif
