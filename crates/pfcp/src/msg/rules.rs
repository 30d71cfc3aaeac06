//! Grouped IEs: the rules an SMF installs (PDR, FAR, URR, QER, BAR, Traffic Endpoint) and
//! the reports a UP function sends back, TS 29.244 clauses 7.4 and 7.5.

use crate::ie::{
    Bitrate, Bytes, DlFlowLevelMarking, DownlinkDataServiceInformation, DroppedDlTrafficThreshold,
    FTeid, FailedRuleId, Flags, FlowInformation, ForwardingPolicy, GprsTimer, HeaderEnrichment,
    Interface, IpAddresses, MacAddress, MacAddresses, Multiplier, Name, OuterHeaderCreation,
    OuterHeaderRemoval, PacketCount, PacketDelayThresholds, PacketRate, PfdContents,
    QosMonitoringMeasurement, RedirectInformation, RemoteGtpuPeer, SNssai, SdfFilter, Text,
    TimeQuotaMechanism, UeIpAddress, UeIpAddressPoolIdentity, VlanTag, Volume, VolumeMeasurement,
};

use super::group;

group! {
    /// Create PDR, Table 7.5.2.2-1.
    pub struct CreatePdr {
        pdr_id: M u16 = PDR_ID,
        /// Mandatory in Table 7.5.2.2-1, yet Open5GS's SGW-C leaves it out for SGW-U
        /// sessions (open5gs-testattach-4g-cups.pcapng) and its SGW-U accepts that; so it
        /// is optional here and the session model gives a missing precedence the lowest
        /// priority.
        precedence: O u32 = PRECEDENCE,
        pdi: M Pdi = PDI,
        outer_header_removal: O OuterHeaderRemoval = OUTER_HEADER_REMOVAL,
        far_id: O u32 = FAR_ID,
        urr_ids: V u32 = URR_ID,
        qer_ids: V u32 = QER_ID,
        activate_predefined_rules: V Text = ACTIVATE_PREDEFINED_RULES,
        activation_time: O u32 = ACTIVATION_TIME,
        deactivation_time: O u32 = DEACTIVATION_TIME,
        mar_id: O u16 = MAR_ID,
        packet_replication_and_detection_carry_on_information: O Flags = PACKET_REPLICATION_AND_DETECTION_CARRY_ON_INFORMATION,
        ue_ip_address_pool_identity: V UeIpAddressPoolIdentity = UE_IP_ADDRESS_POOL_IDENTITY,
        mptcp_applicable_indication: O Flags = MPTCP_APPLICABLE_INDICATION,
    }
}

group! {
    /// PDI, Table 7.5.2.2-2: what a PDR matches.
    pub struct Pdi {
        source_interface: M Interface = SOURCE_INTERFACE,
        local_fteid: O FTeid = FTEID,
        network_instance: O Name = NETWORK_INSTANCE,
        ue_ip_address: V UeIpAddress = UE_IP_ADDRESS,
        traffic_endpoint_ids: V u8 = TRAFFIC_ENDPOINT_ID,
        sdf_filters: V SdfFilter = SDF_FILTER,
        application_id: O Text = APPLICATION_ID,
        ethernet_pdu_session_information: O Flags = ETHERNET_PDU_SESSION_INFORMATION,
        ethernet_packet_filters: V EthernetPacketFilter = ETHERNET_PACKET_FILTER,
        qfis: V u8 = QFI,
        framed_routes: V Text = FRAMED_ROUTE,
        framed_routing: O u32 = FRAMED_ROUTING,
        framed_ipv6_routes: V Text = FRAMED_IPV6_ROUTE,
        source_interface_type: O u8 = TGPP_INTERFACE_TYPE,
    }
}

group! {
    /// Ethernet Packet Filter, Table 7.5.2.2-3.
    pub struct EthernetPacketFilter {
        ethernet_filter_id: O u32 = ETHERNET_FILTER_ID,
        ethernet_filter_properties: O Flags = ETHERNET_FILTER_PROPERTIES,
        mac_addresses: V MacAddress = MAC_ADDRESS,
        ethertype: O u16 = ETHERTYPE,
        c_tag: O VlanTag = C_TAG,
        s_tag: O VlanTag = S_TAG,
        sdf_filters: V SdfFilter = SDF_FILTER,
    }
}

