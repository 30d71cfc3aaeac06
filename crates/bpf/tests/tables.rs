//! How the data path's tables are used: PDRs with the same SDF filters share one block
//! of the sdfs table, so its size bounds distinct filter sets, not sessions; a full
//! table refuses a session without changing anything. Needs CAP_BPF (root).

mod common;

use std::sync::Arc;

use common::root;
use pfcp::ie::SdfFilter;
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

/// The benchmark's session `i` with `flow` as both PDRs' SDF filter.
fn session(i: u32, flow: &str) -> Arc<Session> {
    Arc::new(common::session(i, flow, &common::urr_template()))
}

#[test]
fn pdrs_with_the_same_sdf_filters_share_one_block() {
    if !root() {
        return;
    }
    // Room for 1024 cold entries per table (the least), and 1000 sessions of 2 PDRs
    // with a filter each.
    let cap = Capacity {
        cold_entries: 1024,
        ..Capacity::for_sessions(1000)
    };
    let mut dp = Datapath::load(cap, Config::default()).expect("load");
    let flow = "permit out ip from any to assigned";
    let sessions: Vec<Arc<Session>> = (0..1000).map(|i| session(i, flow)).collect();
    for s in &sessions {
        dp.install(None, s).expect("shared filters fit");
    }
    assert_eq!(dp.sdf_blocks(), (1, 2000));

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
        let flow = format!("permit out 6 from 192.0.{}.{} to assigned", i / 250, i % 250);
        let s = session(1000 + i, &flow);
        match dp.install(None, &s) {
            Ok(()) => installed.push(s),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    assert!(
        matches!(refused, Some(FastPathError::Full("sdfs"))),
        "{refused:?}"
    );
    let (blocks, pdrs) = dp.sdf_blocks();
    assert_eq!(pdrs, 2 * installed.len() as u64);
    assert!(blocks <= 1024, "{blocks}");

    // Removing every session frees every block.
    for s in &installed {
        dp.remove(s);
    }
    assert_eq!(dp.sdf_blocks(), (0, 0));
}
