//! upfctl: upfd's API from the command line (crates/upfd/src/api, `/openapi.json`).
//! Human tables by default; `--json` prints what the API answered, as it is. A library
//! too ([`execute`]), so that upfd's lab tests run it inside the lab's namespaces.
//! HTTP is ureq's; the bearer token of upfd's `api.token_file` comes from
//! `UPFCTL_TOKEN` or a file (`--token-file`, `UPFCTL_TOKEN_FILE`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Parser, Subcommand};
use serde_json::Value;

#[derive(Parser)]
#[command(
    name = "upfctl",
    version,
    about = "Look into a running upfd through its API"
)]
struct Cli {
    /// upfd's API (`api.listen` in its configuration): HOST:PORT, http://HOST:PORT, or
    /// https://HOST:PORT when upfd has `api.tls_cert_file`.
    #[arg(
        long,
        env = "UPFCTL_API",
        default_value = "127.0.0.7:9100",
        global = true
    )]
    api: String,
    /// A file holding the bearer token upfd's subscriber routes require (the file of
    /// its `api.token_file`, or a copy). UPFCTL_TOKEN, the token itself, wins.
    #[arg(long, env = "UPFCTL_TOKEN_FILE", global = true, value_name = "PATH")]
    token_file: Option<PathBuf>,
    /// With https://: a PEM file of the certificates to trust for upfd's API (its own
    /// self-signed certificate, or the CA that signed it); without it, the public web's
    /// roots (Mozilla's).
    #[arg(long, env = "UPFCTL_CA_FILE", global = true, value_name = "PATH")]
    ca_file: Option<PathBuf>,
    /// Print the API's JSON as it is, not tables.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Version, readiness, Recovery Time Stamp, sessions, associations, data path.
    Status,
    /// The PFCP associations with their state and sessions.
    Associations,
    /// Sessions: a page of them in SEID order, or those with a TEID or UE address.
    Sessions {
        /// Sessions with this local TEID (decimal or 0x-hex).
        #[arg(long)]
        teid: Option<String>,
        /// Sessions with this UE address (IPv4 or IPv6).
        #[arg(long)]
        ue: Option<String>,
        /// Sessions per page (1-1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
        /// Start after this SEID (the `next` cursor a page printed).
        #[arg(long)]
        after: Option<String>,
    },
    /// One session whole: its rules and what each URR counted.
    Session {
        /// The UP SEID (0x-hex as listed, or decimal).
        seid: String,
    },
    /// Packets per interface and drop reason, N4 requests and rejections.
    Stats,
    /// Downlink packets buffered per session.
    Buffers,
    /// The applications PDRs may name and their PFDs (configured, or from the SMF's PFD
    /// Management).
    Applications,
    /// Whether upfd is ready (exit 0) or not (exit 1, with the reason).
    Ready,
}

/// What a run printed, and its exit code: 0 done (ready), 1 not ready, 2 an error
/// (printed on standard error, as are the usage errors clap gives).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub code: u8,
    pub stdout: String,
    pub stderr: String,
}

/// Run upfctl with `args` (the first is the program's name, as in `std::env::args`).
pub fn execute<I, T>(args: I) -> Outcome
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let text = e.render().to_string();
            return Outcome {
                code,
                stdout: if code == 0 {
                    text.clone()
                } else {
                    String::new()
                },
                stderr: if code == 0 { String::new() } else { text },
            };
        }
    };
    match run(&cli) {
        Ok((code, stdout)) => Outcome {
            code,
            stdout,
            stderr: String::new(),
        },
        Err(e) => Outcome {
            code: 2,
            stdout: String::new(),
            stderr: format!("upfctl: {e:#}\n"),
        },
    }
}

