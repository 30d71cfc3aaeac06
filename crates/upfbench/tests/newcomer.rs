//! What a newcomer follows, checked against what runs (issue 29): the README's demo, the
//! build of README, docs/operations.md and docs/lab.md, and the demo's duration as
//! measured (docs/benchmarks.md). Reads files only.

use std::collections::BTreeSet;
use std::path::PathBuf;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// A `cargo build` command's words: the flags and the packages, each as a set (order
/// does not change what is built), without a trailing comment.
fn build_of(line: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let line = line.split('#').next().unwrap_or("");
    // Inline in a sentence: the command is what the backticks hold.
    let line = match line.split_once("`cargo build") {
        Some((_, rest)) => line[line.len() - rest.len() - "cargo build".len()..]
            .split('`')
            .next()
            .unwrap_or(""),
        None => line,
    };
    let words: Vec<&str> = line
        .split_whitespace()
        .map(|w| w.trim_matches('`'))
        .skip_while(|w| *w != "cargo")
        .collect();
    assert_eq!(words.get(1), Some(&"build"), "{line}");
    let (mut flags, mut packages) = (BTreeSet::new(), BTreeSet::new());
    let mut it = words[2..].iter();
    while let Some(w) = it.next() {
        if *w == "-p" || *w == "--package" {
            packages.insert(it.next().expect("a package after -p").to_string());
        } else {
            flags.insert(w.to_string());
        }
    }
    (flags, packages)
}

/// Every line of `text` with `cargo build` in it.
fn build_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.contains("cargo build")).collect()
}

/// After the demo, the docs' build has nothing left to do: the demo builds the same
/// packages with the same flags (another set of packages unifies other features of the
/// dependencies, and cargo builds upfd again), and sets nothing in the environment
/// that changes a build.
#[test]
fn the_demo_builds_what_the_docs_build() {
    let demo = read("scripts/demo.sh");
    let demo_lines = build_lines(&demo);
    assert_eq!(demo_lines.len(), 1, "{demo_lines:?}");
    let want = build_of(demo_lines[0]);
    assert!(want.0.contains("--release"), "{want:?}");
    for p in ["upfd", "upfctl", "upfbench"] {
        assert!(want.1.contains(p), "the demo does not build {p}: {want:?}");
    }
    for var in [
        "RUSTFLAGS",
        "CARGO_PROFILE",
        "CARGO_BUILD",
        "CARGO_TARGET_DIR",
    ] {
        assert!(!demo.contains(var), "scripts/demo.sh sets {var}");
    }
    let mut seen = 0;
    for doc in ["README.md", "docs/operations.md", "docs/lab.md"] {
        let text = read(doc);
        let lines: Vec<&str> = build_lines(&text)
            .into_iter()
            .filter(|l| l.contains("-p upfd"))
            .collect();
        assert!(!lines.is_empty(), "{doc}: no build of upfd");
        for l in lines {
            assert_eq!(
                build_of(l),
                want,
                "{doc}: {l:?} builds otherwise than scripts/demo.sh"
            );
            seen += 1;
        }
    }
    assert!(seen >= 3);
}

/// "about N minutes" in `text`: N (a word or digits); "about a minute" is 1.
fn minutes_stated(text: &str) -> Vec<u32> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out = Vec::new();
    for w in words.windows(3) {
        if w[0].trim_start_matches('(').eq_ignore_ascii_case("about")
            && w[2]
                .trim_end_matches([',', ';', ')', '.'])
                .starts_with("minute")
        {
            let n = match w[1] {
                "a" | "one" => 1,
                "two" => 2,
                "three" => 3,
                n => n.parse().unwrap_or_else(|_| panic!("{w:?}")),
            };
            out.push(n);
        }
    }
    out
}

/// The measured duration of the demo's capacity test, in minutes, from
/// docs/benchmarks.md: "the demo's capacity test took N min".
fn measured_minutes() -> f64 {
    let text = read("docs/benchmarks.md")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let at = text
        .find("the demo's capacity test took ")
        .expect("docs/benchmarks.md records the demo's duration");
    let rest = &text[at + "the demo's capacity test took ".len()..];
    let n: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    assert!(rest[n.len()..].starts_with(" min"), "{rest:.40}");
    n.parse().unwrap()
}

/// The README, the demo and the quick profile state the capacity test's duration as it
/// was measured (within a minute), not as it once was.
#[test]
fn the_demo_takes_as_long_as_the_readme_says() {
    let measured = measured_minutes();
    let readme = read("README.md");
    let demo_paragraph = readme
        .split("\n\n")
        .find(|p| p.starts_with("The demo:"))
        .expect("README: the demo's paragraph");
    let demo = read("scripts/demo.sh");
    let header: String = demo
        .lines()
        .filter(|l| l.starts_with('#'))
        .map(|l| l.trim_start_matches('#'))
        .collect::<Vec<_>>()
        .join(" ");
    let profile = read("crates/upfbench/src/capacity/mod.rs");
    let quick = profile
        .lines()
        .skip_while(|l| !l.contains("/// Seconds: for tests."))
        .nth(2)
        .expect("the quick profile's doc comment");
    for (what, text) in [
        ("README", demo_paragraph),
        ("scripts/demo.sh", header.as_str()),
        ("Profile::Quick", quick),
    ] {
        let stated = minutes_stated(text);
        assert!(!stated.is_empty(), "{what} states no duration: {text}");
        // The first figure is the capacity test's.
        let s = f64::from(stated[0]);
        assert!(
            (s - measured).abs() <= 1.0,
            "{what} says about {s} minutes, docs/benchmarks.md measured {measured}: {text}"
        );
    }
}
