//! Wiring: configuration to the N4 node and the data path, the event loop over the N4
//! socket and its timers, graceful shutdown on SIGTERM/SIGINT.

use std::net::SocketAddr;
use std::time::Instant;

use anyhow::Context;
use tokio::net::UdpSocket;

use upf::alloc::{TeidAllocator, UeIpPools};
use upf::fastpath::model::Model;
use upf::n4::{to_ntp, Event, N4Config, Out, N4};
use upf::procedures::{GtpuAddresses, Limits, Resources};
use upf::sessions::{unix_now, Sessions};

use crate::config::{Config, DatapathMode};

/// The UP Function Features this build supports (clause 8.2.25): only what works.
pub fn features() -> pfcp::ie::Flags {
    use pfcp::ie::up_function_features as f;
    // FTUP: F-TEID allocation. UEIP: UE address allocation. EMPU: End Marker handling is
    // on the UPF's side once the data path runs; not advertised until then.
    pfcp::ie::Flags::from_bits(&[f::FTUP, f::UEIP], 3)
}

pub fn build(cfg: &Config) -> anyhow::Result<N4> {
    let mut pools = UeIpPools::default();
    for p in &cfg.ue_pools {
        pools.add(&p.network_instance, p.prefix);
    }
    let n9 = cfg.gtpu.n9.as_ref();
    let res = Resources::new(
        TeidAllocator::new(cfg.gtpu.teid_range[0], cfg.gtpu.teid_range[1]),
        pools,
        GtpuAddresses {
            access_v4: cfg.gtpu.n3.ipv4,
            access_v6: cfg.gtpu.n3.ipv6,
            core_v4: n9.and_then(|e| e.ipv4),
            core_v6: n9.and_then(|e| e.ipv6),
        },
        Limits {
            max_pdrs: cfg.limits.max_pdrs_per_session,
            max_fars: cfg.limits.max_fars_per_session,
            max_qers: cfg.limits.max_qers_per_session,
            max_urrs: cfg.limits.max_urrs_per_session,
            max_sdf_filters: cfg.limits.max_sdf_filters_per_pdr,
        },
    );
    let fastpath: Box<dyn upf::fastpath::FastPath> = match cfg.datapath.mode {
        DatapathMode::None => Box::new(Model::new(cfg.limits.max_sessions * 4)),
    };
    let sessions = Sessions::new(res, fastpath, cfg.limits.max_sessions);
    let n4cfg = N4Config {
        node_id: cfg.node_id(),
        addr: cfg.n4.address,
        recovery_time_stamp: to_ntp(unix_now()),
        features: features(),
        allowed_peers: cfg.n4.allowed_peers.clone(),
        smf_peers: cfg.n4.associate_with.clone(),
        heartbeat_interval: cfg.n4.heartbeat_interval,
        t1: cfg.n4.t1,
        n1: cfg.n4.n1,
        cache_ttl: cfg.n4.response_cache_ttl,
        cache_max: cfg.n4.response_cache_max,
        graceful_release_period: cfg.n4.graceful_release_period,
    };
    Ok(N4::new(n4cfg, sessions))
}

async fn send_all(sock: &UdpSocket, outs: Vec<Out>) {
    for o in outs {
        if let Err(e) = sock.send_to(&o.data, o.to).await {
            warn!("n4: send to {}: {e}", o.to);
        }
    }
}

fn log_events(n4: &mut N4) {
    for e in n4.take_events() {
        match e {
            Event::AssociationUp(n) => info!("n4: association with {n} established"),
            Event::AssociationDown {
                node,
                reason,
                sessions,
            } => {
                info!("n4: association with {node} ended ({reason}); {sessions} session(s) deleted")
            }
            Event::PeerRestarted { node, sessions } => {
                info!("n4: {node} restarted; its {sessions} session(s) deleted")
            }
            Event::EndMarkers { seid, far_id, .. } => {
                debug!("n4: session {seid:#x} FAR {far_id}: end markers requested")
            }
            Event::DropBuffered { seid } => debug!("n4: session {seid:#x}: drop buffered packets"),
            Event::Rejected {
                peer,
                message_type,
                reason,
            } => info!(
                "n4: {} from {peer} rejected: {reason}",
                pfcp::message_type::name(message_type).unwrap_or("request")
            ),
        }
    }
}

pub fn run(cfg: Config) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    rt.block_on(serve(cfg))
}

async fn serve(cfg: Config) -> anyhow::Result<()> {
    let addr = SocketAddr::new(cfg.n4.address, cfg.n4.port);
    let sock = UdpSocket::bind(addr)
        .await
        .with_context(|| format!("n4.address: binding {addr}"))?;
    let mut n4 = build(&cfg)?;
    info!(
        "upfd {} up: node {}, N4 {addr}, datapath {:?}",
        env!("CARGO_PKG_VERSION"),
        cfg.node_id,
        cfg.datapath.mode
    );
    send_all(&sock, n4.start(Instant::now())).await;
    let mut buf = vec![0u8; 65536];
    let mut shutdown = std::pin::pin!(shutdown_signal());
    let mut releasing: Option<Instant> = None;
    loop {
        let deadline = n4
            .next_deadline()
            .unwrap_or_else(|| Instant::now() + std::time::Duration::from_secs(3600));
        tokio::select! {
            r = sock.recv_from(&mut buf) => {
                match r {
                    Ok((n, from)) => {
                        let outs = n4.on_datagram(from, &buf[..n], Instant::now());
                        send_all(&sock, outs).await;
                    }
                    Err(e) => warn!("n4: receive: {e}"),
                }
            }
            _ = tokio::time::sleep_until(deadline.into()) => {
                let outs = n4.on_timer(Instant::now());
                send_all(&sock, outs).await;
            }
            _ = &mut shutdown, if releasing.is_none() => {
                info!("shutting down: asking {} SMF(s) to release within {:?}", n4.associations().len(), cfg.n4.graceful_release_period);
                releasing = Some(Instant::now());
                let outs = n4.release_all(Instant::now());
                send_all(&sock, outs).await;
            }
        }
        log_events(&mut n4);
        if releasing.is_some() && n4.all_released() {
            info!("all associations released; exiting");
            return Ok(());
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