fn run(cli: &Cli) -> anyhow::Result<(u8, String)> {
    let (path, show): (String, fn(&Value) -> String) = match &cli.cmd {
        Cmd::Status => ("/api/v1/status".into(), show_status),
        Cmd::Associations => ("/api/v1/associations".into(), show_associations),
        Cmd::Sessions {
            teid,
            ue,
            limit,
            after,
        } => {
            let mut q = vec![format!("limit={limit}")];
            if let Some(t) = teid {
                q.push(format!("teid={}", encode(t)));
            }
            if let Some(u) = ue {
                q.push(format!("ue={}", encode(u)));
            }
            if let Some(a) = after {
                q.push(format!("after={}", encode(a)));
            }
            (format!("/api/v1/sessions?{}", q.join("&")), show_sessions)
        }
        Cmd::Session { seid } => (format!("/api/v1/sessions/{}", encode(seid)), show_session),
        Cmd::Stats => ("/api/v1/stats".into(), show_stats),
        Cmd::Buffers => ("/api/v1/buffers".into(), show_buffers),
        Cmd::Applications => ("/api/v1/applications".into(), show_applications),
        Cmd::Ready => ("/readyz".into(), show_ready),
    };
    let token = token(cli.token_file.as_deref())?;
    let (status, body) = get(&cli.api, &path, token.as_deref(), cli.ca_file.as_deref())?;
    if status == 401 {
        bail!(
            "{path}: HTTP 401: upfd wants the bearer token of its api.token_file: {} (set UPFCTL_TOKEN to the token, or --token-file / UPFCTL_TOKEN_FILE to a file holding it)",
            if token.is_some() {
                "the token given is not it"
            } else {
                "none was given"
            }
        );
    }
    let v: Value = serde_json::from_str(&body)
        .with_context(|| format!("{path}: the answer is not JSON: {body:.200}"))?;
    if status != 200 && !matches!(cli.cmd, Cmd::Ready) {
        bail!(
            "{path}: HTTP {status}: {}",
            v["error"].as_str().unwrap_or(&body)
        );
    }
    let out = if cli.json {
        serde_json::to_string_pretty(&v)? + "\n"
    } else {
        show(&v)
    };
    Ok((u8::from(status != 200), out))
}