group! {
    /// Create FAR, Table 7.5.2.3-1.
    pub struct CreateFar {
        far_id: M u32 = FAR_ID,
        apply_action: M Flags = APPLY_ACTION,
        forwarding_parameters: O ForwardingParameters = FORWARDING_PARAMETERS,
        duplicating_parameters: V DuplicatingParameters = DUPLICATING_PARAMETERS,
        bar_id: O u8 = BAR_ID,
    }
}

group! {
    /// Forwarding Parameters, Table 7.5.2.3-2.
    pub struct ForwardingParameters {
        destination_interface: M Interface = DESTINATION_INTERFACE,
        network_instance: O Name = NETWORK_INSTANCE,
        redirect_information: O RedirectInformation = REDIRECT_INFORMATION,
        outer_header_creation: O OuterHeaderCreation = OUTER_HEADER_CREATION,
        transport_level_marking: O u16 = TRANSPORT_LEVEL_MARKING,
        forwarding_policy: O ForwardingPolicy = FORWARDING_POLICY,
        header_enrichment: O HeaderEnrichment = HEADER_ENRICHMENT,
        linked_traffic_endpoint_id: O u8 = TRAFFIC_ENDPOINT_ID,
        proxying: O Flags = PROXYING,
        destination_interface_type: O u8 = TGPP_INTERFACE_TYPE,
        data_network_access_identifier: O Text = DATA_NETWORK_ACCESS_IDENTIFIER,
    }
}

group! {
    /// Duplicating Parameters, Table 7.5.2.3-3.
    pub struct DuplicatingParameters {
        destination_interface: M Interface = DESTINATION_INTERFACE,
        outer_header_creation: O OuterHeaderCreation = OUTER_HEADER_CREATION,
        transport_level_marking: O u16 = TRANSPORT_LEVEL_MARKING,
        forwarding_policy: O ForwardingPolicy = FORWARDING_POLICY,
    }
}

group! {
    /// Create URR, Table 7.5.2.4-1.
    pub struct CreateUrr {
        urr_id: M u32 = URR_ID,
        measurement_method: M Flags = MEASUREMENT_METHOD,
        reporting_triggers: M Flags = REPORTING_TRIGGERS,
        measurement_period: O u32 = MEASUREMENT_PERIOD,
        volume_threshold: O Volume = VOLUME_THRESHOLD,
        volume_quota: O Volume = VOLUME_QUOTA,
        event_threshold: O u32 = EVENT_THRESHOLD,
        event_quota: O u32 = EVENT_QUOTA,
        time_threshold: O u32 = TIME_THRESHOLD,
        time_quota: O u32 = TIME_QUOTA,
        quota_holding_time: O u32 = QUOTA_HOLDING_TIME,
        dropped_dl_traffic_threshold: O DroppedDlTrafficThreshold = DROPPED_DL_TRAFFIC_THRESHOLD,
        quota_validity_time: O u32 = QUOTA_VALIDITY_TIME,
        monitoring_time: O u32 = MONITORING_TIME,
        subsequent_volume_threshold: O Volume = SUBSEQUENT_VOLUME_THRESHOLD,
        subsequent_time_threshold: O u32 = SUBSEQUENT_TIME_THRESHOLD,
        subsequent_volume_quota: O Volume = SUBSEQUENT_VOLUME_QUOTA,
        subsequent_time_quota: O u32 = SUBSEQUENT_TIME_QUOTA,
        subsequent_event_threshold: O u32 = SUBSEQUENT_EVENT_THRESHOLD,
        subsequent_event_quota: O u32 = SUBSEQUENT_EVENT_QUOTA,
        inactivity_detection_time: O u32 = INACTIVITY_DETECTION_TIME,
        linked_urr_ids: V u32 = LINKED_URR_ID,
        measurement_information: O Flags = MEASUREMENT_INFORMATION,
        time_quota_mechanism: O TimeQuotaMechanism = TIME_QUOTA_MECHANISM,
        aggregated_urrs: V AggregatedUrrs = AGGREGATED_URRS,
        far_id_for_quota_action: O u32 = FAR_ID,
        ethernet_inactivity_timer: O u32 = ETHERNET_INACTIVITY_TIMER,
        additional_monitoring_time: V AdditionalMonitoringTime = ADDITIONAL_MONITORING_TIME,
        number_of_reports: O u16 = NUMBER_OF_REPORTS,
        exempted_application_ids: V Text = APPLICATION_ID,
        exempted_sdf_filters: V SdfFilter = SDF_FILTER,
        user_plane_inactivity_timer: O u32 = USER_PLANE_INACTIVITY_TIMER,
    }
}

