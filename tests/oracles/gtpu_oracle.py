#!/usr/bin/env python3
"""scapy (contrib.gtp, pinned in requirements.txt) as an oracle for the gtpu crate.

  build     scapy builds GTP-U messages; each line carries the octets and the values
            scapy was given ("expect"), which crates/gtpu/tests/scapy.rs checks against
            what gtpu parses.
  dissect   scapy dissects the messages gtpu emitted (hex lines on stdin).

See oracle_common.py for the JSON shapes.

Where scapy 2.6.1 departs from TS 29.281 / TS 38.415:
  - GTPPDUSessionContainer writes its Next Extension Header Type octet right after the
    fields and pads after it; TS 29.281 clause 5.2.1 makes the next-type octet the last
    octet of the extension header, and TS 38.415 clause 5.5.3.5 puts the padding before
    it. With zero padding and next type 0 (no further header) the octets are the same
    either way, which is all these messages use; a PSC followed by another extension
    header would be misplaced by scapy in both directions.
  - IE_ExtensionHeaderList (type 141) has a 2-octet length; TS 29.281 clause 8.5
    (Figure 8.5-1) has one octet. scapy can neither build nor dissect the Supported
    Extension Headers Notification correctly, so it is not built here, and `dissect`
    reads its IE with the clause 8.5 layout (IE_ExtensionHeaderTypeList below).
  - An extension header other than the PDU Session Container ends scapy's dissection
    of the message: for an Error Indication with a UDP Port extension header (clause
    5.2.2.1) the IEs come out as Raw. `dissect` hands that Raw to GTPErrorIndication.
  - IE_GSNAddress only writes its address when length=4 or 16 is given explicitly.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from oracle_common import main  # noqa: E402

from scapy.contrib.gtp import (  # noqa: E402
    GTP_U_Header,
    GTP_UDPPort_ExtensionHeader,
    GTPEchoResponse,
    GTPErrorIndication,
    GTPPDUSessionContainer,
    GTPSupportedExtensionHeadersNotification,  # noqa: F401 (what scapy would use)
    IE_GSNAddress,
    IE_Recovery,
    IE_TEIDI,
)
from scapy.fields import ByteEnumField, FieldLenField, FieldListField, ByteField  # noqa: E402
from scapy.layers.inet import ICMP, IP, UDP  # noqa: E402
from scapy.packet import Packet, Raw  # noqa: E402

UE = "10.45.0.2"
DN = "198.51.100.1"


class IE_ExtensionHeaderTypeList(Packet):
    """Extension Header Type List as TS 29.281 clause 8.5 has it: one-octet length."""
    name = "Extension Header Type List (TS 29.281 8.5)"
    fields_desc = [
        ByteEnumField("ietype", 141, {141: "ExtensionHeaderTypeList"}),
        FieldLenField("length", None, length_of="extension_headers", fmt="B"),
        FieldListField("extension_headers", [], ByteField("type", 0),
                       length_from=lambda p: p.length),
    ]

    def extract_padding(self, s):
        return b"", s


def tpdu():
    return IP(src=UE, dst=DN, id=7) / ICMP(id=0x77, seq=1)


def inner_expect(p):
    b = bytes(p)
    return {"inner_src": UE, "inner_dst": DN, "inner_len": len(b), "inner_hex": b.hex()}


def build():
    # UL G-PDU from a gNB: PDU Session Container UL PDU SESSION INFORMATION, QFI 1.
    yield ("gpdu_ul",
           GTP_U_Header(teid=0xC0BB, gtp_type=255, E=1, next_ex=0x85)
           / GTPPDUSessionContainer(type=1, QFI=1) / tpdu(),
           {"teid": 0xC0BB, "pdu_type": 1, "qfi": 1, "psc_len": 4, **inner_expect(tpdu())})
    # DL G-PDU from a UPF: QFI 9, RQI, PPP with PPI 5 (TS 38.415 clause 5.5.2.1).
    yield ("gpdu_dl_ppi",
           GTP_U_Header(teid=0x00010203, gtp_type=255, E=1, next_ex=0x85)
           / GTPPDUSessionContainer(type=0, PPP=1, PPI=5, RQI=1, QFI=9) / tpdu(),
           {"teid": 0x00010203, "pdu_type": 0, "qfi": 9, "rqi": True, "ppi": 5,
            "psc_len": 8, **inner_expect(tpdu())})
    # DL without PPI, the largest QFI.
    yield ("gpdu_dl",
           GTP_U_Header(teid=0xFFFFFFFF, gtp_type=255, E=1, next_ex=0x85)
           / GTPPDUSessionContainer(type=0, QFI=63) / tpdu(),
           {"teid": 0xFFFFFFFF, "pdu_type": 0, "qfi": 63, "rqi": False, "ppi": None,
            "psc_len": 4, **inner_expect(tpdu())})
    # UL with QoS monitoring (QMP), delay results and QFI sequence number (clause 5.5.2.2).
    yield ("gpdu_ul_qmp",
           GTP_U_Header(teid=0x42, gtp_type=255, E=1, next_ex=0x85)
           / GTPPDUSessionContainer(type=1, QMP=1, dlDelayInd=1, ulDelayInd=1, SNP=1, QFI=2,
                                    dlSendTimeRpt=0xE8754700_80000000, dlRecvTime=0xE8754700_90000000,
                                    ulSendTime=0xE8754700_A0000000, dlDelayRslt=1000,
                                    ulDelayRslt=2000, UlQFISeqNum=0x123456)
           / tpdu(),
           {"teid": 0x42, "pdu_type": 1, "qfi": 2, "psc_len": 40,
            "qos_monitoring": [0xE8754700_80000000, 0xE8754700_90000000, 0xE8754700_A0000000],
            "dl_delay_result": 1000, "ul_delay_result": 2000, "ul_qfi_sequence_number": 0x123456,
            **inner_expect(tpdu())})
    # G-PDU without optional fields, and one with a sequence number.
    inner = IP(src=UE, dst=DN, id=9) / UDP(sport=5000, dport=53)
    yield ("gpdu_plain", GTP_U_Header(teid=0x1234, gtp_type=255) / inner,
           {"teid": 0x1234, "sequence_number": None,
            "inner_src": UE, "inner_dst": DN, "inner_len": len(inner), "inner_hex": bytes(inner).hex()})
    yield ("gpdu_seq", GTP_U_Header(teid=0x1234, gtp_type=255, S=1, seq=0xBEEF) / inner,
           {"teid": 0x1234, "sequence_number": 0xBEEF,
            "inner_src": UE, "inner_dst": DN, "inner_len": len(inner), "inner_hex": bytes(inner).hex()})
    # Echo Request / Response (TS 29.281 clauses 7.2.1, 7.2.2): TEID 0, S set, Recovery 0.
    yield ("echo_request", GTP_U_Header(teid=0, gtp_type=1, S=1, seq=0x42),
           {"sequence_number": 0x42})
    yield ("echo_response",
           GTP_U_Header(teid=0, gtp_type=2, S=1, seq=0x42)
           / GTPEchoResponse(IE_list=[IE_Recovery(restart_counter=0)]),
           {"sequence_number": 0x42, "recovery": 0})
    # Error Indication (clause 7.3.1), IPv4 and IPv6 GTP-U Peer Address.
    yield ("error_indication",
           GTP_U_Header(teid=0, gtp_type=26, S=1, seq=0)
           / GTPErrorIndication(IE_list=[IE_TEIDI(TEIDI=0xDEADBEEF),
                                         IE_GSNAddress(length=4, ipv4_address="192.0.2.10")]),
           {"sequence_number": 0, "teid_data_i": 0xDEADBEEF, "peer_address": "192.0.2.10"})
    yield ("error_indication_v6",
           GTP_U_Header(teid=0, gtp_type=26, S=1, seq=3)
           / GTPErrorIndication(IE_list=[IE_TEIDI(TEIDI=0x01020304),
                                         IE_GSNAddress(length=16, ipv6_address="2001:db8::a")]),
           {"sequence_number": 3, "teid_data_i": 0x01020304, "peer_address": "2001:db8::a"})
    # End Marker (clause 7.3.3): the TEID of the tunnel, no IEs.
    yield ("end_marker", GTP_U_Header(teid=0x00ABCDEF, gtp_type=254), {"teid": 0x00ABCDEF})


def dissect(b):
    p = GTP_U_Header(b)
    if p.gtp_type == 26 and p.haslayer(GTP_UDPPort_ExtensionHeader):
        ext = p[GTP_UDPPort_ExtensionHeader]
        if isinstance(ext.payload, Raw):
            body = GTPErrorIndication(ext.payload.load)
            ext.remove_payload()
            ext.add_payload(body)
    if p.gtp_type == 31:
        # Re-read the body from the original octets with the clause 8.5 layout.
        start = 12 if (p.E or p.S or p.PN) else 8
        if p.E:
            raise ValueError("extension headers in a Supported Extension Headers Notification")
        raw = b[start:8 + p.length]
        p.remove_payload()
        while raw:
            ie = IE_ExtensionHeaderTypeList(raw)
            p.add_payload(ie)
            raw = raw[2 + ie.length:]
    return p


if __name__ == "__main__":
    main(build, dissect)
