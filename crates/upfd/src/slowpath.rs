//! The slow path: what the XDP programs hand up to upfd.
//!
//! - GTP-U on UDP 2152 that is not a G-PDU for a known TEID: Echo Request (answered),
//!   G-PDUs for unknown TEIDs (Error Indication, rate-limited: never an amplifier, TS
//!   29.281 clause 7.3.1), Error Indications from peers (reported to the SMF, ERIR).
//! - Packets for buffering FARs (FAR BUFF, TS 29.244 clause 5.2.1), from the data path's
//!   event ring: kept per session within bounds, one Downlink Data Report per buffering
//!   period when the FAR asks (NOCP), released in order through the data path once the
//!   FAR forwards, discarded when it drops or the DL Buffering Duration passes.
//! - Uplink TCP segments of flows whose FAR has Redirect Information (TS 29.244 clause
//!   5.4.7): answered as the server would, SYN-ACK then `302 Found` to the Redirect
//!   Server Address (upf::redirect), the answers sent back through the data path as
//!   downlink packets; what is not HTTP is dropped and counted.
//! - End Markers on the old path when a FAR's outer header changes with SNDEM (clause
//!   5.9), and an Echo Request to each new GTP-U peer (path management; also makes the
//!   kernel resolve the peer's link-layer address before traffic needs it).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use pfcp::ie::DownlinkDataServiceInformation;
use pfcp::msg::{self, SessionReportRequest};
use upf::fastpath::{Buffered, Config as DataPathConfig, Event, Reinject};
use upf::n4::{Out, N4};
use upf::rules::interface;
use upf_bpf::compile::{tunnel, Addresses};

use crate::config::Buffering;

/// A token bucket in whole events per second.
#[derive(Debug)]
pub struct Bucket {
    per_sec: u64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    pub fn new(per_sec: u64) -> Self {
        Bucket {
            per_sec,
            tokens: per_sec as f64,
            last: Instant::now(),
        }
    }
    pub fn take(&mut self, now: Instant) -> bool {
        let dt = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.per_sec as f64).min(self.per_sec.max(1) as f64);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[derive(Debug)]
struct SessionBuffer {
    far_id: u32,
    packets: VecDeque<(Instant, Vec<u8>)>,
    notified: bool,
}

/// One session's buffer as [`SlowPath::buffers`] shows it.
#[derive(Debug, Clone)]
pub struct BufferInfo {
    pub seid: u64,
    pub far_id: u32,
    pub packets: usize,
    pub octets: usize,
    pub oldest: Option<std::time::Duration>,
    pub notified: bool,
}

/// Counters of the slow path, for /metrics.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    pub echo_requests_answered: u64,
    pub echo_requests_sent: u64,
    pub error_indications_sent: u64,
    pub error_indications_suppressed: u64,
    pub error_indications_received: u64,
    pub end_markers_sent: u64,
    pub buffered: u64,
    pub buffer_dropped_full: u64,
    pub buffer_dropped_expired: u64,
    pub buffer_discarded: u64,
    pub buffer_released: u64,
    pub downlink_data_reports: u64,
    pub gtpu_other: u64,
    /// Redirection (upf::redirect): answers sent, by kind.
    pub redirect_syn_acks: u64,
    pub redirect_responses: u64,
    pub redirect_fin_acks: u64,
    /// Segments of a redirected flow that were not HTTP (TLS, data before the handshake).
    pub redirect_not_http: u64,
    /// Segments whose session or FAR no longer redirects (changed since), or whose
    /// answer the data path did not take.
    pub redirect_dropped: u64,
    /// QoS monitoring (upf::qos_monitoring): packets sent to gNBs, answers read, and
    /// QoS flows that had no tunnel to a gNB to monitor.
    pub qos_monitoring_sent: u64,
    pub qos_monitoring_answers: u64,
    pub qos_monitoring_no_tunnel: u64,
}

