//! The XDP programs (bpf/*.bpf.c), compiled at build time, as libbpf-rs skeletons.

#![allow(clippy::all)]

/// XDP_PASS, for the far end of a veth pair that receives redirected frames.
pub mod pass {
    include!(concat!(env!("OUT_DIR"), "/xdp_pass.skel.rs"));
}

/// The UPF data path: `xdp_n3` (GTP-U in) and `xdp_n6` (IP in from the data network),
/// and the tables of bpf/include/upf_maps.h.
pub mod upf {
    include!(concat!(env!("OUT_DIR"), "/upf.skel.rs"));
}

/// The compiled object of the XDP_PASS program, for tools that load it by file
/// (`ip link set dev X xdp obj FILE sec xdp`).
pub const PASS_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/xdp_pass.bpf.o"));

pub use libbpf_rs;

pub mod bench;
pub mod datapath;
mod direct;
