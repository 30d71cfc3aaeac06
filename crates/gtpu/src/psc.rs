//! The content of the PDU Session Container extension header (TS 29.281 clause
//! 5.2.2.7): the PDU Session user plane protocol frame of TS 38.415 clause 5.5.2.
//!
//! DL PDU SESSION INFORMATION (PDU type 0, TS 38.415 clause 5.5.2.1):
//!
//! ```text
//!  octet 1   PDU type(4)=0 | QMP | SNP | MSNP | spare
//!  octet 2   PPP | RQI | QFI(6)
//!  [PPI(3) | spare(5)]                    if PPP
//!  [DL Sending Time Stamp (8)]            if QMP
//!  [DL QFI Sequence Number (3)]           if SNP
//!  [DL MBS QFI Sequence Number (4)]       if MSNP
//!  padding to 4n-2 octets
//! ```
//!
//! UL PDU SESSION INFORMATION (PDU type 1, TS 38.415 clause 5.5.2.2):
//!
//! ```text
//!  octet 1   PDU type(4)=1 | QMP | DL Delay Ind | UL Delay Ind | SNP
//!  octet 2   N3/N9 Delay Ind | New IE Flag | QFI(6)
//!  [DL Sending Time Stamp Repeated (8), DL Received Time Stamp (8),
//!   UL Sending Time Stamp (8)]            if QMP
//!  [DL Delay Result (4)]                  if DL Delay Ind
//!  [UL Delay Result (4)]                  if UL Delay Ind
//!  [UL QFI Sequence Number (3)]           if SNP
//!  [N3/N9 Delay Result (4)]               if N3/N9 Delay Ind
//!  [New IE Flags (1), then the IEs they announce]   if New IE Flag
//!  padding to 4n-2 octets
//! ```
//!
//! Whatever follows the fields decoded here (padding, and fields that later releases
//! add behind flags this crate does not decode) is kept as `tail`, so re-encoding gives
//! back the received octets.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::types::ext_type::PDU_SESSION_CONTAINER;
use crate::util::hex;

/// Byte offsets of the fixed part of the frame (TS 38.415 clause 5.5.2).
pub mod field {
    /// Octet 1: PDU type (bits 8-5) and flags.
    pub const TYPE_FLAGS: usize = 0;
    /// Octet 2: PPP/RQI (DL) or N3/N9 Delay Ind/New IE Flag (UL), and QFI.
    pub const QFI: usize = 1;
    /// Octet 3 of a DL frame with PPP set: PPI (bits 8-6).
    pub const PPI: usize = 2;
    /// Length of the fixed part.
    pub const FIXED_LEN: usize = 2;
}

/// PDU type values (TS 38.415 clause 5.5.3.1).
pub mod pdu_type {
    /// DL PDU SESSION INFORMATION.
    pub const DL: u8 = 0;
    /// UL PDU SESSION INFORMATION.
    pub const UL: u8 = 1;
}

/// Flag bits of octets 1 and 2 (TS 38.415 clause 5.5.2).
pub mod flags {
    /// QoS Monitoring Packet (octet 1, DL and UL).
    pub const QMP: u8 = 0x08;
    /// DL: Sequence Number Presence (octet 1).
    pub const DL_SNP: u8 = 0x04;
    /// DL: MBS Sequence Number Presence (octet 1).
    pub const DL_MSNP: u8 = 0x02;
    /// DL: the spare bit of octet 1.
    pub const DL_SPARE: u8 = 0x01;
    /// UL: DL Delay Ind (octet 1).
    pub const UL_DL_DELAY_IND: u8 = 0x04;
    /// UL: UL Delay Ind (octet 1).
    pub const UL_UL_DELAY_IND: u8 = 0x02;
    /// UL: Sequence Number Presence (octet 1).
    pub const UL_SNP: u8 = 0x01;
    /// DL: Paging Policy Presence (octet 2).
    pub const PPP: u8 = 0x80;
    /// DL: Reflective QoS Indicator (octet 2).
    pub const RQI: u8 = 0x40;
    /// UL: N3/N9 Delay Ind (octet 2).
    pub const N3N9_DELAY_IND: u8 = 0x80;
    /// UL: New IE Flag (octet 2).
    pub const NEW_IE_FLAG: u8 = 0x40;
    /// QFI mask (octet 2).
    pub const QFI_MASK: u8 = 0x3f;
}

