#!/usr/bin/env bash
# Map benchmark, on demand (not in CI).
#   bench/map.sh [N] [--db URL]   N generated records, default 1,000,000; --db postgres://...
#                                 measures the PostgreSQL engine (emptied first)
# Imports N generated records (bench/gen_events.py) into a fresh catalog, then, with the
# answer cache off, finds the busiest schema (the centre /map chooses when the whole catalog
# does not fit) and times /map of its neighbourhood with the default hops and schemas, and
# with the most schemas: each RUNS times, median and slowest, with the map's schema and road
# counts. Then the same page with the cache on (built once, then served), the front page
# (charts included) and the busiest lens's page (its verifications by week).
# Environment: RUNS (default 20), BENCH_DIR, SVC_BIN.
set -euo pipefail
RUNS="${RUNS:-20}"
source "$(dirname "$0")/common.sh"
bench_args "$@"
build_svc
need_events "$N"
trap stop_server EXIT

fresh_catalog "$DB_URL" "$N"
import_catalog "$work/map-import.log"
stop_server

# Times one path RUNS times: prints its median and slowest in ms.
time_path() { # PATH
  request_times "$1" "$RUNS" |
    awk '{ t[NR] = $1 } END { printf "median %7.1f ms   slowest %7.1f ms", t[int((NR + 1) / 2)], t[NR] }'
}

# What a map page draws: schemas and roads.
drawn() { # PATH
  local page
  page=$(curl -s "$url$1")
  printf '%s schemas, %s roads' "$(grep -o '<circle ' <<<"$page" | wc -l)" \
    "$(grep -o 'class="road ' <<<"$page" | wc -l)"
}

start_server "$work/map-server.log" --cache-mb 0
busiest=$(curl -s "$url/map" | grep -o 'id="map-summary">[^<]*' | grep -o 'at://[^,]*' | head -n1)
encoded=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$busiest")
echo "busiest schema: $busiest"
printf '\nanswer cache off (%s runs each)\n' "$RUNS"
printf '%-34s %s   (%s)\n' "/map (finds the busiest)" "$(time_path /map)" "$(drawn /map)"
for nodes in 60 300; do
  path="/map?schema=$encoded&hops=2&nodes=$nodes"
  printf '%-34s %s   (%s)\n' "/map busiest, 2 hops, $nodes schemas" "$(time_path "$path")" "$(drawn "$path")"
done
printf '%-34s %s\n' "/ (front page, charts)" "$(time_path /)"
lens=$(python3 - "$events" <<'PY'
import collections, json, sys
counts = collections.Counter()
with open(sys.argv[1]) as f:
    for line in f:
        if '"dev.svc.verification"' in line:
            record = json.loads(line).get("commit", {}).get("record", {})
            counts[record.get("lens", {}).get("uri", "")] += 1
uri, n = counts.most_common(1)[0]
print(uri[len("at://"):], n)
PY
)
read -r lens_path lens_n <<<"$lens"
printf '%-34s %s   (%s verifications)\n' "busiest lens's page" "$(time_path "/at/$lens_path")" "$lens_n"
stop_server

start_server "$work/map-server-cached.log"
path="/map?schema=$encoded&hops=2&nodes=60"
curl -s -o /dev/null "$url$path"
printf '\nanswer cache on\n%-34s %s\n' "/map busiest, 2 hops, 60 schemas" "$(time_path "$path")"
stop_server
