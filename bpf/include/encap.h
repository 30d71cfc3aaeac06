/* SPDX-License-Identifier: GPL-2.0 */
/* The headers the data path writes in front of the user's packet: the outer IPv4 or IPv6
 * + UDP + GTP-U header of a FAR's Outer Header Creation (TS 29.244 clause 8.2.56, TS
 * 29.281 clause 5.1) with its PDU Session Container (TS 38.415 clause 5.5.2), and the
 * TTL / hop limit of a packet routed through the UPF. The reference model's
 * crates/upf/src/model/encap.rs writes the same octets. */
#ifndef UPF_ENCAP_H
#define UPF_ENCAP_H

#include "upf_maps.h"
#include "parse.h"
#include "csum.h"
#include "pipeline.h"

#define ETH_LEN 14
#define OUTER_V4 (20 + 8)
#define OUTER_V6 (40 + 8)

/* What goes in front of the user's packet, and where it goes. */
struct encap {
	__u8 psc[8];     /* the PDU Session Container's octets */
	__u32 psc_len;   /* 0, 4 or 8 */
	__u32 outer_len; /* IP + UDP + GTP-U (+ its extension header), 0: none */
	__u8 family;     /* of the packet that leaves: the outer header's, else the inner's */
	__u8 dst[16];    /* where it is routed: the tunnel's peer, else the inner destination */
	__u8 src[16];
};

/* The PDU Session Container to put in an outgoing G-PDU (TS 38.415 clause 5.5.2):
 * towards the access network a DL container with the QFI of the PDR's first QER that
 * has one (k->psc_*: RQI, PPI); on an N9 relay the one that came in, unless Outer Header
 * Removal asked to delete it. Returns its length (0, 4 or 8) and fills psc[]. */
static __always_inline int make_psc(const struct pkt *k, __u8 *psc)
{
	const struct outer *o = &k->o;
	int keep = k->from_gtpu && o->has_psc && !(k->pdr.ohr_ext & 1);
	__u8 qfi = QFI_ANY;

	if (k->psc_qfi != QFI_ANY)
		qfi = k->psc_qfi;
	else if (keep)
		qfi = o->qfi;
	if (qfi == QFI_ANY)
		return 0;
	if (k->far.dest == 0) {
		/* DL PDU SESSION INFORMATION */
		__u8 rqi = k->psc_qfi != QFI_ANY && (k->psc_flags & QER_F_RQI) ? 0x40 : 0;

		psc[1] = 0x00;
		psc[2] = qfi | rqi;
		if (k->psc_qfi != QFI_ANY && (k->psc_flags & QER_F_PPI)) {
			psc[0] = 2;
			psc[2] |= 0x80;
			psc[3] = k->psc_ppi << 5;
			psc[4] = 0;
			psc[5] = 0;
			psc[6] = 0;
			psc[7] = 0;
			return 8;
		}
		psc[0] = 1;
		psc[3] = 0;
		return 4;
	}
	if (!keep)
		return 0;
	/* A relayed container keeps its PDU type and QFI. */
	psc[0] = 1;
	psc[1] = o->psc_type << 4;
	psc[2] = qfi;
	psc[3] = 0;
	return 4;
}

/* What the FAR's Outer Header Creation asks for: a tunnel over IPv4 or IPv6, or none (a
 * decapsulated G-PDU leaves as the IP packet it carries). 0, or the drop reason: a
 * tunnel we cannot build, or a packet from the data network without one. */
static __always_inline int plan_encap(const struct pkt *k, struct encap *e)
{
	const struct far *far = &k->far;

	if (far->ohc == OHC_GTPU_V4) {
		e->psc_len = make_psc(k, e->psc);
		e->outer_len = OUTER_V4 + 8 + (e->psc_len ? 4 + e->psc_len : 0);
		e->family = 4;
		__builtin_memcpy(e->dst, far->peer, 4);
		__builtin_memcpy(e->src, far->src, 4);
		return 0;
	}
	if (far->ohc == OHC_GTPU_V6) {
		e->psc_len = make_psc(k, e->psc);
		e->outer_len = OUTER_V6 + 8 + (e->psc_len ? 4 + e->psc_len : 0);
		e->family = 6;
		__builtin_memcpy(e->dst, far->peer, 16);
		__builtin_memcpy(e->src, far->src, 16);
		return 0;
	}
	if (far->ohc != OHC_NONE || !k->from_gtpu)
		return DROP_UNSUPPORTED;
	e->family = k->f.version;
	__builtin_memcpy(e->dst, k->f.dst, 16);
	__builtin_memcpy(e->src, k->f.src, 16);
	return 0;
}

