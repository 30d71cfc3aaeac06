// SPDX-License-Identifier: GPL-2.0
/* The UPF data path: thin entry points, one per interface role, and the stages they
 * hand a packet to (include/pipeline.h):
 *   xdp_n3: GTP-U in (N3 from gNBs, N9 from other UPFs): TEID -> session; or, with
 *           spreading on, the G-PDU handed to xdp_n3_cpu on another CPU.
 *   xdp_n6: plain IP in from the data network: UE address -> session.
 *   stage_app, stage_rules, stage_egress (and their cpumap twins): application
 *           classification; PDR, FAR, QERs, quota; headers, next hop, counts, send.
 *   stage_icmp, stage_downlink (and their twins): an ICMP error for a packet too big
 *           for its link, sent back to its source (for a UE, through its downlink).
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
#include "session.h"
#include "lease.h"
#include "pipeline.h"
#include "egress.h"
#include "encap.h"
#include "protect.h"
#include "spread.h"
#include "app.h"
#include "profile.h"
#include "icmp.h"

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

	pass = gcra(&b->tat, cost, (burst - 1) * cost, now, 0);
	if (!pass)
		return XDP_DROP;
	count(STAT_TO_SLOWPATH, bytes);
	return XDP_PASS;
}

/* ---------------------------------------------------------------------------------
 * Entry: the session. */

/* Copy slot `slot`'s record into the scratch, for key line `key` (0 TEID, 1 UE): 0, or
 * -1 if there is no such entry, 1 if its record was being rewritten at every try. */
static __always_inline int load_rec(const struct upf_config *cfg, struct pkt *k, __u32 slot,
				    int key)
{
	struct sess_rec *r = sess_at(cfg, slot);

	if (!r)
		return -1;
	/* The entry's pool and this CPU's lane are read by the later stages: touch their
	 * lines now, so that their misses overlap the record's instead of following it. */
	struct lane *l = lane_of(r);

	if (l)
		k->touched = *(volatile __u8 *)l + *(volatile __u8 *)pool_of(r);
	if (rec_copy(r, key, &k->rec))
		return 1;
	k->slot = slot;
	k->key = key;
	return 0;
}

/* The record's own key `key` found: its hot PDR and lists apply. */
static __always_inline void primary_key(struct pkt *k, int key)
{
	k->primary = 1;
	k->up = k->rec.dir[key & 1].up;
	k->list = k->rec.list[key & 1];
	k->n_pdrs = k->rec.n_pdrs[key & 1];
	k->hot_at = k->rec.hot_at[key & 1];
}

/* A key of the key tables: its session's record, and its PDRs. 0, -1 (no entry) or 1
 * (being rewritten). */
static __always_inline int by_ref(const struct upf_config *cfg, struct pkt *k,
				  const struct key_ref *ref, int key)
{
	int r = load_rec(cfg, k, ref->slot, key);

	if (r)
		return r;
	if (ref->primary) {
		primary_key(k, key);
		return 0;
	}
	k->primary = 0;
	k->up = ref->up;
	k->list = ref->list;
	k->n_pdrs = 0; /* from the list */
	k->hot_at = 0xff;
	return 0;
}

/* The G-PDU's session, by its TEID: 0 found, -1 none, 1 being rewritten. */
static __always_inline int find_by_teid(const struct upf_config *cfg, struct pkt *k, __u32 teid)
{
	__u32 slot = teid_slot(cfg, teid);

	if (slot != NO_SLOT) {
		int r = load_rec(cfg, k, slot, 0);

		if (r > 0)
			return r;
		if (!r && k->rec.teid == teid) {
			primary_key(k, 0);
			return 0;
		}
	}
	struct sess_key tk = { .kind = KEY_TEID };

	__builtin_memcpy(tk.addr, &teid, 4);
	struct key_ref *ref = bpf_map_lookup_elem(&keys, &tk);

	if (!ref)
		return -1;
	return by_ref(cfg, k, ref, 0);
}

/* The session of a packet from the data network, by its destination: the UE address's
 * slot, the UE key table, then the framed routes (longest prefix). */
