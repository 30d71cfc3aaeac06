//! upfd's HTTP endpoint on `api.listen`: the operator API (JSON, described by the
//! OpenAPI document it serves at `/openapi.json`, built from routes.rs and the types of
//! answers.rs), `/metrics` for Prometheus, and the probes `/healthz` and `/readyz`; with
//! `api.probe_address`, a listener of its own for the probes and `/metrics`.
//!
//! HTTP/1.1 is hyper's (http.rs): keep-alive, bounded heads, a time limit for each
//! request, a bounded number of connections, the bearer token of the subscriber routes.
//! Connections are tasks on a thread of their own: TLS, HTTP and a slow client never
//! hold up the event loop, which only builds the answer (views.rs) from the N4 node and
//! the data path as they are at that moment.

pub mod answers;
pub mod check;
pub mod http;
pub mod routes;
pub mod views;

/// The connections open now on one listener, at most `max` (`api.max_connections`).
#[derive(Debug, Clone)]
pub struct Slots {
    open: std::rc::Rc<std::cell::Cell<usize>>,
    max: usize,
}

/// One open connection's place in [`Slots`], given back when dropped (whichever way the
/// connection ends).
#[derive(Debug)]
pub struct Slot(Slots);

impl Slots {
    pub fn new(max: usize) -> Slots {
        Slots {
            open: Default::default(),
            max,
        }
    }

    /// A place for one more connection, if there is room.
    pub fn take(&self) -> Option<Slot> {
        let n = self.open.get();
        (n < self.max).then(|| {
            self.open.set(n + 1);
            Slot(self.clone())
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let c = &(self.0).open;
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

/// An answer: status code, content type, body, and headers of its own (e.g.
/// `WWW-Authenticate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
    pub headers: Vec<(&'static str, String)>,
}

/// What the event loop gives back for a request: the answer, or a job that builds it on
/// the API's thread from what the event loop took out of its state (shared sessions,
/// their URRs' counts): the event loop's part of a page of a thousand sessions is then
/// finding and sharing them, not writing their JSON.
pub enum Reply {
    Done(Response),
    Render(Box<dyn FnOnce() -> Response + Send>),
}

impl Reply {
    /// The answer, built here if it is a job.
    pub fn into_response(self) -> Response {
        match self {
            Reply::Done(r) => r,
            Reply::Render(f) => f(),
        }
    }
}

impl From<Response> for Reply {
    fn from(r: Response) -> Reply {
        Reply::Done(r)
    }
}

impl Response {
    /// Compact JSON, a line (`upfctl --json` or `jq` print it indented).
    pub fn json<T: serde::Serialize + ?Sized>(status: u16, v: &T) -> Self {
        let mut body = serde_json::to_string(v).unwrap_or_default();
        body.push('\n');
        Response {
            status,
            content_type: "application/json",
            body,
            headers: Vec::new(),
        }
    }

    pub fn text(status: u16, content_type: &'static str, body: String) -> Self {
        Response {
            status,
            content_type,
            body,
            headers: Vec::new(),
        }
    }

    /// An error as JSON: `{"error": ...}`.
    pub fn error(status: u16, msg: impl Into<String>) -> Self {
        Self::json(status, &answers::Error { error: msg.into() })
    }

    /// With header `name: value`.
    pub fn header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }
}

impl Request {
    /// A request for `target` (`/path?query`), its path and query percent-decoded.
    pub fn new(method: &str, target: &str) -> Request {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let query = query
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| {
                let (k, v) = p.split_once('=').unwrap_or((p, ""));
                (percent_decode(k), percent_decode(v))
            })
            .collect();
        Request {
            method: method.to_string(),
            path: percent_decode(path),
            query,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_have_their_path_and_query_decoded() {
        let r = Request::new("GET", "/api/v1/sessions?ue=2001%3Adb8%3A%3A1&limit=5&x");
        assert_eq!(r.method, "GET");
        assert_eq!(r.path, "/api/v1/sessions");
        assert_eq!(r.param("ue"), Some("2001:db8::1"));
        assert_eq!(r.param("limit"), Some("5"));
        assert_eq!(r.param("x"), Some(""));
        assert_eq!(r.param("y"), None);
        // A cut escape stays as it is.
        assert_eq!(Request::new("GET", "/a%2").path, "/a%2");
        assert_eq!(Request::new("GET", "/a%zz").path, "/a%zz");
        assert_eq!(Request::new("GET", "/%é").path, "/%é");
    }

    #[test]
    fn connection_slots_are_bounded_and_given_back() {
        let slots = Slots::new(3);
        let held: Vec<Slot> = (0..5).filter_map(|_| slots.take()).collect();
        assert_eq!(held.len(), 3);
        assert!(slots.take().is_none(), "full");
        drop(held);
        assert!(slots.take().is_some(), "given back");
    }
}
