//! upfbench as a library: the SMF emulator ([`smf`]), the capture replayer ([`replay`]),
//! the lab of network namespaces ([`lab`]) and the gNB/UE emulator ([`gnb`]), for the
//! benchmarks and tests that drive them. The `upfbench` binary wraps them.

pub mod capacity;
pub mod gnb;
pub mod lab;
pub mod replay;
pub mod report;
pub mod sessions;
pub mod smf;
pub mod soak;
