//! `upfbench sessions` against upfd on loopback: every level filled and measured, all
//! accepted, memory per session read from upfd's process.

mod common;

use clap::Parser;
use upfbench::sessions::{measure, Args};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

#[test]
fn session_rate_with_sessions_resident_and_memory_per_session() {
    let upfd = common::Upfd::builder().start();
    let cli = Cli::parse_from([
        "sessions",
        "--upf",
        &upfd.n4.to_string(),
        "--resident",
        "200,2000",
        "--measure",
        "500",
        "--ue-pool",
        "10.64.0.0/16",
    ]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let (levels, upf) = rt
        .block_on(measure(&cli.args, &[200, 2000], Some(upfd.pid())))
        .unwrap();
    assert_eq!(levels.len(), 2);
    for (l, (level, measured)) in levels.iter().zip([(200, 200), (2000, 500)]) {
        assert_eq!(l.resident, level);
        assert_eq!(l.measured.accepted, measured, "{l:?}");
        assert_eq!(
            l.fill.accepted,
            if level == 200 { 0 } else { 1300 },
            "{l:?}"
        );
        assert!(l.measured.per_second > 0.0 && l.measured.latency.p99_ms > 0.0);
        let b = l.bytes_per_session.expect("memory of the local upfd");
        assert!(b > 0 && b < 1 << 20, "{b} B/session");
        // CPU per establishment of both processes, read (ticks of 10 ms: may be 0).
        assert!(
            l.upf_cpu_us_per_establishment.is_some_and(|c| c >= 0.0),
            "{l:?}"
        );
        assert!(
            l.smf_cpu_us_per_establishment.is_some_and(|c| c >= 0.0),
            "{l:?}"
        );
    }
    assert_eq!(upf.n4, upfd.n4.to_string());
    let text = upfbench::sessions::table(&levels, Some(upfd.pid()));
    assert!(text.contains("     2000 |"), "{text}");
    assert!(text.contains("UPF µs/est"), "{text}");
}
