//! Session-related messages, TS 29.244 clause 7.5.

use crate::ie::{
    report_type, Bytes, CauseValue, FSeid, FTeid, FailedRuleId, Flags, FqCsid, IpAddresses, Name,
    NodeId, SNssai, UserId,
};

use super::{
    message, CreateBar, CreateFar, CreatePdr, CreateQer, CreateSrr, CreateTrafficEndpoint,
    CreateUrr, CreatedPdr, CreatedTrafficEndpoint, DownlinkDataReport, ErrorIndicationReport,
    LoadControlInformation, OverloadControlInformation, PartialFailureInformation, QueryUrr,
    RemoveBar, RemoveFar, RemovePdr, RemoveQer, RemoveSrr, RemoveTrafficEndpoint, RemoveUrr,
    SessionReport, UpdateBar, UpdateBarReportResponse, UpdateFar, UpdatePdr, UpdateQer, UpdateSrr,
    UpdateTrafficEndpoint, UpdateUrr, UsageReport,
};

message! {
    /// Session Establishment Request, Table 7.5.2.1-1.
    pub struct SessionEstablishmentRequest = SESSION_ESTABLISHMENT_REQUEST {
        node_id: M NodeId = NODE_ID,
        cp_fseid: M FSeid = FSEID,
        create_pdrs: MV CreatePdr = CREATE_PDR,
        create_fars: MV CreateFar = CREATE_FAR,
        create_urrs: V CreateUrr = CREATE_URR,
        create_qers: V CreateQer = CREATE_QER,
        create_bar: O CreateBar = CREATE_BAR,
        create_traffic_endpoints: V CreateTrafficEndpoint = CREATE_TRAFFIC_ENDPOINT,
        pdn_type: O u8 = PDN_TYPE,
        fq_csids: V FqCsid = FQ_CSID,
        user_plane_inactivity_timer: O u32 = USER_PLANE_INACTIVITY_TIMER,
        user_id: O UserId = USER_ID,
        trace_information: O Bytes = TRACE_INFORMATION,
        apn_dnn: O Name = APN_DNN,
        pfcpse_req_flags: O Flags = PFCPSE_REQ_FLAGS,
        create_srrs: V CreateSrr = CREATE_SRR,
        recovery_time_stamp: O u32 = RECOVERY_TIME_STAMP,
        s_nssai: O SNssai = S_NSSAI,
        rat_type: O u8 = RAT_TYPE,
    }
}

message! {
    /// Session Establishment Response, Table 7.5.3.1-1.
    pub struct SessionEstablishmentResponse = SESSION_ESTABLISHMENT_RESPONSE {
        node_id: M NodeId = NODE_ID,
        cause: M CauseValue = CAUSE,
        offending_ie: O u16 = OFFENDING_IE,
        up_fseid: O FSeid = FSEID,
        created_pdrs: V CreatedPdr = CREATED_PDR,
        load_control_information: O LoadControlInformation = LOAD_CONTROL_INFORMATION,
        overload_control_information: O OverloadControlInformation = OVERLOAD_CONTROL_INFORMATION,
        fq_csid: O FqCsid = FQ_CSID,
        failed_rule_id: O FailedRuleId = FAILED_RULE_ID,
        created_traffic_endpoints: V CreatedTrafficEndpoint = CREATED_TRAFFIC_ENDPOINT,
        partial_failure_information: V PartialFailureInformation = PARTIAL_FAILURE_INFORMATION,
    }
}