/// The slow path's state: buffers, the Error Indication budget, GTP-U peers seen.
pub struct SlowPath {
    /// The N6 interface's address: released packets are sent through the data path as
    /// frames to it.
    n6_mac: [u8; 6],
    /// Our GTP-U addresses and how the data path picks a tunnel's family.
    gtpu: DataPathConfig,
    buffers: HashMap<u64, SessionBuffer>,
    total: usize,
    cfg: Buffering,
    ei: Bucket,
    peers: HashSet<IpAddr>,
    /// The GTP-U peers of the sessions' FARs and their side (true: the access network,
    /// N3), for GTP-U path QoS monitoring by interface type.
    peer_sides: HashMap<IpAddr, bool>,
    /// GTP-U path QoS monitoring (crate::path_qos), and its next regular look.
    path_qos: crate::path_qos::PathQos,
    path_qos_look: Instant,
    pub counters: Counters,
    /// Sessions whose volume quota ran out or volume threshold was reached since the
    /// last look (their URRs should be polled now).
    pub signalled: Vec<u64>,
    /// The key of the redirection endpoint's sequence numbers (upf::redirect).
    redirect_secret: u64,
}

/// GTP-U datagrams to send from the N3 socket.
pub type GtpuOut = Vec<(SocketAddr, Vec<u8>)>;

impl SlowPath {
    pub fn new(n6_mac: [u8; 6], gtpu: DataPathConfig, cfg: Buffering, ei_per_sec: u64) -> Self {
        SlowPath {
            n6_mac,
            gtpu,
            buffers: HashMap::new(),
            total: 0,
            cfg,
            ei: Bucket::new(ei_per_sec),
            peers: HashSet::new(),
            peer_sides: HashMap::new(),
            path_qos: Default::default(),
            path_qos_look: Instant::now(),
            counters: Counters::default(),
            signalled: Vec::new(),
            redirect_secret: {
                use std::hash::{BuildHasher, Hasher};
                // Keyed randomly per process, as std's hash maps are.
                let mut h = std::collections::hash_map::RandomState::new().build_hasher();
                h.write_u64(0x5eed);
                h.finish()
            },
        }
    }

    pub fn buffered_packets(&self) -> usize {
        self.total
    }

    /// Each session's buffer, for the API: SEID, FAR, packets, octets, how long the
    /// oldest packet has waited, whether the SMF was notified (Downlink Data Report).
    pub fn buffers(&self, now: Instant) -> Vec<BufferInfo> {
        let mut v: Vec<BufferInfo> = self
            .buffers
            .iter()
            .map(|(seid, b)| BufferInfo {
                seid: *seid,
                far_id: b.far_id,
                packets: b.packets.len(),
                octets: b.packets.iter().map(|(_, p)| p.len()).sum(),
                oldest: b
                    .packets
                    .front()
                    .map(|(t, _)| now.saturating_duration_since(*t)),
                notified: b.notified,
            })
            .collect();
        v.sort_by_key(|b| b.seid);
        v
    }

    /// An event of the data path but [`Event::Redirected`] (see [`SlowPath::redirect`],
    /// which sends through the data path).
    pub fn on_event(&mut self, e: Event, n4: &mut N4, now: Instant) -> Vec<Out> {
        match e {
            Event::Buffered(b) => self.buffer(b, n4, now),
            Event::Redirected(b) => {
                crate::warn!(
                    "slow path: a redirected segment of session {:#x} without the data path",
                    b.seid
                );
                self.counters.redirect_dropped += 1;
                Vec::new()
            }
            Event::QuotaExhausted { seid } | Event::ThresholdReached { seid } => {
                self.signalled.push(seid);
                Vec::new()
            }
            // Application Detection Information: START reports (TS 29.244 clause
            // 5.11.1); the flow's stop is found by the periodic poll (n4.rs).
            Event::AppStart { seid, app, flow } => n4.app_start(seid, &app, flow, now),
        }
    }

