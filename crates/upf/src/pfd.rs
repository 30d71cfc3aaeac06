//! Packet Flow Descriptions: what identifies an application's traffic (TS 29.244 clause
//! 5.11, 8.2.39), provisioned per Application ID by the SMF over PFD Management (clause
//! 6.2.5, 7.4.3) or configured locally (for predefined rules). [`PfdTable`] holds them
//! with a small index per Application ID that the data paths use; what the data path
//! detects with them is docs/application-detection.md.
//!
//! Only this file turns PFD Contents into [`AppPfds`]: the data path's compiler and the
//! reference model both read the result, each with its own matching.

use std::collections::BTreeMap;
use std::fmt;

use pfcp::ie::{types, CauseValue, PfdContents};
use pfcp::msg::{ApplicationIdsPfds, PfdManagementRequest};

use crate::abi;
use crate::sdf::SdfRule;

/// A domain name of a PFD (clause 8.2.39, DN) and the protocols it applies to (DNP).
/// The name is lower case without a trailing dot or a leading `*.`: it stands for itself
/// and every name below it (`example.com`: `example.com`, `www.example.com`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    pub name: String,
    /// `abi::APP_P_*` bits; 0: a protocol the data path cannot see (TLS_SAN, TLS_SCN).
    pub protocols: u8,
}

/// A URL of a PFD (clause 8.2.39, URL): `http://host[:port]/path...` matches HTTP
/// requests for `host` whose request-target starts with `path`. An `https://` URL's path
/// is encrypted: it is kept as the domain name `host` with protocol TLS SNI instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    /// Lower case, without port.
    pub host: String,
    /// Starts with `/`; case as given (paths are case-sensitive).
    pub path: String,
}

/// Every PFD of one application, all PFD contexts together.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AppPfds {
    /// Flow descriptions (FD, AFD): matched like SDF filters, downlink-oriented.
    pub flows: Vec<SdfRule>,
    /// The flow descriptions as received, for the API.
    pub flow_texts: Vec<String>,
    pub domains: Vec<Domain>,
    /// `http://` URLs.
    pub urls: Vec<Url>,
}

impl AppPfds {
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty() && self.domains.is_empty() && self.urls.is_empty()
    }
}

/// One Application ID: its data path index and its PFDs.
#[derive(Debug, Clone, PartialEq)]
pub struct App {
    pub id: String,
    /// 1..APP_MAX, stable while upfd runs: PDRs and flow entries refer to it.
    pub index: u16,
    pub pfds: AppPfds,
    /// Configured in upfd's file (`applications`), not by an SMF.
    pub local: bool,
}

/// Why PFDs were refused: the Cause and Offending IE of the PFD Management Response
/// (clause 7.4.3.2), or the configuration's complaint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PfdError {
    pub cause: CauseValue,
    pub offending_ie: u16,
    pub app: String,
    pub why: String,
}

impl fmt::Display for PfdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "application {:?}: {}", self.app, self.why)
    }
}

impl std::error::Error for PfdError {}

/// The PFDs of every application upfd knows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PfdTable {
    apps: BTreeMap<String, App>,
    next_index: u16,
}

/// A domain name as the data path compares it: lower case, the characters of host names
/// (letters, digits, `-`, `_`), labels of 1..=63 octets, at most APP_NAME_MAX octets.
/// None if `name` is not one.
pub fn normalize_name(name: &str) -> Option<String> {
    let n = name.trim_end_matches('.').to_ascii_lowercase();
    let n = n.strip_prefix("*.").unwrap_or(&n).to_string();
    if n.is_empty() || n.len() > abi::APP_NAME_MAX as usize {
        return None;
    }
    let label_ok = |l: &str| {
        (1..=63).contains(&l.len())
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
    };
    n.split('.').all(label_ok).then_some(n)
}

/// The Domain Name Protocol (clause 8.2.39, TS 29.122 DomainNameProtocol) as APP_P_*
/// bits; None (absent): DNS, SNI and HTTP Host.
fn protocols(dnp: Option<&str>) -> Result<u8, String> {
    Ok(match dnp.map(|s| s.trim().to_ascii_uppercase()) {
        None => (abi::APP_P_DNS | abi::APP_P_SNI | abi::APP_P_HOST) as u8,
        Some(p) => match p.as_str() {
            "DNS_QNAME" => abi::APP_P_DNS as u8,
            "TLS_SNI" => abi::APP_P_SNI as u8,
            // The certificate is encrypted in TLS 1.3: kept, detects nothing.
            "TLS_SAN" | "TLS_SCN" | "TSL_SCN" => 0,
            _ => return Err(format!("unknown Domain Name Protocol {p:?}")),
        },
    })
}

