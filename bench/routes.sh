#!/usr/bin/env bash
# Routes benchmark, on demand (not in CI).
#   bench/routes.sh [N] [--db URL]   N generated records (default 1,000,000), plus LENSES lens
#                                    records over SCHEMAS schemas (bench/gen_lenses.py)
# Imports the records and the lenses, one file, into an empty catalog with this build, timed,
# and with OLD_SVC (a build from before lens records, when given) side by side: the import
# rates. Then, with the answer cache off, asks /v1/routes for 1,000 schema pairs one at a time
# (bench/routes_questions.py), up to 4 hops and up to 2, of pairs drawn uniformly and of pairs
# drawn with the lenses' skew (busy schemas): p50, p90, p99, and how many found routes, none,
# or met a bound. Environment: LENSES (100000), SCHEMAS (20000), OLD_SVC, BENCH_DIR, SVC_BIN.
set -euo pipefail
LENSES="${LENSES:-100000}"
SCHEMAS="${SCHEMAS:-20000}"
source "$(dirname "$0")/common.sh"
bench_args "$@"
build_svc
need_events "$N"
trap 'stop_server' EXIT
lenses="$work/lenses-$LENSES-$SCHEMAS.jsonl"
if [ ! -s "$lenses" ] || [ ! -s "$lenses.hub-pairs.txt" ]; then
  echo "generating $LENSES lenses over $SCHEMAS schemas into $lenses" >&2
  python3 "$root/bench/gen_lenses.py" "$LENSES" "$SCHEMAS" "$lenses"
fi
# One file, so that both are one bulk load into the empty catalog.
both="$work/events-$N-and-lenses-$LENSES.jsonl"
[ -s "$both" ] || cat "$events" "$lenses" >"$both"
events="$both"

if [ -n "${OLD_SVC:-}" ]; then
  fresh_catalog "$DB_URL" "$N"
  saved="$svc_bin"; svc_bin="$OLD_SVC"
  echo "the build before ($OLD_SVC):"
  import_catalog "$work/routes-import-old.log"
  stop_server
  svc_bin="$saved"
fi
fresh_catalog "$DB_URL" "$N"
echo "this build:"
import_catalog "$work/routes-import.log"
stop_server

start_server "$work/routes-server.log" --cache-mb 0
for pairs in pairs hub-pairs; do
  for hops in 4 2; do
    echo "$pairs:"
    python3 "$root/bench/routes_questions.py" "$url" "$lenses.$pairs.txt" --max-hops "$hops"
  done
done
echo "server RSS after the questions: $(rss_mb) MB"
stop_server
echo "CPU time taken by the host (steal) during the runs: $(stolen_since)%"
