//! Decoding errors, each mapped to the PFCP Cause (TS 29.244 clause 8.2.1) and the
//! Offending IE (clause 8.2.22) a UP function puts in its rejection (clause 7.6).

use std::fmt;

use crate::ie::cause::CauseValue;
use crate::ie::types::ie_name;

/// What was wrong. The variants map onto the error-handling rules of TS 29.244 clause 7.6.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// Fewer octets than the PFCP header needs (clause 7.6.3): the message is discarded.
    TruncatedHeader,
    /// The version field is not 1 (clause 7.6.2): answered with Version Not Supported.
    UnsupportedVersion(u8),
    /// The message length field disagrees with the octets received (clause 7.6.3).
    MessageLength { declared: usize, available: usize },
    /// An IE's length runs past the end of the message or of its grouped IE (clause 7.6.7).
    IeOverrun { declared: usize, available: usize },
    /// Fewer than four octets left where an IE header was expected.
    TruncatedIeHeader,
    /// A fixed-size field of the IE is cut short (clause 7.6.7).
    IeTooShort { needed: usize, got: usize },
    /// The IE is longer than its definition allows and is not extendable.
    IeTooLong { max: usize, got: usize },
    /// A field holds a value the specification forbids (clause 7.6.8).
    Invalid(&'static str),
    /// A mandatory IE is absent (clause 7.6.6).
    MandatoryMissing,
    /// A conditional IE whose condition holds is absent (clause 7.6.6).
    ConditionalMissing(&'static str),
    /// Grouped IEs nested deeper than this decoder follows (a guard against hostile input).
    TooDeep,
}

/// A decoding error: which IE, where, and the Cause it maps to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    /// The IE type concerned (for a missing IE, the type that is missing).
    pub ie_type: Option<u16>,
    /// Byte offset, from the start of the PFCP message, of the IE (or field) concerned.
    pub offset: usize,
    /// IE types of the enclosing grouped IEs, outermost first.
    pub path: Vec<u16>,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, ie_type: Option<u16>, offset: usize) -> Self {
        Error {
            kind,
            ie_type,
            offset,
            path: Vec::new(),
        }
    }

    /// A value error inside an IE: the caller fills in type and offset with [`Error::at`].
    pub(crate) fn value(kind: ErrorKind) -> Self {
        Error::new(kind, None, 0)
    }

    /// Attach the IE type and absolute offset if not already known.
    pub(crate) fn at(mut self, ie_type: u16, offset: usize) -> Self {
        if self.ie_type.is_none() {
            self.ie_type = Some(ie_type);
            self.offset += offset;
        }
        self
    }

    pub(crate) fn within(mut self, parent: u16) -> Self {
        self.path.insert(0, parent);
        self
    }

    /// The Cause value the UP function returns for a request with this error
    /// (TS 29.244 clause 7.6 and Table 8.2.1-1).
    pub fn cause(&self) -> CauseValue {
        match self.kind {
            ErrorKind::TruncatedHeader
            | ErrorKind::MessageLength { .. }
            | ErrorKind::IeOverrun { .. }
            | ErrorKind::TruncatedIeHeader
            | ErrorKind::IeTooShort { .. }
            | ErrorKind::IeTooLong { .. } => CauseValue::INVALID_LENGTH,
            ErrorKind::MandatoryMissing => CauseValue::MANDATORY_IE_MISSING,
            ErrorKind::ConditionalMissing(_) => CauseValue::CONDITIONAL_IE_MISSING,
            ErrorKind::Invalid(_) | ErrorKind::TooDeep => CauseValue::MANDATORY_IE_INCORRECT,
            ErrorKind::UnsupportedVersion(_) => CauseValue::REQUEST_REJECTED,
        }
    }

    /// The IE type to put in the Offending IE (clause 8.2.22), when there is one.
    pub fn offending_ie(&self) -> Option<u16> {
        self.ie_type
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match &self.kind {
            ErrorKind::TruncatedHeader => "message shorter than the PFCP header".to_string(),
            ErrorKind::UnsupportedVersion(v) => format!("unsupported PFCP version {v}"),
            ErrorKind::MessageLength {
                declared,
                available,
            } => format!("message length {declared} but {available} octets follow the first 4"),
            ErrorKind::IeOverrun {
                declared,
                available,
            } => format!("IE length {declared} overruns its container ({available} octets left)"),
            ErrorKind::TruncatedIeHeader => "truncated IE header".to_string(),
            ErrorKind::IeTooShort { needed, got } => {
                format!("IE too short: needs {needed} octets, has {got}")
            }
            ErrorKind::IeTooLong { max, got } => {
                format!("IE too long: at most {max} octets, has {got}")
            }
            ErrorKind::Invalid(why) => format!("invalid value: {why}"),
            ErrorKind::MandatoryMissing => "mandatory IE missing".to_string(),
            ErrorKind::ConditionalMissing(why) => format!("conditional IE missing ({why})"),
            ErrorKind::TooDeep => "grouped IEs nested too deeply".to_string(),
        };
        write!(f, "{what}")?;
        if let Some(t) = self.ie_type {
            write!(f, "; IE {} ({t})", ie_name(t).unwrap_or("unknown"))?;
        }
        if !self.path.is_empty() {
            let path: Vec<String> = self
                .path
                .iter()
                .map(|t| ie_name(*t).unwrap_or("unknown").to_string())
                .collect();
            write!(f, " in {}", path.join(" > "))?;
        }
        write!(
            f,
            " at offset {}; Cause {} ({})",
            self.offset,
            self.cause().0,
            self.cause().name()
        )
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;
