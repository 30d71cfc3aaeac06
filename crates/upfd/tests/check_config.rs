//! `upfd check-config FILE`, run as a command: the file, the environment's `UPFD_*`
//! overrides and `--set`'s, and what can be checked on this host without starting
//! (interfaces, local addresses, the state directory). Each error is one line naming
//! where the value came from, the key path, the value and what is allowed; the start
//! (`upfd --config FILE`) refuses the same configuration with the same line. Needs
//! nothing but the loopback interface (no root, no lab).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const UPFD: &str = env!("CARGO_BIN_EXE_upfd");

/// An address no interface here has (TEST-NET-3, RFC 5737).
const NOT_HERE: &str = "203.0.113.77";

/// A directory of its own for a test's files, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d =
            std::env::temp_dir().join(format!("upfd-check-config-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A valid configuration (no data path) keeping its state in `dir`.
fn good(dir: &Dir) -> String {
    format!(
        "node_id: 127.0.0.7\n\
         n4:\n  address: 127.0.0.7\n  port: 8805\n  heartbeat_interval: 5s\n\
         gtpu:\n  n3: {{ ipv4: 127.0.0.7 }}\n\
         ue_pools:\n  - {{ network_instance: internet, prefix: 10.45.0.0/16 }}\n\
         state:\n  directory: {}\n",
        dir.0.join("state").display()
    )
}

/// The same with the XDP data path on the loopback interface.
fn xdp(dir: &Dir) -> String {
    format!(
        "{}datapath: {{ mode: xdp, n3_interface: lo, n6_interface: lo }}\n",
        good(dir)
    )
}

/// What a run printed: exit code, stdout, stderr.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// `upfd ARGS` with the environment's `UPFD_*` variables replaced by `env`; killed if
/// it is still running after 60 s (it must not start; a busy machine may be slow to
/// say so).
fn upfd(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = Command::new(UPFD);
    c.args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("UPFD_") {
            c.env_remove(k);
        }
    }
    c.envs(env.iter().copied());
    let mut child = c
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn check_config(file: &Path, env: &[(&str, &str)], set: &[&str]) -> Run {
    let mut args = vec!["check-config", file.to_str().unwrap()];
    for s in set {
        args.extend(["--set", s]);
    }
    upfd(&args, env)
}

/// The network interfaces here, as the error lists them.
fn interfaces_here() -> String {
    let mut v: Vec<String> = std::fs::read_dir("/sys/class/net")
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v.join(", ")
}

fn assert_not_local() {
    assert!(
        std::net::UdpSocket::bind((NOT_HERE, 0)).is_err(),
        "{NOT_HERE} is an address of this host: these tests need one that is not"
    );
}

#[test]
fn a_good_file_is_valid_and_says_what_was_checked() {
    let d = Dir::new("good");
    let f = d.file("upfd.yaml", &good(&d));
    let r = check_config(&f, &[], &[]);
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""));
    assert_eq!(
        r.stdout,
        format!(
            "{}: valid (node 127.0.0.7, N4 127.0.0.7:8805, 1 UE pool(s); checked on this host: addresses, state directory)\n",
            f.display()
        )
    );
    let f = d.file("xdp.yaml", &xdp(&d));
    let r = check_config(&f, &[], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout
            .ends_with("checked on this host: interfaces, addresses, state directory)\n"),
        "{}",
        r.stdout
    );
}

#[test]
fn the_example_configuration_is_valid_here() {
    let d = Dir::new("example");
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/config/upfd.yaml");
    // Its state directory, /var/lib/upfd, is root's: one of ours instead.
    let state = format!("state.directory={}", d.0.join("state").display());
    let r = check_config(Path::new(example), &[], &[&state]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout
            .contains(": valid (node 127.0.0.7, N4 127.0.0.7:8805, 3 UE pool(s), 1 override(s);"),
        "{}",
        r.stdout
    );
}

