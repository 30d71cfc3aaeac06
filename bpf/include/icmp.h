/* SPDX-License-Identifier: GPL-2.0 */
/* ICMP errors for the packets the UPF drops as a router would: too big for their egress
 * link once the UPF's headers are on them (ICMPv4 Fragmentation Needed for IPv4 with DF
 * set, RFC 792, RFC 1191 clause 4; ICMPv6 Packet Too Big, RFC 4443 clause 3.2, RFC
 * 8201), so that path MTU discovery settles behind the UPF; and out of TTL / hop limit
 * at this hop (Time Exceeded, RFC 792, RFC 4443 clause 3.3), so that traceroute sees
 * the UPF. The stage CALL_ICMP turns the dropped packet into the error in place: it
 * keeps the packet's first octets as the quote and writes the new headers before them.
 * k->icmp_mtu says which error: the MTU to report, or 0 for Time Exceeded. The
 * reference model's twin is crates/upf/src/model/icmp.rs. */
#ifndef UPF_ICMP_H
#define UPF_ICMP_H

#include "upf_maps.h"
#include "pipeline.h"
#include "lease.h"
#include "csum.h"

/* The whole error within 576 octets for IPv4 (RFC 1812 clause 4.3.2.3) and within the
 * minimum MTU for IPv6 (RFC 4443 clause 2.4 (c)): the quote's room. */
#define ICMP4_HDRS (20 + 8)
#define ICMP6_HDRS (40 + 8)
#define ICMP4_QUOTE_MAX (576 - ICMP4_HDRS)
#define ICMP6_QUOTE_MAX (1280 - ICMP6_HDRS)

/* Where an error for the packet in `k` goes, if anywhere: a UE's packet from a tunnel
 * back through its session's downlink rules; a data network host's packet back on
 * N6. A packet relayed between tunnels towards the data network (N9) gets none. */
enum icmp_way {
	ICMP_NONE = 0,
	ICMP_TO_UE,
	ICMP_TO_DN,
};

static __always_inline int icmp_way(const struct pkt *k)
{
	if (k->up && k->from_gtpu)
		return ICMP_TO_UE;
	if (!k->up && !k->from_gtpu)
		return ICMP_TO_DN;
	return ICMP_NONE;
}

/* Whether the packet may be answered with an error (RFC 1122 clause 3.2.2, RFC 1812
 * clause 4.3.2.7, RFC 4443 clause 2.4 (e)): for Fragmentation Needed, IPv4 with DF set
 * (the data path does not fragment: without DF the packet is only dropped); not a
 * later fragment; not itself an ICMP error; from a unicast source; not to a multicast
 * or broadcast address (except an IPv6 Packet Too Big, RFC 4443 clause 2.4 (e.3)). */
static __always_inline int icmp_eligible(void *data, void *data_end, const struct pkt *k,
					 const struct upf_config *cfg)
{
	const struct flow *f = &k->f;
	__u32 l4 = f->l4;

	if (!l4 || !cfg->icmp_per_sec || !cfg->icmp_sess_per_sec)
		return 0;
	if (f->version == 4) {
		const __u8 *ip = (const __u8 *)data + (k->o.inner & 0xfff);

		if (!cfg->icmp_src_v4 || (void *)(ip + 8) > data_end ||
		    (k->icmp_mtu && !(ip[6] & 0x40)))
			return 0;
		if (f->src[0] == 0 || f->src[0] == 127 || f->src[0] >= 224 || f->dst[0] >= 224)
			return 0;
	} else {
		__u32 any = 0;
		int i;

		for (i = 0; i < 16; i++)
			any |= cfg->icmp_src_v6[i];
		if (!any || f->src[0] == 0xff || (!k->icmp_mtu && f->dst[0] == 0xff))
			return 0;
		any = 0;
		for (i = 0; i < 16; i++)
			any |= f->src[i];
		if (!any)
			return 0;
	}
	if (f->proto == (f->version == 4 ? 1 : 58)) {
		const __u8 *t = (const __u8 *)data + (l4 & 0xfff);

		/* No type octet inside the packet: nothing to tell an error by. */
		if (l4 >= k->o.inner + f->len || (void *)(t + 1) > data_end)
			return 0;
		if (f->version == 6 ? t[0] < 128
				    : t[0] == 3 || t[0] == 4 || t[0] == 5 || t[0] == 11 || t[0] == 12)
			return 0;
	}
	return 1;
}

/* The budgets, the session's first (struct pool's icmp_tat), then the one over all
 * sessions: 1 if both have room. A refusal by the second has spent the session's. */
