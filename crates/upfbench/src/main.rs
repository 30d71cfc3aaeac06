//! upfbench: the tools that prove a UPF. See `upfbench --help`.

use clap::{Parser, Subcommand};

mod decode;

#[derive(Parser)]
#[command(
    name = "upfbench",
    version,
    about = "SMF/gNB/UE emulators, lab and capacity tests for 5G UPFs"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Decode PFCP (UDP 8805) and GTP-U (UDP 2152) messages in pcap/pcapng files: one JSON
    /// line per message, then a summary line.
    Decode(decode::Args),
    /// SMF emulator: associate with a UPF, establish N PFCP sessions at a rate with W in
    /// flight, optionally modify, delete and release; report rate and latency per phase.
    Smf(upfbench::smf::cli::Args),
    /// Replay the SMF side of a PFCP capture against a UPF and compare each response
    /// with the original UPF's.
    Replay(upfbench::replay::Args),
    /// A fake UPF (test double) answering N4 on loopback, to try `smf` and `replay`.
    FakeUpf(upfbench::smf::cli::FakeArgs),
    /// The lab of network namespaces (gnb, upf, dn, smf) joined by veth pairs: up, down.
    Lab(upfbench::lab::Args),
    /// gNB/UE emulator: a TUN device per UE, GTP-U to and from the UPF over N3.
    Gnb(upfbench::gnb::cli::Args),
    /// PFCP establishment rate and latency with 1k, 100k and 1M sessions resident, and
    /// the UPF's memory per session.
    Sessions(upfbench::sessions::Args),
    /// The operator capacity test in the lab: the machine's limits, throughput, the
    /// carrier test, no-drop rate and latency through the UPF; tables, charts, HTML.
    Capacity(upfbench::capacity::Args),
    /// upfd for a long time under steady traffic and session churn: loss, usage reports
    /// against what crossed, memory, the books.
    Soak(upfbench::soak::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Decode(a) => decode::run(a),
        Cmd::Smf(a) => upfbench::smf::cli::run(a),
        Cmd::Replay(a) => upfbench::replay::run(a),
        Cmd::FakeUpf(a) => upfbench::smf::cli::run_fake(a),
        Cmd::Lab(a) => upfbench::lab::run(a),
        Cmd::Gnb(a) => upfbench::gnb::cli::run(a),
        Cmd::Sessions(a) => upfbench::sessions::run(a),
        Cmd::Capacity(a) => upfbench::capacity::run(a),
        Cmd::Soak(a) => upfbench::soak::run(a),
    };
    match r {
        Ok(code) => code,
        Err(e) => {
            eprintln!("upfbench: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}
