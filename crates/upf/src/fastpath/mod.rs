//! The data path behind a trait: [`crate::model`] (the pure-Rust reference model) and,
//! in upfd, the XDP programs (crates/bpf). Only implementations of [`FastPath`] touch
//! forwarding state; both take the same [`Config`].

pub mod teid_index;

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use crate::pfd::PfdTable;
use crate::rules::Session;

/// A configured neighbour: where packets to an address leave, with the link-layer
/// header to write (the data path's `neigh` table; then the kernel FIB is not asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Egress {
    pub ifindex: u32,
    pub mtu: u16,
    pub smac: [u8; 6],
    pub dmac: [u8; 6],
}

/// The GTP-U addresses of one Network Instance (TS 29.244 clause 8.2.4: a UPF serving
/// several access or core networks): on the access side (N3) and towards other UPFs
/// (N9). A PDI or FAR in the instance uses the instance's addresses of its side if it has
/// any there, else the interface's (`n3_*` / `n9_*`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NiAddresses {
    /// As a PDI or FAR names it (clause 8.2.4; label-encoded names as dotted text).
    pub name: String,
    pub n3_v4: Option<Ipv4Addr>,
    pub n3_v6: Option<Ipv6Addr>,
    pub n9_v4: Option<Ipv4Addr>,
    pub n9_v6: Option<Ipv6Addr>,
}

impl NiAddresses {
    /// The instance's addresses on the access side (`access`) or towards other UPFs;
    /// None if it has none there.
    pub fn side(&self, access: bool) -> Option<(Option<Ipv4Addr>, Option<Ipv6Addr>)> {
        let (v4, v6) = if access {
            (self.n3_v4, self.n3_v6)
        } else {
            (self.n9_v4, self.n9_v6)
        };
        (v4.is_some() || v6.is_some()).then_some((v4, v6))
    }
}

/// The data path's configuration: our GTP-U addresses, configured neighbours and the
/// budget of unknown-TEID packets handed to upfd.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Our GTP-U addresses: G-PDUs to others are not ours.
    pub local: Vec<IpAddr>,
    /// Our other addresses (N4, API) and the operator's protected ones: uplink packets
    /// to them, or to `local`, are dropped (`DropReason::ToUpf`). At most
    /// `abi::MAX_PROTECTED_ADDRS` of each IP version.
    pub protected: Vec<IpAddr>,
    /// Outer source towards the access network (N3) and towards other UPFs (N9; None:
    /// the N3 address), per IP version.
    pub n3_v4: Option<Ipv4Addr>,
    pub n9_v4: Option<Ipv4Addr>,
    pub n3_v6: Option<Ipv6Addr>,
    pub n9_v6: Option<Ipv6Addr>,
    /// GTP-U addresses of Network Instances that have their own: a FAR forwarding in
    /// one of them takes its outer source from there (see [`NiAddresses`]).
    pub network_instances: Vec<NiAddresses>,
    /// Neighbours by destination; the unspecified address of a family is its default.
    /// Empty: the kernel FIB decides.
    pub neigh: HashMap<IpAddr, Egress>,
    /// Unknown-TEID packets passed to upfd per second (0: none), and at once.
    pub slowpath_per_sec: u64,
    pub slowpath_burst: u64,
    /// ICMP errors for packets too big for their egress link once encapsulated.
    pub icmp: Icmp,
    /// MTUs configured per interface, by ifindex (at most `abi::MAX_IF_MTUS`): they take
    /// precedence over the FIB's and the neighbours' for packets leaving there.
    pub mtus: Vec<(u32, u16)>,
}

/// ICMP errors for packets that do not fit their egress link with the headers the UPF
/// adds (RFC 1191 Fragmentation Needed for IPv4 with DF set, RFC 8201 / RFC 4443
/// Packet Too Big for IPv6), so that path MTU discovery settles behind the UPF. The
/// error carries the MTU that fits before encapsulation; it goes back to the packet's
/// source on the side it came from: to a data network host as an IP packet, to a UE
/// through its session's downlink rules (its tunnel, counted in its URRs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Icmp {
    /// The errors' source address per IP version; None: no error of that version.
    pub source_v4: Option<Ipv4Addr>,
    pub source_v6: Option<Ipv6Addr>,
    /// Errors per second over all sessions (0: none), and at once.
    pub per_sec: u64,
    pub burst: u64,
    /// Errors per second for the packets of one session (0: none), and at once.
    pub session_per_sec: u64,
    pub session_burst: u64,
}

/// A packet the data path handed to upfd for a buffering FAR (TS 29.244 clause 5.2.1,
/// BUFF): the user's IP packet, and whether the FAR asks to notify the CP function
/// (NOCP: a Downlink Data Report).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Buffered {
    pub seid: u64,
    pub far_id: u32,
    pub pdr_id: u16,
    pub nocp: bool,
    pub packet: Vec<u8>,
}

/// What the data path tells upfd on its own (the XDP programs' event ring).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Buffered(Buffered),
    /// An uplink TCP segment of a flow whose FAR has Redirect Information: upfd answers
    /// it (crate::redirect); `nocp` is false.
    Redirected(Buffered),
    /// A URR of the session used up its volume quota: the data path stopped its PDRs.
    QuotaExhausted {
        seid: u64,
    },
    /// A URR of the session reached its volume threshold.
    ThresholdReached {
        seid: u64,
    },
    /// The data path classified a new flow of the session as application `app` (an
    /// Application ID) and the session asks for Application Detection Information
    /// (TS 29.244 clause 5.11.1, reporting trigger START).
    AppStart {
        seid: u64,
        app: String,
        flow: AppFlow,
    },
}

