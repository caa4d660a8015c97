# Sourced by the benchmark scripts: where the repository and the benchmark data are, and wrk.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${BENCH_DIR:-$root/bench-data}"
mkdir -p "$work"

if ! command -v wrk >/dev/null; then
  echo "installing wrk (Debian package)" >&2
  if [ "$(id -u)" = 0 ]; then apt-get install -y -q wrk >/dev/null; else sudo apt-get install -y -q wrk >/dev/null; fi
fi