/// What is broken, the file, the environment's overrides, --set's, the error line
/// (`FILE` for the file's path).
type Case = (
    &'static str,
    String,
    Vec<(&'static str, &'static str)>,
    Vec<&'static str>,
    String,
);

/// Broken configurations, each refused with exactly one line: where the value came
/// from (file, environment variable, --set), the key path, the value, what is allowed.
#[test]
fn every_error_is_one_line_with_where_the_key_the_value_and_what_is_allowed() {
    assert_not_local();
    let d = Dir::new("errors");
    let g = good(&d);
    let blocker = d.file("a-file", "");
    let token = d.file("token", "s3cret\n");
    // The environment's values live as long as the cases (static, as the others).
    let token: &'static str = String::leak(token.display().to_string());
    let cases: Vec<Case> = vec![
        (
            "nonexistent interface",
            xdp(&d).replace("n3_interface: lo", "n3_interface: upfd-nonesuch0"),
            vec![],
            vec![],
            format!(
                "FILE: datapath.n3_interface: \"upfd-nonesuch0\": no such network interface here; this network namespace has {}",
                interfaces_here()
            ),
        ),
        (
            "nonexistent interface from --set",
            xdp(&d),
            vec![],
            vec!["datapath.n6_interface=upfd-nonesuch1"],
            format!(
                "--set: datapath.n6_interface: \"upfd-nonesuch1\": no such network interface here; this network namespace has {}",
                interfaces_here()
            ),
        ),
        (
            "non-local N4 address",
            g.replace("  address: 127.0.0.7", &format!("  address: {NOT_HERE}")),
            vec![],
            vec![],
            format!("FILE: n4.address: {NOT_HERE}: not an address of this host: no interface in this network namespace has it (ip address)"),
        ),
        (
            "non-local API address from the environment",
            g.clone(),
            vec![
                ("UPFD_API__LISTEN", "203.0.113.77:9100"),
                ("UPFD_API__TOKEN_FILE", token),
            ],
            vec![],
            format!("environment UPFD_API__LISTEN: api.listen: {NOT_HERE}: not an address of this host: no interface in this network namespace has it (ip address)"),
        ),
        (
            "the API off loopback without a token file",
            g.clone(),
            vec![("UPFD_API__LISTEN", "0.0.0.0:9100")],
            vec![],
            "environment UPFD_API__LISTEN: api.listen: 0.0.0.0:9100 is not a loopback address and api.token_file is not set: the API shows every subscriber's sessions, UE addresses and TEIDs; set api.token_file to a file holding a bearer token, or listen on 127.0.0.1 (docs/security.md)".into(),
        ),
        (
            "non-local GTP-U address with the XDP data path",
            xdp(&d).replace("n3: { ipv4: 127.0.0.7 }", &format!("n3: {{ ipv4: {NOT_HERE} }}")),
            vec![],
            vec![],
            format!("FILE: gtpu.n3.ipv4: {NOT_HERE}: not an address of this host: no interface in this network namespace has it (ip address)"),
        ),
        (
            "state directory that cannot be created",
            g.clone(),
            vec![],
            vec![],
            String::new(), // filled in below: it names the file in the way
        ),
        (
            "duration without units from the environment",
            g.clone(),
            vec![("UPFD_N4__HEARTBEAT_INTERVAL", "10")],
            vec![],
            "environment UPFD_N4__HEARTBEAT_INTERVAL: n4.heartbeat_interval: 10: a duration needs units: 10s, 500ms, 2m".into(),
        ),
        (
            "port out of range from --set",
            g.clone(),
            vec![],
            vec!["n4.port=70000"],
            "--set: n4.port: 70000 is out of range: a UDP port, 1-65535".into(),
        ),
        (
            "unknown key from --set",
            g.clone(),
            vec![],
            vec!["n4.prot=8806"],
            "--set: n4.prot: unknown key: n4 has address, port, allowed_peers, associate_with, heartbeat_interval, t1, n1, response_cache_ttl, response_cache_max, graceful_release_period, strict, receive_buffer".into(),
        ),
        (
            "unknown key from the environment",
            g.clone(),
            vec![("UPFD_STATE__DIR", "/tmp")],
            vec![],
            "environment UPFD_STATE__DIR: state.dir: unknown key: state has directory, journal_limit, reuse_datapath, pin_directory".into(),
        ),
        (
            "malformed --set",
            g.clone(),
            vec![],
            vec!["n4.port"],
            "--set: \"n4.port\": expected KEY.PATH=VALUE, e.g. n4.heartbeat_interval=5s".into(),
        ),
        (
            "bad port in the file",
            g.replace("port: 8805", "port: -1"),
            vec![],
            vec![],
            "FILE:4: n4.port: -1 is out of range: a UDP port, 1-65535".into(),
        ),
        (
            "a list where a list is wanted",
            g.replace("  port: 8805\n", "  port: 8805\n  allowed_peers: 10.0.0.0/8\n"),
            vec![],
            vec![],
            "FILE:5: n4.allowed_peers: \"10.0.0.0/8\": expected a list of prefixes, e.g. [10.0.0.0/8]".into(),
        ),
        (
            "overlapping pools",
            g.replace(
                "ue_pools:\n",
                "ue_pools:\n  - { network_instance: ims, prefix: 10.45.3.0/24 }\n",
            ),
            vec![],
            vec![],
            "FILE: ue_pools[1].prefix: 10.45.0.0/16: overlaps ue_pools[0].prefix 10.45.3.0/24: UE pools must not overlap, in one network instance or across (the data path finds a session by its UE address alone)".into(),
        ),
        (
            "bad TEID range",
            g.clone(),
            vec![],
            vec!["gtpu.teid_range=[1, 1000]"],
            "--set: gtpu.teid_range: [1, 1000]: expected [min, max] with 1 <= min <= max <= 4294967295 and at least 1024 TEIDs (unpredictable ones)".into(),
        ),
        (
            "xdp without its interfaces",
            g.clone(),
            vec![("UPFD_DATAPATH__MODE", "xdp")],
            vec![],
            "FILE: datapath.n3_interface: missing: required with datapath.mode xdp, an interface name, e.g. eth1".into(),
        ),
        (
            "an application's URL that is not detected",
            format!(
                "{g}applications:\n  - id: video\n    domain_names: [video.example]\n  - id: chat\n    urls: [\"http://chat.example/\", \"ftp://chat.example/\"]\n"
            ),
            vec![],
            vec![],
            "FILE: applications[1].urls[1]: URL \"ftp://chat.example/\": only http:// and https:// are detected".into(),
        ),
        (
            "an unknown Domain Name Protocol",
            format!(
                "{g}applications:\n  - id: video\n    domain_names: [video.example, {{ name: cdn.example, protocol: QUIC }}]\n"
            ),
            vec![],
            vec![],
            "FILE: applications[0].domain_names[1]: \"cdn.example\": unknown Domain Name Protocol \"QUIC\"".into(),
        ),
        (
            "an application defined twice",
            format!("{g}applications:\n  - id: video\n  - id: video\n"),
            vec![],
            vec![],
            "FILE: applications[1].id: \"video\": defined twice (applications[0] too)".into(),
        ),
        (
            "a predefined rule naming an application that is not configured",
            format!(
                "{g}applications:\n  - id: chat\n  - id: local\npredefined_rules:\n  rules:\n    - {{ name: free-chat, application: chat }}\n    - {{ name: video-rate, application_id: video }}\n"
            ),
            vec![],
            vec![],
            "FILE: predefined_rules.rules[1].application: \"video\" is not among applications (configured: chat, local)".into(),
        ),
        (
            "applications_stop_after without units from the environment",
            g.clone(),
            vec![("UPFD_APPLICATIONS_STOP_AFTER", "10")],
            vec![],
            "environment UPFD_APPLICATIONS_STOP_AFTER: applications_stop_after: 10: a duration needs units: 10s, 500ms, 2m".into(),
        ),
        (
            "an MTU below IPv4's minimum",
            format!("{g}datapath:\n  n6_interface: lo\n  mtu: {{ n6: 40 }}\n"),
            vec![],
            vec![],
            "FILE: datapath.mtu.n6: 40 is out of range: an MTU in octets, 68-9216".into(),
        ),
        (
            "an MTU above the range from the environment",
            xdp(&d),
            vec![("UPFD_DATAPATH__MTU__N3", "9300")],
            vec![],
            "environment UPFD_DATAPATH__MTU__N3: datapath.mtu.n3: 9300 is out of range: an MTU in octets, 68-9216".into(),
        ),
        (
            "N9's MTU without an N9 interface",
            xdp(&d),
            vec![],
            vec!["datapath.mtu.n9=1400"],
            "--set: datapath.mtu.n9: 1400: needs datapath.n9_interface (without it N9 traffic goes by datapath.n3_interface: set datapath.mtu.n3)".into(),
        ),
        (
            "two MTUs for one interface",
            xdp(&d),
            vec![],
            vec!["datapath.mtu={ n3: 1500, n6: 1400 }"],
            "--set: datapath.mtu.n6: 1400: datapath.n6_interface and datapath.n3_interface are both \"lo\", and datapath.mtu.n3 is 1500: one MTU per interface".into(),
        ),
        (
            "ICMP errors with no burst",
            format!("{g}datapath:\n  icmp:\n    errors_per_sec: 100\n    burst: 0\n"),
            vec![],
            vec![],
            "FILE: datapath.icmp.burst: 0 is out of range: at least 1 (errors sent at once) while datapath.icmp.errors_per_sec is 100; errors_per_sec: 0 sends none".into(),
        ),
        (
            "an unknown key under icmp",
            format!("{g}datapath:\n  icmp:\n    rate: 100\n"),
            vec![],
            vec![],
            "FILE:14: datapath.icmp.rate: unknown key: datapath.icmp has source_ipv4, source_ipv6, errors_per_sec, burst, session_errors_per_sec, session_burst".into(),
        ),
    ];
    assert!(cases.len() >= 12);
    for (what, text, env, set, want) in cases {
        let f = d.file("upfd.yaml", &text);
        let (set, want) = if want.is_empty() {
            let bad = blocker.join("state");
            let s = format!("state.directory={}", bad.display());
            let w = format!(
                "--set: state.directory: {:?}: expected a directory: {} is not one",
                bad,
                blocker.display()
            );
            (vec![s], w)
        } else {
            (
                set.iter().map(|s| s.to_string()).collect(),
                want.replace("FILE", &f.display().to_string()),
            )
        };
        let set: Vec<&str> = set.iter().map(String::as_str).collect();
        let r = check_config(&f, &env, &set);
        assert_eq!(r.code, Some(1), "{what}: {}", r.stdout);
        assert_eq!(r.stderr, format!("{want}\n"), "{what}");
        assert_eq!(r.stdout, "", "{what}");
    }
}