/// Parse a PFD URL: `http://host[:port][/path]`, `https://...` (host only), or without a
/// scheme (http). Returns (host, path, https).
pub fn parse_url(url: &str) -> Result<(String, String, bool), String> {
    let (https, rest) = if let Some(r) = strip_prefix_ci(url, "https://") {
        (true, r)
    } else if let Some(r) = strip_prefix_ci(url, "http://") {
        (false, r)
    } else if url.contains("://") {
        return Err(format!(
            "URL {url:?}: only http:// and https:// are detected"
        ));
    } else {
        (false, url)
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], &rest[i..]),
        Some(i) => (&rest[..i], "/"),
        None => (rest, "/"),
    };
    let host = authority.rsplit('@').next().unwrap_or(authority);
    let host = match host.rfind(':') {
        Some(i) if host[i + 1..].bytes().all(|b| b.is_ascii_digit()) => &host[..i],
        _ => host,
    };
    let host = normalize_name(host).ok_or_else(|| format!("URL {url:?}: bad host"))?;
    if host.len() + path.len() > abi::APP_KEY_MAX as usize - 1 {
        return Err(format!(
            "URL {url:?}: host and path longer than {} octets",
            abi::APP_KEY_MAX - 1
        ));
    }
    if path.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(format!(
            "URL {url:?}: spaces or control characters in the path"
        ));
    }
    Ok((host, path.to_string(), https))
}

fn strip_prefix_ci<'a>(s: &'a str, p: &str) -> Option<&'a str> {
    (s.len() >= p.len() && s[..p.len()].eq_ignore_ascii_case(p)).then(|| &s[p.len()..])
}

/// A list of 2-octet-length-prefixed fields (clause 8.2.39, AFD / AURL / ADNP).
fn len16_list(v: &[u8]) -> Result<Vec<&[u8]>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < v.len() {
        let n = v
            .get(at..at + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
            .ok_or("a list field cut short")?;
        let f = v.get(at + 2..at + 2 + n).ok_or("a list field cut short")?;
        out.push(f);
        at += 2 + n;
    }
    Ok(out)
}

fn text(b: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(b).map_err(|_| "not UTF-8".to_string())
}

impl AppPfds {
    /// Add one flow description (a TS 29.212 IPFilterRule, "permit out ...").
    pub fn add_flow(&mut self, fd: &str) -> Result<(), String> {
        let rule = SdfRule::from_flow_description(fd)
            .and_then(|r| r.require_out().map(|_| r))
            .map_err(|e| format!("flow description: {e}"))?;
        if self.flows.len() >= abi::APP_MAX_FLOWS as usize {
            return Err(format!(
                "more than {} flow descriptions for one application",
                abi::APP_MAX_FLOWS
            ));
        }
        // The data path holds an application's flow descriptions in APP_MAX_SDF match
        // entries, one per port range pair: refused here rather than by set_pfds.
        let entries: usize = self.flows.iter().map(SdfRule::port_range_pairs).sum();
        if entries + rule.port_range_pairs() > abi::APP_MAX_SDF as usize {
            return Err(format!(
                "the application's flow descriptions need more than {} port range pairs",
                abi::APP_MAX_SDF
            ));
        }
        self.flows.push(rule);
        self.flow_texts.push(fd.to_string());
        Ok(())
    }

    pub fn add_url(&mut self, url: &str) -> Result<(), String> {
        let (host, path, https) = parse_url(url)?;
        if https {
            self.add_domain(&host, Some("TLS_SNI"))?;
        } else {
            let u = Url { host, path };
            if !self.urls.contains(&u) {
                self.urls.push(u);
            }
        }
        Ok(())
    }

    /// Add a domain name with its Domain Name Protocol (None: every protocol).
    pub fn add_domain(&mut self, name: &str, dnp: Option<&str>) -> Result<(), String> {
        let n = normalize_name(name).ok_or_else(|| format!("domain name {name:?} is not one"))?;
        let protocols = protocols(dnp)?;
        match self.domains.iter_mut().find(|d| d.name == n) {
            Some(d) => d.protocols |= protocols,
            None => self.domains.push(Domain { name: n, protocols }),
        }
        Ok(())
    }

