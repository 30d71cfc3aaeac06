//! Compile the bench's XDP programs (bpf/bench/*.bpf.c: generator, sinks, bare
//! forwarder, XDP_PASS) with clang into objects and libbpf-rs skeletons named
//! `bench_<stem>`. They include bpf/bench/bench.h and the data path's headers.

use std::path::PathBuf;

#[path = "../bpf/build_bpf.rs"]
mod build_bpf;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bpf");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let bench = root.join("bench");
    build_bpf::build_dir(
        &bench,
        "bench_",
        &[bench.clone(), root.join("include")],
        &out,
    );
}
