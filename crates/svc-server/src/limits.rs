//! Per-request limits, each answered with JSON: the size of the URI (414) and of the headers
//! (431), requests in flight (503 with `Retry-After`), and an optional rate per client address
//! (429 with `Retry-After`). Health and readiness probes are exempt from the last two, so an
//! overloaded server still says whether it is alive.

use crate::client::{Client, ClientPrefixes};
use crate::error::json_error;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

#[derive(Debug, Clone, Copy)]
pub struct RequestLimits {
    pub max_uri_bytes: usize,
    pub max_header_bytes: usize,
    /// Requests being answered at once, at most.
    pub max_in_flight: usize,
    /// Requests per second per client (its address prefix; a burst of as many); `None`: no
    /// limit.
    pub rate_per_client: Option<u32>,
    /// How much of an address names one client.
    pub client_prefixes: ClientPrefixes,
    /// Costly pages (maps, searches, the front page) built at once, everyone's together.
    pub costly_builds: usize,
    /// Costly pages of one client built at once.
    pub costly_builds_per_client: usize,
}

/// Client addresses remembered at most before the idle ones are forgotten.
const REMEMBERED_CLIENTS: usize = 65_536;

struct Bucket {
    tokens: f64,
    refilled: Instant,
}

pub(crate) struct Gate {
    limits: RequestLimits,
    in_flight: Arc<Semaphore>,
    buckets: Mutex<HashMap<Client, Bucket>>,
}

impl Gate {
    pub fn new(limits: RequestLimits) -> Gate {
        Gate {
            limits,
            in_flight: Arc::new(Semaphore::new(limits.max_in_flight)),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// `Err(seconds to wait)` when the client has used its rate.
    fn take_token(&self, client: Client, rate: u32) -> Result<(), u64> {
        let rate = f64::from(rate.max(1));
        let now = Instant::now();
        let Ok(mut buckets) = self.buckets.lock() else {
            return Ok(());
        };
        if buckets.len() >= REMEMBERED_CLIENTS {
            // A bucket that has refilled holds nothing worth remembering.
            buckets.retain(|_, b| {
                b.tokens + now.duration_since(b.refilled).as_secs_f64() * rate < rate
            });
        }
        let bucket = buckets.entry(client).or_insert(Bucket {
            tokens: rate,
            refilled: now,
        });
        let elapsed = now.duration_since(bucket.refilled).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate).min(rate);
        bucket.refilled = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - bucket.tokens) / rate).ceil().max(1.0) as u64)
        }
    }
}

fn with_retry_after(mut response: Response, seconds: u64) -> Response {
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    response
}

fn header_bytes(request: &Request) -> usize {
    request
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum()
}

/// Whether a request may be answered now.
pub(crate) enum Admission {
    /// With the in-flight slot it holds while it is answered (none for health probes, which
    /// are exempt from the rate and the cap).
    Admitted(Option<OwnedSemaphorePermit>),
    /// With the answer that refuses it.
    Refused(Response),
}

pub(crate) fn admit(gate: &Gate, request: &Request) -> Admission {
    let limits = gate.limits;
    // The request target as sent (origin form), measured without building a string.
    let uri = request.uri();
    let uri_bytes = uri
        .path_and_query()
        .map_or(0, |target| target.as_str().len())
        + uri
            .authority()
            .map_or(0, |authority| authority.as_str().len());
    if uri_bytes > limits.max_uri_bytes {
        return Admission::Refused(json_error(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            &format!(
                "the request URI has {uri_bytes} bytes; at most {} are accepted",
                limits.max_uri_bytes
            ),
        ));
    }
    let headers = header_bytes(request);
    if headers > limits.max_header_bytes {
        return Admission::Refused(json_error(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
            &format!(
                "the request headers have {headers} bytes; at most {} are accepted",
                limits.max_header_bytes
            ),
        ));
    }
    if crate::health::is_probe(request.uri().path()) {
        return Admission::Admitted(None);
    }
    if let Some(rate) = limits.rate_per_client {
        let client = crate::client::client_of_request(request);
        if let Some(Err(wait)) = client.map(|client| gate.take_token(client, rate)) {
            let message =
                format!("more than {rate} requests per second from this address's network");
            let response = json_error(StatusCode::TOO_MANY_REQUESTS, "rate_limited", &message);
            return Admission::Refused(with_retry_after(response, wait));
        }
    }
    match Arc::clone(&gate.in_flight).try_acquire_owned() {
        Ok(permit) => Admission::Admitted(Some(permit)),
        Err(_) => {
            let message = format!(
                "{} requests are being answered; try again shortly",
                limits.max_in_flight
            );
            let response = json_error(StatusCode::SERVICE_UNAVAILABLE, "overloaded", &message);
            Admission::Refused(with_retry_after(response, 1))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_gets_its_rate_then_waits() {
        let gate = Gate::new(RequestLimits {
            max_uri_bytes: 8192,
            max_header_bytes: 16384,
            max_in_flight: 8,
            rate_per_client: Some(3),
            client_prefixes: ClientPrefixes::default(),
            costly_builds: 2,
            costly_builds_per_client: 1,
        });
        let client = |last: u8| Client::of([192, 0, 2, last].into(), ClientPrefixes::default());
        let one = client(1);
        for _ in 0..3 {
            assert_eq!(gate.take_token(one, 3), Ok(()));
        }
        assert_eq!(gate.take_token(one, 3), Err(1));
        assert_eq!(
            gate.take_token(client(2), 3),
            Err(1),
            "an address of the same /24 shares its rate"
        );
        let other = Client::of([198, 51, 100, 2].into(), ClientPrefixes::default());
        assert_eq!(
            gate.take_token(other, 3),
            Ok(()),
            "another network has its own"
        );
    }
}