static __always_inline int find_by_ue(const struct upf_config *cfg, struct pkt *k)
{
	const struct flow *f = &k->f;

	if (f->version == 4 && cfg->ue_slots) {
		__u32 a;

		__builtin_memcpy(&a, f->dst, 4);
		int r = load_rec(cfg, k, bpf_ntohl(a) % cfg->ue_slots, 1);

		if (r > 0)
			return r;
		if (!r && (k->rec.flags & SR_UE_KEY) && k->rec.ue_v4 == a) {
			primary_key(k, 1);
			return 0;
		}
	}
	struct sess_key uk = {};

	uk.kind = f->version;
	__builtin_memcpy(uk.addr, f->dst, 16);
	struct key_ref *ref = bpf_map_lookup_elem(&keys, &uk);

	if (!ref) {
		struct lpm_key lk = {};

		lk.family = f->version;
		__builtin_memcpy(lk.addr, f->dst, 16);
		lk.prefixlen = 8 + (f->version == 4 ? 32 : 128);
		ref = bpf_map_lookup_elem(&framed, &lk);
	}
	if (!ref)
		return -1;
	return by_ref(cfg, k, ref, 1);
}

/* The session's own address? (uplink anti-spoofing: the inner source must be the UE's
 * address or prefix, or inside one of the session's framed routes). */
static __always_inline int source_allowed(const struct pkt *k)
{
	const struct sess_rec *rs = &k->rec;
	const struct flow *f = &k->f;

	if (!(rs->flags & SR_UE_V4) && !rs->ue_v6_len)
		return 1; /* the session names no UE address: nothing to check against */
	if (f->version == 4 && (rs->flags & SR_UE_V4)) {
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
	struct lpm_key lk = {};

	lk.family = f->version;
	__builtin_memcpy(lk.addr, f->src, 16);
	lk.prefixlen = 8 + (f->version == 4 ? 32 : 128);
	struct key_ref *fr = bpf_map_lookup_elem(&framed, &lk);

	return fr && fr->slot == k->slot;
}

/* After the lookup: the uplink checks, then the next stage. */
static __always_inline int to_stages(struct xdp_md *ctx, struct upf_config *cfg, struct pkt *k,
				     void *calls_map)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 len = k->f.len;

	if ((void *)(eth + 1) > data_end)
		return drop(DROP_MALFORMED_IP, len);
	__builtin_memcpy(k->in_dmac, eth->h_dest, 6);
	__builtin_memcpy(k->in_smac, eth->h_source, 6);
	/* The coarse clock (the last tick's time): a fine one costs ~40 ns per packet on a
	 * VM's clock source, and a tick is far below what the MBR leases (8 ms) and the URR
	 * first/last packet times (whole seconds in a Usage Report) need. */
	k->now = bpf_ktime_get_coarse_ns();
	k->app = 0;
	if (k->up) {
		if (!source_allowed(k))
			return drop(DROP_SPOOFED_SOURCE, len);
		int c = into_core(cfg, &k->f);

		if (c)
			return drop(c, len);
	}
	prof_mark(PROF_CHECKED);
	if (k->rec.flags & SR_APPS)
		bpf_tail_call(ctx, calls_map, CALL_APP);
	bpf_tail_call(ctx, calls_map, CALL_RULES);
	/* A stage missing from the array: nothing can apply the rules. */
	return drop(DROP_UNSUPPORTED, len);
}

/* The N3 processing: a G-PDU's TEID -> session -> the stages. */
static __always_inline int n3(struct xdp_md *ctx, struct upf_config *cfg, void *calls_map,
			      int cpumap)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct pkt *k = pkt_mem();
	__u32 l3 = 0;
	__u32 frame = data_end - data;

	if (!k)
		return XDP_PASS;
	prof_mark(PROF_START);
	count(STAT_RECEIVED_N3, frame);
	__builtin_memset(&k->o, 0, sizeof(k->o));
	k->o.family = parse_eth(data, data_end, &l3);
	if (!k->o.family)
		return pass_up(STAT_PASSED_TO_KERNEL, frame);
	k->o.l3 = l3;
	switch (parse_gtpu(data, data_end, cfg, &k->o)) {
	case GTPU_NOT_OURS:
		return pass_up(STAT_PASSED_TO_KERNEL, frame);
	case GTPU_SLOWPATH:
		return pass_up(STAT_TO_SLOWPATH, frame);
	case GTPU_MALFORMED:
		return drop(DROP_MALFORMED_GTPU, frame);
	}
	if (parse_inner(data, data_end, k->o.inner, frame, &k->f))
		return drop(DROP_MALFORMED_IP, frame);
	int r = find_by_teid(cfg, k, k->o.teid);

	if (r < 0)
		return unknown_teid(k->f.len, bpf_ktime_get_ns());
	if (r > 0)
		return drop(DROP_RULES_CHANGING, k->f.len);
	k->from_gtpu = 1;
	k->cpumap = cpumap;
	prof_mark(PROF_FOUND);
	return to_stages(ctx, cfg, k, calls_map);
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
	return n3(ctx, cfg, &calls, 0);
}

