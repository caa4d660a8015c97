"""Opens N connections that each send 2,000 pipelined requests for a large page and never read
an answer, as a hostile client does, SPACING seconds apart (default 0); waits HOLD seconds and
prints how many the server closed (seen without reading: a read would be the progress the server
waits for) and when.
Usage: unread.py HOST PORT N HOLD [SPACING [PATH]]"""
import select
import socket
import sys
import time

HUNG_UP = select.POLLRDHUP | select.POLLHUP | select.POLLERR


def main(host, port, n, hold, spacing, path):
    request = f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode() * 2000
    started = time.monotonic()
    poller = select.poll()
    clients = {}  # fd: [socket, connected at, bytes of the requests not yet sent]
    refused = 0
    for i in range(n):
        if spacing and i:
            time.sleep(spacing)
        try:
            s = socket.create_connection((host, port))
        except OSError:
            refused += 1
            continue
        s.setblocking(False)
        clients[s.fileno()] = [s, time.monotonic(), memoryview(request)]
        poller.register(s, select.POLLRDHUP | select.POLLOUT)
    print(f"connected {len(clients)} in {time.monotonic() - started:.1f} s, refused {refused}",
          flush=True)
    closed_after = []
    deadline = started + hold
    while clients and time.monotonic() < deadline:
        for fd, events in poller.poll(max(0, deadline - time.monotonic()) * 1000):
            client = clients.get(fd)
            if client is None:
                continue
            if events & HUNG_UP:
                closed_after.append(time.monotonic() - client[1])
                poller.unregister(fd)
                del clients[fd]
                continue
            # Writable: more of the requests. The server stops reading them once its answers
            # are blocked, and what it has not taken by then stays unsent.
            try:
                client[2] = client[2][client[0].send(client[2]):]
            except BlockingIOError:
                pass
            if not client[2]:
                poller.modify(fd, select.POLLRDHUP)
    closed_after.sort()
    if closed_after:
        print(f"closed {len(closed_after)}, held {len(clients)}; closed after (s): min "
              f"{closed_after[0]:.2f}, p50 {closed_after[len(closed_after) // 2]:.2f}, "
              f"max {closed_after[-1]:.2f}")
    else:
        print(f"closed 0, held {len(clients)}")


if __name__ == "__main__":
    host, port, n, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    spacing = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    main(host, port, n, hold, spacing, sys.argv[6] if len(sys.argv) > 6 else "/v1/bounties/open?limit=1000")
