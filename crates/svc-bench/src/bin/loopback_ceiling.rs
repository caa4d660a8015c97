//! The loopback ceiling of the cached-answer ratio, on demand: how fast this machine can hand
//! wrk a list-sized answer against a `/healthz`-sized one when the server does nothing but
//! write bytes it already holds. No router, no cache lookup, no parameters: the ratio it prints
//! is what the kernel's loopback and wrk's own reading leave to any server at that answer size,
//! the bound `bench/run.sh`'s "cached / `/healthz`" figure is measured against.
//!
//! Usage: loopback_ceiling [--bytes 69167] [--rounds 3] [--duration 10s] [--connections 32]
//! Needs wrk on the PATH.

use svc_bench::wrk;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

struct Options {
    bytes: usize,
    rounds: usize,
    duration: String,
    connections: usize,
}

fn options() -> Result<Options, String> {
    let mut options = Options {
        bytes: 69_167,
        rounds: 3,
        duration: "10s".into(),
        connections: 32,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || value.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--bytes" => options.bytes = number()?,
            "--rounds" => options.rounds = number()?,
            "--connections" => options.connections = number()?,
            "--duration" => options.duration = value,
            other => return Err(format!("unknown flag {other}")),
        }
    }
    Ok(options)
}

fn response(body_len: usize) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {body_len}\r\n\r\n"
    )
    .into_bytes();
    out.resize(out.len() + body_len, b'x');
    out
}

/// Answers every request on one connection: the small response for `/healthz`, the large one
/// for anything else. Requests are GETs without a body, so a request ends at its blank line.
async fn serve(mut stream: TcpStream, small: &[u8], large: &[u8]) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut pending = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Ok(());
        }
        pending.extend_from_slice(&chunk[..read]);
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            let answer = if pending.starts_with(b"GET /healthz") {
                small
            } else {
                large
            };
            stream.write_all(answer).await?;
            pending.drain(..end + 4);
        }
    }
}

fn wrk_rate(options: &Options, url: &str) -> Result<f64, String> {
    let connections = format!("-c{}", options.connections);
    let duration = format!("-d{}", options.duration);
    wrk::requests_per_second(&["-t2", &connections, &duration], url)
        .map_err(|e| format!("running wrk: {e}"))?
        .ok_or_else(|| format!("wrk printed no rate for {url}"))
}

fn main() -> Result<(), String> {
    let options = options()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let listener = runtime
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .map_err(|e| e.to_string())?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let small: &'static [u8] = response(2).leak();
    let large: &'static [u8] = response(options.bytes).leak();
    runtime.spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream, small, large));
        }
    });
    println!(
        "{:>5} {:>12} {:>12} {:>7}",
        "round", "/healthz/s", "large/s", "ratio"
    );
    for round in 1..=options.rounds {
        let health = wrk_rate(&options, &format!("http://{address}/healthz"))?;
        let list = wrk_rate(&options, &format!("http://{address}/list"))?;
        println!(
            "{round:>5} {health:>12.0} {list:>12.0} {:>7.2}",
            list / health
        );
    }
    Ok(())
}