message! {
    /// Session Modification Request, Table 7.5.4.1-1.
    pub struct SessionModificationRequest = SESSION_MODIFICATION_REQUEST {
        cp_fseid: O FSeid = FSEID,
        remove_pdrs: V RemovePdr = REMOVE_PDR,
        remove_fars: V RemoveFar = REMOVE_FAR,
        remove_urrs: V RemoveUrr = REMOVE_URR,
        remove_qers: V RemoveQer = REMOVE_QER,
        remove_bar: O RemoveBar = REMOVE_BAR,
        remove_traffic_endpoints: V RemoveTrafficEndpoint = REMOVE_TRAFFIC_ENDPOINT,
        create_pdrs: V CreatePdr = CREATE_PDR,
        create_fars: V CreateFar = CREATE_FAR,
        create_urrs: V CreateUrr = CREATE_URR,
        create_qers: V CreateQer = CREATE_QER,
        create_bar: O CreateBar = CREATE_BAR,
        create_traffic_endpoints: V CreateTrafficEndpoint = CREATE_TRAFFIC_ENDPOINT,
        update_pdrs: V UpdatePdr = UPDATE_PDR,
        update_fars: V UpdateFar = UPDATE_FAR,
        update_urrs: V UpdateUrr = UPDATE_URR,
        update_qers: V UpdateQer = UPDATE_QER,
        update_bar: O UpdateBar = UPDATE_BAR_SESSION_MODIFICATION_REQUEST,
        update_traffic_endpoints: V UpdateTrafficEndpoint = UPDATE_TRAFFIC_ENDPOINT,
        pfcpsm_req_flags: O Flags = PFCPSM_REQ_FLAGS,
        query_urrs: V QueryUrr = QUERY_URR,
        fq_csids: V FqCsid = FQ_CSID,
        user_plane_inactivity_timer: O u32 = USER_PLANE_INACTIVITY_TIMER,
        query_urr_reference: O u32 = QUERY_URR_REFERENCE,
        trace_information: O Bytes = TRACE_INFORMATION,
        node_id: O NodeId = NODE_ID,
        remove_srrs: V RemoveSrr = REMOVE_SRR,
        create_srrs: V CreateSrr = CREATE_SRR,
        update_srrs: V UpdateSrr = UPDATE_SRR,
        s_nssai: O SNssai = S_NSSAI,
        rat_type: O u8 = RAT_TYPE,
    }
}

message! {
    /// Session Modification Response, Table 7.5.5.1-1.
    pub struct SessionModificationResponse = SESSION_MODIFICATION_RESPONSE {
        cause: M CauseValue = CAUSE,
        offending_ie: O u16 = OFFENDING_IE,
        created_pdrs: V CreatedPdr = CREATED_PDR,
        load_control_information: O LoadControlInformation = LOAD_CONTROL_INFORMATION,
        overload_control_information: O OverloadControlInformation = OVERLOAD_CONTROL_INFORMATION,
        usage_reports: V UsageReport = USAGE_REPORT_SESSION_MODIFICATION_RESPONSE,
        failed_rule_id: O FailedRuleId = FAILED_RULE_ID,
        additional_usage_reports_information: O u16 = ADDITIONAL_USAGE_REPORTS_INFORMATION,
        created_traffic_endpoints: V CreatedTrafficEndpoint = CREATED_TRAFFIC_ENDPOINT,
        partial_failure_information: V PartialFailureInformation = PARTIAL_FAILURE_INFORMATION,
    }
}

message! {
    /// Session Deletion Request, Table 7.5.6.1-1: no IEs of its own.
    pub struct SessionDeletionRequest = SESSION_DELETION_REQUEST {}
}

message! {
    /// Session Deletion Response, Table 7.5.7.1-1.
    pub struct SessionDeletionResponse = SESSION_DELETION_RESPONSE {
        cause: M CauseValue = CAUSE,
        offending_ie: O u16 = OFFENDING_IE,
        load_control_information: O LoadControlInformation = LOAD_CONTROL_INFORMATION,
        overload_control_information: O OverloadControlInformation = OVERLOAD_CONTROL_INFORMATION,
        usage_reports: V UsageReport = USAGE_REPORT_SESSION_DELETION_RESPONSE,
        additional_usage_reports_information: O u16 = ADDITIONAL_USAGE_REPORTS_INFORMATION,
        /// Session Reports of the SRRs that report at release (Reporting Frequency
        /// SESRL, clause 8.2.168): last in Table 7.5.7.1-1 of Rel-17.
        session_reports: V SessionReport = SESSION_REPORT,
    }
}

