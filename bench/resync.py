"""The resynchronisation queue's figures, on loopback with the reference PDS and PLC directory.

  outage:   svc follows the PDS's firehose with the directory behind a gate; the gate answers
            503 for OUTAGE seconds while REPOS new accounts publish a record each; then it
            opens, and the time until svc serves every record is measured.
  backfill: a fresh catalog backfills every account of the PDS, verified (getRepo), with the
            build given and with an older build given as --old: repositories/s and records/s.
  memory:   a catalog whose queue holds ENTRIES repositories, all due, the directory
            unreachable: svc's RSS after SECONDS of reading and retrying them.
  large:    16 repositories on 4 hosts (svc reads 16 at once, 4 a host) answer getRepo
            with LARGE_MB each, all at once: svc's peak RSS while it reads them, with the
            build given and with an older build given as --old. The answers are CARs of
            1 MiB blocks, each its CID, whose root is not among them: read, copied block
            by block as verification does, then refused (a verdict, not retried).

Run by bench/resync.sh, which builds svc and starts the peers.
"""

import argparse
import asyncio
import hashlib
import http.server
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def call(url, body=None, token=None, timeout=60):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    request.add_header("content-type", "application/json")
    if token:
        request.add_header("authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        return json.loads(answer.read() or b"null")


class Peers:
    def __init__(self, env):
        self.pds = env["pds"]
        self.plc = env["plc"]
        self.pds_ws = env["pdsWs"]
        self.domain = env["handleDomain"]
        self.counter = 0
        self.lock = threading.Lock()

    def account(self, prefix):
        with self.lock:
            self.counter += 1
            n = self.counter
        name = f"{prefix}{n}"[:18]
        answer = call(
            f"{self.pds}/xrpc/com.atproto.server.createAccount",
            {
                "handle": f"{name}{self.domain}",
                "email": f"{name}@example.com",
                "password": f"{name}-password",
            },
        )
        return answer["did"], answer["accessJwt"]

    def vocab(self, did, token, name):
        record = {
            "$type": "dev.svc.vocab",
            "name": name,
            "world": "open",
            "occurredAt": "2026-01-01T00:00:00.000Z",
        }
        call(
            f"{self.pds}/xrpc/com.atproto.repo.createRecord",
            {"repo": did, "collection": "dev.svc.vocab", "record": record},
            token,
        )

    def publish(self, prefix, count, threads=8):
        def one(i):
            did, token = self.account(prefix)
            self.vocab(did, token, f"{prefix}-{i}")

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(one, range(count)))


class Gate:
    """A TCP proxy in front of the directory: closed, it answers 503 and cuts what it relays."""

    def __init__(self, target):
        host, port = target.replace("http://", "").rstrip("/").split(":")
        self.target = ("127.0.0.1" if host == "localhost" else host, int(port))
        self.open = True
        self.writers = set()
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        threading.Thread(target=self._run, args=(ready,), daemon=True).start()
        ready.wait()

    def _run(self, ready):
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(
            asyncio.start_server(self._serve, "127.0.0.1", 0)
        )
        self.url = "http://127.0.0.1:%d" % server.sockets[0].getsockname()[1]
        ready.set()
        self.loop.run_forever()

    async def _serve(self, reader, writer):
        if not self.open:
            await reader.read(4096)
            body = b'{"error":"Unavailable","message":"the gate is closed"}'
            writer.write(
                b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\n"
                b"content-type: application/json\r\ncontent-length: %d\r\n"
                b"connection: close\r\n\r\n%s" % (len(body), body)
            )
            await writer.drain()
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection(*self.target)
        self.writers.update((writer, up_writer))

        async def pipe(source, sink):
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.writers.discard(writer)
        self.writers.discard(up_writer)

    def set_open(self, open_):
        def apply():
            self.open = open_
            if not open_:
                for writer in list(self.writers):
                    writer.close()

        self.loop.call_soon_threadsafe(apply)
        time.sleep(0.2)


class Svc:
    def __init__(self, binary, db, *flags, log=None):
        self.log_path = log or tempfile.mktemp(suffix=".log")
        self.log = open(self.log_path, "w")
        self.process = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--db", db, *flags],
            stderr=self.log,
            stdout=subprocess.DEVNULL,
            # Every peer here is on loopback (a build without the setting ignores it).
            env={**os.environ, "SVC_ALLOW_PRIVATE_PEERS": "true"},
        )
        self.url = None
        deadline = time.time() + 60
        while self.url is None:
            if time.time() > deadline or self.process.poll() is not None:
                sys.exit(f"svc did not start; see {self.log_path}")
            found = re.search(r"listening on (http://\S+)", open(self.log_path).read())
            self.url = found.group(1) if found else None
            time.sleep(0.05)

    def vocabularies(self):
        return call(f"{self.url}/v1/stats")["vocabularies"]

    def logged(self, needle):
        return needle in open(self.log_path).read()

    def stop(self):
        self.process.terminate()
        self.process.wait(30)


