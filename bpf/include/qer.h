/* SPDX-License-Identifier: GPL-2.0 */
/* QER enforcement (TS 29.244 clause 5.2.1, 7.5.2.5): gate status per direction and the
 * maximum bit rate as a token bucket per direction, shared by all CPUs under the QER's
 * spin lock so the rate holds whichever CPUs forward the session.
 *
 * Tokens are kept in nano-octets (octets x 10^9) so that refilling is one multiplication
 * of elapsed nanoseconds by the rate in octets per second: exact, no division. upfd keeps
 * rate <= 1.25e10 octets/s (100 Gbit/s) and burst <= rate x 1 s, and the elapsed time is
 * capped at 1 s, so nothing overflows 64 bits. `now` is the coarse clock: the bucket then
 * refills once per tick (1-4 ms), well within its depth of 100 ms of the rate, so the rate
 * over any longer window is the same. */
#ifndef UPF_QER_H
#define UPF_QER_H

#include "upf_maps.h"

#define NSEC_PER_SEC 1000000000ull

static __always_inline int bucket(__u64 *tokens, __u64 *last, __u64 rate, __u64 burst,
				  __u32 bytes, __u64 now)
{
	__u64 dt = *last ? now - *last : NSEC_PER_SEC;

	if (dt > NSEC_PER_SEC)
		dt = NSEC_PER_SEC;
	__u64 t = *tokens + dt * rate;
	__u64 cap = burst * NSEC_PER_SEC;
	__u64 cost = (__u64)bytes * NSEC_PER_SEC;

	if (t > cap)
		t = cap;
	*last = now;
	if (t < cost) {
		*tokens = t;
		return DROP_MBR;
	}
	*tokens = t - cost;
	return 0;
}

/* 0: pass; else the drop reason. */
static __always_inline int qer_check(struct qer *q, int uplink, __u32 bytes, __u64 now)
{
	int verdict = 0;

	bpf_spin_lock(&q->lock);
	if (uplink) {
		if (!q->gate_ul)
			verdict = DROP_GATE_CLOSED;
		else if (q->flags & QER_F_MBR_UL)
			verdict = bucket(&q->tokens_ul, &q->last_ul, q->rate_ul, q->burst_ul, bytes, now);
	} else {
		if (!q->gate_dl)
			verdict = DROP_GATE_CLOSED;
		else if (q->flags & QER_F_MBR_DL)
			verdict = bucket(&q->tokens_dl, &q->last_dl, q->rate_dl, q->burst_dl, bytes, now);
	}
	bpf_spin_unlock(&q->lock);
	return verdict;
}

#endif