group! {
    /// Aggregated URRs, Table 7.5.2.4-2.
    pub struct AggregatedUrrs {
        aggregated_urr_id: M u32 = AGGREGATED_URR_ID,
        multiplier: M Multiplier = MULTIPLIER,
    }
}

group! {
    /// Additional Monitoring Time, Table 7.5.2.4-3.
    pub struct AdditionalMonitoringTime {
        monitoring_time: M u32 = MONITORING_TIME,
        subsequent_volume_threshold: O Volume = SUBSEQUENT_VOLUME_THRESHOLD,
        subsequent_time_threshold: O u32 = SUBSEQUENT_TIME_THRESHOLD,
        subsequent_volume_quota: O Volume = SUBSEQUENT_VOLUME_QUOTA,
        subsequent_time_quota: O u32 = SUBSEQUENT_TIME_QUOTA,
        subsequent_event_threshold: O u32 = SUBSEQUENT_EVENT_THRESHOLD,
        subsequent_event_quota: O u32 = SUBSEQUENT_EVENT_QUOTA,
    }
}

group! {
    /// Create QER, Table 7.5.2.5-1.
    pub struct CreateQer {
        qer_id: M u32 = QER_ID,
        qer_correlation_id: O u32 = QER_CORRELATION_ID,
        gate_status: M u8 = GATE_STATUS,
        mbr: O Bitrate = MBR,
        gbr: O Bitrate = GBR,
        packet_rate: O PacketRate = PACKET_RATE,
        dl_flow_level_marking: O DlFlowLevelMarking = DL_FLOW_LEVEL_MARKING,
        qfi: O u8 = QFI,
        rqi: O Flags = RQI,
        paging_policy_indicator: O u8 = PAGING_POLICY_INDICATOR,
        averaging_window: O u32 = AVERAGING_WINDOW,
        qer_control_indications: O Flags = QER_CONTROL_INDICATIONS,
    }
}

group! {
    /// Create BAR, Table 7.5.2.6-1.
    pub struct CreateBar {
        bar_id: M u8 = BAR_ID,
        downlink_data_notification_delay: O u8 = DOWNLINK_DATA_NOTIFICATION_DELAY,
        suggested_buffering_packets_count: O u8 = SUGGESTED_BUFFERING_PACKETS_COUNT,
        mt_edt_control_information: O Flags = MT_EDT_CONTROL_INFORMATION,
    }
}

group! {
    /// Create Traffic Endpoint, Table 7.5.2.7-1.
    pub struct CreateTrafficEndpoint {
        traffic_endpoint_id: M u8 = TRAFFIC_ENDPOINT_ID,
        local_fteid: O FTeid = FTEID,
        network_instance: O Name = NETWORK_INSTANCE,
        ue_ip_address: V UeIpAddress = UE_IP_ADDRESS,
        ethernet_pdu_session_information: O Flags = ETHERNET_PDU_SESSION_INFORMATION,
        framed_routes: V Text = FRAMED_ROUTE,
        framed_routing: O u32 = FRAMED_ROUTING,
        framed_ipv6_routes: V Text = FRAMED_IPV6_ROUTE,
        qfis: V u8 = QFI,
        source_interface_type: O u8 = TGPP_INTERFACE_TYPE,
    }
}

group! {
    /// Create SRR, Table 7.5.2.9-1: a Session Reporting Rule, for what the UP function
    /// detects and reports per session rather than per PDR (QoS monitoring per QoS flow,
    /// access availability). Reports come back in Session Report (Table 7.5.8.6-1).
    pub struct CreateSrr {
        srr_id: M u8 = SRR_ID,
        access_availability_control_information: O AccessAvailabilityControlInformation = ACCESS_AVAILABILITY_CONTROL_INFORMATION,
        /// One per QoS flow (or set of QoS flows) to monitor.
        qos_monitoring_per_qos_flow_control_information: V QosMonitoringPerQosFlowControlInformation = QOS_MONITORING_PER_QOS_FLOW_CONTROL_INFORMATION,
        direct_reporting_information: O DirectReportingInformation = DIRECT_REPORTING_INFORMATION,
    }
}

group! {
    /// Access Availability Control Information, Table 7.5.2.9-2.
    pub struct AccessAvailabilityControlInformation {
        requested_access_availability_information: M Flags = REQUESTED_ACCESS_AVAILABILITY_INFORMATION,
    }
}

