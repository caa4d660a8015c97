//! `/openapi.json`: an OpenAPI 3.2 document generated from the query specification, so it
//! lists exactly the routes the server built. 3.2, for its way of describing a stream of
//! Server-Sent Events: the schema of each event (`itemSchema`), where 3.1 has only the schema
//! of the whole body, a string.

use crate::AppState;
use crate::RequestLimits;
use crate::list::json_response;
use crate::params::{CURSOR_PATTERN, DEFAULT_LIMIT, MAX_CURSOR_CHARS, MAX_LIMIT};
use crate::routes::{Endpoint, ROUTES, Route, xrpc_operation_id, xrpc_path};
use axum::extract::State;
use axum::response::Response;
use serde_json::{Map, Value, json};
use std::sync::Arc;
use svc_spec::{
    MAX_AT_URI_PARAM_BYTES, MAX_TEXT_CHARS, ParamDef, ParamType, Query, QuerySet,
    VERIFICATION_KINDS,
};

pub(crate) async fn serve(State(state): State<Arc<AppState>>) -> Response {
    json_response(state.openapi.clone())
}

/// Patterns that accept exactly what the server's syntax checks accept (lengths aside, which
/// `maxLength` bounds), so that a client generated from this document sends nothing refused.
const DID_PATTERN: &str = "did:[a-z]+:[a-zA-Z0-9._:%-]*[a-zA-Z0-9._-]";
const LABEL: &str = "[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?";

fn handle_pattern() -> String {
    format!("(?:{LABEL}\\.)+[a-zA-Z](?:[a-zA-Z0-9-]{{0,61}}[a-zA-Z0-9])?")
}

fn at_uri_pattern() -> String {
    let nsid = format!(
        "[a-zA-Z](?:[a-zA-Z0-9-]{{0,61}}[a-zA-Z0-9])?(?:\\.{LABEL})+\\.[a-zA-Z][a-zA-Z0-9]{{0,62}}"
    );
    // A record key: 1-512 of [A-Za-z0-9._:~-], never "." or "..".
    let key = "[A-Za-z0-9_:~-][A-Za-z0-9._:~-]{0,511}|\\.(?:[A-Za-z0-9_:~-][A-Za-z0-9._:~-]{0,510}|\\.[A-Za-z0-9._:~-]{1,510})";
    format!(
        "^at://(?:{DID_PATTERN}|{})(?:/{nsid}(?:/(?:{key}))?)?$",
        handle_pattern()
    )
}

fn did_schema() -> Value {
    json!({"type": "string", "format": "did", "pattern": format!("^{DID_PATTERN}$"), "maxLength": 2048})
}

fn at_uri_schema() -> Value {
    json!({"type": "string", "format": "at-uri", "pattern": at_uri_pattern(), "maxLength": MAX_AT_URI_PARAM_BYTES})
}

fn parameter(param: &ParamDef) -> Value {
    let schema = match param.param_type {
        ParamType::String => {
            json!({"type": "string", "maxLength": MAX_TEXT_CHARS})
        }
        ParamType::Did => did_schema(),
        ParamType::AtUri => at_uri_schema(),
        ParamType::Enum => json!({"type": "string", "enum": param.values}),
    };
    json!({
        "name": param.name,
        "in": "query",
        "required": param.required,
        "description": param.description,
        "schema": schema,
    })
}

