//! The routes the API serves, in one table from which both the router (views.rs,
//! http.rs) and the OpenAPI document served at `/openapi.json` are built: a route is
//! served if and only if the document lists it. The shapes of the answers are the
//! schemas of answers.rs's types, the types views.rs builds the answers as.

use std::sync::OnceLock;

use schemars::generate::{Contract, SchemaSettings};
use schemars::{Schema, SchemaGenerator};
use serde_json::{json, Map, Value};

use super::answers::{self as a, schema};

/// What a route answers (views.rs has one handler per endpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Healthz,
    Readyz,
    Metrics,
    OpenApi,
    Status,
    Check,
    Associations,
    Sessions,
    Session,
    Stats,
    Buffers,
    Applications,
}

/// Who may read a route (docs/security.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Probes and metrics: open, and served on `api.probe_address` too.
    Probe,
    /// Open, on the main listener only (the API's description).
    Open,
    /// Subscriber data (sessions, UE addresses, TEIDs, SEIDs, usage) and `/check`: the
    /// bearer token of `api.token_file` when one is configured.
    Subscriber,
}

/// One route: its path (`{seid}` a path parameter), what it answers, who may read it,
/// and its description for the OpenAPI document.
#[derive(Debug)]
pub struct Route {
    pub path: &'static str,
    pub endpoint: Endpoint,
    pub access: Access,
    pub summary: &'static str,
    pub description: &'static str,
    /// OpenAPI Parameter Objects (JSON array).
    pub parameters: &'static str,
    /// The route's own answers; [`document`] adds those of its access (401, 429).
    pub responses: &'static [Outcome],
}

/// One answer a route gives: its status, what it means, and its body's schema.
#[derive(Debug)]
pub struct Outcome {
    pub status: u16,
    pub description: &'static str,
    pub body: Body,
}

/// A body and its schema (for JSON, [`schema`] of the answers.rs type views.rs builds).
#[derive(Debug, Clone, Copy)]
pub enum Body {
    Json(fn(&mut SchemaGenerator) -> Schema),
    Text(fn(&mut SchemaGenerator) -> Schema),
}

impl Body {
    pub fn content_type(self) -> &'static str {
        match self {
            Body::Json(_) => "application/json",
            Body::Text(_) => "text/plain",
        }
    }
}

const fn ok(body: Body) -> Outcome {
    Outcome {
        status: 200,
        description: "OK",
        body,
    }
}

const BAD_PARAMETER: Outcome = Outcome {
    status: 400,
    description: "Bad request: the parameter named in `error` is malformed",
    body: Body::Json(schema::<a::Error>),
};

