//! The promise of the resynchronisation queue, held against the reference PDS and PLC directory
//! with a fault proxy (common/fault_proxy.rs) between them and svc: a failure a retry could undo
//! (the directory answering 503 or 429, resetting mid-answer or never answering, the firehose
//! connection dropping, the PDS restarting, svc itself killed with SIGKILL) never loses a
//! record. A commit svc cannot verify when it comes (its author's key cannot be read) is not
//! applied; its repository waits in the catalog, durably, to be read whole once it can be, and
//! a backfill lists into the same queue. Within 60 s of the faults ending, the catalog serves
//! exactly the records the PDS holds for the accounts a test wrote: none missing, none extra,
//! none stale. The ground truth is the PDS's own `com.atproto.repo.listRecords`.
//!
//! Every test of this binary writes to the one PDS, and each svc follows all of it, so each test
//! compares only its own accounts. Each runs on SQLite and on PostgreSQL; they pass without
//! running when the peers (or PostgreSQL) cannot start outside CI.

use svc_testkit as common;

use common::fault_proxy::{FaultProxy, Mode};
use common::peers::{Account, Peers, peers};
use common::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::{RwLock, RwLockReadGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The collection every test writes.
const VOCAB: &str = "dev.svc.vocab";
/// Every value `world` may take (a closed enum in the lexicon): a record is served under
/// exactly one of them, and an update may move it to another.
const WORLDS: [&str; 3] = ["open", "closed-with-default", "hierarchy-closed"];
/// The promise: this long after the faults stop, the catalog holds what the PDS holds.
const CONVERGED_WITHIN: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(200);

/// Records by uri: the value the PDS holds, or the record svc serves.
type Records = BTreeMap<String, Value>;

/// One test restarts the PDS; the others' own requests to it (writes, the ground truth) wait
/// meanwhile, so that only svc, whose promise covers it, meets the PDS being down.
static PDS_STEADY: RwLock<()> = RwLock::new(());

fn steady() -> RwLockReadGuard<'static, ()> {
    PDS_STEADY.read().unwrap_or_else(|p| p.into_inner())
}

/// Restarts the PDS and waits until it answers again, while no other test talks to it.
fn restart_the_pds(peers: &Peers) {
    let _alone = PDS_STEADY.write().unwrap_or_else(|p| p.into_inner());
    peers.restart_pds();
    // The signal is handled in the background: it is down once its health check fails. A
    // restart too quick to be seen is not waited for any longer than this.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline && pds_healthy(peers) {
        std::thread::sleep(Duration::from_millis(50));
    }
    peers.wait_pds_healthy(Duration::from_secs(60));
}

fn pds_healthy(peers: &Peers) -> bool {
    peers
        .http()
        .get(format!("{}/xrpc/_health", peers.pds))
        .timeout(Duration::from_secs(2))
        .send()
        .is_ok_and(|r| r.status().is_success())
}

fn account(peers: &Peers, prefix: &str) -> Account {
    let _steady = steady();
    peers.create_account(prefix)
}

/// A vocabulary valid for the lexicon, with its `$type`, as the PDS stores it.
fn record(name: &str, world: &str) -> Value {
    let mut record = vocab(name, world);
    record["$type"] = json!(VOCAB);
    record
}

/// Creates a vocabulary; its record key.
fn create(peers: &Peers, account: &Account, name: &str, world: &str) -> String {
    let _steady = steady();
    let (uri, _) = peers.create_record(account, VOCAB, record(name, world), None);
    uri.rsplit('/').next().expect("a record key").to_string()
}

fn update(peers: &Peers, account: &Account, rkey: &str, name: &str, world: &str) {
    let _steady = steady();
    peers.put_record(account, VOCAB, rkey, record(name, world));
}

fn delete(peers: &Peers, account: &Account, rkey: &str) {
    let _steady = steady();
    peers.delete_record(account, VOCAB, rkey);
}

