//! The reference AT Protocol peers (PDS + PLC directory + a labeler, see test-peers/README.md)
//! for integration tests: started once per test binary, on demand, and stopped when it exits.
//!
//! ```ignore
//! let Some(peers) = common::peers::peers() else { return };
//! let alice = peers.create_account("alice");
//! let (uri, cid) = peers.create_record(&alice, "dev.svc.vocab", record, None);
//! let label = peers.label(&uri, "spam", false, None); // signed, on subscribeLabels as `seq`
//! ```
//!
//! Lifetime: the first `peers()` runs `scripts/peers install` (cached, idempotent), then spawns
//! `scripts/peers run` (which `exec`s `node test-peers/start.mjs`) as a child whose stdin is a
//! pipe, with `SVC_PEERS_EXIT_ON_STDIN_EOF=1`. The `Child`, and with it the pipe's write end, sits
//! in a static that is never dropped; when the test process ends, however it ends (normal exit,
//! panic, SIGKILL), the kernel closes that end, Node sees end-of-file on stdin and shuts the
//! servers down as on SIGTERM (removing the data directory of the PDS and the labeler). Nothing
//! is shared between test binaries: each gets its own ports and its own files, so several can run
//! at once.
//!
//! Files, in `target/tmp`: `svc-peers-<test pid>.log` (install output and the servers' stderr;
//! `LOG_ENABLED=true` adds the servers' own logs) and `svc-peers-<test pid>.json` (the JSON line,
//! for poking at a running test's peers with curl or `SVC_PEERS_ENV=... test-peers/smoke.sh`).
//! Those of test processes no longer alive are removed at the next start.
//!
//! When the peers cannot start: with `CI=true` every `peers()` panics with the reason; otherwise
//! the reason goes to stderr (uncaptured, so it shows even for passing tests) and `peers()`
//! returns `None`, so the calling test can return early.
#![allow(dead_code)]

use reqwest::Url;
use reqwest::blocking::{Client, RequestBuilder};
use serde_json::{Value, json};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

/// Running peers, as their JSON line describes them.
pub struct Peers {
    /// PLC directory base URL, `http://localhost:<port>`.
    pub plc: String,
    /// PDS base URL, `http://localhost:<port>` (as DID documents name it).
    pub pds: String,
    /// Firehose base: `pds_ws + "/xrpc/com.atproto.sync.subscribeRepos?cursor=0"`.
    pub pds_ws: String,
    pub plc_port: u16,
    pub pds_port: u16,
    /// HTTP basic auth `admin:<password>` for `com.atproto.admin.*`.
    pub admin_password: String,
    /// Handles end with this (`.test`).
    pub handle_domain: String,
    /// The labeler's `did:plc`: its document on the PLC has the `#atproto_label` key (which signs
    /// its labels) and the `#atproto_labeler` service at `labeler`.
    pub labeler_did: String,
    /// The labeler (skyware's `LabelerServer`), `http://localhost:<port>`: labels at
    /// `ws://localhost:<port>/xrpc/com.atproto.label.subscribeLabels?cursor=0`.
    pub labeler: String,
    /// The labeler's control server, `http://127.0.0.1:<port>` (see `label`, `forged_label`).
    pub labeler_control: String,
    /// The data directory of the PDS and the labeler (removed when the peers stop).
    pub data_dir: String,
    /// The Node process.
    pub pid: u32,
    /// Install output and the servers' stderr.
    pub log: PathBuf,
    http: Client,
    accounts: AtomicU64,
    /// Holds the write end of the child's stdin: closing it (at process exit) stops the peers.
    child: Mutex<Child>,
}

/// An account on the PDS, as `create_account` made it.
#[derive(Clone, Debug)]
pub struct Account {
    pub did: String,
    pub handle: String,
    pub access_jwt: String,
    pub password: String,
}

static PEERS: OnceLock<Result<Peers, String>> = OnceLock::new();

/// The peers of this test binary if they have started, without starting them.
pub fn started() -> Option<&'static Peers> {
    PEERS.get().and_then(|result| result.as_ref().ok())
}

