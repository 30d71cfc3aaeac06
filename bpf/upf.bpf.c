// SPDX-License-Identifier: GPL-2.0
/* The UPF data path: two thin entry points, one per interface role.
 *   xdp_n3: GTP-U in (N3 from gNBs, N9 from other UPFs): TEID -> PDRs -> FAR; or,
 *           with spreading on, the G-PDU handed to xdp_n3_cpu on another CPU.
 *   xdp_n6: plain IP in from the data network: UE address -> PDRs -> FAR.
 * The logic is in the headers under include/, one per concern; the tables in
 * include/upf_maps.h, the numbers in include/abi.h. The reference model
 * (crates/upf/src/model/) is what these programs are tested against (BPF_PROG_RUN,
 * identical verdicts, output octets and counters). */

#include "upf_maps.h"
#include "parse.h"
#include "gtpu.h"
#include "csum.h"
#include "drop.h"
#include "sdf.h"
#include "qer.h"
#include "urr.h"
#include "egress.h"
#include "direct.h"
#include "encap.h"
#include "protect.h"
#include "spread.h"
#include "app.h"

char LICENSE[] SEC("license") = "GPL";

static __always_inline struct upf_config *get_config(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&upf_cfg, &zero);
}

static __always_inline int pass_up(__u32 stat, __u64 bytes)
{
	count(stat, bytes);
	return XDP_PASS;
}

/* Unknown TEID: counted as a drop; a bounded number per second also go to upfd, which
 * answers with an Error Indication (TS 29.281 clause 7.3.1), never more than that. */
static __always_inline int unknown_teid(__u64 bytes, __u64 now)
{
	__u32 zero = 0;
	struct upf_config *cfg = get_config();
	struct slowpath_bucket *b = bpf_map_lookup_elem(&slowpath, &zero);
	int pass = 0;

	count(DROP_UNKNOWN_TEID, bytes);
	if (!cfg || !b || !cfg->slowpath_per_sec)
		return XDP_DROP;
	/* slowpath_burst events at once, then slowpath_per_sec. */
	__u64 cost = NSEC_PER_SEC / cfg->slowpath_per_sec;
	__u64 burst = cfg->slowpath_burst ? cfg->slowpath_burst : 1;

	pass = gcra(&b->tat, cost, (burst - 1) * cost, now);
	if (!pass)
		return XDP_DROP;
	count(STAT_TO_SLOWPATH, bytes);
	return XDP_PASS;
}

/* The session's own address? (uplink anti-spoofing: the inner source must be the UE's
 * address or prefix, or inside one of the session's framed routes). */
static __always_inline int source_allowed(const struct rule_set *rs, const struct flow *f)
{
	if (!rs->has_ue_v4 && !rs->ue_v6_len)
		return 1; /* the session names no UE address: nothing to check against */
	if (f->version == 4 && rs->has_ue_v4) {
		const __u8 *u = (const __u8 *)&rs->ue_v4;

		if (f->src[0] == u[0] && f->src[1] == u[1] && f->src[2] == u[2] && f->src[3] == u[3])
			return 1;
	}
	if (f->version == 6 && rs->ue_v6_len) {
		int i, ok = 1;

		for (i = 0; i < 16; i++) {
			int bits = rs->ue_v6_len - i * 8;
			__u8 m = bits >= 8 ? 0xff : bits <= 0 ? 0 : (__u8)(0xff << (8 - bits));

			if ((f->src[i] & m) != (rs->ue_v6[i] & m))
				ok = 0;
		}
		if (ok)
			return 1;
	}
	struct lpm_key k = {};

	k.family = f->version;
	__builtin_memcpy(k.addr, f->src, 16);
	k.prefixlen = 8 + (f->version == 4 ? 32 : 128);
	struct rule_set *fr = bpf_map_lookup_elem(&framed, &k);

	return fr && fr->seid == rs->seid;
}

