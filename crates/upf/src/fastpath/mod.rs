//! The data path behind a trait: `model` (the pure-Rust reference pipeline) and, in
//! upfd, the XDP programs. Only implementations of [`FastPath`] touch forwarding state.

pub mod model;
pub mod pipeline;
pub mod teid_index;

use std::sync::Arc;

use crate::rules::Session;

/// Counts of one URR, summed over the data path's CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub ul_packets: u64,
    pub ul_bytes: u64,
    pub dl_packets: u64,
    pub dl_bytes: u64,
    /// Seconds since the UNIX epoch of the first and last packet counted, if any.
    pub first_packet: Option<u64>,
    pub last_packet: Option<u64>,
}

impl Usage {
    pub fn total_bytes(&self) -> u64 {
        self.ul_bytes + self.dl_bytes
    }
    pub fn total_packets(&self) -> u64 {
        self.ul_packets + self.dl_packets
    }
    /// What was counted since `before` was read.
    pub fn since(&self, before: &Usage) -> Usage {
        Usage {
            ul_packets: self.ul_packets.saturating_sub(before.ul_packets),
            ul_bytes: self.ul_bytes.saturating_sub(before.ul_bytes),
            dl_packets: self.dl_packets.saturating_sub(before.dl_packets),
            dl_bytes: self.dl_bytes.saturating_sub(before.dl_bytes),
            first_packet: self.first_packet,
            last_packet: self.last_packet,
        }
    }
}

/// Why the data path could not take a session (maps full, key taken ...).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FastPathError {
    #[error("data path table {0} is full")]
    Full(&'static str),
    /// A lookup key of PDR `pdr_id` is taken by another session.
    #[error("PDR {pdr_id}: {why}")]
    Conflict { pdr_id: u16, why: String },
    #[error("data path error: {0}")]
    Io(String),
}

/// The forwarding tables' owner. `install` is all-or-nothing: on error nothing changed.
pub trait FastPath {
    /// Install a new session (`old` = None) or replace `old` by `new` (same SEID). Entries
    /// are written so the data path never sees a half-built session: FARs, QERs and URRs
    /// before the PDRs that use them, PDRs removed before what they point at.
    fn install(&mut self, old: Option<&Session>, new: &Arc<Session>) -> Result<(), FastPathError>;
    /// Remove every entry of a session.
    fn remove(&mut self, session: &Session);
    /// Counts of a URR of a session since the URR was installed.
    fn usage(&self, seid: u64, urr_id: u32) -> Usage;
    /// Forget a URR's counts (after its final report).
    fn reset_usage(&mut self, seid: u64, urr_id: u32);
    /// The octets a URR may still forward before its Volume Quota runs out (None: no
    /// quota). The data path stops the URR's PDRs when it reaches zero.
    fn set_quota(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>);
    /// The octets a URR may count before its Volume Threshold is reached (None: no
    /// threshold). A data path that [signals volume](FastPath::signals_volume) tells
    /// upfd when a threshold is reached.
    fn set_threshold(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>);
    /// Whether the data path signals reached volume thresholds and quotas itself, so
    /// URRs with only volume triggers need no periodic polling (report.rs).
    fn signals_volume(&self) -> bool {
        false
    }
}