#[test]
fn applications_with_their_pfds_are_valid() {
    let d = Dir::new("applications");
    let text = format!(
        "{}applications:\n  - id: video\n    flow_descriptions: [\"permit out 17 from 192.0.2.0/24 to assigned\"]\n    urls: [\"http://video.example/live\", \"https://secure.video.example\"]\n    domain_names: [video.example, {{ name: cdn.example, protocol: TLS_SNI }}]\n  - id: empty\napplications_stop_after: 30s\n",
        good(&d)
    );
    let f = d.file("upfd.yaml", &text);
    let r = check_config(&f, &[], &[]);
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""));
    // A predefined rule may name one of them.
    let text = format!(
        "{text}predefined_rules:\n  fars:\n    - {{ id: 1, action: drop }}\n  rules:\n    - {{ name: no-video, far: 1, application: video }}\n"
    );
    let f = d.file("upfd.yaml", &text);
    let r = check_config(&f, &[], &[]);
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""));
}

/// ICMP errors for packets that do not fit and MTUs per interface, on the XDP data path
/// (N3 and N6 both on lo: one interface, one MTU).
#[test]
fn icmp_and_mtu_sections_are_valid() {
    let d = Dir::new("icmp-mtu");
    let text = format!(
        "{}datapath:\n  mode: xdp\n  n3_interface: lo\n  n6_interface: lo\n  icmp:\n    source_ipv4: 192.0.2.1\n    source_ipv6: \"2001:db8::1\"\n    errors_per_sec: 100\n    burst: 10\n    session_errors_per_sec: 200\n    session_burst: 20\n  mtu:\n    n3: 1500\n    n6: 1500\n",
        good(&d)
    );
    let f = d.file("upfd.yaml", &text);
    let r = check_config(&f, &[], &[]);
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""));
    // None at all, with no burst; the limits of the MTU's range.
    let r = check_config(
        &f,
        &[("UPFD_DATAPATH__ICMP", "{ errors_per_sec: 0, burst: 0 }")],
        &["datapath.mtu={ n3: 9216, n6: 9216 }"],
    );
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""));
    let r = check_config(&f, &[], &["datapath.mtu={ n6: 68 }"]);
    assert_eq!((r.code, r.stderr.as_str()), (Some(0), ""));
}

