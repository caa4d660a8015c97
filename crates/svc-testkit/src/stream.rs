//! A client of the change stream's Server-Sent Events, for tests.

use super::Server;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::sync::mpsc;
use std::time::Duration;

/// An event of the stream: its id (a change's seq) and its data.
#[derive(Debug)]
pub struct Sse {
    pub id: Option<i64>,
    pub data: Value,
}

/// Opens the stream at `path`: a 200 of Server-Sent Events, read as it comes.
pub fn open(server: &Server, path: &str) -> reqwest::blocking::Response {
    let response = reqwest::blocking::Client::builder()
        .timeout(None)
        .build()
        .unwrap()
        .get(format!("{}{path}", server.url))
        .send()
        .expect("the stream");
    assert_eq!(response.status(), 200, "{path}");
    assert_eq!(
        response.headers()["content-type"],
        "text/event-stream",
        "{path}"
    );
    // Proxies that buffer (nginx) are told not to hold the stream back.
    assert_eq!(response.headers()["x-accel-buffering"], "no", "{path}");
    response
}

/// Opens the stream at `path`; its events as they come.
pub fn subscribe(server: &Server, path: &str) -> mpsc::Receiver<Sse> {
    events_of(open(server, path))
}

/// The events of an open stream's answer, as they come.
pub fn events_of(response: reqwest::blocking::Response) -> mpsc::Receiver<Sse> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut id = None;
        for line in BufReader::new(response).lines() {
            let Ok(line) = line else { return };
            if let Some(value) = line.strip_prefix("id:") {
                id = value.trim().parse().ok();
            } else if let Some(data) = line.strip_prefix("data:") {
                let data = serde_json::from_str(data.trim()).expect("JSON data");
                if sender
                    .send(Sse {
                        id: id.take(),
                        data,
                    })
                    .is_err()
                {
                    return;
                }
            }
        }
    });
    receiver
}

pub fn next(events: &mpsc::Receiver<Sse>) -> Sse {
    next_of(events, "")
}

pub fn next_of(events: &mpsc::Receiver<Sse>, what: &str) -> Sse {
    events
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("no event within 10 s {what}"))
}
