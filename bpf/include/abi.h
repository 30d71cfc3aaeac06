/* SPDX-License-Identifier: GPL-2.0 */
/* The one definition of every number the data path shares with upfd: limits, flag bits,
 * table codes, drop reasons and counters. Rust does not copy them: crates/upf/build.rs
 * reads this file and generates `upf::abi`, and a test (crates/bpf/tests/abi.rs) checks
 * the generated constants against the enums clang put into the object's BTF.
 *
 * So that the generator stays simple, this file holds only enums (and, at the end, the
 * struct that names them all), one member per line: `NAME = value,` (a decimal or hex
 * literal, or a member named before) or `NAME,` (the previous value + 1); a comment
 * after a member becomes its doc comment in Rust. Struct layouts are in upf_maps.h (Rust
 * gets them from the BTF, through the skeleton). */
#ifndef UPF_ABI_H
#define UPF_ABI_H

/* What one rule may hold in the data path: upfd refuses rules beyond these with the
 * offending rule's ID (TS 29.244 clause 7.2.2.4). */
enum upf_limit {
	MAX_PDRS_PER_KEY = 8,   /* PDRs reached by one lookup key (a power of two) */
	MAX_SDF_PER_PDR = 8,    /* SDF match entries of one PDR */
	MAX_QERS_PER_PDR = 4,   /* QERs one PDR applies (a vendor SMF sends 3 for IMS) */
	MAX_URRS_PER_PDR = 4,   /* URRs one PDR counts in */
	MAX_LOCAL_ADDRS = 4,    /* GTP-U addresses of each IP version */
	MAX_PROTECTED_ADDRS = 8, /* other addresses user traffic must not reach, per version */
	MAX_IF_MTUS = 4,        /* interfaces with a configured MTU (upf_config.if_mtu) */
	EVENT_MAX_PACKET = 2048, /* octets of a packet handed up for buffering, at most */
	GTP_MAX_EXT = 4,        /* GTP-U extension headers walked; more: handed to upfd */
	IPV6_MAX_EXT = 8,       /* IPv6 extension headers walked before the upper layer */
};

/* Sentinels in single-octet fields. */
enum upf_none {
	QFI_ANY = 0xff,  /* pdr.qfi: no QFI condition; qer.qfi: no PDU Session Container */
	OHR_NONE = 0xff, /* pdr.ohr: no Outer Header Removal */
};

/* UDP destination ports of the core network's own protocols: an uplink packet to one of
 * them is a tunnel or control message smuggled through the user plane (GTP-in-GTP, PFCP
 * in GTP-U), never user traffic. */
enum core_port {
	PORT_GTPC = 2123, /* GTPv2-C (TS 29.274), GTPv1-C */
	PORT_GTPU = 2152, /* GTP-U (TS 29.281) */
	PORT_PFCP = 8805, /* PFCP (TS 29.244) */
};

/* struct far's action (Apply Action, TS 29.244 clause 8.2.26). */
enum far_action {
	FAR_DROP = 0x01,
	FAR_FORW = 0x02,
	FAR_BUFF = 0x04,
	FAR_NOCP = 0x08, /* with FAR_BUFF: notify the CP function (one Downlink Data Report) */
};

/* struct far's ohc: which outer header to create (clause 8.2.56). */
enum far_ohc {
	OHC_NONE = 0,
	OHC_GTPU_V4 = 1,
	OHC_GTPU_V6 = 2,
	OHC_UNSUPPORTED = 3, /* asked for a tunnel we cannot build: drop */
};

/* struct far's flags. */
enum far_flag {
	FAR_F_TOS = 0x01,      /* tos holds the Transport Level Marking for the outer header */
	FAR_F_REDIRECT = 0x02, /* Redirect Information: uplink TCP to upfd (EV_REDIRECT), the rest dropped */
};

/* struct sess_rec's flags (include/upf_maps.h): what the session's record holds. */
enum sess_flag {
	SR_UE_V4 = 0x001,        /* ue_v4 is the session's UE address (the uplink source check) */
	SR_UE_KEY = 0x002,       /* ue_v4 is also its primary downlink key */
	SR_APPS = 0x004,         /* a PDR has an Application ID: classify the packet (include/app.h) */
	SR_APP_REPORT = 0x008,   /* raise EV_APP_START when a flow of an application starts */
	SR_URR_QUOTA = 0x010,    /* the home URR has a volume quota: packets lease from it */
	SR_URR_THRESHOLD = 0x020, /* the home URR's volume threshold is armed */
};

