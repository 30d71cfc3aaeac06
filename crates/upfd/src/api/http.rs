//! HTTP/1.1 on hyper for the API's listeners. What each limit stops is in
//! docs/security.md:
//!
//! - a request's head is at most [`MAX_HEAD`] octets (more: 431, closed) and must arrive
//!   within `api.request_timeout` of the connection's start or of the previous answer
//!   (else closed: a slow or idle client gives its place back);
//! - an answer the client does not take within `api.request_timeout` closes the
//!   connection;
//! - the API reads no bodies: a request that has one gets 413 and the connection closes;
//! - at most `api.max_connections` connections per listener; more are closed at once;
//! - the subscriber routes need the bearer token of `api.token_file` (when set);
//! - one `/check` at a time (it walks every session): a second gets 429;
//! - with `api.tls_cert_file` and `api.tls_key_file`, `api.listen` speaks TLS only (the
//!   handshake within `api.request_timeout`); the probe listener stays plain.
//!
//! The listeners are served on a thread of their own ([`spawn_thread`]), each connection
//! a task there; a request that passes these is handed to the event loop ([`Call`]),
//! which answers it from upfd's state (views.rs). TLS, HTTP and clients that are slow to
//! send or to read never take the event loop's time.

use std::cell::Cell;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Incoming};
use hyper::header::{HeaderValue, AUTHORIZATION, CACHE_CONTROL, CONNECTION, CONTENT_TYPE};
use hyper::{Method, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

use super::routes::{self, Access, Endpoint};
use super::{Reply, Request, Response, Slots};

/// A request's head (request line and headers), at most: more gets 431.
pub const MAX_HEAD: usize = 8192;

/// A request for the event loop to answer, and where the answer goes.
pub struct Call {
    pub req: Request,
    pub reply: oneshot::Sender<Reply>,
}

/// The API's settings, from the configuration's `api` section.
pub struct Settings {
    /// The bearer token of `api.token_file`; None: none required (loopback).
    pub token: Option<Vec<u8>>,
    pub request_timeout: Duration,
    pub max_connections: usize,
    /// TLS on the main listener (`api.tls_cert_file`, `api.tls_key_file`).
    pub tls: Option<tokio_rustls::TlsAcceptor>,
}

/// Serve `listeners` (bound, non-blocking) on a thread of their own, a runtime of its
/// own, for as long as the event loop holds the receiver of `calls`.
pub fn spawn_thread(
    listeners: Vec<(std::net::TcpListener, Listener)>,
    settings: Settings,
    calls: mpsc::Sender<Call>,
) -> io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("upfd-api".into())
        .spawn(move || {
            tokio::task::LocalSet::new().block_on(&rt, async move {
                let shared = Shared::new(settings, calls);
                for (l, kind) in listeners {
                    match TcpListener::from_std(l) {
                        Ok(l) => {
                            tokio::task::spawn_local(accept(l, kind, shared.clone()));
                        }
                        Err(e) => warn!("api: a listener: {e}"),
                    }
                }
                // The event loop has stopped: so does the API.
                shared.calls.closed().await;
            })
        })?;
    Ok(())
}

/// Which listener a connection came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// `api.listen`: every route.
    Main,
    /// `api.probe_address`: the probes and /metrics alone.
    Probe,
}

/// What every connection of upfd's API shares.
pub struct Shared {
    pub settings: Settings,
    pub calls: mpsc::Sender<Call>,
    /// A `/check` is being answered.
    check_running: Cell<bool>,
}

impl Shared {
    pub fn new(settings: Settings, calls: mpsc::Sender<Call>) -> Rc<Shared> {
        Rc::new(Shared {
            settings,
            calls,
            check_running: Cell::new(false),
        })
    }

    /// Whether `header` (the Authorization header's value) carries the token; any
    /// header does when no token is configured.
    fn authorized(&self, header: Option<&HeaderValue>) -> bool {
        let Some(token) = &self.settings.token else {
            return true;
        };
        let given = header
            .map(|h| h.as_bytes())
            .and_then(|h| {
                // The scheme is case-insensitive (RFC 9110 11.1).
                let (scheme, rest) = h.split_at_checked(7)?;
                scheme.eq_ignore_ascii_case(b"bearer ").then_some(rest)
            })
            .map(|t| t.trim_ascii())
            .unwrap_or_default();
        constant_time_eq(given, token)
    }
}

/// Whether `a` and `b` are equal, in a time that does not depend on where they differ
/// (only on their lengths).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The one `/check` running, given back when dropped.
struct CheckRunning(Rc<Shared>);

impl CheckRunning {
    fn take(shared: &Rc<Shared>) -> Option<CheckRunning> {
        (!shared.check_running.replace(true)).then(|| CheckRunning(shared.clone()))
    }
}

impl Drop for CheckRunning {
    fn drop(&mut self) {
        self.0.check_running.set(false);
    }
}

