#!/usr/bin/env bash
# The resynchronisation queue's figures (docs/PERFORMANCE.md, "Passing faults"): convergence
# after a directory outage, the verified backfill's rate (beside an older build given as
# OLD_SVC, a binary), and memory with a million repositories queued.
#   bench/resync.sh                          # all three: 1,000 repositories, 30 s, 10,000, 1,000,000
#   bench/resync.sh --repos 100 --outage 10 outage
#   OLD_SVC=/tmp/svc-old bench/resync.sh backfill
set -euo pipefail
source "$(dirname "$0")/common.sh"
build_svc
export SVC_PEERS_ENV="$work/resync-peers.json"
"$root/scripts/peers" stop >/dev/null 2>&1 || true
"$root/scripts/peers" start >/dev/null
trap '"$root/scripts/peers" stop >/dev/null 2>&1 || true' EXIT
python3 "$root/bench/resync.py" --svc "$svc_bin" ${OLD_SVC:+--old "$OLD_SVC"} \
  --peers "$SVC_PEERS_ENV" --work "$work" "$@"
