/* SPDX-License-Identifier: GPL-2.0 */
/* The one definition of every table the bench programs (bpf/bench/NAME.bpf.c) share with
 * upfbench: the generator's configuration and session table, the payload every generated
 * packet carries, the sink's counters and latency histogram, the bare forwarder's
 * configuration and the one-miss forwarder's records. The Rust types are generated from
 * this file's BTF (crates/bench-bpf, skel::*::types); the constants are mirrored there
 * and checked by its tests. */
#ifndef BENCH_H
#define BENCH_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Directions, as indices into the sink's counters. */
#define BENCH_UL 0  /* gNB -> UPF -> data network: GTP-U out, plain IP at the sink */
#define BENCH_DL 1  /* data network -> UPF -> gNB: plain IP out, GTP-U at the sink */

/* "UPFB": marks our packets, so a sink leaves everything else (ARP, ping) alone. */
#define BENCH_MAGIC 0x55504642

/* Frame sizes the generator cycles through (the size mix, weights expanded). */
#define BENCH_MAX_SIZES 64
/* A size table entry with this bit set is a TCP segment (to or from the data-network
 * port tcp_port, ACK|PSH, 20-octet header, checksum not computed) instead of a UDP
 * datagram; the rest of the entry is the frame length. */
#define BENCH_SIZE_TCP 0x8000
#define BENCH_SIZE_LEN 0x7fff

/* Latency histogram, log-linear in microseconds: buckets 0..HIST_LINEAR-1 are 1 us wide;
 * above, every power of two [2^e, 2^(e+1)) us, e >= HIST_LINEAR_BITS, is split into
 * 2^HIST_SUB_BITS equal buckets (about 6 % resolution), up to 2^HIST_MAX_BITS us. */
#define HIST_LINEAR_BITS 7
#define HIST_LINEAR (1 << HIST_LINEAR_BITS)
#define HIST_SUB_BITS 4
#define HIST_MAX_BITS 32
#define HIST_BUCKETS (HIST_LINEAR + (HIST_MAX_BITS - HIST_LINEAR_BITS) * (1 << HIST_SUB_BITS))

/* What every generated packet carries right after its (inner) UDP or TCP header, in host
 * byte order: generator and sink run on the same machine. */
struct bench_payload {
	__u32 magic;   /* BENCH_MAGIC */
	__u32 session; /* index into the generator's session table */
	__u32 seq;     /* the generating CPU's packet count, low 32 bits */
	__u32 ts_lo;   /* bpf_ktime_get_ns() at generation, 0: no timestamp */
	__u32 ts_hi;
};

/* One session of the generator. */
struct gen_session {
	__u32 teid;    /* uplink: the UPF's F-TEID, host order */
	__u32 ue;      /* UE IPv4 address, network order */
	__u32 dn;      /* data-network host, network order */
};

/* The generator's configuration: gen_cfg[0] for bench_gen; gen_cfg[BENCH_UL] and
 * gen_cfg[BENCH_DL] for bench_gen_dual. */
struct gen_config {
	__u8 dst_mac[6];
	__u8 src_mac[6];
	__u32 src_ip;      /* uplink: the gNB's N3 address (outer source), network order */
	__u32 dst_ip;      /* uplink: the UPF's N3 address (outer destination) */
	__u32 n_sessions;  /* entries used in gen_sessions */
	__u32 n_sizes;     /* entries used in sizes */
	__u32 redirect;    /* ifindex to bpf_redirect to; 0: XDP_TX (out of the ingress veth);
			    * bench_gen_dual: unused (it redirects into gen_ports[dir]) */
	__u16 ue_port;     /* inner UDP port on the UE side, host order */
	__u16 dn_port;     /* inner UDP port on the data-network side */
	__u8 dir;          /* BENCH_UL or BENCH_DL */
	__u8 psc;          /* uplink: add a PDU Session Container (TS 38.415) */
	__u8 qfi;          /* its QFI */
	__u8 timestamps;   /* write bpf_ktime_get_ns() into the payload */
	__u16 max_size;    /* the frame length given to BPF_PROG_RUN: the largest size */
	__u16 tcp_port;    /* TCP entries of sizes: the data-network side's port (UE side:
			    * ue_port), host order */
	__u16 sizes[BENCH_MAX_SIZES]; /* frame lengths, cycled; | BENCH_SIZE_TCP: TCP */
};

/* The generator's state on one CPU (gen_state[0], per CPU; bench_gen_dual: one entry
 * per direction). */
struct gen_cpu {
	__u64 packets;     /* generated */
	__u64 bytes;       /* frame octets generated */
	__u32 session;     /* next session */
	__u32 session_mod; /* session % n_sizes */
	__u32 round;       /* completed rounds over the sessions, % n_sizes */
	__s32 credit;      /* bench_gen_dual, unpaced: smooth weighted round robin credit */
};

