//! Generates `upf::abi` from bpf/include/abi.h, the one definition of the numbers the data
//! path shares with upfd (limits, flag bits, drop reasons, counters): every enum member
//! becomes a `pub const NAME: u32`, and the enums `drop_reason` and `stat_index` also
//! become the Rust enums `DropReason` and `Stat`, with the names operators see.
//!
//! The header keeps to a small grammar (see its first comment); anything else inside an
//! enum stops the build with the line it is on. crates/bpf/tests/abi.rs checks the
//! result against the BTF clang compiled from the same header.

use std::fmt::Write;
use std::path::PathBuf;

/// One enum member: name, value, the comment after it.
struct Member {
    name: String,
    value: u32,
    doc: String,
}

struct Enum {
    name: String,
    doc: String,
    members: Vec<Member>,
}

/// The C enums that also become Rust enums: C name, Rust name, member prefix.
const RUST_ENUMS: [(&str, &str, &str); 2] = [
    ("drop_reason", "DropReason", "DROP_"),
    ("stat_index", "Stat", "STAT_"),
];

fn fail(path: &str, line: usize, what: &str) -> ! {
    panic!("{path}:{line}: {what}");
}

fn parse_int(s: &str) -> Option<u32> {
    let s = s.trim_end_matches(['u', 'U', 'l', 'L']);
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The text of a `/* ... */` comment on one line, if the line has one.
fn comment_of(line: &str) -> (String, String) {
    match (line.find("/*"), line.rfind("*/")) {
        (Some(a), Some(b)) if b > a => (
            format!("{}{}", &line[..a], &line[b + 2..]),
            line[a + 2..b].trim().to_string(),
        ),
        _ => (line.to_string(), String::new()),
    }
}

fn parse(path: &str, text: &str) -> Vec<Enum> {
    let mut enums: Vec<Enum> = Vec::new();
    let mut current: Option<Enum> = None;
    // The comment block before an enum, for its doc.
    let mut block = String::new();
    let mut in_block = false;
    let mut known: Vec<(String, u32)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let line = raw.trim();
        if current.is_none() {
            if in_block || line.starts_with("/*") {
                let body = line
                    .trim_start_matches("/*")
                    .trim_start_matches('*')
                    .trim_end_matches("*/")
                    .trim();
                if !in_block {
                    block.clear();
                }
                if !body.is_empty() {
                    block.push_str(body);
                    block.push(' ');
                }
                in_block = !line.ends_with("*/");
                continue;
            }
            // `enum name {` opens a definition (`enum name field;` is a use of one).
            if let Some(name) = line
                .strip_prefix("enum ")
                .and_then(|r| r.strip_suffix('{'))
                .map(str::trim)
            {
                current = Some(Enum {
                    name: name.to_string(),
                    doc: block.trim().to_string(),
                    members: Vec::new(),
                });
            }
            if !line.is_empty() {
                block.clear();
            }
            continue;
        }
        let (code, doc) = comment_of(line);
        let code = code.trim();
        if code.is_empty() {
            continue;
        }
        if code == "};" {
            enums.extend(current.take());
            continue;
        }
        let Some(item) = code.strip_suffix(',') else {
            fail(path, n, "expected one member per line, ending in a comma");
        };
        let e = current.as_mut().expect("inside an enum");
        let (name, value) = match item.split_once('=') {
            Some((name, v)) => {
                let v = v.trim();
                let value = parse_int(v)
                    .or_else(|| known.iter().find(|(k, _)| k == v).map(|(_, x)| *x))
                    .unwrap_or_else(|| {
                        fail(
                            path,
                            n,
                            &format!("{v:?} is not a literal or a member above"),
                        )
                    });
                (name.trim(), value)
            }
            None => {
                let Some(prev) = e.members.last() else {
                    fail(path, n, "the first member of an enum needs a value");
                };
                (item.trim(), prev.value + 1)
            }
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            fail(path, n, &format!("{name:?} is not a C identifier"));
        }
        if known.iter().any(|(k, _)| k == name) {
            fail(path, n, &format!("{name} is defined twice"));
        }
        known.push((name.to_string(), value));
        e.members.push(Member {
            name: name.to_string(),
            value,
            doc,
        });
    }
    if let Some(e) = current {
        panic!("{path}: enum {} does not end", e.name);
    }
    enums
}