/* Whether the packet meets PDR `p`'s conditions beyond its lookup key: QFI, SDF. */
static __always_inline int pdr_matches(const struct rule_set *rs, const struct pdr *p,
				       const struct outer *o, const struct flow *f)
{
	int j;

	if (p->qfi != QFI_ANY && (!o->has_psc || o->qfi != p->qfi))
		return 0;
	if (!p->n_sdf)
		return 1;
	for (j = 0; j < MAX_SDF_PER_PDR; j++) {
		if (j >= p->n_sdf)
			break;
		__u32 si = p->sdf + j;
		struct sdf_match *m = bpf_map_lookup_elem(&sdfs, &si);

		if (m && sdf_matches(m, f, rs->uplink))
			return 1;
	}
	return 0;
}

/* The position in rs->pdr of the PDR the rule set holds a copy of (pdr0), if it does
 * (RS_HOT_PDR0); else -1. */
static __always_inline int hot_at(const struct rule_set *rs)
{
	if (!(rs->hot & RS_HOT_PDR0))
		return -1;
	return (rs->hot >> RS_HOT_AT_SHIFT) & (MAX_PDRS_PER_KEY - 1);
}

/* The position in rs->pdr of the first PDR, in precedence order, that the packet
 * matches; -1 if none. The hot PDR (hot_at) is read from the rule set's copy. A PDR
 * with an Application ID (rs->pdr_app) matches only packets of its application (`app`,
 * 0: none) or of one of its application's flow descriptions; one of another
 * application is passed over without reading its pdrs entry unless one of the
 * application's flow descriptions (app_sdfs: few, and hot) matches the packet. A
 * global function: verified once. */
__noinline int match_pdr(const struct rule_set *rs, const struct outer *o, const struct flow *f,
			 __u32 app)
{
	int i;

	if (!rs || !o || !f)
		return -1;
	int at = hot_at(rs);

	for (i = 0; i < MAX_PDRS_PER_KEY; i++) {
		if (i >= rs->n_pdrs)
			break;
		__u32 pa = rs->pdr_app[i];

		if (pa && pa != app) {
			struct app_entry *ae = bpf_map_lookup_elem(&apps, &pa);

			if (!ae || !ae->n_sdf || !app_flows_match(ae, f, rs->uplink))
				continue;
		}
		const struct pdr *p;

		if (i == at) {
			p = &rs->pdr0;
		} else {
			__u32 idx = rs->pdr[i];

			p = bpf_map_lookup_elem(&pdrs, &idx);
		}
		if (p && pdr_matches(rs, p, o, f))
			return i;
	}
	return -1;
}

/* Hand a packet for a buffering FAR to upfd (TS 29.244 clause 5.2.1, BUFF; NOCP asks
 * for one Downlink Data Report). The copy starts at the IP header. */
static __always_inline int buffer_packet(struct xdp_md *ctx, const struct rule_set *rs,
					 const struct pdr *p, const struct far *far, __u32 l3,
					 __u32 len, __u64 now)
{
	struct event *e;

	if (len > EVENT_MAX_PACKET)
		return drop(DROP_BUFFER_FULL, len);
	e = bpf_ringbuf_reserve(&events, sizeof(*e) + EVENT_MAX_PACKET, 0);
	if (!e)
		return drop(DROP_BUFFER_FULL, len);
	e->type = EV_BUFFER;
	e->len = len;
	e->seid = rs->seid;
	e->far_id = far->id;
	e->pdr_id = p->id;
	e->urr = 0;
	e->nocp = !!(far->action & FAR_NOCP);
	e->ts_ns = now;
	if (len == 0 || bpf_xdp_load_bytes(ctx, l3, (void *)(e + 1), len)) {
		bpf_ringbuf_discard(e, 0);
		return drop(DROP_BUFFER_FULL, len);
	}
	bpf_ringbuf_submit(e, 0);
	count(STAT_BUFFERED, len);
	return XDP_DROP;
}

/* Start loading the cells PDR `p`'s (the hot PDR's) first QER and URR will update. With a million
 * sessions they are rarely in the cache, and the locked instructions that update them
 * (the QER's and the shared cell's atomics) each wait for their miss in turn;
 * plain loads issued together let the misses, page walks included, overlap (lookup_cost
 * at 1M sessions, 4 alternating runs: 1,445 -> 1,292 ns per uplink packet, 1,462 ->
 * 1,301 downlink; touching the SDF filter too did not help). */
static __always_inline void touch_rules(const struct upf_config *cfg, const struct pdr *p)
{
	touch_cells(cfg, p->qer[0], p->urr[0]);
}

