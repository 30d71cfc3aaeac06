//! upfd's heap per session, counted by the allocator: N sessions of the SMF emulator's
//! template (2 PDRs, 2 FARs, a QER with MBR, a volume-threshold URR) established through
//! the N4 layer in-process, with the reference model as the fast path or (UPF_HEAP_XDP,
//! root) the XDP data path's Datapath; live bytes and allocations per session after
//! the last one. Counts what the program asked for, not the allocator's overhead or
//! the BPF maps (the capacity report's bytes/session has both).
//!
//! Run by hand:
//! `UPF_HEAP_SESSIONS=20000 [UPF_HEAP_XDP=1] [UPF_HEAP_SDF=1] [UPF_HEAP_CHURN=200000] cargo test --release -p upfd --test heap -- --ignored --nocapture`
//! UPF_HEAP_CHURN then establishes and deletes that many sessions beside them and shows
//! what stayed allocated.

use std::alloc::{GlobalAlloc, Layout, System};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

/// The system allocator, counting live bytes and allocations.
struct Counting;
static LIVE: AtomicI64 = AtomicI64::new(0);
static COUNT: AtomicI64 = AtomicI64::new(0);
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as i64, Ordering::Relaxed);
        COUNT.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as i64, Ordering::Relaxed);
        COUNT.fetch_sub(1, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as i64 - l.size() as i64, Ordering::Relaxed);
        unsafe { System.realloc(p, l, n) }
    }
}
#[global_allocator]
static A: Counting = Counting;

use pfcp::ie::{Flags, NodeId};
use pfcp::msg::{self, Msg};
use pfcp::HeaderRepr;
use upf::alloc::{TeidAllocator, UeIpPools};
use upf::n4::{N4Config, N4};
use upf::procedures::{GtpuAddresses, Limits, Resources};
use upf::sessions::Sessions;

