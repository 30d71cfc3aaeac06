/* SPDX-License-Identifier: GPL-2.0 */
/* Application detection (TS 29.244 clause 5.11; docs/application-detection.md is the
 * specification, crates/upf/src/model/app.rs the reference model): a packet's
 * application from the flow table, learned DNS addresses or the first uplink TCP
 * payload (TLS ClientHello SNI, HTTP request); DNS answers towards the UE teach
 * addresses. Classification never drops a packet: what does not parse is "no
 * application".
 *
 * Variable offsets are read with bpf_xdp_load_bytes into the per-CPU scratch (the stack
 * is 512 octets); long loops are bpf_loop callbacks that keep their state in the
 * scratch, so the verifier checks each once; the global (__noinline) functions are
 * verified once, not at each call. */
#ifndef UPF_APP_H
#define UPF_APP_H

#include "upf_maps.h"
#include "parse.h"
#include "sdf.h"
#include "pipeline.h"

#define APP_IDLE_NS ((__u64)APP_FLOW_IDLE_SEC * 1000000000ull)
#define APP_REFRESH_NS 1000000000ull
#define APP_KEY_MASK (APP_KEY_MAX - 1)
#define APP_BUF_MASK (APP_HTTP_SCAN - 1)

static __always_inline struct app_scratch *app_mem(void)
{
	__u32 zero = 0;

	return bpf_map_lookup_elem(&app_scratch, &zero);
}

static __always_inline __u32 be16(const __u8 *b)
{
	return ((__u32)b[0] << 8) | b[1];
}

/* `n` octets at `off` into `to`, if they lie before `end`. */
static __always_inline int app_load(struct xdp_md *ctx, __u32 off, __u32 end, void *to, __u32 n)
{
	if (off > end || end - off < n)
		return -1;
	return bpf_xdp_load_bytes(ctx, off, to, n);
}

static __always_inline __u8 lower(__u8 c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

/* One octet of a name: lower case, checked, written reversed into the key. */
static long name_cb(__u32 i, void *unused)
{
	struct app_scratch *s = app_mem();

	if (!s)
		return 1;
	__u8 c = lower(s->name[i & APP_KEY_MASK]);

	if (c == '.') {
		if (s->pos == 0 || s->pos > 63) {
			s->bad = 1;
			return 1;
		}
		s->pos = 0;
	} else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
		s->pos++;
	} else {
		s->bad = 1;
		return 1;
	}
	s->name[i & APP_KEY_MASK] = c;
	s->key.data[(s->n - 1 - i) & APP_KEY_MASK] = c;
	return 0;
}

/* The app_names key of the name in s->name[0..n) (lowered in place): 0, or -1 if it is
 * not a host name (labels of 1..63 letters, digits, '-', '_'; at most 253 octets). */
__noinline int app_name_key(__u32 n)
{
	struct app_scratch *s = app_mem();

	if (!s || n == 0 || n > APP_NAME_MAX)
		return -1;
	s->n = n;
	s->pos = 0;
	s->bad = 0;
	bpf_loop(n, name_cb, 0, 0);
	if (s->bad || s->pos == 0 || s->pos > 63)
		return -1;
	s->key.data[n & APP_KEY_MASK] = '.';
	s->key.prefixlen = (n + 1) * 8;
	return 0;
}

/* The application s->key's longest domain gives for protocol `proto` (APP_P_*). */
static __always_inline __u32 name_app(struct app_scratch *s, __u32 proto)
{
	struct app_name *v = bpf_map_lookup_elem(&app_names, &s->key);

	if (!v)
		return 0;
	return proto == APP_P_DNS ? v->dns : proto == APP_P_SNI ? v->sni : v->host;
}

/* TLS ClientHello (docs/application-detection.md): the server_name, in s->name; its
 * length, 0 if none. (The name is checked by the caller: each call is a stack frame.) */
