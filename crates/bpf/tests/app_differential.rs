//! Differential test of application detection (docs/application-detection.md): the XDP
//! programs (BPF_PROG_RUN on the compiled tables, bpf/include/app.h) and the reference
//! model (upf::model, model/app.rs) get the same PFD table (three applications with
//! domain names, `http://` URLs with paths, an `https://` URL and a flow description),
//! the same sessions (default PDRs and application PDRs with their own FARs, URRs and,
//! for one application, a QER whose gate is closed) and the same frames, and must agree
//! on the verdict, the output octets, every counter, every URR's counts after each frame
//! and the application events.
//!
//! The frames: DNS answers towards the UE (valid ones with A, AAAA and CNAME records,
//! compression pointers, TTLs of 0, 3600 and 86400 or more, names inside and outside the
//! PFDs' domains in any case; malformed ones: cut at any length, bad label lengths,
//! pointers in the question, QDCOUNT other than 1, RCODE other than 0, fewer records
//! than ANCOUNT says); uplink TCP first segments with TLS ClientHellos (random
//! extensions before and after server_name, random session IDs and cipher lists, cut at
//! any length, lengths past the end, names with bad characters) and HTTP requests
//! (methods, request-targets matching the URLs' paths or not, Host in any case, with a
//! port, beyond the 512-octet window, missing, malformed); then packets of the same
//! flows both ways without payload, new flows to and from the addresses the answers
//! named, and UDP matching the flow description.
//!
//! TTLs of 1..=5 s are not generated: the model's clock is the frame counter, the data
//! path's the kernel's, and a TTL that short would race it.
//!
//! The frames run on one CPU, and the model has the data path's lanes and is told which
//! CPU: URR counts and leases are per lane.
//!
//! UPF_APP_DIFF_CASES (default 60000) frames; UPF_APP_DIFF_SEED picks the generator's
//! seed (printed, so a failure can be replayed). Needs CAP_BPF (root).

mod common;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::rc::Rc;
use std::sync::Arc;

use common::urr_template;
use pfcp::ie::{reporting_triggers, OuterHeaderCreation, OuterHeaderRemoval, SdfFilter};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use upf::abi::{DropReason, Stat};
use upf::fastpath::{Config, Egress, Event, FastPath};
use upf::model::{app, Model, Verdict};
use upf::pfd::{AppPfds, PfdTable};
use upf::rules::*;
use upf_bpf::datapath::{Capacity, Datapath};

const N3: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 7);
const GNB: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 1);
/// The DNS resolver the answers come from.
const RESOLVER: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
const RESOLVER_V6: Ipv6Addr = Ipv6Addr::new(0x2001, 0xdb8, 0x53, 0, 0, 0, 0, 53);
/// The application flow description's remote prefix (`video`, UDP).
const FD_NET: [u8; 3] = [203, 0, 113];

// ---- the applications ----

/// The applications in their index order (video 1, chat 2, mail 3).
const APPS: [&str; 3] = ["video", "chat", "mail"];

/// A URL whose host and path are 255 octets together: a longer request-target is cut to
/// the key's 255 octets and still matches.
fn long_url_path() -> String {
    format!("/{}", "p".repeat(255 - "long.example".len() - 1))
}

/// The PFDs of the three applications: names for every protocol and for some only, a
/// domain two applications list (the lower index wins), a longer domain that lists a
/// protocol the shorter one's application does not (the longer decides), URLs whose
/// paths are prefixes of each other (the longest wins), an `https://` URL (SNI only)
/// and a flow description.
fn pfd_table() -> PfdTable {
    let mut t = PfdTable::new();
    let mut video = AppPfds::default();
    video.add_domain("video.example", None).unwrap();
    video.add_domain("shared.example", None).unwrap();
    video.add_url("http://media.example/v/").unwrap();
    video
        .add_url(&format!("http://long.example{}", long_url_path()))
        .unwrap();
    video
        .add_flow("permit out 17 from 203.0.113.0/24 to assigned")
        .unwrap();
    let mut chat = AppPfds::default();
    chat.add_domain("*.chat.example", None).unwrap();
    chat.add_domain("sni.video.example", Some("TLS_SNI"))
        .unwrap();
    chat.add_domain("shared.example", None).unwrap();
    chat.add_domain("_srv.chat.example", Some("DNS_QNAME"))
        .unwrap();
    chat.add_url("https://secure.example/login").unwrap();
    let mut mail = AppPfds::default();
    mail.add_domain("mail.example", Some("DNS_QNAME")).unwrap();
    mail.add_domain("san.example", Some("TLS_SAN")).unwrap();
    mail.add_domain("Host.Example", None).unwrap();
    mail.add_url("http://media.example/v/long/").unwrap();
    mail.add_url("http://mail.example:8080/").unwrap();
    for (id, p) in APPS.iter().zip([video, chat, mail]) {
        t.set(id, p, true).unwrap();
    }
    t
}

/// The PFDs after a change (PFD Management): 0 as at the start; 1 "chat" without its
/// domain names (its `https://` URL stays); 2 also "video" without its URLs.
fn pfd_variant(v: u64) -> PfdTable {
    let mut t = pfd_table();
    if v == 0 {
        return t;
    }
    let mut chat = t.get("chat").unwrap().pfds.clone();
    chat.domains.retain(|d| d.name == "secure.example");
    t.set("chat", chat, false).unwrap();
    if v == 2 {
        let mut video = t.get("video").unwrap().pfds.clone();
        video.urls.clear();
        t.set("video", video, false).unwrap();
    }
    t
}

/// Names the generator puts in questions, server_names and Hosts: the PFDs' domains and
/// names below them, names that only look like them, and names at the limits.
const NAMES: &[&str] = &[
    "video.example",
    "www.video.example",
    "a.b.c.video.example",
    "sni.video.example",
    "x.sni.video.example",
    "chat.example",
    "img.chat.example",
    "_srv.chat.example",
    "a._srv.chat.example",
    "secure.example",
    "api.secure.example",
    "mail.example",
    "imap.mail.example",
    "san.example",
    "shared.example",
    "s.shared.example",
    "media.example",
    "long.example",
    "host.example",
    "-x.host.example",
    // Outside every domain.
    "example.com",
    "xvideo.example",
    "video.example.org",
    "videoexample",
    "notchat.example",
    "example",
    "ideo.example",
    "chat.example.evil",
    "other.net",
];

