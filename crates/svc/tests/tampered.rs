//! A proxy between the reference PDS's firehose and svc changes real frames in flight: a
//! record's text altered inside the commit's blocks (the block no longer hashes to its CID),
//! or the `prevData` the commit's proof must reach, or an operation's CID, or a frame never
//! sent (the next commit's `since` skips it), or an earlier genuine frame sent again.
//! svc refuses each such commit, counts it by reason and applies everything around it; the
//! gap the refusals leave in the repository's chain is closed by reading it whole.
//! Passes without running when the peers cannot start outside CI.

use svc_testkit as common;

use common::peers::peers;
use common::replay::spawn_async;
use common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};

/// A record whose text the proxy changes in its block: `Tampered` becomes `Xampered`.
const CHANGED: &[u8] = b"Tampered";
/// A record whose commit the proxy gives another `prevData`.
const UNPROVEN: &[u8] = b"Unproven";
/// A record whose operation the proxy gives another CID than the tree holds.
const SWAPPED: &[u8] = b"Swapped";
/// A record whose commit frame the proxy never sends: the next commit's `since` skips it.
const SKIPPED: &[u8] = b"Skipped";
/// A record whose commit frame the proxy sends again, after the one holding `AFTER`.
const REPLAYED: &[u8] = b"Replayed";
const AFTER: &[u8] = b"After";

fn position(frame: &[u8], bytes: &[u8]) -> Option<usize> {
    frame.windows(bytes.len()).position(|w| w == bytes)
}

fn tampered(mut frame: Vec<u8>) -> Vec<u8> {
    if let Some(at) = position(&frame, CHANGED) {
        frame[at] = b'X';
    }
    if position(&frame, UNPROVEN).is_some()
        && let Some(at) = position(&frame, b"prevData")
    {
        // After the key: tag 42, a 37-byte string, the multibase 0 and the CID's 4-byte
        // prefix; the byte changed is in the digest.
        let digest = at + "prevData".len() + 2 + 2 + 1 + 4;
        frame[digest + 5] ^= 0x01;
    }
    if position(&frame, SWAPPED).is_some()
        && let Some(ops) = position(&frame, b"\x63ops")
        && let Some(link) = position(&frame[ops..], &[0xd8, 0x2a, 0x58, 0x25, 0x00])
    {
        // The first link after the body's `ops` key is the first op's CID; a digest byte.
        frame[ops + link + 5 + 4 + 7] ^= 0x01;
    }
    frame
}

/// What a proxy sends on for one frame of the PDS's firehose: no frame, it, or more.
type Rewrite = Box<dyn FnMut(Vec<u8>) -> Vec<Vec<u8>> + Send>;

/// Starts a proxy to `upstream` (the PDS's `ws://` base) that passes each connection's frames
/// through a rewrite made for it by `rewrite`; its `ws://` base.
fn frame_proxy(upstream: &str, rewrite: impl Fn() -> Rewrite + Send + Sync + 'static) -> String {
    let upstream = upstream.trim_end_matches('/').to_string();
    let rewrite = std::sync::Arc::new(rewrite);
    let (sender, receiver) = std::sync::mpsc::channel();
    spawn_async(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        sender
            .send(listener.local_addr().expect("address"))
            .expect("port");
        while let Ok((stream, _)) = listener.accept().await {
            let (upstream, rewrite) = (upstream.clone(), rewrite());
            tokio::spawn(async move {
                let _ = relay(stream, &upstream, rewrite).await;
            });
        }
    });
    format!("ws://{}", receiver.recv().expect("the proxy started"))
}

// The callback type is the handshake API's own.
#[allow(clippy::result_large_err)]
async fn relay(stream: tokio::net::TcpStream, upstream: &str, mut rewrite: Rewrite) -> Option<()> {
    let mut path = String::new();
    let callback = |request: &Request, response: Response| {
        path = request.uri().to_string();
        Ok(response)
    };
    let client = tokio_tungstenite::accept_hdr_async(stream, callback)
        .await
        .ok()?;
    let (server, _) = tokio_tungstenite::connect_async(format!("{upstream}{path}"))
        .await
        .ok()?;
    let (mut to_client, mut from_client) = client.split();
    let (mut to_server, mut from_server) = server.split();
    loop {
        tokio::select! {
            message = from_server.next() => match message?.ok()? {
                Message::Binary(frame) => {
                    for frame in rewrite(frame.to_vec()) {
                        to_client.send(Message::Binary(frame.into())).await.ok()?;
                    }
                }
                other => to_client.send(other).await.ok()?,
            },
            message = from_client.next() => to_server.send(message?.ok()?).await.ok()?,
        }
    }
}

