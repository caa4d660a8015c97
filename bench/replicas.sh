#!/usr/bin/env bash
# Replica benchmark, on demand (not in CI).
#   bench/replicas.sh [PROBES] [--db URL] [--import FILE]
# One indexer and two query replicas on one catalog (--db postgres://..., emptied first; else
# an SQLite file): the propagation delay of a change from the indexer to the replicas (p50,
# p99), then the throughput of one replica and of two together, as ratios of /healthz.
set -euo pipefail
PROBES=200
IMPORT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --db) export SVC_BENCH_DB="$2"; shift 2 ;;
    --import) IMPORT="$2"; shift 2 ;;
    *) PROBES="$1"; shift ;;
  esac
done
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ -n "${SVC_BENCH_DB:-}" ]; then
  SVC_BENCH_PSQL="$("$root/scripts/pg" bin)/psql"
  export SVC_BENCH_PSQL
fi
command -v wrk >/dev/null || { sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo; $sudo apt-get install -y -q wrk >/dev/null; }
(cd "$root" && cargo build --release -j2 -q -p svc --bin svc --example replica_bench)
"$root/target/release/examples/replica_bench" "$root/target/release/svc" "$PROBES" ${IMPORT:+"$IMPORT"}