/// What the PDS holds in `collection` for `accounts`: every page of its `listRecords`.
fn ground_truth(peers: &Peers, accounts: &[Account], collection: &str) -> Records {
    let _steady = steady();
    let mut records = Records::new();
    for account in accounts {
        let mut cursor = String::new();
        loop {
            let (status, body) = {
                let mut query = vec![
                    ("repo", account.did.as_str()),
                    ("collection", collection),
                    ("limit", "100"),
                ];
                if !cursor.is_empty() {
                    query.push(("cursor", cursor.as_str()));
                }
                peers.xrpc_get("com.atproto.repo.listRecords", &query)
            };
            assert_eq!(status, 200, "listRecords of {}: {body}", account.did);
            let page = body["records"]
                .as_array()
                .unwrap_or_else(|| panic!("listRecords of {}: no records: {body}", account.did));
            for held in page {
                let uri = held["uri"]
                    .as_str()
                    .unwrap_or_else(|| panic!("listRecords: a record without a uri: {held}"));
                records.insert(uri.to_string(), held["value"].clone());
            }
            match body["cursor"].as_str() {
                Some(next) if !page.is_empty() && next != cursor => cursor = next.to_string(),
                _ => break,
            }
        }
    }
    records
}

/// The JSON answer to a GET, or why there is none (for a poll to try again and report).
fn get_json(server: &Server, path: &str) -> Result<Value, String> {
    let response = http()
        .get(format!("{}{path}", server.url))
        .send()
        .map_err(|e| format!("{path}: {e}"))?;
    let status = response.status().as_u16();
    let text = response.text().map_err(|e| format!("{path}: {e}"))?;
    if status != 200 {
        return Err(format!("{path}: HTTP {status}: {text}"));
    }
    serde_json::from_str(&text).map_err(|e| format!("{path}: not JSON ({e}): {text}"))
}

/// The vocabularies of `accounts` svc serves, uri to record: every world's answer, page by
/// page. A uri served twice (under two worlds at once) is an error, as a failed request is.
fn served(server: &Server, accounts: &[Account]) -> Result<Records, String> {
    let authors: Vec<String> = accounts
        .iter()
        .map(|a| format!("at://{}/", a.did))
        .collect();
    let mut records = Records::new();
    for world in WORLDS {
        let mut cursor: Option<String> = None;
        for pages in 1.. {
            if pages > 100 {
                return Err(format!("world {world}: more than 100 pages"));
            }
            let mut path = format!("/v1/vocabularies/by-world?world={world}&limit=1000");
            if let Some(cursor) = &cursor {
                path.push_str("&cursor=");
                path.push_str(&encode(cursor));
            }
            let page = get_json(server, &path)?;
            let items = page["items"]
                .as_array()
                .ok_or_else(|| format!("{path}: no items: {page}"))?;
            for item in items {
                let uri = item["uri"]
                    .as_str()
                    .ok_or_else(|| format!("{path}: an item without a uri: {item}"))?;
                if !authors
                    .iter()
                    .any(|author| uri.starts_with(author.as_str()))
                {
                    continue;
                }
                if records
                    .insert(uri.to_string(), item["record"].clone())
                    .is_some()
                {
                    return Err(format!("{uri} is served twice"));
                }
            }
            match page["cursor"].as_str() {
                Some(next) if !items.is_empty() => cursor = Some(next.to_string()),
                _ => break,
            }
        }
    }
    Ok(records)
}

/// What separates what svc serves from what the PDS holds, or `None` when nothing does.
fn difference(expected: &Records, found: &Records) -> Option<String> {
    let missing: Vec<&String> = expected
        .keys()
        .filter(|uri| !found.contains_key(*uri))
        .collect();
    let extra: Vec<&String> = found
        .keys()
        .filter(|uri| !expected.contains_key(*uri))
        .collect();
    let mut different = Vec::new();
    for (uri, held) in expected {
        if let Some(served) = found.get(uri).filter(|served| *served != held) {
            different.push(format!("{uri}: the PDS holds {held}, svc serves {served}"));
        }
    }
    if missing.is_empty() && extra.is_empty() && different.is_empty() {
        return None;
    }
    Some(format!(
        "{} missing (first ones: {:?}); {} extra (first ones: {:?}); {} different (first ones: \
         {:?})",
        missing.len(),
        &missing[..missing.len().min(10)],
        extra.len(),
        &extra[..extra.len().min(10)],
        different.len(),
        &different[..different.len().min(10)],
    ))
}

