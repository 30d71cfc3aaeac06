/* SPDX-License-Identifier: GPL-2.0 */
/* QER enforcement and URR measurement with per-CPU leases (docs/architecture.md
 * "Leases"; crates/upf/src/model/lease.rs is the reference). A rule's shared state is a
 * pool (struct pool); each CPU spends from its own lane (struct lane) what it leased
 * from the pool with one atomic operation, so a hot session's packets on two CPUs do
 * not write the same cache line:
 *
 * - MBR (TS 29.244 clause 5.2.1, 7.5.2.5): the pool's tat is a GCRA (ITU-T I.371's
 *   virtual scheduling) per direction. A lane takes a lease of `lease` octets (or the
 *   packet's, if larger) as one event through it, admitted only if the packet alone
 *   would stay within the tolerance after it (so the last lease overshoots no more than
 *   a packet does); spends it while it lives, at most LEASE_TTL and never longer than
 *   the rate takes to earn it (so the GCRA cannot go idle and restart under a live
 *   lease); and gives back what is left before it takes another or once it expired,
 *   unless the GCRA restarted since (then its charge was forgiven already). Every octet
 *   that passes was charged at most LEASE_TTL before, and tau is the burst tolerance
 *   less LEASE_TTL: the burst is never exceeded by more than one packet, as with a
 *   GCRA per packet.
 * - Volume quota (5.2.2.2): a lane leases at most what is left / (2 x lanes) and at
 *   least what the packet lacks, only if the pool has it: a quota is never exceeded.
 * - Volume threshold: a lane leases the same way, after the packet is counted, and the
 *   lease that takes the pool to zero or below raises EV_THRESHOLD: up to one lease per
 *   lane early; upfd reads the summed counters before it reports and arms again.
 * - Counts (5.2.2): per lane, exact; upfd sums the lanes.
 *
 * upfd changes a quota or threshold by writing the pool and moving the rule's epoch; a
 * lane whose credit is of another epoch drops it. */
#ifndef UPF_LEASE_H
#define UPF_LEASE_H

#include "upf_maps.h"
#include "session.h"

#define NSEC_PER_SEC 1000000000ull

/* One event costing `cost` ns through the GCRA at `tat`: 1 if it conforms (and then tat
 * moved). Two CPUs racing may both pass at the limit; the one whose add overshoots
 * takes it back and refuses. An idle GCRA restarts from now; `restart` (if given) says
 * when, first, so that no lane gives back a charge the restart forgave. */
static __always_inline int gcra(__u64 *tat, __u64 cost, __u64 tau, __u64 now, __u64 *restart)
{
	__u64 t = *(volatile __u64 *)tat;

	if (t > now + tau)
		return 0;
	/* Idle: restart from now. If another CPU moved tat meanwhile, its value stands. */
	if (t < now) {
		if (restart)
			*(volatile __u64 *)restart = now;
		__sync_val_compare_and_swap(tat, t, now);
	}
	__u64 prev = __sync_fetch_and_add(tat, cost);

	if (prev > now + tau) {
		__sync_fetch_and_sub(tat, cost);
		return 0;
	}
	return 1;
}

static __always_inline __u64 octets_cost(__u64 cost, __u32 octets)
{
	/* upfd keeps cost < 2^47 and leases and packets are < 2^32 octets, a lease's cost
	 * at most the burst tolerance (< 2^62 ns): no overflow. */
	return (__u64)octets * cost >> QER_COST_SHIFT;
}

static __always_inline __u32 lane_time(__u64 now)
{
	return (__u32)(now >> LANE_TIME_SHIFT);
}

/* Give back `c` octets of direction `d` a lease charged, unless the GCRA restarted at
 * or after the lease's end `until` (lane time, read against `now`): then it forgave
 * the charge. (A live lease's charge is never forgiven: a lease ends before the rate
 * has earned it back.) */
