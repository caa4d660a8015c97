//! The probes of /healthz: one keep-alive connection, written and read by hand, asking every 50 ms.

use super::*;

/// One keep-alive connection, written and read by hand so that the figure is the server's
/// answer time and not a client library's scheduling.
pub(crate) struct Prober {
    pub(crate) address: SocketAddr,
    pub(crate) stream: Option<BufReader<TcpStream>>,
}

impl Prober {
    pub(crate) fn get(&mut self, path: &str) -> Result<u16, String> {
        if self.stream.is_none() {
            let stream = TcpStream::connect_timeout(&self.address, Duration::from_secs(5))
                .map_err(|e| format!("connect: {e}"))?;
            stream.set_nodelay(true).map_err(|e| e.to_string())?;
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .map_err(|e| e.to_string())?;
            self.stream = Some(BufReader::new(stream));
        }
        let result = self.exchange(path);
        if result.is_err() {
            self.stream = None;
        }
        result
    }

    pub(crate) fn exchange(&mut self, path: &str) -> Result<u16, String> {
        let reader = self.stream.as_mut().ok_or("not connected")?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: soak\r\n\r\n");
        reader
            .get_mut()
            .write_all(request.as_bytes())
            .map_err(|e| format!("write: {e}"))?;
        let mut status = None;
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader
                .read_line(&mut line)
                .map_err(|e| format!("read: {e}"))?
                == 0
            {
                return Err("connection closed".into());
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if status.is_none() {
                status = line.split_whitespace().nth(1).and_then(|s| s.parse().ok());
            } else if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value
                    .trim()
                    .parse()
                    .map_err(|_| format!("bad content-length {value:?}"))?;
            }
        }
        let mut body = vec![0; length];
        reader
            .read_exact(&mut body)
            .map_err(|e| format!("read body: {e}"))?;
        status.ok_or_else(|| "no status line".to_string())
    }
}

#[derive(Default)]
pub(crate) struct Probes {
    /// (seconds since the start, milliseconds).
    pub(crate) latencies: Vec<(f64, f64)>,
    pub(crate) errors: u64,
    pub(crate) last_error: Option<String>,
}

pub(crate) fn spawn_prober(
    address: SocketAddr,
    start: Instant,
    stop: Arc<AtomicBool>,
    probes: Arc<Mutex<Probes>>,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut prober = Prober {
            address,
            stream: None,
        };
        let mut next = Instant::now();
        while !stop.load(Ordering::Acquire) {
            let sent = Instant::now();
            let result = prober.get("/healthz");
            let ms = sent.elapsed().as_secs_f64() * 1000.0;
            let mut probes = probes.lock().expect("probes");
            match result {
                Ok(200) => probes
                    .latencies
                    .push((sent.duration_since(start).as_secs_f64(), ms)),
                Ok(status) => {
                    probes.errors += 1;
                    probes.last_error = Some(format!("status {status}"));
                }
                Err(e) => {
                    probes.errors += 1;
                    probes.last_error = Some(e);
                }
            }
            drop(probes);
            // A fixed schedule, not a fixed pause: a slow answer does not thin the samples,
            // and a late one is not followed by a burst.
            next += PROBE_EVERY;
            let now = Instant::now();
            if next > now {
                std::thread::sleep(next - now);
            } else {
                next = now;
            }
        }
    })
}
