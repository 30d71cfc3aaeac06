// SPDX-License-Identifier: GPL-2.0
/* Not part of upfd: crates/bpf/tests/gpdu_contract.rs compiles and loads it to read a
 * frame with the data path's own G-PDU parser (include/gtpu.h) and compare what it
 * reads with the codec and the reference model. The result goes to `probe_out`. */

#include "upf_maps.h"
#include "parse.h"
#include "gtpu.h"

char LICENSE[] SEC("license") = "GPL";

struct probe_result {
	__u32 verdict;  /* enum gtpu_verdict; GTPU_NOT_OURS without an IP header */
	__u32 teid;
	__u32 inner;
	__u8 has_psc;
	__u8 qfi;
	__u8 psc_type;
	__u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct probe_result);
} probe_out SEC(".maps");

SEC("xdp")
int gtpu_probe(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	struct upf_config *cfg = bpf_map_lookup_elem(&upf_cfg, &zero);
	struct probe_result *r = bpf_map_lookup_elem(&probe_out, &zero);
	struct outer o = {};
	__u32 l3 = 0;

	if (!cfg || !r)
		return XDP_ABORTED;
	__builtin_memset(r, 0, sizeof(*r));
	r->verdict = GTPU_NOT_OURS;
	o.family = parse_eth(data, data_end, &l3);
	if (!o.family)
		return XDP_PASS;
	o.l3 = l3;
	r->verdict = parse_gtpu(data, data_end, cfg, &o);
	r->teid = o.teid;
	r->inner = o.inner;
	r->has_psc = o.has_psc;
	r->qfi = o.qfi;
	r->psc_type = o.psc_type;
	return XDP_PASS;
}
