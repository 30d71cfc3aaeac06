//! What a newcomer runs as the README and docs/operations.md write it (issue 29): upfd
//! with the example configuration, as is, writes nothing on the machine. upfd runs in
//! mount and network namespaces of its own (a fresh /var/lib, its own loopback), so the
//! test sees exactly what it created and takes no address from other tests. Needs root.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A scratch directory, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new(what: &str) -> Dir {
        let p = std::env::temp_dir().join(format!("upfd-{what}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_example_configuration_writes_nothing_on_a_plain_run() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: skipping");
        return;
    }
    let cwd = Dir::new("newcomer-cwd");
    let logs = Dir::new("newcomer-log");
    let log = logs.0.join("upfd.log");
    let example = repo().join("deploy/config/upfd.yaml");
    // upfd as README runs it (from a scratch directory, to see what it writes there);
    // "up" is logged once it has
    // loaded or written its state (none here) and serves N4. Then SIGINT, and what is in
    // /var/lib and the working directory. Every wait is bounded (60 s).
    let script = r#"
        set -u
        mount -t tmpfs upfd-newcomer /var/lib || exit 10
        ip link set lo up || exit 11
        cd "$1" || exit 12
        "$2" --config "$3" 2>"$4" &
        pid=$!
        up=0
        for _ in $(seq 600); do
            if grep -q ' up: node' "$4"; then up=1; break; fi
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -INT "$pid" 2>/dev/null
        for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null
        wait "$pid"
        echo "up=$up"
        echo "var_lib=$(ls -A /var/lib | tr '\n' ' ')"
        echo "cwd=$(ls -A . | tr '\n' ' ')"
    "#;
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--net",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
    ])
    .arg(script)
    .arg("sh")
    .arg(&cwd.0)
    .arg(env!("CARGO_BIN_EXE_upfd"))
    .arg(&example)
    .arg(&log)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("unshare (util-linux)");
    let end = Instant::now() + Duration::from_secs(180);
    while child.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    if child.try_wait().unwrap().is_none() {
        let _ = child.kill();
    }
    let out = child.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    let upfd_log = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        out.status.success(),
        "{:?}: {said}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |k: &str| {
        said.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k} in {said:?}"))
            .trim()
            .to_string()
    };
    assert_eq!(field("up"), "1", "upfd did not come up: {upfd_log}");
    assert_eq!(
        field("var_lib"),
        "",
        "a plain run of the example wrote under /var/lib: {upfd_log}"
    );
    assert_eq!(
        field("cwd"),
        "",
        "a plain run wrote into its working directory: {upfd_log}"
    );
}
