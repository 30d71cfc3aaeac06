//! upfd: a 5G UPF (N3, N4, N6, N9) and 4G SGW-U/PGW-U (Sxa/Sxb).
//!
//! `upfd --config FILE` runs it; `upfd check-config FILE` checks a configuration file and
//! names the key of every error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[macro_use]
mod log;
mod api;
mod config;
mod gtpu_sockets;
mod metrics;
mod overload;
mod persist;
mod routewatch;
mod runtime;
mod slowpath;
mod xdp;

#[derive(Parser)]
#[command(
    name = "upfd",
    version,
    about = "5G User Plane Function (N3/N4/N6/N9) and 4G SGW-U/PGW-U"
)]
struct Cli {
    /// Configuration file (YAML); see docs/configuration.md.
    #[arg(long, short)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check a configuration file and exit: 0 if valid, 1 with the key path of the error.
    CheckConfig { file: PathBuf },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Some(Cmd::CheckConfig { file }) => match config::Config::load(&file) {
            Ok(c) => {
                println!(
                    "{}: valid (node {}, N4 {}:{}, {} UE pool(s))",
                    file.display(),
                    c.node_id,
                    c.n4.address,
                    c.n4.port,
                    c.ue_pools.len()
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(1)
            }
        },
        None => {
            let Some(path) = cli.config else {
                eprintln!("upfd: --config FILE is required (or: upfd check-config FILE)");
                return ExitCode::from(2);
            };
            let cfg = match config::Config::load(&path) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("{e}");
                    return ExitCode::from(1);
                }
            };
            log::set_level(&cfg.log.level);
            if let Err(e) = pin_to(&cfg.cpus) {
                eprintln!("cpus: {e}");
                return ExitCode::from(1);
            }
            match runtime::run(cfg) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    error!("{e:#}");
                    ExitCode::from(1)
                }
            }
        }
    }
}

/// Run upfd's process (every thread it starts later too) on `cpus` only; none: any.
fn pin_to(cpus: &[usize]) -> std::io::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it for CPUs the
    // configuration check bounded; sched_setaffinity reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in cpus {
            libc::CPU_SET(*c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
