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

/* The session's entry (docs/architecture.md "The data path's tables"): everything a
 * packet reads for its session in one record, what the CPUs lease from in one pool, and
 * one lane per CPU for what each writes, side by side in one page of `sess_pages`. A
 * G-PDU finds it by its TEID's slot, a packet from the data network by its UE address's:
 * upfd gives a session the TEID of its UE address's slot, so both lookups land on the
 * same entry and one page serves every packet of the session. */

/* One key's hot PDR (TS 29.244 clause 5.2.1) and its FAR (8.2.26, 8.2.56): one cache
 * line. A PDR with more QERs or URRs than the session's home ones has its full entry in
 * the cold tables (DR_COLD); its FAR is here all the same. */
struct dir_rules {
	__u16 pdr_id;
	__u8 qfi;       /* the PDI's QFI condition; QFI_ANY: none */
	__u8 ohr;       /* Outer Header Removal description (8.2.64), OHR_NONE: none */
	__u8 ohr_ext;   /* GTP-U extension header deletion: bit 0 = PDU Session Container */
	__u8 n_sdf;     /* SDF match entries at sdf (0: no SDF condition) */
	__u8 flags;     /* DR_* */
	__u8 up;        /* 1: its PDRs see the UE as the source (uplink) */
	__u32 sdf;      /* first entry in sdfs */
	__u32 more;     /* DR_COLD: the PDR's handle in pdrs */
	/* The FAR. */
	__u32 far_id;
	__u8 action;    /* FAR_* */
	__u8 dest;      /* Destination Interface value */
	__u8 ohc;       /* OHC_* */
	__u8 far_flags; /* FAR_F_* */
	__u8 tos;       /* Transport Level Marking: ToS / Traffic Class for the outer header */
	__u8 pad;
	__u16 port;     /* remote UDP port, host order */
	__u32 teid;     /* remote TEID, host order */
	__u8 peer[16];  /* remote address; IPv4 in the first 4 octets */
	__u8 src[16];   /* our address, the outer source */
};

/* A QER's parameters (clause 5.2.1, 7.5.2.5): gates, the PDU Session Container's QFI,
 * and the MBR as a GCRA per direction (include/lease.h). One cache line. */
struct qer_params {
	__u8 gate[2];   /* 1: open; [0] uplink, [1] downlink */
	__u8 qfi;       /* QFI_ANY: none, no PDU Session Container */
	__u8 flags;     /* QER_F_* */
	__u8 ppi;
	__u8 home;      /* in the record: HOME_QER, HOME_URR (whose IDs qer_id, urr_id are) */
	__u8 pad[2];
	__u64 cost[2];  /* what an octet adds to tat (QER_COST_SHIFT units) */
	__u64 tau[2];   /* burst tolerance, ns, less an MBR lease's life */
	__u32 lease[2]; /* octets an MBR lease grants */
	__u32 qer_id;
	__u32 urr_id;   /* in the record: the home URR's ID; in a URR's cell: its ID */
	__u64 seid;     /* in a cell: its session (upfd finds its cells when it restarts) */
};

/* The record: four cache lines, written by upfd only, under `seq` (odd while it
 * writes): a packet copies what it reads and checks that seq did not move. Arming the
 * home URR (its SR_URR_* flags, `epoch`) is not a rule change: single stores, outside
 * seq, as a cell's URR is armed, so that no packet is dropped while upfd re-arms. */
struct sess_rec {
	__u32 seq;
	__u32 teid;      /* the primary TEID key, host order; 0: none */
	__u32 ue_v4;     /* the UE's IPv4 address, network order (SR_UE_V4, SR_UE_KEY) */
	__u16 ni;        /* reserved: the network instance of the downlink key */
	__u16 flags;     /* SR_* */
	__u64 seid;
	__u8 ue_v6[16];  /* the UE's IPv6 prefix (uplink source check) */
	__u8 ue_v6_len;  /* its length; 0: none */
	__u8 n_pdrs[2];  /* PDRs each primary key reaches ([0] the TEID's, [1] the UE's) */
	__u8 hot_at[2];  /* the hot PDR's position among them */
	__u8 pad[3];
	__u32 list[2];   /* pdr_lists handle of each primary key's PDRs (0: the hot one alone) */
	__u32 ext;       /* reserved: cold extensions (Ethernet, QoS monitoring) */
	__u32 epoch;     /* the home URR's lease epochs: quota << 16 | threshold */
	struct dir_rules dir[2];
	struct qer_params home; /* the home QER */
};

