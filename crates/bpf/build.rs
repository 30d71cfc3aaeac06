//! Compile the UPF's XDP programs (bpf/*.bpf.c) with clang into BPF objects and
//! libbpf-rs skeletons. The C headers under bpf/include are the one definition of every
//! map layout; the Rust types are generated from the objects' BTF by the skeleton
//! builder. The bench's programs are built by bench-bpf, not here.

use std::path::PathBuf;

mod build_bpf;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bpf");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    build_bpf::build_dir(&root, "", &[root.join("include")], &out);
    // The driver of the per-core scaling measurement (src/scaling.rs), not part of upfd.
    build_bpf::build_dir(&root.join("scaling"), "", &[root.join("include")], &out);
}