/// A read/write view of the fixed part of a PDU Session Container frame (TS 38.415
/// clause 5.5.2: the content of extension header 0x85, from the PDU type octet on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps a buffer that holds at least the two fixed octets.
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let len = buffer.as_ref().len();
        if len < field::FIXED_LEN {
            return Err(Error::InvalidExtensionHeader {
                ext_type: PDU_SESSION_CONTAINER,
                offset: 0,
                reason: "PDU Session Container shorter than its 2 fixed octets",
            });
        }
        Ok(Frame { buffer })
    }

    /// Returns the underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// PDU type (bits 8-5 of octet 1).
    pub fn pdu_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE_FLAGS] >> 4
    }

    /// Octet 1 flag bits (bits 4-1).
    pub fn flags1(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE_FLAGS] & 0x0f
    }

    /// Octet 2 flag bits (bits 8-7).
    pub fn flags2(&self) -> u8 {
        self.buffer.as_ref()[field::QFI] & !flags::QFI_MASK
    }

    /// QoS Monitoring Packet flag.
    pub fn qmp(&self) -> bool {
        self.flags1() & flags::QMP != 0
    }

    /// QoS Flow Identifier (6 bits).
    pub fn qfi(&self) -> u8 {
        self.buffer.as_ref()[field::QFI] & flags::QFI_MASK
    }

    /// DL: Paging Policy Presence.
    pub fn ppp(&self) -> bool {
        self.flags2() & flags::PPP != 0
    }

    /// DL: Reflective QoS Indicator.
    pub fn rqi(&self) -> bool {
        self.flags2() & flags::RQI != 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets PDU type and octet 1 flag bits.
    pub fn set_pdu_type_flags(&mut self, pdu_type: u8, flags1: u8) {
        self.buffer.as_mut()[field::TYPE_FLAGS] = (pdu_type << 4) | (flags1 & 0x0f);
    }

    /// Sets octet 2: its flag bits (bits 8-7) and the QFI.
    pub fn set_flags2_qfi(&mut self, flags2: u8, qfi: u8) {
        self.buffer.as_mut()[field::QFI] = (flags2 & !flags::QFI_MASK) | (qfi & flags::QFI_MASK);
    }
}

