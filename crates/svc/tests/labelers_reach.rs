//! A labeler's DID document may name any address as its label stream. Run as a public
//! service, svc opens no WebSocket to a loopback one, named by a host name that resolves there
//! (the WebSocket client resolves names itself, so the rule must be kept before it does); it
//! logs and counts the refusal and tries again with backoff. With `--allow-private-peers` the
//! same stream is followed.

use svc_testkit as common;

use common::labeler::HostileLabeler;
use common::*;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

/// The labeler's DID as the directory below knows it.
const LABELER: &str = "did:plc:labelerbyname";
/// How long a public svc is watched for a connection it must not make.
const WATCHED: Duration = Duration::from_secs(8);

/// The hostile labeler's DID document, read from its own `did:web` host.
fn labeler_document(labeler: &HostileLabeler) -> Value {
    let host = labeler
        .did
        .strip_prefix("did:web:")
        .expect("a did:web labeler")
        .replace("%3A", ":");
    let url = format!("http://{host}/.well-known/did.json");
    http()
        .get(url)
        .send()
        .expect("its document")
        .json()
        .expect("JSON")
}

/// A PLC directory answering every request with `document`, one request per connection.
fn directory(document: Value) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        for mut stream in listener.incoming().map_while(Result::ok) {
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head);
            let body = document.to_string();
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    url
}

/// The labeler's key and stream, its stream named `http://localhost:PORT`, under [`LABELER`].
fn document_naming_localhost(labeler: &HostileLabeler) -> Value {
    let own = labeler_document(labeler);
    let key = own["verificationMethod"][0]["publicKeyMultibase"].clone();
    let endpoint = own["service"][0]["serviceEndpoint"]
        .as_str()
        .expect("an endpoint")
        .replace("127.0.0.1", "localhost");
    assert!(endpoint.starts_with("http://localhost:"), "{endpoint}");
    json!({
        "id": LABELER,
        "verificationMethod": [{"id": format!("{LABELER}#atproto_label"), "type": "Multikey",
            "controller": LABELER, "publicKeyMultibase": key}],
        "service": [{"id": "#atproto_labeler", "type": "AtprotoLabeler",
            "serviceEndpoint": endpoint}]
    })
}

fn refusals(server: &Server) -> u64 {
    let series = format!("svc_labeler_refused_total{{labeler=\"{LABELER}\"}} ");
    let text = server.get_raw("/metrics").2;
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .map_or(0, |value| value as u64)
}

#[test]
fn a_labeler_stream_on_a_private_address_by_name_is_never_connected_to_in_public() {
    let labeler = HostileLabeler::start();
    let plc = directory(document_naming_localhost(&labeler));
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--firehose",
        "none",
        "--labeler",
        LABELER,
        "--plc-url",
        plc.as_str(),
    ];

    let mut public = Server::listening_in_public(dir.path().join("public.db"), &args);
    public.wait_ready();
    let started = Instant::now();
    while started.elapsed() < WATCHED {
        assert_eq!(
            labeler.cursors(),
            [],
            "a public svc opened the label stream on loopback"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let refused = public.wait_log("a loopback address", Duration::from_secs(1));
    eprintln!("{refused}");
    assert!(refused.contains(LABELER), "{refused}");
    // Tried again with backoff, each refusal counted.
    let counted = refusals(&public);
    assert!(counted >= 3, "{counted} refusals counted");
    assert_eq!(labeler.cursors(), []);
    drop(public);

    let allowed = Server::launch(dir.path().join("allowed.db"), &args);
    let started = Instant::now();
    while labeler.cursors().is_empty() {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "with --allow-private-peers the stream was not followed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(refusals(&allowed), 0);
}