/// Percent-encode what a query value or path segment may not hold as it is.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'.' | b'-' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The token to send: `UPFCTL_TOKEN`, else the content of the token file (without
/// surrounding white space), else none.
fn token(file: Option<&std::path::Path>) -> anyhow::Result<Option<String>> {
    if let Some(t) = std::env::var("UPFCTL_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty())
    {
        return Ok(Some(t.trim().to_string()));
    }
    let Some(f) = file else {
        return Ok(None);
    };
    let t = std::fs::read_to_string(f)
        .with_context(|| format!("--token-file {}: cannot read it", f.display()))?;
    let t = t.trim();
    if t.is_empty() {
        bail!("--token-file {}: empty", f.display());
    }
    Ok(Some(t.to_string()))
}

/// GET `path` from the API (with the bearer token if any): status code and body.
fn get(
    api: &str,
    path: &str,
    token: Option<&str>,
    ca_file: Option<&std::path::Path>,
) -> anyhow::Result<(u16, String)> {
    let (scheme, host) = match api.split_once("://") {
        Some((s @ ("http" | "https"), rest)) => (s, rest),
        Some((s, _)) => bail!("--api {api}: scheme {s:?}; use http:// or https://"),
        None => ("http", api),
    };
    let host = host.trim_end_matches('/');
    let mut tls = ureq::tls::TlsConfig::builder();
    if let Some(f) = ca_file {
        let pem = std::fs::read(f)
            .with_context(|| format!("--ca-file {}: cannot read it", f.display()))?;
        let certs: Vec<ureq::tls::Certificate<'static>> = ureq::tls::parse_pem(&pem)
            .filter_map(|i| match i {
                Ok(ureq::tls::PemItem::Certificate(c)) => Some(Ok(c)),
                Ok(_) => None,
                Err(e) => Some(Err(e)),
            })
            .collect::<Result<_, _>>()
            .with_context(|| format!("--ca-file {}: not PEM", f.display()))?;
        if certs.is_empty() {
            bail!("--ca-file {}: no certificate in it", f.display());
        }
        tls = tls.root_certs(ureq::tls::RootCerts::new_with_certs(&certs));
    }
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .tls_config(tls.build())
        .http_status_as_error(false)
        .timeout_connect(Some(Duration::from_secs(5)))
        .timeout_global(Some(Duration::from_secs(30)))
        .user_agent(concat!("upfctl/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let mut req = agent.get(format!("{scheme}://{host}{path}"));
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    let mut resp = req.call().with_context(|| {
        format!("GET {path} from upfd's API at {host} (set --api or UPFCTL_API to its api.listen)")
    })?;
    let status = resp.status().as_u16();
    let body = resp
        .body_mut()
        .with_config()
        .limit(256 << 20)
        .read_to_string()
        .with_context(|| format!("reading upfd's answer to {path} from {host}"))?;
    Ok((status, body))
}

/// A table: a header row and rows, columns padded to their widest cell.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut width: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            width[i] = width[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let s: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = width[i]))
            .collect();
        s.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for r in rows {
        out += &line(r.clone());
    }
    out
}

/// A JSON value as a table cell: strings bare, null as "-", arrays joined.
fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) if a.is_empty() => "-".into(),
        Value::Array(a) => a.iter().map(cell).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

fn show_status(v: &Value) -> String {
    let mut out = format!(
        "upfd {}  node {}  N4 {}\nready: {}{}\nuptime: {} s  Recovery Time Stamp: {} ({})\nsessions: {}  data path: {}  state: {}\n",
        cell(&v["version"]),
        cell(&v["node_id"]),
        cell(&v["n4_address"]),
        cell(&v["ready"]),
        v["not_ready_because"]
            .as_str()
            .map(|r| format!(" ({r})"))
            .unwrap_or_default(),
        cell(&v["uptime_seconds"]),
        cell(&v["recovery_time"]),
        cell(&v["recovery_time_stamp"]),
        cell(&v["sessions"]),
        cell(&v["datapath"]["mode"]),
        cell(&v["state_directory"]),
    );
    if let Some(a) = v["datapath"]["attached"].as_array() {
        for x in a {
            out += &format!(
                "  {} on {} ({} mode)\n",
                cell(&x["reference_point"]),
                cell(&x["interface"]),
                cell(&x["mode"])
            );
        }
    }
    out += "\n";
    out + &show_associations(&v["associations"])
}

fn show_associations(v: &Value) -> String {
    let rows: Vec<Vec<String>> = v
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    vec![
                        cell(&x["node_id"]),
                        cell(&x["address"]),
                        cell(&x["state"]),
                        cell(&x["sessions"]),
                        cell(&x["recovery_time"]),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    if rows.is_empty() {
        return "no associations\n".into();
    }
    table(
        &["NODE ID", "ADDRESS", "STATE", "SESSIONS", "RECOVERY TIME"],
        &rows,
    )
}

fn show_sessions(v: &Value) -> String {
    let list = v["sessions"].as_array().cloned().unwrap_or_default();
    // Lookups by TEID or UE address answer whole sessions.
    if list.first().is_some_and(|s| s.get("pdrs").is_some()) {
        return list.iter().map(show_session).collect::<Vec<_>>().join("\n");
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|s| {
            let r = &s["rules"];
            vec![
                cell(&s["seid"]),
                cell(&s["cp_node_id"]),
                cell(&s["cp_seid"]),
                cell(&s["ue_addresses"]),
                cell(&s["teids"]),
                format!(
                    "{}/{}/{}/{}",
                    cell(&r["pdrs"]),
                    cell(&r["fars"]),
                    cell(&r["qers"]),
                    cell(&r["urrs"])
                ),
            ]
        })
        .collect();
    let mut out = if rows.is_empty() {
        "no sessions\n".to_string()
    } else {
        table(
            &["SEID", "SMF", "CP SEID", "UE", "TEIDS", "PDR/FAR/QER/URR"],
            &rows,
        )
    };
    if let Some(total) = v["total"].as_u64() {
        out += &format!("{} of {total} session(s)", rows.len());
        if let Some(next) = v["next"].as_str() {
            out += &format!("; next page: --after {next}");
        }
        out += "\n";
    }
    out
}

fn show_session(s: &Value) -> String {
    let mut out = format!(
        "session {}  SMF {} (CP SEID {} at {})  DNN {}\nUE {}  TEIDs {}\n",
        cell(&s["seid"]),
        cell(&s["cp_node_id"]),
        cell(&s["cp_seid"]),
        cell(&s["cp_address"]),
        cell(&s["dnn"]),
        cell(&s["ue_addresses"]),
        cell(&s["teids"]),
    );
    let rows = |k: &str, f: &dyn Fn(&Value) -> Vec<String>| -> Vec<Vec<String>> {
        s[k].as_array()
            .map(|a| a.iter().map(f).collect())
            .unwrap_or_default()
    };
    out += "\nPDRs\n";
    out += &table(
        &[
            "ID", "PREC", "SOURCE", "TEID", "UE IP", "SDF", "QFI", "FAR", "QERS", "URRS",
        ],
        &rows("pdrs", &|p| {
            vec![
                cell(&p["id"]),
                cell(&p["precedence"]),
                cell(&p["source_interface"]),
                cell(&p["local_fteid"]["teid"]),
                p["ue_ip"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|u| {
                                let mut x = vec![];
                                if !u["ipv4"].is_null() {
                                    x.push(cell(&u["ipv4"]));
                                }
                                if !u["ipv6"].is_null() {
                                    x.push(cell(&u["ipv6"]));
                                }
                                x.join(",")
                            })
                            .collect::<Vec<_>>()
                            .join(",")
                    })
                    .filter(|x| !x.is_empty())
                    .unwrap_or_else(|| "-".into()),
                p["sdf_filters"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|f| cell(&f["flow_description"]))
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                    .filter(|x| !x.is_empty())
                    .unwrap_or_else(|| "-".into()),
                cell(&p["qfis"]),
                cell(&p["far_id"]),
                cell(&p["qer_ids"]),
                cell(&p["urr_ids"]),
            ]
        }),
    );
    out += "\nFARs\n";
    out += &table(
        &["ID", "ACTION", "TO", "TUNNEL (TEID@PEER)", "BAR"],
        &rows("fars", &|f| {
            let w = &f["forwarding"];
            let ohc = &w["outer_header_creation"];
            vec![
                cell(&f["id"]),
                cell(&f["apply_action"]),
                cell(&w["destination_interface"]),
                if ohc.is_null() {
                    "-".into()
                } else {
                    format!(
                        "{}@{}",
                        cell(&ohc["teid"]),
                        if ohc["ipv4"].is_null() {
                            cell(&ohc["ipv6"])
                        } else {
                            cell(&ohc["ipv4"])
                        }
                    )
                },
                cell(&f["bar_id"]),
            ]
        }),
    );
    if s["qers"].as_array().is_some_and(|a| !a.is_empty()) {
        out += "\nQERs\n";
        out += &table(
            &[
                "ID",
                "GATE UL/DL",
                "MBR UL/DL kbit/s",
                "GBR UL/DL kbit/s",
                "QFI",
            ],
            &rows("qers", &|q| {
                vec![
                    cell(&q["id"]),
                    format!("{}/{}", cell(&q["gate_ul"]), cell(&q["gate_dl"])),
                    format!("{}/{}", cell(&q["mbr_ul_kbps"]), cell(&q["mbr_dl_kbps"])),
                    format!("{}/{}", cell(&q["gbr_ul_kbps"]), cell(&q["gbr_dl_kbps"])),
                    cell(&q["qfi"]),
                ]
            }),
        );
    }
    if s["urrs"].as_array().is_some_and(|a| !a.is_empty()) {
        out += "\nURRs (counted since created; since the last report)\n";
        out += &table(
            &[
                "ID",
                "METHOD",
                "TRIGGERS",
                "UL PKTS",
                "UL BYTES",
                "DL PKTS",
                "DL BYTES",
                "UNREPORTED BYTES",
                "REPORTS",
            ],
            &rows("urrs", &|u| {
                let m = &u["measured"];
                let c = &m["since_created"];
                vec![
                    cell(&u["id"]),
                    cell(&u["measurement_method"]),
                    cell(&u["reporting_triggers"]),
                    cell(&c["ul_packets"]),
                    cell(&c["ul_bytes"]),
                    cell(&c["dl_packets"]),
                    cell(&c["dl_bytes"]),
                    cell(&m["since_last_report"]["total_bytes"]),
                    cell(&m["reports_sent"]),
                ]
            }),
        );
    }
    out
}

