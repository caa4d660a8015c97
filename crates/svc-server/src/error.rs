//! Every error answer is JSON `{"error": "<code>", "message": "<detail>"}`.

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use std::time::Duration;

#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// A bad or missing parameter; the message names it.
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    Internal(String),
    /// The catalog's storage cannot be reached for now.
    #[error("the catalog is unavailable")]
    Unavailable,
    /// As many change-stream subscribers as the process takes are connected.
    #[error("as many subscribers as this server takes are connected; try again later")]
    TooManySubscribers,
    /// This client holds as many change-stream subscriptions as one client may.
    #[error("this client holds {0} subscriptions already, as many as one client may")]
    ClientSubscribers(usize),
    /// A costly page found no turn to be built (see `costly`).
    #[error("{}", busy_message(*.0))]
    Busy(crate::costly::Taken),
}

fn busy_message(taken: crate::costly::Taken) -> &'static str {
    match taken {
        crate::costly::Taken::ByThisClient => {
            "this client asks for too many costly pages (maps, searches) at once; try again shortly"
        }
        crate::costly::Taken::ByEveryone => {
            "as many costly pages (maps, searches) as this server builds at once are being built; try again shortly"
        }
    }
}

pub(crate) fn json_error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({ "error": code, "message": message }).to_string();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

impl ApiError {
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::ClientSubscribers(_) | ApiError::Busy(crate::costly::Taken::ByThisClient) => {
                StatusCode::TOO_MANY_REQUESTS
            }
            ApiError::Busy(crate::costly::Taken::ByEveryone) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::TooManySubscribers | ApiError::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn code(&self) -> &'static str {
        match self {
            ApiError::InvalidRequest(_) => "invalid_request",
            ApiError::ClientSubscribers(_) | ApiError::TooManySubscribers => "too_many_subscribers",
            ApiError::Internal(_) => "internal",
            ApiError::Unavailable => "unavailable",
            ApiError::Busy(_) => "busy",
        }
    }

    /// The answer with `Retry-After` when the error passes with time (storage back, a turn
    /// free).
    pub(crate) fn with_retry_after(&self, mut response: Response) -> Response {
        if matches!(self, ApiError::Unavailable | ApiError::Busy(_)) {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        response
    }

    /// What the client is told; an internal error is logged as it is told.
    pub(crate) fn message(&self) -> String {
        match self {
            ApiError::Internal(message) => {
                tracing::error!("internal error: {message}");
                message.clone()
            }
            ApiError::Unavailable => {
                "the catalog's database cannot be reached; try again shortly".into()
            }
            other => other.to_string(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let response = json_error(self.status(), self.code(), &self.message());
        self.with_retry_after(response)
    }
}

impl From<svc_catalog::CatalogError> for ApiError {
    fn from(error: svc_catalog::CatalogError) -> Self {
        match error {
            svc_catalog::CatalogError::Unavailable(detail) => {
                tracing::warn!("catalog unavailable: {detail}");
                ApiError::Unavailable
            }
            other => {
                // Storage detail goes to the log, not to the client.
                tracing::error!("catalog: {other}");
                ApiError::Internal("the catalog failed to answer".into())
            }
        }
    }
}

pub(crate) async fn not_found(uri: axum::http::Uri) -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        "not_found",
        &format!("no endpoint at {}", uri.path()),
    )
}

pub(crate) async fn method_not_allowed(method: axum::http::Method) -> Response {
    let mut response = json_error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        &format!("{method} is not allowed; the API is read-only (GET)"),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
    response
}

/// The answer to a request that outran the time limit.
pub(crate) fn timed_out(limit: Duration) -> Response {
    json_error(
        StatusCode::SERVICE_UNAVAILABLE,
        "timeout",
        &format!("the request took longer than {} ms", limit.as_millis()),
    )
}

pub(crate) fn panicked(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    json_error(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "the request failed unexpectedly",
    )
}