group! {
    /// QoS Monitoring per QoS flow Control Information, Table 7.5.2.9-3: which delays to
    /// measure for which QoS flows, and when to report them. The conditions on Packet Delay
    /// Thresholds, Minimum Wait Time (event triggered) and Measurement Period (periodic)
    /// are the SMF's to meet; the decoder does not enforce them.
    pub struct QosMonitoringPerQosFlowControlInformation {
        qfis: MV u8 = QFI,
        /// Bits in [`crate::ie::requested_qos_monitoring`] (clause 8.2.167).
        requested_qos_monitoring: M Flags = REQUESTED_QOS_MONITORING,
        /// Bits in [`crate::ie::reporting_frequency`] (clause 8.2.168).
        reporting_frequency: M Flags = REPORTING_FREQUENCY,
        packet_delay_thresholds: O PacketDelayThresholds = PACKET_DELAY_THRESHOLDS,
        /// Seconds between two event-triggered reports at least (clause 8.2.170).
        minimum_wait_time: O u32 = MINIMUM_WAIT_TIME,
        /// Seconds between periodic reports (clause 8.2.42).
        measurement_period: O u32 = MEASUREMENT_PERIOD,
    }
}

group! {
    /// Direct Reporting Information, Table 7.5.2.9-4: QoS monitoring events sent by the UPF
    /// to a Local NEF or AF (DRQOS); its IEs are carried opaque.
    pub struct DirectReportingInformation {
        event_notification_uri: M Bytes = EVENT_NOTIFICATION_URI,
        notification_correlation_id: O Bytes = NOTIFICATION_CORRELATION_ID,
        reporting_flags: O Bytes = REPORTING_FLAGS,
    }
}

group! {
    /// Created PDR, Table 7.5.3.2-1.
    pub struct CreatedPdr {
        pdr_id: M u16 = PDR_ID,
        local_fteid: O FTeid = FTEID,
        ue_ip_address: V UeIpAddress = UE_IP_ADDRESS,
    }
}

group! {
    /// Load Control Information, Table 7.5.3.3-1.
    pub struct LoadControlInformation {
        sequence_number: M u32 = SEQUENCE_NUMBER,
        metric: M u8 = METRIC,
    }
}

group! {
    /// Overload Control Information, Table 7.5.3.4-1.
    pub struct OverloadControlInformation {
        sequence_number: M u32 = SEQUENCE_NUMBER,
        metric: M u8 = METRIC,
        period_of_validity: M GprsTimer = TIMER,
        oci_flags: O Flags = OCI_FLAGS,
    }
}

group! {
    /// Created Traffic Endpoint, Table 7.5.3.5-1.
    pub struct CreatedTrafficEndpoint {
        traffic_endpoint_id: M u8 = TRAFFIC_ENDPOINT_ID,
        local_fteid: O FTeid = FTEID,
        ue_ip_address: V UeIpAddress = UE_IP_ADDRESS,
    }
}

group! {
    /// Update PDR, Table 7.5.4.2-1.
    pub struct UpdatePdr {
        pdr_id: M u16 = PDR_ID,
        outer_header_removal: O OuterHeaderRemoval = OUTER_HEADER_REMOVAL,
        precedence: O u32 = PRECEDENCE,
        pdi: O Pdi = PDI,
        far_id: O u32 = FAR_ID,
        urr_ids: V u32 = URR_ID,
        qer_ids: V u32 = QER_ID,
        activate_predefined_rules: V Text = ACTIVATE_PREDEFINED_RULES,
        deactivate_predefined_rules: V Text = DEACTIVATE_PREDEFINED_RULES,
        activation_time: O u32 = ACTIVATION_TIME,
        deactivation_time: O u32 = DEACTIVATION_TIME,
    }
}

group! {
    /// Update FAR, Table 7.5.4.3-1.
    pub struct UpdateFar {
        far_id: M u32 = FAR_ID,
        apply_action: O Flags = APPLY_ACTION,
        update_forwarding_parameters: O UpdateForwardingParameters = UPDATE_FORWARDING_PARAMETERS,
        update_duplicating_parameters: V UpdateDuplicatingParameters = UPDATE_DUPLICATING_PARAMETERS,
        bar_id: O u8 = BAR_ID,
    }
}

