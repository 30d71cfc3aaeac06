//! Information elements, TS 29.244 clause 8.
//!
//! [`Ie`] is the generic, ordered tree of a message's IEs: every IE type of Table 8.1.2-1
//! (Rel-17) that this codec knows has a variant holding its typed value (or, for grouped
//! IEs, its children); anything else, vendor IEs included, is kept as [`UnknownIe`] so that
//! re-encoding reproduces it. The typed message structs in [`crate::msg`] are built on the
//! same value types.

mod flags;
mod values;

pub use flags::*;
pub use values::*;

use serde_json::{json, Map, Value as Json};

use crate::error::{Error, ErrorKind, Result};

/// Grouped IEs nest at most this deep (Create PDR > PDI > Ethernet Packet Filter is 3).
pub const MAX_DEPTH: u8 = 8;

/// An IE as it sits in the buffer: type, optional Enterprise ID, value octets, and where.
#[derive(Debug, Clone, Copy)]
pub struct RawIe<'a> {
    pub ie_type: u16,
    pub enterprise_id: Option<u16>,
    pub value: &'a [u8],
    /// Offset of the IE's Type field from the start of the message.
    pub offset: usize,
    /// Offset of the first value octet from the start of the message.
    pub value_offset: usize,
}

/// Iterates over the TLVs of a message body or of a grouped IE, checking that each IE fits
/// its container (TS 29.244 clause 8.1.1). Stops after the first error.
pub struct Tlvs<'a> {
    buf: &'a [u8],
    pos: usize,
    base: usize,
}

/// The TLVs in `buf`, whose first octet is at offset `base` in the message.
pub fn tlvs(buf: &[u8], base: usize) -> Tlvs<'_> {
    Tlvs { buf, pos: 0, base }
}

impl<'a> Iterator for Tlvs<'a> {
    type Item = Result<RawIe<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let rest = &self.buf[self.pos..];
        if rest.is_empty() {
            return None;
        }
        let offset = self.base + self.pos;
        let fail = |this: &mut Self, e: Error| {
            this.pos = this.buf.len();
            Some(Err(e))
        };
        if rest.len() < 4 {
            return fail(self, Error::new(ErrorKind::TruncatedIeHeader, None, offset));
        }
        let ie_type = u16::from_be_bytes([rest[0], rest[1]]);
        let len = u16::from_be_bytes([rest[2], rest[3]]) as usize;
        if len > rest.len() - 4 {
            let e = ErrorKind::IeOverrun {
                declared: len,
                available: rest.len() - 4,
            };
            return fail(self, Error::new(e, Some(ie_type), offset));
        }
        let mut value = &rest[4..4 + len];
        let mut value_offset = offset + 4;
        let enterprise_id = if ie_type & 0x8000 != 0 {
            if len < 2 {
                let e = ErrorKind::IeTooShort {
                    needed: 2,
                    got: len,
                };
                return fail(self, Error::new(e, Some(ie_type), offset));
            }
            let id = u16::from_be_bytes([value[0], value[1]]);
            value = &value[2..];
            value_offset += 2;
            Some(id)
        } else {
            None
        };
        self.pos += 4 + len;
        Some(Ok(RawIe {
            ie_type,
            enterprise_id,
            value,
            offset,
            value_offset,
        }))
    }
}

/// Write an IE header, let `value` append the value, then fill in the length.
pub(crate) fn put_ie(
    out: &mut Vec<u8>,
    ie_type: u16,
    enterprise_id: Option<u16>,
    value: impl FnOnce(&mut Vec<u8>),
) {
    let start = out.len();
    out.extend_from_slice(&ie_type.to_be_bytes());
    out.extend_from_slice(&[0, 0]);
    if let Some(e) = enterprise_id {
        out.extend_from_slice(&e.to_be_bytes());
    }
    value(out);
    let len = (out.len() - start - 4).min(u16::MAX as usize) as u16;
    out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
}

/// An IE this codec does not interpret (an unknown type, or a vendor-specific IE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownIe {
    pub ie_type: u16,
    pub enterprise_id: Option<u16>,
    pub value: Vec<u8>,
}

/// Decode the children of a grouped IE.
pub(crate) fn decode_children(raw: &RawIe, depth: u8) -> Result<Vec<Ie>> {
    if depth >= MAX_DEPTH {
        return Err(Error::new(
            ErrorKind::TooDeep,
            Some(raw.ie_type),
            raw.offset,
        ));
    }
    let mut v = Vec::new();
    for r in tlvs(raw.value, raw.value_offset) {
        let r = r.map_err(|e| e.within(raw.ie_type))?;
        v.push(Ie::decode(&r, depth + 1).map_err(|e| e.within(raw.ie_type))?);
    }
    Ok(v)
}

/// Decode a sequence of IEs (a message body).
pub fn decode_ies(buf: &[u8], base: usize) -> Result<Vec<Ie>> {
    let mut v = Vec::new();
    for r in tlvs(buf, base) {
        v.push(Ie::decode(&r?, 0)?);
    }
    Ok(v)
}

/// Encode a sequence of IEs.
pub fn encode_ies(ies: &[Ie], out: &mut Vec<u8>) {
    for ie in ies {
        ie.encode(out);
    }
}

macro_rules! ie_variant_ty {
    (group) => { Vec<Ie> };
    ($t:ty) => { $t };
}

macro_rules! ie_is_group {
    (group) => {
        true
    };
    ($t:ty) => {
        false
    };
}

macro_rules! ie_decode {
    (group, $v:ident, $raw:ident, $depth:ident) => {
        Ie::$v(decode_children($raw, $depth)?)
    };
    ($t:ty, $v:ident, $raw:ident, $depth:ident) => {
        Ie::$v(
            <$t as Value>::decode($raw.value).map_err(|e| e.at($raw.ie_type, $raw.value_offset))?,
        )
    };
}

