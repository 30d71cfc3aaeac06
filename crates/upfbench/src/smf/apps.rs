//! Applications in the SMF emulator (TS 29.244 clause 5.11, docs/application-detection.md):
//! the PFDs it provisions with PFD Management ([`AppPfds`], clause 6.2.5), the application
//! PDRs each session gets ([`AppRule`]), and usage summed per URR ([`UsageTotals`]) so
//! a test can compare an application's reports with what crossed.
//!
//! Each [`AppRule`] `k` (0-based) adds to every session, beside the default PDRs 1 and 2:
//! - PDR `3 + 2k` uplink and `4 + 2k` downlink, PDI Application ID, the same F-TEID / UE
//!   address as the default ones (CHOOSE ID 1 when the UPF chooses, so both uplink PDRs
//!   share the tunnel), precedence `100 + k` (before the default PDRs' 200);
//! - FARs `3 + 2k`, `4 + 2k`: forwarding like the default FARs;
//! - URR `2 + k`: volume, VOLTH (the session's threshold), START if asked;
//! - QER `2 + k` if the rule closes the gate or sets an MBR, applied with the session QER 1.
//!
//! PFD files (`upfbench smf --pfds FILE`) are JSON: a list of
//! `{"id": "video", "domains": ["video.test"], "urls": ["http://video.test/clip"],
//! "flows": ["permit out tcp from 192.168.6.20 to assigned"]}`; an application without
//! any PFD has its PFDs removed.

use std::collections::BTreeMap;
use std::path::Path;

use pfcp::ie::{PfdContents, Text};
use pfcp::msg::{ApplicationIdsPfds, PfdContext, PfdManagementRequest, UsageReport};
use serde::{Deserialize, Serialize};

/// One application's PFDs, as sent in one Application ID's PFDs IE: all of them replace
/// what the UPF had for that application.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppPfds {
    /// The Application ID.
    pub id: String,
    /// Domain names (PFD Contents DN), each with every name below it.
    #[serde(default)]
    pub domains: Vec<String>,
    /// URLs (PFD Contents URL), `http://host/path` or `https://host`.
    #[serde(default)]
    pub urls: Vec<String>,
    /// Flow descriptions (PFD Contents FD), IPFilterRules.
    #[serde(default)]
    pub flows: Vec<String>,
}

impl AppPfds {
    /// The Application ID's PFDs IE: one PFD context with a PFD Contents per PFD; no PFD
    /// context when there is no PFD (which removes the application's PFDs).
    pub fn to_ie(&self) -> ApplicationIdsPfds {
        let mut contents = Vec::new();
        for d in &self.domains {
            contents.push(PfdContents {
                domain_name: Some(Text::new(d)),
                ..PfdContents::default()
            });
        }
        for u in &self.urls {
            contents.push(PfdContents {
                url: Some(Text::new(u)),
                ..PfdContents::default()
            });
        }
        for f in &self.flows {
            contents.push(PfdContents {
                flow_description: Some(Text::new(f)),
                ..PfdContents::default()
            });
        }
        ApplicationIdsPfds {
            application_id: Text::new(&self.id),
            pfd_contexts: if contents.is_empty() {
                vec![]
            } else {
                vec![PfdContext {
                    pfd_contents: contents,
                    other: vec![],
                }]
            },
            other: vec![],
        }
    }
}

/// A PFD Management Request provisioning `apps` (clause 7.4.3.1).
pub fn pfd_management_request(apps: &[AppPfds]) -> PfdManagementRequest {
    PfdManagementRequest {
        application_ids_pfds: apps.iter().map(AppPfds::to_ie).collect(),
        node_id: None,
        other: vec![],
    }
}

/// PFDs from a JSON file (a list of [`AppPfds`]).
pub fn load_pfds(path: &Path) -> Result<Vec<AppPfds>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// An application's PDRs in every session, and what they do with its traffic.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AppRule {
    /// The Application ID in both PDIs.
    pub id: String,
    /// A QER with both gates closed: the application's traffic is dropped.
    pub gate_closed: bool,
    /// A QER with this MBR, uplink and downlink, kbit/s.
    pub mbr_kbps: Option<u64>,
    /// Reporting trigger START in the application's URR (Application Detection
    /// Information when a flow of it starts).
    pub start: bool,
}

impl AppRule {
    /// The application's own QER, if it needs one.
    pub fn has_qer(&self) -> bool {
        self.gate_closed || self.mbr_kbps.is_some()
    }
}