group! {
    /// Update Forwarding Parameters, Table 7.5.4.3-2.
    pub struct UpdateForwardingParameters {
        destination_interface: O Interface = DESTINATION_INTERFACE,
        network_instance: O Name = NETWORK_INSTANCE,
        redirect_information: O RedirectInformation = REDIRECT_INFORMATION,
        outer_header_creation: O OuterHeaderCreation = OUTER_HEADER_CREATION,
        transport_level_marking: O u16 = TRANSPORT_LEVEL_MARKING,
        forwarding_policy: O ForwardingPolicy = FORWARDING_POLICY,
        header_enrichment: O HeaderEnrichment = HEADER_ENRICHMENT,
        pfcpsm_req_flags: O Flags = PFCPSM_REQ_FLAGS,
        linked_traffic_endpoint_id: O u8 = TRAFFIC_ENDPOINT_ID,
        destination_interface_type: O u8 = TGPP_INTERFACE_TYPE,
        data_network_access_identifier: O Text = DATA_NETWORK_ACCESS_IDENTIFIER,
    }
}

group! {
    /// Update Duplicating Parameters, Table 7.5.4.3-3.
    pub struct UpdateDuplicatingParameters {
        destination_interface: O Interface = DESTINATION_INTERFACE,
        outer_header_creation: O OuterHeaderCreation = OUTER_HEADER_CREATION,
        transport_level_marking: O u16 = TRANSPORT_LEVEL_MARKING,
        forwarding_policy: O ForwardingPolicy = FORWARDING_POLICY,
    }
}

group! {
    /// Update URR, Table 7.5.4.4-1.
    pub struct UpdateUrr {
        urr_id: M u32 = URR_ID,
        measurement_method: O Flags = MEASUREMENT_METHOD,
        reporting_triggers: O Flags = REPORTING_TRIGGERS,
        measurement_period: O u32 = MEASUREMENT_PERIOD,
        volume_threshold: O Volume = VOLUME_THRESHOLD,
        volume_quota: O Volume = VOLUME_QUOTA,
        time_threshold: O u32 = TIME_THRESHOLD,
        time_quota: O u32 = TIME_QUOTA,
        event_threshold: O u32 = EVENT_THRESHOLD,
        event_quota: O u32 = EVENT_QUOTA,
        quota_holding_time: O u32 = QUOTA_HOLDING_TIME,
        dropped_dl_traffic_threshold: O DroppedDlTrafficThreshold = DROPPED_DL_TRAFFIC_THRESHOLD,
        quota_validity_time: O u32 = QUOTA_VALIDITY_TIME,
        monitoring_time: O u32 = MONITORING_TIME,
        subsequent_volume_threshold: O Volume = SUBSEQUENT_VOLUME_THRESHOLD,
        subsequent_time_threshold: O u32 = SUBSEQUENT_TIME_THRESHOLD,
        subsequent_volume_quota: O Volume = SUBSEQUENT_VOLUME_QUOTA,
        subsequent_time_quota: O u32 = SUBSEQUENT_TIME_QUOTA,
        subsequent_event_threshold: O u32 = SUBSEQUENT_EVENT_THRESHOLD,
        subsequent_event_quota: O u32 = SUBSEQUENT_EVENT_QUOTA,
        inactivity_detection_time: O u32 = INACTIVITY_DETECTION_TIME,
        linked_urr_ids: V u32 = LINKED_URR_ID,
        measurement_information: O Flags = MEASUREMENT_INFORMATION,
        time_quota_mechanism: O TimeQuotaMechanism = TIME_QUOTA_MECHANISM,
        aggregated_urrs: V AggregatedUrrs = AGGREGATED_URRS,
        far_id_for_quota_action: O u32 = FAR_ID,
        ethernet_inactivity_timer: O u32 = ETHERNET_INACTIVITY_TIMER,
        additional_monitoring_time: V AdditionalMonitoringTime = ADDITIONAL_MONITORING_TIME,
        number_of_reports: O u16 = NUMBER_OF_REPORTS,
        exempted_application_ids: V Text = APPLICATION_ID,
        exempted_sdf_filters: V SdfFilter = SDF_FILTER,
        user_plane_inactivity_timer: O u32 = USER_PLANE_INACTIVITY_TIMER,
    }
}