    /// Add a domain name with its protocols as `abi::APP_P_*` bits (as [`Domain`] holds
    /// them: a table restored from the state).
    pub fn add_domain_bits(&mut self, name: &str, protocols: u8) -> Result<(), String> {
        let all = (abi::APP_P_DNS | abi::APP_P_SNI | abi::APP_P_HOST) as u8;
        if protocols & !all != 0 {
            return Err(format!(
                "domain name {name:?}: protocol bits {protocols:#x} are not DNS, SNI, Host"
            ));
        }
        let n = normalize_name(name).ok_or_else(|| format!("domain name {name:?} is not one"))?;
        match self.domains.iter_mut().find(|d| d.name == n) {
            Some(d) => d.protocols |= protocols,
            None => self.domains.push(Domain { name: n, protocols }),
        }
        Ok(())
    }

    /// Add one PFD Contents IE (clause 8.2.39).
    pub fn add_contents(&mut self, c: &PfdContents) -> Result<(), String> {
        if c.custom_pfd_content.is_some() {
            return Err("custom PFD content is not supported".into());
        }
        if let Some(fd) = &c.flow_description {
            self.add_flow(text(&fd.0)?)?;
        }
        if let Some(fds) = &c.additional_flow_descriptions {
            for fd in len16_list(&fds.0)? {
                self.add_flow(text(fd)?)?;
            }
        }
        if let Some(u) = &c.url {
            self.add_url(text(&u.0)?)?;
        }
        if let Some(us) = &c.additional_urls {
            for u in len16_list(&us.0)? {
                self.add_url(text(u)?)?;
            }
        }
        let dnp = match &c.domain_name_protocol {
            Some(p) => Some(text(&p.0)?),
            None => None,
        };
        if let Some(d) = &c.domain_name {
            self.add_domain(text(&d.0)?, dnp)?;
        } else if dnp.is_some() {
            return Err("a Domain Name Protocol without a Domain Name".into());
        }
        if let Some(ds) = &c.additional_domain_names_and_protocols {
            // Pairs: domain name, then its protocol (an empty one: every protocol).
            let l = len16_list(&ds.0)?;
            if l.len() % 2 != 0 {
                return Err("additional domain names without their protocols".into());
            }
            for pair in l.chunks(2) {
                let p = text(pair[1])?;
                self.add_domain(text(pair[0])?, (!p.is_empty()).then_some(p))?;
            }
        }
        Ok(())
    }
}

/// The PFDs of one Application ID's PFDs IE (clause 7.4.3.1): every PFD context's
/// contents together.
fn pfds_of(a: &ApplicationIdsPfds) -> Result<(String, AppPfds), PfdError> {
    let id = a.application_id.as_str().into_owned();
    let mut pfds = AppPfds::default();
    for ctx in &a.pfd_contexts {
        for c in &ctx.pfd_contents {
            pfds.add_contents(c).map_err(|why| PfdError {
                cause: if c.custom_pfd_content.is_some() {
                    CauseValue::SERVICE_NOT_SUPPORTED
                } else {
                    CauseValue::MANDATORY_IE_INCORRECT
                },
                offending_ie: types::PFD_CONTENTS,
                app: id.clone(),
                why,
            })?;
        }
    }
    Ok((id, pfds))
}

impl PfdTable {
    pub fn new() -> Self {
        PfdTable::default()
    }

    pub fn get(&self, id: &str) -> Option<&App> {
        self.apps.get(id)
    }

    /// The application with data path index `index`.
    pub fn by_index(&self, index: u16) -> Option<&App> {
        self.apps.values().find(|a| a.index == index)
    }

    /// Every application, by Application ID.
    pub fn iter(&self) -> impl Iterator<Item = &App> {
        self.apps.values()
    }

    pub fn len(&self) -> usize {
        self.apps.len()
    }

    pub fn is_empty(&self) -> bool {
        self.apps.is_empty()
    }

    /// Whether PDRs may name `id` (it has PFDs, or had: a PDR keeps its Application ID
    /// while the SMF replaces the PFDs).
    pub fn knows(&self, id: &str) -> bool {
        self.apps.contains_key(id)
    }

    /// Set an application's PFDs (replacing its previous ones), giving it an index if
    /// it is new. Err if APP_MAX applications are known.
    pub fn set(&mut self, id: &str, pfds: AppPfds, local: bool) -> Result<u16, PfdError> {
        if let Some(a) = self.apps.get_mut(id) {
            a.pfds = pfds;
            a.local = local;
            return Ok(a.index);
        }
        if u32::from(self.next_index) + 1 >= abi::APP_MAX {
            return Err(PfdError {
                cause: CauseValue::NO_RESOURCES_AVAILABLE,
                offending_ie: types::APPLICATION_ID,
                app: id.to_string(),
                why: format!("more than {} applications", abi::APP_MAX - 1),
            });
        }
        self.next_index += 1;
        let index = self.next_index;
        self.apps.insert(
            id.to_string(),
            App {
                id: id.to_string(),
                index,
                pfds,
                local,
            },
        );
        Ok(index)
    }

