//! What the server does with clients that stall, linger, flood or send oversized requests.

use svc_testkit as common;

use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
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

const EXAMPLES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/catalog.jsonl");

/// The example catalog's largest page, about 6 KB.
const LARGE_PAGE: &str = "/v1/bounties/open?limit=1000";

/// A client that sends 2,000 pipelined requests for a large page and never reads an answer:
/// 13 MB of answers, far beyond what the socket buffers on both sides hold.
fn never_reading(server: &Server) -> TcpStream {
    let mut stream = TcpStream::connect(address(server)).expect("connect");
    // Once its answers are blocked the server reads no further request: what it has not
    // taken by then is left unsent.
    stream
        .set_write_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let request = format!("GET {LARGE_PAGE} HTTP/1.1\r\nHost: x\r\n\r\n");
    let _ = stream.write_all(request.repeat(2000).as_bytes());
    stream
}

/// Whether the server has closed `stream` (end of stream or reset) within `within`, seen
/// without reading what it holds: a read would be the progress the server waits for.
fn hung_up(stream: &TcpStream, within: Duration) -> bool {
    let mut poll = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLRDHUP,
        revents: 0,
    };
    let ms = libc::c_int::try_from(within.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: poll reads and writes the one pollfd it is given, valid for the call.
    let ready = unsafe { libc::poll(&mut poll, 1, ms) };
    ready == 1 && poll.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
}

/// The bytes the server has written to each client and the client has not taken, from the
/// send queue of the server's end in /proc/net/tcp (both ends are on this host's loopback);
/// `None` once that end is gone.
fn unread_by(server: &Server, clients: &[TcpStream]) -> Vec<Option<u64>> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let server_port = address(server).rsplit(':').next().unwrap().to_string();
    let ours = format!(":{:04X}", server_port.parse::<u16>().unwrap());
    clients
        .iter()
        .map(|client| {
            let theirs = format!(":{:04X}", client.local_addr().unwrap().port());
            table.lines().skip(1).find_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                let (local, remote, queues) = (fields[1], fields[2], fields[4]);
                if !local.ends_with(&ours) || !remote.ends_with(&theirs) {
                    return None;
                }
                u64::from_str_radix(queues.split(':').next()?, 16).ok()
            })
        })
        .collect()
}

/// Waits until the server's answers to every one of `clients` are blocked: its send queue to
/// each holds bytes and has not moved for half a second.
fn wait_until_blocked(server: &Server, clients: &[TcpStream]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut before = unread_by(server, clients);
    loop {
        std::thread::sleep(Duration::from_millis(500));
        let now = unread_by(server, clients);
        if now == before && now.iter().all(|queue| queue.is_some_and(|bytes| bytes > 0)) {
            return;
        }
        assert!(Instant::now() < deadline, "answers never blocked: {now:?}");
        before = now;
    }
}

/// A request on a connection of its own, answered within `within`: the answer's first line,
/// and the connection, kept open.
fn answered_within(server: &Server, path: &str, within: Duration) -> (String, TcpStream) {
    let started = Instant::now();
    let mut client = TcpStream::connect(address(server)).expect("connect");
    write!(client, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
    client.set_read_timeout(Some(within)).expect("timeout");
    let mut answer = Vec::new();
    let mut buffer = [0u8; 4096];
    let whole = |answer: &[u8]| {
        let text = String::from_utf8_lossy(answer);
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            return false;
        };
        let length = head
            .lines()
            .find_map(|line| {
                line.to_ascii_lowercase()
                    .strip_prefix("content-length: ")?
                    .parse()
                    .ok()
            })
            .unwrap_or(0);
        body.len() >= length
    };
    while !whole(&answer) {
        let n = client.read(&mut buffer).expect("an answer");
        assert!(n > 0, "{path}: closed before its answer");
        answer.extend_from_slice(&buffer[..n]);
    }
    assert!(
        started.elapsed() < within,
        "{path}: {:?}",
        started.elapsed()
    );
    let first_line = String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    (first_line, client)
}

