//! PFCP wire codec, TS 29.244 Rel-17. No I/O.
//!
//! Two layers, as in smoltcp's wire module:
//! - [`Message`]: the header and the ordered tree of [`Ie`]s. Parsing then emitting gives
//!   back the same octets for everything real SMFs and UPFs send; unknown and vendor IEs are
//!   kept. This is what `upfbench decode` prints.
//! - [`msg`]: typed messages and grouped IEs (Create PDR, PDI, Create FAR ...) with their
//!   mandatory IEs checked, for the UP function and the SMF emulator.
//!
//! Every error names the IE type, its offset in the message and the PFCP Cause it maps to.

mod buf;
pub mod error;
pub mod header;
pub mod ie;
pub mod message;
pub mod msg;

pub use error::{Error, ErrorKind, Result};
pub use header::{Header, HeaderRepr};
pub use ie::{CauseValue, Ie};
pub use message::{message_type, Message};
