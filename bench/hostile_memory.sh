#!/usr/bin/env bash
# Memory held for hostile clients, on demand (not in CI).
#   bench/hostile_memory.sh [REQUESTS] [MODE...]   default 1,000 of each mode
# A fresh `svc serve` (the example catalog in SQLite, `--cache-mb` CACHE_MB) is sent REQUESTS
# distinct hostile requests of each mode (bench/hostile_memory.py: 59 KB sufficiency questions,
# 4,000-character cursors, cursors just within the cache's longest key); its RSS is printed
# before each mode and at each quarter. The cache's keys, ghosts and answers are bounded by
# `--cache-mb`, so RSS should level off a few MB above where it started.
# Environment: CACHE_MB (1), SVC_BIN (the release build, made here), BENCH_DIR (bench-data/).
set -euo pipefail
REQUESTS="${1:-1000}"
shift || true
CACHE_MB="${CACHE_MB:-1}"
source "$(dirname "$0")/common.sh"
bin="${SVC_BIN:-$root/target/release/svc}"
[ -n "${SVC_BIN:-}" ] || (cd "$root" && cargo build --release -j2 -q -p svc --bin svc)
db="$work/hostile-memory.db"
rm -f "$db" "$db"-*
log="$work/hostile-memory-server.log"
"$bin" serve --firehose none --listen 127.0.0.1:0 --db "$db" --cache-mb "$CACHE_MB" \
  --import "$root/examples/catalog.jsonl" 2>"$log" &
pid=$!
trap stop_server EXIT
url=""
until [ -n "$url" ]; do
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.1
  url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$log" | head -n1)
done
until curl -fs "$url/readyz" >/dev/null 2>&1; do sleep 0.1; done
hostport="${url#http://}"
echo "svc serve --cache-mb $CACHE_MB ($bin): RSS $(rss_mb) MB when ready"
python3 "$root/bench/hostile_memory.py" "${hostport%:*}" "${hostport##*:}" "$pid" "$REQUESTS" "$@"
