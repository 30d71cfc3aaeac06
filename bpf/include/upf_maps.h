/* SPDX-License-Identifier: GPL-2.0 */
/* The one definition of every table the data path shares with upfd. upfd is the only
 * writer; the Rust types are generated from this file's BTF (crates/bpf), the numbers
 * from abi.h (crates/upf/build.rs). Index 0 of every array is never used, so 0 means
 * "none" in references.
 *
 * Lookups (ARCHITECTURE.md): uplink by local TEID, downlink by UE address then framed
 * routes (longest prefix); inside a session a bounded, precedence-ordered PDR list. */
#ifndef UPF_MAPS_H
#define UPF_MAPS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#include "abi.h"

/* PDR, TS 29.244 clause 5.2.1: what one Packet Detection Rule matches and what it
 * points at. */
struct pdr {
	__u32 id;
	__u32 far;
	__u32 qer[MAX_QERS_PER_PDR];
	__u32 urr[MAX_URRS_PER_PDR];
	__u32 sdf;      /* first entry in sdfs */
	__u8 n_sdf;     /* 0: no SDF condition */
	__u8 qfi;       /* QFI_ANY: no QFI condition */
	__u8 ohr;       /* Outer Header Removal description (8.2.64), OHR_NONE: none */
	__u8 ohr_ext;   /* GTP-U extension header deletion: bit 0 = PDU Session Container */
};

/* FAR, clause 5.2.1 / 8.2.26 / 8.2.56. */
struct far {
	__u32 id;
	__u8 action;    /* FAR_* */
	__u8 dest;      /* Destination Interface value */
	__u8 ohc;       /* OHC_* */
	__u8 flags;     /* FAR_F_* */
	__u8 tos;       /* Transport Level Marking: ToS / Traffic Class for the outer header */
	__u8 pad[3];
	__u32 teid;     /* remote TEID, host order */
	__u16 port;     /* remote UDP port, host order */
	__u16 pad2;
	__u8 peer[16];  /* remote address; IPv4 in the first 4 octets */
	__u8 src[16];   /* our address, the outer source */
};

/* The PDRs reached by one lookup key (a local TEID, a UE address, a framed route),
 * ordered by precedence, the direction they see packets in, and the session's UE
 * addresses for the anti-spoofing check of uplink packets. One PDR and its FAR are
 * also copied in (pdr0, far0): with a million sessions each table a packet visits costs
 * a cache and TLB miss, and most keys have one PDR. The copied PDR is the first without
 * an Application ID (the one traffic of no application, most traffic, meets; its
 * position in hot's bits RS_HOT_AT_SHIFT..), else the first. upfd rewrites the whole
 * value whenever the session changes, so the copies never go stale. */
struct rule_set {
	__u64 seid;
	__u32 pdr[MAX_PDRS_PER_KEY];
	__u8 n_pdrs;
	__u8 has_ue_v4;
	__u8 ue_v6_len; /* prefix length of ue_v6, 0: none */
	__u8 uplink;    /* 1: the UE is the source (N3 uplink); 0: the destination */
	__u32 ue_v4;    /* network byte order */
	__u8 ue_v6[16];
	__u32 hot;      /* RS_HOT_*, RS_APPS, RS_APP_REPORT */
	/* Each PDR's application index (apps, include/app.h), 0: no Application ID. Here so
	 * that a PDR of another application is passed over without reading its pdrs entry
	 * (a cache miss at a million sessions). */
	__u16 pdr_app[MAX_PDRS_PER_KEY];
	/* No padding: the slot is 192 octets (three cache lines). */
	struct pdr pdr0;
	struct far far0;
};

/* QER, clause 5.2.1 / 7.5.2.5: gates and maximum bit rates, one cache line. The MBR is
 * a GCRA (virtual scheduling) per direction, updated with atomic instructions, so every
 * CPU that forwards the session enforces one rate without a lock (include/qer.h). upfd
 * maps the table into its memory and writes the fields one at a time. */
struct qer {
	__u8 gate_ul;   /* 1: open */
	__u8 gate_dl;
	__u8 qfi;       /* QFI_ANY: none, no PDU Session Container */
	__u8 flags;     /* QER_F_* */
	__u8 ppi;
	__u8 pad[3];
	__u64 cost_ul;  /* what an octet adds to tat */
	__u64 cost_dl;
	__u64 tau_ul;   /* burst tolerance, ns: how far tat may run ahead of now */
	__u64 tau_dl;
	__u64 tat_ul;   /* theoretical arrival time, ns (bpf_ktime_get_coarse_ns); 0: idle */
	__u64 tat_dl;
	__u64 pad2;
};