/// The last `lines` lines svc logged, everything it wrote so far read in.
fn log_tail(server: &mut Server, lines: usize) -> String {
    while let Ok(line) = server.stderr.try_recv() {
        server.log.push(line);
    }
    server.log[server.log.len().saturating_sub(lines)..].join("\n")
}

/// Waits until svc serves exactly `expected` for `accounts`, for at most `within`, and checks
/// that it still does a moment later; how long it took.
fn converges(
    server: &mut Server,
    accounts: &[Account],
    expected: &Records,
    within: Duration,
) -> Duration {
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!(
                "svc exited ({status}) before the catalog converged; its log:\n{}",
                log_tail(server, 60)
            );
        }
        let last = match served(server, accounts) {
            Ok(found) => match difference(expected, &found) {
                None => break,
                Some(gap) => gap,
            },
            Err(error) => error,
        };
        if started.elapsed() >= within {
            panic!(
                "the catalog did not come to serve exactly the {} records the PDS holds within \
                 {within:?}: {last}\n/readyz: {}\nsvc's last log lines:\n{}",
                expected.len(),
                readyz(server),
                log_tail(server, 60)
            );
        }
        std::thread::sleep(POLL);
    }
    let took = started.elapsed();
    // And it stays so: nothing that comes late (an old event replayed, a repository read
    // again) undoes it.
    std::thread::sleep(Duration::from_secs(2));
    let again = served(server, accounts).unwrap_or_else(|e| panic!("after converging: {e}"));
    if let Some(gap) = difference(expected, &again) {
        panic!("the catalog served what the PDS holds after {took:?}, then no more: {gap}");
    }
    took
}

/// `/readyz`'s text, whatever its status, or why there is none.
fn readyz(server: &Server) -> String {
    match http().get(format!("{}/readyz", server.url)).send() {
        Ok(response) => response
            .text()
            .unwrap_or_else(|e| format!("(no body: {e})")),
        Err(e) => format!("(no answer: {e})"),
    }
}

/// Whether `/readyz` has a note of repositories waiting to be read whole.
fn notes_waiting(readyz: &str) -> bool {
    readyz
        .lines()
        .any(|line| line.starts_with("note:") && line.contains("wait"))
}

/// Polls `/readyz` until `check` holds for its text, for at most `within`; the text.
fn wait_readyz(server: &Server, what: &str, within: Duration, check: fn(&str) -> bool) -> String {
    let started = Instant::now();
    loop {
        let text = readyz(server);
        if check(&text) {
            return text;
        }
        assert!(
            started.elapsed() < within,
            "/readyz did not say {what} within {within:?}; last: {text:?}"
        );
        std::thread::sleep(POLL);
    }
}

/// `svc serve` following `firehose` (a PDS's `ws://` base), reading keys from `directory`.
fn following<'a>(firehose: &'a str, directory: &'a str) -> [&'a str; 8] {
    [
        "--firehose",
        firehose,
        "--plc-url",
        directory,
        "--ready-lag",
        "5s",
        "--liveness",
        "5s",
    ]
}

