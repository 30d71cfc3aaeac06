//! Compile every bpf/*.bpf.c with clang into a BPF object and a libbpf-rs skeleton.
//! The C headers under bpf/include are the one definition of every map layout; the Rust
//! types are generated from the objects' BTF by the skeleton builder.

use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bpf");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    println!("cargo:rerun-if-changed={}", root.display());
    let mut progs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("bpf/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".bpf.c"))
        .collect();
    progs.sort();
    for p in progs {
        println!("cargo:rerun-if-changed={}", p.display());
        let stem = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".bpf.c"))
            .expect("name.bpf.c")
            .to_string();
        let obj = out.join(format!("{stem}.bpf.o"));
        let skel = out.join(format!("{stem}.skel.rs"));
        SkeletonBuilder::new()
            .source(&p)
            .obj(&obj)
            .clang_args([
                "-O2".to_string(),
                "-g".to_string(),
                "-Wall".to_string(),
                "-Werror".to_string(),
                "-mcpu=v3".to_string(),
                format!("-I{}", root.join("include").display()),
                "-I/usr/include/x86_64-linux-gnu".to_string(),
            ])
            .build_and_generate(&skel)
            .unwrap_or_else(|e| panic!("building {}: {e:#}", p.display()));
    }
}
