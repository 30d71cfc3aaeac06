//! Small helpers shared by the modules.

use serde::Serializer;

/// Serializes octets as a lowercase hex string (for JSON output of raw fields).
pub(crate) fn hex<S: Serializer>(bytes: &&[u8], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&Hex(bytes))
}

/// Displays octets as lowercase hex.
pub(crate) struct Hex<'a>(pub &'a [u8]);

impl core::fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}