__noinline int app_tls(struct xdp_md *ctx, __u32 p, __u32 end)
{
	struct app_scratch *s = app_mem();
	int i;

	if (!ctx || !s)
		return 0;
	if (app_load(ctx, p, end, s->b, 6) || s->b[0] != 0x16 || s->b[1] != 0x03 || s->b[5] != 0x01)
		return 0;
	/* From offset 9: version (2), random (32), then the session ID's length. */
	__u32 off = p + 9 + 2 + 32;

	if (app_load(ctx, off, end, s->b, 1) || s->b[0] > 32)
		return 0;
	off += 1 + s->b[0];
	if (app_load(ctx, off, end, s->b, 2))
		return 0;
	off += 2 + be16(s->b);
	if (app_load(ctx, off, end, s->b, 1))
		return 0;
	off += 1 + s->b[0];
	if (app_load(ctx, off, end, s->b, 2))
		return 0;
	s->limit = off + 2 + be16(s->b);
	if (s->limit > end)
		s->limit = end;
	s->off = off + 2;
	for (i = 0; i < APP_TLS_EXTENSIONS; i++) {
		__u32 at = s->off, limit = s->limit;

		if (app_load(ctx, at, limit, s->b, 4))
			return 0;
		__u32 len = be16(s->b + 2);

		if (at + 4 + len > limit)
			return 0;
		if (be16(s->b) == 0) {
			/* server_name: list length (2), type 0 (host_name), name length (2), name;
			 * inside the extension. */
			__u32 data = at + 4, dend = at + 4 + len;

			if (app_load(ctx, data, dend, s->b, 5) || s->b[2] != 0)
				return 0;
			__u32 n = be16(s->b + 3);

			if (n == 0 || n > APP_NAME_MAX || data + 5 + n > dend)
				return 0;
			if (bpf_xdp_load_bytes(ctx, data + 5, s->name, n))
				return 0;
			return n;
		}
		s->off = at + 4 + len;
	}
	return 0;
}

/* The first space at or after s->pos in s->buf[0..s->n). */
static long space_cb(__u32 i, void *unused)
{
	struct app_scratch *s = app_mem();

	if (!s)
		return 1;
	__u32 at = s->pos + i;

	if (at >= s->n)
		return 1;
	if (s->buf[at & APP_BUF_MASK] == ' ') {
		s->end = at;
		s->found = 1;
		return 1;
	}
	return 0;
}

enum { HTTP_LINE_START, HTTP_IN_LINE, HTTP_VALUE_WS, HTTP_VALUE };

/* The header lines from s->pos: the first `Host:` line's value (s->start .. s->end,
 * s->colon its first ':'), up to the empty line that ends the headers. */
static long header_cb(__u32 i, void *unused)
{
	struct app_scratch *s = app_mem();

	if (!s)
		return 1;
	__u32 at = s->pos + i;

	if (at >= s->n)
		return 1;
	if (at < s->next)
		return 0;
	__u8 c = s->buf[at & APP_BUF_MASK];

	switch (s->state) {
	case HTTP_LINE_START:
		if (c == '\n' || (c == '\r' && at + 1 < s->n && s->buf[(at + 1) & APP_BUF_MASK] == '\n'))
			return 1;
		if (at + 5 <= s->n && lower(c) == 'h' &&
		    lower(s->buf[(at + 1) & APP_BUF_MASK]) == 'o' &&
		    lower(s->buf[(at + 2) & APP_BUF_MASK]) == 's' &&
		    lower(s->buf[(at + 3) & APP_BUF_MASK]) == 't' &&
		    s->buf[(at + 4) & APP_BUF_MASK] == ':') {
			s->state = HTTP_VALUE_WS;
			s->next = at + 5;
			return 0;
		}
		s->state = HTTP_IN_LINE;
		return 0;
	case HTTP_IN_LINE:
		if (c == '\n')
			s->state = HTTP_LINE_START;
		return 0;
	case HTTP_VALUE_WS:
		if (c == ' ' || c == '\t')
			return 0;
		s->state = HTTP_VALUE;
		s->start = at;
		s->colon = 0;
		/* fall through */
	default:
		if (c == '\r' || c == '\n' || c == ' ' || c == '\t') {
			s->end = at;
			s->found = 1;
			return 1;
		}
		if (c == ':' && !s->colon)
			s->colon = at;
		return 0;
	}
}

