/* SPDX-License-Identifier: GPL-2.0 */
/* SDF filter matching (TS 29.244 clause 8.2.5, TS 29.212 clause 5.4.2): the flow
 * description is written for the downlink, so for uplink packets the UE side is the
 * source. Same semantics as SdfRule::matches in crates/upf/src/sdf.rs, applied to the
 * entries crates/bpf/src/compile.rs makes of a rule. */
#ifndef UPF_SDF_H
#define UPF_SDF_H

#include "upf_maps.h"
#include "parse.h"

static __always_inline int in_prefix(const __u8 *a, const struct sdf_side *s, int n)
{
	int i;

	for (i = 0; i < 16; i++) {
		if (i >= n)
			break;
		if ((a[i] & s->mask[i]) != s->addr[i])
			return 0;
	}
	return 1;
}

static __always_inline int side_ok(const struct sdf_side *s, const __u8 *addr, int alen,
				   int has_port, __u16 port, __u32 flags, __u32 f_addr,
				   __u32 f_neg, __u32 f_ports)
{
	if (flags & f_addr) {
		int inside = in_prefix(addr, s, alen);

		if (inside == !!(flags & f_neg))
			return 0;
	}
	if (flags & f_ports) {
		if (!has_port || port < s->port_lo || port > s->port_hi)
			return 0;
	}
	return 1;
}

/* A global function: verified once, not at every call site. */
__noinline int sdf_matches(const struct sdf_match *m, const struct flow *f, int uplink)
{
	if (!m || !f)
		return 0;
	__u32 fl = m->flags;
	int alen = f->version == 4 ? 4 : 16;

	if (m->ip_version && m->ip_version != f->version)
		return 0;
	if ((fl & SDF_F_PROTOCOL) && m->protocol != f->proto)
		return 0;
	const __u8 *ue_addr = uplink ? f->src : f->dst;
	const __u8 *remote_addr = uplink ? f->dst : f->src;
	__u16 ue_port = uplink ? f->sport : f->dport;
	__u16 remote_port = uplink ? f->dport : f->sport;

	if (!side_ok(&m->remote, remote_addr, alen, f->has_ports, remote_port, fl,
		     SDF_F_REMOTE_ADDR, SDF_F_REMOTE_NEGATE, SDF_F_REMOTE_PORTS))
		return 0;
	if (!side_ok(&m->ue, ue_addr, alen, f->has_ports, ue_port, fl, SDF_F_UE_ADDR,
		     SDF_F_UE_NEGATE, SDF_F_UE_PORTS))
		return 0;
	if ((fl & SDF_F_TOS) && (f->tos & m->tos_mask) != m->tos_value)
		return 0;
	if ((fl & SDF_F_SPI) && (!f->has_spi || f->spi != m->spi))
		return 0;
	if ((fl & SDF_F_FLOW_LABEL) && (!f->has_label || f->label != m->flow_label))
		return 0;
	return 1;
}

#endif