/// The content of a PDU Session Container (TS 38.415 clause 5.5.2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "pdu_type", rename_all = "snake_case")]
pub enum PduSessionContainer<'a> {
    /// DL PDU SESSION INFORMATION (PDU type 0).
    #[serde(rename = "dl_pdu_session_information")]
    Dl(DlPduSessionInfo<'a>),
    /// UL PDU SESSION INFORMATION (PDU type 1).
    #[serde(rename = "ul_pdu_session_information")]
    Ul(UlPduSessionInfo<'a>),
    /// PDU types 2-15, reserved for future use: kept raw.
    Other {
        /// The whole content, PDU type octet first; its length plus 2 is a multiple of 4.
        #[serde(serialize_with = "hex")]
        content: &'a [u8],
    },
}

/// The QoS monitoring time stamps of UL PDU SESSION INFORMATION (TS 38.415 clauses
/// 5.5.3.10-5.5.3.12), 64-bit NTP format (RFC 5905 clause 6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize)]
pub struct UlTimeStamps {
    /// DL Sending Time Stamp Repeated.
    pub dl_sending_time_stamp_repeated: u64,
    /// DL Received Time Stamp.
    pub dl_received_time_stamp: u64,
    /// UL Sending Time Stamp.
    pub ul_sending_time_stamp: u64,
}

/// DL PDU SESSION INFORMATION (TS 38.415 clause 5.5.2.1). Each `Option` field is
/// present iff its flag is set (PPP, QMP, SNP, MSNP).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct DlPduSessionInfo<'a> {
    /// QoS Flow Identifier, 0..=63 (clause 5.5.3.3).
    pub qfi: u8,
    /// Reflective QoS Indicator (clause 5.5.3.4).
    pub rqi: bool,
    /// Paging Policy Indicator, 0..=7 (clause 5.5.3.7); present iff PPP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ppi: Option<u8>,
    /// DL Sending Time Stamp (clause 5.5.3.9); present iff QMP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dl_sending_time_stamp: Option<u64>,
    /// DL QFI Sequence Number, 24 bits (clause 5.5.3.18); present iff SNP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dl_qfi_sequence_number: Option<u32>,
    /// DL MBS QFI Sequence Number (Rel-17); present iff MSNP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dl_mbs_qfi_sequence_number: Option<u32>,
    /// The spare bit of octet 1; sent as 0, kept for re-encoding.
    #[serde(skip_serializing_if = "is_false")]
    pub spare_bit: bool,
    /// Bits 5-1 of the PPI octet (spare in Rel-15/16; later releases put flags there
    /// whose fields then sit in `tail`); kept for re-encoding.
    #[serde(skip_serializing_if = "is_zero")]
    pub ppi_octet_low_bits: u8,
    /// Octets after the decoded fields: padding, and fields of later releases.
    #[serde(serialize_with = "hex", skip_serializing_if = "is_empty")]
    pub tail: &'a [u8],
}

/// UL PDU SESSION INFORMATION (TS 38.415 clause 5.5.2.2). Each `Option` field is
/// present iff its flag is set (QMP, DL Delay Ind, UL Delay Ind, SNP, N3/N9 Delay Ind,
/// New IE Flag).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UlPduSessionInfo<'a> {
    /// QoS Flow Identifier, 0..=63 (clause 5.5.3.3).
    pub qfi: u8,
    /// The three QoS monitoring time stamps; present iff QMP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qos_monitoring: Option<UlTimeStamps>,
    /// DL Delay Result (clause 5.5.3.14); present iff DL Delay Ind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dl_delay_result: Option<u32>,
    /// UL Delay Result (clause 5.5.3.16); present iff UL Delay Ind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ul_delay_result: Option<u32>,
    /// UL QFI Sequence Number, 24 bits (clause 5.5.3.19); present iff SNP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ul_qfi_sequence_number: Option<u32>,
    /// N3/N9 Delay Result; present iff N3/N9 Delay Ind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n3_n9_delay_result: Option<u32>,
    /// The first New IE Flags octet; present iff New IE Flag. The IEs it announces
    /// are not decoded here and are part of `tail`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub new_ie_flags: Option<u8>,
    /// Octets after the decoded fields: padding, and the IEs the New IE Flags announce.
    #[serde(serialize_with = "hex", skip_serializing_if = "is_empty")]
    pub tail: &'a [u8],
}

fn is_false(v: &bool) -> bool {
    !*v
}

fn is_zero(v: &u8) -> bool {
    *v == 0
}

fn is_empty(v: &&[u8]) -> bool {
    v.is_empty()
}

/// Reads the fields of a frame in order, with errors that name the field and its
/// offset in the content.
struct Reader<'a> {
    data: &'a [u8],
    offset: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8]> {
        match self.data.get(self.offset..self.offset + n) {
            Some(bytes) => {
                self.offset += n;
                Ok(bytes)
            }
            None => Err(Error::InvalidExtensionHeader {
                ext_type: PDU_SESSION_CONTAINER,
                offset: self.offset,
                reason: what,
            }),
        }
    }

    fn uint(&mut self, present: bool, n: usize, what: &'static str) -> Result<Option<u64>> {
        if !present {
            return Ok(None);
        }
        let bytes = self.take(n, what)?;
        Ok(Some(
            bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)),
        ))
    }

    fn u32(&mut self, present: bool, n: usize, what: &'static str) -> Result<Option<u32>> {
        // n <= 4, so the value fits.
        Ok(self.uint(present, n, what)?.map(|v| v as u32))
    }

    fn rest(&self) -> &'a [u8] {
        self.data.get(self.offset..).unwrap_or(&[])
    }
}

