// SPDX-License-Identifier: GPL-2.0
/* Counts and drops every IPv4/UDP frame (what the generator sends, either direction): the
 * receiving end of the generator-limit measurement (the generator into a peer that does
 * nothing else). Anything else (ARP, IPv6 neighbour discovery) goes to the kernel
 * uncounted, so the count is exactly the generator's and the link keeps resolving. */

#include "bench.h"
#include "pkt.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bench_count);
} drop_count SEC(".maps");

SEC("xdp")
int bench_drop(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + ETH_LEN;
	__u32 zero = 0;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->protocol != IPPROTO_UDP)
		return XDP_PASS;

	struct bench_count *n = bpf_map_lookup_elem(&drop_count, &zero);

	if (n) {
		n->packets++;
		n->bytes += ctx->data_end - ctx->data;
	}
	return XDP_DROP;
}
