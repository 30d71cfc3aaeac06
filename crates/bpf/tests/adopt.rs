//! Application detection's learned state carried from one data path to the next
//! (upf_bpf::adopt, upfd's restart): flows classified and addresses learned in the first
//! (by BPF_PROG_RUN), copied with the sessions' flow stamps into a second data path,
//! found by the first's URR table (`sess_pages`) ID, which then classifies the old flow's
//! next packet (no payload) and a new flow to the learned address by their application.
//! Needs CAP_BPF (root).

mod common;

use std::net::Ipv4Addr;
use std::sync::Arc;

use common::app::*;
use common::{neigh_config, root, urr_template, GNB};
use pfcp::ie::{OuterHeaderCreation, OuterHeaderRemoval};
use upf::fastpath::FastPath;
use upf::pfd::{AppPfds, PfdTable};
use upf::rules::*;
use upf_bpf::adopt::OldApps;
use upf_bpf::datapath::{Capacity, Datapath};

const TEID: u32 = 0x8000_4321;
const UE: Ipv4Addr = Ipv4Addr::new(10, 45, 0, 9);
const SEID: u64 = 91;
const DNS: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 53);
const XDP_REDIRECT: u32 = 4;

/// A (a domain, any protocol), B (a domain for TLS SNI only).
fn pfds() -> PfdTable {
    let mut t = PfdTable::new();
    let mut a = AppPfds::default();
    a.add_domain("a.example", None).unwrap();
    t.set("A", a, true).unwrap();
    let mut b = AppPfds::default();
    b.add_domain("b.example", Some("TLS_SNI")).unwrap();
    t.set("B", b, true).unwrap();
    t
}

