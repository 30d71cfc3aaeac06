// SPDX-License-Identifier: GPL-2.0
/* Not part of upfd: the driver of crates/bpf/src/scaling.rs. BPF_PROG_RUN runs it with
 * a large repeat count on one frame; each run puts the frame back as it was (the UPF
 * program decapsulated or encapsulated it in place the run before), writes the next
 * session's TEID and UE address from its CPU's walk, and tail-calls the UPF program
 * (`target`), so every repeat is one whole packet of the data path, on this CPU, with
 * no generator and no syscall per packet. What it adds is measured alone (target
 * empty: the tail call falls through). */

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

#define FRAME_MAX 256
#define REWRITTEN 80

/* The frame to send, and where the session's keys go in it (0: not written). */
struct frame_template {
	__u32 len;
	__u32 teid_off; /* TEID, network order */
	__u32 ue_off;   /* UE IPv4 address, network order */
	__u32 pad;
	__u8 frame[FRAME_MAX];
};

/* One session's keys, in the order a CPU walks them. */
struct session_keys {
	__be32 teid;
	__be32 ue;
};

/* A CPU's walk: sessions[lo .. lo + n), the next at lo + next. */
struct walk {
	__u32 next;
	__u32 lo;
	__u32 n;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct frame_template);
} template SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); /* resized to the session count before loading */
	__type(key, __u32);
	__type(value, struct session_keys);
} sessions SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct walk);
} walks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} target SEC(".maps");

SEC("xdp")
int drive(struct xdp_md *ctx)
{
	__u32 zero = 0;
	struct frame_template *t = bpf_map_lookup_elem(&template, &zero);
	struct walk *w = bpf_map_lookup_elem(&walks, &zero);

	if (!t || !w || !w->n)
		return XDP_ABORTED;
	__u32 len = t->len;

	if (len < REWRITTEN || len > FRAME_MAX)
		return XDP_ABORTED;
	/* The UPF program moved the start (decapsulated: later; encapsulated: earlier)
	 * and never the end: move it back. */
	int delta = (int)bpf_xdp_get_buff_len(ctx) - (int)len;

	if (delta && bpf_xdp_adjust_head(ctx, delta))
		return XDP_ABORTED;
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;

	/* What the UPF programs write lies in the first REWRITTEN octets (the Ethernet
	 * header, the GTP-U header it overwrites, the inner TTL and checksum): copied with
	 * direct access (bpf_xdp_store_bytes of a whole frame cost ~65 ns). */
	if (data + REWRITTEN > data_end)
		return XDP_ABORTED;
	__builtin_memcpy(data, t->frame, REWRITTEN);
	__u32 k = w->lo + w->next;

	w->next = w->next + 1 >= w->n ? 0 : w->next + 1;
	struct session_keys *s = bpf_map_lookup_elem(&sessions, &k);

	if (!s)
		return XDP_ABORTED;
	/* The inner IPv4 checksum is left stale: the data path does not check it. */
	__u32 off = t->teid_off & 0xff;
	__u8 *p = (__u8 *)data + off;

	if (off) {
		if ((void *)(p + 4) > data_end)
			return XDP_ABORTED;
		__builtin_memcpy(p, &s->teid, 4);
	}
	off = t->ue_off & 0xff;
	p = (__u8 *)data + off;
	if (off) {
		if ((void *)(p + 4) > data_end)
			return XDP_ABORTED;
		__builtin_memcpy(p, &s->ue, 4);
	}
	bpf_tail_call(ctx, &target, 0);
	return XDP_DROP;
}
