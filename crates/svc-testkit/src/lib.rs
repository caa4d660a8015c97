//! What svc's tests share: the real `svc` binary run on an ephemeral port and talked to over
//! HTTP, the test peers (the reference PDS and PLC directory), a Jetstream double, a proxy
//! that injects faults, a headless browser, a change-stream client, and the example catalog.
//! A crate of its own, compiled once for every test binary and the benchmarks.

pub mod browser;
pub mod cli;
pub mod examples;
pub mod fault_proxy;
pub mod labeler;
pub mod nginx;
pub mod peers;
pub mod replay;
pub mod stream;

// Beside the replay server, which the ingest benchmark includes on its own.
#[allow(unused_imports)]
pub use replay::spawn_async;

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use svc_syntax::{Tid, UnixMicros};

/// The directory cargo builds this profile into (`target/debug`), found from the running
/// test or benchmark binary (`target/debug/deps/<test>` or `target/debug/examples/<bench>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the running binary's path");
    let mut dir = exe.parent().expect("the binary's directory").to_path_buf();
    if matches!(
        dir.file_name().and_then(|name| name.to_str()),
        Some("deps" | "examples")
    ) {
        dir.pop();
    }
    dir
}

/// A binary of this workspace, as cargo built it for the tests (`svc`).
pub fn built(name: &str) -> PathBuf {
    profile_dir().join(name)
}

/// Where tests keep what outlives one test (peers' logs, screenshots): `target/tmp`, as cargo
/// gives integration tests.
pub fn target_tmp() -> PathBuf {
    let profile = profile_dir();
    profile.parent().unwrap_or(&profile).join("tmp")
}

/// The storage engine a test's catalog runs on; the HTTP API tests run on each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// A fresh, empty catalog for one test: a file in `dir`, or a new database on the
    /// PostgreSQL cluster that scripts/test started (`SVC_TEST_POSTGRES`). `None` when there is
    /// no cluster outside CI (the test says it skipped); under CI that is a failure.
    pub fn fresh_db(self, dir: &Path) -> Option<String> {
        match self {
            Backend::Sqlite => Some(dir.join("catalog.db").to_string_lossy().into_owned()),
            Backend::Postgres => fresh_postgres_database(),
        }
    }
}

fn fresh_postgres_database() -> Option<String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
        .block_on(svc_catalog::testing::fresh_database())
}

/// `n` records of every kind from the benchmark's generator (`seed` fixes them), written to
/// `dir/generated.jsonl`: the file and its events.
pub fn generated_events(dir: &Path, n: usize, seed: u64) -> (PathBuf, Vec<Value>) {
    let path = dir.join("generated.jsonl");
    let generator = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/gen_events.py");
    let status = Command::new("python3")
        .arg(generator)
        .arg(n.to_string())
        .arg(&path)
        .args(["--seed", &seed.to_string()])
        .stderr(Stdio::null())
        .status()
        .expect("python3 runs the generator");
    assert!(status.success(), "the generator failed");
    let events = std::fs::read_to_string(&path)
        .expect("the generated file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a generated event"))
        .collect();
    (path, events)
}

/// A query parameter value, percent-encoded.
pub fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Tests that restart or pause the PostgreSQL cluster every test of their binary shares run
/// alone ([`cluster_alone`]); the others hold [`shared_cluster`] meanwhile.
static CLUSTER: std::sync::RwLock<()> = std::sync::RwLock::new(());

pub fn shared_cluster() -> std::sync::RwLockReadGuard<'static, ()> {
    CLUSTER.read().unwrap_or_else(|p| p.into_inner())
}

pub fn cluster_alone() -> std::sync::RwLockWriteGuard<'static, ()> {
    CLUSTER.write().unwrap_or_else(|p| p.into_inner())
}

/// Runs scripts/pg on the test cluster (`restart`, `pause`, `resume`...).
pub fn pg(action: &str) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/pg");
    let status = Command::new(script)
        .arg(action)
        .status()
        .expect("run scripts/pg");
    assert!(status.success(), "scripts/pg {action} failed");
}

