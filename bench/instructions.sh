#!/usr/bin/env bash
# Instructions per uncached request, counted with valgrind's callgrind: repeatable where a
# timing is not (the machines these run on are shared and noisy). On demand, not in CI.
#   bench/instructions.sh [N] [PATH]   N records (default 1,000,000); PATH the request
#                                      (default /v1/bounties/open?limit=100)
# Uses the SQLite catalog bench/run.sh or bench/mix.sh left for N records (imports one if
# there is none), starts the release `svc serve` under callgrind with --cache-mb 0 twice,
# answering 20 warm-up requests and then REQUESTS (1000) more or none, and prints the
# difference per request. Environment: REQUESTS, BENCH_DIR (bench-data/), SVC_BIN.
set -euo pipefail
REQUESTS="${REQUESTS:-1000}"
source "$(dirname "$0")/common.sh"
N="${1:-1000000}"
path="${2:-/v1/bounties/open?limit=100}"
command -v valgrind >/dev/null || {
  echo "installing valgrind (Debian package)" >&2
  if [ "$(id -u)" = 0 ]; then apt-get install -y -q valgrind >/dev/null; else sudo apt-get install -y -q valgrind >/dev/null; fi
}
build_svc

db="$work/catalog-$N.db"
if [ ! -s "$db" ]; then
  need_events "$N"
  fresh_catalog "" "$N"
  import_catalog "$work/instructions-import.log"
  stop_server
fi

# Total instructions of a server that answers the warm-up and then `count` requests.
instructions() { # count
  local out="$work/callgrind.out"
  SVC_LAUNCHER="valgrind --tool=callgrind --callgrind-out-file=$out" \
    start_server "$work/callgrind.log" --cache-mb 0
  ask() { local urls=(); for _ in $(seq 1 "$1"); do urls+=("$url$path"); done; curl -fs "${urls[@]}" >/dev/null; }
  ask 20
  [ "$1" -gt 0 ] && ask "$1"
  stop_server
  awk '/^(summary|totals):/ { print $2; exit }' "$out"
}

base=$(instructions 0)
loaded=$(instructions "$REQUESTS")
echo "$path: $(( (loaded - base) / REQUESTS )) instructions per request (callgrind, $REQUESTS requests, --cache-mb 0, $N records)"
