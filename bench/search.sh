#!/usr/bin/env bash
# Search benchmark, on demand (not in CI).
#   bench/search.sh [N] [--db URL]   N generated records, default 1,000,000; --db postgres://...
#                                    measures the PostgreSQL engine (emptied first)
# Imports N generated records (bench/gen_events.py) with this build, timed, and with OLD_SVC
# (a build without search, when given) into a fresh catalog side by side: the import rates
# and catalog sizes with the search index and without. Then drives the yardstick (nginx
# answering a constant, bench/common.sh), then a search mix (bench/search_mix.py: one word, two
# words, a prefix, a phrase, a kind filter; Zipf-skewed words) with wrk: throughput as a ratio
# of the yardstick's, p50/p99, non-2xx answers. Last, with the answer cache off, single
# searches one at a time by the frequency band of their words (bench/search_bands.py).
# Environment: DURATION (per wrk run, default 30s), CONNECTIONS (32), MIX_LINES (6000),
# OLD_SVC (a build to import with for the figures without search), BENCH_DIR, SVC_BIN.
set -euo pipefail
DURATION="${DURATION:-30s}"
CONNECTIONS="${CONNECTIONS:-32}"
MIX_LINES="${MIX_LINES:-6000}"
source "$(dirname "$0")/common.sh"
bench_args "$@"
need_wrk
build_svc
need_events "$N"
trap 'stop_server; stop_yardstick' EXIT

# The catalog's size on disk: the SQLite file and its WAL, or the database.
catalog_mb() {
  if [[ "$db" == postgres* ]]; then
    "$("$root/scripts/pg" bin)/psql" -qtA "$db" -c "SELECT pg_database_size(current_database()) / 1048576"
  else
    du -cm "$db"* | tail -n1 | cut -f1
  fi
}

if [ -n "${OLD_SVC:-}" ]; then
  fresh_catalog "$DB_URL" "$N"
  saved="$svc_bin"; svc_bin="$OLD_SVC"
  import_catalog "$work/search-import-old.log"
  stop_server
  echo "without search ($OLD_SVC): catalog $(catalog_mb) MB"
  svc_bin="$saved"
fi
fresh_catalog "$DB_URL" "$N"
import_catalog "$work/search-import.log"
grep -o 'search index built.*' "$work/search-import.log" || true
stop_server
echo "with search: catalog $(catalog_mb) MB"

mix="$work/search-mix-$N.txt"
python3 "$root/bench/search_mix.py" "$events" "$mix" --lines "$MIX_LINES"
start_server "$work/search-server.log"
wrk_mix() { MIX_FILE="$mix" wrk -t2 -c"$CONNECTIONS" -d"$1" --latency -s "$root/bench/mix.lua" "$url"; }
wrk_mix 10s >/dev/null
printf '\nwith default settings (wrk -t2 -c%s -d%s)\n' "$CONNECTIONS" "$DURATION"
printf '%-26s %12s %9s %9s %7s\n' load "requests/s" "p50 ms" "p99 ms" ratio
measure_yardstick
out=$(wrk_mix "$DURATION")
wrk_figures "$out"
printf '%-26s %12.0f %9s %9s %7s\n' "search mix ($(wc -l <"$mix") requests)" "$rate" "$p50" "$p99" \
  "$(of_yardstick "$rate")"
grep '^mix: ' <<<"$out" || true
echo "server RSS after the mix: $(rss_mb) MB"
stop_server
# Every search asked once, nothing answered from a cache: one at a time, by word frequency.
start_server "$work/search-server.log" --cache-mb 0
python3 "$root/bench/search_bands.py" "$url" "$events"
stop_server
echo "CPU time taken by the host (steal) during the runs: $(stolen_since)%"
