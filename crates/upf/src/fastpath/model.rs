//! The reference pipeline: the data path's semantics written for clarity, in Rust. It is
//! the executable specification the XDP programs are tested against (ARCHITECTURE.md,
//! "Differential testing of the fast path"). Lookups are the ones the XDP path makes:
//! uplink by local TEID, downlink by UE address (then framed routes, longest prefix).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;

use super::{FastPath, FastPathError, Usage};
use crate::rules::{interface, Session};

/// The keys a session occupies in the data path's lookup tables.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Keys {
    /// Local TEIDs of PDRs that receive GTP-U (uplink on N3, N9), with the first PDR
    /// that uses each.
    pub teids: Vec<(u32, u16)>,
    /// UE addresses of PDRs that receive plain IP from the data network (downlink on N6).
    pub ue_ips: Vec<(IpAddr, u16)>,
    /// Framed routes of such PDRs.
    pub framed_routes: Vec<IpNet>,
}

/// The lookup keys of a session, as the data path needs them.
pub fn keys(s: &Session) -> Keys {
    let mut k = Keys::default();
    for p in s.pdrs.values() {
        let pdi = s.effective_pdi(p);
        if let Some(f) = pdi.local_fteid {
            if !k.teids.iter().any(|(t, _)| *t == f.teid) {
                k.teids.push((f.teid, p.id));
            }
        } else if pdi.source_interface != interface::ACCESS {
            // On a PDR that receives from the core side the UE address is the packets'
            // destination whatever its S/D flag says (pfcpsim leaves it clear).
            for u in pdi.ue_ips.iter() {
                for a in u.addrs() {
                    if !k.ue_ips.iter().any(|(x, _)| *x == a) {
                        k.ue_ips.push((a, p.id));
                    }
                }
            }
            for r in &pdi.framed_routes {
                if !k.framed_routes.contains(r) {
                    k.framed_routes.push(*r);
                }
            }
        }
    }
    k
}

/// The reference data path's state.
#[derive(Debug, Default)]
pub struct Model {
    /// The installed sessions (shared with the session table, not copied).
    pub sessions: HashMap<u64, Arc<Session>>,
    pub by_teid: HashMap<u32, u64>,
    pub by_ue_ip: HashMap<IpAddr, u64>,
    pub framed_routes: HashMap<IpNet, u64>,
    pub usage: HashMap<(u64, u32), Usage>,
    /// Capacity of the lookup tables (what the BPF maps are sized to).
    pub max_keys: usize,
    /// Addresses, neighbours, slow-path budget (the reference pipeline).
    pub config: super::pipeline::PipelineConfig,
    /// MBR state, quotas, counters (the reference pipeline).
    pub state: super::pipeline::PipelineState,
}

impl Model {
    pub fn new(max_keys: usize) -> Self {
        Model {
            max_keys,
            ..Model::default()
        }
    }

    /// Keys of `k` taken by another session, or tables that would overflow. Keys this
    /// session already holds are its own.
    fn check(&self, seid: u64, k: &Keys) -> Result<(), FastPathError> {
        let mut new_teids = 0;
        for (t, pdr) in &k.teids {
            match self.by_teid.get(t) {
                Some(s) if *s != seid => {
                    return Err(FastPathError::Conflict {
                        pdr_id: *pdr,
                        why: format!("TEID {t:#x} is already installed for another session"),
                    })
                }
                Some(_) => {}
                None => new_teids += 1,
            }
        }
        let mut new_ue = 0;
        for (a, pdr) in &k.ue_ips {
            match self.by_ue_ip.get(a) {
                Some(s) if *s != seid => {
                    return Err(FastPathError::Conflict {
                        pdr_id: *pdr,
                        why: format!("UE address {a} is already installed for another session"),
                    })
                }
                Some(_) => {}
                None => new_ue += 1,
            }
        }
        if self.by_teid.len() + new_teids > self.max_keys {
            return Err(FastPathError::Full("uplink"));
        }
        if self.by_ue_ip.len() + new_ue > self.max_keys {
            return Err(FastPathError::Full("downlink"));
        }
        Ok(())
    }

    fn unindex(&mut self, seid: u64, k: &Keys) {
        for (t, _) in &k.teids {
            if self.by_teid.get(t) == Some(&seid) {
                self.by_teid.remove(t);
            }
        }
        for (a, _) in &k.ue_ips {
            if self.by_ue_ip.get(a) == Some(&seid) {
                self.by_ue_ip.remove(a);
            }
        }
        for r in &k.framed_routes {
            if self.framed_routes.get(r) == Some(&seid) {
                self.framed_routes.remove(r);
            }
        }
    }

    /// The session a downlink packet to `dst` belongs to: exact UE address, else the
    /// longest framed route that contains it.
    pub fn downlink_session(&self, dst: IpAddr) -> Option<u64> {
        if let Some(s) = self.by_ue_ip.get(&dst) {
            return Some(*s);
        }
        self.framed_routes
            .iter()
            .filter(|(n, _)| n.contains(&dst))
            .max_by_key(|(n, _)| n.prefix_len())
            .map(|(_, s)| *s)
    }
}

impl FastPath for Model {
    fn install(&mut self, old: Option<&Session>, new: &Arc<Session>) -> Result<(), FastPathError> {
        let seid = new.up_seid;
        let k = keys(new);
        self.check(seid, &k)?;
        if let Some(old) = old {
            self.unindex(seid, &keys(old));
            // URRs that no longer exist lose their counters; new ones start at zero.
            for u in old.urrs.keys() {
                if !new.urrs.contains_key(u) {
                    self.usage.remove(&(seid, *u));
                }
            }
        }
        for (t, _) in k.teids {
            self.by_teid.insert(t, seid);
        }
        for (a, _) in k.ue_ips {
            self.by_ue_ip.insert(a, seid);
        }
        for r in k.framed_routes {
            self.framed_routes.insert(r, seid);
        }
        self.sessions.insert(seid, Arc::clone(new));
        Ok(())
    }

    fn remove(&mut self, session: &Session) {
        let seid = session.up_seid;
        self.unindex(seid, &keys(session));
        self.sessions.remove(&seid);
        for u in session.urrs.keys() {
            self.usage.remove(&(seid, *u));
        }
    }

    fn usage(&self, seid: u64, urr_id: u32) -> Usage {
        self.usage.get(&(seid, urr_id)).copied().unwrap_or_default()
    }

    fn reset_usage(&mut self, seid: u64, urr_id: u32) {
        self.usage.remove(&(seid, urr_id));
    }

    fn set_quota(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>) {
        match remaining {
            Some(r) => self.state.quota.insert((seid, urr_id), r),
            None => self.state.quota.remove(&(seid, urr_id)),
        };
    }

    fn set_threshold(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>) {
        // The model signals nothing: report.rs polls its URRs (signals_volume false).
        match remaining {
            Some(r) => self.state.threshold.insert((seid, urr_id), r),
            None => self.state.threshold.remove(&(seid, urr_id)),
        };
    }
}