/* URR state, clause 5.2.2, in `urr_state`: per URR a run of 64-octet cells, first the
 * one all CPUs share (urr_shared), then one per CPU (urr_counters), so that a packet's
 * URR work stays in one stretch of memory (one TLB miss at a million sessions rather
 * than one per table). upfd maps the table into its memory: it writes the shared
 * cell's fields one at a time (a whole-element update would undo the data path's
 * decrements in between) and sums the CPUs' counters. */
/* URR counters: one CPU's, summed in user space. */
struct urr_counters {
	__u64 ul_packets;
	__u64 ul_bytes;
	__u64 dl_packets;
	__u64 dl_bytes;
	__u64 first_ns;
	__u64 last_ns;
	__u64 pad[2];
};

/* What all CPUs share, decremented atomically (clause 5.2.2.2): the volume quota left,
 * and the octets left before the volume threshold (VOLTH), for which the data path
 * raises EV_THRESHOLD on the one packet that takes it to zero or below, so upfd reads
 * a URR's counters when its threshold is reached instead of polling every URR. */
struct urr_shared {
	__s64 quota;           /* octets */
	__s64 threshold;       /* octets */
	__u32 quota_flags;     /* URR_Q_* */
	__u32 threshold_armed; /* 1: threshold counts */
	__u64 pad[5];
};

struct urr_cell {
	__u64 w[URR_CELL / 8];
};

/* SDF filter entry (one port range per side): flags SDF_F_* (abi.h), compiled by
 * crates/bpf/src/compile.rs from TS 29.244 SDF Filters. */
struct sdf_side {
	__u8 addr[16];
	__u8 mask[16];
	__u16 port_lo;
	__u16 port_hi;
};

struct sdf_match {
	__u32 flags;
	__u8 ip_version; /* 0: any */
	__u8 protocol;
	__u8 tos_value;
	__u8 tos_mask;
	struct sdf_side remote;
	struct sdf_side ue;
	__u32 spi;
	__u32 flow_label;
};

/* Where a packet leaves: the interface and the link-layer header to write. Found
 * through the kernel FIB, or in the neigh table (configured neighbours, and tests). */
struct egress {
	__u32 ifindex;
	__u16 mtu;
	__u8 smac[6];
	__u8 dmac[6];
	__u16 pad;
};

struct neigh_key {
	__u8 family;    /* 4 or 6; addr all zero: the default for the family */
	__u8 pad[3];
	__u8 addr[16];
};

/* Next-hop cache (include/egress.h): what bpf_fib_lookup answered for these inputs, per
 * CPU. An entry is good while its generation is the current one (upfd bumps it on every
 * route, rule, neighbour, address or link change it hears of) and for at most
 * NH_MAX_AGE_NS, in case a change went unheard. The generation word's bit 0 says the
 * FIB's answer cannot depend on the source address (no source policy rules, no ECMP):
 * then entries are per destination, else per (source, destination). 0: cache off. */
#define NH_CACHE_SLOTS 1024
#define NH_MAX_AGE_NS 1000000000ull

struct nh_entry {
	__u32 gen;        /* nh_gen when filled; 0: empty */
	__u32 ifindex_in;
	__u8 family;
	__u8 pad[7];
	__u8 src[16];
	__u8 dst[16];
	__u64 filled_ns;  /* coarse clock */
	struct egress eg;
};

