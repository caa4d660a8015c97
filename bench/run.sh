#!/usr/bin/env bash
# Query benchmark, on demand (not in CI).
#   bench/run.sh [N] [--db URL]  N records, default 1,000,000; --db postgres://... measures
#                                the PostgreSQL engine (the database is emptied first: its
#                                public schema is dropped), otherwise a fresh SQLite file
# Generates N skewed records (bench/gen_events.py), imports them into a fresh catalog with the
# release build, then drives the server with wrk at 32 connections on loopback: each query and
# /healthz: with the answer cache on (the default), first as wrk asks (no Accept-Encoding), then
# as most HTTP clients ask (Accept-Encoding: gzip); then with --cache-mb 0. Each figure comes
# with the share of CPU time the host took meanwhile (steal): figures with much of it are noise.
# Ratios are of the yardstick's throughput (nginx answering a constant, bench/common.sh),
# measured at the head of each table.
# Environment: DURATION (per endpoint, default 10s), CONNECTIONS (32), BENCH_DIR (bench-data/).
set -euo pipefail
DURATION="${DURATION:-10s}"
CONNECTIONS="${CONNECTIONS:-32}"
source "$(dirname "$0")/common.sh"
bench_args "$@"
need_wrk
build_svc

need_events "$N"
hot() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$events.hot.json" "$1"; }
requester=$(hot requester_did); framework=$(hot framework); lens=$(hot lens_uri)

fresh_catalog "$DB_URL" "$N"
trap 'stop_server; stop_yardstick' EXIT
import_catalog "$work/import.log"
rss_after_import=$(rss_mb)
json_bytes=$(stat -c %s "$events")

run_suite() { # label [extra wrk arguments...]
  local label="$1"; shift
  printf '\n%s (wrk -t2 -c%s -d%s %s)\n' "$label" "$CONNECTIONS" "$DURATION" "$*"
  printf '%-34s %12s %9s %9s %7s %8s\n' endpoint "requests/s" "p50 ms" "p99 ms" ratio "steal %"
  measure_yardstick 34
  for entry in \
    "healthz|/healthz" \
    "bounties by requester|/v1/bounties/by-requester?requester_did=$requester" \
    "adapters by framework|/v1/adapters?framework=$framework" \
    "open bounties limit=100|/v1/bounties/open?limit=100" \
    "verifications for a lens|/v1/verifications?lens_uri=$lens" \
    "sufficiency|/v1/verifications/sufficient?lens_uri=$lens&kinds=roundtrip-test,property-test"; do
    local name="${entry%%|*}" path="${entry#*|}"
    local out rate p50 p99
    cpu_mark
    out=$(wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency "$@" "$url$path")
    wrk_figures "$out"
    if grep -q 'Non-2xx' <<<"$out"; then echo "non-2xx answers for $path" >&2; fi
    printf '%-34s %12.0f %9s %9s %7s %8s\n' "$name" "$rate" "$p50" "$p99" \
      "$(of_yardstick "$rate")" "$(stolen_since)"
  done
}

run_suite "answer cache on (default --cache-mb 32)"
run_suite "answer cache on, gzip accepted" -H "Accept-Encoding: gzip"
rss_cached=$(rss_mb)
stop_server
start_server "$work/nocache.log" --cache-mb 0
run_suite "answer cache off (--cache-mb 0)"
rss_uncached=$(rss_mb)
stop_server

if [ -n "$DB_URL" ]; then
  db_bytes=$("$("$root/scripts/pg" bin)/psql" -qtA "$db" -c 'SELECT pg_database_size(current_database())')
else
  db_bytes=$(( $(stat -c %s "$db") + $(stat -c %s "$db-wal" 2>/dev/null || echo 0) ))
fi
printf '\nimported JSON: %d MB; database: %d MB (%.2fx)\n' $((json_bytes >> 20)) $((db_bytes >> 20)) "$(awk -v a="$db_bytes" -v b="$json_bytes" 'BEGIN { print a / b }')"
printf 'server RSS: %d MB after import, %d MB after the cached run, %d MB after the uncached run\n' \
  "$rss_after_import" "$rss_cached" "$rss_uncached"
