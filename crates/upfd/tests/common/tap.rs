//! An N4 tap: a UDP relay between an SMF and upfd that decodes and records every PFCP
//! message both ways, so that a test can check each response's Cause whatever the SMF
//! makes of it (some SMF emulators ignore the Cause of some responses).
//!
//! The SMF sends to [`Tap::listen`]; the tap forwards from a socket of its own on
//! `up_side_ip` (choose the SMF's own IP, so that upfd sees the same peer address) to
//! upfd, and sends what upfd sends back to the address the SMF last sent from. The
//! datagrams themselves pass unchanged; only the UDP source port that upfd sees differs.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pfcp::message_type as mt;
use pfcp::{Ie, Message};

/// One datagram seen by the tap.
#[derive(Clone, Debug)]
pub struct Record {
    /// Since the tap started.
    pub at: Duration,
    /// True: SMF to upfd.
    pub from_cp: bool,
    pub message_type: u8,
    pub sequence: u32,
    pub seid: Option<u64>,
    /// The top-level Cause, if any.
    pub cause: Option<u8>,
    pub offending_ie: Option<u16>,
    /// Why the codec could not parse it, if it could not.
    pub parse_error: Option<String>,
    pub raw: Vec<u8>,
}

impl Record {
    fn new(at: Duration, from_cp: bool, raw: &[u8]) -> Record {
        let mut r = Record {
            at,
            from_cp,
            message_type: raw.get(1).copied().unwrap_or(0),
            sequence: 0,
            seid: None,
            cause: None,
            offending_ie: None,
            parse_error: None,
            raw: raw.to_vec(),
        };
        match Message::parse(raw) {
            Ok(m) => {
                r.sequence = m.header.sequence;
                r.seid = m.header.seid;
                for ie in &m.ies {
                    match ie {
                        Ie::Cause(c) => r.cause = Some(c.0),
                        Ie::OffendingIe(t) => r.offending_ie = Some(*t),
                        _ => {}
                    }
                }
            }
            Err(e) => r.parse_error = Some(e.to_string()),
        }
        r
    }

    pub fn name(&self) -> String {
        mt::name(self.message_type)
            .map(str::to_string)
            .unwrap_or_else(|| format!("message type {}", self.message_type))
    }

    /// The message decoded as JSON (or its octets in hex if it does not parse).
    pub fn describe(&self) -> String {
        let dir = if self.from_cp {
            "SMF -> upfd"
        } else {
            "upfd -> SMF"
        };
        let body = match Message::parse(&self.raw) {
            Ok(m) => serde_json::to_string(&m.to_json()).unwrap_or_default(),
            Err(e) => format!(
                "unparsable ({e}): {}",
                self.raw
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            ),
        };
        format!(
            "{dir} at {:.3}s: {} seq {}: {body}",
            self.at.as_secs_f64(),
            self.name(),
            self.sequence
        )
    }
}

/// A request and its response (if one came).
#[derive(Clone, Debug)]
pub struct Exchange {
    pub request: Record,
    pub response: Option<Record>,
}