/* The N3 processing on the CPU spread() picked, run by its cpumap queue, through the
 * cpumap stages. */
SEC("xdp/cpumap")
int xdp_n3_cpu(struct xdp_md *ctx)
{
	struct upf_config *cfg = get_config();

	if (!cfg)
		return XDP_PASS;
	return n3(ctx, cfg, &calls_cpu, 1);
}

/* The N6 processing: a plain IP packet's destination (a UE) -> session -> the stages.
 * `made`: an ICMP error this data path made for a UE (include/icmp.h), not a frame that
 * arrived: not counted as received, and dropped as no_route if no session has the UE. */
static __always_inline int n6(struct xdp_md *ctx, void *calls_map, int made, int cpumap)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct upf_config *cfg = get_config();
	struct pkt *k = pkt_mem();
	__u32 l3 = 0;
	__u32 frame = data_end - data;

	if (!cfg || !k)
		return made ? XDP_DROP : XDP_PASS;
	prof_mark(PROF_START);
	if (!made)
		count(STAT_RECEIVED_N6, frame);
	__u8 family = parse_eth(data, data_end, &l3);

	if (!family || parse_inner(data, data_end, l3, frame, &k->f))
		return made ? drop(DROP_MALFORMED_IP, frame) : pass_up(STAT_PASSED_TO_KERNEL, frame);
	int r = find_by_ue(cfg, k);

	if (r < 0)
		return made ? drop(DROP_NO_ROUTE, k->f.len) : pass_up(STAT_PASSED_TO_KERNEL, frame);
	if (r > 0)
		return drop(DROP_RULES_CHANGING, k->f.len);
	__builtin_memset(&k->o, 0, sizeof(k->o));
	k->o.family = k->f.version;
	k->o.l3 = l3;
	k->o.inner = l3;
	k->o.qfi = QFI_ANY;
	k->from_gtpu = 0;
	k->cpumap = cpumap;
	prof_mark(PROF_FOUND);
	return to_stages(ctx, cfg, k, calls_map);
}

SEC("xdp")
int xdp_n6(struct xdp_md *ctx)
{
	return n6(ctx, &calls, 0, 0);
}

/* Stage CALL_DOWNLINK: an ICMP error for a UE, into its session's downlink rules. */
SEC("xdp")
int stage_downlink(struct xdp_md *ctx)
{
	return n6(ctx, &calls, 1, 0);
}

SEC("xdp/cpumap")
int stage_downlink_cpu(struct xdp_md *ctx)
{
	return n6(ctx, &calls_cpu, 1, 1);
}

/* ---------------------------------------------------------------------------------
 * Stage CALL_APP: the packet's application (include/app.h). */

static __always_inline int app_stage(struct xdp_md *ctx, void *calls_map)
{
	struct pkt *k = pkt_mem();

	if (!k)
		return XDP_ABORTED;
	k->app = app_classify(ctx, k);
	app_dns(ctx, k);
	prof_mark(PROF_APP);
	bpf_tail_call(ctx, calls_map, CALL_RULES);
	return drop(DROP_UNSUPPORTED, k->f.len);
}

SEC("xdp")
int stage_app(struct xdp_md *ctx)
{
	return app_stage(ctx, &calls);
}

SEC("xdp/cpumap")
int stage_app_cpu(struct xdp_md *ctx)
{
	return app_stage(ctx, &calls_cpu);
}

/* ---------------------------------------------------------------------------------
 * Stage CALL_RULES: PDR, FAR, QERs, quota. */

/* Whether the packet meets a PDR's conditions beyond its lookup key: QFI, SDF. */
static __always_inline int pdr_matches(const struct pkt *k, __u8 qfi, __u8 n_sdf, __u32 sdf)
{
	int j;

	if (qfi != QFI_ANY && (!k->o.has_psc || k->o.qfi != qfi))
		return 0;
	if (!n_sdf)
		return 1;
	for (j = 0; j < MAX_SDF_PER_PDR; j++) {
		if (j >= n_sdf)
			break;
		__u32 si = sdf + j;
		struct sdf_match *m = bpf_map_lookup_elem(&sdfs, &si);

		if (m && sdf_matches(m, &k->f, k->up))
			return 1;
	}
	return 0;
}

