//! Runs the scapy oracles of tests/oracles (see oracle_common.py) from a Rust integration
//! test. Included by crates/pfcp/tests/scapy.rs and crates/gtpu/tests/scapy.rs with
//! `#[path = "../../../tests/oracles/oracle.rs"] mod oracle;`.
//!
//! The python is `$UPF_PYTHON`, else `<repo>/.venv/bin/python3` (scripts/python-venv.sh
//! makes it). Without it, or with a scapy other than the one tests/oracles/requirements.txt
//! pins, the tests print why and pass, unless `UPF_REQUIRE_ORACLES=1`, when they fail.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value as Json;

/// A python script of tests/oracles and the interpreter that runs it.
pub struct Oracle {
    python: PathBuf,
    script: PathBuf,
    pub scapy_version: String,
}

/// A message scapy built: its octets and the values scapy was given.
pub struct Built {
    pub name: String,
    pub bytes: Vec<u8>,
    pub expect: Json,
}

fn repo_root() -> PathBuf {
    // Both users live in crates/<name>.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn pinned_scapy() -> String {
    let req = repo_root().join("tests/oracles/requirements.txt");
    let text =
        std::fs::read_to_string(&req).unwrap_or_else(|e| panic!("reading {}: {e}", req.display()));
    text.lines()
        .find_map(|l| l.trim().strip_prefix("scapy=="))
        .unwrap_or_else(|| panic!("{} pins no scapy version", req.display()))
        .trim()
        .to_string()
}

fn unavailable(reason: &str) -> Option<Oracle> {
    if std::env::var("UPF_REQUIRE_ORACLES").as_deref() == Ok("1") {
        panic!("scapy missing: run scripts/python-venv.sh ({reason})");
    }
    eprintln!("scapy not installed: skipping (scripts/python-venv.sh installs it): {reason}");
    None
}

