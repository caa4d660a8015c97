#!/usr/bin/env bash
# Explorer benchmark, on demand (not in CI).
#   bench/explorer.sh [N] [--db URL]   N records, default 1,000,000; --db postgres://... measures
#                                      the PostgreSQL engine (the database is emptied first: its
#                                      public schema is dropped), otherwise a fresh SQLite file
# Imports N generated records (bench/gen_events.py, as bench/run.sh), restarts the server with
# default settings, picks real targets through the JSON API (an open bounty, its author, a lens
# with roundtrip-test verifications), then drives each page with wrk after a short warm-up:
# /healthz, the front page `/`, /explore/openBounties beside the same answer as JSON
# (/v1/bounties/open?limit=25), /explore/verificationsForLens, the bounty's record page, the
# lens page and the author page. Prints the count of records, then per page requests/s, p50,
# p99, its rate as a ratio of the yardstick's (nginx answering a constant, bench/common.sh) and
# of the JSON answer's (what the page costs beside the same answer as JSON), and the host's
# steal, then the server's RSS.
# Environment: DURATION (per page, default 15s), WARMUP (per page, 3s), CONNECTIONS (32),
# BENCH_DIR (bench-data/), SVC_BIN (a build to measure instead of this checkout's).
set -euo pipefail
DURATION="${DURATION:-15s}"
WARMUP="${WARMUP:-3s}"
CONNECTIONS="${CONNECTIONS:-32}"
source "$(dirname "$0")/common.sh"
bench_args "$@"
need_wrk
build_svc

need_events "$N"
fresh_catalog "$DB_URL" "$N"
trap 'stop_server; stop_yardstick' EXIT
import_catalog "$work/explorer-import.log"
stop_server
start_server "$work/explorer-server.log"

# A field of a JSON answer: `json PATH EXPR`, EXPR a Python expression of the answer `a`.
json() { curl -fs "$url$1" | python3 -c 'import json,sys; a = json.load(sys.stdin); print(eval(sys.argv[1]))' "$2"; }
encode() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$1"; }
page_of() { echo "/at/${1#at://}"; } # an at-uri's page
bounty=$(json '/v1/bounties/open?limit=1' 'a["items"][0]["uri"]')
author=$(json '/v1/bounties/open?limit=1' 'a["items"][0]["author"]')
lens=$(json '/v1/verifications/by-kind?kind=roundtrip-test&limit=1' 'a["items"][0]["record"]["lens"]["uri"]')
records=$(json /v1/stats 'a["total"]')
echo "bounty $bounty; author $author; lens $lens"

pages=(
  "/healthz|/healthz"
  "/ (front page)|/"
  "/explore/openBounties|/explore/openBounties"
  "JSON open bounties l=25|/v1/bounties/open?limit=25"
  "/explore/verifsForLens|/explore/verificationsForLens?lens_uri=$(encode "$lens")"
  "bounty record page|$(page_of "$bounty")"
  "lens page|$(page_of "$lens")"
  "author page|/at/$author"
)
declare -A rates lat50 lat99 steal
for entry in "${pages[@]}"; do
  name="${entry%%|*}" path="${entry#*|}"
  status=$(curl -s -o /dev/null -w '%{http_code}' "$url$path")
  [ "$status" = 200 ] || echo "$path answers $status" >&2
  wrk -t2 -c"$CONNECTIONS" -d"$WARMUP" "$url$path" >/dev/null
  cpu_mark
  out=$(wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency "$url$path")
  steal[$name]=$(stolen_since)
  if grep -q 'Non-2xx' <<<"$out"; then echo "non-2xx answers for $path" >&2; fi
  wrk_figures "$out"
  rates[$name]="$rate" lat50[$name]="$p50" lat99[$name]="$p99"
done

json_rate="${rates[JSON open bounties l=25]}"
printf '\n%d records; wrk -t2 -c%s -d%s, after %s of warm-up per page\n' \
  "$records" "$CONNECTIONS" "$DURATION" "$WARMUP"
printf '%-26s %12s %9s %9s %7s %9s %8s\n' page "requests/s" "p50 ms" "p99 ms" ratio "vs JSON" "steal %"
measure_yardstick
for entry in "${pages[@]}"; do
  name="${entry%%|*}"
  printf '%-26s %12.0f %9s %9s %7s %9.2f %8s\n' "$name" "${rates[$name]}" "${lat50[$name]}" \
    "${lat99[$name]}" "$(of_yardstick "${rates[$name]}")" \
    "$(awk -v a="${rates[$name]}" -v b="$json_rate" 'BEGIN { print a / b }')" "${steal[$name]}"
done
echo "server RSS after the run: $(rss_mb) MB"
