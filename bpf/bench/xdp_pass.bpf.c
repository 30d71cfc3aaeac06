// SPDX-License-Identifier: GPL-2.0
/* XDP_PASS on the far side of a veth pair. A veth only accepts XDP_REDIRECTed frames
 * when its peer runs an XDP program (the lab's gnb and dn ends need one). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int xdp_pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
