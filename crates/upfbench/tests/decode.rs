//! `upfbench decode` over the interop captures: every PFCP and GTP-U message decodes, every
//! PFCP message re-encodes identically, and the summary line has the promised shape.

use std::path::PathBuf;
use std::process::Command;

fn pcaps() -> Option<Vec<PathBuf>> {
    let dir = std::env::var_os("UPF_INTEROP_PCAPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/interop/pcaps")
        });
    if !dir.is_dir() {
        eprintln!("interop pcaps absent at {}: skipping", dir.display());
        return None;
    }
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .collect();
    v.sort();
    Some(v)
}

#[test]
fn decode_all_interop_captures_without_errors() {
    let Some(files) = pcaps() else { return };
    let out = Command::new(env!("CARGO_BIN_EXE_upfbench"))
        .arg("decode")
        .args(&files)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    let summary = lines.last().unwrap();
    eprintln!("{summary}");
    // pfcp: N messages, D decoded, I re-encoded identically, E errors; gtpu: N messages, D decoded, E errors
    let nums: Vec<usize> = summary
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(nums.len(), 7, "summary line shape: {summary}");
    let (n, d, i, e, gn, gd, ge) = (
        nums[0], nums[1], nums[2], nums[3], nums[4], nums[5], nums[6],
    );
    assert!(summary.starts_with(&format!(
        "pfcp: {n} messages, {d} decoded, {i} re-encoded identically, {e} errors; gtpu: {gn} messages, {gd} decoded, {ge} errors"
    )));
    assert_eq!(
        (e, ge),
        (0, 0),
        "{}",
        lines
            .iter()
            .filter(|l| l.contains("\"error\""))
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!((d, i), (n, n));
    assert_eq!(gd, gn);
    assert!(
        n >= 800 && gn >= 2200,
        "fewer messages than the captures hold: {summary}"
    );
    // One JSON line per message, each naming its protocol.
    assert_eq!(lines.len() - 1, n + gn);
    for l in &lines[..lines.len() - 1] {
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        assert!(v["protocol"] == "pfcp" || v["protocol"] == "gtpu");
        assert!(v["message"].is_object());
    }
    assert!(out.status.success());
}

/// A raw-IP pcap at `path` with one UDP datagram 127.0.0.1:8805 -> 127.0.0.2:8805.
fn write_pfcp_pcap(path: &std::path::Path, payload: &[u8]) {
    let pkt = capture::ip_udp_packet(
        "127.0.0.1".parse().unwrap(),
        "127.0.0.2".parse().unwrap(),
        8805,
        8805,
        payload,
    );
    let mut w =
        capture::PcapWriter::new(std::fs::File::create(path).unwrap(), capture::linktype::RAW)
            .unwrap();
    w.write(0, &pkt).unwrap();
}

#[test]
fn decode_reports_a_malformed_message() {
    // A Heartbeat Request whose Recovery Time Stamp IE claims 8 octets but has 4.
    let bad = [
        0x20, 0x01, 0x00, 0x0c, 0x00, 0x00, 0x01, 0x00, 0x00, 0x60, 0x00, 0x08, 1, 2, 3, 4,
    ];
    let dir = std::env::temp_dir().join(format!("upfbench-decode-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.pcap");
    write_pfcp_pcap(&f, &bad);
    let out = Command::new(env!("CARGO_BIN_EXE_upfbench"))
        .arg("decode")
        .arg(&f)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("overruns its container"), "{stdout}");
    assert!(stdout.contains("Recovery Time Stamp (96)"), "{stdout}");
    assert!(stdout.trim_end().ends_with("pfcp: 1 messages, 0 decoded, 0 re-encoded identically, 1 errors; gtpu: 0 messages, 0 decoded, 0 errors"));
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn decode_skips_a_file_that_is_not_a_capture_and_decodes_the_rest() {
    // A Heartbeat Request with its Recovery Time Stamp, in a capture next to a text file.
    let hb = [
        0x20, 0x01, 0x00, 0x0c, 0x00, 0x00, 0x01, 0x00, 0x00, 0x60, 0x00, 0x04, 1, 2, 3, 4,
    ];
    let dir = std::env::temp_dir().join(format!("upfbench-decode-skip-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let text = dir.join("README.md");
    std::fs::write(&text, "# not a capture\n").unwrap();
    let f = dir.join("hb.pcap");
    write_pfcp_pcap(&f, &hb);
    let out = Command::new(env!("CARGO_BIN_EXE_upfbench"))
        .arg("decode")
        .arg(&text)
        .arg(&f)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("README.md: not a pcap or pcapng file: skipped"),
        "{stderr}"
    );
    assert!(stdout.contains("\"Heartbeat Request\""), "{stdout}");
    assert!(stdout.trim_end().ends_with("pfcp: 1 messages, 1 decoded, 1 re-encoded identically, 0 errors; gtpu: 0 messages, 0 decoded, 0 errors"), "{stdout}");
    // Something was skipped: not a clean run.
    assert_eq!(out.status.code(), Some(1));
}

/// Messages as OAI's SMF and a vendor IMS SMF send them (pfcp_samples::quirks): CH alone
/// in an F-TEID, the spare top bit of UE IP Address flags set. Before upfd read them as
/// docs/interop.md says, the first was an error and the second not re-encoded
/// identically.
#[test]
fn decode_takes_real_smfs_quirks_and_re_encodes_them_identically() {
    use pfcp_samples::quirks::{ims, oai};
    let v4 = std::net::Ipv4Addr::new(192, 0, 2, 4);
    let v6: std::net::Ipv6Addr = "2001:db8::4".parse().unwrap();
    let msgs = [
        oai::session_establishment(1, v4, 1, std::net::Ipv4Addr::new(10, 45, 0, 2)),
        ims::session_establishment(2, v6, 2, v6, v6, 9, &["ims-gate"]),
    ];
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("quirks.pcap");
    let mut w =
        capture::PcapWriter::new(std::fs::File::create(&f).unwrap(), capture::linktype::RAW)
            .unwrap();
    for m in &msgs {
        let pkt = capture::ip_udp_packet(
            "127.0.0.1".parse().unwrap(),
            "127.0.0.2".parse().unwrap(),
            8805,
            8805,
            m,
        );
        w.write(0, &pkt).unwrap();
    }
    drop(w);
    let out = Command::new(env!("CARGO_BIN_EXE_upfbench"))
        .arg("decode")
        .arg(&f)
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.trim_end().ends_with("pfcp: 2 messages, 2 decoded, 2 re-encoded identically, 0 errors; gtpu: 0 messages, 0 decoded, 0 errors"), "{stdout}");
    assert!(
        stdout.contains("\"spare\":128"),
        "spare bits shown: {stdout}"
    );
    assert_eq!(out.status.code(), Some(0));
}
