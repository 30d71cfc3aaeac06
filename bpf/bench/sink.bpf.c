// SPDX-License-Identifier: GPL-2.0
/* Sink for the receiving ends of the lab: gnb n3 (downlink GTP-U from the UPF) and dn n6
 * (uplink plain IP from the UPF), UDP or TCP inside. A packet of the generator (its payload starts with
 * BENCH_MAGIC) is counted per session and direction, its latency (now - the payload's
 * timestamp) goes into a log-linear histogram, and it is dropped. Anything else is
 * counted as "other" and passed, so ARP and ping keep working. */

#include "bench.h"
#include "pkt.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1024); /* resized before loading */
	__type(key, __u32);
	__type(value, struct sink_session);
} sink_sessions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct sink_totals);
} sink_totals SEC(".maps");

/* [dir * HIST_BUCKETS + bucket]: packets whose latency fell into the bucket. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2 * HIST_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} sink_latency SEC(".maps");

/* Bucket of a latency in microseconds (see bench.h). */
static __always_inline __u32 hist_bucket(__u64 us)
{
	if (us < HIST_LINEAR)
		return us;
	if (us >> HIST_MAX_BITS)
		return HIST_BUCKETS - 1;
	/* e = floor(log2(us)), 7 <= e <= 31, by binary search. */
	__u32 e = 0;
	__u64 v = us;

	if (v >> 16) {
		e += 16;
		v >>= 16;
	}
	if (v >> 8) {
		e += 8;
		v >>= 8;
	}
	if (v >> 4) {
		e += 4;
		v >>= 4;
	}
	if (v >> 2) {
		e += 2;
		v >>= 2;
	}
	if (v >> 1)
		e += 1;
	__u32 sub = (us >> (e - HIST_SUB_BITS)) & ((1 << HIST_SUB_BITS) - 1);

	return HIST_LINEAR + ((e - HIST_LINEAR_BITS) << HIST_SUB_BITS) + sub;
}

static __always_inline int other(struct sink_totals *t, __u64 bytes)
{
	t->other.packets++;
	t->other.bytes += bytes;
	return XDP_PASS;
}

SEC("xdp")
int bench_sink(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 bytes = data_end - data;
	__u32 zero = 0;
	struct sink_totals *t = bpf_map_lookup_elem(&sink_totals, &zero);

	if (!t)
		return XDP_PASS;

	struct ethhdr *eth = data;
	struct iphdr *ip = data + ETH_LEN;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return other(t, bytes);
	/* Plain UDP or TCP: uplink after decapsulation. GTP-U: downlink, look inside. */
	__u32 dir = BENCH_UL;
	__u32 off = l4_payload(data, data_end, ETH_LEN);

	if (!off)
		return other(t, bytes);
	struct udphdr *udp = (void *)(ip + 1);

	if ((void *)(udp + 1) > data_end)
		return other(t, bytes);
	if (ip->protocol == IPPROTO_UDP && udp->dest == bpf_htons(GTPU_PORT)) {
		__u32 in = gtpu_tpdu(data, data_end, off);

		if (!in || in > 512)
			return other(t, bytes);
		dir = BENCH_DL;
		off = l4_payload(data, data_end, in);
		if (!off)
			return other(t, bytes);
	}
	if (off > 1024)
		return other(t, bytes);

	struct bench_payload *p = data + off;

	if ((void *)(p + 1) > data_end || p->magic != BENCH_MAGIC)
		return other(t, bytes);

	__u32 session = p->session;
	__u64 ts = ((__u64)p->ts_hi << 32) | p->ts_lo;
	struct sink_session *s = bpf_map_lookup_elem(&sink_sessions, &session);

	if (!s) {
		t->bad_session++;
		return XDP_DROP;
	}
	s->dir[dir & 1].packets++;
	s->dir[dir & 1].bytes += bytes;
	t->dir[dir & 1].packets++;
	t->dir[dir & 1].bytes += bytes;

	if (ts) {
		__u64 now = bpf_ktime_get_ns();
		__u32 key = dir * HIST_BUCKETS + hist_bucket(now > ts ? (now - ts) / 1000 : 0);
		__u64 *h = bpf_map_lookup_elem(&sink_latency, &key);

		if (h)
			(*h)++;
	}
	return XDP_DROP;
}
