//! The UPF library: the session model and its procedures, the N4 node, the data path
//! behind the [`fastpath::FastPath`] trait with its pure-Rust reference implementation.
//!
//! Boundaries (ARCHITECTURE.md): the wire codecs know nothing of sessions, the session
//! model knows nothing of BPF, only `fastpath` implementations touch forwarding state, and
//! only `n4` speaks to CP functions.

pub mod alloc;
pub mod fastpath;
pub mod load;
pub mod model;
pub mod n4;
pub mod pfd;
pub mod predefined;
pub mod procedures;
pub mod qos_monitoring;
pub mod redirect;
pub mod report;
pub mod rules;
pub mod sdf;
pub mod seidmap;
pub mod sessions;
pub mod state;

/// The numbers the data path shares with upfd (limits, flag bits, drop reasons,
/// counters), generated from bpf/include/abi.h by build.rs.
pub mod abi {
    include!(concat!(env!("OUT_DIR"), "/abi.rs"));
}
