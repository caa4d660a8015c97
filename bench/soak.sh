#!/usr/bin/env bash
# Soak benchmark, on demand (not in CI).
#   bench/soak.sh [MINUTES] [RATE]      default 10 minutes, 2500 live events/s
# A fresh `svc serve` imports a base catalog (BASE events, default 200,000), then follows a
# Jetstream replay server fed RATE events/s while wrk sends a mixed query load (bench/mix.py,
# bench/mix.lua) at CONNECTIONS (64) for MINUTES; crates/svc-bench/src/bin/soak_bench/ measures
# /healthz, RSS and the applied rate per minute and checks the catalog at the end. Exits
# non-zero when a criterion fails, naming it.
# Environment: BASE, CONNECTIONS, MIX_LINES (100000), BENCH_DIR (bench-data/).
set -euo pipefail
MINUTES="${1:-10}"
RATE="${2:-2500}"
BASE="${BASE:-200000}"
CONNECTIONS="${CONNECTIONS:-64}"
MIX_LINES="${MIX_LINES:-100000}"
source "$(dirname "$0")/common.sh"
need_wrk

# The base catalog, then the live stream: the lines after it.
need=$((BASE + RATE * 60 * MINUTES))
# gen_events.py writes the same first lines for any N (same seed), so a larger file made by
# another benchmark serves as well: take the smallest that is large enough.
events=""
best=0
for file in "$work"/events-*.jsonl; do
  [ -s "$file" ] || continue
  n="${file##*/events-}"; n="${n%.jsonl}"
  [[ "$n" =~ ^[0-9]+$ ]] || continue
  if [ "$n" -ge "$need" ] && { [ -z "$events" ] || [ "$n" -lt "$best" ]; }; then
    events="$file"; best="$n"
  fi
done
if [ -n "$events" ] && [ "$(wc -l <"$events")" -lt "$need" ]; then
  echo "$events is shorter than its name says (an interrupted generation?); generating again" >&2
  events=""
fi
if [ -z "$events" ]; then
  events="$work/events-$need.jsonl"
  echo "generating $need events into $events" >&2
  python3 "$root/bench/gen_events.py" "$need" "$events" 2>/dev/null
fi
base="$work/soak-base-$BASE.jsonl"
head -n "$BASE" "$events" >"$base"
mix="$work/mix-soak.txt"
python3 "$root/bench/mix.py" "$base" "$mix" --lines "$MIX_LINES"

(cd "$root" && cargo build --release -j2 -q -p svc --bin svc -p svc-bench --bin soak_bench)
exec "$root/target/release/soak_bench" \
  --svc "$root/target/release/svc" --base "$base" --events "$events" --skip "$BASE" \
  --mix "$mix" --dir "$work" --minutes "$MINUTES" --rate "$RATE" --connections "$CONNECTIONS" \
  --script "$root/bench/mix.lua"
