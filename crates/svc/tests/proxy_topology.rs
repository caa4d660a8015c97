//! docs/DEPLOYMENT.md's topology, run whole: an indexer (`--no-api`, its admin methods on a
//! private `--admin-listen` address), a standby indexer, two replicas trusting the proxy's
//! `X-Forwarded-For`, all on one PostgreSQL catalog, and Debian's nginx in front of the
//! replicas with deploy/nginx.conf, its ports alone substituted. Through nginx a list answers,
//! both forms of the change stream carry a live change, each forwarded client has its own
//! subscriber allowance, and a subscriber resumes from its cursor across the indexer's
//! `kill -9` and the standby's takeover; a takedown through the admin address leaves both
//! replicas' answers within a second. Forwarded clients meant to be told apart come from
//! different /24 networks: svc counts a /24 of IPv4 as one client (`--client-prefix-v4`).

use svc_testkit as common;

use common::nginx::Nginx;
use common::replay::Replay;
use common::stream::Sse;
use common::*;
use serde_json::Value;
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const OPEN: &str = "/v1/vocabularies/by-world?world=open";
const QUERY: &str = "query=vocabulariesWithWorld&world=open";
const PASSWORD: &str = "correct horse battery staple";

/// A loopback port no one listens on now.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// A GET through nginx as the client `forwarded_for` says it is: status and JSON.
fn get(nginx: &Nginx, path: &str, forwarded_for: &str) -> (u16, Value) {
    let response = http()
        .get(format!("{}{path}", nginx.url))
        .header("x-forwarded-for", forwarded_for)
        .send()
        .expect("an answer through nginx");
    let status = response.status().as_u16();
    let body = response.text().expect("a body");
    let value = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (status, value)
}

/// Waits until a replica answers `/readyz` through nginx.
fn wait_answering(nginx: &mut Nginx) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(!nginx.stopped(), "nginx stopped: {}", nginx.error_log());
        let answered = http().get(format!("{}/readyz", nginx.url)).send();
        if answered.is_ok_and(|r| r.status() == 200) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "nginx never answered: {}",
            nginx.error_log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A change-stream request through nginx from the client `forwarded_for`.
fn open_stream(nginx: &Nginx, path: &str, forwarded_for: &str) -> reqwest::blocking::Response {
    reqwest::blocking::Client::builder()
        .timeout(None)
        .no_proxy()
        .build()
        .expect("a client")
        .get(format!("{}{path}", nginx.url))
        .header("x-forwarded-for", forwarded_for)
        .send()
        .expect("an answer through nginx")
}

/// The Server-Sent Events at `path` through nginx, as they come.
fn sse(nginx: &Nginx, path: &str, forwarded_for: &str) -> mpsc::Receiver<Sse> {
    let response = open_stream(nginx, path, forwarded_for);
    assert_eq!(response.status(), 200, "{path}");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    common::stream::events_of(response)
}

/// The WebSocket form at `path` through nginx: its messages as they come, once upgraded.
fn websocket(nginx: &Nginx, path: &str, forwarded_for: &str) -> mpsc::Receiver<Value> {
    use futures_util::StreamExt;
    use tokio_tungstenite::tungstenite::{Message, client::IntoClientRequest};
    let url = format!("{}{path}", nginx.url.replacen("http://", "ws://", 1));
    let mut request = url.into_client_request().expect("a request");
    let header = forwarded_for.parse().expect("a header value");
    request.headers_mut().insert("x-forwarded-for", header);
    let (sender, receiver) = mpsc::channel();
    let (upgraded, on_upgrade) = mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async move {
            let connected = tokio_tungstenite::connect_async(request).await;
            let _ = upgraded.send(connected.as_ref().map(|_| ()).map_err(|e| e.to_string()));
            let Ok((mut socket, _)) = connected else {
                return;
            };
            while let Some(Ok(frame)) = socket.next().await {
                if let Message::Text(text) = frame {
                    let message = serde_json::from_str(text.as_str()).expect("JSON");
                    if sender.send(message).is_err() {
                        return;
                    }
                }
            }
        });
    });
    let outcome = on_upgrade.recv_timeout(Duration::from_secs(10));
    outcome.expect("an upgrade within 10 s").expect("upgraded");
    receiver
}

fn received<T>(events: &mpsc::Receiver<T>, what: &str) -> T {
    events
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("nothing within 10 s: {what}"))
}

