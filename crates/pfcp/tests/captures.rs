//! Every PFCP message in ../shared/interop/pcaps decodes, re-encodes to identical octets,
//! and parse-emit-parse gives the same tree.

use std::path::PathBuf;

fn pcaps_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("UPF_INTEROP_PCAPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/interop/pcaps")
        });
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "interop pcaps absent at {}: skipping (set UPF_INTEROP_PCAPS or place shared/ beside the checkout)",
            dir.display()
        );
        None
    }
}

#[test]
fn every_capture_round_trips() {
    let Some(dir) = pcaps_dir() else { return };
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    let mut total = 0;
    let mut failures = Vec::new();
    for f in &files {
        let frames = capture::read_file(f).unwrap();
        for fr in frames {
            let Some(d) = capture::udp_datagram(fr.linktype, &fr.data) else {
                continue;
            };
            if d.sport != 8805 && d.dport != 8805 {
                continue;
            }
            total += 1;
            let name = format!("{}#{}", f.file_name().unwrap().to_string_lossy(), fr.number);
            match pfcp::Message::parse(&d.payload) {
                Err(e) => failures.push(format!("{name}: decode: {e}")),
                Ok(m) => {
                    let out = m.emit();
                    if out != d.payload {
                        let at = out
                            .iter()
                            .zip(&d.payload)
                            .position(|(a, b)| a != b)
                            .unwrap_or(out.len().min(d.payload.len()));
                        failures.push(format!(
                            "{name}: re-encoding differs at octet {at} (len {} vs {})",
                            out.len(),
                            d.payload.len()
                        ));
                    }
                    match pfcp::Message::parse(&out) {
                        Ok(m2) if m2 == m => {}
                        Ok(_) => failures.push(format!("{name}: parse-emit-parse differs")),
                        Err(e) => failures.push(format!("{name}: re-parse: {e}")),
                    }
                }
            }
        }
    }
    eprintln!("{total} PFCP messages, {} failures", failures.len());
    assert!(
        total > 400,
        "expected the interop captures to hold over 400 PFCP messages, found {total}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The typed layer decodes every message real peers sent (the synthetic pfcplib file holds
/// random IE sets that may lack mandatory IEs, so it is checked at the generic layer only),
/// and typed parse-emit-parse is the identity.
#[test]
fn typed_messages_from_real_peers() {
    let Some(dir) = pcaps_dir() else { return };
    let mut n = 0;
    let mut same_bytes = 0;
    let mut failures = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let f = e.unwrap().path();
        let fname = f.file_name().unwrap().to_string_lossy().to_string();
        if !(fname.ends_with(".pcap") || fname.ends_with(".pcapng"))
            || fname.starts_with("synthetic")
        {
            continue;
        }
        for fr in capture::read_file(&f).unwrap() {
            let Some(d) = capture::udp_datagram(fr.linktype, &fr.data) else {
                continue;
            };
            if d.sport != 8805 && d.dport != 8805 {
                continue;
            }
            n += 1;
            let name = format!("{fname}#{}", fr.number);
            match pfcp::msg::Msg::parse(&d.payload) {
                Err(e) => failures.push(format!("{name}: {e}")),
                Ok((h, m)) => {
                    if matches!(m, pfcp::msg::Msg::Unknown(_)) {
                        failures.push(format!("{name}: unknown message type"));
                        continue;
                    }
                    let out = m.emit(&h);
                    if out == d.payload {
                        same_bytes += 1;
                    }
                    match pfcp::msg::Msg::parse(&out) {
                        Ok((_, m2)) if m2 == m => {}
                        _ => failures.push(format!("{name}: typed parse-emit-parse differs")),
                    }
                }
            }
        }
    }
    eprintln!("{n} messages from real peers; typed re-encoding identical for {same_bytes}");
    assert!(n > 150);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