/// Host names with characters no host name has, and label and length limits.
fn odd_name(rng: &mut StdRng) -> Vec<u8> {
    let l63 = "a".repeat(63);
    let mut n = match rng.random_range(0..12) {
        0 => b"vi deo.example".to_vec(),
        1 => b"vid*o.example".to_vec(),
        2 => b"v\xedd.video.example".to_vec(),
        3 => b"video..example".to_vec(),
        4 => b"video.example.".to_vec(),
        5 => b".video.example".to_vec(),
        6 => format!("{l63}.video.example").into_bytes(),
        7 => format!("{l63}a.video.example").into_bytes(),
        8 | 9 => {
            // 253 octets in all (or 254): labels of 63, then the rest, then the domain.
            let total = if rng.random_bool(0.5) { 253 } else { 254 };
            let tail = ".video.example";
            let mut n = String::new();
            while n.len() + tail.len() < total {
                let room = total - tail.len() - n.len();
                let sep = usize::from(!n.is_empty());
                let l = room.saturating_sub(sep).min(63);
                if l == 0 {
                    break;
                }
                if sep == 1 {
                    n.push('.');
                }
                n.push_str(&"b".repeat(l));
            }
            n.push_str(tail);
            n.into_bytes()
        }
        10 => b"video.example\0".to_vec(),
        _ => b"".to_vec(),
    };
    if rng.random_bool(0.2) {
        n.make_ascii_uppercase();
    }
    n
}

// ---- sessions ----

/// What a generated session offers the frame generator.
#[derive(Clone)]
struct SessionInfo {
    teid: u32,
    ue_v4: Ipv4Addr,
    ue_v6: Option<Ipv6Addr>,
}

/// One flow the generator started: the session, the UE's side, the remote side.
#[derive(Clone, Copy)]
struct Flow {
    si: usize,
    proto: u8,
    ue: IpAddr,
    ue_port: u16,
    remote: IpAddr,
    remote_port: u16,
}

struct Gen {
    rng: StdRng,
    urr: pfcp::msg::CreateUrr,
    next_teid: u32,
    /// Addresses the generated DNS answers named (learned or not).
    answered: Vec<IpAddr>,
    /// Flows of the current batch's sessions.
    flows: Vec<Flow>,
    /// What the generated payloads are, as the model's parsers read them (how much of
    /// each kind the test reaches; no verdict depends on it).
    reached: BTreeMap<&'static str, usize>,
    pfds: PfdTable,
}

impl Gen {
    fn chance(&mut self, p: f64) -> bool {
        self.rng.random_bool(p)
    }

    fn reach(&mut self, what: &'static str) {
        *self.reached.entry(what).or_default() += 1;
    }

    /// Count what a generated payload is to the model's parsers.
    fn note_dns(&mut self, p: &[u8]) {
        match app::parse_dns(p) {
            None => self.reach("dns: not an answer"),
            Some(a) => match app::name_app(&self.pfds, &a.qname, upf::abi::APP_P_DNS) {
                None => self.reach("dns: answer of no application"),
                Some(_) if a.addrs.iter().any(|(_, ttl)| *ttl > 0) => {
                    self.reach("dns: addresses of an application")
                }
                Some(_) => self.reach("dns: application, no usable address"),
            },
        }
    }

    fn note_payload(&mut self, p: &[u8], kind: &'static str) {
        let sni = app::parse_sni(p);
        let http = app::parse_http(p);
        let what = match (kind, &sni, &http) {
            ("tls", None, _) => "tls: no server_name",
            ("tls", Some(n), _) => match app::name_app(&self.pfds, n, upf::abi::APP_P_SNI) {
                Some(_) => "tls: server_name of an application",
                None => "tls: server_name of none",
            },
            (_, _, None) => "http: not a request with a Host",
            (_, _, Some(r)) => match app::url_app(&self.pfds, &r.url_key()) {
                Some(_) => "http: URL of an application",
                None => match app::name_app(&self.pfds, &r.host, upf::abi::APP_P_HOST) {
                    Some(_) => "http: Host of an application",
                    None => "http: Host of none",
                },
            },
        };
        self.reach(what);
    }

    fn pick<T: Copy>(&mut self, v: &[T]) -> T {
        v[self.rng.random_range(0..v.len())]
    }

    fn urr(&mut self, id: u32, start: bool) -> Urr {
        let mut rule = self.urr.clone();
        rule.urr_id = id;
        rule.reporting_triggers
            .set(reporting_triggers::START, start);
        Urr::new(&rule)
    }

    fn forward(id: u32, uplink: bool, teid: u32) -> Far {
        Far {
            id,
            action: ApplyAction {
                forw: true,
                ..Default::default()
            },
            forwarding: Some(Forwarding {
                destination_interface: if uplink {
                    interface::CORE
                } else {
                    interface::ACCESS
                },
                outer_header_creation: (!uplink).then(|| OuterHeaderCreation::gtpu_ipv4(teid, GNB)),
                ..Default::default()
            }),
            bar_id: None,
        }
    }

