# Sourced by the benchmark scripts: where the repository and the benchmark data are, wrk, and
# the PostgreSQL database a benchmark runs on.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${BENCH_DIR:-$root/bench-data}"
mkdir -p "$work"

# The arguments of the benchmarks that take them: [N] [--db URL]. Sets N (default 1,000,000)
# and DB_URL (empty: SQLite).
bench_args() {
  N=1000000
  DB_URL=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --db) DB_URL="$2"; shift 2 ;;
      --db=*) DB_URL="${1#--db=}"; shift ;;
      *) N="$1"; shift ;;
    esac
  done
}

need_wrk() {
  if ! command -v wrk >/dev/null; then
    echo "installing wrk (Debian package)" >&2
    if [ "$(id -u)" = 0 ]; then apt-get install -y -q wrk >/dev/null; else sudo apt-get install -y -q wrk >/dev/null; fi
  fi
}

# The benchmark examples run on this database (emptied before each run) and find psql here.
bench_db() {
  export SVC_BENCH_DB="$1"
  SVC_BENCH_PSQL="$("$root/scripts/pg" bin)/psql"
  export SVC_BENCH_PSQL
}

# The generated events of N records (bench/gen_events.py, made once and kept): sets `events`.
need_events() {
  events="$work/events-$1.jsonl"
  if [ ! -s "$events" ] || [ ! -s "$events.hot.json" ]; then
    echo "generating $1 events into $events" >&2
    python3 "$root/bench/gen_events.py" "$1" "$events" 2>/dev/null
  fi
}

# An empty catalog to import into: the PostgreSQL database URL given (its public schema
# dropped), or a fresh SQLite file for N records. Sets `db`.
fresh_catalog() { # URL-or-empty N
  if [ -n "$1" ]; then
    db="$1"
    local psql
    psql="$("$root/scripts/pg" bin)/psql"
    "$psql" -q "$db" -c 'DROP SCHEMA public CASCADE; CREATE SCHEMA public;' >/dev/null
    # What an earlier run left is written out first, so that no run pays for the one before (a
    # role without the right to a checkpoint goes on without one).
    "$psql" -q "$db" -c 'CHECKPOINT' >/dev/null 2>&1 || true
    sync
  else
    db="$work/catalog-$2.db"
    rm -f "$db" "$db-wal" "$db-shm"
  fi
}

# Where cargo builds: CARGO_TARGET_DIR when set, as cargo itself reads it.
target="${CARGO_TARGET_DIR:-$root/target}"

# The svc the benchmarks run: SVC_BIN, a build made elsewhere (to compare two builds side by
# side), or this checkout's release build, made by `build_svc`.
svc_bin="${SVC_BIN:-$target/release/svc}"
build_svc() {
  [ -n "${SVC_BIN:-}" ] || (cd "$root" && cargo build --release -j2 -q -p svc --bin svc)
}

# Starts the release `svc serve` on `db` with no live source, logging to LOG, and waits until
# it is ready: sets `pid` and `url`. The caller kills it (`stop_server`). SVC_LAUNCHER, when
# set, is a command the server runs under (valgrind, for bench/instructions.sh).
start_server() { # LOG [flags...]
  local log="$1"; shift
  # shellcheck disable=SC2086 # the launcher is a command and its arguments
  ${SVC_LAUNCHER:-} "$svc_bin" serve --firehose none --listen 127.0.0.1:0 --db "$db" "$@" 2>"$log" &
  pid=$!
  url=""
  for _ in $(seq 1 600000); do
    url=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$log" | head -n1)
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.05
  done
  wait_answering "$url/readyz" "$pid" "$log" 0.2
}

# Waits until URL answers with a 2xx; if PID ends first, prints LOG and ends the script.
wait_answering() { # URL PID LOG [SECONDS between tries]
  until curl -fs "$1" >/dev/null 2>&1; do
    kill -0 "$2" 2>/dev/null || { cat "$3" >&2; exit 1; }
    sleep "${4:-0.1}"
  done
}

# A free TCP port on loopback.
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# Debian's nginx (installed when missing), run in the foreground on DIR/nginx.conf with its
# error log and pid file in DIR, readable by its workers: sets `nginx_started` to its pid.
run_nginx() { # DIR
  local nginx_bin
  nginx_bin=$("$root/scripts/nginx" path)
  [ -x "$nginx_bin" ] || "$root/scripts/nginx" install >/dev/null
  # Run as root, nginx's workers drop to `nobody`, who must reach its files.
  chmod 755 "$1"
  "$nginx_bin" -p "$1" -c "$1/nginx.conf" -e "$1/error.log" -g "daemon off; pid $1/nginx.pid;" &
  nginx_started=$!
}

stop_server() {
  [ -n "${pid:-}" ] && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
  pid=""
}

# Imports `events` into `db` with a server that keeps running afterwards (LOG holds its log),
# and returns once the import's aftermath (SQLite's checkpoint, the kernel's writeback) is
# over, so that it takes no CPU from the measurements that follow.
import_catalog() { # LOG [flags...]
  local log="$1"; shift
  echo "importing $(wc -l <"$events") lines" >&2
  cpu_mark
  start_server "$log" --import "$events" "$@"
  grep '^import ' "$log" || true
  echo "CPU time taken by the host (steal) during the import: $(stolen_since)%"
  # What follows a bulk load in the background (SQLite's checkpoint, PostgreSQL's vacuum of the
  # records) is waited for, so that the queries are measured on a settled catalog.
  local after='catalog checkpoint.* after the bulk load'
  [[ "$db" == postgres* ]] && after='catalog vacuum.* after the bulk load'
  for _ in $(seq 1 6000); do
    grep -q "$after" "$log" && break
    sleep 0.1
  done
  grep -o "$after.*" "$log" || echo "no checkpoint or vacuum reported" >&2
  sync
}

