//! IE type values (TS 29.244 Table 8.1.2-1), their names, and which are grouped IEs:
//! what the decoder and its errors need of the table, without the IEs' value types.

macro_rules! ie_is_group {
    (group) => {
        true
    };
    ($t:ty) => {
        false
    };
}

macro_rules! ie_types {
    ($( $code:literal $variant:ident $konst:ident $name:literal $kind:tt ; )*) => {
        $( #[doc = $name] pub const $konst: u16 = $code; )*

        /// The specification's name of an IE type, if known.
        pub fn ie_name(ie_type: u16) -> Option<&'static str> {
            match ie_type {
                $( $code => Some($name), )*
                _ => None,
            }
        }

        /// True for the IE types that are grouped IEs.
        pub fn is_grouped(ie_type: u16) -> bool {
            match ie_type {
                $( $code => ie_is_group!($kind), )*
                _ => false,
            }
        }

        /// Every IE type of the table with the name of its value type: `"group"` for
        /// grouped IEs, `"Bytes"` for IEs carried opaque, otherwise the typed value
        /// (`"FTeid"`, `"u32"` ...).
        pub fn known_ie_types() -> &'static [(u16, &'static str)] {
            &[ $( ($code, stringify!($kind)), )* ]
        }

    };
}

super::table::ie_table!(ie_types);
