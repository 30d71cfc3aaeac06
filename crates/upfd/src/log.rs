//! Minimal leveled logging to stderr, one line per event with a UTC timestamp.

use std::sync::atomic::{AtomicU8, Ordering};

pub const ERROR: u8 = 0;
pub const WARN: u8 = 1;
pub const INFO: u8 = 2;
pub const DEBUG: u8 = 3;

static LEVEL: AtomicU8 = AtomicU8::new(INFO);

pub fn set_level(name: &str) {
    let l = match name {
        "error" => ERROR,
        "warn" => WARN,
        "debug" => DEBUG,
        _ => INFO,
    };
    LEVEL.store(l, Ordering::Relaxed);
}

pub fn enabled(l: u8) -> bool {
    l <= LEVEL.load(Ordering::Relaxed)
}

pub fn timestamp() -> String {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let t = utc(d.as_secs() as i64);
    format!("{}.{:03}Z", t.trim_end_matches('Z'), d.subsec_millis())
}

/// Seconds since the UNIX epoch as RFC 3339 UTC: "2026-11-26T08:11:28Z".
pub fn utc(unix: i64) -> String {
    let (days, rem) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[macro_export]
macro_rules! log {
    ($lvl:expr, $tag:literal, $($arg:tt)*) => {
        if $crate::log::enabled($lvl) {
            eprintln!("{} {} {}", $crate::log::timestamp(), $tag, format_args!($($arg)*));
        }
    };
}

#[macro_export]
macro_rules! error { ($($a:tt)*) => { $crate::log!($crate::log::ERROR, "ERROR", $($a)*) }; }
#[macro_export]
macro_rules! warn { ($($a:tt)*) => { $crate::log!($crate::log::WARN, "WARN ", $($a)*) }; }
#[macro_export]
macro_rules! info { ($($a:tt)*) => { $crate::log!($crate::log::INFO, "INFO ", $($a)*) }; }
#[macro_export]
macro_rules! debug { ($($a:tt)*) => { $crate::log!($crate::log::DEBUG, "DEBUG", $($a)*) }; }