/// Accept connections on `listener` for as long as upfd runs, each served on a task of
/// its own while there is room (`max_connections`), else closed at once.
pub async fn accept(listener: TcpListener, kind: Listener, shared: Rc<Shared>) {
    let slots = Slots::new(shared.settings.max_connections);
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of descriptors, most likely: wait rather than spin.
                warn!("api: accepting a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Some(slot) = slots.take() else {
            drop(stream); // closed at once
            continue;
        };
        let shared = shared.clone();
        tokio::task::spawn_local(async move {
            serve(stream, kind, shared).await;
            drop(slot);
        });
    }
}

/// The TLS side of `api.listen`: the certificate chain in `cert` and the private key in
/// `key` (PEM files), each error naming its file.
pub fn tls_acceptor(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> anyhow::Result<tokio_rustls::TlsAcceptor> {
    use tokio_rustls::rustls;
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<Result<_, _>>())
        .map_err(|e| anyhow::anyhow!("api.tls_cert_file: {}: {e}", cert.display()))?;
    if certs.is_empty() {
        anyhow::bail!(
            "api.tls_cert_file: {}: no certificate in it",
            cert.display()
        );
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| anyhow::anyhow!("api.tls_key_file: {}: {e}", key.display()))?;
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| anyhow::anyhow!("api TLS: {e}"))?
    .with_no_client_auth()
    .with_single_cert(certs, key)
    .map_err(|e| anyhow::anyhow!("api.tls_cert_file and api.tls_key_file: {e}"))?;
    Ok(tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config)))
}

/// One connection: the TLS handshake on the main listener when configured (within
/// `api.request_timeout`, else closed), then [`serve_http`].
async fn serve(stream: TcpStream, kind: Listener, shared: Rc<Shared>) {
    let _ = stream.set_nodelay(true);
    let timeout = shared.settings.request_timeout;
    match (&shared.settings.tls, kind) {
        (Some(tls), Listener::Main) => {
            let tls = tls.clone();
            let Ok(Ok(s)) = tokio::time::timeout(timeout, tls.accept(stream)).await else {
                return; // no handshake in time, or not TLS: closed
            };
            serve_http(WriteTimeout::new(s, timeout), kind, shared).await
        }
        _ => serve_http(WriteTimeout::new(stream, timeout), kind, shared).await,
    }
}

/// HTTP/1.1 on one connection, request after request (keep-alive), until the client
/// closes it or a limit does.
async fn serve_http<S>(stream: WriteTimeout<S>, kind: Listener, shared: Rc<Shared>)
where
    S: AsyncRead + AsyncWrite + Unpin + 'static,
{
    let timeout = shared.settings.request_timeout;
    let io = TokioIo::new(stream);
    let service = hyper::service::service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(to_hyper(handle(req, kind, &shared).await)) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(timeout)
        .max_buf_size(2 * MAX_HEAD)
        .max_header_size(MAX_HEAD)
        .keep_alive(true)
        .serve_connection(io, service)
        .without_shutdown();
    if let Ok(parts) = conn.await {
        linger(parts.io.into_inner()).await;
    }
}

/// Close a connection whose client may still be sending (the body of a request refused
/// with 413, requests pipelined behind it): our side shut, then what comes read and
/// dropped for a moment. Closed with unread input, the socket would send a reset that
/// can overtake the answer just written, and the client would read no answer at all
/// (a lingering close, as HTTP servers do; RFC 9112 clause 9.6).
async fn linger<S: AsyncRead + AsyncWrite + Unpin>(mut s: S) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const LINGER: Duration = Duration::from_millis(500);
    const LINGER_OCTETS: usize = 64 * 1024;
    if s.shutdown().await.is_err() {
        return;
    }
    let _ = tokio::time::timeout(LINGER, async {
        let mut buf = [0u8; 4096];
        let mut read = 0;
        while read < LINGER_OCTETS {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => read += n,
            }
        }
    })
    .await;
}

/// The answer to one request: refused here (no such route, a body, a method other than
/// GET or HEAD, no token, a `/check` running), or the event loop's.
async fn handle(req: hyper::Request<Incoming>, kind: Listener, shared: &Rc<Shared>) -> Response {
    if req.body().size_hint().upper() != Some(0) {
        return Response::error(413, "the API reads no request body: send none")
            .header("connection", "close");
    }
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let request = Request::new(req.method().as_str(), target);
    let served = match kind {
        Listener::Main => &[Access::Probe, Access::Open, Access::Subscriber][..],
        Listener::Probe => &[Access::Probe][..],
    };
    let Some((route, _)) = routes::find(&request.path).filter(|(r, _)| served.contains(&r.access))
    else {
        return Response::error(
            404,
            format!(
                "no route {}: see /openapi.json (routes here: {})",
                request.path,
                routes::paths(served)
            ),
        );
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Response::error(
            405,
            format!("{} is not served: the API is read-only (GET)", req.method()),
        )
        .header("allow", "GET, HEAD");
    }
    if route.access == Access::Subscriber && !shared.authorized(req.headers().get(AUTHORIZATION)) {
        return Response::error(
            401,
            format!(
                "{} shows subscriber data: send Authorization: Bearer <the token in upfd's api.token_file> (upfctl: UPFCTL_TOKEN or --token-file)",
                route.path
            ),
        )
        .header("www-authenticate", "Bearer");
    }
    let _running = match route.endpoint {
        Endpoint::Check => match CheckRunning::take(shared) {
            Some(c) => Some(c),
            None => {
                return Response::error(
                    429,
                    "a /check is running (it walks every session; one at a time): try again",
                )
                .header("retry-after", "1")
            }
        },
        _ => None,
    };
    let (reply, answer) = oneshot::channel();
    let call = Call {
        req: request,
        reply,
    };
    if shared.calls.send(call).await.is_err() {
        return Response::error(503, "upfd is stopping");
    }
    match answer.await {
        Ok(r) => r.into_response(),
        Err(_) => Response::error(503, "upfd is stopping"),
    }
}

