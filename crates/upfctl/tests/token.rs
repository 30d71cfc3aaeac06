//! upfctl sends the bearer token of upfd's `api.token_file` from its environment
//! (`UPFCTL_TOKEN`, or a file named by `UPFCTL_TOKEN_FILE` or `--token-file`), and says
//! how to pass it when upfd answers 401. Against a stand-in for upfd's API on loopback
//! that records what it was sent; the upfctl binary of this build.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

/// A stand-in API answering `n` requests: 200 with `{"applications": []}` to those
/// with `Authorization: Bearer good`, 401 to the others. Its address, and the
/// Authorization headers it saw (one per request, "" for none).
fn stand_in(n: usize) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let mut seen = Vec::new();
        for _ in 0..n {
            let (s, _) = l.accept().unwrap();
            s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut auth = String::new();
            loop {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                let line = line.trim_end();
                if line.is_empty() {
                    break;
                }
                if let Some((k, v)) = line.split_once(':') {
                    if k.eq_ignore_ascii_case("authorization") {
                        auth = v.trim().to_string();
                    }
                }
            }
            let (status, body) = if auth == "Bearer good" {
                ("200 OK", r#"{"applications": []}"#)
            } else {
                ("401 Unauthorized", r#"{"error": "no"}"#)
            };
            let mut w = s;
            write!(
                w,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            seen.push(auth);
        }
        seen
    });
    (addr, h)
}

fn upfctl(api: &str, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_upfctl"));
    c.env_remove("UPFCTL_TOKEN")
        .env_remove("UPFCTL_TOKEN_FILE")
        .env("UPFCTL_API", api)
        .args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("running upfctl")
}

#[test]
fn the_token_comes_from_the_environment_or_a_file_and_a_401_says_how() {
    let dir = std::env::temp_dir().join(format!("upfctl-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("token");
    std::fs::write(&file, "good\n").unwrap();
    let f = file.to_str().unwrap();
    let (api, server) = stand_in(5);
    let ok = |o: &std::process::Output| {
        assert!(o.status.success(), "{o:?}");
        assert_eq!(String::from_utf8_lossy(&o.stdout), "no applications\n");
    };
    ok(&upfctl(
        &api,
        &[("UPFCTL_TOKEN", "good")],
        &["applications"],
    ));
    ok(&upfctl(
        &api,
        &[("UPFCTL_TOKEN_FILE", f)],
        &["applications"],
    ));
    ok(&upfctl(&api, &[], &["--token-file", f, "applications"]));
    for env in [&[][..], &[("UPFCTL_TOKEN", "bad")][..]] {
        let o = upfctl(&api, env, &["applications"]);
        assert_eq!(o.status.code(), Some(2), "{o:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("HTTP 401")
                && err.contains("UPFCTL_TOKEN")
                && err.contains("--token-file"),
            "{err}"
        );
    }
    let seen = server.join().unwrap();
    assert_eq!(
        seen,
        [
            "Bearer good",
            "Bearer good",
            "Bearer good",
            "",
            "Bearer bad"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