#[test]
#[ignore]
fn heap_per_session() {
    let n: usize = std::env::var("UPF_HEAP_SESSIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20000);
    let xdp = std::env::var("UPF_HEAP_XDP").is_ok();
    let churn: usize = std::env::var("UPF_HEAP_CHURN")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut pools = UeIpPools::default();
    pools.add("internet", "10.45.0.0/16".parse().unwrap());
    let res = Resources::new(
        TeidAllocator::new(1, 0xffff_ffff),
        pools,
        GtpuAddresses {
            access_v4: Some(Ipv4Addr::new(10, 10, 0, 7)),
            ..Default::default()
        },
        Limits::default(),
    );
    // The data path shared as upfd holds it, so that the churn can settle it as upfd's
    // poll does (freed slots come back after their grace period).
    let dp = xdp.then(|| {
        let cfg = upf::fastpath::Config {
            local: vec![IpAddr::V4(Ipv4Addr::new(10, 10, 0, 7))],
            n3_v4: Some(Ipv4Addr::new(10, 10, 0, 7)),
            ..Default::default()
        };
        std::rc::Rc::new(std::cell::RefCell::new(
            upf_bpf::datapath::Datapath::load(
                upf_bpf::datapath::Capacity::for_sessions(n as u32 + 2000),
                cfg,
            )
            .unwrap(),
        ))
    });
    let fp: Box<dyn upf::fastpath::FastPath> = match &dp {
        Some(d) => Box::new(d.clone()),
        None => Box::new(upf::model::Model::new(1 << 22, Default::default())),
    };
    let mut sessions = Sessions::new(res, fp, n + 2000);
    sessions.reserve(n + 2000);
    let mut n4 = N4::new(
        N4Config {
            node_id: NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 7)),
            addr: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 7)),
            recovery_time_stamp: 3_900_000_000,
            features: Flags::from_bits(&[pfcp::ie::up_function_features::FTUP], 2),
            allowed_peers: vec!["127.0.0.0/8".parse().unwrap()],
            smf_peers: Vec::new(),
            // Never due while the churn advances the clock: no peer answers here.
            heartbeat_interval: Duration::from_secs(86_400),
            t1: Duration::from_secs(1),
            n1: 2,
            cache_ttl: Duration::from_secs(0),
            cache_max: 0,
            graceful_release_period: Duration::from_secs(10),
            strict: false,
        },
        sessions,
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut cfg = upfbench::smf::SmfConfig::new("127.0.0.7:8805".parse().unwrap());
    cfg.bind = "127.0.0.4:0".parse().unwrap();
    cfg.node_id = Some(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 4)));
    let sdf = std::env::var("UPF_HEAP_SDF").is_ok();
    if sdf {
        cfg.sdf_filter = Some("permit out ip from any to assigned".into());
    }
    let smf = rt.block_on(upfbench::smf::Smf::connect(cfg)).unwrap();
    let from: SocketAddr = "127.0.0.4:8805".parse().unwrap();
    let now = Instant::now();
    let setup = msg::AssociationSetupRequest {
        cp_function_features: Some(Flags(vec![0])),
        ..msg::AssociationSetupRequest::new(NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4)), 1)
    };
    let out = n4.on_datagram(from, &msg::emit(&HeaderRepr::node(0, 1), &setup), now);
    assert_eq!(out.len(), 1);
    // Session `i`'s Session Establishment Request, with sequence number `seq`.
    let request = |i: usize, seq: u32| {
        let s = upfbench::smf::Session {
            index: i,
            cp_seid: 0x1000 + i as u64,
            ue_ip: Ipv4Addr::from(0x0a2d_0001 + i as u32),
            gnb_teid: i as u32 + 1,
            up_fseid: None,
            n3_fteid: None,
            state: upfbench::smf::SessionState::Established,
        };
        msg::emit(
            &HeaderRepr::session(0, 0, seq),
            &smf.establishment_request(&s),
        )
    };
    // The requests are built first (and counted in the base), so that the time below
    // is the UPF's alone: µs per establishment in-process, no sockets, no SMF.
    let requests: Vec<Vec<u8>> = (0..n).map(|i| request(i, 2 + i as u32)).collect();
    let base = LIVE.load(Ordering::Relaxed);
    let cbase = COUNT.load(Ordering::Relaxed);
    let started = Instant::now();
    let mut last_tenth = started;
    for (i, r) in requests.iter().enumerate() {
        if i == n - n / 10 {
            last_tenth = Instant::now();
        }
        let out = n4.on_datagram(from, r, now);
        let m = Msg::parse(&out[0].data).map(|x| x.1);
        match m {
            Ok(Msg::SessionEstablishmentResponse(r)) => {
                assert!(r.cause.is_acceptance(), "{r:?}")
            }
            other => panic!("not an establishment response: {other:?}"),
        }
    }
    let (all, tenth) = (started.elapsed(), last_tenth.elapsed());
    let live = LIVE.load(Ordering::Relaxed) - base;
    let count = COUNT.load(Ordering::Relaxed) - cbase;
    drop(requests);
    eprintln!(
        "{n} sessions: {:.2} us per establishment in all, {:.2} us in the last tenth",
        all.as_secs_f64() * 1e6 / n as f64,
        tenth.as_secs_f64() * 1e6 / (n - n * 9 / 10) as f64
    );
    eprintln!(
        "{n} sessions ({}, SDF filter {}): {} live bytes and {:.1} allocations per session",
        if xdp {
            "XDP data path"
        } else {
            "reference model"
        },
        if sdf { "on" } else { "off" },
        live / n as i64,
        count as f64 / n as f64
    );

    // Churn beside them (UPF_HEAP_CHURN sessions, 1000 established then deleted per
    // simulated second): what stays allocated afterwards is growth under churn.
    if churn == 0 {
        return;
    }
    let (base, cbase) = (LIVE.load(Ordering::Relaxed), COUNT.load(Ordering::Relaxed));
    let mut now = now;
    let mut seq = 10 * n as u32 + 10;
    for round in 0..churn.div_ceil(1000) {
        let mut seids = Vec::new();
        for k in 0..1000 {
            let i = n + round * 1000 + k;
            seq += 1;
            let out = n4.on_datagram(from, &request(i, seq), now);
            match Msg::parse(&out[0].data).map(|x| x.1) {
                Ok(Msg::SessionEstablishmentResponse(r)) => {
                    seids.push(r.up_fseid.unwrap_or_else(|| panic!("{r:?}")).seid)
                }
                other => panic!("{other:?}"),
            }
        }
        for up in seids {
            seq += 1;
            let del = msg::SessionDeletionRequest { other: vec![] };
            let out = n4.on_datagram(
                from,
                &msg::emit(&HeaderRepr::session(0, up, seq), &del),
                now,
            );
            assert_eq!(out.len(), 1);
        }
        now += Duration::from_secs(1);
        let _ = n4.on_timer(now);
        let _ = n4.take_events();
        if let Some(d) = &dp {
            std::thread::sleep(Duration::from_millis(60));
            d.borrow_mut().settle();
        }
    }
    eprintln!(
        "after {churn} sessions established and deleted beside them: {} bytes and {} allocations more ({:.2} bytes per churned session)",
        LIVE.load(Ordering::Relaxed) - base,
        COUNT.load(Ordering::Relaxed) - cbase,
        (LIVE.load(Ordering::Relaxed) - base) as f64 / churn as f64
    );
}
