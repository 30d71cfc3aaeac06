// SPDX-License-Identifier: GPL-2.0
/* Traffic generator, run by BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES: each run turns
 * the frame into one packet of the next session and sends it (XDP_TX: out of the veth
 * named as ingress, to its peer; or bpf_redirect).
 *   uplink:   Ethernet/IPv4/UDP 2152/GTP-U G-PDU [+ PDU Session Container, UL, QFI]
 *             around IPv4/UDP from the UE to a data-network host;
 *   downlink: Ethernet/IPv4/UDP from a data-network host to the UE;
 * size table entries marked BENCH_SIZE_TCP carry TCP (ACK|PSH, from or to the
 * data-network port tcp_port) instead of UDP, so a mix can be HTTP-like and UDP.
 * The kernel recycles frame pages without resetting them (a receiver may have rewritten
 * them), so every header is written whole on every packet. Sessions are taken round
 * robin; frame sizes cycle through the size table, shifted by one each round so every
 * session sees every size. With gen_pace set, a run sends only when its packet is due
 * (a token bucket on bpf_ktime_get_ns()) and only while the budget lasts.
 *
 * bench_gen_dual generates both directions from one BPF_PROG_RUN call: every run picks
 * the direction whose packet is next (struct gen_pace), writes it from that direction's
 * configuration and state (entry BENCH_UL or BENCH_DL of gen_cfg, gen_state, gen_pace;
 * one session table) and redirects it into gen_ports[dir], a devmap: a devmap entry
 * names its device in the namespace of the thread that wrote it, so one program reaches
 * gnb's n3 and dn's n6 whatever namespace the call runs in. bench_gen uses entry 0. */

#include "bench.h"
#include "pkt.h"

char LICENSE[] SEC("license") = "GPL";

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BENCH_PORTS);
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
	__uint(max_entries, BENCH_PORTS);
	__type(key, __u32);
	__type(value, struct gen_cpu);
} gen_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, BENCH_PORTS);
	__type(key, __u32);
	__type(value, struct gen_pace);
} gen_pace SEC(".maps");

/* bench_gen_dual's egress: ifindex values, each resolved in the writer's namespace. */
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, BENCH_PORTS);
	__type(key, __u32);
	__type(value, __u32);
} gen_ports SEC(".maps");

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

/* IPv4/UDP/payload, or with tcp IPv4/TCP/payload, of `len` octets (the whole IP packet)
 * at p. A segment's sequence number advances by a full-sized segment per packet. */
static __always_inline void put_inner(void *p, __u16 len, __u32 src, __u32 dst, __u16 sport,
				      __u16 dport, int tcp, __u32 session, __u32 seq, __u64 ts)
{
	if (tcp) {
		put_ipv4_proto(p, len, src, dst, IPPROTO_TCP);
		put_tcp((__u8 *)p + IP4_LEN, sport, dport, seq * 1460, session);
		put_payload((__u8 *)p + IP4_LEN + TCP_LEN, session, seq, ts);
	} else {
		put_ipv4(p, len, src, dst);
		put_udp((__u8 *)p + IP4_LEN, sport, dport, len - IP4_LEN);
		put_payload((__u8 *)p + IP4_LEN + UDP_LEN, session, seq, ts);
	}
}

/* A G-PDU of `flen` octets; the caller has checked that the headers and payload fit. */
static __always_inline void put_uplink(void *data, __u32 flen, struct gen_config *c,
				       struct gen_session *s, int psc, int tcp, __u32 session,
				       __u32 seq, __u64 ts)
{
	__u32 hdr = GTPU_V4_LEN(psc);
	__u16 inner = flen - hdr;

	put_eth(data, c->dst_mac, c->src_mac);
	put_ipv4(data + ETH_LEN, flen - ETH_LEN, c->src_ip, c->dst_ip);
	put_udp(data + ETH_LEN + IP4_LEN, GTPU_PORT, GTPU_PORT, flen - ETH_LEN - IP4_LEN);
	put_gtpu(data + ETH_LEN + IP4_LEN + UDP_LEN, s->teid, inner, psc, 1, c->qfi);
	put_inner(data + hdr, inner, s->ue, s->dn, c->ue_port, tcp ? c->tcp_port : c->dn_port,
		  tcp, session, seq, ts);
}

/* Writes the whole frame (data..data_end) of session s; tcp: a TCP segment, else UDP.
 * -1 if the frame is too short for the headers and payload. */