/* Decrement the TTL / hop limit of the IP packet at `ip`. 0, or -1 if it expired. */
static __always_inline int dec_ttl(void *data_end, __u8 *ip, __u8 version)
{
	if (version == 4) {
		struct iphdr *h = (void *)ip;

		if ((void *)(h + 1) > data_end)
			return -1;
		if (h->ttl <= 1)
			return -1;
		__u16 old = *(__u16 *)&h->ttl;

		h->ttl--;
		h->check = csum_replace2(h->check, old, *(__u16 *)&h->ttl);
		return 0;
	}
	struct ipv6hdr *h6 = (void *)ip;

	if ((void *)(h6 + 1) > data_end)
		return -1;
	if (h6->hop_limit <= 1)
		return -1;
	h6->hop_limit--;
	return 0;
}

/* The user's packet behind `outer_len` octets of new headers crosses this UPF as a
 * router hop. Each possible length is spelled out, so the verifier sees constant
 * offsets. 0, or -1 if the TTL expired. */
static __always_inline int dec_inner_ttl(void *data, void *data_end, __u32 outer_len, __u8 version)
{
	__u8 *l3 = (__u8 *)data + ETH_LEN;

	switch (outer_len) {
	case 0:
		return dec_ttl(data_end, l3, version);
	case OUTER_V4 + 8:
		return dec_ttl(data_end, l3 + OUTER_V4 + 8, version);
	case OUTER_V4 + 16:
		return dec_ttl(data_end, l3 + OUTER_V4 + 16, version);
	case OUTER_V4 + 20:
		return dec_ttl(data_end, l3 + OUTER_V4 + 20, version);
	case OUTER_V6 + 8:
		return dec_ttl(data_end, l3 + OUTER_V6 + 8, version);
	case OUTER_V6 + 16:
		return dec_ttl(data_end, l3 + OUTER_V6 + 16, version);
	case OUTER_V6 + 20:
		return dec_ttl(data_end, l3 + OUTER_V6 + 20, version);
	}
	return 0;
}

/* The GTP-U header at `g` (TS 29.281 clause 5.1): a G-PDU to the FAR's TEID of `glen`
 * octets after the first 8, with the PDU Session Container if there is one. 0, or -1
 * if the frame is too short. */
static __always_inline int write_gtpu(void *data_end, __u8 *g, const struct far *far,
				      const struct encap *e, __u16 glen)
{
	if ((void *)(g + 8) > data_end)
		return -1;
	g[0] = e->psc_len ? 0x34 : 0x30;
	g[1] = GTP_GPDU;
	g[2] = glen >> 8;
	g[3] = glen & 0xff;
	g[4] = far->teid >> 24;
	g[5] = far->teid >> 16;
	g[6] = far->teid >> 8;
	g[7] = far->teid;
	if (!e->psc_len)
		return 0;
	if ((void *)(g + 12 + 8) > data_end)
		return -1;
	g[8] = 0;
	g[9] = 0;
	g[10] = 0;
	g[11] = EXT_PDU_SESSION_CONTAINER;
	g[12] = e->psc[0];
	g[13] = e->psc[1];
	g[14] = e->psc[2];
	g[15] = e->psc[3];
	if (e->psc_len == 8) {
		g[16] = e->psc[4];
		g[17] = e->psc[5];
		g[18] = e->psc[6];
		g[19] = e->psc[7];
	}
	return 0;
}

/* The outer IPv4 + UDP + GTP-U header after the Ethernet header; `l3_len` is the whole
 * outer IP packet's. The UDP checksum is 0 (allowed over IPv4). 0, or -1. */
