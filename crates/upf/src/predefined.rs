//! Predefined rules (TS 29.244 clause 5.19, feature ADPDP): packet detection, a FAR,
//! QERs and URRs configured in the UP function under a name, which a CP function
//! activates on a PDR with Activate Predefined Rules (Create PDR, Update PDR) and
//! deactivates with Deactivate Predefined Rules (Update PDR) or by removing the PDR.
//! Operators attach charging, gating and policing to many sessions at once this way.
//!
//! An activation adds the named rule's SDF filters to the PDR's PDI, its QERs and URRs
//! to the PDR's lists, and its FAR as the PDR's FAR when the CP function gave none (the
//! Create PDR's FAR ID is conditional on exactly that, Table 7.5.2.2-1). The FAR, QERs
//! and URRs become rules of the session under their predefined IDs (bit 8 of the first
//! octet set: clauses 8.2.74, 8.2.75, 8.2.54), one instance per session: the data path
//! enforces and counts them like any other rule (each session has its own MBR and its
//! own usage), and Usage Reports name the URR by that ID. A PDR keeps what the CP
//! function gave it apart ([`Activated`]), so a deactivation or an Update PDR leaves the
//! rest as it was.
//!
//! A rule may name an application ([`Predefined::set_application`], configured PFDs,
//! pfd.rs): activated on a PDR whose PDI names no Application ID, the first active rule
//! that names one gives the PDR its Application ID (the PDR's own wins, as its own FAR
//! does), so the PDR matches that application's traffic (clause 5.11).

use pfcp::ie::{CauseValue, FailedRuleId, SdfFilter};

use crate::procedures::Rejection;
use crate::rules::*;

/// Bit 8 of the first octet of a FAR, QER or URR ID: the rule is predefined in the UP
/// function (clauses 8.2.74, 8.2.75, 8.2.54).
pub const PREDEFINED: u32 = 0x8000_0000;

/// One predefined rule: what activating its name adds to a PDR.
#[derive(Debug, Clone, PartialEq)]
pub struct PredefinedRule {
    /// The Predefined Rules Name (clause 8.2.72), an octet string.
    pub name: String,
    pub sdf_filters: Vec<SdfFilter>,
    /// The predefined FAR (its ID with [`PREDEFINED`] set), used when the PDR has none.
    pub far: Option<u32>,
    pub qers: Vec<u32>,
    pub urrs: Vec<u32>,
}

/// The predefined rules of the configuration.
#[derive(Debug, Clone, Default)]
pub struct Predefined {
    rules: Vec<PredefinedRule>,
    /// The Application ID each rule names, by rule (None: none).
    applications: Vec<Option<String>>,
    fars: Vec<Far>,
    qers: Vec<Qer>,
    urrs: Vec<Urr>,
}

/// What activations changed in a PDR (kept in [`Session::predefined`] by PDR ID): the
/// rules active (indices into the configuration's list, in activation order) and the
/// PDR's own values before them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(from = "ActivatedOnDisk", into = "ActivatedOnDisk")]
pub struct Activated {
    pub rules: ThinVec<u16>,
    own_sdf_filters: ThinVec<SdfFilter>,
    own_far: Option<u32>,
    own_qers: SmallVec<[u32; 2]>,
    own_urrs: SmallVec<[u32; 2]>,
    /// The PDR's Application ID is a rule's (it named none of its own).
    application_from_rule: bool,
}

/// [`Activated`] as the state keeps it, the layout of states written before rules named
/// applications: [`Activated::application_from_rule`] is [`APPLICATION_MARK`] after the
/// rules (no rule has that index: there are at most 65535).
#[derive(serde::Serialize, serde::Deserialize)]
struct ActivatedOnDisk {
    rules: ThinVec<u16>,
    #[serde(with = "crate::state::wire_seq")]
    own_sdf_filters: ThinVec<SdfFilter>,
    own_far: Option<u32>,
    own_qers: SmallVec<[u32; 2]>,
    own_urrs: SmallVec<[u32; 2]>,
}

const APPLICATION_MARK: u16 = u16::MAX;

impl From<ActivatedOnDisk> for Activated {
    fn from(mut d: ActivatedOnDisk) -> Self {
        let application_from_rule = d.rules.contains(&APPLICATION_MARK);
        d.rules.retain(|r| *r != APPLICATION_MARK);
        Activated {
            rules: d.rules,
            own_sdf_filters: d.own_sdf_filters,
            own_far: d.own_far,
            own_qers: d.own_qers,
            own_urrs: d.own_urrs,
            application_from_rule,
        }
    }
}

