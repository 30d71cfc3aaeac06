//! Any records as upfd's state file and journal (upf::state): no panic, and what loads
//! is a state upfd could restore (every session has a non-zero SEID) whose records
//! encode again. The input is frames' payloads (`len u16 | payload`, a snapshot's then,
//! after an empty one, a journal's) framed here with their CRC, so that mutations reach
//! the record decoders rather than die at the checksum (which the unit tests cover).
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;

/// Frames of the `len | payload` chunks of `data`, with lengths and CRCs, up to an empty
/// chunk; and what is left after it.
fn reframe(mut data: &[u8]) -> (Vec<u8>, &[u8]) {
    let mut out = Vec::new();
    while data.len() >= 2 {
        let n = (u16::from_le_bytes([data[0], data[1]]) as usize).min(data.len() - 2);
        let payload = &data[2..2 + n];
        data = &data[2 + n..];
        if n == 0 {
            break;
        }
        out.extend_from_slice(&(n as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
        out.extend_from_slice(payload);
    }
    (out, data)
}

fuzz_target!(|data: &[u8]| {
    let (frames, rest) = reframe(data);
    let (journal, _) = reframe(rest);
    let mut snapshot = b"UPFDSTAT".to_vec();
    snapshot.extend_from_slice(&upf::state::FORMAT.to_le_bytes());
    snapshot.extend_from_slice(&frames);
    let loaded = upf::state::parse(
        Path::new("state"),
        &snapshot,
        |_| Ok((!journal.is_empty()).then(|| ("journal".into(), journal))),
        "cfg",
    );
    if let Ok(s) = loaded {
        let records: Vec<upf::state::Record> = s
            .sessions
            .iter()
            .map(|x| {
                assert_ne!(x.session.up_seid, 0);
                upf::state::Record::Session(Box::new(x.clone()))
            })
            .collect();
        upf::state::encode_records(&records).expect("what loaded encodes");
    }
});