fn write_timeouts(server: &Server) -> u64 {
    let metrics = server.get_raw("/metrics").2;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("svc_http_write_timeouts_total "))
        .expect("svc_http_write_timeouts_total")
        .parse()
        .expect("a count")
}

#[test]
fn clients_that_never_read_their_answers_are_closed_after_the_write_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(
        dir.path().join("catalog.db"),
        &["--import", EXAMPLES, "--write-timeout", "1s"],
    );
    let page = server.get_raw(LARGE_PAGE).2.len();
    assert!(page > 5_000, "{page}");
    assert_eq!(write_timeouts(&server), 0);
    let clients: Vec<(Instant, TcpStream)> = (0..10)
        .map(|_| (Instant::now(), never_reading(&server)))
        .collect();
    for (connected, client) in &clients {
        let within = Duration::from_secs(20).saturating_sub(connected.elapsed());
        assert!(
            hung_up(client, within),
            "a client that reads nothing was left open"
        );
        // Its answers were blocked no sooner than it connected.
        assert!(connected.elapsed() >= Duration::from_secs(1));
    }
    for (_, mut client) in clients {
        // What reached the client before the server gave up, then the end.
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut read = 0;
        let mut buffer = vec![0u8; 1 << 16];
        loop {
            match client.read(&mut buffer) {
                Ok(0) => break,
                Ok(n) => read += n,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("neither the end nor a reset: {e}"),
            }
        }
        assert!(read < 2000 * page, "every answer was sent: {read} bytes");
    }
    assert_eq!(write_timeouts(&server), 10);
    // And the server goes on serving.
    assert_eq!(server.get_raw(LARGE_PAGE).0, 200);
    assert_eq!(server.get_raw("/healthz").0, 200);
}

#[test]
fn clients_that_never_read_cannot_lock_new_ones_out() {
    let dir = tempfile::tempdir().unwrap();
    let head_timeout = Duration::from_secs(2);
    let server = Server::start(
        dir.path().join("catalog.db"),
        &[
            "--import",
            EXAMPLES,
            "--max-connections",
            "20",
            "--head-timeout",
            "2s",
            "--write-timeout",
            "120s",
        ],
    );
    // The connection the readiness check kept alive is closed for idleness first: every slot
    // is free.
    std::thread::sleep(head_timeout + Duration::from_millis(500));
    // Twenty take every slot; once their answers are blocked, five more take the slots of the
    // five blocked longest.
    let mut clients: Vec<TcpStream> = (0..20).map(|_| never_reading(&server)).collect();
    wait_until_blocked(&server, &clients);
    clients.extend((0..5).map(|_| never_reading(&server)));
    wait_until_blocked(&server, &clients[20..]);

    let (first_line, _client) = answered_within(&server, "/v1/stats", head_timeout);
    assert_eq!(first_line, "HTTP/1.1 200 OK");
    let (first_line, _probe) = answered_within(&server, "/healthz", head_timeout);
    assert_eq!(first_line, "HTTP/1.1 200 OK");

    // Seven gave way (to the five, the client and the probe), each among the first twenty,
    // whose answers had been blocked longest; the write timeout closed none.
    std::thread::sleep(Duration::from_millis(500));
    let closed: Vec<bool> = clients
        .iter()
        .map(|client| hung_up(client, Duration::ZERO))
        .collect();
    assert_eq!(closed.iter().filter(|&&c| c).count(), 7, "{closed:?}");
    assert!(closed[20..].iter().all(|&c| !c), "{closed:?}");
    assert_eq!(write_timeouts(&server), 0);
    assert_eq!(server.get_raw("/healthz").0, 200);
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

/// The status and JSON body of the answer to `raw`, sent on a connection of its own. The
/// server may stop reading an oversized head and close the connection before all of it is
/// sent, so a write that fails is not a failure: the answer is what counts.
fn raw_answer(server: &Server, raw: &[u8]) -> (u16, serde_json::Value) {
    let (status, content_type, body) = answer_to(server, raw);
    assert_eq!(content_type, "application/json", "{body}");
    let body = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body:?}"));
    (status, body)
}