/// Runs each named test, a `fn(Backend)`, once per storage engine.
#[macro_export]
macro_rules! each_backend {
    ($($test:ident),* $(,)?) => {
        mod on_sqlite {
            $( #[test] fn $test() { super::$test($crate::Backend::Sqlite) } )*
        }
        mod on_postgres {
            $( #[test] fn $test() { super::$test($crate::Backend::Postgres) } )*
        }
    };
}

pub struct Server {
    pub url: String,
    pub child: Child,
    /// Everything the server wrote to stderr so far is collected here.
    pub stderr: mpsc::Receiver<String>,
    pub log: Vec<String>,
}

/// Writes a file that holds a secret (an admin password) as an operator must: readable by its
/// owner alone, or svc refuses it.
pub fn write_private(path: &Path, text: &str) {
    std::fs::write(path, text).expect("write a secret file");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .expect("make a secret file private");
    }
}

/// Ends a child as SIGTERM asks, and kills it if it has not ended `within`: a server with
/// workers of its own (nginx) stops them on SIGTERM, where SIGKILL would leave them behind.
pub fn terminate(child: &mut Child, within: Duration) {
    let pid = child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The `svc` binary. Once this test binary's peers run, DIDs resolve through their PLC
/// directory (`SVC_PLC_URL`, which a `--plc-url` given overrides), as a deployment's do through
/// its own: the signing keys that verify the PDS's commits are there. Every peer here is on
/// loopback, which `svc serve` reaches when the network names it only with
/// `--allow-private-peers` (`SVC_ALLOW_PRIVATE_PEERS`).
///
/// `SVC_UNDER_TEST` names another build to run instead (an older one, to show what a test
/// catches, or to measure a figure before and after).
pub fn svc() -> Command {
    let binary =
        std::env::var_os("SVC_UNDER_TEST").unwrap_or_else(|| built("svc").into_os_string());
    let mut command = Command::new(binary);
    command.env("SVC_ALLOW_PRIVATE_PEERS", "true");
    if let Some(peers) = peers::started() {
        command.env("SVC_PLC_URL", &peers.plc);
    }
    command
}

impl Server {
    /// Starts `svc serve --firehose none --listen 127.0.0.1:0 --db <db> <extra>` and waits
    /// until it is ready.
    pub fn start(db: impl AsRef<std::ffi::OsStr>, extra: &[&str]) -> Server {
        let mut args = vec!["--firehose", "none"];
        args.extend_from_slice(extra);
        Server::launch(db, &args)
    }

    /// Starts `svc serve` following a Jetstream (a replay's URL), ready once within 5 s of it.
    pub fn following(db: impl AsRef<std::ffi::OsStr>, jetstream: &str) -> Server {
        Server::launch(db, &["--firehose", jetstream, "--ready-lag", "5s"])
    }

    /// Starts `svc serve --listen 127.0.0.1:0 --db <db> <args>` and waits until it is ready
    /// (`--listen` in `args` replaces the address).
    pub fn launch(db: impl AsRef<std::ffi::OsStr>, extra: &[&str]) -> Server {
        let mut server = Server::listening(db, extra);
        server.wait_ready();
        server
    }

    /// Starts `svc serve` and returns as soon as it listens, ready or not.
    pub fn listening(db: impl AsRef<std::ffi::OsStr>, extra: &[&str]) -> Server {
        Server::spawn(svc(), db, extra)
    }

    /// Starts `svc serve` as a public service runs it, reaching no private address the
    /// network names, and returns as soon as it listens.
    pub fn listening_in_public(db: impl AsRef<std::ffi::OsStr>, extra: &[&str]) -> Server {
        let mut command = svc();
        command.env_remove("SVC_ALLOW_PRIVATE_PEERS");
        Server::spawn(command, db, extra)
    }

    fn spawn(mut command: Command, db: impl AsRef<std::ffi::OsStr>, extra: &[&str]) -> Server {
        // An ephemeral loopback port unless the test names its own address.
        let listen: &[&str] = if extra.contains(&"--listen") {
            &[]
        } else {
            &["--listen", "127.0.0.1:0"]
        };
        let mut child = command
            .arg("serve")
            .args(listen)
            .arg("--db")
            .arg(db)
            .args(extra)
            .env("SVC_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start svc serve");
        let stderr = child.stderr.take().expect("stderr");
        let (sender, receiver) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let mut server = Server {
            url: String::new(),
            child,
            stderr: receiver,
            log: Vec::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while server.url.is_empty() {
            let Some(line) = server.next_line(deadline) else {
                panic!("svc serve printed no address: {:?}", server.log);
            };
            if let Some(rest) = line.split("listening on ").nth(1) {
                server.url = rest.trim().to_string();
            }
        }
        server
    }

    /// Waits until `/readyz` says ready and the "ready" line is logged.
    pub fn wait_ready(&mut self) {
        let server = self;
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let ready = http()
                .get(format!("{}/readyz", server.url))
                .send()
                .is_ok_and(|r| r.status() == 200);
            if ready {
                // Everything logged up to the "ready" line (import summaries) is in the log.
                while !server.log.iter().any(|l| l.ends_with(" ready")) {
                    server
                        .next_line(deadline)
                        .expect("svc serve logged no ready line");
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("svc serve never became ready; log: {:?}", server.log);
    }

    /// Reads the server's log until a line contains `needle`, for at most `within`.
    pub fn wait_log(&mut self, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        if let Some(line) = self.log.iter().find(|l| l.contains(needle)) {
            return line.clone();
        }
        loop {
            match self.next_line(deadline) {
                Some(line) if line.contains(needle) => return line,
                Some(_) => {}
                None => panic!("no {needle:?} logged within {within:?}: {:?}", self.log),
            }
        }
    }

    fn next_line(&mut self, deadline: Instant) -> Option<String> {
        let wait = deadline.saturating_duration_since(Instant::now());
        let line = self.stderr.recv_timeout(wait).ok()?;
        self.log.push(line.clone());
        Some(line)
    }

    /// The operator's takedown of `subject` (a strongRef or a repoRef) applied or lifted
    /// through `com.atproto.admin.updateSubjectStatus`, as `admin` with `password`; the
    /// answer's status.
    pub fn set_takedown(&self, password: &str, subject: Value, applied: bool) -> u16 {
        http()
            .post(format!(
                "{}/xrpc/com.atproto.admin.updateSubjectStatus",
                self.url
            ))
            .basic_auth("admin", Some(password))
            .json(&json!({"subject": subject, "takedown": {"applied": applied}}))
            .send()
            .expect("the takedown")
            .status()
            .as_u16()
    }

    pub fn get(&self, path_and_query: &str) -> (u16, Value) {
        let (status, _, body) = self.get_raw(path_and_query);
        let value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("{path_and_query}: not JSON ({e}): {body}"));
        (status, value)
    }

    pub fn get_raw(&self, path_and_query: &str) -> (u16, String, String) {
        let response = http()
            .get(format!("{}{path_and_query}", self.url))
            .send()
            .expect("request");
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        (status, content_type, response.text().expect("body"))
    }

    /// The uris of a list answer, checking the envelope on the way.
    pub fn uris(&self, path_and_query: &str) -> Vec<String> {
        let (status, body) = self.get(path_and_query);
        assert_eq!(status, 200, "{path_and_query}: {body}");
        let items = body["items"].as_array().expect("items");
        assert_eq!(
            body["total"].as_u64(),
            Some(items.len() as u64),
            "{path_and_query}: total"
        );
        items
            .iter()
            .map(|i| i["uri"].as_str().expect("uri").to_string())
            .collect()
    }

    /// Kills the server with SIGKILL: no chance to flush or clean up.
    /// Returns everything it logged.
    pub fn kill9(mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_millis(200)) {
            self.log.push(line);
        }
        std::mem::take(&mut self.log)
    }

    /// Polls `path_and_query` until `check` holds for its JSON answer, for at most `within`.
    pub fn wait_for(
        &self,
        path_and_query: &str,
        within: Duration,
        check: impl Fn(&Value) -> bool,
    ) -> Duration {
        let started = Instant::now();
        loop {
            let (status, body) = self.get(path_and_query);
            if status == 200 && check(&body) {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < within,
                "{path_and_query}: not as expected within {within:?}; last answer {body}"
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Sends SIGTERM and waits for a clean exit.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                while let Ok(line) = self.stderr.try_recv() {
                    self.log.push(line);
                }
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "svc serve did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A JSON Lines file of Jetstream events being written.
pub struct Events {
    lines: Vec<String>,
    time: i64,
}

pub const CID: &str = "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm";
pub const NOW: &str = "2026-11-01T12:00:00Z";

impl Default for Events {
    fn default() -> Events {
        Events::new()
    }
}

impl Events {
    pub fn new() -> Events {
        Events {
            lines: Vec::new(),
            time: 1_700_000_000_000_000,
        }
    }

    /// A create of `record` (its `$type` added) at `at://did/collection/rkey`, at revision `rev`.
    pub fn put(
        &mut self,
        did: &str,
        collection: &str,
        rkey: &str,
        rev: &str,
        mut record: Value,
    ) -> String {
        record["$type"] = json!(collection);
        self.time += 1;
        self.lines.push(
            json!({"did": did, "time_us": self.time, "kind": "commit", "commit": {
                "rev": rev, "operation": "create", "collection": collection, "rkey": rkey,
                "record": record, "cid": CID}})
            .to_string(),
        );
        format!("at://{did}/{collection}/{rkey}")
    }

    pub fn delete(&mut self, did: &str, collection: &str, rkey: &str, rev: &str) {
        self.time += 1;
        self.lines.push(
            json!({"did": did, "time_us": self.time, "kind": "commit", "commit": {
                "rev": rev, "operation": "delete", "collection": collection, "rkey": rkey}})
            .to_string(),
        );
    }

    pub fn raw(&mut self, line: &str) {
        self.lines.push(line.to_string());
    }

    pub fn write(&self, path: &Path) -> PathBuf {
        let mut file = std::fs::File::create(path).expect("create events file");
        for line in &self.lines {
            writeln!(file, "{line}").expect("write");
        }
        path.to_path_buf()
    }
}

// Not every test binary follows a live source.
#[allow(unused_imports)]
pub use svc_syntax::now_unix_micros as now_us;

/// The TID of a time (clock id 0): the rev of an event made then, in the order of the times.
pub fn tid(micros: i64) -> String {
    Tid::from_time(UnixMicros(micros), 0).to_string()
}

/// The TID right after `rev`: a newer revision of the same record.
pub fn tid_after(rev: &str) -> String {
    Tid::new(rev).expect("a TID").successor().to_string()
}

/// One bounty of `requester`'s, by did:plc:alice, as an import file in `dir`, and its uri.
pub fn one_bounty(dir: &Path, requester: &str) -> (PathBuf, String) {
    let mut events = Events::new();
    let record = bounty(requester, want_lens(&schema(1), &schema(2)), None);
    let uri = events.put(
        "did:plc:alice",
        "dev.svc.bounty",
        "3kaaaaaaaaa22",
        &tid(1_700_000_000_000_000),
        record,
    );
    (events.write(&dir.join("events.jsonl")), uri)
}

/// A Jetstream commit event creating a vocabulary named `name` at `time_us`.
pub fn vocab_event(time_us: i64, rkey: &str, name: &str, world: &str) -> (i64, String) {
    let line = json!({"did": "did:plc:jetstream", "time_us": time_us, "kind": "commit", "commit": {
        "rev": tid(time_us), "operation": "create", "collection": "dev.svc.vocab", "rkey": rkey,
        "record": {"$type": "dev.svc.vocab", "name": name, "world": world, "occurredAt": NOW}, "cid": CID}});
    (time_us, line.to_string())
}

/// Vocabularies `js-<from>` .. `js-<to - 1>` in the world "open", one second apart from `base`.
pub fn vocab_events(base: i64, from: usize, to: usize) -> Vec<(i64, String)> {
    (from..to)
        .map(|i| {
            vocab_event(
                base + i as i64 * 1_000_000,
                &format!("aaaaaaaa{i:03}"),
                &format!("js-{i:03}"),
                "open",
            )
        })
        .collect()
}

pub fn schema(n: u32) -> String {
    format!("at://did:plc:schemas/dev.panproto.schema.schema/{n}")
}

pub fn lens(n: u32) -> String {
    format!("at://did:plc:lenses/dev.panproto.schema.lens/{n}")
}

pub fn bounty(requester: &str, wants: Value, status: Option<&str>) -> Value {
    let mut record = json!({"requester": requester, "wants": wants, "occurredAt": NOW});
    if let Some(status) = status {
        record["status"] = json!(status);
    }
    record
}

pub fn want_lens(source: &str, target: &str) -> Value {
    json!({"$type": "dev.svc.bounty#wantLens", "source": {"uri": source}, "target": {"uri": target}})
}

pub fn adapter(framework: &str, protocol: &str, verification: Option<&str>) -> Value {
    let mut record = json!({
        "framework": framework, "versionRange": ">=1.0", "author": "did:plc:alice",
        "invocationProtocol": {"kind": protocol}, "isolation": {"kind": "process"}, "occurredAt": NOW
    });
    if let Some(v) = verification {
        record["verification"] = json!(v);
    }
    record
}

pub fn verification(lens_ref: Value, kind: &str, property: &str, result: &str) -> Value {
    let property = match property {
        "lpRoundtrip" => json!({"$type": "dev.svc.defs#lpRoundtrip", "domain": "all records"}),
        "lpGenerator" => json!({"$type": "dev.svc.defs#lpGenerator", "spec": "random"}),
        "lpTheorem" => json!({"$type": "dev.svc.defs#lpTheorem", "statement": "get . put = id"}),
        "lpChecker" => json!({"$type": "dev.svc.defs#lpChecker", "checker": "panproto-check"}),
        other => panic!("no fixture for {other}"),
    };
    json!({"lens": lens_ref, "kind": kind, "verifier": "did:plc:verifier",
           "tool": {"name": "svc", "version": "0.1.0"}, "property": property,
           "result": result, "occurredAt": NOW})
}

pub fn recommendation(sources: &[&str], lens_path: &[&str]) -> Value {
    let conditions: Vec<Value> = sources
        .iter()
        .map(|s| json!({"$type": "dev.svc.recommendation#conditionSourceIs", "schema": {"uri": s}}))
        .chain([json!({"$type": "dev.svc.recommendation#conditionTargetIs", "schema": {"uri": schema(9)}})])
        .collect();
    let path: Vec<Value> = lens_path.iter().map(|l| json!({"uri": l})).collect();
    json!({"issuingCommunity": "at://did:plc:guild/dev.svc.community/1", "conditions": conditions,
           "lensPath": path, "occurredAt": NOW})
}

pub fn community(name: &str, members: &[&str]) -> Value {
    json!({"name": name, "description": "A community of schema people.", "members": members, "createdAt": NOW})
}

pub fn dialect(owner: &str, name: &str) -> Value {
    json!({"owningCommunity": owner, "name": name, "createdAt": NOW})
}

pub fn belief(subject: &str, holder: Option<&str>) -> Value {
    let mut record = json!({"subject": {"uri": subject, "cid": CID}, "occurredAt": NOW});
    if let Some(h) = holder {
        record["holder"] = json!(h);
    }
    record
}

pub fn vocab(name: &str, world: &str) -> Value {
    json!({"name": name, "world": world, "occurredAt": NOW})
}

/// The process's TLS provider: reqwest is built without one here (the service picks ring),
/// so it is installed before any client is made.
pub fn install_crypto() {
    svc_atproto::install_crypto();
}

/// One HTTP client for the tests.
pub fn http() -> &'static reqwest::blocking::Client {
    static CLIENT: std::sync::OnceLock<reqwest::blocking::Client> = std::sync::OnceLock::new();
    CLIENT.get_or_init(|| {
        install_crypto();
        reqwest::blocking::Client::builder()
            .no_proxy()
            .build()
            .expect("an HTTP client")
    })
}

/// The status, the `content-type` and the body of the one answer a connection gets to `raw`
/// before the server closes it.
pub fn answer_to(server: &Server, raw: &[u8]) -> (u16, String, String) {
    let address = server.url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    // A server that answers before the whole request is sent may reset the rest.
    let _ = stream.write_all(raw);
    let mut answer = Vec::new();
    let _ = std::io::Read::read_to_end(&mut stream, &mut answer);
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no head in {answer:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let content_type = head
        .lines()
        .find_map(|line| line.strip_prefix("content-type: "))
        .unwrap_or_default()
        .to_string();
    (status, content_type, body.to_string())
}