impl From<Activated> for ActivatedOnDisk {
    fn from(a: Activated) -> Self {
        let mut rules = a.rules;
        if a.application_from_rule {
            rules.push(APPLICATION_MARK);
        }
        ActivatedOnDisk {
            rules,
            own_sdf_filters: a.own_sdf_filters,
            own_far: a.own_far,
            own_qers: a.own_qers,
            own_urrs: a.own_urrs,
        }
    }
}

impl Activated {
    /// Whether the PDR's Application ID is an activated rule's, not its own.
    pub fn application_from_rule(&self) -> bool {
        self.application_from_rule
    }
}

impl Predefined {
    /// The rules and the FARs, QERs and URRs they name (IDs without [`PREDEFINED`]; it is
    /// added here). Refuses duplicate names or IDs, IDs of 2^31 or more, references to
    /// rules that are not there and SDF filters the data path cannot match.
    pub fn new(
        mut rules: Vec<PredefinedRule>,
        mut fars: Vec<Far>,
        mut qers: Vec<Qer>,
        mut urrs: Vec<Urr>,
    ) -> Result<Self, String> {
        fn ids<T>(what: &str, v: &mut [T], id: impl Fn(&mut T) -> &mut u32) -> Result<(), String> {
            let mut seen = Vec::new();
            for x in v.iter_mut() {
                let i = id(x);
                if *i == 0 || *i >= PREDEFINED {
                    return Err(format!("{what} ID {i} is not between 1 and 2^31 - 1"));
                }
                if seen.contains(i) {
                    return Err(format!("{what} ID {i} is defined twice"));
                }
                seen.push(*i);
                *i |= PREDEFINED;
            }
            Ok(())
        }
        ids("FAR", &mut fars, |f| &mut f.id)?;
        ids("QER", &mut qers, |q| &mut q.id)?;
        ids("URR", &mut urrs, |u| &mut u.id)?;
        if rules.len() > usize::from(u16::MAX) {
            return Err("more than 65535 predefined rules".into());
        }
        for r in rules.iter_mut() {
            let name = r.name.clone();
            if name.is_empty() {
                return Err("a predefined rule without a name".into());
            }
            let missing = |what: &str, id: u32| format!("predefined rule {name:?}: no {what} {id}");
            if let Some(f) = &mut r.far {
                if !fars.iter().any(|x| x.id == *f | PREDEFINED) {
                    return Err(missing("FAR", *f));
                }
                *f |= PREDEFINED;
            }
            for q in &mut r.qers {
                if !qers.iter().any(|x| x.id == *q | PREDEFINED) {
                    return Err(missing("QER", *q));
                }
                *q |= PREDEFINED;
            }
            for u in &mut r.urrs {
                if !urrs.iter().any(|x| x.id == *u | PREDEFINED) {
                    return Err(missing("URR", *u));
                }
                *u |= PREDEFINED;
            }
            for f in &r.sdf_filters {
                crate::sdf::SdfRule::from_ie(f)
                    .and_then(|r| r.require_out())
                    .map_err(|e| format!("predefined rule {name:?}: SDF filter: {e}"))?;
            }
        }
        let mut names: Vec<&str> = rules.iter().map(|r| r.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("predefined rule {:?} is defined twice", w[0]));
        }
        for u in &urrs {
            if !u.rule.linked_urr_ids.is_empty() || u.rule.far_id_for_quota_action.is_some() {
                return Err(format!(
                    "predefined URR {}: linked URRs and quota-action FARs are per session",
                    u.id & !PREDEFINED
                ));
            }
        }
        Ok(Predefined {
            applications: vec![None; rules.len()],
            rules,
            fars,
            qers,
            urrs,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    pub fn rules(&self) -> &[PredefinedRule] {
        &self.rules
    }

    /// Make rule `name` name application `application` (its Application ID: the caller
    /// checks that the application is configured). Err if there is no such rule.
    pub fn set_application(&mut self, name: &str, application: &str) -> Result<(), String> {
        let i = self
            .rules
            .iter()
            .position(|r| r.name == name)
            .ok_or_else(|| format!("no predefined rule named {name:?}"))?;
        if application.is_empty() {
            return Err(format!("predefined rule {name:?}: an empty Application ID"));
        }
        self.applications[i] = Some(application.to_string());
        Ok(())
    }

    /// The Application ID rule `i` names, if any.
    pub fn application(&self, i: u16) -> Option<&str> {
        self.applications.get(usize::from(i))?.as_deref()
    }

    /// The rule a Predefined Rules Name names; Cause 80 (Unknown Pre-defined Rule) with
    /// `ie` (Activate or Deactivate Predefined Rules) as the Offending IE if none.
    pub fn find(&self, name: &[u8], ie: u16) -> Result<u16, Rejection> {
        self.rules
            .iter()
            .position(|r| r.name.as_bytes() == name)
            .map(|i| i as u16)
            .ok_or_else(|| {
                Rejection::ie(
                    CauseValue::UNKNOWN_PREDEFINED_RULE,
                    ie,
                    format!(
                        "no predefined rule named {:?}",
                        String::from_utf8_lossy(name)
                    ),
                )
            })
    }

    /// Make `active` the PDR's active rules: its own values with each rule's added, and
    /// what it had of its own kept in `state` (the session's). The PDR must hold its own
    /// values (fresh, or after [`Predefined::restore`]).
    pub fn activate(
        &self,
        state: &mut ThinVec<(u16, Activated)>,
        pdr: &mut Pdr,
        active: ThinVec<u16>,
    ) {
        // A PDR of this ID removed and created again leaves nothing behind.
        state.retain(|(id, _)| *id != pdr.id);
        if active.is_empty() {
            return;
        }
        let mut own = Activated {
            rules: active,
            own_sdf_filters: pdr.pdi.sdf_filters.clone(),
            own_far: pdr.far_id,
            own_qers: pdr.qer_ids.clone(),
            own_urrs: pdr.urr_ids.clone(),
            application_from_rule: false,
        };
        if pdr.pdi.application_id.is_none() {
            if let Some(a) = own.rules.iter().find_map(|&i| self.application(i)) {
                pdr.pdi.application_id = Some(a.to_string());
                own.application_from_rule = true;
            }
        }
        for &i in &own.rules {
            let Some(r) = self.rules.get(usize::from(i)) else {
                continue;
            };
            pdr.pdi.sdf_filters.extend(r.sdf_filters.iter().cloned());
            if pdr.far_id.is_none() {
                pdr.far_id = r.far;
            }
            for q in &r.qers {
                if !pdr.qer_ids.contains(q) {
                    pdr.qer_ids.push(*q);
                }
            }
            for u in &r.urrs {
                if !pdr.urr_ids.contains(u) {
                    pdr.urr_ids.push(*u);
                }
            }
        }
        state.push((pdr.id, own));
    }

    /// Put the PDR back to its own values (taken from `state`); the rules that were
    /// active.
    pub fn restore(state: &mut ThinVec<(u16, Activated)>, pdr: &mut Pdr) -> ThinVec<u16> {
        let Some(i) = state.iter().position(|(id, _)| *id == pdr.id) else {
            return ThinVec::new();
        };
        let (_, a) = state.remove(i);
        pdr.pdi.sdf_filters = a.own_sdf_filters;
        pdr.far_id = a.own_far;
        pdr.qer_ids = a.own_qers;
        pdr.urr_ids = a.own_urrs;
        if a.application_from_rule {
            pdr.pdi.application_id = None;
        }
        a.rules
    }

    /// A FAR, QER or URR the CP function creates with bit 8 of its ID's first octet set
    /// (clauses 8.2.74, 8.2.75, 8.2.54 give that bit to predefined rules). A Create
    /// always defines a dynamic rule, and a vendor IMS SMF creates URRs such as
    /// 0x80010009 and names them from its PDRs: accepted, unless the ID is one of this
    /// configuration's predefined rules (the session could not name both) or `strict`
    /// (the clauses' reading, whenever predefined rules are configured).
    pub fn check_created_id(&self, rule_type: u8, id: u32, strict: bool) -> Result<(), Rejection> {
        if id & PREDEFINED == 0 || self.is_empty() {
            return Ok(());
        }
        let configured = match rule_type {
            FailedRuleId::FAR => self.fars.iter().any(|f| f.id == id),
            FailedRuleId::QER => self.qers.iter().any(|q| q.id == id),
            _ => self.urrs.iter().any(|u| u.id == id),
        };
        if configured {
            return Err(Rejection::rule(
                rule_type,
                id,
                format!(
                    "ID {id:#x} is a predefined rule of this UPF's configuration \
                     (predefined_rules, ID {})",
                    id & !PREDEFINED
                ),
            ));
        }
        if strict {
            return Err(Rejection::rule(
                rule_type,
                id,
                "an ID with bit 8 of its first octet set names a predefined rule (clauses 8.2.74, 8.2.75, 8.2.54; n4.strict)",
            ));
        }
        Ok(())
    }

    /// Give the session an instance of every predefined FAR, QER and URR its PDRs name
    /// and drop those they no longer name. The URRs dropped, for their final report.
    pub fn settle(&self, s: &mut Session) -> Vec<u32> {
        if self.is_empty() {
            return Vec::new();
        }
        let pdrs = &s.pdrs;
        s.predefined.retain(|(id, _)| pdrs.contains_key(id));
        let fars: Vec<u32> = s.pdrs.values().filter_map(|p| p.far_id).collect();
        let qers: Vec<u32> = s.pdrs.values().flat_map(|p| p.qer_ids.to_vec()).collect();
        let urrs: Vec<u32> = s.pdrs.values().flat_map(|p| p.urr_ids.to_vec()).collect();
        sync(&mut s.fars, &self.fars, |f| f.id, &fars);
        sync(&mut s.qers, &self.qers, |q| q.id, &qers);
        sync(&mut s.urrs, &self.urrs, |u| u.id, &urrs)
    }
}

/// Make `rules` (a session's FARs, QERs or URRs) hold an instance of each of `defined`
/// whose ID is in `named` (what the session's PDRs name), and no other rule with a
/// predefined ID. The IDs it no longer holds.
fn sync<R: Clone>(
    rules: &mut RuleMap<u32, R>,
    defined: &[R],
    id: fn(&R) -> u32,
    named: &[u32],
) -> Vec<u32> {
    for r in defined {
        let i = id(r);
        if named.contains(&i) && !rules.contains_key(&i) {
            rules.insert(i, r.clone());
        }
    }
    // Only instances of predefined rules go: a rule the CP function created with bit 8
    // set (`check_created_id`) stays until it is removed.
    let gone: Vec<u32> = rules
        .keys()
        .copied()
        .filter(|i| !named.contains(i) && defined.iter().any(|r| id(r) == *i))
        .collect();
    for i in &gone {
        rules.remove(i);
    }
    gone
}

#[cfg(test)]
mod tests {
    use super::*;

    fn predefined() -> Predefined {
        let rule = |name: &str| PredefinedRule {
            name: name.into(),
            sdf_filters: vec![],
            far: None,
            qers: vec![],
            urrs: vec![],
        };
        let mut p =
            Predefined::new(vec![rule("plain"), rule("video")], vec![], vec![], vec![]).unwrap();
        p.set_application("video", "video-app").unwrap();
        assert!(p.set_application("nonesuch", "x").is_err());
        p
    }

    fn pdr(app: Option<&str>) -> Pdr {
        Pdr {
            id: 3,
            precedence: 10,
            pdi: Pdi {
                application_id: app.map(String::from),
                ..Pdi::default()
            },
            outer_header_removal: None,
            far_id: Some(1),
            urr_ids: smallvec![],
            qer_ids: smallvec![],
            activation_time: None,
            deactivation_time: None,
        }
    }

    #[test]
    fn a_rules_application_is_the_pdrs_unless_it_names_its_own() {
        let p = predefined();
        let mut state = ThinVec::new();
        let mut d = pdr(None);
        p.activate(&mut state, &mut d, thin_vec![0, 1]);
        assert_eq!(d.pdi.application_id.as_deref(), Some("video-app"));
        assert!(state[0].1.application_from_rule());
        assert_eq!(Predefined::restore(&mut state, &mut d).to_vec(), [0, 1]);
        assert_eq!(d.pdi.application_id, None, "back to its own: none");
        // Its own wins, and stays when the rule goes.
        let mut d = pdr(Some("chat"));
        p.activate(&mut state, &mut d, thin_vec![1]);
        assert_eq!(d.pdi.application_id.as_deref(), Some("chat"));
        assert!(!state[0].1.application_from_rule());
        Predefined::restore(&mut state, &mut d);
        assert_eq!(d.pdi.application_id.as_deref(), Some("chat"));
        // A rule without one gives none.
        let mut d = pdr(None);
        p.activate(&mut state, &mut d, thin_vec![0]);
        assert_eq!(d.pdi.application_id, None);
    }

    #[test]
    fn activations_keep_their_layout_on_disk() {
        let p = predefined();
        let mut state = ThinVec::new();
        let mut d = pdr(None);
        p.activate(&mut state, &mut d, thin_vec![1]);
        let a = state[0].1.clone();
        let back: Activated = postcard::from_bytes(&postcard::to_allocvec(&a).unwrap()).unwrap();
        assert_eq!(back, a);
        assert_eq!(back.rules.to_vec(), [1]);
        // As a state written before rules named applications has it: no mark, none.
        let old = ActivatedOnDisk {
            rules: thin_vec![1],
            own_sdf_filters: ThinVec::new(),
            own_far: Some(1),
            own_qers: smallvec![],
            own_urrs: smallvec![],
        };
        let back: Activated = postcard::from_bytes(&postcard::to_allocvec(&old).unwrap()).unwrap();
        assert!(!back.application_from_rule());
        assert_eq!(back.rules.to_vec(), [1]);
    }
}