static __always_inline int write_frame(void *data, void *data_end, struct gen_config *c,
				       struct gen_session *s, const int tcp, __u32 session,
				       __u32 seq, __u64 ts)
{
	__u32 flen = data_end - data;
	__u32 l4 = tcp ? TCP_LEN : UDP_LEN;

	if (c->dir == BENCH_UL) {
		if (c->psc) {
			if (data + GTPU_V4_LEN(1) + IP4_LEN + l4 + PAYLOAD_LEN > data_end)
				return -1;
			put_uplink(data, flen, c, s, 1, tcp, session, seq, ts);
		} else {
			if (data + GTPU_V4_LEN(0) + IP4_LEN + l4 + PAYLOAD_LEN > data_end)
				return -1;
			put_uplink(data, flen, c, s, 0, tcp, session, seq, ts);
		}
	} else {
		if (data + ETH_LEN + IP4_LEN + l4 + PAYLOAD_LEN > data_end)
			return -1;
		put_eth(data, c->dst_mac, c->src_mac);
		put_inner(data + ETH_LEN, flen - ETH_LEN, s->dn, s->ue,
			  tcp ? c->tcp_port : c->dn_port, c->ue_port, tcp, session, seq, ts);
	}
	return 0;
}

/* A run's packet is due (paced) now: schedule the next one; after a gap (between
 * calls), restart the schedule rather than burst to catch up. next_ps 0: the first
 * packet, the schedule starts now. */
static __always_inline void pace_next(struct gen_pace *pace, __u64 now_ps)
{
	__u64 floor = pace->next_ps ? now_ps - pace->burst_ps : now_ps;

	pace->next_ps = (pace->next_ps > floor ? pace->next_ps : floor) + pace->interval_ps;
}

/* Writes the next packet of configuration c and CPU state st into the frame and
 * advances st; 0, or -1 if the frame cannot hold it (XDP_ABORTED). now: the time if the
 * caller read it, else 0. */
static __always_inline int gen_packet(struct xdp_md *ctx, struct gen_config *c,
				      struct gen_cpu *st, __u64 now)
{
	if (!c->n_sessions || !c->n_sizes)
		return -1;
	__u32 si = st->session < c->n_sessions ? st->session : 0;
	__u32 sm = st->session_mod < c->n_sizes ? st->session_mod : 0;
	__u32 round = st->round < c->n_sizes ? st->round : 0;
	struct gen_session *s = bpf_map_lookup_elem(&gen_sessions, &si);

	if (!s)
		return -1;

	/* Size of this packet: (session + round) % n_sizes. */
	__u32 pos = sm + round;

	if (pos >= c->n_sizes)
		pos -= c->n_sizes;
	__u32 entry = c->sizes[pos & (BENCH_MAX_SIZES - 1)];
	__u32 len = entry & BENCH_SIZE_LEN;
	int tcp = !!(entry & BENCH_SIZE_TCP);
	/* The frame as handed over: the largest size (of both directions, dual). */
	__u32 full = ctx->data_end - ctx->data;

