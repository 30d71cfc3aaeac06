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

/* A direction's gate: 1 if open. */
static __always_inline int gate_open(const struct qer *q, int uplink)
{
	return uplink ? q->gate_ul : q->gate_dl;
}

/* What a packet of `bytes` octets costs the QER's MBR in its direction; 0 without one. */
static __always_inline __u64 mbr_cost(const struct qer *q, int uplink, __u32 bytes)
{
	__u32 flag = uplink ? QER_F_MBR_UL : QER_F_MBR_DL;

	if (!(q->flags & flag))
		return 0;
	/* upfd keeps cost_ul/dl < 2^47 and packets are < 2^16 octets: no overflow. */
	return ((__u64)bytes * (uplink ? q->cost_ul : q->cost_dl)) >> QER_COST_SHIFT;
}

/* The packet against the QER's MBR in its direction: 1 if it conforms (its cost then
 * added to tat; refund() takes it back if a later QER drops the packet); always 1
 * without an MBR. */
static __always_inline int mbr_conforms(struct qer *q, int uplink, __u32 bytes, __u64 now)
{
	__u32 flag = uplink ? QER_F_MBR_UL : QER_F_MBR_DL;

	if (!(q->flags & flag))
		return 1;
	return gcra(uplink ? &q->tat_ul : &q->tat_dl, mbr_cost(q, uplink, bytes),
		    uplink ? q->tau_ul : q->tau_dl, now);
}

/* Give back what mbr_conforms() charged for a packet that was dropped after all. */
static __always_inline void refund(struct qer *q, int uplink, __u32 bytes)
{
	__u64 cost = mbr_cost(q, uplink, bytes);

	if (cost)
		__sync_fetch_and_sub(uplink ? &q->tat_ul : &q->tat_dl, cost);
}

#endif
