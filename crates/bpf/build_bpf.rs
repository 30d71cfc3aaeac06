//! Compiling XDP programs: every `dir/*.bpf.c` with clang into a BPF object and a
//! libbpf-rs skeleton. Shared by the build scripts of upf-bpf (bpf/) and bench-bpf
//! (bpf/bench/), which include this file.

use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

/// Builds `dir/*.bpf.c` into `out/{prefix}{stem}.bpf.o` and `.skel.rs`, with `include` on
/// the header search path.
pub fn build_dir(dir: &Path, prefix: &str, include: &[PathBuf], out: &Path) {
    println!("cargo:rerun-if-changed={}", dir.display());
    for i in include {
        // Headers change without any .bpf.c changing.
        println!("cargo:rerun-if-changed={}", i.display());
    }
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
        // A build that times the stages (bpf/include/profile.h).
        println!("cargo:rerun-if-env-changed=UPF_BPF_PROFILE");
        if std::env::var_os("UPF_BPF_PROFILE").is_some() {
            args.push("-DUPF_PROFILE".to_string());
        }
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
