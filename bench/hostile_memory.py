"""Sends hostile requests to a running svc server and prints its resident memory as they go.
Each mode sends N requests, each on a connection of its own, every one distinct:
  sufficiency  /v1/verifications/sufficient with a 2,000-character lens_uri and `kinds` listing
               one kind 3,800 times (a 59 KB request)
  cursors      /v1/bounties/open after a 4,000-character cursor
  keys         /v1/bounties/open after a cursor whose position is just short of the longest
               key the cache keeps (1 KiB): answers the cache does keep, under long keys
Usage: hostile_memory.py HOST PORT PID N MODE..."""
import base64
import socket
import sys


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise SystemExit("no VmRSS")


def get(host, port, target):
    with socket.create_connection((host, port)) as s:
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := s.recv(1 << 16):
            answer += chunk
    status = int(answer.split(b" ", 2)[1])
    if status != 200:
        raise SystemExit(f"{target[:80]}...: {answer[:300]!r}")


def cursor(position):
    return base64.urlsafe_b64encode(b"u:" + position.encode()).decode().rstrip("=")


def target(mode, n):
    if mode == "sufficiency":
        did = f"did:plc:{n:08d}"
        tail = "/dev.panproto.schema.lens/1"
        lens = f"at://{did}" + "a" * (2000 - 5 - len(did) - len(tail)) + tail
        kinds = ",".join(["roundtrip-test"] * 3800)
        return f"/v1/verifications/sufficient?lens_uri={lens}&kinds={kinds}"
    if mode == "cursors":
        position = f"at://did:plc:{n:08d}/dev.svc.bounty/"
        return "/v1/bounties/open?cursor=" + cursor(position + "x" * (2998 - len(position)))
    if mode == "keys":
        position = f"at://did:plc:{n:08d}/dev.svc.bounty/"
        return "/v1/bounties/open?cursor=" + cursor(position + "x" * (1000 - len(position)))
    raise SystemExit(f"unknown mode {mode}")


def main(host, port, pid, n, modes):
    for mode in modes:
        before = rss_mb(pid)
        marks = []
        for i in range(n):
            get(host, port, target(mode, i))
            if (i + 1) % max(1, n // 4) == 0:
                marks.append(f"{rss_mb(pid):.1f}")
        print(f"{mode}: {n} requests, RSS {before:.1f} MB before, then {' / '.join(marks)} MB")


if __name__ == "__main__":
    host, port, pid, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    main(host, port, pid, n, sys.argv[5:] or ["sufficiency", "cursors", "keys"])
