//! upfctl: see lib.rs.

use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let o = upfctl::execute(std::env::args_os());
    let _ = std::io::stdout().write_all(o.stdout.as_bytes());
    let _ = std::io::stderr().write_all(o.stderr.as_bytes());
    ExitCode::from(o.code)
}
