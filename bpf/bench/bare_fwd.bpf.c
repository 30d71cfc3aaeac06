// SPDX-License-Identifier: GPL-2.0
/* The I/O limit: a bare XDP forwarder with no session logic, in place of upfd.
 *   bare_n3 (on upf n3): a G-PDU to our N3 address loses Ethernet, outer IPv4, UDP and
 *       GTP-U (extension headers included) and is redirected to N6 with fixed MACs;
 *   bare_n6 (on upf n6): an IPv4 packet not addressed to us gets GTP-U/UDP/IPv4 (and a
 *       DL PDU Session Container) with one fixed TEID and is redirected to N3.
 * It does the per-packet work every UPF must do and nothing else, so the UPF's rate as
 * a ratio of this one is the cost of its session logic.
 *
 * The one-miss limit: miss_n3 and miss_n6 do the same plus one dependent read of the
 * session's 64-octet record (struct miss_record), found as upfd finds its direct slots:
 * uplink by TEID, downlink by UE address. Uplink drops a packet whose inner source is not
 * the record's UE; downlink puts the record's TEID and QFI into the header. With the
 * sessions shuffled over a table of a million, each packet's read is a cache (and TLB)
 * miss: the least any UPF that keeps per-session state pays. */

#include "bench.h"
#include "pkt.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bare_config);
} bare_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, BARE_MAX);
	__type(key, __u32);
	__type(value, struct bench_count);
} bare_stats SEC(".maps");

/* BPF_F_MMAPABLE puts the values at a page boundary: each 64-octet record is one cache
 * line, not two halves. upfbench sets max_entries to the session count. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct miss_record);
} miss_ul SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct miss_record);
} miss_dl SEC(".maps");

_Static_assert(sizeof(struct miss_record) == 64, "a record is one cache line");

static __always_inline int verdict(__u32 stat, __u64 bytes, int action)
{
	struct bench_count *n = bpf_map_lookup_elem(&bare_stats, &stat);

	if (n) {
		n->packets++;
		n->bytes += bytes;
	}
	return action;
}

static __always_inline struct bare_config *config(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&bare_cfg, &zero);
}

/* Uplink: decapsulate, redirect to N6; with `miss`, only for the TEID's session. */
static __always_inline int fwd_n3(struct xdp_md *ctx, int miss)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 bytes = data_end - data;
	struct bare_config *c = config();
	struct ethhdr *eth = data;
	struct iphdr *ip = data + ETH_LEN;

	if (!c || (void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return verdict(BARE_PASS, bytes, XDP_PASS);
	if (ip->ihl != 5 || ip->protocol != IPPROTO_UDP || ip->daddr != c->n3_ip ||
	    (ip->frag_off & bpf_htons(0x3fff)))
		return verdict(BARE_PASS, bytes, XDP_PASS);
	struct udphdr *udp = (void *)(ip + 1);

	if ((void *)(udp + 1) > data_end || udp->dest != bpf_htons(GTPU_PORT))
		return verdict(BARE_PASS, bytes, XDP_PASS);
	__u32 in = gtpu_tpdu(data, data_end, ETH_LEN + IP4_LEN + UDP_LEN);

	if (!in || in > 256)
		return verdict(BARE_PASS, bytes, XDP_PASS);
	__u8 *inner = data + in;

	if ((void *)(inner + 1) > data_end)
		return verdict(BARE_PASS, bytes, XDP_PASS);
	__u16 proto = (*inner >> 4) == 6 ? bpf_htons(ETH_P_IPV6) : bpf_htons(ETH_P_IP);

	if (miss) {
		__u8 *g = data + ETH_LEN + IP4_LEN + UDP_LEN;
		__u32 teid, src;

		if ((void *)(g + GTP_LEN) > data_end || (void *)(inner + IP4_LEN) > data_end)
			return verdict(BARE_PASS, bytes, XDP_PASS);
		__builtin_memcpy(&teid, g + 4, 4);
		teid = bpf_ntohl(teid);
		__u32 slot = teid - c->teid_lo;
		struct miss_record *r = 0;

		if (slot < c->miss_slots)
			r = bpf_map_lookup_elem(&miss_ul, &slot);
		/* The record decides the packet's fate: the read cannot be dropped. */
		__builtin_memcpy(&src, inner + 12, 4);
		if (!r || r->key != teid || (proto == bpf_htons(ETH_P_IP) && src != r->ue))
			return verdict(BARE_MISS, bytes, XDP_DROP);
	}

	/* Keep room for the new Ethernet header in front of the T-PDU. */
	if (bpf_xdp_adjust_head(ctx, (int)in - ETH_LEN))
		return verdict(BARE_ERR, bytes, XDP_DROP);
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return verdict(BARE_ERR, bytes, XDP_DROP);
	__builtin_memcpy(eth->h_dest, c->n6_dst_mac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, c->n6_src_mac, ETH_ALEN);
	eth->h_proto = proto;
	return verdict(BARE_UL, data_end - data, bpf_redirect(c->n6_ifindex, 0));
}

SEC("xdp")
int bare_n3(struct xdp_md *ctx)
{
	return fwd_n3(ctx, 0);
}

SEC("xdp")
int miss_n3(struct xdp_md *ctx)
{
	return fwd_n3(ctx, 1);
}

/* Prepend the outer headers for a T-PDU of `inner` octets; the frame already has room. */
static __always_inline int encap(struct xdp_md *ctx, struct bare_config *c, __u16 inner,
				 int psc, __u32 teid, __u8 qfi)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;

	if (data + GTPU_V4_LEN(psc) > data_end)
		return -1;
	put_eth(data, c->n3_dst_mac, c->n3_src_mac);
	put_ipv4(data + ETH_LEN, GTPU_V4_LEN(psc) - ETH_LEN + inner, c->n3_ip, c->gnb_ip);
	put_udp(data + ETH_LEN + IP4_LEN, GTPU_PORT, GTPU_PORT,
		GTPU_V4_LEN(psc) - ETH_LEN - IP4_LEN + inner);
	put_gtpu(data + ETH_LEN + IP4_LEN + UDP_LEN, teid, inner, psc, 0, qfi);
	return 0;
}