fn to_hyper(r: Response) -> hyper::Response<Full<Bytes>> {
    let mut out = hyper::Response::new(Full::new(Bytes::from(r.body)));
    *out.status_mut() = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = out.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(r.content_type));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    for (name, value) in r.headers {
        if let Ok(v) = HeaderValue::from_str(&value) {
            if name == "connection" {
                h.insert(CONNECTION, v);
            } else {
                h.insert(name, v);
            }
        }
    }
    out
}

/// A connection whose writes fail once one has waited `limit` for the client to take
/// what it was sent (hyper has no write timeout: a client that reads nothing would keep
/// its connection, and its place, for ever).
struct WriteTimeout<S> {
    stream: S,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> WriteTimeout<S> {
    fn new(stream: S, limit: Duration) -> Self {
        WriteTimeout {
            stream,
            limit,
            stalled: None,
        }
    }

    /// `r` of a write or flush: Pending starts (or keeps) the clock, anything else stops
    /// it; Pending past the limit is an error.
    fn watch<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let limit = self.limit;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client took no answer within api.request_timeout",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for WriteTimeout<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for WriteTimeout<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.watch(cx, r)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.watch(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_flush(cx);
        this.watch(cx, r)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.stream).poll_shutdown(cx);
        this.watch(cx, r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain HTTP, `token` if any, `timeout` seconds, `max` connections.
    fn settings(token: Option<&[u8]>, timeout: u64, max: usize) -> Settings {
        Settings {
            token: token.map(<[u8]>::to_vec),
            request_timeout: Duration::from_secs(timeout),
            max_connections: max,
            tls: None,
        }
    }

    #[test]
    fn the_token_is_compared_whole_after_a_bearer_scheme() {
        let (tx, _rx) = mpsc::channel(1);
        let s = Shared::new(settings(Some(b"s3cret"), 1, 1), tx);
        let h = |v: &str| HeaderValue::from_str(v).unwrap();
        assert!(s.authorized(Some(&h("Bearer s3cret"))));
        assert!(s.authorized(Some(&h("bearer s3cret "))));
        for wrong in [
            "Bearer s3cre",
            "Bearer s3cret2",
            "Basic s3cret",
            "s3cret",
            "Bearer ",
        ] {
            assert!(!s.authorized(Some(&h(wrong))), "{wrong}");
        }
        assert!(!s.authorized(None));
        let (tx, _rx) = mpsc::channel(1);
        let open = Shared::new(settings(None, 1, 1), tx);
        assert!(open.authorized(None));
    }

    /// A second /check while one waits for the event loop gets 429; the first's answer
    /// gives the place back.
    #[test]
    fn one_check_at_a_time() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, async {
            let (tx, mut rx) = mpsc::channel(4);
            let shared = Shared::new(settings(None, 5, 4), tx);
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::task::spawn_local(accept(listener, Listener::Main, shared));
            let get = |path: &'static str| async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut c = TcpStream::connect(addr).await.unwrap();
                let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                c.write_all(req.as_bytes()).await.unwrap();
                let mut out = String::new();
                c.read_to_string(&mut out).await.unwrap();
                out
            };
            let first = tokio::task::spawn_local(get("/check"));
            // The first is with the event loop (here: held, not answered).
            let held = rx.recv().await.unwrap();
            assert_eq!(held.req.path, "/check");
            let second = get("/check").await;
            assert!(second.starts_with("HTTP/1.1 429"), "{second}");
            assert!(
                second.to_ascii_lowercase().contains("retry-after: 1"),
                "{second}"
            );
            let _ = held
                .reply
                .send(Response::json(200, &serde_json::json!({"consistent": true})).into());
            assert!(first.await.unwrap().starts_with("HTTP/1.1 200"));
            let third = tokio::task::spawn_local(get("/check"));
            let c = rx.recv().await.unwrap();
            let _ = c
                .reply
                .send(Response::json(200, &serde_json::json!({})).into());
            assert!(
                third.await.unwrap().starts_with("HTTP/1.1 200"),
                "given back"
            );
        });
    }
}