/// What the first two tests share. svc follows the PDS's firehose and reads keys through
/// `directory`. A publishes while the directory answers, and svc serves it. Then the directory
/// is down (503 to everything): a new account C appears (the PDS registers it with the
/// directory itself, not through the proxy), B and C publish, and A publishes again. B's key
/// was never read (B had published nothing) and C's cannot be, so nothing of theirs can be
/// verified: it must wait, and /readyz must say so. Returns A, B and C.
fn publish_through_a_directory_outage(
    peers: &Peers,
    server: &mut Server,
    directory: &FaultProxy,
    prefix: &str,
) -> Vec<Account> {
    let a = account(peers, prefix);
    let b = account(peers, prefix);
    create(peers, &a, "before-the-outage", "open");
    let before = [a.clone(), b.clone()];
    let expected = ground_truth(peers, &before, VOCAB);
    converges(server, &before, &expected, Duration::from_secs(30));
    assert!(
        directory.connections() > 0,
        "svc verified A's commit without asking the directory through the proxy"
    );

    directory.set(Mode::Unavailable);
    let c = account(peers, prefix);
    let b_first = create(peers, &b, "b-during-the-outage", "open");
    create(peers, &b, "b-during-the-outage-2", "hierarchy-closed");
    update(
        peers,
        &b,
        &b_first,
        "b-changed-during-the-outage",
        "closed-with-default",
    );
    let c_first = create(peers, &c, "c-during-the-outage", "open");
    create(peers, &c, "c-during-the-outage-2", "open");
    delete(peers, &c, &c_first);
    create(peers, &a, "a-during-the-outage", "open");

    std::thread::sleep(Duration::from_secs(3));
    let said = wait_readyz(
        server,
        "that repositories wait to be read whole",
        Duration::from_secs(30),
        notes_waiting,
    );
    eprintln!("/readyz while the directory is down: {said:?}");
    assert!(
        directory.faulted() > 0,
        "svc never asked the directory while it was down"
    );
    // Without its author's key, C's commits cannot be verified: none applies. (B's key was
    // read when its account's first commit came, before the outage.)
    let unverified = served(server, std::slice::from_ref(&c)).expect("svc answers");
    assert!(
        unverified.is_empty(),
        "records applied although their authors' keys could not be read: {unverified:?}"
    );
    vec![a, b, c]
}

/// What every test here starts from: the peers, and a fresh catalog on `backend` (kept while
/// the value lives, with the shared cluster's read lock); `None` when they cannot start
/// (outside CI).
struct Start {
    peers: &'static Peers,
    db: String,
    _dir: tempfile::TempDir,
    _cluster: RwLockReadGuard<'static, ()>,
}

fn start(backend: Backend) -> Option<Start> {
    let peers = peers()?;
    let cluster = shared_cluster();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = backend.fresh_db(dir.path())?;
    Some(Start {
        peers,
        db,
        _dir: dir,
        _cluster: cluster,
    })
}

fn a_record_published_while_the_directory_is_down_reaches_the_catalog(backend: Backend) {
    let Some(Start { peers, db, .. }) = &start(backend) else {
        return;
    };
    let peers: &Peers = peers;
    let directory = FaultProxy::start(peers.plc_port);
    let directory_url = directory.url();
    let mut server = Server::launch(db.as_str(), &following(&peers.pds_ws, &directory_url));
    let accounts = publish_through_a_directory_outage(peers, &mut server, &directory, "cv-down");

    directory.set(Mode::Pass);
    let expected = ground_truth(peers, &accounts, VOCAB);
    assert_eq!(expected.len(), 5, "A's two, B's two, C's one: {expected:?}");
    let took = converges(&mut server, &accounts, &expected, CONVERGED_WITHIN);
    eprintln!("the catalog held exactly the PDS's records {took:?} after the directory came back");
    // Nothing of this test's waits any more; the note goes once nothing else does either.
    wait_readyz(
        &server,
        "that nothing waits any more",
        CONVERGED_WITHIN,
        |text: &str| !notes_waiting(text),
    );
}

fn after_kill_9_during_a_directory_outage_nothing_is_lost(backend: Backend) {
    let Some(Start { peers, db, .. }) = &start(backend) else {
        return;
    };
    let peers: &Peers = peers;
    let directory = FaultProxy::start(peers.plc_port);
    let directory_url = directory.url();
    let args = following(&peers.pds_ws, &directory_url);
    let mut server = Server::launch(db.as_str(), &args);
    let accounts = publish_through_a_directory_outage(peers, &mut server, &directory, "cv-kill");

    // What waits is only in the catalog now: the process that knew it is gone, unwarned.
    let log = server.kill9();
    eprintln!("svc killed with {} lines logged", log.len());
    directory.set(Mode::Pass);
    let mut server = Server::listening(db.as_str(), &args);
    let expected = ground_truth(peers, &accounts, VOCAB);
    assert_eq!(expected.len(), 5, "A's two, B's two, C's one: {expected:?}");
    let took = converges(&mut server, &accounts, &expected, CONVERGED_WITHIN);
    eprintln!("after the restart, the catalog held exactly the PDS's records in {took:?}");
}

