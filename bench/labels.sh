#!/usr/bin/env bash
# Label ingest benchmark, on demand (not in CI).
#   bench/labels.sh [--labels N] [--skyware M] [--storm R [--per-frame K]]
# Defaults: 100,000 labels from the labeler double, none from @skyware/labeler.
# A labeler on loopback holds N signed labels; `svc serve --labeler` reads them into a fresh
# catalog from cursor 0, each signature checked: labels per second, svc's CPU time and peak
# memory. With --skyware M, the same from the test peers' @skyware/labeler (M labels created
# through its control endpoint first; it needs scripts/peers install). With --storm R: 2,000
# labels alternating `!takedown` and its negation on one account of R records, K a frame
# (default 500): svc's CPU time until the last is stored.
set -euo pipefail
source "$(dirname "$0")/common.sh"
# The labelers are on loopback, which svc serve reaches only when allowed.
export SVC_ALLOW_PRIVATE_PEERS=true
build_svc
(cd "$root" && cargo build --release -j2 -q -p svc-bench --bin label_bench)
cpu_mark
"$target/release/label_bench" "$svc_bin" "$work/labels" "$@"
echo "CPU time taken by the host (steal) during the runs: $(stolen_since)%"
