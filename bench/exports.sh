#!/usr/bin/env bash
# Whole repositories of hostile shapes, on demand (not in CI).
#   OLD_SVC=<another build> bench/exports.sh
# Writes three repository exports (crates/svc-bench/src/bin/export_bench.rs): 100,000 paths that
# all name one 4 KB record block; 50,000 distinct records of 400 bytes; 2,000,000 paths of
# one tiny block. Each is imported by a fresh `svc serve --import X.car --verify none` on an
# empty SQLite catalog, with this checkout's release build and, when OLD_SVC is set, that
# build side by side. Prints, for each, whether it was refused, the records served, the
# import's time, the server's peak RSS (VmHWM) and the catalog's size. ONLY=<name> runs one.
set -euo pipefail
source "$(dirname "$0")/common.sh"
build_svc
(cd "$root" && cargo build --release -j2 -q -p svc-bench --bin export_bench)
mkdir -p "$work"
exports=(
  "one-block-100k:100000:3900:same"
  "distinct-50k:50000:400:distinct"
  "tiny-2m:2000000:1:same"
)
for spec in "${exports[@]}"; do
  IFS=: read -r name paths bytes shape <<<"$spec"
  car="$work/export-$name.car"
  [ -s "$car" ] || "$target/release/export_bench" "$car" "$paths" "$bytes" "$shape"
done
run_one() { # LABEL BINARY CAR
  local label="$1" binary="$2" car="$3"
  db="$work/exports-$label.db"
  rm -f "$db" "$db"-*
  local log="$work/exports-$label.log"
  local started
  started=$(date +%s.%N)
  svc_bin="$binary" start_server "$log" --verify none --import "$car"
  local took peak served refused size
  took=$(echo "$(date +%s.%N) - $started" | bc)
  peak=$(awk '/VmHWM/ {print int($2/1024)}' "/proc/$pid/status")
  served=$(curl -fs "$url/v1/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["vocabularies"])')
  refused=$(grep -c "import refused" "$log" || true)
  stop_server
  size=$(du -cm "$db"* | tail -1 | cut -f1)
  printf '%-22s %-5s served %7s  refused %s  %6.1f s  peak RSS %5s MB  catalog %5s MB\n' \
    "$(basename "$car" .car)" "$label" "$served" "$refused" "$took" "$peak" "$size"
}
trap stop_server EXIT
for spec in "${exports[@]}"; do
  name="${spec%%:*}"
  [ -n "${ONLY:-}" ] && [ "$name" != "$ONLY" ] && continue
  car="$work/export-$name.car"
  [ -n "${OLD_SVC:-}" ] && run_one old "$OLD_SVC" "$car"
  run_one new "$svc_bin" "$car"
done
