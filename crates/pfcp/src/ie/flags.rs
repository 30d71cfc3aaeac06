//! Bit numbers of the flag IEs, counted as [`Flags`] counts them: bit 1 of the first
//! value octet is 1, bit 1 of the second is 9. Names are the specification's.

use serde_json::{json, Value as Json};

use super::types;
use super::Flags;

macro_rules! bits {
    ($(#[$m:meta])* $module:ident { $($name:ident = $n:literal),* $(,)? }) => {
        $(#[$m])*
        pub mod $module {
            $( pub const $name: u16 = $n; )*
            /// Names indexed by bit number - 1.
            pub const NAMES: &[(u16, &str)] = &[$(($n, stringify!($name))),*];
        }
    };
}

bits!(
    /// Apply Action, clause 8.2.26.
    apply_action {
        DROP = 1, FORW = 2, BUFF = 3, NOCP = 4, DUPL = 5, IPMA = 6, IPMD = 7, DFRT = 8,
        EDRT = 9, BDPN = 10, DDPN = 11, FSSM = 12, MBSU = 13,
    }
);

bits!(
    /// UP Function Features, clause 8.2.25.
    up_function_features {
        BUCP = 1, DDND = 2, DLBD = 3, TRST = 4, FTUP = 5, PFDM = 6, HEEU = 7, TREU = 8,
        EMPU = 9, PDIU = 10, UDBC = 11, QUOAC = 12, TRACE = 13, FRRT = 14, PFDE = 15, EPFAR = 16,
        DPDRA = 17, ADPDP = 18, UEIP = 19, SSET = 20, MNOP = 21, MTE = 22, BUNDL = 23, GCOM = 24,
        MPAS = 25, RTTL = 26, VTIME = 27, NORP = 28, IPTV = 29, IP6PL = 30, TSCU = 31, MPTCP = 32,
        ATSSS_LL = 33, QFQM = 34, GPQM = 35, MT_EDT = 36, CIOT = 37, ETHAR = 38, DDDS = 39, RDS = 40,
        RTTWP = 41, QUASF = 42, NSPOC = 43, L2TP = 44, UPBER = 45, RESPS = 46, IPREP = 47, DNSTS = 48,
        DRQOS = 49, MBSN4 = 50, PSUCC = 51, EPPPI = 52, RATP = 53, UPIDP = 54,
    }
);

bits!(
    /// CP Function Features, clause 8.2.58.
    cp_function_features {
        LOAD = 1, OVRL = 2, EPFAR = 3, SSET = 4, BUNDL = 5, MPAS = 6, ARDR = 7, UIAUR = 8,
        PSUCC = 9, RPGUR = 10,
    }
);

bits!(
    /// Reporting Triggers, clause 8.2.19.
    reporting_triggers {
        PERIO = 1, VOLTH = 2, TIMTH = 3, QUHTI = 4, START = 5, STOPT = 6, DROTH = 7, LIUSA = 8,
        VOLQU = 9, TIMQU = 10, ENVCL = 11, MACAR = 12, EVETH = 13, EVEQU = 14, IPMJL = 15, QUVTI = 16,
        REEMR = 17, UPINT = 18,
    }
);

bits!(
    /// Usage Report Trigger, clause 8.2.41.
    usage_report_trigger {
        PERIO = 1, VOLTH = 2, TIMTH = 3, QUHTI = 4, START = 5, STOPT = 6, DROTH = 7, IMMER = 8,
        VOLQU = 9, TIMQU = 10, LIUSA = 11, TERMR = 12, MONIT = 13, ENVCL = 14, MACAR = 15, EVETH = 16,
        EVEQU = 17, TEBUR = 18, IPMJL = 19, QUVTI = 20, EMRRE = 21, UPINT = 22,
    }
);

bits!(
    /// Report Type, clause 8.2.21.
    report_type { DLDR = 1, USAR = 2, ERIR = 3, UPIR = 4, TMIR = 5, SESR = 6, UISR = 7 }
);

bits!(
    /// Measurement Method, clause 8.2.40.
    measurement_method { DURAT = 1, VOLUM = 2, EVENT = 3 }
);

bits!(
    /// Measurement Information, clause 8.2.68.
    measurement_information {
        MBQE = 1, INAM = 2, RADI = 3, ISTM = 4, MNOP = 5, SSPOC = 6, ASPOC = 7, CIAM = 8,
    }
);

bits!(
    /// PFCPSMReq-Flags, clause 8.2.31.
    pfcpsm_req_flags { DROBU = 1, SNDEM = 2, QAURR = 3, SUMPC = 4, RUMUC = 5, DETEID = 6, HRSBOM = 7 }
);

bits!(
    /// PFCPSRRsp-Flags, clause 8.2.32.
    pfcpsr_rsp_flags { DROBU = 1 }
);

bits!(
    /// Node Report Type, clause 8.2.69.
    node_report_type { UPFR = 1, UPRR = 2, CKDR = 3, GPQR = 4, PURR = 5, VSR = 6 }
);

bits!(
    /// Usage Information, clause 8.2.60.
    usage_information { BEF = 1, AFT = 2, UAE = 3, UBE = 4 }
);

bits!(
    /// OCI Flags, clause 8.2.74.
    oci_flags { AOCI = 1 }
);

bits!(
    /// PFCP Association Release Request, clause 8.2.75.
    pfcp_association_release_request { SARR = 1, URSS = 2 }
);

bits!(
    /// RQI, clause 8.2.88.
    rqi { RQI = 1 }
);

bits!(
    /// Proxying, clause 8.2.97.
    proxying { ARP = 1, INS = 2 }
);

bits!(
    /// Ethernet Filter Properties, clause 8.2.99.
    ethernet_filter_properties { BIDE = 1 }
);

bits!(
    /// Ethernet PDU Session Information, clause 8.2.102.
    ethernet_pdu_session_information { ETHI = 1 }
);

bits!(
    /// PFCPSRReq-Flags, clause 8.2.114.
    pfcpsr_req_flags { PSDBU = 1 }
);

bits!(
    /// PFCPAUReq-Flags, clause 8.2.115.
    pfcpau_req_flags { PARPS = 1 }
);

bits!(
    /// PFCPASRsp-Flags, clause 8.2.135.
    pfcpas_rsp_flags { PSREI = 1, UUPSI = 2 }
);

bits!(
    /// PFCPSEReq-Flags, clause 8.2.137.
    pfcpse_req_flags { RESTI = 1, SUMPC = 2, HRSBOM = 3 }
);

bits!(
    /// Create Bridge Info for TSC, clause 8.2.141.
    create_bridge_info_for_tsc { BII = 1 }
);

bits!(
    /// Packet Replication and Detection Carry-On Information, clause 8.2.130.
    packet_replication_and_detection_carry_on_information { PRIUEAI = 1, PRIN19I = 2, PRIN6I = 3, DCARONI = 4 }
);

bits!(
    /// Requested QoS Monitoring, clause 8.2.167: which packet delays to measure; GTPUPM
    /// measures them by GTP-U path monitoring instead of RAN and UPF time stamps.
    requested_qos_monitoring { DL = 1, UL = 2, RP = 3, GTPUPM = 4 }
);

bits!(
    /// Reporting Frequency, clause 8.2.168: when QoS monitoring reports (on a threshold,
    /// periodically, at session release).
    reporting_frequency { EVETT = 1, PERIO = 2, SESRL = 3 }
);

bits!(
    /// QoS Report Trigger, clause 8.2.164: when GTP-U path QoS is reported (periodic,
    /// on a threshold, once at once).
    qos_report_trigger { PER = 1, THR = 2, IRE = 3 }
);

bits!(
    /// GTP-U Path Interface Type, clause 8.2.166: which GTP-U paths to monitor.
    gtpu_path_interface_type { N9 = 1, N3 = 2 }
);

bits!(
    /// Data Status, clause 8.2.174.
    data_status { DROP = 1, BUFF = 2 }
);

fn names(ie_type: u16) -> &'static [(u16, &'static str)] {
    match ie_type {
        types::APPLY_ACTION => apply_action::NAMES,
        types::UP_FUNCTION_FEATURES => up_function_features::NAMES,
        types::CP_FUNCTION_FEATURES => cp_function_features::NAMES,
        types::REPORTING_TRIGGERS => reporting_triggers::NAMES,
        types::USAGE_REPORT_TRIGGER => usage_report_trigger::NAMES,
        types::REPORT_TYPE => report_type::NAMES,
        types::MEASUREMENT_METHOD => measurement_method::NAMES,
        types::MEASUREMENT_INFORMATION => measurement_information::NAMES,
        types::PFCPSM_REQ_FLAGS => pfcpsm_req_flags::NAMES,
        types::PFCPSR_RSP_FLAGS => pfcpsr_rsp_flags::NAMES,
        types::NODE_REPORT_TYPE => node_report_type::NAMES,
        types::USAGE_INFORMATION => usage_information::NAMES,
        types::OCI_FLAGS => oci_flags::NAMES,
        types::PFCP_ASSOCIATION_RELEASE_REQUEST => pfcp_association_release_request::NAMES,
        types::RQI => rqi::NAMES,
        types::PROXYING => proxying::NAMES,
        types::ETHERNET_FILTER_PROPERTIES => ethernet_filter_properties::NAMES,
        types::ETHERNET_PDU_SESSION_INFORMATION => ethernet_pdu_session_information::NAMES,
        types::PFCPSR_REQ_FLAGS => pfcpsr_req_flags::NAMES,
        types::PFCPAU_REQ_FLAGS => pfcpau_req_flags::NAMES,
        types::PFCPAS_RSP_FLAGS => pfcpas_rsp_flags::NAMES,
        types::PFCPSE_REQ_FLAGS => pfcpse_req_flags::NAMES,
        types::CREATE_BRIDGE_INFO_FOR_TSC => create_bridge_info_for_tsc::NAMES,
        types::PACKET_REPLICATION_AND_DETECTION_CARRY_ON_INFORMATION => {
            packet_replication_and_detection_carry_on_information::NAMES
        }
        types::REQUESTED_QOS_MONITORING => requested_qos_monitoring::NAMES,
        types::QOS_REPORT_TRIGGER => qos_report_trigger::NAMES,
        types::GTPU_PATH_INTERFACE_TYPE => gtpu_path_interface_type::NAMES,
        types::REPORTING_FREQUENCY => reporting_frequency::NAMES,
        types::DATA_STATUS => data_status::NAMES,
        _ => &[],
    }
}

/// The name of bit `n` of flag IE `ie_type`, if the specification names it.
pub fn flag_name(ie_type: u16, n: u16) -> Option<&'static str> {
    names(ie_type)
        .iter()
        .find(|(b, _)| *b == n)
        .map(|(_, s)| *s)
}

/// JSON for a flag IE: the octets in hex and the names of the bits that are set.
pub(crate) fn flags_json(ie_type: u16, f: &Flags) -> Json {
    let set: Vec<String> = f
        .bits()
        .map(|n| {
            flag_name(ie_type, n)
                .map(str::to_string)
                .unwrap_or_else(|| format!("bit{n}"))
        })
        .collect();
    json!({ "hex": f.0.iter().map(|b| format!("{b:02x}")).collect::<String>(), "set": set })
}
