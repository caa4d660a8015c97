//! What the server does with clients that stall, linger, flood or send oversized requests.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn address(server: &Server) -> String {
    server.url.trim_start_matches("http://").to_string()
}

/// A connection that sent part of a request head and then nothing.
fn stall(server: &Server) -> TcpStream {
    let mut stream = TcpStream::connect(address(server)).expect("connect");
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        .expect("write");
    stream
}

/// How long after `started` the server closed `stream` (EOF or reset), if within `within`.
fn closed_after(mut stream: TcpStream, started: Instant, within: Duration) -> Option<Duration> {
    let remaining = within
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(1));
    stream.set_read_timeout(Some(remaining)).expect("timeout");
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => continue,
            // Closed with unread input, the server's side resets the connection.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {
                return Some(started.elapsed());
            }
            Err(_) => return None,
        }
    }
}

fn healthz_ms(server: &Server) -> f64 {
    let started = Instant::now();
    assert_eq!(server.get_raw("/healthz").0, 200);
    started.elapsed().as_secs_f64() * 1e3
}

#[test]
fn stalled_and_idle_connections_are_closed_after_the_head_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path().join("catalog.db"), &["--head-timeout", "1s"]);
    let started = Instant::now();
    let stalled: Vec<TcpStream> = (0..200).map(|_| stall(&server)).collect();
    let mut idle = TcpStream::connect(address(&server)).unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut times: Vec<f64> = (0..50).map(|_| healthz_ms(&server)).collect();
    times.sort_by(f64::total_cmp);
    assert!(times[49] < 250.0, "healthz answered slowly: {times:?}");
    for stream in stalled {
        let closed = closed_after(stream, started, Duration::from_secs(5));
        let closed = closed.expect("a stalled connection was left open");
        assert!(closed >= Duration::from_millis(900), "{closed:?}");
    }
    // The idle one had its answer, then was closed for idleness.
    let mut answer = Vec::new();
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    idle.read_to_end(&mut answer).expect("closed by the server");
    assert!(answer.starts_with(b"HTTP/1.1 200 OK"));
}

#[test]
fn when_every_slot_is_taken_the_oldest_stalled_connections_make_room() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path().join("catalog.db"),
        &["--head-timeout", "5s", "--max-connections", "8"],
    );
    // The test's HTTP client may keep one connection of its own open: count, don't name.
    let started = Instant::now();
    let streams: Vec<TcpStream> = (0..12).map(|_| stall(&server)).collect();
    std::thread::sleep(Duration::from_millis(300));
    // A real client still gets in, on a connection of its own.
    let mut client = TcpStream::connect(address(&server)).unwrap();
    client
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    client.read_to_end(&mut answer).expect("an answer");
    assert!(answer.starts_with(b"HTTP/1.1 200 OK"), "{answer:?}");
    let closed: Vec<bool> = streams
        .into_iter()
        .map(|s| closed_after(s, started, Duration::from_millis(1500)).is_some())
        .collect();
    // The oldest gave way (to the younger stalled ones, then to the client), the youngest
    // are still waiting for their head timeout.
    let evicted = closed.iter().take_while(|&&c| c).count();
    assert!((5..=6).contains(&evicted), "{closed:?}");
    assert!(closed[evicted..].iter().all(|&c| !c), "{closed:?}");
}

#[test]
fn a_connection_cap_beyond_the_descriptor_limit_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let output = svc()
        .args(["serve", "--firehose", "none", "--listen", "127.0.0.1:0"])
        .arg("--db")
        .arg(dir.path().join("catalog.db"))
        .args(["--max-connections", "100000000"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--max-connections 100000000 is more than"),
        "{stderr}"
    );
    assert!(!stderr.contains("listening"), "{stderr}");
}

#[test]
fn oversized_and_badly_encoded_requests_get_json_answers() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path().join("catalog.db"), &[]);
    let long = "a".repeat(62_000);
    let (status, body) = server.get(&format!("/v1/bounties/open?x={long}"));
    assert_eq!(
        (status, body["error"].as_str()),
        (414, Some("uri_too_long"))
    );
    let response = http()
        .get(format!("{}/v1/stats", server.url))
        .header("X-Large", "b".repeat(17_000))
        .send()
        .unwrap();
    assert_eq!(response.status(), 431);
    let body: serde_json::Value = response.json().unwrap();
    assert_eq!(body["error"], "headers_too_large");
    for bad in ["%zz", "%ff", "%00", "%4"] {
        let (status, body) = server.get(&format!("/v1/bounties/open?limit={bad}"));
        assert_eq!(status, 400, "{bad}");
        assert!(
            body["message"].as_str().unwrap().starts_with("limit: "),
            "{body}"
        );
    }
    let (status, body) = server.get("/v1/adapters?framework=%ff");
    assert_eq!(status, 400);
    assert!(
        body["message"].as_str().unwrap().starts_with("framework: "),
        "{body}"
    );
}

#[test]
fn a_client_over_its_rate_gets_429_with_retry_after() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path().join("catalog.db"), &["--rate-limit", "5"]);
    let statuses: Vec<u16> = (0..8).map(|_| server.get_raw("/v1/stats").0).collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 200).count(),
        5,
        "{statuses:?}"
    );
    let response = http()
        .get(format!("{}/v1/stats", server.url))
        .send()
        .unwrap();
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "1");
    let body: serde_json::Value = response.json().unwrap();
    assert_eq!(body["error"], "rate_limited");
    // Probes are exempt; the rate comes back.
    assert_eq!(server.get_raw("/healthz").0, 200);
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(server.get_raw("/v1/stats").0, 200);
}

#[test]
fn cors_allows_get_only_and_host_names_are_listened_on() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::listening(
        dir.path().join("catalog.db"),
        &["--firehose", "none", "--listen", "localhost:0"],
    );
    assert!(server.url.starts_with("http://127.0.0.1:") || server.url.starts_with("http://[::1]:"));
    let preflight = |method: &str| {
        http()
            .request(reqwest::Method::OPTIONS, format!("{}/v1/stats", server.url))
            .header("Origin", "https://example.org")
            .header("Access-Control-Request-Method", method)
            .send()
            .unwrap()
    };
    let allowed = preflight("GET");
    assert_eq!(allowed.headers()["access-control-allow-methods"], "GET");
}
