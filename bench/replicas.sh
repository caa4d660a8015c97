#!/usr/bin/env bash
# Replica benchmark, on demand (not in CI).
#   bench/replicas.sh [PROBES] [--db URL] [--import FILE]
# One indexer and two query replicas on one catalog (--db postgres://..., emptied first; else
# an SQLite file): the propagation delay of a change from the indexer to the replicas (p50,
# p99), then the throughput of one replica and of two together, as ratios of the yardstick's
# (nginx answering a constant, bench/common.sh).
set -euo pipefail
PROBES=200
IMPORT=""
DB_URL=""
while [ $# -gt 0 ]; do
  case "$1" in
    --db) DB_URL="$2"; shift 2 ;;
    --import) IMPORT="$2"; shift 2 ;;
    *) PROBES="$1"; shift ;;
  esac
done
source "$(dirname "$0")/common.sh"
need_wrk
DB_URL="${DB_URL:-${SVC_BENCH_DB:-}}"
[ -n "$DB_URL" ] && bench_db "$DB_URL"
(cd "$root" && cargo build --release -j2 -q -p svc --bin svc -p svc-bench --bin replica_bench)
start_yardstick
trap stop_yardstick EXIT
SVC_YARDSTICK_URL="$yard_url" \
  "$root/target/release/replica_bench" "$root/target/release/svc" "$PROBES" ${IMPORT:+"$IMPORT"}