fn paging_parameters() -> Vec<Value> {
    vec![
        json!({"name": "limit", "in": "query", "required": false, "description": "Items per page.",
               "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}}),
        json!({"name": "offset", "in": "query", "required": false,
               "description": "Items to skip. With cursor only 0 (any other offset is a 400).",
               "schema": {"type": "integer", "minimum": 0, "maximum": u64::MAX, "default": 0}}),
        json!({"name": "cursor", "in": "query", "required": false,
               "description": "Opaque cursor from a previous answer: the page after it (keyset paging). With offset only 0 (any other offset is a 400).",
               "schema": {"type": "string", "minLength": 3, "maxLength": MAX_CURSOR_CHARS, "pattern": CURSOR_PATTERN}}),
    ]
}

/// The error answers every query may give, sized by the limits the server runs with.
fn errors(limits: &RequestLimits) -> Value {
    let error = |description: String| {
        json!({"description": description,
               "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}})
    };
    json!({
        "400": error("A parameter is missing or invalid.".into()),
        "414": error(format!("The URI is longer than {} bytes.", limits.max_uri_bytes)),
        "429": error("The client's rate is used (with --rate-limit); see Retry-After.".into()),
        "431": error(format!("The headers are larger than {} bytes.", limits.max_header_bytes)),
        "500": error("Internal failure.".into()),
        "503": error("Overloaded or too slow; see Retry-After.".into()),
    })
}

/// Comma-separated verification kinds, each trimmed of white space (as Rust's `str::trim`
/// sees it), empty ones dropped.
fn kinds_pattern() -> String {
    let kinds: Vec<&str> = VERIFICATION_KINDS.iter().map(|(kind, _)| *kind).collect();
    let space =
        "[\\t\\n\\x0B\\f\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]*";
    let token = format!("{space}(?:{})?{space}", kinds.join("|"));
    format!("^{token}(?:,{token})*$")
}

fn text_response(description: &str) -> Value {
    json!({"description": description, "content": {"text/plain": {"schema": {"type": "string"}}}})
}

pub(crate) fn document(
    queries: &QuerySet,
    kinds: &svc_spec::Kinds,
    version: &str,
    limits: &RequestLimits,
) -> Value {
    let mut paths = Map::new();
    for (_, query) in queries.public() {
        let operation = |id: String| query_operation(query, id, limits);
        let name = query.name();
        paths.insert(query.def().path.clone(), operation(name.to_string()));
        paths.insert(xrpc_path(name), operation(xrpc_operation_id(name)));
    }
    let names: Vec<&str> = queries.public().map(|(_, query)| query.name()).collect();
    let kind_names = kinds.names();
    for route in ROUTES.iter().filter(|route| route.listed) {
        let operation = |id: String| route_operation(route, id, limits, &names, &kind_names);
        paths.insert(route.path.into(), operation(route.name.to_string()));
        if route.xrpc {
            paths.insert(
                xrpc_path(route.name),
                operation(xrpc_operation_id(route.name)),
            );
        }
    }
    json!({
        "openapi": "3.2.0",
        "info": {"title": "svc record catalog", "version": version,
                 "description": "Read-only queries over the catalog of dev.svc.* records."},
        "paths": paths,
        "components": {"schemas": schemas()},
    })
}

/// A list query's operation, named `id`.
fn query_operation(query: &Query, id: String, limits: &RequestLimits) -> Value {
    let mut parameters: Vec<Value> = query.params().iter().map(parameter).collect();
    parameters.extend(paging_parameters());
    let mut responses = errors(limits);
    responses["200"] = json!({"description": "A page of matching records, in uri order.",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ListResponse"}}}});
    json!({"get": {
        "operationId": id,
        "summary": query.def().description,
        "tags": [query.kind()],
        "parameters": parameters,
        "responses": responses,
    }})
}

/// A hand-written route's operation, named `id`; `queries` are the names the change stream
/// may follow.
fn route_operation(
    route: &Route,
    id: String,
    limits: &RequestLimits,
    queries: &[&str],
    kind_names: &[String],
) -> Value {
    let mut operation = json!({
        "operationId": id,
        "responses": route_responses(route.endpoint, limits),
    });
    if let Some(summary) = route.summary {
        operation["summary"] = summary.into();
    }
    if route.endpoint == Endpoint::Changes {
        operation["parameters"] = json!([
            {"name": "query", "in": "query", "required": false,
             "description": "A query's name; its own parameters go beside it. Absent: every record's changes.",
             "schema": {"type": "string", "enum": queries}},
            {"name": "cursor", "in": "query", "required": false,
             "description": "The seq of the last message held: the stream goes on after it. Absent: from now.",
             "schema": {"type": "integer", "minimum": 0, "maximum": i64::MAX}}
        ]);
    }
    if route.endpoint == Endpoint::Search {
        operation["parameters"] = json!([
            {"name": "q", "in": "query", "required": true,
             "description": "The words to find: any order, any case, accents or not; \"a phrase\" in double quotes; the last word (3 characters or more, nothing after it) also as the start of a word. Words or phrases past the 16th are not searched; a query of no letter or digit finds nothing.",
             "schema": {"type": "string", "minLength": 1, "maxLength": svc_spec::search::MAX_QUERY_CHARS}},
            {"name": "kind", "in": "query", "required": false,
             "description": "Only records of this kind: its NSID, or its name on the command line.",
             "schema": {"type": "string", "enum": kind_names}},
            {"name": "limit", "in": "query", "required": false,
             "schema": {"type": "integer", "minimum": 1, "maximum": crate::params::MAX_LIMIT, "default": crate::params::DEFAULT_LIMIT}},
            {"name": "cursor", "in": "query", "required": false,
             "description": "From a previous answer: the page after it.",
             "schema": {"type": "string", "pattern": crate::params::SEARCH_CURSOR_PATTERN}}
        ]);
    }
    if route.endpoint == Endpoint::Routes {
        operation["parameters"] = routes_parameters();
    }
    if route.endpoint == Endpoint::Sufficiency {
        operation["parameters"] = json!([
            {"name": "lens_uri", "in": "query", "required": true, "schema": at_uri_schema()},
            {"name": "kinds", "in": "query", "required": true, "description": "Comma-separated verification kinds.",
             "schema": {"type": "string", "pattern": kinds_pattern()}},
            {"name": "hold", "in": "query", "required": false, "schema": {"type": "boolean", "default": true}}
        ]);
    }
    json!({"get": operation})
}

/// The errors every request may meet, and a 200 of JSON in the `schema` of the components.
fn json_answer(limits: &RequestLimits, description: &str, schema: &str) -> Value {
    let mut responses = errors(limits);
    responses["200"] = json!({"description": description, "content": {"application/json": {
        "schema": {"$ref": format!("#/components/schemas/{schema}")}}}});
    responses
}

fn route_responses(endpoint: Endpoint, limits: &RequestLimits) -> Value {
    match endpoint {
        Endpoint::Sufficiency => json_answer(
            limits,
            "Whether the lens has the listed verifications.",
            "Sufficiency",
        ),
        Endpoint::Search => json_answer(
            limits,
            "The best matches first (ties newest first). `total` counts matches exactly up to 10,000; past that it is 10,000 and `total_is_lower_bound` is true.",
            "SearchResponse",
        ),
        Endpoint::Routes => json_answer(
            limits,
            "The best chains first; none when no chain within max_hops joins the schemas (or either is unknown). A question whose search passes its bounds is a 400 naming the bound.",
            "Routes",
        ),
        Endpoint::Stats => {
            json!({"200": {"description": "Counts.", "content": {"application/json": {
            "schema": {"type": "object", "additionalProperties": {"type": "integer"}}}}}})
        }
        Endpoint::Healthz => json!({"200": text_response("The process runs.")}),
        Endpoint::Readyz => json!({"200": text_response("The catalog has caught up."),
            "503": text_response("Still catching up.")}),
        Endpoint::Metrics => json!({"200": {
        "description": "Prometheus metrics: the classic text format, or OpenMetrics when Accept asks for it.",
        "content": {
            crate::health::PROMETHEUS_TEXT: {"schema": {"type": "string"}},
            crate::health::OPENMETRICS: {"schema": {"type": "string"}}
        }}}),
        Endpoint::OpenApi => json!({"200": {"description": "This document.",
            "content": {"application/json": {"schema": {"type": "object"}}}}}),
        Endpoint::ChangesSocket => {
            json!({"101": {"description": "The WebSocket of the change stream."}})
        }
        Endpoint::Explorer
        | Endpoint::ExplorerQuery
        | Endpoint::ExplorerRecord
        | Endpoint::ExplorerAuthor
        | Endpoint::ExplorerCollection
        | Endpoint::ExplorerAsset
        | Endpoint::ExplorerSearch
        | Endpoint::ExplorerMap
        | Endpoint::ExplorerRoutes
        | Endpoint::ExplorerQueries => {
            json!({"200": text_response("A page for people.")})
        }
        Endpoint::Changes => {
            let mut responses = errors(limits);
            responses["200"] = json!({"description": "Server-Sent Events, each one JSON message \
                (`ChangeMessage`): a change of the answer, or a notice; an error ends the stream. \
                Comment lines keep a quiet stream open.",
                "content": {"text/event-stream": {
                    "itemSchema": {"$ref": "#/components/schemas/ChangeEvent"}}}});
            responses["503"] = json!({"description": "As many subscribers as the server takes are connected.",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}});
            responses
        }
    }
}

fn schemas() -> Value {
    json!({
        "Error": {"type": "object", "required": ["error", "message"], "properties": {
            "error": {"type": "string"}, "message": {"type": "string"}}},
        "ListItem": {"type": "object", "required": ["uri", "author", "rev", "record"], "properties": {
            "uri": {"type": "string", "format": "at-uri"}, "author": {"type": "string", "format": "did"},
            "rev": {"type": "string"}, "record": {"type": "object"},
            "labels": {"type": "array", "description": "The labels in force on the record or its author, from the labelers the service follows (--labeler); absent when none.",
                "items": {"$ref": "#/components/schemas/Label"}}}},
        "Label": {"type": "object", "required": ["src", "val", "cts"], "properties": {
            "src": {"type": "string", "description": "The labeler's DID."},
            "val": {"type": "string", "maxLength": 128},
            "cts": {"type": "string", "format": "date-time"}}},
        "ListResponse": {"type": "object", "required": ["items", "total", "limit", "offset"], "properties": {
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/ListItem"}},
            "total": {"type": "integer"}, "limit": {"type": "integer"}, "offset": {"type": "integer"},
            "cursor": {"type": "string", "description": "Present when more items follow."}}},
        "SearchResponse": {"type": "object", "required": ["items", "total", "limit", "offset"], "properties": {
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/ListItem"}},
            "total": {"type": "integer", "minimum": 0, "maximum": svc_catalog::SEARCH_COUNT_LIMIT},
            "total_is_lower_bound": {"type": "boolean", "description": "Present (true) when more matches exist than `total` says."},
            "limit": {"type": "integer"}, "offset": {"type": "integer"},
            "cursor": {"type": "string", "description": "Present when more items follow."}}},
        "Routes": routes_schema(),
        "Sufficiency": {"type": "object", "required": ["sufficient", "required_kinds", "require_holds"], "properties": {
            "sufficient": {"type": "boolean"}, "required_kinds": {"type": "array", "items": {"type": "string"}},
            "require_holds": {"type": "boolean"}}},
        "ChangeEvent": change_event(),
        "ChangeMessage": {"oneOf": [
            {"$ref": "#/components/schemas/Change"},
            {"$ref": "#/components/schemas/StreamInfo"},
            {"$ref": "#/components/schemas/StreamError"}]},
        "Change": change(),
        "StreamInfo": {"type": "object", "additionalProperties": false, "required": ["info", "oldest"],
            "description": "The changes after the cursor up to `oldest` are not kept one by one \
                (trimmed, or loaded in bulk): the stream goes on from `oldest`, and a subscriber \
                reads the answer again to catch up.",
            "properties": {"info": {"const": "OutdatedCursor"}, "oldest": {"type": "integer", "minimum": 0}}},
        "StreamError": {"type": "object", "additionalProperties": false, "required": ["error", "message"],
            "description": "Why the stream ends: a cursor past the newest change, or a subscriber \
                too slow to keep up (it resumes from the last seq it holds).",
            "properties": {"error": {"enum": ["FutureCursor", "ConsumerTooSlow"]},
                "message": {"type": "string"}}}
    })
}

/// One event of the change stream, as the Server-Sent Events format reads it (`data`, `event`
/// and `id`): its data is a JSON message, its type the default, its id a change's seq.
fn change_event() -> Value {
    json!({"type": "object", "required": ["data"], "properties": {
        "data": {"type": "string", "contentMediaType": "application/json",
            "contentSchema": {"$ref": "#/components/schemas/ChangeMessage"}},
        "event": {"const": "message"},
        "id": {"type": "string", "pattern": "^[0-9]+$",
            "description": "The seq of the change (a notice has none: the last one stands)."}}})
}

/// What a change did to the answer followed: `enter` and `update` with the list item,
/// `leave` with the uri alone.
fn change() -> Value {
    json!({"type": "object", "additionalProperties": false, "required": ["seq", "time", "op", "uri"],
        "properties": {
            "seq": {"type": "integer", "minimum": 0},
            "time": {"type": "string", "format": "date-time"},
            "op": {"enum": ["enter", "update", "leave"]},
            "uri": {"type": "string", "format": "at-uri"},
            "item": {"$ref": "#/components/schemas/ListItem"}},
        "if": {"properties": {"op": {"const": "leave"}}},
        "then": {"not": {"required": ["item"]}},
        "else": {"required": ["item"]}})
}

/// The parameters of `/v1/routes`.
fn routes_parameters() -> Value {
    let (default_hops, most_hops) = crate::lens_routes::HOPS;
    json!([
        {"name": "from", "in": "query", "required": true, "description": "The schema records are in: its at-uri.", "schema": at_uri_schema()},
        {"name": "to", "in": "query", "required": true, "description": "The schema they should reach: its at-uri.", "schema": at_uri_schema()},
        {"name": "max_hops", "in": "query", "required": false,
         "schema": {"type": "integer", "minimum": 1, "maximum": most_hops, "default": default_hops}},
        {"name": "kinds", "in": "query", "required": false,
         "description": "Comma-separated verification kinds each lens must have a holding verification of. Absent: a lens suffices when some verification holds and none is falsified.",
         "schema": {"type": "string", "pattern": kinds_pattern()}},
        {"name": "limit", "in": "query", "required": false,
         "schema": {"type": "integer", "minimum": 1, "maximum": 100, "default": 10}}
    ])
}

fn routes_schema() -> Value {
    let counts = json!({"type": "object", "required": ["held", "failed"], "properties": {
        "held": {"type": "integer"}, "failed": {"type": "integer"}}});
    let hop = json!({"type": "object",
        "required": ["lens", "from", "to", "class", "known_by", "verifications", "sufficient"],
        "properties": {
            "lens": {"type": "string", "format": "at-uri"},
            "from": {"type": "string", "format": "at-uri"},
            "to": {"type": "string", "format": "at-uri"},
            "class": {"type": ["string", "null"], "description": "The lens record's roundTripClass; null when it gives none or the lens is known only from encounters."},
            "known_by": {"type": "string", "enum": ["record", "encounters"]},
            "verifications": {"type": "object", "additionalProperties": counts},
            "sufficient": {"type": "boolean"}}});
    json!({"type": "object", "required": ["routes", "limit", "names"], "properties": {
        "routes": {"type": "array", "items": {"type": "object", "required": ["hops", "sufficient"],
            "properties": {"hops": {"type": "array", "items": hop}, "sufficient": {"type": "boolean"}}}},
        "limit": {"type": "integer"},
        "names": {"type": "object", "additionalProperties": {"type": "string"},
            "description": "The readable name of each schema the routes pass that the catalog holds a schema record of."}}})
}
