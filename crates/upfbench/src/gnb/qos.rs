//! QoS monitoring via GTP-U, the NG-RAN's side (TS 23.501 clause 5.33.3.2): a DL G-PDU
//! whose PDU Session Container (DL PDU SESSION INFORMATION, TS 38.415 clause 5.5.2.1)
//! has QMP set is answered with a UL G-PDU on the session's uplink F-TEID whose UL PDU
//! SESSION INFORMATION (clause 5.5.2.2) has QMP set, the same QFI and the three time
//! stamps: DL Sending Time Stamp Repeated (clause 5.5.3.10, T1 copied from the DL frame),
//! DL Received Time Stamp (clause 5.5.3.11, T2, when the gNB received it) and UL Sending
//! Time Stamp (clause 5.5.3.12, T3, when the gNB sends the answer), each in the 64-bit
//! timestamp format of IETF RFC 5905 clause 6, from the wall clock (CLOCK_REALTIME).
//!
//! The answer carries no T-PDU (the "dummy" UL packet of clause 5.33.3.2: the emulator
//! does not wait for the UE's uplink data). DL Delay Ind, UL Delay Ind and their results
//! (clauses 5.5.3.13-5.5.3.16) stay unset: they carry the RAN part of the delay (NG-RAN
//! and the Uu interface), which an NG-RAN reports only when the SMF asked it to measure
//! over NGAP; the emulator has no radio part to measure. Likewise no N3/N9 Delay Result.

use std::time::{SystemTime, UNIX_EPOCH};

use gtpu::psc::{self, DlPduSessionInfo};
use gtpu::{
    ext_type, ExtensionHeader, ExtensionHeaderIter, GpduInfo, Message, PduSessionContainer,
    UlPduSessionInfo, UlTimeStamps,
};

use crate::smf::n4::NTP_UNIX_OFFSET;

/// Octets of the answer: the GTP-U header with its optional fields (12) and a PDU
/// Session Container of 28 (length, 2 fixed octets, 24 of time stamps, next type).
pub const ANSWER_LEN: usize = 40;

/// `t` in the 64-bit timestamp format of RFC 5905 clause 6: seconds since 1900-01-01
/// (modulo 2^32, the era being implied) in the high 32 bits, the fraction of a second
/// in units of 2^-32 s in the low 32 (truncated).
pub fn ntp64(t: SystemTime) -> u64 {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = (d.as_secs() + NTP_UNIX_OFFSET) & 0xffff_ffff;
    let frac = (u64::from(d.subsec_nanos()) << 32) / 1_000_000_000;
    (secs << 32) | frac
}

/// A DL QoS monitoring packet: the QFI and DL Sending Time Stamp (TS 38.415 clause
/// 5.5.3.9) of the first PDU Session Container of a G-PDU, when it is DL PDU SESSION
/// INFORMATION with QMP set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DlMonitoring {
    /// QoS Flow Identifier.
    pub qfi: u8,
    /// DL Sending Time Stamp (T1), as received.
    pub dl_sending_time_stamp: u64,
}

/// Looks for QoS monitoring in the G-PDU `msg`, whose `info` [`gtpu::parse_gpdu`]
/// returned (so its extension header chain is well formed). None unless its first PDU
/// Session Container of type DL or UL is DL with QMP set (the container the data path
/// reads, see docs/testing.md "The G-PDU contract"); an error when that container is
/// malformed (QMP set and no time stamp).
pub fn dl_monitoring(msg: &[u8], info: &GpduInfo) -> gtpu::Result<Option<DlMonitoring>> {
    if info.pdu_type != Some(psc::pdu_type::DL) {
        return Ok(None);
    }
    // The E flag is set (there is a container): optional fields up to octet 12, the
    // first extension header type in octet 12.
    let Some(&first) = msg.get(11) else {
        return Ok(None);
    };
    let chain = ExtensionHeaderIter::new(msg, 12, info.payload_offset, first);
    for raw in chain {
        let raw = raw?;
        if raw.ext_type != ext_type::PDU_SESSION_CONTAINER {
            continue;
        }
        let frame = psc::Frame::new_checked(raw.content)?;
        if frame.pdu_type() > psc::pdu_type::UL {
            continue;
        }
        if frame.pdu_type() != psc::pdu_type::DL || !frame.qmp() {
            return Ok(None);
        }
        let dl = DlPduSessionInfo::parse(raw.content)?;
        return Ok(dl.dl_sending_time_stamp.map(|t1| DlMonitoring {
            qfi: dl.qfi,
            dl_sending_time_stamp: t1,
        }));
    }
    Ok(None)
}