/* s->name[i] = s->buf[s->start + i]. */
static long host_cb(__u32 i, void *unused)
{
	struct app_scratch *s = app_mem();

	if (!s)
		return 1;
	s->name[i & APP_KEY_MASK] = s->buf[(s->start + i) & APP_BUF_MASK];
	return 0;
}

/* The URL key: the host (s->name[0..s->n), lowered), then the request-target. */
static long url_cb(__u32 i, void *unused)
{
	struct app_scratch *s = app_mem();

	if (!s)
		return 1;
	__u8 c = i < s->n ? s->name[i & APP_KEY_MASK]
			  : s->buf[(s->target + i - s->n) & APP_BUF_MASK];

	s->url.data[i & APP_KEY_MASK] = c;
	return 0;
}

/* An HTTP request (docs/application-detection.md): its Host in s->name, its
 * request-target at s->buf[s->target ..][.. s->target_len]; the Host's length, 0 if
 * none. */
__noinline int app_http(struct xdp_md *ctx, __u32 p, __u32 end)
{
	struct app_scratch *s = app_mem();
	__u32 n, k;

	if (!ctx || !s || p >= end)
		return 0;
	n = end - p;
	if (n > APP_HTTP_SCAN)
		n = APP_HTTP_SCAN;
	if (n < 1 || bpf_xdp_load_bytes(ctx, p, s->buf, n))
		return 0;
	s->n = n;
	/* The method: 1 to 7 upper-case letters, then a space. */
	for (k = 0; k < 8; k++) {
		if (k >= n)
			return 0;
		__u8 c = s->buf[k];

		if (c == ' ')
			break;
		if (c < 'A' || c > 'Z')
			return 0;
	}
	if (k == 0 || k > 7 || k + 1 >= n || s->buf[(k + 1) & APP_BUF_MASK] != '/')
		return 0;
	s->target = k + 1;
	s->pos = k + 1;
	s->found = 0;
	bpf_loop(n - s->pos, space_cb, 0, 0);
	if (!s->found)
		return 0;
	__u32 t1 = s->end;

	if (t1 + 8 > n)
		return 0;
	for (k = 0; k < 8; k++)
		if (s->buf[(t1 + k) & APP_BUF_MASK] != " HTTP/1."[k])
			return 0;
	s->target_len = t1 - s->target;
	s->pos = t1 + 8;
	s->next = 0;
	s->state = HTTP_IN_LINE;
	s->found = 0;
	if (s->pos < n)
		bpf_loop(n - s->pos, header_cb, 0, 0);
	if (!s->found)
		return 0;
	__u32 hlen = (s->colon ? s->colon : s->end) - s->start;

	if (hlen == 0 || hlen > APP_NAME_MAX)
		return 0;
	bpf_loop(hlen, host_cb, 0, 0);
	return hlen;
}

/* The application of the longest http:// URL matching the checked Host in s->name[0..n)
 * and the request-target (the key cut at APP_KEY_MAX - 1 octets); 0: none. */
__noinline int app_url(__u32 n)
{
	struct app_scratch *s = app_mem();

	if (!s || n == 0 || n > APP_NAME_MAX)
		return 0;
	__u32 ulen = n + s->target_len;

	if (ulen > APP_KEY_MAX - 1)
		ulen = APP_KEY_MAX - 1;
	s->n = n;
	bpf_loop(ulen, url_cb, 0, 0);
	s->url.prefixlen = ulen * 8;
	__u16 *u = bpf_map_lookup_elem(&app_urls, &s->url);

	return u ? *u : 0;
}