/// One flow the data path classified (docs/application-detection.md): the UE's side and
/// the remote side, as in a downlink-oriented flow description; ports 0 when the
/// protocol has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AppFlow {
    pub protocol: u8,
    pub ue: IpAddr,
    pub ue_port: u16,
    pub remote: IpAddr,
    pub remote_port: u16,
}

/// Counts of one URR, summed over the data path's CPUs (kept in the state as they are:
/// upf::state).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// These counts and `other`'s together (first and last packet: the earliest and the
    /// latest): what two data paths counted for one URR, one after the other.
    pub fn plus(&self, other: &Usage) -> Usage {
        let earliest = match (self.first_packet, other.first_packet) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
        Usage {
            ul_packets: self.ul_packets + other.ul_packets,
            ul_bytes: self.ul_bytes + other.ul_bytes,
            dl_packets: self.dl_packets + other.dl_packets,
            dl_bytes: self.dl_bytes + other.dl_bytes,
            first_packet: earliest,
            last_packet: self.last_packet.max(other.last_packet),
        }
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
    /// PDR `pdr_id` cannot be installed: a lookup key of it is taken by another
    /// session, or it needs more than the data path holds (bpf/include/abi.h limits).
    #[error("PDR {pdr_id}: {why}")]
    Pdr { pdr_id: u16, why: String },
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
    /// Where the data path counts a URR (its index in the counter table), kept in the
    /// state (state.rs) so that a restarted upfd reads the last counts of a data path
    /// it did not load. None: the data path's counts do not outlive upfd.
    fn urr_handle(&self, _seid: u64, _urr_id: u32) -> Option<u32> {
        None
    }
    /// The session whose uplink rules the data path finds under local TEID `teid`:
    /// `Some(found)` from the data path's own tables (one lookup), `None` when this data
    /// path cannot say (the caller reads every session instead).
    fn session_by_teid(&self, _teid: u32) -> Option<Option<u64>> {
        None
    }
    /// The session downlink packets to UE address `a` go to (as
    /// [`FastPath::session_by_teid`]).
    fn session_by_ue(&self, _a: std::net::IpAddr) -> Option<Option<u64>> {
        None
    }
    /// Install the PFDs of every application (pfd.rs), after PFD Management or at start.
    /// `changed` names the applications whose PFDs changed: what the data path learned
    /// for them (addresses from DNS answers) is forgotten, so that new flows follow the
    /// new PFDs; flows already classified keep their application. All or nothing.
    fn set_pfds(&mut self, pfds: &Arc<PfdTable>, changed: &[String]) -> Result<(), FastPathError>;
    /// How long ago the data path last saw a packet of a classified flow of a session
    /// (for Application Detection Information STOP); None: it holds no such flow (ended,
    /// idle past APP_FLOW_IDLE_SEC, or evicted).
    fn app_flow_idle(&self, _seid: u64, _flow: &AppFlow) -> Option<std::time::Duration> {
        None
    }
}

/// Sending a frame through the data path again, as if it had just arrived: how upfd
/// releases buffered packets once their FAR forwards (the slow path's one need of the
/// data path besides its events).
pub trait Reinject {
    /// Process an Ethernet frame as the N6 (data network) side's program would, at
    /// `now`, and send what it forwards.
    fn reinject_n6(&mut self, frame: &[u8], now: Instant) -> Result<(), FastPathError>;
}

/// A data path shared between the session table and the slow path (one thread).
impl<T: FastPath> FastPath for Rc<RefCell<T>> {
    fn install(&mut self, old: Option<&Session>, new: &Arc<Session>) -> Result<(), FastPathError> {
        self.borrow_mut().install(old, new)
    }
    fn remove(&mut self, session: &Session) {
        self.borrow_mut().remove(session)
    }
    fn usage(&self, seid: u64, urr_id: u32) -> Usage {
        self.borrow().usage(seid, urr_id)
    }
    fn reset_usage(&mut self, seid: u64, urr_id: u32) {
        self.borrow_mut().reset_usage(seid, urr_id)
    }
    fn set_quota(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>) {
        self.borrow_mut().set_quota(seid, urr_id, remaining)
    }
    fn set_threshold(&mut self, seid: u64, urr_id: u32, remaining: Option<i64>) {
        self.borrow_mut().set_threshold(seid, urr_id, remaining)
    }
    fn signals_volume(&self) -> bool {
        self.borrow().signals_volume()
    }
    fn urr_handle(&self, seid: u64, urr_id: u32) -> Option<u32> {
        self.borrow().urr_handle(seid, urr_id)
    }
    fn session_by_teid(&self, teid: u32) -> Option<Option<u64>> {
        self.borrow().session_by_teid(teid)
    }
    fn session_by_ue(&self, a: std::net::IpAddr) -> Option<Option<u64>> {
        self.borrow().session_by_ue(a)
    }
    fn set_pfds(&mut self, pfds: &Arc<PfdTable>, changed: &[String]) -> Result<(), FastPathError> {
        self.borrow_mut().set_pfds(pfds, changed)
    }
    fn app_flow_idle(&self, seid: u64, flow: &AppFlow) -> Option<std::time::Duration> {
        self.borrow().app_flow_idle(seid, flow)
    }
}