    /// A session: default PDRs both ways (URR 1) and, for a random subset of the
    /// applications, an uplink and a downlink PDR naming it with its own FAR (downlink:
    /// its own tunnel, so the output octets say which PDR matched) and URR; the
    /// application `chat`'s PDRs have a QER whose gate is closed in one direction or
    /// both. Now and then a session without application PDRs, an application PDR below
    /// the default's precedence, or one with an SDF filter as well.
    fn session(&mut self, seid: u64, index: u32) -> (Session, SessionInfo) {
        let mut s = common::empty_session(seid);
        let ue_v4 = Ipv4Addr::from(0x0a2d_0000 + index + 1);
        let ue_v6 = self
            .chance(0.3)
            .then(|| Ipv6Addr::new(0x2001, 0xdb8, 0x45, index as u16, 0, 0, 0, 1));
        self.next_teid += self.rng.random_range(1..1000);
        let teid = self.next_teid;
        let any_start = self.chance(0.3);
        let start = self.chance(0.5) && any_start;
        s.urrs.insert(1, self.urr(1, start));
        s.fars.insert(1, Self::forward(1, true, 0));
        s.fars.insert(2, Self::forward(2, false, 0x100 + index));
        let gate_ul = self.chance(0.5);
        let gate_dl = !gate_ul || self.chance(0.3);
        s.qers.insert(
            1,
            Qer {
                id: 1,
                gate_ul_open: !gate_ul,
                gate_dl_open: !gate_dl,
                ..Qer::default()
            },
        );
        let ue_ip = UeIp {
            ipv4: Some(ue_v4),
            ipv6: ue_v6,
            ..Default::default()
        };
        let uplink_pdi = |app: Option<&str>, sdf: Option<&str>| Pdi {
            source_interface: interface::ACCESS,
            local_fteid: Some(LocalFteid {
                teid,
                ipv4: Some(N3),
                ipv6: None,
            }),
            ue_ips: thin_vec![ue_ip],
            application_id: app.map(str::to_string),
            sdf_filters: sdf
                .map(|f| SdfFilter {
                    flow_description: Some(f.as_bytes().to_vec()),
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..Default::default()
        };
        let downlink_pdi = |app: Option<&str>, sdf: Option<&str>| Pdi {
            source_interface: interface::CORE,
            ue_ips: thin_vec![UeIp {
                is_destination: true,
                ..ue_ip
            }],
            application_id: app.map(str::to_string),
            sdf_filters: sdf
                .map(|f| SdfFilter {
                    flow_description: Some(f.as_bytes().to_vec()),
                    ..Default::default()
                })
                .into_iter()
                .collect(),
            ..Default::default()
        };
        let pdr = |id: u16, precedence: u32, pdi: Pdi, far: u32, urr: u32, qer: bool| Pdr {
            id,
            precedence,
            pdi,
            outer_header_removal: (id % 2 == 1).then_some(OuterHeaderRemoval {
                description: 0,
                ext_header_deletion: None,
            }),
            far_id: Some(far),
            urr_ids: upf::rules::smallvec![urr],
            qer_ids: if qer {
                upf::rules::smallvec![1]
            } else {
                Default::default()
            },
            activation_time: None,
            deactivation_time: None,
        };
        s.pdrs
            .insert(1, pdr(1, 1000, uplink_pdi(None, None), 1, 1, false));
        s.pdrs
            .insert(2, pdr(2, 1000, downlink_pdi(None, None), 2, 1, false));
        let with_apps = !self.chance(0.1);
        for (k, app) in APPS.iter().enumerate() {
            if !with_apps || self.chance(0.25) {
                continue;
            }
            let k = k as u16;
            let urr = 2 + u32::from(k);
            s.urrs.insert(urr, self.urr(urr, any_start));
            let ul_far = 3 + 2 * u32::from(k);
            s.fars.insert(ul_far, Self::forward(ul_far, true, 0));
            s.fars.insert(
                ul_far + 1,
                Self::forward(ul_far + 1, false, 0x10_0000 * (u32::from(k) + 1) + index),
            );
            let precedence = if self.chance(0.05) {
                2000
            } else {
                self.rng.random_range(10..100)
            };
            let sdf = self.chance(0.1).then(|| {
                self.pick(&[
                    "permit out 6 from any to assigned",
                    "permit out 17 from any to assigned",
                ])
            });
            let gated = *app == "chat";
            s.pdrs.insert(
                3 + 2 * k,
                pdr(
                    3 + 2 * k,
                    precedence,
                    uplink_pdi(Some(app), sdf),
                    ul_far,
                    urr,
                    gated,
                ),
            );
            s.pdrs.insert(
                4 + 2 * k,
                pdr(
                    4 + 2 * k,
                    precedence,
                    downlink_pdi(Some(app), sdf),
                    ul_far + 1,
                    urr,
                    gated,
                ),
            );
        }
        (s, SessionInfo { teid, ue_v4, ue_v6 })
    }

    // ---- addresses ----

    /// A remote address: from the small pools DNS answers name (so answers collide and
    /// flows reach learned addresses), the flow description's prefix, or elsewhere.
    fn remote(&mut self, v6: bool) -> IpAddr {
        if !self.answered.is_empty() && self.chance(0.3) {
            let a = self.pick(&self.answered.clone());
            if a.is_ipv6() == v6 {
                return a;
            }
        }
        self.pool_addr(v6)
    }

    fn pool_addr(&mut self, v6: bool) -> IpAddr {
        match (v6, self.rng.random_range(0..10)) {
            (false, 0) => IpAddr::V4(Ipv4Addr::new(
                FD_NET[0],
                FD_NET[1],
                FD_NET[2],
                self.rng.random(),
            )),
            (false, 1) => IpAddr::V4(Ipv4Addr::new(198, 51, 100, self.rng.random())),
            (false, _) => IpAddr::V4(Ipv4Addr::new(198, 18, 0, self.rng.random_range(0..64))),
            (true, 0) => IpAddr::V6(Ipv6Addr::new(
                0x2001,
                0xdb8,
                0xbeef,
                0,
                0,
                0,
                0,
                self.rng.random(),
            )),
            (true, _) => IpAddr::V6(Ipv6Addr::new(
                0x2001,
                0xdb8,
                0xcafe,
                0,
                0,
                0,
                0,
                self.rng.random_range(0..64),
            )),
        }
    }

    fn ue_addr(&mut self, s: &SessionInfo) -> IpAddr {
        match s.ue_v6 {
            Some(a) if self.chance(0.3) => IpAddr::V6(a),
            _ => IpAddr::V4(s.ue_v4),
        }
    }

    // ---- names ----

    /// A name as it appears in a packet: one of NAMES, now and then in mixed case, or an
    /// odd one.
    fn name(&mut self) -> Vec<u8> {
        if self.chance(0.1) {
            return odd_name(&mut self.rng);
        }
        let mut n = self.pick(NAMES).as_bytes().to_vec();
        if self.chance(0.3) {
            for b in n.iter_mut() {
                if self.rng.random_bool(0.4) {
                    b.make_ascii_uppercase();
                }
            }
        }
        n
    }

    // ---- DNS ----

    /// A name in DNS wire form: its labels (an empty label or one over 63 octets as it
    /// comes, which is a bad label length), then a zero octet.
    fn wire_name(name: &[u8]) -> Vec<u8> {
        let mut w = Vec::new();
        if !name.is_empty() {
            for l in name.split(|b| *b == b'.') {
                w.push(l.len() as u8);
                w.extend_from_slice(l);
            }
        }
        w.push(0);
        w
    }

    fn ttl(&mut self) -> u32 {
        match self.rng.random_range(0..10) {
            0 | 1 => 0,
            2..=4 => 3600,
            5 => 86400,
            6 => 86401,
            7 => 0x7fff_ffff,
            8 => 0xffff_ffff,
            _ => self.rng.random_range(600..1_000_000),
        }
    }

    /// A DNS response's payload and the addresses its A/AAAA records name; valid or, now
    /// and then, malformed in one of the ways the specification names.
    fn dns(&mut self) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&self.rng.random::<u16>().to_be_bytes());
        let mut flags: u16 = 0x8180; // QR, RD, RA
        if self.chance(0.3) {
            flags |= 0x0400; // AA
        }
        match self.rng.random_range(0..40) {
            0 => flags &= !0x8000, // a query
            1 => flags |= 0x0800,  // opcode 1
            2 => flags |= 3,       // NXDOMAIN
            3 => flags |= 2,       // SERVFAIL
            4 => flags |= 0x0200,  // TC
            _ => {}
        }
        p.extend_from_slice(&flags.to_be_bytes());
        let qdcount: u16 = match self.rng.random_range(0..30) {
            0 => 0,
            1 => 2,
            _ => 1,
        };
        let records = self.rng.random_range(0..=10usize);
        let ancount: u16 = match self.rng.random_range(0..20) {
            0 => records as u16 + self.rng.random_range(1..4),
            1 => 0xffff,
            2 => records.saturating_sub(1) as u16,
            _ => records as u16,
        };
        p.extend_from_slice(&qdcount.to_be_bytes());
        p.extend_from_slice(&ancount.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 0]);
        // The question.
        let qname = self.name();
        let mut wq = Self::wire_name(&qname);
        match self.rng.random_range(0..30) {
            0 => wq = vec![0xc0, 0x0c], // a pointer in the question
            1 => {
                // A pointer after the first label.
                let l = wq[0] as usize;
                if l > 0 && l < 64 && wq.len() > l + 1 {
                    wq.truncate(l + 1);
                    wq.extend_from_slice(&[0xc0, 0x0c]);
                }
            }
            2 => {
                let i = self.rng.random_range(0..wq.len());
                wq[i] = self.pick(&[0x40, 0x3f, 0x80, 0xff, 0x01]); // a bad label length
            }
            _ => {}
        }
        p.extend_from_slice(&wq);
        let qtype: u16 = self.pick(&[1, 28, 1, 28, 5, 255]);
        p.extend_from_slice(&qtype.to_be_bytes());
        p.extend_from_slice(&1u16.to_be_bytes());
        if qdcount == 2 && self.chance(0.5) {
            p.extend_from_slice(&wq);
            p.extend_from_slice(&[0, 1, 0, 1]);
        }
        // The answers: a CNAME chain now and then, then addresses.
        let mut owner_at = 12usize; // where a pointer may point: the question's name
        for _ in 0..records {
            let at = p.len();
            let owner = match self.rng.random_range(0..10) {
                0..=5 => vec![0xc0 | (owner_at >> 8) as u8, owner_at as u8],
                6 => Self::wire_name(&self.name()),
                7 => {
                    // A label, then a pointer.
                    let mut w = vec![3, b'w', b'w', b'w'];
                    w.extend_from_slice(&[0xc0, 0x0c]);
                    w
                }
                8 => {
                    // More labels than are walked (16).
                    let mut w = Vec::new();
                    for _ in 0..self.rng.random_range(14..20) {
                        w.extend_from_slice(&[1, b'a']);
                    }
                    w.push(0);
                    w
                }
                _ => vec![0xc0, self.rng.random()], // a pointer anywhere
            };
            p.extend_from_slice(&owner);
            let kind = self.rng.random_range(0..10);
            let (rtype, class) = match kind {
                0..=3 => (1u16, 1u16),
                4..=6 => (28, 1),
                7 => (5, 1),
                8 => (1, 3), // CHAOS
                _ => (self.pick(&[16u16, 2, 6, 0]), 1),
            };
            p.extend_from_slice(&rtype.to_be_bytes());
            p.extend_from_slice(&class.to_be_bytes());
            let ttl = self.ttl();
            p.extend_from_slice(&ttl.to_be_bytes());
            let rdata = match rtype {
                1 => match self.pool_addr(false) {
                    IpAddr::V4(a) => {
                        self.answered.push(a.into());
                        a.octets().to_vec()
                    }
                    _ => unreachable!(),
                },
                28 => match self.pool_addr(true) {
                    IpAddr::V6(a) => {
                        self.answered.push(a.into());
                        a.octets().to_vec()
                    }
                    _ => unreachable!(),
                },
                5 => {
                    owner_at = p.len() + 2;
                    let mut w = Self::wire_name(&self.name());
                    if self.chance(0.3) && w.len() > 2 {
                        // Compressed: the first label, then a pointer.
                        let l = (w[0] as usize).min(w.len() - 2);
                        w.truncate(l + 1);
                        w.extend_from_slice(&[0xc0, 0x0c]);
                    }
                    w
                }
                _ => {
                    let n = self.rng.random_range(0..20);
                    self.payload(n)
                }
            };
            let rdlength = match self.rng.random_range(0..25) {
                0 => rdata.len() as u16 + 1,
                1 => rdata.len().saturating_sub(1) as u16,
                2 => 0xffff,
                _ => rdata.len() as u16,
            };
            p.extend_from_slice(&rdlength.to_be_bytes());
            p.extend_from_slice(&rdata);
            if self.chance(0.02) {
                p.truncate(at + 1); // a record cut short in the middle of the message
            }
        }
        // Authority and additional records the walk does not reach, now and then.
        if self.chance(0.1) {
            p.extend_from_slice(&[
                0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0x0e, 0x10, 0, 4, 198, 18, 0, 99,
            ]);
        }
        if self.chance(0.15) {
            let n = self.rng.random_range(0..=p.len());
            p.truncate(n); // cut anywhere
        }
        self.note_dns(&p);
        p
    }

    // ---- TLS ----

    fn payload(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.rng.random()).collect()
    }

    fn extension(&mut self) -> Vec<u8> {
        let t: u16 = self.pick(&[
            10, 11, 13, 16, 23, 35, 43, 45, 51, 0xfe0d, 0x0a0a, 0xff01, 21,
        ]);
        let n = if t == 21 {
            self.rng.random_range(0..300) // padding
        } else {
            self.rng.random_range(0..40)
        };
        let mut e = t.to_be_bytes().to_vec();
        e.extend_from_slice(&(n as u16).to_be_bytes());
        e.extend(self.payload(n));
        e
    }

    fn server_name(&mut self) -> Vec<u8> {
        let name = self.name();
        let mut entry = vec![0u8];
        if self.chance(0.03) {
            entry[0] = 1; // not host_name
        }
        let nlen = match self.rng.random_range(0..30) {
            0 => name.len() + self.rng.random_range(1..300),
            1 => name.len().saturating_sub(1),
            _ => name.len(),
        };
        entry.extend_from_slice(&(nlen as u16).to_be_bytes());
        entry.extend_from_slice(&name);
        if self.chance(0.1) {
            // A second entry.
            entry.push(0);
            let other = self.name();
            entry.extend_from_slice(&(other.len() as u16).to_be_bytes());
            entry.extend_from_slice(&other);
        }
        let llen = match self.rng.random_range(0..20) {
            0 => entry.len() + 7,
            1 => 0,
            _ => entry.len(),
        };
        let mut data = (llen as u16).to_be_bytes().to_vec();
        data.extend(entry);
        let elen = match self.rng.random_range(0..25) {
            0 => data.len() + self.rng.random_range(1..100),
            1 => data.len().saturating_sub(3),
            _ => data.len(),
        };
        let mut e = vec![0, 0];
        e.extend_from_slice(&(elen as u16).to_be_bytes());
        e.extend(data);
        e
    }

    /// A TLS record with a ClientHello: valid or not.
    fn client_hello(&mut self) -> Vec<u8> {
        let mut h = Vec::new();
        h.extend_from_slice(&[0x03, 0x03]);
        h.extend(self.payload(32));
        let sid = match self.rng.random_range(0..20) {
            0 => 33 + self.rng.random_range(0..200),
            1..=8 => 0,
            _ => 32,
        };
        h.push(sid as u8);
        h.extend(self.payload(sid));
        let ciphers = 2 * self.rng.random_range(1..40);
        h.extend_from_slice(&(ciphers as u16).to_be_bytes());
        h.extend(self.payload(ciphers));
        let comp = if self.chance(0.9) {
            1
        } else {
            self.rng.random_range(0..4)
        };
        h.push(comp as u8);
        h.extend(vec![0; comp]);
        let mut exts = Vec::new();
        let before = match self.rng.random_range(0..10) {
            0 => self.rng.random_range(28..40),
            _ => self.rng.random_range(0..12),
        };
        for _ in 0..before {
            exts.extend(self.extension());
        }
        if self.chance(0.9) {
            exts.extend(self.server_name());
        }
        for _ in 0..self.rng.random_range(0..8) {
            exts.extend(self.extension());
        }
        let elen = match self.rng.random_range(0..25) {
            0 => exts.len() + self.rng.random_range(1..50),
            1 => exts.len().saturating_sub(self.rng.random_range(1..30)),
            _ => exts.len(),
        };
        if !self.chance(0.02) {
            h.extend_from_slice(&(elen as u16).to_be_bytes());
            h.extend(exts);
        }
        let mut hs = vec![1u8];
        if self.chance(0.03) {
            hs[0] = 2; // ServerHello
        }
        hs.extend_from_slice(&(h.len() as u32).to_be_bytes()[1..]);
        hs.extend(h);
        let mut rec = vec![0x16, 0x03, self.pick(&[1u8, 1, 3, 0])];
        if self.chance(0.02) {
            rec[0] = 0x17;
        }
        if self.chance(0.02) {
            rec[1] = 0x02;
        }
        rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
        rec.extend(hs);
        if self.chance(0.2) {
            let n = self.rng.random_range(0..=rec.len());
            rec.truncate(n);
        }
        rec
    }

    // ---- HTTP ----

    fn target(&mut self) -> Vec<u8> {
        let mut t: Vec<u8> = match self.rng.random_range(0..14) {
            0 | 1 => b"/v/".to_vec(),
            2 => b"/v/movie.mp4".to_vec(),
            3 => b"/v/long/".to_vec(),
            4 => b"/v/long/x?y=1".to_vec(),
            5 => b"/V/".to_vec(),
            6 => b"/v".to_vec(),
            7 => long_url_path().into_bytes(),
            8 => format!("{}/more/and/more", long_url_path()).into_bytes(),
            9 => b"/index.html".to_vec(),
            10 => b"/".to_vec(),
            11 => b"*".to_vec(),
            12 => b"http://media.example/v/".to_vec(),
            _ => b"/login".to_vec(),
        };
        if self.chance(0.02) {
            t.clear();
        }
        t
    }

    fn host_value(&mut self) -> Vec<u8> {
        let mut h = match self.rng.random_range(0..10) {
            0..=3 => self
                .pick(&[
                    "media.example",
                    "MEDIA.example",
                    "mail.example",
                    "long.example",
                    "Long.Example",
                ])
                .as_bytes()
                .to_vec(),
            _ => self.name(),
        };
        if self.chance(0.2) {
            h.extend_from_slice(self.pick(&[&b":8080"[..], b":80", b":", b":x"]));
        }
        h
    }

    /// An HTTP request's first octets: valid or not.
    fn http(&mut self) -> Vec<u8> {
        let mut r = Vec::new();
        // Most requests are well formed in their request line; the rest are not.
        let clean = self.chance(0.6);
        let methods: &[&[u8]] = if clean {
            &[
                b"GET", b"GET", b"POST", b"HEAD", b"OPTIONS", b"CONNECT", b"PATCH",
            ]
        } else {
            &[b"get", b"PROPFIND", b"", b"G3T", b"GET"]
        };
        let method: &[u8] = self.pick(methods);
        r.extend_from_slice(method);
        r.push(b' ');
        if self.chance(0.02) {
            r.push(b' ');
        }
        r.extend(self.target());
        let versions: &[&[u8]] = if clean {
            &[b" HTTP/1.1\r\n", b" HTTP/1.0\r\n", b" HTTP/1.1\n"]
        } else {
            &[b" HTTP/2.0\r\n", b" HTTP/1.", b"\r\n", b" HTTP/1.1\r\n"]
        };
        r.extend_from_slice(self.pick(versions));
        let mut headers: Vec<Vec<u8>> = Vec::new();
        for _ in 0..self.rng.random_range(0..5) {
            let n = if self.chance(0.1) {
                self.rng.random_range(100..500)
            } else {
                self.rng.random_range(0..40)
            };
            let v: Vec<u8> = (0..n).map(|_| self.rng.random_range(b'a'..=b'z')).collect();
            let name: &[u8] = self.pick(&[&b"User-Agent"[..], b"Accept", b"X-Pad", b"Hostname"]);
            let mut line = name.to_vec();
            line.extend_from_slice(b": ");
            line.extend(v);
            line.extend_from_slice(b"\r\n");
            headers.push(line);
        }
        if self.chance(0.9) {
            let key: &[u8] = self.pick(&[
                &b"Host:"[..],
                b"Host:",
                b"host:",
                b"HOST:",
                b"hOsT:",
                b"Host :",
            ]);
            let mut line = key.to_vec();
            line.extend_from_slice(self.pick(&[&b" "[..], b"", b"\t", b"  \t "]));
            line.extend(self.host_value());
            line.extend_from_slice(self.pick(&[&b"\r\n"[..], b"\r\n", b"\n", b" \r\n", b"\t\r\n"]));
            let at = self.rng.random_range(0..=headers.len());
            headers.insert(at, line);
        }
        for h in headers {
            r.extend(h);
        }
        r.extend_from_slice(b"\r\n");
        if self.chance(if clean { 0.05 } else { 0.3 }) {
            let n = self.rng.random_range(0..=r.len());
            r.truncate(n);
        }
        r
    }

    // ---- frames ----

    fn eth(ethertype: u16) -> Vec<u8> {
        let mut e = vec![2, 0, 0, 0, 9, 9, 2, 0, 0, 0, 8, 8];
        e.extend_from_slice(&ethertype.to_be_bytes());
        e
    }

    /// An IP packet from `src` to `dst` with `l4` (protocol `proto`), now and then a
    /// first or a later fragment.
    fn ip(&mut self, src: IpAddr, dst: IpAddr, proto: u8, l4: &[u8]) -> Vec<u8> {
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                let total = 20 + l4.len();
                let mut ip = vec![
                    0x45,
                    0,
                    (total >> 8) as u8,
                    total as u8,
                    0,
                    1,
                    0x40,
                    0,
                    64,
                    proto,
                    0,
                    0,
                ];
                match self.rng.random_range(0..100) {
                    0 => ip[6] = 0x20, // first fragment (MF)
                    1 => {
                        ip[6] = 0x00;
                        ip[7] = 0x10; // a later fragment
                    }
                    _ => {}
                }
                ip.extend_from_slice(&s.octets());
                ip.extend_from_slice(&d.octets());
                let c = capture::checksum(&ip, 0);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                ip.extend_from_slice(l4);
                ip
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                let mut ip = vec![0x60, 0, 0, 0];
                ip.extend_from_slice(&(l4.len() as u16).to_be_bytes());
                ip.push(proto);
                ip.push(64);
                ip.extend_from_slice(&s.octets());
                ip.extend_from_slice(&d.octets());
                ip.extend_from_slice(l4);
                ip
            }
            _ => unreachable!(),
        }
    }

    fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut u = sport.to_be_bytes().to_vec();
        u.extend_from_slice(&dport.to_be_bytes());
        u.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        u.extend_from_slice(&[0, 0]);
        u.extend_from_slice(payload);
        u
    }

    /// A TCP segment; options now and then, a bad data offset rarely.
    fn tcp(&mut self, sport: u16, dport: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
        let opts: Vec<u8> = if self.chance(0.3) {
            vec![1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0]
        } else {
            vec![]
        };
        let mut doff = (20 + opts.len()) / 4;
        if self.chance(0.01) {
            doff = self.pick(&[0usize, 4, 15]);
        }
        let mut t = sport.to_be_bytes().to_vec();
        t.extend_from_slice(&dport.to_be_bytes());
        t.extend_from_slice(&self.rng.random::<u32>().to_be_bytes());
        t.extend_from_slice(&self.rng.random::<u32>().to_be_bytes());
        t.push((doff as u8) << 4);
        t.push(flags);
        t.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 0]);
        t.extend(opts);
        t.extend_from_slice(payload);
        t
    }

    /// The user's packet in a G-PDU to the session's TEID (QFI 1).
    fn gpdu(&mut self, s: &SessionInfo, inner: &[u8]) -> Vec<u8> {
        let mut g = vec![0x34, 0xff];
        g.extend_from_slice(&((inner.len() + 8) as u16).to_be_bytes());
        g.extend_from_slice(&s.teid.to_be_bytes());
        g.extend_from_slice(&[0, 0, 0, 0x85, 1, 0x10, 1, 0]);
        g.extend_from_slice(inner);
        let mut f = Self::eth(0x0800);
        f.extend(capture::ip_udp_packet(
            GNB.into(),
            N3.into(),
            2152,
            2152,
            &g,
        ));
        f
    }

    fn n6(&mut self, inner: &[u8], v6: bool) -> Vec<u8> {
        let mut f = Self::eth(if v6 { 0x86dd } else { 0x0800 });
        f.extend_from_slice(inner);
        f
    }

    /// A DNS answer from the resolver to the UE (now and then from another port, or by
    /// TCP).
    fn dns_frame(&mut self, s: &SessionInfo) -> Vec<u8> {
        let dns = self.dns();
        self.dns_frame_with(s, &dns, false)
    }

    /// A DNS answer `dns` to the UE; `plain`: from port 53 over UDP.
    fn dns_frame_with(&mut self, s: &SessionInfo, dns: &[u8], plain: bool) -> Vec<u8> {
        let ue = self.ue_addr(s);
        let src = match ue {
            IpAddr::V4(_) => IpAddr::V4(RESOLVER),
            IpAddr::V6(_) => IpAddr::V6(RESOLVER_V6),
        };
        let sport = if !plain && self.chance(0.03) {
            5353
        } else {
            53
        };
        let dport = self.rng.random_range(1024..=65535);
        let (proto, l4) = if !plain && self.chance(0.02) {
            (6, self.tcp(sport, dport, 0x18, dns))
        } else {
            (17, Self::udp(sport, dport, dns))
        };
        let ip = self.ip(src, ue, proto, &l4);
        self.n6(&ip, ue.is_ipv6())
    }

    /// The first segment of a new uplink TCP flow: a ClientHello, an HTTP request, or
    /// (now and then) a SYN or random octets.
    fn first_segment(&mut self, si: usize, s: &SessionInfo, kind: u32) -> Vec<u8> {
        let ue = self.ue_addr(s);
        let remote = self.remote(ue.is_ipv6());
        let (payload, remote_port) = match kind {
            0 => {
                let p = self.client_hello();
                self.note_payload(&p, "tls");
                (p, self.pick(&[443u16, 443, 8443]))
            }
            1 => {
                let p = self.http();
                self.note_payload(&p, "http");
                (p, self.pick(&[80u16, 80, 8080]))
            }
            _ => {
                let n = self.pick(&[0usize, 0, 1, 5, 100]);
                (self.payload(n), self.rng.random())
            }
        };
        self.first_segment_with(si, s, ue, remote, remote_port, &payload)
    }

    /// The first segment of a new uplink TCP flow from a new UE port, with `payload`.
    fn first_segment_with(
        &mut self,
        si: usize,
        s: &SessionInfo,
        ue: IpAddr,
        remote: IpAddr,
        remote_port: u16,
        payload: &[u8],
    ) -> Vec<u8> {
        let ue_port = self.rng.random_range(1024..=65535);
        self.flows.push(Flow {
            si,
            proto: 6,
            ue,
            ue_port,
            remote,
            remote_port,
        });
        let flags = if payload.is_empty() { 0x02 } else { 0x18 };
        let l4 = self.tcp(ue_port, remote_port, flags, payload);
        let ip = self.ip(ue, remote, 6, &l4);
        self.gpdu(s, &ip)
    }

    /// One valid DNS answer with addresses of an application, ClientHello with an
    /// application's server_name or HTTP request with a Host, then the same cut at every
    /// length, each cut its own frame (a new flow for the TCP ones, to an address no
    /// answer names).
    fn sweep(&mut self, sessions: &[SessionInfo]) -> Vec<(Vec<u8>, bool)> {
        let si = self.rng.random_range(0..sessions.len());
        let s = sessions[si].clone();
        let kind = self.rng.random_range(0..3);
        let mut good = None;
        for _ in 0..200 {
            let p = match kind {
                0 => self.dns(),
                1 => self.client_hello(),
                _ => self.http(),
            };
            let ok = match kind {
                0 => app::parse_dns(&p).is_some_and(|a| {
                    !a.addrs.is_empty()
                        && app::name_app(&self.pfds, &a.qname, upf::abi::APP_P_DNS).is_some()
                }),
                1 => app::parse_sni(&p)
                    .is_some_and(|n| app::name_app(&self.pfds, &n, upf::abi::APP_P_SNI).is_some()),
                _ => app::parse_http(&p).is_some(),
            };
            if ok {
                good = Some(p);
                break;
            }
        }
        let Some(p) = good else {
            return vec![];
        };
        self.reach(["sweep: dns", "sweep: tls", "sweep: http"][kind]);
        let mut frames = Vec::new();
        for cut in 0..=p.len() {
            let q = &p[..cut];
            if kind == 0 {
                frames.push((self.dns_frame_with(&s, q, true), false));
                continue;
            }
            let ue = self.ue_addr(&s);
            let remote = match ue {
                IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::new(198, 51, 100, self.rng.random())),
                IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::new(
                    0x2001,
                    0xdb8,
                    0xbeef,
                    0,
                    0,
                    0,
                    0,
                    self.rng.random(),
                )),
            };
            let port = if kind == 1 { 443 } else { 80 };
            frames.push((self.first_segment_with(si, &s, ue, remote, port, q), true));
        }
        frames
    }

    /// A packet of a flow started before, either way; now and then with a payload
    /// (an uplink one may still classify a flow that was not).
    fn follow_up(&mut self, sessions: &[SessionInfo]) -> (Vec<u8>, bool) {
        let f = self.pick(&self.flows.clone());
        let uplink = self.chance(0.5);
        let payload = match self.rng.random_range(0..10) {
            0 => self.client_hello(),
            1 => self.http(),
            2 => self.payload(50),
            _ => vec![],
        };
        let l4 = match (f.proto, uplink) {
            (6, true) => self.tcp(f.ue_port, f.remote_port, 0x10, &payload),
            (6, false) => self.tcp(f.remote_port, f.ue_port, 0x10, &payload),
            (_, true) => Self::udp(f.ue_port, f.remote_port, &payload),
            (_, false) => Self::udp(f.remote_port, f.ue_port, &payload),
        };
        let s = sessions[f.si].clone();
        if uplink {
            let ip = self.ip(f.ue, f.remote, f.proto, &l4);
            (self.gpdu(&s, &ip), true)
        } else {
            let ip = self.ip(f.remote, f.ue, f.proto, &l4);
            (self.n6(&ip, f.ue.is_ipv6()), false)
        }
    }

    /// A new flow of UDP or TCP without payload to or from an address a DNS answer named
    /// or the flow description's prefix.
    fn new_flow(&mut self, si: usize, s: &SessionInfo) -> (Vec<u8>, bool) {
        let ue = self.ue_addr(s);
        let remote = if self.chance(0.7) && !self.answered.is_empty() {
            let a = self.pick(&self.answered.clone());
            if a.is_ipv6() == ue.is_ipv6() {
                a
            } else {
                self.pool_addr(ue.is_ipv6())
            }
        } else {
            self.pool_addr(ue.is_ipv6())
        };
        let proto = if self.chance(0.5) { 17 } else { 6 };
        let f = Flow {
            si,
            proto,
            ue,
            ue_port: self.rng.random_range(1024..=65535),
            remote,
            remote_port: self.pick(&[53u16, 443, 80, 5000, 9]),
        };
        self.flows.push(f);
        let uplink = self.chance(0.5);
        let payload = if proto == 17 {
            self.payload(20)
        } else {
            vec![]
        };
        let l4 = match (proto, uplink) {
            (6, true) => self.tcp(f.ue_port, f.remote_port, 0x02, &[]),
            (6, false) => self.tcp(f.remote_port, f.ue_port, 0x12, &[]),
            (_, true) => Self::udp(f.ue_port, f.remote_port, &payload),
            (_, false) => Self::udp(f.remote_port, f.ue_port, &payload),
        };
        if uplink {
            let ip = self.ip(ue, remote, proto, &l4);
            (self.gpdu(s, &ip), true)
        } else {
            let ip = self.ip(remote, ue, proto, &l4);
            (self.n6(&ip, ue.is_ipv6()), false)
        }
    }

    /// A frame for one of `sessions`, and whether it is uplink (N3).
    fn frame(&mut self, sessions: &[SessionInfo]) -> (Vec<u8>, bool) {
        let si = self.rng.random_range(0..sessions.len());
        let s = sessions[si].clone();
        match self.rng.random_range(0..100) {
            0..25 => (self.dns_frame(&s), false),
            25..45 => (self.first_segment(si, &s, 0), true),
            45..60 => (self.first_segment(si, &s, 1), true),
            60..63 => (self.first_segment(si, &s, 2), true),
            63..88 if !self.flows.is_empty() => self.follow_up(sessions),
            _ => self.new_flow(si, &s),
        }
    }
}