/* The PDR the packet matches, from the rule set's copy when it is the hot one (`hot`),
 * else from the pdrs table; 0 if none. */
static __always_inline const struct pdr *find_pdr(const struct rule_set *rs, const struct outer *o,
						   const struct flow *f, __u32 app, int *hot)
{
	int at = match_pdr(rs, o, f, app);

	*hot = at >= 0 && at == hot_at(rs);
	if (*hot)
		return &rs->pdr0;
	if (at < 0)
		return 0;
	/* MAX_PDRS_PER_KEY is a power of two: the mask is the verifier's bound. */
	__u32 pi = rs->pdr[at & (MAX_PDRS_PER_KEY - 1)];

	return bpf_map_lookup_elem(&pdrs, &pi);
}

/* The PDR's FAR: the rule set's copy for its hot PDR, else from the fars table. */
static __always_inline const struct far *find_far(const struct rule_set *rs, const struct pdr *p,
						  int hot)
{
	__u32 far_idx = p->far;

	if (hot && (rs->hot & RS_HOT_FAR0))
		return &rs->far0;
	return bpf_map_lookup_elem(&fars, &far_idx);
}

/* Outer Header Removal must match how the packet came (8.2.64): a G-PDU's own header
 * (GTP-U/UDP/IPv4, /IPv6, or either) removed, a plain packet's none. */
static __always_inline int removal_fits(const struct pdr *p, const struct outer *o, int from_gtpu)
{
	if (from_gtpu)
		return p->ohr == 0 ? o->family == 4 : p->ohr == 1 ? o->family == 6 : p->ohr == 6;
	return p->ohr == OHR_NONE;
}

/* The PDR's QERs in order (up to MAX_QERS_PER_PDR: a flow MBR, the session AMBR, a
 * gate ...): each gate open, each MBR with room. 0 or the drop reason of the first QER
 * that refuses. A packet that is dropped uses no QER's rate: the QERs before the one
 * that refuses give back what they charged (refund(); drops are the rare path, so the
 * QERs are looked up again there rather than kept). `*q0` is the first QER with a QFI
 * (it gives the PDU Session Container). */
static __always_inline int enforce_qers(const struct pdr *p, int uplink, __u32 len, __u64 now,
					struct qer **q0)
{
	int i, v = 0, refused = MAX_QERS_PER_PDR;

	for (i = 0; i < MAX_QERS_PER_PDR; i++) {
		__u32 qi = p->qer[i];

		if (!qi)
			continue;
		struct qer *q = bpf_map_lookup_elem(&qers, &qi);

		if (!q)
			continue;
		if (!gate_open(q, uplink))
			v = DROP_GATE_CLOSED;
		else if (!mbr_conforms(q, uplink, len, now))
			v = DROP_MBR_EXCEEDED;
		if (v) {
			refused = i;
			break;
		}
		if (!*q0 && q->qfi != QFI_ANY)
			*q0 = q;
	}
	if (!v)
		return 0;
	for (i = 0; i < MAX_QERS_PER_PDR && i < refused; i++) {
		__u32 qi = p->qer[i];
		struct qer *r = qi ? bpf_map_lookup_elem(&qers, &qi) : 0;

		if (r)
			refund(r, uplink, len);
	}
	return v;
}

/* Send the rewritten frame: to the next hop found, or, decapsulated with the next hop
 * not yet resolved, to the kernel (which resolves it) with the link-layer header it
 * came with. Counts the URRs and the outcome. */
static __always_inline int send(struct xdp_md *ctx, struct upf_config *cfg, const struct rule_set *rs,
				const struct pdr *p, const struct far *far, const struct encap *e,
				const struct egress *eg, int er, const __u8 *in_dmac,
				const __u8 *in_smac, __u32 len, __u64 now, int from_gtpu)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;

	if ((void *)(eth + 1) > data_end)
		return drop(DROP_MALFORMED_IP, len);
	if (er == EGRESS_NO_NEIGH) {
		__builtin_memcpy(eth->h_dest, in_dmac, 6);
		__builtin_memcpy(eth->h_source, in_smac, 6);
		urr_count(cfg, p, rs->uplink, len, now, rs->seid);
		return pass_up(STAT_PASSED_TO_KERNEL, len);
	}
	__builtin_memcpy(eth->h_dest, eg->dmac, 6);
	__builtin_memcpy(eth->h_source, eg->smac, 6);
	if (e->outer_len && e->family == 6 &&
	    udp6_checksum(ctx, ETH_LEN, e->outer_len + len - 40))
		return drop(DROP_MALFORMED_IP, len);
	urr_count(cfg, p, rs->uplink, len, now, rs->seid);
	count(far->ohc == OHC_NONE ? STAT_FORWARDED_UPLINK
				   : (from_gtpu ? STAT_FORWARDED_N9 : STAT_FORWARDED_DOWNLINK),
	      len);
	if (eg->ifindex == ctx->ingress_ifindex)
		return XDP_TX;
	return bpf_redirect(eg->ifindex, 0);
}