/* The record's hot PDR of this key, into k->pdr and k->far. */
static __always_inline void hot_into(struct pkt *k)
{
	const struct dir_rules *d = &k->rec.dir[k->key & 1];
	struct pdr *p = &k->pdr;
	struct far *f = &k->far;

	__builtin_memset(p, 0, sizeof(*p));
	p->id = d->pdr_id;
	p->qfi = d->qfi;
	p->ohr = d->ohr;
	p->ohr_ext = d->ohr_ext;
	p->n_sdf = d->n_sdf;
	p->sdf = d->sdf;
	if (d->flags & DR_QER_HOME)
		p->qer[0] = REF_HOME;
	if (d->flags & DR_URR_HOME)
		p->urr[0] = REF_HOME;
	f->id = d->far_id;
	f->action = d->action;
	f->dest = d->dest;
	f->ohc = d->ohc;
	f->flags = d->far_flags;
	f->tos = d->tos;
	f->teid = d->teid;
	f->port = d->port;
	__builtin_memcpy(f->peer, d->peer, 16);
	__builtin_memcpy(f->src, d->src, 16);
}

/* A cold PDR `h` into k->pdr, its FAR into k->far: 0, or -1 if either is missing. */
static __always_inline int cold_into(struct pkt *k, __u32 h, int keep_far)
{
	struct pdr *p = bpf_map_lookup_elem(&pdrs, &h);

	if (!p)
		return -1;
	k->pdr = *p;
	if (keep_far)
		return 0;
	__u32 fh = p->far;
	struct far *f = bpf_map_lookup_elem(&fars, &fh);

	if (!f)
		return -1;
	k->far = *f;
	return 0;
}

/* The key's hot PDR if the packet meets it: 1 (k->pdr, k->far filled), else 0. */
static __always_inline int try_hot(struct pkt *k)
{
	const struct dir_rules *d = &k->rec.dir[k->key & 1];

	if (!(d->flags & DR_VALID) || !pdr_matches(k, d->qfi, d->n_sdf, d->sdf))
		return 0;
	hot_into(k);
	if ((d->flags & DR_COLD) && cold_into(k, d->more, 1))
		return 0;
	k->hot = 1;
	return 1;
}

/* Whether the packet may be of application `a` (0: none): it is, or it matches one of
 * the application's flow descriptions. */
static __always_inline int may_be_app(const struct pkt *k, __u32 a)
{
	if (!a)
		return 0;
	if (a == k->app)
		return 1;
	struct app_entry *ae = bpf_map_lookup_elem(&apps, &a);

	return ae && ae->n_sdf && app_flows_match(ae, &k->f, k->up);
}

/* The first PDR, in precedence order, that the packet matches (k->pdr, k->far): 1, or
 * 0 if none. A PDR with an Application ID matches only packets of its application or of
 * one of its application's flow descriptions; another application's is passed over
 * without reading its entry, and when the record says which applications' PDRs come
 * before the hot one (DR_APPS), without reading the key's PDR list either. */
static __always_inline int find_pdr(struct pkt *k)
{
	int i;

	k->hot = 0;
	if (!k->list)
		return k->primary && try_hot(k);
	const struct dir_rules *d = &k->rec.dir[k->key & 1];

	if (k->primary && (d->flags & DR_APPS) && !may_be_app(k, d->more & 0xffff) &&
	    !may_be_app(k, d->more >> 16) && try_hot(k))
		return 1;
	struct pdr_list *pl = bpf_map_lookup_elem(&pdr_lists, &k->list);

	if (!pl)
		return 0;
	for (i = 0; i < MAX_PDRS_PER_KEY; i++) {
		if (i >= pl->n)
			break;
		__u32 pa = pl->app[i];

		if (pa && pa != k->app) {
			struct app_entry *ae = bpf_map_lookup_elem(&apps, &pa);

			if (!ae || !ae->n_sdf || !app_flows_match(ae, &k->f, k->up))
				continue;
		}
		if (k->primary && i == k->hot_at) {
			if (try_hot(k))
				return 1;
			continue;
		}
		__u32 h = pl->pdr[i];
		struct pdr *p = bpf_map_lookup_elem(&pdrs, &h);

		if (p && pdr_matches(k, p->qfi, p->n_sdf, p->sdf))
			return !cold_into(k, h, 0);
	}
	return 0;
}

/* Hand the user's packet (from its IP header) to upfd through the event ring as an
 * event of `type`, counted under `stat`; dropped as buffer_full when it does not fit an
 * event or the ring has no room for it. */
