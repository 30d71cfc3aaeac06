/* SPDX-License-Identifier: GPL-2.0 */
/* URR measurement (TS 29.244 clause 5.2.2): exact packet and octet counts per direction,
 * per CPU; first and last packet times; a shared volume quota that stops forwarding
 * when used up (upfd is told once, through the event ring). Octets are those of the
 * inner IP packet, the user's traffic. */
#ifndef UPF_URR_H
#define UPF_URR_H

#include "upf_maps.h"

static __always_inline struct urr_shared *urr_shared_of(const struct upf_config *cfg, __u32 idx)
{
	__u32 k = idx * cfg->urr_stride;

	return bpf_map_lookup_elem(&urr_state, &k);
}

static __always_inline struct urr_counters *urr_counters_of(const struct upf_config *cfg,
							    __u32 idx)
{
	__u32 k = idx * cfg->urr_stride + 1 + bpf_get_smp_processor_id();

	return bpf_map_lookup_elem(&urr_state, &k);
}

/* Whether every URR of the PDR still has quota for `bytes`; 0 if one ran out. */
static __always_inline int urr_quota_ok(const struct upf_config *cfg, const struct pdr *p,
					__u32 bytes, __u64 seid)
{
	int i;

	for (i = 0; i < MAX_URRS_PER_PDR; i++) {
		__u32 idx = p->urr[i];

		if (!idx)
			continue;
		struct urr_shared *q = urr_shared_of(cfg, idx);

		if (!q || !(q->quota_flags & URR_Q_VOLUME))
			continue;
		if (q->quota < (__s64)bytes) {
			if (!(q->quota_flags & URR_Q_NOTIFIED)) {
				__sync_fetch_and_or(&q->quota_flags, URR_Q_NOTIFIED);
				struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

				if (e) {
					__builtin_memset(e, 0, sizeof(*e));
					e->type = EV_QUOTA;
					e->seid = seid;
					e->pdr_id = p->id;
					e->urr = idx;
					e->ts_ns = bpf_ktime_get_ns();
					bpf_ringbuf_submit(e, 0);
				}
			}
			return 0;
		}
	}
	return 1;
}

/* EV_THRESHOLD for URR `idx` of session `seid`. */
static __always_inline void threshold_event(const struct pdr *p, __u32 idx, __u64 seid, __u64 now)
{
	struct event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);

	if (!e)
		return;
	__builtin_memset(e, 0, sizeof(*e));
	e->type = EV_THRESHOLD;
	e->seid = seid;
	e->pdr_id = p->id;
	e->urr = idx;
	e->ts_ns = now;
	bpf_ringbuf_submit(e, 0);
}

static __always_inline void urr_count(const struct upf_config *cfg, const struct pdr *p,
				      int uplink, __u32 bytes, __u64 now, __u64 seid)
{
	int i;

	for (i = 0; i < MAX_URRS_PER_PDR; i++) {
		__u32 idx = p->urr[i];

		if (!idx)
			continue;
		struct urr_counters *c = urr_counters_of(cfg, idx);

		if (c) {
			if (uplink) {
				c->ul_packets++;
				c->ul_bytes += bytes;
			} else {
				c->dl_packets++;
				c->dl_bytes += bytes;
			}
			if (!c->first_ns)
				c->first_ns = now;
			c->last_ns = now;
		}
		struct urr_shared *q = urr_shared_of(cfg, idx);

		if (!q)
			continue;
		if (q->quota_flags & URR_Q_VOLUME)
			__sync_fetch_and_sub(&q->quota, (__s64)bytes);
		if (q->threshold_armed) {
			__s64 old = __sync_fetch_and_sub(&q->threshold, (__s64)bytes);

			/* Only the packet that crosses zero reports it. */
			if (old > 0 && old <= (__s64)bytes)
				threshold_event(p, idx, seid, now);
		}
	}
}

#endif
