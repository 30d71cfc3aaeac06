//! One G-PDU parser contract: the codec (`gtpu::parse_gpdu`), the reference model
//! (`upf::model::read_gpdu`) and the XDP programs' own parser (bpf/include/gtpu.h, run
//! by a probe program compiled here from bpf/test/gtpu_probe.bpf.c) read the same TEID,
//! QFI (of the first DL or UL PDU Session Container) and T-PDU offset from every G-PDU
//! of the GTP-U robustness corpus (each message, each truncation, each single-bit flip,
//! with and without trailing octets) and of the real captures in ../shared/interop. The
//! model and the XDP parser agree on every input; where the codec differs from them,
//! the difference is one that crates/upf/src/model/packet.rs documents, checked here:
//! - the data path does not read the GTP-U Length field (the inner IP header gives the
//!   user packet's length): with the Length set right, the codec agrees;
//! - the data path walks at most abi::GTP_MAX_EXT extension headers (more: malformed);
//! - an extension header other than a PDU Session Container that needs comprehension
//!   goes to upfd (the slow path), where the codec refuses only the ones it does not know.
//!
//! Needs clang (as the build does) and CAP_BPF (root).

mod common;

#[path = "../../gtpu/tests/corpus/mod.rs"]
mod corpus;

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use libbpf_rs::{MapCore, MapFlags, Object, ObjectBuilder};
use upf::fastpath::Config;
use upf::model::{read_gpdu, GpduRead};

const N3: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 7);
const GNB: Ipv4Addr = Ipv4Addr::new(10, 10, 0, 1);
/// Ethernet, IPv4 (20 octets, no options), UDP: where the GTP-U header starts.
const GTP_AT: usize = 14 + 20 + 8;

/// The probe: the data path's parser, loaded with our N3 address configured.
struct Probe {
    obj: Object,
}

impl Probe {
    fn load() -> Probe {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bpf");
        let out = std::env::temp_dir().join(format!("gtpu_probe-{}.bpf.o", std::process::id()));
        let status = std::process::Command::new("clang")
            .args([
                "-O2", "-g", "-Wall", "-Werror", "-target", "bpf", "-mcpu=v3",
            ])
            .arg(format!("-I{}", root.join("include").display()))
            .arg("-I/usr/include/x86_64-linux-gnu")
            .arg("-c")
            .arg(root.join("test/gtpu_probe.bpf.c"))
            .arg("-o")
            .arg(&out)
            .status()
            .expect("clang (the build needs it too)");
        assert!(status.success(), "compiling bpf/test/gtpu_probe.bpf.c");
        let mut open = ObjectBuilder::default().open_file(&out).expect("open");
        let _ = std::fs::remove_file(&out);
        // The probe reads upf_cfg alone; the data path's other tables need no room.
        for mut m in open.maps_mut() {
            let _ = m.set_max_entries(1);
        }
        let obj = open.load().expect("load (needs root / CAP_BPF)");
        let mut cfg = upf_bpf::upf::types::upf_config::default();
        cfg.local_v4[0] = u32::from_ne_bytes(N3.octets());
        // SAFETY: a plain repr(C) value generated from the BTF of the same header.
        let value = unsafe {
            std::slice::from_raw_parts(
                (&cfg as *const upf_bpf::upf::types::upf_config).cast::<u8>(),
                std::mem::size_of_val(&cfg),
            )
        };
        let map = obj.maps().find(|m| m.name() == "upf_cfg").expect("upf_cfg");
        map.update(&0u32.to_ne_bytes(), value, MapFlags::ANY)
            .expect("configure");
        Probe { obj }
    }

    fn read(&self, frame: &[u8]) -> GpduRead {
        let prog = self
            .obj
            .progs_mut()
            .find(|p| p.name() == "gtpu_probe")
            .expect("gtpu_probe");
        let input = libbpf_rs::ProgramInput {
            data_in: Some(frame),
            ..Default::default()
        };
        assert_eq!(prog.test_run(input).expect("BPF_PROG_RUN").return_value, 2);
        let out = self.obj.maps().find(|m| m.name() == "probe_out").unwrap();
        let r = out
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .unwrap()
            .expect("a result");
        let u32_at = |o: usize| u32::from_ne_bytes(r[o..o + 4].try_into().unwrap());
        match u32_at(0) {
            0 => GpduRead::Gpdu {
                teid: u32_at(4),
                qfi: (r[12] != 0).then_some(r[13]),
                psc_type: r[14],
                inner: u32_at(8) as usize,
            },
            1 => GpduRead::NotOurs,
            2 => GpduRead::SlowPath,
            3 => GpduRead::Malformed,
            v => panic!("verdict {v}"),
        }
    }
}

/// A GTP-U message sent to our N3 address: Ethernet, IPv4, UDP 2152.
fn frame(gtp: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 9, 9, 2, 0, 0, 0, 8, 8, 0x08, 0x00];
    f.extend(capture::ip_udp_packet(
        IpAddr::V4(GNB),
        IpAddr::V4(N3),
        2152,
        2152,
        gtp,
    ));
    f
}

/// The extension header types of a G-PDU the codec accepted (TS 29.281 clause 5.2).
fn ext_types(gtp: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    if gtp[0] & 0x04 == 0 {
        return types;
    }
    let (mut next, mut off) = (gtp[11], 12);
    while next != 0 {
        types.push(next);
        off += usize::from(gtp[off]) * 4;
        next = gtp[off - 1];
    }
    types
}