static __always_inline int hand_up(struct xdp_md *ctx, const struct pkt *k, __u32 type,
				   __u8 nocp, __u32 stat)
{
	struct event *e;
	__u32 len = k->f.len;

	e = bpf_ringbuf_reserve(&events, sizeof(*e) + EVENT_MAX_PACKET, 0);
	if (!e)
		return drop(DROP_BUFFER_FULL, len);
	e->type = type;
	e->len = len;
	e->seid = k->rec.seid;
	e->far_id = k->far.id;
	e->pdr_id = k->pdr.id;
	e->urr = 0;
	e->nocp = nocp;
	e->home = 0;
	e->ts_ns = k->now;
	if (len == 0 || len > EVENT_MAX_PACKET ||
	    bpf_xdp_load_bytes(ctx, k->o.inner, (void *)(e + 1), len)) {
		bpf_ringbuf_discard(e, 0);
		return drop(DROP_BUFFER_FULL, len);
	}
	bpf_ringbuf_submit(e, 0);
	count(stat, len);
	return XDP_DROP;
}

/* Hand a packet for a buffering FAR to upfd (TS 29.244 clause 5.2.1, BUFF; NOCP asks
 * for one Downlink Data Report). */
static __always_inline int buffer_packet(struct xdp_md *ctx, const struct pkt *k)
{
	return hand_up(ctx, k, EV_BUFFER, !!(k->far.action & FAR_NOCP), STAT_BUFFERED);
}

/* A packet for a FAR with Redirect Information (TS 29.244 clause 5.4.7): an uplink TCP
 * segment goes to upfd, which answers as the server would (crates/upf/src/redirect.rs);
 * nothing else of the flow can be HTTP, and nothing is forwarded. */
static __always_inline int redirect_packet(struct xdp_md *ctx, const struct pkt *k)
{
	if (!k->up || k->f.proto != 6 || k->f.len > EVENT_MAX_PACKET)
		return drop(DROP_REDIRECT_NOT_HTTP, k->f.len);
	return hand_up(ctx, k, EV_REDIRECT, 0, STAT_REDIRECTED);
}

/* Outer Header Removal must match how the packet came (8.2.64): a G-PDU's own header
 * (GTP-U/UDP/IPv4, /IPv6, or either) removed, a plain packet's none. */
static __always_inline int removal_fits(const struct pkt *k)
{
	__u8 ohr = k->pdr.ohr;

	if (k->from_gtpu)
		return ohr == 0 ? k->o.family == 4 : ohr == 1 ? k->o.family == 6 : ohr == 6;
	return ohr == OHR_NONE;
}

/* QER reference `ref` of the PDR: its parameters, pool and this CPU's lane. */
struct qer_at {
	const struct qer_params *q;
	struct pool *pool;
	struct lane *lane;
};

static __always_inline int qer_of(const struct upf_config *cfg, struct pkt *k, __u32 ref,
				  struct qer_at *at)
{
	if (ref == REF_HOME) {
		struct sess_rec *r = sess_at(cfg, k->slot);

		if (!r)
			return -1;
		at->q = &k->rec.home;
		at->pool = pool_of(r);
		at->lane = lane_of(r);
		return at->lane ? 0 : -1;
	}
	__u8 *c = cell_at(cfg, ref);

	if (!c)
		return -1;
	at->q = (const struct qer_params *)c;
	at->pool = (struct pool *)(c + CELL_POOL_AT);
	at->lane = lane_at(c, CELL_LANES_AT, cell_size());
	return at->lane ? 0 : -1;
}

/* The PDR's QERs in order (up to MAX_QERS_PER_PDR: a flow MBR, the session AMBR, a
 * gate ...): each gate open, each MBR with room. 0 or the drop reason of the first QER
 * that refuses. A packet that is dropped uses no QER's rate: the QERs before the one
 * that refuses give back what they charged. The first QER with a QFI gives the PDU
 * Session Container (k->psc_*). */