/// The peers of this test binary, started on first use. `None` (after a message on stderr) when
/// they cannot start, unless `CI=true`, where this panics with the reason instead.
pub fn peers() -> Option<&'static Peers> {
    let result = PEERS.get_or_init(|| {
        let started = Instant::now();
        let result = start();
        match &result {
            Ok(p) => note(&format!(
                "peers: PDS {} PLC {} labeler {} (pid {}) up in {:.1}s; log {}",
                p.pds,
                p.plc,
                p.labeler,
                p.pid,
                started.elapsed().as_secs_f64(),
                p.log.display()
            )),
            Err(reason) if !in_ci() => note(&format!(
                "peers: cannot start the reference PDS/PLC, so tests that need them pass \
                 without running (CI=true makes this an error):\n{reason}"
            )),
            Err(_) => {}
        }
        result
    });
    match result {
        Ok(peers) => Some(peers),
        Err(reason) if in_ci() => panic!("peers: cannot start the reference PDS/PLC:\n{reason}"),
        Err(_) => {
            let test = std::thread::current().name().unwrap_or("?").to_string();
            note(&format!("peers: unavailable; {test} returns early"));
            None
        }
    }
}

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// To stderr directly: the test harness captures `eprintln!`, not writes to the stream.
fn note(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn start() -> Result<Peers, String> {
    let script = repo_root().join("scripts/peers");
    if !script.exists() {
        return Err(format!("{} does not exist", script.display()));
    }
    let dir = super::target_tmp();
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    remove_stale_files(&dir);
    let me = std::process::id();
    let log = dir.join(format!("svc-peers-{me}.log"));
    let env_file = dir.join(format!("svc-peers-{me}.json"));
    let log_file = File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
    let log_handle = || {
        log_file
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))
    };
    let fail = |what: String| {
        format!(
            "{what}\n--- last lines of {}:\n{}",
            log.display(),
            tail(&log, 30)
        )
    };

    // 1. Node 22 and the npm packages (a few minutes when cold, instant when cached).
    let install_timeout = seconds_from_env("SVC_PEERS_INSTALL_TIMEOUT", 1200);
    let mut install = Command::new(&script)
        .arg("install")
        .stdin(Stdio::null())
        .stdout(log_handle()?)
        .stderr(log_handle()?)
        .spawn()
        .map_err(|e| format!("run {} install: {e}", script.display()))?;
    let deadline = Instant::now() + install_timeout;
    loop {
        match install.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(status)) => {
                return Err(fail(format!("scripts/peers install failed ({status})")));
            }
            Ok(None) if Instant::now() > deadline => {
                let _ = install.kill();
                let _ = install.wait();
                return Err(fail(format!(
                    "scripts/peers install took more than {install_timeout:?} \
                     (SVC_PEERS_INSTALL_TIMEOUT)"
                )));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(format!("wait for scripts/peers install: {e}")),
        }
    }

    // 2. The servers, in the foreground of a child that ends when our end of its stdin closes.
    let mut child = Command::new(&script)
        .arg("run")
        .env("SVC_PEERS_EXIT_ON_STDIN_EOF", "1")
        // `run` writes no files; set anyway so nothing could touch the shared default.
        .env("SVC_PEERS_ENV", &env_file)
        // Free ports for each test binary, whatever the developer's shell says.
        .env_remove("SVC_PEERS_PLC_PORT")
        .env_remove("SVC_PEERS_PDS_PORT")
        .env_remove("SVC_PEERS_LABELER_PORT")
        .env_remove("SVC_PEERS_LABELER_CONTROL_PORT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log_handle()?)
        .spawn()
        .map_err(|e| format!("run {} run: {e}", script.display()))?;
    let stdout = child.stdout.take().expect("piped stdout");
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = sender.send(line);
        // Nothing else is expected on stdout; keep draining so Node never blocks on it.
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    let start_timeout = seconds_from_env("SVC_PEERS_START_TIMEOUT", 90);
    let line = match receiver.recv_timeout(start_timeout) {
        Ok(line) if line.ends_with('\n') => line,
        Ok(_) | Err(mpsc::RecvTimeoutError::Disconnected) => {
            let status = child.wait().map(|s| s.to_string()).unwrap_or_default();
            return Err(fail(format!(
                "the peers exited before becoming healthy ({status})"
            )));
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail(format!(
                "the peers were not healthy after {start_timeout:?} (SVC_PEERS_START_TIMEOUT)"
            )));
        }
    };
    let _ = std::fs::write(&env_file, &line);

    let v: Value = serde_json::from_str(&line).map_err(|e| format!("JSON line {line:?}: {e}"))?;
    let text = |k: &str| {
        v[k].as_str()
            .map(str::to_string)
            .ok_or_else(|| format!("JSON line lacks {k}: {line}"))
    };
    let number = |k: &str| {
        v[k].as_u64()
            .ok_or_else(|| format!("JSON line lacks {k}: {line}"))
    };
    super::install_crypto();
    let http = Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .map_err(|e| format!("HTTP client: {e}"))?;
    Ok(Peers {
        plc: text("plc")?,
        pds: text("pds")?,
        pds_ws: text("pdsWs")?,
        plc_port: number("plcPort")? as u16,
        pds_port: number("pdsPort")? as u16,
        admin_password: text("adminPassword")?,
        handle_domain: text("handleDomain")?,
        labeler_did: text("labeler_did")?,
        labeler: text("labeler")?,
        labeler_control: text("labeler_control")?,
        data_dir: text("dataDir")?,
        pid: number("pid")? as u32,
        log,
        http,
        accounts: AtomicU64::new(0),
        child: Mutex::new(child),
    })
}