#[test]
fn heads_of_any_size_get_json_answers() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path().join("catalog.db"), &[]);
    let line = |target_bytes: usize| {
        format!(
            "GET /v1/stats?x={} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            "a".repeat(target_bytes)
        )
    };
    let headers = |header_bytes: usize, count: usize| {
        let one = format!("X-Large: {}\r\n", "b".repeat(header_bytes / count));
        format!(
            "GET /v1/stats HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{}\r\n",
            one.repeat(count)
        )
    };
    let cases = [
        // Within the bytes the server reads: its own limits answer.
        ("a 100 KB request line", line(100_000), 414, "uri_too_long"),
        (
            "a 100 KB header",
            headers(100_000, 1),
            431,
            "headers_too_large",
        ),
        (
            "1,000 headers",
            headers(100_000, 1_000),
            431,
            "headers_too_large",
        ),
        // Beyond them: hyper stops reading and answers before the head ends.
        ("a 2 MB request line", line(2_000_000), 414, "uri_too_long"),
        (
            "a 2 MB header",
            headers(2_000_000, 1),
            431,
            "headers_too_large",
        ),
    ];
    for (what, raw, status, code) in cases {
        let (got, body) = raw_answer(&server, raw.as_bytes());
        assert_eq!(
            (got, body["error"].as_str()),
            (status, Some(code)),
            "{what}: {body}"
        );
        assert!(
            body["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{what}: {body}"
        );
    }
    assert_eq!(server.get("/v1/stats").0, 200);
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

/// The statuses of the answers a connection gets to `requests`, sent at once on it, until the
/// server closes it.
fn statuses_on_one_connection(server: &Server, requests: &[&str]) -> Vec<u16> {
    let mut stream = TcpStream::connect(address(server)).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    // The last asks the server to close the connection after its answer.
    let raw: String = requests
        .iter()
        .enumerate()
        .map(|(n, path)| {
            let close = if n + 1 == requests.len() {
                "Connection: close\r\n"
            } else {
                ""
            };
            format!("GET {path} HTTP/1.1\r\nHost: x\r\n{close}\r\n")
        })
        .collect();
    stream.write_all(raw.as_bytes()).expect("write");
    let mut answers = Vec::new();
    let _ = stream.read_to_end(&mut answers);
    String::from_utf8_lossy(&answers)
        .split("HTTP/1.1 ")
        .skip(1)
        .filter_map(|answer| answer.get(..3)?.parse().ok())
        .collect()
}

#[test]
fn a_connection_opened_with_a_probe_serves_nothing_but_probes() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path().join("catalog.db"), &[]);
    // A probe's connection answers the probe and closes: what a client sends after it comes
    // on a new connection, so no query or stream ever runs on the probe lane.
    let statuses = statuses_on_one_connection(&server, &["/healthz", "/v1/stats", "/healthz"]);
    assert_eq!(statuses, vec![200]);
    let statuses = statuses_on_one_connection(&server, &["/readyz", "/v1/changes"]);
    assert_eq!(statuses, vec![200]);
    // A client that keeps its connections alive does not notice.
    for path in ["/healthz", "/v1/stats", "/readyz", "/v1/stats"] {
        assert_eq!(server.get_raw(path).0, 200, "{path}");
    }
    // A connection opened with a query serves everything, probes included.
    let statuses = statuses_on_one_connection(&server, &["/v1/stats", "/healthz", "/v1/stats"]);
    assert_eq!(statuses, vec![200, 200, 200]);
}