static __always_inline int enforce_qers(const struct upf_config *cfg, struct pkt *k)
{
	int i, d = k->up ? 0 : 1, v = 0, refused = MAX_QERS_PER_PDR;
	__u32 len = k->f.len;
	struct qer_at at;

	k->psc_qfi = QFI_ANY;
	for (i = 0; i < MAX_QERS_PER_PDR; i++) {
		__u32 ref = k->pdr.qer[i];

		if (!ref || qer_of(cfg, k, ref, &at))
			continue;
		if (!at.q->gate[d])
			v = DROP_GATE_CLOSED;
		else if (!mbr_take(at.pool, at.lane, at.q, d, len, k->now))
			v = DROP_MBR_EXCEEDED;
		if (v) {
			refused = i;
			break;
		}
		if (k->psc_qfi == QFI_ANY && at.q->qfi != QFI_ANY) {
			k->psc_qfi = at.q->qfi;
			k->psc_flags = at.q->flags;
			k->psc_ppi = at.q->ppi;
		}
	}
	if (!v)
		return 0;
	for (i = 0; i < MAX_QERS_PER_PDR && i < refused; i++) {
		__u32 ref = k->pdr.qer[i];

		if (ref && !qer_of(cfg, k, ref, &at))
			mbr_refund(at.pool, at.lane, at.q, d, len, k->now);
	}
	return v;
}

/* URR reference `ref`: its pool, this CPU's lane, its flags (SR_URR_* for the home one,
 * URR_* for a cold one, as URR_Q_VOLUME and URR_T_ARMED) and epochs. */
struct urr_at {
	struct pool *pool;
	struct lane *lane;
	__u32 quota;     /* it has a volume quota */
	__u32 threshold; /* its volume threshold is armed */
	__u32 epoch;
	__u32 handle;    /* for events: the cold handle, or the slot */
	__u8 home;
};

static __always_inline int urr_of(const struct upf_config *cfg, const struct pkt *k, __u32 ref,
				  struct urr_at *at)
{
	if (ref == REF_HOME) {
		struct sess_rec *r = sess_at(cfg, k->slot);

		if (!r)
			return -1;
		at->pool = pool_of(r);
		at->lane = lane_of(r);
		at->quota = k->rec.flags & SR_URR_QUOTA;
		at->threshold = k->rec.flags & SR_URR_THRESHOLD;
		at->epoch = k->rec.epoch;
		at->handle = k->slot;
		at->home = 1;
		return at->lane ? 0 : -1;
	}
	__u8 *c = cell_at(cfg, ref);

	if (!c)
		return -1;
	at->pool = (struct pool *)(c + CELL_POOL_AT);
	at->lane = lane_at(c, CELL_LANES_AT, cell_size());
	__u32 fl = *(volatile __u32 *)&at->pool->flags;

	at->quota = fl & URR_Q_VOLUME;
	at->threshold = fl & URR_T_ARMED;
	at->epoch = *(volatile __u32 *)&at->pool->epoch;
	at->handle = ref;
	at->home = 0;
	return at->lane ? 0 : -1;
}

static __always_inline void urr_event(const struct pkt *k, __u32 type, const struct urr_at *at)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e)
		return;
	__builtin_memset(e, 0, sizeof(*e));
	e->type = type;
	e->seid = k->rec.seid;
	e->pdr_id = k->pdr.id;
	e->urr = at->handle;
	e->home = at->home;
	e->ts_ns = k->now;
	bpf_ringbuf_submit(e, 0);
}

/* Every URR of the PDR with a volume quota has room for the packet (leased into this
 * CPU's lane if need be); 0 if one ran out (upfd is told once). */
static __always_inline int quotas_ok(const struct upf_config *cfg, struct pkt *k)
{
	int i;
	struct urr_at at;

	for (i = 0; i < MAX_URRS_PER_PDR; i++) {
		__u32 ref = k->pdr.urr[i];
		int notify = 0;

		if (!ref || urr_of(cfg, k, ref, &at) || !at.quota)
			continue;
		if (!quota_room(at.pool, at.lane, at.epoch, k->f.len, &notify)) {
			if (notify)
				urr_event(k, EV_QUOTA, &at);
			return 0;
		}
	}
	return 1;
}

static __always_inline int rules_stage(struct xdp_md *ctx, void *calls_map)
{
	struct upf_config *cfg = get_config();
	struct pkt *k = pkt_mem();

	if (!cfg || !k)
		return XDP_ABORTED;
	__u32 len = k->f.len;

	if (!find_pdr(k))
		return drop(DROP_NO_PDR, len);
	prof_mark(PROF_PDR);
	__u8 action = k->far.action;

	if (action & FAR_DROP)
		return drop(DROP_FAR_DROP, len);
	if (action & FAR_BUFF)
		return buffer_packet(ctx, k);
	if (!(action & FAR_FORW) || !removal_fits(k))
		return drop(DROP_UNSUPPORTED, len);
	if (k->far.flags & FAR_F_REDIRECT)
		return redirect_packet(ctx, k);
	int v = enforce_qers(cfg, k);

	if (v)
		return drop(v, len);
	if (!quotas_ok(cfg, k))
		return drop(DROP_QUOTA_EXHAUSTED, len);
	prof_mark(PROF_RULES);
	bpf_tail_call(ctx, calls_map, CALL_EGRESS);
	return drop(DROP_UNSUPPORTED, len);
}

