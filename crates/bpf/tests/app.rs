//! Application detection in the XDP programs (docs/application-detection.md), run with
//! BPF_PROG_RUN: a session with PDRs for applications A, B and C (each with its own FAR
//! and URR) and default PDRs; which PDR a packet matched is read from the URR counts.
//! Needs CAP_BPF (root).

mod common;

use std::cell::RefCell;
use std::net::{IpAddr, Ipv4Addr};
use std::rc::Rc;
use std::sync::Arc;

use common::app::*;
use common::{neigh_config, root, urr_template, GNB};
use pfcp::ie::{reporting_triggers, OuterHeaderCreation, OuterHeaderRemoval};
use upf::fastpath::{AppFlow, Event, FastPath, FastPathError};
use upf::pfd::{AppPfds, PfdTable};
use upf::rules::*;
use upf_bpf::datapath::{Capacity, Datapath};

const TEID: u32 = 0x8000_1234;
const UE: Ipv4Addr = Ipv4Addr::new(10, 45, 0, 2);
const SEID: u64 = 77;
const DNS: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
const XDP_REDIRECT: u32 = 4;

/// Applications: A (a domain for every protocol), B (a domain for TLS SNI only and an
/// http:// URL), C (a flow description only).
fn pfds() -> PfdTable {
    let mut t = PfdTable::new();
    let mut a = AppPfds::default();
    a.add_domain("a.example", None).unwrap();
    t.set("A", a, true).unwrap();
    let mut b = AppPfds::default();
    b.add_domain("b.example", Some("TLS_SNI")).unwrap();
    b.add_url("http://www.c.test/b/").unwrap();
    t.set("B", b, true).unwrap();
    let mut c = AppPfds::default();
    c.add_flow("permit out 6 from 198.51.100.0/24 8443 to assigned")
        .unwrap();
    t.set("C", c, true).unwrap();
    t
}

fn far(id: u32, access: bool) -> Far {
    Far {
        id,
        action: ApplyAction {
            forw: true,
            ..Default::default()
        },
        forwarding: Some(Forwarding {
            destination_interface: if access {
                interface::ACCESS
            } else {
                interface::CORE
            },
            outer_header_creation: access.then(|| OuterHeaderCreation::gtpu_ipv4(9, GNB)),
            ..Default::default()
        }),
        bar_id: None,
    }
}

/// Uplink PDRs on TEID: A (10), B (11), C (12), default (1); downlink on the UE
/// address: A (20), B (21), default (2). Each PDR has its own FAR and URR (the PDR's
/// ID); B's URRs report START.
fn session() -> Session {
    let mut s = common::empty_session(SEID);
    let urr = urr_template();
    let uplink = Pdi {
        source_interface: interface::ACCESS,
        local_fteid: Some(LocalFteid {
            teid: TEID,
            ipv4: Some(common::N3),
            ipv6: None,
        }),
        ue_ips: thin_vec![UeIp {
            ipv4: Some(UE),
            ..Default::default()
        }],
        ..Default::default()
    };
    let downlink = Pdi {
        source_interface: interface::CORE,
        ue_ips: thin_vec![UeIp {
            ipv4: Some(UE),
            is_destination: true,
            ..Default::default()
        }],
        ..Default::default()
    };
    for (id, precedence, app, up) in [
        (10u16, 10u32, Some("A"), true),
        (11, 20, Some("B"), true),
        (12, 30, Some("C"), true),
        (1, 100, None, true),
        (20, 10, Some("A"), false),
        (21, 20, Some("B"), false),
        (2, 100, None, false),
    ] {
        let mut pdi = if up { uplink.clone() } else { downlink.clone() };
        pdi.application_id = app.map(str::to_string);
        let mut rule = urr.clone();
        rule.urr_id = u32::from(id);
        let mut u = Urr::new(&rule);
        u.rule
            .reporting_triggers
            .set(reporting_triggers::START, app == Some("B"));
        s.urrs.insert(u32::from(id), u);
        s.fars.insert(u32::from(id), far(u32::from(id), !up));
        s.pdrs.insert(
            id,
            Pdr {
                id,
                precedence,
                pdi,
                outer_header_removal: up.then_some(OuterHeaderRemoval {
                    description: 0,
                    ext_header_deletion: None,
                }),
                far_id: Some(u32::from(id)),
                urr_ids: upf::rules::smallvec![u32::from(id)],
                qer_ids: Default::default(),
                activation_time: None,
                deactivation_time: None,
            },
        );
    }
    s
}

