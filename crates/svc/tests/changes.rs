//! The change stream over Server-Sent Events: a subscriber to one query's answer sees each
//! record enter, change in it and leave, in commit order, numbered; resuming from a number it
//! holds goes on after it with nothing missed and nothing repeated; bad parameters are refused
//! before any stream starts; a cursor from the future is an error.

use svc_testkit as common;

use common::replay::Replay;
use common::stream::{next, next_of, subscribe};
use common::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::Duration;

const AUTHOR: &str = "did:plc:jetstream";

/// A Jetstream commit of a vocabulary in `world` (none for a delete).
fn commit(time_us: i64, rkey: &str, operation: &str, name: &str, world: &str) -> (i64, String) {
    let mut commit = json!({"rev": tid(time_us), "operation": operation,
        "collection": "dev.svc.vocab", "rkey": rkey});
    if operation != "delete" {
        commit["record"] = json!({"$type": "dev.svc.vocab", "name": name, "world": world,
            "occurredAt": NOW});
        commit["cid"] = json!(CID);
    }
    let line = json!({"did": AUTHOR, "time_us": time_us, "kind": "commit", "commit": commit});
    (time_us, line.to_string())
}

#[test]
fn a_subscriber_sees_records_enter_change_and_leave_and_resumes_from_a_cursor() {
    // Recent events: a source starting in the past would be bulk-loaded, which the stream
    // reports as a gap rather than change by change.
    let base = now_us() - 1_000_000;
    let replay = Replay::start(Vec::new());
    let dir = tempfile::tempdir().unwrap();
    let server = Server::following(dir.path().join("catalog.db"), &replay.url);
    let open = "/v1/changes?query=vocabulariesWithWorld&world=open";
    let events = subscribe(&server, open);
    let uri = |rkey: &str| format!("at://{AUTHOR}/dev.svc.vocab/{rkey}");
    let (first, other) = (uri("3kaaaaaaaaa22"), uri("3kaaaaaaaaa23"));
    // One step at a time: a message carries the record as stored when it is sent.
    let steps = [
        (
            vec![commit(base, "3kaaaaaaaaa22", "create", "first", "open")],
            ("enter", &first, Some("first")),
        ),
        (
            vec![
                commit(
                    base + 1,
                    "3kaaaaaaaaa23",
                    "create",
                    "elsewhere",
                    "closed-with-default",
                ),
                commit(
                    base + 2,
                    "3kaaaaaaaaa22",
                    "update",
                    "first, renamed",
                    "open",
                ),
            ],
            ("update", &first, Some("first, renamed")),
        ),
        (
            vec![commit(
                base + 3,
                "3kaaaaaaaaa23",
                "update",
                "elsewhere",
                "open",
            )],
            ("enter", &other, Some("elsewhere")),
        ),
        (
            vec![commit(
                base + 4,
                "3kaaaaaaaaa22",
                "update",
                "first",
                "closed-with-default",
            )],
            ("leave", &first, None),
        ),
        (
            vec![commit(base + 5, "3kaaaaaaaaa23", "delete", "", "")],
            ("leave", &other, None),
        ),
    ];
    let mut seen = Vec::new();
    for (published, (op, uri, name)) in steps {
        replay.publish(published);
        let event = next_of(&events, &format!("after {op} {uri}"));
        assert_eq!(event.data["op"], op, "{:?}", event.data);
        assert_eq!(event.data["uri"], uri.as_str());
        assert_eq!(
            event.id,
            event.data["seq"].as_i64(),
            "the event's id is its seq"
        );
        match name {
            Some(name) => {
                assert_eq!(event.data["item"]["record"]["name"], name);
                assert_eq!(event.data["item"]["uri"], uri.as_str());
                assert_eq!(event.data["item"]["author"], AUTHOR);
            }
            None => assert!(event.data.get("item").is_none(), "{:?}", event.data),
        }
        seen.push(event);
    }
    let seqs: Vec<i64> = seen.iter().filter_map(|e| e.id).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");

    // From the first message's number: the rest, the same, and nothing else.
    let resumed = subscribe(&server, &format!("{open}&cursor={}", seqs[0]));
    // Replayed from storage, each message carries the record as it stands now: the other
    // record is gone, so its entering is not sent (its leaving is); the answer the
    // subscriber ends with is the same.
    for earlier in [&seen[1], &seen[3], &seen[4]] {
        let event = next(&resumed);
        assert_eq!(
            (event.id, &event.data["op"], &event.data["uri"]),
            (earlier.id, &earlier.data["op"], &earlier.data["uri"])
        );
    }
    assert!(
        resumed.recv_timeout(Duration::from_millis(500)).is_err(),
        "nothing more"
    );
    // Last-Event-ID resumes as the cursor does; every record's changes without a query.
    let all = subscribe(&server, "/v1/changes?cursor=0");
    let first_of_all = next(&all);
    assert_eq!(
        (first_of_all.data["op"].as_str(), first_of_all.id),
        (Some("enter"), Some(1))
    );
    assert!(
        server
            .get_raw("/metrics")
            .2
            .lines()
            .any(|l| l.starts_with("svc_stream_subscribers ") && !l.ends_with(" 0"))
    );
}