/* What the lanes lease from, one cache line, changed with atomic instructions by the
 * CPUs and with single stores by upfd: the MBR's GCRA per direction, the quota and the
 * octets left before the volume threshold. */
struct pool {
	__u64 tat[2];    /* theoretical arrival time per direction, ns (coarse clock); 0: idle */
	__s64 quota;     /* octets not yet leased (SR_URR_QUOTA, URR_Q_VOLUME) */
	__s64 threshold; /* octets before the threshold, leases counted (SR_URR_THRESHOLD) */
	__u32 epoch;     /* a cold URR's lease epochs (the home URR's are in the record) */
	__u32 flags;     /* URR_Q_*, URR_T_ARMED (a cold URR's); URR_Q_NOTIFIED */
	__u64 restart[2]; /* when each direction's GCRA last restarted idle, ns */
	__u64 icmp_tat;  /* the session's ICMP error budget (a GCRA, include/icmp.h); 0: idle */
};

/* One CPU's lane: what it counted and what it leased, one cache line no other CPU
 * writes (unless there are more CPUs than lanes: then they share it with atomic
 * instructions). Times are the coarse clock >> LANE_TIME_SHIFT. */
struct lane {
	__u64 packets[2];     /* [0] uplink, [1] downlink */
	__u64 bytes[2];
	__u32 first;          /* first packet counted; 0: none (upfd zeroes it at a report) */
	__u32 last;
	__u32 mbr_credit[2];  /* octets of MBR lease left per direction */
	__u32 mbr_until;      /* MBR credit is good until then */
	__u32 epoch;          /* the pool's epochs its quota and threshold credit are of */
	__u32 quota_credit;
	__u32 threshold_credit;
};

struct sess_page {
	__u8 b[PAGE_SIZE_SESS];
};

/* A key that is not its session's own slot's (a TEID the SMF chose, a collision, an
 * IPv6 address, a second TEID or UE address): where its session is, and which PDRs it
 * reaches if not the record's own. */
struct key_ref {
	__u32 slot;
	__u32 list;     /* pdr_lists handle (primary: the record's) */
	__u8 up;        /* 1: the UE is the source (uplink) */
	__u8 primary;   /* the record's own key in that direction: its hot PDR applies */
	__u8 pad[2];
};

/* The PDRs one key reaches, best precedence first, and each one's application index
 * (apps, include/app.h; 0: no Application ID): a PDR of another application is passed
 * over without reading its entry. `hot_at`: which of them is the record's hot PDR. */
struct pdr_list {
	__u8 n;
	__u8 hot_at;    /* 0xff: none of them */
	__u8 pad[2];
	__u32 pdr[MAX_PDRS_PER_KEY];
	__u16 app[MAX_PDRS_PER_KEY];
};

/* A PDR's full entry (cold): its FAR's handle in fars, its QERs and URRs (REF_HOME: the
 * session's home one; else a cell handle in cells). */
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

/* FAR, clause 5.2.1 / 8.2.26 / 8.2.56 (cold, and the form every stage works with). */
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

/* A cold QER or URR (one a session's record does not hold): its parameters (a QER's),
 * its pool and LANES lanes, in a page of `cells` (upf.bpf.c's read-only globals give
 * the layout, as for sess_pages). */