fn camel(s: &str) -> String {
    s.split('_')
        .map(|w| {
            let w = w.to_ascii_lowercase();
            let mut c = w.chars();
            match c.next() {
                Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
                None => String::new(),
            }
        })
        .collect()
}

fn doc_lines(out: &mut String, indent: &str, doc: &str) {
    if !doc.is_empty() {
        let _ = writeln!(out, "{indent}/// {}", doc.replace('`', "'"));
    }
}

fn generate(enums: &[Enum]) -> String {
    let mut out = String::from(
        "// Generated by crates/upf/build.rs from bpf/include/abi.h: edit the header, not this.\n",
    );
    for e in enums {
        let _ = writeln!(out, "\n// enum {}", e.name);
        for m in &e.members {
            doc_lines(&mut out, "", &m.doc);
            let _ = writeln!(out, "pub const {}: u32 = {};", m.name, m.value);
        }
    }
    for (c, rust, prefix) in RUST_ENUMS {
        let e = enums
            .iter()
            .find(|e| e.name == c)
            .unwrap_or_else(|| panic!("abi.h has no enum {c}"));
        let members: Vec<&Member> = e
            .members
            .iter()
            .filter(|m| !m.name.ends_with("_MAX"))
            .collect();
        for m in &members {
            if !m.name.starts_with(prefix) {
                panic!("abi.h: {} of enum {c} does not start with {prefix}", m.name);
            }
        }
        let _ = writeln!(out);
        doc_lines(&mut out, "", &e.doc);
        let _ = writeln!(
            out,
            "#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]\n#[repr(u32)]\npub enum {rust} {{"
        );
        for m in &members {
            doc_lines(&mut out, "    ", &m.doc);
            let _ = writeln!(out, "    {} = {},", camel(&m.name[prefix.len()..]), m.value);
        }
        let _ = writeln!(out, "}}\n\nimpl {rust} {{");
        let _ = writeln!(
            out,
            "    /// Every member, in table order.\n    pub const ALL: [{rust}; {}] = [",
            members.len()
        );
        for m in &members {
            let _ = writeln!(out, "        {rust}::{},", camel(&m.name[prefix.len()..]));
        }
        let _ = writeln!(out, "    ];\n");
        let _ = writeln!(
            out,
            "    /// The name operators see (metrics labels): the C name in lower case, without {prefix}.\n    pub fn name(self) -> &'static str {{\n        match self {{"
        );
        for m in &members {
            let _ = writeln!(
                out,
                "            {rust}::{} => {:?},",
                camel(&m.name[prefix.len()..]),
                m.name[prefix.len()..].to_ascii_lowercase()
            );
        }
        let _ = writeln!(out, "        }}\n    }}\n");
        let _ = writeln!(
            out,
            "    /// The index of its counter in the data path's stats table.\n    pub fn index(self) -> usize {{\n        self as usize\n    }}\n}}"
        );
    }
    let _ = writeln!(
        out,
        "\n/// Every enum of the header with its members, for the check against the BTF.\npub const ENUMS: &[(&str, &[(&str, u32)])] = &["
    );
    for e in enums {
        let _ = write!(out, "    ({:?}, &[", e.name);
        for m in &e.members {
            let _ = write!(out, "({:?}, {}), ", m.name, m.value);
        }
        let _ = writeln!(out, "]),");
    }
    let _ = writeln!(out, "];");
    out
}

fn main() {
    let header = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bpf/include/abi.h");
    println!("cargo:rerun-if-changed={}", header.display());
    let path = header.display().to_string();
    let text = std::fs::read_to_string(&header).unwrap_or_else(|e| panic!("{path}: {e}"));
    let enums = parse(&path, &text);
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR")).join("abi.rs");
    std::fs::write(&out, generate(&enums)).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
}