/// Everything the WebSocket form sends at `path` until it is quiet for a while.
fn over_websocket(server: &Server, path: &str) -> Vec<Value> {
    use futures_util::StreamExt;
    let url = format!("{}{path}", server.url.replacen("http://", "ws://", 1));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (mut socket, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("upgraded");
        let mut messages = Vec::new();
        while let Ok(Some(Ok(frame))) =
            tokio::time::timeout(Duration::from_millis(700), socket.next()).await
        {
            if let tokio_tungstenite::tungstenite::Message::Text(text) = frame {
                messages.push(serde_json::from_str(text.as_str()).expect("JSON"));
            }
        }
        messages
    })
}

#[test]
fn the_websocket_form_carries_the_same_messages() {
    let base = now_us() - 1_000_000;
    let replay = Replay::start(vec![
        commit(base, "3kaaaaaaaaa22", "create", "one", "open"),
        commit(base + 1, "3kaaaaaaaaa23", "create", "two", "open"),
        commit(base + 2, "3kaaaaaaaaa22", "delete", "", ""),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::following(dir.path().join("catalog.db"), &replay.url);
    let path = "query=vocabulariesWithWorld&world=open&cursor=0";
    server.wait_for(
        "/v1/vocabularies/by-world?world=open",
        Duration::from_secs(10),
        |b| b["total"] == 1,
    );
    let socket = over_websocket(
        &server,
        &format!("/xrpc/dev.svc.sync.subscribeChanges?{path}"),
    );
    let events = subscribe(&server, &format!("/v1/changes?{path}"));
    let sse: Vec<Value> = socket.iter().map(|_| next(&events).data).collect();
    assert_eq!(socket, sse);
    // Applied in order, the messages leave the answer of the present.
    let mut held = std::collections::BTreeSet::new();
    for message in &socket {
        let uri = message["uri"].as_str().unwrap_or_default().to_string();
        match message["op"].as_str() {
            Some("enter") => held.insert(uri),
            Some("leave") => held.remove(&uri),
            _ => false,
        };
    }
    let present: std::collections::BTreeSet<String> = server
        .uris("/v1/vocabularies/by-world?world=open")
        .into_iter()
        .collect();
    assert_eq!(held, present);
    assert_eq!(present.len(), 1);
    // Asked without an upgrade, or with a bad parameter, it answers JSON before any upgrade.
    let (status, body) = server.get(&format!("/xrpc/dev.svc.sync.subscribeChanges?{path}"));
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_request"))
    );
    let (status, _) = server.get("/xrpc/dev.svc.sync.subscribeChanges?query=nope");
    assert_eq!(status, 400);
}

#[test]
fn bad_subscriptions_are_refused_before_a_stream_starts() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(dir.path().join("catalog.db"), &[]);
    for (path, names) in [
        ("/v1/changes?query=noSuchQuery", "query"),
        ("/v1/changes?query=vocabulariesWithWorld", "world"),
        ("/v1/changes?cursor=abc", "cursor"),
        ("/v1/changes?cursor=-1", "cursor"),
        ("/v1/changes?cursor=+5", "cursor"),
        (
            "/v1/changes?query=vocabulariesWithWorld&world=a&world=b",
            "world",
        ),
    ] {
        let (status, body) = server.get(path);
        assert_eq!(status, 400, "{path}: {body}");
        assert_eq!(body["error"], "invalid_request", "{path}");
        assert!(
            body["message"].as_str().unwrap_or_default().contains(names),
            "{path}: {body}"
        );
    }
    // A cursor from the future is an error, said in the stream, which then ends.
    let events = subscribe(&server, "/v1/changes?cursor=999");
    let event = next(&events);
    assert_eq!(event.data["error"], "FutureCursor", "{:?}", event.data);
    assert!(events.recv_timeout(Duration::from_secs(5)).is_err());
}