    /// Answer an uplink TCP segment of a redirected flow (upf::redirect) with the FAR's
    /// Redirect Information as it is now.
    pub fn redirect(&mut self, b: Buffered, n4: &N4, dp: &mut dyn Reinject, now: Instant) {
        use upf::redirect::{answer, location, Answer, Sent};
        let info = n4
            .sessions()
            .get(b.seid)
            .and_then(|s| s.fars.get(&b.far_id))
            .and_then(|f| f.forwarding.as_ref()?.redirect.clone());
        let v6 = b.packet.first().is_some_and(|v| v >> 4 == 6);
        let Some(loc) = info.and_then(|r| location(&r, v6)) else {
            self.counters.redirect_dropped += 1;
            return;
        };
        match answer(&b.packet, &loc, self.redirect_secret) {
            Answer::Send { what, packet } => {
                if let Err(e) = dp.reinject_n6(&self.n6_frame(&packet), now) {
                    crate::warn!(
                        "slow path: a redirection answer to session {:#x}: {e}",
                        b.seid
                    );
                    self.counters.redirect_dropped += 1;
                    return;
                }
                match what {
                    Sent::SynAck => self.counters.redirect_syn_acks += 1,
                    Sent::Redirect => self.counters.redirect_responses += 1,
                    Sent::FinAck => self.counters.redirect_fin_acks += 1,
                }
            }
            Answer::NotHttp => self.counters.redirect_not_http += 1,
            Answer::Nothing => {}
        }
    }