    /// Set an application with the data path index it had (a table restored from the
    /// state: PDRs and flows keep referring to the same application). Err if the index
    /// is out of 1..APP_MAX or another application has it, or the application has
    /// another.
    pub fn set_with_index(
        &mut self,
        id: &str,
        index: u16,
        pfds: AppPfds,
        local: bool,
    ) -> Result<(), PfdError> {
        let refuse = |why: String| PfdError {
            cause: CauseValue::SYSTEM_FAILURE,
            offending_ie: types::APPLICATION_ID,
            app: id.to_string(),
            why,
        };
        if index == 0 || u32::from(index) >= abi::APP_MAX {
            return Err(refuse(format!(
                "index {index} is not between 1 and {}",
                abi::APP_MAX - 1
            )));
        }
        if let Some(other) = self.apps.values().find(|a| a.index == index && a.id != id) {
            return Err(refuse(format!(
                "index {index} is application {:?}'s",
                other.id
            )));
        }
        if let Some(a) = self.apps.get(id) {
            if a.index != index {
                return Err(refuse(format!("has index {} already", a.index)));
            }
        }
        self.apps.insert(
            id.to_string(),
            App {
                id: id.to_string(),
                index,
                pfds,
                local,
            },
        );
        self.next_index = self.next_index.max(index);
        Ok(())
    }

    /// Take in the applications configured now (`configured`, all local) over a table
    /// restored from the state: an application of both keeps its index, and takes the
    /// configuration's PFDs unless an SMF provisioned it (an SMF's PFDs replace the
    /// configured ones, as at run time); a new one gets the next free index; a local one
    /// the configuration no longer has keeps its index without PFDs (PDRs naming it stay
    /// valid), as if an SMF had removed them. Returns the applications whose PFDs or
    /// origin changed.
    pub fn merge_configured(&mut self, configured: &PfdTable) -> Result<Vec<String>, PfdError> {
        let mut changed = Vec::new();
        for a in self.apps.values_mut() {
            if a.local && !configured.knows(&a.id) {
                a.local = false;
                a.pfds = AppPfds::default();
                changed.push(a.id.clone());
            }
        }
        for c in configured.iter() {
            match self.apps.get(&c.id) {
                Some(a) if !a.local => {}
                Some(a) if a.pfds == c.pfds => {}
                _ => {
                    self.set(&c.id, c.pfds.clone(), true)?;
                    changed.push(c.id.clone());
                }
            }
        }
        Ok(changed)
    }