#[test]
fn the_command_line_watches_an_answer_and_stops_on_ctrl_c() {
    use std::process::Stdio;
    let base = now_us() - 1_000_000;
    let replay = Replay::start(vec![commit(base, "3kaaaaaaaaa22", "create", "one", "open")]);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::following(dir.path().join("catalog.db"), &replay.url);
    server.wait_for(
        "/v1/vocabularies/by-world?world=open",
        Duration::from_secs(10),
        |b| b["total"] == 1,
    );
    let mut watch = svc()
        .args(["orchestrator", "--url", server.url.as_str(), "watch"])
        .args(["vocabularies-by-world", "--world", "open", "--cursor", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("svc orchestrator watch");
    let stdout = watch.stdout.take().expect("stdout");
    let (sender, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            if sender.send(line).is_err() {
                return;
            }
        }
    });
    let line = |what: &str| {
        let line = lines
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("no line for {what}"));
        serde_json::from_str::<Value>(&line).expect("one JSON message a line")
    };
    let first = line("the record already there");
    assert_eq!(
        (first["op"].as_str(), first["seq"].as_i64()),
        (Some("enter"), Some(1))
    );
    replay.publish([commit(base + 1, "3kaaaaaaaaa22", "delete", "", "")]);
    let second = line("its deletion");
    assert_eq!(
        (second["op"].as_str(), second["seq"].as_i64()),
        (Some("leave"), Some(2))
    );
    // Ctrl-C ends it cleanly.
    unsafe { libc::kill(watch.id() as i32, libc::SIGINT) };
    let status = watch.wait().expect("the watch ends");
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_cursor_older_than_the_retention_is_told_so_and_goes_on_from_the_oldest_kept() {
    let base = now_us() - 1_000_000;
    let replay = Replay::start(vec![
        commit(base, "3kaaaaaaaaa22", "create", "one", "open"),
        commit(base + 1, "3kaaaaaaaaa23", "create", "two", "open"),
    ]);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path().join("catalog.db"),
        &[
            "--firehose",
            replay.url.as_str(),
            "--ready-lag",
            "5s",
            "--stream-retention",
            "1ms",
        ],
    );
    server.wait_for(
        "/v1/vocabularies/by-world?world=open",
        Duration::from_secs(10),
        |b| b["total"] == 2,
    );
    // The heartbeat (each second, while caught up) trims all but the newest change.
    let mut oldest = 0;
    for _ in 0..50 {
        let events = subscribe(&server, "/v1/changes?cursor=0");
        let first = next(&events);
        if first.data["info"] == "OutdatedCursor" {
            oldest = first.data["oldest"].as_i64().unwrap_or_default();
            let kept = next(&events);
            assert_eq!(kept.id, Some(oldest), "{:?}", kept.data);
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(oldest > 1, "the old changes were trimmed");
}

/// A subscriber on a plain connection, which dropping closes.
fn raw_subscriber(server: &Server) -> std::net::TcpStream {
    let address = server.url.trim_start_matches("http://");
    subscribed(std::net::TcpStream::connect(address).expect("connect"))
}

/// `stream` once it has asked for every record's changes.
fn subscribed(mut stream: std::net::TcpStream) -> std::net::TcpStream {
    use std::io::Write;
    let address = stream.peer_addr().expect("a peer");
    write!(
        stream,
        "GET /v1/changes HTTP/1.1\r\nHost: {address}\r\n\r\n"
    )
    .expect("ask");
    stream
}

#[test]
fn subscribers_are_bounded_per_client_and_in_all() {
    let dir = tempfile::tempdir().unwrap();
    let per_client = Server::start(
        dir.path().join("one.db"),
        &["--max-subscribers-per-client", "1"],
    );
    let held = raw_subscriber(&per_client);
    per_client.wait_for("/v1/stats", Duration::from_secs(10), |_| {
        per_client
            .get_raw("/metrics")
            .2
            .contains("svc_stream_subscribers 1")
    });
    let (status, body) = per_client.get("/v1/changes");
    assert_eq!(
        (status, body["error"].as_str()),
        (429, Some("too_many_subscribers"))
    );
    // Another loopback address is the same host, as another address of its /24 would be.
    let elsewhere = reqwest::blocking::Client::builder()
        .local_address("127.0.0.2".parse::<std::net::IpAddr>().ok())
        .build()
        .expect("a client");
    let answer = elsewhere
        .get(format!("{}/v1/changes", per_client.url))
        .send()
        .expect("an answer");
    assert_eq!(answer.status().as_u16(), 429);
    drop(answer);
    // Given back when the subscriber leaves (found at the next keep-alive).
    drop(held);
    per_client.wait_for("/v1/stats", Duration::from_secs(10), |_| {
        per_client
            .get_raw("/metrics")
            .2
            .contains("svc_stream_subscribers 0")
    });
    let all = Server::start(dir.path().join("two.db"), &["--max-subscribers", "1"]);
    let _held = subscribe(&all, "/v1/changes");
    let (status, body) = all.get("/v1/changes");
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("too_many_subscribers"))
    );
}