/* Everything after the lookup key, in the order the reference model checks it
 * (crates/upf/src/model/pipeline.rs): source, destination (protect.h), PDR, FAR, QERs,
 * quota, headers, egress, rewrite, send. `o->inner` is the offset of the user's IP packet; `from_gtpu` says
 * whether it came in a G-PDU. */
static __always_inline int process(struct xdp_md *ctx, struct upf_config *cfg,
				   const struct rule_set *rs, struct outer *o, struct flow *f,
				   int from_gtpu)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	/* The coarse clock (the last tick's time): a fine one costs ~40 ns per packet on a
	 * VM's clock source, and a tick is far below what the MBR buckets (100 ms deep) and
	 * the URR first/last packet times (whole seconds in a Usage Report, Table
	 * 7.5.8.3-1) need. */
	__u64 now = bpf_ktime_get_coarse_ns();
	__u32 len = f->len;
	__u8 in_dmac[6], in_smac[6];
	struct ethhdr *ieth = data;

	if ((void *)(ieth + 1) > data_end)
		return drop(DROP_MALFORMED_IP, len);
	__builtin_memcpy(in_dmac, ieth->h_dest, 6);
	__builtin_memcpy(in_smac, ieth->h_source, 6);

	if (rs->hot & RS_HOT_PDR0)
		touch_rules(cfg, &rs->pdr0);
	if (rs->uplink) {
		if (!source_allowed(rs, f))
			return drop(DROP_SPOOFED_SOURCE, len);
		int c = into_core(cfg, f);

		if (c)
			return drop(c, len);
	}
	/* The packet's application, in sessions with an Application ID in a PDR. */
	__u32 app = 0;

	if (rs->hot & RS_APPS) {
		app = app_classify(ctx, rs, f, o->inner, now);
		app_dns(ctx, rs, f, o->inner, now);
	}
	int hot = 0;
	const struct pdr *p = find_pdr(rs, o, f, app, &hot);

	if (!p)
		return drop(DROP_NO_PDR, len);
	const struct far *far = find_far(rs, p, hot);

	if (!far)
		return drop(DROP_NO_PDR, len);
	if (far->action & FAR_DROP)
		return drop(DROP_FAR_DROP, len);
	if (far->action & FAR_BUFF)
		return buffer_packet(ctx, rs, p, far, o->inner, len, now);
	if (!(far->action & FAR_FORW) || !removal_fits(p, o, from_gtpu))
		return drop(DROP_UNSUPPORTED, len);
	struct qer *q0 = 0;
	int v = enforce_qers(p, rs->uplink, len, now, &q0);

	if (v)
		return drop(v, len);
	if (!urr_quota_ok(cfg, p, len, rs->seid))
		return drop(DROP_QUOTA_EXHAUSTED, len);

	struct encap e = {};

	v = plan_encap(far, p, q0, o, f, from_gtpu, &e);
	if (v)
		return drop(v, len);
	__u32 l3_len = e.outer_len + len;
	struct egress eg = {};
	int er = egress_lookup(ctx, cfg, e.family, e.src, e.dst, l3_len, now, &eg);

	if (er == EGRESS_NO_ROUTE || (er == EGRESS_NO_NEIGH && far->ohc != OHC_NONE))
		return drop(DROP_NO_ROUTE, len);
	if (er == EGRESS_OK && l3_len > eg.mtu)
		return drop(DROP_MTU_EXCEEDED, len);
	v = rewrite(ctx, far, &e, o->inner, len, f->version, from_gtpu && far->ohc != OHC_NONE);
	if (v)
		return drop(v, len);
	return send(ctx, cfg, rs, p, far, &e, &eg, er, in_dmac, in_smac, len, now, from_gtpu);
}

