//! upfd: a 5G UPF (N3, N4, N6, N9) and 4G SGW-U/PGW-U (Sxa/Sxb).
//!
//! `upfd --config FILE` runs it; `upfd check-config FILE` checks a configuration file
//! and what of it can be checked on this host, and names the key of every error. Any key
//! can be overridden by an environment variable `UPFD_<KEY__PATH>` or `--set KEY.PATH=VALUE`
//! (docs/configuration.md).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[macro_use]
mod log;
mod api;
mod config;
mod gtpu_sockets;
mod metrics;
mod mmsg;
mod overload;
mod path_qos;
mod persist;
mod pins;
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
    /// Override a key of the file, the value read as YAML (repeatable): `--set
    /// n4.heartbeat_interval=5s`, `--set 'n4.allowed_peers=[10.0.0.0/8]'`. Wins over the
    /// environment's `UPFD_<KEY__PATH>` variables, which win over the file.
    #[arg(long = "set", value_name = "KEY.PATH=VALUE", global = true)]
    set: Vec<String>,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check a configuration file (with the environment's and --set's overrides) and what
    /// of it can be checked on this host without starting (interfaces, local addresses,
    /// the state directory), and exit: 0 if valid, 1 with one line per error.
    CheckConfig { file: PathBuf },
}

/// The file with the environment's overrides, then `--set`'s.
fn load(file: &Path, set: &[String]) -> Result<config::Config, config::ConfigError> {
    let (mut overrides, ignored) = config::env_overrides()?;
    if !ignored.is_empty() {
        eprintln!(
            "environment: {} not read: their first key is no configuration key (overrides are {}<KEY> or {}<KEY>__<KEY>..., with KEY one of {})",
            ignored.join(", "),
            config::ENV_PREFIX,
            config::ENV_PREFIX,
            config::TOP_KEYS.join(", ").to_uppercase()
        );
    }
    for s in set {
        overrides.push(config::Override::from_set(s)?);
    }
    config::Config::load_with(file, &overrides)
}

/// The file and the host checks: the configuration, or each error once on stderr.
fn load_and_check(file: &Path, set: &[String]) -> Result<config::Config, ExitCode> {
    let cfg = load(file, set).map_err(|e| {
        eprintln!("{e}");
        ExitCode::from(1)
    })?;
    let errs = cfg.check_host();
    if !errs.is_empty() {
        for e in errs {
            eprintln!("{e}");
        }
        return Err(ExitCode::from(1));
    }
    Ok(cfg)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Some(Cmd::CheckConfig { file }) => match load_and_check(&file, &cli.set) {
            Ok(c) => {
                let n = c.sources.overrides.len();
                println!(
                    "{}: valid (node {}, N4 {}:{}, {} UE pool(s){}; checked on this host: {})",
                    file.display(),
                    c.node_id,
                    c.n4.address,
                    c.n4.port,
                    c.ue_pools.len(),
                    if n > 0 {
                        format!(", {n} override(s)")
                    } else {
                        String::new()
                    },
                    [
                        (c.datapath.mode == config::DatapathMode::Xdp, "interfaces"),
                        (true, "addresses"),
                        (true, "state directory"),
                        (
                            c.api.token_file.is_some() || c.api.tls_cert_file.is_some(),
                            "API files"
                        ),
                    ]
                    .iter()
                    .filter(|(on, _)| *on)
                    .map(|(_, what)| *what)
                    .collect::<Vec<_>>()
                    .join(", ")
                );
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        None => {
            let Some(path) = cli.config else {
                eprintln!("upfd: --config FILE is required (or: upfd check-config FILE)");
                return ExitCode::from(2);
            };
            // What check-config checks on this host is checked before anything starts,
            // with the same messages.
            let cfg = match load_and_check(&path, &cli.set) {
                Ok(c) => c,
                Err(code) => return code,
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