	if (len < full) {
		if (bpf_xdp_adjust_tail(ctx, (int)len - (int)full))
			return -1;
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

	/* A constant tcp in each call, so the verifier sees constant bounds. */
	if (tcp ? write_frame(data, data_end, c, s, 1, session, seq, ts)
		: write_frame(data, data_end, c, s, 0, session, seq, ts))
		return -1;

	/* Only a packet generated advances the state: the per-session counts Rust derives from
	 * `packets` stay exact. */
	st->session = si;
	st->session_mod = sm;
	st->round = round;
	st->packets++;
	st->bytes += flen;
	return 0;
}

SEC("xdp")
int bench_gen(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct gen_config *c = bpf_map_lookup_elem(&gen_cfg, &zero);
	struct gen_cpu *st = bpf_map_lookup_elem(&gen_state, &zero);
	struct gen_pace *pace = bpf_map_lookup_elem(&gen_pace, &zero);

	if (!c || !st || !pace)
		return XDP_ABORTED;

	__u64 now = 0;

	if (pace->interval_ps) {
		if (!pace->budget)
			return XDP_DROP;
		now = bpf_ktime_get_ns();
		if (now * 1000 < pace->next_ps)
			return XDP_DROP;
		pace_next(pace, now * 1000);
	}
	if (gen_packet(ctx, c, st, now))
		return XDP_ABORTED;
	if (pace->interval_ps)
		pace->budget--;
	if (c->redirect)
		return bpf_redirect(c->redirect, 0);
	return XDP_TX;
}

/* When the next packet of a paced direction of bench_gen_dual is due, in ps: on
 * schedule, but no sooner than gap_ps after the last one. */
static __always_inline __u64 due_ps(struct gen_pace *p)
{
	__u64 earliest = p->last_ns * 1000 + p->gap_ps;

	return p->next_ps > earliest ? p->next_ps : earliest;
}

/* The paced direction whose packet is due at now_ps (the earlier one if both are), or
 * -1; at[]: when each is due. */
static __always_inline int due_dir(int paced0, int paced1, __u64 at0, __u64 at1, __u64 now_ps)
{
	int due0 = paced0 && now_ps >= at0;
	int due1 = paced1 && now_ps >= at1;

	if (due0 && due1)
		return at1 < at0 ? BENCH_DL : BENCH_UL;
	if (due0)
		return BENCH_UL;
	if (due1)
		return BENCH_DL;
	return -1;
}

struct spin {
	__u64 until; /* ns */
	__u64 now;
};

static long spin_step(__u64 i, void *data)
{
	struct spin *s = data;

	s->now = bpf_ktime_get_ns();
	return s->now >= s->until;
}

SEC("xdp")
int bench_gen_dual(struct xdp_md *ctx)
{
	__u32 ul = BENCH_UL, dl = BENCH_DL;
	struct gen_pace *p0 = bpf_map_lookup_elem(&gen_pace, &ul);
	struct gen_pace *p1 = bpf_map_lookup_elem(&gen_pace, &dl);
	struct gen_cpu *s0 = bpf_map_lookup_elem(&gen_state, &ul);
	struct gen_cpu *s1 = bpf_map_lookup_elem(&gen_state, &dl);

	if (!p0 || !p1 || !s0 || !s1)
		return XDP_ABORTED;

	__u64 now = 0;
	int dir = -1;
	int paced0 = p0->interval_ps && p0->budget;
	int paced1 = p1->interval_ps && p1->budget;
	int free0 = !p0->interval_ps && p0->budget;
	int free1 = !p1->interval_ps && p1->budget;

	/* A paced packet that is due first; the earlier one if both are. */
	if (paced0 || paced1) {
		now = bpf_ktime_get_ns();
		/* When this call's runs began and ended: Rust sizes calls by them. */
		struct gen_pace *pr = paced0 ? p0 : p1;

		if (!pr->run_first_ns)
			pr->run_first_ns = now;
		pr->run_last_ns = now;
		__u64 at0 = due_ps(p0), at1 = due_ps(p1);

		dir = due_dir(paced0, paced1, at0, at1, now * 1000);
		if (dir < 0 && !free0 && !free1 && p0->spin_ns) {
			/* Nothing else to send: wait for the next one, spin_ns at most. */
			__u64 at = paced0 ? at0 : at1;

			if (paced0 && paced1 && at1 < at)
				at = at1;
			struct spin s = { .until = at / 1000 + 1, .now = now };

			if (s.until > now + p0->spin_ns)
				s.until = now + p0->spin_ns;
			bpf_loop(1 << 20, spin_step, &s, 0);
			now = s.now;
			pr->run_last_ns = now;
			dir = due_dir(paced0, paced1, at0, at1, now * 1000);
		}
		/* The schedule goes on from the first packet, whenever this one went. */
		if (dir == BENCH_UL)
			p0->next_ps = (p0->next_ps ? p0->next_ps : now * 1000) + p0->interval_ps;
		else if (dir == BENCH_DL)
			p1->next_ps = (p1->next_ps ? p1->next_ps : now * 1000) + p1->interval_ps;
	}
	/* Else an unpaced one; both: smooth weighted round robin on this CPU. */
	if (dir < 0) {
		if (free0 && free1) {
			s0->credit += p0->weight;
			s1->credit += p1->weight;
			if (s1->credit > s0->credit) {
				dir = BENCH_DL;
				s1->credit -= p0->weight + p1->weight;
			} else {
				dir = BENCH_UL;
				s0->credit -= p0->weight + p1->weight;
			}
		} else if (free0) {
			dir = BENCH_UL;
		} else if (free1) {
			dir = BENCH_DL;
		} else {
			return XDP_DROP;
		}
	}

	__u32 key = dir;
	struct gen_config *c = bpf_map_lookup_elem(&gen_cfg, &key);
	struct gen_pace *p = dir == BENCH_UL ? p0 : p1;

	if (!c)
		return XDP_ABORTED;
	if (gen_packet(ctx, c, dir == BENCH_UL ? s0 : s1, now))
		return XDP_ABORTED;
	p->budget--;
	if (p->interval_ps) {
		if (!p->first_ns)
			p->first_ns = now;
		p->last_ns = now;
	}
	return bpf_redirect_map(&gen_ports, key, 0);
}