static __always_inline int icmp_budget(const struct upf_config *cfg, const struct pkt *k)
{
	__u32 zero = 0;
	struct slowpath_bucket *b = bpf_map_lookup_elem(&icmp_bucket, &zero);
	struct sess_rec *r = sess_at(cfg, k->slot);

	if (!b || !r)
		return 0;
	__u64 cost = NSEC_PER_SEC / cfg->icmp_sess_per_sec;
	__u64 burst = cfg->icmp_sess_burst ? cfg->icmp_sess_burst : 1;

	if (!gcra(&pool_of(r)->icmp_tat, cost, (burst - 1) * cost, k->now, 0))
		return 0;
	cost = NSEC_PER_SEC / cfg->icmp_per_sec;
	burst = cfg->icmp_burst ? cfg->icmp_burst : 1;
	return gcra(&b->tat, cost, (burst - 1) * cost, k->now, 0);
}

/* The frame made into the error: Ethernet, IP, ICMP, then the packet's first `quote`
 * octets, which stay where they are. `mtu`: the MTU a Packet Too Big reports; 0: a Time
 * Exceeded. 0, or -1. */
static __always_inline int icmp_build(struct xdp_md *ctx, const struct upf_config *cfg,
				      const struct pkt *k, __u32 mtu)
{
	const struct flow *f = &k->f;
	int v4 = f->version == 4;
	__u32 hdrs = ETH_LEN + (v4 ? ICMP4_HDRS : ICMP6_HDRS);
	__u32 quote = f->len;
	__u8 src[16];

	if (quote > (v4 ? ICMP4_QUOTE_MAX : ICMP6_QUOTE_MAX))
		quote = v4 ? ICMP4_QUOTE_MAX : ICMP6_QUOTE_MAX;
	__builtin_memcpy(src, f->src, 16);
	if (bpf_xdp_adjust_head(ctx, (int)k->o.inner - (int)hdrs))
		return -1;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__s64 extra = (__s64)(data_end - data);

	barrier_var(extra);
	extra -= hdrs + quote;
	if (extra < 0 || (extra && bpf_xdp_adjust_tail(ctx, (int)-extra)))
		return -1;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u8 *l3 = (__u8 *)data + ETH_LEN;

	if ((void *)(l3 + ICMP6_HDRS) > data_end)
		return -1;
	__builtin_memcpy(eth->h_dest, k->in_smac, 6);
	__builtin_memcpy(eth->h_source, k->in_dmac, 6);
	if (v4) {
		struct iphdr *ip = (void *)l3;
		__u8 *icmp = l3 + 20;

		eth->h_proto = bpf_htons(ETH_P_IP);
		*(__u32 *)l3 = bpf_htonl(0x45000000 | (ICMP4_HDRS + quote));
		*(__u32 *)(l3 + 4) = 0; /* identification, flags, fragment offset */
		ip->ttl = 64;
		ip->protocol = 1;
		ip->check = 0;
		ip->saddr = cfg->icmp_src_v4;
		__builtin_memcpy(&ip->daddr, src, 4);
		ip->check = ipv4_csum(ip);
		/* Type 3 code 4 or type 11 code 0, checksum 0; the Next-Hop MTU or unused. */
		*(__u32 *)icmp = bpf_htonl(mtu ? 0x03040000 : 0x0b000000);
		*(__u32 *)(icmp + 4) = bpf_htonl(mtu & 0xffff);
		__u64 sum = csum_span(ctx, ETH_LEN + 20, 8 + quote);

		if (sum >> 63)
			return -1;
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
		icmp = (__u8 *)data + ETH_LEN + 20;
		if ((void *)(icmp + 8) > data_end)
			return -1;
		*(__u16 *)(icmp + 2) = csum_fold(sum);
		return 0;
	}
	__u8 *icmp = l3 + 40;

	eth->h_proto = bpf_htons(ETH_P_IPV6);
	*(__u32 *)l3 = bpf_htonl(0x60000000);
	*(__u16 *)(l3 + 4) = bpf_htons(8 + quote);
	l3[6] = 58;
	l3[7] = 64;
	__builtin_memcpy(l3 + 8, cfg->icmp_src_v6, 16);
	__builtin_memcpy(l3 + 24, src, 16);
	/* Type 2 (Packet Too Big) or 3 (Time Exceeded) code 0, checksum 0; the MTU or unused. */
	*(__u32 *)icmp = bpf_htonl(mtu ? 0x02000000 : 0x03000000);
	*(__u32 *)(icmp + 4) = bpf_htonl(mtu);
	/* RFC 4443 clause 2.3: the pseudo-header's addresses, length and next header. */
	__u64 sum = csum_span(ctx, ETH_LEN + 8, 32);
	__u64 rest = csum_span(ctx, ETH_LEN + 40, 8 + quote);

	if ((sum | rest) >> 63)
		return -1;
	sum += rest + bpf_htons(58) + bpf_htons(8 + quote);
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	icmp = (__u8 *)data + ETH_LEN + 40;
	if ((void *)(icmp + 8) > data_end)
		return -1;
	*(__u16 *)(icmp + 2) = csum_fold(sum);
	return 0;
}

#endif
