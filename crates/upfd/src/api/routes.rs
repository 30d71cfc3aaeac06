//! The routes the API serves, in one table from which both the router (views.rs,
//! http.rs) and the OpenAPI document served at `/openapi.json` are built: a route is
//! served if and only if the document lists it. The shapes of the answers are in
//! components.json.

use serde_json::{json, Map, Value};

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
    /// OpenAPI Responses Object (JSON): the route's own answers; [`document`] adds those
    /// of its access (401, 429).
    pub responses: &'static str,
}

/// Every route upfd serves.
pub const ROUTES: &[Route] = &[
    Route {
        path: "/healthz",
        endpoint: Endpoint::Healthz,
        access: Access::Probe,
        summary: "Liveness",
        description: "200 while upfd's event loop answers.",
        parameters: r##"[]"##,
        responses: r##"{"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object", "properties": {"status": {"type": "string", "enum": ["ok"]}}}}}}}"##,
    },
    Route {
        path: "/readyz",
        endpoint: Endpoint::Readyz,
        access: Access::Probe,
        summary: "Readiness",
        description: "200 when the data path is attached (or `datapath.mode: none`) and N4 listens; 503 with the reason while starting or shutting down (releasing associations).",
        parameters: r##"[]"##,
        responses: r##"{"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Ready"}}}}, "503": {"description": "Not ready", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Ready"}}}}}"##,
    },
    Route {
        path: "/metrics",
        endpoint: Endpoint::Metrics,
        access: Access::Probe,
        summary: "Prometheus metrics",
        description: "The Prometheus text format (0.0.4); every family with HELP and TYPE (docs/operations.md lists them).",
        parameters: r##"[]"##,
        responses: r##"{"200": {"description": "OK", "content": {"text/plain": {"schema": {"type": "string"}}}}}"##,
    },
    Route {
        path: "/openapi.json",
        endpoint: Endpoint::OpenApi,
        access: Access::Open,
        summary: "This document",
        description: "",
        parameters: r##"[]"##,
        responses: r##"{"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}}"##,
    },
    Route {
        path: "/status",
        endpoint: Endpoint::Status,
        access: Access::Subscriber,
        summary: "Status (as /api/v1/status)",
        description: "Kept for tools written against the first API.",
        parameters: r##"[]"##,
        responses: r##"{"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Status"}}}}}"##,
    },
    Route {
        path: "/check",
        endpoint: Endpoint::Check,
        access: Access::Subscriber,
        summary: "Session book consistency",
        description: "Whether the session table, its indexes and the resources it holds agree (O(sessions)).",
        parameters: r##"[]"##,
        responses: r##"{"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object", "properties": {"consistent": {"type": "boolean"}, "sessions": {"type": "integer"}, "error": {"type": "string"}}}}}}}"##,
    },
    Route {
        path: "/api/v1/status",
        endpoint: Endpoint::Status,
        access: Access::Subscriber,
        summary: "Status",
        description: "Version, node, readiness, uptime, Recovery Time Stamp (NTP seconds and RFC 3339), sessions, associations, data path attach modes, state directory.",
        parameters: r##"[]"##,
        responses: r##"{"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Status"}}}}}"##,
    },
    Route {
        path: "/api/v1/associations",
        endpoint: Endpoint::Associations,
        access: Access::Subscriber,
        summary: "PFCP associations",
        description: "Every CP function associated, with its state and sessions.",
        parameters: r##"[]"##,
        responses: r##"{"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "array", "items": {"$ref": "#/components/schemas/Association"}}}}}}"##,
    },
    Route {
        path: "/api/v1/sessions",
        endpoint: Endpoint::Sessions,
        access: Access::Subscriber,
        summary: "Sessions",
        description: "With `seid`, `teid` or `ue`: the matching sessions whole (rules and counters). Without: one page of summaries in SEID order; `next` is the cursor for `after`. TEIDs and UE addresses are looked up in the data path's own tables (under 2 ms at a million sessions); a page reads every SEID (20-45 ms at a million: docs/benchmarks.md).",
        parameters: r##"[{"name": "seid", "in": "query", "required": false, "description": "The session with this UP SEID", "schema": {"type": "string"}}, {"name": "teid", "in": "query", "required": false, "description": "Sessions with this local TEID (N3/N9 F-TEID)", "schema": {"type": "string"}}, {"name": "ue", "in": "query", "required": false, "description": "Sessions with this UE address (IPv4, IPv6, or an address in a UE IPv6 prefix)", "schema": {"type": "string"}}, {"name": "limit", "in": "query", "required": false, "description": "Page size (1-1000, default 100)", "schema": {"type": "integer", "minimum": 1, "maximum": 1000}}, {"name": "after", "in": "query", "required": false, "description": "Cursor: SEIDs after this one", "schema": {"type": "string"}}]"##,
        responses: r##"{"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object", "properties": {"total": {"type": "integer"}, "next": {"type": "string", "nullable": true}, "sessions": {"type": "array", "items": {"oneOf": [{"$ref": "#/components/schemas/SessionSummary"}, {"$ref": "#/components/schemas/Session"}]}}}}}}}, "400": {"description": "Bad request: the parameter named in `error` is malformed", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}}"##,
    },
    Route {
        path: "/api/v1/sessions/{seid}",
        endpoint: Endpoint::Session,
        access: Access::Subscriber,
        summary: "One session",
        description: "The session's identities, PDRs, FARs, QERs, URRs (with what each counted since it was created and since its last report) and BARs.",
        parameters: r##"[{"name": "seid", "in": "path", "required": true, "schema": {"type": "string"}}]"##,
        responses: r##"{"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Session"}}}}, "400": {"description": "Bad request: the parameter named in `error` is malformed", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}, "404": {"description": "No such session", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}}"##,
    },
    Route {
        path: "/api/v1/stats",
        endpoint: Endpoint::Stats,
        access: Access::Subscriber,
        summary: "Statistics",
        description: "N4 requests and rejections by type; the data path's packets and octets per interface and direction, per drop reason and per outcome; the slow path's GTP-U messages.",
        parameters: r##"[]"##,
        responses: r##"{"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}}"##,
    },
    Route {
        path: "/api/v1/buffers",
        endpoint: Endpoint::Buffers,
        access: Access::Subscriber,
        summary: "Buffers",
        description: "Downlink packets buffered per session (FARs with BUFF), and the buffering totals.",
        parameters: r##"[]"##,
        responses: r##"{"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}}"##,
    },
    Route {
        path: "/api/v1/applications",
        endpoint: Endpoint::Applications,
        access: Access::Subscriber,
        summary: "Applications",
        description: "The applications PDRs may name (PDI Application ID) and their Packet Flow Descriptions, by Application ID: each with its data path index, its source (configuration: `applications`; pfd_management: an SMF's PFD Management Request, which replaces a configured application's PFDs), its flow descriptions, http:// URLs and domain names with the protocols they are detected in (dns, tls_sni, http_host; none: TLS_SAN or TLS_SCN, which detect nothing). An application an SMF removed the PFDs of stays, without PFDs.",
        parameters: r##"[]"##,
        responses: r##"{"200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}}}"##,
    },];

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