/* struct dir_rules' flags: one direction's hot PDR in the record. */
enum dir_flag {
	DR_VALID = 0x01,    /* the direction has a hot PDR (pdr_id, far ...) */
	DR_QER_HOME = 0x02, /* its first QER is the session's home QER (record, pool, lanes) */
	DR_URR_HOME = 0x04, /* its first URR is the session's home URR */
	DR_COLD = 0x08,     /* its full entry (more QERs or URRs, an IPv6 tunnel) is pdrs[more] */
	DR_GATE = 0x10,     /* the home QER's gate is open in this direction */
	DR_MBR = 0x20,      /* the home QER has an MBR in this direction (cost, tau, lease) */
	DR_APPS = 0x40,     /* the PDRs before the hot one are of the applications in `more` (2 x 16 bits) */
};
/* DR_APPS: at most two applications (`more`'s low and high 16 bits, 0: none); a packet
 * of neither, matching none of their flow descriptions, meets the hot PDR first without
 * reading the key's PDR list. */

/* Per-CPU leases (docs/architecture.md "Leases"): a CPU takes MBR credit, quota and
 * threshold allowance from a rule's pool with one atomic operation and spends it in its
 * own lane. */
enum lease_limit {
	LANES_MAX = 8,            /* lanes per pool; CPUs beyond share them (lane = CPU mod lanes) */
	LEASE_OCTETS_MAX = 65536, /* octets one lease grants at most */
	LEASE_TTL = 8,            /* an MBR lease's life, in LANE_TIME units (8.4 ms) */
	LANE_TIME_SHIFT = 20,     /* lane times (first, last, until): the coarse clock >> this */
	LEASE_SHARE = 2,          /* a quota or threshold lease takes at most what is left / (2 x lanes) */
	REF_HOME = 1,             /* in a cold PDR's qer[] or urr[]: the session's home QER or URR */
	PAGE_SIZE_SESS = 4096,    /* octets of a sess_pages value: a page of session entries */
	HOME_QER = 0x01,          /* struct qer_params' home: the record holds a home QER */
	HOME_URR = 0x02,          /* ... and a home URR */
	HOME_LANES_USED = 0x04,   /* its lanes counted for a home URR (which may be gone) */
};

/* struct sess_key's kind besides the address families 4 and 6. */
enum key_kind {
	KEY_TEID = 1,
};

/* Stages (tail calls, upf.bpf.c): the index of each in the calls and calls_cpu arrays. */
enum call_index {
	CALL_APP = 0,    /* application classification (sessions with SR_APPS) */
	CALL_RULES = 1,  /* PDR, FAR, QER gates and MBR leases, quota leases */
	CALL_EGRESS = 2, /* headers, next hop, URR counting, send */
	CALL_ICMP = 3,   /* an ICMP error for a packet that does not fit (include/icmp.h) */
	CALL_DOWNLINK = 4, /* an ICMP error for a UE into its session's downlink rules */
	CALL_MAX = 8,
};

/* Application detection (include/app.h, docs/application-detection.md). */
enum app_limit {
	APP_MAX = 4096,          /* Application IDs the data path holds (index 0: none) */
	APP_MAX_FLOWS = 8,       /* PFD flow descriptions per application */
	APP_MAX_SDF = 32,        /* their SDF match entries (app_sdfs), one per port range pair */
	APP_NAME_MAX = 253,      /* octets of a domain name */
	APP_KEY_MAX = 256,       /* octets of an app_names or app_urls key */
	APP_DNS_ANSWERS = 8,     /* answer records read per DNS response */
	APP_TLS_EXTENSIONS = 32, /* ClientHello extensions walked to server_name */
	APP_HTTP_SCAN = 512,     /* octets of an HTTP request searched for its Host */
	APP_FLOW_IDLE_SEC = 120, /* a flow entry unused this long no longer classifies */
	APP_TTL_MAX = 86400,     /* a DNS answer's TTL is capped at this (seconds) */
	APP_STAMP_SHIFT = 36,    /* a flow stamp's epoch: the coarse clock >> this (68.7 s) */
	APP_STAMP_ENTRIES = 4096, /* app_stamps entries, 64 one-octet stamps each */
};