def outage(args, peers):
    gate = Gate(peers.plc)
    db = os.path.join(args.work, "outage.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    svc = Svc(args.svc, db, "--firehose", peers.pds_ws, "--plc-url", gate.url)
    time.sleep(2)
    base = svc.vocabularies()
    gate.set_open(False)
    began = time.time()
    peers.publish("outage", args.repos)
    published = time.time() - began
    time.sleep(max(0.0, args.outage - published))
    during = svc.vocabularies() - base
    gate.set_open(True)
    opened = time.time()
    while svc.vocabularies() - base < args.repos:
        if time.time() - opened > 300:
            sys.exit(f"not converged after 300 s; see {svc.log_path}")
        time.sleep(0.1)
    took = time.time() - opened
    served = svc.vocabularies() - base
    print(
        f"outage: {args.repos} repositories published in {published:.1f} s during a "
        f"{max(published, args.outage):.0f} s directory outage; {during} served during it; "
        f"all {served} served {took:.1f} s after the directory came back; "
        f"RSS {rss_mb(svc.process.pid):.0f} MB"
    )
    svc.stop()


def backfill_with(binary, label, args, peers):
    db = os.path.join(args.work, f"backfill-{label}.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    began = time.time()
    svc = Svc(
        binary, db, "--firehose", "none", "--backfill", peers.pds, "--plc-url", peers.plc
    )
    peak = 0.0
    while not svc.logged("backfill finished"):
        peak = max(peak, rss_mb(svc.process.pid))
        if svc.process.poll() is not None:
            sys.exit(f"svc ended; see {svc.log_path}")
        time.sleep(0.2)
    took = time.time() - began
    line = [l for l in open(svc.log_path) if "backfill finished" in l][-1]
    repositories = int(re.search(r"repositories=(\d+)", line).group(1))
    records = svc.vocabularies()
    svc.stop()
    print(
        f"backfill ({label}): {repositories} repositories, {records} records in {took:.1f} s: "
        f"{repositories / took:.0f} repositories/s, {records / took:.0f} records/s; "
        f"peak RSS {peak:.0f} MB"
    )


def backfill(args, peers):
    missing = max(0, args.backfill_repos - count_repos(peers))
    if missing:
        began = time.time()
        peers.publish("fill", missing)
        print(f"created {missing} accounts with a record each in {time.time() - began:.0f} s")
    backfill_with(args.svc, "this build", args, peers)
    if args.old:
        backfill_with(args.old, "older build", args, peers)


def count_repos(peers):
    count, cursor = 0, None
    while True:
        url = f"{peers.pds}/xrpc/com.atproto.sync.listRepos?limit=1000"
        if cursor:
            url += f"&cursor={cursor}"
        page = call(url)
        count += len(page.get("repos", []))
        cursor = page.get("cursor")
        if not cursor or not page.get("repos"):
            return count


def memory(args):
    db = os.path.join(args.work, "queue.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    unreachable = "http://127.0.0.1:9"
    svc = Svc(args.svc, db, "--firehose", "none", "--plc-url", unreachable)
    time.sleep(3)
    empty = rss_mb(svc.process.pid)
    svc.stop()
    now = int(time.time() * 1000)
    connection = sqlite3.connect(db)
    connection.executemany(
        "INSERT INTO resync_queue (did, reason, since_ms, attempts, due_ms, last_error) "
        "VALUES (?, 'backfill', ?, 0, ?, NULL)",
        ((f"did:plc:{i:024d}", now, now) for i in range(args.entries)),
    )
    connection.commit()
    connection.close()
    svc = Svc(args.svc, db, "--firehose", "none", "--plc-url", unreachable)
    samples = []
    for _ in range(args.seconds):
        time.sleep(1)
        samples.append(rss_mb(svc.process.pid))
    tried = sqlite3.connect(db).execute(
        "SELECT count(*) FROM resync_queue WHERE attempts > 0"
    ).fetchone()[0]
    readyz = urllib.request.urlopen(f"{svc.url}/readyz").read().decode().strip()
    svc.stop()
    print(
        f"memory: {args.entries} entries queued: RSS {samples[-1]:.0f} MB after "
        f"{args.seconds} s (peak {max(samples):.0f} MB; {empty:.0f} MB with an empty queue); "
        f"{tried} reads failed and rescheduled meanwhile; /readyz: {readyz!r}"
    )


# A K-256 public key of the interoperability fixtures (crates/svc-repo/tests/interop): the
# documents name a key that parses; the answers are refused before any signature is checked.
LARGE_KEY = "zQ3shqwJEJyMBsBXCWyCBpUBMqxcon9oHB7mCvx4sSpMdLJwc"
LARGE_REPOS = 16
LARGE_HOSTS = 4


def varint(value):
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def cid(data):
    return b"\x01\x71\x12\x20" + hashlib.sha256(data).digest()


def car_header(seed):
    # DAG-CBOR {"roots": [link], "version": 1}: a root no block of the CAR is.
    link = b"\xd8\x2a\x58\x25\x00" + cid(b"missing root " + seed)
    header = b"\xa2\x65roots\x81" + link + b"\x67version\x01"
    return varint(len(header)) + header


def car_block(seed, n):
    data = hashlib.sha256(seed + n.to_bytes(4, "big")).digest() * (1 << 15)
    block = cid(data) + data
    return varint(len(block)) + block


class LargeHosts:
    """LARGE_HOSTS servers answering getRepo with a large CAR, streamed without a length (as
    the reference PDS does). Each answer's head and first block go out at once, the rest
    once every repository's answer has begun (or 10 s passed): all are read at once."""

    def __init__(self, megabytes):
        self.megabytes = megabytes
        self.begun = 0
        self.lock = threading.Lock()
        self.urls = [self._start() for _ in range(LARGE_HOSTS)]

    def _start(self):
        hosts = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                seed = self.path.encode()
                self.send_response(200)
                self.send_header("content-type", "application/vnd.ipld.car")
                self.end_headers()
                self.wfile.write(car_header(seed) + car_block(seed, 0))
                with hosts.lock:
                    hosts.begun += 1
                waited = time.time()
                while hosts.begun < LARGE_REPOS and time.time() - waited < 10:
                    time.sleep(0.02)
                try:
                    # Just under LARGE_MB in all, so that 256 is within what a read may be.
                    for n in range(1, hosts.megabytes - 1):
                        self.wfile.write(car_block(seed, n))
                except (ConnectionError, OSError):
                    pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return "http://127.0.0.1:%d" % server.server_address[1]


def large_directory(hosts):
    """The server the backfill lists from, also the DIDs' directory."""
    dids = ["did:plc:large%019d" % n for n in range(LARGE_REPOS)]

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            if "listReposByCollection" in self.path:
                wanted = "collection=dev.svc.vocab" in self.path
                body = {"repos": [{"did": did} for did in dids] if wanted else []}
            elif self.path.lstrip("/") in dids:
                did = self.path.lstrip("/")
                host = hosts.urls[dids.index(did) % LARGE_HOSTS]
                body = {
                    "id": did,
                    "alsoKnownAs": [],
                    "verificationMethod": [{"id": did + "#atproto", "type": "Multikey",
                                            "controller": did,
                                            "publicKeyMultibase": LARGE_KEY}],
                    "service": [{"id": "#atproto_pds", "type": "AtprotoPersonalDataServer",
                                 "serviceEndpoint": host}],
                }
            else:
                body = {"error": "NotFound", "message": "not here"}
            data = json.dumps(body).encode()
            self.send_response(200 if "error" not in body else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return "http://127.0.0.1:%d" % server.server_address[1]


def peak_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def large_with(binary, label, args):
    hosts = LargeHosts(args.large_mb)
    directory = large_directory(hosts)
    db = os.path.join(args.work, f"large-{label.replace(' ', '-')}.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    began = time.time()
    svc = Svc(binary, db, "--firehose", "none", "--backfill", directory, "--plc-url", directory)
    at_start = rss_mb(svc.process.pid)
    while not svc.logged("backfill finished"):
        if svc.process.poll() is not None:
            sys.exit(f"svc ended; see {svc.log_path}")
        if time.time() - began > 600:
            sys.exit(f"the backfill did not finish in 600 s; see {svc.log_path}")
        time.sleep(0.2)
    took = time.time() - began
    peak = peak_mb(svc.process.pid)
    svc.stop()
    budget = os.environ.get("SVC_READ_MEMORY_MB", "256 (the default)")
    print(
        f"large ({label}): {LARGE_REPOS} answers of {args.large_mb} MiB on {LARGE_HOSTS} hosts "
        f"at once, {hosts.begun} asked: RSS {at_start:.0f} MB at start, peak {peak:.0f} MB; "
        f"all read in {took:.1f} s (SVC_READ_MEMORY_MB={budget})"
    )


def large(args):
    large_with(args.svc, "this build", args)
    if args.old:
        large_with(args.old, "older build", args)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--svc", required=True)
    parser.add_argument("--old", help="an older build, for the backfill side by side")
    parser.add_argument("--peers", help="the peers' JSON line file")
    parser.add_argument("--work", default=tempfile.gettempdir())
    parser.add_argument("--repos", type=int, default=1000)
    parser.add_argument("--outage", type=float, default=30)
    parser.add_argument("--backfill-repos", type=int, default=10000)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--large-mb", type=int, default=64)
    parser.add_argument("parts", nargs="*", default=["outage", "backfill", "memory"])
    args = parser.parse_args()
    peers = None
    if {"outage", "backfill"} & set(args.parts):
        peers = Peers(json.load(open(args.peers)))
    for part in args.parts:
        {"outage": lambda: outage(args, peers),
         "backfill": lambda: backfill(args, peers),
         "memory": lambda: memory(args),
         "large": lambda: large(args)}[part]()


if __name__ == "__main__":
    main()
