#!/usr/bin/env bash
# Change-stream benchmark, on demand (not in CI).
#   bench/stream.sh [--subscribers 1000] [--stalled 100] [--seconds 30] [--rate 2000]
# Three runs, each on a fresh catalog: a `svc serve` following a Jetstream replay server fed a
# steady live stream of vocabulary creates, with no subscribers to /v1/changes, with
# SUBSCRIBERS (half to one query's answer, half to every change), and with STALLED more that
# never read (crates/svc-bench/src/bin/stream_bench/). Prints the applied rate of each run,
# commit-to-delivery p50/p99, svc's RSS per subscriber, and what svc did with the stalled ones.
set -euo pipefail
source "$(dirname "$0")/common.sh"
build_svc
(cd "$root" && cargo build --release -j2 -q -p svc-bench --bin stream_bench)
# Both ends of every connection are in processes started from here: the benchmark's
# subscribers and svc (which raises its own soft limit, but not past the hard one).
if [ "$(ulimit -n)" -lt 4096 ]; then
  ulimit -n "$(ulimit -Hn)"
fi
cpu_mark
"$target/release/stream_bench" "$svc_bin" "$@"
echo "CPU time taken by the host (steal) during the runs: $(stolen_since)%"