/* What a domain name of a PFD applies to (Domain Name Protocol, TS 29.244 8.2.39). */
enum app_proto {
	APP_P_DNS = 0x01,  /* the QNAME of DNS answers towards the UE */
	APP_P_SNI = 0x02,  /* a TLS ClientHello's server_name */
	APP_P_HOST = 0x04, /* an HTTP request's Host */
};

/* struct qer's flags. */
enum qer_flag {
	QER_F_MBR_UL = 0x01,
	QER_F_MBR_DL = 0x02,
	QER_F_RQI = 0x04,
	QER_F_PPI = 0x08,
};

/* Units of the MBR's GCRA (include/qer.h). */
enum qer_unit {
	QER_COST_SHIFT = 20, /* qer.cost_*: nanoseconds per octet x 2^QER_COST_SHIFT */
};

/* struct pool's notified, struct urr_cell's flags. */
enum urr_flag {
	URR_Q_VOLUME = 0x01,    /* a cold URR's volume quota is set: packets lease from it */
	URR_Q_NOTIFIED = 0x02,  /* upfd was told the quota ran out */
	URR_T_ARMED = 0x04,     /* a cold URR's volume threshold is armed */
};

/* struct sdf_match's flags: which conditions apply (one port range per side). */
enum sdf_flag {
	SDF_F_PROTOCOL = 0x001,      /* protocol must equal the packet's */
	SDF_F_REMOTE_ADDR = 0x002,   /* the remote address within remote.addr/mask */
	SDF_F_REMOTE_NEGATE = 0x004, /* with SDF_F_REMOTE_ADDR: outside instead */
	SDF_F_REMOTE_PORTS = 0x008,  /* the remote port within remote.port_lo..=port_hi */
	SDF_F_UE_ADDR = 0x010,       /* the UE side address within ue.addr/mask */
	SDF_F_UE_NEGATE = 0x020,     /* with SDF_F_UE_ADDR: outside instead */
	SDF_F_UE_PORTS = 0x040,      /* the UE side port within ue.port_lo..=port_hi */
	SDF_F_UE_ASSIGNED = 0x080,   /* the UE side is `assigned` (the PDI's UE address) */
	SDF_F_TOS = 0x100,           /* tos & tos_mask == tos_value */
	SDF_F_SPI = 0x200,           /* the IPsec SPI equals spi */
	SDF_F_FLOW_LABEL = 0x400,    /* the IPv6 flow label equals flow_label */
};

/* struct upf_config's flags. */
enum cfg_flag {
	CFG_F_STATIC_NEIGH = 0x01, /* use the neigh table only, not the kernel FIB */
};

/* struct upf_config's spread: whether xdp_n3 hands G-PDUs to other CPUs (include/spread.h),
 * and by what. */
enum spread_mode {
	SPREAD_OFF = 0,
	SPREAD_TEID = 1,      /* by TEID: a tunnel stays on one CPU */
	SPREAD_INNER = 2,     /* by the inner packet's addresses, protocol and ports: a flow does */
	MAX_SPREAD_CPUS = 64, /* CPUs in upf_config.spread_cpu */
	SPREAD_QUEUE = 2048,  /* frames each CPU's cpumap queue holds */
};

/* The next-hop cache's generation word (nh_gen): bit 0, the rest is the generation. */
enum nh_flag {
	NH_BY_DESTINATION = 1, /* the FIB's answer cannot depend on the source address */
};

/* struct event's type. */
enum event_type {
	EV_BUFFER = 1,    /* a packet for a FAR that buffers (with FAR_NOCP: notify) */
	EV_QUOTA = 2,     /* a URR's volume quota ran out */
	EV_THRESHOLD = 3, /* a URR's volume threshold was reached (up to a lease per lane early) */
	EV_APP_START = 4, /* a flow of an application started (struct app_event) */
	EV_REDIRECT = 5,  /* an uplink TCP segment for a redirecting FAR (upfd answers it) */
};

/* Why the data path dropped a packet: named and counted per reason with its octets (as
 * Cilium does), indices of the stats table. Operators see the name in lower case without
 * DROP_ (upf_dropped_packets_total{reason="mbr_exceeded"}). */
