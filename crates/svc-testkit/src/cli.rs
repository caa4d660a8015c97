//! The `svc` command as a user runs it, against the test peers.

use serde_json::Value;
use std::cell::RefCell;
use std::io::Write;
use std::process::{Output, Stdio};

/// Runs `svc` with a private session directory and the test PLC directory, and keeps
/// everything the runs printed (to look for secrets in).
pub struct Cli<'a> {
    sessions: &'a std::path::Path,
    plc: &'a str,
    printed: RefCell<Vec<u8>>,
}

impl<'a> Cli<'a> {
    pub fn new(sessions: &'a std::path::Path, plc: &'a str) -> Cli<'a> {
        Cli {
            sessions,
            plc,
            printed: RefCell::new(Vec::new()),
        }
    }

    /// Everything every run printed, stdout and stderr.
    pub fn printed(&self) -> String {
        String::from_utf8_lossy(&self.printed.borrow()).to_string()
    }

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
            let written = child
                .stdin
                .take()
                .expect("stdin")
                .write_all(text.as_bytes());
            // A command that refuses its arguments may exit before it reads its input.
            if let Err(error) = written
                && error.kind() != std::io::ErrorKind::BrokenPipe
            {
                panic!("write stdin: {error}");
            }
        }
        drop(child.stdin.take());
        let output = child.wait_with_output().expect("svc output");
        let mut printed = self.printed.borrow_mut();
        printed.extend_from_slice(&output.stdout);
        printed.extend_from_slice(&output.stderr);
        output
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
