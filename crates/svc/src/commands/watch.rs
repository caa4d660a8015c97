//! `svc orchestrator watch [<subcommand> <its flags>] [--cursor N]`: follows the change stream
//! (`GET /v1/changes`) of every record, or of the answer a subcommand's flags pick, printing
//! each message as one JSON line. A dropped connection (or a server that gave up on a slow
//! reader) is resumed from the last message printed; Ctrl-C ends it cleanly.

use super::UsageError;
use anyhow::Context;
use std::io::Write;
use std::time::Duration;

/// The server sends a keep-alive every 15 s: this much silence is a dead connection.
const SILENCE: Duration = Duration::from_secs(60);
/// A line of the stream longer than this is not one the server sends.
const MAX_LINE_BYTES: usize = 64 << 20;
const FIRST_PAUSE: Duration = Duration::from_secs(1);
const LONGEST_PAUSE: Duration = Duration::from_secs(30);

/// How one connection ended.
enum Ended {
    /// The connection dropped or the server gave up on this reader: resume.
    Dropped(String),
}

/// Follows the stream of the subscription `pairs` names, after `cursor` (from now without).
pub async fn run(
    base_url: &str,
    pairs: Vec<(String, String)>,
    cursor: Option<i64>,
) -> anyhow::Result<()> {
    let mut last = cursor;
    let client = svc_atproto::streaming_client(SILENCE)?;
    let mut pause = FIRST_PAUSE;
    loop {
        let Ended::Dropped(why) = tokio::select! {
            ended = follow(&client, base_url, &pairs, &mut last) => ended?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let from = last.map_or("now".to_string(), |seq| format!("after {seq}"));
        eprintln!("watch: {why}; resuming {from} in {} s", pause.as_secs());
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = tokio::signal::ctrl_c() => return Ok(()),
        }
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

/// Follows one connection, printing each message and moving `last` to its number.
async fn follow(
    client: &svc_atproto::Client,
    base_url: &str,
    pairs: &[(String, String)],
    last: &mut Option<i64>,
) -> anyhow::Result<Ended> {
    let mut query = pairs.to_vec();
    if let Some(seq) = last {
        query.push(("cursor".to_string(), seq.to_string()));
    }
    let url = svc_atproto::Url::parse_with_params(
        &format!("{}/v1/changes", base_url.trim_end_matches('/')),
        &query,
    )
    .map_err(|e| UsageError(format!("--url {base_url}: {e}")))?;
    let mut response = match client.get(url.clone()).send().await {
        Ok(response) => response,
        Err(error) => {
            let why = svc_atproto::transport_failure(url.as_str(), error);
            return Ok(Ended::Dropped(format!("cannot reach {base_url}: {why}")));
        }
    };
    if !response.status().is_success() {
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        anyhow::bail!("{} {}", status.as_u16(), body.trim());
    }
    let mut lines = Lines::default();
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return Ok(Ended::Dropped("the server closed the stream".into())),
            Err(error) => return Ok(Ended::Dropped(error.to_string())),
        };
        for line in lines.push(&chunk)? {
            if let Some(ended) = take_line(&line, last)? {
                return Ok(ended);
            }
        }
    }
}

/// Acts on one line of the stream: a message is printed; an error message ends the
/// connection (to resume) or the command.
fn take_line(line: &str, last: &mut Option<i64>) -> anyhow::Result<Option<Ended>> {
    if let Some(id) = line.strip_prefix("id:") {
        if let Ok(seq) = id.trim().parse() {
            *last = Some(seq);
        }
        return Ok(None);
    }
    let Some(data) = line.strip_prefix("data:") else {
        return Ok(None);
    };
    let data = data.trim();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{data}")
        .and_then(|()| out.flush())
        .context("writing to standard output")?;
    let message: serde_json::Value = serde_json::from_str(data).unwrap_or_default();
    match message.get("error").and_then(serde_json::Value::as_str) {
        None => Ok(None),
        Some("ConsumerTooSlow") => Ok(Some(Ended::Dropped("the server fell behind us".into()))),
        Some(error) => anyhow::bail!("the server ended the stream: {error}"),
    }
}

/// The complete lines of a byte stream, as they arrive.
#[derive(Default)]
struct Lines(Vec<u8>);

impl Lines {
    fn push(&mut self, chunk: &[u8]) -> anyhow::Result<Vec<String>> {
        self.0.extend_from_slice(chunk);
        let mut lines = Vec::new();
        while let Some(end) = self.0.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.0.drain(..=end).collect();
            let text = String::from_utf8_lossy(&line);
            lines.push(text.trim_end_matches(['\r', '\n']).to_string());
        }
        if self.0.len() > MAX_LINE_BYTES {
            anyhow::bail!("the stream sent a line longer than {MAX_LINE_BYTES} bytes");
        }
        Ok(lines)
    }
}