enum drop_reason {
	DROP_UNKNOWN_TEID = 0, /* no session has the G-PDU's TEID */
	DROP_NO_PDR,           /* the session has no PDR (or FAR) for the packet */
	DROP_GATE_CLOSED,      /* a QER's gate is closed in the packet's direction */
	DROP_MBR_EXCEEDED,     /* over a QER's maximum bit rate */
	DROP_SPOOFED_SOURCE,   /* uplink whose source is not the session's UE */
	DROP_MALFORMED_GTPU,   /* a G-PDU for us that cannot be parsed */
	DROP_MALFORMED_IP,     /* the user's packet is not a well-formed IPv4/IPv6 packet */
	DROP_MTU_EXCEEDED,     /* too long for the egress link with its new headers */
	DROP_BUFFER_FULL,      /* no room to hand a packet up for buffering */
	DROP_QUOTA_EXHAUSTED,  /* a URR's volume quota is used up */
	DROP_FAR_DROP,         /* the FAR says drop */
	DROP_TTL_EXCEEDED,     /* TTL / hop limit ran out at this hop */
	DROP_NO_ROUTE,         /* no route or neighbour for the packet */
	DROP_UNSUPPORTED,      /* rules this data path cannot apply to the packet */
	DROP_SLOWPATH_LIMIT,   /* over the rate at which packets go to upfd */
	DROP_TO_UPF,           /* uplink to the UPF's own or a protected address (N3, N4, API) */
	DROP_CORE_PROTOCOL,    /* uplink carrying GTP-U, GTP-C or PFCP: smuggled into the core */
	DROP_RULES_CHANGING,   /* the session's record was being rewritten at every read */
	DROP_REDIRECT_NOT_HTTP, /* a packet of a redirected flow that cannot be HTTP (not uplink TCP) */
	DROP_MAX,
};

/* Other counters, after the drop reasons in the stats table (names as for drops, without
 * STAT_). A frame counts once under its outcome (a drop reason or one of the first seven)
 * and once more under RECEIVED_*, the program that saw it. */
enum stat_index {
	STAT_FORWARDED_UPLINK = DROP_MAX, /* decapsulated towards the data network */
	STAT_FORWARDED_DOWNLINK,          /* encapsulated towards the access network */
	STAT_FORWARDED_N9,                /* G-PDUs relayed to another UPF */
	STAT_BUFFERED,                    /* handed to upfd for a buffering FAR */
	STAT_REDIRECTED,                  /* handed to upfd for a redirecting FAR (TCP) */
	STAT_TO_SLOWPATH,                 /* GTP-U for upfd: echo, unknown TEID, ... */
	STAT_PASSED_TO_KERNEL,            /* not for the UPF, or next hop unresolved */
	STAT_ICMP_SENT,                   /* ICMP errors (too big, out of TTL) sent to a DN host or handed to a UE's downlink rules */
	STAT_ICMP_LIMITED,                /* ICMP errors not made: over the session's or the total budget */
	STAT_RECEIVED_N3,                 /* every frame xdp_n3 saw (N3, and N9's interface) */
	STAT_RECEIVED_N6,                 /* every frame xdp_n6 saw (N6) */
	STAT_MAX,
};

/* Not read: names every enum above in one type, which upf.bpf.c instantiates so that
 * the object's BTF carries them all (crates/bpf/tests/abi.rs reads them there). */
struct abi_enums {
	enum upf_limit limit;
	enum upf_none none;
	enum core_port core_port;
	enum far_action far_action;
	enum far_ohc far_ohc;
	enum far_flag far_flag;
	enum sess_flag sess_flag;
	enum dir_flag dir_flag;
	enum lease_limit lease_limit;
	enum call_index call_index;
	enum key_kind key_kind;
	enum qer_flag qer_flag;
	enum qer_unit qer_unit;
	enum urr_flag urr_flag;
	enum sdf_flag sdf_flag;
	enum app_limit app_limit;
	enum app_proto app_proto;
	enum cfg_flag cfg_flag;
	enum spread_mode spread_mode;
	enum nh_flag nh_flag;
	enum event_type event_type;
	enum drop_reason drop_reason;
	enum stat_index stat_index;
};

#endif
