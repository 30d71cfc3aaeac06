//! Parses every GTP-U message (UDP port 2152) of the real captures in the shared interop
//! directory, checks that re-emitting each gives back the same octets and that the data
//! path helper agrees with the full parser, and prints counts per file.
//!
//! The directory is `$UPF_INTEROP_PCAPS`, else `../../../shared/interop/pcaps` from
//! this crate. When it is absent the test says so and passes.
//!
//! The pcap/pcapng reader below is deliberately small and self-contained: SHB, IDB,
//! EPB, SPB (and the obsolete PB) blocks in either byte order; link types NULL (0),
//! Ethernet (1), raw IP (12, 101, 228, 229), BSD loopback (108), Linux SLL (113) and
//! SLL2 (276); IPv4 (with fragment reassembly, as tshark does) and IPv6.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};

use gtpu::{parse_gpdu, GpduInfo, Message};

const GTPU_PORT: u16 = 2152;

/// GTP-U datagrams per file as tshark 4.0 counts them (`-Y udp.port==2152`, outer IPv4
/// fragments reassembled), to check that the reader below misses none.
const TSHARK_COUNTS: &[(&str, usize)] = &[
    ("open5gs-5g-roaming-hr.pcapng", 18),
    ("open5gs-5g-roaming-lbo.pcapng", 10),
    ("open5gs-srsenb-4g-cups.pcapng", 1844),
    ("open5gs-testattach-4g-cups.pcapng", 12),
    ("open5gs-testcups-4g-endmarker.pcapng", 14),
    ("open5gs-testregistration.pcapng", 62),
    ("open5gs-volte-gtpu.pcapng", 268),
];

/// G-PDUs whose Length field announces more octets than the UDP payload holds, and
/// what it says. Open5GS's test gNB sent this one with Length 2096 in a 200-octet UDP
/// payload holding the whole header and a complete IPv6 packet; the Open5GS UPF
/// forwarded it (the echo reply is frame 140) and tshark decodes it. The parser accepts
/// such G-PDUs (TS 29.281 clause 5.1 defines the Length; see
/// `gtpu::Ignored::declared_length`) and keeps the Length for re-emission. Any other
/// datagram with this quirk is reported, so that the tolerance stays visible.
const LENGTH_PAST_THE_PAYLOAD: &[(&str, usize, u16)] =
    &[("open5gs-testregistration.pcapng", 139, 2096)];

fn pcap_dir() -> PathBuf {
    match std::env::var_os("UPF_INTEROP_PCAPS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/interop/pcaps"),
    }
}

/// One captured frame: link type and octets.
struct Frame {
    number: usize,
    linktype: u32,
    data: Vec<u8>,
}

fn u16_at(d: &[u8], at: usize, le: bool) -> Option<u16> {
    let b: [u8; 2] = d.get(at..at + 2)?.try_into().ok()?;
    Some(if le {
        u16::from_le_bytes(b)
    } else {
        u16::from_be_bytes(b)
    })
}

fn u32_at(d: &[u8], at: usize, le: bool) -> Option<u32> {
    let b: [u8; 4] = d.get(at..at + 4)?.try_into().ok()?;
    Some(if le {
        u32::from_le_bytes(b)
    } else {
        u32::from_be_bytes(b)
    })
}

fn be16(d: &[u8], at: usize) -> Option<u16> {
    u16_at(d, at, false)
}

/// Reads a pcap or pcapng file into frames. Panics with a message on a malformed file:
/// these are test inputs.
fn read_capture(bytes: &[u8]) -> Vec<Frame> {
    let magic = u32_at(bytes, 0, false).expect("capture shorter than 4 octets");
    match magic {
        0xa1b2_c3d4 | 0xa1b2_3c4d => read_pcap(bytes, false),
        0xd4c3_b2a1 | 0x4d3c_b2a1 => read_pcap(bytes, true),
        0x0a0d_0d0a => read_pcapng(bytes),
        other => panic!("not a pcap or pcapng file (magic {other:#010x})"),
    }
}

fn read_pcap(bytes: &[u8], le: bool) -> Vec<Frame> {
    let linktype = u32_at(bytes, 20, le).expect("pcap global header") & 0x0fff_ffff;
    let mut frames = Vec::new();
    let mut at = 24;
    while at < bytes.len() {
        let incl = u32_at(bytes, at + 8, le).expect("pcap record header") as usize;
        let data = bytes
            .get(at + 16..at + 16 + incl)
            .expect("pcap record data");
        frames.push(Frame {
            number: frames.len() + 1,
            linktype,
            data: data.to_vec(),
        });
        at += 16 + incl;
    }
    frames
}