/// The OpenAPI 3 document of [`ROUTES`], as served at `/openapi.json`.
pub fn document() -> Value {
    let error = |description: &str| {
        json!({
            "description": description,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        })
    };
    let mut paths = Map::new();
    for r in ROUTES {
        // The table's JSON is checked by this module's tests.
        let mut responses: Map<String, Value> =
            serde_json::from_str(r.responses).unwrap_or_default();
        let mut get = json!({
            "summary": r.summary,
            "description": r.description,
        });
        let params: Value = serde_json::from_str(r.parameters).unwrap_or_default();
        if params.as_array().is_some_and(|a| !a.is_empty()) {
            get["parameters"] = params;
        }
        if r.access == Access::Subscriber {
            responses.insert(
                "401".into(),
                error("No or a wrong bearer token (upfd has api.token_file); the answer has WWW-Authenticate: Bearer"),
            );
            get["security"] = json!([{ "bearer": [] }]);
        }
        if r.endpoint == Endpoint::Check {
            responses.insert(
                "429".into(),
                error("Another /check is running (one at a time); the answer has Retry-After"),
            );
        }
        get["responses"] = Value::Object(responses);
        paths.insert(r.path.to_string(), json!({ "get": get }));
    }
    let mut components: Value =
        serde_json::from_str(include_str!("components.json")).unwrap_or_default();
    components["securitySchemes"] = json!({"bearer": {"type": "http", "scheme": "bearer"}});
    json!({
        "openapi": "3.0.3",
        "info": {"title": "upfd API", "version": "1", "description": INFO},
        "paths": paths,
        "components": components,
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
            let o: Value = serde_json::from_str(r.responses).expect(r.path);
            assert!(o.get("200").is_some(), "{}: no 200", r.path);
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
        let components: Value = serde_json::from_str(include_str!("components.json")).unwrap();
        assert!(components["schemas"]["Session"].is_object());
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
