/* SPDX-License-Identifier: GPL-2.0 */
/* Internet checksums (RFC 1071) and their incremental update (RFC 1624). */
#ifndef UPF_CSUM_H
#define UPF_CSUM_H

#include <linux/types.h>

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

#endif