/// Why the data path reads a G-PDU the codec accepts differently, if the difference is
/// a documented one.
fn documented_difference(gtp: &[u8], dp: GpduRead) -> Option<&'static str> {
    let types = ext_types(gtp);
    let must_comprehend = types
        .iter()
        .take(upf::abi::GTP_MAX_EXT as usize)
        .any(|t| *t != gtpu::ext_type::PDU_SESSION_CONTAINER && t & 0x80 != 0);
    match dp {
        GpduRead::SlowPath if must_comprehend => Some("an extension header to comprehend"),
        GpduRead::Malformed if types.len() > upf::abi::GTP_MAX_EXT as usize => {
            Some("more extension headers than the data path walks")
        }
        _ => None,
    }
}

/// The G-PDU with its Length field saying what the buffer holds.
fn length_set_right(gtp: &[u8]) -> Vec<u8> {
    let mut v = gtp.to_vec();
    if v.len() >= 4 {
        let l = u16::try_from(v.len().saturating_sub(8)).unwrap_or(u16::MAX);
        v[2..4].copy_from_slice(&l.to_be_bytes());
    }
    v
}

#[derive(Default, Debug)]
struct Tally {
    inputs: usize,
    gpdus: usize,
    ignored_length: usize,
    comprehension: usize,
    too_many: usize,
}

/// Check one GTP-U message through the three parsers.
fn check(probe: &Probe, cfg: &Config, gtp: &[u8], t: &mut Tally) {
    t.inputs += 1;
    let f = frame(gtp);
    let model = read_gpdu(&f, cfg);
    let xdp = probe.read(&f);
    assert_eq!(model, xdp, "model and XDP read {gtp:02x?} differently");
    let codec = gtpu::parse_gpdu(gtp);
    match (model, &codec) {
        (
            GpduRead::Gpdu {
                teid,
                qfi,
                psc_type,
                inner,
            },
            Ok(c),
        ) => {
            t.gpdus += 1;
            assert_eq!((teid, qfi), (c.teid, c.qfi), "{gtp:02x?}");
            assert_eq!(inner, GTP_AT + c.payload_offset, "{gtp:02x?}");
            if qfi.is_some() {
                assert_eq!(Some(psc_type), c.pdu_type, "{gtp:02x?}");
            }
        }
        (
            GpduRead::Gpdu {
                teid, qfi, inner, ..
            },
            Err(e),
        ) => {
            // The codec refuses what the data path forwards only for its Length field.
            let right = length_set_right(gtp);
            match gtpu::parse_gpdu(&right) {
                Ok(c) if (c.teid, c.qfi, GTP_AT + c.payload_offset) == (teid, qfi, inner) => {
                    t.ignored_length += 1
                }
                other => panic!(
                    "the data path reads {gtp:02x?} as a G-PDU, the codec says {e}; with \
                     its Length set right {other:?}"
                ),
            }
        }
        (dp, Ok(_)) => match documented_difference(gtp, dp) {
            Some("an extension header to comprehend") => t.comprehension += 1,
            Some(_) => t.too_many += 1,
            None => panic!("the codec reads {gtp:02x?} as {codec:?}, the data path as {dp:?}"),
        },
        (_, Err(_)) => {}
    }
}

fn pcap_dir() -> PathBuf {
    match std::env::var_os("UPF_INTEROP_PCAPS") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/interop/pcaps"),
    }
}

#[test]
fn codec_model_and_xdp_read_gpdus_alike() {
    if !common::root() {
        return;
    }
    let probe = Probe::load();
    let cfg = Config {
        local: vec![IpAddr::V4(N3)],
        ..Config::default()
    };
    let mut t = Tally::default();
    for seed in corpus::seeds() {
        check(&probe, &cfg, &seed, &mut t);
        for len in 0..seed.len() {
            check(&probe, &cfg, &seed[..len], &mut t);
        }
        for bit in 0..seed.len() * 8 {
            let mut v = seed.clone();
            v[bit / 8] ^= 1 << (bit % 8);
            check(&probe, &cfg, &v, &mut t);
            v.extend_from_slice(&[0; 8]);
            check(&probe, &cfg, &v, &mut t);
        }
    }
    let corpus = std::mem::take(&mut t);
    let dir = pcap_dir();
    let mut files = 0;
    match std::fs::read_dir(&dir) {
        Err(_) => println!("interop pcaps absent at {}: only the corpus", dir.display()),
        Ok(entries) => {
            for e in entries.flatten() {
                let Ok(frames) = capture::read_file(e.path()) else {
                    continue;
                };
                files += 1;
                for (_, d) in capture::datagrams(&frames) {
                    if d.dport == 2152 {
                        check(&probe, &cfg, &d.payload, &mut t);
                    }
                }
            }
        }
    }
    println!("corpus: {corpus:?}\ncaptures ({files} files): {t:?}");
    // The corpus reaches every kind of agreement and difference.
    assert!(corpus.gpdus > 100, "{corpus:?}");
    assert!(corpus.ignored_length > 0, "{corpus:?}");
    assert!(corpus.comprehension > 0, "{corpus:?}");
}