/// The (op, name) of a change message.
fn change(data: &Value) -> (String, String) {
    let op = data["op"].as_str().unwrap_or_default().to_string();
    let name = data["item"]["record"]["name"].as_str().unwrap_or_default();
    (op, name.to_string())
}

fn enter(name: &str) -> (String, String) {
    ("enter".to_string(), name.to_string())
}

/// Every process of the guide's topology, on one catalog.
struct Topology {
    replay: Replay,
    /// The live source's vocabularies are `base` + i seconds.
    base: i64,
    password: String,
    indexer: Option<Server>,
    /// The indexer's private admin address (`--admin-listen`).
    admin: String,
    standby: Server,
    replicas: [Server; 2],
    nginx: Nginx,
}

/// An indexer's arguments: the live source, the admin password, its admin address.
fn indexer_args<'a>(replay: &'a Replay, password: &'a str, admin: &'a str) -> Vec<&'a str> {
    vec![
        "--firehose",
        replay.url.as_str(),
        "--no-api",
        "--admin-password-file",
        password,
        "--admin-listen",
        admin,
        "--ready-lag",
        "60s",
    ]
}

impl Topology {
    fn start(db: &str, dir: &Path, nginx: &Path) -> Topology {
        let replay = Replay::start(Vec::new());
        let password = dir.join("admin-password");
        write_private(&password, &format!("{PASSWORD}\n"));
        let password = password.to_str().expect("a path").to_string();
        let admin = format!("127.0.0.1:{}", free_port());
        let indexer = Server::launch(db, &indexer_args(&replay, &password, &admin));
        let standby_admin = format!("127.0.0.1:{}", free_port());
        let mut standby = Server::listening(db, &indexer_args(&replay, &password, &standby_admin));
        standby.wait_log("standing by", Duration::from_secs(20));
        let replica = || {
            let args = [
                "--no-indexer",
                "--trusted-proxies",
                "127.0.0.1/32",
                "--max-subscribers-per-client",
                "1",
                "--ready-lag",
                "60s",
            ];
            Server::launch(db, &args)
        };
        let replicas = [replica(), replica()];
        let addresses = replicas
            .each_ref()
            .map(|r| r.url.trim_start_matches("http://").to_string());
        let mut nginx = Nginx::start(nginx, [&addresses[0], &addresses[1]], "events {}");
        wait_answering(&mut nginx);
        Topology {
            replay,
            base: now_us() - 30_000_000,
            password,
            indexer: Some(indexer),
            admin,
            standby,
            replicas,
            nginx,
        }
    }

    /// Publishes vocabularies `js-<from>` .. `js-<to - 1>` in the world "open".
    fn publish(&self, from: usize, to: usize) {
        self.replay.publish(vocab_events(self.base, from, to));
    }

    /// Waits until both replicas count `total` open vocabularies.
    fn replicas_count(&self, total: u64, within: Duration) {
        for replica in &self.replicas {
            replica.wait_for(OPEN, within, |b| b["total"] == total);
        }
    }

    /// `svc admin WORDS --url ADDRESS`: whether it succeeded, and what it printed.
    fn admin(&self, address: &str, words: &[&str]) -> (bool, String) {
        let output = svc()
            .arg("admin")
            .args(words)
            .args(["--url", address, "--password-file", &self.password])
            .output()
            .expect("svc admin");
        let printed = String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr);
        (output.status.success(), printed)
    }
}

/// A list answers through nginx, and a live change reaches a subscriber of each form.
fn live_changes_reach_both_forms(topology: &Topology) {
    let nginx = &topology.nginx;
    let (status, body) = get(nginx, OPEN, "192.0.2.10");
    assert_eq!((status, &body["total"]), (200, &Value::from(0)), "{body}");
    let events = sse(nginx, &format!("/v1/changes?{QUERY}"), "192.0.2.10");
    let path = format!("/xrpc/dev.svc.sync.subscribeChanges?{QUERY}");
    let messages = websocket(nginx, &path, "198.18.0.20");
    topology.publish(0, 1);
    let by_sse = received(&events, "a change over Server-Sent Events through nginx");
    assert_eq!(change(&by_sse.data), enter("js-000"), "{:?}", by_sse.data);
    let by_socket = received(&messages, "a change over the WebSocket through nginx");
    assert_eq!(by_socket, by_sse.data);
    let (status, body) = get(nginx, OPEN, "192.0.2.10");
    assert_eq!((status, &body["total"]), (200, &Value::from(1)), "{body}");
    // nginx takes this header for itself: a proxy left buffering still passes each event.
    let direct = common::stream::open(&topology.replicas[0], &format!("/v1/changes?{QUERY}"));
    assert_eq!(direct.headers()["x-accel-buffering"], "no");
}