/// Every route upfd serves.
pub const ROUTES: &[Route] = &[
    Route {
        path: "/healthz",
        endpoint: Endpoint::Healthz,
        access: Access::Probe,
        summary: "Liveness",
        description: "200 while upfd's event loop answers.",
        parameters: r##"[]"##,
        responses: &[ok(Body::Json(schema::<a::Health>))],
    },
    Route {
        path: "/readyz",
        endpoint: Endpoint::Readyz,
        access: Access::Probe,
        summary: "Readiness",
        description: "200 when the data path is attached (or `datapath.mode: none`) and N4 listens; 503 with the reason while starting or shutting down (releasing associations).",
        parameters: r##"[]"##,
        responses: &[
            ok(Body::Json(schema::<a::Ready>)),
            Outcome {
                status: 503,
                description: "Not ready",
                body: Body::Json(schema::<a::Ready>),
            },
        ],
    },
    Route {
        path: "/metrics",
        endpoint: Endpoint::Metrics,
        access: Access::Probe,
        summary: "Prometheus metrics",
        description: "The Prometheus text format (0.0.4); every family with HELP and TYPE (docs/operations.md lists them).",
        parameters: r##"[]"##,
        responses: &[ok(Body::Text(a::text_schema))],
    },
    Route {
        path: "/openapi.json",
        endpoint: Endpoint::OpenApi,
        access: Access::Open,
        summary: "This document",
        description: "",
        parameters: r##"[]"##,
        responses: &[ok(Body::Json(a::document_schema))],
    },
    Route {
        path: "/status",
        endpoint: Endpoint::Status,
        access: Access::Subscriber,
        summary: "Status (as /api/v1/status)",
        description: "Kept for tools written against the first API.",
        parameters: r##"[]"##,
        responses: &[ok(Body::Json(schema::<a::Status>))],
    },
    Route {
        path: "/check",
        endpoint: Endpoint::Check,
        access: Access::Subscriber,
        summary: "Session book consistency",
        description: "Whether the session table, its indexes and the resources it holds agree (O(sessions)).",
        parameters: r##"[]"##,
        responses: &[ok(Body::Json(schema::<a::Check>))],
    },
    Route {
        path: "/api/v1/status",
        endpoint: Endpoint::Status,
        access: Access::Subscriber,
        summary: "Status",
        description: "Version, node, readiness, uptime, Recovery Time Stamp (NTP seconds and RFC 3339), sessions, associations, data path attach modes, state directory.",
        parameters: r##"[]"##,
        responses: &[ok(Body::Json(schema::<a::Status>))],
    },
    Route {
        path: "/api/v1/associations",
        endpoint: Endpoint::Associations,
        access: Access::Subscriber,
        summary: "PFCP associations",
        description: "Every CP function associated, with its state and sessions.",
        parameters: r##"[]"##,
        responses: &[ok(Body::Json(schema::<Vec<a::Association>>))],
    },
    Route {
        path: "/api/v1/sessions",
        endpoint: Endpoint::Sessions,
        access: Access::Subscriber,
        summary: "Sessions",
        description: "With `seid`, `teid` or `ue`: the matching sessions whole (rules and counters). Without: one page of summaries in SEID order; `next` is the cursor for `after`. TEIDs and UE addresses are looked up in the data path's own tables (under 2 ms at a million sessions); a page reads every SEID (20-45 ms at a million: docs/benchmarks.md).",
        parameters: r##"[{"name": "seid", "in": "query", "required": false, "description": "The session with this UP SEID", "schema": {"type": "string"}}, {"name": "teid", "in": "query", "required": false, "description": "Sessions with this local TEID (N3/N9 F-TEID)", "schema": {"type": "string"}}, {"name": "ue", "in": "query", "required": false, "description": "Sessions with this UE address (IPv4, IPv6, or an address in a UE IPv6 prefix)", "schema": {"type": "string"}}, {"name": "limit", "in": "query", "required": false, "description": "Page size (1-1000, default 100)", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}, {"name": "after", "in": "query", "required": false, "description": "Cursor: SEIDs after this one", "schema": {"type": "string"}}]"##,
        responses: &[ok(Body::Json(schema::<a::Sessions>)), BAD_PARAMETER],
    },
    Route {
        path: "/api/v1/sessions/{seid}",
        endpoint: Endpoint::Session,
        access: Access::Subscriber,
        summary: "One session",
        description: "The session's identities, PDRs, FARs, QERs, URRs (with what each counted since it was created and since its last report) and BARs.",
        parameters: r##"[{"name": "seid", "in": "path", "required": true, "schema": {"type": "string"}}]"##,
        responses: &[
            ok(Body::Json(schema::<a::Session>)),
            BAD_PARAMETER,
            Outcome {
                status: 404,
                description: "No such session",
                body: Body::Json(schema::<a::Error>),
            },
        ],
    },
    Route {
        path: "/api/v1/stats",
        endpoint: Endpoint::Stats,
        access: Access::Subscriber,
        summary: "Statistics",
        description: "N4 requests and rejections by type; the data path's packets and octets per interface and direction, per drop reason and per outcome; the slow path's GTP-U messages.",
        parameters: r##"[]"##,
        responses: &[ok(Body::Json(schema::<a::Stats>))],
    },
    Route {
        path: "/api/v1/buffers",
        endpoint: Endpoint::Buffers,
        access: Access::Subscriber,
        summary: "Buffers",
        description: "Downlink packets buffered per session (FARs with BUFF), and the buffering totals.",
        parameters: r##"[]"##,
        responses: &[ok(Body::Json(schema::<a::Buffers>))],
    },
    Route {
        path: "/api/v1/applications",
        endpoint: Endpoint::Applications,
        access: Access::Subscriber,
        summary: "Applications",
        description: "The applications PDRs may name (PDI Application ID) and their Packet Flow Descriptions, by Application ID: each with its data path index, its source (configuration: `applications`; pfd_management: an SMF's PFD Management Request, which replaces a configured application's PFDs), its flow descriptions, http:// URLs and domain names with the protocols they are detected in (dns, tls_sni, http_host; none: TLS_SAN or TLS_SCN, which detect nothing). An application an SMF removed the PFDs of stays, without PFDs.",
        parameters: r##"[]"##,
        responses: &[ok(Body::Json(schema::<a::Applications>))],
    },
];

