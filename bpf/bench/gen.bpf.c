// SPDX-License-Identifier: GPL-2.0
/* Traffic generator, run by BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES: each run turns
 * the frame into one packet of the next session and sends it (XDP_TX: out of the veth
 * named as ingress, to its peer; or bpf_redirect).
 *   uplink:   Ethernet/IPv4/UDP 2152/GTP-U G-PDU [+ PDU Session Container, UL, QFI]
 *             around IPv4/UDP from the UE to a data-network host;
 *   downlink: Ethernet/IPv4/UDP from a data-network host to the UE.
 * The kernel recycles frame pages without resetting them (a receiver may have rewritten
 * them), so every header is written whole on every packet. Sessions are taken round
 * robin; frame sizes cycle through the size table, shifted by one each round so every
 * session sees every size. With gen_pace set, a run sends only when its packet is due
 * (a token bucket on bpf_ktime_get_ns()) and only while the budget lasts. */

#include "bench.h"
#include "pkt.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_config);
} gen_cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1024); /* resized before loading */
	__type(key, __u32);
	__type(value, struct gen_session);
} gen_sessions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_cpu);
} gen_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_pace);
} gen_pace SEC(".maps");

#define PAYLOAD_LEN sizeof(struct bench_payload)

static __always_inline void put_payload(void *p, __u32 session, __u32 seq, __u64 ts)
{
	struct bench_payload *pl = p;

	pl->magic = BENCH_MAGIC;
	pl->session = session;
	pl->seq = seq;
	pl->ts_lo = (__u32)ts;
	pl->ts_hi = (__u32)(ts >> 32);
}

/* IPv4/UDP/payload of `len` octets (the whole IP packet) at p. */
static __always_inline void put_inner(void *p, __u16 len, __u32 src, __u32 dst, __u16 sport,
				      __u16 dport, __u32 session, __u32 seq, __u64 ts)
{
	put_ipv4(p, len, src, dst);
	put_udp((__u8 *)p + IP4_LEN, sport, dport, len - IP4_LEN);
	put_payload((__u8 *)p + IP4_LEN + UDP_LEN, session, seq, ts);
}

/* A G-PDU of `flen` octets; the caller has checked that the headers and payload fit. */
static __always_inline void put_uplink(void *data, __u32 flen, struct gen_config *c,
				       struct gen_session *s, int psc, __u32 session, __u32 seq,
				       __u64 ts)
{
	__u32 hdr = GTPU_V4_LEN(psc);
	__u16 inner = flen - hdr;

	put_eth(data, c->dst_mac, c->src_mac);
	put_ipv4(data + ETH_LEN, flen - ETH_LEN, c->src_ip, c->dst_ip);
	put_udp(data + ETH_LEN + IP4_LEN, GTPU_PORT, GTPU_PORT, flen - ETH_LEN - IP4_LEN);
	put_gtpu(data + ETH_LEN + IP4_LEN + UDP_LEN, s->teid, inner, psc, 1, c->qfi);
	put_inner(data + hdr, inner, s->ue, s->dn, c->ue_port, c->dn_port, session, seq, ts);
}

SEC("xdp")
int bench_gen(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct gen_config *c = bpf_map_lookup_elem(&gen_cfg, &zero);
	struct gen_cpu *st = bpf_map_lookup_elem(&gen_state, &zero);

	struct gen_pace *pace = bpf_map_lookup_elem(&gen_pace, &zero);

	if (!c || !st || !pace || !c->n_sessions || !c->n_sizes)
		return XDP_ABORTED;

	__u64 now = 0;

	if (pace->interval_ps) {
		if (!pace->budget)
			return XDP_DROP;
		now = bpf_ktime_get_ns();
		__u64 now_ps = now * 1000;

		if (now_ps < pace->next_ps)
			return XDP_DROP;
		/* Due: schedule the next one; after a gap (between calls), restart the
		 * schedule rather than burst to catch up. */
		__u64 floor = now_ps - pace->burst_ps;

		pace->next_ps = (pace->next_ps > floor ? pace->next_ps : floor) + pace->interval_ps;
	}

	__u32 si = st->session < c->n_sessions ? st->session : 0;
	__u32 sm = st->session_mod < c->n_sizes ? st->session_mod : 0;
	__u32 round = st->round < c->n_sizes ? st->round : 0;
	struct gen_session *s = bpf_map_lookup_elem(&gen_sessions, &si);

	if (!s)
		return XDP_ABORTED;

	/* Size of this packet: (session + round) % n_sizes. */
	__u32 pos = sm + round;

	if (pos >= c->n_sizes)
		pos -= c->n_sizes;
	__u32 len = c->sizes[pos & (BENCH_MAX_SIZES - 1)];

	if (len < c->max_size) {
		if (bpf_xdp_adjust_tail(ctx, (int)len - (int)c->max_size))
			return XDP_ABORTED;
	}

	/* Next session, next round. */
	__u32 session = si;

	if (++sm >= c->n_sizes)
		sm = 0;
	if (++si >= c->n_sessions) {
		si = 0;
		sm = 0;
		if (++round >= c->n_sizes)
			round = 0;
	}

	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 flen = data_end - data;
	__u32 seq = (__u32)st->packets;
	__u64 ts = c->timestamps ? (now ? now : bpf_ktime_get_ns()) : 0;

	if (c->dir == BENCH_UL) {
		if (c->psc) {
			if (data + GTPU_V4_LEN(1) + IP4_LEN + UDP_LEN + PAYLOAD_LEN > data_end)
				return XDP_ABORTED;
			put_uplink(data, flen, c, s, 1, session, seq, ts);
		} else {
			if (data + GTPU_V4_LEN(0) + IP4_LEN + UDP_LEN + PAYLOAD_LEN > data_end)
				return XDP_ABORTED;
			put_uplink(data, flen, c, s, 0, session, seq, ts);
		}
	} else {
		if (data + ETH_LEN + IP4_LEN + UDP_LEN + PAYLOAD_LEN > data_end)
			return XDP_ABORTED;
		put_eth(data, c->dst_mac, c->src_mac);
		put_inner(data + ETH_LEN, flen - ETH_LEN, s->dn, s->ue, c->dn_port, c->ue_port,
			  session, seq, ts);
	}

	/* Only a packet generated advances the state: the per-session counts Rust derives from
	 * `packets` stay exact. */
	st->session = si;
	st->session_mod = sm;
	st->round = round;
	st->packets++;
	st->bytes += flen;
	if (pace->interval_ps)
		pace->budget--;
	if (c->redirect)
		return bpf_redirect(c->redirect, 0);
	return XDP_TX;
}