/// The tampering proxy's rewrite of one connection: each frame changed as [`tampered`] says,
/// the one holding [`SKIPPED`] dropped, and the one holding [`REPLAYED`] sent again after the
/// one holding [`AFTER`].
fn tampering() -> Rewrite {
    let mut kept: Option<Vec<u8>> = None;
    Box::new(move |frame| {
        if position(&frame, REPLAYED).is_some() {
            kept = Some(frame.clone());
        }
        if position(&frame, SKIPPED).is_some() {
            return Vec::new();
        }
        let after = position(&frame, AFTER).is_some();
        let mut sent = vec![tampered(frame)];
        sent.extend(kept.take_if(|_| after));
        sent
    })
}

fn vocab(name: &str) -> serde_json::Value {
    json!({"$type": "dev.svc.vocab", "name": name, "world": "open",
           "occurredAt": "2026-01-01T00:00:00Z"})
}

#[test]
fn commits_changed_in_flight_are_refused_and_the_rest_applied() {
    let Some(peers) = peers() else { return };
    let source = frame_proxy(&peers.pds_ws, tampering);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path().join("catalog.db"),
        &["--firehose", source.as_str(), "--ready-lag", "5s"],
    );
    let alice = peers.create_account("tampered");
    peers.create_record(&alice, "dev.svc.vocab", vocab("Before"), None);
    peers.create_record(&alice, "dev.svc.vocab", vocab("Tampered"), None);
    peers.create_record(&alice, "dev.svc.vocab", vocab("Unproven"), None);
    peers.create_record(&alice, "dev.svc.vocab", vocab("Swapped"), None);
    peers.create_record(&alice, "dev.svc.vocab", vocab("Skipped"), None);
    peers.create_record(&alice, "dev.svc.vocab", vocab("Replayed"), None);
    peers.create_record(&alice, "dev.svc.vocab", vocab("After"), None);
    let by_name = |name: &str| format!("/v1/vocabularies/by-name?name={name}");
    // The refused commits leave a gap in alice's chain: the next commit breaks it, and her
    // repository is read whole from the PDS, which restores exactly what she published.
    server.wait_for("/v1/stats", Duration::from_secs(20), |_| {
        server_metrics_hold(&server, "svc_ingest_resyncs_total{outcome=\"done\"}")
    });
    server.wait_for(&by_name("After"), Duration::from_secs(10), |b| {
        b["total"] == 1
    });
    for name in [
        "Before", "Tampered", "Unproven", "Swapped", "Skipped", "Replayed", "After",
    ] {
        assert_eq!(server.get(&by_name(name)).1["total"], 1, "{name}");
    }
    assert_eq!(server.get(&by_name("Xampered")).1["total"], 0);
    let metrics = server.get_raw("/metrics").2;
    for (reason, count) in [("cid", 1), ("proof", 2), ("chain", 1)] {
        assert!(
            metrics.contains(&format!(
                "svc_ingest_unverified_total{{reason=\"{reason}\"}} {count}"
            )),
            "{reason}: {metrics}"
        );
    }
    // The frame sent again is refused, whether its repository is still being read
    // (desynchronized) or its revision is behind the chain (rev).
    server.wait_for("/v1/stats", Duration::from_secs(10), |_| {
        let metrics = server.get_raw("/metrics").2;
        let refused = |reason: &str| {
            metrics
                .lines()
                .find_map(|line| {
                    line.strip_prefix(&format!(
                        "svc_ingest_unverified_total{{reason=\"{reason}\"}} "
                    ))
                })
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0)
        };
        refused("rev") + refused("desynchronized") >= 1
    });
}

fn server_metrics_hold(server: &Server, line: &str) -> bool {
    server.get_raw("/metrics").2.contains(line)
}