/// A small xorshift generator: the chaos test's choices, repeatable from the seed it prints.
struct Chaos(u64);

impl Chaos {
    /// Seeded from `SVC_CHAOS_SEED` when it is set, else from the clock; the seed goes to
    /// stderr (uncaptured, so a passing run shows it too).
    fn seeded(label: &str) -> Chaos {
        let seed = std::env::var("SVC_CHAOS_SEED")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
        let _ = writeln!(
            std::io::stderr(),
            "{label}: chaos seed {seed} (SVC_CHAOS_SEED={seed} makes the same choices again)"
        );
        // Zero is xorshift's one fixed point.
        Chaos(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    fn draw(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number in `0..n`.
    fn below(&mut self, n: usize) -> usize {
        (self.draw() % n as u64) as usize
    }

    /// A duration in `from..to` milliseconds.
    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.draw() % (to - from))
    }
}

/// The chaos test's accounts and the record keys each holds, as the test wrote them.
struct Authors {
    accounts: Vec<Account>,
    held: Vec<Vec<String>>,
    written: usize,
}

impl Authors {
    fn new(peers: &Peers, prefix: &str, count: usize) -> Authors {
        Authors {
            accounts: (0..count).map(|_| account(peers, prefix)).collect(),
            held: vec![Vec::new(); count],
            written: 0,
        }
    }

