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
    // The object's identity: a restarted upfd of the same build reuses the running data
    // path (datapath.rs, Datapath::adopt) only if its object is this one.
    let obj = std::fs::read(out.join("upf.bpf.o")).expect("upf.bpf.o");
    let id = obj.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    std::fs::write(
        out.join("object_id.rs"),
        format!("/// FNV-1a of bpf/upf.bpf.c's object, as built.\npub const OBJECT_ID: u64 = {id:#x};\n"),
    )
    .expect("object_id.rs");
    // The driver of the per-core scaling measurement (src/scaling.rs), not part of upfd.
    build_bpf::build_dir(&root.join("scaling"), "", &[root.join("include")], &out);
}
