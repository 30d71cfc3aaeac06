/* SPDX-License-Identifier: GPL-2.0 */
/* The stages of the data path (upf.bpf.c) and what they hand each other. A packet runs
 * through up to four programs (eight when it becomes an ICMP error for a UE), each
 * verified on its own (the verifier's budget is per program: a new feature is a new
 * stage), joined by tail calls into named slots, as
 * Cilium's pipeline is:
 *
 *   entry (xdp_n3, xdp_n6): parse, find the session, copy its record, source checks
 *     -> CALL_APP (sessions with an Application ID): classify          -> CALL_RULES
 *     -> CALL_RULES: PDR, FAR, gates, MBR and quota leases              -> CALL_EGRESS
 *     -> CALL_EGRESS: headers, next hop, URR counts, send
 *          (too big for its link: counted as dropped)                   -> CALL_ICMP
 *     -> CALL_ICMP: the ICMP error (include/icmp.h), back by its route, or for a UE
 *                                                                        -> CALL_DOWNLINK
 *     -> CALL_DOWNLINK: xdp_n6's work on the error, which then runs the UE's downlink
 *          rules as a packet from the data network would (CALL_RULES, CALL_EGRESS)
 *
 * The stages share one per-CPU scratch record (struct pkt): a packet runs to completion
 * on its CPU before the next one starts there, so nothing else writes it meanwhile. The
 * cpumap path (xdp_n3_cpu) has its own stage programs and slots (calls_cpu): a program
 * array takes programs of one attach type only. */
#ifndef UPF_PIPELINE_H
#define UPF_PIPELINE_H

#include "upf_maps.h"
#include "parse.h"
#include "session.h"

/* What the stages hand each other. */
struct pkt {
	struct outer o;
	struct flow f;
	__u64 now;        /* the coarse clock, read once per packet */
	__u32 slot;       /* the session's entry */
	__u32 list;       /* the key's PDR list (pdr_lists handle; 0: the hot PDR alone) */
	__u8 key;         /* which of the record's key lines: 0 the TEID's, 1 the UE's */
	__u8 up;          /* the PDRs see the UE as the source (uplink) */
	__u8 from_gtpu;   /* it came in a G-PDU */
	__u8 primary;     /* the record's own key: its hot PDR applies */
	__u8 n_pdrs;      /* PDRs the key reaches */
	__u8 hot_at;      /* the hot PDR's position among them (0xff: none) */
	__u8 hot;         /* the PDR found is the record's hot PDR */
	__u8 cpumap;      /* running in a cpumap queue: XDP_TX becomes a redirect */
	__u32 app;        /* the packet's application (0: none) */
	__u8 in_dmac[6];  /* the frame's link-layer addresses as it came */
	__u8 in_smac[6];
	__u8 psc_qfi;     /* the first QER with a QFI: its QFI (QFI_ANY: none), flags, PPI */
	__u8 psc_flags;
	__u8 psc_ppi;
	__u8 touched;     /* what reading the entry's other lines early read (unused) */
	__u32 icmp_mtu;   /* CALL_ICMP: the MTU a Packet Too Big reports; 0: Time Exceeded */
	struct sess_rec rec; /* line 0, the key's line and the home QER, copied consistently */
	struct pdr pdr;      /* the PDR found, in full form */
	struct far far;      /* its FAR */
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct pkt);
} pkt_scratch SEC(".maps");

/* The stages, by CALL_* index: one array per attach type. */
struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, CALL_MAX);
	__type(key, __u32);
	__type(value, __u32);
} calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, CALL_MAX);
	__type(key, __u32);
	__type(value, __u32);
} calls_cpu SEC(".maps");

static __always_inline struct pkt *pkt_mem(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&pkt_scratch, &zero);
}

#endif
