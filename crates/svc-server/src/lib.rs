//! The read-only HTTP API. Routes for list queries come from the query specification: each
//! query at its REST path and at `/xrpc/dev.svc.query.<name>`. Hand-written endpoints
//! (sufficiency, stats, health, metrics, OpenAPI) each live in their own module.

mod admin;
mod cache;
mod changes;
mod changes_ws;
mod client;
mod connections;
mod costly;
mod error;
mod every_request;
mod explorer;
mod forwarded;
mod guarded;
mod health;
mod json_head_errors;
mod lens_routes;
mod lens_tally;
mod limits;
mod list;
mod metrics;
mod open_slots;
mod openapi;
mod params;
mod plain;
mod replay_pace;
mod routes;
mod schema_names;
mod search;
mod socket_budget;
mod stats;
mod stream_hub;
mod sufficiency;
mod write_timed;

pub use admin::AdminAccess;
pub use client::ClientPrefixes;
pub use connections::{ConnectionLimits, RESERVED_DESCRIPTORS, serve};
pub use error::ApiError;
pub use forwarded::Cidr;
pub use limits::RequestLimits;
pub use metrics::HttpMetrics;
pub use params::list_paging;

use axum::Router;
use axum::body::Bytes;
use axum::routing::get;
use cache::ResponseCache;
use prometheus_client::registry::Registry;
use std::sync::Arc;
use std::time::Duration;
use svc_catalog::CatalogRead;
use svc_spec::{Kinds, QuerySet};

/// Why the catalog is not ready to answer (`Some(reason)`), asked at each `/readyz`.
pub type NotReady = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// What `/readyz` says beside readiness, one line each (an unverified source, repositories
/// waiting for resynchronisation); asked at each `/readyz`.
pub type ReadyNotes = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// Everything a running server needs, built once at start-up.
pub struct ServerConfig {
    pub catalog: Arc<dyn CatalogRead>,
    pub queries: QuerySet,
    /// Every record kind and what the explorer and stats show of it.
    pub kinds: Arc<Kinds>,
    /// Why the catalog has not caught up, or `None` once it has (`/readyz`).
    pub not_ready: NotReady,
    pub ready_notes: ReadyNotes,
    pub request_timeout: Duration,
    pub limits: RequestLimits,
    /// Proxies whose forwarding headers name the client (see `forwarded`).
    pub trusted_proxies: Vec<Cidr>,
    /// The admin methods are served on a router of their own (`--admin-listen`), and the
    /// public one answers them as a server without them.
    pub admin_apart: bool,
    /// Bytes of encoded answers kept for reuse; 0 turns the cache off.
    pub cache_bytes: usize,
    pub version: String,
    /// The query API; without it, only `/healthz`, `/readyz` and `/metrics` (an indexer that
    /// leaves queries to replicas).
    pub api: bool,
    /// Change-stream subscribers connected at once, at most.
    pub max_subscribers: usize,
    /// Change-stream subscribers from one client (its address prefix) at once, at most.
    pub max_subscribers_per_client: usize,
    /// Bytes per second one client's replays from a cursor send at most; 0: not paced.
    pub replay_bytes_per_second: u64,
    /// The admin methods' password and the catalog they write; `None`: no admin methods.
    pub admin: Option<AdminAccess>,
}

pub(crate) struct AppState {
    pub catalog: Arc<dyn CatalogRead>,
    pub queries: QuerySet,
    pub kinds: Arc<Kinds>,
    pub admin: admin::Admin,
    pub not_ready: NotReady,
    pub ready_notes: ReadyNotes,
    pub cache: ResponseCache,
    pub metrics: HttpMetrics,
    pub registry: Registry,
    pub openapi: Bytes,
    pub gate: limits::Gate,
    /// How each request's client is told.
    pub clients: client::ClientRules,
    /// Turns to build costly pages.
    pub costly: costly::CostlyGate,
    pub request_timeout: Duration,
    pub stream: StreamState,
    pub front: explorer::FrontCache,
}

/// The change stream's subscribers and the hub that feeds them (started with the first).
pub(crate) struct StreamState {
    pub subscribers: std::sync::atomic::AtomicUsize,
    pub max_subscribers: usize,
    /// Subscriptions by client, each at most `max_per_client`.
    pub per_client: std::sync::Mutex<std::collections::HashMap<client::Client, usize>>,
    pub max_per_client: usize,
    /// What each client's replays may send.
    pub replay: replay_pace::ReplayBudgets,
    hub: std::sync::OnceLock<Arc<stream_hub::Hub>>,
}

impl StreamState {
    /// The process's hub, started after the change `from` if this asks first.
    pub fn hub(&self, catalog: &Arc<dyn CatalogRead>, from: i64) -> &Arc<stream_hub::Hub> {
        self.hub
            .get_or_init(|| stream_hub::Hub::start(Arc::clone(catalog), from))
    }
}

/// The routers a process serves: the public one, and the admin methods' own when they are
/// served apart (`ServerConfig::admin_apart`).
pub struct Routers {
    pub public: Router,
    pub admin: Option<Router>,
}

/// Builds the public router (the admin methods on it, unless they are served apart).
pub fn router(config: ServerConfig, registry: Registry) -> Router {
    routers(config, registry).public
}

