// SPDX-License-Identifier: GPL-2.0
/* Counts and drops every frame: the receiving end of the generator-limit measurement
 * (the generator into a peer that does nothing else). */

#include "bench.h"

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
	__u32 zero = 0;
	struct bench_count *n = bpf_map_lookup_elem(&drop_count, &zero);

	if (n) {
		n->packets++;
		n->bytes += ctx->data_end - ctx->data;
	}
	return XDP_DROP;
}
