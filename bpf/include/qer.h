/* SPDX-License-Identifier: GPL-2.0 */
/* QER enforcement (TS 29.244 clause 5.2.1, 7.5.2.5): gate status per direction and the
 * maximum bit rate per direction as a GCRA (the virtual scheduling form of a token
 * bucket, ITU-T I.371): a packet of L octets conforms if the theoretical arrival time
 * `tat` is at most `tau` ahead of now, and then moves tat to max(tat, now) + L x cost.
 * tau = burst x cost, so a session idle long enough may send `burst` octets at once
 * and then the rate. tat is one word per direction, updated with atomic instructions:
 * every CPU that forwards the session enforces the one rate, with no lock
 * (ARCHITECTURE.md: never a shared lock per packet). Two CPUs racing may both pass a
 * packet at the limit; the one whose add overshoots takes it back and drops.
 *
 * `now` is the coarse clock: tat then advances within a tick (1-4 ms) and now catches
 * up once per tick, well within tau (100 ms of the rate), so the rate over any longer
 * window is the same. crates/upf/src/model/pipeline.rs `gcra` is the reference. The
 * slow path's limit (upf.bpf.c unknown_teid) is a GCRA too. */
#ifndef UPF_QER_H
#define UPF_QER_H

#include "upf_maps.h"

#define NSEC_PER_SEC 1000000000ull

/* One event costing `cost` ns through the GCRA at `tat`: 1 if it conforms. */
static __always_inline int gcra(__u64 *tat, __u64 cost, __u64 tau, __u64 now)
{
	__u64 t = *(volatile __u64 *)tat;

	if (t > now + tau)
		return 0;
	/* Idle: restart from now. If another CPU moved tat meanwhile, its value stands. */
	if (t < now)
		__sync_val_compare_and_swap(tat, t, now);
	__u64 prev = __sync_fetch_and_add(tat, cost);

	if (prev > now + tau) {
		__sync_fetch_and_sub(tat, cost);
		return 0;
	}
	return 1;
}

/* A packet of `bytes` octets against a direction's MBR: 0 or DROP_MBR_EXCEEDED. */
static __always_inline int mbr(__u64 *tat, __u64 cost_per_octet, __u64 tau, __u32 bytes,
			       __u64 now)
{
	/* upfd keeps cost_per_octet < 2^47 and packets are < 2^16 octets: no overflow. */
	__u64 cost = ((__u64)bytes * cost_per_octet) >> QER_COST_SHIFT;

	return gcra(tat, cost, tau, now) ? 0 : DROP_MBR_EXCEEDED;
}

/* 0: pass; else the drop reason. */
static __always_inline int qer_check(struct qer *q, int uplink, __u32 bytes, __u64 now)
{
	if (uplink) {
		if (!q->gate_ul)
			return DROP_GATE_CLOSED;
		if (q->flags & QER_F_MBR_UL)
			return mbr(&q->tat_ul, q->cost_ul, q->tau_ul, bytes, now);
	} else {
		if (!q->gate_dl)
			return DROP_GATE_CLOSED;
		if (q->flags & QER_F_MBR_DL)
			return mbr(&q->tat_dl, q->cost_dl, q->tau_dl, bytes, now);
	}
	return 0;
}

#endif
