//! upfd's HTTP API as a client meets it (issue 29): HTTP/1.1 keep-alive and pipelining,
//! a head too large answered 431 and closed, a request that does not arrive in time
//! closed, the connection limit (the probe listener answers while the main one is full),
//! the bearer token of the subscriber routes, one method and no bodies, the OpenAPI
//! document listing exactly the routes served, and every answer served valid against
//! the schema the document gives for it. upfd runs on loopback without a data path
//! (`datapath.mode: none`): no root needed.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use common::{free_tcp_port, TempDir, Upfd, UpfdBuilder, PATIENCE};
use serde_json::Value;
use upfbench::smf::{AppRule, Pace, Smf, SmfConfig};

const UPF: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 7);
const SMF: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 8);
const TOKEN: &str = "t0ken-of-the-api-test";

/// upfd with its API on a free port and `api` keys besides `listen`; the API's address.
struct Api {
    upfd: Upfd,
    addr: SocketAddr,
    probe: Option<SocketAddr>,
    token_file: std::path::PathBuf,
    _dir: TempDir,
}

fn start(keys: &str, with_token: bool, with_probe: bool) -> Api {
    start_with(Upfd::builder(), keys, with_token, with_probe)
}

/// [`start`] with upfd's configuration from `builder`.
fn start_with(builder: UpfdBuilder, keys: &str, with_token: bool, with_probe: bool) -> Api {
    let dir = TempDir::new("upfd-api");
    let token_file = dir.0.join("token");
    // A Secret's file often ends in a newline: upfd takes the token without it.
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let addr = SocketAddr::new(IpAddr::V4(UPF), free_tcp_port());
    let probe = with_probe.then(|| SocketAddr::new(IpAddr::V4(UPF), free_tcp_port()));
    let mut y = format!("api:\n  listen: \"{addr}\"\n");
    if with_token {
        y += &format!("  token_file: {:?}\n", token_file);
    }
    if let Some(p) = probe {
        y += &format!("  probe_address: \"{p}\"\n");
    }
    y += keys;
    let upfd = builder.extra_yaml(&y).start();
    Api {
        upfd,
        addr,
        probe,
        token_file,
        _dir: dir,
    }
}

fn connect(a: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&a, PATIENCE).expect("connecting to the API");
    s.set_read_timeout(Some(PATIENCE)).unwrap();
    s.set_write_timeout(Some(PATIENCE)).unwrap();
    s
}

/// One answer: status, headers (names lower case), body.
#[derive(Debug)]
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Read one answer (its body by Content-Length), leaving the connection open; None if
/// the connection closed (or was reset) before a status line came.
fn read_answer(r: &mut BufReader<TcpStream>) -> Option<Answer> {
    let mut line = String::new();
    match r.read_line(&mut line) {
        Ok(0) => return None,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
        Err(e) => panic!("reading a status line: {e}"),
        Ok(_) => {}
    }
    let status: u16 = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {line:?}"));
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).expect("reading a header");
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (n, v) = h.split_once(':').expect("a header line");
        headers.push((n.to_ascii_lowercase(), v.trim().to_string()));
    }
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .map(|(_, v)| v.parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).expect("reading the body");
    Some(Answer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Whether the server closed `s`: the next read ends (EOF or reset) within PATIENCE
/// instead of timing out.
fn closed(s: &mut TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // what was left of an answer
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false, // timed out: still open
        }
    }
}