#[test]
fn a_restart_loses_nothing_a_subscriber_can_resume() {
    let base = now_us() - 1_000_000;
    let replay = Replay::start(vec![commit(base, "3kaaaaaaaaa22", "create", "one", "open")]);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.db");
    let args = ["--firehose", replay.url.as_str(), "--ready-lag", "5s"];
    let server = Server::launch(&db, &args);
    let events = subscribe(&server, "/v1/changes?cursor=0");
    let first = next(&events);
    assert_eq!(first.data["op"], "enter");
    // Killed outright, then started again: the subscriber resumes after what it holds.
    server.kill9();
    replay.publish([commit(base + 1, "3kaaaaaaaaa23", "create", "two", "open")]);
    let server = Server::launch(&db, &args);
    let resumed = subscribe(
        &server,
        &format!("/v1/changes?cursor={}", first.data["seq"]),
    );
    let second = next(&resumed);
    assert_eq!(
        (
            second.data["op"].as_str(),
            second.data["item"]["record"]["name"].as_str()
        ),
        (Some("enter"), Some("two"))
    );
    assert_eq!(second.id, first.id.map(|seq| seq + 1));
}

/// `n` creates of vocabularies named `name`, from `base` a microsecond apart, each with a
/// description of 2,000 bytes.
fn large_creates(base: i64, n: i64, name: &str) -> Vec<(i64, String)> {
    creates(base, n, name, 2000)
}

/// `n` creates in `world` "open", each with a description of `bytes`.
fn creates(base: i64, n: i64, name: &str, bytes: usize) -> Vec<(i64, String)> {
    let description = "d".repeat(bytes);
    (0..n)
        .map(|i| {
            let (time_us, line) = commit(base + i, &tid(base + i), "create", name, "open");
            let mut line: Value = serde_json::from_str(&line).expect("an event");
            line["commit"]["record"]["description"] = json!(description);
            (time_us, line.to_string())
        })
        .collect()
}

/// A subscriber that never reads: its receive buffer is as small as the kernel allows, so
/// what the server sends piles up on the server's side, as it would across a network.
fn stalled_subscriber(server: &Server) -> std::net::TcpStream {
    let address: std::net::SocketAddr = server
        .url
        .trim_start_matches("http://")
        .parse()
        .expect("an address");
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    socket.set_recv_buffer_size(4096).expect("a small buffer");
    socket.connect(&address.into()).expect("connect");
    subscribed(socket.into())
}

/// The server's side of the connections of `clients`: (bytes waiting in their send queues,
/// how many are open), from `/proc/net/tcp`.
fn server_side_of(clients: &[std::net::TcpStream]) -> (u64, usize) {
    let server = clients
        .first()
        .and_then(|client| client.peer_addr().ok())
        .map(|address| address.port());
    let ports: Vec<u16> = clients
        .iter()
        .filter_map(|client| client.local_addr().ok())
        .map(|address| address.port())
        .collect();
    let port_of = |address: &str| {
        let hex = address.rsplit(':').next().unwrap_or_default();
        u16::from_str_radix(hex, 16).ok()
    };
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let mut queued = 0;
    let mut open = 0;
    for line in table.lines().skip(1) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(local), Some(remote), Some(queues)) =
            (fields.get(1), fields.get(2), fields.get(4))
        else {
            continue;
        };
        let ours = port_of(local) == server;
        if ours && port_of(remote).is_some_and(|port| ports.contains(&port)) {
            let tx = queues.split(':').next().unwrap_or_default();
            queued += u64::from_str_radix(tx, 16).unwrap_or_default();
            open += 1;
        }
    }
    (queued, open)
}