/* The question name: wire labels from s->buf[0] to text in s->name. */
static long qname_cb(__u32 i, void *unused)
{
	struct app_scratch *s = app_mem();

	if (!s)
		return 1;
	__u8 c = s->buf[i & APP_BUF_MASK];

	if (i == s->next) {
		if (c == 0) {
			s->end = i;
			s->found = 1;
			return 1;
		}
		if (c > 63) { /* compressed or not a label */
			s->bad = 1;
			return 1;
		}
		if (i)
			s->name[(i - 1) & APP_KEY_MASK] = '.';
		s->next = i + 1 + c;
		return 0;
	}
	if (c == '.') { /* not a host name's label */
		s->bad = 1;
		return 1;
	}
	s->name[(i - 1) & APP_KEY_MASK] = c;
	return 0;
}

/* One answer record at s->off (before s->limit): learn its address for s->app. 0 on,
 * -1 when the walk ends. */
__noinline int app_dns_record(struct xdp_md *ctx)
{
	struct app_scratch *s = app_mem();
	int l;

	if (!ctx || !s)
		return -1;
	__u32 off = s->off, end = s->limit;

	/* The owner name: up to 16 labels, then 0 or a compression pointer. */
	for (l = 0; l <= 16; l++) {
		if (app_load(ctx, off, end, s->b, 1))
			return -1;
		if (s->b[0] == 0) {
			off += 1;
			break;
		}
		if ((s->b[0] & 0xc0) == 0xc0) {
			off += 2;
			break;
		}
		if ((s->b[0] & 0xc0) || l == 16)
			return -1;
		off += 1 + s->b[0];
	}
	if (app_load(ctx, off, end, s->b, 10))
		return -1;
	__u32 type = be16(s->b), class = be16(s->b + 2), rdlen = be16(s->b + 8);
	__u32 ttl = ((__u32)s->b[4] << 24) | ((__u32)s->b[5] << 16) | ((__u32)s->b[6] << 8) | s->b[7];
	__u32 rd = off + 10;

	if (rd + rdlen > end)
		return -1;
	s->off = rd + rdlen;
	if (class != 1 || ttl == 0 || !((type == 1 && rdlen == 4) || (type == 28 && rdlen == 16)))
		return 0;
	__builtin_memset(&s->addr, 0, sizeof(s->addr));
	s->addr.family = type == 1 ? 4 : 6;
	if (bpf_xdp_load_bytes(ctx, rd, s->addr.addr, type == 1 ? 4 : 16))
		return -1;
	if (ttl > APP_TTL_MAX)
		ttl = APP_TTL_MAX;
	s->learned.expires_ns = s->now + (__u64)ttl * 1000000000ull;
	s->learned.app = s->app;
	bpf_map_update_elem(&app_addrs, &s->addr, &s->learned, BPF_ANY);
	return 0;
}

/* A DNS answer towards the UE (downlink UDP from port 53 in a session with an
 * application PDR, first fragment: ports read): its addresses are learned for the
 * question's application (protocol DNS). Called after the packet is classified. */
__noinline int app_dns(struct xdp_md *ctx, const struct pkt *pk)
{
	struct app_scratch *s = app_mem();
	int r;

	if (!ctx || !pk || !s)
		return 0;
	const struct flow *f = &pk->f;
	__u32 l3 = pk->o.inner;
	__u64 now = pk->now;

	if (pk->up || f->proto != 17 || !f->has_ports || f->sport != 53)
		return 0;
	__u32 end = l3 + f->len;
	/* parse_inner found the UDP header (ports read: a first fragment). */
	__u32 p = f->l4 + 8;

	if (app_load(ctx, p, end, s->b, 12))
		return 0;
	__u32 flags = be16(s->b + 2);

	/* QR = 1, opcode 0, RCODE 0, one question. */
	if (!(flags & 0x8000) || (flags & 0x7800) || (flags & 0x000f) || be16(s->b + 4) != 1)
		return 0;
	__u32 ancount = be16(s->b + 6);
	__u32 q = p + 12, n = end - q;

	if (n > APP_KEY_MAX)
		n = APP_KEY_MAX;
	if (n < 1 || bpf_xdp_load_bytes(ctx, q, s->buf, n))
		return 0;
	s->next = 0;
	s->found = 0;
	s->bad = 0;
	bpf_loop(n, qname_cb, 0, 0);
	if (!s->found || s->bad || s->end == 0)
		return 0;
	/* The name, then QTYPE and QCLASS. */
	__u32 after = q + s->end + 1 + 4;

	if (after > end || app_name_key(s->end - 1))
		return 0;
	s->app = name_app(s, APP_P_DNS);
	if (!s->app)
		return 0;
	s->off = after;
	s->limit = end;
	s->now = now;
	for (r = 0; r < APP_DNS_ANSWERS; r++) {
		if (r >= ancount || app_dns_record(ctx))
			break;
	}
	return 0;
}

