//! The `svc` command as a user runs it, against the test peers.

use serde_json::Value;
use std::io::Write;
use std::process::{Output, Stdio};

/// Runs `svc` with a private session directory and the test PLC directory.
pub struct Cli<'a> {
    pub sessions: &'a std::path::Path,
    pub plc: &'a str,
}

impl Cli<'_> {
    pub fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, None, &[])
    }

    pub fn run_with(&self, args: &[&str], stdin: Option<&str>, env: &[(&str, &str)]) -> Output {
        let mut command = super::svc();
        command
            .args(args)
            .env("SVC_SESSION_DIR", self.sessions)
            .env("SVC_PLC_URL", self.plc)
            .env_remove("ATPROTO_APP_PASSWORD")
            .env_remove("ATPROTO_PASSWORD")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env {
            command.env(k, v);
        }
        let mut child = command.spawn().expect("svc");
        if let Some(text) = stdin {
            child
                .stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes())
                .expect("write stdin");
        }
        drop(child.stdin.take());
        child.wait_with_output().expect("svc output")
    }
}

pub fn json_out(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&output.stdout)
        )
    })
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}
