#!/usr/bin/env bash
# The resynchronisation queue's figures (docs/PERFORMANCE.md, "Passing faults"): convergence
# after a directory outage, the verified backfill's rate (beside an older build given as
# OLD_SVC, a binary), and memory with a million repositories queued; on demand, the peak
# memory of 16 large answers read at once (`large`, beside OLD_SVC too).
#   bench/resync.sh                          # all three: 1,000 repositories, 30 s, 10,000, 1,000,000
#   bench/resync.sh --repos 100 --outage 10 outage
#   OLD_SVC=/tmp/svc-old bench/resync.sh backfill
#   OLD_SVC=/tmp/svc-old bench/resync.sh --large-mb 64 large   # SVC_READ_MEMORY_MB applies
set -euo pipefail
source "$(dirname "$0")/common.sh"
build_svc
# The peers (the reference PDS and PLC directory) are started for the parts that use them.
if [ $# -eq 0 ] || [[ " $* " =~ " outage " || " $* " =~ " backfill " ]]; then
  export SVC_PEERS_ENV="$work/resync-peers.json"
  "$root/scripts/peers" stop >/dev/null 2>&1 || true
  "$root/scripts/peers" start >/dev/null
  trap '"$root/scripts/peers" stop >/dev/null 2>&1 || true' EXIT
fi
python3 "$root/bench/resync.py" --svc "$svc_bin" ${OLD_SVC:+--old "$OLD_SVC"} \
  ${SVC_PEERS_ENV:+--peers "$SVC_PEERS_ENV"} --work "$work" "$@"