/// Uplink PDRs on TEID: A (10), B (11), default (1); downlink on the UE address: A (20),
/// B (21), default (2); each with its own FAR and URR (the PDR's ID).
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
        (1, 100, None, true),
        (20, 10, Some("A"), false),
        (21, 20, Some("B"), false),
        (2, 100, None, false),
    ] {
        let mut pdi = if up { uplink.clone() } else { downlink.clone() };
        pdi.application_id = app.map(str::to_string);
        let mut rule = urr.clone();
        rule.urr_id = u32::from(id);
        s.urrs.insert(u32::from(id), Urr::new(&rule));
        s.fars.insert(
            u32::from(id),
            Far {
                id: u32::from(id),
                action: ApplyAction {
                    forw: true,
                    ..Default::default()
                },
                forwarding: Some(Forwarding {
                    destination_interface: if up {
                        interface::CORE
                    } else {
                        interface::ACCESS
                    },
                    outer_header_creation: (!up).then(|| OuterHeaderCreation::gtpu_ipv4(9, GNB)),
                    ..Default::default()
                }),
                bar_id: None,
            },
        );
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

/// A data path with the applications and the session, as upfd's restart installs them
/// before the swap.
fn datapath() -> Datapath {
    let mut dp = common::loaded(Capacity::for_sessions(64), neigh_config());
    dp.set_pfds(&Arc::new(pfds()), &[]).expect("set_pfds");
    dp.install(None, &Arc::new(session())).expect("install");
    dp
}

/// Run a frame through `dp`; the URR (= PDR ID) whose counts it grew.
fn run(dp: &Datapath, uplink_frame: bool, frame: &[u8]) -> u32 {
    let urrs = [1u32, 2, 10, 11, 20, 21];
    let before: Vec<_> = urrs.iter().map(|u| dp.usage(SEID, *u)).collect();
    let prog = if uplink_frame {
        &dp.skel().progs.xdp_n3
    } else {
        &dp.skel().progs.xdp_n6
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
        .filter(|(u, b)| dp.usage(SEID, **u) != **b)
        .map(|(u, _)| *u)
        .collect();
    assert_eq!(grew.len(), 1, "one PDR counted: {grew:?}");
    grew[0]
}

fn up(dp: &Datapath, inner: &[u8]) -> u32 {
    run(dp, true, &uplink(TEID, inner))
}

fn down(dp: &Datapath, inner: &[u8]) -> u32 {
    run(dp, false, &downlink(inner))
}

fn syn(dst: Ipv4Addr, sport: u16, dport: u16) -> Vec<u8> {
    ip_tcp(UE, dst, sport, dport, &[])
}

#[test]
fn classified_flows_and_learned_addresses_carried() {
    if !root() {
        return;
    }
    let old = datapath();
    let srv = Ipv4Addr::new(198, 18, 0, 5);
    let cdn = Ipv4Addr::new(203, 0, 113, 10);
    // In the old data path: a flow classified by its ClientHello (B), an address
    // learned from a DNS answer (A).
    let hello = ip_tcp(UE, srv, 41000, 443, &client_hello("video.b.example"));
    assert_eq!(up(&old, &hello), 11);
    assert_eq!(up(&old, &syn(srv, 41000, 443)), 11);
    let answer = dns_answer("www.a.example", None, &[cdn], 300);
    assert_eq!(down(&old, &ip_udp(DNS, UE, 53, 5353, &answer)), 2);
    assert_eq!(up(&old, &syn(cdn, 42000, 443)), 10);

    // A new data path without the old state: the default PDRs.
    let bare = datapath();
    assert_eq!(up(&bare, &syn(srv, 41000, 443)), 1);
    assert_eq!(up(&bare, &syn(cdn, 42001, 443)), 1);
    drop(bare);

    // Adopted, found by the old URR table's ID as upfd's state names it.
    let new = datapath();
    let urr_table = old.counter_table().expect("counter table").map_id;
    let mut apps = OldApps::find(urr_table).expect("the old data path's tables");
    // The tables the stages use too, found through the scratch table they share with
    // the entry programs.
    let mut tables = apps.tables();
    tables.sort_unstable();
    assert_eq!(tables, ["app_addrs", "app_flows", "app_stamps"]);
    let first = apps.copy(&new);
    assert!(first.skipped.is_empty(), "{first:?}");
    // Two flows (the ClientHello's, the one to the learned address), one address, and
    // the session's flow stamp (without it the new programs would not look its flows
    // up: a stamp of 0 is stale but for a few minutes after boot).
    assert_eq!(
        (first.flows, first.addrs, first.stamps),
        (2, 1, 1),
        "{first:?}"
    );
    // The old flow's next packets, both ways, without payload: B's PDRs.
    assert_eq!(up(&new, &syn(srv, 41000, 443)), 11);
    assert_eq!(down(&new, &ip_tcp(srv, UE, 443, 41000, b"")), 21);
    // The learned address: a new flow to it is A's.
    assert_eq!(up(&new, &syn(cdn, 42002, 443)), 10);
    // Another flow to the ClientHello's server: not classified.
    assert_eq!(up(&new, &syn(srv, 41001, 443)), 1);

    // Between the two copies the old programs classify another flow: the second copy
    // carries it, and only what changed.
    let hello2 = ip_tcp(UE, srv, 41002, 443, &client_hello("b.example"));
    assert_eq!(up(&old, &hello2), 11);
    assert_eq!(up(&new, &syn(srv, 41002, 443)), 1);
    let again = apps.copy_again(&new);
    assert_eq!((again.flows, again.addrs), (1, 0), "{again:?}");
    assert_eq!(up(&new, &syn(srv, 41002, 443)), 11);
    // Nothing changed since: nothing written.
    let third = apps.copy_again(&new);
    assert_eq!(
        (third.flows, third.addrs, third.stamps),
        (0, 0, 0),
        "{third:?}"
    );

    // The old data path gone (its programs unloaded), the tables stay readable while
    // held open.
    drop(old);
    let after = apps.copy_again(&new);
    assert_eq!((after.flows, after.addrs), (0, 0), "{after:?}");
    assert_eq!(up(&new, &syn(srv, 41000, 443)), 11);
}

#[test]
fn no_old_data_path_is_said() {
    if !root() {
        return;
    }
    // A map ID no program uses.
    let e = OldApps::find(u32::MAX).err().expect("not found");
    assert!(e.contains("no loaded program"), "{e}");
}
