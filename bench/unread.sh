#!/usr/bin/env bash
# Clients that never read their answers, on demand (not in CI).
#   bench/unread.sh [CLIENTS]   default 300
# A fresh `svc serve` (the example catalog, --write-timeout WRITE_TIMEOUT, --max-connections
# MAX_CONNECTIONS when set) takes CLIENTS connections, SPACING_MS apart, that each pipeline
# 2,000 requests for a 6 KB page and never read (bench/unread.py), while /healthz and
# /v1/stats are each asked every 50 ms on a new connection. Reports when the server closed the
# clients, the probes and queries meanwhile, the write-timeout counter, the server's
# descriptors and RSS before, at the peak and after, and the most its sockets' kernel send
# queues held.
# Environment: WRITE_TIMEOUT (5s; `off` passes no flag, for builds without one),
# MAX_CONNECTIONS (the default), SPACING_MS (0), SVC_BIN (a built svc instead of building
# target/release/svc), BENCH_DIR (bench-data/).
set -euo pipefail
CLIENTS="${1:-300}"
WRITE_TIMEOUT="${WRITE_TIMEOUT:-5s}"
SPACING_MS="${SPACING_MS:-0}"
source "$(dirname "$0")/common.sh"
bin="${SVC_BIN:-}"
if [ -z "$bin" ]; then
  (cd "$root" && cargo build --release -j2 -q -p svc --bin svc)
  bin="$root/target/release/svc"
fi
ulimit -n "$(ulimit -Hn)"
db="$work/unread.db"
rm -f "$db" "$db"-*
log="$work/unread-server.log"
flags=()
timeout_s=5
if [ "$WRITE_TIMEOUT" != off ]; then
  flags+=(--write-timeout "$WRITE_TIMEOUT")
  timeout_s="${WRITE_TIMEOUT%s}"
fi
[ -n "${MAX_CONNECTIONS:-}" ] && flags+=(--max-connections "$MAX_CONNECTIONS")
"$bin" serve --firehose none --listen 127.0.0.1:0 --db "$db" --import "$root/examples/catalog.jsonl" \
  "${flags[@]}" 2>"$log" &
pid=$!
trap stop_server EXIT
url=""
until [ -n "$url" ]; do
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.05
  url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$log" | head -n1)
done
until curl -fs "$url/readyz" >/dev/null 2>&1; do sleep 0.1; done
fds() { ls "/proc/$pid/fd" | wc -l; }
echo "before: RSS $(rss_mb) MB, $(fds) descriptors"

hostport="${url#http://}"
hold=$(( timeout_s * 4 + 10 + CLIENTS * SPACING_MS / 1000 ))
python3 "$root/bench/unread.py" "${hostport%:*}" "${hostport##*:}" "$CLIENTS" "$hold" \
  "$(awk -v ms="$SPACING_MS" 'BEGIN { print ms / 1000 }')" &
client=$!
probes="$work/unread-probes.txt"
: >"$probes"
peak_rss=0
peak_fds=0
peak_queued=0
port="${hostport##*:}"
while kill -0 "$client" 2>/dev/null; do
  for path in /healthz /v1/stats; do
    curl -s -o /dev/null -m 10 -w "$path %{http_code} %{time_total}\n" "$url$path" >>"$probes" || true
  done
  r=$(rss_mb); f=$(fds)
  [ "$r" -gt "$peak_rss" ] && peak_rss=$r
  [ "$f" -gt "$peak_fds" ] && peak_fds=$f
  q=$(send_queues_kb "$port")
  [ "$q" -gt "$peak_queued" ] && peak_queued=$q
  sleep 0.05
done
wait "$client"
echo "peak: RSS $peak_rss MB, $peak_fds descriptors, $peak_queued KB in the kernel send queues"
for path in /healthz /v1/stats; do
  awk -v p="$path" '$1 == p' "$probes" | sort -k3 -n | awk -v p="$path" '
    { n++; if ($2 == 200) t[++ok] = $3 * 1000 }
    END { i = int(ok * 0.99) + 1; if (i > ok) i = ok
          printf "%s meanwhile: %d of %d answered, p50 %.2f ms, p99 %.2f ms, max %.2f ms (answered)\n",
          p, ok, n, t[int(ok * 0.5) + 1], t[i], t[ok] }'
done
curl -s "$url/metrics" | grep '^svc_http_write_timeouts_total' || true
for wait_s in 1 10; do
  sleep "$wait_s"
  echo "after +${wait_s}s: RSS $(rss_mb) MB, $(fds) descriptors"
done
