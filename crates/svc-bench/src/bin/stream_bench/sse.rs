//! The change stream read over raw TCP: the request, the answer head, and a chunked body cut into lines.

use super::*;

/// A chunked response body's content, as it arrives, cut into lines.
pub(crate) enum Chunk {
    Size,
    Data(usize),
    /// The line end after a chunk's data.
    DataEnd,
    Last,
}

pub(crate) struct Body {
    pub(crate) chunked: bool,
    pub(crate) state: Chunk,
    pub(crate) size_line: Vec<u8>,
    pub(crate) partial_line: Vec<u8>,
}

impl Body {
    pub(crate) fn feed(&mut self, mut input: &[u8], on_line: &mut impl FnMut(&[u8])) {
        if !self.chunked {
            return lines(&mut self.partial_line, input, on_line);
        }
        while !input.is_empty() {
            match self.state {
                Chunk::Size => {
                    let Some(end) = input.iter().position(|&b| b == b'\n') else {
                        self.size_line.extend_from_slice(input);
                        return;
                    };
                    self.size_line.extend_from_slice(&input[..end]);
                    input = &input[end + 1..];
                    let text = String::from_utf8_lossy(&self.size_line);
                    let hex = text.split(';').next().unwrap_or_default().trim();
                    let size = usize::from_str_radix(hex, 16).unwrap_or(0);
                    self.size_line.clear();
                    self.state = if size == 0 {
                        Chunk::Last
                    } else {
                        Chunk::Data(size)
                    };
                }
                Chunk::Data(left) => {
                    let taken = left.min(input.len());
                    lines(&mut self.partial_line, &input[..taken], on_line);
                    input = &input[taken..];
                    self.state = if taken == left {
                        Chunk::DataEnd
                    } else {
                        Chunk::Data(left - taken)
                    };
                }
                Chunk::DataEnd => {
                    let Some(end) = input.iter().position(|&b| b == b'\n') else {
                        return;
                    };
                    input = &input[end + 1..];
                    self.state = Chunk::Size;
                }
                Chunk::Last => return,
            }
        }
    }

    pub(crate) fn ended(&self) -> bool {
        matches!(self.state, Chunk::Last)
    }
}

/// Hands each whole line of `input` (with what `partial` held before it) to `on_line`, and
/// keeps the unfinished end in `partial`.
pub(crate) fn lines(partial: &mut Vec<u8>, mut input: &[u8], on_line: &mut impl FnMut(&[u8])) {
    let trim = |line: &[u8]| line.strip_suffix(b"\r").unwrap_or(line).to_vec();
    while let Some(end) = input.iter().position(|&b| b == b'\n') {
        if partial.is_empty() {
            on_line(input[..end].strip_suffix(b"\r").unwrap_or(&input[..end]));
        } else {
            partial.extend_from_slice(&input[..end]);
            on_line(&trim(partial));
            partial.clear();
        }
        input = &input[end + 1..];
    }
    partial.extend_from_slice(input);
}

pub(crate) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// Sends the request and reads the answer's head: the bytes of the body read with it, and
/// whether the body is chunked.
pub(crate) async fn open(
    addr: SocketAddr,
    path: &str,
) -> Result<(TcpStream, Vec<u8>, bool), String> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n\r\n");
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("request: {e}"))?;
    let mut raw = Vec::with_capacity(16 * 1024);
    let body_at = loop {
        if stream
            .read_buf(&mut raw)
            .await
            .map_err(|e| format!("head: {e}"))?
            == 0
        {
            return Err("closed before the answer's head".into());
        }
        if let Some(end) = find(&raw, b"\r\n\r\n") {
            break end + 4;
        }
    };
    let head = String::from_utf8_lossy(&raw[..body_at]).to_ascii_lowercase();
    if !head.starts_with("http/1.1 200") {
        return Err(format!(
            "answered {}",
            head.lines().next().unwrap_or_default()
        ));
    }
    let chunked = head.contains("transfer-encoding: chunked");
    raw.drain(..body_at);
    Ok((stream, raw, chunked))
}