/// Each forwarded client holds one subscription a replica (`--max-subscribers-per-client
/// 1`), however many share the proxy's address.
fn allowances_are_per_forwarded_client(topology: &Topology) {
    let nginx = &topology.nginx;
    let path = format!("/v1/changes?{QUERY}");
    let mut held = Vec::new();
    let refused = loop {
        let response = open_stream(nginx, &path, "203.0.113.7");
        if response.status() != 200 {
            break response;
        }
        held.push(response);
        assert!(
            held.len() <= topology.replicas.len(),
            "one client held {} subscriptions",
            held.len()
        );
    };
    assert_eq!(refused.status(), 429);
    let body: Value = refused.json().expect("JSON");
    assert_eq!(body["error"], "too_many_subscribers", "{body}");
    // Another client behind the same proxy still has its own.
    let other = open_stream(nginx, &path, "198.51.100.9");
    assert_eq!(other.status(), 200);
}

/// A takedown through the indexer's admin address leaves both replicas' answers, and
/// through nginx too; the public side serves no admin method.
fn a_takedown_leaves_both_replicas(topology: &Topology) {
    let uri = "at://did:plc:jetstream/dev.svc.vocab/aaaaaaaa000";
    let (status, _) = get(
        &topology.nginx,
        &format!("/xrpc/com.atproto.admin.getSubjectStatus?uri={uri}"),
        "100.64.0.30",
    );
    assert_eq!(status, 404, "the public side served an admin method");
    let indexer = topology.indexer.as_ref().expect("the indexer");
    let (taken, said) = topology.admin(&indexer.url, &["status", uri]);
    assert!(!taken, "the indexer's public address served admin: {said}");
    let admin = format!("http://{}", topology.admin);
    let (taken, said) = topology.admin(&admin, &["takedown", uri, "--ref", "case 1"]);
    assert!(taken, "{said}");
    let done = Instant::now();
    topology.replicas_count(0, Duration::from_secs(1));
    eprintln!(
        "both replicas left the record out {:?} after",
        done.elapsed()
    );
    let (status, body) = get(&topology.nginx, OPEN, "100.64.0.30");
    assert_eq!((status, &body["total"]), (200, &Value::from(0)), "{body}");
}

/// The indexer killed mid-stream: the standby takes over, and a subscriber through nginx that
/// resumes from the cursor it holds gets every change after it, once, in order.
fn a_subscriber_resumes_across_a_takeover(topology: &mut Topology) {
    let path = format!("/v1/changes?{QUERY}");
    let events = sse(&topology.nginx, &path, "100.64.1.40");
    topology.publish(1, 4);
    let mut cursor = 0;
    for i in 1..4 {
        let event = received(&events, "a change before the takeover");
        assert_eq!(change(&event.data), enter(&format!("js-{i:03}")));
        cursor = event.id.expect("an id");
    }
    drop(events);
    topology.publish(4, 6);
    let indexer = topology.indexer.take().expect("the indexer");
    indexer.kill9();
    topology.publish(6, 9);
    topology
        .standby
        .wait_log("took over", Duration::from_secs(20));
    let resumed = sse(
        &topology.nginx,
        &format!("{path}&cursor={cursor}"),
        "100.64.2.50",
    );
    let mut last = cursor;
    for i in 4..9 {
        let event = received(&resumed, "a change after the takeover");
        assert_eq!(change(&event.data), enter(&format!("js-{i:03}")));
        let id = event.id.expect("an id");
        assert!(id > last, "{id} after {last}");
        last = id;
    }
    topology.replicas_count(8, Duration::from_secs(10));
    let extra = resumed.recv_timeout(Duration::from_millis(500));
    assert!(
        extra.is_err(),
        "a change twice: {:?}",
        extra.map(|e| e.data)
    );
}

#[test]
fn the_deployment_guides_topology_runs_behind_nginx() {
    let _cluster = shared_cluster();
    let dir = tempfile::tempdir().unwrap();
    let Some(db) = Backend::Postgres.fresh_db(dir.path()) else {
        return;
    };
    let Some(nginx) = common::nginx::binary() else {
        return;
    };
    let mut topology = Topology::start(&db, dir.path(), &nginx);
    live_changes_reach_both_forms(&topology);
    allowances_are_per_forwarded_client(&topology);
    a_takedown_leaves_both_replicas(&topology);
    a_subscriber_resumes_across_a_takeover(&mut topology);
}
