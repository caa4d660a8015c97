//! hyper's own refusals, written as the JSON errors every other answer is.

use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A connection's bytes, with hyper's own answers to requests it cannot read written as JSON
/// errors like every other answer: a malformed request line or header, an HTTP version other
/// than 1.0 and 1.1 (`GET / HTTP/2.0` sent as text), a URI or head beyond its limits (a first
/// request line longer than hyper's whole buffer is a 414, not hyper's 431: the URI is what
/// is too long, and hyper, which never saw the line end, cannot tell). hyper
/// answers these before any service runs, with a bodiless head, and offers no hook to change
/// it; it then closes the connection, so that head is the last thing it writes, whole in one
/// buffer. A head of its shape (a 4xx or 5xx status, `content-length: 0`, no `content-type`)
/// ending a write is one no route gives, as every answer of the router has a content type; it
/// is replaced, and the writes before it pass through untouched.
pub(crate) struct JsonHeadErrors<S> {
    inner: S,
    /// The connection's first bytes, which name the version of its first request.
    first: [u8; FIRST_BYTES],
    first_len: usize,
    /// Whether anything has been written: a refused head is then not the first request's.
    wrote: bool,
    /// Whether a line break has been read: until then the first request line is unfinished.
    line_ended: bool,
    replacing: Option<Replacement>,
}

/// The first bytes of a connection kept to read its request line's version from: room for
/// the method and a short target; a longer line's version is not named in the message.
const FIRST_BYTES: usize = 128;

/// The longest bare head recognised: hyper's status line, `connection`, `content-length` and
/// `date` take about 110 bytes.
const MOST_BARE_HEAD_BYTES: usize = 256;

/// A JSON answer going out in place of hyper's bare head.
struct Replacement {
    bytes: Vec<u8>,
    sent: usize,
    /// The length of the head it replaces, reported written once it is sent.
    replaces: usize,
}

impl<S> JsonHeadErrors<S> {
    pub(crate) fn new(inner: S) -> JsonHeadErrors<S> {
        JsonHeadErrors {
            inner,
            first: [0; FIRST_BYTES],
            first_len: 0,
            wrote: false,
            line_ended: false,
            replacing: None,
        }
    }

    /// The version named by the connection's first request line, when it is one hyper does
    /// not speak.
    fn refused_version(&self) -> Option<String> {
        if self.wrote {
            return None;
        }
        let first = &self.first[..self.first_len];
        let end = first.iter().position(|b| matches!(b, b'\r' | b'\n'))?;
        let mut parts = first[..end].split(|b| *b == b' ');
        let version = match (parts.next(), parts.next(), parts.next(), parts.next()) {
            (Some(_), Some(_), Some(version), None) => version,
            _ => return None,
        };
        (version.starts_with(b"HTTP/") && version != b"HTTP/1.1" && version != b"HTTP/1.0")
            .then(|| String::from_utf8_lossy(version).into_owned())
    }

    fn replacement(&self, bare: &[u8]) -> Replacement {
        let line_unfinished =
            bare.get(9..12) == Some(&b"431"[..]) && !self.wrote && !self.line_ended;
        let head = if line_unfinished {
            with_status_line(bare, b"HTTP/1.1 414 URI Too Long")
        } else {
            bare.to_vec()
        };
        let head = head.as_slice();
        let (code, message) = match head.get(9..12).unwrap_or_default() {
            b"414" => (
                "uri_too_long",
                "the request URI is longer than the server reads".to_string(),
            ),
            b"431" => (
                "headers_too_large",
                "the request head is larger than the server reads".to_string(),
            ),
            _ => match self.refused_version() {
                Some(version) => (
                    "unsupported_http_version",
                    format!(
                        "the request line names {version:?}, a version this server does not \
                         speak: send HTTP/1.1 (or HTTP/1.0)"
                    ),
                ),
                None => (
                    "bad_request",
                    "the request is not HTTP/1.1 the server can read: a malformed request \
                     line or header"
                        .to_string(),
                ),
            },
        };
        let body = serde_json::json!({ "error": code, "message": message }).to_string();
        let mut bytes = Vec::with_capacity(head.len() + body.len() + 64);
        match find(head, BARE_LENGTH) {
            Some(at) => {
                bytes.extend_from_slice(&head[..at]);
                bytes.extend_from_slice(b"\r\ncontent-type: application/json");
                bytes.extend_from_slice(
                    format!("\r\ncontent-length: {}\r\n", body.len()).as_bytes(),
                );
                bytes.extend_from_slice(&head[at + BARE_LENGTH.len()..]);
            }
            // Not reached: a bare head has its length line.
            None => bytes.extend_from_slice(head),
        }
        bytes.extend_from_slice(body.as_bytes());
        Replacement {
            bytes,
            sent: 0,
            replaces: bare.len(),
        }
    }
}

