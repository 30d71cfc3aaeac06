//! Any octets handed to the PFCP decoders: no panic, and an error's Cause is defined.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(e) = pfcp::Message::parse(data) {
        let _ = (e.cause(), e.to_string());
    }
    if let Ok((_, m)) = pfcp::msg::Msg::parse(data) {
        let _ = m.message_type();
    }
});
