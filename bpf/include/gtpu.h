/* SPDX-License-Identifier: GPL-2.0 */
/* Recognising a G-PDU addressed to us: outer IPv4/IPv6, UDP port 2152, GTP-U version 1
 * (TS 29.281 clause 5.1) with its extension header chain (clause 5.2) and the PDU
 * Session Container's QFI (TS 38.415 clause 5.5.2). TEID, QFI and the T-PDU's offset
 * are read as the codec (gtpu::parse_gpdu) and the reference model
 * (crates/upf/src/model/packet.rs, which lists the deliberate differences) read them;
 * crates/bpf/tests/gpdu_contract.rs checks the three on the GTP-U robustness corpus. */
#ifndef UPF_GTPU_H
#define UPF_GTPU_H

#include "upf_maps.h"
#include "parse.h"

enum gtpu_verdict {
	GTPU_OK = 0,
	GTPU_NOT_OURS,    /* not GTP-U for one of our addresses: leave to the kernel */
	GTPU_SLOWPATH,    /* ours but not a G-PDU we forward here (Echo, End Marker ...) */
	GTPU_MALFORMED,   /* a G-PDU we cannot make sense of: drop and count */
};

static __always_inline int is_local_v4(struct upf_config *cfg, __u32 a)
{
	int i;

	for (i = 0; i < MAX_LOCAL_ADDRS; i++)
		if (cfg->local_v4[i] && cfg->local_v4[i] == a)
			return 1;
	return 0;
}

static __always_inline int is_local_v6(struct upf_config *cfg, const __u8 *a)
{
	int i, j;

	for (i = 0; i < MAX_LOCAL_ADDRS; i++) {
		int eq = 1, zero = 1;

		for (j = 0; j < 16; j++) {
			if (cfg->local_v6[i][j] != a[j])
				eq = 0;
			if (cfg->local_v6[i][j])
				zero = 0;
		}
		if (eq && !zero)
			return 1;
	}
	return 0;
}

/* Parse outer IP + UDP + GTP-U starting at o->l3 (o->family set). */
static __always_inline int parse_gtpu(void *data, void *data_end, struct upf_config *cfg,
				      struct outer *o)
{
	__u32 udp_off;

	if (o->family == 4) {
		struct iphdr *ip = (void *)((__u8 *)data + o->l3);

		if ((void *)(ip + 1) > data_end)
			return GTPU_NOT_OURS;
		if (ip->protocol != IPPROTO_UDP || !is_local_v4(cfg, ip->daddr))
			return GTPU_NOT_OURS;
		/* Fragments go to the kernel, which reassembles them for upfd. */
		if (bpf_ntohs(ip->frag_off) & 0x3fff)
			return GTPU_NOT_OURS;
		if (ip->ihl < 5)
			return GTPU_NOT_OURS;
		udp_off = o->l3 + ip->ihl * 4;
	} else {
		struct ipv6hdr *ip6 = (void *)((__u8 *)data + o->l3);

		if ((void *)(ip6 + 1) > data_end)
			return GTPU_NOT_OURS;
		if (ip6->nexthdr != IPPROTO_UDP || !is_local_v6(cfg, (__u8 *)&ip6->daddr))
			return GTPU_NOT_OURS;
		udp_off = o->l3 + sizeof(*ip6);
	}
	struct udphdr *udp = (void *)((__u8 *)data + udp_off);

	if ((void *)(udp + 1) > data_end)
		return GTPU_NOT_OURS;
	if (udp->dest != bpf_htons(GTPU_PORT))
		return GTPU_NOT_OURS;

	o->gtp = udp_off + sizeof(*udp);
	__u8 *g = (__u8 *)data + o->gtp;
	__u32 udp_end = udp_off + bpf_ntohs(udp->len);
	int qmp = 0;

	if ((void *)(g + 8) > data_end)
		return GTPU_MALFORMED;
	/* Version 1, PT 1. */
	if ((g[0] & 0xf0) != 0x30)
		return GTPU_SLOWPATH;
	if (g[1] != GTP_GPDU)
		return GTPU_SLOWPATH;
	o->teid = ((__u32)g[4] << 24) | ((__u32)g[5] << 16) | ((__u32)g[6] << 8) | g[7];
	o->qfi = QFI_ANY;
	o->has_psc = 0;
	__u32 off = o->gtp + 8;

	if (g[0] & 0x07) {
		if ((void *)(g + 12) > data_end)
			return GTPU_MALFORMED;
		off += 4;
		__u8 next = (g[0] & 0x04) ? g[11] : 0;
		int i;

		for (i = 0; i < GTP_MAX_EXT && next; i++) {
			__u8 *e = (__u8 *)data + off;

			if ((void *)(e + 1) > data_end)
				return GTPU_MALFORMED;
			__u32 elen = (__u32)e[0] * 4;

			if (elen == 0)
				return GTPU_MALFORMED;
			if (next == EXT_PDU_SESSION_CONTAINER) {
				if ((void *)(e + 4) > data_end)
					return GTPU_MALFORMED;
				/* The first container of PDU type DL (0) or UL (1) gives the
				 * QFI, as the codec reads it (gtpu::parse_gpdu). */
				if (!o->has_psc && (e[1] >> 4) <= 1) {
					o->has_psc = 1;
					o->psc_type = e[1] >> 4;
					o->qfi = e[2] & 0x3f;
					/* A UL container with QMP: an answer to upfd's QoS
					 * monitoring (TS 38.415 clause 5.5.2.2). */
					qmp = o->psc_type == 1 && (e[1] & 0x08);
				}
			} else if (next & 0x80) {
				/* An unknown header the receiver must comprehend (clause 5.2.1):
				 * upfd answers it. */
				if (next != 0x85)
					return GTPU_SLOWPATH;
			}
			/* The next-type octet ends the header: read it as the last of 4. */
			__u8 *nx = e + (elen - 4);

			if ((void *)(nx + 4) > data_end)
				return GTPU_MALFORMED;
			next = nx[3];
			off += elen;
		}
		if (next)
			return GTPU_MALFORMED;
	}
	/* A QoS monitoring answer without a user packet (a dummy, TS 23.501 clause
	 * 5.33.3.2) is upfd's: it reads the time stamps. One that carries a packet is
	 * forwarded here (its time stamps are not read). */
	if (qmp && off >= udp_end)
		return GTPU_SLOWPATH;
	o->inner = off;
	return GTPU_OK;
}

#endif
