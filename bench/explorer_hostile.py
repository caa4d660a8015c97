#!/usr/bin/env python3
"""Explorer pages over records of millions of tiny values, on demand (not in CI): each request
on a fresh `svc serve` importing 21 records of 7.8 MB, its peak RSS reset before the GET.
Prints each page's size, time and the server's memory, for each build given, side by side.
    python3 bench/explorer_hostile.py target/release/svc [OTHER_BUILD...]
Environment: BENCH_DIR (bench-data/)."""
import json, os, re, subprocess, sys, tempfile, time, urllib.request

WORK = os.path.join(os.environ.get("BENCH_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench-data")), "explorer-hostile")
ZEROS = 3_900_000  # a 7.8 MB record
CID = "bafyreie5737gdxlw5i64vzichcalba3z2v5n6icifvx5xytvske7mr3hpm"
PAGES = [
    ("record page", None),
    ("record JSON link", "json"),
    ("query page, 20 records", "/explore/vocabulariesWithWorld?world=open&limit=20"),
    ("author page, 21 records", "/at/did:plc:huge"),
    ("API list answer, same 20", "/v1/vocabularies/by-world?world=open&limit=20"),
]

def tid(n):
    alphabet = "234567abcdefghijklmnopqrstuvwxyz"
    v = n << 10
    return "".join(alphabet[(v >> (5 * i)) & 31] for i in range(12, -1, -1))

def events(path):
    if os.path.exists(path):
        return
    zeros = "[" + ",".join(["0"] * ZEROS) + "]"
    t = 1_700_000_000_000_000
    with open(path, "w") as f:
        for i in range(21):
            world = "closed-with-default" if i == 0 else "open"
            t += 1
            rkey = tid(t)
            record = '{"$type":"dev.svc.vocab","aaa":%s,"name":"huge %d","occurredAt":"2026-11-01T12:00:00Z","world":"%s"}' % (zeros, i, world)
            f.write('{"did":"did:plc:huge","time_us":%d,"kind":"commit","commit":{"rev":"%s","operation":"create","collection":"dev.svc.vocab","rkey":"%s","record":%s,"cid":"%s"}}\n' % (t, rkey, rkey, record, CID))

def status(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) // 1024
    raise KeyError(field)

def start(binary, jsonl):
    db = tempfile.mkdtemp(dir=WORK)
    log = open(os.path.join(db, "log"), "w+")
    server = subprocess.Popen([binary, "serve", "--firehose", "none", "--listen", "127.0.0.1:0",
                               "--db", os.path.join(db, "catalog.db"), "--import", jsonl],
                              stderr=log, stdout=subprocess.DEVNULL)
    for _ in range(6000):
        log.seek(0)
        m = re.search(r"listening on (http://[0-9.:]+)", log.read())
        if m:
            try:
                urllib.request.urlopen(m.group(1) + "/readyz", timeout=5)
                return server, m.group(1)
            except Exception:
                pass
        time.sleep(0.1)
    raise SystemExit("no server")

def measure(binary, jsonl, path):
    server, url = start(binary, jsonl)
    try:
        if path in (None, "json"):
            answer = json.load(urllib.request.urlopen(url + "/v1/vocabularies/by-world?world=closed-with-default&limit=1"))
            record = answer["items"][0]["uri"].replace("at://", "/at/")
            path = record + ("?format=json" if path else "")
        time.sleep(1)
        with open(f"/proc/{server.pid}/clear_refs", "w") as f:
            f.write("5")
        before = status(server.pid, "VmRSS")
        started = time.monotonic()
        body = urllib.request.urlopen(url + path, timeout=600).read()
        took = time.monotonic() - started
        return len(body), took, before, status(server.pid, "VmHWM")
    finally:
        server.kill()
        server.wait()

def main():
    os.makedirs(WORK, exist_ok=True)
    jsonl = os.path.join(WORK, "huge.jsonl")
    events(jsonl)
    for name, path in PAGES:
        for binary in sys.argv[1:]:
            size, took, before, peak = measure(binary, jsonl, path)
            print(f"{name}\t{os.path.basename(binary)}\t{size / 1e6:.2f} MB\t{took:.2f} s\tRSS {before} MB before, peak {peak} MB (+{peak - before})", flush=True)

main()