/// `head` with its first line replaced by `line`.
fn with_status_line(head: &[u8], line: &[u8]) -> Vec<u8> {
    let rest = find(head, b"\r\n").map_or(&head[head.len()..], |end| &head[end..]);
    [line, rest].concat()
}

const BARE_LENGTH: &[u8] = b"\r\ncontent-length: 0\r\n";

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Where a bare error head of hyper's ends `written`, if one does: it starts at the returned
/// offset and runs to the end. Checked at every write, so the common case (a write that does
/// not end a head) costs one comparison.
fn bare_error_head(written: &[u8]) -> Option<usize> {
    if !written.ends_with(b"\r\n\r\n") {
        return None;
    }
    let from = written.len().saturating_sub(MOST_BARE_HEAD_BYTES);
    let tail = &written[from..];
    let start = tail.windows(7).rposition(|w| w == b"HTTP/1.")?;
    let head = &tail[start..];
    let one_head = find(head, b"\r\n\r\n") == Some(head.len() - 4);
    let error = head.get(8) == Some(&b' ') && matches!(head.get(9), Some(b'4' | b'5'));
    let bare = find(head, BARE_LENGTH).is_some() && find(head, b"\r\ncontent-type:").is_none();
    (one_head && error && bare).then_some(from + start)
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonHeadErrors<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        let new = &buf.filled()[before..];
        if !this.line_ended {
            this.line_ended = new.contains(&b'\n');
        }
        if this.first_len < FIRST_BYTES {
            let take = new.len().min(FIRST_BYTES - this.first_len);
            this.first[this.first_len..this.first_len + take].copy_from_slice(&new[..take]);
            this.first_len += take;
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> JsonHeadErrors<S> {
    /// Sends what is left of the replacement; once it is all sent, the head it stands for
    /// counts as written.
    fn poll_replacement(
        &mut self,
        cx: &mut Context<'_>,
        asked: usize,
    ) -> Poll<std::io::Result<usize>> {
        while let Some(replacement) = &mut self.replacing {
            let rest = &replacement.bytes[replacement.sent..];
            if rest.is_empty() {
                let replaced = replacement.replaces.min(asked);
                self.replacing = None;
                return Poll::Ready(Ok(replaced));
            }
            match Pin::new(&mut self.inner).poll_write(cx, rest) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Ok(0)),
                Poll::Ready(Ok(n)) => replacement.sent += n,
                other => return other,
            }
        }
        Poll::Ready(Ok(0))
    }

    fn write_one(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        if self.replacing.is_none() {
            match bare_error_head(buf) {
                None => {}
                // What precedes the head goes first, as it is.
                Some(0) => self.replacing = Some(self.replacement(buf)),
                Some(start) => return self.pass(cx, &buf[..start]),
            }
        }
        if self.replacing.is_some() {
            return self.poll_replacement(cx, buf.len());
        }
        self.pass(cx, buf)
    }

    fn pass(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let written = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.wrote |= matches!(written, Poll::Ready(Ok(n)) if n > 0);
        written
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonHeadErrors<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.get_mut().write_one(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let Some(last) = bufs.iter().rposition(|b| !b.is_empty()) else {
            return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        };
        if this.replacing.is_none() && bare_error_head(&bufs[last]).is_none() {
            let written = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
            this.wrote |= matches!(written, Poll::Ready(Ok(n)) if n > 0);
            return written;
        }
        // The slices before the head go first; the head's own slice is written alone.
        if this.replacing.is_none() && bufs[..last].iter().any(|b| !b.is_empty()) {
            let written = Pin::new(&mut this.inner).poll_write_vectored(cx, &bufs[..last]);
            this.wrote |= matches!(written, Poll::Ready(Ok(n)) if n > 0);
            return written;
        }
        this.write_one(cx, &bufs[last])
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BARE: &[u8] = b"HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\
        date: Thu, 26 Nov 2026 21:11:31 GMT\r\n\r\n";

    #[test]
    fn only_hyper_s_bare_error_heads_are_recognised() {
        assert_eq!(bare_error_head(BARE), Some(0));
        let after_answer = [&b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"[..], BARE].concat();
        assert_eq!(
            bare_error_head(&after_answer),
            Some(after_answer.len() - BARE.len())
        );
        for ours in [
            // A route's error, answered to HEAD: a content type, no body.
            &b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: 54\r\n\r\n"[..],
            // A CORS preflight: bodiless, but no error.
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\naccess-control-allow-methods: GET\r\n\r\n",
            // A body, and a head still being written.
            b"{\"error\":\"x\"}",
            &BARE[..BARE.len() - 2],
        ] {
            assert_eq!(bare_error_head(ours), None, "{}", String::from_utf8_lossy(ours));
        }
    }

    /// A writer that takes at most `most` bytes a call.
    struct Trickle {
        out: Vec<u8>,
        most: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<std::io::Result<usize>> {
            let this = self.get_mut();
            let n = buf.len().min(this.most);
            this.out.extend_from_slice(&buf[..n]);
            Poll::Ready(Ok(n))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncRead for Trickle {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<std::io::Result<()>> {
            buf.put_slice(b"GET / HTTP/2.0\r\n\r\n");
            Poll::Ready(Ok(()))
        }
    }

    /// Everything `writes` leaves on a stream that takes `most` bytes a call, written as
    /// hyper writes: each buffer again from where the last call stopped.
    fn written(writes: &[&[u8]], most: usize, read_first: bool) -> String {
        let mut stream = JsonHeadErrors::new(Trickle {
            out: Vec::new(),
            most,
        });
        let mut cx = Context::from_waker(std::task::Waker::noop());
        if read_first {
            let mut space = [0u8; 64];
            let mut buf = ReadBuf::new(&mut space);
            assert!(
                Pin::new(&mut stream)
                    .poll_read(&mut cx, &mut buf)
                    .is_ready()
            );
        }
        for write in writes {
            let mut rest = *write;
            while !rest.is_empty() {
                match Pin::new(&mut stream).poll_write(&mut cx, rest) {
                    Poll::Ready(Ok(n)) if n > 0 => rest = &rest[n..],
                    other => panic!("{other:?}"),
                }
            }
        }
        String::from_utf8(stream.inner.out).unwrap()
    }

    #[test]
    fn a_bare_head_goes_out_as_a_json_error_whatever_the_writes_take() {
        let answer = &b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"[..];
        let together = [answer, BARE].concat();
        for most in [1, 7, 4096] {
            for out in [
                written(&[answer, BARE], most, false),
                written(&[&together], most, false),
            ] {
                let (before, error) = out.split_at(answer.len());
                assert_eq!(before.as_bytes(), answer);
                let (head, body) = error.split_once("\r\n\r\n").unwrap();
                assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
                assert!(
                    head.contains("\r\ncontent-type: application/json\r\n"),
                    "{head}"
                );
                assert!(head.contains("\r\nconnection: close\r\n"), "{head}");
                assert!(head.contains(&format!("\r\ncontent-length: {}\r\n", body.len())));
                let body: serde_json::Value = serde_json::from_str(body).unwrap();
                // Not the first request of its connection: its version is not known.
                assert_eq!(body["error"], "bad_request");
            }
        }
        // The first request's version is named.
        let out = written(&[BARE], 5, true);
        let body: serde_json::Value =
            serde_json::from_str(out.split_once("\r\n\r\n").unwrap().1).unwrap();
        assert_eq!(body["error"], "unsupported_http_version");
        assert!(body["message"].as_str().unwrap().contains("\"HTTP/2.0\""));
        // Answers of the routes pass as they are.
        assert_eq!(
            written(&[answer, answer], 3, true).as_bytes(),
            [answer, answer].concat()
        );
    }

    #[test]
    fn a_bare_head_after_other_slices_of_a_vectored_write_is_replaced() {
        let (head, body) = (
            &b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"[..],
            &b"{}"[..],
        );
        let mut stream = JsonHeadErrors::new(Trickle {
            out: Vec::new(),
            most: 5,
        });
        let mut cx = Context::from_waker(std::task::Waker::noop());
        let (mut slices, mut written) = (0, 0);
        let all = [head, body, BARE];
        while slices < all.len() {
            let mut rest = vec![IoSlice::new(&all[slices][written..])];
            rest.extend(all[slices + 1..].iter().map(|b| IoSlice::new(b)));
            let Poll::Ready(Ok(mut n)) = Pin::new(&mut stream).poll_write_vectored(&mut cx, &rest)
            else {
                panic!("the write did not go through");
            };
            while n > 0 {
                let left = all[slices].len() - written;
                if n >= left {
                    (slices, written, n) = (slices + 1, 0, n - left);
                } else {
                    (written, n) = (written + n, 0);
                }
            }
        }
        let out = String::from_utf8(stream.inner.out).unwrap();
        let (before, error) = out.split_at(head.len() + body.len());
        assert_eq!(before.as_bytes(), [head, body].concat());
        assert!(
            error.contains("\r\ncontent-type: application/json\r\n"),
            "{error}"
        );
        assert!(error.ends_with("\"}"), "{error}");
    }
}