/// The route serving `path` (a trailing `/` ignored), with the value of its path
/// parameter if it has one.
pub fn find(path: &str) -> Option<(&'static Route, Option<&str>)> {
    let path = path.trim_end_matches('/');
    ROUTES.iter().find_map(|r| match r.path.split_once('{') {
        None => (r.path == path).then_some((r, None)),
        Some((prefix, _)) => path
            .strip_prefix(prefix)
            .filter(|v| !v.is_empty() && !v.contains('/'))
            .map(|v| (r, Some(v))),
    })
}

/// The paths of `ROUTES` with `access`, for messages.
pub fn paths(access: &[Access]) -> String {
    ROUTES
        .iter()
        .filter(|r| access.contains(&r.access))
        .map(|r| r.path)
        .collect::<Vec<_>>()
        .join(", ")
}

const INFO: &str = "The operator API of upfd, a 5G UPF: health, associations, sessions with their rules and live counters, statistics, buffers. Read-only (GET; HEAD gives the head only). SEIDs are 0x-prefixed 64-bit hexadecimal strings (JSON numbers lose precision past 2^53); parameters take them in decimal or 0x-hex. The probes, /metrics and this document are open; every other route shows subscriber data and requires `Authorization: Bearer <token>` when upfd has `api.token_file` (without it, upfd listens on loopback only). `upfctl` is its command-line client.";

/// The OpenAPI 3 document of [`ROUTES`], as served at `/openapi.json`: the answers'
/// schemas generated from their types, OpenAPI 3.0's flavour of JSON Schema (`nullable`,
/// `$ref`s to `#/components/schemas/`), describing what serde writes (a field is
/// required unless it may be left out).
pub fn document() -> Value {
    let mut g = SchemaSettings::openapi3()
        .with(|s| s.contract = Contract::Serialize)
        .into_generator();
    let error = Body::Json(schema::<a::Error>);
    let mut paths = Map::new();
    for r in ROUTES {
        let mut responses = Map::new();
        for o in r.responses {
            responses.insert(
                o.status.to_string(),
                response(&mut g, o.description, o.body),
            );
        }
        let mut get = json!({
            "summary": r.summary,
            "description": r.description,
        });
        // The table's JSON is checked by this module's tests.
        let params: Value = serde_json::from_str(r.parameters).unwrap_or_default();
        if params.as_array().is_some_and(|a| !a.is_empty()) {
            get["parameters"] = params;
        }
        if r.access == Access::Subscriber {
            responses.insert(
                "401".into(),
                response(&mut g, "No or a wrong bearer token (upfd has api.token_file); the answer has WWW-Authenticate: Bearer", error),
            );
            get["security"] = json!([{ "bearer": [] }]);
        }
        if r.endpoint == Endpoint::Check {
            responses.insert(
                "429".into(),
                response(
                    &mut g,
                    "Another /check is running (one at a time); the answer has Retry-After",
                    error,
                ),
            );
        }
        get["responses"] = Value::Object(responses);
        paths.insert(r.path.to_string(), json!({ "get": get }));
    }
    json!({
        "openapi": "3.0.3",
        "info": {"title": "upfd API", "version": "1", "description": INFO},
        "paths": paths,
        "components": {
            "schemas": g.take_definitions(true),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    })
}

/// The document, built once: it changes only with the binary.
pub fn served_document() -> &'static Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(document)
}