struct Lab {
    dp: Datapath,
    events: Rc<RefCell<Vec<Vec<u8>>>>,
    rb: libbpf_rs::RingBuffer<'static>,
}

impl Lab {
    fn new() -> Lab {
        let mut dp = common::loaded(Capacity::for_sessions(64), neigh_config());
        dp.set_pfds(&Arc::new(pfds()), &[]).expect("set_pfds");
        dp.install(None, &Arc::new(session())).expect("install");
        let events = Rc::new(RefCell::new(Vec::new()));
        let sink = events.clone();
        let rb = dp
            .events(move |d| {
                sink.borrow_mut().push(d.to_vec());
                0
            })
            .expect("ring buffer");
        Lab { dp, events, rb }
    }

    /// Run a frame; the URR (= PDR ID) whose counts it grew.
    fn run(&self, uplink: bool, frame: &[u8]) -> u32 {
        let urrs = [1u32, 2, 10, 11, 12, 20, 21];
        let before: Vec<_> = urrs.iter().map(|u| self.dp.usage(SEID, *u)).collect();
        let prog = if uplink {
            &self.dp.skel().progs.xdp_n3
        } else {
            &self.dp.skel().progs.xdp_n6
        };
        let mut out = vec![0u8; frame.len() + 256];
        let input = libbpf_rs::ProgramInput {
            data_in: Some(frame),
            data_out: Some(&mut out),
            ..Default::default()
        };
        let r = prog.test_run(input).expect("BPF_PROG_RUN");
        assert_eq!(r.return_value, XDP_REDIRECT, "forwarded: {frame:02x?}");
        let grew: Vec<u32> = urrs
            .iter()
            .zip(&before)
            .filter(|(u, b)| self.dp.usage(SEID, **u) != **b)
            .map(|(u, _)| *u)
            .collect();
        assert_eq!(grew.len(), 1, "one PDR counted: {grew:?}");
        grew[0]
    }

    fn up(&self, inner: &[u8]) -> u32 {
        self.run(true, &uplink(TEID, inner))
    }

    fn down(&self, inner: &[u8]) -> u32 {
        self.run(false, &downlink(inner))
    }

    /// Events raised since the last call.
    fn app_events(&self) -> Vec<Event> {
        self.rb.consume().unwrap();
        let pfds = self.dp.pfds();
        self.events
            .borrow_mut()
            .drain(..)
            .filter_map(|e| upf_bpf::datapath::parse_event(&e, &pfds))
            .collect()
    }
}

fn syn(dst: Ipv4Addr, sport: u16, dport: u16) -> Vec<u8> {
    ip_tcp(UE, dst, sport, dport, &[])
}

#[test]
fn dns_answers_teach_addresses() {
    if !root() {
        return;
    }
    let lab = Lab::new();
    let cdn = Ipv4Addr::new(203, 0, 113, 10);
    let cdn2 = Ipv4Addr::new(203, 0, 113, 11);
    // Before: the default PDRs.
    assert_eq!(lab.up(&syn(cdn, 40000, 443)), 1);
    // The answer itself goes by the default PDR; a CNAME chain's addresses are the
    // question's application's.
    let answer = dns_answer("www.a.example", Some("edge.cdn.test"), &[cdn, cdn2], 300);
    assert_eq!(lab.down(&ip_udp(DNS, UE, 53, 5353, &answer)), 2);
    // A new flow to a learned address: A's PDRs, both ways; an old flow too (it was
    // not entered: only classified flows are).
    assert_eq!(lab.up(&syn(cdn, 40001, 443)), 10);
    assert_eq!(lab.down(&ip_tcp(cdn, UE, 443, 40001, b"x")), 20);
    assert_eq!(lab.up(&syn(cdn2, 40002, 80)), 10);
    // An answer for a name of no application teaches nothing.
    let other = Ipv4Addr::new(203, 0, 113, 99);
    let answer = dns_answer("www.z.example", None, &[other], 300);
    assert_eq!(lab.down(&ip_udp(DNS, UE, 53, 5353, &answer)), 2);
    assert_eq!(lab.up(&syn(other, 40003, 443)), 1);
    // TTL 0: not usable.
    let answer = dns_answer("a.example", None, &[other], 0);
    lab.down(&ip_udp(DNS, UE, 53, 5353, &answer));
    assert_eq!(lab.up(&syn(other, 40004, 443)), 1);
}

