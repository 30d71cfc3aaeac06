//! upfbench as a library: the SMF emulator ([`smf`]),
//! for the benchmarks and tests that drive them. The `upfbench` binary wraps them.

pub mod smf;
