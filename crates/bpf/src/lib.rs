//! The UPF's XDP data path: the programs of bpf/*.bpf.c, compiled at build time into
//! libbpf-rs skeletons ([`upf`]); the compiler of a session's rules into their tables
//! ([`compile`], pure); and the [`datapath::Datapath`] that loads the programs and is
//! the only writer of their tables. The bench's programs are in bench-bpf.

/// The UPF data path: `xdp_n3` (GTP-U in) and `xdp_n6` (IP in from the data network),
/// and the tables of bpf/include/upf_maps.h (generated code).
#[allow(clippy::all)]
pub mod upf {
    include!(concat!(env!("OUT_DIR"), "/upf.skel.rs"));
}

/// The driver of the per-core scaling measurement ([`scaling`]): bpf/scaling/.
#[allow(clippy::all)]
mod scaling_drive {
    include!(concat!(env!("OUT_DIR"), "/scaling_drive.skel.rs"));
}

pub use libbpf_rs;

include!(concat!(env!("OUT_DIR"), "/object_id.rs"));

pub mod adopt;
pub mod compile;
pub mod datapath;
pub mod layout;
mod mem;
pub mod scaling;
mod slots;