macro_rules! ie_encode {
    (group, $x:ident, $out:ident) => {
        encode_ies($x, $out)
    };
    ($t:ty, $x:ident, $out:ident) => {
        Value::encode($x, $out)
    };
}

macro_rules! ie_json {
    (group, $code:expr, $x:ident) => {
        ("ies", Json::Array($x.iter().map(Ie::to_json).collect()))
    };
    (Flags, $code:expr, $x:ident) => {
        ("value", flags_json($code, $x))
    };
    ($t:ty, $code:expr, $x:ident) => {
        ("value", serde_json::to_value($x).unwrap_or(Json::Null))
    };
}

macro_rules! ie_table {
    ($( $code:literal $variant:ident $konst:ident $name:literal $kind:tt ; )*) => {
        /// IE type values, TS 29.244 Table 8.1.2-1.
        pub mod types {
            $( #[doc = $name] pub const $konst: u16 = $code; )*
        }

        /// The specification's name of an IE type, if known.
        pub fn ie_name(ie_type: u16) -> Option<&'static str> {
            match ie_type {
                $( $code => Some($name), )*
                _ => None,
            }
        }

        /// True for the IE types that are grouped IEs.
        pub fn is_grouped(ie_type: u16) -> bool {
            match ie_type {
                $( $code => ie_is_group!($kind), )*
                _ => false,
            }
        }

        /// Every IE type of the table with the name of its value type: `"group"` for
        /// grouped IEs, `"Bytes"` for IEs carried opaque, otherwise the typed value
        /// (`"FTeid"`, `"u32"` ...).
        pub fn known_ie_types() -> &'static [(u16, &'static str)] {
            &[ $( ($code, stringify!($kind)), )* ]
        }

        /// One IE with its typed value (or children), in the order it appeared.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Ie {
            $( #[doc = $name] $variant(ie_variant_ty!($kind)), )*
            /// An unknown or vendor-specific IE, kept as octets.
            Unknown(UnknownIe),
        }

        impl Ie {
            /// The IE type value.
            pub fn ie_type(&self) -> u16 {
                match self {
                    $( Ie::$variant(_) => $code, )*
                    Ie::Unknown(u) => u.ie_type,
                }
            }

            /// Decode one IE; grouped IEs are decoded recursively.
            pub fn decode(raw: &RawIe, depth: u8) -> Result<Ie> {
                if raw.enterprise_id.is_some() {
                    return Ok(Ie::Unknown(UnknownIe {
                        ie_type: raw.ie_type,
                        enterprise_id: raw.enterprise_id,
                        value: raw.value.to_vec(),
                    }));
                }
                Ok(match raw.ie_type {
                    $( $code => ie_decode!($kind, $variant, raw, depth), )*
                    _ => Ie::Unknown(UnknownIe {
                        ie_type: raw.ie_type,
                        enterprise_id: None,
                        value: raw.value.to_vec(),
                    }),
                })
            }

            /// Append the IE (header and value) to `out`.
            pub fn encode(&self, out: &mut Vec<u8>) {
                match self {
                    $( Ie::$variant(x) => put_ie(out, $code, None, |out| ie_encode!($kind, x, out)), )*
                    Ie::Unknown(u) => put_ie(out, u.ie_type, u.enterprise_id, |out| out.extend_from_slice(&u.value)),
                }
            }

            /// The IE as JSON: type, name, and value (or children).
            pub fn to_json(&self) -> Json {
                let mut m = Map::new();
                m.insert("type".into(), json!(self.ie_type()));
                if let Some(n) = ie_name(self.ie_type()) {
                    m.insert("name".into(), json!(n));
                }
                let (k, v) = match self {
                    $( Ie::$variant(x) => ie_json!($kind, $code, x), )*
                    Ie::Unknown(u) => {
                        if let Some(e) = u.enterprise_id {
                            m.insert("enterprise_id".into(), json!(e));
                        }
                        ("hex", json!(u.value.iter().map(|b| format!("{b:02x}")).collect::<String>()))
                    }
                };
                m.insert(k.into(), v);
                Json::Object(m)
            }
        }
    };
}