/// Appends fields to the content buffer in order.
struct Writer<'b> {
    buf: &'b mut [u8],
    offset: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        let end = self.offset + bytes.len();
        let available = self.buf.len();
        let dst = self
            .buf
            .get_mut(self.offset..end)
            .ok_or(Error::BufferTooSmall {
                needed: end,
                available,
            })?;
        dst.copy_from_slice(bytes);
        self.offset = end;
        Ok(())
    }

    fn uint(&mut self, value: Option<u64>, n: usize) -> Result<()> {
        match value {
            Some(v) => self.put(&v.to_be_bytes()[8 - n..]),
            None => Ok(()),
        }
    }
}

fn check(field: &'static str, value: u64, max: u64) -> Result<()> {
    if value > max {
        Err(Error::ValueOutOfRange { field, value })
    } else {
        Ok(())
    }
}

/// Length a frame of `n` octets is padded to: the smallest 4k - 2 >= n
/// (TS 38.415 clause 5.5.3.5).
fn padded(n: usize) -> usize {
    (n + 2).next_multiple_of(4) - 2
}

impl<'a> PduSessionContainer<'a> {
    /// DL PDU SESSION INFORMATION with QFI `qfi` and no optional fields.
    pub fn dl(qfi: u8) -> Self {
        PduSessionContainer::Dl(DlPduSessionInfo::new(qfi))
    }

    /// UL PDU SESSION INFORMATION with QFI `qfi` and no optional fields.
    pub fn ul(qfi: u8) -> Self {
        PduSessionContainer::Ul(UlPduSessionInfo::new(qfi))
    }

    /// Parses the content of a PDU Session Container extension header. Offsets in
    /// errors are from the start of `content`.
    pub fn parse(content: &'a [u8]) -> Result<PduSessionContainer<'a>> {
        let frame = Frame::new_checked(content)?;
        match frame.pdu_type() {
            pdu_type::DL => DlPduSessionInfo::parse(content).map(PduSessionContainer::Dl),
            pdu_type::UL => UlPduSessionInfo::parse(content).map(PduSessionContainer::Ul),
            _ => Ok(PduSessionContainer::Other { content }),
        }
    }

    /// The QoS Flow Identifier of a DL or UL frame.
    pub fn qfi(&self) -> Option<u8> {
        match self {
            PduSessionContainer::Dl(dl) => Some(dl.qfi),
            PduSessionContainer::Ul(ul) => Some(ul.qfi),
            PduSessionContainer::Other { .. } => None,
        }
    }

    /// Length of the content as emitted, padding included: 4n - 2 octets.
    pub fn buffer_len(&self) -> usize {
        match self {
            PduSessionContainer::Dl(dl) => dl.buffer_len(),
            PduSessionContainer::Ul(ul) => ul.buffer_len(),
            PduSessionContainer::Other { content } => padded(content.len()),
        }
    }

    /// Writes the content, padding included, at the start of `buf`. Returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        match self {
            PduSessionContainer::Dl(dl) => dl.emit(buf),
            PduSessionContainer::Ul(ul) => ul.emit(buf),
            PduSessionContainer::Other { content } => {
                let first = content.first().copied().unwrap_or(0);
                if first >> 4 <= pdu_type::UL {
                    return Err(Error::ValueOutOfRange {
                        field: "PDU type of a raw PDU Session Container",
                        value: u64::from(first >> 4),
                    });
                }
                let len = padded(content.len());
                let mut w = Writer { buf, offset: 0 };
                w.put(content)?;
                w.put(&[0; 3][..len - content.len()])?;
                Ok(len)
            }
        }
    }
}