#[test]
fn client_hello_sni_classifies_the_flow() {
    if !root() {
        return;
    }
    let lab = Lab::new();
    let srv = Ipv4Addr::new(198, 18, 0, 5);
    assert!(lab.app_events().is_empty());
    // The ClientHello: B's PDR; then the flow's packets without payload, both ways.
    assert_eq!(
        lab.up(&ip_tcp(
            UE,
            srv,
            41000,
            443,
            &client_hello("Video.B.example")
        )),
        11
    );
    assert_eq!(lab.up(&syn(srv, 41000, 443)), 11);
    assert_eq!(lab.down(&ip_tcp(srv, UE, 443, 41000, b"")), 21);
    // Another flow to the same server: not classified.
    assert_eq!(lab.up(&syn(srv, 41001, 443)), 1);
    // B's URRs report START: one event, for the new flow entry.
    let flow = AppFlow {
        protocol: 6,
        ue: IpAddr::V4(UE),
        ue_port: 41000,
        remote: IpAddr::V4(srv),
        remote_port: 443,
    };
    assert_eq!(
        lab.app_events(),
        vec![Event::AppStart {
            seid: SEID,
            app: "B".into(),
            flow
        }]
    );
    assert!(lab.dp.app_flow_idle(SEID, &flow).is_some());
    let other = AppFlow {
        ue_port: 41001,
        ..flow
    };
    assert_eq!(lab.dp.app_flow_idle(SEID, &other), None);
    // A's domain by SNI: A's PDR. The session asks for START (B's URRs): every new
    // flow entry raises one; upfd reports those of applications whose URRs ask.
    assert_eq!(
        lab.up(&ip_tcp(UE, srv, 41002, 443, &client_hello("a.example"))),
        10
    );
    let e = lab.app_events();
    assert!(
        matches!(&e[..], [Event::AppStart { app, flow, .. }] if app == "A" && flow.ue_port == 41002),
        "{e:?}"
    );
    // Not on a label boundary; not a host name: nothing.
    assert_eq!(
        lab.up(&ip_tcp(UE, srv, 41003, 443, &client_hello("xb.example"))),
        1
    );
    assert_eq!(
        lab.up(&ip_tcp(UE, srv, 41004, 443, &client_hello("b.example."))),
        1
    );
}

#[test]
fn http_host_and_url() {
    if !root() {
        return;
    }
    let lab = Lab::new();
    let srv = Ipv4Addr::new(198, 18, 0, 80);
    // Host of A (any case, with a port).
    assert_eq!(
        lab.up(&ip_tcp(
            UE,
            srv,
            42000,
            80,
            &http_get("WWW.a.example:8080", "/")
        )),
        10
    );
    assert_eq!(
        lab.down(&ip_tcp(srv, UE, 80, 42000, b"HTTP/1.1 200 OK\r\n")),
        20
    );
    // B's URL: the request-target must start with its path.
    assert_eq!(
        lab.up(&ip_tcp(
            UE,
            srv,
            42001,
            80,
            &http_get("www.c.test", "/b/v?x=1")
        )),
        11
    );
    assert_eq!(
        lab.up(&ip_tcp(UE, srv, 42002, 80, &http_get("www.c.test", "/a/"))),
        1
    );
    // A request line ended by a bare LF, the Host in upper case, the URL's path whole.
    let req = b"GET /b/ HTTP/1.1\nHost: WWW.C.test\r\nAccept: x\r\nX-Pad: yy\r\n\r\n";
    assert_eq!(lab.up(&ip_tcp(UE, srv, 42004, 80, req)), 11);
    // B's domain is for TLS SNI only: not by Host.
    assert_eq!(
        lab.up(&ip_tcp(UE, srv, 42003, 80, &http_get("b.example", "/"))),
        1
    );
}

