//! The Cause IE's values (TS 29.244 clause 8.2.1, Table 8.2.1-1): what a response says
//! of its request.

use serde::Serialize;

/// Cause value, clause 8.2.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub struct CauseValue(pub u8);

impl CauseValue {
    pub const REQUEST_ACCEPTED: CauseValue = CauseValue(1);
    pub const MORE_USAGE_REPORT_TO_SEND: CauseValue = CauseValue(2);
    pub const REQUEST_PARTIALLY_ACCEPTED: CauseValue = CauseValue(3);
    pub const REQUEST_REJECTED: CauseValue = CauseValue(64);
    pub const SESSION_CONTEXT_NOT_FOUND: CauseValue = CauseValue(65);
    pub const MANDATORY_IE_MISSING: CauseValue = CauseValue(66);
    pub const CONDITIONAL_IE_MISSING: CauseValue = CauseValue(67);
    pub const INVALID_LENGTH: CauseValue = CauseValue(68);
    pub const MANDATORY_IE_INCORRECT: CauseValue = CauseValue(69);
    pub const INVALID_FORWARDING_POLICY: CauseValue = CauseValue(70);
    pub const INVALID_FTEID_ALLOCATION_OPTION: CauseValue = CauseValue(71);
    pub const NO_ESTABLISHED_PFCP_ASSOCIATION: CauseValue = CauseValue(72);
    pub const RULE_CREATION_MODIFICATION_FAILURE: CauseValue = CauseValue(73);
    pub const PFCP_ENTITY_IN_CONGESTION: CauseValue = CauseValue(74);
    pub const NO_RESOURCES_AVAILABLE: CauseValue = CauseValue(75);
    pub const SERVICE_NOT_SUPPORTED: CauseValue = CauseValue(76);
    pub const SYSTEM_FAILURE: CauseValue = CauseValue(77);
    pub const REDIRECTION_REQUESTED: CauseValue = CauseValue(78);
    pub const ALL_DYNAMIC_ADDRESSES_OCCUPIED: CauseValue = CauseValue(79);
    pub const UNKNOWN_PREDEFINED_RULE: CauseValue = CauseValue(80);
    pub const UNKNOWN_APPLICATION_ID: CauseValue = CauseValue(81);

    pub fn is_acceptance(self) -> bool {
        (1..64).contains(&self.0)
    }

    pub fn name(self) -> &'static str {
        match self.0 {
            1 => "Request accepted",
            2 => "More Usage Report to send",
            3 => "Request partially accepted",
            64 => "Request rejected",
            65 => "Session context not found",
            66 => "Mandatory IE missing",
            67 => "Conditional IE missing",
            68 => "Invalid length",
            69 => "Mandatory IE incorrect",
            70 => "Invalid Forwarding Policy",
            71 => "Invalid F-TEID allocation option",
            72 => "No established PFCP Association",
            73 => "Rule creation/modification Failure",
            74 => "PFCP entity in congestion",
            75 => "No resources available",
            76 => "Service not supported",
            77 => "System failure",
            78 => "Redirection Requested",
            79 => "All dynamic addresses are occupied",
            80 => "Unknown Pre-defined Rule",
            81 => "Unknown Application ID",
            82 => "L2TP tunnel Establishment failure",
            83 => "L2TP session Establishment failure",
            84 => "L2TP tunnel Release",
            85 => "L2TP session Release",
            86 => "PFCP session restoration failure due to requested SEID already in use",
            _ => "spare",
        }
    }
}
