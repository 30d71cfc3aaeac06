//! A benchmark report of synthetic figures (clearly labelled as such; nothing here was
//! measured), for the report tests (`report.rs`, `report_screenshot.rs`).

use std::collections::BTreeMap;

use upfbench::report::*;

pub fn capacity_rows() -> Vec<CapacityRow> {
    // users, UL Gbit/s, UL loss %, DL Gbit/s, DL loss %, UL Mpps, DL Mpps
    [
        (100, 0.209, 0.0, 0.395, 0.0, 0.042, 0.070),
        (500, 1.045, 0.0, 1.974, 0.0, 0.211, 0.348),
        (1000, 2.089, 0.0, 3.948, 0.0, 0.422, 0.696),
        (2000, 4.178, 0.0, 7.896, 0.001, 0.844, 1.392),
        (4000, 8.356, 0.004, 15.79, 0.009, 1.688, 2.784),
        (8000, 12.41, 0.012, 16.02, 0.31, 2.507, 2.829),
        (16000, 12.62, 1.84, 16.10, 2.75, 2.549, 2.843),
    ]
    .into_iter()
    .map(
        |(users, ul_gbps, ul_loss_pct, dl_gbps, dl_loss_pct, ul_mpps, dl_mpps)| CapacityRow {
            users,
            ul_gbps,
            ul_loss_pct,
            dl_gbps,
            dl_loss_pct,
            ul_mpps,
            dl_mpps,
        },
    )
    .collect()
}