fn subscribers_gauge(server: &Server) -> Option<u64> {
    let metrics = server.get_raw("/metrics").2;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("svc_stream_subscribers "))
        .and_then(|value| value.trim().parse().ok())
}

#[test]
fn subscribers_that_never_read_hold_little_and_are_cut_at_once() {
    const STALLED: usize = 40;
    let replay = Replay::start(Vec::new());
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path().join("catalog.db"),
        &["--firehose", replay.url.as_str(), "--ready-lag", "5s"],
    );
    let held: Vec<_> = (0..STALLED).map(|_| stalled_subscriber(&server)).collect();
    server.wait_for("/v1/stats", Duration::from_secs(10), |_| {
        subscribers_gauge(&server) == Some(STALLED as u64)
    });
    // 3,000 changes of 2 KB: 6 MB for each subscriber, far past its queue and buffers.
    // Events of now: a catch-up from the past would be bulk-loaded, past the change stream.
    let base = now_us();
    replay.publish(large_creates(base, 3000, "big"));
    server.wait_for(
        "/v1/vocabularies/by-world?world=open&limit=1",
        Duration::from_secs(30),
        |body| body["total"] == 3000,
    );
    let (queued, sockets) = server_side_of(&held);
    assert_eq!(sockets, STALLED, "the subscribers' connections");
    // Each stream's send buffer is 16 KiB, which the kernel doubles.
    assert!(
        queued <= (STALLED as u64) * 40 * 1024,
        "{queued} bytes wait in the kernel for {STALLED} subscribers that read nothing"
    );
    // Cut as too slow (5 s with a full queue), each connection is closed as its place is
    // given back, not left to hold its bytes until the write time limit.
    let started = std::time::Instant::now();
    loop {
        let gauge = subscribers_gauge(&server);
        if gauge == Some(0) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the stalled subscribers were never cut: {gauge:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let (queued, sockets) = server_side_of(&held);
    assert_eq!(
        (queued, sockets),
        (0, 0),
        "the cut connections still hold bytes"
    );
    drop(held);
}

/// A replay from a cursor goes at the client's pace, its subscriptions together, while the
/// live changes after it are not held back.
#[test]
fn replays_are_paced_per_client() {
    let base = now_us() - 1_000_000;
    let events = large_creates(base, 600, "paced");
    let replay = Replay::start(vec![commit(
        base - 1,
        "3kaaaaaaaaa22",
        "create",
        "first",
        "open",
    )]);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path().join("catalog.db"),
        &[
            "--firehose",
            replay.url.as_str(),
            "--ready-lag",
            "5s",
            "--replay-kib-per-second",
            "200",
        ],
    );
    server.wait_for("/v1/stats", Duration::from_secs(10), |b| {
        b["vocabularies"] == 1
    });
    replay.publish(events);
    server.wait_for("/v1/stats", Duration::from_secs(20), |b| {
        b["vocabularies"] == 601
    });
    let started = std::time::Instant::now();
    let events = subscribe(&server, "/v1/changes?cursor=0");
    let (mut seen, mut bytes) = (0, 0);
    while seen < 601 {
        let event = next(&events);
        bytes += event.data.to_string().len();
        if event.data["op"] == "enter" {
            seen += 1;
        }
    }
    let took = started.elapsed();
    // A second's worth at once, the rest at the rate.
    let rate = 200.0 * 1024.0;
    let least = Duration::from_secs_f64((bytes as f64 - rate) / rate);
    assert!(
        least > Duration::from_secs(2),
        "{bytes} bytes is too few to tell"
    );
    assert!(
        took >= least.mul_f64(0.9),
        "{bytes} bytes replayed in {took:?}, faster than 200 KiB/s"
    );
    assert!(took < Duration::from_secs(30), "{took:?}");
}

