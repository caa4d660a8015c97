#!/usr/bin/env bash
# Ingest benchmark, on demand (not in CI).
#   bench/ingest.sh [N] [--db URL]   N replayed Jetstream events, default 1,000,000; with
#                                    --db postgres://... on PostgreSQL (emptied before each run)
# Streams N events from a Jetstream replay server over loopback into a fresh `svc serve`, then
# times publish-to-queryable through the reference PDS's firehose (scripts/peers).
set -euo pipefail
source "$(dirname "$0")/common.sh"
bench_args "$@"
DB_URL="${DB_URL:-${SVC_BENCH_DB:-}}"
[ -n "$DB_URL" ] && bench_db "$DB_URL"
events="$work/events-$N.jsonl"
if [ ! -s "$events" ]; then
  python3 "$root/bench/gen_events.py" "$N" "$events" 2>/dev/null
fi
(cd "$root" && cargo build --release -j2 -q -p svc --bin svc -p svc-bench --bin ingest_bench)
"$root/scripts/peers" install >/dev/null
cpu_mark
"$root/target/release/ingest_bench" "$root/target/release/svc" "$events" "$N" ${NO_PDS:+--no-pds}
echo "CPU time taken by the host (steal) during the runs: $(stolen_since)%"