/// A record whose commit the forging proxy follows with a forged `#account` frame saying
/// its author was deleted.
const FORGED: &[u8] = b"Forged";

/// A relay's unsigned `#account` frame: `did` deleted, numbered as the frame before it.
fn forged_deletion(did: &str, seq: i64) -> Vec<u8> {
    use svc_repo::dagcbor::{Cbor, encode};
    let header = Cbor::Map(vec![
        ("t".into(), Cbor::Text("#account".into())),
        ("op".into(), Cbor::Integer(1)),
    ]);
    let body = Cbor::Map(vec![
        ("did".into(), Cbor::Text(did.into())),
        ("seq".into(), Cbor::Integer(i128::from(seq))),
        ("time".into(), Cbor::Text(NOW.into())),
        ("active".into(), Cbor::Bool(false)),
        ("status".into(), Cbor::Text("deleted".into())),
    ]);
    let mut frame = encode(&header).expect("a header");
    frame.extend(encode(&body).expect("a body"));
    frame
}

/// The `seq` of a commit frame.
fn seq_of(frame: &[u8]) -> Option<i64> {
    let (_, body) = svc_repo::dagcbor::decode(frame).ok()?;
    let (body, _) = svc_repo::dagcbor::decode(body).ok()?;
    body.get("seq").and_then(svc_repo::dagcbor::Cbor::as_i64)
}

/// A rewrite that sends, after each commit holding [`FORGED`], a forged deletion of the
/// account `victim` names.
fn forging(victim: std::sync::Arc<std::sync::Mutex<String>>) -> Rewrite {
    Box::new(move |frame| {
        let forged = position(&frame, FORGED)
            .and_then(|_| seq_of(&frame))
            .map(|seq| forged_deletion(&victim.lock().unwrap(), seq));
        std::iter::once(frame).chain(forged).collect()
    })
}

/// A forged `#account` deletion hides its account's records only until the account's own PDS
/// shows it alive, and then they are all served again; an account the PDS really deletes is
/// removed once the PDS confirms it.
#[test]
fn a_forged_deletion_deletes_nothing_and_a_real_one_is_confirmed() {
    let Some(peers) = peers() else { return };
    let victim = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let forged_for = victim.clone();
    let source = frame_proxy(&peers.pds_ws, move || forging(forged_for.clone()));
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path().join("catalog.db"),
        &["--firehose", source.as_str(), "--ready-lag", "5s"],
    );
    let alice = peers.create_account("forged");
    *victim.lock().unwrap() = alice.did.clone();
    let by_name = |name: &str| format!("/v1/vocabularies/by-name?name={name}");
    peers.create_record(&alice, "dev.svc.vocab", vocab("Kept"), None);
    server.wait_for(&by_name("Kept"), Duration::from_secs(10), |b| {
        b["total"] == 1
    });
    peers.create_record(&alice, "dev.svc.vocab", vocab("Forged"), None);
    server.wait_for("/v1/stats", Duration::from_secs(20), |_| {
        server_metrics_hold(&server, "svc_ingest_resyncs_total{outcome=\"done\"}")
    });
    for name in ["Kept", "Forged"] {
        server.wait_for(&by_name(name), Duration::from_secs(10), |b| b["total"] == 1);
    }
    // A real deletion, which the PDS itself announces and then confirms.
    let bob = peers.create_account("deleted");
    peers.create_record(&bob, "dev.svc.vocab", vocab("Doomed"), None);
    server.wait_for(&by_name("Doomed"), Duration::from_secs(10), |b| {
        b["total"] == 1
    });
    let deleted = peers
        .admin(peers.http().post(format!(
            "{}/xrpc/com.atproto.admin.deleteAccount",
            peers.pds
        )))
        .json(&json!({"did": bob.did}))
        .send()
        .expect("deleteAccount");
    assert!(deleted.status().is_success(), "{:?}", deleted.text());
    server.wait_for("/v1/stats", Duration::from_secs(20), |_| {
        server_metrics_hold(&server, "svc_ingest_resyncs_total{outcome=\"account\"}")
    });
    assert_eq!(server.get(&by_name("Doomed")).1["total"], 0);
    assert_eq!(server.get(&by_name("Kept")).1["total"], 1);
}