    /// One write by a random account: mostly a create, else an update of one of its records
    /// (which may move it to another world) or a delete.
    fn write_one(&mut self, peers: &Peers, chaos: &mut Chaos) {
        let who = chaos.below(self.accounts.len());
        let world = WORLDS[chaos.below(WORLDS.len())];
        let roll = chaos.below(10);
        let pick = chaos.draw() as usize;
        self.written += 1;
        let name = format!("chaos-{}", self.written);
        let account = &self.accounts[who];
        let held = &mut self.held[who];
        if roll < 5 || held.is_empty() {
            held.push(create(peers, account, &name, world));
        } else if roll < 8 {
            update(peers, account, &held[pick % held.len()], &name, world);
        } else {
            let rkey = held.swap_remove(pick % held.len());
            delete(peers, account, &rkey);
        }
    }
}

fn faults_on_every_peer_and_kill_9_at_random_moments_converge_to_the_pds(backend: Backend) {
    let Some(Start { peers, db, .. }) = &start(backend) else {
        return;
    };
    let peers: &Peers = peers;
    let mut chaos = Chaos::seeded(&format!("convergence on {backend:?}"));
    let directory = FaultProxy::start(peers.plc_port);
    let firehose = FaultProxy::start(peers.pds_port);
    let (directory_url, firehose_url) = (directory.url(), firehose.ws_url());
    let args = following(&firehose_url, &directory_url);
    let mut server = Server::launch(db.as_str(), &args);
    let mut authors = Authors::new(peers, "cv-chaos", 3);

    // Each round fails the directory one way (every fourth lets it through, so that some
    // commits verify as they come and others wait), writes meanwhile, and may drop the
    // firehose's connection, kill svc or restart the PDS at a random write. A stall lasts one
    // round, a few seconds: far less than the service's 30 s request timeout, so it is the
    // switch that ends the stalled requests.
    const ROUNDS: usize = 10;
    let kills = [1 + chaos.below(ROUNDS - 1), 1 + chaos.below(ROUNDS - 1)];
    let pds_restart = 1 + chaos.below(ROUNDS - 1);
    let faults = [
        Mode::Unavailable,
        Mode::RateLimited {
            retry_after_secs: 1,
        },
        Mode::ResetMidBody,
        Mode::Stall,
    ];
    let started = Instant::now();
    for round in 0..ROUNDS {
        let mode = if round % 4 == 3 {
            Mode::Pass
        } else {
            faults[chaos.below(faults.len())]
        };
        directory.set(mode);
        let writes = 4 + chaos.below(4);
        // About half the rounds drop the firehose's connection.
        let drop_at = Some(chaos.below(writes * 2)).filter(|at| *at < writes);
        let kill_at = kills.contains(&round).then(|| chaos.below(writes));
        let restart_at = (round == pds_restart).then(|| chaos.below(writes));
        eprintln!(
            "round {round}: directory {mode:?}, {writes} writes; before write n, the firehose \
             dropped at {drop_at:?}, the PDS restarted at {restart_at:?}, svc killed at {kill_at:?}"
        );
        for write in 0..writes {
            if drop_at == Some(write) {
                firehose.drop_connections();
            }
            if restart_at == Some(write) {
                restart_the_pds(peers);
            }
            if kill_at == Some(write) {
                server.kill9();
                // A write while svc is down, which it must find when it comes back.
                authors.write_one(peers, &mut chaos);
                std::thread::sleep(chaos.millis(0, 1500));
                server = Server::listening(db.as_str(), &args);
            }
            authors.write_one(peers, &mut chaos);
            std::thread::sleep(chaos.millis(100, 600));
        }
    }
    directory.set(Mode::Pass);
    let faulted = started.elapsed();
    assert!(
        directory.faulted() > 0,
        "svc never met a fault of the directory: is --plc-url followed?"
    );

    let expected = ground_truth(peers, &authors.accounts, VOCAB);
    let took = converges(&mut server, &authors.accounts, &expected, CONVERGED_WITHIN);
    eprintln!(
        "{} writes left {} records; the faults lasted {faulted:?}; the catalog held exactly the \
         PDS's records {took:?} after they stopped ({} firehose connections)",
        authors.written,
        expected.len(),
        firehose.connections()
    );
}

fn a_backfill_started_while_the_directory_is_down_holds_every_record_once_it_is_back(
    backend: Backend,
) {
    let Some(Start { peers, db, .. }) = &start(backend) else {
        return;
    };
    let peers: &Peers = peers;
    let accounts: Vec<Account> = (0..3).map(|_| account(peers, "cv-backfill")).collect();
    for (n, account) in accounts.iter().enumerate() {
        let first = create(peers, account, &format!("backfill-{n}-1"), "open");
        create(
            peers,
            account,
            &format!("backfill-{n}-2"),
            "hierarchy-closed",
        );
        let third = create(peers, account, &format!("backfill-{n}-3"), "open");
        update(
            peers,
            account,
            &first,
            &format!("backfill-{n}-1-changed"),
            "closed-with-default",
        );
        delete(peers, account, &third);
    }

    let directory = FaultProxy::start(peers.plc_port);
    directory.set(Mode::Unavailable);
    let directory_url = directory.url();
    let mut server = Server::listening(
        db.as_str(),
        &[
            "--firehose",
            "none",
            "--backfill",
            peers.pds.as_str(),
            "--plc-url",
            directory_url.as_str(),
        ],
    );
    // The backfill lists the repositories (from the PDS itself), and none can be verified.
    std::thread::sleep(Duration::from_secs(5));
    let said = wait_readyz(
        &server,
        "that repositories wait to be read whole",
        Duration::from_secs(30),
        notes_waiting,
    );
    eprintln!("/readyz while the directory is down: {said:?}");
    assert!(
        directory.faulted() > 0,
        "svc never asked the directory while it was down"
    );
    let unverified = served(&server, &accounts).expect("svc answers");
    assert!(
        unverified.is_empty(),
        "records applied although their authors' keys could not be read: {unverified:?}"
    );

    directory.set(Mode::Pass);
    let expected = ground_truth(peers, &accounts, VOCAB);
    assert_eq!(expected.len(), 6, "two records an account: {expected:?}");
    let took = converges(&mut server, &accounts, &expected, CONVERGED_WITHIN);
    eprintln!("the backfill held exactly the PDS's records {took:?} after the directory came back");
}

each_backend!(
    a_record_published_while_the_directory_is_down_reaches_the_catalog,
    after_kill_9_during_a_directory_outage_nothing_is_lost,
    faults_on_every_peer_and_kill_9_at_random_moments_converge_to_the_pds,
    a_backfill_started_while_the_directory_is_down_holds_every_record_once_it_is_back,
);
