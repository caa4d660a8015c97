# Sourced by the benchmark scripts: where the repository and the benchmark data are, wrk, and
# the PostgreSQL database a benchmark runs on.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${BENCH_DIR:-$root/bench-data}"
mkdir -p "$work"

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