/// A report with every measured section, of made-up figures of plausible size.
pub fn sample() -> Report {
    use Direction::{Downlink as DL, Uplink as UL};
    let mut r = Report::new("SYNTHETIC TEST DATA (not a measurement): upfbench capacity");
    r.machine = Some(Machine {
        cpu_model: "Synthetic CPU @ 2.00GHz (test data)".into(),
        cpus: 2,
        kernel: "Linux 6.1.0-test #1 SMP x86_64".into(),
        generator_cpus: vec![0],
        forwarder_cpus: vec![1],
        load_average: [0.52, 0.58, 0.59],
        busy_processes: vec![ProcessLoad {
            pid: 4242,
            name: "upfd".into(),
            cpu_pct: 97.0,
        }],
        date: "2026-11-22T02:09:09Z".into(),
        upfbench_version: "0.1.0".into(),
        command_line: vec![
            "upfbench".into(),
            "capacity".into(),
            "--model".into(),
            "carrier".into(),
        ],
        notes: vec!["forwarding threads not real-time (test data)".into()],
    });
    r.upf = Some(UpfUnderTest {
        name: "synthetic-upf (test data)".into(),
        n4: "192.168.4.2:8805".into(),
        n3: "192.168.3.2".into(),
        n6: "192.168.6.2".into(),
        options: BTreeMap::from([
            ("CHOOSE".into(), "on".into()),
            ("PDU Session Container".into(), "off".into()),
        ]),
    });
    for (dir, size, gen, io) in [
        (UL, 64, 17.5, 4.2),
        (UL, 656, 12.0, 3.6),
        (UL, 1400, 8.0, 2.5),
        (DL, 64, 18.0, 4.6),
        (DL, 656, 12.5, 3.9),
        (DL, 1400, 8.2, 2.7),
    ] {
        r.limits.push(Limit {
            direction: dir,
            packet_bytes: size,
            generator_mpps: Some(gen),
            io_mpps: Some(io),
            one_miss_mpps: Some(io * 0.75),
            one_miss_sessions: Some(1_000_000),
            ..Limit::default()
        });
    }
    r.capacity = Some(CapacityTable {
        model: TrafficModel::Carrier,
        rows: capacity_rows(),
        rig_users: Some(9000),
    });
    for (dir, size, sessions, offered, received) in [
        (UL, 64, 1, 17.5, 3.1),
        (UL, 656, 1, 12.0, 2.9),
        (UL, 1400, 1, 8.0, 2.2),
        (UL, 64, 1_000_000, 17.5, 2.6),
        (UL, 656, 1_000_000, 12.0, 2.4),
        (UL, 1400, 1_000_000, 8.0, 1.9),
        (DL, 64, 1, 18.0, 3.3),
        (DL, 656, 1, 12.5, 3.2),
        (DL, 1400, 1, 8.2, 2.4),
        (DL, 64, 1_000_000, 18.0, 2.8),
        (DL, 656, 1_000_000, 12.5, 2.7),
        (DL, 1400, 1_000_000, 8.2, 2.1),
    ] {
        let mut p = ThroughputPoint::measured(dir, size, sessions, offered, received);
        // Limits beside each trial: the I/O limit a little off the whole run's, and for
        // UL 64 B at 1M sessions a pair too far apart, measured again and flagged.
        let io = r.limit(dir, size).and_then(|l| l.io_mpps).unwrap();
        let (before, after, repeated) = if (dir, size, sessions) == (UL, 64, 1_000_000) {
            (io * 0.85, io, true)
        } else {
            (io * 0.98, io * 1.01, false)
        };
        p.io_bracket = Some(Bracket::new(before, after, received, repeated));
        if sessions == 1_000_000 {
            p.one_miss_bracket = Some(Bracket::new(io * 0.74, io * 0.75, received, false));
        }
        r.throughput.push(p);
    }
    r.fill_ratios();
    for (dir, rate, above) in [
        (UL, 2.8, [(3.0, 2.99), (3.5, 3.08), (4.0, 3.1), (5.0, 3.1)]),
        (DL, 3.0, [(3.2, 3.19), (3.5, 3.28), (4.0, 3.3), (5.0, 3.29)]),
    ] {
        let mut curve: Vec<LossPoint> = [0.5, 1.0, 1.5, 2.0, 2.5, rate]
            .iter()
            .map(|o| LossPoint::measured(*o, *o))
            .collect();
        curve.extend(above.iter().map(|(o, rx)| LossPoint::measured(*o, *rx)));
        r.no_drop.push(NoDropRate {
            direction: dir,
            packet_bytes: 64,
            sessions: 1000,
            mpps: rate,
            gbps: gbps(rate, 64),
            curve,
            rig_mpps: Some(rate * 1.1),
        });
    }
    for (dir, rate) in [(UL, 2.8), (DL, 3.0)] {
        for (pct, p50, p99, p999) in [
            (10, 18.0, 35.0, 61.0),
            (50, 22.0, 48.0, 95.0),
            (90, 40.0, 140.0, 420.0),
        ] {
            let k = if dir == DL { 1.1 } else { 1.0 };
            r.latency.push(LatencyPoint {
                direction: dir,
                packet_bytes: 64,
                percent_of_no_drop: pct,
                offered_mpps: rate * f64::from(pct) / 100.0,
                p50_us: p50 * k,
                p99_us: p99 * k,
                p999_us: p999 * k,
                samples: 100_000,
                bare: Some(Percentiles {
                    p50_us: 10.0,
                    p99_us: 30.0,
                    p999_us: 50.0,
                }),
            });
        }
    }
    for (resident, rate, p50, p99, max, bytes) in [
        (1000, 9500.0, 0.9, 3.1, 12.0, 1450),
        (100_000, 9100.0, 1.0, 3.6, 20.0, 1380),
        (1_000_000, 8200.0, 1.2, 4.8, 45.0, 1350),
    ] {
        r.sessions.push(SessionRatePoint {
            resident,
            established_per_s: rate,
            p50_ms: p50,
            p99_ms: p99,
            max_ms: max,
            bytes_per_session: Some(bytes),
            map_bytes_per_session: Some(bytes / 3),
        });
    }
    r.establish_under_traffic = Some(EstablishUnderTraffic {
        resident: 1_000_000,
        requested: 100_000,
        established: 100_000,
        established_per_s: 41_000.0,
        p50_ms: 1.4,
        p99_ms: 2.9,
        max_ms: 31.0,
        percent_of_no_drop: 50,
        packet_bytes: 650,
        ul_offered_mpps: 0.38,
        dl_offered_mpps: 0.33,
        ul_loss_pct: 0.0,
        dl_loss_pct: 0.0021,
        traffic_secs: 6.0,
        establish_secs: 2.44,
    });
    for (case, cpus, per_cpu, vs) in [
        ("disjoint sessions", 1, vec![3.0], None),
        ("disjoint sessions", 2, vec![2.9, 2.85], Some(1.95)),
        ("one hot session", 1, vec![3.1], None),
        ("one hot session", 2, vec![2.8, 2.75], Some(1.79)),
    ] {
        r.scaling.push(ScalingCase {
            case: case.into(),
            program: "xdp_n3".into(),
            sessions: if case == "one hot session" {
                1
            } else {
                100_000
            },
            cpus,
            aggregate_mpps: per_cpu.iter().sum(),
            mpps_per_cpu: per_cpu,
            vs_one_cpu: vs,
        });
    }
    r
}
