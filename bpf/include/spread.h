/* SPDX-License-Identifier: GPL-2.0 */
/* Spreading G-PDUs over CPUs (ARCHITECTURE.md, scaling per core). One gNB's GTP-U often
 * comes as one outer 5-tuple, which NIC RSS (and a veth) puts on one receive queue, so
 * one CPU would forward it all. With upf_config.spread set, xdp_n3 only parses the
 * G-PDU, hashes its TEID (SPREAD_TEID: each tunnel stays on one CPU) or its inner
 * packet's addresses, protocol and ports (SPREAD_INNER: each flow does, a busy tunnel's
 * flows spread; see flow_hash for fragments) and redirects it into the cpus map; the CPU picked runs xdp_n3_cpu,
 * the whole N3 processing. A cpumap queue is first in, first out, and a flow always
 * hashes to the same CPU, so the packets of a flow leave in the order they came.
 * Anything that is not a well-formed G-PDU for us is processed where it arrived. */
#ifndef UPF_SPREAD_H
#define UPF_SPREAD_H

#include "upf_maps.h"
#include "parse.h"
#include "gtpu.h"

static __always_inline __u32 mix32(__u32 h, __u32 w)
{
	h ^= w;
	h *= 0x9e3779b1u;
	return h ^ (h >> 15);
}

/* The inner packet's flow hash: addresses and protocol, and what tells its flows apart
 * in every packet of the flow: for IPv4 the ports, unless the packet is a fragment
 * (later fragments have none, and must not overtake the first); for IPv6 the flow label
 * (RFC 6437: set per flow for this; fragments carry it too). `frag` is the inner IPv4
 * header's fragment field. */
static __always_inline __u32 flow_hash(const struct flow *f, __u16 frag)
{
	__u32 h = mix32(f->version, f->proto);
	int i;

	for (i = 0; i < 16; i += 4) {
		h = mix32(h, *(const __u32 *)&f->src[i]);
		h = mix32(h, *(const __u32 *)&f->dst[i]);
	}
	if (f->version == 6)
		h = mix32(h, f->label);
	else if (f->has_ports && !(frag & 0x3fff))
		h = mix32(h, (__u32)f->sport << 16 | f->dport);
	return h;
}

/* Redirect the G-PDU to the CPU its hash picks: XDP_REDIRECT; or -1 to process it
 * here (spreading off, not a G-PDU for us, no CPUs configured). */
static __always_inline int spread(struct xdp_md *ctx, struct upf_config *cfg)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct outer o = {};
	struct flow f;
	__u32 l3 = 0, h, n = cfg->n_spread;
	__u32 frame = data_end - data;

	if (cfg->spread == SPREAD_OFF || n == 0 || n > MAX_SPREAD_CPUS)
		return -1;
	o.family = parse_eth(data, data_end, &l3);
	if (!o.family)
		return -1;
	o.l3 = l3;
	if (parse_gtpu(data, data_end, cfg, &o) != GTPU_OK)
		return -1;
	if (cfg->spread == SPREAD_INNER) {
		if (parse_inner(data, data_end, o.inner, frame, &f))
			return -1;
		__u16 frag = 0;
		struct iphdr *ip = (void *)((__u8 *)data + o.inner);

		if (f.version == 4 && (void *)(ip + 1) <= data_end)
			frag = bpf_ntohs(ip->frag_off);
		h = flow_hash(&f, frag);
	} else {
		h = mix32(0, o.teid);
	}
	/* hash x n / 2^32: a CPU of the set without a division. */
	__u32 at = (__u32)(((__u64)h * n) >> 32) & (MAX_SPREAD_CPUS - 1);

	return bpf_redirect_map(&cpus, cfg->spread_cpu[at], 0);
}

#endif
