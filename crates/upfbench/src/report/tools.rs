//! What a phone's apps see through the UPF: ping and iperf3 from a UE of the gNB/UE
//! emulator to the data network, as the report keeps them, and the readers of the tools'
//! output.

use serde::{Deserialize, Serialize};

use super::Direction;

/// `ping` from a UE through the UPF.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PingResult {
    /// The UE's address (the source).
    pub from: String,
    /// The address pinged (on the data network).
    pub to: String,
    /// Echo Requests sent.
    pub transmitted: u32,
    /// Echo Replies received.
    pub received: u32,
    pub loss_pct: f64,
    /// Round-trip times, milliseconds, when any reply came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<Rtt>,
    /// Why there is no figure, when ping could not be run or said nothing usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// ping's round-trip summary, milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rtt {
    pub min: f64,
    pub avg: f64,
    pub max: f64,
    pub mdev: f64,
}

impl PingResult {
    /// A ping that has no figures: `error` says why.
    pub fn failed(from: &str, to: &str, error: impl Into<String>) -> PingResult {
        PingResult {
            from: from.to_string(),
            to: to.to_string(),
            transmitted: 0,
            received: 0,
            loss_pct: 0.0,
            rtt_ms: None,
            error: Some(error.into()),
        }
    }

    /// Reads the summary of iputils `ping` (with or without `-q`):
    ///
    /// ```text
    /// 3 packets transmitted, 3 received, 0% packet loss, time 405ms
    /// rtt min/avg/max/mdev = 0.052/0.066/0.079/0.011 ms
    /// ```
    pub fn parse(from: &str, to: &str, output: &str) -> PingResult {
        let Some(counts) = output.lines().find(|l| l.contains("packets transmitted")) else {
            let said = output.trim();
            return PingResult::failed(
                from,
                to,
                if said.is_empty() {
                    "ping printed no summary".to_string()
                } else {
                    format!("ping printed no summary: {}", last_line(said))
                },
            );
        };
        let mut r = PingResult::failed(from, to, "");
        r.error = None;
        for part in counts.split(',').map(str::trim) {
            let mut w = part.split_whitespace();
            let (Some(n), Some(what)) = (w.next(), w.next()) else {
                continue;
            };
            match what {
                "packets" => r.transmitted = n.parse().unwrap_or(0),
                "received" => r.received = n.parse().unwrap_or(0),
                "packet" => r.loss_pct = n.trim_end_matches('%').parse().unwrap_or(0.0),
                _ => {}
            }
        }
        if let Some(rtt) = output
            .lines()
            .find(|l| l.starts_with("rtt ") || l.starts_with("round-trip"))
        {
            let v: Vec<f64> = rtt
                .split('=')
                .nth(1)
                .unwrap_or("")
                .trim()
                .trim_end_matches("ms")
                .trim()
                .split('/')
                .filter_map(|x| x.parse().ok())
                .collect();
            if let [min, avg, max, mdev] = v[..] {
                r.rtt_ms = Some(Rtt {
                    min,
                    avg,
                    max,
                    mdev,
                });
            }
        }
        if r.transmitted == 0 {
            r.error = Some(format!("ping sent nothing: {counts}"));
        }
        r
    }
}

