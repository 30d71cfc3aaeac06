//! `upfbench decode FILE...`: what an operator runs to check an SMF's or gNB's messages
//! against our codecs. Prints one JSON line per PFCP or GTP-U message and ends with
//! `pfcp: N messages, D decoded, I re-encoded identically, E errors; gtpu: N messages, D decoded, E errors`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{json, Value};

pub const PFCP_PORT: u16 = 8805;
pub const GTPU_PORT: u16 = 2152;

#[derive(clap::Args)]
pub struct Args {
    /// pcap or pcapng files (Ethernet, Linux cooked, loopback or raw IP; IPv4 and IPv6).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Print only the summary line.
    #[arg(long, short)]
    quiet: bool,
}

/// Counts for the summary line.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub pfcp: usize,
    pub pfcp_decoded: usize,
    pub pfcp_identical: usize,
    pub pfcp_errors: usize,
    pub gtpu: usize,
    pub gtpu_decoded: usize,
    pub gtpu_errors: usize,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "pfcp: {} messages, {} decoded, {} re-encoded identically, {} errors; gtpu: {} messages, {} decoded, {} errors",
            self.pfcp, self.pfcp_decoded, self.pfcp_identical, self.pfcp_errors, self.gtpu, self.gtpu_decoded, self.gtpu_errors
        )
    }
}

/// Decode one PFCP message: its JSON, and whether it re-encodes to the same octets.
pub fn pfcp_json(payload: &[u8]) -> Result<(Value, bool), String> {
    let m = pfcp::Message::parse(payload).map_err(|e| e.to_string())?;
    let identical = m.emit() == payload;
    Ok((m.to_json(), identical))
}

/// Decode one GTP-U message to JSON.
pub fn gtpu_json(payload: &[u8]) -> Result<Value, String> {
    let m = gtpu::Message::parse(payload).map_err(|e| e.to_string())?;
    serde_json::to_value(&m).map_err(|e| e.to_string())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut s = Summary::default();
    let mut unreadable = 0;
    for path in &args.files {
        // A file that is not a capture (a README among `dir/*`) is named and skipped: the
        // others are still decoded, and the exit status says something was skipped.
        let frames = match capture::read_file(path) {
            Ok(f) => f,
            Err(e) => {
                out.flush()?;
                eprintln!("upfbench: {}: {e}: skipped", path.display());
                unreadable += 1;
                continue;
            }
        };
        let file = path.display().to_string();
        for (frame, d) in capture::datagrams(&frames) {
            let is_pfcp = d.sport == PFCP_PORT || d.dport == PFCP_PORT;
            let is_gtpu = d.sport == GTPU_PORT || d.dport == GTPU_PORT;
            if !is_pfcp && !is_gtpu {
                continue;
            }
            let mut line = json!({
                "file": file,
                "frame": frame,
                "src": format!("{}:{}", d.src, d.sport),
                "dst": format!("{}:{}", d.dst, d.dport),
            });
            if is_pfcp {
                s.pfcp += 1;
                line["protocol"] = json!("pfcp");
                match pfcp_json(&d.payload) {
                    Ok((m, identical)) => {
                        s.pfcp_decoded += 1;
                        if identical {
                            s.pfcp_identical += 1;
                        } else {
                            line["reencoded_identically"] = json!(false);
                        }
                        line["message"] = m;
                    }
                    Err(e) => {
                        s.pfcp_errors += 1;
                        line["error"] = json!(e);
                    }
                }
            } else {
                s.gtpu += 1;
                line["protocol"] = json!("gtpu");
                match gtpu_json(&d.payload) {
                    Ok(m) => {
                        s.gtpu_decoded += 1;
                        line["message"] = m;
                    }
                    Err(e) => {
                        s.gtpu_errors += 1;
                        line["error"] = json!(e);
                    }
                }
            }
            if !args.quiet {
                writeln!(out, "{line}")?;
            }
        }
    }
    writeln!(out, "{s}")?;
    out.flush()?;
    Ok(if s.pfcp_errors + s.gtpu_errors + unreadable == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