fn show_stats(v: &Value) -> String {
    let mut out = String::new();
    let d = &v["datapath"];
    if d.is_null() {
        out += "no data path (datapath.mode: none)\n";
    } else {
        let rows: Vec<Vec<String>> = d["interfaces"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|i| {
                        vec![
                            cell(&i["interface"]),
                            cell(&i["in"]["packets"]),
                            cell(&i["in"]["bytes"]),
                            cell(&i["out"]["packets"]),
                            cell(&i["out"]["bytes"]),
                        ]
                    })
                    .collect()
            })
            .unwrap_or_default();
        out += &table(
            &["INTERFACE", "IN PKTS", "IN BYTES", "OUT PKTS", "OUT BYTES"],
            &rows,
        );
        let drops: Vec<Vec<String>> = d["drops"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|x| x["packets"].as_u64().unwrap_or(0) > 0)
                    .map(|x| vec![cell(&x["reason"]), cell(&x["packets"]), cell(&x["bytes"])])
                    .collect()
            })
            .unwrap_or_default();
        out += "\n";
        if drops.is_empty() {
            out += "no drops\n";
        } else {
            out += &table(&["DROP REASON", "PACKETS", "BYTES"], &drops);
        }
    }
    let n4 = &v["n4"];
    let mut rows: Vec<Vec<String>> = Vec::new();
    if let Some(a) = n4["requests"].as_array() {
        for r in a {
            let rejected = n4["rejections"]
                .as_array()
                .and_then(|x| x.iter().find(|j| j["type"] == r["type"]))
                .map(|j| cell(&j["count"]))
                .unwrap_or_else(|| "0".into());
            rows.push(vec![cell(&r["type"]), cell(&r["count"]), rejected]);
        }
    }
    out += "\n";
    out += &table(&["N4 REQUEST", "RECEIVED", "REJECTED"], &rows);
    out += &format!(
        "malformed {}  duplicates {}  timeouts {}  congestion rejections {}  load {} %\n",
        cell(&n4["malformed"]),
        cell(&n4["duplicates"]),
        cell(&n4["timeouts"]),
        cell(&n4["congestion_rejections"]),
        cell(&n4["load_percent"])
    );
    out
}

