//! parse -> emit -> parse is the identity for PFCP (generic tree and typed messages) and
//! GTP-U: whatever we accept, we re-encode into something that decodes to the same value.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = pfcp::Message::parse(data) {
        let out = m.emit();
        let m2 = pfcp::Message::parse(&out).expect("re-encoded PFCP message must parse");
        assert_eq!(m, m2);
        assert_eq!(out, m2.emit());
    }
    if let Ok((h, m)) = pfcp::msg::Msg::parse(data) {
        let out = m.emit(&h);
        let (h2, m2) = pfcp::msg::Msg::parse(&out).expect("re-encoded typed message must parse");
        assert_eq!(m, m2);
        assert_eq!(h.seid, h2.seid);
        assert_eq!(h.sequence, h2.sequence);
    }
    if let Ok(g) = gtpu::Message::parse(data) {
        let out = g.to_vec().expect("a parsed GTP-U message must re-encode");
        let g2 = gtpu::Message::parse(&out).expect("re-encoded GTP-U message must parse");
        assert_eq!(g, g2);
    }
});
