//! The change stream over WebSocket (`/xrpc/dev.svc.sync.subscribeChanges`): the same
//! subscription and the same messages as the Server-Sent Events form, each a JSON text frame.
//! Parameters are checked before the upgrade (a 400 JSON answer); the connection is pinged,
//! and one that stops answering is closed.

use crate::changes::{Message, Subscriber, subscribe, subscription};
use crate::{ApiError, AppState};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{self, Message as Frame};

/// How often a quiet connection is pinged, and how long it may go without answering.
const PING_EVERY: Duration = Duration::from_secs(20);
const SILENT_AT_MOST: Duration = Duration::from_secs(60);
/// A subscriber sends nothing but control frames: anything larger is refused.
const INCOMING_AT_MOST: usize = 4096;

/// The `Sec-WebSocket-Accept` of a WebSocket upgrade request; an error for anything else.
fn upgrade_key(headers: &HeaderMap) -> Result<String, ApiError> {
    let has = |name: header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|value| {
            value.to_str().is_ok_and(|value| {
                value
                    .split(',')
                    .any(|part| part.trim().eq_ignore_ascii_case(token))
            })
        })
    };
    let version = headers.get(header::SEC_WEBSOCKET_VERSION);
    let key = headers.get(header::SEC_WEBSOCKET_KEY);
    match key {
        Some(key) if has(header::UPGRADE, "websocket") && has(header::CONNECTION, "upgrade") => {
            if version.is_none_or(|v| v != "13") {
                return Err(ApiError::InvalidRequest(
                    "Sec-WebSocket-Version: only 13 is spoken".into(),
                ));
            }
            Ok(derive_accept_key(key.as_bytes()))
        }
        _ => Err(ApiError::InvalidRequest(
            "this method is a WebSocket subscription: ask with an Upgrade: websocket request, \
             or use /v1/changes (Server-Sent Events)"
                .into(),
        )),
    }
}

/// `GET /xrpc/dev.svc.sync.subscribeChanges`.
pub(crate) async fn serve(State(state): State<Arc<AppState>>, request: Request) -> Response {
    let raw = request.uri().query().map(str::to_string);
    let (answer, cursor) = match subscription(&state, raw.as_deref(), None) {
        Ok(subscription) => subscription,
        Err(error) => return error.into_response(),
    };
    let accept = match upgrade_key(request.headers()) {
        Ok(accept) => accept,
        Err(error) => return error.into_response(),
    };
    let subscriber = Subscriber::of(&request);
    let mut messages = match subscribe(&state, subscriber, answer, cursor).await {
        Ok(messages) => messages,
        Err(error) => return error.into_response(),
    };
    let upgrading = hyper::upgrade::on(request);
    tokio::spawn(async move {
        let Ok(upgraded) = upgrading.await else {
            return;
        };
        let config = WebSocketConfig::default()
            .max_message_size(Some(INCOMING_AT_MOST))
            .max_frame_size(Some(INCOMING_AT_MOST));
        let socket =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, Some(config))
                .await;
        if let Err(error) = pump(socket, &mut messages).await {
            tracing::debug!("a WebSocket subscriber left: {error}");
        }
    });
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let headers = response.headers_mut();
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    if let Ok(accept) = HeaderValue::from_str(&accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}

/// Sends the subscription's messages as text frames, pings the connection, and ends with a
/// close frame when the feed ends (after its last word) or the subscriber goes quiet.
async fn pump<S>(
    socket: WebSocketStream<S>,
    messages: &mut crate::changes::Subscription,
) -> Result<(), tungstenite::Error>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut incoming) = socket.split();
    let mut ping = tokio::time::interval(PING_EVERY);
    let mut heard = Instant::now();
    loop {
        tokio::select! {
            message = messages.next() => match message {
                Some(Message::Change { json, .. }) => sink.send(Frame::text(&*json)).await?,
                Some(Message::Notice { json, ends }) => {
                    sink.send(Frame::text(json)).await?;
                    if ends {
                        return sink.close().await;
                    }
                }
                None => return sink.close().await,
            },
            frame = incoming.next() => match frame {
                Some(Ok(Frame::Close(_))) | None => return Ok(()),
                Some(Ok(_)) => heard = Instant::now(),
                Some(Err(error)) => return Err(error),
            },
            _ = ping.tick() => {
                if heard.elapsed() > SILENT_AT_MOST {
                    return sink.close().await;
                }
                sink.send(Frame::Ping(Vec::new().into())).await?;
            }
        }
    }
}