/* Downlink: encapsulate, redirect to N3; with `miss`, with the UE's session's TEID. */
static __always_inline int fwd_n6(struct xdp_md *ctx, int miss)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 bytes = data_end - data;
	struct bare_config *c = config();
	struct ethhdr *eth = data;
	struct iphdr *ip = data + ETH_LEN;

	if (!c || (void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return verdict(BARE_PASS, bytes, XDP_PASS);
	if (ip->daddr == c->n6_ip)
		return verdict(BARE_PASS, bytes, XDP_PASS);
	__u16 inner = bpf_ntohs(ip->tot_len);

	if (inner < IP4_LEN || inner > bytes - ETH_LEN)
		return verdict(BARE_PASS, bytes, XDP_PASS);

	__u32 teid = c->teid;
	__u8 qfi = c->qfi;

	if (miss) {
		__u32 ue = ip->daddr;
		__u32 slot = c->miss_slots ? bpf_ntohl(ue) % c->miss_slots : 0;
		struct miss_record *r = bpf_map_lookup_elem(&miss_dl, &slot);

		if (!r || r->key != ue)
			return verdict(BARE_MISS, bytes, XDP_DROP);
		teid = r->teid;
		qfi = r->qfi;
	}

	int psc = c->psc != 0;
	int grow = GTPU_V4_LEN(psc) - ETH_LEN;

	if (bpf_xdp_adjust_head(ctx, -grow))
		return verdict(BARE_ERR, bytes, XDP_DROP);
	if ((psc ? encap(ctx, c, inner, 1, teid, qfi) : encap(ctx, c, inner, 0, teid, qfi)) < 0)
		return verdict(BARE_ERR, bytes, XDP_DROP);
	return verdict(BARE_DL, bytes + grow, bpf_redirect(c->n3_ifindex, 0));
}

SEC("xdp")
int bare_n6(struct xdp_md *ctx)
{
	return fwd_n6(ctx, 0);
}

SEC("xdp")
int miss_n6(struct xdp_md *ctx)
{
	return fwd_n6(ctx, 1);
}