fn read_pcapng(bytes: &[u8]) -> Vec<Frame> {
    let mut frames = Vec::new();
    let mut le = true;
    let mut interfaces: Vec<u32> = Vec::new();
    let mut at = 0;
    while at + 12 <= bytes.len() {
        let block_type = u32_at(bytes, at, le).expect("block type");
        if block_type == 0x0a0d_0d0a {
            // Section Header Block: byte-order magic decides the endianness.
            le = match bytes.get(at + 8..at + 12) {
                Some([0x4d, 0x3c, 0x2b, 0x1a]) => true,
                Some([0x1a, 0x2b, 0x3c, 0x4d]) => false,
                other => panic!("bad pcapng byte-order magic {other:02x?}"),
            };
            interfaces.clear();
        }
        let total = u32_at(bytes, at + 4, le).expect("block length") as usize;
        assert!(
            total >= 12 && total & 3 == 0,
            "bad pcapng block length {total} at {at}"
        );
        let block = bytes
            .get(at..at + total)
            .expect("pcapng block runs past the file");
        let body_end = total - 4;
        let mut push = |interface: usize, data: &[u8]| {
            let linktype = *interfaces
                .get(interface)
                .unwrap_or_else(|| panic!("packet for undeclared interface {interface}"));
            frames.push(Frame {
                number: frames.len() + 1,
                linktype,
                data: data.to_vec(),
            });
        };
        match block_type {
            // Interface Description Block.
            1 => interfaces.push(u32::from(u16_at(block, 8, le).expect("IDB link type"))),
            // Enhanced Packet Block.
            6 => {
                let interface = u32_at(block, 8, le).expect("EPB interface") as usize;
                let caplen = u32_at(block, 20, le).expect("EPB caplen") as usize;
                let data = block
                    .get(28..28 + caplen)
                    .filter(|_| 28 + caplen <= body_end);
                push(interface, data.expect("EPB data"));
            }
            // Simple Packet Block: interface 0, captured length from the block length.
            3 => {
                let orig = u32_at(block, 8, le).expect("SPB length") as usize;
                let caplen = orig.min(body_end - 12);
                push(0, &block[12..12 + caplen]);
            }
            // Obsolete Packet Block.
            2 => {
                let interface = usize::from(u16_at(block, 8, le).expect("PB interface"));
                let caplen = u32_at(block, 20, le).expect("PB caplen") as usize;
                let data = block
                    .get(28..28 + caplen)
                    .filter(|_| 28 + caplen <= body_end);
                push(interface, data.expect("PB data"));
            }
            _ => {}
        }
        at += total;
    }
    frames
}

/// The network-layer packet of a frame and its version, per link type.
fn network_layer(linktype: u32, d: &[u8]) -> Option<&[u8]> {
    let (ethertype_or_family, payload): (u32, &[u8]) = match linktype {
        // Raw IP: the version nibble says which.
        12 | 101 | 228 | 229 => return Some(d),
        // BSD loopback: 4-octet address family, host (NULL) or network (LOOP) order.
        0 | 108 => {
            let family = if linktype == 108 {
                u32_at(d, 0, false)?
            } else {
                let le = u32_at(d, 0, true)?;
                if le < 256 {
                    le
                } else {
                    u32_at(d, 0, false)?
                }
            };
            let payload = d.get(4..)?;
            return match family {
                2 | 24 | 28 | 30 => Some(payload),
                _ => None,
            };
        }
        // Ethernet, skipping VLAN tags.
        1 => {
            let mut at = 12;
            let mut ethertype = be16(d, at)?;
            while ethertype == 0x8100 || ethertype == 0x88a8 {
                at += 4;
                ethertype = be16(d, at)?;
            }
            (u32::from(ethertype), d.get(at + 2..)?)
        }
        // Linux cooked v1: protocol at 14, 16-octet header.
        113 => (u32::from(be16(d, 14)?), d.get(16..)?),
        // Linux cooked v2: protocol at 0, 20-octet header.
        276 => (u32::from(be16(d, 0)?), d.get(20..)?),
        _ => return None,
    };
    match ethertype_or_family {
        0x0800 | 0x86dd => Some(payload),
        _ => None,
    }
}

/// (source, destination, identification, protocol) of an IPv4 datagram.
type FragmentKey = ([u8; 4], [u8; 4], u16, u8);
/// (offset, more fragments, payload) of an IPv4 fragment.
type Fragment = (usize, bool, Vec<u8>);

