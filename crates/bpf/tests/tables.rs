//! How the data path's tables are used: PDRs with the same SDF filters share one block
//! of the sdfs table, so its size bounds distinct filter sets, not sessions; a full
//! table refuses a session without changing anything. Needs CAP_BPF (root).

mod common;

use std::sync::Arc;

use common::root;
use pfcp::ie::SdfFilter;
use upf::fastpath::teid_index::TeidIndex;
use upf::fastpath::Config;
use upf::fastpath::{FastPath, FastPathError};
use upf::rules::*;
use upf_bpf::datapath::{Capacity, Datapath};

fn filter(flow: &str) -> SdfFilter {
    SdfFilter {
        flow_description: Some(flow.as_bytes().to_vec()),
        ..Default::default()
    }
}

/// The benchmark's session `i` with `flow` as both PDRs' SDF filter, and the TEID upfd
/// would give it (its UE address's slot): its keys are in its record, so the cold table
/// that fills is the SDF table, not the key tables.
fn session(cap: &Capacity, i: u32, flow: &str) -> Arc<Session> {
    let mut s = common::session(i, flow, &common::urr_template());
    let slot = u32::from(common::ue(i)) % cap.ue_slots;
    common::set_teid(&mut s, cap.teid_index.teid(slot));
    Arc::new(s)
}

/// Entries in the sdfs table.
fn sdf_entries(dp: &Datapath) -> usize {
    use upf_bpf::libbpf_rs::MapCore;
    dp.map_named("sdfs").expect("sdfs").keys().count()
}

fn teid_of(s: &Session) -> u32 {
    s.pdrs
        .get(&1)
        .expect("PDR 1")
        .pdi
        .local_fteid
        .as_ref()
        .expect("an F-TEID")
        .teid
}

#[test]
fn pdrs_with_the_same_sdf_filters_share_one_block() {
    if !root() {
        return;
    }
    // Room for 1024 SDF entries (the least), and 1000 sessions of 2 PDRs with a filter
    // each. 4096 slots: the UE addresses from 10.64.0.1 up have slots of their own.
    let slots = 4096;
    let cap = Capacity {
        sdf_entries: 1024,
        ue_slots: slots,
        teid_index: TeidIndex::new(1, u32::MAX, slots),
        ..Capacity::for_sessions(1000)
    };
    let mut dp = Datapath::load(cap, Config::default()).expect("load");
    let flow = "permit out ip from any to assigned";
    let sessions: Vec<Arc<Session>> = (0..1000).map(|i| session(&cap, i, flow)).collect();
    for s in &sessions {
        dp.install(None, s).expect("shared filters fit");
    }
    assert_eq!(dp.sdf_blocks(), (1, 2000));
    assert_eq!(
        dp.direct_keys(),
        [(1000, 0), (1000, 0)],
        "every key in its slot"
    );

    // A modification keeping the filter keeps the block; one changing it gets its own.
    let mut m = (*sessions[0]).clone();
    if let Some(p) = m.pdrs.get_mut(&1) {
        p.pdi.sdf_filters = thin_vec![filter("permit out 17 from any to assigned")];
    }
    let m = Arc::new(m);
    dp.install(Some(&sessions[0]), &m).unwrap();
    assert_eq!(dp.sdf_blocks(), (2, 2000));

    // Distinct filters: the table fills, and a refused session changes nothing.
    let mut installed = vec![m.clone()];
    installed.extend(sessions[1..].iter().cloned());
    let mut refused = None;
    for i in 0..2000u32 {
        let flow = format!(
            "permit out 6 from 192.0.{}.{} to assigned",
            i / 250,
            i % 250
        );
        let s = session(&cap, 1000 + i, &flow);
        match dp.install(None, &s) {
            Ok(()) => installed.push(s),
            Err(e) => {
                refused = Some((s, e));
                break;
            }
        }
    }
    let (s, e) = refused.expect("the table filled");
    assert!(matches!(e, FastPathError::Full("sdfs")), "{e:?}");
    let (blocks, pdrs) = dp.sdf_blocks();
    assert_eq!(pdrs, 2 * installed.len() as u64);
    // One block per distinct filter set: the shared one, the modified session's, one
    // per session since.
    assert_eq!(blocks, 2 + installed.len() - 1000);
    let full = sdf_entries(&dp);
    assert!(
        full <= 1024 && blocks <= full,
        "{full} entries, {blocks} blocks"
    );
    // The refused session left nothing: no entry, no key; refused again the same way.
    let n = installed.len();
    assert_eq!(dp.direct_keys(), [(n, 0), (n, 0)]);
    assert_eq!(dp.session_by_teid(teid_of(&s)), Some(None));
    let ue = s.pdrs.get(&2).expect("PDR 2").pdi.ue_ips[0]
        .ipv4
        .expect("a UE address");
    assert_eq!(dp.session_by_ue(ue.into()), Some(None));
    assert!(matches!(
        dp.install(None, &s),
        Err(FastPathError::Full("sdfs"))
    ));
    assert_eq!((sdf_entries(&dp), dp.sdf_blocks()), (full, (blocks, pdrs)));

    // Removing every session frees every block.
    for s in &installed {
        dp.remove(s);
    }
    assert_eq!(dp.sdf_blocks(), (0, 0));
}
