#!/usr/bin/env bash
# What nginx in front of svc costs, on demand (not in CI).
#   bench/proxy.sh [N] [--db URL]   N records, default 100,000 (bench/run.sh's arguments)
# Imports N generated records into a fresh catalog with the release build and starts nginx
# with deploy/nginx.conf in front of it (its ports substituted, both replicas this one svc).
# Then, in the same run, one after the other:
# 1. cached list answers with wrk (-t2 -cCONNECTIONS): each endpoint direct, then through
#    nginx, plain and gzip accepted: requests/s, p50, p99, and nginx's rate against direct;
# 2. the change stream (crates/svc-bench/src/bin/stream_bench/): SUBSCRIBERS subscribers
#    direct, then through nginx, while the indexer applies RATE live events/s: commit to
#    delivery p50/p99.
# Environment: DURATION (per endpoint, default 10s), CONNECTIONS (32), SUBSCRIBERS (100),
# STREAM_SECONDS (10, the stream's window), RATE (100), SVC_NGINX (nginx's binary), BENCH_DIR.
set -euo pipefail
DURATION="${DURATION:-10s}"
CONNECTIONS="${CONNECTIONS:-32}"
SUBSCRIBERS="${SUBSCRIBERS:-100}"
STREAM_SECONDS="${STREAM_SECONDS:-10}"
RATE="${RATE:-100}"
source "$(dirname "$0")/common.sh"
[ $# -gt 0 ] || set -- 100000
bench_args "$@"
need_wrk
nginx_bin=$("$root/scripts/nginx" path)
[ -x "$nginx_bin" ] || "$root/scripts/nginx" install >/dev/null
build_svc
(cd "$root" && cargo build --release -j2 -q -p svc-bench --bin stream_bench)

need_events "$N"
hot() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$events.hot.json" "$1"; }
requester=$(hot requester_did); framework=$(hot framework)

nginx_dir=$(mktemp -d)
nginx_pid=""
cleanup() {
  [ -n "$nginx_pid" ] && { kill "$nginx_pid" 2>/dev/null; wait "$nginx_pid" 2>/dev/null || true; }
  stop_server
  rm -rf "$nginx_dir"
}
trap cleanup EXIT

fresh_catalog "$DB_URL" "$N"
import_catalog "$work/proxy-import.log"

# nginx as Debian runs it (a worker a core), deploy/nginx.conf in its http block.
start_nginx() { # UPSTREAM (host:port)
  nginx_port=$(free_port)
  sed -e "s/listen 8080;/listen 127.0.0.1:$nginx_port;/" \
    -e "s/server 127.0.0.1:8788 /server $1 /" -e "s/server 127.0.0.1:8789 /server $1 /" \
    "$root/deploy/nginx.conf" >"$nginx_dir/svc.conf"
  cat >"$nginx_dir/nginx.conf" <<CONF
worker_processes auto;
worker_rlimit_nofile 65536;
events { worker_connections 16384; }
http { access_log off; include $nginx_dir/svc.conf; }
CONF
  run_nginx "$nginx_dir"
  nginx_pid=$nginx_started
  nginx_url="http://127.0.0.1:$nginx_port"
  wait_answering "$nginx_url/healthz" "$nginx_pid" "$nginx_dir/error.log"
}
start_nginx "${url#http://}"

measure() { # BASE PATH [wrk arguments...]: prints requests/s, p50 and p99
  local base="$1" path="$2"; shift 2
  local out
  # A short run first fills the answer cache and nginx's upstream connections.
  wrk -t2 -c"$CONNECTIONS" -d2s "$@" "$base$path" >/dev/null
  out=$(wrk -t2 -c"$CONNECTIONS" -d"$DURATION" --latency "$@" "$base$path")
  if grep -q 'Non-2xx' <<<"$out"; then echo "non-2xx answers for $base$path" >&2; fi
  wrk_figures "$out"
  echo "$rate $p50 $p99"
}

lists() { # label [wrk arguments...]
  local label="$1"; shift
  printf '\n%s (wrk -t2 -c%s -d%s %s)\n' "$label" "$CONNECTIONS" "$DURATION" "$*"
  printf '%-26s %10s %8s %8s %10s %8s %8s %7s %8s\n' endpoint "direct/s" "p50 ms" "p99 ms" \
    "nginx/s" "p50 ms" "p99 ms" ratio "steal %"
  for entry in \
    "healthz|/healthz" \
    "bounties by requester|/v1/bounties/by-requester?requester_did=$requester" \
    "adapters by framework|/v1/adapters?framework=$framework" \
    "open bounties limit=100|/v1/bounties/open?limit=100"; do
    local name="${entry%%|*}" path="${entry#*|}" direct proxied
    cpu_mark
    direct=$(measure "$url" "$path" "$@")
    proxied=$(measure "$nginx_url" "$path" "$@")
    read -r d_rate d_p50 d_p99 <<<"$direct"
    read -r n_rate n_p50 n_p99 <<<"$proxied"
    printf '%-26s %10.0f %8s %8s %10.0f %8s %8s %7.2f %8s\n' "$name" "$d_rate" "$d_p50" \
      "$d_p99" "$n_rate" "$n_p50" "$n_p99" \
      "$(awk -v a="$n_rate" -v b="$d_rate" 'BEGIN { print a / b }')" "$(stolen_since)"
  done
}

lists "cached answers, plain"
lists "cached answers, gzip accepted" -H "Accept-Encoding: gzip"
kill "$nginx_pid"; wait "$nginx_pid" 2>/dev/null || true; nginx_pid=""
stop_server

# Both ends of every subscription are in processes started from here.
if [ "$(ulimit -n)" -lt 4096 ]; then
  ulimit -n "$(ulimit -Hn)"
fi
stream() { # label [stream_bench arguments...]
  local label="$1"; shift
  local out="$work/proxy-stream-$label.txt"
  "$target/release/stream_bench" "$svc_bin" --subscribers "$SUBSCRIBERS" --stalled 0 \
    --seconds "$STREAM_SECONDS" --rate "$RATE" "$@" >"$out"
  printf '\nchange stream, %s: %s\n' "$label" "$(grep '^summary:' "$out")"
}
cpu_mark
stream direct
stream nginx --nginx "$nginx_bin"
echo "CPU time taken by the host (steal) during the streams: $(stolen_since)%"
