//! How the data path's tables are used: PDRs with the same SDF filters share one block
//! of the sdfs table, so its size bounds distinct filter sets, not sessions; a full
//! table refuses a session without changing anything. Needs CAP_BPF (root).

use std::net::Ipv4Addr;
use std::sync::Arc;

use pfcp::ie::{FSeid, NodeId, SdfFilter};
use upf::fastpath::pipeline::PipelineConfig;
use upf::fastpath::{FastPath, FastPathError};
use upf::rules::*;
use upf_bpf::datapath::{Capacity, Datapath};

const N3: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 7);

fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let r = unsafe { libc::geteuid() } == 0;
    if !r {
        eprintln!("not root: skipping (loading BPF programs needs CAP_BPF)");
    }
    r
}

fn filter(flow: &str) -> SdfFilter {
    SdfFilter {
        flow_description: Some(flow.as_bytes().to_vec()),
        ..Default::default()
    }
}

/// A session as the benchmark's SMF builds it: an uplink PDR on a TEID and a downlink
/// PDR on the UE address, each with `flow` as its SDF filter, forwarding FARs.
fn session(i: u32, flow: &str) -> Arc<Session> {
    let seid = u64::from(i) + 1;
    let ue = Ipv4Addr::from(0x0a2d_0000 + i + 1);
    let mut s = Session::new(
        seid,
        FSeid {
            seid,
            ipv4: Some(Ipv4Addr::LOCALHOST),
            ipv6: None,
        },
        NodeId::Ipv4(Ipv4Addr::LOCALHOST),
    );
    for (id, uplink) in [(1u16, true), (2, false)] {
        let far = Far {
            id: u32::from(id),
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
                ..Default::default()
            }),
            bar_id: None,
        };
        s.fars.insert(far.id, far);
        let pdi = if uplink {
            Pdi {
                source_interface: interface::ACCESS,
                local_fteid: Some(LocalFteid {
                    teid: 0x100 + i,
                    ipv4: Some(N3),
                    ipv6: None,
                }),
                sdf_filters: vec![filter(flow)],
                ..Default::default()
            }
        } else {
            Pdi {
                source_interface: interface::CORE,
                ue_ips: vec![UeIp {
                    ipv4: Some(ue),
                    is_destination: true,
                    ..Default::default()
                }],
                sdf_filters: vec![filter(flow)],
                ..Default::default()
            }
        };
        s.pdrs.insert(
            id,
            Pdr {
                id,
                precedence: 200,
                pdi,
                outer_header_removal: None,
                far_id: Some(u32::from(id)),
                urr_ids: vec![],
                qer_ids: vec![],
                activation_time: None,
                deactivation_time: None,
            },
        );
    }
    Arc::new(s)
}

#[test]
fn pdrs_with_the_same_sdf_filters_share_one_block() {
    if !root() {
        return;
    }
    // Room for 16 SDF entries only, and 1000 sessions of 2 PDRs with a filter each.
    let cap = Capacity {
        sdf_entries: 16,
        ..Capacity::for_sessions(1000)
    };
    let mut dp = Datapath::load(cap, PipelineConfig::default()).expect("load");
    let flow = "permit out ip from any to assigned";
    let sessions: Vec<Arc<Session>> = (0..1000).map(|i| session(i, flow)).collect();
    for s in &sessions {
        dp.install(None, s).expect("shared filters fit");
    }
    assert_eq!(dp.sdf_blocks(), (1, 2000));

    // A modification keeping the filter keeps the block; one changing it gets its own.
    let mut m = (*sessions[0]).clone();
    if let Some(p) = m.pdrs.get_mut(&1) {
        p.pdi.sdf_filters = vec![filter("permit out 17 from any to assigned")];
    }
    let m = Arc::new(m);
    dp.install(Some(&sessions[0]), &m).unwrap();
    assert_eq!(dp.sdf_blocks(), (2, 2000));

    // Distinct filters: the table fills, and a refused session changes nothing.
    let mut installed = vec![m.clone()];
    installed.extend(sessions[1..].iter().cloned());
    let mut refused = None;
    for i in 0..20u32 {
        let flow = format!("permit out 6 from 192.0.2.{i} to assigned");
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
    assert!(blocks < 16, "{blocks}");

    // Removing every session frees every block.
    for s in &installed {
        dp.remove(s);
    }
    assert_eq!(dp.sdf_blocks(), (0, 0));
}