/// Writes at the start of `buf` the answer to `dl` for the uplink tunnel `ul_teid`: a
/// G-PDU without T-PDU whose UL PDU SESSION INFORMATION has QMP set, `dl`'s QFI and the
/// time stamps T1 (repeated), `received` (T2) and `sent` (T3). Returns its length,
/// [`ANSWER_LEN`].
pub fn write_answer(
    buf: &mut [u8],
    ul_teid: u32,
    dl: DlMonitoring,
    received: u64,
    sent: u64,
) -> gtpu::Result<usize> {
    let ul = UlPduSessionInfo {
        qos_monitoring: Some(UlTimeStamps {
            dl_sending_time_stamp_repeated: dl.dl_sending_time_stamp,
            dl_received_time_stamp: received,
            ul_sending_time_stamp: sent,
        }),
        ..UlPduSessionInfo::new(dl.qfi)
    };
    let mut m = Message::g_pdu(ul_teid, &[]);
    let header = m.header_mut();
    header
        .extension_headers
        .push(ExtensionHeader::PduSessionContainer(
            PduSessionContainer::Ul(ul),
        ));
    m.emit(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ntp_format() {
        assert_eq!(ntp64(UNIX_EPOCH), NTP_UNIX_OFFSET << 32);
        // 2026-01-01T00:00:00.5Z: 3976214400 s since 1900, half a second.
        let t = UNIX_EPOCH + Duration::from_millis(1_767_225_600_500);
        assert_eq!(ntp64(t), (3_976_214_400u64 << 32) | 0x8000_0000);
        // Era 1 (from 2036-02-07T06:28:16Z): the seconds wrap.
        let t = UNIX_EPOCH + Duration::from_secs((1u64 << 32) - NTP_UNIX_OFFSET + 5);
        assert_eq!(ntp64(t) >> 32, 5);
    }

    /// A DL G-PDU: TEID 1, a container with the given content, then `t_pdu`.
    fn dl_gpdu(content: &[u8], t_pdu: &[u8]) -> Vec<u8> {
        let ext_len = content.len() + 2;
        assert_eq!(ext_len % 4, 0);
        let length = 4 + ext_len + t_pdu.len();
        let mut m = vec![0x34, 0xff];
        m.extend_from_slice(&(length as u16).to_be_bytes());
        m.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0x85, (ext_len / 4) as u8]);
        m.extend_from_slice(content);
        m.push(0);
        m.extend_from_slice(t_pdu);
        m
    }

    #[test]
    fn finds_dl_monitoring() {
        let t1 = 0x0102_0304_0506_0708u64;
        let mut content = vec![0x08, 0x05];
        content.extend_from_slice(&t1.to_be_bytes());
        content.extend_from_slice(&[0; 4]);
        let m = dl_gpdu(&content, &[]);
        let info = gtpu::parse_gpdu(&m).unwrap();
        assert_eq!(info.payload_len, 0);
        assert_eq!(
            dl_monitoring(&m, &info).unwrap(),
            Some(DlMonitoring {
                qfi: 5,
                dl_sending_time_stamp: t1
            })
        );
        // No QMP; UL; no container.
        let m = dl_gpdu(&[0x00, 0x05], &[0x45]);
        assert_eq!(dl_monitoring(&m, &gtpu::parse_gpdu(&m).unwrap()), Ok(None));
        let m = dl_gpdu(&[0x18, 0x05], &[0x45]);
        assert_eq!(dl_monitoring(&m, &gtpu::parse_gpdu(&m).unwrap()), Ok(None));
        let m = [0x30, 0xff, 0, 1, 0, 0, 0, 1, 0x45];
        assert_eq!(dl_monitoring(&m, &gtpu::parse_gpdu(&m).unwrap()), Ok(None));
        // QMP and no time stamp: malformed.
        let m = dl_gpdu(&[0x08, 0x05, 0, 0, 0, 0], &[]);
        assert!(dl_monitoring(&m, &gtpu::parse_gpdu(&m).unwrap()).is_err());
    }

    #[test]
    fn answer_octets() {
        let dl = DlMonitoring {
            qfi: 9,
            dl_sending_time_stamp: 0x1111_1111_2222_2222,
        };
        let mut buf = [0xee; 64];
        let n = write_answer(
            &mut buf,
            0xc0bb,
            dl,
            0x3333_3333_4444_4444,
            0x5555_5555_6666_6666,
        )
        .unwrap();
        assert_eq!(n, ANSWER_LEN);
        let mut want = vec![
            0x34, 0xff, 0x00, 0x20, 0x00, 0x00, 0xc0, 0xbb, // E flag, G-PDU, Length 32, TEID
            0, 0, 0, 0x85, // no sequence number, N-PDU number; a PDU Session Container
            7, 0x18, 0x09, // 7 units; UL, QMP; QFI 9
        ];
        for v in [
            0x1111_1111_2222_2222u64,
            0x3333_3333_4444_4444,
            0x5555_5555_6666_6666,
        ] {
            want.extend_from_slice(&v.to_be_bytes());
        }
        want.push(0); // no next extension header
        assert_eq!(&buf[..n], &want[..]);
    }
}
