//! A headless Chromium for integration tests, driven over the Chrome DevTools Protocol.
//!
//! ```ignore
//! let Some(browser) = common::browser::Browser::launch_or_skip("the_front_page_renders") else {
//!     return;
//! };
//! browser.navigate(&format!("{}/", server.url));
//! browser.wait_until("document.querySelector('#changes li') !== null", Duration::from_secs(5));
//! assert_eq!(browser.console_errors(), Vec::<String>::new());
//! ```
//!
//! The binary is `SVC_CHROMIUM` or /usr/bin/chromium, as `scripts/chromium path` says; CI
//! installs it with `scripts/chromium install`. Each `Browser` is a process of its own with a
//! fresh profile in a temporary directory (its output goes to `chromium.log` beside the
//! profile, quoted when the launch fails); dropping it closes Chromium and removes the directory.
//!
//! The API is blocking, for plain `#[test]` functions: one WebSocket to the page target,
//! read on the calling thread. While a command waits for its answer, the events that arrive
//! meanwhile are queued (and the console errors among them recorded), so that nothing that
//! happened during a command is lost. Every wait is bounded and panics naming what it waited for.
#![allow(dead_code)]

use base64::Engine as _;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::{self, Message, WebSocket, protocol::WebSocketConfig};

/// How long Chromium may take to start listening (a cold start on a busy CI machine is slow).
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(20);
/// How long any one DevTools command may take to answer.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a navigation may take to reach its load event.
const LOAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a dropped browser gets to close itself before it is killed.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);
/// Events nobody waited for are kept up to this many, the oldest dropped first: a page that
/// logs in a loop must not grow the queue without end.
const MAX_QUEUED_EVENTS: usize = 10_000;
/// Full-page screenshots of long pages are big messages; tungstenite's default limit is 64 MiB.
const MAX_MESSAGE: usize = 512 << 20;

/// A running headless Chromium with one page attached.
pub struct Browser {
    /// The page's own DevTools connection: every method below talks to it.
    page: Mutex<Connection>,
    /// The browser-wide connection, kept for `Browser.close` at drop.
    browser: Mutex<Connection>,
    process: Process,
}

/// The Chromium binary: `SVC_CHROMIUM`, else /usr/bin/chromium (as `scripts/chromium path`).
pub fn binary() -> PathBuf {
    std::env::var_os("SVC_CHROMIUM")
        .filter(|v| !v.is_empty())
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from)
}

impl Browser {
    /// Starts Chromium and attaches to a new blank page. Panics when Chromium is missing or
    /// does not start; see [`Browser::launch_or_skip`] for tests that may skip.
    pub fn launch() -> Browser {
        let binary = binary();
        assert!(binary.is_file(), "{}", missing(&binary));
        let mut process = Process::spawn(&binary);
        let (port, browser_path) = process.wait_for_devtools();
        let mut browser = Connection::open(port, &browser_path, "the browser");
        // A target of our own rather than the start-up tab: it exists once the call returns.
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"]
            .as_str()
            .expect("Target.createTarget answers a targetId");
        let mut page = Connection::open(port, &format!("/devtools/page/{target_id}"), "the page");
        // Page for load events, Runtime for console calls and uncaught exceptions, Log for what
        // the browser itself reports (Content-Security-Policy violations, failed loads).
        for domain in ["Page", "Runtime", "Log"] {
            page.call(&format!("{domain}.enable"), json!({}));
        }
        Browser {
            page: Mutex::new(page),
            browser: Mutex::new(browser),
            process,
        }
    }

