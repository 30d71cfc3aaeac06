//! Every capture of ../shared/interop/pcaps with SMF requests, played against a fresh
//! upfd by `upfbench replay`: every response matches the original UPF's (message type,
//! Cause, Created PDRs with allocations, F-TEID and UE address when CHOOSE was asked),
//! none times out.
//!
//! Deliberate difference, not counted as a mismatch (docs/interop.md): older Open5GS
//! UPFs also return bare Created PDRs (PDR ID only) for PDRs whose F-TEID the SMF chose;
//! TS 29.244 Table 7.5.3.1-1 asks for a Created PDR only when the UP function allocated.

mod common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use upfbench::replay::{replay, Plan, ReplayConfig};

fn pcaps() -> Option<Vec<PathBuf>> {
    let dir = std::env::var_os("UPF_INTEROP_PCAPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/interop/pcaps")
        });
    if !dir.is_dir() {
        eprintln!("interop pcaps absent at {}: skipping", dir.display());
        return None;
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    v.sort();
    Some(v)
}

#[test]
fn replay_every_capture_against_a_fresh_upfd() {
    let Some(files) = pcaps() else { return };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut replayed = 0;
    let addr = Ipv4Addr::new(127, 0, 0, 70);
    for f in files {
        let plan = Plan::from_file(&f).unwrap();
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        let upfd = common::Upfd::builder()
            .address(IpAddr::V4(addr))
            .n3(addr)
            .heartbeat_interval("60s")
            .ue_pool("internet", "10.45.0.0/16")
            .ue_pool("internet", "cafe::/64")
            .ue_pool("", "10.46.0.0/16")
            .start();
        let mut cfg = ReplayConfig::new(upfd.n4);
        cfg.upf_n3 = vec![IpAddr::V4(addr)];
        cfg.timeout = Duration::from_secs(2);
        let report = rt.block_on(replay(&plan, &cfg, |_| {})).unwrap();
        let s = &report.summary;
        eprintln!("{name}: {s}");
        if s.requests > 0 {
            replayed += 1;
        }
        let problems: Vec<String> = report
            .outcomes
            .iter()
            .filter(|o| !matches!(o.verdict, upfbench::replay::Verdict::Matched))
            .map(|o| format!("{o:?}"))
            .collect();
        assert_eq!(
            (s.mismatched, s.timed_out),
            (0, 0),
            "{name}:\n{}\nupfd log:\n{}",
            problems.join("\n"),
            upfd.log_tail(30)
        );
        assert_eq!(s.matched, s.requests);
        let _: SocketAddr = upfd.n4;
    }
    assert!(
        replayed >= 6,
        "expected the six Open5GS captures with SMF requests, replayed {replayed}"
    );
}