/// An OpenAPI Response Object: `description`, and `body` with its schema.
fn response(g: &mut SchemaGenerator, description: &str, body: Body) -> Value {
    let mut schema = match body {
        Body::Json(f) | Body::Text(f) => f(g),
    };
    // What the generator does to the schemas it keeps, done to this one too (a `$ref`
    // is left as it is).
    for t in g.transforms_mut() {
        t.transform(&mut schema);
    }
    json!({
        "description": description,
        "content": { body.content_type(): { "schema": schema } },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_valid_json_and_every_route_is_found_by_its_path() {
        for r in ROUTES {
            let p: Value = serde_json::from_str(r.parameters).expect(r.path);
            assert!(p.is_array(), "{}", r.path);
            assert!(
                r.responses.iter().any(|o| o.status == 200),
                "{}: no 200",
                r.path
            );
            let concrete = r.path.replace("{seid}", "0x1");
            let (found, param) = find(&concrete).expect(r.path);
            assert_eq!(found.path, r.path);
            assert_eq!(param, r.path.contains('{').then_some("0x1"));
            assert_eq!(
                find(&format!("{concrete}/")).map(|f| f.0.path),
                Some(r.path)
            );
        }
        assert!(find("/api/v1/sessions/1/x").is_none());
        assert!(find("/api/v1/session").is_none());
        assert!(find("/").is_none());
    }

    /// Every schema of the document says what its values are (a type, a `$ref` to a
    /// component, an enum, or alternatives), and an object says which fields it has: a
    /// field of an untyped value (`serde_json::Value`, a map of them) in an answer fails
    /// here. Only the document itself is an object of any fields.
    #[test]
    fn every_schema_in_the_document_says_what_its_values_are() {
        fn walk(doc: &Value, s: &Value, at: &str) {
            let o = s.as_object().unwrap_or_else(|| panic!("{at}: {s}"));
            if let Some(r) = o.get("$ref").and_then(Value::as_str) {
                let name = r.strip_prefix("#/components/schemas/").expect(at);
                assert!(
                    doc["components"]["schemas"][name].is_object(),
                    "{at}: {r} is not a component"
                );
                return;
            }
            assert!(
                ["type", "enum", "anyOf", "oneOf", "allOf"]
                    .iter()
                    .any(|k| o.contains_key(*k)),
                "{at}: a schema that says nothing of its values: {s}"
            );
            assert_ne!(
                o.get("additionalProperties"),
                Some(&Value::Bool(true)),
                "{at}"
            );
            let mut subs: Vec<(String, &Value)> = Vec::new();
            for (k, v) in o
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                subs.push((format!("{at}.{k}"), v));
            }
            for k in ["items", "additionalProperties"] {
                if let Some(v) = o.get(k).filter(|v| v.is_object()) {
                    subs.push((format!("{at}[{k}]"), v));
                }
            }
            for k in ["anyOf", "oneOf", "allOf"] {
                for (i, v) in o
                    .get(k)
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    subs.push((format!("{at}/{k}[{i}]"), v));
                }
            }
            for (at, v) in subs {
                walk(doc, v, &at);
            }
        }
        let doc = document();
        let schemas = doc["components"]["schemas"].as_object().unwrap();
        for name in [
            "Error",
            "Ready",
            "Status",
            "Association",
            "Check",
            "Sessions",
            "SessionSummary",
            "Session",
            "Usage",
            "Stats",
            "Buffers",
            "Applications",
        ] {
            assert!(schemas.contains_key(name), "no component {name}");
        }
        for (name, s) in schemas {
            walk(&doc, s, name);
        }
        for r in ROUTES.iter().filter(|r| r.endpoint != Endpoint::OpenApi) {
            let responses = doc["paths"][r.path]["get"]["responses"]
                .as_object()
                .unwrap();
            for (status, o) in responses {
                let content = o["content"].as_object().unwrap();
                for (t, c) in content {
                    walk(&doc, &c["schema"], &format!("{} {status} {t}", r.path));
                }
            }
        }
    }

    #[test]
    fn the_document_lists_each_route_once_with_its_access() {
        let doc = document();
        let paths = doc["paths"].as_object().unwrap();
        assert_eq!(paths.len(), ROUTES.len());
        for r in ROUTES {
            let get = &paths[r.path]["get"];
            assert_eq!(
                get["security"].is_array(),
                r.access == Access::Subscriber,
                "{}",
                r.path
            );
            assert_eq!(
                get["responses"]["429"].is_object(),
                r.endpoint == Endpoint::Check
            );
        }
    }
}
