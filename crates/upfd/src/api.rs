//! The HTTP endpoint on `api.listen`: `GET /metrics` (Prometheus text format) and
//! `GET /status` (JSON), HTTP/1.0, one request per connection.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What a request is answered with.
pub struct Bodies {
    pub metrics: String,
    pub status: String,
}

/// Answer one connection: read its request head (bounded in size and time), then the
/// body it asks for, or 404.
pub async fn answer(mut conn: TcpStream, bodies: Bodies) {
    let req = read_request_head(&mut conn).await;
    let line = String::from_utf8_lossy(&req);
    let (code, ctype, body) = if line.starts_with("GET /metrics") {
        ("200 OK", "text/plain; version=0.0.4", bodies.metrics)
    } else if line.starts_with("GET /status") {
        ("200 OK", "application/json", bodies.status)
    } else {
        (
            "404 Not Found",
            "text/plain",
            "try /metrics or /status\n".to_string(),
        )
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
