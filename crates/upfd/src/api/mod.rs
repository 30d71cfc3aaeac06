//! upfd's HTTP endpoint on `api.listen`: the operator API (JSON, described by the
//! OpenAPI document it serves at `/openapi.json`), `/metrics` for Prometheus, and the
//! probes `/healthz` and `/readyz`. HTTP/1.1 requests, one per connection.
//!
//! Reading a request and writing its response run as tasks of their own: a slow client
//! never holds up the event loop, which only builds the answer (views.rs) from the N4
//! node and the data path as they are at that moment.

pub mod views;

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The OpenAPI 3 description of the API, served at `/openapi.json`.
pub const OPENAPI: &str = include_str!("openapi.json");

/// Connections being read or answered at once, at most; more are closed at once.
pub const MAX_CONNECTIONS: usize = 64;

/// The connections open now, at most [`MAX_CONNECTIONS`].
#[derive(Debug, Default, Clone)]
pub struct Slots(std::rc::Rc<std::cell::Cell<usize>>);

/// One open connection's place in [`Slots`], given back when dropped (whichever way the
/// connection ends).
#[derive(Debug)]
pub struct Slot(Slots);

impl Slots {
    /// A place for one more connection, if there is room.
    pub fn take(&self) -> Option<Slot> {
        let n = self.0.get();
        (n < MAX_CONNECTIONS).then(|| {
            self.0.set(n + 1);
            Slot(self.clone())
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let c = &(self.0).0;
        c.set(c.get() - 1);
    }
}

/// A request as the event loop sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path without the query, e.g. `/api/v1/sessions`.
    pub path: String,
    /// The query's parameters, percent-decoded, in order.
    pub query: Vec<(String, String)>,
}

impl Request {
    /// The first value of query parameter `k`.
    pub fn param(&self, k: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(x, _)| x == k)
            .map(|(_, v)| v.as_str())
    }
}

/// An answer: status code, content type, body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    /// Compact JSON, a line (`upfctl --json` or `jq` print it indented).
    pub fn json(status: u16, v: &serde_json::Value) -> Self {
        let mut body = serde_json::to_string(v).unwrap_or_default();
        body.push('\n');
        Response {
            status,
            content_type: "application/json",
            body,
        }
    }

    pub fn text(status: u16, content_type: &'static str, body: String) -> Self {
        Response {
            status,
            content_type,
            body,
        }
    }

    /// An error as JSON: `{"error": ...}`.
    pub fn error(status: u16, msg: impl Into<String>) -> Self {
        Self::json(status, &serde_json::json!({ "error": msg.into() }))
    }
}

/// Parse a request head (`GET /path?query HTTP/1.1` and headers). None: not HTTP.
pub fn parse(head: &[u8]) -> Option<Request> {
    let text = std::str::from_utf8(head).ok()?;
    let line = text.lines().next()?;
    let mut parts = line.split(' ');
    let (method, target, version) = (parts.next()?, parts.next()?, parts.next()?);
    if !version.starts_with("HTTP/1.") || method.is_empty() {
        return None;
    }
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let query = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    Some(Request {
        method: method.to_string(),
        path: percent_decode(path),
        query,
    })
}

/// `%3A` -> `:`, `+` -> space; malformed escapes are kept as they are.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = |c: u8| (c as char).to_digit(16);
                match (hex(b[i + 1]), hex(b[i + 2])) {
                    (Some(h), Some(l)) => {
                        out.push((h * 16 + l) as u8);
                        i += 3;
                        continue;
                    }
                    _ => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Read one connection's request head, bounded in size (8 KiB) and time (2 s): a client
/// may send it in several segments. None: nothing usable came.
pub async fn read_request(conn: &mut TcpStream) -> Option<Request> {
    let mut req = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while req.len() < 8192 && !req.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => req.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    parse(&req)
}

/// Write `resp` to the connection (bounded in time: 5 s) and close it. HEAD gets the
/// head only.
pub async fn write_response(mut conn: TcpStream, resp: Response, head_only: bool) {
    let reason = match resp.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        503 => "Service Unavailable",
        _ => "Internal Server Error",
    };
    let mut out = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        resp.status,
        resp.content_type,
        resp.body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(resp.body.as_bytes());
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        conn.write_all(&out).await?;
        conn.shutdown().await
    })
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_with_their_query_decoded() {
        let r = parse(
            b"GET /api/v1/sessions?ue=2001%3Adb8%3A%3A1&limit=5&x HTTP/1.1\r\nHost: a\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/api/v1/sessions");
        assert_eq!(r.param("ue"), Some("2001:db8::1"));
        assert_eq!(r.param("limit"), Some("5"));
        assert_eq!(r.param("x"), Some(""));
        assert_eq!(r.param("y"), None);
        assert!(parse(b"\x16\x03\x01 garbage").is_none());
        assert!(parse(b"GET /\r\n\r\n").is_none());
        // A cut escape stays as it is.
        assert_eq!(parse(b"GET /a%2 HTTP/1.0\r\n\r\n").unwrap().path, "/a%2");
        assert_eq!(parse(b"GET /a%zz HTTP/1.0\r\n\r\n").unwrap().path, "/a%zz");
        assert_eq!(
            parse("GET /%é HTTP/1.0\r\n\r\n".as_bytes()).unwrap().path,
            "/%é"
        );
    }

    #[test]
    fn connection_slots_are_bounded_and_given_back() {
        let slots = Slots::default();
        let held: Vec<Slot> = (0..MAX_CONNECTIONS).filter_map(|_| slots.take()).collect();
        assert_eq!(held.len(), MAX_CONNECTIONS);
        assert!(slots.take().is_none(), "full");
        drop(held);
        assert!(slots.take().is_some(), "given back");
    }

    #[test]
    fn the_openapi_document_is_json_and_names_every_route() {
        let doc: serde_json::Value = serde_json::from_str(OPENAPI).expect("openapi.json");
        let paths = doc["paths"].as_object().expect("paths");
        for p in views::ROUTES {
            assert!(paths.contains_key(*p), "openapi.json lacks {p}");
        }
        assert_eq!(
            paths.len(),
            views::ROUTES.len(),
            "openapi.json has routes upfd lacks"
        );
    }
}