static __always_inline void mbr_give(struct pool *pool, const struct qer_params *q, int d,
				     __u32 c, __u32 until, __u64 now)
{
	/* The lease's end in ns: `until` with the high bits of now. */
	__u32 ago = lane_time(now) - until;
	__u64 end = (now & ~((1ull << LANE_TIME_SHIFT) - 1)) - ((__u64)ago << LANE_TIME_SHIFT);

	if (!c || *(volatile __u64 *)&pool->restart[d] >= end)
		return;
	__sync_fetch_and_sub(&pool->tat[d], octets_cost(q->cost[d], c));
}

/* `len` octets in direction `d` through QER `q`'s MBR with this lane's credit: 1 if
 * they conform (spent), 0 if not. Without an MBR in that direction: 1. */
static __always_inline int mbr_take(struct pool *pool, struct lane *l, const struct qer_params *q,
				    int d, __u32 len, __u64 now)
{
	__u32 flag = d ? QER_F_MBR_DL : QER_F_MBR_UL;

	if (!(q->flags & flag))
		return 1;
	__u64 cost_len = octets_cost(q->cost[d], len);

	if (shared_lanes) {
		/* Lanes shared by several CPUs: no leases, every packet through the GCRA,
		 * with the whole burst tolerance. */
		return gcra(&pool->tat[d], cost_len, q->tau[d] + ((__u64)LEASE_TTL << LANE_TIME_SHIFT),
			    now, 0);
	}
	__u32 t = lane_time(now);
	int live = (__s32)(l->mbr_until - t) > 0;
	__u32 c = l->mbr_credit[d];

	if (live && c >= len) {
		l->mbr_credit[d] = c - len;
		return 1;
	}
	/* Expired: both directions' leftovers back. Short: this direction's. */
	if (!live) {
		mbr_give(pool, q, 0, l->mbr_credit[0], l->mbr_until, now);
		mbr_give(pool, q, 1, l->mbr_credit[1], l->mbr_until, now);
		l->mbr_credit[0] = 0;
		l->mbr_credit[1] = 0;
	} else if (c) {
		__sync_fetch_and_sub(&pool->tat[d], octets_cost(q->cost[d], c));
		l->mbr_credit[d] = 0;
	}
	__u32 want = q->lease[d] > len ? q->lease[d] : len;
	__u64 cost_want = octets_cost(q->cost[d], want);
	__u64 extra = cost_want - cost_len;

	/* A lease, if the packet alone would still conform after it. */
	if (q->tau[d] >= extra &&
	    gcra(&pool->tat[d], cost_want, q->tau[d] - extra, now, &pool->restart[d])) {
		__u64 life = cost_want >> LANE_TIME_SHIFT;
		__u32 until = t + (life < LEASE_TTL ? (__u32)life : LEASE_TTL);

		l->mbr_credit[d] = want - len;
		/* Both directions' credit ends at the earlier of their ends. */
		if (live && l->mbr_credit[d ^ 1] && (__s32)(l->mbr_until - until) < 0)
			until = l->mbr_until;
		l->mbr_until = until;
		return 1;
	}
	/* No room for a lease: the packet alone, as a plain GCRA would. */
	if (want > len && gcra(&pool->tat[d], cost_len, q->tau[d], now, &pool->restart[d]))
		return 1;
	return 0;
}

/* Undo mbr_take for a packet a later QER refused: its octets back to this lane's credit
 * while the lease lives, else to the pool (unless a restart forgave them). */
static __always_inline void mbr_refund(struct pool *pool, struct lane *l,
				       const struct qer_params *q, int d, __u32 len, __u64 now)
{
	__u32 flag = d ? QER_F_MBR_DL : QER_F_MBR_UL;

	if (!(q->flags & flag))
		return;
	if (shared_lanes) {
		__sync_fetch_and_sub(&pool->tat[d], octets_cost(q->cost[d], len));
		return;
	}
	if ((__s32)(l->mbr_until - lane_time(now)) <= 0) {
		mbr_give(pool, q, d, len, l->mbr_until, now);
		return;
	}
	l->mbr_credit[d] += len;
}

