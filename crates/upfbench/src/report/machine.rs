//! Machine facts read from /proc and uname: what a reader needs to judge a figure taken on a
//! shared machine.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// The machine a run was taken on, and what else it was doing.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Machine {
    /// "model name" of /proc/cpuinfo.
    pub cpu_model: String,
    /// CPUs online.
    pub cpus: usize,
    /// uname: sysname, release, version, machine.
    pub kernel: String,
    /// CPUs the traffic generator was pinned to.
    pub generator_cpus: Vec<usize>,
    /// CPUs the UPF's forwarding ran on.
    pub forwarder_cpus: Vec<usize>,
    /// /proc/loadavg: 1, 5 and 15 minutes.
    pub load_average: [f64; 3],
    /// The processes that used the most CPU while probed, busiest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub busy_processes: Vec<ProcessLoad>,
    /// UTC, ISO 8601 (e.g. "2026-11-22T02:09:09Z").
    pub date: String,
    pub upfbench_version: String,
    pub command_line: Vec<String>,
    /// What this run could not set up as planned (e.g. the forwarding CPU's threads not
    /// real-time), so its figures are read with that in mind.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One process's share of a CPU over the probe's sample interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessLoad {
    pub pid: u32,
    pub name: String,
    /// % of one CPU.
    pub cpu_pct: f64,
}

/// How many busy processes a probe keeps.
const TOP_PROCESSES: usize = 5;

impl Machine {
    /// Reads the machine's facts now; samples per-process CPU time over `sample` (zero skips
    /// the process list). Facts that cannot be read are left empty rather than failing.
    pub fn probe(generator_cpus: &[usize], forwarder_cpus: &[usize], sample: Duration) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let busy_processes = if sample.is_zero() {
            Vec::new()
        } else {
            let before = process_ticks();
            std::thread::sleep(sample);
            busy(&before, &process_ticks(), sample, clock_ticks_per_s())
        };
        Machine {
            cpu_model: cpu_model(&cpuinfo),
            cpus: cpus_online(),
            kernel: kernel(),
            generator_cpus: generator_cpus.to_vec(),
            forwarder_cpus: forwarder_cpus.to_vec(),
            load_average: load_average(
                &std::fs::read_to_string("/proc/loadavg").unwrap_or_default(),
            ),
            busy_processes,
            date: iso8601_utc(SystemTime::now()),
            upfbench_version: env!("CARGO_PKG_VERSION").to_string(),
            command_line: std::env::args().collect(),
            notes: Vec::new(),
        }
    }
}

fn cpu_model(cpuinfo: &str) -> String {
    cpuinfo
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == "model name")
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_default()
}

fn cpus_online() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0)
        .max(
            // available_parallelism honours affinity; the machine's count is what is online.
            // SAFETY: sysconf has no preconditions.
            unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(0) as usize,
        )
}

fn kernel() -> String {
    // SAFETY: uname fills the zeroed struct it is given; its fields are NUL-terminated.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.version),
        field(&u.machine)
    )
}

fn load_average(loadavg: &str) -> [f64; 3] {
    let mut it = loadavg
        .split_whitespace()
        .map(|w| w.parse::<f64>().unwrap_or(0.0));
    [
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
        it.next().unwrap_or(0.0),
    ]
}

fn clock_ticks_per_s() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// pid -> (name, utime + stime in clock ticks) of every process now.
fn process_ticks() -> HashMap<u32, (String, u64)> {
    let mut m = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return m;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if let Some(v) = std::fs::read_to_string(e.path().join("stat"))
            .ok()
            .and_then(|s| parse_stat(&s))
        {
            m.insert(pid, v);
        }
    }
    m
}

/// Name and utime + stime from a /proc/PID/stat line. The name is in parentheses and may
/// itself hold spaces and parentheses, so fields are counted from the last ')'.
fn parse_stat(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?.to_string();
    // After ')': state(3) ppid(4) ... utime(14) stime(15); index 0 here is field 3.
    let rest: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    let utime: u64 = rest.get(11)?.parse().ok()?;
    let stime: u64 = rest.get(12)?.parse().ok()?;
    Some((name, utime + stime))
}

fn busy(
    before: &HashMap<u32, (String, u64)>,
    after: &HashMap<u32, (String, u64)>,
    sample: Duration,
    ticks_per_s: f64,
) -> Vec<ProcessLoad> {
    let secs = sample.as_secs_f64();
    let mut v: Vec<ProcessLoad> = after
        .iter()
        .filter_map(|(pid, (name, t1))| {
            let t0 = before.get(pid).map(|(_, t)| *t).unwrap_or(0);
            let d = t1.saturating_sub(t0);
            (d > 0).then(|| ProcessLoad {
                pid: *pid,
                name: name.clone(),
                cpu_pct: d as f64 / ticks_per_s / secs * 100.0,
            })
        })
        .collect();
    v.sort_by(|a, b| b.cpu_pct.total_cmp(&a.cpu_pct).then(a.pid.cmp(&b.pid)));
    v.truncate(TOP_PROCESSES);
    v
}

/// "YYYY-MM-DDTHH:MM:SSZ" of a time (UTC).
pub(crate) fn iso8601_utc(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_line_with_spaces_and_parens_in_the_name() {
        let s = "1234 (tmux: server (1)) S 1 1234 1234 0 -1 4194560 1 0 0 0 250 50 0 0 20 0 1 0";
        assert_eq!(parse_stat(s), Some(("tmux: server (1)".to_string(), 300)));
    }

    #[test]
    fn busiest_first_and_idle_left_out() {
        let before = HashMap::from([(1, ("a".into(), 100)), (2, ("b".into(), 100))]);
        let after = HashMap::from([
            (1, ("a".into(), 150)),
            (2, ("b".into(), 100)),
            (3, ("c".into(), 100)),
        ]);
        let v = busy(&before, &after, Duration::from_secs(1), 100.0);
        assert_eq!(v.len(), 2);
        assert_eq!((v[0].name.as_str(), v[0].cpu_pct), ("c", 100.0));
        assert_eq!((v[1].name.as_str(), v[1].cpu_pct), ("a", 50.0));
    }

    #[test]
    fn cpuinfo_and_loadavg() {
        let c = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n";
        assert_eq!(cpu_model(c), "Intel(R) Xeon(R) CPU @ 2.20GHz");
        assert_eq!(
            load_average("0.52 0.58 0.59 2/345 6789\n"),
            [0.52, 0.58, 0.59]
        );
    }

    #[test]
    fn dates() {
        assert_eq!(iso8601_utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_795_140_549);
        assert_eq!(iso8601_utc(t), "2026-11-20T02:09:09Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400); // 2000-02-29
        assert_eq!(iso8601_utc(leap), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn probe_reads_this_machine() {
        let m = Machine::probe(&[0], &[1], Duration::ZERO);
        assert!(m.cpus >= 1);
        assert!(m.kernel.starts_with("Linux "), "{}", m.kernel);
        assert_eq!(m.generator_cpus, vec![0]);
        assert!(m.date.ends_with('Z'));
    }
}