fn config() -> Config {
    let mut neigh = std::collections::HashMap::new();
    let e = |mtu, n: u8| Egress {
        ifindex: 20,
        mtu,
        smac: [2, 0, 0, 0, 0, n],
        dmac: [2, 0, 0, 0, 1, n],
    };
    neigh.insert(IpAddr::V4(Ipv4Addr::UNSPECIFIED), e(1500, 1));
    neigh.insert(IpAddr::V6(Ipv6Addr::UNSPECIFIED), e(1500, 2));
    neigh.insert(IpAddr::V4(GNB), e(1500, 3));
    Config {
        local: vec![IpAddr::V4(N3)],
        n3_v4: Some(N3),
        neigh,
        ..Default::default()
    }
}

/// The name of the stats table's counter `i`.
fn counter_name(i: usize) -> &'static str {
    let drops = DropReason::ALL.iter().map(|r| (r.index(), r.name()));
    let outcomes = Stat::ALL.iter().map(|s| (s.index(), s.name()));
    drops
        .chain(outcomes)
        .find(|(x, _)| *x == i)
        .map_or("?", |(_, n)| n)
}

/// What each counter grew by between two readings: (index, packets, octets).
fn grown(before: &[(u64, u64)], after: &[(u64, u64)]) -> Vec<(usize, u64, u64)> {
    before
        .iter()
        .zip(after)
        .enumerate()
        .filter(|(_, (b, a))| a != b)
        .map(|(i, (b, a))| (i, a.0 - b.0, a.1 - b.1))
        .collect()
}