group! {
    /// Update QER, Table 7.5.4.5-1.
    pub struct UpdateQer {
        qer_id: M u32 = QER_ID,
        qer_correlation_id: O u32 = QER_CORRELATION_ID,
        gate_status: O u8 = GATE_STATUS,
        mbr: O Bitrate = MBR,
        gbr: O Bitrate = GBR,
        packet_rate: O PacketRate = PACKET_RATE,
        dl_flow_level_marking: O DlFlowLevelMarking = DL_FLOW_LEVEL_MARKING,
        qfi: O u8 = QFI,
        rqi: O Flags = RQI,
        paging_policy_indicator: O u8 = PAGING_POLICY_INDICATOR,
        averaging_window: O u32 = AVERAGING_WINDOW,
        qer_control_indications: O Flags = QER_CONTROL_INDICATIONS,
    }
}

group! {
    /// Remove PDR, Table 7.5.4.6-1.
    pub struct RemovePdr { pdr_id: M u16 = PDR_ID }
}

group! {
    /// Remove FAR, Table 7.5.4.7-1.
    pub struct RemoveFar { far_id: M u32 = FAR_ID }
}

group! {
    /// Remove URR, Table 7.5.4.8-1.
    pub struct RemoveUrr { urr_id: M u32 = URR_ID }
}

group! {
    /// Remove QER, Table 7.5.4.9-1.
    pub struct RemoveQer { qer_id: M u32 = QER_ID }
}

group! {
    /// Query URR, Table 7.5.4.10-1.
    pub struct QueryUrr { urr_id: M u32 = URR_ID }
}

group! {
    /// Update BAR in a Session Modification Request, Table 7.5.4.11-1.
    pub struct UpdateBar {
        bar_id: M u8 = BAR_ID,
        downlink_data_notification_delay: O u8 = DOWNLINK_DATA_NOTIFICATION_DELAY,
        suggested_buffering_packets_count: O u8 = SUGGESTED_BUFFERING_PACKETS_COUNT,
        mt_edt_control_information: O Flags = MT_EDT_CONTROL_INFORMATION,
    }
}

group! {
    /// Remove BAR, Table 7.5.4.12-1.
    pub struct RemoveBar { bar_id: M u8 = BAR_ID }
}

group! {
    /// Update Traffic Endpoint, Table 7.5.4.13-1.
    pub struct UpdateTrafficEndpoint {
        traffic_endpoint_id: M u8 = TRAFFIC_ENDPOINT_ID,
        local_fteid: O FTeid = FTEID,
        network_instance: O Name = NETWORK_INSTANCE,
        ue_ip_address: V UeIpAddress = UE_IP_ADDRESS,
        framed_routes: V Text = FRAMED_ROUTE,
        framed_routing: O u32 = FRAMED_ROUTING,
        framed_ipv6_routes: V Text = FRAMED_IPV6_ROUTE,
        qfis: V u8 = QFI,
        source_interface_type: O u8 = TGPP_INTERFACE_TYPE,
    }
}

group! {
    /// Remove Traffic Endpoint, Table 7.5.4.14-1.
    pub struct RemoveTrafficEndpoint { traffic_endpoint_id: M u8 = TRAFFIC_ENDPOINT_ID }
}

group! {
    /// Remove SRR, Table 7.5.4.19-1.
    pub struct RemoveSrr { srr_id: M u8 = SRR_ID }
}

group! {
    /// Update SRR, Table 7.5.4.20-1 (Table 8.1.2-1 of Rel-17 points at 7.5.4.21-1 by
    /// mistake). The QoS monitoring control IEs, when present, replace the whole set
    /// provisioned before.
    pub struct UpdateSrr {
        srr_id: M u8 = SRR_ID,
        access_availability_control_information: O AccessAvailabilityControlInformation = ACCESS_AVAILABILITY_CONTROL_INFORMATION,
        qos_monitoring_per_qos_flow_control_information: V QosMonitoringPerQosFlowControlInformation = QOS_MONITORING_PER_QOS_FLOW_CONTROL_INFORMATION,
        direct_reporting_information: O DirectReportingInformation = DIRECT_REPORTING_INFORMATION,
    }
}