message! {
    /// Session Report Request, Table 7.5.8.1-1.
    pub struct SessionReportRequest = SESSION_REPORT_REQUEST {
        report_type: M Flags = REPORT_TYPE,
        downlink_data_report: O DownlinkDataReport = DOWNLINK_DATA_REPORT,
        usage_reports: V UsageReport = USAGE_REPORT_SESSION_REPORT_REQUEST,
        error_indication_report: O ErrorIndicationReport = ERROR_INDICATION_REPORT,
        load_control_information: O LoadControlInformation = LOAD_CONTROL_INFORMATION,
        overload_control_information: O OverloadControlInformation = OVERLOAD_CONTROL_INFORMATION,
        additional_usage_reports_information: O u16 = ADDITIONAL_USAGE_REPORTS_INFORMATION,
        pfcpsr_req_flags: O Flags = PFCPSR_REQ_FLAGS,
        old_cp_fseid: O FSeid = FSEID,
        /// One per SRR that reports (Report Type SESR).
        session_reports: V SessionReport = SESSION_REPORT,
        cause: O CauseValue = CAUSE,
    }
}

impl SessionReportRequest {
    /// A request with the mandatory Report Type only (Table 7.5.8.1-1); set the IEs it
    /// announces with struct update syntax, or use the constructors below.
    pub fn new(report_type: Flags) -> Self {
        SessionReportRequest {
            report_type,
            downlink_data_report: None,
            usage_reports: vec![],
            error_indication_report: None,
            load_control_information: None,
            overload_control_information: None,
            additional_usage_reports_information: None,
            pfcpsr_req_flags: None,
            old_cp_fseid: None,
            session_reports: vec![],
            cause: None,
            other: vec![],
        }
    }

    /// USAR: Usage Reports (clause 7.5.8.3).
    pub fn usage(usage_reports: Vec<UsageReport>) -> Self {
        SessionReportRequest {
            usage_reports,
            ..Self::new(Flags::from_bits(&[report_type::USAR], 1))
        }
    }

    /// DLDR: a Downlink Data Report (clause 7.5.8.2).
    pub fn downlink_data(report: DownlinkDataReport) -> Self {
        SessionReportRequest {
            downlink_data_report: Some(report),
            ..Self::new(Flags::from_bits(&[report_type::DLDR], 1))
        }
    }

    /// SESR: Session Reports, e.g. QoS Monitoring Reports (clause 7.5.8.6).
    pub fn session(session_reports: Vec<SessionReport>) -> Self {
        SessionReportRequest {
            session_reports,
            ..Self::new(Flags::from_bits(&[report_type::SESR], 1))
        }
    }

    /// ERIR: an Error Indication Report (clause 7.5.8.4).
    pub fn error_indication(report: ErrorIndicationReport) -> Self {
        SessionReportRequest {
            error_indication_report: Some(report),
            ..Self::new(Flags::from_bits(&[report_type::ERIR], 1))
        }
    }
}

message! {
    /// Session Report Response, Table 7.5.9.1-1.
    pub struct SessionReportResponse = SESSION_REPORT_RESPONSE {
        cause: M CauseValue = CAUSE,
        offending_ie: O u16 = OFFENDING_IE,
        update_bar: O UpdateBarReportResponse = UPDATE_BAR_SESSION_REPORT_RESPONSE,
        pfcpsr_rsp_flags: O Flags = PFCPSR_RSP_FLAGS,
        cp_fseid: O FSeid = FSEID,
        n4u_fteid: O FTeid = FTEID,
        alternative_smf_ip_address: O IpAddresses = ALTERNATIVE_SMF_IP_ADDRESS,
    }
}