SEC("xdp")
int stage_rules(struct xdp_md *ctx)
{
	return rules_stage(ctx, &calls);
}

SEC("xdp/cpumap")
int stage_rules_cpu(struct xdp_md *ctx)
{
	return rules_stage(ctx, &calls_cpu);
}

/* ---------------------------------------------------------------------------------
 * Stage CALL_EGRESS: headers, next hop, counts, send. */

/* URR counts (clause 5.2.2) in this CPU's lanes; quotas spend what the rules stage
 * made room for; armed thresholds lease and, at zero, raise EV_THRESHOLD. */
static __always_inline void count_urrs(const struct upf_config *cfg, const struct pkt *k)
{
	int i;
	struct urr_at at;
	__u32 len = k->f.len;

	for (i = 0; i < MAX_URRS_PER_PDR; i++) {
		__u32 ref = k->pdr.urr[i];

		if (!ref || urr_of(cfg, k, ref, &at))
			continue;
		lane_count(at.lane, k->up, len, k->now);
		if (at.quota)
			quota_spend(at.pool, at.lane, len);
		if (at.threshold && threshold_count(at.pool, at.lane, at.epoch, len))
			urr_event(k, EV_THRESHOLD, &at);
	}
}

/* Send the rewritten frame: to the next hop found, or, decapsulated with the next hop
 * not yet resolved, to the kernel (which resolves it) with the link-layer header it
 * came with. Counts the URRs and the outcome. */
static __always_inline int send(struct xdp_md *ctx, const struct upf_config *cfg,
				const struct pkt *k, const struct encap *e, const struct egress *eg,
				int er)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	__u32 len = k->f.len;

	if ((void *)(eth + 1) > data_end)
		return drop(DROP_MALFORMED_IP, len);
	if (er == EGRESS_NO_NEIGH) {
		__builtin_memcpy(eth->h_dest, k->in_dmac, 6);
		__builtin_memcpy(eth->h_source, k->in_smac, 6);
		count_urrs(cfg, k);
		return pass_up(STAT_PASSED_TO_KERNEL, len);
	}
	__builtin_memcpy(eth->h_dest, eg->dmac, 6);
	__builtin_memcpy(eth->h_source, eg->smac, 6);
	if (e->outer_len && e->family == 6 &&
	    udp6_checksum(ctx, ETH_LEN, e->outer_len + len - 40))
		return drop(DROP_MALFORMED_IP, len);
	count_urrs(cfg, k);
	count(k->far.ohc == OHC_NONE ? STAT_FORWARDED_UPLINK
				     : (k->from_gtpu ? STAT_FORWARDED_N9 : STAT_FORWARDED_DOWNLINK),
	      len);
	if (eg->ifindex == ctx->ingress_ifindex)
		/* A cpumap program cannot send a frame back with XDP_TX: it redirects. */
		return k->cpumap ? bpf_redirect(ctx->ingress_ifindex, 0) : XDP_TX;
	return bpf_redirect(eg->ifindex, 0);
}