group! {
    /// Usage Report, Tables 7.5.5.2-1 (Session Modification Response), 7.5.7.2-1 (Session
    /// Deletion Response) and 7.5.8.3-1 (Session Report Request): one layout, the union.
    pub struct UsageReport {
        urr_id: M u32 = URR_ID,
        ur_seqn: M u32 = UR_SEQN,
        usage_report_trigger: M Flags = USAGE_REPORT_TRIGGER,
        start_time: O u32 = START_TIME,
        end_time: O u32 = END_TIME,
        volume_measurement: O VolumeMeasurement = VOLUME_MEASUREMENT,
        duration_measurement: O u32 = DURATION_MEASUREMENT,
        application_detection_information: O ApplicationDetectionInformation = APPLICATION_DETECTION_INFORMATION,
        ue_ip_address: O UeIpAddress = UE_IP_ADDRESS,
        network_instance: O Name = NETWORK_INSTANCE,
        time_of_first_packet: O u32 = TIME_OF_FIRST_PACKET,
        time_of_last_packet: O u32 = TIME_OF_LAST_PACKET,
        usage_information: O Flags = USAGE_INFORMATION,
        query_urr_reference: O u32 = QUERY_URR_REFERENCE,
        event_time_stamps: V u32 = EVENT_TIME_STAMP,
        ethernet_traffic_information: O EthernetTrafficInformation = ETHERNET_TRAFFIC_INFORMATION,
    }
}

group! {
    /// Application Detection Information, Table 7.5.8.3-2.
    pub struct ApplicationDetectionInformation {
        application_id: M Text = APPLICATION_ID,
        application_instance_id: O Text = APPLICATION_INSTANCE_ID,
        flow_information: O FlowInformation = FLOW_INFORMATION,
        pdr_id: O u16 = PDR_ID,
    }
}

group! {
    /// Ethernet Traffic Information, Table 7.5.8.3-3.
    pub struct EthernetTrafficInformation {
        mac_addresses_detected: V MacAddresses = MAC_ADDRESSES_DETECTED,
        mac_addresses_removed: V MacAddresses = MAC_ADDRESSES_REMOVED,
    }
}

group! {
    /// Downlink Data Report, Table 7.5.8.2-1.
    pub struct DownlinkDataReport {
        pdr_ids: MV u16 = PDR_ID,
        downlink_data_service_information: V DownlinkDataServiceInformation = DOWNLINK_DATA_SERVICE_INFORMATION,
        dl_data_packets_size: O u16 = DL_DATA_PACKETS_SIZE,
        data_status: O Flags = DATA_STATUS,
    }
}

group! {
    /// Error Indication Report, Table 7.5.8.4-1.
    pub struct ErrorIndicationReport {
        remote_fteids: MV FTeid = FTEID,
    }
}

group! {
    /// Session Report, Table 7.5.8.6-1: what one SRR reports (Report Type SESR).
    pub struct SessionReport {
        srr_id: M u8 = SRR_ID,
        access_availability_report: O AccessAvailabilityReport = ACCESS_AVAILABILITY_REPORT,
        qos_monitoring_reports: V QosMonitoringReport = QOS_MONITORING_REPORT,
    }
}

group! {
    /// Access Availability Report, Table 7.5.8.6-2: up to two Access Availability
    /// Information IEs (clause 8.2.153), 3GPP and non-3GPP.
    pub struct AccessAvailabilityReport {
        access_availability_information: MV u8 = ACCESS_AVAILABILITY_INFORMATION,
    }
}

group! {
    /// QoS Monitoring Report, Table 7.5.8.6-3: the delays measured for one QoS flow.
    pub struct QosMonitoringReport {
        qfi: M u8 = QFI,
        qos_monitoring_measurement: M QosMonitoringMeasurement = QOS_MONITORING_MEASUREMENT,
        /// Time Stamp (clause 8.2.114, IE 156, named Event Time Stamp in this codec's
        /// table): when the report was generated, NTP seconds.
        time_stamp: M u32 = EVENT_TIME_STAMP,
        /// When the measurement behind the report began, NTP seconds.
        start_time: O u32 = START_TIME,
    }
}

group! {
    /// Update BAR in a Session Report Response, Table 7.5.9.2-1.
    pub struct UpdateBarReportResponse {
        bar_id: M u8 = BAR_ID,
        downlink_data_notification_delay: O u8 = DOWNLINK_DATA_NOTIFICATION_DELAY,
        dl_buffering_duration: O GprsTimer = DL_BUFFERING_DURATION,
        dl_buffering_suggested_packet_count: O PacketCount = DL_BUFFERING_SUGGESTED_PACKET_COUNT,
        suggested_buffering_packets_count: O u8 = SUGGESTED_BUFFERING_PACKETS_COUNT,
    }
}