impl Oracle {
    /// The oracle `tests/oracles/<script>`, or `None` (after saying why) when python with
    /// the pinned scapy is not there.
    pub fn new(script: &str) -> Option<Oracle> {
        let python = match std::env::var_os("UPF_PYTHON") {
            Some(p) => PathBuf::from(p),
            None => repo_root().join(".venv/bin/python3"),
        };
        if std::env::var_os("UPF_PYTHON").is_none() && !python.exists() {
            return unavailable(&format!("no {}", python.display()));
        }
        let script = repo_root().join("tests/oracles").join(script);
        let out = match Command::new(&python).arg(&script).arg("version").output() {
            Ok(o) => o,
            Err(e) => return unavailable(&format!("running {}: {e}", python.display())),
        };
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            return unavailable(&format!(
                "{} {} version: {} {}",
                python.display(),
                script.display(),
                out.status,
                stderr.trim()
            ));
        }
        let v: Json = serde_json::from_slice(&out.stdout).expect("version output is JSON");
        let found = v["scapy"].as_str().unwrap_or("?").to_string();
        let want = pinned_scapy();
        if found != want {
            return unavailable(&format!(
                "{} has scapy {found}, tests/oracles/requirements.txt pins {want}",
                python.display()
            ));
        }
        Some(Oracle {
            python,
            script,
            scapy_version: found,
        })
    }

    fn run(&self, mode: &str, input: String) -> Vec<Json> {
        let mut child = Command::new(&self.python)
            .arg(&self.script)
            .arg(mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawning {}: {e}", self.python.display()));
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let out = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        assert!(
            out.status.success(),
            "{} {mode} failed:\n{}",
            self.script.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// The messages scapy builds.
    pub fn build(&self) -> Vec<Built> {
        self.run("build", String::new())
            .into_iter()
            .map(|j| Built {
                name: j["name"].as_str().unwrap().to_string(),
                bytes: unhex(j["hex"].as_str().unwrap()),
                expect: j["expect"].clone(),
            })
            .collect()
    }

    /// Scapy's dissection of each message: the list of its layers, in input order.
    pub fn dissect(&self, msgs: &[(&str, Vec<u8>)]) -> Vec<Json> {
        let input: String = msgs
            .iter()
            .map(|(n, b)| format!("{}\n", serde_json::json!({"name": n, "hex": hex(b)})))
            .collect();
        let out = self.run("dissect", input);
        assert_eq!(out.len(), msgs.len(), "one answer per message");
        out.into_iter()
            .zip(msgs)
            .map(|(j, (n, b))| {
                assert_eq!(j["name"], *n);
                if let Some(e) = j.get("error") {
                    panic!("scapy could not dissect {n} ({}): {e}", hex(b));
                }
                j["layers"].clone()
            })
            .collect()
    }
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

pub fn unhex(s: &str) -> Vec<u8> {
    s.as_bytes()
        .chunks(2)
        .map(|c| {
            assert_eq!(c.len(), 2, "odd hex {s}");
            u8::from_str_radix(std::str::from_utf8(c).unwrap(), 16).unwrap()
        })
        .collect()
}

/// One node of a scapy dissection: a layer or an IE.
#[derive(Clone, Copy)]
pub struct Node<'a>(pub &'a Json);

impl<'a> Node<'a> {
    pub fn class(&self) -> &'a str {
        self.0["class"].as_str().unwrap()
    }
    pub fn has(&self, field: &str) -> bool {
        self.0["fields"].get(field).is_some()
    }
    pub fn field(&self, field: &str) -> &'a Json {
        self.0["fields"]
            .get(field)
            .unwrap_or_else(|| panic!("{} has no field {field}: {}", self.class(), self.0))
    }
    pub fn u64(&self, field: &str) -> u64 {
        self.field(field)
            .as_u64()
            .unwrap_or_else(|| panic!("{}.{field} is not a number", self.class()))
    }
    pub fn str(&self, field: &str) -> &'a str {
        self.field(field)
            .as_str()
            .unwrap_or_else(|| panic!("{}.{field} is not a string", self.class()))
    }
    /// A byte-string field (sent as hex).
    pub fn bytes(&self, field: &str) -> Vec<u8> {
        unhex(self.str(field))
    }
    /// The IE list of a grouped IE or message body.
    pub fn ies(&self) -> Vec<Node<'a>> {
        self.0["ies"]
            .as_array()
            .unwrap_or_else(|| panic!("{} has no IE list", self.class()))
            .iter()
            .map(Node)
            .collect()
    }
    pub fn classes(&self) -> Vec<&'a str> {
        self.ies().iter().map(Node::class).collect()
    }
    /// The IEs of one scapy class, in order.
    pub fn all(&self, class: &str) -> Vec<Node<'a>> {
        self.ies()
            .into_iter()
            .filter(|n| n.class() == class)
            .collect()
    }
    /// The one IE of a scapy class.
    pub fn one(&self, class: &str) -> Node<'a> {
        let v = self.all(class);
        assert_eq!(v.len(), 1, "{} holds {} {class}", self.class(), v.len());
        v[0]
    }
}

/// The layers of a dissection, with their classes checked: no Raw, no Padding, nothing
/// scapy could not place.
pub fn layers<'a>(dissection: &'a Json, classes: &[&str]) -> Vec<Node<'a>> {
    let l: Vec<Node> = dissection.as_array().unwrap().iter().map(Node).collect();
    assert_eq!(
        l.iter().map(Node::class).collect::<Vec<_>>(),
        classes,
        "scapy's layers"
    );
    l
}

/// Check that scapy placed every octet of `node` and its IEs: no IE it does not know, no
/// vendor IE, no octets left in an `extra_data` field. `except` lists IE classes whose
/// `extra_data` the caller checks itself.
pub fn assert_clean(node: Node, except: &[&str]) {
    let c = node.class();
    assert!(
        !matches!(
            c,
            "IE_NotImplemented" | "IE_EnterpriseSpecific" | "Raw" | "Padding"
        ),
        "scapy did not understand {c}: {}",
        node.0
    );
    if let Some(x) = node.0["fields"].get("extra_data") {
        if !except.contains(&c) {
            assert_eq!(x, "", "scapy left octets in {c}.extra_data");
        }
    }
    if node.0.get("ies").is_some() {
        for n in node.ies() {
            assert_clean(n, except);
        }
    }
}
