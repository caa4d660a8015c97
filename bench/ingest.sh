#!/usr/bin/env bash
# Ingest benchmark, on demand (not in CI).
#   bench/ingest.sh [N] [--db URL]   N replayed Jetstream events, default 1,000,000; with
#                                    --db postgres://... on PostgreSQL (emptied before each run)
# Streams N events from a Jetstream replay server over loopback into a fresh `svc serve`, then
# times publish-to-queryable through the reference PDS's firehose (scripts/peers).
set -euo pipefail
N=1000000
while [ $# -gt 0 ]; do
  case "$1" in
    --db) export SVC_BENCH_DB="$2"; shift 2 ;;
    *) N="$1"; shift ;;
  esac
done
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${SVC_BENCH_DB:-}" ]; then
  SVC_BENCH_PSQL="$("$root/scripts/pg" bin)/psql"
  export SVC_BENCH_PSQL
fi
work="${BENCH_DIR:-$root/bench-data}"
mkdir -p "$work"
events="$work/events-$N.jsonl"
if [ ! -s "$events" ]; then
  python3 "$root/bench/gen_events.py" "$N" "$events" 2>/dev/null
fi
(cd "$root" && cargo build --release -j2 -q -p svc --bin svc --example ingest_bench)
"$root/scripts/peers" install >/dev/null
"$root/target/release/examples/ingest_bench" "$root/target/release/svc" "$events" "$N" ${NO_PDS:+--no-pds}