fn show_buffers(v: &Value) -> String {
    let rows: Vec<Vec<String>> = v["sessions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|b| {
                    vec![
                        cell(&b["seid"]),
                        cell(&b["far_id"]),
                        cell(&b["packets"]),
                        cell(&b["octets"]),
                        cell(&b["oldest_ms"]),
                        cell(&b["smf_notified"]),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    let mut out = format!("{} packet(s) buffered\n", cell(&v["buffered_packets"]));
    if !rows.is_empty() {
        out += &table(
            &[
                "SEID",
                "FAR",
                "PACKETS",
                "OCTETS",
                "OLDEST ms",
                "SMF NOTIFIED",
            ],
            &rows,
        );
    }
    out
}

fn show_applications(v: &Value) -> String {
    let rows: Vec<Vec<String>> = v["applications"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| {
                    let domains: Vec<String> = x["domain_names"]
                        .as_array()
                        .map(|d| {
                            d.iter()
                                .map(|n| {
                                    format!("{} ({})", cell(&n["name"]), cell(&n["protocols"]))
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    vec![
                        cell(&x["id"]),
                        cell(&x["index"]),
                        cell(&x["source"]),
                        cell(&x["flow_descriptions"]),
                        cell(&x["urls"]),
                        if domains.is_empty() {
                            "-".into()
                        } else {
                            domains.join(", ")
                        },
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    if rows.is_empty() {
        return "no applications\n".into();
    }
    table(
        &["ID", "INDEX", "SOURCE", "FLOWS", "URLS", "DOMAINS"],
        &rows,
    )
}

fn show_ready(v: &Value) -> String {
    match v["ready"].as_bool() {
        Some(true) => "ready\n".into(),
        _ => format!("not ready: {}\n", cell(&v["reason"])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_columns_and_cells_read_plainly() {
        let t = table(
            &["A", "LONGER"],
            &[vec!["xyz".into(), "1".into()], vec!["b".into(), "-".into()]],
        );
        assert_eq!(t, "A    LONGER\nxyz  1\nb    -\n");
        assert_eq!(cell(&serde_json::json!(null)), "-");
        assert_eq!(cell(&serde_json::json!(["a", 2])), "a,2");
        assert_eq!(encode("2001:db8::1"), "2001%3Adb8%3A%3A1");
    }
}