    /// An Ethernet frame to the N6 interface around IP packet `p` (as from the data
    /// network), for the N6 program.
    fn n6_frame(&self, p: &[u8]) -> Vec<u8> {
        let ethertype: u16 = if p.first().is_some_and(|v| v >> 4 == 6) {
            0x86dd
        } else {
            0x0800
        };
        let mut frame = Vec::with_capacity(14 + p.len());
        frame.extend_from_slice(&self.n6_mac);
        frame.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x06]);
        frame.extend_from_slice(&ethertype.to_be_bytes());
        frame.extend_from_slice(p);
        frame
    }

    fn limit_for(&self, n4: &N4, seid: u64) -> usize {
        let bar = n4
            .sessions()
            .get(seid)
            .and_then(|s| s.bars.values().next().cloned());
        let suggested = bar.and_then(|b| {
            b.dl_buffering_suggested_packet_count
                .map(|x| x as usize)
                .or(b.suggested_buffering_packets_count.map(|x| x as usize))
        });
        match suggested {
            Some(s) if s > 0 => s.min(self.cfg.packets_per_session),
            _ => self.cfg.packets_per_session,
        }
    }

    fn buffer(&mut self, e: Buffered, n4: &mut N4, now: Instant) -> Vec<Out> {
        let limit = self.limit_for(n4, e.seid);
        let b = self.buffers.entry(e.seid).or_insert(SessionBuffer {
            far_id: e.far_id,
            packets: VecDeque::new(),
            notified: false,
        });
        b.far_id = e.far_id;
        if b.packets.len() >= limit || self.total >= self.cfg.packets_total {
            self.counters.buffer_dropped_full += 1;
        } else {
            b.packets.push_back((now, e.packet));
            self.total += 1;
            self.counters.buffered += 1;
        }
        // One Downlink Data Report per buffering period (clause 5.2.4.2, NOCP).
        if e.nocp && !b.notified {
            b.notified = true;
            let pdr_id = e.pdr_id;
            let qfi = n4.sessions().get(e.seid).and_then(|s| {
                s.pdrs.get(&pdr_id).and_then(|p| {
                    p.qer_ids
                        .iter()
                        .find_map(|q| s.qers.get(q).and_then(|q| q.qfi))
                })
            });
            let report = SessionReportRequest::downlink_data(msg::DownlinkDataReport {
                pdr_ids: vec![pdr_id],
                downlink_data_service_information: qfi
                    .map(|q| DownlinkDataServiceInformation {
                        spare: 0,
                        ppi: None,
                        qfi: Some(q),
                    })
                    .into_iter()
                    .collect(),
                dl_data_packets_size: None,
                data_status: None,
                other: vec![],
            });
            self.counters.downlink_data_reports += 1;
            return n4.send_report(e.seid, report, now);
        }
        Vec::new()
    }

    /// After a modification: release what the FAR now forwards (through `dp`), discard
    /// what it drops.
    pub fn on_modified(&mut self, seid: u64, n4: &N4, dp: &mut dyn Reinject, now: Instant) {
        let Some(b) = self.buffers.get(&seid) else {
            return;
        };
        let action = n4
            .sessions()
            .get(seid)
            .and_then(|s| s.fars.get(&b.far_id).map(|f| f.action));
        match action {
            Some(a) if a.forw => self.release(seid, dp, now),
            Some(a) if a.buff => {}
            _ => self.discard(seid),
        }
    }

    /// Release a session's buffered packets, in order, through the N6 program: they are
    /// processed as if they arrived now, so the FAR that forwards them encapsulates them.
    fn release(&mut self, seid: u64, dp: &mut dyn Reinject, now: Instant) {
        let Some(b) = self.buffers.remove(&seid) else {
            return;
        };
        self.total -= b.packets.len();
        for (_, p) in b.packets {
            let frame = self.n6_frame(&p);
            match dp.reinject_n6(&frame, now) {
                Ok(_) => self.counters.buffer_released += 1,
                Err(e) => {
                    crate::warn!(
                        "slow path: releasing a buffered packet of session {seid:#x}: {e}"
                    );
                    self.counters.buffer_discarded += 1;
                }
            }
        }
    }

    pub fn discard(&mut self, seid: u64) {
        if let Some(b) = self.buffers.remove(&seid) {
            self.total -= b.packets.len();
            self.counters.buffer_discarded += b.packets.len() as u64;
        }
    }

    /// Drop what stayed longer than the DL Buffering Duration.
    pub fn expire(&mut self, n4: &N4, now: Instant) {
        let default = self.cfg.duration;
        let mut emptied = Vec::new();
        for (seid, b) in self.buffers.iter_mut() {
            let keep = n4
                .sessions()
                .get(*seid)
                .and_then(|s| s.bars.values().next().and_then(|b| b.dl_buffering_duration))
                .and_then(|t| t.seconds())
                .map(Duration::from_secs)
                .unwrap_or(default);
            while let Some((t, _)) = b.packets.front() {
                if now.saturating_duration_since(*t) < keep {
                    break;
                }
                b.packets.pop_front();
                self.total -= 1;
                self.counters.buffer_dropped_expired += 1;
            }
            if b.packets.is_empty() && !b.notified {
                emptied.push(*seid);
            }
        }
        for s in emptied {
            self.buffers.remove(&s);
        }
    }

    /// A datagram on the GTP-U socket.
    pub fn on_gtpu(
        &mut self,
        from: SocketAddr,
        local: IpAddr,
        data: &[u8],
        n4: &mut N4,
        now: Instant,
    ) -> (GtpuOut, Vec<Out>) {
        let mut gtp_out = Vec::new();
        let mut n4_out = Vec::new();
        let Ok(m) = gtpu::Message::parse(data) else {
            self.counters.gtpu_other += 1;
            return (gtp_out, n4_out);
        };
        match &m {
            gtpu::Message::EchoRequest { header, .. } => {
                if let Ok(r) = gtpu::Message::echo_response_to(header).to_vec() {
                    self.counters.echo_requests_answered += 1;
                    gtp_out.push((from, r));
                }
            }
            gtpu::Message::GPdu { header, .. } if let Some((qfi, t)) = qos_answer(header) => {
                // An answer to QoS monitoring (the data path hands those here).
                self.counters.qos_monitoring_answers += 1;
                let t4 = upf::qos_monitoring::ntp64(std::time::SystemTime::now());
                let d = upf::qos_monitoring::Delays::of(
                    t.dl_sending_time_stamp_repeated,
                    t.dl_received_time_stamp,
                    t.ul_sending_time_stamp,
                    t4,
                );
                n4_out.extend(n4.qos_answer(header.teid, qfi, d, now));
            }
            gtpu::Message::GPdu { header, .. } => {
                // The data path knows no such TEID (else the G-PDU would not be here).
                if self.ei.take(now) {
                    if let Ok(r) =
                        gtpu::Message::error_indication(header.teid, local, None).to_vec()
                    {
                        self.counters.error_indications_sent += 1;
                        gtp_out.push((from, r));
                    }
                } else {
                    self.counters.error_indications_suppressed += 1;
                }
            }
            gtpu::Message::EchoResponse { header, .. } => {
                let seq = header.sequence_number.unwrap_or(0);
                let reports =
                    self.path_qos
                        .echo_response(from.ip(), seq, now, std::time::SystemTime::now());
                for (node, r) in reports {
                    n4_out.extend(n4.send_path_qos_reports(&node, vec![r], now));
                }
            }
            gtpu::Message::ErrorIndication { body, .. } => {
                self.counters.error_indications_received += 1;
                n4_out.extend(self.report_error_indication(
                    body.teid_data_i,
                    body.peer_address,
                    n4,
                    now,
                ));
            }
            _ => self.counters.gtpu_other += 1,
        }
        (gtp_out, n4_out)
    }

    /// A peer says it does not know the TEID we send to: tell the SMF of the session
    /// whose FAR uses that F-TEID (Error Indication Report, clause 5.10).
    fn report_error_indication(
        &mut self,
        teid: u32,
        peer: IpAddr,
        n4: &mut N4,
        now: Instant,
    ) -> Vec<Out> {
        let seid = n4.sessions().iter().find_map(|s| {
            s.fars
                .values()
                .any(|f| {
                    f.forwarding
                        .as_ref()
                        .and_then(|fw| fw.outer_header_creation)
                        .is_some_and(|o| {
                            o.teid == Some(teid)
                                && (o.ipv4.map(IpAddr::V4) == Some(peer)
                                    || o.ipv6.map(IpAddr::V6) == Some(peer))
                        })
                })
                .then_some(s.up_seid)
        });
        let Some(seid) = seid else {
            return Vec::new();
        };
        let (v4, v6) = match peer {
            IpAddr::V4(a) => (Some(a), None),
            IpAddr::V6(a) => (None, Some(a)),
        };
        let report = SessionReportRequest::error_indication(msg::ErrorIndicationReport {
            remote_fteids: vec![pfcp::ie::FTeid::new(teid, v4, v6)],
            other: vec![],
        });
        n4.send_report(seid, report, now)
    }

    /// The tunnel a FAR's forwarding creates (its peer, TEID, port and our source
    /// address), if it creates one.
    fn tunnel_of(&self, fw: &upf::rules::Forwarding) -> Option<upf_bpf::compile::Tunnel> {
        let o = fw.outer_header_creation?;
        let ni = fw.network_instance.as_deref();
        tunnel(
            &Addresses::from(&self.gtpu),
            fw.destination_interface,
            ni,
            &o,
        )
    }

    /// The QoS monitoring packets due (TS 23.501 clause 5.33.3.2): for each (session,
    /// QFI) N4 names, a G-PDU without a user packet whose DL PDU Session Container has
    /// QMP and the DL Sending Time Stamp (TS 38.415 clause 5.5.2.1), on the tunnel of
    /// the session's downlink FAR for that QFI (the FAR of a PDR whose QER has it, else
    /// the first that tunnels to the access network).
    pub fn qos_probes(&mut self, n4: &mut N4, now: Instant) -> GtpuOut {
        let mut out = Vec::new();
        for (seid, qfi) in n4.qos_probes(now) {
            let Some(s) = n4.sessions().get(seid) else {
                continue;
            };
            let Some(t) = downlink_tunnel(s, qfi).and_then(|fw| self.tunnel_of(fw)) else {
                self.counters.qos_monitoring_no_tunnel += 1;
                continue;
            };
            let mut psc = gtpu::PduSessionContainer::dl(qfi);
            if let gtpu::PduSessionContainer::Dl(d) = &mut psc {
                d.dl_sending_time_stamp =
                    Some(upf::qos_monitoring::ntp64(std::time::SystemTime::now()));
            }
            let mut m = gtpu::Message::g_pdu(t.teid, &[]);
            m.header_mut()
                .extension_headers
                .push(gtpu::ExtensionHeader::PduSessionContainer(psc));
            let mut buf = [0u8; 64];
            if let Ok(n) = m.emit(&mut buf) {
                self.counters.qos_monitoring_sent += 1;
                out.push((SocketAddr::new(t.peer, t.port), buf[..n].to_vec()));
            }
        }
        out
    }

    /// GTP-U path QoS monitoring (crate::path_qos): N4's controls taken when they
    /// changed, the Echo Requests due sent, the periodic reports due sent.
    pub fn path_qos_tick(&mut self, n4: &mut N4, now: Instant) -> (GtpuOut, Vec<Out>) {
        let (generation, controls) = n4.path_qos_controls();
        // A look at least once a second: an Association Update may change the controls,
        // a new session bring a new peer.
        self.path_qos_look = now + Duration::from_secs(1);
        if !self.path_qos.is_current(generation) {
            debug!(
                "GTP-U path QoS monitoring: {} association(s) ask for it (generation {generation})",
                controls.len()
            );
            self.path_qos.set(generation, controls);
        }
        let wall = std::time::SystemTime::now();
        let mut gtp_out = Vec::new();
        for (peer, seq) in self.path_qos.due_echoes(&self.peer_sides, now, wall) {
            if let Ok(m) = gtpu::Message::echo_request(seq).to_vec() {
                self.counters.echo_requests_sent += 1;
                gtp_out.push((SocketAddr::new(peer, 2152), m));
            }
        }
        let mut n4_out = Vec::new();
        for (node, r) in self.path_qos.due_reports(now, wall) {
            n4_out.extend(n4.send_path_qos_reports(&node, vec![r], now));
        }
        (gtp_out, n4_out)
    }

    /// When GTP-U path QoS monitoring next has something to do: an Echo Request or a
    /// report due, or its regular look (a fixed time: a deadline computed from now at
    /// every turn of the event loop would never come while the loop is busy).
    pub fn path_qos_next_due(&self) -> Instant {
        self.path_qos
            .next_due()
            .map_or(self.path_qos_look, |t| t.min(self.path_qos_look))
    }

    /// End Marker packets on the old path (clause 5.9), over the family the data path
    /// used for it.
    pub fn end_markers(&mut self, old: &pfcp::ie::OuterHeaderCreation) -> GtpuOut {
        let Some(t) = tunnel(&Addresses::from(&self.gtpu), interface::ACCESS, None, old) else {
            return Vec::new();
        };
        if old.teid.is_none() {
            return Vec::new();
        }
        // Header only: version 1, PT 1, type 254, length 0.
        let mut m = vec![0x30, 254, 0, 0];
        m.extend_from_slice(&t.teid.to_be_bytes());
        self.counters.end_markers_sent += 1;
        vec![(SocketAddr::new(t.peer, t.port), m)]
    }

    /// Echo Requests to GTP-U peers of a session not seen before.
    pub fn new_peers(&mut self, n4: &N4, seid: u64) -> GtpuOut {
        let mut out = Vec::new();
        let Some(s) = n4.sessions().get(seid) else {
            return out;
        };
        for fw in s.fars.values().filter_map(|f| f.forwarding.as_ref()) {
            let Some(t) = self.tunnel_of(fw) else {
                continue;
            };
            let a = t.peer;
            if !self.gtpu.local.contains(&a) && !a.is_unspecified() {
                self.peer_sides
                    .insert(a, fw.destination_interface == interface::ACCESS);
            }
            if !self.gtpu.local.contains(&a) && !a.is_unspecified() && self.peers.insert(a) {
                let seq = self.path_qos.next_seq();
                if let Ok(m) = gtpu::Message::echo_request(seq).to_vec() {
                    self.counters.echo_requests_sent += 1;
                    out.push((SocketAddr::new(a, 2152), m));
                }
            }
        }
        out
    }
}

