//! What hostile requests can make a running server hold, and what it answers to requests its
//! HTTP layer cannot read: the answer cache keeps its keys, its ghosts and its answers within
//! `--cache-mb`, and every answer, hyper's own included, is a JSON error body.

use svc_testkit as common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;

/// The server's resident memory, in KiB.
fn rss_kib(server: &Server) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.child.id()))
        .expect("the server's /proc status");
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().strip_suffix("kB"))
        .and_then(|value| value.trim().parse().ok())
        .expect("VmRSS in kB")
}

/// Unpadded base64url, as cursors are written.
fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let word = chunk
            .iter()
            .enumerate()
            .fold(0u32, |word, (i, b)| word | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[(word >> (18 - 6 * i) & 63) as usize]));
        }
    }
    out
}

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/catalog.jsonl");

/// A lens at-uri of 2,000 characters, told apart by `n`.
fn long_lens(n: usize) -> String {
    let tail = "/dev.panproto.schema.lens/1";
    let did = format!("did:plc:{n:08}");
    let padding = "a".repeat(2000 - "at://".len() - did.len() - tail.len());
    format!("at://{did}{padding}{tail}")
}

/// A cursor of 4,000 characters (a position of 2,998 bytes), told apart by `n`.
fn long_cursor(n: usize) -> String {
    let position = format!("u:at://did:plc:{n:08}/dev.svc.bounty/");
    let cursor = base64url(format!("{position}{}", "x".repeat(3000 - position.len())).as_bytes());
    assert_eq!(cursor.len(), 4000);
    cursor
}

/// 100 sufficiency questions of 59 KB (a 2,000-character lens, `kinds` listing one kind 3,800
/// times) and 100 list pages after distinct 4,000-character cursors, to a server whose cache
/// may hold 1 MiB: the server's memory grows by less than 16 MB, and it answers as before.
/// A build that kept such keys and their ghosts grew by 20 MB in these 200 requests (and by
/// 77 MB in 2,000), so 64 MB would not tell it apart; this one grows by well under 1 MB.
fn hostile_requests_hold_no_memory_beyond_the_cache_budget(backend: Backend) {
    let _cluster = shared_cluster();
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = backend.fresh_db(dir.path()) else {
        return;
    };
    let server = Server::start(&db, &["--import", EXAMPLE, "--cache-mb", "1"]);
    let stats = server.get("/v1/stats").1;
    let lens = server
        .get("/v1/verifications/by-kind?kind=roundtrip-test&limit=1")
        .1["items"][0]["record"]["lens"]["uri"]
        .as_str()
        .expect("a verification's lens")
        .to_string();
    let sufficiency = format!(
        "/v1/verifications/sufficient?lens_uri={}&kinds=roundtrip-test,property-test",
        encode(&lens)
    );
    let answer = server.get(&sufficiency);
    assert_eq!(answer.0, 200, "{}", answer.1);
    let page = server.get("/v1/bounties/open?limit=3");
    // Once of each kind first, so that what grows after is what the requests leave behind,
    // not the first use of a thread or a connection.
    let kinds = vec!["roundtrip-test"; 3800].join(",");
    let hostile_sufficiency = |n| {
        format!(
            "/v1/verifications/sufficient?lens_uri={}&kinds={kinds}",
            long_lens(n)
        )
    };
    let hostile_page = |n| format!("/v1/bounties/open?cursor={}", long_cursor(n));
    server.get(&hostile_sufficiency(1_000_000));
    server.get(&hostile_page(1_000_000));
    let before = rss_kib(&server);
    for n in 0..100 {
        let request = hostile_sufficiency(n);
        assert!(request.len() > 59_000);
        let (status, body) = server.get(&request);
        assert_eq!(status, 200, "{body}");
        let echoed = body["required_kinds"].as_array().expect("required_kinds");
        assert_eq!(echoed.len(), 3800, "every token echoed, repeats too");
        assert_eq!(body["sufficient"], false);
        let (status, body) = server.get(&hostile_page(n));
        assert_eq!(status, 200, "{body}");
    }
    let after = rss_kib(&server);
    eprintln!("{backend:?}: RSS {before} KiB before 200 hostile requests, {after} KiB after");
    assert!(
        after < before + 16 * 1024,
        "RSS grew from {before} KiB to {after} KiB"
    );
    assert_eq!(server.get("/v1/stats").1, stats);
    assert_eq!(server.get(&sufficiency), answer);
    assert_eq!(server.get("/v1/bounties/open?limit=3"), page);
}

each_backend!(hostile_requests_hold_no_memory_beyond_the_cache_budget);

#[test]
fn requests_hyper_cannot_read_get_json_errors() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path().join("catalog.db"), &[]);
    let long_target = format!("GET /v1/stats?x={} HTTP/1.1\r\n\r\n", "a".repeat(70_000));
    let cases: [(&[u8], u16, &str); 7] = [
        (b"GET / HTTP/2.0\r\n\r\n", 400, "unsupported_http_version"),
        (
            b"GET /v1/stats HTTP/9.9\r\nHost: x\r\n\r\n",
            400,
            "unsupported_http_version",
        ),
        (b"garbage\r\n\r\n", 400, "bad_request"),
        (b"GE(T / HTTP/1.1\r\n\r\n", 400, "bad_request"),
        (b"GET / HTTP/1.1\r\nno colon\r\n\r\n", 400, "bad_request"),
        (
            b"GET /v1/stats HTTP/1.1\r\nContent-Length: x\r\n\r\n",
            400,
            "bad_request",
        ),
        (long_target.as_bytes(), 414, "uri_too_long"),
    ];
    for (raw, status, code) in cases {
        let shown = String::from_utf8_lossy(&raw[..raw.len().min(40)]).into_owned();
        let (got, content_type, body) = answer_to(&server, raw);
        assert_eq!(got, status, "{shown:?}: {body}");
        assert_eq!(content_type, "application/json", "{shown:?}");
        let body: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{shown:?}: not JSON ({e}): {body:?}"));
        assert_eq!(body["error"], code, "{shown:?}: {body}");
        assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    }
    // A request after an answer on the same connection (a query's: a probe's connection
    // serves the probe alone): the answer goes out untouched, then the error.
    let address = server.url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .write_all(b"GET /v1/stats HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/2.0\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let second_at = answer.find("HTTP/1.1 400").expect("the second answer");
    let (first, second) = answer.split_at(second_at);
    assert!(first.starts_with("HTTP/1.1 200 OK\r\n"), "{first}");
    assert!(first.ends_with('}'), "{first}");
    assert!(
        second.starts_with("HTTP/1.1 400 Bad Request\r\n"),
        "{second}"
    );
    assert!(second.contains("\r\ncontent-type: application/json\r\n"));
    assert!(second.ends_with("}"), "{second}");
    // And the server answers as ever.
    assert_eq!(server.get("/v1/stats").0, 200);
}
