//! Node-related messages, TS 29.244 clause 7.4.

use crate::ie::{
    CauseValue, Flags, FqCsid, GprsTimer, IpAddresses, NodeId, SmfSetId, SourceIpAddress,
    UserPlaneIpResourceInformation,
};

use super::{
    message, ApplicationIdsPfds, GtpuPathQosControlInformation, GtpuPathQosReport,
    PfcpSessionRetentionInformation, UeIpAddressPoolInformation, UserPlanePathFailureReport,
    UserPlanePathRecoveryReport,
};

message! {
    /// Heartbeat Request, Table 7.4.2.1-1.
    pub struct HeartbeatRequest = HEARTBEAT_REQUEST {
        recovery_time_stamp: M u32 = RECOVERY_TIME_STAMP,
        source_ip_address: O SourceIpAddress = SOURCE_IP_ADDRESS,
    }
}

message! {
    /// Heartbeat Response, Table 7.4.2.2-1.
    pub struct HeartbeatResponse = HEARTBEAT_RESPONSE {
        recovery_time_stamp: M u32 = RECOVERY_TIME_STAMP,
    }
}

message! {
    /// PFD Management Request, Table 7.4.3.1-1.
    pub struct PfdManagementRequest = PFD_MANAGEMENT_REQUEST {
        application_ids_pfds: V ApplicationIdsPfds = APPLICATION_IDS_PFDS,
        node_id: O NodeId = NODE_ID,
    }
}

message! {
    /// PFD Management Response, Table 7.4.3.2-1.
    pub struct PfdManagementResponse = PFD_MANAGEMENT_RESPONSE {
        cause: M CauseValue = CAUSE,
        offending_ie: O u16 = OFFENDING_IE,
        node_id: O NodeId = NODE_ID,
    }
}

message! {
    /// Association Setup Request, Table 7.4.4.1-1.
    pub struct AssociationSetupRequest = ASSOCIATION_SETUP_REQUEST {
        node_id: M NodeId = NODE_ID,
        recovery_time_stamp: M u32 = RECOVERY_TIME_STAMP,
        up_function_features: O Flags = UP_FUNCTION_FEATURES,
        cp_function_features: O Flags = CP_FUNCTION_FEATURES,
        user_plane_ip_resource_information: V UserPlaneIpResourceInformation = USER_PLANE_IP_RESOURCE_INFORMATION,
        alternative_smf_ip_addresses: V IpAddresses = ALTERNATIVE_SMF_IP_ADDRESS,
        smf_set_id: O SmfSetId = SMF_SET_ID,
        pfcp_session_retention_information: O PfcpSessionRetentionInformation = PFCP_SESSION_RETENTION_INFORMATION,
        ue_ip_address_pool_information: V UeIpAddressPoolInformation = UE_IP_ADDRESS_POOL_INFORMATION,
        gtpu_path_qos_control_information: V GtpuPathQosControlInformation = GTPU_PATH_QOS_CONTROL_INFORMATION,
        pfcpas_req_flags: O Flags = PFCPAS_REQ_FLAGS,
    }
}

impl AssociationSetupRequest {
    /// A request with the mandatory IEs only (Table 7.4.4.1-1); set the optional ones
    /// with struct update syntax.
    pub fn new(node_id: NodeId, recovery_time_stamp: u32) -> Self {
        AssociationSetupRequest {
            node_id,
            recovery_time_stamp,
            up_function_features: None,
            cp_function_features: None,
            user_plane_ip_resource_information: vec![],
            alternative_smf_ip_addresses: vec![],
            smf_set_id: None,
            pfcp_session_retention_information: None,
            ue_ip_address_pool_information: vec![],
            gtpu_path_qos_control_information: vec![],
            pfcpas_req_flags: None,
            other: vec![],
        }
    }
}

message! {
    /// Association Setup Response, Table 7.4.4.2-1.
    pub struct AssociationSetupResponse = ASSOCIATION_SETUP_RESPONSE {
        node_id: M NodeId = NODE_ID,
        cause: M CauseValue = CAUSE,
        recovery_time_stamp: M u32 = RECOVERY_TIME_STAMP,
        up_function_features: O Flags = UP_FUNCTION_FEATURES,
        cp_function_features: O Flags = CP_FUNCTION_FEATURES,
        user_plane_ip_resource_information: V UserPlaneIpResourceInformation = USER_PLANE_IP_RESOURCE_INFORMATION,
        alternative_smf_ip_addresses: V IpAddresses = ALTERNATIVE_SMF_IP_ADDRESS,
        smf_set_id: O SmfSetId = SMF_SET_ID,
        pfcpas_rsp_flags: O Flags = PFCPAS_RSP_FLAGS,
        ue_ip_address_pool_information: V UeIpAddressPoolInformation = UE_IP_ADDRESS_POOL_INFORMATION,
        gtpu_path_qos_control_information: V GtpuPathQosControlInformation = GTPU_PATH_QOS_CONTROL_INFORMATION,
    }
}

