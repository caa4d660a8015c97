//! README.md's examples, run as a newcomer pastes them. The server is started by the README's
//! own run command (with the admin password file the README makes), over the example catalog;
//! then every `curl localhost:8787` line and every `svc` line of its `sh` blocks runs in README
//! order: each must answer 2xx or exit 0, and each list or search it asks must find something.
//! A line that needs another machine says `(network)` in its comment and is the only kind
//! skipped. A line that is neither, or still holds a `...` placeholder, fails the test: a new
//! example is tested the day it is written.

#[path = "readme/shell.rs"]
mod shell;

use serde_json::Value;
use shell::{Stage, Token};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use svc_testkit::{Server, http, svc};

/// The address the README's examples ask, which the test's server stands in for.
const README_ADDRESS: &str = "localhost:8787";
/// How long a streaming example (`curl -N`, `svc orchestrator watch`) has to say something.
const FIRST_WORDS_WITHIN: Duration = Duration::from_secs(10);

/// An example: the README line it starts on, and its text with continuation lines joined.
struct Example {
    line: usize,
    text: String,
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every line of the README's `sh` blocks.
fn examples() -> Vec<Example> {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let mut examples: Vec<Example> = Vec::new();
    let (mut in_block, mut continued) = (false, false);
    for (n, line) in readme.lines().enumerate() {
        if line.starts_with("```") {
            in_block = line == "```sh";
            continue;
        }
        if !in_block || line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let text = line.trim_end().trim_end_matches('\\').to_string();
        match examples.last_mut() {
            Some(last) if continued => last.text.push_str(&text),
            _ => examples.push(Example { line: n + 1, text }),
        }
        continued = line.trim_end().ends_with('\\');
    }
    examples
}

/// What the examples run in: the server, a working directory, a session folder.
struct Place {
    server: Server,
    dir: tempfile::TempDir,
}

#[test]
fn every_example_of_the_readme_works_as_written() {
    let examples = examples();
    let dir = tempfile::tempdir().unwrap();
    make_password_file(&examples, dir.path());
    let server = start_as_the_readme_says(&examples, dir.path());
    let place = Place { server, dir };
    let mut ran = 0;
    for example in &examples {
        let (tokens, comment) = shell::tokens(&example.text).unwrap_or_else(|_| (vec![], None));
        let first = match tokens.first() {
            Some(Token::Word(word)) => word.as_str(),
            _ => continue,
        };
        if !matches!(first, "curl" | "svc" | "printf") {
            continue;
        }
        if comment.as_deref().is_some_and(|c| c.contains("(network)")) {
            continue;
        }
        let at = format!("README.md:{}: {}", example.line, example.text);
        assert!(
            !example.text.contains("..."),
            "{at}: a placeholder a newcomer cannot paste"
        );
        let pipelines = shell::pipelines(&tokens).unwrap_or_else(|e| panic!("{at}: {e}"));
        for pipeline in pipelines {
            run_pipeline(&place, &pipeline).unwrap_or_else(|e| panic!("{at}: {e}"));
        }
        ran += 1;
    }
    assert!(
        ran >= 30,
        "only {ran} examples ran: did the README's blocks change shape?"
    );
}

/// Runs the README's recipe for the admin password file (the line that writes `admin.pw`).
fn make_password_file(examples: &[Example], dir: &Path) {
    let recipe = examples
        .iter()
        .find(|e| e.text.contains("> admin.pw"))
        .expect("the README shows how to make admin.pw");
    let made = std::process::Command::new("sh")
        .args(["-c", &recipe.text])
        .current_dir(dir)
        .status()
        .expect("sh");
    assert!(made.success(), "{}", recipe.text);
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(dir.join("admin.pw"))
            .unwrap()
            .permissions(),
    );
    assert_eq!(mode & 0o077, 0, "the recipe's file is private");
}

/// Starts `svc serve` with the arguments of the README's run command that also names the admin
/// password file, which must be the first run command, the one of "The two commands", plus it.
fn start_as_the_readme_says(examples: &[Example], dir: &Path) -> Server {
    let runs: Vec<&Example> = examples
        .iter()
        .filter(|e| e.text.starts_with("cargo run --release -- serve"))
        .collect();
    let first = runs.first().expect("a run command").text.trim();
    let with_admin = runs
        .iter()
        .map(|e| e.text.trim())
        .find(|text| text.contains("--admin-password-file"))
        .expect("a run command with the admin password file");
    assert!(
        with_admin.starts_with(first),
        "{with_admin} extends {first}"
    );
    let (tokens, _) = shell::tokens(with_admin).unwrap();
    let words: Vec<String> = shell::pipelines(&tokens).unwrap()[0][0].words.clone();
    let serve_args: Vec<String> = words
        .iter()
        .skip_while(|w| *w != "--")
        .skip(2)
        .map(|w| local_path(w, dir))
        .collect();
    let serve_args: Vec<&str> = serve_args.iter().map(String::as_str).collect();
    Server::launch(dir.join("catalog.db"), &serve_args)
}