#define CELL_POOL_AT 64
#define CELL_LANES_AT 128

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
	__u32 slots;            /* session entries in sess_pages (PER_PAGE per page) */
	/* TEID -> slot (include/session.h teid_slot,
	 * crates/upf/src/fastpath/teid_index.rs); teid_slots 0: none. */
	__u32 teid_lo;
	__u32 teid_mask;
	__u32 teid_shift;
	__u32 teid_mul1;
	__u32 teid_mul2;
	__u32 teid_add;
	__u32 teid_slots;
	__u32 ue_slots;   /* UE IPv4 address -> slot (address mod ue_slots); 0: none */
	__u32 page_mul;   /* slot / per_page as (slot * page_mul) >> page_shift */
	__u32 page_shift;
	__u32 cells;      /* cold QER and URR cells in `cells` (cells_per_page per page) */
	__u32 cell_mul;   /* handle / cells_per_page as (handle * cell_mul) >> cell_shift */
	__u32 cell_shift;
	__u32 teid_bits;  /* log2(teid_mask + 1) */
	/* SPREAD_*: xdp_n3 hands G-PDUs to xdp_n3_cpu on spread_cpu[hash % n_spread]
	 * through the cpus map (include/spread.h); SPREAD_OFF: it processes them itself. */
	__u32 spread;
	__u32 n_spread;
	__u32 spread_cpu[MAX_SPREAD_CPUS];
	/* ICMP errors for packets that do not fit (include/icmp.h): their source per IP
	 * version (0 / ::: none of that version), the budget in all (icmp_bucket) and per
	 * session (struct pool's icmp_tat); a per_sec of 0 sends none. */
	__u32 icmp_src_v4;
	__u8 icmp_src_v6[16];
	__u64 icmp_per_sec;
	__u64 icmp_burst;
	__u64 icmp_sess_per_sec;
	__u64 icmp_sess_burst;
	/* Configured MTUs: they take precedence over the FIB's and the neighbours' for
	 * packets leaving by that interface; the first n_if_mtu are in use. */
	__u32 n_if_mtu;
	struct if_mtu {
		__u32 ifindex;
		__u32 mtu;
	} if_mtu[MAX_IF_MTUS];
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
	__u32 urr;       /* EV_QUOTA, EV_THRESHOLD: the URR's handle, or the slot if home */
	__u8 nocp;
	__u8 home;       /* EV_QUOTA, EV_THRESHOLD: the session's home URR (urr: its slot) */
	__u8 pad[2];
	__u64 ts_ns;
};

/* The slow path's rate limit (unknown TEIDs to upfd): one GCRA shared by all CPUs,
 * moved with atomic instructions (include/qer.h). */
struct slowpath_bucket {
	__u64 tat; /* theoretical arrival time, ns; 0: idle */
};

/* A key of the `keys` table: a TEID (kind KEY_TEID, the TEID in host order in addr's
 * first four octets) or a UE address (kind 4 or 6, its family). One table for both: a
 * hash table's room costs 16 octets per entry (rounded up to a power of two) whether
 * used or not, and few sessions have both kinds outside their slots. */
struct sess_key {
	__u8 kind;
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

/* The sessions' entries, PER_PAGE to a page (upf.bpf.c's read-only globals give the
 * layout): entry i of page p is slot p * PER_PAGE + i, its record at i * entry size, then
 * its pool, then LANES lanes. upfd writes records through a memory mapping. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, UPF_MAX_SESSIONS / 8);
	__type(key, __u32);
	__type(value, struct sess_page);
} sess_pages SEC(".maps");

/* Keyed tables hold only the keys in use (BPF_F_NO_PREALLOC), and so do the cold ones:
 * their memory is what is used, not a share per session. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, UPF_MAX_SESSIONS);
	__type(key, struct sess_key);
	__type(value, struct key_ref);
} keys SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, 4096);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct lpm_key);
	__type(value, struct key_ref);
} framed SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, UPF_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, struct pdr_list);
} pdr_lists SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, UPF_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, struct pdr);
} pdrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries, UPF_MAX_SESSIONS);
	__type(key, __u32);
	__type(value, struct far);
} fars SEC(".maps");

/* Cold QERs and URRs, CELLS_PER_PAGE to a page: upfd writes their parameters, quotas
 * and thresholds a word at a time through a memory mapping while packets lease and
 * count in them; sized by limits.cold_rules. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, UPF_MAX_SESSIONS / 64);
	__type(key, __u32);
	__type(value, struct sess_page);
} cells SEC(".maps");

/* SDF match entries by handle, a PDR's run at sdf .. sdf + n_sdf; upfd shares a run
 * between the PDRs whose filters compile to the same entries. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(map_flags, BPF_F_NO_PREALLOC);
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

/* The ICMP errors' budget over all sessions (include/icmp.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct slowpath_bucket);
} icmp_bucket SEC(".maps");

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