fn seconds_from_env(name: &str, default: u64) -> Duration {
    let secs = std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default);
    Duration::from_secs(secs)
}

fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Removes `svc-peers-<pid>.{log,json}` of test processes that no longer run.
fn remove_stale_files(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix("svc-peers-") else {
            continue;
        };
        let Some(pid) = rest
            .strip_suffix(".log")
            .or_else(|| rest.strip_suffix(".json"))
        else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

impl Peers {
    /// Restarts the PDS (stopped, down for about a second, started again on the same data
    /// and port) without waiting: every other test of this binary sees it go away.
    pub fn restart_pds(&self) {
        // SAFETY: a signal to a process of ours; kill(2) has no memory effects here.
        let sent = unsafe { libc::kill(self.pid as libc::pid_t, libc::SIGUSR2) };
        assert_eq!(sent, 0, "signalling the peers (pid {})", self.pid);
    }

    /// Waits until the PDS answers its health check again.
    pub fn wait_pds_healthy(&self, within: Duration) {
        let deadline = Instant::now() + within;
        let url = format!("{}/xrpc/_health", self.pds);
        while !self
            .http
            .get(&url)
            .send()
            .is_ok_and(|r| r.status().is_success())
        {
            assert!(Instant::now() < deadline, "the PDS did not come back");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// A new account with the handle `<prefix><n>.test` (the prefix lowercased, reduced to
    /// letters, digits and hyphens, and shortened to fit the PDS's 3..=18 characters).
    pub fn create_account(&self, name_prefix: &str) -> Account {
        let n = self.accounts.fetch_add(1, Ordering::Relaxed) + 1;
        let suffix = n.to_string();
        let mut base: String = name_prefix
            .to_ascii_lowercase()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let base_trimmed = base.trim_start_matches('-').to_string();
        base = if base_trimmed.is_empty() {
            "acct".to_string()
        } else {
            base_trimmed
        };
        base.truncate(18 - suffix.len());
        while base.len() + suffix.len() < 3 {
            base.push('x');
        }
        let name = format!("{base}{suffix}");
        let handle = format!("{name}{}", self.handle_domain);
        let password = format!("{name}-password");
        let body = self.xrpc_ok(
            self.post("com.atproto.server.createAccount").json(&json!({
                "handle": handle, "email": format!("{name}@example.com"), "password": password,
            })),
            "com.atproto.server.createAccount",
        );
        let field = |k: &str| {
            body[k]
                .as_str()
                .unwrap_or_else(|| panic!("createAccount answer lacks {k}: {body}"))
                .to_string()
        };
        Account {
            did: field("did"),
            handle: field("handle"),
            access_jwt: field("accessJwt"),
            password,
        }
    }

    /// `com.atproto.repo.createRecord` (no lexicon validation; `record` should carry
    /// `"$type": collection`). Returns `(uri, cid)`.
    pub fn create_record(
        &self,
        acct: &Account,
        collection: &str,
        record: Value,
        rkey: Option<&str>,
    ) -> (String, String) {
        let mut input = json!({"repo": acct.did, "collection": collection, "record": record});
        if let Some(rkey) = rkey {
            input["rkey"] = json!(rkey);
        }
        let body = self.xrpc_ok(
            self.post("com.atproto.repo.createRecord")
                .bearer_auth(&acct.access_jwt)
                .json(&input),
            "com.atproto.repo.createRecord",
        );
        uri_and_cid(&body)
    }

    /// `com.atproto.repo.putRecord`: creates or replaces. Returns `(uri, cid)`.
    pub fn put_record(
        &self,
        acct: &Account,
        collection: &str,
        rkey: &str,
        record: Value,
    ) -> (String, String) {
        let body = self.xrpc_ok(
            self.post("com.atproto.repo.putRecord")
                .bearer_auth(&acct.access_jwt)
                .json(
                    &json!({"repo": acct.did, "collection": collection, "rkey": rkey,
                              "record": record}),
                ),
            "com.atproto.repo.putRecord",
        );
        uri_and_cid(&body)
    }

    /// `com.atproto.repo.deleteRecord` (succeeds, without a commit, if the record is absent).
    pub fn delete_record(&self, acct: &Account, collection: &str, rkey: &str) {
        self.xrpc_ok(
            self.post("com.atproto.repo.deleteRecord")
                .bearer_auth(&acct.access_jwt)
                .json(&json!({"repo": acct.did, "collection": collection, "rkey": rkey})),
            "com.atproto.repo.deleteRecord",
        );
    }

    /// `com.atproto.server.deactivateAccount`. Its lexicon has an input (optional `deleteAfter`),
    /// so the PDS wants a JSON body: with no body at all it answers 400 "A request body is
    /// expected but none was provided". It gets `{}`.
    pub fn deactivate(&self, acct: &Account) {
        self.xrpc_ok(
            self.post("com.atproto.server.deactivateAccount")
                .bearer_auth(&acct.access_jwt)
                .json(&json!({})),
            "com.atproto.server.deactivateAccount",
        );
    }

    /// `com.atproto.server.activateAccount`: no input, so no body and no content-type (a body
    /// gets 400 "A request body was provided when none was expected"). The access token of a
    /// deactivated account still works for this.
    pub fn activate(&self, acct: &Account) {
        self.xrpc_ok(
            self.post("com.atproto.server.activateAccount")
                .bearer_auth(&acct.access_jwt),
            "com.atproto.server.activateAccount",
        );
    }

    /// The record's value, or `None` if the PDS has no such record (also for unknown or
    /// deactivated repos).
    pub fn get_record(&self, repo: &str, collection: &str, rkey: &str) -> Option<Value> {
        self.get_record_with_cid(repo, collection, rkey)
            .map(|(_, value)| value)
    }

    /// `(cid, value)` of the record, or `None` as for `get_record`.
    pub fn get_record_with_cid(
        &self,
        repo: &str,
        collection: &str,
        rkey: &str,
    ) -> Option<(String, Value)> {
        let (status, body) = self.xrpc_get(
            "com.atproto.repo.getRecord",
            &[("repo", repo), ("collection", collection), ("rkey", rkey)],
        );
        if status == 200 {
            let cid = body["cid"].as_str().unwrap_or_default().to_string();
            return Some((cid, body["value"].clone()));
        }
        // An absent record: 400 RecordNotFound; an unknown or deactivated repo: 400
        // InvalidRequest "Could not locate record".
        let missing = body["error"] == "RecordNotFound"
            || body["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Could not locate record"));
        if (status == 400 && missing) || status == 404 {
            return None;
        }
        panic!("com.atproto.repo.getRecord {repo} {collection} {rkey}: HTTP {status}: {body}");
    }

    /// A GET of `/xrpc/<nsid>?<query>` on the PDS: status and JSON body (`Null` if empty,
    /// `{"raw": text}` if not JSON).
    pub fn xrpc_get(&self, nsid: &str, query: &[(&str, &str)]) -> (u16, Value) {
        let url = Url::parse_with_params(&format!("{}/xrpc/{nsid}", self.pds), query)
            .unwrap_or_else(|e| panic!("{nsid}: bad URL: {e}"));
        send(self.http.get(url), nsid)
    }

    /// A POST to `/xrpc/<nsid>` on the PDS, as `acct` if given, with `input` as its JSON body
    /// (none if `None`): status and JSON body as for `xrpc_get`.
    pub fn xrpc_post(
        &self,
        nsid: &str,
        acct: Option<&Account>,
        input: Option<&Value>,
    ) -> (u16, Value) {
        let mut request = self.post(nsid);
        if let Some(acct) = acct {
            request = request.bearer_auth(&acct.access_jwt);
        }
        if let Some(input) = input {
            request = request.json(input);
        }
        send(request, nsid)
    }

    /// `admin:<password>` basic auth, for `com.atproto.admin.*` requests built by hand.
    pub fn admin(&self, request: RequestBuilder) -> RequestBuilder {
        request.basic_auth("admin", Some(&self.admin_password))
    }

    /// The HTTP client the helpers use (no proxy, 60 s timeout).
    pub fn http(&self) -> &Client {
        &self.http
    }

    /// The DID document the PLC directory holds for `did`.
    pub fn did_doc(&self, did: &str) -> Value {
        let (status, body) = send(self.http.get(format!("{}/{did}", self.plc)), "PLC");
        assert_eq!(status, 200, "PLC {did}: {body}");
        body
    }

    /// A label on `uri` (a DID or an `at://` URI) with the value `val`, negating if `neg`, expiring
    /// at `exp` (a datetime, passed on as written) if given: signed with the labeler's key, stored
    /// and emitted on subscribeLabels. Returns it as stored: `seq` (its sequence number on
    /// subscribeLabels), `src` (= `labeler_did`), `uri`, `val`, `neg`, `cts`, `exp` if given,
    /// `ver` (1), `sig` (`{"$bytes": base64}`). Live subscribers only get it if their connection
    /// was registered first (see `labeler_subscribers`); replays from a cursor always do.
    pub fn label(&self, uri: &str, val: &str, neg: bool, exp: Option<&str>) -> Value {
        let mut input = json!({"uri": uri, "val": val, "neg": neg});
        if let Some(exp) = exp {
            input["exp"] = json!(exp);
        }
        self.labeler_post("/label", &input)
    }

    /// A label as `label` makes it (not negating, no `exp`), but with one byte of its signature
    /// flipped: it verifies against no key, yet goes out on subscribeLabels, live and in
    /// replays, in sequence with the others. Returns it as stored, like `label`.
    pub fn forged_label(&self, uri: &str, val: &str) -> Value {
        self.labeler_post("/forged", &json!({"uri": uri, "val": val}))
    }

    /// How many subscribeLabels connections the labeler has registered. It registers one only
    /// after replaying from its cursor, and emits a new label only to those registered, so a
    /// test that needs a subscriber to get a label live waits for this to grow first.
    pub fn labeler_subscribers(&self) -> u64 {
        let what = "labeler control GET /subscribers";
        let (status, body) = send(
            self.http
                .get(format!("{}/subscribers", self.labeler_control)),
            what,
        );
        match body["subscribers"].as_u64() {
            Some(n) if status == 200 => n,
            _ => panic!(
                "{what}: HTTP {status}: {body} (peers log: {})",
                self.log.display()
            ),
        }
    }

    fn labeler_post(&self, path: &str, input: &Value) -> Value {
        let what = format!("labeler control POST {path}");
        let (status, body) = send(
            self.http
                .post(format!("{}{path}", self.labeler_control))
                .json(input),
            &what,
        );
        if status != 200 || !body["seq"].is_u64() {
            panic!(
                "{what} {input}: HTTP {status}: {body} (peers log: {})",
                self.log.display()
            );
        }
        body
    }

    fn post(&self, nsid: &str) -> RequestBuilder {
        self.http.post(format!("{}/xrpc/{nsid}", self.pds))
    }

    fn xrpc_ok(&self, request: RequestBuilder, nsid: &str) -> Value {
        let (status, body) = send(request, nsid);
        if !(200..300).contains(&status) {
            panic!(
                "{nsid}: HTTP {status}: {body} (peers log: {})",
                self.log.display()
            );
        }
        body
    }
}

fn send(request: RequestBuilder, what: &str) -> (u16, Value) {
    let response = request
        .send()
        .unwrap_or_else(|e| panic!("{what}: request failed: {e}"));
    let status = response.status().as_u16();
    let text = response
        .text()
        .unwrap_or_else(|e| panic!("{what}: reading the answer: {e}"));
    let body = if text.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or_else(|_| json!({"raw": text}))
    };
    (status, body)
}

fn uri_and_cid(body: &Value) -> (String, String) {
    match (body["uri"].as_str(), body["cid"].as_str()) {
        (Some(uri), Some(cid)) => (uri.to_string(), cid.to_string()),
        _ => panic!("write answer lacks uri or cid: {body}"),
    }
}