/// Builds the routers. `registry` holds the metrics of other layers (ingest); the server adds
/// its own and serves them all at `/metrics`.
pub fn routers(config: ServerConfig, mut registry: Registry) -> Routers {
    let metrics = HttpMetrics::default();
    metrics.register(&mut registry);
    let admin = admin::Admin::new(config.admin);
    admin.register(&mut registry);
    let openapi = Bytes::from(
        openapi::document(
            &config.queries,
            &config.kinds,
            &config.version,
            &config.limits,
        )
        .to_string(),
    );
    let state = Arc::new(AppState {
        catalog: config.catalog,
        queries: config.queries,
        kinds: config.kinds,
        admin,
        not_ready: config.not_ready,
        ready_notes: config.ready_notes,
        cache: ResponseCache::new(config.cache_bytes),
        metrics,
        registry,
        openapi,
        gate: limits::Gate::new(config.limits),
        clients: client::ClientRules {
            prefixes: config.limits.client_prefixes,
            trusted_proxies: config.trusted_proxies,
        },
        costly: costly::CostlyGate::new(
            config.limits.costly_builds,
            config.limits.costly_builds_per_client,
        ),
        request_timeout: config.request_timeout,
        stream: StreamState {
            subscribers: Default::default(),
            max_subscribers: config.max_subscribers,
            per_client: Default::default(),
            max_per_client: config.max_subscribers_per_client,
            replay: replay_pace::ReplayBudgets::new(config.replay_bytes_per_second),
            hub: Default::default(),
        },
        front: Default::default(),
    });
    let (api, admin_apart) = (config.api, config.admin_apart);
    let admin = admin_apart.then(|| {
        let router = admin_routes(Router::new()).fallback(error::not_found);
        every_layer(router, Arc::clone(&state))
    });
    Routers {
        public: every_layer(public_routes(&state, api, admin_apart), Arc::clone(&state)),
        admin,
    }
}

/// The public routes: the endpoints (the query API's when `api`), and the admin methods
/// unless they are served apart.
fn public_routes(state: &Arc<AppState>, api: bool, admin_apart: bool) -> Router<Arc<AppState>> {
    let mut router = Router::new();
    for route in routes::ROUTES.iter().filter(|route| api || !route.api) {
        router = router.route(route.path, handler(route.endpoint));
        if route.xrpc {
            router = router.route(&routes::xrpc_path(route.name), handler(route.endpoint));
        }
    }
    if api {
        router = query_routes(router, state);
    }
    // On every process, unless served apart: takedowns are written by the indexer, which may
    // leave queries to replicas; a replica answers that it does not write.
    router = match admin_apart {
        false => admin_routes(router),
        true => router
            .route(admin::UPDATE, axum::routing::post(admin::not_here))
            .route(admin::STATUS, get(admin::not_here)),
    };
    // A browser lost on a server that serves the explorer gets a page with the ways on.
    match api {
        true => router.fallback(explorer::nowhere),
        false => router.fallback(error::not_found),
    }
}

/// The admin methods' routes.
fn admin_routes(router: Router<Arc<AppState>>) -> Router<Arc<AppState>> {
    router
        .route(
            admin::UPDATE,
            axum::routing::post(admin::update)
                .layer(axum::extract::DefaultBodyLimit::max(admin::MAX_BODY_BYTES)),
        )
        .route(admin::STATUS, get(admin::status))
}

/// What every request of a router passes: the request layer, panics caught, CORS.
fn every_layer(router: Router<Arc<AppState>>, state: Arc<AppState>) -> Router {
    router
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&state),
            every_request::every_request,
        ))
        .layer(tower_http::catch_panic::CatchPanicLayer::custom(
            error::panicked,
        ))
        .layer(
            tower_http::cors::CorsLayer::new()
                .allow_origin(tower_http::cors::Any)
                .allow_methods([axum::http::Method::GET])
                .allow_headers(tower_http::cors::Any),
        )
        .with_state(state)
}

/// The list queries' routes, from the specification.
fn query_routes(router: Router<Arc<AppState>>, state: &AppState) -> Router<Arc<AppState>> {
    let mut router = router;
    for (position, query) in state.queries.public() {
        let handler = move |state, headers, query| list::serve(state, position, headers, query);
        router = router
            .route(&query.def().path, get(handler))
            .route(&routes::xrpc_path(query.name()), get(handler));
    }
    router
}

/// What answers each hand-written route.
fn handler(endpoint: routes::Endpoint) -> axum::routing::MethodRouter<Arc<AppState>> {
    use routes::Endpoint;
    match endpoint {
        Endpoint::Healthz => get(health::healthz),
        Endpoint::Readyz => get(health::readyz),
        Endpoint::Metrics => get(health::metrics),
        Endpoint::OpenApi => get(openapi::serve),
        Endpoint::Stats => get(stats::serve),
        Endpoint::Sufficiency => get(sufficiency::serve),
        Endpoint::Search => get(search::serve),
        Endpoint::Routes => get(lens_routes::serve),
        Endpoint::Changes => get(changes::serve),
        Endpoint::ChangesSocket => get(changes_ws::serve),
        Endpoint::Explorer => get(explorer::front),
        Endpoint::ExplorerQuery => get(explorer::query),
        Endpoint::ExplorerRecord => get(explorer::record),
        Endpoint::ExplorerAuthor => get(explorer::author),
        Endpoint::ExplorerCollection => get(explorer::collection),
        Endpoint::ExplorerAsset => get(explorer::asset),
        Endpoint::ExplorerSearch => get(explorer::search),
        Endpoint::ExplorerMap => get(explorer::map),
        Endpoint::ExplorerRoutes => get(explorer::routes),
        Endpoint::ExplorerQueries => get(explorer::queries),
    }
}