pub struct Tap {
    /// Where the SMF is to send.
    pub listen: SocketAddr,
    /// The tap's address towards upfd (the peer address upfd sees).
    pub up_side: SocketAddr,
    records: Arc<Mutex<Vec<Record>>>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Tap {
    /// Listen on `listen` (port 0: any) for the SMF, relay to `upf` from `up_side_ip`.
    pub fn start(listen: SocketAddr, up_side_ip: IpAddr, upf: SocketAddr) -> Tap {
        let cp_sock = UdpSocket::bind(listen).expect("tap: binding the SMF side");
        let up_sock = UdpSocket::bind((up_side_ip, 0)).expect("tap: binding the upfd side");
        let tick = Some(Duration::from_millis(50));
        cp_sock.set_read_timeout(tick).unwrap();
        up_sock.set_read_timeout(tick).unwrap();
        let listen = cp_sock.local_addr().unwrap();
        let up_side = up_sock.local_addr().unwrap();
        let records: Arc<Mutex<Vec<Record>>> = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let smf: Arc<Mutex<Option<SocketAddr>>> = Arc::default();
        let t0 = Instant::now();
        let mut threads = Vec::new();
        {
            let (cp, up) = (cp_sock.try_clone().unwrap(), up_sock.try_clone().unwrap());
            let (records, stop, smf) = (records.clone(), stop.clone(), smf.clone());
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, from)) = cp.recv_from(&mut buf) else {
                        continue;
                    };
                    *smf.lock().unwrap() = Some(from);
                    records
                        .lock()
                        .unwrap()
                        .push(Record::new(t0.elapsed(), true, &buf[..n]));
                    let _ = up.send_to(&buf[..n], upf);
                }
            }));
        }
        {
            let (cp, up) = (cp_sock, up_sock);
            let (records, stop, smf) = (records.clone(), stop.clone(), smf);
            threads.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, from)) = up.recv_from(&mut buf) else {
                        continue;
                    };
                    if from != upf {
                        continue;
                    }
                    records
                        .lock()
                        .unwrap()
                        .push(Record::new(t0.elapsed(), false, &buf[..n]));
                    if let Some(to) = *smf.lock().unwrap() {
                        let _ = cp.send_to(&buf[..n], to);
                    }
                }
            }));
        }
        Tap {
            listen,
            up_side,
            records,
            stop,
            threads,
        }
    }

    pub fn records(&self) -> Vec<Record> {
        self.records.lock().unwrap().clone()
    }

    /// Every request, either way, with its response: same sequence number, the opposite
    /// direction, the response type (request type + 1), the first such after the request.
    pub fn exchanges(&self) -> Vec<Exchange> {
        let recs = self.records();
        let mut used = vec![false; recs.len()];
        let mut out = Vec::new();
        for (i, r) in recs.iter().enumerate() {
            if !mt::is_request(r.message_type) || r.parse_error.is_some() {
                continue;
            }
            let resp = (i + 1..recs.len()).find(|&j| {
                let s = &recs[j];
                !used[j]
                    && s.from_cp != r.from_cp
                    && s.sequence == r.sequence
                    && s.message_type == r.message_type + 1
            });
            if let Some(j) = resp {
                used[j] = true;
            }
            out.push(Exchange {
                request: r.clone(),
                response: resp.map(|j| recs[j].clone()),
            });
        }
        out
    }

    /// How many datagrams of each message type went each way, and the Causes of the
    /// responses, one line per (direction, type).
    pub fn summary(&self) -> String {
        use std::collections::BTreeMap;
        // (to the SMF, message type) -> (datagrams, Cause -> responses)
        type Counts = (usize, BTreeMap<Option<u8>, usize>);
        let mut m: BTreeMap<(bool, u8), Counts> = BTreeMap::new();
        for r in self.records() {
            let e = m.entry((!r.from_cp, r.message_type)).or_default();
            e.0 += 1;
            *e.1.entry(r.cause).or_default() += 1;
        }
        let mut s = String::new();
        for ((to_cp, t), (n, causes)) in m {
            let dir = if to_cp { "upfd -> SMF" } else { "SMF -> upfd" };
            let name = mt::name(t).unwrap_or("?");
            let causes: Vec<String> = causes
                .iter()
                .filter_map(|(c, n)| c.map(|c| format!("cause {c}: {n}")))
                .collect();
            s.push_str(&format!(
                "  {dir}  {name:<32} {n:>6}  {}\n",
                causes.join(", ")
            ));
        }
        s
    }

    /// How many requests of type `t` the SMF sent and how many of them upfd answered with
    /// Cause 1 (Request accepted).
    pub fn accepted(&self, t: u8) -> (usize, usize) {
        let ex: Vec<Exchange> = self
            .exchanges()
            .into_iter()
            .filter(|e| e.request.from_cp && e.request.message_type == t)
            .collect();
        let ok = ex
            .iter()
            .filter(|e| e.response.as_ref().and_then(|r| r.cause) == Some(1))
            .count();
        (ex.len(), ok)
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
