//! The XDP_PASS program loads and passes a frame (BPF_PROG_RUN; needs CAP_BPF).

use libbpf_rs::skel::{OpenSkel, SkelBuilder};

#[test]
fn pass_program_passes() {
    let mut obj = std::mem::MaybeUninit::uninit();
    let open = bench_bpf::skel::pass::BenchXdpPassSkelBuilder::default()
        .open(&mut obj)
        .expect("open");
    let skel = open.load().expect("load (needs root / CAP_BPF)");
    let frame = [0u8; 64];
    let input = libbpf_rs::ProgramInput {
        data_in: Some(&frame),
        ..Default::default()
    };
    let out = skel.progs.xdp_pass.test_run(input).expect("BPF_PROG_RUN");
    assert_eq!(out.return_value, 2, "XDP_PASS");
    assert!(bench_bpf::PASS_OBJECT.starts_with(b"\x7fELF"));
}
