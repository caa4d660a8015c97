#!/usr/bin/env bash
# Verification benchmark, on demand (not in CI).
#   bench/verify.sh [--repos R] [--commits N] [--frames F] [--memory M] [--memory-base B]
# Defaults: 2,000 repositories, 200,000 commits, 1,000,000 frames, 100,000 against 1,000.
# A quick run: bench/verify.sh --commits 20000 --frames 100000 --memory 10000
# Generates repositories with real K-256 keys and signed commits (kept under bench-data/verify),
# serves their DID documents and their firehose over loopback, and runs `svc serve` with
# `--verify all` and `--verify none`: family commits to queryable, a network-shaped replay in
# frames per second of svc's CPU time, and memory per tracked repository.
set -euo pipefail
source "$(dirname "$0")/common.sh"
# The peers are on loopback, which svc serve reaches only when allowed.
export SVC_ALLOW_PRIVATE_PEERS=true
build_svc
(cd "$root" && cargo build --release -j2 -q -p svc-bench --bin verify_bench)
cpu_mark
"$target/release/verify_bench" "$svc_bin" "$work/verify" "$@"
echo "CPU time taken by the host (steal) during the runs: $(stolen_since)%"