#[test]
fn every_host_error_is_said_once() {
    assert_not_local();
    let d = Dir::new("twice");
    let f = d.file(
        "upfd.yaml",
        &good(&d).replace("  address: 127.0.0.7", &format!("  address: {NOT_HERE}")),
    );
    let r = check_config(
        &f,
        &[
            ("UPFD_API__LISTEN", "203.0.113.77:9100"),
            ("UPFD_API__TOKEN_FILE", "/run/upfd/token"),
        ],
        &[],
    );
    assert_eq!(r.code, Some(1));
    let why =
        "not an address of this host: no interface in this network namespace has it (ip address)";
    assert_eq!(
        r.stderr,
        format!(
            "{}: n4.address: {NOT_HERE}: {why}\nenvironment UPFD_API__LISTEN: api.listen: {NOT_HERE}: {why}\n\
             environment UPFD_API__TOKEN_FILE: api.token_file: /run/upfd/token: cannot read it: No such file or directory (os error 2)\n",
            f.display()
        )
    );
}

/// The API's files are read as the start reads them: a token file that is missing or
/// empty (a Secret not mounted), a certificate file with no certificate, each named with
/// its key and path; with good ones the output says they were checked.
#[test]
fn the_api_files_are_read_as_the_start_reads_them() {
    let d = Dir::new("apifiles");
    let token = d.0.join("token");
    let api = |extra: &str| {
        format!(
            "{}api:\n  listen: \"127.0.0.7:9100\"\n  token_file: {}\n{extra}",
            good(&d),
            token.display()
        )
    };
    let f = d.file("upfd.yaml", &api(""));
    let r = check_config(&f, &[], &[]);
    assert_eq!(
        (r.code, r.stderr),
        (
            Some(1),
            format!(
                "{}: api.token_file: {}: cannot read it: No such file or directory (os error 2)\n",
                f.display(),
                token.display()
            )
        )
    );
    std::fs::write(&token, "  \n").unwrap();
    let r = check_config(&f, &[], &[]);
    assert_eq!(r.code, Some(1));
    assert!(
        r.stderr.starts_with(&format!(
            "{}: api.token_file: {}: empty (it holds the bearer token",
            f.display(),
            token.display()
        )),
        "{}",
        r.stderr
    );
    std::fs::write(&token, "s3cret\n").unwrap();
    let r = check_config(&f, &[], &[]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout
            .contains("checked on this host: addresses, state directory, API files)"),
        "{}",
        r.stdout
    );
    let cert = d.file("api.crt", "not a certificate\n");
    let key = d.file("api.key", "not a key\n");
    let f = d.file(
        "tls.yaml",
        &api(&format!(
            "  tls_cert_file: {}\n  tls_key_file: {}\n",
            cert.display(),
            key.display()
        )),
    );
    let r = check_config(&f, &[], &[]);
    assert_eq!(
        (r.code, r.stderr),
        (
            Some(1),
            format!(
                "{}: api.tls_cert_file: {}: no certificate in it\n",
                f.display(),
                cert.display()
            )
        )
    );
}