/* The flow stamp of session `seid` (app_stamps, upf_maps.h): its octet, 0 if none.
 * SEIDs are random 64-bit numbers: their low bits (folded with the high ones) are the
 * hash; sessions that share a stamp only make each other look up app_flows. */
static __always_inline __u8 *app_stamp(__u64 seid)
{
	__u32 h = ((__u32)seid ^ (__u32)(seid >> 32)) & (APP_STAMP_ENTRIES * 64 - 1);
	__u32 i = h / 64;
	struct app_stamps *st = bpf_map_lookup_elem(&app_stamps, &i);

	return st ? &st->s[h & 63] : 0;
}

/* Whether the session whose stamp is `stamp` may have a live app_flows entry at `now`.
 *
 * Every write of an entry's last_ns (entered, or refreshed when a second old) first
 * writes the session's stamp with the epoch of the same `now`, E(t) = (u8)(t >>
 * APP_STAMP_SHIFT), an epoch being 2^36 ns = 68.7 s. A stamp is only ever overwritten
 * with the epoch of a later clock reading, give or take the time from a CPU's reading
 * (process() reads the coarse clock once per packet) to its write, microseconds
 * (call it d; another session sharing the octet writes its own current epoch too). So
 * a live entry, last_ns > now - APP_FLOW_IDLE_SEC (120 s), has a stamp written at some
 * t > now - 120 s - d: now - t < 137.4 s = two epochs, so the true epoch difference
 * E(now) - E(t) is at most 2; and at least -1 (this CPU read the clock just before
 * another CPU wrote the next epoch). Hence for a live entry (u8)(E(now) - stamp + 1)
 * is 0..3, and only a stamp outside that can be skipped. The octet's wrap (every 256
 * epochs, 4.9 hours) can only make an old stamp look new: an extra lookup, never a live
 * entry skipped. Stamps start at 0 (at load): a session without entries is looked up
 * only while (u8)(E(now) + 1) <= 3 (the first ~3 minutes after boot, then 4 epochs in
 * every 256), again only extra lookups. The margin for d is 137.4 - 120 = 17 s. */
static __always_inline int app_stamp_live(__u8 stamp, __u64 now)
{
	return (__u8)((__u8)(now >> APP_STAMP_SHIFT) - stamp + 1) <= 3;
}

/* Write the session's stamp (before its entry): the current epoch. Written only when
 * it changes, so that the cache line is not dirtied by every refresh. */
static __always_inline void app_stamp_set(__u64 seid, __u64 now)
{
	__u8 *stamp = app_stamp(seid);
	__u8 epoch = (__u8)(now >> APP_STAMP_SHIFT);

	if (stamp && *stamp != epoch)
		*stamp = epoch;
}

/* The packet's application (0: none), per docs/application-detection.md "What a
 * packet's application is"; enters newly classified flows in app_flows (and raises
 * EV_APP_START when the session asks, SR_APP_REPORT). A global function: verified once
 * (state stays in the scratch). */
