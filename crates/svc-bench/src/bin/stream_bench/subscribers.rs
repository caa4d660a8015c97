//! The subscribers of a run: those that read everything, timing it, and those that read nothing.

use super::*;

/// A subscriber: reads its stream until `stop`, timing each change committed in the window.
pub(crate) async fn subscriber(
    index: usize,
    addr: SocketAddr,
    path: &'static str,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) -> Result<Tally, String> {
    let (mut stream, mut raw, chunked) = open(addr, path).await?;
    shared.connected.fetch_add(1, Ordering::AcqRel);
    let mut body = Body {
        chunked,
        state: Chunk::Size,
        size_line: Vec::new(),
        partial_line: Vec::new(),
    };
    let mut tally = Tally {
        latencies: Latencies::new(),
        slices: Vec::new(),
        changes: 0,
        missed: 0,
        repeated: 0,
        // The catalog is new: the first change is 1.
        last_seq: 0,
        ended: None,
    };
    let mut clock = CommitClock::default();
    let mut id: Option<i64> = None;
    let stopped = stop.changed();
    tokio::pin!(stopped);
    loop {
        // Everything taken by one read arrived at once: one clock reading serves it all.
        let received = svc_syntax::now_unix_micros();
        let window = shared
            .window_after_seq
            .load(Ordering::Acquire)
            .saturating_add(1)
            ..=shared.window_last_seq.load(Ordering::Acquire);
        let from = shared.window_from_us.load(Ordering::Acquire);
        body.feed(&raw, &mut |line: &[u8]| {
            if let Some(value) = line.strip_prefix(b"id:") {
                id = std::str::from_utf8(value)
                    .ok()
                    .and_then(|v| v.trim().parse().ok());
                return;
            }
            let Some(data) = line.strip_prefix(b"data:") else {
                return;
            };
            let Some(seq) = id.take() else {
                // A notice: an error ends the stream.
                if find(data, b"\"error\"").is_some() {
                    tally.ended = Some(String::from_utf8_lossy(data).trim().to_string());
                }
                return;
            };
            tally.changes += 1;
            if seq <= tally.last_seq {
                tally.repeated += 1;
                return;
            }
            tally.missed += (seq - tally.last_seq - 1) as u64;
            tally.last_seq = seq;
            // The top-level `time` is the last: the item, with the record, sorts first.
            const KEY: &[u8] = b"\"time\":\"";
            let Some(at) = data.windows(KEY.len()).rposition(|window| window == KEY) else {
                return;
            };
            if window.contains(&seq)
                && let Some(committed) = clock.micros(&data[at + KEY.len()..])
            {
                let us = received.saturating_sub(committed).max(0) as u64;
                tally.latencies.record(us);
                let slice = ((committed - from).max(0) / (SLICE_S * 1_000_000)) as usize;
                if tally.slices.len() <= slice {
                    tally.slices.resize(slice + 1, Slice::default());
                }
                let slice = &mut tally.slices[slice];
                slice.sum_us += us;
                slice.n += 1;
                slice.max_us = slice.max_us.max(us);
            }
        });
        raw.clear();
        shared.last_seq[index].store(tally.last_seq, Ordering::Release);
        if body.ended() || tally.ended.is_some() {
            tally.ended.get_or_insert_with(|| "the stream ended".into());
            return Ok(tally);
        }
        tokio::select! {
            _ = &mut stopped => return Ok(tally),
            read = stream.read_buf(&mut raw) => match read {
                Ok(0) => {
                    tally.ended = Some("svc closed the connection".into());
                    return Ok(tally);
                }
                Ok(_) => {}
                Err(error) => {
                    tally.ended = Some(format!("read: {error}"));
                    return Ok(tally);
                }
            }
        }
    }
}

/// What a stalled subscriber found when it finally read, after the run.
#[derive(Debug, Default)]
pub(crate) struct Stalled {
    pub(crate) told_too_slow: bool,
    /// The stream's last chunk came.
    pub(crate) stream_ended: bool,
    /// svc closed the connection (or reset it).
    pub(crate) closed: bool,
    pub(crate) bytes_left: u64,
}

/// A subscriber that connects and reads nothing until `stop`; then reads what svc left in
/// the connection for a while, to see how svc ended it.
pub(crate) async fn stalled(
    addr: SocketAddr,
    path: &'static str,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) -> Result<Stalled, String> {
    // A receive buffer as small as the kernel allows: what svc sends piles up on its side,
    // as it would for a client across a network.
    let socket = tokio::net::TcpSocket::new_v4().map_err(|e| format!("socket: {e}"))?;
    let _ = socket.set_recv_buffer_size(4096);
    let mut stream = socket
        .connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("request: {e}"))?;
    shared.connected.fetch_add(1, Ordering::AcqRel);
    let _ = stop.changed().await;
    let mut found = Stalled::default();
    let mut tail: Vec<u8> = Vec::new();
    let mut buffer = vec![0u8; 64 * 1024];
    let until = tokio::time::Instant::now() + STALLED_READ_FOR;
    loop {
        match tokio::time::timeout_at(until, stream.read(&mut buffer)).await {
            Err(_) => break,
            Ok(Ok(0)) | Ok(Err(_)) => {
                found.closed = true;
                break;
            }
            Ok(Ok(n)) => {
                found.bytes_left += n as u64;
                // What may straddle two reads is kept from the one before.
                tail.extend_from_slice(&buffer[..n]);
                found.told_too_slow |= find(&tail, b"ConsumerTooSlow").is_some();
                found.stream_ended |= find(&tail, b"\r\n0\r\n\r\n").is_some();
                let keep = tail.len().saturating_sub(32);
                tail.drain(..keep);
            }
        }
    }
    Ok(found)
}
