#!/usr/bin/env python3
"""Asks /v1/routes each (from, to) pair of a pairs file once, one at a time, over one
keep-alive connection, and prints the latency percentiles and what the answers were.

    python3 bench/routes_questions.py URL PAIRS [--max-hops H] [--count N]

Run it against a server started with `--cache-mb 0`, so that every answer is built.
"""

import http.client
import json
import sys
import time
import urllib.parse


def percentile(sorted_ms, p):
    return sorted_ms[min(len(sorted_ms) - 1, int(len(sorted_ms) * p))]


def main(argv):
    url, pairs_file = argv[1], argv[2]
    hops = argv[argv.index("--max-hops") + 1] if "--max-hops" in argv else "4"
    count = int(argv[argv.index("--count") + 1]) if "--count" in argv else 1000
    parsed = urllib.parse.urlparse(url)
    conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=60)
    pairs = [line.split() for line in open(pairs_file) if line.strip()][:count]
    times, found, empty, refused, hops_seen = [], 0, 0, 0, []
    for source, target in pairs:
        query = urllib.parse.urlencode({"from": source, "to": target, "max_hops": hops})
        started = time.perf_counter()
        conn.request("GET", "/v1/routes?" + query)
        response = conn.getresponse()
        body = response.read()
        times.append((time.perf_counter() - started) * 1000)
        if response.status == 400:
            refused += 1
            continue
        routes = json.loads(body)["routes"]
        if routes:
            found += 1
            hops_seen.append(len(routes[0]["hops"]))
        else:
            empty += 1
    times.sort()
    print("routes, max_hops %s, %d questions one at a time, uncached: p50 %.1f ms, p90 %.1f ms, "
          "p99 %.1f ms, max %.1f ms" % (hops, len(times), percentile(times, 0.5),
                                          percentile(times, 0.9), percentile(times, 0.99), times[-1]))
    shortest = sum(hops_seen) / len(hops_seen) if hops_seen else 0
    print("  answers: %d with routes (best chain %.1f hops on average), %d with none, "
          "%d refused past a bound" % (found, shortest, empty, refused))


if __name__ == "__main__":
    main(sys.argv)
