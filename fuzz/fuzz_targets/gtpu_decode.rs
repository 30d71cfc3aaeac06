//! Any octets handed to the GTP-U decoders: no panic; the fast-path parser and the full
//! parser agree on whether a G-PDU is acceptable and on its TEID.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let full = gtpu::Message::parse(data);
    let fast = gtpu::parse_gpdu(data);
    if let (Ok(gtpu::Message::GPdu { header, .. }), Ok(info)) = (&full, &fast) {
        assert_eq!(header.teid, info.teid);
    }
    if let Err(e) = full {
        let _ = e.to_string();
    }
});