/// What a flood of costly pages got: the statuses, and whether each refusal said when to come
/// back and what kept it waiting.
fn flood_of_costly_pages(server: &Server, n: usize) -> Vec<u16> {
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let url = server.url.clone();
            std::thread::spawn(move || {
                let path = match i % 3 {
                    0 => format!("/map?hops={}&nodes={}", 1 + i % 4, 2 + i),
                    1 => format!("/v1/search?q=bounty%20{i}&limit={}", 1 + i),
                    _ => format!("/search?q=adapter%20{i}"),
                };
                let response = http().get(format!("{url}{path}")).send().expect("asked");
                let status = response.status().as_u16();
                if matches!(status, 429 | 503) {
                    let retry = response.headers().get("retry-after").cloned();
                    assert_eq!(
                        retry.as_ref().map(|v| v.as_bytes()),
                        Some(&b"1"[..]),
                        "{path}"
                    );
                    let body = response.text().unwrap_or_default();
                    assert!(body.contains("costly pages"), "{path}: {body}");
                }
                status
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().expect("a client"))
        .collect()
}

/// Costly pages (maps, searches) take turns: one client's flood of distinct ones is built a
/// turn at a time, the rest wait a second at most and are refused with `Retry-After`, and
/// cheap answers go on being answered meanwhile.
#[test]
fn a_flood_of_costly_pages_takes_turns_and_leaves_cheap_answers_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = generated_events(dir.path(), 3000, 7);
    let server = Server::start(
        dir.path().join("catalog.db"),
        &[
            "--import",
            file.to_str().unwrap(),
            "--costly-builds",
            "1",
            "--costly-builds-per-client",
            "1",
        ],
    );
    let cheap = {
        let url = server.url.clone();
        std::thread::spawn(move || {
            let started = Instant::now();
            let mut statuses = Vec::new();
            while started.elapsed() < Duration::from_secs(2) {
                for path in ["/v1/stats", "/healthz"] {
                    let response = http().get(format!("{url}{path}")).send().expect("asked");
                    statuses.push(response.status().as_u16());
                }
            }
            statuses
        })
    };
    let statuses = flood_of_costly_pages(&server, 48);
    assert!(
        statuses.iter().all(|s| matches!(s, 200 | 404 | 429 | 503)),
        "{statuses:?}"
    );
    assert!(statuses.contains(&200), "some were built: {statuses:?}");
    let cheap = cheap.join().expect("the cheap client");
    assert!(cheap.iter().all(|s| *s == 200), "{cheap:?}");
}

/// The statuses of `n` requests for `/v1/stats` that say they were forwarded for `client`.
fn forwarded_for(server: &Server, client: &str, n: usize) -> Vec<u16> {
    (0..n)
        .map(|_| {
            let request = http().get(format!("{}/v1/stats", server.url));
            let response = request.header("x-forwarded-for", client).send().unwrap();
            response.status().as_u16()
        })
        .collect()
}

/// Behind a proxy svc trusts, each client the proxy forwards for has its own allowance; from
/// any other peer, a forwarding header changes nothing; one that cannot be read is counted,
/// and the proxy stands for its client.
#[test]
fn clients_are_told_apart_through_trusted_proxies_only() {
    let dir = tempfile::tempdir().unwrap();
    let trusting = Server::start(
        dir.path().join("trusting.db"),
        &[
            "--rate-limit",
            "3",
            "--trusted-proxies",
            "127.0.0.1/32,10.0.0.0/8",
        ],
    );
    assert_eq!(
        forwarded_for(&trusting, "192.0.2.1", 4),
        [200, 200, 200, 429]
    );
    // Another client, forwarded through a trusted hop too: its own allowance.
    let other = forwarded_for(&trusting, "198.51.100.1, 10.1.2.3", 3);
    assert_eq!(other, [200, 200, 200]);
    let unreadable = forwarded_for(&trusting, "not an address", 1);
    assert_eq!(unreadable, [200], "the proxy's own allowance");
    let metrics = trusting.get_raw("/metrics").2;
    assert!(
        metrics.contains("svc_http_forwarded_unreadable_total 1"),
        "counted"
    );

    let trusting_none = Server::start(dir.path().join("plain.db"), &["--rate-limit", "3"]);
    let forged: Vec<u16> = ["192.0.2.1", "198.51.100.1", "203.0.113.1", "192.0.2.99"]
        .iter()
        .flat_map(|client| forwarded_for(&trusting_none, client, 1))
        .collect();
    assert_eq!(forged, [200, 200, 200, 429], "one peer, whatever it says");

    let refused = svc()
        .args([
            "serve",
            "--firehose",
            "none",
            "--trusted-proxies",
            "10.0.0.0/33",
        ])
        .args(["--db", dir.path().join("refused.db").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("10.0.0.0/33"), "{stderr}");
}