#[test]
fn flow_descriptions_match_without_payload() {
    if !root() {
        return;
    }
    let lab = Lab::new();
    let srv = Ipv4Addr::new(198, 51, 100, 7);
    assert_eq!(lab.up(&syn(srv, 43000, 8443)), 12);
    assert_eq!(lab.up(&syn(srv, 43000, 8444)), 1);
    assert_eq!(lab.up(&syn(Ipv4Addr::new(198, 51, 101, 7), 43000, 8443)), 1);
}

#[test]
fn what_does_not_parse_is_no_application() {
    if !root() {
        return;
    }
    let lab = Lab::new();
    let srv = Ipv4Addr::new(198, 18, 0, 9);
    let hello = client_hello("video.b.example");
    // Cut inside the server_name, inside the extensions, inside the random.
    for (i, cut) in [hello.len() - 3, hello.len() - 20, 30, 6, 1]
        .iter()
        .enumerate()
    {
        let port = 44000 + i as u16;
        assert_eq!(
            lab.up(&ip_tcp(UE, srv, port, 443, &hello[..*cut])),
            1,
            "cut {cut}"
        );
    }
    // A bad session ID length.
    let mut bad = hello.clone();
    bad[43] = 33;
    assert_eq!(lab.up(&ip_tcp(UE, srv, 44100, 443, &bad)), 1);
    // HTTP: no " HTTP/1.", a Host line without its end, a method too long, a Host
    // after the empty line.
    for (i, req) in [
        b"GET / HTTP/2.0\r\nHost: a.example\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\nHost: a.example".to_vec(),
        b"DOWNLOAD / HTTP/1.1\r\nHost: a.example\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\n\r\nHost: a.example\r\n".to_vec(),
        b"get / HTTP/1.1\r\nHost: a.example\r\n\r\n".to_vec(),
    ]
    .iter()
    .enumerate()
    {
        let port = 44200 + i as u16;
        assert_eq!(
            lab.up(&ip_tcp(UE, srv, port, 80, req)),
            1,
            "{:?}",
            String::from_utf8_lossy(req)
        );
    }
    // DNS: the answer cut in its A record's address; a compressed question; an error.
    let cdn = Ipv4Addr::new(203, 0, 113, 50);
    let answer = dns_answer("a.example", None, &[cdn], 300);
    assert_eq!(
        lab.down(&ip_udp(DNS, UE, 53, 5353, &answer[..answer.len() - 2])),
        2
    );
    let mut compressed = answer.clone();
    compressed[12] = 0xc0;
    assert_eq!(lab.down(&ip_udp(DNS, UE, 53, 5353, &compressed)), 2);
    let mut nxdomain = answer.clone();
    nxdomain[3] |= 3;
    assert_eq!(lab.down(&ip_udp(DNS, UE, 53, 5353, &nxdomain)), 2);
    // Uplink "answers" are not learned from.
    assert_eq!(lab.up(&ip_udp(UE, DNS, 53, 5353, &answer)), 1);
    assert_eq!(lab.up(&syn(cdn, 44300, 443)), 1);
    // The whole answer teaches it.
    lab.down(&ip_udp(DNS, UE, 53, 5353, &answer));
    assert_eq!(lab.up(&syn(cdn, 44301, 443)), 10);
}

