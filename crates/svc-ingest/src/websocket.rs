//! WebSocket connections (the live source, labelers' label streams) opened on a TCP
//! connection made through a [`Reach`]: tokio-tungstenite would otherwise resolve the host
//! itself, past the private-address rule every other client of a network-named address
//! keeps. TLS is then made on that connection with the URL's own host, so the server's
//! certificate is checked against the name, not the address.

use svc_atproto::{AtprotoError, AtprotoResult, Reach};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;

pub(crate) type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// The WebSocket at `url`, reached only where `reach` allows (an address the network named
/// and `reach` does not allow is [`AtprotoError::Refused`]). The caller times it.
pub(crate) async fn connect(
    reach: Reach,
    url: &str,
    config: WebSocketConfig,
) -> AtprotoResult<Socket> {
    let stream = reach.connect(url).await?;
    let (socket, _) =
        tokio_tungstenite::client_async_tls_with_config(url, stream, Some(config), None)
            .await
            .map_err(|error| AtprotoError::Http {
                url: url.to_string(),
                message: format!("the WebSocket handshake: {error}"),
            })?;
    Ok(socket)
}
