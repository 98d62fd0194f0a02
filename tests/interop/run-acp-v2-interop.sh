#!/bin/sh
# run-acp-v2-interop.sh - the ACP v2 draft against the official ACP
# TypeScript SDK's `experimental/v2` client (sdk_v2_client.mjs, SDK pinned in
# package.json): `acp agent --protocol-v2` directly, behind `acp conductor`,
# and behind `acp conductor` with a proxy (acp proxy trace) in the chain;
# initialize answers 2, a prompt turn streams its text and ends on the idle
# state_update. Also: a v2 client against `acp agent` without the opt-in
# gets protocolVersion 1 (the SDK then refuses it: not a pass).
# Needs ACP_BIN (the built acp) and node; installs the SDK if missing.
# Exit 77 (skipped, with the reason) when node or the SDK cannot be had.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
acp=${ACP_BIN:-$root/build/acp}
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed"; exit 77
fi
if ! "$root/tools/install-peers.sh" >/dev/null 2>&1; then
  echo "SKIP: the ACP TypeScript SDK could not be installed (tools/install-peers.sh)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
ko() { fail=$((fail + 1)); echo "FAIL $1"; shift; for l in "$@"; do echo "     $l"; done; }

run() { # NAME CMD...
  name=$1; shift
  out=$(timeout 60 node "$here/sdk_v2_client.mjs" -- "$@" 2>&1)
  if [ $? -eq 0 ]; then ok "$name"; else ko "$name" "$out"; fi
}
run "SDK v2 client -> acp agent --protocol-v2" "$acp" agent --protocol-v2
run "SDK v2 client -> acp conductor -> acp agent --protocol-v2" \
  "$acp" conductor agent "$acp agent --protocol-v2"
run "SDK v2 client -> acp conductor (proxy trace) -> acp agent --protocol-v2" \
  "$acp" conductor agent "$acp proxy trace --file $work/trace.jsonl" \
  "$acp agent --protocol-v2"
# The proxy saw the v2 traffic as it was: the idle state_update went by.
if grep -q '"state_update"' "$work/trace.jsonl" 2>/dev/null &&
   grep -q '"protocolVersion":2' "$work/trace.jsonl"; then
  ok "the proxy carried the v2 messages"
else
  ko "the proxy carried the v2 messages" "$(head -c 2000 "$work/trace.jsonl" 2>&1)"
fi
out=$(timeout 60 node "$here/sdk_v2_client.mjs" -- "$acp" agent 2>&1)
case $out in
  *'"protocolVersion":null'*|*'"protocolVersion":1'*) ok "acp agent without --protocol-v2 does not answer 2 (the SDK v2 client refuses its v1 answer)" ;;
  *) ko "acp agent without --protocol-v2 does not answer 2" "$out" ;;
esac
echo "acp v2 interop: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