/// One iperf3 run from a UE through the UPF.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Iperf3Result {
    /// Uplink: the UE sends; downlink: the data network sends (`iperf3 -R`).
    pub direction: Direction,
    /// "TCP" or "UDP".
    pub protocol: String,
    /// The UE's address.
    pub ue: String,
    /// The iperf3 server's address (on the data network).
    pub server: String,
    /// Duration asked for, seconds.
    pub seconds: f64,
    /// Received by the far end, Gbit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gbps: Option<f64>,
    /// TCP retransmissions of the sender.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// Why there is no figure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Iperf3Result {
    /// Reads `iperf3 -J` output (the client's JSON): `end.sum_received.bits_per_second`,
    /// `end.sum_sent.retransmits`, else `error`.
    pub fn from_json(
        direction: Direction,
        ue: &str,
        server: &str,
        seconds: f64,
        json: &[u8],
    ) -> Iperf3Result {
        let mut r = Iperf3Result {
            direction,
            protocol: "TCP".to_string(),
            ue: ue.to_string(),
            server: server.to_string(),
            seconds,
            gbps: None,
            retransmits: None,
            error: None,
        };
        let v: serde_json::Value = match serde_json::from_slice(json) {
            Ok(v) => v,
            Err(e) => {
                let text = String::from_utf8_lossy(json);
                r.error = Some(if text.trim().is_empty() {
                    "iperf3 printed nothing".to_string()
                } else {
                    format!("iperf3 output is not JSON ({e}): {}", last_line(&text))
                });
                return r;
            }
        };
        if v["start"]["test_start"]["protocol"].as_str() == Some("UDP") {
            r.protocol = "UDP".to_string();
        }
        r.gbps = v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .map(|b| b / 1e9);
        r.retransmits = v["end"]["sum_sent"]["retransmits"].as_u64();
        if r.gbps.is_none() {
            r.error = Some(
                v["error"]
                    .as_str()
                    .unwrap_or("no end.sum_received in iperf3's JSON")
                    .to_string(),
            );
        }
        r
    }

    /// An iperf3 run that has no figures: `error` says why.
    pub fn failed(
        direction: Direction,
        ue: &str,
        server: &str,
        seconds: f64,
        error: impl Into<String>,
    ) -> Iperf3Result {
        Iperf3Result {
            direction,
            protocol: "TCP".to_string(),
            ue: ue.to_string(),
            server: server.to_string(),
            seconds,
            gbps: None,
            retransmits: None,
            error: Some(error.into()),
        }
    }
}

fn last_line(s: &str) -> &str {
    s.trim().lines().last().unwrap_or("").trim()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pings_summary() {
        let out = "PING 192.168.6.1 (192.168.6.1) from 10.45.0.1 : 56(84) bytes of data.\n\
                   \n--- 192.168.6.1 ping statistics ---\n\
                   3 packets transmitted, 3 received, 0% packet loss, time 405ms\n\
                   rtt min/avg/max/mdev = 0.052/0.066/0.079/0.011 ms\n";
        let p = PingResult::parse("10.45.0.1", "192.168.6.1", out);
        assert_eq!((p.transmitted, p.received, p.loss_pct), (3, 3, 0.0));
        assert_eq!(
            p.rtt_ms,
            Some(Rtt {
                min: 0.052,
                avg: 0.066,
                max: 0.079,
                mdev: 0.011
            })
        );
        assert_eq!(p.error, None);
    }

    #[test]
    fn reads_a_ping_without_answers() {
        let out = "--- 192.168.6.1 ping statistics ---\n\
                   3 packets transmitted, 0 received, +3 errors, 100% packet loss, time 2046ms\n";
        let p = PingResult::parse("10.45.0.1", "192.168.6.1", out);
        assert_eq!((p.transmitted, p.received, p.loss_pct), (3, 0, 100.0));
        assert_eq!((p.rtt_ms, p.error), (None, None));
        let p = PingResult::parse("10.45.0.1", "192.168.6.1", "ping: bind: Cannot assign\n");
        assert_eq!(
            p.error.as_deref(),
            Some("ping printed no summary: ping: bind: Cannot assign")
        );
    }

    #[test]
    fn reads_iperf3_json() {
        let json = br#"{"start":{"test_start":{"protocol":"TCP"}},
            "end":{"sum_sent":{"bits_per_second":2.95e9,"retransmits":12},
                   "sum_received":{"bits_per_second":2.9e9}}}"#;
        let r = Iperf3Result::from_json(Direction::Uplink, "10.45.0.1", "192.168.6.1", 3.0, json);
        assert_eq!(r.gbps, Some(2.9));
        assert_eq!(r.retransmits, Some(12));
        assert_eq!(r.error, None);
        let r = Iperf3Result::from_json(
            Direction::Downlink,
            "10.45.0.1",
            "192.168.6.1",
            3.0,
            br#"{"start":{},"end":{},"error":"unable to connect to server: Connection timed out"}"#,
        );
        assert_eq!(r.gbps, None);
        assert_eq!(
            r.error.as_deref(),
            Some("unable to connect to server: Connection timed out")
        );
        let r = Iperf3Result::from_json(Direction::Uplink, "a", "b", 3.0, b"");
        assert_eq!(r.error.as_deref(), Some("iperf3 printed nothing"));
    }
}
