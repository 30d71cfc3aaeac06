/* SPDX-License-Identifier: GPL-2.0 */
/* Internet checksums (RFC 1071) and their incremental update (RFC 1624). */
#ifndef UPF_CSUM_H
#define UPF_CSUM_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

static __always_inline __u16 csum_fold(__u64 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* Checksum of a 20-octet IPv4 header (no options), checksum field included as is. */
static __always_inline __u16 ipv4_csum(const void *hdr)
{
	const __u16 *w = hdr;
	__u64 sum = 0;
	int i;

	for (i = 0; i < 10; i++)
		sum += w[i];
	return csum_fold(sum);
}

/* RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'), all in network order 16-bit words. */
static __always_inline __u16 csum_replace2(__u16 check, __u16 old, __u16 new)
{
	__u64 sum = (__u16)~check;

	sum += (__u16)~old;
	sum += new;
	return csum_fold(sum);
}

#define CSUM_MAX_LEN 4096
#define CSUM_OFF_MASK 0x1fff

/* Adds octets [off, off + n) of the frame, n a constant multiple of 4, as 16-bit words. */
#define CSUM_CHUNK(n)                                                              \
	do {                                                                       \
		off &= CSUM_OFF_MASK;                                              \
		p = data + off;                                                    \
		if ((void *)(p + (n)) > data_end)                                  \
			return CSUM_SHORT;                                         \
		sum += (__u32)bpf_csum_diff(0, 0, (__be32 *)p, (n), 0);            \
		off += (n);                                                        \
		len -= (n);                                                        \
	} while (0)

/* csum_span's answer when the frame is shorter than the span. */
#define CSUM_SHORT (1ull << 63)

/* The sum (RFC 1071, not folded) of the frame's octets [off, off + len) as 16-bit words
 * in network order, an odd last octet padded with zero; CSUM_SHORT if the frame is
 * shorter. A global function: the verifier checks it once, on its own, rather than on
 * every path through its callers. */
__attribute__((noinline)) __u64 csum_span(struct xdp_md *ctx, __u32 off, __u32 len)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 sum = 0;
	__u8 *p;
	int i;

	if (off > CSUM_OFF_MASK || len > CSUM_MAX_LEN)
		return CSUM_SHORT;
	for (i = 0; i < CSUM_MAX_LEN / 512; i++) {
		if (len < 512)
			break;
		CSUM_CHUNK(512);
	}
	if (len >= 256)
		CSUM_CHUNK(256);
	if (len >= 128)
		CSUM_CHUNK(128);
	if (len >= 64)
		CSUM_CHUNK(64);
	if (len >= 32)
		CSUM_CHUNK(32);
	if (len >= 16)
		CSUM_CHUNK(16);
	if (len >= 8)
		CSUM_CHUNK(8);
	if (len >= 4)
		CSUM_CHUNK(4);
	off &= CSUM_OFF_MASK;
	p = data + off;
	if (len >= 2) {
		if ((void *)(p + 2) > data_end)
			return CSUM_SHORT;
		sum += *(__u16 *)p;
		p += 2;
		len -= 2;
	}
	if (len) {
		if ((void *)(p + 1) > data_end)
			return CSUM_SHORT;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		sum += p[0];
#else
		sum += (__u16)p[0] << 8;
#endif
	}
	return sum;
}

/* The UDP checksum of the GTP-U datagram behind the outer IPv6 header at `l3` (RFC 8200
 * clause 8.1: mandatory over IPv6, and receivers drop a zero one), written into it.
 * `len` is the UDP length. A global function, as csum_span. 0, or -1 if the frame is
 * shorter. */
__attribute__((noinline)) int udp6_checksum(struct xdp_md *ctx, __u32 l3, __u32 len)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p;

	if (l3 > 64 || len > CSUM_MAX_LEN || len < 8)
		return -1;
	p = data + l3 + 40;
	if ((void *)(p + 8) > data_end)
		return -1;
	*(__u16 *)(p + 6) = 0;
	/* The pseudo-header: source and destination addresses, length and next header. */
	__u64 addrs = csum_span(ctx, l3 + 8, 32);
	__u64 sum = csum_span(ctx, l3 + 40, len);

	if ((addrs | sum) >> 63)
		return -1;
	sum += addrs + bpf_htons(IPPROTO_UDP) + bpf_htons((__u16)len);
	__u16 c = csum_fold(sum);

	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	p = data + ((l3 + 40) & CSUM_OFF_MASK);
	if ((void *)(p + 8) > data_end)
		return -1;
	*(__u16 *)(p + 6) = c ? c : 0xffff;
	return 0;
}

#endif
