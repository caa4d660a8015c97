#!/usr/bin/env bash
# Costly pages against cheap answers, on demand (not in CI).
#   bench/costly.sh [N] [--db URL]   N generated records, default 100,000
# Imports N generated records, then asks a cached `/v1/stats` and `/healthz` for 10 s each
# (4 connections), alone, and again while 64 connections of one client ask distinct maps and
# searches (bench/costly_paths.py: every request a miss), printing each one's p50 and p99 and
# what the flood was answered. Run it against two builds (SVC_BIN=...) for a ratio that does
# not move with the machine.
# Environment: BENCH_DIR, SVC_BIN, FLOOD (seconds, default 40).
set -euo pipefail
source "$(dirname "$0")/common.sh"
bench_args "$@"
[ "$N" = 1000000 ] && [ $# -eq 0 ] && N=100000
FLOOD="${FLOOD:-40}"
need_wrk
build_svc
need_events "$N"
trap stop_server EXIT
fresh_catalog "$DB_URL" "$N"
import_catalog "$work/costly-import.log"
paths="$work/costly-paths-$N.txt"
python3 "$root/bench/costly_paths.py" "$events" "$paths"

# p50 and p99 of PATH, 4 connections for 10 s.
latency() { # PATH
  wrk -t1 -c4 -d10s --latency "$url$1" |
    awk '/^ +50%/ { p50 = $2 } /^ +99%/ { p99 = $2 } /Requests\/sec/ { rate = $2 }
         END { printf "p50 %s  p99 %s  (%s/s)", p50, p99, rate }'
}

curl -s -o /dev/null "$url/v1/stats"
echo "alone:       /v1/stats $(latency /v1/stats)   /healthz $(latency /healthz)"
MIX_FILE="$paths" wrk -t1 -c64 -d"${FLOOD}s" -s "$root/bench/mix.lua" "$url" >"$work/costly-flood.txt" 2>&1 &
flood=$!
sleep 3
echo "under flood: /v1/stats $(latency /v1/stats)   /healthz $(latency /healthz)"
wait "$flood"
echo "the flood: $(grep -E 'Requests/sec' "$work/costly-flood.txt" | tr -s ' ')" \
  "$(grep -E '^mix:' "$work/costly-flood.txt" | head -1)"