impl<'a> DlPduSessionInfo<'a> {
    /// QFI `qfi`, no optional fields.
    pub fn new(qfi: u8) -> Self {
        DlPduSessionInfo {
            qfi,
            ..Default::default()
        }
    }

    /// Parses a DL frame (PDU type 0).
    pub fn parse(content: &'a [u8]) -> Result<Self> {
        let frame = Frame::new_checked(content)?;
        let f1 = frame.flags1();
        let mut r = Reader {
            data: content,
            offset: field::FIXED_LEN,
        };
        let mut info = DlPduSessionInfo {
            qfi: frame.qfi(),
            rqi: frame.rqi(),
            spare_bit: f1 & flags::DL_SPARE != 0,
            ..Default::default()
        };
        if frame.ppp() {
            let octet = r.take(1, "PPI octet (PPP=1) missing")?[0];
            info.ppi = Some(octet >> 5);
            info.ppi_octet_low_bits = octet & 0x1f;
        }
        info.dl_sending_time_stamp = r.uint(
            f1 & flags::QMP != 0,
            8,
            "DL Sending Time Stamp (QMP=1) missing",
        )?;
        info.dl_qfi_sequence_number = r.u32(
            f1 & flags::DL_SNP != 0,
            3,
            "DL QFI Sequence Number (SNP=1) missing",
        )?;
        info.dl_mbs_qfi_sequence_number = r.u32(
            f1 & flags::DL_MSNP != 0,
            4,
            "DL MBS QFI Sequence Number (MSNP=1) missing",
        )?;
        info.tail = r.rest();
        Ok(info)
    }

    fn fields_len(&self) -> usize {
        field::FIXED_LEN
            + usize::from(self.ppi.is_some())
            + if self.dl_sending_time_stamp.is_some() {
                8
            } else {
                0
            }
            + if self.dl_qfi_sequence_number.is_some() {
                3
            } else {
                0
            }
            + if self.dl_mbs_qfi_sequence_number.is_some() {
                4
            } else {
                0
            }
    }

    /// Length as emitted, padding included: 4n - 2 octets.
    pub fn buffer_len(&self) -> usize {
        padded(self.fields_len() + self.tail.len())
    }

    /// Writes the frame, padding included, at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        check("QFI", self.qfi.into(), 0x3f)?;
        check("PPI", self.ppi.unwrap_or(0).into(), 7)?;
        check("PPI octet low bits", self.ppi_octet_low_bits.into(), 0x1f)?;
        check(
            "DL QFI Sequence Number",
            self.dl_qfi_sequence_number.unwrap_or(0).into(),
            0xff_ffff,
        )?;
        let len = self.buffer_len();
        let mut f1 = pdu_type::DL << 4;
        if self.dl_sending_time_stamp.is_some() {
            f1 |= flags::QMP;
        }
        if self.dl_qfi_sequence_number.is_some() {
            f1 |= flags::DL_SNP;
        }
        if self.dl_mbs_qfi_sequence_number.is_some() {
            f1 |= flags::DL_MSNP;
        }
        if self.spare_bit {
            f1 |= flags::DL_SPARE;
        }
        let mut f2 = self.qfi;
        if self.ppi.is_some() {
            f2 |= flags::PPP;
        }
        if self.rqi {
            f2 |= flags::RQI;
        }
        let mut w = Writer { buf, offset: 0 };
        w.put(&[f1, f2])?;
        if let Some(ppi) = self.ppi {
            w.put(&[(ppi << 5) | self.ppi_octet_low_bits])?;
        }
        w.uint(self.dl_sending_time_stamp, 8)?;
        w.uint(self.dl_qfi_sequence_number.map(u64::from), 3)?;
        w.uint(self.dl_mbs_qfi_sequence_number.map(u64::from), 4)?;
        w.put(self.tail)?;
        let pad = len - w.offset;
        w.put(&[0; 3][..pad])?;
        Ok(len)
    }
}