/// GET `path` on a connection of its own (closed after), with `auth` as the
/// Authorization header if given.
fn get(a: SocketAddr, path: &str, auth: Option<&str>) -> Answer {
    let mut s = connect(a);
    let auth = auth
        .map(|v| format!("Authorization: {v}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: upfd\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    read_answer(&mut BufReader::new(s)).unwrap_or_else(|| panic!("GET {path}: closed"))
}

fn bearer() -> String {
    format!("Bearer {TOKEN}")
}

/// The SMF emulator associated with `api`'s upfd, its UE addresses from `pool` (as
/// upfd's), its configuration edited by `edit`; with the runtime it runs on.
fn associated_smf(
    api: &Api,
    pool: &str,
    edit: impl FnOnce(&mut SmfConfig),
) -> (tokio::runtime::Runtime, Smf) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut cfg = SmfConfig::new(api.upfd.n4);
    cfg.bind = SocketAddr::new(SMF.into(), 0);
    cfg.ue_pool = pool.parse().unwrap();
    cfg.timers.t1 = Duration::from_secs(5);
    edit(&mut cfg);
    let mut smf = rt.block_on(Smf::connect(cfg)).expect("SMF socket");
    assert_eq!(rt.block_on(smf.associate()).accepted, 1);
    (rt, smf)
}

/// The served OpenAPI document.
fn document(a: SocketAddr) -> Value {
    let doc = get(a, "/openapi.json", None);
    assert_eq!(doc.status, 200, "{doc:?}");
    serde_json::from_str(&doc.body).expect("JSON")
}

/// The served OpenAPI document's paths, and those it marks as needing the token.
fn documented(a: SocketAddr) -> (BTreeSet<String>, BTreeSet<String>) {
    let v = document(a);
    let paths = v["paths"].as_object().expect("paths");
    let all = paths.keys().cloned().collect();
    let secured = paths
        .iter()
        .filter(|(_, p)| p["get"]["security"].is_array())
        .map(|(k, _)| k.clone())
        .collect();
    (all, secured)
}

/// A documented path as a request (its `{seid}` a SEID no session has).
fn concrete(path: &str) -> String {
    path.replace("{seid}", "0x1")
}

#[test]
fn keep_alive_serves_requests_one_after_another_and_pipelined_on_one_connection() {
    let api = start("", false, false);
    let s = connect(api.addr);
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    for path in ["/healthz", "/api/v1/status"] {
        write!(w, "GET {path} HTTP/1.1\r\nHost: upfd\r\n\r\n").unwrap();
        let a = read_answer(&mut r).unwrap_or_else(|| panic!("{path}: closed"));
        assert_eq!(a.status, 200, "{path}: {a:?}");
    }
    // Two requests in one write: two answers, in order.
    w.write_all(
        b"GET /readyz HTTP/1.1\r\nHost: upfd\r\n\r\nGET /api/v1/associations HTTP/1.1\r\nHost: upfd\r\n\r\n",
    )
    .unwrap();
    let first = read_answer(&mut r).expect("the first answer");
    let second = read_answer(&mut r).expect("the second answer");
    assert_eq!(first.status, 200);
    assert!(first.body.contains("\"ready\":true"), "{first:?}");
    assert_eq!(second.status, 200);
    assert_eq!(second.body.trim(), "[]", "{second:?}");
    // HEAD: the head alone, with the body's length.
    write!(w, "HEAD /healthz HTTP/1.1\r\nHost: upfd\r\n\r\n").unwrap();
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    // The connections are served by a thread of their own, not by the event loop's.
    let threads: Vec<String> = std::fs::read_dir(format!("/proc/{}/task", api.upfd.pid()))
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .map(|c| c.trim().to_string())
        .collect();
    assert!(threads.iter().any(|t| t == "upfd-api"), "{threads:?}");
    drop(api.upfd);
}

#[test]
fn a_head_too_large_is_answered_431_and_closed() {
    let api = start("", false, false);
    // Larger than the 8 KiB a head may have, all of it read by upfd: 431, then closed.
    let mut s = connect(api.addr);
    let big = "a".repeat(12 * 1024);
    write!(
        s,
        "GET /healthz HTTP/1.1\r\nHost: upfd\r\nX-Big: {big}\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let a = read_answer(&mut r).expect("an answer before the close");
    assert_eq!(a.status, 431, "{a:?}");
    assert!(closed(&mut s), "still open after 431");
    // A 1 MiB header: closed, whatever upfd had read of it (431 if the client can
    // still read it, else a reset).
    let mut s = connect(api.addr);
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || {
        let big = "b".repeat(1 << 20);
        let _ = write!(
            w,
            "GET /healthz HTTP/1.1\r\nHost: upfd\r\nX-Big: {big}\r\n\r\n"
        );
    });
    let mut head = [0u8; 12];
    let n = s.read(&mut head).unwrap_or(0);
    assert!(
        n == 0 || head[..n].starts_with(b"HTTP/1.1 431"),
        "{:?}",
        String::from_utf8_lossy(&head[..n])
    );
    assert!(closed(&mut s), "a 1 MiB header left the connection open");
    writer.join().unwrap();
    // upfd answers the next client.
    assert_eq!(get(api.addr, "/healthz", None).status, 200);
}

#[test]
fn a_request_that_does_not_arrive_within_request_timeout_is_closed() {
    let api = start("  request_timeout: 1s\n", false, false);
    // Half a head, never finished (slow-loris).
    let s = connect(api.addr);
    let mut w = s.try_clone().unwrap();
    w.write_all(b"GET /healthz HTTP/1.1\r\nHost: upf").unwrap();
    let a = read_answer(&mut BufReader::new(s));
    assert!(a.is_none(), "a half request was answered: {a:?}");
    // A connection that never sends anything, and one idle after an answer (keep-alive).
    let mut silent = connect(api.addr);
    assert!(closed(&mut silent), "a silent connection stayed open");
    let idle = connect(api.addr);
    let mut w = idle.try_clone().unwrap();
    let mut r = BufReader::new(idle);
    write!(w, "GET /healthz HTTP/1.1\r\nHost: upfd\r\n\r\n").unwrap();
    assert_eq!(read_answer(&mut r).map(|a| a.status), Some(200));
    assert!(
        read_answer(&mut r).is_none(),
        "an idle connection stayed open"
    );
    drop(api.upfd);
}

#[test]
fn probes_and_metrics_answer_on_their_listener_while_the_main_one_is_full() {
    // Slow clients hold the main listener's 4 places for as long as the test needs.
    let api = start(
        "  max_connections: 4\n  request_timeout: 120s\n",
        true,
        true,
    );
    let probe = api.probe.unwrap();
    let slow: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = connect(api.addr);
            s.write_all(b"GET /healthz HTTP/1.1\r\nHo").unwrap();
            s
        })
        .collect();
    // A fifth is closed without an answer (accepted after the four, which hold).
    let mut fifth = connect(api.addr);
    let _ = fifth.write_all(b"GET /healthz HTTP/1.1\r\nHost: upfd\r\n\r\n");
    assert!(
        read_answer(&mut BufReader::new(fifth.try_clone().unwrap())).is_none(),
        "the main listener answered past its limit"
    );
    for path in ["/healthz", "/readyz", "/metrics"] {
        let a = get(probe, path, None);
        assert_eq!(a.status, 200, "{path} on the probe listener: {a:?}");
    }
    let m = get(probe, "/metrics", None);
    assert!(m.body.contains("upf_sessions "), "{:.300}", m.body);
    // Only those: no subscriber data there, token or not.
    for path in ["/api/v1/sessions", "/check", "/openapi.json", "/status"] {
        let a = get(probe, path, Some(&bearer()));
        assert_eq!(a.status, 404, "{path} on the probe listener: {a:?}");
    }
    // The slow clients gone, the main listener answers again.
    drop(slow);
    drop(fifth);
    let end = std::time::Instant::now() + PATIENCE;
    loop {
        let mut s = connect(api.addr);
        let _ = s.write_all(b"GET /healthz HTTP/1.1\r\nHost: upfd\r\nConnection: close\r\n\r\n");
        if let Some(a) = read_answer(&mut BufReader::new(s)) {
            assert_eq!(a.status, 200);
            break;
        }
        assert!(
            std::time::Instant::now() < end,
            "the places were not given back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn without_the_token_every_subscriber_route_answers_401_and_the_probes_answer() {
    let api = start("", true, false);
    let (all, secured) = documented(api.addr);
    let doc = document(api.addr);
    let open: BTreeSet<String> = ["/healthz", "/readyz", "/metrics", "/openapi.json"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        all.difference(&secured).cloned().collect::<BTreeSet<_>>(),
        open,
        "the open routes"
    );
    for path in &secured {
        for auth in [
            None,
            Some("Bearer wrong"),
            Some(TOKEN),
            Some("Basic dXNlcjpwdw=="),
        ] {
            let a = get(api.addr, &concrete(path), auth);
            assert_eq!(a.status, 401, "{path} with {auth:?}: {a:?}");
            assert_eq!(a.header("www-authenticate"), Some("Bearer"), "{path}");
            assert!(a.body.contains("api.token_file"), "{path}: {}", a.body);
            assert_as_documented(&doc, path, &a);
        }
        let a = get(api.addr, &concrete(path), Some(&bearer()));
        let want = if path.contains("{seid}") { 404 } else { 200 };
        assert_eq!(a.status, want, "{path} with the token: {a:?}");
    }
    for path in &open {
        assert_eq!(get(api.addr, path, None).status, 200, "{path}");
    }
    // upfctl with the token file, and without a token.
    let f = api.token_file.to_str().unwrap();
    let addr = api.addr.to_string();
    let o = upfctl::execute(["upfctl", "--api", &addr, "--token-file", f, "status"]);
    assert_eq!(o.code, 0, "{o:?}");
    assert!(o.stdout.contains("ready: true"), "{o:?}");
    let o = upfctl::execute(["upfctl", "--api", &addr, "applications"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(
        o.stderr.contains("HTTP 401") && o.stderr.contains("UPFCTL_TOKEN"),
        "{o:?}"
    );
    let o = upfctl::execute(["upfctl", "--api", &addr, "--token-file", f, "applications"]);
    assert_eq!(
        (o.code, o.stdout.as_str()),
        (0, "no applications\n"),
        "{o:?}"
    );
}

#[test]
fn one_method_no_bodies() {
    let api = start("", false, false);
    for m in ["POST", "PUT", "DELETE", "OPTIONS"] {
        let mut s = connect(api.addr);
        write!(
            s,
            "{m} /api/v1/sessions HTTP/1.1\r\nHost: upfd\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let a = read_answer(&mut BufReader::new(s)).expect("an answer");
        assert_eq!(a.status, 405, "{m}: {a:?}");
        assert_eq!(a.header("allow"), Some("GET, HEAD"));
    }
    // A body, declared by length or chunked: 413, and the connection closes (what
    // follows is not taken as a request of its own: no smuggling).
    for framing in ["Content-Length: 5", "Transfer-Encoding: chunked"] {
        let mut s = connect(api.addr);
        let body = if framing.starts_with("Content") {
            "hello"
        } else {
            "5\r\nhello\r\n0\r\n\r\n"
        };
        write!(
            s,
            "GET /healthz HTTP/1.1\r\nHost: upfd\r\n{framing}\r\n\r\n{body}GET /healthz HTTP/1.1\r\nHost: upfd\r\n\r\n"
        )
        .unwrap();
        let mut r = BufReader::new(s.try_clone().unwrap());
        let a = read_answer(&mut r).expect("an answer");
        assert_eq!(a.status, 413, "{framing}: {a:?}");
        assert!(read_answer(&mut r).is_none(), "{framing}: a second answer");
    }
    // Both framings at once (a smuggling attempt): refused, and what follows is not
    // answered as a request of its own.
    let mut s = connect(api.addr);
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: upfd\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /api/v1/status HTTP/1.1\r\nHost: upfd\r\n\r\n").unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let a = read_answer(&mut r);
    assert!(
        a.as_ref()
            .is_none_or(|a| a.status == 400 || a.status == 413),
        "{a:?}"
    );
    assert!(read_answer(&mut r).is_none(), "a second answer");
}

#[test]
fn the_openapi_document_lists_exactly_the_routes_served() {
    let api = start("", false, false);
    let (all, _) = documented(api.addr);
    let no_route = |a: &Answer| a.status == 404 && a.body.contains("no route");
    for path in &all {
        let a = get(api.addr, &concrete(path), None);
        assert!(!no_route(&a), "{path} is documented but not served: {a:?}");
    }
    // Paths near the served ones, and those of the first API: not served, and not
    // documented.
    for path in [
        "/",
        "/api",
        "/api/v1",
        "/api/v1/session",
        "/api/v1/sessions/0x1/pdrs",
        "/api/v1/pfds",
        "/api/v2/status",
        "/openapi.yaml",
        "/debug",
        "/healthz/x",
    ] {
        assert!(!all.contains(path));
        let a = get(api.addr, path, None);
        assert!(no_route(&a), "{path} is served but not documented: {a:?}");
    }
    assert_eq!(all.len(), 13, "{all:?}");
}

/// With `api.tls_cert_file` and `api.tls_key_file` the main listener speaks TLS alone:
/// upfctl over https:// trusting the certificate (`--ca-file`) and with the token gets
/// the status; without `--ca-file` it refuses the unknown certificate and says so; a
/// plain HTTP request to it gets no HTTP answer; the probe listener stays plain. The
/// certificate is made by `openssl` (scripts/deps.sh installs it) for 127.0.0.7.
#[test]
fn tls_on_the_main_listener_with_upfctl_trusting_its_certificate() {
    let dir = TempDir::new("upfd-api-tls");
    let (cert, key) = (dir.0.join("api.crt"), dir.0.join("api.key"));
    let out = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "2", "-subj", "/CN=upfd-api-test"])
        .args(["-addext", &format!("subjectAltName=IP:{UPF}")])
        // A server's own certificate, not a CA's (webpki refuses a CA as end entity).
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-addext", "extendedKeyUsage=serverAuth"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (apt install openssl)");
    assert!(out.status.success(), "openssl: {out:?}");
    let api = start(
        &format!("  tls_cert_file: {cert:?}\n  tls_key_file: {key:?}\n"),
        true,
        true,
    );
    let url = format!("https://{}", api.addr);
    let token = api.token_file.to_string_lossy().into_owned();
    let ca = cert.to_string_lossy().into_owned();
    let o = upfctl::execute([
        "upfctl",
        "--api",
        &url,
        "--token-file",
        &token,
        "--ca-file",
        &ca,
        "--json",
        "status",
    ]);
    assert_eq!(
        o.code,
        0,
        "upfctl over TLS: {o:?}\n{}",
        api.upfd.log_tail(20)
    );
    assert!(o.stdout.contains("recovery_time_stamp"), "{}", o.stdout);
    // The certificate is nobody's the public roots know.
    let o = upfctl::execute(["upfctl", "--api", &url, "--token-file", &token, "status"]);
    assert_ne!(o.code, 0, "an unknown certificate must be refused: {o:?}");
    assert!(
        o.stderr.to_lowercase().contains("certificate"),
        "{}",
        o.stderr
    );
    // Plain HTTP to the TLS listener: no HTTP answer.
    let mut s = connect(api.addr);
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut r = BufReader::new(s);
    let mut first = String::new();
    let _ = r.read_line(&mut first);
    assert!(
        !first.starts_with("HTTP/1."),
        "plain HTTP answered on the TLS port: {first:?}"
    );
    // The probes stay plain on their own listener.
    assert_eq!(get(api.probe.unwrap(), "/healthz", None).status, 200);
}

/// Whether `v` is valid against `schema`, a schema of the OpenAPI document `doc` (whose
/// `$ref`s name `#/components/schemas/...`): the part of OpenAPI 3.0's JSON Schema that
/// the document uses (type, properties, required, additionalProperties, items,
/// minItems, maxItems, minimum, maximum, enum, nullable, $ref, allOf, anyOf, oneOf),
/// read strictly so that the document has to describe every field an answer has: an
/// object may have only the fields its schema lists (or that `additionalProperties`
/// allows), a schema must say what its values are, and null is valid only where the
/// schema says `nullable`. Err says where `v` differs, as a path from `at`.
fn valid(doc: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let Some(s) = schema.as_object() else {
        return Err(format!("{at}: the schema {schema} is not an object"));
    };
    if let Some(r) = s.get("$ref") {
        let name = r
            .as_str()
            .and_then(|r| r.strip_prefix("#/components/schemas/"))
            .ok_or_else(|| format!("{at}: $ref {r}"))?;
        let target = doc["components"]["schemas"]
            .get(name)
            .ok_or_else(|| format!("{at}: no component {name}"))?;
        return valid(doc, target, v, at);
    }
    if v.is_null() && s.get("nullable") == Some(&Value::Bool(true)) {
        return Ok(());
    }
    let mut says = false;
    if let Some(all) = s.get("allOf").and_then(Value::as_array) {
        says = true;
        for x in all {
            valid(doc, x, v, at)?;
        }
    }
    for k in ["anyOf", "oneOf"] {
        if let Some(alternatives) = s.get(k).and_then(Value::as_array) {
            says = true;
            let errors: Vec<String> = alternatives
                .iter()
                .filter_map(|x| valid(doc, x, v, at).err())
                .collect();
            let held = alternatives.len() - errors.len();
            if held == 0 || (k == "oneOf" && held > 1) {
                return Err(format!(
                    "{at}: {held} of the {k} alternatives hold ({})",
                    errors.join("; ")
                ));
            }
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        says = true;
        if !e.contains(v) {
            return Err(format!("{at}: {v} is not one of {e:?}"));
        }
    }
    if let Some(t) = s.get("type") {
        says = true;
        let is = match t.as_str() {
            Some("boolean") => v.is_boolean(),
            Some("integer") => v.is_i64() || v.is_u64(),
            Some("number") => v.is_number(),
            Some("string") => v.is_string(),
            Some("array") => v.is_array(),
            Some("object") => v.is_object(),
            _ => return Err(format!("{at}: a type this check does not know: {t}")),
        };
        if !is {
            let null = if v.is_null() {
                " (and not nullable)"
            } else {
                ""
            };
            return Err(format!("{at}: {v} is not of type {t}{null}"));
        }
    }
    if !says {
        return Err(format!(
            "{at}: the schema {schema} says nothing of its values"
        ));
    }
    if let Some(x) = v.as_f64() {
        let bound = |k: &str| s.get(k).and_then(Value::as_f64);
        if bound("minimum").is_some_and(|m| x < m) || bound("maximum").is_some_and(|m| x > m) {
            return Err(format!("{at}: {v} is out of the schema's range"));
        }
    }
    if let Some(items) = v
        .as_array()
        .filter(|_| s.get("type") == Some(&"array".into()))
    {
        let count = |k: &str| s.get(k).and_then(Value::as_u64);
        let n = items.len() as u64;
        if count("minItems").is_some_and(|m| n < m) || count("maxItems").is_some_and(|m| n > m) {
            return Err(format!("{at}: {n} items, not as many as the schema says"));
        }
        if let Some(item) = s.get("items") {
            for (i, x) in items.iter().enumerate() {
                valid(doc, item, x, &format!("{at}[{i}]"))?;
            }
        }
    }
    // An object's fields are checked where its schema describes an object (not where it
    // only lists alternatives, each checked above).
    if let Some(fields) = v
        .as_object()
        .filter(|_| s.get("type") == Some(&"object".into()))
    {
        let properties = s.get("properties").and_then(Value::as_object);
        for r in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap_or_default();
            if !fields.contains_key(r) {
                return Err(format!("{at}: the required field {r} is missing"));
            }
        }
        for (k, x) in fields {
            let here = format!("{at}.{k}");
            match (
                properties.and_then(|p| p.get(k)),
                s.get("additionalProperties"),
            ) {
                (Some(p), _) => valid(doc, p, x, &here)?,
                (None, Some(Value::Bool(true))) => {}
                (None, Some(p @ Value::Object(_))) => valid(doc, p, x, &here)?,
                (None, _) => return Err(format!("{here}: a field the schema does not have")),
            }
        }
    }
    Ok(())
}

/// Assert that answer `a` to a request for route `route` is as the document `doc` says
/// for its status and content type.
fn assert_as_documented(doc: &Value, route: &str, a: &Answer) {
    let content_type = a
        .header("content-type")
        .and_then(|t| t.split(';').next())
        .unwrap_or_default()
        .trim();
    let documented = &doc["paths"][route]["get"]["responses"][a.status.to_string()];
    let schema = &documented["content"][content_type]["schema"];
    assert!(
        schema.is_object(),
        "{route}: the document has no {} {content_type} answer: {documented}",
        a.status
    );
    let body = if content_type == "application/json" {
        serde_json::from_str(&a.body).expect("JSON")
    } else {
        Value::String(a.body.clone())
    };
    if let Err(e) = valid(doc, schema, &body, "answer") {
        panic!(
            "{route} answered {} not as the document says: {e}\n{}",
            a.status, a.body
        );
    }
}

/// Applications for upfd's configuration: the SMF emulator's PDRs name `video`.
const APPLICATIONS: &str = r#"applications:
  - id: video
    domain_names: [video.example, { name: cdn.example, protocol: TLS_SNI }]
    urls: ["http://video.example/live"]
  - id: voip
    flow_descriptions: ["permit out 17 from 198.51.100.0/24 to assigned"]
"#;

/// Every route's answers as upfd serves them are valid against the schema the served
/// OpenAPI document gives for that route and status (the answers and the document are
/// built from the same types, answers.rs; this holds them to it): sessions the SMF
/// emulator established (with an SDF filter, an APN/DNN and an application's own PDRs,
/// QER and URR) as a page, looked up and whole, the 400s and the 404, the configured
/// applications, and the rest as upfd without a data path answers them.
#[test]
fn every_answer_served_is_valid_against_the_document_for_its_route_and_status() {
    let builder = Upfd::builder()
        .ue_pool("", "10.71.0.0/16")
        .extra_yaml(APPLICATIONS);
    let api = start_with(builder, "", false, false);
    let (rt, mut smf) = associated_smf(&api, "10.71.0.0/16", |cfg| {
        cfg.sdf_filter = Some("permit out ip from any to assigned".into());
        cfg.applications = vec![AppRule {
            id: "video".into(),
            gate_closed: false,
            mbr_kbps: Some(2000),
            start: true,
        }];
    });
    let r = rt.block_on(smf.establish(3, Pace::default()));
    assert_eq!(r.accepted, 3, "{r:?}");

    let doc = document(api.addr);
    let page: Value = serde_json::from_str(&get(api.addr, "/api/v1/sessions", None).body).unwrap();
    let first = &page["sessions"][0];
    let seid = first["seid"].as_str().expect("a SEID").to_string();
    let teid = first["teids"][0].as_u64().expect("a TEID");
    let ue = first["ue_addresses"][0]
        .as_str()
        .expect("a UE address")
        .to_string();
    let sessions = "/api/v1/sessions";
    let one = "/api/v1/sessions/{seid}";
    let requests: Vec<(&str, String, u16)> = vec![
        ("/healthz", "/healthz".into(), 200),
        ("/readyz", "/readyz".into(), 200),
        ("/metrics", "/metrics".into(), 200),
        ("/openapi.json", "/openapi.json".into(), 200),
        ("/status", "/status".into(), 200),
        ("/check", "/check".into(), 200),
        ("/api/v1/status", "/api/v1/status".into(), 200),
        ("/api/v1/associations", "/api/v1/associations".into(), 200),
        (sessions, sessions.into(), 200),
        (sessions, format!("{sessions}?limit=1"), 200),
        (sessions, format!("{sessions}?limit=1&after={seid}"), 200),
        (sessions, format!("{sessions}?seid={seid}"), 200),
        (sessions, format!("{sessions}?teid={teid}"), 200),
        (sessions, format!("{sessions}?ue={ue}"), 200),
        (sessions, format!("{sessions}?seid=0x1"), 200),
        (sessions, format!("{sessions}?seid=x"), 400),
        (sessions, format!("{sessions}?limit=0"), 400),
        (one, format!("{sessions}/{seid}"), 200),
        (one, format!("{sessions}/0x1"), 404),
        (one, format!("{sessions}/zz"), 400),
        ("/api/v1/stats", "/api/v1/stats".into(), 200),
        ("/api/v1/buffers", "/api/v1/buffers".into(), 200),
        ("/api/v1/applications", "/api/v1/applications".into(), 200),
    ];
    let mut asked = BTreeSet::new();
    for (route, target, status) in &requests {
        let a = get(api.addr, target, None);
        assert_eq!(a.status, *status, "{target}: {a:?}");
        assert_as_documented(&doc, route, &a);
        asked.insert(route.to_string());
    }
    let (all, _) = documented(api.addr);
    assert_eq!(asked, all, "every documented route is asked");

    // What the emulator installed is there, so the schemas of those values were used.
    let s: Value =
        serde_json::from_str(&get(api.addr, &format!("{sessions}/{seid}"), None).body).unwrap();
    let pdr = &s["pdrs"][0];
    assert!(pdr["sdf_filters"][0]["flow_description"].is_string(), "{s}");
    assert!(pdr["local_fteid"]["teid"].is_u64(), "{s}");
    assert!(s["dnn"].is_string(), "{s}");
    assert!(s["qers"][0]["mbr_ul_kbps"].is_u64(), "{s}");
    assert!(s["urrs"][0]["volume_threshold"]["total"].is_u64(), "{s}");
    let pdrs = s["pdrs"].as_array().unwrap();
    assert!(pdrs.iter().any(|p| p["application_id"] == "video"), "{s}");
    assert!(
        s["fars"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["forwarding"]["outer_header_creation"]["teid"].is_u64()),
        "{s}"
    );
    let apps: Value =
        serde_json::from_str(&get(api.addr, "/api/v1/applications", None).body).unwrap();
    assert_eq!(
        apps["applications"].as_array().map(Vec::len),
        Some(2),
        "{apps}"
    );
    drop(smf);
}

/// A `/check` whose client leaves before the answer stops at its next step (upfd's
/// debug log says so), and the next `/check` is then answered, not refused with 429
/// while the abandoned one walks on. 20,000 sessions: the check takes several steps.
/// The client leaves only once a second `/check` was refused with 429 (the first is
/// running then: a request followed at once by the client's leaving may never reach the
/// event loop at all); should the first end before that (a fast machine), it is tried
/// again, at most 5 times.
#[test]
fn a_check_whose_client_left_stops_and_the_next_is_answered() {
    let builder = Upfd::builder()
        .ue_pool("", "10.72.0.0/16")
        .log_level("debug");
    let api = start_with(builder, "", false, false);
    let (rt, mut smf) = associated_smf(&api, "10.72.0.0/16", |_| {});
    let r = rt.block_on(smf.establish(20_000, Pace::default()));
    assert_eq!(r.accepted, 20_000, "{r:?}");

    let mut left = false;
    for _ in 0..5 {
        let mut s = connect(api.addr);
        write!(s, "GET /check HTTP/1.1\r\nHost: upfd\r\n\r\n").unwrap();
        let running = get(api.addr, "/check", None).status == 429;
        drop(s);
        if running {
            left = true;
            break;
        }
    }
    assert!(left, "every /check ended before a second one was asked");
    assert!(
        api.upfd
            .wait_for_log("api: /check abandoned after", PATIENCE),
        "the abandoned /check went on: {}",
        api.upfd.log_tail(20)
    );
    let a = get(api.addr, "/check", None);
    assert_eq!(a.status, 200, "{a:?}");
    assert!(a.body.contains("\"consistent\":true"), "{}", a.body);
}
