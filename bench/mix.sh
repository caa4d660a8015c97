#!/usr/bin/env bash
# Mixed-load benchmark, on demand (not in CI).
#   bench/mix.sh [N] [--db URL]   N records, default 1,000,000; --db postgres://... measures the
#                                 PostgreSQL engine (the database is emptied first: its public
#                                 schema is dropped), otherwise a fresh SQLite file
# Imports N generated records (bench/gen_events.py, as bench/run.sh), writes a request mix
# (bench/mix.py: every indexed query kind, many keys drawn with Zipf-like skew, pages of
# 10/25/100, cursors as well as offsets, a tenth at offsets up to 5,000), restarts the server
# with default settings and drives the yardstick (nginx answering a constant, bench/common.sh),
# then the mix, with wrk: the mix's throughput as a ratio of the yardstick's, p50/p99, the
# answer cache's hit rate and RSS. Then, with the cache off, it
# times single requests at deep offsets of the largest key (open bounties) and a cursor at its
# middle, and states what skipping one row costs.
# Environment: DURATION (per wrk run, default 30s), CONNECTIONS (32), MIX_LINES (12000),
# TAKEDOWN_PERCENT (0: with P, every account in 100/P is taken down through the admin method
# before the mix), BENCH_DIR (bench-data/), SVC_BIN (a build to measure instead of this
# checkout's).
set -euo pipefail
DURATION="${DURATION:-30s}"
CONNECTIONS="${CONNECTIONS:-32}"
MIX_LINES="${MIX_LINES:-12000}"
source "$(dirname "$0")/common.sh"
bench_args "$@"
need_wrk
build_svc

need_events "$N"
fresh_catalog "$DB_URL" "$N"
trap 'stop_server; stop_yardstick' EXIT
import_catalog "$work/mix-import.log"
stop_server
if [ "${TAKEDOWN_PERCENT:-0}" != 0 ]; then
  password="$work/mix-admin-password"
  (umask 077 && printf 'bench admin password\n' >"$password")
  start_server "$work/mix-takedowns.log" --admin-password-file "$password"
  python3 - "$events" "$TAKEDOWN_PERCENT" >"$work/mix-takedowns.txt" <<'PY'
import json, sys
seen = {}
for line in open(sys.argv[1]):
    seen.setdefault(json.loads(line).get("did"), None)
dids = [did for did in seen if did]
print("\n".join(dids[::max(1, round(100 / float(sys.argv[2])))]))
PY
  while read -r did; do
    curl -fs -o /dev/null -u "admin:bench admin password" -H 'content-type: application/json' \
      -d "{\"subject\": {\"\$type\": \"com.atproto.admin.defs#repoRef\", \"did\": \"$did\"}, \"takedown\": {\"applied\": true}}" \
      "$url/xrpc/com.atproto.admin.updateSubjectStatus"
  done <"$work/mix-takedowns.txt"
  echo "took down $(wc -l <"$work/mix-takedowns.txt") accounts ($TAKEDOWN_PERCENT%): $(curl -fs "$url/v1/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])') records left in answers"
  stop_server
fi
mix="$work/mix-$N.txt"
python3 "$root/bench/mix.py" "$events" "$mix" --lines "$MIX_LINES" 2>"$work/mix-summary.txt"
head -n1 "$work/mix-summary.txt"

# The answer cache's outcomes so far: "hits built shared".
outcomes() {
  curl -fs "$url/metrics" | awk '
    /^svc_http_answers_total\{outcome="hit"\}/ { h = $2 }
    /^svc_http_answers_total\{outcome="built"\}/ { b = $2 }
    /^svc_http_answers_total\{outcome="shared"\}/ { s = $2 }
    END { printf "%d %d %d\n", h, b, s }'
}

start_server "$work/mix-server.log"
wrk_mix() { MIX_FILE="$mix" wrk -t2 -c"$CONNECTIONS" -d"$1" --latency -s "$root/bench/mix.lua" "$url"; }
# A server that has run a while has its caches warm; so does this one before it is measured.
wrk_mix 10s >/dev/null
printf '\nwith default settings (wrk -t2 -c%s -d%s)\n' "$CONNECTIONS" "$DURATION"
printf '%-26s %12s %9s %9s %7s\n' load "requests/s" "p50 ms" "p99 ms" ratio
measure_yardstick
read -r hits0 built0 shared0 < <(outcomes)
out=$(wrk_mix "$DURATION")
read -r hits1 built1 shared1 < <(outcomes)
wrk_figures "$out"
printf '%-26s %12.0f %9s %9s %7s\n' "mix ($(wc -l <"$mix") requests)" "$rate" "$p50" "$p99" \
  "$(of_yardstick "$rate")"
grep '^mix: ' <<<"$out" || true
awk -v h=$((hits1 - hits0)) -v b=$((built1 - built0)) -v s=$((shared1 - shared0)) \
  'BEGIN { t = h + b + s; printf "answer cache: %.1f%% hits (%d hits, %d built, %d shared)\n", t ? 100 * h / t : 0, h, b, s }'
echo "server RSS after the mix: $(rss_mb) MB"
stop_server

# One request at a time, each the median of 5, with the cache off: what the server spends.
start_server "$work/mix-offsets.log" --cache-mb 0
total=$(curl -fs "$url/v1/bounties/open?limit=1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["total"])')
middle=$((total / 2))
printf '\ndeep pages of /v1/bounties/open (%d open bounties), --cache-mb 0, limit=10\n' "$total"
declare -A took
for offset in 0 1000 10000 100000 200000 "$middle"; do
  [ "$offset" -lt "$total" ] || continue
  took[$offset]=$(median_ms "/v1/bounties/open?limit=10&offset=$offset" 5)
  printf '  offset %-9d %8s ms\n' "$offset" "${took[$offset]}"
done
last_uri=$(curl -fs "$url/v1/bounties/open?limit=1&offset=$middle" | python3 -c 'import json,sys; print(json.load(sys.stdin)["items"][0]["uri"])')
cursor=$(printf 'u:%s' "$last_uri" | base64 -w0 | tr '+/' '-_' | tr -d '=')
printf '  cursor at %-6d %8s ms\n' "$middle" "$(median_ms "/v1/bounties/open?limit=10&cursor=$cursor" 5)"
# Pages past the middle are read from the end, so the middle is the deepest skip there is.
awk -v a="${took[$middle]}" -v b="${took[0]}" -v n="$middle" \
  'BEGIN { printf "skipping costs %.0f ns per row (offset %d against offset 0)\n", (a - b) * 1e6 / n, n }'
echo "server RSS after the deep pages: $(rss_mb) MB"
