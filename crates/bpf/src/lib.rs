//! The XDP programs (bpf/*.bpf.c), compiled at build time, as libbpf-rs skeletons. The
//! bench's programs are in bench-bpf.

#![allow(clippy::all)]

/// The UPF data path: `xdp_n3` (GTP-U in) and `xdp_n6` (IP in from the data network),
/// and the tables of bpf/include/upf_maps.h.
pub mod upf {
    include!(concat!(env!("OUT_DIR"), "/upf.skel.rs"));
}

pub use libbpf_rs;

pub mod datapath;
mod direct;