/// The QFI and time stamps of a G-PDU's UL PDU Session Container with QMP (TS 38.415
/// clause 5.5.2.2): a gNB's answer to QoS monitoring.
fn qos_answer(h: &gtpu::Header<'_>) -> Option<(u8, gtpu::UlTimeStamps)> {
    h.extension_headers.iter().find_map(|e| match e {
        gtpu::ExtensionHeader::PduSessionContainer(gtpu::PduSessionContainer::Ul(u)) => {
            u.qos_monitoring.map(|t| (u.qfi, t))
        }
        _ => None,
    })
}

/// The forwarding of session `s`'s downlink towards the access network for QoS flow
/// `qfi`: the FAR of a downlink PDR one of whose QERs has that QFI, else of the first
/// downlink PDR whose FAR tunnels to the access network.
fn downlink_tunnel(s: &upf::rules::Session, qfi: u8) -> Option<&upf::rules::Forwarding> {
    let tunnels = |p: &&upf::rules::Pdr| {
        p.far_id
            .and_then(|f| s.fars.get(&f))
            .and_then(|f| f.forwarding.as_ref())
            .filter(|fw| {
                fw.destination_interface == interface::ACCESS && fw.outer_header_creation.is_some()
            })
    };
    let pdrs = s.pdrs_by_precedence();
    let with_qfi = pdrs.iter().filter(|p| {
        p.qer_ids
            .iter()
            .any(|q| s.qers.get(q).is_some_and(|q| q.qfi == Some(qfi)))
    });
    with_qfi
        .filter_map(tunnels)
        .next()
        .or_else(|| pdrs.iter().filter_map(tunnels).next())
}