/* The lane's quota and threshold credit, if of the current epochs; else dropped. */
static __always_inline void lane_epoch(struct lane *l, __u32 epoch)
{
	__u32 e = l->epoch;

	if (e == epoch)
		return;
	if ((e ^ epoch) >> 16)
		l->quota_credit = 0;
	if ((e ^ epoch) & 0xffff)
		l->threshold_credit = 0;
	l->epoch = epoch;
}

/* What a lease of a quota or threshold takes: at least `need`, else what is left /
 * (LEASE_SHARE x lanes), at most LEASE_OCTETS_MAX. */
static __always_inline __u32 lease_size(__s64 left, __u32 need)
{
	if (left <= 0)
		return need;
	__u64 share = (__u64)left / (LEASE_SHARE * (__u64)lanes);

	if (share > LEASE_OCTETS_MAX)
		share = LEASE_OCTETS_MAX;
	return share > need ? (__u32)share : need;
}

/* Room in this lane's quota credit for `len` octets, leased if need be: 1, or 0 if the
 * quota cannot give it (then the packet is dropped; `*notify` set the first time). The
 * octets are spent when the packet is counted (quota_spend). */
static __always_inline int quota_room(struct pool *pool, struct lane *l, __u32 epoch, __u32 len,
				      int *notify)
{
	int i;

	if (shared_lanes) {
		if (*(volatile __s64 *)&pool->quota >= (__s64)len)
			return 1;
	} else {
		lane_epoch(l, epoch);
		__u32 c = l->quota_credit;

		if (c >= len)
			return 1;
		__u32 need = len - c;

		for (i = 0; i < 3; i++) {
			__s64 q = *(volatile __s64 *)&pool->quota;

			if (q < (__s64)need)
				break;
			__u32 take = lease_size(q, need);

			if (__sync_val_compare_and_swap(&pool->quota, q, q - take) == q) {
				l->quota_credit = c + take;
				return 1;
			}
		}
	}
	if (!(pool->flags & URR_Q_NOTIFIED)) {
		__sync_fetch_and_or(&pool->flags, URR_Q_NOTIFIED);
		*notify = 1;
	}
	return 0;
}

static __always_inline void quota_spend(struct pool *pool, struct lane *l, __u32 len)
{
	if (shared_lanes)
		__sync_fetch_and_sub(&pool->quota, (__s64)len);
	else
		l->quota_credit -= len;
}

/* Count `len` octets against the threshold: 1 if this packet's lease took the pool to
 * zero or below (raise EV_THRESHOLD). */
static __always_inline int threshold_count(struct pool *pool, struct lane *l, __u32 epoch,
					   __u32 len)
{
	if (shared_lanes) {
		__s64 old = __sync_fetch_and_sub(&pool->threshold, (__s64)len);

		return old > 0 && old <= (__s64)len;
	}
	lane_epoch(l, epoch);
	__u32 c = l->threshold_credit;

	if (c >= len) {
		l->threshold_credit = c - len;
		return 0;
	}
	__u32 need = len - c;
	__u32 take = lease_size(*(volatile __s64 *)&pool->threshold, need);
	__s64 old = __sync_fetch_and_sub(&pool->threshold, (__s64)take);

	l->threshold_credit = c + take - len;
	return old > 0 && old <= (__s64)take;
}

/* The packet's counts in the lane (uplink: the UE is the source). */
static __always_inline void lane_count(struct lane *l, int up, __u32 len, __u64 now)
{
	__u32 t = lane_time(now);

	if (!t)
		t = 1; /* 0 means "none" */
	int d = up ? 0 : 1;

	if (shared_lanes) {
		__sync_fetch_and_add(&l->packets[d], 1);
		__sync_fetch_and_add(&l->bytes[d], len);
	} else {
		l->packets[d]++;
		l->bytes[d] += len;
	}
	if (!l->first)
		l->first = t;
	l->last = t;
}

#endif