#[test]
fn pfd_changes_apply_to_new_flows() {
    if !root() {
        return;
    }
    let mut lab = Lab::new();
    let srv = Ipv4Addr::new(198, 18, 0, 7);
    let cdn = Ipv4Addr::new(203, 0, 113, 70);
    assert_eq!(
        lab.up(&ip_tcp(UE, srv, 45000, 443, &client_hello("b.example"))),
        11
    );
    lab.down(&ip_udp(
        DNS,
        UE,
        53,
        5353,
        &dns_answer("a.example", None, &[cdn], 300),
    ));
    assert_eq!(lab.up(&syn(cdn, 45001, 443)), 10);
    // B's domain moves to A; A's learned addresses are forgotten.
    let mut t = pfds();
    let mut a = AppPfds::default();
    a.add_domain("a.example", None).unwrap();
    a.add_domain("b.example", Some("TLS_SNI")).unwrap();
    t.set("A", a, true).unwrap();
    let mut b = AppPfds::default();
    b.add_url("http://www.c.test/b/").unwrap();
    t.set("B", b, true).unwrap();
    lab.dp
        .set_pfds(&Arc::new(t), &["A".into(), "B".into()])
        .expect("set_pfds");
    // Existing flows keep their application.
    assert_eq!(lab.up(&syn(srv, 45000, 443)), 11);
    assert_eq!(lab.up(&syn(cdn, 45001, 443)), 10);
    // New ones follow the new PFDs.
    assert_eq!(
        lab.up(&ip_tcp(UE, srv, 45002, 443, &client_hello("b.example"))),
        10
    );
    assert_eq!(lab.up(&syn(cdn, 45003, 443)), 1);
    // C loses its flow description: its PDR matches nothing.
    let mut t = (*lab.dp.pfds()).clone();
    t.set("C", AppPfds::default(), true).unwrap();
    lab.dp.set_pfds(&Arc::new(t), &["C".into()]).unwrap();
    assert_eq!(lab.up(&syn(Ipv4Addr::new(198, 51, 100, 7), 45004, 8443)), 1);
}

#[test]
fn an_unknown_application_is_refused() {
    if !root() {
        return;
    }
    let mut dp = common::loaded(Capacity::for_sessions(64), neigh_config());
    dp.set_pfds(&Arc::new(pfds()), &[]).unwrap();
    let mut s = session();
    s.pdrs.get_mut(&11).unwrap().pdi.application_id = Some("nope".into());
    match dp.install(None, &Arc::new(s)) {
        Err(FastPathError::Pdr { pdr_id: 11, why }) => assert!(why.contains("nope"), "{why}"),
        other => panic!("{other:?}"),
    }
}

/// The data path's coarse clock's flow-stamp epoch (include/app.h), and the ns left
/// until the next.
fn epoch_now() -> (u8, u64) {
    let ns = common::clock_ns(libc::CLOCK_MONOTONIC_COARSE);
    let shift = upf::abi::APP_STAMP_SHIFT;
    ((ns >> shift) as u8, (((ns >> shift) + 1) << shift) - ns)
}

/// `step(epoch, attempt)` run within one flow-stamp epoch, and that epoch: started at
/// least 3 s before the epoch ends and seen to have ended before it (a tick to spare:
/// the program's reading may be one ahead of ours), else run again, with the next
/// attempt's number (a step that enters a flow needs a new one each time). The checks
/// come after, on what the step returns.
fn in_one_epoch<R>(mut step: impl FnMut(u8, u16) -> R) -> (u8, R) {
    let tick = common::clock_res_ns(libc::CLOCK_MONOTONIC_COARSE);
    for attempt in 0..5 {
        let (e, left) = epoch_now();
        if left <= 3_000_000_000 {
            std::thread::sleep(std::time::Duration::from_nanos(left + 100_000_000));
            continue;
        }
        let r = step(e, attempt);
        let (after, left) = epoch_now();
        if after == e && left > 2 * tick {
            return (e, r);
        }
        eprintln!("a flow-stamp epoch began during the step (attempt {attempt}): again");
    }
    panic!("five steps in a row did not fit in an epoch (68.7 s, each began 3 s before its end)")
}

/// The app_stamps entry and octet of session `seid` (include/app.h, app_stamp).
fn stamp_at(seid: u64) -> (u32, usize) {
    let h = (seid as u32 ^ (seid >> 32) as u32) & (upf::abi::APP_STAMP_ENTRIES * 64 - 1);
    (h / 64, (h % 64) as usize)
}

