/* SPDX-License-Identifier: GPL-2.0 */
/* Header writing and reading for the bench programs: Ethernet, IPv4 without options,
 * UDP, GTP-U (TS 29.281 clause 5.1) with the PDU Session Container (TS 38.415 clause
 * 5.5.2). Callers check bounds before writing; readers check every access. */
#ifndef BENCH_PKT_H
#define BENCH_PKT_H

#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>
#include "csum.h"

#define ETH_LEN 14
#define IP4_LEN 20
#define UDP_LEN 8
#define TCP_LEN 20      /* no options */
#define GTP_LEN 8
#define GTP_OPT_LEN 4   /* sequence number, N-PDU number, next extension header type */
#define PSC_LEN 4       /* PDU Session Container, one 4-octet unit */
#define GTPU_PORT 2152
#define GTP_GPDU 255
#define GTP_EXT_PSC 0x85
#define GTP_MAX_EXT 4

/* The outer headers of a G-PDU over IPv4: up to the T-PDU. */
#define GTPU_V4_LEN(psc) (ETH_LEN + IP4_LEN + UDP_LEN + GTP_LEN + ((psc) ? GTP_OPT_LEN + PSC_LEN : 0))

static __always_inline void put_eth(void *p, const __u8 *dst, const __u8 *src)
{
	struct ethhdr *eth = p;

	__builtin_memcpy(eth->h_dest, dst, ETH_ALEN);
	__builtin_memcpy(eth->h_source, src, ETH_ALEN);
	eth->h_proto = bpf_htons(ETH_P_IP);
}

/* IPv4 carrying `proto`, DF set, TTL 64, checksum computed; addresses in network order.
 * The checksum is summed from the values, in memory order (RFC 1071 sums are byte-order
 * independent), not read back from the packet: that halves the generator's cost per
 * packet. */
static __always_inline void put_ipv4_proto(void *p, __u16 tot_len, __u32 src, __u32 dst,
					   __u8 proto)
{
	struct iphdr *ip = p;
	__u16 len = bpf_htons(tot_len);
	__u64 sum = (__u64)bpf_htons(0x4500) + len + bpf_htons(0x4000) +
		    bpf_htons((64 << 8) | proto) + (src & 0xffff) + (src >> 16) +
		    (dst & 0xffff) + (dst >> 16);

	*(__u8 *)ip = 0x45;
	ip->tos = 0;
	ip->tot_len = len;
	ip->id = 0;
	ip->frag_off = bpf_htons(0x4000);
	ip->ttl = 64;
	ip->protocol = proto;
	ip->check = csum_fold(sum);
	ip->saddr = src;
	ip->daddr = dst;
}

/* IPv4 carrying UDP. */
static __always_inline void put_ipv4(void *p, __u16 tot_len, __u32 src, __u32 dst)
{
	put_ipv4_proto(p, tot_len, src, dst, IPPROTO_UDP);
}

/* UDP without checksum (allowed over IPv4); ports in host order. */
static __always_inline void put_udp(void *p, __u16 sport, __u16 dport, __u16 len)
{
	struct udphdr *udp = p;

	udp->source = bpf_htons(sport);
	udp->dest = bpf_htons(dport);
	udp->len = bpf_htons(len);
	udp->check = 0;
}

/* A TCP header without options, ACK|PSH, window 65535; ports in host order, sequence
 * and acknowledgement numbers as given. The checksum is left 0: no one on the bench's
 * path verifies it (computing it would cost a pass over the payload per packet). */
static __always_inline void put_tcp(void *p, __u16 sport, __u16 dport, __u32 seq, __u32 ack)
{
	__u8 *t = p;

	*(__u16 *)t = bpf_htons(sport);
	*(__u16 *)(t + 2) = bpf_htons(dport);
	*(__u32 *)(t + 4) = bpf_htonl(seq);
	*(__u32 *)(t + 8) = bpf_htonl(ack);
	t[12] = (TCP_LEN / 4) << 4; /* data offset */
	t[13] = 0x18;               /* ACK, PSH */
	*(__u16 *)(t + 14) = 0xffff;
	*(__u16 *)(t + 16) = 0;     /* checksum */
	*(__u16 *)(t + 18) = 0;     /* urgent pointer */
}

/* Offset of the payload after the IPv4 header at `ip` (no options) for UDP and TCP
 * without options, or 0 for anything else. */
static __always_inline __u32 l4_payload(void *data, void *data_end, __u32 ip)
{
	struct iphdr *h = (void *)((__u8 *)data + ip);

	if ((void *)(h + 1) > data_end || h->version != 4 || h->ihl != 5)
		return 0;
	if (h->protocol == IPPROTO_UDP)
		return ip + IP4_LEN + UDP_LEN;
	if (h->protocol == IPPROTO_TCP) {
		__u8 *t = (__u8 *)data + ip + IP4_LEN;

		if ((void *)(t + TCP_LEN) > data_end || (t[12] >> 4) != TCP_LEN / 4)
			return 0;
		return ip + IP4_LEN + TCP_LEN;
	}
	return 0;
}

/* G-PDU header; with psc, the optional fields and a PDU Session Container of `pdu_type`
 * (0 DL PDU SESSION INFORMATION, 1 UL) carrying `qfi`. `tpdu_len` is the T-PDU length. */
static __always_inline void put_gtpu(__u8 *g, __u32 teid, __u16 tpdu_len, int psc,
				     __u8 pdu_type, __u8 qfi)
{
	g[0] = psc ? 0x34 : 0x30; /* version 1, PT 1, E */
	g[1] = GTP_GPDU;
	*(__u16 *)(g + 2) = bpf_htons(tpdu_len + (psc ? GTP_OPT_LEN + PSC_LEN : 0));
	*(__u32 *)(g + 4) = bpf_htonl(teid);
	if (psc) {
		*(__u16 *)(g + 8) = 0;  /* sequence number (not used: S is 0) */
		g[10] = 0;              /* N-PDU number */
		g[11] = GTP_EXT_PSC;
		g[12] = 1;              /* length in 4-octet units */
		g[13] = pdu_type << 4;
		g[14] = qfi & 0x3f;
		g[15] = 0;              /* no next extension header */
	}
}

/* Offset of the T-PDU of a G-PDU whose GTP-U header starts at `gtp`, or 0 if the frame
 * is not a well-formed G-PDU. */
static __always_inline __u32 gtpu_tpdu(void *data, void *data_end, __u32 gtp)
{
	__u8 *g = (__u8 *)data + gtp;

	if ((void *)(g + GTP_LEN) > data_end)
		return 0;
	if ((g[0] & 0xf0) != 0x30 || g[1] != GTP_GPDU)
		return 0;
	__u32 off = gtp + GTP_LEN;

	if (!(g[0] & 0x07))
		return off;
	if ((void *)(g + GTP_LEN + GTP_OPT_LEN) > data_end)
		return 0;
	__u8 next = (g[0] & 0x04) ? g[11] : 0;
	int i;

	off += GTP_OPT_LEN;
	for (i = 0; i < GTP_MAX_EXT && next; i++) {
		if (off > 256)
			return 0;
		__u8 *e = (__u8 *)data + off;

		if ((void *)(e + 1) > data_end)
			return 0;
		__u32 elen = (__u32)e[0] * 4;

		if (elen == 0)
			return 0;
		/* The next-type octet ends the header: read it as the last of 4 (a form
		 * the verifier follows). */
		__u8 *nx = e + (elen - 4);

		if ((void *)(nx + 4) > data_end)
			return 0;
		next = nx[3];
		off += elen;
	}
	return next ? 0 : off;
}

#endif