struct upf_config {
	__u32 flags;       /* CFG_F_* */
	__u32 n3_ifindex;  /* where GTP-U to gNBs leaves */
	__u32 n6_ifindex;  /* where decapsulated traffic leaves */
	__u32 n9_ifindex;  /* where GTP-U to other UPFs leaves (0: as N3) */
	__u32 local_v4[MAX_LOCAL_ADDRS]; /* our GTP-U addresses, network order; 0 unused */
	__u8 local_v6[MAX_LOCAL_ADDRS][16];
	/* Our other addresses (N4, API) and the operator's protected ones: uplink packets to
	 * them, or to local_*, are dropped (DROP_TO_UPF). Network order; 0 / :: unused. */
	__u32 protected_v4[MAX_PROTECTED_ADDRS];
	__u8 protected_v6[MAX_PROTECTED_ADDRS][16];
	/* How many of local_v4, local_v6, protected_v4, protected_v6 are in use (the
	 * uplink destination check stops there). */
	__u8 n_local_v4;
	__u8 n_local_v6;
	__u8 n_protected_v4;
	__u8 n_protected_v6;
	__u64 slowpath_burst;  /* unknown-TEID packets passed to upfd: bucket size ... */
	__u64 slowpath_per_sec; /* ... and refill per second */
	__u32 urr_stride;       /* cells per URR in urr_state: 1 + possible CPUs */
	/* TEID -> uplink_slots index (include/direct.h teid_slot,
	 * crates/upf/src/fastpath/teid_index.rs); teid_slots 0: none. */
	__u32 teid_lo;
	__u32 teid_mask;
	__u32 teid_shift;
	__u32 teid_mul1;
	__u32 teid_mul2;
	__u32 teid_add;
	__u32 teid_slots;
	__u32 ue_slots;   /* downlink_slots entries; 0: none */
	__u32 teid_bits;  /* log2(teid_mask + 1) */
	/* SPREAD_*: xdp_n3 hands G-PDUs to xdp_n3_cpu on spread_cpu[hash % n_spread]
	 * through the cpus map (include/spread.h); SPREAD_OFF: it processes them itself. */
	__u32 spread;
	__u32 n_spread;
	__u32 spread_cpu[MAX_SPREAD_CPUS];
};

/* Per-CPU packets and octets of each drop reason and outcome (abi.h drop_reason,
 * stat_index). */
struct stat {
	__u64 packets;
	__u64 bytes;
};

/* Event header in the ring buffer, followed by `len` packet octets. */
struct event {
	__u32 type;      /* EV_* */
	__u32 len;       /* octets of packet that follow */
	__u64 seid;
	__u32 far_id;
	__u32 pdr_id;
	__u32 urr;       /* EV_QUOTA, EV_THRESHOLD: URR index */
	__u8 nocp;
	__u8 pad[3];
	__u64 ts_ns;
};

/* The slow path's rate limit (unknown TEIDs to upfd): one GCRA shared by all CPUs,
 * moved with atomic instructions (include/qer.h). */
struct slowpath_bucket {
	__u64 tat; /* theoretical arrival time, ns; 0: idle */
};

struct teid_key {
	__u32 teid; /* host order */
};

struct ue_key {
	__u8 family; /* 4 or 6 */
	__u8 pad[3];
	__u8 addr[16];
};

struct lpm_key {
	__u32 prefixlen; /* 8 (family) + address bits */
	__u8 family;
	__u8 addr[16];
};

#ifndef UPF_MAX_SESSIONS
#define UPF_MAX_SESSIONS 65536 /* upfd resizes every table before loading */
#endif

/* Keyed tables hold only the keys in use (BPF_F_NO_PREALLOC): they are sized for two
 * keys per session, and a rule set is a few cache lines. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, UPF_MAX_SESSIONS);
	__type(key, struct teid_key);
	__type(value, struct rule_set);
} uplink SEC(".maps");

/* Rule sets in direct slots (include/direct.h): one array access instead of a hash's
 * bucket and element. Uplink: the slot the TEID encodes (upfd allocates TEIDs so);
 * downlink: UE IPv4 address mod ue_slots. `key` says whose rule set the slot holds (the
 * TEID; the address in network order); another key or 0: look in the hash table.
 * upfd writes a slot through a memory mapping, rule set first and key last, and never
 * rewrites the rule set of a slot a packet may still be reading: a changed rule set goes
 * to the hash table (the slot's key cleared) and comes back once no packet can see the
 * old one (crates/bpf/src/direct.rs). */
struct slot_entry {
	__u32 key;
	__u32 pad;
	struct rule_set rs;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, UPF_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, struct slot_entry);
} uplink_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, UPF_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, struct slot_entry);
} downlink_slots SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, UPF_MAX_SESSIONS);
	__type(key, struct ue_key);
	__type(value, struct rule_set);
} downlink SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key);
	__type(value, struct rule_set);
} framed SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, UPF_MAX_SESSIONS * 2);
	__type(key, __u32);
	__type(value, struct pdr);
} pdrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, UPF_MAX_SESSIONS * 2);
	__type(key, __u32);
	__type(value, struct far);
} fars SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, UPF_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, struct qer);
} qers SEC(".maps");