message! {
    /// Association Update Request, Table 7.4.4.3-1.
    pub struct AssociationUpdateRequest = ASSOCIATION_UPDATE_REQUEST {
        node_id: M NodeId = NODE_ID,
        up_function_features: O Flags = UP_FUNCTION_FEATURES,
        cp_function_features: O Flags = CP_FUNCTION_FEATURES,
        user_plane_ip_resource_information: V UserPlaneIpResourceInformation = USER_PLANE_IP_RESOURCE_INFORMATION,
        pfcp_association_release_request: O Flags = PFCP_ASSOCIATION_RELEASE_REQUEST,
        graceful_release_period: O GprsTimer = GRACEFUL_RELEASE_PERIOD,
        pfcpau_req_flags: O Flags = PFCPAU_REQ_FLAGS,
        alternative_smf_ip_addresses: V IpAddresses = ALTERNATIVE_SMF_IP_ADDRESS,
        smf_set_id: O SmfSetId = SMF_SET_ID,
        ue_ip_address_pool_information: V UeIpAddressPoolInformation = UE_IP_ADDRESS_POOL_INFORMATION,
        gtpu_path_qos_control_information: V GtpuPathQosControlInformation = GTPU_PATH_QOS_CONTROL_INFORMATION,
    }
}

message! {
    /// Association Update Response, Table 7.4.4.4-1.
    pub struct AssociationUpdateResponse = ASSOCIATION_UPDATE_RESPONSE {
        node_id: M NodeId = NODE_ID,
        cause: M CauseValue = CAUSE,
        up_function_features: O Flags = UP_FUNCTION_FEATURES,
        cp_function_features: O Flags = CP_FUNCTION_FEATURES,
    }
}

message! {
    /// Association Release Request, Table 7.4.4.5-1.
    pub struct AssociationReleaseRequest = ASSOCIATION_RELEASE_REQUEST {
        node_id: M NodeId = NODE_ID,
    }
}

message! {
    /// Association Release Response, Table 7.4.4.6-1.
    pub struct AssociationReleaseResponse = ASSOCIATION_RELEASE_RESPONSE {
        node_id: M NodeId = NODE_ID,
        cause: M CauseValue = CAUSE,
    }
}

message! {
    /// Version Not Supported Response, clause 7.4.4.7: header only.
    pub struct VersionNotSupportedResponse = VERSION_NOT_SUPPORTED_RESPONSE {}
}

message! {
    /// Node Report Request, Table 7.4.5.1-1.
    pub struct NodeReportRequest = NODE_REPORT_REQUEST {
        node_id: M NodeId = NODE_ID,
        node_report_type: M Flags = NODE_REPORT_TYPE,
        user_plane_path_failure_report: O UserPlanePathFailureReport = USER_PLANE_PATH_FAILURE_REPORT,
        user_plane_path_recovery_report: O UserPlanePathRecoveryReport = USER_PLANE_PATH_RECOVERY_REPORT,
        /// With Node Report Type GPQR: one per remote GTP-U peer reported.
        gtpu_path_qos_reports: V GtpuPathQosReport = GTPU_PATH_QOS_REPORT,
    }
}

message! {
    /// Node Report Response, Table 7.4.5.2-1.
    pub struct NodeReportResponse = NODE_REPORT_RESPONSE {
        node_id: M NodeId = NODE_ID,
        cause: M CauseValue = CAUSE,
        offending_ie: O u16 = OFFENDING_IE,
    }
}

message! {
    /// Session Set Deletion Request, Table 7.4.6.1-1. The FQ-CSIDs (SGW-C, PGW-C/SMF,
    /// SGW-U/PGW-U/UPF, TWAN, ePDG, MME) share one IE type and are kept in order.
    pub struct SessionSetDeletionRequest = SESSION_SET_DELETION_REQUEST {
        node_id: M NodeId = NODE_ID,
        fq_csids: V FqCsid = FQ_CSID,
    }
}

message! {
    /// Session Set Deletion Response, Table 7.4.6.2-1.
    pub struct SessionSetDeletionResponse = SESSION_SET_DELETION_RESPONSE {
        node_id: M NodeId = NODE_ID,
        cause: M CauseValue = CAUSE,
        offending_ie: O u16 = OFFENDING_IE,
    }
}

message! {
    /// Session Set Modification Request, Table 7.4.7.1-1 (Rel-17).
    pub struct SessionSetModificationRequest = SESSION_SET_MODIFICATION_REQUEST {
        alternative_smf_ip_address: M IpAddresses = ALTERNATIVE_SMF_IP_ADDRESS,
        fq_csids: V FqCsid = FQ_CSID,
    }
}

message! {
    /// Session Set Modification Response, Table 7.4.7.2-1 (Rel-17).
    pub struct SessionSetModificationResponse = SESSION_SET_MODIFICATION_RESPONSE {
        node_id: M NodeId = NODE_ID,
        cause: M CauseValue = CAUSE,
        offending_ie: O u16 = OFFENDING_IE,
    }
}