#[test]
fn flags_win_over_the_environment_which_wins_over_the_file() {
    let d = Dir::new("order");
    let f = d.file("upfd.yaml", &good(&d));
    // The environment's bad value is replaced by the flag's good one.
    let r = check_config(&f, &[("UPFD_N4__PORT", "70000")], &["n4.port=8806"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout
            .contains("N4 127.0.0.7:8806, 1 UE pool(s), 2 override(s);"),
        "{}",
        r.stdout
    );
    // The environment's good value replaces the file's bad one.
    let f = d.file("bad.yaml", &good(&d).replace("port: 8805", "port: 0"));
    let r = check_config(
        &f,
        &[
            ("UPFD_N4__PORT", "8807"),
            ("UPFD_N4__ALLOWED_PEERS", "[10.0.0.0/8]"),
        ],
        &[],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("N4 127.0.0.7:8807"), "{}", r.stdout);
}

#[test]
fn the_start_refuses_what_check_config_refuses_with_the_same_line() {
    assert_not_local();
    let d = Dir::new("start");
    for text in [
        xdp(&d).replace("n3_interface: lo", "n3_interface: upfd-nonesuch0"),
        good(&d).replace("  address: 127.0.0.7", &format!("  address: {NOT_HERE}")),
    ] {
        let f = d.file("upfd.yaml", &text);
        let checked = check_config(&f, &[], &[]);
        assert_eq!(checked.code, Some(1));
        let started = upfd(&["--config", f.to_str().unwrap()], &[]);
        assert_eq!(started.code, Some(1), "{}", started.stderr);
        assert_eq!(started.stderr, checked.stderr);
    }
    // --set works for the start as for check-config.
    let f = d.file("upfd.yaml", &good(&d));
    let started = upfd(
        &["--config", f.to_str().unwrap(), "--set", "n4.port=70000"],
        &[],
    );
    assert_eq!(
        (started.code, started.stderr.as_str()),
        (
            Some(1),
            "--set: n4.port: 70000 is out of range: a UDP port, 1-65535\n"
        )
    );
}

/// Kubernetes gives a pod `<SERVICE>_SERVICE_HOST` and the like for every Service of its
/// namespace (service links): for the chart's `upfd-n4` and `upfd-api` Services those
/// begin with `UPFD_`. They are no overrides: said once, and the file is read as it is.
#[test]
fn kubernetes_service_variables_are_not_taken_for_overrides() {
    let d = Dir::new("svc");
    let f = d.file("upfd.yaml", &good(&d));
    let r = check_config(
        &f,
        &[
            ("UPFD_N4_SERVICE_HOST", "10.96.0.12"),
            ("UPFD_API_PORT", "tcp://10.96.0.13:9100"),
            ("UPFD_N4__HEARTBEAT_INTERVAL", "5s"),
        ],
        &[],
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("1 override(s)"), "{}", r.stdout);
    assert_eq!(
        r.stderr.lines().count(),
        1,
        "one line for the variables not read: {}",
        r.stderr
    );
    assert!(
        r.stderr
            .starts_with("environment: UPFD_API_PORT, UPFD_N4_SERVICE_HOST not read:"),
        "{}",
        r.stderr
    );
}