    /// [`Browser::launch`], or `None` when Chromium is missing outside CI, after saying
    /// `SKIPPED: <test>: chromium not found` on stderr. Under `CI=true` a missing Chromium is a
    /// failure, as a missing PostgreSQL is (svc_catalog::testing::test_cluster).
    pub fn launch_or_skip(test: &str) -> Option<Browser> {
        let binary = binary();
        if binary.is_file() {
            return Some(Browser::launch());
        }
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!("{}", missing(&binary));
        }
        eprintln!("SKIPPED: {test}: chromium not found");
        None
    }

    /// Loads `url` and waits for its load event. Panics when the navigation fails (refused
    /// connection, bad URL) or the load event does not come within 30 s.
    pub fn navigate(&self, url: &str) {
        let mut page = self.page();
        // A load event still queued belongs to an earlier page.
        page.forget_events("Page.loadEventFired");
        let result = page.call("Page.navigate", json!({"url": url}));
        if let Some(error) = result.get("errorText").and_then(Value::as_str) {
            panic!("navigating to {url} failed: {error}");
        }
        // A same-document navigation (only the fragment changes) has no loader and no load event.
        if result.get("loaderId").is_none() {
            return;
        }
        if page
            .wait_event("Page.loadEventFired", LOAD_TIMEOUT)
            .is_none()
        {
            panic!("no load event for {url} within {LOAD_TIMEOUT:?}");
        }
    }

    /// The value of the JavaScript expression `js` in the page, as JSON: a promise is awaited,
    /// `undefined` is null, NaN, Infinity and BigInts are strings ("NaN", "2n"), a DOM node is
    /// `{}`. Panics with the exception (message and stack) if it threw.
    pub fn eval(&self, js: &str) -> Value {
        self.try_eval(js, COMMAND_TIMEOUT)
            .unwrap_or_else(|error| panic!("evaluating `{js}` failed: {error}"))
    }

    /// Evaluates the expression `js_predicate` every 50 ms until it is truthy (a promise is
    /// awaited). Exceptions count as not yet, since the page may be between documents; the
    /// panic after `timeout` quotes the last answer.
    pub fn wait_until(&self, js_predicate: &str, timeout: Duration) {
        let expression = format!("Promise.resolve(({js_predicate})).then(Boolean)");
        let deadline = Instant::now() + timeout;
        loop {
            // At least one evaluation, with time to answer, even for a zero timeout.
            let left = deadline.saturating_duration_since(Instant::now());
            let last = match self.try_eval(&expression, left.max(Duration::from_millis(500))) {
                Ok(Value::Bool(true)) => return,
                Ok(value) => format!("it was {value}"),
                Err(error) => format!("it failed: {error}"),
            };
            if Instant::now() >= deadline {
                panic!("`{js_predicate}` was not true within {timeout:?}; {last}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Clicks the first element matching `css_selector` (its `click()`, which fires the click
    /// event and the default action: a link followed, a form submitted). Panics if none matches.
    /// A click that navigates returns at once: wait for the new page with [`Browser::wait_until`].
    pub fn click(&self, css_selector: &str) {
        let js = format!(
            "(() => {{ const e = document.querySelector({}); if (!e) return false; \
             e.click(); return true; }})()",
            js_string(css_selector)
        );
        if self.eval(&js) != true {
            panic!("click: nothing matches `{css_selector}`");
        }
    }

    /// Sets the value of the first field matching `css_selector` to `text` and fires `input` and
    /// `change`, as typing and leaving the field would. Panics if none matches.
    pub fn fill(&self, css_selector: &str, text: &str) {
        // Through the prototype's setter, as typing does: a script that redefined `value` on
        // the element itself (some frameworks do) still sees the change as an input.
        let js = format!(
            "(() => {{ const e = document.querySelector({}); if (!e) return false; e.focus(); \
             const d = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(e), 'value'); \
             if (d && d.set) d.set.call(e, {text}); else e.value = {text}; \
             e.dispatchEvent(new Event('input', {{bubbles: true}})); \
             e.dispatchEvent(new Event('change', {{bubbles: true}})); return true; }})()",
            js_string(css_selector),
            text = js_string(text)
        );
        if self.eval(&js) != true {
            panic!("fill: nothing matches `{css_selector}`");
        }
    }

    /// Emulates a `width`×`height` CSS-pixel viewport at device scale 1; `mobile` also makes
    /// the page's `<meta name="viewport">` count and scrollbars overlay, as on a phone.
    pub fn viewport(&self, width: u32, height: u32, mobile: bool) {
        self.page().call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
        );
    }

    /// Has the page see the system's colour scheme as dark (or light).
    pub fn dark(&self, dark: bool) {
        let scheme = if dark { "dark" } else { "light" };
        self.page().call(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        );
    }

    /// Presses a key (`Tab`, `Enter`) as a person at the keyboard would, on the focused element.
    pub fn press(&self, key: &str) {
        let code = match key {
            "Tab" => 9,
            "Enter" => 13,
            other => panic!("no key code known for {other}"),
        };
        let mut page = self.page();
        for kind in ["rawKeyDown", "keyUp"] {
            let event = json!({"type": kind, "key": key, "code": key,
                "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code});
            page.call("Input.dispatchKeyEvent", event);
        }
    }

    /// The text of the first element `selector` finds (empty when none does).
    pub fn text(&self, selector: &str) -> String {
        let js = format!("(document.querySelector({selector:?}) || {{}}).textContent || ''");
        self.eval(&js).as_str().unwrap_or_default().to_string()
    }

    /// Saves the page at a phone's width and a desktop's, and at the desktop's in the dark,
    /// as `<name>-phone.png`, `-desktop.png` and `-desktop-dark.png` in
    /// `target/tmp/explorer-screenshots`.
    pub fn shoot(&self, name: &str) {
        let dir = crate::target_tmp().join("explorer-screenshots");
        std::fs::create_dir_all(&dir).expect("the screenshot directory");
        self.viewport(390, 844, true);
        self.screenshot(dir.join(format!("{name}-phone.png")));
        self.viewport(1280, 800, false);
        self.screenshot(dir.join(format!("{name}-desktop.png")));
        self.dark(true);
        self.screenshot(dir.join(format!("{name}-desktop-dark.png")));
        self.dark(false);
    }

    /// Writes a PNG of the whole page, beyond the viewport, to `path`.
    pub fn screenshot(&self, path: impl AsRef<Path>) {
        let path = path.as_ref();
        let mut page = self.page();
        let metrics = page.call("Page.getLayoutMetrics", json!({}));
        // The content, but never less than the viewport: a short page is shot whole-screen.
        let size = |key: &str| {
            let content = &metrics["cssContentSize"][key];
            let viewport = &metrics["cssLayoutViewport"][match key {
                "width" => "clientWidth",
                _ => "clientHeight",
            }];
            let content = content
                .as_f64()
                .expect("Page.getLayoutMetrics: cssContentSize");
            content.max(viewport.as_f64().unwrap_or(0.0)).ceil()
        };
        let clip =
            json!({"x": 0, "y": 0, "width": size("width"), "height": size("height"), "scale": 1});
        let shot = page.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true, "clip": clip}),
        );
        let data = shot["data"]
            .as_str()
            .expect("Page.captureScreenshot answers base64 data");
        let png = base64::engine::general_purpose::STANDARD
            .decode(data)
            .expect("Page.captureScreenshot's data is base64");
        std::fs::write(path, png)
            .unwrap_or_else(|e| panic!("writing the screenshot {}: {e}", path.display()));
    }

    /// Every error the page reported since launch, oldest first: `console.error` calls and
    /// failed `console.assert`s, uncaught exceptions, and the browser's own error entries,
    /// among them Content-Security-Policy violations and resources that failed to load.
    pub fn console_errors(&self) -> Vec<String> {
        let mut page = self.page();
        // Events come in order on the connection: once a command sent now is answered, the
        // errors reported before it have all arrived.
        page.call("Runtime.evaluate", json!({"expression": "0"}));
        page.errors.clone()
    }

    /// `Runtime.evaluate`; `Err` with the exception's text if the expression threw, or
    /// with DevTools' error (no document at the moment, a value that is not JSON).
    fn try_eval(&self, js: &str, timeout: Duration) -> Result<Value, String> {
        // userGesture: what the expression does counts as the user's doing, as a click by
        // the test should (pages may allow some things only then).
        let params = json!({"expression": js, "returnByValue": true, "awaitPromise": true,
                            "userGesture": true});
        let result = self.page().try_call("Runtime.evaluate", params, timeout)?;
        if let Some(exception) = result.get("exceptionDetails") {
            return Err(exception_text(exception));
        }
        let result = &result["result"];
        // NaN, Infinity, -0 and BigInts have no JSON form: DevTools spells them out.
        if let Some(spelled) = result.get("unserializableValue") {
            return Ok(spelled.clone());
        }
        Ok(result.get("value").cloned().unwrap_or(Value::Null))
    }

    fn page(&self) -> MutexGuard<'_, Connection> {
        // A test that panicked mid-command leaves the connection usable: answers are matched
        // by id, so a late one is skipped.
        self.page.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Browser {
    /// Asks Chromium to close (it then ends its helper processes and lets go of the profile),
    /// waits a little, and leaves the rest to [`Process`]'s drop: kill and remove.
    fn drop(&mut self) {
        let browser = self.browser.get_mut().unwrap_or_else(|p| p.into_inner());
        // Nothing here may panic: this also runs while a failed test unwinds.
        let close = json!({"id": 0, "method": "Browser.close"}).to_string();
        if browser.socket.send(Message::text(close)).is_ok() {
            let deadline = Instant::now() + CLOSE_TIMEOUT;
            while Instant::now() < deadline && matches!(self.process.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// The panic message for a missing binary.
fn missing(binary: &Path) -> String {
    format!(
        "chromium not found at {} (run scripts/chromium install, or set SVC_CHROMIUM to a \
         Chromium binary)",
        binary.display()
    )
}

/// `text` as a JavaScript string literal (JSON's are valid JavaScript).
fn js_string(text: &str) -> String {
    Value::from(text).to_string()
}

/// What an `exceptionDetails` says: the exception's description (message and stack) if it
/// has one, else the text ("Uncaught"), with where it happened.
fn exception_text(details: &Value) -> String {
    let exception = &details["exception"];
    let what = exception["description"]
        .as_str()
        .or_else(|| exception["value"].as_str())
        .or_else(|| details["text"].as_str())
        .unwrap_or("an exception");
    match details["url"].as_str().filter(|u| !u.is_empty()) {
        Some(url) => format!("{what} ({url}:{})", details["lineNumber"]),
        None => what.to_string(),
    }
}

/// The error an event reports, if it is one of those [`Browser::console_errors`] collects.
fn console_error(event: &Value) -> Option<String> {
    let params = &event["params"];
    match event["method"].as_str()? {
        "Runtime.consoleAPICalled"
            if matches!(params["type"].as_str(), Some("error" | "assert")) =>
        {
            let args = params["args"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            let text: Vec<String> = args.iter().map(remote_object_text).collect();
            Some(format!(
                "console.{}: {}",
                params["type"].as_str()?,
                text.join(" ")
            ))
        }
        "Runtime.exceptionThrown" => Some(format!(
            "uncaught: {}",
            exception_text(&params["exceptionDetails"])
        )),
        "Log.entryAdded" if params["entry"]["level"] == "error" => {
            let entry = &params["entry"];
            let text = entry["text"].as_str().unwrap_or("");
            let source = entry["source"].as_str().unwrap_or("browser");
            match entry["url"].as_str().filter(|u| !u.is_empty()) {
                Some(url) => Some(format!("{source}: {text} ({url})")),
                None => Some(format!("{source}: {text}")),
            }
        }
        _ => None,
    }
}

/// A console argument as the console would show it, near enough.
fn remote_object_text(object: &Value) -> String {
    match (&object["value"], object["description"].as_str()) {
        (Value::String(s), _) => s.clone(),
        (Value::Null, Some(description)) => description.to_string(),
        (Value::Null, None) => object["type"].as_str().unwrap_or("?").to_string(),
        (value, _) => value.to_string(),
    }
}

/// The Chromium process and its directory (the profile, `chromium.log`, and what Chromium
/// would otherwise put under ~/.config and ~/.cache): killed and removed when dropped, also
/// when a launch fails halfway.
struct Process {
    child: Child,
    dir: tempfile::TempDir,
}

impl Process {
    fn spawn(binary: &Path) -> Process {
        let dir = tempfile::Builder::new()
            .prefix("svc-chromium-")
            .tempdir()
            .expect("a temporary directory for Chromium's profile");
        let log = std::fs::File::create(dir.path().join("chromium.log")).expect("chromium.log");
        let child = Command::new(binary)
            .args([
                "--headless",
                // Tests run as root in containers, where the sandbox cannot start.
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                // No traffic of its own: the tests' servers are the only ones it talks to.
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                // Port 0: any free one, which Chromium writes to DevToolsActivePort.
                "--remote-debugging-port=0",
            ])
            .arg(format!(
                "--user-data-dir={}",
                dir.path().join("profile").display()
            ))
            .arg("about:blank")
            // Chromium keeps a crash database under ~/.config whatever the profile: here, it
            // goes with the rest.
            .env("XDG_CONFIG_HOME", dir.path().join("config"))
            .env("XDG_CACHE_HOME", dir.path().join("cache"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("chromium.log, twice"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        Process { child, dir }
    }

    /// The DevTools port and the browser's WebSocket path, from the `DevToolsActivePort`
    /// file Chromium writes into its profile once it listens.
    fn wait_for_devtools(&mut self) -> (u16, String) {
        let file = self.dir.path().join("profile/DevToolsActivePort");
        let deadline = Instant::now() + LAUNCH_TIMEOUT;
        loop {
            // Read whole or not at all: a half-written file has no second line yet.
            if let Some(found) = std::fs::read_to_string(&file)
                .ok()
                .and_then(|t| parse_active_port(&t))
            {
                return found;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!(
                    "chromium exited ({status}) before listening:\n{}",
                    self.log_tail()
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "chromium wrote no {} within {LAUNCH_TIMEOUT:?}:\n{}",
                    file.display(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The end of Chromium's output, for panic messages.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.path().join("chromium.log")).unwrap_or_default();
        let start = log.len().saturating_sub(4000);
        let start = (start..log.len())
            .find(|&i| log.is_char_boundary(i))
            .unwrap_or(log.len());
        log[start..].to_string()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        // Already gone after Browser.close, as a rule; the wait reaps it either way.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `DevToolsActivePort`: the port on the first line, `/devtools/browser/<id>` on the second.
fn parse_active_port(text: &str) -> Option<(u16, String)> {
    let mut lines = text.lines();
    let port = lines.next()?.trim().parse().ok()?;
    let path = lines.next()?.trim();
    path.starts_with("/devtools/")
        .then(|| (port, path.to_string()))
}

/// One DevTools WebSocket, read on the calling thread: answers are matched to commands by id,
/// events are queued for [`Connection::wait_event`] and their errors recorded.
struct Connection {
    socket: WebSocket<TcpStream>,
    /// Whose connection, for panic messages.
    what: &'static str,
    next_id: u64,
    events: VecDeque<Value>,
    errors: Vec<String>,
}

impl Connection {
    fn open(port: u16, path: &str, what: &'static str) -> Connection {
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&address, COMMAND_TIMEOUT)
            .unwrap_or_else(|e| panic!("connecting to chromium's DevTools port {port}: {e}"));
        // Bounds the handshake and every write; reads set their own timeout as they go.
        for timeout in [
            stream.set_read_timeout(Some(COMMAND_TIMEOUT)),
            stream.set_write_timeout(Some(COMMAND_TIMEOUT)),
        ] {
            timeout.expect("socket timeouts");
        }
        let config = WebSocketConfig::default()
            .max_message_size(Some(MAX_MESSAGE))
            .max_frame_size(Some(MAX_MESSAGE));
        let url = format!("ws://127.0.0.1:{port}{path}");
        let (socket, _) =
            tungstenite::client::client_with_config(url.as_str(), stream, Some(config))
                .unwrap_or_else(|e| panic!("the DevTools WebSocket handshake at {url}: {e}"));
        Connection {
            socket,
            what,
            next_id: 1,
            events: VecDeque::new(),
            errors: Vec::new(),
        }
    }

    /// Sends a command and returns its result; panics on an error answer or none in time.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.try_call(method, params, COMMAND_TIMEOUT)
            .unwrap_or_else(|error| panic!("{method} on {}: {error}", self.what))
    }

    /// Sends a command and returns its result, or `Err` with DevTools' error or the timeout.
    fn try_call(
        &mut self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, String> {
        let id = self.next_id;
        self.next_id += 1;
        let command = json!({"id": id, "method": method, "params": params}).to_string();
        if let Err(e) = self.socket.send(Message::text(command)) {
            panic!("sending {method} to {}: {e}", self.what);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let Some(message) = self.next_message(deadline) else {
                return Err(format!("no answer within {timeout:?}"));
            };
            // Answers to commands that timed out before have smaller ids: skipped.
            if message["id"] == id {
                return match message.get("error") {
                    Some(error) => Err(format!("DevTools error {error}")),
                    None => Ok(message["result"].clone()),
                };
            }
        }
    }

    /// The first event named `method`, queued or still to come; `None` after `timeout`.
    fn wait_event(&mut self, method: &str, timeout: Duration) -> Option<Value> {
        if let Some(at) = self.events.iter().position(|e| e["method"] == method) {
            return self.events.remove(at);
        }
        let deadline = Instant::now() + timeout;
        loop {
            let message = self.next_message(deadline)?;
            if message["method"] == method {
                // next_message queued it: take it back out.
                return self.events.pop_back();
            }
        }
    }

    fn forget_events(&mut self, method: &str) {
        self.events.retain(|e| e["method"] != method);
    }

    /// The next message, an event already queued and its error recorded; `None` at the
    /// deadline. Panics if the connection fails (Chromium crashed or closed the page).
    fn next_message(&mut self, deadline: Instant) -> Option<Value> {
        loop {
            let left = deadline
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero())?;
            // A read that times out leaves a partly read frame in tungstenite's buffer, to be
            // completed by the next read.
            if let Err(e) = self.socket.get_ref().set_read_timeout(Some(left)) {
                panic!(
                    "setting a read timeout on {}'s DevTools socket: {e}",
                    self.what
                );
            }
            let text = match self.socket.read() {
                Ok(Message::Text(text)) => text,
                // Pings (tungstenite answers them), pongs, binary frames: no protocol messages.
                Ok(_) => continue,
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    continue;
                }
                Err(e) => panic!("the DevTools connection to {} failed: {e}", self.what),
            };
            let message: Value = serde_json::from_str(text.as_str()).unwrap_or_else(|e| {
                panic!(
                    "DevTools sent {} something not JSON ({e}): {text}",
                    self.what
                )
            });
            if message.get("method").is_some() {
                self.queue_event(message.clone());
            }
            return Some(message);
        }
    }

    fn queue_event(&mut self, event: Value) {
        if let Some(error) = console_error(&event) {
            self.errors.push(error);
        }
        if self.events.len() == MAX_QUEUED_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back(event);
    }
}
