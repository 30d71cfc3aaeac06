/* SPDX-License-Identifier: GPL-2.0 */
/* Packet parsing: Ethernet, the outer IPv4/IPv6 + UDP + GTP-U headers (TS 29.281 clause
 * 5, TS 38.415 PDU Session Container), and the inner packet's fields an SDF filter
 * looks at (crates/upf/src/sdf.rs PacketFields::from_ip is the reference). Every read
 * is bounds-checked against data_end; every loop is bounded. */
#ifndef UPF_PARSE_H
#define UPF_PARSE_H

#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <linux/in.h>
#include <bpf/bpf_endian.h>

#include "abi.h"

#define GTPU_PORT 2152
#define GTP_GPDU 255
#define EXT_PDU_SESSION_CONTAINER 0x85

/* Offsets are from the start of the frame (ctx->data). */
struct outer {
	__u32 l3;         /* outer IP header */
	__u32 gtp;        /* GTP-U header */
	__u32 inner;      /* first octet of the T-PDU */
	__u8 family;      /* 4 or 6 */
	__u8 has_psc;     /* a PDU Session Container was present */
	__u8 qfi;         /* its QFI, QFI_ANY if none */
	__u8 psc_type;    /* its PDU type (0 DL, 1 UL) */
	__u32 teid;       /* host order */
};

/* The inner packet, as an SDF filter sees it. */
struct flow {
	__u8 version;
	__u8 proto;
	__u8 tos;
	__u8 has_ports;
	__u16 sport;      /* host order */
	__u16 dport;
	__u8 has_spi;
	__u8 has_label;
	__u8 ttl;         /* TTL / hop limit */
	__u8 pad;
	__u32 spi;
	__u32 label;
	__u16 len;        /* total length (IP header included) */
	__u16 l4;         /* offset of the transport header in the frame (a first fragment); 0: none */
	__u8 src[16];     /* IPv4 in the first 4 octets */
	__u8 dst[16];
};

static __always_inline int ports_proto(__u8 p)
{
	/* TCP, UDP, DCCP, SCTP, UDP-Lite: protocol_has_ports() in sdf.rs. */
	return p == 6 || p == 17 || p == 33 || p == 132 || p == 136;
}

static __always_inline void zero16(__u8 *a)
{
	__builtin_memset(a, 0, 16);
}

/* Read the transport fields at l4 (a first fragment only), and keep where they are. */
static __always_inline void read_transport(void *data, void *data_end, __u32 l4, __u32 end,
					   struct flow *f)
{
	__u8 *p = (__u8 *)data + l4;

	f->l4 = l4;

	if (ports_proto(f->proto)) {
		if (l4 + 4 <= end && (void *)(p + 4) <= data_end) {
			f->has_ports = 1;
			f->sport = ((__u16)p[0] << 8) | p[1];
			f->dport = ((__u16)p[2] << 8) | p[3];
		}
	} else if (f->proto == 50) {
		if (l4 + 4 <= end && (void *)(p + 4) <= data_end) {
			f->has_spi = 1;
			f->spi = ((__u32)p[0] << 24) | ((__u32)p[1] << 16) | ((__u32)p[2] << 8) | p[3];
		}
	} else if (f->proto == 51) {
		if (l4 + 8 <= end && (void *)(p + 8) <= data_end) {
			f->has_spi = 1;
			f->spi = ((__u32)p[4] << 24) | ((__u32)p[5] << 16) | ((__u32)p[6] << 8) | p[7];
		}
	}
}

/* Parse the IP packet at offset `off` running to `avail` (end of the frame or of the
 * T-PDU). Returns 0, or -1 if it is not a well-formed IPv4/IPv6 packet that fits:
 * version, header length, total length <= available, no IPv6 jumbogram. */
static __always_inline int parse_inner(void *data, void *data_end, __u32 off, __u32 avail,
				       struct flow *f)
{
	__u8 *b = (__u8 *)data + off;

	if ((void *)(b + 1) > data_end)
		return -1;
	__builtin_memset(f, 0, sizeof(*f));
	if ((b[0] >> 4) == 4) {
		struct iphdr *ip = (void *)b;

		if ((void *)(ip + 1) > data_end || avail < off + 20)
			return -1;
		__u32 ihl = ip->ihl * 4;
		__u32 total = bpf_ntohs(ip->tot_len);

		if (ihl < 20 || total < ihl || off + total > avail)
			return -1;
		f->version = 4;
		f->proto = ip->protocol;
		f->tos = ip->tos;
		f->ttl = ip->ttl;
		f->len = total;
		__builtin_memcpy(f->src, &ip->saddr, 4);
		__builtin_memcpy(f->dst, &ip->daddr, 4);
		if ((bpf_ntohs(ip->frag_off) & 0x1fff) == 0)
			read_transport(data, data_end, off + ihl, off + total, f);
		return 0;
	}
	if ((b[0] >> 4) == 6) {
		struct ipv6hdr *ip6 = (void *)b;

		if ((void *)(ip6 + 1) > data_end || avail < off + 40)
			return -1;
		__u32 plen = bpf_ntohs(ip6->payload_len);

		if (plen == 0 || off + 40 + plen > avail)
			return -1;
		f->version = 6;
		f->ttl = ip6->hop_limit;
		f->len = 40 + plen;
		f->tos = (b[0] << 4) | (b[1] >> 4);
		f->has_label = 1;
		f->label = ((__u32)(b[1] & 0x0f) << 16) | ((__u32)b[2] << 8) | b[3];
		__builtin_memcpy(f->src, &ip6->saddr, 16);
		__builtin_memcpy(f->dst, &ip6->daddr, 16);

		__u32 end = off + 40 + plen;
		__u32 l4 = off + 40;
		__u8 nh = ip6->nexthdr;
		int first = 1;
		int i;

		for (i = 0; i <= IPV6_MAX_EXT; i++) {
			__u8 *h = (__u8 *)data + l4;

			if (nh == 0 || nh == 43 || nh == 60) {
				if (l4 + 2 > end || (void *)(h + 2) > data_end)
					return -1;
				nh = h[0];
				l4 += ((__u32)h[1] + 1) * 8;
				if (l4 > end)
					return -1;
			} else if (nh == 44) {
				if (l4 + 8 > end || (void *)(h + 8) > data_end)
					return -1;
				nh = h[0];
				l4 += 8;
				if ((((__u16)h[2] << 8) | h[3]) >> 3) {
					first = 0;
					break;
				}
			} else {
				break;
			}
		}
		if (i > IPV6_MAX_EXT)
			return -1;
		f->proto = nh;
		if (first)
			read_transport(data, data_end, l4, end, f);
		return 0;
	}
	return -1;
}

/* Ethernet header: the offset of the IP header and its family (4, 6), or 0. One
 * 802.1Q tag is skipped. */
static __always_inline __u8 parse_eth(void *data, void *data_end, __u32 *l3)
{
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return 0;
	__u16 proto = eth->h_proto;
	__u32 off = sizeof(*eth);

	if (proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD)) {
		__u16 *inner = (void *)((__u8 *)data + off + 2);

		if ((void *)(inner + 1) > data_end)
			return 0;
		proto = *inner;
		off += 4;
	}
	*l3 = off;
	if (proto == bpf_htons(ETH_P_IP))
		return 4;
	if (proto == bpf_htons(ETH_P_IPV6))
		return 6;
	return 0;
}

#endif
