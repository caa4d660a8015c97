//! The server's metrics: readiness, catalog gauges (set at scrape time from the per-kind
//! counts) and per-route request counts and latency.

use axum::http::StatusCode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::sync::{LazyLock, RwLock};
use std::time::Duration;

/// Connections closed because an answer made no progress for the write timeout. One for the
/// process: the accept loop that counts them is started apart from the router that owns the
/// other metrics, and a process serves one listener.
pub(crate) static WRITE_TIMEOUTS: LazyLock<Counter> = LazyLock::new(Counter::default);

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct KindLabel {
    pub kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RouteLabel {
    pub route: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RouteStatusLabels {
    pub route: String,
    pub status: u16,
}

fn latency_histogram() -> Histogram {
    // 100 µs to about 3 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

/// What became of list requests that reached the answer cache; each counter is the one of
/// its label in `svc_http_answers`.
pub(crate) struct AnswerOutcomes {
    /// Served from the cache.
    pub hit: Counter,
    /// Built from the catalog (every request, with the cache off).
    pub built: Counter,
    /// Waited for a build another request had started.
    pub shared: Counter,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OutcomeLabel {
    outcome: &'static str,
}

impl AnswerOutcomes {
    fn of(family: &Family<OutcomeLabel, Counter>) -> AnswerOutcomes {
        // A counter's clone shares its value: these are the family's own.
        let counter = |outcome| family.get_or_create(&OutcomeLabel { outcome }).clone();
        AnswerOutcomes {
            hit: counter("hit"),
            built: counter("built"),
            shared: counter("shared"),
        }
    }
}

pub struct HttpMetrics {
    pub(crate) ready: Gauge,
    pub(crate) answers: AnswerOutcomes,
    answer_outcomes: Family<OutcomeLabel, Counter>,
    pub(crate) catalog_records: Family<KindLabel, Gauge>,
    pub(crate) catalog_total: Gauge,
    requests: Family<RouteStatusLabels, Counter>,
    latency: Family<RouteLabel, Histogram, fn() -> Histogram>,
    routes: RwLock<HashMap<String, RouteMetrics>>,
    /// Change-stream subscribers connected now.
    pub(crate) stream_subscribers: Gauge,
    /// Subscribers given up on because they fell behind.
    pub(crate) stream_too_slow: Counter,
    /// Times a subscriber read from storage what a burst took past the hub.
    pub(crate) stream_caught_up: Counter,
    /// Changes the subscribers' replays read from storage, sent or not.
    pub(crate) stream_replay_read: Counter,
    /// Requests from a trusted proxy whose forwarding header could not be read.
    pub(crate) forwarded_unreadable: Counter,
}

impl Default for HttpMetrics {
    fn default() -> Self {
        let answer_outcomes = Family::default();
        HttpMetrics {
            ready: Gauge::default(),
            answers: AnswerOutcomes::of(&answer_outcomes),
            answer_outcomes,
            catalog_records: Family::default(),
            catalog_total: Gauge::default(),
            requests: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            routes: RwLock::default(),
            stream_subscribers: Gauge::default(),
            stream_too_slow: Counter::default(),
            stream_caught_up: Counter::default(),
            stream_replay_read: Counter::default(),
            forwarded_unreadable: Counter::default(),
        }
    }
}

impl HttpMetrics {
    pub(crate) fn register(&self, registry: &mut Registry) {
        self.register_stream(registry);
        registry.register(
            "svc_orchestrator_ready",
            "1 once the catalog has caught up",
            self.ready.clone(),
        );
        registry.register(
            "svc_orchestrator_catalog_records",
            "Records in the catalog by kind",
            self.catalog_records.clone(),
        );
        registry.register(
            "svc_orchestrator_catalog_total",
            "Records in the catalog",
            self.catalog_total.clone(),
        );
        registry.register(
            "svc_http_requests",
            "HTTP requests by route and status",
            self.requests.clone(),
        );
        registry.register(
            "svc_http_answers",
            "List requests by what the answer cache did: hit, built (from the catalog), shared (waited for a build under way)",
            self.answer_outcomes.clone(),
        );
        registry.register(
            "svc_http_request_duration_seconds",
            "HTTP request latency by route",
            self.latency.clone(),
        );
        registry.register(
            "svc_http_write_timeouts",
            "Connections closed because an answer made no progress for --write-timeout (a client that reads nothing)",
            WRITE_TIMEOUTS.clone(),
        );
    }

    /// The change stream's own, and the forwarding headers'.
    fn register_stream(&self, registry: &mut Registry) {
        registry.register(
            "svc_stream_subscribers",
            "Change-stream subscribers connected now",
            self.stream_subscribers.clone(),
        );
        let counters = [
            (
                "svc_stream_too_slow",
                "Change-stream subscribers given up on because they fell behind",
                &self.stream_too_slow,
            ),
            (
                "svc_stream_caught_up",
                "Times a change-stream subscriber read from storage what a burst took past the hub",
                &self.stream_caught_up,
            ),
            (
                "svc_stream_replay_read",
                "Changes the change-stream subscribers' replays read from storage, sent or not",
                &self.stream_replay_read,
            ),
            (
                "svc_http_forwarded_unreadable",
                "Requests from a trusted proxy whose X-Forwarded-For or Forwarded header could not be read (the proxy stood for the client)",
                &self.forwarded_unreadable,
            ),
        ];
        for (name, help, counter) in counters {
            registry.register(name, help, counter.clone());
        }
    }

    /// Counts a request answered with `status` on `route` (its path pattern) after `elapsed`.
    pub(crate) fn record(&self, route: &str, status: StatusCode, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let counted = self.with_route(route, |known| {
            known.latency.observe(seconds);
            let ok = status == StatusCode::OK;
            if ok {
                known.ok.inc();
            }
            ok
        });
        if !counted {
            self.requests
                .get_or_create(&RouteStatusLabels {
                    route: route.to_string(),
                    status: status.as_u16(),
                })
                .inc();
        }
    }

    /// Runs `use_metrics` on the route's own metrics, made on its first request: later requests
    /// find them without building labels, hashing them and locking each family.
    fn with_route<T>(&self, route: &str, use_metrics: impl FnOnce(&RouteMetrics) -> T) -> T {
        if let Ok(routes) = self.routes.read()
            && let Some(known) = routes.get(route)
        {
            return use_metrics(known);
        }
        let known = RouteMetrics {
            latency: self
                .latency
                .get_or_create(&RouteLabel {
                    route: route.to_string(),
                })
                .clone(),
            ok: self
                .requests
                .get_or_create(&RouteStatusLabels {
                    route: route.to_string(),
                    status: StatusCode::OK.as_u16(),
                })
                .clone(),
        };
        let answer = use_metrics(&known);
        if let Ok(mut routes) = self.routes.write() {
            routes.insert(route.to_string(), known);
        }
        answer
    }
}

/// One route's latency histogram and its count of 200 answers: clones sharing the families'
/// own values.
struct RouteMetrics {
    latency: Histogram,
    ok: Counter,
}
