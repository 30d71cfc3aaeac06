//! The data path programs pass the verifier and run (BPF_PROG_RUN; needs CAP_BPF).

use libbpf_rs::skel::{OpenSkel, SkelBuilder};

#[test]
fn upf_programs_load_and_run() {
    let mut obj = std::mem::MaybeUninit::uninit();
    let open = upf_bpf::upf::UpfSkelBuilder::default()
        .open(&mut obj)
        .expect("open");
    let skel = match open.load() {
        Ok(s) => s,
        Err(e) => panic!("load: {e:#}"),
    };
    // Not IP: left to the kernel.
    let frame = [0u8; 64];
    let input = libbpf_rs::ProgramInput {
        data_in: Some(&frame),
        ..Default::default()
    };
    let out = skel.progs.xdp_n3.test_run(input).expect("run");
    assert_eq!(out.return_value, 2);
}
