//! A PLC directory that answers 503 for a while must not cost a record: svc follows the
//! reference PDS's firehose with the real PLC directory behind a gate; a record published while
//! the gate answers 503 is held back, its repository queued in the catalog, and read whole once
//! the directory answers again, also across a `kill -9` in between. Ground truth is the PDS's
//! own `listRecords`. Passes without running when the peers cannot start outside CI.

mod common;

use common::peers::{Account, Peers, peers};
use common::replay::spawn_async;
use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A proxy in front of an HTTP server that, while closed, answers every connection with a 503
/// and `Retry-After: 1` (and closes it), and while open relays bytes both ways. Closing it cuts
/// the connections it relays, so a client's pooled connection meets the closed gate too.
struct Gate {
    url: String,
    open: Arc<AtomicBool>,
    state: tokio::sync::watch::Sender<bool>,
    /// Connections being relayed.
    relaying: Arc<AtomicUsize>,
}

impl Gate {
    fn start(target: &str) -> Gate {
        let target = target
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .replace("localhost", "127.0.0.1");
        let open = Arc::new(AtomicBool::new(true));
        let (state, watching) = tokio::sync::watch::channel(true);
        let (sender, receiver) = std::sync::mpsc::channel();
        let gate_open = Arc::clone(&open);
        let relaying = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&relaying);
        spawn_async(async move {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            sender
                .send(listener.local_addr().expect("address"))
                .expect("port");
            while let Ok((client, _)) = listener.accept().await {
                let (open, target) = (gate_open.load(Ordering::SeqCst), target.clone());
                let mut closing = watching.clone();
                let relaying = Arc::clone(&counted);
                relaying.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    tokio::select! {
                        _ = relay_or_refuse(client, open, &target) => {}
                        _ = closing.wait_for(|open| !open), if open => {}
                    }
                    relaying.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        let address = receiver.recv().expect("the gate started");
        Gate {
            url: format!("http://{address}"),
            open,
            state,
            relaying,
        }
    }

    fn set_open(&self, open: bool) {
        self.open.store(open, Ordering::SeqCst);
        self.state.send_replace(open);
        // Closed: no request may pass through a connection relayed from before.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !open && self.relaying.load(Ordering::SeqCst) > 0 {
            assert!(std::time::Instant::now() < deadline, "relays not cut");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

async fn relay_or_refuse(mut client: TcpStream, open: bool, target: &str) -> std::io::Result<()> {
    if !open {
        let mut head = [0u8; 4096];
        let _ = client.read(&mut head).await?;
        let body = r#"{"error":"Unavailable","message":"the gate is closed"}"#;
        let answer = format!(
            "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
             retry-after: 1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        client.write_all(answer.as_bytes()).await?;
        return client.shutdown().await;
    }
    let mut upstream = TcpStream::connect(target).await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// The PDS's own records of these accounts' vocabularies, by uri.
fn ground_truth(peers: &Peers, accounts: &[&Account]) -> BTreeSet<String> {
    let mut uris = BTreeSet::new();
    for account in accounts {
        let query = [
            ("repo", account.did.as_str()),
            ("collection", "dev.svc.vocab"),
            ("limit", "100"),
        ];
        let (status, page) = peers.xrpc_get("com.atproto.repo.listRecords", &query);
        assert_eq!(status, 200, "{page}");
        let records = page["records"].as_array().cloned().unwrap_or_default();
        uris.extend(
            records
                .iter()
                .filter_map(|r| r["uri"].as_str().map(String::from)),
        );
    }
    uris
}

/// What svc serves of these accounts' vocabularies (all are published in the `open` world).
fn served(server: &Server, accounts: &[&Account]) -> BTreeSet<String> {
    server
        .uris("/v1/vocabularies/by-world?world=open&limit=1000")
        .into_iter()
        .filter(|uri| {
            accounts
                .iter()
                .any(|a| uri.starts_with(&format!("at://{}/", a.did)))
        })
        .collect()
}

/// Waits until svc serves exactly the vocabularies the PDS holds for these accounts.
fn converges(server: &Server, peers: &Peers, accounts: &[&Account], within: Duration) {
    let expected = &ground_truth(peers, accounts);
    let deadline = std::time::Instant::now() + within;
    loop {
        let found = served(server, accounts);
        if &found == expected {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not converged within {within:?}: missing {:?}, extra {:?}; /readyz: {}",
            expected.difference(&found).collect::<Vec<_>>(),
            found.difference(expected).collect::<Vec<_>>(),
            server.get_raw("/readyz").2
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Waits until `/readyz` says a repository waits to be read whole.
fn waits_for_a_read(server: &Server) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let body = server.get_raw("/readyz").2;
        if body.contains("to be read whole") {
            return body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "/readyz never said a repository waits: {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn publish(peers: &Peers, account: &Account, name: &str) {
    let record: Value = vocab(name, "open");
    peers.create_record(account, "dev.svc.vocab", record, None);
}

#[test]
fn a_record_published_while_the_directory_answers_503_reaches_the_catalog() {
    let Some(peers) = peers() else { return };
    let gate = Gate::start(&peers.plc);
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--firehose",
        peers.pds_ws.as_str(),
        "--plc-url",
        gate.url.as_str(),
        "--ready-lag",
        "5s",
    ];
    let server = Server::launch(dir.path().join("catalog.db"), &args);
    let early = peers.create_account("early");
    publish(peers, &early, "before");
    converges(&server, peers, &[&early], Duration::from_secs(20));

    // The PDS registers the new account with the directory itself; svc meets its key first
    // through the gate.
    gate.set_open(false);
    let late = peers.create_account("late");
    publish(peers, &late, "during");
    publish(peers, &late, "during-again");
    let note = waits_for_a_read(&server);
    eprint!("/readyz while the directory is down: {note}");
    assert!(note.contains(&late.did), "{note}");
    assert_eq!(served(&server, &[&early, &late]).len(), 1);

    gate.set_open(true);
    assert_eq!(ground_truth(peers, &[&early, &late]).len(), 3);
    converges(&server, peers, &[&early, &late], Duration::from_secs(60));
}

#[test]
fn a_record_held_back_survives_a_kill_9_before_the_directory_is_back() {
    let Some(peers) = peers() else { return };
    let gate = Gate::start(&peers.plc);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("catalog.db");
    let args = [
        "--firehose",
        peers.pds_ws.as_str(),
        "--plc-url",
        gate.url.as_str(),
        "--ready-lag",
        "5s",
    ];
    let server = Server::launch(&db, &args);
    // The firehose is followed before the directory goes away.
    let first = peers.create_account("first");
    publish(peers, &first, "first");
    converges(&server, peers, &[&first], Duration::from_secs(20));

    gate.set_open(false);
    let author = peers.create_account("killed");
    publish(peers, &author, "held-back");
    eprint!("before kill -9: {}", waits_for_a_read(&server));
    // The queue entry is in the catalog with the cursor: the restart does not see the commit
    // again, and still reads the repository.
    server.kill9();
    gate.set_open(true);
    let server = Server::launch(&db, &args);
    assert_eq!(ground_truth(peers, &[&first, &author]).len(), 2);
    converges(&server, peers, &[&first, &author], Duration::from_secs(60));
}