ie_table! {
    1 CreatePdr CREATE_PDR "Create PDR" group;
    2 Pdi PDI "PDI" group;
    3 CreateFar CREATE_FAR "Create FAR" group;
    4 ForwardingParameters FORWARDING_PARAMETERS "Forwarding Parameters" group;
    5 DuplicatingParameters DUPLICATING_PARAMETERS "Duplicating Parameters" group;
    6 CreateUrr CREATE_URR "Create URR" group;
    7 CreateQer CREATE_QER "Create QER" group;
    8 CreatedPdr CREATED_PDR "Created PDR" group;
    9 UpdatePdr UPDATE_PDR "Update PDR" group;
    10 UpdateFar UPDATE_FAR "Update FAR" group;
    11 UpdateForwardingParameters UPDATE_FORWARDING_PARAMETERS "Update Forwarding Parameters" group;
    12 UpdateBarSessionReportResponse UPDATE_BAR_SESSION_REPORT_RESPONSE "Update BAR (PFCP Session Report Response)" group;
    13 UpdateUrr UPDATE_URR "Update URR" group;
    14 UpdateQer UPDATE_QER "Update QER" group;
    15 RemovePdr REMOVE_PDR "Remove PDR" group;
    16 RemoveFar REMOVE_FAR "Remove FAR" group;
    17 RemoveUrr REMOVE_URR "Remove URR" group;
    18 RemoveQer REMOVE_QER "Remove QER" group;
    19 Cause CAUSE "Cause" CauseValue;
    20 SourceInterface SOURCE_INTERFACE "Source Interface" Interface;
    21 FTeid FTEID "F-TEID" FTeid;
    22 NetworkInstance NETWORK_INSTANCE "Network Instance" Name;
    23 SdfFilter SDF_FILTER "SDF Filter" SdfFilter;
    24 ApplicationId APPLICATION_ID "Application ID" Text;
    25 GateStatus GATE_STATUS "Gate Status" u8;
    26 Mbr MBR "MBR" Bitrate;
    27 Gbr GBR "GBR" Bitrate;
    28 QerCorrelationId QER_CORRELATION_ID "QER Correlation ID" u32;
    29 Precedence PRECEDENCE "Precedence" u32;
    30 TransportLevelMarking TRANSPORT_LEVEL_MARKING "Transport Level Marking" u16;
    31 VolumeThreshold VOLUME_THRESHOLD "Volume Threshold" Volume;
    32 TimeThreshold TIME_THRESHOLD "Time Threshold" u32;
    33 MonitoringTime MONITORING_TIME "Monitoring Time" u32;
    34 SubsequentVolumeThreshold SUBSEQUENT_VOLUME_THRESHOLD "Subsequent Volume Threshold" Volume;
    35 SubsequentTimeThreshold SUBSEQUENT_TIME_THRESHOLD "Subsequent Time Threshold" u32;
    36 InactivityDetectionTime INACTIVITY_DETECTION_TIME "Inactivity Detection Time" u32;
    37 ReportingTriggers REPORTING_TRIGGERS "Reporting Triggers" Flags;
    38 RedirectInformation REDIRECT_INFORMATION "Redirect Information" RedirectInformation;
    39 ReportType REPORT_TYPE "Report Type" Flags;
    40 OffendingIe OFFENDING_IE "Offending IE" u16;
    41 ForwardingPolicy FORWARDING_POLICY "Forwarding Policy" ForwardingPolicy;
    42 DestinationInterface DESTINATION_INTERFACE "Destination Interface" Interface;
    43 UpFunctionFeatures UP_FUNCTION_FEATURES "UP Function Features" Flags;
    44 ApplyAction APPLY_ACTION "Apply Action" Flags;
    45 DownlinkDataServiceInformation DOWNLINK_DATA_SERVICE_INFORMATION "Downlink Data Service Information" DownlinkDataServiceInformation;
    46 DownlinkDataNotificationDelay DOWNLINK_DATA_NOTIFICATION_DELAY "Downlink Data Notification Delay" u8;
    47 DlBufferingDuration DL_BUFFERING_DURATION "DL Buffering Duration" GprsTimer;
    48 DlBufferingSuggestedPacketCount DL_BUFFERING_SUGGESTED_PACKET_COUNT "DL Buffering Suggested Packet Count" PacketCount;
    49 PfcpsmReqFlags PFCPSM_REQ_FLAGS "PFCPSMReq-Flags" Flags;
    50 PfcpsrRspFlags PFCPSR_RSP_FLAGS "PFCPSRRsp-Flags" Flags;
    51 LoadControlInformation LOAD_CONTROL_INFORMATION "Load Control Information" group;
    52 SequenceNumber SEQUENCE_NUMBER "Sequence Number" u32;
    53 Metric METRIC "Metric" u8;
    54 OverloadControlInformation OVERLOAD_CONTROL_INFORMATION "Overload Control Information" group;
    55 Timer TIMER "Timer" GprsTimer;
    56 PdrId PDR_ID "PDR ID" u16;
    57 FSeid FSEID "F-SEID" FSeid;
    58 ApplicationIdsPfds APPLICATION_IDS_PFDS "Application ID's PFDs" group;
    59 PfdContext PFD_CONTEXT "PFD context" group;
    60 NodeId NODE_ID "Node ID" NodeId;
    61 PfdContents PFD_CONTENTS "PFD contents" PfdContents;
    62 MeasurementMethod MEASUREMENT_METHOD "Measurement Method" Flags;
    63 UsageReportTrigger USAGE_REPORT_TRIGGER "Usage Report Trigger" Flags;
    64 MeasurementPeriod MEASUREMENT_PERIOD "Measurement Period" u32;
    65 FqCsid FQ_CSID "FQ-CSID" FqCsid;
    66 VolumeMeasurement VOLUME_MEASUREMENT "Volume Measurement" VolumeMeasurement;
    67 DurationMeasurement DURATION_MEASUREMENT "Duration Measurement" u32;
    68 ApplicationDetectionInformation APPLICATION_DETECTION_INFORMATION "Application Detection Information" group;
    69 TimeOfFirstPacket TIME_OF_FIRST_PACKET "Time of First Packet" u32;
    70 TimeOfLastPacket TIME_OF_LAST_PACKET "Time of Last Packet" u32;
    71 QuotaHoldingTime QUOTA_HOLDING_TIME "Quota Holding Time" u32;
    72 DroppedDlTrafficThreshold DROPPED_DL_TRAFFIC_THRESHOLD "Dropped DL Traffic Threshold" DroppedDlTrafficThreshold;
    73 VolumeQuota VOLUME_QUOTA "Volume Quota" Volume;
    74 TimeQuota TIME_QUOTA "Time Quota" u32;
    75 StartTime START_TIME "Start Time" u32;
    76 EndTime END_TIME "End Time" u32;
    77 QueryUrr QUERY_URR "Query URR" group;
    78 UsageReportSessionModificationResponse USAGE_REPORT_SESSION_MODIFICATION_RESPONSE "Usage Report (Session Modification Response)" group;
    79 UsageReportSessionDeletionResponse USAGE_REPORT_SESSION_DELETION_RESPONSE "Usage Report (Session Deletion Response)" group;
    80 UsageReportSessionReportRequest USAGE_REPORT_SESSION_REPORT_REQUEST "Usage Report (Session Report Request)" group;
    81 UrrId URR_ID "URR ID" u32;
    82 LinkedUrrId LINKED_URR_ID "Linked URR ID" u32;
    83 DownlinkDataReport DOWNLINK_DATA_REPORT "Downlink Data Report" group;
    84 OuterHeaderCreation OUTER_HEADER_CREATION "Outer Header Creation" OuterHeaderCreation;
    85 CreateBar CREATE_BAR "Create BAR" group;
    86 UpdateBarSessionModificationRequest UPDATE_BAR_SESSION_MODIFICATION_REQUEST "Update BAR (Session Modification Request)" group;
    87 RemoveBar REMOVE_BAR "Remove BAR" group;
    88 BarId BAR_ID "BAR ID" u8;
    89 CpFunctionFeatures CP_FUNCTION_FEATURES "CP Function Features" Flags;
    90 UsageInformation USAGE_INFORMATION "Usage Information" Flags;
    91 ApplicationInstanceId APPLICATION_INSTANCE_ID "Application Instance ID" Text;
    92 FlowInformation FLOW_INFORMATION "Flow Information" FlowInformation;
    93 UeIpAddress UE_IP_ADDRESS "UE IP Address" UeIpAddress;
    94 PacketRate PACKET_RATE "Packet Rate" PacketRate;
    95 OuterHeaderRemoval OUTER_HEADER_REMOVAL "Outer Header Removal" OuterHeaderRemoval;
    96 RecoveryTimeStamp RECOVERY_TIME_STAMP "Recovery Time Stamp" u32;
    97 DlFlowLevelMarking DL_FLOW_LEVEL_MARKING "DL Flow Level Marking" DlFlowLevelMarking;
    98 HeaderEnrichment HEADER_ENRICHMENT "Header Enrichment" HeaderEnrichment;
    99 ErrorIndicationReport ERROR_INDICATION_REPORT "Error Indication Report" group;
    100 MeasurementInformation MEASUREMENT_INFORMATION "Measurement Information" Flags;
    101 NodeReportType NODE_REPORT_TYPE "Node Report Type" Flags;
    102 UserPlanePathFailureReport USER_PLANE_PATH_FAILURE_REPORT "User Plane Path Failure Report" group;
    103 RemoteGtpuPeer REMOTE_GTPU_PEER "Remote GTP-U Peer" RemoteGtpuPeer;
    104 UrSeqn UR_SEQN "UR-SEQN" u32;
    105 UpdateDuplicatingParameters UPDATE_DUPLICATING_PARAMETERS "Update Duplicating Parameters" group;
    106 ActivatePredefinedRules ACTIVATE_PREDEFINED_RULES "Activate Predefined Rules" Text;
    107 DeactivatePredefinedRules DEACTIVATE_PREDEFINED_RULES "Deactivate Predefined Rules" Text;
    108 FarId FAR_ID "FAR ID" u32;
    109 QerId QER_ID "QER ID" u32;
    110 OciFlags OCI_FLAGS "OCI Flags" Flags;
    111 PfcpAssociationReleaseRequest PFCP_ASSOCIATION_RELEASE_REQUEST "PFCP Association Release Request" Flags;
    112 GracefulReleasePeriod GRACEFUL_RELEASE_PERIOD "Graceful Release Period" GprsTimer;
    113 PdnType PDN_TYPE "PDN Type" u8;
    114 FailedRuleId FAILED_RULE_ID "Failed Rule ID" FailedRuleId;
    115 TimeQuotaMechanism TIME_QUOTA_MECHANISM "Time Quota Mechanism" TimeQuotaMechanism;
    116 UserPlaneIpResourceInformation USER_PLANE_IP_RESOURCE_INFORMATION "User Plane IP Resource Information" UserPlaneIpResourceInformation;
    117 UserPlaneInactivityTimer USER_PLANE_INACTIVITY_TIMER "User Plane Inactivity Timer" u32;
    118 AggregatedUrrs AGGREGATED_URRS "Aggregated URRs" group;
    119 Multiplier MULTIPLIER "Multiplier" Multiplier;
    120 AggregatedUrrId AGGREGATED_URR_ID "Aggregated URR ID" u32;
    121 SubsequentVolumeQuota SUBSEQUENT_VOLUME_QUOTA "Subsequent Volume Quota" Volume;
    122 SubsequentTimeQuota SUBSEQUENT_TIME_QUOTA "Subsequent Time Quota" u32;
    123 Rqi RQI "RQI" Flags;
    124 Qfi QFI "QFI" u8;
    125 QueryUrrReference QUERY_URR_REFERENCE "Query URR Reference" u32;
    126 AdditionalUsageReportsInformation ADDITIONAL_USAGE_REPORTS_INFORMATION "Additional Usage Reports Information" u16;
    127 CreateTrafficEndpoint CREATE_TRAFFIC_ENDPOINT "Create Traffic Endpoint" group;
    128 CreatedTrafficEndpoint CREATED_TRAFFIC_ENDPOINT "Created Traffic Endpoint" group;
    129 UpdateTrafficEndpoint UPDATE_TRAFFIC_ENDPOINT "Update Traffic Endpoint" group;
    130 RemoveTrafficEndpoint REMOVE_TRAFFIC_ENDPOINT "Remove Traffic Endpoint" group;
    131 TrafficEndpointId TRAFFIC_ENDPOINT_ID "Traffic Endpoint ID" u8;
    132 EthernetPacketFilter ETHERNET_PACKET_FILTER "Ethernet Packet Filter" group;
    133 MacAddress MAC_ADDRESS "MAC address" MacAddress;
    134 CTag C_TAG "C-TAG" VlanTag;
    135 STag S_TAG "S-TAG" VlanTag;
    136 Ethertype ETHERTYPE "Ethertype" u16;
    137 Proxying PROXYING "Proxying" Flags;
    138 EthernetFilterId ETHERNET_FILTER_ID "Ethernet Filter ID" u32;
    139 EthernetFilterProperties ETHERNET_FILTER_PROPERTIES "Ethernet Filter Properties" Flags;
    140 SuggestedBufferingPacketsCount SUGGESTED_BUFFERING_PACKETS_COUNT "Suggested Buffering Packets Count" u8;
    141 UserId USER_ID "User ID" UserId;
    142 EthernetPduSessionInformation ETHERNET_PDU_SESSION_INFORMATION "Ethernet PDU Session Information" Flags;
    143 EthernetTrafficInformation ETHERNET_TRAFFIC_INFORMATION "Ethernet Traffic Information" group;
    144 MacAddressesDetected MAC_ADDRESSES_DETECTED "MAC Addresses Detected" MacAddresses;
    145 MacAddressesRemoved MAC_ADDRESSES_REMOVED "MAC Addresses Removed" MacAddresses;
    146 EthernetInactivityTimer ETHERNET_INACTIVITY_TIMER "Ethernet Inactivity Timer" u32;
    147 AdditionalMonitoringTime ADDITIONAL_MONITORING_TIME "Additional Monitoring Time" group;
    148 EventQuota EVENT_QUOTA "Event Quota" u32;
    149 EventThreshold EVENT_THRESHOLD "Event Threshold" u32;
    150 SubsequentEventQuota SUBSEQUENT_EVENT_QUOTA "Subsequent Event Quota" u32;
    151 SubsequentEventThreshold SUBSEQUENT_EVENT_THRESHOLD "Subsequent Event Threshold" u32;
    152 TraceInformation TRACE_INFORMATION "Trace Information" Bytes;
    153 FramedRoute FRAMED_ROUTE "Framed-Route" Text;
    154 FramedRouting FRAMED_ROUTING "Framed-Routing" u32;
    155 FramedIpv6Route FRAMED_IPV6_ROUTE "Framed-IPv6-Route" Text;
    156 EventTimeStamp EVENT_TIME_STAMP "Event Time Stamp" u32;
    157 AveragingWindow AVERAGING_WINDOW "Averaging Window" u32;
    158 PagingPolicyIndicator PAGING_POLICY_INDICATOR "Paging Policy Indicator" u8;
    159 ApnDnn APN_DNN "APN/DNN" Name;
    160 TgppInterfaceType TGPP_INTERFACE_TYPE "3GPP Interface Type" u8;
    161 PfcpsrReqFlags PFCPSR_REQ_FLAGS "PFCPSRReq-Flags" Flags;
    162 PfcpauReqFlags PFCPAU_REQ_FLAGS "PFCPAUReq-Flags" Flags;
    163 ActivationTime ACTIVATION_TIME "Activation Time" u32;
    164 DeactivationTime DEACTIVATION_TIME "Deactivation Time" u32;
    165 CreateMar CREATE_MAR "Create MAR" group;
    166 AccessForwardingActionInformation1 ACCESS_FORWARDING_ACTION_INFORMATION1 "Access Forwarding Action Information 1" group;
    167 AccessForwardingActionInformation2 ACCESS_FORWARDING_ACTION_INFORMATION2 "Access Forwarding Action Information 2" group;
    168 RemoveMar REMOVE_MAR "Remove MAR" group;
    169 UpdateMar UPDATE_MAR "Update MAR" group;
    170 MarId MAR_ID "MAR ID" u16;
    171 SteeringFunctionality STEERING_FUNCTIONALITY "Steering Functionality" u8;
    172 SteeringMode STEERING_MODE "Steering Mode" u8;
    173 Weight WEIGHT "Weight" u8;
    174 Priority PRIORITY "Priority" u8;
    175 UpdateAccessForwardingActionInformation1 UPDATE_ACCESS_FORWARDING_ACTION_INFORMATION1 "Update Access Forwarding Action Information 1" group;
    176 UpdateAccessForwardingActionInformation2 UPDATE_ACCESS_FORWARDING_ACTION_INFORMATION2 "Update Access Forwarding Action Information 2" group;
    177 UeIpAddressPoolIdentity UE_IP_ADDRESS_POOL_IDENTITY "UE IP address Pool Identity" UeIpAddressPoolIdentity;
    178 AlternativeSmfIpAddress ALTERNATIVE_SMF_IP_ADDRESS "Alternative SMF IP Address" IpAddresses;
    179 PacketReplicationAndDetectionCarryOnInformation PACKET_REPLICATION_AND_DETECTION_CARRY_ON_INFORMATION "Packet Replication and Detection Carry-On Information" Flags;
    180 SmfSetId SMF_SET_ID "SMF Set ID" SmfSetId;
    181 QuotaValidityTime QUOTA_VALIDITY_TIME "Quota Validity Time" u32;
    182 NumberOfReports NUMBER_OF_REPORTS "Number of Reports" u16;
    183 PfcpSessionRetentionInformation PFCP_SESSION_RETENTION_INFORMATION "PFCP Session Retention Information (within PFCP Association Setup Request)" group;
    184 PfcpasRspFlags PFCPAS_RSP_FLAGS "PFCPASRsp-Flags" Flags;
    185 CpPfcpEntityIpAddress CP_PFCP_ENTITY_IP_ADDRESS "CP PFCP Entity IP Address" IpAddresses;
    186 PfcpseReqFlags PFCPSE_REQ_FLAGS "PFCPSEReq-Flags" Flags;
    187 UserPlanePathRecoveryReport USER_PLANE_PATH_RECOVERY_REPORT "User Plane Path Recovery Report" group;
    188 IpMulticastAddressingInfo IP_MULTICAST_ADDRESSING_INFO "IP Multicast Addressing Info within PFCP Session Establishment Request" group;
    189 JoinIpMulticastInformation JOIN_IP_MULTICAST_INFORMATION "Join IP Multicast Information IE within Usage Report" group;
    190 LeaveIpMulticastInformation LEAVE_IP_MULTICAST_INFORMATION "Leave IP Multicast Information IE within Usage Report" group;
    191 IpMulticastAddress IP_MULTICAST_ADDRESS "IP Multicast Address" Bytes;
    192 SourceIpAddress SOURCE_IP_ADDRESS "Source IP Address" SourceIpAddress;
    193 PacketRateStatus PACKET_RATE_STATUS "Packet Rate Status" Bytes;
    194 CreateBridgeInfoForTsc CREATE_BRIDGE_INFO_FOR_TSC "Create Bridge Info for TSC" Flags;
    195 CreatedBridgeInfoForTsc CREATED_BRIDGE_INFO_FOR_TSC "Created Bridge Info for TSC" group;
    196 DsttPortNumber DSTT_PORT_NUMBER "DS-TT Port Number" u32;
    197 NwttPortNumber NWTT_PORT_NUMBER "NW-TT Port Number" u32;
    198 TsnBridgeId TSN_BRIDGE_ID "TSN Bridge ID" Bytes;
    199 TscManagementInformationSessionModificationRequest TSC_MANAGEMENT_INFORMATION_SESSION_MODIFICATION_REQUEST "TSC Management Information IE within PFCP Session Modification Request" group;
    200 TscManagementInformationSessionModificationResponse TSC_MANAGEMENT_INFORMATION_SESSION_MODIFICATION_RESPONSE "Port Management Information for TSC IE within PFCP Session Modification Response" group;
    201 TscManagementInformationSessionReportRequest TSC_MANAGEMENT_INFORMATION_SESSION_REPORT_REQUEST "Port Management Information for TSC IE within PFCP Session Report Request" group;
    202 PortManagementInformationContainer PORT_MANAGEMENT_INFORMATION_CONTAINER "Port Management Information Container" Bytes;
    203 ClockDriftControlInformation CLOCK_DRIFT_CONTROL_INFORMATION "Clock Drift Control Information" group;
    204 RequestedClockDriftInformation REQUESTED_CLOCK_DRIFT_INFORMATION "Requested Clock Drift Information" Flags;
    205 ClockDriftReport CLOCK_DRIFT_REPORT "Clock Drift Report" group;
    206 TsnTimeDomainNumber TSN_TIME_DOMAIN_NUMBER "TSN Time Domain Number" u8;
    207 TimeOffsetThreshold TIME_OFFSET_THRESHOLD "Time Offset Threshold" Bytes;
    208 CumulativeRateRatioThreshold CUMULATIVE_RATE_RATIO_THRESHOLD "Cumulative rateRatio Threshold" Bytes;
    209 TimeOffsetMeasurement TIME_OFFSET_MEASUREMENT "Time Offset Measurement" Bytes;
    210 CumulativeRateRatioMeasurement CUMULATIVE_RATE_RATIO_MEASUREMENT "Cumulative rateRatio Measurement" Bytes;
    211 RemoveSrr REMOVE_SRR "Remove SRR" group;
    212 CreateSrr CREATE_SRR "Create SRR" group;
    213 UpdateSrr UPDATE_SRR "Update SRR" group;
    214 SessionReport SESSION_REPORT "Session Report" group;
    215 SrrId SRR_ID "SRR ID" u8;
    216 AccessAvailabilityControlInformation ACCESS_AVAILABILITY_CONTROL_INFORMATION "Access Availability Control Information" group;
    217 RequestedAccessAvailabilityInformation REQUESTED_ACCESS_AVAILABILITY_INFORMATION "Requested Access Availability Information" Flags;
    218 AccessAvailabilityReport ACCESS_AVAILABILITY_REPORT "Access Availability Report" group;
    219 AccessAvailabilityInformation ACCESS_AVAILABILITY_INFORMATION "Access Availability Information" u8;
    220 ProvideAtsssControlInformation PROVIDE_ATSSS_CONTROL_INFORMATION "Provide ATSSS Control Information" group;
    221 AtsssControlParameters ATSSS_CONTROL_PARAMETERS "ATSSS Control Parameters" group;
    222 MptcpControlInformation MPTCP_CONTROL_INFORMATION "MPTCP Control Information" Flags;
    223 AtsssLlControlInformation ATSSS_LL_CONTROL_INFORMATION "ATSSS-LL Control Information" Flags;
    224 PmfControlInformation PMF_CONTROL_INFORMATION "PMF Control Information" Bytes;
    225 MptcpParameters MPTCP_PARAMETERS "MPTCP Parameters" group;
    226 AtsssLlParameters ATSSS_LL_PARAMETERS "ATSSS-LL Parameters" group;
    227 PmfParameters PMF_PARAMETERS "PMF Parameters" group;
    228 MptcpAddressInformation MPTCP_ADDRESS_INFORMATION "MPTCP Address Information" Bytes;
    229 UeLinkSpecificIpAddress UE_LINK_SPECIFIC_IP_ADDRESS "UE Link-Specific IP Address" Bytes;
    230 PmfAddressInformation PMF_ADDRESS_INFORMATION "PMF Address Information" Bytes;
    231 AtsssLlInformation ATSSS_LL_INFORMATION "ATSSS-LL Information" Flags;
    232 DataNetworkAccessIdentifier DATA_NETWORK_ACCESS_IDENTIFIER "Data Network Access Identifier" Text;
    233 UeIpAddressPoolInformation UE_IP_ADDRESS_POOL_INFORMATION "UE IP address Pool Information" group;
    234 AveragePacketDelay AVERAGE_PACKET_DELAY "Average Packet Delay" u32;
    235 MinimumPacketDelay MINIMUM_PACKET_DELAY "Minimum Packet Delay" u32;
    236 MaximumPacketDelay MAXIMUM_PACKET_DELAY "Maximum Packet Delay" u32;
    237 QosReportTrigger QOS_REPORT_TRIGGER "QoS Report Trigger" Flags;
    238 GtpuPathQosControlInformation GTPU_PATH_QOS_CONTROL_INFORMATION "GTP-U Path QoS Control Information" group;
    239 GtpuPathQosReport GTPU_PATH_QOS_REPORT "GTP-U Path QoS Report (PFCP Node Report Request)" group;
    240 QosInformationInGtpuPathQosReport QOS_INFORMATION_IN_GTPU_PATH_QOS_REPORT "QoS Information in GTP-U Path QoS Report" group;
    241 GtpuPathInterfaceType GTPU_PATH_INTERFACE_TYPE "GTP-U Path Interface Type" Flags;
    242 QosMonitoringPerQosFlowControlInformation QOS_MONITORING_PER_QOS_FLOW_CONTROL_INFORMATION "QoS Monitoring per QoS flow Control Information" group;
    243 RequestedQosMonitoring REQUESTED_QOS_MONITORING "Requested QoS Monitoring" Flags;
    244 ReportingFrequency REPORTING_FREQUENCY "Reporting Frequency" Flags;
    245 PacketDelayThresholds PACKET_DELAY_THRESHOLDS "Packet Delay Thresholds" Bytes;
    246 MinimumWaitTime MINIMUM_WAIT_TIME "Minimum Wait Time" u32;
    247 QosMonitoringReport QOS_MONITORING_REPORT "QoS Monitoring Report" group;
    248 QosMonitoringMeasurement QOS_MONITORING_MEASUREMENT "QoS Monitoring Measurement" Bytes;
    249 MtEdtControlInformation MT_EDT_CONTROL_INFORMATION "MT-EDT Control Information" Flags;
    250 DlDataPacketsSize DL_DATA_PACKETS_SIZE "DL Data Packets Size" u16;
    251 QerControlIndications QER_CONTROL_INDICATIONS "QER Control Indications" Flags;
    252 PacketRateStatusReport PACKET_RATE_STATUS_REPORT "Packet Rate Status Report" group;
    253 NfInstanceId NF_INSTANCE_ID "NF Instance ID" Bytes;
    254 EthernetContextInformation ETHERNET_CONTEXT_INFORMATION "Ethernet Context Information" group;
    255 RedundantTransmissionParameters REDUNDANT_TRANSMISSION_PARAMETERS "Redundant Transmission Parameters" group;
    256 UpdatedPdr UPDATED_PDR "Updated PDR" group;
    257 SNssai S_NSSAI "S-NSSAI" SNssai;
    258 IpVersion IP_VERSION "IP version" Flags;
    259 PfcpasReqFlags PFCPAS_REQ_FLAGS "PFCPASReq-Flags" Flags;
    260 DataStatus DATA_STATUS "Data Status" Flags;
    261 ProvideRdsConfigurationInformation PROVIDE_RDS_CONFIGURATION_INFORMATION "Provide RDS Configuration Information IE within PFCP Session Establishment Request" group;
    262 RdsConfigurationInformation RDS_CONFIGURATION_INFORMATION "RDS Configuration Information" Flags;
    263 QueryPacketRateStatus QUERY_PACKET_RATE_STATUS "Query Packet Rate Status IE within PFCP Session Modification Request" group;
    264 PacketRateStatusReportSessionModificationResponse PACKET_RATE_STATUS_REPORT_SESSION_MODIFICATION_RESPONSE "Query Packet Rate Status Report IE within PFCP Session Modification Response" group;
    265 MptcpApplicableIndication MPTCP_APPLICABLE_INDICATION "MPTCP Applicable Indication" Flags;
    266 UserPlaneNodeManagementInformationContainer USER_PLANE_NODE_MANAGEMENT_INFORMATION_CONTAINER "User Plane Node Management Information Container" Bytes;
    267 UeIpAddressUsageInformation UE_IP_ADDRESS_USAGE_INFORMATION "UE IP Address Usage Information" group;
    268 NumberOfUeIpAddresses NUMBER_OF_UE_IP_ADDRESSES "Number of UE IP Addresses" Bytes;
    269 ValidityTimer VALIDITY_TIMER "Validity Timer" u16;
    270 RedundantTransmissionForwardingParameters REDUNDANT_TRANSMISSION_FORWARDING_PARAMETERS "Redundant Transmission Forwarding Parameters" group;
    271 TransportDelayReporting TRANSPORT_DELAY_REPORTING "Transport Delay Reporting" group;
    272 PartialFailureInformation PARTIAL_FAILURE_INFORMATION "Partial Failure Information" group;
    273 PartialFailureInformationSessionModificationResponse PARTIAL_FAILURE_INFORMATION_SESSION_MODIFICATION_RESPONSE "Partial Failure Information within PFCP Session Modification Response" Bytes;
    274 OffendingIeInformation OFFENDING_IE_INFORMATION "Offending IE Information" Bytes;
    275 RatType RAT_TYPE "RAT Type" u8;
    276 L2tpTunnelInformation L2TP_TUNNEL_INFORMATION "L2TP Tunnel Information" group;
    277 L2tpSessionInformationEstablishmentRequest L2TP_SESSION_INFORMATION_ESTABLISHMENT_REQUEST "L2TP Session Information within PFCP Session Establishment Request" group;
    278 L2tpUserAuthentication L2TP_USER_AUTHENTICATION "L2TP User Authentication" Bytes;
    279 L2tpSessionInformationEstablishmentResponse L2TP_SESSION_INFORMATION_ESTABLISHMENT_RESPONSE "L2TP Session Information within PFCP Session Establishment Response" group;
    280 LnsAddress LNS_ADDRESS "LNS Address" Bytes;
    281 TunnelPreference TUNNEL_PREFERENCE "Tunnel Preference" Bytes;
    282 CallingNumber CALLING_NUMBER "Calling Number" Bytes;
    283 CalledNumber CALLED_NUMBER "Called Number" Bytes;
    284 L2tpSessionIndications L2TP_SESSION_INDICATIONS "L2TP Session Indications" Bytes;
    285 DnsServerAddress DNS_SERVER_ADDRESS "DNS Server Address" Bytes;
    286 NbnsServerAddress NBNS_SERVER_ADDRESS "NBNS Server Address" Bytes;
    287 MaximumReceiveUnit MAXIMUM_RECEIVE_UNIT "Maximum Receive Unit" Bytes;
    288 Thresholds THRESHOLDS "Thresholds" Bytes;
    289 SteeringModeIndicator STEERING_MODE_INDICATOR "Steering Mode Indicator" Bytes;
    290 PfcpSessionChangeInfo PFCP_SESSION_CHANGE_INFO "PFCP Session Change Info" group;
    291 GroupId GROUP_ID "Group ID" Bytes;
    292 CpIpAddress CP_IP_ADDRESS "CP IP Address" Bytes;
    293 IpAddressAndPortNumberReplacement IP_ADDRESS_AND_PORT_NUMBER_REPLACEMENT "IP Address and Port Number Replacement" Bytes;
    294 DnsQueryFilter DNS_QUERY_FILTER "DNS Query Filter" Bytes;
    295 DirectReportingInformation DIRECT_REPORTING_INFORMATION "Direct Reporting Information" group;
    296 EventNotificationUri EVENT_NOTIFICATION_URI "Event Notification URI" Bytes;
    297 NotificationCorrelationId NOTIFICATION_CORRELATION_ID "Notification Correlation ID" Bytes;
    298 ReportingFlags REPORTING_FLAGS "Reporting Flags" Bytes;
    299 PredefinedRulesName PREDEFINED_RULES_NAME "Predefined Rules Name" Bytes;
    300 MbsSessionN4mbControlInformation MBS_SESSION_N4MB_CONTROL_INFORMATION "MBS Session N4mb Control Information" Bytes;
    301 MbsMulticastParameters MBS_MULTICAST_PARAMETERS "MBS Multicast Parameters" Bytes;
    302 AddMbsUnicastParameters ADD_MBS_UNICAST_PARAMETERS "Add MBS Unicast Parameters IE in Create FAR" Bytes;
    303 MbsSessionN4mbInformation MBS_SESSION_N4MB_INFORMATION "MBS Session N4mb Information" Bytes;
    304 RemoveMbsUnicastParameters REMOVE_MBS_UNICAST_PARAMETERS "Remove MBS Unicast Parameters IE in Update FAR" Bytes;
    305 MbsSessionIdentifier MBS_SESSION_IDENTIFIER "MBS Session Identifier" Bytes;
    306 MulticastTransportInformation MULTICAST_TRANSPORT_INFORMATION "Multicast Transport Information" Bytes;
    307 Mbsn4mbReqFlags MBSN4MB_REQ_FLAGS "MBSN4mbReq Flags" Bytes;
    308 LocalIngressTunnel LOCAL_INGRESS_TUNNEL "Local Ingress Tunnel" Bytes;
    309 MbsUnicastParametersId MBS_UNICAST_PARAMETERS_ID "MBS Unicast Parameters ID" Bytes;
    310 MbsSessionN4ControlInformationEstablishmentRequest MBS_SESSION_N4_CONTROL_INFORMATION_ESTABLISHMENT_REQUEST "MBS Session N4 Control Information IE within PFCP Session Establishment Request" Bytes;
    311 MbsSessionN4ControlInformationEstablishmentResponse MBS_SESSION_N4_CONTROL_INFORMATION_ESTABLISHMENT_RESPONSE "MBS Session N4 Control Information IE within PFCP Session Establishment Response" Bytes;
    312 Mbsn4RespFlags MBSN4_RESP_FLAGS "MBSN4Resp-Flags" Bytes;
    313 TunnelPassword TUNNEL_PASSWORD "Tunnel Password" Bytes;
    314 AreaSessionId AREA_SESSION_ID "Area Session ID" Bytes;
    315 PeerUpRestartReport PEER_UP_RESTART_REPORT "Peer UP Restart Report IE within PFCP Node Report Request" Bytes;
    316 DscpToPpiControlInformation DSCP_TO_PPI_CONTROL_INFORMATION "DSCP to PPI Control Information IE within PFCP Session Establishment Request" Bytes;
    317 DscpToPpiMappingInformation DSCP_TO_PPI_MAPPING_INFORMATION "DSCP to PPI Mapping Information" Bytes;
    318 PfcpsdRspFlags PFCPSD_RSP_FLAGS "PFCPSDRsp-Flags" Bytes;
    319 QerIndications QER_INDICATIONS "QER Indications" Bytes;
    320 VendorSpecificNodeReportType VENDOR_SPECIFIC_NODE_REPORT_TYPE "Vendor-Specific Node Report Type" Bytes;
}