static __always_inline int egress_stage(struct xdp_md *ctx, void *calls_map)
{
	struct upf_config *cfg = get_config();
	struct pkt *k = pkt_mem();

	if (!cfg || !k)
		return XDP_ABORTED;
	__u32 len = k->f.len;
	struct encap e = {};
	int v = plan_encap(k, &e);

	if (v)
		return drop(v, len);
	__u32 l3_len = e.outer_len + len;
	struct egress eg = {};
	int er = egress_lookup(ctx, cfg, e.family, e.src, e.dst, l3_len, k->now, &eg);

	if (er == EGRESS_NO_ROUTE || (er == EGRESS_NO_NEIGH && k->far.ohc != OHC_NONE))
		return drop(DROP_NO_ROUTE, len);
	if (er == EGRESS_OK)
		eg.mtu = configured_mtu(cfg, eg.ifindex, eg.mtu);
	if (er == EGRESS_OK && l3_len > eg.mtu) {
		count(DROP_MTU_EXCEEDED, len);
		/* What fits before the headers added here (RFC 791 and RFC 8200 minimums). */
		__u32 fits = eg.mtu > e.outer_len ? eg.mtu - e.outer_len : 0;
		__u32 least = k->f.version == 4 ? 68 : 1280;

		k->icmp_mtu = fits < least ? least : fits;
		bpf_tail_call(ctx, calls_map, CALL_ICMP);
		return XDP_DROP;
	}
	/* The user's packet crosses this UPF as a router hop, except on an N9 relay: out of
	 * TTL here, it gets a Time Exceeded (rewrite() would drop it as well). */
	int relay = k->from_gtpu && k->far.ohc != OHC_NONE;

	if (!relay && k->f.ttl <= 1) {
		count(DROP_TTL_EXCEEDED, len);
		k->icmp_mtu = 0;
		bpf_tail_call(ctx, calls_map, CALL_ICMP);
		return XDP_DROP;
	}
	prof_mark(PROF_PLANNED);
	v = rewrite(ctx, &k->far, &e, k->o.inner, len, k->f.version, relay);
	if (v)
		return drop(v, len);
	prof_mark(PROF_REWRITTEN);
	v = send(ctx, cfg, k, &e, &eg, er);
	prof_mark(PROF_SENT);
	return v;
}

SEC("xdp")
int stage_egress(struct xdp_md *ctx)
{
	return egress_stage(ctx, &calls);
}

SEC("xdp/cpumap")
int stage_egress_cpu(struct xdp_md *ctx)
{
	return egress_stage(ctx, &calls_cpu);
}

/* ---------------------------------------------------------------------------------
 * Stage CALL_ICMP: the error for a packet that did not fit or ran out of TTL
 * (include/icmp.h), counted already as dropped: to a UE through its downlink rules
 * (CALL_DOWNLINK), to a data network host back by its route. */

static __always_inline int icmp_stage(struct xdp_md *ctx, void *calls_map)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct upf_config *cfg = get_config();
	struct pkt *k = pkt_mem();

	if (!cfg || !k)
		return XDP_DROP;
	int way = icmp_way(k);

	if (way == ICMP_NONE || !icmp_eligible(data, data_end, k, cfg))
		return XDP_DROP;
	if (!icmp_budget(cfg, k))
		return drop(STAT_ICMP_LIMITED, k->f.len);
	__u8 v4 = k->f.version == 4;
	__u8 dst[16];

	__builtin_memcpy(dst, k->f.src, 16);
	if (icmp_build(ctx, cfg, k, k->icmp_mtu))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	__u32 len = data_end - data - ETH_LEN;

	if (way == ICMP_TO_UE) {
		count(STAT_ICMP_SENT, len);
		bpf_tail_call(ctx, calls_map, CALL_DOWNLINK);
		return drop(DROP_UNSUPPORTED, len);
	}
	struct egress eg = {};
	int er = egress_lookup(ctx, cfg, v4 ? 4 : 6, v4 ? (__u8 *)&cfg->icmp_src_v4 : cfg->icmp_src_v6,
			       dst, len, k->now, &eg);
	struct ethhdr *eth = data;

	if (er != EGRESS_OK || (void *)(eth + 1) > data_end)
		return drop(DROP_NO_ROUTE, len);
	__builtin_memcpy(eth->h_dest, eg.dmac, 6);
	__builtin_memcpy(eth->h_source, eg.smac, 6);
	count(STAT_ICMP_SENT, len);
	if (eg.ifindex == ctx->ingress_ifindex)
		return k->cpumap ? bpf_redirect(ctx->ingress_ifindex, 0) : XDP_TX;
	return bpf_redirect(eg.ifindex, 0);
}

SEC("xdp")
int stage_icmp(struct xdp_md *ctx)
{
	return icmp_stage(ctx, &calls);
}

SEC("xdp/cpumap")
int stage_icmp_cpu(struct xdp_md *ctx)
{
	return icmp_stage(ctx, &calls_cpu);
}

/* Not read: makes the ring buffer's record layout and the numbers of abi.h part of the
 * object's BTF, so that the Rust side gets the one generated and checks the other
 * rather than copying them by hand. */
const volatile struct event event_layout = {};
const volatile struct abi_enums abi_enums_layout = {};
const volatile struct sess_rec sess_rec_layout = {};
const volatile struct pool pool_layout = {};
const volatile struct lane lane_layout = {};
const volatile struct qer_params qer_params_layout = {};

/* Not read: puts struct app_event (EV_APP_START's record) into the object's BTF, for the
 * Rust side's generated type. */
const volatile struct app_event app_event_layout = {};