impl std::str::FromStr for AppRule {
    type Err = String;
    /// `ID[:OPTION,...]`, options `gate=closed`, `mbr=KBPS`, `start`; e.g.
    /// `video:mbr=2000,start`, `chat:gate=closed`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (id, opts) = s.split_once(':').unwrap_or((s, ""));
        if id.is_empty() {
            return Err(format!("{s:?}: an Application ID first"));
        }
        let mut r = AppRule {
            id: id.to_string(),
            ..AppRule::default()
        };
        for o in opts.split(',').filter(|o| !o.is_empty()) {
            match o.split_once('=') {
                Some(("gate", "closed")) => r.gate_closed = true,
                Some(("gate", "open")) => r.gate_closed = false,
                Some(("mbr", v)) => {
                    r.mbr_kbps = Some(v.parse().map_err(|e| format!("{s:?}: mbr {v:?}: {e}"))?)
                }
                None if o == "start" => r.start = true,
                _ => {
                    return Err(format!(
                        "{s:?}: unknown option {o:?} (gate=closed, mbr=KBPS, start)"
                    ))
                }
            }
        }
        Ok(r)
    }
}

/// Rule IDs of application `k`'s PDRs, FARs, URR and QER in each session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppIds {
    pub pdr_ul: u16,
    pub pdr_dl: u16,
    pub far_ul: u32,
    pub far_dl: u32,
    pub urr: u32,
    pub qer: u32,
    pub precedence: u32,
}

impl AppIds {
    pub fn of(k: usize) -> AppIds {
        AppIds {
            pdr_ul: 3 + 2 * k as u16,
            pdr_dl: 4 + 2 * k as u16,
            far_ul: 3 + 2 * k as u32,
            far_dl: 4 + 2 * k as u32,
            urr: 2 + k as u32,
            qer: 2 + k as u32,
            precedence: 100 + k as u32,
        }
    }
}

/// Usage reported for one URR, summed over reports (and sessions).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct UsageTotals {
    pub reports: u64,
    pub total: u64,
    pub uplink: u64,
    pub downlink: u64,
    pub total_packets: u64,
    pub uplink_packets: u64,
    pub downlink_packets: u64,
    /// Reports with Application Detection Information (START/STOP).
    pub app_detections: u64,
}

impl UsageTotals {
    pub fn add(&mut self, r: &UsageReport) {
        self.reports += 1;
        if let Some(v) = &r.volume_measurement {
            self.total += v.total.unwrap_or(0);
            self.uplink += v.uplink.unwrap_or(0);
            self.downlink += v.downlink.unwrap_or(0);
            self.total_packets += v.total_packets.unwrap_or(0);
            self.uplink_packets += v.uplink_packets.unwrap_or(0);
            self.downlink_packets += v.downlink_packets.unwrap_or(0);
        }
        if r.application_detection_information.is_some() {
            self.app_detections += 1;
        }
    }
}

/// Usage per URR ID.
pub type UsageByUrr = BTreeMap<u32, UsageTotals>;

/// Add every report of `reports` to `into`, by URR ID.
pub fn add_usage<'a>(into: &mut UsageByUrr, reports: impl IntoIterator<Item = &'a UsageReport>) {
    for r in reports {
        into.entry(r.urr_id).or_default().add(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pfcp::msg;

    #[test]
    fn rules_parse() {
        let r: AppRule = "video:mbr=2000,start".parse().unwrap();
        assert_eq!(
            r,
            AppRule {
                id: "video".into(),
                gate_closed: false,
                mbr_kbps: Some(2000),
                start: true
            }
        );
        let r: AppRule = "chat:gate=closed".parse().unwrap();
        assert!(r.gate_closed && r.has_qer());
        assert!(!"plain".parse::<AppRule>().unwrap().has_qer());
        assert!("x:mbr=fast".parse::<AppRule>().is_err());
        assert!("x:wat".parse::<AppRule>().is_err());
        assert!(":start".parse::<AppRule>().is_err());
    }

    #[test]
    fn pfd_management_round_trips() {
        let apps = vec![
            AppPfds {
                id: "video".into(),
                domains: vec!["video.test".into()],
                urls: vec!["http://video.test/clip".into()],
                flows: vec!["permit out tcp from 192.168.6.20 to assigned".into()],
            },
            AppPfds {
                id: "gone".into(),
                ..AppPfds::default()
            },
        ];
        let req = pfd_management_request(&apps);
        let bytes = msg::emit(&pfcp::HeaderRepr::node(0, 9), &req);
        let (_, back) = msg::parse::<PfdManagementRequest>(&bytes).unwrap();
        assert_eq!(back, req);
        assert_eq!(
            back.application_ids_pfds[0].pfd_contexts[0]
                .pfd_contents
                .len(),
            3
        );
        assert!(back.application_ids_pfds[1].pfd_contexts.is_empty());
        let json = r#"[{"id":"chat","domains":["chat.test"]}]"#;
        let parsed: Vec<AppPfds> = serde_json::from_str(json).unwrap();
        assert_eq!(parsed[0].domains, vec!["chat.test".to_string()]);
        assert!(parsed[0].urls.is_empty());
    }
}