# The share of CPU time the hypervisor gave to others since `cpu_mark` (steal, in
# /proc/stat), in percent: a figure measured while the host took much of it is not comparable
# with one measured while it took none.
cpu_ticks() { # prints: all CPU ticks so far, and those stolen
  local _ u n s i w q sq st
  read -r _ u n s i w q sq st _ </proc/stat
  echo "$((u + n + s + i + w + q + sq + st)) $st"
}
cpu_mark() { read -r mark_total mark_steal < <(cpu_ticks); }
stolen_since() {
  local total steal
  read -r total steal < <(cpu_ticks)
  awk -v d=$((steal - mark_steal)) -v t=$((total - mark_total)) \
    'BEGIN { printf "%.0f", (t > 0 ? 100 * d / t : 0) }'
}

# Resident memory of the server, in MB.
# Bytes waiting in the kernel send queues of the sockets accepted on PORT, in KB: what the
# server's clients left unread in the kernel (`tx_queue` of /proc/net/tcp and tcp6).
send_queues_kb() { # PORT
  local hex
  hex=$(printf '%04X' "$1")
  awk -v port="$hex" '
    function hex(text,   n, i) { n = 0
      for (i = 1; i <= length(text); i++) n = n * 16 + index("0123456789ABCDEF", substr(text, i, 1)) - 1
      return n }
    FNR > 1 { split($2, local, ":"); split($5, q, ":"); if (local[2] == port) sum += hex(q[1]) }
    END { printf "%d\n", sum / 1024 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null
}

rss_mb() { echo $(( $(ps -o rss= -p "$pid" | tr -d ' ') >> 10 )); }

to_ms() { # wrk latency like 812.00us, 1.23ms, 2.01s
  awk -v v="$1" 'BEGIN { n = v + 0; if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000; printf "%.2f", n }'
}

# wrk's figures of one run (its output in $1): sets `rate`, `p50` and `p99` (ms).
wrk_figures() {
  rate=$(awk '/Requests\/sec/ { print $2 }' <<<"$1")
  p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$1")")
  p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$1")")
}

# The yardstick every throughput ratio is taken against: Debian's nginx (installed when
# missing) answering a constant 16-byte JSON body on loopback, a worker a core, keep-alive on.
# It does not move with svc's changes, and runs on the same cores in the same run. Sets
# `yard_url`; stopped by `stop_yardstick` (also called by `stop_server`'s callers' traps).
start_yardstick() {
  local port
  yard_dir=$(mktemp -d)
  port=$(free_port)
  cat >"$yard_dir/nginx.conf" <<CONF
worker_processes auto;
worker_rlimit_nofile 65536;
events { worker_connections 16384; }
http {
  access_log off;
  keepalive_requests 1000000;
  server {
    listen 127.0.0.1:$port;
    location / { default_type application/json; return 200 '{"status":"ok"}\n'; }
  }
}
CONF
  run_nginx "$yard_dir"
  yard_pid=$nginx_started
  yard_url="http://127.0.0.1:$port/"
  wait_answering "$yard_url" "$yard_pid" "$yard_dir/error.log"
}

stop_yardstick() {
  [ -n "${yard_pid:-}" ] && { kill "$yard_pid" 2>/dev/null; wait "$yard_pid" 2>/dev/null || true; }
  yard_pid=""
  [ -n "${yard_dir:-}" ] && rm -rf "$yard_dir"
  yard_dir=""
}

# The yardstick's throughput with wrk as the figures beside it ask (CONNECTIONS, DURATION):
# sets `yard_rate`, `yard_p50`, `yard_p99` and prints its line of the table, its name WIDTH
# characters wide (default 26).
measure_yardstick() { # [WIDTH]
  local out width="${1:-26}"
  start_yardstick
  out=$(wrk -t2 -c"${CONNECTIONS:-32}" -d"${DURATION:-30s}" --latency "$yard_url")
  stop_yardstick
  wrk_figures "$out"
  yard_rate="$rate" yard_p50="$p50" yard_p99="$p99"
  printf "%-${width}s %12.0f %9s %9s %7.2f\n" "yardstick (nginx constant)" "$yard_rate" "$yard_p50" "$yard_p99" 1
}

# `rate` as a share of the yardstick's.
of_yardstick() { awk -v a="$1" -v b="$yard_rate" 'BEGIN { printf "%.2f", a / b }'; }

# The times of RUNS requests for PATH on the running server (`url`), one at a time, in ms,
# sorted, one a line.
request_times() { # PATH RUNS
  for _ in $(seq 1 "$2"); do
    curl -s -o /dev/null -w '%{time_total}\n' "$url$1"
  done | sort -n | awk '{ printf "%.2f\n", $1 * 1000 }'
}

# The median of RUNS requests for PATH, in ms.
median_ms() { # PATH RUNS
  request_times "$1" "$2" | awk '{ t[NR] = $1 } END { printf "%.2f", t[int((NR + 1) / 2)] }'
}