#[test]
fn xdp_classifies_as_the_reference_model() {
    if !common::root() {
        return;
    }
    let cases: usize = std::env::var("UPF_APP_DIFF_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60_000);
    let seed: u64 = std::env::var("UPF_APP_DIFF_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    eprintln!("app differential: {cases} frames, UPF_APP_DIFF_SEED={seed}");
    // Every frame on one CPU, the model told which: URR counts and leases are per lane.
    let one = common::OneCpu::new();
    let cfg = config();
    let cap = Capacity::for_sessions(4096);
    let mut dp = Datapath::load(cap, cfg.clone()).expect("load (needs root)");
    dp.configure(cfg.clone(), 20, 20, 0).unwrap();
    let mut model = Model::new(1 << 20, cfg);
    model.set_lanes(dp.layout().lanes as usize, dp.ncpus());
    model.set_cpu(one.cpu);
    let pfds = Arc::new(pfd_table());
    dp.set_pfds(&pfds, &[]).unwrap();
    model.set_pfds(&pfds, &[]).unwrap();
    let mut g = Gen {
        rng: StdRng::seed_from_u64(seed),
        urr: urr_template(),
        next_teid: 0x100,
        answered: Vec::new(),
        flows: Vec::new(),
        reached: BTreeMap::new(),
        pfds: pfd_table(),
    };

    // Events the data path raises, collected per frame.
    let events: Rc<RefCell<Vec<Event>>> = Rc::new(RefCell::new(Vec::new()));
    let ev2 = events.clone();
    // Application indices stay as the PFDs change: the first table names them.
    let names = pfds.clone();
    let rb = dp
        .events(move |d| {
            if let Some(e) = upf_bpf::datapath::parse_event(d, &names) {
                ev2.borrow_mut().push(e);
            }
            0
        })
        .unwrap();

    let per_batch = 30;
    let mut done = 0;
    let mut batch = 0u64;
    let mut by_verdict: BTreeMap<String, usize> = Default::default();
    let mut app_events = 0usize;
    let mut pfd_changes = 0;
    while done < cases {
        batch += 1;
        // Every fifth batch the PFDs change: "chat" loses or regains its domain names,
        // "video" its URL, so what was learned for them is forgotten (flows already
        // classified keep their application).
        if batch % 5 == 0 {
            let variant = (batch / 5) % 3;
            let table = Arc::new(pfd_variant(variant));
            let changed: Vec<String> = match variant {
                0 => vec!["chat".into(), "video".into()],
                1 => vec!["chat".into()],
                _ => vec!["chat".into(), "video".into()],
            };
            dp.set_pfds(&table, &changed).unwrap();
            model.set_pfds(&table, &changed).unwrap();
            pfd_changes += 1;
        }
        let mut infos = Vec::new();
        let mut installed = Vec::new();
        for i in 0..per_batch {
            let seid = batch * 1000 + i as u64;
            let (s, info) = g.session(seid, (batch as u32 % 200) * 256 + i as u32);
            let s = Arc::new(s);
            let a = model.install(None, &s);
            let b = dp.install(None, &s);
            assert_eq!(
                a.is_ok(),
                b.is_ok(),
                "install of {s:?}: model {a:?} xdp {b:?}"
            );
            assert!(a.is_ok(), "install of {s:?}: {a:?}");
            infos.push(info);
            installed.push(s);
        }
        g.flows.clear();
        // Every third batch starts with a payload cut at every length.
        let mut pending = if batch % 3 == 1 {
            g.sweep(&infos)
        } else {
            vec![]
        };
        pending.reverse();
        for _ in 0..(cases - done).min(1500 + pending.len()) {
            let (frame, uplink) = match pending.pop() {
                Some(f) => f,
                None => g.frame(&infos),
            };
            let now = 1_000_000_000 + done as u64;
            let before = dp.stats();
            let model_before = model.stats().to_vec();
            let usage_before: Vec<_> = installed
                .iter()
                .flat_map(|s| s.urrs.keys().map(|u| (s.up_seid, *u)))
                .map(|(seid, u)| (seid, u, model.usage(seid, u)))
                .collect();
            let expect = if uplink {
                model.process_n3(&frame, now)
            } else {
                model.process_n6(&frame, now)
            };
            let model_events = model.take_app_events();
            let prog = if uplink {
                &dp.skel().progs.xdp_n3
            } else {
                &dp.skel().progs.xdp_n6
            };
            let mut out = vec![0u8; frame.len() + 256];
            let input = libbpf_rs::ProgramInput {
                data_in: Some(&frame),
                data_out: Some(&mut out),
                ..Default::default()
            };
            let r = prog.test_run(input).expect("BPF_PROG_RUN");
            let action = r.return_value;
            let data = r.data.map(|d| d.to_vec()).unwrap_or_default();
            let counted = grown(&before, &dp.stats());
            let model_counted = grown(&model_before, model.stats());
            events.borrow_mut().clear();
            rb.consume().unwrap();
            let ctx = || {
                format!(
                    "UPF_APP_DIFF_SEED={seed} frame {done} ({}): {:02x?}\nexpected {expect:?}\nXDP action {action}, counted {:?}",
                    if uplink { "n3" } else { "n6" },
                    frame,
                    counted.iter().map(|(i, p, b)| (counter_name(*i), p, b)).collect::<Vec<_>>()
                )
            };
            assert_eq!(counted, model_counted, "counters: {}", ctx());
            let key = match &expect {
                Verdict::Drop(r) => {
                    assert_eq!(action, 1, "{}", ctx());
                    format!("drop {}", r.name())
                }
                Verdict::Pass => {
                    assert_eq!(action, 2, "{}", ctx());
                    "pass".to_string()
                }
                Verdict::Redirect {
                    ifindex: _,
                    frame: f,
                } => {
                    assert_eq!(action, 4, "{}", ctx());
                    assert_eq!(&data, f, "output octets: {}", ctx());
                    // Which downlink FAR's tunnel: the default's or an application's.
                    if !uplink && f.len() > 50 {
                        let teid = u32::from_be_bytes([f[46], f[47], f[48], f[49]]);
                        format!("forward dl app {}", teid >> 20)
                    } else {
                        "forward ul".to_string()
                    }
                }
                Verdict::Buffer(_) => panic!("no FAR buffers: {}", ctx()),
                Verdict::ToRedirect(_) => panic!("no FAR redirects: {}", ctx()),
            };
            // URR counts of every session, after each frame: which PDR matched.
            for (seid, u, b) in &usage_before {
                let a = model.usage(*seid, *u);
                let x = dp.usage(*seid, *u);
                assert_eq!(
                    (a.ul_packets, a.ul_bytes, a.dl_packets, a.dl_bytes),
                    (x.ul_packets, x.ul_bytes, x.dl_packets, x.dl_bytes),
                    "URR {u} of session {seid:#x}: {}",
                    ctx()
                );
                if a.total_packets() > b.total_packets() && *u > 1 {
                    *by_verdict
                        .entry(format!("counted by {}", APPS[*u as usize - 2]))
                        .or_default() += 1;
                }
            }
            let ev = events.borrow();
            assert_eq!(*ev, model_events, "events: {}", ctx());
            app_events += ev.len();
            *by_verdict.entry(key).or_default() += 1;
            done += 1;
        }
        for s in installed {
            model.remove(&s);
            dp.remove(&s);
        }
    }
    eprintln!(
        "app differential: {pfd_changes} PFD changes; payloads: {:?}",
        g.reached
    );
    eprintln!(
        "app differential: {done} frames agree ({app_events} application events): {by_verdict:?}"
    );
    if cases >= 20_000 {
        for k in [
            "counted by video",
            "counted by chat",
            "counted by mail",
            "drop gate_closed",
            "forward dl app 1",
            "forward dl app 2",
            "forward dl app 3",
            "forward dl app 0",
            "forward ul",
        ] {
            assert!(
                by_verdict.get(k).copied().unwrap_or(0) > 0,
                "no case reached {k}: {by_verdict:?}"
            );
        }
        assert!(app_events > 0, "no application event");
    }
}
