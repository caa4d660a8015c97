//! What every request passes through on its way to its route: it is timed and counted by route
//! and status, admitted or refused by the request limits, and cut off at the time limit. One
//! middleware rather than one for each: every axum middleware clones the route's service and
//! boxes its future for each request it sees.

use crate::AppState;
use crate::error::timed_out;
use crate::limits::{Admission, admit};
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;
use std::time::Instant;

pub(crate) async fn every_request(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let route = request.extensions().get::<MatchedPath>().cloned();
    let started = Instant::now();
    let response = answer(&state, request, next).await;
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    state
        .metrics
        .record(route, response.status(), started.elapsed());
    response
}

async fn answer(state: &AppState, mut request: Request, next: Next) -> Response {
    // Who asks, told once for every per-client rule the request meets on its way.
    if let Some(asking) = state.clients.of_request(&request) {
        if asking.unreadable {
            state.metrics.forwarded_unreadable.inc();
        }
        request.extensions_mut().insert(asking);
    }
    // Held until the answer is built: the request counts as in flight until then.
    let _in_flight = match admit(&state.gate, &request) {
        Admission::Admitted(slot) => slot,
        Admission::Refused(refusal) => return refusal,
    };
    tokio::time::timeout(state.request_timeout, next.run(request))
        .await
        .unwrap_or_else(|_| timed_out(state.request_timeout))
}