/* Index urr * upf_config.urr_stride: the shared cell; + 1 + CPU: that CPU's counters. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, UPF_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, struct urr_cell);
} urr_state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, UPF_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, struct sdf_match);
} sdfs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, struct neigh_key);
	__type(value, struct egress);
} neigh SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct upf_config);
} upf_cfg SEC(".maps");

/* The next-hop cache's generation word (see nh_entry), written by upfd in one store. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} nh_gen SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NH_CACHE_SLOTS);
	__type(key, __u32);
	__type(value, struct nh_entry);
} nh_cache SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, struct stat);
} stats SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct slowpath_bucket);
} slowpath SEC(".maps");

/* The CPUs G-PDUs are spread over (include/spread.h): each entry's queue runs
 * xdp_n3_cpu on its CPU. upfd sizes it to the possible CPUs and fills it before it sets
 * upf_config.spread. */
struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} cpus SEC(".maps");

/* Application detection (include/app.h, docs/application-detection.md). */

/* app_names and app_urls keys. app_names: a domain name reversed after a leading dot
 * (`www.example.com`: `moc.elpmaxe.www.`), so a domain's key is a prefix of its
 * subdomains' on a label boundary. app_urls: host, then the path (`example.com/v/`). */
struct app_key {
	__u32 prefixlen; /* octets of data x 8 */
	__u8 data[APP_KEY_MAX];
};

/* The application a domain gives for each protocol (0: none for that protocol). */
struct app_name {
	__u16 dns;
	__u16 sni;
	__u16 host;
	__u16 pad;
};

/* An application's flow descriptions: app_sdfs[sdf .. sdf + n_sdf). */
struct app_entry {
	__u32 sdf;
	__u32 n_sdf;
};

struct app_addr_key {
	__u8 family; /* 4 or 6 */
	__u8 pad[3];
	__u8 addr[16];
};

struct app_addr {
	__u64 expires_ns; /* coarse clock */
	__u16 app;
	__u16 pad[3];
};

/* A flow (docs/application-detection.md "What a packet's application is"): the UE side
 * and the remote side, whatever the packet's direction. Ports host order, 0 when none. */
struct app_flow_key {
	__u64 seid;
	__u8 version;
	__u8 proto;
	__u16 ue_port;
	__u16 remote_port;
	__u16 pad;
	__u8 ue[16];     /* IPv4 in the first 4 octets */
	__u8 remote[16];
};

struct app_flow {
	__u64 last_ns; /* coarse clock; refreshed when a second old */
	__u16 app;
	__u16 pad[3];
};

/* EV_APP_START: a flow entered in app_flows of a session with RS_APP_REPORT. */
struct app_event {
	__u32 type;  /* EV_APP_START */
	__u32 app;   /* application index */
	__u64 ts_ns; /* coarse clock */
	struct app_flow_key flow;
};

/* Per-CPU working memory of the classifier: the BPF stack is 512 octets. */
struct app_scratch {
	__u8 buf[APP_HTTP_SCAN];  /* payload octets */
	__u8 name[APP_KEY_MAX];   /* a name as text */
	struct app_key key;       /* app_names key */
	struct app_key url;       /* app_urls key */
	struct app_flow_key flow;
	struct app_addr_key addr;
	struct app_flow entry;
	struct app_addr learned;
	/* Loop state of the bpf_loop callbacks (in memory: the verifier then checks each
	 * callback once). */
	__u8 b[16];               /* fixed fields */
	__u32 n, pos, state, start, end, colon, next, bad, found;
	__u32 off, limit, target, target_len, app;
	__u64 now;
};

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct app_key);
	__type(value, struct app_name);
} app_names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct app_key);
	__type(value, __u16);
} app_urls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, APP_MAX);
	__type(key, __u32);
	__type(value, struct app_entry);
} apps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct sdf_match);
} app_sdfs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, struct app_addr_key);
	__type(value, struct app_addr);
} app_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct app_flow_key);
	__type(value, struct app_flow);
} app_flows SEC(".maps");

/* Flow stamps (include/app.h, app_classify): per hash of a session's SEID, the coarse
 * clock's epoch (now >> APP_STAMP_SHIFT) when one of the session's app_flows entries
 * was last entered or refreshed; a session whose stamp is older than a live entry can
 * be is not looked up in app_flows. Only the data path writes them (0 at load). */
struct app_stamps {
	__u8 s[64];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, APP_STAMP_ENTRIES);
	__type(key, __u32);
	__type(value, struct app_stamps);
} app_stamps SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct app_scratch);
} app_scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4 << 20);
} events SEC(".maps");

#endif