static __always_inline int write_outer_v4(void *data, void *data_end, const struct far *far,
					  const struct encap *e, __u32 l3_len, __u32 len)
{
	struct iphdr *ip = (void *)((__u8 *)data + ETH_LEN);
	struct udphdr *udp = (void *)(ip + 1);

	if ((void *)(udp + 1) > data_end)
		return -1;
	ip->version = 4;
	ip->ihl = 5;
	ip->tos = (far->flags & FAR_F_TOS) ? far->tos : 0;
	ip->tot_len = bpf_htons(l3_len);
	ip->id = 0;
	ip->frag_off = bpf_htons(0x4000);
	ip->ttl = 64;
	ip->protocol = IPPROTO_UDP;
	ip->check = 0;
	__builtin_memcpy(&ip->saddr, far->src, 4);
	__builtin_memcpy(&ip->daddr, far->peer, 4);
	ip->check = ipv4_csum(ip);
	udp->source = bpf_htons(GTPU_PORT);
	udp->dest = bpf_htons(far->port);
	udp->len = bpf_htons(l3_len - 20);
	udp->check = 0;
	return write_gtpu(data_end, (__u8 *)(udp + 1), far, e, e->outer_len - OUTER_V4 - 8 + len);
}

/* The outer IPv6 + UDP + GTP-U header after the Ethernet header. The UDP checksum,
 * mandatory over IPv6 (RFC 8200 clause 8.1), is computed once the packet is complete
 * (csum.h udp6_checksum). 0, or -1. */
static __always_inline int write_outer_v6(void *data, void *data_end, const struct far *far,
					  const struct encap *e, __u32 l3_len, __u32 len)
{
	struct ipv6hdr *ip6 = (void *)((__u8 *)data + ETH_LEN);
	struct udphdr *udp = (void *)(ip6 + 1);
	__u8 tc = (far->flags & FAR_F_TOS) ? far->tos : 0;

	if ((void *)(udp + 1) > data_end)
		return -1;
	/* Version 6, the Traffic Class from the Transport Level Marking, flow label 0. */
	*(__be32 *)ip6 = bpf_htonl(0x60000000 | (__u32)tc << 20);
	ip6->payload_len = bpf_htons(l3_len - 40);
	ip6->nexthdr = IPPROTO_UDP;
	ip6->hop_limit = 64;
	__builtin_memcpy(&ip6->saddr, far->src, 16);
	__builtin_memcpy(&ip6->daddr, far->peer, 16);
	udp->source = bpf_htons(GTPU_PORT);
	udp->dest = bpf_htons(far->port);
	udp->len = bpf_htons(l3_len - 40);
	udp->check = 0;
	return write_gtpu(data_end, (__u8 *)(udp + 1), far, e, e->outer_len - OUTER_V6 - 8 + len);
}

/* Make room and write: [eth][outer][inner...] becomes [eth][new outer][inner], octets
 * after the inner packet cut; the inner TTL decremented unless the packet is relayed
 * from one tunnel to another (N9). `inner` is the user's packet's offset, `len` its
 * length. 0, or the drop reason. */
static __always_inline int rewrite(struct xdp_md *ctx, const struct far *far, const struct encap *e,
				   __u32 inner, __u32 len, __u8 inner_version, int relay)
{
	int shift = (int)inner - ETH_LEN - (int)e->outer_len;

	if (bpf_xdp_adjust_head(ctx, shift))
		return DROP_UNSUPPORTED;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 want = ETH_LEN + e->outer_len + len;
	__u32 have = data_end - data;

	if (have > want && bpf_xdp_adjust_tail(ctx, -(int)(have - want)))
		return DROP_UNSUPPORTED;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	if (data + ETH_LEN + e->outer_len + 1 > data_end)
		return DROP_MALFORMED_IP;
	if (!relay && dec_inner_ttl(data, data_end, e->outer_len, inner_version))
		return DROP_TTL_EXCEEDED;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return DROP_MALFORMED_IP;
	eth->h_proto = e->family == 4 ? bpf_htons(ETH_P_IP) : bpf_htons(ETH_P_IPV6);
	if (!e->outer_len)
		return 0;
	__u32 l3_len = e->outer_len + len;
	int r = e->family == 4 ? write_outer_v4(data, data_end, far, e, l3_len, len)
			       : write_outer_v6(data, data_end, far, e, l3_len, len);

	return r ? DROP_MALFORMED_IP : 0;
}

#endif