impl<'a> UlPduSessionInfo<'a> {
    /// QFI `qfi`, no optional fields.
    pub fn new(qfi: u8) -> Self {
        UlPduSessionInfo {
            qfi,
            ..Default::default()
        }
    }

    /// Parses a UL frame (PDU type 1).
    pub fn parse(content: &'a [u8]) -> Result<Self> {
        let frame = Frame::new_checked(content)?;
        let f1 = frame.flags1();
        let f2 = frame.flags2();
        let mut r = Reader {
            data: content,
            offset: field::FIXED_LEN,
        };
        let mut info = UlPduSessionInfo {
            qfi: frame.qfi(),
            ..Default::default()
        };
        if f1 & flags::QMP != 0 {
            let what = "QoS monitoring time stamps (QMP=1) missing";
            let b = r.take(24, what)?;
            let at = |i: usize| {
                let mut v = [0u8; 8];
                v.copy_from_slice(&b[i..i + 8]);
                u64::from_be_bytes(v)
            };
            info.qos_monitoring = Some(UlTimeStamps {
                dl_sending_time_stamp_repeated: at(0),
                dl_received_time_stamp: at(8),
                ul_sending_time_stamp: at(16),
            });
        }
        info.dl_delay_result = r.u32(
            f1 & flags::UL_DL_DELAY_IND != 0,
            4,
            "DL Delay Result (DL Delay Ind=1) missing",
        )?;
        info.ul_delay_result = r.u32(
            f1 & flags::UL_UL_DELAY_IND != 0,
            4,
            "UL Delay Result (UL Delay Ind=1) missing",
        )?;
        info.ul_qfi_sequence_number = r.u32(
            f1 & flags::UL_SNP != 0,
            3,
            "UL QFI Sequence Number (SNP=1) missing",
        )?;
        info.n3_n9_delay_result = r.u32(
            f2 & flags::N3N9_DELAY_IND != 0,
            4,
            "N3/N9 Delay Result (N3/N9 Delay Ind=1) missing",
        )?;
        if f2 & flags::NEW_IE_FLAG != 0 {
            info.new_ie_flags = Some(r.take(1, "New IE Flags (New IE Flag=1) missing")?[0]);
        }
        info.tail = r.rest();
        Ok(info)
    }

    fn fields_len(&self) -> usize {
        field::FIXED_LEN
            + if self.qos_monitoring.is_some() { 24 } else { 0 }
            + if self.dl_delay_result.is_some() { 4 } else { 0 }
            + if self.ul_delay_result.is_some() { 4 } else { 0 }
            + if self.ul_qfi_sequence_number.is_some() {
                3
            } else {
                0
            }
            + if self.n3_n9_delay_result.is_some() {
                4
            } else {
                0
            }
            + usize::from(self.new_ie_flags.is_some())
    }

    /// Length as emitted, padding included: 4n - 2 octets.
    pub fn buffer_len(&self) -> usize {
        padded(self.fields_len() + self.tail.len())
    }

