//! The HTTP endpoint on `api.listen`: `GET /metrics` (Prometheus text format), `GET
//! /status` (JSON) and `GET /check` (JSON: whether the session books agree), HTTP/1.0,
//! one request per connection.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What a GET asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Page {
    Metrics,
    Status,
    /// The session books' consistency (`Sessions::check`): O(sessions).
    Check,
    NotFound,
}

/// Read one connection's request head (bounded in size and time): the page it asks for.
/// Only the page asked for is then made.
pub async fn request(conn: &mut TcpStream) -> Page {
    let req = read_request_head(conn).await;
    let line = String::from_utf8_lossy(&req);
    let path = line
        .strip_prefix("GET ")
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("");
    match path {
        "/metrics" => Page::Metrics,
        "/status" => Page::Status,
        "/check" => Page::Check,
        _ => Page::NotFound,
    }
}

/// Answer the connection with `body` (`page`'s; 404 for [`Page::NotFound`]).
pub async fn answer(mut conn: TcpStream, page: Page, body: String) {
    let (code, ctype, body) = match page {
        Page::Metrics => ("200 OK", "text/plain; version=0.0.4", body),
        Page::Status | Page::Check => ("200 OK", "application/json", body),
        Page::NotFound => (
            "404 Not Found",
            "text/plain",
            "try /metrics, /status or /check\n".to_string(),
        ),
    };
    let resp = format!(
        "HTTP/1.0 {code}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_millis(500), conn.write_all(resp.as_bytes())).await;
}

/// An HTTP request's head: read until the blank line that ends it, 1 KiB or 500 ms,
/// whichever comes first (a client may send its request in several segments).
async fn read_request_head(conn: &mut TcpStream) -> Vec<u8> {
    let mut req = Vec::with_capacity(256);
    let mut buf = [0u8; 512];
    let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
    while req.len() < 1024 && !req.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => req.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    req
}
