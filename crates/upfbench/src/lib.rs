//! upfbench as a library: the SMF emulator ([`smf`]) and the capture replayer ([`replay`]),
//! for the benchmarks and tests that drive them. The `upfbench` binary wraps them.

pub mod replay;
pub mod smf;
