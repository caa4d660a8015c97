//! The hand-written routes, in one table that both the router and the OpenAPI document read,
//! so that a path, its operation's name and its summary are each written once. Every route
//! answers GET alone: the API is read-only (the CORS layer allows GET alone too).

use crate::health;

/// What answers a hand-written route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endpoint {
    Healthz,
    Readyz,
    Metrics,
    OpenApi,
    Stats,
    Sufficiency,
    Search,
    Routes,
    Changes,
    ChangesSocket,
    Explorer,
    ExplorerQuery,
    ExplorerRecord,
    ExplorerAuthor,
    ExplorerCollection,
    ExplorerAsset,
    ExplorerSearch,
    ExplorerMap,
    ExplorerRoutes,
    ExplorerQueries,
}

pub(crate) struct Route {
    pub path: &'static str,
    /// The OpenAPI operationId, and with `xrpc` the name of the XRPC method.
    pub name: &'static str,
    pub endpoint: Endpoint,
    /// Also served as the XRPC method `dev.svc.query.<name>`, as every list query is.
    pub xrpc: bool,
    /// Served only with the query API: an indexer that leaves queries to replicas still
    /// answers the probes and `/metrics`.
    pub api: bool,
    /// Listed in the OpenAPI document; the document does not list itself.
    pub listed: bool,
    pub summary: Option<&'static str>,
}

pub(crate) const ROUTES: &[Route] = &[
    Route {
        path: health::HEALTHZ,
        name: "healthz",
        endpoint: Endpoint::Healthz,
        xrpc: false,
        api: false,
        listed: true,
        summary: None,
    },
    Route {
        path: health::READYZ,
        name: "readyz",
        endpoint: Endpoint::Readyz,
        xrpc: false,
        api: false,
        listed: true,
        summary: None,
    },
    Route {
        path: "/metrics",
        name: "metrics",
        endpoint: Endpoint::Metrics,
        xrpc: false,
        api: false,
        listed: true,
        summary: None,
    },
    Route {
        path: "/openapi.json",
        name: "openapi",
        endpoint: Endpoint::OpenApi,
        xrpc: false,
        api: true,
        listed: false,
        summary: None,
    },
    Route {
        path: "/v1/stats",
        name: "stats",
        endpoint: Endpoint::Stats,
        xrpc: false,
        api: true,
        listed: true,
        summary: Some("Record counts per kind."),
    },
    Route {
        path: "/v1/verifications/sufficient",
        name: "verificationsSufficient",
        endpoint: Endpoint::Sufficiency,
        xrpc: true,
        api: true,
        listed: true,
        summary: Some(
            "Whether every listed verification kind has a verification of the lens (that holds).",
        ),
    },
    Route {
        path: "/v1/search",
        name: "search",
        endpoint: Endpoint::Search,
        xrpc: true,
        api: true,
        listed: true,
        summary: Some(
            "Records whose words match a query (words in any order, \"a phrase\", the last word's start), best match first.",
        ),
    },
    Route {
        path: "/v1/routes",
        name: "routes",
        endpoint: Endpoint::Routes,
        xrpc: true,
        api: true,
        listed: true,
        summary: Some(
            "The best chains of lenses from one schema to another: sufficient chains first, then fewer hops, then the weakest hop's round-trip class.",
        ),
    },
    Route {
        path: "/v1/changes",
        name: "changes",
        endpoint: Endpoint::Changes,
        xrpc: false,
        api: true,
        listed: true,
        summary: Some(
            "The catalog's changes as Server-Sent Events: every record's, or one query's answer's, from a cursor.",
        ),
    },
    // The explorer: pages for people, not operations of the API.
    page("/", "explorer", Endpoint::Explorer),
    page("/explore", "explorerQueries", Endpoint::ExplorerQueries),
    page(
        "/explore/",
        "explorerQueriesSlash",
        Endpoint::ExplorerQueries,
    ),
    page("/explore/{query}", "explorerQuery", Endpoint::ExplorerQuery),
    page(
        "/at/{did}/{collection}/{rkey}",
        "explorerRecord",
        Endpoint::ExplorerRecord,
    ),
    page(
        "/at/{did}/{collection}",
        "explorerCollection",
        Endpoint::ExplorerCollection,
    ),
    page("/at/{did}", "explorerAuthor", Endpoint::ExplorerAuthor),
    page("/assets/{file}", "explorerAsset", Endpoint::ExplorerAsset),
    page("/search", "explorerSearch", Endpoint::ExplorerSearch),
    page("/map", "explorerMap", Endpoint::ExplorerMap),
    page("/routes", "explorerRoutes", Endpoint::ExplorerRoutes),
    Route {
        path: "/xrpc/dev.svc.sync.subscribeChanges",
        name: "subscribeChanges",
        endpoint: Endpoint::ChangesSocket,
        xrpc: false,
        api: true,
        // A WebSocket subscription: its lexicon describes it, not the OpenAPI document.
        listed: false,
        summary: None,
    },
];

/// An explorer page or asset: served with the query API, unlisted.
const fn page(path: &'static str, name: &'static str, endpoint: Endpoint) -> Route {
    Route {
        path,
        name,
        endpoint,
        xrpc: false,
        api: true,
        listed: false,
        summary: None,
    }
}

/// The path of the XRPC method `dev.svc.query.<name>`.
pub(crate) fn xrpc_path(name: &str) -> String {
    format!("/xrpc/dev.svc.query.{name}")
}

/// The operationId of the XRPC form of the operation `name`.
pub(crate) fn xrpc_operation_id(name: &str) -> String {
    format!("xrpc.{name}")
}