__noinline int app_classify(struct xdp_md *ctx, const struct pkt *pk)
{
	struct app_scratch *s = app_mem();

	if (!ctx || !pk || !s)
		return 0;
	const struct flow *f = &pk->f;
	__u64 seid = pk->rec.seid, now = pk->now;
	__u32 l3 = pk->o.inner;
	int up = pk->up, report = !!(pk->rec.flags & SR_APP_REPORT);
	struct app_flow_key *k = &s->flow;

	s->app = 0;
	s->now = now;
	s->limit = l3 + f->len;
	__builtin_memset(k, 0, sizeof(*k));
	k->seid = seid;
	k->version = f->version;
	k->proto = f->proto;
	__builtin_memcpy(k->ue, up ? f->src : f->dst, 16);
	__builtin_memcpy(k->remote, up ? f->dst : f->src, 16);
	if (f->has_ports) {
		k->ue_port = up ? f->sport : f->dport;
		k->remote_port = up ? f->dport : f->sport;
	}
	/* 1. The flow table, unless the session's stamp says it has no live entry (most
	 * sessions' traffic is of no application: a cold hash bucket saved per packet). */
	__u8 *stamp = app_stamp(seid);

	if (!stamp || app_stamp_live(*stamp, now)) {
		struct app_flow *e = bpf_map_lookup_elem(&app_flows, k);

		if (e && (__s64)(now - e->last_ns) < (__s64)APP_IDLE_NS) {
			if ((__s64)(now - e->last_ns) >= (__s64)APP_REFRESH_NS) {
				app_stamp_set(seid, now);
				e->last_ns = now;
			}
			return e->app;
		}
	}
	/* 2. A learned address. */
	__builtin_memset(&s->addr, 0, sizeof(s->addr));
	s->addr.family = f->version;
	__builtin_memcpy(s->addr.addr, k->remote, 16);
	struct app_addr *a = bpf_map_lookup_elem(&app_addrs, &s->addr);

	if (a && a->expires_ns > now) {
		s->app = a->app;
	} else if (up && f->proto == 6 && f->has_ports) {
		/* 3. The uplink TCP payload: a ClientHello's SNI, else an HTTP request. */
		/* parse_inner found the TCP header (ports read: a first fragment). */
		__u32 l4 = f->l4;

		if (app_load(ctx, l4, s->limit, s->b, 13))
			return 0;
		__u32 p = l4 + (s->b[12] >> 4) * 4;

		if ((s->b[12] >> 4) < 5 || p >= s->limit)
			return 0;
		__u32 proto = APP_P_SNI;
		int n = app_tls(ctx, p, s->limit);

		if (n <= 0) {
			proto = APP_P_HOST;
			n = app_http(ctx, p, s->limit);
		}
		if (n <= 0 || app_name_key(n))
			return 0;
		if (proto == APP_P_HOST)
			s->app = app_url(n);
		if (!s->app)
			s->app = name_app(s, proto);
	}
	if (s->app) {
		app_stamp_set(seid, now);
		s->entry.last_ns = now;
		s->entry.app = s->app;
		bpf_map_update_elem(&app_flows, &s->flow, &s->entry, BPF_ANY);
		if (report) {
			struct app_event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);

			if (ev) {
				ev->type = EV_APP_START;
				ev->app = s->app;
				ev->ts_ns = now;
				__builtin_memcpy(&ev->flow, &s->flow, sizeof(ev->flow));
				bpf_ringbuf_submit(ev, 0);
			}
		}
	}
	return s->app;
}

/* Whether the packet matches one of application `ae`'s flow descriptions, seen in the
 * PDR's direction (`uplink`) as its SDF filters would be. */
static __always_inline int app_flows_match(const struct app_entry *ae, const struct flow *f,
					   int uplink)
{
	int j;

	for (j = 0; j < APP_MAX_SDF; j++) {
		if (j >= ae->n_sdf)
			break;
		__u32 si = ae->sdf + j;
		struct sdf_match *m = bpf_map_lookup_elem(&app_sdfs, &si);

		if (m && sdf_matches(m, f, uplink))
			return 1;
	}
	return 0;
}

#endif