/// A replay is paced by what it reads from storage, not only by what it sends: one for a key
/// that matches nothing reads no faster than its client's rate allows (a step of 500 ahead at
/// most), and it stops reading once its client leaves.
#[test]
fn a_replay_is_paced_by_what_it_reads_and_ends_with_its_client() {
    let base = now_us() - 1_000_000;
    let replay = Replay::start(vec![commit(
        base - 1,
        "3kaaaaaaaaa22",
        "create",
        "x",
        "open",
    )]);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path().join("catalog.db"),
        &["--firehose", replay.url.as_str(), "--ready-lag", "5s"]
            .into_iter()
            .chain(["--replay-kib-per-second", "16"])
            .collect::<Vec<_>>(),
    );
    replay.publish(creates(base, 3000, "kept", 10));
    server.wait_for("/v1/stats", Duration::from_secs(30), |b| {
        b["vocabularies"] == 3001
    });
    let address = server.url.trim_start_matches("http://");
    let mut client = std::net::TcpStream::connect(address).expect("connect");
    std::io::Write::write_all(
        &mut client,
        format!(
            "GET /v1/changes?query=vocabulariesByName&name=nothing&cursor=0 HTTP/1.1\r\n\
             Host: {address}\r\n\r\n"
        )
        .as_bytes(),
    )
    .expect("ask");
    std::thread::sleep(Duration::from_secs(2));
    // 16 KiB a second, a second's worth as burst, about 124 bytes a change read: some 400
    // changes in 2 s, and the first step of 500 read before it is paid for.
    let read = replay_read(&server);
    assert!(
        (1..=1000).contains(&read),
        "{read} of 3,001 changes read in 2 s"
    );
    drop(client);
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    while subscribers_gauge(&server) != Some(0) {
        assert!(
            std::time::Instant::now() < deadline,
            "the subscriber stayed"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let after_leaving = replay_read(&server);
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(
        replay_read(&server),
        after_leaving,
        "the replay read on alone"
    );
}

fn replay_read(server: &Server) -> u64 {
    let metrics = server.get_raw("/metrics").2;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("svc_stream_replay_read_total "))
        .and_then(|value| value.trim().parse().ok())
        .expect("svc_stream_replay_read_total")
}

/// Reads at most 4 KiB per millisecond: a subscriber that takes everything, at a steady pace
/// slower than a burst is written.
struct Steady<R>(R);

impl<R: std::io::Read> std::io::Read for Steady<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        std::thread::sleep(Duration::from_millis(1));
        let most = buf.len().min(4096);
        self.0.read(&mut buf[..most])
    }
}

/// A burst of changes written far faster than a subscriber takes them (20,000 in a second or
/// two, as a repository read whole or a catch-up writes them) passes the 4,096 the hub keeps:
/// the subscriber, reading steadily, reads what it missed from storage and gets every change
/// once, in order, and is not cut. Cutting it was what the build before did.
#[test]
fn a_burst_past_what_the_hub_keeps_reaches_a_steady_subscriber_whole() {
    const BURST: usize = 20_000;
    let replay = Replay::start(Vec::new());
    let dir = tempfile::tempdir().unwrap();
    let server = Server::launch(
        dir.path().join("catalog.db"),
        &["--firehose", replay.url.as_str(), "--ready-lag", "5s"],
    );
    let response = common::stream::open(&server, "/v1/changes");
    let (sender, messages) = mpsc::channel::<Value>();
    std::thread::spawn(move || {
        for line in BufReader::new(Steady(response)).lines() {
            let Ok(line) = line else { return };
            if let Some(data) = line.strip_prefix("data:") {
                let data = serde_json::from_str(data.trim()).expect("JSON data");
                if sender.send(data).is_err() {
                    return;
                }
            }
        }
    });
    server.wait_for("/v1/stats", Duration::from_secs(10), |_| {
        subscribers_gauge(&server) == Some(1)
    });
    // Events of now: a catch-up from the past would be bulk-loaded, past the change stream.
    replay.publish(creates(now_us(), BURST as i64, "burst", 200));
    let mut seqs = Vec::with_capacity(BURST);
    while seqs.len() < BURST {
        let message = messages
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("the stream ended after {} changes", seqs.len()));
        assert!(
            message["error"].is_null(),
            "after {} changes: {message}",
            seqs.len()
        );
        assert_eq!(message["op"], "enter", "{message}");
        seqs.push(message["seq"].as_i64().expect("a seq"));
    }
    assert!(
        seqs.windows(2).all(|pair| pair[0] < pair[1]),
        "in order, once"
    );
    let metrics = server.get_raw("/metrics").2;
    assert!(
        !metrics.contains("svc_stream_caught_up_total 0"),
        "the burst never passed the hub: {metrics}"
    );
    assert!(metrics.contains("svc_stream_too_slow_total 0"), "{metrics}");
}