/// A word naming a file the README's reader has at hand: the repository's own (relative to
/// its root) or one an earlier example made (in the working directory).
fn local_path(word: &str, dir: &Path) -> String {
    for base in [root(), dir.to_path_buf()] {
        let candidate = base.join(word);
        if !word.starts_with('-') && word.contains(['.', '/']) && candidate.exists() {
            return candidate.to_string_lossy().into_owned();
        }
    }
    word.to_string()
}

fn run_pipeline(place: &Place, stages: &[Stage]) -> Result<(), String> {
    let mut input: Vec<u8> = Vec::new();
    for stage in stages {
        let words = &stage.words;
        let output = match words.first().map(String::as_str) {
            Some("printf") => printf(words.get(1).ok_or("printf of nothing")?),
            Some("curl") => curl(place, words)?,
            Some("svc") => run_svc(place, words, &input)?,
            // What reads an answer (`jq`) is the reader's; the answer was checked already.
            Some(_) if !input.is_empty() => return Ok(()),
            other => return Err(format!("no way to run {other:?}")),
        };
        if let Some(file) = &stage.output_file {
            std::fs::write(place.dir.path().join(file), &output).map_err(|e| e.to_string())?;
        }
        input = output;
    }
    Ok(())
}

/// `printf FORMAT`'s output, for the escapes an example uses.
fn printf(format: &str) -> Vec<u8> {
    format
        .replace("\\n", "\n")
        .replace("\\t", "\t")
        .into_bytes()
}

/// A `curl` line's one GET, against the test's server: a 2xx, and a list with items.
fn curl(place: &Place, words: &[String]) -> Result<Vec<u8>, String> {
    let address = words
        .iter()
        .find(|w| w.contains(README_ADDRESS))
        .ok_or("a curl example asks no localhost:8787 address")?;
    let url = address.replacen(
        README_ADDRESS,
        place.server.url.trim_start_matches("http://"),
        1,
    );
    let url = format!("http://{}", url.trim_start_matches("http://"));
    let mut response = http()
        .get(&url)
        .timeout(FIRST_WORDS_WITHIN)
        .send()
        .map_err(|e| e.to_string())?;
    let status = response.status();
    if !status.is_success() {
        return Err(format!(
            "answered {status}: {}",
            response.text().unwrap_or_default()
        ));
    }
    if words.iter().any(|w| w == "-N") {
        let mut first = [0u8; 512];
        let n = response.read(&mut first).map_err(|e| e.to_string())?;
        return (n > 0)
            .then(|| first[..n].to_vec())
            .ok_or("the stream said nothing".into());
    }
    let body = response.bytes().map_err(|e| e.to_string())?.to_vec();
    finds_something(&body)?;
    Ok(body)
}

/// An `svc` line, with the server's address for `localhost:8787`: exit 0, and a list with items.
fn run_svc(place: &Place, words: &[String], input: &[u8]) -> Result<Vec<u8>, String> {
    let base = place.server.url.as_str();
    let args: Vec<String> = words[1..]
        .iter()
        .map(|w| w.replace(&format!("http://{README_ADDRESS}"), base))
        .collect();
    let mut command = svc();
    command
        .args(&args)
        .current_dir(place.dir.path())
        .env("SVC_URL", base)
        .env("SVC_SESSION_DIR", place.dir.path().join("sessions"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().map_err(|e| e.to_string())?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    stdin.write_all(input).map_err(|e| e.to_string())?;
    drop(stdin);
    if args.iter().any(|a| a == "watch") {
        return first_line_of(child);
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!("exited {}: {stderr}", output.status));
    }
    finds_something(&output.stdout)?;
    Ok(output.stdout)
}

/// A command that follows until stopped: its first line, then it is stopped.
fn first_line_of(mut child: std::process::Child) -> Result<Vec<u8>, String> {
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let (send, receive) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = send.send(line);
    });
    let line = receive.recv_timeout(FIRST_WORDS_WITHIN);
    let _ = child.kill();
    let _ = child.wait();
    match line {
        Ok(line) if !line.is_empty() => Ok(line.into_bytes()),
        _ => Err("printed nothing".into()),
    }
}

/// An answer that is a list (`items`, or a route answer's `routes`) must hold at least one: an
/// example that promises results shows some.
fn finds_something(body: &[u8]) -> Result<(), String> {
    let Ok(json) = serde_json::from_slice::<Value>(body) else {
        return Ok(());
    };
    let listed = ["items", "routes"]
        .into_iter()
        .find_map(|list| json.get(list).and_then(Value::as_array));
    match listed {
        Some(items) if items.is_empty() => Err(format!("found nothing: {json}")),
        _ => Ok(()),
    }
}