/// Reassembles IPv4 fragments keyed by (src, dst, id, protocol).
#[derive(Default)]
struct Reassembler {
    pending: HashMap<FragmentKey, Vec<Fragment>>,
}

impl Reassembler {
    /// Returns the whole IPv4 payload and protocol once all fragments are in.
    fn push(&mut self, ip: &[u8]) -> Option<(u8, Vec<u8>)> {
        let ihl = usize::from(ip.first()? & 0x0f) * 4;
        let total = usize::from(be16(ip, 2)?).min(ip.len());
        let flags_offset = be16(ip, 6)?;
        let more = flags_offset & 0x2000 != 0;
        let offset = usize::from(flags_offset & 0x1fff) * 8;
        let protocol = ip[9];
        let payload = ip.get(ihl..total)?;
        if !more && offset == 0 {
            return Some((protocol, payload.to_vec()));
        }
        let key = (
            ip[12..16].try_into().ok()?,
            ip[16..20].try_into().ok()?,
            be16(ip, 4)?,
            protocol,
        );
        let parts = self.pending.entry(key).or_default();
        parts.push((offset, more, payload.to_vec()));
        parts.sort_by_key(|p| p.0);
        let mut next = 0;
        for (offset, more, data) in parts.iter() {
            if *offset != next {
                return None;
            }
            next += data.len();
            if !more {
                let whole = parts.iter().flat_map(|p| p.2.iter().copied()).collect();
                self.pending.remove(&key);
                return Some((protocol, whole));
            }
        }
        None
    }
}

/// The UDP payload of an IP packet if it is UDP to or from the GTP-U port.
fn gtpu_datagram(reassembler: &mut Reassembler, ip: &[u8]) -> Option<Vec<u8>> {
    let (protocol, l4) = match ip.first()? >> 4 {
        4 => reassembler.push(ip)?,
        6 => {
            let payload_len = usize::from(be16(ip, 4)?);
            let mut next = ip[6];
            let mut l4 = ip.get(40..(40 + payload_len).min(ip.len()))?;
            // Hop-by-hop, routing and destination options; a fragment header ends the
            // walk (no IPv6 reassembly: none of the captures needs it).
            while matches!(next, 0 | 43 | 60) {
                let len = (usize::from(*l4.get(1)?) + 1) * 8;
                next = l4[0];
                l4 = l4.get(len..)?;
            }
            (next, l4.to_vec())
        }
        _ => return None,
    };
    if protocol != 17 {
        return None;
    }
    let (src, dst) = (be16(&l4, 0)?, be16(&l4, 2)?);
    if src != GTPU_PORT && dst != GTPU_PORT {
        return None;
    }
    let udp_len = usize::from(be16(&l4, 4)?).clamp(8, l4.len());
    Some(l4[8..udp_len].to_vec())
}

#[derive(Default)]
struct Counts {
    frames: usize,
    datagrams: usize,
    parsed: usize,
    with_length_past_the_payload: usize,
    by_type: BTreeMap<&'static str, usize>,
    with_psc: usize,
    with_trailing_octets: usize,
    errors: Vec<String>,
}

