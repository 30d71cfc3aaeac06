#!/usr/bin/env python3
"""scapy (contrib.pfcp, pinned in requirements.txt) as an oracle for the pfcp crate.

  build     scapy builds PFCP messages; each line carries the octets and the values
            scapy was given ("expect"), which crates/pfcp/tests/scapy.rs checks against
            what pfcp::msg parses.
  dissect   scapy dissects the messages pfcp::msg emitted (hex lines on stdin).

See oracle_common.py for the JSON shapes.

Where scapy 2.6.1 departs from TS 29.244 the message is built so that the octets are
still what the specification says, and the departure is noted here:
  - PFCP() defaults to S=1: node messages must pass S=0 (clause 7.2.2.1: S is 0 for
    node related messages), or scapy writes a SEID into a Heartbeat.
  - IE_OuterHeaderRemoval only has its second octet (GTP-U Extension Header Deletion,
    clause 8.2.64) when length=2 is given explicitly.
  - The PDNType labels are off by one (scapy 0 "IPv4"; clause 8.2.79: 1 IPv4, 2 IPv6,
    3 IPv4v6, 4 Non-IP, 5 Ethernet). Only the number goes on the wire, so we send 1.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from oracle_common import main  # noqa: E402

from scapy.contrib.pfcp import (  # noqa: E402
    PFCP,
    IE_ApplyAction,
    IE_Cause,
    IE_CPFunctionFeatures,
    IE_CreateFAR,
    IE_CreatePDR,
    IE_CreateQER,
    IE_CreateURR,
    IE_DestinationInterface,
    IE_DurationMeasurement,
    IE_EndTime,
    IE_FAR_Id,
    IE_ForwardingParameters,
    IE_FSEID,
    IE_FTEID,
    IE_GateStatus,
    IE_GBR,
    IE_MBR,
    IE_MeasurementMethod,
    IE_MeasurementPeriod,
    IE_NetworkInstance,
    IE_NodeId,
    IE_OuterHeaderCreation,
    IE_OuterHeaderRemoval,
    IE_PDI,
    IE_PDNType,
    IE_PDR_Id,
    IE_PFCPSMReqFlags,
    IE_Precedence,
    IE_QER_Id,
    IE_QFI,
    IE_RecoveryTimeStamp,
    IE_RemovePDR,
    IE_ReportingTriggers,
    IE_ReportType,
    IE_SDF_Filter,
    IE_SourceInterface,
    IE_StartTime,
    IE_UE_IP_Address,
    IE_UpdateFAR,
    IE_UpdateForwardingParameters,
    IE_UPFunctionFeatures,
    IE_UR_SEQN,
    IE_URR_Id,
    IE_UsageReport_SDR,
    IE_UsageReport_SRR,
    IE_UsageReportTrigger,
    IE_UserPlaneIPResourceInformation,
    IE_VolumeMeasurement,
    IE_VolumeQuota,
    IE_VolumeThreshold,
    PFCPAssociationSetupRequest,
    PFCPAssociationSetupResponse,
    PFCPHeartbeatRequest,
    PFCPHeartbeatResponse,
    PFCPSessionDeletionResponse,
    PFCPSessionEstablishmentRequest,
    PFCPSessionModificationRequest,
    PFCPSessionReportRequest,
)

RECOVERY = 3_900_000_000  # an NTP-era timestamp (seconds since 1900), fits 32 bits
CP_SEID = 0x1122334455667788
UP_SEID = 0x0000000100000001
SMF_IP = "10.0.0.1"
UPF_IP = "10.0.0.7"
UE_IP = "10.45.0.2"
GNB_IP = "192.0.2.20"
DNN = "internet.example"

# UP Function Features bits (clause 8.2.25, numbered as pfcp::ie::Flags numbers them:
# bit 1 of octet 5 is 1, bit 1 of octet 6 is 9).
UP_FEATURES = {"BUCP": 1, "DDND": 2, "DLBD": 3, "TRST": 4, "FTUP": 5, "PFDM": 6, "HEEU": 7,
               "TREU": 8, "EMPU": 9, "PDIU": 10, "UDBC": 11, "QUOAC": 12, "TRACE": 13,
               "FRRT": 14, "PFDE": 15}


def up_features(*names):
    return (IE_UPFunctionFeatures(**{n: 1 for n in names}),
            sorted(UP_FEATURES[n] for n in names))


def usage_report(cls, urr_id, seqn, triggers, trigger_bits, start, end, vol, duration):
    ie = cls(IE_list=[
        IE_URR_Id(id=urr_id),
        IE_UR_SEQN(number=seqn),
        IE_UsageReportTrigger(**{t: 1 for t in triggers}),
        IE_StartTime(timestamp=start),
        IE_EndTime(timestamp=end),
        IE_VolumeMeasurement(TOVOL=1, ULVOL=1, DLVOL=1,
                             total=vol[0], uplink=vol[1], downlink=vol[2]),
        IE_DurationMeasurement(duration=duration),
    ])
    expect = {"urr_id": urr_id, "ur_seqn": seqn, "trigger_bits": trigger_bits,
              "start_time": start, "end_time": end,
              "volume": {"total": vol[0], "uplink": vol[1], "downlink": vol[2]},
              "duration": duration}
    return ie, expect


def build():
    # Heartbeat Request / Response (clause 7.4.2).
    yield ("heartbeat_request",
           PFCP(S=0, seq=1) / PFCPHeartbeatRequest(IE_list=[IE_RecoveryTimeStamp(timestamp=RECOVERY)]),
           {"seq": 1, "recovery_time_stamp": RECOVERY})
    yield ("heartbeat_response",
           PFCP(S=0, seq=1) / PFCPHeartbeatResponse(IE_list=[IE_RecoveryTimeStamp(timestamp=RECOVERY + 5)]),
           {"seq": 1, "recovery_time_stamp": RECOVERY + 5})

    # Association Setup Request from a UP function (clause 6.2.6.2.2) with its features.
    feats, bits = up_features("BUCP", "FTUP", "EMPU", "PDIU", "QUOAC")
    yield ("association_setup_request",
           PFCP(S=0, seq=2) / PFCPAssociationSetupRequest(IE_list=[
               IE_NodeId(id_type=0, ipv4=UPF_IP),
               IE_RecoveryTimeStamp(timestamp=RECOVERY),
               feats,
           ]),
           {"seq": 2, "node_id_ipv4": UPF_IP, "recovery_time_stamp": RECOVERY,
            "up_function_features_bits": bits, "up_function_features_len": 2})

    # Association Setup Response from a UP function: FQDN Node ID, features, and a
    # (Rel-15) User Plane IP Resource Information with TEID range, network instance and
    # source interface.
    feats, bits = up_features("FTUP", "TRACE", "DLBD", "DDND")
    yield ("association_setup_response",
           PFCP(S=0, seq=3) / PFCPAssociationSetupResponse(IE_list=[
               IE_NodeId(id_type=2, id=b"upf.5gc.example"),
               IE_Cause(cause=1),
               IE_RecoveryTimeStamp(timestamp=RECOVERY),
               feats,
               IE_UserPlaneIPResourceInformation(V4=1, TEIDRI=2, teid_range=2, ipv4="192.0.2.10",
                                                 ASSONI=1, network_instance=DNN.encode(),
                                                 ASSOSI=1, interface=0),
           ]),
           {"seq": 3, "node_id_fqdn": "upf.5gc.example", "cause": 1,
            "recovery_time_stamp": RECOVERY, "up_function_features_bits": bits,
            "upiri": {"teid_range_bits": 2, "teid_range": 2, "ipv4": "192.0.2.10",
                      "network_instance": DNN, "source_interface": 0}})

    # Session Establishment Request (clause 7.5.2): two uplink PDRs whose F-TEIDs are
    # CHOOSE with the same CHOOSE ID (clause 5.5.3: one F-TEID for both), a downlink PDR,
    # FARs with Forwarding Parameters (one with Outer Header Creation), a URR with
    # volume threshold and quota, a QER with MBR/GBR/QFI.
    pdrs = [
        {"pdr_id": 1, "precedence": 200, "source_interface": 0,
         "fteid": {"choose": True, "v4": True, "v6": False, "choose_id": 5},
         "network_instance": DNN, "ue_ipv4": UE_IP, "ue_sd": 0,
         "sdf": {"flow_description": "permit out ip from any to assigned"},
         "qfi": 9, "ohr": {"description": 0}, "far_id": 1, "urr_ids": [1], "qer_ids": [1]},
        {"pdr_id": 3, "precedence": 100, "source_interface": 0,
         "fteid": {"choose": True, "v4": True, "v6": False, "choose_id": 5},
         "network_instance": None, "ue_ipv4": UE_IP, "ue_sd": 0,
         "sdf": {"flow_description": "permit out 17 from 10.45.0.2 to 198.51.100.1 5060",
                 "tos_traffic_class": 0xB8FC, "sdf_filter_id": 77},
         "qfi": 5, "ohr": {"description": 6, "ext_header_deletion": 1}, "far_id": 1,
         "urr_ids": [1], "qer_ids": []},
        {"pdr_id": 2, "precedence": 200, "source_interface": 1, "fteid": None,
         "network_instance": DNN, "ue_ipv4": UE_IP, "ue_sd": 1, "sdf": None,
         "qfi": None, "ohr": None, "far_id": 2, "urr_ids": [1], "qer_ids": [1]},
    ]

    def pdr_ie(p):
        pdi = [IE_SourceInterface(interface=p["source_interface"])]
        if p["fteid"]:
            pdi.append(IE_FTEID(CH=1, CHID=1, V4=1, choose_id=p["fteid"]["choose_id"]))
        if p["network_instance"]:
            pdi.append(IE_NetworkInstance(instance=p["network_instance"].encode()))
        pdi.append(IE_UE_IP_Address(V4=1, SD=p["ue_sd"], ipv4=p["ue_ipv4"]))
        if p["sdf"]:
            s = p["sdf"]
            kw = {"FD": 1, "flow_description": s["flow_description"].encode()}
            if "tos_traffic_class" in s:
                kw.update(TTC=1, tos_traffic_class=s["tos_traffic_class"] >> 8,
                          tos_traffic_mask=s["tos_traffic_class"] & 0xFF)
            if "sdf_filter_id" in s:
                kw.update(BID=1, sdf_filter_id=s["sdf_filter_id"])
            pdi.append(IE_SDF_Filter(**kw))
        if p["qfi"] is not None:
            pdi.append(IE_QFI(QFI=p["qfi"]))
        ies = [IE_PDR_Id(id=p["pdr_id"]), IE_Precedence(precedence=p["precedence"]), IE_PDI(IE_list=pdi)]
        if p["ohr"]:
            o = p["ohr"]
            if "ext_header_deletion" in o:
                ies.append(IE_OuterHeaderRemoval(header=o["description"], length=2, spare=0,
                                                 pdu_session_container=o["ext_header_deletion"]))
            else:
                ies.append(IE_OuterHeaderRemoval(header=o["description"]))
        ies.append(IE_FAR_Id(id=p["far_id"]))
        ies += [IE_URR_Id(id=u) for u in p["urr_ids"]]
        ies += [IE_QER_Id(id=q) for q in p["qer_ids"]]
        return IE_CreatePDR(IE_list=ies)

    fars = [
        {"far_id": 1, "apply_action_bits": [2], "destination_interface": 1,
         "network_instance": DNN, "ohc": None},
        {"far_id": 2, "apply_action_bits": [2], "destination_interface": 0,
         "network_instance": None,
         "ohc": {"description": 0x0100, "teid": 0x0A0B0C0D, "ipv4": GNB_IP}},
    ]

    def far_ie(f):
        fp = [IE_DestinationInterface(interface=f["destination_interface"])]
        if f["network_instance"]:
            fp.append(IE_NetworkInstance(instance=f["network_instance"].encode()))
        if f["ohc"]:
            fp.append(IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=f["ohc"]["teid"], ipv4=f["ohc"]["ipv4"]))
        return IE_CreateFAR(IE_list=[IE_FAR_Id(id=f["far_id"]), IE_ApplyAction(FORW=1),
                                     IE_ForwardingParameters(IE_list=fp)])

    urr = {"urr_id": 1, "measurement_method_bits": [1, 2], "reporting_triggers_bits": [1, 2],
           "measurement_period": 60,
           "volume_threshold": {"total": 10_000_000, "uplink": 4_000_000, "downlink": 6_000_000},
           "volume_quota": {"total": 1_000_000_000}}
    qer = {"qer_id": 1, "gate_status": 0x01, "mbr": {"ul": 200_000, "dl": 1_000_000},
           "gbr": {"ul": 10_000, "dl": 20_000}, "qfi": 9}
    yield ("session_establishment_request",
           PFCP(S=1, seid=0, seq=4) / PFCPSessionEstablishmentRequest(IE_list=[
               IE_NodeId(id_type=0, ipv4=SMF_IP),
               IE_FSEID(v4=1, seid=CP_SEID, ipv4=SMF_IP),
               *[pdr_ie(p) for p in pdrs],
               *[far_ie(f) for f in fars],
               IE_CreateURR(IE_list=[
                   IE_URR_Id(id=urr["urr_id"]),
                   IE_MeasurementMethod(DURAT=1, VOLUM=1),
                   IE_ReportingTriggers(periodic_reporting=1, volume_threshold=1),
                   IE_MeasurementPeriod(period=urr["measurement_period"]),
                   IE_VolumeThreshold(TOVOL=1, ULVOL=1, DLVOL=1, total=10_000_000,
                                      uplink=4_000_000, downlink=6_000_000),
                   IE_VolumeQuota(TOVOL=1, total=1_000_000_000),
               ]),
               IE_CreateQER(IE_list=[
                   IE_QER_Id(id=qer["qer_id"]),
                   IE_GateStatus(ul=0, dl=1),
                   IE_MBR(ul=qer["mbr"]["ul"], dl=qer["mbr"]["dl"]),
                   IE_GBR(ul=qer["gbr"]["ul"], dl=qer["gbr"]["dl"]),
                   IE_QFI(QFI=qer["qfi"]),
               ]),
               IE_PDNType(pdn_type=1),
           ]),
           {"seid": 0, "seq": 4, "node_id_ipv4": SMF_IP,
            "cp_fseid": {"seid": CP_SEID, "ipv4": SMF_IP},
            "pdrs": pdrs, "fars": fars, "urr": urr, "qer": qer, "pdn_type": 1})

    # Session Modification Request (clause 7.5.4): Update FAR with new Outer Header
    # Creation and SNDEM (send end marker, clause 8.2.31), Remove PDR.
    yield ("session_modification_request",
           PFCP(S=1, seid=UP_SEID, seq=5) / PFCPSessionModificationRequest(IE_list=[
               IE_RemovePDR(IE_list=[IE_PDR_Id(id=3)]),
               IE_UpdateFAR(IE_list=[
                   IE_FAR_Id(id=2),
                   IE_ApplyAction(FORW=1),
                   IE_UpdateForwardingParameters(IE_list=[
                       IE_DestinationInterface(interface=0),
                       IE_OuterHeaderCreation(GTPUUDPIPV4=1, TEID=0x00001234, ipv4="192.0.2.30"),
                       IE_PFCPSMReqFlags(SNDEM=1),
                   ]),
               ]),
           ]),
           {"seid": UP_SEID, "seq": 5, "remove_pdr_ids": [3], "far_id": 2,
            "apply_action_bits": [2], "destination_interface": 0,
            "ohc": {"description": 0x0100, "teid": 0x1234, "ipv4": "192.0.2.30"},
            "pfcpsm_req_flags_bits": [2]})

    # Session Report Request (clause 7.5.8) with two Usage Reports.
    ur1, e1 = usage_report(IE_UsageReport_SRR, 1, 7, ["VOLTH"], [2], RECOVERY + 100,
                           RECOVERY + 160, (10_000_123, 4_000_100, 6_000_023), 60)
    ur2, e2 = usage_report(IE_UsageReport_SRR, 2, 0, ["PERIO", "LIUSA"], [1, 11],
                           RECOVERY + 100, RECOVERY + 130, (1500, 500, 1000), 30)
    yield ("session_report_request",
           PFCP(S=1, seid=CP_SEID, seq=6) / PFCPSessionReportRequest(IE_list=[
               IE_ReportType(USAR=1), ur1, ur2]),
           {"seid": CP_SEID, "seq": 6, "report_type_bits": [2], "usage_reports": [e1, e2]})

    # Session Deletion Response (clause 7.5.7) with the final Usage Report.
    ur, e = usage_report(IE_UsageReport_SDR, 1, 8, ["TERMR"], [12], RECOVERY + 160,
                         RECOVERY + 170, (2_000, 1_200, 800), 10)
    yield ("session_deletion_response",
           PFCP(S=1, seid=CP_SEID, seq=7) / PFCPSessionDeletionResponse(IE_list=[IE_Cause(cause=1), ur]),
           {"seid": CP_SEID, "seq": 7, "cause": 1, "usage_reports": [e]})

    # CP Function Features in a Request from an SMF (clause 8.2.58: LOAD bit 1, OVRL bit 2).
    yield ("association_setup_request_cp",
           PFCP(S=0, seq=8) / PFCPAssociationSetupRequest(IE_list=[
               IE_NodeId(id_type=2, id=b"smf.5gc.example"),
               IE_RecoveryTimeStamp(timestamp=RECOVERY),
               IE_CPFunctionFeatures(LOAD=1, OVRL=1),
           ]),
           {"seq": 8, "node_id_fqdn": "smf.5gc.example", "recovery_time_stamp": RECOVERY,
            "cp_function_features_bits": [1, 2]})


def dissect(b):
    return PFCP(b)


if __name__ == "__main__":
    main(build, dissect)
