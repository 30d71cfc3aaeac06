//! A restarted upfd takes the running data path as it is (crates/bpf/src/datapath/
//! reuse.rs, docs/architecture.md "Restart"): a second `Datapath` adopts the first one's
//! programs and tables by its `sess_pages` table, the "restored" sessions are installed
//! into it and keep their slots, cells and counts, and what the state does not know (a
//! session written after the journal's last frame) is removed before anything else.
//! Traffic runs through the programs (BPF_PROG_RUN) before, during and after. Needs
//! CAP_BPF (root).

mod common;

use std::sync::Arc;
use std::time::Instant;

use common::{downlink_frame, neigh_config, root, session, set_teid, test_run, ue, uplink_frame};
use upf::fastpath::FastPath;
use upf::rules::*;
use upf_bpf::datapath::{Adoption, Capacity, Datapath, Reconciled, Role, HOME_HANDLE};

const XDP_REDIRECT: u32 = 4;
const FLOW: &str = "permit out ip from any to assigned";

/// Session `i` with the TEID upfd would give it (its UE address's slot).
fn session_in_slot(dp: &Datapath, i: u32) -> Session {
    let mut s = session(i, FLOW, &common::urr_template());
    let slot = u32::from(ue(i)) % Capacity::for_sessions(1000).ue_slots;
    set_teid(&mut s, dp.teid_index().teid(slot));
    s
}

/// The session with a second URR on its uplink PDR: it lives in a cell.
fn with_second_urr(mut s: Session) -> Session {
    let mut rule = common::urr_template();
    rule.urr_id = 2;
    s.urrs.insert(2, Urr::new(&rule));
    if let Some(p) = s.pdrs.get_mut(&1) {
        p.urr_ids.push(2);
    }
    s
}

fn teid_of(s: &Session) -> u32 {
    s.pdrs
        .get(&1)
        .unwrap()
        .pdi
        .local_fteid
        .as_ref()
        .unwrap()
        .teid
}

fn ue_of(s: &Session) -> std::net::Ipv4Addr {
    s.pdrs.get(&2).unwrap().pdi.ue_ips[0].ipv4.unwrap()
}

/// Uplink and downlink frames of session `s` through `dp`'s programs: how many were
/// forwarded.
fn send(dp: &Datapath, s: &Session, up: u32, down: u32) -> u32 {
    let mut n = 0;
    for _ in 0..up {
        n += u32::from(
            test_run(dp.prog_fd(Role::Gtpu), &uplink_frame(teid_of(s), ue_of(s))) == XDP_REDIRECT,
        );
    }
    for _ in 0..down {
        n += u32::from(test_run(dp.prog_fd(Role::N6), &downlink_frame(ue_of(s))) == XDP_REDIRECT);
    }
    n
}

#[test]
fn a_restart_of_the_same_build_takes_the_running_data_path_with_its_counts() {
    if !root() {
        return;
    }
    let cfg = neigh_config();
    let cap = Capacity::for_sessions(1000);
    let mut old = common::loaded(cap, cfg.clone());
    let s1 = Arc::new(session_in_slot(&old, 1));
    let s2 = Arc::new(with_second_urr(session_in_slot(&old, 2)));
    // Written to the tables after the journal's last frame: the state will not know it.
    let s3 = Arc::new(session_in_slot(&old, 3));
    for s in [&s1, &s2, &s3] {
        old.install(None, s).unwrap();
    }
    assert_eq!(send(&old, &s1, 3, 2), 5);
    assert_eq!(send(&old, &s2, 4, 1), 5);
    assert_eq!(send(&old, &s3, 1, 1), 2);
    let handles = [
        old.urr_handle(s1.up_seid, 1),
        old.urr_handle(s2.up_seid, 1),
        old.urr_handle(s2.up_seid, 2),
    ];
    assert!(
        handles[0].is_some_and(|h| h & HOME_HANDLE != 0),
        "{handles:?}"
    );
    assert!(
        handles[2].is_some_and(|h| h & HOME_HANDLE == 0),
        "{handles:?}"
    );
    let table = old.counter_table().unwrap().map_id;

    // Other table sizes: not this data path.
    match Datapath::adopt(Capacity::for_sessions(2000), table) {
        Adoption::Not(why) => assert!(why.contains("table sizes"), "{why}"),
        Adoption::Adopted(_) => panic!("adopted a data path of other sizes"),
    }
    let mut new = match Datapath::adopt(cap, table) {
        Adoption::Adopted(d) => *d,
        Adoption::Not(why) => panic!("not adopted: {why}"),
    };
    assert!(new.adopting());
    new.configure(cfg, 20, 20, 0).unwrap();
    // The state's sessions, as a restore installs them; traffic meanwhile.
    new.install(None, &s1).unwrap();
    assert_eq!(send(&new, &s1, 1, 0), 1);
    new.install(None, &s2).unwrap();
    let r = new.finish_adoption(Instant::now());
    assert_eq!(
        r,
        Reconciled {
            sessions_removed: 1,
            cells_freed: 0,
            keys_removed: 0,
            cold_replaced: r.cold_replaced,
        }
    );
    assert!(!new.adopting());
    // The old upfd's handles are gone: the programs and tables live on.
    drop(old);

    // Each session in its slot and cells as before, its counts going on.
    assert_eq!(
        [
            new.urr_handle(s1.up_seid, 1),
            new.urr_handle(s2.up_seid, 1),
            new.urr_handle(s2.up_seid, 2)
        ],
        handles
    );
    assert_eq!(send(&new, &s1, 1, 1), 2);
    assert_eq!(send(&new, &s2, 1, 1), 2);
    let u1 = new.usage(s1.up_seid, 1);
    assert_eq!((u1.ul_packets, u1.dl_packets), (5, 3), "{u1:?}");
    let u2 = new.usage(s2.up_seid, 1);
    assert_eq!((u2.ul_packets, u2.dl_packets), (5, 2), "{u2:?}");
    let u2b = new.usage(s2.up_seid, 2);
    assert_eq!((u2b.ul_packets, u2b.dl_packets), (5, 0), "{u2b:?}");
    // The session the state did not know is gone, both ways.
    assert_eq!(send(&new, &s3, 1, 1), 0);
    assert_eq!(new.session_by_teid(teid_of(&s3)), Some(None));

    // New sessions go where nothing is: s3's slot is free again after the grace.
    new.settle_at(Instant::now() + upf_bpf::datapath::SLOT_GRACE * 2);
    let s4 = Arc::new(session_in_slot(&new, 4));
    new.install(None, &s4).unwrap();
    new.install(None, &s3).unwrap();
    assert_eq!(send(&new, &s4, 1, 1), 2);
    assert_eq!(send(&new, &s3, 1, 1), 2);
    let u3 = new.usage(s3.up_seid, 1);
    assert_eq!(
        (u3.ul_packets, u3.dl_packets),
        (1, 1),
        "s3 starts anew: {u3:?}"
    );
    // Modifications and removals work on adopted sessions as on any.
    new.remove(&s2);
    assert_eq!(send(&new, &s2, 1, 1), 0);
    assert_eq!(send(&new, &s1, 1, 0), 1);
}