/* Pacing (gen_pace[0]; bench_gen_dual: gen_pace[dir]). Each BPF_PROG_RUN call costs two
 * RCU grace periods (tens of ms here), too coarse to pace by calls, so the program paces
 * itself: a run sends when its packet is due and otherwise ends in XDP_DROP without
 * generating anything. interval_ps 0: unpaced, every run sends.
 * bench_gen: after a gap (between calls) the schedule restarts (Rust makes up for the
 * gaps by shortening the interval of the next call).
 * bench_gen_dual: the schedule is kept (packet k is due at the first one's time plus k
 * intervals), and after a gap the packets behind it go at most every gap_ps until it is
 * caught up. Each run sends the paced direction whose packet is due (the earlier one if
 * both are), else an unpaced one (both unpaced: smooth weighted round robin by
 * `weight`), else nothing; a direction sends only while it has budget, paced or not. */
struct gen_pace {
	__u64 interval_ps; /* 1e12 / rate */
	__u64 next_ps;     /* when the next packet is due, in bpf_ktime_get_ns() * 1000;
			    * 0: the first packet, due now */
	__u64 burst_ps;    /* bench_gen: how far behind schedule it may catch up at once */
	__u64 gap_ps;      /* dual: the shortest spacing, behind schedule */
	__u64 budget;      /* paced (dual: always): packets still to send; 0 ends sending */
	__u64 first_ns;    /* dual, paced: bpf_ktime_get_ns() of the first packet; 0: none yet */
	__u64 last_ns;     /* dual, paced: of the last packet */
	__u64 run_first_ns; /* dual, paced: of the first run since Rust zeroed it (a call) */
	__u64 run_last_ns; /* dual, paced: of the last run */
	__u32 weight;      /* dual, both unpaced: share of the runs */
	__u32 spin_ns;     /* dual, [BENCH_UL] only, only paced directions left and none due:
			    * a run waits up to this long for the next packet; 0: not at all */
};


/* bench_gen_dual's ports (gen_ports, a devmap): [BENCH_UL] gnb n3, [BENCH_DL] dn n6. */
#define BENCH_PORTS 2

/* Packets and octets. */
struct bench_count {
	__u64 packets;
	__u64 bytes;
};

/* A sink's counters for one session (sink_sessions[session], per CPU). */
struct sink_session {
	struct bench_count dir[2]; /* [BENCH_UL], [BENCH_DL] */
};

/* A sink's totals (sink_totals[0], per CPU). */
struct sink_totals {
	struct bench_count dir[2];  /* our packets, counted and dropped */
	struct bench_count other;   /* not ours (no magic): passed to the kernel */
	__u64 bad_session;          /* ours, but a session index beyond the table: dropped */
	__u64 pad;
};

/* The bare forwarder's configuration (bare_cfg[0]): fixed next hops, no sessions. */
struct bare_config {
	__u32 n3_ifindex;   /* where encapsulated downlink leaves */
	__u32 n6_ifindex;   /* where decapsulated uplink leaves */
	__u8 n3_src_mac[6]; /* upf n3 */
	__u8 n3_dst_mac[6]; /* gnb n3 */
	__u8 n6_src_mac[6]; /* upf n6 */
	__u8 n6_dst_mac[6]; /* dn n6 */
	__u32 n3_ip;        /* our N3 address (outer source; uplink must be addressed to it) */
	__u32 gnb_ip;       /* the gNB (outer destination), network order */
	__u32 n6_ip;        /* our N6 address: downlink to it is left to the kernel */
	__u32 teid;         /* downlink TEID, host order */
	__u8 psc;           /* add a PDU Session Container (DL, type 0) */
	__u8 qfi;
	__u8 pad[2];
	__u32 teid_lo;      /* one-miss: uplink TEID of slot 0 (slot = TEID - teid_lo) */
	__u32 miss_slots;   /* one-miss: records in miss_ul and miss_dl; 0: bare only */
};

/* One session's record of the one-miss forwarder (miss_ul[slot], miss_dl[slot]): one
 * cache line, read once per packet. Uplink slot: TEID - teid_lo (upfbench hands the
 * generator TEIDs that encode the slot, as upfd's allocator does); downlink slot: the
 * UE's IPv4 address mod miss_slots (as upfd's downlink slots). */
struct miss_record {
	__u32 key;     /* uplink: the TEID, host order; downlink: the UE address, network order */
	__u32 ue;      /* the UE's IPv4 address, network order: uplink's inner source */
	__u32 teid;    /* downlink: the gNB's TEID, host order */
	__u8 qfi;      /* downlink: the QFI of the PDU Session Container */
	__u8 pad[51];
};

/* Counters of the bare forwarder (bare_stats[i], per CPU). */
#define BARE_UL 0      /* decapsulated and redirected to N6 */
#define BARE_DL 1      /* encapsulated and redirected to N3 */
#define BARE_PASS 2    /* not for us: left to the kernel */
#define BARE_ERR 3     /* adjust_head or redirect failed */
#define BARE_MISS 4    /* one-miss: no record of the key, or a spoofed UE source: dropped */
#define BARE_MAX 5

#endif