group! {
    /// Application ID's PFDs, Table 7.4.3.1-2.
    pub struct ApplicationIdsPfds {
        application_id: M Text = APPLICATION_ID,
        pfd_contexts: V PfdContext = PFD_CONTEXT,
    }
}

group! {
    /// PFD context, Table 7.4.3.1-3.
    pub struct PfdContext {
        pfd_contents: MV PfdContents = PFD_CONTENTS,
    }
}

group! {
    /// PFCP Session Retention Information, Table 7.4.4.1-2.
    pub struct PfcpSessionRetentionInformation {
        cp_pfcp_entity_ip_addresses: V IpAddresses = CP_PFCP_ENTITY_IP_ADDRESS,
    }
}

group! {
    /// UE IP address Pool Information, Table 7.4.4.1-3.
    pub struct UeIpAddressPoolInformation {
        pool_identities: MV UeIpAddressPoolIdentity = UE_IP_ADDRESS_POOL_IDENTITY,
        network_instance: O Name = NETWORK_INSTANCE,
        s_nssais: V SNssai = S_NSSAI,
        ip_version: O Flags = IP_VERSION,
    }
}

group! {
    /// User Plane Path Failure Report, Table 7.4.5.1.2-1.
    pub struct UserPlanePathFailureReport {
        remote_gtpu_peers: MV RemoteGtpuPeer = REMOTE_GTPU_PEER,
    }
}

group! {
    /// User Plane Path Recovery Report, Table 7.4.5.1.3-1.
    pub struct UserPlanePathRecoveryReport {
        remote_gtpu_peers: MV RemoteGtpuPeer = REMOTE_GTPU_PEER,
    }
}

group! {
    /// GTP-U Path QoS Control Information, Table 7.4.4.1-4 (kept mostly opaque).
    pub struct GtpuPathQosControlInformation {
        remote_gtpu_peers: V RemoteGtpuPeer = REMOTE_GTPU_PEER,
        gtpu_path_interface_type: O Flags = GTPU_PATH_INTERFACE_TYPE,
        qos_report_trigger: O Flags = QOS_REPORT_TRIGGER,
        transport_level_marking: O u16 = TRANSPORT_LEVEL_MARKING,
        measurement_period: O u32 = MEASUREMENT_PERIOD,
        average_packet_delay: O u32 = AVERAGE_PACKET_DELAY,
        minimum_packet_delay: O u32 = MINIMUM_PACKET_DELAY,
        maximum_packet_delay: O u32 = MAXIMUM_PACKET_DELAY,
        timer: O GprsTimer = TIMER,
    }
}

group! {
    /// GTP-U Path QoS Report in a Node Report Request (clause 7.4.5.1): the delay measured
    /// on the GTP-U path to one remote peer (GTP-U path QoS monitoring, GPQR).
    pub struct GtpuPathQosReport {
        remote_gtpu_peer: M RemoteGtpuPeer = REMOTE_GTPU_PEER,
        gtpu_path_interface_type: O Flags = GTPU_PATH_INTERFACE_TYPE,
        /// Bits in [`crate::ie::qos_report_trigger`].
        qos_report_trigger: M Flags = QOS_REPORT_TRIGGER,
        /// NTP seconds: when the report was made.
        time_stamp: M u32 = EVENT_TIME_STAMP,
        /// NTP seconds: when the measurement behind it began.
        start_time: O u32 = START_TIME,
        qos_information: MV QosInformationInGtpuPathQosReport = QOS_INFORMATION_IN_GTPU_PATH_QOS_REPORT,
    }
}

group! {
    /// QoS Information in GTP-U Path QoS Report (clause 7.4.5.1): packet delays of the
    /// path, ms.
    pub struct QosInformationInGtpuPathQosReport {
        average_packet_delay: M u32 = AVERAGE_PACKET_DELAY,
        minimum_packet_delay: O u32 = MINIMUM_PACKET_DELAY,
        maximum_packet_delay: O u32 = MAXIMUM_PACKET_DELAY,
        /// DSCP of the measured packets (Transport Level Marking).
        transport_level_marking: O u16 = TRANSPORT_LEVEL_MARKING,
    }
}

group! {
    /// Partial Failure Information, Table 7.5.3.1-2 (Rel-17).
    pub struct PartialFailureInformation {
        failed_rule_id: M FailedRuleId = FAILED_RULE_ID,
        cause: M crate::ie::CauseValue = CAUSE,
        offending_ie_information: V Bytes = OFFENDING_IE_INFORMATION,
    }
}
