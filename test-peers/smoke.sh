#!/usr/bin/env bash
# Smoke test of running peers with curl: account, DID via the PLC, a dev.svc.vocab record written
# and read back, listRepos. Reads the JSON line from $SVC_PEERS_ENV (default /tmp/svc-peers.json).
# Usage: scripts/peers start && test-peers/smoke.sh; scripts/peers stop
set -euo pipefail
ENV_FILE="${SVC_PEERS_ENV:-/tmp/svc-peers.json}"
[[ -s "$ENV_FILE" ]] || { echo "smoke: no $ENV_FILE; run scripts/peers start" >&2; exit 1; }

# json FILE-OR-STRING EXPR: evaluate a Python expression over the parsed JSON `j`.
json() { python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(eval(sys.argv[2]))' "$1" "$2"; }
fail() { echo "smoke: FAIL: $*" >&2; exit 1; }

peers="$(cat "$ENV_FILE")"
PDS="$(json "$peers" 'j["pds"]')"
PLC="$(json "$peers" 'j["plc"]')"
handle="${SMOKE_HANDLE:-alice.test}"

post() { curl -sS --fail-with-body -H 'content-type: application/json' "$@"; }

t0=$(date +%s%N)
acct="$(post -d "{\"handle\":\"$handle\",\"email\":\"$handle@example.com\",\"password\":\"hunter2-hunter2\"}" \
  "$PDS/xrpc/com.atproto.server.createAccount")" || fail "createAccount: $acct"
did="$(json "$acct" 'j["did"]')"
jwt="$(json "$acct" 'j["accessJwt"]')"
echo "createAccount: $handle -> $did"

doc="$(curl -sS --fail-with-body "$PLC/$did")" || fail "PLC $did: $doc"
[[ "$(json "$doc" 'j["alsoKnownAs"][0]')" == "at://$handle" ]] || fail "alsoKnownAs: $doc"
[[ "$(json "$doc" '[s["serviceEndpoint"] for s in j["service"] if s["id"]=="#atproto_pds"][0]')" == "$PDS" ]] \
  || fail "PDS endpoint in the DID document: $doc"
echo "PLC: $did -> at://$handle, #atproto_pds $PDS"

rec='{"$type":"dev.svc.vocab","name":"x","world":"open","occurredAt":"2026-01-01T00:00:00Z"}'
created="$(post -H "authorization: Bearer $jwt" \
  -d "{\"repo\":\"$did\",\"collection\":\"dev.svc.vocab\",\"record\":$rec}" \
  "$PDS/xrpc/com.atproto.repo.createRecord")" || fail "createRecord: $created"
uri="$(json "$created" 'j["uri"]')"
rkey="${uri##*/}"
echo "createRecord: $uri ($(json "$created" 'j.get("validationStatus")'))"

got="$(curl -sS --fail-with-body -G "$PDS/xrpc/com.atproto.repo.getRecord" \
  --data-urlencode "repo=$did" --data-urlencode "collection=dev.svc.vocab" --data-urlencode "rkey=$rkey")" \
  || fail "getRecord: $got"
[[ "$(json "$got" 'j["value"]["name"] + "/" + j["value"]["world"]')" == "x/open" ]] || fail "getRecord value: $got"
echo "getRecord: $(json "$got" 'json.dumps(j["value"], sort_keys=True)')"

repos="$(curl -sS --fail-with-body "$PDS/xrpc/com.atproto.sync.listRepos")" || fail "listRepos: $repos"
[[ "$(json "$repos" "any(r['did']=='$did' and r.get('active', True) for r in j['repos'])")" == True ]] \
  || fail "listRepos lacks $did: $repos"
echo "listRepos: $(json "$repos" 'len(j["repos"])') repo(s), $did active"
echo "smoke: ok in $((($(date +%s%N) - t0) / 1000000)) ms"