impl Lab {
    fn stamp(&self, seid: u64) -> u8 {
        use libbpf_rs::{MapCore, MapFlags};
        let (k, o) = stamp_at(seid);
        let v = self
            .dp
            .skel()
            .maps
            .app_stamps
            .lookup(&k.to_ne_bytes(), MapFlags::ANY)
            .unwrap()
            .unwrap();
        v[o]
    }

    fn set_stamp(&self, seid: u64, stamp: u8) {
        use libbpf_rs::{MapCore, MapFlags};
        let (k, o) = stamp_at(seid);
        let maps = &self.dp.skel().maps;
        let mut v = maps
            .app_stamps
            .lookup(&k.to_ne_bytes(), MapFlags::ANY)
            .unwrap()
            .unwrap();
        v[o] = stamp;
        maps.app_stamps
            .update(&k.to_ne_bytes(), &v, MapFlags::ANY)
            .unwrap();
    }
}

/// The flow table is looked up only for a session whose stamp (the epoch it last
/// entered or refreshed a flow entry) is recent enough for a live entry: a classified
/// flow keeps its application over many packets; a stamp up to two epochs old, or one
/// ahead (another CPU's later clock reading), still looks it up; one three or more
/// epochs old (no live entry can be that old) skips it, which planting one shows.
#[test]
fn flow_stamps_gate_the_flow_table() {
    if !root() {
        return;
    }
    let lab = Lab::new();
    let srv = Ipv4Addr::new(198, 18, 0, 11);
    // Stamps start at 0; a session's packets of no application write none.
    assert_eq!(lab.stamp(SEID), 0);
    assert_eq!(lab.up(&syn(srv, 46000, 443)), 1);
    assert_eq!(lab.stamp(SEID), 0);
    // A flow entered: the stamp is the epoch of its packet; then its packets without
    // payload.
    let (e, (port, class)) = in_one_epoch(|_, attempt| {
        let port = 46001 + 100 * attempt;
        (
            port,
            lab.up(&ip_tcp(UE, srv, port, 443, &client_hello("b.example"))),
        )
    });
    assert_eq!(class, 11);
    assert_eq!(lab.stamp(SEID), e);
    for i in 0..200u32 {
        if i % 2 == 0 {
            assert_eq!(lab.up(&syn(srv, port, 443)), 11, "packet {i}");
        } else {
            assert_eq!(lab.down(&ip_tcp(srv, UE, 443, port, b"")), 21, "packet {i}");
        }
    }
    // Another session's stamp octet (SEID + 1) is untouched.
    assert_eq!(lab.stamp(SEID + 1), 0);
    // Stamps a live entry may have: looked up (255 back: one ahead).
    for back in [0u8, 1, 2, 255] {
        let (_, got) = in_one_epoch(|e, _| {
            lab.set_stamp(SEID, e.wrapping_sub(back));
            (
                lab.up(&syn(srv, port, 443)),
                lab.down(&ip_tcp(srv, UE, 443, port, b"")),
            )
        });
        assert_eq!(got, (11, 21), "stamp {back} back");
    }
    // Older: the flow table is not looked up (the entry is live: the planted stamp is
    // one the data path never writes for it), so the flow's packets are of no
    // application; the entry is not refreshed either.
    for back in [3u8, 100, 253] {
        let (e, got) = in_one_epoch(|e, _| {
            lab.set_stamp(SEID, e.wrapping_sub(back));
            (
                lab.up(&syn(srv, port, 443)),
                lab.down(&ip_tcp(srv, UE, 443, port, b"")),
            )
        });
        assert_eq!(got, (1, 2), "stamp {back} back");
        assert_eq!(lab.stamp(SEID), e.wrapping_sub(back));
    }
    // A new flow entered writes the epoch again; the old flow is found again.
    let (e, class) = in_one_epoch(|_, attempt| {
        let new = 46002 + 100 * attempt;
        lab.up(&ip_tcp(UE, srv, new, 443, &client_hello("a.example")))
    });
    assert_eq!(class, 10);
    assert_eq!(lab.stamp(SEID), e);
    assert_eq!(lab.up(&syn(srv, port, 443)), 11);
}