/* The N3 processing: a G-PDU's TEID -> rule set -> process(). */
static __always_inline int n3(struct xdp_md *ctx, struct upf_config *cfg)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct outer o = {};
	struct flow f;
	__u32 l3 = 0;
	__u32 frame = data_end - data;

	count(STAT_RECEIVED_N3, frame);
	o.family = parse_eth(data, data_end, &l3);
	if (!o.family)
		return pass_up(STAT_PASSED_TO_KERNEL, frame);
	o.l3 = l3;
	switch (parse_gtpu(data, data_end, cfg, &o)) {
	case GTPU_NOT_OURS:
		return pass_up(STAT_PASSED_TO_KERNEL, frame);
	case GTPU_SLOWPATH:
		return pass_up(STAT_TO_SLOWPATH, frame);
	case GTPU_MALFORMED:
		return drop(DROP_MALFORMED_GTPU, frame);
	}
	if (parse_inner(data, data_end, o.inner, frame, &f))
		return drop(DROP_MALFORMED_IP, frame);

	struct rule_set *rs = uplink_rules(cfg, o.teid);

	if (!rs)
		return unknown_teid(f.len, bpf_ktime_get_ns());
	return process(ctx, cfg, rs, &o, &f, 1);
}

SEC("xdp")
int xdp_n3(struct xdp_md *ctx)
{
	struct upf_config *cfg = get_config();

	if (!cfg)
		return XDP_PASS;
	/* With datapath.spread, G-PDUs go to the CPU their hash picks (include/spread.h). */
	int r = spread(ctx, cfg);

	if (r >= 0)
		return r;
	return n3(ctx, cfg);
}

/* The N3 processing on the CPU spread() picked, run by its cpumap queue. A cpumap
 * program cannot send a frame back where it came from with XDP_TX: it redirects it
 * there instead. */
SEC("xdp/cpumap")
int xdp_n3_cpu(struct xdp_md *ctx)
{
	struct upf_config *cfg = get_config();

	if (!cfg)
		return XDP_PASS;
	int v = n3(ctx, cfg);

	if (v == XDP_TX)
		return bpf_redirect(ctx->ingress_ifindex, 0);
	return v;
}

SEC("xdp")
int xdp_n6(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct upf_config *cfg = get_config();
	struct outer o = {};
	struct flow f;
	__u32 l3 = 0;
	__u32 frame = data_end - data;

	if (!cfg)
		return XDP_PASS;
	count(STAT_RECEIVED_N6, frame);
	__u8 family = parse_eth(data, data_end, &l3);

	if (!family)
		return pass_up(STAT_PASSED_TO_KERNEL, frame);
	if (parse_inner(data, data_end, l3, frame, &f))
		return pass_up(STAT_PASSED_TO_KERNEL, frame);

	struct rule_set *rs = downlink_rules(cfg, &f);

	if (!rs) {
		struct lpm_key lk = {};

		lk.family = f.version;
		__builtin_memcpy(lk.addr, f.dst, 16);
		lk.prefixlen = 8 + (f.version == 4 ? 32 : 128);
		rs = bpf_map_lookup_elem(&framed, &lk);
	}
	if (!rs)
		return pass_up(STAT_PASSED_TO_KERNEL, frame);
	o.family = f.version;
	o.l3 = l3;
	o.inner = l3;
	o.qfi = QFI_ANY;
	return process(ctx, cfg, rs, &o, &f, 0);
}

/* Not read: makes the ring buffer's record layout and the numbers of abi.h part of the
 * object's BTF, so that the Rust side gets the one generated and checks the other
 * rather than copying them by hand. */
const volatile struct event event_layout = {};
const volatile struct abi_enums abi_enums_layout = {};
const volatile struct urr_counters urr_counters_layout = {};
const volatile struct urr_shared urr_shared_layout = {};

/* Not read: puts struct app_event (EV_APP_START's record) into the object's BTF, for the
 * Rust side's generated type. */
const volatile struct app_event app_event_layout = {};