#[cfg(test)]
mod tests {
    //! Buffering without XDP: the session is installed in the reference model, whose
    //! verdicts stand for what the programs hand up, and released packets go through it.

    use std::cell::RefCell;
    use std::net::{Ipv4Addr, SocketAddr};
    use std::rc::Rc;

    use pfcp::header::HeaderRepr;
    use pfcp::ie::{CauseValue, NodeId};
    use pfcp::msg::{self, Msg};
    use upf::alloc::{TeidAllocator, UeIpPools};
    use upf::fastpath::{Egress, Event};
    use upf::model::{Model, Verdict};
    use upf::n4::{N4Config, N4};
    use upf::procedures::{GtpuAddresses, Limits, Resources};
    use upf::sessions::Sessions;
    use upfbench::smf::{SmfConfig, TeidMode};

    use super::*;

    const N3: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 7);
    const GNB: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 1);
    const UPF: &str = "127.0.0.7:8805";

    fn data_path_config() -> DataPathConfig {
        let mut cfg = DataPathConfig {
            local: vec![IpAddr::V4(N3)],
            n3_v4: Some(N3),
            ..Default::default()
        };
        let to_gnb = Egress {
            ifindex: 30,
            mtu: 1500,
            smac: [2, 0, 0, 0, 0, 3],
            dmac: [2, 0, 0, 0, 1, 3],
        };
        cfg.neigh.insert(IpAddr::V4(GNB), to_gnb);
        cfg
    }

    fn node(model: Rc<RefCell<Model>>) -> N4 {
        let mut pools = UeIpPools::default();
        pools.add("internet", "10.45.0.0/24".parse().unwrap());
        let res = Resources::new(
            TeidAllocator::new(1, 0xffff_ffff),
            pools,
            GtpuAddresses {
                access_v4: Some(N3),
                ..Default::default()
            },
            Limits::default(),
        );
        let cfg = N4Config {
            node_id: NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 7)),
            addr: UPF.parse::<SocketAddr>().unwrap().ip(),
            recovery_time_stamp: 3_900_000_000,
            features: pfcp::ie::Flags::from_bits(&[pfcp::ie::up_function_features::FTUP], 3),
            allowed_peers: vec![],
            smf_peers: vec![],
            heartbeat_interval: Duration::from_secs(60),
            t1: Duration::from_secs(1),
            n1: 2,
            cache_ttl: Duration::from_secs(10),
            cache_max: 1000,
            graceful_release_period: Duration::from_secs(10),
            strict: false,
        };
        N4::new(cfg, Sessions::new(res, Box::new(model), 100))
    }

    /// Send a request to the node; its one response.
    fn ask(n4: &mut N4, from: SocketAddr, h: HeaderRepr, m: &impl msg::Body) -> Msg {
        let out = n4.on_datagram(from, &msg::emit(&h, m), Instant::now());
        assert_eq!(out.len(), 1, "one response");
        Msg::parse(&out[0].data).expect("a response").1
    }

    /// A downlink packet to the UE from the data network: UDP, `n` octets of payload.
    fn downlink_frame(ue: Ipv4Addr, n: u8) -> Vec<u8> {
        let ip = capture::ip_udp_packet(
            IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7)),
            IpAddr::V4(ue),
            5000,
            6000,
            &vec![n; usize::from(n)],
        );
        let mut f = vec![2, 0, 0, 0, 9, 9, 2, 0, 0, 0, 8, 8, 0x08, 0x00];
        f.extend(ip);
        f
    }

    #[tokio::test]
    async fn buffered_packets_are_reported_once_then_released_in_order() {
        let model = Rc::new(RefCell::new(Model::new(1024, data_path_config())));
        let mut n4 = node(model.clone());
        let mut slow = SlowPath::new(
            [2, 0, 0, 0, 0, 6],
            data_path_config(),
            Buffering::default(),
            10,
        );
        // The SMF emulator's session: downlink FAR BUFF|NOCP, then FORW to the gNB.
        let mut c = SmfConfig::new(UPF.parse().unwrap());
        c.bind = "127.0.0.4:0".parse().unwrap();
        c.teid = TeidMode::Choose;
        c.dl_buffer = true;
        c.gnb = GNB;
        let smf = upfbench::smf::Smf::connect(c)
            .await
            .expect("bind on loopback");
        let from: SocketAddr = "127.0.0.4:8805".parse().unwrap();
        let setup = msg::AssociationSetupRequest::new(NodeId::Ipv4(Ipv4Addr::new(127, 0, 0, 4)), 1);
        match ask(&mut n4, from, HeaderRepr::node(0, 1), &setup) {
            Msg::AssociationSetupResponse(r) => assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED),
            m => panic!("{m:?}"),
        }
        let s = upfbench::smf::Session {
            index: 0,
            cp_seid: 1,
            ue_ip: Ipv4Addr::new(10, 45, 0, 2),
            gnb_teid: 0x77,
            up_fseid: None,
            n3_fteid: None,
            state: upfbench::smf::SessionState::Failed,
        };
        let up_seid = match ask(
            &mut n4,
            from,
            HeaderRepr::session(0, 0, 2),
            &smf.establishment_request(&s),
        ) {
            Msg::SessionEstablishmentResponse(r) => {
                assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED, "{r:?}");
                r.up_fseid.expect("UP F-SEID").seid
            }
            m => panic!("{m:?}"),
        };

        // Three packets the data path hands up: one Downlink Data Report, for the
        // downlink PDR with the QER's QFI.
        let mut reports = Vec::new();
        for n in 1..=3 {
            let v = model
                .borrow_mut()
                .process_n6(&downlink_frame(s.ue_ip, n), 1_000_000);
            let Verdict::Buffer(b) = v else {
                panic!("buffered, not {v:?}");
            };
            assert_eq!((b.seid, b.pdr_id, b.nocp), (up_seid, 2, true));
            reports.extend(slow.on_event(Event::Buffered(b), &mut n4, Instant::now()));
        }
        assert_eq!((slow.buffered_packets(), slow.counters.buffered), (3, 3));
        assert_eq!(reports.len(), 1, "one report per buffering period");
        let Msg::SessionReportRequest(r) = Msg::parse(&reports[0].data).unwrap().1 else {
            panic!("a Session Report Request");
        };
        let dldr = r.downlink_data_report.expect("DLDR");
        assert_eq!(dldr.pdr_ids, vec![2]);
        assert_eq!(dldr.downlink_data_service_information[0].qfi, Some(1));

        // The FAR now forwards to the gNB: the packets go out through the data path, in
        // the order they came, in G-PDUs to the gNB.
        let m = smf.modification_request(&s);
        match ask(&mut n4, from, HeaderRepr::session(0, up_seid, 3), &m) {
            Msg::SessionModificationResponse(r) => {
                assert_eq!(r.cause, CauseValue::REQUEST_ACCEPTED)
            }
            m => panic!("{m:?}"),
        }
        slow.on_modified(up_seid, &n4, &mut *model.borrow_mut(), Instant::now());
        let sent = model.borrow_mut().take_injected();
        assert_eq!(sent.len(), 3);
        for (i, v) in sent.iter().enumerate() {
            let Verdict::Redirect { ifindex: 30, frame } = v else {
                panic!("packet {i} to the gNB, not {v:?}");
            };
            let gpdu = gtpu::parse_gpdu(&frame[14 + 28..]).expect("a G-PDU");
            assert_eq!(gpdu.teid, s.gnb_teid);
            let payload = gpdu.payload(&frame[14 + 28..]);
            assert_eq!(payload.len(), 28 + i + 1, "packet {i} in order");
        }
        assert_eq!(
            (slow.buffered_packets(), slow.counters.buffer_released),
            (0, 3)
        );
    }
}
