//! Compile every bpf/*.bpf.c with clang into a BPF object and a libbpf-rs skeleton, and
//! every bpf/bench/*.bpf.c the same way under the name bench_<stem> (the bench tool's
//! generator, sinks and bare forwarder).
//! The C headers under bpf/include (and bpf/bench/bench.h) are the one definition of
//! every map layout; the Rust types are generated from the objects' BTF by the skeleton
//! builder.

use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

/// Builds `dir/*.bpf.c` into `out/{prefix}{stem}.bpf.o` and `.skel.rs`.
fn build_dir(dir: &Path, prefix: &str, include: &[PathBuf], out: &Path) {
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut progs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
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
        // The skeleton's name is the object file's name up to the first dot.
        let obj = out.join(format!("{prefix}{stem}.bpf.o"));
        let skel = out.join(format!("{prefix}{stem}.skel.rs"));
        let mut args = vec![
            "-O2".to_string(),
            "-g".to_string(),
            "-Wall".to_string(),
            "-Werror".to_string(),
            "-mcpu=v3".to_string(),
        ];
        args.extend(include.iter().map(|i| format!("-I{}", i.display())));
        args.push("-I/usr/include/x86_64-linux-gnu".to_string());
        SkeletonBuilder::new()
            .source(&p)
            .obj(&obj)
            .clang_args(args)
            .build_and_generate(&skel)
            .unwrap_or_else(|e| panic!("building {}: {e:#}", p.display()));
    }
}

fn main() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bpf");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    let include = root.join("include");
    // Headers change without any .bpf.c changing.
    println!("cargo:rerun-if-changed={}", include.display());
    build_dir(&root, "", std::slice::from_ref(&include), &out);
    let bench = root.join("bench");
    build_dir(&bench, "bench_", &[bench.clone(), include], &out);
}