    /// Apply a PFD Management Request (clause 6.2.5): each Application ID's PFDs IE
    /// replaces that application's PFDs; one without a PFD context removes them (the
    /// application stays known, with none, so PDRs naming it stay valid). A request
    /// with no Application ID's PFDs removes the PFDs of every application an SMF
    /// provisioned. All or nothing: on error nothing changed. Returns the applications
    /// whose PFDs changed.
    pub fn apply(&mut self, req: &PfdManagementRequest) -> Result<Vec<String>, PfdError> {
        let mut new = Vec::new();
        for a in &req.application_ids_pfds {
            new.push(pfds_of(a)?);
        }
        let mut next = self.clone();
        let mut changed = Vec::new();
        if new.is_empty() {
            for a in next.apps.values_mut().filter(|a| !a.local) {
                if !a.pfds.is_empty() {
                    a.pfds = AppPfds::default();
                    changed.push(a.id.clone());
                }
            }
        }
        for (id, pfds) in new {
            if next.get(&id).map(|a| &a.pfds) != Some(&pfds) {
                changed.push(id.clone());
            }
            next.set(&id, pfds, false)?;
        }
        *self = next;
        Ok(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_normalized_or_refused() {
        assert_eq!(
            normalize_name("WWW.Example.COM.").as_deref(),
            Some("www.example.com")
        );
        assert_eq!(
            normalize_name("*.example.com").as_deref(),
            Some("example.com")
        );
        assert_eq!(normalize_name("a..b"), None);
        assert_eq!(normalize_name(""), None);
        assert_eq!(normalize_name("exa mple.com"), None);
        assert_eq!(normalize_name(&"a".repeat(64)), None);
    }

    #[test]
    fn urls_split_into_host_and_path() {
        assert_eq!(
            parse_url("http://Video.Example.com:8080/v/a?x=1").unwrap(),
            ("video.example.com".into(), "/v/a?x=1".into(), false)
        );
        assert_eq!(
            parse_url("https://example.com").unwrap(),
            ("example.com".into(), "/".into(), true)
        );
        assert_eq!(
            parse_url("example.com/x").unwrap(),
            ("example.com".into(), "/x".into(), false)
        );
        assert!(parse_url("ftp://example.com/").is_err());
    }

    #[test]
    fn domain_name_protocols() {
        let mut p = AppPfds::default();
        p.add_domain("a.example", None).unwrap();
        p.add_domain("b.example", Some("TLS_SNI")).unwrap();
        p.add_domain("c.example", Some("TLS_SAN")).unwrap();
        assert!(p.add_domain("d.example", Some("QUIC")).is_err());
        assert_eq!(p.domains[0].protocols, 7);
        assert_eq!(p.domains[1].protocols, abi::APP_P_SNI as u8);
        assert_eq!(p.domains[2].protocols, 0);
    }

    #[test]
    fn flow_descriptions_fit_the_data_path() {
        let mut p = AppPfds::default();
        // 5 x 6 = 30 port range pairs fit; 3 more do not.
        p.add_flow("permit out 6 from any 1,3,5,7,9 to assigned 1,3,5,7,9,11")
            .unwrap();
        assert!(p
            .add_flow("permit out 17 from any 1,3,5 to assigned")
            .unwrap_err()
            .contains("port range pairs"));
        p.add_flow("permit out 17 from any 1,3 to assigned")
            .unwrap();
    }

    #[test]
    fn indices_are_stable_and_bounded() {
        let mut t = PfdTable::new();
        let a = t.set("a", AppPfds::default(), true).unwrap();
        let b = t.set("b", AppPfds::default(), false).unwrap();
        assert_eq!((a, b), (1, 2));
        assert_eq!(t.set("a", AppPfds::default(), true).unwrap(), 1);
        assert_eq!(t.by_index(2).unwrap().id, "b");
    }

    #[test]
    fn a_restored_table_keeps_its_indices_and_takes_the_configuration_in() {
        let pfds = |name: &str| {
            let mut p = AppPfds::default();
            p.add_domain(name, None).unwrap();
            p
        };
        let mut t = PfdTable::new();
        t.set_with_index("smf", 5, pfds("smf.example"), false)
            .unwrap();
        t.set_with_index("local", 2, pfds("old.example"), true)
            .unwrap();
        t.set_with_index("gone", 3, pfds("gone.example"), true)
            .unwrap();
        assert!(t
            .set_with_index("other", 5, AppPfds::default(), false)
            .is_err());
        assert!(t
            .set_with_index("smf", 6, AppPfds::default(), false)
            .is_err());
        assert!(t.set_with_index("x", 0, AppPfds::default(), false).is_err());
        let mut c = PfdTable::new();
        c.set("local", pfds("new.example"), true).unwrap();
        c.set("smf", pfds("conf.example"), true).unwrap();
        c.set("fresh", pfds("fresh.example"), true).unwrap();
        let mut changed = t.merge_configured(&c).unwrap();
        changed.sort();
        assert_eq!(changed, ["fresh", "gone", "local"]);
        let smf = t.get("smf").unwrap();
        assert_eq!((smf.index, smf.local), (5, false));
        assert_eq!(smf.pfds, pfds("smf.example"), "the SMF's PFDs stay");
        let local = t.get("local").unwrap();
        assert_eq!((local.index, &local.pfds), (2, &pfds("new.example")));
        let gone = t.get("gone").unwrap();
        assert_eq!((gone.index, gone.local), (3, false));
        assert!(gone.pfds.is_empty());
        assert_eq!(t.get("fresh").unwrap().index, 6, "after the highest index");
    }

    #[test]
    fn domains_with_protocol_bits() {
        let mut p = AppPfds::default();
        p.add_domain_bits("A.example", abi::APP_P_SNI as u8)
            .unwrap();
        p.add_domain_bits("a.example", abi::APP_P_DNS as u8)
            .unwrap();
        p.add_domain_bits("b.example", 0).unwrap();
        assert!(p.add_domain_bits("c.example", 0x80).is_err());
        assert!(p.add_domain_bits("c example", 1).is_err());
        assert_eq!(
            p.domains[0].protocols,
            (abi::APP_P_SNI | abi::APP_P_DNS) as u8
        );
        assert_eq!(p.domains[1].protocols, 0);
    }
}