fn check_datagram(file: &str, frame: usize, udp_payload: &[u8], counts: &mut Counts) {
    counts.datagrams += 1;
    let message = match Message::parse(udp_payload) {
        Ok(m) => m,
        Err(e) => {
            counts
                .errors
                .push(format!("{file} frame {frame}: parse: {e} ({e:?})"));
            return;
        }
    };
    counts.parsed += 1;
    *counts.by_type.entry(message.name()).or_default() += 1;
    if message.header().qfi().is_some() {
        counts.with_psc += 1;
    }
    let length = u16::from_be_bytes([udp_payload[2], udp_payload[3]]);
    let expected_declared = LENGTH_PAST_THE_PAYLOAD
        .iter()
        .find(|(f, n, _)| *f == file && *n == frame)
        .map(|(_, _, length)| *length);
    let declared = message.header().ignored.declared_length;
    if declared != expected_declared {
        counts.errors.push(format!(
            "{file} frame {frame}: declared_length {declared:?}, expected \
             {expected_declared:?} (Length {length}, UDP payload {} octets)",
            udp_payload.len()
        ));
    }
    if declared.is_some() {
        counts.with_length_past_the_payload += 1;
    }
    // The message: `8 + Length` octets, or the whole UDP payload when the Length runs
    // past it.
    let message_len = (8 + usize::from(length)).min(udp_payload.len());
    if udp_payload.len() > message_len {
        counts.with_trailing_octets += 1;
    }
    match message.to_vec() {
        Ok(out) if out == udp_payload[..message_len] => {}
        Ok(out) => counts.errors.push(format!(
            "{file} frame {frame}: re-emit differs\n  in:  {:02x?}\n  out: {:02x?}",
            &udp_payload[..message_len],
            out
        )),
        Err(e) => counts
            .errors
            .push(format!("{file} frame {frame}: emit: {e}")),
    }
    if let Err(e) = serde_json::to_string(&message) {
        counts
            .errors
            .push(format!("{file} frame {frame}: JSON: {e}"));
    }
    if let Message::GPdu { header, t_pdu } = &message {
        let expected = GpduInfo {
            teid: header.teid,
            qfi: header.qfi(),
            pdu_type: header.extension_headers.iter().find_map(|h| match h {
                gtpu::ExtensionHeader::PduSessionContainer(gtpu::PduSessionContainer::Dl(_)) => {
                    Some(0)
                }
                gtpu::ExtensionHeader::PduSessionContainer(gtpu::PduSessionContainer::Ul(_)) => {
                    Some(1)
                }
                _ => None,
            }),
            payload_offset: message_len - t_pdu.0.len(),
            payload_len: t_pdu.0.len(),
        };
        match parse_gpdu(udp_payload) {
            Ok(info) if info == expected => {}
            other => counts.errors.push(format!(
                "{file} frame {frame}: parse_gpdu gave {other:?}, expected {expected:?}"
            )),
        }
    }
}

#[test]
fn every_gtpu_message_in_the_captures_round_trips() {
    let dir = pcap_dir();
    if !dir.is_dir() {
        println!("interop pcaps absent at {}: skipping", dir.display());
        return;
    }
    let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
        .expect("read pcap dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no captures in {}", dir.display());

    let mut total = Counts::default();
    let mut all_errors = Vec::new();
    for path in &paths {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = fs::read(path).expect("read capture");
        let frames = read_capture(&bytes);
        let mut counts = Counts {
            frames: frames.len(),
            ..Counts::default()
        };
        let mut reassembler = Reassembler::default();
        for frame in &frames {
            let Some(ip) = network_layer(frame.linktype, &frame.data) else {
                continue;
            };
            if let Some(udp_payload) = gtpu_datagram(&mut reassembler, ip) {
                check_datagram(&name, frame.number, &udp_payload, &mut counts);
            }
        }
        println!(
            "{name}: {} frames, {} GTP-U datagrams, {} parsed and re-emitted identically, \
             {} G-PDUs with a Length past the UDP payload, {} with a PDU Session Container, \
             {} with octets after the message, {} errors; {:?}",
            counts.frames,
            counts.datagrams,
            counts.parsed,
            counts.with_length_past_the_payload,
            counts.with_psc,
            counts.with_trailing_octets,
            counts.errors.len(),
            counts.by_type,
        );
        if let Some((_, expected)) = TSHARK_COUNTS.iter().find(|(f, _)| *f == name) {
            assert_eq!(
                counts.datagrams, *expected,
                "{name}: GTP-U datagrams found differ from tshark's count"
            );
        }
        total.frames += counts.frames;
        total.datagrams += counts.datagrams;
        total.parsed += counts.parsed;
        total.with_length_past_the_payload += counts.with_length_past_the_payload;
        total.with_psc += counts.with_psc;
        total.with_trailing_octets += counts.with_trailing_octets;
        for (t, n) in counts.by_type {
            *total.by_type.entry(t).or_default() += n;
        }
        all_errors.extend(counts.errors);
    }
    println!(
        "total: {} files, {} frames, {} GTP-U datagrams, {} parsed and re-emitted identically, \
         {} G-PDUs with a Length past the UDP payload, {} with a PDU Session Container, \
         {} with octets after the message, {} errors; {:?}",
        paths.len(),
        total.frames,
        total.datagrams,
        total.parsed,
        total.with_length_past_the_payload,
        total.with_psc,
        total.with_trailing_octets,
        all_errors.len(),
        total.by_type,
    );
    for e in &all_errors {
        println!("{e}");
    }
    assert!(all_errors.is_empty(), "{} errors", all_errors.len());
    // No rejections: every GTP-U datagram parses.
    assert_eq!(total.parsed, total.datagrams);
    assert_eq!(
        total.with_length_past_the_payload,
        LENGTH_PAST_THE_PAYLOAD.len()
    );
}
