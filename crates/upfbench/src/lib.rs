//! upfbench as a library: the SMF emulator ([`smf`]), the capture replayer ([`replay`]),
//! and the lab of network namespaces ([`lab`]), for the benchmarks and tests that drive
//! them. The `upfbench` binary wraps them.

pub mod lab;
pub mod replay;
pub mod smf;