    /// Writes the frame, padding included, at the start of `buf`; returns its length.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        check("QFI", self.qfi.into(), 0x3f)?;
        check(
            "UL QFI Sequence Number",
            self.ul_qfi_sequence_number.unwrap_or(0).into(),
            0xff_ffff,
        )?;
        let len = self.buffer_len();
        let mut f1 = pdu_type::UL << 4;
        if self.qos_monitoring.is_some() {
            f1 |= flags::QMP;
        }
        if self.dl_delay_result.is_some() {
            f1 |= flags::UL_DL_DELAY_IND;
        }
        if self.ul_delay_result.is_some() {
            f1 |= flags::UL_UL_DELAY_IND;
        }
        if self.ul_qfi_sequence_number.is_some() {
            f1 |= flags::UL_SNP;
        }
        let mut f2 = self.qfi;
        if self.n3_n9_delay_result.is_some() {
            f2 |= flags::N3N9_DELAY_IND;
        }
        if self.new_ie_flags.is_some() {
            f2 |= flags::NEW_IE_FLAG;
        }
        let mut w = Writer { buf, offset: 0 };
        w.put(&[f1, f2])?;
        if let Some(ts) = &self.qos_monitoring {
            w.put(&ts.dl_sending_time_stamp_repeated.to_be_bytes())?;
            w.put(&ts.dl_received_time_stamp.to_be_bytes())?;
            w.put(&ts.ul_sending_time_stamp.to_be_bytes())?;
        }
        w.uint(self.dl_delay_result.map(u64::from), 4)?;
        w.uint(self.ul_delay_result.map(u64::from), 4)?;
        w.uint(self.ul_qfi_sequence_number.map(u64::from), 3)?;
        w.uint(self.n3_n9_delay_result.map(u64::from), 4)?;
        if let Some(f) = self.new_ie_flags {
            w.put(&[f])?;
        }
        w.put(self.tail)?;
        let pad = len - w.offset;
        w.put(&[0; 3][..pad])?;
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(content: &[u8]) -> PduSessionContainer<'_> {
        let psc = PduSessionContainer::parse(content).unwrap();
        assert_eq!(psc.buffer_len(), content.len());
        let mut out = vec![0xee; content.len()];
        assert_eq!(psc.emit(&mut out), Ok(content.len()));
        assert_eq!(out, content);
        psc
    }

    #[test]
    fn deconstruct_frame() {
        // 5g-roaming-hr capture, gNB -> UPF: UL, QFI 1.
        let frame = Frame::new_checked(&[0x10u8, 0x01][..]).unwrap();
        assert_eq!(frame.pdu_type(), 1);
        assert_eq!(frame.qfi(), 1);
        assert!(!frame.qmp());
        // DL, PPP, RQI, QFI 9.
        let frame = Frame::new_checked(&[0x00u8, 0xc9][..]).unwrap();
        assert_eq!(frame.pdu_type(), 0);
        assert!(frame.ppp());
        assert!(frame.rqi());
        assert_eq!(frame.qfi(), 9);
        assert!(Frame::new_checked(&[0u8][..]).is_err());
    }

    #[test]
    fn construct_frame() {
        let mut b = [0u8; 2];
        let mut frame = Frame::new_unchecked(&mut b[..]);
        frame.set_pdu_type_flags(pdu_type::DL, 0);
        frame.set_flags2_qfi(flags::PPP | flags::RQI, 9);
        assert_eq!(b, [0x00, 0xc9]);
    }

    #[test]
    fn captured_dl_and_ul() {
        // Open5GS: DL QFI 1 and UL QFI 1 (content of an ext header of length 1).
        assert_eq!(round_trip(&[0x00, 0x01]), PduSessionContainer::dl(1));
        assert_eq!(round_trip(&[0x10, 0x01]), PduSessionContainer::ul(1));
    }

    #[test]
    fn dl_all_fields() {
        // QMP, SNP, MSNP; PPP, RQI, QFI 5; PPI 6; timestamp; SN; MBS SN: 18 octets,
        // no padding needed.
        let content = [
            0x0e, 0xc5, 0xc0, 1, 2, 3, 4, 5, 6, 7, 8, 0xaa, 0xbb, 0xcc, 0, 0, 0, 9,
        ];
        assert_eq!(content.len() % 4, 2);
        let psc = round_trip(&content);
        let PduSessionContainer::Dl(dl) = psc else {
            panic!("not DL")
        };
        assert_eq!(dl.qfi, 5);
        assert!(dl.rqi);
        assert_eq!(dl.ppi, Some(6));
        assert_eq!(dl.dl_sending_time_stamp, Some(0x0102_0304_0506_0708));
        assert_eq!(dl.dl_qfi_sequence_number, Some(0xaabbcc));
        assert_eq!(dl.dl_mbs_qfi_sequence_number, Some(9));
        assert!(dl.tail.is_empty());
    }

    #[test]
    fn dl_built_pads() {
        let mut dl = DlPduSessionInfo::new(9);
        dl.ppi = Some(1);
        dl.rqi = true;
        let psc = PduSessionContainer::Dl(dl);
        assert_eq!(psc.buffer_len(), 6);
        let mut out = [0xee; 6];
        assert_eq!(psc.emit(&mut out), Ok(6));
        assert_eq!(out, [0x00, 0xc9, 0x20, 0, 0, 0]);
    }

    #[test]
    fn ul_all_fields() {
        let mut content = vec![0x1f, 0xc7];
        for i in 1..=3u64 {
            content.extend_from_slice(&i.to_be_bytes());
        }
        content.extend_from_slice(&4u32.to_be_bytes());
        content.extend_from_slice(&5u32.to_be_bytes());
        content.extend_from_slice(&[0, 0, 6]);
        content.extend_from_slice(&7u32.to_be_bytes());
        content.push(0x01); // New IE Flags: D1 UL PDCP Delay Result Ind present
        content.push(0x01); // ... the indication itself, kept in the tail
        while content.len() % 4 != 2 {
            content.push(0);
        }
        let psc = round_trip(&content);
        let PduSessionContainer::Ul(ul) = psc else {
            panic!("not UL")
        };
        assert_eq!(ul.qfi, 7);
        assert_eq!(
            ul.qos_monitoring,
            Some(UlTimeStamps {
                dl_sending_time_stamp_repeated: 1,
                dl_received_time_stamp: 2,
                ul_sending_time_stamp: 3
            })
        );
        assert_eq!(ul.dl_delay_result, Some(4));
        assert_eq!(ul.ul_delay_result, Some(5));
        assert_eq!(ul.ul_qfi_sequence_number, Some(6));
        assert_eq!(ul.n3_n9_delay_result, Some(7));
        assert_eq!(ul.new_ie_flags, Some(1));
        assert_eq!(ul.tail[0], 1);
    }

    #[test]
    fn flag_without_field() {
        // DL with QMP set but no time stamp.
        assert_eq!(
            PduSessionContainer::parse(&[0x08, 0x01, 0, 0, 0, 0]),
            Err(Error::InvalidExtensionHeader {
                ext_type: 0x85,
                offset: 2,
                reason: "DL Sending Time Stamp (QMP=1) missing"
            })
        );
        // UL with N3/N9 Delay Ind but nothing after.
        assert_eq!(
            PduSessionContainer::parse(&[0x10, 0x81]),
            Err(Error::InvalidExtensionHeader {
                ext_type: 0x85,
                offset: 2,
                reason: "N3/N9 Delay Result (N3/N9 Delay Ind=1) missing"
            })
        );
        assert!(PduSessionContainer::parse(&[0x00]).is_err());
    }

    #[test]
    fn reserved_pdu_type_kept_raw() {
        let content = [0x20, 0x01];
        assert_eq!(
            round_trip(&content),
            PduSessionContainer::Other { content: &content }
        );
    }

    #[test]
    fn emit_range_checks() {
        let mut out = [0u8; 2];
        assert!(PduSessionContainer::dl(64).emit(&mut out).is_err());
        assert!(PduSessionContainer::ul(64).emit(&mut out).is_err());
        let mut dl = DlPduSessionInfo::new(1);
        dl.ppi = Some(8);
        assert!(PduSessionContainer::Dl(dl).emit(&mut [0u8; 6]).is_err());
        assert_eq!(
            PduSessionContainer::dl(1).emit(&mut [0u8; 1]),
            Err(Error::BufferTooSmall {
                needed: 2,
                available: 1
            })
        );
    }
}
