//! Parses every GTP-U message (UDP port 2152) of the real captures in the shared interop
//! directory, checks that re-emitting each gives back the same octets and that the data
//! path helper agrees with the full parser, and prints counts per file.
//!
//! The directory is `$UPF_INTEROP_PCAPS`, else `../../../shared/interop/pcaps` from
//! this crate. When it is absent the test says so and passes.
//!
//! Frames are read and UDP datagrams extracted (IPv4 and IPv6 fragments reassembled, as
//! tshark does) by the workspace's `capture` crate, the reader `upfbench decode` uses.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use gtpu::{parse_gpdu, GpduInfo, Message};

const GTPU_PORT: u16 = 2152;

/// GTP-U datagrams per file as tshark 4.0 counts them (`-Y udp.port==2152`, outer IPv4
/// fragments reassembled), to check that the capture reader misses none.
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
        let frames =
            capture::read_file(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let mut counts = Counts {
            frames: frames.len(),
            ..Counts::default()
        };
        for (frame, d) in capture::datagrams(&frames) {
            if d.sport == GTPU_PORT || d.dport == GTPU_PORT {
                check_datagram(&name, frame, &d.payload, &mut counts);
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
