#!/usr/bin/env bash
# Stalled connections, on demand (not in CI).
#   bench/stalled.sh [CONNECTIONS]   default 20,000
# A fresh `svc serve` (empty SQLite catalog, default settings but --head-timeout) takes
# CONNECTIONS clients that each send half a request head and wait (bench/stalled.py, in
# processes of at most 10,000 connections), while /healthz is asked every 50 ms. Reports how many
# the server closed, /healthz latency meanwhile, and the server's descriptors and RSS before, at
# the peak and after they are gone.
# Environment: HEAD_TIMEOUT (10s), BENCH_DIR (bench-data/).
set -euo pipefail
CONNECTIONS="${1:-20000}"
HEAD_TIMEOUT="${HEAD_TIMEOUT:-10s}"
source "$(dirname "$0")/common.sh"
build_svc
ulimit -n "$(ulimit -Hn)"
db="$work/stalled.db"
rm -f "$db" "$db"-*
trap stop_server EXIT
start_server "$work/stalled-server.log" --head-timeout "$HEAD_TIMEOUT"
fds() { ls "/proc/$pid/fd" | wc -l; }
echo "before: RSS $(rss_mb) MB, $(fds) descriptors"

hostport="${url#http://}"
hold=$(( ${HEAD_TIMEOUT%s} * 3 ))
clients=()
left="$CONNECTIONS"
while [ "$left" -gt 0 ]; do
  share=$(( left < 10000 ? left : 10000 ))
  python3 "$root/bench/stalled.py" "${hostport%:*}" "${hostport##*:}" "$share" "$hold" &
  clients+=($!)
  left=$((left - share))
done
probes="$work/stalled-probes.txt"
: >"$probes"
peak_rss=0
peak_fds=0
while kill -0 "${clients[@]}" 2>/dev/null; do
  curl -s -o /dev/null -m 5 -w '%{http_code} %{time_total}\n' "$url/healthz" >>"$probes" || true
  r=$(rss_mb); f=$(fds)
  [ "$r" -gt "$peak_rss" ] && peak_rss=$r
  [ "$f" -gt "$peak_fds" ] && peak_fds=$f
  sleep 0.05
done
wait "${clients[@]}"
echo "peak: RSS $peak_rss MB, $peak_fds descriptors"
sort -k2 -n "$probes" | awk '{ n++; if ($1 == 200) ok++; t[n] = $2 * 1000 }
  END { i = int(n * 0.99) + 1; if (i > n) i = n
        printf "/healthz meanwhile: %d of %d answered, p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
        ok, n, t[int(n * 0.5) + 1], t[i], t[n] }'
for wait_s in 1 10; do
  sleep "$wait_s"
  echo "after +${wait_s}s: RSS $(rss_mb) MB, $(fds) descriptors"
done
